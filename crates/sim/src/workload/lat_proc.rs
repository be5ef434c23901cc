//! lmbench's `lat_proc fork`: how long a process takes to fork a child that
//! exits at once, and to wait for it.
//!
//! Source: lmbench 3 (github.com/intel/lmbench), `src/lat_proc.c`, `do_fork`:
//! the timed process loops `fork()`; the child calls `handle_scheduler` (a
//! no-op under the default `LMBENCH_SCHED`) and `exit(1)`; the parent calls
//! `waitpid(child_pid, NULL, 0)`. `benchmp` (`src/lib_timing.c`) runs the loop
//! in a process of its own and prints "Process fork+exit:" and the
//! microseconds per iteration. Nothing else is mapped or touched by the
//! benchmark: the timed process is a small dynamically linked C program.
//!
//! The model: one process (the simulated image: 16 pages each of text, data
//! and stack) writes, before timing, 16 pages of its data and 4 of its stack
//! (64 KB and 16 KB: estimates of what such a process has written, glibc's
//! and the program's data and bss, the relocated pages and the first heap
//! pages, and the stack's top pages), plus `extra_kb` of freshly mapped
//! anonymous memory (0 by default: lmbench maps none; a larger parent makes
//! `fork` copy more PTEs). Its text is not touched, so `fork` copies no text
//! PTE, as Linux's `copy_page_range` copies none of a file mapping without
//! anonymous pages (`vma_needs_copy`). Each iteration, timed after one
//! untimed:
//! 1. the parent forks (the simulated kernel write-protects its written PTEs,
//!    copies them and flushes the parent's address space, as `dup_mmap` ends
//!    with `flush_tlb_mm`); fork balancing places the child on the idlest CPU;
//! 2. the child writes one stack page and one data page (`exit`'s stdio and
//!    `atexit` bookkeeping: two copy-on-write faults) and reads one page of
//!    libc's text (`exit`'s code: a fault, as the child's first fetch of a
//!    file page faults in Linux; here it is the simulated kernel's anonymous
//!    fault, a page clear included, an estimate of a page-cache fault);
//! 3. the child exits: its address space is torn down (Linux's `exit_mmap`,
//!    whose flush arm64 makes `flush_tlb_mm`), and only then the parent, blocked
//!    in `waitpid`, is woken ([`Op::ExitNotify`]: `do_exit` calls `exit_notify`
//!    after `exit_mm`);
//! 4. the parent returns to user space and writes its stack (a write fault on
//!    the page `fork` write-protected; the child is gone, so the page is
//!    reused, not copied).
//!
//! Waiting: the parent reads a pipe the child's exit writes, after its
//! teardown. A token the child wrote before exiting (as `buildkernel`'s and
//! `sort_compute`'s children do, `ForkAll`) would let the parent fork
//! the next child while this one's address space is still being torn down on
//! another CPU, hiding the teardown and its flush, which `waitpid` does not.
//! What stays different from `waitpid`: no `SIGCHLD` is sent and no zombie
//! reaped (the task structures' freeing is not modelled), and the pipe's
//! wake-up path stands for `wait4`'s.
//!
//! Result: `us_per_fork`, microseconds per iteration (fork, the child's run
//! and exit, the parent's wake-up), lmbench's "Process fork+exit" figure; the
//! timed loop's span over its iterations, where lmbench takes the median of
//! its repetitions.

use super::{params, Params, WorkloadDef};
use crate::error::Error;
use crate::program::{Op, Program, Sys, DATA_VA, LIBC_TEXT_PAGE, STACK_VA, TEXT_VA};
use crate::sim::Sim;
use std::collections::BTreeMap;

params! {
    PARAMS;
    ITERS: Count("iters", 100, 1..=1_000_000)
        "timed forks, after one untimed";
    EXTRA_KB: Count("extra_kb", 0, 0..=4_194_304)
        "KB of anonymous memory the parent maps and writes beyond its image before timing (lmbench: 0)";
}

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef::new(
    "lat_proc",
    "lmbench lat_proc fork: fork a child that exits at once and wait for it; microseconds per \
     fork+exit+wait",
    PARAMS,
    &["us_per_fork"],
    |p, _, sim, _| setup(p, sim),
    |p, main, _| result(p, main),
    // The parent and one child at a time.
    |_, _, _| 8,
);

/// Data pages the parent has written before timing (an estimate).
const DATA_WRITTEN: u64 = 16;
/// Stack pages the parent has written before timing (an estimate).
const STACK_WRITTEN: u64 = 4;

/// The forked child: `exit(1)`'s writes and code fetch, then exit, waking the parent.
struct Child {
    done: u32,
    step: u8,
}

impl Program for Child {
    fn next(&mut self, _: u64) -> Op {
        self.step += 1;
        match self.step {
            1 => Op::Touch { va: STACK_VA + (STACK_WRITTEN - 1) * 4096, pages: 1, write: true },
            2 => Op::Touch { va: DATA_VA, pages: 1, write: true },
            3 => Op::Touch { va: TEXT_VA + LIBC_TEXT_PAGE * 4096, pages: 1, write: false },
            _ => Op::ExitNotify(self.done),
        }
    }
}

/// Where the parent is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    Data,
    Stack,
    Map,
    Fill,
    Pipe,
    PipeMade,
    Fork,
    Wait,
    Return,
    End,
    Exit,
}

/// The timed process: `do_fork`'s loop.
struct Parent {
    iters: u64,
    extra_pages: u64,
    done: u32,
    /// Forks waited for (the first untimed).
    forks: u64,
    started: bool,
    stage: Stage,
}

impl Program for Parent {
    fn next(&mut self, ret: u64) -> Op {
        loop {
            match self.stage {
                Stage::Data => {
                    self.stage = Stage::Stack;
                    return Op::Touch { va: DATA_VA, pages: DATA_WRITTEN, write: true };
                }
                Stage::Stack => {
                    self.stage = Stage::Map;
                    return Op::Touch { va: STACK_VA, pages: STACK_WRITTEN, write: true };
                }
                Stage::Map if self.extra_pages == 0 => self.stage = Stage::Pipe,
                Stage::Map => {
                    self.stage = Stage::Fill;
                    return Op::Sys(Sys::Mmap { pages: self.extra_pages, write: true });
                }
                Stage::Fill => {
                    self.stage = Stage::Pipe;
                    return Op::Touch { va: ret, pages: self.extra_pages, write: true };
                }
                Stage::Pipe => {
                    self.stage = Stage::PipeMade;
                    return Op::Sys(Sys::Pipe);
                }
                Stage::PipeMade => {
                    self.done = ret as u32;
                    self.stage = Stage::Fork;
                }
                Stage::Fork => {
                    if self.forks == 1 && !self.started {
                        // The warm-up fork is over: the timed loop starts.
                        self.started = true;
                        return Op::Mark("lat_proc_start");
                    }
                    self.stage = Stage::Wait;
                    return Op::Sys(Sys::Fork(Box::new(Child { done: self.done, step: 0 })));
                }
                Stage::Wait => {
                    self.stage = Stage::Return;
                    return Op::Sys(Sys::PipeRead(self.done));
                }
                Stage::Return => {
                    self.forks += 1;
                    self.stage = if self.forks == self.iters + 1 { Stage::End } else { Stage::Fork };
                    return Op::Touch { va: STACK_VA + (STACK_WRITTEN - 1) * 4096, pages: 1, write: true };
                }
                Stage::End => {
                    self.stage = Stage::Exit;
                    return Op::Mark("lat_proc_end");
                }
                Stage::Exit => return Op::Exit,
            }
        }
    }
}

/// Starts the timed process.
pub fn setup(p: &Params, sim: &mut Sim) -> Result<(), Error> {
    let parent = Parent {
        iters: ITERS.of(p),
        extra_pages: EXTRA_KB.of(p).div_ceil(4),
        done: 0,
        forks: 0,
        started: false,
        stage: Stage::Data,
    };
    sim.spawn(Box::new(parent))?;
    Ok(())
}

/// Returns `us_per_fork`: the timed loop's span over its iterations.
pub fn result(p: &Params, sim: &Sim) -> Result<BTreeMap<String, f64>, Error> {
    let (Some(start), Some(end)) = (sim.mark("lat_proc_start"), sim.mark("lat_proc_end")) else {
        return Err(super::unmeasured(DEF.name, "the timed loop did not finish"));
    };
    let mut r = BTreeMap::new();
    r.insert("us_per_fork".to_string(), (end - start) as f64 / ITERS.of(p) as f64 / sim.ghz() / 1e3);
    Ok(r)
}
