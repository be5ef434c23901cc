//! `swap_w_seq_mt` (vm-scalability's `case-swap-w-seq-mt`): threads writing
//! past the memory limit reclaim to swap, every run passes the oracle, and on
//! x86 each reclaimed folio's batch flush interrupts the CPUs of the other
//! threads.

use crate::common::strict;
use tlbkit_sim::run::RunOutput;

/// Runs the workload on `cpus` CPUs of `machine` under `policy`, strict, with
/// 1 MB of memory and 1 MB of swap (1.5 MB written: 384 pages over a limit of
/// 256) and `sets` besides.
fn swap(machine: &str, policy: &str, cpus: usize, sets: &[&str]) -> RunOutput {
    let all: Vec<&str> = ["mem_mb=1", "swap_mb=1"].iter().chain(sets).copied().collect();
    strict(machine, cpus, policy, "swap_w_seq_mt", &all)
}

#[test]
fn writes_past_the_limit_reclaim_to_swap_in_clusters() {
    let out = swap("milan", "x86-linux-613", 4, &[]);
    let swapped = out.result["swapout_pages"];
    // 384 pages written, at most 256 resident: at least 128 go to swap, and
    // no more than one cluster of 32 past that (a pass isolates 32 pages and
    // reclaims those not found young: aging keeps the others for later).
    assert!((128.0..=160.0).contains(&swapped), "{swapped} pages swapped out");
    // 384 first-touch faults. With reclaim's aging, one page of the four
    // threads' faults in again (one thread or two: none). Not explained yet:
    // the model puts a faulted page on its one LRU list at once, where Linux
    // adds it through a per-CPU batch and activates a young one, so a page can
    // come round to reclaim twice within another CPU's direct reclaim. Each
    // page swapped in takes one more swapped out: bounded by those past 128.
    let faults = out.metrics.mmu.page_faults as f64;
    assert!((384.0..=384.0 + swapped - 128.0).contains(&faults), "{faults} faults");
    assert!(out.result["throughput"] > 0.0 && out.result["elapsed_s"] > 0.0);
}

#[test]
fn without_reclaim_nothing_is_swapped() {
    // 96 MB of memory for 72.75 MB written (3/4 of 96 + 1): no reclaim.
    let out = swap("milan", "x86-linux-613", 2, &["mem_mb=96"]);
    assert_eq!(out.result["swapout_pages"], 0.0);
}

#[test]
fn the_batch_flush_reaches_the_other_threads_cpus() {
    let alone = swap("milan", "x86-linux-613", 4, &["nr_task=1"]);
    let four = swap("milan", "x86-linux-613", 4, &["nr_task=4"]);
    let (ipis_alone, ipis_four) = (alone.metrics.ipi.ipis_sent as f64, four.metrics.ipi.ipis_sent as f64);
    let swapped = four.result["swapout_pages"];
    // Alone, no other CPU runs the mm: only the gate's wake-ups.
    assert!(ipis_alone < 8.0, "{ipis_alone} IPIs with one thread");
    // Four threads: each reclaimed page's flush goes to the others still writing.
    assert!(ipis_four > 1.5 * swapped, "{ipis_four} IPIs for {swapped} pages reclaimed");
}

#[test]
fn arm64_reclaims_through_its_deferred_flushes() {
    let out = swap("altra", "arm64-linux", 4, &[]);
    let swapped = out.result["swapout_pages"];
    assert!(swapped >= 128.0, "{swapped}");
    // One TLBI VALE1IS per reclaimed page; the only IPIs are wake-ups (the
    // gate's, and a writer's of mmap_lock by the last reader): none
    // invalidates.
    assert!(out.metrics.broadcast_invalidations as f64 >= swapped);
    assert_eq!(out.metrics.ipi.ipi_invalidating_ns, 0.0);
    assert!(out.metrics.ipi.ipis_sent < 16, "{} IPIs", out.metrics.ipi.ipis_sent);
}
