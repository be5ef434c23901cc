//! `--machine host` runs every registered workload, on an x86 host's profile
//! and on an arm64 one's, with the policy its kernel would run.
//!
//! The profiles are written here (not measured: `tlbkit calibrate`'s own
//! tests measure), so the runs are the same on every machine.

#[path = "common/small.rs"]
mod small;

use small::SMALL;
use tlbkit_sim::preset::host::{HostCosts, HostProfile, PROFILE_ENV};
use tlbkit_sim::run::{run, RunSpec};
use tlbkit_sim::workload::WORKLOADS;

fn profile(arch: &str, model: &str) -> HostProfile {
    HostProfile {
        hostname: "test".into(),
        model: model.into(),
        arch: arch.into(),
        kernel_release: "6.18.2".into(),
        cpus: 4,
        cpus_per_package: 4,
        cpus_per_l3: 4,
        threads_per_core: 1,
        numa_nodes: 1,
        freq_ghz: 2.3,
        broadcast_tlbi: arch == "aarch64",
        costs: HostCosts {
            syscall_body: 300,
            page_copy: 600,
            mem_bw_gbs: 14.0,
            fault_path: 4500,
            pipe_op: 380,
            switch_path: 2900,
            cacheline_transfer: 200,
            atomic_hit: None,
        },
    }
}

#[test]
fn every_workload_runs_on_the_host_machine_of_either_architecture() {
    let dir =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tlbkit-host-machine-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("host.json");
    // The only test of this file: nothing else reads the variable meanwhile.
    std::env::set_var(PROFILE_ENV, &file);
    for (arch, model, policy) in
        [("x86_64", "Intel(R) Xeon(R)", "x86-linux-lazytrim"), ("aarch64", "0x41", "arm64-linux")]
    {
        std::fs::write(&file, serde_json::to_string(&profile(arch, model)).unwrap()).unwrap();
        for &(workload, sets) in SMALL {
            let spec = RunSpec {
                machine: "host".into(),
                cpus: 2,
                policy: policy.into(),
                workload: workload.into(),
                sets: sets.iter().map(|s| s.to_string()).collect(),
                seed: 1,
                strict: false,
            };
            let out = run(&spec).unwrap_or_else(|e| panic!("{}: {e}", spec.command()));
            let headline = WORKLOADS.iter().find(|w| w.name == workload).unwrap().results[0];
            let v = out.result[headline];
            assert!(v.is_finite() && v > 0.0, "{}: {headline} = {v}", spec.command());
            assert_eq!(out.violations_total, 0, "{}", spec.command());
        }
    }
    std::fs::remove_file(&file).unwrap();
    let e = run(&RunSpec {
        machine: "host".into(),
        cpus: 1,
        policy: "x86-linux-613".into(),
        workload: "microbench".into(),
        sets: vec![],
        seed: 1,
        strict: false,
    })
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("no calibration of this host at ") && e.contains("tlbkit calibrate"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
