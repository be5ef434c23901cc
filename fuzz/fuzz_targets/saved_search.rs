//! Saved searches (`tlbkit check --resume DIR`): `tlbkit_check::search::saved::decode`,
//! which reads a save's header, checksums and identity, and the reader of its
//! body a resumed search starts from (`search::read_saved_body` reads a body
//! as the resume does: its counts, its visited states into a table, its
//! queue).
//!
//! The input is read as a whole file, and again as a body given a valid
//! header and checksums (`saved::encode`), so that mutations reach the body's
//! reader behind the checksums. Either must end in a search or an error:
//! never a panic, and never an allocation larger than the input (every count
//! read is bounded by the bytes left). A save encoded decodes to its identity
//! and body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tlbkit_check::search::{read_saved_body, saved, Fingerprints};

/// The identity of a save: a binary's hash and a check.
const IDENTITY: &str = "0123456789abcdef t5~arm64-linux~2~3~1~4~3~sc~all";

fuzz_target!(|data: &[u8]| {
    if let Ok((_, body)) = saved::decode(data) {
        let _ = read_saved_body(body, Fingerprints::for_cpus(2));
    }
    let file = saved::encode(IDENTITY, data);
    let (identity, body) = saved::decode(&file).expect("an encoded save decodes");
    assert_eq!((identity.as_str(), body), (IDENTITY, data), "a save decodes to what was encoded");
    let _ = read_saved_body(body, Fingerprints::for_cpus(2));
});
