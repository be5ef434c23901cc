//! The DVM queues of the interconnect and the time running CPUs lose to
//! incoming DVM messages, charged lazily.
//!
//! The model ([`crate::machine`]): each socket processes the messages that
//! reach it one at a time, so a message starts being processed at a socket once
//! it has arrived (one hop, more from another socket) and the socket's queue is
//! free. A CPU that is running something when a message starts being processed
//! at it (the start is before the CPU's `busy_until`) loses the processing time
//! (`stolen`); the issuer does not, since it waits in its `DSB`. Charging every
//! receiver at every message would cost the host time proportional to the CPUs
//! per message. Instead the messages are logged, and a CPU is charged when its
//! charge is needed: before its `stolen` is taken and before its `busy_until`
//! changes ([`Stalls::settle`]).
//!
//! # One log for every socket
//! Every socket receives every message, so the processing times (and their
//! running sum) are the same for all; only the start differs, and most sockets'
//! starts are alike: a socket that did not issue the message, whose queue is as
//! free as the others', starts it when they do. So the log holds, per message,
//! the *common* start (what a socket that has only ever received from other
//! sockets would start it at) and the processing time before it; each socket
//! keeps only the messages it starts at another time (its own, which arrive
//! sooner, and any it queues differently), its *deviations*. Likewise the
//! queues: a socket *in step* is free when the common start's queue is, and
//! only the sockets out of step (those with a deviation at their last message)
//! keep a time of their own. A message costs the host one log entry and a pass
//! over the sockets out of step, instead of one entry in each socket's log and a
//! pass over every socket.
//!
//! # Why the result is the same
//! A CPU's `busy_until` does not change between two settlements, and the
//! messages of one socket start in non-decreasing order (each starts no earlier
//! than the previous one ends), so the messages an eager charge would have
//! charged since the last settlement are a prefix of those logged since then:
//! those that start, at its socket, before `busy_until`. A socket's start of a
//! message is its deviation if it has one and the common start otherwise, so a
//! binary search finds the prefix. The issuer's own message is charged back when
//! it would have been counted. Debug builds also charge eagerly and check that
//! both agree at every settlement. [`Stalls::total`] adds what every CPU still
//! owes to what was settled, so no result depends on when settlements happen.
//!
//! # Memory
//! A settlement is valid at any time, not only when it is needed, since it only
//! adds what is due so far. So when the log reaches its trim length, every CPU
//! is settled and the log emptied: the log never holds more, and the host work
//! per message stays constant (the trim length is at least [`TRIM_AT`] and at
//! least twice the CPUs, so at most one binary search per two messages).

use crate::cpu::CpuState;

/// Messages logged since the last trim, for every socket at once.
#[derive(Default)]
struct Log {
    /// Index (counted since the machine started) of the first entry kept.
    base: usize,
    /// Per message: the common start (non-decreasing) and the processing time
    /// of all messages before it.
    entries: Vec<(u64, u64)>,
    /// Processing time of all messages.
    total: u64,
}

impl Log {
    /// Returns the index the next message will get.
    fn end(&self) -> usize {
        self.base + self.entries.len()
    }

    /// Returns the processing time of all messages before the one at `i` (an
    /// index into the entries; at their end, of all messages).
    fn before(&self, i: usize) -> u64 {
        self.entries.get(i).map_or(self.total, |&(_, b)| b)
    }
}

/// The DVM queues, the log of messages and what each CPU has been charged for.
pub struct Stalls {
    cores_per_socket: usize,
    sockets: usize,
    /// Per socket out of step: when its CPUs finish processing their incoming
    /// messages (the same for every CPU of a socket: each message reaches them
    /// together); `None` for a socket in step, whose queue is free at
    /// `common_busy`.
    busy: Vec<Option<u64>>,
    /// The sockets out of step, in no order.
    out_of_step: Vec<u32>,
    /// When a socket that has only received from other sockets would finish:
    /// when every socket in step finishes.
    common_busy: u64,
    log: Log,
    /// Per socket: the messages of the log it starts at another time than the
    /// common start, as (index into the log's entries, start), by index.
    deviations: Vec<Vec<(u32, u64)>>,
    /// Per CPU: the index of the first message not yet charged.
    seen: Vec<usize>,
    /// Per CPU: processing time of its own messages within the charge to come.
    own: Vec<u64>,
    /// Per CPU, in debug builds: the charge to come, counted eagerly.
    #[cfg(debug_assertions)]
    eager: Vec<u64>,
    /// Cycles charged to running receivers at their settlements so far, all
    /// CPUs together (what is still owed is not in it: [`Stalls::total`]).
    charged: u64,
    /// Entries after which the log is settled and emptied.
    trim_at: usize,
}

/// The least length at which the log is settled and emptied: a matter of the
/// host's time and memory only. No result depends on it, since
/// [`Stalls::total`] counts what each CPU still owes as well as what was
/// settled (the test `the_total_is_the_eager_total_whatever_the_trim` checks it
/// at several lengths).
pub const TRIM_AT: usize = 4096;

impl Stalls {
    /// Returns empty queues and logs for `ncpus` CPUs, `cores_per_socket` to a socket.
    pub fn new(ncpus: usize, cores_per_socket: usize) -> Self {
        let cps = cores_per_socket.max(1);
        let sockets = ncpus.div_ceil(cps).max(1);
        Stalls {
            cores_per_socket: cps,
            sockets,
            busy: vec![None; sockets],
            out_of_step: Vec::new(),
            common_busy: 0,
            log: Log::default(),
            deviations: vec![Vec::new(); sockets],
            seen: vec![0; ncpus],
            own: vec![0; ncpus],
            #[cfg(debug_assertions)]
            eager: vec![0; ncpus],
            charged: 0,
            trim_at: TRIM_AT.max(2 * ncpus),
        }
    }

    /// Returns the logs with `trim_at` in place of the trim length (for tests).
    #[cfg(test)]
    fn with_trim_at(mut self, trim_at: usize) -> Self {
        self.trim_at = trim_at.max(1);
        self
    }

    /// Sends a message from CPU `from`, issued at `t`, that every socket takes
    /// `process` cycles to process; it reaches a socket `hop` cycles after it is
    /// issued, `hop + cross` for another socket than the issuer's, and is
    /// acknowledged in as long again. Returns when the last acknowledgement is
    /// back. `cpus` are the machine's CPUs (all are settled when the log is
    /// trimmed).
    pub fn broadcast(&mut self, from: usize, t: u64, process: u64, hop: u64, cross: u64, cpus: &mut [CpuState]) -> u64 {
        let f = from / self.cores_per_socket;
        let index = self.log.entries.len() as u32;
        // With one socket, every message is the issuer socket's own, so that
        // start is the common one and nothing deviates.
        let far = if self.sockets > 1 { hop + cross } else { hop };
        let common = (t + far).max(self.common_busy);
        // When a socket starts the message: once it has arrived and the
        // socket's queue is free.
        let start_at = |st: &Self, socket: usize| (t + if socket == f { hop } else { far }).max(st.busy_of(socket));
        let f_start = start_at(self, f);
        #[cfg(debug_assertions)]
        {
            let starts: Vec<u64> = (0..self.sockets).map(|s| start_at(self, s)).collect();
            self.charge_eagerly(from, &starts, process, cpus);
        }
        // An eager charge leaves the issuer out.
        if cpus[from].busy_until > f_start {
            self.own[from] += process;
        }
        let mut done_all = t.max(f_start + process + hop);
        // Every socket in step but the issuer's starts at the common start.
        let f_in_step = self.busy[f].is_none();
        if self.sockets - self.out_of_step.len() - usize::from(f_in_step) > 0 {
            done_all = done_all.max(common + process + far);
        }
        // The sockets out of step, and the issuer's: one that starts the message
        // at the common start is in step after it, one that does not deviates.
        if f_in_step {
            self.out_of_step.push(f as u32);
        }
        let mut i = 0;
        while i < self.out_of_step.len() {
            let socket = self.out_of_step[i] as usize;
            let start = if socket == f { f_start } else { start_at(self, socket) };
            if socket != f {
                done_all = done_all.max(start + process + far);
            }
            if start == common {
                self.busy[socket] = None;
                self.out_of_step.swap_remove(i);
            } else {
                self.deviations[socket].push((index, start));
                self.busy[socket] = Some(start + process);
                i += 1;
            }
        }
        self.common_busy = common + process;
        self.log.entries.push((common, self.log.total));
        self.log.total += process;
        if self.log.entries.len() >= self.trim_at {
            self.trim(cpus);
        }
        done_all
    }

    /// Returns when the sockets in step finished processing the last message,
    /// and puts into `out` each socket out of step with when it did (what
    /// [`crate::pending`] takes as the times the message reached them).
    pub fn last_processed(&self, out: &mut Vec<(u32, u64)>) -> u64 {
        out.clear();
        out.extend(self.out_of_step.iter().map(|&s| (s, self.busy_of(s as usize))));
        self.common_busy
    }

    /// Returns when `socket`'s queue is next free.
    #[inline]
    fn busy_of(&self, socket: usize) -> u64 {
        self.busy[socket].unwrap_or(self.common_busy)
    }

    /// In debug builds: charges every CPU but `from` that is running when the
    /// message starts at its socket (`starts`, per socket), as an eager model would.
    #[cfg(debug_assertions)]
    fn charge_eagerly(&mut self, from: usize, starts: &[u64], process: u64, cpus: &[CpuState]) {
        let cps = self.cores_per_socket;
        for (socket, &at) in starts.iter().enumerate() {
            for (cpu, st) in cpus.iter().enumerate().skip(socket * cps).take(cps) {
                if cpu != from && st.busy_until > at {
                    self.eager[cpu] += process;
                }
            }
        }
    }

    /// Returns when `socket` starts the message at `i` (an index into the log's
    /// entries).
    #[inline]
    fn start(&self, socket: usize, i: usize) -> u64 {
        let dev = &self.deviations[socket];
        match dev.binary_search_by_key(&(i as u32), |&(j, _)| j) {
            Ok(k) => dev[k].1,
            Err(_) => self.log.entries[i].0,
        }
    }

    /// Returns whether nothing was logged since `cpu` was last settled (nor of
    /// its own): it owes nothing.
    #[inline]
    fn settled(&self, cpu: usize) -> bool {
        let nothing = self.seen[cpu] == self.log.end();
        debug_assert!(!nothing || self.own[cpu] == 0, "cpu{cpu}: a charge of its own with nothing logged");
        nothing
    }

    /// Returns what `cpu` (its state `st`) would be charged if it were settled now.
    fn owed(&self, cpu: usize, st: &CpuState) -> u64 {
        let socket = cpu / self.cores_per_socket;
        if self.settled(cpu) {
            return 0;
        }
        let from = self.seen[cpu] - self.log.base;
        let lo = self.first_not_before(socket, from, st.busy_until);
        self.log.before(lo) - self.log.before(from) - self.own[cpu]
    }

    /// Returns the first message from `from` on (an index into the log's
    /// entries; their end if none) that starts at or after `busy_until` at
    /// `socket`, whose starts are non-decreasing.
    ///
    /// Where the answer usually is: near `from`. When broadcasts are frequent
    /// the sockets' queues back up, so most messages logged since a CPU was
    /// last settled start after its operation ends: at 4096 CPUs, 61% of the
    /// settlements of `mprotect_threaded` and 88% of `fileserver`'s find the
    /// answer within 4 messages of `from`, of the thousands logged meanwhile
    /// (under 1% within 4 of the end). So the search gallops forward from
    /// `from` (1, 2, 4, ... messages on), then halves what is left: a few
    /// probes where a binary search over all of them took a dozen.
    #[inline]
    fn first_not_before(&self, socket: usize, from: usize, busy_until: u64) -> usize {
        let n = self.log.entries.len();
        let before = |i: usize| self.start(socket, i) < busy_until;
        // `before(lo)` (once past `from`) and, unless `hi == n`, `!before(hi)`;
        // `hi == lo == from` where `from` itself is the answer.
        let (mut lo, mut hi, mut step) = (from, from, 1);
        while hi < n && before(hi) {
            lo = hi;
            hi = (hi + step).min(n);
            step *= 2;
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if before(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        hi
    }

    /// Returns the cycles that running receivers have lost so far, all CPUs
    /// together: what an eager charge at every message would have counted by
    /// now. That is what was charged at settlements plus, for each CPU, what it
    /// would be charged if it were settled now (`cpus`, the machine's CPUs, are
    /// read, not settled, so nothing a later settlement does changes).
    pub fn total(&self, cpus: &[CpuState]) -> u64 {
        self.charged + cpus.iter().enumerate().map(|(cpu, st)| self.owed(cpu, st)).sum::<u64>()
    }

    /// Charges `cpu` (its state `st`) for the messages it received since it was
    /// last charged. Call it before `st.stolen` is read and before
    /// `st.busy_until` changes.
    #[inline]
    pub fn settle(&mut self, cpu: usize, st: &mut CpuState) {
        // A charge of 0 that changes nothing, as `owed` would find.
        if self.settled(cpu) {
            #[cfg(debug_assertions)]
            debug_assert_eq!(self.eager[cpu], 0, "cpu{cpu}: lazy and eager DVM charges differ");
            return;
        }
        self.settle_logged(cpu, st);
    }

    /// [`Stalls::settle`] of a CPU with messages logged since it was last settled.
    #[inline(never)]
    fn settle_logged(&mut self, cpu: usize, st: &mut CpuState) {
        let charge = self.owed(cpu, st);
        self.own[cpu] = 0;
        #[cfg(debug_assertions)]
        debug_assert_eq!(charge, std::mem::take(&mut self.eager[cpu]), "cpu{cpu}: lazy and eager DVM charges differ");
        st.stolen += charge;
        self.charged += charge;
        self.seen[cpu] = self.log.end();
    }

    /// Settles every CPU and empties the log.
    fn trim(&mut self, cpus: &mut [CpuState]) {
        for (cpu, st) in cpus.iter_mut().enumerate() {
            self.settle(cpu, st);
        }
        self.log.base = self.log.end();
        self.log.entries.clear();
        for d in &mut self.deviations {
            d.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpus(n: usize) -> Vec<CpuState> {
        (0..n).map(CpuState::new).collect()
    }

    #[test]
    fn the_galloping_search_finds_what_a_scan_finds() {
        let mut s = Stalls::new(4, 2);
        // Non-decreasing common starts with runs of equal ones, and socket 1
        // deviating (earlier, still non-decreasing) at some messages.
        let (mut t, mut last) = (0, 0);
        for i in 0..300u32 {
            t += [0, 1, 7, 0, 3][i as usize % 5];
            s.log.entries.push((t, 0));
            let start = if i % 11 == 0 { t.saturating_sub(2).max(last) } else { t };
            if start != t {
                s.deviations[1].push((i, start));
            }
            last = start;
        }
        let n = s.log.entries.len();
        for socket in [0, 1] {
            for from in [0, 1, 2, 37, 150, n - 2, n - 1, n] {
                for busy in (0..=t + 2).step_by(3).chain([0, 1, t, t + 1]) {
                    let scan = (from..n).find(|&i| s.start(socket, i) >= busy).unwrap_or(n);
                    assert_eq!(
                        s.first_not_before(socket, from, busy),
                        scan,
                        "socket {socket}, from {from}, busy {busy}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_cpu_is_charged_the_messages_that_started_while_it_ran_but_not_its_own() {
        let mut c = cpus(2);
        let mut s = Stalls::new(2, 2);
        c[0].busy_until = 100;
        c[1].busy_until = 100;
        s.broadcast(0, 10, 3, 0, 0, &mut c);
        s.broadcast(1, 50, 5, 0, 0, &mut c);
        s.broadcast(0, 100, 7, 0, 0, &mut c);
        s.settle(0, &mut c[0]);
        s.settle(1, &mut c[1]);
        assert_eq!((c[0].stolen, c[1].stolen), (5, 3), "each is left out of its own messages");
        // Nothing is charged twice; later messages count against the new busy_until.
        c[0].busy_until = 300;
        s.broadcast(1, 200, 11, 0, 0, &mut c);
        s.settle(0, &mut c[0]);
        assert_eq!(c[0].stolen, 16);
    }

    #[test]
    fn a_message_waits_for_each_socket_queue_and_crosses_sockets_both_ways() {
        let mut c = cpus(4);
        let mut s = Stalls::new(4, 2);
        // From socket 0 at 100: its own socket starts at 101, the other at 103;
        // the far acknowledgement is back at 103 + 10 + 3.
        assert_eq!(s.broadcast(0, 100, 10, 1, 2, &mut c), 116);
        // Socket 1 is busy until 113: a message it issues at 105 waits there
        // (done at 123, acknowledged at 124); socket 0 starts it at 111 and
        // is done at 121, acknowledged at 124 too.
        assert_eq!(s.broadcast(2, 105, 10, 1, 2, &mut c), 124);
        assert_eq!((s.busy_of(0), s.busy_of(1)), (121, 123));
    }

    #[test]
    fn the_total_is_the_eager_total_whatever_the_trim() {
        // Six CPUs on three sockets. Messages come faster than they are processed
        // at times, so the sockets' queues fall out of step and deviate from the
        // common start; busy periods interleave with them, so that some CPUs are
        // owed charges whenever the total is read. The test's own queues are
        // the plain model: one time per socket.
        let (hop, cross) = (1, 2);
        let run = |trim_at: usize| {
            let mut c = cpus(6);
            let mut s = Stalls::new(6, 2).with_trim_at(trim_at);
            let (mut eager, mut busy, mut done_all) = (0u64, [0u64; 3], 0);
            let mut out = Vec::new();
            let mut deviated = 0;
            for t in 0..400u64 {
                let cpu = (t % 6) as usize;
                s.settle(cpu, &mut c[cpu]);
                c[cpu].busy_until = t * 4 + (t * 7) % 45;
                let (from, process, issued) = (((t * t) % 6) as usize, 1 + t % 6, t * 4);
                for (socket, b) in busy.iter_mut().enumerate() {
                    let h = if socket == from / 2 { hop } else { hop + cross };
                    let start = (issued + h).max(*b);
                    *b = start + process;
                    done_all = done_all.max(start + process + h);
                    eager += (socket * 2..socket * 2 + 2)
                        .filter(|&r| r != from && c[r].busy_until > start)
                        .map(|_| process)
                        .sum::<u64>();
                }
                let done = s.broadcast(from, issued, process, hop, cross, &mut c);
                assert_eq!(done, done_all.max(issued), "message {t}: the last acknowledgement");
                done_all = 0;
                assert_eq!((0..3).map(|k| s.busy_of(k)).collect::<Vec<_>>(), busy, "message {t}: the queues");
                assert_eq!(s.total(&c), eager, "trim at {trim_at}, message {t}: the total is the eager count");
                deviated += s.out_of_step.len();
                out.push((done, s.total(&c)));
            }
            assert!(deviated > 100, "the sockets fell out of step {deviated} times: too few to test");
            out
        };
        let reference = run(usize::MAX);
        for trim_at in [1, 2, 3, 7, 64] {
            assert_eq!(run(trim_at), reference, "trim at {trim_at} moved a total or a completion");
        }
    }

    #[test]
    fn a_full_log_is_settled_and_emptied_without_changing_any_charge() {
        let mut c = cpus(2);
        let mut s = Stalls::new(2, 2);
        c[0].busy_until = u64::MAX;
        let n = 3 * s.trim_at as u64 + 5;
        for t in 0..n {
            s.broadcast(1, t, 1, 0, 0, &mut c);
        }
        assert_eq!(s.log.entries.len(), 5, "emptied at every trim length");
        s.settle(0, &mut c[0]);
        s.settle(1, &mut c[1]);
        assert_eq!(c[0].stolen, n, "cpu0 ran throughout: every message counts, trimmed or not");
        assert_eq!(c[1].stolen, 0, "cpu1 was idle throughout");
    }
}
