//! What a seed varies by default (`crate::noise`): the tick's phase, IPI
//! delivery and wake-up latencies. Workloads that draw nothing else from the
//! seed (hackbench, will-it-scale started cold) give each seed its own result, and the
//! same seed the same output, byte for byte; `--set noise=off` gives every
//! seed the timing runs had before.

use tlbkit_sim::run::{run, RunOutput, RunSpec};

/// Runs `workload` with `sets` on 4 CPUs of `skx8170` under `x86-linux-613`
/// with `seed`.
fn output(workload: &str, sets: &[&str], seed: u64) -> RunOutput {
    let spec = RunSpec {
        machine: "skx8170".into(),
        cpus: 4,
        policy: "x86-linux-613".into(),
        workload: workload.into(),
        sets: sets.iter().map(|s| s.to_string()).collect(),
        seed,
        strict: false,
    };
    run(&spec).unwrap_or_else(|e| panic!("{}: {e}", spec.command()))
}

/// Returns the run's output as `tlbkit run --format json` serialises it.
fn json(out: &RunOutput) -> String {
    serde_json::to_string(out).unwrap()
}

/// Returns the run's result and metrics, which do not name the seed.
fn figures(out: &RunOutput) -> String {
    serde_json::to_string(&(&out.result, &out.metrics)).unwrap()
}

const HACKBENCH: (&str, &[&str]) = ("hackbench", &["groups=2", "fds=5", "loops=20"]);
// Started cold: a warm start (`steady=1`) also draws each task's page in its lap.
const TLB_FLUSH1: (&str, &[&str]) = ("will_it_scale_tlb_flush1", &["iters=32", "pages=16", "steady=0"]);

#[test]
fn hackbench_and_will_it_scale_differ_by_seed_and_repeat_for_one() {
    for (w, sets) in [HACKBENCH, TLB_FLUSH1] {
        let one = output(w, sets, 1);
        assert_eq!(json(&one), json(&output(w, sets, 1)), "{w}: seed 1 twice");
        let two = output(w, sets, 2);
        assert_ne!(one.result, two.result, "{w}: seeds 1 and 2");
        assert_ne!(one.metrics.sim_time_ns, two.metrics.sim_time_ns, "{w}: seeds 1 and 2");
    }
}

#[test]
fn without_noise_every_seed_times_the_same() {
    for (w, sets) in [HACKBENCH, TLB_FLUSH1] {
        // Speculative fills, the one other draw of these runs, off too.
        let off: Vec<&str> = sets.iter().copied().chain(["noise=off", "spec_rate=0"]).collect();
        assert_eq!(figures(&output(w, &off, 1)), figures(&output(w, &off, 2)), "{w}");
    }
}
