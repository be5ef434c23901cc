//! Litmus tests (`tlbkit litmus FILE`): `tlbkit_check::litmus::parse`, the
//! reader of isla's `.litmus.toml` system litmus tests.
//!
//! A test that reads has at least one thread; a refusal names a line of the
//! input (or 0, the file as a whole).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tlbkit_check::litmus::parse;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match parse("f.litmus.toml", text) {
        Ok(test) => assert!(!test.threads.is_empty(), "a test without threads read"),
        Err(e) => {
            let lines = text.lines().count();
            assert!(e.line <= lines, "line {} of a file of {lines} lines: {e}", e.line);
        }
    }
});
