//! A CPU's store buffer: the plain stores it made that other CPUs (and the
//! page-table walkers) do not see yet.
//!
//! Under `--memory tso` the buffer is x86's: a FIFO, so a store leaves it only
//! with every older one ([`Buffer::with_older`] is a prefix). Under `--memory
//! arm` it is as weak as Armv8 lets two stores of one CPU be: a store may become
//! visible before an older one (`MP` with plain stores shows `1, 0`), and is held
//! back only by what Arm's ordered-before puts before it among stores: an older
//! store to an overlapping location (coherence), and, for a store-release
//! (`STLR`: a Rust `Release` or `SeqCst` store), every older store (`[L]` is
//! ordered after everything before it). Barriers (`DMB`, `DSB`, a `Release`,
//! `AcqRel` or `SeqCst` fence) drain the whole buffer where they are, which
//! orders every older store before every later access.

use std::collections::VecDeque;
use tlbkit_policy::sync::check::Width;

/// One buffered store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Stored {
    /// Its address (a policy field, or a PTE store's stand-in address).
    pub addr: usize,
    /// Its width.
    pub w: Width,
    /// The value it writes.
    pub v: u64,
    /// Whether it is a store-release: it leaves only after every older store.
    pub release: bool,
}

impl Stored {
    /// Returns whether the two stores' bytes overlap.
    fn overlaps(&self, other: &Stored) -> bool {
        let end = |s: &Stored| s.addr.saturating_add(bytes(s.w));
        self.addr < end(other) && other.addr < end(self)
    }
}

/// Returns the bytes a store of width `w` writes.
fn bytes(w: Width) -> usize {
    match w {
        Width::W8 => 1,
        Width::W16 => 2,
        Width::W32 => 4,
        Width::W64 => 8,
    }
}

/// A CPU's store buffer, oldest store first.
#[derive(Clone, Debug, Default)]
pub(super) struct Buffer {
    entries: VecDeque<Stored>,
}

/// Which stores leave a buffer together, as a bit per position (oldest bit 0).
pub(super) type Leaving = u64;

impl Buffer {
    /// Adds a store as the newest.
    pub fn push(&mut self, s: Stored) {
        self.entries.push_back(s);
    }

    /// Returns whether no store waits.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The stores, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Stored> {
        self.entries.iter()
    }

    /// Returns the value the CPU's own load of `addr` reads from its buffer
    /// (the newest store there), if any.
    pub fn forward(&self, addr: usize) -> Option<u64> {
        self.entries.iter().rev().find(|e| e.addr == addr).map(|e| e.v)
    }

    /// Returns the stores that leave with the one at position `k`: it and every
    /// store that must be visible before it. FIFO (`fifo`): every older store.
    /// Otherwise Armv8's order among one CPU's stores (the module's text), closed
    /// under itself: an older store to a location one of them writes, and every
    /// store older than a store-release among them. Past the 64th position the
    /// buffer leaves as a FIFO, and from the 63rd the whole buffer leaves (a
    /// buffer that long has never been seen).
    pub fn with_older(&self, k: usize, fifo: bool) -> Leaving {
        let prefix = |k: usize| if k >= 62 { Leaving::MAX } else { (1u64 << (k + 1)) - 1 };
        if fifo || k >= 62 {
            return prefix(k);
        }
        let mut set: Leaving = 1 << k;
        let mut all_older = self.entries[k].release;
        for j in (0..k).rev() {
            let e = &self.entries[j];
            if all_older {
                return set | prefix(j);
            }
            if self.entries.iter().take(k + 1).enumerate().any(|(i, s)| set & 1 << i != 0 && s.overlaps(e)) {
                set |= 1 << j;
                all_older = e.release;
            }
        }
        set
    }

    /// Returns the stores a load-acquire (`LDAR`: a Rust `Acquire` or `SeqCst`
    /// load or read-modify-write) waits for under Armv8: the newest
    /// store-release and everything older (a load-acquire is ordered after an
    /// earlier store-release), or nothing.
    pub fn before_acquire(&self) -> Leaving {
        match self.entries.iter().rposition(|e| e.release) {
            Some(r) => self.with_older(r, false),
            None => 0,
        }
    }

    /// Returns the stores a read-modify-write of `addr` (width `w`) waits for:
    /// those to an overlapping location, with what leaves with them.
    pub fn before_rmw(&self, addr: usize, w: Width) -> Leaving {
        let me = Stored { addr, w, v: 0, release: false };
        (0..self.entries.len())
            .filter(|&i| self.entries[i].overlaps(&me))
            .fold(0, |set, i| set | self.with_older(i, false))
    }

    /// Removes and returns the oldest store in `leaving`, taking it out of the
    /// set (whose later positions move down with the buffer). [`Leaving::MAX`]
    /// is every store, however many.
    pub fn take_oldest(&mut self, leaving: &mut Leaving) -> Option<Stored> {
        if *leaving == Leaving::MAX {
            return self.entries.pop_front();
        }
        if *leaving == 0 {
            return None;
        }
        let i = leaving.trailing_zeros() as usize;
        let s = self.entries.remove(i)?;
        *leaving = *leaving >> (i + 1) << i;
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffer(stores: &[(usize, bool)]) -> Buffer {
        let mut b = Buffer::default();
        for &(addr, release) in stores {
            b.push(Stored { addr, w: Width::W64, v: 1, release });
        }
        b
    }

    #[test]
    fn a_fifo_store_leaves_with_every_older_one() {
        let b = buffer(&[(0, false), (8, false), (16, false)]);
        assert_eq!(b.with_older(2, true), 0b111);
        assert_eq!(b.with_older(0, true), 0b001);
    }

    #[test]
    fn an_arm_store_leaves_alone_unless_an_older_store_shares_its_location() {
        let b = buffer(&[(0, false), (8, false), (0, false), (24, false)]);
        assert_eq!(b.with_older(1, false), 0b0010);
        assert_eq!(b.with_older(2, false), 0b0101);
        assert_eq!(b.with_older(3, false), 0b1000);
    }

    #[test]
    fn a_release_leaves_after_every_older_store_and_a_later_store_may_pass_it() {
        let b = buffer(&[(0, false), (8, true), (16, false)]);
        assert_eq!(b.with_older(1, false), 0b011);
        assert_eq!(b.with_older(2, false), 0b100);
        // What leaves with an older store to the same location brings a release's
        // older stores with it.
        let b = buffer(&[(0, false), (8, true), (16, false), (8, false)]);
        assert_eq!(b.with_older(3, false), 0b1011);
    }

    #[test]
    fn overlapping_widths_are_one_location() {
        let mut b = Buffer::default();
        b.push(Stored { addr: 4, w: Width::W32, v: 1, release: false });
        b.push(Stored { addr: 0, w: Width::W64, v: 2, release: false });
        b.push(Stored { addr: 8, w: Width::W8, v: 3, release: false });
        assert_eq!(b.with_older(1, false), 0b011);
        assert_eq!(b.with_older(2, false), 0b100);
        assert_eq!(b.before_rmw(6, Width::W16), 0b011);
    }

    #[test]
    fn an_acquire_waits_for_the_newest_release_and_what_is_older() {
        assert_eq!(buffer(&[(0, false), (8, false)]).before_acquire(), 0);
        assert_eq!(buffer(&[(0, false), (8, true), (16, false)]).before_acquire(), 0b011);
    }

    #[test]
    fn taking_a_set_keeps_the_others_in_order() {
        let mut b = buffer(&[(0, false), (8, false), (16, false), (24, false)]);
        let mut all = Leaving::MAX;
        assert_eq!(b.clone().take_oldest(&mut all).map(|s| s.addr), Some(0));
        let mut set = 0b1010;
        assert_eq!(b.take_oldest(&mut set).map(|s| s.addr), Some(8));
        assert_eq!(b.take_oldest(&mut set).map(|s| s.addr), Some(24));
        assert_eq!(b.take_oldest(&mut set), None);
        assert_eq!(b.iter().map(|s| s.addr).collect::<Vec<_>>(), [0, 16]);
    }
}
