//! `tlbkit bench`: tlbkit's own speed, as three subcommands that each take
//! only their own flags: `bench sim` times the simulator on a fixed workload
//! ([`sim`]), `bench scale` on the scale workloads at each CPU count
//! ([`scale`]), `bench check` times the checker at the standard bounds
//! ([`check`]), and `bench sharded` the search with its visited set sharded
//! among nodes that `check --ray` runs, against one process's workers
//! ([`sharded`]).
//!
//! The spellings from before the subcommands keep working, because other tools
//! and older builds use them: `tlbkit bench` with no subcommand is `bench sim`
//! (with `--runs`, `--compare-with` and `--format`; `bench sim --compare-with`
//! invokes the other build as `OTHER bench --format json`, which every build
//! understands), and `bench --cpus …` and `bench --check …` run `bench scale`
//! and `bench check` through flags hidden from `--help` ([`Legacy`]).

pub mod check;
pub mod scale;
pub mod sharded;
pub mod sim;

use super::Format;
use crate::error::CliError;
use clap::{ArgGroup, Args, Subcommand};

/// `tlbkit bench`'s flags: a subcommand, or `bench sim`'s flags for the
/// `bench sim` that `bench` alone runs.
#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    cmd: Option<BenchCmd>,
    #[command(flatten)]
    sim: sim::SimArgs,
    #[command(flatten)]
    legacy: Legacy,
}

/// `tlbkit bench`'s subcommands.
#[derive(Subcommand)]
enum BenchCmd {
    /// Time the simulator on a fixed workload (runs, mean ± σ, min … max), or
    /// with --compare-with, side by side with another build; `tlbkit bench` alone
    /// runs this.
    Sim(sim::SimArgs),
    /// Time the scale workloads on the altra preset at each CPU count given:
    /// events and translations per second, each count against the first, peak
    /// memory.
    Scale(scale::ScaleArgs),
    /// Time the checker: the exhaustive check of the origins' policies at the
    /// standard bounds (2 CPUs, 3 address spaces of 1 page, 4 ASIDs on arm64 / 4
    /// PCIDs per CPU on FreeBSD x86 / 6 PCID slots on Linux x86, 6 operations),
    /// each in a child process, with states, seconds and peak memory.
    Check(check::CheckArgs),
    /// Time the search with its visited set sharded among in-process nodes
    /// (each state one owner's; claims and answers between nodes, with an
    /// injected latency), against `check --jobs` with as many workers, at a
    /// policy's standard bounds: seconds, executions, traffic.
    Sharded(sharded::ShardedArgs),
}

/// The flags of `bench scale` and `bench check` as `bench` itself took them
/// before the subcommands (`bench --cpus 32,4096`, `bench --check --policy
/// all`), hidden from `--help`. clap refuses the combinations that mix the
/// three timings, as the subcommands do; what is given runs the subcommand's
/// own code.
#[derive(Args)]
#[command(group(ArgGroup::new("legacy_timing").args(["cpus", "check"])))]
struct Legacy {
    /// `bench scale --cpus`.
    #[arg(
        long,
        hide = true,
        value_delimiter = ',',
        allow_hyphen_values = true,
        conflicts_with_all = ["check", "runs", "compare_with"]
    )]
    cpus: Vec<String>,
    /// `bench scale --workload`.
    #[arg(long = "workload", hide = true, requires = "cpus")]
    workloads: Vec<String>,
    /// `bench scale --set`.
    #[arg(long = "set", hide = true, requires = "cpus")]
    sets: Vec<String>,
    /// `bench scale --policy` or `bench check --policy`.
    #[arg(long, hide = true, requires = "legacy_timing")]
    policy: Option<String>,
    /// `bench check`.
    #[arg(long, hide = true, conflicts_with_all = ["runs", "compare_with"])]
    check: bool,
    /// `bench check --pages`.
    #[arg(long, hide = true, requires = "check")]
    pages: Option<usize>,
    /// `bench check --jobs`.
    #[arg(long, hide = true, requires = "check")]
    jobs: Option<usize>,
    /// `bench check --limit-s`.
    #[arg(long, hide = true, value_name = "SECONDS", requires = "check")]
    limit_s: Option<u64>,
    /// `bench check --memory`.
    #[arg(long, hide = true, value_enum, requires = "check")]
    memory: Option<check::BenchMemory>,
}

/// Runs `tlbkit bench`: its subcommand, or the one its old flags spell (`bench
/// sim` when none); returns the exit code.
pub fn bench(a: BenchArgs) -> Result<u8, CliError> {
    match a.cmd {
        Some(BenchCmd::Sim(s)) => sim::run(s),
        Some(BenchCmd::Scale(s)) => scale::run(s),
        Some(BenchCmd::Check(c)) => check::run(c),
        Some(BenchCmd::Sharded(s)) => sharded::run(s),
        None => {
            let Legacy { cpus, workloads, sets, policy, check, pages, jobs, limit_s, memory } = a.legacy;
            let format = a.sim.format;
            if check {
                check::run(check::CheckArgs { policy, pages, jobs, limit_s, memory, format })
            } else if !cpus.is_empty() {
                scale::run(scale::ScaleArgs { cpus, workloads, policy, sets, format, compare_with: None, runs: None })
            } else {
                sim::run(a.sim)
            }
        }
    }
}
