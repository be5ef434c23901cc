//! vm-scalability's `case-swap-w-seq-mt`: threads of one process write more
//! anonymous memory, sequentially, than the memory they may use, so that their
//! faults reclaim to swap.
//!
//! # The benchmark (vm-scalability, `case-swap-w-seq-mt` and `usemem.c`)
//! The case script needs swap (`SwapTotal` > 0) and runs
//! `usemem -t $nr_task $((unit_size / nr_task))` with `unit_size =
//! (MemAvailable + SwapTotal) * 3 / 4` bytes: one `usemem` process (no `-n`:
//! `nr_task = 1`) forks one child, whose `nr_task` threads (`-t`) each run
//! `do_units`: wait on a pipe until every thread is ready (`ready`, from
//! hackbench), `mmap` its share privately from `/dev/zero` (anonymous memory),
//! and write it once (`do_rw_once` with `step = sizeof(long)`, no `-r`: every
//! 8-byte word in address order, `p[i] = i`, never read or written again), then
//! print `bytes / usecs = KB/s` and `munmap` it. No thread is bound (`-b` not
//! given). The time each thread reports runs from `start_time`, taken in
//! `main` before the fork, to the end of its writes; the bytes it counts are
//! its share plus an eighth (`do_unit` adds `bytes / 8` for the allocation),
//! and `KB/s = ((bytes * 1000000) >> 10) / usecs`. The writes total three
//! quarters of memory and swap together, so once memory is full every new
//! page's fault reclaims an older one to swap; as no page is written twice,
//! nothing comes back in.
//!
//! # The model
//! - One process (the forked child; the waiting parent is left out): a leader
//!   on CPU 0 clones `nr_task` threads, thread `i` bound to CPU `i mod cpus`
//!   (where the scheduler puts runnable threads on an idle machine), opens the
//!   gate and exits; each thread maps its share, writes it in touches of
//!   [`CHUNK`] pages, each followed by the stores' compute ([`STORE_CYCLES`]
//!   per page), records its end and unmaps.
//! - Memory is a cgroup limit of `mem_mb` ([`Sim::set_mem_limit`]; the
//!   benchmark's is the machine's `MemAvailable`), swap is `swap_mb`, and
//!   the writes total `(mem_mb + swap_mb) * 3 / 4` MB as the script computes
//!   them. A fault that would pass the limit reclaims the least recently
//!   faulted folios, [`SWAP_CLUSTER_MAX`] pages at a time, through the
//!   `MADV_PAGEOUT` reclaim path (`sim/memcg.rs`, `sim/reclaim.rs`): on x86 each
//!   folio's unmap ends in the policy's batch flush of every CPU of the mm's
//!   `mm_cpumask` (`arch_tlbbatch_flush`), the compression to the swap device
//!   (`--set swap=zram`, the default), the free.
//! - Defaults scaled down (estimates, stated as such): `mem_mb` 64 and
//!   `swap_mb` 64 stand for a machine whose swap equals its memory (the case
//!   needs only some swap; 0-day's hosts' sizes are not in the benchmark's
//!   source), keeping a third of the written pages going to swap, as
//!   `3/4 * (M + S)` with `S = M` gives; the real case writes hundreds of GB.
//!
//! Results: `throughput`, the threads' KB/s summed (vm-scalability's own unit,
//! `usemem`'s line per task; 0-day's `vm-scalability.throughput` is the sum
//! over tasks), with `usemem`'s bytes (the share plus an eighth) and its clock
//! (from the start of the run to each thread's end of writes); `elapsed_s`,
//! the start of the run until the last thread's end of writes; and
//! `swapout_pages`, the pages reclaimed to swap.
//!
//! Not modelled: the parent process and the pipe handshake's exact shape (one
//! gate), `usemem`'s per-word loop beyond its compute estimate, the active
//! list's scans and `kswapd` (`sim/memcg.rs`; reclaim ages each folio first,
//! so a page written once goes to swap at its second look).

use super::usemem::{timing, Mapping, Task, Unit};
use super::{params, Params, WorkloadDef};
use crate::error::Error;
use crate::program::{Op, Program, Sys};
use crate::sim::{Sim, SWAP_CLUSTER_MAX};
use std::collections::BTreeMap;

params! {
    PARAMS;
    NR_TASK: Count("nr_task", 0, 0..=4096)
        "threads (usemem -t; 0: one per CPU, as 0-day's nr_task=100%)";
    MEM_MB: Count("mem_mb", 64, 1..=65_536)
        "memory the process may use, MB (MemAvailable; a cgroup limit here; scaled down)";
    SWAP_MB: Count("swap_mb", 64, 1..=65_536)
        "swap, MB (SwapTotal; scaled down)";
    BATCH: Flag("batch")
        "reclaim of a large folio: 0 one PTE at a time (Linux v7.0), 1 batched (Dev Jain's series)";
}

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef::new(
    "swap_w_seq_mt",
    "vm-scalability case-swap-w-seq-mt: nr_task threads of one process each write their share of \
     3/4 of memory + swap once, sequentially; faults past the memory limit reclaim to swap",
    PARAMS,
    &["throughput", "elapsed_s", "swapout_pages"],
    |p, _, sim, _| setup(p, sim),
    |p, main, _| result(p, main),
    |_, _, _| max_mms(),
);

/// Pages one touch writes: 64 KB, so that the threads' faults (and the reclaim
/// in them) interleave finely in simulated time.
pub const CHUNK: u64 = 16;

/// Cycles of `do_rw_once`'s loop per 4 KB page, beyond the first touch's
/// fault and translation: 512 iterations of about six instructions (the
/// volatile store, the byte count, the `opt_delay`, runtime and `rw_limit`
/// tests, the increment and branch) at an estimated four a cycle on a
/// server core: 768. An estimate; stores to a page the fault has just zeroed
/// hit the cache.
pub const STORE_CYCLES: u64 = 768;

/// The leader: marks the start, makes the gate, clones the threads, opens the
/// gate and exits.
struct Leader {
    threads: u64,
    cpus: usize,
    pages: u64,
    gate: u32,
    step: u64,
}

impl Program for Leader {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        let n = self.threads;
        match self.step {
            1 => Op::Mark("start"),
            2 => Op::Sys(Sys::Pipe),
            s if s <= 2 + n => {
                if s == 3 {
                    self.gate = ret as u32;
                }
                let unit = Unit::new(Mapping::Anon, self.pages, CHUNK, STORE_CYCLES);
                // One `usemem` thread: waits at the gate, then `do_units` with one unit.
                let t = Task::new(Op::Sys(Sys::PipeRead(self.gate)), unit);
                Op::Sys(Sys::CloneOn((s - 3) as usize % self.cpus, Box::new(t)))
            }
            s if s <= 2 + 2 * n => Op::Sys(Sys::PipeWrite(self.gate)),
            _ => Op::Exit,
        }
    }
}

/// Returns the pages each thread writes: `(mem + swap) * 3 / 4` split evenly,
/// at least one.
fn pages_per_thread(p: &Params, threads: u64) -> u64 {
    let total_kb = (MEM_MB.of(p) + SWAP_MB.of(p)) * 1024 * 3 / 4;
    (total_kb / 4 / threads).max(1)
}

/// Limits memory, sets the reclaim's batching and starts the process.
pub fn setup(p: &Params, sim: &mut Sim) -> Result<(), Error> {
    let threads = NR_TASK.or_cpus(p, sim.cfg.ncpus);
    sim.set_mem_limit((MEM_MB.of(p) * 256).max(SWAP_CLUSTER_MAX));
    sim.set_pageout_batch(BATCH.of(p));
    let leader = Leader { threads, cpus: sim.cfg.ncpus.max(1), pages: pages_per_thread(p, threads), gate: 0, step: 0 };
    sim.spawn(Box::new(leader))?;
    Ok(())
}

/// Returns `throughput` (KB/s summed over threads), `elapsed_s` and
/// `swapout_pages` (module documentation).
pub fn result(p: &Params, sim: &Sim) -> Result<BTreeMap<String, f64>, Error> {
    let threads = NR_TASK.or_cpus(p, sim.cfg.ncpus);
    let start = super::mark_max(sim, "start").ok_or_else(|| super::unmeasured(DEF.name, "the leader never ran"))?;
    let ends = super::mark_times(sim, "end");
    if ends.len() as u64 != threads {
        return Err(super::unmeasured(DEF.name, format!("{} of {threads} threads finished writing", ends.len())));
    }
    let mut r = timing(sim, pages_per_thread(p, threads), start, &ends);
    r.insert("swapout_pages".to_string(), sim.reclaim_stats().pages as f64);
    Ok(r)
}

/// Returns the address spaces it needs: one process.
pub fn max_mms() -> usize {
    8
}
