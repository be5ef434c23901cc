//! Reclaim's aging of mapped folios (`folio_check_references`,
//! `Sim::folio_referenced`): a folio found with a young PTE is kept for a
//! later pass, its young bit cleared; found young again, it is activated;
//! found with none, it is reclaimed; the active list's aging returns
//! activated folios to the inactive list. Page-cache folios
//! (`sim/file_reclaim.rs`) and anonymous ones (`sim/memcg.rs`).

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

/// Runs `sim` until CPU 0 goes idle, checks that it ran clean, and returns
/// reclaim's counts.
fn reclaim_when_idle(sim: &mut Sim) -> ReclaimStats {
    while !sim.is_lazy(0) {
        assert!(sim.step(), "cpu0 never went idle after the touches");
    }
    assert!(sim.error.is_none() && sim.oracle.violations.is_empty(), "{:?} {:?}", sim.error, sim.oracle.violations);
    sim.reclaim_stats()
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
    reclaim_when_idle(&mut sim)
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
fn an_anonymous_page_found_young_is_kept_once_then_reclaimed() {
    let r = touch_past_the_limit(false);
    // x86 faults order-0 pages: 32 written past the limit, each written once,
    // young when reclaim first found it, kept on the inactive list with
    // PG_referenced, then swapped out: never activated.
    assert!(r.pages >= 2 * CONT_PTES, "{r:?}");
    assert!(r.anon_kept >= r.folios, "each was kept before it was reclaimed: {r:?}");
    assert_eq!((r.file_kept, r.activated, r.deactivated), (0, 0, 0), "{r:?}");
}

/// Maps `hot` pages and writes them, then, `rounds` times, writes them again
/// and writes `cold` pages of a new mapping once; then sleeps on a pipe.
struct HotAndCold {
    step: u32,
    hot: u64,
    cold: u64,
    rounds: u32,
    va: u64,
}

impl Program for HotAndCold {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        let round = self.step.saturating_sub(3) / 3;
        match self.step {
            1 => Op::Sys(Sys::Mmap { pages: self.hot, write: true }),
            2 => {
                self.va = ret;
                Op::Touch { va: ret, pages: self.hot, write: true }
            }
            s if round < self.rounds => match (s - 3) % 3 {
                0 => Op::Touch { va: self.va, pages: self.hot, write: true },
                1 => Op::Sys(Sys::Mmap { pages: self.cold, write: true }),
                _ => Op::Touch { va: ret, pages: self.cold, write: true },
            },
            s if s == 3 + 3 * self.rounds => Op::Sys(Sys::Pipe),
            s if s == 4 + 3 * self.rounds => Op::Sys(Sys::PipeRead(ret as u32)),
            _ => Op::Exit,
        }
    }
}

/// Runs [`HotAndCold`] (160 hot pages, 32 cold ones a round, 24 rounds) on
/// one CPU of `machine` under a 256-page limit; returns reclaim's counts.
fn hot_and_cold(machine: &str) -> ReclaimStats {
    let cfg = SimConfig { max_mms: 4, max_events: 2_000_000, ..SimConfig::quiet(preset::named(machine), 1, 1) };
    let mut sim = if machine == "altra" {
        Sim::new(cfg, tlbkit_policy::asid::LinuxArm64::new(1, 4, 16, false).unwrap())
    } else {
        Sim::new(cfg, LinuxX86::new(1, 4, true))
    };
    sim.set_mem_limit(256);
    sim.spawn(Box::new(HotAndCold { step: 0, hot: 160, cold: 32, rounds: 24, va: 0 })).unwrap();
    reclaim_when_idle(&mut sim)
}

#[test]
fn a_page_found_young_twice_is_activated_and_the_active_lists_aging_returns_it() {
    // arm64 flushes a young PTE's entry when it clears the bit, so the hot
    // pages, written again between reclaim's looks, are found young twice and
    // activated; they outnumber the inactive list, which the active list's
    // aging refills from them. The cold pages, written once, are reclaimed.
    let r = hot_and_cold("altra");
    assert!(r.activated > 0 && r.deactivated > 0 && r.folios > 0, "{r:?}");
    assert!(r.activated >= r.deactivated, "only activated folios are aged: {r:?}");
    // x86 clears the bit without a flush: the hot pages, written again
    // through their TLB entries, stay old and are reclaimed, never activated.
    let x86 = hot_and_cold("skylake");
    assert_eq!((x86.activated, x86.deactivated), (0, 0), "{x86:?}");
    assert!(x86.folios > r.folios, "{x86:?} against {r:?}");
}

#[test]
fn a_reclaim_pass_first_drains_its_cpus_lru_add_batch() {
    // Eight pages faulted under a limit they stay well inside: they wait in
    // the CPU's batch (15 in v4.14), none yet on the LRU.
    let cfg = SimConfig { max_mms: 4, max_events: 100_000, ..SimConfig::quiet(preset::named("skylake"), 1, 1) };
    let mut sim = Sim::new(cfg, LinuxX86::new(1, 4, true));
    sim.set_mem_limit(1024);
    sim.spawn(Box::new(TouchOnce { step: 0, pages: 8, file: false })).unwrap();
    reclaim_when_idle(&mut sim);
    assert_eq!(sim.kw.lru.pending(0), 8);
    // shrink_inactive_list's lru_add_drain() moves them before it isolates.
    let now = sim.end;
    sim.shrink(0, super::memory::Lru::Memcg, false, now);
    assert_eq!(sim.kw.lru.pending(0), 0);
}
