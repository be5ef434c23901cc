//! `flush_call`, the range flush alone (a kernel module's direct calls): each
//! call issues what the kernel's flush issues for its pages and nothing else
//! (no PTE changes, no fault, no frame freed), and its time is the flush's.

use crate::common::run_clean;
use crate::common::spec;
use tlbkit_sim::run::RunOutput;

/// Runs `flush_call` of `pages` pages, `calls` timed calls, on `cpus` CPUs
/// of `machine` under `policy` with `sets`, strictly.
fn flush_call(machine: &str, cpus: usize, policy: &str, pages: u64, calls: u64, sets: &[&str]) -> RunOutput {
    let sets =
        [format!("pages={pages}"), format!("calls={calls}")].into_iter().chain(sets.iter().map(|s| s.to_string()));
    run_clean(&spec(machine, cpus, policy, "flush_call", sets))
}

#[test]
fn each_call_issues_the_kernel_s_tlbis_for_its_pages_and_changes_no_pte() {
    // arm64 Linux on 4 CPUs of graviton4: (pages, TLBIs without range
    // operations, with them), as __flush_tlb_range issues them.
    for (pages, off, on) in [(1, 1, 1), (2, 2, 1), (16, 16, 1), (65, 65, 2), (511, 511, 3), (512, 1, 1)] {
        for (range, per_call) in [("off", off), ("on", on)] {
            let sets = [format!("tlbi_range={range}")];
            let run = |calls| flush_call("graviton4", 4, "arm64-linux", pages, calls, &[sets[0].as_str()]);
            let (a, b) = (run(2), run(5));
            let what = format!("pages={pages} tlbi_range={range}");
            assert_eq!(b.metrics.broadcast_invalidations - a.metrics.broadcast_invalidations, 3 * per_call, "{what}");
            // Three more calls fault nothing in and take nothing away.
            assert_eq!(a.metrics.mmu.page_faults, b.metrics.mmu.page_faults, "{what}");
            assert_eq!(a.metrics.local_invalidations, b.metrics.local_invalidations, "{what}");
        }
    }
}

#[test]
fn a_call_costs_what_its_flush_costs() {
    // With range operations every count from 2 to 62 is one operation and its
    // DSB: the same time. Without them each page adds its TLBI's issue.
    let cycles = |pages, range: &str| {
        let set = format!("tlbi_range={range}");
        flush_call("graviton4", 4, "arm64-linux", pages, 3, &[set.as_str()]).result["cycles_per_call"]
    };
    assert_eq!(cycles(2, "on"), cycles(62, "on"));
    let (one, two, four) = (cycles(1, "off"), cycles(2, "off"), cycles(4, "off"));
    assert!(one < two && two < four);
    assert_eq!(four - two, 2.0 * (two - one));
    // x86 Linux on one CPU: an INVLPG a page up to the ceiling, one full flush
    // above it, whatever the page count.
    let x86 = |pages, ceiling: &str| {
        let set = format!("flush_ceiling={ceiling}");
        let out = flush_call("ivb3320m", 1, "x86-linux-pcid", pages, 3, &[set.as_str()]);
        (out.result["cycles_per_call"], out.metrics.full_flushes)
    };
    let ((by_page_1, full_1), (by_page_8, _)) = (x86(1, "4096"), x86(8, "4096"));
    assert_eq!(by_page_8, 8.0 * by_page_1);
    let ((whole_1, full_whole_1), (whole_8, _)) = (x86(1, "0"), x86(8, "0"));
    assert_eq!(whole_1, whole_8);
    assert!(full_whole_1 >= full_1 + 4, "every call, the untimed one too, a full flush");
}
