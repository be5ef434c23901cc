//! The watchdog: a thread that finds guarded runs over their CPU budget.
//!
//! Each watched thread has a slot: its `pthread_t`, its CPU clock, and the
//! address of its run count ([`crate::RUN`], odd while a guarded run is
//! under way). Every 100 ms the watchdog looks at each slot: a run it has
//! seen before (the same count) whose thread used more than
//! [`crate::STEP_BUDGET`] of CPU since then is sent
//! [`crate::watchdog_signal`], again at each look until it ends. A slot is
//! freed by its thread's exit, under the same lock the watchdog holds while
//! it signals, so no signal goes to a thread that is gone.

use crate::{watchdog_signal, RUN, STEP_BUDGET};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once, PoisonError};
use std::time::Duration;

/// A watched thread.
struct Slot {
    thread: libc::pthread_t,
    clock: libc::clockid_t,
    /// The thread's run count (its `RUN`), alive while the slot is.
    run: *const AtomicU64,
    /// The count the watchdog last saw, and the thread's CPU time then.
    seen: u64,
    since: Duration,
}

// SAFETY: `run` points to a thread-local of a thread that removes its slot
// (under the table's lock) before its thread-locals are gone; it is only
// read, atomically.
unsafe impl Send for Slot {}

/// The watched threads, by a number of their own.
static SLOTS: Mutex<Vec<(u64, Slot)>> = Mutex::new(Vec::new());

/// Frees the calling thread's slot when the thread ends.
struct Watched(u64);

impl Drop for Watched {
    fn drop(&mut self) {
        SLOTS.lock().unwrap_or_else(PoisonError::into_inner).retain(|(id, _)| *id != self.0);
    }
}

thread_local! {
    static WATCHED: Cell<bool> = const { Cell::new(false) };
    static GUARD: std::cell::RefCell<Option<Watched>> = const { std::cell::RefCell::new(None) };
}

/// Puts the calling thread under the watchdog, starting it on first use.
pub(crate) fn watch() {
    if WATCHED.with(Cell::get) {
        return;
    }
    static NEXT: AtomicU64 = AtomicU64::new(1);
    static START: Once = Once::new();
    START.call_once(|| {
        // The watchdog lives as long as the process.
        let _ = std::thread::Builder::new().name("tlbkit-watchdog".into()).spawn(patrol);
    });
    // SAFETY: pthread_self is always valid; the clock id is written by the call.
    let (thread, clock) = unsafe {
        let me = libc::pthread_self();
        let mut clock: libc::clockid_t = 0;
        if libc::pthread_getcpuclockid(me, &mut clock) != 0 {
            return;
        }
        (me, clock)
    };
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    let run = RUN.with(std::ptr::from_ref);
    GUARD.with(|g| *g.borrow_mut() = Some(Watched(id)));
    SLOTS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((id, Slot { thread, clock, run, seen: u64::MAX, since: Duration::ZERO }));
    WATCHED.with(|w| w.set(true));
}

/// Returns the CPU time `clock` has counted.
fn cpu_time(clock: libc::clockid_t) -> Option<Duration> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec to fill.
    (unsafe { libc::clock_gettime(clock, &mut ts) } == 0).then(|| Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

/// The watchdog's loop.
fn patrol() {
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let mut slots = SLOTS.lock().unwrap_or_else(PoisonError::into_inner);
        for (_, s) in slots.iter_mut() {
            // SAFETY: the slot's thread is alive while its slot is listed
            // (it removes it under this lock before it ends).
            // Acquire: pairs with the thread's Release increments.
            let count = unsafe { &*s.run }.load(Ordering::Acquire);
            let Some(now) = cpu_time(s.clock) else { continue };
            if count % 2 == 0 || count != s.seen {
                s.seen = count;
                s.since = now;
                continue;
            }
            if now.saturating_sub(s.since) > STEP_BUDGET {
                // SAFETY: the thread is alive (see above).
                unsafe { libc::pthread_kill(s.thread, watchdog_signal()) };
            }
        }
    }
}
