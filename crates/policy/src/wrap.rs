//! A policy that changes part of another: the way to write a variant.
//!
//! A kernel developer's change is usually a few lines of a policy that already
//! exists: one flush done differently, one switch path skipped. Written as a
//! [`Policy`] that holds the real one and forwards to it, every method must be
//! forwarded by hand, and one that is forgotten silently falls back to
//! [`Policy`]'s default instead of the wrapped policy's (`enter_lazy`,
//! `flush_range`, `flush_batch`, `user_ptes_global` and `name_fields` have
//! defaults). [`Wrap`] turns that around: implement [`Wrap::inner`] and the
//! methods the change touches, and every other method *is* the wrapped
//! policy's. Every type that implements [`Wrap`] is a [`Policy`].
//!
//! ```
//! use tlbkit_policy::asid::FreebsdEpoch;
//! use tlbkit_policy::wrap::Wrap;
//! use tlbkit_policy::{Hw, MmId, VirtAddr};
//!
//! /// FreeBSD's epoch ASIDs, with every range flushed as the whole ASID.
//! struct WholeRanges(FreebsdEpoch);
//!
//! impl Wrap for WholeRanges {
//!     type Inner = FreebsdEpoch;
//!     fn inner(&self) -> &FreebsdEpoch {
//!         &self.0
//!     }
//!     fn flush_range<H: Hw>(&self, hw: &H, mm: MmId, _start: VirtAddr, _pages: u64) {
//!         self.0.flush_mm(hw, mm)
//!     }
//! }
//! # use tlbkit_policy::Policy;
//! # fn is_policy<P: Policy>(_: &P) {}
//! # is_policy(&WholeRanges(FreebsdEpoch::new(2, 4, 8)));
//! ```

use crate::fields::Fields;
use crate::hw::Hw;
use crate::policy::{Lazy, Policy};
use crate::types::{MmId, VirtAddr};

/// A policy written as a change to [`Wrap::Inner`]: each method defaults to the
/// inner policy's (see the module documentation). The methods mean what
/// [`Policy`]'s do.
pub trait Wrap: Sync {
    /// The policy this one changes.
    type Inner: Policy;

    /// Returns the policy this one changes.
    fn inner(&self) -> &Self::Inner;

    /// [`Policy::user_ptes_global`].
    fn user_ptes_global(&self) -> bool {
        self.inner().user_ptes_global()
    }

    /// [`Policy::mm_init`].
    fn mm_init(&self, mm: MmId) {
        self.inner().mm_init(mm)
    }

    /// [`Policy::mm_release`].
    fn mm_release<H: Hw>(&self, hw: &H, mm: MmId) {
        self.inner().mm_release(hw, mm)
    }

    /// [`Policy::switch_mm`].
    fn switch_mm<H: Hw>(&self, hw: &H, next: MmId) {
        self.inner().switch_mm(hw, next)
    }

    /// [`Policy::enter_lazy`].
    fn enter_lazy<H: Hw>(&self, hw: &H, who: Lazy) {
        self.inner().enter_lazy(hw, who)
    }

    /// [`Policy::flush_page`].
    fn flush_page<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        self.inner().flush_page(hw, mm, va)
    }

    /// [`Policy::flush_range`].
    fn flush_range<H: Hw>(&self, hw: &H, mm: MmId, start: VirtAddr, pages: u64) {
        self.inner().flush_range(hw, mm, start, pages)
    }

    /// [`Policy::flush_mm`].
    fn flush_mm<H: Hw>(&self, hw: &H, mm: MmId) {
        self.inner().flush_mm(hw, mm)
    }

    /// [`Policy::flush_batch`].
    fn flush_batch<H: Hw>(&self, hw: &H, mms: &[MmId]) {
        self.inner().flush_batch(hw, mms)
    }

    /// [`Policy::flush_kernel_range`].
    fn flush_kernel_range<H: Hw>(&self, hw: &H, start: VirtAddr, pages: u64) {
        self.inner().flush_kernel_range(hw, start, pages)
    }

    /// [`Policy::name_fields`]: the inner policy's fields; a change that adds
    /// shared state names it here too.
    fn name_fields(&self, f: &mut dyn Fields) {
        self.inner().name_fields(f)
    }
}

impl<W: Wrap> Policy for W {
    fn user_ptes_global(&self) -> bool {
        Wrap::user_ptes_global(self)
    }
    fn mm_init(&self, mm: MmId) {
        Wrap::mm_init(self, mm)
    }
    fn mm_release<H: Hw>(&self, hw: &H, mm: MmId) {
        Wrap::mm_release(self, hw, mm)
    }
    fn switch_mm<H: Hw>(&self, hw: &H, next: MmId) {
        Wrap::switch_mm(self, hw, next)
    }
    fn enter_lazy<H: Hw>(&self, hw: &H, who: Lazy) {
        Wrap::enter_lazy(self, hw, who)
    }
    fn flush_page<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        Wrap::flush_page(self, hw, mm, va)
    }
    fn flush_range<H: Hw>(&self, hw: &H, mm: MmId, start: VirtAddr, pages: u64) {
        Wrap::flush_range(self, hw, mm, start, pages)
    }
    fn flush_mm<H: Hw>(&self, hw: &H, mm: MmId) {
        Wrap::flush_mm(self, hw, mm)
    }
    fn flush_batch<H: Hw>(&self, hw: &H, mms: &[MmId]) {
        Wrap::flush_batch(self, hw, mms)
    }
    fn flush_kernel_range<H: Hw>(&self, hw: &H, start: VirtAddr, pages: u64) {
        Wrap::flush_kernel_range(self, hw, start, pages)
    }
    fn name_fields(&self, f: &mut dyn Fields) {
        Wrap::name_fields(self, f)
    }
}
