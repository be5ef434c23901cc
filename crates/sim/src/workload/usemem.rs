//! vm-scalability's `usemem` program, as its cases run it: one unit
//! (`do_units` with one unit, from its `mmap` on) and the figures it prints.
//! `case-swap-w-seq-mt` ([`super::swap_w_seq_mt`]) writes anonymous memory
//! with it and `case-lru-file-mmap-read` ([`super::lru_file_mmap_read`])
//! reads a file of its own; each case gives a task its own start (a gate, a
//! mark), which [`Task`] runs before the unit, and its compute per page.

use crate::program::{Op, Program, Sys};
use crate::sim::Sim;
use std::collections::BTreeMap;

/// What a `usemem` unit maps: anonymous memory, which it writes, or a file of
/// its own (`-f`, `--readonly`), which it reads.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mapping {
    /// Anonymous memory, mapped writable and written.
    Anon,
    /// The file, mapped read-only and read.
    File(u32),
}

/// `do_units` with one unit, from its `mmap` on: maps `pages` pages, touches
/// each once in address order, `chunk` pages a touch, each touch followed by
/// its loop's compute (`cycles` a page), marks `"end"`, unmaps and exits.
pub(crate) struct Unit {
    mapping: Mapping,
    pages: u64,
    chunk: u64,
    cycles: u64,
    addr: u64,
    done: u64,
    stage: Stage,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    Map,
    Touch,
    Compute,
    End,
    Unmap,
    Exit,
}

impl Unit {
    /// Returns the unit of `pages` pages of `mapping`.
    pub(crate) fn new(mapping: Mapping, pages: u64, chunk: u64, cycles: u64) -> Unit {
        Unit { mapping, pages, chunk, cycles, addr: 0, done: 0, stage: Stage::Map }
    }
}

impl Program for Unit {
    fn next(&mut self, ret: u64) -> Op {
        let write = self.mapping == Mapping::Anon;
        match self.stage {
            Stage::Map => {
                self.stage = Stage::Touch;
                match self.mapping {
                    Mapping::Anon => Op::Sys(Sys::Mmap { pages: self.pages, write }),
                    Mapping::File(file) => Op::Sys(Sys::MmapFile { file, pages: self.pages, write, private: false }),
                }
            }
            Stage::Touch => {
                if self.done == 0 && self.addr == 0 {
                    self.addr = ret;
                }
                let n = self.chunk.min(self.pages - self.done);
                self.stage = Stage::Compute;
                Op::Touch { va: self.addr + self.done * 4096, pages: n, write }
            }
            Stage::Compute => {
                let n = self.chunk.min(self.pages - self.done);
                self.done += n;
                self.stage = if self.done == self.pages { Stage::End } else { Stage::Touch };
                Op::Compute(n * self.cycles)
            }
            Stage::End => {
                self.stage = Stage::Unmap;
                Op::Mark("end")
            }
            Stage::Unmap => {
                self.stage = Stage::Exit;
                Op::Sys(Sys::Munmap { va: self.addr, pages: self.pages })
            }
            Stage::Exit => Op::Exit,
        }
    }
}

/// A `usemem` task as its case starts it: one op of the case's own first (a
/// wait at its gate, a mark of its start), then its unit.
pub(crate) struct Task {
    start: Option<Op>,
    unit: Unit,
}

impl Task {
    /// Returns the task that runs `start`, then `unit`.
    pub(crate) fn new(start: Op, unit: Unit) -> Task {
        Task { start: Some(start), unit }
    }
}

impl Program for Task {
    fn next(&mut self, ret: u64) -> Op {
        match self.start.take() {
            Some(op) => op,
            None => self.unit.next(ret),
        }
    }
}

/// Returns `usemem`'s `throughput` (KB/s summed over the units, each ending at
/// one of `ends`) and `elapsed_s` (to the last end) of units of `pages` pages
/// each, timed from `start`.
pub(crate) fn timing(sim: &Sim, pages: u64, start: u64, ends: &[u64]) -> BTreeMap<String, f64> {
    let bytes = pages * 4096;
    // do_unit's count: the unit, plus bytes / 8 for the mapping.
    let counted = (bytes + bytes / 8) as f64;
    let g = sim.ghz();
    let us = |end: u64| ((end - start) as f64 / g / 1e3).max(1e-3);
    let throughput: f64 = ends.iter().map(|&e| counted * 1e6 / 1024.0 / us(e)).sum();
    let last = ends.iter().copied().max().unwrap_or(start);
    let mut r = BTreeMap::new();
    r.insert("throughput".to_string(), throughput);
    r.insert("elapsed_s".to_string(), (last - start) as f64 / g / 1e9);
    r
}
