//! lmbench's `lat_ctx`: context-switch latency (origin 000's measurement).
//!
//! As in lmbench 3 (`src/lat_ctx.c`): `procs` processes form a ring of pipes and
//! pass one token around it. Each process, on receiving the token, sums its own
//! `size_kb` of data (lmbench's `sumit`), then writes the token to the next
//! process's pipe and blocks reading its own. lmbench runs the ring once to warm
//! it, then times whole rounds, and reports the time per hop *minus* the overhead
//! it measures by doing the same pipe write, pipe read and summing in a single
//! process, where no context switch happens. `us_per_switch` is that difference.
//!
//! Besides the data, each hop touches what the loop itself uses: a page of the
//! program's text, a page of the C library's text (`read`/`write` wrappers), a
//! page of data (libc's) and a page of stack. In the kernel it touches the
//! system-call entry code, the pipe code, the scheduler and switch code (each in
//! its own 2 MB text block), the pipes' kernel pages, the thread's kernel stack
//! and the thread structures. So a TLB flush on the switch costs what it costs
//! on the real machine: refills of user *and* kernel entries.

use super::{params, OpQueue, Params, Phase, WorkloadDef};
use crate::error::Error;
use crate::program::{Op, Program, Sys, DATA_VA, LIBC_TEXT_PAGE, STACK_VA, TEXT_VA};
use crate::sim::Sim;
use std::collections::BTreeMap;

params! {
    PARAMS;
    PROCS: Count("procs", 20, 2..=4096)
        "processes in the ring";
    SIZE_KB: Count("size_kb", 0, 0..=65536)
        "KB each process sums per hop";
    ROUNDS: Count("rounds", 50, 3..=100000)
        "times the token goes round the ring";
}

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef::new(
    "lat_ctx",
    "lmbench lat_ctx: a ring of processes passing a token through pipes (origin 000)",
    PARAMS,
    &["us_per_switch", "ring_us_per_hop", "overhead_us"],
    |p, _, sim, phase| setup(p, sim, phase),
    result,
    |p, _, _| PROCS.usize(p) + 8,
)
.origin("000")
.with_overhead();

/// Rounds run before timing starts.
const WARMUP: u64 = 1;

/// Hops the overhead phase times (it needs no more than this to be stable).
fn overhead_hops(p: &Params) -> u64 {
    (ROUNDS.of(p) * PROCS.of(p)).min(20_000)
}

fn pages(p: &Params) -> u64 {
    SIZE_KB.of(p).div_ceil(4)
}

/// Queues the work of one hop: lmbench's summing of the process's data, plus
/// the text and stack pages the loop itself uses.
fn hop_work(ops: &mut OpQueue, data: u64, pages: u64) {
    ops.extend([
        Op::Touch { va: TEXT_VA, pages: 1, write: false },
        Op::Touch { va: TEXT_VA + LIBC_TEXT_PAGE * 4096, pages: 1, write: false },
        Op::Touch { va: DATA_VA, pages: 1, write: true },
        Op::Touch { va: STACK_VA, pages: 1, write: true },
    ]);
    if pages > 0 {
        ops.push(Op::Touch { va: data, pages, write: false });
    }
}

/// One member of the ring; member 0 also creates the pipes and forks the rest.
struct Member {
    idx: usize,
    procs: usize,
    rounds: u64,
    pages: u64,
    pipes: Vec<u32>,
    data: u64,
    round: u64,
    queue: OpQueue,
    stage: Stage,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    MakePipes(bool),
    Fork(usize),
    Map,
    Fill,
    Start,
    Read,
    Work,
    Done,
}

impl Member {
    fn leader(procs: usize, rounds: u64, pages: u64) -> Self {
        Member {
            idx: 0,
            procs,
            rounds,
            pages,
            pipes: Vec::new(),
            data: 0,
            round: 0,
            queue: OpQueue::default(),
            stage: Stage::MakePipes(false),
        }
    }
}

impl Program for Member {
    fn next(&mut self, ret: u64) -> Op {
        loop {
            if let Some(op) = self.queue.pop() {
                return op;
            }
            match self.stage {
                Stage::MakePipes(asked) => {
                    if asked {
                        self.pipes.push(ret as u32);
                    }
                    if self.pipes.len() < self.procs {
                        self.stage = Stage::MakePipes(true);
                        return Op::Sys(Sys::Pipe);
                    }
                    self.stage = Stage::Fork(1);
                }
                Stage::Fork(i) if i < self.procs => {
                    self.stage = Stage::Fork(i + 1);
                    let child = Member {
                        idx: i,
                        procs: self.procs,
                        rounds: self.rounds,
                        pages: self.pages,
                        pipes: self.pipes.clone(),
                        data: 0,
                        round: 0,
                        queue: OpQueue::default(),
                        stage: Stage::Map,
                    };
                    return Op::Sys(Sys::Fork(Box::new(child)));
                }
                Stage::Fork(_) => self.stage = Stage::Map,
                Stage::Map => {
                    self.stage = Stage::Fill;
                    if self.pages > 0 {
                        return Op::Sys(Sys::Mmap { pages: self.pages, write: true });
                    }
                }
                Stage::Fill => {
                    self.stage = Stage::Start;
                    if self.pages > 0 {
                        self.data = ret;
                        return Op::Touch { va: self.data, pages: self.pages, write: true };
                    }
                }
                Stage::Start => {
                    self.stage = Stage::Read;
                    if self.idx == 0 {
                        return Op::Sys(Sys::PipeWrite(self.pipes[1]));
                    }
                }
                Stage::Read => {
                    if self.round == self.rounds {
                        self.stage = Stage::Done;
                        continue;
                    }
                    self.stage = Stage::Work;
                    return Op::Sys(Sys::PipeRead(self.pipes[self.idx]));
                }
                Stage::Work => {
                    self.stage = Stage::Read;
                    let last = self.round + 1 == self.rounds;
                    let ops = &mut self.queue;
                    if self.idx == 0 && self.round == WARMUP {
                        ops.push(Op::Mark("start"));
                    }
                    if self.idx == 0 && last {
                        ops.push(Op::Mark("end"));
                    }
                    hop_work(ops, self.data, self.pages);
                    if !(self.idx == 0 && last) {
                        ops.push(Op::Sys(Sys::PipeWrite(self.pipes[(self.idx + 1) % self.procs])));
                    }
                    self.round += 1;
                }
                Stage::Done => return Op::Exit,
            }
        }
    }
}

/// The overhead loop: one process writes its own pipe, reads it back and sums.
struct Overhead {
    hops: u64,
    pages: u64,
    data: u64,
    pipe: u32,
    step: u64,
    queue: OpQueue,
}

impl Program for Overhead {
    fn next(&mut self, ret: u64) -> Op {
        if let Some(op) = self.queue.pop() {
            return op;
        }
        self.step += 1;
        match self.step {
            1 => Op::Sys(Sys::Pipe),
            2 => {
                self.pipe = ret as u32;
                if self.pages > 0 {
                    Op::Sys(Sys::Mmap { pages: self.pages, write: true })
                } else {
                    Op::Compute(0)
                }
            }
            3 => {
                if self.pages > 0 {
                    self.data = ret;
                    Op::Touch { va: self.data, pages: self.pages, write: true }
                } else {
                    Op::Compute(0)
                }
            }
            s if s < 4 + self.hops => {
                let ops = &mut self.queue;
                if s == 4 + WARMUP {
                    ops.push(Op::Mark("start"));
                }
                ops.push(Op::Sys(Sys::PipeWrite(self.pipe)));
                ops.push(Op::Sys(Sys::PipeRead(self.pipe)));
                hop_work(ops, self.data, self.pages);
                self.next(0)
            }
            s if s == 4 + self.hops => Op::Mark("end"),
            _ => Op::Exit,
        }
    }
}

/// Starts the ring (main phase) or the single overhead process.
pub fn setup(p: &Params, sim: &mut Sim, phase: Phase) -> Result<(), Error> {
    let procs = PROCS.usize(p);
    let rounds = ROUNDS.of(p);
    match phase {
        Phase::Main => sim.spawn(Box::new(Member::leader(procs, rounds, pages(p))))?,
        Phase::Overhead => sim.spawn(Box::new(Overhead {
            hops: overhead_hops(p) + WARMUP,
            pages: pages(p),
            data: 0,
            pipe: 0,
            step: 0,
            queue: OpQueue::default(),
        }))?,
    };
    Ok(())
}

fn per_hop(sim: &Sim, hops: u64) -> Result<f64, Error> {
    let (Some(s), Some(e)) = (sim.mark("start"), sim.mark("end")) else {
        return Err(super::unmeasured(DEF.name, "the ring did not complete; no timing was recorded"));
    };
    Ok((e - s) as f64 / hops as f64 / sim.ghz() / 1000.0)
}

/// Returns `us_per_switch` (per hop, less the overhead), `ring_us_per_hop` and
/// `overhead_us`.
pub fn result(p: &Params, main: &Sim, overhead: Option<&Sim>) -> Result<BTreeMap<String, f64>, Error> {
    let procs = PROCS.of(p);
    let rounds = ROUNDS.of(p);
    let ring = per_hop(main, (rounds - 1 - WARMUP) * procs)?;
    let ovr = match overhead {
        Some(o) => per_hop(o, overhead_hops(p))?,
        None => 0.0,
    };
    let mut r = BTreeMap::new();
    r.insert("us_per_switch".to_string(), ring - ovr);
    r.insert("ring_us_per_hop".to_string(), ring);
    r.insert("overhead_us".to_string(), ovr);
    Ok(r)
}
