//! `--set key=value` values (`tlbkit run`, `bench scale`, every point of a
//! sweep): `tlbkit_sim::run::check`, which turns the command line's strings into
//! a machine, kernel and workload configuration without running it.
//!
//! Input: byte 0 picks the machine, byte 1 the policy, byte 2 the workload
//! (indexes into the registered lists, so mismatched pairs are tried too), bytes
//! 3-4 the CPU count (little-endian, 0 to 65535), and the rest, as UTF-8, one
//! `--set` string a line. A request that checks must also give its figures'
//! names, as `tlbkit sweep` asks before running.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tlbkit_registry::POLICIES;
use tlbkit_sim::preset;
use tlbkit_sim::run::{self, RunSpec};
use tlbkit_sim::workload::WORKLOADS;

fuzz_target!(|data: &[u8]| {
    let [m, p, w, c0, c1, rest @ ..] = data else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let machines = preset::all();
    let spec = RunSpec {
        machine: machines[*m as usize % machines.len()].name.to_string(),
        cpus: u16::from_le_bytes([*c0, *c1]) as usize,
        policy: POLICIES[*p as usize % POLICIES.len()].name.to_string(),
        workload: WORKLOADS[*w as usize % WORKLOADS.len()].name.to_string(),
        sets: if text.is_empty() { Vec::new() } else { text.split('\n').map(str::to_string).collect() },
        seed: 1,
        strict: false,
    };
    if run::check(&spec).is_ok() {
        let names = run::metric_names(&spec).expect("a request that checks names its figures");
        assert!(!names.is_empty());
    }
});
