//! Exhaustive search on one thread: every execution, depth first.

use super::dfs::{backtrack, Dfs, Node, SWITCHES};
use super::table::{Fingerprints, Table};
use super::{recycle_choices, Choice, Chooser, Outcome, Stats};

/// Explores every execution of `run` (a closure running one execution with the
/// given chooser) depth-first, stopping at the first violation or after
/// `max_executions`, its states kept as `fp` says. Returns the statistics
/// and the violating execution.
pub fn exhaustive(
    run: &mut dyn FnMut(&mut dyn Chooser) -> Outcome,
    fp: Fingerprints,
    max_executions: u64,
) -> (Stats, Option<Outcome>) {
    let visited = Table::new(fp);
    let mut stack: Vec<Choice> = Vec::new();
    let mut nodes: Vec<Node> = Vec::new();
    let mut stats = Stats::default();
    let switches = SWITCHES.with(std::cell::Cell::get);
    // What the visited set holds, as the search ends.
    let ended = |stats: Stats| Stats { states: visited.len() as u64, visited_bytes: visited.bytes(), ..stats };
    loop {
        if stats.executions >= max_executions {
            return (ended(stats), None);
        }
        let out = {
            let mut v = |state, asleep| visited.visit(state, asleep).0;
            let mut d = Dfs::new(&stack, &mut nodes, &mut v, switches);
            run(&mut d)
        };
        stats.executions += 1;
        if stats.executions.is_multiple_of(4096) {
            crate::progress::publish(stats.executions, Some(visited.len() as u64));
        }
        stats.max_steps = stats.max_steps.max(out.steps);
        if out.pruned {
            stats.pruned += 1;
        }
        if out.violation.is_some() {
            return (ended(stats), Some(out));
        }
        recycle_choices(std::mem::replace(&mut stack, out.choices));
        if !backtrack(&mut stack, &mut nodes, 0, None) {
            return (ended(Stats { complete: true, ..stats }), None);
        }
    }
}
