//! Which of a policy's hooks a check called, and how often: the first thing
//! to read when a check says "no violation" of a change (a hook it never
//! called is code it never ran).
//!
//! Every policy a check builds is wrapped in [`Counted`], which adds one to
//! its hook's counter and calls the policy's own method. The counters are the
//! check's ([`Tally`], on the stack of the call that runs the check and lent
//! to every policy it builds), outside the arena and outside the policy's
//! named state, so they change no state, hash or schedule; they are plain
//! atomics, since the workers of a parallel search share them.

use std::sync::atomic::{AtomicU64, Ordering};
use tlbkit_policy::wrap::Wrap;
use tlbkit_policy::{Hw, Lazy, MmId, Policy, Tick, VirtAddr};
use tlbkit_registry::WithPolicy;

/// The hooks counted, in the order of the `Policy` trait.
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
    fn add(&self, hook: usize) {
        // Relaxed: a count read once the check is over.
        self.0[hook].fetch_add(1, Ordering::Relaxed);
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

impl<P: Policy> Counted<'_, P> {
    fn count(&self, hook: usize) {
        self.tally.add(hook);
    }
}

impl<P: Policy> Wrap for Counted<'_, P> {
    type Inner = P;

    fn inner(&self) -> &P {
        &self.inner
    }

    fn mm_init(&self, mm: MmId) {
        self.count(0);
        self.inner.mm_init(mm)
    }

    fn mm_release<H: Hw>(&self, hw: &H, mm: MmId) {
        self.count(1);
        self.inner.mm_release(hw, mm)
    }

    fn switch_mm<H: Hw>(&self, hw: &H, next: MmId) {
        self.count(2);
        self.inner.switch_mm(hw, next)
    }

    fn enter_lazy<H: Hw>(&self, hw: &H, who: Lazy) {
        self.count(3);
        self.inner.enter_lazy(hw, who)
    }

    fn flush_page<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        self.count(4);
        self.inner.flush_page(hw, mm, va)
    }

    fn flush_range<H: Hw>(&self, hw: &H, mm: MmId, start: VirtAddr, pages: u64) {
        self.count(5);
        self.inner.flush_range(hw, mm, start, pages)
    }

    fn flush_mm<H: Hw>(&self, hw: &H, mm: MmId) {
        self.count(6);
        self.inner.flush_mm(hw, mm)
    }

    fn flush_batch<H: Hw>(&self, hw: &H, mms: &[MmId]) {
        self.count(7);
        self.inner.flush_batch(hw, mms)
    }

    fn tlbbatch_add_pending<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        self.count(8);
        self.inner.tlbbatch_add_pending(hw, mm, va)
    }

    fn flush_batched_pending<H: Hw>(&self, hw: &H, mm: MmId) {
        self.count(9);
        self.inner.flush_batched_pending(hw, mm)
    }

    fn flush_kernel_range<H: Hw>(&self, hw: &H, start: VirtAddr, pages: u64) {
        self.count(10);
        self.inner.flush_kernel_range(hw, start, pages)
    }

    fn tick<H: Hw>(&self, hw: &H, at: Tick) {
        self.count(11);
        self.inner.tick(hw, at)
    }
}

/// Runs `code` with every policy its builder makes counted into `tally`.
pub struct Counting<'t, W> {
    /// What runs the policy.
    pub code: W,
    /// Where its calls are counted.
    pub tally: &'t Tally,
}

impl<W: WithPolicy> WithPolicy for Counting<'_, W> {
    type Out = W::Out;

    fn with<P: Policy>(self, build: &dyn Fn() -> P) -> W::Out {
        let tally = self.tally;
        self.code.with(&|| Counted { inner: build(), tally })
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
        t.add(2);
        t.add(2);
        t.add(4);
        let c = t.counts();
        assert_eq!(c.len(), HOOKS.len());
        let l = line(&c);
        assert!(l.starts_with("hooks called: switch_mm 2, flush_page 1; never called: mm_init, mm_release"), "{l}");
        assert_eq!(sum(&c, &c)[2].calls, 4);
        assert_eq!(sum(&[], &c), c);
    }
}
