//! Exhaustive search with several worker threads sharing one visited set,
//! the work split by subtrees.

use super::dfs::{backtrack, Dfs, Node, Switches, SWITCHES};
use super::saved::{self, BodyRead, Out, Reader, Saving, Stopped, Writer};
use super::table::{states_len, Fingerprints, Stored, Table, Visitor};
use super::{recycle_choices, Choice, ChoiceKind, Chooser, Foot, Outcome, Stats};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// One worker's part of a parallel exhaustive search: the subtree below a
/// prefix of choices, explored depth-first as [`exhaustive`](fn@super::exhaustive) does
/// (also the work queue's items, and what a saved search keeps of the
/// frontier: a subtree put back is positioned at the execution it runs next).
#[derive(Clone)]
pub(super) struct Subtree {
    /// The choices of the current execution; the first `frozen` are the
    /// subtree's root and never change.
    pub(super) stack: Vec<Choice>,
    pub(super) frozen: usize,
    /// Per choice of `stack`: one past the last option this worker explores
    /// there (the rest were given to other workers).
    pub(super) ends: Vec<u32>,
    pub(super) nodes: Vec<Node>,
}

impl Subtree {
    /// The subtree below the root `stack` (each choice's option taken there
    /// its only one), with what the search keeps for each choice.
    pub(super) fn below(stack: Vec<Choice>, nodes: Vec<Node>) -> Subtree {
        let mut ends = Vec::with_capacity(stack.capacity());
        ends.extend(stack.iter().map(|c| c.taken + 1));
        Subtree { ends, frozen: stack.len(), stack, nodes }
    }

    /// Takes the choices the execution below it made (`choices`: those
    /// past the stack are new, and this worker owns all their options) and
    /// backtracks to the deepest choice with an option of its own left;
    /// `false` when none is left.
    pub(super) fn advance(&mut self, choices: Vec<Choice>) -> bool {
        let known = self.stack.len();
        recycle_choices(std::mem::replace(&mut self.stack, choices));
        self.ends.truncate(known.min(self.stack.len()));
        self.ends.extend(self.stack[self.ends.len()..].iter().map(|c| c.n));
        backtrack(&mut self.stack, &mut self.nodes, self.frozen, Some(&mut self.ends))
    }

    /// Writes it alone ([`Subtree::save_after`] with nothing before it; read
    /// by [`Subtree::load_after`] with none).
    pub(super) fn save(&self, w: &mut Writer) {
        self.save_after(w, None);
    }

    /// Writes it after `prev`, the subtree written before it in the same
    /// list: how many of its first choices are `prev`'s (with their ends and
    /// nodes), then only the rest. Subtrees split off one search share long
    /// prefixes, so a queue takes a fraction of its bytes written whole.
    pub(super) fn save_after(&self, w: &mut Writer, prev: Option<&Subtree>) {
        debug_assert!(self.ends.len() == self.stack.len() && self.nodes.len() == self.stack.len());
        let k = prev.map_or(0, |p| self.shared_prefix(p));
        w.u64(k as u64);
        w.u64((self.stack.len() - k) as u64);
        for c in &self.stack[k..] {
            w.u8(match c.point {
                ChoiceKind::Sched => 0,
                ChoiceKind::Op => 1,
                ChoiceKind::Move => 2,
                ChoiceKind::Read => 3,
            });
            w.u32(c.n);
            w.u32(c.taken);
        }
        w.u64(self.frozen as u64);
        self.ends[k..].iter().for_each(|&e| w.u32(e));
        self.nodes[k..].iter().for_each(|n| n.save(w));
    }

    /// Reads what [`Subtree::save_after`] wrote after `prev`.
    pub(super) fn load_after(r: &mut Reader<'_>, prev: Option<&Subtree>) -> Result<Subtree, String> {
        let k = r.u64()?;
        let have = prev.map_or(0, |p| p.stack.len());
        let Some(k) = usize::try_from(k).ok().filter(|&k| k <= have) else {
            return Err(format!("a subtree sharing {k} choices with one of {have}"));
        };
        // A choice, its end and the smallest node.
        let n = r.len(9 + 4 + 3)?;
        let (mut stack, mut ends, mut nodes) = match prev {
            Some(p) => (p.stack[..k].to_vec(), p.ends[..k].to_vec(), p.nodes[..k].to_vec()),
            None => (Vec::new(), Vec::new(), Vec::new()),
        };
        stack.reserve(n);
        for _ in 0..n {
            let point = match r.u8()? {
                0 => ChoiceKind::Sched,
                1 => ChoiceKind::Op,
                2 => ChoiceKind::Move,
                3 => ChoiceKind::Read,
                k => return Err(format!("a choice of unknown kind {k}")),
            };
            stack.push(Choice { point, n: r.u32()?, taken: r.u32()? });
        }
        let frozen = r.u64()? as usize;
        for _ in 0..n {
            ends.push(r.u32()?);
        }
        for _ in 0..n {
            nodes.push(Node::load(r)?);
        }
        if frozen > stack.len() {
            return Err("a subtree whose root is deeper than its choices".into());
        }
        Ok(Subtree { stack, frozen, ends, nodes })
    }

    /// How many first choices it shares with `other`, with their ends and
    /// nodes.
    fn shared_prefix(&self, other: &Subtree) -> usize {
        (0..self.stack.len().min(other.stack.len()))
            .find(|&i| {
                self.stack[i] != other.stack[i] || self.ends[i] != other.ends[i] || self.nodes[i] != other.nodes[i]
            })
            .unwrap_or(self.stack.len().min(other.stack.len()))
    }
}

/// Writes the count of `trees`, then each after the one before it
/// ([`Subtree::save_after`]).
pub(super) fn save_subtrees<'a>(w: &mut Writer, trees: impl ExactSizeIterator<Item = &'a Subtree>) {
    w.u64(trees.len() as u64);
    let mut prev = None;
    for t in trees {
        t.save_after(w, prev);
        prev = Some(t);
    }
}

/// Reads what [`save_subtrees`] wrote.
pub(super) fn load_subtrees(r: &mut Reader<'_>) -> Result<Vec<Subtree>, String> {
    // Its shared count, its own count and its root's depth.
    let n = r.len(24)?;
    let mut out: Vec<Subtree> = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Subtree::load_after(r, out.last())?;
        out.push(t);
    }
    Ok(out)
}

/// The state the workers of [`exhaustive_parallel`] share.
struct Shared {
    /// Subtrees not yet taken, and how many workers are exploring.
    work: std::sync::Mutex<(Vec<Subtree>, usize)>,
    wake: std::sync::Condvar,
    /// The visited set (lock-free: see [`Table`]).
    visited: Table,
    executions: std::sync::atomic::AtomicU64,
    pruned: std::sync::atomic::AtomicU64,
    max_steps: std::sync::atomic::AtomicUsize,
    /// Set when a violation is found or the execution cap is reached.
    stop: std::sync::atomic::AtomicBool,
    found: std::sync::Mutex<Option<Outcome>>,
    /// Set while a saved search writes itself: workers put their subtrees
    /// back and wait.
    pause: AtomicBool,
    /// The bytes the visited set's tables take, and the most they may.
    table_bytes: AtomicU64,
    max_bytes: u64,
    /// Set (to the bytes needed) when the visited set would pass `max_bytes`.
    over: AtomicU64,
    /// Workers waiting for work: only while one does do the others look at
    /// the queue after each execution to give some away.
    hungry: std::sync::atomic::AtomicUsize,
}

impl Shared {
    fn new(work: Vec<Subtree>, visited: Table, max_bytes: u64) -> Shared {
        let table_bytes = visited.bytes();
        Shared {
            work: std::sync::Mutex::new((work, 0)),
            wake: std::sync::Condvar::new(),
            visited,
            executions: 0.into(),
            pruned: 0.into(),
            max_steps: 0.into(),
            stop: false.into(),
            found: std::sync::Mutex::new(None),
            pause: false.into(),
            table_bytes: table_bytes.into(),
            max_bytes,
            // The table's first slots count too: a cap below them stops the search at once.
            over: if table_bytes > max_bytes { table_bytes } else { 0 }.into(),
            hungry: 0.into(),
        }
    }

    /// A search that has not started: the root subtree, nothing visited
    /// (its states to be kept as `fp` says).
    fn fresh(fp: Fingerprints, max_bytes: u64) -> Shared {
        Shared::new(vec![Subtree::below(Vec::new(), Vec::new())], Table::new(fp), max_bytes)
    }

    fn visit(&self, me: &mut Visitor<'_>, state: u128, asleep: u64) -> Option<u64> {
        let (left, grew) = me.visit(state, asleep);
        if grew > 0 {
            let total = self.table_bytes.fetch_add(grew, Relaxed) + grew;
            if total > self.max_bytes {
                // One part's growth past the cap at most: the saver stops the search next.
                self.over.fetch_max(total, Relaxed);
            }
        }
        left
    }

    /// Writes the counters, the visited set and the queue (every worker waiting).
    fn save(&self, w: &mut dyn Out, extra: &[AtomicU64]) {
        self.save_with(w, extra, &mut |w: &mut dyn Out| self.visited.save(w));
    }

    /// [`Shared::save`] with the visited states `visited` writes (a delta's
    /// changes: see `saved.rs`).
    fn save_with(&self, w: &mut dyn Out, extra: &[AtomicU64], visited: &mut Writes<'_>) {
        let q = self.work.lock().expect("no worker panicked holding the queue");
        Shared::write_body(w, self.counts(), extra, visited, &q.0);
    }

    /// Its executions, cut executions and most steps.
    fn counts(&self) -> [u64; 3] {
        [self.executions.load(Relaxed), self.pruned.load(Relaxed), self.max_steps.load(Relaxed) as u64]
    }

    /// Writes `counts` (as [`Shared::counts`] gives them), the caller's
    /// counters, what `visited` writes of the visited set and `work` for
    /// the queue: the layout [`Shared::load_with`] reads.
    fn write_body(w: &mut dyn Out, counts: [u64; 3], extra: &[AtomicU64], visited: &mut Writes<'_>, work: &[Subtree]) {
        counts.iter().for_each(|&c| w.u64(c));
        w.u64(extra.len() as u64);
        extra.iter().for_each(|e| w.u64(e.load(Relaxed)));
        // Sections of the visited set: one (an earlier build wrote one per shard).
        w.u64(1);
        visited(w);
        let mut rest = Writer::default();
        save_subtrees(&mut rest, work.iter());
        w.bytes(&rest.0);
    }

    /// Reads a body [`Shared::write_body`] wrote, with `extra` of the
    /// caller's counters, the visited states left where they lie (a body
    /// whose states turn out corrupt changes nothing: see [`Table::admit_stored`]).
    fn read_body<'a>(r: &mut impl BodyRead<'a>, extra: usize) -> Result<Body<'a>, String> {
        let counts = [r.u64()?, r.u64()?, r.u64()?];
        if r.len(8)? != extra {
            return Err("a save of another kind of search".into());
        }
        let extra = (0..extra).map(|_| r.u64()).collect::<Result<Vec<_>, _>>()?;
        let visited = (0..r.len(9)?).map(|_| Stored::read(r)).collect::<Result<Vec<_>, _>>()?;
        let rest = r.rest()?;
        let mut r = Reader::new(&rest);
        let work = load_subtrees(&mut r)?;
        if !r.done() {
            return Err("bytes after the end of the save".into());
        }
        Ok(Body { counts, extra, visited, work })
    }

    /// Reads what [`Shared::save`] wrote (a whole save's `body`) followed by
    /// `deltas` (see `saved.rs`) into a search that goes on from the last.
    fn load_with<'a, R: BodyRead<'a>>(
        body: &mut R,
        deltas: &mut [R],
        extra: &[AtomicU64],
        fp: Fingerprints,
        max_bytes: u64,
    ) -> Result<Shared, String> {
        let mut b = Shared::read_body(body, extra.len())?;
        let visited = Table::new(fp);
        for d in deltas {
            let later = Shared::read_body(d, extra.len())?;
            visited.admit_stored(&b.visited)?;
            b = later;
        }
        b.store_extra(extra);
        visited.admit_stored(&b.visited)?;
        let shared = Shared::new(b.work, visited, max_bytes);
        shared.executions.store(b.counts[0], Relaxed);
        shared.pruned.store(b.counts[1], Relaxed);
        shared.max_steps.store(b.counts[2] as usize, Relaxed);
        Ok(shared)
    }
}

/// A body [`Shared::read_body`] read: the search's counts (executions,
/// cut executions, most steps), the caller's counters, the visited states
/// (where they lie) and the queue.
struct Body<'a> {
    counts: [u64; 3],
    extra: Vec<u64>,
    visited: Vec<Stored<'a>>,
    work: Vec<Subtree>,
}

impl Body<'_> {
    /// Sets the caller's counters to the body's.
    fn store_extra(&self, extra: &[AtomicU64]) {
        for (e, &v) in extra.iter().zip(&self.extra) {
            e.store(v, Relaxed);
        }
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
/// several ([`crate::run::check_exhaustive_jobs`] shrinks the one returned).
pub fn exhaustive_parallel(
    each: &(dyn Fn(Worker<'_>) + Sync),
    jobs: usize,
    fp: Fingerprints,
    max_executions: u64,
) -> (Stats, Option<Outcome>) {
    let (stats, found, _) = exhaustive_saving(each, jobs, fp, max_executions, None, None)
        .expect("a search that neither saves nor resumes cannot fail to");
    (stats, found)
}

/// Reads a saved search's body, in memory, as `--resume` reads one (no
/// counters of the caller's, no deltas): its visited states into a table
/// kept as `fp` says, its queue and its counts. Returns the counts
/// (executions, cut executions, most steps) and the states it holds, or
/// why the body cannot be read. The fuzz target `saved_search` drives it
/// with arbitrary bytes.
pub fn read_saved_body(body: &[u8], fp: Fingerprints) -> Result<([u64; 3], u64), String> {
    let shared = Shared::load_with(&mut Reader::new(body), &mut [], &[], fp, u64::MAX)?;
    Ok((shared.counts(), shared.visited.len() as u64))
}

/// [`exhaustive_parallel`], saving itself as [`saved`] says when `saving`
/// is given (with the caller's own counters, `extra`, saved and restored
/// beside the search's), and going on from the save body `resume` when
/// that is given. Returns, besides the statistics and a violation, why the
/// search stopped before its end if it did (a signal, the memory cap; the
/// last save then holds where it got to), or why `resume` cannot be read
/// or a save cannot be written.
pub fn exhaustive_saving(
    each: &(dyn Fn(Worker<'_>) + Sync),
    jobs: usize,
    fp: Fingerprints,
    max_executions: u64,
    saving: Option<(&Saving, &[AtomicU64])>,
    resume: Option<&saved::Opened>,
) -> Result<(Stats, Option<Outcome>, Option<Stopped>), crate::Error> {
    let max_bytes = saving.and_then(|(s, _)| s.max_memory).unwrap_or(u64::MAX);
    let mut shared = match resume {
        Some(opened) => {
            let extra = saving.map_or(&[][..], |(_, e)| e);
            let mut deltas =
                saving.map_or_else(Vec::new, |(s, _)| saved::delta_readers(&s.dir, saved::DELTAS, opened.sum));
            Shared::load_with(&mut opened.reader(), &mut deltas, extra, fp, max_bytes).map_err(|why| match saving {
                // A body from a file whose checksums matched: a save this build cannot read.
                Some((s, _)) => crate::Error::Save {
                    file: s.dir.join(saved::FILE).display().to_string(),
                    problem: crate::error::SaveProblem::Unreadable { why },
                },
                None => crate::Error::Saved { why },
            })?
        }
        None => Shared::fresh(fp, max_bytes),
    };
    if saving.is_some() {
        // Saves after the first write only what changed.
        shared.visited.record_changes();
    }
    let switches = SWITCHES.with(std::cell::Cell::get);
    let mut stopped = None;
    let mut save_error = None;
    std::thread::scope(|scope| {
        spawn_workers(scope, &shared, each, jobs, max_executions, switches);
        if let Some((s, extra)) = saving {
            match saver(&shared, s, extra) {
                Ok(why) => stopped = why,
                Err(e) => save_error = Some(e),
            }
        }
    });
    if let Some(e) = save_error {
        return Err(e);
    }
    let halted = shared.stop.load(Relaxed);
    let found = shared.found.into_inner().expect("no worker panicked holding the result");
    let executions = shared.executions.load(Relaxed);
    let stats = Stats {
        executions,
        states: shared.visited.len() as u64,
        pruned: shared.pruned.load(Relaxed),
        max_steps: shared.max_steps.load(Relaxed),
        // The workers stop early only at a violation, at the cap, or to save and stop.
        complete: !halted,
        visited_bytes: shared.visited.bytes(),
    };
    Ok((stats, found, stopped))
}

/// Starts `jobs` workers in `scope`, each taking subtrees from the queue and
/// exploring them until the search is over.
fn spawn_workers<'s, 'e: 's>(
    scope: &'s std::thread::Scope<'s, 'e>,
    shared: &'e Shared,
    each: &'e (dyn Fn(Worker<'_>) + Sync),
    jobs: usize,
    max_executions: u64,
    switches: Switches,
) {
    for _ in 0..jobs.max(1) {
        scope.spawn(move || {
            // A worker that panics stops the others, which would wait for
            // it forever; the scope then passes the panic on.
            let _stop = StopOnPanic(shared);
            each(&mut |run| {
                let mut me = shared.visited.visitor();
                while let Some(t) = take_work(shared) {
                    explore(run, t, shared, &mut me, max_executions, switches);
                    let mut w = shared.work.lock().expect("no worker panicked holding the queue");
                    w.1 -= 1;
                    if w.1 == 0 {
                        shared.wake.notify_all();
                    }
                }
            })
        });
    }
}

/// Saves the search every `s.every`, and at once (then stops it) on a
/// signal or when the visited set would pass the cap; returns when the
/// search is over, with why it stopped it if it did.
fn saver(shared: &Shared, s: &Saving, extra: &[AtomicU64]) -> Result<Option<Stopped>, crate::Error> {
    let mut last = std::time::Instant::now();
    let mut written = None;
    loop {
        {
            let w = shared.work.lock().expect("no worker panicked holding the queue");
            let over = (w.0.is_empty() && w.1 == 0) || shared.stop.load(Relaxed);
            if over {
                // The end: a last save of the finished search (an empty frontier)
                // unless it stopped at a violation or the execution cap.
                drop(w);
                if !shared.stop.load(Relaxed) {
                    write(shared, s, extra, &mut written)?;
                }
                return Ok(None);
            }
            let _ = shared.wake.wait_timeout(w, Duration::from_millis(50)).expect("no worker panicked");
        }
        let why = if saved::signalled() {
            Some(Stopped::Signal)
        } else {
            match shared.over.load(Relaxed) {
                0 => None,
                need => Some(Stopped::Memory(need)),
            }
        };
        if why.is_none() && last.elapsed() < s.every {
            continue;
        }
        // Pause: every worker puts its subtree back and waits.
        shared.pause.store(true, Relaxed);
        {
            let mut w = shared.work.lock().expect("no worker panicked holding the queue");
            while w.1 > 0 {
                w = shared.wake.wait(w).expect("no worker panicked holding the queue");
            }
        }
        let saved = if shared.stop.load(Relaxed) { Ok(()) } else { write(shared, s, extra, &mut written) };
        last = std::time::Instant::now();
        let _w = shared.work.lock().expect("no worker panicked holding the queue");
        if why.is_some() || saved.is_err() {
            // A save that failed stops the search too (its workers, paused,
            // would otherwise wait for the saver forever).
            shared.stop.store(true, Relaxed);
        }
        shared.pause.store(false, Relaxed);
        shared.wake.notify_all();
        saved?;
        if why.is_some() {
            return Ok(why);
        }
    }
}

/// What a saving search has written: its whole save's body's checksum and
/// size, and the bytes of the deltas after it.
struct Written {
    base: u64,
    base_bytes: u64,
    deltas: u64,
}

/// Writes the search (paused) into its save: a delta of what changed since
/// the last save (see `saved.rs`), or a whole save when this process has
/// written none yet or the deltas would outgrow the whole save.
fn write(shared: &Shared, s: &Saving, extra: &[AtomicU64], written: &mut Option<Written>) -> Result<(), crate::Error> {
    if let Some(b) = written {
        // The delta's size, known before it is written: what it holds
        // besides its states, counted, and its states' bytes.
        let mut size = Count(states_len(shared.visited.changed()));
        shared.save_with(&mut size, extra, &mut |_: &mut dyn Out| {});
        if b.deltas + size.0 <= b.base_bytes {
            b.deltas = saved::append_with(&s.dir, saved::DELTAS, b.base, &mut |out: &mut saved::Sink| {
                shared.save_with(out, extra, &mut |w: &mut dyn Out| shared.visited.save_changes(w));
            })?;
            return Ok(());
        }
    }
    // Every save clears the marks: a whole save holds every state.
    shared.visited.drain_changes(false);
    let (base, base_bytes) =
        saved::write_with(&s.dir, &s.identity, &mut |out: &mut saved::Sink| shared.save(out, extra))?;
    *written = Some(Written { base, base_bytes, deltas: 0 });
    Ok(())
}

/// What writes a body's visited states.
type Writes<'f> = dyn FnMut(&mut dyn Out) + 'f;

/// Bytes counted, not kept.
struct Count(u64);

impl Out for Count {
    fn bytes(&mut self, b: &[u8]) {
        self.0 += b.len() as u64;
    }
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
fn take_work(shared: &Shared) -> Option<Subtree> {
    let mut w = shared.work.lock().expect("no worker panicked holding the queue");
    loop {
        if shared.stop.load(std::sync::atomic::Ordering::Relaxed) {
            shared.wake.notify_all();
            return None;
        }
        if shared.pause.load(Relaxed) {
            w = shared.wake.wait(w).expect("no worker panicked holding the queue");
            continue;
        }
        if let Some(root) = w.0.pop() {
            w.1 += 1;
            return Some(root);
        }
        if w.1 == 0 {
            shared.wake.notify_all();
            return None;
        }
        shared.hungry.fetch_add(1, Relaxed);
        w = shared.wake.wait(w).expect("no worker panicked holding the queue");
        shared.hungry.fetch_sub(1, Relaxed);
    }
}

/// Executions a worker reserves at a time when the search has no cap on them.
const BATCH: u64 = 64;

/// A worker's counts while it explores a subtree, added to the shared ones
/// when it stops (on every way out): a read-modify-write of a shared counter
/// at every execution moved its cache line from core to core, which at 16
/// workers cost more than the executions themselves. Executions are reserved
/// [`BATCH`] at a time (one at a time under a cap, which must be exact), and
/// those not run are given back.
pub(super) struct Tally<'a> {
    /// The search's executions, reserved, and its executions cut short.
    executions: &'a AtomicU64,
    pruned_total: &'a AtomicU64,
    /// The states the search holds, for the progress line now and then.
    states: &'a dyn Fn() -> u64,
    pub(super) pruned: u64,
    /// Executions reserved and not yet run.
    tickets: u64,
}

impl<'a> Tally<'a> {
    /// A worker's tally of a search counting into `executions` and
    /// `pruned`, whose `states` it reports now and then.
    pub(super) fn new(executions: &'a AtomicU64, pruned: &'a AtomicU64, states: &'a dyn Fn() -> u64) -> Self {
        Tally { executions, pruned_total: pruned, states, pruned: 0, tickets: 0 }
    }

    /// Takes an execution, `false` when `max` have run.
    pub(super) fn take(&mut self, max: u64) -> bool {
        if self.tickets == 0 {
            let batch = if max == u64::MAX { BATCH } else { 1 };
            let before = self.executions.fetch_add(batch, Relaxed);
            if before >= max {
                self.executions.fetch_sub(batch, Relaxed);
                return false;
            }
            // States now and then (every 16,384 executions): a look at
            // every part of the visited set.
            let states = (before % (1 << 14) < batch).then(|| (self.states)());
            crate::progress::publish(before, states);
            self.tickets = batch;
        }
        self.tickets -= 1;
        true
    }
}

impl Drop for Tally<'_> {
    fn drop(&mut self) {
        self.pruned_total.fetch_add(self.pruned, Relaxed);
        self.executions.fetch_sub(self.tickets, Relaxed);
    }
}

/// Explores the subtree below `root` depth-first, giving away work when other
/// workers wait for it.
fn explore(
    run: &mut dyn FnMut(&mut dyn Chooser) -> Outcome,
    mut t: Subtree,
    shared: &Shared,
    me: &mut Visitor<'_>,
    max: u64,
    switches: Switches,
) {
    let states = || shared.visited.len() as u64;
    let mut tally = Tally::new(&shared.executions, &shared.pruned, &states);
    loop {
        if shared.stop.load(Relaxed) {
            return;
        }
        if shared.pause.load(Relaxed) {
            // Positioned at its next execution: the saved frontier holds it as it is.
            drop(tally);
            shared.work.lock().expect("no worker panicked holding the queue").0.push(t);
            return;
        }
        if !tally.take(max) {
            shared.stop.store(true, Relaxed);
            return;
        }
        let out = {
            let mut v = |state, asleep| shared.visit(me, state, asleep);
            let mut d = Dfs::new(&t.stack, &mut t.nodes, &mut v, switches);
            run(&mut d)
        };
        if out.steps > shared.max_steps.load(Relaxed) {
            shared.max_steps.fetch_max(out.steps, Relaxed);
            crate::progress::longest(out.steps);
        }
        tally.pruned += u64::from(out.pruned);
        if out.violation.is_some() {
            let mut f = shared.found.lock().expect("no worker panicked holding the result");
            if f.is_none() {
                *f = Some(out);
            }
            shared.stop.store(true, Relaxed);
            return;
        }
        if !t.advance(out.choices) {
            return;
        }
        if shared.hungry.load(Relaxed) > 0 {
            give_away(&mut t, shared);
        }
    }
}

/// While a worker waits for work, hands it the untaken options of this
/// worker's shallowest open choice, each as a subtree root.
fn give_away(t: &mut Subtree, shared: &Shared) {
    let mut w = shared.work.lock().expect("no worker panicked holding the queue");
    if !w.0.is_empty() {
        return;
    }
    let given = split_off(t);
    if !given.is_empty() {
        w.0.extend(given);
        shared.wake.notify_all();
    }
}

/// Takes the untaken options of `t`'s shallowest open choice out of it, each
/// the root of a subtree of its own, and returns those (none if `t` has no
/// choice with an option left).
pub(super) fn split_off(t: &mut Subtree) -> Vec<Subtree> {
    // Not a load's choice of value: the step that makes it gathers the
    // footprints of all its options (`Chooser::tracks_step`), on this worker.
    let open = |i: usize| t.nodes[i].next_option(t.stack[i].taken, t.ends[i]).is_some();
    let Some(i) = (t.frozen..t.stack.len()).find(|&i| t.stack[i].point != ChoiceKind::Read && open(i)) else {
        return Vec::new();
    };
    // The subtrees given away sleep on what this worker explored here (with
    // what it touched); the options given away have not run, so they cannot.
    // A step whose loads choose values has run only some of its options
    // so far: what it touches is not known yet.
    let mut node = t.nodes[i].clone();
    if let Some(f) = node.foot.take() {
        let within = t.stack[i + 1..].iter().take_while(|c| c.point != ChoiceKind::Sched);
        let f = if within.clone().any(|c| c.point == ChoiceKind::Read) { Foot::global() } else { f };
        node.done.push((node.labels[t.stack[i].taken as usize].into(), f));
    }
    let mut given = Vec::new();
    let mut k = t.stack[i].taken;
    while let Some(j) = node.next_option(k, t.ends[i]) {
        // Exactly as long as the root: a subtree given away may wait in a
        // queue among thousands (it gets room when it is explored).
        let mut root = Vec::with_capacity(i + 1);
        root.extend_from_slice(&t.stack[..i]);
        root.push(Choice { taken: j, ..t.stack[i] });
        let mut nodes = Vec::with_capacity(i + 1);
        nodes.extend_from_slice(&t.nodes[..i]);
        nodes.push(node.clone());
        given.push(Subtree::below(root, nodes));
        k = j;
    }
    t.ends[i] = t.stack[i].taken + 1;
    given
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A check of 8 CPUs' fingerprints.
    const EIGHT: Fingerprints = Fingerprints::for_cpus(8);

    /// A worker keeps a load's untaken values to itself: the step that
    /// reads gathers its footprint over them. Another CPU's step at the
    /// scheduling point above may go, asleep on a footprint that covers
    /// anything, as the step's is not known yet.
    #[test]
    fn a_loads_choice_of_value_is_never_given_away() {
        let mut nodes = Vec::new();
        let mut visit = |_: u128, asleep: u64| Some(asleep);
        let mut dfs = Dfs::new(&[], &mut nodes, &mut visit, SWITCHES.with(std::cell::Cell::get));
        dfs.choose(ChoiceKind::Sched, &[0, 2], 1);
        dfs.choose(ChoiceKind::Read, &[0, 1], 0);
        dfs.stepped(Foot::default());
        let stack = vec![
            Choice { point: ChoiceKind::Sched, n: 2, taken: 0 },
            Choice { point: ChoiceKind::Read, n: 2, taken: 0 },
        ];
        let mut t = Subtree { ends: vec![2, 2], frozen: 0, stack, nodes };
        let given = split_off(&mut t);
        assert_eq!(given.len(), 1);
        assert_eq!(given[0].stack, [Choice { point: ChoiceKind::Sched, n: 2, taken: 1 }]);
        assert_eq!(given[0].nodes[0].done, [(0, Foot::global())]);
        let (root, nodes) = (&given[0].stack, &given[0].nodes);
        assert!(root.capacity() == 1 && nodes.capacity() == 1, "a subtree given away holds no room while it waits");
        assert_eq!(t.ends, [1, 2], "the load's other value stays here");
        assert!(split_off(&mut t).is_empty());
    }

    /// A list of subtrees is written each after the one before it: what a
    /// subtree shares with the one before is written once, the list reads
    /// back as it was, and a subtree that claims to share more than the one
    /// before it holds is refused.
    #[test]
    fn subtrees_that_share_a_prefix_are_written_once_and_read_back_whole() {
        let mut nodes = Vec::new();
        let mut visit = |_: u128, asleep: u64| Some(asleep);
        let mut dfs = Dfs::new(&[], &mut nodes, &mut visit, SWITCHES.with(std::cell::Cell::get));
        for _ in 0..3 {
            dfs.choose(ChoiceKind::Sched, &[0, 2], 0);
            dfs.stepped(Foot::default());
        }
        let stack = vec![Choice { point: ChoiceKind::Sched, n: 2, taken: 0 }; 3];
        let a = Subtree { ends: vec![2; 3], frozen: 1, stack, nodes };
        let mut b = a.clone();
        b.stack[2].taken = 1;
        b.frozen = 3;
        let mut c = b.clone();
        c.stack.truncate(1);
        c.frozen = 1;
        c.ends.truncate(1);
        c.nodes.truncate(1);
        let list = [a, b, c];
        let mut w = Writer::default();
        save_subtrees(&mut w, list.iter());
        let alone: usize = list
            .iter()
            .map(|t| {
                let mut w = Writer::default();
                t.save(&mut w);
                w.0.len()
            })
            .sum();
        assert!(w.0.len() + 16 < alone, "{} bytes as a list against {alone} each alone", w.0.len());
        let back = load_subtrees(&mut Reader::new(&w.0)).unwrap();
        for (x, y) in back.iter().zip(&list) {
            assert_eq!((&x.stack, x.frozen, &x.ends, &x.nodes), (&y.stack, y.frozen, &y.ends, &y.nodes));
        }
        assert_eq!(back.len(), 3);
        let mut w = Writer::default();
        w.u64(1);
        list[2].save(&mut w);
        w.0[8] = 1;
        let e = load_subtrees(&mut Reader::new(&w.0)).err().expect("a first subtree sharing a choice is refused");
        assert!(e.contains("sharing 1 choices with one of 0"), "{e}");
    }

    /// A body's states are checked before any goes into a table: a table
    /// handed a body whose last state has bits no save writes keeps what it
    /// held; the same body whole is taken in, and a body cut short is
    /// refused as a whole search. [`read_saved_body`] (the fuzz target's way
    /// in) reads the whole body's counts and states and refuses the others.
    #[test]
    fn a_body_with_a_bad_state_changes_nothing_in_a_table() {
        let t = Table::new(EIGHT);
        for s in 1..=1000u64 {
            t.visit(EIGHT.of(s.wrapping_mul(0x9e37_79b9_7f4a_7c15).into()), 0);
        }
        let mut w = Writer::default();
        Shared::write_body(&mut w, [5, 0, 3], &[], &mut |w: &mut dyn Out| t.save(w), &[]);
        let whole = w.0;
        let other = Table::new(EIGHT);
        other.visit(EIGHT.of(7), 0);
        let read = |bytes: &[u8]| Shared::read_body(&mut Reader::new(bytes), 0).map(|b| b.visited.len());
        let load = |bytes: &[u8]| Shared::load_with(&mut Reader::new(bytes), &mut [], &[], EIGHT, u64::MAX);
        let mut bad = whole.clone();
        // The last state's mask, before the empty queue's count.
        let at = bad.len() - 16;
        bad[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(read(&bad), Ok(1), "its layout reads");
        let bad_body = Shared::read_body(&mut Reader::new(&bad), 0).expect("its layout reads");
        assert!(other.admit_stored(&bad_body.visited).is_err());
        assert_eq!(other.len(), 1);
        let body = Shared::read_body(&mut Reader::new(&whole), 0).expect("whole");
        other.admit_stored(&body.visited).expect("the whole body");
        assert_eq!(other.len(), 1001);
        assert!(load(&whole[..whole.len() - 8]).is_err());
        let back = load(&whole).expect("the whole body");
        assert_eq!((back.visited.len(), back.counts()), (1000, [5, 0, 3]));
        assert_eq!(read_saved_body(&whole, EIGHT), Ok(([5, 0, 3], 1000)));
        assert!(read_saved_body(&bad, EIGHT).is_err() && read_saved_body(&whole[..whole.len() - 8], EIGHT).is_err());
    }

    /// A worker whose execution panics stops the search: the others, waiting
    /// for the work it held, are woken and the panic comes out of the search
    /// instead of every other worker waiting for it forever.
    #[test]
    fn a_worker_that_panics_stops_the_search() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let each =
                |worker: Worker<'_>| worker(&mut |_: &mut dyn Chooser| -> Outcome { panic!("an execution failed") });
            let out = std::panic::catch_unwind(|| exhaustive_parallel(&each, 3, EIGHT, u64::MAX));
            tx.send(out.is_err()).expect("the test waits");
        });
        let panicked = rx.recv_timeout(std::time::Duration::from_secs(60)).expect("the search ended");
        assert!(panicked, "the worker's panic came out of the search");
    }

    /// The entries of `t`'s save, sorted.
    fn sorted_entries(t: &Table) -> Vec<(u128, u64)> {
        let mut w = Writer::default();
        t.save(&mut w);
        let mut e = Table::read_entries(&mut Reader::new(&w.0)).expect("its own save");
        e.sort_unstable();
        e
    }

    /// A save after the first appends only what changed since; a whole
    /// save and the deltas after it read back as the search at the last
    /// delta; a delta cut short leaves the saves before it; a whole save
    /// removes the deltas.
    #[test]
    fn deltas_after_a_whole_save_read_back_as_the_search_at_the_last() {
        let dir = std::env::temp_dir().join(format!("tlbkit-deltas-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let id = "b1 t5~p~2";
        let s = Saving { dir: dir.clone(), every: Duration::ZERO, max_memory: None, identity: id.into() };
        let mut shared = Shared::fresh(EIGHT, u64::MAX);
        shared.visited.record_changes();
        let fp = |k: u64| EIGHT.of(k.wrapping_mul(0x9e37_79b9_7f4a_7c15).into());
        for k in 1..=5000 {
            shared.visited.visit(fp(k), 0xff);
        }
        let mut written = None;
        write(&shared, &s, &[], &mut written).expect("a whole save");
        let first = sorted_entries(&shared.visited);
        let whole = std::fs::read(dir.join(saved::FILE)).expect("the whole save").len();
        // 1,000 narrowed, 1,000 new.
        for k in 4001..=6000 {
            shared.visited.visit(fp(k), 0x0f);
        }
        shared.executions.store(77, Relaxed);
        write(&shared, &s, &[], &mut written).expect("a delta");
        let deltas = std::fs::metadata(dir.join(saved::DELTAS)).expect("the deltas").len() as usize;
        assert!(deltas > 2000 * 16 && deltas < whole / 2, "a delta of {deltas} bytes after a whole save of {whole}");
        // Read from the files, as a resume does, and from memory: the same.
        let read = || {
            let opened = saved::resume(&dir, id).expect("the whole save");
            let mut deltas = saved::delta_readers(&dir, saved::DELTAS, opened.sum);
            let from_file = Shared::load_with(&mut opened.reader(), &mut deltas, &[], EIGHT, u64::MAX);
            let (body, deltas) = (opened.bytes().expect("its body"), saved::deltas(&dir, opened.sum));
            let mut deltas: Vec<Reader<'_>> = deltas.iter().map(|d| Reader::new(d)).collect();
            let in_memory = Shared::load_with(&mut Reader::new(&body), &mut deltas, &[], EIGHT, u64::MAX);
            let (a, b) = (from_file.expect("readable"), in_memory.expect("readable"));
            assert_eq!((sorted_entries(&a.visited), a.counts()), (sorted_entries(&b.visited), b.counts()));
            a
        };
        let back = read();
        assert_eq!((sorted_entries(&back.visited), back.counts()), (sorted_entries(&shared.visited), shared.counts()));
        // Cut short by a byte: the whole save alone.
        let f = std::fs::OpenOptions::new().write(true).open(dir.join(saved::DELTAS)).expect("the deltas");
        f.set_len(deltas as u64 - 1).expect("cut");
        let back = read();
        assert_eq!((sorted_entries(&back.visited), back.counts()[0]), (first, 0));
        // Deltas that would outgrow the whole save give way to one.
        written.as_mut().expect("written").deltas = whole as u64;
        write(&shared, &s, &[], &mut written).expect("a whole save");
        assert!(!dir.join(saved::DELTAS).exists());
        assert_eq!(sorted_entries(&read().visited), sorted_entries(&shared.visited));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
