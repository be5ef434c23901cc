//! Nodes of a sharded check whose messages go straight to each other over
//! TCP (`run::courier`), driven by the rule the Ray driver follows
//! (`courier::Watch`): one thread's states and verdicts; a malformed
//! message refused in the node's status, never a panic.

use std::io::Write;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;
use tlbkit_check::check;
use tlbkit_check::report::CheckReport;
use tlbkit_check::run::courier::Courier;
use tlbkit_check::run::nodes;
use tlbkit_check::run::shards::Shard;

use crate::common;

/// Runs `spec` on `nodes` shards of `jobs` workers joined by couriers on
/// the loopback, driven as the Ray driver drives them; returns the report
/// and the bytes the nodes wrote to each other.
fn over_tcp(spec: &tlbkit_check::spec::CheckSpec, nodes: usize, jobs: usize) -> (CheckReport, u64) {
    nodes::run_local(spec, nodes, jobs, Duration::from_millis(2)).unwrap()
}

#[test]
fn nodes_joined_over_tcp_reach_one_threads_states_and_verdicts() {
    for (policy, ops) in [("arm64-noasid", 4), ("x86-freebsd-counter", 3)] {
        let s = common::small_spec(policy, 1, ops);
        let one = check(&s).unwrap();
        for (nodes, jobs) in [(2, 1), (3, 2)] {
            let (r, bytes) = over_tcp(&s, nodes, jobs);
            let what = format!("{policy}: {nodes} node(s) of {jobs} worker(s) over TCP");
            assert!(bytes > 0, "{what}: the nodes wrote nothing to each other");
            assert!(r.explored.complete && r.counterexample.is_none(), "{what}: {r:?}");
            assert_eq!(r.explored.states, one.explored.states, "{what}: states differ from one thread's");
            assert_eq!(r.explored.workers, nodes * jobs, "{what}");
        }
    }
    let s = common::small_spec("arm64-freebsd-asid", 1, 6);
    let one = check(&s).unwrap().counterexample.expect("the finding is found");
    // (Found early, maybe before any claim went out: no bytes to assert.)
    let c = over_tcp(&s, 2, 1).0.counterexample.expect("two nodes over TCP find the finding");
    assert_eq!(c.property, one.property);
}

#[test]
fn a_malformed_message_is_refused_in_the_nodes_status() {
    // Node 1 is the test: it takes node 0's connection and sends it a
    // message of an unknown kind.
    let s = common::small_spec("arm64-noasid", 1, 4);
    let shard = Arc::new(Shard::start(s, 0, 2, 1, false).unwrap());
    let (courier, address) = Courier::listen("127.0.0.1").unwrap();
    let fake = TcpListener::bind("127.0.0.1:0").unwrap();
    let peers = [address.clone(), fake.local_addr().unwrap().to_string()];
    let mut to_node = std::net::TcpStream::connect(&address).unwrap();
    to_node.write_all(&3u32.to_le_bytes()).unwrap();
    to_node.write_all(&[0xee, 0, 0]).unwrap();
    courier.start(shard.clone(), 0, &peers, Duration::from_micros(200)).unwrap();
    let _from_node = fake.accept().unwrap();
    let why = loop {
        match courier.status() {
            Err(e) => break e.to_string(),
            Ok(_) => std::thread::sleep(Duration::from_millis(1)),
        }
    };
    assert!(why.starts_with("a node's message: "), "{why}");
    courier.close();
    shard.stop();
    shard.join().unwrap();
}
