//! The parallel exhaustive search (`check_exhaustive_jobs`) against the
//! one-thread search: on small bounds where both complete, the same verdict
//! and the same number of states for every worker count; a violation's
//! counterexample is the finding worker's own path, shrunk.

use tlbkit_check::run::check_exhaustive_jobs;
use tlbkit_check::{check, CheckSpec, Mode};

use crate::common;

/// The small exhaustive check of `policy` (one page per address space).
fn spec(policy: &str, ops: usize) -> CheckSpec {
    common::small_spec(policy, 1, ops)
}

#[test]
fn every_worker_count_reaches_the_same_states_and_verdict_as_one_thread() {
    for (policy, ops) in [("arm64-noasid", 4), ("x86-freebsd-counter", 3), ("x86-linux-pcid", 2)] {
        let s = spec(policy, ops);
        let one = check(&s).unwrap();
        assert!(one.explored.complete && one.counterexample.is_none(), "{policy}: {one:?}");
        for jobs in [1, 2, 3] {
            let r = check_exhaustive_jobs(&s, jobs).unwrap();
            assert!(r.explored.complete, "{policy} --jobs {jobs}: incomplete");
            assert!(r.counterexample.is_none(), "{policy} --jobs {jobs}: {:?}", r.counterexample);
            assert_eq!(
                r.explored.states, one.explored.states,
                "{policy} --jobs {jobs}: states differ from one thread's"
            );
            assert_eq!(r.explored.workers, jobs);
            // Without partial-order reduction every state is expanded once, by
            // whichever worker visits it first, and each of its choices starts
            // one execution: so the executions and the cuts do not depend on the
            // workers either. (With it, a state a worker reaches with fewer
            // transitions asleep is explored again for those, so they can.)
            let (a, b) = tlbkit_check::search::with_reduction(false, || {
                (check(&s).unwrap(), check_exhaustive_jobs(&s, jobs).unwrap())
            });
            assert_eq!(
                (b.explored.states, b.explored.executions, b.explored.pruned),
                (a.explored.states, a.explored.executions, a.explored.pruned),
                "{policy} --jobs {jobs}"
            );
        }
    }
}

#[test]
fn a_violation_is_reported_from_the_finding_workers_path_for_every_worker_count() {
    // The catalogued finding (window 1) of FreeBSD's arm64 ASID reset.
    let s = spec("arm64-freebsd-asid", 6);
    let one = check(&s).unwrap().counterexample.expect("the finding is found");
    for jobs in [1, 2, 4] {
        let r = check_exhaustive_jobs(&s, jobs).unwrap();
        let c = r.counterexample.unwrap_or_else(|| panic!("--jobs {jobs}: the finding is not found"));
        assert_eq!(c.property, one.property, "--jobs {jobs}");
        // One worker explores as the one-thread search does, so it finds and
        // shrinks the same execution; more may find another first.
        if jobs == 1 {
            assert_eq!(c.token, one.token, "--jobs 1");
        }
        // The token replays to the same violation, step for step.
        let again = tlbkit_check::run::replay(&c.token).unwrap();
        let replayed = again.counterexample.unwrap_or_else(|| panic!("--jobs {jobs}: {} replays clean", c.token));
        assert_eq!(replayed.property, c.property, "--jobs {jobs}");
        assert_eq!(replayed.steps.len(), c.steps.len(), "--jobs {jobs}");
    }
}

#[test]
fn a_cap_on_executions_leaves_the_search_incomplete() {
    let mut s = spec("arm64-linux", 4);
    s.iterations = 50;
    let r = check_exhaustive_jobs(&s, 2).unwrap();
    assert!(!r.explored.complete);
    assert!(r.explored.executions <= 50, "{}", r.explored.executions);
}

#[test]
fn a_bad_size_is_refused_with_its_own_message_before_any_worker_starts() {
    // FreeBSD x86's PCIDs per CPU are a power of two; the workers would each
    // fail to build the policy, which once read as "no execution ran".
    let mut s = spec("x86-freebsd-counter", 3);
    s.asids = 6;
    let e = check_exhaustive_jobs(&s, 2).unwrap_err();
    assert!(matches!(e, tlbkit_check::Error::Asids { asids: 6, .. }), "{e:?}");
    assert!(e.to_string().starts_with("asids 6: ") && e.to_string().contains("power of two"), "{e}");
}

#[test]
fn bad_worker_counts_and_modes_are_refused() {
    let e = check_exhaustive_jobs(&spec("arm64-linux", 3), 0).unwrap_err();
    assert!(matches!(e, tlbkit_check::Error::NoJobs), "{e:?}");
    assert!(e.to_string().contains("jobs 0 runs nothing"), "{e}");
    let mut s = spec("arm64-linux", 3);
    s.mode = Mode::Pct;
    let e = check_exhaustive_jobs(&s, 2).unwrap_err();
    assert!(e.to_string().contains("jobs applies to exhaustive mode"), "{e}");
    let e = check_exhaustive_jobs(&spec("no-such-policy", 3), 2).unwrap_err();
    assert!(e.to_string().contains("no-such-policy"), "{e}");
}
