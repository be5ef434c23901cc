//! `--set jitter`: seeds give different times with it, and without it (or with
//! 0) a run is what it was before jitter existed.

use tlbkit_sim::run::{run, RunOutput, RunSpec};

fn pingpong(seed: u64, sets: &[&str]) -> RunOutput {
    let mut all = vec!["rounds=30"];
    all.extend(sets);
    run(&RunSpec {
        machine: "skylake".into(),
        cpus: 1,
        policy: "x86-linux-pcid".into(),
        workload: "pingpong".into(),
        sets: all.iter().map(|s| s.to_string()).collect(),
        seed,
        strict: false,
    })
    .unwrap()
}

#[test]
fn without_jitter_pingpong_gives_every_seed_the_same_time() {
    // Nothing on pingpong's path draws from the seed at the default spec_rate:
    // on one CPU no IPI is sent, and the tick's phase (the seed's) decides no
    // preemption between two tasks that hand the CPU over at every round.
    assert_eq!(pingpong(1, &[]).result, pingpong(2, &[]).result);
}

#[test]
fn jitter_makes_seeds_differ_within_its_spread() {
    let base = pingpong(1, &[]).result["us_per_round"];
    let a = pingpong(1, &["jitter=0.05"]).result["us_per_round"];
    let b = pingpong(2, &["jitter=0.05"]).result["us_per_round"];
    assert_ne!(a, b);
    for x in [a, b] {
        assert!((x / base - 1.0).abs() < 0.05, "{x} against {base}");
    }
    assert_eq!(pingpong(1, &["jitter=0.05"]).params["jitter"], serde_json::json!(0.05));
}

#[test]
fn zero_jitter_draws_nothing() {
    let plain = pingpong(3, &["spec_rate=0.5"]);
    let zero = pingpong(3, &["spec_rate=0.5", "jitter=0"]);
    assert_eq!(serde_json::to_value(&plain.metrics).unwrap(), serde_json::to_value(&zero.metrics).unwrap());
    assert_eq!(plain.result, zero.result);
    assert!(!plain.params.contains_key("jitter"));
}
