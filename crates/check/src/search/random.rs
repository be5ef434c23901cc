//! Randomised search: uniformly random schedules, or PCT's
//! ([`super::pct`]), each execution seeded from one seed.

use super::pct::Pct;
use super::{ChoiceKind, Chooser, Outcome, Pick, Stats};
use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

/// Uniformly random choices from one seeded generator.
struct Random {
    rng: ChaCha8Rng,
}

impl Chooser for Random {
    fn choose(&mut self, _point: ChoiceKind, labels: &[u32], _state: u128) -> Pick {
        Pick::Take((self.rng.next_u64() % labels.len() as u64) as usize)
    }
}

/// Which randomised strategy to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Randomised {
    /// Uniformly random choices.
    Random,
    /// PCT with this bug depth.
    Pct(usize),
}

/// Runs `iterations` executions with randomised choices seeded from `seed`,
/// stopping at the first violation.
pub fn randomised(
    run: &mut dyn FnMut(&mut dyn Chooser) -> Outcome,
    how: Randomised,
    iterations: u64,
    seed: u64,
) -> (Stats, Option<Outcome>) {
    let mut stats = Stats::default();
    // PCT needs an estimate of the steps per execution to place change points.
    let mut est = 200usize;
    for it in 0..iterations {
        let rng = ChaCha8Rng::seed_from_u64(seed ^ it.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let out = match how {
            Randomised::Random => run(&mut Random { rng }),
            Randomised::Pct(depth) => run(&mut Pct::new(rng, depth, est)),
        };
        stats.executions += 1;
        stats.max_steps = stats.max_steps.max(out.steps);
        est = est.max(out.steps);
        if out.violation.is_some() {
            return (stats, Some(out));
        }
    }
    stats.complete = true;
    (stats, None)
}
