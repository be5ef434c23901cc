//! The time running CPUs lose to incoming DVM messages, charged lazily.
//!
//! The model ([`crate::machine`]): a CPU that is running something when a
//! broadcast TLBI message starts being processed at it (the message's start is
//! before the CPU's `busy_until`) loses the processing time (`stolen`); the
//! issuer does not, since it waits in its `DSB`. Charging every receiver at
//! every message would cost the host time proportional to the CPUs per message.
//! Instead each socket keeps a log of its messages (start, processing time), and
//! a CPU is charged when its charge is needed: before its `stolen` is taken and
//! before its `busy_until` changes ([`Stalls::settle`]).
//!
//! # Why the result is the same
//! A CPU's `busy_until` does not change between two settlements, and the
//! messages of one socket start in non-decreasing order (each starts no earlier
//! than the previous one ends), so the messages an eager charge would have
//! charged since the last settlement are a prefix of those logged since then:
//! those that start before `busy_until`. The issuer's own message is charged
//! back when it would have been counted. Debug builds also charge eagerly and
//! check that both agree at every settlement.
//!
//! # Memory
//! A settlement is valid at any time, not only when it is needed, since it only
//! adds what is due so far. So when a socket's log reaches [`TRIM_AT`] entries,
//! every CPU of the socket is settled and the log emptied: a log never holds
//! more, and the host work per message stays constant (a binary search per CPU
//! per [`TRIM_AT`] messages).

use crate::machine::CpuState;
use std::collections::VecDeque;

/// The DVM messages of one socket not yet charged to all its CPUs.
#[derive(Default)]
struct SocketLog {
    /// Index (counted since the machine started) of the first entry kept.
    base: usize,
    /// Per message: when it started being processed at the socket
    /// (non-decreasing), and the processing time of all messages before it.
    entries: VecDeque<(u64, u64)>,
    /// Processing time of all messages.
    total: u64,
}

impl SocketLog {
    /// Returns the index the next message will get.
    fn end(&self) -> usize {
        self.base + self.entries.len()
    }

    /// Returns the processing time of the messages from index `from` on that
    /// started before `until`.
    fn charge(&self, from: usize, until: u64) -> u64 {
        let i = from - self.base;
        let k = i.max(self.entries.partition_point(|&(s, _)| s < until));
        let before = |k: usize| self.entries.get(k).map_or(self.total, |&(_, b)| b);
        before(k) - before(i)
    }
}

/// Every socket's log and what each CPU has been charged for.
pub struct Stalls {
    cores_per_socket: usize,
    logs: Vec<SocketLog>,
    /// Per CPU: the index of the first message of its socket not yet charged.
    seen: Vec<usize>,
    /// Per CPU: processing time of its own messages within the charge to come.
    own: Vec<u64>,
    /// Per CPU, in debug builds: the charge to come, counted eagerly.
    #[cfg(debug_assertions)]
    eager: Vec<u64>,
    /// Cycles charged to running receivers at their settlements so far, all
    /// CPUs together (what is still owed is not in it: [`Stalls::total`]).
    charged: u64,
    /// Entries after which a log is settled and emptied ([`TRIM_AT`]).
    trim_at: usize,
}

/// Entries after which a log is settled and emptied: a matter of the host's
/// time and memory only. No result depends on it, since [`Stalls::total`]
/// counts what each CPU still owes as well as what was settled (the test
/// `the_total_is_the_eager_total_whatever_the_trim` checks it at several values).
pub const TRIM_AT: usize = 512;

impl Stalls {
    /// Returns empty logs for `ncpus` CPUs, `cores_per_socket` to a socket.
    pub fn new(ncpus: usize, cores_per_socket: usize) -> Self {
        let cps = cores_per_socket.max(1);
        Stalls {
            cores_per_socket: cps,
            logs: (0..ncpus.div_ceil(cps)).map(|_| SocketLog::default()).collect(),
            seen: vec![0; ncpus],
            own: vec![0; ncpus],
            #[cfg(debug_assertions)]
            eager: vec![0; ncpus],
            charged: 0,
            trim_at: TRIM_AT,
        }
    }

    /// Returns the logs with `trim_at` in place of [`TRIM_AT`] (for tests).
    #[cfg(test)]
    fn with_trim_at(mut self, trim_at: usize) -> Self {
        self.trim_at = trim_at.max(1);
        self
    }

    /// Returns the cycles that running receivers have lost so far, all CPUs
    /// together: what an eager charge at every message would have counted by
    /// now. That is what was charged at settlements plus, for each CPU, what it
    /// would be charged if it were settled now (`cpus`, the machine's CPUs, are
    /// read, not settled, so nothing a later settlement does changes).
    pub fn total(&self, cpus: &[CpuState]) -> u64 {
        let owed: u64 = cpus
            .iter()
            .enumerate()
            .map(|(cpu, st)| {
                let log = &self.logs[cpu / self.cores_per_socket];
                log.charge(self.seen[cpu], st.busy_until) - self.own[cpu]
            })
            .sum();
        self.charged + owed
    }

    /// Records a message from CPU `from` that starts being processed at `socket`
    /// at `start`, taking `process` cycles; `cpus` are the machine's CPUs (a
    /// socket's are settled when its log is trimmed).
    pub fn received(&mut self, socket: usize, from: usize, start: u64, process: u64, cpus: &mut [CpuState]) {
        let cps = self.cores_per_socket;
        // An eager charge leaves the issuer out.
        if from / cps == socket && cpus[from].busy_until > start {
            self.own[from] += process;
        }
        #[cfg(debug_assertions)]
        for (cpu, st) in cpus.iter().enumerate().skip(socket * cps).take(cps) {
            if cpu != from && st.busy_until > start {
                self.eager[cpu] += process;
            }
        }
        let log = &mut self.logs[socket];
        debug_assert!(log.entries.back().is_none_or(|&(s, _)| s <= start), "DVM starts out of order");
        log.entries.push_back((start, log.total));
        log.total += process;
        if log.entries.len() >= self.trim_at {
            self.trim(socket, cpus);
        }
    }

    /// Charges `cpu` (its state `st`) for the messages it received since it was
    /// last charged. Call it before `st.stolen` is read and before
    /// `st.busy_until` changes.
    pub fn settle(&mut self, cpu: usize, st: &mut CpuState) {
        let log = &self.logs[cpu / self.cores_per_socket];
        let charge = log.charge(self.seen[cpu], st.busy_until) - std::mem::take(&mut self.own[cpu]);
        #[cfg(debug_assertions)]
        debug_assert_eq!(charge, std::mem::take(&mut self.eager[cpu]), "cpu{cpu}: lazy and eager DVM charges differ");
        st.stolen += charge;
        self.charged += charge;
        self.seen[cpu] = log.end();
    }

    /// Settles every CPU of `socket` and empties its log.
    fn trim(&mut self, socket: usize, cpus: &mut [CpuState]) {
        let cps = self.cores_per_socket;
        for (cpu, st) in cpus.iter_mut().enumerate().skip(socket * cps).take(cps) {
            self.settle(cpu, st);
        }
        let log = &mut self.logs[socket];
        log.base = log.end();
        log.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tlb::Tlb;

    fn cpus(n: usize) -> Vec<CpuState> {
        (0..n).map(|_| CpuState::new(Tlb::new(1, 1, 1, 0))).collect()
    }

    #[test]
    fn a_cpu_is_charged_the_messages_that_started_while_it_ran_but_not_its_own() {
        let mut c = cpus(2);
        let mut s = Stalls::new(2, 2);
        c[0].busy_until = 100;
        c[1].busy_until = 100;
        s.received(0, 0, 10, 3, &mut c);
        s.received(0, 1, 50, 5, &mut c);
        s.received(0, 0, 100, 7, &mut c);
        s.settle(0, &mut c[0]);
        s.settle(1, &mut c[1]);
        assert_eq!((c[0].stolen, c[1].stolen), (5, 3), "each is left out of its own messages");
        // Nothing is charged twice; later messages count against the new busy_until.
        c[0].busy_until = 300;
        s.received(0, 1, 200, 11, &mut c);
        s.settle(0, &mut c[0]);
        assert_eq!(c[0].stolen, 16);
    }

    #[test]
    fn the_total_is_the_eager_total_whatever_the_trim() {
        // Four CPUs on two sockets; busy periods and messages interleave so that
        // some CPUs are owed charges when the total is read.
        let run = |trim_at: usize| {
            let mut c = cpus(4);
            let mut s = Stalls::new(4, 2).with_trim_at(trim_at);
            let mut eager = 0u64;
            let mut totals = Vec::new();
            for t in 0..200u64 {
                // CPU t % 4 starts an operation lasting a varying time.
                let cpu = (t % 4) as usize;
                s.settle(cpu, &mut c[cpu]);
                c[cpu].busy_until = t * 10 + (t * 7) % 45;
                let (from, process) = (((t * 3) % 4) as usize, 1 + t % 5);
                for socket in 0..2 {
                    let start = t * 10 + socket as u64;
                    eager += (socket * 2..socket * 2 + 2)
                        .filter(|&r| r != from && c[r].busy_until > start)
                        .map(|_| process)
                        .sum::<u64>();
                    s.received(socket, from, start, process, &mut c);
                }
                totals.push(s.total(&c));
                assert_eq!(s.total(&c), eager, "trim at {trim_at}, message {t}: the total is the eager count");
            }
            totals
        };
        let reference = run(usize::MAX);
        for trim_at in [1, 2, 3, 7, 64] {
            assert_eq!(run(trim_at), reference, "trim at {trim_at} moved the total");
        }
    }

    #[test]
    fn a_full_log_is_settled_and_emptied_without_changing_any_charge() {
        let mut c = cpus(2);
        let mut s = Stalls::new(2, 2);
        c[0].busy_until = u64::MAX;
        let n = 3 * TRIM_AT as u64 + 5;
        for t in 0..n {
            s.received(0, 1, t, 1, &mut c);
        }
        assert_eq!(s.logs[0].entries.len(), 5, "emptied at every TRIM_AT messages");
        s.settle(0, &mut c[0]);
        s.settle(1, &mut c[1]);
        assert_eq!(c[0].stolen, n, "cpu0 ran throughout: every message counts, trimmed or not");
        assert_eq!(c[1].stolen, 0, "cpu1 was idle throughout");
    }
}
