//! A policy of your own, the way tlbkit expects one: tlbkit's worked example.
//!
//! The change it models: FreeBSD arm64 invalidates a range of user pages with
//! one broadcast `TLBI VAE1IS` per page (`pmap_invalidate_range`), however long
//! the range. Linux arm64 stops at `MAX_TLBI_OPS` and flushes the whole ASID
//! instead (`__flush_tlb_range`). [`RangeCutoff`] asks what that cut-off would do
//! for FreeBSD: ranges longer than `cutoff` pages become one `TLBI ASIDE1IS` of
//! the pmap's ASID; everything else is FreeBSD's epoch allocator unchanged.
//!
//! How it reaches `tlbkit run`, `compare` and `check`: this crate implements
//! [`Policy`] by wrapping [`FreebsdEpoch`], and one entry in the registry of the
//! simulator (`crates/sim/src/registry.rs`, the `register!` table) names it
//! `arm64-freebsd-asid-cutoff` and says how it is built. Nothing else in tlbkit
//! knows about it.
//!
//! The rules a policy follows, which this one inherits from the code it wraps:
//! shared state lives in `tlbkit_policy::sync` types (so that the checker can
//! preempt the policy at every shared access), the hardware is reached only
//! through [`Hw`], and a flush call returns only when no CPU can use the removed
//! translations any more.
#![no_std]
#![deny(missing_docs)]

use tlbkit_policy::asid::FreebsdEpoch;
use tlbkit_policy::{Fields, Hw, Lazy, MmId, Policy, VirtAddr};

/// FreeBSD arm64's epoch ASIDs, with ranges longer than `cutoff` pages flushed
/// as one whole-ASID invalidation.
///
/// A wrapper forwards every method of [`Policy`], those with a default included
/// (`enter_lazy`, `flush_batch`, `user_ptes_global`): a method left to its default would
/// silently stop being the wrapped policy's.
pub struct RangeCutoff {
    inner: FreebsdEpoch,
    cutoff: u64,
}

impl RangeCutoff {
    /// The cut-off the registry builds it with: Linux arm64's `MAX_TLBI_OPS`
    /// (`PTRS_PER_PTE`, 512 with 4 KB pages) would almost never trigger for the
    /// seeds' workloads, so the example takes 64 pages (256 KB) to show an effect.
    pub const DEFAULT_CUTOFF: u64 = 64;

    /// Returns `inner` with ranges of more than `cutoff` pages flushed whole.
    pub fn new(inner: FreebsdEpoch, cutoff: u64) -> Self {
        RangeCutoff { inner, cutoff }
    }
}

impl Policy for RangeCutoff {
    fn user_ptes_global(&self) -> bool {
        self.inner.user_ptes_global()
    }

    fn mm_init(&self, mm: MmId) {
        self.inner.mm_init(mm)
    }

    fn mm_release<H: Hw>(&self, hw: &H, mm: MmId) {
        self.inner.mm_release(hw, mm)
    }

    fn switch_mm<H: Hw>(&self, hw: &H, next: MmId) {
        self.inner.switch_mm(hw, next)
    }

    fn enter_lazy<H: Hw>(&self, hw: &H, who: Lazy) {
        self.inner.enter_lazy(hw, who)
    }

    fn flush_page<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        self.inner.flush_page(hw, mm, va)
    }

    fn flush_range<H: Hw>(&self, hw: &H, mm: MmId, start: VirtAddr, pages: u64) {
        // The change: one TLBI ASIDE1IS instead of `pages` TLBI VAE1IS.
        if pages > self.cutoff {
            self.inner.flush_mm(hw, mm)
        } else {
            self.inner.flush_range(hw, mm, start, pages)
        }
    }

    fn flush_mm<H: Hw>(&self, hw: &H, mm: MmId) {
        self.inner.flush_mm(hw, mm)
    }

    fn flush_batch<H: Hw>(&self, hw: &H, mms: &[MmId]) {
        self.inner.flush_batch(hw, mms)
    }

    fn flush_kernel_range<H: Hw>(&self, hw: &H, start: VirtAddr, pages: u64) {
        self.inner.flush_kernel_range(hw, start, pages)
    }

    fn name_fields(&self, f: &mut dyn Fields) {
        // The cut-off is a constant: all the shared state is the wrapped policy's.
        self.inner.name_fields(f)
    }
}
