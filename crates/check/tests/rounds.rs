//! A distributed exhaustive check in rounds (`tlbkit_check::run::rounds`),
//! run here without a cluster: each round's state split among tasks, each
//! task run for a budget of executions, their parts merged. It must end
//! with the verdict and the states of the check on one machine, and find a
//! violation one has.

use tlbkit_check::run::rounds::{round_merge, round_progress, round_report, round_run, round_split, round_start};
use tlbkit_check::{CheckSpec, Mode};

mod common;

#[global_allocator]
static ALLOC: tlbkit_check::arena::CheckAlloc = tlbkit_check::arena::CheckAlloc;

/// Runs `spec` in rounds of `tasks` tasks of `budget` executions; returns the
/// report, or `None` when a task found a violation, and the rounds run.
fn in_rounds(spec: &CheckSpec, tasks: usize, budget: u64) -> (Option<tlbkit_check::CheckReport>, usize) {
    let mut state = round_start(spec).unwrap();
    let mut rounds = 0;
    loop {
        let (frontier, _) = round_progress(&state).unwrap();
        if frontier == 0 {
            return (Some(round_report(spec, &state, tasks).unwrap()), rounds);
        }
        rounds += 1;
        let mut back = Vec::new();
        for part in round_split(&state, tasks).unwrap() {
            let (body, found) = round_run(spec, &part, budget, 1).unwrap();
            if found {
                return (None, rounds);
            }
            back.push(body);
        }
        state = round_merge(&state, &back).unwrap();
    }
}

#[test]
fn rounds_reach_the_states_of_one_machine() {
    for policy in ["arm64-linux", "x86-linux-pcid", "x86-freebsd-gen"] {
        let spec = common::small_spec(policy, 1, 3);
        let local = tlbkit_check::run::check_exhaustive_jobs(&spec, 1).unwrap();
        let (dist, rounds) = in_rounds(&spec, 3, 400);
        let dist = dist.expect("no violation");
        assert!(rounds > 2, "{policy}: the search should take several rounds ({rounds})");
        assert!(dist.complete && local.complete);
        assert_eq!(dist.states, local.states, "{policy}");
        assert_eq!(dist.counterexample.is_none(), local.counterexample.is_none(), "{policy}");
    }
}

#[test]
fn a_task_that_finds_a_violation_says_so() {
    let spec =
        CheckSpec { mode: Mode::Exhaustive, iterations: u64::MAX, ..common::zoo_spec("linux-arm64-a8ffaaa060b8") };
    assert!(tlbkit_check::run::check_exhaustive_jobs(&spec, 1).unwrap().counterexample.is_some());
    let (report, _) = in_rounds(&spec, 2, 300);
    assert!(report.is_none(), "the rounds missed the violation one machine finds");
}
