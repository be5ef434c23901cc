//! One core's translation caches: a fully associative L1 data TLB, a set-associative
//! unified L2 TLB and a page-walk cache, all with LRU replacement.
//!
//! Entries are tagged with an ASID and a global bit and come in three sizes: 4 KB,
//! 64 KB (a block of 16 PTEs with the contiguous bit, cached as one entry) and
//! 2 MB. A by-VA invalidation of any page a 64 KB entry covers removes it. Each
//! entry also remembers *ground truth* the policies never see: the address space
//! it was filled from (`mm_uid`, never reused) and the version of the PTE it was
//! filled from. The oracle judges every use with those.
//!
//! # What it models
//!
//! A lookup under an ASID hits the first L1 slot holding a usable entry (global,
//! or of that ASID) that covers the address, else the first such L2 way of the
//! set of the address's 4 KB tag, then 64 KB, then 2 MB; an L2 hit is copied
//! into the L1. A fill puts a walked translation into the L2 (a duplicate's
//! slot, else the set's first empty way, else its least recently used) and,
//! unless speculative, into the L1 (a duplicate's slot, else the first empty
//! one, else the least recently used). An invalidation removes what it names
//! from every level. `crates/sim/tests/tlb_reference.rs` states exactly this
//! as a plain reference TLB (a vector of entries with timestamps and a linear
//! scan) and runs random operations through both.
//!
//! # How it is built
//!
//! Everything else is there to make that fast, without changing one answer:
//! - `entry.rs`: the entry, its flags and sizes, and the *keys* (tag and size
//!   code) and *ASID tags* the other parts mirror entries by, so that a scan
//!   reads a few bytes a slot instead of whole entries.
//! - `slots.rs`: a small fully associative cache's slots: key mirror, an index
//!   by key (a bit mask of the slots per hash bucket), the empty slots, and the
//!   recency order as a linked list (the L1 and the walk cache).
//! - `l1.rs`: the L1 as a plain LRU cache on those slots.
//! - `l2.rs`: the L2's sets, its LRU stamps (the clock's ticks) and mirrors.
//! - `pwc.rs`: the page-walk cache.
//! - `summary.rs`: what the TLB may hold, said cheaply, so that an invalidation
//!   (and the interconnect, which delivers a broadcast only to TLBs that may
//!   hold what it removes, see `crate::holders`) can skip a TLB that holds
//!   nothing of it: a filter of the ASIDs non-global entries were filled under
//!   ([`Tlb::may_hold`]), exact counts per ASID bucket and per 2 MB-block
//!   bucket ([`Tlb::may_hold_block`]), and whether a 64 KB entry may be held
//!   ([`Tlb::may_hold_cont`]: until one is filled, lookups and invalidations
//!   do not probe for that size). Each only ever errs towards "may hold".
//! - `lookup.rs`, `fill.rs`, `invalidate.rs`, `cont.rs`: the operations, and the
//!   queries of 64 KB entries.
//! - `sweep.rs`: the fast path for a run of consecutive pages that miss the L1
//!   and hit the L2 (the steady state of a loop over more pages than the L1
//!   holds). It probes the L2 and moves its LRU stamps page by page as a
//!   lookup does, but defers the copies into the L1, of which only the last
//!   L1-size survive (`deferred.rs`). Copies that replace the whole L1 are
//!   settled by parking them (`parked.rs`): they are written into their slots
//!   only when something reads them, which in such a loop is seldom before
//!   the L1's next wholesale replacement.
//! - `runs.rs`: runs of pages a read sweep took page by page, with their L2
//!   slots and one number for their stamps, so that the next sweep of the
//!   same pages takes each whole.
//! - `lazy.rs`: the L1 with the copies owed or parked. It is the only way to
//!   the L1: a method gets a settled L1 (`Settled`, nothing owed or parked)
//!   from `LazyL1::settled`, the lookup and fill paths get one with nothing
//!   owed (`Unowed`, a run perhaps parked), and the run's own checks read the
//!   L1 as the run found it. So nothing outside the fast path ever sees a TLB
//!   with copies owed, by the types.
//! - `hints.rs`: prefetches and the span of host memory, which no result reads.

mod cont;
mod deferred;
mod entry;
mod fill;
mod hints;
mod invalidate;
mod l1;
mod l2;
mod lazy;
mod lookup;
mod parked;
mod pwc;
mod runs;
mod slots;
mod summary;
mod sweep;
#[cfg(test)]
mod tests;
mod thread;

/// The page-table incarnation a walk-cache entry names (the page tables are the
/// simulator's own; the TLB's users see only this handle).
pub use crate::pagetable::TableRef;
pub use entry::{thread_of, thread_va, Hit, Inval, TlbEntry, F_CONT, F_DIRTY, F_GLOBAL, F_HUGE, F_WRITE};
pub(crate) use hints::prefetch_bytes;
pub use pwc::WalkEntry;
pub use slots::MAX_L1_ENTRIES;
pub use summary::{asid_bucket, block_bucket, ASID_BUCKETS, BLOCK_BUCKETS};
pub use sweep::SweepRule;
pub use thread::ThreadTlb;

use crate::pagetable::SHIFT_2M;
use l2::L2;
use lazy::LazyL1;
use pwc::Pwc;
use runs::Runs;
use summary::Summary;

/// One core's TLBs.
#[derive(Clone)]
pub struct Tlb {
    /// The L1, behind the copies a sweep owes it ([`lazy`]).
    l1: LazyL1,
    l2: L2,
    pwc: Pwc,
    /// The TLB's clock: ticks on every lookup and fill (the L2's stamps).
    clock: u64,
    summary: Summary,
    /// Runs of pages swept before whose L2 stamps are kept as one number each.
    runs: Runs,
}

impl Tlb {
    /// Returns empty TLBs of the given geometry.
    ///
    /// # Panics
    ///
    /// If `l1` is 0 or more than [`MAX_L1_ENTRIES`], or `pwc` more than
    /// [`MAX_L1_ENTRIES`].
    pub fn new(l1: usize, l2: usize, l2_ways: usize, pwc: usize) -> Self {
        debug_assert!(l2.is_multiple_of(l2_ways));
        assert!((1..=MAX_L1_ENTRIES).contains(&l1), "an L1 TLB of {l1} entries: give 1 to {MAX_L1_ENTRIES}");
        assert!(pwc <= MAX_L1_ENTRIES, "a walk cache of {pwc} entries: give 0 to {MAX_L1_ENTRIES}");
        Tlb {
            l1: LazyL1::new(l1),
            l2: L2::new(l2, l2_ways),
            pwc: Pwc::new(pwc),
            clock: 0,
            summary: Summary::new(),
            runs: Runs::new(),
        }
    }

    /// Returns the clock's next tick.
    #[inline]
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Brings the L1 up to date: applies the copies [`Tlb::sweep`] deferred and
    /// writes out a parked run's, so that the L1, its index, recency order and
    /// the counts are what the lookups one by one would have left. Changes no
    /// answer: every method that reads the L1 sees it so.
    #[inline]
    pub fn settle(&mut self) {
        self.l1.settled(&self.l2, &mut self.summary);
    }

    /// Returns whether the walk cache holds the level-2 descriptor for `va`.
    #[inline]
    pub fn pwc_lookup(&mut self, va: u64, asid: u16, global: bool) -> bool {
        // The walk cache and the L1 share no state but the clock and the
        // counts, which owed copies change by adding: nothing to settle.
        self.tick();
        self.pwc.lookup(va, asid, global)
    }

    /// Caches the level-2 descriptor for `va`, which points at `table` of
    /// address space `mm_uid`.
    #[inline]
    pub fn pwc_fill(&mut self, va: u64, asid: u16, global: bool, table: TableRef, mm_uid: u32) {
        if self.pwc.is_empty() {
            return;
        }
        if !global {
            self.summary.note_asid(asid);
        }
        self.tick();
        self.pwc.fill(va, asid, global, table, mm_uid, &mut self.summary);
    }

    /// Returns whether a non-global entry tagged `asid` may be held (at any level).
    pub fn may_hold(&self, asid: u16) -> bool {
        self.summary.may_hold(asid)
    }

    /// Returns whether an entry (of any level, global or not) in the 2 MB block of
    /// `va` may be held. While L1 copies are owed or parked the counts still
    /// count what they evict, and every copy's L2 original counts its block: the
    /// answer only errs towards "may hold", as always.
    pub fn may_hold_block(&self, va: u64) -> bool {
        self.summary.may_hold_block(va >> SHIFT_2M)
    }

    /// Returns whether `op` may remove anything here (false: it certainly removes
    /// nothing).
    pub fn may_hold_any(&self, op: Inval) -> bool {
        match op {
            Inval::Va { asid, va } => self.may_hold(asid) && self.may_hold_block(va),
            Inval::VaAll { va } => self.may_hold_block(va),
            Inval::Asid(asid) | Inval::AsidOfThread { asid, .. } => self.may_hold(asid),
            Inval::All | Inval::AllNonGlobal | Inval::Thread { .. } => true,
        }
    }

    /// Calls `f` for every valid entry of every level: the L1's in slot order,
    /// then the L2's.
    pub fn for_each(&mut self, mut f: impl FnMut(&TlbEntry)) {
        let l1 = self.l1.settled(&self.l2, &mut self.summary);
        for e in l1.entries.iter().chain(self.l2.entries.iter()) {
            if e.valid {
                f(e);
            }
        }
    }

    /// Calls `f` for every valid walk-cache entry.
    pub fn for_each_walk(&self, f: impl FnMut(WalkEntry)) {
        self.pwc.for_each(f);
    }
}
