//! What a running check has done so far, for a front end to show.
//!
//! The searches publish their counts here now and then (every 4,096
//! executions on one thread, every reservation of executions in the
//! parallel search); [`snapshot`] reads them from any thread, so a front end
//! can draw progress on a timer of its own without slowing the search. The
//! counts are the process's: two checks running at once in one process (a
//! library user's threads) publish into the same counts, so a front end shows
//! them only for the one check it runs.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// The published counts.
static EXECUTIONS: AtomicU64 = AtomicU64::new(0);
/// Distinct states reached (0 where the search keeps none: random and PCT).
static STATES: AtomicU64 = AtomicU64::new(0);
/// The portfolio member being checked (from 1; 0: not a portfolio).
static SHAPE: AtomicUsize = AtomicUsize::new(0);
/// Executions of the portfolio's members before the current one.
static BEFORE: AtomicU64 = AtomicU64::new(0);
/// The most steps one execution took, over the whole check.
static STEPS: AtomicUsize = AtomicUsize::new(0);

/// A check's progress at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Executions (schedules) run, over the whole portfolio.
    pub executions: u64,
    /// Distinct states of the current search (0 where it keeps none).
    pub states: u64,
    /// The portfolio member being checked, from 1 (0: not a portfolio).
    pub shape: usize,
    /// The most steps one execution took (0 where the search did not say).
    pub longest: usize,
}

/// Returns the counts published so far.
pub fn snapshot() -> Snapshot {
    Snapshot {
        executions: BEFORE.load(Relaxed) + EXECUTIONS.load(Relaxed),
        states: STATES.load(Relaxed),
        shape: SHAPE.load(Relaxed),
        longest: STEPS.load(Relaxed),
    }
}

/// Starts the counts afresh (a check starts).
pub fn reset() {
    EXECUTIONS.store(0, Relaxed);
    STATES.store(0, Relaxed);
    SHAPE.store(0, Relaxed);
    BEFORE.store(0, Relaxed);
    STEPS.store(0, Relaxed);
}

/// Publishes the length of an execution, in steps (the most is kept).
pub(crate) fn longest(steps: usize) {
    STEPS.fetch_max(steps, Relaxed);
}

/// Publishes the current search's executions and, where it keeps them, states.
pub(crate) fn publish(executions: u64, states: Option<u64>) {
    EXECUTIONS.store(executions, Relaxed);
    if let Some(s) = states {
        STATES.store(s, Relaxed);
    }
}

/// Says a portfolio's member `shape` (from 1) starts, after `before` executions.
pub(crate) fn member(shape: usize, before: u64) {
    BEFORE.store(before, Relaxed);
    EXECUTIONS.store(0, Relaxed);
    STATES.store(0, Relaxed);
    SHAPE.store(shape, Relaxed);
}
