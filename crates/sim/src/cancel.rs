//! Cooperative cancellation of a run from another thread: how a front end
//! (the Python package's Ctrl-C) stops a simulation it has given up on,
//! instead of leaving it to finish unseen.
//!
//! The front end runs the simulation on a thread of its own inside [`with`],
//! holding the other end of the flag; setting the flag makes [`crate::sim::Sim::run`]
//! stop at its next check (every [`CHECK_EVERY`] events) with the error
//! [`INTERRUPTED`], which `tlbkit_sim::run::run` returns as its `Err` after
//! the name of the phase that was running. A run
//! that is never cancelled is not changed in any way: the flag is only read.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The error of a run stopped through its flag.
pub const INTERRUPTED: &str = "the run was interrupted";

/// How many events a run takes between two looks at its flag: one look costs a
/// thread-local read, and a few thousand events take well under a millisecond.
pub const CHECK_EVERY: u64 = 4096;

thread_local! {
    static FLAG: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// Runs `f` with `flag` as the cancellation flag of every run it makes on
/// this thread, then restores the flag that was there before.
pub fn with<T>(flag: Arc<AtomicBool>, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<Arc<AtomicBool>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let was = self.0.take();
            FLAG.with(|f| *f.borrow_mut() = was);
        }
    }
    let _restore = Restore(FLAG.with(|f| f.borrow_mut().replace(flag)));
    f()
}

/// Returns whether this thread's run has been asked to stop.
pub(crate) fn requested() -> bool {
    // Relaxed: the flag carries no data; a run that sees it a check late stops
    // a few thousand events later.
    FLAG.with(|f| f.borrow().as_ref().is_some_and(|a| a.load(Ordering::Relaxed)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::{run, RunSpec};

    fn spec() -> RunSpec {
        RunSpec {
            machine: "cortex-a72".into(),
            cpus: 2,
            policy: "arm64-freebsd-asid".into(),
            workload: "lat_ctx".into(),
            sets: vec!["procs=8".into(), "rounds=2000".into()],
            seed: 1,
            strict: false,
        }
    }

    #[test]
    fn a_set_flag_stops_the_run_with_interrupted() {
        let err = with(Arc::new(AtomicBool::new(true)), || run(&spec())).expect_err("the run was cancelled");
        // The phase that was running is named before it.
        assert!(matches!(&err, crate::Error::Failed { message, .. } if message == INTERRUPTED), "{err:?}");
        assert!(err.to_string().ends_with(INTERRUPTED), "{err}");
    }

    #[test]
    fn a_clear_flag_changes_nothing() {
        let plain = serde_json::to_string(&run(&spec()).unwrap()).unwrap();
        let flagged = serde_json::to_string(&with(Arc::new(AtomicBool::new(false)), || run(&spec())).unwrap()).unwrap();
        assert_eq!(plain, flagged);
    }

    #[test]
    fn the_flag_is_restored_after_with() {
        with(Arc::new(AtomicBool::new(true)), || assert!(requested()));
        assert!(!requested());
    }
}
