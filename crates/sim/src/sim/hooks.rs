//! The policy as the simulator calls it.
//!
//! [`Policy`]'s hooks are generic over the hardware they run on, so a policy
//! is not an object. The simulator holds it as a [`Hooks`]: the same hooks at
//! the simulator's two views of the hardware (a CPU's [`CpuHw`], and reclaim's
//! [`NoSync`], which holds completion barriers back), implemented once for
//! every policy type. So only this adapter and the policy's own code are
//! compiled for each policy type; the simulator (its events, TLBs, kernel
//! paths and workloads) is compiled once. A hook costs one indirect call;
//! what the policy does on the hardware inside it stays a direct call on the
//! view's own type.

use std::any::Any;

use tlbkit_policy::{Lazy, MmId, Policy, Tick, VirtAddr};

use super::reclaim::NoSync;
use crate::machine::CpuHw;

/// The hooks of [`Policy`] that the simulator calls, at its hardware views.
/// Each forwards to the policy's hook of the same name.
pub(crate) trait Hooks: Sync + Any {
    /// [`Policy::mm_init`].
    fn mm_init(&self, mm: MmId);
    /// [`Policy::mm_release`].
    fn mm_release(&self, hw: &CpuHw<'_>, mm: MmId);
    /// [`Policy::switch_mm`].
    fn switch_mm(&self, hw: &CpuHw<'_>, next: MmId);
    /// [`Policy::enter_lazy`].
    fn enter_lazy(&self, hw: &CpuHw<'_>, who: Lazy);
    /// [`Policy::flush_page`].
    fn flush_page(&self, hw: &CpuHw<'_>, mm: MmId, va: VirtAddr);
    /// [`Policy::flush_range`].
    fn flush_range(&self, hw: &CpuHw<'_>, mm: MmId, start: VirtAddr, pages: u64);
    /// [`Policy::flush_range`] with the completion barriers held back.
    fn flush_range_unsynced(&self, hw: &NoSync<'_, '_>, mm: MmId, start: VirtAddr, pages: u64);
    /// [`Policy::flush_mm`].
    fn flush_mm(&self, hw: &CpuHw<'_>, mm: MmId);
    /// [`Policy::flush_batch`].
    fn flush_batch(&self, hw: &CpuHw<'_>, mms: &[MmId]);
    /// [`Policy::tlbbatch_add_pending`], with the completion barriers held back.
    fn tlbbatch_add_pending(&self, hw: &NoSync<'_, '_>, mm: MmId, va: VirtAddr);
    /// [`Policy::tlbbatch_should_defer`].
    fn tlbbatch_should_defer(&self, hw: &CpuHw<'_>, mm: MmId) -> bool;
    /// [`Policy::flush_batched_pending`].
    fn flush_batched_pending(&self, hw: &CpuHw<'_>, mm: MmId);
    /// [`Policy::flush_kernel_range`].
    fn flush_kernel_range(&self, hw: &CpuHw<'_>, start: VirtAddr, pages: u64);
    /// [`Policy::tick`].
    fn tick(&self, hw: &CpuHw<'_>, at: Tick);
    /// The policy, for [`super::Sim::policy`] to give back as its own type.
    fn as_any(&self) -> &dyn Any;
}

impl<P: Policy + 'static> Hooks for P {
    fn mm_init(&self, mm: MmId) {
        Policy::mm_init(self, mm)
    }
    fn mm_release(&self, hw: &CpuHw<'_>, mm: MmId) {
        Policy::mm_release(self, hw, mm)
    }
    fn switch_mm(&self, hw: &CpuHw<'_>, next: MmId) {
        Policy::switch_mm(self, hw, next)
    }
    fn enter_lazy(&self, hw: &CpuHw<'_>, who: Lazy) {
        Policy::enter_lazy(self, hw, who)
    }
    fn flush_page(&self, hw: &CpuHw<'_>, mm: MmId, va: VirtAddr) {
        Policy::flush_page(self, hw, mm, va)
    }
    fn flush_range(&self, hw: &CpuHw<'_>, mm: MmId, start: VirtAddr, pages: u64) {
        Policy::flush_range(self, hw, mm, start, pages)
    }
    fn flush_range_unsynced(&self, hw: &NoSync<'_, '_>, mm: MmId, start: VirtAddr, pages: u64) {
        Policy::flush_range(self, hw, mm, start, pages)
    }
    fn flush_mm(&self, hw: &CpuHw<'_>, mm: MmId) {
        Policy::flush_mm(self, hw, mm)
    }
    fn flush_batch(&self, hw: &CpuHw<'_>, mms: &[MmId]) {
        Policy::flush_batch(self, hw, mms)
    }
    fn tlbbatch_add_pending(&self, hw: &NoSync<'_, '_>, mm: MmId, va: VirtAddr) {
        Policy::tlbbatch_add_pending(self, hw, mm, va)
    }
    fn tlbbatch_should_defer(&self, hw: &CpuHw<'_>, mm: MmId) -> bool {
        Policy::tlbbatch_should_defer(self, hw, mm)
    }
    fn flush_batched_pending(&self, hw: &CpuHw<'_>, mm: MmId) {
        Policy::flush_batched_pending(self, hw, mm)
    }
    fn flush_kernel_range(&self, hw: &CpuHw<'_>, start: VirtAddr, pages: u64) {
        Policy::flush_kernel_range(self, hw, start, pages)
    }
    fn tick(&self, hw: &CpuHw<'_>, at: Tick) {
        Policy::tick(self, hw, at)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}
