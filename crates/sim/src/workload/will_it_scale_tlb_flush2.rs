//! will-it-scale's `tlb_flush2` (`tlb_flush2_threads`, `tlb_flush2_processes`):
//! the benchmark the lazy `mm_cpumask` and INVLPGB series were measured with.
//!
//! Source: github.com/antonblanchard/will-it-scale, `tests/tlb_flush2.c`
//! `testcase()` (Kemi Wang, 2018), run by the harness `main.c` (see
//! [`super::will_it_scale`]). Each task loops: `mmap` 1 MiB (`MEMORYSIZE`;
//! anonymous, private, read-write); for each of its 256 pages a one-byte store
//! (a write fault that allocates the page), a one-page `madvise(MADV_DONTNEED)`
//! (a flush of that page on every CPU running the mm), a one-byte load (the
//! `assert`, compiled in at `-O2`: a read fault; Linux maps the shared zero
//! page) and one increment of the task's counter; then `munmap` of the 1 MiB
//! (256 pages, above the 33-page ceiling: a flush of the whole mm). One
//! iteration is one page. In threads mode every task is a thread of one
//! process, so every `madvise` flushes every CPU running a task; in process mode
//! each task is its own process, and a flush reaches no other CPU. 0-day runs
//! one task per CPU.
//!
//! The model: the harness starts `tasks` tasks (`mode` 0 threads, 1
//! processes), each bound to its CPU; each runs `laps` times `pages`
//! iterations. Fixed work instead of will-it-scale's fixed time: the run
//! ends when the last task has finished. Each task starts where a long run
//! finds it (`steady=1`, the default; [`will_it_scale::setup_warm`]): at its
//! own page of its lap, drawn from the seed, the pages before it mapped to
//! the zero page as this lap's loads left them, so the tasks' `munmap`s
//! (each holding `mmap_lock` for writing) fall at their own times as in the
//! real loop; `steady=0` starts every task at page 0, in step, and their
//! `munmap`s fall together.
//!
//! What stays different: neighbouring mappings are not merged. (One task's
//! `mmap`/`munmap` holds `mmap_lock` for writing while the others' faults and
//! `madvise`s wait, asleep on the kernels whose readers sleep: `crate::locks`.)
//!
//! Results: `ops_per_s`, iterations per second summed over tasks (will-it-scale's
//! `average:`, 0-day's `workload`); `per_thread_ops` (its `per_thread_ops`); and
//! `tlb_share`, the share of all CPUs' time spent invalidating TLBs: initiators
//! inside the policy's flush calls (IPIs and waits included), IPI handlers, and
//! running CPUs processing broadcast invalidations they did not issue.

use super::will_it_scale::{self, Start};
use super::{Count, ParamDef, Params, WorkloadDef};
use crate::error::Error;
use crate::program::{Op, Program, Sys};
use crate::sim::Sim;
use std::collections::BTreeMap;

// Its parameters, in the order its entry lists them.
const LAPS: Count =
    Count::new("laps", 2, 1..=100_000, "map/unmap cycles of each task (will-it-scale runs for a time instead)");
const PAGES: Count = Count::new("pages", 256, 1..=262_144, "4 KB pages per mapping (1 MiB: 256)");

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef::new(
    "will_it_scale_tlb_flush2",
    "will-it-scale tlb_flush2: each task maps 1 MiB, writes, madvise(DONTNEED)s and reads each page, \
     then unmaps it (threads or processes; LKP: one task per CPU)",
    &[will_it_scale::TASKS.0, LAPS.0, PAGES.0, will_it_scale::MODE.0, will_it_scale::STEADY.0],
    will_it_scale::RESULTS,
    |p, _, sim, _| setup(p, sim),
    |p, main, _| result(p, main),
    // One process, or one per task.
    |p, _, cpus| will_it_scale::max_mms(p, cpus, 0),
);

/// What a task's mapping is backed by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Backing {
    /// Anonymous private memory (`tlb_flush2`).
    Anon,
    /// A shared mapping of the task's own file (`tlb_flush3`).
    File(u32),
    /// A private mapping of the task's own file (`tlb_flush1`).
    PrivateFile(u32),
}

/// One task's loop: map `pages`, then per page store, `madvise`, load and
/// count, unmapping after the last page; `iters` iterations in all.
pub(crate) struct FlushLoop {
    at: Start,
    backing: Backing,
    iters: u64,
    pages: u64,
    done: u64,
    page: u64,
    /// The page of its first mapping the task starts at (0 unless it warms
    /// up, [`FlushLoop::warm`]).
    first: u64,
    /// Whether it has warmed up (or starts cold).
    warmed: bool,
    buf: u64,
    /// Where in the iteration: 0 store, 1 madvise, 2 load, 3 counter.
    part: u8,
    stage: Stage,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    Wait,
    /// A warm task past the gate: mark where its own window begins.
    Go,
    Map,
    /// A mapping is made (its address is the call's return).
    Mapped,
    /// Fill the page cache by reading the whole first mapping.
    Fill,
    /// Unmap what the fill mapped (the page cache keeps the pages).
    Drop,
    /// Read the pages before the first one again, as its earlier
    /// iterations left them mapped.
    Back,
    /// Tell the harness the task is warm.
    Ready,
    Pages,
    Unmap,
    Done,
    Exit,
}

impl FlushLoop {
    /// Returns the loop of task `at` over mappings of `pages` pages backed by
    /// `backing`, ending after `iters` iterations (and the `munmap` of a
    /// mapping its last iteration completes).
    pub(crate) fn new(at: Start, backing: Backing, iters: u64, pages: u64) -> Self {
        let stage = if at.gate.is_some() { Stage::Wait } else { Stage::Map };
        FlushLoop { at, backing, iters, pages, done: 0, page: 0, first: 0, warmed: true, buf: 0, part: 0, stage }
    }

    /// Returns the loop of [`FlushLoop::new`] for a task that starts as a long
    /// run finds it (`at.ready` set, [`will_it_scale::setup_warm`]): before
    /// the gate it maps its memory; a file's it reads whole into the page
    /// cache (the laps before have left every page there) and unmaps; it
    /// reads pages `0..first`, as the loads of this lap's iterations so far
    /// left them mapped (the file's pages, or for anonymous memory the zero
    /// page), then tells the harness and waits at the gate; past it, it marks
    /// `"go"` (where its own window begins) and its iterations begin at page
    /// `first`.
    pub(crate) fn warm(at: Start, backing: Backing, iters: u64, pages: u64, first: u64) -> Self {
        let first = first.min(pages.saturating_sub(1));
        let stage = Stage::Map;
        FlushLoop { at, backing, iters, pages, done: 0, page: first, first, warmed: false, buf: 0, part: 0, stage }
    }

    /// The store, `madvise` or load of part `part` of the iteration at
    /// page `va`, or the counter's increment.
    fn part_op(&self, va: u64) -> Op {
        match self.part {
            0 => Op::Touch { va, pages: 1, write: true },
            1 => Op::Sys(Sys::Madvise { va, pages: 1 }),
            2 => Op::Touch { va, pages: 1, write: false },
            _ => Op::Touch { va: self.at.counters, pages: 1, write: true },
        }
    }
}

impl Program for FlushLoop {
    fn next(&mut self, ret: u64) -> Op {
        loop {
            match self.stage {
                Stage::Wait => {
                    self.stage = if self.warmed && self.at.ready.is_some() { Stage::Go } else { Stage::Map };
                    return Op::Sys(Sys::PipeRead(self.at.gate.unwrap_or_default()));
                }
                Stage::Go => {
                    self.stage = Stage::Pages;
                    return Op::Mark("go");
                }
                Stage::Mapped => {
                    self.buf = ret;
                    self.page = if self.warmed { 0 } else { self.first };
                    self.part = 0;
                    // Anonymous memory has no page cache to fill.
                    self.stage = match (self.warmed, self.backing) {
                        (true, _) => Stage::Pages,
                        (false, Backing::Anon) => Stage::Back,
                        (false, _) => Stage::Fill,
                    };
                    continue;
                }
                Stage::Fill => {
                    self.stage = Stage::Drop;
                    return Op::Touch { va: self.buf, pages: self.pages, write: false };
                }
                Stage::Drop => {
                    self.stage = Stage::Back;
                    return Op::Sys(Sys::Madvise { va: self.buf, pages: self.pages });
                }
                Stage::Back => {
                    self.stage = Stage::Ready;
                    if self.first > 0 {
                        return Op::Touch { va: self.buf, pages: self.first, write: false };
                    }
                }
                Stage::Ready => {
                    self.warmed = true;
                    self.stage = Stage::Wait;
                    return Op::Sys(Sys::PipeWrite(self.at.ready.unwrap_or_default()));
                }
                Stage::Map => {
                    if self.done == self.iters {
                        self.stage = Stage::Done;
                        continue;
                    }
                    self.stage = Stage::Mapped;
                    return Op::Sys(match self.backing {
                        Backing::Anon => Sys::Mmap { pages: self.pages, write: true },
                        Backing::File(file) => Sys::MmapFile { file, pages: self.pages, write: true, private: false },
                        Backing::PrivateFile(file) => {
                            Sys::MmapFile { file, pages: self.pages, write: true, private: true }
                        }
                    });
                }
                Stage::Pages => {
                    if self.page == self.pages {
                        self.stage = Stage::Unmap;
                        continue;
                    }
                    if self.done == self.iters {
                        // The last iteration fell inside a mapping: it stays.
                        self.stage = Stage::Done;
                        continue;
                    }
                    let op = self.part_op(self.buf + self.page * 4096);
                    self.part += 1;
                    if self.part == 4 {
                        self.part = 0;
                        self.page += 1;
                        self.done += 1;
                    }
                    return op;
                }
                Stage::Unmap => {
                    self.stage = Stage::Map;
                    return Op::Sys(Sys::Munmap { va: self.buf, pages: self.pages });
                }
                Stage::Done => {
                    self.stage = Stage::Exit;
                    return Op::Mark("end");
                }
                Stage::Exit => return self.at.exit(),
            }
        }
    }
}

/// Starts the tasks.
pub fn setup(p: &Params, sim: &mut Sim) -> Result<(), Error> {
    let (pages, iters) = (PAGES.of(p), LAPS.of(p) * PAGES.of(p));
    start(p, sim, |_| Backing::Anon, iters, pages)
}

/// Starts tasks that each loop `iters` times over mappings of `pages` pages
/// backed by `backing(task)`: all at page 0 of their first lap with
/// `steady=0`, else each warm at its own page ([`FlushLoop::warm`]).
fn start(p: &Params, sim: &mut Sim, backing: fn(&Start) -> Backing, iters: u64, pages: u64) -> Result<(), Error> {
    if will_it_scale::STEADY.of(p) == 0 {
        let make = move |at: Start| -> Box<dyn Program> {
            let backing = backing(&at);
            Box::new(FlushLoop::new(at, backing, iters, pages))
        };
        return will_it_scale::setup(p, sim, Box::new(make));
    }
    let seed = sim.cfg.seed;
    let make = move |at: Start| -> Box<dyn Program> {
        let backing = backing(&at);
        let first = will_it_scale::lap_point(seed, at.index, pages);
        Box::new(FlushLoop::warm(at, backing, iters, pages, first))
    };
    will_it_scale::setup_warm(p, sim, Box::new(make))
}

/// Returns `ops_per_s`, `per_thread_ops` and `tlb_share` from the window
/// between the gate opening and the last task finishing.
pub fn result(p: &Params, sim: &Sim) -> Result<BTreeMap<String, f64>, Error> {
    let n = will_it_scale::tasks(p, sim.cfg.ncpus);
    will_it_scale::result(DEF.name, n, n * LAPS.of(p) * PAGES.of(p), sim)
}

/// The parameters of the testcases whose tasks each loop over a mapping of a
/// file of their own (`tlb_flush1`, `tlb_flush3`).
pub(crate) const FILE_PARAMS: &[ParamDef] = &[
    will_it_scale::TASKS.0,
    will_it_scale::MODE.0,
    will_it_scale::FILE_ITERS.0,
    will_it_scale::FILE_PAGES.0,
    will_it_scale::STEADY.0,
];

/// Returns the entry of a file testcase (`tlb_flush1`, `tlb_flush3`): its own
/// `setup` calls [`setup_file`], its `result` [`file_result`].
pub(crate) const fn file_def(
    name: &'static str,
    description: &'static str,
    setup: super::Setup,
    result: super::Reckon,
) -> WorkloadDef {
    WorkloadDef::new(name, description, FILE_PARAMS, will_it_scale::RESULTS, setup, result, |p, _, cpus| {
        will_it_scale::max_mms(p, cpus, 0)
    })
}

/// Starts the tasks of a file testcase (`tlb_flush1`, `tlb_flush3`): each
/// loops `iters` times over mappings of `pages` pages, backed by
/// `backing(task)`.
pub(crate) fn setup_file(p: &Params, sim: &mut Sim, backing: fn(&Start) -> Backing) -> Result<(), Error> {
    start(p, sim, backing, will_it_scale::FILE_ITERS.of(p), will_it_scale::FILE_PAGES.of(p))
}

/// Returns `ops_per_s`, `per_thread_ops` and `tlb_share` of file testcase
/// `workload` (`tlb_flush1`, `tlb_flush3`) from the window between the gate
/// opening and the last task finishing.
pub(crate) fn file_result(workload: &'static str, p: &Params, sim: &Sim) -> Result<BTreeMap<String, f64>, Error> {
    let n = will_it_scale::tasks(p, sim.cfg.ncpus);
    will_it_scale::result(workload, n, n * will_it_scale::FILE_ITERS.of(p), sim)
}

#[cfg(test)]
mod tests {
    use super::{Backing, FlushLoop};
    use crate::program::{Op, Program, Sys};
    use crate::run::{run, RunSpec};
    use crate::workload::will_it_scale::{Mode, Start};

    #[test]
    fn a_warm_task_fills_the_cache_maps_its_lap_so_far_and_starts_at_its_page() {
        let at = Start {
            index: 3,
            cpu: 3,
            gate: Some(7),
            done: None,
            ready: Some(8),
            counters: 0x9000,
            mode: Mode::Threads,
        };
        let (buf, pages, first) = (0x4000_0000u64, 64u64, 40u64);
        let mut task = FlushLoop::warm(at, Backing::PrivateFile(4), 100, pages, first);
        assert!(matches!(task.next(0), Op::Sys(Sys::MmapFile { file: 4, pages: 64, write: true, private: true })));
        assert!(matches!(task.next(buf), Op::Touch { va, pages: 64, write: false } if va == buf), "the fill");
        assert!(matches!(task.next(0), Op::Sys(Sys::Madvise { va, pages: 64 }) if va == buf), "the drop");
        assert!(matches!(task.next(0), Op::Touch { va, pages: 40, write: false } if va == buf), "pages 0..first");
        assert!(matches!(task.next(0), Op::Sys(Sys::PipeWrite(8))), "warm");
        assert!(matches!(task.next(0), Op::Sys(Sys::PipeRead(7))), "the gate");
        assert!(matches!(task.next(0), Op::Mark("go")));
        let page = |n: u64| buf + n * 4096;
        assert!(matches!(task.next(0), Op::Touch { va, pages: 1, write: true } if va == page(first)));
        // The rest of the lap (24 pages, four operations each), then its munmap.
        let madvises =
            (1..4 * (pages - first)).filter(|_| matches!(task.next(0), Op::Sys(Sys::Madvise { .. }))).count();
        assert_eq!(madvises as u64, pages - first);
        assert!(matches!(task.next(0), Op::Sys(Sys::Munmap { va, pages: 64 }) if va == buf), "the lap ends");
        // The next lap starts cold-free: no fill, page 0 of the new mapping.
        assert!(matches!(task.next(0), Op::Sys(Sys::MmapFile { .. })));
        assert!(matches!(task.next(0x5000_0000), Op::Touch { va: 0x5000_0000, pages: 1, write: true }));
    }

    #[test]
    fn a_warm_anonymous_task_only_maps_its_lap_so_far_to_the_zero_page() {
        let at =
            Start { index: 0, cpu: 0, gate: Some(2), done: None, ready: Some(3), counters: 0, mode: Mode::Threads };
        let mut task = FlushLoop::warm(at, Backing::Anon, 512, 256, 100);
        assert!(matches!(task.next(0), Op::Sys(Sys::Mmap { pages: 256, write: true })));
        assert!(matches!(task.next(0x1000), Op::Touch { va: 0x1000, pages: 100, write: false }), "no fill");
        assert!(matches!(task.next(0), Op::Sys(Sys::PipeWrite(3))));
    }

    fn per_thread(policy: &str, cpus: usize) -> f64 {
        let spec = RunSpec {
            machine: "milan".into(),
            cpus,
            policy: policy.into(),
            workload: "will_it_scale_tlb_flush2".into(),
            sets: vec!["laps=1".into(), "pages=64".into()],
            seed: 1,
            strict: true,
        };
        let out = run(&spec).unwrap();
        assert_eq!(out.violations_total, 0);
        out.result["per_thread_ops"]
    }

    #[test]
    fn a_second_thread_costs_its_ipis_and_no_idle_wait() {
        // One madvise IPI sent and one handled per page: about a microsecond on
        // milan; and each fault, under its VMA's lock, reads mm_lock_seq back
        // from the line the other thread's madvise took with mmap_lock's
        // owner word (0.65 of one thread's rate in all). A CPU that waited,
        // idle, for handlers due after its operation had begun lost twice the
        // IPIs' time (0.55).
        let (one, two) = (per_thread("x86-linux-lazytrim", 1), per_thread("x86-linux-lazytrim", 2));
        assert!(two < one, "IPIs cost something: {two} vs {one}");
        assert!(two > 0.6 * one, "per-thread rate at 2 CPUs {two} vs {one} at 1");
    }

    #[test]
    fn broadcasts_spare_the_threads_the_ipis() {
        // Four CPUs run the mm: it gets a global ASID and flushes by INVLPGB.
        let (ipi, bcast) = (per_thread("x86-linux-lazytrim", 4), per_thread("x86-linux-invlpgb", 4));
        assert!(bcast > ipi, "{bcast} vs {ipi}");
    }
}
