//! What `redis_like` makes the simulated kernel do: a fork at each save point
//! the cron meets, a child that `madvise`s away every value and client buffer
//! it saved, copy-on-write faults in the server only while a child lives, and
//! jemalloc purging only when frees outrun reuse.
//!
//! The runs: 32 keys of 2 pages, 4 clients, requests of 100 µs, the cron at
//! 100 Hz. A request's server time is 100 µs and the copies of its value (a few
//! hundred ns), so 1000 requests are about 100.3 ms of it, and the cron ticks at
//! the first request past each 10 ms. A child saves 32 values in about a
//! millisecond, so the tick after a fork always finds it done.

use crate::common::{run_clean, spec};
use std::collections::BTreeMap;
use tlbkit_policy::asid::LinuxArm64;
use tlbkit_sim::preset;
use tlbkit_sim::sim::{Sim, SimConfig};
use tlbkit_sim::workload::{self, Params, Phase};

/// The runs' parameters, before each test's own.
const BASE: &[(&str, f64)] = &[
    ("keys", 32.0),
    ("value_pages", 2.0),
    ("clients", 4.0),
    ("requests", 1000.0),
    ("request_us", 100.0),
    ("hz", 100.0),
    ("save_ms", 25.0),
    ("save_changes", 1.0),
];

/// Runs the server on 4 CPUs of an Altra under arm64 Linux, strict, with the
/// workload's defaults, then [`BASE`], then `sets`; checks it finished cleanly.
fn server(sets: &[(&str, f64)]) -> Sim {
    let def = workload::by_name("redis_like").unwrap();
    let mut p: Params = def.params.iter().map(|d| (d.key.to_string(), d.default)).collect();
    p.extend(BASE.iter().chain(sets).map(|&(k, v)| (k.to_string(), v)));
    let cpus = 4;
    let mms = workload::max_mms("redis_like", &p, cpus) + cpus;
    let cfg = SimConfig {
        max_mms: mms,
        strict: true,
        max_events: 50_000_000,
        ..SimConfig::quiet(preset::named("altra"), cpus, 1)
    };
    let mut sim = Sim::new(cfg, LinuxArm64::new(cpus, mms, 16, false).unwrap());
    workload::setup("redis_like", &p, &mut sim, Phase::Main).unwrap();
    sim.run();
    assert!(sim.error.is_none(), "{:?}", sim.error);
    assert_eq!(sim.live_threads(), 0, "every thread of the server and its children exited");
    assert!(sim.oracle.violations.is_empty(), "{:?}", sim.oracle.violations.first());
    sim
}

/// Returns the times of every mark called `name`.
fn marks(sim: &Sim, name: &str) -> Vec<u64> {
    sim.marks.iter().filter(|m| m.0 == name).map(|m| m.1).collect()
}

/// Returns the server's address-space uid: of those that exited (the server
/// and its children), the first created.
fn server_uid(sim: &Sim) -> Option<u32> {
    sim.oracle.obligations.iter().filter(|o| o.change == "exit").map(|o| o.mm_uid).min()
}

/// Returns how many obligations each change opened in the server's address
/// space (`true`) and in others (`false`).
fn changes(sim: &Sim) -> BTreeMap<(bool, &'static str), usize> {
    let server = server_uid(sim);
    let mut n = BTreeMap::new();
    for o in &sim.oracle.obligations {
        *n.entry((Some(o.mm_uid) == server, o.change)).or_default() += 1;
    }
    n
}

#[test]
fn the_server_forks_at_each_cron_tick_that_meets_the_save_point() {
    // 25 ms: the first tick more than 25 ms after the last save (0 at boot) is
    // at 30 ms; the child is reaped at the 40 ms tick, which is the save's
    // time; the next fork is at 70, reaped at 80; 110 is past the run.
    // 5 ms: forks at 10, 30, 50, 70 and 90 ms, each reaped a tick later.
    for (save_ms, forks) in [(25.0, 2), (5.0, 5), (0.0, 0)] {
        let sim = server(&[("save_ms", save_ms)]);
        assert_eq!(marks(&sim, "fork_start").len(), forks, "save_ms={save_ms}");
        assert_eq!(marks(&sim, "child_exit").len(), forks, "save_ms={save_ms}");
    }
    // Without writes the save point's one change is never reached.
    let sim = server(&[("save_ms", 5.0), ("write_pct", 0.0)]);
    assert_eq!(marks(&sim, "fork_start").len(), 0);
}

#[test]
fn the_child_madvises_each_value_and_each_client_reply_buffer_once() {
    // Every key exists (no DELs) and every client was served before the first
    // fork, so each madvise of the child zaps pages it shares: one flush each.
    let sim = server(&[]);
    let n = changes(&sim);
    let forks = marks(&sim, "fork_start").len();
    assert_eq!(forks, 2);
    assert_eq!(n.get(&(false, "madvise")), Some(&(forks * (32 + 4))));
    // The server itself madvises nothing: each SET reuses the value the last
    // one freed, from jemalloc's thread cache, and nothing becomes dirty.
    assert_eq!(n.get(&(true, "madvise")), None);
}

#[test]
fn copy_on_write_faults_hit_the_server_only_while_a_child_lives() {
    let sim = server(&[]);
    let uid = server_uid(&sim).unwrap();
    let (starts, exits) = (marks(&sim, "fork_start"), marks(&sim, "child_exit"));
    assert_eq!(starts.len(), exits.len());
    // A fault that began before the child's exit may finish after it: 100 µs.
    let slack = (100e3 * preset::named("altra").freq_ghz) as u64;
    let cows: Vec<u64> =
        sim.oracle.obligations.iter().filter(|o| o.mm_uid == uid && o.change == "cow").map(|o| o.opened).collect();
    assert!(!cows.is_empty(), "the server writes pages it shares with its children");
    for t in &cows {
        assert!(
            starts.iter().zip(&exits).any(|(&s, &e)| s <= *t && *t <= e + slack),
            "a copy-on-write fault at cycle {t}, outside every child's life {starts:?} .. {exits:?}"
        );
    }
    // Without saves, no copy-on-write fault anywhere.
    let sim = server(&[("save_ms", 0.0)]);
    assert_eq!(changes(&sim).keys().filter(|(_, c)| *c == "cow").count(), 0);
}

#[test]
fn dels_that_outrun_reuse_are_purged_by_jemallocs_thread_on_the_server() {
    // 90% of the writes DELs: the freed values overflow the thread cache (20)
    // into dirty extents, which wake the background thread; it sleeps its
    // shortest interval (100 ms) twice, the second time with the decay (20 ms)
    // past, and purges them: madvises of the server's arena. 3000 requests are
    // about 300 ms of server time; no saves, so no child madvises anything.
    let sets = [("requests", 3000.0), ("del_pct", 90.0), ("decay_ms", 20.0), ("save_ms", 0.0)];
    let n = changes(&server(&sets));
    assert!(n.get(&(true, "madvise")).is_some_and(|&k| k > 0), "{n:?}");
    assert_eq!(n.get(&(false, "madvise")), None);
}

#[test]
fn a_run_reports_its_saves_and_their_fork_time() {
    let out = run_clean(&spec("altra", 4, "arm64-linux", "redis_like", BASE.iter().map(|(k, v)| format!("{k}={v}"))));
    assert_eq!(out.result["saves"], 2.0);
    assert!(out.result["fork_us"] > 0.0);
    // 1000 requests of at least 100 µs each.
    assert!(out.result["requests_per_s"] < 10_000.0, "{}", out.result["requests_per_s"]);
}
