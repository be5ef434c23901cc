//! will-it-scale's harness, `main.c`: starts the testcase's tasks, each bound
//! to its CPU, opens one gate for all of them, and reports the iterations they
//! counted per second.
//!
//! Source: github.com/antonblanchard/will-it-scale, `main.c` (Anton Blanchard,
//! 2010). One binary per testcase and mode: `_threads` (built with `THREADS`)
//! makes every task a `pthread_create`d thread of one process; `_processes`
//! makes each a `fork`ed child. `main` maps the result counters first (one
//! 256-byte slot per task in a `MAP_SHARED` file mapping, so that forked
//! children and the parent see the same counters), creates a pipe, then for
//! task `i` binds itself to core `i % cores` with hwloc, starts the task (which
//! inherits the binding) and restores its own; every task `poll`s the pipe. One
//! byte written to the pipe wakes them all, and each runs `testcase(&counter, i)`
//! forever; `main` samples the counters once a second, discards five warm-up
//! seconds and prints the average per second (`average:`), which 0-day reports
//! as `workload` and divides by the tasks for `per_thread_ops`.
//!
//! The model (both modes), for a run of fixed work instead of fixed time:
//! - Threads (`Mode::Threads`): a leader, on CPU 0, maps and touches one
//!   anonymous page of counters, creates the gate, clones tasks 1 to `n - 1`
//!   each bound to its CPU (`Binding`: CPUs 1, 2, ... by default), marks
//!   `"start"`, writes one
//!   token per cloned task and then runs task 0 itself. This is how
//!   `will_it_scale_tlb_flush2` has always run it; `main`'s own thread, asleep
//!   in `sleep(1)` between samples, is folded into task 0.
//! - Processes (`Mode::Processes`): a parent maps and touches one page of a
//!   shared file (the counters), creates the gate and a second pipe, forks task
//!   `i` bound to its CPU (task 0 last, as it shares CPU 0 with the parent), marks `"start"`, writes one token per task and then waits,
//!   blocked, for one token per task: each task's exit writes it
//!   ([`Op::ExitNotify`]), after its address space is torn down. The parent
//!   stands for `main` asleep between samples.
//!
//! The gate is a pipe that each token opens for one reader (the simulated pipe
//! has no `poll`); a task marks `"end"` when its work is done, and the window
//! measured runs from the leader's `"start"` to the last `"end"`. A testcase
//! that starts cold has its first faults in that window (a workload sizes its
//! work so that they are a small part of it); one that starts warm
//! ([`setup_warm`]: the file testcases) puts each task in the state a long
//! run would find it in before the gate opens, as will-it-scale's five
//! discarded seconds do. The run's metrics count the warm-ups too; the
//! results (`tlb_share` included) count the window only.
//!
//! What stays different: hwloc binds a task to a *core* (both SMT siblings),
//! the model to one CPU, placed as hwloc's core order would on a machine whose
//! cores run two threads (`Binding`, with the run's threads per core: `--set
//! smt`); tasks past the CPUs share CPUs the same way. The counters are per page, not per 256-byte slot: every task's
//! increment writes the one counters page.

use super::{Count, Params};
use crate::error::Error;
use crate::program::{Op, Program, Sys};
use crate::sim::Sim;
use std::collections::BTreeMap;

/// The `tasks` parameter: 0-day's `nr_task`, 100% by default.
pub(crate) const TASKS: Count = Count::new(
    "tasks",
    0,
    0..=4096,
    "tasks (threads or processes) bound one per CPU (0: one per CPU, as 0-day's nr_task=100%)",
);

/// The `mode` parameter: which of the testcase's two binaries runs.
pub(crate) const MODE: Count = Count::new(
    "mode",
    0,
    0..=1,
    "0: threads of one process (the _threads binary); 1: one forked process per task (_processes)",
);

/// The iterations of each task of the file-mapping benchmarks (`tlb_flush1`
/// and `tlb_flush3`, whose parameters are the same).
pub(crate) const FILE_ITERS: Count =
    Count::new("iters", 512, 1..=10_000_000, "iterations (pages) of each task (will-it-scale runs for a time instead)");

/// The pages per mapping of the file-mapping benchmarks.
pub(crate) const FILE_PAGES: Count =
    Count::new("pages", 32768, 1..=262_144, "4 KB pages per mapping (128 MiB: 32768); a munmap after each");

/// Whether the `tlb_flush` testcases start in their steady state.
pub(crate) const STEADY: Count = Count::new(
    "steady",
    1,
    0..=1,
    "1: each task starts as a long run finds it, at a page of its lap drawn from the seed (a file testcase's \
     file in the page cache); 0: every task at page 0 of its first lap, in step (the warm-up will-it-scale \
     discards)",
);

/// Returns the page of its lap of `pages` that task `index` is at when a long
/// run is sampled: drawn evenly from the run's `seed` (a SplitMix64 step of
/// the seed and the task), since tasks that loop at their own pace for
/// seconds are each somewhere in their lap, independently.
pub(crate) fn lap_point(seed: u64, index: u64, pages: u64) -> u64 {
    let mut z = seed ^ (index + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    z % pages.max(1)
}

/// Where task `i` runs: `main.c` binds it to hwloc core `i % cores`
/// (`HWLOC_OBJ_CORE`, logical order: socket 0's cores, then socket 1's), so
/// with two threads per core 0-day's `nr_task=50%` puts one task on every
/// core of both sockets. The simulator numbers a socket's hardware threads
/// together (socket 0's first), one CPU each; a core's `k`-th thread is
/// CPU `k * cores + core` of its socket, as Linux numbers them (`sim/smt.rs`).
/// With one thread per core (or `smt=off`), task `i` runs on CPU `i % cpus`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Binding {
    cpus: usize,
    per_socket: usize,
    smt: usize,
}

impl Binding {
    /// Returns the binding on `sim`'s machine: by core, with as many threads
    /// to a core as the run's cores share (`--set smt`).
    pub(crate) fn of(sim: &Sim) -> Binding {
        let smt = sim.threads_per_core().max(1);
        let per_socket = sim.cfg.preset.cores_per_socket.max(1);
        // A socket that does not split into whole cores is bound thread by thread.
        let smt = if per_socket.is_multiple_of(smt) && sim.cfg.ncpus >= smt { smt } else { 1 };
        Binding { cpus: sim.cfg.ncpus.max(1), per_socket, smt }
    }

    /// Returns the CPU task `i` is bound to: the run's CPUs in hwloc's order
    /// (every core's first thread, socket by socket, then every core's
    /// second), task `i` on the `i`-th, round again past the last. A run of
    /// fewer CPUs than the machine has only the CPUs it numbers.
    pub(crate) fn cpu(&self, i: u64) -> usize {
        // Every CPU of the run is in the order once: a socket's cores' threads
        // number its CPUs (`Binding::of` keeps whole cores).
        self.order().nth((i % self.cpus.max(1) as u64) as usize).unwrap_or(0)
    }

    /// The run's CPUs in the order tasks take them.
    fn order(&self) -> impl Iterator<Item = usize> {
        let (cpus, per_socket, smt) = (self.cpus, self.per_socket, self.smt);
        let cores = per_socket / smt;
        let sockets = cpus.div_ceil(per_socket);
        (0..smt)
            .flat_map(move |k| (0..sockets).flat_map(move |s| (0..cores).map(move |c| s * per_socket + k * cores + c)))
            .filter(move |&c| c < cpus)
    }
}

/// File id of the counters' shared file in process mode (the testcases' own
/// files take ids from 1).
const COUNTERS_FILE: u32 = 0;

/// How the tasks are started: the testcase's `_threads` or `_processes` binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Threads of one process, sharing one address space.
    Threads,
    /// One forked process per task, each with its own address space.
    Processes,
}

impl Mode {
    /// Returns the mode that parameter `mode` of `p` selects.
    pub(crate) fn of(p: &Params) -> Mode {
        if MODE.of(p) >= 1 {
            Mode::Processes
        } else {
            Mode::Threads
        }
    }
}

/// What the harness hands a task when it starts it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Start {
    /// Task number, from 0 (the `nr` argument of `testcase`).
    pub index: u64,
    /// The CPU it is bound to.
    pub cpu: usize,
    /// The pipe to read one token from before starting; `None` when the gate
    /// is already open (the leader's own task in threads mode).
    pub gate: Option<u32>,
    /// The pipe whose token the task's exit writes (process mode).
    pub done: Option<u32>,
    /// The pipe the task writes one token into once it has warmed up, before
    /// it reads the gate (a testcase that starts in its steady state,
    /// [`setup_warm`]); `None` when it starts cold.
    pub ready: Option<u32>,
    /// Address of the counters page; each iteration writes it.
    pub counters: u64,
    /// Threads or processes.
    pub mode: Mode,
}

impl Start {
    /// Returns the task's last operation: an exit, which in process mode
    /// tells the parent.
    pub(crate) fn exit(&self) -> Op {
        self.done.map_or(Op::Exit, Op::ExitNotify)
    }
}

/// Builds task `Start::index`'s program.
pub(crate) type MakeTask = Box<dyn FnMut(Start) -> Box<dyn Program>>;

/// Returns the number of tasks that `tasks` in `p` asks for on `cpus` CPUs.
pub(crate) fn tasks(p: &Params, cpus: usize) -> u64 {
    TASKS.or_cpus(p, cpus)
}

/// Starts `p`'s tasks in `mode`, each built by `make`.
pub(crate) fn setup(p: &Params, sim: &mut Sim, make: MakeTask) -> Result<(), Error> {
    start_tasks(p, sim, make, false)
}

/// Starts `p`'s tasks as [`setup`] does, but opens the gate only once every
/// task has warmed up: each gets a [`Start::ready`] pipe, puts itself in the
/// state a long run would find it in, writes its token there and then waits
/// at the gate; the harness reads every task's token, marks `"start"` and
/// opens the gate. In threads mode every task, task 0 too, is a thread of its
/// own and the leader exits once the gate is open (the real `main` sleeps
/// between its samples).
pub(crate) fn setup_warm(p: &Params, sim: &mut Sim, make: MakeTask) -> Result<(), Error> {
    start_tasks(p, sim, make, true)
}

fn start_tasks(p: &Params, sim: &mut Sim, make: MakeTask, warm: bool) -> Result<(), Error> {
    let n = tasks(p, sim.cfg.ncpus);
    let bind = Binding::of(sim);
    let prog: Box<dyn Program> = match Mode::of(p) {
        Mode::Threads => {
            Box::new(Leader { tasks: n, bind, make, step: 0, start: 0, ready: None, warm, counters: 0, task: None })
        }
        Mode::Processes => {
            Box::new(Parent { tasks: n, bind, make, step: 0, gate: 0, done: 0, ready: None, warm, counters: 0 })
        }
    };
    sim.spawn(prog)?;
    Ok(())
}

/// Returns the address spaces the harness needs at most at once: the one
/// process, or the parent and one per task (each task's own `extra` children
/// besides).
pub(crate) fn max_mms(p: &Params, cpus: usize, extra: u64) -> usize {
    match Mode::of(p) {
        Mode::Threads => 8,
        Mode::Processes => (tasks(p, cpus) * (1 + extra)) as usize + 8,
    }
}

/// Threads mode: maps the counters page, clones the other tasks, opens the
/// gate and runs task 0 itself.
struct Leader {
    tasks: u64,
    bind: Binding,
    make: MakeTask,
    step: u64,
    start: u32,
    /// The warmed-up tasks' pipe ([`setup_warm`]), once made.
    ready: Option<u32>,
    /// Whether the tasks warm up before the gate ([`setup_warm`]).
    warm: bool,
    counters: u64,
    task: Option<Box<dyn Program>>,
}

impl Leader {
    /// Returns what task `index` starts with.
    fn at(&self, index: u64, gate: Option<u32>) -> Start {
        let cpu = self.bind.cpu(index);
        Start { index, cpu, gate, done: None, ready: self.ready, counters: self.counters, mode: Mode::Threads }
    }

    /// The leader's steps after the gate's pipe when the tasks warm up: make
    /// the ready pipe, clone tasks 0 to `n - 1`, read a token from each, mark
    /// `"start"`, open the gate for each and exit.
    fn next_warm(&mut self, ret: u64) -> Op {
        let n = self.tasks;
        match self.step - 3 {
            1 => {
                self.start = ret as u32;
                Op::Sys(Sys::Pipe)
            }
            s if s <= 1 + n => {
                if s == 2 {
                    self.ready = Some(ret as u32);
                }
                let at = self.at(s - 2, Some(self.start));
                let task = (self.make)(at);
                Op::Sys(Sys::CloneOn(at.cpu, task))
            }
            s if s <= 1 + 2 * n => Op::Sys(Sys::PipeRead(self.ready.unwrap_or_default())),
            s if s == 2 + 2 * n => Op::Mark("start"),
            s if s <= 2 + 3 * n => Op::Sys(Sys::PipeWrite(self.start)),
            _ => Op::Exit,
        }
    }
}

impl Program for Leader {
    fn next(&mut self, ret: u64) -> Op {
        if let Some(t) = &mut self.task {
            return t.next(ret);
        }
        self.step += 1;
        let n = self.tasks;
        match self.step {
            1 => Op::Sys(Sys::Mmap { pages: 1, write: true }),
            2 => {
                self.counters = ret;
                Op::Touch { va: self.counters, pages: 1, write: true }
            }
            3 => Op::Sys(Sys::Pipe),
            _ if self.warm => self.next_warm(ret),
            s if s <= 3 + (n - 1) => {
                if s == 4 {
                    self.start = ret as u32;
                }
                // Task i is bound to its CPU, as hwloc binds it to core i % ncores;
                // the leader, task 0, started on CPU 0.
                let at = self.at(s - 3, Some(self.start));
                let task = (self.make)(at);
                Op::Sys(Sys::CloneOn(at.cpu, task))
            }
            s if s == 4 + (n - 1) => {
                if n == 1 {
                    self.start = ret as u32;
                }
                Op::Mark("start")
            }
            s if s <= 4 + 2 * (n - 1) => Op::Sys(Sys::PipeWrite(self.start)),
            _ => {
                // The gate is open: run task 0, which skips the wait.
                let at = self.at(0, None);
                let mut t = (self.make)(at);
                let op = t.next(0);
                self.task = Some(t);
                op
            }
        }
    }
}

/// Process mode: maps the shared counters, forks every task, opens the gate
/// and waits for every task's exit.
struct Parent {
    tasks: u64,
    bind: Binding,
    make: MakeTask,
    step: u64,
    gate: u32,
    done: u32,
    /// The warmed-up tasks' pipe ([`setup_warm`]), once made.
    ready: Option<u32>,
    /// Whether the tasks warm up before the gate ([`setup_warm`]).
    warm: bool,
    counters: u64,
}

impl Program for Parent {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        let n = self.tasks;
        // With warm tasks: a third pipe after `done`, and one token from each
        // task read from it before the gate opens.
        let w = u64::from(self.warm);
        match self.step {
            1 => Op::Sys(Sys::MmapFile { file: COUNTERS_FILE, pages: 1, write: true, private: false }),
            2 => {
                self.counters = ret;
                Op::Touch { va: self.counters, pages: 1, write: true }
            }
            3 => Op::Sys(Sys::Pipe),
            4 => {
                self.gate = ret as u32;
                Op::Sys(Sys::Pipe)
            }
            5 if self.warm => {
                self.done = ret as u32;
                Op::Sys(Sys::Pipe)
            }
            s if s <= 4 + w + n => {
                if s == 5 + w {
                    if self.warm {
                        self.ready = Some(ret as u32);
                    } else {
                        self.done = ret as u32;
                    }
                }
                // Tasks 1, 2, ..., then task 0, which shares CPU 0 with the
                // parent: its token is the last one written.
                let i = (s - 4 - w) % n;
                let start = Start {
                    index: i,
                    cpu: self.bind.cpu(i),
                    gate: Some(self.gate),
                    done: Some(self.done),
                    ready: self.ready,
                    counters: self.counters,
                    mode: Mode::Processes,
                };
                Op::Sys(Sys::ForkOn(start.cpu, (self.make)(start)))
            }
            s if s <= 4 + w + n + w * n => Op::Sys(Sys::PipeRead(self.ready.unwrap_or_default())),
            s if s == 5 + w + n + w * n => Op::Mark("start"),
            s if s <= 5 + w + 2 * n + w * n => Op::Sys(Sys::PipeWrite(self.gate)),
            s if s <= 5 + w + 3 * n + w * n => Op::Sys(Sys::PipeRead(self.done)),
            _ => Op::Exit,
        }
    }
}

/// The result keys of every testcase: what [`result`] returns.
pub(crate) const RESULTS: &[&str] = &["ops_per_s", "per_thread_ops", "tlb_share"];

/// Returns `ops_per_s`, `per_thread_ops` and `tlb_share` of a run whose `tasks`
/// tasks did `ops` iterations in all, from the window between the gate
/// opening and the last task finishing. Where every task marked `"go"` as it
/// began (a warm start, [`setup_warm`]), the rates are over each task's own
/// time from its `"go"` to its `"end"` (their mean), as will-it-scale's
/// tasks, which never wait at a gate in the seconds it averages, run: the
/// gate's wake-ups (a task long idle wakes from a deep C-state) are not the
/// loop's.
pub(crate) fn result(workload: &'static str, tasks: u64, ops: u64, sim: &Sim) -> Result<BTreeMap<String, f64>, Error> {
    let none = || super::unmeasured(workload, "no task finished; no timing was recorded");
    let start = super::mark_max(sim, "start").ok_or_else(none)?;
    let end = super::mark_max(sim, "end").ok_or_else(none)?;
    let ops = ops as f64;
    let (gone, go) = super::mark_sum(sim, "go");
    let (ended, ends) = super::mark_sum(sim, "end");
    let cycles = if gone == tasks && ended == tasks && tasks > 0 {
        ends.saturating_sub(go) as f64 / tasks as f64
    } else {
        (end - start) as f64
    };
    let secs = cycles / sim.ghz() / 1e9;
    // What was spent before the gate opened (warm-ups) is not the window's.
    let before = sim.marks.iter().filter(|m| m.0 == "start").map(|m| m.3).max().unwrap_or(0);
    let invalidating = sim.invalidating_cycles() - before;
    let mut r = BTreeMap::new();
    r.insert("ops_per_s".to_string(), ops / secs);
    r.insert("per_thread_ops".to_string(), ops / secs / tasks as f64);
    r.insert("tlb_share".to_string(), invalidating as f64 / ((end - start) as f64 * sim.cfg.ncpus as f64));
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::Binding;

    #[test]
    fn two_threads_per_core_put_half_the_tasks_on_every_core_of_both_sockets() {
        // skx8170: 2 sockets of 26 cores x 2 threads, 52 CPUs a socket.
        let b = Binding { cpus: 104, per_socket: 52, smt: 2 };
        let cpus: Vec<usize> = (0..104).map(|i| b.cpu(i)).collect();
        assert_eq!(&cpus[..3], &[0, 1, 2]);
        // Task 26 is socket 1's first core; task 52 is core 0's second thread.
        assert_eq!((cpus[25], cpus[26], cpus[51], cpus[52], cpus[103]), (25, 52, 77, 26, 103));
        let mut half = cpus[..52].to_vec();
        half.sort_unstable();
        assert_eq!(half.iter().filter(|&&c| c < 52).count(), 26, "{half:?}");
        let mut all = cpus.clone();
        all.sort_unstable();
        assert_eq!(all, (0..104).collect::<Vec<_>>(), "every CPU once");
    }

    #[test]
    fn a_run_of_fewer_cpus_binds_to_the_cpus_it_has() {
        // 8 CPUs of skx8170: the first threads of socket 0's first 8 cores.
        let b = Binding { cpus: 8, per_socket: 52, smt: 2 };
        assert_eq!((0..10).map(|i| b.cpu(i)).collect::<Vec<_>>(), [0, 1, 2, 3, 4, 5, 6, 7, 0, 1]);
        // 30 CPUs: socket 0's 26 cores' first threads, then the second threads of cores 0 to 3.
        let b = Binding { cpus: 30, per_socket: 52, smt: 2 };
        assert_eq!((24..30).map(|i| b.cpu(i)).collect::<Vec<_>>(), [24, 25, 26, 27, 28, 29]);
    }

    #[test]
    fn one_thread_per_core_binds_task_i_to_cpu_i() {
        let b = Binding { cpus: 8, per_socket: 4, smt: 1 };
        assert_eq!((0..10).map(|i| b.cpu(i)).collect::<Vec<_>>(), [0, 1, 2, 3, 4, 5, 6, 7, 0, 1]);
    }
}
