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
//! other advice), and `batch` (1: Dev Jain's batched unmap of a large anonymous
//! folio, [`Sim::set_pageout_batch`]; 0: Linux v7.0, one PTE at a time). `batch`
//! only affects `MADV_PAGEOUT`; for `MADV_DONTNEED` the switch is the kernel's
//! `--set teardown`: `clear_ptes` (v6.9's batched `zap_pte_range`, the default)
//! or `noopt` (one PTE at a time, unfolding each block). The simulated
//! `MADV_PAGEOUT` and its gaps (no swap I/O is charged, among others) are
//! described in `sim/reclaim.rs`.
//!
//! Result: `ms_per_call`, the timed call's mean over the iterations, entry to
//! exit of the system call as `clock_gettime` sees it.

use super::{ParamDef, Params, WorkloadDef};
use crate::error::Error;
use crate::program::{Op, Program, Sys};
use crate::sim::Sim;
use std::collections::BTreeMap;
use tlbkit_policy::Policy;

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef {
    name: "madvise_bench",
    description: "Barry Song's benchmark from Dev Jain's cover letters: mmap and memset anonymous memory, time one \
                  madvise(MADV_PAGEOUT) (or MADV_DONTNEED) of all of it, munmap",
    params: &[
        ParamDef { key: "size_mb", default: 256.0, min: 1.0, max: 4096.0, doc: "MB mapped, written and advised" },
        ParamDef { key: "iters", default: 1.0, min: 1.0, max: 10_000.0, doc: "repetitions (madvise calls timed)" },
        ParamDef { key: "advice", default: 0.0, min: 0.0, max: 1.0, doc: "0: MADV_PAGEOUT; 1: MADV_DONTNEED" },
        ParamDef {
            key: "batch",
            default: 0.0,
            min: 0.0,
            max: 1.0,
            doc: "MADV_PAGEOUT of a large folio: 0 one PTE at a time (Linux v7.0), 1 batched (Dev Jain's series)",
        },
    ],
    has_overhead: false,
    results: &["ms_per_call"],
};

/// The benchmark's process.
struct Bench {
    pages: u64,
    iters: u64,
    dontneed: bool,
    iter: u64,
    step: u8,
    addr: u64,
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
                Op::Touch { va: ret, pages, write: true }
            }
            3 => Op::Mark("call_start"),
            4 if self.dontneed => Op::Sys(Sys::Madvise { va, pages }),
            4 => Op::Sys(Sys::MadvisePageout { va, pages }),
            5 => Op::Mark("call_end"),
            _ => {
                self.step = 0;
                self.iter += 1;
                Op::Sys(Sys::Munmap { va, pages })
            }
        }
    }
}

/// Starts the process and sets the kernel's `MADV_PAGEOUT` batching.
pub fn setup<P: Policy>(p: &Params, sim: &mut Sim<P>) -> Result<(), Error> {
    sim.set_pageout_batch(p["batch"] != 0.0);
    let b = Bench {
        pages: p["size_mb"] as u64 * 256,
        iters: p["iters"] as u64,
        dontneed: p["advice"] != 0.0,
        iter: 0,
        step: 0,
        addr: 0,
    };
    sim.spawn(Box::new(b))?;
    Ok(())
}

/// Returns `ms_per_call`: the mean time of the timed `madvise` calls.
pub fn result<P: Policy>(sim: &Sim<P>) -> Result<BTreeMap<String, f64>, Error> {
    let (starts, ends) = (super::mark_times(sim, "call_start"), super::mark_times(sim, "call_end"));
    if starts.is_empty() || starts.len() != ends.len() {
        return Err(super::unmeasured(DEF.name, "no madvise was timed to its end"));
    }
    let ms: f64 = starts.iter().zip(&ends).map(|(s, e)| (e - s) as f64 / sim.ghz() / 1e6).sum();
    let mut r = BTreeMap::new();
    r.insert("ms_per_call".to_string(), ms / starts.len() as f64);
    Ok(r)
}
