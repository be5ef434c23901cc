//! Exhaustive search with several worker threads sharing one visited set,
//! the work split by subtrees.

use super::dfs::{backtrack, Dfs, Node, Switches, SWITCHES};
use super::visited::{visit, Visited};
use super::{recycle_choices, Choice, Chooser, Outcome, Stats};

/// One worker's part of a parallel exhaustive search: the subtree below a
/// prefix of choices, explored depth-first as [`exhaustive`](fn@super::exhaustive) does.
struct Subtree {
    /// The choices of the current execution; the first `frozen` are the
    /// subtree's root and never change.
    stack: Vec<Choice>,
    frozen: usize,
    /// Per choice of `stack`: one past the last option this worker explores
    /// there (the rest were given to other workers).
    ends: Vec<u32>,
    nodes: Vec<Node>,
}

/// A subtree to explore: the choices to its root and what the search keeps
/// for each.
type Root = (Vec<Choice>, Vec<Node>);

/// The state the workers of [`exhaustive_parallel`] share.
struct Shared {
    /// Subtree roots not yet taken, and how many workers are exploring.
    work: std::sync::Mutex<(Vec<Root>, usize)>,
    wake: std::sync::Condvar,
    /// The visited set, in shards locked one at a time (by bits of the hash).
    visited: Vec<Shard>,
    executions: std::sync::atomic::AtomicU64,
    pruned: std::sync::atomic::AtomicU64,
    max_steps: std::sync::atomic::AtomicUsize,
    /// Set when a violation is found or the execution cap is reached.
    stop: std::sync::atomic::AtomicBool,
    found: std::sync::Mutex<Option<Outcome>>,
}

/// A shard of the visited set, alone on its cache lines (two adjacent
/// shards on one line would bounce it between the workers that lock them).
#[repr(align(128))]
struct Shard(std::sync::Mutex<Visited>);

/// Shards of [`Shared::visited`].
const SHARDS: usize = 64;

impl Shared {
    fn visit(&self, state: u64, asleep: u64) -> Option<u64> {
        // Bits the shard's own table does not index its slots by (the low bits).
        let shard = (state >> 32) as usize % SHARDS;
        visit(&mut self.visited[shard].0.lock().expect("no worker panicked holding a shard"), state, asleep)
    }
}

/// A worker's loop, which [`exhaustive_parallel`] hands to `each` on the
/// worker's thread: `each` calls it once with that thread's way to run one
/// execution.
pub type Worker<'w> = &'w mut dyn FnMut(&mut dyn FnMut(&mut dyn Chooser) -> Outcome);

/// Explores every execution as [`exhaustive`](fn@super::exhaustive) does, with `jobs` threads that
/// share one visited set. On each thread, `each` is called once with the
/// worker's loop, which it must call with that thread's way to run one
/// execution (each thread builds its own policies in its own arena, see
/// [`crate::arena`]).
///
/// The work is split by subtrees: a worker explores the subtree below a prefix
/// of choices depth-first, and while another worker waits for work it gives
/// away the remaining options of its shallowest open choice, each option the
/// root of a subtree of its own. Pruning at a state any worker has visited is
/// sound for the same reason it is in [`exhaustive`](fn@super::exhaustive) (the state hash covers
/// everything that decides what can happen next), so a complete search visits
/// the same set of states whatever the interleaving of the workers: `states`
/// does not depend on `jobs` when the search completes, unless local steps
/// are explored alone (with sleep sets, the states they leave out depend on
/// the order: see the crate documentation). `executions` and
/// `pruned` do, and so does which violation is found first when there are
/// several; callers that need the same counterexample for every `jobs`
/// re-search with one worker (see [`crate::run::check_exhaustive_jobs`]).
pub fn exhaustive_parallel(
    each: &(dyn Fn(Worker<'_>) + Sync),
    jobs: usize,
    max_executions: u64,
) -> (Stats, Option<Outcome>) {
    use std::sync::atomic::Ordering::Relaxed;
    let shared = Shared {
        work: std::sync::Mutex::new((vec![(Vec::new(), Vec::new())], 0)),
        wake: std::sync::Condvar::new(),
        visited: (0..SHARDS).map(|_| Shard(std::sync::Mutex::new(Visited::default()))).collect(),
        executions: 0.into(),
        pruned: 0.into(),
        max_steps: 0.into(),
        stop: false.into(),
        found: std::sync::Mutex::new(None),
    };
    let switches = SWITCHES.with(std::cell::Cell::get);
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| {
                // A worker that panics stops the others, which would wait for
                // it forever; the scope then passes the panic on.
                let _stop = StopOnPanic(&shared);
                each(&mut |run| {
                    while let Some(root) = take_work(&shared) {
                        explore(run, root, &shared, max_executions, switches);
                        let mut w = shared.work.lock().expect("no worker panicked holding the queue");
                        w.1 -= 1;
                        if w.0.is_empty() && w.1 == 0 {
                            shared.wake.notify_all();
                        }
                    }
                })
            });
        }
    });
    let stopped = shared.stop.load(Relaxed);
    let found = shared.found.into_inner().expect("no worker panicked holding the result");
    let executions = shared.executions.load(Relaxed);
    let stats = Stats {
        executions,
        states: shared.visited.iter().map(|v| v.0.lock().expect("no worker panicked").len() as u64).sum(),
        pruned: shared.pruned.load(Relaxed),
        max_steps: shared.max_steps.load(Relaxed),
        // The workers stop early only at a violation or at the cap.
        complete: !stopped,
    };
    (stats, found)
}

/// Stops the search and wakes every waiting worker if the worker holding it
/// unwinds.
struct StopOnPanic<'a>(&'a Shared);

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // Under the queue's lock (poisoned or not), so that no worker
            // between its look at `stop` and its wait misses the wake-up.
            let _queue = self.0.work.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            self.0.stop.store(true, std::sync::atomic::Ordering::Relaxed);
            self.0.wake.notify_all();
        }
    }
}

/// Waits for a subtree to explore; `None` when the search is over (no work
/// left and no worker that could make more, or a stop).
fn take_work(shared: &Shared) -> Option<Root> {
    let mut w = shared.work.lock().expect("no worker panicked holding the queue");
    loop {
        if shared.stop.load(std::sync::atomic::Ordering::Relaxed) {
            shared.wake.notify_all();
            return None;
        }
        if let Some(root) = w.0.pop() {
            w.1 += 1;
            return Some(root);
        }
        if w.1 == 0 {
            shared.wake.notify_all();
            return None;
        }
        w = shared.wake.wait(w).expect("no worker panicked holding the queue");
    }
}

/// Explores the subtree below `root` depth-first, giving away work when other
/// workers wait for it.
fn explore(
    run: &mut dyn FnMut(&mut dyn Chooser) -> Outcome,
    root: Root,
    shared: &Shared,
    max: u64,
    switches: Switches,
) {
    use std::sync::atomic::Ordering::Relaxed;
    let (root, nodes) = root;
    let frozen = root.len();
    let mut t = Subtree { ends: root.iter().map(|c| c.taken + 1).collect(), stack: root, frozen, nodes };
    loop {
        if shared.stop.load(Relaxed) {
            return;
        }
        if shared.executions.fetch_add(1, Relaxed) >= max {
            shared.executions.fetch_sub(1, Relaxed);
            shared.stop.store(true, Relaxed);
            return;
        }
        let out = {
            let mut v = |state, asleep| shared.visit(state, asleep);
            let mut d = Dfs::new(&t.stack, &mut t.nodes, &mut v, switches);
            run(&mut d)
        };
        shared.max_steps.fetch_max(out.steps, Relaxed);
        if out.pruned {
            shared.pruned.fetch_add(1, Relaxed);
        }
        if out.violation.is_some() {
            let mut f = shared.found.lock().expect("no worker panicked holding the result");
            if f.is_none() {
                *f = Some(out);
            }
            shared.stop.store(true, Relaxed);
            return;
        }
        // Choices past the stack are new: this worker owns all their options.
        let known = t.stack.len();
        recycle_choices(std::mem::replace(&mut t.stack, out.choices));
        t.ends.truncate(known.min(t.stack.len()));
        t.ends.extend(t.stack[t.ends.len()..].iter().map(|c| c.n));
        // Backtrack to the deepest choice with an option of ours left.
        if !backtrack(&mut t.stack, &mut t.nodes, t.frozen, Some(&mut t.ends)) {
            return;
        }
        give_away(&mut t, shared);
    }
}

/// While a worker waits for work, hands it the untaken options of this
/// worker's shallowest open choice, each as a subtree root.
fn give_away(t: &mut Subtree, shared: &Shared) {
    let mut w = shared.work.lock().expect("no worker panicked holding the queue");
    if !w.0.is_empty() {
        return;
    }
    let Some(i) = (t.frozen..t.stack.len()).find(|&i| t.nodes[i].next_option(t.stack[i].taken, t.ends[i]).is_some())
    else {
        return;
    };
    // The subtrees given away sleep on what this worker explored here (with
    // what it touched); the options given away have not run, so they cannot.
    let mut node = t.nodes[i].clone();
    if let Some(f) = node.foot.take() {
        node.done.push((node.labels[t.stack[i].taken as usize].into(), f));
    }
    let mut k = t.stack[i].taken;
    while let Some(j) = node.next_option(k, t.ends[i]) {
        let mut root = t.stack[..i].to_vec();
        root.push(Choice { taken: j, ..t.stack[i] });
        let mut nodes = t.nodes[..i].to_vec();
        nodes.push(node.clone());
        w.0.push((root, nodes));
        k = j;
    }
    t.ends[i] = t.stack[i].taken + 1;
    shared.wake.notify_all();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker whose execution panics stops the search: the others, waiting
    /// for the work it held, are woken and the panic comes out of the search
    /// instead of every other worker waiting for it forever.
    #[test]
    fn a_worker_that_panics_stops_the_search() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let each =
                |worker: Worker<'_>| worker(&mut |_: &mut dyn Chooser| -> Outcome { panic!("an execution failed") });
            let out = std::panic::catch_unwind(|| exhaustive_parallel(&each, 3, u64::MAX));
            tx.send(out.is_err()).expect("the test waits");
        });
        let panicked = rx.recv_timeout(std::time::Duration::from_secs(60)).expect("the search ended");
        assert!(panicked, "the worker's panic came out of the search");
    }
}
