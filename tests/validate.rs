//! `tlbkit validate`'s contract: the corpus's rows and summary, the cache that
//! makes a second validation instant and identical, JSON for other tools, exit
//! codes (0 targets met, 1 not, 2 a bad corpus), and a fast subset of the
//! shipped corpus.

use std::path::PathBuf;
use std::process::{Command, Output};

fn tlbkit(args: &[&str], cache: &PathBuf) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tlbkit")).args(args).env("XDG_CACHE_HOME", cache).output().expect("run tlbkit")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("tlbkit-validate-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A corpus of one entry: PCID against no PCID on two small ping-pongs, with
/// published figures chosen so that one ratio is in band and one is not.
const ENTRY: &str = r#"
id = "pp"
title = "PCID ping-pong"
part = "history"
benchmark = "eventfd ping-pong between two address spaces"
machine = "a laptop"
published = "1.34 us -> 1.22 us"
source = "a test of the command"

[numbers]
before = 1.34
after = 1.22

[runs.nopcid]
machine = "skylake"
cpus = 1
policy = "x86-linux-nopcid"
workload = "pingpong"
sets = ["rounds=40", "pages={x}"]

[runs.pcid]
machine = "skylake"
cpus = 1
policy = "x86-linux-pcid"
workload = "pingpong"
sets = ["rounds=40", "pages={x}"]

[[figure]]
kind = "ratio"
label = "time"
x = [8, 64]
sim = "pcid.sim_time_ns / nopcid.sim_time_ns"
ref = "after / before"

[[figure]]
kind = "abs"
label = "a fixed reference"
x = [8]
sim = "nopcid.sim_time_ns"
ref = "1000"
"#;

#[test]
fn a_second_validation_reads_the_cache_and_prints_the_same_rows() {
    let (dir, cache) = (scratch("corpus"), scratch("cache"));
    std::fs::write(dir.join("pp.toml"), ENTRY).unwrap();
    let args = ["validate", "--corpus", dir.to_str().unwrap(), "--jobs", "2"];
    let first = tlbkit(&args, &cache);
    let text = stdout(&first);
    // Two runs at two points, with seeds 1 to 3: each figure is their mean.
    assert!(text.contains("runs: 12 simulated now, 0 from cache; each figure the mean of seeds 1 to 3"), "{text}");
    assert!(text.contains("  ratio  time x=8") && text.contains("  ratio  time x=64"), "{text}");
    assert!(text.contains("  abs    a fixed reference x=8") && text.contains("factor x"), "{text}");
    let passed = text.trim_end().ends_with("PASS");
    assert_eq!(first.status.code(), Some(if passed { 0 } else { 1 }), "{text}");
    let second = tlbkit(&args, &cache);
    let again = stdout(&second);
    assert!(again.contains("runs: 0 simulated now, 12 from cache"), "{again}");
    let strip = |s: &str| s.lines().filter(|l| !l.starts_with("runs:")).collect::<Vec<_>>().join("\n");
    assert_eq!(strip(&text), strip(&again), "the cache gives the same figures");
    assert_eq!(first.status.code(), second.status.code());
    let json = tlbkit(&["validate", "--corpus", dir.to_str().unwrap(), "--format", "json"], &cache);
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let rows = doc["entries"][0]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    assert!(["in_band", "direction_only", "wrong_direction"].contains(&rows[0]["verdict"].as_str().unwrap()));
    assert!(rows[2]["factor"].as_f64().unwrap() > 0.0);
    assert_eq!((&doc["cached"], &doc["seeds"]), (&serde_json::json!(12), &serde_json::json!(3)));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn a_bad_corpus_is_refused_naming_the_file_and_the_mistake() {
    let (dir, cache) = (scratch("bad"), scratch("bad-cache"));
    std::fs::write(dir.join("pp.toml"), ENTRY.replace("pcid.sim_time_ns /", "pcidd.sim_time_ns /")).unwrap();
    let o = tlbkit(&["validate", "--corpus", dir.to_str().unwrap()], &cache);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("pp.toml") && err.contains("run 'pcidd'"), "{err}");
    let o = tlbkit(&["validate", "--only", "H99"], &cache);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("the entries are:"));
    let o = tlbkit(&["validate", "--seeds", "0"], &cache);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--seeds must be 1 to 100, not 0"));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&cache);
}

/// The fast subset of the shipped corpus that runs with the tests: H18, four
/// one-CPU runs with one seed (the full corpus is `tlbkit validate`, a
/// benchmark of minutes).
#[test]
fn the_shipped_corpus_runs_its_pti_entry() {
    let cache = scratch("h18");
    let o = tlbkit(&["validate", "--only", "H18", "--seeds", "1", "--no-cache"], &cache);
    let text = stdout(&o);
    assert!(text.contains("H18  PTI user-PCID flush"), "{text}");
    assert!(text.contains("ratio  per-page cost INVPCID+INVLPG / INVLPG"), "{text}");
    assert_eq!(text.matches("factor x").count(), 2, "{text}");
    assert!(!text.contains("ERROR"), "{text}");
    assert!(text.contains("runs: 4 simulated now, 0 from cache; each figure from seed 1"), "{text}");
    assert!(std::fs::read_dir(&cache).map_or(true, |mut d| d.next().is_none()), "--no-cache writes nothing");
    let _ = std::fs::remove_dir_all(&cache);
}
