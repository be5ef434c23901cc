//! The host microbenchmarks of `tlbkit calibrate`, as programs for the
//! simulated kernel, so that the model and the machine run the same loops.
//!
//! Each mirrors one microbenchmark of the `tlbkit-host` crate operation for
//! operation (the same system calls, page counts and threads); its result
//! `ns_per_op` is what that microbenchmark reports. `--set bench=N` picks one
//! ([`BENCHES`] gives the numbers). The two that need no kernel at all (the
//! line ping-pong and the lock handoff) and the zeroing rate run on the
//! machine model directly (`crate::machine_bench`), not here.
//!
//! Every loop starts with untimed operations (a tenth of the timed ones, at
//! least two), as the host's warm-up trial does, so that first-touch faults
//! and cold TLBs stay out of the figure where the host keeps them out. Each
//! timed operation sits between two marks, which cost no simulated time.
//!
//! - `null_syscall` (0): `getppid`, the system call that does nothing.
//! - `page_fault` (1): the first write to each of `ops` pages of a fresh
//!   anonymous mapping (fault, zeroing, PTE install); per page.
//! - `mmap` (2): `mmap` of 16 anonymous pages, each unmapped (untimed) before
//!   the next.
//! - `munmap` (3): `munmap` of 16 pages just mapped and written.
//! - `madvise` (4): `madvise(MADV_DONTNEED)` of 16 pages written again before
//!   each call.
//! - `mprotect` (5): `mprotect` of 16 written pages to read-only and back;
//!   per call.
//! - `pipe_rw` (6): one thread writes a token into a pipe and reads it back.
//! - `pipe_switch` (7): two processes on one CPU pass a token around two pipes
//!   (lmbench's `lat_ctx -s 0 2`); per pass: one write, one read, one switch.
//!   Run it with `--cpus 1`.
//! - `shootdown` (8): a second thread of the process, bound to CPU 1, keeps
//!   reading a page while the first, on CPU 0, changes the page to read-only
//!   and back; per pair of calls. Run it with `--cpus 2` or more.

use super::{params, Params, WorkloadDef};
use crate::error::Error;
use crate::program::{Op, Program, Sys};
use crate::sim::Sim;
use std::cell::Cell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

/// The microbenchmarks, by their number (`--set bench=N`) and the name the
/// host's side gives them.
pub const BENCHES: &[&str] =
    &["null_syscall", "page_fault", "mmap", "munmap", "madvise", "mprotect", "pipe_rw", "pipe_switch", "shootdown"];

params! {
    PARAMS;
    BENCH: Count("bench", 0, 0..=8)
        "0 null_syscall, 1 page_fault, 2 mmap, 3 munmap, 4 madvise, 5 mprotect, 6 pipe_rw, 7 pipe_switch (--cpus 1), 8 \
         shootdown (--cpus 2)";
    OPS: Count("ops", 200, 1..=1_000_000)
        "timed operations";
}

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef::new(
    "microbench",
    "tlbkit calibrate's host microbenchmarks in the model (--set bench=0..8)",
    PARAMS,
    &["ns_per_op"],
    |p, _, sim, _| setup(p, sim),
    |p, main, _| result(p, main),
    // The benchmark's process, and pipe_switch's second.
    |_, _, _| 8,
);

/// Pages each mapping of the system-call microbenchmarks spans.
const PAGES: u64 = 16;

/// Returns the number of microbenchmark `name`, as `--set bench=` takes it.
pub fn number(name: &str) -> Option<usize> {
    BENCHES.iter().position(|b| *b == name)
}

/// Returns the untimed operations before the timed ones.
fn warmup(ops: u64) -> u64 {
    (ops / 10).max(2)
}

/// One step of a loop, made an operation when it is reached: steps on the
/// mapping use its address, known only once its `mmap` has returned.
enum Step {
    /// `mmap` of this many pages, whose address the next steps use.
    Map(u64),
    /// A write to every page of the mapping (`pages` of them).
    Write(u64),
    /// `munmap` of the mapping.
    Unmap(u64),
    /// `madvise(MADV_DONTNEED)` of the mapping.
    DontNeed(u64),
    /// `mprotect` of the mapping, writable or not.
    Protect(u64, bool),
    /// A new pipe, kept as `pipes[i]`.
    Pipe(usize),
    /// A write into, or a read from, `pipes[i]`.
    PipeWrite(usize),
    /// See [`Step::PipeWrite`].
    PipeRead(usize),
    /// The second process of `pipe_switch`.
    ForkEcho,
    /// The reading thread of `shootdown`, on CPU 1.
    CloneReader,
    /// `getppid`.
    Null,
    /// A timing mark.
    Mark(&'static str),
}

/// The thread that runs (and times) a microbenchmark.
struct Bench {
    kind: usize,
    ops: u64,
    /// Turns queued, the untimed ones included.
    turns: u64,
    queue: VecDeque<Step>,
    /// Whether the last operation was an `mmap`, whose address comes back next.
    mapping: bool,
    /// Whether the last operation made a pipe, kept as `pipes[i]`.
    piping: Option<usize>,
    va: u64,
    pipes: [u32; 2],
    /// Set when the timing is over: the reading thread of `shootdown` exits.
    over: Rc<Cell<bool>>,
}

impl Bench {
    /// Returns the set-up steps of microbenchmark `kind`.
    fn setup(kind: usize, ops: u64) -> Vec<Step> {
        match kind {
            1 => vec![Step::Map(ops)],
            4 | 5 => vec![Step::Map(PAGES), Step::Write(PAGES)],
            6 => vec![Step::Pipe(0)],
            7 => vec![Step::Pipe(0), Step::Pipe(1), Step::ForkEcho],
            8 => vec![Step::Map(1), Step::Write(1), Step::CloneReader],
            _ => vec![],
        }
    }

    /// Queues the next loop turn; returns false when every turn has run.
    fn queue_turn(&mut self) -> bool {
        let total = if self.kind == 1 { 1 } else { warmup(self.ops) + self.ops };
        if self.turns == total {
            return false;
        }
        self.turns += 1;
        let timed = self.kind == 1 || self.turns > warmup(self.ops);
        let (before, body, after): (Vec<Step>, Vec<Step>, Vec<Step>) = match self.kind {
            0 => (vec![], vec![Step::Null], vec![]),
            1 => (vec![], vec![Step::Write(self.ops)], vec![]),
            2 => (vec![], vec![Step::Map(PAGES)], vec![Step::Unmap(PAGES)]),
            3 => (vec![Step::Map(PAGES), Step::Write(PAGES)], vec![Step::Unmap(PAGES)], vec![]),
            4 => (vec![Step::Write(PAGES)], vec![Step::DontNeed(PAGES)], vec![]),
            5 => (vec![], vec![Step::Protect(PAGES, false), Step::Protect(PAGES, true)], vec![]),
            6 => (vec![], vec![Step::PipeWrite(0), Step::PipeRead(0)], vec![]),
            7 => (vec![], vec![Step::PipeWrite(0), Step::PipeRead(1)], vec![]),
            _ => (vec![], vec![Step::Protect(1, false), Step::Protect(1, true)], vec![]),
        };
        self.queue.extend(before);
        if timed {
            self.queue.push_back(Step::Mark("op_start"));
        }
        self.queue.extend(body);
        if timed {
            self.queue.push_back(Step::Mark("op_end"));
        }
        self.queue.extend(after);
        true
    }

    /// Returns the operation of `step`.
    fn op(&mut self, step: Step) -> Op {
        let va = self.va;
        match step {
            Step::Map(pages) => {
                self.mapping = true;
                Op::Sys(Sys::Mmap { pages, write: true })
            }
            Step::Write(pages) => Op::Touch { va, pages, write: true },
            Step::Unmap(pages) => Op::Sys(Sys::Munmap { va, pages }),
            Step::DontNeed(pages) => Op::Sys(Sys::Madvise { va, pages }),
            Step::Protect(pages, write) => Op::Sys(Sys::Mprotect { va, pages, write }),
            Step::Pipe(i) => {
                self.piping = Some(i);
                Op::Sys(Sys::Pipe)
            }
            Step::PipeWrite(i) => Op::Sys(Sys::PipeWrite(self.pipes[i])),
            Step::PipeRead(i) => Op::Sys(Sys::PipeRead(self.pipes[i])),
            Step::ForkEcho => {
                let echo = Echo { pipes: self.pipes, left: warmup(self.ops) + self.ops, step: 0 };
                Op::Sys(Sys::Fork(Box::new(echo)))
            }
            Step::CloneReader => Op::Sys(Sys::CloneOn(1, Box::new(Reader { va, over: self.over.clone(), step: 0 }))),
            Step::Null => Op::Sys(Sys::Null),
            Step::Mark(m) => Op::Mark(m),
        }
    }
}

impl Program for Bench {
    fn next(&mut self, ret: u64) -> Op {
        if std::mem::take(&mut self.mapping) {
            self.va = ret;
        }
        if let Some(i) = self.piping.take() {
            self.pipes[i] = ret as u32;
        }
        if self.queue.is_empty() && !self.queue_turn() {
            self.over.set(true);
            return Op::Exit;
        }
        let step = self.queue.pop_front().expect("a turn queues steps");
        self.op(step)
    }
}

/// `shootdown`'s second thread: reads the page until the timing is over.
struct Reader {
    va: u64,
    over: Rc<Cell<bool>>,
    step: u64,
}

impl Program for Reader {
    fn next(&mut self, _: u64) -> Op {
        self.step += 1;
        if self.over.get() {
            return Op::Exit;
        }
        if self.step % 2 == 1 {
            Op::Touch { va: self.va, pages: 1, write: false }
        } else {
            // The host's loop between reads: a load and a branch.
            Op::Compute(20)
        }
    }
}

/// `pipe_switch`'s second process: reads a token from the first pipe and
/// writes it into the second, `left` times.
struct Echo {
    pipes: [u32; 2],
    left: u64,
    step: u64,
}

impl Program for Echo {
    fn next(&mut self, _: u64) -> Op {
        self.step += 1;
        if self.left == 0 {
            return Op::Exit;
        }
        if self.step % 2 == 1 {
            Op::Sys(Sys::PipeRead(self.pipes[0]))
        } else {
            self.left -= 1;
            Op::Sys(Sys::PipeWrite(self.pipes[1]))
        }
    }
}

/// Starts the microbenchmark `--set bench` names.
pub fn setup(p: &Params, sim: &mut Sim) -> Result<(), Error> {
    let kind = BENCH.usize(p);
    if kind == 8 && sim.cfg.ncpus < 2 {
        return Err(Error::BadParam {
            workload: DEF.name,
            key: BENCH.0.key,
            value: kind.to_string(),
            valid: "runnable on one CPU: shootdown (8) needs --cpus 2 or more",
        });
    }
    let ops = OPS.of(p);
    let b = Bench {
        kind,
        ops,
        turns: 0,
        queue: Bench::setup(kind, ops).into(),
        mapping: false,
        piping: None,
        va: 0,
        pipes: [0; 2],
        over: Rc::new(Cell::new(false)),
    };
    sim.spawn(Box::new(b))?;
    Ok(())
}

/// Returns `ns_per_op`: the timed windows' mean, per call for `mprotect`,
/// per page for `page_fault`, per pass for `pipe_switch` (two per turn).
pub fn result(p: &Params, sim: &Sim) -> Result<BTreeMap<String, f64>, Error> {
    let (starts, ends) = (super::mark_times(sim, "op_start"), super::mark_times(sim, "op_end"));
    if starts.is_empty() || starts.len() != ends.len() {
        return Err(super::unmeasured(DEF.name, "no operation was timed to its end"));
    }
    let total: u64 = starts.iter().zip(&ends).map(|(s, e)| e - s).sum();
    let per_window = match BENCH.usize(p) {
        1 => OPS.of(p) as f64,
        5 | 7 => 2.0,
        _ => 1.0,
    };
    let ns = total as f64 / sim.ghz() / starts.len() as f64 / per_window;
    Ok(BTreeMap::from([("ns_per_op".to_string(), ns)]))
}
