//! Exhaustive search with the visited set sharded among nodes: each state
//! has one owner, and a node holds only the states it owns.
//!
//! # Design
//!
//! The parallel search ([`super::exhaustive_parallel`]) shares one visited
//! set among its workers; a search larger than one machine cannot. Here the
//! fingerprint space is split among `K` nodes (a state's fingerprint picks
//! one of the table's 256 parts, and part `p` belongs to node `p mod K`), as
//! the distributed stateful checkers do (Stern and Dill's parallel Murφ,
//! TLC's fingerprint servers, PReach, LTSmin's distributed back end): a
//! node's table holds only its parts, the visited set's total over `K`
//! (beside it, each worker's path and its claims waiting for answers, a
//! few bytes each). Each node has its own workers and its own queue of
//! subtrees.
//!
//! **The owner decides, the discoverer explores.** A worker that reaches a
//! state its own node owns visits it as the parallel search does. One that
//! reaches a state another node owns cannot know whether it was seen: it
//! sends the owner a *claim* (the state's hash, the labels asleep there,
//! and the claim's number), in a batch with the other claims it has for
//! that node, and goes on meanwhile as if the state were new (leaving
//! alone only what its own earlier claims of it explore: [`Known`]). The
//! owner visits its table with the claim, exactly as a local visit would
//! (the same admission, the same narrowing of the sleep mask), and answers
//! with the labels to leave alone, or nothing to explore. The answer
//! narrows the options of the claim's node on the worker's path, if the
//! path still has it: the options it names are not taken from then on. So
//! every state is admitted by its owner's table alone, once per sleep mask
//! as the parallel search admits it, and the states a complete search
//! reaches are the parallel search's (the visited set is order-free; what
//! a worker explores before an answer comes is more than it had to, never
//! less). What sharding costs is the claims' messages and the options a
//! worker explores before their answers say another visit explored them.
//!
//! **Nothing dropped.** An option an answer leaves alone that the worker
//! is exploring already is explored to its end: a visit below it that
//! admitted labels is a promise other visits rely on, and dropping such
//! subtrees (even only those with no promise seen below them) lost states
//! when the nodes ran as processes. A worker sends its claims every
//! [`SEND_EVERY`] executions (with an injected latency, once the oldest has
//! also waited that long): a late answer explores more, and a batch of
//! one claim costs more per claim than a batch of many.
//!
//! **What an owner said, remembered.** A state's mask in its owner's table
//! only narrows (each visit keeps the labels both it and the earlier ones
//! left asleep), so after a claim with `asleep` the owner's mask is within
//! `asleep` for good. Each node keeps, per state its workers claimed, the
//! intersection of the masks they claimed it with ([`Known`], a
//! direct-mapped cache they share, `sharded/known.rs`): a later visit whose
//! `asleep` covers that intersection would be answered "nothing to
//! explore", and is pruned at once, without a claim; one that does not
//! leaves alone the labels outside it, which the earlier claims explore.
//!
//! A node whose queue is empty takes a subtree from another node's queue
//! (work stealing, counted as traffic); a worker with others waiting gives
//! its shallowest open choice's other options away, as in the parallel
//! search. The search ends when no subtree is queued or explored and no
//! claim waits for its answer: one count (`open`) holds both, raised
//! before anything it counts is made and lowered after it is done, so it
//! reaches zero only at the end.
//!
//! # This implementation
//!
//! [`exhaustive_sharded`] runs the nodes in one process, as groups of
//! threads that share nothing but their mailboxes and queues: the transport
//! is a queue per node with an injected latency (a batch is delivered that
//! long after it is sent), and what the nodes send each other is counted in
//! bytes of its encoding ([`Traffic`]). It measures the sharded search's
//! work and traffic on one host.
//!
//! [`ShardNode`] (`sharded/node.rs`) is one node in a process of its own,
//! the same workers and table: what it sends another node waits in an
//! outbox, as bytes, until its carrier (the Ray driver of
//! `python/tlbkit/_ray.py`) takes it with [`ShardNode::pump`] and hands it
//! to the other node's; there each node's `open` counts only its own work,
//! and the carrier ends the search when every node's is zero and nothing
//! is on its way.

mod known;
mod node;

use known::Known;
pub use node::{Orders, Pumped, Resuming, ShardNode};

use super::dfs::{Dfs, Switches, CLAIMED, SWITCHES};
use super::parallel::{split_off, Subtree, Tally};
use super::saved::Writer;
use super::table::{Fingerprints, Table, Visitor, ALL_LABELS};
use super::{Outcome, Stats, Worker};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How the nodes of a sharded search reach each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    /// The time a batch of claims or answers takes to arrive.
    pub latency: Duration,
    /// The most claims a worker sends one node in a batch.
    pub batch: usize,
    /// The executions a worker runs after a claim before it sends its
    /// claims (and, with a latency, until the oldest has waited
    /// [`Link::latency`]): answers that come later explore more, batches
    /// that carry more cost less per claim (see [`SEND_EVERY`]).
    pub every: u32,
}

/// The executions a worker runs between sends of its claims by default.
/// A claim sent alone cost most of its time in the lines its batch moved
/// between cores, and over TCP each message costs its encoding, copies and
/// system calls, so fewer, larger batches cost less; at two nodes how late
/// an answer comes does not change the executions. Against 16 (some 40 µs
/// of `arm64-linux`'s search, `bench/2026-12-05-check-sharded-send-every.md`),
/// 256 took two node processes from 0.67 to 0.75-0.77 times the speed of
/// two workers sharing one table on `x86-linux-410` and from 0.76 to
/// 0.79-0.86 on `arm64-linux`, with the same executions; 1,024 was no
/// faster (a batch holds at most [`Link::batch`], 256, claims)
/// (`bench/2026-12-05-check-sharded-give-when-empty.md`).
pub const SEND_EVERY: u32 = 256;

impl Default for Link {
    fn default() -> Self {
        Link { latency: Duration::ZERO, batch: 256, every: SEND_EVERY }
    }
}

/// What the nodes of a sharded search sent each other.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// States reached by a node that does not own them (each a claim).
    pub claims: u64,
    /// Claims whose answer admitted labels to explore.
    pub admitted: u64,
    /// Visits to another node's states pruned by what their owner's
    /// answers already said (no claim sent: the node's `Known`).
    pub known: u64,
    /// Batches of claims and of answers sent.
    pub batches: u64,
    /// Subtrees one node took from another's queue.
    pub steals: u64,
    /// Bytes of claims, answers and stolen subtrees, as encoded.
    pub bytes: u64,
    /// The most claims one worker had waiting for their answers at once.
    pub most_waiting: u64,
    /// The states each node owns at the end.
    pub states: Vec<u64>,
}

/// A claim's bytes: the state's hash, its mask asleep, and the claim's
/// number (whose low bits name the discoverer).
const CLAIM_BYTES: u64 = 24;
/// An answer's bytes: the claim's number and the mask (or none).
const ANSWER_BYTES: u64 = 17;
/// The most nodes (the table's parts: each node owns at least one).
pub const MAX_NODES: usize = 256;

#[derive(Clone, Copy)]
struct Claim {
    state: u128,
    asleep: u64,
    id: u64,
}

#[derive(Clone, Copy)]
struct Answer {
    id: u64,
    skip: Option<u64>,
}

/// Batches in flight to one node or worker, each deliverable from its instant.
struct Mailbox<T> {
    queue: Mutex<VecDeque<(Instant, Vec<T>)>>,
    /// Batches queued: read before the lock, so an empty mailbox costs a load.
    count: AtomicUsize,
}

impl<T> Mailbox<T> {
    fn new() -> Self {
        Mailbox { queue: Mutex::new(VecDeque::new()), count: AtomicUsize::new(0) }
    }

    fn send(&self, at: Instant, batch: Vec<T>) {
        let mut q = self.queue.lock().expect("no worker panicked holding a mailbox");
        q.push_back((at, batch));
        self.count.fetch_add(1, SeqCst);
    }

    /// Takes every batch, due or not.
    fn all(&self) -> Vec<Vec<T>> {
        let mut q = self.queue.lock().expect("no worker panicked holding a mailbox");
        self.count.store(0, SeqCst);
        q.drain(..).map(|(_, b)| b).collect()
    }

    /// Takes the batches due by now (they arrive in the order sent).
    fn due(&self) -> Vec<Vec<T>> {
        if self.count.load(SeqCst) == 0 {
            return Vec::new();
        }
        let now = Instant::now();
        let mut q = self.queue.lock().expect("no worker panicked holding a mailbox");
        let mut out = Vec::new();
        while q.front().is_some_and(|(at, _)| *at <= now) {
            let (_, b) = q.pop_front().expect("a front batch");
            self.count.fetch_sub(1, SeqCst);
            out.push(b);
        }
        out
    }
}

/// A value on cache lines of its own: what one worker writes often should
/// not share a line with what the others read at every execution (a write
/// takes the line from every other core), as the parallel search's
/// [`Tally`] learned at 16 workers. (On two cores no change in time was
/// measured.)
#[repr(align(128))]
struct Padded<T>(T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> std::ops::DerefMut for Padded<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

/// One node: its part of the visited set, its queue (subtrees any worker
/// may take), the claims sent to it and what it knows of other nodes'
/// states by its own claims.
struct Node {
    table: Table,
    work: Mutex<Vec<Subtree>>,
    claims: Mailbox<Claim>,
    known: Known,
}

impl Node {
    /// Node `me` of `k`: its table holds only the parts dealt to it.
    fn new(fp: Fingerprints, me: usize, k: usize) -> Node {
        // A part's number is the low bits of its states' hashes.
        let table = Table::owning(fp, |p| owner(p as u128, k) == me);
        Node { table, work: Mutex::new(Vec::new()), claims: Mailbox::new(), known: Known::new() }
    }
}

/// What the nodes sent each other, as it is counted ([`Traffic`]): each
/// worker counts its own ([`Sent`]) and adds them in as it ends.
#[derive(Default)]
struct Counts {
    claims: AtomicU64,
    admitted: AtomicU64,
    known: AtomicU64,
    batches: AtomicU64,
    steals: AtomicU64,
    bytes: AtomicU64,
    most_waiting: AtomicU64,
}

/// A node in a process of its own ([`ShardNode`]): which it is, and what
/// it has for the other nodes, waiting for its carrier.
struct Wire {
    me: usize,
    /// The claims for each node.
    claims: Vec<Mailbox<Claim>>,
    /// The answers for each node's workers.
    answers: Vec<Mailbox<Answer>>,
    /// The carrier has seen every node's work done: the workers may end.
    finished: AtomicBool,
    /// Another node's workers wait for work: give some away.
    wanted: AtomicBool,
    /// The carrier takes a snapshot: workers stop exploring, wait for the
    /// answers to their claims and rest (see `sharded/node.rs`).
    hold: AtomicBool,
    /// Workers at rest: no claim of theirs unanswered, their subtrees in
    /// the node's queue.
    resting: AtomicUsize,
}

/// What every node's workers share: in one process, every node; in a
/// [`ShardNode`], its own (`nodes` then holds that one).
struct Search {
    /// The nodes of the search.
    k: usize,
    nodes: Vec<Padded<Node>>,
    /// Per worker of `nodes`: the answers to its claims.
    answers: Vec<Padded<Mailbox<Answer>>>,
    link: Link,
    /// Subtrees queued or being explored, and claims waiting for an answer
    /// (of this process's nodes).
    open: Padded<AtomicU64>,
    stop: AtomicBool,
    found: Mutex<Option<Outcome>>,
    /// Reserved a batch at a time ([`Tally`]).
    executions: Padded<AtomicU64>,
    pruned: AtomicU64,
    max_steps: AtomicUsize,
    /// Workers waiting for work.
    hungry: Padded<AtomicUsize>,
    counts: Counts,
    /// Where this process is one node of many.
    wire: Option<Wire>,
}

/// The node that owns `state`: its table part's (the fingerprint's low
/// bits, the hash's), dealt round the nodes.
fn owner(state: u128, nodes: usize) -> usize {
    (state & (MAX_NODES as u128 - 1)) as usize % nodes
}

/// Bits of a claim's number that name the worker that made it.
const WORKER_BITS: u32 = 16;

/// The worker that made the claim numbered `id`.
fn worker(id: u64) -> usize {
    (id & ((1 << WORKER_BITS) - 1)) as usize
}

/// What one worker keeps to itself: its claims not yet answered (each with
/// the node of its current path it was made at) and its counts.
struct Local {
    w: usize,
    /// Its claims from number `first` on, in order: the choice each was
    /// made at, or `None` once answered (answers from different owners
    /// come in any order; the answered at the front are let go).
    pending: VecDeque<Option<u32>>,
    first: u64,
    /// Its claims unanswered.
    waiting: usize,
    /// Its visits pruned by what its node knew ([`Known`]).
    known: u64,
    /// The most claims it had unanswered at once.
    most: usize,
    /// The most steps one of its executions took.
    steps: usize,
    sent: Sent,
}

/// A worker's own counts of what it sent and what was answered, added to
/// the search's [`Counts`] as it ends.
#[derive(Default)]
struct Sent {
    admitted: u64,
    batches: u64,
    bytes: u64,
}

impl Local {
    fn new(w: usize) -> Self {
        let (pending, sent) = (VecDeque::new(), Sent::default());
        // Numbers from 1: a path's node with no claim has 0.
        Local { w, pending, first: 1, waiting: 0, known: 0, most: 0, steps: 0, sent }
    }

    /// Numbers its next claim, made at choice `at`.
    fn claim(&mut self, at: u32) -> u64 {
        let seq = self.first + self.pending.len() as u64;
        self.pending.push_back(Some(at));
        self.waiting += 1;
        self.most = self.most.max(self.waiting);
        (seq << WORKER_BITS) | self.w as u64
    }

    /// The choice claim `id` was made at; it is answered now.
    fn answered(&mut self, id: u64) -> u32 {
        let i = usize::try_from((id >> WORKER_BITS) - self.first).expect("a claim's number");
        let at = self.pending[i].take().expect("one answer to a claim sent");
        self.waiting -= 1;
        while self.pending.front().is_some_and(Option::is_none) {
            self.pending.pop_front();
            self.first += 1;
        }
        at
    }

    /// Adds its counts to the search's.
    fn done(&self, c: &Counts) {
        // Its claims are numbered from 1 on, the answered let go.
        c.claims.fetch_add(self.first - 1 + self.pending.len() as u64, Relaxed);
        c.admitted.fetch_add(self.sent.admitted, Relaxed);
        c.batches.fetch_add(self.sent.batches, Relaxed);
        c.bytes.fetch_add(self.sent.bytes, Relaxed);
        c.known.fetch_add(self.known, Relaxed);
        c.most_waiting.fetch_max(self.most as u64, Relaxed);
    }
}

impl Search {
    /// A search of `k` nodes, all here, or only `wire`'s, with `workers`
    /// workers here, keeping states as `fp` says.
    fn new(k: usize, workers: usize, link: Link, wire: Option<Wire>, fp: Fingerprints) -> Self {
        let here = if wire.is_some() { 1 } else { k };
        Search {
            k,
            nodes: (0..here).map(|n| Padded(Node::new(fp, wire.as_ref().map_or(n, |x| x.me), k))).collect(),
            answers: (0..workers).map(|_| Padded(Mailbox::new())).collect(),
            link: Link { batch: link.batch.max(1), every: link.every.max(1), ..link },
            open: Padded(AtomicU64::new(0)),
            stop: AtomicBool::new(false),
            found: Mutex::new(None),
            executions: Padded(AtomicU64::new(0)),
            pruned: AtomicU64::new(0),
            max_steps: AtomicUsize::new(0),
            hungry: Padded(AtomicUsize::new(0)),
            counts: Counts::default(),
            wire,
        }
    }

    /// Node `n`, which runs here.
    fn node(&self, n: usize) -> &Node {
        &self.nodes[if self.wire.is_some() { 0 } else { n }]
    }

    /// The mailbox of worker `w`'s answers, a worker here.
    fn inbox(&self, w: usize) -> &Mailbox<Answer> {
        &self.answers[if self.wire.is_some() { w / self.k } else { w }]
    }

    /// Sends worker `w` its answers: into its mailbox here, or into the
    /// outbox for its node.
    fn reply(&self, w: usize, batch: Vec<Answer>) {
        let at = Instant::now() + self.link.latency;
        match &self.wire {
            Some(x) if w % self.k != x.me => x.answers[w % self.k].send(at, batch),
            _ => self.inbox(w).send(at, batch),
        }
    }

    /// Sends node `to` a batch of claims.
    fn claim(&self, to: usize, batch: Vec<Claim>) {
        let at = Instant::now() + self.link.latency;
        match &self.wire {
            Some(x) if to != x.me => x.claims[to].send(at, batch),
            _ => self.node(to).claims.send(at, batch),
        }
    }

    /// Whether the workers may end once nothing here is open: in one
    /// process, always; a node of many, when its carrier says so.
    fn may_end(&self) -> bool {
        self.wire.as_ref().is_none_or(|x| x.finished.load(SeqCst))
    }

    /// Whether a worker should give part of its subtree away.
    fn wanted(&self) -> bool {
        self.hungry.load(Relaxed) > 0 || self.wire.as_ref().is_some_and(|x| x.wanted.load(Relaxed))
    }

    /// Whether the carrier holds the workers for a snapshot.
    fn holding(&self) -> bool {
        self.wire.as_ref().is_some_and(|x| x.hold.load(SeqCst))
    }

    /// Worker `w` of node `n`, held with no claim unanswered, rests until
    /// the hold ends, answering the node's claims meanwhile (another node's
    /// workers may still wait for answers).
    fn rest(&self, n: usize, me: &mut Visitor<'_>, sent: &mut Sent) {
        let x = self.wire.as_ref().expect("only a shard node holds");
        x.resting.fetch_add(1, SeqCst);
        while x.hold.load(SeqCst) && !self.stop.load(Relaxed) {
            self.serve(n, me, sent);
            std::thread::sleep(Duration::from_micros(50));
        }
        x.resting.fetch_sub(1, SeqCst);
    }

    /// The states the nodes here own.
    fn states(&self) -> u64 {
        self.nodes.iter().map(|n| n.table.len() as u64).sum()
    }

    /// Node `n` visits the claims due in its mailbox and answers them
    /// (counting what it sends into `sent`).
    fn serve(&self, n: usize, me: &mut Visitor<'_>, sent: &mut Sent) {
        for batch in self.node(n).claims.due() {
            // A batch is one worker's claims (an outbox is a worker's): its
            // answers go back to that worker in one batch.
            let Some(w) = batch.first().map(|c| worker(c.id)) else { continue };
            let answers: Vec<Answer> = batch
                .iter()
                .map(|c| {
                    debug_assert_eq!(worker(c.id), w, "a batch of claims from two workers");
                    Answer { id: c.id, skip: me.visit(c.state, c.asleep).0 }
                })
                .collect();
            sent.batches += 1;
            sent.bytes += ANSWER_BYTES * answers.len() as u64;
            self.reply(w, answers);
        }
    }

    /// Worker `w` takes the answers due to it: each narrows the options of
    /// the node it was claimed at, where `nodes` (the path of the execution
    /// just run) still has it. The option that node explores now is
    /// explored to its end even when the answer leaves it alone: dropping
    /// its subtree lost states when nodes ran as processes (promises made
    /// below it, that other visits rely on).
    fn receive(&self, w: usize, local: &mut Local, mut nodes: Option<&mut [super::dfs::Node]>) {
        for batch in self.inbox(w).due() {
            let closed = batch.len() as u64;
            let mut admitted = 0;
            for a in batch {
                let at = local.answered(a.id) as usize;
                admitted += u64::from(a.skip.is_some());
                let node = nodes.as_mut().and_then(|n| n.get_mut(at)).filter(|n| n.claim == a.id);
                if let Some(node) = node {
                    node.narrow(a.skip.unwrap_or(ALL_LABELS));
                }
            }
            local.sent.admitted += admitted;
            self.open.fetch_sub(closed, SeqCst);
        }
    }

    /// Takes a subtree for a worker of node `n`: its node's newest, else
    /// the oldest of another node's (a steal, sent whole).
    fn take(&self, n: usize) -> Option<Subtree> {
        if let Some(t) = self.node(n).work.lock().expect("no worker panicked holding a queue").pop() {
            return Some(t);
        }
        // Another node's queue, where the nodes share this process; a
        // `ShardNode` holds only its own, and gets others' work from its
        // carrier (`ShardNode::pump`'s `give`).
        let k = self.nodes.len();
        for m in (1..k).map(|d| (n + d) % k) {
            let mut q = self.nodes[m].work.lock().expect("no worker panicked holding a queue");
            if !q.is_empty() {
                let t = q.remove(0);
                drop(q);
                let mut w = Writer::default();
                t.save(&mut w);
                self.counts.steals.fetch_add(1, Relaxed);
                self.counts.bytes.fetch_add(w.0.len() as u64, Relaxed);
                return Some(t);
            }
        }
        None
    }
}

/// A worker's claims not yet sent, by owner.
struct Outbox {
    claims: Vec<Vec<Claim>>,
    /// When the oldest claim not yet sent was made.
    since: Option<Instant>,
    /// Executions run since then.
    runs: u32,
}

impl Outbox {
    /// Sends node `to` its claims (counting them into `sent`).
    fn send(&mut self, s: &Search, to: usize, sent: &mut Sent) {
        if self.claims[to].is_empty() {
            return;
        }
        // Room for an execution's claims (most batches are one's).
        let batch = std::mem::replace(&mut self.claims[to], Vec::with_capacity(s.link.batch.min(8)));
        sent.batches += 1;
        sent.bytes += CLAIM_BYTES * batch.len() as u64;
        s.claim(to, batch);
    }

    /// Sends every claim gathered.
    fn flush(&mut self, s: &Search, sent: &mut Sent) {
        (0..self.claims.len()).for_each(|to| self.send(s, to, sent));
        self.since = None;
        self.runs = 0;
    }

    /// Sends the claims that have waited long enough.
    fn flush_old(&mut self, s: &Search, sent: &mut Sent) {
        let Some(since) = self.since else { return };
        self.runs += 1;
        if self.runs >= s.link.every && (s.link.latency.is_zero() || since.elapsed() >= s.link.latency) {
            self.flush(s, sent);
        }
    }
}

/// Explores every execution as [`super::exhaustive_parallel`] does, with
/// the visited set sharded among `nodes` in-process nodes of `jobs` workers
/// in all (dealt round the nodes; at least one each), their claims and
/// answers crossing `link`, keeping states as `fp` says. Returns the
/// statistics (`states`: the states the nodes own, together), a violation
/// if one was found, and the traffic.
pub fn exhaustive_sharded(
    each: &(dyn Fn(Worker<'_>) + Sync),
    nodes: usize,
    jobs: usize,
    link: Link,
    fp: Fingerprints,
    max_executions: u64,
) -> (Stats, Option<Outcome>, Traffic) {
    let nodes = nodes.clamp(1, MAX_NODES);
    let workers = jobs.max(nodes).min(1 << WORKER_BITS);
    let search = Search::new(nodes, workers, link, None, fp);
    search.start();
    search.run(each, &(0..workers).collect::<Vec<_>>(), max_executions);
    let found = search.found.lock().expect("no worker panicked holding the result").take();
    (search.stats(), found, search.traffic())
}

impl Search {
    /// Queues the root of the search on node 0 (here).
    fn start(&self) {
        self.open.fetch_add(1, SeqCst);
        self.node(0).work.lock().expect("unshared").push(Subtree::below(Vec::new(), Vec::new()));
    }

    /// Runs the workers numbered `ids` (worker `w` of node `w mod k`), each
    /// on a thread of its own, until the search is over.
    fn run(&self, each: &(dyn Fn(Worker<'_>) + Sync), ids: &[usize], max_executions: u64) {
        let switches = SWITCHES.with(std::cell::Cell::get);
        std::thread::scope(|scope| {
            for &w in ids {
                scope.spawn(move || {
                    let _stop = StopOnPanic(self);
                    each(&mut |run| work(run, self, w, max_executions, switches));
                });
            }
        });
    }

    /// What the search explored, as far as the nodes here know.
    fn stats(&self) -> Stats {
        Stats {
            executions: self.executions.load(Relaxed),
            states: self.states(),
            pruned: self.pruned.load(Relaxed),
            max_steps: self.max_steps.load(Relaxed),
            complete: !self.stop.load(Relaxed),
            visited_bytes: 0,
        }
    }

    /// What the nodes here sent.
    fn traffic(&self) -> Traffic {
        let c = &self.counts;
        Traffic {
            claims: c.claims.load(Relaxed),
            admitted: c.admitted.load(Relaxed),
            known: c.known.load(Relaxed),
            batches: c.batches.load(Relaxed),
            steals: c.steals.load(Relaxed),
            bytes: c.bytes.load(Relaxed),
            most_waiting: c.most_waiting.load(Relaxed),
            states: self.nodes.iter().map(|n| n.table.len() as u64).collect(),
        }
    }
}

/// Stops the search if the worker holding it unwinds (the others would
/// wait for its work forever).
struct StopOnPanic<'a>(&'a Search);

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.stop.store(true, SeqCst);
        }
    }
}

/// Worker `w` (of node `w mod K`): answers its node's claims, receives its
/// answers, and explores its node's subtrees (or another node's) until the
/// search is over.
fn work(run: &mut dyn FnMut(&mut dyn super::Chooser) -> Outcome, s: &Search, w: usize, max: u64, switches: Switches) {
    let n = w % s.k;
    let mut me = s.node(n).table.visitor();
    let mut out = Outbox { claims: vec![Vec::new(); s.k], since: None, runs: 0 };
    let mut local = Local::new(w);
    let mut idle = 0u32;
    loop {
        if s.stop.load(Relaxed) {
            local.done(&s.counts);
            return;
        }
        s.serve(n, &mut me, &mut local.sent);
        s.receive(w, &mut local, None);
        if s.holding() {
            out.flush(s, &mut local.sent);
            if local.waiting == 0 {
                s.rest(n, &mut me, &mut local.sent);
            } else {
                std::thread::sleep(Duration::from_micros(20));
            }
            continue;
        }
        if let Some(t) = s.take(n) {
            idle = 0;
            let mut at = At { s, w, n, me: &mut me, out: &mut out, local: &mut local };
            let done = at.explore(run, t, max, switches);
            if local.steps > s.max_steps.load(Relaxed) {
                s.max_steps.fetch_max(local.steps, Relaxed);
            }
            if done {
                s.open.fetch_sub(1, SeqCst);
            }
            continue;
        }
        out.flush(s, &mut local.sent);
        if s.open.load(SeqCst) == 0 && s.may_end() {
            local.done(&s.counts);
            return;
        }
        s.hungry.fetch_add(1, Relaxed);
        idle = idle.saturating_add(1);
        if idle < 64 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(20));
        }
        s.hungry.fetch_sub(1, Relaxed);
    }
}

/// A worker where it works: the search, its number and node, its way into
/// its node's table, its claims not yet sent and what it keeps to itself.
struct At<'a, 'v> {
    s: &'a Search,
    w: usize,
    n: usize,
    me: &'a mut Visitor<'v>,
    out: &'a mut Outbox,
    local: &'a mut Local,
}

impl At<'_, '_> {
    /// Explores subtree `t` depth-first, as the parallel search's workers
    /// do, claiming the states other nodes own and exploring them meanwhile
    /// as their claims say; returns whether it is done with the subtree
    /// (`false`: it put it back in its node's queue, for the carrier holds
    /// the workers).
    fn explore(
        &mut self,
        run: &mut dyn FnMut(&mut dyn super::Chooser) -> Outcome,
        mut t: Subtree,
        max: u64,
        switches: Switches,
    ) -> bool {
        let s = self.s;
        let k = s.k;
        let states = || s.states();
        let mut tally = Tally::new(&s.executions, &s.pruned, &states);
        let mut claims = Vec::new();
        loop {
            if s.stop.load(Relaxed) {
                return true;
            }
            if !tally.take(max) {
                s.stop.store(true, SeqCst);
                return true;
            }
            claims.clear();
            let (result, claimed) = {
                let me = &mut *self.me;
                let (n, known, pruned) = (self.n, &s.node(self.n).known, &mut self.local.known);
                let mut v = |state: u128, asleep: u64| {
                    if owner(state, k) == n {
                        // A table's answer may set every bit past the labels'
                        // (`CLAIMED`'s too): only a claim carries that flag.
                        return me.visit(state, asleep).0.map(|skip| skip & !CLAIMED);
                    }
                    let Some(skip) = known.unsettled(state, asleep) else {
                        *pruned += 1;
                        return None;
                    };
                    claims.push(Claim { state, asleep, id: 0 });
                    Some(skip | CLAIMED)
                };
                let mut d = Dfs::new(&t.stack, &mut t.nodes, &mut v, switches);
                let result = run(&mut d);
                let claimed = d.take_claimed();
                (result, claimed)
            };
            self.local.steps = self.local.steps.max(result.steps);
            tally.pruned += u64::from(result.pruned);
            if result.violation.is_some() {
                s.found.lock().expect("no worker panicked holding the result").get_or_insert(result);
                s.stop.store(true, SeqCst);
                return true;
            }
            debug_assert_eq!(claims.len(), claimed.len(), "a claim for each state the search claimed");
            // Counted before any of them can be answered.
            s.open.fetch_add(claims.len() as u64, SeqCst);
            for (&c, &at) in claims.iter().zip(&claimed) {
                self.claim(c, at, &mut t.nodes);
            }
            s.receive(self.w, self.local, Some(&mut t.nodes));
            if !t.advance(result.choices) {
                return true;
            }
            // A worker deep in a subtree still answers its node's claims.
            s.serve(self.n, self.me, &mut self.local.sent);
            self.out.flush_old(s, &mut self.local.sent);
            if s.holding() {
                s.node(self.n).work.lock().expect("no worker panicked holding a queue").push(t);
                return false;
            }
            if s.wanted() {
                self.give_away(&mut t);
            }
        }
    }

    /// Puts the untaken options of `t`'s shallowest open choice in its
    /// node's queue, for a worker that waits (here or, the carrier says, at
    /// another node), unless the queue holds some already: as the parallel
    /// search's workers give. Splitting at every execution while the
    /// carrier said another node waited (a poll apart, milliseconds) filled
    /// the queue with small subtrees, given away by halves: two nodes over
    /// TCP gave 77-339 subtrees and ran 1.09-1.11 times `--jobs 2`'s
    /// executions; with this rule they give one or two and run 1.05 times
    /// (`bench/2026-12-05-check-sharded-give-when-empty.md`).
    fn give_away(&mut self, t: &mut Subtree) {
        let s = self.s;
        let mut q = s.node(self.n).work.lock().expect("no worker panicked holding a queue");
        if q.is_empty() {
            let given = split_off(t);
            if !given.is_empty() {
                s.open.fetch_add(given.len() as u64, SeqCst);
                q.extend(given);
            }
        }
    }

    /// Claims the state of `claim` from its owner, made at choice `at` of
    /// the path `nodes` (whose node there, if the execution made one, its
    /// answer may narrow).
    fn claim(&mut self, mut claim: Claim, at: u32, nodes: &mut [super::dfs::Node]) {
        let s = self.s;
        claim.id = self.local.claim(at);
        if let Some(node) = nodes.get_mut(at as usize) {
            node.claim = claim.id;
        }
        let o = owner(claim.state, s.k);
        self.out.claims[o].push(claim);
        self.out.since.get_or_insert_with(Instant::now);
        if self.out.claims[o].len() >= s.link.batch {
            self.out.send(s, o, &mut self.local.sent);
        }
    }
}
