//! PCT, probabilistic concurrency testing (Burckhardt et al., ASPLOS 2010):
//! random priorities with a few random change points.

use super::{ChoiceKind, Chooser, Pick};
use rand_chacha::ChaCha8Rng;
use rand_core::Rng;

/// PCT: every actor (a CPU stepping, a store buffer draining) gets a random
/// priority, the highest runnable one steps, and at `depth - 1` random change
/// points the one that stepped drops below every other.
pub(super) struct Pct {
    rng: ChaCha8Rng,
    /// Priority per label (`2 * cpu + drain`); higher runs first.
    prio: Vec<u64>,
    /// Steps at which the running actor's priority drops.
    changes: Vec<usize>,
    step: usize,
    low: u64,
}

impl Pct {
    /// Returns the PCT chooser of one execution with bug depth `depth`: its
    /// `depth - 1` change points drawn from `rng` among the first `est` steps
    /// (an estimate of the steps of an execution), before any priority.
    pub(super) fn new(mut rng: ChaCha8Rng, depth: usize, est: usize) -> Self {
        let changes = (1..depth).map(|_| 1 + (rng.next_u64() % est as u64) as usize).collect();
        Pct { rng, prio: Vec::new(), changes, step: 0, low: 1 << 20 }
    }
}

impl Chooser for Pct {
    fn choose(&mut self, point: ChoiceKind, labels: &[u32], _state: u128) -> Pick {
        if point != ChoiceKind::Sched {
            return Pick::Take((self.rng.next_u64() % labels.len() as u64) as usize);
        }
        self.step += 1;
        for &l in labels {
            let l = l as usize;
            if l >= self.prio.len() {
                self.prio.resize(l + 1, 0);
            }
            if self.prio[l] == 0 {
                // Fresh actors get a random high priority.
                self.prio[l] = (self.rng.next_u64() >> 8) + (1 << 40);
            }
        }
        let (i, &best) =
            labels.iter().enumerate().max_by_key(|(_, &l)| self.prio[l as usize]).expect("at least two options");
        if self.changes.contains(&self.step) {
            self.low -= 1;
            self.prio[best as usize] = self.low;
        }
        Pick::Take(i)
    }
}
