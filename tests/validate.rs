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

/// `--vary`: the corpus judged on presets whose estimated costs of a kind are
/// multiplied; what it varied is said first, the figures follow the costs,
/// and a bad kind or factor is refused.
#[test]
fn vary_runs_the_corpus_on_presets_with_their_estimates_multiplied() {
    let (dir, cache, tmp) = (scratch("vary"), scratch("vary-cache"), scratch("vary-tmp"));
    std::fs::write(dir.join("pp.toml"), ENTRY).unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["validate", "--corpus", dir.to_str().unwrap(), "--seeds", "1", "--format", "json"];
        args.extend_from_slice(extra);
        let o = Command::new(env!("CARGO_BIN_EXE_tlbkit"))
            .args(&args)
            .env("XDG_CACHE_HOME", &cache)
            .env("TMPDIR", &tmp)
            .output()
            .expect("run tlbkit");
        assert!(o.status.code() == Some(0) || o.status.code() == Some(1), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    let time = |doc: &serde_json::Value| doc["entries"][0]["rows"][2]["sim"].as_f64().unwrap();
    let plain = run(&[]);
    assert!(plain.get("varied").is_none(), "no --vary, no varied machines: {plain}");
    let slow = run(&["--vary", "software=2"]);
    // skylake estimates its software paths: the ping-pong's pipe operations
    // and switches cost twice as much, so the run takes longer.
    let varied = slow["varied"].as_array().unwrap();
    assert_eq!(varied.len(), 1, "{varied:?}");
    let line = varied[0].as_str().unwrap();
    assert!(line.starts_with("skylake-software-x2: ") && line.contains("pipe_op 400 -> 800"), "{line}");
    assert!(time(&slow) > time(&plain) * 1.2, "{} against {}", time(&slow), time(&plain));
    assert!(tmp.join("tlbkit-vary").join("skylake-software-x2.toml").is_file());
    for (arg, says) in [
        ("ipi", "give KIND=FACTOR"),
        ("cpu=2", "no cost kind 'cpu'; kinds: ipi, software, tlb, broadcast, entry, memory"),
        ("ipi=0", "the factor must be a number from 0.01 to 100, not '0'"),
        ("ipi=2 --vary ipi=3", "--vary names 'ipi' twice"),
    ] {
        let mut args = vec!["validate", "--corpus", dir.to_str().unwrap()];
        for a in arg.split(" --vary ") {
            args.extend(["--vary", a]);
        }
        let o = tlbkit(&args, &cache);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains(says), "--vary {arg}: {err}");
    }
    for d in [dir, cache, tmp] {
        let _ = std::fs::remove_dir_all(&d);
    }
}

/// `scripts/validate-vary` sets varied validations beside the base one: per
/// variant the counted rows whose verdict moved, each such row with its
/// verdicts, and how many rows hold under every variant.
#[test]
fn validate_vary_counts_the_verdicts_each_variant_moves() {
    let dir = scratch("vary-script");
    let doc = |varied: &[&str], ratio: &str, factor: f64| {
        serde_json::json!({
            "total": {},
            "varied": varied,
            "entries": [{ "id": "H1", "rows": [
                { "kind": "ratio", "label": "x=1", "verdict": ratio, "counted": "yes" },
                { "kind": "shape", "label": "trend", "shape_right": true, "counted": "yes" },
                { "kind": "abs", "label": "ns", "factor": factor, "counted": "yes" },
                { "kind": "info", "label": "aside", "verdict": "wrong_direction", "counted": "no" },
            ]}],
        })
        .to_string()
    };
    let files = [
        ("base.json", doc(&[], "in_band", 1.5)),
        (
            "ipi.json",
            doc(&["hsw48-ipi-x2: ipi_send 150 -> 300", "milan-ipi-x2: ipi_send 150 -> 300"], "direction_only", 1.5),
        ),
        ("sw.json", doc(&["cortex-a72-software-x0_5: fault_path 1500 -> 750"], "in_band", 2.5)),
    ];
    for (name, text) in &files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/validate-vary");
    let o = Command::new("python3").arg(&script).args(files.map(|(n, _)| n)).current_dir(&dir).output().unwrap();
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.contains("| ipi x2 | 1 | 0 | 1 |"), "{text}");
    assert!(text.contains("| software x0.5 | 1 | 0 | 1 |"), "{text}");
    assert!(text.contains("| H1 | ratio x=1 | in band | direction-only |  |"), "{text}");
    assert!(text.contains("| H1 | abs ns | within 2x |  | outside 2x |"), "{text}");
    assert!(!text.contains("aside") && !text.contains("trend |"), "{text}");
    assert!(text.contains("counted rows that keep their verdict under every variant: 1 of 3"), "{text}");
    // A validation without --vary given as a variant is refused.
    let o = Command::new("python3").arg(&script).args(["base.json", "base.json"]).current_dir(&dir).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("varies nothing"));
    let _ = std::fs::remove_dir_all(&dir);
}
