//! A fill of a walked translation: into the L2 (a duplicate's slot, else the
//! set's first empty way, else its least recently used) and, unless
//! speculative, the L1; or, for a run's next page, into the copies owed.

use super::entry::{asid_tag, key, key_block, TlbEntry, F_SIZE};
use super::l2::lru_victim;
use super::lazy::ParkedReads;
use super::Tlb;

impl Tlb {
    /// Fills a walked translation into the L2 and, unless `speculative`, the L1.
    #[inline]
    pub fn fill(&mut self, mut e: TlbEntry, speculative: bool) {
        // Settling reads the L2 and changes none of it: the victim stays.
        let (victim, in_run) = self.l2_victim(&e);
        if in_run {
            self.leave_runs_of_fill(&e, victim);
        }
        if self.l1.owes() && !self.fill_keeps_run(&e, speculative, victim) {
            self.l1.settle_run(&self.l2, &mut self.summary);
        }
        // A parked run's copy of the victim is written out before the L2
        // entry goes. (A pending copy that duplicates `e`, which the L1 would
        // replace in place, is one: its original in the L2 duplicates `e`
        // too, and a fill's victim is its duplicate first.)
        if self.l1.parked().mask != 0 && self.l1.parked().copies_slot(victim) {
            self.l1.unpark(&self.l2, &mut self.summary);
        }
        // Copies still owed now: this fill's own L1 copy joins them.
        let joins_run = self.l1.owes() && !speculative;
        let now = self.tick();
        if !e.global() {
            self.summary.note_asid(e.asid);
        }
        if e.cont() {
            self.summary.conts = true;
        }
        e.valid = true;
        let l2 = &mut self.l2;
        l2.stamps[victim] = now;
        // What the victim held is counted out from the mirrors, which name it
        // exactly: an empty slot (the usual victim of a page filled again after
        // its invalidation) reads neither its entry nor its ASID tag, lines a
        // large machine's TLBs have long had evicted from the host's cache; the
        // stores below need not wait for them.
        let old_key = l2.keys[victim];
        debug_assert_eq!(old_key != u64::MAX, l2.entries[victim].valid);
        if old_key != u64::MAX {
            debug_assert_eq!(key_block(old_key), l2.entries[victim].block());
            self.summary.count_block(key_block(old_key), false);
            self.summary.count_asid(l2.asids[victim], false);
        }
        self.summary.count_block(e.block(), true);
        self.summary.count_asid(asid_tag(&e), true);
        l2.entries[victim] = e;
        l2.keys[victim] = key(&e);
        l2.asids[victim] = asid_tag(&e);
        if joins_run {
            self.l1.deferred_mut().owe(victim, e.tag + 1);
        } else if !speculative {
            let mut l1 = self.l1.unowed(&self.l2, &mut self.summary);
            match l1.duplicate(&e) {
                Some(i) => l1.set(i, e, &mut self.summary),
                None => l1.insert(e, &mut self.summary),
            }
        }
    }

    /// Returns the L2 slot a fill of `e` takes: a duplicate of the same
    /// translation first, then the set's LRU way. The key mirror names exactly
    /// the valid entries of a tag and size, so only a slot of the same key has
    /// its entry read.
    /// Also returns whether a slot of the set is in a run ([`super::runs::Runs`]).
    #[inline(always)]
    fn l2_victim(&self, e: &TlbEntry) -> (usize, bool) {
        let l2 = &self.l2;
        let base = l2.set_of(e.tag) * l2.ways;
        let set = base..base + l2.ways;
        let k = key(e);
        let same = l2.keys[set.clone()].iter().zip(&l2.entries[set.clone()]).position(|(&wk, w)| {
            wk == k && w.flags & F_SIZE == e.flags & F_SIZE && w.asid == e.asid && w.global() == e.global()
        });
        let in_run = self.runs.any_in(&l2.stamps[set.clone()]);
        let victim = base
            + same.unwrap_or_else(|| {
                if in_run {
                    lru_victim(&l2.keys[set.clone()], set.clone().map(|i| self.runs.stamp(i, l2)))
                } else {
                    lru_victim(&l2.keys[set.clone()], l2.stamps[set.clone()].iter().copied())
                }
            });
        (victim, in_run)
    }

    /// Returns whether a fill of `e` leaves the L1 copies owed as they are: a
    /// fill of no 64 KB entry that is speculative (it fills the L2 alone) or
    /// the walked translation of the run's next page (its L1 copy joins the
    /// run's: the L1 as the run found it holds no duplicate to replace, and the
    /// victim cycle goes on), whose L2 victim is not the original of a copy
    /// that survives. `victim`: that L2 slot ([`Tlb::l2_victim`]). (A parked
    /// run's pending copy of the page counts as a duplicate, as in
    /// [`Tlb::lookup_in_run`].)
    fn fill_keeps_run(&self, e: &TlbEntry, speculative: bool, victim: usize) -> bool {
        if e.cont() {
            return false;
        }
        if !speculative {
            let dup = !self.l1.replaced() && (self.l1.duplicate(e).is_some() || self.l1.parked().covers(e.tag));
            if e.flags & F_SIZE != 0 || !self.continues_run(e.tag, e.asid) || dup {
                return false;
            }
        }
        !self.l1.deferred().owed_from(victim, self.l1.len())
    }
}
