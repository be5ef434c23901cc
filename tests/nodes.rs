//! A sharded check's nodes as processes of their own (`tlbkit bench sharded
//! --processes`, `tlbkit_check::run::piped`; their states are `cli.rs`'s): a
//! node that dies, at its start or mid-search, is an error that names it,
//! and the other nodes' processes end with the driver, never a hang; a
//! node that ends says the most memory its process held.

use std::process::Command;
use std::time::{Duration, Instant};
use tlbkit_check::run::piped::run_processes;
use tlbkit_check::run::shards::{spec_of, spec_token};

/// The command of node `me` of `nodes` of the check `token`, one worker.
fn node(token: &str, me: usize, nodes: usize) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tlbkit"));
    c.args(["shard-node", "--token", token, "--me", &me.to_string(), "--nodes", &nodes.to_string(), "--jobs", "1"]);
    c
}

/// A check of `policy` on 2 CPUs, 3 address spaces of one page and 6
/// operations (its other bounds the default): minutes of search in a debug
/// build.
fn long_check(policy: &str) -> String {
    let spec = tlbkit_check::spec::default_spec(policy);
    let spec = tlbkit_check::CheckSpec { cpus: 2, mms: 3, pages: 1, ops: 6, ..spec };
    spec_token(&spec)
}

#[test]
fn a_node_that_dies_is_named_and_the_others_end_with_the_driver() {
    let token = long_check("arm64-linux");
    let spec = spec_of(&token).unwrap();
    // Node 1 exits before it says where it listens.
    let t = Instant::now();
    let e = run_processes(&spec, 2, Duration::from_millis(10), |me| {
        if me == 1 {
            let mut c = Command::new("sh");
            c.args(["-c", "exit 7"]);
            c
        } else {
            node(&token, me, 2)
        }
    })
    .unwrap_err();
    assert!(e.to_string().contains("node 1 ended before the search did"), "{e}");
    // Node 1 killed a second into a search of minutes (a debug build's).
    let e = run_processes(&spec, 2, Duration::from_millis(10), |me| {
        let mut c = node(&token, me, 2);
        if me == 1 {
            let mut k = Command::new("timeout");
            k.args(["-s", "KILL", "1"]).arg(c.get_program()).args(c.get_args());
            c = k;
        }
        c
    })
    .unwrap_err();
    assert!(e.to_string().contains("node 1 ended before the search did"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(60), "the driver waited {:?}", t.elapsed());
}

#[test]
fn nodes_that_end_say_the_most_memory_their_processes_held() {
    let spec = tlbkit_check::spec::default_spec("x86-linux-pcid");
    let spec = tlbkit_check::CheckSpec { cpus: 2, mms: 1, pages: 1, ops: 2, ..spec };
    let token = spec_token(&spec);
    let spec = spec_of(&token).unwrap();
    // The driver holds more memory than a node of this small search does: a
    // node's peak is its own, not the one a process it starts inherits.
    let held = vec![1u8; DRIVER_HOLDS];
    let c = run_processes(&spec, 2, Duration::from_millis(10), |me| node(&token, me, 2)).unwrap();
    std::hint::black_box(&held);
    assert!(c.report.explored.complete && c.report.counterexample.is_none(), "{:?}", c.report);
    assert_eq!(c.peaks.len(), 2);
    if cfg!(target_os = "linux") {
        // A process of this binary holds at least a megabyte (its table's
        // parts alone are 8 MiB of slots, faulted in).
        let own = |p: &Option<u64>| p.is_some_and(|b| b > 1 << 20 && b < DRIVER_HOLDS as u64);
        assert!(c.peaks.iter().all(own), "{:?}", c.peaks);
    }
}

/// Bytes the driver of the test above holds while its nodes run.
const DRIVER_HOLDS: usize = 384 << 20;
