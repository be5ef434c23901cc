//! The findings catalogue: each window's command finds that window (told apart
//! by which CPU refilled the aliased entry after the reset), its token is the one
//! the catalogue records and replays the same trace, and the fix candidate passes
//! where the faithful policy fails.

use crate::common;

use tlbkit_check::ops::OpKind;
use tlbkit_check::options::{Options, Plan};
use tlbkit_check::report::{CheckReport, Counterexample};
use tlbkit_check::run::check_after;
use tlbkit_check::shape::Memory;
use tlbkit_check::token::{decode, encode};
use tlbkit_check::{check, replay, CheckSpec, Mode};
use tlbkit_policy::findings::{finding, Finding, FINDINGS};

/// The request `tlbkit check ARGS` makes (the flags the catalogue uses),
/// resolved as the command line resolves it.
fn options_of(args: &[&str]) -> Options {
    let flag = |name: &str| args.iter().position(|a| *a == name).map(|i| args[i + 1].to_string());
    let num = |name: &str| flag(name).map(|v| v.parse::<usize>().unwrap());
    Options {
        policy: flag("--policy").expect("a --policy"),
        quick: args.contains(&"--quick"),
        deep: args.contains(&"--deep"),
        cpus: num("--cpus"),
        mms: num("--mms"),
        pages: num("--pages"),
        asids: flag("--asids").map(|v| v.parse().unwrap()),
        ops: num("--ops"),
        mode: flag("--mode"),
        iterations: flag("--iterations").map(|v| v.parse().unwrap()),
        seed: flag("--seed").map_or(1, |v| v.parse().unwrap()),
        memory: flag("--memory"),
        menu: flag("--menu"),
        from: flag("--from"),
        ..Options::default()
    }
}

/// The spec `tlbkit check ARGS` runs as one shape (with only `--policy`, the
/// policy's one-shape defaults, where its portfolio starts), and the schedule
/// it starts after (empty without `--from`).
fn spec_of(args: &[&str]) -> (CheckSpec, Vec<u32>) {
    let o = options_of(args);
    match o.plan().unwrap() {
        Plan::One(spec, _) => (spec, Vec::new()),
        Plan::After(spec, schedule) => (spec, schedule),
        Plan::Portfolio(_) | Plan::Saving(..) => (o.resolve().unwrap().0, Vec::new()),
    }
}

/// Runs `tlbkit check ARGS` on one thread.
fn check_args(args: &[&str]) -> CheckReport {
    match spec_of(args) {
        (spec, schedule) if schedule.is_empty() => check(&spec).unwrap(),
        (spec, schedule) => check_after(&spec, &schedule, &mut |_| {}).unwrap(),
    }
}

/// Which window of the reset finding a counterexample shows.
#[derive(Debug, PartialEq, Eq)]
enum Window {
    /// The aliased entry was refilled, after the last reset's flush, by the CPU
    /// that ran the reset (its own TTBR0 ASID was skipped).
    ResetSelf,
    /// It was refilled by another CPU, whose TTBR0 held an ASID the reset did
    /// not reserve (its curpmap already named another pmap).
    ResetCurpmap,
}

/// Tells the two windows apart from the counterexample's events: the aliased
/// entry (named in the violation) must have been filled after the last ASID
/// rollover; compare the CPU that filled it with the CPU that rolled over.
fn window_of(cx: &Counterexample) -> Window {
    assert_eq!(cx.property, "no_asid_alias", "{}", cx.detail);
    let at = cx.detail.find("the entry for ").expect("the violation names an entry");
    let entry = &cx.detail[at..cx.detail[at..].find(')').map(|e| at + e + 1).expect("an entry in parentheses")];
    let mut resetter = None;
    let mut filler = None;
    for st in &cx.steps {
        let cpu: usize = st.who.strip_prefix("cpu").and_then(|w| w.split(' ').next()).unwrap().parse().unwrap();
        for e in &st.events {
            if e.starts_with("ASID rollover") {
                resetter = Some(cpu);
                filler = None;
            }
            // TLBs are per CPU: the entry used is one the using CPU refilled (other
            // CPUs may refill the same translation meanwhile).
            if let Some(rest) = e.strip_prefix("speculative fill on cpu") {
                let on = rest.split(':').next().unwrap().parse::<usize>().unwrap();
                if rest.ends_with(entry) && resetter.is_some() && on == cx.cpu {
                    filler = Some(on);
                }
            }
        }
    }
    let resetter = resetter.expect("a rollover before the alias");
    let filler = filler.unwrap_or_else(|| panic!("no fill of '{entry}' after the last rollover:\n{}", cx.trace()));
    if filler == resetter {
        Window::ResetSelf
    } else {
        Window::ResetCurpmap
    }
}

/// Runs a finding's command and checks its token against the catalogue and its
/// replay against the trace.
fn found(f: &Finding) -> Counterexample {
    let r = check_args(f.check_args);
    let cx = r.counterexample.unwrap_or_else(|| panic!("{}: `{}` found nothing", f.id, f.command()));
    assert_eq!(
        cx.token,
        f.token,
        "{}: the catalogue's token (crates/policy/src/findings.rs) is not what `{}` prints now; re-record it",
        f.id,
        f.command()
    );
    let again = replay(&cx.token).unwrap().counterexample.expect("the replay violates again");
    assert_eq!((again.property, &again.detail, again.trace()), (cx.property, &cx.detail, cx.trace()));
    cx
}

#[test]
fn the_default_check_finds_window_1_the_resetting_cpu_skipping_itself() {
    let f = finding("freebsd-arm64-asid-reset-self").unwrap();
    assert_eq!(f.check_args, ["--policy", "arm64-freebsd-asid"], "window 1 is found with the defaults");
    let cx = found(f);
    assert_eq!(window_of(&cx), Window::ResetSelf, "{}", cx.trace());
}

#[test]
fn the_barrier_windows_are_found_only_under_their_memory_model() {
    for (id, weaker, stronger) in [
        ("linux-arm64-asid-publish", Memory::Arm, Memory::Tso),
        ("arm64-skipbcast-early-mask-read", Memory::Tso, Memory::Sc),
        ("arm64-tlbmode-mask-clear-reorder", Memory::Arm, Memory::Tso),
    ] {
        let f = finding(id).unwrap();
        let cx = found(f);
        assert_eq!(cx.property, f.property, "{id}: {}", cx.detail);
        let (spec, _) = spec_of(f.check_args);
        assert_eq!(spec.memory, weaker, "{id}");
        // The same complete search under the stronger model passes: the window
        // is the memory model's.
        let r = check(&CheckSpec { memory: stronger, ..spec }).unwrap();
        assert!(r.counterexample.is_none(), "{id} under {}: {:?}", stronger.name(), r.counterexample.map(|c| c.detail));
    }
}

#[test]
fn the_tlbmode_fix_passes_the_search_that_finds_the_mask_clear() {
    let f = finding("arm64-tlbmode-mask-clear-reorder").unwrap();
    let (spec, _) = spec_of(f.check_args);
    assert_eq!(f.fixed_by, ["arm64-linux-tlbmode-fix-wmb"]);
    let r = check(&CheckSpec { policy: f.fixed_by[0].into(), ..spec }).unwrap();
    assert!(r.counterexample.is_none(), "{:?}", r.counterexample.map(|c| c.detail));
    assert!(r.explored.complete, "the fix's search did not complete");
}

#[test]
fn window_2_is_found_on_freebsds_code_with_window_1_closed() {
    let f = finding("freebsd-arm64-asid-reset-curpmap").unwrap();
    let cx = found(f);
    assert_eq!(window_of(&cx), Window::ResetCurpmap, "{}", cx.trace());
    // The CPU that refilled had stored curpmap for another pmap before the reset
    // read it: its TTBR0 write of that pmap comes after the rollover.
    let after: Vec<&String> =
        cx.steps.iter().flat_map(|s| s.events.iter()).skip_while(|e| !e.starts_with("ASID rollover")).collect();
    assert!(after.iter().any(|e| e.starts_with("write root: mm")), "{}", cx.trace());
}

#[test]
fn the_token_is_what_encode_gives_for_the_commands_spec() {
    for f in FINDINGS {
        let (spec, schedule) = spec_of(f.check_args);
        let (decoded, choices) = decode(f.token).unwrap_or_else(|e| panic!("{}: {e}", f.id));
        // A check after a schedule prints tokens that start with it.
        assert!(choices.starts_with(&schedule), "{}", f.id);
        // A token's menu leaves `tick` out for a policy that does not tick (the
        // encoding below says which).
        let tickless = |m: u32| m & !OpKind::Tick.bit();
        assert_eq!(
            (
                &decoded.policy,
                decoded.cpus,
                decoded.mms,
                decoded.pages,
                decoded.asids,
                decoded.ops,
                tickless(decoded.menu)
            ),
            (&spec.policy, spec.cpus, spec.mms, spec.pages, spec.asids, spec.ops, tickless(spec.menu)),
            "{}",
            f.id
        );
        assert_eq!(encode(&spec, &choices), f.token, "{}", f.id);
    }
}

/// A check of `policy` (FreeBSD arm64's ASIDs, faithful or fixed) on 2 CPUs
/// with 3 address spaces of a page, 4 ASIDs and `ops` operations of every
/// kind, in `mode` for `iterations`.
fn asid_spec(policy: &str, ops: usize, mode: Mode, iterations: u64) -> CheckSpec {
    CheckSpec { asids: 4, mode, iterations, ..common::small_spec(policy, 1, ops) }
}

#[test]
fn the_fix_passes_a_pct_search_that_finds_the_faithful_policys_alias() {
    let spec = |policy: &str| asid_spec(policy, 8, Mode::Pct, 2_000);
    let faithful = check(&spec("arm64-freebsd-asid")).unwrap();
    let cx = faithful.counterexample.expect("the faithful policy's alias");
    assert_eq!(cx.property, "no_asid_alias", "{}", cx.detail);
    let fixed = check(&spec("arm64-freebsd-asid-fix-reserved-ttbr0")).unwrap();
    assert!(fixed.counterexample.is_none(), "{:?}", fixed.counterexample.map(|c| c.detail));
    assert_eq!(fixed.explored.executions, 2_000);
}

#[test]
fn the_fix_passes_a_small_exhaustive_check_where_the_faithful_policy_finds_window_1() {
    let spec = |policy: &str| CheckSpec {
        menu: OpKind::Switch.bit() | OpKind::Idle.bit(),
        ..asid_spec(policy, 4, Mode::Exhaustive, u64::MAX)
    };
    let fixed = check(&spec("arm64-freebsd-asid-fix-reserved-ttbr0")).unwrap();
    assert!(fixed.explored.complete && fixed.counterexample.is_none(), "{:?}", fixed.counterexample.map(|c| c.detail));
    let faithful = check(&spec("arm64-freebsd-asid")).unwrap();
    assert_eq!(window_of(&faithful.counterexample.expect("window 1")), Window::ResetSelf);
}

/// The global ASID finding: the schedule its command starts after is the one
/// `docs/findings/x86-global-asid-max.script` writes; in the counterexample
/// two processes are given global ASID 11, the second while the first still
/// holds it; the fix passes PCT schedules after the same script where the
/// faithful policy fails at once (its complete search is `full.rs`'s).
#[test]
fn the_global_asid_allocator_hands_max_out_twice_and_a_cpu_uses_the_first_mms_entry() {
    let f = finding("x86-global-asid-max").unwrap();
    let shape = common::global_asid_script;
    let Plan::After(spec, schedule) = shape("x86-linux-invlpgb").plan().unwrap() else { panic!("a schedule") };
    let from = f.check_args.iter().position(|a| *a == "--from").map(|i| f.check_args[i + 1]).unwrap();
    assert_eq!(encode(&spec, &schedule), from, "the script no longer writes the catalogue's --from schedule");
    let cx = found(f);
    assert_eq!(cx.property, "no_asid_alias", "{}", cx.detail);
    let events: Vec<&String> = cx.steps.iter().flat_map(|s| s.events.iter()).collect();
    let given: Vec<&String> = events.iter().copied().filter(|e| e.ends_with(".context.global_asid = 11")).collect();
    assert_eq!(given.len(), 2, "{}", cx.trace());
    let first = given[0].strip_prefix("store ").and_then(|e| e.split('.').next()).unwrap();
    let at = events.iter().position(|e| e == &given[0]).unwrap();
    let until = events.iter().position(|e| e == &given[1]).unwrap();
    assert!(
        !events[at..until].iter().any(|e| e.as_str() == format!("store {first}.context.global_asid = 0")),
        "{first} gave 11 back before the second:\n{}",
        cx.trace()
    );
    let pct = |policy: &str| {
        Options { mode: Some("pct".into()), iterations: Some(2_000), ..shape(policy) }.run(&mut |_| {}).unwrap()
    };
    assert!(pct("x86-linux-invlpgb").counterexample.is_some());
    let fixed = pct("x86-linux-invlpgb-fix-max");
    assert!(fixed.counterexample.is_none(), "{:?}", fixed.counterexample.map(|c| c.detail));
    assert_eq!(fixed.explored.executions, 2_000);
}

#[test]
fn latrs_artifact_frees_a_cow_or_migrated_page_while_a_cpu_still_holds_it() {
    for id in ["latr-artifact-cow", "latr-artifact-migrate"] {
        let f = finding(id).unwrap();
        let cx = found(f);
        assert_eq!(cx.property, "no_stale_held", "{id}: {}", cx.detail);
        let trace = cx.trace();
        let change = if id.ends_with("cow") { "cleared for cow" } else { "cleared for migrate" };
        assert!(trace.contains(change), "{id}: {trace}");
        // The deferral the trace shows only with every event.
        let events: Vec<&String> = cx.steps.iter().flat_map(|s| s.events.iter()).collect();
        assert!(
            events.iter().any(|e| e.contains("munmap_inprogress is set: it holds nothing")),
            "{id}: no deferred flush of another caller in {events:?}"
        );
        let (spec, _) = spec_of(f.check_args);
        assert_eq!(spec.mode, Mode::Exhaustive, "{id}");
        // The fix candidate passes the same complete search, within the zoo
        // tests' cap on exhaustive executions.
        for fix in f.fixed_by {
            let r = check(&CheckSpec { policy: fix.to_string(), ..spec.clone() }).unwrap();
            assert!(
                r.explored.complete && r.counterexample.is_none(),
                "{id} on {fix}: {:?}",
                r.counterexample.map(|c| c.detail)
            );
            assert!(r.explored.executions <= 100_000, "{id} on {fix}: {} executions", r.explored.executions);
        }
        // Controls: v4.10 without LATR passes the same search, and so does the
        // artifact without the operation that is not the flag-setter's.
        let r = check(&CheckSpec { policy: "x86-linux-410".into(), ..spec.clone() }).unwrap();
        assert!(
            r.explored.complete && r.counterexample.is_none(),
            "{id} on x86-linux-410: {:?}",
            r.counterexample.map(|c| c.detail)
        );
        let without = spec.menu & !(OpKind::Cow.bit() | OpKind::Migrate.bit());
        let r = check(&CheckSpec { menu: without, ..spec }).unwrap();
        assert!(
            r.explored.complete && r.counterexample.is_none(),
            "{id} without cow/migrate: {:?}",
            r.counterexample.map(|c| c.detail)
        );
    }
}

#[test]
fn a_violation_that_may_be_a_recorded_finding_names_it() {
    for f in FINDINGS {
        let cx = replay(f.token).unwrap().counterexample.unwrap_or_else(|| panic!("{}: no violation", f.id));
        assert_eq!(cx.property, f.property, "{}", f.id);
        assert!(cx.known.iter().any(|k| k.kind == "finding" && k.id == f.id), "{}: {:?}", f.id, cx.known);
        assert!(cx.known.iter().all(|k| k.kind == "finding"), "{}: {:?}", f.id, cx.known);
    }
    // arm64-linux's finding needs arm64's ordering: a violation of the same
    // property under TSO, or of another property, is not it.
    let cx = replay("t5~arm64-linux~2~2~1~4~3~arm~17~-~z19.1z16.13~bd411875").unwrap().counterexample.unwrap();
    assert_eq!(tlbkit_check::report::known(&cx.token, cx.property)[0].id, "linux-arm64-asid-publish");
    let tso = encode(&CheckSpec { memory: Memory::Tso, ..decode(&cx.token).unwrap().0 }, &[]);
    assert!(tlbkit_check::report::known(&tso, "no_stale_use").is_empty());
    assert!(tlbkit_check::report::known(&cx.token, "no_asid_alias").is_empty());
    // A zoo policy's violation names the bug it re-introduces.
    let zoo = CheckSpec { policy: "zoo/linux-arm64-a8ffaaa060b8".into(), ..decode(&cx.token).unwrap().0 };
    let k = tlbkit_check::report::known(&encode(&zoo, &[]), "no_asid_alias");
    assert_eq!((k.len(), k[0].kind, k[0].id), (1, "zoo", "linux-arm64-a8ffaaa060b8"));
}
