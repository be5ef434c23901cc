//! Changes of many PTEs of one table at once, held beside the table instead
//! of written PTE by PTE, and the bitmaps that pick which PTEs they change.
//!
//! Why: from v6.0 `mprotect(PROT_WRITE)` of a private anonymous mapping makes
//! its dirty, exclusive PTEs writable again at once (`MM_CP_TRY_CHANGE_WRITABLE`,
//! `can_change_pte_writable`), so `mprotect_threaded`'s loop rewrites every
//! PTE of its buffer at every call, both ways. The kernel's time for that is
//! the simulated time `Sim::mprotect` charges; the simulator's own need not
//! grow with it. A table's patch ([`PatchHead`], in the table's dense head,
//! and its mask where that is not the whole table) records "these PTEs of
//! this table now have the write bit set (or clear) and this version", and
//! later "their floor rose to this sequence number", in a few words; the
//! table's counts and its writable bitmap as seen through it stay exact
//! ([`PageTables::run_masks`]); a PTE read through
//! [`PageTables::pte`] sees it, and anything that changes the table's PTEs
//! one by one writes it out first ([`PageTables::materialize`]). Which PTEs
//! an `mprotect` changes comes from the table's bitmaps ([`RunMasks`]) and,
//! for an upgrade's "one reference to its frame", from an [`ExclMemo`] kept
//! while no PTE of the table changed and no frame anywhere began or ended a
//! share ([`crate::frames::Frames::share_epoch`]). The simulated result is
//! the same, byte for byte, as writing every PTE: only the simulator's own
//! time and memory traffic differ (the strict matrix's digests hold it).

use super::{ChunkBits, PageTables, Pte, PteRef, P_WRITE};

/// A change of some PTEs of one table not yet written into them, in the
/// table's head (dense, read with the table's counts): the PTEs of its mask
/// (every PTE of the table when `all`, else the table's entry in
/// `PageTables::patch_masks`) have write bit `write` and version `ver`, and
/// floor `floor` (obligation `floor_obl`) where that is higher than their
/// own; none unless `on`.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct PatchHead {
    pub(super) on: bool,
    all: bool,
    write: bool,
    floor_obl: u32,
    ver: u64,
    floor: u64,
}

impl PatchHead {
    /// Returns `p`, a PTE of the patch's mask, with the patch's change.
    #[inline]
    pub(super) fn apply(&self, mut p: Pte) -> Pte {
        p.flags = if self.write { p.flags | P_WRITE } else { p.flags & !P_WRITE };
        p.ver = self.ver;
        if self.floor > p.floor {
            p.floor = self.floor;
            p.floor_obl = self.floor_obl;
        }
        p
    }
}

/// Which frames of a table's PTEs had one reference, as looked up while the
/// frames' share epoch was the table's `PageTables::excl_epoch`: `checked`
/// the PTEs looked up, `one` those with one reference.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct ExclMemo {
    checked: [u64; 8],
    one: [u64; 8],
}

/// A run's PTEs by flag, as bitmaps of its table (bit `i` of word `i / 64`
/// for PTE `i` of the table; only the run's PTEs set): what `mprotect`
/// picks the PTEs it changes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunMasks {
    /// Valid PTEs.
    pub valid: [u64; 8],
    /// Valid, writable PTEs.
    pub writable: [u64; 8],
    /// Valid PTEs with the dirty bit.
    pub dirty: [u64; 8],
    /// Valid PTEs with the contiguous bit.
    pub cont: [u64; 8],
}

/// Returns `f` applied word by word to `a` and `b`.
#[inline]
pub fn zip(a: &[u64; 8], b: &[u64; 8], f: impl Fn(u64, u64) -> u64) -> [u64; 8] {
    std::array::from_fn(|w| f(a[w], b[w]))
}

/// Returns the indices of the set bits of a table's bitmap, lowest first.
#[inline]
pub fn set_bits(bits: &[u64; 8]) -> impl Iterator<Item = usize> + '_ {
    bits.iter().enumerate().flat_map(|(w, &word)| {
        std::iter::successors((word != 0).then_some(word), |&b| (b & (b - 1) != 0).then_some(b & (b - 1)))
            .map(move |b| w * 64 + b.trailing_zeros() as usize)
    })
}

/// Returns the index of the lowest set bit of a table's bitmap, if any.
pub fn lowest_bit(bits: &[u64; 8]) -> Option<u64> {
    (0..8).find(|&w| bits[w] != 0).map(|w| (w * 64) as u64 + u64::from(bits[w].trailing_zeros()))
}

/// Returns the index of the highest set bit of a table's bitmap, if any.
pub fn highest_bit(bits: &[u64; 8]) -> Option<u64> {
    (0..8).rev().find(|&w| bits[w] != 0).map(|w| (w * 64) as u64 + 63 - u64::from(bits[w].leading_zeros()))
}

/// Returns the bits of the `n` PTEs from PTE `lo` of a table.
#[inline]
pub fn run_bits(lo: u64, n: u64) -> [u64; 8] {
    std::array::from_fn(|w| {
        let w = w as u64;
        let (from, to) = ((w * 64).max(lo), ((w + 1) * 64).min(lo + n));
        match to.saturating_sub(from) {
            0 => 0,
            64 => u64::MAX,
            width => ((1u64 << width) - 1) << (from - w * 64),
        }
    })
}

impl PageTables {
    /// Returns the flags of the `n` PTEs from `first` (all in one table) as
    /// bitmaps of their table, read from its [`ChunkBits`].
    pub fn run_masks(&mut self, first: PteRef, n: u64) -> RunMasks {
        let chunk = (first / 512) as usize;
        let lo = u64::from(first % 512);
        debug_assert!(lo + n <= 512, "a run of {n} PTEs from {first} leaves its table");
        self.recount(chunk);
        // A whole table whose PTEs all agree on each flag is told by its head
        // (dense, beside its neighbours') without its bitmaps (five lines).
        let h = self.heads[chunk];
        let uniform = |c: u16| c == 0 || c == 512;
        if n == 512 && [h.valid, h.writable, h.dirty, h.cont].into_iter().all(uniform) {
            let all = |c: u16| if c == 512 { [u64::MAX; 8] } else { [0; 8] };
            return RunMasks { valid: all(h.valid), writable: all(h.writable), dirty: all(h.dirty), cont: all(h.cont) };
        }
        let run = run_bits(lo, n);
        let writable = self.writable_shown(chunk);
        let ChunkBits { valid, dirty, cont, .. } = &self.bits[chunk];
        let and = |m: &[u64; 8]| zip(m, &run, |a, b| a & b);
        RunMasks { valid: and(valid), writable: and(&writable), dirty: and(dirty), cont: and(cont) }
    }

    /// Returns chunk `chunk`'s writable PTEs as [`PageTables::pte`] shows
    /// them: its bitmap's, with its patch's change.
    fn writable_shown(&self, chunk: usize) -> [u64; 8] {
        let (stored, h) = (&self.bits[chunk].writable, self.heads[chunk].patch);
        if !h.on {
            return *stored;
        }
        let mask = self.patch_mask(chunk);
        if h.write {
            zip(stored, &mask, |a, m| a | m)
        } else {
            zip(stored, &mask, |a, m| a & !m)
        }
    }

    /// Returns the mask of chunk `chunk`'s patch (there is one).
    #[inline]
    fn patch_mask(&self, chunk: usize) -> [u64; 8] {
        if self.heads[chunk].patch.all {
            [u64::MAX; 8]
        } else {
            self.patch_masks[chunk]
        }
    }

    /// Returns whether PTE `i` of chunk `chunk` is in its patch (there is one).
    #[inline]
    pub(super) fn in_patch(&self, chunk: usize, i: usize) -> bool {
        self.heads[chunk].patch.all || self.patch_masks[chunk][i / 64] & (1 << (i % 64)) != 0
    }

    /// Returns which of the PTEs in `pick` (bits of `table`'s PTEs, all
    /// valid) map a frame that `one(pfn)` says has one reference, the frames'
    /// share epoch being `epoch`: from the table's memo where it has them,
    /// looked up (and remembered) where not.
    pub fn one_reference(&mut self, table: PteRef, pick: &[u64; 8], epoch: u64, one: impl Fn(u64) -> bool) -> [u64; 8] {
        let chunk = (table / 512) as usize;
        if self.excl_epoch[chunk] == epoch && self.heads[chunk].excl_all {
            return *pick;
        }
        if self.excl_epoch[chunk] != epoch {
            (self.excl[chunk], self.excl_epoch[chunk]) = (ExclMemo::default(), epoch);
        }
        let mut memo = self.excl[chunk];
        for i in set_bits(&zip(pick, &memo.checked, |p, c| p & !c)) {
            if one(self.pte(table + i as PteRef).pfn) {
                memo.one[i / 64] |= 1 << (i % 64);
            }
            memo.checked[i / 64] |= 1 << (i % 64);
        }
        self.excl[chunk] = memo;
        self.heads[chunk].excl_all = memo.one == [u64::MAX; 8];
        zip(pick, &memo.one, |a, b| a & b)
    }

    /// Gives the PTEs of `table` in `mask` (all valid) the write bit `write`
    /// and version `ver`, as the table's patch: a table's PTEs patched again
    /// in the same set keep one patch; else the old one is written out first.
    pub fn patch_write(&mut self, table: PteRef, mask: [u64; 8], write: bool, ver: u64) {
        let chunk = (table / 512) as usize;
        self.recount(chunk);
        if self.heads[chunk].patch.on && !self.same_mask(chunk, &mask) {
            self.materialize(chunk);
        }
        let all = mask == [u64::MAX; 8];
        if !self.heads[chunk].patch.on {
            self.heads[chunk].patch = PatchHead { on: true, all, ..PatchHead::default() };
            if !all {
                self.patch_masks[chunk] = mask;
            }
        }
        let h = &mut self.heads[chunk].patch;
        (h.write, h.ver) = (write, ver);
        // A whole table's PTEs are all valid: all writable now, or none.
        self.heads[chunk].writable = if all {
            if write {
                512
            } else {
                0
            }
        } else {
            self.writable_shown(chunk).iter().map(|w| w.count_ones() as u16).sum()
        };
    }

    /// Raises the floor of `table`'s PTEs in `mask` to `seq` (obligation
    /// `obl`), as [`PageTables::raise_floor`] does one by one: in the table's
    /// patch when it is still the one that gave them version `seq`.
    pub fn raise_floor_mask(&mut self, table: PteRef, mask: &[u64; 8], seq: u64, obl: u32) {
        let chunk = (table / 512) as usize;
        if self.heads[chunk].patch.on && self.same_mask(chunk, mask) && self.heads[chunk].patch.ver == seq {
            let p = &mut self.heads[chunk].patch;
            if p.floor < seq {
                p.floor = seq;
                p.floor_obl = obl;
                self.max_floor = self.max_floor.max(seq);
                self.floors[chunk] = self.floors[chunk].max(seq);
            }
            return;
        }
        for i in set_bits(mask) {
            self.raise_floor(table + i as PteRef, seq, obl);
        }
    }

    /// Returns whether PTE `r` holds a change as its table's patch, not yet
    /// written into it.
    #[cfg(test)]
    pub fn patched(&self, r: PteRef) -> bool {
        let chunk = (r / 512) as usize;
        self.heads[chunk].patch.on && self.in_patch(chunk, (r % 512) as usize)
    }

    /// Returns whether chunk `chunk`'s patch (there is one) has mask `mask`.
    #[inline]
    fn same_mask(&self, chunk: usize, mask: &[u64; 8]) -> bool {
        let all = *mask == [u64::MAX; 8];
        if all || self.heads[chunk].patch.all {
            return all && self.heads[chunk].patch.all;
        }
        self.patch_masks[chunk] == *mask
    }

    /// Writes chunk `chunk`'s patch into its PTEs (and its write bits into
    /// the chunk's bitmap, which describes the PTEs as stored) and drops it.
    pub(super) fn materialize(&mut self, chunk: usize) {
        let patch = self.heads[chunk].patch;
        if !patch.on {
            return;
        }
        let mask = self.patch_mask(chunk);
        self.bits[chunk].writable = self.writable_shown(chunk);
        self.heads[chunk].patch = PatchHead::default();
        for i in set_bits(&mask) {
            let r = chunk * 512 + i;
            self.ptes[r] = patch.apply(self.ptes[r]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{P_DIRTY, P_VALID};
    use super::*;

    /// Every PTE of `base`'s table as `pte` shows it.
    fn table(pt: &PageTables, base: PteRef) -> Vec<(u16, u64, u64, u32)> {
        (base..base + 512).map(|r| pt.pte(r)).map(|p| (p.flags, p.ver, p.floor, p.floor_obl)).collect()
    }

    #[test]
    fn a_patch_reads_and_writes_out_as_the_same_changes_made_one_by_one() {
        for holes in [true, false] {
            patched_like_one_by_one(holes);
        }
    }

    /// Gives two tables the same history, one by patches, one PTE by PTE:
    /// every seventh PTE invalid (`holes`) or all valid (a whole-table patch).
    fn patched_like_one_by_one(holes: bool) {
        let (mut a, mut b) = (PageTables::default(), PageTables::default());
        let (ra, rb) = (a.new_root(), b.new_root());
        let (ta, tb) = (a.ensure_leaf(ra, 0), b.ensure_leaf(rb, 0));
        for i in 0..512 {
            let flags = if holes && i % 7 == 0 { 0 } else { P_VALID | P_WRITE | P_DIRTY };
            a.pte_mut(ta + i).flags = flags;
            b.pte_mut(tb + i).flags = flags;
        }
        a.raise_floor(ta + 3, 4, 1);
        b.raise_floor(tb + 3, 4, 1);
        // Raises the floors of `mask` to `seq` in both tables.
        let raise = |a: &mut PageTables, b: &mut PageTables, mask: &[u64; 8], seq: u64, obl: u32| {
            a.raise_floor_mask(ta, mask, seq, obl);
            for i in set_bits(mask) {
                b.raise_floor(tb + i as PteRef, seq, obl);
            }
        };
        let mut late = None;
        for (seq, round) in (10..).zip(0..6u32) {
            let write = round % 2 == 1;
            let m = a.run_masks(ta, 512);
            assert_eq!(m, b.run_masks(tb, 512), "round {round}: the bitmaps");
            let mask = if write { zip(&m.valid, &m.writable, |v, w| v & !w) } else { m.writable };
            a.patch_write(ta, mask, write, seq);
            for i in set_bits(&mask) {
                let p = b.pte_mut(tb + i as PteRef);
                p.flags ^= P_WRITE;
                p.ver = seq;
            }
            assert_eq!(table(&a, ta), table(&b, tb), "round {round}: after the change");
            // Round 2's flush returns after round 3's change: its floor is
            // raised for PTEs whose version is already round 3's.
            match round {
                2 => late = Some((mask, seq)),
                _ => raise(&mut a, &mut b, &mask, seq, round + 2),
            }
            if let (3, Some((mask, seq))) = (round, late) {
                raise(&mut a, &mut b, &mask, seq, 4);
            }
            assert_eq!(table(&a, ta), table(&b, tb), "round {round}: after the flush");
            assert_eq!((a.max_floor(), a.floor_bound(ta)), (b.max_floor(), b.floor_bound(tb)));
        }
        // A PTE written one by one writes the patch out first.
        a.pte_mut(ta + 1).flags |= P_DIRTY;
        assert_eq!(table(&a, ta), table(&b, tb));
        assert!(a.floor_obligations().eq(b.floor_obligations()));
    }

    #[test]
    fn a_memo_of_single_references_is_forgotten_when_a_pte_changes() {
        let mut pt = PageTables::default();
        let root = pt.new_root();
        let t = pt.ensure_leaf(root, 0);
        for i in 0..4 {
            let p = pt.pte_mut(t + i);
            p.flags = P_VALID;
            p.pfn = 100 + u64::from(i);
        }
        let pick = run_bits(0, 4);
        let lookups = std::cell::Cell::new(0);
        let one = |pfn: u64| {
            lookups.set(lookups.get() + 1);
            pfn.is_multiple_of(2)
        };
        assert_eq!(pt.one_reference(t, &pick, 7, one)[0], 0b0101);
        assert_eq!(pt.one_reference(t, &pick, 7, one)[0], 0b0101);
        assert_eq!(lookups.get(), 4, "the second call answered from the memo");
        pt.one_reference(t, &pick, 8, one);
        assert_eq!(lookups.get(), 8, "another epoch looks them up again");
        pt.pte_mut(t).pfn = 101;
        assert_eq!(pt.one_reference(t, &pick, 8, one)[0], 0b0100);
        assert_eq!(lookups.get(), 12, "a changed PTE looks the table up again");
    }
}
