//! The measuring loop every microbenchmark shares: size a trial to the
//! effort's duration, run one untimed warm-up trial, run the timed trials,
//! and report their median, minimum and maximum.
//!
//! A benchmark gives one function, `trial(ops)`, that performs `ops`
//! operations and returns their time and its figure ([`Trial`]). Sizing
//! starts at one `granularity` of operations (the smallest whole trial:
//! 4096 for `page_fault`'s 16 MiB mapping) and multiplies until a trial
//! lasts a quarter of the target, then scales to the target.

use super::{Bench, Effort, Measurement};
use crate::Error;

/// The most operations a trial is sized to, so that a clock that reads the
/// same twice cannot size it without end.
const MAX_OPS: u64 = 1 << 40;

/// The most warm-up trials that may resize the trials.
const MAX_RESIZES: u32 = 3;

/// What one trial of `ops` operations measured.
#[derive(Clone, Copy, Debug)]
pub(super) struct Trial {
    /// How long the trial took, in ns (what sizing scales).
    pub ns: f64,
    /// Its figure in the benchmark's unit.
    pub figure: f64,
}

impl Trial {
    /// Returns a trial whose figure is ns per operation.
    pub fn per_op(ns: f64, ops: u64) -> Trial {
        Trial { ns, figure: ns / ops as f64 }
    }
}

impl Effort {
    /// Returns how long a trial should last, in ns.
    fn target_ns(self) -> f64 {
        match self {
            Effort::Quick => 1e6,
            Effort::Full => 25e6,
        }
    }

    /// Returns how many timed trials a measurement takes.
    fn trials(self) -> u32 {
        match self {
            Effort::Quick => 3,
            Effort::Full => 11,
        }
    }
}

/// Sizes, warms up and runs the trials of `bench`.
///
/// # Errors
/// The first error of `trial`.
pub(super) fn run(
    bench: Bench,
    effort: Effort,
    granularity: u64,
    mut trial: impl FnMut(u64) -> Result<Trial, Error>,
) -> Result<Measurement, Error> {
    let (target_ns, granularity) = (effort.target_ns(), granularity.max(1));
    let mut ops = size(target_ns, granularity, &mut trial)?;
    // The warm-up. One that ran well short of the target shows that sizing
    // was misled (a preemption in its last trial): size again from it.
    for _ in 0..MAX_RESIZES {
        let ns = trial(ops)?.ns.max(1.0);
        if ns >= target_ns / 2.0 || ops >= MAX_OPS {
            break;
        }
        ops = scale(ops, target_ns, ns, granularity);
    }
    let figures = (0..effort.trials()).map(|_| trial(ops).map(|t| t.figure)).collect::<Result<Vec<f64>, Error>>()?;
    Ok(summarise(bench, ops, figures))
}

/// Returns the number of operations, a multiple of `granularity`, that
/// makes a trial last about `target_ns`.
fn size(target_ns: f64, granularity: u64, trial: &mut impl FnMut(u64) -> Result<Trial, Error>) -> Result<u64, Error> {
    let mut ops = granularity;
    loop {
        let ns = trial(ops)?.ns.max(1.0);
        if ns >= target_ns / 4.0 || ops >= MAX_OPS {
            return Ok(scale(ops, target_ns, ns, granularity));
        }
        let factor = (target_ns / 2.0 / ns).clamp(2.0, 1000.0) as u64;
        ops = ops.saturating_mul(factor).min(MAX_OPS);
    }
}

/// Returns `ops`, which took `ns`, scaled to take `target_ns`, in whole
/// granules.
fn scale(ops: u64, target_ns: f64, ns: f64, granularity: u64) -> u64 {
    let granules = (ops as f64 * target_ns / ns / granularity as f64).ceil() as u64;
    granules.max(1).saturating_mul(granularity).min(MAX_OPS)
}

/// Returns the measurement of the trials' figures.
fn summarise(bench: Bench, ops: u64, mut figures: Vec<f64>) -> Measurement {
    figures.sort_by(f64::total_cmp);
    let n = figures.len();
    let median = match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => figures[n / 2],
        _ => (figures[n / 2 - 1] + figures[n / 2]) / 2.0,
    };
    Measurement {
        bench,
        median,
        min: figures.first().copied().unwrap_or(f64::NAN),
        max: figures.last().copied().unwrap_or(f64::NAN),
        trials: n as u32,
        ops_per_trial: ops,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trial of a fake operation that takes `ns_per_op` ns, its figure the
    /// trial's index, counting its calls.
    fn fake(ns_per_op: f64, calls: &mut Vec<u64>) -> impl FnMut(u64) -> Result<Trial, Error> + '_ {
        move |ops| {
            calls.push(ops);
            Ok(Trial { ns: ops as f64 * ns_per_op, figure: calls.len() as f64 })
        }
    }

    #[test]
    fn sizes_to_the_target_in_whole_granules() {
        let mut calls = Vec::new();
        let ops = size(1e6, 4096, &mut fake(1000.0, &mut calls)).unwrap();
        // One 4096-page trial lasts 4.1 ms, above a quarter of 1 ms: one whole granule.
        assert_eq!((ops, calls.as_slice()), (4096, &[4096][..]));
        let mut calls = Vec::new();
        let ops = size(25e6, 1, &mut fake(100.0, &mut calls)).unwrap();
        assert_eq!(calls, [1, 1000, 125_000]);
        assert_eq!(ops, 250_000);
    }

    #[test]
    fn runs_one_warm_up_then_the_effort_s_trials() {
        let mut calls = Vec::new();
        let m = run(Bench::NullSyscall, Effort::Quick, 1, fake(1e6, &mut calls)).unwrap();
        // Sizing (1 call), warm-up (call 2), trials: figures 3, 4, 5.
        assert_eq!(calls.len(), 5);
        assert_eq!((m.min, m.median, m.max, m.trials, m.ops_per_trial), (3.0, 4.0, 5.0, 3, 1));
    }

    #[test]
    fn a_warm_up_far_short_of_the_target_resizes() {
        let mut calls = Vec::new();
        let mut trial = |ops: u64| {
            calls.push(ops);
            // The sizing trial is preempted for 10 ms; the rest take 1 us an op.
            let stall = if calls.len() == 1 { 10e6 } else { 0.0 };
            Ok(Trial::per_op(stall + ops as f64 * 1e3, ops))
        };
        let m = run(Bench::Mmap, Effort::Full, 1, &mut trial).unwrap();
        // 1 op in 10 ms sizes to 3 for 25 ms; their warm-up (3 us) resizes
        // to 25000, whose warm-up lasts the target; then 11 trials.
        assert_eq!(calls[..3], [1, 3, 25_000]);
        assert_eq!(calls[3..], [25_000; 11]);
        assert_eq!(m.ops_per_trial, 25_000);
    }

    #[test]
    fn median_of_an_even_count_is_the_mean_of_the_middle_two() {
        let m = summarise(Bench::Zeroing, 1, vec![4.0, 1.0, 3.0, 2.0]);
        assert_eq!((m.min, m.median, m.max), (1.0, 2.5, 4.0));
    }
}
