//! will-it-scale's `tlb_flush1` (`tlb_flush1_threads`, `tlb_flush1_processes`):
//! "TLB flush of separate file private mapping".
//!
//! Source: github.com/antonblanchard/will-it-scale, `tests/tlb_flush1.c`
//! `testcase()`, run by the harness `main.c` (see [`super::will_it_scale`]).
//! Each task creates its own 128 MiB file (`FILESIZE`; `mkstemp`, `ftruncate`,
//! `unlink`: a sparse file) and loops: `mmap` all of it `MAP_PRIVATE`,
//! read-write; for each of its 32768 pages a one-byte store (a write fault:
//! the file's page is read into the page cache and copied to a private
//! anonymous page), a one-page `madvise(MADV_DONTNEED)` (the private page is
//! zapped, flushed on every CPU running the mm, and freed), a one-byte load
//! (the `assert(... == 0)`, compiled in at `-O2`: a read fault that maps the
//! file's page) and one increment of the task's counter; then `munmap` of the
//! 128 MiB (above the 33-page ceiling: a flush of the whole mm). One iteration
//! is one page. In threads mode every `madvise` flushes every CPU running a
//! task; in process mode each task is its own process and no flush reaches
//! another CPU.
//!
//! The model: the harness starts `tasks` tasks (`mode` 0 threads, 1
//! processes), each bound to its CPU; each runs `iters` iterations over
//! mappings of `pages` pages (the `tlb_flush2` loop,
//! `will_it_scale_tlb_flush2::FlushLoop`) over a private mapping of its own
//! file (`Sys::MmapFile` with `private`): the write fault reads the file's page
//! into the page cache (a sparse file's: a zeroed page, charged and put on the
//! LRU as a file page) and copies it to a page of the mapping's own
//! (`do_cow_fault`); the `madvise` zaps and frees that copy; the read fault
//! maps the page cache's page read-only, with the cached pages around it
//! (`do_read_fault`, fault-around: the cached pages of its 16-page window
//! are mapped read-only too, so the stores to them copy over a present PTE,
//! `wp_page_copy`, and flush it). Fixed work instead of fixed time, sampled
//! where will-it-scale samples, in the steady state (`steady=1`, the
//! default; [`super::will_it_scale::setup_warm`]): before the gate each task
//! reads its whole file into the page cache (its earlier laps left it
//! there), unmaps it, reads again the pages before the one it starts at
//! (drawn from the seed), as this lap's loads left them mapped, and begins
//! there; so a task's `munmap` (one full flush, 32768 PTEs zapped, while
//! `mmap_lock` is held for writing and the other tasks' faults and
//! `madvise`s wait) falls in the run as often as in the real loop, once in
//! 32768 iterations, at 512 iterations in about one task of 64. `steady=0`
//! runs the first 512 iterations of a fresh start instead, every write
//! fault reading its page into the page cache (the warm-up will-it-scale
//! discards).
//!
//! What stays different: the file is the simulator's page cache (a tmpfs
//! file in effect, as will-it-scale's `/tmp` is on 0-day's machines); the
//! harness's differences are its own.
//!
//! Results, as `tlb_flush2`'s: `ops_per_s` (will-it-scale's `average:`, 0-day's
//! `workload`), `per_thread_ops` and `tlb_share`.

use super::will_it_scale_tlb_flush2::{file_def, file_result, setup_file, Backing};
use super::WorkloadDef;

/// The workload's registration.
pub const DEF: WorkloadDef = file_def(
    "will_it_scale_tlb_flush1",
    "will-it-scale tlb_flush1: each task maps its own 128 MiB file privately, writes, \
     madvise(DONTNEED)s and reads each page (threads or processes; LKP: one task per CPU)",
    |p, _, sim, _| setup_file(p, sim, |at| Backing::PrivateFile(at.index as u32 + 1)),
    |p, main, _| file_result(DEF.name, p, main),
);
