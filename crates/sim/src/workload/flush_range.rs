//! `flush_range`: the cost of one `mprotect` call by the number of pages it
//! flushes, in a multi-threaded process, for range invalidation
//! (`FEAT_TLBIRANGE`, `--set tlbi_range=on|off` on arm64).
//!
//! This is a microbenchmark of this project, not a published program. What it
//! isolates is `flush_tlb_range` of a user range whose address space is live
//! on every CPU, so that the flush is broadcast (a multi-threaded program's
//! case), as a function of the range's size.
//!
//! The model: one process. Its main thread maps `pages` pages of anonymous
//! memory and writes them; one more thread is bound to each other CPU
//! (`CloneOn`, as `pthread_create` after `sched_setaffinity`; `spinners` of
//! them, 0 meaning one per other CPU), each reading one page of its own in a
//! loop of about a microsecond (`SPIN`, an estimate: a loop that keeps the CPU
//! busy in user mode in this address space). Once every spinner runs, the main
//! thread makes one untimed iteration, then `iters` timed ones. An iteration:
//! 1. a write to each of the `pages` pages (untimed; a write fault each under a
//!    kernel before v6.0, whose `mprotect` back to writable leaves private
//!    anonymous PTEs read-only until written; from v6.0 the `mprotect` makes
//!    the written pages writable itself);
//! 2. `mprotect(PROT_READ)` of the pages, timed: a downgrade of every present
//!    PTE, then `flush_tlb_range` of the range;
//! 3. `mprotect(PROT_READ | PROT_WRITE)` of them, timed: the kernel rewrites
//!    every present PTE and flushes the pages: before v5.19 the whole range
//!    once it met a present PTE; from v5.19 the span of the PTEs
//!    `pte_needs_flush(oldpte, ptent)` picks (x86's and arm64's own pick a PTE
//!    whose write bit changed, as it does here from v6.0, which makes the
//!    written pages writable; the generic one, arm64's before v6.19, every
//!    present PTE). See [`crate::preset::Kernel::mprotect_gathers`].
//!
//! So every timed call flushes `pages` pages. What arm64 Linux v7.0's
//! `__flush_tlb_range_nosync` issues for them (`crates/policy`,
//! `asid/linux_arm64.rs`, `flush_range`): without range operations, one
//! `TLBI VAE1IS` per page below `MAX_TLBI_OPS` (512 pages), and one
//! `TLBI ASIDE1IS` for the whole ASID from 512 pages on; with them
//! (`tlbi_range=on`), `__flush_tlb_range_op`'s decomposition: a range
//! operation for each scale that fits (scale 1 covers multiples of 64 pages,
//! scale 0 even counts of 2 to 62), and one `TLBI VAE1IS` for an odd last page.
//! So 1 page is one by-VA TLBI either way; 2 to 64 pages one range operation
//! (plus one by-VA TLBI when odd); 511 pages three (448 + 62 + 1); 512 one.
//! Each is followed by the `DSB ISH` that waits for every CPU.
//!
//! What is not modelled: the real `mprotect`'s VMA split and merge (two VMAs
//! after the first call, merged again by the second) costs only the
//! simulated kernel's fixed `fault_path`; the spinners' loop is a read and a
//! computation, not real code.
//!
//! On x86 Linux (IPIs to the spinners' CPUs, each flushing locally) the same
//! calls give the cost of a range flush by its page count for the three ways a
//! CPU drops a range: `INVLPG` per page (`--set flush_ceiling` at or above
//! `pages`), `INVLPG` and an `INVPCID` of the user PCID per page under
//! page-table isolation (`--set pti=on` on a machine with `INVPCID`), and a
//! full flush (`--set flush_ceiling=0`, every range above the ceiling). Every
//! timed call flushes `pages` pages on every CPU, so at one page count the
//! calls differ only by the flush. That is the flush side of the ceiling's
//! trade only: the TLB refill a full flush causes falls in the next
//! iteration's untimed writes (and the spinners' reads), which the run's
//! `tlb_misses`, `page_walks` and `sim_time_ns` metrics show, not the calls.
//!
//! Results: `us_per_call`, the mean of the timed `mprotect` calls (both
//! directions), entry to exit, in microseconds; `cycles_per_call`, the same
//! in the machine's core cycles.

use super::{params, OpQueue, Params, WorkloadDef};
use crate::error::Error;
use crate::program::{Op, Program, Sys};
use crate::sim::Sim;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

params! {
    PARAMS;
    PAGES: Count("pages", 1, 1..=512)
        "4 KB pages written and protected";
    ITERS: Count("iters", 50, 1..=1_000_000)
        "timed iterations (two mprotect calls each), after one untimed";
    SPINNERS: Count("spinners", 0, 0..=4095)
        "threads bound one per CPU from CPU 1, keeping the address space live (0, or more than the other CPUs: one per \
         other CPU)";
}

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef::new(
    "flush_range",
    "mprotect read-only and back of N written pages while bound threads keep the address space live on \
     every CPU; microseconds per flushing call",
    PARAMS,
    &["us_per_call", "cycles_per_call"],
    |p, _, sim, _| setup(p, sim),
    |p, main, _| result(p, main),
    // One process.
    |_, _, _| 8,
);

/// Cycles of one pass of a spinner's loop after its read (an estimate, about a
/// microsecond at 2 to 3 GHz).
const SPIN: u64 = 2500;
/// Cycles of one poll of the spinners' count by the main thread (untimed).
pub(super) const POLL: u64 = 1000;

/// What the threads share.
pub(super) struct Shared {
    /// Spinners that have started.
    started: Cell<u64>,
    /// Set when the main thread is done: the spinners exit.
    done: Cell<bool>,
}

impl Shared {
    /// No spinner started, not done.
    pub(super) fn new() -> Rc<Self> {
        Rc::new(Shared { started: Cell::new(0), done: Cell::new(false) })
    }

    /// How many spinners have started.
    pub(super) fn started(&self) -> u64 {
        self.started.get()
    }

    /// Tells the spinners to exit at their next step.
    pub(super) fn end(&self) {
        self.done.set(true);
    }
}

/// A thread bound to its CPU, reading one page of its own until the end (also
/// `madvise_dontneed_loop`'s threads that do not flush).
pub(super) struct Spinner {
    shared: Rc<Shared>,
    page: u64,
    started: bool,
    read: bool,
}

impl Spinner {
    /// A spinner reading `page` (mapped and written by its process) until `shared` ends.
    pub(super) fn new(shared: Rc<Shared>, page: u64) -> Self {
        Spinner { shared, page, started: false, read: false }
    }
}

impl Program for Spinner {
    fn next(&mut self, _: u64) -> Op {
        if !self.started {
            self.started = true;
            self.shared.started.set(self.shared.started.get() + 1);
        }
        if self.shared.done.get() {
            return Op::Exit;
        }
        self.read = !self.read;
        if self.read {
            Op::Touch { va: self.page, pages: 1, write: false }
        } else {
            Op::Compute(SPIN)
        }
    }
}

/// The main thread.
struct Main {
    shared: Rc<Shared>,
    pages: u64,
    iters: u64,
    spinners: u64,
    /// Where the spinners' pages start (one each), then the protected range.
    spin_va: u64,
    va: u64,
    step: u64,
    /// Iterations done (the first untimed).
    iter: u64,
    /// The ops of the current iteration.
    queue: OpQueue,
}

impl Program for Main {
    fn next(&mut self, ret: u64) -> Op {
        if let Some(op) = self.queue.pop() {
            return op;
        }
        self.step += 1;
        match self.step {
            1 => return Op::Sys(Sys::Mmap { pages: self.spinners.max(1), write: true }),
            2 => {
                self.spin_va = ret;
                return Op::Touch { va: ret, pages: self.spinners.max(1), write: true };
            }
            3 => return Op::Sys(Sys::Mmap { pages: self.pages, write: true }),
            4 => {
                self.va = ret;
                for k in 0..self.spinners {
                    let s = Spinner::new(self.shared.clone(), self.spin_va + k * 4096);
                    self.queue.push(Op::Sys(Sys::CloneOn(k as usize + 1, Box::new(s))));
                }
                return self.queue.pop().unwrap_or(Op::Compute(0));
            }
            _ => {}
        }
        if self.shared.started() < self.spinners {
            return Op::Compute(POLL);
        }
        if self.iter == self.iters + 1 {
            self.shared.end();
            return Op::Exit;
        }
        let (va, pages) = (self.va, self.pages);
        let timed = self.iter > 0;
        self.iter += 1;
        let mut ops = vec![Op::Touch { va, pages, write: true }];
        for write in [false, true] {
            if timed {
                ops.push(Op::Mark("call_start"));
            }
            ops.push(Op::Sys(Sys::Mprotect { va, pages, write }));
            if timed {
                ops.push(Op::Mark("call_end"));
            }
        }
        self.queue.start(ops)
    }
}

/// Returns the spinners of a run on `cpus` CPUs: one per other CPU at most.
fn spinners(p: &Params, cpus: usize) -> u64 {
    let others = cpus.saturating_sub(1) as u64;
    match SPINNERS.of(p) {
        0 => others,
        n => n.min(others),
    }
}

/// Starts the process.
pub fn setup(p: &Params, sim: &mut Sim) -> Result<(), Error> {
    let main = Main {
        shared: Shared::new(),
        pages: PAGES.of(p),
        iters: ITERS.of(p),
        spinners: spinners(p, sim.cfg.ncpus),
        spin_va: 0,
        va: 0,
        step: 0,
        iter: 0,
        queue: OpQueue::default(),
    };
    sim.spawn(Box::new(main))?;
    Ok(())
}

/// Returns `us_per_call` and `cycles_per_call`: the mean of the timed
/// `mprotect` calls, in microseconds and in cycles.
pub fn result(p: &Params, sim: &Sim) -> Result<BTreeMap<String, f64>, Error> {
    let (starts, ends) = (super::mark_times(sim, "call_start"), super::mark_times(sim, "call_end"));
    let want = 2 * ITERS.usize(p);
    if starts.len() != want || ends.len() != want {
        return Err(super::unmeasured(DEF.name, format!("{} of {want} mprotect calls were timed", ends.len())));
    }
    let cycles: u64 = starts.iter().zip(&ends).map(|(s, e)| e - s).sum();
    let mut r = BTreeMap::new();
    r.insert("us_per_call".to_string(), cycles as f64 / want as f64 / sim.ghz() / 1e3);
    r.insert("cycles_per_call".to_string(), cycles as f64 / want as f64);
    Ok(r)
}
