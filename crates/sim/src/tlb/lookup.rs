//! A lookup: the L1, then the L2 by page size (4 KB, 64 KB, 2 MB), an L2 hit
//! copied into the L1; and the lookup of a run's next page, which joins the
//! copies owed instead of settling them.

use super::entry::{block_key, Hit, TlbEntry, NO_KEY};
use super::l2::L2;
use super::lazy::{ParkedReads, Unowed};
use super::runs::Runs;
use super::summary::Summary;
use super::Tlb;
use crate::pagetable::{SHIFT_2M, SHIFT_4K, SHIFT_64K};

impl Tlb {
    /// Looks `va` up under `asid`; an L2 hit is copied into the L1.
    #[inline]
    pub fn lookup(&mut self, va: u64, asid: u16) -> Option<Hit> {
        self.lookup_entry(va, asid).map(|(h, _)| h)
    }

    /// [`Tlb::lookup`], also returning (a copy of) the entry hit, as
    /// [`Tlb::entry`] would after it. (Inlined into its one caller on the
    /// simulator's path, `Sim::access`.)
    #[inline(always)]
    pub fn lookup_entry(&mut self, va: u64, asid: u16) -> Option<(Hit, TlbEntry)> {
        if self.l1.owes() {
            if let Some(r) = self.lookup_in_run(va, asid) {
                return r;
            }
        }
        let mut l1 = self.l1.unowed(&self.l2, &mut self.summary);
        if l1.parked().covers(va >> SHIFT_4K) {
            l1.unpark(&self.l2, &mut self.summary);
        }
        // (The clock's tick, by hand: the handle holds the L1.)
        self.clock += 1;
        let now = self.clock;
        // Without 64 KB entries the lookup compares two keys, as it always did.
        if self.summary.conts {
            lookup_sized::<true>(l1, &mut self.l2, &mut self.runs, &mut self.summary, now, va, asid)
        } else {
            lookup_sized::<false>(l1, &mut self.l2, &mut self.runs, &mut self.summary, now, va, asid)
        }
    }

    /// Returns the entry a hit refers to.
    #[inline]
    pub fn entry(&self, hit: Hit) -> &TlbEntry {
        match hit {
            Hit::L1(i) => self.l1.entry(i),
            Hit::L2(i) => {
                debug_assert!(!self.l1.owes(), "the L1 read with copies owed");
                &self.l2.entries[i]
            }
        }
    }

    /// [`Tlb::lookup_entry`] of the page after a run whose L1 copies are owed,
    /// where it can answer without settling them; `None` where it cannot (a
    /// page the L1 held when the run began, a 2 MB entry to copy, another
    /// page or ASID). A 4 KB hit in the L2 is owed to the L1 like the run's.
    fn lookup_in_run(&mut self, va: u64, asid: u16) -> Option<Option<(Hit, TlbEntry)>> {
        let page = va >> SHIFT_4K;
        if !self.continues_run(page, asid) {
            return None;
        }
        let (k4, k2) = (page << 2, block_key(page));
        // The L1 as the run found it, while some of it is left: the run's
        // copies are of other pages. (A parked run's pending copy of the page
        // counts as held. The run's own copies, which evict the pending ones
        // first and oldest first, have in fact always evicted it by the time
        // the run reaches it; the check costs little and assumes none of that.)
        if !self.l1.replaced()
            && (self.l1.usable::<false>(k4, NO_KEY, k2, asid).is_some() || self.l1.parked().covers(page))
        {
            return None;
        }
        if let Some(i) = self.l2.usable(self.l2.set(page).start, k4, asid) {
            let now = self.tick();
            self.runs.leave(i, &mut self.l2.stamps);
            self.l2.stamps[i] = now;
            self.l1.deferred_mut().owe(i, page + 1);
            return Some(Some((Hit::L2(i), self.l2.entries[i])));
        }
        if self.l2.usable(self.l2.set(va >> SHIFT_2M).start, k2, asid).is_some() {
            return None;
        }
        self.tick();
        Some(None)
    }
}

/// [`Tlb::lookup_entry`] at tick `now` once nothing is owed; `CONT`: whether a
/// 64 KB entry may be held.
#[inline(always)]
fn lookup_sized<const CONT: bool>(
    mut l1: Unowed<'_>,
    l2: &mut L2,
    runs: &mut Runs,
    summary: &mut Summary,
    now: u64,
    va: u64,
    asid: u16,
) -> Option<(Hit, TlbEntry)> {
    let k4 = (va >> SHIFT_4K) << 2;
    let k64 = if CONT { ((va >> SHIFT_64K) << 2) | 1 } else { NO_KEY };
    let k2 = ((va >> SHIFT_2M) << 2) | 2;
    if let Some(i) = l1.usable::<CONT>(k4, k64, k2, asid) {
        return Some((Hit::L1(i), l1.hit(i)));
    }
    let probes = [(SHIFT_4K, k4), (SHIFT_64K, k64), (SHIFT_2M, k2)];
    for (shift, k) in probes {
        if !CONT && shift == SHIFT_64K {
            continue;
        }
        if let Some(i) = l2.usable(l2.set(va >> shift).start, k, asid) {
            let copy = l2.entries[i];
            runs.leave(i, &mut l2.stamps);
            l2.stamps[i] = now;
            l1.insert(copy, summary);
            return Some((Hit::L2(i), copy));
        }
    }
    None
}
