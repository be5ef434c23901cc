//! vm-scalability's `case-lru-file-mmap-read`: processes each map a sparse
//! file of their own and read it once, the files together larger than memory,
//! so that the page cache is reclaimed under them: mapped file pages unmapped
//! through the rmap, their flushes batched.
//!
//! # The benchmark (vm-scalability `case-lru-file-mmap-read`, `hw_vars`, `usemem.c`)
//! The case ("flush memory with use-once page cache reads") starts `nr_task`
//! `usemem` processes at once (`&`, then `wait`), process `i` with its own
//! sparse file of `ROTATE_BYTES / nr_task` bytes (`create_sparse_file`:
//! `truncate -s`, so reading it reads holes: no device I/O, zeroed pages) and
//! `usemem -f $file --readonly $size`. `-f` maps the file `MAP_SHARED`,
//! `--readonly` opens it read-only and maps it `PROT_READ`; `usemem` forks one
//! child (no `-n`, no `-t`), which waits on a pipe until ready and runs
//! `do_units` → `do_unit` → `do_rw_once` with `read` set: every 8-byte word of
//! the mapping in address order, once (`step = sizeof(long)`, no `-r`), then
//! prints `bytes / usecs = KB/s` and unmaps. The time runs from `start_time`,
//! taken in `main` before the fork, to the end of the reads; the bytes are the
//! size plus an eighth (`do_unit` adds `bytes / 8` for the mapping), and `KB/s =
//! ((bytes * 1000000) >> 10) / usecs`. `ROTATE_BYTES` is set by whoever runs
//! the case (neither the case nor `hw_vars` sets it; the `run` script's
//! combined mode calls these cases the ones that "flush memory (mem*10)").
//! The files' pages stay in the page cache after they are read, so once
//! memory is full every read fault of a new page reclaims older ones, most of
//! them still mapped by a reader: reclaim unmaps them from that reader's
//! address space and flushes its TLBs before freeing them.
//!
//! # The model
//! - `nr_task` processes, each its own address space and its own file, started
//!   together where fork balancing puts them (no binding, as `usemem` without `-b`);
//!   each records its start, maps its file shared and read-only, reads it in
//!   touches of [`CHUNK`] pages followed by the reads' compute
//!   ([`READ_CYCLES`] a page), records its end and unmaps.
//! - Memory is the machine's, `mem_mb` split evenly among the NUMA nodes the
//!   run's CPUs are on, each with its watermarks and a `kswapd` thread
//!   ([`Sim::set_machine_memory`], `sim/kswapd.rs`; the case sets no cgroup),
//!   the page cache on each node's LRU ([`Sim::set_file_charge`]). A read
//!   fault that brings a new 64 KB folio into the page cache and takes its
//!   node below the low watermark wakes the node's `kswapd`, which reclaims
//!   the least recently read folios, at least [`SWAP_CLUSTER_MAX`] pages a
//!   pass, until the node is above its high watermark; the reader reclaims
//!   itself only below min. A folio still mapped by a reader is kept once for
//!   its young PTE and reclaimed when found again; reclaim unmaps it from
//!   every reader that maps it (`sim/file_reclaim.rs`), with one batch flush
//!   per pass, sent from the reclaiming thread's CPU (`--set tlbbatch=on`,
//!   the default: Linux v4.3 on x86, v6.5 on arm64) or a flush per PTE
//!   (`--set tlbbatch=off`, the kernels before). `--set kswapd=off` makes
//!   memory a cgroup limit of `mem_mb` instead, which only the readers
//!   reclaim at, in their faults (the model before `kswapd`).
//! - Sizes scaled down (estimates, stated as such): `mem_mb` 64 stands for the
//!   machine's memory, and `file_mb`, the files together (`ROTATE_BYTES`), is
//!   ten times it by default, after the `run` script's "mem*10"; the real case
//!   reads hundreds of GB.
//!
//! Results: `throughput`, the processes' KB/s summed (vm-scalability's unit,
//! one `usemem` line per process; 0-day sums them), with `usemem`'s bytes (the
//! size plus an eighth) and its clock (from the start of the run to each
//! process's end of reads); `elapsed_s`, the start until the last end of
//! reads; `reclaimed_pages`, the page-cache pages reclaimed;
//! `reclaim_unmaps`, the mapped PTEs reclaim cleared; `reclaim_flushes`, the
//! TLB flushes that completed them (batch flushes with `tlbbatch=on`);
//! `direct_reclaims` and `kswapd_passes`, the reclaim passes the readers ran
//! in their faults and those `kswapd` ran.
//!
//! Not modelled: reading the holes (the page cache zeroes a new folio; no
//! device I/O, as for a sparse file), readahead beyond the 64 KB folio a fault
//! reads, the active list's scan (`sim/file_reclaim.rs`), what `sim/kswapd.rs`
//! simplifies (no fallback to another node, `kswapd` on any CPU), the parent
//! `usemem` processes.

use super::usemem::{timing, Mapping, Task, Unit};
use super::{params, Params, WorkloadDef};
use crate::error::Error;
use crate::program::Op;
use crate::sim::{Sim, SWAP_CLUSTER_MAX};
use std::collections::BTreeMap;

params! {
    PARAMS;
    NR_TASK: Count("nr_task", 0, 0..=4096)
        "processes, each with its own file (0: one per CPU, as 0-day's nr_task=100%)";
    MEM_MB: Count("mem_mb", 64, 1..=65_536)
        "memory the page cache may use, MB (the machine's memory, split among the nodes of the run's CPUs; scaled \
         down)";
    FILE_MB: Count("file_mb", 640, 1..=1_048_576)
        "MB of the files together (ROTATE_BYTES; default ten times mem_mb's default, the run script's mem*10)";
}

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef::new(
    "lru_file_mmap_read",
    "vm-scalability case-lru-file-mmap-read: nr_task processes each map a file of their own and read \
     it once, the files 10 times memory; read faults reclaim mapped page cache (rmap unmap, batched \
     flush)",
    PARAMS,
    &[
        "throughput",
        "elapsed_s",
        "reclaimed_pages",
        "reclaim_unmaps",
        "reclaim_flushes",
        "direct_reclaims",
        "kswapd_passes",
        "reclaim_activated",
        "reclaim_deactivated",
    ],
    |p, _, sim, _| setup(p, sim),
    |p, main, _| result(p, main),
    |p, _, cpus| max_mms(p, cpus),
);

/// Pages one touch reads: 64 KB, so that the processes' faults (and the
/// reclaim in them) interleave finely in simulated time.
pub const CHUNK: u64 = 16;

/// Cycles of `do_rw_once`'s loop per 4 KB page beyond the first access's
/// fault and translation: 512 iterations of the same loop as
/// `swap_w_seq_mt`'s writes, with a load instead of a store
/// ([`super::swap_w_seq_mt::STORE_CYCLES`]; an estimate).
pub const READ_CYCLES: u64 = super::swap_w_seq_mt::STORE_CYCLES;

/// Returns the processes and the pages of each one's file: `file_mb` split
/// evenly, at least one page.
fn shape(p: &Params, cpus: usize) -> (u64, u64) {
    let tasks = NR_TASK.or_cpus(p, cpus);
    (tasks, (FILE_MB.of(p) * 256 / tasks).max(1))
}

/// Limits memory, makes the page cache charged and starts the processes.
pub fn setup(p: &Params, sim: &mut Sim) -> Result<(), Error> {
    let (tasks, pages) = shape(p, sim.cfg.ncpus);
    sim.set_machine_memory((MEM_MB.of(p) * 256).max(SWAP_CLUSTER_MAX));
    sim.set_file_charge();
    for i in 0..tasks {
        let unit = Unit::new(Mapping::File(i as u32), pages, CHUNK, READ_CYCLES);
        // One `usemem` process (its forked child): marks its start, then map,
        // read once, unmap.
        sim.spawn(Box::new(Task::new(Op::Mark("start"), unit)))?;
    }
    Ok(())
}

/// Returns `throughput`, `elapsed_s` and reclaim's counts (module documentation).
pub fn result(p: &Params, sim: &Sim) -> Result<BTreeMap<String, f64>, Error> {
    let (tasks, pages) = shape(p, sim.cfg.ncpus);
    let start = super::mark_times(sim, "start")
        .into_iter()
        .min()
        .ok_or_else(|| super::unmeasured(DEF.name, "no process started"))?;
    let ends = super::mark_times(sim, "end");
    if ends.len() as u64 != tasks {
        return Err(super::unmeasured(DEF.name, format!("{} of {tasks} processes finished reading", ends.len())));
    }
    let rs = sim.reclaim_stats();
    let mut r = timing(sim, pages, start, &ends);
    r.insert("reclaimed_pages".to_string(), rs.file_pages as f64);
    r.insert("reclaim_unmaps".to_string(), rs.file_unmaps as f64);
    r.insert("reclaim_flushes".to_string(), rs.file_flushes as f64);
    r.insert("direct_reclaims".to_string(), rs.direct_reclaims as f64);
    r.insert("kswapd_passes".to_string(), rs.kswapd_passes as f64);
    r.insert("reclaim_activated".to_string(), rs.activated as f64);
    r.insert("reclaim_deactivated".to_string(), rs.deactivated as f64);
    Ok(r)
}

/// Returns the address spaces it needs: one per process.
pub fn max_mms(p: &Params, cpus: usize) -> usize {
    shape(p, cpus.max(1)).0 as usize + 8
}
