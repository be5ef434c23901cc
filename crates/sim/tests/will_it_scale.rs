//! will-it-scale's testcases in both of the harness's modes: `tlb_flush1`,
//! `tlb_flush2` and `tlb_flush3` flush every CPU running a task in threads mode
//! and no other CPU in process mode, where their rate scales with the tasks;
//! `context_switch1` switches twice per round trip, between address spaces
//! only in process mode. Each run is strict and finds no violation.

use crate::common::strict;
use std::collections::BTreeMap;

/// Runs `workload` with `sets` on `cpus` CPUs of `skx8170` under `policy`,
/// strict; returns its results and metrics after checking it found no
/// violation.
fn skx(policy: &str, workload: &str, cpus: usize, sets: &[&str]) -> BTreeMap<String, f64> {
    strict("skx8170", cpus, policy, workload, sets).metric_values()
}

const FLUSHERS: [&str; 3] = ["will_it_scale_tlb_flush1", "will_it_scale_tlb_flush2", "will_it_scale_tlb_flush3"];

#[test]
fn threads_flush_every_other_task_s_cpu_per_page_and_processes_none() {
    for w in FLUSHERS {
        let size = if w.ends_with('2') { "laps=2" } else { "iters=32" };
        // Every run started in step (`steady=0`): a task's munmap then never
        // holds mmap_lock while the others loop, whose CPUs would go idle
        // behind it, lazy, and be spared its flushes.
        let threads = skx("x86-linux-613", w, 4, &["mode=0", size, "pages=16", "steady=0"]);
        // Every madvise of a page sends a flush request to the three other
        // tasks' CPUs: an IPI, or a ride on one still pending there.
        let requests = threads["ipis_sent"] + threads["ipis_coalesced"];
        assert!(requests >= (4 * 32 * 3) as f64, "{w} threads: {requests}");
        // In process mode the IPIs are the start's and the end's (forks,
        // exits), a handful however long the tasks run: twice the work (256 and
        // 512 madvises) adds none per page.
        let short = skx("x86-linux-613", w, 4, &["mode=1", size, "pages=16", "steady=0"]);
        let long_size = if w.ends_with('2') { "laps=4" } else { "iters=64" };
        let long = skx("x86-linux-613", w, 4, &["mode=1", long_size, "pages=16", "steady=0"]);
        // Without PTI's local INVPCID per page, the TLB time left is the remote
        // flushes' (PTI doubles every local page flush in both modes).
        let threads = skx("x86-linux-613", w, 4, &["mode=0", size, "pages=16", "pti=off", "steady=0"]);
        let short_nopti = skx("x86-linux-613", w, 4, &["mode=1", size, "pages=16", "pti=off", "steady=0"]);
        assert!(short["ipis_sent"] < 16.0, "{w} processes: {}", short["ipis_sent"]);
        assert!(long["ipis_sent"] < 16.0, "{w} processes: {} at twice the work", long["ipis_sent"]);
        assert!(
            short_nopti["tlb_share"] < threads["tlb_share"] / 4.0,
            "{w}: {} vs {}",
            short_nopti["tlb_share"],
            threads["tlb_share"]
        );
    }
}

#[test]
fn concurrent_flushers_ride_each_other_s_ipis_and_queue_in_time_order() {
    // 32 threads flushing one mm at once, under v5.12's and v5.13's
    // smp_call_function_many_cond: a request queued on a CPU whose earlier IPI
    // the handler has not yet taken finds the queue non-empty (llist_add
    // returns false), sends no IPI, and rides that handler. And the pushes
    // onto a CPU's call_single_queue line are served in the order they reach
    // it: the time a shootdown takes grows with the CPUs, not with their
    // square. (Ordered after the handlers the simulator had already run, each
    // push waited for every other initiator's handler: no request ever rode,
    // and a shootdown took 19 times as long at 32 CPUs as at 8.)
    for policy in ["x86-linux-512", "x86-linux-513"] {
        let sets = ["mode=0", "iters=16", "pages=16", "pti=off"];
        let small = skx(policy, "will_it_scale_tlb_flush1", 8, &sets);
        let big = skx(policy, "will_it_scale_tlb_flush1", 32, &sets);
        let requests = big["ipis_sent"] + big["ipis_coalesced"];
        assert!(big["ipis_coalesced"] > requests / 20.0, "{policy}: {} of {requests} rode", big["ipis_coalesced"]);
        let per = |m: &BTreeMap<String, f64>| m["shootdown_ns"] / m["shootdowns"];
        assert!(per(&big) < 8.0 * per(&small), "{policy}: {} ns at 32 CPUs, {} at 8", per(&big), per(&small));
    }
}

#[test]
fn process_mode_scales_with_the_tasks_and_threads_mode_does_not() {
    for w in ["will_it_scale_tlb_flush1", "will_it_scale_tlb_flush3"] {
        let per_task = |mode: &str, cpus: usize| {
            skx("x86-linux-pcid", w, cpus, &[mode, "iters=64", "pages=32768"])["per_thread_ops"]
        };
        let (p1, p8) = (per_task("mode=1", 1), per_task("mode=1", 8));
        assert!(p8 > 0.8 * p1, "{w} processes: per-task rate {p8} at 8 vs {p1} at 1");
        let t8 = per_task("mode=0", 8);
        assert!(t8 < 0.7 * p8, "{w} threads: per-task rate {t8} at 8 vs processes' {p8}");
    }
}

#[test]
fn tlb_flush3_writes_the_cached_pages_and_tlb_flush1_writes_copies_of_them() {
    // tlb_flush3's load after each madvise maps the page cache's page again,
    // and with it (fault-around) the rest of its 16-page window, so only a
    // window's first store faults: one fault per page and one per window, one
    // allocation per page per task, file pages never freed; tlb_flush1's
    // private mapping faults twice per page: the store copies the cached page,
    // the load maps the cached page again.
    // Started cold (`steady=0`), so that the run's faults are the loop's alone.
    let cold = ["mode=1", "iters=32", "pages=32", "steady=0"];
    let one = skx("x86-linux-613", "will_it_scale_tlb_flush1", 2, &cold);
    let three = skx("x86-linux-613", "will_it_scale_tlb_flush3", 2, &cold);
    assert!(one["page_faults"] >= 2.0 * 2.0 * 32.0, "{}", one["page_faults"]);
    let windows = 2.0 * 32.0 / 16.0;
    assert!(three["page_faults"] >= 2.0 * 32.0 + windows, "{}", three["page_faults"]);
    assert!(three["page_faults"] < 2.0 * 32.0 + 4.0 * windows, "{}", three["page_faults"]);
    assert!(
        three["ops_per_s"] > one["ops_per_s"],
        "no allocation, no free: {} vs {}",
        three["ops_per_s"],
        one["ops_per_s"]
    );
}

#[test]
fn context_switch1_switches_twice_per_round_trip_on_each_cpu() {
    for mode in ["mode=0", "mode=1"] {
        let r = skx("x86-linux-pcid", "will_it_scale_context_switch1", 4, &[mode, "laps=100"]);
        let switches = r["context_switches"];
        assert!((800.0..900.0).contains(&switches), "{mode}: {switches} switches for 4 x 100 round trips");
        assert!(r["ipis_sent"] < 32.0, "{mode}: nothing is flushed, yet {} IPIs", r["ipis_sent"]);
        assert!((r["ops_per_s"] / r["per_thread_ops"] - 4.0).abs() < 1e-9, "{mode}: four tasks");
    }
}

#[test]
fn context_switch1_processes_refill_the_tlb_after_every_switch_without_pcid() {
    // Threads share one address space: a switch keeps the TLB. Processes
    // without PCID flush it at every CR3 write: the loop's three pages and the
    // counter walk again on every turn.
    let misses =
        |mode: &str| skx("x86-linux-nopcid", "will_it_scale_context_switch1", 2, &[mode, "laps=200"])["page_walks"];
    let (threads, processes) = (misses("mode=0"), misses("mode=1"));
    assert!(processes > threads + 2.0 * 200.0 * 3.0, "{processes} walks in processes vs {threads} in threads");
}

#[test]
fn smt_2_spreads_half_the_tasks_over_both_sockets() {
    // 0-day's nr_task=50% on a two-socket SMT machine: one task per core, so
    // half the flushes' IPIs cross the sockets; without smt the tasks fill
    // socket 0 and none does. Cross-socket IPIs cost more: a lower rate.
    let rate = |smt: &str| {
        skx("x86-linux-613", "will_it_scale_tlb_flush2", 104, &["tasks=52", "laps=1", "pages=16", smt])["ops_per_s"]
    };
    let (packed, spread) = (rate("smt=1"), rate("smt=2"));
    assert!(spread < packed, "{spread} spread over both sockets vs {packed} on one");
}
