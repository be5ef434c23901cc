//! The kernel's locks, built on [`crate::coherence`]'s lines: what taking one
//! costs, and how waiters queue.
//!
//! A kernel path in the simulator runs to its end at one point of the event
//! order, and one event may cover many paths of a CPU (a touch of 64 pages
//! faults up to 64 times), so a CPU's later holds can reach the machine before
//! another CPU's earlier ones. A spinlock or mutex therefore keeps its holds as
//! intervals in simulated time (`timeline.rs`), and a hold is placed in
//! the first gap at or after the time it is asked for that fits the whole hold:
//! the handoff from the holder before it, the work (the caller says how long it
//! holds the lock, as every spinlock-protected path here knows) and the release.
//! The handoff is the lock word's line moving to the new holder, charged at the
//! distance from the previous holder (the lock word is touched by its holders
//! only, so the timeline of holds is its line's history). No two holds overlap
//! and each waiter is served after every hold already placed before it, for any
//! number of waiters: a lock keeps every hold that ends after the start of the
//! event running (no CPU asks before it, `Machine::set_floor`) and who held it
//! last before then, so what it keeps is bounded by the holds still ahead, not by a
//! constant. The rwsem, whose write holds last a whole system call, keeps the
//! simulator's order instead (below).
//!
//! - [`SpinLock`], Linux's queued spinlock (`kernel/locking/qspinlock.c`,
//!   v4.2 and later). An uncontended acquisition is one `cmpxchg` on the lock word.
//!   Waiters queue in arrival order on MCS nodes, each spinning on its own
//!   node, so a waiting CPU costs the others nothing; only the queue's head spins
//!   on the lock word. The release is a store to the locked byte, and the
//!   head's next read and `cmpxchg` bring the line from the releasing CPU: one
//!   transfer per handoff, from whichever CPU released to whichever is next.
//!   (The head's handing of the MCS queue to its successor is a write to the
//!   successor's node, off the lock word's critical path; not charged.)
//!   What the lock protects moves with it: a path whose critical section
//!   follows pointers through shared data (a list's links) waits for each line
//!   on that chain, which the previous holder wrote, as it waited for the lock
//!   word ([`SpinLock::hold_data`]: each such line one more transfer from the
//!   previous holder, a hit when that was this CPU). Lines written without a
//!   dependent load before them (counters whose address is known) are fetched
//!   alongside and not charged.
//! - [`RwSem`], Linux's reader-writer semaphore (`kernel/locking/rwsem.c`), as
//!   `mmap_lock` is. Every `down_read` and `up_read` is an atomic add on the one
//!   count word, so readers that never wait for one another still queue on its
//!   line, one move each: the read-side cost of a fault on a machine of many
//!   CPUs. A `down_read_trylock` (which a page fault tries first) is a
//!   compare-and-exchange loop, which in most releases loads the count before
//!   its first exchange: a second move where another CPU wrote the line last
//!   (FreeBSD's `sx` locks take and drop a shared hold the same way). A
//!   writer waits until every reader admitted before it (in the simulator's
//!   order) has released, and readers and writers that come after a writer
//!   wait for its release: the rwsem's handoff to a waiting writer, with its
//!   readers-behind-a-writer rule (`rwsem_down_read_slowpath` queues a reader
//!   when a writer waits). Such a reader spins on the writer (Linux v5.3 to
//!   v5.10, FreeBSD's `sx`) or sleeps in the wait queue until the writer's
//!   release wakes it with the lock granted (Linux before v5.3 and from
//!   v5.11: [`crate::preset::Kernel::rwsem_readers_sleep`]); the sleep, its
//!   timed wake-up by the writer's CPU ([`RwSem::writer_release`], one
//!   reader after another) and the CPU's idle time are the engine's
//!   (`sim/sched.rs`). Writers spin while a writer owner runs
//!   (`rwsem_optimistic_spin`); on readers they spin as the kernel's do
//!   ([`crate::preset::WriterSpin`]: until they leave, not at all, or for
//!   (10 + readers/2) us) and then sleep in the wait queue until the last
//!   reader's release wakes them, while the readers that come meanwhile
//!   queue behind them (`sim/mmap_writer.rs`).
//! - [`Mutex`], Linux's mutex (`kernel/locking/mutex.c`) with optimistic
//!   spinning: a waiter spins on the owner field while the owner runs, which a
//!   simulated kernel path always does, so a waiter never sleeps and the
//!   handoff is the owner word's line moving to the next waiter. The release
//!   is an atomic (a release `cmpxchg` on the owner word), not a store.
//!
//! Not modelled: a waiter's spinning does not slow the holder (its reads of the
//! lock word are of a line the holder is not writing); a sleeping mutex waiter's
//! wake-up (never needed, see above); lock stealing by a CPU that arrives
//! while a handoff is in flight, but for a reader's from v5.11.

use crate::coherence::KLine;
use crate::machine::Machine;
use crate::preset::WriterSpin;
use crate::timeline::Timeline;

/// The hold intervals of a spinlock or a mutex, in simulated time, each with
/// its holder ([`Timeline`]: every hold a later request can still meet, however
/// many CPUs are queued).
#[derive(Clone, Debug, Default)]
struct Holds {
    busy: Timeline<u32>,
}

impl Holds {
    /// Holds the lock on `line` for `cpu` from the first gap at or after `t`
    /// long enough for the hold: the lock word's line comes to `cpu` from
    /// the holder before it (one transfer at their distance, or the
    /// acquiring atomic's hit, `atomic_hit`, if that was `cpu`; from memory
    /// the first time), `work` cycles run, and a `release` atomic on the
    /// line, now `cpu`'s, ends it. Returns when `cpu` goes on.
    ///
    /// The lock word is touched by nothing but its holders, so its line's
    /// owner is the previous holder: the timeline of holds is the line's
    /// history, and the general line model ([`crate::coherence`]) is not asked.
    ///
    /// `data` lines of protected data on the critical section's chain of
    /// dependent loads come from the previous holder too, each at the lock
    /// word's cost.
    fn hold(&mut self, m: &mut Machine, cpu: usize, t: u64, work: u64, release: bool, data: u32) -> u64 {
        let (mem, atomic) = (m.costs.mem_access, m.costs.lines.atomic_hit);
        let lines = 1 + u64::from(data);
        // The lock word's atomic and the data's loads: hits where `cpu` held
        // the lock last.
        let handoff = |from: Option<u32>| match from {
            Some(from) if from as usize == cpu => atomic + (lines - 1) * mem,
            from => lines * m.transfer_cost(from.map_or(cpu, |f| f as usize), cpu),
        };
        let tail = work + if release { atomic } else { 0 };
        self.busy.forget(m.floor());
        let (start, from) = self.busy.fit(t, |_, from| handoff(from) + tail);
        let end = start + handoff(from) + tail;
        if from.is_none_or(|f| f as usize != cpu) {
            m.counters.line_transfers += lines;
        }
        self.busy.insert(start, end, cpu as u32);
        end
    }
}

/// A queued spinlock (Linux `qspinlock`): see the module docs.
#[derive(Clone, Debug, Default)]
pub struct SpinLock {
    holds: Holds,
}

impl SpinLock {
    /// Takes the lock for `cpu` asking at `t`, does `work` cycles under it and
    /// releases it (a store: the CPU goes on at once); returns when `cpu` goes on.
    pub fn hold(&mut self, m: &mut Machine, cpu: usize, t: u64, work: u64) -> u64 {
        self.holds.hold(m, cpu, t, work, false, 0)
    }

    /// [`SpinLock::hold`] of a critical section that follows a chain of `data`
    /// dependent lines of the data the lock protects, last written by the
    /// previous holder: each comes from it as the lock word did.
    pub fn hold_data(&mut self, m: &mut Machine, cpu: usize, t: u64, work: u64, data: u32) -> u64 {
        self.holds.hold(m, cpu, t, work, false, data)
    }
}

/// A mutex with optimistic spinning (Linux `struct mutex`): see the module docs.
#[derive(Clone, Debug, Default)]
pub struct Mutex {
    holds: Holds,
}

impl Mutex {
    /// Takes the mutex for `cpu` asking at `t`, does `work` cycles under it and
    /// releases it (an atomic on the owner word); returns when `cpu` goes on.
    pub fn hold(&mut self, m: &mut Machine, cpu: usize, t: u64, work: u64) -> u64 {
        self.holds.hold(m, cpu, t, work, true, 0)
    }
}

/// A reader-writer semaphore (Linux `struct rw_semaphore`): its timeline in the
/// simulator's order. The count word's line is the machine's.
#[derive(Clone, Copy, Debug, Default)]
pub struct RwSem {
    /// When the latest writer released it.
    write_free: u64,
    /// When the last reader admitted so far releases it.
    readers_until: u64,
    /// Whether its owner word says a reader took it last (no writer since).
    reader_owned: bool,
    /// The CPU of the writer whose release is `write_free`: the waker of the
    /// readers asleep until it.
    waker: u32,
    /// That waker's time after the last of its wake-ups of sleeping readers
    /// (`rwsem_wake`'s `wake_up_q` wakes them one after another).
    wake_until: u64,
    /// The CPU of the reader whose release is `readers_until`: the waker of
    /// a writer asleep until it.
    last_reader: u32,
    /// The latest read releases, in a ring: how many readers still hold it
    /// at a time, up to the 30 a writer's spin limit counts.
    releases: [u64; SPIN_READERS],
    /// The ring's next slot.
    next_release: u8,
    /// When the first of the writers asleep in the wait queue behind
    /// readers went into it, and how many sleep there (until each runs
    /// again and takes the lock).
    writer_queued: Option<(u64, u32)>,
    /// Until when a writer that gave up spinning on the readers keeps the
    /// writers after it from spinning on them (Linux's `RWSEM_NONSPINNABLE`
    /// in the owner word: set while those readers hold it, cleared by the
    /// last of them leaving with waiters queued or by a writer owner).
    nonspinnable_until: u64,
}

/// The most readers a writer's spin limit counts (`rwsem_rspin_threshold`).
pub const SPIN_READERS: usize = 30;

impl RwSem {
    /// Records that a reader took it; returns whether the reader writes the
    /// owner word: every reader where `every` (Linux after v4.19, whose
    /// `__rwsem_set_reader_owned` leaves the reader's task there), else only
    /// the first reader after a writer (v4.19's `rwsem_set_reader_owned`
    /// stores only when the word does not already say "reader-owned", "to
    /// minimize cacheline contention").
    pub fn reader_owns(&mut self, every: bool) -> bool {
        let store = every || !self.reader_owned;
        self.reader_owned = true;
        store
    }

    /// Records that a writer took it (`rwsem_set_owner` names the writer in
    /// the owner word, clearing its flags).
    pub fn writer_owns(&mut self) {
        self.reader_owned = false;
        self.nonspinnable_until = 0;
    }

    /// Takes the semaphore on `line` for reading by `cpu` asking at `t`; returns
    /// when it holds it.
    pub fn down_read(&mut self, m: &mut Machine, cpu: usize, line: KLine, t: u64) -> u64 {
        m.katomic(cpu, t.max(self.write_free), line)
    }

    /// Takes the semaphore on `line` for reading by `cpu` asking at `t` by a
    /// compare-and-exchange loop (Linux's `down_read_trylock`, which the page
    /// fault tries first as `mmap_read_trylock`; FreeBSD's `sx_slock`): where
    /// the loop loads the word before its first exchange (`loads_first`,
    /// [`crate::preset::Kernel::read_trylock_loads_first`]) the load, then
    /// the exchange (`Machine::kload_cmpxchg`); else the exchange alone
    /// (Linux v5.2 to v5.15, whose first guess is the unlocked value: a guess
    /// that fails with other readers in has taken the line, and its retry's
    /// hit is not charged). A writer holding it fails a trylock, and the
    /// fallback's `down_read` waits for the writer's release after the load.
    /// Returns when it holds it.
    pub fn down_read_cmpxchg(&mut self, m: &mut Machine, cpu: usize, line: KLine, t: u64, loads_first: bool) -> u64 {
        let t = if loads_first { m.kread(cpu, t, line, 0) } else { t };
        self.down_read(m, cpu, line, t)
    }

    /// Releases a read hold at `t`; returns when `cpu` goes on.
    pub fn up_read(&mut self, m: &mut Machine, cpu: usize, line: KLine, t: u64) -> u64 {
        let done = m.katomic(cpu, t, line);
        if done >= self.readers_until {
            self.readers_until = done;
            self.last_reader = cpu as u32;
        }
        self.releases[usize::from(self.next_release)] = done;
        self.next_release = ((usize::from(self.next_release) + 1) % SPIN_READERS) as u8;
        done
    }

    /// Releases a read hold at `t` by a compare-and-exchange loop that loads
    /// the word first (FreeBSD's `sx_sunlock`: `SX_READ_VALUE`, then
    /// `atomic_fcmpset_rel_ptr`); returns when `cpu` goes on.
    pub fn up_read_cmpxchg(&mut self, m: &mut Machine, cpu: usize, line: KLine, t: u64) -> u64 {
        let t = m.kread(cpu, t, line, 0);
        self.up_read(m, cpu, line, t)
    }

    /// Says that a reader holds it until at least `t`, before its release is
    /// simulated (a read hold whose `up_read` runs at a later event): a
    /// writer asking meanwhile waits for it.
    pub fn read_held_until(&mut self, t: u64) {
        self.readers_until = self.readers_until.max(t);
    }

    /// Takes the semaphore on `line` for writing by `cpu` asking at `t`; returns
    /// when it holds it (every earlier reader and writer gone).
    pub fn down_write(&mut self, m: &mut Machine, cpu: usize, line: KLine, t: u64) -> u64 {
        m.katomic(cpu, t.max(self.write_free).max(self.readers_until), line)
    }

    /// Releases a write hold at `t`; returns when `cpu` goes on.
    pub fn up_write(&mut self, m: &mut Machine, cpu: usize, line: KLine, t: u64) -> u64 {
        let done = m.katomic(cpu, t, line);
        self.released(cpu, done);
        done
    }

    /// A writer on `cpu` released it (or downgraded its hold) at `done`.
    fn released(&mut self, cpu: usize, done: u64) {
        if done >= self.write_free {
            self.write_free = done;
            self.waker = cpu as u32;
        }
    }

    /// Returns when the latest writer releases it and that writer's CPU,
    /// which wakes the readers asleep until then.
    pub fn writer_release(&self) -> (u64, usize) {
        (self.write_free, self.waker as usize)
    }

    /// The waker of sleeping readers may wake the next at `t` at the
    /// earliest: after its wake-up of the one before. Returns when it starts.
    pub fn next_wake(&self, t: u64) -> u64 {
        t.max(self.wake_until)
    }

    /// The waker's wake-up of a sleeping reader ended at `t`.
    pub fn woke_until(&mut self, t: u64) {
        self.wake_until = self.wake_until.max(t);
    }

    /// Turns a write hold into a read hold at `t` (`downgrade_write`: one atomic,
    /// waking the readers waiting behind it); release it with
    /// [`RwSem::up_read`]. Returns when `cpu` goes on.
    pub fn downgrade(&mut self, m: &mut Machine, cpu: usize, line: KLine, t: u64) -> u64 {
        let done = m.katomic(cpu, t, line);
        self.released(cpu, done);
        done
    }

    /// Returns whether a writer holds it (or is still releasing it) at `t`.
    pub fn write_held_at(&self, t: u64) -> bool {
        t < self.write_free
    }

    /// Where a writer asking at `t` would wait for readers: from when any
    /// writer before it has gone until the last reader admitted before it
    /// releases. `None` if no reader holds it then.
    pub fn reader_wait(&self, t: u64) -> Option<(u64, u64)> {
        let from = t.max(self.write_free);
        (self.readers_until > from).then_some((from, self.readers_until))
    }

    /// How long a writer starting to spin on its readers at `t` spins
    /// before it sleeps, in cycles of `cycles_per_ms`, under `spin`; `None`
    /// if it spins until they leave. A writer that gives up sets the lock
    /// non-spinnable ([`RwSem::give_up_spinning`]).
    pub fn writer_spin_limit(&self, spin: WriterSpin, t: u64, cycles_per_ms: u64) -> Option<u64> {
        match spin {
            WriterSpin::Unbounded => None,
            WriterSpin::Never => Some(0),
            WriterSpin::Threshold if t < self.nonspinnable_until => Some(0),
            WriterSpin::Threshold => {
                // (20 + readers) / 2 us.
                let readers = self.releases.iter().filter(|&&r| r > t).count() as u64;
                Some((20 + readers) * cycles_per_ms / 2000)
            }
        }
    }

    /// A writer gave up spinning on the readers (`rwsem_set_nonspinnable`):
    /// the writers after it do not spin on them while they hold it (v5.11's
    /// `__up_read` clears the flag when the last leaves with waiters queued;
    /// v5.3 to v5.10 keep it only until another reader writes the owner
    /// word, which the model does not follow).
    pub fn give_up_spinning(&mut self) {
        self.nonspinnable_until = self.readers_until;
    }

    /// Returns whether a reader admitted before `t` still holds it then.
    pub fn readers_hold_at(&self, t: u64) -> bool {
        t < self.readers_until
    }

    /// Returns when the last reader admitted so far releases it and that
    /// reader's CPU, which wakes a writer asleep until then (`up_read`'s
    /// `rwsem_wake`).
    pub fn readers_release(&self) -> (u64, usize) {
        (self.readers_until, self.last_reader as usize)
    }

    /// A writer went to sleep in the wait queue at `t`, behind readers.
    pub fn queue_writer(&mut self, t: u64) {
        self.writer_queued = Some(self.writer_queued.map_or((t, 1), |(q, n)| (q.min(t), n + 1)));
    }

    /// A writer asleep in the wait queue runs again, to take it.
    pub fn writer_unqueued(&mut self) {
        self.writer_queued = match self.writer_queued {
            Some((q, n)) if n > 1 => Some((q, n - 1)),
            _ => None,
        };
    }

    /// Returns whether a reader asking at `t` finds a writer asleep in the
    /// wait queue ahead of it (`RWSEM_FLAG_WAITERS` with a writer first):
    /// the reader queues behind it.
    pub fn writer_queued_by(&self, t: u64) -> bool {
        self.writer_queued.is_some_and(|(q, _)| q <= t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preset;
    use crate::tlb::Tlb;

    /// A two-socket Westmere of 8 CPUs (4 a socket): transfers of 100 cycles in a
    /// socket and more across.
    fn westmere() -> Machine {
        let p = preset::named("westmere");
        let cpus =
            (0..8).map(|_| Tlb::new(p.tlb.l1d_entries, p.tlb.l2_entries, p.tlb.l2_ways, p.tlb.pwc_entries)).collect();
        Machine::new(p.costs, cpus, p.cores_per_socket)
    }

    #[test]
    fn an_uncontended_spinlock_costs_one_transfer_then_hits() {
        let mut m = westmere();
        let c = m.costs;
        let mut lock = SpinLock::default();
        // From memory: the first cmpxchg brings the line in.
        let out = lock.hold(&mut m, 0, 1000, 50);
        // The same CPU again: the line is still its own.
        let again = lock.hold(&mut m, 0, out + 10, 50);
        assert_eq!(again, out + 10 + c.lines.atomic_hit + 50, "the cmpxchg's hit: a locked atomic");
    }

    #[test]
    fn a_spinlock_waiter_gets_it_one_transfer_after_the_release() {
        let mut m = westmere();
        let c = m.costs;
        let mut lock = SpinLock::default();
        let rel0 = lock.hold(&mut m, 0, 0, 5000);
        // cpu1 (same socket) asked at 100, long before the release.
        let rel1 = lock.hold(&mut m, 1, 100, 5000);
        assert_eq!(rel1, rel0 + c.lines.cacheline_transfer + 5000);
        // cpu4 (the other socket) queued behind cpu1: its handoff crosses the socket.
        let rel4 = lock.hold(&mut m, 4, 200, 5000);
        assert_eq!(rel4, rel1 + c.lines.cacheline_transfer + c.lines.cacheline_cross_socket + 5000);
    }

    #[test]
    fn the_data_a_spinlock_protects_comes_with_it_from_the_previous_holder() {
        let mut m = westmere();
        let c = m.costs;
        let mut lock = SpinLock::default();
        let rel0 = lock.hold_data(&mut m, 0, 0, 5000, 2);
        let moved = m.counters.line_transfers;
        // cpu1 waits for the lock word and then, one after the other, for the
        // two lines of the list cpu0 wrote: three transfers inside its hold.
        let rel1 = lock.hold_data(&mut m, 1, 100, 5000, 2);
        assert_eq!(rel1, rel0 + 3 * c.lines.cacheline_transfer + 5000);
        assert_eq!(m.counters.line_transfers - moved, 3);
        // cpu1 again: the word and the list are still its own.
        let again = lock.hold_data(&mut m, 1, rel1 + 10, 5000, 2);
        assert_eq!(again, rel1 + 10 + c.lines.atomic_hit + 2 * c.mem_access + 5000);
        assert_eq!(m.counters.line_transfers - moved, 3);
    }

    #[test]
    fn a_spinlock_hold_asked_for_earlier_fits_in_a_gap_before_later_ones() {
        // A CPU's later hold reaches the lock first (the simulator ran its event
        // first); another CPU's earlier hold still fits before it.
        let mut m = westmere();
        let mut lock = SpinLock::default();
        let late = lock.hold(&mut m, 0, 100_000, 1000);
        let early = lock.hold(&mut m, 1, 1000, 1000);
        assert!(early < 100_000, "the early hold ended at {early}, behind the late one ending at {late}");
        // A hold that does not fit before it goes after it.
        let long = lock.hold(&mut m, 2, 98_000, 5000);
        assert!(long > late, "{long} overlaps the hold ending at {late}");
    }

    #[test]
    fn spinlock_waiters_are_served_in_arrival_order() {
        let mut m = westmere();
        let mut lock = SpinLock::default();
        let ends: Vec<u64> = [3, 1, 2].iter().map(|&cpu| lock.hold(&mut m, cpu, 10, 1000)).collect();
        assert!(ends.windows(2).all(|w| w[1] >= w[0] + 1000), "{ends:?}");
    }

    /// A machine of `n` CPUs with Westmere's costs (4 a socket) and TLBs of
    /// one entry: for locks, whose model reads no TLB.
    fn many(n: usize) -> Machine {
        let p = preset::named("westmere");
        Machine::new(p.costs, (0..n).map(|_| Tlb::new(1, 1, 1, 0)).collect(), p.cores_per_socket)
    }

    /// Returns the holds of `holds`, checking that no two overlap.
    fn serial(holds: &Holds) -> Vec<(u64, u64, u32)> {
        let v: Vec<(u64, u64, u32)> = holds.busy.intervals().collect();
        for w in v.windows(2) {
            assert!(w[0].1 <= w[1].0, "holds {:?} and {:?} overlap", w[0], w[1]);
        }
        v
    }

    #[test]
    fn any_number_of_waiters_are_served_one_after_another() {
        // 64, 65, 200 and 4,096 CPUs ask for a spinlock and for a mutex at the
        // same time, in one event (the floor stays): each hold starts when the
        // one before ends, so the last ends after the sum of every hold's
        // handoff and work, a time linear in the waiters.
        for n in [64, 65, 200, 4096] {
            let mut m = many(n);
            let c = m.costs;
            let (mut spin, mut mutex) = (SpinLock::default(), Mutex::default());
            let (mut spin_end, mut mutex_end) = (10, 10);
            for cpu in 0..n {
                let handoff = if cpu == 0 { m.transfer_cost(0, 0) } else { m.transfer_cost(cpu - 1, cpu) };
                spin_end += handoff + 1000;
                mutex_end += handoff + 1000 + c.lines.atomic_hit;
                assert_eq!(spin.hold(&mut m, cpu, 10, 1000), spin_end, "spinlock, {n} waiters, cpu{cpu}");
                assert_eq!(mutex.hold(&mut m, cpu, 10, 1000), mutex_end, "mutex, {n} waiters, cpu{cpu}");
            }
            assert_eq!(serial(&spin.holds).len(), n);
            assert_eq!(serial(&mutex.holds).len(), n);
            // Within a socket a handoff is one transfer: 1,000 cycles of work and
            // one transfer per waiter, whatever their number.
            let per = 1000 + c.lines.cacheline_transfer;
            let socket = (spin_end - 10) / n as u64;
            assert!(socket >= per && socket < per + c.lines.cacheline_cross_socket, "{socket} cycles a hold");
        }
    }

    #[test]
    fn holds_asked_for_in_any_order_never_overlap() {
        // 4,096 holds of 64 CPUs, asked for at random times and run in a random
        // order (the simulator's order is not that of time): each fits a gap at
        // or after its asking time, and no two overlap.
        let mut m = many(64);
        let mut lock = SpinLock::default();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..4096 {
            let (cpu, t, work) = ((next() % 64) as usize, next() % 2_000_000, 100 + next() % 2000);
            let end = lock.hold(&mut m, cpu, t, work);
            assert!(end >= t + work, "a hold asked at {t} ended at {end}");
        }
        assert_eq!(serial(&lock.holds).len(), 4096);
    }

    #[test]
    fn a_lock_forgets_the_holds_no_later_request_can_meet() {
        // One hold per event, the floor at each event's start: what is kept is
        // the hold the next one follows, not a history.
        let mut m = many(8);
        let mut lock = Mutex::default();
        for i in 0..1000u64 {
            m.set_floor(i * 10_000);
            lock.hold(&mut m, (i % 8) as usize, i * 10_000, 1000);
            assert!(lock.holds.busy.len() <= 1, "{} holds kept", lock.holds.busy.len());
        }
        // The next handoff still comes from the last holder, cpu7.
        m.set_floor(10_000_000);
        let out = lock.hold(&mut m, 0, 10_000_000, 1000);
        assert_eq!(out, 10_000_000 + m.transfer_cost(7, 0) + 1000 + m.costs.lines.atomic_hit);
    }

    /// [`westmere`] and an rwsem whose count is on a line of its own.
    fn rwsem_on_westmere() -> (Machine, RwSem, KLine) {
        (westmere(), RwSem::default(), KLine::Mm(1, 0))
    }

    #[test]
    fn rwsem_readers_overlap_but_queue_on_the_count_line() {
        let (mut m, mut s, line) = rwsem_on_westmere();
        let c = m.costs;
        // Three readers ask at once: each waits for the count's line in turn.
        let got: Vec<u64> = (0..3).map(|cpu| s.down_read(&mut m, cpu, line, 1000)).collect();
        assert!(got[1] > got[0] && got[2] > got[1], "{got:?}");
        // They hold it together: the third gets it long before the first's release.
        let rel = got[0] + 100_000;
        s.up_read(&mut m, 0, line, rel);
        assert!(got[2] < rel);
        // And a reader never waits for another's release.
        let late = s.down_read(&mut m, 3, line, 2000);
        assert!(late < rel, "reader 3 at {late} waited for reader 0's release at {rel}");
        assert!(late - 2000 <= 4 * (c.lines.cacheline_transfer + c.mem_access), "{late}");
    }

    #[test]
    fn a_read_take_that_loads_the_count_first_moves_its_line_twice_after_another_cpus_write() {
        let (mut m, mut s, line) = rwsem_on_westmere();
        let c = m.costs;
        let t = s.down_read(&mut m, 0, line, 0);
        let t = s.up_read(&mut m, 0, line, t + 100);
        // CPU 1 (same socket) loads the count (a shared copy from CPU 0), then
        // its exchange takes the line for writing: two moves.
        let before = m.counters.line_transfers;
        let start = t + 100;
        let got = s.down_read_cmpxchg(&mut m, 1, line, start, true);
        assert_eq!(m.counters.line_transfers - before, 2);
        assert_eq!(got, start + 2 * c.lines.cacheline_transfer);
        // Its release by a loop that loads first hits twice, a load and a
        // locked exchange: the line is its own.
        let out = s.up_read_cmpxchg(&mut m, 1, line, got + 100);
        assert_eq!(out, got + 100 + c.mem_access + c.lines.atomic_hit);
        // CPU 0 again, by the exchange alone: one move.
        let before = m.counters.line_transfers;
        s.down_read_cmpxchg(&mut m, 0, line, out + 100, false);
        assert_eq!(m.counters.line_transfers - before, 1);
    }

    #[test]
    fn an_rwsem_writer_waits_for_every_reader_and_later_readers_wait_for_it() {
        let (mut m, mut s, line) = rwsem_on_westmere();
        let r0 = s.down_read(&mut m, 0, line, 0);
        let r1 = s.down_read(&mut m, 1, line, 0);
        let out0 = s.up_read(&mut m, 0, line, r0 + 3000);
        let out1 = s.up_read(&mut m, 1, line, r1 + 8000);
        let w = s.down_write(&mut m, 2, line, 100);
        assert!(w > out0.max(out1), "the writer got it at {w} before the readers left at {out0} and {out1}");
        let wout = s.up_write(&mut m, 2, line, w + 2000);
        assert!(s.write_held_at(w + 1000));
        let r3 = s.down_read(&mut m, 3, line, 200);
        assert!(r3 > wout, "a reader after the writer got it at {r3}, before its release at {wout}");
        assert!(!s.write_held_at(wout));
    }

    #[test]
    fn a_downgraded_writer_lets_readers_in_and_keeps_writers_out_until_it_leaves() {
        let (mut m, mut s, line) = rwsem_on_westmere();
        let w = s.down_write(&mut m, 0, line, 0);
        let d = s.downgrade(&mut m, 0, line, w + 1000);
        let out = s.up_read(&mut m, 0, line, d + 50_000);
        let r = s.down_read(&mut m, 1, line, 10);
        assert!(r > d && r < out, "a reader got it at {r}: not between the downgrade at {d} and the release at {out}");
        let w2 = s.down_write(&mut m, 2, line, 10);
        assert!(w2 > out, "a writer got it at {w2}, before the downgraded hold ended at {out}");
    }

    #[test]
    fn a_mutex_hands_off_one_transfer_after_an_atomic_release() {
        let mut m = westmere();
        let c = m.costs;
        let mut mutex = Mutex::default();
        // The first hold brings the line from memory; its release is an atomic that hits.
        let rel0 = mutex.hold(&mut m, 0, 0, 1000);
        assert_eq!(rel0, c.lines.cacheline_transfer + 1000 + c.lines.atomic_hit);
        // The same CPU again: every access hits, each a locked atomic.
        let again = mutex.hold(&mut m, 0, rel0, 1000);
        assert_eq!(again, rel0 + c.lines.atomic_hit + 1000 + c.lines.atomic_hit);
        // Another CPU waiting since 10 gets it one transfer after the release.
        let rel1 = mutex.hold(&mut m, 1, 10, 1000);
        assert_eq!(rel1, again + c.lines.cacheline_transfer + 1000 + c.lines.atomic_hit);
    }
}
