//! What the C front end's test files share.

/// Returns whether a C compiler is here; without one, says the test is
/// skipped.
pub fn have_cc() -> bool {
    let ok = tlbkit_c::build::have_compiler();
    if !ok {
        eprintln!("skipped: no C compiler (cc or $TLBKIT_CC) on this machine");
    }
    ok
}
