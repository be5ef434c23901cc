//! The global ASID allocator of v6.15 (faithful with its quirks) and the
//! broadcast flushes of an mm that holds a global ASID: `INVLPGB`, the
//! transition from per-CPU PCIDs, and the allocator's reset.
//!
//! `global_asid_lock` serialises a `used` and a `freed` bitmap of
//! `MAX_ASID_AVAILABLE` bits, `last_global_asid` and `global_asid_available`.
//! IDs are handed out upward from `last_global_asid` (inclusive); a freed ID stays
//! in `used` until the next reset, which happens at the allocation after the one
//! that reached `MAX_ASID_AVAILABLE - 1`: one broadcast flush of every non-global
//! entry and `TLBSYNC`, then `used &= !freed`. The search returns
//! `MAX_ASID_AVAILABLE` itself when `[last, MAX)` is full and IDs are still
//! counted available (unfixed upstream); its bit lies beyond the bitmap and is
//! cleared by the next reset. The search never reads that bit, so once `[last,
//! MAX)` is full again it hands `MAX_ASID_AVAILABLE` out a second time while the
//! first mm that got it still runs: two address spaces share one PCID, and
//! neither's switch flushes (`docs/findings/x86-global-asid-max.md`, and
//! [`LinuxX86v615::with_max_refused`], the fix posted for the count).

use super::*;

/// The global ASID space, under `global_asid_lock`.
pub(super) struct GlobalAsids {
    /// Allocated, or freed and not yet reset (one bit beyond the space, for the
    /// allocator's overflow).
    pub(super) used: Vec<AtomicU64>,
    /// Freed since the last reset.
    pub(super) freed: Vec<AtomicU64>,
    pub(super) last_global_asid: AtomicU32,
    pub(super) global_asid_available: AtomicU32,
}

impl GlobalAsids {
    /// Returns the space of `MAX_ASID_AVAILABLE = max_asid`: `max_asid - 7` IDs
    /// counted available, and the first allocation resets it (and flushes).
    pub(super) fn new(max_asid: u32) -> Self {
        let words = (max_asid as usize + 1).div_ceil(64);
        GlobalAsids {
            used: (0..words).map(|_| AtomicU64::new(0)).collect(),
            freed: (0..words).map(|_| AtomicU64::new(0)).collect(),
            last_global_asid: AtomicU32::new(max_asid),
            global_asid_available: AtomicU32::new(max_asid - TLB_NR_DYN_ASIDS - 1),
        }
    }

    pub(super) fn test(words: &[AtomicU64], bit: u32) -> bool {
        // Relaxed (every bitmap access): under global_asid_lock.
        words[bit as usize / 64].load(Ordering::Relaxed) & (1 << (bit % 64)) != 0
    }

    pub(super) fn set(words: &[AtomicU64], bit: u32, on: bool) {
        let w = &words[bit as usize / 64];
        let old = w.load(Ordering::Relaxed);
        let m = 1u64 << (bit % 64);
        w.store(if on { old | m } else { old & !m }, Ordering::Relaxed);
    }
}

impl LinuxX86v615 {
    /// `broadcast_tlb_flush`: `INVLPGB`s of the mm's global PCID, the transition's
    /// IPIs if any, then `TLBSYNC`.
    pub(super) fn broadcast_tlb_flush<H: Hw>(&self, hw: &H, f: &FlushTlbInfo) {
        let Some(mm) = f.mm else { return };
        let tag = kern_pcid(self.global_asid(mm));
        match f.extent {
            FlushExtent::All => hw.tlbi(Tlbi::Asid(tag), Scope::Broadcast),
            FlushExtent::Pages { start, pages } => self.invlpgb_range(hw, Some(tag), start, pages),
        }
        self.finish_asid_transition(hw, f);
        hw.barrier(Barrier::TlbSync);
    }

    /// `INVLPGB`s of `pages` from `start`, of PCID `asid` or with global entries
    /// (`None`), at most `invlpgb_count_max` pages each (`__invlpgb_flush_*`'s
    /// loop; no `TLBSYNC`).
    pub(super) fn invlpgb_range<H: Hw>(&self, hw: &H, asid: Option<Asid>, start: VirtAddr, pages: u64) {
        let mut done = 0;
        while done < pages {
            let nr = (pages - done).clamp(1, self.count_max as u64);
            hw.tlbi(Tlbi::Range { asid, va: start.add_pages(done), pages: nr as u32 }, Scope::Broadcast);
            done += nr;
        }
    }

    /// `finish_asid_transition`: while the mm is in transition, any CPU that runs
    /// it on another ASID gets the IPI flush (which moves it to the global one);
    /// once none does, the transition ends.
    pub(super) fn finish_asid_transition<H: Hw>(&self, hw: &H, f: &FlushTlbInfo) {
        let Some(mm) = f.mm else { return };
        if !self.in_asid_transition(mm) {
            return;
        }
        let g = self.global_asid(mm);
        let m = &self.mms[mm.index()];
        let mut straggler = false;
        self.touch_mask(hw, mm, Access::Read);
        m.cpumask.for_each(|c| {
            if straggler {
                return;
            }
            let st = &self.cpu_tlbstate[c.index()];
            // Relaxed (READ_ONCE): a CPU between its global_asid read and its
            // loaded_mm store shows SWITCHING; wait it out. A walk over the
            // mask's CPUs, but for the spin's polls.
            self.touch_state(hw, c, Access::ReadAhead);
            let mut lm = st.loaded_mm.load(Ordering::Relaxed);
            while lm == LOADED_MM_SWITCHING {
                spin_loop();
                self.touch_state(hw, c, Access::Read);
                lm = st.loaded_mm.load(Ordering::Relaxed);
            }
            // Relaxed: x86 keeps loads in order; loaded_mm_asid was stored first.
            straggler = lm == mm.0 && st.loaded_mm_asid.load(Ordering::Relaxed) != g;
        });
        if straggler {
            self.flush_tlb_multi(hw, &m.cpumask, f);
            return;
        }
        // Relaxed: WRITE_ONCE.
        self.touch_ctx(hw, mm, Access::Write);
        m.asid_transition.store(false, Ordering::Relaxed);
    }

    /// `consider_global_asid`: after an IPI flush, an mm that more than
    /// `threshold` CPUs run (not lazily) gets a global ASID, one jiffy in 32 per task.
    pub(super) fn consider_global_asid<H: Hw>(&self, hw: &H, mm: MmId) {
        if self.sample && (hw.cpu().0 as u64 & 31) != (hw.jiffies() & 31) {
            return;
        }
        if self.mm_active_cpus_exceeds(hw, mm, self.threshold) {
            self.use_global_asid(hw, mm);
        }
    }

    /// `mm_active_cpus_exceeds`: racy reads of other CPUs' state, by design.
    pub(super) fn mm_active_cpus_exceeds<H: Hw>(&self, hw: &H, mm: MmId, threshold: usize) -> bool {
        self.touch_mask(hw, mm, Access::Read);
        let mask = &self.mms[mm.index()].cpumask;
        let mut weight = 0;
        mask.for_each(|_| weight += 1);
        if weight <= threshold {
            return false;
        }
        let mut count = 0;
        mask.for_each(|c| {
            let st = &self.cpu_tlbstate[c.index()];
            // A walk over the mask's CPUs.
            self.touch_state(hw, c, Access::ReadAhead);
            self.touch_lazy(hw, c, Access::ReadAhead);
            // Relaxed: a heuristic.
            if st.loaded_mm.load(Ordering::Relaxed) == mm.0 && !st.is_lazy.load(Ordering::Relaxed) {
                count += 1;
            }
        });
        count > threshold
    }

    /// `use_global_asid`: under `global_asid_lock`, gives `mm` an ASID from the
    /// global space unless another thread did or none is left.
    pub(super) fn use_global_asid<H: Hw>(&self, hw: &H, mm: MmId) {
        hw.shared(addr_of(&self.global_asid_lock), Access::Rmw);
        let g = self.global_asid_lock.lock();
        if self.global_asid(mm) != 0 {
            return;
        }
        // Relaxed (the space's fields): under the lock.
        if g.global_asid_available.load(Ordering::Relaxed) == 0 {
            // WARN_ONCE("out of global ASIDs"): the mm stays on dynamic ASIDs.
            return;
        }
        let asid = self.allocate_global_asid(hw, &g);
        if asid == 0 {
            return;
        }
        let m = &self.mms[mm.index()];
        // Relaxed then Release (mm_assign_global_asid): whoever sees the ASID sees
        // the transition set.
        self.touch_ctx(hw, mm, Access::Write);
        m.asid_transition.store(true, Ordering::Relaxed);
        m.global_asid.store(asid, Ordering::Release);
    }

    /// `allocate_global_asid`, under the lock, quirks included (module docs).
    pub(super) fn allocate_global_asid<H: Hw>(&self, hw: &H, g: &GlobalAsids) -> u32 {
        let max = self.max_asid;
        if g.last_global_asid.load(Ordering::Relaxed) >= max - 1 {
            self.reset_global_asid_space(hw, g);
        }
        let last = g.last_global_asid.load(Ordering::Relaxed);
        let asid = (last..max).find(|&b| !GlobalAsids::test(&g.used, b)).unwrap_or(max);
        // Upstream tests `!global_asid_available`, false here (use_global_asid
        // checked it), so MAX_ASID_AVAILABLE itself goes out; the fix tests it
        // the other way round, always true here. (The count is read only when
        // the search found nothing, as the kernel's `&&` reads it.)
        if asid >= max && (g.global_asid_available.load(Ordering::Relaxed) != 0) == self.refuse_max {
            return 0;
        }
        GlobalAsids::set(&g.used, asid, true);
        g.last_global_asid.store(asid, Ordering::Relaxed);
        let avail = g.global_asid_available.load(Ordering::Relaxed);
        g.global_asid_available.store(avail - 1, Ordering::Relaxed);
        asid
    }

    /// `reset_global_asid_space`: flush every non-global entry everywhere, then
    /// make the freed IDs allocatable again.
    pub(super) fn reset_global_asid_space<H: Hw>(&self, hw: &H, g: &GlobalAsids) {
        hw.tlbi(Tlbi::AllNonGlobal, Scope::Broadcast);
        hw.barrier(Barrier::TlbSync);
        for b in 0..=self.max_asid {
            if b >= self.max_asid || GlobalAsids::test(&g.freed, b) {
                GlobalAsids::set(&g.used, b, false);
            }
            GlobalAsids::set(&g.freed, b, false);
        }
        g.last_global_asid.store(TLB_NR_DYN_ASIDS, Ordering::Relaxed);
        hw.note(Note::AsidRollover);
    }
}
