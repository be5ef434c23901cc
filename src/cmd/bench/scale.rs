//! `tlbkit bench scale`: the simulator's speed at scale, on the scale workloads
//! on the altra preset at each CPU count given (the runs and their timing are
//! `tlbkit_sim::run::bench_scale`).

use super::Format;
use crate::error::CliError;
use crate::progress::{self, Unit};
use crate::table::{Align, Table};
use clap::Args;
use tlbkit_sim::run::{bench_scale, scale_specs, ScaleRow, MAX_CPUS, SCALE_MACHINE, SCALE_POLICY};

/// `tlbkit bench scale`'s flags.
#[derive(Args)]
pub struct ScaleArgs {
    /// CPU counts to time the scale workloads at, comma-separated or repeated
    /// (e.g. 32,256,1024,4096; each 1 to 4096).
    #[arg(long, required = true, value_delimiter = ',', allow_hyphen_values = true)]
    pub cpus: Vec<String>,
    /// Time only this workload (repeatable; default mprotect_threaded and
    /// fileserver).
    #[arg(long = "workload")]
    pub workloads: Vec<String>,
    /// The policy (an arm64 one; default arm64-linux).
    #[arg(long)]
    pub policy: Option<String>,
    /// A workload or machine parameter, key=value (repeatable), overriding the
    /// bench's own (iters=200, ops=500).
    #[arg(long = "set")]
    pub sets: Vec<String>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

/// Parses `--cpus` values: whole numbers from 1 to [`MAX_CPUS`].
fn cpu_counts(values: &[String]) -> Result<Vec<usize>, String> {
    values
        .iter()
        .map(|v| match v.trim().parse::<usize>() {
            Ok(n) if (1..=MAX_CPUS).contains(&n) => Ok(n),
            Ok(n) => Err(format!("--cpus {n} is out of range: give CPU counts from 1 to {MAX_CPUS}")),
            Err(_) => Err(format!(
                "--cpus '{v}' is not a CPU count: give whole numbers from 1 to {MAX_CPUS}, e.g. --cpus 32,256,1024,4096"
            )),
        })
        .collect()
}

/// Runs `tlbkit bench scale`: the scale workloads at each CPU count given;
/// returns the exit code.
pub fn run(a: ScaleArgs) -> Result<u8, CliError> {
    let ScaleArgs { cpus, workloads, policy, sets, format } = a;
    let cpus = cpu_counts(&cpus)?;
    let policy = policy.as_deref().unwrap_or(SCALE_POLICY);
    let specs = scale_specs(&cpus, &workloads, policy, &sets)?;
    let bar = progress::bar(specs.len() as u64, Unit::Runs);
    let mut started = 0;
    let rows = bench_scale(&specs, |s| {
        bar.set_position(started);
        bar.set_message(format!("{} at {} CPUs", s.workload, s.cpus));
        started += 1;
    });
    bar.finish_and_clear();
    let rows = rows?;
    if format == Format::Json {
        let doc = serde_json::json!({
            "machine": SCALE_MACHINE,
            "policy": policy,
            "host_cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
            "runs": rows,
        });
        println!("{}", serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?);
        return Ok(0);
    }
    let host = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "machine {SCALE_MACHINE}, policy {policy}; main phase timed (setup excluded); where a run takes under \
         1 s, the median of as many runs as take 1 s (at least 3); host {host} CPU(s)"
    );
    use Align::{Left, Right};
    let mut t = Table::new(&[Left, Right, Right, Right, Right, Right, Right, Right, Right]);
    t.row([
        "workload",
        "cpus",
        "events",
        "translations",
        "wall_s",
        "events/s",
        "translations/s",
        "vs first",
        "peak MiB",
    ]);
    let mut order: Vec<&ScaleRow> = rows.iter().collect();
    order.sort_by_key(|r| rows.iter().position(|f| f.workload == r.workload));
    for r in order {
        let peak = r.peak_rss_mib.map_or("-".to_string(), |m| format!("{m:.0}"));
        t.row([
            r.workload.clone(),
            r.cpus.to_string(),
            r.events.to_string(),
            r.translations.to_string(),
            format!("{:.3}", r.wall_s),
            format!("{:.0}", r.events_per_sec),
            format!("{:.0}", r.translations_per_sec),
            format!("{:.3}", r.speed_ratio),
            peak,
        ]);
    }
    print!("{}", t.render());
    let mut shown = Vec::new();
    for r in &rows {
        if !shown.contains(&&r.workload) {
            shown.push(&r.workload);
            println!("{}: {}", r.workload, r.command);
        }
    }
    Ok(0)
}
