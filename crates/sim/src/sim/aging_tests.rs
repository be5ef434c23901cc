//! Reclaim's aging of mapped folios (`folio_check_references`,
//! `Sim::folio_referenced`): a folio found with a young PTE is kept for a
//! later pass, its young bit cleared; found again with none, it is
//! reclaimed. Page-cache folios (`sim/file_reclaim.rs`) and anonymous ones
//! (`sim/memcg.rs`).

use super::*;
use crate::preset;
use tlbkit_policy::asid::LinuxX86;

/// Maps `pages` pages (of file 0 shared and read-only, or anonymous and
/// writable), touches each once (reads the file, writes the anonymous
/// memory), then sleeps on a pipe nobody writes.
struct TouchOnce {
    step: u32,
    pages: u64,
    file: bool,
}

impl Program for TouchOnce {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        match self.step {
            1 if self.file => Op::Sys(Sys::MmapFile { file: 0, pages: self.pages, write: false, private: false }),
            1 => Op::Sys(Sys::Mmap { pages: self.pages, write: true }),
            2 => Op::Touch { va: ret, pages: self.pages, write: !self.file },
            3 => Op::Sys(Sys::Pipe),
            4 => Op::Sys(Sys::PipeRead(ret as u32)),
            _ => Op::Exit,
        }
    }
}

/// Runs [`TouchOnce`] of 64 pages on one x86 CPU under a 32-page limit
/// (charging the page cache for a file) and returns reclaim's counts.
fn touch_past_the_limit(file: bool) -> ReclaimStats {
    let cfg = SimConfig { max_mms: 4, max_events: 100_000, ..SimConfig::quiet(preset::named("skylake"), 1, 1) };
    let mut sim = Sim::new(cfg, LinuxX86::new(1, 4, true));
    // Two 64 KB folios of room: touching the third and the fourth reclaims.
    sim.set_mem_limit(2 * CONT_PTES);
    if file {
        sim.set_file_charge();
    }
    sim.spawn(Box::new(TouchOnce { step: 0, pages: 4 * CONT_PTES, file })).unwrap();
    while !sim.is_lazy(0) {
        assert!(sim.step(), "cpu0 never went idle after the touches");
    }
    assert!(sim.error.is_none() && sim.oracle.violations.is_empty(), "{:?} {:?}", sim.error, sim.oracle.violations);
    sim.reclaim_stats()
}

#[test]
fn a_mapped_page_cache_folio_found_young_is_kept_once_then_reclaimed() {
    let r = touch_past_the_limit(true);
    // Every folio reclaimed was still mapped, read once: young when reclaim
    // first found it, kept, and reclaimed when found again with no young PTE.
    assert_eq!(r.file_folios, 2, "{r:?}");
    assert_eq!(r.file_unmaps, 2 * CONT_PTES, "{r:?}");
    assert!(r.file_kept >= r.file_folios, "each was kept before it was reclaimed: {r:?}");
}

#[test]
fn an_anonymous_page_found_young_is_activated_once_then_reclaimed() {
    let r = touch_past_the_limit(false);
    // x86 faults order-0 pages: 32 written past the limit, each written once,
    // young when reclaim first found it, activated, then swapped out.
    assert!(r.pages >= 2 * CONT_PTES, "{r:?}");
    assert!(r.anon_kept >= r.folios, "each was activated before it was reclaimed: {r:?}");
    assert_eq!(r.file_kept, 0, "{r:?}");
}
