//! `tlbkit bench`: the simulator's and the checker's own speed. Three timings
//! share the command: the fixed workload ([`sim`]), the scale workloads at each
//! CPU count ([`scale`], with `--cpus`) and the checker's standard bounds
//! ([`check`], with `--check`).

pub mod check;
pub mod scale;
pub mod sim;

use super::Format;
use clap::Args;

/// `tlbkit bench`'s flags.
#[derive(Args)]
pub struct BenchArgs {
    /// CPU counts to time the scale workloads at, comma-separated or repeated
    /// (e.g. 32,256,1024,4096; each 1 to 4096).
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    cpus: Vec<String>,
    /// With --cpus: time only this workload (repeatable; default mprotect_threaded
    /// and fileserver).
    #[arg(long = "workload")]
    workloads: Vec<String>,
    /// With --cpus: the policy (an arm64 one; default arm64-linux). With --check:
    /// the one policy to check (default the seeds' nine), or `all`: every real
    /// policy, the seeds' nine and the seven added after them.
    #[arg(long)]
    policy: Option<String>,
    /// Time the checker instead: the exhaustive check of the seeds' nine policies
    /// at the standard bounds (2 CPUs, 3 address spaces of 1 page, 4 ASIDs on arm64
    /// / 4 PCIDs per CPU on FreeBSD x86 / 6 PCID slots on Linux x86, 6 operations),
    /// each in a child process, with states, seconds and peak memory.
    #[arg(long)]
    check: bool,
    /// With --check: pages per address space (default 1, the standard bounds; 2
    /// lets flushes of one address space overlap, and takes far longer).
    #[arg(long)]
    pages: Option<usize>,
    /// With --check: stop a check that runs longer than this many seconds (and
    /// say so in its row).
    #[arg(long, value_name = "SECONDS")]
    limit_s: Option<u64>,
    /// With --check: worker threads per check (default: the check's own, one
    /// per core).
    #[arg(long)]
    jobs: Option<usize>,
    /// With --cpus: a workload or machine parameter, key=value (repeatable),
    /// overriding the bench's own (iters=200, ops=500).
    #[arg(long = "set")]
    sets: Vec<String>,
    /// Without --cpus or --check: runs of the fixed workload (default 5); with
    /// --compare-with, invocations of each build (default 5).
    #[arg(long)]
    runs: Option<usize>,
    /// Without --cpus or --check: also time another tlbkit build's `bench`
    /// (e.g. an older revision's target/release/tlbkit), invoking the two in
    /// turn, and print the ratio of translations per second (this / other)
    /// with its 95% confidence interval (ministat's rule).
    #[arg(long, value_name = "BINARY")]
    compare_with: Option<std::path::PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
}

/// Runs `tlbkit bench`: the timing its flags choose; returns the exit code.
pub fn bench(a: BenchArgs) -> Result<u8, String> {
    let BenchArgs { cpus, workloads, policy, check, pages, limit_s, jobs, sets, runs, compare_with, format } = a;
    if (check || !cpus.is_empty()) && (runs.is_some() || compare_with.is_some()) {
        return Err("--runs and --compare-with time the fixed workload: give them without --cpus and \
                    --check, e.g. tlbkit bench --compare-with old/tlbkit"
            .into());
    }
    if check {
        if !cpus.is_empty() || !workloads.is_empty() || !sets.is_empty() {
            return Err("--cpus, --workload and --set time the simulator, not the checker: give \
                        tlbkit bench --check [--policy P] [--limit-s SECONDS]"
                .into());
        }
        return check::run(policy.as_slice(), pages, jobs, limit_s, format);
    }
    if pages.is_some() {
        return Err("--pages applies only with --check, e.g. tlbkit bench --check --pages 2".into());
    }
    if jobs.is_some() {
        return Err("--jobs applies only with --check, e.g. tlbkit bench --check --jobs 2".into());
    }
    if limit_s.is_some() {
        return Err("--limit-s applies only with --check, e.g. tlbkit bench --check --limit-s 600".into());
    }
    if cpus.is_empty() {
        if !workloads.is_empty() || policy.is_some() || !sets.is_empty() {
            return Err("--workload, --policy and --set apply only with --cpus (--policy also with \
                        --check), e.g. \
                        tlbkit bench --cpus 32,4096 --workload fileserver"
                .into());
        }
        match compare_with {
            Some(other) => sim::compare_with(&other, runs.unwrap_or(sim::DEFAULT_ROUNDS), format),
            None => sim::bench(runs.unwrap_or(sim::DEFAULT_RUNS), format),
        }
    } else {
        scale::run(&cpus, &workloads, policy.as_deref(), &sets, format)
    }
}
