//! `tlbkit sweep`: its flags, progress bar and summary (the work is
//! `tlbkit_lab::sweep`).

use crate::error::CliError;
use crate::progress::{self, Unit};
use clap::Args;
use std::path::PathBuf;
use tlbkit_lab::batch::default_jobs;
use tlbkit_lab::sweep::schema::Sweep;
use tlbkit_lab::sweep::{self, Event};

/// Runs every point of a grid described by a TOML file, appending one JSON line
/// per finished run to a results file; running it again runs only what is missing.
#[derive(Args)]
pub struct SweepArgs {
    /// The experiment file (TOML; see the guide's "Sweeps", docs/guide/src/sweeps.md).
    file: PathBuf,
    /// The results file (default: the file's `results`, else its name with .jsonl).
    #[arg(long)]
    results: Option<PathBuf>,
    /// Host threads running simulations (default: the host's cores).
    #[arg(long)]
    jobs: Option<usize>,
}

/// Runs `tlbkit sweep`; returns the exit code (3 if a recorded run of the grid
/// found violations; failed runs are an error).
pub fn sweep(a: SweepArgs) -> Result<u8, CliError> {
    let jobs = match a.jobs {
        Some(0) => return Err("--jobs 0: give at least one thread".into()),
        Some(n) => n,
        None => default_jobs(),
    };
    let s = Sweep::load(&a.file)?;
    let results = a.results.unwrap_or_else(|| s.results_path(&a.file));
    crate::files::check_writable(&results, "--results", true)?;
    let bar = progress::bar(0, Unit::Runs);
    let report = sweep::run(&s, &results, jobs, |ev| match ev {
        Event::Start { total, already, torn_bytes } => {
            if torn_bytes > 0 {
                eprintln!(
                    "tlbkit sweep: dropped the torn last line ({torn_bytes} bytes) of {}; its run is made again",
                    results.display()
                );
            }
            bar.set_length(total as u64);
            bar.set_position(already as u64);
            bar.reset_eta();
        }
        Event::Ran { error, .. } => {
            if let Some(e) = error {
                bar.suspend(|| eprintln!("tlbkit sweep: a run failed: {e}"));
            }
            bar.inc(1);
        }
    })?;
    bar.finish_and_clear();
    println!("{}", report.summary(&a.file.display().to_string()));
    if let Some(e) = report.failure() {
        return Err(e.into());
    }
    if let Some(first) = report.violating.first() {
        eprintln!(
            "tlbkit: {} run(s) of the grid found violations; replay the first with: {first}",
            report.violating.len()
        );
        return Ok(3);
    }
    Ok(0)
}
