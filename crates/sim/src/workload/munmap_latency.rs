//! LATR's munmap microbenchmark (Kumar et al., "LATR: Lazy Translation
//! Coherence", ASPLOS 2018): the latency of one `munmap` while threads of the
//! same process on other cores hold its pages in their TLBs.
//!
//! Source: the authors' artifact, github.com/sslab-gatech/latr,
//! `microbenchmark/mmap_micro/src/lib/main.cc` (`MainThread::run`,
//! `ReferenceThread::run`). An unmapping thread pinned to core 0 and `cores`
//! reference threads pinned one per core from core 0 on (the first shares the
//! unmapper's core) share one barrier. Each iteration the unmapper maps `pages`
//! pages (anonymous, private, read-write) and hands the address to the
//! references; after the first barrier every reference writes each page; after
//! the second the unmapper times only its `munmap` (`clock_gettime` around the
//! call) while the references go back to sleep at the first barrier. It prints
//! the mean and the minimum time per iteration.
//!
//! The model: the barrier is two pipes (the references sleep on one, the
//! unmapper on the other), so a reference's CPU goes idle, lazily holding the
//! mm, as in the real run; the timed window is the unmapper's `munmap` system
//! call, entry to exit.
//!
//! Results: `munmap_us`, the mean over iterations, and `munmap_min_us`.

use super::{params, Params, WorkloadDef};
use crate::error::Error;
use crate::program::{Op, Program, Sys};
use crate::sim::Sim;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

params! {
    PARAMS;
    CORES: Count("cores", 0, 0..=4096)
        "reference threads, one per core from core 0 on (0: one per CPU)";
    PAGES: Count("pages", 1, 1..=4096)
        "4 KB pages mapped and unmapped each iteration";
    ITERS: Count("iters", 100, 1..=1_000_000)
        "iterations (munmaps timed)";
}

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef::new(
    "munmap_latency",
    "LATR's munmap microbenchmark: threads on N cores write a mapping's pages, one thread times its \
     munmap",
    PARAMS,
    &["munmap_us", "munmap_min_us"],
    |p, _, sim, _| setup(p, sim),
    |_, main, _| result(main),
    // One process.
    |_, _, _| 8,
);

/// What the unmapper shares with the references: the mapping's address, and
/// whether the run is over.
#[derive(Default)]
struct Shared {
    data: Cell<u64>,
    over: Cell<bool>,
}

/// A reference thread: at each wake-up, write every page and report.
struct Reference {
    shared: Rc<Shared>,
    go: u32,
    ready: u32,
    pages: u64,
    step: u8,
}

impl Program for Reference {
    fn next(&mut self, _ret: u64) -> Op {
        self.step = (self.step + 1) % 3;
        match self.step {
            1 => Op::Sys(Sys::PipeRead(self.go)),
            2 if self.shared.over.get() => Op::Exit,
            2 => Op::Touch { va: self.shared.data.get(), pages: self.pages, write: true },
            _ => Op::Sys(Sys::PipeWrite(self.ready)),
        }
    }
}

/// The unmapping thread.
struct Unmapper {
    shared: Rc<Shared>,
    refs: u64,
    pages: u64,
    iters: u64,
    go: u32,
    ready: u32,
    step: u64,
    /// Where in an iteration: map, release, gather, time, unmap, stop.
    part: u64,
    iter: u64,
}

impl Program for Unmapper {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        let n = self.refs;
        match self.step {
            1 => return Op::Sys(Sys::Pipe),
            2 => {
                self.go = ret as u32;
                return Op::Sys(Sys::Pipe);
            }
            s if s <= 2 + n => {
                if s == 3 {
                    self.ready = ret as u32;
                }
                let r = Reference {
                    shared: self.shared.clone(),
                    go: self.go,
                    ready: self.ready,
                    pages: self.pages,
                    step: 0,
                };
                // Reference i on core i: the first shares the unmapper's core 0.
                return Op::Sys(Sys::CloneOn((s - 3) as usize, Box::new(r)));
            }
            _ => {}
        }
        if self.iter == self.iters {
            // Release the references for the last time: they see the run is over.
            self.shared.over.set(true);
            if self.part < n {
                self.part += 1;
                return Op::Sys(Sys::PipeWrite(self.go));
            }
            return Op::Exit;
        }
        self.part += 1;
        let p = self.part;
        if p == 1 {
            return Op::Sys(Sys::Mmap { pages: self.pages, write: true });
        }
        if p == 2 {
            self.shared.data.set(ret);
        }
        if p <= 1 + n {
            return Op::Sys(Sys::PipeWrite(self.go));
        }
        if p <= 1 + 2 * n {
            return Op::Sys(Sys::PipeRead(self.ready));
        }
        match p - 1 - 2 * n {
            1 => Op::Mark("munmap_start"),
            2 => Op::Sys(Sys::Munmap { va: self.shared.data.get(), pages: self.pages }),
            _ => {
                self.part = 0;
                self.iter += 1;
                Op::Mark("munmap_end")
            }
        }
    }
}

/// Starts the unmapper (on CPU 0, the first spawned thread's).
pub fn setup(p: &Params, sim: &mut Sim) -> Result<(), Error> {
    let u = Unmapper {
        shared: Rc::new(Shared::default()),
        refs: CORES.or_cpus(p, sim.cfg.ncpus),
        pages: PAGES.of(p),
        iters: ITERS.of(p),
        go: 0,
        ready: 0,
        step: 0,
        part: 0,
        iter: 0,
    };
    sim.spawn(Box::new(u))?;
    Ok(())
}

/// Returns `munmap_us` and `munmap_min_us` over the timed `munmap`s.
pub fn result(sim: &Sim) -> Result<BTreeMap<String, f64>, Error> {
    let (starts, ends) = (super::mark_times(sim, "munmap_start"), super::mark_times(sim, "munmap_end"));
    if starts.is_empty() || starts.len() != ends.len() {
        return Err(super::unmeasured(DEF.name, "no munmap was timed to its end"));
    }
    let us: Vec<f64> = starts.iter().zip(&ends).map(|(s, e)| (e - s) as f64 / sim.ghz() / 1e3).collect();
    let mut r = BTreeMap::new();
    r.insert("munmap_us".to_string(), us.iter().sum::<f64>() / us.len() as f64);
    r.insert("munmap_min_us".to_string(), us.iter().copied().fold(f64::INFINITY, f64::min));
    Ok(r)
}
