//! An L1 that a run's copies replaced wholly, kept as the run left it instead
//! of written out ([`Parked`]), and the writing out ([`Parked::unpark`]).

use super::entry::{key, key_block, NO_ASID};
use super::l1::L1;
use super::l2::L2;
use super::slots::{l1_bucket, MAX_L1_ENTRIES};
use super::summary::{asid_count_bucket, block_bucket, Summary};
use crate::pagetable::{SHIFT_2M, SHIFT_4K};

/// An L1 that a run's copies replaced wholly, kept as the run left it instead
/// of written out: slot `slot[k]` holds a copy of L2 slot `from[k]`, the
/// run's page `page + k - lo`, for the pending copies `k` in `lo..len` (at
/// `len` = L, the L1's size, the last copy), least recently used first.
///
/// Why it can wait: after a run of `m >= L` copies the L1 is the last `L` of
/// them, in copy order, and in a loop over more pages than the L1 holds they
/// are seldom read: what runs next (a system call, a switch) misses the L1, and
/// each of its L2 hits evicts the least recently used slot, the oldest pending
/// copy. So the slots of pending copies keep their old contents (and the
/// counts, which count what the slots hold, keep counting those), and:
/// - a lookup reads the other slots as ever, and no pending slot; a lookup of
///   a page among the pending copies writes them all out first
///   ([`Parked::unpark`]), as does a fill whose L2 victim is a pending copy's
///   original (which covers a fill that duplicates a pending copy: its victim
///   is that copy's original);
/// - a copy into the L1 takes the oldest pending copy's slot: with every slot
///   held and every slot not pending used since the run, it is the least
///   recently used (a pending slot is never free, a hit on a pending copy
///   writes them out first);
/// - a new run's victims are the pending copies' slots, oldest first, then
///   the others from least recently used;
/// - every other method that reads the L1, or the counts exactly, writes them
///   out first (it can reach the L1 only through a settled handle, see
///   [`super::lazy`]).
///
/// Written out, the pending copies take the least recent end of the recency
/// order, in copy order, before every slot used since: the L1, its index,
/// recency order and counts are then what copying them one by one would have
/// left.
///
/// (The copies' slots are behind a `Box`: they are read only while a run is
/// parked, and a CPU's state, which the event loop fetches ahead whole, stays
/// smaller.)
#[derive(Clone)]
pub(super) struct Parked {
    /// The L1 slot of copy `k`.
    pub(super) slot: Box<[u8; MAX_L1_ENTRIES]>,
    /// The L2 slot whose entry copy `k` is.
    pub(super) from: Box<[u32; MAX_L1_ENTRIES]>,
    /// The pending copies are `lo..len`.
    pub(super) lo: usize,
    pub(super) len: usize,
    /// The page number (`va >> 12`) of copy `lo`.
    pub(super) page: u64,
    /// Bit `i` set: slot `i` holds a pending copy.
    pub(super) mask: u64,
}

impl Parked {
    /// Returns a state with nothing parked.
    pub(super) fn new() -> Self {
        Parked {
            slot: Box::new([0; MAX_L1_ENTRIES]),
            from: Box::new([0; MAX_L1_ENTRIES]),
            lo: 0,
            len: 0,
            page: 0,
            mask: 0,
        }
    }

    /// Returns whether a pending copy is of page number `page`.
    #[inline(always)]
    pub(super) fn covers(&self, page: u64) -> bool {
        page.wrapping_sub(self.page) < (self.len - self.lo) as u64
    }

    /// Returns whether a pending copy is of L2 slot `i`.
    #[inline]
    pub(super) fn copies_slot(&self, i: usize) -> bool {
        self.from[self.lo..self.len].contains(&(i as u32))
    }

    /// Takes the oldest pending copy's slot for a new entry, the least recently
    /// used slot while a run is parked; returns it. Its old entry is the one
    /// the counts count, so the caller counts that out.
    #[inline]
    pub(super) fn take_oldest(&mut self) -> usize {
        let i = self.slot[self.lo] as usize;
        self.lo += 1;
        self.page += 1;
        self.mask &= !(1 << i);
        i
    }

    /// Writes the pending copies into their slots of `l1`: each slot's old
    /// entry is counted out and the copy in, and the recency order becomes the
    /// pending copies in copy order, then every other slot in its order (each
    /// was used since the run).
    #[inline(never)]
    pub(super) fn unpark(&mut self, l1: &mut L1, l2: &L2, summary: &mut Summary) {
        let count_bucket = |t: u64| asid_count_bucket(t as u32);
        let p = &*self;
        let (lo, len, pending) = (p.lo, p.len, p.mask);
        let l = l1.len();
        // The order of the slots not pending, before anything changes.
        let mut rest = [0u8; MAX_L1_ENTRIES];
        let mut n_rest = 0;
        let order = &l1.slots.order;
        let mut s = order.lru();
        while s != order.end as usize {
            if pending & (1 << s) == 0 {
                rest[n_rest] = s as u8;
                n_rest += 1;
            }
            s = order.next[s] as usize;
        }
        debug_assert_eq!(n_rest + (len - lo), l, "a slot neither pending nor in the recency order");
        let slots = &mut l1.slots;
        let (entries, l1_keys, l1_asids) = (&mut l1.entries[..l], &mut slots.keys[..l], &mut l1.asids[..l]);
        let (l2_entries, l2_keys, l2_asids) = (&l2.entries[..], &l2.keys[..], &l2.asids[..]);
        let (counts, asid_counts) = (&mut summary.blocks[..], &mut summary.asid_counts[..]);
        // Out: each pending slot's old entry, read from the key and ASID tag
        // mirrors (an empty slot's key is `u64::MAX`, its tag `NO_ASID`).
        let (mut blocks, mut asids) = (Tally::new(), Tally::new());
        for &i in &p.slot[lo..len] {
            let (k, tag) = (l1_keys[i as usize], l1_asids[i as usize]);
            if k != u64::MAX {
                slots.index[l1_bucket(k)] &= !(1 << i);
                blocks.add(key_block(k), counts, block_bucket, false);
            }
            if tag != NO_ASID {
                asids.add(tag as u64, asid_counts, count_bucket, false);
            }
        }
        blocks.flush(counts, block_bucket, false);
        asids.flush(asid_counts, count_bucket, false);
        // In: the copies, every one a valid 4 KB entry whose key and tag the
        // L2's mirrors hold, linked in copy order.
        let end = slots.order.end;
        let mut prev = end;
        for (&i, &from) in p.slot[lo..len].iter().zip(&p.from[lo..len]) {
            let (i, from) = (i as usize, from as usize);
            let (k, tag) = (l2_keys[from], l2_asids[from]);
            debug_assert!(k & 3 == 0 && k == key(&l2_entries[from]), "a pending copy of no 4 KB entry");
            l1_keys[i] = k;
            slots.index[l1_bucket(k)] |= 1 << i;
            slots.order.next[prev as usize] = i as u8;
            slots.order.prev[i] = prev;
            prev = i as u8;
            blocks.add(k >> (2 + SHIFT_2M - SHIFT_4K), counts, block_bucket, true);
            l1_asids[i] = tag;
            if tag != NO_ASID {
                asids.add(tag as u64, asid_counts, count_bucket, true);
            }
            entries[i] = l2_entries[from];
        }
        blocks.flush(counts, block_bucket, true);
        asids.flush(asid_counts, count_bucket, true);
        for &i in &rest[..n_rest] {
            slots.order.next[prev as usize] = i;
            slots.order.prev[i as usize] = prev;
            prev = i;
        }
        slots.order.next[prev as usize] = end;
        slots.order.prev[end as usize] = prev;
        slots.free &= !pending;
        self.lo = self.len;
        self.mask = 0;
    }
}

/// Changes of one sign to bucketed counts, gathered while they fall in a run of
/// one value (a block, an ASID) and applied a run at a time: the counts end as
/// the changes one by one leave them.
struct Tally {
    value: u64,
    n: u16,
}

impl Tally {
    fn new() -> Self {
        Tally { value: 0, n: 0 }
    }

    /// Counts one entry of `value` into (`up`) or out of `counts[bucket(value)]`.
    #[inline(always)]
    fn add(&mut self, value: u64, counts: &mut [u16], bucket: impl Fn(u64) -> usize, up: bool) {
        if self.n > 0 && value != self.value {
            self.flush(counts, &bucket, up);
        }
        self.value = value;
        self.n += 1;
    }

    /// Applies the run gathered so far.
    #[inline(always)]
    fn flush(&mut self, counts: &mut [u16], bucket: impl Fn(u64) -> usize, up: bool) {
        if self.n > 0 {
            let c = &mut counts[bucket(self.value)];
            if up {
                *c += self.n;
            } else {
                debug_assert!(*c >= self.n, "bucket count underflow");
                *c -= self.n;
            }
            self.n = 0;
        }
    }
}
