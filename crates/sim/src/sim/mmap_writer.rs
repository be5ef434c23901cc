//! A writer of `mmap_lock` that sleeps behind its readers, and the readers
//! that queue behind it.
//!
//! A Linux writer (`mmap`, `munmap`, `mprotect`, `fork`) that finds readers
//! holding the lock spins on them for a while at most
//! ([`crate::preset::WriterSpin`], `--set rwsem_writer_sleep`): not at all
//! from v4.8 to v5.2, (10 + readers/2) us from v5.3. Then, as
//! `rwsem_down_write_slowpath` (`rwsem_down_write_failed` before v5.3) does,
//! it joins the wait queue and sleeps; its CPU runs something else or goes
//! idle. The last reader's `up_read` finds the waiter and wakes it
//! (`rwsem_wake`), and the writer, once it runs, takes the lock itself.
//!
//! While it sleeps the queue's flag is set and a writer is first in line:
//! a reader that asks then queues behind it and sleeps too (before v5.3
//! `__down_read` finds the count negative; from v5.3 the fast path fails on
//! `RWSEM_FLAG_WAITERS`, and the writer that gave up spinning made the lock
//! non-spinnable for readers; from v5.11 a reader steals the lock only when
//! no other reader holds it). The writer's release is not known until it runs,
//! so those readers are not given a timed wake-up at once: they wait on the
//! address space's list here, and the writer's release wakes them, one
//! after another, with the read lock granted, as a writer's release wakes
//! the readers behind it ([`Sim::timed_wake`]).
//!
//! Simplified: an access restarted after a fault's end and `migrate_pages(2)`,
//! which spin rather than sleep in the model, do not see the queued writer
//! and are admitted as readers (the writer, once woken, waits for them too);
//! a second writer queues by its own test of the readers, not behind the first.

use super::*;
use crate::preset::WriterSpin;
use crate::toggle::RWSEM_WRITER_SLEEP;

impl Sim {
    /// Returns when a writer of `mm`'s `mmap_lock` asking at `now` stops
    /// spinning on the readers holding it and goes into the wait queue, if it
    /// does: readers hold it beyond the spin limit of the run's kernel.
    pub(super) fn mmap_writer_sleeps(&mut self, mm: MmId, now: u64) -> Option<u64> {
        if !self.kw.features().on(RWSEM_WRITER_SLEEP) {
            return None;
        }
        // On (it is refused on FreeBSD): a kernel whose writers spin on
        // until the readers leave sleeps at once, as v4.8 to v5.2 do.
        let spin = match self.kw.kernel().rwsem_writer_spin() {
            WriterSpin::Unbounded => WriterSpin::Never,
            spin => spin,
        };
        let cycles_per_ms = self.cycles_per_tick();
        let sem = self.kw.mmap_lock(mm);
        let (from, until) = sem.reader_wait(now)?;
        let limit = sem.writer_spin_limit(spin, from, cycles_per_ms)?;
        if until <= from + limit {
            return None;
        }
        if spin == WriterSpin::Threshold {
            sem.give_up_spinning();
        }
        Some(from + limit)
    }

    /// Puts `tid`, a writer of `mm`'s `mmap_lock` on `cpu` that stopped
    /// spinning at `now`, to sleep in the wait queue: its failed `down_write`
    /// (an atomic on the count's line), the queue's `wait_lock` and the
    /// count's waiters flag (two more, the wait lock sharing the line), then
    /// a timed wake-up at the last reader's release by that reader's CPU.
    /// Returns when it sleeps.
    pub(super) fn sleep_behind_readers(&mut self, cpu: usize, tid: usize, mm: MmId, now: u64) -> u64 {
        let t = self.mmap_lock_queue(cpu, mm, false, now);
        let sem = self.kw.mmap_lock(mm);
        sem.queue_writer(t);
        let (until, waker) = sem.readers_release();
        self.stats.mmap_writer_sleeps += 1;
        self.scheduler.sleep(cpu, tid, t);
        self.arm_wake(until.max(t), tid, waker);
        t
    }

    /// Returns whether a reader of `mm`'s `mmap_lock` asking at `now` finds
    /// a writer asleep in the wait queue ahead of it and queues behind it:
    /// from v5.11 a reader that finds no other reader holding it takes it
    /// anyway (`rwsem_down_read_slowpath`'s lock stealing, refused only
    /// while other readers hold a reader-owned lock).
    pub(super) fn writer_queued(&mut self, mm: MmId, now: u64) -> bool {
        if !self.kw.features().on(RWSEM_WRITER_SLEEP) {
            return false;
        }
        let steals = self.kw.kernel().rwsem_readers_steal();
        let sem = self.kw.mmap_lock(mm);
        sem.writer_queued_by(now) && (!steals || sem.readers_hold_at(now))
    }

    /// Runs system call `s` of `tid`, a writer woken from `mm`'s `mmap_lock`
    /// wait queue, on `cpu` from `now`: it takes the lock (waiting for any
    /// reader admitted meanwhile), runs, and its release wakes the readers
    /// that queued behind it. Returns when `cpu` goes on.
    pub(super) fn writer_granted(&mut self, cpu: usize, tid: usize, s: Sys, now: u64) -> u64 {
        let mm = self.scheduler.thread(tid).mm();
        self.kw.mmap_lock(mm).writer_unqueued();
        let end = self.syscall_locked(cpu, tid, s, true, now);
        self.wake_queued_readers(mm);
        end
    }

    /// The writer of `mm`'s `mmap_lock` that was asleep in its wait queue has
    /// released it (or downgraded its hold): the readers that slept behind it
    /// are woken by its CPU at its release, one after another, each granted
    /// the read lock.
    fn wake_queued_readers(&mut self, mm: MmId) {
        let (until, waker) = self.kw.mmap_lock(mm).writer_release();
        for tid in self.kw.take_queued_readers(mm) {
            self.arm_wake(until, tid, waker);
        }
    }
}
