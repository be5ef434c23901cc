//! Replay tokens (`tlbkit replay TOKEN`, `tlbkit check --replay TOKEN`):
//! `tlbkit_check::spec::decode`.
//!
//! A token that decodes must re-encode to a token that decodes to the same
//! request and schedule.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tlbkit_check::spec::{decode, encode};

fuzz_target!(|data: &[u8]| {
    let Ok(token) = std::str::from_utf8(data) else { return };
    let Ok((spec, choices)) = decode(token) else { return };
    let again = encode(&spec, &choices);
    assert_eq!(decode(&again).as_ref(), Ok(&(spec, choices)), "{again}");
});
