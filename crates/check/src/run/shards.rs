//! An exhaustive check sharded among processes: each a node of
//! [`search::ShardNode`] (its part of the visited set and its workers),
//! moved between by a carrier (the Ray driver, `python/tlbkit/_ray.py`);
//! and the report made of the nodes' totals.
//!
//! A violation's counterexample comes from the execution the finding
//! worker ran (its token, run again and shrunk where the report is made),
//! never from a second search.

use super::rounds::{report_of, token_of, validate};
use super::*;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// What a node's workers return.
type Ran = Result<(Stats, Option<search::Outcome>), Error>;

/// One node of a sharded check, its workers running on threads of their own.
pub struct Shard {
    spec: CheckSpec,
    node: Arc<search::ShardNode>,
    /// The caller's counters (operations started, rollovers, initiators).
    counters: Arc<[AtomicU64; 3]>,
    running: Mutex<Option<JoinHandle<Ran>>>,
    jobs: usize,
}

/// The leading bytes of a sharded check's totals ([`Totals::save`]).
const MAGIC: &[u8] = b"tlbkit-shards 1\n";
/// The numbers of a node's totals as saved.
const FIELDS: usize = 9;

/// What one node of a sharded check explored, counted and found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// What its workers explored (`states`: those it owns).
    pub stats: Stats,
    /// The caller's counters: the most operations started, rollovers and
    /// initiating CPUs of one execution.
    pub counters: [u64; 3],
    /// Its workers.
    pub workers: u64,
    /// The token of the violating execution one of its workers ran.
    pub found: Option<String>,
}

impl Totals {
    /// The totals of every node as one file's bytes, for
    /// [`report_from_save`] in another process (`tlbkit check --ray`).
    pub fn save(all: &[Totals]) -> Vec<u8> {
        let mut w = search::saved::Writer::default();
        w.0.extend_from_slice(MAGIC);
        w.u64(all.len() as u64);
        for t in all {
            let s = &t.stats;
            let numbers = [s.executions, s.states, s.pruned, s.max_steps as u64, u64::from(s.complete)];
            numbers.iter().chain(&t.counters).chain([&t.workers]).for_each(|&v| w.u64(v));
            w.str(t.found.as_deref().unwrap_or(""));
        }
        w.0
    }

    /// Reads what [`Totals::save`] wrote.
    pub fn load(bytes: &[u8]) -> Result<Vec<Totals>, Error> {
        let body =
            bytes.strip_prefix(MAGIC).ok_or_else(|| Error::Saved { why: "not a sharded check's totals".into() })?;
        let read = || -> Result<Vec<Totals>, String> {
            let mut r = search::saved::Reader::new(body);
            let n = r.len(FIELDS * 8 + 8)?;
            let mut all = Vec::with_capacity(n);
            for _ in 0..n {
                // In the order `save` writes them (a tuple's are read left to right).
                let (executions, states, pruned, max_steps, complete) =
                    (r.u64()?, r.u64()?, r.u64()?, r.u64()?, r.u64()?);
                let stats =
                    Stats { executions, states, pruned, max_steps: max_steps as usize, complete: complete == 1 };
                let counters = [r.u64()?, r.u64()?, r.u64()?];
                let workers = r.u64()?;
                let found = Some(r.str()?).filter(|f| !f.is_empty());
                all.push(Totals { stats, counters, workers, found });
            }
            if !r.done() {
                return Err("bytes after the last node's totals".into());
            }
            Ok(all)
        };
        read().map_err(|why| Error::Saved { why: format!("a sharded check's totals: {why}") })
    }

    /// Returns whether the file's bytes are [`Totals::save`]'s.
    pub fn is_save(bytes: &[u8]) -> bool {
        bytes.starts_with(MAGIC)
    }
}

impl Shard {
    /// Starts node `me` of `nodes` of the exhaustive check `spec`, with
    /// `jobs` workers.
    pub fn start(spec: CheckSpec, me: usize, nodes: usize, jobs: usize) -> Result<Shard, Error> {
        validate(&spec)?;
        let shape = shape(&spec)?;
        let node = search::ShardNode::new(me, nodes, jobs).map_err(|problem| Error::Invalid {
            param: crate::error::Param::Ray,
            value: None,
            problem,
        })?;
        let jobs = node.workers();
        let (node, counters) = (Arc::new(node), Arc::new([AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)]));
        let (n, c, s) = (node.clone(), counters.clone(), spec.clone());
        let running = std::thread::spawn(move || with_workers(&s, &shape, &c, None, |each| n.run(each, s.iterations)));
        Ok(Shard { spec, node, counters, running: Mutex::new(Some(running)), jobs })
    }

    /// Hands in the other nodes' messages for this one, gives at most
    /// `give` subtrees to node `to`, says whether another node's workers
    /// wait (`wanted`); takes out this node's messages
    /// ([`search::ShardNode::pump`]).
    pub fn pump(&self, inbox: &[&[u8]], give: usize, to: usize, wanted: bool) -> Result<search::Pumped, Error> {
        self.node.pump(inbox, give, to, wanted).map_err(|why| Error::Saved { why: format!("a node's message: {why}") })
    }

    /// Ends the search here (every node's work is done).
    pub fn finish(&self) {
        self.node.finish();
    }

    /// Stops the search here (another node found a violation).
    pub fn stop(&self) {
        self.node.stop();
    }

    /// Waits for the workers (after [`Shard::finish`] or [`Shard::stop`],
    /// or once they stopped by themselves) and returns the node's totals.
    pub fn join(&self) -> Result<Totals, Error> {
        let handle = self.running.lock().expect("no caller panicked holding it").take();
        let Some(handle) = handle else {
            return Err(Error::Saved { why: "the node's totals were taken already".into() });
        };
        let (stats, found) =
            handle.join().map_err(|_| Error::Saved { why: "a worker of the node panicked".into() })??;
        Ok(Totals {
            stats,
            counters: self.counters.each_ref().map(|a| a.load(std::sync::atomic::Ordering::Relaxed)),
            workers: self.jobs as u64,
            found: found.map(|out| token_of(&self.spec, &out)),
        })
    }
}

/// The report of a sharded check from its nodes' totals: their states and
/// executions added, the caller's counters the most of any node's; with
/// a violation, the first node's that found one, run again here from its
/// token and shrunk.
pub fn report(spec: &CheckSpec, all: &[Totals]) -> Result<CheckReport, Error> {
    let most = |of: fn(&Totals) -> u64| all.iter().map(of).max().unwrap_or(0);
    let stats = Stats {
        executions: all.iter().map(|t| t.stats.executions).sum(),
        states: all.iter().map(|t| t.stats.states).sum(),
        pruned: all.iter().map(|t| t.stats.pruned).sum(),
        max_steps: all.iter().map(|t| t.stats.max_steps).max().unwrap_or(0),
        complete: all.iter().all(|t| t.stats.complete),
    };
    let counters = [most(|t| t.counters[0]), most(|t| t.counters[1]), most(|t| t.counters[2])];
    let workers = all.iter().map(|t| t.workers as usize).sum();
    let found = all.iter().find_map(|t| t.found.as_deref());
    report_of(spec, stats, &counters, workers, found)
}

/// [`report`] from the bytes [`Totals::save`] wrote.
pub fn report_from_save(spec: &CheckSpec, bytes: &[u8]) -> Result<CheckReport, Error> {
    report(spec, &Totals::load(bytes)?)
}
