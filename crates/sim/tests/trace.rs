//! Trace replay (`--workload trace`), and what it rests on: processes started
//! with a traced program's image (`Sim::spawn_with`) and mappings placed at the
//! traced program's own addresses (`Sys::MmapFixed`).

use crate::common::{self, config};

use tlbkit_policy::asid::FreebsdEpoch;
use tlbkit_sim::program::{Op, Program, Region, Sys, USER_VA_END};
use tlbkit_sim::run::{run, RunSpec};
use tlbkit_sim::sim::Sim;
use tlbkit_sim::Error;

/// The fixture's trace: `crates/lab/tests/data/tiny.lackey` and `tiny.strace`, imported.
const TINY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.trace");

fn spec(machine: &str, cpus: usize, policy: &str, sets: &[&str]) -> RunSpec {
    let sets = sets.iter().map(|s| s.to_string()).chain([format!("file={TINY}")]);
    RunSpec { seed: 7, ..common::spec(machine, cpus, policy, "trace", sets) }
}

#[test]
fn the_replay_makes_the_traced_calls_and_the_barriers_pipe_calls() {
    let out = run(&spec("cortex-a72", 2, "arm64-linux", &[])).unwrap();
    assert_eq!(out.violations_total, 0, "{:#?}", out.violations);
    // Kept calls: 4 mmap, 2 munmap, 2 mprotect, 2 madvise, a clone and a fork
    // (12). The two threads' semaphores: 2 pipes. Synchronisation: the main
    // thread arrives and waits three times (6) and collects one arrival (1);
    // the thread waits for one arrival and wakes the main thread three times
    // (6) and arrives once as it exits (1). 12 + 2 + 14 = 28.
    assert_eq!(out.metrics.syscalls, 28);
    // One fault per page touched (five image pages, four of the first mapping,
    // the thread's stack page and its two pages) and the copy-on-write of the
    // stack page the main thread writes after its fork.
    assert_eq!(out.metrics.mmu.page_faults, 13, "{:?}", out.metrics);
    assert!(out.result["run_us"] > 0.0);
    // The instructions are the time between references: at 1000 cycles each,
    // the main thread's alone make the run that much longer.
    let slow = run(&spec("cortex-a72", 2, "arm64-linux", &["instr_cycles=1000"])).unwrap();
    let trace = tlbkit_sim::trace::Trace::read_file(std::path::Path::new(TINY)).unwrap();
    let main_instrs: u64 = trace.threads[0].records.iter().map(|r| r.instrs).sum();
    let longer =
        (slow.result["run_us"] - out.result["run_us"]) * 1000.0 * tlbkit_sim::preset::named("cortex-a72").freq_ghz;
    assert!(longer >= (main_instrs * 999) as f64, "{longer} cycles longer; main thread: {main_instrs} instructions");
}

#[test]
fn trace_needs_a_file_and_a_readable_one() {
    let mut s = spec("cortex-a72", 1, "arm64-linux", &[]);
    s.sets.clear();
    let e = run(&s).unwrap_err();
    assert!(matches!(e, tlbkit_sim::Error::NeedsText { key: "file", .. }), "{e:?}");
    assert!(e.to_string().contains("workload trace needs set file="), "{e}");
    s.sets = vec!["file=/no/such/file.trace".into()];
    let e = run(&s).unwrap_err();
    assert!(e.to_string().starts_with("/no/such/file.trace: "), "{e}");
    s.sets = vec![concat!("file=", env!("CARGO_MANIFEST_DIR"), "/Cargo.toml").into()];
    let e = run(&s).unwrap_err();
    assert!(e.to_string().contains("not a tlbkit trace"), "{e}");
}

/// The image region every test process starts with: 4 writable pages.
const IMAGE: Region = Region { va: 0x5555_0000_0000, pages: 4, write: true };

/// Runs `ops` (the result of each operation is recorded) in a process started
/// with [`IMAGE`]; returns the finished simulator and the results.
fn run_ops(ops: Vec<Op>) -> (Sim, Vec<u64>) {
    struct Script(Vec<Op>, std::rc::Rc<std::cell::RefCell<Vec<u64>>>, bool);
    impl Program for Script {
        fn next(&mut self, ret: u64) -> Op {
            if self.2 {
                self.1.borrow_mut().push(ret);
            }
            self.2 = true;
            self.0.pop().unwrap_or(Op::Exit)
        }
    }
    let rets = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let mut ops = ops;
    ops.reverse();
    let mut sim = Sim::new(config(1, 3, true), FreebsdEpoch::new(1, 16, 16));
    sim.spawn_with(Box::new(Script(ops, rets.clone(), false)), &[IMAGE]).unwrap();
    sim.run();
    let rets = rets.borrow().clone();
    (sim, rets)
}

#[test]
fn spawn_with_maps_the_image_and_nothing_else() {
    let (sim, _) = run_ops(vec![Op::Touch { va: IMAGE.va, pages: 4, write: true }]);
    assert_eq!(sim.error, None);
    assert_eq!(sim.stats.mmu.page_faults, 4);
    // The standard text is not mapped in such a process.
    let (sim, _) = run_ops(vec![Op::Touch { va: tlbkit_sim::program::TEXT_VA, pages: 1, write: false }]);
    assert!(sim.error.as_deref().unwrap().starts_with("segmentation fault"), "{:?}", sim.error);
}

/// A program that exits at once.
struct Exit;

impl Program for Exit {
    fn next(&mut self, _ret: u64) -> Op {
        Op::Exit
    }
}

#[test]
fn spawn_with_rejects_overlapping_and_misplaced_regions() {
    let mut sim = Sim::new(config(1, 3, true), FreebsdEpoch::new(1, 16, 16));
    let overlap = [IMAGE, Region { va: IMAGE.va + 4096, pages: 1, write: false }];
    let e = sim.spawn_with(Box::new(Exit), &overlap).unwrap_err();
    assert!(matches!(e, Error::ImageOverlap { first, second } if first == IMAGE.va && second == IMAGE.va + 4096));
    assert!(e.to_string().ends_with("overlap"), "{e}");
    let high = [Region { va: USER_VA_END - 4096, pages: 2, write: false }];
    let e = sim.spawn_with(Box::new(Exit), &high).unwrap_err();
    assert!(matches!(e, Error::ImageRegion { va, pages: 2 } if va == USER_VA_END - 4096), "{e:?}");
    assert!(e.to_string().contains("below"), "{e}");
}

#[test]
fn mmap_fixed_replaces_present_pages_with_a_flush_of_what_it_zapped() {
    let va = IMAGE.va;
    let (sim, rets) = run_ops(vec![
        Op::Touch { va, pages: 4, write: true },
        // Replaces pages 1 and 2, both present: they are zapped and flushed.
        Op::Sys(Sys::MmapFixed { va: va + 4096, pages: 2, write: false }),
        Op::Touch { va: va + 4096, pages: 2, write: false },
        // Replaces what it has just mapped and nobody wrote: nothing to flush.
        Op::Sys(Sys::MmapFixed { va: va + 0x10_0000, pages: 8, write: true }),
        Op::Sys(Sys::MmapFixed { va: va + 0x10_0000, pages: 8, write: true }),
    ]);
    assert_eq!(sim.error, None);
    assert!(sim.oracle.violations.is_empty(), "{:#?}", sim.oracle.violations);
    assert_eq!(rets[1], va + 4096, "returns the address it mapped");
    // Two new faults: the replaced pages are fresh.
    assert_eq!(sim.stats.mmu.page_faults, 4 + 2);
    let fixed: Vec<_> = sim.oracle.obligations.iter().filter(|o| o.change == "mmap-fixed").collect();
    assert_eq!(fixed.len(), 1, "{fixed:?}");
    assert_eq!((fixed[0].pages, fixed[0].flush), (2, "flush_range"));
    assert!(fixed[0].discharged.is_some());
}

#[test]
fn mmap_fixed_mapping_is_read_only_when_asked_and_bad_addresses_are_errors() {
    let (sim, _) = run_ops(vec![
        Op::Sys(Sys::MmapFixed { va: 0x7000_0000, pages: 1, write: false }),
        Op::Touch { va: 0x7000_0000, pages: 1, write: true },
    ]);
    assert!(sim.error.as_deref().unwrap().contains("write to read-only"), "{:?}", sim.error);
    let (sim, _) = run_ops(vec![Op::Sys(Sys::MmapFixed { va: 0x7000_0010, pages: 1, write: true })]);
    assert!(sim.error.as_deref().unwrap().contains("not page-aligned"), "{:?}", sim.error);
}
