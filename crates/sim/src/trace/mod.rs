//! Traces of real programs: the file the `trace` workload replays
//! ([`format`](mod@format)). `tlbkit trace import` (the `tlbkit-lab` crate's `trace`
//! module) makes one from valgrind's lackey and strace logs of one run, and
//! says there what it keeps and drops.
//!
//! # Timing
//!
//! Valgrind measures no time. The replay charges each instruction a fixed
//! `instr_cycles` (1 by default: one instruction a cycle) and each reference
//! run what the simulated machine charges for one access: a TLB lookup, a walk
//! on a miss, a fault on a page not yet present. See
//! [`crate::workload::trace`].
//!
//! # The file
//!
//! [`format`](mod@format) describes the file and its checks. The guide's example (docs/guide, "Traces of real programs"),
//! `gzip -c` of a 292-byte file (442 659 lackey lines, a 6.3 MB log), is a
//! 157 KB trace.

pub mod format;

pub use format::{Event, Process, Record, Thread, Trace};
