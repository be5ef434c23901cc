//! The kernel a run's settings come from: the policy's release where the
//! policy is one release's code, the machine's otherwise; and page-table
//! isolation on by default where that kernel turns it on (a Meltdown-affected
//! CPU, Linux v4.15 or later) for the policies that model it. The run's
//! parameters name both.

use crate::common::{run_clean, spec};
use tlbkit_sim::run::{RunOutput, RunSpec};

fn one(machine: &str, policy: &str, sets: &[&str]) -> RunOutput {
    let sets = ["pages=4", "iters=4"].iter().chain(sets);
    run_clean(&RunSpec { seed: 3, ..spec(machine, 4, policy, "flush_range", sets) })
}

#[test]
fn a_policy_of_one_release_runs_under_that_release_and_others_under_the_machines() {
    // hsw48's measurements come from a 4.9 kernel: no PTI, CFS.
    let pcid = one("hsw48", "x86-linux-pcid", &[]);
    assert_eq!((pcid.params["kernel"].as_str(), pcid.params["pti"].as_str()), (Some("linux-4.9"), Some("off")));
    for (policy, kernel) in [("x86-linux-512", "linux-5.12"), ("x86-linux-513", "linux-5.13")] {
        let out = one("hsw48", policy, &[]);
        assert_eq!(out.params["kernel"], kernel, "{policy}");
        // Haswell-EP is Meltdown-affected, and these kernels isolate by default.
        assert_eq!(out.params["pti"], "on", "{policy}");
        assert_eq!(out.params["sched"], "cfs", "{policy}");
    }
    // v4.10 had no PTI, and LATR takes no switch for it.
    let latr = one("haswell2s", "x86-latr", &[]);
    assert_eq!(latr.params["kernel"], "linux-4.10");
    assert!(!latr.params.contains_key("pti"));
    // An arm64 policy of no one release: the machine's kernel.
    let arm = one("altra", "arm64-linux", &[]);
    assert_eq!(arm.params["kernel"], "linux-6.9");
}

#[test]
fn pti_is_on_by_default_only_on_meltdown_cpus_and_is_overridden_by_the_switch() {
    // skx8170 (Skylake-SP, Linux 5.10): on; icx8358 (Ice Lake, RDCL_NO): off.
    assert_eq!(one("skx8170", "x86-linux-pcid", &[]).params["pti"], "on");
    assert_eq!(one("icx8358", "x86-linux-513", &[]).params["pti"], "off");
    // On by default is the run with pti=on; pti=off is the run without it.
    let default = one("skx8170", "x86-linux-513", &[]);
    let on = one("skx8170", "x86-linux-513", &["pti=on"]);
    let off = one("skx8170", "x86-linux-513", &["pti=off"]);
    assert_eq!(default.result, on.result);
    assert_eq!(off.params["pti"], "off");
    // skx8170 has INVPCID: the user PCID's pages cost one invalidation each more.
    assert!(on.metrics.local_invalidations > off.metrics.local_invalidations);
    assert!(on.result["cycles_per_call"] > off.result["cycles_per_call"]);
}
