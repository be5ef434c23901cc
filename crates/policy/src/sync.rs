//! The atomics facade: every piece of shared policy state uses these types.
//!
//! The atomics here are `core`'s, wrapped so that a model checker can watch and
//! steer every shared-memory operation of the *same* policy code the simulator
//! runs: before each load, store, read-modify-write and fence the wrapper asks
//! whether [`check`] hooks are installed and, if so, lets them perform the
//! operation (preempting the caller first, keeping a store in a store buffer,
//! forwarding a buffered value to a load). Without hooks — the simulator, a
//! kernel — each method is the `core` operation plus one relaxed load of a
//! pointer that is null.
//!
//! Why hooks rather than swapping this module for a model-checking crate's
//! atomics under a cfg: Cargo unifies features across one build, so a binary
//! holding both the simulator and the checker would run the simulator on the
//! checker's atomics too. A runtime hook keeps one copy of every algorithm and
//! one build.
//!
//! [`SpinLock`] stands for the kernel spin locks the policies take (FreeBSD's
//! `mtx_lock_spin`, Linux's `raw_spin_lock_irqsave`). Its word says only
//! whether it is held: the data it protects is either facade atomics, which a
//! checker sees through its hooks, or plain data a policy feeds to a checker's
//! state hash ([`crate::Policy::hash_locked`]); a count of acquisitions in the
//! word would only tell apart schedules that reach the same state.

pub use core::sync::atomic::Ordering;

use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
use core::sync::atomic as core_atomic;

pub mod check {
    //! The interface a model checker installs to run policy code under its control.
    //!
    //! Every operation of a facade atomic becomes a call of one of these hooks
    //! with the atomic's address, its width, the ordering the policy asked for,
    //! and a closure that performs the operation on memory. The hooks decide
    //! when (after preempting the caller) and whether (a store may wait in a
    //! store buffer) that closure runs, and report what was read and written.
    use super::Ordering;
    use core::sync::atomic::{AtomicPtr, Ordering as O};

    /// The size of an atomic, which [`write_raw`] needs to store into it later.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum Width {
        /// `AtomicBool`, `AtomicU8` (a bool as 0 or 1).
        W8,
        /// `AtomicU16`.
        W16,
        /// `AtomicU32`, `AtomicI32` (value as its 32 bits).
        W32,
        /// `AtomicU64`.
        W64,
    }

    /// Performs a read-modify-write on memory and returns `(old, new)`.
    pub type RmwOp<'a> = &'a mut dyn FnMut() -> (u64, u64);

    /// The functions a checker provides. Values travel as `u64` (a bool as 0 or
    /// 1, an `i32` as its 32 bits zero-extended).
    pub struct Hooks {
        /// A load at `addr`: returns the value the calling CPU sees; `read`
        /// performs the load on memory.
        pub load: fn(addr: usize, width: Width, ord: Ordering, read: &dyn Fn() -> u64) -> u64,
        /// A store of `value` at `addr`: `write` performs it on memory, now or
        /// (from a store buffer, through [`write_raw`]) never.
        pub store: fn(addr: usize, width: Width, ord: Ordering, value: u64, write: &dyn Fn(u64)),
        /// A read-modify-write at `addr`: `op` performs it atomically on memory and
        /// returns `(old, new)` (`new` equals `old` for a failed compare-exchange).
        /// Returns `old`.
        pub rmw: fn(addr: usize, width: Width, ord: Ordering, op: RmwOp<'_>) -> u64,
        /// A fence.
        pub fence: fn(ord: Ordering),
        /// One iteration of a spin loop that waits for another CPU's store.
        pub spin: fn(),
        /// The [`super::SpinLock`] whose word is at `word` was taken (`true`:
        /// interrupts are off on this CPU until the matching release) or
        /// released (`false`).
        pub lock: fn(word: usize, taken: bool),
        /// Policy state that lives outside the allocator (a compiled C file's
        /// globals, [`adopt_region`]) asks to become the start of the calling
        /// thread's memory for executions: `len` bytes from `base`, the first
        /// `prefix` of them the state. Returns whether the thread runs under
        /// the checker (and the region is now its own).
        pub region: fn(base: usize, len: usize, prefix: usize) -> bool,
        /// Runs the function with the calling thread's allocations going to
        /// the system allocator, not to the checker's memory for executions
        /// (what it allocates outlives every execution).
        pub outside: fn(f: &mut dyn FnMut()),
    }

    static HOOKS: AtomicPtr<Hooks> = AtomicPtr::new(core::ptr::null_mut());

    /// Installs `hooks` for every later operation in the process. A checker
    /// installs them once; its hooks must perform the plain operation on
    /// threads that are not running under it.
    pub fn install(hooks: &'static Hooks) {
        let p = core::ptr::from_ref(hooks).cast_mut();
        // Stored only when it changes: every hook reads this word, and a
        // checker installs its hooks before each execution, so a store each
        // time would take the word's line from every other worker's cache
        // at each of its executions.
        if HOOKS.load(O::Relaxed) != p {
            // Release: a thread that sees the pointer sees the table it points to.
            HOOKS.store(p, O::Release);
        }
    }

    /// Returns the installed hooks, if any.
    #[inline]
    pub(crate) fn hooks() -> Option<&'static Hooks> {
        // Acquire: pairs with `install`.
        let p = HOOKS.load(O::Acquire);
        // SAFETY: the pointer is null or came from a `&'static Hooks`.
        unsafe { p.as_ref() }
    }

    /// Asks a checker, if one runs this thread, to make `len` bytes from
    /// `base` the memory its executions on this thread allocate from, the
    /// first `prefix` bytes being policy state kept outside the allocator: a
    /// compiled C file's globals, which then are saved, restored and hashed
    /// as the checker does a Rust policy's. Call it first thing when building
    /// the policy, before anything else is allocated. Returns whether a
    /// checker took the region (false in the simulator, a kernel, or a
    /// thread the checker does not run).
    pub fn adopt_region(base: usize, len: usize, prefix: usize) -> bool {
        hooks().is_some_and(|h| (h.region)(base, len, prefix))
    }

    /// Runs `f` so that what it allocates outlives the checker's executions
    /// on this thread (loading a compiled policy while building one).
    pub fn outside_executions(f: &mut dyn FnMut()) {
        match hooks() {
            Some(h) => (h.outside)(f),
            None => f(),
        }
    }

    /// Stores `value` into the facade atomic of `width` at `addr` (a store
    /// buffer draining into memory).
    ///
    /// # Safety
    /// `addr` must be the address of a live facade atomic of that width.
    pub unsafe fn write_raw(addr: usize, width: Width, value: u64) {
        // SAFETY: the caller guarantees a live atomic of this width at `addr`;
        // every facade atomic is `repr(transparent)` over `core`'s.
        unsafe {
            match width {
                Width::W8 => (*(addr as *const core::sync::atomic::AtomicU8)).store(value as u8, O::SeqCst),
                Width::W16 => (*(addr as *const core::sync::atomic::AtomicU16)).store(value as u16, O::SeqCst),
                Width::W32 => (*(addr as *const core::sync::atomic::AtomicU32)).store(value as u32, O::SeqCst),
                Width::W64 => (*(addr as *const core::sync::atomic::AtomicU64)).store(value, O::SeqCst),
            }
        }
    }
}

use check::{hooks, Width};

/// The ordering a memory operation on the checker's side of a hook uses: the
/// checker runs one CPU at a time, so any ordering is as good as sequential.
const SC: Ordering = Ordering::SeqCst;

/// An atomic fence (`core::sync::atomic::fence`).
#[inline]
pub fn fence(ord: Ordering) {
    if let Some(h) = hooks() {
        return (h.fence)(ord);
    }
    core_atomic::fence(ord);
}

/// One iteration of a loop that waits for another CPU to store something
/// (`core::hint::spin_loop`; a checker stops scheduling the caller until some
/// other CPU has stored).
#[inline]
pub fn spin_loop() {
    if let Some(h) = hooks() {
        return (h.spin)();
    }
    core::hint::spin_loop();
}

/// Defines a facade atomic over `core`'s of the same name. `$to`/`$from`
/// convert a value to and from the `u64` the hooks carry.
macro_rules! facade_atomic {
    ($(#[$doc:meta])* $name:ident, $t:ty, $width:expr, $to:expr, $from:expr) => {
        $(#[$doc])*
        #[repr(transparent)]
        #[derive(Default)]
        pub struct $name(core_atomic::$name);

        impl $name {
            /// Returns a new atomic holding `v`.
            pub const fn new(v: $t) -> Self {
                $name(core_atomic::$name::new(v))
            }

            /// Returns a pointer to the value (for addresses only: [`Hw::shared`](crate::Hw::shared)).
            pub const fn as_ptr(&self) -> *mut $t {
                self.0.as_ptr()
            }

            fn addr(&self) -> usize {
                core::ptr::from_ref(self) as usize
            }

            /// Reads the value as memory holds it, unseen by a checker: for
            /// assertions and observers only, never for the algorithm. A
            /// checked `load` in a `debug_assert!` would be a step of its own
            /// in debug builds only, so debug and release checks would explore
            /// different schedules (and print different replay tokens).
            #[inline]
            pub fn peek(&self) -> $t {
                self.0.load(SC)
            }

            /// Loads the value.
            #[inline]
            pub fn load(&self, ord: Ordering) -> $t {
                match hooks() {
                    None => self.0.load(ord),
                    Some(h) => $from((h.load)(self.addr(), $width, ord, &|| $to(self.0.load(SC)))),
                }
            }

            /// Stores `v`.
            #[inline]
            pub fn store(&self, v: $t, ord: Ordering) {
                match hooks() {
                    None => self.0.store(v, ord),
                    Some(h) => (h.store)(self.addr(), $width, ord, $to(v), &|x| self.0.store($from(x), SC)),
                }
            }

            /// Stores `v` and returns the previous value.
            #[inline]
            pub fn swap(&self, v: $t, ord: Ordering) -> $t {
                self.rmw(ord, |_| Some(v))
            }

            /// Stores `new` if the value is `current`; returns the previous value,
            /// `Ok` if it was `current`.
            #[inline]
            pub fn compare_exchange(&self, current: $t, new: $t, success: Ordering, failure: Ordering) -> Result<$t, $t> {
                if hooks().is_none() {
                    return self.0.compare_exchange(current, new, success, failure);
                }
                let old = self.rmw(success, |x| (x == current).then_some(new));
                if old == current {
                    Ok(old)
                } else {
                    Err(old)
                }
            }

            /// As [`Self::compare_exchange`]; may fail spuriously without hooks.
            #[inline]
            pub fn compare_exchange_weak(&self, current: $t, new: $t, success: Ordering, failure: Ordering) -> Result<$t, $t> {
                if hooks().is_none() {
                    return self.0.compare_exchange_weak(current, new, success, failure);
                }
                self.compare_exchange(current, new, success, failure)
            }

            /// Applies `f` atomically (the value is stored when `f` returns `Some`)
            /// and returns the previous value.
            #[inline]
            fn rmw(&self, ord: Ordering, f: impl Fn($t) -> Option<$t>) -> $t {
                let Some(h) = hooks() else {
                    let mut old = self.0.load(ord);
                    loop {
                        let Some(new) = f(old) else { return old };
                        match self.0.compare_exchange_weak(old, new, ord, Ordering::Relaxed) {
                            Ok(_) => return old,
                            Err(x) => old = x,
                        }
                    }
                };
                let mut op = || {
                    let old = self.0.load(SC);
                    let new = f(old).unwrap_or(old);
                    self.0.store(new, SC);
                    ($to(old), $to(new))
                };
                $from((h.rmw)(self.addr(), $width, ord, &mut op))
            }
        }

        impl crate::fields::Named for $name {
            fn name_to(&self, f: &mut dyn crate::fields::Fields, name: core::fmt::Arguments<'_>, value: crate::fields::Value) {
                f.field(self.addr(), name, value);
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                core::fmt::Debug::fmt(&self.0, f)
            }
        }
    };
}

/// Defines the integer arithmetic of a facade atomic.
macro_rules! facade_integer {
    ($name:ident, $t:ty) => {
        impl $name {
            /// Adds `v` (wrapping) and returns the previous value.
            #[inline]
            pub fn fetch_add(&self, v: $t, ord: Ordering) -> $t {
                if hooks().is_none() {
                    return self.0.fetch_add(v, ord);
                }
                self.rmw(ord, |x| Some(x.wrapping_add(v)))
            }

            /// Subtracts `v` (wrapping) and returns the previous value.
            #[inline]
            pub fn fetch_sub(&self, v: $t, ord: Ordering) -> $t {
                if hooks().is_none() {
                    return self.0.fetch_sub(v, ord);
                }
                self.rmw(ord, |x| Some(x.wrapping_sub(v)))
            }

            /// ORs `v` in and returns the previous value.
            #[inline]
            pub fn fetch_or(&self, v: $t, ord: Ordering) -> $t {
                if hooks().is_none() {
                    return self.0.fetch_or(v, ord);
                }
                self.rmw(ord, |x| Some(x | v))
            }

            /// ANDs `v` in and returns the previous value.
            #[inline]
            pub fn fetch_and(&self, v: $t, ord: Ordering) -> $t {
                if hooks().is_none() {
                    return self.0.fetch_and(v, ord);
                }
                self.rmw(ord, |x| Some(x & v))
            }
        }
    };
}

facade_atomic!(
    /// `core::sync::atomic::AtomicBool` behind the facade.
    AtomicBool, bool, Width::W8, |v: bool| v as u64, |x: u64| x != 0
);
facade_atomic!(
    /// `core::sync::atomic::AtomicU8` behind the facade (a compiled C file's
    /// byte-wide marked accesses).
    AtomicU8, u8, Width::W8, |v: u8| v as u64, |x: u64| x as u8
);
facade_atomic!(
    /// `core::sync::atomic::AtomicU16` behind the facade (a compiled C file's
    /// 16-bit marked accesses).
    AtomicU16, u16, Width::W16, |v: u16| v as u64, |x: u64| x as u16
);
facade_atomic!(
    /// `core::sync::atomic::AtomicU32` behind the facade.
    AtomicU32, u32, Width::W32, |v: u32| v as u64, |x: u64| x as u32
);
facade_atomic!(
    /// `core::sync::atomic::AtomicI32` behind the facade.
    AtomicI32, i32, Width::W32, |v: i32| v as u32 as u64, |x: u64| x as u32 as i32
);
facade_atomic!(
    /// `core::sync::atomic::AtomicU64` behind the facade.
    AtomicU64, u64, Width::W64, |v: u64| v, |x: u64| x
);
facade_integer!(AtomicU32, u32);
facade_integer!(AtomicI32, i32);
facade_integer!(AtomicU64, u64);

/// A test-and-set spin lock protecting `T`. Interrupts are off on the CPU that
/// holds it, as with the kernels' spin locks (`mtx_lock_spin`,
/// `raw_spin_lock_irqsave`); a checker learns of that through [`check::Hooks::lock`].
///
/// The lock word is 1 while the lock is held and 0 while it is free: taking
/// the lock is a compare-and-exchange from 0 to 1, releasing it a store of 0.
/// (It once counted acquisitions, which split a checker's states by how often
/// a lock had been taken, where nothing later depends on it.)
///
/// Taking it tries the compare-and-exchange first, as both kernels' fast
/// paths do (Linux's `queued_spin_lock` in `include/asm-generic/qspinlock.h`,
/// FreeBSD's `__mtx_lock_spin` in `sys/sys/mutex.h`); only when that fails
/// does it read the word until it reads free, spinning between reads, and try
/// again, as their slow paths wait for a release (FreeBSD's
/// `_mtx_lock_spin_cookie` spins before its first read, where this reads
/// first, which costs a contended acquisition one more step in a checker;
/// Linux's queue of waiters is not modelled: a waiter here is any CPU that
/// tries after the release). An uncontended acquisition is one shared access,
/// so a checker interleaves other CPUs before and after it, not between a
/// load and the exchange (it once loaded the word first, a step of its own).
pub struct SpinLock<T> {
    word: AtomicU64,
    value: UnsafeCell<T>,
}

// SAFETY: access to `value` is serialised by `word` (acquire on lock, release
// on unlock), so sharing the lock between threads shares `T` as a Mutex would.
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: the lock owns its `T`.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T> SpinLock<T> {
    /// Returns the value without taking the lock, for a checker that hashes
    /// the state between steps ([`crate::Policy::hash_locked`]), when a holder
    /// may be paused inside its critical section.
    ///
    /// # Safety
    /// No thread may write the value while the reference lives: only a
    /// checker that runs one CPU at a time may call it, between steps.
    pub unsafe fn peek(&self) -> &T {
        // SAFETY: per the contract, nothing writes the value meanwhile.
        unsafe { &*self.value.get() }
    }

    /// Returns an unlocked lock holding `value`.
    pub const fn new(value: T) -> Self {
        SpinLock { word: AtomicU64::new(0), value: UnsafeCell::new(value) }
    }

    /// Spins until the lock is taken and returns a guard that releases it on drop.
    pub fn lock(&self) -> SpinGuard<'_, T> {
        raw_spin_lock(&self.word);
        SpinGuard { lock: self, _not_sync: core::marker::PhantomData }
    }
}

impl<T> SpinLock<T> {
    /// Names the facade atomics inside the lock's value (`inner` visits them) for
    /// a checker's traces, and declares each [`crate::fields::Owner::Lock`] of
    /// this lock (only its holder touches them: the value is reachable only
    /// through a guard); the lock word itself is named with
    /// [`crate::fields::Named`].
    ///
    /// Takes the lock without the hooks, so that naming leaves every value the
    /// checker sees unchanged; names nothing inside if the lock is held.
    pub fn name_inner(
        &self,
        f: &mut dyn crate::fields::Fields,
        inner: impl FnOnce(&T, &mut dyn crate::fields::Fields),
    ) {
        // Acquire: as `lock`.
        if self.word.0.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_err() {
            return;
        }
        // SAFETY: the lock is held until the store below.
        inner(unsafe { &*self.value.get() }, &mut crate::fields::UnderLock { f, lock: self.word.addr() });
        // Release: as an unlock.
        self.word.0.store(0, Ordering::Release);
    }
}

impl<T> crate::fields::Named for SpinLock<T> {
    fn name_to(&self, f: &mut dyn crate::fields::Fields, name: core::fmt::Arguments<'_>, _value: crate::fields::Value) {
        f.field(self.word.addr(), name, crate::fields::Value::Lock);
    }
}

/// Exclusive access to a [`SpinLock`]'s value; unlocks on drop.
///
/// A guard is `Sync` only where `T` is: threads that share a guard share its
/// `&T` (it once was `Sync` for any `T: Send`, so two threads could use one
/// `Cell` through it at once).
///
/// ```compile_fail
/// fn shared<T: Sync>() {}
/// shared::<tlbkit_policy::sync::SpinGuard<'static, core::cell::Cell<u64>>>();
/// ```
pub struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
    /// Keeps the guard from being `Sync` on its own account (it would be for
    /// any `T: Send`, through `&SpinLock<T>`): it is `Sync` only as `&T` is,
    /// below, as `std`'s `MutexGuard` is.
    _not_sync: core::marker::PhantomData<core::cell::Cell<()>>,
}

// SAFETY: a shared guard gives out only `&T` (`deref`), and `&mut T` only
// through `&mut` to the guard itself; so threads sharing one guard share `&T`,
// which `T: Sync` makes safe.
unsafe impl<T: Sync> Sync for SpinGuard<'_, T> {}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while its lock is held (taken in
        // `lock`, released in `drop`), so no other guard of the lock exists
        // and nothing else writes the value; the `&T` lives no longer than
        // `&self`, and reaches another thread only where `T: Sync` (above).
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
        raw_spin_unlock(&self.lock.word);
    }
}

/// Spins until the spin lock whose word is `word` is taken, as
/// [`SpinLock::lock`] does (a word of 0 is free, 1 held), with interrupts off
/// until [`raw_spin_unlock`]: for locks that are not a [`SpinLock`]'s, such as
/// a compiled C file's `raw_spinlock_t`.
pub fn raw_spin_lock(word: &AtomicU64) {
    loop {
        // Acquire: everything the previous holder wrote before its release is visible.
        if word.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_ok() {
            if let Some(h) = hooks() {
                (h.lock)(word.addr(), true);
            }
            return;
        }
        // Relaxed: only the exchange above orders anything.
        while word.load(Ordering::Relaxed) != 0 {
            spin_loop();
        }
    }
}

/// Releases the spin lock whose word is `word`, taken by [`raw_spin_lock`].
pub fn raw_spin_unlock(word: &AtomicU64) {
    // Release: our writes to what it protects happen-before the next holder's acquire.
    word.store(0, Ordering::Release);
    if let Some(h) = hooks() {
        (h.lock)(word.addr(), false);
    }
}
