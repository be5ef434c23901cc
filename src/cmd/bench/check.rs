//! `tlbkit bench check`: the checker's own speed, as a benchmark, not a test.
//!
//! The origins' policies (or the one named, or with `--policy all` every real
//! policy: each registry entry's `era` and `untimed` decide which) are checked
//! exhaustively
//! at the standard bounds, each in a child process of this binary (`tlbkit check ...
//! --format json`), so that its peak memory is its own: the child's maximum
//! resident set size comes from `wait4`, and a child that runs past `--limit-s`
//! is killed and reported as such. The rows say what the check found (states,
//! executions, whether the search completed, the property a counterexample
//! broke), how long it took and how much memory it held, with the command that
//! runs the same check. A check that fails (an error, not a violation) is a row
//! saying so, and the others still run: the table is printed and the exit code
//! is 1. `--memory arm` is the arm64 mode: the checks it chooses are the arm64
//! policies', and naming an x86 one is refused before any runs.

use crate::error::CliError;
use crate::table::{Align, Table};
use clap::Args;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tlbkit_check::kernel::MAX_PAGES;
use tlbkit_check::shape::Memory;
use tlbkit_check::spec::default_asids;
use tlbkit_check::CheckSpec;
use tlbkit_registry::Era;

/// `tlbkit bench check`'s flags.
#[derive(Args)]
pub struct CheckArgs {
    /// The one policy to check (default the origins' policies, before and after
    /// each change), or `all`: every real policy, the origins' then the
    /// history's and the later ones (those that time nothing new left out: a
    /// partial fix that stops at its finding, the guide's example, a fix that
    /// differs only past the standard bounds; `untimed` in `tlbkit list policies --format json` says why).
    #[arg(long)]
    pub policy: Option<String>,
    /// Pages per address space (default 1, the standard bounds; 2 lets flushes
    /// of one address space overlap, and takes far longer).
    #[arg(long)]
    pub pages: Option<usize>,
    /// Worker threads per check (default: the check's own, one per core).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Stop a check that runs longer than this many seconds (and say so in its
    /// row).
    #[arg(long, value_name = "SECONDS")]
    pub limit_s: Option<u64>,
    /// The memory model of every check (default sc, the standard bounds'):
    /// tso, arm (the arm64 policies only: with the default policies or `all`,
    /// the x86 ones are left out), or arch, each policy's own architecture's
    /// (tso on x86, arm on arm64).
    #[arg(long, value_enum)]
    pub memory: Option<BenchMemory>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: super::Format,
}

/// `tlbkit bench check --memory`.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchMemory {
    /// Sequential consistency.
    Sc,
    /// x86-TSO store buffers.
    Tso,
    /// The arm64 mode (arm64 policies only).
    Arm,
    /// Each policy's architecture's own: tso on x86, arm on arm64.
    Arch,
}

impl BenchMemory {
    /// Returns the `tlbkit check --memory` value for `policy`: for `arch`, the
    /// weakest of the models the default run uses on its architecture
    /// (`tlbkit_check::portfolio::arch_memory`).
    fn for_policy(self, policy: &str) -> &'static str {
        let model = match self {
            BenchMemory::Sc => Memory::Sc,
            BenchMemory::Tso => Memory::Tso,
            BenchMemory::Arm => Memory::Arm,
            BenchMemory::Arch => tlbkit_check::portfolio::arch_memory(policy).last().copied().unwrap_or(Memory::Tso),
        };
        model.name()
    }

    /// Returns the flag's own name (`arch` included).
    fn name(self) -> &'static str {
        match self {
            BenchMemory::Sc => "sc",
            BenchMemory::Tso => "tso",
            BenchMemory::Arm => "arm",
            BenchMemory::Arch => "arch",
        }
    }
}

/// The standard bounds: 2 CPUs, 3 address spaces of one page, 4 ASIDs on
/// arm64 and 4 PCIDs per CPU on FreeBSD x86 (Linux x86 has its 6 PCID slots),
/// 6 operations of every kind: the bounds every exhaustive figure in the
/// README is measured at. One page, not the check's default two: two pages are
/// for finding bugs of overlapping ranges, and square the search (`--pages 2`
/// runs them).
pub(super) const CPUS: usize = 2;
pub(super) const MMS: usize = 3;
pub(super) const OPS: usize = 6;
pub(super) const PAGES: usize = 1;

/// The policies the benchmark checks by default: the origins' policies, before
/// and after each origin's change, that its check times (the registry's
/// `era` and `untimed`: FreeBSD arm64's unfixed policy stops at its finding
/// within a second, so its fix candidate stands for it). The policies of the
/// history and after the origins are checked one at a time with `--policy`,
/// or all with `--policy all`.
pub fn origin_policies() -> Vec<&'static str> {
    timed().filter(|p| matches!(p.era, Era::Origin(_))).map(|p| p.name).collect()
}

/// The registered policies `--policy all` times: every one but those whose
/// entry says why not (`untimed`), the origins' first.
fn every_real_policy() -> Vec<&'static str> {
    let later = timed().filter(|p| !matches!(p.era, Era::Origin(_))).map(|p| p.name);
    origin_policies().into_iter().chain(later).collect()
}

/// The registered policies a check times, in the registry's order.
fn timed() -> impl Iterator<Item = &'static tlbkit_registry::PolicyDef> {
    tlbkit_registry::POLICIES.iter().filter(|p| p.untimed.is_none())
}

/// Returns the ASID space of the standard bounds for `policy`: the checker's
/// default for their 2 CPUs, as the policy's registry entry says (its
/// `AsidSpace`): 4 arm64 ASIDs, FreeBSD x86's 4 PCIDs per CPU, Linux x86's 6
/// PCID slots per CPU (`TLB_NR_DYN_ASIDS`), and for `x86-linux-invlpgb`, whose
/// `--asids` is its global ASIDs (its PCID slots stay 6), 2 (three address
/// spaces exhaust and reset them).
pub(super) fn asids(policy: &str) -> u32 {
    default_asids(policy, CPUS)
}

/// One policy's check, as the benchmark measured it.
struct Row {
    policy: String,
    /// The check's report (`tlbkit check --format json`), if it finished.
    states: Option<u64>,
    executions: Option<u64>,
    complete: Option<bool>,
    /// The property a counterexample broke, if one was found.
    violation: Option<String>,
    /// Wall-clock seconds of the child, start to exit.
    wall_s: f64,
    /// The child's peak resident set size (`wait4`'s `ru_maxrss`), in MiB.
    peak_rss_mib: f64,
    /// Whether the child was stopped at `--limit-s`.
    timed_out: bool,
    /// The search's worker threads.
    workers: Option<u64>,
    command: String,
    /// Why the check failed (an error, not a violation), if it did.
    error: Option<String>,
}

impl Row {
    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "policy": self.policy,
            "states": self.states,
            "executions": self.executions,
            "complete": self.complete,
            "violation": self.violation,
            "wall_s": self.wall_s,
            "peak_rss_mib": self.peak_rss_mib,
            "timed_out": self.timed_out,
            "workers": self.workers,
            "command": self.command,
            "error": self.error,
        })
    }
}

/// The arguments of `tlbkit check` for `policy` at the standard bounds with
/// `pages` pages per address space, with `jobs` worker threads (the check's
/// default, one per core, when `None`), under `memory` (the check's default,
/// SC for a real policy, when `None`).
fn check_args(policy: &str, pages: usize, jobs: Option<usize>, memory: Option<BenchMemory>) -> Vec<String> {
    let jobs = jobs.map(|j| ["--jobs".to_string(), j.to_string()]);
    let memory = memory.map(|m| ["--memory".to_string(), m.for_policy(policy).to_string()]);
    [
        "check",
        "--policy",
        policy,
        "--mode",
        "exhaustive",
        "--cpus",
        &CPUS.to_string(),
        "--mms",
        &MMS.to_string(),
        "--asids",
        &asids(policy).to_string(),
        "--ops",
        &OPS.to_string(),
        "--pages",
        &pages.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .chain(jobs.into_iter().flatten())
    .chain(memory.into_iter().flatten())
    .collect()
}

/// Runs `tlbkit check` for `policy` in a child and measures it.
fn measure(
    policy: &str,
    pages: usize,
    jobs: Option<usize>,
    memory: Option<BenchMemory>,
    limit: Option<Duration>,
) -> Result<Row, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary to run the checks: {e}"))?;
    let args = check_args(policy, pages, jobs, memory);
    let command = format!("tlbkit {}", args.join(" "));
    let started = Instant::now();
    let mut child = Command::new(exe)
        .args(args.iter().chain(["--format".to_string(), "json".to_string()].iter()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start `{command}`: {e}"))?;
    let pid = child.id() as libc::pid_t;
    // The watchdog kills the child at the limit; the flag says it did.
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let killed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watchdog = limit.map(|limit| {
        let killed = killed.clone();
        std::thread::spawn(move || {
            if done_rx.recv_timeout(limit).is_err() {
                killed.store(true, std::sync::atomic::Ordering::SeqCst);
                // SAFETY: `pid` is our child, not yet reaped (the main thread
                // reaps it only after this thread is told it is done or has sent
                // the signal), so the id cannot name another process.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        })
    });
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut s) = child.stdout.take() {
        s.read_to_string(&mut out).map_err(|e| format!("reading `{command}`'s output: {e}"))?;
    }
    if let Some(mut s) = child.stderr.take() {
        s.read_to_string(&mut err).map_err(|e| format!("reading `{command}`'s errors: {e}"))?;
    }
    // The pipes closed: the child has exited (or is exiting). Stop the watchdog
    // before reaping, so that it never signals a reused pid.
    let _ = done_tx.send(());
    if let Some(w) = watchdog {
        let _ = w.join();
    }
    let mut status = 0;
    // SAFETY: plain FFI; `rusage` is a C struct for which all-zero is valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own unreaped child; both pointers are valid.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    if r != pid {
        return Err(format!("waiting for `{command}`: {}", std::io::Error::last_os_error()));
    }
    let wall_s = started.elapsed().as_secs_f64();
    let peak_rss_mib = usage.ru_maxrss as f64 / 1024.0;
    let timed_out = killed.load(std::sync::atomic::Ordering::SeqCst);
    let mut row = Row {
        policy: policy.to_string(),
        states: None,
        executions: None,
        complete: None,
        violation: None,
        wall_s,
        peak_rss_mib,
        timed_out,
        workers: None,
        command,
        error: None,
    };
    if timed_out {
        return Ok(row);
    }
    let code = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { -1 };
    // 0: no violation; 3: a counterexample (a finding, for a real policy).
    if code != 0 && code != 3 {
        row.error = Some(format!("exit {code}: {}", err.trim()));
        return Ok(row);
    }
    let v: serde_json::Value = match serde_json::from_str(&out) {
        Ok(v) => v,
        Err(e) => {
            row.error = Some(format!("no report ({e}): {}", err.trim()));
            return Ok(row);
        }
    };
    row.states = v["states"].as_u64();
    row.executions = v["executions"].as_u64();
    row.complete = v["complete"].as_bool();
    row.workers = v["workers"].as_u64();
    row.violation = v["counterexample"]["property"].as_str().map(str::to_string);
    Ok(row)
}

/// Runs the benchmark: `--policy` (the origins' policies when not given), each with
/// `--pages` pages per address space (the standard bounds' one when not given),
/// `--jobs` worker threads and at most `--limit-s` seconds.
pub fn run(a: CheckArgs) -> Result<u8, CliError> {
    let CheckArgs { policy, pages, jobs, limit_s, memory, format } = a;
    let policies = policy.as_slice();
    let all: Vec<&str> = tlbkit_registry::POLICIES.iter().map(|p| p.name).collect();
    for p in policies.iter().filter(|p| *p != "all") {
        // A C policy (`c:FILE...`) is its files: the check itself says if they do not build.
        if !all.contains(&p.as_str()) && !p.starts_with(tlbkit_registry::C_PREFIX) {
            return Err(format!(
                "--policy {p}: no such policy; the policies are {}, or all (every real one)",
                all.join(", ")
            )
            .into());
        }
    }
    let arm64 = |p: &str| {
        p.starts_with(tlbkit_registry::C_PREFIX)
            || tlbkit_registry::policy(p).is_some_and(|d| d.arch == tlbkit_registry::Arch::Arm64)
    };
    let mut chosen: Vec<&str> = match policies {
        [] => origin_policies(),
        [p] if p == "all" => every_real_policy(),
        _ => policies.iter().map(String::as_str).collect(),
    };
    if memory == Some(BenchMemory::Arm) {
        if let Some(p) = policies.iter().find(|p| *p != "all" && !arm64(p)) {
            return Err(format!("--memory arm is arm64's mode: {p} is an x86 policy; give tso (or arch)").into());
        }
        chosen.retain(|p| arm64(p));
    }
    let pages = pages.unwrap_or(PAGES);
    if !(1..=MAX_PAGES).contains(&pages) {
        return Err(format!(
            "--pages {pages}: an address space maps 1 to {MAX_PAGES} pages; the standard bounds use {PAGES}"
        )
        .into());
    }
    if limit_s == Some(0) {
        return Err("--limit-s 0 leaves no time: give seconds per check, e.g. --limit-s 600".into());
    }
    if jobs == Some(0) {
        return Err("--jobs 0 runs nothing: give 1 or more worker threads per check".into());
    }
    let limit = limit_s.map(Duration::from_secs);
    let bar = crate::progress::bar(chosen.len() as u64, crate::progress::Unit::Runs);
    let mut rows = Vec::new();
    for (i, p) in chosen.iter().enumerate() {
        bar.set_position(i as u64);
        bar.set_message(format!("checking {p}"));
        rows.push(measure(p, pages, jobs, memory, limit)?);
    }
    bar.finish_and_clear();
    let host = std::thread::available_parallelism().map_or(0, |n| n.get());
    if format == super::Format::Json {
        let doc = serde_json::json!({
            "bounds": { "cpus": CPUS, "mms": MMS, "pages": pages, "asids_arm64": 4, "pcids_freebsd_x86": 4, "pcid_slots_x86": 6, "ops": OPS },
            "memory": memory.unwrap_or(BenchMemory::Sc).name(),
            "host_cpus": host,
            "limit_s": limit_s,
            "checks": rows.iter().map(Row::json).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?);
        return Ok(failed(&rows));
    }
    println!(
        "exhaustive checks at the standard bounds ({CPUS} CPUs, {MMS} address spaces of {pages} page(s), 4 ASIDs on arm64 \
         / 4 PCIDs per CPU on FreeBSD x86 / 6 PCID slots on Linux x86, {OPS} operations), each in a child process; \
         host {host} CPU(s)"
    );
    use Align::{Left, Right};
    let mut t = Table::new(&[Left, Right, Right, Left, Right, Right, Right]);
    t.row(["policy", "states", "executions", "result", "workers", "seconds", "peak MiB"]);
    let num = |n: Option<u64>| n.map_or("-".to_string(), |n| n.to_string());
    for r in &rows {
        let result = match (&r.violation, r.complete, r.timed_out) {
            _ if r.error.is_some() => "failed (below)".to_string(),
            (_, _, true) => format!("stopped at {} s", limit_s.unwrap_or(0)),
            (Some(p), _, _) => format!("violation: {p}"),
            (None, Some(true), _) => "complete, no violation".to_string(),
            _ => "incomplete".to_string(),
        };
        t.row([
            r.policy.clone(),
            num(r.states),
            num(r.executions),
            result,
            num(r.workers),
            format!("{:.1}", r.wall_s),
            format!("{:.0}", r.peak_rss_mib),
        ]);
    }
    print!("{}", t.render());
    for r in &rows {
        println!("{}: {}", r.policy, r.command);
    }
    for r in &rows {
        if let Some(e) = &r.error {
            eprintln!("tlbkit: {} failed: {e}", r.policy);
        }
    }
    Ok(failed(&rows))
}

/// The exit code: 1 when a check failed (its row says so), 0 otherwise.
fn failed(rows: &[Row]) -> u8 {
    u8::from(rows.iter().any(|r| r.error.is_some()))
}

/// The exhaustive check of `policy` at the standard bounds (`bench check`'s).
pub(super) fn standard_spec(policy: &str) -> Result<CheckSpec, CliError> {
    let o = tlbkit_check::options::Options {
        policy: policy.to_string(),
        cpus: Some(CPUS),
        mms: Some(MMS),
        pages: Some(PAGES),
        asids: Some(asids(policy)),
        ops: Some(OPS),
        mode: Some("exhaustive".into()),
        ..Default::default()
    };
    let (spec, _) = o.resolve()?;
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_bounds_give_x86_six_pcid_slots_and_arm64_four_asids() {
        let a = check_args("x86-linux-pcid", PAGES, None, None);
        assert_eq!(a[a.iter().position(|s| s == "--asids").unwrap() + 1], "6");
        let a = check_args("arm64-linux", 1, Some(2), None);
        assert_eq!(a[a.iter().position(|s| s == "--pages").unwrap() + 1], "1");
        assert_eq!(a[a.iter().position(|s| s == "--asids").unwrap() + 1], "4");
        assert_eq!(a[a.iter().position(|s| s == "--ops").unwrap() + 1], "6");
        assert_eq!(a[a.iter().position(|s| s == "--jobs").unwrap() + 1], "2");
        let a = check_args("x86-linux-invlpgb", PAGES, None, None);
        assert_eq!(a[a.iter().position(|s| s == "--asids").unwrap() + 1], "2");
        assert!(!a.contains(&"--memory".to_string()), "SC unless asked");
        let memory = |p: &str| {
            let a = check_args(p, PAGES, None, Some(BenchMemory::Arch));
            a[a.iter().position(|s| s == "--memory").unwrap() + 1].clone()
        };
        assert_eq!((memory("x86-linux-pcid"), memory("arm64-linux")), ("tso".to_string(), "arm".to_string()));
    }

    #[test]
    fn a_policy_under_any_name_gets_the_standard_bounds_of_the_policy_it_copies() {
        // Each alias copies a registered entry under a name no prefix test would
        // recognise: a check of the name instead of the entry gives it other bounds.
        for (i, p) in tlbkit_registry::POLICIES.iter().enumerate() {
            let name = format!("zz-test-policy-{i}");
            tlbkit_registry::alias(&name, p.name).unwrap();
            let (mine, theirs) = (check_args(&name, PAGES, None, None), check_args(p.name, PAGES, None, None));
            assert_eq!(mine.iter().map(|a| a.replace(&name, p.name)).collect::<Vec<_>>(), theirs, "{}", p.name);
        }
    }

    #[test]
    fn the_default_policies_are_the_origins_before_and_after_each_change() {
        let origins = origin_policies();
        assert_eq!(origins.len(), 9, "{origins:?}");
        for p in ["arm64-noasid", "arm64-freebsd-asid-fix-reserved-ttbr0", "x86-linux-pcid", "x86-freebsd-gen"] {
            assert!(origins.contains(&p), "{p}: {origins:?}");
        }
    }

    #[test]
    fn policy_all_times_every_registered_policy_but_those_that_stop_at_a_finding() {
        let timed = every_real_policy();
        for p in tlbkit_registry::POLICIES {
            assert_eq!(timed.contains(&p.name), p.untimed.is_none(), "{}", p.name);
            assert_eq!(timed.iter().filter(|n| **n == p.name).count(), usize::from(p.untimed.is_none()));
        }
    }
}
