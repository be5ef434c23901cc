//! Linux x86 `arch/x86/mm/tlb.c` as of v4.10: the kernel LATR (Kumar et al.,
//! ASPLOS 2018) was built on and measured against. No PCIDs (Linux used them
//! only from v4.14), so every CR3 write flushes; no `tlb_gen`.
//!
//! # The algorithm
//! Per CPU: `cpu_tlbstate.active_mm` and `state` (`TLBSTATE_OK` or
//! `TLBSTATE_LAZY`). Per mm: `mm_cpumask`.
//!
//! - `switch_mm_irqs_off(prev, next)`: to another mm, `state = OK`,
//!   `active_mm = next`, join next's mask, load CR3 (a flush), leave prev's
//!   mask. To the same mm (back from a kernel thread or idle): `state = OK`, and
//!   if a flush IPI made this CPU leave the mask meanwhile (`leave_mm`), join it
//!   again and reload CR3.
//! - `enter_lazy_tlb`: `state = LAZY` (CR3 and the mask stay).
//! - `flush_tlb_mm_range`: if this CPU runs the mm (`active_mm == mm`), flush
//!   it here (`INVLPG` per page up to the 33-page ceiling, else a CR3 reload);
//!   then IPI **every other CPU of the mask, lazy ones included**
//!   (`smp_call_function_many`, waiting).
//! - `flush_tlb_func` (the handler): nothing if the CPU's `active_mm` is another
//!   mm; the flush if `state == OK`; on a lazy CPU `leave_mm`: leave the mask
//!   and load `swapper_pg_dir`, so that later flushes of the mm skip it.
//! - Kernel ranges: `INVLPG` per page (or everything) on every CPU by IPI.
//!   Reclaim's batch (`arch_tlbbatch_flush`, v4.7+): a local CR3 reload if this
//!   CPU is in the batch's mask, and the handler with no mm on every other CPU of it.
//! - `flush_tlb_batched_pending` (another CPU's `munmap` or `madvise` while a
//!   reclaim's flush is deferred) is [`Policy`]'s default, `flush_tlb_mm`: the
//!   fix 3ea277194daa of v4.13, which v4.10 lacks. This policy is v4.10 with that
//!   fix; v4.10 as released is the zoo's `linux-x86-3ea277194daa`, whose kernel
//!   never calls it ([`crate::zoo::Bug::LinuxX863ea277194daa`]).
//!
//! # Shared with the later models
//! The kernel-range flush and `cpumask_any_but` are written once in
//! `linux_x86_common.rs`; the rest (no PCID, `leave_mm`) is v4.10's own.
//!
//! # Deliberate readings
//! - `active_mm` is the slot and, as in [`super::linux_pcid`], the incarnation
//!   (a per-mm id that `mm_init` renews), because a slot may be reused while a
//!   lazy CPU's `active_mm` still names it; in Linux the lazy CPU's reference
//!   keeps the old `mm_struct` alive.
//! - `flush_tlb_mm_range` from a kernel thread lazily on the mm (`!current->mm`)
//!   calls `leave_mm` first; the simulated kernels flush only from tasks of the
//!   mm, so that branch is not modelled.

use crate::cpumask::CpuMask;
use crate::fields::{Fields, Owner, Value};
use crate::hw::{Access, Hw, Root, Scope, Tlbi};
use crate::policy::Policy;
use crate::shootdown::{addr_of, CacheLine};
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use crate::types::{Asid, CpuId, MmId, VirtAddr};
use alloc::vec::Vec;

pub use super::linux_x86_common::TLB_SINGLE_PAGE_FLUSH_CEILING;
use super::linux_x86_common::{cpumask_any_but, do_kernel_range_flush, Range};

/// A CPU's `cpu_tlbstate`.
#[repr(align(64))]
struct TlbState {
    /// The mm whose tables the CPU uses (slot).
    active_mm: AtomicU32,
    /// Which incarnation of the slot.
    active_uid: AtomicU64,
    /// `TLBSTATE_LAZY`: a kernel thread or idle runs on `active_mm`'s tables.
    lazy: AtomicBool,
}

/// The per-mm part: an incarnation id and `mm_cpumask`.
#[repr(align(64))]
struct MmContext {
    uid: AtomicU64,
    cpumask: CacheLine<CpuMask>,
}

/// Linux x86 v4.10's TLB code: no PCID, IPIs to every CPU of the mask.
pub struct LinuxX86v410 {
    last_uid: AtomicU64,
    cpu_tlbstate: Vec<TlbState>,
    mms: Vec<MmContext>,
    /// `tlb_single_page_flush_ceiling`: ranges of more pages are flushed whole.
    ceiling: u64,
}

impl LinuxX86v410 {
    /// Returns the policy for `ncpus` CPUs and `max_mms` slots (slot 0 is
    /// `init_mm`), every CPU on `init_mm`.
    pub fn new(ncpus: usize, max_mms: usize) -> Self {
        let cpu_tlbstate = (0..ncpus)
            .map(|_| TlbState {
                active_mm: AtomicU32::new(MmId::KERNEL.0),
                active_uid: AtomicU64::new(0),
                lazy: AtomicBool::new(false),
            })
            .collect();
        let mms = (0..max_mms.max(1))
            .map(|_| MmContext { uid: AtomicU64::new(0), cpumask: CacheLine(CpuMask::new(ncpus)) })
            .collect();
        LinuxX86v410 { last_uid: AtomicU64::new(0), cpu_tlbstate, mms, ceiling: TLB_SINGLE_PAGE_FLUSH_CEILING }
    }

    /// Returns this policy with `tlb_single_page_flush_ceiling` set to
    /// `pages` (the debugfs file's write): user and kernel ranges of more
    /// pages are flushed whole, 0 flushing every range whole.
    pub fn with_flush_ceiling(mut self, pages: u64) -> Self {
        self.ceiling = pages;
        self
    }

    /// Returns whether `cpu` is in `mm_cpumask(mm)`.
    pub fn in_mm_cpumask(&self, mm: MmId, cpu: CpuId) -> bool {
        self.mms[mm.index()].cpumask.test(cpu)
    }

    /// Returns whether `cpu` is in lazy TLB mode.
    pub fn is_lazy(&self, cpu: CpuId) -> bool {
        // Relaxed: a report.
        self.cpu_tlbstate[cpu.index()].lazy.load(Ordering::Relaxed)
    }

    /// Returns whether this incarnation of `mm` is `st`'s `active_mm`.
    fn is_active(&self, st: &TlbState, mm: MmId) -> bool {
        // Relaxed: only the owning CPU writes its state, and this is that CPU.
        st.active_mm.load(Ordering::Relaxed) == mm.0
            && st.active_uid.load(Ordering::Relaxed) == self.mms[mm.index()].uid.load(Ordering::Relaxed)
    }

    fn set_mask<H: Hw>(&self, hw: &H, mm: MmId, on: bool) {
        if mm.is_kernel() {
            return;
        }
        let m = &self.mms[mm.index()].cpumask;
        hw.shared(addr_of(&**m), Access::RmwAnyOrder);
        if on {
            m.set(hw.cpu());
        } else {
            m.clear(hw.cpu());
        }
    }

    /// `switch_mm_irqs_off`.
    fn switch_mm_irqs_off<H: Hw>(&self, hw: &H, next: MmId) {
        let cpu = hw.cpu();
        let st = &self.cpu_tlbstate[cpu.index()];
        // Relaxed (this CPU's own state).
        st.lazy.store(false, Ordering::Relaxed);
        if self.is_active(st, next) {
            // Back from lazy mode: a flush IPI may have made us leave the mask.
            if !next.is_kernel() && !self.mms[next.index()].cpumask.test(cpu) {
                self.set_mask(hw, next, true);
                hw.write_root(Root::Mm(next), Asid::ZERO, false);
            }
            return;
        }
        let prev = MmId(st.active_mm.load(Ordering::Relaxed));
        st.active_mm.store(next.0, Ordering::Relaxed);
        st.active_uid.store(self.mms[next.index()].uid.load(Ordering::Relaxed), Ordering::Relaxed);
        // Join next's mask before the CR3 load (a flusher that misses us flushed
        // before we loaded the tables), leave prev's after it.
        self.set_mask(hw, next, true);
        hw.write_root(Root::Mm(next), Asid::ZERO, false);
        self.set_mask(hw, prev, false);
    }

    /// `leave_mm`: a lazy CPU stops using the mm's tables and its flushes.
    fn leave_mm<H: Hw>(&self, hw: &H) {
        let cpu = hw.cpu();
        let st = &self.cpu_tlbstate[cpu.index()];
        let mm = MmId(st.active_mm.load(Ordering::Relaxed));
        if !mm.is_kernel() && self.mms[mm.index()].cpumask.test(cpu) {
            self.set_mask(hw, mm, false);
            hw.write_root(Root::Mm(MmId::KERNEL), Asid::ZERO, false);
        }
    }

    /// Flushes `range` here (`__flush_tlb_single` per page, or `local_flush_tlb`):
    /// v4.10's own, as it has no PCIDs (the later models share theirs).
    fn flush_local<H: Hw>(&self, hw: &H, range: Range) {
        match range {
            Some((start, pages)) if pages <= self.ceiling => {
                for i in 0..pages {
                    hw.tlbi(Tlbi::Va { asid: Asid::ZERO, va: start.add_pages(i) }, Scope::Local);
                }
            }
            _ => hw.tlbi(Tlbi::Asid(Asid::ZERO), Scope::Local),
        }
    }

    /// `flush_tlb_func`, the IPI handler; `mm` is `None` for reclaim's batch.
    pub(super) fn flush_tlb_func<H: Hw>(&self, hw: &H, mm: Option<MmId>, range: Range) {
        let st = &self.cpu_tlbstate[hw.cpu().index()];
        if mm.is_some_and(|mm| !self.is_active(st, mm)) {
            return;
        }
        self.flush_or_leave(hw, range);
    }

    /// `flush_tlb_func` for a request that names the incarnation `uid` of `mm`
    /// (LATR's saved states, which outlive the request's caller).
    pub(super) fn flush_tlb_func_of<H: Hw>(&self, hw: &H, mm: MmId, uid: u64, range: Range) {
        let st = &self.cpu_tlbstate[hw.cpu().index()];
        // Relaxed: this CPU's own state.
        if st.active_mm.load(Ordering::Relaxed) != mm.0 || st.active_uid.load(Ordering::Relaxed) != uid {
            return;
        }
        self.flush_or_leave(hw, range);
    }

    /// The tail of `flush_tlb_func` on a CPU whose `active_mm` is the request's:
    /// the flush, or on a lazy CPU `leave_mm`.
    fn flush_or_leave<H: Hw>(&self, hw: &H, range: Range) {
        let st = &self.cpu_tlbstate[hw.cpu().index()];
        // Relaxed: this CPU's own state.
        if !st.lazy.load(Ordering::Relaxed) {
            self.flush_local(hw, range);
            return;
        }
        self.leave_mm(hw);
    }

    /// `flush_tlb_mm_range`: here if this CPU runs the mm, then every other CPU
    /// of its mask by IPI.
    fn flush_tlb_mm_range<H: Hw>(&self, hw: &H, mm: MmId, range: Range) {
        self.flush_tlb_mm_range_with(hw, mm, range, |mask, range| self.flush_others(hw, mask, Some(mm), range));
    }

    /// `flush_tlb_mm_range` with `others` for its `flush_tlb_others` step, which
    /// runs only when a CPU but this one is in the mask.
    pub(super) fn flush_tlb_mm_range_with<H: Hw>(
        &self,
        hw: &H,
        mm: MmId,
        range: Range,
        others: impl FnOnce(&CpuMask, Range),
    ) {
        let cpu = hw.cpu();
        let range = range.filter(|&(_, pages)| pages <= self.ceiling);
        if self.is_active(&self.cpu_tlbstate[cpu.index()], mm) {
            self.flush_local(hw, range);
        }
        let mask = &self.mms[mm.index()].cpumask;
        hw.shared(addr_of(&**mask), Access::Read);
        if cpumask_any_but(mask, cpu) {
            others(mask, range);
        }
    }

    /// `native_flush_tlb_others`: `smp_call_function_many` on `mask` but this CPU.
    pub(super) fn flush_others<H: Hw>(&self, hw: &H, mask: &CpuMask, mm: Option<MmId>, range: Range) {
        if cpumask_any_but(mask, hw.cpu()) {
            hw.send_ipi(mask, |h| self.flush_tlb_func(h, mm, range));
        }
    }

    /// Returns the incarnation of `mm` now in its slot.
    pub(super) fn uid_of(&self, mm: MmId) -> u64 {
        // Relaxed: set by `mm_init` before the mm is published.
        self.mms[mm.index()].uid.load(Ordering::Relaxed)
    }

    /// Returns the number of address-space slots.
    pub(super) fn mm_slots(&self) -> usize {
        self.mms.len()
    }

    /// Returns the number of CPUs.
    pub(super) fn ncpus(&self) -> usize {
        self.cpu_tlbstate.len()
    }
}

impl Policy for LinuxX86v410 {
    /// `init_new_context`: a fresh incarnation, an empty mask.
    fn mm_init(&self, mm: MmId) {
        let m = &self.mms[mm.index()];
        // Relaxed: the mm is published to other CPUs later.
        m.uid.store(self.last_uid.fetch_add(1, Ordering::Relaxed) + 1, Ordering::Relaxed);
        m.cpumask.clear_all();
    }

    /// Nothing: without PCIDs no TLB entry outlives a switch away.
    fn mm_release<H: Hw>(&self, _hw: &H, _mm: MmId) {}

    /// `switch_mm_irqs_off` for a user mm; [`MmId::KERNEL`] is `enter_lazy_tlb`.
    fn switch_mm<H: Hw>(&self, hw: &H, next: MmId) {
        if next.is_kernel() {
            let st = &self.cpu_tlbstate[hw.cpu().index()];
            // Relaxed: this CPU's own state.
            if st.active_mm.load(Ordering::Relaxed) != MmId::KERNEL.0 {
                st.lazy.store(true, Ordering::Relaxed);
            }
        } else {
            self.switch_mm_irqs_off(hw, next);
        }
    }

    fn flush_page<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        self.flush_tlb_mm_range(hw, mm, Some((va, 1)));
    }

    /// `arch_tlbbatch_should_defer` (v4.3 on): only when another CPU is in
    /// `mm_cpumask(mm)`.
    fn tlbbatch_should_defer<H: Hw>(&self, hw: &H, mm: MmId) -> bool {
        let mask = &self.mms[mm.index()].cpumask;
        hw.shared(addr_of(&**mask), Access::Read);
        cpumask_any_but(mask, hw.cpu())
    }

    fn flush_range<H: Hw>(&self, hw: &H, mm: MmId, start: VirtAddr, pages: u64) {
        self.flush_tlb_mm_range(hw, mm, Some((start, pages)));
    }

    fn flush_mm<H: Hw>(&self, hw: &H, mm: MmId) {
        self.flush_tlb_mm_range(hw, mm, None);
    }

    /// `try_to_unmap_flush`: the union of the mms' masks, a CR3 reload here if
    /// this CPU is in it, the handler with no mm on the others.
    fn flush_batch<H: Hw>(&self, hw: &H, mms: &[MmId]) {
        let batch = CpuMask::new(self.cpu_tlbstate.len());
        for &mm in mms {
            let m = &self.mms[mm.index()].cpumask;
            hw.shared(addr_of(&**m), Access::Read);
            m.for_each(|c| batch.set(c));
        }
        if batch.test(hw.cpu()) {
            hw.tlbi(Tlbi::Asid(Asid::ZERO), Scope::Local);
        }
        self.flush_others(hw, &batch, None, None);
    }

    /// `flush_tlb_kernel_range`: `INVLPG` per page (kernel PTEs are global) or
    /// everything, on every CPU.
    fn flush_kernel_range<H: Hw>(&self, hw: &H, start: VirtAddr, pages: u64) {
        let full = pages > self.ceiling;
        let flush = |h: &H| do_kernel_range_flush(h, start, pages, full);
        flush(hw);
        let all = CpuMask::new(self.cpu_tlbstate.len());
        all.set_all();
        self.flush_others_with(hw, &all, flush);
    }

    fn name_fields(&self, f: &mut dyn Fields) {
        f.add(&self.last_uid, format_args!("last_uid"), Value::Number);
        for (c, t) in self.cpu_tlbstate.iter().enumerate() {
            f.add(&t.active_mm, format_args!("cpu_tlbstate[cpu{c}].active_mm"), Value::Mm);
            f.add(&t.active_uid, format_args!("cpu_tlbstate[cpu{c}].active_mm->uid"), Value::Number);
            f.add(&t.lazy, format_args!("cpu_tlbstate[cpu{c}].state == TLBSTATE_LAZY"), Value::Bool);
            // Per-CPU variables only their CPU writes.
            let read_by_all = Owner::Cpu { cpu: c as u32, others_read: true };
            f.own(&t.active_mm, read_by_all);
            f.own(&t.active_uid, read_by_all);
            f.own(&t.lazy, read_by_all);
        }
        for (m, x) in self.mms.iter().enumerate() {
            f.add(&x.uid, format_args!("mm[{m}].uid"), Value::Number);
            f.add(&*x.cpumask, format_args!("mm_cpumask(mm[{m}])"), Value::Cpus { first: 0 });
        }
    }
}

impl LinuxX86v410 {
    /// `on_each_cpu(f)` but this CPU (which ran it already).
    fn flush_others_with<H: Hw, F: Fn(&H)>(&self, hw: &H, mask: &CpuMask, f: F) {
        if self.cpu_tlbstate.len() > 1 {
            hw.send_ipi(mask, f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testhw::{both_on, invlpg, root, with_mms, Rec};
    use std::vec;

    fn x86(ncpus: usize, n: u32) -> LinuxX86v410 {
        with_mms(LinuxX86v410::new(ncpus, n as usize + 1), n)
    }

    #[test]
    fn every_switch_to_another_mm_flushes_and_moves_the_mask_bit() {
        let p = x86(1, 2);
        let hw = Rec::new(0, 1);
        p.switch_mm(&hw, MmId(1));
        p.switch_mm(&hw, MmId(2));
        assert_eq!(hw.take(), vec![root(1, 0, false), root(2, 0, false)]);
        assert!(!p.in_mm_cpumask(MmId(1), CpuId(0)) && p.in_mm_cpumask(MmId(2), CpuId(0)));
    }

    #[test]
    fn a_lazy_cpu_gets_the_ipi_and_leaves_the_mm() {
        let p = x86(2, 1);
        let (h0, h1) = both_on(&p, MmId(1));
        p.switch_mm(&h1, MmId::KERNEL);
        h0.take();
        h1.take();
        // Unlike v4.19 and later, the lazy CPU is interrupted: it leaves the mask
        // and loads swapper_pg_dir instead of flushing.
        p.flush_page(&h0, MmId(1), VirtAddr(0x1000));
        assert_eq!(
            h0.take(),
            vec![invlpg(0, 0x1000), "ipi [1]".to_string(), "cpu1: root Mm(MmId(0)) asid 0 noflush false".to_string()]
        );
        assert!(!p.in_mm_cpumask(MmId(1), CpuId(1)));
        // The next flush skips it; back on the mm, it joins again with a CR3 load.
        p.flush_page(&h0, MmId(1), VirtAddr(0x1000));
        assert_eq!(h0.take(), vec![invlpg(0, 0x1000)]);
        p.switch_mm(&h1, MmId(1));
        assert_eq!(h1.take(), vec![root(1, 0, false)]);
        assert!(p.in_mm_cpumask(MmId(1), CpuId(1)));
    }

    #[test]
    fn a_large_range_is_a_cr3_reload_everywhere() {
        let p = x86(2, 1);
        let (h0, _h1) = both_on(&p, MmId(1));
        p.flush_range(&h0, MmId(1), VirtAddr(0), 34);
        assert_eq!(
            h0.take(),
            vec![
                "tlbi Asid(Asid(0)) Local".to_string(),
                "ipi [1]".to_string(),
                "cpu1: tlbi Asid(Asid(0)) Local".to_string()
            ]
        );
    }
}
