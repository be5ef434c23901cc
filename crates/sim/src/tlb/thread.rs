//! One hardware thread's view of its core's TLBs, where the core's threads
//! share them (`sim/smt.rs`).
//!
//! # What sharing means here
//! Intel's Hyper-Threading cores and AMD's Zen cores keep one set of TLBs per
//! core that the running threads share *competitively*: every entry belongs
//! to the thread whose walk filled it and is used only by that thread (a
//! thread never hits its sibling's entry, even for the same address and
//! PCID, nor its global ones), and the threads' entries compete for the same
//! slots under the one replacement policy. So a thread's own operations see a
//! TLB of its own; what its sibling changes is only which of its entries are
//! still there.
//!
//! # How it is built
//! The shared [`Tlb`] is the plain one. A thread's entries are keyed by its
//! addresses with bits 52 to 55 flipped by its number ([`thread_va`]), bits no
//! address the simulator translates uses, so that lookups, fills and
//! invalidations by address reach only its own entries with no change to the
//! TLB's paths. The invalidations that name no address are narrowed to the
//! thread ([`Inval::AsidOfThread`], [`Inval::Thread`]). Entries and walk-cache
//! entries come back out with the thread's bits cleared. A view of a TLB that
//! no other thread shares passes everything through unchanged: such a TLB
//! holds exactly what it held before threads could share one.

use super::entry::{thread_va, Hit, Inval, TlbEntry};
use super::pwc::WalkEntry;
use super::sweep::SweepRule;
use super::{TableRef, Tlb};

/// A hardware thread's view of the TLBs of its core.
pub struct ThreadTlb<'a> {
    tlb: &'a mut Tlb,
    /// The thread's number in its core (0 where the core is not shared).
    thread: u8,
    /// Whether other threads use the same TLBs.
    shared: bool,
}

/// Returns `e` with the thread bits of its address flipped for `thread` (its
/// own again when they were flipped already).
#[inline(always)]
fn retag(mut e: TlbEntry, thread: u8) -> TlbEntry {
    // The tag is the address shifted right by the entry's page shift.
    e.tag = thread_va(e.tag << e.shift(), thread) >> e.shift();
    e
}

impl<'a> ThreadTlb<'a> {
    /// Returns thread `thread`'s view of `tlb`; `shared`: whether other
    /// threads use it too.
    #[inline(always)]
    pub fn new(tlb: &'a mut Tlb, thread: u8, shared: bool) -> Self {
        debug_assert!(shared || thread == 0, "a TLB of one thread seen as thread {thread}");
        ThreadTlb { tlb, thread, shared }
    }

    /// Returns `va` as the shared TLB keys this thread's entries.
    #[inline(always)]
    fn va(&self, va: u64) -> u64 {
        thread_va(va, self.thread)
    }

    /// [`Tlb::lookup_entry`] for this thread; the entry as the thread filled it.
    #[inline(always)]
    pub fn lookup_entry(&mut self, va: u64, asid: u16) -> Option<(Hit, TlbEntry)> {
        // (The simulator's commonest call: a TLB of one thread pays nothing.)
        if !self.shared {
            return self.tlb.lookup_entry(va, asid);
        }
        self.lookup_shared(va, asid)
    }

    /// [`ThreadTlb::lookup_entry`] where the TLB is shared: out of line, so
    /// that the one-thread path inlines as it did alone.
    #[inline(never)]
    fn lookup_shared(&mut self, va: u64, asid: u16) -> Option<(Hit, TlbEntry)> {
        let hit = self.tlb.lookup_entry(self.va(va), asid);
        hit.map(|(h, e)| (h, retag(e, self.thread)))
    }

    /// [`Tlb::fill`] of this thread's translation `e`.
    #[inline(always)]
    pub fn fill(&mut self, e: TlbEntry, speculative: bool) {
        let e = if self.shared { retag(e, self.thread) } else { e };
        self.tlb.fill(e, speculative);
    }

    /// [`Tlb::pwc_lookup`] for this thread.
    #[inline(always)]
    pub fn pwc_lookup(&mut self, va: u64, asid: u16, global: bool) -> bool {
        self.tlb.pwc_lookup(self.va(va), asid, global)
    }

    /// [`Tlb::pwc_fill`] for this thread.
    #[inline(always)]
    pub fn pwc_fill(&mut self, va: u64, asid: u16, global: bool, table: TableRef, mm_uid: u32) {
        self.tlb.pwc_fill(self.va(va), asid, global, table, mm_uid);
    }

    /// [`Tlb::sweep`] for this thread (`used` reads only the entries' ground
    /// truth, which the thread bits do not touch).
    #[inline(always)]
    pub fn sweep(&mut self, va: u64, pages: u64, rule: &SweepRule, used: impl FnMut(&TlbEntry)) -> u64 {
        self.tlb.sweep(self.va(va), pages, rule, used)
    }

    /// Returns `op` as it applies to the shared TLB when this thread runs it:
    /// by address, on the thread's addresses; by ASID or everything, narrowed
    /// to the thread's entries.
    #[inline(always)]
    fn scoped(&self, op: Inval) -> Inval {
        if !self.shared {
            return op;
        }
        let thread = self.thread;
        match op {
            Inval::Va { asid, va } => Inval::Va { asid, va: self.va(va) },
            Inval::VaAll { va } => Inval::VaAll { va: self.va(va) },
            Inval::Asid(asid) => Inval::AsidOfThread { asid, thread },
            Inval::All => Inval::Thread { thread, global: true },
            Inval::AllNonGlobal => Inval::Thread { thread, global: false },
            narrowed @ (Inval::AsidOfThread { .. } | Inval::Thread { .. }) => narrowed,
        }
    }

    /// [`Tlb::invalidate`] of what `op` removes from this thread's entries.
    #[inline]
    pub fn invalidate(&mut self, op: Inval) -> usize {
        let op = self.scoped(op);
        self.tlb.invalidate(op)
    }

    /// [`Tlb::may_hold`]: of every thread's entries (a "may").
    #[inline(always)]
    pub fn may_hold(&self, asid: u16) -> bool {
        self.tlb.may_hold(asid)
    }

    /// [`Tlb::may_hold_block`] of this thread's entries.
    #[inline(always)]
    pub fn may_hold_block(&self, va: u64) -> bool {
        self.tlb.may_hold_block(self.va(va))
    }

    /// [`Tlb::may_hold_any`] of what `op` from this thread removes.
    #[inline]
    pub fn may_hold_any(&self, op: Inval) -> bool {
        self.tlb.may_hold_any(self.scoped(op))
    }

    /// [`Tlb::may_hold_cont`].
    #[inline(always)]
    pub fn may_hold_cont(&self) -> bool {
        self.tlb.may_hold_cont()
    }

    /// [`Tlb::cont_entries`] of this thread, as it filled them.
    pub fn cont_entries(&self, va: u64, asid: u16) -> impl Iterator<Item = TlbEntry> + '_ {
        let thread = self.thread;
        self.tlb.cont_entries(self.va(va), asid).map(move |e| retag(*e, thread))
    }

    /// [`Tlb::set_cont_dirty`] of this thread's entries.
    pub fn set_cont_dirty(&mut self, va: u64, asid: u16) {
        self.tlb.set_cont_dirty(self.va(va), asid);
    }

    /// [`Tlb::overlap`] among this thread's entries, as it filled them.
    pub fn overlap(&mut self, e: &TlbEntry) -> Option<TlbEntry> {
        let thread = self.thread;
        self.tlb.overlap(&retag(*e, thread)).map(|o| retag(o, thread))
    }

    /// [`Tlb::for_each`] of this thread's entries, as it filled them.
    pub fn for_each(&mut self, mut f: impl FnMut(&TlbEntry)) {
        if !self.shared {
            return self.tlb.for_each(f);
        }
        let thread = self.thread;
        self.tlb.for_each(|e| {
            let own = retag(*e, thread);
            if super::entry::thread_of(e.va()) == thread {
                f(&own);
            }
        });
    }

    /// [`Tlb::for_each_walk`] of this thread's walk-cache entries, as it
    /// filled them.
    pub fn for_each_walk(&self, mut f: impl FnMut(WalkEntry)) {
        if !self.shared {
            return self.tlb.for_each_walk(f);
        }
        let thread = self.thread;
        self.tlb.for_each_walk(|w| {
            if super::entry::thread_of(w.va) == thread {
                f(WalkEntry { va: thread_va(w.va, thread), ..w });
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::KERNEL_BASE;
    use crate::tlb::F_GLOBAL;

    fn entry(va: u64, asid: u16, flags: u8) -> TlbEntry {
        let mut e = TlbEntry { pfn: 7, asid, flags, valid: true, ..Default::default() };
        e.tag = va >> e.shift();
        e
    }

    /// A TLB two threads share: thread 0's view and thread 1's, in turn.
    fn view(tlb: &mut Tlb, thread: u8) -> ThreadTlb<'_> {
        ThreadTlb::new(tlb, thread, true)
    }

    #[test]
    fn a_thread_never_uses_its_siblings_entries_global_ones_included() {
        let mut t = Tlb::new(8, 32, 4, 4);
        let kernel = KERNEL_BASE + 0x20_0000;
        view(&mut t, 0).fill(entry(0x1000, 3, 0), false);
        view(&mut t, 0).fill(entry(kernel, 3, F_GLOBAL), false);
        // The same address and ASID on the other thread: nothing.
        assert!(view(&mut t, 1).lookup_entry(0x1000, 3).is_none());
        assert!(view(&mut t, 1).lookup_entry(kernel, 9).is_none());
        // The filler's, as it filled them.
        let (_, e) = view(&mut t, 0).lookup_entry(0x1000, 3).expect("thread 0's own entry");
        assert_eq!(e.va(), 0x1000);
        let (_, g) = view(&mut t, 0).lookup_entry(kernel, 9).expect("thread 0's global entry, any ASID");
        assert_eq!(g.va(), kernel);
    }

    #[test]
    fn a_threads_invalidations_leave_its_siblings_entries() {
        let kernel = KERNEL_BASE + 0x40_0000;
        for op in [
            Inval::Va { asid: 3, va: 0x1000 },
            Inval::VaAll { va: 0x1000 },
            Inval::Asid(3),
            Inval::AllNonGlobal,
            Inval::All,
        ] {
            let mut t = Tlb::new(8, 32, 4, 4);
            for thread in [0, 1] {
                view(&mut t, thread).fill(entry(0x1000, 3, 0), false);
                view(&mut t, thread).fill(entry(kernel, 3, F_GLOBAL), false);
            }
            assert!(view(&mut t, 0).invalidate(op) > 0, "{op:?} removes thread 0's");
            assert!(view(&mut t, 0).lookup_entry(0x1000, 3).is_none(), "{op:?}");
            assert!(view(&mut t, 1).lookup_entry(0x1000, 3).is_some(), "{op:?} leaves thread 1's");
            assert!(view(&mut t, 1).lookup_entry(kernel, 3).is_some(), "{op:?} leaves thread 1's global one");
            let global_gone = matches!(op, Inval::All);
            assert_eq!(view(&mut t, 0).lookup_entry(kernel, 3).is_none(), global_gone, "{op:?}");
            // The sibling's own invalidation removes its entry.
            assert!(view(&mut t, 1).invalidate(op) > 0, "{op:?} from thread 1");
            assert!(view(&mut t, 1).lookup_entry(0x1000, 3).is_none(), "{op:?}");
        }
    }

    #[test]
    fn siblings_compete_for_the_same_slots() {
        // An L1 of 4 entries: thread 0's four pages fill it; thread 1's four
        // evict them to the L2, where thread 0 finds them.
        let pages = |base: u64| (0..4).map(move |i| base + i * 0x1000);
        let mut alone = Tlb::new(4, 64, 4, 0);
        let mut shared = Tlb::new(4, 64, 4, 0);
        for va in pages(0x10_0000) {
            view(&mut alone, 0).fill(entry(va, 1, 0), false);
            view(&mut shared, 0).fill(entry(va, 1, 0), false);
        }
        for va in pages(0x20_0000) {
            view(&mut shared, 1).fill(entry(va, 1, 0), false);
        }
        for va in pages(0x10_0000) {
            assert!(matches!(view(&mut alone, 0).lookup_entry(va, 1), Some((Hit::L1(_), _))));
        }
        for va in pages(0x10_0000) {
            let hit = view(&mut shared, 0).lookup_entry(va, 1);
            assert!(matches!(hit, Some((Hit::L2(_), _))), "{va:#x}: {hit:?}");
        }
    }

    #[test]
    fn a_thread_sees_its_own_entries_as_it_filled_them() {
        let mut t = Tlb::new(8, 32, 4, 4);
        view(&mut t, 0).fill(entry(0x1000, 1, 0), false);
        view(&mut t, 1).fill(entry(0x2000, 2, 0), false);
        view(&mut t, 1).pwc_fill(0x20_0000, 2, false, TableRef { chunk: 0, gen: 0 }, 5);
        for (thread, va) in [(0, 0x1000), (1, 0x2000)] {
            let mut seen = Vec::new();
            view(&mut t, thread).for_each(|e| seen.push(e.va()));
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(seen, vec![va], "thread {thread}");
        }
        let mut walks = Vec::new();
        view(&mut t, 1).for_each_walk(|w| walks.push(w.va));
        assert_eq!(walks, vec![0x20_0000]);
        view(&mut t, 0).for_each_walk(|w| panic!("thread 0 walked nothing, yet {:#x}", w.va));
        assert!(view(&mut t, 1).pwc_lookup(0x20_0000, 2, false));
        assert!(!view(&mut t, 0).pwc_lookup(0x20_0000, 2, false));
    }

    #[test]
    fn a_tlb_no_thread_shares_is_seen_unchanged() {
        let mut t = Tlb::new(8, 32, 4, 4);
        ThreadTlb::new(&mut t, 0, false).fill(entry(0x3000, 4, 0), false);
        assert!(t.lookup(0x3000, 4).is_some(), "keyed by its own address");
        assert_eq!(ThreadTlb::new(&mut t, 0, false).invalidate(Inval::Asid(4)), 2);
    }
}
