//! Search strategies, each a [`Chooser`] behind the one execution engine
//! ([`crate::exec::run`]), one file each: exhaustive depth-first search with
//! state hashing ([`exhaustive()`], its chooser in `dfs.rs`, its visited set in
//! `visited.rs`; several threads: [`exhaustive_parallel`]), uniformly random
//! schedules and PCT (probabilistic concurrency testing, Burckhardt et al.,
//! ASPLOS 2010; [`randomised`]), and replay of a recorded schedule
//! ([`Replay`]). Then the shrinking of a counterexample to the fewest context
//! switches ([`shrink()`]).

mod dfs;
mod exhaustive;
mod parallel;
mod pct;
mod random;
mod replay;
mod shrink;
mod visited;

pub use dfs::{with_checkpoints, with_local_steps, with_reduction, with_renaming};
pub use exhaustive::exhaustive;
pub use parallel::{exhaustive_parallel, Worker};
pub use random::{randomised, Randomised};
pub use replay::Replay;
pub use shrink::shrink;

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
