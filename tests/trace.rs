//! `tlbkit trace import` and `--workload trace`: a committed lackey and strace
//! fixture imported, replayed under two policies, deterministically; bad input
//! is exit 2 with the file and line.

use crate::common::{stderr, tlbkit};
use std::path::{Path, PathBuf};
use std::process::Output;

/// A fixture file of the lab crate's tests (its trace import's inputs).
fn fixture(name: &str) -> String {
    format!("{}/crates/lab/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// A fresh directory of this test's own.
fn scratch(test: &str) -> PathBuf {
    let dir =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tlbkit-trace-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn import(out: &Path, lackey: &str, strace: &str) -> Output {
    let out = out.to_str().unwrap();
    tlbkit(&["trace", "import", "--lackey", lackey, "--strace", strace, "-o", out])
}

fn replay(trace: &Path, machine: &str, policy: &str) -> Output {
    let file = format!("file={}", trace.display());
    let args = ["run", "--machine", machine, "--cpus", "4", "--policy", policy, "--workload", "trace"];
    tlbkit(&[&args[..], &["--set", &file, "--seed", "3", "--format", "json"]].concat())
}

#[test]
fn imported_fixture_replays_under_two_policies_deterministically() {
    let dir = scratch("replay");
    let trace = dir.join("tiny.trace");
    let o = import(&trace, &fixture("tiny.lackey"), &fixture("tiny.strace"));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let report = String::from_utf8_lossy(&o.stdout);
    assert!(report.contains("2 process(es), 3 thread(s)"), "{report}");
    assert!(report.contains("7 call(s) valgrind made for itself"), "{report}");
    for (machine, policy) in [("altra", "arm64-linux"), ("altra", "arm64-linux-skipbcast")] {
        let a = replay(&trace, machine, policy);
        assert_eq!(a.status.code(), Some(0), "{policy}: {}", stderr(&a));
        let b = replay(&trace, machine, policy);
        assert_eq!(a.stdout, b.stdout, "{policy}: the same seed must give the same output");
        let j: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
        assert!(j["result"]["run_us"].as_f64().unwrap() > 0.0, "{j}");
        assert_eq!(j["params"]["file"].as_str(), Some(trace.to_str().unwrap()));
        assert_eq!(j["violations_total"], 0);
        assert!(j["replay"].as_str().unwrap().contains(&format!("--set file={}", trace.display())));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_input_is_exit_2_with_file_and_line_and_leaves_no_trace() {
    let dir = scratch("bad");
    let trace = dir.join("t.trace");
    // A malformed lackey line.
    let lackey = dir.join("bad.lackey");
    let text = std::fs::read_to_string(fixture("tiny.lackey")).unwrap().replace(" S 04835008,8", " S 04835008");
    std::fs::write(&lackey, text).unwrap();
    let o = import(&trace, lackey.to_str().unwrap(), &fixture("tiny.strace"));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("bad.lackey:21: malformed reference '04835008'"), "{}", stderr(&o));
    assert!(!trace.exists(), "a failed import wrote a trace");
    // A strace log cut short.
    let strace = dir.join("cut.strace");
    let text = std::fs::read_to_string(fixture("tiny.strace")).unwrap();
    std::fs::write(&strace, &text[..text.len() - 30]).unwrap();
    let o = import(&trace, &fixture("tiny.lackey"), strace.to_str().unwrap());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cut.strace:31: the file ends in the middle of a line"), "{}", stderr(&o));
    assert!(!trace.exists());
    // A trace file shorter than its header says, and a missing one.
    let good = dir.join("good.trace");
    assert_eq!(import(&good, &fixture("tiny.lackey"), &fixture("tiny.strace")).status.code(), Some(0));
    let bytes = std::fs::read(&good).unwrap();
    std::fs::write(&trace, &bytes[..bytes.len() - 10]).unwrap();
    let o = replay(&trace, "altra", "arm64-linux");
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("t.trace: truncated: the header says"), "{}", stderr(&o));
    let o = replay(&dir.join("missing.trace"), "altra", "arm64-linux");
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("missing.trace: "), "{}", stderr(&o));
    std::fs::remove_dir_all(&dir).unwrap();
}
