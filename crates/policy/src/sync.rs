//! The atomics facade: every piece of shared policy state uses these types.
//!
//! Today they are `core`'s atomics. The checker swaps this one module for a
//! model-checking crate's atomics (under a cfg) so that it can preempt policy
//! code at every shared-memory operation without a second copy of any algorithm.
//!
//! [`SpinLock`] stands for the kernel spin locks the policies take (FreeBSD's
//! `mtx_lock_spin`, Linux's `raw_spin_lock_irqsave`).

pub use core::sync::atomic::{fence, AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};

use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};

/// A test-and-set spin lock protecting `T`.
pub struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: access to `value` is serialised by `locked` (acquire on lock, release
// on unlock), so sharing the lock between threads shares `T` as a Mutex would.
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: the lock owns its `T`.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T> SpinLock<T> {
    /// Returns an unlocked lock holding `value`.
    pub const fn new(value: T) -> Self {
        SpinLock { locked: AtomicBool::new(false), value: UnsafeCell::new(value) }
    }

    /// Spins until the lock is taken and returns a guard that releases it on drop.
    pub fn lock(&self) -> SpinGuard<'_, T> {
        // Acquire: everything the previous holder wrote before its release is visible.
        while self.locked.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            core::hint::spin_loop();
        }
        SpinGuard { lock: self }
    }
}

/// Exclusive access to a [`SpinLock`]'s value; unlocks on drop.
pub struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while `locked` is held by this thread.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        // Release: our writes to the value happen-before the next holder's acquire.
        self.lock.locked.store(false, Ordering::Release);
    }
}
