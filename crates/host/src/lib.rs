//! The host side of `tlbkit calibrate`: the real machine's topology, and
//! fourteen microbenchmarks of the costs the simulator's machine model is
//! made of, defined so that the simulator can run the same ones.
//!
//! `calibrate` runs each microbenchmark here, builds a machine preset from
//! the [`topology`] and the measured costs, runs the same microbenchmarks in
//! the simulator, and prints both. Each is therefore one operation the
//! simulated kernel also has, measured alone: a syscall, a fault, a page
//! zeroed, a memory-map call, a context switch, a cache line moved, a lock
//! handed over, a remote TLB flush. The definitions below are the contract
//! the simulator mirrors.
//!
//! # How every microbenchmark is timed
//! Its threads are pinned with `sched_setaffinity` to CPU `a` (and `b` for
//! the two-CPU ones), in threads of their own (the caller's affinity is
//! untouched). A trial times, with `clock_gettime(CLOCK_MONOTONIC)`, a loop
//! of `ops_per_trial` operations; its figure is ns per operation (GB/s for
//! the zeroing ones). The number of operations is sized so that a trial
//! lasts about 25 ms ([`Effort::Full`]) or 1 ms ([`Effort::Quick`]); one
//! untimed warm-up trial comes first, then 11 (Full) or 3 (Quick) timed
//! trials; the [`Measurement`] is their median, minimum and maximum. Where
//! untimed work comes between operations (`page_fault`, `mmap`, `munmap`,
//! `madvise`), only the operation is bracketed by clock reads, and for the
//! per-call ones the mean cost of an empty bracket is subtracted. A page is
//! the system's base page (4 KiB on x86).
//!
//! # The microbenchmarks
//! - `null_syscall`: `syscall(SYS_getppid)`; ns per call. The cheapest
//!   syscall that does not return a cached value: the kernel entry and exit.
//! - `page_fault`: map 16 MiB anonymous private, `MADV_NOHUGEPAGE` (so 4 KiB
//!   pages), write one byte in each page in order; ns per page (the fault,
//!   the zeroing of the page, the PTE install). The unmap is untimed.
//! - `zeroing`: `ptr::write_bytes` over a pre-faulted 64 MiB buffer (more
//!   than any L3), repeatedly; GB/s (10^9 bytes a second). The rate at which
//!   the kernel can clear pages.
//! - `zeroing_all`: the same on every online CPU this process may use at
//!   once, one thread and one 64 MiB buffer per CPU, starting together; the
//!   sum of their rates (the machine's aggregate GB/s, which memory bandwidth
//!   caps). The only one that uses CPUs other than `a` and `b`.
//! - `mmap`: time `mmap` of 16 anonymous private read-write pages; each is
//!   unmapped (untimed) before the next, so no mapping merges with the last;
//!   ns per call.
//! - `munmap`: map 16 pages and write each (untimed), time their `munmap`;
//!   ns per call (the zap, the free, the local flush: one thread, so no IPI).
//! - `madvise`: one 16-page mapping; per call write its 16 pages (untimed),
//!   time `madvise(MADV_DONTNEED)` of them; ns per call.
//! - `mprotect`: one 16-page mapping, written once; per pair time
//!   `mprotect(PROT_READ)` then `mprotect(PROT_READ | PROT_WRITE)`; ns per
//!   call (a pair / 2). One thread: no other CPU runs the address space.
//! - `pipe_rw`: one thread writes 1 byte to a pipe and reads it back; ns per
//!   pair of syscalls. The pipe's cost without a context switch.
//! - `pipe_switch`: lmbench's `lat_ctx -s 0 2`: two processes (`fork`) both
//!   on CPU `a`, passing a 1-byte token around two pipes; ns per pass (a
//!   write, a read and a context switch). Less `pipe_rw`, the switch.
//! - `line_pingpong`: threads on `a` and `b` pass an `AtomicU64` counter
//!   alone in its 64-byte line: `a` waits (spinning on loads) for an even
//!   value and stores it + 1, `b` the same for odd; ns per pass (one line
//!   transfer and the spin's detection of it).
//! - `atomic_hit`: one thread on `a` adds to an `AtomicU64` alone in its
//!   line (`fetch_add`, sequentially consistent: x86 `LOCK XADD`, arm64
//!   `LDADDAL` with the LSE atomics), each add's operand from the value the
//!   last returned; ns per add. An atomic on a line the CPU holds.
//! - `lock_handoff`: threads on `a` and `b` take a ticket spinlock (FIFO, as
//!   Linux's queued spinlock is under contention), increment a counter in
//!   another line, and release, in a loop; ns per acquisition (with both
//!   always waiting, each acquisition is a handoff from the other CPU).
//! - `shootdown`: two threads of one process: the one on `b` writes a page
//!   once, then reads one byte of it in a loop (keeping the page's
//!   translation and the address space live on `b`); the one on `a` times
//!   `mprotect(PROT_READ)` then `mprotect(PROT_READ | PROT_WRITE)` of the
//!   page; ns per pair. The read-only call must flush `b`'s TLB: an IPI round
//!   trip on x86. Less `mprotect` of one page, the remote flush.
//!
//! Nothing here states an expected figure: the host measures, the simulator
//! predicts, and `calibrate` shows both.
//!
//! Only Linux is measured: elsewhere [`measure`], [`check_cpus`] and
//! [`topology::read_host`] answer [`Error::NotLinux`] (the crate builds,
//! and [`topology::read`] parses fixture trees, on any system).
//!
//! Layout: `error.rs` ([`Error`]); `topology/` (the `/sys` and
//! `/proc/cpuinfo` parser, CPU lists, `uname`); `bench/` (the
//! microbenchmarks: see [`mod@bench`]); `memory.rs` (this process's own
//! memory, for the commands that report it).

pub mod bench;
mod error;
pub mod memory;
pub mod topology;

pub use bench::{check_cpus, measure, Bench, Cpus, Effort, Measurement};
pub use error::Error;
