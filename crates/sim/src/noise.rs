//! What varies from one run of a real machine to the next although the program
//! and the kernel are the same, drawn from the run's seed: the phase of the
//! periodic tick, and how long an IPI takes to reach its target (a flush IPI's,
//! and the reschedule IPI that wakes an idle CPU). Cost figures stay means:
//! every draw here is mean-preserving, so a seed moves a run around the result
//! it had before, never on average away from it. `docs/costs/kernel.md`
//! ("Seed-drawn noise") keeps the sources and estimates.
//!
//! - **Tick phase.** The tick is `HZ`-periodic (1000) on every CPU, and on
//!   Linux every CPU's tick is on the same jiffy grid:
//!   `tick_setup_sched_timer` (`kernel/time/tick-sched.c`) sets each CPU's
//!   `sched_timer` to `tick_init_jiffy_update()`, the last jiffy update, and
//!   offsets it by CPU only with the `skew_tick=1` boot option (off by
//!   default); a CPU leaving `NO_HZ` idle forwards its timer from `last_tick`,
//!   on the same grid. FreeBSD's `configtimer` (`sys/kern/kern_clocksource.c`)
//!   likewise gives every CPU the same `nexthard`. What a run cannot know is
//!   where its start falls between two ticks: the phase, the same on every CPU,
//!   is drawn uniformly from `[0, 1/HZ)` once per run. The scheduler's tick
//!   (the fair classes' preemption and balancing), a ticking policy's timer
//!   and `jiffies` all follow it.
//! - **IPI delivery.** An IPI is a message through the same ring or mesh as a
//!   cache line, and how long it takes varies with the path and what it meets
//!   on it, and with what the target is doing when it arrives. No published
//!   distribution of IPI delivery was found; the spread is an estimate from the
//!   spread of in-socket core-to-core latencies (nviennot/core-to-core-latency:
//!   the pairs of one socket lie from 15–26% below to 21–24% above their
//!   median on the three parts `docs/costs/icx8358.md`, `hsw48.md` and
//!   `haswell2s.md` quote; ±20% taken), applied to the whole
//!   delivery latency (`ipi_deliver`, plus `ipi_cross_socket` across sockets):
//!   each IPI's is drawn uniformly from `[0.8, 1.2]` times it, whose mean is it.
//! - **Wake-up latency.** An idle CPU woken by a reschedule IPI starts after
//!   that IPI's delivery, drawn as above from a stream of its own, and its
//!   idle state's exit latency (`sim/idle.rs`), which is not drawn: the
//!   kernel's tables give one figure per state. A polling CPU, woken with no
//!   IPI by a store to its thread flags, draws that line's transfer the same
//!   way from the same stream: the spread above is the core-to-core line's.
//!
//! Each purpose draws from its own ChaCha8 stream of the seed (the run's other
//! draws, speculative fills and `--set jitter`, are stream 0 of the same key),
//! so the draws of one purpose never shift another's: two policies compared
//! over a seed meet the same tick phase and the same sequence of wake-up
//! latencies, however many flush IPIs each sends. `--set noise=off` (and
//! [`crate::sim::SimConfig::quiet`]) draws nothing: every tick on the grid from
//! time 0 and every latency its mean, as runs were before the noise existed.

use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

/// The ChaCha8 stream of each purpose (stream 0 is the run's main generator).
const STREAM_TICK: u64 = 1;
const STREAM_IPI: u64 = 2;
const STREAM_WAKE: u64 = 3;

/// The relative half-width of an IPI's delivery latency around its mean (an
/// estimate: module docs).
pub const IPI_SPREAD: f64 = 0.2;

/// A run's seed-drawn hardware noise (module docs).
#[derive(Clone, Debug)]
pub struct Noise {
    /// Where the run's start falls in the tick period, as a fraction of it.
    tick_frac: f64,
    /// `None`: no noise; every latency is its mean.
    streams: Option<Streams>,
}

#[derive(Clone, Debug)]
struct Streams {
    ipi: ChaCha8Rng,
    wake: ChaCha8Rng,
}

/// Returns the generator of `stream` of `seed`.
fn stream(seed: u64, stream: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    r.set_stream(stream);
    r
}

/// Returns a uniform number in [0, 1) from `r`.
fn unit(r: &mut ChaCha8Rng) -> f64 {
    (r.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// Returns `mean` scaled by a factor uniform in `[1 - IPI_SPREAD, 1 + IPI_SPREAD]`,
/// rounded to the nearest cycle.
fn spread(r: &mut ChaCha8Rng, mean: u64) -> u64 {
    if mean == 0 {
        return 0;
    }
    (mean as f64 * (1.0 + IPI_SPREAD * (2.0 * unit(r) - 1.0))).round() as u64
}

impl Noise {
    /// No noise: the tick on the grid from 0, every latency its mean.
    pub fn off() -> Self {
        Noise { tick_frac: 0.0, streams: None }
    }

    /// The noise of a run of `seed`.
    pub fn from_seed(seed: u64) -> Self {
        let tick_frac = unit(&mut stream(seed, STREAM_TICK));
        Noise { tick_frac, streams: Some(Streams { ipi: stream(seed, STREAM_IPI), wake: stream(seed, STREAM_WAKE) }) }
    }

    /// Returns the time of the first tick, every CPU's, for a tick of `period`
    /// cycles: later ticks come every `period` after it.
    pub fn tick_phase(&self, period: u64) -> u64 {
        ((self.tick_frac * period as f64) as u64).min(period.saturating_sub(1))
    }

    /// Returns the delivery latency of one IPI whose mean is `mean` cycles.
    pub fn ipi_delivery(&mut self, mean: u64) -> u64 {
        match &mut self.streams {
            Some(s) => spread(&mut s.ipi, mean),
            None => mean,
        }
    }

    /// Returns the delivery latency of the reschedule IPI that wakes an idle
    /// CPU, whose mean is `mean` cycles.
    pub fn wake_delivery(&mut self, mean: u64) -> u64 {
        match &mut self.streams {
            Some(s) => spread(&mut s.wake, mean),
            None => mean,
        }
    }
}

/// Returns the first tick after `now` of a tick every `period` cycles from
/// `phase` (`phase < period`).
pub fn next_tick(now: u64, period: u64, phase: u64) -> u64 {
    if now < phase {
        phase
    } else {
        phase + ((now - phase) / period + 1) * period
    }
}

/// Returns the ticks at or before `now` of a tick every `period` cycles from
/// `phase`, the first not counted when `phase` is 0 (time 0 is tick 0):
/// `jiffies` since the run started.
pub fn ticks_by(now: u64, period: u64, phase: u64) -> u64 {
    (now + (period - phase) % period) / period
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_noise_ticks_and_latencies_are_what_they_were() {
        let mut n = Noise::off();
        assert_eq!(n.tick_phase(1000), 0);
        assert_eq!((next_tick(0, 1000, 0), next_tick(999, 1000, 0), next_tick(1000, 1000, 0)), (1000, 1000, 2000));
        assert_eq!((ticks_by(999, 1000, 0), ticks_by(1000, 1000, 0)), (0, 1));
        assert_eq!((n.ipi_delivery(1200), n.wake_delivery(1200)), (1200, 1200));
    }

    #[test]
    fn a_phase_moves_the_grid_and_jiffies_with_it() {
        assert_eq!((next_tick(0, 1000, 300), next_tick(300, 1000, 300), next_tick(1299, 1000, 300)), (300, 1300, 1300));
        assert_eq!((ticks_by(299, 1000, 300), ticks_by(300, 1000, 300), ticks_by(1300, 1000, 300)), (0, 1, 2));
    }

    #[test]
    fn a_seed_gives_one_noise_and_seeds_differ() {
        let draw = |seed| {
            let mut n = Noise::from_seed(seed);
            let mut v: Vec<u64> = (0..4).map(|_| n.ipi_delivery(1000)).collect();
            v.extend((0..4).map(|_| n.wake_delivery(1000)));
            (n.tick_phase(1_000_000), v)
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        assert_ne!(draw(7).0, draw(8).0);
    }

    #[test]
    fn delivery_stays_within_its_spread_and_keeps_its_mean() {
        let mut n = Noise::from_seed(1);
        let k = 200_000;
        let draws: Vec<u64> = (0..k).map(|_| n.ipi_delivery(1000)).collect();
        assert!(draws.iter().all(|&d| (800..=1200).contains(&d)));
        let mean = draws.iter().sum::<u64>() as f64 / k as f64;
        // A uniform of half-width 200 has a standard deviation of 115; the
        // mean of 200000 draws is within 1 cycle of 1000 (4 sigma).
        assert!((mean - 1000.0).abs() < 1.0, "{mean}");
    }

    #[test]
    fn one_purposes_draws_do_not_shift_anothers() {
        let mut a = Noise::from_seed(5);
        let mut b = Noise::from_seed(5);
        for _ in 0..10 {
            a.ipi_delivery(1000);
        }
        let wa: Vec<u64> = (0..5).map(|_| a.wake_delivery(1000)).collect();
        let wb: Vec<u64> = (0..5).map(|_| b.wake_delivery(1000)).collect();
        assert_eq!(wa, wb);
    }
}
