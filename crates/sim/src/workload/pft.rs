//! mmtests' `pft`: Christoph Lameter's page fault test, as Lee Schermerhorn
//! reworked it, threads (or processes) each writing once to every page of
//! their share of one anonymous mapping.
//!
//! # The benchmark (github.com/gormanm/pft `pft.c`; mmtests `shellpack_src/src/pft/pft-bench`)
//! mmtests' `config-workload-pft-threads` runs `./pft -m $PFT_MAPPING_SIZE -t
//! $NR_THREADS` (`config-workload-pft-process`: `-n`, processes) for client
//! counts from 1 to the CPUs, capped at 128 (`MAX_TESTS`), with
//! `PFT_MAPPING_SIZE = MemTotal / 5` and base pages (THP off,
//! `PFT_PAGESIZES=base`). `pft` rounds the pages up to a multiple of the tests
//! (`pages_per_test = ROUND_UP(pages, nr_tests) / nr_tests`), maps the whole
//! region once before starting anything (`alloc_test_memory` →
//! `valloc_private`: one `mmap(MAP_PRIVATE | MAP_ANONYMOUS)`, untouched: "one
//! large test area => single anon_vma"; the per-test mappings of `-M` are
//! compiled out), and gives test `j` the part from `j * bytes_per_test`. With
//! `-t` every test is a thread of the one process, so all of them fault on one
//! VMA ("the workers will also contend for the single test task's mmap
//! semaphore"); with `-n` the launcher forks each test, so each has its own
//! address space (a copy of the untouched mapping). The tests wait until the
//! launcher sets `comm->go`, then run `pft_loop`: the default (no `-z`, no
//! `-l`, `-c 1`) writes one byte at the start of each page of its part (one
//! write fault each, allocating and zeroing the page). mmtests gives no `-a`,
//! so tests are not bound: each thread starts where Linux's fork balancing
//! puts it (`crate::sched::fork`), the launcher on CPU 0 creating them in
//! turn while the earlier ones spin on `comm->go`. On a two-node machine of
//! v5.19 on that is two more on the launcher's node, then the nodes in turn,
//! every core's first thread before a second; on older kernels the
//! launcher's node until it has no idle CPU. The launcher runs test 0
//! itself. (FreeBSD, whose scheduler is not modelled, takes will-it-scale's
//! binding order, `will_it_scale::Binding`.)
//!
//! It prints `fault/wsec`, the pages over the wall time from the earliest
//! test's start to the latest test's end (`update_walltime_and_rusage`), and
//! `flt/cpu/s`, the pages over the user and system time of the tests
//! (`getrusage`); mmtests reports both (`ExtractPft.pm`: `faults/sec`,
//! `faults/cpu`).
//!
//! # The model
//! - `procs` 0: one process whose leader (on CPU 0) maps the region, clones
//!   `tasks - 1` threads, thread `j` where fork balancing puts it (threads
//!   that spin on `comm->go` stay where they start), opens
//!   a gate (a pipe, for pft's spin on `comm->go`) and runs test 0. `procs` 1:
//!   `tasks` processes, each mapping its own share (outside the timed part, as
//!   pft maps before forking), started on the least loaded CPU; no gate.
//! - `vmas` 1 (threads only): each thread maps its own part before it waits
//!   at the gate, so every test faults on a VMA of its own, as the `-M`
//!   option of pft's source did before it was compiled out: the case where a
//!   per-VMA lock is a line of the thread's own and `mmap_lock` is still one
//!   line for all.
//! - Each test records its start, writes its pages (one access a page, one
//!   fault each, under `mmap_lock` or its VMA's lock: [`crate::toggle::VMA_LOCKS`]),
//!   and records its end.
//! - `mem_mb` (default 256) stands for `MemTotal / 5`, scaled down to keep the
//!   run short (an estimate: a machine's memory is not in the benchmark; the
//!   figure pft reports is a rate, which the size only averages: on skx8170's
//!   104 CPUs the model's `faults_per_cpu_s` at 256 MB is within 4% of its
//!   figure at 1 GB, while at 64 MB the first faults' refills of the per-CPU
//!   page lists, all CPUs at once under one zone lock, take 12% off it).
//!
//! Results: `faults_per_s`, pages over the time from the earliest start to the
//! latest end (pft's `fault/wsec`), and `faults_per_cpu_s`, pages over the
//! tests' times summed (each test runs alone on its CPU, so its CPU time is
//! its time from start to end; pft's `flt/cpu/s`, whose rusage also counts
//! what the kernel does for the thread outside the faults).
//!
//! What stays different: no THP, the spin on `comm->go` is a
//! sleep on a pipe, the processes of `procs` 1 are not forked from one parent
//! and do not start together, and the RCU walk of `lock_vma_under_rcu` costs
//! what `find_vma` does (the preset's `fault_path`).

use super::will_it_scale::Binding;
use super::{params, Params, WorkloadDef};
use crate::error::Error;
use crate::program::{Op, Program, Sys};
use crate::sim::Sim;
use std::collections::BTreeMap;

params! {
    PARAMS;
    TASKS: Count("tasks", 0, 0..=128)
        "tests (pft -t or -n; 0: one per CPU, mmtests' largest client count; pft's MAX_TESTS is 128)";
    PROCS: Flag("procs")
        "0: threads of one process faulting on one VMA (pft -t, config-workload-pft-threads); 1: processes, each its \
         own address space (pft -n)";
    VMAS: Flag("vmas")
        "threads mode: 0 one VMA for all threads (pft's single test area); 1 one VMA per thread (each maps its own \
         part before the start, as pft's compiled-out -M did)";
    MEM_MB: Count("mem_mb", 256, 1..=65_536)
        "MB mapped and written in all (pft -m; mmtests: MemTotal / 5; scaled down)";
}

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef::new(
    "pft",
    "mmtests pft: threads (or processes) each write one byte to every page of their share of one \
     anonymous mapping (a write fault a page); faults per second",
    PARAMS,
    &["faults_per_s", "faults_per_cpu_s"],
    |p, _, sim, _| setup(p, sim),
    |p, main, _| result(p, main),
    |p, _, cpus| max_mms(p, cpus),
);

/// One test: `pft_loop` over its part.
struct Test {
    /// The gate to wait on (threads only).
    gate: Option<u32>,
    /// The part's first page, or `None` for a process that maps its own.
    va: Option<u64>,
    pages: u64,
    step: u8,
    /// Pages written so far.
    done: u64,
    /// A thread that maps its own part first (`vmas=1`): 1 before its
    /// `mmap`, 2 when its address is due, 0 after.
    premap: u8,
}

impl Program for Test {
    fn next(&mut self, ret: u64) -> Op {
        match self.premap {
            1 => {
                self.premap = 2;
                return Op::Sys(Sys::Mmap { pages: self.pages, write: true });
            }
            2 => {
                self.premap = 0;
                self.va = Some(ret);
            }
            _ => {}
        }
        self.step += 1;
        match self.step {
            1 => match (self.gate, self.va) {
                (Some(g), _) => Op::Sys(Sys::PipeRead(g)),
                (None, None) => Op::Sys(Sys::Mmap { pages: self.pages, write: true }),
                // (The launcher's own test starts past this step.)
                (None, Some(_)) => Op::Compute(0),
            },
            2 => {
                if self.va.is_none() {
                    self.va = Some(ret);
                }
                Op::Mark("start")
            }
            3 => {
                // One page an operation, so that the tests' faults interleave
                // in simulated time as the CPUs run them (a touch of many pages
                // runs up to 64 faults of one CPU at one point of the order).
                self.done += 1;
                if self.done < self.pages {
                    self.step = 2;
                }
                let va = self.va.unwrap_or(0) + (self.done - 1) * 4096;
                Op::Touch { va, pages: 1, write: true }
            }
            4 => Op::Mark("end"),
            _ => Op::Exit,
        }
    }
}

/// The launcher of threads mode: maps the region, clones the other tests,
/// opens the gate and runs test 0.
struct Launcher {
    tasks: u64,
    /// Where test `j` runs.
    cpus: Vec<usize>,
    pages: u64,
    region: u64,
    gate: u32,
    step: u8,
    /// Tests cloned so far (test 0 is the launcher's own).
    cloned: u64,
    /// Tokens written to the gate so far.
    opened: u64,
    test: Option<Test>,
    /// Each test maps its own part (`vmas=1`).
    own_vmas: bool,
}

impl Program for Launcher {
    fn next(&mut self, ret: u64) -> Op {
        if let Some(t) = &mut self.test {
            return t.next(ret);
        }
        match self.step {
            0 if self.own_vmas => {
                self.step = 2;
                return Op::Sys(Sys::Pipe);
            }
            0 => {
                self.step = 1;
                return Op::Sys(Sys::Mmap { pages: self.tasks * self.pages, write: true });
            }
            1 => {
                self.step = 2;
                self.region = ret;
                return Op::Sys(Sys::Pipe);
            }
            2 => {
                self.step = 3;
                self.gate = ret as u32;
            }
            _ => {}
        }
        let others = self.tasks - 1;
        if self.cloned < others {
            self.cloned += 1;
            let j = self.cloned;
            let (va, premap) = match self.own_vmas {
                true => (None, 1),
                false => (Some(self.region + j * self.pages * 4096), 0),
            };
            let t = Test { gate: Some(self.gate), va, pages: self.pages, step: 0, done: 0, premap };
            return Op::Sys(Sys::CloneOn(self.cpus[j as usize], Box::new(t)));
        }
        if self.opened < others {
            self.opened += 1;
            return Op::Sys(Sys::PipeWrite(self.gate));
        }
        // Test 0, which waits for nothing: comm->go is set (with its own VMA,
        // it maps it first, after the others have started).
        let (va, premap) = if self.own_vmas { (None, 1) } else { (Some(self.region), 0) };
        let mut t = Test { gate: None, va, pages: self.pages, step: 1, done: 0, premap };
        let op = t.next(0);
        self.test = Some(t);
        op
    }
}

/// Returns the tests and the pages of each: `mem_mb` rounded up to a multiple
/// of the tests, as pft rounds it.
fn shape(p: &Params, cpus: usize) -> (u64, u64) {
    let tasks = TASKS.or_cpus(p, cpus).min(TASKS.0.max as u64);
    let pages = MEM_MB.of(p) * 256;
    (tasks, pages.div_ceil(tasks).max(1))
}

/// Starts the launcher (threads) or the processes.
pub fn setup(p: &Params, sim: &mut Sim) -> Result<(), Error> {
    let cpus = sim.cfg.ncpus.max(1);
    let (tasks, pages) = shape(p, cpus);
    if PROCS.of(p) {
        for _ in 0..tasks {
            sim.spawn(Box::new(Test { gate: None, va: None, pages, step: 0, done: 0, premap: 0 }))?;
        }
        return Ok(());
    }
    let own_vmas = VMAS.of(p);
    let cpus = sim.fork_order(tasks as usize, 0).unwrap_or_else(|| {
        let bind = Binding::of(sim);
        (0..tasks).map(|j| bind.cpu(j)).collect()
    });
    let l = Launcher { tasks, cpus, pages, region: 0, gate: 0, step: 0, cloned: 0, opened: 0, test: None, own_vmas };
    sim.spawn(Box::new(l))?;
    Ok(())
}

/// Returns `faults_per_s` and `faults_per_cpu_s` (module documentation).
pub fn result(p: &Params, sim: &Sim) -> Result<BTreeMap<String, f64>, Error> {
    let (tasks, pages) = shape(p, sim.cfg.ncpus.max(1));
    let (starts, ends) = (super::mark_times(sim, "start"), super::mark_times(sim, "end"));
    if ends.len() as u64 != tasks || starts.len() != ends.len() {
        return Err(super::unmeasured(DEF.name, format!("{} of {tasks} tests finished", ends.len())));
    }
    let first = starts.iter().copied().min().unwrap_or(0);
    let last = ends.iter().copied().max().unwrap_or(first);
    let g = sim.ghz();
    // Each test records one start and one end: their sums' difference is the
    // sum of the tests' times.
    let busy = ends.iter().sum::<u64>().saturating_sub(starts.iter().sum::<u64>());
    let total = (tasks * pages) as f64;
    let wall = ((last - first) as f64 / g / 1e9).max(1e-12);
    let cpu = (busy as f64 / g / 1e9).max(1e-12);
    let mut r = BTreeMap::new();
    r.insert("faults_per_s".to_string(), total / wall);
    r.insert("faults_per_cpu_s".to_string(), total / cpu);
    Ok(r)
}

/// Returns the address spaces it needs: one, or one per process.
pub fn max_mms(p: &Params, cpus: usize) -> usize {
    if PROCS.of(p) {
        shape(p, cpus.max(1)).0 as usize + 8
    } else {
        8
    }
}
