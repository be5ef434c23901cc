//! The L1 data TLB as a plain LRU cache: a fully associative array of entries
//! beside its [`Slots`] (key mirror, index by key, empty slots, recency order)
//! and a mirror of their ASID tags. A lookup takes the first slot, in slot
//! order, that holds a usable entry covering the address; a fill takes a
//! duplicate's slot, else the first empty one, else the least recently used.
//!
//! The one `L1` a [`super::Tlb`] has lives in [`super::lazy::LazyL1`], behind
//! the copies a sweep may owe it: only a settled handle or the lazy state's own
//! methods reach it. The methods that read slots take `pending`, a mask of
//! slots whose contents are stale (a parked run's, see [`super::parked`]):
//! they skip those.

use super::entry::{asid_tag, block_key, equal_mask, key, key_block, Inval, TlbEntry, F_GLOBAL, NO_ASID};
use super::parked::Parked;
use super::slots::{Slots, MAX_L1_ENTRIES};
use super::summary::{block_bucket, Summary};
use crate::pagetable::{SHIFT_2M, SHIFT_4K};

/// The fewest pages [`L1::clear_pages`] checks by one pass over the held
/// slots rather than a probe of the key index for each page: a probe costs
/// about a tenth of a pass over a full 48-entry L1.
pub(super) const L1_SCAN_MIN: u64 = 12;

/// Returns a mask of the `n` lowest bits (`n` at most 64).
#[inline(always)]
fn low_bits(n: usize) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1 << n) - 1
    }
}

/// One core's L1 data TLB.
#[derive(Clone)]
pub(super) struct L1 {
    pub(super) entries: Vec<TlbEntry>,
    /// The entries' keys ([`key`]), their index, the free slots and recency order.
    pub(super) slots: Slots,
    /// [`asid_tag`] of each slot: an invalidation by ASID compares these, 64 at
    /// a time, instead of reading whole entries.
    pub(super) asids: Vec<u32>,
}

impl L1 {
    /// Returns an empty L1 of `n` entries.
    pub(super) fn new(n: usize) -> Self {
        L1 { entries: vec![TlbEntry::default(); n], slots: Slots::new(n), asids: vec![NO_ASID; n] }
    }

    /// Returns the number of slots.
    #[inline(always)]
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Returns the first slot outside `pending` (in slot order, as a scan meets
    /// them) that holds an entry usable under `asid` whose key is `k4`, `k2` or
    /// (`CONT`) `k64`.
    #[inline(always)]
    pub(super) fn usable<const CONT: bool>(
        &self,
        k4: u64,
        k64: u64,
        k2: u64,
        asid: u16,
        pending: u64,
    ) -> Option<usize> {
        let mut m = self.slots.candidates(k4) | self.slots.candidates(k2);
        if CONT {
            m |= self.slots.candidates(k64);
        }
        m &= !pending;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let k = self.slots.keys[i];
            if k == k4 || k == k2 || (CONT && k == k64) {
                let e = &self.entries[i];
                if e.flags & F_GLOBAL != 0 || e.asid == asid {
                    return Some(i);
                }
            }
        }
        None
    }

    /// Returns whether a slot outside `pending` holds an entry of key `k`
    /// usable under `asid`.
    #[inline(always)]
    pub(super) fn holds(&self, k: u64, asid: u16, pending: u64) -> bool {
        let mut m = self.slots.candidates(k) & !pending;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let e = &self.entries[i];
            if self.slots.keys[i] == k && (e.flags & F_GLOBAL != 0 || e.asid == asid) {
                return true;
            }
        }
        false
    }

    /// Returns the slot outside `pending` holding a duplicate of `e` (its key,
    /// ASID and globalness), which a fill of `e` replaces in place. The key
    /// mirror matches exactly the valid entries of the same tag and size.
    #[inline]
    pub(super) fn duplicate(&self, e: &TlbEntry, pending: u64) -> Option<usize> {
        let k = key(e);
        let mut m = self.slots.candidates(k) & !pending;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            if self.slots.keys[i] == k && self.entries[i].asid == e.asid && self.entries[i].global() == e.global() {
                return Some(i);
            }
        }
        None
    }

    /// Puts `e` in slot `i` and makes it the most recently used, keeping the
    /// mirrors, the index and `summary`'s counts in step.
    pub(super) fn set(&mut self, i: usize, e: TlbEntry, summary: &mut Summary) {
        // The old entry's key and block from the key mirror (`u64::MAX`: empty).
        let (old, new) = (self.slots.keys[i], if e.valid { key(&e) } else { u64::MAX });
        // An entry replaced by one of the same 2 MB block leaves the counts as they are.
        let (old_block, new_block) = (key_block(old), key_block(new));
        if !(old != u64::MAX && new != u64::MAX && old_block == new_block) {
            if old != u64::MAX {
                summary.count_block(old_block, false);
            }
            if new != u64::MAX {
                summary.count_block(new_block, true);
            }
        }
        self.slots.set_key(i, new);
        let (old_tag, tag) = (self.asids[i], asid_tag(&e));
        if old_tag != tag {
            summary.count_asid(old_tag, false);
            summary.count_asid(tag, true);
            self.asids[i] = tag;
        }
        self.slots.order.touch(i);
        self.entries[i] = e;
    }

    /// Removes what `op` names; returns how many entries went. `keys`: for an
    /// operation by VA, the keys of the entries that could cover its address
    /// ([`super::entry::keys_of`]); `CONT`: whether a 64 KB entry may be held.
    /// An emptied slot keeps its place in the recency order.
    #[inline]
    pub(super) fn invalidate<const CONT: bool>(
        &mut self,
        op: Inval,
        keys: Option<(u64, u64, u64)>,
        summary: &mut Summary,
    ) -> usize {
        let mut n = 0;
        let other = |k: u64, (k4, k64, k2): (u64, u64, u64)| k != k4 && k != k2 && (!CONT || k != k64);
        // By VA only the slots the index names for those keys can hold one.
        let mut m = match keys {
            Some((k4, k64, k2)) => {
                let m = self.slots.candidates(k4) | self.slots.candidates(k2);
                if CONT {
                    m | self.slots.candidates(k64)
                } else {
                    m
                }
            }
            // By ASID only the slots whose tag mirror names it.
            None => match op {
                Inval::Asid(a) | Inval::AsidOfThread { asid: a, .. } => equal_mask(&self.asids, a as u32),
                _ => u64::MAX >> (64 - self.len()),
            },
        };
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            if keys.is_some_and(|ks| other(self.slots.keys[i], ks)) {
                continue;
            }
            let e = &mut self.entries[i];
            if e.valid && op.removes(e) {
                e.valid = false;
                let b = block_bucket(e.block());
                summary.blocks[b] -= 1;
                self.slots.set_key(i, u64::MAX);
                summary.count_asid(self.asids[i], false);
                self.asids[i] = NO_ASID;
                n += 1;
            }
        }
        n
    }

    /// Returns how many of the `n` pages (at most [`MAX_L1_ENTRIES`]) from page
    /// number `page` the L1 holds nothing of, as a sweep sees it: the pages
    /// before the first that a slot outside `parked`'s pending copies holds
    /// usable under `asid` (a 4 KB entry of the page, a 2 MB entry of its
    /// block) or that is among the pending copies. One pass over the held
    /// slots, where a probe of the key index for every page and block cost
    /// about 34 host instructions a page. (No 64 KB entry may be held: a sweep
    /// translates nothing while one may be.)
    #[inline(always)]
    pub(super) fn clear_pages(&self, page: u64, n: u64, asid: u16, parked: &Parked) -> u64 {
        debug_assert!(n <= MAX_L1_ENTRIES as u64);
        // A few pages are probed one by one in the key index, as a lookup does.
        if n < L1_SCAN_MIN {
            let holds = |k: u64| self.holds(k, asid, parked.mask);
            let mut block_end = page;
            for p in page..page + n {
                if p == block_end {
                    if holds(block_key(p)) {
                        return p - page;
                    }
                    block_end = ((p >> (SHIFT_2M - SHIFT_4K)) + 1) << (SHIFT_2M - SHIFT_4K);
                }
                if holds(p << 2) || parked.covers(p) {
                    return p - page;
                }
            }
            return n;
        }
        // Bit `j`: page `page + j` is held (no bit at `n` or above).
        let pages_from = |first: u64, count: u64| -> u64 {
            // The window's bits for pages `first..first + count`.
            let lo = first.max(page);
            let hi = (first + count).min(page + n);
            if lo >= hi {
                return 0;
            }
            low_bits((hi - lo) as usize) << (lo - page)
        };
        let mut held = pages_from(parked.page, (parked.len - parked.lo) as u64);
        let mut slots = !self.slots.free & !parked.mask & low_bits(self.len());
        while slots != 0 {
            let i = slots.trailing_zeros() as usize;
            slots &= slots - 1;
            // Usable under `asid`: global, or of `asid` (by the tag mirror, a
            // few lines where the entries are thirty).
            let k = self.slots.keys[i];
            let tag = self.asids[i];
            if tag != NO_ASID && tag != asid as u32 {
                continue;
            }
            held |= match k & 3 {
                0 => {
                    let off = (k >> 2).wrapping_sub(page);
                    if off < n {
                        1 << off
                    } else {
                        0
                    }
                }
                2 => pages_from((k >> 2) << (SHIFT_2M - SHIFT_4K), 1 << (SHIFT_2M - SHIFT_4K)),
                _ => 0,
            };
        }
        held.trailing_zeros().min(n as u32) as u64
    }
}
