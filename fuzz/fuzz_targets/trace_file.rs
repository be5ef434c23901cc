//! The trace file reader (`--workload trace --set file=F`, `tlbkit trace dump F`).
//!
//! An input that starts with the magic is read as a whole file. Any other input
//! is a body: its first byte gives the header's flags, the rest is wrapped in a
//! header with the right length and checksum, so that mutations reach the
//! records instead of stopping at the checksum. A trace that reads must encode
//! to a file that reads back as the same trace, and must dump as text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tlbkit_sim::trace::format::{MAGIC, VERSION};
use tlbkit_sim::trace::Trace;

/// FNV-1a 64, the header's checksum (crates/sim/src/trace/format.rs).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

fn read(file: &[u8]) {
    let Ok(trace) = Trace::decode(file) else { return };
    let again = Trace::decode(&trace.encode()).expect("an encoded trace reads back");
    assert_eq!(again, trace, "a trace that reads encodes to itself");
    trace.dump(&mut std::io::sink()).expect("a sink takes the dump");
}

fuzz_target!(|data: &[u8]| {
    if data.starts_with(MAGIC) || data.is_empty() {
        read(data);
        return;
    }
    let (flags, body) = (u32::from(data[0] & 3), &data[1..]);
    let mut file = Vec::with_capacity(32 + body.len());
    file.extend_from_slice(MAGIC);
    file.extend_from_slice(&VERSION.to_le_bytes());
    file.extend_from_slice(&flags.to_le_bytes());
    file.extend_from_slice(&(body.len() as u64).to_le_bytes());
    file.extend_from_slice(&fnv1a(body).to_le_bytes());
    file.extend_from_slice(body);
    read(&file);
});
