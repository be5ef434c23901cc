//! The batched TLB flushes of unmaps: reclaim's (`--set tlbbatch`, Linux v4.3's
//! `try_to_unmap_flush`, arm64's since v6.5) and migration's (`--set
//! migrate_batch`, Linux v6.3's `migrate_pages_batch`), the two workloads that
//! show them (`swap_pageout`, `pmbench_migrate`), and the oracle over a
//! migration.

use crate::common::x86_counted::{run_to_mark, take_calls, Counted, Spinner, Spinning};
use crate::common::{loose_spec, strict, MapThen};
use tlbkit_policy::asid::linux_x86_615::Kernel;
use tlbkit_policy::asid::LinuxX86v615;
use tlbkit_policy::wrap::Wrap;
use tlbkit_policy::{Hw, MmId, Policy, VirtAddr};
use tlbkit_sim::preset;
use tlbkit_sim::program::{Op, Program, Sys};
use tlbkit_sim::run::run;
use tlbkit_sim::sim::{ContMode, ContpteConfig, KernelChoices, Sim, SimConfig};
use tlbkit_sim::toggle::{MIGRATE_BATCH, TLBBATCH};
use tlbkit_sim::workload::{self, Phase};

/// The calls an unmap's flush makes of the policy.
#[derive(Default, Debug, PartialEq, Eq, Clone, Copy)]
struct Calls {
    add_pending: u64,
    flush_batch: u64,
    flush_range: u64,
}

/// The calls of an unmap's flush [`Counted`] counted since the last take.
fn take(sim: &Sim) -> Calls {
    let [add_pending, flush_batch, _, flush_range] = take_calls(sim);
    Calls { add_pending, flush_batch, flush_range }
}

/// Runs `op` on 64 written pages under the counted x86 policy on `milan`
/// (`cpus` CPUs, all running the mm); returns the policy calls and the IPIs
/// between the marks, and the run's unmap and batch flush counts.
fn x86(cfg: impl FnOnce(SimConfig) -> SimConfig, cpus: usize, op: fn(u64) -> Sys) -> (Calls, u64, u64, u64) {
    let base = SimConfig { strict: true, max_events: 5_000_000, ..SimConfig::quiet(preset::named("milan"), cpus, 1) };
    let mut sim = Sim::new(cfg(base), Counted::new(cpus));
    sim.add_cpuless_node();
    let script = move |va| vec![Op::Mark("a"), Op::Sys(op(va)), Op::Mark("b")];
    sim.spawn(Box::new(Spinning::new(cpus - 1, script))).unwrap();
    run_to_mark(&mut sim, "a");
    take(&sim);
    let ipis = sim.counters().ipis_sent;
    run_to_mark(&mut sim, "b");
    let calls = take(&sim);
    let ipis = sim.counters().ipis_sent - ipis;
    sim.run();
    assert!(sim.error.is_none(), "{:?}", sim.error);
    assert_eq!(sim.oracle.count, 0, "{:#?}", sim.oracle.violations);
    (calls, ipis, sim.stats.pageout.unmap_flushes, sim.stats.pageout.tlbbatch_flushes)
}

fn pageout(va: u64) -> Sys {
    Sys::MadvisePageout { va, pages: 64 }
}

fn folios(tlbbatch: bool) -> impl FnOnce(SimConfig) -> SimConfig {
    move |c: SimConfig| SimConfig {
        kernel: c.kernel.with(TLBBATCH, tlbbatch),
        contpte: ContpteConfig { mode: ContMode::Folios, ..ContpteConfig::default() },
        ..c
    }
}

#[test]
fn x86_reclaim_without_tlbbatch_flushes_each_page_at_once() {
    // 64 KB folios: with the batch, each folio's 16 pages are added to it and
    // flushed by one flush_batch; without it, each page is flush_range'd alone
    // and nothing reaches the batch hooks.
    let (on, ipis_on, unmap_on, batch_on) = x86(folios(true), 4, pageout);
    assert_eq!(on, Calls { add_pending: 64, flush_batch: 4, flush_range: 0 });
    assert_eq!((unmap_on, batch_on), (0, 4));
    let (off, ipis_off, unmap_off, batch_off) = x86(folios(false), 4, pageout);
    assert_eq!(off, Calls { add_pending: 0, flush_batch: 0, flush_range: 64 });
    assert_eq!((unmap_off, batch_off), (64, 0));
    // Three other CPUs run the mm: one IPI to each per flush.
    assert_eq!((ipis_on, ipis_off), (4 * 3, 64 * 3));
}

fn migrate(_va: u64) -> Sys {
    // The driver is the process's first thread (tid 0); node 1 is memory only.
    Sys::MigratePages { tid: 0, from: 0, to: 1 }
}

#[test]
fn x86_migration_flushes_per_page_without_its_batch_and_once_per_batch_with_it() {
    let batch = |on: bool| move |c: SimConfig| SimConfig { kernel: c.kernel.with(MIGRATE_BATCH, on), ..c };
    // Every page of the process that only it maps (the 64 written; its image
    // pages too, as no fork shares them) moves: one batch flush of all of
    // them, or one flush_range each.
    let (on, ipis_on, unmap_on, batch_on) = x86(batch(true), 4, migrate);
    assert_eq!((on.flush_batch, on.flush_range, unmap_on, batch_on), (1, 0, 0, 1));
    let moved = on.add_pending;
    assert!(moved >= 64, "{moved} pages moved");
    assert_eq!(ipis_on, 3);
    let (off, ipis_off, unmap_off, batch_off) = x86(batch(false), 4, migrate);
    assert_eq!(off, Calls { add_pending: 0, flush_batch: 0, flush_range: moved });
    assert_eq!((unmap_off, batch_off, ipis_off), (moved, 0, 3 * moved));
    // Without the architecture's batch (tlbbatch=off) migration cannot defer.
    let (none, _, unmap_none, _) =
        x86(|c| batch(true)(SimConfig { kernel: c.kernel.with(TLBBATCH, false), ..c }), 4, migrate);
    assert_eq!((none.flush_batch, none.flush_range, unmap_none), (0, moved, moved));
}

#[test]
fn arm64_reclaim_flushes_a_dirty_folio_before_its_write_and_clean_ones_at_the_lists_end() {
    // 1 MiB of 64 KB folios: 16 folios, 256 pages per MADV_PAGEOUT. The first
    // call pages out what the memset dirtied: v6.5's batch completes each
    // folio's 16 TLBIs with one DSB ISH before the folio's write
    // (try_to_unmap_flush_dirty); before it, a TLBI and a DSB ISH per page. The
    // second pages out what was only read since its swap-in: clean PTEs, whose
    // TLBIs wait until the list's folio_batch of folios to free fills (15 on the
    // preset's v5.10) and until the list's end: two DSBs.
    let flushes = |tb: &str, iters: u32| {
        let sets = ["contpte=folios", &format!("iters={iters}"), &format!("tlbbatch={tb}")];
        strict("kunpeng920", 4, "arm64-linux", "swap_pageout", &sets).result["flushes_per_call"]
    };
    assert_eq!((flushes("on", 1), flushes("off", 1)), (16.0, 256.0));
    assert_eq!((flushes("on", 2), flushes("off", 2)), ((16.0 + 2.0) / 2.0, 256.0));
}

#[test]
fn swap_pageout_times_each_pageout_of_the_whole_range() {
    let out = strict("skx8170", 4, "x86-linux-pcid", "swap_pageout", &["iters=3"]);
    let r = &out.result;
    assert!(r["pageout_us"] > 0.0, "{r:?}");
    // The first call's pages are dirty (the memset): try_to_unmap_flush_dirty
    // completes each one's batch. The next two find them clean (only read since
    // their swap-in): one flush per 15 folios freed (the folio_batch of the
    // preset's v5.10) and one at the list's end, 18 each.
    assert_eq!(r["flushes_per_call"], (256.0 + 2.0 * 18.0) / 3.0, "{r:?}");
    let per_byte = r["pageout_us"] * 1e3 / (1024.0 * 1024.0);
    assert!((r["pageout_ns_per_byte"] - per_byte).abs() < 1e-9 * per_byte.max(1.0), "{r:?}");
}

#[test]
fn swap_pageouts_loop_is_its_reads_and_its_call_and_the_batch_saves_the_loop_what_it_saves_the_call() {
    // One thread, as the program under `taskset` runs: an iteration is the
    // reads of every page (swap-ins) and the call; the batch changes only the call.
    let run = |tb: &str| {
        let sets = ["iters=4", "readers=0", &format!("tlbbatch={tb}")];
        strict("kunpeng920", 4, "arm64-linux", "swap_pageout", &sets).result
    };
    let (off, on) = (run("off"), run("on"));
    for r in [&off, &on] {
        assert!(r["iter_us"] > r["pageout_us"], "{r:?}");
    }
    assert!(on["iter_us"] < off["iter_us"], "{on:?} {off:?}");
    // The loop saves about what the call saves: the calls' mean takes in the
    // first call (of the memset's dirty pages), the loop's leaves its
    // iteration out.
    let loop_saving = off["iter_us"] - on["iter_us"];
    let call_saving = off["pageout_us"] - on["pageout_us"];
    assert!((loop_saving - call_saving).abs() < 0.5 * call_saving, "loop {loop_saving} µs, call {call_saving} µs");
}

/// The cycles of two migrations by a process's only thread, on node 0 of
/// `milan` with node 1 memory only and `extra` as the machine's
/// `mem_remote_extra`: its 64 written pages (and the rest it has alone) from
/// node 0 to 1, then back; and the pages the first moved.
fn there_and_back(extra: u64) -> (u64, u64, u64) {
    let mut p = preset::named("milan");
    p.costs.lines.mem_remote_extra = extra;
    let cfg = SimConfig { strict: true, max_events: 5_000_000, ..SimConfig::quiet(p, 1, 1) };
    let cfg = SimConfig { kernel: cfg.kernel.with(MIGRATE_BATCH, true), ..cfg };
    let mut sim = Sim::new(cfg, Counted::new(1));
    sim.add_cpuless_node();
    let script = |_| {
        vec![
            Op::Mark("a"),
            Op::Sys(Sys::MigratePages { tid: 0, from: 0, to: 1 }),
            Op::Mark("b"),
            Op::Sys(Sys::MigratePages { tid: 0, from: 1, to: 0 }),
            Op::Mark("c"),
        ]
    };
    sim.spawn(Box::new(Spinning::new(0, script))).unwrap();
    run_to_mark(&mut sim, "c");
    let moved = sim.mark_stats("b").unwrap().pageout.migrated_pages;
    let (a, b, c) = (sim.mark("a").unwrap(), sim.mark("b").unwrap(), sim.mark("c").unwrap());
    sim.run();
    assert!(sim.error.is_none(), "{:?}", sim.error);
    assert_eq!(sim.oracle.count, 0, "{:#?}", sim.oracle.violations);
    (b - a, c - b, moved)
}

#[test]
fn a_copy_from_another_nodes_memory_waits_for_its_lines() {
    // The pages were first touched by the CPU on node 0: moving them away
    // copies from local memory, whatever a remote line costs; moving them
    // back copies each page's 64 lines from node 1, `mlp` at a time.
    let (there0, back0, moved) = there_and_back(0);
    let (there, back, again) = there_and_back(1000);
    assert!(moved >= 64, "{moved} pages moved");
    assert_eq!((there, again), (there0, moved));
    let mlp = preset::named("milan").costs.mlp;
    let each = (64 * 1000u64).div_ceil(mlp);
    assert!(back >= back0 + moved * each, "back {back} cycles, {back0} with local lines; {moved} pages, {each} each");
    assert!(back < back0 + moved * each * 11 / 10, "back {back} cycles, {back0} with local lines");
}

/// A process's first thread, on CPU 0: starts a thread on CPU 1 that maps
/// and writes 64 pages, then migrates the process's pages from node 0 to 1
/// and back; computes meanwhile.
struct FirstTouch(u32);

impl Program for FirstTouch {
    fn next(&mut self, _ret: u64) -> Op {
        self.0 += 1;
        if self.0 == 1 {
            let script = |_| {
                vec![
                    Op::Sys(Sys::MigratePages { tid: 0, from: 0, to: 1 }),
                    Op::Mark("a"),
                    Op::Sys(Sys::MigratePages { tid: 0, from: 1, to: 0 }),
                    Op::Mark("b"),
                ]
            };
            return Op::Sys(Sys::CloneOn(1, MapThen::new(64, script)));
        }
        Spinner(self.0).next(0)
    }
}

#[test]
fn a_page_is_placed_on_the_node_of_the_cpu_that_first_touches_it() {
    // One CPU to a node: CPU 1 is node 1's. Its 64 pages are there, so the
    // first migration (node 0 to 1) moves only the pages CPU 0 touched, and
    // the second moves those back and the 64 too.
    let mut p = preset::named("milan");
    p.cores_per_socket = 1;
    let cfg = SimConfig { strict: true, max_events: 5_000_000, ..SimConfig::quiet(p, 2, 1) };
    let mut sim = Sim::new(cfg, Counted::new(2));
    sim.spawn(Box::new(FirstTouch(0))).unwrap();
    run_to_mark(&mut sim, "b");
    let first = sim.mark_stats("a").unwrap().pageout.migrated_pages;
    let second = sim.mark_stats("b").unwrap().pageout.migrated_pages - first;
    sim.run();
    assert!(sim.error.is_none(), "{:?}", sim.error);
    assert_eq!(second, first + 64, "first migration {first} pages, second {second}");
}

/// `pmbench_migrate`'s result on `machine` with `sets` (small sizes).
fn pmbench(machine: &str, cpus: usize, policy: &str, sets: &[&str]) -> std::collections::BTreeMap<String, f64> {
    let mut all = vec!["mapsize_mb=2", "setsize_mb=2", "passes=2"];
    all.extend_from_slice(sets);
    strict(machine, cpus, policy, "pmbench_migrate", &all).result
}

#[test]
fn pmbench_migrate_batches_by_the_kernel_and_as_told() {
    // skx8170's kernel (v5.10) predates the batch: one flush per page. Its
    // second socket is node 1 whether or not the CPUs reach it.
    let old = pmbench("skx8170", 8, "x86-linux-pcid", &[]);
    assert_eq!(old["flushes_per_page"], 1.0, "{old:?}");
    // 512 pages each way: one batch per pass.
    let new = pmbench("skx8170", 8, "x86-linux-pcid", &["migrate_batch=on"]);
    assert_eq!(new["flushes_per_page"], 2.0 / 1024.0, "{new:?}");
    assert!(new["migrate_pages_per_s"] > old["migrate_pages_per_s"], "{old:?} {new:?}");
    for r in [&old, &new] {
        assert!(r["access_ns"] > 0.0 && r["accesses_per_s"] > 0.0, "{r:?}");
    }
    // altra's kernel (v6.9) batches, on two nodes; arm64 without its own
    // batch (pre-v6.5, tlbbatch=off) cannot.
    let arm = pmbench("altra", 8, "arm64-linux", &["numa=2"]);
    assert_eq!(arm["flushes_per_page"], 2.0 / 1024.0, "{arm:?}");
    let pre = pmbench("altra", 8, "arm64-linux", &["numa=2", "tlbbatch=off"]);
    assert_eq!(pre["flushes_per_page"], 1.0, "{pre:?}");
}

#[test]
fn pmbench_migrate_needs_two_nodes() {
    let spec = loose_spec("altra", 4, "arm64-linux", "pmbench_migrate", &["mapsize_mb=1", "setsize_mb=1"]);
    let e = run(&spec).expect_err("one node").to_string();
    assert!(e.contains("needs two NUMA nodes") && e.contains("numa=2"), "{e}");
}

/// The x86 policy with every user flush left out: what a migration that never
/// flushed its unmaps would leave in the TLBs.
struct NoFlush(LinuxX86v615);

impl Wrap for NoFlush {
    type Inner = LinuxX86v615;
    fn inner(&self) -> &LinuxX86v615 {
        &self.0
    }
    fn flush_batch<H: Hw>(&self, _hw: &H, _mms: &[MmId]) {}
    fn flush_range<H: Hw>(&self, _hw: &H, _mm: MmId, _start: VirtAddr, _pages: u64) {}
    fn flush_page<H: Hw>(&self, _hw: &H, _mm: MmId, _va: VirtAddr) {}
}

/// Runs small `pmbench_migrate` under `policy` with `--strict`; returns the
/// oracle's violation count.
fn migrate_violations<P: Policy + 'static>(policy: P, batch: bool) -> u64 {
    let cfg = SimConfig {
        strict: true,
        kernel: KernelChoices::default().with(MIGRATE_BATCH, batch),
        max_events: 5_000_000,
        ..SimConfig::quiet(preset::named("milan"), 4, 1)
    };
    let mut sim = Sim::new(cfg, policy);
    let def = workload::by_name("pmbench_migrate").unwrap();
    let mut p: workload::Params = def.params.iter().map(|d| (d.key.to_string(), d.default)).collect();
    for (k, v) in [("mapsize_mb", 1.0), ("setsize_mb", 1.0), ("passes", 2.0), ("jobs", 2.0), ("cpuless_node", 1.0)] {
        p.insert(k.to_string(), v);
    }
    workload::setup("pmbench_migrate", &p, &mut sim, Phase::Main).unwrap();
    sim.run();
    assert!(sim.error.is_none(), "{:?}", sim.error);
    assert!(sim.stats.pageout.migrated_pages >= 512, "{} pages moved", sim.stats.pageout.migrated_pages);
    sim.oracle.count
}

#[test]
fn a_migration_never_lets_a_cpu_use_a_stale_translation() {
    for batch in [false, true] {
        assert_eq!(migrate_violations(LinuxX86v615::new(4, 16, Kernel::V613), batch), 0, "batch {batch}");
        // The same run without the unmaps' flushes is caught: the workers use
        // the old frames after they were freed and handed out again.
        assert!(migrate_violations(NoFlush(LinuxX86v615::new(4, 16, Kernel::V613)), batch) > 0, "batch {batch}");
    }
}
