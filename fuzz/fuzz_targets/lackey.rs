//! The valgrind lackey reader, through `tlbkit trace import --lackey F` (the
//! import without a strace log reads the lackey log alone).
//!
//! The import must end in a trace or an error about the input: never in its own
//! "a tlbkit bug" error (the trace it made failed the reader's checks). A trace
//! it makes must encode to a file that reads back as the same trace.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tlbkit_lab::trace::import::{import_from, Options};
use tlbkit_lab::Error;
use tlbkit_sim::trace::Trace;

fuzz_target!(|data: &[u8]| {
    let ifetch = data.first().is_some_and(|b| b & 1 == 0);
    match import_from(data, "f.lackey", None, Options { ifetch }) {
        Ok((trace, _)) => {
            let again = Trace::decode(&trace.encode()).expect("an imported trace reads back");
            assert_eq!(again, trace, "an imported trace encodes to itself");
        }
        Err(e) => assert!(!matches!(e, Error::ImportBug { .. }), "{e}"),
    }
});
