//! will-it-scale's `tlb_flush2` in threads mode (`tlb_flush2_threads`): the
//! benchmark the lazy `mm_cpumask` and INVLPGB series were measured with.
//!
//! Source: github.com/antonblanchard/will-it-scale, `tests/tlb_flush2.c`
//! `testcase()` (Kemi Wang, 2018) and the harness `main.c` built with `THREADS`.
//! Each task loops: `mmap` 1 MiB (anonymous, private, read-write); for each of its
//! 256 pages a one-byte store (a write fault that allocates the page), a
//! one-page `madvise(MADV_DONTNEED)` (a flush of that page on every CPU running
//! the mm), a one-byte load (a read fault; Linux maps the shared zero page) and
//! one increment of the task's counter; then `munmap` of the 1 MiB (256 pages,
//! above the 33-page ceiling: a flush of the whole mm). One iteration is one page.
//! In threads mode every task is a thread of one process, each bound to its own
//! core, started together by one byte on a pipe; 0-day runs one per CPU.
//!
//! The model: a leader (on CPU 0) clones `tasks - 1` workers bound to CPUs 1,
//! 2, ... (modulo the CPUs) and is the last task itself; all wait on one pipe
//! until the leader has cloned them all, then run `laps` map/unmap cycles. The
//! counters are one shared page, mapped before the tasks start. Fixed work
//! instead of will-it-scale's fixed time: the run ends when the last task has
//! finished its laps.
//!
//! What stays different: the read after `MADV_DONTNEED` allocates and maps a
//! page (the simulator has no zero page; the fault path's cost is the same
//! figure), neighbouring mappings are not merged, and `mmap_lock` contention
//! between one task's `mmap`/`munmap` and the others' faults is not modelled.
//!
//! Results: `ops_per_s`, iterations per second summed over tasks (will-it-scale's
//! `average:`, 0-day's `workload`); `per_thread_ops` (its `per_thread_ops`); and
//! `tlb_share`, the share of all CPUs' time spent invalidating TLBs: initiators
//! inside the policy's flush calls (IPIs and waits included), IPI handlers, and
//! running CPUs processing broadcast invalidations they did not issue.

use super::{ParamDef, Params, WorkloadDef};
use crate::error::Error;
use crate::program::{Op, Program, Sys};
use crate::sim::Sim;
use std::collections::BTreeMap;
use tlbkit_policy::Policy;

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef {
    name: "will_it_scale_tlb_flush2",
    description: "will-it-scale tlb_flush2, threads mode: each thread maps 1 MiB, writes, madvise(DONTNEED)s and \
                  reads each page, then unmaps it (LKP: one thread per CPU)",
    params: &[
        ParamDef {
            key: "tasks",
            default: 0.0,
            min: 0.0,
            max: 4096.0,
            doc: "threads of the one process (0: one per CPU, as 0-day's nr_task=100%)",
        },
        ParamDef {
            key: "laps",
            default: 2.0,
            min: 1.0,
            max: 100_000.0,
            doc: "map/unmap cycles of each thread (will-it-scale runs for a time instead)",
        },
        ParamDef { key: "pages", default: 256.0, min: 1.0, max: 262_144.0, doc: "4 KB pages per mapping (1 MiB: 256)" },
    ],
    has_overhead: false,
    results: &["ops_per_s", "per_thread_ops", "tlb_share"],
};

/// One task's loop.
struct Task {
    start: u32,
    counters: u64,
    laps: u64,
    pages: u64,
    lap: u64,
    page: u64,
    buf: u64,
    /// Where in the iteration: 0 store, 1 madvise, 2 load, 3 counter.
    part: u8,
    stage: Stage,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    Wait,
    Map,
    Pages,
    Unmap,
    Done,
    Exit,
}

impl Task {
    fn new(start: u32, counters: u64, laps: u64, pages: u64) -> Self {
        Task { start, counters, laps, pages, lap: 0, page: 0, buf: 0, part: 0, stage: Stage::Wait }
    }
}

impl Program for Task {
    fn next(&mut self, ret: u64) -> Op {
        loop {
            match self.stage {
                Stage::Wait => {
                    self.stage = Stage::Map;
                    return Op::Sys(Sys::PipeRead(self.start));
                }
                Stage::Map => {
                    if self.lap == self.laps {
                        self.stage = Stage::Done;
                        continue;
                    }
                    self.stage = Stage::Pages;
                    self.page = 0;
                    self.part = 0;
                    return Op::Sys(Sys::Mmap { pages: self.pages, write: true });
                }
                Stage::Pages => {
                    if self.page == 0 && self.part == 0 {
                        self.buf = ret;
                    }
                    if self.page == self.pages {
                        self.stage = Stage::Unmap;
                        continue;
                    }
                    let va = self.buf + self.page * 4096;
                    let op = match self.part {
                        0 => Op::Touch { va, pages: 1, write: true },
                        1 => Op::Sys(Sys::Madvise { va, pages: 1 }),
                        2 => Op::Touch { va, pages: 1, write: false },
                        _ => Op::Touch { va: self.counters, pages: 1, write: true },
                    };
                    self.part += 1;
                    if self.part == 4 {
                        self.part = 0;
                        self.page += 1;
                    }
                    return op;
                }
                Stage::Unmap => {
                    self.lap += 1;
                    self.stage = Stage::Map;
                    return Op::Sys(Sys::Munmap { va: self.buf, pages: self.pages });
                }
                Stage::Done => {
                    self.stage = Stage::Exit;
                    return Op::Mark("end");
                }
                Stage::Exit => return Op::Exit,
            }
        }
    }
}

/// The leader: maps the counters page, clones the other tasks, opens the gate
/// and runs the last task itself.
struct Leader {
    tasks: u64,
    laps: u64,
    pages: u64,
    step: u64,
    start: u32,
    counters: u64,
    task: Option<Task>,
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
            s if s <= 3 + (n - 1) => {
                if s == 4 {
                    self.start = ret as u32;
                }
                // Task i is bound to CPU i, as hwloc binds it to core i % ncores;
                // the leader, the last task, started on CPU 0.
                let task = Task::new(self.start, self.counters, self.laps, self.pages);
                Op::Sys(Sys::CloneOn((s - 3) as usize, Box::new(task)))
            }
            s if s == 4 + (n - 1) => {
                if n == 1 {
                    self.start = ret as u32;
                }
                Op::Mark("start")
            }
            s if s <= 4 + 2 * (n - 1) => Op::Sys(Sys::PipeWrite(self.start)),
            _ => {
                // The gate is open: run the last task, which skips the wait.
                let mut t = Task::new(self.start, self.counters, self.laps, self.pages);
                t.stage = Stage::Map;
                let op = t.next(0);
                self.task = Some(t);
                op
            }
        }
    }
}

/// Starts the process.
pub fn setup<P: Policy>(p: &Params, sim: &mut Sim<P>) -> Result<(), Error> {
    let leader = Leader {
        tasks: super::count_or_cpus(p, "tasks", sim.cfg.ncpus),
        laps: p["laps"] as u64,
        pages: p["pages"] as u64,
        step: 0,
        start: 0,
        counters: 0,
        task: None,
    };
    sim.spawn(Box::new(leader))?;
    Ok(())
}

/// Returns `ops_per_s`, `per_thread_ops` and `tlb_share` from the window
/// between the gate opening and the last task finishing.
pub fn result<P: Policy>(p: &Params, sim: &Sim<P>) -> Result<BTreeMap<String, f64>, Error> {
    let none = || super::unmeasured(DEF.name, "no task finished; no timing was recorded");
    let start = super::mark_max(sim, "start").ok_or_else(none)?;
    let end = super::mark_max(sim, "end").ok_or_else(none)?;
    let n = super::count_or_cpus(p, "tasks", sim.cfg.ncpus);
    let ops = (n * p["laps"] as u64 * p["pages"] as u64) as f64;
    let secs = (end - start) as f64 / sim.ghz() / 1e9;
    let h = sim.counters();
    let invalidating = sim.stats.flush_cycles + h.ipi_handler_cycles + sim.broadcast_stall_cycles();
    let mut r = BTreeMap::new();
    r.insert("ops_per_s".to_string(), ops / secs);
    r.insert("per_thread_ops".to_string(), ops / secs / n as f64);
    r.insert("tlb_share".to_string(), invalidating as f64 / ((end - start) as f64 * sim.cfg.ncpus as f64));
    Ok(r)
}

#[cfg(test)]
mod tests {
    use crate::run::{run, RunSpec};

    fn per_thread(policy: &str, cpus: usize) -> f64 {
        let spec = RunSpec {
            machine: "milan".into(),
            cpus,
            policy: policy.into(),
            workload: "will_it_scale_tlb_flush2".into(),
            sets: vec!["laps=1".into(), "pages=64".into()],
            seed: 1,
            strict: true,
        };
        let out = run(&spec).unwrap();
        assert_eq!(out.violations_total, 0);
        out.result["per_thread_ops"]
    }

    #[test]
    fn a_second_thread_costs_its_ipis_and_no_idle_wait() {
        // One madvise IPI sent and one handled per page: about a microsecond on
        // milan. A CPU that waited, idle, for handlers due after its operation
        // had begun lost twice that (per-thread rate 0.55 of one thread's).
        let (one, two) = (per_thread("x86-linux-lazytrim", 1), per_thread("x86-linux-lazytrim", 2));
        assert!(two < one, "IPIs cost something: {two} vs {one}");
        assert!(two > 0.65 * one, "per-thread rate at 2 CPUs {two} vs {one} at 1");
    }

    #[test]
    fn broadcasts_spare_the_threads_the_ipis() {
        // Four CPUs run the mm: it gets a global ASID and flushes by INVLPGB.
        let (ipi, bcast) = (per_thread("x86-linux-lazytrim", 4), per_thread("x86-linux-invlpgb", 4));
        assert!(bcast > ipi, "{bcast} vs {ipi}");
    }
}
