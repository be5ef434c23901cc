//! `tlbkit bench sharded`: the search with its visited set sharded among
//! nodes, against one process's workers sharing one, on one machine.
//!
//! For each node count K it runs the check at a policy's standard bounds
//! with the visited set split among K in-process nodes
//! (`tlbkit_check::search::exhaustive_sharded`: each state has one owner; a
//! worker that reaches a state another node owns claims it and goes on as
//! if it were new, and the owner's answer narrows what it explores there),
//! `--jobs` workers in all, claims and answers delivered after
//! `--latency-us`; then the same check with `--jobs` workers sharing one
//! visited set. It prints the seconds and executions of both, the steps each
//! ran (not counting those a checkpoint put back: the work, where executions
//! count the starts), and what sharding sent: claims, the claims admitted
//! (labels left to explore), the visits pruned by what owners had said
//! (`known`), bytes per state, and the largest node's share of the states
//! (its share of the visited set); its JSON also gives the most claims one
//! worker had waiting for answers at once (`most_waiting`). The states must be the
//! same, or it fails.
//! With `--processes`, the largest node process's peak memory, against that
//! of one node process holding the whole search.
//!
//! With `--tcp` the nodes are those of `tlbkit check --ray`
//! (`tlbkit_check::run::shards`), each with its courier, joined over
//! loopback TCP in this process and driven by the Ray driver's rule
//! (`tlbkit_check::run::nodes::run_local`): the transport's cost without
//! Ray's. Only states, time, executions, steps and bytes are known there.
//! With `--processes` each of those nodes is a process of its own, this
//! binary's hidden `shard-node` command, driven through its pipes
//! (`tlbkit_check::run::piped`): K processes of `--jobs / K` workers, as a
//! cluster of K machines would run them, on one host.

use crate::error::CliError;
use crate::table::{Align, Table};
use clap::Args;
use std::time::{Duration, Instant};
use tlbkit_check::exec::steps_run;
use tlbkit_check::search::{Link, Traffic, MAX_NODES, SEND_EVERY};

/// `tlbkit bench sharded`'s flags.
#[derive(Args)]
pub struct ShardedArgs {
    /// The policy, checked at its standard bounds.
    #[arg(long, default_value = "arm64-linux")]
    pub policy: String,
    /// Node counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "2")]
    pub nodes: Vec<usize>,
    /// Workers in all, dealt round the nodes (at least one each), and the
    /// --jobs each sharded search is compared with (default: one per core).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// The time a batch of claims or answers takes to reach its node, in
    /// microseconds (at most 1,000,000).
    #[arg(long, default_value_t = 0)]
    pub latency_us: u64,
    /// The most claims a worker sends one node in a batch.
    #[arg(long, default_value_t = 256)]
    pub batch: usize,
    /// The executions a worker runs after a claim before it sends what it
    /// has (and, with --latency-us, until the oldest has waited that long).
    #[arg(long, default_value_t = SEND_EVERY)]
    pub every: u32,
    /// Join the nodes over loopback TCP, each with the courier a node of
    /// `tlbkit check --ray ADDRESS` has, driven by the
    /// Ray driver's rule, instead of in-process mailboxes (`--latency-us`,
    /// `--batch` and `--every` do not apply; the claims, admitted and known columns are
    /// left out).
    #[arg(long)]
    pub tcp: bool,
    /// With --tcp's couriers, each node a process of its own on this host,
    /// driven through its pipes, instead of all in this process (implies
    /// --tcp).
    #[arg(long)]
    pub processes: bool,
    #[arg(long, value_enum, default_value = "table")]
    pub format: super::Format,
}

/// One node count's figures.
struct Row {
    nodes: usize,
    /// Workers in all.
    workers: usize,
    states: u64,
    sharded_s: f64,
    sharded_executions: u64,
    sharded_steps: u64,
    /// What the in-process nodes sent (none over TCP).
    traffic: Option<Traffic>,
    /// Bytes the nodes sent each other.
    bytes: u64,
    /// Each node process's peak memory (empty unless `--processes`).
    peaks: Vec<Option<u64>>,
    jobs_s: f64,
    jobs_executions: u64,
    jobs_steps: u64,
}

/// The longest `--latency-us`: a second, more than any network between
/// machines adds, where an hour's latency would be a search that never ends.
const MAX_LATENCY_US: u64 = 1_000_000;

/// Bytes in a MiB.
const MIB: f64 = 1024.0 * 1024.0;

/// Runs `tlbkit bench sharded`.
pub fn run(mut a: ShardedArgs) -> Result<u8, CliError> {
    a.tcp |= a.processes;
    if a.nodes.is_empty() || a.nodes.iter().any(|&n| n == 0 || n > MAX_NODES) {
        return Err(format!("--nodes: give node counts from 1 to {MAX_NODES}, e.g. --nodes 2,4").into());
    }
    if a.batch == 0 {
        return Err("--batch 0: give the claims a batch holds, e.g. --batch 256".into());
    }
    if a.latency_us > MAX_LATENCY_US {
        let why = "a batch that waits longer only stretches the search";
        return Err(format!("--latency-us {}: at most {MAX_LATENCY_US} (a second): {why}", a.latency_us).into());
    }
    if a.every == 0 {
        return Err(format!("--every 0: give the executions between sends, e.g. --every {SEND_EVERY}").into());
    }
    let jobs = match a.jobs {
        Some(0) => return Err("--jobs 0: give the workers in all, e.g. --jobs 2".into()),
        Some(j) => j,
        None => std::thread::available_parallelism().map_or(1, usize::from),
    };
    let spec = super::check::standard_spec(&a.policy)?;
    // Over TCP each of n nodes has --jobs / n workers (at least one); in
    // process, --jobs are dealt round the nodes (at least one each).
    let per_node = |n: usize| (jobs / n).max(1);
    let workers = |n: usize| if a.tcp { n * per_node(n) } else { jobs.max(n) };
    let poll = Duration::from_millis(10);
    let link = Link { latency: Duration::from_micros(a.latency_us), batch: a.batch, every: a.every };
    let (t, steps) = (Instant::now(), steps_run());
    let local = tlbkit_check::run::check_exhaustive_jobs(&spec, jobs)?;
    let (jobs_s, jobs_steps) = (t.elapsed().as_secs_f64(), steps_run() - steps);
    // With --processes, one node of every worker, a process of its own: the
    // memory of the whole visited set, which each of n nodes should hold 1/n of.
    let one_peak = if a.processes {
        let command = |me| node_command(&spec, me, 1, jobs);
        tlbkit_check::run::piped::run_processes(&spec, 1, poll, command)?.peaks[0]
    } else {
        None
    };
    let mut rows = Vec::new();
    for &n in &a.nodes {
        let (t, steps) = (Instant::now(), steps_run());
        let (mut child_steps, mut peaks) = (0, Vec::new());
        let (report, traffic, bytes) = if a.processes {
            let command = |me| node_command(&spec, me, n, per_node(n));
            let c = tlbkit_check::run::piped::run_processes(&spec, n, poll, command)?;
            (child_steps, peaks) = (c.steps, c.peaks);
            (c.report, None, c.bytes)
        } else if a.tcp {
            let (report, bytes) = tlbkit_check::run::nodes::run_local(&spec, n, per_node(n), poll)?;
            (report, None, bytes)
        } else {
            let (report, traffic) = tlbkit_check::run::check_exhaustive_sharded(&spec, n, jobs, link)?;
            let bytes = traffic.bytes;
            (report, Some(traffic), bytes)
        };
        let (sharded_s, sharded_steps) = (t.elapsed().as_secs_f64(), steps_run() - steps + child_steps);
        if report.explored.states != local.explored.states
            || report.counterexample.is_some() != local.counterexample.is_some()
        {
            return Err(format!(
                "{n} nodes reached {} states, --jobs {jobs} {}: sharding lost or added states (a bug in tlbkit)",
                report.explored.states, local.explored.states
            )
            .into());
        }
        rows.push(Row {
            nodes: n,
            workers: workers(n),
            states: report.explored.states,
            sharded_s,
            sharded_executions: report.explored.executions,
            sharded_steps,
            traffic,
            bytes,
            peaks,
            jobs_s,
            jobs_executions: local.explored.executions,
            jobs_steps,
        });
    }
    print(&a, &rows, jobs, one_peak)
}

/// Prints the rows (a table, or JSON with `--format json`) for `jobs`
/// workers; `one_peak` is one node process's peak memory (`--processes`).
fn print(a: &ShardedArgs, rows: &[Row], jobs: usize, one_peak: Option<u64>) -> Result<u8, CliError> {
    let per_state = |r: &Row| r.bytes as f64 / r.states.max(1) as f64;
    // A figure of the in-process traffic, or "-" over TCP.
    let sent = |r: &Row, f: fn(&Traffic) -> String| r.traffic.as_ref().map_or_else(|| "-".into(), f);
    let largest = |r: &Row| {
        let most = r.traffic.as_ref().map(|t| t.states.iter().copied().max().unwrap_or(0));
        most.map_or_else(|| "-".into(), |m| format!("{:.1}%", 100.0 * m as f64 / r.states.max(1) as f64))
    };
    if a.format == super::Format::Json {
        let doc: Vec<_> = rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "policy": a.policy, "nodes": r.nodes, "workers": r.workers, "tcp": a.tcp,
                    "processes": a.processes,
                    "latency_us": a.latency_us, "batch": a.batch, "every": a.every, "states": r.states, "sharded_s": r.sharded_s,
                    "sharded_executions": r.sharded_executions, "sharded_steps": r.sharded_steps,
                    "claims": r.traffic.as_ref().map(|t| t.claims), "admitted": r.traffic.as_ref().map(|t| t.admitted),
                    "known": r.traffic.as_ref().map(|t| t.known), "batches": r.traffic.as_ref().map(|t| t.batches),
                    "steals": r.traffic.as_ref().map(|t| t.steals), "bytes": r.bytes,
                    "node_states": r.traffic.as_ref().map(|t| &t.states),
                    "most_waiting": r.traffic.as_ref().map(|t| t.most_waiting),
                    "node_peak_bytes": a.processes.then_some(&r.peaks), "one_node_peak_bytes": one_peak,
                    "jobs": jobs, "jobs_s": r.jobs_s, "jobs_executions": r.jobs_executions, "jobs_steps": r.jobs_steps,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?);
        return Ok(0);
    }
    if a.tcp {
        println!(
            "{} at the standard bounds: the visited set sharded among nodes{} joined over loopback TCP \
             ({jobs} / nodes workers a node, at least one), against --jobs {jobs}",
            a.policy,
            if a.processes { " (each a process)" } else { "" }
        );
    } else {
        println!(
            "{} at the standard bounds: the visited set sharded among in-process nodes ({jobs} workers in all, \
             {} µs a batch, batches of {}, sent every {} executions), against --jobs {jobs}",
            a.policy, a.latency_us, a.batch, a.every
        );
    }
    // The largest node process's peak memory, and its ratio to one node's
    // over the nodes (1.00x: each holds its share exactly).
    let peak = |r: &Row| match (r.peaks.iter().flatten().max(), one_peak) {
        (Some(&p), Some(one)) => {
            format!("{:.1} ({:.2}x)", p as f64 / MIB, p as f64 * r.nodes as f64 / one.max(1) as f64)
        }
        (Some(&p), None) => format!("{:.1}", p as f64 / MIB),
        _ => "-".into(),
    };
    if let Some(one) = one_peak {
        println!("one node of {jobs} worker(s), a process of its own: peak {:.1} MiB", one as f64 / MIB);
    }
    let mut t = Table::new(&[Align::Right; 12]);
    t.row([
        "nodes",
        "states",
        "seconds",
        "executions",
        "steps run",
        "claims",
        "admitted",
        "known",
        "bytes/state",
        "largest node",
        "peak MiB a node",
        "--jobs s",
    ]);
    for r in rows {
        t.row([
            r.nodes.to_string(),
            r.states.to_string(),
            format!("{:.2}", r.sharded_s),
            format!("{} ({:.2}x)", r.sharded_executions, r.sharded_executions as f64 / r.jobs_executions.max(1) as f64),
            format!("{} ({:.2}x)", r.sharded_steps, r.sharded_steps as f64 / r.jobs_steps.max(1) as f64),
            sent(r, |t| t.claims.to_string()),
            sent(r, |t| t.admitted.to_string()),
            sent(r, |t| t.known.to_string()),
            format!("{:.1}", per_state(r)),
            largest(r),
            peak(r),
            format!("{:.2}", r.jobs_s),
        ]);
    }
    print!("{}", t.render());
    Ok(0)
}

/// The command that starts node `me` of `nodes` of `spec`, with `jobs`
/// workers, in a process of its own: this binary's `shard-node`.
fn node_command(spec: &tlbkit_check::CheckSpec, me: usize, nodes: usize, jobs: usize) -> std::process::Command {
    // Where this binary cannot be found, "tlbkit" on the PATH.
    let exe = std::env::current_exe().unwrap_or_else(|_| "tlbkit".into());
    let mut c = std::process::Command::new(exe);
    let token = tlbkit_check::run::shards::spec_token(spec);
    c.args(["shard-node", "--token", &token]);
    c.args(["--me", &me.to_string(), "--nodes", &nodes.to_string(), "--jobs", &jobs.to_string()]);
    c
}

/// The hidden `tlbkit shard-node`'s flags: a node of `tlbkit bench sharded
/// --processes`, which starts it.
#[derive(Args)]
pub struct NodeArgs {
    /// The check, as its replay token's header names it.
    #[arg(long)]
    pub token: String,
    /// This node's number.
    #[arg(long)]
    pub me: usize,
    /// The nodes in all.
    #[arg(long)]
    pub nodes: usize,
    /// Its workers.
    #[arg(long)]
    pub jobs: usize,
}

/// Runs `tlbkit shard-node`: serves one node on its standard input and
/// output (`tlbkit_check::run::piped::serve`).
pub fn node(a: NodeArgs) -> Result<u8, CliError> {
    let spec = tlbkit_check::run::shards::spec_of(&a.token)?;
    if a.nodes == 0 || a.nodes > MAX_NODES || a.me >= a.nodes || a.jobs == 0 {
        return Err(format!(
            "shard-node: node {} of {} with {} workers: give --nodes 1 to {MAX_NODES}, --me below it, --jobs 1 or more",
            a.me, a.nodes, a.jobs
        )
        .into());
    }
    let (input, output) = (std::io::stdin().lock(), std::io::stdout().lock());
    tlbkit_check::run::piped::serve(spec, a.me, a.nodes, a.jobs, input, output)?;
    Ok(0)
}
