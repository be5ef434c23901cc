//! The L1 with the state a sweep leaves it in: copies owed ([`Deferred`]) or
//! parked ([`Parked`]). This file is the only way to the L1, so that "settle
//! before you read the L1" is a rule of the types, not of the comments.
//!
//! [`LazyL1`] keeps the plain [`L1`] in a private field. The rest of the TLB
//! reaches it only through:
//! - [`LazyL1::settled`], which applies everything owed and parked and returns
//!   [`Settled`]: the L1 the lookups one by one would have left, every slot of
//!   it readable and writable. Invalidations, the 64 KB entries' queries and
//!   [`super::Tlb::for_each`] take it.
//! - [`LazyL1::unowed`], which applies the copies owed (parking them if they
//!   replace the whole L1) and returns [`Unowed`]: an L1 that may have a run
//!   parked, whose lookups skip the pending slots and whose copies take the
//!   oldest pending slot. The lookup and fill paths take it: writing out a
//!   parked run there would cost what parking saves.
//! - The reads of `&LazyL1` ([`LazyL1::usable`], [`LazyL1::duplicate`],
//!   [`LazyL1::clear_pages`], …): the L1 as a lookup sees it, pending slots
//!   skipped; while copies are owed, the L1 as the run found it, which is what
//!   a run's next page is checked against.
//!
//! Each is as cheap as the check it replaces (a handle is a reference, and
//! settling is one compare when nothing is owed), so the hot paths cost what
//! they did when the rule was a convention.

use super::deferred::Deferred;
use super::entry::TlbEntry;
use super::l1::L1;
use super::l2::L2;
use super::parked::Parked;
use super::slots::L1_BUCKETS;
use super::summary::Summary;
use crate::host::span;
use std::ops::{Deref, DerefMut};

/// One core's L1 TLB with the copies a sweep owes it or parked in it.
#[derive(Clone)]
pub(super) struct LazyL1 {
    /// The plain L1: reachable only through [`Settled`], [`Unowed`] and the
    /// reads below, which know what is owed and parked.
    l1: L1,
    /// L1 copies of L2 hits that [`super::Tlb::sweep`] owes.
    deferred: Deferred,
    /// The copies of a run that replaced the whole L1, not yet written into it.
    parked: Parked,
}

/// The L1 with nothing owed and nothing parked: what the lookups one by one
/// would have left. Only [`LazyL1::settled`] makes one.
pub(super) struct Settled<'a> {
    l1: &'a mut L1,
}

impl Deref for Settled<'_> {
    type Target = L1;
    #[inline(always)]
    fn deref(&self) -> &L1 {
        self.l1
    }
}

impl DerefMut for Settled<'_> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut L1 {
        self.l1
    }
}

/// The L1 with no copies owed, but perhaps a run parked ([`Parked`]): a lookup
/// reads the slots that are not pending, and a copy into it takes the oldest
/// pending slot. Only [`LazyL1::unowed`] makes one.
pub(super) struct Unowed<'a> {
    l1: &'a mut L1,
    parked: &'a mut Parked,
}

/// The reads of an L1 that may have a run parked in it ([`LazyL1`] and
/// [`Unowed`] alike): lookups skip the slots the run has yet to write.
pub(super) trait ParkedReads {
    /// The L1 and the run parked in it.
    fn parts(&self) -> (&L1, &Parked);

    /// Returns the parked run, if any (`mask` 0: none).
    #[inline(always)]
    fn parked(&self) -> &Parked {
        self.parts().1
    }

    /// [`L1::usable`] outside the pending slots: the first slot a lookup
    /// under `asid` of keys `k4`, `k2` or (`CONT`) `k64` hits, as the L1 is
    /// (or, with copies owed, as the run found it).
    #[inline(always)]
    fn usable<const CONT: bool>(&self, k4: u64, k64: u64, k2: u64, asid: u16) -> Option<usize> {
        let (l1, parked) = self.parts();
        l1.usable::<CONT>(k4, k64, k2, asid, parked.mask)
    }

    /// [`L1::duplicate`] outside the pending slots.
    #[inline]
    fn duplicate(&self, e: &TlbEntry) -> Option<usize> {
        let (l1, parked) = self.parts();
        l1.duplicate(e, parked.mask)
    }
}

impl ParkedReads for LazyL1 {
    #[inline(always)]
    fn parts(&self) -> (&L1, &Parked) {
        (&self.l1, &self.parked)
    }
}

impl ParkedReads for Unowed<'_> {
    #[inline(always)]
    fn parts(&self) -> (&L1, &Parked) {
        (self.l1, self.parked)
    }
}

impl LazyL1 {
    /// Returns an empty L1 of `n` entries, owing nothing.
    pub(super) fn new(n: usize) -> Self {
        LazyL1 { l1: L1::new(n), deferred: Deferred::new(), parked: Parked::new() }
    }

    /// Returns the number of slots.
    #[inline(always)]
    pub(super) fn len(&self) -> usize {
        self.l1.len()
    }

    /// Returns whether L1 copies are owed (see [`Deferred`]).
    #[inline]
    pub(super) fn owes(&self) -> bool {
        self.deferred.n > 0
    }

    /// Returns the copies owed.
    #[inline(always)]
    pub(super) fn deferred(&self) -> &Deferred {
        &self.deferred
    }

    /// Returns the copies owed, for a sweep to owe more (it reads no slot).
    #[inline(always)]
    pub(super) fn deferred_mut(&mut self) -> &mut Deferred {
        &mut self.deferred
    }

    /// Returns whether the copies owed replace every slot: then nothing of the
    /// L1 as the run found it is left (each slot is in the victims' cycle).
    #[inline]
    pub(super) fn replaced(&self) -> bool {
        self.deferred.n >= self.l1.len()
    }

    /// Applies the copies owed, as far as the lookups and fills need: a run
    /// that replaced the whole L1 is parked.
    #[inline]
    pub(super) fn settle_run(&mut self, l2: &L2, summary: &mut Summary) {
        if self.owes() {
            self.deferred.settle(&mut self.l1, &mut self.parked, l2, summary);
        }
    }

    /// Writes a parked run's pending copies into their slots. Valid with copies
    /// owed: the pending pages counted as held by the run's checks are then
    /// held, and the pending slots stay the first of the victims' cycle.
    #[inline]
    pub(super) fn unpark(&mut self, l2: &L2, summary: &mut Summary) {
        self.parked.unpark(&mut self.l1, l2, summary);
    }

    /// Brings the L1 up to date, applying the copies owed and writing out a
    /// parked run's, and returns it: the L1, its index, recency order and
    /// `summary`'s counts are then what the lookups one by one would have left.
    #[inline]
    pub(super) fn settled(&mut self, l2: &L2, summary: &mut Summary) -> Settled<'_> {
        self.settle_run(l2, summary);
        if self.parked.mask != 0 {
            self.unpark(l2, summary);
        }
        Settled { l1: &mut self.l1 }
    }

    /// Applies the copies owed ([`LazyL1::settle_run`]) and returns the L1 as
    /// the lookups and fills use it, a run perhaps parked.
    #[inline(always)]
    pub(super) fn unowed(&mut self, l2: &L2, summary: &mut Summary) -> Unowed<'_> {
        self.settle_run(l2, summary);
        Unowed { l1: &mut self.l1, parked: &mut self.parked }
    }

    /// [`L1::clear_pages`] with the parked run's pending copies counted as held.
    #[inline(always)]
    pub(super) fn clear_pages(&self, page: u64, n: u64, asid: u16) -> u64 {
        self.l1.clear_pages(page, n, asid, &self.parked)
    }

    /// Returns the entry in slot `i`, one a lookup hit.
    #[inline]
    pub(super) fn entry(&self, i: usize) -> &TlbEntry {
        debug_assert!(!self.owes(), "the L1 read with copies owed");
        &self.l1.entries[i]
    }

    /// Returns the entries of key `k64`, a 64 KB entry's key (or
    /// [`NO_KEY`](super::entry::NO_KEY)), in slot order, without settling. A
    /// sweep defers nothing while 64 KB entries may be held. A run parked
    /// before the first 64 KB fill may still be: its pending slots' old
    /// contents hold no 64 KB entry either (none was ever filled before the
    /// run, or everything was invalidated since), and its copies are 4 KB
    /// ones, so no slot of key `k64` is stale or pending.
    pub(super) fn cont_entries(&self, k64: u64) -> impl Iterator<Item = &TlbEntry> {
        debug_assert!(k64 & 3 != 0, "not a 64 KB entry's key");
        debug_assert!(k64 & 3 == 3 || !self.owes(), "the L1 read with copies owed");
        self.l1.slots.keys.iter().zip(self.l1.entries.iter()).filter(move |(k, _)| **k == k64).map(|(_, e)| e)
    }

    /// Prefetches the lines a lookup reads first, whatever the address: the
    /// key index and keys (1.5 KB). A hint that reads nothing the simulation
    /// sees.
    #[inline]
    pub(super) fn prefetch(&self) {
        super::hints::prefetch_bytes(&*self.l1.slots.index, std::mem::size_of::<[u64; L1_BUCKETS]>());
        super::hints::prefetch_bytes(self.l1.slots.keys.as_ptr(), self.l1.slots.keys.len() * 8);
    }

    /// Returns the spans of host memory the L1 allocated (see
    /// [`super::Tlb::heap_bounds`]).
    pub(super) fn heap_spans(&self) -> [(usize, usize); 4] {
        [span(&self.l1.entries), span(&self.l1.asids), span(&self.l1.slots.keys), span(&self.l1.slots.index[..])]
    }
}

impl Unowed<'_> {
    /// Writes a parked run's pending copies out (see [`LazyL1::unpark`]).
    #[inline]
    pub(super) fn unpark(&mut self, l2: &L2, summary: &mut Summary) {
        self.parked.unpark(self.l1, l2, summary);
    }

    /// Returns (a copy of) the entry in slot `i`, which a lookup hit, and
    /// makes it the most recently used.
    #[inline(always)]
    pub(super) fn hit(&mut self, i: usize) -> TlbEntry {
        let copy = self.l1.entries[i];
        self.l1.slots.order.touch(i);
        copy
    }

    /// Puts `e` in slot `i`, one not pending ([`L1::set`]).
    #[inline]
    pub(super) fn set(&mut self, i: usize, e: TlbEntry, summary: &mut Summary) {
        debug_assert_eq!(self.parked.mask & (1 << i), 0, "a pending slot written");
        self.l1.set(i, e, summary);
    }

    /// Replaces the victim with `e`: [`Slots::victim`](super::slots::Slots::victim),
    /// or while a run is parked, its oldest pending copy's slot (see [`Parked`]).
    #[inline]
    pub(super) fn insert(&mut self, e: TlbEntry, summary: &mut Summary) {
        if self.parked.mask == 0 {
            self.l1.set(self.l1.slots.victim(), e, summary);
            return;
        }
        debug_assert_eq!(self.l1.slots.free & !self.parked.mask, 0, "an empty slot while a run is parked");
        // The slot's old entry is the one counted out, as the counts count it.
        let i = self.parked.take_oldest();
        self.l1.set(i, e, summary);
    }
}
