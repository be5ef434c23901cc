//! Traces of real programs: what `tlbkit trace import` makes of valgrind's
//! lackey and strace; the `trace` workload of [`tlbkit_sim`] replays them
//! (the file is [`tlbkit_sim::trace::format`]).
//!
//! # Capture
//!
//! Run the program once under strace and valgrind together, so that both logs
//! come from one run and name the same addresses and pids:
//!
//! ```text
//! strace -f -tt -e trace=%memory,%process -o prog.strace \
//!     valgrind --tool=lackey --trace-mem=yes --trace-syscalls=yes --trace-sched=yes \
//!     --log-file=prog.lackey PROG ARGS
//! tlbkit trace import --lackey prog.lackey --strace prog.strace -o prog.trace
//! ```
//!
//! `--strace` is optional; without it the trace holds the references alone.
//! [`lackey`] and [`strace`] say what the readers accept and refuse.
//!
//! # How the two logs are joined
//!
//! They share no clock, so the import joins them where valgrind's log names
//! the calls: `--trace-syscalls=yes` puts a line where the client made each
//! system call, among its references. The traced process is the one lackey's
//! log is of (its `==PID==`); the strace log must show it (else the logs are of
//! two runs: an error). Each `mmap`, `munmap`, `mprotect`, `madvise`, `mremap`,
//! `clone`/`fork`/`vfork` and `execve` strace shows for it is placed at
//! valgrind's line of the same call: the same thread, kind, and addresses and
//! lengths (a child's id for the calls that create one). A call strace shows
//! and valgrind's log does not is valgrind's own (its heap, its translation
//! cache, loading the client) and is dropped; the import reports how many. A
//! strace log with no valgrind system-call lines to join it at is an error.
//!
//! Processes the traced one forks have no references (lackey's log is of one
//! process): their threads replay their strace calls alone, in strace's order.
//! Under valgrind a forked child runs under valgrind too, so its calls include
//! valgrind's own, which nothing tells apart. Processes that are neither the
//! traced one nor its descendants (a shell strace started it from) are dropped.
//!
//! # Threads
//!
//! Lackey does not say which thread made a reference. Valgrind runs one thread
//! at a time, under a lock, and with `--trace-sched=yes` logs each
//! `SCHED[N]: acquired lock`: every reference up to the next one is thread N's,
//! and the import gives it to that thread. Without those lines, every reference
//! is given to the process's first thread; the other threads then replay their
//! system calls only. Valgrind numbers threads 1, 2, ... (reusing the number of
//! one that exited); the import binds each new number to the oldest thread the
//! strace log shows created and not yet bound. The import keeps each thread's
//! order; between threads, it keeps the order of address-space changes: around
//! each call that changes a multi-threaded process's address space (or copies
//! it: `fork`), the replay's threads wait until every other thread has reached the same point of
//! the traced run (or ended), and go on after the call, so that no thread
//! touches memory before the call that maps it, or after the one that unmaps
//! it. Other waits of the real program (locks, joins) are not replayed.
//!
//! # Addresses
//!
//! The replay maps every traced mapping at the traced program's own address,
//! so the simulated TLB and page walks see its page numbers. These are the
//! addresses the program had under valgrind, which lays out memory its own way
//! (a PIE executable at `0x108000`, the dynamic linker at `0x4000000`, the
//! stack near `0x1fff000000`), not those of a native run. Pages the program
//! references that no kept call mapped (its executable, stack and `brk` heap,
//! which exec, valgrind's loader and `brk` set up) are the traced process's
//! *image*, mapped when it starts, without system calls: one region per run of
//! consecutive pages, writable if the program wrote any of them. A reference to
//! a page a kept call has unmapped, or a write to a page a kept call left
//! read-only, means the logs disagree, and is an error with the lackey line.
//! Addresses at or above 2^47 (x86-64's user half) are dropped and counted.
//!
//! # What is kept and what is dropped
//!
//! - References are kept per 4 KB page; offsets within the page and access
//!   sizes are dropped (a reference that straddles two pages counts on both).
//!   Consecutive data references of one thread to one page are one run, with
//!   their number and whether any wrote.
//! - Instruction fetches: each change of code page is kept (the replay reads
//!   the page), or, with `--no-ifetch`, only their number. Every record carries
//!   the number of instructions the thread executed since its previous record.
//! - `mmap`: the range and whether `PROT_WRITE` was given; file mappings are
//!   replayed as anonymous memory (no page cache, no write-back). `PROT_NONE`
//!   is replayed as read-only, in `mmap` and `mprotect` alike.
//! - `madvise(MADV_DONTNEED)`, cut to the pieces mapped then; other advice is
//!   dropped. `mremap` is replayed as an `munmap` of what leaves and an `mmap`
//!   of what arrives (the contents are not moved: their pages fault again).
//! - `vfork` and `clone` with `CLONE_VFORK` are replayed as `fork` (a
//!   copy-on-write copy, where the real child borrowed its parent's memory).
//! - Dropped: failed calls, `brk` (the heap is image and never shrinks),
//!   `shmat`, every other call (I/O, `futex`, `wait4`), timestamps.
//!
//! # Timing and the file
//!
//! See [`tlbkit_sim::trace`]: how the replay charges time, and the file's
//! layout and checks.

pub mod import;
pub mod lackey;
pub mod strace;

pub use tlbkit_sim::trace::format;
pub use tlbkit_sim::trace::{Event, Process, Record, Thread, Trace};

/// Returns `s` cut to a length fit for a message (the log readers quote bad lines).
pub(crate) fn clip(s: &str) -> String {
    let cut: String = s.chars().take(60).collect();
    if cut.len() < s.len() {
        format!("'{cut}...'")
    } else {
        format!("'{cut}'")
    }
}
