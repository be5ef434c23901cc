//! Andrea Arcangeli's `mprotect-threaded`, one copy per CPU (origin 001).
//!
//! What the origin ran: `perf stat -r 10 ./for-each-cpu.sh ./mprotect-threaded 10000`,
//! where `for-each-cpu.sh` starts `nproc` copies in the background and waits for
//! them all; `perf stat`'s "seconds time elapsed" (2.170 s before the patch,
//! 0.139 s after, on the 32-CPU Ampere) is the time until the last copy exits.
//!
//! The origin does not print the program. QI Fuli's reply in the v2 thread prints
//! `mprotect-attacker-threaded.c`, which the model follows: `pthread_create` of a
//! thread that only calls `pause()` (so the mm has two users, which defeated
//! the v1 patch's `mm_users` test, yet runs on one CPU), `mmap` of 4 MiB
//! (`PROT_WRITE`, private anonymous), `memset` of all of it, then `loop` times
//! `mprotect(buf, size, PROT_READ); mprotect(buf, size, PROT_WRITE);`, then
//! `munmap`. Each `mprotect` rewrites every present PTE and flushes the whole
//! range (Linux does so for upgrades too, see `Sim::mprotect`); 1024 pages is
//! at least arm64's `MAX_TLBI_OPS` (512), so the flush is one whole-ASID
//! invalidation. That the origin's `mprotect-threaded` is this program is an
//! assumption.
//!
//! The model's sleeper blocks on a pipe read (standing for `pause()`); the main
//! thread writes the pipe when it is done, standing for `exit_group` killing it.
//!
//! Copies: one per CPU (`--cpus N` runs N copies). Result: `elapsed_s`, the
//! simulated seconds from the start until the last copy's main thread has
//! unmapped its buffer (the exit's teardown is not counted). Host time grows
//! with `cpus * iters`: broadcasts cost the host O(sockets) each, not O(cpus),
//! and a loop's `mprotect` picks the PTEs it changes from each table's bitmaps
//! and changes them as one patch of the table (`pagetable::patch`: under v6.0
//! and later every call changes all 1024), rather than PTE by PTE; host memory
//! does not grow with `iters`, since the oracle collects the obligations of
//! returned flushes. The guide's "Simulator speed at scale" gives the time of
//! the origin's `iters=10000` at `--cpus 4096` on `altra`.

use super::{params, Params, WorkloadDef};
use crate::error::Error;
use crate::program::{Op, Program, Sys};
use crate::sim::Sim;

params! {
    PARAMS;
    ITERS: Count("iters", 10000, 1..=10_000_000)
        "loops of each copy, two mprotects each (the origin's argument: 10000)";
    PAGES: Count("pages", 1024, 1..=262_144)
        "4 KB pages of the buffer (the program's 4 MiB: 1024)";
}

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef::new(
    "mprotect_threaded",
    "mprotect-threaded, one copy per CPU: mprotect(READ)/mprotect(WRITE) of a written 4 MiB buffer, a \
     second thread asleep (origin 001)",
    PARAMS,
    &["elapsed_s"],
    |p, _, sim, _| setup(p, sim),
    |_, main, _| super::elapsed("mprotect_threaded", main),
    // One process per CPU.
    |_, _, cpus| cpus + 8,
)
.origin("001");

/// A copy's main thread: the program's `main`.
struct Main {
    iters: u64,
    pages: u64,
    step: u32,
    buf: u64,
    pause: u32,
    /// `mprotect` calls made so far (two per loop).
    calls: u64,
}

impl Program for Main {
    fn next(&mut self, ret: u64) -> Op {
        if self.step == 4 && self.calls < 2 * self.iters {
            // The loop: PROT_READ on even calls, PROT_WRITE on odd ones.
            let write = self.calls % 2 == 1;
            self.calls += 1;
            return Op::Sys(Sys::Mprotect { va: self.buf, pages: self.pages, write });
        }
        self.step += 1;
        match self.step {
            1 => Op::Sys(Sys::Pipe),
            2 => {
                self.pause = ret as u32;
                Op::Sys(Sys::Clone(Box::new(Sleeper { pause: self.pause, woken: false })))
            }
            3 => Op::Sys(Sys::Mmap { pages: self.pages, write: true }),
            4 => {
                self.buf = ret;
                Op::Touch { va: self.buf, pages: self.pages, write: true }
            }
            5 => Op::Sys(Sys::Munmap { va: self.buf, pages: self.pages }),
            6 => Op::Mark("end"),
            7 => Op::Sys(Sys::PipeWrite(self.pause)),
            _ => Op::Exit,
        }
    }
}

/// The second thread: `pause()` until the process exits.
struct Sleeper {
    pause: u32,
    woken: bool,
}

impl Program for Sleeper {
    fn next(&mut self, _ret: u64) -> Op {
        if self.woken {
            return Op::Exit;
        }
        self.woken = true;
        Op::Sys(Sys::PipeRead(self.pause))
    }
}

/// Starts one copy per CPU, as `for-each-cpu.sh` starts `nproc` of them.
pub fn setup(p: &Params, sim: &mut Sim) -> Result<(), Error> {
    for _ in 0..sim.cfg.ncpus {
        let m = Main { iters: ITERS.of(p), pages: PAGES.of(p), step: 0, buf: 0, pause: 0, calls: 0 };
        sim.spawn(Box::new(m))?;
    }
    Ok(())
}
