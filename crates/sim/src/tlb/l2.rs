//! The unified L2 TLB: a set-associative array of entries, the set of an entry
//! chosen by its tag, with an LRU stamp per slot (the TLB clock's tick of the
//! slot's last fill or hit) and two mirrors (keys, ASID tags) that lookups,
//! fills and invalidations read instead of whole entries.
//!
//! The stamps of pages a sweep took as a run are kept by [`super::runs`]
//! instead (a slot's stamp then holds the run's tag): read a stamp that may be
//! in a run through [`super::runs::Runs::stamp`].

use super::entry::{TlbEntry, F_GLOBAL, NO_ASID};

/// One core's L2 TLB.
#[derive(Clone)]
pub(super) struct L2 {
    pub(super) entries: Vec<TlbEntry>,
    /// The LRU stamps: the clock's tick of each slot's last fill or hit.
    pub(super) stamps: Vec<u64>,
    /// Per slot: [`key`](super::entry::key) of its entry, or `u64::MAX` when empty.
    pub(super) keys: Vec<u64>,
    /// [`asid_tag`](super::entry::asid_tag) of each slot: an invalidation by
    /// ASID compares these, 64 at a time, instead of reading whole entries.
    pub(super) asids: Vec<u32>,
    pub(super) ways: usize,
    pub(super) sets: usize,
}

impl L2 {
    /// Returns an empty L2 of `n` entries in sets of `ways`.
    pub(super) fn new(n: usize, ways: usize) -> Self {
        L2 {
            entries: vec![TlbEntry::default(); n],
            stamps: vec![0; n],
            keys: vec![u64::MAX; n],
            asids: vec![NO_ASID; n],
            ways,
            sets: n / ways,
        }
    }

    /// Returns the range of slots of the set an entry of tag `tag` lives in.
    #[inline]
    pub(super) fn set(&self, tag: u64) -> std::ops::Range<usize> {
        let set = self.set_of(tag);
        set * self.ways..(set + 1) * self.ways
    }

    /// Returns the number of the set of tag `tag`: `tag % sets`, a mask when
    /// the sets are a power of two (every preset's), a division otherwise.
    #[inline(always)]
    pub(super) fn set_of(&self, tag: u64) -> usize {
        if self.sets.is_power_of_two() {
            (tag as usize) & (self.sets - 1)
        } else {
            (tag as usize) % self.sets
        }
    }

    /// Returns the first way (in way order, as a scan meets them) of the set
    /// starting at slot `base` that holds an entry of key `k` usable under `asid`.
    #[inline(always)]
    pub(super) fn usable(&self, base: usize, k: u64, asid: u16) -> Option<usize> {
        let set = base..base + self.ways;
        first_usable(&self.keys[set.clone()], &self.entries[set], k, asid).map(|w| base + w)
    }
}

/// Returns the first of a set's ways (its `keys` and `entries`) that holds an
/// entry of key `k` usable under `asid`, in way order, as a scan meets them.
#[inline(always)]
pub(super) fn first_usable(keys: &[u64], entries: &[TlbEntry], k: u64, asid: u16) -> Option<usize> {
    keys.iter().zip(entries).position(|(&wk, e)| wk == k && (e.flags & F_GLOBAL != 0 || e.asid == asid))
}

/// Returns the way of a set to fill: the first empty one (its key mirror
/// `keys` at `u64::MAX`), else the one of the least LRU stamp (`stamps`, the
/// set's; the first of equals).
pub(super) fn lru_victim(keys: &[u64], stamps: impl Iterator<Item = u64>) -> usize {
    let mut best = 0;
    let mut best_lru = u64::MAX;
    for (i, (&k, lru)) in keys.iter().zip(stamps).enumerate() {
        if k == u64::MAX {
            return i;
        }
        if lru < best_lru {
            best_lru = lru;
            best = i;
        }
    }
    best
}
