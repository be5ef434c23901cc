//! Test support shared by the simulator's integration tests: a small machine
//! configuration, a run of one program, a real policy with one kind of flush
//! left out, and the spec and checked run of a strict run.

pub mod cells;
pub mod cores;
pub mod small;
pub mod x86_counted;

use tlbkit_policy::asid::FreebsdEpoch;
use tlbkit_policy::wrap::Wrap;
use tlbkit_policy::{Hw, MmId, Policy, VirtAddr};
use tlbkit_sim::preset;
use tlbkit_sim::program::{Op, Program, Sys};
use tlbkit_sim::run::{run, RunOutput, RunSpec};
use tlbkit_sim::sim::{Sim, SimConfig};

/// Returns a `cortex-a72` machine of `ncpus` with no speculation and no migration.
pub fn config(ncpus: usize, seed: u64, strict: bool) -> SimConfig {
    SimConfig { strict, ..SimConfig::quiet(preset::named("cortex-a72"), ncpus, seed) }
}

/// Returns the simulation of `program` alone on `cfg` under `policy`, run to
/// its end: the set-up of the tests that judge one program's run by its
/// marks, statistics, error and the oracle's findings.
pub fn run_alone(cfg: SimConfig, policy: impl Policy + 'static, program: Box<dyn Program>) -> Sim {
    let mut sim = Sim::new(cfg, policy);
    sim.spawn(program).unwrap();
    sim.run();
    sim
}

/// Returns the spec of a strict run, with seed 1, of `workload` with `sets` on
/// `cpus` CPUs of `machine` under `policy`.
pub fn spec(
    machine: &str,
    cpus: usize,
    policy: &str,
    workload: &str,
    sets: impl IntoIterator<Item = impl ToString>,
) -> RunSpec {
    RunSpec {
        machine: machine.into(),
        cpus,
        policy: policy.into(),
        workload: workload.into(),
        sets: sets.into_iter().map(|s| s.to_string()).collect(),
        seed: 1,
        strict: true,
    }
}

/// Returns [`spec`] without `--strict` (for a run the simulator refuses).
pub fn loose_spec(machine: &str, cpus: usize, policy: &str, workload: &str, sets: &[&str]) -> RunSpec {
    RunSpec { strict: false, ..spec(machine, cpus, policy, workload, sets) }
}

/// Runs `spec`, which must succeed and find no violation; returns its output.
pub fn run_clean(spec: &RunSpec) -> RunOutput {
    let out = run(spec).unwrap_or_else(|e| panic!("{}: {e}", spec.command()));
    assert_eq!(out.violations_total, 0, "{}: {:#?}", spec.command(), out.violations);
    out
}

/// Runs [`spec`]'s strict run, which must find no violation; returns its output.
pub fn strict(machine: &str, cpus: usize, policy: &str, workload: &str, sets: &[&str]) -> RunOutput {
    run_clean(&spec(machine, cpus, policy, workload, sets))
}

/// A thread that maps `pages` pages and writes them, then runs the operations
/// its script gives for the mapping's address, one at a time, and exits.
pub struct MapThen {
    step: u32,
    pages: u64,
    script: fn(u64) -> Vec<Op>,
    rest: std::vec::IntoIter<Op>,
}

impl MapThen {
    /// Returns the thread of `pages` pages and `script`.
    pub fn new(pages: u64, script: fn(u64) -> Vec<Op>) -> Box<Self> {
        Box::new(MapThen { step: 0, pages, script, rest: Vec::new().into_iter() })
    }
}

impl Program for MapThen {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        match self.step {
            1 => Op::Sys(Sys::Mmap { pages: self.pages, write: true }),
            2 => {
                self.rest = (self.script)(ret).into_iter();
                Op::Touch { va: ret, pages: self.pages, write: true }
            }
            _ => self.rest.next().unwrap_or(Op::Exit),
        }
    }
}

/// Which flush [`Skips`] leaves out.
#[derive(Clone, Copy, PartialEq, Eq)]
#[allow(dead_code)] // each test binary uses its own subset
pub enum Flush {
    /// Ranged user flushes (what `munmap`, `mprotect` and `madvise` use).
    Range,
    /// Kernel-range flushes (the kernel map cycle's).
    Kernel,
}

/// FreeBSD's epoch allocator with one kind of flush left out.
#[allow(dead_code)] // each test binary uses its own subset
pub struct Skips(pub FreebsdEpoch, pub Flush);

impl Wrap for Skips {
    type Inner = FreebsdEpoch;
    fn inner(&self) -> &FreebsdEpoch {
        &self.0
    }
    fn flush_range<H: Hw>(&self, hw: &H, mm: MmId, start: VirtAddr, pages: u64) {
        if self.1 != Flush::Range {
            self.0.flush_range(hw, mm, start, pages)
        }
    }
    fn flush_kernel_range<H: Hw>(&self, hw: &H, start: VirtAddr, pages: u64) {
        if self.1 != Flush::Kernel {
            self.0.flush_kernel_range(hw, start, pages)
        }
    }
}
