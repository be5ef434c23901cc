//! Default shapes big enough to reach the bug: a default
//! `tlbkit check --policy P` takes an ASID allocator through at least two
//! rollovers and a shootdown protocol through three CPUs starting
//! invalidations, and the report says so; a shootdown bug that needs a third CPU
//! is found by the default run and cannot be found at the old default shape.
//!
//! The default runs sample `DEFAULT_SCHEDULES` PCT schedules; these tests run
//! the first few of them (a PCT schedule depends only on the seed and its number,
//! so they are the default run's first schedules): what they reach, the whole
//! run reaches. The whole runs, in release: `tlbkit check --policy P` (README,
//! "Checking").

use tlbkit_check::ops::OpKind;
use tlbkit_check::run::check_policy;
use tlbkit_check::shape::Memory;
use tlbkit_check::spec::{preset, Depth, Family};
use tlbkit_check::{check, CheckSpec, Mode};
use tlbkit_policy::asid::LinuxX86;
use tlbkit_policy::wrap::{Wrap, WrapHw};
use tlbkit_policy::{CpuMask, Hw, MmId, Policy, VirtAddr};
use tlbkit_registry::{AsidSpace, PolicyDef};

/// `tlbkit check --policy POLICY` with no other flag, its first `iterations`
/// schedules only.
fn default_spec(policy: &str, iterations: u64) -> CheckSpec {
    let d = tlbkit_check::spec::default_spec(policy);
    CheckSpec { iterations: iterations.min(d.iterations), ..d }
}

/// The policies with an ASID or PCID allocator that rolls over: every arm64
/// policy with ASIDs, and FreeBSD x86's per-CPU PCID generations.
fn rolls_over(p: &PolicyDef) -> bool {
    p.family == Family::AsidAllocator || p.asids == AsidSpace::PcidsPerCpu
}

/// The registered policies with a finding of the catalogue
/// (`tlbkit_policy::findings`): FreeBSD's allocator and the fix of window 1
/// alone, which leaves window 2.
const HAS_FINDING: [&str; 2] = ["arm64-freebsd-asid", "arm64-freebsd-asid-fix-self"];

#[test]
fn a_default_run_of_every_asid_allocator_reaches_two_rollovers() {
    let mut seen = 0;
    for p in tlbkit_registry::POLICIES.iter().filter(|p| rolls_over(p)) {
        // FreeBSD x86's per-CPU PCID generations need more schedules to reach
        // their second rollover (release: 10,000 reach it, 3,000 do not).
        let budget = if p.asids == AsidSpace::PcidsPerCpu { 10_000 } else { 3_000 };
        let r = check(&default_spec(p.name, budget)).unwrap();
        // A policy with a finding of the catalogue stops at it, maybe before its
        // second rollover: the finding is what its default run must reach.
        if let Some(cx) = &r.counterexample {
            assert!(HAS_FINDING.contains(&p.name), "{}: {} {}", p.name, cx.property, cx.detail);
            assert!(
                r.explored.rollovers >= 1,
                "{}: the finding needs a reset; {} rollovers",
                p.name,
                r.explored.rollovers
            );
            seen += 1;
            continue;
        }
        assert!(
            r.explored.rollovers >= 2,
            "{}: {} rollovers in {} schedules",
            p.name,
            r.explored.rollovers,
            r.explored.executions
        );
        assert!(
            r.to_text().contains(&format!("reached: {} ASID rollover(s)", r.explored.rollovers)),
            "{}",
            r.to_text()
        );
        seen += 1;
    }
    assert_eq!(seen, 12, "nine arm64 policies with ASIDs and three FreeBSD x86 ones");
}

#[test]
fn a_default_run_of_every_shootdown_protocol_has_three_cpus_starting_invalidations() {
    let mut seen = 0;
    for p in tlbkit_registry::POLICIES.iter().filter(|p| p.family == Family::Shootdown) {
        let spec = default_spec(p.name, 3_000);
        assert_eq!(spec.cpus, 3, "{}", p.name);
        let r = check(&spec).unwrap();
        assert_eq!(r.explored.initiators, 3, "{}: {} schedules", p.name, r.explored.executions);
        seen += 1;
    }
    assert_eq!(seen, 16, "arm64-noasid and the fifteen x86 policies");
}

#[test]
fn the_old_small_shape_reaches_neither() {
    // What the defaults were: 2 CPUs, 3 address spaces, 6 operations (now `--quick`).
    let quick = preset("arm64-linux", Depth::Quick);
    assert_eq!((quick.cpus, quick.mms, quick.ops), (2, 3, 6));
    let r = check(&CheckSpec { mms: quick.mms, ops: quick.ops, ..default_spec("arm64-linux", 400) }).unwrap();
    assert!(r.explored.rollovers < 2, "{} rollovers", r.explored.rollovers);
    let r = check(&CheckSpec { cpus: 2, ..default_spec("x86-linux-pcid", 400) }).unwrap();
    assert!(r.explored.initiators <= 2);
}

#[test]
fn a_check_that_reaches_no_rollover_of_an_allocator_says_its_verdict_is_silent_on_it() {
    let quick = preset("arm64-linux", Depth::Quick);
    let spec = CheckSpec { mms: quick.mms, ops: quick.ops, ..default_spec("arm64-linux", 200) };
    let r = check(&spec).unwrap();
    assert!(r.counterexample.is_none() && r.explored.rollovers == 0);
    let text = r.to_text();
    assert!(text.contains("result: no violation, but no execution reached an ASID rollover"), "{text}");
    // A shootdown protocol has no rollover to reach; an allocator that reached one is not warned.
    let r = check(&CheckSpec { cpus: 2, ..default_spec("x86-linux-pcid", 200) }).unwrap();
    assert!(r.to_text().contains("result: no violation\n"), "{}", r.to_text());
    let r = check(&CheckSpec { asids: 4, ops: 12, ..default_spec("arm64-linux-tlbmode", 2000) }).unwrap();
    assert!(r.explored.rollovers > 0 && r.to_text().contains("result: no violation\n"), "{}", r.to_text());
}

#[test]
fn a_menu_kind_the_policys_kernel_never_offers_is_named_with_why() {
    let menu = OpKind::parse("switch,idle,madvise,reclaim2,reclaim").unwrap();
    let r = check(&CheckSpec { menu, ..default_spec("x86-freebsd-gen", 50) }).unwrap();
    let kinds: Vec<&str> = r.not_offered.iter().map(|n| n.kind).collect();
    assert_eq!(kinds, ["madvise", "reclaim2"]);
    assert!(r.to_text().contains("not offered: madvise (FreeBSD's MADV_DONTNEED keeps the mapping"), "{}", r.to_text());
    // On Linux both are offered; the default menu names nothing.
    assert!(check(&CheckSpec { menu, ..default_spec("x86-linux-pcid", 50) }).unwrap().not_offered.is_empty());
    assert!(check(&default_spec("x86-freebsd-gen", 50)).unwrap().not_offered.is_empty());
}

#[test]
fn presets_keep_the_default_shape_for_deep_and_the_small_one_for_quick() {
    for p in tlbkit_registry::POLICIES {
        let (d, quick, deep) =
            (preset(p.name, Depth::Default), preset(p.name, Depth::Quick), preset(p.name, Depth::Deep));
        assert_eq!((deep.cpus, deep.mms, deep.asids, deep.ops), (d.cpus, d.mms, d.asids, d.ops), "{}", p.name);
        assert_eq!((deep.mode, deep.iterations), (Mode::Exhaustive, u64::MAX), "{}", p.name);
        assert_eq!((d.mode, quick.mode), (Mode::Pct, Mode::Pct), "{}", p.name);
        assert!(quick.iterations < d.iterations && quick.ops < d.ops, "{}", p.name);
    }
}

/// An [`Hw`] whose synchronous IPIs reach only the lowest-numbered target: the
/// mistake of a flush that hands its mask to a single-target call
/// (`smp_call_function_single(cpumask_first(mask), ..)`) instead of
/// `on_each_cpu_mask`. With two CPUs there is at most one target, so nothing is
/// lost; with three, a second CPU running the mm keeps its entries.
///
/// It holds a pointer, not a reference: a handler gets the target's `&H` for the
/// handler's call only, and `Hw`'s handlers take `&Self`.
struct FirstTargetOnly<H: Hw>(*const H);

impl<H: Hw> WrapHw for FirstTargetOnly<H> {
    type Inner = H;
    type Carry = ();
    fn inner(&self) -> &H {
        // SAFETY: a FirstTargetOnly lives only inside the call that lent the `&H`
        // it points at (a flush, or one handler run).
        unsafe { &*self.0 }
    }
    fn carry(&self) {}
    fn on_target(_: &(), hw: &H) -> Self {
        FirstTargetOnly(hw)
    }
    fn send_ipi<F: Fn(&Self)>(&self, targets: &CpuMask, handler: F) {
        let me = self.inner().cpu();
        let mut first = None;
        targets.for_each(|c| {
            if c != me && first.is_none() {
                first = Some(c);
            }
        });
        let one = CpuMask::new(self.inner().ncpus());
        if let Some(c) = first {
            one.set(c);
        }
        self.inner().send_ipi(&one, |h| handler(&FirstTargetOnly(h)))
    }
}

/// `x86-linux-pcid` whose flushes of user mappings send their IPIs to the
/// first target only ([`FirstTargetOnly`]).
struct OneTarget(LinuxX86);

impl Wrap for OneTarget {
    type Inner = LinuxX86;
    fn inner(&self) -> &LinuxX86 {
        &self.0
    }
    fn flush_page<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        self.0.flush_page(&FirstTargetOnly(hw as *const H), mm, va)
    }
    fn flush_range<H: Hw>(&self, hw: &H, mm: MmId, start: VirtAddr, pages: u64) {
        self.0.flush_range(&FirstTargetOnly(hw as *const H), mm, start, pages)
    }
    fn flush_mm<H: Hw>(&self, hw: &H, mm: MmId) {
        self.0.flush_mm(&FirstTargetOnly(hw as *const H), mm)
    }
    fn flush_batch<H: Hw>(&self, hw: &H, mms: &[MmId]) {
        self.0.flush_batch(&FirstTargetOnly(hw as *const H), mms)
    }
    fn flush_batched_pending<H: Hw>(&self, hw: &H, mm: MmId) {
        self.0.flush_batched_pending(&FirstTargetOnly(hw as *const H), mm)
    }
}

fn one_target(spec: &CheckSpec) -> impl Fn() -> OneTarget + '_ {
    move || OneTarget(LinuxX86::new(spec.cpus, spec.mms + 1, true))
}

#[test]
fn the_default_check_finds_a_flush_that_interrupts_one_target_of_two() {
    let spec = CheckSpec {
        iterations: preset("x86-linux-pcid", Depth::Default).iterations,
        ..default_spec("x86-linux-pcid", 1)
    };
    let t = std::time::Instant::now();
    let r = check_policy(&spec, &one_target(&spec)).unwrap();
    let cx = r.counterexample.unwrap_or_else(|| panic!("not found in {} schedules", r.explored.executions));
    assert_eq!(cx.property, "no_stale_held", "{}", cx.detail);
    assert_eq!(spec.cpus, 3);
    eprintln!("found in {} schedules, {:.1} s (test build)", r.explored.executions, t.elapsed().as_secs_f64());
}

#[test]
fn on_two_cpus_the_one_target_flush_is_the_real_one() {
    // The old default machine: every execution on two CPUs is one the real
    // policy also has (at most one other CPU to interrupt), so no search at that
    // shape can find the bug; a small exhaustive one completes clean.
    let spec = CheckSpec {
        cpus: 2,
        mms: 1,
        ops: 4,
        asids: 6,
        mode: Mode::Exhaustive,
        iterations: u64::MAX,
        memory: Memory::Sc,
        menu: OpKind::parse("switch,idle,munmap,fault").unwrap(),
        ..default_spec("x86-linux-pcid", 1)
    };
    let r = check_policy(&spec, &one_target(&spec)).unwrap();
    assert!(r.explored.complete && r.counterexample.is_none(), "{:?}", r.counterexample.map(|c| c.detail));
    // And the real policy passes the default run's first schedules.
    let r = check(&default_spec("x86-linux-pcid", 2_000)).unwrap();
    assert!(r.counterexample.is_none(), "{:?}", r.counterexample.map(|c| c.detail));
}
