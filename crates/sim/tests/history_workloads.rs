//! The workloads for the history before the origins: mmtests' `pft`, the
//! single-page `MADV_DONTNEED` loop, vm-scalability's `lru-file-mmap-read`,
//! and the `vma_locks` switch: each does what its benchmark does to the TLBs
//! and the locks, and every run passes the oracle.

use crate::common::{loose_spec, strict};
use tlbkit_sim::run::run;

#[test]
fn pft_writes_every_page_once_with_a_fault_each() {
    // 1 MB over 3 threads: 256 pages rounded up to 86 a thread, 258 in all.
    let out = strict("skx8170", 3, "x86-linux-pcid", "pft", &["mem_mb=1"]);
    let images = 3 * 3; // each thread's text, data and stack are not touched
    assert!(out.metrics.mmu.page_faults >= 258 && out.metrics.mmu.page_faults < 258 + images + 8);
    let (wall, cpu) = (out.result["faults_per_s"], out.result["faults_per_cpu_s"]);
    // Three tests at once: the wall rate is up to three times one test's.
    assert!(wall > 1.5 * cpu && wall < 3.05 * cpu, "{wall} faults/s against {cpu} per CPU");
}

#[test]
fn pft_threads_fault_under_mmap_lock_or_the_vmas_lock_as_the_switch_says() {
    // skx8170 runs Linux 6.1: mmap_lock by default. One VMA for every thread:
    // its lock's word is as shared as mmap_lock's count, but v6.1's
    // mm_struct puts pgd on the count's line, and every fault reads pgd
    // after its lock: under mmap_lock that read brings the line back from
    // the CPU that took the lock since, under the VMA's lock it finds a line
    // no fault writes.
    let sets = |v: &'static str| ["mem_mb=2", v];
    let default = strict("skx8170", 16, "x86-linux-pcid", "pft", &["mem_mb=2"]);
    let off = strict("skx8170", 16, "x86-linux-pcid", "pft", &sets("vma_locks=off"));
    let on = strict("skx8170", 16, "x86-linux-pcid", "pft", &sets("vma_locks=on"));
    assert_eq!(default.result, off.result, "not given is the kernel's own: mmap_lock before v6.4");
    assert_eq!(on.params["vma_locks"], "on");
    let (a, b) = (off.result["faults_per_s"], on.result["faults_per_s"]);
    assert!(a < b && a > 0.75 * b, "one shared VMA: {a} under mmap_lock, {b} under its lock");
    // The faults take the lock: sixteen threads move its line between them.
    assert!(off.metrics.line_transfers > 512, "{} line transfers", off.metrics.line_transfers);
}

#[test]
fn pft_threads_on_vmas_of_their_own_gain_from_per_vma_locks() {
    // vmas=1: each thread's faults take its own VMA's lock word, while
    // mmap_lock's word is still one line for all of them.
    let sets = |v: &'static str| ["mem_mb=4", "vmas=1", v];
    let off = strict("skx8170", 16, "x86-linux-pcid", "pft", &sets("vma_locks=off"));
    let on = strict("skx8170", 16, "x86-linux-pcid", "pft", &sets("vma_locks=on"));
    let (a, b) = (off.result["faults_per_s"], on.result["faults_per_s"]);
    assert!(b > a, "own VMAs: {a} faults/s under mmap_lock, {b} under per-VMA locks");
    assert!(off.metrics.line_transfers > 2 * on.metrics.line_transfers);
}

#[test]
fn pft_threads_on_two_sockets_queue_on_one_lock_line_and_processes_do_not() {
    // 104 CPUs of skx8170 are its two sockets: the threads' one lock word (mmap_lock
    // or the VMA's) moves across them, each process's stays on its CPU.
    let threads = strict("skx8170", 104, "x86-linux-pcid", "pft", &["mem_mb=32"]);
    let procs = strict("skx8170", 104, "x86-linux-pcid", "pft", &["mem_mb=32", "procs=1"]);
    let (t, p) = (threads.result["faults_per_cpu_s"], procs.result["faults_per_cpu_s"]);
    assert!(p > 1.3 * t, "processes {p} against threads {t} faults per CPU second");
    assert!(threads.metrics.line_transfers > 5 * procs.metrics.line_transfers);
}

#[test]
fn vma_locks_changes_a_run_whose_faults_meet_mmap_writers() {
    // tlb_flush2's threads map and unmap while the others fault: under
    // mmap_lock a fault waits for a writer, under its VMA's lock it does not.
    let sets = |v: &'static str| ["laps=2", "pages=16", v];
    let off = strict("icx8358", 8, "x86-linux-pcid", "will_it_scale_tlb_flush2", &sets("vma_locks=off"));
    let on = strict("icx8358", 8, "x86-linux-pcid", "will_it_scale_tlb_flush2", &sets("vma_locks=on"));
    assert_ne!(off.result, on.result);
}

#[test]
fn per_vma_locks_v2_turns_the_locks_on_and_refuses_them_off() {
    // icx8358 runs v6.1, before per-VMA locks: v2 alone turns them on (a
    // run with one VMA per thread then shares no lock line), v2 with
    // vma_locks=off is an error that names both.
    let sets = |s: &'static [&'static str]| [&["vmas=1", "tasks=4"][..], s].concat();
    let plain = strict("icx8358", 4, "x86-linux-pcid", "pft", &sets(&[]));
    let v2 = strict("icx8358", 4, "x86-linux-pcid", "pft", &sets(&["vma_locks_v2=on"]));
    let both = strict("icx8358", 4, "x86-linux-pcid", "pft", &sets(&["vma_locks=on", "vma_locks_v2=on"]));
    assert_eq!(v2.result, both.result);
    assert!(v2.metrics.line_transfers < plain.metrics.line_transfers, "{v2:?} against {plain:?}");
    let e = run(&loose_spec("icx8358", 4, "x86-linux-pcid", "pft", &sets(&["vma_locks=off", "vma_locks_v2=on"])))
        .unwrap_err()
        .to_string();
    assert!(e.contains("vma_locks_v2") && e.contains("vma_locks=off"), "{e}");
}

#[test]
fn vma_locks_and_lru_drain_are_refused_on_freebsd() {
    // westmere runs FreeBSD 12 (origin 003): its faults take no VMA lock and
    // its pages join no per-CPU LRU-add batch.
    for (set, lacks) in [("vma_locks=on", "VMA lock"), ("lru_drain=off", "LRU-add batches")] {
        let e = run(&loose_spec("westmere", 2, "x86-freebsd-gen", "pft", &[set])).unwrap_err().to_string();
        assert!(e.contains("FreeBSD") && e.contains(lacks), "{set}: {e}");
    }
}

#[test]
fn the_dontneed_loop_flushes_every_cpu_running_the_mm_each_iteration() {
    let iters = 20;
    let n = 4;
    let out = strict("skx8170", n, "x86-linux-pcid", "madvise_dontneed_loop", &["iters=20"]);
    // Each madvise's one-page flush goes to the other three CPUs running the mm
    // (the last iterations of a thread may find some already finished).
    let ipis = out.metrics.ipi.ipis_sent as f64;
    let most = (iters * n * (n - 1)) as f64;
    assert!(ipis >= 0.8 * most && ipis <= most + 64.0, "{ipis} IPIs for {most} flush targets");
    // And each store refaults: the first write and one per iteration.
    assert!(out.metrics.mmu.page_faults >= (n * (iters + 1)) as u64);
    assert!(out.result["iter_ns"] > 0.0);
    let alone = strict("skx8170", n, "x86-linux-pcid", "madvise_dontneed_loop", &["iters=20", "threads=1"]);
    assert!(alone.result["iter_ns"] < out.result["iter_ns"], "remote flushes cost the threads");
}

#[test]
fn with_fewer_flushers_than_threads_the_dontneed_loops_spinners_take_every_flush_and_send_none() {
    let n = 4;
    let one = strict("skx8170", n, "x86-linux-pcid", "madvise_dontneed_loop", &["iters=20", "flushers=1"]);
    let half = strict("skx8170", n, "x86-linux-pcid", "madvise_dontneed_loop", &["iters=10", "flushers=1"]);
    // Each of the leader's flushes reaches the three spinners, which run from
    // before its first iteration to after its last and flush nothing (the
    // rest, the same in both runs, is the process's exit).
    assert_eq!(one.metrics.ipi.ipis_sent - half.metrics.ipi.ipis_sent, 10 * (n as u64 - 1));
    assert!(half.metrics.ipi.ipis_sent >= 10 * (n as u64 - 1));
    // The iteration is the leader's alone: dearer than with no other thread,
    // cheaper than when every thread also takes the others' flushes.
    let alone = strict("skx8170", n, "x86-linux-pcid", "madvise_dontneed_loop", &["iters=20", "threads=1"]);
    let all = strict("skx8170", n, "x86-linux-pcid", "madvise_dontneed_loop", &["iters=20"]);
    let (a, o, e) = (alone.result["iter_ns"], one.result["iter_ns"], all.result["iter_ns"]);
    assert!(a < o && o < e, "alone {a} ns, one flusher {o} ns, every thread {e} ns");
    // Two flushers: each one's flushes reach the other and the two spinners.
    let two = |iters: &str| strict("skx8170", n, "x86-linux-pcid", "madvise_dontneed_loop", &[iters, "flushers=2"]);
    let (two20, two10) = (two("iters=20"), two("iters=10"));
    assert_eq!(two20.metrics.ipi.ipis_sent - two10.metrics.ipi.ipis_sent, 2 * 10 * (n as u64 - 1));
    // `flushers` at or past `threads` is every thread.
    let same = strict("skx8170", n, "x86-linux-pcid", "madvise_dontneed_loop", &["iters=20", "flushers=4"]);
    assert_eq!(same.result["iter_ns"], e);
}

#[test]
fn lru_file_mmap_read_reclaims_mapped_page_cache_with_batched_flushes() {
    let sets = ["mem_mb=1", "file_mb=4"];
    let out = strict("skx8170", 4, "x86-linux-pcid", "lru_file_mmap_read", &sets);
    let reclaimed = out.result["reclaimed_pages"];
    // 1024 pages read through 256 of memory: at least 768 reclaimed.
    assert!(reclaimed >= 768.0, "{reclaimed} pages reclaimed");
    let (unmaps, flushes) = (out.result["reclaim_unmaps"], out.result["reclaim_flushes"]);
    assert!(unmaps > 0.0, "reclaim found mapped pages");
    // A pass isolates at least 32 pages (two folios): one flush for all its PTEs.
    assert!(flushes > 0.0 && flushes * 16.0 <= reclaimed, "{flushes} flushes for {reclaimed} pages");
    // Without the batch, a flush per PTE.
    let unbatched =
        strict("skx8170", 4, "x86-linux-pcid", "lru_file_mmap_read", &["mem_mb=1", "file_mb=4", "tlbbatch=off"]);
    assert_eq!(unbatched.result["reclaim_flushes"], unbatched.result["reclaim_unmaps"]);
    assert!(unbatched.result["reclaim_flushes"] > 4.0 * flushes);
}

#[test]
fn lru_file_mmap_read_on_arm64_passes_the_oracle() {
    let out = strict("kunpeng920", 4, "arm64-linux", "lru_file_mmap_read", &["mem_mb=1", "file_mb=4"]);
    assert!(out.result["reclaimed_pages"] >= 768.0);
    let out = strict("kunpeng920", 4, "arm64-linux", "lru_file_mmap_read", &["mem_mb=1", "file_mb=4", "tlbbatch=off"]);
    assert!(out.result["reclaimed_pages"] >= 768.0);
}

#[test]
fn lru_file_mmap_read_readers_leave_reclaim_to_kswapd() {
    // Two readers on four CPUs: kswapd finds an idle CPU, woken at the
    // node's low watermark, and keeps the node above min.
    let sets = ["mem_mb=1", "file_mb=4", "nr_task=2"];
    let on = strict("skx8170", 4, "x86-linux-pcid", "lru_file_mmap_read", &sets);
    let (direct, kswapd) = (on.result["direct_reclaims"], on.result["kswapd_passes"]);
    assert!(kswapd > 4.0 * direct, "{kswapd} kswapd passes, {direct} direct reclaims");
    assert!(on.result["reclaimed_pages"] >= 768.0);
    // Off: the cgroup's limit, which only the readers reclaim at.
    let off = strict("skx8170", 4, "x86-linux-pcid", "lru_file_mmap_read", &[&sets[..], &["kswapd=off"]].concat());
    assert_eq!(off.result["kswapd_passes"], 0.0);
    assert!(off.result["direct_reclaims"] > 0.0);
}

#[test]
fn lru_file_mmap_read_reclaim_flushes_are_sent_from_kswapds_cpu() {
    // One reader: its address space is on its CPU alone. Reclaiming itself
    // (kswapd=off), x86 does not defer (arch_tlbbatch_should_defer: no other
    // CPU in mm_cpumask) and flushes locally: no IPI invalidates anything.
    let sets = ["mem_mb=1", "file_mb=4", "nr_task=1"];
    let off = strict("skx8170", 4, "x86-linux-613", "lru_file_mmap_read", &[&sets[..], &["kswapd=off"]].concat());
    assert!(off.result["reclaim_unmaps"] > 0.0);
    assert_eq!(off.metrics.ipi.ipi_invalidating_ns, 0.0);
    // kswapd, on another CPU, unmaps the reader's pages and sends the batch
    // flush to the reader's CPU.
    let on = strict("skx8170", 4, "x86-linux-613", "lru_file_mmap_read", &sets);
    assert!(on.result["kswapd_passes"] > on.result["direct_reclaims"]);
    assert!(on.result["reclaim_unmaps"] > 0.0);
    assert!(on.metrics.ipi.ipi_invalidating_ns > 0.0, "no flush reached the reader's CPU by IPI");
}

#[test]
fn lru_file_mmap_read_with_kswapd_is_deterministic() {
    let sets = ["mem_mb=1", "file_mb=4", "nr_task=3"];
    let a = strict("milan", 4, "x86-linux-613", "lru_file_mmap_read", &sets);
    let b = strict("milan", 4, "x86-linux-613", "lru_file_mmap_read", &sets);
    assert!(a.result["kswapd_passes"] > 0.0);
    assert_eq!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&b).unwrap());
}
