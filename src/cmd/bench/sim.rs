//! `tlbkit bench sim` (and `tlbkit bench` alone): the simulator's speed on one
//! fixed workload, reported as hyperfine reports a command (runs, mean ± σ,
//! min … max, a warning when the spread suggests a loaded host), and with
//! `--compare-with BINARY` side by side with another build: both builds' `bench`
//! invoked in turn, alternating which goes first, and their ratio with its
//! confidence interval by ministat's rule (Student's t on the two sets of
//! invocations, pooled standard deviation, the half-width relative to the other
//! build's mean: [`tlbkit_lab::stats::compare`]).

use super::Format;
use crate::error::CliError;
use crate::progress;
use crate::table::{Align, Table};
use clap::Args;
use std::path::{Path, PathBuf};
use tlbkit_lab::stats::{self, grouped, Summary};
use tlbkit_sim::run::{BenchResult, RunSpec};

/// `tlbkit bench sim`'s flags, which `tlbkit bench` alone takes too.
#[derive(Args)]
pub struct SimArgs {
    /// Runs of the fixed workload (default 5); with --compare-with, invocations
    /// of each build (default 5); at most 1,000.
    #[arg(long)]
    runs: Option<usize>,
    /// Also time another tlbkit build's `bench` (e.g. an older revision's
    /// target/release/tlbkit), invoking the two in turn, and print the ratio of
    /// translations per second (this / other) with its 95% confidence interval
    /// (ministat's rule).
    #[arg(long, value_name = "BINARY")]
    compare_with: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

/// Runs `tlbkit bench sim`: the fixed workload's runs in this process, or with
/// `--compare-with`, both builds' side by side; returns the exit code.
pub fn run(a: SimArgs) -> Result<u8, CliError> {
    check_runs(a.runs)?;
    match a.compare_with {
        Some(other) => compare_with(&other, a.runs.unwrap_or(DEFAULT_ROUNDS), a.format),
        None => bench(a.runs.unwrap_or(DEFAULT_RUNS), a.format),
    }
}

/// The fixed workload: lat_ctx on 4 CPUs of a Cortex-A72, 4 processes summing
/// 1 MB each, 10,000 rounds, under `arm64-freebsd-asid`.
pub fn spec() -> RunSpec {
    RunSpec {
        machine: "cortex-a72".into(),
        cpus: 4,
        policy: "arm64-freebsd-asid".into(),
        workload: "lat_ctx".into(),
        sets: vec!["procs=4".into(), "size_kb=1024".into(), "rounds=10000".into()],
        seed: 1,
        strict: false,
    }
}

/// The most `--runs` a bench takes (runs of a few seconds each, or
/// invocations of two builds): far past what a mean and its spread need, and
/// few enough that the timings it keeps fit in memory.
pub(super) const MAX_RUNS: usize = 1000;

/// Refuses `--runs` past [`MAX_RUNS`].
pub(super) fn check_runs(runs: Option<usize>) -> Result<(), CliError> {
    match runs {
        Some(n) if n > MAX_RUNS => Err(format!("--runs {n}: give at most {MAX_RUNS}").into()),
        _ => Ok(()),
    }
}

/// Runs of a plain `tlbkit bench sim` unless `--runs` says otherwise.
const DEFAULT_RUNS: usize = 5;

/// Invocations of each build that `--compare-with` makes unless `--runs` says
/// otherwise.
const DEFAULT_ROUNDS: usize = 5;

/// The runs a build's `bench` makes for one invocation of `--compare-with`: as
/// many as a `bench` before `--runs` made (it reported their median).
const RUNS_PER_INVOCATION: usize = 3;

/// Relative standard deviation of the runs above which the host looks loaded.
const NOISY_CV: f64 = 0.05;

/// Slowest run's time over the fastest's above which the host looks loaded.
const NOISY_SPREAD: f64 = 1.25;

/// Returns the warning to print when `s`'s spread suggests a loaded host.
pub(super) fn noise_warning(s: &Summary) -> Option<String> {
    if s.n < 2 {
        return None;
    }
    let cv = s.stddev() / s.avg;
    let spread = s.max / s.min;
    (cv > NOISY_CV || spread > NOISY_SPREAD).then(|| {
        format!(
            "Warning: the runs differ by up to {:.0}% (σ = {:.1}% of the mean): the host looks loaded (other \
             processes, frequency changes), so these figures are noisy. Rerun on a quiet host, or with more --runs.",
            (spread - 1.0) * 100.0,
            cv * 100.0
        )
    })
}

/// `tlbkit bench sim [--runs N]`: `runs` runs of [`spec`] in this process.
fn bench(runs: usize, format: Format) -> Result<u8, CliError> {
    if runs == 0 {
        return Err("--runs 0 times nothing: give 1 or more, e.g. --runs 10".into());
    }
    let spec = spec();
    let spinner = progress::spinner();
    let mut results: Vec<BenchResult> = Vec::with_capacity(runs);
    for i in 0..runs {
        spinner.set_message(format!("timing {} (run {} of {runs})", spec.workload, i + 1));
        match tlbkit_sim::run::bench(&spec, 1) {
            Ok(b) => results.push(b),
            Err(e) => {
                spinner.finish_and_clear();
                return Err(e.into());
            }
        }
    }
    spinner.finish_and_clear();
    let tps: Vec<f64> = results.iter().map(|b| b.translations_per_sec).collect();
    let wall: Vec<f64> = results.iter().map(|b| b.wall_s).collect();
    let t = Summary::of(&tps).expect("at least one run");
    let w = Summary::of(&wall).expect("at least one run");
    // The median run by translations per second, as `bench` always reported.
    let mut order: Vec<&BenchResult> = results.iter().collect();
    order.sort_by(|a, b| a.translations_per_sec.total_cmp(&b.translations_per_sec));
    let median = order[order.len() / 2];
    let warning = noise_warning(&w);
    if format == Format::Json {
        let doc = serde_json::json!({
            "translations_per_sec": median.translations_per_sec,
            "events_per_sec": median.events_per_sec,
            "wall_s": median.wall_s,
            "runs": runs,
            "translations_per_sec_mean": t.avg,
            "translations_per_sec_stddev": if t.n > 1 { t.stddev() } else { 0.0 },
            "translations_per_sec_min": t.min,
            "translations_per_sec_max": t.max,
            "wall_s_runs": wall,
            "noisy": warning.is_some(),
        });
        println!("{}", serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?);
        return Ok(0);
    }
    let sd = |s: &Summary| if s.n > 1 { s.stddev() } else { 0.0 };
    println!("workload: {}", spec.command());
    println!("  Time (mean ± σ):     {:.3} s ± {:.3} s    [{runs} runs]", w.avg, sd(&w));
    println!("  Range (min … max):   {:.3} s … {:.3} s", w.min, w.max);
    println!("  Translations/s (mean ± σ):   {} ± {}", grouped(t.avg), grouped(sd(&t)));
    println!("  Range (min … max):           {} … {}", grouped(t.min), grouped(t.max));
    let mut tab = Table::new(&[Align::Left, Align::Right]);
    tab.row(["translations_per_sec".to_string(), format!("{:.0}", median.translations_per_sec)]);
    tab.row(["events_per_sec".to_string(), format!("{:.0}", median.events_per_sec)]);
    tab.row(["wall_s".to_string(), format!("{:.3}", median.wall_s)]);
    println!("median run:");
    print!("{}", tab.render());
    if let Some(w) = warning {
        println!("{w}");
    }
    Ok(0)
}

/// Runs `binary bench --format json` (with `args`) and returns the
/// `translations_per_sec` it reports. `bench` with no subcommand is `bench sim`
/// in every build, those from before the subcommands included, so the other
/// build is invoked so.
fn invoke(binary: &Path, args: &[&str]) -> Result<f64, String> {
    let out = std::process::Command::new(binary)
        .arg("bench")
        .args(["--format", "json"])
        .args(args)
        .output()
        .map_err(|e| format!("--compare-with {}: cannot run it: {e}", binary.display()))?;
    if !out.status.success() {
        return Err(format!(
            "--compare-with {}: its bench failed ({}): {}",
            binary.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| {
        format!("--compare-with {}: its bench printed no JSON ({e}); is it a tlbkit binary?", binary.display())
    })?;
    doc["translations_per_sec"]
        .as_f64()
        .ok_or_else(|| format!("--compare-with {}: its bench reported no translations_per_sec", binary.display()))
}

/// Checks a `--compare-with` request of `rounds` invocations of `other`, and
/// returns this build's own binary, which is invoked in turn with it.
pub(super) fn this_and_other(other: &Path, rounds: usize) -> Result<PathBuf, CliError> {
    if rounds < 2 {
        return Err("--compare-with needs --runs 2 or more (a confidence interval needs a spread)".into());
    }
    if !other.is_file() {
        return Err(
            format!("--compare-with {}: no such file; give another tlbkit build's binary", other.display()).into()
        );
    }
    Ok(std::env::current_exe().map_err(|e| format!("cannot find this tlbkit's own binary: {e}"))?)
}

/// `tlbkit bench sim --compare-with BINARY [--runs N]`: `rounds` invocations of this
/// build's `bench` and of `other`'s, in turn (which goes first alternates from
/// round to round, so that a drift of the host's load falls on both), each
/// reporting the median of its runs; then both builds' figures and the ratio of
/// this one's mean to the other's with its 95% confidence interval.
fn compare_with(other: &Path, rounds: usize, format: Format) -> Result<u8, CliError> {
    let me = this_and_other(other, rounds)?;
    let runs = RUNS_PER_INVOCATION.to_string();
    let (mut this, mut that) = (Vec::new(), Vec::new());
    let bar = progress::bar(2 * rounds as u64, progress::Unit::Runs);
    for r in 0..rounds {
        for first in [r % 2 == 0, r % 2 != 0] {
            if first {
                bar.set_message("this build");
                this.push(invoke(&me, &["--runs", &runs])?);
            } else {
                bar.set_message(other.display().to_string());
                that.push(invoke(other, &[])?);
            }
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let (a, b) = (Summary::of(&this).expect("rounds > 0"), Summary::of(&that).expect("rounds > 0"));
    let c = stats::compare(&a, &b);
    let ratio = a.avg / b.avg;
    let half = c.relative_half_width_pct / 100.0;
    let noisy = noise_warning(&a).or_else(|| noise_warning(&b));
    if format == Format::Json {
        let doc = serde_json::json!({
            "this": {"translations_per_sec_runs": this, "mean": a.avg, "stddev": a.stddev(), "min": a.min, "max": a.max},
            "other": {"binary": other.display().to_string(), "translations_per_sec_runs": that, "mean": b.avg,
                      "stddev": b.stddev(), "min": b.min, "max": b.max},
            "ratio": ratio,
            "ratio_low": ratio - half,
            "ratio_high": ratio + half,
            "confidence_pct": c.confidence,
            "proven": c.proven,
            "noisy": noisy.is_some(),
        });
        println!("{}", serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?);
        return Ok(0);
    }
    println!("workload: {}", spec().command());
    println!(
        "translations per second, {rounds} invocations of each build's `bench` in turn (each the median of \
         {RUNS_PER_INVOCATION} runs):"
    );
    let mut tab = Table::new(&[Align::Left, Align::Right, Align::Right, Align::Right, Align::Right]);
    tab.row(["build", "mean", "σ", "min", "max"].map(String::from));
    for (name, s) in [("this".to_string(), &a), (other.display().to_string(), &b)] {
        tab.row([name, grouped(s.avg), grouped(s.stddev()), grouped(s.min), grouped(s.max)]);
    }
    print!("{}", tab.render());
    println!(
        "ratio (this / other): {ratio:.2} ± {half:.2} ({:.0}% confidence, Student's t with pooled σ, as ministat); {}",
        c.confidence,
        if c.proven { "the difference is proven" } else { "no difference proven" }
    );
    if let Some(w) = noisy {
        println!("{w}");
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wide_spread_warns_and_a_tight_one_does_not() {
        let tight = Summary::of(&[1.00, 1.01, 0.99, 1.00]).unwrap();
        assert!(noise_warning(&tight).is_none());
        let wide = Summary::of(&[1.0, 1.4, 1.0, 1.0]).unwrap();
        assert!(noise_warning(&wide).unwrap().contains("loaded"));
        assert!(noise_warning(&Summary::of(&[3.0]).unwrap()).is_none());
    }
}
