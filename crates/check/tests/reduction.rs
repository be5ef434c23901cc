//! Partial-order reduction (sleep sets, `tlbkit_check::search`) against the
//! search without it. Sleep sets only skip transitions whose outcome another
//! order reaches, so the search must reach exactly the same states with the
//! reduction on and off, and give the same verdict: that is what these tests
//! compare, for every registered policy, the zoo entries an exhaustive search
//! finds quickly, and the parallel search. Local steps explored alone, the
//! other half of the reduction, leave states out: they are off here where
//! states are compared, and `local.rs` tests them. (The full zoo, exhaustively
//! with the reduction on, is `full.rs`'s `every_zoo_entry_is_found_exhaustively`.)

use crate::common::verdict;
use tlbkit_check::run::check_exhaustive_jobs;
use tlbkit_check::search::{with_local_steps, with_reduction};
use tlbkit_check::{check, CheckReport};

use crate::common;

/// Runs `check` with the reduction on (local steps off) or off.
fn reduction(on: bool, check: &dyn Fn() -> CheckReport) -> CheckReport {
    if on {
        with_local_steps(false, || with_reduction(true, check))
    } else {
        with_reduction(false, check)
    }
}

#[test]
fn every_policy_reaches_the_same_states_and_verdict_with_the_reduction_on_and_off() {
    let mut fewer = 0;
    common::every_policy_on_and_off("the reduction", reduction, |name, on, off| {
        assert_eq!(on.explored.states, off.explored.states, "{name}: states differ with the reduction");
        assert!(
            on.explored.executions <= off.explored.executions,
            "{name}: {} > {}",
            on.explored.executions,
            off.explored.executions
        );
        fewer += (on.explored.executions < off.explored.executions) as usize;
    });
    // The reduction does something: most policies need fewer executions.
    assert!(fewer >= 6, "only {fewer} policies ran fewer executions with the reduction");
}

#[test]
fn two_pages_and_tso_reach_the_same_states_with_the_reduction() {
    for (p, s) in common::two_pages_under_tso() {
        let (on, off) = common::on_and_off(&s, reduction);
        assert_eq!(verdict(&on), verdict(&off), "{p}");
        assert_eq!((on.explored.states, on.explored.complete), (off.explored.states, off.explored.complete), "{p}");
    }
}

#[test]
fn zoo_entries_are_found_exhaustively_with_the_reduction_on_and_off() {
    common::quick_zoo_found_on_and_off("the reduction", reduction);
}

#[test]
fn the_parallel_search_with_the_reduction_reaches_the_same_states_as_one_thread_without() {
    for (policy, ops) in [("arm64-linux", 3), ("x86-freebsd-counter", 3)] {
        let s = common::small_spec(policy, 1, ops);
        let off = with_reduction(false, || check(&s)).unwrap();
        for jobs in [1, 2, 3] {
            let on = with_local_steps(false, || with_reduction(true, || check_exhaustive_jobs(&s, jobs))).unwrap();
            assert!(on.explored.complete && on.counterexample.is_none(), "{policy} --jobs {jobs}");
            assert_eq!(on.explored.states, off.explored.states, "{policy} --jobs {jobs}");
        }
    }
}

#[test]
fn arm64s_loads_out_of_order_reach_the_same_states_with_the_reduction_on_and_off() {
    // Under `--memory arm` a load's choice of value is one transition per
    // option, whose footprint the search gathers over replays and keeps on
    // the worker that made the choice; ordering points read every field.
    for (policy, ops) in
        [("arm64-linux-activecpu", 2), ("arm64-freebsd-asid-fix-reserved-ttbr0", 2), ("arm64-noasid", 3)]
    {
        let mut s = common::small_spec(policy, 1, ops);
        s.memory = tlbkit_check::shape::Memory::Arm;
        let (on, off) = common::on_and_off(&s, reduction);
        assert_eq!(verdict(&on), verdict(&off), "{policy}");
        assert_eq!(
            (on.explored.states, on.explored.complete),
            (off.explored.states, off.explored.complete),
            "{policy}"
        );
        assert!(on.explored.executions < off.explored.executions, "{policy}: the reduction did nothing");
        for jobs in [2, 3] {
            let par = with_local_steps(false, || with_reduction(true, || check_exhaustive_jobs(&s, jobs))).unwrap();
            assert_eq!(par.explored.states, off.explored.states, "{policy} --jobs {jobs}");
        }
    }
}
