//! Search strategies, each a [`Chooser`] behind the one execution engine
//! ([`crate::exec::run`]): exhaustive depth-first search with state hashing,
//! uniformly random schedules, PCT (probabilistic concurrency testing,
//! Burckhardt et al., ASPLOS 2010), and replay of a recorded schedule. Then the
//! shrinking of a counterexample to the fewest context switches.

use crate::exec::{Choice, Chooser, Foot, Outcome, Pick, Point};
use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

/// A set of state hashes, each with the labels every visit so far left
/// asleep: an open-addressing table of `(hash, mask)` pairs probed linearly,
/// so that a visit of a state not seen before (the common case, and a cache
/// miss in a table of millions) touches one cache line. Its keys are state
/// hashes already (XXH3-64), so their low bits index it as they are.
#[derive(Default)]
struct Visited {
    /// `(hash, mask)`, a hash of 0 marking an empty slot; the length is a
    /// power of two (or 0 before the first visit).
    slots: Slots,
    /// The mask of the state whose hash is 0, if it was visited.
    zero: Option<u64>,
    len: usize,
}

impl Visited {
    /// Returns how many states it holds.
    fn len(&self) -> usize {
        self.len + self.zero.is_some() as usize
    }

    /// Returns the mask of `state`, inserting `asleep` first if it has none
    /// (then with `true`).
    fn entry(&mut self, state: u64, asleep: u64) -> (&mut u64, bool) {
        if state == 0 {
            let fresh = self.zero.is_none();
            return (self.zero.get_or_insert(asleep), fresh);
        }
        // At most three quarters full, so that probes stay short.
        if 4 * (self.len + 1) > 3 * self.slots.len() {
            self.grow();
        }
        let i = self.slot(state);
        let first = self.slots[i].0 == 0;
        if first {
            self.slots[i] = (state, asleep);
            self.len += 1;
        }
        (&mut self.slots[i].1, first)
    }

    /// Returns the slot that holds `state` (not 0), or the empty one where it
    /// goes: linear probing from the slot its low bits name.
    fn slot(&self, state: u64) -> usize {
        let mask = self.slots.len() - 1;
        let mut i = state as usize & mask;
        while self.slots[i].0 != state && self.slots[i].0 != 0 {
            i = (i + 1) & mask;
        }
        i
    }

    /// Doubles the table (16 slots at first) and puts every entry back.
    fn grow(&mut self) {
        let n = (2 * self.slots.len()).max(16);
        let old = std::mem::replace(&mut self.slots, Slots::new(n));
        for &(k, v) in old.iter().filter(|&&(k, _)| k != 0) {
            let i = self.slot(k);
            self.slots[i] = (k, v);
        }
    }
}

/// The visited table's slots, zeroed. Tables of 2 MiB and more are mapped
/// on their own and asked for transparent huge pages: a visit of a new state
/// reads a random slot of a table that reaches a gigabyte, and with 4 KiB
/// pages nearly every such read also missed the TLB (the page walk cost
/// about as much as the slot's own cache miss).
struct Slots {
    ptr: std::ptr::NonNull<(u64, u64)>,
    len: usize,
    /// Whether `ptr` is a mapping of its own (else a boxed slice's).
    mapped: bool,
}

// SAFETY: `Slots` owns its memory, as a `Vec` would.
unsafe impl Send for Slots {}

/// Tables this big or bigger are mapped with huge pages asked for.
const HUGE: usize = 2 << 20;

impl Default for Slots {
    fn default() -> Self {
        Slots { ptr: std::ptr::NonNull::dangling(), len: 0, mapped: false }
    }
}

impl Slots {
    /// Returns `len` zeroed slots.
    fn new(len: usize) -> Self {
        let bytes = len * std::mem::size_of::<(u64, u64)>();
        if bytes >= HUGE {
            // SAFETY: a fresh private anonymous mapping (zeroed by the kernel);
            // the advice only asks for huge pages, and failing it is harmless.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    bytes,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                // SAFETY: as above.
                unsafe { libc::madvise(p, bytes, libc::MADV_HUGEPAGE) };
                let ptr = std::ptr::NonNull::new(p as *mut (u64, u64)).expect("mmap returns no null mapping");
                return Slots { ptr, len, mapped: true };
            }
        }
        let boxed: Box<[(u64, u64)]> = vec![(0, 0); len].into_boxed_slice();
        // SAFETY: a box's pointer is never null.
        let ptr = unsafe { std::ptr::NonNull::new_unchecked(Box::into_raw(boxed) as *mut (u64, u64)) };
        Slots { ptr, len, mapped: false }
    }

    fn len(&self) -> usize {
        self.len
    }
}

impl std::ops::Deref for Slots {
    type Target = [(u64, u64)];
    fn deref(&self) -> &[(u64, u64)] {
        // SAFETY: `len` initialised slots, owned.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for Slots {
    fn deref_mut(&mut self) -> &mut [(u64, u64)] {
        // SAFETY: as for `deref`, and borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        if self.mapped {
            // SAFETY: our own mapping of this size.
            unsafe {
                libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len * std::mem::size_of::<(u64, u64)>())
            };
        } else if self.len > 0 {
            // SAFETY: the boxed slice `new` made, of `len` slots.
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.len)) });
        }
    }
}

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

/// A transition asleep at a scheduling point (the sleep sets of
/// partial-order reduction): a CPU's step, by label, and what it touched when
/// the search ran it.
type Asleep = (u32, Foot);

/// What the search keeps for each choice of the current path, beside the
/// choice itself (one node per choice, always: `nodes[i]` is `stack[i]`'s): at
/// a scheduling point, its labels, the transitions asleep on arrival, the ones
/// explored here before the current option (with their footprints), and the
/// footprint of the current option once it has run. An operation choice keeps
/// nothing: every option of it is explored.
#[derive(Clone, Debug, Default)]
struct Node {
    sched: bool,
    labels: Labels,
    sleep: Vec<Asleep>,
    done: Vec<Asleep>,
    foot: Option<Foot>,
    /// Labels this visit leaves alone (asleep, explored by an earlier visit,
    /// or left for a local step explored alone).
    skip: u64,
    /// When a local step is explored alone here: the labels to leave alone
    /// should it turn out not to be local after all.
    unless_local: Option<u64>,
}

/// A scheduling point's labels, held inline: a CPU's step or its store
/// buffer's drain, `2 * cpu` and `2 * cpu + 1`, so at most 16 of them for the
/// checker's 8 CPUs (one node per choice: a vector would be an allocation
/// each).
#[derive(Clone, Copy, Debug, Default)]
struct Labels {
    len: u8,
    at: [u8; 16],
}

impl Labels {
    fn new(labels: &[u32]) -> Self {
        let mut l = Labels { len: labels.len() as u8, at: [0; 16] };
        assert!(labels.len() <= l.at.len(), "more options than 8 CPUs have");
        for (a, &b) in l.at.iter_mut().zip(labels) {
            *a = u8::try_from(b).expect("a label of one of 8 CPUs");
        }
        l
    }

    fn len(&self) -> usize {
        self.len as usize
    }
}

impl std::ops::Index<usize> for Labels {
    type Output = u8;
    fn index(&self, k: usize) -> &u8 {
        &self.at[..self.len as usize][k]
    }
}

impl Node {
    /// Returns the next option after `taken` this visit explores.
    fn next_option(&self, taken: u32, n: u32) -> Option<u32> {
        (taken + 1..n).find(|&k| !self.sched || self.skip & (1 << self.labels[k as usize]) == 0)
    }

    /// Returns the transitions asleep after taking the current option: those
    /// asleep here or explored here before it that are independent of it.
    fn sleep_after(&self) -> Vec<Asleep> {
        let Some(f) = &self.foot else { return Vec::new() };
        self.sleep.iter().chain(&self.done).filter(|(_, u)| f.independent(u)).cloned().collect()
    }
}

/// The search's switches the soundness tests turn off to compare: all are on
/// by default.
#[derive(Clone, Copy)]
struct Switches {
    /// Partial-order reduction (sleep sets).
    reduce: bool,
    /// Local steps explored alone (persistent sets; only with `reduce`).
    local: bool,
    /// State hashes with frames and uids up to a renaming.
    rename: bool,
    /// Executions that start from a checkpoint instead of replaying their
    /// prefix ([`crate::exec::Checkpoints`]), where the caller runs them
    /// with [`crate::exec::run_from`].
    checkpoints: bool,
}

thread_local! {
    /// The switches of searches started on this thread (see [`with_reduction`]
    /// and [`with_renaming`]).
    static SWITCHES: std::cell::Cell<Switches> = const { std::cell::Cell::new(Switches { reduce: true, local: true, rename: true, checkpoints: true }) };
}

/// Runs `f` with the switches `set` makes for the exhaustive searches it starts
/// on this thread, their workers included; restores them after.
fn with_switches<T>(set: impl FnOnce(&mut Switches), f: impl FnOnce() -> T) -> T {
    let was = SWITCHES.with(std::cell::Cell::get);
    let mut now = was;
    set(&mut now);
    SWITCHES.with(|s| s.set(now));
    let out = f();
    SWITCHES.with(|s| s.set(was));
    out
}

/// Runs `f` with partial-order reduction `on` (it is on by default) for the
/// exhaustive searches it starts on this thread, their workers included: the
/// soundness tests compare the two.
pub fn with_reduction<T>(on: bool, f: impl FnOnce() -> T) -> T {
    with_switches(|s| s.reduce = on, f)
}

/// Runs `f` with local steps explored alone `on` (the default) for the
/// exhaustive searches it starts on this thread, their workers included (it
/// takes partial-order reduction on as well): the soundness tests compare the
/// two.
pub fn with_local_steps<T>(on: bool, f: impl FnOnce() -> T) -> T {
    with_switches(|s| s.local = on, f)
}

/// Runs `f` with the state hashes' renaming of frames and uids `on` (it is on
/// by default) for the exhaustive searches it starts on this thread, their
/// workers included: the soundness tests compare the two.
pub fn with_renaming<T>(on: bool, f: impl FnOnce() -> T) -> T {
    with_switches(|s| s.rename = on, f)
}

/// Runs `f` with checkpoints `on` (they are on by default) for the
/// exhaustive searches it starts on this thread, their workers included: with
/// them off, every execution replays its prefix from the beginning. The
/// soundness tests compare the two.
pub fn with_checkpoints<T>(on: bool, f: impl FnOnce() -> T) -> T {
    with_switches(|s| s.checkpoints = on, f)
}

/// Records a visit of `state` with the transitions in `asleep` (a mask of
/// labels) asleep, and returns the labels this visit leaves alone, or `None`
/// when it has nothing left to explore. The first visit explores every
/// transition not asleep; a later one only those every earlier visit left
/// asleep and this one does not (Godefroid's sleep sets with state caching:
/// the state keeps the intersection of its visits' sleep sets).
fn visit(map: &mut Visited, state: u64, asleep: u64) -> Option<u64> {
    let (mask, first) = map.entry(state, asleep);
    if first {
        return Some(asleep);
    }
    let before = *mask;
    let fresh = before & !asleep;
    if fresh == 0 {
        return None;
    }
    *mask = before & asleep;
    Some(!fresh)
}

/// Depth-first search over every choice, replaying a prefix and pruning at any
/// state seen before (`visit`, given the state and the mask of labels asleep,
/// says which labels to leave alone, or `None` to prune). With reduction on,
/// a CPU's step that is independent of the steps taken since it was explored
/// (or found asleep) is not explored again from here: the two orders reach the
/// same state (sleep sets).
struct Dfs<'a> {
    prefix: &'a [Choice],
    nodes: &'a mut Vec<Node>,
    at: usize,
    visit: &'a mut dyn FnMut(u64, u64) -> Option<u64>,
    switches: Switches,
    /// The last scheduling choice made, whose step's footprint comes next.
    last_sched: Option<usize>,
    /// The label of a local step at the next scheduling choice (with local
    /// steps on).
    local: Option<u32>,
}

impl<'a> Dfs<'a> {
    /// Returns the search's chooser for an execution that replays `prefix`
    /// (with its `nodes`) and then explores, visiting states with `visit`.
    fn new(
        prefix: &'a [Choice],
        nodes: &'a mut Vec<Node>,
        visit: &'a mut dyn FnMut(u64, u64) -> Option<u64>,
        switches: Switches,
    ) -> Self {
        Dfs { prefix, nodes, at: 0, visit, switches, last_sched: None, local: None }
    }
}

impl Chooser for Dfs<'_> {
    fn choose(&mut self, point: Point, labels: &[u32], state: u64) -> Pick {
        let i = self.at;
        self.at += 1;
        if let Some(c) = self.prefix.get(i) {
            debug_assert_eq!(c.n as usize, labels.len(), "a replayed prefix took another path");
            if point == Point::Sched {
                self.last_sched = Some(i);
            }
            return Pick::Take(c.taken as usize);
        }
        self.nodes.truncate(i);
        if point == Point::Op {
            self.nodes.push(Node::default());
            return Pick::Take(0);
        }
        let sleep = match self.last_sched {
            Some(p) if self.switches.reduce => self.nodes[p].sleep_after(),
            _ => Vec::new(),
        };
        let asleep = sleep.iter().fold(0u64, |m, (l, _)| m | 1 << l);
        // A local step is explored alone, and its state is not looked up: a
        // later visit runs the step again and meets the state after it. Should
        // the step turn out not to be local, every option not asleep is
        // explored, as at a first visit.
        let (skip, unless_local) = match self.local.take() {
            Some(l) => (asleep | !(1u64 << l), Some(asleep)),
            None => match (self.visit)(state, asleep) {
                Some(skip) => (skip, None),
                None => return Pick::Prune,
            },
        };
        let Some(first) = (0..labels.len()).find(|&k| skip & (1 << labels[k]) == 0) else {
            return Pick::Prune;
        };
        self.nodes.push(Node {
            sched: true,
            labels: Labels::new(labels),
            sleep,
            done: Vec::new(),
            foot: None,
            skip,
            unless_local,
        });
        self.last_sched = Some(i);
        Pick::Take(first)
    }

    /// Only past the replayed prefix: a prefix's states were visited by the
    /// execution that first took it, and hashing them again is most of the
    /// work of a re-execution.
    fn wants_state(&self) -> bool {
        self.at >= self.prefix.len() && self.local.is_none()
    }

    fn wants_footprint(&self) -> bool {
        self.switches.reduce && self.at >= self.prefix.len()
    }

    fn renames(&self) -> bool {
        self.switches.rename
    }

    fn stepped(&mut self, foot: Foot) {
        if let Some(p) = self.last_sched {
            self.nodes[p].foot = Some(foot);
        }
    }

    fn local(&mut self, label: u32) {
        if self.switches.local {
            self.local = Some(label);
        }
    }

    fn not_local(&mut self) {
        if let Some(p) = self.last_sched {
            if let Some(skip) = self.nodes[p].unless_local.take() {
                self.nodes[p].skip = skip;
            }
        }
    }

    /// Up to the prefix's last choice, which is the new one.
    fn replaying(&self) -> bool {
        self.at < self.prefix.len()
    }

    fn forced(&self) -> Option<&[Choice]> {
        self.switches.checkpoints.then_some(self.prefix)
    }

    /// Past the prefix, when the choice has an option this visit explores
    /// after the one taken; within it, always (another worker may own the
    /// rest of its options, which this one cannot tell).
    fn may_return(&self) -> bool {
        let i = self.at - 1;
        if i < self.prefix.len() {
            return true;
        }
        let node = &self.nodes[i];
        let taken = (0..node.labels.len()).find(|&k| node.skip & (1 << node.labels[k]) == 0);
        taken.is_some_and(|t| node.next_option(t as u32, node.labels.len() as u32).is_some())
    }

    /// The skipped choices are the prefix's, whose nodes the search keeps.
    fn skip(&mut self, made: usize, last_sched: Option<usize>) {
        debug_assert!(made <= self.prefix.len() && self.at == 0, "a checkpoint off the prefix");
        self.at = made;
        self.last_sched = last_sched;
    }
}

/// Moves the path `stack` (with its `nodes`) to the next choice to explore:
/// the deepest choice with an option this visit explores left, the option it
/// leaves recorded as explored. Returns `false` when none is left below
/// `frozen` choices.
fn backtrack(stack: &mut Vec<Choice>, nodes: &mut Vec<Node>, frozen: usize, ends: Option<&mut Vec<u32>>) -> bool {
    debug_assert_eq!(nodes.len(), stack.len(), "one node per choice");
    let mut ends = ends;
    while stack.len() > frozen {
        let i = stack.len() - 1;
        let end = ends.as_ref().map_or(stack[i].n, |e| e[i]);
        let taken = stack[i].taken;
        let node = &mut nodes[i];
        if let Some(k) = node.next_option(taken, end) {
            if node.sched {
                let foot = node.foot.take().unwrap_or_else(Foot::global);
                node.done.push((node.labels[taken as usize].into(), foot));
            }
            stack[i].taken = k;
            return true;
        }
        stack.pop();
        nodes.truncate(stack.len());
        if let Some(e) = ends.as_mut() {
            e.pop();
        }
    }
    false
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
    let mut visited = Visited::default();
    let mut stack: Vec<Choice> = Vec::new();
    let mut nodes: Vec<Node> = Vec::new();
    let mut stats = Stats::default();
    let switches = SWITCHES.with(std::cell::Cell::get);
    loop {
        if stats.executions >= max_executions {
            stats.states = visited.len() as u64;
            return (stats, None);
        }
        let out = {
            let mut v = |state, asleep| visit(&mut visited, state, asleep);
            let mut d = Dfs::new(&stack, &mut nodes, &mut v, switches);
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
        crate::exec::recycle_choices(std::mem::replace(&mut stack, out.choices));
        if !backtrack(&mut stack, &mut nodes, 0, None) {
            stats.states = visited.len() as u64;
            stats.complete = true;
            return (stats, None);
        }
    }
}

/// One worker's part of a parallel exhaustive search: the subtree below a
/// prefix of choices, explored depth-first as [`exhaustive`] does.
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

/// Explores every execution as [`exhaustive`] does, with `jobs` threads that
/// share one visited set. On each thread, `each` is called once with the
/// worker's loop, which it must call with that thread's way to run one
/// execution (each thread builds its own policies in its own arena, see
/// [`crate::arena`]).
///
/// The work is split by subtrees: a worker explores the subtree below a prefix
/// of choices depth-first, and while another worker waits for work it gives
/// away the remaining options of its shallowest open choice, each option the
/// root of a subtree of its own. Pruning at a state any worker has visited is
/// sound for the same reason it is in [`exhaustive`] (the state hash covers
/// everything that decides what can happen next), so a complete search visits
/// the same set of states whatever the interleaving of the workers: `states`
/// does not depend on `jobs` when the search completes, unless local steps
/// are explored alone (with sleep sets, the states they leave out depend on
/// the order: see the crate documentation). `executions` and
/// `pruned` do, and so does which violation is found first when there are
/// several; callers that need the same counterexample for every `jobs`
/// re-search with one worker (see `spec::check`).
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
        crate::exec::recycle_choices(std::mem::replace(&mut t.stack, out.choices));
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
