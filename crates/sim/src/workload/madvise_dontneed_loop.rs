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
//! With `flushers` below `threads`, only the first `flushers` threads run
//! the loop and the others spin in user space in the same address space, so
//! that every flush reaches their CPUs while they send none: the shape of
//! the microbenchmark in Nadav Amit's concurrent-flush series ("MADV_DONTNEED/touch
//! for a single page on one thread", n_threads in all, "2 thread (a single
//! remote TLB flush target)", `<20190525082203.6531-1-namit@vmware.com>`).
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
//! Threads `flushers` and up (counting the leader as 0) are spinners: after
//! the gate each reads its page and computes for about a microsecond in turn
//! (`flush_range`'s spinner loop, an estimate of a busy user loop) until every
//! flusher has ended; a flusher starts its loop only once every spinner
//! runs, so that every timed flush finds them.
//! Each page is its own mapping (its own VMA): under per-VMA locks the faults
//! share no lock word (`--set vma_locks`).
//!
//! Results: `iter_cycles`, cycles of one iteration (the `madvise` system call
//! and the store with its fault), mean over the flushing threads; `iter_ns`,
//! the same in nanoseconds.
//!
//! What stays different: the threads' pages are one page apart in separate
//! VMAs; a real `malloc`'d page may share a VMA (and its lock) with the
//! others'.

use super::flush_range::{Shared, Spinner, POLL};
use super::{params, Params, WorkloadDef};
use crate::error::Error;
use crate::program::{Op, Program, Sys};
use crate::sim::Sim;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

params! {
    PARAMS;
    THREADS: Count("threads", 0, 0..=4096)
        "threads of the one process (0: one per CPU)";
    ITERS: Count("iters", 200, 1..=1_000_000)
        "iterations of each thread";
    FLUSHERS: Count("flushers", 0, 0..=4096)
        "threads that run the loop, the leader first (0, or threads or more: every thread); the others spin in user \
         space until the last flusher ends";
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

/// What a thread does after the gate.
enum Role {
    /// Runs the loop; with spinners, `Some`: the crew to tell when it ends.
    Flusher(Option<Rc<Crew>>),
    /// Spins until the crew's flushers have ended (set once the gate opens).
    Spinner(Rc<Crew>, Option<Spinner>),
}

/// The spinners' shared state, how many there are, and the flushers still running.
struct Crew {
    shared: Rc<Shared>,
    spinners: u64,
    flushers_left: Cell<u64>,
}

/// One thread's loop.
struct Looper {
    /// The gate to wait on (`None`: the leader's own loop, which starts at once).
    gate: Option<u32>,
    iters: u64,
    page: u64,
    done: u64,
    role: Role,
    /// Where in the thread: 0 map, 1 first write, 2 gate, 3 start, 4 madvise,
    /// 5 store, 6 end, 7 exit.
    step: u8,
}

impl Looper {
    fn new(gate: Option<u32>, iters: u64, role: Role) -> Self {
        Looper { gate, iters, page: 0, done: 0, role, step: 0 }
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
                    match &mut self.role {
                        Role::Spinner(crew, spin) => {
                            let page = self.page;
                            return spin.get_or_insert_with(|| Spinner::new(crew.shared.clone(), page)).next(ret);
                        }
                        // A flusher starts once every spinner runs.
                        Role::Flusher(Some(crew)) if crew.shared.started() < crew.spinners => {
                            return Op::Compute(POLL);
                        }
                        Role::Flusher(_) => {}
                    }
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
                    if let Role::Flusher(Some(crew)) = &self.role {
                        crew.flushers_left.set(crew.flushers_left.get() - 1);
                        if crew.flushers_left.get() == 0 {
                            crew.shared.end();
                        }
                    }
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
    /// With spinners, their crew.
    crew: Option<Rc<Crew>>,
    own: Option<Looper>,
}

impl Leader {
    /// The role of thread `i` (the leader is 0).
    fn role(&self, i: u64) -> Role {
        match &self.crew {
            Some(crew) if i >= self.threads - crew.spinners => Role::Spinner(crew.clone(), None),
            Some(crew) => Role::Flusher(Some(crew.clone())),
            None => Role::Flusher(None),
        }
    }
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
            let l = Looper::new(Some(self.gate), self.iters, self.role(self.cloned));
            return Op::Sys(Sys::CloneOn(self.cloned as usize % self.cpus, Box::new(l)));
        }
        if self.opened < others {
            self.opened += 1;
            return Op::Sys(Sys::PipeWrite(self.gate));
        }
        let mut l = Looper::new(None, self.iters, self.role(0));
        let op = l.next(0);
        self.own = Some(l);
        op
    }
}

/// The threads that run the loop (`flushers`, 0 or past `threads`: all).
fn flushers(p: &Params, threads: u64) -> u64 {
    match FLUSHERS.of(p) {
        0 => threads,
        n => n.min(threads),
    }
}

/// Starts the process.
pub fn setup(p: &Params, sim: &mut Sim) -> Result<(), Error> {
    let threads = THREADS.or_cpus(p, sim.cfg.ncpus);
    let flushers = flushers(p, threads);
    let crew = (flushers < threads).then(|| {
        Rc::new(Crew { shared: Shared::new(), spinners: threads - flushers, flushers_left: Cell::new(flushers) })
    });
    let l = Leader {
        threads,
        cpus: sim.cfg.ncpus.max(1),
        iters: ITERS.of(p),
        gate: 0,
        started: false,
        cloned: 0,
        opened: 0,
        crew,
        own: None,
    };
    sim.spawn(Box::new(l))?;
    Ok(())
}

/// Returns `iter_cycles` and `iter_ns` (module documentation).
pub fn result(p: &Params, sim: &Sim) -> Result<BTreeMap<String, f64>, Error> {
    let flushers = flushers(p, THREADS.or_cpus(p, sim.cfg.ncpus));
    let (starts, ends) = (super::mark_times(sim, "start"), super::mark_times(sim, "end"));
    if ends.len() as u64 != flushers || starts.len() != ends.len() {
        return Err(super::unmeasured(DEF.name, format!("{} of {flushers} flushing threads finished", ends.len())));
    }
    // One start and one end per flushing thread: the sums' difference is the
    // sum of their times.
    let busy = ends.iter().sum::<u64>().saturating_sub(starts.iter().sum::<u64>());
    let cycles = busy as f64 / (flushers * ITERS.of(p)) as f64;
    let mut r = BTreeMap::new();
    r.insert("iter_cycles".to_string(), cycles);
    r.insert("iter_ns".to_string(), cycles / sim.ghz());
    Ok(r)
}
