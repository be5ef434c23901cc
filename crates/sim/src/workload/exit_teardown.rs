//! Process exit under a kernel compile (origin 004): the time `exit_group` takes
//! to tear down address spaces mapped with large folios and contiguous PTEs.
//!
//! What the origin measured: "running a kernel compilation workload and measuring
//! the cost of arm64_sys_exit_group() (which at ~1.5% is a very small part of the
//! overall workload)", on an Ampere Altra with one NUMA node and with two, for
//! v6.7-rc1 with anonymous large folios (the baseline) and the contpte series
//! with four ways of clearing a contiguous block at exit.
//!
//! The model: `make` forks `jobs` compiler processes per CPU and waits for them
//! all (a pipe each writes before it exits). Each compiler `execve`s (a fresh
//! address space, so its exit tears down what it mapped itself, not a copy of
//! make's), touches its text, writes its data and stack, maps an anonymous heap
//! of `heap_pages` and writes all of it (cc1's obstacks and trees: 64 KB folios,
//! contiguous blocks with `contpte=on`), maps a shared file of `file_pages`
//! (the page cache's 64 KB folios, fault-around mapping whole folios) and
//! writes `dirty_pages` of it at an offset of its own (the object file it
//! produces: file-backed dirty pages whose dirty state the teardown must report),
//! computes for `compute_us` and exits. Page counts are estimates of a small
//! compile job's footprint, scaled down to keep host time modest; they set the
//! ratio of folio-backed pages to everything else a process maps. Each
//! compiler computes 0.5 to 1.5 times `compute_us` (50 ms by default), so exits
//! are spread out and rarely overlap, as in a kernel build, where the origin puts
//! `exit_group` at ~1.5% of the time. That matters for no-opt: a kernel operation
//! is atomic in simulated time, so a CPU's DVM queue takes a whole teardown's
//! TLBIs at once, and a second teardown that overlaps it waits behind all of them
//! (with `jobs=2` or short `compute_us`, no-opt's ratio on 80 CPUs grows
//! several-fold from this queueing alone).
//!
//! Result: `exit_us`, the mean simulated time of one address space's teardown
//! at exit (every PTE cleared, the core mm's per-page and per-folio work, the
//! whole-mm flush), over every process that exited (the compilers and make).
//! Scaling: host time grows with `jobs * cpus * (heap_pages + file_pages)`.

use super::{params, ForkAll, Params, WorkloadDef};
use crate::error::Error;
use crate::program::{Op, Program, Sys, DATA_VA, STACK_VA, TEXT_PAGES, TEXT_VA};
use crate::sim::Sim;
use std::collections::BTreeMap;

params! {
    PARAMS;
    JOBS: Count("jobs", 1, 1..=4096)
        "compiler processes per CPU";
    HEAP_PAGES: Count("heap_pages", 512, 16..=65536)
        "4 KB anonymous heap pages each compiler writes (2 MB)";
    FILE_PAGES: Count("file_pages", 128, 16..=65536)
        "4 KB pages of the shared file each compiler maps and reads";
    DIRTY_PAGES: Count("dirty_pages", 32, 0..=65536)
        "pages of the file each compiler writes (at most file_pages)";
    COMPUTE_US: Real("compute_us", 50000.0, 0.0..=1e6)
        "mean microseconds each compiler computes (each one 0.5 to 1.5 times this)";
}

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef::new(
    "exit_teardown",
    "kernel-compile-like processes whose exit tears down large-folio heaps and dirty shared file \
     mappings: exit_group time per process (origin 004)",
    PARAMS,
    &["exit_us"],
    |p, _, sim, _| setup(p, sim),
    |_, main, _| result(main),
    // make and every compiler (all may be alive at once).
    |p, _, cpus| JOBS.usize(p) * cpus + 16,
)
.origin("004");

/// The shared file every compiler maps.
const FILE: u32 = 1;

/// The sizes every compiler shares.
#[derive(Clone, Copy)]
struct Sizes {
    heap_pages: u64,
    file_pages: u64,
    dirty_pages: u64,
    compute: u64,
}

/// One compiler process.
struct Compiler {
    sizes: Sizes,
    /// Its index among make's children (where it writes the file).
    index: u64,
    done: u32,
    step: u32,
    file: u64,
}

impl Program for Compiler {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        let s = self.sizes;
        match self.step {
            1 => Op::Sys(Sys::Execve),
            2 => Op::Touch { va: TEXT_VA, pages: TEXT_PAGES, write: false },
            3 => Op::Touch { va: DATA_VA, pages: 8, write: true },
            4 => Op::Touch { va: STACK_VA, pages: 4, write: true },
            5 => Op::Sys(Sys::Mmap { pages: s.heap_pages, write: true }),
            6 => Op::Touch { va: ret, pages: s.heap_pages, write: true },
            7 => Op::Sys(Sys::MmapFile { file: FILE, pages: s.file_pages, write: true, private: false }),
            8 => {
                self.file = ret;
                Op::Touch { va: self.file, pages: s.file_pages, write: false }
            }
            9 => {
                let slots = (s.file_pages / s.dirty_pages.max(1)).max(1);
                let at = (self.index % slots) * s.dirty_pages;
                Op::Touch { va: self.file + at * 4096, pages: s.dirty_pages, write: true }
            }
            // Compile times differ from file to file: spread them over 0.5 to 1.5
            // times `compute_us` so that exits do not all coincide.
            10 => Op::Compute(s.compute / 2 + s.compute * ((self.index * 7919) % 1024) / 1024),
            11 => Op::Sys(Sys::PipeWrite(self.done)),
            _ => Op::Exit,
        }
    }
}

/// Starts make.
pub fn setup(p: &Params, sim: &mut Sim) -> Result<(), Error> {
    let sizes = Sizes {
        heap_pages: HEAP_PAGES.of(p),
        file_pages: FILE_PAGES.of(p),
        dirty_pages: DIRTY_PAGES.of(p),
        compute: (COMPUTE_US.of(p) * 1000.0 * sim.ghz()) as u64,
    };
    if sizes.dirty_pages > sizes.file_pages {
        return Err(Error::ParamExceeds {
            workload: DEF.name,
            key: DIRTY_PAGES.0.key,
            value: sizes.dirty_pages.to_string(),
            limit_key: FILE_PAGES.0.key,
            limit: sizes.file_pages.to_string(),
        });
    }
    let children = JOBS.of(p) * sim.cfg.ncpus as u64;
    let mut index = 0;
    let make = ForkAll::new(children, move |done| {
        index += 1;
        Box::new(Compiler { sizes, index: index - 1, done, step: 0, file: 0 }) as Box<dyn Program>
    });
    sim.spawn(Box::new(make))?;
    Ok(())
}

/// Returns `exit_us`: simulated microseconds of teardown per exiting address space.
pub fn result(sim: &Sim) -> Result<BTreeMap<String, f64>, Error> {
    let s = &sim.stats;
    if s.contpte.exits == 0 {
        return Err(super::unmeasured(DEF.name, "no process exited"));
    }
    let mut r = BTreeMap::new();
    r.insert("exit_us".to_string(), s.contpte.exit_teardown_cycles as f64 / s.contpte.exits as f64 / sim.ghz() / 1e3);
    Ok(r)
}
