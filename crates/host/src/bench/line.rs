//! `line_pingpong` and `lock_handoff`: a cache line, and a spinlock in one,
//! passed between the CPUs `a` and `b`; and `atomic_hit`, an atomic on a
//! line that stays with CPU `a`.
//!
//! Every wait spins with `std::hint::spin_loop` (x86 `PAUSE`, arm64 `YIELD`
//! or `ISB`), as the kernel's `cpu_relax()` spins do; the pause is part of
//! what detecting the new value costs.

use super::harness::{self, Trial};
use super::pair::with_partner;
use super::sys::now;
use super::{Bench, Cpus, Effort, Measurement};
use crate::Error;
use std::hint::spin_loop;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// A value alone in its 64-byte cache line.
#[repr(align(64))]
struct Line(AtomicU64);

/// Spins until `line` holds `value`.
fn wait_for(line: &Line, value: u64) {
    // Acquire: the value was stored with Release by the other CPU.
    while line.0.load(Ordering::Acquire) != value {
        spin_loop();
    }
}

/// Measures `line_pingpong`: a counter alone in its line; the thread on `a`
/// waits for an even value and stores it + 1, the thread on `b` waits for an
/// odd one and stores it + 1; ns per pass (one store, its line's transfer
/// to the other CPU, and the other's spin seeing it).
pub(super) fn line_pingpong(effort: Effort, cpus: Cpus) -> Result<Measurement, Error> {
    let line = Line(AtomicU64::new(0));
    // The partner runs to the round's last value `end`.
    let partner = |end: u64| loop {
        let mut value = line.0.load(Ordering::Acquire);
        while value.is_multiple_of(2) && value < end {
            spin_loop();
            value = line.0.load(Ordering::Acquire);
        }
        if value >= end {
            return;
        }
        // Release: the pass publishes the count the other side waits for.
        line.0.store(value + 1, Ordering::Release);
    };
    with_partner(cpus.b, partner, |start| {
        harness::run(Bench::LinePingPong, effort, 2, |ops| {
            // Stable: the partner has ended the last round and waits.
            let base = line.0.load(Ordering::Relaxed);
            let end = base + ops;
            let t0 = start(end)?;
            for value in (base..end).step_by(2) {
                wait_for(&line, value);
                line.0.store(value + 1, Ordering::Release);
            }
            wait_for(&line, end);
            Ok(Trial::per_op((now()? - t0) as f64, ops))
        })
    })
}

/// Measures `atomic_hit`: the thread on `a` adds to a counter alone in its
/// line, each add's operand taken from the value the last one returned, so
/// that every add waits for the one before; ns per add. A fully ordered
/// `fetch_add` is x86's `LOCK XADD` and, on arm64, `LDADDAL` where the build
/// has the LSE atomics (an exclusive-pair loop otherwise): the kernel's
/// value-returning atomics (`atomic_add_return`, `cmpxchg`), on a line no
/// other CPU touches.
pub(super) fn atomic_hit(effort: Effort) -> Result<Measurement, Error> {
    let line = Line(AtomicU64::new(0));
    harness::run(Bench::AtomicHit, effort, 1, |ops| {
        let mut last = 0u64;
        let t0 = now()?;
        for _ in 0..ops {
            // The old value's top bit is 0 for any count a trial reaches, so
            // each add is of 1; hidden from the compiler, which would
            // otherwise drop the results it can prove unused.
            last = line.0.fetch_add(std::hint::black_box(1 | (last >> 63)), Ordering::SeqCst);
        }
        let ns = (now()? - t0) as f64;
        std::hint::black_box(last);
        Ok(Trial::per_op(ns, ops))
    })
}

/// A ticket spinlock: a waiter takes the next ticket and spins until the
/// owner's count reaches it, so waiters are served in order, as Linux's
/// ticket locks were and its queued spinlocks are (kernel/locking/
/// qspinlock.c). Both counts share one line, as the `next` and `owner` of
/// Linux's generic ticket lock do (include/asm-generic/spinlock.h).
#[repr(C, align(64))]
struct TicketLock {
    next: AtomicU32,
    owner: AtomicU32,
}

impl TicketLock {
    /// Takes the lock.
    fn lock(&self) {
        // Relaxed: the ticket only orders waiters; `owner` orders the data.
        let ticket = self.next.fetch_add(1, Ordering::Relaxed);
        // Acquire: the critical section follows the last owner's release.
        while self.owner.load(Ordering::Acquire) != ticket {
            spin_loop();
        }
    }

    /// Releases the lock to the next ticket.
    fn unlock(&self) {
        // Relaxed: only the holder writes `owner`.
        let owner = self.owner.load(Ordering::Relaxed);
        // Release: the critical section's writes precede the handoff.
        self.owner.store(owner.wrapping_add(1), Ordering::Release);
    }
}

/// Measures `lock_handoff`: the threads on `a` and `b` each take the ticket
/// lock, increment a counter in another line, and release, in a loop; the
/// trial ends when the counter has all `ops` increments; ns per acquisition
/// (with both threads always waiting, each is a handoff from the other CPU).
pub(super) fn lock_handoff(effort: Effort, cpus: Cpus) -> Result<Measurement, Error> {
    let lock = TicketLock { next: AtomicU32::new(0), owner: AtomicU32::new(0) };
    let count = Line(AtomicU64::new(0));
    let acquire = |times: u64| {
        for _ in 0..times {
            lock.lock();
            // Relaxed: the lock orders the counter.
            count.0.store(count.0.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            lock.unlock();
        }
    };
    with_partner(cpus.b, acquire, |start| {
        harness::run(Bench::LockHandoff, effort, 2, |ops| {
            // Stable: the partner has ended the last round and waits.
            let base = count.0.load(Ordering::Relaxed);
            let t0 = start(ops / 2)?;
            acquire(ops / 2);
            wait_for(&count, base + ops);
            Ok(Trial::per_op((now()? - t0) as f64, ops))
        })
    })
}
