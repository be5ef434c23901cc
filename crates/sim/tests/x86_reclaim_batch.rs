//! Reclaim on x86 through the policy's own batch (`sim/reclaim.rs`): each
//! deferred flush is `tlbbatch_add_pending` of its pages, each folio ends in
//! one `flush_batch` of the mm (x86's `arch_tlbbatch_flush`), the mark left
//! on the mm is the next walk's `flush_batched_pending`, and the batch flush
//! reaches every CPU running the mm; an mm that runs on no other CPU is not
//! batched at all (`arch_tlbbatch_should_defer`).

use crate::common::x86_counted::{run_to_mark, take_calls, Counted, Spinning};
use crate::common::{run_clean, spec};
use tlbkit_sim::preset;
use tlbkit_sim::program::{Op, Sys};
use tlbkit_sim::sim::{ContMode, ContpteConfig, Sim, SimConfig};

/// The calls reclaim makes of the policy.
#[derive(Default, Debug, PartialEq, Eq, Clone, Copy)]
struct Calls {
    add_pending: u64,
    flush_batch: u64,
    batched_pending: u64,
    flush_range: u64,
}

/// The reclaim calls [`Counted`] counted since the last take.
fn take(sim: &Sim) -> Calls {
    let [add_pending, flush_batch, batched_pending, flush_range] = take_calls(sim);
    Calls { add_pending, flush_batch, batched_pending, flush_range }
}

/// What the first and second `MADV_PAGEOUT` asked of the policy, and the
/// IPIs and deferred flushes of the first.
fn pageout(mode: ContMode, batch: bool, cpus: usize) -> (Calls, Calls, u64, u64) {
    let contpte = ContpteConfig { mode, ..ContpteConfig::default() };
    let cfg =
        SimConfig { strict: true, contpte, max_events: 5_000_000, ..SimConfig::quiet(preset::named("milan"), cpus, 1) };
    let mut sim = Sim::new(cfg, Counted::new(cpus));
    sim.set_pageout_batch(batch);
    // Pages the 64 pages out twice (marks `a`, `b`, `c`).
    let pageout = |va| Op::Sys(Sys::MadvisePageout { va, pages: 64 });
    let script = move |va| {
        vec![
            Op::Mark("a"),
            pageout(va),
            Op::Mark("b"),
            Op::Touch { va, pages: 64, write: true },
            pageout(va),
            Op::Mark("c"),
        ]
    };
    sim.spawn(Box::new(Spinning::new(cpus - 1, script))).unwrap();
    run_to_mark(&mut sim, "a");
    take(&sim);
    let (ipis, deferred) = (sim.counters().ipis_sent, sim.stats.pageout.pageout_deferred_flushes);
    run_to_mark(&mut sim, "b");
    let first = take(&sim);
    let (ipis, deferred) = (sim.counters().ipis_sent - ipis, sim.stats.pageout.pageout_deferred_flushes - deferred);
    run_to_mark(&mut sim, "c");
    let second = take(&sim);
    sim.run();
    assert!(sim.error.is_none(), "{:?}", sim.error);
    assert_eq!(sim.oracle.count, 0, "{:#?}", sim.oracle.violations);
    (first, second, ipis, deferred)
}

#[test]
fn x86_reclaim_flushes_each_page_at_once_when_the_mm_runs_nowhere_else() {
    // One CPU: `mm_cpumask` holds this one only, so `arch_tlbbatch_should_defer`
    // says no and each cleared PTE is flushed at once (`ptep_clear_flush`).
    let (first, second, ipis, deferred) = pageout(ContMode::Off, false, 1);
    assert_eq!(first, Calls { add_pending: 0, flush_batch: 0, batched_pending: 0, flush_range: 64 });
    assert_eq!(second, first, "no mark, no batch the next time either");
    assert_eq!((ipis, deferred), (0, 0));
}

#[test]
fn x86_reclaim_adds_each_page_to_the_batch_and_flushes_once_per_folio() {
    // Another CPU runs the mm, so every unmap defers. Sixteen 64 KB folios'
    // worth of order-0 pages: one batch flush per page.
    let (first, _, _, deferred) = pageout(ContMode::Off, false, 2);
    assert_eq!(first, Calls { add_pending: 64, flush_batch: 64, batched_pending: 0, flush_range: 0 });
    assert_eq!(deferred, 64);
    // 64 KB folios (mTHP, no contiguous bit on x86): one batch flush per folio,
    // with or without Dev Jain's batched unmap, which makes each folio's PTEs
    // one deferred flush (set_tlb_ubc_flush_pending of the 16 pages).
    for (batch, want) in [(false, 64), (true, 4)] {
        let (first, _, _, deferred) = pageout(ContMode::Folios, batch, 2);
        assert_eq!(first, Calls { add_pending: 64, flush_batch: 4, batched_pending: 0, flush_range: 0 }, "{batch}");
        assert_eq!(deferred, want, "batch {batch}");
    }
}

#[test]
fn the_mark_a_batch_leaves_is_the_next_walks_flush_tlb_mm() {
    // The second MADV_PAGEOUT's first table finds the mm marked by the first.
    let (_, second, _, _) = pageout(ContMode::Folios, true, 2);
    assert_eq!((second.batched_pending, second.flush_batch), (1, 4));
}

#[test]
fn the_batch_flush_reaches_every_cpu_running_the_mm() {
    // Three other CPUs run the mm: each folio's batch flush interrupts them.
    let (first, _, ipis, _) = pageout(ContMode::Folios, true, 4);
    assert_eq!(first.flush_batch, 4);
    assert_eq!(ipis, 4 * 3, "one IPI to each of the 3 other CPUs per folio");
}

/// Returns `madvise_bench`'s time per `MADV_PAGEOUT` of 1 MB of 64 KB folios
/// on `milan` under `policy`, with Dev Jain's batching or without.
fn pageout_ms(policy: &str, batch: u8) -> f64 {
    let sets = ["advice=0", "contpte=folios", "size_mb=1", "iters=2"].map(String::from);
    let sets = sets.into_iter().chain([format!("batch={batch}")]);
    run_clean(&spec("milan", 2, policy, "madvise_bench", sets)).result["ms_per_call"]
}

#[test]
fn madvise_bench_with_folios_runs_on_x86_and_the_batched_unmap_is_faster() {
    for policy in ["x86-linux-512", "x86-linux-513", "x86-linux-613", "x86-linux-lazytrim", "x86-linux-invlpgb"] {
        let (one, batched) = (pageout_ms(policy, 0), pageout_ms(policy, 1));
        // The same batch flush per folio; fewer PTE reads and one clear of 16.
        assert!(batched < one, "{policy}: {batched} ms batched, {one} ms one PTE at a time");
    }
}
