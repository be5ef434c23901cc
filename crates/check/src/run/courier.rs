//! A sharded check's messages carried straight between its nodes over TCP.
//!
//! Each node ([`Shard`]) has a [`Courier`]: it listens on a port of its
//! own ([`Courier::listen`]), and once told every node's address
//! ([`Courier::start`]) it connects to each of the others and runs one
//! thread that pumps its node ([`Shard::pump`]) and writes what the node
//! has for node `i` to the connection to `i`, and one thread per incoming
//! connection that reads the others' messages into its inbox. No message
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
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
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
    /// Signalled when a message or an order arrives.
    arrived: Condvar,
    /// The last pump's status, or the error that ended the carrying.
    status: Mutex<Option<Result<Status, String>>>,
    ending: AtomicBool,
}

#[derive(Default)]
struct Mail {
    inbox: Vec<Vec<u8>>,
    orders: Orders,
    /// Something arrived since the carrying thread last looked.
    news: bool,
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
    /// courier and the address to give the other nodes (`host:port`).
    pub fn listen(host: &str) -> Result<(Courier, String), Error> {
        let listener = TcpListener::bind((host, 0)).map_err(|e| net(&format!("listening on {host}"), &e))?;
        let port = listener.local_addr().map_err(|e| net("reading the port", &e))?.port();
        let courier = Courier { listener, post: Arc::default(), threads: Mutex::default(), streams: Mutex::default() };
        Ok((courier, format!("{host}:{port}")))
    }

    /// Connects to every other node (`peers[i]`: node `i`'s address, this
    /// node's own at `me`), accepts their `peers.len() - 1` connections and
    /// starts carrying `shard`'s messages: a pump after each arrival, and
    /// at most `pause` apart when nothing arrives.
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
        for _ in 1..peers.len() {
            let stream = self.accept(peers.len() - 1)?;
            self.keep(&stream)?;
            let post = self.post.clone();
            threads.push(std::thread::spawn(move || read_from(stream, &post)));
        }
        let post = self.post.clone();
        threads.push(std::thread::spawn(move || carry(&shard, &post, out, pause)));
        Ok(())
    }

    /// The next node's connection, within [`CONNECT_WITHIN`] (of `n` in all).
    fn accept(&self, n: usize) -> Result<TcpStream, Error> {
        let deadline = Instant::now() + CONNECT_WITHIN;
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
                    let why = format!("fewer than the {n} other nodes connected within {CONNECT_WITHIN:?}");
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
        mail.news = true;
        self.post.arrived.notify_one();
    }

    /// The last pump's status (None before the first); an error if the
    /// node refused a message or its pump failed.
    pub fn status(&self) -> Result<Option<Status>, Error> {
        let status = self.post.status.lock().expect("no thread panicked holding it").clone();
        status.transpose().map_err(|why| Error::Saved { why })
    }

    /// Stops carrying and closes the connections (the node's own end is
    /// the caller's: [`Shard::finish`] or [`Shard::stop`]).
    pub fn close(&self) {
        self.post.ending.store(true, SeqCst);
        {
            let _mail = self.post.mail.lock().expect("no thread panicked holding it");
            self.post.arrived.notify_all();
        }
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
        let mut mail = post.mail.lock().expect("no thread panicked holding it");
        mail.inbox.push(m);
        mail.news = true;
        post.arrived.notify_one();
    }
}

fn fail(post: &Post, why: String) {
    *post.status.lock().expect("no thread panicked holding it") = Some(Err(why));
    post.ending.store(true, SeqCst);
}

/// Pumps `shard` until the courier closes: takes in what arrived, writes
/// out what it has for each node (`out[i]`, none for itself).
fn carry(shard: &Shard, post: &Post, mut out: Vec<Option<BufWriter<TcpStream>>>, pause: Duration) {
    let (mut sent, mut received) = (0u64, 0u64);
    while !post.ending.load(SeqCst) {
        let (inbox, orders) = {
            let mut mail = post.mail.lock().expect("no thread panicked holding it");
            if !mail.news {
                mail = post.arrived.wait_timeout(mail, pause).expect("no thread panicked holding it").0;
            }
            mail.news = false;
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
                Ok(()) => sent += 1,
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
