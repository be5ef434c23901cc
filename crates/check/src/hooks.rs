//! Which of a policy's hooks a check called, and how often: the first thing
//! to read when a check says "no violation" of a change (a hook it never
//! called is code it never ran).
//!
//! Every policy a check's search builds is wrapped in [`Counted`] (by the
//! searches' runners in `crate::run`), which adds one to its hook's counter
//! and calls the policy's own method. The counters are the search's
//! ([`Tally`], on the stack of the call that runs it and lent to every policy
//! it builds), outside the arena and outside the policy's named state, so
//! they change no state, hash or schedule; they are plain atomics, since the
//! workers of a parallel search share them.

use std::sync::atomic::{AtomicU64, Ordering};
use tlbkit_policy::wrap::Wrap;
use tlbkit_policy::{Hw, Lazy, MmId, Policy, Tick, VirtAddr};

/// A hook counted: its place in [`HOOKS`].
#[derive(Clone, Copy)]
enum Hook {
    MmInit,
    MmRelease,
    SwitchMm,
    EnterLazy,
    FlushPage,
    FlushRange,
    FlushMm,
    FlushBatch,
    TlbbatchAddPending,
    FlushBatchedPending,
    FlushKernelRange,
    Tick,
}

/// The hooks counted, in the order of the `Policy` trait (and of [`Hook`]).
pub const HOOKS: [&str; 12] = [
    "mm_init",
    "mm_release",
    "switch_mm",
    "enter_lazy",
    "flush_page",
    "flush_range",
    "flush_mm",
    "flush_batch",
    "tlbbatch_add_pending",
    "flush_batched_pending",
    "flush_kernel_range",
    "tick",
];

/// One check's counters, one per entry of [`HOOKS`].
pub struct Tally([AtomicU64; HOOKS.len()]);

impl Default for Tally {
    fn default() -> Self {
        Tally([const { AtomicU64::new(0) }; HOOKS.len()])
    }
}

/// A hook and the times a check called it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct HookCount {
    /// Its name ([`HOOKS`]).
    pub hook: &'static str,
    /// Calls over every execution of the check.
    pub calls: u64,
}

impl Tally {
    fn add(&self, hook: Hook) {
        // Relaxed: a count read once the check is over.
        self.0[hook as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Returns every hook with its calls so far.
    pub fn counts(&self) -> Vec<HookCount> {
        // Relaxed: read after the workers were joined.
        HOOKS.iter().zip(&self.0).map(|(&hook, c)| HookCount { hook, calls: c.load(Ordering::Relaxed) }).collect()
    }
}

/// Returns `a` and `b` summed hook by hook (a portfolio's shapes); either may
/// be empty (a check that counted nothing).
pub fn sum(a: &[HookCount], b: &[HookCount]) -> Vec<HookCount> {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_vec(),
        (_, true) => a.to_vec(),
        _ => a.iter().zip(b).map(|(x, y)| HookCount { hook: x.hook, calls: x.calls + y.calls }).collect(),
    }
}

/// A policy whose hook calls are counted into a [`Tally`].
pub struct Counted<'t, P> {
    inner: P,
    tally: &'t Tally,
}

impl<'t, P: Policy> Counted<'t, P> {
    /// Returns `inner` with its hook calls counted into `tally`.
    pub(crate) fn new(inner: P, tally: &'t Tally) -> Self {
        Counted { inner, tally }
    }

    fn count(&self, hook: Hook) {
        self.tally.add(hook);
    }
}

impl<P: Policy> Wrap for Counted<'_, P> {
    type Inner = P;

    fn inner(&self) -> &P {
        &self.inner
    }

    fn mm_init(&self, mm: MmId) {
        self.count(Hook::MmInit);
        self.inner.mm_init(mm)
    }

    fn mm_release<H: Hw>(&self, hw: &H, mm: MmId) {
        self.count(Hook::MmRelease);
        self.inner.mm_release(hw, mm)
    }

    fn switch_mm<H: Hw>(&self, hw: &H, next: MmId) {
        self.count(Hook::SwitchMm);
        self.inner.switch_mm(hw, next)
    }

    fn enter_lazy<H: Hw>(&self, hw: &H, who: Lazy) {
        self.count(Hook::EnterLazy);
        self.inner.enter_lazy(hw, who)
    }

    fn flush_page<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        self.count(Hook::FlushPage);
        self.inner.flush_page(hw, mm, va)
    }

    fn flush_range<H: Hw>(&self, hw: &H, mm: MmId, start: VirtAddr, pages: u64) {
        self.count(Hook::FlushRange);
        self.inner.flush_range(hw, mm, start, pages)
    }

    fn flush_mm<H: Hw>(&self, hw: &H, mm: MmId) {
        self.count(Hook::FlushMm);
        self.inner.flush_mm(hw, mm)
    }

    fn flush_batch<H: Hw>(&self, hw: &H, mms: &[MmId]) {
        self.count(Hook::FlushBatch);
        self.inner.flush_batch(hw, mms)
    }

    fn tlbbatch_add_pending<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        self.count(Hook::TlbbatchAddPending);
        self.inner.tlbbatch_add_pending(hw, mm, va)
    }

    fn flush_batched_pending<H: Hw>(&self, hw: &H, mm: MmId) {
        self.count(Hook::FlushBatchedPending);
        self.inner.flush_batched_pending(hw, mm)
    }

    fn flush_kernel_range<H: Hw>(&self, hw: &H, start: VirtAddr, pages: u64) {
        self.count(Hook::FlushKernelRange);
        self.inner.flush_kernel_range(hw, start, pages)
    }

    fn tick<H: Hw>(&self, hw: &H, at: Tick) {
        self.count(Hook::Tick);
        self.inner.tick(hw, at)
    }
}

/// Returns the report's line of hooks: each called one with its calls, then
/// those never called.
pub fn line(counts: &[HookCount]) -> String {
    let called: Vec<String> =
        counts.iter().filter(|c| c.calls > 0).map(|c| format!("{} {}", c.hook, c.calls)).collect();
    let never: Vec<&str> = counts.iter().filter(|c| c.calls == 0).map(|c| c.hook).collect();
    let mut s = format!("hooks called: {}", if called.is_empty() { "none".into() } else { called.join(", ") });
    if !never.is_empty() {
        s.push_str(&format!("; never called: {}", never.join(", ")));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_what_ran_and_what_never_did() {
        let t = Tally::default();
        t.add(Hook::SwitchMm);
        t.add(Hook::SwitchMm);
        t.add(Hook::FlushPage);
        let c = t.counts();
        assert_eq!(c.len(), HOOKS.len());
        let l = line(&c);
        assert!(l.starts_with("hooks called: switch_mm 2, flush_page 1; never called: mm_init, mm_release"), "{l}");
        assert_eq!(sum(&c, &c)[2].calls, 4);
        assert_eq!(sum(&[], &c), c);
    }
}
