//! The microbenchmarks: which CPUs they run on, how hard they try, what they
//! report, and [`measure`], which runs one.
//!
//! Layout:
//! - `catalog.rs`: the benchmarks by name ([`Bench`]);
//! - `dispatch.rs`: the CPU checks and the thread [`measure`] runs in;
//! - `harness.rs`: sizing, warm-up and trials, shared by all;
//! - `sys.rs`: the syscalls, checked (clock, pinning, mappings);
//! - `syscall.rs`, `fault.rs`, `zeroing.rs`, `vm.rs`, `switch.rs`,
//!   `line.rs`, `shootdown.rs`: the benchmarks, by family;
//! - `pair.rs`: the partner thread of the two-CPU benchmarks that run in
//!   rounds.

mod catalog;
#[cfg(target_os = "linux")]
mod dispatch;
#[cfg(target_os = "linux")]
mod fault;
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
mod harness;
#[cfg(target_os = "linux")]
mod line;
#[cfg(target_os = "linux")]
mod pair;
#[cfg(target_os = "linux")]
mod shootdown;
#[cfg(target_os = "linux")]
mod switch;
#[cfg(target_os = "linux")]
mod sys;
#[cfg(target_os = "linux")]
mod syscall;
#[cfg(target_os = "linux")]
mod vm;
#[cfg(target_os = "linux")]
mod zeroing;

pub use catalog::Bench;

use crate::Error;
use serde::{Deserialize, Serialize};

/// The CPUs a benchmark pins its threads to: `a` always, `b` for the
/// two-CPU ones ([`Bench::cpus_used`]).
#[derive(Clone, Copy, Debug)]
pub struct Cpus {
    /// The CPU of the first (or only) thread.
    pub a: usize,
    /// The CPU of the second thread.
    pub b: usize,
}

/// How long a measurement takes.
#[derive(Clone, Copy, Debug)]
pub enum Effort {
    /// Trials of about 1 ms, 3 of them: a few ms a benchmark, for tests.
    Quick,
    /// Trials of about 25 ms, 11 of them: for `calibrate`.
    Full,
}

/// What one benchmark measured: the median, minimum and maximum of its
/// trials' figures, in its [`Bench::unit`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Measurement {
    /// The benchmark.
    pub bench: Bench,
    /// The median trial's figure.
    pub median: f64,
    /// The lowest trial's figure.
    pub min: f64,
    /// The highest trial's figure.
    pub max: f64,
    /// Timed trials (after one untimed warm-up trial).
    pub trials: u32,
    /// Operations in each trial.
    pub ops_per_trial: u64,
}

/// Runs `bench` on the CPUs `cpus` with `effort`.
///
/// The benchmark runs in threads of its own, so the caller's affinity is
/// left as it was. Only the CPUs the benchmark uses are checked: `a` for a
/// one-CPU benchmark, `a` and `b` for a two-CPU one.
///
/// # Errors
/// [`Error::NoSuchCpu`], [`Error::NotAllowed`] or [`Error::SameCpu`] for CPUs
/// it cannot use; [`Error::Io`] for a syscall that failed;
/// [`Error::NotLinux`] on other systems.
pub fn measure(bench: Bench, cpus: Cpus, effort: Effort) -> Result<Measurement, Error> {
    #[cfg(target_os = "linux")]
    return dispatch::measure(bench, cpus, effort);
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (bench, cpus, effort);
        Err(Error::not_linux())
    }
}

/// Checks that the CPUs `a` and `b` are online, that this process may run on
/// both, and that they differ.
///
/// # Errors
/// [`Error::NoSuchCpu`], [`Error::NotAllowed`], [`Error::SameCpu`]; an
/// [`Error::Io`] or [`Error::Parse`] if the online CPUs or the affinity
/// cannot be read; [`Error::NotLinux`] on other systems.
pub fn check_cpus(cpus: Cpus) -> Result<(), Error> {
    #[cfg(target_os = "linux")]
    return dispatch::check(cpus, 2).map(|_| ());
    #[cfg(not(target_os = "linux"))]
    {
        let _ = cpus;
        Err(Error::not_linux())
    }
}
