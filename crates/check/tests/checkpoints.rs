//! Checkpoints (`tlbkit_check::exec::Checkpoints`) against replaying every
//! prefix from the beginning. A checkpoint stands for every execution that made
//! its choices, so restoring one must be indistinguishable from replaying
//! them: with one worker the search must run the same executions, reach the
//! same states, cut the same executions short and find the same
//! counterexample, checkpoints on or off. (Every other test of the checker
//! runs with them on, the default.)

use tlbkit_check::exec::steps_run;
use tlbkit_check::run::check_exhaustive_jobs;
use tlbkit_check::search::{with_checkpoints, with_reduction};
use tlbkit_check::{check, CheckReport, CheckSpec};

use crate::common;

/// What a one-worker search did: the figures and the counterexample's token.
fn search(r: &CheckReport) -> (u64, u64, u64, usize, bool, Option<String>) {
    (
        r.explored.executions,
        r.explored.states,
        r.explored.pruned,
        r.explored.max_steps,
        r.explored.complete,
        r.counterexample.as_ref().map(|c| c.token.clone()),
    )
}

/// Checks `spec` with checkpoints on and off; asserts the two searches alike
/// and returns the report.
fn alike(spec: &CheckSpec, what: &str) -> CheckReport {
    let on = with_checkpoints(true, || check(spec)).unwrap();
    let off = with_checkpoints(false, || check(spec)).unwrap();
    assert_eq!(search(&on), search(&off), "{what}: checkpoints on, then off");
    on
}

#[test]
fn every_policy_searches_alike_with_checkpoints_on_and_off() {
    for p in tlbkit_registry::POLICIES {
        let r = alike(&common::small_spec(p.name, 1, 3), p.name);
        assert!(
            r.explored.executions > 100,
            "{}: a search too small to tell ({} executions)",
            p.name,
            r.explored.executions
        );
    }
}

#[test]
fn two_pages_and_tso_with_and_without_partial_order_reduction_search_alike() {
    for (p, s) in common::two_pages_under_tso() {
        for reduce in [true, false] {
            with_reduction(reduce, || alike(&s, &format!("{p}, two pages under TSO, reduction {reduce}")));
        }
    }
}

#[test]
fn zoo_entries_are_found_with_the_same_counterexample_with_checkpoints_on_and_off() {
    for (id, property) in common::QUICK_ZOO {
        let r = alike(&common::zoo_spec(id), id);
        assert_eq!(r.counterexample.map(|c| c.property), Some(property), "zoo/{id}");
    }
}

#[test]
fn a_parallel_search_with_checkpoints_reaches_the_states_of_one_without() {
    for (policy, ops) in [("arm64-linux", 3), ("x86-freebsd-scoreboard", 3)] {
        let s = common::small_spec(policy, 1, ops);
        let off = with_checkpoints(false, || check(&s)).unwrap();
        for jobs in [2, 3] {
            let on = check_exhaustive_jobs(&s, jobs).unwrap();
            assert!(on.explored.complete && on.counterexample.is_none(), "{policy} --jobs {jobs}");
            assert_eq!(on.explored.states, off.explored.states, "{policy} --jobs {jobs}");
        }
    }
}

#[test]
fn lazy_flushes_held_across_a_pause_search_alike() {
    // A CPU completing a lazy flush holds it (taken out of the state) across
    // the pauses of its discharge: a checkpoint taken meanwhile must bring it
    // back with the CPU's stack (this once corrupted the heap). Five
    // operations of this menu are the fewest that reach it: counted once with
    // a probe in `ops::complete_lazy`, 28,532 executions under `sc` pause
    // 1,250,159 times with a lazy flush held; four operations, of this menu
    // or the whole one, pause none.
    use tlbkit_check::ops::OpKind;
    for memory in [tlbkit_check::shape::Memory::Sc, tlbkit_check::shape::Memory::Tso] {
        let base = common::small_spec("x86-latr", 2, 5);
        let s = CheckSpec { mms: 1, memory, menu: OpKind::parse("switch,munmap,tick").unwrap(), ..base };
        let r = alike(&s, &format!("x86-latr under {}", memory.name()));
        assert!(
            r.explored.executions > 1000,
            "x86-latr: a search too small to tell ({} executions)",
            r.explored.executions
        );
    }
}

/// The steps a search runs (`exec::steps_run`, what `tlbkit bench sharded`
/// reports as the work of a search) are counted, with checkpoints on and
/// off: at least one for each state reached after the first. (The other
/// tests of this binary may add to the count meanwhile, so only the least
/// is asserted.)
#[test]
fn the_steps_a_search_runs_are_counted() {
    let spec = common::small_spec("x86-linux-410", 1, 3);
    for on in [true, false] {
        let before = steps_run();
        let r = with_checkpoints(on, || check_exhaustive_jobs(&spec, 2)).unwrap();
        let ran = steps_run() - before;
        assert!(ran + 1 >= r.explored.states, "checkpoints {on}: {ran} steps for {} states", r.explored.states);
    }
}
