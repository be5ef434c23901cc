//! Replay tokens (`tlbkit replay TOKEN`, `tlbkit check --replay TOKEN`):
//! `tlbkit_check::token::decode`.
//!
//! The input is decoded as it is, and again with its CRC appended (`~` and the
//! eight hex digits of its CRC-32), so that mutations reach the fields behind
//! the checksum. A token that decodes must re-encode to a token that decodes
//! to the same check and schedule.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tlbkit_check::token::{crc32, decode, encode};

fn round_trip(token: &str) {
    let Ok((spec, choices)) = decode(token) else { return };
    let again = encode(&spec, &choices);
    let decoded = decode(&again);
    assert!(
        decoded.as_ref().ok() == Some(&(spec, choices)),
        "{token} re-encoded as {again}, which decodes to {decoded:?}"
    );
}

fuzz_target!(|data: &[u8]| {
    let Ok(token) = std::str::from_utf8(data) else { return };
    round_trip(token);
    round_trip(&format!("{token}~{:08x}", crc32(token.as_bytes())));
});
