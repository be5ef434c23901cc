//! `tlbkit calibrate` runs on this host and prints host against model for
//! every microbenchmark, saves a profile `--machine host` then runs on, and
//! answers bad input with one line and exit 2. No timing is asserted: these
//! machines are shared and noisy.

#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tlbkit(args: &[&str], profile: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tlbkit"))
        .args(args)
        .env("TLBKIT_HOST_PROFILE", profile)
        .output()
        .expect("run tlbkit")
}

fn scratch(name: &str) -> PathBuf {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("tlbkit-calibrate-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join("host.json")
}

fn assert_bad_input(args: &[&str], needle: &str) {
    let o = tlbkit(args, &scratch("bad"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
}

#[test]
fn calibrate_prints_every_microbenchmark_and_saves_a_profile_host_runs_on() {
    let profile = scratch("full");
    let o = tlbkit(&["calibrate", "--quick", "--format", "json"], &profile);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = doc["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["bench"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "null_syscall",
            "page_fault",
            "zeroing",
            "zeroing_all",
            "mmap",
            "munmap",
            "madvise",
            "mprotect",
            "pipe_rw",
            "pipe_switch",
            "line_pingpong",
            "atomic_hit",
            "lock_handoff",
            "shootdown"
        ]
    );
    for r in rows {
        for k in ["host", "model", "ratio"] {
            let x = r[k].as_f64().unwrap();
            assert!(x.is_finite() && x > 0.0, "{r}");
        }
        let v = r["verdict"].as_str().unwrap();
        assert!(["reproduced", "direction-only", "not-reproduced", "fitted"].contains(&v), "{r}");
        // A prediction is judged by its own figure too: outside a factor of 2
        // of the host's it is not reproduced, and its note says so.
        let ratio = r["ratio"].as_f64().unwrap();
        if v != "fitted" && !(0.5..=2.0).contains(&ratio) {
            assert_eq!(v, "not-reproduced", "{r}");
            assert!(r["note"].as_str().unwrap().contains(&format!("{ratio:.2}x the host's, outside 1/2 to 2")), "{r}");
        }
        // A prediction outside the band says what it rests on that the host did not give.
        if v != "reproduced" && r["fitted"].is_null() {
            assert!(r["note"].as_str().unwrap().contains("not from this host: "), "{r}");
        }
    }
    let count = |v: &str| rows.iter().filter(|r| r["verdict"] == v).count();
    assert_eq!(
        doc["summary"],
        format!(
            "verdicts: {} reproduced, {} direction-only, {} not-reproduced, {} fitted, of 14 microbenchmarks",
            count("reproduced"),
            count("direction-only"),
            count("not-reproduced"),
            count("fitted")
        )
    );
    assert_eq!(doc["profile"].as_str().unwrap(), profile.to_str().unwrap());
    let saved: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&profile).unwrap()).unwrap();
    assert_eq!(saved, doc["host"]);
    let policy = doc["policy"].as_str().unwrap();
    let run = ["run", "--machine", "host", "--cpus", "2", "--policy", policy, "--workload", "microbench"];
    let o = tlbkit(&[&run[..], &["--set", "bench=8", "--format", "json"]].concat(), &profile);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let out: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let shootdown = rows.iter().find(|r| r["bench"] == "shootdown").unwrap();
    // The run is the model's side of calibrate's row, to the last digit.
    assert_eq!(out["result"]["ns_per_op"], shootdown["model"]);
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    assert_bad_input(&["calibrate", "--only", "shootdown,nope"], "unknown microbenchmark 'nope'");
    assert_bad_input(&["calibrate", "--cpus", "0,4095"], "--cpus 0,4095: CPU 4095 is not online here");
    assert_bad_input(&["calibrate", "--cpus", "0"], "--cpus 0: give exactly two CPUs");
    assert_bad_input(&["calibrate", "--cpus", "zero,one"], "--cpus zero,one: ");
    let run = ["run", "--machine", "host", "--cpus", "1", "--policy", "x86-linux-613", "--workload", "microbench"];
    assert_bad_input(&run, "no calibration of this host at ");
}
