//! What the command line's test files share.
// Each test file uses the part it needs.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A small `lat_ctx` run on 2 CPUs of `cortex-a72`: the arguments of `tlbkit`.
pub const LAT_CTX_RUN: &[&str] = &[
    "run",
    "--machine",
    "cortex-a72",
    "--cpus",
    "2",
    "--policy",
    "arm64-freebsd-asid",
    "--workload",
    "lat_ctx",
    "--set",
    "procs=6",
    "--set",
    "rounds=5",
];

/// Runs the `tlbkit` binary with `args` and returns what it did.
pub fn tlbkit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tlbkit")).args(args).output().expect("run tlbkit")
}

/// Runs the `tlbkit` binary with `args`, which must succeed, and returns the
/// JSON it printed.
pub fn tlbkit_json(args: &[&str]) -> serde_json::Value {
    let o = tlbkit(args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Returns what `o` wrote to standard error.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Whether C policies can be built here (a C compiler runs); says so when not.
pub fn have_cc() -> bool {
    let ok = Command::new(std::env::var("TLBKIT_CC").unwrap_or_else(|_| "cc".into()))
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: no C compiler on this machine");
    }
    ok
}

/// Asserts that `tlbkit ARGS` is refused as bad input: exit 2, one line on
/// standard error naming `needle`, no panic.
pub fn assert_bad_input(args: &[&str], needle: &str) {
    let o = tlbkit(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// Runs a sweep in `dir` from `NAME.toml`: `lat_ctx` of `rounds` rounds on one
/// CPU of `cortex-a72` under two policies, with 2 and 4 processes and `seeds`
/// seeds, jitter 0.02; returns its results file (`NAME.jsonl`).
pub fn lat_ctx_sweep(dir: &Path, name: &str, seeds: u32, rounds: u32) -> PathBuf {
    let toml = dir.join(format!("{name}.toml"));
    std::fs::write(
        &toml,
        format!(
            "machines = [\"cortex-a72\"]\ncpus = [1]\npolicies = [\"arm64-noasid\", \"arm64-freebsd-asid\"]\n\
             workloads = [\"lat_ctx\"]\nseeds = {{ first = 1, count = {seeds} }}\n[set]\njitter = 0.02\n\
             [set.lat_ctx]\nprocs = [2, 4]\nsize_kb = 0\nrounds = {rounds}\n"
        ),
    )
    .unwrap();
    let o = tlbkit(&["sweep", toml.to_str().unwrap(), "--jobs", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    dir.join(format!("{name}.jsonl"))
}
