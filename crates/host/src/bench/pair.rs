//! A partner thread on CPU `b` for the two-CPU benchmarks that run in
//! rounds: `line_pingpong` and `lock_handoff`.

use super::sys::{now, pin};
use crate::Error;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, Mutex, PoisonError};

/// The partner's `gone` when `start` could not read the clock: the round is
/// abandoned (and so is every later one; `main` returns the error).
const ABANDONED: u64 = u64::MAX;

/// Runs `main` on the calling thread (pinned to `a` by the caller) beside a
/// thread pinned to `b` that runs `partner(n)` each time `main` calls the
/// `start(n)` it is given.
///
/// A round starts in two steps, so that neither side gets a head start: the
/// partner is woken (a barrier, slow) and spins until `start` reads the
/// clock and lets it go (one store, seen one cache-line transfer later).
/// `start` returns that clock reading, the start of the timed section. Both
/// sides of a round must end on their own (`main` waits for the partner's
/// last step before it ends the round).
///
/// # Errors
/// [`Error::Io`] if the partner cannot be spawned or pinned; the errors of
/// `main`.
pub(super) fn with_partner<R>(
    b: usize,
    partner: impl Fn(u64) + Sync,
    main: impl FnOnce(&dyn Fn(u64) -> Result<u64, Error>) -> Result<R, Error>,
) -> Result<R, Error> {
    let barrier = Barrier::new(2);
    // The round's `n`, 0 to stop; the barrier orders it.
    let round = AtomicU64::new(0);
    // How many rounds the partner has woken for, and been let go in.
    let woken = AtomicU64::new(0);
    let gone = AtomicU64::new(0);
    let failure: Mutex<Option<Error>> = Mutex::new(None);
    std::thread::scope(|s| {
        let spawn = std::thread::Builder::new().name(format!("partner-{b}"));
        let partner_thread = || {
            let pinned = pin(b);
            let ok = pinned.is_ok();
            if let Err(e) = pinned {
                *failure.lock().unwrap_or_else(PoisonError::into_inner) = Some(e);
            }
            barrier.wait();
            if !ok {
                return;
            }
            for this in 1.. {
                barrier.wait();
                let n = round.load(Ordering::Relaxed);
                if n == 0 {
                    break;
                }
                // Relaxed, both: counts that signal, publishing no data.
                woken.store(this, Ordering::Relaxed);
                let mut let_go = gone.load(Ordering::Relaxed);
                while let_go < this {
                    std::hint::spin_loop();
                    let_go = gone.load(Ordering::Relaxed);
                }
                if let_go != ABANDONED {
                    partner(n);
                }
            }
        };
        spawn
            .spawn_scoped(s, partner_thread)
            .map_err(|source| Error::Io { what: format!("spawning the benchmark thread of CPU {b}"), source })?;
        barrier.wait();
        if let Some(e) = failure.lock().unwrap_or_else(PoisonError::into_inner).take() {
            return Err(e);
        }
        let rounds = Cell::new(0);
        let start = |n: u64| {
            round.store(n.max(1), Ordering::Relaxed);
            barrier.wait();
            rounds.set(rounds.get() + 1);
            while woken.load(Ordering::Relaxed) < rounds.get() {
                std::hint::spin_loop();
            }
            let t0 = now();
            let let_go = if t0.is_ok() { rounds.get() } else { ABANDONED };
            gone.store(let_go, Ordering::Relaxed);
            t0
        };
        let result = main(&start);
        round.store(0, Ordering::Relaxed);
        barrier.wait();
        result
    })
}
