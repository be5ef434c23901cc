//! Reclaim's targeted batch (posted, not merged).
//!
//! [`LinuxX86v615::with_targeted_tlbbatch`] models "x86/mm: do targeted
//! broadcast flushing from tlbbatch code" as v5 to v15 of Rik van Riel's series
//! posted it (v15 10/11, 2025-03-04), which Dave Hansen deferred and v6.15 did
//! not merge. `arch_tlbbatch_add_pending` (here [`Policy::tlbbatch_add_pending`],
//! per page) reads the mm's global ASID (acquire, pairing with
//! `use_global_asid`'s release, so that it sees `asid_transition` set); with one
//! it issues an `INVLPGB` of the page's PCID without waiting, and only while the
//! mm is in transition (the v5 fix) also bumps `tlb_gen` and ORs `mm_cpumask`
//! into the batch, as it does for an mm without one. `arch_tlbbatch_flush` sends
//! the IPI flush to the batch's mask (or flushes locally), then `TLBSYNC` if an
//! `INVLPGB` was issued. The batch (`current->tlb_ubc`) is kept per CPU, with
//! the flag `need_tlbsync` (`cpu_tlbstate`, truly per CPU).
//!
//! `switch_mm_irqs_off` and `enter_lazy_tlb` begin with `tlbsync()` (v11, v14
//! and v15 do): a CPU that switches threads first waits for the `INVLPGB`s it
//! issued. That is what covers a reclaiming thread preempted between its
//! `arch_tlbbatch_add_pending`s and its `arch_tlbbatch_flush` (which starts
//! with `get_cpu`, nothing before it does): it finishes on another CPU, whose
//! `TLBSYNC` waits only for that CPU's own `INVLPGB`s (AMD APM vol. 3,
//! `TLBSYNC`), and sees that CPU's flag, not this one's. Without the switch's
//! wait the first CPU's `INVLPGB`s are complete only at its next `TLBSYNC`,
//! after reclaim has freed the pages ([`LinuxX86v615::without_switch_tlbsync`]
//! leaves it out, and the checker finds the stale translation). The zoo has
//! the two states before: v4's add-pending without the transition check
//! ([`Bug::InvlpgbTlbbatchNoTransition`]) and v1's flush, `TLBSYNC` *or* the
//! IPIs ([`Bug::InvlpgbTlbbatchSyncOrIpi`]).

use super::*;

impl LinuxX86v615 {
    /// Returns this targeted tlbbatch without the `tlbsync()` that begins
    /// `switch_mm_irqs_off` and `enter_lazy_tlb`: not a kernel anyone posted,
    /// the question a reviewer asked of v14 (what does that wait protect?),
    /// which a checker answers by finding the stale translation it prevents
    /// (module docs).
    ///
    /// # Panics
    /// If the batch is not the targeted one.
    pub fn without_switch_tlbsync(mut self) -> Self {
        assert!(self.targeted(), "only the targeted tlbbatch waits at a switch");
        self.no_switch_tlbsync = true;
        self
    }

    /// `tlbsync()` at the start of a switch (`switch_mm_irqs_off`,
    /// `enter_lazy_tlb`), unless left out.
    pub(super) fn switch_tlbsync<H: Hw>(&self, hw: &H) {
        if !self.no_switch_tlbsync {
            self.tlbsync(hw);
        }
    }

    /// `tlbsync()`: waits for the `INVLPGB`s this CPU issued without waiting,
    /// if any (none without the targeted batch).
    fn tlbsync<H: Hw>(&self, hw: &H) {
        let Some(b) = self.tlbbatches.get(hw.cpu().index()) else {
            return;
        };
        // Relaxed: this CPU's own flag.
        if b.need_tlbsync.load(Ordering::Relaxed) {
            hw.barrier(Barrier::TlbSync);
            b.need_tlbsync.store(false, Ordering::Relaxed);
        }
    }

    /// `arch_tlbbatch_add_pending` of the targeted tlbbatch (v15 10/11): an mm
    /// with a global ASID has page `va` invalidated by `INVLPGB` now, completed
    /// by the flush's `TLBSYNC`; an mm without one, or one in transition (the
    /// v5 fix), gets the generation bump and its mask in the batch.
    pub(super) fn targeted_add_pending<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        let b = &self.tlbbatches[hw.cpu().index()];
        self.touch_ctx(hw, mm, Access::Read);
        // `global_asid` is an acquire (smp_load_acquire): it pairs with
        // use_global_asid's release, so the transition flag read below is at
        // least as new as the ASID.
        let mut global_asid = self.global_asid(mm);
        if global_asid != 0 {
            // invlpgb_flush_user_nr_nosync(kern_pcid(global_asid), uaddr, 1, false).
            let op = Tlbi::Range { asid: Some(kern_pcid(global_asid)), va, pages: 1 };
            hw.tlbi(op, Scope::Broadcast);
            // Relaxed: this CPU's own flag.
            b.need_tlbsync.store(true, Ordering::Relaxed);
            // Zoo bug (v4; v1 to v4 alike): a mm in transition got no IPIs.
            let v5 = self.bug != Some(Bug::InvlpgbTlbbatchNoTransition);
            if v5 && self.in_asid_transition(mm) {
                // Stragglers still run the mm on a dynamic ASID: IPI them too.
                global_asid = 0;
            }
        }
        if global_asid == 0 {
            // inc_mm_tlb_gen, a full barrier after the PTE clear, and the mask.
            self.arch_tlbbatch_add_mm(hw, &b.cpumask, mm);
        }
    }

    /// `arch_tlbbatch_flush` of the targeted tlbbatch: the IPI flush of the
    /// batch's CPUs (or the local one), then `TLBSYNC` for the `INVLPGB`s.
    pub(super) fn targeted_tlbbatch_flush<H: Hw>(&self, hw: &H) {
        let cpu = hw.cpu();
        let b = &self.tlbbatches[cpu.index()];
        let info = FlushTlbInfo::BATCH;
        // Relaxed: this CPU's own flag.
        let need_tlbsync = b.need_tlbsync.load(Ordering::Relaxed);
        // Zoo bug (v1, fixed in v2): TLBSYNC when INVLPGB was used, the IPIs
        // only otherwise.
        let ipis = !(need_tlbsync && self.bug == Some(Bug::InvlpgbTlbbatchSyncOrIpi));
        if ipis && self.other_in(hw, &b.cpumask, cpu) {
            self.flush_tlb_multi(hw, &b.cpumask, &info);
        } else if ipis && b.cpumask.test(cpu) {
            hw.irqs_off(|| self.flush_tlb_func(hw, &info));
        }
        // tlbsync(), which reads the flag again: the local flush may have moved
        // this CPU to the mm's global ASID through `switch_mm_irqs_off`, whose
        // own tlbsync() waited already.
        self.tlbsync(hw);
        b.cpumask.clear_all();
    }
}
