//! A policy that changes part of another, and a view of the hardware that
//! changes part of what a policy does with it: the way to write a variant.
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
//! A change to *how* a policy's hardware operations act (a whole-ASID
//! invalidation that only reaches one page, an IPI that reaches one target) is
//! a view of the hardware handed to the wrapped policy's methods: [`WrapHw`],
//! under the same rule, makes every type that implements it a [`Hw`].
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

use crate::cpumask::CpuMask;
use crate::fields::Fields;
use crate::hw::{Access, Barrier, Defer, FlushTicket, Hw, Note, Phase, Root, Scope, Tlbi};
use crate::policy::{Lazy, Policy, Tick};
use crate::types::{Asid, CpuId, MmId, VirtAddr};

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

    /// [`Policy::tlbbatch_add_pending`].
    fn tlbbatch_add_pending<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        self.inner().tlbbatch_add_pending(hw, mm, va)
    }

    /// [`Policy::tlbbatch_should_defer`].
    fn tlbbatch_should_defer<H: Hw>(&self, hw: &H, mm: MmId) -> bool {
        self.inner().tlbbatch_should_defer(hw, mm)
    }

    /// [`Policy::flush_batched_pending`].
    fn flush_batched_pending<H: Hw>(&self, hw: &H, mm: MmId) {
        self.inner().flush_batched_pending(hw, mm)
    }

    /// [`Policy::flush_kernel_range`].
    fn flush_kernel_range<H: Hw>(&self, hw: &H, start: VirtAddr, pages: u64) {
        self.inner().flush_kernel_range(hw, start, pages)
    }

    /// [`Policy::ticks`].
    fn ticks(&self) -> bool {
        self.inner().ticks()
    }

    /// [`Policy::defers`].
    fn defers(&self) -> Option<Defer> {
        self.inner().defers()
    }

    /// [`Policy::flushes_pinned`].
    fn flushes_pinned(&self) -> bool {
        self.inner().flushes_pinned()
    }

    /// [`Policy::tick`].
    fn tick<H: Hw>(&self, hw: &H, at: Tick) {
        self.inner().tick(hw, at)
    }

    /// [`Policy::name_fields`]: the inner policy's fields; a change that adds
    /// shared state names it here too.
    fn name_fields(&self, f: &mut dyn Fields) {
        self.inner().name_fields(f)
    }

    /// [`Policy::hash_locked`]: the inner policy's locked data; a change that
    /// adds some feeds it here too.
    ///
    /// # Safety
    /// As [`Policy::hash_locked`]'s.
    unsafe fn hash_locked(&self, h: &mut dyn core::hash::Hasher) {
        // SAFETY: the caller keeps every CPU out of the policy, as ours.
        unsafe { self.inner().hash_locked(h) }
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
    fn tlbbatch_add_pending<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        Wrap::tlbbatch_add_pending(self, hw, mm, va)
    }
    fn tlbbatch_should_defer<H: Hw>(&self, hw: &H, mm: MmId) -> bool {
        Wrap::tlbbatch_should_defer(self, hw, mm)
    }
    fn flush_batched_pending<H: Hw>(&self, hw: &H, mm: MmId) {
        Wrap::flush_batched_pending(self, hw, mm)
    }
    fn flush_kernel_range<H: Hw>(&self, hw: &H, start: VirtAddr, pages: u64) {
        Wrap::flush_kernel_range(self, hw, start, pages)
    }
    fn ticks(&self) -> bool {
        Wrap::ticks(self)
    }
    fn defers(&self) -> Option<Defer> {
        Wrap::defers(self)
    }
    fn flushes_pinned(&self) -> bool {
        Wrap::flushes_pinned(self)
    }
    fn tick<H: Hw>(&self, hw: &H, at: Tick) {
        Wrap::tick(self, hw, at)
    }
    fn name_fields(&self, f: &mut dyn Fields) {
        Wrap::name_fields(self, f)
    }
    unsafe fn hash_locked(&self, h: &mut dyn core::hash::Hasher) {
        // SAFETY: the caller keeps every CPU out of the policy, as ours.
        unsafe { Wrap::hash_locked(self, h) }
    }
}

/// A view of [`WrapHw::Inner`] that changes part of what it does: each
/// operation defaults to the inner hardware's. The operations mean what
/// [`Hw`]'s do.
///
/// An IPI handler sent through the view runs on its target CPU with a view of
/// the target's hardware, which the view builds with [`WrapHw::on_target`] from
/// what [`WrapHw::carry`] took from the sender. The handler may run after the
/// sender has returned ([`Hw::send_ipi_async`]), so what is carried is owned,
/// and a view holds the hardware it wraps by raw pointer (the target's is lent
/// only for the handler's call, a lifetime the view's type cannot name).
pub trait WrapHw: Sized {
    /// The hardware this view changes.
    type Inner: Hw;
    /// What an IPI handler carries from the sender's view to the target's.
    type Carry;

    /// Returns the hardware this view changes.
    fn inner(&self) -> &Self::Inner;

    /// Returns what a handler sent through this view carries to its target.
    fn carry(&self) -> Self::Carry;

    /// Returns the view of `hw`, a target CPU's hardware, that a handler sent
    /// with `carry` gets.
    fn on_target(carry: &Self::Carry, hw: &Self::Inner) -> Self;

    /// [`Hw::cpu`].
    fn cpu(&self) -> CpuId {
        self.inner().cpu()
    }

    /// [`Hw::ncpus`].
    fn ncpus(&self) -> usize {
        self.inner().ncpus()
    }

    /// [`Hw::write_root`].
    fn write_root(&self, root: Root, asid: Asid, noflush: bool) {
        self.inner().write_root(root, asid, noflush)
    }

    /// [`Hw::tlbi`].
    fn tlbi(&self, op: Tlbi, scope: Scope) {
        self.inner().tlbi(op, scope)
    }

    /// [`Hw::barrier`].
    fn barrier(&self, b: Barrier) {
        self.inner().barrier(b)
    }

    /// [`Hw::send_ipi`]: each target's handler gets [`WrapHw::on_target`]'s view.
    fn send_ipi<F: Fn(&Self)>(&self, targets: &CpuMask, handler: F) {
        let carry = self.carry();
        self.inner().send_ipi(targets, move |h| handler(&Self::on_target(&carry, h)))
    }

    /// [`Hw::send_ipi_async`]: the handler owns what it carries.
    fn send_ipi_async<F: Fn(&Self)>(&self, targets: &CpuMask, handler: F) {
        let carry = self.carry();
        self.inner().send_ipi_async(targets, move |h| handler(&Self::on_target(&carry, h)))
    }

    /// [`Hw::send_call_function_ipi_async`]: the handler owns what it carries.
    fn send_call_function_ipi_async<F: Fn(&Self)>(&self, targets: &CpuMask, handler: F) {
        let carry = self.carry();
        self.inner().send_call_function_ipi_async(targets, move |h| handler(&Self::on_target(&carry, h)))
    }

    /// [`Hw::send_ipi_all_but_self_async`]: the handler owns what it carries.
    fn send_ipi_all_but_self_async<F: Fn(&Self)>(&self, handler: F) {
        let carry = self.carry();
        self.inner().send_ipi_all_but_self_async(move |h| handler(&Self::on_target(&carry, h)))
    }

    /// [`Hw::shared`].
    fn shared(&self, addr: usize, access: Access) {
        self.inner().shared(addr, access)
    }

    /// [`Hw::spin_on`].
    fn spin_on(&self, addr: usize) {
        self.inner().spin_on(addr)
    }

    /// [`Hw::phase`].
    fn phase(&self, phase: Phase) {
        self.inner().phase(phase)
    }

    /// [`Hw::note`].
    fn note(&self, note: Note) {
        self.inner().note(note)
    }

    /// [`Hw::jiffies`].
    fn jiffies(&self) -> u64 {
        self.inner().jiffies()
    }

    /// [`Hw::irqs_off`].
    fn irqs_off<R>(&self, f: impl FnOnce() -> R) -> R {
        self.inner().irqs_off(f)
    }

    /// [`Hw::irq_disable`].
    fn irq_disable(&self) {
        self.inner().irq_disable()
    }

    /// [`Hw::irq_enable`].
    fn irq_enable(&self) {
        self.inner().irq_enable()
    }

    /// [`Hw::defer_flush`].
    fn defer_flush(&self, mm: MmId, rule: Defer) -> Option<FlushTicket> {
        self.inner().defer_flush(mm, rule)
    }

    /// [`Hw::flush_complete`].
    fn flush_complete(&self, ticket: FlushTicket) {
        self.inner().flush_complete(ticket)
    }
}

impl<W: WrapHw> Hw for W {
    fn cpu(&self) -> CpuId {
        WrapHw::cpu(self)
    }
    fn ncpus(&self) -> usize {
        WrapHw::ncpus(self)
    }
    fn write_root(&self, root: Root, asid: Asid, noflush: bool) {
        WrapHw::write_root(self, root, asid, noflush)
    }
    fn tlbi(&self, op: Tlbi, scope: Scope) {
        WrapHw::tlbi(self, op, scope)
    }
    fn barrier(&self, b: Barrier) {
        WrapHw::barrier(self, b)
    }
    fn send_ipi<F: Fn(&Self)>(&self, targets: &CpuMask, handler: F) {
        WrapHw::send_ipi(self, targets, handler)
    }
    fn send_ipi_async<F: Fn(&Self)>(&self, targets: &CpuMask, handler: F) {
        WrapHw::send_ipi_async(self, targets, handler)
    }
    fn send_call_function_ipi_async<F: Fn(&Self)>(&self, targets: &CpuMask, handler: F) {
        WrapHw::send_call_function_ipi_async(self, targets, handler)
    }
    fn send_ipi_all_but_self_async<F: Fn(&Self)>(&self, handler: F) {
        WrapHw::send_ipi_all_but_self_async(self, handler)
    }
    fn shared(&self, addr: usize, access: Access) {
        WrapHw::shared(self, addr, access)
    }
    fn spin_on(&self, addr: usize) {
        WrapHw::spin_on(self, addr)
    }
    fn phase(&self, phase: Phase) {
        WrapHw::phase(self, phase)
    }
    fn note(&self, note: Note) {
        WrapHw::note(self, note)
    }
    fn jiffies(&self) -> u64 {
        WrapHw::jiffies(self)
    }
    fn irqs_off<R>(&self, f: impl FnOnce() -> R) -> R {
        WrapHw::irqs_off(self, f)
    }
    fn irq_disable(&self) {
        WrapHw::irq_disable(self)
    }
    fn irq_enable(&self) {
        WrapHw::irq_enable(self)
    }
    fn defer_flush(&self, mm: MmId, rule: Defer) -> Option<FlushTicket> {
        WrapHw::defer_flush(self, mm, rule)
    }
    fn flush_complete(&self, ticket: FlushTicket) {
        WrapHw::flush_complete(self, ticket)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asid::LinuxX86;
    use crate::testhw::{init_mms, Rec};
    use crate::types::VirtAddr;
    use std::string::String;
    use std::vec::Vec;

    /// `x86-linux-pcid` as a [`Wrap`] that writes nothing.
    struct Same(LinuxX86);

    impl Wrap for Same {
        type Inner = LinuxX86;
        fn inner(&self) -> &LinuxX86 {
            &self.0
        }
    }

    /// A view that loses every invalidation made on a CPU other than `home`.
    struct HomeOnly<H: Hw> {
        hw: *const H,
        home: CpuId,
    }

    impl<H: Hw> WrapHw for HomeOnly<H> {
        type Inner = H;
        type Carry = CpuId;
        fn inner(&self) -> &H {
            // SAFETY: made from a live `&H` inside the call that lent it.
            unsafe { &*self.hw }
        }
        fn carry(&self) -> CpuId {
            self.home
        }
        fn on_target(home: &CpuId, hw: &H) -> Self {
            HomeOnly { hw, home: *home }
        }
        fn tlbi(&self, op: Tlbi, scope: Scope) {
            if self.inner().cpu() == self.home {
                self.inner().tlbi(op, scope)
            }
        }
    }

    /// Runs every method of `p` on CPU0 while CPU1 also runs mm1, and returns
    /// CPU0's log (CPU1's IPI handlers included).
    fn every_method<P: Policy>(p: &P) -> Vec<String> {
        init_mms(p, 1..=2);
        let (cpu0, cpu1) = (Rec::new(0, 2), Rec::new(1, 2));
        p.switch_mm(&cpu1, MmId(1));
        let va = VirtAddr(0x40_0000);
        p.switch_mm(&cpu0, MmId(1));
        p.flush_page(&cpu0, MmId(1), va);
        p.flush_range(&cpu0, MmId(1), va, 3);
        p.flush_batch(&cpu0, &[MmId(1), MmId(2)]);
        p.flush_mm(&cpu0, MmId(1));
        p.flush_kernel_range(&cpu0, va, 2);
        p.enter_lazy(&cpu0, Lazy::KernelThread);
        p.switch_mm(&cpu0, MmId(2));
        cpu0.take()
    }

    /// Flushes a page of mm1, which CPU0 and CPU1 run, through `HomeOnly` views
    /// of CPU0 (`view`) or straight, and returns CPU0's log.
    fn flush_shared_page(view: bool) -> Vec<String> {
        let p = LinuxX86::new(2, 3, true);
        init_mms(&p, 1..=2);
        let (cpu0, cpu1) = (Rec::new(0, 2), Rec::new(1, 2));
        p.switch_mm(&cpu1, MmId(1));
        p.switch_mm(&cpu0, MmId(1));
        cpu0.take();
        let va = VirtAddr(0x40_0000);
        if view {
            p.flush_page(&HomeOnly { hw: &cpu0 as *const Rec, home: CpuId(0) }, MmId(1), va);
        } else {
            p.flush_page(&cpu0, MmId(1), va);
        }
        cpu0.take()
    }

    #[test]
    fn a_wrap_that_writes_nothing_is_its_inner_policy() {
        let inner = every_method(&LinuxX86::new(2, 3, true));
        let wrapped = every_method(&Same(LinuxX86::new(2, 3, true)));
        assert!(inner.iter().any(|l| l.starts_with("ipi")), "the run sends IPIs: {inner:?}");
        assert_eq!(wrapped, inner);
    }

    #[test]
    fn a_wrap_hw_view_reaches_the_ipi_handlers_it_sends() {
        // Straight: CPU1's handler invalidates.
        let straight = flush_shared_page(false);
        assert!(straight.iter().any(|l| l.starts_with("cpu1: tlbi")), "{straight:?}");
        // Through the view: the handler ran with the view `on_target` built, so
        // its invalidation is lost; CPU0's own is kept.
        let viewed = flush_shared_page(true);
        assert!(viewed.iter().any(|l| l.starts_with("ipi")), "{viewed:?}");
        assert!(!viewed.iter().any(|l| l.starts_with("cpu1: tlbi")), "{viewed:?}");
        assert!(viewed.iter().any(|l| l.starts_with("tlbi")), "{viewed:?}");
    }
}
