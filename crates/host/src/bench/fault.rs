//! `page_fault`: the first touch of a page of anonymous memory.

use super::harness::{self, Trial};
use super::sys::{now, page_size, Mapping};
use super::{Bench, Effort, Measurement};
use crate::Error;

/// The buffer each round of faults maps: 16 MiB, 4096 pages of 4 KiB.
const LEN: usize = 16 << 20;

/// Measures `page_fault`: map 16 MiB anonymous private, `madvise` it
/// `MADV_NOHUGEPAGE` (base pages, one fault each), then, timed, write one
/// byte at the start of each page in address order; ns per page. The
/// mapping is unmapped untimed; a trial is a whole number of such buffers.
///
/// Each write takes the fault, allocates and zeroes a page
/// (`do_anonymous_page`, mm/memory.c) and installs its PTE.
pub(super) fn page_fault(effort: Effort) -> Result<Measurement, Error> {
    let page = page_size();
    let pages = (LEN / page) as u64;
    harness::run(Bench::PageFault, effort, pages, |ops| {
        let mut ns = 0;
        for _ in 0..ops / pages {
            let buffer = Mapping::new(LEN, "the 16 MiB page-fault buffer")?;
            buffer.advise(libc::MADV_NOHUGEPAGE, "madvise(MADV_NOHUGEPAGE) of the page-fault buffer")?;
            let t0 = now()?;
            buffer.touch(page);
            ns += now()? - t0;
            buffer.unmap("munmap of the page-fault buffer")?;
        }
        Ok(Trial::per_op(ns as f64, ops))
    })
}
