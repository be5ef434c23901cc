//! Fitting the host's costs: each of eight costs from the one microbenchmark
//! that isolates it, in an order in which each fit uses only costs fitted
//! before it.
//!
//! A model figure is (nearly) affine in the cost being fitted, so each fit is
//! a secant search: the figure at 0 and at 1,000 cycles give the slope, the
//! host's figure the cost, and up to two more steps correct what is not
//! affine (a lock's queue, a rounding). A cost never goes below 0: where the
//! model at 0 already exceeds the host, the cost stays 0 and the row shows
//! the model above the host.

use super::{model_figures, Figures};
use crate::Error;
use tlbkit_sim::preset::host::{preset, HostProfile};
use tlbkit_sim::preset::Kernel;
use tlbkit_sim::sim::MEM_BW_SUSTAINED;

/// A cost fitted to a microbenchmark.
#[derive(Clone, Copy, Debug)]
pub struct Fitted {
    /// The microbenchmark.
    pub bench: &'static str,
    /// The cost (a field of the preset's `Costs`, or `mem_bw_gbs`).
    pub cost: &'static str,
}

/// The fitted costs, in the order they are fitted.
pub const FITTED: &[Fitted] = &[
    Fitted { bench: "null_syscall", cost: "syscall_body" },
    Fitted { bench: "zeroing_all", cost: "mem_bw_gbs" },
    Fitted { bench: "zeroing", cost: "page_copy" },
    Fitted { bench: "page_fault", cost: "fault_path" },
    Fitted { bench: "pipe_rw", cost: "pipe_op" },
    Fitted { bench: "pipe_switch", cost: "switch_path" },
    Fitted { bench: "line_pingpong", cost: "cacheline_transfer" },
    Fitted { bench: "atomic_hit", cost: "atomic_hit" },
];

/// The largest cost a fit may give, in cycles: far above any kernel path a
/// microbenchmark here isolates.
const MOST: f64 = 1e7;

/// Returns the policy the host's kernel runs: the registry's policy of its
/// architecture nearest its version.
pub fn policy_for(p: &HostProfile) -> &'static str {
    let arm = p.arch == "aarch64" || p.arch == "arm64";
    if arm {
        return "arm64-linux";
    }
    match p.kernel() {
        Some(Kernel::Linux(a, b)) if (a, b) >= (6, 15) && p.broadcast_tlbi => "x86-linux-invlpgb",
        Some(Kernel::Linux(a, b)) if (a, b) >= (6, 14) => "x86-linux-lazytrim",
        Some(Kernel::Linux(a, b)) if (a, b) < (4, 14) => "x86-linux-410",
        _ => "x86-linux-613",
    }
}

/// Returns `profile` with the costs of [`FITTED`] fitted to the host's
/// figures `host` (each cost whose microbenchmark `host` lacks is left as
/// it is); `all_cpus` is how many CPUs `zeroing_all` used.
pub fn fit(mut profile: HostProfile, host: &Figures, all_cpus: usize) -> Result<HostProfile, Error> {
    let policy = policy_for(&profile);
    let packages = all_cpus.div_ceil(profile.cpus_per_package.max(1)).max(1);
    for f in FITTED {
        let Some(&want) = host.get(f.bench) else { continue };
        match f.cost {
            // The bandwidth every CPU zeroing at once reaches is the sustained
            // share of each package's peak.
            "mem_bw_gbs" => profile.costs.mem_bw_gbs = want / packages as f64 / MEM_BW_SUSTAINED,
            // One CPU's rate: a page in `page_copy` cycles.
            "page_copy" => profile.costs.page_copy = (4096.0 * profile.freq_ghz / want).round().max(1.0) as u64,
            cost => {
                let figure = |p: &HostProfile| -> Result<f64, Error> {
                    let machine = preset(p).map_err(tlbkit_sim::Error::from)?;
                    Ok(model_figures(&machine, policy, &[f.bench], all_cpus)?[f.bench])
                };
                let at = |x: f64| -> Result<f64, Error> {
                    let mut p = profile.clone();
                    set_cost(&mut p, cost, x.round() as u64);
                    figure(&p)
                };
                let x = secant(&at, want)?;
                set_cost(&mut profile, cost, x.round() as u64);
            }
        }
    }
    Ok(profile)
}

/// Returns the cost `x` in `0..=MOST` at which `at(x)` is nearest `want`,
/// by up to three secant steps from 0 and 1,000.
fn secant(at: &dyn Fn(f64) -> Result<f64, Error>, want: f64) -> Result<f64, Error> {
    let at_zero = at(0.0)?;
    if at_zero >= want {
        // The model charges more than the host takes even without this cost.
        return Ok(0.0);
    }
    let (mut x0, mut f0) = (0.0, at_zero);
    let (mut x1, mut f1) = (1000.0, at(1000.0)?);
    for _ in 0..3 {
        let slope = (f1 - f0) / (x1 - x0);
        if !(slope > 0.0 && slope.is_finite()) {
            break;
        }
        let x = (x1 + (want - f1) / slope).clamp(0.0, MOST).round();
        if x == x1 {
            break;
        }
        (x0, f0) = (x1, f1);
        (x1, f1) = (x, at(x)?);
        if (f1 - want).abs() <= want * 0.002 {
            break;
        }
    }
    // The nearer of the last two points.
    Ok(if (f0 - want).abs() < (f1 - want).abs() { x0 } else { x1 })
}

/// Sets the fitted cost `name` of `p` to `x`.
fn set_cost(p: &mut HostProfile, name: &str, x: u64) {
    let c = &mut p.costs;
    match name {
        "syscall_body" => c.syscall_body = x,
        "fault_path" => c.fault_path = x,
        "pipe_op" => c.pipe_op = x,
        "switch_path" => c.switch_path = x,
        "cacheline_transfer" => c.cacheline_transfer = x,
        "atomic_hit" => c.atomic_hit = Some(x),
        _ => unreachable!("FITTED names only these costs"),
    }
}
