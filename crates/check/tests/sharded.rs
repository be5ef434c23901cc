//! The sharded exhaustive search (`check_exhaustive_sharded`) against the
//! one-thread search: each state admitted by its owner's table alone, so on
//! small bounds where both complete, the same verdict and the same states
//! for any number of nodes and workers, any latency; a violation is found
//! and its counterexample is a worker's own path. The same of nodes that
//! run as processes of their own would (`run::shards`), their messages
//! carried between them as bytes.

use std::time::Duration;
use tlbkit_check::check;
use tlbkit_check::report::CheckReport;
use tlbkit_check::run::check_exhaustive_sharded;
use tlbkit_check::run::shards::{self, Shard, Totals};
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

/// Carries the messages of `nodes` [`Shard`]s of `jobs` workers each, as
/// the Ray driver does (rounds of pumps, the end when every node's work is
/// done and nothing moved), optionally dropping each round's messages into
/// a later round (`delay`); returns the report.
fn carried(s: &tlbkit_check::spec::CheckSpec, nodes: usize, jobs: usize, delay: usize) -> CheckReport {
    let shards: Vec<Shard> = (0..nodes).map(|me| Shard::start(s.clone(), me, nodes, jobs).unwrap()).collect();
    let mut inbox: Vec<Vec<Vec<u8>>> = vec![Vec::new(); nodes];
    let mut later: std::collections::VecDeque<Vec<(usize, Vec<u8>)>> = std::collections::VecDeque::new();
    let (mut give, mut wanted) = (vec![(0, 0); nodes], false);
    loop {
        let carried_in = inbox.iter().any(|m| !m.is_empty()) || later.iter().any(|o| !o.is_empty());
        let pumped: Vec<_> = shards
            .iter()
            .zip(std::mem::replace(&mut inbox, vec![Vec::new(); nodes]))
            .zip(&give)
            .map(|((shard, msgs), &(n, to))| {
                let refs: Vec<&[u8]> = msgs.iter().map(Vec::as_slice).collect();
                shard.pump(&refs, n, to, wanted).unwrap()
            })
            .collect();
        let out: Vec<(usize, Vec<u8>)> = pumped.iter().flat_map(|p| p.out.iter().cloned()).collect();
        let sent = !out.is_empty();
        later.push_back(out);
        if later.len() > delay {
            for (to, m) in later.pop_front().unwrap() {
                inbox[to].push(m);
            }
        }
        if pumped.iter().any(|p| p.stopped) {
            shards.iter().for_each(Shard::stop);
            break;
        }
        if !carried_in && !sent && pumped.iter().all(|p| p.open == 0) {
            shards.iter().for_each(Shard::finish);
            break;
        }
        // A node whose workers wait and whose queue is empty gets half of
        // the fullest queue.
        let hungry = (0..nodes).find(|&i| pumped[i].hungry > 0 && pumped[i].queued == 0);
        let donor = (0..nodes).max_by_key(|&i| pumped[i].queued).filter(|&i| pumped[i].queued > 0);
        give = vec![(0, 0); nodes];
        wanted = hungry.is_some();
        if let (Some(h), Some(d)) = (hungry, donor) {
            give[d] = (pumped[d].queued, h);
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let totals: Vec<Totals> = shards.iter().map(|s| s.join().unwrap()).collect();
    // Through the bytes the binary reads.
    shards::report_from_save(s, &Totals::save(&totals)).unwrap()
}

#[test]
fn nodes_in_processes_of_their_own_reach_one_threads_states_and_verdicts() {
    for (policy, ops) in [("arm64-noasid", 4), ("x86-freebsd-counter", 3)] {
        let s = common::small_spec(policy, 1, ops);
        let one = check(&s).unwrap();
        for (nodes, jobs, delay) in [(1, 2, 0), (2, 1, 0), (3, 2, 2)] {
            let r = carried(&s, nodes, jobs, delay);
            let what = format!("{policy}: {nodes} node(s) of {jobs} worker(s), messages {delay} round(s) late");
            assert!(r.explored.complete, "{what}: incomplete");
            assert!(r.counterexample.is_none(), "{what}");
            assert_eq!(r.explored.states, one.explored.states, "{what}: states differ from one thread's");
            assert_eq!(r.explored.workers, nodes * jobs, "{what}");
        }
    }
    let s = common::small_spec("arm64-freebsd-asid", 1, 6);
    let one = check(&s).unwrap().counterexample.expect("the finding is found");
    let r = carried(&s, 2, 1, 1);
    let c = r.counterexample.expect("two nodes find the finding");
    assert_eq!(c.property, one.property);
    let replayed = tlbkit_check::run::replay(&c.token).unwrap().counterexample.expect("its token replays it");
    assert_eq!(replayed.property, c.property);
}
