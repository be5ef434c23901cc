//! A reader of `mmap_lock` behind a writer ([`Sim::mmap_read_fault`],
//! `Sim::syscall`): on the kernels whose readers sleep it leaves its CPU,
//! and the writer's CPU wakes it at the release with the read lock granted;
//! on the kernels whose readers spin (Linux v5.3 to v5.10) and on FreeBSD it
//! keeps its CPU until the release.

use super::*;
use crate::preset::{self, Kernel};
use crate::toggle::RWSEM_READER_SLEEP;
use std::cell::Cell;
use std::rc::Rc;
use tlbkit_policy::asid::LinuxX86;

/// Maps `pages` writable pages (and writes them all if `prefault`), marks
/// `ready` (where the test places a writer's hold), then writes the first
/// page (a fault) or `madvise`s them all away, keeps what that returned in
/// `ret`, and exits.
struct ReaderAfterMark {
    step: u32,
    va: u64,
    pages: u64,
    prefault: bool,
    madvise: bool,
    ret: Rc<Cell<Option<u64>>>,
}

impl ReaderAfterMark {
    fn new(pages: u64, prefault: bool, madvise: bool) -> (Self, Rc<Cell<Option<u64>>>) {
        let ret = Rc::new(Cell::new(None));
        (ReaderAfterMark { step: 0, va: 0, pages, prefault, madvise, ret: ret.clone() }, ret)
    }
}

impl Program for ReaderAfterMark {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        let pages = self.pages;
        match self.step {
            1 => Op::Sys(Sys::Mmap { pages, write: true }),
            2 => {
                self.va = ret;
                if self.prefault {
                    return Op::Touch { va: ret, pages, write: true };
                }
                self.next(0)
            }
            3 => Op::Mark("ready"),
            4 if self.madvise => Op::Sys(Sys::Madvise { va: self.va, pages }),
            4 => Op::Touch { va: self.va, pages: 1, write: true },
            5 => {
                self.ret.set(Some(ret));
                Op::Exit
            }
            _ => Op::Exit,
        }
    }
}

/// What a reader's run under `kernel` left, a writer on CPU 1 holding
/// `mmap_lock` for `HOLD` cycles from the reader's mark: the sleeps, the
/// faults, the context switches, when the run ended, when the writer
/// released the lock, and what the wake-up cost the writer's CPU.
struct Outcome {
    sleeps: u64,
    faults: u64,
    switches: u64,
    end: u64,
    release: u64,
    waker_charged: u64,
}

const HOLD: u64 = 200_000;

fn run(kernel: Kernel, madvise: bool) -> Outcome {
    run_with(kernel, madvise, None)
}

/// A `skylake` machine of `cpus` CPUs under `kernel` and `choices` running
/// `program` until its first mark: the simulator, the program's thread, its
/// address space and the mark's time (where a test places another CPU's
/// hold of `mmap_lock`).
pub(super) fn at_mark(
    kernel: Kernel,
    cpus: usize,
    choices: KernelChoices,
    program: Box<dyn Program>,
) -> (Sim, usize, MmId, u64) {
    let mut p = preset::named("skylake");
    p.kernel = kernel;
    let cfg = SimConfig { max_mms: 4, max_events: 10_000, kernel: choices, ..SimConfig::quiet(p, cpus, 1) };
    let mut sim = Sim::new(cfg, LinuxX86::new(cpus, 4, true));
    let tid = sim.spawn(program).unwrap();
    while sim.marks.is_empty() {
        assert!(sim.step(), "the program never reached its mark");
    }
    let (mm, at) = (sim.scheduler.thread(tid).mm(), sim.marks[0].1);
    (sim, tid, mm, at)
}

/// [`run`] with `--set rwsem_reader_sleep` given as `sleep`.
fn run_with(kernel: Kernel, madvise: bool, sleep: Option<bool>) -> Outcome {
    let choices = KernelChoices::default().with(RWSEM_READER_SLEEP, sleep);
    let program = Box::new(ReaderAfterMark::new(1, false, madvise).0);
    let (mut sim, tid, mm, at) = at_mark(kernel, 2, choices, program);
    assert_eq!(sim.scheduler.thread(tid).cpu(), 0);
    let line = sim.kw.mm_word(mm, |l| l.count);
    let sem = sim.kw.mmap_lock(mm);
    let held = sem.down_write(&mut sim.m, 1, line, at);
    let release = sem.up_write(&mut sim.m, 1, line, held + HOLD);
    let switches = sim.stats.context_switches;
    sim.run();
    assert!(sim.error.is_none() && sim.oracle.violations.is_empty(), "{:?} {:?}", sim.error, sim.oracle.violations);
    Outcome {
        sleeps: sim.stats.mmap_lock_sleeps,
        faults: sim.stats.mmu.page_faults,
        switches: sim.stats.context_switches - switches,
        end: sim.end,
        release,
        waker_charged: sim.m.cpus[1].stolen,
    }
}

#[test]
fn a_faulting_reader_behind_a_writer_sleeps_where_the_kernels_readers_do() {
    let slept = run(Kernel::Linux(6, 13), false);
    assert_eq!((slept.sleeps, slept.faults), (1, 1), "one sleep, and its fault counted once");
    assert!(slept.end > slept.release, "the fault ended before the writer's release");
    assert!(slept.waker_charged > 0, "the writer's CPU paid nothing for the wake-up");
    for spins in [Kernel::Linux(5, 10), Kernel::FreeBsd(14)] {
        let spun = run(spins, false);
        assert_eq!((spun.sleeps, spun.faults), (0, 1), "{spins:?}");
        assert!(spun.end > spun.release, "{spins:?}: the fault ended before the writer's release");
        assert_eq!(spun.waker_charged, 0, "{spins:?}");
        // Asleep, the reader's CPU went idle and came back: two more switches.
        assert_eq!(slept.switches, spun.switches + 2, "{spins:?}");
    }
    // Before v5.3 readers slept too; the switch turns either way.
    assert_eq!(run(Kernel::Linux(4, 19), false).sleeps, 1);
    assert_eq!(run_with(Kernel::Linux(6, 13), false, Some(false)).sleeps, 0);
    assert_eq!(run_with(Kernel::Linux(5, 10), false, Some(true)).sleeps, 1);
}

#[test]
fn a_system_call_behind_a_writer_sleeps_and_runs_on_after_the_release() {
    let slept = run(Kernel::Linux(6, 13), true);
    assert_eq!(slept.sleeps, 1);
    assert!(slept.end > slept.release);
    let spun = run(Kernel::Linux(5, 10), true);
    assert_eq!(spun.sleeps, 0);
    assert!(spun.end > spun.release);
    assert_eq!(slept.switches, spun.switches + 2);
}

#[test]
fn an_advice_whose_range_lost_a_page_while_it_slept_advises_the_rest_and_returns_enomem() {
    let (program, ret) = ReaderAfterMark::new(2, true, true);
    let (mut sim, _, mm, at) = at_mark(Kernel::Linux(6, 13), 2, KernelChoices::default(), Box::new(program));
    let va = sim.kern.mm(mm).vmas().iter().find(|v| v.pages == 2).unwrap().start;
    // Another thread's munmap of the second page, then a writer's long hold.
    let line = sim.kw.mm_word(mm, |l| l.count);
    let held = sim.kw.mmap_lock(mm).down_write(&mut sim.m, 1, line, at);
    let unmapped = sim.munmap(1, mm, va + 4096, 1, held);
    sim.kw.mmap_lock(mm).up_write(&mut sim.m, 1, line, unmapped + HOLD);
    sim.run();
    assert!(sim.error.is_none() && sim.oracle.violations.is_empty(), "{:?} {:?}", sim.error, sim.oracle.violations);
    assert_eq!(sim.stats.mmap_lock_sleeps, 1);
    assert_eq!(ret.get(), Some(ENOMEM_RET), "madvise over a hole returns -ENOMEM");
    // The first page, still mapped, was advised away: its frame freed.
    let root = sim.kern.mm(mm).root();
    assert!(sim.pt.walk(root, va).map(|w| sim.pt.pte(w.pte)).is_none_or(|p| !p.valid()));
}

/// `-ENOMEM` as the program sees it.
const ENOMEM_RET: u64 = (-12i64) as u64;
