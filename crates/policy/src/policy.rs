//! The interface between the (simulated or real) kernel and a TLB policy.
//!
//! The kernel calls a policy at the points where a real kernel calls its arch
//! layer: when an address space is created or destroyed, on every context switch,
//! and after every page-table change that removes or weakens a translation.
//! Each flush call is the *dispatch* and *sync* of that change's shootdown: when
//! it returns, no CPU may use the old translation any more (the oracle checks
//! exactly that). The one exception is a lazy shootdown (LATR): while an
//! mm's `munmap` or `madvise(MADV_DONTNEED)` is in progress a policy may take
//! the completion of a flush of it over ([`crate::Hw::defer_flush`]); for that
//! call's own flushes the kernel then keeps the freed memory, and the oracle
//! its judgement, until the policy reports the flush complete, while any other
//! caller treats its flush as done when it returns.

use crate::fields::Fields;
use crate::hw::{Defer, Hw};
use crate::types::{MmId, VirtAddr};

/// Who runs on a CPU that has left every user address space behind (Linux's
/// `enter_lazy_tlb(mm, tsk)` tells them apart with `is_idle_task(tsk)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lazy {
    /// The idle task.
    Idle,
    /// A kernel thread, or a user task whose `exit_mm` just dropped its address
    /// space (it calls `enter_lazy_tlb` with itself, not the idle task).
    KernelThread,
}

/// Where the scheduler calls [`Policy::tick`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tick {
    /// The periodic timer interrupt (`scheduler_tick`, every millisecond at
    /// `HZ` = 1000) on a CPU that runs a task: an idle CPU takes none
    /// (`NO_HZ_IDLE`).
    Timer,
    /// `__schedule`, after the next task is picked and before the context
    /// switch, whether or not the task changes.
    Schedule,
}

// ANCHOR: policy_trait
/// A TLB-management policy: ASID allocation, context switch and invalidation.
///
/// All methods take `&self` and run on the CPU `hw` stands for; shared state lives
/// in [`crate::sync`] types so that concurrent calls from several CPUs are safe.
pub trait Policy: Sync {
    /// Returns whether user page-table entries are installed global (visible under
    /// every ASID). Only the no-ASID baseline does this.
    fn user_ptes_global(&self) -> bool {
        false
    }

    /// Returns whether the kernel pins the calling thread to its CPU across a
    /// user-page flush, from its `TLBI`s to the barrier that completes them
    /// (FreeBSD arm64's `pmap_invalidate_*` called `sched_pin` until late
    /// 2019). Where it does not, the thread may be preempted before the
    /// barrier and execute it on another CPU, whose barrier completes none of
    /// the first CPU's invalidations: a checker explores that move. The
    /// default is no.
    fn flushes_pinned(&self) -> bool {
        false
    }

    /// Prepares the per-address-space state of a new address space in slot `mm`
    /// (FreeBSD `pmap_pinit`, Linux `init_new_context`).
    fn mm_init(&self, mm: MmId);

    /// Releases the address space in slot `mm`: its last user is gone and its
    /// translations have been torn down and flushed (FreeBSD `pmap_release`).
    fn mm_release<H: Hw>(&self, hw: &H, mm: MmId);

    /// Makes `next` the address space of the calling CPU (FreeBSD `pmap_activate`,
    /// Linux `switch_mm`). `next` may be [`MmId::KERNEL`] for kernel threads and idle.
    fn switch_mm<H: Hw>(&self, hw: &H, next: MmId);

    /// Runs the kernel on the calling CPU without a user address space of its own
    /// (Linux `enter_lazy_tlb`; FreeBSD's idle and kernel threads run on the
    /// kernel pmap): `who` says whether the idle task or a kernel thread runs.
    /// The default is [`Policy::switch_mm`] to [`MmId::KERNEL`] for both; a policy
    /// that treats them differently overrides it.
    fn enter_lazy<H: Hw>(&self, hw: &H, who: Lazy) {
        let _ = who;
        self.switch_mm(hw, MmId::KERNEL);
    }

    /// Invalidates one user page of `mm` everywhere it may be cached, and returns
    /// only when that is done (or, where the kernel allows it, having taken the
    /// completion over with [`Hw::defer_flush`]).
    fn flush_page<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr);

    /// Invalidates `pages` user pages of `mm` starting at `start`, everywhere.
    fn flush_range<H: Hw>(&self, hw: &H, mm: MmId, start: VirtAddr, pages: u64) {
        for i in 0..pages {
            self.flush_page(hw, mm, start.add_pages(i));
        }
    }

    /// Invalidates every user translation of `mm`, everywhere.
    fn flush_mm<H: Hw>(&self, hw: &H, mm: MmId);

    /// Invalidates every user translation of each mm in `mms`, everywhere: reclaim's
    /// deferred flush of every mm it unmapped pages from (Linux `try_to_unmap_flush`,
    /// after `try_to_unmap_one` cleared the PTEs and queued each mm). When it
    /// returns, no CPU may use a translation removed before the call.
    ///
    /// The default flushes each mm with [`Policy::flush_mm`]; a policy with a batched
    /// flush of its own (Linux x86's `arch_tlbbatch_flush`, arm64's `DSB ISH`
    /// completing what [`Policy::tlbbatch_add_pending`] issued) overrides it.
    fn flush_batch<H: Hw>(&self, hw: &H, mms: &[MmId]) {
        for &mm in mms {
            self.flush_mm(hw, mm);
        }
    }

    /// Queues the invalidation of user page `va` of `mm` for reclaim's deferred
    /// flush (Linux `arch_tlbbatch_add_pending`, which `try_to_unmap_one` calls
    /// through `set_tlb_ubc_flush_pending` right after it clears the PTE, under
    /// the PTE lock). The kernel then drops the PTE lock, marks the mm
    /// (`mm->tlb_flush_batched`) and calls [`Policy::flush_batch`] later, from the
    /// same task; other CPUs may change the mm's page tables meanwhile, each
    /// calling [`Policy::flush_batched_pending`] first.
    ///
    /// The default queues nothing of its own: the kernel keeps the mm, and the
    /// default [`Policy::flush_batch`] flushes it whole. An architecture whose
    /// batch starts its invalidations here (arm64 since v6.5: `TLBI` without the
    /// completing `DSB`) overrides it.
    fn tlbbatch_add_pending<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        let _ = (hw, mm, va);
    }

    /// Whether reclaim (or migration) defers the flush of a PTE of `mm` it is
    /// about to clear to its batch (`arch_tlbbatch_should_defer`, asked by
    /// `should_defer_flush` in `try_to_unmap_one` and `try_to_migrate_one`).
    /// When it does not, the kernel clears the PTE with `ptep_clear_flush`,
    /// which flushes the page at once ([`Policy::flush_page`]'s path).
    ///
    /// The default defers always: arm64's (false only on CPUs with the
    /// `REPEAT_TLBI` erratum, not modelled). Linux x86 (v4.3 on) defers only
    /// when a CPU other than this one is in `mm_cpumask(mm)`: a flush that
    /// stays local costs no IPI, so there is nothing to batch.
    fn tlbbatch_should_defer<H: Hw>(&self, hw: &H, mm: MmId) -> bool {
        let _ = (hw, mm);
        true
    }

    /// Completes, for `mm`, whatever reclaim's deferred flushes have left pending
    /// (Linux `flush_tlb_batched_pending(mm)`, called under the PTE lock by
    /// `munmap`, `madvise` and `mprotect` before they change PTEs, when the mm is
    /// marked; its arch part is `arch_flush_tlb_batched_pending`). When it
    /// returns, no CPU may use a translation of `mm` that a reclaim removed
    /// before the call, whether or not that reclaim's own flush has run: the
    /// caller relies on it as on a flush of its own.
    ///
    /// The default is [`Policy::flush_mm`], which is what x86 has done since the
    /// function came in (3ea277194daa, v4.13) and arm64 since 4b634918384c
    /// (v6.16).
    fn flush_batched_pending<H: Hw>(&self, hw: &H, mm: MmId) {
        self.flush_mm(hw, mm);
    }

    /// Invalidates `pages` kernel (global) pages starting at `start`, everywhere.
    fn flush_kernel_range<H: Hw>(&self, hw: &H, start: VirtAddr, pages: u64);

    /// Returns whether the policy does work at scheduler ticks ([`Policy::tick`]):
    /// the checker then offers a tick as an operation. The default is false.
    fn ticks(&self) -> bool {
        false
    }

    /// Returns the rule under which the policy asks the kernel to let a flush
    /// complete late ([`Hw::defer_flush`]), `None` when it never asks (the
    /// default). The checker keeps each mm's `munmap_inprogress` in its state
    /// only for [`Defer::WhileMmFlagged`], the one rule that reads it.
    fn defers(&self) -> Option<Defer> {
        None
    }

    /// Runs at a scheduler point `at` on the calling CPU, interrupts off: LATR
    /// applies the invalidations other CPUs left for it there. The default does
    /// nothing.
    fn tick<H: Hw>(&self, hw: &H, at: Tick) {
        let _ = (hw, at);
    }

    /// Names every piece of shared state (each [`crate::sync`] atomic, spin lock
    /// and [`crate::CpuMask`]) to `f`, with the kernel's name for it and, for an
    /// element of a per-CPU or per-address-space array, its index
    /// (`f.add(&self.active_asids[c], format_args!("active_asids[cpu{c}]"), Value::GenAsid { .. })`),
    /// so that the checker's counterexamples read in kernel terms.
    ///
    /// The checker calls it once per recorded execution, after building the policy
    /// and before any CPU runs; the simulator never does, so it costs a run nothing.
    /// The default names nothing: a policy that keeps it gets traces with the
    /// offset form `[policy+0x130]` for every access, which is only a fallback
    /// (the checker's tests fail for a registered policy that leaves an accessed
    /// field unnamed). A wrapper policy forwards it to the policy it wraps.
    fn name_fields(&self, f: &mut dyn Fields) {
        let _ = f;
    }

    /// Feeds into `h` the shared state that is not made of facade atomics:
    /// the plain data a [`crate::sync::SpinLock`] protects (an ASID bitmap, a
    /// cursor), which a checker cannot see through its hooks. The checker's
    /// state hash includes it, so that two states whose locked data differ
    /// are never taken for one. It runs between steps, when a holder of the
    /// lock may be paused inside its critical section: read the data with
    /// [`crate::sync::SpinLock::peek`], never by taking the lock.
    ///
    /// The default feeds nothing, right for a policy whose shared state is
    /// all atomics; a wrapper policy forwards it to the policy it wraps.
    ///
    /// # Safety
    /// No CPU may run the policy while it is called (it reads locked data
    /// without the lock): call it only between steps of a checker that runs
    /// one CPU at a time.
    unsafe fn hash_locked(&self, h: &mut dyn core::hash::Hasher) {
        let _ = h;
    }
}
// ANCHOR_END: policy_trait
