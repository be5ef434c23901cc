//! `tlbkit bench scale`: the simulator's speed at scale, on the scale workloads
//! on the altra preset at each CPU count given (the runs and their timing are
//! `tlbkit_sim::run::bench_scale`); with `--compare-with BINARY`, each run's
//! wall time against another build's, the two builds' `bench scale` invoked in
//! turn, so that a slowdown at 4,096 CPUs shows as a ratio measured in one
//! session on one host.

use super::{sim, Format};
use crate::error::CliError;
use crate::progress::{self, Unit};
use crate::table::{Align, Table};
use clap::Args;
use std::path::{Path, PathBuf};
use tlbkit_lab::stats::{self, Summary};
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
    /// Another tlbkit build's binary: time the same runs with both, in turn,
    /// and give each run's wall time relative to the other build's.
    #[arg(long, value_name = "BINARY")]
    pub compare_with: Option<PathBuf>,
    /// With --compare-with, invocations of each build (default 3, at least 2).
    #[arg(long, value_name = "N", requires = "compare_with")]
    pub runs: Option<usize>,
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
    let ScaleArgs { cpus, workloads, policy, sets, format, compare_with, runs } = a;
    sim::check_runs(runs)?;
    let cpus = cpu_counts(&cpus)?;
    let policy = policy.as_deref().unwrap_or(SCALE_POLICY);
    let specs = scale_specs(&cpus, &workloads, policy, &sets)?;
    if let Some(other) = compare_with {
        let mut args = vec!["--cpus".to_string(), cpus.iter().map(usize::to_string).collect::<Vec<_>>().join(",")];
        for w in &workloads {
            args.extend(["--workload".to_string(), w.clone()]);
        }
        args.extend(["--policy".to_string(), policy.to_string()]);
        for s in &sets {
            args.extend(["--set".to_string(), s.clone()]);
        }
        return compare_builds(&other, &args, specs.len(), runs.unwrap_or(3), format);
    }
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

/// Runs `binary bench scale ARGS --format json` and returns each run's
/// (workload, CPUs, wall seconds).
fn invoke(binary: &Path, args: &[String]) -> Result<Vec<(String, usize, f64)>, String> {
    let who = binary.display();
    let out = std::process::Command::new(binary)
        .args(["bench", "scale", "--format", "json"])
        .args(args)
        .output()
        .map_err(|e| format!("--compare-with {who}: cannot run it: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "--compare-with {who}: its bench scale failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("--compare-with {who}: its bench scale printed no JSON ({e}); is it a tlbkit binary?"))?;
    let runs = doc["runs"].as_array().ok_or_else(|| format!("--compare-with {who}: its bench scale gave no runs"))?;
    runs.iter()
        .map(|r| match (r["workload"].as_str(), r["cpus"].as_u64(), r["wall_s"].as_f64()) {
            (Some(w), Some(c), Some(t)) => Ok((w.to_string(), c as usize, t)),
            _ => Err(format!("--compare-with {who}: a run without workload, cpus and wall_s: {r}")),
        })
        .collect()
}

/// `tlbkit bench scale ... --compare-with BINARY [--runs N]`: `rounds`
/// invocations of this build's `bench scale` and of `other`'s with the same
/// `args`, in turn (which goes first alternates), then per run both builds'
/// mean wall time and this one's relative to the other's (below 1: faster),
/// with its 95% confidence interval.
fn compare_builds(other: &Path, args: &[String], n: usize, rounds: usize, format: Format) -> Result<u8, CliError> {
    let me = sim::this_and_other(other, rounds)?;
    // Per run: (workload, cpus, this build's wall times, the other's).
    let mut times: Vec<(String, usize, Vec<f64>, Vec<f64>)> = Vec::new();
    let bar = progress::bar(2 * rounds as u64, Unit::Runs);
    for r in 0..rounds {
        for mine in [r % 2 == 0, r % 2 != 0] {
            bar.set_message(if mine { "this build".to_string() } else { other.display().to_string() });
            let got = invoke(if mine { &me } else { other }, args)?;
            if got.len() != n {
                return Err(format!(
                    "--compare-with {}: it timed {} runs where this build times {n}",
                    other.display(),
                    got.len()
                )
                .into());
            }
            for (i, (w, c, t)) in got.into_iter().enumerate() {
                if times.len() <= i {
                    times.push((w.clone(), c, Vec::new(), Vec::new()));
                }
                let row = &mut times[i];
                if (row.0.as_str(), row.1) != (w.as_str(), c) {
                    return Err(format!(
                        "--compare-with {}: its runs are not this build's ({w} at {c} CPUs)",
                        other.display()
                    )
                    .into());
                }
                if mine {
                    row.2.push(t)
                } else {
                    row.3.push(t)
                }
            }
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let mut docs = Vec::new();
    let mut t = Table::new(&[Align::Left, Align::Right, Align::Right, Align::Right, Align::Right, Align::Left]);
    t.row(["workload", "cpus", "this wall_s", "other wall_s", "this / other", ""].map(String::from));
    let mut noisy = None;
    for (w, c, mine, theirs) in &times {
        let (a, b) = (Summary::of(mine).expect("rounds > 0"), Summary::of(theirs).expect("rounds > 0"));
        let cmp = stats::compare(&a, &b);
        let ratio = a.avg / b.avg;
        let half = cmp.relative_half_width_pct / 100.0;
        noisy = noisy.or_else(|| sim::noise_warning(&a)).or_else(|| sim::noise_warning(&b));
        let verdict = match (cmp.proven, ratio > 1.0) {
            (false, _) => "no difference proven",
            (true, true) => "slower, proven",
            (true, false) => "faster, proven",
        };
        t.row([
            w.clone(),
            c.to_string(),
            format!("{:.3}", a.avg),
            format!("{:.3}", b.avg),
            format!("{ratio:.2} ± {half:.2}"),
            verdict.to_string(),
        ]);
        docs.push(serde_json::json!({
            "workload": w, "cpus": c, "this_wall_s": mine, "other_wall_s": theirs,
            "ratio": ratio, "ratio_low": ratio - half, "ratio_high": ratio + half, "proven": cmp.proven,
        }));
    }
    if format == Format::Json {
        let doc = serde_json::json!({
            "other": other.display().to_string(),
            "invocations": rounds,
            "confidence_pct": stats::CONFIDENCE,
            "runs": docs,
            "noisy": noisy.is_some(),
        });
        println!("{}", serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?);
        return Ok(0);
    }
    println!(
        "wall seconds of the timed phase, {rounds} invocations of each build's `bench scale` in turn; this / \
         other below 1 is faster ({:.0}% confidence, Student's t, as ministat)",
        stats::CONFIDENCE
    );
    print!("{}", t.render());
    if let Some(w) = noisy {
        println!("{w}");
    }
    Ok(0)
}
