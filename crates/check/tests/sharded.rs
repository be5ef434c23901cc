//! The sharded exhaustive search (`check_exhaustive_sharded`) against the
//! one-thread search: each state admitted by its owner's table alone, so on
//! small bounds where both complete, the same verdict and the same states
//! for any number of nodes and workers, any latency; a violation is found
//! and its counterexample is a worker's own path.

use std::time::Duration;
use tlbkit_check::check;
use tlbkit_check::run::check_exhaustive_sharded;
use tlbkit_check::search::Link;

use crate::common;

#[test]
fn every_node_count_reaches_the_same_states_and_verdict_as_one_thread() {
    for (policy, ops) in [("arm64-noasid", 4), ("x86-freebsd-counter", 3), ("x86-linux-pcid", 2)] {
        let s = common::small_spec(policy, 1, ops);
        let one = check(&s).unwrap();
        assert!(one.explored.complete && one.counterexample.is_none(), "{policy}: {one:?}");
        for (nodes, jobs, latency_us, batch) in [(1, 1, 0, 64), (2, 2, 0, 64), (3, 3, 200, 16), (2, 3, 50, 1)] {
            let link = Link { latency: Duration::from_micros(latency_us), batch };
            let (r, traffic) = check_exhaustive_sharded(&s, nodes, jobs, link).unwrap();
            let what = format!("{policy} with {nodes} node(s) of {jobs} worker(s) in all, {link:?}");
            assert!(r.explored.complete, "{what}: incomplete");
            assert!(r.counterexample.is_none(), "{what}: {:?}", r.counterexample);
            assert_eq!(r.explored.states, one.explored.states, "{what}: states differ from one thread's");
            assert_eq!(traffic.states.len(), nodes, "{what}");
            assert_eq!(traffic.states.iter().sum::<u64>(), r.explored.states, "{what}");
            if nodes == 1 {
                assert_eq!(traffic.claims, 0, "{what}: one node claims nothing");
            } else {
                // Every node owns some of the states, and the others reached them too.
                assert!(traffic.states.iter().all(|&n| n > 0), "{what}: {traffic:?}");
                assert!(traffic.claims > 0 && traffic.admitted > 0 && traffic.bytes > 0, "{what}: {traffic:?}");
                assert!(traffic.admitted <= traffic.claims, "{what}: {traffic:?}");
                // A worker claims a state once per mask its owner would answer.
                assert!(traffic.known > 0, "{what}: no visit pruned by what owners said: {traffic:?}");
            }
        }
    }
}

#[test]
fn a_violation_is_reported_from_a_workers_path_and_replays() {
    // The catalogued finding (window 1) of FreeBSD's arm64 ASID reset.
    let s = common::small_spec("arm64-freebsd-asid", 1, 6);
    let one = check(&s).unwrap().counterexample.expect("the finding is found");
    for (nodes, jobs) in [(2, 2), (3, 3)] {
        let link = Link { latency: Duration::from_micros(100), batch: 8 };
        let (r, _) = check_exhaustive_sharded(&s, nodes, jobs, link).unwrap();
        let c = r.counterexample.unwrap_or_else(|| panic!("{nodes} nodes: the finding is not found"));
        assert_eq!(c.property, one.property, "{nodes} nodes");
        let again = tlbkit_check::run::replay(&c.token).unwrap();
        let replayed = again.counterexample.unwrap_or_else(|| panic!("{nodes} nodes: {} replays clean", c.token));
        assert_eq!(replayed.property, c.property, "{nodes} nodes");
    }
}
