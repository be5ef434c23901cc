//! Ping-pong between two address spaces on one CPU (origin 002's benchmark).
//!
//! As in the seed: two processes wake each other through eventfds, so the CPU
//! switches between two different address spaces at every turn, and nothing
//! else runs. A *round* is one turn: a process wakes, touches its own `pages`
//! pages, signals the other's eventfd and blocks reading its own. The pages are
//! read, as the origin's were (it read the zero page to keep data-cache misses out).
//!
//! Why a turn and not a round trip: the origin does not say which its "per
//! iteration" figure is. At 2.3 GHz its 1.22 us is 2806 cycles, about what one
//! eventfd write, one read and one context switch cost in a 2017 KVM guest, not
//! two of each; and its 207M walks against 6.2 us make 512 pages per figure, one
//! side's pages, a consistent reading. `rounds` turns are timed (rounded up to
//! whole round trips).
//!
//! Besides the data, each turn touches what the loop itself uses: a page of the
//! program's text, a page of the C library's text (the `read`/`write` wrappers)
//! and a page of stack (the eventfd's 8-byte buffer). In the kernel it touches
//! the system-call entry, the eventfd (IPC) code, the scheduler and switch code
//! and the threads' kernel stacks and structures, all global mappings on x86.
//!
//! The simulated kernel's pipe is a counter with blocking reads, which is what an
//! eventfd is; its body costs the preset's `pipe_op`.
//!
//! Results: `us_per_round` (one turn), `tlb_misses_per_round` (lookups that
//! missed every TLB level and walked: the origin's `dtlb_load_misses.miss_causes_a_walk`)
//! and `l1_tlb_misses_per_round`.

use super::{params, OpQueue, Params, Phase, WorkloadDef};
use crate::error::Error;
use crate::program::{Op, Program, Sys, LIBC_TEXT_PAGE, STACK_VA, TEXT_VA};
use crate::sim::Sim;
use std::collections::BTreeMap;

params! {
    PARAMS;
    PAGES: Count("pages", 0, 0..=65536)
        "4 KB pages a process touches per turn";
    ROUNDS: Count("rounds", 1000, 2..=10_000_000)
        "timed turns";
}

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef::new(
    "pingpong",
    "two address spaces on one CPU waking each other through eventfds (origin 002)",
    PARAMS,
    &["us_per_round", "tlb_misses_per_round", "l1_tlb_misses_per_round"],
    |p, _, sim, phase| setup(p, sim, phase),
    |p, main, _| result(p, main),
    |_, _, _| 8,
)
.origin("002");

/// Untimed round trips first: page faults and cold TLBs stay out of the timing.
const WARMUP: u64 = 3;

/// Which side of the ping-pong a process is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    /// Creates the eventfds, forks B, times the round trips.
    A,
    /// Answers.
    B,
}

struct Player {
    side: Side,
    pages: u64,
    /// Timed round trips.
    trips: u64,
    /// `efd[0]` wakes A, `efd[1]` wakes B.
    efd: Vec<u32>,
    data: u64,
    step: u64,
    trip: u64,
    queue: OpQueue,
}

impl Player {
    /// The loop's own pages and the data, read once per turn.
    fn turn(&self) -> Vec<Op> {
        let mut ops = vec![
            Op::Touch { va: TEXT_VA, pages: 1, write: false },
            Op::Touch { va: TEXT_VA + LIBC_TEXT_PAGE * 4096, pages: 1, write: false },
            Op::Touch { va: STACK_VA, pages: 1, write: true },
        ];
        if self.pages > 0 {
            ops.push(Op::Touch { va: self.data, pages: self.pages, write: false });
        }
        ops
    }

    fn trip_ops(&mut self) -> Vec<Op> {
        let total = self.trips + WARMUP;
        let mut ops = Vec::new();
        match self.side {
            Side::A => {
                if self.trip == WARMUP {
                    ops.push(Op::Mark("start"));
                }
                if self.trip == total {
                    ops.push(Op::Mark("end"));
                    ops.push(Op::Exit);
                    return ops;
                }
                ops.extend(self.turn());
                ops.push(Op::Sys(Sys::PipeWrite(self.efd[1])));
                ops.push(Op::Sys(Sys::PipeRead(self.efd[0])));
            }
            Side::B => {
                if self.trip == total {
                    ops.push(Op::Exit);
                    return ops;
                }
                ops.push(Op::Sys(Sys::PipeRead(self.efd[1])));
                ops.extend(self.turn());
                ops.push(Op::Sys(Sys::PipeWrite(self.efd[0])));
            }
        }
        self.trip += 1;
        ops
    }
}

impl Program for Player {
    fn next(&mut self, ret: u64) -> Op {
        loop {
            if let Some(op) = self.queue.pop() {
                return op;
            }
            self.step += 1;
            let op = match (self.side, self.step) {
                (Side::A, 1 | 2) => {
                    if self.step == 2 {
                        self.efd.push(ret as u32);
                    }
                    Op::Sys(Sys::Pipe)
                }
                (Side::A, 3) => {
                    self.efd.push(ret as u32);
                    let child = Player {
                        side: Side::B,
                        pages: self.pages,
                        trips: self.trips,
                        efd: self.efd.clone(),
                        data: 0,
                        step: 3,
                        trip: 0,
                        queue: OpQueue::default(),
                    };
                    Op::Sys(Sys::Fork(Box::new(child)))
                }
                // Both sides map their own data after the fork, so it is not shared.
                (_, 4) if self.pages > 0 => Op::Sys(Sys::Mmap { pages: self.pages, write: false }),
                (_, 5) if self.pages > 0 => {
                    self.data = ret;
                    Op::Touch { va: self.data, pages: self.pages, write: false }
                }
                (_, s) if s <= 5 => continue,
                _ => {
                    let ops = self.trip_ops();
                    self.queue.start(ops)
                }
            };
            return op;
        }
    }
}

/// Returns the round trips that make `rounds` turns.
fn trips(p: &Params) -> u64 {
    ROUNDS.of(p).div_ceil(2)
}

/// Starts process A (which creates the eventfds and forks B).
pub fn setup(p: &Params, sim: &mut Sim, _phase: Phase) -> Result<(), Error> {
    let a = Player {
        side: Side::A,
        pages: PAGES.of(p),
        trips: trips(p),
        efd: Vec::new(),
        data: 0,
        step: 0,
        trip: 0,
        queue: OpQueue::default(),
    };
    sim.spawn(Box::new(a))?;
    Ok(())
}

/// Returns `us_per_round`, `tlb_misses_per_round` and `l1_tlb_misses_per_round`.
pub fn result(p: &Params, main: &Sim) -> Result<BTreeMap<String, f64>, Error> {
    let rounds = (2 * trips(p)) as f64;
    let (Some(s), Some(e), Some(ss), Some(es)) =
        (main.mark("start"), main.mark("end"), main.mark_stats("start"), main.mark_stats("end"))
    else {
        return Err(super::unmeasured(DEF.name, "the rounds did not complete; no timing was recorded"));
    };
    let mut r = BTreeMap::new();
    r.insert("us_per_round".to_string(), (e - s) as f64 / rounds / main.ghz() / 1000.0);
    r.insert("tlb_misses_per_round".to_string(), (es.mmu.tlb_misses - ss.mmu.tlb_misses) as f64 / rounds);
    r.insert("l1_tlb_misses_per_round".to_string(), (es.mmu.l1_tlb_misses - ss.mmu.l1_tlb_misses) as f64 / rounds);
    Ok(r)
}
