//! What every figure a run reports means, and its unit: the workloads' results
//! (`us_per_switch`, `elapsed_s`, ...) and the machine's metrics ([`crate::run::Metrics`]).
//! `tlbkit list metrics` prints this catalogue; `tlbkit compare --metric` and the
//! sweep's results file use the same names.
//!
//! A test holds the catalogue to the code: every field [`crate::run::Metrics`]
//! serialises and every result key a workload declares has exactly one entry.

/// One reported figure: its name, unit and meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetricDef {
    /// The key in `tlbkit run --format json` and in a sweep's results file.
    pub name: &'static str,
    /// A short name for axes and table headings, e.g. `time per context switch`.
    pub label: &'static str,
    /// The unit (`count` for event counts, `ratio` for a dimensionless share).
    pub unit: &'static str,
    /// What it measures.
    pub meaning: &'static str,
    /// Whether it is a workload's result (`result` in the JSON) rather than a
    /// machine metric (`metrics`).
    pub result: bool,
}

const fn result(name: &'static str, label: &'static str, unit: &'static str, meaning: &'static str) -> MetricDef {
    MetricDef { name, label, unit, meaning, result: true }
}

const fn metric(name: &'static str, label: &'static str, unit: &'static str, meaning: &'static str) -> MetricDef {
    MetricDef { name, label, unit, meaning, result: false }
}

/// Every result a workload can report, then every machine metric.
pub const METRICS: &[MetricDef] = &[
    result(
        "us_per_switch",
        "time per context switch",
        "µs",
        "lat_ctx: one context switch, the ring's time per hop less the overhead of passing the token without \
         switching (lmbench's figure)",
    ),
    result(
        "ring_us_per_hop",
        "time per hop of the ring",
        "µs",
        "lat_ctx: one hop of the token round the ring of processes, switch included",
    ),
    result(
        "overhead_us",
        "overhead per hop",
        "µs",
        "lat_ctx: one hop's work without the switch (lmbench's overhead, subtracted)",
    ),
    result("us_per_round", "time per round trip", "µs", "pingpong: one round trip between the two address spaces"),
    result(
        "tlb_misses_per_round",
        "TLB misses per round trip",
        "count",
        "pingpong: translations per round that missed every TLB level",
    ),
    result(
        "l1_tlb_misses_per_round",
        "L1 TLB misses per round trip",
        "count",
        "pingpong: translations per round that missed the L1 TLB",
    ),
    result(
        "elapsed_s",
        "elapsed time",
        "s",
        "mprotect_threaded, tcmalloc_frag, sort_compute, buildkernel: from the start until the last copy (or the \
         script) finished, as perf stat's \"seconds time elapsed\"; swap_w_seq_mt: from the start until the last \
         thread finished writing; lru_file_mmap_read: from the start until the last process finished reading",
    ),
    result(
        "sys_s",
        "kernel CPU time",
        "s",
        "buildkernel: CPU time spent in the kernel, summed over the CPUs (system calls, page faults, exits, context \
         switches, IPI handlers on busy CPUs), as time's sys",
    ),
    result(
        "ns_per_op",
        "time per operation",
        "ns",
        "microbench: one operation of a tlbkit calibrate microbenchmark in the model (a call, a page faulted, a pass)",
    ),
    result(
        "us_per_fork",
        "time per fork",
        "µs",
        "lat_proc: one fork of a child that exits at once, and the wait for it (lmbench's \"Process fork+exit\")",
    ),
    result(
        "us_per_op",
        "time per request",
        "µs",
        "fileserver: one request of a server thread, averaged over the servers",
    ),
    result(
        "shootdown_us",
        "shootdown latency",
        "µs",
        "fileserver: one shootdown from issue to done, averaged (0 without shootdowns)",
    ),
    result(
        "invalidating_share",
        "share of IPI handler time invalidating",
        "ratio",
        "fileserver: of the time IPI handlers ran, the share spent invalidating TLBs (origin 003's 31% -> 71%)",
    ),
    result(
        "exit_us",
        "teardown time per exit",
        "µs",
        "exit_teardown: one address space's teardown at exit (origin 004's exit_group cost)",
    ),
    result("run_us", "run time", "µs", "trace: the traced program's run, start to the last thread's end"),
    result(
        "munmap_us",
        "munmap latency",
        "µs",
        "munmap_latency: one timed munmap, entry to exit, averaged over the iterations",
    ),
    result("munmap_min_us", "shortest munmap", "µs", "munmap_latency: the shortest timed munmap"),
    result(
        "requests_per_s",
        "requests per second",
        "req/s",
        "apache_like: requests served per second after the first tenth (the warm-up); redis_like: requests served \
         per second from the first to the last (redis-benchmark's figure)",
    ),
    result(
        "us_per_request",
        "service time",
        "µs",
        "apache_like: a worker's time per request, from taking it to putting the client's next one back",
    ),
    result(
        "time_s",
        "hackbench time",
        "s",
        "hackbench: from the start signal until every child has finished (hackbench's Time:)",
    ),
    result(
        "ops_per_s",
        "iterations per second",
        "ops/s",
        "will_it_scale_tlb_flush1, _tlb_flush2, _tlb_flush3: pages written, madvise(DONTNEED)d and read per second; \
         will_it_scale_context_switch1: two per pipe round trip per second; summed over the tasks (will-it-scale's \
         average)",
    ),
    result(
        "per_thread_ops",
        "iterations per second per thread",
        "ops/s",
        "will_it_scale_tlb_flush1, _tlb_flush2, _tlb_flush3, _context_switch1: ops_per_s divided by the tasks \
         (0-day's per_thread_ops)",
    ),
    result(
        "tlb_share",
        "share of CPU time invalidating TLBs",
        "ratio",
        "will_it_scale_tlb_flush1, _tlb_flush2, _tlb_flush3, _context_switch1, stress_ng_tlb_shootdown: initiators \
         inside flush calls, IPI handlers and CPUs processing others' broadcast invalidations, over all CPUs' time \
         while the tasks (the instances) ran",
    ),
    result(
        "us_per_mapping",
        "time per mapping",
        "µs",
        "lat_mmap: one mmap of the shared file, its touches and its munmap, averaged over each process's timed \
         loop (lmbench's figure)",
    ),
    result(
        "bogo_ops_per_s",
        "bogo ops per second",
        "ops/s",
        "stress_ng_tlb_shootdown: the bogo ops of every instance (its own loop's and its children's) over the mean \
         run time of an instance, setup and the wait for its children included (stress-ng's bogo ops/s, real time)",
    ),
    result(
        "child_iter_us",
        "time per child iteration",
        "µs",
        "stress_ng_tlb_shootdown: one iteration of a child (the mprotects of one page and of all the shared \
         memory, the strided reads and writes, the madvise refaults), averaged over the children",
    ),
    result(
        "ms_per_call",
        "time per madvise",
        "ms",
        "madvise_bench: one madvise(MADV_PAGEOUT) (or MADV_DONTNEED, or munmap) of the whole mapping, entry to exit, \
         mean over iterations (with chunk_kb, the sum of the mapping's calls)",
    ),
    result(
        "cycles_per_call",
        "cycles per call",
        "cycles",
        "flush_range: one mprotect call of the written pages, entry to exit, mean over the calls, in the machine's \
         core cycles (us_per_call at the preset's clock): at a given page count the call's other work is the same \
         for every flush method, so curves by pages differ by the flush's cost",
    ),
    result(
        "us_per_call",
        "time per call",
        "µs",
        "madvise_bench: one timed madvise (or munmap) call, entry to exit, mean over every call; flush_range: one \
         mprotect call of the written pages, entry to exit, mean over the calls (both directions flush)",
    ),
    result(
        "fork_us",
        "fork time",
        "µs",
        "redis_like: the server's fork() for a background save, entry to return in the parent, averaged over the \
         saves (INFO's latest_fork_usec)",
    ),
    result("saves", "background saves", "count", "redis_like: background saves (forks) the server started"),
    result(
        "throughput",
        "write throughput",
        "KB/s",
        "swap_w_seq_mt: each thread's bytes (usemem's count: its share plus an eighth) over its time from the \
         start to its last write, in KB/s, summed over the threads (vm-scalability's throughput); \
         lru_file_mmap_read: the same of each process's reads of its file",
    ),
    result(
        "swapout_pages",
        "pages swapped out",
        "count",
        "swap_w_seq_mt: pages the faults' direct reclaim wrote to the swap device",
    ),
    result(
        "access_ns",
        "time per access",
        "ns",
        "pmbench_migrate: the workers' mean time per 4 KB-page access while the migrator runs (pmbench's net \
         average page latency, without its timestamps)",
    ),
    result(
        "accesses_per_s",
        "accesses per second",
        "ops/s",
        "pmbench_migrate: the workers' accesses per second, all workers together",
    ),
    result(
        "migrate_pages_per_s",
        "pages migrated per second",
        "pages/s",
        "pmbench_migrate: pages migrate_pages(2) moved per second of the migrator's calls",
    ),
    result(
        "flushes_per_page",
        "unmap flushes per page migrated",
        "ratio",
        "pmbench_migrate: TLB flushes of the migration's unmaps (each page's own, or one per batch) per page moved",
    ),
    result(
        "ipis_per_page",
        "IPIs per page migrated",
        "ratio",
        "pmbench_migrate: IPIs sent in the whole run per page moved (pmbench sends none of its own once warm)",
    ),
    result(
        "migration_waits",
        "waits for a page under migration",
        "count",
        "pmbench_migrate: accesses that found a page unmapped for migration and waited until it was mapped again \
         (migration_entry_wait)",
    ),
    result(
        "pageout_us",
        "time per page-out call",
        "µs",
        "swap_pageout: one madvise(MADV_PAGEOUT) of the whole range, entry to exit, averaged over the calls",
    ),
    result(
        "iter_us",
        "time per iteration of the page-out loop",
        "µs",
        "swap_pageout: one iteration of the leader's loop, its reads of every page (swap-ins) and its \
         madvise(MADV_PAGEOUT), averaged over the iterations after the first (whose reads are the memset; 0 with \
         one iteration)",
    ),
    result(
        "pageout_ns_per_byte",
        "page-out time per byte",
        "ns",
        "swap_pageout: the calls' time over the bytes they paged out",
    ),
    result(
        "flushes_per_call",
        "unmap flushes per page-out call",
        "count",
        "swap_pageout: TLB flushes of one call's unmaps: each page's own (tlbbatch=off) or one per batch, completed \
         per folio (try_to_unmap_flush_dirty)",
    ),
    result(
        "reclaimed_pages",
        "page-cache pages reclaimed",
        "count",
        "lru_file_mmap_read: page-cache pages the read faults' direct reclaim dropped and freed",
    ),
    result(
        "reclaim_unmaps",
        "mapped file PTEs reclaimed",
        "count",
        "lru_file_mmap_read: present PTEs of page-cache pages that reclaim cleared (unmapped through the rmap)",
    ),
    result(
        "reclaim_flushes",
        "reclaim's TLB flushes",
        "count",
        "lru_file_mmap_read: TLB flushes that completed reclaim's unmaps: one batch flush per reclaim pass with \
         tlbbatch=on, one flush per PTE with tlbbatch=off",
    ),
    result(
        "direct_reclaims",
        "direct reclaim passes",
        "count",
        "lru_file_mmap_read: reclaim passes the readers ran in their faults (a node below its min watermark, or the \
         memory cgroup's limit with kswapd=off)",
    ),
    result(
        "kswapd_passes",
        "kswapd's reclaim passes",
        "count",
        "lru_file_mmap_read: reclaim passes the nodes' kswapd threads ran (woken below the low watermark, until \
         above high)",
    ),
    result(
        "reclaim_activated",
        "folios reclaim activated",
        "count",
        "lru_file_mmap_read: folios reclaim moved to the active list (found young again after a look that marked them \
         PG_referenced, or young in more than one address space)",
    ),
    result(
        "reclaim_deactivated",
        "folios the active list's aging returned",
        "count",
        "lru_file_mmap_read: folios the active list's aging moved back to the inactive list, their young bits \
         cleared (shrink_active_list, while the inactive list is low)",
    ),
    result(
        "faults_per_s",
        "page faults per second",
        "faults/s",
        "pft: pages written (one fault each) over the time from the earliest test's start to the latest test's end \
         (pft's fault/wsec, mmtests' faults/sec)",
    ),
    result(
        "faults_per_cpu_s",
        "page faults per CPU second",
        "faults/s",
        "pft: pages written over the tests' times summed, each test alone on its CPU (pft's flt/cpu/s, mmtests' \
         faults/cpu)",
    ),
    result(
        "iter_ns",
        "time per iteration",
        "ns",
        "madvise_dontneed_loop: one iteration of a thread (a one-page madvise(MADV_DONTNEED) and the store that \
         refaults the page), mean over the threads",
    ),
    result(
        "iter_cycles",
        "cycles per iteration",
        "cycles",
        "madvise_dontneed_loop: iter_ns in the machine's clock cycles",
    ),
    metric("sim_time_ns", "simulated time", "ns", "simulated time until the last CPU stopped"),
    metric("tlb_accesses", "translations", "count", "translations performed, user and kernel"),
    metric("tlb_misses", "TLB misses", "count", "translations that missed every TLB level (each needed a page walk)"),
    metric("l1_tlb_misses", "L1 TLB misses", "count", "translations that missed the L1 TLB"),
    metric("page_walks", "page-table walks", "count", "page-table walks, speculative ones included"),
    metric("spec_fills", "speculative TLB fills", "count", "speculative TLB fills (--set spec_rate)"),
    metric("page_faults", "page faults", "count", "page faults"),
    metric(
        "local_invalidations",
        "local TLB invalidations",
        "count",
        "TLB invalidation operations on the issuing CPU only",
    ),
    metric(
        "broadcast_invalidations",
        "broadcast TLB invalidations",
        "count",
        "broadcast TLB invalidation operations (arm64 TLBI ...IS, x86 INVLPGB)",
    ),
    metric("ipis_sent", "IPIs sent", "count", "inter-processor interrupts sent"),
    metric(
        "ipis_coalesced",
        "IPIs coalesced",
        "count",
        "Linux call-function requests run by an IPI already pending on their CPU, which sent none of their own",
    ),
    metric("ipi_handler_ns", "IPI handler time", "ns", "time IPI handlers ran, summed over CPUs"),
    metric(
        "ipi_invalidating_ns",
        "IPI handler time invalidating",
        "ns",
        "of ipi_handler_ns, the time spent invalidating TLBs",
    ),
    metric(
        "ipi_sync_ns",
        "IPI handler time on shared lines",
        "ns",
        "of ipi_handler_ns, the time spent on shared cache lines (acknowledgements)",
    ),
    metric("shootdowns", "shootdowns", "count", "shootdowns that reported their phases (issue, dispatch, sync, done)"),
    metric("shootdown_ns", "shootdown latency, summed", "ns", "those shootdowns' latency from issue to done, summed"),
    metric(
        "line_transfers",
        "cache-line transfers",
        "count",
        "cache-line transfers of shared policy state between CPUs",
    ),
    metric("context_switches", "context switches", "count", "context switches"),
    metric(
        "asid_rollovers",
        "ASID rollovers",
        "count",
        "ASID rollovers: epoch resets (FreeBSD), generation bumps (Linux)",
    ),
    metric(
        "full_flushes",
        "full TLB flushes",
        "count",
        "invalidations of a whole ASID or of the whole TLB, local or broadcast",
    ),
    metric("syscalls", "system calls", "count", "system calls"),
    metric(
        "events",
        "simulator events",
        "count",
        "simulator events processed (a measure of the simulation's own work)",
    ),
    metric(
        "smt_shared_cycles",
        "cycles on a shared core",
        "cycles",
        "cycles CPUs ran while another thread of their core ran a task (machines whose cores run two threads)",
    ),
    metric(
        "contpte_fills",
        "64 KB TLB fills",
        "count",
        "64 KB TLB fills of contiguous blocks, speculative ones included (contpte runs)",
    ),
    metric("folios", "64 KB folios", "count", "64 KB folios allocated, anonymous and page cache (contpte runs)"),
    metric(
        "pte_range_flushes",
        "PTE range flushes",
        "count",
        "range flushes the arm64 contpte code made (fold and unfold, access flags, copy-on-write) (contpte runs)",
    ),
    metric(
        "exit_range_flushes",
        "range flushes at exit",
        "count",
        "of pte_range_flushes, those made while exiting address spaces were torn down",
    ),
    metric("exits", "exits", "count", "address spaces torn down by exit, each process's last thread (contpte runs)"),
    metric(
        "exit_teardown_ns",
        "teardown time at exit, summed",
        "ns",
        "the time those teardowns took, summed (divide by exits) (contpte runs)",
    ),
    metric(
        "hw_races",
        "hardware races",
        "count",
        "hardware actions (another CPU's write, a speculative fill) placed between two page-table accesses of the \
         arch code (contpte runs)",
    ),
    metric(
        "file_writebacks",
        "file writebacks",
        "count",
        "file pages reported dirty when their PTE was cleared (contpte runs)",
    ),
    metric(
        "zone_page_cycles",
        "zone-lock holds (estimated)",
        "cycles",
        "cycles the zone lock was held for pages moved, at the estimated 60 cycles a page (docs/costs/kernel.md)",
    ),
    metric(
        "lru_folio_cycles",
        "LRU-lock holds (estimated)",
        "cycles",
        "cycles the LRU lock was held for folios added or removed, at the estimated 40 cycles a folio",
    ),
    metric(
        "vma_walk_cycles",
        "further VMA-tree walks (estimated)",
        "cycles",
        "cycles of VMA-tree walks beyond a fault's first, at the estimated 80 cycles a walk",
    ),
];

/// Returns the catalogue entry called `name`.
pub fn by_name(name: &str) -> Option<&'static MetricDef> {
    METRICS.iter().find(|m| m.name == name)
}

impl MetricDef {
    /// Returns the figure's axis label: its short name and its unit, e.g.
    /// `time per context switch (µs)` (a count or a ratio names no unit).
    pub fn axis_label(&self) -> String {
        match self.unit {
            "count" | "ratio" => self.label.to_string(),
            u => format!("{} ({u})", self.label),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::WORKLOADS;

    #[test]
    fn every_metric_field_has_one_entry() {
        // Every optional metric set, so that every field serialises.
        let v = serde_json::to_value(crate::run::Metrics::zero(true)).unwrap();
        let fields: Vec<&String> = v.as_object().unwrap().keys().collect();
        for f in &fields {
            let d = by_name(f).unwrap_or_else(|| panic!("metric {f} has no entry in METRICS"));
            assert!(!d.result, "{f} is a metric, not a result");
        }
        let metrics = METRICS.iter().filter(|d| !d.result).count();
        assert_eq!(metrics, fields.len(), "METRICS describes a metric the run does not report");
    }

    #[test]
    fn every_result_key_has_one_entry() {
        let mut keys: Vec<&str> = WORKLOADS.iter().flat_map(|w| w.results.iter().copied()).collect();
        keys.sort_unstable();
        keys.dedup();
        for k in &keys {
            assert!(by_name(k).is_some_and(|d| d.result), "result {k} has no entry in METRICS");
        }
        assert_eq!(METRICS.iter().filter(|d| d.result).count(), keys.len());
    }

    #[test]
    fn names_are_unique_and_every_entry_says_something() {
        for (i, d) in METRICS.iter().enumerate() {
            assert!(METRICS[..i].iter().all(|o| o.name != d.name), "{} twice", d.name);
            assert!(!d.unit.is_empty() && d.meaning.len() > 10, "{}", d.name);
            assert!(!d.label.is_empty() && !d.label.contains('_') && d.label.len() < 40, "{}: {}", d.name, d.label);
        }
    }
}
