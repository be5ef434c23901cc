//! An invalidation is complete only at its issuing CPU's completing barrier
//! (`tlbkit_check::kernel::Pending`): arm64's `DSB ISH` after a broadcast
//! `TLBI …IS`, x86's `TLBSYNC` after `INVLPGB` (arm64's `DSB NSH` completes a
//! broadcast one on its issuer's TLB only). A real policy with that barrier
//! dropped from its flushes, or narrowed to `DSB NSH` (and nothing else
//! changed), must be found by the default `tlbkit check`; these tests run its
//! first schedules, as `shapes.rs` does.

use crate::common;
use std::cell::Cell;
use tlbkit_check::report::Counterexample;
use tlbkit_check::run::check_policy;
use tlbkit_check::shape::Completion;
use tlbkit_check::spec::default_memory;
use tlbkit_check::{CheckReport, CheckSpec};
use tlbkit_policy::asid::linux_x86_615::Kernel;
use tlbkit_policy::asid::{LinuxArm64, LinuxX86v615};
use tlbkit_policy::wrap::{Wrap, WrapHw};
use tlbkit_policy::zoo::ZOO;
use tlbkit_policy::{Barrier, Domain, Hw, MmId, Policy, Scope, Tlbi, VirtAddr};

/// `tlbkit check --policy POLICY` with no other flag, its first `iterations`
/// schedules only.
fn default_spec(policy: &str, iterations: u64) -> CheckSpec {
    let d = tlbkit_check::spec::default_spec(policy);
    CheckSpec { iterations: iterations.min(d.iterations), ..d }
}

/// The completing barrier after a broadcast invalidation, and what issues
/// instead of it.
#[derive(Clone, Copy)]
struct Swap {
    sync: Barrier,
    /// `None`: nothing.
    instead: Option<Barrier>,
}

/// An [`Hw`] that drops the first completing barrier (`swap.sync`) after
/// each broadcast invalidation, or issues `swap.instead` in its place: the
/// sync phase of a broadcast shootdown left out or narrowed. Local
/// invalidations and every other barrier go through.
///
/// It holds a pointer, not a reference: a handler gets the target's `&H` for the
/// handler's call only, and `Hw`'s handlers take `&Self`.
struct NoSync<H: Hw> {
    hw: *const H,
    swap: Swap,
    /// A broadcast was issued and its completing barrier not dropped (or
    /// replaced) yet.
    owed: Cell<bool>,
}

impl<H: Hw> NoSync<H> {
    fn new(hw: &H, swap: Swap) -> Self {
        NoSync { hw, swap, owed: Cell::new(false) }
    }
}

impl<H: Hw> WrapHw for NoSync<H> {
    type Inner = H;
    type Carry = Swap;
    fn inner(&self) -> &H {
        // SAFETY: a NoSync lives only inside the call that lent the `&H` it
        // points at (a flush, or one handler run).
        unsafe { &*self.hw }
    }
    fn carry(&self) -> Swap {
        self.swap
    }
    fn on_target(swap: &Swap, hw: &H) -> Self {
        NoSync::new(hw, *swap)
    }
    fn tlbi(&self, op: Tlbi, scope: Scope) {
        if scope == Scope::Broadcast {
            self.owed.set(true);
        }
        self.inner().tlbi(op, scope)
    }
    fn barrier(&self, b: Barrier) {
        if b == self.swap.sync && self.owed.replace(false) {
            if let Some(instead) = self.swap.instead {
                self.inner().barrier(instead);
            }
            return;
        }
        self.inner().barrier(b)
    }
}

/// A policy whose flushes run on [`NoSync`] with barrier `swap.sync` dropped
/// or replaced.
struct DropSync<P>(P, Swap);

impl<P: Policy> Wrap for DropSync<P> {
    type Inner = P;
    fn inner(&self) -> &P {
        &self.0
    }
    fn flush_page<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        self.0.flush_page(&NoSync::new(hw, self.1), mm, va)
    }
    fn flush_range<H: Hw>(&self, hw: &H, mm: MmId, start: VirtAddr, pages: u64) {
        self.0.flush_range(&NoSync::new(hw, self.1), mm, start, pages)
    }
    fn flush_mm<H: Hw>(&self, hw: &H, mm: MmId) {
        self.0.flush_mm(&NoSync::new(hw, self.1), mm)
    }
    fn flush_batch<H: Hw>(&self, hw: &H, mms: &[MmId]) {
        self.0.flush_batch(&NoSync::new(hw, self.1), mms)
    }
    fn flush_batched_pending<H: Hw>(&self, hw: &H, mm: MmId) {
        self.0.flush_batched_pending(&NoSync::new(hw, self.1), mm)
    }
}

fn arm64(spec: &CheckSpec, swap: Swap) -> impl Fn() -> DropSync<LinuxArm64> + '_ {
    let bits = spec.asids.trailing_zeros() as u8;
    move || DropSync(LinuxArm64::new(spec.cpus, spec.mms + 1, bits, false).unwrap(), swap)
}

fn invlpgb(spec: &CheckSpec, sync: Barrier) -> impl Fn() -> DropSync<LinuxX86v615> + '_ {
    move || {
        DropSync(
            LinuxX86v615::new(spec.cpus, spec.mms + 1, Kernel::Invlpgb).with_small_shapes(spec.asids),
            Swap { sync, instead: None },
        )
    }
}

const DSB_ISH: Barrier = Barrier::Dsb(Domain::InnerShareable);

/// Asserts that `r` found a stale translation, held or used, and says after
/// how many schedules.
fn found_stale(r: CheckReport) {
    let cx = r.counterexample.unwrap_or_else(|| panic!("not found in {} schedules", r.explored.executions));
    eprintln!("found in {} schedules: {}", r.explored.executions, cx.detail);
    assert!(matches!(cx.property, "no_stale_held" | "no_stale_use"), "{}: {}", cx.property, cx.detail);
}

#[test]
fn the_default_check_finds_an_arm64_flush_without_the_dsb_after_its_broadcast_tlbi() {
    let spec = default_spec("arm64-linux", 500);
    found_stale(check_policy(&spec, &arm64(&spec, Swap { sync: DSB_ISH, instead: None })).unwrap());
}

/// A `DSB NSH` after a broadcast `TLBI` completes it on the issuing CPU's own
/// TLB only (Arm ARM R_PSMWS, R_BLDZX; `kernel::Pending`): the flush is found,
/// through another CPU, and the trace says what the barrier completed.
#[test]
fn the_default_check_finds_an_arm64_flush_whose_broadcast_tlbi_has_only_a_dsb_nsh() {
    let spec = default_spec("arm64-linux", 500);
    let r =
        check_policy(&spec, &arm64(&spec, Swap { sync: DSB_ISH, instead: Some(Barrier::Dsb(Domain::NonShareable)) }))
            .unwrap();
    let said = r.counterexample.as_ref().is_some_and(|cx| {
        cx.steps.iter().flat_map(|s| &s.events).any(|e| e.contains("complete on this CPU's TLB only"))
    });
    found_stale(r);
    assert!(said, "the counterexample shows no DSB NSH completing a broadcast TLBI on its issuer");
}

#[test]
fn the_default_check_finds_an_invlpgb_flush_without_its_tlbsync() {
    let spec = default_spec("x86-linux-invlpgb", 500);
    found_stale(check_policy(&spec, &invlpgb(&spec, Barrier::TlbSync)).unwrap());
}

#[test]
fn the_wrappers_that_drop_nothing_pass() {
    // The same wrappers dropping the other architecture's completing barrier,
    // which the policy never issues, are the real policies: what the tests
    // above find is the dropped barrier, not the wrapper.
    let spec = default_spec("arm64-linux", 500);
    let r = check_policy(&spec, &arm64(&spec, Swap { sync: Barrier::TlbSync, instead: None })).unwrap();
    assert!(r.counterexample.is_none(), "{:?}", r.counterexample.map(|c| c.detail));
    assert_eq!(r.explored.executions, 500);
    let spec = default_spec("x86-linux-invlpgb", 500);
    let r = check_policy(&spec, &invlpgb(&spec, DSB_ISH)).unwrap();
    assert!(r.counterexample.is_none(), "{:?}", r.counterexample.map(|c| c.detail));
}

/// Checks `spec` with invalidations completing at their barrier and at any
/// point before it (`--memory NAME+any`); asserts the same verdict and that
/// the second search, a superset of the first's executions, reached no fewer
/// states. Returns both state counts.
fn latest_and_any(what: &str, spec: &CheckSpec) -> (u64, u64) {
    let latest = tlbkit_check::check(spec).unwrap_or_else(|e| panic!("{what}: {e}"));
    let any_spec = CheckSpec { completion: Completion::Any, ..spec.clone() };
    let any = tlbkit_check::check(&any_spec).unwrap_or_else(|e| panic!("{what} +any: {e}"));
    assert_eq!(common::verdict(&any), common::verdict(&latest), "{what}: the verdict moved with +any");
    if common::verdict(&latest).is_none() {
        common::assert_same_verdict_in_no_more_states(&format!("{what}, at the barrier and +any"), &latest, &any);
    }
    (latest.explored.states, any.explored.states)
}

/// The argument of `kernel::Pending` (completing an invalidation at its
/// barrier, the latest point, hides no violation an earlier completion
/// would show) checked at small bounds: every registered policy and every
/// zoo entry at 2 CPUs, 3 address spaces of a page and 3 operations, under
/// its own memory model, completes with the same verdict when the
/// scheduler may also complete any pending invalidation early. Larger
/// bounds: `every_policy_and_zoo_entry_completing_at_any_point`.
#[test]
fn completing_at_any_point_gives_every_policy_and_zoo_entry_the_same_verdict() {
    let mut grew = 0;
    let names = tlbkit_registry::POLICIES.iter().map(|p| p.name.to_string());
    for name in names.chain(ZOO.iter().map(|e| format!("zoo/{}", e.id))) {
        let spec = CheckSpec { memory: default_memory(&name), ..common::small_spec(&name, 1, 3) };
        let (latest, any) = latest_and_any(&name, &spec);
        grew += usize::from(any > latest);
    }
    // Some policy leaves an invalidation pending across a step at these bounds,
    // or the test checks nothing.
    assert!(grew > 0, "no search grew with +any: no invalidation was pending across a step");
}

/// The same at larger bounds (minutes in a release build): every policy at 2
/// CPUs and 5 operations, every zoo entry at its tailored shape.
#[test]
#[ignore = "minutes: run with --release -- --ignored"]
fn every_policy_and_zoo_entry_completing_at_any_point() {
    for p in tlbkit_registry::POLICIES {
        let spec = CheckSpec { memory: default_memory(p.name), ..common::small_spec(p.name, 1, 5) };
        let (latest, any) = latest_and_any(p.name, &spec);
        println!("{:<40} {latest:>10} states at the barrier, {any:>10} at any point", p.name);
    }
    for e in ZOO {
        let spec = common::zoo_spec(e.id);
        let (latest, any) = latest_and_any(e.id, &spec);
        println!("zoo/{:<36} {latest:>10} states at the barrier, {any:>10} at any point", e.id);
    }
}

/// An `INVLPGB` policy (`x86-linux-invlpgb`, `-tlbbatch`) with 4b634918384c's bug in its x86 form:
/// `flush_batched_pending` is a lone `TLBSYNC`, which completes this CPU's
/// `INVLPGB`s, never those a reclaim on another CPU left pending (arm64's
/// `dsb(ish)` of v6.5 to v6.15 did the same with `TLBI`s; the zoo's
/// `linux-arm64-4b634918384c`).
struct SyncOnlyPending(LinuxX86v615);

impl Wrap for SyncOnlyPending {
    type Inner = LinuxX86v615;
    fn inner(&self) -> &LinuxX86v615 {
        &self.0
    }
    fn flush_batched_pending<H: Hw>(&self, hw: &H, _mm: MmId) {
        hw.barrier(Barrier::TlbSync);
    }
}

/// The default run (every shape of the portfolio, in order, stopping at the
/// first violation) of a policy written like `policy`, built by `build`:
/// the shape that found one and the violation, whose token replays the
/// registered policy, without the caller's change.
fn default_portfolio<P: Policy + 'static>(
    policy: &str,
    build: impl Fn(&CheckSpec) -> P,
) -> Option<(String, Counterexample)> {
    let portfolio = tlbkit_check::portfolio::portfolio(policy, None, 1);
    portfolio.members.iter().find_map(|spec| {
        let r = check_policy(spec, &|| build(spec)).unwrap_or_else(|e| panic!("{policy}: {e}"));
        let shape = format!("{} CPUs, {} mms, {} ops", spec.cpus, spec.mms, spec.ops);
        r.counterexample.map(|c| (shape, c))
    })
}

#[test]
fn the_default_run_finds_a_batched_pending_flush_that_only_waits_for_its_own_invlpgbs() {
    // Reclaim's batch as merged (v6.15: each mm's INVLPGB issued as it is
    // added, one TLBSYNC at the batch's flush) and as the posted targeted one.
    for (policy, targeted) in [("x86-linux-invlpgb", false), ("x86-linux-invlpgb-tlbbatch", true)] {
        let build = |spec: &CheckSpec| {
            let p = LinuxX86v615::new(spec.cpus, spec.mms + 1, Kernel::Invlpgb).with_small_shapes(spec.asids);
            SyncOnlyPending(if targeted { p.with_targeted_tlbbatch() } else { p })
        };
        let found = default_portfolio(policy, build);
        let (shape, cx) = found.unwrap_or_else(|| panic!("{policy}: the default run misses the lone TLBSYNC"));
        eprintln!("{policy}: found in the shape {shape}: {}", cx.detail);
        // The reclaim's INVLPGB is issued and its TLBSYNC not yet run when
        // another CPU's munmap or madvise of the mm runs the pending flush.
        let events = || cx.steps.iter().flat_map(|s| &s.events);
        assert!(events().any(|e| e.contains("flush_tlb_batched_pending")), "{}", cx.trace());
        // As itself: the same schedule on the policy as written breaks nothing.
        let real = tlbkit_check::replay(&cx.token).unwrap();
        assert!(real.counterexample.is_none(), "{policy} as written fails the same schedule: {}", cx.token);
    }
}
