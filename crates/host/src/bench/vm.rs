//! `mmap`, `munmap`, `madvise` and `mprotect`: the memory-map syscalls on a
//! 16-page range, one thread, so no other CPU runs the address space and
//! no flush leaves the CPU.
//!
//! `mmap`, `munmap` and `madvise` time each call apart, because untimed work
//! (the unmap, the writes) comes between calls; each such call is bracketed
//! by two clock reads, and the mean cost of an empty bracket (measured once
//! per benchmark, [`bracket_ns`]) is subtracted from each.

use super::harness::{self, Trial};
use super::sys::{bracket_ns, now, page_size, Mapping};
use super::{Bench, Effort, Measurement};
use crate::Error;

/// Pages in each range.
const PAGES: usize = 16;

/// Returns the trial of `ops` calls timed apart, `ns` in all, less `bracket` each.
fn bracketed(ns: u64, bracket: f64, ops: u64) -> Trial {
    Trial::per_op(ns as f64 - bracket * ops as f64, ops)
}

/// Measures `mmap`: time `mmap` of 16 anonymous private read-write pages,
/// then unmap them untimed before the next, so that no mapping merges with
/// the one before (`vma_merge`); ns per call.
pub(super) fn mmap(effort: Effort) -> Result<Measurement, Error> {
    let len = PAGES * page_size();
    let bracket = bracket_ns()?;
    harness::run(Bench::Mmap, effort, 1, |ops| {
        let mut ns = 0;
        for _ in 0..ops {
            let t0 = now()?;
            let mapped = Mapping::new(len, "16 pages");
            ns += now()? - t0;
            mapped?.unmap("munmap of the 16 mapped pages")?;
        }
        Ok(bracketed(ns, bracket, ops))
    })
}

/// Measures `munmap`: map 16 pages and write a byte in each (untimed), then
/// time their `munmap`; ns per call.
pub(super) fn munmap(effort: Effort) -> Result<Measurement, Error> {
    let page = page_size();
    let bracket = bracket_ns()?;
    harness::run(Bench::Munmap, effort, 1, |ops| {
        let mut ns = 0;
        for _ in 0..ops {
            let mapped = Mapping::new(PAGES * page, "16 pages to unmap")?;
            mapped.touch(page);
            let t0 = now()?;
            let unmapped = mapped.unmap("munmap of 16 written pages");
            ns += now()? - t0;
            unmapped?;
        }
        Ok(bracketed(ns, bracket, ops))
    })
}

/// Measures `madvise`: one 16-page mapping; per call write a byte in each
/// page (untimed: 16 faults), then time `madvise(MADV_DONTNEED)` of the
/// range, which zaps the 16 PTEs and frees the pages; ns per call.
pub(super) fn madvise(effort: Effort) -> Result<Measurement, Error> {
    let page = page_size();
    let bracket = bracket_ns()?;
    let mapped = Mapping::new(PAGES * page, "16 pages to madvise")?;
    harness::run(Bench::Madvise, effort, 1, |ops| {
        let mut ns = 0;
        for _ in 0..ops {
            mapped.touch(page);
            let t0 = now()?;
            let advised = mapped.advise(libc::MADV_DONTNEED, "madvise(MADV_DONTNEED) of 16 pages");
            ns += now()? - t0;
            advised?;
        }
        Ok(bracketed(ns, bracket, ops))
    })
}

/// Measures `mprotect`: one 16-page mapping, written once; per pair of calls
/// `mprotect` it read-only then read-write; ns per call (a pair's time / 2).
pub(super) fn mprotect(effort: Effort) -> Result<Measurement, Error> {
    let page = page_size();
    let mapped = Mapping::new(PAGES * page, "16 pages to mprotect")?;
    mapped.touch(page);
    harness::run(Bench::Mprotect, effort, 2, |ops| {
        let t0 = now()?;
        for _ in 0..ops / 2 {
            mapped.protect(libc::PROT_READ, "mprotect(PROT_READ) of 16 pages")?;
            mapped.protect(libc::PROT_READ | libc::PROT_WRITE, "mprotect(PROT_READ | PROT_WRITE) of 16 pages")?;
        }
        Ok(Trial::per_op((now()? - t0) as f64, ops))
    })
}
