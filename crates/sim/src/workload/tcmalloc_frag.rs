//! gperftools' large-heap fragmentation unittest, one copy per CPU (origin 001).
//!
//! What the origin ran: `for-each-cpu.sh ./gperftools/tcmalloc_large_heap_fragmentation_unittest`
//! (one copy per CPU, `perf stat`'s elapsed time until the last exits: 0.990 s
//! before, 0.905 s after on the 32-CPU Ampere). The unittest
//! (`src/tests/large_heap_fragmentation_unittest.cc`) makes three passes, each
//! allocating and at once freeing blocks from 100 MB up to 500 MB in steps of
//! 20000 bytes (20972 per pass, 62916 in all), and checks that tcmalloc's heap
//! stays under 1 GB. tcmalloc serves such blocks from its page heap, grows the
//! heap with `mmap` when no free span fits, and returns freed spans to the
//! system with `madvise(MADV_DONTNEED)` (gperftools never unmaps its heap).
//!
//! The model, per copy: each allocation takes the smallest heap span that fits
//! the block, or maps a new span (the block rounded up to 10 MB) when none does;
//! it writes `touch_pages` pages at the block's start; the free releases the whole
//! block with `madvise(MADV_DONTNEED)`, which zaps and flushes what was touched,
//! so the next allocation faults in fresh zero pages. So each allocation costs
//! `touch_pages` page faults, one `madvise` and one ranged flush, and the first
//! pass maps about 40 spans. The unittest itself writes nothing into its blocks;
//! without touches there would be no PTEs to zap and nothing to flush, and the
//! origin's 9% difference would have no cause, so the touches (tcmalloc's and the
//! C library's own writes) are an assumption, and `touch_pages` says how many.
//!
//! What the model does not simulate of an allocation (tcmalloc's page heap:
//! span search, carving and coalescing, page-map updates) is `user_us` of CPU
//! time. Its default, 11 us, is fitted to the origin's *patched* figure: 0.90510 s
//! for 62916 allocations is 14.4 us per allocation, of which the simulated
//! faults, `madvise` and flush take 3.3 us under `arm64-linux-skipbcast` on
//! `emag`. The stock/patched difference then comes from the interconnect model
//! alone (origin001-tcmalloc in `tlbkit reproduce`).
//!
//! Copies: one per CPU. Result: `elapsed_s` until the last copy finishes.
//! Scaling: the default of 6000 allocations per copy (the first 29% of the
//! first pass) keeps a 32-CPU run to about two seconds of host time in release
//! mode, since every release's flush reaches every CPU; simulated time grows
//! linearly with `allocs`, and `--set allocs=62916` runs the whole unittest
//! (about ten times longer). Host time grows with `cpus * cpus * allocs *
//! touch_pages` under broadcast policies.

use super::{params, OpQueue, Params, WorkloadDef};
use crate::error::Error;
use crate::program::{Op, Program, Sys};
use crate::sim::Sim;

params! {
    PARAMS;
    ALLOCS: Count("allocs", 6000, 1..=10_000_000)
        "allocations (each freed at once) per copy; the unittest makes 3 x 20972";
    TOUCH_PAGES: Count("touch_pages", 4, 1..=512)
        "4 KB pages written at the start of each block";
    USER_US: Real("user_us", 11.0, 0.0..=1_000_000.0)
        "CPU time per allocation outside the modelled kernel calls and touches (tcmalloc's page heap)";
}

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef::new(
    "tcmalloc_frag",
    "tcmalloc large-heap fragmentation unittest, one copy per CPU: mmap growth, madvise(DONTNEED) \
     release (origin 001)",
    PARAMS,
    &["elapsed_s"],
    |p, _, sim, _| setup(p, sim),
    |_, main, _| super::elapsed("tcmalloc_frag", main),
    // One process per CPU.
    |_, _, cpus| cpus + 8,
)
.origin("001");

/// The first block of a pass: 100 MB, in pages.
const FIRST_BYTES: u64 = 100 << 20;
/// The growth of the block from one allocation to the next, in bytes.
const STEP_BYTES: u64 = 20000;
/// Allocations per pass: blocks from 100 MB while below 500 MB.
const PER_PASS: u64 = ((500 << 20) - FIRST_BYTES).div_ceil(STEP_BYTES);
/// Heap growth is rounded up to this many pages (10 MB).
const GROW_PAGES: u64 = 2560;

/// Returns the pages of allocation `i`.
fn block_pages(i: u64) -> u64 {
    (FIRST_BYTES + (i % PER_PASS) * STEP_BYTES).div_ceil(4096)
}

/// One copy of the unittest.
struct Frag {
    allocs: u64,
    touch: u64,
    /// Cycles of tcmalloc's own work per allocation.
    user: u64,
    i: u64,
    /// Heap spans: (address, pages), in the order they were mapped.
    spans: Vec<(u64, u64)>,
    /// An `mmap` for allocation `i` is outstanding.
    growing: bool,
    queue: OpQueue,
}

impl Frag {
    /// Queues the touch and the release of allocation `i` in the span at `va`.
    fn use_block(&mut self, va: u64) {
        let pages = block_pages(self.i);
        self.queue.extend([
            Op::Compute(self.user),
            Op::Touch { va, pages: self.touch.min(pages), write: true },
            Op::Sys(Sys::Madvise { va, pages }),
        ]);
        self.i += 1;
    }
}

impl Program for Frag {
    fn next(&mut self, ret: u64) -> Op {
        loop {
            if let Some(op) = self.queue.pop() {
                return op;
            }
            if self.growing {
                self.growing = false;
                let pages = block_pages(self.i).next_multiple_of(GROW_PAGES);
                self.spans.push((ret, pages));
                self.use_block(ret);
                continue;
            }
            if self.i == self.allocs {
                self.i += 1;
                return Op::Mark("end");
            }
            if self.i > self.allocs {
                return Op::Exit;
            }
            let need = block_pages(self.i);
            let fit = self.spans.iter().filter(|s| s.1 >= need).min_by_key(|s| s.1).map(|s| s.0);
            match fit {
                Some(va) => self.use_block(va),
                None => {
                    self.growing = true;
                    return Op::Sys(Sys::Mmap { pages: need.next_multiple_of(GROW_PAGES), write: true });
                }
            }
        }
    }
}

/// Starts one copy per CPU.
pub fn setup(p: &Params, sim: &mut Sim) -> Result<(), Error> {
    for _ in 0..sim.cfg.ncpus {
        let f = Frag {
            allocs: ALLOCS.of(p),
            touch: TOUCH_PAGES.of(p),
            user: (USER_US.of(p) * 1000.0 * sim.ghz()) as u64,
            i: 0,
            spans: Vec::new(),
            growing: false,
            queue: OpQueue::default(),
        };
        sim.spawn(Box::new(f))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_match_the_unittest() {
        assert_eq!(PER_PASS, 20972);
        assert_eq!(block_pages(0), 25600);
        assert_eq!(block_pages(PER_PASS), 25600);
        assert!(block_pages(PER_PASS - 1) * 4096 < (500 << 20) + 4096);
    }
}
