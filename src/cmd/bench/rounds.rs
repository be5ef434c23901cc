//! `tlbkit bench rounds`: what the search in rounds costs against one
//! process's workers, on one machine, without Ray.
//!
//! `tlbkit check --ray` runs an exhaustive search in rounds among actors that
//! each keep a copy of the visited set (`tlbkit_check::run::rounds`). Its
//! costs beside the transport are the algorithm's: states two parties reach
//! in one round are explored by both, a round waits for its slowest party,
//! and the driver merges what comes back. This benchmark measures those
//! alone: for each party count N it runs the check at the standard bounds in
//! rounds among N parties in this process (a thread each, one worker, each
//! with its own visited set; what a party hands back goes through the same
//! bytes the actors send), with rounds of about `--round-ms` as the Ray
//! driver sizes them, and the same check with `--jobs N` (one shared visited
//! set), and prints the seconds, executions and rounds of both. Each party
//! holds a whole visited set: N parties take N times `--jobs N`'s memory.

use crate::error::CliError;
use crate::table::{Align, Table};
use clap::Args;
use std::time::{Duration, Instant};
use tlbkit_check::run::rounds::{Party, Rounds};
use tlbkit_check::CheckSpec;

/// `tlbkit bench rounds`'s flags.
#[derive(Args)]
pub struct RoundsArgs {
    /// The policy, checked at its standard bounds.
    #[arg(long, default_value = "arm64-linux")]
    pub policy: String,
    /// Party counts, comma-separated (each also the --jobs it is compared with).
    #[arg(long, value_delimiter = ',', default_value = "2")]
    pub parties: Vec<usize>,
    /// A round's length the parties' budgets aim at, in milliseconds (the Ray
    /// driver's is 1000).
    #[arg(long, default_value_t = 1000)]
    pub round_ms: u64,
    #[arg(long, value_enum, default_value = "table")]
    pub format: super::Format,
}

/// One party count's figures.
struct Row {
    parties: usize,
    states: u64,
    /// The rounds among `parties` parties.
    rounds_s: f64,
    rounds_executions: u64,
    rounds: u64,
    /// The same check with `--jobs parties`.
    jobs_s: f64,
    jobs_executions: u64,
}

/// Runs `tlbkit bench rounds`.
pub fn run(a: RoundsArgs) -> Result<u8, CliError> {
    if a.parties.is_empty() || a.parties.contains(&0) {
        return Err("--parties: give party counts of 1 or more, e.g. --parties 2,4,8".into());
    }
    if a.round_ms == 0 {
        return Err("--round-ms 0: give a round's length in milliseconds, e.g. --round-ms 1000".into());
    }
    let spec = standard_spec(&a.policy)?;
    let mut rows = Vec::new();
    for &n in &a.parties {
        let t = Instant::now();
        let (report, rounds) = in_rounds(&spec, n, Duration::from_millis(a.round_ms))?;
        let rounds_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let local = tlbkit_check::run::check_exhaustive_jobs(&spec, n)?;
        let jobs_s = t.elapsed().as_secs_f64();
        if report.explored.states != local.explored.states
            || report.counterexample.is_some() != local.counterexample.is_some()
        {
            return Err(format!(
                "{} parties reached {} states, --jobs {n} {}: the rounds lost or added states (a bug in tlbkit)",
                n, report.explored.states, local.explored.states
            )
            .into());
        }
        rows.push(Row {
            parties: n,
            states: local.explored.states,
            rounds_s,
            rounds_executions: report.explored.executions,
            rounds,
            jobs_s,
            jobs_executions: local.explored.executions,
        });
    }
    if a.format == super::Format::Json {
        let doc: Vec<_> = rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "policy": a.policy, "parties": r.parties, "states": r.states, "rounds": r.rounds,
                    "rounds_s": r.rounds_s, "rounds_executions": r.rounds_executions,
                    "jobs_s": r.jobs_s, "jobs_executions": r.jobs_executions,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?);
        return Ok(0);
    }
    println!(
        "{} at the standard bounds: in rounds of about {} ms among in-process parties, against --jobs",
        a.policy, a.round_ms
    );
    let mut t = Table::new(&[Align::Right; 7]);
    t.row(["parties", "states", "rounds", "seconds", "executions", "--jobs seconds", "--jobs executions"]);
    for r in &rows {
        t.row([
            r.parties.to_string(),
            r.states.to_string(),
            r.rounds.to_string(),
            format!("{:.2}", r.rounds_s),
            r.rounds_executions.to_string(),
            format!("{:.2}", r.jobs_s),
            r.jobs_executions.to_string(),
        ]);
    }
    print!("{}", t.render());
    Ok(0)
}

/// The exhaustive check of `policy` at the standard bounds (`bench check`'s).
pub(super) fn standard_spec(policy: &str) -> Result<CheckSpec, CliError> {
    use super::check::{asids, CPUS, MMS, OPS, PAGES};
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

/// Runs `spec` in rounds among `n` parties, each round on a thread per
/// party; returns the report and the rounds run.
fn in_rounds(spec: &CheckSpec, n: usize, round: Duration) -> Result<(tlbkit_check::CheckReport, u64), CliError> {
    let driver = Rounds::start(spec.clone())?;
    let parties = (0..n).map(|_| Party::new(spec.clone(), &driver.visited())).collect::<Result<Vec<_>, _>>()?;
    // Per party: its budget, and what the others handed back since its last round.
    let mut budgets = vec![20_000u64; n];
    let mut news: Vec<Vec<std::sync::Arc<Vec<u8>>>> = vec![Vec::new(); n];
    let mut rounds = 0;
    loop {
        if driver.progress().0 == 0 {
            return Ok((driver.report(n)?, rounds));
        }
        rounds += 1;
        let parts = driver.split(n);
        let outs = std::thread::scope(|s| {
            let handles: Vec<_> = parts
                .iter()
                .zip(&parties)
                .zip(&news)
                .zip(&budgets)
                .map(|(((part, party), news), &budget)| {
                    s.spawn(move || {
                        let news: Vec<&[u8]> = news.iter().map(|b| b.as_slice()).collect();
                        let t = Instant::now();
                        party.run(part, &news, budget, 1).map(|out| (out, t.elapsed()))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("a party's thread does not panic")).collect::<Vec<_>>()
        });
        news.iter_mut().take(parts.len()).for_each(Vec::clear);
        let mut backs = Vec::new();
        for (i, out) in outs.into_iter().enumerate() {
            let ((body, found, ran), took) = out?;
            if let Some(token) = found {
                return Ok((driver.report_found(&token, n)?, rounds));
            }
            driver.merge(&body)?;
            if took.as_secs_f64() > 0.0 {
                budgets[i] = ((ran as f64 / took.as_secs_f64() * round.as_secs_f64()) as u64).max(1000);
            }
            backs.push((i, std::sync::Arc::new(body)));
        }
        for (i, body) in &backs {
            for (j, n) in news.iter_mut().enumerate() {
                if j != *i {
                    n.push(body.clone());
                }
            }
        }
    }
}
