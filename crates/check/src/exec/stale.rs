//! Values a CPU may still read after they were overwritten: arm64's loads out
//! of order, under `--memory arm`.
//!
//! Armv8 lets a load be satisfied before an earlier load of another location
//! that is not ordered before it (no barrier, acquire or address dependency
//! between them): `MP` with a store-release on one side and two plain loads
//! on the other shows `flag = 1, data = 0`. Operationally that is a load
//! reading a value of its location that has since been overwritten, as long
//! as it is no older than what the CPU was already bound to see. This module
//! keeps those values: each store that becomes visible, while some other CPU
//! may still read the value it overwrites, leaves that value here with the
//! set of CPUs that may read it (a *view*, as in the promising and flat
//! models of Armv8, reduced to the values still readable).
//!
//! - A CPU is bound to the latest value of every location at each
//!   *ordering point*: a fence that orders loads (`DMB ISH`, `DMB ISHLD`), a
//!   `DSB` of any kind or an `ISB` (no later instruction executes until it
//!   completes), a load-acquire or acquiring read-modify-write, a spin
//!   loop's wait, an interrupt taken, a move to another CPU, and the start of
//!   an operation (a bound of the model: the kernel's entry orders nothing).
//!   Between two, every value another CPU's store overwrites stays readable
//!   to it. Binding it to the latest values rather than only to those its
//!   earlier loads read makes the model stronger than Armv8, never weaker:
//!   an interleaving in which the CPU ran earlier gives most of what that
//!   loses. An ordering point depends on every store of another CPU (which
//!   values stay readable depends on which came first), and on nothing else
//!   ([`crate::search::Foot::reads_all`]).
//! - A CPU that will load nothing before its next ordering point *rests*:
//!   between two operations, idle, waiting in a spin, and paused before a
//!   load-acquire or acquiring read-modify-write (each ends at an ordering
//!   point: the operation's start, the interrupt taken, the spin's next
//!   pass, the access; an interrupt taken at rest returns to rest). What
//!   other CPUs overwrite meanwhile stays readable to it
//!   only until that point, where it could not be read: a resting CPU keeps
//!   no overwritten values, and states that differ only in those are one.
//!   Resting commutes with every store (a value a store leaves to a resting
//!   CPU would be forgotten at the rest), so it is no step's footprint.
//! - A load reads the latest value or any older one still readable to its
//!   CPU ([`crate::search::ChoiceKind::Read`]); reading one binds the CPU to it
//!   and newer for that location (coherence: two loads of one location read
//!   in order). A CPU's own store binds it to that store (it never reads
//!   older than its own write), and a read-modify-write reads the latest.
//! - Loads are taken to carry no address dependency on each other: the
//!   policies' loads take their addresses from the operation's arguments (an
//!   address space, a CPU), not from another shared load; a policy that
//!   indexes by a loaded value orders the two loads with an acquire.
//!   Load-to-store order is kept (no load buffering: every store after a load
//!   in the policies is control-dependent on it).
//! - A store leaves its overwritten value only to the CPUs that may load the
//!   field with a plain load, as the policy declares them
//!   ([`tlbkit_policy::fields::Owner`], checked at every access): none for a
//!   field only its CPU touches or only a lock's holder touches (the next
//!   holder takes the lock, an ordering point, after the last holder's
//!   stores are visible), the declared reader for `Owner::Reader`.
//! - A spin lock's word keeps no overwritten value (from the moment the
//!   checker sees it taken, before which nothing stored to it). Its only
//!   plain load is the lock's wait for a release ([`tlbkit_policy::sync`]),
//!   and an older value read there only delays the wait: an old "held"
//!   spins once more, as a read before the release would; an old "free"
//!   sends the CPU to the exchange, which reads the latest and fails, as
//!   after a read before the other CPU's exchange. Either reaches only
//!   states a read of the latest value in another order reaches, and
//!   keeping those values would double the states of an allocator under a
//!   lock for nothing.
//! - At most [`DEPTH`] overwritten values per location are kept; an older one
//!   is forgotten (a stronger model, and a bounded state). They are kept in
//!   order of address, so the order in which stores to two locations became
//!   visible leaves no trace in the state.

use super::{Core, Memory, Own};

/// How many overwritten values of one location stay readable at most.
pub(super) const DEPTH: usize = 2;

/// One overwritten value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Old {
    /// The location (a facade atomic of the policy).
    pub addr: usize,
    /// The value a later store overwrote.
    pub v: u64,
    /// The CPUs that may still read it, a bit each.
    pub readers: u16,
}

/// The overwritten values still readable, by address and oldest first
/// within one.
#[derive(Clone, Debug, Default)]
pub(super) struct Stale {
    olds: Vec<Old>,
    /// The CPUs at rest, a bit each.
    resting: u16,
    /// The spin locks' words seen taken.
    locks: Vec<usize>,
}

impl Stale {
    /// An ordering point of CPU `cpu`: it reads the latest value of every
    /// location from now on (until other CPUs' stores overwrite them).
    pub fn catch_up(&mut self, cpu: usize) {
        self.forget(|o| o.readers & 1 << cpu != 0, cpu);
        self.resting &= !(1 << cpu);
    }

    /// CPU `cpu` rests: it loads nothing before its next ordering point, so
    /// nothing overwritten from now until then is readable to it.
    pub fn rest(&mut self, cpu: usize) {
        self.catch_up(cpu);
        self.resting |= 1 << cpu;
    }

    /// The CPUs at rest, a bit each.
    pub fn resting(&self) -> u16 {
        self.resting
    }

    /// Notes a store by `writer` to `addr` that became visible, from `old`
    /// to `new`; `readers` are the CPUs that may load `addr` with a plain
    /// load, a bit each.
    pub fn overwrote(&mut self, readers: u16, writer: usize, addr: usize, old: u64, new: u64) {
        // The writer reads nothing older than its own store.
        self.forget(|o| o.addr == addr, writer);
        let readers = readers & !(1 << writer) & !self.resting;
        // A store of the value already there leaves nothing new to read.
        if readers == 0 || old == new || self.locks.contains(&addr) {
            return;
        }
        // Kept in order of address, and of age within one: the order in which
        // stores to different locations came leaves no trace in the state.
        let at = self.olds.partition_point(|o| o.addr <= addr);
        self.olds.insert(at, Old { addr, v: old, readers });
        let first = self.olds.partition_point(|o| o.addr < addr);
        let n = at + 1 - first;
        if n > DEPTH {
            self.olds.drain(first..first + n - DEPTH);
        }
    }

    /// Notes that `addr` is a spin lock's word, just taken: its overwritten
    /// values are forgotten, now and from now on.
    pub fn lock_word(&mut self, addr: usize) {
        if !self.locks.contains(&addr) {
            self.locks.push(addr);
        }
        self.olds.retain(|o| o.addr != addr);
    }

    /// The older values of `addr` CPU `cpu` may read, newest first.
    pub fn readable(&self, cpu: usize, addr: usize) -> Vec<u64> {
        self.olds.iter().rev().filter(|o| o.addr == addr && o.readers & 1 << cpu != 0).map(|o| o.v).collect()
    }

    /// Notes that CPU `cpu` read `addr`: the latest value (`back` 0), or the
    /// `back`-th newest of [`Stale::readable`]. It reads nothing older again.
    pub fn read(&mut self, cpu: usize, addr: usize, back: usize) {
        let mine = |o: &Old| o.addr == addr && o.readers & 1 << cpu != 0;
        // Keep the one read and what is newer: drop all but the last `back`.
        let n = self.olds.iter().filter(|o| mine(o)).count();
        let drop = n - back.min(n);
        self.olds.iter_mut().filter(|o| mine(o)).take(drop).for_each(|o| o.readers &= !(1 << cpu));
        self.olds.retain(|o| o.readers != 0);
    }

    /// Takes CPU `cpu` off every value `which` picks, and forgets the values
    /// no CPU may read any more.
    fn forget(&mut self, which: impl Fn(&Old) -> bool, cpu: usize) {
        for o in self.olds.iter_mut().filter(|o| which(o)) {
            o.readers &= !(1 << cpu);
        }
        self.olds.retain(|o| o.readers != 0);
    }

    /// The values kept, by address and oldest first within one (none in
    /// every TSO and SC state).
    pub fn olds(&self) -> &[Old] {
        &self.olds
    }
}

/// The engine's side of the model: where ordering points, rests and lock
/// words come from, and who may read an overwritten value.
impl Core {
    /// An ordering point of CPU `cpu` under `--memory arm`: its later
    /// loads read no value overwritten before now. It depends on every other
    /// CPU's stores, and on nothing else another CPU does (it changes only
    /// what this CPU may read).
    pub(super) fn catch_up(&self, cpu: usize) {
        if self.shape.memory == Memory::Arm {
            if let Some(f) = self.foot.borrow_mut().as_mut() {
                f.reads_all = true;
            }
            self.st.borrow_mut().stale.catch_up(cpu);
        }
    }

    /// Notes that the word at `addr` is a spin lock's, just taken (its
    /// overwritten values are never readable).
    pub(super) fn lock_word(&self, addr: usize) {
        if self.shape.memory == Memory::Arm {
            self.st.borrow_mut().stale.lock_word(addr);
        }
    }

    /// CPU `cpu` loads nothing before its next ordering point: it
    /// keeps no overwritten value until then.
    pub(super) fn rest(&self, cpu: usize) {
        if self.shape.memory == Memory::Arm {
            self.st.borrow_mut().stale.rest(cpu);
        }
    }

    /// Returns the CPUs that may read an older value of the field at `addr`
    /// with a plain load, a bit each, as the policy declares them
    /// ([`tlbkit_policy::fields::Fields::owner`]): none for a field only its
    /// CPU touches, or only a lock's holder (who took the lock, an ordering
    /// point, after the last holder's stores), the reader for
    /// [`Own::Reader`], else all.
    pub(super) fn plain_readers(&self, addr: usize) -> u16 {
        match self.owners.get(addr - self.base).copied().flatten() {
            Some(Own::Cpu { others_read: false, .. } | Own::Lock { .. }) => 0,
            Some(Own::Reader { cpu }) => 1 << cpu,
            Some(Own::Cpu { others_read: true, .. }) | None => u16::MAX,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_leaves_its_old_value_to_every_cpu_but_the_writer() {
        let mut s = Stale::default();
        s.overwrote(0x7, 0, 8, 1, 0);
        assert_eq!(s.readable(1, 8), [1]);
        assert!(s.readable(0, 8).is_empty());
        s.overwrote(0x7, 2, 8, 2, 0);
        assert_eq!(s.readable(1, 8), [2, 1]);
        assert_eq!(s.readable(0, 8), [2]);
        assert!(s.readable(2, 8).is_empty());
        // The writer is bound to its own store.
        s.overwrote(0x7, 1, 8, 3, 0);
        assert!(s.readable(1, 8).is_empty());
        let mut one = Stale::default();
        one.overwrote(0x1, 0, 8, 1, 0);
        assert!(one.olds().is_empty(), "with one CPU nobody else reads");
        s.overwrote(0x7, 0, 16, 7, 7);
        assert!(s.readable(1, 16).is_empty(), "the same value again is nothing new");
    }

    #[test]
    fn a_resting_cpu_keeps_nothing_until_its_ordering_point() {
        let mut s = Stale::default();
        s.overwrote(0x7, 0, 8, 1, 2);
        s.rest(1);
        assert!(s.readable(1, 8).is_empty());
        assert_eq!(s.readable(2, 8), [1]);
        s.overwrote(0x7, 0, 8, 2, 3);
        assert!(s.readable(1, 8).is_empty());
        assert_eq!(s.readable(2, 8), [2, 1]);
        s.catch_up(1);
        assert_eq!(s.resting(), 0);
        s.overwrote(0x7, 0, 8, 3, 4);
        assert_eq!(s.readable(1, 8), [3]);
    }

    #[test]
    fn a_lock_word_keeps_no_overwritten_value() {
        let mut s = Stale::default();
        s.overwrote(0x3, 0, 8, 0, 1);
        s.lock_word(8);
        assert!(s.olds().is_empty());
        s.overwrote(0x3, 0, 8, 1, 0);
        assert!(s.readable(1, 8).is_empty());
    }

    #[test]
    fn stores_to_different_locations_leave_the_same_values_in_either_order() {
        let (mut a, mut b) = (Stale::default(), Stale::default());
        a.overwrote(0x3, 0, 16, 1, 2);
        a.overwrote(0x3, 0, 8, 3, 4);
        b.overwrote(0x3, 0, 8, 3, 4);
        b.overwrote(0x3, 0, 16, 1, 2);
        assert_eq!(a.olds(), b.olds());
    }

    #[test]
    fn reading_a_value_binds_the_cpu_to_it_and_newer() {
        let mut s = Stale::default();
        for v in 1..=2 {
            s.overwrote(0x3, 0, 8, v, 0);
        }
        assert_eq!(s.readable(1, 8), [2, 1]);
        s.read(1, 8, 1);
        assert_eq!(s.readable(1, 8), [2]);
        s.read(1, 8, 0);
        assert!(s.readable(1, 8).is_empty());
        assert!(s.olds().is_empty());
    }

    #[test]
    fn at_most_depth_values_of_a_location_are_kept_and_an_ordering_point_forgets_them() {
        let mut s = Stale::default();
        for v in 1..=5 {
            s.overwrote(0x3, 0, 8, v, 0);
        }
        s.overwrote(0x3, 0, 16, 9, 0);
        assert_eq!(s.readable(1, 8), [5, 4]);
        assert_eq!(s.readable(1, 16), [9]);
        s.catch_up(1);
        assert!(s.olds().is_empty());
    }
}
