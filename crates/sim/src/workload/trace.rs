//! A real program's trace, replayed (`--workload trace --set file=TRACE`).
//!
//! The trace comes from `tlbkit trace import` (valgrind's lackey and strace of
//! one run; what it keeps is in [`crate::trace`]). The first traced process
//! starts with its image (what exec and the loader had mapped before its first
//! traced event) at the traced program's own addresses; every traced thread
//! becomes one simulated thread, created where the traced one was (`fork` gives
//! a copy-on-write address space, `clone` a thread sharing it). Each record
//! becomes operations of the simulated kernel:
//!
//! - its instructions: `instr_cycles` cycles of computation each (1 by default,
//!   one guest instruction a cycle: valgrind measures no time, so this is a
//!   fixed cost per instruction between references, not a measurement);
//! - a run of data references to one page: one access to that page (a write if
//!   any reference wrote); the run's other references are hits on the same
//!   page, whose time the instruction count carries;
//! - a change of code page: one read of the new page;
//! - `mmap`: [`Sys::MmapFixed`] at the traced address; `munmap`, `mprotect`,
//!   `madvise(MADV_DONTNEED)`, `execve`: their simulated calls;
//! - a process's threads wait for each other around each call that changes (or
//!   copies) its address space, as the trace's order requires (the semaphores
//!   are pipes the process's first thread creates when it starts, a system
//!   call each).
//!
//! Result: `run_us`, the simulated time until the last CPU stopped, in
//! microseconds. Host time grows with the trace's records (about two events
//! each: the guide's `gzip`, 38 644 records, runs 74 708 events in 0.02 s of
//! host time, release build, on the 2-core development machine).

use super::{Count, Params, TextParamDef, Texts, WorkloadDef};
use crate::error::{Error, Param};
use crate::program::{Op, Program, Sys};
use crate::sim::Sim;
use crate::trace::{Event, Trace};
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::rc::Rc;

// Its one parameter.
const INSTR_CYCLES: Count = Count::new(
    "instr_cycles",
    1,
    0..=1000,
    "cycles of computation per traced guest instruction (1: one instruction a cycle)",
);

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef::new(
    "trace",
    "a real program traced with valgrind lackey and strace (tlbkit trace import), replayed: one \
     simulated thread per traced thread (--set file=TRACE)",
    &[INSTR_CYCLES.0],
    &["run_us"],
    |p, texts, sim, _| setup(p, texts, sim),
    |_, main, _| result(main),
    |_, texts, _| max_mms(texts),
)
.with_texts(TEXT_PARAMS);

/// The workload's text parameters.
pub const TEXT_PARAMS: &[TextParamDef] =
    &[TextParamDef { key: "file", doc: "the trace file to replay, made by tlbkit trace import" }];

/// Reads the trace the text parameter `file` names.
fn load(texts: &Texts) -> Result<Trace, Error> {
    let path = texts.get("file").ok_or_else(|| Error::MissingParam {
        workload: DEF.name,
        param: Param::Set("file".into()),
        what: "the trace to replay",
        placeholder: "TRACE",
    })?;
    Trace::read_file(Path::new(path))
}

/// Returns the address spaces the trace needs at most: one per process, one
/// more per `execve`; 64 if the trace cannot be read (setup then says why).
pub fn max_mms(texts: &Texts) -> usize {
    let Ok(t) = load(texts) else { return 64 };
    let execs = t.threads.iter().flat_map(|t| &t.records).filter(|r| r.event == Event::Execve).count();
    t.processes.len() + execs + 8
}

/// Starts the first traced process with its image.
pub fn setup(p: &Params, texts: &Texts, sim: &mut Sim) -> Result<(), Error> {
    let trace = Rc::new(load(texts)?);
    let pipes = Rc::new(RefCell::new(vec![None; trace.threads.len()]));
    let root = Replay::new(Rc::clone(&trace), pipes, 0, true, INSTR_CYCLES.of(p));
    sim.spawn_with(Box::new(root), &trace.processes[0].image)?;
    Ok(())
}

/// Returns `run_us`.
pub fn result(sim: &Sim) -> Result<BTreeMap<String, f64>, Error> {
    if sim.live_threads() > 0 {
        return Err(super::unmeasured(DEF.name, format!("{} thread(s) never finished", sim.live_threads())));
    }
    let mut r = BTreeMap::new();
    r.insert("run_us".to_string(), sim.end as f64 / sim.ghz() / 1000.0);
    Ok(r)
}

/// One traced thread, replayed.
struct Replay {
    trace: Rc<Trace>,
    /// Each synchronised thread's semaphore (a pipe), once created.
    pipes: Rc<RefCell<Vec<Option<u32>>>>,
    thread: usize,
    /// The next record.
    next: usize,
    cycles: u64,
    /// Operations still to hand out, each with the thread whose semaphore it
    /// creates (for a `Sys::Pipe`).
    queue: VecDeque<(Op, Option<usize>)>,
    /// The thread whose semaphore the previous operation created.
    creating: Option<usize>,
}

impl Replay {
    /// Returns the replay of thread `thread`, the first of its process if `first`.
    fn new(trace: Rc<Trace>, pipes: Rc<RefCell<Vec<Option<u32>>>>, thread: usize, first: bool, cycles: u64) -> Self {
        let mut r = Replay { trace, pipes, thread, next: 0, cycles, queue: VecDeque::new(), creating: None };
        // A process's first thread creates every semaphore of the process before
        // anything else, so that a thread may count on one whose thread does
        // not exist yet (a thread that exits arrives at the next leader's).
        if first {
            let process = r.trace.threads[thread].process;
            let mine = r.trace.threads.iter().enumerate().filter(|(_, t)| t.process == process && t.synced);
            let creates: Vec<usize> = mine.map(|(i, _)| i).collect();
            r.queue.extend(creates.into_iter().map(|t| (Op::Sys(Sys::Pipe), Some(t))));
        }
        r
    }

    /// Returns thread `t`'s semaphore.
    fn pipe(&self, t: u32) -> u32 {
        let p = self.pipes.borrow()[t as usize];
        debug_assert!(p.is_some(), "thread {t}'s semaphore is used before it exists");
        // An unknown pipe makes the simulator stop with an error, not a hang.
        p.unwrap_or(u32::MAX)
    }

    fn child(&self, t: u32, first: bool) -> Box<dyn Program> {
        Box::new(Replay::new(Rc::clone(&self.trace), Rc::clone(&self.pipes), t as usize, first, self.cycles))
    }

    /// Queues the operations of the next record.
    fn expand(&mut self) {
        let trace = Rc::clone(&self.trace);
        let Some(r) = trace.threads[self.thread].records.get(self.next) else {
            self.queue.push_back((Op::Exit, None));
            return;
        };
        self.next += 1;
        let mut ops: Vec<Op> = Vec::with_capacity(2);
        if r.instrs > 0 && self.cycles > 0 {
            ops.push(Op::Compute(r.instrs.saturating_mul(self.cycles)));
        }
        let va = |page: u64| page << 12;
        match &r.event {
            Event::Code { page } => ops.push(Op::Touch { va: va(*page), pages: 1, write: false }),
            Event::Data { page, write, .. } => ops.push(Op::Touch { va: va(*page), pages: 1, write: *write }),
            &Event::Mmap { page, pages, write } => ops.push(Op::Sys(Sys::MmapFixed { va: va(page), pages, write })),
            &Event::Munmap { page, pages } => ops.push(Op::Sys(Sys::Munmap { va: va(page), pages })),
            &Event::Mprotect { page, pages, write } => ops.push(Op::Sys(Sys::Mprotect { va: va(page), pages, write })),
            &Event::Madvise { page, pages } => ops.push(Op::Sys(Sys::Madvise { va: va(page), pages })),
            Event::Execve => ops.push(Op::Sys(Sys::Execve)),
            Event::Exit => ops.push(Op::Exit),
            Event::Fork { thread } => ops.push(Op::Sys(Sys::Fork(self.child(*thread, true)))),
            Event::Clone { thread } => ops.push(Op::Sys(Sys::Clone(self.child(*thread, false)))),
            Event::Wait { count } => {
                let own = self.pipe(self.thread as u32);
                ops.extend((0..*count).map(|_| Op::Sys(Sys::PipeRead(own))));
            }
            Event::Wake { threads } => ops.extend(threads.iter().map(|&t| Op::Sys(Sys::PipeWrite(self.pipe(t))))),
            Event::Arrive { leader, wait } => {
                ops.push(Op::Sys(Sys::PipeWrite(self.pipe(*leader))));
                if *wait {
                    ops.push(Op::Sys(Sys::PipeRead(self.pipe(self.thread as u32))));
                }
            }
        }
        self.queue.extend(ops.into_iter().map(|op| (op, None)));
    }
}

impl Program for Replay {
    fn next(&mut self, ret: u64) -> Op {
        if let Some(t) = self.creating.take() {
            self.pipes.borrow_mut()[t] = Some(ret as u32);
        }
        loop {
            if let Some((op, creates)) = self.queue.pop_front() {
                self.creating = creates;
                return op;
            }
            self.expand();
        }
    }
}
