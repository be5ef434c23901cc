//! A single-page `MADV_DONTNEED`-and-touch loop: each thread of one process
//! zaps a page of its own with `madvise(MADV_DONTNEED)` and writes it again,
//! over and over, while the other threads do the same on theirs.
//!
//! # The benchmark
//! No published program is followed; the loop is stated here. One process
//! runs `threads` threads. Each maps one anonymous, private, read-write page
//! of its own (`mmap`) and writes it once, then all start together and each
//! runs `iters` iterations of: `madvise(page, 4096, MADV_DONTNEED)` (the zap
//! of one PTE and its flush: on every CPU that runs the mm, since the others'
//! threads are live there) and a one-byte store to the page (a write fault
//! that allocates and zeroes a fresh page and maps it). The time of an
//! iteration is the thread's time over its iterations divided by their
//! number, averaged over the threads.
//!
//! It is the core of will-it-scale's `tlb_flush2` (`workload/will_it_scale_tlb_flush2.rs`)
//! without its `mmap` and `munmap` of 1 MiB and its read, and differs from
//! `madvise_bench` with `chunk_kb=4`: that one is single-threaded and advises
//! each page of a written range once, one call after another, with no store
//! between the calls, so no call there refaults.
//!
//! # The model
//! A leader (on CPU 0) clones `threads - 1` threads, thread `i` bound to CPU
//! `i` (modulo the CPUs), as `pthread_create` with an affinity does; each maps
//! and writes its page, then waits on a gate (a pipe) that the leader opens
//! once it has cloned them all; the leader is the last thread itself. Each
//! thread records its start after the gate and its end after its last store.
//! Each page is its own mapping (its own VMA): under per-VMA locks the faults
//! share no lock word (`--set vma_locks`).
//!
//! Results: `iter_cycles`, cycles of one iteration (the `madvise` system call
//! and the store with its fault), mean over the threads; `iter_ns`, the same
//! in nanoseconds.
//!
//! What stays different: the threads' pages are one page apart in separate
//! VMAs; a real `malloc`'d page may share a VMA (and its lock) with the
//! others'.

use super::{params, Params, WorkloadDef};
use crate::error::Error;
use crate::program::{Op, Program, Sys};
use crate::sim::Sim;
use std::collections::BTreeMap;

params! {
    PARAMS;
    THREADS: Count("threads", 0, 0..=4096)
        "threads of the one process (0: one per CPU)";
    ITERS: Count("iters", 200, 1..=1_000_000)
        "iterations of each thread";
}

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef::new(
    "madvise_dontneed_loop",
    "threads of one process each loop: madvise(MADV_DONTNEED) one page of their own (a flush of every \
     CPU running the mm), then write it (a fault); time per iteration",
    PARAMS,
    &["iter_ns", "iter_cycles"],
    |p, _, sim, _| setup(p, sim),
    |p, main, _| result(p, main),
    // One process.
    |_, _, _| 8,
);

/// One thread's loop.
struct Looper {
    /// The gate to wait on (`None`: the leader's own loop, which starts at once).
    gate: Option<u32>,
    iters: u64,
    page: u64,
    done: u64,
    /// Where in the thread: 0 map, 1 first write, 2 gate, 3 start, 4 madvise,
    /// 5 store, 6 end, 7 exit.
    step: u8,
}

impl Looper {
    fn new(gate: Option<u32>, iters: u64) -> Self {
        Looper { gate, iters, page: 0, done: 0, step: 0 }
    }
}

impl Program for Looper {
    fn next(&mut self, ret: u64) -> Op {
        loop {
            match self.step {
                0 => {
                    self.step = 1;
                    return Op::Sys(Sys::Mmap { pages: 1, write: true });
                }
                1 => {
                    self.page = ret;
                    self.step = 2;
                    return Op::Touch { va: self.page, pages: 1, write: true };
                }
                2 => {
                    self.step = 3;
                    if let Some(g) = self.gate {
                        return Op::Sys(Sys::PipeRead(g));
                    }
                }
                3 => {
                    self.step = 4;
                    return Op::Mark("start");
                }
                4 => {
                    if self.done == self.iters {
                        self.step = 6;
                        continue;
                    }
                    self.step = 5;
                    return Op::Sys(Sys::Madvise { va: self.page, pages: 1 });
                }
                5 => {
                    self.done += 1;
                    self.step = 4;
                    return Op::Touch { va: self.page, pages: 1, write: true };
                }
                6 => {
                    self.step = 7;
                    return Op::Mark("end");
                }
                _ => return Op::Exit,
            }
        }
    }
}

/// The leader: makes the gate, clones the other threads, opens the gate once
/// per thread, then runs its own loop.
struct Leader {
    threads: u64,
    cpus: usize,
    iters: u64,
    gate: u32,
    started: bool,
    cloned: u64,
    opened: u64,
    own: Option<Looper>,
}

impl Program for Leader {
    fn next(&mut self, ret: u64) -> Op {
        if let Some(l) = &mut self.own {
            return l.next(ret);
        }
        if !self.started {
            self.started = true;
            return Op::Sys(Sys::Pipe);
        }
        if self.cloned == 0 && self.opened == 0 {
            self.gate = ret as u32;
        }
        let others = self.threads - 1;
        if self.cloned < others {
            self.cloned += 1;
            let l = Looper::new(Some(self.gate), self.iters);
            return Op::Sys(Sys::CloneOn(self.cloned as usize % self.cpus, Box::new(l)));
        }
        if self.opened < others {
            self.opened += 1;
            return Op::Sys(Sys::PipeWrite(self.gate));
        }
        let mut l = Looper::new(None, self.iters);
        let op = l.next(0);
        self.own = Some(l);
        op
    }
}

/// Starts the process.
pub fn setup(p: &Params, sim: &mut Sim) -> Result<(), Error> {
    let l = Leader {
        threads: THREADS.or_cpus(p, sim.cfg.ncpus),
        cpus: sim.cfg.ncpus.max(1),
        iters: ITERS.of(p),
        gate: 0,
        started: false,
        cloned: 0,
        opened: 0,
        own: None,
    };
    sim.spawn(Box::new(l))?;
    Ok(())
}

/// Returns `iter_cycles` and `iter_ns` (module documentation).
pub fn result(p: &Params, sim: &Sim) -> Result<BTreeMap<String, f64>, Error> {
    let threads = THREADS.or_cpus(p, sim.cfg.ncpus);
    let (starts, ends) = (super::mark_times(sim, "start"), super::mark_times(sim, "end"));
    if ends.len() as u64 != threads || starts.len() != ends.len() {
        return Err(super::unmeasured(DEF.name, format!("{} of {threads} threads finished", ends.len())));
    }
    // One start and one end per thread: the sums' difference is the sum of
    // the threads' times.
    let busy = ends.iter().sum::<u64>().saturating_sub(starts.iter().sum::<u64>());
    let cycles = busy as f64 / (threads * ITERS.of(p)) as f64;
    let mut r = BTreeMap::new();
    r.insert("iter_cycles".to_string(), cycles);
    r.insert("iter_ns".to_string(), cycles / sim.ghz());
    Ok(r)
}
