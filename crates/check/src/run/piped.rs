//! A sharded check's nodes as processes of their own on this host: each a
//! [`Shard`] and its [`Courier`] in a child process, its messages to the
//! others over loopback TCP, driven by this process through the child's
//! standard input and output (`tlbkit bench sharded --processes`). What a
//! cluster of machines would do, without Ray, on one host: K processes of
//! `--jobs / K` workers each.
//!
//! # The driver's lines
//! One line a command, each answered by one line but `order`:
//!
//! | driver                          | node                                        |
//! | ------------------------------- | ------------------------------------------- |
//! | (the node starts)               | `address HOST:PORT` (its courier's)         |
//! | `peers A0 A1 …` (every node's)  | `started`, once every node has connected    |
//! | `status`                        | `status none`, or `status` and ten numbers  |
//! | `order GIVE TO WANTED HOLD`     | (nothing)                                   |
//! | `finish` or `stop`              | `ended TOTALS BYTES STEPS PEAK`, then exits |
//!
//! The ten numbers of a status are the messages sent and taken in, then
//! [`Pumped`]'s open, queued, hungry, stopped, executions, states, settled
//! and bytes (flags as 0 or 1); `TOTALS` is [`Totals::save`] of the node's
//! totals in hexadecimal; `PEAK` the most memory the node's process held
//! ([`tlbkit_host::memory::peak_bytes`], bytes; `-` where the system does not say). A node that
//! fails says `error` and why, and exits; a driver that goes away (its end
//! of the pipe closed) stops the node.

use super::courier::Status;
use super::nodes::{conclude, drive, Concluded, Ended, Local, Node};
use super::shards::Totals;
use super::Error;
use crate::search::{Orders, Pumped};
use crate::spec::CheckSpec;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

fn bad(why: String) -> Error {
    Error::Saved { why: format!("a sharded check's node process: {why}") }
}

/// Serves as node `me` of `nodes` of the exhaustive check `spec`, with
/// `jobs` workers, reading the driver's lines from `input` and answering on
/// `output` (module documentation) until the driver ends it. An error is
/// also said on `output` (`error` and why) before it is returned.
pub fn serve(
    spec: CheckSpec,
    me: usize,
    nodes: usize,
    jobs: usize,
    input: impl BufRead,
    mut output: impl Write,
) -> Result<(), Error> {
    let served = serve_lines(spec, me, nodes, jobs, input, &mut output);
    if let Err(e) = &served {
        let _ = writeln!(output, "error {}", e.to_string().replace('\n', " "));
        let _ = output.flush();
    }
    served
}

fn serve_lines(
    spec: CheckSpec,
    me: usize,
    nodes: usize,
    jobs: usize,
    input: impl BufRead,
    output: &mut impl Write,
) -> Result<(), Error> {
    let mut say = |line: String| -> Result<(), Error> {
        writeln!(output, "{line}").and_then(|()| output.flush()).map_err(|e| bad(format!("answering: {e}")))
    };
    // Dropped on an error or when the driver goes away: stopped.
    let (mut node, address) = Local::open(&spec, me, nodes, jobs)?;
    say(format!("address {address}"))?;
    for line in input.lines() {
        let line = line.map_err(|e| bad(format!("reading the driver's line: {e}")))?;
        let mut words = line.split_whitespace();
        match words.next() {
            Some("peers") => {
                let peers: Vec<String> = words.map(str::to_string).collect();
                node.connect(me, &peers)?;
                say("started".into())?;
            }
            Some("status") => say(match node.status()? {
                None => "status none".into(),
                Some(s) => status_line(&s),
            })?,
            Some("order") => node.order(orders(words).ok_or_else(|| bad(format!("a malformed order: {line}")))?)?,
            Some(end @ ("finish" | "stop")) => {
                let ended = node.end(end == "finish")?;
                let totals = hex(&Totals::save(&[ended.totals]));
                let peak = tlbkit_host::memory::peak_bytes().map_or("-".to_string(), |b| b.to_string());
                return say(format!("ended {totals} {} {} {peak}", ended.bytes, crate::exec::steps_run()));
            }
            _ => return Err(bad(format!("an unknown line from the driver: {line}"))),
        }
    }
    Err(bad("the driver closed its end before the search ended".into()))
}

fn status_line(s: &Status) -> String {
    let p = &s.pumped;
    let numbers = [
        s.sent,
        s.received,
        p.open,
        p.queued as u64,
        p.hungry as u64,
        u64::from(p.stopped),
        p.executions,
        p.states,
        u64::from(p.settled),
        p.bytes,
    ];
    let words: Vec<String> = numbers.iter().map(u64::to_string).collect();
    format!("status {}", words.join(" "))
}

fn parse_status<'a>(words: impl Iterator<Item = &'a str>) -> Option<Status> {
    let n: Vec<u64> = words.map(str::parse).collect::<Result<_, _>>().ok()?;
    let &[sent, received, open, queued, hungry, stopped, executions, states, settled, bytes] = n.as_slice() else {
        return None;
    };
    let (queued, hungry) = (usize::try_from(queued).ok()?, usize::try_from(hungry).ok()?);
    let (stopped, settled) = (stopped == 1, settled == 1);
    let pumped = Pumped { out: Vec::new(), open, queued, hungry, stopped, executions, states, settled, bytes };
    Some(Status { sent, received, pumped })
}

fn orders<'a>(words: impl Iterator<Item = &'a str>) -> Option<Orders> {
    let n: Vec<usize> = words.map(str::parse).collect::<Result<_, _>>().ok()?;
    let &[give, to, wanted, hold] = n.as_slice() else { return None };
    Some(Orders { give, to, wanted: wanted == 1, hold: hold == 1 })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

/// A node in a child process, as its driver holds it.
pub struct Piped {
    me: usize,
    child: Child,
    to: ChildStdin,
    from: BufReader<ChildStdout>,
    ended: bool,
}

impl Piped {
    /// Starts node `me` by `command` (a process that [`serve`]s), its
    /// standard input and output piped to this one, its errors to this one's.
    pub fn spawn(me: usize, mut command: Command) -> Result<Piped, Error> {
        let spawned = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn();
        let mut child = spawned.map_err(|e| bad(format!("starting node {me}: {e}")))?;
        let (Some(to), Some(from)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            return Err(bad(format!("node {me}'s pipes were not made")));
        };
        Ok(Piped { me, child, to, from: BufReader::new(from), ended: false })
    }

    fn say(&mut self, line: &str) -> Result<(), Error> {
        match writeln!(self.to, "{line}").and_then(|()| self.to.flush()) {
            Ok(()) => Ok(()),
            // Its end of the pipe is closed: the node has exited.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(self.gone()),
            Err(e) => Err(bad(format!("writing to node {}: {e}", self.me))),
        }
    }

    /// The error of a node whose pipe closed: it ended (with its status), or,
    /// still running a while later with its pipes closed, it is killed.
    fn gone(&mut self) -> Error {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(s)) => break s.to_string(),
                Ok(None) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(5))
                }
                Ok(None) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break "its pipes closed while it ran; killed".to_string();
                }
                Err(e) => break e.to_string(),
            }
        };
        bad(format!("node {} ended before the search did ({status})", self.me))
    }

    /// The node's next line; its error, or its end, as an error.
    fn hear(&mut self) -> Result<String, Error> {
        let mut line = String::new();
        let read = self.from.read_line(&mut line).map_err(|e| bad(format!("reading node {}: {e}", self.me)))?;
        if read == 0 {
            return Err(self.gone());
        }
        let line = line.trim_end().to_string();
        match line.strip_prefix("error ") {
            Some(why) => Err(bad(format!("node {}: {why}", self.me))),
            None => Ok(line),
        }
    }

    /// The node's line that begins with `word`, without it.
    fn answer(&mut self, word: &str) -> Result<String, Error> {
        let line = self.hear()?;
        match line.strip_prefix(word) {
            Some(rest) if rest.is_empty() || rest.starts_with(' ') => Ok(rest.trim_start().to_string()),
            _ => Err(bad(format!("node {} said {line:?} where {word:?} was due", self.me))),
        }
    }
}

impl Node for Piped {
    fn status(&mut self) -> Result<Option<Status>, Error> {
        self.say("status")?;
        let rest = self.answer("status")?;
        if rest == "none" {
            return Ok(None);
        }
        parse_status(rest.split_whitespace()).map(Some).ok_or_else(|| bad(format!("a malformed status: {rest}")))
    }

    fn order(&mut self, o: Orders) -> Result<(), Error> {
        self.say(&format!("order {} {} {} {}", o.give, o.to, u8::from(o.wanted), u8::from(o.hold)))
    }

    fn end(&mut self, finish: bool) -> Result<Ended, Error> {
        if std::mem::replace(&mut self.ended, true) {
            return Err(bad(format!("node {} was ended already", self.me)));
        }
        let ended = self.say(if finish { "finish" } else { "stop" }).and_then(|()| self.answer("ended"));
        let ended = ended.and_then(|rest| {
            let mut words = rest.split_whitespace();
            let totals = words.next().and_then(unhex).and_then(|b| Totals::load(&b).ok());
            let (bytes, steps) = (words.next().and_then(|w| w.parse().ok()), words.next().and_then(|w| w.parse().ok()));
            let peak = match words.next() {
                Some("-") => Some(None),
                w => w.and_then(|w| w.parse().ok()).map(Some),
            };
            match (totals.as_deref(), bytes, steps, peak) {
                (Some([totals]), Some(bytes), Some(steps), Some(peak)) => {
                    Ok(Ended { totals: totals.clone(), bytes, steps, peak })
                }
                _ => Err(bad(format!("node {}'s malformed end: {rest}", self.me))),
            }
        });
        // Waited for, so that its port and memory are free for what follows.
        let _ = self.child.wait();
        ended
    }
}

impl Drop for Piped {
    fn drop(&mut self) {
        if !self.ended {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Runs the exhaustive check `spec` on `nodes` processes of `jobs` workers
/// each, `command(me)` starting node `me` (a process that [`serve`]s node
/// `me` of `nodes` of `spec` with `jobs` workers), driven by this process
/// polling every `poll`; returns the report, the bytes the nodes wrote to
/// each other, the steps their workers ran and each process's peak memory.
pub fn run_processes(
    spec: &CheckSpec,
    nodes: usize,
    poll: Duration,
    command: impl Fn(usize) -> Command,
) -> Result<Concluded, Error> {
    let mut all = Vec::with_capacity(nodes);
    for me in 0..nodes {
        all.push(Piped::spawn(me, command(me))?);
    }
    let peers = all.iter_mut().map(|n| n.answer("address")).collect::<Result<Vec<_>, _>>()?;
    let line = format!("peers {}", peers.join(" "));
    // Every node's start waits for the others' connections: all told first.
    all.iter_mut().try_for_each(|n| n.say(&line))?;
    all.iter_mut().try_for_each(|n| n.answer("started").map(drop))?;
    conclude(spec, drive(&mut all, poll)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_an_order_and_totals_read_back_as_written() {
        let pumped = Pumped {
            open: 3,
            queued: 2,
            hungry: 1,
            stopped: true,
            executions: 9,
            states: 8,
            bytes: 7,
            ..Pumped::default()
        };
        let s = Status { sent: 5, received: 4, pumped };
        let line = status_line(&s);
        assert_eq!(parse_status(line.split_whitespace().skip(1)), Some(s));
        assert_eq!(parse_status("1 2 3".split_whitespace()), None, "too few numbers");
        assert_eq!(parse_status("1 2 3 4 5 6 7 8 9 x".split_whitespace()), None, "not a number");
        let o = orders("4 1 1 0".split_whitespace()).unwrap();
        assert_eq!((o.give, o.to, o.wanted, o.hold), (4, 1, true, false));
        assert!(orders("4 1 1".split_whitespace()).is_none());
        let bytes = Totals::save(&[Totals { workers: 2, found: Some("t5~x".into()), ..Totals::default() }]);
        assert_eq!(unhex(&hex(&bytes)).as_deref(), Some(bytes.as_slice()));
        assert_eq!(unhex("abc"), None, "odd length");
        assert_eq!(unhex("zz"), None, "not hexadecimal");
    }

    #[test]
    fn a_driver_that_goes_away_or_speaks_nonsense_is_an_error_said_on_the_output() {
        let spec = crate::spec::CheckSpec { cpus: 1, mms: 1, ops: 1, ..crate::spec::default_spec("arm64-noasid") };
        let spec = CheckSpec { mode: crate::spec::Mode::Exhaustive, iterations: u64::MAX, ..spec };
        let mut out = Vec::new();
        let e = serve(spec.clone(), 0, 1, 1, &b""[..], &mut out).unwrap_err();
        let said = String::from_utf8(out).unwrap();
        assert!(said.starts_with("address 127.0.0.1:"), "{said}");
        assert!(said.contains("\nerror ") && e.to_string().contains("closed its end"), "{said} / {e}");
        let mut out = Vec::new();
        serve(spec, 0, 1, 1, &b"hello\n"[..], &mut out).unwrap_err();
        assert!(String::from_utf8(out).unwrap().contains("error a sharded check's node process: an unknown line"));
    }
}
