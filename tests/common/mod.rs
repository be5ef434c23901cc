//! What the command line's test files share.
// Each test file uses the part it needs.
#![allow(dead_code)]

use std::process::{Command, Output};

/// Runs the `tlbkit` binary with `args` and returns what it did.
pub fn tlbkit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tlbkit")).args(args).output().expect("run tlbkit")
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
