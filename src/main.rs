//! `tlbkit`: measure and verify TLB-management policies.
//!
//! Subcommands (their names, flags and JSON fields are a contract other tools use):
//! `list`, `run`, `reproduce`, `bench`, `check`, `replay`, `compare`, `sweep`,
//! `trace import`, `trace dump`, `plot`, `report`. Exit codes: 0 success, 2 bad input, 3 violations found.

mod bench_check;
mod bench_cmd;
mod checkcmd;
mod compare_cmd;
mod list_cmd;
mod plot_cmd;
mod png;
mod progress;
mod sweep_cmd;
mod table;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use progress::Unit;
use std::process::ExitCode;
use table::{Align, Table};
use tlbkit_lab::claims::{self, CLAIMS};
use tlbkit_sim::run::{
    bench_scale, run, scale_specs, RunOutput, RunSpec, ScaleRow, MAX_CPUS, SCALE_MACHINE, SCALE_POLICY,
};

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

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
}

#[derive(Subcommand)]
enum Cmd {
    /// List machines, policies, workloads and the properties the oracle checks;
    /// with a kind, describe each in detail (parameters, costs, units).
    List {
        /// Describe one kind in detail.
        #[arg(value_enum)]
        what: Option<list_cmd::What>,
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
    },
    /// Run a workload under a policy on a simulated machine.
    #[command(after_help = "Every workload's parameters (default, range, meaning): tlbkit list workloads\n\
                            Machines, their cores and costs, and the machine and kernel parameters: tlbkit list \
                            machines\nWhat each result and metric means, and its unit: tlbkit list metrics")]
    Run {
        #[arg(long)]
        machine: String,
        #[arg(long, default_value_t = 1)]
        cpus: usize,
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
    },
    /// Run every seed claim tlbkit models and compare with the seed's ratio.
    Reproduce {
        /// Only the claim with this id.
        #[arg(long)]
        only: Option<String>,
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
        /// Also write the table as an HTML page, with one forest plot of every claim
        /// (simulated and seed ratios, the verdict's tolerance band, a line at 1).
        #[arg(long, value_name = "FILE")]
        html: Option<std::path::PathBuf>,
    },
    /// Measure the simulator's own speed: on a fixed workload (runs, mean ± σ,
    /// min … max; --compare-with times another build side by side), or with
    /// --cpus, on scale workloads on the altra preset at each CPU count.
    Bench {
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
    },
    /// Explore interleavings and speculative TLB fills of a policy on a small machine
    /// and report any stale translation with a replayable counterexample (exit 3).
    Check(checkcmd::CheckArgs),
    /// Re-run a counterexample from the token `tlbkit check` printed.
    Replay {
        token: String,
        /// Show every event of every step of the counterexample, not only the ones
        /// that matter (root writes, invalidations, PTE changes, the policy's decisions).
        #[arg(long)]
        verbose: bool,
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
    },
    /// Run a workload under several policies with many seeds and compare one figure
    /// with Student's t, as ministat does: every policy against the first.
    Compare(compare_cmd::CompareArgs),
    /// Run every point of a grid described by a TOML file, one JSON line per run
    /// appended to a results file; run it again to resume.
    Sweep(sweep_cmd::SweepArgs),
    /// Draw one figure of a sweep's results file against one of its fields, as
    /// SVG or PNG: mean per point, min-max error bars.
    Plot(plot_cmd::PlotArgs),
    /// Write one self-contained HTML page of charts and ministat tables for a
    /// sweep's results file.
    Report(plot_cmd::ReportArgs),
    /// Print a shell completion script for tlbkit (e.g. `tlbkit completions bash >
    /// /etc/bash_completion.d/tlbkit`).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print tlbkit's man page (roff), generated from its command-line definition
    /// (e.g. `tlbkit man > tlbkit.1; man ./tlbkit.1`).
    Man,
    /// Work with traces of real programs (see crates/sim/src/trace).
    Trace {
        #[command(subcommand)]
        cmd: TraceCmd,
    },
}

#[derive(Subcommand)]
enum TraceCmd {
    /// Convert valgrind lackey output, and strace -f output of the same run, into a
    /// trace that `--workload trace --set file=TRACE` replays.
    Import {
        /// The log of `valgrind --tool=lackey --trace-mem=yes --log-file=FILE` (with
        /// --trace-syscalls=yes when --strace is given; --trace-sched=yes to give
        /// each thread its own references).
        #[arg(long)]
        lackey: std::path::PathBuf,
        /// The log of `strace -f -tt -o FILE` run around that valgrind.
        #[arg(long)]
        strace: Option<std::path::PathBuf>,
        /// The trace file to write (through a temporary file and a rename).
        #[arg(short = 'o', long = "output")]
        output: std::path::PathBuf,
        /// Keep only the count of instruction fetches, not the code pages they touch.
        #[arg(long)]
        no_ifetch: bool,
    },
    /// Print a trace as text, one record a line.
    Dump { trace: std::path::PathBuf },
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

fn dispatch(cmd: Cmd) -> Result<u8, String> {
    match cmd {
        Cmd::List { what, format } => list_cmd::list(what, format),
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
        Cmd::Run { machine, cpus, policy, workload, sets, seed, strict, format } => {
            let spec = RunSpec { machine, cpus, policy, workload, sets, seed, strict };
            let spinner = progress::spinner();
            spinner.set_message(format!("running {} on {}", spec.workload, spec.machine));
            let out = run(&spec);
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
        Cmd::Reproduce { only, format, html } => reproduce(only, format, html),
        Cmd::Check(args) => checkcmd::check(args),
        Cmd::Replay { token, verbose, format } => checkcmd::replay(&token, format == Format::Json, verbose),
        Cmd::Compare(args) => compare_cmd::compare(args),
        Cmd::Sweep(args) => sweep_cmd::sweep(args),
        Cmd::Plot(args) => plot_cmd::plot(args),
        Cmd::Report(args) => plot_cmd::report(args),
        Cmd::Trace { cmd: TraceCmd::Import { lackey, strace, output, no_ifetch } } => {
            plot_cmd::check_writable(&output, "-o", false)?;
            let opts = tlbkit_lab::trace::import::Options { ifetch: !no_ifetch };
            let bar = progress::bar(0, Unit::Bytes);
            bar.set_message(format!("of {}", lackey.display()));
            let report =
                tlbkit_lab::trace::import::import_file(&lackey, strace.as_deref(), &output, opts, |read, size| {
                    bar.set_length(size);
                    bar.set_position(read);
                });
            bar.finish_and_clear();
            println!("{}", report?);
            Ok(0)
        }
        Cmd::Trace { cmd: TraceCmd::Dump { trace } } => {
            let t = tlbkit_sim::trace::Trace::read_file(&trace)?;
            t.dump(&mut std::io::BufWriter::new(std::io::stdout().lock())).map_err(|e| e.to_string())?;
            Ok(0)
        }
        Cmd::Bench { cpus, workloads, policy, check, pages, limit_s, jobs, sets, runs, compare_with, format } => {
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
                return bench_check::run(policy.as_slice(), pages, jobs, limit_s, format);
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
                    Some(other) => bench_cmd::compare_with(&other, runs.unwrap_or(bench_cmd::DEFAULT_ROUNDS), format),
                    None => bench_cmd::bench(runs.unwrap_or(bench_cmd::DEFAULT_RUNS), format),
                }
            } else {
                bench_cpus(&cpus, &workloads, policy.as_deref(), &sets, format)
            }
        }
    }
}

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

fn reproduce(only: Option<String>, format: Format, html: Option<std::path::PathBuf>) -> Result<u8, String> {
    if let Some(path) = &html {
        plot_cmd::check_writable(path, "--html", false)?;
    }
    let selected: Vec<_> = CLAIMS.iter().filter(|c| only.as_deref().is_none_or(|o| o == c.id)).collect();
    if selected.is_empty() {
        let ids: Vec<&str> = CLAIMS.iter().map(|c| c.id).collect();
        return Err(format!("unknown claim '{}'; valid claims: {}", only.unwrap_or_default(), ids.join(", ")));
    }
    let bar = progress::bar(selected.iter().map(|c| c.runs() as u64).sum(), Unit::Runs);
    let mut results = Vec::new();
    for c in selected {
        bar.set_message(c.id);
        results.push(claims::check(c, 1, || bar.inc(1))?);
    }
    bar.finish_and_clear();
    if let Some(path) = html {
        plot_cmd::write_atomically(&path, tlbkit_lab::plot::html::claims_page(&results).as_bytes())?;
    }
    if format == Format::Json {
        let doc = serde_json::json!({ "claims": results });
        println!("{}", serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?);
        return Ok(0);
    }
    use Align::{Left, Right};
    let mut t = Table::new(&[Left, Left, Left, Left, Right, Right, Right, Right, Left]);
    t.row(["claim", "seed", "baseline", "variant", "sim base", "sim var", "seed ratio", "sim ratio", "verdict"]);
    let figures = |base: f64, var: f64, seed_ratio: f64, sim_ratio: f64| {
        [base, var, seed_ratio, sim_ratio].map(|x| format!("{x:.4}"))
    };
    for r in &results {
        // A claim with several variants prints one row per variant.
        for v in &r.variants {
            let [b, var, seed_ratio, sim_ratio] = figures(r.sim_baseline, v.sim_variant, v.seed_ratio, v.sim_ratio);
            let verdict = v.verdict_with_note();
            t.row([&r.id, &r.seed, &r.baseline, &v.name, &b, &var, &seed_ratio, &sim_ratio, &verdict]);
        }
        if r.variants.is_empty() {
            let [b, var, seed_ratio, sim_ratio] = figures(r.sim_baseline, r.sim_variant, r.seed_ratio, r.sim_ratio);
            t.row([&r.id, &r.seed, &r.baseline, &r.variant, &b, &var, &seed_ratio, &sim_ratio, &r.verdict]);
        }
        for n in &r.notes {
            t.note(n.clone());
        }
    }
    print!("{}", t.render());
    Ok(0)
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

fn bench_cpus(
    values: &[String],
    workloads: &[String],
    policy: Option<&str>,
    sets: &[String],
    format: Format,
) -> Result<u8, String> {
    let cpus = cpu_counts(values)?;
    let policy = policy.unwrap_or(SCALE_POLICY);
    let specs = scale_specs(&cpus, workloads, policy, sets)?;
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
