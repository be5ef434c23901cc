//! The arm64 Linux TLB flush paths of [`LinuxArm64`]: local flushes, the
//! user flushes of an address space (by page, by range with `FEAT_TLBIRANGE`,
//! or the whole ASID past `MAX_TLBI_OPS`) with their plan and barriers, and
//! the IPI-driven flushes of the extensions that skip the broadcast.

use super::*;

/// `__TLBI_RANGE_PAGES(num, scale)`: the pages a range operation covers.
pub(super) const fn range_pages(num: u64, scale: u32) -> u64 {
    (num + 1) << (5 * scale + 1)
}

/// `__TLBI_RANGE_NUM(pages, scale)`: the `NUM` field for `pages` at `scale`, or
/// `None` (the kernel's -1) when not even one unit of the scale fits.
pub(super) fn range_num(pages: u64, scale: u32) -> Option<u64> {
    (pages.min(range_pages(31, scale)) >> (5 * scale + 1)).checked_sub(1)
}

/// `__flush_tlb_range_op` with `FEAT_TLBIRANGE` (v7.0, no LPA2): scales from 3
/// down to 0, one range operation for each that fits (`TLBI RVAE1IS`, or with
/// `asid` `None` the kernel's `RVAALE1IS`), and a single-page operation for
/// what is left of one page (a range covers an even number of pages).
pub(super) fn range_ops(start: VirtAddr, pages: u64, asid: Option<Asid>) -> Vec<Tlbi> {
    let (mut va, mut left, mut ops) = (start, pages, Vec::new());
    let mut scale = 3u32;
    while left > 0 {
        if left == 1 {
            ops.push(match asid {
                Some(asid) => Tlbi::Va { asid, va },
                None => Tlbi::VaAllAsids { va },
            });
            break;
        }
        if let Some(num) = range_num(left, scale) {
            let n = range_pages(num, scale);
            ops.push(Tlbi::Range { asid, va, pages: n as u32 });
            va = va.add_pages(n);
            left -= n;
        }
        // Two pages or more always fit at scale 0, so this never goes below it.
        scale = scale.saturating_sub(1);
    }
    ops
}

/// How one user flush goes.
#[derive(Clone, Copy)]
pub(super) struct FlushPlan {
    /// Where its TLBIs reach.
    scope: Scope,
    /// The domain of the `DSB` that completes them.
    sync: Domain,
    /// Whether the decision already issued the leading barrier.
    pre_done: bool,
    /// Whether the TLBIs are run by IPI handlers on the CPUs of the mm's
    /// `mm_cpumask`, each locally (`TLB_IPI`), instead of by this CPU.
    ipi: bool,
}

/// Returns the barrier domain that completes an invalidation of `scope`.
pub(super) fn domain(scope: Scope) -> Domain {
    match scope {
        Scope::Local => Domain::NonShareable,
        Scope::Broadcast => Domain::InnerShareable,
    }
}

impl LinuxArm64 {
    /// `local_flush_tlb_all`: this CPU's whole TLB, nothing broadcast.
    pub(super) fn local_flush_tlb_all<H: Hw>(hw: &H) {
        hw.barrier(Barrier::DsbSt(Domain::NonShareable));
        hw.tlbi(Tlbi::All, Scope::Local);
        hw.barrier(Barrier::Dsb(Domain::NonShareable));
        hw.barrier(Barrier::Isb);
    }

    /// `local_flush_tlb_asid` (added by origin 001): every entry of `asid` (and of its
    /// user twin under KPTI) on this CPU only, nothing broadcast.
    pub(super) fn local_flush_tlb_asid<H: Hw>(&self, hw: &H, asid: Asid) {
        hw.barrier(Barrier::DsbSt(Domain::NonShareable));
        self.tlbi_user(hw, Tlbi::Asid(asid), Scope::Local);
        hw.barrier(Barrier::Dsb(Domain::NonShareable));
    }

    /// Issues `op` with `scope` and, under KPTI, the same operation for the user
    /// ASID of the pair (`__tlbi` then `__tlbi_user`).
    pub(super) fn tlbi_user<H: Hw>(&self, hw: &H, op: Tlbi, scope: Scope) {
        hw.tlbi(op, scope);
        if self.kpti {
            let user = |asid: Asid| self.tag(u64::from(asid.get() | 1));
            let twin = match op {
                Tlbi::Va { asid, va } => Tlbi::Va { asid: user(asid), va },
                Tlbi::Asid(asid) => Tlbi::Asid(user(asid)),
                Tlbi::Range { asid: Some(asid), va, pages } => Tlbi::Range { asid: Some(user(asid)), va, pages },
                other => other,
            };
            hw.tlbi(twin, scope);
        }
    }

    /// Returns how a user flush of `mm` goes, or `None` for nowhere: broadcast
    /// for the stock kernel; with skip-broadcast, what `tlb_flush_check` decides;
    /// with `active_cpu`, what `flush_tlb_user_pre` decides, having issued the
    /// leading barrier itself.
    pub(super) fn flush_plan<H: Hw>(&self, hw: &H, mm: MmId) -> Option<FlushPlan> {
        let stock = |scope| FlushPlan { scope, sync: domain(scope), pre_done: false, ipi: false };
        if let Some(active) = &self.active {
            let local = active.flush_pre(hw, mm, self.active_cpu_read_early());
            let scope = if local { Scope::Local } else { Scope::Broadcast };
            // v1 keeps the completing DSB ISH even for local TLBIs.
            return Some(FlushPlan { scope, sync: Domain::InnerShareable, pre_done: true, ipi: false });
        }
        if let Some(modes) = &self.tlb_modes {
            let (scope, ipi) = match modes.mode_for(hw, mm) {
                TlbMode::None => return None,
                TlbMode::Local => (Scope::Local, false),
                TlbMode::Ipi => (Scope::Local, true),
                TlbMode::Broadcast => (Scope::Broadcast, false),
            };
            return Some(FlushPlan { scope, sync: domain(scope), pre_done: true, ipi });
        }
        if self.skip.is_none() {
            return Some(stock(Scope::Broadcast));
        }
        match self.tlb_flush_check(hw, mm) {
            TlbFlushKind::No => None,
            TlbFlushKind::Local => Some(stock(Scope::Local)),
            TlbFlushKind::Broadcast => Some(stock(Scope::Broadcast)),
        }
    }

    /// Issues `DSB ISHST` (`DSB NSHST` for a local flush) unless the plan's
    /// decision issued its barrier already, then reads the mm's id (after the
    /// barrier, 5e10f9887ed8; before it with that zoo bug) and returns its tag, or
    /// `None` if the mm never had an ASID.
    pub(super) fn begin_user_flush<H: Hw>(&self, hw: &H, mm: MmId, plan: FlushPlan) -> Option<Asid> {
        let slot = &self.context_id[mm.index()];
        // Zoo bug 5e10f9887ed8: before that fix the TLBI operand came from ASID(mm) read
        // before the barrier, so a CPU given a new ASID for the mm after this read
        // may still walk the old entry and cache it under the new ASID.
        let read_early = self.bug == Some(Bug::LinuxArm645e10f9887ed8);
        // Relaxed: (the bug only) a plain read, as ASID(mm) was; nothing orders it.
        let mut id = if read_early { slot.load(Ordering::Relaxed) } else { 0 };
        if !plan.pre_done {
            hw.barrier(Barrier::DsbSt(domain(plan.scope)));
        }
        if !read_early {
            // Relaxed: ordered after the page-table stores by the DSB above; a rollover
            // that reassigns the number after this read keeps it for the mm on every
            // CPU still running it, and any other CPU flushes locally first.
            id = slot.load(Ordering::Relaxed);
        }
        (id != 0).then(|| self.tag(id))
    }

    /// Runs one user flush of `mm` with its shootdown phases: `ops` yields the TLBIs
    /// for the mm's tag, issued where [`LinuxArm64::flush_plan`] says, and a `DSB`
    /// of the plan's domain completes them.
    pub(super) fn user_flush<H: Hw, I: Iterator<Item = Tlbi>>(&self, hw: &H, mm: MmId, ops: impl Fn(Asid) -> I) {
        self.user_flush_sync(hw, mm, ops, true);
    }

    /// [`LinuxArm64::user_flush`], with the completing `DSB` only if `sync`:
    /// without it this is `__flush_tlb_range_nosync`, whose TLBIs stay pending on
    /// this CPU until its next `DSB ISH` (reclaim's `arch_tlbbatch_flush`, or
    /// `__switch_to`'s).
    pub(super) fn user_flush_sync<H: Hw, I: Iterator<Item = Tlbi>>(
        &self,
        hw: &H,
        mm: MmId,
        ops: impl Fn(Asid) -> I,
        sync: bool,
    ) {
        hw.phase(Phase::Issue);
        if let Some(plan) = self.flush_plan(hw, mm) {
            if let Some(asid) = self.begin_user_flush(hw, mm, plan) {
                hw.phase(Phase::Dispatch);
                if plan.ipi {
                    self.ipi_flush(hw, mm, &ops);
                } else {
                    for op in ops(asid) {
                        self.tlbi_user(hw, op, plan.scope);
                    }
                    if sync {
                        hw.phase(Phase::Sync);
                        hw.barrier(Barrier::Dsb(plan.sync));
                    }
                }
            }
        }
        hw.phase(Phase::Done);
    }

    /// Returns whether reclaim batches its flushes here as v6.5 and later do
    /// (`ARCH_WANT_BATCHED_UNMAP_TLB_FLUSH`, 43b3dfdd0455): the stock kernel
    /// only. The skip-broadcast, `active_cpu` and TLB-mode patches keep the
    /// [`Policy`] defaults (each queued mm flushed whole by
    /// [`Policy::flush_batch`]), as the kernels they were written against did
    /// not batch (origin 001 predates v6.5) or as the patches did not say how their
    /// decision applies to a deferred flush.
    pub(super) fn batches_reclaim(&self) -> bool {
        self.skip.is_none() && self.active.is_none() && self.tlb_modes.is_none()
    }

    /// `TLB_IPI`: `on_each_cpu_mask(mm_cpumask(mm), .., wait)`: this CPU, if it is in
    /// the mask, and each other CPU of it in an IPI handler, issue `ops` locally for
    /// the mm's ASID as they read it, between `DSB NSHST` and `DSB NSH`.
    pub(super) fn ipi_flush<H: Hw, I: Iterator<Item = Tlbi>>(&self, hw: &H, mm: MmId, ops: &impl Fn(Asid) -> I) {
        let Some(modes) = &self.tlb_modes else {
            unreachable!("an IPI flush is planned only with the TLB modes");
        };
        let flush_here = |hw: &H| {
            // Relaxed: ASID(mm) in the handler; the initiator's DSB ISH completed the
            // PTE stores, and a rollover that renumbers the mm meanwhile leaves every
            // CPU that may hold the old number flushing before it runs the new one.
            let id = self.context_id[mm.index()].load(Ordering::Relaxed);
            if id == 0 {
                return;
            }
            hw.barrier(Barrier::DsbSt(Domain::NonShareable));
            for op in ops(self.tag(id)) {
                self.tlbi_user(hw, op, Scope::Local);
            }
            hw.barrier(Barrier::Dsb(Domain::NonShareable));
        };
        let mask = modes.mask(mm);
        if mask.test(hw.cpu()) {
            flush_here(hw);
        }
        hw.phase(Phase::Sync);
        hw.send_ipi(mask, flush_here);
    }
}
