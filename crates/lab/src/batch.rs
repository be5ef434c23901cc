//! Many independent runs on the host's cores: a work queue of [`RunSpec`]s
//! shared by `jobs` threads, each run a separate simulator with its own seed.
//!
//! What is guaranteed: each run's output is the one [`run`] gives alone (runs
//! share nothing), and every spec is run once unless the caller stops the batch.
//! What is not: the order in which runs finish, which depends on the host; a
//! caller that needs an order (as `tlbkit compare` orders by seed) sorts by the
//! index it is handed.

use crate::Error;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use tlbkit_sim::run::{run, RunOutput, RunSpec};

/// Returns the number of host threads to use by default: the cores available.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Runs every spec on up to `jobs` threads and hands each outcome, with the
/// spec's index, to `done` on the calling thread as it finishes. When `done`
/// breaks, no further run starts; the runs in progress finish and are handed
/// over too. Results pass through a rendezvous channel, so a thread starts its
/// next run only once the caller took its last result: however the host
/// schedules the threads, at most `jobs` results follow the one that broke. A
/// run that fails is an [`Error::Sim`], one whose simulator panics an
/// [`Error::Panicked`] naming the command that repeats it.
pub fn run_all(
    specs: &[RunSpec],
    jobs: usize,
    mut done: impl FnMut(usize, Result<RunOutput, Error>) -> ControlFlow<()>,
) {
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let (tx, rx) = mpsc::sync_channel(0);
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, specs.len().max(1)) {
            let tx = tx.clone();
            let (next, stop) = (&next, &stop);
            scope.spawn(move || loop {
                // Relaxed: the counter only hands out distinct indices, and the
                // flag only ends the loop early; the channel orders the results.
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(spec) = specs.get(i) else { break };
                let out = match std::panic::catch_unwind(|| run(spec)) {
                    Ok(out) => out.map_err(Error::from),
                    Err(p) => {
                        let why = p
                            .downcast_ref::<String>()
                            .map(String::as_str)
                            .or_else(|| p.downcast_ref::<&str>().copied())
                            .unwrap_or("no message");
                        Err(Error::Panicked { why: why.to_string(), command: spec.command() })
                    }
                };
                if tx.send((i, out)).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        for (i, out) in rx {
            if done(i, out).is_break() {
                stop.store(true, Ordering::Relaxed);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(seed: u64) -> RunSpec {
        RunSpec {
            machine: "cortex-a72".into(),
            cpus: 2,
            policy: "arm64-freebsd-asid".into(),
            workload: "lat_ctx".into(),
            sets: vec!["procs=4".into(), "rounds=3".into(), "spec_rate=0.5".into()],
            seed,
            strict: false,
        }
    }

    fn outputs(jobs: usize) -> Vec<String> {
        let specs: Vec<RunSpec> = (1..=6).map(spec).collect();
        let mut got = vec![String::new(); specs.len()];
        run_all(&specs, jobs, |i, out| {
            got[i] = serde_json::to_string(&out.unwrap()).unwrap();
            ControlFlow::Continue(())
        });
        got
    }

    #[test]
    fn outputs_by_index_do_not_depend_on_thread_count() {
        let one = outputs(1);
        assert_eq!(one, outputs(3));
        let alone: Vec<String> = (1..=6).map(|s| serde_json::to_string(&run(&spec(s)).unwrap()).unwrap()).collect();
        assert_eq!(one, alone);
    }

    #[test]
    fn a_break_starts_no_further_run() {
        let specs: Vec<RunSpec> = (1..=40).map(spec).collect();
        let mut handed = 0;
        run_all(&specs, 2, |_, _| {
            handed += 1;
            ControlFlow::Break(())
        });
        // The first result stops the queue. The thread that delivered it may have
        // started one more run before the stop was set, the other thread one it was
        // in the middle of: whatever the scheduling, at most three results.
        assert!((1..=3).contains(&handed), "{handed}");
    }
}
