//! hackbench in process and pipe mode: groups of processes passing small
//! messages through pipes, a benchmark of the scheduler's and the context
//! switch's costs (and so of `switch_mm`'s).
//!
//! Source: rt-tests `src/hackbench/hackbench.c` (and Linux's `perf bench sched
//! messaging`, the same program): `-p` (pipes) without `-T` (processes).
//! Defaults: 10 groups; in each, 20 receivers, each reading from its own pipe,
//! and 20 senders, each writing `loops` (100) messages of 100 bytes to every
//! receiver of its group, receiver after receiver; a receiver reads
//! `20 * loops` messages. Every child is a forked process (400 in all) that
//! waits for the start signal; the time is from the signal until every child
//! has been reaped, printed as `Time: s.ms`.
//!
//! The model: each receiver's pipe holds at most `64 KiB / 100 B = 655`
//! messages (a pipe's default 16-page buffer), so senders block when one is
//! full, as they do in the real run. A child tells the parent it is done by a
//! token on a pipe just before it exits, so its exit's teardown is not timed
//! (the real parent's `wait` returns only after it). Message copies are the
//! pipe's software cost (`pipe_op`); nothing else is touched.
//!
//! What stays different: on a Linux preset the simulated scheduler is the
//! kernel's class (CFS or EEVDF, with wake-up preemption, wake-affine
//! placement and balancing, `crate::sched`), but an operation is atomic, so a
//! preempting wake-up takes effect at the end of the target's current
//! operation. On a FIFO (FreeBSD) preset there is no wake-up preemption, and
//! wake-ups spread processes over CPUs only with `--set migration=on`, which a
//! hackbench run there should use (without it every child stays on the CPU it
//! was forked on, and the forks pile up on few CPUs).
//!
//! Result: `time_s`, seconds from the start signal until the last child is done.

use super::{params, Params, WorkloadDef};
use crate::error::Error;
use crate::program::{Op, Program, Sys};
use crate::sim::Sim;
use std::collections::BTreeMap;

params! {
    PARAMS;
    GROUPS: Count("groups", 10, 1..=100)
        "groups of senders and receivers (-g)";
    FDS: Count("fds", 20, 1..=100)
        "senders and receivers per group (-f)";
    LOOPS: Count("loops", 100, 1..=100_000)
        "messages from each sender to each receiver (-l)";
    PIPE_MSGS: Count("pipe_msgs", 655, 1..=1_000_000)
        "messages a pipe holds before a writer blocks (64 KiB of 100-byte messages)";
}

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef::new(
    "hackbench",
    "hackbench -p (processes, pipes): groups of 20 senders writing 100-byte messages to 20 receivers \
     each, 400 processes by default",
    PARAMS,
    &["time_s"],
    |p, _, sim, _| setup(p, sim),
    |_, main, _| result(main),
    |p, _, _| max_mms(p),
);

/// A child of a group, receiver or sender: waits for the start, makes its
/// `calls` pipe calls, reports, exits. A receiver reads its own pipe; a sender
/// writes one message to each receiver's pipe in turn.
struct Child {
    start: u32,
    done: u32,
    /// The pipes it reads or writes, in turn: a receiver's own, or every
    /// receiver's of its group.
    pipes: Vec<u32>,
    write: bool,
    calls: u64,
    step: u64,
}

impl Program for Child {
    fn next(&mut self, _ret: u64) -> Op {
        self.step += 1;
        let s = self.step;
        if s == 1 {
            Op::Sys(Sys::PipeRead(self.start))
        } else if s <= 1 + self.calls {
            let pipe = self.pipes[((s - 2) % self.pipes.len() as u64) as usize];
            Op::Sys(if self.write { Sys::PipeWrite(pipe) } else { Sys::PipeRead(pipe) })
        } else if s == 2 + self.calls {
            Op::Sys(Sys::PipeWrite(self.done))
        } else {
            Op::Exit
        }
    }
}

/// The parent: makes the pipes, forks every group, starts them and waits.
struct Parent {
    fds: u64,
    loops: u64,
    pipe_msgs: u64,
    step: u64,
    start: u32,
    done: u32,
    /// The current group's receiver pipes.
    pipes: Vec<u32>,
    /// Receivers of the current group forked so far.
    receivers: usize,
    /// Whether the last call made a pipe (whose id is the next `ret`).
    made_pipe: bool,
    marks: u32,
    /// What is left to do, last first.
    plan: Vec<Todo>,
}

#[derive(Clone, Copy)]
enum Todo {
    Pipe,
    Receiver,
    Sender,
    Go,
    Wait,
    Mark,
}

impl Parent {
    fn new(groups: u64, fds: u64, loops: u64, pipe_msgs: u64) -> Self {
        let mut plan = Vec::new();
        for _ in 0..groups {
            plan.extend((0..fds).map(|_| Todo::Pipe));
            plan.extend((0..fds).map(|_| Todo::Receiver));
            plan.extend((0..fds).map(|_| Todo::Sender));
        }
        let children = 2 * groups * fds;
        plan.push(Todo::Mark);
        plan.extend((0..children).map(|_| Todo::Go));
        plan.extend((0..children).map(|_| Todo::Wait));
        plan.push(Todo::Mark);
        plan.reverse();
        Parent {
            fds,
            loops,
            pipe_msgs,
            step: 0,
            start: 0,
            done: 0,
            pipes: Vec::new(),
            receivers: 0,
            made_pipe: false,
            marks: 0,
            plan,
        }
    }
}

impl Program for Parent {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        match self.step {
            1 => return Op::Sys(Sys::Pipe),
            2 => {
                self.start = ret as u32;
                return Op::Sys(Sys::Pipe);
            }
            3 => self.done = ret as u32,
            _ => {}
        }
        if std::mem::take(&mut self.made_pipe) {
            self.pipes.push(ret as u32);
        }
        let Some(todo) = self.plan.pop() else { return Op::Exit };
        match todo {
            Todo::Pipe => {
                if self.pipes.len() as u64 == self.fds {
                    // A new group.
                    self.pipes.clear();
                    self.receivers = 0;
                }
                self.made_pipe = true;
                Op::Sys(Sys::PipeBounded(self.pipe_msgs))
            }
            Todo::Receiver => {
                let pipe = self.pipes[self.receivers];
                self.receivers += 1;
                let (pipes, calls) = (vec![pipe], self.fds * self.loops);
                let r = Child { start: self.start, done: self.done, pipes, write: false, calls, step: 0 };
                Op::Sys(Sys::Fork(Box::new(r)))
            }
            Todo::Sender => {
                let (pipes, calls) = (self.pipes.clone(), self.loops * self.pipes.len() as u64);
                let s = Child { start: self.start, done: self.done, pipes, write: true, calls, step: 0 };
                Op::Sys(Sys::Fork(Box::new(s)))
            }
            Todo::Go => Op::Sys(Sys::PipeWrite(self.start)),
            Todo::Wait => Op::Sys(Sys::PipeRead(self.done)),
            Todo::Mark => {
                self.marks += 1;
                Op::Mark(if self.marks == 1 { "start" } else { "end" })
            }
        }
    }
}

/// Starts the parent.
pub fn setup(p: &Params, sim: &mut Sim) -> Result<(), Error> {
    let parent = Parent::new(GROUPS.of(p), FDS.of(p), LOOPS.of(p), PIPE_MSGS.of(p));
    sim.spawn(Box::new(parent))?;
    Ok(())
}

/// Returns the address spaces the run needs: every child and the parent.
pub fn max_mms(p: &Params) -> usize {
    2 * GROUPS.usize(p) * FDS.usize(p) + 8
}

/// Returns `time_s`: from the start signal until the last child reported.
pub fn result(sim: &Sim) -> Result<BTreeMap<String, f64>, Error> {
    let none = || super::unmeasured(DEF.name, "the children did not all finish; no time was recorded");
    let start = super::mark_max(sim, "start").ok_or_else(none)?;
    let end = super::mark_max(sim, "end").ok_or_else(none)?;
    let mut r = BTreeMap::new();
    r.insert("time_s".to_string(), (end - start) as f64 / sim.ghz() / 1e9);
    Ok(r)
}
