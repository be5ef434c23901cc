//! `tlbkit compare`: its flags and output (the work is `tlbkit_lab::compare`).

use crate::error::CliError;
use crate::progress::{self, Unit};
use clap::{Args, ValueEnum};
use tlbkit_lab::batch::default_jobs;
use tlbkit_lab::compare::CompareSpec;

/// How `compare` prints.
#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum CompareFormat {
    /// ministat's table.
    Table,
    /// One JSON document.
    Json,
    /// A header and one row per policy.
    Csv,
}

/// Runs a workload under several policies with many seeds and compares one
/// figure with Student's t, as ministat does: every policy against the first.
#[derive(Args)]
pub struct CompareArgs {
    /// A preset (tlbkit list machines), host, or a machine file (PATH.toml).
    #[arg(long)]
    machine: String,
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    cpus: i64,
    #[arg(long)]
    workload: String,
    /// A policy (repeat: at least two; the first is the reference).
    #[arg(long = "policy", required = true)]
    policies: Vec<String>,
    /// Runs per policy, 2 to 10,000, with seeds --seed, --seed + 1, ...
    #[arg(long, default_value_t = 10)]
    runs: usize,
    /// The first seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The figure compared: one of the workload's results or a metric (default:
    /// the workload's headline result).
    #[arg(long)]
    metric: Option<String>,
    /// A machine, kernel or workload parameter for every run: key=value (repeatable).
    #[arg(long = "set")]
    sets: Vec<String>,
    /// Host threads running simulations (default: the host's cores); the output
    /// does not depend on it.
    #[arg(long)]
    jobs: Option<usize>,
    #[arg(long, value_enum, default_value = "table")]
    format: CompareFormat,
}

/// Runs `tlbkit compare`; returns the exit code (3 if a run found violations).
pub fn compare(a: CompareArgs) -> Result<u8, CliError> {
    let spec = CompareSpec {
        machine: a.machine,
        cpus: super::run::sim_cpus(a.cpus)?,
        workload: a.workload,
        policies: a.policies,
        runs: a.runs,
        first_seed: a.seed,
        metric: a.metric,
        sets: a.sets,
    };
    let jobs = match a.jobs {
        Some(0) => return Err("--jobs 0: give at least one thread".into()),
        Some(n) => n,
        None => default_jobs(),
    };
    let bar = progress::bar(0, Unit::Runs);
    let out = spec.run(jobs, |finished, all| {
        bar.set_length(all as u64);
        bar.set_position(finished as u64);
    });
    bar.finish_and_clear();
    let out = out?;
    match a.format {
        CompareFormat::Table => print!("{}", out.table()),
        CompareFormat::Json => {
            println!("{}", serde_json::to_string_pretty(&out.json()).map_err(|e| e.to_string())?)
        }
        CompareFormat::Csv => print!("{}", out.csv()),
    }
    let constant: Vec<&str> = out.policies.iter().filter(|p| p.deterministic).map(|p| p.policy.as_str()).collect();
    if !constant.is_empty() {
        eprintln!(
            "tlbkit: note: every seed gave the same {} under {} ({}): nothing it depends on draws from the seed \
             (--set jitter=0.02 spreads compute and system-call times by 2%)",
            out.metric,
            constant.join(", "),
            tlbkit_lab::compare::DETERMINISTIC
        );
    }
    match &out.first_violation {
        None => Ok(0),
        Some(replay) => {
            eprintln!(
                "tlbkit: {} violation(s); replay the first run that found one with: {replay}",
                out.violations_total()
            );
            Ok(3)
        }
    }
}
