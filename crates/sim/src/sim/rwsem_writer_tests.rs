//! A writer of `mmap_lock` behind readers (`sim/mmap_writer.rs`): where the
//! kernel's writers stop spinning on readers it leaves its CPU, the last
//! reader's CPU wakes it, and the readers that come while it sleeps queue
//! behind it until its release.

use super::rwsem_sleep_tests::at_mark;
use super::*;
use crate::preset::{self, Kernel};
use crate::toggle::RWSEM_WRITER_SLEEP;

/// Maps a page, starts a thread on CPU 2 that computes `reader_after`
/// cycles and then writes that page (a fault, a reader of `mmap_lock`) if
/// `reader_after` is given, marks `ready` (where the test places the
/// readers' hold), maps another page (a writer), marks `mapped`, and exits.
struct WriterAfterMark {
    step: u32,
    reader_after: Option<u64>,
}

/// The thread [`WriterAfterMark`] starts: computes, writes the page at
/// `va`, marks `faulted`.
struct LateReader {
    step: u32,
    va: u64,
    after: u64,
}

impl Program for LateReader {
    fn next(&mut self, _: u64) -> Op {
        self.step += 1;
        match self.step {
            1 => Op::Compute(self.after),
            2 => Op::Touch { va: self.va, pages: 1, write: true },
            3 => Op::Mark("faulted"),
            _ => Op::Exit,
        }
    }
}

impl Program for WriterAfterMark {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        match self.step {
            1 => Op::Sys(Sys::Mmap { pages: 1, write: true }),
            2 => match self.reader_after {
                Some(after) => Op::Sys(Sys::CloneOn(2, Box::new(LateReader { step: 0, va: ret, after }))),
                None => self.next(0),
            },
            3 => Op::Mark("ready"),
            4 => Op::Sys(Sys::Mmap { pages: 1, write: true }),
            5 => Op::Mark("mapped"),
            _ => Op::Exit,
        }
    }
}

/// What a writer's run under `kernel` left, readers on CPU 1 holding
/// `mmap_lock` for `hold` cycles from the writer's mark.
struct Outcome {
    writer_sleeps: u64,
    reader_sleeps: u64,
    switches: u64,
    /// When the readers released the lock, and when the writer's `mmap`
    /// and the late reader's fault ended.
    release: u64,
    mapped: u64,
    faulted: Option<u64>,
    waker_charged: u64,
}

fn run(kernel: Kernel, hold: u64, sleep: Option<bool>, reader_after: Option<u64>) -> Outcome {
    let choices = KernelChoices::default().with(RWSEM_WRITER_SLEEP, sleep);
    let (mut sim, _, mm, at) = at_mark(kernel, 3, choices, Box::new(WriterAfterMark { step: 0, reader_after }));
    let line = sim.kw.mm_word(mm, |l| l.count);
    let sem = sim.kw.mmap_lock(mm);
    let held = sem.down_read(&mut sim.m, 1, line, at);
    let release = sem.up_read(&mut sim.m, 1, line, held + hold);
    let switches = sim.stats.context_switches;
    sim.run();
    assert!(sim.error.is_none() && sim.oracle.violations.is_empty(), "{:?} {:?}", sim.error, sim.oracle.violations);
    let mark = |name: &str| sim.marks.iter().find(|m| m.0 == name).map(|m| m.1);
    Outcome {
        writer_sleeps: sim.stats.mmap_writer_sleeps,
        reader_sleeps: sim.stats.mmap_lock_sleeps,
        switches: sim.stats.context_switches - switches,
        release,
        mapped: mark("mapped").expect("the writer never mapped"),
        faulted: mark("faulted"),
        waker_charged: sim.m.cpus[1].stolen,
    }
}

/// Cycles of `us` microseconds on the `skylake` preset's clock.
fn us(us: u64) -> u64 {
    (preset::named("skylake").freq_ghz * 1000.0) as u64 * us
}

#[test]
fn a_writer_behind_readers_sleeps_where_the_kernels_writers_stop_spinning() {
    let long = us(100);
    // v4.8 to v5.2 refuse to spin on a reader-owned lock; v5.3 on spin at
    // most 25 us.
    for kernel in [Kernel::Linux(4, 19), Kernel::Linux(6, 13)] {
        let slept = run(kernel, long, None, None);
        assert_eq!(slept.writer_sleeps, 1, "{kernel:?}");
        assert!(slept.mapped > slept.release, "{kernel:?}: the writer ran before the readers left");
        assert!(slept.waker_charged > 0, "{kernel:?}: the last reader's CPU paid nothing for the wake-up");
        // Spinning instead: the writer keeps its CPU until they leave.
        let spun = run(kernel, long, Some(false), None);
        assert_eq!(spun.writer_sleeps, 0, "{kernel:?}");
        assert!(spun.mapped > spun.release, "{kernel:?}");
        assert_eq!(spun.waker_charged, 0, "{kernel:?}");
        // Asleep, the writer's CPU went idle and came back: two more switches.
        assert_eq!(slept.switches, spun.switches + 2, "{kernel:?}");
    }
    // Before v4.8 the owner word names no reader and writers spin on; so do
    // FreeBSD's sx waiters in the model.
    for kernel in [Kernel::Linux(4, 4), Kernel::FreeBsd(14)] {
        assert_eq!(run(kernel, long, None, None).writer_sleeps, 0, "{kernel:?}");
    }
    assert_eq!(run(Kernel::Linux(4, 4), long, Some(true), None).writer_sleeps, 1);
}

#[test]
fn from_v5_3_a_writer_spins_ten_us_and_half_a_us_a_reader_before_it_sleeps() {
    // One reader: a spin limit of 10.5 us.
    assert_eq!(run(Kernel::Linux(6, 13), us(10), None, None).writer_sleeps, 0, "readers gone within the limit");
    assert_eq!(run(Kernel::Linux(6, 13), us(12), None, None).writer_sleeps, 1, "readers held past the limit");
    // v4.8 to v5.2 sleep at once.
    assert_eq!(run(Kernel::Linux(4, 19), us(10), None, None).writer_sleeps, 1);
}

#[test]
fn a_reader_that_comes_while_a_writer_sleeps_queues_behind_it_until_its_release() {
    let (hold, after) = (us(200), us(20));
    for kernel in [Kernel::Linux(4, 19), Kernel::Linux(6, 13)] {
        let o = run(kernel, hold, None, Some(after));
        assert_eq!((o.writer_sleeps, o.reader_sleeps), (1, 1), "{kernel:?}");
        let faulted = o.faulted.expect("the late reader never faulted");
        assert!(faulted > o.mapped, "{kernel:?}: the reader's fault ended at {faulted}, before the writer's mmap");
        // Behind a spinning writer, whose hold the model places at once,
        // the reader sleeps until that release too.
        let spun = run(kernel, hold, Some(false), Some(after));
        assert_eq!((spun.writer_sleeps, spun.reader_sleeps), (0, 1), "{kernel:?}");
        assert!(spun.faulted.unwrap() > spun.mapped, "{kernel:?}");
    }
}

#[test]
fn from_v5_11_a_reader_takes_the_lock_from_a_sleeping_writer_when_no_other_reader_holds_it() {
    for (kernel, steals) in [(Kernel::Linux(4, 19), false), (Kernel::Linux(5, 10), false), (Kernel::Linux(6, 13), true)]
    {
        let program = Box::new(WriterAfterMark { step: 0, reader_after: None });
        let (mut sim, _, mm, at) = at_mark(kernel, 3, KernelChoices::default(), program);
        let line = sim.kw.mm_word(mm, |l| l.count);
        let sem = sim.kw.mmap_lock(mm);
        let held = sem.down_read(&mut sim.m, 1, line, at);
        let release = sem.up_read(&mut sim.m, 1, line, held + us(100));
        while sim.stats.mmap_writer_sleeps == 0 {
            assert!(sim.step(), "{kernel:?}: the writer never slept");
        }
        assert!(sim.writer_queued(mm, release - 1), "{kernel:?}: a reader beside other readers queues");
        assert_eq!(sim.writer_queued(mm, release + 1), !steals, "{kernel:?}: a reader after the last one left");
    }
}
