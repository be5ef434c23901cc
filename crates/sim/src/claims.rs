//! The seed claims `tlbkit reproduce` checks: a baseline and a variant policy on
//! the seed's workload and machine, the seed's ratio (variant / baseline) and the
//! simulated one, measured afresh every time, and a verdict.
//!
//! Verdict rule: `reproduced` when the simulated ratio has the seed's direction and
//! `|ln(sim) - ln(seed)| <= max(0.05, 0.35 * |ln(seed)|)`; `direction-only` when
//! only the direction matches; otherwise `not-reproduced`.

use crate::run::{run, RunSpec};
use serde::Serialize;

/// A claim from a seed document.
#[derive(Clone, Debug)]
pub struct Claim {
    /// Identifier, e.g. `seed000-latctx`.
    pub id: &'static str,
    /// The seed document.
    pub seed: &'static str,
    /// What is compared.
    pub description: &'static str,
    /// Machine preset.
    pub machine: &'static str,
    /// CPUs.
    pub cpus: usize,
    /// Workload.
    pub workload: &'static str,
    /// Workload settings.
    pub sets: &'static [&'static str],
    /// Baseline policy.
    pub baseline: &'static str,
    /// Variant policy.
    pub variant: &'static str,
    /// The result key compared.
    pub metric: &'static str,
    /// The seed's baseline figure.
    pub seed_baseline: f64,
    /// The seed's variant figure.
    pub seed_variant: f64,
}

/// Every claim.
pub const CLAIMS: &[Claim] = &[Claim {
    id: "seed000-latctx",
    seed: "000",
    description: "lmbench lat_ctx 20 procs 0 KB on a Cortex-A72, 1 CPU: us per switch",
    machine: "cortex-a72",
    cpus: 1,
    workload: "lat_ctx",
    sets: &["procs=20", "size_kb=0"],
    baseline: "arm64-noasid",
    variant: "arm64-freebsd-asid",
    metric: "us_per_switch",
    seed_baseline: 3.584,
    seed_variant: 2.908,
}];

/// The outcome of one claim.
#[derive(Clone, Debug, Serialize)]
pub struct ClaimResult {
    /// Claim id.
    pub id: String,
    /// Seed document.
    pub seed: String,
    /// Description.
    pub description: String,
    /// Baseline policy.
    pub baseline: String,
    /// Variant policy.
    pub variant: String,
    /// Seed's variant / baseline.
    pub seed_ratio: f64,
    /// Simulated variant / baseline.
    pub sim_ratio: f64,
    /// Simulated baseline value.
    pub sim_baseline: f64,
    /// Simulated variant value.
    pub sim_variant: f64,
    /// `reproduced`, `direction-only` or `not-reproduced`.
    pub verdict: String,
}

/// Returns the verdict for a simulated ratio against the seed's.
pub fn verdict(seed: f64, sim: f64) -> &'static str {
    let dir = |r: f64| (r - 1.0).signum();
    if sim <= 0.0 || !sim.is_finite() || dir(seed) != dir(sim) {
        return "not-reproduced";
    }
    let tol = (0.35 * seed.ln().abs()).max(0.05);
    if (sim.ln() - seed.ln()).abs() <= tol {
        "reproduced"
    } else {
        "direction-only"
    }
}

/// Runs one claim.
pub fn check(c: &Claim, seed: u64) -> Result<ClaimResult, String> {
    let spec = |policy: &str| RunSpec {
        machine: c.machine.into(),
        cpus: c.cpus,
        policy: policy.into(),
        workload: c.workload.into(),
        sets: c.sets.iter().map(|s| s.to_string()).collect(),
        seed,
        strict: false,
    };
    let value = |policy: &str| -> Result<f64, String> {
        let out = run(&spec(policy))?;
        if out.violations_total > 0 {
            return Err(format!(
                "{}: {} violation(s) under {policy}; run `{}`",
                c.id, out.violations_total, out.replay
            ));
        }
        out.result.get(c.metric).copied().ok_or_else(|| format!("{}: no result {}", c.id, c.metric))
    };
    let b = value(c.baseline)?;
    let v = value(c.variant)?;
    let seed_ratio = c.seed_variant / c.seed_baseline;
    let sim_ratio = v / b;
    Ok(ClaimResult {
        id: c.id.into(),
        seed: c.seed.into(),
        description: c.description.into(),
        baseline: c.baseline.into(),
        variant: c.variant.into(),
        seed_ratio,
        sim_ratio,
        sim_baseline: b,
        sim_variant: v,
        verdict: verdict(seed_ratio, sim_ratio).into(),
    })
}

#[cfg(test)]
mod tests {
    use super::verdict;

    #[test]
    fn verdict_rule() {
        let seed = 2.908 / 3.584;
        assert_eq!(verdict(seed, seed), "reproduced");
        assert_eq!(verdict(seed, 0.95), "direction-only");
        assert_eq!(verdict(seed, 1.05), "not-reproduced");
        // The 0.05 floor applies to ratios near 1.
        assert_eq!(verdict(0.99, 0.96), "reproduced");
    }
}
