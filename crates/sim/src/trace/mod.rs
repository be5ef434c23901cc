//! Traces of real programs: import from valgrind's lackey and strace, and the
//! trace file the `trace` workload replays.

pub mod format;
pub mod lackey;
pub mod strace;

pub use format::{Event, Process, Record, Thread, Trace};
