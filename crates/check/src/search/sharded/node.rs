//! One node of a sharded search in a process of its own, and what it sends
//! the others, as bytes.
//!
//! # Design
//!
//! A [`ShardNode`] holds its part of the visited set and runs its workers
//! as [`super::exhaustive_sharded`]'s nodes do; what one sends another node
//! (a batch of claims, a batch of answers, subtrees it gives away) waits in
//! an outbox until its *carrier* calls [`ShardNode::pump`], which hands in
//! what the other nodes sent this one and takes out what this one has for
//! them, each message with the node it is for. The carrier (the Ray driver
//! of `python/tlbkit/_ray.py`, or a test's loop) only moves bytes: it reads
//! nothing in them.
//!
//! **Work between nodes.** A node's workers give part of their subtrees to
//! its queue while any worker waits, here or (the carrier says, `wanted`)
//! at another node; the carrier asks a node with a queue to give some away
//! (`give`), and they travel as a message like any other.
//!
//! **The end.** Each node's `open` counts its own work: subtrees queued or
//! explored, and claims its workers sent that are not yet answered (a
//! claim or an answer on its way is its claimer's). Subtrees given
//! away leave the giver's count when they leave its queue and enter the
//! receiver's before they enter its queue. So the whole search is over
//! when, in one round of pumps, every node says its `open` is zero, none
//! sent anything and the carrier handed none anything: work appears at a
//! node only through a pump, and none carried any. The carrier then
//! [`ShardNode::finish`]es every node.
//!
//! # Snapshots
//!
//! A snapshot is every node's part taken at one moment when nothing is on
//! its way between them, so that together they are the search (its visited
//! set and its frontier), with no claim or answer lost. The carrier *holds*
//! the nodes (`pump`'s `hold`): a worker stops at its next execution's end
//! (its subtree put in its node's queue, positioned at the execution it
//! would run next), sends its claims, waits for the answer to every claim
//! it sent and rests, still answering its node's claims. A node is
//! *settled* when every worker rests. A claim or an answer on its way
//! means a worker that does not rest, so
//! once a round of pumps finds every node settled and carries nothing (no
//! subtree on its way either), nothing is in flight, and stays so: the
//! carrier takes each node's [`ShardNode::save`] and lets the hold go.
//!
//! A snapshot resumes on any number of nodes ([`ShardNode::resuming`]): the
//! owner of a state is its fingerprint's, dealt round the new nodes; the
//! frontier's subtrees are dealt round them too.
//! What the workers knew of other nodes' answers ([`super::Known`]) is not
//! kept: it only saves claims.
//!
//! A node that [`ShardNode::record_changes`] can save, after a whole part,
//! only the states its visits added or narrowed since its last save (with
//! its whole frontier and counts): a *delta*. [`ShardNode::merge`] lays a
//! whole part and the deltas after it into one part, as the node would
//! have saved it whole at the last.
//!
//! # Messages
//!
//! A message is its kind (one byte), a count, then its items: claims
//! (state, mask asleep, claim's number: 24 bytes each), answers (the
//! claim's number, then a byte 1 and the mask to leave alone, or a byte 0:
//! 17 or 9 bytes), or subtrees as a save writes them.

use super::{Answer, Claim, Link, Mailbox, Search, Stats, Subtree, Wire, CLAIM_BYTES, MAX_NODES, WORKER_BITS};
use crate::search::parallel::{load_subtrees, save_subtrees};
use crate::search::saved::{Out, Reader, Writer};
use crate::search::table::{pack, states_len, unpack, write_states, Fingerprints, Stored};
use crate::search::{Outcome, Worker};
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::time::Instant;

const CLAIMS: u8 = 0;
const ANSWERS: u8 = 1;
const SUBTREES: u8 = 2;

/// One node of a search sharded among processes.
pub struct ShardNode {
    search: Search,
    /// This node's workers' numbers (worker `w` of node `w mod k`).
    ids: Vec<usize>,
    /// Whether its table marks the states its visits add or narrow
    /// ([`ShardNode::record_changes`]).
    recording: bool,
}

/// What the carrier tells a node at a [`ShardNode::pump`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Orders {
    /// Give at most this many queued subtrees (at most half the queue) ...
    pub give: usize,
    /// ... to this node.
    pub to: usize,
    /// Another node's workers wait for work: workers keep part of their
    /// subtrees in the queue.
    pub wanted: bool,
    /// Hold the workers for a snapshot (see "Snapshots"); `false` lets
    /// them go on.
    pub hold: bool,
}

/// What a [`ShardNode::pump`] took out, and where the node stands.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pumped {
    /// The messages for other nodes, each with the node it is for.
    pub out: Vec<(usize, Vec<u8>)>,
    /// Its work still open (see the module documentation).
    pub open: u64,
    /// Subtrees in its queue.
    pub queued: usize,
    /// Its workers waiting for work.
    pub hungry: usize,
    /// Whether its search has stopped: a violation found, or the limit of
    /// executions reached.
    pub stopped: bool,
    /// The executions it has run.
    pub executions: u64,
    /// The states it owns.
    pub states: u64,
    /// Held, every worker at rest (see "Snapshots").
    pub settled: bool,
    /// The bytes its part of the visited set takes.
    pub bytes: u64,
}

impl ShardNode {
    /// Node `me` of `nodes`, with `jobs` workers (at most 2^16 / `nodes`),
    /// keeping states as `fp` says, with nothing to do yet.
    fn empty(me: usize, nodes: usize, jobs: usize, fp: Fingerprints) -> Result<ShardNode, String> {
        if nodes == 0 || nodes > MAX_NODES || me >= nodes {
            return Err(format!("node {me} of {nodes}: give 1 to {MAX_NODES} nodes, each numbered below their count"));
        }
        let jobs = jobs.clamp(1, (1 << WORKER_BITS) / nodes);
        let wire = Wire {
            me,
            claims: (0..nodes).map(|_| Mailbox::new()).collect(),
            answers: (0..nodes).map(|_| Mailbox::new()).collect(),
            finished: false.into(),
            wanted: false.into(),
            hold: false.into(),
            resting: 0.into(),
        };
        let search = Search::new(nodes, jobs, Link::default(), Some(wire), fp);
        Ok(ShardNode { search, ids: (0..jobs).map(|i| me + i * nodes).collect(), recording: false })
    }

    /// Node `me` of `nodes`, with `jobs` workers, of a new search (node 0
    /// holds its root) that keeps states as `fp` says.
    pub fn new(me: usize, nodes: usize, jobs: usize, fp: Fingerprints) -> Result<ShardNode, String> {
        let node = ShardNode::empty(me, nodes, jobs, fp)?;
        if me == 0 {
            node.search.start();
        }
        Ok(node)
    }

    /// Node `me` of `nodes`, with `jobs` workers, of the search whose
    /// snapshot's parts (every node's [`ShardNode::save`], of any number of
    /// nodes) it is then given one at a time, in node order
    /// ([`Resuming::take`]), so that it holds one part at a time: the states
    /// it owns among theirs, its share of their frontier, and on node 0
    /// their counts. `fp` is the search's, as when it started.
    pub fn resuming(me: usize, nodes: usize, jobs: usize, fp: Fingerprints) -> Result<Resuming, String> {
        let node = ShardNode::empty(me, nodes, jobs, fp)?;
        Ok(Resuming { node, parts: 0, counts: [0; 3], extra: Vec::new(), item: 0, work: Vec::new() })
    }

    /// Marks, from now on, each state a visit here adds or narrows, so
    /// that a later [`ShardNode::save`] may write only those. Before the
    /// node runs (it takes the node whole).
    pub fn record_changes(&mut self) {
        for n in &mut self.search.nodes {
            n.table.record_changes();
        }
        self.recording = true;
    }

    /// Its part of a snapshot of the search, with the caller's counters
    /// `extra`: its counts, the states it owns and its frontier (its
    /// queue, where its workers put their subtrees down); with
    /// `changed_only`, of the states only those added or narrowed since its
    /// last save (a *delta*, which [`ShardNode::merge`] lays over the parts
    /// before it; the node must [`ShardNode::record_changes`]). Only while
    /// every worker rests: the carrier held the nodes ([`ShardNode::pump`]'s
    /// `hold`) until each said it is [`Pumped::settled`] and, in that round,
    /// nothing moved between them.
    pub fn save(&self, extra: &[u64], changed_only: bool, out: &mut dyn Out) -> Result<(), String> {
        let node = self.savable(changed_only)?;
        Part::head(out, self.counts(), extra);
        if changed_only {
            node.table.save_changes(out);
        } else {
            node.table.save(out);
            node.table.drain_changes(false);
        }
        out.bytes(&self.frontier());
        Ok(())
    }

    /// The bytes [`ShardNode::save`] would write now.
    pub fn save_len(&self, extra: &[u64], changed_only: bool) -> Result<u64, String> {
        let node = self.savable(changed_only)?;
        let mut head = Writer::default();
        Part::head(&mut head, self.counts(), extra);
        let states = if changed_only { node.table.changed() } else { node.table.count() };
        Ok(head.0.len() as u64 + states_len(states) + self.frontier().len() as u64)
    }

    /// This node's table and queue, if its part of a snapshot can be taken now.
    fn savable(&self, changed_only: bool) -> Result<&super::Node, String> {
        if !self.settled() {
            return Err("a snapshot of a node whose workers are not all at rest".into());
        }
        if changed_only && !self.recording {
            return Err("a snapshot of what changed, from a node that marks no changes".into());
        }
        Ok(self.search.node(self.wire().me))
    }

    /// Its executions, cut executions and most steps.
    fn counts(&self) -> [u64; 3] {
        let s = &self.search;
        [s.executions.load(Relaxed), s.pruned.load(Relaxed), s.max_steps.load(Relaxed) as u64]
    }

    /// Its queue, as a part writes it.
    fn frontier(&self) -> Vec<u8> {
        let work = self.search.node(self.wire().me).work.lock().expect("no worker panicked holding a queue");
        let mut w = Writer::default();
        save_subtrees(&mut w, work.iter());
        w.0
    }

    /// One part made of a node's whole part and the deltas that followed
    /// it, in order (each [`ShardNode::save`]'s body): every state any of
    /// them holds (one held twice keeps both masks; a state's mask only
    /// narrows, so that is its last), and the counts and frontier of the
    /// last.
    pub fn merge(bodies: &[&[u8]]) -> Result<Vec<u8>, String> {
        let mut parts = Vec::with_capacity(bodies.len());
        for (k, body) in bodies.iter().enumerate() {
            parts.push(Part::read(body).map_err(|why| match k {
                0 => format!("its whole part: {why}"),
                _ => format!("its delta {k}: {why}"),
            })?);
        }
        let Some(last) = parts.last() else { return Err("no part to merge".into()) };
        let mut w = Writer::default();
        Part::head(&mut w, last.counts, &last.extra);
        let mut read = Ok(());
        write_states(&mut w, parts.iter().map(|p| p.visited.len()).sum(), &mut |f| {
            read = parts.iter().try_for_each(|p| {
                p.visited.each(&mut |fp, m| {
                    f(fp, m);
                    Ok(())
                })
            });
        });
        read?;
        save_subtrees(&mut w, last.work.iter());
        Ok(w.0)
    }

    /// Whether the carrier holds this node and every worker rests.
    fn settled(&self) -> bool {
        let x = self.wire();
        x.hold.load(SeqCst) && x.resting.load(SeqCst) == self.ids.len()
    }

    /// Its workers.
    pub fn workers(&self) -> usize {
        self.ids.len()
    }

    fn wire(&self) -> &Wire {
        self.search.wire.as_ref().expect("a shard node has its wire")
    }

    /// Runs the node's workers until the carrier finishes the search, or
    /// it stops; returns what they explored and the violation found here
    /// if one was.
    pub fn run(&self, each: &(dyn Fn(Worker<'_>) + Sync), max_executions: u64) -> (Stats, Option<Outcome>) {
        self.search.run(each, &self.ids, max_executions);
        let found = self.search.found.lock().expect("no worker panicked holding the result").take();
        (self.search.stats(), found)
    }

    /// Hands in `inbox` (what the other nodes sent this one) and the
    /// carrier's `orders`; takes out what this node has for the others.
    /// Refuses a message it cannot read (and takes in none of the inbox
    /// after it).
    pub fn pump(&self, inbox: &[&[u8]], orders: Orders) -> Result<Pumped, String> {
        let s = &self.search;
        let x = self.wire();
        for m in inbox {
            self.take_in(m)?;
        }
        let Orders { give, to, wanted, hold } = orders;
        x.wanted.store(wanted, Relaxed);
        x.hold.store(hold, SeqCst);
        let mut out = Vec::new();
        for (to, mailbox) in x.claims.iter().enumerate() {
            for batch in mailbox.all() {
                out.push((to, encode_claims(&batch)));
            }
        }
        for (to, mailbox) in x.answers.iter().enumerate() {
            for batch in mailbox.all() {
                out.push((to, encode_answers(&batch)));
            }
        }
        if give > 0 && to != x.me && to < s.k {
            if let Some(m) = self.give(give) {
                out.push((to, m));
            }
        }
        let queued = s.node(x.me).work.lock().expect("no worker panicked holding a queue").len();
        Ok(Pumped {
            out,
            open: s.open.load(SeqCst),
            queued,
            hungry: s.hungry.load(Relaxed),
            stopped: s.stop.load(SeqCst),
            executions: s.executions.load(Relaxed),
            states: s.states(),
            settled: self.settled(),
            bytes: s.node(x.me).table.bytes(),
        })
    }

    /// Takes the oldest `n` subtrees of the queue (at most half of it,
    /// at least one) out as a message.
    fn give(&self, n: usize) -> Option<Vec<u8>> {
        let s = &self.search;
        let given: Vec<Subtree> = {
            let mut q = s.node(self.wire().me).work.lock().expect("no worker panicked holding a queue");
            let n = n.min(q.len().div_ceil(2));
            q.drain(..n).collect()
        };
        if given.is_empty() {
            return None;
        }
        // Out of the queue, then out of the count: on its way, the carrier
        // holds it.
        s.open.fetch_sub(given.len() as u64, SeqCst);
        let mut w = Writer::default();
        w.u8(SUBTREES);
        save_subtrees(&mut w, given.iter());
        let m = w.0;
        s.counts.steals.fetch_add(given.len() as u64, Relaxed);
        s.counts.bytes.fetch_add(m.len() as u64, Relaxed);
        Some(m)
    }

    /// Takes in one message from another node.
    fn take_in(&self, m: &[u8]) -> Result<(), String> {
        let s = &self.search;
        let me = self.wire().me;
        let mut r = Reader::new(m);
        let now = Instant::now();
        match r.u8()? {
            CLAIMS => {
                let n = r.len(CLAIM_BYTES as usize)?;
                let batch = (0..n)
                    .map(|_| {
                        let (state, asleep) = unpack([r.u64()?, r.u64()?])?;
                        Ok(Claim { state, asleep, id: r.u64()? })
                    })
                    .collect::<Result<Vec<_>, String>>()?;
                s.node(me).claims.send(now, batch);
            }
            ANSWERS => {
                let n = r.len(9)?;
                let batch = (0..n)
                    .map(|_| {
                        let id = r.u64()?;
                        let skip = match r.u8()? {
                            0 => None,
                            _ => Some(r.u64()?),
                        };
                        Ok(Answer { id, skip })
                    })
                    .collect::<Result<Vec<_>, String>>()?;
                let Some(w) = batch.first().map(|a| super::worker(a.id)) else { return Ok(()) };
                if w % s.k != me || batch.iter().any(|a| super::worker(a.id) != w) || w / s.k >= self.ids.len() {
                    return Err(format!("answers for worker {w}, not one of node {me}'s"));
                }
                s.inbox(w).send(now, batch);
            }
            SUBTREES => {
                let trees = load_subtrees(&mut r)?;
                // Into the count before into the queue: `open` never
                // passes zero early.
                s.open.fetch_add(trees.len() as u64, SeqCst);
                s.node(me).work.lock().expect("no worker panicked holding a queue").extend(trees);
            }
            k => return Err(format!("a message of kind {k}, not a claim, answer or subtree")),
        }
        if !r.done() {
            return Err("a message with bytes after its last item".into());
        }
        Ok(())
    }

    /// Ends the search here: the carrier has seen every node's work done.
    /// The workers return once nothing is open here.
    pub fn finish(&self) {
        self.wire().hold.store(false, SeqCst);
        self.wire().finished.store(true, SeqCst);
    }

    /// Stops the search here (another node found a violation).
    pub fn stop(&self) {
        self.search.stop.store(true, SeqCst);
    }
}

/// A message of `kind`: its items' count, then each as `item` writes it.
fn encode<T>(kind: u8, batch: &[T], item: impl Fn(&mut Writer, &T)) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(kind);
    w.u64(batch.len() as u64);
    batch.iter().for_each(|t| item(&mut w, t));
    w.0
}

fn encode_claims(batch: &[Claim]) -> Vec<u8> {
    encode(CLAIMS, batch, |w, c| {
        pack(c.state, c.asleep).into_iter().for_each(|word| w.u64(word));
        w.u64(c.id);
    })
}

fn encode_answers(batch: &[Answer]) -> Vec<u8> {
    encode(ANSWERS, batch, |w, a| {
        w.u64(a.id);
        match a.skip {
            None => w.u8(0),
            Some(m) => {
                w.u8(1);
                w.u64(m);
            }
        }
    })
}

/// A node resuming from a snapshot, its parts taken in one at a time.
pub struct Resuming {
    node: ShardNode,
    /// The parts taken in so far.
    parts: usize,
    counts: [u64; 3],
    extra: Vec<u64>,
    /// The frontier's items seen so far, the node's among them.
    item: usize,
    work: Vec<Subtree>,
}

impl Resuming {
    /// Takes in the next part (parts in node order): the states this node
    /// owns among its own, its share of the part's frontier (item `i` of
    /// all goes to node `i mod nodes`), its counts.
    pub fn take(&mut self, part: &[u8]) -> Result<(), String> {
        let i = self.parts;
        let theirs = |why| format!("node {i}'s part of the snapshot: {why}");
        let p = Part::read(part).map_err(theirs)?;
        let (me, nodes) = (self.node.wire().me, self.node.search.k);
        // Its own states straight from the part's bytes, checked first.
        let mine = |fp| super::owner(fp, nodes) == me;
        let table = &self.node.search.node(me).table;
        table.admit_stored_where(std::slice::from_ref(&p.visited), &mine).map_err(theirs)?;
        let c = &mut self.counts;
        *c = [c[0] + p.counts[0], c[1] + p.counts[1], c[2].max(p.counts[2])];
        self.extra.resize(self.extra.len().max(p.extra.len()), 0);
        self.extra.iter_mut().zip(&p.extra).for_each(|(e, &v)| *e = (*e).max(v));
        for t in p.work {
            if self.item % nodes == me {
                self.work.push(t);
            }
            self.item += 1;
        }
        self.parts += 1;
        Ok(())
    }

    /// The parts taken in so far.
    pub fn parts(&self) -> usize {
        self.parts
    }

    /// The node, with the caller's counters the parts held (the most of
    /// each; on node 0 only, else zeros).
    pub fn done(self) -> (ShardNode, Vec<u64>) {
        let Resuming { node, counts, extra, work, .. } = self;
        let s = &node.search;
        let me = node.wire().me;
        s.open.store(work.len() as u64, SeqCst);
        *s.node(me).work.lock().expect("unshared") = work;
        if me != 0 {
            let zeros = vec![0; extra.len()];
            return (node, zeros);
        }
        s.executions.store(counts[0], Relaxed);
        s.pruned.store(counts[1], Relaxed);
        s.max_steps.store(counts[2] as usize, Relaxed);
        (node, extra)
    }
}

/// A node's part of a snapshot, its states left in its bytes (checked
/// before any of them is taken in: a part that turns out corrupt changes
/// nothing).
struct Part<'a> {
    /// Executions, cut executions, most steps.
    counts: [u64; 3],
    extra: Vec<u64>,
    visited: Stored<'a>,
    work: Vec<Subtree>,
}

impl<'a> Part<'a> {
    /// A part's first bytes: the counts and the caller's counters `extra`
    /// (then come the states, as the table saves them, and the queue).
    fn head(w: &mut dyn Out, counts: [u64; 3], extra: &[u64]) {
        counts.iter().for_each(|&c| w.u64(c));
        w.u64(extra.len() as u64);
        extra.iter().for_each(|&e| w.u64(e));
    }

    /// Reads what [`ShardNode::save`] wrote.
    fn read(body: &'a [u8]) -> Result<Part<'a>, String> {
        let mut r = Reader::new(body);
        let counts = [r.u64()?, r.u64()?, r.u64()?];
        let n = r.len(8)?;
        let extra = (0..n).map(|_| r.u64()).collect::<Result<Vec<_>, _>>()?;
        let visited = Stored::read(&mut r)?;
        let work = load_subtrees(&mut r)?;
        if !r.done() {
            return Err("bytes after its last item".into());
        }
        Ok(Part { counts, extra, visited, work })
    }
}
