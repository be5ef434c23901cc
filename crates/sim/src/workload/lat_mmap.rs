//! lmbench's `lat_mmap`: how long it takes to map a file, touch part of the
//! mapping and unmap it again.
//!
//! Source: lmbench 3 (github.com/intel/lmbench at `941a0dcc0e7b`),
//! `src/lat_mmap.c` (`domapping`, "this alg due to Linus"), the harness
//! `src/lib_timing.c` (`benchmp`, `micromb`) and `scripts/lmbench`, which runs
//! `lat_mmap -P $SYNC_MAX $size $FILE` for sizes from 512 KB doubling upwards,
//! `FILE` being `/tmp/XXX` by default. `PSIZE` is 16 KB, `N` 10, `STRIDE` 160 KB
//! and `MINSIZE` 320 KB (a smaller size exits without a result). One iteration:
//! 1. `mmap(0, size, PROT_READ|PROT_WRITE, MAP_SHARED, fd, 0)` of the file;
//! 2. a one-byte store every 16 KB over the first `size / 10` bytes (with `-r`:
//!    every 160 KB over the whole size): each is a write fault on a shared file
//!    mapping, mapping one page of the page cache;
//! 3. `munmap(p, size)`: the touched PTEs are zapped and flushed.
//!
//! `-P n` makes `benchmp` fork `n` processes, each with its own address space,
//! single-threaded, all mapping the same file (without `-C`); the default
//! `LMBENCH_SCHED=DEFAULT` pins nothing. Each process times its own loop, and
//! lmbench prints the size in MB and the microseconds per iteration (the median
//! of every process's repetitions).
//!
//! The model: a parent forks `procs` processes (fork balancing places them);
//! each maps the file once untimed (`benchmp`'s warm-up: the file is in the page
//! cache already, as `scripts/lmbench` wrote it before), waits by polling a
//! shared flag until the parent has forked them all (the real ones sleep on
//! `benchmp`'s start pipe and are woken onto idle CPUs; a sleeper in the
//! simulator wakes only where it slept), then times `iters` iterations. The file
//! is a shared file mapping of the simulated page cache (`Sys::MmapFile`), one
//! file for every process.
//!
//! What stays different: the simulated `munmap` flushes, as Linux's `mmu_gather`
//! does, the span from the first PTE it cleared to the last (the first tenth of
//! the mapping by default; on arm64 Linux by VA below 512 pages, the whole ASID
//! from there), but frees no page table, where Linux's `free_pgtables` widens
//! that span by the address of each table it frees and makes the flush non-leaf
//! (a table goes when no neighbouring mapping keeps it); the result is the
//! mean over processes of each process's time per iteration, not the median of
//! repetitions, and one untimed iteration stands for `benchmp`'s calibration.
//!
//! Result: `us_per_mapping`, microseconds per iteration (`mmap`, touches and
//! `munmap`), averaged over the processes: lmbench's figure.

use super::{params, Params, WorkloadDef};
use crate::error::Error;
use crate::program::{Op, Program, Sys};
use crate::sim::Sim;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

/// `PSIZE`: the distance between touches by default.
const PSIZE: u64 = 16 << 10;
/// `STRIDE`: the distance between touches with `-r`.
const STRIDE: u64 = 10 * PSIZE;
/// The file every process maps.
const FILE: u32 = 0;
/// Cycles of one poll of the start flag by a waiting process (untimed).
const POLL: u64 = 1000;

params! {
    PARAMS;
    SIZE_KB: Count("size_kb", 1024, 320..=1_048_576)
        "KB mapped each iteration (lat_mmap's size; at least its MINSIZE, 320 KB)";
    PROCS: Count("procs", 1, 0..=4096)
        "processes mapping at once, each its own address space (-P; 0: one per CPU)";
    RANDOM: Flag("random")
        "1: a byte every 160 KB of the whole mapping (-r), 0: every 16 KB of its first tenth";
    ITERS: Count("iters", 20, 1..=1_000_000)
        "timed iterations per process, after one untimed";
}

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef::new(
    "lat_mmap",
    "lmbench lat_mmap: each process maps a shared file, writes a byte every 16 KB of its first tenth \
     (-r: every 160 KB of all of it) and unmaps it; microseconds per mapping",
    PARAMS,
    &["us_per_mapping"],
    |p, _, sim, _| setup(p, sim),
    |p, main, _| result(p, main),
    |p, _, cpus| max_mms(p, cpus),
);

/// What one iteration maps and touches.
#[derive(Clone, Copy)]
struct Mapping {
    /// 4 KB pages mapped.
    pages: u64,
    /// Bytes from the start between touches.
    step: u64,
    /// Bytes from the start below which the touches lie.
    end: u64,
}

impl Mapping {
    fn new(p: &Params) -> Self {
        let size = SIZE_KB.of(p) * 1024;
        let (step, end) = if RANDOM.of(p) { (STRIDE, size) } else { (PSIZE, size / 10) };
        Mapping { pages: size.div_ceil(4096), step, end }
    }

    /// Returns the number of stores (write faults) of one iteration.
    fn touches(&self) -> u64 {
        self.end.div_ceil(self.step)
    }
}

/// One `benchmp` child: waits for the start, maps once untimed, then times
/// `iters` iterations and reports.
struct Mapper {
    m: Mapping,
    iters: u64,
    go: Rc<Cell<bool>>,
    done: u32,
    started: bool,
    /// Iterations begun (the first untimed).
    iter: u64,
    /// Where in an iteration: 0 map, 1 .. touches, then unmap.
    part: u64,
    va: u64,
    finished: u8,
}

impl Program for Mapper {
    fn next(&mut self, ret: u64) -> Op {
        if !self.started {
            if !self.go.get() {
                return Op::Compute(POLL);
            }
            self.started = true;
        }
        if self.iter == self.iters + 1 {
            self.finished += 1;
            return match self.finished {
                1 => Op::Mark("lat_mmap_end"),
                2 => Op::Sys(Sys::PipeWrite(self.done)),
                _ => Op::Exit,
            };
        }
        if self.iter == 1 && self.part == 0 {
            // The warm-up iteration is over: the timed loop starts.
            self.part = u64::MAX;
            return Op::Mark("lat_mmap_start");
        }
        if self.part == u64::MAX {
            self.part = 0;
        }
        let n = self.m.touches();
        self.part += 1;
        match self.part {
            1 => Op::Sys(Sys::MmapFile { file: FILE, pages: self.m.pages, write: true, private: false }),
            p if p <= n + 1 => {
                if p == 2 {
                    self.va = ret;
                }
                Op::Touch { va: self.va + (p - 2) * self.m.step, pages: 1, write: true }
            }
            _ => {
                self.part = 0;
                self.iter += 1;
                Op::Sys(Sys::Munmap { va: self.va, pages: self.m.pages })
            }
        }
    }
}

/// `benchmp`'s parent: forks the processes, starts them and waits for them.
struct Parent {
    p: Params,
    procs: u64,
    go: Rc<Cell<bool>>,
    done: u32,
    step: u64,
}

impl Program for Parent {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        let (s, n) = (self.step, self.procs);
        match s {
            1 => Op::Sys(Sys::Pipe),
            s if s <= n + 1 => {
                if s == 2 {
                    self.done = ret as u32;
                }
                let m = Mapper {
                    m: Mapping::new(&self.p),
                    iters: ITERS.of(&self.p),
                    go: self.go.clone(),
                    done: self.done,
                    started: false,
                    iter: 0,
                    part: 0,
                    va: 0,
                    finished: 0,
                };
                Op::Sys(Sys::Fork(Box::new(m)))
            }
            s if s <= 2 * n + 1 => {
                self.go.set(true);
                Op::Sys(Sys::PipeRead(self.done))
            }
            _ => Op::Exit,
        }
    }
}

/// Starts `benchmp`'s parent.
pub fn setup(p: &Params, sim: &mut Sim) -> Result<(), Error> {
    let parent = Parent {
        p: p.clone(),
        procs: PROCS.or_cpus(p, sim.cfg.ncpus),
        go: Rc::new(Cell::new(false)),
        done: 0,
        step: 0,
    };
    sim.spawn(Box::new(parent))?;
    Ok(())
}

/// Returns the address spaces the run needs: the parent and every process.
pub fn max_mms(p: &Params, cpus: usize) -> usize {
    PROCS.or_cpus(p, cpus) as usize + 8
}

/// Returns `us_per_mapping`: each process's timed loop over its iterations,
/// averaged over the processes.
pub fn result(p: &Params, sim: &Sim) -> Result<BTreeMap<String, f64>, Error> {
    let (starts, ends) = (super::mark_times(sim, "lat_mmap_start"), super::mark_times(sim, "lat_mmap_end"));
    let procs = PROCS.or_cpus(p, sim.cfg.ncpus) as usize;
    if ends.len() != procs || starts.len() != procs {
        return Err(super::unmeasured(
            DEF.name,
            format!("{} of {procs} processes finished their timed loop", ends.len()),
        ));
    }
    let span: u64 = ends.iter().sum::<u64>() - starts.iter().sum::<u64>();
    let iterations = (procs as u64 * ITERS.of(p)) as f64;
    let mut r = BTreeMap::new();
    r.insert("us_per_mapping".to_string(), span as f64 / iterations / sim.ghz() / 1e3);
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(size_kb: f64, random: f64) -> Params {
        [("size_kb", size_kb), ("random", random), ("procs", 1.0), ("iters", 1.0)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    }

    #[test]
    fn touches_are_lmbench_s() {
        // 1 MB: stores at 0, 16, ..., 96 KB, below 104857 bytes (size / 10).
        assert_eq!(Mapping::new(&params(1024.0, 0.0)).touches(), 7);
        // 8 MB: 838860 bytes, 52 stores of 16 KB steps (the last at 816 KB).
        assert_eq!(Mapping::new(&params(8192.0, 0.0)).touches(), 52);
        // -r, 1 MB: at 0, 160, ..., 960 KB.
        assert_eq!(Mapping::new(&params(1024.0, 1.0)).touches(), 7);
        // MINSIZE: two stores with -r, two without.
        assert_eq!(Mapping::new(&params(320.0, 1.0)).touches(), 2);
        assert_eq!(Mapping::new(&params(320.0, 0.0)).touches(), 2);
        assert_eq!(Mapping::new(&params(1024.0, 0.0)).pages, 256);
    }
}
