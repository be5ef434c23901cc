//! The `sort-compute` script: many short `sort` processes (origin 001).
//!
//! What the origin ran (`perf stat -r 10 ./sort-compute`, 1.809 s before, 1.640 s
//! after on the 32-CPU Ampere):
//!
//! ```text
//! for x in `seq 256`; do
//!     for i in `seq 32`; do /usr/bin/sort </usr/bin/sort >/dev/null; done &
//! done
//! wait
//! ```
//!
//! 256 background shells each run 32 `sort`s one after another: 8192 processes,
//! each forked by its shell, exec'd, run briefly and reaped.
//!
//! The model: a script process forks `loops` shells and waits for all of them
//! (a pipe each shell writes when done). Each shell, `runs` times, does a little
//! of its own work (a few text, data and stack pages), forks a child and waits for it
//! (a pipe the child writes before it exits, standing for `wait`); after the
//! fork it writes a data and a stack page (bash recording the job), which copies
//! them if the child has not exec'd yet. The child first writes a data and a
//! stack page itself (bash's set-up of signals and redirections before `exec`,
//! copy-on-write faults whose flushes concern its mm alone), then
//! `execve`s `sort`, touches its text (16 pages), maps the C library (a 1.5 MB
//! file mapping) and reads three 64 KB runs of it, writes its data (8 pages:
//! relocations, the C library's data) and stack (4), maps a heap of `heap_pages`
//! and fills it (the input, /usr/bin/sort itself, read into memory), computes
//! for `compute_us`, and exits: about a hundred page faults, as a small dynamic
//! executable takes. Each shell, sort and the script account for a fork's write-protect
//! flush, copy-on-write faults, an exec's and an exit's teardown flush, and the
//! context switches of waiting.
//!
//! Result: `elapsed_s`, from the start until the script's `wait` returns. The
//! page counts are estimates. `compute_us`, the sorting itself, is fitted to
//! the origin's *patched* figure: with 6250 us per sort the patched run on `emag`
//! takes 1.642 s against the origin's 1.640 s (6.4 ms of CPU per sort, start-up
//! included); the stock/patched difference then comes from the model alone
//! (origin001-sort in `tlbkit reproduce`). Scaling: host time grows with `loops *
//! runs` (compute is free), simulated time with `loops * runs * compute_us / cpus`; at
//! the defaults (8192 processes) a run on 32 CPUs takes about a second of host
//! time in release mode.

use super::{params, ForkAll, OpQueue, Params, WorkloadDef};
use crate::error::Error;
use crate::program::{Op, Program, Sys, DATA_VA, STACK_VA, TEXT_PAGES, TEXT_VA};
use crate::sim::Sim;

params! {
    PARAMS;
    LOOPS: Count("loops", 256, 1..=65536)
        "background shells (the script's 256)";
    RUNS: Count("runs", 32, 1..=65536)
        "sorts each shell runs in turn (32)";
    HEAP_PAGES: Count("heap_pages", 32, 1..=65536)
        "4 KB heap pages each sort fills (its ~100 KB input)";
    COMPUTE_US: Real("compute_us", 6250.0, 0.0..=1e6)
        "microseconds each sort computes after reading its input";
}

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef::new(
    "sort_compute",
    "sort-compute: 256 background shells each running 32 short sort processes in turn (origin 001)",
    PARAMS,
    &["elapsed_s"],
    |p, _, sim, _| setup(p, sim),
    |_, main, _| super::elapsed("sort_compute", main),
    // The script, each loop's shell and the sort it waits for (one more during an
    // exec); a woken parent that preempts the child that signalled it may fork
    // the next before that one has exited (CFS and EEVDF): twice that.
    |p, _, _| 4 * LOOPS.usize(p) + 16,
)
.origin("001");

/// The sizes every process of the run shares.
#[derive(Clone, Copy)]
struct Sizes {
    runs: u64,
    heap_pages: u64,
    compute: u64,
}

/// One background shell: `runs` sorts, one after another.
struct Shell {
    sizes: Sizes,
    done: u32,
    wait: Wait,
    run: u64,
    queue: OpQueue,
}

/// The pipe a shell's children write when they finish.
#[derive(Clone, Copy)]
enum Wait {
    /// Not asked for yet.
    None,
    /// Asked for: the next return value is its id.
    Asked,
    /// Created.
    Pipe(u32),
}

impl Program for Shell {
    fn next(&mut self, ret: u64) -> Op {
        if let Some(op) = self.queue.pop() {
            return op;
        }
        let wait = match self.wait {
            Wait::None => {
                self.wait = Wait::Asked;
                return Op::Sys(Sys::Pipe);
            }
            Wait::Asked => ret as u32,
            Wait::Pipe(w) => w,
        };
        self.wait = Wait::Pipe(wait);
        if self.run == self.sizes.runs {
            self.run += 1;
            return Op::Sys(Sys::PipeWrite(self.done));
        }
        if self.run > self.sizes.runs {
            return Op::Exit;
        }
        self.run += 1;
        let child = Sort { sizes: self.sizes, wait, step: 0, libc: 0, heap: 0 };
        self.queue.start([
            // The shell's own work between commands: parsing, its variables, its stack.
            Op::Touch { va: TEXT_VA, pages: 2, write: false },
            Op::Touch { va: DATA_VA, pages: 2, write: true },
            Op::Touch { va: STACK_VA, pages: 1, write: true },
            Op::Sys(Sys::Fork(Box::new(child))),
            // bash records the child in its job table before it waits: writes that
            // copy pages the fork has just shared, unless the child has exec'd.
            Op::Touch { va: DATA_VA, pages: 2, write: true },
            Op::Touch { va: STACK_VA, pages: 1, write: true },
            Op::Sys(Sys::PipeRead(wait)),
        ])
    }
}

/// One `sort </usr/bin/sort >/dev/null`.
struct Sort {
    sizes: Sizes,
    wait: u32,
    step: u32,
    libc: u64,
    heap: u64,
}

/// Pages of the C library's text mapping (1.5 MB).
const LIBC_PAGES: u64 = 384;
/// Pages of each of the three runs of it that a sort reads.
const LIBC_RUN: u64 = 16;

impl Program for Sort {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        match self.step {
            // bash's forked child before exec (signals, redirections): copies of
            // the shell's data and stack pages.
            1 => Op::Touch { va: DATA_VA, pages: 2, write: true },
            2 => Op::Touch { va: STACK_VA, pages: 1, write: true },
            3 => Op::Sys(Sys::Execve),
            4 => Op::Touch { va: TEXT_VA, pages: TEXT_PAGES, write: false },
            5 => Op::Sys(Sys::Mmap { pages: LIBC_PAGES, write: false }),
            s @ 6..=8 => {
                if s == 6 {
                    self.libc = ret;
                }
                let run = (s - 6) as u64;
                Op::Touch { va: self.libc + run * (LIBC_PAGES / 3) * 4096, pages: LIBC_RUN, write: false }
            }
            9 => Op::Touch { va: DATA_VA, pages: 8, write: true },
            10 => Op::Touch { va: STACK_VA, pages: 4, write: true },
            11 => Op::Sys(Sys::Mmap { pages: self.sizes.heap_pages, write: true }),
            12 => {
                self.heap = ret;
                Op::Touch { va: self.heap, pages: self.sizes.heap_pages, write: true }
            }
            13 => Op::Compute(self.sizes.compute),
            14 => Op::Sys(Sys::PipeWrite(self.wait)),
            _ => Op::Exit,
        }
    }
}

/// Starts the script.
pub fn setup(p: &Params, sim: &mut Sim) -> Result<(), Error> {
    let sizes = Sizes {
        runs: RUNS.of(p),
        heap_pages: HEAP_PAGES.of(p),
        compute: (COMPUTE_US.of(p) * 1000.0 * sim.ghz()) as u64,
    };
    // The script: forks the shells, then waits for them all.
    let script = ForkAll::new(LOOPS.of(p), move |done| {
        Box::new(Shell { sizes, done, wait: Wait::None, run: 0, queue: OpQueue::default() }) as Box<dyn Program>
    });
    sim.spawn(Box::new(script))?;
    Ok(())
}
