//! `swap_pageout`: a swap microbenchmark for reclaim's batched TLB flush
//! (Linux v4.3's `try_to_unmap_flush`; arm64's since v6.5): 1 MiB of memory
//! that several CPUs map is written, read by every thread, and paged out to
//! zram with `madvise(MADV_PAGEOUT)`, over and over; each call is timed.
//!
//! # The benchmark
//! The program of 43b3dfdd0455's thread ("arm64: support batched/deferred tlb
//! shootdown during page reclamation/migration", Barry Song's swap
//! microbenchmark, run with `taskset -c 4` on zram): map 1 MiB `MAP_SHARED |
//! MAP_ANONYMOUS`, `memset(p, 0x88, SIZE)` once, then 10,000 times read one
//! byte of every page (swapping it back in) and `madvise(MADV_PAGEOUT)` the
//! whole range. The program is timed whole (`time`); the model times each
//! `MADV_PAGEOUT` call and each iteration of the loop.

//! # The model
//! - **Shared anonymous memory is not modelled** (shmem: `MAP_SHARED |
//!   MAP_ANONYMOUS` pages live in the shmem page cache and are written out by
//!   `shmem_writeout`). The closest that is: private anonymous memory of one
//!   process whose threads all map it, so that one mm is mapped on several
//!   CPUs and reclaim's flush reaches each of them. With processes sharing
//!   shmem, each one's mm would join the batch (one flush per mm on x86's
//!   `arch_tlbbatch_flush` of their gathered `mm_cpumask`s); here there is one
//!   mm. `MADV_PAGEOUT` of private anonymous memory takes the reclaim path
//!   that shmem's does from `shrink_folio_list` on (`try_to_unmap` with
//!   `TTU_BATCH_FLUSH`, `try_to_unmap_flush_dirty`, `pageout`): `sim/reclaim.rs`.
//! - The leader thread (CPU 0) maps `size_kb` and writes every page once (the
//!   `memset`); then per iteration it reads every page (faulting each back in
//!   from swap after the first iteration: a read's swap-in maps it clean), lets
//!   the
//!   `readers` threads (bound to CPUs 1, 2, ...) read every page once, waits
//!   until all have, and times one `MADV_PAGEOUT` of the whole range (with
//!   no readers it goes straight from its reads to the call). Between
//!   reads the readers poll, running in the address space ([`POLL_CYCLES`] of
//!   compute per poll), so that their CPUs are in its `mm_cpumask` and not
//!   lazy when the flush comes, as threads still reading the memory would be.
//! - Every page holds one repeated byte (the `memset`'s 0x88): zram stores it
//!   without compressing it and fills it back on a swap-in (`crate::swapdev`,
//!   `Fill::Same`).
//! - Defaults (estimates): `size_kb` 1024 (the program's 1 MiB), `readers` 3 (so
//!   that four CPUs map it), `iters` 20. The program itself is `readers=0`:
//!   one thread, pinned with `taskset`.
//! - `--set tlbbatch=off` makes every unmap flush its page at once
//!   (`ptep_clear_flush`, as before v4.3 and on arm64 before v6.5).
//!
//! Results: `pageout_us`, the mean time of one `MADV_PAGEOUT` call, entry to
//! exit (µs); `iter_us`, the mean time of one iteration of the leader's loop,
//! from the end of one call to the end of the next (its reads, the readers'
//! round, the call; µs), over the iterations after the first, whose reads
//! are the `memset` (the program's time less its `memset`; 0 when `iters` is
//! 1); `pageout_ns_per_byte`, the calls' time per byte they paged out
//! (ns); `flushes_per_call`, the unmap flushes and batch flushes one call
//! made.

use super::{params, Params, WorkloadDef};
use crate::error::Error;
use crate::program::{Op, Program, Sys};
use crate::sim::Sim;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

params! {
    PARAMS;
    SIZE_KB: Count("size_kb", 1024, 4..=1_048_576)
        "KB mapped and paged out";
    READERS: Count("readers", 3, 0..=4095)
        "threads that read the memory from other CPUs (CPUs 1, 2, ...)";
    ITERS: Count("iters", 20, 1..=100_000)
        "MADV_PAGEOUT calls timed";
}

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef::new(
    "swap_pageout",
    "1 MiB of anonymous memory memset once, then read by the leader and by several threads on \
     other CPUs and madvise(MADV_PAGEOUT) to zram, over and over; the time of each MADV_PAGEOUT",
    PARAMS,
    &["pageout_us", "iter_us", "pageout_ns_per_byte", "flushes_per_call"],
    |p, _, sim, _| setup(p, sim),
    |p, main, _| result(p, main),
    |_, _, _| max_mms(),
);

/// Cycles a reader computes between two looks at whether there is a new
/// round to read (an estimate: a short polling loop).
pub const POLL_CYCLES: u64 = 2000;

/// What the leader and the readers share.
#[derive(Default)]
struct Shared {
    /// The round the leader has written (0: none yet).
    round: Cell<u64>,
    /// Readers that have read the current round.
    read: Cell<u64>,
    /// Set when the last call has returned.
    done: Cell<bool>,
}

/// A reader thread.
struct Reader {
    sh: Rc<Shared>,
    va: u64,
    pages: u64,
    seen: u64,
    /// Whether the last operation was this round's read.
    counted: bool,
}

impl Program for Reader {
    fn next(&mut self, _ret: u64) -> Op {
        if self.counted {
            self.counted = false;
            self.sh.read.set(self.sh.read.get() + 1);
        }
        if self.sh.done.get() {
            return Op::Exit;
        }
        let round = self.sh.round.get();
        if round != self.seen {
            self.seen = round;
            self.counted = true;
            return Op::Touch { va: self.va, pages: self.pages, write: false };
        }
        Op::Compute(POLL_CYCLES)
    }
}

/// The leader thread.
struct Leader {
    sh: Rc<Shared>,
    pages: u64,
    readers: u64,
    cpus: usize,
    iters: u64,
    va: u64,
    iter: u64,
    cloned: u64,
    step: u8,
}

impl Program for Leader {
    fn next(&mut self, ret: u64) -> Op {
        if self.step == 0 {
            self.step = 1;
            return Op::Sys(Sys::Mmap { pages: self.pages, write: true });
        }
        if self.step == 1 {
            self.va = ret;
            self.step = 2;
        }
        if self.cloned < self.readers {
            self.cloned += 1;
            let r = Reader { sh: self.sh.clone(), va: self.va, pages: self.pages, seen: 0, counted: false };
            return Op::Sys(Sys::CloneOn(self.cloned as usize % self.cpus, Box::new(r)));
        }
        if self.iter == self.iters {
            self.sh.done.set(true);
            return Op::Exit;
        }
        match self.step {
            2 => {
                // memset once, then each iteration reads every page (swapping
                // it in after the first).
                self.step = if self.readers == 0 { 4 } else { 3 };
                Op::Touch { va: self.va, pages: self.pages, write: self.iter == 0 }
            }
            3 => {
                // The readers' round.
                self.step = 4;
                self.sh.read.set(0);
                self.sh.round.set(self.iter + 1);
                Op::Compute(POLL_CYCLES)
            }
            4 if self.sh.read.get() < self.readers => Op::Compute(POLL_CYCLES),
            4 => {
                self.step = 5;
                Op::Mark("pageout_start")
            }
            5 => {
                self.step = 6;
                Op::Sys(Sys::MadvisePageout { va: self.va, pages: self.pages })
            }
            _ => {
                self.step = 2;
                self.iter += 1;
                Op::Mark("pageout_end")
            }
        }
    }
}

/// Starts the leader.
pub fn setup(p: &Params, sim: &mut Sim) -> Result<(), Error> {
    let l = Leader {
        sh: Rc::new(Shared::default()),
        pages: SIZE_KB.of(p).div_ceil(4),
        readers: READERS.of(p),
        cpus: sim.cfg.ncpus.max(1),
        iters: ITERS.of(p),
        va: 0,
        iter: 0,
        cloned: 0,
        step: 0,
    };
    // memset(p, 0x88, SIZE): every page one repeated value, which zram stores
    // without compressing.
    sim.set_anon_fill(crate::swapdev::Fill::Same);
    sim.spawn(Box::new(l))?;
    Ok(())
}

/// Returns `pageout_us`, `iter_us`, `pageout_ns_per_byte` and `flushes_per_call`.
pub fn result(p: &Params, sim: &Sim) -> Result<BTreeMap<String, f64>, Error> {
    let pick = |name: &str| -> Vec<(u64, crate::sim::Stats)> {
        sim.marks.iter().filter(|(n, ..)| *n == name).map(|(_, t, s, _)| (*t, *s)).collect()
    };
    let (starts, ends) = (pick("pageout_start"), pick("pageout_end"));
    let iters = ITERS.usize(p);
    if starts.len() != iters || ends.len() != iters {
        return Err(super::unmeasured(DEF.name, format!("{} of {iters} calls timed", ends.len())));
    }
    let g = sim.ghz();
    let cycles: u64 = starts.iter().zip(&ends).map(|((s, _), (e, _))| e - s).sum();
    let pages: u64 =
        starts.iter().zip(&ends).map(|((_, a), (_, b))| b.pageout.pageout_pages - a.pageout.pageout_pages).sum();
    let flushes: u64 = starts
        .iter()
        .zip(&ends)
        .map(|((_, a), (_, b))| {
            b.pageout.unmap_flushes + b.pageout.tlbbatch_flushes - a.pageout.unmap_flushes - a.pageout.tlbbatch_flushes
        })
        .sum();
    let ns = cycles as f64 / g;
    // The loop's iterations after the first (whose reads are the memset):
    // each begins where the call before it ended.
    let loop_cycles = ends[iters - 1].0 - ends[0].0;
    let mut r = BTreeMap::new();
    r.insert("pageout_us".to_string(), ns / 1e3 / iters as f64);
    let loop_us = if iters > 1 { loop_cycles as f64 / g / 1e3 / (iters - 1) as f64 } else { 0.0 };
    r.insert("iter_us".to_string(), loop_us);
    r.insert("pageout_ns_per_byte".to_string(), ns / (pages.max(1) * 4096) as f64);
    r.insert("flushes_per_call".to_string(), flushes as f64 / iters as f64);
    Ok(r)
}

/// Returns the address spaces it needs: one process.
pub fn max_mms() -> usize {
    4
}
