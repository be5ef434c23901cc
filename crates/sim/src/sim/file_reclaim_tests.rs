//! Reclaim's aging of mapped page-cache folios (`folio_check_references`,
//! `sim/file_reclaim.rs`): a folio found with a young PTE is kept for a later
//! pass, its young bit cleared; found again with none, it is reclaimed.

use super::*;
use crate::preset;
use tlbkit_policy::asid::LinuxX86;

/// Maps `pages` pages of file 0 shared and read-only, reads each once, then
/// sleeps on a pipe nobody writes.
struct ReadFile {
    step: u32,
    pages: u64,
}

impl Program for ReadFile {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        match self.step {
            1 => Op::Sys(Sys::MmapFile { file: 0, pages: self.pages, write: false, private: false }),
            2 => Op::Touch { va: ret, pages: self.pages, write: false },
            3 => Op::Sys(Sys::Pipe),
            4 => Op::Sys(Sys::PipeRead(ret as u32)),
            _ => Op::Exit,
        }
    }
}

#[test]
fn a_mapped_folio_found_young_is_kept_once_then_reclaimed() {
    let cfg = SimConfig { max_mms: 4, max_events: 100_000, ..SimConfig::quiet(preset::named("skylake"), 1, 1) };
    let mut sim = Sim::new(cfg, LinuxX86::new(1, 4, true));
    // Two 64 KB folios of room: reading the third and the fourth reclaims.
    sim.set_mem_limit(2 * CONT_PTES);
    sim.set_file_charge();
    sim.spawn(Box::new(ReadFile { step: 0, pages: 4 * CONT_PTES })).unwrap();
    while !sim.is_lazy(0) {
        assert!(sim.step(), "cpu0 never went idle after the reads");
    }
    assert!(sim.error.is_none() && sim.oracle.violations.is_empty(), "{:?} {:?}", sim.error, sim.oracle.violations);
    let r = sim.reclaim_stats();
    // Every folio reclaimed was still mapped, read once: young when reclaim
    // first found it, kept, and reclaimed when found again with no young PTE.
    assert_eq!(r.file_folios, 2, "{r:?}");
    assert_eq!(r.file_unmaps, 2 * CONT_PTES, "{r:?}");
    assert!(r.file_kept >= r.file_folios, "each was kept before it was reclaimed: {r:?}");
}
