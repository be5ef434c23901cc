//! `tlbkit sweep`'s contract: one line per grid point, an interrupted sweep
//! resumed without losing or repeating a point, a torn last line dropped,
//! malformed files refused with their line and field.

use crate::common::{stderr, tlbkit};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A fresh folder for one test, removed with what is in it when the test ends.
struct Folder(PathBuf);

impl std::ops::Deref for Folder {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Folder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Returns a fresh folder for one test.
fn folder(test: &str) -> Folder {
    let d =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tlbkit-sweep-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    Folder(d)
}

/// 2 CPU counts x 2 policies x 3 procs x 4 seeds = 48 points.
const GRID: &str = r#"
machines  = ["cortex-a72"]
cpus      = [1, 2]
policies  = ["arm64-noasid", "arm64-freebsd-asid"]
workloads = ["lat_ctx"]
seeds     = { first = 1, count = 4 }
results   = "out.jsonl"

[set]
jitter = 0.02

[set.lat_ctx]
procs  = [2, 4, 6]
rounds = 20
"#;

const POINTS: usize = 48;

fn write_grid(dir: &Path, text: &str) -> String {
    let p = dir.join("grid.toml");
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

/// Returns the results file's lines by the command they record, checking that
/// each command is recorded once and every line is complete.
fn by_command(path: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.is_empty() || text.ends_with('\n'));
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let cmd = v["command"].as_str().unwrap().to_string();
        assert!(out.insert(cmd.clone(), line.to_string()).is_none(), "recorded twice: {cmd}");
    }
    out
}

#[test]
fn a_sweep_records_each_point_once_and_a_second_run_makes_none() {
    let dir = folder("once");
    let grid = write_grid(&dir, GRID);
    let o = tlbkit(&["sweep", &grid, "--jobs", "2"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let lines = by_command(&dir.join("out.jsonl"));
    assert_eq!(lines.len(), POINTS);
    let first: serde_json::Value = serde_json::from_str(lines.values().next().unwrap()).unwrap();
    for k in ["machine", "cpus", "policy", "workload", "jitter", "procs", "rounds", "seed", "violations"] {
        assert!(!first[k].is_null(), "{k}");
    }
    for k in ["us_per_switch", "overhead_us", "tlb_misses", "sim_time_ns", "context_switches"] {
        assert!(first[k].is_number(), "{k}");
    }
    let again = tlbkit(&["sweep", &grid]);
    assert_eq!(again.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&again.stdout).contains(&format!("{POINTS} already in")), "{again:?}");
    assert_eq!(by_command(&dir.join("out.jsonl")), lines);
}

#[test]
fn a_sweep_cut_halfway_with_a_torn_line_resumes_to_the_same_results() {
    let dir = folder("torn");
    let grid = write_grid(&dir, GRID);
    let out = dir.join("out.jsonl");
    assert_eq!(tlbkit(&["sweep", &grid, "--jobs", "1"]).status.code(), Some(0));
    let complete = by_command(&out);
    // What a kill mid-write leaves: half the lines, then part of the next.
    let text = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut cut: String = lines[..POINTS / 2].iter().map(|l| format!("{l}\n")).collect();
    cut.push_str(&lines[POINTS / 2][..40]);
    std::fs::write(&out, &cut).unwrap();
    let o = tlbkit(&["sweep", &grid, "--jobs", "2"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("dropped the torn last line (40 bytes)"), "{}", stderr(&o));
    let summary = String::from_utf8_lossy(&o.stdout);
    assert!(summary.contains(&format!("{} already in", POINTS / 2)), "{summary}");
    assert!(summary.contains(&format!("{} run now", POINTS / 2)), "{summary}");
    // Exactly one line per point, each the one an uninterrupted sweep wrote.
    assert_eq!(by_command(&out), complete);
}

#[test]
fn a_killed_sweep_resumes_with_one_result_per_point() {
    let dir = folder("kill");
    let grid = write_grid(&dir, &GRID.replace("count = 4", "count = 10").replace("rounds = 20", "rounds = 200"));
    let out = dir.join("out.jsonl");
    let total = POINTS / 4 * 10;
    let mut child = Command::new(env!("CARGO_BIN_EXE_tlbkit"))
        .args(["sweep", &grid, "--jobs", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while std::fs::read_to_string(&out).map_or(0, |t| t.lines().count()) < total / 2
        && start.elapsed() < Duration::from_secs(120)
    {
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // Killed halfway: the other half takes hundreds of times the polling period.
    let before = std::fs::read_to_string(&out).unwrap().lines().count();
    assert!(before < total, "the sweep finished before it was killed");
    let o = tlbkit(&["sweep", &grid]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let lines = by_command(&out);
    assert_eq!(lines.len(), total);
    let summary = String::from_utf8_lossy(&o.stdout);
    assert!(summary.contains(&format!("{total} runs; ")), "{summary}");
}

fn assert_refused(text: &str, needle: &str) {
    let dir = folder(&format!("bad{}", text.len()));
    let grid = write_grid(&dir, text);
    let o = tlbkit(&["sweep", &grid]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(needle), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(!dir.join("out.jsonl").exists(), "nothing ran");
}

#[test]
fn a_malformed_file_is_refused_naming_its_line_and_field() {
    assert_refused(
        &GRID.replace("cpus      = [1, 2]", "cpus      = [1, \"2\"]"),
        "grid.toml: line 3, cpus: invalid type",
    );
    assert_refused(
        &GRID.replace("procs  = [2, 4, 6]", "procs  = [2, 4, 0]"),
        "line 13, set.lat_ctx.procs: --set procs=0",
    );
    assert_refused(&GRID.replace("policies ", "policy "), "line 4, policy: unknown field `policy`");
    assert_refused(
        &GRID.replace("jitter = 0.02", "jitter = 0.9"),
        "line 10, set.jitter: --set jitter=0.9 is out of range",
    );
    assert_refused(&GRID.replace("[\"cortex-a72\"]", "[\"skylake\"]"), "no policy of this sweep fits");
    let o = tlbkit(&["sweep", "/nonexistent/grid.toml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cannot read /nonexistent/grid.toml"), "{}", stderr(&o));
}
