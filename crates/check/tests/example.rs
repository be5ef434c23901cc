//! The guide's worked example (`examples/my-policy`, registered as
//! `arm64-freebsd-asid-activecpu`): its change is what the checker judges.
//! As written it passes the default portfolio (the guide's quoted
//! `tlbkit check --policy arm64-freebsd-asid-activecpu`, asserted by the
//! command-line tests' `guide::the_guide_quotes_what_tlbkit_prints`); with
//! each of its [`Mistake`]s made the default portfolio finds a violation, so
//! the check reaches the code the example changes.

use my_policy::{ActiveCpu, Mistake};
use tlbkit_check::portfolio::portfolio;
use tlbkit_check::run::check_policy;
use tlbkit_check::CheckReport;
use tlbkit_policy::asid::freebsd_epoch::Variant;
use tlbkit_policy::asid::FreebsdEpoch;

// The checker's arena: a policy's allocations are restored with its checkpoints.
const NAME: &str = "arm64-freebsd-asid-activecpu";

/// Runs the default portfolio of the example (`tlbkit check --policy NAME`)
/// on the example built with `mistake` (the registry's builder for the
/// checker's shape: arm64 ASIDs of `--asids`, one pmap slot per address space
/// and the kernel's), shape after shape until one finds a
/// violation; returns that shape's number (from 1) and report.
fn default_check(mistake: Mistake) -> Option<(usize, CheckReport)> {
    for (i, spec) in portfolio(NAME, None, 1).members.iter().enumerate() {
        let build = || {
            let inner = FreebsdEpoch::new(spec.cpus, spec.mms + 1, spec.asids.trailing_zeros() as u8)
                .with_variant(Variant::ReservedTtbr0);
            ActiveCpu::new(inner, spec.mms + 1).with_mistake(mistake)
        };
        let r = check_policy(spec, &build).expect("the check runs");
        if r.counterexample.is_some() {
            return Some((i + 1, r));
        }
    }
    None
}

#[test]
fn recording_only_the_last_cpu_is_a_stale_translation_the_default_check_finds() {
    let (shape, r) = default_check(Mistake::LastCpuOnly).expect("a violation");
    let c = r.counterexample.expect("a counterexample");
    assert_eq!((c.property, shape), ("no_stale_held", 3), "{c:?}");
}

#[test]
fn deciding_on_the_first_load_is_a_stale_walk_the_default_check_finds() {
    let (shape, r) = default_check(Mistake::EarlyRead).expect("a violation");
    let c = r.counterexample.expect("a counterexample");
    assert_eq!((c.property, shape, r.bounds.memory), ("no_stale_held", 3, "tso"), "{c:?}");
}

#[test]
fn the_report_says_which_hooks_the_check_ran() {
    // The portfolio's first shape: the example's methods run, flush_range
    // never (the checker's FreeBSD kernel unmaps page by page).
    let spec = &portfolio(NAME, Some(2_000), 1).members[0];
    let r = tlbkit_check::check(spec).expect("the check runs");
    let calls = |hook: &str| r.hooks.iter().find(|h| h.hook == hook).map(|h| h.calls);
    assert_eq!(r.hooks.len(), tlbkit_check::hooks::HOOKS.len());
    assert!(calls("switch_mm") > Some(0) && calls("flush_page") > Some(0), "{:?}", r.hooks);
    assert_eq!(calls("flush_range"), Some(0));
    let text = r.to_text();
    let line = text.lines().find(|l| l.starts_with("hooks called: ")).expect("a line of hooks");
    let never = line.split_once("; never called: ").map_or("", |(_, n)| n);
    // And says why: the kernel, not the schedule, rules it out.
    assert!(never.contains("flush_range (FreeBSD's kernel here invalidates a munmap's page with flush_page"), "{line}");
}

#[test]
fn a_portfolio_gives_each_shapes_hooks_and_they_sum_to_its_own() {
    let p = portfolio(NAME, Some(3_000), 1);
    let r = tlbkit_check::run::check_portfolio(&p, &mut |_| {}).expect("the check runs");
    assert!(r.counterexample.is_none());
    let ran: Vec<_> = r.portfolio.iter().filter(|s| s.schedules > 0).collect();
    assert!(ran.len() > 1 && ran.iter().all(|s| s.hooks.len() == tlbkit_check::hooks::HOOKS.len()));
    for total in &r.hooks {
        let by_shape: u64 =
            ran.iter().map(|s| s.hooks.iter().find(|h| h.hook == total.hook).map_or(0, |h| h.calls)).sum();
        assert_eq!(by_shape, total.calls, "{}", total.hook);
    }
    // Shapes differ in what they reach: some shape calls a hook another never does.
    let calls = |s: &tlbkit_check::report::ShapeRun, hook: &str| s.hooks.iter().find(|h| h.hook == hook).unwrap().calls;
    assert!(ran.iter().any(|s| calls(s, "mm_release") == 0) && ran.iter().any(|s| calls(s, "mm_release") > 0));
}
