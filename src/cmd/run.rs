//! `tlbkit run`: one workload under one policy on one simulated machine, printed
//! as a table of results and metrics or as JSON (the run itself is
//! `tlbkit_sim::run`).

use super::Format;
use crate::error::CliError;
use crate::progress;
use crate::table::{Align, Table};
use clap::Args;
use tlbkit_sim::run::{run as simulate, RunOutput, RunSpec};

/// `tlbkit run`'s flags.
#[derive(Args)]
pub struct RunArgs {
    /// A preset (tlbkit list machines), host, or a machine file (PATH.toml).
    #[arg(long)]
    machine: String,
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    cpus: i64,
    #[arg(long)]
    policy: String,
    #[arg(long)]
    workload: String,
    /// A machine, kernel or workload parameter: key=value (repeatable).
    #[arg(long = "set")]
    sets: Vec<String>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Also check that no CPU holds a stale entry under its running tag.
    #[arg(long)]
    strict: bool,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
}

/// Runs `tlbkit run`; returns the exit code (3 if the run found violations).
pub fn run(a: RunArgs) -> Result<u8, CliError> {
    let RunArgs { machine, cpus, policy, workload, sets, seed, strict, format } = a;
    let cpus = sim_cpus(cpus)?;
    let spec = RunSpec { machine, cpus, policy, workload, sets, seed, strict };
    let spinner = progress::spinner();
    spinner.set_message(format!("running {} on {}", spec.workload, spec.machine));
    let out = simulate(&spec);
    spinner.finish_and_clear();
    let out = out?;
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&out).map_err(|e| e.to_string())?),
        Format::Table => print_run(&out),
    }
    if out.violations_total > 0 {
        eprintln!("tlbkit: {} violation(s); replay with: {}", out.violations_total, out.replay);
        Ok(3)
    } else {
        Ok(0)
    }
}

/// Prints a run as a table: what ran, its parameters, its results and metrics,
/// and its violations with the command that replays them.
fn print_run(out: &RunOutput) {
    println!(
        "{} on {} ({} CPU{}), policy {}, seed {}",
        out.workload,
        out.machine,
        out.cpus,
        if out.cpus == 1 { "" } else { "s" },
        out.policy,
        out.seed
    );
    let params: Vec<String> =
        out.params.iter().map(|(k, v)| format!("{k}={}", v.to_string().trim_matches('"'))).collect();
    println!("params: {}", params.join(" "));
    // One table, so that results and metrics line up with each other.
    let mut t = Table::new(&[Align::Left, Align::Right]).indented("  ");
    t.text("result:");
    for (k, v) in &out.result {
        t.row([k.clone(), format!("{v:.4}")]);
    }
    t.text("metrics:");
    let m = serde_json::to_value(&out.metrics).unwrap_or_default();
    if let Some(obj) = m.as_object() {
        for (k, v) in obj {
            let s = match v.as_f64() {
                Some(f) if v.is_f64() => format!("{f:.1}"),
                _ => v.to_string(),
            };
            t.row([k.clone(), s]);
        }
    }
    print!("{}", t.render());
    if out.violations_total == 0 {
        println!("violations: none");
    } else {
        println!("violations: {} (first {} shown)", out.violations_total, out.violations.len());
        for v in &out.violations {
            println!("  {v}");
        }
        println!("replay: {}", out.replay);
    }
}

/// Returns `--cpus` as the simulator takes it; a negative count gets the
/// simulator's range message (clap would take it for a flag).
pub fn sim_cpus(cpus: i64) -> Result<usize, CliError> {
    usize::try_from(cpus)
        .map_err(|_| CliError::from(tlbkit_sim::Error::CpusRange { cpus, max: tlbkit_sim::run::MAX_CPUS }))
}
