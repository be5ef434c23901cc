//! will-it-scale's `tlb_flush3` (`tlb_flush3_threads`, `tlb_flush3_processes`):
//! "TLB flush of separate file shared mapping".
//!
//! Source: github.com/antonblanchard/will-it-scale, `tests/tlb_flush3.c`
//! `testcase()`, run by the harness `main.c` (see [`super::will_it_scale`]).
//! Each task creates its own 128 MiB file (`FILESIZE`; `mkstemp`, `ftruncate`,
//! `unlink`: a sparse file) and loops: `mmap` all of it `MAP_SHARED`,
//! read-write; for each of its 32768 pages a one-byte store (a write fault
//! that maps the page cache's page writable and dirties it), a one-page
//! `madvise(MADV_DONTNEED)` (the PTE is zapped and flushed on every CPU running
//! the mm; the page stays in the page cache, dirty, so nothing is freed), a
//! one-byte load (the `assert(... == 1)`, compiled in at `-O2`: a read fault
//! that maps the same page again) and one increment of the task's counter;
//! then `munmap` of the 128 MiB (a flush of the whole mm). One iteration is
//! one page. In threads mode every `madvise` flushes every CPU running a task;
//! in process mode each task is its own process and no flush reaches another
//! CPU.
//!
//! The model: the harness starts `tasks` tasks (`mode` 0 threads, 1
//! processes), each bound to its CPU; each runs `iters` iterations (the
//! `tlb_flush2` loop, `will_it_scale_tlb_flush2::FlushLoop`) over
//! shared mappings of `pages` pages of its own file (task `i`'s is file
//! `i + 1`), whose pages live in the simulated page cache: the store's fault
//! maps (the first time, allocates) the file's page, the `madvise` zaps a dirty
//! PTE, whose dirtiness the kernel must keep, and the load maps the page again.
//! Fixed work instead of fixed time, in the steady state as
//! [`super::will_it_scale_tlb_flush1`] starts it (`steady=1`: every page of
//! the file cached, each task at its own page of its lap, a `munmap` in the
//! run as often as in the real loop).
//!
//! What stays different: the file's first touch of each page (before the
//! gate, or with `steady=0` in the run) allocates it in the page cache with
//! no I/O (a sparse file on any file system reads as zeroes); the file system's `page_mkwrite` on the write fault (on ext4 a
//! block allocation in the sparse file, on tmpfs none; will-it-scale's files are
//! in `/tmp`, whichever it is) and writeback of the dirty pages are not
//! modelled. The read fault maps the rest of its 16-page window with the page
//! (fault-around, the page cache holding the window's pages), so the next
//! stores of the window take no fault, as on tmpfs. The harness's
//! differences are its own.
//!
//! Results, as `tlb_flush2`'s: `ops_per_s` (will-it-scale's `average:`, 0-day's
//! `workload`), `per_thread_ops` and `tlb_share`.

use super::will_it_scale_tlb_flush2::{file_def, file_result, setup_file, Backing};
use super::WorkloadDef;

/// The workload's registration.
pub const DEF: WorkloadDef = file_def(
    "will_it_scale_tlb_flush3",
    "will-it-scale tlb_flush3: each task maps its own 128 MiB file shared, writes, \
     madvise(DONTNEED)s and reads each page (threads or processes; LKP: one task per CPU)",
    |p, _, sim, _| setup_file(p, sim, |at| Backing::File(at.index as u32 + 1)),
    |p, main, _| file_result(DEF.name, p, main),
);
