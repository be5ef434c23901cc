//! Search strategies, each a [`Chooser`] behind the one execution engine
//! ([`crate::exec::run`]): exhaustive depth-first search with state hashing,
//! uniformly random schedules, PCT (probabilistic concurrency testing,
//! Burckhardt et al., ASPLOS 2010), and replay of a recorded schedule. Then the
//! shrinking of a counterexample to the fewest context switches.

use crate::exec::{Choice, Chooser, Outcome, Pick, Point};
use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};
use std::collections::HashSet;

/// Replays a schedule: choice `i` takes `choices[i]` (clamped to the options
/// there), and every choice past the end takes option 0 (no preemption, the
/// first operation offered).
pub struct Replay<'a> {
    choices: &'a [u32],
    at: usize,
}

impl<'a> Replay<'a> {
    /// Returns a chooser that follows `choices`.
    pub fn new(choices: &'a [u32]) -> Self {
        Replay { choices, at: 0 }
    }
}

impl Chooser for Replay<'_> {
    fn choose(&mut self, _point: Point, labels: &[u32], _state: u64) -> Pick {
        let i = self.choices.get(self.at).copied().unwrap_or(0) as usize;
        self.at += 1;
        Pick::Take(i.min(labels.len() - 1))
    }
}

/// Depth-first search over every choice, replaying a prefix and pruning at any
/// state seen before.
struct Dfs<'a> {
    prefix: &'a [Choice],
    at: usize,
    visited: &'a mut HashSet<u64>,
}

impl Chooser for Dfs<'_> {
    fn choose(&mut self, point: Point, labels: &[u32], state: u64) -> Pick {
        let i = self.at;
        self.at += 1;
        if let Some(c) = self.prefix.get(i) {
            debug_assert_eq!(c.n as usize, labels.len(), "a replayed prefix took another path");
            return Pick::Take(c.taken as usize);
        }
        if point == Point::Sched && !self.visited.insert(state) {
            return Pick::Prune;
        }
        Pick::Take(0)
    }

    fn wants_state(&self) -> bool {
        true
    }
}

/// What a search did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Executions run.
    pub executions: u64,
    /// Distinct states reached (exhaustive mode).
    pub states: u64,
    /// Executions cut short at a state seen before.
    pub pruned: u64,
    /// The longest execution, in steps.
    pub max_steps: usize,
    /// Whether the search covered everything it set out to (exhaustive: the whole
    /// state space; random/PCT: every iteration asked for).
    pub complete: bool,
}

/// Explores every execution of `run` (a closure running one execution with the
/// given chooser) depth-first, stopping at the first violation or after
/// `max_executions`. Returns the statistics and the violating execution.
pub fn exhaustive(run: &mut dyn FnMut(&mut dyn Chooser) -> Outcome, max_executions: u64) -> (Stats, Option<Outcome>) {
    let mut visited = HashSet::new();
    let mut stack: Vec<Choice> = Vec::new();
    let mut stats = Stats::default();
    loop {
        if stats.executions >= max_executions {
            stats.states = visited.len() as u64;
            return (stats, None);
        }
        let out = {
            let mut d = Dfs { prefix: &stack, at: 0, visited: &mut visited };
            run(&mut d)
        };
        stats.executions += 1;
        stats.max_steps = stats.max_steps.max(out.steps);
        if out.pruned {
            stats.pruned += 1;
        }
        if out.violation.is_some() {
            stats.states = visited.len() as u64;
            return (stats, Some(out));
        }
        stack = out.choices;
        // Backtrack to the deepest choice with an option left.
        while let Some(last) = stack.last_mut() {
            if last.taken + 1 < last.n {
                last.taken += 1;
                break;
            }
            stack.pop();
        }
        if stack.is_empty() {
            stats.states = visited.len() as u64;
            stats.complete = true;
            return (stats, None);
        }
    }
}

/// Uniformly random choices from one seeded generator.
struct Random {
    rng: ChaCha8Rng,
}

impl Chooser for Random {
    fn choose(&mut self, _point: Point, labels: &[u32], _state: u64) -> Pick {
        Pick::Take((self.rng.next_u64() % labels.len() as u64) as usize)
    }
}

/// PCT: every actor (a CPU stepping, a store buffer draining) gets a random
/// priority, the highest runnable one steps, and at `depth - 1` random change
/// points the one that stepped drops below every other.
struct Pct {
    rng: ChaCha8Rng,
    /// Priority per label (`2 * cpu + drain`); higher runs first.
    prio: Vec<u64>,
    /// Steps at which the running actor's priority drops.
    changes: Vec<usize>,
    step: usize,
    low: u64,
}

impl Chooser for Pct {
    fn choose(&mut self, point: Point, labels: &[u32], _state: u64) -> Pick {
        if point == Point::Op {
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
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ it.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let out = match how {
            Randomised::Random => run(&mut Random { rng }),
            Randomised::Pct(depth) => {
                let changes = (1..depth).map(|_| 1 + (rng.next_u64() % est as u64) as usize).collect();
                run(&mut Pct { rng, prio: Vec::new(), changes, step: 0, low: 1 << 20 })
            }
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

/// Shrinks a violating schedule: every scheduling choice that can be made the
/// non-preempting one (option 0) while a violation of the same property is
/// still reached is made so, until nothing changes. Returns the shrunk choices.
pub fn shrink(run: &mut dyn FnMut(&mut dyn Chooser) -> Outcome, found: &Outcome) -> Vec<u32> {
    let property = found.violation.as_ref().map(|v| v.property);
    let mut best: Vec<Choice> = found.choices.clone();
    let takes = |c: &[Choice]| c.iter().map(|c| c.taken).collect::<Vec<u32>>();
    loop {
        let mut changed = false;
        let mut i = 0;
        while i < best.len() {
            if best[i].point == Point::Sched && best[i].taken != 0 {
                let mut trial = takes(&best);
                trial[i] = 0;
                let out = run(&mut Replay::new(&trial));
                if out.violation.as_ref().map(|v| v.property) == property {
                    best = out.choices;
                    changed = true;
                }
            }
            i += 1;
        }
        if !changed {
            break;
        }
    }
    // Trailing zeros are what replay does anyway.
    let mut t = takes(&best);
    while t.last() == Some(&0) {
        t.pop();
    }
    t
}
