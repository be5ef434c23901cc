//! `pmbench_migrate`: pmbench's worker threads access random pages of their
//! working set while another process moves those pages back and forth between
//! two NUMA nodes (`migratepages PID 0 1`, then `1 0`, ...), the scenario
//! for Linux v6.3's batched TLB flush in `migrate_pages` (`sim/migrate.rs`).
//!
//! # The benchmark (pmbench, `pmbench.c` and `doc/pmbench.1`, Jisoo Yang)
//! `set_default_params`: `mapsize_mib` 256 (`-m`), `setsize_mib` 128 (`-s`),
//! pattern `uniform` (`-p`: every page of the working set equally likely),
//! `jobs` 1 (`-j`), `ratio` 50 (`-r`: half the accesses reads, half writes),
//! no delay between accesses (`-d 0`), a warm-up before the measurement
//! (`-c` not given), the memory map not initialised (`-i` not given). pmbench
//! `mmap`s the map (anonymous, private), warms up with the same pattern, then
//! each worker thread, with its own pattern generator, draws a page number in
//! `[0, setsize pages)` and accesses it, timing each access with `rdtscp`; it
//! reports per thread the mean access latency less the mean time of drawing
//! the number ("Net average page latency").
//!
//! # The model
//! - pmbench's main thread maps `mapsize_mb`, writes every page of the
//!   working set once (the warm-up; pmbench's is random accesses by every
//!   thread, which leave every page of the set touched for any warm-up of a
//!   few times the set's pages: an estimate of its effect, not of its
//!   length), clones `jobs` worker threads bound to the first CPUs of node 0,
//!   opens the migrator's gate and waits for the workers.
//! - Each worker draws pages from a 64-bit xorshift generator of its own
//!   (seeded from the run's seed and its number) and accesses one 4 KB page
//!   per draw, a write with probability `ratio`/100 inverted (pmbench's
//!   `ratio` is the reads' share), in chunks of [`CHUNK`] accesses, until the
//!   migrator is done. The generator's and `rdtscp`'s time is left out, as
//!   pmbench subtracts the former (the latter, a few tens of cycles, stays in
//!   pmbench's figure and is not added here).
//! - The migrator is a process forked by pmbench before the map exists (so it
//!   shares none of its pages) whose thread, bound to the first CPU of node 1,
//!   waits for the gate and then calls `migrate_pages(2)` on pmbench's process
//!   `passes` times, from node 0 to 1, back from 1 to 0, and so on, as
//!   `migratepages PID 0 1` and `migratepages PID 1 0` run in turn would.
//!   `passes` (4) is an estimate: enough passes that the workers run through
//!   several migrations.
//! - The machine needs two nodes: a preset with two sockets (the second is
//!   node 1, whether or not `--cpus` reaches it), `--set numa=2` on a preset
//!   that allows it, or `--set cpuless_node=1`, which adds a node with memory
//!   and no CPUs (a CXL memory expander; the strict matrix's one-socket
//!   machines use it). The migrator runs on node 1's first CPU if `--cpus`
//!   reaches it, else on the last CPU.
//!
//! # What stays different
//! A worker's access to a page on the other node costs what a local one does,
//! and only the migration's copies from the other node's memory pay its
//! latency (`sim/migrate.rs`, "Costs" and "Not modelled"); `migratepages` reads `/proc` and calls the system call
//! once per pass, here the migrator issues the call directly; pmbench's
//! histogram, timestamps and pattern generation are not simulated.
//!
//! Results: `access_ns`, the workers' mean time per access while the
//! migrator runs (ns); `accesses_per_s`, their accesses per second, all
//! workers together; `migrate_pages_per_s`, pages moved per second of the
//! migrator's calls; `flushes_per_page`, the unmap flushes and batch flushes
//! of the migration per page moved; `ipis_per_page`, IPIs sent per page moved
//! (the whole run's: once warm, pmbench sends none of its own);
//! `migration_waits`, the accesses that waited for a page under migration.

use super::{params, Params, WorkloadDef};
use crate::error::Error;
use crate::program::{Op, Program, Sys};
use crate::sim::Sim;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

params! {
    PARAMS;
    MAPSIZE_MB: Count("mapsize_mb", 256, 1..=4096)
        "MB mapped (pmbench -m)";
    SETSIZE_MB: Count("setsize_mb", 128, 1..=4096)
        "MB of the working set accessed (pmbench -s; at most mapsize_mb)";
    JOBS: Count("jobs", 1, 1..=64)
        "worker threads (pmbench -j)";
    RATIO: Count("ratio", 50, 0..=100)
        "percentage of accesses that are reads (pmbench -r; 0 write only, 100 read only)";
    CPULESS_NODE: Flag("cpuless_node")
        "1: add a node with memory and no CPUs (CXL-like) as the last node, so that a one-node machine can run it; 0: \
         none";
    PASSES: Count("passes", 4, 1..=1000)
        "migrate_pages calls, alternately node 0 to 1 and 1 to 0";
}

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef::new(
    "pmbench_migrate",
    "pmbench (uniform random 4 KB accesses, 50% reads, over a 128 MB working set) while another \
     process moves its pages between NUMA nodes 0 and 1 with migrate_pages(2), back and forth",
    PARAMS,
    &["access_ns", "accesses_per_s", "migrate_pages_per_s", "flushes_per_page", "ipis_per_page", "migration_waits"],
    |p, _, sim, _| setup(p, sim),
    |p, main, _| result(p, main),
    |_, _, _| max_mms(),
);

/// Accesses a worker makes between two looks at whether the migrator is done.
pub const CHUNK: u64 = 64;

/// Pages the warm-up writes per touch.
const WARM_CHUNK: u64 = 16;

/// What pmbench's threads and the migrator share: the migrator's end.
#[derive(Default)]
struct Shared {
    /// pmbench's main thread (the process `migrate_pages` moves).
    target: Cell<usize>,
    /// Set once the migrator's last call has returned.
    done: Cell<bool>,
}

/// A 64-bit xorshift generator (Marsaglia), a worker's pattern generator.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

/// One pmbench worker thread.
struct Worker {
    sh: Rc<Shared>,
    addr: u64,
    set_pages: u64,
    /// Writes per 100 accesses.
    writes: u64,
    rng: XorShift,
    step: u64,
    join: u32,
    state: u8,
}

impl Program for Worker {
    fn next(&mut self, _ret: u64) -> Op {
        match self.state {
            0 => {
                self.state = 1;
                Op::Mark("access_start")
            }
            1 if self.step == CHUNK => {
                self.step = 0;
                if self.sh.done.get() {
                    self.state = 2;
                }
                Op::Mark("chunk")
            }
            1 => {
                self.step += 1;
                let page = self.rng.next() % self.set_pages;
                let write = self.rng.next() % 100 < self.writes;
                Op::Touch { va: self.addr + page * 4096, pages: 1, write }
            }
            2 => {
                self.state = 3;
                Op::Mark("access_end")
            }
            3 => {
                self.state = 4;
                Op::Sys(Sys::PipeWrite(self.join))
            }
            _ => Op::Exit,
        }
    }
}

/// The migrator's thread: waits for the gate, then `migrate_pages` back and forth.
struct Migrator {
    sh: Rc<Shared>,
    gate: u32,
    passes: u64,
    step: u64,
}

impl Program for Migrator {
    fn next(&mut self, _ret: u64) -> Op {
        self.step += 1;
        match self.step {
            1 => Op::Sys(Sys::PipeRead(self.gate)),
            2 => Op::Mark("migrate_start"),
            s if s <= 2 + self.passes => {
                let from = ((s - 3) % 2) as u8;
                Op::Sys(Sys::MigratePages { tid: self.sh.target.get(), from, to: 1 - from })
            }
            s if s == 3 + self.passes => {
                self.sh.done.set(true);
                Op::Mark("migrate_end")
            }
            _ => Op::Exit,
        }
    }
}

/// The migrator process's first thread: starts the bound migrator thread and exits.
struct MigratorMain {
    thread: Option<(usize, Migrator)>,
}

impl Program for MigratorMain {
    fn next(&mut self, _ret: u64) -> Op {
        match self.thread.take() {
            Some((cpu, m)) => Op::Sys(Sys::CloneOn(cpu, Box::new(m))),
            None => Op::Exit,
        }
    }
}

/// pmbench's main thread.
struct Main {
    sh: Rc<Shared>,
    map_pages: u64,
    set_pages: u64,
    jobs: u64,
    writes: u64,
    passes: u64,
    seed: u64,
    /// CPUs of node 0 and the migrator's CPU.
    node_cpus: usize,
    migrator_cpu: usize,
    gate: u32,
    join: u32,
    addr: u64,
    warmed: u64,
    cloned: u64,
    joined: u64,
    step: u8,
}

impl Program for Main {
    fn next(&mut self, ret: u64) -> Op {
        self.step = self.step.saturating_add(1);
        match self.step {
            1 => Op::Sys(Sys::Pipe),
            2 => {
                self.gate = ret as u32;
                Op::Sys(Sys::Pipe)
            }
            3 => {
                self.join = ret as u32;
                let m = Migrator { sh: self.sh.clone(), gate: self.gate, passes: self.passes, step: 0 };
                Op::Sys(Sys::Fork(Box::new(MigratorMain { thread: Some((self.migrator_cpu, m)) })))
            }
            4 => Op::Sys(Sys::Mmap { pages: self.map_pages, write: true }),
            _ => {
                if self.step == 5 {
                    self.addr = ret;
                }
                self.step = 5;
                if self.warmed < self.set_pages {
                    let n = WARM_CHUNK.min(self.set_pages - self.warmed);
                    let va = self.addr + self.warmed * 4096;
                    self.warmed += n;
                    return Op::Touch { va, pages: n, write: true };
                }
                if self.cloned < self.jobs {
                    let j = self.cloned;
                    self.cloned += 1;
                    let w = Worker {
                        sh: self.sh.clone(),
                        addr: self.addr,
                        set_pages: self.set_pages,
                        writes: self.writes,
                        rng: XorShift((self.seed ^ 0x9e37_79b9_7f4a_7c15).wrapping_mul(j + 1) | 1),
                        step: 0,
                        join: self.join,
                        state: 0,
                    };
                    return Op::Sys(Sys::CloneOn(j as usize % self.node_cpus, Box::new(w)));
                }
                if self.cloned == self.jobs {
                    self.cloned += 1;
                    return Op::Sys(Sys::PipeWrite(self.gate));
                }
                if self.joined < self.jobs {
                    self.joined += 1;
                    return Op::Sys(Sys::PipeRead(self.join));
                }
                Op::Exit
            }
        }
    }
}

/// Starts pmbench (which forks the migrator); errs unless the machine has two
/// NUMA nodes and the working set fits the map.
pub fn setup(p: &Params, sim: &mut Sim) -> Result<(), Error> {
    if CPULESS_NODE.of(p) {
        sim.add_cpuless_node();
    }
    if sim.nodes() < 2 {
        return Err(super::unmeasured(
            DEF.name,
            format!(
                "needs two NUMA nodes, and this machine has one ({} CPU(s) a node): boot it with --set numa=2 \
                 where the preset allows, use a preset with two sockets, or add a memory-only node with \
                 --set cpuless_node=1",
                sim.node_cpus()
            ),
        ));
    }
    if SETSIZE_MB.of(p) > MAPSIZE_MB.of(p) {
        return Err(Error::ParamExceeds {
            workload: DEF.name,
            key: SETSIZE_MB.0.key,
            value: SETSIZE_MB.of(p).to_string(),
            limit_key: MAPSIZE_MB.0.key,
            limit: MAPSIZE_MB.of(p).to_string(),
        });
    }
    let sh = Rc::new(Shared::default());
    let node_cpus = sim.node_cpus();
    let main = Main {
        sh: sh.clone(),
        map_pages: MAPSIZE_MB.of(p) * 256,
        set_pages: SETSIZE_MB.of(p) * 256,
        jobs: JOBS.of(p),
        writes: 100 - RATIO.of(p),
        passes: PASSES.of(p),
        seed: sim.cfg.seed,
        node_cpus,
        migrator_cpu: node_cpus.min(sim.cfg.ncpus - 1),
        gate: 0,
        join: 0,
        addr: 0,
        warmed: 0,
        cloned: 0,
        joined: 0,
        step: 0,
    };
    let tid = sim.spawn(Box::new(main))?;
    sh.target.set(tid);
    Ok(())
}

/// Returns the results the module documentation lists.
pub fn result(p: &Params, sim: &Sim) -> Result<BTreeMap<String, f64>, Error> {
    let jobs = JOBS.usize(p);
    let (starts, ends) = (super::mark_times(sim, "access_start"), super::mark_times(sim, "access_end"));
    if starts.len() != jobs || ends.len() != jobs {
        return Err(super::unmeasured(DEF.name, format!("{} of {jobs} workers finished", ends.len())));
    }
    let (m0, m1) = (super::mark_max(sim, "migrate_start"), super::mark_max(sim, "migrate_end"));
    let (Some(m0), Some(m1)) = (m0, m1) else {
        return Err(super::unmeasured(DEF.name, "the migrator did not finish"));
    };
    let g = sim.ghz();
    let accesses = super::mark_times(sim, "chunk").len() as u64 * CHUNK;
    let busy: u64 = ends.iter().sum::<u64>() - starts.iter().sum::<u64>();
    let first = starts.iter().copied().min().unwrap_or(0);
    let last = ends.iter().copied().max().unwrap_or(first);
    let moved = sim.stats.pageout.migrated_pages.max(1) as f64;
    let flushes = (sim.stats.pageout.unmap_flushes + sim.stats.pageout.tlbbatch_flushes) as f64;
    let mut r = BTreeMap::new();
    r.insert("access_ns".to_string(), busy as f64 / g / accesses.max(1) as f64);
    r.insert("accesses_per_s".to_string(), accesses as f64 / ((last - first).max(1) as f64 / g / 1e9));
    r.insert(
        "migrate_pages_per_s".to_string(),
        sim.stats.pageout.migrated_pages as f64 / ((m1 - m0).max(1) as f64 / g / 1e9),
    );
    r.insert("flushes_per_page".to_string(), flushes / moved);
    r.insert("ipis_per_page".to_string(), sim.counters().ipis_sent as f64 / moved);
    r.insert("migration_waits".to_string(), sim.stats.pageout.migration_waits as f64);
    Ok(r)
}

/// Returns the address spaces it needs: pmbench and the migrator.
pub fn max_mms() -> usize {
    4
}
