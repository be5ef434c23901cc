//! A sharded check driven from one place: the driver's loop over any kind
//! of node, and the nodes of one process.
//!
//! A driver polls each node's [`Status`], passes the polls to a [`Watch`]
//! and does what it says: gives the orders, or ends every node. What a node
//! is does not matter to it ([`Node`]): a [`Shard`] and its [`Courier`] in
//! this process ([`run_local`]), or a process of its own on this host
//! reached through its standard input and output
//! ([`piped`](super::piped)). (The Ray driver, `python/tlbkit/_ray.py`,
//! runs the same loop over actors.)
//!
//! A node that fails, or a poll that fails, ends every node (stopped, their
//! totals dropped) before the error is returned: no node's workers outlive
//! the driver.

use super::courier::{Courier, Next, Status, Watch};
use super::shards::{self, Shard, Totals};
use super::Error;
use crate::report::CheckReport;
use crate::search::Orders;
use std::sync::Arc;
use std::time::Duration;

/// What a node says when it ends.
#[derive(Clone, Debug, Default)]
pub struct Ended {
    /// Its totals.
    pub totals: Totals,
    /// The bytes it wrote to the other nodes.
    pub bytes: u64,
    /// The steps its workers ran, where it counts them apart from the
    /// driver's process (a node in a process of its own; 0 in the driver's).
    pub steps: u64,
    /// The most memory its process held (its peak resident set, bytes, as
    /// the process reads it of itself: [`tlbkit_host::memory::peak_bytes`]), where
    /// the node is a process of its own and the system says.
    pub peak: Option<u64>,
}

/// One node as a driver sees it.
pub trait Node {
    /// Its last pump's status (None before the first).
    fn status(&mut self) -> Result<Option<Status>, Error>;
    /// Gives it the driver's orders ([`Courier::order`]).
    fn order(&mut self, orders: Orders) -> Result<(), Error>;
    /// Ends it: with `finish`, the search is over ([`Shard::finish`]);
    /// otherwise it stops ([`Shard::stop`]). Returns what it says at the end.
    fn end(&mut self, finish: bool) -> Result<Ended, Error>;
}

/// Drives `nodes`, polling every `poll`, until the search is over or a node
/// stops it; returns what each said at the end. On an error every node is
/// stopped first.
pub fn drive<N: Node>(nodes: &mut [N], poll: Duration) -> Result<Vec<Ended>, Error> {
    let mut watch = Watch::default();
    let finish = loop {
        let next = match poll_all(nodes) {
            Ok(Some(now)) => watch.next(now),
            Ok(None) => Next::Go(Vec::new()),
            Err(e) => return Err(stop_all(nodes, e)),
        };
        match next {
            Next::Stop => break false,
            Next::Finish => break true,
            Next::Go(orders) => {
                if let Err(e) = orders.into_iter().try_for_each(|(i, o)| nodes[i].order(o)) {
                    return Err(stop_all(nodes, e));
                }
            }
            // Never held here: no snapshot to take.
            Next::Settled => {}
        }
        std::thread::sleep(poll);
    };
    let mut ended = Vec::with_capacity(nodes.len());
    for i in 0..nodes.len() {
        match nodes[i].end(finish) {
            Ok(e) => ended.push(e),
            Err(e) => return Err(stop_all(&mut nodes[i + 1..], e)),
        }
    }
    Ok(ended)
}

/// What the nodes of a search came to ([`conclude`]).
#[derive(Clone, Debug)]
pub struct Concluded {
    /// The search's report ([`shards::report`] of the nodes' totals).
    pub report: CheckReport,
    /// The bytes the nodes wrote to each other.
    pub bytes: u64,
    /// The steps they counted apart from the driver's process.
    pub steps: u64,
    /// Each node's [`Ended::peak`], in node order.
    pub peaks: Vec<Option<u64>>,
}

/// The search's end from what its nodes said at theirs.
pub fn conclude(spec: &crate::spec::CheckSpec, ended: Vec<Ended>) -> Result<Concluded, Error> {
    let (bytes, steps) = (ended.iter().map(|e| e.bytes).sum(), ended.iter().map(|e| e.steps).sum());
    let peaks = ended.iter().map(|e| e.peak).collect();
    let totals: Vec<Totals> = ended.into_iter().map(|e| e.totals).collect();
    Ok(Concluded { report: shards::report(spec, &totals)?, bytes, steps, peaks })
}

/// Every node's status, or None while some node has not pumped yet.
fn poll_all<N: Node>(nodes: &mut [N]) -> Result<Option<Vec<Status>>, Error> {
    nodes.iter_mut().map(Node::status).collect()
}

/// Stops every node, dropping what they say; returns `e`.
fn stop_all<N: Node>(nodes: &mut [N], e: Error) -> Error {
    for n in nodes {
        let _ = n.end(false);
    }
    e
}

/// A node of this process: its shard and its courier (in the driver's
/// process for [`run_local`], in a node's own for [`piped`](super::piped)).
pub(super) struct Local {
    shard: Arc<Shard>,
    courier: Courier,
    ended: bool,
}

impl Local {
    /// Starts node `me` of `nodes` of `spec` with `jobs` workers, its
    /// courier listening on loopback; returns it and the courier's address.
    pub(super) fn open(
        spec: &crate::spec::CheckSpec,
        me: usize,
        nodes: usize,
        jobs: usize,
    ) -> Result<(Local, String), Error> {
        let shard = Arc::new(Shard::start(spec.clone(), me, nodes, jobs, false)?);
        let (courier, address) = Courier::listen("127.0.0.1")?;
        Ok((Local { shard, courier, ended: false }, address))
    }

    /// Connects it, node `me`, to the others at `peers` and starts carrying
    /// its messages ([`Courier::start`]); returns once every other node has
    /// connected.
    pub(super) fn connect(&self, me: usize, peers: &[String]) -> Result<(), Error> {
        self.courier.start(self.shard.clone(), me, peers, Duration::from_micros(500))
    }
}

impl Node for Local {
    fn status(&mut self) -> Result<Option<Status>, Error> {
        self.courier.status()
    }

    fn order(&mut self, orders: Orders) -> Result<(), Error> {
        self.courier.order(orders);
        Ok(())
    }

    fn end(&mut self, finish: bool) -> Result<Ended, Error> {
        if std::mem::replace(&mut self.ended, true) {
            return Err(Error::Saved { why: "the node was ended already".into() });
        }
        self.courier.close();
        if finish {
            self.shard.finish();
        } else {
            self.shard.stop();
        }
        Ok(Ended { totals: self.shard.join()?, bytes: self.courier.bytes(), steps: 0, peak: None })
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        if !self.ended {
            let _ = self.end(false);
        }
    }
}

/// Runs the exhaustive check `spec` on `nodes` [`Shard`]s of `jobs`
/// workers each in this process, joined over loopback TCP by their
/// couriers and driven by a [`Watch`] polling every `poll` (`tlbkit bench
/// sharded --tcp`, and the tests); returns the report and the bytes the
/// nodes wrote to each other.
pub fn run_local(
    spec: &crate::spec::CheckSpec,
    nodes: usize,
    jobs: usize,
    poll: Duration,
) -> Result<(CheckReport, u64), Error> {
    let mut all = Vec::with_capacity(nodes);
    let mut peers = Vec::with_capacity(nodes);
    for me in 0..nodes {
        let (node, address) = Local::open(spec, me, nodes, jobs)?;
        all.push(node);
        peers.push(address);
    }
    // Each start waits for the others' connections: all at once.
    std::thread::scope(|scope| {
        let started: Vec<_> = all
            .iter()
            .enumerate()
            .map(|(me, n)| {
                let peers = &peers;
                scope.spawn(move || n.connect(me, peers))
            })
            .collect();
        started.into_iter().try_for_each(|t| t.join().expect("a courier's start does not panic"))
    })?;
    let c = conclude(spec, drive(&mut all, poll)?)?;
    Ok((c.report, c.bytes))
}
