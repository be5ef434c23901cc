//! Linux x86 before and after Nadav Amit's concurrent TLB flush series: v5.12's
//! `arch/x86/mm/tlb.c` and `kernel/smp.c` ([`Version::V512`]) against v5.13's
//! ([`Version::V513`]). The series reached v5.13 through the tip tree's
//! `x86-mm-2021-04-29` pull (merge 635de956a7f5); this module models what its
//! commits change in the cost of a flush, with the `smp_call_function` machinery
//! written out line by line so that the wait costs what its cache lines cost.
//! [`super::linux_pcid`] is the older model of the same files with a blocking
//! [`Hw::send_ipi`] (whose machine moves the queues' lines, not the csds') and
//! no line accounting of its own.
//!
//! # The flush, before (v5.12)
//! `flush_tlb_mm_range` bumps `mm->context.tlb_gen`, fills this CPU's
//! `flush_tlb_info` (a `DEFINE_PER_CPU_SHARED_ALIGNED` variable, in both
//! kernels), runs `flush_tlb_func_local` with interrupts off if this CPU has the
//! mm loaded, and only then, if another CPU is in `mm_cpumask`, calls
//! `flush_tlb_others`. Without freed page tables that is
//! `on_each_cpu_cond_mask(tlb_is_not_lazy, flush_tlb_func_remote, info, true,
//! mm_cpumask)`: `smp_call_function_many_cond` evaluates `tlb_is_not_lazy` for
//! every other CPU of the mask inside its queueing loop (read in v5.10's and,
//! from the context of a32a4d8a815c, v5.12's `kernel/smp.c`: no temporary mask
//! is allocated, with `GFP_ATOMIC` or otherwise, so `CONFIG_CPUMASK_OFFSTACK`
//! does not matter here), and after it has waited, `on_each_cpu_cond_mask` runs
//! `flush_tlb_func_remote` *on this CPU too* if it is in the mask and not lazy:
//! a second local call, which usually finds `tlb_gen` caught up and does nothing,
//! but flushes the whole PCID if another CPU bumped `tlb_gen` meanwhile. With
//! freed page tables it is `smp_call_function_many` on the whole mask.
//!
//! `tlb_is_not_lazy` reads `cpu_tlbstate.is_lazy` of the target, and
//! `cpu_tlbstate` is one `DEFINE_PER_CPU_SHARED_ALIGNED` struct: `loaded_mm`,
//! `last_user_mm`, `loaded_mm_asid`, `next_asid`, `is_lazy`, `cr4` and
//! `ctxs[0..2]` in its first 64 bytes (`arch/x86/include/asm/tlbflush.h`: "struct
//! tlb_state will fit in two cache lines"). So the initiator's read shares the
//! line that the target writes at every context switch (`switch_mm_irqs_off`
//! stores `is_lazy = false` unconditionally, then `loaded_mm` and
//! `loaded_mm_asid`) and in every flush of its slot 0 or 1 (`ctxs[asid].tlb_gen`).
//!
//! `smp_call_function_many_cond` (v5.12): a mask with one other CPU takes the
//! fast path, `smp_call_function_single` with a `call_single_data` (csd) on the
//! initiator's stack; more take the `cfd_data` path: for each CPU whose condition
//! holds, `csd_lock` (wait for the per-(initiator, target) csd to be free, then
//! set `CSD_FLAG_LOCK`), `llist_add` to the target's `call_single_queue`, then
//! one `arch_send_call_function_ipi_mask`, then `csd_lock_wait` on the csd of
//! *every* other CPU of the mask, those the condition skipped included. The
//! target's `flush_smp_call_function_queue` takes its queue with `llist_del_all`,
//! reads the csd (`func`, `info`), runs the function, which reads the
//! initiator's `flush_tlb_info`, and releases the csd (`smp_store_release`).
//!
//! # The flush, after (v5.13)
//! - a32a4d8a815c "smp: Run functions concurrently in
//!   smp_call_function_many_cond()": `smp_call_function_many_cond(mask, func,
//!   info, SCF_WAIT | SCF_RUN_LOCAL, cond)` queues the csds and sends the IPIs,
//!   then runs `func` here with interrupts off if this CPU is in the mask, then
//!   waits on each csd. The single-CPU fast path (and its stack csd) is gone: one
//!   target is sent an IPI of its own (`send_call_function_single_ipi` from
//!   d43f17a1da25).
//! - 4c1ba3923e6c "x86/mm/tlb: Unify flush_tlb_func_local() and
//!   flush_tlb_func_remote()": one `flush_tlb_func`, which skips the `f->mm !=
//!   loaded_mm` test on the initiating CPU (`info->initiating_cpu`).
//! - 6035152d8eeb "x86/mm/tlb: Open-code on_each_cpu_cond_mask() for
//!   tlb_is_not_lazy()": `native_flush_tlb_multi` builds the CPUs that are not
//!   lazy into a per-CPU `flush_tlb_mask`, this CPU included, then calls
//!   `on_each_cpu_mask` on it; with freed tables `on_each_cpu_mask` on the whole
//!   mask.
//! - 4ce94eabac16 "x86/mm/tlb: Flush remote and local TLBs concurrently":
//!   `flush_tlb_mm_range` calls `flush_tlb_multi(mm_cpumask(mm), info)` when
//!   another CPU is in the mask, so the local flush runs inside
//!   `smp_call_function_many_cond`, between the IPIs and the wait; only a flush
//!   with no other CPU in the mask runs `flush_tlb_func` directly.
//! - 2f4305b19fe6 "x86/mm/tlb: Privatize cpu_tlbstate": `is_lazy` moves to its own
//!   `DEFINE_PER_CPU_SHARED_ALIGNED` `cpu_tlbstate_shared`; `cpu_tlbstate` becomes
//!   `DEFINE_PER_CPU_ALIGNED` and no other CPU reads it, so the initiator's
//!   `tlb_is_not_lazy` reads stop sharing the line of `loaded_mm` and `ctxs`.
//! - 09c5272e4861 "x86/mm/tlb: Do not make is_lazy dirty for no reason":
//!   `switch_mm_irqs_off` stores `is_lazy = false` only if it was true.
//! - Not modelled, as they change instructions and not lines: 291c4011dd7a
//!   "cpumask: Mark functions as pure", 1608e4cf31b8 "x86/mm/tlb: Remove
//!   unnecessary uses of the inline keyword", a5aa5ce30059 "smp: Inline
//!   on_each_cpu_cond() and on_each_cpu()", d43f17a1da25 "smp: Micro-optimize
//!   smp_call_function_many_cond()".
//!
//! Kernel ranges (`flush_tlb_kernel_range`, `on_each_cpu`) change the same way:
//! v5.12 sends, waits, then flushes here; v5.13 sends, flushes here, waits.
//! Reclaim's `arch_tlbbatch_flush` follows `flush_tlb_mm_range` in each.
//!
//! # The kernels in between
//! Only the series' two ends are modelled. The commits between them, which a
//! bisect of the series measures (the tip tree's order: a32a4d8a815c,
//! 4c1ba3923e6c, 6035152d8eeb, 4ce94eabac16, 2f4305b19fe6, 09c5272e4861, each
//! file rebuilt from the series' v6 patches and tip-bot mails, every step's
//! blob id checked against the next's pre-image), differ from them thus:
//! after a32a4d8a815c, `smp_call_function_many_cond` has no one-target fast
//! path (one target is sent `arch_send_call_function_single_ipi`), still
//! leaves the CPUs its condition skips in `cfd->cpumask` and waits on their
//! csds, and runs the local call between the IPIs and the wait wherever
//! `on_each_cpu_cond_mask` passes `SCF_RUN_LOCAL`, v5.12's second local
//! call included; 4c1ba3923e6c keeps v5.12's `tlb_is_not_lazy` in that
//! queueing loop; 6035152d8eeb builds the mask first and stops the second
//! local call; 4ce94eabac16 flushes here inside `flush_tlb_multi`;
//! 2f4305b19fe6 moves `is_lazy`, still stored at every switch until
//! 09c5272e4861. d43f17a1da25 then sends one target
//! `send_call_function_single_ipi`.
//!
//! # What the machine is told
//! Every access to a line another CPU reads or writes goes through
//! [`Hw::shared`] at the address of the variable the kernel keeps there:
//! `mm->context.tlb_gen` (the context's line), `mm_cpumask` (its own line),
//! the `is_lazy` each kernel reads remotely, the initiator's `flush_tlb_info`,
//! each target's `call_single_queue` and each csd. The IPIs are
//! [`Hw::send_ipi_async`]s, whose handlers account their own dispatch, and the
//! initiator announces the first csd it waits on ([`Hw::spin_on`]) and polls each
//! one, so the wait costs the transfers of the csd lines and not the generic
//! dispatch constant a blocking [`Hw::send_ipi`] charges. Both kernels are
//! modelled the same way, so what differs between them is only what the series
//! changed.
//!
//! # Page-table isolation ([`LinuxX86v513::with_pti`])
//! Both kernels flush the user PCID as v5.10's does ([`super::linux_pcid`]'s
//! module comment, which says what is modelled): `native_flush_tlb_one_user`
//! follows each `INVLPG` with `invpcid_flush_one(user_pcid(asid), addr)` where
//! the CPU has `INVPCID_SINGLE`, or marks the user PCID for a flush at the next
//! return to user (`invalidate_user_asid`) where it has not; `flush_tlb_local`
//! marks it always. The series changed none of this.
//!
//! # Shared with the other models
//! What these kernels' `tlb.c` does as v5.4 and v6.13 do (the slot search of
//! `choose_new_asid`, `init_new_context`, `inc_mm_tlb_gen`, the switch's
//! `mm_cpumask` update and lazy catch-up, `arch_tlbbatch_add_mm`, the flush
//! `flush_tlb_func` ends with, the `mm->context` line accounting, `switch_mm`
//! and the user flushes of `tlbflush.h` as [`Policy`] methods) is written
//! once in `linux_x86_common.rs`; the `smp_call_function` machinery and the
//! `is_lazy` placement are this file's.
//!
//! # Deliberate readings
//! - PCIDs on: the PCID of slot `asid` is `asid + 1`, its user twin under PTI
//!   the same with bit 11.
//! - Whether a CPU has `mm` loaded is decided by slot and `ctx_id`, as in
//!   [`super::linux_pcid`] (the simulator reuses slots at once).
//! - Every csd is a line of its own, one per (initiator, target) pair
//!   (`alloc_percpu` of 32-byte csds may pack two initiators' csds for one target
//!   into one line; not modelled), and the v5.12 stack csd one line per
//!   initiator.
//! - The IPIs go through [`Hw::send_call_function_ipi_async`]: where the
//!   target's `call_single_queue` already held a request whose IPI's handler had
//!   not yet taken it (`llist_add` returned false), the simulator sends no IPI and
//!   that handler runs this request too; the checker sends one per csd, whose
//!   interleavings include the coalesced ones.
//! - `flush_tlb_info` is carried to the handler by value ([`Hw::send_ipi_async`]'s
//!   contract); the handler accounts the read of the initiator's line, which the
//!   initiator does not write again before every handler is done.
//! - The `LOADED_MM_SWITCHING` store of `switch_mm_irqs_off` is accounted as a
//!   write of the CPU's `cpu_tlbstate` line; no other CPU reads its value in
//!   these kernels.
//! - Phases: issue when the csds are queued, dispatch at the IPIs, sync at the
//!   wait, done after it; v5.12's first local flush precedes the issue, v5.13's
//!   runs between dispatch and sync.

use crate::cpumask::CpuMask;
use crate::fields::{Fields, Owner, Value};
use crate::hw::{Access, Hw, Phase, Root, Scope, Tlbi};
use crate::policy::Policy;
use crate::shootdown::{addr_of, CacheLine};
use crate::sync::{spin_loop, AtomicBool, AtomicU32, AtomicU64, Ordering};
use crate::types::{CpuId, MmId, VirtAddr};
use alloc::vec::Vec;

use super::linux_x86_common::{
    boot_mms, choose_dynamic_asid, cpumask_any_but, do_kernel_range_flush, kern_pcid, FlushExtent, FlushTlbInfo,
    PcidMms, TlbContext, INIT_MM_CTX_ID,
};
use super::linux_x86_common::{boot_tlbstate, pcid_mms_in_slots, pcid_switch_and_flushes};
pub use super::linux_x86_common::{Pti, TLB_NR_DYN_ASIDS, TLB_SINGLE_PAGE_FLUSH_CEILING};

/// Which kernel's `tlb.c` and `smp.c`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// v5.12: local flush first, then the IPIs and the wait; `is_lazy` in
    /// `cpu_tlbstate`'s first line, stored at every switch.
    V512,
    /// v5.13: IPIs, local flush, wait; `is_lazy` alone in
    /// `cpu_tlbstate_shared`, stored only when it changes.
    V513,
}

/// What a call-function request runs (`csd->func` with `csd->info`).
#[derive(Clone, Copy, Debug)]
enum Func {
    /// `flush_tlb_func` (v5.12's `flush_tlb_func_remote` on a target); reclaim's
    /// batch is v5.12's `full_flush_tlb_info`.
    Flush(FlushTlbInfo),
    /// `do_kernel_range_flush`: `INVLPG` per page.
    KernelRange { start: VirtAddr, pages: u64 },
    /// `do_flush_tlb_all`.
    FlushAll,
}

/// A CPU's `cpu_tlbstate`, laid out so that the lines hold what the kernel's
/// hold: `loaded_mm`, `loaded_mm_asid`, `next_asid`, `is_lazy` and `ctxs[0..2]`
/// on the first line (`ctxs[0]` at 32), `ctxs[2..6]` on the second; plus
/// `cpu_tlbstate_shared` on a third.
#[repr(C, align(64))]
struct TlbState {
    /// The mm slot in CR3.
    loaded_mm: AtomicU32,
    loaded_mm_asid: AtomicU32,
    /// Not the kernel's: which incarnation of the slot is loaded (where the
    /// kernel has `last_user_mm`).
    loaded_ctx_id: AtomicU64,
    next_asid: AtomicU32,
    /// v5.12's `cpu_tlbstate.is_lazy`.
    is_lazy_512: AtomicBool,
    /// The CR4 shadow: this CPU's alone, never touched here.
    _cr4: u64,
    ctxs: [TlbContext; TLB_NR_DYN_ASIDS],
    /// v5.13's `cpu_tlbstate_shared.is_lazy`, on a line of its own.
    is_lazy_513: CacheLine<AtomicBool>,
}

/// The per-mm part: `mm->context` on one line, `mm_cpumask` on its own.
#[repr(C, align(64))]
struct MmContext {
    ctx_id: AtomicU64,
    tlb_gen: AtomicU64,
    cpumask: CacheLine<CpuMask>,
}

/// A `call_single_data`: `CSD_FLAG_LOCK`, set by its initiator and cleared by
/// the target's handler when the function has run.
type Csd = CacheLine<AtomicBool>;

/// Linux x86 v5.12 or v5.13: PCID slots, lazy TLB, `tlb_gen` and
/// `smp_call_function_many_cond` with its csds ([`Version`]).
pub struct LinuxX86v513 {
    version: Version,
    ncpus: usize,
    last_mm_ctx_id: AtomicU64,
    cpu_tlbstate: Vec<TlbState>,
    mms: Vec<MmContext>,
    /// `per_cpu_ptr(cfd_data[initiator].csd, target)`: `initiator * ncpus + target`.
    csd: Vec<Csd>,
    /// v5.12's `csd_stack` of `smp_call_function_single`, per initiator.
    csd_stack: Vec<Csd>,
    /// Each CPU's `call_single_queue` head: a line the machine accounts.
    call_single_queue: Vec<CacheLine<u8>>,
    /// Each CPU's `flush_tlb_info`: a line the machine accounts (the handler
    /// gets the request by value).
    flush_tlb_info: Vec<CacheLine<u8>>,
    /// v5.12's `static const struct flush_tlb_info full_flush_tlb_info`, which
    /// reclaim's batch hands to every CPU: read-only, so shared by all.
    full_flush_tlb_info: CacheLine<u8>,
    /// `tlb_single_page_flush_ceiling`: ranges of more pages are flushed whole.
    ceiling: u64,
    /// Page-table isolation, if on ([`LinuxX86v513::with_pti`]).
    pti: Option<Pti>,
}

impl LinuxX86v513 {
    /// Returns `version` for `ncpus` CPUs and `max_mms` slots (slot 0 is
    /// `init_mm`), every CPU on `init_mm` in slot 0 (`initialize_tlbstate_and_flush`).
    pub fn new(ncpus: usize, max_mms: usize, version: Version) -> Self {
        let cpu_tlbstate = (0..ncpus)
            .map(|_| {
                boot_tlbstate!(TlbState {
                    is_lazy_512: AtomicBool::new(false),
                    _cr4: 0,
                    is_lazy_513: CacheLine(AtomicBool::new(false)),
                })
            })
            .collect();
        let mms = boot_mms(max_mms, |ctx_id| MmContext {
            ctx_id,
            tlb_gen: AtomicU64::new(0),
            cpumask: CacheLine(CpuMask::new(ncpus)),
        });
        let line = |_| CacheLine(0u8);
        LinuxX86v513 {
            version,
            ncpus,
            last_mm_ctx_id: AtomicU64::new(INIT_MM_CTX_ID),
            cpu_tlbstate,
            mms,
            csd: (0..ncpus * ncpus).map(|_| CacheLine(AtomicBool::new(false))).collect(),
            csd_stack: (0..ncpus).map(|_| CacheLine(AtomicBool::new(false))).collect(),
            call_single_queue: (0..ncpus).map(line).collect(),
            flush_tlb_info: (0..ncpus).map(line).collect(),
            ceiling: TLB_SINGLE_PAGE_FLUSH_CEILING,
            full_flush_tlb_info: CacheLine(0),
            pti: None,
        }
    }

    /// Returns this policy with `tlb_single_page_flush_ceiling` set to `pages`
    /// (the debugfs file's write): user and kernel ranges of more pages are
    /// flushed whole, 0 flushing every range whole.
    pub fn with_flush_ceiling(mut self, pages: u64) -> Self {
        self.ceiling = pages;
        self
    }

    /// Returns this policy with page-table isolation, the user PCID flushed as
    /// `how` says (the module's comment).
    pub fn with_pti(mut self, how: Pti) -> Self {
        self.pti = Some(how);
        self
    }

    /// Returns how the user PCID is flushed under PTI, `None` without PTI.
    pub fn pti(&self) -> Option<Pti> {
        self.pti
    }

    /// Returns the kernel modelled.
    pub fn version(&self) -> Version {
        self.version
    }

    /// Returns the mm slot `cpu` has in CR3.
    pub fn loaded_mm(&self, cpu: CpuId) -> MmId {
        // Relaxed: a report.
        MmId(self.cpu_tlbstate[cpu.index()].loaded_mm.load(Ordering::Relaxed))
    }

    /// Returns whether `cpu` is in lazy TLB mode.
    pub fn is_lazy(&self, cpu: CpuId) -> bool {
        // SeqCst: as every access to is_lazy (see `switch_mm_irqs_off`).
        self.lazy(cpu).load(Ordering::SeqCst)
    }

    /// Returns whether `cpu` is in `mm_cpumask(mm)`.
    pub fn in_mm_cpumask(&self, mm: MmId, cpu: CpuId) -> bool {
        self.mms[mm.index()].cpumask.test(cpu)
    }

    /// Returns the flush generation of `mm`.
    pub fn tlb_gen(&self, mm: MmId) -> u64 {
        PcidMms::tlb_gen(self, mm)
    }

    /// Returns `(ctx_id, tlb_gen)` of slot `asid` of `cpu`.
    ///
    /// # Panics
    /// If `asid` is not below [`TLB_NR_DYN_ASIDS`].
    pub fn slot(&self, cpu: CpuId, asid: usize) -> (u64, u64) {
        let c = &self.cpu_tlbstate[cpu.index()].ctxs[asid];
        // Relaxed: a report.
        (c.ctx_id.load(Ordering::Relaxed), c.tlb_gen.load(Ordering::Relaxed))
    }

    /// Returns whether `initiator`'s csd for `target` is locked (a request is
    /// queued or running).
    pub fn csd_locked(&self, initiator: CpuId, target: CpuId) -> bool {
        // Relaxed: a report.
        self.csd(initiator.index(), target.index()).load(Ordering::Relaxed)
    }

    /// Returns the address the machine accounts `cpu`'s `is_lazy` at.
    pub fn is_lazy_addr(&self, cpu: CpuId) -> usize {
        addr_of(self.lazy(cpu))
    }

    /// Returns the address of `cpu`'s `cpu_tlbstate.loaded_mm`.
    pub fn loaded_mm_addr(&self, cpu: CpuId) -> usize {
        addr_of(&self.cpu_tlbstate[cpu.index()].loaded_mm)
    }

    /// Returns the address of `initiator`'s csd for `target`.
    pub fn csd_addr(&self, initiator: CpuId, target: CpuId) -> usize {
        addr_of(self.csd(initiator.index(), target.index()))
    }

    /// Returns the address of `initiator`'s stack csd (v5.12's one-target path).
    pub fn csd_stack_addr(&self, initiator: CpuId) -> usize {
        addr_of(&self.csd_stack[initiator.index()])
    }

    fn v512(&self) -> bool {
        self.version == Version::V512
    }

    /// The `is_lazy` this kernel keeps: in `cpu_tlbstate` (v5.12) or in
    /// `cpu_tlbstate_shared` (v5.13).
    fn lazy(&self, c: CpuId) -> &AtomicBool {
        let st = &self.cpu_tlbstate[c.index()];
        match self.version {
            Version::V512 => &st.is_lazy_512,
            Version::V513 => &st.is_lazy_513,
        }
    }

    fn csd(&self, initiator: usize, target: usize) -> &Csd {
        &self.csd[initiator * self.ncpus + target]
    }

    /// `tlb_is_not_lazy(c)`: a read of `c`'s `is_lazy` line, whose address
    /// depends on no earlier load: v5.13's loop over the mask is a walk, v5.12's
    /// queues a csd (an atomic) between two of them.
    fn tlb_is_not_lazy<H: Hw>(&self, hw: &H, c: CpuId) -> bool {
        hw.shared(addr_of(self.lazy(c)), Access::ReadAhead);
        !self.is_lazy(c)
    }

    /// Accounts a write of this CPU's `cpu_tlbstate` line holding `loaded_mm`.
    fn touch_state<H: Hw>(&self, hw: &H) {
        hw.shared(addr_of(&self.cpu_tlbstate[hw.cpu().index()].loaded_mm), Access::Write);
    }

    /// Returns whether `st`'s CPU has this incarnation of `mm` loaded (by slot
    /// and `ctx_id`, as the later models).
    fn is_loaded(&self, st: &TlbState, mm: MmId) -> bool {
        self.is_loaded_as(&st.loaded_mm, &st.loaded_ctx_id, mm)
    }

    /// Makes `next` this CPU's mm (`switch_mm_irqs_off`); [`MmId::KERNEL`]
    /// leaves lazy mode for `init_mm`.
    fn switch_mm_irqs_off<H: Hw>(&self, hw: &H, next: MmId) {
        let cpu = hw.cpu();
        let st = &self.cpu_tlbstate[cpu.index()];
        // Relaxed: this CPU's own state.
        let prev = MmId(st.loaded_mm.load(Ordering::Relaxed));
        let prev_asid = st.loaded_mm_asid.load(Ordering::Relaxed);
        // SeqCst: a flusher bumps tlb_gen then reads is_lazy; we clear is_lazy and
        // then read tlb_gen (after a full barrier or a locked RMW on every path).
        let was_lazy = self.is_lazy(cpu);
        // 09c5272e4861 (v5.13): store only when it changes.
        if self.v512() || was_lazy {
            hw.shared(addr_of(self.lazy(cpu)), Access::Write);
            self.lazy(cpu).store(false, Ordering::SeqCst);
        }

        let (asid, need_flush, next_tlb_gen);
        if self.is_loaded(st, next) {
            if !was_lazy {
                return;
            }
            // Back from lazy mode: catch up in the same slot if it fell behind.
            let Some(behind) = self.lazy_catch_up(hw, &st.ctxs[prev_asid as usize], next) else {
                return;
            };
            (asid, need_flush, next_tlb_gen) = (prev_asid, true, behind);
        } else {
            // Leave prev's mask, join next's (locked RMWs), then read its generation.
            next_tlb_gen = self.switch_mm_cpumask(hw, prev, next);
            (asid, need_flush) = choose_dynamic_asid(&st.ctxs, &st.next_asid, self.ctx_id(next), next_tlb_gen);
            // this_cpu_write(cpu_tlbstate.loaded_mm, LOADED_MM_SWITCHING).
            self.touch_state(hw);
        }
        if need_flush {
            let slot = &st.ctxs[asid as usize];
            // Accounted: `ctxs[0..2]` share `cpu_tlbstate`'s first line (and v5.12's `is_lazy`).
            hw.shared(addr_of(slot), Access::Write);
            slot.fill(self.ctx_id(next), next_tlb_gen);
        }
        hw.write_root(Root::Mm(next), kern_pcid(asid), !need_flush);
        self.touch_state(hw);
        // Relaxed: CR3 was written first (it serialises); only this CPU reads these.
        st.loaded_ctx_id.store(self.ctx_id(next), Ordering::Relaxed);
        st.loaded_mm_asid.store(asid, Ordering::Relaxed);
        st.loaded_mm.store(next.0, Ordering::Relaxed);
    }

    /// `enter_lazy_tlb`: CR3 and the mask stay, `is_lazy` is set.
    fn enter_lazy_tlb<H: Hw>(&self, hw: &H) {
        let cpu = hw.cpu();
        // Relaxed: this CPU's own state.
        if self.cpu_tlbstate[cpu.index()].loaded_mm.load(Ordering::Relaxed) == MmId::KERNEL.0 {
            return;
        }
        hw.shared(addr_of(self.lazy(cpu)), Access::Write);
        // SeqCst: see `switch_mm_irqs_off`.
        self.lazy(cpu).store(true, Ordering::SeqCst);
    }

    /// Brings this CPU up to date for `f` (`flush_tlb_func`; v5.12's
    /// `flush_tlb_func_common` behind `flush_tlb_func_local` or, with `remote`,
    /// `flush_tlb_func_remote`). `remote` is whether the `f->mm != loaded_mm`
    /// test runs: on every target, and on the initiator only in v5.12's second
    /// local call.
    fn flush_tlb_func<H: Hw>(&self, hw: &H, f: &FlushTlbInfo, remote: bool) {
        let cpu = hw.cpu();
        let st = &self.cpu_tlbstate[cpu.index()];
        // Relaxed: this CPU's own state.
        let loaded_mm = MmId(st.loaded_mm.load(Ordering::Relaxed));
        let asid = st.loaded_mm_asid.load(Ordering::Relaxed);
        let local_tlb_gen = st.ctxs[asid as usize].tlb_gen.load(Ordering::Relaxed);
        // v5.13 reads the loaded mm's generation first thing; v5.12's remote
        // entry tests the mm before `flush_tlb_func_common` reads it.
        let mut mm_tlb_gen = None;
        if !self.v512() {
            mm_tlb_gen = Some(self.read_tlb_gen(hw, loaded_mm));
        }
        if remote && f.mm.is_some_and(|mm| !self.is_loaded(st, mm)) {
            return;
        }
        let mm_tlb_gen = match mm_tlb_gen {
            Some(g) => g,
            None => self.read_tlb_gen(hw, loaded_mm),
        };
        if loaded_mm.is_kernel() {
            return;
        }
        // SeqCst: see `switch_mm_irqs_off`.
        if self.is_lazy(cpu) {
            // A freed-tables flush, or reclaim's from a lazy CPU: leave the mm.
            self.switch_mm_irqs_off(hw, MmId::KERNEL);
            return;
        }
        if local_tlb_gen == mm_tlb_gen {
            return;
        }
        // Partial only if this is exactly the next generation and the latest.
        let range = f.extent.partial(f.new_tlb_gen, local_tlb_gen, mm_tlb_gen);
        st.ctxs[asid as usize].flush_up_to(hw, self.pti, asid, loaded_mm, range, mm_tlb_gen);
    }

    /// Runs `func` on this CPU; `initiator` is whose `flush_tlb_info` it reads.
    fn run_func<H: Hw>(&self, hw: &H, func: Func, initiator: CpuId, remote: bool) {
        match func {
            Func::Flush(info) => {
                let line = if self.v512() && info.mm.is_none() {
                    &self.full_flush_tlb_info
                } else {
                    &self.flush_tlb_info[initiator.index()]
                };
                hw.shared(addr_of(&**line), Access::Read);
                self.flush_tlb_func(hw, &info, remote);
            }
            Func::KernelRange { start, pages } => {
                hw.shared(addr_of(&*self.flush_tlb_info[initiator.index()]), Access::Read);
                do_kernel_range_flush(hw, start, pages, false);
            }
            Func::FlushAll => hw.tlbi(Tlbi::All, Scope::Local),
        }
    }

    /// `get_flush_tlb_info`: this CPU writes its per-CPU request line.
    fn get_flush_tlb_info<H: Hw>(&self, hw: &H) {
        hw.shared(addr_of(&*self.flush_tlb_info[hw.cpu().index()]), Access::Write);
    }

    /// `flush_smp_call_function_queue` on a target for `initiator`'s request:
    /// take the queue, read the csd, run the function, release the csd.
    fn call_function_interrupt<H: Hw>(&self, hw: &H, initiator: CpuId, stack: bool, func: Func) {
        let me = hw.cpu();
        let csd = if stack { &self.csd_stack[initiator.index()] } else { self.csd(initiator.index(), me.index()) };
        // llist_del_all(this_cpu_ptr(&call_single_queue)): an exchange, in the
        // order the line's requests reach it (the pushes' reads and exchanges
        // are not put behind a take the simulator ran before them).
        hw.shared(addr_of(&*self.call_single_queue[me.index()]), Access::RmwAnyOrder);
        // csd->func, csd->info.
        hw.shared(addr_of(csd), Access::Read);
        self.run_func(hw, func, initiator, true);
        // csd_unlock: smp_store_release(&csd->flags, 0).
        hw.shared(addr_of(csd), Access::Write);
        // Release: the function's work is done before the initiator sees the csd free.
        csd.store(false, Ordering::Release);
    }

    /// `csd_lock_wait`: poll until the target has released `csd`.
    fn csd_lock_wait<H: Hw>(&self, hw: &H, csd: &Csd) {
        loop {
            hw.shared(addr_of(csd), Access::Read);
            // Acquire: smp_cond_load_acquire, pairing with the handler's release.
            if !csd.load(Ordering::Acquire) {
                break;
            }
            spin_loop();
        }
    }

    /// `csd_lock` then the queueing of `smp_call_function_many_cond`: the csd is
    /// free (its previous request was waited for), locked, and added to
    /// `target`'s `call_single_queue`.
    fn queue_csd<H: Hw>(&self, hw: &H, target: CpuId) {
        let csd = self.csd(hw.cpu().index(), target.index());
        self.csd_lock_wait(hw, csd);
        hw.shared(addr_of(csd), Access::Write);
        // Relaxed: `csd->flags |= CSD_FLAG_LOCK` then smp_wmb(); the IPI orders
        // the stores before the handler's loads.
        csd.store(true, Ordering::Relaxed);
        self.llist_add(hw, target);
    }

    /// `llist_add` onto `target`'s `call_single_queue`: `READ_ONCE` of the
    /// head, then the cmpxchg that links the csd in, in whatever order the
    /// other CPUs' pushes and the target's take reach the line (a failed
    /// cmpxchg leaves the line here, so its retry costs no move).
    fn llist_add<H: Hw>(&self, hw: &H, target: CpuId) {
        let head = addr_of(&*self.call_single_queue[target.index()]);
        hw.shared(head, Access::Read);
        hw.shared(head, Access::RmwAnyOrder);
    }

    /// Sends the IPIs of this CPU's queued csds to `targets` (none is this CPU).
    fn send<H: Hw>(&self, hw: &H, targets: &CpuMask, first: CpuId, func: Func) {
        let me = hw.cpu();
        hw.phase(Phase::Dispatch);
        hw.spin_on(self.csd_addr(me, first));
        hw.send_call_function_ipi_async(targets, move |h| self.call_function_interrupt(h, me, false, func));
    }

    /// Waits on the csd of every CPU in `others` (`csd_lock_wait` in turn).
    fn wait_all<H: Hw>(&self, hw: &H, others: &CpuMask) {
        let me = hw.cpu().index();
        hw.phase(Phase::Sync);
        others.for_each(|t| self.csd_lock_wait(hw, self.csd(me, t.index())));
        hw.phase(Phase::Done);
    }

    /// Returns the CPUs of `mask` other than this one, and the first of them.
    fn others_of<H: Hw>(&self, hw: &H, mask: &CpuMask) -> (CpuMask, Option<CpuId>, usize) {
        let me = hw.cpu();
        let others = CpuMask::new(self.ncpus);
        let (mut first, mut n) = (None, 0);
        mask.for_each(|c| {
            if c != me {
                others.set(c);
                first = first.or(Some(c));
                n += 1;
            }
        });
        (others, first, n)
    }

    /// v5.12's `smp_call_function_many_cond(mask, func, info, true, cond)`, with
    /// `cond` `tlb_is_not_lazy` or none: the one-target fast path, or the csds
    /// of every CPU whose condition holds, one IPI, and a wait on every csd.
    fn smp_call_function_many_512<H: Hw>(&self, hw: &H, mask: &CpuMask, func: Func, cond: bool) {
        let (others, first, n) = self.others_of(hw, mask);
        let Some(first) = first else { return };
        if n == 1 {
            if !cond || self.tlb_is_not_lazy(hw, first) {
                self.smp_call_function_single_512(hw, first, func);
            }
            return;
        }
        hw.phase(Phase::Issue);
        let targets = CpuMask::new(self.ncpus);
        let mut spin = None;
        others.for_each(|t| {
            if cond && !self.tlb_is_not_lazy(hw, t) {
                return;
            }
            self.queue_csd(hw, t);
            targets.set(t);
            spin = spin.or(Some(t));
        });
        if let Some(s) = spin {
            self.send(hw, &targets, s, func);
        }
        // Every CPU of the mask, those the condition skipped included.
        self.wait_all(hw, &others);
    }

    /// v5.12's `smp_call_function_single(cpu, func, info, true)`: a csd on this
    /// CPU's stack, queued on `target`, and the wait for it.
    fn smp_call_function_single_512<H: Hw>(&self, hw: &H, target: CpuId, func: Func) {
        let me = hw.cpu();
        let csd = &self.csd_stack[me.index()];
        hw.phase(Phase::Issue);
        // csd_stack = { .flags = CSD_FLAG_LOCK | CSD_TYPE_SYNC }, func, info.
        hw.shared(addr_of(csd), Access::Write);
        // Relaxed: ordered before the handler's loads by the IPI.
        csd.store(true, Ordering::Relaxed);
        self.llist_add(hw, target);
        hw.phase(Phase::Dispatch);
        hw.spin_on(addr_of(csd));
        let one = CpuMask::new(self.ncpus);
        one.set(target);
        hw.send_call_function_ipi_async(&one, move |h| self.call_function_interrupt(h, me, true, func));
        hw.phase(Phase::Sync);
        self.csd_lock_wait(hw, csd);
        hw.phase(Phase::Done);
    }

    /// v5.13's `smp_call_function_many_cond(mask, func, info, SCF_WAIT |
    /// SCF_RUN_LOCAL, NULL)`: queue and send to the others, run `func` here if
    /// this CPU is in `mask`, then wait.
    fn smp_call_function_many_513<H: Hw>(&self, hw: &H, mask: &CpuMask, func: Func) {
        let me = hw.cpu();
        let run_local = mask.test(me);
        let (others, first, _) = self.others_of(hw, mask);
        if let Some(first) = first {
            hw.phase(Phase::Issue);
            others.for_each(|t| self.queue_csd(hw, t));
            self.send(hw, &others, first, func);
        }
        if run_local {
            hw.irqs_off(|| self.run_func(hw, func, me, false));
        }
        if first.is_some() {
            self.wait_all(hw, &others);
        }
    }

    /// v5.12's `native_flush_tlb_others`: every CPU of `mask` but this one with
    /// freed tables, else `on_each_cpu_cond_mask(tlb_is_not_lazy, ...)`, which
    /// runs the function here again afterwards if this CPU is in `mask` and not
    /// lazy.
    fn flush_tlb_others_512<H: Hw>(&self, hw: &H, mask: &CpuMask, info: FlushTlbInfo) {
        let me = hw.cpu();
        if info.freed_tables {
            self.smp_call_function_many_512(hw, mask, Func::Flush(info), false);
            return;
        }
        self.smp_call_function_many_512(hw, mask, Func::Flush(info), true);
        if mask.test(me) && self.tlb_is_not_lazy(hw, me) {
            hw.irqs_off(|| self.flush_tlb_func(hw, &info, true));
        }
    }

    /// v5.13's `native_flush_tlb_multi`: `on_each_cpu_mask` on `mask` with freed
    /// tables, else on the CPUs of `mask` that are not lazy (this one included).
    fn flush_tlb_multi_513<H: Hw>(&self, hw: &H, mask: &CpuMask, info: FlushTlbInfo) {
        if info.freed_tables {
            self.smp_call_function_many_513(hw, mask, Func::Flush(info));
            return;
        }
        let cond = CpuMask::new(self.ncpus);
        mask.for_each(|c| {
            if self.tlb_is_not_lazy(hw, c) {
                cond.set(c);
            }
        });
        self.smp_call_function_many_513(hw, &cond, Func::Flush(info));
    }

    /// Invalidates `extent` of `mm` wherever it may be cached and returns when
    /// that is done (`flush_tlb_mm_range`).
    fn flush_tlb_mm_range<H: Hw>(&self, hw: &H, mm: MmId, extent: FlushExtent, freed_tables: bool) {
        let cpu = hw.cpu();
        let extent = extent.capped(self.ceiling);
        // A locked RMW and full barrier ordering the page-table change before the
        // mask and is_lazy reads below.
        let new_tlb_gen = self.inc_mm_tlb_gen(hw, mm);
        self.get_flush_tlb_info(hw);
        let info = FlushTlbInfo { mm: Some(mm), extent, new_tlb_gen, freed_tables };
        let mask = &self.mms[mm.index()].cpumask;
        let loaded = self.is_loaded(&self.cpu_tlbstate[cpu.index()], mm);
        match self.version {
            Version::V512 => {
                if loaded {
                    hw.irqs_off(|| self.flush_tlb_func(hw, &info, false));
                }
                self.touch_mask(hw, mm, Access::Read);
                if cpumask_any_but(mask, cpu) {
                    self.flush_tlb_others_512(hw, mask, info);
                }
            }
            Version::V513 => {
                self.touch_mask(hw, mm, Access::Read);
                if cpumask_any_but(mask, cpu) {
                    self.flush_tlb_multi_513(hw, mask, info);
                } else if loaded {
                    hw.irqs_off(|| self.flush_tlb_func(hw, &info, false));
                }
            }
        }
    }

    /// `arch_tlbbatch_flush`: one request with no mm and no generation for the
    /// CPUs of `batch` (v5.12's static `full_flush_tlb_info`, v5.13's per-CPU
    /// `flush_tlb_info`, which carries the initiating CPU).
    fn arch_tlbbatch_flush<H: Hw>(&self, hw: &H, batch: &CpuMask) {
        let cpu = hw.cpu();
        let info = FlushTlbInfo::BATCH;
        if !self.v512() {
            self.get_flush_tlb_info(hw);
        }
        match self.version {
            Version::V512 => {
                if batch.test(cpu) {
                    hw.irqs_off(|| self.flush_tlb_func(hw, &info, false));
                }
                if cpumask_any_but(batch, cpu) {
                    self.flush_tlb_others_512(hw, batch, info);
                }
            }
            Version::V513 => {
                if cpumask_any_but(batch, cpu) {
                    self.flush_tlb_multi_513(hw, batch, info);
                } else if batch.test(cpu) {
                    hw.irqs_off(|| self.flush_tlb_func(hw, &info, false));
                }
            }
        }
    }
}

// The shared code reaches `mm->context` here, and accounts its two lines.
pcid_mms_in_slots!(LinuxX86v513);

impl Policy for LinuxX86v513 {
    /// `init_new_context`: a fresh `ctx_id`, generation 0, an empty mask.
    fn mm_init(&self, mm: MmId) {
        self.init_new_context(mm, &self.last_mm_ctx_id);
    }

    /// Does nothing: the mm's slots never match a new `ctx_id`.
    fn mm_release<H: Hw>(&self, _hw: &H, _mm: MmId) {}

    // `switch_mm` and the user flushes, as every model with PCIDs has them.
    pcid_switch_and_flushes!();

    /// `try_to_unmap_flush`: `arch_tlbbatch_add_mm` for each mm (a generation
    /// bump and the union of the masks), then `arch_tlbbatch_flush`.
    fn flush_batch<H: Hw>(&self, hw: &H, mms: &[MmId]) {
        let batch = CpuMask::new(self.ncpus);
        for &mm in mms {
            self.arch_tlbbatch_add_mm(hw, &batch, mm);
        }
        self.arch_tlbbatch_flush(hw, &batch);
    }

    /// `flush_tlb_kernel_range`: `on_each_cpu` of `INVLPG` per page, or of a
    /// flush of everything above the ceiling; v5.12 runs it here after the
    /// wait, v5.13 between the IPIs and the wait.
    fn flush_kernel_range<H: Hw>(&self, hw: &H, start: VirtAddr, pages: u64) {
        let func = if pages > self.ceiling {
            Func::FlushAll
        } else {
            self.get_flush_tlb_info(hw);
            Func::KernelRange { start, pages }
        };
        let all = CpuMask::new(self.ncpus);
        all.set_all();
        let me = hw.cpu();
        match self.version {
            Version::V512 => {
                self.smp_call_function_many_512(hw, &all, func, false);
                hw.irqs_off(|| self.run_func(hw, func, me, false));
            }
            Version::V513 => self.smp_call_function_many_513(hw, &all, func),
        }
    }

    fn name_fields(&self, f: &mut dyn Fields) {
        f.add(&self.last_mm_ctx_id, format_args!("last_mm_ctx_id"), Value::Number);
        let lazy = match self.version {
            Version::V512 => "cpu_tlbstate",
            Version::V513 => "cpu_tlbstate_shared",
        };
        for (c, t) in self.cpu_tlbstate.iter().enumerate() {
            f.add(&t.loaded_mm, format_args!("cpu_tlbstate[cpu{c}].loaded_mm"), Value::Mm);
            f.add(&t.loaded_ctx_id, format_args!("cpu_tlbstate[cpu{c}].loaded_mm->context.ctx_id"), Value::Number);
            f.add(&t.loaded_mm_asid, format_args!("cpu_tlbstate[cpu{c}].loaded_mm_asid"), Value::Number);
            f.add(&t.next_asid, format_args!("cpu_tlbstate[cpu{c}].next_asid"), Value::Number);
            TlbContext::name_slots(&t.ctxs, f, c);
            let is_lazy = self.lazy(CpuId(c as u32));
            f.add(is_lazy, format_args!("{lazy}[cpu{c}].is_lazy"), Value::Bool);
            // Per-CPU variables only their CPU writes; the CPUs that flush read
            // `is_lazy` alone.
            let (mine, read_by_all) = Owner::per_cpu(c);
            f.own(is_lazy, read_by_all);
            f.own(&t.loaded_mm, mine);
            f.own(&t.loaded_ctx_id, mine);
            f.own(&t.loaded_mm_asid, mine);
            f.own(&t.next_asid, mine);
            for x in &t.ctxs {
                f.own(&x.ctx_id, mine);
                f.own(&x.tlb_gen, mine);
            }
        }
        for i in 0..self.ncpus {
            for t in 0..self.ncpus {
                if i != t {
                    f.add(&**self.csd(i, t), format_args!("cfd_data[cpu{i}].csd[cpu{t}].locked"), Value::Bool);
                }
            }
            if self.v512() {
                f.add(&*self.csd_stack[i], format_args!("cpu{i}.csd_stack.locked"), Value::Bool);
            }
        }
        for m in 0..self.mms.len() {
            self.mm_fields(MmId(m as u32)).name(f, m);
        }
    }
}

#[cfg(test)]
mod tests;
