//! `madvise(MADV_PAGEOUT)` in the simulated kernel (`sim/reclaim.rs`): what
//! Linux v7.0 and Dev Jain's batching do to 64 KB contiguous blocks (unfolds,
//! deferred flushes, their TLBIs), a paged-out page faulting back in, and the
//! oracle's verdict with other CPUs using the memory while it is paged out.

use crate::common::{run_alone, run_clean, spec};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use tlbkit_policy::asid::LinuxArm64;
use tlbkit_policy::contpte::Teardown;
use tlbkit_policy::wrap::Wrap;
use tlbkit_policy::{Hw, MmId, Policy, VirtAddr};
use tlbkit_sim::preset;
use tlbkit_sim::program::{Op, Program, Sys};
use tlbkit_sim::run::RunSpec;
use tlbkit_sim::sim::{ContMode, ContpteConfig, ContpteStats, PageoutStats, Sim, SimConfig, Stats};

/// One step of a test program; addresses are pages of the region it maps first.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// Touch pages `first..first + pages`, writing or reading.
    Touch(u64, u64, bool),
    /// `madvise(MADV_PAGEOUT)` of pages `first..first + pages`.
    Pageout(u64, u64),
    /// A named mark.
    Mark(&'static str),
    /// Give up the CPU.
    Yield,
    /// Start a thread running these steps (sharing the region).
    Clone(&'static [Step]),
}

/// A program that maps `pages` pages (the first thread) and runs its steps
/// `rounds` times.
struct Script {
    steps: &'static [Step],
    rounds: u32,
    region: Rc<RefCell<Option<(u64, u64)>>>,
    pages: u64,
    pc: usize,
}

impl Script {
    fn new(pages: u64, steps: &'static [Step], rounds: u32) -> Box<Self> {
        Box::new(Script { steps, rounds, region: Rc::new(RefCell::new(None)), pages, pc: 0 })
    }

    fn va(&self, page: u64) -> u64 {
        self.region.borrow().expect("mapped").0 + page * 4096
    }
}

impl Program for Script {
    fn next(&mut self, ret: u64) -> Op {
        if self.region.borrow().is_none() {
            if self.pc == 0 {
                self.pc = usize::MAX;
                return Op::Sys(Sys::Mmap { pages: self.pages, write: true });
            }
            *self.region.borrow_mut() = Some((ret, self.pages));
            self.pc = 0;
        }
        if self.pc == self.steps.len() {
            self.rounds = self.rounds.saturating_sub(1);
            if self.rounds == 0 {
                return Op::Exit;
            }
            self.pc = 0;
        }
        let s = self.steps[self.pc];
        self.pc += 1;
        match s {
            Step::Touch(first, pages, write) => Op::Touch { va: self.va(first), pages, write },
            Step::Pageout(first, pages) => Op::Sys(Sys::MadvisePageout { va: self.va(first), pages }),
            Step::Mark(name) => Op::Mark(name),
            Step::Yield => Op::Sys(Sys::Yield),
            Step::Clone(steps) => {
                let t = Script { steps, rounds: self.rounds, region: self.region.clone(), pages: 0, pc: 0 };
                Op::Sys(Sys::Clone(Box::new(t)))
            }
        }
    }
}

/// What a policy's flushes were asked for, by size.
#[derive(Default, Debug, PartialEq, Eq)]
struct Asked {
    /// `flush_range` calls of one page.
    one: u64,
    /// `flush_range` calls of 16 pages.
    sixteen: u64,
    /// Every other flush call (other ranges, pages, whole address spaces).
    other: u64,
}

/// arm64 Linux with its user flushes counted: one page, 16 pages, the rest.
struct Counted(LinuxArm64, [AtomicU64; 3]);

impl Counted {
    fn new(p: LinuxArm64) -> Self {
        Counted(p, Default::default())
    }

    fn count(&self, i: usize) {
        self.1[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Returns the counts and starts again from zero.
    fn take(&self) -> Asked {
        let [one, sixteen, other] = self.1.each_ref().map(|c| c.swap(0, Ordering::Relaxed));
        Asked { one, sixteen, other }
    }
}

impl Wrap for Counted {
    type Inner = LinuxArm64;
    fn inner(&self) -> &LinuxArm64 {
        &self.0
    }
    fn flush_range<H: Hw>(&self, hw: &H, mm: MmId, start: VirtAddr, pages: u64) {
        self.count(match pages {
            1 => 0,
            16 => 1,
            _ => 2,
        });
        self.0.flush_range(hw, mm, start, pages)
    }
    fn flush_page<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        self.count(2);
        self.0.flush_page(hw, mm, va)
    }
    fn flush_mm<H: Hw>(&self, hw: &H, mm: MmId) {
        self.count(2);
        self.0.flush_mm(hw, mm)
    }
}

/// An Altra of `ncpus` CPUs with contiguous PTEs, strict.
fn altra(ncpus: usize, seed: u64, mode: ContMode) -> SimConfig {
    let contpte = ContpteConfig { mode, ..ContpteConfig::default() };
    SimConfig { strict: true, contpte, max_events: 5_000_000, ..SimConfig::quiet(preset::named("altra"), ncpus, seed) }
}

/// What one `MADV_PAGEOUT` did: the counters it changed, the policy's flush
/// calls and the broadcast TLBIs it made.
#[derive(Debug)]
struct Pageout {
    stats: Stats,
    asked: Asked,
    broadcasts: u64,
    full_flushes: u64,
}

/// Maps 64 pages (4 aligned 64 KB folios with contpte), writes them, pages them
/// out on one CPU of an Altra, and returns what the `MADV_PAGEOUT` did.
fn pageout_of_four_folios(mode: ContMode, batch: bool, tlbi_range: bool) -> Pageout {
    const STEPS: &[Step] = &[Step::Touch(0, 64, true), Step::Mark("a"), Step::Pageout(0, 64), Step::Mark("b")];
    let cfg = altra(1, 1, mode);
    let policy = Counted::new(LinuxArm64::new(1, 16, 16, false).unwrap().with_tlbi_range(tlbi_range));
    let mut sim = Sim::new(cfg, policy);
    sim.set_pageout_batch(batch);
    sim.spawn(Script::new(64, STEPS, 1)).unwrap();
    while sim.mark("a").is_none() {
        assert!(sim.step());
    }
    let (c0, s0) = (sim.counters(), sim.stats);
    sim.policy::<Counted>().expect("the policy run").take();
    while sim.mark("b").is_none() {
        assert!(sim.step());
    }
    let (c1, s1) = (sim.counters(), sim.stats);
    let asked = sim.policy::<Counted>().expect("the policy run").take();
    sim.run();
    assert!(sim.error.is_none(), "{:?}", sim.error);
    assert_eq!(sim.oracle.count, 0, "{:#?}", sim.oracle.violations);
    let (p0, p1) = (s0.pageout, s1.pageout);
    let stats = Stats {
        pageout: PageoutStats {
            pageout_folios: p1.pageout_folios - p0.pageout_folios,
            pageout_pages: p1.pageout_pages - p0.pageout_pages,
            pageout_skipped: p1.pageout_skipped - p0.pageout_skipped,
            pageout_deferred_flushes: p1.pageout_deferred_flushes - p0.pageout_deferred_flushes,
            pageout_unfolds: p1.pageout_unfolds - p0.pageout_unfolds,
            ..PageoutStats::default()
        },
        contpte: ContpteStats {
            pte_range_flushes: s1.contpte.pte_range_flushes - s0.contpte.pte_range_flushes,
            ..ContpteStats::default()
        },
        ..Stats::default()
    };
    Pageout {
        stats,
        asked,
        broadcasts: c1.broadcast_invalidations - c0.broadcast_invalidations,
        full_flushes: c1.full_flushes - c0.full_flushes,
    }
}

#[test]
fn v7_0_unfolds_each_block_and_defers_a_flush_per_page() {
    let p = pageout_of_four_folios(ContMode::On, false, false);
    assert_eq!(
        (p.stats.pageout.pageout_folios, p.stats.pageout.pageout_pages, p.stats.pageout.pageout_skipped),
        (4, 64, 0)
    );
    assert_eq!(p.stats.pageout.pageout_unfolds, 4, "the first PTE of each block unfolds it");
    assert_eq!(p.stats.pageout.pageout_deferred_flushes, 64, "one deferred flush per PTE");
    // The unfolds' synchronous 64 KB flushes, then 64 one-page deferred ones.
    assert_eq!(p.asked, Asked { one: 64, sixteen: 4, other: 0 });
    // Without range operations: 16 TLBI VALE1IS per unfold, one per page.
    assert_eq!((p.broadcasts, p.full_flushes), (4 * 16 + 64, 0));
}

#[test]
fn dev_jains_batching_clears_each_block_whole_with_one_deferred_range_flush() {
    let p = pageout_of_four_folios(ContMode::On, true, false);
    assert_eq!((p.stats.pageout.pageout_folios, p.stats.pageout.pageout_pages), (4, 64));
    assert_eq!((p.stats.pageout.pageout_unfolds, p.stats.contpte.pte_range_flushes), (0, 0), "no unfold");
    assert_eq!(p.stats.pageout.pageout_deferred_flushes, 4, "one deferred flush per folio");
    assert_eq!(p.asked, Asked { one: 0, sixteen: 4, other: 0 });
    assert_eq!((p.broadcasts, p.full_flushes), (4 * 16, 0));
}

#[test]
fn with_range_operations_a_64_kb_flush_is_one_range_tlbi() {
    // v7.0: each unfold is one TLBI RVALE1IS (scale 0, num 7), each page one
    // TLBI VALE1IS (a single page never goes by range).
    let p = pageout_of_four_folios(ContMode::On, false, true);
    assert_eq!(p.asked, Asked { one: 64, sixteen: 4, other: 0 });
    assert_eq!(p.broadcasts, 4 + 64);
    // Batched: one range TLBI per folio.
    let p = pageout_of_four_folios(ContMode::On, true, true);
    assert_eq!(p.asked, Asked { one: 0, sixteen: 4, other: 0 });
    assert_eq!(p.broadcasts, 4);
}

#[test]
fn without_contiguous_ptes_v7_0_goes_page_by_page_and_batching_needs_a_large_folio() {
    for mode in [ContMode::Off, ContMode::Folios] {
        let p = pageout_of_four_folios(mode, false, false);
        assert_eq!(p.stats.pageout.pageout_pages, 64, "{mode:?}");
        assert_eq!((p.stats.pageout.pageout_unfolds, p.stats.pageout.pageout_deferred_flushes), (0, 64), "{mode:?}");
        assert_eq!((p.asked.one, p.asked.sixteen, p.broadcasts), (64, 0, 64), "{mode:?}");
    }
    // Order-0 pages are unmapped alone even with the batching; 64 KB folios
    // without the contiguous bit are batched (the series is core mm).
    let p = pageout_of_four_folios(ContMode::Off, true, false);
    assert_eq!((p.stats.pageout.pageout_folios, p.stats.pageout.pageout_deferred_flushes), (64, 64));
    let p = pageout_of_four_folios(ContMode::Folios, true, false);
    assert_eq!((p.stats.pageout.pageout_folios, p.stats.pageout.pageout_deferred_flushes, p.asked.sixteen), (4, 4, 4));
}

#[test]
fn a_paged_out_page_faults_back_in_as_a_fresh_folio() {
    const STEPS: &[Step] = &[
        Step::Touch(0, 32, true),
        Step::Pageout(0, 32),
        Step::Mark("out"),
        Step::Touch(5, 1, false),
        Step::Mark("one"),
        Step::Touch(0, 16, true),
        Step::Mark("block"),
    ];
    for mode in [ContMode::On, ContMode::Off] {
        let sim = run_alone(altra(1, 1, mode), LinuxArm64::new(1, 16, 16, false).unwrap(), Script::new(32, STEPS, 1));
        assert!(sim.error.is_none(), "{:?}", sim.error);
        assert_eq!(sim.oracle.count, 0, "{:#?}", sim.oracle.violations);
        let at = |m: &str| sim.mark_stats(m).unwrap();
        let (out, one, block) = (at("out"), at("one"), at("block"));
        assert_eq!(out.pageout.pageout_pages, 32, "{mode:?}");
        assert_eq!(
            (one.mmu.page_faults - out.mmu.page_faults, one.pageout.swapins - out.pageout.swapins),
            (1, 1),
            "{mode:?}"
        );
        if mode == ContMode::On {
            // The fault mapped the whole 64 KB folio: the rest of the block is there.
            assert_eq!(one.contpte.folios - out.contpte.folios, 1);
            assert_eq!((block.mmu.page_faults, block.pageout.swapins), (one.mmu.page_faults, one.pageout.swapins));
        } else {
            assert_eq!(
                (block.mmu.page_faults - one.mmu.page_faults, block.pageout.swapins - one.pageout.swapins),
                (15, 15)
            );
        }
    }
}

#[test]
fn shared_and_partly_covered_folios_are_left_mapped() {
    const STEPS: &[Step] = &[Step::Touch(0, 32, true), Step::Pageout(8, 16), Step::Mark("half")];
    let sim =
        run_alone(altra(1, 1, ContMode::On), LinuxArm64::new(1, 16, 16, false).unwrap(), Script::new(32, STEPS, 1));
    assert!(sim.error.is_none(), "{:?}", sim.error);
    let s = sim.mark_stats("half").unwrap();
    // Pages 8..24 cover half of each of two 64 KB folios: both are skipped.
    assert_eq!((s.pageout.pageout_pages, s.pageout.pageout_skipped, s.pageout.pageout_deferred_flushes), (0, 2, 0));
}

/// A first thread that writes 64 pages and starts three that read and write
/// them in a loop on other CPUs, while it pages them out over and over.
const PAGER: &[Step] = &[
    Step::Touch(0, 64, true),
    Step::Clone(READER),
    Step::Clone(READER),
    Step::Clone(READER),
    Step::Pageout(0, 64),
    Step::Yield,
    Step::Touch(0, 64, true),
    Step::Pageout(16, 32),
    Step::Yield,
];

/// A thread that reads and writes the region.
const READER: &[Step] = &[Step::Touch(0, 64, false), Step::Touch(10, 30, true), Step::Yield];

#[test]
fn pageout_under_migration_on_4_cpus_is_strict_clean() {
    for (seed, batch, tlbi_range) in [(1, false, false), (2, true, false), (3, false, true), (4, true, true)] {
        for mode in [ContMode::On, ContMode::Folios, ContMode::Off] {
            let cfg = SimConfig { spec_rate: 0.2, migration: true, slice_us: 50.0, ..altra(4, seed, mode) };
            let mut sim = Sim::new(cfg, LinuxArm64::new(4, 16, 16, false).unwrap().with_tlbi_range(tlbi_range));
            sim.set_pageout_batch(batch);
            sim.spawn(Script::new(64, PAGER, 6)).unwrap();
            sim.run();
            let what = format!("seed {seed}, batch {batch}, tlbi_range {tlbi_range}, {mode:?}");
            assert!(sim.error.is_none(), "{what}: {:?}", sim.error);
            assert_eq!(sim.oracle.count, 0, "{what}: {:#?}", sim.oracle.violations);
            assert!(sim.stats.pageout.pageout_pages > 0 && sim.stats.pageout.swapins > 0, "{what}: {:?}", sim.stats);
            if mode == ContMode::On {
                assert!(sim.stats.contpte.hw_races > 0, "{what}: other CPUs acted inside the arch code");
            }
        }
    }
}

/// arm64 Linux whose range flushes invalidate nothing.
struct NoRange(LinuxArm64);

impl Wrap for NoRange {
    type Inner = LinuxArm64;
    fn inner(&self) -> &LinuxArm64 {
        &self.0
    }
    fn flush_range<H: Hw>(&self, _hw: &H, _mm: MmId, _start: VirtAddr, _pages: u64) {}
}

#[test]
fn a_deferred_flush_that_invalidates_nothing_is_caught() {
    for (mode, batch) in [(ContMode::On, false), (ContMode::On, true), (ContMode::Off, false)] {
        let cfg = SimConfig { spec_rate: 0.2, migration: true, slice_us: 50.0, ..altra(4, 1, mode) };
        let mut sim = Sim::new(cfg, NoRange(LinuxArm64::new(4, 16, 16, false).unwrap()));
        sim.set_pageout_batch(batch);
        sim.spawn(Script::new(64, PAGER, 2)).unwrap();
        sim.run();
        let props: Vec<&str> = sim.oracle.violations.iter().map(|v| v.property).collect();
        assert!(props.contains(&"no_stale_held"), "{mode:?} batch {batch}: {props:?}");
        let paged = sim.oracle.violations.iter().any(|v| v.change.as_deref().is_some_and(|c| c.starts_with("pageout")));
        assert!(paged, "{mode:?} batch {batch}: a violation names the pageout: {:#?}", sim.oracle.violations);
    }
}

#[test]
fn madvise_bench_runs_strict_on_the_arm64_linux_policies() {
    for policy in ["arm64-linux", "arm64-linux-skipbcast"] {
        for sets in [
            &["contpte=on", "batch=0"][..],
            &["contpte=on", "batch=1"],
            &["contpte=on", "advice=1", "teardown=noopt"],
            &["contpte=folios"],
            &["contpte=off"],
        ] {
            let mut sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
            sets.extend(["size_mb=1", "iters=3", "migration=on", "spec_rate=0.2"].map(String::from));
            let spec = RunSpec { seed: 7, ..spec("altra", 4, policy, "madvise_bench", sets) };
            let out = run_clean(&spec);
            assert!(out.result["ms_per_call"] > 0.0, "{}", spec.command());
        }
    }
}

#[test]
fn the_teardown_setting_is_dontneeds_switch() {
    // MADV_DONTNEED of 4 blocks: v6.9's batched zap clears whole blocks without
    // unfolding; noopt unfolds each one.
    let unfolds = |t: Teardown| {
        const STEPS: &[Step] = &[Step::Touch(0, 64, true), Step::Mark("a")];
        let contpte = ContpteConfig { mode: ContMode::On, teardown: t, ..ContpteConfig::default() };
        let cfg = SimConfig { contpte, ..altra(1, 1, ContMode::On) };
        let mut sim = Sim::new(cfg, LinuxArm64::new(1, 16, 16, false).unwrap());
        struct Dontneed(Box<Script>, bool);
        impl Program for Dontneed {
            fn next(&mut self, ret: u64) -> Op {
                match self.0.next(ret) {
                    Op::Exit if !self.1 => {
                        self.1 = true;
                        Op::Sys(Sys::Madvise { va: self.0.va(0), pages: 64 })
                    }
                    op => op,
                }
            }
        }
        sim.spawn(Box::new(Dontneed(Script::new(64, STEPS, 1), false))).unwrap();
        sim.run();
        assert!(sim.error.is_none() && sim.oracle.count == 0);
        sim.stats.contpte.pte_range_flushes - sim.mark_stats("a").unwrap().contpte.pte_range_flushes
    };
    assert_eq!(unfolds(Teardown::ClearPtes), 0);
    assert_eq!(unfolds(Teardown::NoOpt), 4);
}
