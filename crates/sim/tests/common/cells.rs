//! The strict matrix's cells (`strict_matrix.rs`): the machine each policy's
//! cells run on, the settings every cell takes, and a cell's run, shared with
//! `host_memory.rs` (which runs the first configuration's cells again with the
//! host's heap moved).

use tlbkit_registry as registry;
use tlbkit_sim::preset::Arch;
use tlbkit_sim::run::RunSpec;

/// Settings of every cell, after the workload's and the machine's.
pub const COMMON: &[&str] = &["migration=on", "spec_rate=0.2"];

/// Each cell runs once per configuration: a seed and settings of its own. The
/// second preempts every 100 us, so that threads are stolen mid-work by idle CPUs
/// rather than only placed at wake-up.
pub const CONFIGS: &[(u64, &[&str])] = &[(11, &[]), (12, &["slice_us=100"])];

/// Returns the machine a policy's cells run on and the settings that machine adds.
pub fn machine(policy: &str) -> (&'static str, &'static [&'static str]) {
    match registry::policy(policy).map(|p| p.arch) {
        Some(Arch::Arm64) => ("emag", &["asid_bits=8"]),
        // INVLPGB needs an AMD machine; Milan has 64 cores in a socket.
        Some(Arch::X86_64) if registry::policy(policy).is_some_and(|p| p.needs_broadcast_tlbi) => ("milan", &[]),
        // Westmere has 8 cores in 2 sockets; 32 CPUs are 8 such sockets.
        Some(Arch::X86_64) => ("westmere", &["sockets=8"]),
        None => panic!("unknown policy {policy}"),
    }
}

/// Returns the strict run of `workload` with `sets` on `cpus` CPUs of
/// `policy`'s machine, under `config` (a seed and its settings).
pub fn spec(policy: &str, workload: &str, cpus: usize, sets: &[&str], config: (u64, &[&str])) -> RunSpec {
    let (machine, extra) = machine(policy);
    let (seed, config) = config;
    RunSpec {
        machine: machine.into(),
        cpus,
        policy: policy.into(),
        workload: workload.into(),
        sets: sets.iter().chain(extra).chain(COMMON).chain(config).map(|s| s.to_string()).collect(),
        seed,
        strict: true,
    }
}
