//! Tearing down contiguous mappings at exit: the four strategies of origin 004
//! (Ryan Roberts, "[PATCH v2 14/14] arm64/mm: Add ptep_get_and_clear_full() to
//! optimize process teardown" and its thread, December 2023) and the core mm's
//! `zap_pte_range` loop that drives each.
//!
//! # The strategies
//! - [`Teardown::NoOpt`]: the contpte series without an exit optimisation. The
//!   generic `ptep_get_and_clear_full` is `ptep_get_and_clear`, which unfolds a
//!   contiguous block before clearing its first PTE: 16 exchanges, a 64 KB range
//!   TLBI and 16 writes per block, then 16 plain clears.
//! - [`Teardown::Simple`]: v2 as posted. With `full` set, a contiguous PTE is only
//!   exchanged with 0 and its *own* access/dirty bits returned; the rest of the
//!   block keeps its contiguous bit until the core mm reaches it, and the whole mm
//!   is flushed once at the end. The patch's reasoning: the core mm marks the
//!   folio dirty, and the hardware's bit sits in *some* PTE of the block, so it
//!   reaches the folio once all 16 are cleared. But the value returned for one PTE
//!   does not carry the block's state as `ptep_get` reported it a moment earlier
//!   ("does not fully conform to its intended semantic").
//! - [`Teardown::Robust`]: the attempt in the thread. Exchange with 0; if the PTE
//!   had neither bit, return it with the bits of the block's remaining valid PTEs
//!   gathered (`contpte_ptep_get`); otherwise stash its bits into the highest
//!   not-yet-cleared PTE of the block (scanning down from the last, with
//!   `__ptep_set_access_flags_notlbi`'s compare-and-exchange loop against the
//!   hardware) and return them gathered with the block's. No TLBI either; O(n²)
//!   reads per block, as the thread says.
//! - [`Teardown::ClearPtes`]: v3 of the series (December 2023), the version origin
//!   004 measured. The core mm batches the PTEs that map consecutive pages of one
//!   large folio (`folio_nr_pages_cont_mapped`, one gathering `ptep_get` per PTE;
//!   v6.9's `folio_pte_batch` later skips whole blocks with `pte_batch_hint`) and
//!   clears each batch with
//!   `get_and_clear_full_ptes`, which unfolds only blocks the batch covers in part
//!   and returns the first PTE with every cleared PTE's access/dirty bits ORed in.
//!
//! # The contract the returned value should meet
//! The value returned for a PTE carries the access/dirty state of its block as
//! [`ptep_get`] would have reported it for that PTE at that moment. `NoOpt`,
//! `Robust` and `ClearPtes` meet it (`ClearPtes` for the batch); `Simple` does not:
//! when hardware recorded a write to one page in another PTE of the block, the page
//! is reported clean (the test `simple_reports_a_page_of_a_dirty_block_clean`).
//! At folio granularity, which is what Linux's `folio_mark_dirty` uses, `Simple`
//! loses nothing: the PTE holding the bit is cleared too, and returns it. An
//! oracle that judges each page's report finds the loss; one that judges folios
//! does not.
//!
//! # What is not modelled
//! - Linux consults the returned access/dirty bits only for file-backed folios (an
//!   anonymous folio is freed, dirty or not) and uses `clear_full_ptes` for
//!   anonymous ones; that is the same sequence of memory accesses, so
//!   [`teardown_range`] always returns the bits and the caller decides.
//! - `zap_pte_range`'s `need_resched` breaks, rmap and rss accounting, swap
//!   entries, markers, uffd-wp: none touches a present PTE.
//! - v3's cap of a batch at what the `mmu_gather` can still queue
//!   (`tlb_get_guaranteed_space`): while a dirty file page's rmap removal is
//!   delayed no next gather batch is allocated, so a batch can end inside a block,
//!   which `ClearPtes` then unfolds. There are no gather batches here.

use super::ops::{gather_block, get_and_clear_full_ptes, ptep_get, ptep_get_and_clear, set_access_flags_notlbi};
use super::{block_start, try_unfold, Folio, PteMem, PteVal, CONT_PTES};
use crate::types::{MmId, VirtAddr};
use alloc::string::{String, ToString};
use core::fmt;

/// How the arm64 arch layer clears contiguous PTEs when an address space is torn
/// down (`--set teardown=...`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Teardown {
    /// Unfold every block before clearing it: a 64 KB range TLBI per block.
    NoOpt,
    /// Clear each PTE alone, returning only its own access/dirty bits (v2).
    Simple,
    /// Clear each PTE alone, carrying its access/dirty bits to a not-yet-cleared
    /// sibling and returning the block's (the thread's robust attempt).
    Robust,
    /// Clear whole per-folio batches, returning their access/dirty bits ORed (v3, December 2023).
    ClearPtes,
}

impl Teardown {
    /// Every strategy, in the order of the origin's table.
    pub const ALL: [Teardown; 4] = [Teardown::NoOpt, Teardown::Simple, Teardown::Robust, Teardown::ClearPtes];

    /// Returns the name a parameter selects this strategy by.
    pub const fn name(self) -> &'static str {
        match self {
            Teardown::NoOpt => "noopt",
            Teardown::Simple => "simple",
            Teardown::Robust => "robust",
            Teardown::ClearPtes => "clear_ptes",
        }
    }

    /// Returns the strategy called `name`, or an error listing the valid names.
    pub fn from_name(name: &str) -> Result<Teardown, UnknownTeardown> {
        Teardown::ALL.into_iter().find(|t| t.name() == name).ok_or_else(|| UnknownTeardown(name.to_string()))
    }

    /// Returns whether the core mm zaps per folio batch (with
    /// `get_and_clear_full_ptes`) rather than one PTE at a time (the kernels the
    /// other three strategies were measured on).
    pub const fn batched(self) -> bool {
        matches!(self, Teardown::ClearPtes)
    }
}

impl fmt::Display for Teardown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The error for a teardown name that is not one of [`Teardown::ALL`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownTeardown(pub String);

impl fmt::Display for UnknownTeardown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown teardown '{}'; valid teardowns: ", self.0)?;
        for (i, t) in Teardown::ALL.into_iter().enumerate() {
            write!(f, "{}{}", if i == 0 { "" } else { ", " }, t.name())?;
        }
        Ok(())
    }
}

/// The flush a teardown leaves owed: every TLB entry of `mm` must be invalidated
/// (Linux `tlb_finish_mmu`; arm64 flushes the whole ASID because the tables are
/// freed too) before the frames it mapped are freed. Every strategy leaves it
/// owed: even `NoOpt` clears PTEs after its unfolds without a TLBI.
#[must_use = "the torn-down address space must be flushed before its frames are freed"]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmFlushOwed {
    /// The address space to flush.
    pub mm: MmId,
}

/// Clears the PTE at `va` and returns it as `strategy`'s `ptep_get_and_clear_full`
/// does (`full`: the whole address space is being torn down, `tlb->fullmm`).
///
/// `NoOpt` and `ClearPtes` use the generic version, which is
/// [`ptep_get_and_clear`] whatever `full` says. `Simple` and `Robust` unfold
/// unless `full`, and with `full` clear a contiguous PTE without unfolding (see
/// the module documentation for what each returns).
pub fn ptep_get_and_clear_full<M: PteMem>(
    strategy: Teardown,
    mem: &mut M,
    mm: MmId,
    va: VirtAddr,
    full: bool,
) -> PteVal {
    match strategy {
        Teardown::NoOpt | Teardown::ClearPtes => ptep_get_and_clear(mem, mm, va),
        Teardown::Simple | Teardown::Robust => {
            let orig = mem.get(mm, va);
            if !orig.valid_cont() || !full {
                try_unfold(mem, mm, va, orig);
                mem.get_and_clear(mm, va)
            } else if strategy == Teardown::Simple {
                // contpte_ptep_get_and_clear_full, v2: just the exchange.
                mem.get_and_clear(mm, va)
            } else {
                get_and_clear_full_robust(mem, mm, va)
            }
        }
    }
}

/// The robust `contpte_ptep_get_and_clear_full` of the origin's thread.
fn get_and_clear_full_robust<M: PteMem>(mem: &mut M, mm: MmId, va: VirtAddr) -> PteVal {
    let orig = mem.get_and_clear(mm, va);
    let (dirty, young) = (orig.dirty(), orig.young());
    if !dirty && !young {
        return gather_block(mem, mm, va, orig);
    }
    // Stash the bits in the highest PTE still valid: the core mm clears upwards,
    // so they are not dragged through every PTE, and a clean PTE can return early.
    let start = block_start(va);
    for i in (0..CONT_PTES).rev() {
        let sibling = start.add_pages(i);
        let mut pte = mem.get(mm, sibling);
        if !pte.valid() {
            continue;
        }
        if dirty {
            pte = pte.mkdirty();
        }
        if young {
            pte = pte.mkyoung();
        }
        set_access_flags_notlbi(mem, mm, sibling, pte);
        return gather_block(mem, mm, sibling, orig);
    }
    orig
}

/// Returns how many PTEs from `va`, at most `max_nr`, map consecutive pages of
/// `folio` (`folio_nr_pages_cont_mapped` of the series origin 004 measured, v3 of
/// December 2023, patch "mm: Batch-clear PTE ranges during zap_pte_range()"):
/// after the first, it reads every PTE with [`ptep_get`] and stops at the first
/// that is not valid or does not map the next frame, or at the folio's end. On a
/// contiguous block each of those reads gathers all 16 PTEs; `pte_batch_hint`,
/// which lets v6.9's `folio_pte_batch` read one PTE per block, came later.
fn folio_nr_pages_cont_mapped<M: PteMem>(
    mem: &mut M,
    mm: MmId,
    folio: Folio,
    va: VirtAddr,
    pte: PteVal,
    max_nr: u64,
) -> u64 {
    let floops = max_nr.min(folio.pfn + folio.pages - pte.pfn);
    let mut i = 1;
    while i < floops {
        let next = ptep_get(mem, mm, va.add_pages(i));
        if !next.valid() || next.pfn != pte.pfn + i {
            break;
        }
        i += 1;
    }
    i
}

/// Tears down the `pages` PTEs of `mm` from `start` as `strategy` does when the
/// address space exits (`zap_pte_range` with `tlb->fullmm`), calling `report` with
/// each cleared page and the value the arch layer returned for it (the core mm
/// marks a file folio dirty or accessed from it), and returns the mm flush that
/// is still owed.
///
/// `folio_of(pfn)` is `vm_normal_page` + `page_folio`: the folio of a mapped frame,
/// `None` for a special mapping. Only `ClearPtes` consults it.
///
/// The loop, per present PTE (`ptep_get` first, as the core mm always reads the
/// PTE before deciding what to do with it):
/// - `NoOpt`, `Simple`, `Robust` (`zap_pte_range` before v6.9): one
///   [`ptep_get_and_clear_full`] per PTE.
/// - `ClearPtes` (`zap_pte_range` of the series' v3): for a large folio, the batch
///   `folio_nr_pages_cont_mapped` finds, cleared with [`get_and_clear_full_ptes`]; each page
///   of the batch is reported with the batch's value (frame advanced). A special
///   mapping or a small folio is cleared alone, with [`ptep_get_and_clear`].
///
/// Per fully mapped contiguous block this makes, in [`PteMem`] calls: `NoOpt` 48
/// reads, 32 exchanges, 16 writes and one 16-page range flush; `Simple` 288 reads
/// and 16 exchanges; `Robust` 16 exchanges and, when no PTE is young or dirty,
/// 544 reads; `ClearPtes` 272 reads (a gathering `ptep_get` of 17 reads per PTE)
/// and 16 exchanges. Only `NoOpt` flushes during the teardown.
pub fn teardown_range<M, F, R>(
    strategy: Teardown,
    mem: &mut M,
    mm: MmId,
    start: VirtAddr,
    pages: u64,
    mut folio_of: F,
    mut report: R,
) -> MmFlushOwed
where
    M: PteMem,
    F: FnMut(u64) -> Option<Folio>,
    R: FnMut(VirtAddr, PteVal),
{
    let end = start.add_pages(pages);
    let mut va = start;
    while va < end {
        let ptent = ptep_get(mem, mm, va);
        let mut nr = 1;
        if !ptent.valid() {
            // pte_none: nothing mapped (swap entries and markers are not modelled).
        } else if !strategy.batched() {
            let pte = ptep_get_and_clear_full(strategy, mem, mm, va, true);
            report(va, pte);
        } else {
            let max_nr = (end.0 - va.0) / VirtAddr::PAGE_SIZE;
            match folio_of(ptent.pfn) {
                None => report(va, ptep_get_and_clear(mem, mm, va)),
                Some(folio) => {
                    if folio.is_large() && max_nr != 1 {
                        nr = folio_nr_pages_cont_mapped(mem, mm, folio, va, ptent, max_nr);
                    }
                    let pte = get_and_clear_full_ptes(mem, mm, va, nr);
                    for i in 0..nr {
                        report(va.add_pages(i), pte.advance_pfn(i));
                    }
                }
            }
        }
        va = va.add_pages(nr);
    }
    MmFlushOwed { mm }
}

#[cfg(test)]
mod tests {
    use super::super::testmem::{va, Act, Call, Kind, TestMem, B, C, D, MM, PFN, VW, Y};
    use super::*;
    use std::string::ToString;
    use std::vec;
    use std::vec::Vec;

    /// Tears down `pages` pages from `B` in `mem` with folios of `folio_pages` pages
    /// aligned on frame numbers; returns what was reported, as (page, value).
    fn zap(strategy: Teardown, mem: &mut TestMem, pages: u64, folio_pages: u64) -> Vec<(u64, PteVal)> {
        let mut reported = Vec::new();
        let folio_of = |pfn: u64| Some(Folio { pfn: pfn - pfn % folio_pages, pages: folio_pages });
        let owed = teardown_range(strategy, mem, MM, va(B), pages, folio_of, |v, pte| {
            reported.push((v.0 / VirtAddr::PAGE_SIZE, pte));
        });
        assert_eq!(owed, MmFlushOwed { mm: MM });
        reported
    }

    /// Returns, page by page, whether the teardown reported it dirty.
    fn dirty(reported: &[(u64, PteVal)]) -> Vec<bool> {
        reported.iter().map(|(_, p)| p.dirty()).collect()
    }

    #[test]
    fn names_round_trip_and_unknown_ones_list_the_valid_ones() {
        for t in Teardown::ALL {
            assert_eq!(Teardown::from_name(t.name()), Ok(t));
            assert_eq!(t.to_string(), t.name());
        }
        let err = Teardown::from_name("clear-ptes").unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown teardown 'clear-ptes'; valid teardowns: noopt, simple, robust, clear_ptes"
        );
    }

    #[test]
    fn only_noopt_flushes_during_teardown_one_range_tlbi_per_block() {
        for t in Teardown::ALL {
            let mut mem = TestMem::new();
            for b in 0..4 {
                mem.put_block(B + 16 * b, PFN + 16 * b, VW | Y);
            }
            let reported = zap(t, &mut mem, 64, 64);
            let flushes: Vec<Call> = mem.log.iter().copied().filter(|c| c.kind() == Kind::Flush).collect();
            let want: Vec<Call> =
                if t == Teardown::NoOpt { (0..4).map(|b| Call::Flush(B + 16 * b, 16)).collect() } else { vec![] };
            assert_eq!(flushes, want, "{t}");
            assert_eq!(reported.iter().map(|r| r.0).collect::<Vec<_>>(), (B..B + 64).collect::<Vec<_>>(), "{t}");
            assert!(reported.iter().all(|(p, pte)| pte.pfn == PFN + (p - B) && pte.young()), "{t}: {reported:?}");
            assert!(mem.ptes(B..B + 64).iter().all(|p| p.none()), "{t}");
        }
    }

    #[test]
    fn memory_accesses_per_block() {
        // (reads, exchanges, writes, compare-and-exchanges, flushes) for one clean, old block.
        let want = [(48, 32, 16, 0, 1), (288, 16, 0, 0, 0), (544, 16, 0, 0, 0), (272, 16, 0, 0, 0)];
        for (t, want) in Teardown::ALL.into_iter().zip(want) {
            let mut mem = TestMem::new();
            mem.put_block(B, PFN, VW);
            zap(t, &mut mem, 16, 16);
            let got = [Kind::Get, Kind::Clear, Kind::Set, Kind::Cmpxchg, Kind::Flush].map(|k| mem.count(k));
            assert_eq!(got, [want.0, want.1, want.2, want.3, want.4], "{t}");
        }
        // Robust with every PTE young (the core mm maps pages young): a stash attempt per PTE
        // that finds the bit already there, so no exchange, but 2 more reads.
        let mut mem = TestMem::new();
        mem.put_block(B, PFN, VW | Y);
        zap(Teardown::Robust, &mut mem, 16, 16);
        assert_eq!((mem.count(Kind::Get), mem.count(Kind::Cmpxchg)), (15 * 36 + 34, 0));
    }

    #[test]
    fn robust_makes_every_access_simple_makes_and_neither_flushes() {
        // Origin 004 has simple dearer than robust on two NUMA nodes (+29% against +19%). With
        // `full`, simple's accesses are a subsequence of robust's whatever the block's state:
        // the same exchanges in the same order, a subset of the reads, no store, no flush. So
        // no charge per kind of access (local or remote, one node or two) ranks simple above
        // robust (docs/costs/altra.md section 7).
        let subsequence = |small: &[Call], big: &[Call]| {
            let mut rest = big.iter();
            small.iter().all(|c| rest.any(|b| b == c))
        };
        for flags in [VW, VW | Y, VW | Y | D] {
            for dirty_at in [None, Some(0), Some(9), Some(15)] {
                let setup = || {
                    let mut mem = TestMem::new();
                    mem.put_block(B, PFN, flags);
                    if let Some(i) = dirty_at {
                        mem.put(MM, B + i, PteVal::new(PFN + i, flags | D | C));
                    }
                    mem
                };
                let (mut simple, mut robust) = (setup(), setup());
                zap(Teardown::Simple, &mut simple, 16, 16);
                zap(Teardown::Robust, &mut robust, 16, 16);
                let case = format!("flags {flags:#x}, dirty PTE {dirty_at:?}");
                assert!(subsequence(&simple.log, &robust.log), "{case}");
                let clears =
                    |m: &TestMem| m.log.iter().copied().filter(|c| c.kind() == Kind::Clear).collect::<Vec<_>>();
                assert_eq!(clears(&simple), clears(&robust), "{case}");
                for m in [&simple, &robust] {
                    assert_eq!((m.count(Kind::Set), m.count(Kind::Flush)), (0, 0), "{case}");
                }
                assert!(robust.count(Kind::Get) > simple.count(Kind::Get), "{case}");
            }
        }
    }

    #[test]
    fn clear_ptes_batches_a_whole_folio_reading_every_pte_with_a_gathering_ptep_get() {
        let mut mem = TestMem::new();
        for b in 0..4 {
            mem.put_block(B + 16 * b, PFN + 16 * b, VW);
        }
        zap(Teardown::ClearPtes, &mut mem, 64, 64);
        // The zap loop's ptep_get of page 0, then one per further page of the folio,
        // each gathering its block: 64 x 17.
        assert_eq!(mem.count(Kind::Get), 64 * 17, "one gathering ptep_get per PTE");
        assert_eq!(mem.writes(), (0..64).map(|i| Call::Clear(B + i)).collect::<Vec<_>>());
        // Folios of one block each: the batch stops at the folio's end without reading on.
        let mut mem = TestMem::new();
        for b in 0..4 {
            mem.put_block(B + 16 * b, PFN + 16 * b, VW);
        }
        zap(Teardown::ClearPtes, &mut mem, 64, 16);
        assert_eq!(mem.count(Kind::Get), 4 * 16 * 17);
        assert_eq!(mem.writes(), (0..64).map(|i| Call::Clear(B + i)).collect::<Vec<_>>());
    }

    #[test]
    fn clear_ptes_unfolds_a_block_the_range_covers_in_part() {
        let mut mem = TestMem::new();
        mem.put_block(B, PFN, VW);
        mem.put_block(B + 16, PFN + 16, VW);
        let reported = zap(Teardown::ClearPtes, &mut mem, 20, 32);
        assert_eq!(reported.len(), 20);
        let flushes: Vec<Call> = mem.log.iter().copied().filter(|c| c.kind() == Kind::Flush).collect();
        assert_eq!(flushes, vec![Call::Flush(B + 16, 16)]);
        let rest: Vec<PteVal> = (20..32).map(|i| PteVal::new(PFN + i, VW)).collect();
        assert_eq!(mem.ptes(B + 20..B + 32), rest, "the rest of block 1 stays mapped, without the contiguous bit");
    }

    #[test]
    fn clear_ptes_handles_holes_small_folios_and_special_mappings() {
        let mut mem = TestMem::new();
        mem.put_block(B, PFN, VW);
        mem.put(MM, B + 17, PteVal::new(0x500, VW | D));
        mem.put(MM, B + 18, PteVal::new(0x600, VW | Y));
        let mut reported = Vec::new();
        let folio_of = |pfn: u64| match pfn {
            0x500 => Some(Folio { pfn, pages: 1 }),
            0x600 => None,
            _ => Some(Folio { pfn: PFN, pages: 16 }),
        };
        let _ = teardown_range(Teardown::ClearPtes, &mut mem, MM, va(B), 19, folio_of, |v, pte| {
            reported.push((v.0 / VirtAddr::PAGE_SIZE, pte));
        });
        let pages: Vec<u64> = reported.iter().map(|r| r.0).collect();
        assert_eq!(pages, (B..B + 16).chain([B + 17, B + 18]).collect::<Vec<_>>());
        assert_eq!(reported[16].1, PteVal::new(0x500, VW | D));
        assert_eq!(reported[17].1, PteVal::new(0x600, VW | Y));
        assert_eq!(mem.count(Kind::Flush), 0);
    }

    #[test]
    fn simple_reports_a_page_of_a_dirty_block_clean() {
        // A write to page 3 made hardware set the dirty state in PTE 9 of the block; the
        // block is old (Robust's clean path) or young (its stash path, every PTE).
        for young in [0, Y] {
            let setup = || {
                let mut mem = TestMem::new();
                mem.put_block(B, PFN, VW | young);
                mem.put(MM, B + 9, PteVal::new(PFN + 9, VW | young | D | C));
                mem
            };
            let mut mem = setup();
            assert!(ptep_get(&mut mem, MM, va(B + 3)).dirty(), "what the core mm reads just before clearing page 3");
            let simple = zap(Teardown::Simple, &mut setup(), 16, 16);
            let want: Vec<bool> = (0..16).map(|i| i == 9).collect();
            assert_eq!(dirty(&simple), want, "only the PTE hardware happened to pick is reported dirty");
            for t in [Teardown::NoOpt, Teardown::Robust, Teardown::ClearPtes] {
                assert_eq!(dirty(&zap(t, &mut setup(), 16, 16)), vec![true; 16], "{t}, young {young}");
            }
        }
    }

    #[test]
    fn a_dirty_bit_hardware_sets_midway_reaches_every_page_cleared_after_it() {
        // Pages 0..=5 are cleared, then a write makes hardware dirty PTE 12 (still valid).
        let run = |t: Teardown| {
            let mut mem = TestMem::new();
            mem.put_block(B, PFN, VW | Y);
            mem.after(Kind::Clear, 6, Act::Hw { page: B + 12, bits: D });
            let reported = zap(t, &mut mem, 16, 16);
            assert_eq!(mem.hw_dropped, 0, "{t}: PTE 12 was valid");
            dirty(&reported)
        };
        assert_eq!(run(Teardown::Simple), (0..16).map(|i| i == 12).collect::<Vec<_>>());
        // Robust: pages 0..=4 were returned while the block was clean, so clean is what
        // ptep_get said then. Page 5 was exchanged before the write but, clean itself,
        // returns the block gathered afterwards: it and every later page carry the bit.
        assert_eq!(run(Teardown::Robust), (0..16).map(|i| i >= 5).collect::<Vec<_>>());
        // ClearPtes returns one value for the batch, which ORs in PTE 12.
        assert_eq!(run(Teardown::ClearPtes), vec![true; 16]);
        // NoOpt's unfold is still clearing (6 of 16) when hardware sets it: gathered into all 16.
        assert_eq!(run(Teardown::NoOpt), vec![true; 16]);
    }

    #[test]
    fn robust_carries_the_bit_to_the_last_valid_pte_and_survives_a_racing_update() {
        let mut mem = TestMem::new();
        mem.put_block(B, PFN, VW);
        mem.put(MM, B, PteVal::new(PFN, VW | D | C));
        // Page 0: 17 reads by the zap loop's ptep_get, 1 by the wrapper, the exchange, then
        // the stash reads PTE 15 twice; hardware marks PTE 15 young before the exchange.
        mem.after(Kind::Get, 20, Act::Hw { page: B + 15, bits: Y });
        let reported = zap(Teardown::Robust, &mut mem, 16, 16);
        let xchgs: Vec<Call> = mem.log.iter().copied().filter(|c| c.kind() == Kind::Cmpxchg).collect();
        assert_eq!(xchgs, vec![Call::Cmpxchg(B + 15, false), Call::Cmpxchg(B + 15, true)]);
        assert!(reported.iter().all(|(_, p)| p.dirty() && p.young()), "{reported:?}");
        assert_eq!(reported[15].1, PteVal::new(PFN + 15, VW | Y | D | C));
    }

    #[test]
    fn without_full_simple_and_robust_unfold_like_noopt() {
        for t in [Teardown::Simple, Teardown::Robust] {
            let mut mem = TestMem::new();
            mem.put_block(B, PFN, VW);
            mem.put(MM, B + 9, PteVal::new(PFN + 9, VW | D | C));
            assert_eq!(ptep_get_and_clear_full(t, &mut mem, MM, va(B + 2), false), PteVal::new(PFN + 2, VW | D), "{t}");
            assert_eq!(mem.count(Kind::Flush), 1, "{t}");
        }
    }
}
