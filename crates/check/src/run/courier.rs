//! A sharded check's messages carried straight between its nodes over TCP.
//!
//! Each node ([`Shard`]) has a [`Courier`]: it listens on a port of its
//! own ([`Courier::listen`]), and once told every node's address
//! ([`Courier::start`]) it connects to each of the others and runs one
//! thread that pumps its node ([`Shard::pump`]) and writes what the node
//! has for node `i` to the connection to `i`, and one thread per incoming
//! connection that reads the others' messages into its inbox; both kinds
//! are batch threads, which wait for a worker's turn to end rather than
//! preempt it ([`batch_thread`]). No message
//! passes through the driver, which only polls each node's [`Status`],
//! gives orders ([`Courier::order`]) and sees the end; on Ray the driver
//! and the nodes talk through actor calls, the messages through these
//! connections (`python/tlbkit/_ray.py`).
//!
//! On the wire a message is its length (`u32`, little-endian) and its bytes.
//! A message counts as sent when written and as received when the node has
//! taken it in, so that a driver can tell from the counts that none is on
//! its way: the search is over when two polls in a row find every node
//! with no work open, the same counts at each, and as many messages taken
//! in as sent in all (a node with no work open starts nothing until a
//! message reaches it).
//!
//! A connection that fails (its node's process killed) is closed and what
//! was for that node dropped; the node goes on. The driver learns of the
//! loss from its own calls to the node, and starts the search again from
//! its last snapshot.

use super::shards::Shard;
use super::Error;
use crate::search::{Orders, Pumped};
use std::io::{BufReader, BufWriter, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The longest message a node accepts (a frontier given away is the
/// largest: megabytes at most).
const MAX_MESSAGE: usize = 1 << 30;

/// How long a node waits for the others' connections.
const CONNECT_WITHIN: Duration = Duration::from_secs(120);

/// A node's last pump, with its messages counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// Messages it has written to the others.
    pub sent: u64,
    /// Messages it has taken in.
    pub received: u64,
    /// What its last pump returned, but the messages out.
    pub pumped: Pumped,
}

/// What the carrying thread and the readers share.
#[derive(Default)]
struct Post {
    /// Messages read and not yet taken in, and the driver's orders.
    mail: Mutex<Mail>,
    /// Rung when a message or an order arrives, or the courier closes.
    bell: Doorbell,
    /// The last pump's status, or the error that ended the carrying.
    status: Mutex<Option<Result<Status, String>>>,
    ending: AtomicBool,
    /// Bytes written to the other nodes.
    written: AtomicU64,
}

#[derive(Default)]
struct Mail {
    inbox: Vec<Vec<u8>>,
    orders: Orders,
}

/// What wakes the carrying thread.
#[derive(Debug, Default)]
struct Doorbell {
    rung: Mutex<bool>,
    woken: Condvar,
}

impl Doorbell {
    /// Rings it: the next (or the current) [`Doorbell::wait`] returns.
    fn ring(&self) {
        *self.rung.lock().expect("no thread panicked holding a doorbell") = true;
        self.woken.notify_one();
    }

    /// Waits until it rings, at most `timeout`; then it is silent again.
    fn wait(&self, timeout: Duration) {
        let mut rung = self.rung.lock().expect("no thread panicked holding a doorbell");
        if !*rung {
            rung = self.woken.wait_timeout(rung, timeout).expect("no thread panicked holding a doorbell").0;
        }
        *rung = false;
    }
}

/// A node's connections to the others and the threads that use them.
pub struct Courier {
    listener: TcpListener,
    post: Arc<Post>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Clones of every connection, to shut them down at the end.
    streams: Mutex<Vec<TcpStream>>,
}

impl Courier {
    /// Listens on a port of `host` (an address of this machine the
    /// others can reach; the port chosen by the system); returns the
    /// courier and the address to give the other nodes (`host:port`, or
    /// `[host]:port` for IPv6).
    pub fn listen(host: &str) -> Result<(Courier, String), Error> {
        let listener = TcpListener::bind((host, 0)).map_err(|e| net(&format!("listening on {host}"), &e))?;
        // As the system writes it: an IPv6 address in brackets.
        let address = listener.local_addr().map_err(|e| net("reading the port", &e))?.to_string();
        let courier = Courier { listener, post: Arc::default(), threads: Mutex::default(), streams: Mutex::default() };
        Ok((courier, address))
    }

    /// Connects to every other node (`peers[i]`: node `i`'s address, this
    /// node's own at `me`), accepts their `peers.len() - 1` connections and
    /// starts carrying `shard`'s messages: a pump as soon as a message
    /// arrives, and at most `pause` apart otherwise.
    pub fn start(&self, shard: Arc<Shard>, me: usize, peers: &[String], pause: Duration) -> Result<(), Error> {
        let mut out = Vec::with_capacity(peers.len());
        for (i, address) in peers.iter().enumerate() {
            if i == me {
                out.push(None);
                continue;
            }
            let stream =
                TcpStream::connect(address).map_err(|e| net(&format!("connecting to node {i} at {address}"), &e))?;
            stream.set_nodelay(true).map_err(|e| net("setting TCP_NODELAY", &e))?;
            self.keep(&stream)?;
            out.push(Some(BufWriter::with_capacity(1 << 16, stream)));
        }
        let mut threads = self.threads.lock().expect("no thread panicked holding it");
        // One deadline for them all: a node that never comes makes the
        // others wait [`CONNECT_WITHIN`], not that much for each.
        let deadline = Instant::now() + CONNECT_WITHIN;
        for got in 0..peers.len() - 1 {
            let stream = self.accept(deadline, got, peers.len() - 1)?;
            self.keep(&stream)?;
            let post = self.post.clone();
            threads.push(std::thread::spawn(move || read_from(stream, &post)));
        }
        let post = self.post.clone();
        threads.push(std::thread::spawn(move || carry(&shard, &post, out, pause)));
        Ok(())
    }

    /// The next node's connection before `deadline`, `got` of the `n` in
    /// all having connected.
    fn accept(&self, deadline: Instant, got: usize, n: usize) -> Result<TcpStream, Error> {
        self.listener.set_nonblocking(true).map_err(|e| net("listening", &e))?;
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    stream.set_nonblocking(false).map_err(|e| net("accepting a node's connection", &e))?;
                    return Ok(stream);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    let why = format!("{got} of the {n} other nodes connected within {CONNECT_WITHIN:?}");
                    return Err(Error::Saved { why: format!("a sharded check's connection: {why}") });
                }
                Err(e) => return Err(net("accepting a node's connection", &e)),
            }
        }
    }

    fn keep(&self, stream: &TcpStream) -> Result<(), Error> {
        let copy = stream.try_clone().map_err(|e| net("cloning a connection", &e))?;
        self.streams.lock().expect("no thread panicked holding it").push(copy);
        Ok(())
    }

    /// The driver's orders for the next pumps: `give` and `to` once (only
    /// where `give > 0`), `wanted` and `hold` until changed.
    pub fn order(&self, orders: Orders) {
        let mut mail = self.post.mail.lock().expect("no thread panicked holding it");
        if orders.give > 0 {
            (mail.orders.give, mail.orders.to) = (orders.give, orders.to);
        }
        (mail.orders.wanted, mail.orders.hold) = (orders.wanted, orders.hold);
        drop(mail);
        self.post.bell.ring();
    }

    /// The last pump's status (None before the first); an error if the
    /// node refused a message or its pump failed.
    pub fn status(&self) -> Result<Option<Status>, Error> {
        let status = self.post.status.lock().expect("no thread panicked holding it").clone();
        status.transpose().map_err(|why| Error::Saved { why })
    }

    /// The bytes this node has written to the others (lengths included).
    pub fn bytes(&self) -> u64 {
        self.post.written.load(Relaxed)
    }

    /// Stops carrying and closes the connections (the node's own end is
    /// the caller's: [`Shard::finish`] or [`Shard::stop`]).
    pub fn close(&self) {
        self.post.ending.store(true, SeqCst);
        self.post.bell.ring();
        for s in self.streams.lock().expect("no thread panicked holding it").drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
        for t in self.threads.lock().expect("no thread panicked holding it").drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Courier {
    fn drop(&mut self) {
        self.close();
    }
}

fn net(what: &str, e: &std::io::Error) -> Error {
    Error::Saved { why: format!("a sharded check's connection: {what}: {e}") }
}

/// Reads messages from one node until its connection ends.
fn read_from(stream: TcpStream, post: &Post) {
    batch_thread();
    let mut r = BufReader::with_capacity(1 << 16, stream);
    let mut len = [0u8; 4];
    while r.read_exact(&mut len).is_ok() {
        let n = u32::from_le_bytes(len) as usize;
        if n > MAX_MESSAGE {
            fail(post, format!("a node's message of {n} bytes, more than the {MAX_MESSAGE} a node takes"));
            return;
        }
        let mut m = vec![0; n];
        if r.read_exact(&mut m).is_err() {
            return;
        }
        post.mail.lock().expect("no thread panicked holding it").inbox.push(m);
        post.bell.ring();
    }
}

/// Makes the calling thread (a courier's) one that does not preempt the
/// search's workers when it wakes: Linux's `SCHED_BATCH`. A courier wakes
/// for every message, some thousands of times a second; where every core
/// runs a worker (two node processes of one worker each on two cores),
/// each wake-up took a worker off its core at once. As a batch thread it
/// runs when the worker's turn ends, or on an idle core at once as before,
/// and takes in the messages that arrived meanwhile together. As ordinary
/// threads the wake-ups cost two node processes some 8% of their time; the
/// answers that wait for a turn's end cost some 0.4% more executions
/// (`bench/2026-12-06-check-courier-batch-threads.md`). Where the system
/// refuses, the thread stays as it was.
fn batch_thread() {
    #[cfg(target_os = "linux")]
    // SAFETY: sets the calling thread's scheduling policy (thread 0: the
    // caller); the parameter is only read.
    unsafe {
        let p = libc::sched_param { sched_priority: 0 };
        libc::sched_setscheduler(0, libc::SCHED_BATCH, &p);
    }
}

fn fail(post: &Post, why: String) {
    *post.status.lock().expect("no thread panicked holding it") = Some(Err(why));
    post.ending.store(true, SeqCst);
    post.bell.ring();
}

/// Pumps `shard` until the courier closes: takes in what arrived, writes
/// out what it has for each node (`out[i]`, none for itself).
fn carry(shard: &Shard, post: &Post, mut out: Vec<Option<BufWriter<TcpStream>>>, pause: Duration) {
    batch_thread();
    let (mut sent, mut received) = (0u64, 0u64);
    while !post.ending.load(SeqCst) {
        post.bell.wait(pause);
        let (inbox, orders) = {
            let mut mail = post.mail.lock().expect("no thread panicked holding it");
            let orders = mail.orders;
            mail.orders.give = 0;
            (std::mem::take(&mut mail.inbox), orders)
        };
        if post.ending.load(SeqCst) {
            break;
        }
        let views: Vec<&[u8]> = inbox.iter().map(Vec::as_slice).collect();
        let mut p = match shard.pump(&views, orders) {
            Ok(p) => p,
            Err(e) => return fail(post, e.to_string()),
        };
        received += inbox.len() as u64;
        for (to, m) in std::mem::take(&mut p.out) {
            let Some(Some(w)) = out.get_mut(to) else { continue };
            let written = u32::try_from(m.len())
                .map_err(|_| ())
                .and_then(|n| w.write_all(&n.to_le_bytes()).and_then(|()| w.write_all(&m)).map_err(|_| ()));
            match written {
                Ok(()) => {
                    sent += 1;
                    post.written.fetch_add(4 + m.len() as u64, Relaxed);
                }
                // The node is lost: what was for it is dropped.
                Err(()) => out[to] = None,
            }
        }
        for w in &mut out {
            if w.as_mut().is_some_and(|w| w.flush().is_err()) {
                *w = None;
            }
        }
        *post.status.lock().expect("no thread panicked holding it") = Some(Ok(Status { sent, received, pumped: p }));
    }
}

/// What a driver does after a poll of every node's [`Status`]
/// ([`Watch::next`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    /// A node stopped (a violation, or its limit): stop them all.
    Stop,
    /// The search is over: finish them all.
    Finish,
    /// Held, every node settled and nothing on its way: take the snapshot,
    /// then [`Watch::release`] them.
    Settled,
    /// Go on, giving these orders (node, orders) first.
    Go(Vec<(usize, Orders)>),
}

/// A driver's rule over its polls of the nodes: when the search is over,
/// when a snapshot may be taken, which node gives work to which. The Ray
/// driver (`python/tlbkit/_ray.py`) and [`drive`](super::nodes::drive) both
/// follow it.
///
/// Two polls in a row must agree: every node with no work open (or, for a
/// snapshot, held and settled) in both, the same counts of messages sent and
/// taken in at each node, and as many taken in as sent in all. A node with
/// no work open starts nothing until a message reaches it, and a message is
/// counted as taken in only once its node has taken it in, so then none is
/// on its way and none will be sent.
#[derive(Debug, Default)]
pub struct Watch {
    before: Option<Vec<Status>>,
    /// Whether the nodes were last told that some node's workers wait.
    wanted: bool,
    holding: bool,
}

impl Watch {
    /// The next step after a poll that found the nodes as `now`.
    pub fn next(&mut self, now: Vec<Status>) -> Next {
        if now.iter().any(|s| s.pumped.stopped) {
            return Next::Stop;
        }
        let counts = |v: &[Status]| v.iter().map(|s| (s.sent, s.received)).collect::<Vec<_>>();
        let balanced = now.iter().map(|s| s.sent).sum::<u64>() == now.iter().map(|s| s.received).sum::<u64>();
        if let Some(before) = self.before.as_deref().filter(|b| balanced && counts(b) == counts(&now)) {
            let both = || now.iter().chain(before);
            if both().all(|s| s.pumped.open == 0) {
                return Next::Finish;
            }
            if self.holding && both().all(|s| s.pumped.settled) {
                return Next::Settled;
            }
        }
        let n = now.len();
        let hungry: Vec<usize> = (0..n).filter(|&i| now[i].pumped.hungry > 0 && now[i].pumped.queued == 0).collect();
        let mut donors: Vec<usize> = (0..n).filter(|&i| now[i].pumped.queued > 0).collect();
        donors.sort_by_key(|&i| std::cmp::Reverse(now[i].pumped.queued));
        // While a node waits, every node keeps part of its subtrees queued,
        // so that there is something to give it, donors or not yet.
        let want = !hungry.is_empty() && !self.holding;
        let mut orders = Vec::new();
        if !self.holding {
            for (&h, &d) in hungry.iter().zip(&donors) {
                orders.push((d, Orders { give: now[d].pumped.queued, to: h, wanted: want, hold: false }));
            }
        }
        if want != self.wanted {
            self.wanted = want;
            orders.extend((0..n).map(|i| (i, Orders { wanted: want, hold: self.holding, ..Orders::default() })));
        }
        self.before = Some(now);
        Next::Go(orders)
    }

    /// Holds the `nodes` for a snapshot: the orders to give every node. The
    /// polls after them judge what follows.
    pub fn hold(&mut self, nodes: usize) -> Vec<(usize, Orders)> {
        self.holding = true;
        self.wanted = false;
        self.before = None;
        (0..nodes).map(|i| (i, Orders { hold: true, ..Orders::default() })).collect()
    }

    /// Whether the nodes are held for a snapshot ([`Watch::hold`]) and not
    /// yet released.
    pub fn holding(&self) -> bool {
        self.holding
    }

    /// Lets the `nodes` go on after a snapshot: the orders to give every
    /// node.
    pub fn release(&mut self, nodes: usize) -> Vec<(usize, Orders)> {
        self.holding = false;
        self.before = None;
        (0..nodes).map(|i| (i, Orders { wanted: self.wanted, ..Orders::default() })).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(sent: u64, received: u64, open: u64, queued: usize, hungry: usize) -> Status {
        let pumped = Pumped { open, queued, hungry, ..Pumped::default() };
        Status { sent, received, pumped }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_courier_thread_is_a_batch_thread_and_the_others_are_not() {
        // SAFETY: reads the calling thread's policy.
        let policy = || unsafe { libc::sched_getscheduler(0) };
        let before = policy();
        let courier = std::thread::spawn(move || {
            batch_thread();
            policy()
        });
        assert_eq!(courier.join().unwrap(), libc::SCHED_BATCH);
        assert_eq!(policy(), before, "only the courier's own thread changed");
        assert_ne!(before, libc::SCHED_BATCH);
    }

    #[test]
    fn the_end_takes_two_polls_that_agree_with_nothing_on_its_way() {
        let mut w = Watch::default();
        let idle = || vec![node(5, 3, 0, 0, 0), node(3, 5, 0, 0, 0)];
        assert_eq!(w.next(idle()), Next::Go(vec![]), "one poll is not enough");
        assert_eq!(w.next(idle()), Next::Finish);
        // A message sent and not yet taken in: not over, however often polled.
        let mut w = Watch::default();
        let in_flight = || vec![node(6, 3, 0, 0, 0), node(3, 5, 0, 0, 0)];
        assert_eq!(w.next(in_flight()), Next::Go(vec![]));
        assert_eq!(w.next(in_flight()), Next::Go(vec![]));
        // Counts that moved between the polls: not over yet.
        let mut w = Watch::default();
        assert_eq!(w.next(vec![node(4, 3, 0, 0, 0), node(3, 4, 0, 0, 0)]), Next::Go(vec![]));
        assert_eq!(w.next(idle()), Next::Go(vec![]));
        assert_eq!(w.next(idle()), Next::Finish);
        // Work open at one poll of the two.
        let mut w = Watch::default();
        assert_eq!(w.next(vec![node(5, 3, 1, 0, 0), node(3, 5, 0, 0, 0)]), Next::Go(vec![]));
        assert_eq!(w.next(idle()), Next::Go(vec![]));
        assert_eq!(w.next(idle()), Next::Finish);
        // A node that stopped stops them all at once.
        let mut stopped = idle();
        stopped[1].pumped.stopped = true;
        assert_eq!(Watch::default().next(stopped), Next::Stop);
    }

    #[test]
    fn a_waiting_node_is_given_work_and_a_snapshot_waits_for_every_node_settled() {
        let mut w = Watch::default();
        let now = vec![node(0, 0, 4, 0, 1), node(0, 0, 9, 6, 0), node(0, 0, 2, 2, 0)];
        let Next::Go(orders) = w.next(now.clone()) else { panic!("the search goes on") };
        // The fullest queue gives to the waiting node; everyone hears that one waits.
        assert_eq!(orders[0], (1, Orders { give: 6, to: 0, wanted: true, hold: false }));
        assert_eq!(orders.len(), 4, "{orders:?}");
        assert!(orders[1..].iter().all(|(_, o)| o.wanted && o.give == 0 && !o.hold), "{orders:?}");
        // A waiting node and no queue anywhere: every node is asked to keep
        // some of its work queued, so that a donor appears.
        let mut w2 = Watch::default();
        let Next::Go(orders) = w2.next(vec![node(0, 0, 1, 0, 1), node(0, 0, 3, 0, 0)]) else { panic!("goes on") };
        assert_eq!(orders.len(), 2, "{orders:?}");
        assert!(orders.iter().all(|(_, o)| o.wanted && o.give == 0), "{orders:?}");
        // Held: no work given, and settled at two polls that agree.
        let held = w.hold(3);
        assert!(held.iter().all(|(_, o)| o.hold && !o.wanted), "{held:?}");
        let mut settled = now.clone();
        settled.iter_mut().for_each(|s| s.pumped.settled = true);
        assert_eq!(w.next(settled.clone()), Next::Go(vec![]), "no work given while held");
        assert_eq!(w.next(settled), Next::Settled);
        let go_on = w.release(3);
        assert!(go_on.iter().all(|(_, o)| !o.hold), "{go_on:?}");
    }

    /// The connections of the other nodes are awaited until one deadline:
    /// one that came is taken at once, and the error says how many of how
    /// many came by then.
    #[test]
    fn the_other_nodes_connect_before_one_deadline() {
        let (c, address) = Courier::listen("127.0.0.1").expect("a port");
        let _one = TcpStream::connect(&address).expect("connected");
        let soon = Instant::now() + Duration::from_millis(200);
        c.accept(soon, 0, 2).expect("the node that connected");
        let e = c.accept(soon, 1, 2).expect_err("no second node");
        assert!(e.to_string().contains("1 of the 2 other nodes connected"), "{e}");
        assert!(Instant::now() < soon + Duration::from_secs(1), "waited past the deadline");
    }
}
