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
//! [`Policy`] by wrapping [`FreebsdEpoch`] with [`Wrap`] (only the changed
//! method is written; the others are the wrapped policy's), and one entry in tlbkit's policy
//! registry (`crates/registry/src/policies.rs`, the `register!` table) names it
//! `arm64-freebsd-asid-cutoff`, says what it is and how it is built. Nothing else in tlbkit
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
use tlbkit_policy::wrap::Wrap;
use tlbkit_policy::{Hw, MmId, Policy, VirtAddr};

/// FreeBSD arm64's epoch ASIDs, with ranges longer than `cutoff` pages flushed
/// as one whole-ASID invalidation.
///
/// Written with [`Wrap`]: every method but `flush_range` is the wrapped
/// policy's (its `name_fields` included: the cut-off is a constant, so all the
/// shared state is the wrapped policy's), and the type is a [`Policy`].
pub struct RangeCutoff {
    inner: FreebsdEpoch,
    cutoff: u64,
}

impl RangeCutoff {
    /// The cut-off the registry builds it with: Linux arm64's `MAX_TLBI_OPS`
    /// (`PTRS_PER_PTE`, 512 with 4 KB pages) would almost never trigger for the
    /// origins' workloads, so the example takes 64 pages (256 KB) to show an effect.
    pub const DEFAULT_CUTOFF: u64 = 64;

    /// Returns `inner` with ranges of more than `cutoff` pages flushed whole.
    pub fn new(inner: FreebsdEpoch, cutoff: u64) -> Self {
        RangeCutoff { inner, cutoff }
    }
}

impl Wrap for RangeCutoff {
    type Inner = FreebsdEpoch;

    fn inner(&self) -> &FreebsdEpoch {
        &self.inner
    }

    fn flush_range<H: Hw>(&self, hw: &H, mm: MmId, start: VirtAddr, pages: u64) {
        // The change: one TLBI ASIDE1IS instead of `pages` TLBI VAE1IS.
        if pages > self.cutoff {
            self.inner.flush_mm(hw, mm)
        } else {
            self.inner.flush_range(hw, mm, start, pages)
        }
    }
}
