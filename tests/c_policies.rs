//! C policies on the command line (`--c FILE`, `--policy c:FILE`): a file
//! that does not build, races, faults or loops, or has no compiler to build
//! it, is one line and an exit code; one that builds runs and compares
//! beside a Rust policy.

use crate::common::{have_cc, stderr, tlbkit};
use std::process::Command;

/// Today's arch/arm64/mm/context.c, from the C policies' test data.
const CONTEXT_C: &str = "third_party/linux/v6.12/arch/arm64/mm/context.c";

#[test]
fn a_c_policy_without_a_compiler_says_so_in_one_line() {
    let o = Command::new(env!("CARGO_BIN_EXE_tlbkit"))
        .args(["check", "--c", CONTEXT_C, "--quick"])
        .env("TLBKIT_CC", "/nonexistent/cc")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert_eq!(e.trim_end().lines().count(), 1, "one line: {e}");
    assert!(e.contains("need a C compiler") && e.contains("/nonexistent/cc") && e.contains("TLBKIT_CC"), "{e}");
}

#[test]
fn a_c_file_that_does_not_compile_is_one_line_and_exit_2() {
    if !have_cc() {
        return;
    }
    let o = tlbkit(&["check", "--c", "crates/c/tests/constructed/broken.c", "--quick"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert_eq!(e.trim_end().lines().count(), 1, "one line: {e}");
    assert!(e.contains("<linux/no_such_header.h>") && e.contains(".log"), "{e}");
}

#[test]
fn a_c_policy_runs_and_compares_beside_a_rust_one() {
    if !have_cc() {
        return;
    }
    let policy = format!("c:{CONTEXT_C}");
    let args = [
        "compare",
        "--machine",
        "altra",
        "--cpus",
        "4",
        "--workload",
        "mprotect_threaded",
        "--policy",
        &policy,
        "--policy",
        "arm64-linux",
        "--runs",
        "2",
        "--format",
        "json",
    ];
    let o = tlbkit(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains(&policy) && text.contains("arm64-linux"), "{text}");
    assert_eq!(tlbkit(&args).stdout, o.stdout, "the same seed gives the same comparison");
}

#[test]
fn a_data_race_in_a_c_file_is_a_violation_with_a_replay_token() {
    if !have_cc() {
        return;
    }
    let args =
        ["check", "--c", "crates/c/tests/constructed/race.c", "--mode", "exhaustive", "--ops", "3", "--asids", "16"];
    let o = tlbkit(&args);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(3), "{out}{}", stderr(&o));
    assert!(out.contains("VIOLATION no_data_race") && out.contains("switches"), "{out}");
    let token = out.lines().find_map(|l| l.strip_prefix("replay: tlbkit replay ")).expect("a replay line");
    let r = tlbkit(&["replay", token]);
    assert!(String::from_utf8_lossy(&r.stdout).contains("no_data_race"), "{}", stderr(&r));
}

/// The opening lines of v6.12's `flush_context()` and `asids_init()`: a
/// patch's line goes after them.
const FLUSH_CONTEXT: &str = "static void flush_context(void)\n{\n\tint i;\n\tu64 asid;\n";
const ASIDS_INIT: &str = "static int asids_init(void)\n{\n";

/// Writes v6.12's `context.c` with `line` added after `head` (the opening
/// lines of a function), as `NAME.c` in a directory of this test's.
fn patched_context(name: &str, head: &str, line: &str) -> String {
    let text = std::fs::read_to_string(CONTEXT_C).unwrap();
    let at = text.find(head).expect("the function's opening lines") + head.len();
    let dir =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tlbkit-cli-patched-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.c"));
    std::fs::write(&path, format!("{}{line}\n{}", &text[..at], &text[at..])).unwrap();
    path.display().to_string()
}

#[test]
fn a_c_policy_that_faults_or_loops_stops_a_run_with_one_line_and_exit_3() {
    if !have_cc() {
        return;
    }
    for (name, line, needle) in [
        ("null_write", "\t*(volatile int *)0 = 1;", "a write to address 0x0 at flush_context, null_write.c:"),
        ("endless", "\tfor (;;) ;", "without reaching the machine"),
    ] {
        let policy = format!("c:{}", patched_context(name, FLUSH_CONTEXT, line));
        // 8-bit ASIDs and hackbench's 400 processes: the ASIDs roll over.
        let args = ["run", "--machine", "altra", "--cpus", "4", "--workload", "hackbench", "--set", "asid_bits=8"];
        let o = tlbkit(&[&args[..], &["--policy", &policy]].concat());
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(3), "{name}: {e}");
        assert_eq!(e.trim_end().lines().count(), 1, "{name}: one line: {e}");
        assert!(e.contains(needle) && e.contains("tlbkit check --c"), "{name}: {e}");
        // And the checker finds it, with a token that replays it.
        let o = tlbkit(&["check", "--c", &policy[2..]]);
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        assert_eq!(o.status.code(), Some(3), "{name}: {out}{}", stderr(&o));
        let token = out.lines().find_map(|l| l.strip_prefix("replay: tlbkit replay ")).expect("a replay line");
        let r = String::from_utf8_lossy(&tlbkit(&["replay", token]).stdout).into_owned();
        assert!(r.contains(if name == "endless" { "no_livelock" } else { "no_kernel_bug" }), "{name}: {r}");
    }
}

#[test]
fn a_c_file_that_faults_while_booting_is_refused_in_one_line_with_its_line() {
    if !have_cc() {
        return;
    }
    let path = patched_context("boot_fault", ASIDS_INIT, "\t*(volatile int *)0 = 1;");
    let policy = format!("c:{path}");
    for args in [
        vec!["check", "--c", &path],
        vec!["run", "--machine", "altra", "--cpus", "4", "--workload", "lat_ctx", "--policy", &policy],
    ] {
        let o = tlbkit(&args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert_eq!(e.trim_end().lines().count(), 1, "one line: {e}");
        assert!(e.contains("stopped while booting") && e.contains("asids_init, boot_fault.c:"), "{e}");
    }
}
