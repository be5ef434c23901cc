//! The queries and updates of 64 KB (contiguous) entries that the simulator's
//! contiguous-PTE paths make: which are held, their dirty state, and the
//! entries of the other size that overlap one (a TLB conflict).

use super::entry::{TlbEntry, F_DIRTY, F_HUGE, F_SIZE, NO_KEY};
use super::Tlb;
use crate::pagetable::{CONT_PTES, SHIFT_4K, SHIFT_64K};

impl Tlb {
    /// Returns whether a 64 KB entry may be held.
    #[inline]
    pub fn may_hold_cont(&self) -> bool {
        self.summary.conts
    }

    /// Returns the valid 64 KB entries usable under `asid` that cover `va` (in the
    /// L1 and the L2; an L1 entry is usually a copy of an L2 one), without
    /// touching LRU state.
    pub fn cont_entries(&self, va: u64, asid: u16) -> impl Iterator<Item = &TlbEntry> {
        let k64 = if self.summary.conts { ((va >> SHIFT_64K) << 2) | 1 } else { NO_KEY };
        let l1 = self.l1.cont_entries(k64);
        let set = if k64 == NO_KEY { 0..0 } else { self.l2.set(va >> SHIFT_64K) };
        let l2 = set.filter(move |&i| self.l2.keys[i] == k64).map(|i| &self.l2.entries[i]);
        l1.chain(l2).filter(move |e| e.usable_under(asid))
    }

    /// Records that the 64 KB entries covering `va` under `asid` have written
    /// (see [`F_DIRTY`]).
    pub fn set_cont_dirty(&mut self, va: u64, asid: u16) {
        let mut l1 = self.l1.settled(&self.l2, &mut self.summary);
        let k64 = ((va >> SHIFT_64K) << 2) | 1;
        for i in 0..l1.len() {
            if l1.slots.keys[i] == k64 && l1.entries[i].usable_under(asid) {
                l1.entries[i].flags |= F_DIRTY;
            }
        }
        for i in self.l2.set(va >> SHIFT_64K) {
            if self.l2.keys[i] == k64 && self.l2.entries[i].usable_under(asid) {
                self.l2.entries[i].flags |= F_DIRTY;
            }
        }
    }

    /// Returns an entry held that overlaps `e` with the other page size, under the
    /// same tag (a 4 KB one inside the 64 KB `e`, or a 64 KB one covering the 4 KB
    /// `e`): what the Arm ARM calls a TLB conflict. Only 4 KB and 64 KB entries
    /// are compared, and a 4 KB `e` only while a 64 KB entry may be held.
    pub fn overlap(&mut self, e: &TlbEntry) -> Option<TlbEntry> {
        let l1 = self.l1.settled(&self.l2, &mut self.summary);
        if e.flags & F_HUGE != 0 || !(self.summary.conts || e.cont()) {
            return None;
        }
        let same_tag = |w: &TlbEntry| w.valid && w.global() == e.global() && (e.global() || w.asid == e.asid);
        let l2 = &self.l2;
        if e.cont() {
            let hit = |w: &TlbEntry| same_tag(w) && w.flags & F_SIZE == 0 && w.tag >> (SHIFT_64K - SHIFT_4K) == e.tag;
            let in_l1 = l1.entries.iter().find(|w| hit(w));
            let first = e.tag << (SHIFT_64K - SHIFT_4K);
            let mut in_l2 = (first..first + CONT_PTES).flat_map(|t| l2.set(t)).map(|i| &l2.entries[i]);
            in_l1.or_else(|| in_l2.find(|w| hit(w))).copied()
        } else {
            let va = e.va();
            let hit = |w: &&TlbEntry| same_tag(w) && w.cont() && w.tag == va >> SHIFT_64K;
            let in_l1 = l1.entries.iter().find(hit);
            in_l1.or_else(|| l2.set(va >> SHIFT_64K).map(|i| &l2.entries[i]).find(hit)).copied()
        }
    }
}
