//! `tlbkit`: measure and verify TLB-management policies.
//!
//! Subcommands (their names, flags and JSON fields are a contract other tools use):
//! `list`, `run`, `reproduce`, `calibrate`, `bench sim|scale|check`, `check`, `replay`,
//! `litmus`, `compare`, `sweep`, `trace import`, `trace dump`, `plot`, `report`; hidden,
//! `shard-node` (a node `bench sharded --processes` starts). Each is a
//! module of `cmd/`, with its flags and its body; this file holds the command
//! line's outline, the dispatch and the exit codes: 0 success, 2 bad input, 3
//! violations found.

mod cmd;
mod error;
mod files;
mod png;
mod progress;
mod table;

use crate::error::CliError;
use clap::{CommandFactory, Parser, Subcommand};
use std::process::ExitCode;

/// The checker keeps each execution's allocations in an arena (stable addresses
/// for state hashing); outside the checker this is the system allocator.
#[global_allocator]
static ALLOC: tlbkit_check::arena::CheckAlloc = tlbkit_check::arena::CheckAlloc;

#[derive(Parser)]
#[command(name = "tlbkit", version, about = "Measure and verify operating-system TLB management policies")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// List machines, policies, workloads and the properties the oracle checks;
    /// with a kind, describe each in detail (parameters, costs, units).
    List(cmd::list::ListArgs),
    /// Run a workload under a policy on a simulated machine.
    #[command(after_help = "Every workload's parameters (default, range, meaning): tlbkit list workloads\n\
                            Machines, their cores and costs, and the machine and kernel parameters: tlbkit list \
                            machines\nWhat each result and metric means, and its unit: tlbkit list metrics")]
    Run(cmd::run::RunArgs),
    /// Run every origin claim tlbkit models and compare with the origin's ratio.
    Reproduce(cmd::reproduce::ReproduceArgs),
    /// Run the validation corpus (measurements published by the mechanisms'
    /// authors and the kernel's test robots) and judge each figure: ratios in
    /// band or not, curve shapes, absolute baselines; exit 1 when an accuracy
    /// target is not met.
    Validate(cmd::validate::ValidateArgs),
    /// Measure this host with microbenchmarks, run the same in the model of it
    /// and print both; save the host's profile for `--machine host` (Linux).
    Calibrate(cmd::calibrate::CalibrateArgs),
    /// Measure tlbkit's own speed: the simulator on a fixed workload (`bench sim`,
    /// which `bench` alone runs) or at scale (`bench scale`), or the checker
    /// (`bench check`).
    Bench(cmd::bench::BenchArgs),
    /// Explore interleavings and speculative TLB fills of a policy on a small machine
    /// and report any stale translation with a replayable counterexample (exit 3).
    ///
    /// With no shape flag, a portfolio of shapes (1 to 3 CPUs, swarm menus, the
    /// architecture's store buffers); any of --quick, --deep, --cpus, --mms,
    /// --pages, --asids, --ops, --mode, --memory, --menu, --teardown, --jobs
    /// makes it one shape.
    Check(cmd::check::CheckArgs),
    /// Re-run a counterexample from the token `tlbkit check` printed.
    Replay(cmd::check::ReplayArgs),
    /// Run Arm VMSA system litmus tests (isla's .litmus.toml) under tlbkit's model
    /// of translation and compare each verdict with the published one.
    Litmus(cmd::litmus::LitmusArgs),
    /// Run a workload under several policies with many seeds and compare one figure
    /// with Student's t, as ministat does: every policy against the first.
    Compare(cmd::compare::CompareArgs),
    /// Run every point of a grid described by a TOML file, one JSON line per run
    /// appended to a results file; run it again to resume.
    Sweep(cmd::sweep::SweepArgs),
    /// Draw one figure of a sweep's results file against one of its fields, as
    /// SVG or PNG: mean per point, min-max error bars.
    Plot(cmd::plot::PlotArgs),
    /// Write one self-contained HTML page of charts and ministat tables for a
    /// sweep's results file.
    Report(cmd::plot::ReportArgs),
    /// Print a shell completion script for tlbkit (e.g. `tlbkit completions bash >
    /// /etc/bash_completion.d/tlbkit`).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print tlbkit's man page (roff), generated from its command-line definition
    /// (e.g. `tlbkit man > tlbkit.1; man ./tlbkit.1`).
    Man,
    /// Work with traces of real programs (the guide's chapter: docs/guide/src/traces.md).
    #[command(subcommand)]
    Trace(cmd::trace::TraceCmd),
    /// One node of `tlbkit bench sharded --processes`, which starts it and
    /// speaks to it through its pipes (not for use by hand).
    #[command(hide = true)]
    ShardNode(cmd::bench::sharded::NodeArgs),
}

fn main() -> ExitCode {
    // Output piped into `head` or a pager that quits: end quietly, as Unix tools
    // do, instead of a panic on the failed write (Rust ignores SIGPIPE by default).
    // SAFETY: restoring a signal's default disposition before any thread starts.
    #[cfg(unix)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match dispatch(cli.cmd) {
        Ok(code) => ExitCode::from(code),
        Err(msg) => {
            eprintln!("tlbkit: error: {msg}");
            ExitCode::from(2)
        }
    }
}

/// Runs one command; returns its exit code, or the message of a bad input.
fn dispatch(cmd: Cmd) -> Result<u8, CliError> {
    match cmd {
        Cmd::List(a) => cmd::list::list(a),
        Cmd::Run(a) => cmd::run::run(a),
        Cmd::Reproduce(a) => cmd::reproduce::reproduce(a),
        Cmd::Validate(a) => cmd::validate::validate(a),
        Cmd::Calibrate(a) => cmd::calibrate::calibrate(a),
        Cmd::Bench(a) => cmd::bench::bench(a),
        Cmd::Check(a) => cmd::check::check(a),
        Cmd::Replay(a) => cmd::check::replay(a),
        Cmd::Litmus(a) => cmd::litmus::litmus(a),
        Cmd::Compare(a) => cmd::compare::compare(a),
        Cmd::Sweep(a) => cmd::sweep::sweep(a),
        Cmd::Plot(a) => cmd::plot::plot(a),
        Cmd::Report(a) => cmd::plot::report(a),
        Cmd::Trace(c) => cmd::trace::trace(c),
        Cmd::ShardNode(a) => cmd::bench::sharded::node(a),
        // Both print the command line itself, so they stay beside its definition.
        Cmd::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "tlbkit", &mut std::io::stdout());
            Ok(0)
        }
        Cmd::Man => {
            let mut out = Vec::new();
            clap_mangen::Man::new(Cli::command()).render(&mut out).map_err(|e| format!("man page: {e}"))?;
            std::io::Write::write_all(&mut std::io::stdout(), &out).map_err(|e| e.to_string())?;
            Ok(0)
        }
    }
}
