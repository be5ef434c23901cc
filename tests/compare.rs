//! `tlbkit compare`'s contract: ministat's table, the same figures in JSON and
//! CSV, output independent of the host threads, exit codes.

use crate::common::{stderr, tlbkit, tlbkit_json};
use std::process::Output;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A small comparison whose runs differ by seed (2% jitter).
const COMPARE: &[&str] = &[
    "compare",
    "--machine",
    "skylake",
    "--cpus",
    "1",
    "--workload",
    "pingpong",
    "--policy",
    "x86-linux-nopcid",
    "--policy",
    "x86-linux-pcid",
    "--policy",
    "x86-freebsd-gen",
    "--runs",
    "5",
    "--set",
    "rounds=40",
    "--set",
    "pages=64",
    "--set",
    "jitter=0.02",
];

fn compare(extra: &[&str]) -> Output {
    let mut args = COMPARE.to_vec();
    args.extend(extra);
    tlbkit(&args)
}

#[test]
fn the_table_is_ministats_and_does_not_depend_on_the_thread_count() {
    let one = compare(&["--jobs", "1"]);
    assert_eq!(one.status.code(), Some(0), "{}", stderr(&one));
    let table = stdout(&one);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(
        lines[0],
        "us_per_round: pingpong --set rounds=40 --set pages=64 --set jitter=0.02 on skylake (1 CPU), 5 runs per \
         policy (seeds 1 to 5)"
    );
    assert_eq!(&lines[1..4], ["x x86-linux-nopcid", "+ x86-linux-pcid", "* x86-freebsd-gen"]);
    assert_eq!(lines[4], "    N           Min           Max        Median           Avg        Stddev");
    assert!(lines[5].starts_with("x   5 ") && lines[6].starts_with("+   5 "), "{table}");
    // PCID keeps the 64 pages' translations across switches: a proven gain.
    assert_eq!(lines[7], "Difference at 95.0% confidence");
    assert!(lines[8].starts_with("\t-") && lines[9].starts_with("\t-") && lines[9].contains("% +/- "), "{table}");
    assert!(lines[10].starts_with("\t(Student's t, pooled s = "), "{table}");
    for format in ["table", "json", "csv"] {
        let a = compare(&["--jobs", "1", "--format", format]);
        let b = compare(&["--jobs", "3", "--format", format]);
        assert_eq!(a.stdout, b.stdout, "{format}");
    }
}

#[test]
fn json_and_csv_carry_the_same_figures() {
    let j: serde_json::Value = serde_json::from_slice(&compare(&["--format", "json"]).stdout).unwrap();
    let csv = stdout(&compare(&["--format", "csv"]));
    let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    let header = &rows[0];
    assert_eq!(rows.len(), 4);
    assert_eq!(j["metric"], "us_per_round");
    assert_eq!(j["seeds"], serde_json::json!([1, 2, 3, 4, 5]));
    for (p, row) in j["policies"].as_array().unwrap().iter().zip(&rows[1..]) {
        let col = |name: &str| row[header.iter().position(|h| *h == name).unwrap()];
        assert_eq!(col("policy"), p["policy"].as_str().unwrap());
        assert_eq!(p["values"].as_array().unwrap().len(), 5);
        for k in ["n", "min", "max", "median", "avg", "stddev", "violations"] {
            assert_eq!(col(k).parse::<f64>().unwrap(), p[k].as_f64().unwrap(), "{k}");
        }
        for k in ["difference", "half_width", "relative_pct", "relative_half_width_pct", "pooled_stddev"] {
            let want = p["vs_first"][k].as_f64().map(|v| v.to_string()).unwrap_or_default();
            assert_eq!(col(k), want, "{k}");
        }
        let values: Vec<f64> = col("values").split(' ').map(|v| v.parse().unwrap()).collect();
        assert_eq!(serde_json::json!(values), p["values"]);
    }
    // Seeds differ under jitter: the samples are not all equal.
    let v = j["policies"][0]["values"].as_array().unwrap();
    assert!(v.iter().any(|x| x != &v[0]), "{v:?}");
}

#[test]
fn another_metric_can_be_compared() {
    let o = compare(&["--metric", "tlb_misses", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["metric"], "tlb_misses");
    assert!(j["policies"][1]["avg"].as_f64().unwrap() < j["policies"][0]["avg"].as_f64().unwrap());
}

#[test]
fn runs_that_find_violations_exit_3_with_a_replay_command() {
    // contpte's `simple` teardown returns values without the block's dirty
    // state (no_ungathered_dirty).
    let o = tlbkit(&[
        "compare",
        "--machine",
        "altra",
        "--cpus",
        "2",
        "--workload",
        "exit_teardown",
        "--policy",
        "arm64-linux",
        "--policy",
        "arm64-linux-skipbcast",
        "--runs",
        "2",
        "--set",
        "contpte=on",
        "--set",
        "teardown=simple",
        "--set",
        "jobs=2",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stdout(&o).contains("exit_us: exit_teardown"));
    assert!(
        stderr(&o).contains("replay the first run that found one with: tlbkit run --machine altra"),
        "{}",
        stderr(&o)
    );
}

fn assert_bad_input(extra: &[&str], needle: &str) {
    let mut args = COMPARE.to_vec();
    // A flag given again replaces the value COMPARE gives it.
    for pair in extra.chunks(2) {
        if pair[0] != "--policy" && pair[0] != "--set" {
            if let Some(i) = args.iter().position(|a| *a == pair[0]) {
                args.drain(i..i + 2);
            }
        }
    }
    args.extend(extra);
    let o = tlbkit(&args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{extra:?}: {err}");
    assert!(err.contains(needle), "{extra:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(o.stdout.is_empty(), "{extra:?}");
}

#[test]
fn bad_input_exits_2_with_what_would_be_accepted() {
    assert_bad_input(&["--runs", "1"], "give at least 2 runs per policy");
    // Refused before anything runs, not an allocation of every run at once
    // that the system cannot give.
    assert_bad_input(&["--runs", "1000000000"], "--runs 1000000000 is too many: give at most 10000 runs per policy");
    assert_bad_input(&["--policy", "x86-nope"], "unknown policy 'x86-nope'; valid policies:");
    assert_bad_input(&["--policy", "arm64-linux"], "policies that fit");
    assert_bad_input(&["--policy", "x86-linux-pcid"], "given twice");
    assert_bad_input(&["--metric", "speed"], "unknown metric 'speed'; valid metrics for pingpong: us_per_round, ");
    assert_bad_input(&["--set", "nope=1"], "unknown parameter 'nope'");
    assert_bad_input(&["--jobs", "0"], "--jobs 0");
    assert_bad_input(&["--format", "xml"], "invalid value 'xml'");
    let o = tlbkit(&["compare", "--machine", "vax", "--workload", "pingpong", "--policy", "a", "--policy", "b"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown machine 'vax'; valid machines:"), "{}", stderr(&o));
    let o = tlbkit(&[
        "compare",
        "--machine",
        "skylake",
        "--workload",
        "nope",
        "--policy",
        "x86-linux-pcid",
        "--policy",
        "x86-linux-nopcid",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown workload 'nope'; valid workloads:"), "{}", stderr(&o));
    let o = tlbkit(&["compare", "--machine", "skylake", "--workload", "pingpong", "--policy", "x86-linux-pcid"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("at least two policies"), "{}", stderr(&o));
}

#[test]
fn a_figure_every_seed_gives_alike_is_one_sample_with_no_interval() {
    // pingpong on one CPU without jitter: no IPI, and the tick decides nothing.
    // Under PCID nothing the result depends on draws from the seed; without
    // it, speculative fills of the 64 pages (which a switch flushes) do.
    assert_eq!(COMPARE[COMPARE.len() - 2..], ["--set", "jitter=0.02"]);
    let args = &COMPARE[..COMPARE.len() - 2];
    let o = tlbkit(args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let table = stdout(&o);
    assert!(!table.contains("+/-") && !table.contains("proven"), "{table}");
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[5].starts_with("x   5 "), "{table}");
    assert!(lines[6].starts_with("+ deterministic: one sample, "), "{table}");
    assert!(lines[6].ends_with(" (every one of 5 seeds)"), "{table}");
    assert_eq!(lines[7], "Difference, deterministic: one sample (no confidence interval)");
    assert!(stderr(&o).contains("(deterministic: one sample)"), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&tlbkit(&[args, &["--format", "json"]].concat()).stdout).unwrap();
    assert_eq!(j["policies"][0]["deterministic"], serde_json::json!(false));
    assert_eq!(j["policies"][1]["deterministic"], serde_json::json!(true));
    assert_eq!(j["policies"][1]["vs_first"]["deterministic"], serde_json::json!(true));
    assert!(j["policies"][1]["vs_first"]["half_width"].is_null());
    let csv = stdout(&tlbkit(&[args, &["--format", "csv"]].concat()));
    let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    let col = |r: usize, name: &str| rows[r][rows[0].iter().position(|h| *h == name).unwrap()];
    assert_eq!((col(2, "deterministic"), col(2, "half_width"), col(2, "proven")), ("true", "", ""));
}

#[test]
fn hackbench_on_several_cpus_varies_with_the_seed_by_default() {
    let j = tlbkit_json(&[
        "compare",
        "--machine",
        "skx8170",
        "--cpus",
        "4",
        "--workload",
        "hackbench",
        "--policy",
        "x86-linux-613",
        "--policy",
        "x86-linux-pcid",
        "--runs",
        "3",
        "--set",
        "groups=2",
        "--set",
        "fds=5",
        "--set",
        "loops=20",
        "--format",
        "json",
    ]);
    for p in j["policies"].as_array().unwrap() {
        assert_eq!(p["deterministic"], serde_json::json!(false), "{p}");
    }
    assert_eq!(j["policies"][1]["vs_first"]["deterministic"], serde_json::json!(false));
}
