//! The state hash's renaming of frames and uids (`tlbkit_check::kernel`'s
//! `Renaming`) against the hash without it. Renaming only merges states that
//! differ in which frame number or uid each use got, which nothing that runs
//! can tell apart, so the search must give the same verdict with it on and off,
//! reach no more states with it on, and find the zoo's bugs either way.

use tlbkit_check::run::check_exhaustive_jobs;
use tlbkit_check::search::{with_local_steps, with_reduction, with_renaming};
use tlbkit_check::{check, CheckReport};

use crate::common;

/// Runs `check` with the renaming on or off.
fn renaming(on: bool, check: &dyn Fn() -> CheckReport) -> CheckReport {
    with_renaming(on, check)
}

#[test]
fn every_policy_gives_the_same_verdict_in_no_more_states_with_the_renaming() {
    let fewer = common::no_more_states_with("the renaming", renaming);
    // The renaming does something: frames freed in one order and reused in
    // the other meet again.
    assert!(fewer.len() >= 5, "only {fewer:?} reached fewer states with the renaming");
}

#[test]
fn two_pages_and_tso_give_the_same_verdicts_with_the_renaming_with_and_without_partial_order_reduction() {
    for (p, s) in common::two_pages_under_tso() {
        for reduce in [true, false] {
            let (on, off) = with_reduction(reduce, || common::on_and_off(&s, renaming));
            common::assert_same_verdict_in_no_more_states(p, &on, &off);
        }
        // Sleep sets reach exactly the states the full search does with the
        // renaming on too (local steps explored alone leave some out).
        let por = with_local_steps(false, || with_reduction(true, || check(&s))).unwrap();
        let full = with_reduction(false, || check(&s)).unwrap();
        assert_eq!(por.explored.states, full.explored.states, "{p}");
    }
}

#[test]
fn zoo_entries_are_found_exhaustively_with_the_renaming_on_and_off() {
    common::quick_zoo_found_on_and_off("the renaming", renaming);
}

#[test]
fn the_renamed_parallel_search_reaches_the_same_states_with_any_number_of_workers() {
    for (policy, ops) in [("arm64-linux", 3), ("x86-freebsd-counter", 3)] {
        let s = common::small_spec(policy, 1, ops);
        let one = check(&s).unwrap();
        let off = with_renaming(false, || check(&s)).unwrap();
        assert!(
            one.explored.states < off.explored.states,
            "{policy}: {} renamed, {} not",
            one.explored.states,
            off.explored.states
        );
        for jobs in [2, 3] {
            let on = check_exhaustive_jobs(&s, jobs).unwrap();
            assert!(on.explored.complete && on.counterexample.is_none(), "{policy} --jobs {jobs}");
            assert_eq!(on.explored.states, one.explored.states, "{policy} --jobs {jobs}");
        }
    }
}
