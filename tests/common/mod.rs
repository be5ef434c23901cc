//! What the command line's test files share.

use std::process::Command;

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
