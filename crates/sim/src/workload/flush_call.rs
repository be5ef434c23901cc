//! `flush_call`: the cost of the kernel's range flush alone, called directly
//! by a kernel module in a loop, by the number of pages it flushes.
//!
//! This is how the flush's own cost has been measured where it was published:
//! a test module that calls `__flush_tlb_range(vma, start, start +
//! PAGE_SIZE * n, PAGE_SIZE, false)` 10,000 times and divides the time (the
//! TLBI RANGE series, v5.9), and tracepoints around `flush_tlb_mm_range` (the
//! tuning of x86's full-flush ceiling, 2014; PTI's user-PCID flushes, 2017).
//! No PTE changes, so what is timed is the policy's `flush_range` and nothing
//! of the system call that would change the PTEs (compare
//! [`super::flush_range`], which times `mprotect`, its PTE rewrite included).
//!
//! The model: one thread, the machine's other CPUs idle (the module runs on
//! an otherwise idle machine). It maps `pages` anonymous pages and
//! writes them, then makes one untimed call and `calls` timed ones
//! ([`Sys::FlushRange`]: the policy's range flush of the pages, its IPIs and
//! waits included), back to back. Each call enters through the system-call
//! path, which stands for the module's loop and is not counted: the result
//! is what the caller spent inside the timed flushes
//! ([`crate::sim::Stats::flush_cycles`]), divided by `calls`.
//!
//! So on arm64 Linux a call is what `__flush_tlb_range` issues for the pages
//! (one `TLBI VAE1IS` a page below `MAX_TLBI_OPS`, the whole ASID from there,
//! or with `tlbi_range=on` the range operations' decomposition) and its `DSB
//! ISH`; on x86 Linux one CPU's `INVLPG` per page up to the ceiling
//! (`--set flush_ceiling`) and a full flush above it, with PTI's user-PCID
//! flush where it is on, and IPIs to other CPUs only where the address space
//! is live there (never, in this one-thread process).
//!
//! Results: `us_per_call` and `cycles_per_call`, the mean timed call.

use super::{params, Params, WorkloadDef};
use crate::error::Error;
use crate::program::{Op, Program, Sys};
use crate::sim::Sim;
use std::collections::BTreeMap;

params! {
    PARAMS;
    PAGES: Count("pages", 1, 1..=4096)
        "4 KB pages each call flushes (mapped and written first)";
    CALLS: Count("calls", 10_000, 1..=1_000_000)
        "timed calls after one untimed (the module's 10,000)";
}

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef::new(
    "flush_call",
    "a kernel module's loop of direct range-flush calls (flush_tlb_range) on N mapped pages, no PTE \
     changed: the flush alone, as a test module or a tracepoint times it; microseconds per call",
    PARAMS,
    &["us_per_call", "cycles_per_call"],
    |p, _, sim, _| setup(p, sim),
    |p, main, _| result(p, main),
    // One process.
    |_, _, _| 4,
);

/// The module's caller: maps and writes the pages, then calls.
struct Caller {
    pages: u64,
    calls: u64,
    va: u64,
    step: u64,
}

impl Program for Caller {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        let (pages, calls) = (self.pages, self.calls);
        match self.step {
            1 => Op::Sys(Sys::Mmap { pages, write: true }),
            2 => {
                self.va = ret;
                Op::Touch { va: ret, pages, write: true }
            }
            // The untimed call, then the timed ones between the two marks.
            3 => Op::Sys(Sys::FlushRange { va: self.va, pages }),
            4 => Op::Mark("calls_start"),
            s if s < 5 + calls => Op::Sys(Sys::FlushRange { va: self.va, pages }),
            s if s == 5 + calls => Op::Mark("calls_end"),
            _ => Op::Exit,
        }
    }
}

/// Starts the process.
pub fn setup(p: &Params, sim: &mut Sim) -> Result<(), Error> {
    sim.spawn(Box::new(Caller { pages: PAGES.of(p), calls: CALLS.of(p), va: 0, step: 0 }))?;
    Ok(())
}

/// Returns `us_per_call` and `cycles_per_call`: the flush cycles between the
/// two marks over the timed calls.
pub fn result(p: &Params, sim: &Sim) -> Result<BTreeMap<String, f64>, Error> {
    let mark = |name: &str| sim.mark_stats(name).map(|s| s.flush_cycles);
    let (Some(start), Some(end)) = (mark("calls_start"), mark("calls_end")) else {
        return Err(super::unmeasured(DEF.name, "the timed calls did not all run".to_string()));
    };
    let cycles = (end - start) as f64 / CALLS.of(p) as f64;
    let mut r = BTreeMap::new();
    r.insert("us_per_call".to_string(), cycles / sim.ghz() / 1e3);
    r.insert("cycles_per_call".to_string(), cycles);
    Ok(r)
}
