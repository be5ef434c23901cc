//! What `lat_mmap` and `stress_ng_tlb_shootdown` make the simulated kernel do:
//! the faults and flushes of one lmbench mapping (its munmap flushes the span
//! of pages it cleared), the children stress-ng forks,
//! and the flush its 512-page `mprotect` is on arm64 Linux with and without
//! range invalidation.

use crate::common::strict;
use tlbkit_policy::asid::LinuxArm64;
use tlbkit_sim::preset;
use tlbkit_sim::run::Metrics;
use tlbkit_sim::sim::{Sim, SimConfig};
use tlbkit_sim::workload::{self, Params, Phase};

/// Runs `workload` on 2 CPUs of an Altra under `arm64-linux` with `sets`,
/// strict; returns its metrics after checking it found no violation.
fn altra(workload: &str, sets: &[&str]) -> Metrics {
    strict("altra", 2, "arm64-linux", workload, sets).metrics
}

/// Returns what `iters` more timed mappings of `lat_mmap` with `sets` add to a
/// run's page faults, whole-ASID flushes and broadcast invalidations.
fn per_mappings(sets: &[&str], iters: u64) -> (u64, u64, u64) {
    let with = |n: u64| {
        let mut s: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        s.push(format!("iters={n}"));
        altra("lat_mmap", &s.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let (a, b) = (with(2), with(2 + iters));
    (
        b.mmu.page_faults - a.mmu.page_faults,
        b.full_flushes - a.full_flushes,
        b.broadcast_invalidations - a.broadcast_invalidations,
    )
}

#[test]
fn lat_mmap_faults_once_per_16_kb_of_the_first_tenth_or_per_160_kb_with_r() {
    // size / 10 / 16 KB stores (rounded up), or size / 160 KB with -r: each a
    // write fault of one page of the shared file.
    for (size_kb, random, touches) in [(1024, 0, 7), (8192, 0, 52), (1024, 1, 7), (4096, 1, 26)] {
        let sets = [format!("size_kb={size_kb}"), format!("random={random}")];
        let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
        let (faults, _, _) = per_mappings(&sets, 4);
        assert_eq!(faults, 4 * touches, "size_kb={size_kb} random={random}");
    }
}

#[test]
fn a_4_mb_lat_mmap_munmap_flushes_the_span_it_touched() {
    // 26 stores 16 KB apart (the first tenth): munmap clears pages 0 to 100 and
    // flushes that span, 101 pages, one TLBI VALE1IS each (under MAX_DVM_OPS).
    let (_, full, bcast) = per_mappings(&["size_kb=4096", "tlbi_range=off"], 4);
    assert_eq!((full, bcast), (0, 4 * 101));
    // With -r, 26 stores 160 KB apart: a span of 1001 pages, past MAX_DVM_OPS
    // (512): one TLBI ASIDE1IS per munmap.
    let (_, full, bcast) = per_mappings(&["size_kb=4096", "random=1", "tlbi_range=off"], 4);
    assert_eq!((full, bcast), (4, 4));
    // With FEAT_TLBIRANGE the 1001 pages go by range operations, never the whole
    // ASID: 960 at scale 1, 40 at scale 0 and one single page.
    let (_, full, bcast) = per_mappings(&["size_kb=4096", "random=1", "tlbi_range=on"], 4);
    assert_eq!((full, bcast), (0, 4 * 3));
}

/// Runs `stress_ng_tlb_shootdown` on `cpus` CPUs of an Altra under arm64
/// Linux with `p`; returns how many times each mark was recorded.
fn stress_ng_marks(cpus: usize, p: &[(&str, f64)]) -> impl Fn(&str) -> usize {
    let p: Params = p.iter().map(|&(k, v)| (k.to_string(), v)).collect();
    let mms = workload::max_mms("stress_ng_tlb_shootdown", &p, cpus) + cpus;
    let cfg = SimConfig { max_mms: mms, max_events: 50_000_000, ..SimConfig::quiet(preset::named("altra"), cpus, 1) };
    let mut sim = Sim::new(cfg, LinuxArm64::new(cpus, mms, 16, false).unwrap());
    workload::setup("stress_ng_tlb_shootdown", &p, &mut sim, Phase::Main).unwrap();
    sim.run();
    assert!(sim.error.is_none(), "{:?}", sim.error);
    assert_eq!(sim.live_threads(), 0);
    let names: Vec<&'static str> = sim.marks.iter().map(|m| m.0).collect();
    move |name| names.iter().filter(|&&n| n == name).count()
}

#[test]
fn each_stress_ng_instance_forks_clamp_of_the_cpus_to_2_and_8_children() {
    for (cpus, children) in [(1, 2), (2, 2), (3, 3), (8, 8), (12, 8)] {
        // With a budget of one op, the instance stops after its first
        // iteration and every child after its first (do ... while).
        let count = stress_ng_marks(cpus, &[("workers", 2.0), ("ops", 1.0), ("pages", 16.0)]);
        assert_eq!(count("child_start"), 2 * children, "{cpus} CPUs");
        assert_eq!(count("child_op"), 2 * children, "{cpus} CPUs");
        assert_eq!((count("op"), count("start"), count("end")), (2, 2, 2), "{cpus} CPUs");
    }
}

/// Returns the whole-ASID flushes a run of one instance with a one-op budget
/// makes with `pages` of shared memory on 2 CPUs, `tlbi_range` as given.
fn full_flushes(pages: u32, tlbi_range: &str) -> u64 {
    let sets = ["workers=1".to_string(), "ops=1".into(), format!("pages={pages}"), format!("tlbi_range={tlbi_range}")];
    altra("stress_ng_tlb_shootdown", &sets.iter().map(String::as_str).collect::<Vec<_>>()).full_flushes
}

#[test]
fn stress_ng_s_512_page_mprotects_flush_the_whole_asid_without_range_operations_only() {
    // Each of the 2 children makes one iteration: two of its three mprotects of
    // all of 512 pages (write-only and read-write, after its strided reads
    // faulted every page in) are whole-ASID flushes, as is the instance's final
    // munmap of the 512 pages; at 256 pages all three go page by page. (Altra's
    // v6.9 flushes the span of the PTEs an mprotect met, and the first,
    // read-only, meets only the page the child touched before it: a child's
    // fork copies no PTE of a shared mapping. The generic `pte_needs_flush`
    // flushes the last even though it changes nothing.)
    assert_eq!(full_flushes(512, "off") - full_flushes(256, "off"), 2 * 2 + 1);
    // Range operations cover 512 pages without falling back to the whole ASID.
    assert_eq!(full_flushes(512, "on"), full_flushes(256, "on"));
}
