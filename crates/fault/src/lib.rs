//! Faults and runaway loops of policy code, caught and turned into findings.
//!
//! A kernel developer runs tlbkit on a patch because the patch may be wrong.
//! A wrong patch may fault — a NULL or wild pointer, a division by zero, a
//! trap instruction, a stack overflow — or loop forever without calling into
//! the machine. Either must be a result the tool reports, with where it
//! happened and how to replay it, never the tool's own death or hang.
//!
//! # How
//! Policy code runs on a coroutine stack: the checker runs every CPU as a
//! coroutine, and the simulator runs each call into a compiled C file on one
//! ([`call`]). While a coroutine runs, its thread names it ([`guarded`]).
//! A synchronous fault (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP) taken on
//! that stack is caught by this crate's handler, which rewrites the
//! interrupted context (corosensei's trap support) so that, when the handler
//! returns, the coroutine abandons its stack and panics with a [`Fault`] as
//! the payload. The panic reaches the coroutine's parent, which reports it:
//! the checker as a violation of the schedule it ran (with its replay token),
//! the simulator as one line and exit code 3. Nothing on the abandoned stack
//! is dropped: the checker treats it as it treats any execution it cuts short
//! (its memory is the execution's arena), the simulator stops.
//!
//! A loop is caught by a watchdog thread. Each guarded run counts up a
//! per-thread sequence number as it starts and ends; the watchdog reads the
//! thread's CPU clock, and when one run has used more than [`STEP_BUDGET`] of
//! CPU time it sends the thread [`watchdog_signal`]. The handler turns that
//! into a [`Fault`] of kind [`Kind::Spin`] only where the interrupted code is
//! the policy's: never inside the C library, the dynamic loader or any object
//! loaded before [`install`] other than tlbkit's own (a lock of theirs may be
//! held); there the signal is ignored and the watchdog sends it again.
//!
//! A fault outside a guarded coroutine, or in a system library, is not ours:
//! the handler passes it to the handler that was installed before (Rust's
//! stack-overflow report, or the default action), so the tool's own bugs
//! still crash loudly.
//!
//! # What is not caught
//! `abort()` (SIGABRT) and `exit()` called by Rust policy code (a C policy is
//! linked without the C library and cannot call them); a fault inside the C
//! library (see above); a loop that holds a lock tlbkit's own code needs
//! after the fault (policy code takes none of tlbkit's locks).

use corosensei::trap::CoroutineTrapHandler;
use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Once;
use std::time::Duration;

mod describe;
mod watchdog;

pub use describe::name_code;

/// The CPU time one guarded run (one step of the checker, one call of the
/// simulator into C) may take before it is reported as looping. A step of
/// the checker takes microseconds; two seconds of CPU is far beyond any
/// legitimate one, and short enough that a loop is found in seconds.
pub const STEP_BUDGET: Duration = Duration::from_secs(2);

/// What went wrong in policy code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A synchronous signal: its number, its `si_code`, and the faulting
    /// address (`si_addr`; for SIGFPE and SIGILL, the instruction's).
    Signal { signal: i32, code: i32, addr: usize, write: Option<bool>, overflow: bool },
    /// One run took more than [`STEP_BUDGET`] of CPU time.
    Spin,
}

/// A fault of policy code: what and where (the instruction's address).
///
/// It is the payload of the panic a trapped coroutine raises; [`Fault::of`]
/// takes it back out of a caught panic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// What happened.
    pub kind: Kind,
    /// The address of the instruction that faulted or was spinning.
    pub pc: usize,
}

impl Fault {
    /// Returns the fault a caught panic carries, if it is one.
    pub fn of(payload: &(dyn std::any::Any + Send)) -> Option<Fault> {
        payload.downcast_ref::<Fault>().copied()
    }

    /// Returns the name of the property the fault violates: `no_livelock`
    /// for a loop, `no_kernel_bug` for a fault (the kernel would oops).
    pub fn property(&self) -> &'static str {
        match self.kind {
            Kind::Spin => "no_livelock",
            Kind::Signal { .. } => "no_kernel_bug",
        }
    }

    /// Returns where the fault happened: the function and, where the
    /// system's `addr2line` can tell from the object's debug information,
    /// the file and line (`flush_context, context.c:141`).
    pub fn site(&self) -> String {
        describe::site(self.pc, matches!(self.kind, Kind::Signal { .. }))
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let site = self.site();
        match self.kind {
            Kind::Spin => write!(
                f,
                "the policy code ran for more than {} s of CPU time without reaching the machine (a loop that never \
                 ends?), at {site}",
                STEP_BUDGET.as_secs()
            ),
            Kind::Signal { signal, code, addr, write, overflow } => {
                let what = match signal {
                    libc::SIGSEGV | libc::SIGBUS if overflow => "overflowed its stack".to_string(),
                    libc::SIGSEGV | libc::SIGBUS => {
                        let access = match write {
                            Some(true) => "a write to",
                            Some(false) => "a read of",
                            None => "an access to",
                        };
                        let name = if signal == libc::SIGBUS { "SIGBUS" } else { "SIGSEGV" };
                        format!("faulted ({name}): {access} address {addr:#x}")
                    }
                    libc::SIGFPE if code == FPE_INTDIV => "divided by zero (SIGFPE)".to_string(),
                    libc::SIGFPE => "raised an arithmetic exception (SIGFPE)".to_string(),
                    libc::SIGILL => "ran an illegal or trapping instruction (SIGILL: __builtin_trap, BUG?)".to_string(),
                    libc::SIGTRAP => "hit a breakpoint (SIGTRAP)".to_string(),
                    other => format!("took signal {other}"),
                };
                write!(f, "the policy code {what} at {site}")
            }
        }
    }
}

/// `si_code` of an integer division by zero (Linux's `FPE_INTDIV`).
const FPE_INTDIV: i32 = 1;

/// The signals taken as faults of policy code.
const FAULTS: [i32; 5] = [libc::SIGSEGV, libc::SIGBUS, libc::SIGFPE, libc::SIGILL, libc::SIGTRAP];

/// Returns the signal the watchdog sends a thread whose run is over its
/// budget: a real-time signal nothing else in tlbkit uses.
pub fn watchdog_signal() -> i32 {
    libc::SIGRTMAX() - 2
}

/// The handlers that were installed before ours, readable from the handler
/// without a lock: for each of [`FAULTS`], its `sa_sigaction` and `sa_flags`.
static PREV_ACTION: [AtomicUsize; 5] = [const { AtomicUsize::new(0) }; 5];
static PREV_FLAGS: [AtomicUsize; 5] = [const { AtomicUsize::new(0) }; 5];

/// The executable ranges of the system's libraries loaded at [`install`]
/// ([`SYSTEM_LIBRARIES`]): `[start, end)` pairs, 0 past the last. Code there
/// may hold a lock of its own (the allocator's, the loader's, the
/// unwinder's), so neither a loop nor a fault is cut there.
static SYSTEM: [AtomicUsize; 2 * MAX_SYSTEM] = [const { AtomicUsize::new(0) }; 2 * MAX_SYSTEM];
const MAX_SYSTEM: usize = 64;
/// The libraries whose code holds locks tlbkit's own code needs: the C
/// library and its parts, the loader, the unwinder, C++'s runtime, Python.
const SYSTEM_LIBRARIES: [&[u8]; 11] = [
    b"libc.so",
    b"libc-",
    b"ld-linux",
    b"ld64.so",
    b"libgcc_s",
    b"libpthread",
    b"libm.so",
    b"libdl",
    b"librt",
    b"libstdc++",
    b"libpython",
];

thread_local! {
    /// The coroutine this thread is running policy code on, if any.
    static CURRENT: Cell<Option<CoroutineTrapHandler<()>>> = const { Cell::new(None) };
    /// Counts up when a guarded run starts and when it ends (odd: running).
    static RUN: AtomicU64 = const { AtomicU64::new(0) };
}

/// Installs the handlers (once per process; later calls return at once).
/// Call it before running policy code, outside any arena (it allocates).
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        record_system_code();
        let previous_hook = std::panic::take_hook();
        // A fault is a finding its catcher reports: the panic it travels
        // as prints nothing.
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<Fault>().is_none() {
                previous_hook(info);
            }
        }));
        for (i, &sig) in FAULTS.iter().enumerate() {
            // SAFETY: a zeroed sigaction is a valid value to be filled in.
            let mut new: libc::sigaction = unsafe { std::mem::zeroed() };
            new.sa_sigaction = handler as *const () as usize;
            new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_NODEFER;
            // SAFETY: a zeroed sigaction for the kernel to fill.
            let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: valid pointers to sigactions; `handler` has the
            // SA_SIGINFO signature.
            unsafe {
                libc::sigemptyset(&mut new.sa_mask);
                libc::sigaction(sig, &new, &mut old);
            }
            PREV_ACTION[i].store(old.sa_sigaction, Ordering::Relaxed);
            PREV_FLAGS[i].store(old.sa_flags as usize, Ordering::Relaxed);
        }
        // SAFETY: as above.
        let mut new: libc::sigaction = unsafe { std::mem::zeroed() };
        new.sa_sigaction = handler as *const () as usize;
        new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
        // SAFETY: as above.
        unsafe {
            libc::sigemptyset(&mut new.sa_mask);
            libc::sigaction(watchdog_signal(), &new, std::ptr::null_mut());
        }
    });
}

/// Records the executable ranges of every object loaded now but tlbkit's own.
fn record_system_code() {
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _size: usize, data: *mut libc::c_void) -> libc::c_int {
        // SAFETY: the loader passes a valid info for the call's duration;
        // `data` is the `(own address, next slot)` pair `record_system_code` passes.
        let (info, state) = unsafe { (&*info, &mut *data.cast::<(usize, usize)>()) };
        let base = info.dlpi_addr as usize;
        let phdrs = if info.dlpi_phdr.is_null() {
            &[][..]
        } else {
            // SAFETY: the loader's program headers of this object, `dlpi_phnum` of them.
            unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) }
        };
        let exec = |p: &&libc::Elf64_Phdr| p.p_type == libc::PT_LOAD && p.p_flags & libc::PF_X != 0;
        let ranges: Vec<(usize, usize)> = phdrs
            .iter()
            .filter(exec)
            .map(|p| (base + p.p_vaddr as usize, base + (p.p_vaddr + p.p_memsz) as usize))
            .collect();
        if ranges.iter().any(|&(s, e)| state.0 >= s && state.0 < e) {
            return 0; // tlbkit's own code (the executable, or the Python extension)
        }
        let name = if info.dlpi_name.is_null() {
            &[][..]
        } else {
            // SAFETY: the loader's NUL-terminated name of the object.
            unsafe { std::ffi::CStr::from_ptr(info.dlpi_name) }.to_bytes()
        };
        let file = name.rsplit(|&b| b == b'/').next().unwrap_or(name);
        if !SYSTEM_LIBRARIES.iter().any(|l| file.starts_with(l)) {
            return 0;
        }
        for (s, e) in ranges {
            if state.1 < MAX_SYSTEM {
                SYSTEM[2 * state.1].store(s, Ordering::Relaxed);
                SYSTEM[2 * state.1 + 1].store(e, Ordering::Relaxed);
                state.1 += 1;
            }
        }
        0
    }
    let mut state: (usize, usize) = (record_system_code as *const () as usize, 0);
    // SAFETY: `each` has the callback's signature and only reads what the
    // loader passes; `state` outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(each), std::ptr::from_mut(&mut state).cast()) };
}

/// Returns whether `pc` lies in code of an object loaded before [`install`]
/// that is not tlbkit's own.
fn in_system_code(pc: usize) -> bool {
    (0..MAX_SYSTEM).any(|i| {
        let s = SYSTEM[2 * i].load(Ordering::Relaxed);
        s != 0 && pc >= s && pc < SYSTEM[2 * i + 1].load(Ordering::Relaxed)
    })
}

/// Counts a guarded run's start or end in the thread's [`RUN`]. Only its
/// own thread writes the count (the watchdog only reads it), so a load and a
/// store do what a locked read-modify-write would, without its full barrier
/// at every step of every execution. Release: the watchdog that reads the
/// new count (Acquire) sees the run started or ended.
fn count_run() {
    RUN.with(|r| r.store(r.load(Ordering::Relaxed).wrapping_add(1), Ordering::Release));
}

/// Runs `f` — which resumes the coroutine `trap` was taken from — with
/// faults and runaway loops on that coroutine's stack caught: they make the
/// coroutine panic with a [`Fault`] (see the crate's documentation). The
/// calling thread must have called [`watch_this_thread`] for loops to be
/// caught; faults are caught regardless, once [`install`] ran.
///
/// `fiber` names the coroutine among this thread's (the checker's CPU
/// number), for ThreadSanitizer's fibers where tlbkit is built with it
/// (the `tsan` feature): `f` runs on that fiber. A coroutine that ended or
/// was abandoned is told with [`forget_fiber`], one put back to an earlier
/// state with [`rewind_fiber`], before that name runs another.
pub fn guarded<T>(fiber: usize, trap: CoroutineTrapHandler<()>, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<CoroutineTrapHandler<()>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.with(|c| c.set(self.0));
            count_run();
        }
    }
    let _restore = Restore(CURRENT.with(|c| c.replace(Some(trap))));
    count_run();
    // Both switches are made here, in this frame, and `f` returns between
    // them even when it panics: no instrumented frame is entered on one
    // fiber and left on the other (see the `tsan` module).
    let (to, back) = tsan::fibers(fiber);
    // SAFETY: fibers of this thread's, from `tsan::fibers`.
    unsafe { tsan::switch_to_fiber(to, 0) };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    // SAFETY: as above.
    unsafe { tsan::switch_to_fiber(back, 0) };
    r.unwrap_or_else(|payload| std::panic::resume_unwind(payload))
}

/// Tells the sanitizer support that the coroutine [`guarded`] ran on
/// `fiber` ended, or was abandoned where it stood (its frames never
/// return): the next coroutine of that name runs on a fresh ThreadSanitizer
/// fiber (the `tsan` feature; nothing otherwise).
pub fn forget_fiber(fiber: usize) {
    tsan::forget(fiber);
}

/// Tells the sanitizer support that the coroutine [`guarded`] runs on
/// `fiber` had its stack put back to an earlier state (its frames return
/// again): it goes on on a fresh ThreadSanitizer fiber made for that (the
/// `tsan` feature; nothing otherwise).
pub fn rewind_fiber(fiber: usize) {
    tsan::rewind(fiber);
}

/// Marks `len` bytes from `addr` addressable for AddressSanitizer (the
/// `asan` feature; nothing otherwise): the checker copies a suspended
/// coroutine's stack whole, dead frames and their redzones included, into a
/// checkpoint and back, which is a copy of bytes, not an access to the
/// frames' variables.
pub fn asan_unpoison(addr: usize, len: usize) {
    #[cfg(feature = "asan")]
    {
        extern "C" {
            fn __asan_unpoison_memory_region(addr: *const u8, size: usize);
        }
        // SAFETY: ASan's interface, linked in a build with -Zsanitizer=address;
        // it only changes ASan's shadow of the range.
        unsafe { __asan_unpoison_memory_region(addr as *const u8, len) };
    }
    #[cfg(not(feature = "asan"))]
    let _ = (addr, len);
}

/// ThreadSanitizer's fibers (the `tsan` feature; nothing otherwise): a
/// coroutine's code runs on a fiber of its own, so that TSan keeps its
/// shadow stack and its clock apart from the thread's.
///
/// TSan keeps a fiber's stack as a fixed array of 64 Ki return addresses
/// with a position that every instrumented function's entry moves up and its
/// exit moves down, unchecked. So every instrumented frame must be entered
/// and left on the same fiber: [`guarded`] switches in its own frame, never
/// in a helper's (a helper entered on the thread's fiber and left on the
/// coroutine's put the coroutine's position one below its array, and the
/// next entry wrote there: ThreadSanitizer's SEGV, or a silent write into
/// the mapping below). A coroutine's own frames stay on its fiber across its
/// pauses, but some never leave it: corosensei's start function never
/// returns (one entry per coroutine), nor do the frames of a coroutine
/// abandoned or trapped. So a fiber lives as long as its coroutine
/// (`forget`). The frames of a coroutine put back to a checkpoint leave it
/// again, more often than they entered it: its new fiber starts `PAD`
/// entries up (`rewind`).
mod tsan {
    #[cfg(feature = "tsan")]
    mod on {
        use std::cell::Cell;
        use std::ffi::c_void;

        extern "C" {
            fn __tsan_get_current_fiber() -> *mut c_void;
            fn __tsan_create_fiber(flags: u32) -> *mut c_void;
            fn __tsan_destroy_fiber(fiber: *mut c_void);
            pub(crate) fn __tsan_switch_to_fiber(fiber: *mut c_void, flags: u32);
            fn __tsan_func_entry(pc: *mut c_void);
        }

        /// The most coroutines a thread names (the checker's CPUs, a call's own).
        const FIBERS: usize = 64;

        /// Entries a rewound coroutine's fiber starts with: it returns from
        /// at most the frames its stack holds, and a checker's 256 KiB stack
        /// holds at most 16 Ki of them (16 bytes each at least: a return
        /// address and a frame pointer). A quarter of a fiber's 64 Ki.
        const PAD: usize = 16 << 10;

        /// This thread's fibers, by name (made on first use; destroyed when
        /// forgotten and when the thread ends).
        struct Made([Cell<usize>; FIBERS]);

        impl Drop for Made {
            fn drop(&mut self) {
                for f in &self.0 {
                    if f.get() != 0 {
                        // SAFETY: a fiber this thread made, not the current one
                        // (the thread is ending outside any guarded run).
                        unsafe { __tsan_destroy_fiber(f.replace(0) as *mut c_void) };
                    }
                }
            }
        }

        thread_local! {
            static MADE: Made = const { Made([const { Cell::new(0) }; FIBERS]) };
        }

        /// Returns the fiber named `fiber` and the current one (the same
        /// twice where the thread's fibers are gone: it is ending).
        pub(crate) fn fibers(fiber: usize) -> (*mut c_void, *mut c_void) {
            // SAFETY: TSan's fiber interface, linked in a build with -Zsanitizer=thread.
            let here = unsafe { __tsan_get_current_fiber() };
            let to = MADE
                .try_with(|m| {
                    let slot = &m.0[fiber % FIBERS];
                    if slot.get() == 0 {
                        slot.set(make(0) as usize);
                    }
                    slot.get() as *mut c_void
                })
                .unwrap_or(here);
            (to, here)
        }

        /// Makes a fiber whose stack starts `pad` entries up. They are
        /// pushed on it between two switches made here, so this frame is
        /// entered and left on the current fiber.
        fn make(pad: usize) -> *mut c_void {
            // SAFETY: as above; the fiber is new, and the one switched back
            // to is the current one.
            unsafe {
                let fiber = __tsan_create_fiber(0);
                let here = __tsan_get_current_fiber();
                __tsan_switch_to_fiber(fiber, 0);
                for _ in 0..pad {
                    __tsan_func_entry(make as *const () as *mut c_void);
                }
                __tsan_switch_to_fiber(here, 0);
                fiber
            }
        }

        /// Destroys the fiber named `fiber` unless it is running (a call
        /// within a call: what its abandoned frames leave is bounded by the
        /// fault that abandoned them); returns whether it is gone.
        pub(crate) fn forget(fiber: usize) -> bool {
            MADE.try_with(|m| {
                let slot = &m.0[fiber % FIBERS];
                // SAFETY: as above.
                let here = unsafe { __tsan_get_current_fiber() } as usize;
                if slot.get() == here {
                    return false;
                }
                if slot.get() != 0 {
                    // SAFETY: a fiber this thread made, not the current one.
                    unsafe { __tsan_destroy_fiber(slot.replace(0) as *mut c_void) };
                }
                true
            })
            .unwrap_or(false)
        }

        pub(crate) fn rewind(fiber: usize) {
            if forget(fiber) {
                let _ = MADE.try_with(|m| m.0[fiber % FIBERS].set(make(PAD) as usize));
            }
        }
    }
    #[cfg(feature = "tsan")]
    pub(crate) use on::{__tsan_switch_to_fiber as switch_to_fiber, fibers, forget, rewind};

    /// No fibers: the same calls, doing nothing.
    #[cfg(not(feature = "tsan"))]
    mod off {
        use std::ffi::c_void;

        pub(crate) fn fibers(_fiber: usize) -> (*mut c_void, *mut c_void) {
            (std::ptr::null_mut(), std::ptr::null_mut())
        }

        /// # Safety
        /// None: the signature of the `tsan` build's, which switches fibers.
        #[inline(always)]
        pub(crate) unsafe fn switch_to_fiber(_fiber: *mut c_void, _flags: u32) {}

        pub(crate) fn forget(_fiber: usize) -> bool {
            true
        }

        pub(crate) fn rewind(_fiber: usize) {}
    }
    #[cfg(not(feature = "tsan"))]
    pub(crate) use off::{fibers, forget, rewind, switch_to_fiber};
}

/// Puts the calling thread under the watchdog, for as long as it lives (a
/// second call does nothing). Call it outside any arena: the first call
/// starts the watchdog thread.
pub fn watch_this_thread() {
    watchdog::watch();
}

/// Runs `f` on a coroutine stack of this thread's, with faults and loops
/// caught: `Err` with the fault when `f`'s code faulted or looped (its stack
/// is then abandoned, nothing on it dropped), `f`'s value otherwise. A panic
/// of `f` reaches the caller as a panic.
///
/// For callers that run policy code outside the checker's CPUs (the
/// simulator's C policies, a C file's boot): each call costs a switch of
/// stacks, on a stack kept for the thread's next call. It allocates nothing
/// of Rust's heap once [`install`] and [`watch_this_thread`] have run on
/// the thread (a stack is mapped, not allocated), so the checker may call it
/// inside an execution's arena.
pub fn call<R>(f: impl FnOnce() -> R) -> Result<R, Fault> {
    use corosensei::stack::DefaultStack;
    use corosensei::{Coroutine, CoroutineResult};
    install();
    watch_this_thread();
    let kept = STACK.with(|s| s.borrow_mut().take());
    let stack = kept.map_or_else(|| DefaultStack::new(1 << 20), Ok);
    let stack = stack.unwrap_or_else(|e| panic!("tlbkit could not map a 1 MiB stack for policy code: {e}"));
    let mut out = None;
    let slot = &mut out;
    // SAFETY: the coroutine borrows `f` and `out`, which outlive it: it runs
    // to its end here, or is trapped (which ends it too), before either is
    // dropped; a panic unwinds it to its end as well.
    let mut co: Coroutine<(), (), (), DefaultStack> =
        unsafe { Coroutine::with_stack_unchecked(stack, move |_, ()| *slot = Some(f())) };
    let trap = co.trap_handler();
    // Fiber 63: a call's own, apart from the checker's CPUs.
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| guarded(63, trap, || co.resume(()))));
    let fault = match r {
        Ok(CoroutineResult::Return(())) => None,
        Ok(CoroutineResult::Yield(())) => unreachable!("policy code on a guarded call never yields"),
        Err(payload) => match Fault::of(payload.as_ref()) {
            Some(fault) => Some(fault),
            None => {
                forget_fiber(63);
                keep(co.into_stack());
                std::panic::resume_unwind(payload)
            }
        },
    };
    // The coroutine ended (its start function never returns; a trapped
    // one's frames never did).
    forget_fiber(63);
    keep(co.into_stack());
    match fault {
        Some(fault) => Err(fault),
        None => Ok(out.expect("the call returned")),
    }
}

thread_local! {
    /// The stack of the thread's last [`call`] (a call within a call maps one of its own).
    static STACK: std::cell::RefCell<Option<corosensei::stack::DefaultStack>> = const { std::cell::RefCell::new(None) };
}

/// Keeps `stack` for the thread's next [`call`] (or unmaps it, when one is kept).
fn keep(stack: corosensei::stack::DefaultStack) {
    STACK.with(|s| {
        let mut s = s.borrow_mut();
        if s.is_none() {
            *s = Some(stack);
        }
    });
}

/// Reads the interrupted context's instruction and stack pointers.
///
/// # Safety
/// `ctx` must be the `ucontext_t` the kernel passed to a signal handler.
#[cfg(target_arch = "x86_64")]
unsafe fn registers(ctx: *mut libc::c_void) -> (usize, usize, Option<bool>) {
    // SAFETY: per the contract.
    let uc = unsafe { &*ctx.cast::<libc::ucontext_t>() };
    let g = &uc.uc_mcontext.gregs;
    // The page-fault error code's bit 1: the access was a write.
    let write = Some(g[libc::REG_ERR as usize] & 2 != 0);
    (g[libc::REG_RIP as usize] as usize, g[libc::REG_RSP as usize] as usize, write)
}

/// Points the interrupted context at corosensei's trap trampoline.
///
/// # Safety
/// `ctx` must be the `ucontext_t` the kernel passed to a signal handler.
#[cfg(target_arch = "x86_64")]
unsafe fn redirect(ctx: *mut libc::c_void, r: corosensei::trap::TrapHandlerRegs) {
    // SAFETY: per the contract; the kernel restores these registers on return.
    let uc = unsafe { &mut *ctx.cast::<libc::ucontext_t>() };
    let g = &mut uc.uc_mcontext.gregs;
    g[libc::REG_RIP as usize] = r.rip as i64;
    g[libc::REG_RSP as usize] = r.rsp as i64;
    g[libc::REG_RBP as usize] = r.rbp as i64;
    g[libc::REG_RDI as usize] = r.rdi as i64;
    g[libc::REG_RSI as usize] = r.rsi as i64;
}

/// Reads the interrupted context's instruction and stack pointers.
///
/// # Safety
/// `ctx` must be the `ucontext_t` the kernel passed to a signal handler.
#[cfg(target_arch = "aarch64")]
unsafe fn registers(ctx: *mut libc::c_void) -> (usize, usize, Option<bool>) {
    // SAFETY: per the contract.
    let uc = unsafe { &*ctx.cast::<libc::ucontext_t>() };
    (uc.uc_mcontext.pc as usize, uc.uc_mcontext.sp as usize, None)
}

/// Points the interrupted context at corosensei's trap trampoline.
///
/// # Safety
/// `ctx` must be the `ucontext_t` the kernel passed to a signal handler.
#[cfg(target_arch = "aarch64")]
unsafe fn redirect(ctx: *mut libc::c_void, r: corosensei::trap::TrapHandlerRegs) {
    // SAFETY: per the contract; the kernel restores these registers on return.
    let uc = unsafe { &mut *ctx.cast::<libc::ucontext_t>() };
    let m = &mut uc.uc_mcontext;
    m.pc = r.pc;
    m.sp = r.sp;
    m.regs[0] = r.x0;
    m.regs[1] = r.x1;
    m.regs[29] = r.x29;
    m.regs[30] = r.lr;
}

/// The handler of every fault signal and of the watchdog's.
extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes this handler's context.
    let (pc, sp, write) = unsafe { registers(ctx) };
    let trap = CURRENT.try_with(Cell::get).ok().flatten();
    let ours = trap.filter(|t| t.stack_ptr_in_bounds(sp));
    let watchdog = sig == watchdog_signal();
    if let Some(t) = ours.filter(|_| !in_system_code(pc)) {
        let kind = if watchdog {
            Kind::Spin
        } else {
            // SAFETY: the kernel's siginfo for a synchronous fault.
            let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
            // A fault just below the stack pointer, in the coroutine's
            // stack or its guard page: the stack overflowed.
            let overflow = (sig == libc::SIGSEGV || sig == libc::SIGBUS)
                && t.stack_ptr_in_bounds(addr)
                && addr < sp.saturating_add(4096);
            let write = if sig == libc::SIGSEGV || sig == libc::SIGBUS { write } else { None };
            Kind::Signal { signal: sig, code, addr, write, overflow }
        };
        let fault = Fault { kind, pc };
        // SAFETY: the interrupted stack pointer is the coroutine's (checked
        // above), policy code there touches its own memory (the checker's
        // arena, the simulator's policy state), and the context is redirected
        // as `setup_trap_handler` asks.
        unsafe {
            let regs = t.setup_trap_handler(move || std::panic::panic_any(fault));
            redirect(ctx, regs);
        }
        return;
    }
    if watchdog {
        return; // not in policy code now: the watchdog tries again
    }
    forward(sig, info, ctx);
}

/// Passes a fault that is not policy code's to the handler installed
/// before ours, or takes the default action.
fn forward(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let Some(i) = FAULTS.iter().position(|&s| s == sig) else { return };
    let action = PREV_ACTION[i].load(Ordering::Relaxed);
    let flags = PREV_FLAGS[i].load(Ordering::Relaxed) as libc::c_int;
    if action == libc::SIG_IGN {
        return;
    }
    if action == libc::SIG_DFL {
        // Back to the default action; the faulting instruction runs again
        // on return and the process dies of the signal, as it would have.
        // SAFETY: a zeroed sigaction is SIG_DFL with no flags.
        unsafe {
            let mut dfl: libc::sigaction = std::mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(sig, &dfl, std::ptr::null_mut());
        }
        return;
    }
    if flags & libc::SA_SIGINFO != 0 {
        // SAFETY: a handler installed with SA_SIGINFO has this signature.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(action) };
        f(sig, info, ctx);
    } else {
        // SAFETY: a handler installed without SA_SIGINFO has this signature.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(action) };
        f(sig);
    }
}
