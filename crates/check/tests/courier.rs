//! Nodes of a sharded check whose messages go straight to each other over
//! TCP (`run::courier`), the test polling each node's counts as the Ray
//! driver does: one thread's states and verdicts; a malformed message
//! refused in the node's status, never a panic.

use std::io::Write;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;
use tlbkit_check::check;
use tlbkit_check::report::CheckReport;
use tlbkit_check::run::courier::{Courier, Status};
use tlbkit_check::run::shards::{self, Shard, Totals};
use tlbkit_check::search::Orders;

use crate::common;

/// Runs `spec` on `nodes` shards of `jobs` workers joined by couriers on
/// the loopback, polling them as the Ray driver does; returns the report.
fn over_tcp(spec: &tlbkit_check::spec::CheckSpec, nodes: usize, jobs: usize) -> CheckReport {
    let shards: Vec<Arc<Shard>> =
        (0..nodes).map(|me| Arc::new(Shard::start(spec.clone(), me, nodes, jobs, false).unwrap())).collect();
    let (couriers, peers): (Vec<Courier>, Vec<String>) =
        (0..nodes).map(|_| Courier::listen("127.0.0.1").unwrap()).unzip();
    // Each start waits for the others' connections: all at once.
    std::thread::scope(|scope| {
        for (me, (c, sh)) in couriers.iter().zip(&shards).enumerate() {
            let peers = &peers;
            scope.spawn(move || c.start(sh.clone(), me, peers, Duration::from_micros(500)).unwrap());
        }
    });
    let mut before: Option<Vec<Status>> = None;
    loop {
        let now: Option<Vec<Status>> = couriers.iter().map(|c| c.status().unwrap()).collect();
        let Some(now) = now else {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        };
        if now.iter().any(|s| s.pumped.stopped) {
            couriers.iter().for_each(Courier::close);
            shards.iter().for_each(|s| s.stop());
            break;
        }
        let counts = |v: &[Status]| v.iter().map(|s| (s.sent, s.received)).collect::<Vec<_>>();
        let balanced = now.iter().map(|s| s.sent).sum::<u64>() == now.iter().map(|s| s.received).sum::<u64>();
        if let Some(b) = &before {
            let idle = now.iter().chain(b).all(|s| s.pumped.open == 0);
            if idle && balanced && counts(b) == counts(&now) {
                couriers.iter().for_each(Courier::close);
                shards.iter().for_each(|s| s.finish());
                break;
            }
        }
        let hungry = (0..nodes).find(|&i| now[i].pumped.hungry > 0 && now[i].pumped.queued == 0);
        let donor = (0..nodes).max_by_key(|&i| now[i].pumped.queued).filter(|&i| now[i].pumped.queued > 0);
        for c in &couriers {
            c.order(Orders { wanted: hungry.is_some(), ..Orders::default() });
        }
        if let (Some(h), Some(d)) = (hungry, donor) {
            couriers[d].order(Orders { give: now[d].pumped.queued, to: h, wanted: true, hold: false });
        }
        before = Some(now);
        std::thread::sleep(Duration::from_millis(2));
    }
    let totals: Vec<Totals> = shards.iter().map(|s| s.join().unwrap()).collect();
    shards::report_from_save(spec, &Totals::save(&totals)).unwrap()
}

#[test]
fn nodes_joined_over_tcp_reach_one_threads_states_and_verdicts() {
    for (policy, ops) in [("arm64-noasid", 4), ("x86-freebsd-counter", 3)] {
        let s = common::small_spec(policy, 1, ops);
        let one = check(&s).unwrap();
        for (nodes, jobs) in [(2, 1), (3, 2)] {
            let r = over_tcp(&s, nodes, jobs);
            let what = format!("{policy}: {nodes} node(s) of {jobs} worker(s) over TCP");
            assert!(r.explored.complete && r.counterexample.is_none(), "{what}: {r:?}");
            assert_eq!(r.explored.states, one.explored.states, "{what}: states differ from one thread's");
            assert_eq!(r.explored.workers, nodes * jobs, "{what}");
        }
    }
    let s = common::small_spec("arm64-freebsd-asid", 1, 6);
    let one = check(&s).unwrap().counterexample.expect("the finding is found");
    let c = over_tcp(&s, 2, 1).counterexample.expect("two nodes over TCP find the finding");
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
