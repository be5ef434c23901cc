//! The strace reader, alone and through `tlbkit trace import --strace F` joined
//! with a fixed lackey log (crates/lab/tests/data/tiny.lackey), whose process the
//! origins' strace logs show.
//!
//! The import must end in a trace or an error about the input: never in its own
//! "a tlbkit bug" error. A trace it makes must encode to a file that reads back
//! as the same trace. Every entry the reader returns names a line of the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tlbkit_lab::trace::import::{import_from, Options};
use tlbkit_lab::trace::{strace, Trace};
use tlbkit_lab::Error;

const LACKEY: &str = include_str!("../../crates/lab/tests/data/tiny.lackey");

fuzz_target!(|data: &[u8]| {
    let Ok(entries) = strace::parse(data, "f.strace") else { return };
    let lines = data.iter().filter(|&&b| b == b'\n').count();
    assert!(entries.iter().all(|e| (1..=lines).contains(&e.line)), "an entry's line is one of the input's");
    match import_from(LACKEY.as_bytes(), "t.lackey", Some((&mut &data[..], "f.strace")), Options::default()) {
        Ok((trace, _)) => {
            let again = Trace::decode(&trace.encode()).expect("an imported trace reads back");
            assert_eq!(again, trace, "an imported trace encodes to itself");
        }
        Err(e) => assert!(!matches!(e, Error::ImportBug { .. }), "{e}"),
    }
});
