//! will-it-scale's `context_switch1` (`context_switch1_threads`,
//! `context_switch1_processes`): "Context switch via pipes".
//!
//! Source: github.com/antonblanchard/will-it-scale, `tests/context_switch1.c`
//! `testcase()` and `child()`, run by the harness `main.c` (see
//! [`super::will_it_scale`]). Each task creates two pipes and starts a partner
//! with `new_task`: in the `_threads` binary a `pthread_create`d thread, in
//! `_processes` a `fork`ed child; either inherits the task's binding to its
//! core, so task and partner share it. The task loops: write one byte to the
//! first pipe, read one byte from the second, add 2 to its counter; the
//! partner reads the first and writes the second. One round trip is two
//! iterations (`*iterations += 2`), two wake-ups and two context switches on
//! the shared CPU; in threads mode both sides run one address space (every
//! task's partner is a thread of the one process, which runs on every CPU),
//! in process mode each switch changes address space, and no flush is ever
//! sent.
//!
//! The model: the harness starts `tasks` tasks (`mode` 0 threads, 1
//! processes), each bound to its CPU; each creates its pipes and its partner
//! bound to the same CPU (a thread or a fork, by mode) *before* it reads the
//! gate, where the real task does so after it (will-it-scale's five warm-up
//! seconds discard that start; here it is left out of the window), then runs
//! `laps` round trips. On each turn a side touches what the loop uses, as
//! [`super::pingpong`] does: a page of the program's text, a page of the C
//! library's text (the `read`/`write` wrappers) and a page of stack (the
//! one-byte buffer); the task also writes its counter. The partner ends after
//! its last answer. The simulated pipe is a counter with blocking reads; its
//! body costs the preset's `pipe_op`.
//!
//! What stays different: a partner that hwloc bound to a core may run on
//! either SMT sibling; the model binds it to its task's CPU.
//!
//! Results, as `tlb_flush2`'s: `ops_per_s` (iterations, two per round trip,
//! per second summed over the tasks: will-it-scale's `average:`, 0-day's
//! `workload`), `per_thread_ops` and `tlb_share` (about 0: nothing is
//! flushed).

use super::will_it_scale::{self, Mode, Start};
use super::{Count, Params, WorkloadDef};
use crate::error::Error;
use crate::program::{Op, Program, Sys, LIBC_TEXT_PAGE, STACK_VA, TEXT_VA};
use crate::sim::Sim;
use std::collections::BTreeMap;

// Its parameters, in the order its entry lists them.
const LAPS: Count = Count::new(
    "laps",
    2000,
    1..=10_000_000,
    "round trips of each task, two iterations each (will-it-scale runs for a time instead)",
);

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef::new(
    "will_it_scale_context_switch1",
    "will-it-scale context_switch1: each task and a partner on its CPU pass a byte back and forth \
     through two pipes (threads or processes; LKP: one task per CPU)",
    &[will_it_scale::TASKS.0, will_it_scale::MODE.0, LAPS.0],
    will_it_scale::RESULTS,
    |p, _, sim, _| setup(p, sim),
    |p, main, _| result(p, main),
    |p, _, cpus| max_mms(p, cpus),
);

/// Returns the operations of one turn's user code: the loop's text, the C
/// library's, and the stack buffer.
fn loop_pages(k: u64) -> Op {
    match k {
        0 => Op::Touch { va: TEXT_VA, pages: 1, write: false },
        1 => Op::Touch { va: TEXT_VA + LIBC_TEXT_PAGE * 4096, pages: 1, write: false },
        _ => Op::Touch { va: STACK_VA, pages: 1, write: true },
    }
}

/// The task: `testcase()`.
struct Task {
    at: Start,
    laps: u64,
    fd1: u32,
    fd2: u32,
    step: u64,
    lap: u64,
    ended: bool,
}

impl Program for Task {
    fn next(&mut self, ret: u64) -> Op {
        loop {
            self.step += 1;
            match self.step {
                1 => return Op::Sys(Sys::Pipe),
                2 => {
                    self.fd1 = ret as u32;
                    return Op::Sys(Sys::Pipe);
                }
                3 => {
                    self.fd2 = ret as u32;
                    let partner = Partner { laps: self.laps, fd1: self.fd1, fd2: self.fd2, step: 0, lap: 0 };
                    return Op::Sys(match self.at.mode {
                        Mode::Threads => Sys::CloneOn(self.at.cpu, Box::new(partner)),
                        Mode::Processes => Sys::ForkOn(self.at.cpu, Box::new(partner)),
                    });
                }
                4 => {
                    if let Some(gate) = self.at.gate {
                        return Op::Sys(Sys::PipeRead(gate));
                    }
                }
                _ => break,
            }
        }
        if self.ended {
            return self.at.exit();
        }
        if self.lap == self.laps {
            self.ended = true;
            return Op::Mark("end");
        }
        // One round trip: the loop's pages, write, read, count.
        let k = (self.step - 5) % 6;
        match k {
            0..=2 => loop_pages(k),
            3 => Op::Sys(Sys::PipeWrite(self.fd1)),
            4 => Op::Sys(Sys::PipeRead(self.fd2)),
            _ => {
                self.lap += 1;
                Op::Touch { va: self.at.counters, pages: 1, write: true }
            }
        }
    }
}

/// The partner: `child()`, ending after its last answer.
struct Partner {
    laps: u64,
    fd1: u32,
    fd2: u32,
    step: u64,
    lap: u64,
}

impl Program for Partner {
    fn next(&mut self, _: u64) -> Op {
        if self.lap == self.laps {
            return Op::Exit;
        }
        let k = self.step % 5;
        self.step += 1;
        match k {
            0 => Op::Sys(Sys::PipeRead(self.fd1)),
            1..=3 => loop_pages(k - 1),
            _ => {
                self.lap += 1;
                Op::Sys(Sys::PipeWrite(self.fd2))
            }
        }
    }
}

/// Starts the tasks.
pub fn setup(p: &Params, sim: &mut Sim) -> Result<(), Error> {
    let laps = LAPS.of(p);
    let make = move |at: Start| -> Box<dyn Program> {
        Box::new(Task { at, laps, fd1: 0, fd2: 0, step: 0, lap: 0, ended: false })
    };
    will_it_scale::setup(p, sim, Box::new(make))
}

/// Returns the address spaces the run needs at most at once: in process mode
/// each task's partner is a process too.
pub fn max_mms(p: &Params, cpus: usize) -> usize {
    will_it_scale::max_mms(p, cpus, 1)
}

/// Returns `ops_per_s`, `per_thread_ops` and `tlb_share` from the window
/// between the gate opening and the last task finishing.
pub fn result(p: &Params, sim: &Sim) -> Result<BTreeMap<String, f64>, Error> {
    let n = will_it_scale::tasks(p, sim.cfg.ncpus);
    will_it_scale::result(DEF.name, n, n * 2 * LAPS.of(p), sim)
}
