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
use tlbkit_check::search::{Link, Orders, SEND_EVERY};

use crate::common;

#[test]
fn every_node_count_reaches_the_same_states_and_verdict_as_one_thread() {
    for (policy, ops) in [("arm64-noasid", 4), ("x86-freebsd-counter", 3), ("x86-linux-pcid", 2)] {
        let s = common::small_spec(policy, 1, ops);
        let one = check(&s).unwrap();
        assert!(one.explored.complete && one.counterexample.is_none(), "{policy}: {one:?}");
        let configurations =
            [(1, 1, 0, 64, 1), (2, 2, 0, 64, 1), (2, 2, 0, 64, SEND_EVERY), (3, 3, 200, 16, 1), (2, 3, 50, 1, 4)];
        for (nodes, jobs, latency_us, batch, every) in configurations {
            let link = Link { latency: Duration::from_micros(latency_us), batch, every };
            let (r, traffic) = check_exhaustive_sharded(&s, nodes, jobs, link).unwrap();
            let what = format!("{policy} with {nodes} node(s) of {jobs} worker(s) in all, {link:?}");
            assert!(r.explored.complete, "{what}: incomplete");
            assert!(r.counterexample.is_none(), "{what}: {:?}", r.counterexample);
            assert_eq!(r.explored.states, one.explored.states, "{what}: states differ from one thread's");
            // Claims sent every few executions wait for them as for a latency.
            let most = if latency_us == 0 && every == 1 { 1.15 } else { 1.5 };
            within_one_threads_executions(&r, &one, &what, most);
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

/// Asserts that `r` ran at most `most` times one thread's executions
/// (`one`). A worker goes on past a state another node owns while its claim
/// waits for the answer, which may say the options explored meanwhile were
/// explored elsewhere: the later the answers, the more it explores
/// (measured at these bounds: 1.00 to 1.06 times with answers at once,
/// claims sent after each execution or every 16, up to 1.14 every 16 with
/// another test's threads on the cores; up to 1.35 with answers up to
/// 200 µs late, 2.2 two carrier rounds late).
fn within_one_threads_executions(r: &CheckReport, one: &CheckReport, what: &str, most: f64) {
    let (n, base) = (r.explored.executions, one.explored.executions);
    assert!(n as f64 <= base as f64 * most, "{what}: {n} executions against one thread's {base}");
}

#[test]
fn late_answers_explore_more_and_reach_the_same_states() {
    let s = common::small_spec("arm64-noasid", 1, 4);
    let one = check(&s).unwrap();
    let mut executions = Vec::new();
    for latency in [Duration::ZERO, Duration::from_millis(5)] {
        let (r, traffic) = check_exhaustive_sharded(&s, 2, 2, Link { latency, batch: 16, every: 1 }).unwrap();
        let what = format!("answers {latency:?} late");
        assert!(r.explored.complete && r.counterexample.is_none(), "{what}: {r:?}");
        assert_eq!(r.explored.states, one.explored.states, "{what}: states differ from one thread's");
        assert!(traffic.most_waiting > 0, "{what}: {traffic:?}");
        executions.push(r.explored.executions);
    }
    // Measured: 1.02 times one thread's with answers at once (claims sent
    // after each execution), 1.12 to 1.15 5 ms late.
    let at_once = check_exhaustive_sharded(&s, 2, 2, Link { every: 1, ..Link::default() }).unwrap().0;
    within_one_threads_executions(&at_once, &one, "answers at once", 1.1);
    assert!(executions[1] > executions[0], "answers 5 ms late explore more: {executions:?}");
}

#[test]
fn a_violation_is_reported_from_a_workers_path_and_replays() {
    // The catalogued finding (window 1) of FreeBSD's arm64 ASID reset.
    let s = common::small_spec("arm64-freebsd-asid", 1, 6);
    let one = check(&s).unwrap().counterexample.expect("the finding is found");
    for (nodes, jobs) in [(2, 2), (3, 3)] {
        let link = Link { latency: Duration::from_micros(100), batch: 8, every: 1 };
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
    let shards: Vec<Shard> = (0..nodes).map(|me| Shard::start(s.clone(), me, nodes, jobs, false).unwrap()).collect();
    carry(s, &shards, delay, None).expect("no snapshot asked for")
}

/// [`carried`]'s rounds over `shards`; with `snapshot_at`, from that round
/// on the nodes are held until a round finds every one settled and
/// carries nothing: then their parts are taken, the shards stopped, and the
/// parts returned (as `Err`).
fn carry(
    s: &tlbkit_check::spec::CheckSpec,
    shards: &[Shard],
    delay: usize,
    snapshot_at: Option<usize>,
) -> Result<CheckReport, Vec<Vec<u8>>> {
    carry_with(s, shards, delay, snapshot_at, &mut |shards| {
        Some(shards.iter().map(|sh| sh.save(false).unwrap()).collect())
    })
}

/// What [`carry_with`] calls when the held nodes are settled.
type Settled<'a> = dyn FnMut(&[Shard]) -> Option<Vec<Vec<u8>>> + 'a;

/// [`carry`], where each time the held nodes are settled `settled` is
/// called: its parts end the search there (as `Err`); `None` lets the
/// nodes go on, held again a round later.
fn carry_with(
    s: &tlbkit_check::spec::CheckSpec,
    shards: &[Shard],
    delay: usize,
    mut snapshot_at: Option<usize>,
    settled: &mut Settled<'_>,
) -> Result<CheckReport, Vec<Vec<u8>>> {
    let nodes = shards.len();
    let mut inbox: Vec<Vec<Vec<u8>>> = vec![Vec::new(); nodes];
    let mut later: std::collections::VecDeque<Vec<(usize, Vec<u8>)>> = std::collections::VecDeque::new();
    let mut orders = vec![Orders::default(); nodes];
    for round in 0.. {
        let hold = snapshot_at.is_some_and(|r| round >= r);
        let carried_in = inbox.iter().any(|m| !m.is_empty()) || later.iter().any(|o| !o.is_empty());
        let pumped: Vec<_> = shards
            .iter()
            .zip(std::mem::replace(&mut inbox, vec![Vec::new(); nodes]))
            .zip(&orders)
            .map(|((shard, msgs), &o)| {
                let refs: Vec<&[u8]> = msgs.iter().map(Vec::as_slice).collect();
                shard.pump(&refs, Orders { hold, ..o }).unwrap()
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
        if hold && !carried_in && !sent && pumped.iter().all(|p| p.settled) {
            if let Some(parts) = settled(shards) {
                shards.iter().for_each(Shard::stop);
                shards.iter().for_each(|sh| drop(sh.join().unwrap()));
                return Err(parts);
            }
            snapshot_at = Some(round + 2);
        }
        // A node whose workers wait and whose queue is empty gets half of
        // the fullest queue (not while held).
        let hungry = (0..nodes).find(|&i| pumped[i].hungry > 0 && pumped[i].queued == 0);
        let donor = (0..nodes).max_by_key(|&i| pumped[i].queued).filter(|&i| pumped[i].queued > 0);
        orders = vec![Orders { wanted: hungry.is_some() && !hold, ..Orders::default() }; nodes];
        if let (Some(h), Some(d), false) = (hungry, donor, hold) {
            orders[d] = Orders { give: pumped[d].queued, to: h, ..orders[d] };
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let totals: Vec<Totals> = shards.iter().map(|s| s.join().unwrap()).collect();
    // Through the bytes the binary reads.
    Ok(shards::report_from_save(s, &Totals::save(&totals)).unwrap())
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
            within_one_threads_executions(&r, &one, &what, if delay == 0 { 1.5 } else { 3.0 });
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

#[test]
fn a_snapshot_resumes_on_another_number_of_nodes_with_one_threads_states_and_verdict() {
    // Held from the second round: a snapshot mid-search (the search takes
    // hundreds of rounds), then resumed on fewer and on more nodes, and
    // a snapshot of the resumed search resumed again.
    let s = common::small_spec("x86-freebsd-counter", 1, 4);
    let one = check(&s).unwrap();
    assert!(one.explored.complete && one.counterexample.is_none(), "{one:?}");
    let start: Vec<Shard> = (0..2).map(|me| Shard::start(s.clone(), me, 2, 2, false).unwrap()).collect();
    let parts = carry(&s, &start, 1, Some(2)).expect_err("the search ended before its snapshot");
    let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
    for nodes in [1, 3] {
        let resumed: Vec<Shard> =
            (0..nodes).map(|me| Shard::resume(s.clone(), me, nodes, 2, &refs, false).unwrap()).collect();
        let r = carry(&s, &resumed, 0, None).unwrap();
        assert!(r.explored.complete && r.counterexample.is_none(), "2 nodes resumed on {nodes}: {r:?}");
        assert_eq!(r.explored.states, one.explored.states, "2 nodes resumed on {nodes}");
    }
    let again: Vec<Shard> = (0..3).map(|me| Shard::resume(s.clone(), me, 3, 1, &refs, false).unwrap()).collect();
    let second = carry(&s, &again, 0, Some(3)).expect_err("the resumed search ended before its snapshot");
    let refs2: Vec<&[u8]> = second.iter().map(Vec::as_slice).collect();
    let last: Vec<Shard> = (0..2).map(|me| Shard::resume(s.clone(), me, 2, 1, &refs2, false).unwrap()).collect();
    let r = carry(&s, &last, 0, None).unwrap();
    assert_eq!((r.explored.states, r.explored.complete), (one.explored.states, true), "resumed twice");
    // The catalogued finding is still found after a snapshot.
    let bug = common::small_spec("arm64-freebsd-asid", 1, 6);
    let first: Vec<Shard> = (0..2).map(|me| Shard::start(bug.clone(), me, 2, 1, false).unwrap()).collect();
    if let Err(parts) = carry(&bug, &first, 0, Some(1)) {
        let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        let resumed: Vec<Shard> =
            (0..3).map(|me| Shard::resume(bug.clone(), me, 3, 1, &refs, false).unwrap()).collect();
        let r = carry(&bug, &resumed, 0, None).unwrap();
        assert!(r.counterexample.is_some(), "the finding is lost by a snapshot: {r:?}");
    }
}

#[test]
fn snapshots_after_the_first_are_deltas_that_resume_as_whole_ones() {
    // Snapshots on disk as the Ray driver takes them: the first whole, the
    // next four deltas, none larger than the whole part the node would have
    // written at that moment (here the frontier is most of a part) and
    // together smaller. The last, read back through its
    // base and deltas, resumes on one node and on three with one thread's
    // states; a snapshot file naming a generation whose delta is missing is
    // refused in a line.
    let s = common::small_spec("x86-freebsd-counter", 1, 4);
    let one = check(&s).unwrap();
    let dir = std::env::temp_dir().join(format!("tlbkit-shard-deltas-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let start: Vec<Shard> = (0..2).map(|me| Shard::start(s.clone(), me, 2, 2, true).unwrap()).collect();
    let (mut generation, token) = (0u64, tlbkit_check::run::shards::spec_token(&s));
    let mut sizes = (0, 0);
    let mut take = |shards: &[Shard]| {
        generation += 1;
        for (i, sh) in shards.iter().enumerate() {
            if generation == 1 {
                shards::write_part(&dir, generation, i, &sh.save(false).unwrap()).unwrap();
            } else {
                let delta = sh.save(true).unwrap();
                let whole = sh.save(false).unwrap();
                assert!(delta.len() <= whole.len(), "generation {generation}: a delta of {} bytes", delta.len());
                sizes.0 += delta.len();
                sizes.1 += whole.len();
                shards::append_delta(&dir, 1, generation, i, &delta).unwrap();
            }
        }
        shards::write_snapshot(&dir, &token, generation, 1, 2).unwrap();
        (generation == 5).then(Vec::new)
    };
    carry_with(&s, &start, 0, Some(2), &mut take).expect_err("the search ended before its fifth snapshot");
    assert!(sizes.0 < sizes.1, "deltas of {} bytes against {} whole", sizes.0, sizes.1);
    let snap = shards::read_snapshot(&dir).unwrap();
    assert_eq!((snap.generation, snap.base, snap.parts), (5, 1, 2));
    let parts: Vec<Vec<u8>> = (0..2).map(|i| shards::read_part(&dir, 5, i).unwrap()).collect();
    let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
    for nodes in [1, 3] {
        let resumed: Vec<Shard> =
            (0..nodes).map(|me| Shard::resume(s.clone(), me, nodes, 1, &refs, true).unwrap()).collect();
        let r = carry(&s, &resumed, 0, None).unwrap();
        assert_eq!((r.explored.states, r.explored.complete), (one.explored.states, true), "resumed on {nodes}");
        assert!(r.counterexample.is_none(), "resumed on {nodes}: {r:?}");
    }
    shards::write_snapshot(&dir, &token, 6, 1, 2).unwrap();
    let e = shards::read_part(&dir, 6, 0).expect_err("a missing delta is refused");
    assert!(e.to_string().contains("generation 6 is missing"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_snapshots_part_of_another_check_or_damaged_is_refused() {
    let s = common::small_spec("x86-freebsd-counter", 1, 4);
    let start: Vec<Shard> = (0..2).map(|me| Shard::start(s.clone(), me, 2, 1, false).unwrap()).collect();
    let parts = carry(&s, &start, 0, Some(1)).expect_err("the search ended before its snapshot");
    let other = common::small_spec("x86-freebsd-counter", 1, 3);
    let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
    let e = Shard::resume(other, 0, 1, 1, &refs, false).err().expect("a part of another check is refused");
    assert!(e.to_string().contains("another check"), "{e}");
    let mut damaged = parts[1].clone();
    let at = damaged.len() - 3;
    damaged[at] ^= 0x40;
    let e = Shard::resume(s.clone(), 0, 1, 1, &[&parts[0], &damaged], false).err().expect("a damaged part is refused");
    assert!(e.to_string().contains("node 1's part"), "{e}");
}

/// A node asked for work (the carrier's `wanted`, held for a whole search
/// here) gives its worker's shallowest open options to its queue only while
/// the queue is empty, as the parallel search's workers do: the queue holds
/// one choice's options at most (measured: 3 at most here; 37 to 39 when
/// the worker split at every execution), and it reaches one thread's states.
#[test]
fn a_node_asked_for_work_queues_one_choices_options_at_a_time() {
    let s = common::small_spec("arm64-noasid", 1, 5);
    let one = check(&s).unwrap();
    let shard = Shard::start(s.clone(), 0, 1, 1, false).unwrap();
    let wanted = Orders { wanted: true, ..Orders::default() };
    let mut most = 0;
    loop {
        let p = shard.pump(&[], wanted).unwrap();
        most = most.max(p.queued);
        if p.open == 0 {
            shard.finish();
            break;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    let t = shard.join().unwrap();
    assert!(most <= 16, "{most} subtrees queued at once");
    assert_eq!(t.stats.states, one.explored.states);
    assert!(t.stats.complete);
}
