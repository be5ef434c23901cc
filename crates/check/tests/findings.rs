//! The findings catalogue: each window's command finds that window (told apart
//! by which CPU refilled the aliased entry after the reset), its token is the one
//! the catalogue records and replays the same trace, and the fix candidate passes
//! where the faithful policy fails.

use tlbkit_check::ops::OpKind;
use tlbkit_check::report::Counterexample;
use tlbkit_check::shape::Memory;
use tlbkit_check::spec::{default_asids, default_memory, defaults, preset, Preset};
use tlbkit_check::token::{decode, encode};
use tlbkit_check::{check, replay, CheckSpec, Mode};
use tlbkit_policy::findings::{finding, Finding, FINDINGS};

#[global_allocator]
static ALLOC: tlbkit_check::arena::CheckAlloc = tlbkit_check::arena::CheckAlloc;

/// The spec `tlbkit check ARGS` runs (the flags the catalogue uses, with the
/// defaults of `src/cmd/check.rs`).
fn spec_of(args: &[&str]) -> CheckSpec {
    let flag = |name: &str| args.iter().position(|a| *a == name).map(|i| args[i + 1]);
    let policy = flag("--policy").expect("a --policy").to_string();
    let d = if args.contains(&"--quick") {
        preset(&policy, Preset::Quick)
    } else if args.contains(&"--deep") {
        preset(&policy, Preset::Deep)
    } else {
        preset(&policy, Preset::Default)
    };
    let cpus = flag("--cpus").map_or(d.cpus, |v| v.parse().unwrap());
    let mode = match flag("--mode") {
        Some("exhaustive") => Mode::Exhaustive,
        Some("pct") => Mode::Pct,
        Some("random") => Mode::Random,
        Some(other) => panic!("mode {other}"),
        None => d.mode,
    };
    let memory = match flag("--memory") {
        Some(m) => Memory::from_name(m).unwrap_or_else(|| panic!("memory {m}")),
        None => default_memory(&policy),
    };
    CheckSpec {
        memory,
        cpus,
        mms: flag("--mms").map_or(d.mms, |v| v.parse().unwrap()),
        pages: flag("--pages").map_or(d.pages, |v| v.parse().unwrap()),
        asids: flag("--asids").map_or(default_asids(&policy, cpus), |v| v.parse().unwrap()),
        ops: flag("--ops").map_or(d.ops, |v| v.parse().unwrap()),
        iterations: flag("--iterations").map_or(
            match (mode, d.mode) {
                (Mode::Exhaustive, _) => u64::MAX,
                (_, Mode::Exhaustive) => defaults(&policy).iterations,
                _ => d.iterations,
            },
            |v| v.parse().unwrap(),
        ),
        seed: flag("--seed").map_or(1, |v| v.parse().unwrap()),
        menu: flag("--menu").map_or(d.menu, |v| OpKind::parse(v).unwrap()),
        mode,
        policy,
        teardown: None,
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
    let spec = spec_of(f.check_args);
    let r = check(&spec).unwrap();
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
    ] {
        let f = finding(id).unwrap();
        let cx = found(f);
        assert_eq!(cx.property, "no_stale_use", "{id}: {}", cx.detail);
        let spec = spec_of(f.check_args);
        assert_eq!(spec.memory, weaker, "{id}");
        // The same complete search under the stronger model passes: the window
        // is the memory model's.
        let r = check(&CheckSpec { memory: stronger, ..spec }).unwrap();
        assert!(r.counterexample.is_none(), "{id} under {}: {:?}", stronger.name(), r.counterexample.map(|c| c.detail));
    }
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
        let spec = spec_of(f.check_args);
        let (decoded, choices) = decode(f.token).unwrap_or_else(|e| panic!("{}: {e}", f.id));
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

#[test]
fn the_fix_passes_a_pct_search_that_finds_the_faithful_policys_alias() {
    let spec = |policy: &str| CheckSpec {
        policy: policy.to_string(),
        cpus: 2,
        mms: 3,
        pages: 1,
        asids: 4,
        ops: 8,
        mode: Mode::Pct,
        iterations: 2_000,
        seed: 1,
        memory: Memory::Sc,
        menu: OpKind::all(),
        teardown: None,
    };
    let faithful = check(&spec("arm64-freebsd-asid")).unwrap();
    let cx = faithful.counterexample.expect("the faithful policy's alias");
    assert_eq!(cx.property, "no_asid_alias", "{}", cx.detail);
    let fixed = check(&spec("arm64-freebsd-asid-fix-reserved-ttbr0")).unwrap();
    assert!(fixed.counterexample.is_none(), "{:?}", fixed.counterexample.map(|c| c.detail));
    assert_eq!(fixed.executions, 2_000);
}

#[test]
fn the_fix_passes_a_small_exhaustive_check_where_the_faithful_policy_finds_window_1() {
    let spec = |policy: &str| CheckSpec {
        policy: policy.to_string(),
        cpus: 2,
        mms: 3,
        pages: 1,
        asids: 4,
        ops: 4,
        mode: Mode::Exhaustive,
        iterations: u64::MAX,
        seed: 1,
        memory: Memory::Sc,
        menu: OpKind::Switch.bit() | OpKind::Idle.bit(),
        teardown: None,
    };
    let fixed = check(&spec("arm64-freebsd-asid-fix-reserved-ttbr0")).unwrap();
    assert!(fixed.complete && fixed.counterexample.is_none(), "{:?}", fixed.counterexample.map(|c| c.detail));
    let faithful = check(&spec("arm64-freebsd-asid")).unwrap();
    assert_eq!(window_of(&faithful.counterexample.expect("window 1")), Window::ResetSelf);
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
        let spec = spec_of(f.check_args);
        assert_eq!(spec.mode, Mode::Exhaustive, "{id}");
        // The fix candidate passes the same complete search, within the zoo
        // tests' cap on exhaustive executions.
        for fix in f.fixed_by {
            let r = check(&CheckSpec { policy: fix.to_string(), ..spec.clone() }).unwrap();
            assert!(
                r.complete && r.counterexample.is_none(),
                "{id} on {fix}: {:?}",
                r.counterexample.map(|c| c.detail)
            );
            assert!(r.executions <= 100_000, "{id} on {fix}: {} executions", r.executions);
        }
        // Controls: v4.10 without LATR passes the same search, and so does the
        // artifact without the operation that is not the flag-setter's.
        let r = check(&CheckSpec { policy: "x86-linux-410".into(), ..spec.clone() }).unwrap();
        assert!(
            r.complete && r.counterexample.is_none(),
            "{id} on x86-linux-410: {:?}",
            r.counterexample.map(|c| c.detail)
        );
        let without = spec.menu & !(OpKind::Cow.bit() | OpKind::Migrate.bit());
        let r = check(&CheckSpec { menu: without, ..spec }).unwrap();
        assert!(
            r.complete && r.counterexample.is_none(),
            "{id} without cow/migrate: {:?}",
            r.counterexample.map(|c| c.detail)
        );
    }
}
