//! `madvise_bench`: the time of one `madvise(MADV_PAGEOUT)` (or
//! `MADV_DONTNEED`) of memory backed by 64 KB folios, the benchmark of Dev
//! Jain's cover letters for "mm/rmap: Optimize anonymous large folio unmapping"
//! (2026, v1 to v4), which says it is "stolen from Barry" (Barry Song, message
//! 20250513084620.58231-1-21cnbao@gmail.com).
//!
//! The program (as quoted in the v4 cover letter): one single-threaded process
//! maps 256 MB anonymous, private and read-write (`mmap(NULL, SIZE,
//! PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS)`), writes all of it
//! (`memset`: a write to every page; with `--set contpte=on` each fault maps a
//! 64 KB folio as one contiguous block, as a kernel with
//! `hugepages-64kB/enabled=always` does), then times `madvise(addr, SIZE,
//! MADV_PAGEOUT)` with `clock_gettime` around the call, and unmaps the memory.
//! The real program runs once per process; `iters` repeats the four steps in
//! one process, each a fresh mapping.
//!
//! Parameters: `size_mb` (256 as in the program), `iters`, `advice` (0:
//! `MADV_PAGEOUT`, the program's; 1: `MADV_DONTNEED`, the same program with the
//! other advice; 2: `munmap`, the same program unmapping instead of advising,
//! so that each iteration's mapping is gone after its timed calls), `batch` (1:
//! Dev Jain's batched unmap of a large anonymous folio,
//! [`Sim::set_pageout_batch`]; 0: Linux v7.0, one PTE at a time), and
//! `chunk_kb`. `batch` only affects `MADV_PAGEOUT`; for `MADV_DONTNEED` and
//! `munmap` the switch is the kernel's `--set teardown`: `clear_ptes` (v6.9's
//! batched `zap_pte_range`, the default) or `noopt` (one PTE at a time,
//! unfolding each block). The simulated `MADV_PAGEOUT` and its gaps are
//! described in `sim/reclaim.rs`; its writes go to zram (the default swap
//! device), which stores the `memset`'s zero pages without compressing them
//! (`crate::swapdev`, `Fill::Same`).
//!
//! `chunk_kb` splits the range into calls of that many KB each (rounded up to
//! whole 4 KB pages; the last call takes what is left), made one after
//! another over the range from its start: 0 (the default) is the program's
//! one call of the whole range; 4 is one page per call, so that with
//! `contpte=on` each block is cleared a page at a time, the block's first call
//! unfolding it whatever the `teardown` (a batched clear takes whole blocks
//! only); 64 is one block per call. Each call is timed on its own, entry to exit, so
//! the untimed steps between calls stay out; nothing else runs between them.
//! This is the variant for the contpte series' per-page `MADV_DONTNEED` and
//! block-by-block `munmap`, not part of Barry Song's program.
//!
//! Results: `ms_per_call`, the time of the whole range's calls (their sum,
//! one call unless `chunk_kb` splits it), mean over the iterations, entry to
//! exit of each system call as `clock_gettime` sees it; `us_per_call`, the mean
//! of one call in microseconds (with `chunk_kb` 0, `ms_per_call` in
//! microseconds).

use super::{params, Params, WorkloadDef};
use crate::error::Error;
use crate::program::{Op, Program, Sys};
use crate::sim::Sim;
use std::collections::BTreeMap;

params! {
    PARAMS;
    SIZE_MB: Count("size_mb", 256, 1..=4096)
        "MB mapped, written and advised";
    ITERS: Count("iters", 1, 1..=10_000)
        "repetitions (madvise calls timed)";
    ADVICE: Count("advice", 0, 0..=2)
        "0: MADV_PAGEOUT; 1: MADV_DONTNEED; 2: munmap (the mapping is gone after the calls)";
    BATCH: Flag("batch")
        "MADV_PAGEOUT of a large folio: 0 one PTE at a time (Linux v7.0), 1 batched (Dev Jain's series)";
    CHUNK_KB: Count("chunk_kb", 0, 0..=4_194_304)
        "KB per call, the range advised (or unmapped) in calls of this size in turn; 0: one call";
}

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef::new(
    "madvise_bench",
    "Barry Song's benchmark from Dev Jain's cover letters: mmap and memset anonymous memory, time one \
     madvise(MADV_PAGEOUT) (or MADV_DONTNEED, or munmap) of all of it (or of it in chunks), munmap",
    PARAMS,
    &["ms_per_call", "us_per_call"],
    |p, _, sim, _| setup(p, sim),
    |p, main, _| result(p, main),
    // One process.
    |_, _, _| 8,
);

/// What the timed calls do.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Advice {
    Pageout,
    DontNeed,
    Munmap,
}

/// The benchmark's process.
struct Bench {
    pages: u64,
    /// Pages per timed call (the whole range when it is `pages`).
    chunk: u64,
    iters: u64,
    advice: Advice,
    iter: u64,
    step: u8,
    addr: u64,
    /// Pages of the range the timed calls have covered this iteration.
    called: u64,
}

impl Program for Bench {
    fn next(&mut self, ret: u64) -> Op {
        if self.iter == self.iters {
            return Op::Exit;
        }
        self.step += 1;
        let (va, pages) = (self.addr, self.pages);
        match self.step {
            1 => Op::Sys(Sys::Mmap { pages, write: true }),
            2 => {
                self.addr = ret;
                self.called = 0;
                Op::Touch { va: ret, pages, write: true }
            }
            3 => Op::Mark("call_start"),
            4 => {
                let (va, pages) = (va + self.called * 4096, self.chunk.min(pages - self.called));
                self.called += pages;
                match self.advice {
                    Advice::Pageout => Op::Sys(Sys::MadvisePageout { va, pages }),
                    Advice::DontNeed => Op::Sys(Sys::Madvise { va, pages }),
                    Advice::Munmap => Op::Sys(Sys::Munmap { va, pages }),
                }
            }
            5 => {
                if self.called < pages {
                    // The next call.
                    self.step = 2;
                } else if self.advice == Advice::Munmap {
                    // The calls unmapped the range: the iteration is over.
                    self.step = 0;
                    self.iter += 1;
                }
                Op::Mark("call_end")
            }
            _ => {
                self.step = 0;
                self.iter += 1;
                Op::Sys(Sys::Munmap { va, pages })
            }
        }
    }
}

/// Starts the process and sets the kernel's `MADV_PAGEOUT` batching.
pub fn setup(p: &Params, sim: &mut Sim) -> Result<(), Error> {
    sim.set_pageout_batch(BATCH.of(p));
    // memset(addr, 0, SIZE_BYTES): zero pages, which zram stores without
    // compressing them.
    sim.set_anon_fill(crate::swapdev::Fill::Same);
    let pages = SIZE_MB.of(p) * 256;
    let b = Bench {
        pages,
        chunk: chunk_pages(p).unwrap_or(pages),
        iters: ITERS.of(p),
        advice: match ADVICE.of(p) {
            0 => Advice::Pageout,
            1 => Advice::DontNeed,
            _ => Advice::Munmap,
        },
        iter: 0,
        step: 0,
        addr: 0,
        called: 0,
    };
    sim.spawn(Box::new(b))?;
    Ok(())
}

/// Returns the pages of one call (`chunk_kb` rounded up to pages), `None` for
/// one call of the whole range.
fn chunk_pages(p: &Params) -> Option<u64> {
    match CHUNK_KB.of(p).div_ceil(4) {
        0 => None,
        n => Some(n),
    }
}

/// Returns `ms_per_call`, the mean time of an iteration's timed calls, and
/// `us_per_call`, the mean time of one call.
pub fn result(p: &Params, sim: &Sim) -> Result<BTreeMap<String, f64>, Error> {
    let (starts, ends) = (super::mark_times(sim, "call_start"), super::mark_times(sim, "call_end"));
    if starts.is_empty() || starts.len() != ends.len() {
        return Err(super::unmeasured(DEF.name, "no call was timed to its end"));
    }
    let iters = ITERS.of(p);
    let calls = starts.len();
    if !(calls as u64).is_multiple_of(iters) {
        return Err(super::unmeasured(DEF.name, format!("{calls} calls timed over {iters} iterations")));
    }
    let ms: f64 = starts.iter().zip(&ends).map(|(s, e)| (e - s) as f64 / sim.ghz() / 1e6).sum();
    let mut r = BTreeMap::new();
    r.insert("ms_per_call".to_string(), ms / iters as f64);
    r.insert("us_per_call".to_string(), ms * 1e3 / calls as f64);
    Ok(r)
}
