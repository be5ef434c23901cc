//! Litmus tests (`tlbkit litmus FILE`): `tlbkit_check::litmus::parse`, the
//! reader of isla's `.litmus.toml` system litmus tests.
//!
//! A test that reads has at least one thread, and the engine runs it to an
//! answer or an error (a search bounded at 20,000 states); a refusal names a
//! line of the input (or 0, the file as a whole).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tlbkit_check::litmus::parse;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match parse("f.litmus.toml", text) {
        Ok(test) => {
            assert!(!test.threads.is_empty(), "a test without threads read");
            // The engine runs what the parser reads: an answer or an error
            // (a bounded search), never a panic.
            let _ = tlbkit_check::litmus::engine::explore_within(&test, 20_000);
        }
        Err(e) => {
            let lines = text.lines().count();
            assert!(e.line <= lines, "line {} of a file of {lines} lines: {e}", e.line);
        }
    }
});
