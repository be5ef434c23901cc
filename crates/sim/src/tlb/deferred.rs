//! The L1 copies a sweep owes ([`Deferred`]) and how they are settled: the
//! last L1-size of them written into the victims' cycle, or, when they
//! replace the whole L1, parked ([`super::parked`]).

use super::l1::L1;
use super::l2::L2;
use super::parked::Parked;
use super::slots::MAX_L1_ENTRIES;
use super::summary::Summary;

/// The L1 copies [`Tlb::sweep`] owes: the L2 slots it hit, in order, for a run
/// of consecutive 4 KB pages under one ASID, none of which the L1 held.
///
/// Why they can wait: a lookup that misses the L1 and hits the L2 copies the
/// entry into the L1's victim, and the victims of `L` such copies in a row (`L`
/// the L1's size) are a fixed cycle: the empty slots in increasing order, then
/// the held slots from least recently used (each copy moves its slot to the
/// most recent end, so after the cycle the order starts again). Of `m` copies
/// only the last `min(m, L)` survive, and copy `j` lands in slot `cycle[j % L]`;
/// an entry a copy evicts was not one the run's pages needed (the run checks
/// every page against the L1 as it was, until its copies have replaced every
/// slot and nothing of that L1 is left, and its own copies are of other pages).
/// Nothing else reads the L1 while copies are owed: the L1 is reachable only
/// through [`LazyL1`](super::lazy::LazyL1), whose handles settle them first,
/// but for a lookup of the run's next page and the fill of its walked
/// translation, which add their copy to them (both see the L1 as the run found
/// it, which holds nothing of that page). The L2 entries they name do not
/// change before: an invalidation settles first, and a fill whose L2 victim is
/// the original of a copy that survives does too. The walk cache shares only
/// the clock and the counts with the L1, and copies change the counts by
/// adding, so its lookups and fills let them wait. So the TLB that settling
/// leaves is the one the lookups one by one would have left, entries, recency
/// order, key index and counts alike. (The lookups and fills themselves settle
/// by [`LazyL1::settle_run`](super::lazy::LazyL1::settle_run), which parks `L`
/// copies or more instead of writing them: see [`Parked`].)
///
/// [`Tlb::sweep`]: super::Tlb::sweep
#[derive(Clone)]
pub(super) struct Deferred {
    /// The L2 slot of copy `j`, at `j % MAX_L1_ENTRIES` (the last `L` are kept).
    pub(super) slots: [u32; MAX_L1_ENTRIES],
    /// Copies owed.
    pub(super) n: usize,
    /// The ASID the run translates under.
    pub(super) asid: u16,
    /// The 4 KB page number the run's next page would be (`va >> 12`).
    pub(super) next_page: u64,
}

impl Deferred {
    /// Returns a state that owes nothing.
    pub(super) fn new() -> Self {
        Deferred { slots: [0; MAX_L1_ENTRIES], n: 0, asid: 0, next_page: 0 }
    }

    /// Owes the L1 a copy of L2 slot `i`, the run's page before `next_page`.
    #[inline]
    pub(super) fn owe(&mut self, i: usize, next_page: u64) {
        self.slots[self.n % MAX_L1_ENTRIES] = i as u32;
        self.n += 1;
        self.next_page = next_page;
    }

    /// Returns whether L2 slot `i` holds the original of an owed copy that
    /// survives (one of the last `l`, the L1's size).
    pub(super) fn owed_from(&self, i: usize, l: usize) -> bool {
        let n = self.n;
        (n.saturating_sub(l)..n).any(|j| self.slots[j % MAX_L1_ENTRIES] as usize == i)
    }

    /// Settles the copies owed (at least one) into `l1`: of the `m` owed the
    /// last `min(m, L)` survive, copy `j` in slot `cycle[j % L]`. Fewer than
    /// `L` are copied in order, so that the recency order ends as the copies
    /// one by one leave it; `L` or more are parked in `parked`.
    #[inline(never)]
    pub(super) fn settle(&mut self, l1: &mut L1, parked: &mut Parked, l2: &L2, summary: &mut Summary) {
        let m = self.n;
        self.n = 0;
        let l = l1.len();
        if m < l && parked.mask != 0 {
            parked.unpark(l1, l2, summary);
        }
        // The cycle of victims (as far as the copies reach into it): the empty
        // slots in increasing order, then the held ones from least recently
        // used, a parked run's pending copies first.
        let want = m.min(l);
        let mut cycle = [0u8; MAX_L1_ENTRIES];
        let mut k = 0;
        let pending = parked.mask;
        let free = l1.slots.free & !pending;
        let mut f = free;
        while f != 0 && k < want {
            cycle[k] = f.trailing_zeros() as u8;
            k += 1;
            f &= f - 1;
        }
        let p = &*parked;
        let held = (p.len - p.lo).min(want - k);
        cycle[k..k + held].copy_from_slice(&p.slot[p.lo..p.lo + held]);
        k += held;
        let order = &l1.slots.order;
        if want == l {
            // Every slot: the rest are all held and not pending, so found as
            // well from the most recent end, where a parked run's are (each
            // was used since it parked), and the list's order restored.
            let mut s = order.prev[order.end as usize] as usize;
            let mut j = l;
            while j > k {
                if (free | pending) & (1 << s) == 0 {
                    j -= 1;
                    cycle[j] = s as u8;
                }
                s = order.prev[s] as usize;
            }
        } else {
            let mut s = order.lru();
            while k < want {
                if (free | pending) & (1 << s) == 0 {
                    cycle[k] = s as u8;
                    k += 1;
                }
                s = order.next[s] as usize;
            }
        }
        if m < l {
            for (j, &i) in cycle[..m].iter().enumerate() {
                let e = l2.entries[self.slots[j] as usize];
                l1.set(i as usize, e, summary);
            }
            return;
        }
        // Park the last `L` copies, oldest first: nothing of the L1 is left
        // (a parked run's pending copies go with the rest).
        // Copy `j` (of `m - l..m`) is slot `cycle[j % l]` and the ring's
        // `j % MAX_L1_ENTRIES`: both rotations.
        let p = parked;
        let r = m % l;
        p.slot[..l - r].copy_from_slice(&cycle[r..l]);
        p.slot[l - r..l].copy_from_slice(&cycle[..r]);
        let ring = &self.slots;
        let r = (m - l) % MAX_L1_ENTRIES;
        let wrap = (MAX_L1_ENTRIES - r).min(l);
        p.from[..wrap].copy_from_slice(&ring[r..r + wrap]);
        p.from[wrap..l].copy_from_slice(&ring[..l - wrap]);
        p.lo = 0;
        p.len = l;
        p.page = self.next_page - l as u64;
        p.mask = u64::MAX >> (64 - l);
    }
}
