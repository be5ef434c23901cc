//! The origin workloads run cleanly on every policy, and the system calls they
//! rest on (`madvise`, `execve`, `clone`, the kernel map cycle) behave and are
//! judged by the oracle.

use crate::common::{config, run_alone, Flush, MapThen, Skips};

use tlbkit_policy::asid::FreebsdEpoch;
use tlbkit_policy::MmId;
use tlbkit_sim::program::{Op, Program, Sys, KMAP_SLOTS, STACK_VA, TEXT_VA};
use tlbkit_sim::run::{run, RunSpec};
use tlbkit_sim::sim::Sim;
use tlbkit_sim::workload::{WorkloadDef, WORKLOADS};

/// Each new workload with parameters small enough for a debug build.
const SMALL: &[(&str, &[&str])] = &[
    ("mprotect_threaded", &["iters=1000", "pages=3"]),
    ("tcmalloc_frag", &["allocs=1000", "touch_pages=3"]),
    ("sort_compute", &["loops=8", "runs=6", "heap_pages=8", "compute_us=20"]),
    ("fileserver", &["ops=300", "pages=4", "user_pages=2"]),
    (
        "buildkernel",
        &[
            "jobs=6",
            "units=4",
            "compute_ms=1",
            "slices=4",
            "text_pages=512",
            "text_ws=32",
            "heap_pages=192",
            "heap_ws=64",
        ],
    ),
];

/// The policies the workloads must stay clean under, with their machines.
const POLICIES: &[(&str, &str)] = &[
    ("cortex-a72", "arm64-noasid"),
    ("cortex-a72", "arm64-freebsd-asid"),
    ("cortex-a72", "arm64-linux"),
    ("skylake", "x86-linux-pcid"),
];

fn spec(machine: &str, policy: &str, workload: &str, cpus: usize, sets: &[&str]) -> RunSpec {
    let mut sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    sets.push("migration=on".into());
    sets.push("spec_rate=0.2".into());
    // More CPUs than the preset's cores: a larger machine of its sockets.
    let preset = tlbkit_sim::preset::by_name(machine).expect("a preset");
    sets.extend(tlbkit_sim::run::sockets_for(&preset, cpus));
    RunSpec {
        machine: machine.into(),
        cpus,
        policy: policy.into(),
        workload: workload.into(),
        sets,
        seed: 5,
        strict: true,
    }
}

#[test]
fn every_seed_workload_is_clean_under_strict_with_migration_on_every_policy() {
    for &(workload, sets) in SMALL {
        for &(machine, policy) in POLICIES {
            for cpus in [2, 4] {
                let s = spec(machine, policy, workload, cpus, sets);
                let out = run(&s).unwrap_or_else(|e| panic!("{}: {e}", s.command()));
                assert_eq!(out.violations_total, 0, "{}: {:#?}", s.command(), out.violations);
                let headline = WORKLOADS.iter().find(|w| w.name == workload).unwrap().results[0];
                let v = out.result[headline];
                assert!(v.is_finite() && v > 0.0, "{}: {headline} = {v}", s.command());
            }
        }
    }
}

#[test]
fn sort_compute_rolls_eight_bit_asids_over_cleanly_even_strict() {
    // Linux never frees an ASID, so 320 short-lived sorts roll it over; FreeBSD
    // frees them, so it needs more than 254 processes alive at once: long sorts.
    let sizes = [
        ("arm64-linux", ["loops=8", "runs=40", "compute_us=5"]),
        ("arm64-freebsd-asid", ["loops=150", "runs=1", "compute_us=20000"]),
    ];
    for (policy, sizes) in sizes {
        let sets = [sizes[0], sizes[1], sizes[2], "heap_pages=4", "asid_bits=8"];
        let s = spec("cortex-a72", policy, "sort_compute", 4, &sets);
        let out = run(&s).unwrap();
        assert!(out.metrics.asid_rollovers > 0, "{}: no rollover", s.command());
        assert_eq!(out.violations_total, 0, "{}: {:#?}", s.command(), out.violations);
    }
}

#[test]
fn fileserver_reports_ipi_handler_split_on_x86_and_zero_without_shootdown_phases() {
    let s = spec("skylake", "x86-linux-pcid", "fileserver", 4, &["ops=10", "pages=4"]);
    let out = run(&s).unwrap();
    let share = out.result["invalidating_share"];
    assert!(share > 0.0 && share < 1.0, "{share}");
    // No policy reports shootdown phases yet: the mean is 0, not a division by zero.
    assert_eq!(out.metrics.ipi.shootdowns, 0);
    assert_eq!(out.result["shootdown_us"], 0.0);
    let s = spec("cortex-a72", "arm64-linux", "fileserver", 4, &["ops=10", "pages=4"]);
    let out = run(&s).unwrap();
    // Broadcast TLBIs, no IPIs: nothing to split.
    assert_eq!(out.result["invalidating_share"], 0.0);
    assert!(out.metrics.broadcast_invalidations >= 4 * 10 * 4);
}

#[test]
fn one_copy_per_cpu_for_the_per_cpu_workloads() {
    for workload in ["mprotect_threaded", "tcmalloc_frag"] {
        let one =
            run(&spec("cortex-a72", "arm64-linux", workload, 2, SMALL.iter().find(|w| w.0 == workload).unwrap().1))
                .unwrap();
        let two =
            run(&spec("cortex-a72", "arm64-linux", workload, 4, SMALL.iter().find(|w| w.0 == workload).unwrap().1))
                .unwrap();
        assert_eq!(two.metrics.syscalls, 2 * one.metrics.syscalls, "{workload}");
    }
}

/// Maps 4 pages, writes them, `madvise(DONTNEED)`s them, then reads them back.
fn write_advise_read() -> Box<MapThen> {
    MapThen::new(4, |va| {
        vec![
            Op::Mark("advised"),
            Op::Sys(Sys::Madvise { va, pages: 4 }),
            Op::Touch { va, pages: 4, write: false },
            Op::Mark("reread"),
        ]
    })
}

#[test]
fn madvise_dontneed_keeps_the_mapping_and_faults_in_fresh_pages() {
    let sim = run_alone(config(1, 11, true), FreebsdEpoch::new(1, 16, 16), write_advise_read());
    assert!(sim.error.is_none(), "{:?}", sim.error);
    assert!(sim.oracle.violations.is_empty(), "{:#?}", sim.oracle.violations);
    let (before, after) = (sim.mark_stats("advised").unwrap(), sim.mark_stats("reread").unwrap());
    // Every page faults again: its PTE was zapped, its frame freed, the VMA kept.
    assert_eq!(after.mmu.page_faults - before.mmu.page_faults, 4);
    let o = sim.oracle.obligations.iter().find(|o| o.change == "madvise").expect("madvise opened an obligation");
    assert_eq!((o.pages, o.flush), (4, "flush_range"));
    assert!(o.discharged.is_some());
}

/// Advises memory it never touched: nothing is zapped, so nothing is flushed.
struct AdviseUntouched(u32, u64);

impl Program for AdviseUntouched {
    fn next(&mut self, ret: u64) -> Op {
        self.0 += 1;
        match self.0 {
            1 => Op::Sys(Sys::Mmap { pages: 1024, write: true }),
            2 => {
                self.1 = ret;
                Op::Touch { va: self.1 + 100 * 4096, pages: 3, write: true }
            }
            3 => Op::Sys(Sys::Madvise { va: self.1, pages: 1024 }),
            4 => Op::Sys(Sys::Madvise { va: self.1, pages: 1024 }),
            _ => Op::Exit,
        }
    }
}

#[test]
fn madvise_flushes_only_the_pages_it_zapped() {
    let sim = run_alone(config(1, 11, true), FreebsdEpoch::new(1, 16, 16), Box::new(AdviseUntouched(0, 0)));
    assert!(sim.error.is_none(), "{:?}", sim.error);
    let advised: Vec<_> = sim.oracle.obligations.iter().filter(|o| o.change == "madvise").collect();
    // The first call zaps the three touched pages; the second finds none.
    assert_eq!(advised.len(), 1);
    assert_eq!(advised[0].pages, 3);
}

#[test]
fn skipped_flush_after_madvise_is_caught_as_stale_use() {
    let sim = run_alone(config(1, 11, true), Skips(FreebsdEpoch::new(1, 16, 16), Flush::Range), write_advise_read());
    let v = &sim.oracle.violations;
    assert!(!v.is_empty());
    // Strict mode sees the stale entries held at the discharge; the read then uses them.
    assert!(v.iter().any(|x| x.property == "no_stale_use"), "{v:#?}");
    assert!(v.iter().all(|x| x.change.as_deref().unwrap().starts_with("madvise of 4 page(s)")), "{v:#?}");
    assert!(v.iter().all(|x| x.flush.as_deref().unwrap().starts_with("flush_range returned")), "{v:#?}");
}

/// Maps and writes a page, `execve`s, uses the new image, then touches the old page.
fn exec_then_touch_old() -> Box<MapThen> {
    MapThen::new(1, |va| {
        vec![
            Op::Touch { va: STACK_VA, pages: 1, write: true },
            Op::Sys(Sys::Execve),
            Op::Touch { va: TEXT_VA, pages: 2, write: false },
            Op::Touch { va: STACK_VA, pages: 1, write: true },
            Op::Mark("new image"),
            Op::Touch { va, pages: 1, write: false },
        ]
    })
}

#[test]
fn execve_replaces_the_address_space_and_keeps_the_thread() {
    let mut sim = Sim::new(config(1, 11, true), FreebsdEpoch::new(1, 16, 16));
    sim.spawn(exec_then_touch_old()).unwrap();
    let mut seen: Vec<MmId> = Vec::new();
    while sim.step() {
        let mm = sim.loaded_mm(0);
        if mm != MmId::KERNEL && seen.last() != Some(&mm) {
            seen.push(mm);
        }
    }
    // One thread ran in two address spaces, the second one after the exec.
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_ne!(seen[0], seen[1]);
    assert!(sim.mark("new image").is_some());
    // The old mapping went with the old address space.
    let e = sim.error.as_deref().unwrap();
    assert!(e.starts_with("segmentation fault") && e.contains("is not mapped"), "{e}");
    let o = sim.oracle.obligations.iter().find(|o| o.change == "execve").expect("execve tore the old one down");
    assert_eq!(o.flush, "flush_mm");
    assert!(o.discharged.is_some());
    assert!(sim.oracle.violations.is_empty(), "{:#?}", sim.oracle.violations);
}

/// Creates a thread that writes the caller's buffer and wakes it; then exits.
struct Parent(u32, u64, u32);

/// The thread: writes the shared buffer, wakes the parent, exits.
struct Child(u32, u64, u32);

impl Program for Parent {
    fn next(&mut self, ret: u64) -> Op {
        self.0 += 1;
        match self.0 {
            1 => Op::Sys(Sys::Mmap { pages: 2, write: true }),
            2 => {
                self.1 = ret;
                Op::Sys(Sys::Pipe)
            }
            3 => {
                self.2 = ret as u32;
                Op::Sys(Sys::Clone(Box::new(Child(0, self.1, self.2))))
            }
            4 => Op::Sys(Sys::PipeRead(self.2)),
            // The thread's writes are in this address space: no fault, no copy.
            5 => Op::Mark("joined"),
            6 => Op::Touch { va: self.1, pages: 2, write: true },
            7 => Op::Mark("touched"),
            _ => Op::Exit,
        }
    }
}

impl Program for Child {
    fn next(&mut self, _ret: u64) -> Op {
        self.0 += 1;
        match self.0 {
            1 => Op::Touch { va: self.1, pages: 2, write: true },
            2 => Op::Sys(Sys::PipeWrite(self.2)),
            _ => Op::Exit,
        }
    }
}

#[test]
fn clone_shares_the_address_space_and_lands_on_an_idle_cpu() {
    let mut sim = Sim::new(config(2, 11, true), FreebsdEpoch::new(2, 16, 16));
    sim.spawn(Box::new(Parent(0, 0, 0))).unwrap();
    let (mut parent_mm, mut child_ran) = (None, false);
    while sim.step() {
        if parent_mm.is_none() && sim.loaded_mm(0) != MmId::KERNEL {
            parent_mm = Some(sim.loaded_mm(0));
        }
        child_ran |= parent_mm.is_some() && Some(sim.loaded_mm(1)) == parent_mm;
    }
    assert!(sim.error.is_none(), "{:?}", sim.error);
    assert!(sim.oracle.violations.is_empty(), "{:#?}", sim.oracle.violations);
    assert!(child_ran, "the thread should run on the other, idle CPU, in the parent's address space");
    let (j, t) = (sim.mark_stats("joined").unwrap(), sim.mark_stats("touched").unwrap());
    assert_eq!(t.mmu.page_faults, j.mmu.page_faults, "the thread's pages are the parent's");
    assert_eq!(sim.live_threads(), 0);
}

/// A kernel thread running `.0` kernel map cycles of `.1` pages.
struct KernelCycles(u64, u64);

impl Program for KernelCycles {
    fn next(&mut self, _ret: u64) -> Op {
        if self.0 == 0 {
            return Op::Exit;
        }
        self.0 -= 1;
        Op::Sys(Sys::KernelMapCycle { pages: self.1 })
    }
}

#[test]
fn kernel_map_cycles_are_clean_and_a_skipped_kernel_flush_is_caught_on_reuse() {
    let cycles = KMAP_SLOTS + 2;
    let mut sim = Sim::new(config(2, 11, true), FreebsdEpoch::new(2, 16, 16));
    sim.spawn_kernel_thread(Box::new(KernelCycles(cycles, 2)), 0);
    sim.run();
    assert!(sim.error.is_none(), "{:?}", sim.error);
    assert!(sim.oracle.violations.is_empty(), "{:#?}", sim.oracle.violations);
    let n = sim.oracle.obligations.iter().filter(|o| o.flush == "flush_kernel_range").count();
    assert_eq!(n as u64, cycles);
    assert!(sim.counters().broadcast_invalidations >= 2 * cycles);

    // Strict mode flags the entry each skipped flush leaves held.
    let mut sim = Sim::new(config(2, 11, true), Skips(FreebsdEpoch::new(2, 16, 16), Flush::Kernel));
    sim.spawn_kernel_thread(Box::new(KernelCycles(2, 2)), 0);
    sim.run();
    let v = &sim.oracle.violations;
    assert!(!v.is_empty() && v.iter().all(|x| x.property == "no_stale_held"), "{v:#?}");
    assert!(v[0].change.as_deref().unwrap().starts_with("kmap-unmap of 2 page(s)"), "{:?}", v[0]);
    assert!(v[0].flush.as_deref().unwrap().starts_with("flush_kernel_range returned"), "{:?}", v[0]);

    // Without strict mode: when the pool comes round to the first slot again, the
    // copy writes through the entry left from the first cycle, to a freed frame.
    let mut cfg = config(1, 11, true);
    cfg.strict = false;
    let mut sim = Sim::new(cfg, Skips(FreebsdEpoch::new(1, 16, 16), Flush::Kernel));
    sim.spawn_kernel_thread(Box::new(KernelCycles(cycles, 1)), 0);
    sim.run();
    let v = &sim.oracle.violations;
    assert_eq!(v.len(), 2, "{v:#?}");
    assert!(v.iter().all(|x| x.property == "no_stale_use"), "{v:#?}");
    assert!(v[0].change.as_deref().unwrap().starts_with("kmap-unmap of 1 page(s)"), "{:?}", v[0]);
}

#[test]
fn mprotect_threaded_broadcasts_one_whole_asid_flush_per_call_until_skip_broadcast_keeps_it_local() {
    // 600 pages is more than arm64's MAX_TLBI_OPS (512): each call's flush is one
    // TLBI ASIDE1IS. The sleeping second thread leaves the mm active on one CPU,
    // so origin 001's check answers LOCAL.
    let sets = ["iters=20", "pages=600"];
    let calls = 4 * 2 * 20;
    let base = run(&spec("emag", "arm64-linux", "mprotect_threaded", 4, &sets)).unwrap();
    assert_eq!(base.violations_total, 0);
    assert!(base.metrics.broadcast_invalidations >= calls, "{:?}", base.metrics);
    assert!(base.metrics.full_flushes >= calls, "{:?}", base.metrics);
    let skip = run(&spec("emag", "arm64-linux-skipbcast", "mprotect_threaded", 4, &sets)).unwrap();
    assert_eq!(skip.violations_total, 0);
    assert!(skip.metrics.local_invalidations >= calls, "{:?}", skip.metrics);
    assert!(skip.metrics.broadcast_invalidations * 10 < calls, "{:?}", skip.metrics);
    assert!(skip.result["elapsed_s"] < base.result["elapsed_s"]);
}

#[test]
fn mprotect_upgrade_flushes_the_range_when_pages_are_present_and_not_otherwise() {
    // Linux's change_protection flushes whenever it rewrote a present PTE,
    // upgrade or not (three by-VA TLBIs per call here); with nothing present
    // there is nothing to flush.
    let broadcasts = |touch: bool, protect: bool| {
        let sim = run_alone(
            config(1, 1, true),
            tlbkit_policy::asid::LinuxArm64::new(1, 4, 16, false).unwrap(),
            Box::new(Protect { step: 0, buf: 0, touch, protect }),
        );
        assert_eq!(sim.error, None);
        sim.counters().broadcast_invalidations
    };
    assert_eq!(broadcasts(true, true) - broadcasts(true, false), 2 * 3);
    assert_eq!(broadcasts(false, true), broadcasts(false, false));
}

/// Maps 3 pages, writes them if `touch`, then, if `protect`, `mprotect`s them
/// read-only and back.
struct Protect {
    step: u32,
    buf: u64,
    touch: bool,
    protect: bool,
}

impl Program for Protect {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        match self.step {
            1 => Op::Sys(Sys::Mmap { pages: 3, write: true }),
            2 => {
                self.buf = ret;
                let pages = if self.touch { 3 } else { 0 };
                Op::Touch { va: self.buf, pages, write: true }
            }
            3 if self.protect => Op::Sys(Sys::Mprotect { va: self.buf, pages: 3, write: false }),
            4 if self.protect => Op::Sys(Sys::Mprotect { va: self.buf, pages: 3, write: true }),
            _ => Op::Exit,
        }
    }
}

/// Returns the parameters of workload `name` at their defaults, with `set`.
fn defaults(name: &str, set: &[(&str, f64)]) -> tlbkit_sim::workload::Params {
    let def = tlbkit_sim::workload::by_name(name).unwrap();
    let mut p: tlbkit_sim::workload::Params = def.params.iter().map(|d| (d.key.to_string(), d.default)).collect();
    p.extend(set.iter().map(|&(k, v)| (k.to_string(), v)));
    p
}

#[test]
fn a_workload_that_cannot_start_or_measure_says_why_as_data() {
    use tlbkit_sim::workload::{self, Phase};
    use tlbkit_sim::Error;
    let mut sim = Sim::new(config(1, 11, true), FreebsdEpoch::new(1, 16, 16));
    let e = workload::setup("nope", &defaults("lat_ctx", &[]), &mut sim, Phase::Main).unwrap_err();
    assert!(matches!(&e, Error::UnknownWorkload { name, .. } if name == "nope"), "{e:?}");
    assert!(e.to_string().starts_with("unknown workload 'nope'; valid workloads: lat_ctx, pingpong"), "{e}");
    // A value in the parameter's range that the workload still cannot use.
    let p = defaults("stress_ng_tlb_shootdown", &[("pages", 3.0)]);
    let e = workload::setup("stress_ng_tlb_shootdown", &p, &mut sim, Phase::Main).unwrap_err();
    assert!(matches!(&e, Error::BadParam { key: "pages", value, valid: "a power of two", .. } if value == "3"));
    assert_eq!(e.to_string(), "stress_ng_tlb_shootdown: pages=3 is not a power of two");
    let p = defaults("exit_teardown", &[("file_pages", 4.0), ("dirty_pages", 5.0)]);
    let e = workload::setup("exit_teardown", &p, &mut sim, Phase::Main).unwrap_err();
    assert!(matches!(&e, Error::ParamExceeds { key: "dirty_pages", limit_key: "file_pages", .. }), "{e:?}");
    assert_eq!(e.to_string(), "exit_teardown: dirty_pages=5 exceeds file_pages=4");
    // A run that recorded nothing has no measurement.
    let e = workload::result("lat_ctx", &defaults("lat_ctx", &[]), &sim, None).unwrap_err();
    assert!(matches!(&e, Error::Unmeasured { workload: "lat_ctx", .. }), "{e:?}");
    assert_eq!(e.to_string(), "lat_ctx: the ring did not complete; no timing was recorded");
    assert_eq!(sim.live_threads(), 0, "no failed setup started a process");
}

/// Each of the five origins has its benchmarks among the workloads, and no
/// workload names an origin that is not one of them: what a test means by
/// "the origins' workloads" is the registry's `origin`, declared with each.
#[test]
fn every_origin_has_its_benchmarks_and_no_workload_claims_another() {
    let origins: std::collections::BTreeSet<&str> = WORKLOADS.iter().filter_map(|w| w.origin).collect();
    assert_eq!(origins, ["000", "001", "002", "003", "004"].into_iter().collect());
    let tools = ["trace", "stress", "microbench"];
    for w in WORKLOADS.iter().filter(|w| tools.contains(&w.name)) {
        assert_eq!(w.origin, None, "{} is tlbkit's own, not an origin's benchmark", w.name);
    }
}

/// No tool decides anything from a workload's name: what it is comes from its
/// entry (`WorkloadDef`). Every non-test source file of the code that runs
/// workloads (the command line, the Python package, the simulator, lab, the
/// registry, the host's calibration; not the checker and the policies, whose
/// `flush_range` is a hook) is read, up to its `#[cfg(test)]` module, for a
/// match arm on a workload's name or an equality test with one; the entry's
/// own module may name itself.
#[test]
fn no_source_dispatches_on_a_workload_name() {
    let files = workspace_sources();
    let mut found = Vec::new();
    for f in &files {
        let own = |w: &&WorkloadDef| {
            f.file_stem().is_some_and(|s| s == w.name) && f.parent().is_some_and(|p| p.ends_with("workload"))
        };
        let tests: Vec<String> = WORKLOADS
            .iter()
            .filter(|w| !own(w))
            .flat_map(|w| {
                let q = format!("\"{}\"", w.name);
                [format!("{q} =>"), format!("{q} |"), format!("== {q}"), format!("!= {q}"), format!("{q} ==")]
            })
            .collect();
        find_in_code(f, &mut found, |line| tests.iter().any(|t| line.contains(t.as_str())));
    }
    assert!(found.is_empty(), "decided from a workload's name (put it in the workload's entry):\n{}", found.join("\n"));
}

/// No tool decides anything from a `--set` switch's key outside its entry
/// (`run/switches.rs`, or `toggle.rs` for the kernel's on|off behaviours):
/// not what it applies to, not its default, not whether to print it. (A machine file's fields share some of the names, so
/// `preset/file.rs` is left out.)
#[test]
fn no_source_decides_from_a_switchs_name() {
    let mut found = Vec::new();
    let tests: Vec<String> = tlbkit_sim::run::all_switches()
        .flat_map(|s| {
            let q = format!("\"{}\"", s.key);
            [
                format!("{q} =>"),
                format!("== {q}"),
                format!("!= {q}"),
                format!("{q} =="),
                format!("given({q})"),
                format!("strip_prefix(\"{}=", s.key),
                // The run's printed settings come from the entry's `show`.
                format!("insert({q}"),
            ]
        })
        .collect();
    for f in workspace_sources() {
        if f.ends_with("run/switches.rs") || f.ends_with("preset/file.rs") {
            continue;
        }
        find_in_code(&f, &mut found, |line| tests.iter().any(|t| line.contains(t.as_str())));
    }
    assert!(found.is_empty(), "decided from a switch's key (put it in its entry):\n{}", found.join("\n"));
}

/// Every kernel toggle is read where the simulator models its behaviour
/// (`.on(NAME)`, its constant the key in capitals): a toggle nothing reads
/// would take `--set` and change nothing.
#[test]
fn every_toggle_is_read_by_the_simulator() {
    let mut code = String::new();
    for f in workspace_sources() {
        let path = f.to_string_lossy().replace('\\', "/");
        if path.contains("crates/sim/src/") && !path.ends_with("/toggle.rs") {
            let text = std::fs::read_to_string(&f).unwrap();
            code.push_str(text.split("#[cfg(test)]\nmod ").next().unwrap_or_default());
        }
    }
    let unread: Vec<&str> = tlbkit_sim::toggle::TOGGLES
        .iter()
        .map(|t| t.key)
        .filter(|key| !code.contains(&format!(".on({})", key.to_uppercase())))
        .collect();
    assert!(unread.is_empty(), "toggles the simulator never reads: {unread:?}");
}

#[test]
fn no_workload_reads_a_parameter_by_its_key() {
    // A workload declares each parameter once, as a typed handle
    // (`workload::Count`, `Real`, `Flag`), and reads it through that:
    // `p["iters"]` would repeat the key, panic on a typo and decide the type
    // where it is read.
    let mut found = Vec::new();
    let mut files = 0;
    for f in workspace_sources() {
        if !f.to_string_lossy().replace('\\', "/").contains("crates/sim/src/workload/") {
            continue;
        }
        files += 1;
        find_in_code(&f, &mut found, |line| !line.trim_start().starts_with("//") && indexes_by_a_key(line));
    }
    assert!(files >= 30, "the workloads' sources were not found ({files} files)");
    assert!(found.is_empty(), "a parameter read by its key (declare a handle and read it):\n{}", found.join("\n"));
}

/// Whether `line` indexes something (a name, a call's or an index's result)
/// by a string literal that is a key: `p["iters"]`, `self.p["size_kb"]`.
fn indexes_by_a_key(line: &str) -> bool {
    line.match_indices("[\"").any(|(at, _)| {
        let indexed =
            line[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ')' || c == ']');
        let rest = &line[at + 2..];
        let key = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
        indexed && key > 0 && rest[key..].starts_with("\"]")
    })
}

/// Every Rust source of the tools (not their tests' own files).
/// Pushes onto `found`, as `FILE:LINE: TEXT`, each line of source file `f`'s
/// code before its first `#[cfg(test)]` that `hit` holds for.
fn find_in_code(f: &std::path::Path, found: &mut Vec<String>, hit: impl Fn(&str) -> bool) {
    let text = std::fs::read_to_string(f).expect("read a source file");
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    for (n, line) in code.lines().enumerate() {
        if hit(line) {
            found.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
        }
    }
}

fn workspace_sources() -> Vec<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    let mut dirs: Vec<_> =
        ["src", "python/src", "crates/sim/src", "crates/lab/src", "crates/registry/src", "crates/host/src"]
            .into_iter()
            .map(|d| root.join(d))
            .collect();
    while let Some(d) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries {
            let p = e.expect("a folder entry").path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    assert!(files.len() > 80, "the workspace's sources were not found from {}", root.display());
    files
}
