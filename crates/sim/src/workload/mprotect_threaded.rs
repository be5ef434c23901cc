//! Andrea Arcangeli's `mprotect-threaded`, one copy per CPU (seed 001).
//!
//! What the seed ran: `perf stat -r 10 ./for-each-cpu.sh ./mprotect-threaded 10000`,
//! where `for-each-cpu.sh` starts `nproc` copies in the background and waits for
//! them all; `perf stat`'s "seconds time elapsed" (2.170 s before the patch,
//! 0.139 s after, on the 32-CPU Ampere) is the time until the last copy exits.
//!
//! The test's source was not posted with the patch, and no public copy could be
//! found; the seed gives its name, its argument (10000 iterations) and its
//! behaviour under the patch: skipping the broadcast when the mm is active on at
//! most one CPU made it 15 times faster, so at each flush only one thread of the
//! process runs. The model therefore runs, in each copy, a main thread that maps
//! and fills a buffer of `pages` pages, creates one worker thread (`clone`) and
//! waits for it (a pipe read standing for `pthread_join`; while it waits its CPU
//! is idle and the mm is active on the worker's CPU alone). Each of the worker's
//! `iters` iterations toggles the protection of memory it touches:
//! `mprotect(PROT_READ)` (a downgrade, which must be invalidated), a read of every
//! page, `mprotect(PROT_READ|PROT_WRITE)` (an upgrade, which needs no
//! invalidation), and a write of every page (which faults once per page and makes
//! the PTE writable, as Linux does for private anonymous memory). Two `mprotect`
//! calls per iteration is an assumption.
//!
//! Copies: one per CPU (`--cpus N` runs N copies). Result: `elapsed_s`, the
//! simulated seconds from the start until the last copy's main thread has joined
//! its worker (its exit's teardown is not counted). Host time grows with
//! `cpus * iters * pages`; `--cpus 4096` is practical with `iters` of a few.

use super::{ParamDef, Params, WorkloadDef};
use crate::program::{Op, Program, Sys};
use crate::sim::Sim;
use tlbkit_policy::Policy;

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef {
    name: "mprotect_threaded",
    description: "mprotect-threaded, one copy per CPU: a thread toggling protection of memory it touches (seed 001)",
    params: &[
        ParamDef {
            key: "iters",
            default: 10000.0,
            min: 1.0,
            max: 10_000_000.0,
            doc: "iterations of each copy (the seed's argument: 10000)",
        },
        ParamDef {
            key: "pages",
            default: 1.0,
            min: 1.0,
            max: 512.0,
            doc: "4 KB pages each iteration protects and touches",
        },
    ],
    has_overhead: false,
    results: &["elapsed_s"],
};

/// A copy's main thread: maps and fills the buffer, starts the worker, joins it.
struct Main {
    iters: u64,
    pages: u64,
    step: u32,
    buf: u64,
    join: u32,
}

impl Program for Main {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        match self.step {
            1 => Op::Sys(Sys::Mmap { pages: self.pages, write: true }),
            2 => {
                self.buf = ret;
                Op::Touch { va: self.buf, pages: self.pages, write: true }
            }
            3 => Op::Sys(Sys::Pipe),
            4 => {
                self.join = ret as u32;
                let w = Worker { iters: self.iters, pages: self.pages, buf: self.buf, join: self.join, i: 0, phase: 0 };
                Op::Sys(Sys::Clone(Box::new(w)))
            }
            5 => Op::Sys(Sys::PipeRead(self.join)),
            6 => Op::Mark("end"),
            _ => Op::Exit,
        }
    }
}

/// The worker thread: the mprotect loop, then a wake-up for the joining main thread.
struct Worker {
    iters: u64,
    pages: u64,
    buf: u64,
    join: u32,
    i: u64,
    phase: u8,
}

impl Program for Worker {
    fn next(&mut self, _ret: u64) -> Op {
        if self.i == self.iters {
            self.i += 1;
            return Op::Sys(Sys::PipeWrite(self.join));
        }
        if self.i > self.iters {
            return Op::Exit;
        }
        let (va, pages) = (self.buf, self.pages);
        self.phase = (self.phase + 1) % 4;
        match self.phase {
            1 => Op::Sys(Sys::Mprotect { va, pages, write: false }),
            2 => Op::Touch { va, pages, write: false },
            3 => Op::Sys(Sys::Mprotect { va, pages, write: true }),
            _ => {
                self.i += 1;
                Op::Touch { va, pages, write: true }
            }
        }
    }
}

/// Starts one copy per CPU, as `for-each-cpu.sh` starts `nproc` of them.
pub fn setup<P: Policy>(p: &Params, sim: &mut Sim<P>) -> Result<(), String> {
    for _ in 0..sim.cfg.ncpus {
        let m = Main { iters: p["iters"] as u64, pages: p["pages"] as u64, step: 0, buf: 0, join: 0 };
        sim.spawn(Box::new(m))?;
    }
    Ok(())
}
