//! Linux x86 v6.13 with the hooks an unmap's flush calls counted, and the
//! threads and steps the tests of those flushes (`batched_unmap_flush.rs`,
//! `x86_reclaim_batch.rs`) run it with.

use std::sync::atomic::{AtomicU64, Ordering};
use tlbkit_policy::asid::linux_x86_615::Kernel;
use tlbkit_policy::asid::LinuxX86v615;
use tlbkit_policy::wrap::Wrap;
use tlbkit_policy::{Hw, MmId, Policy, VirtAddr};
use tlbkit_sim::program::{Op, Program, Sys};
use tlbkit_sim::sim::Sim;

/// Linux x86 v6.13 on `ncpus` CPUs with its calls of `tlbbatch_add_pending`,
/// `flush_batch`, `flush_batched_pending` and `flush_range` counted.
pub struct Counted(LinuxX86v615, [AtomicU64; 4]);

impl Counted {
    /// Returns the policy for `ncpus` CPUs and 16 address spaces.
    pub fn new(ncpus: usize) -> Self {
        Counted(LinuxX86v615::new(ncpus, 16, Kernel::V613), Default::default())
    }
}

impl Wrap for Counted {
    type Inner = LinuxX86v615;
    fn inner(&self) -> &LinuxX86v615 {
        &self.0
    }
    fn tlbbatch_add_pending<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        self.1[0].fetch_add(1, Ordering::Relaxed);
        self.0.tlbbatch_add_pending(hw, mm, va)
    }
    fn flush_batch<H: Hw>(&self, hw: &H, mms: &[MmId]) {
        self.1[1].fetch_add(1, Ordering::Relaxed);
        self.0.flush_batch(hw, mms)
    }
    fn flush_batched_pending<H: Hw>(&self, hw: &H, mm: MmId) {
        self.1[2].fetch_add(1, Ordering::Relaxed);
        self.0.flush_batched_pending(hw, mm)
    }
    fn flush_range<H: Hw>(&self, hw: &H, mm: MmId, start: VirtAddr, pages: u64) {
        self.1[3].fetch_add(1, Ordering::Relaxed);
        self.0.flush_range(hw, mm, start, pages)
    }
}

/// Returns the calls the [`Counted`] policy of `sim` counted since the last
/// take, in [`Counted`]'s order, and starts again from zero.
pub fn take_calls(sim: &Sim) -> [u64; 4] {
    sim.policy::<Counted>().expect("the policy run").1.each_ref().map(|c| c.swap(0, Ordering::Relaxed))
}

/// Steps `sim` until a thread has left mark `m`.
pub fn run_to_mark(sim: &mut Sim, m: &str) {
    while sim.mark(m).is_none() {
        assert!(sim.step(), "the run ended before mark {m}");
    }
}

/// Maps 64 pages, writes them, starts `spinners` threads computing on other
/// CPUs in the mm, gives them time to start on their CPUs, then runs the
/// operations its script gives for the pages' address, one at a time.
pub struct Spinning<S> {
    step: usize,
    spinners: usize,
    script: S,
    rest: std::vec::IntoIter<Op>,
}

impl<S: Fn(u64) -> Vec<Op>> Spinning<S> {
    /// Returns the thread with `spinners` spinners and `script`.
    pub fn new(spinners: usize, script: S) -> Self {
        Spinning { step: 0, spinners, script, rest: Vec::new().into_iter() }
    }
}

impl<S: Fn(u64) -> Vec<Op>> Program for Spinning<S> {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        match self.step {
            1 => Op::Sys(Sys::Mmap { pages: 64, write: true }),
            2 => {
                self.rest = (self.script)(ret).into_iter();
                Op::Touch { va: ret, pages: 64, write: true }
            }
            s if s <= 2 + self.spinners => Op::Sys(Sys::CloneOn(s - 2, Box::new(Spinner(0)))),
            s if s == 3 + self.spinners => Op::Compute(100_000),
            _ => self.rest.next().unwrap_or(Op::Exit),
        }
    }
}

/// A thread that computes for a while on its CPU, running the mm.
pub struct Spinner(pub u32);

impl Program for Spinner {
    fn next(&mut self, _ret: u64) -> Op {
        self.0 += 1;
        if self.0 > 400 {
            return Op::Exit;
        }
        Op::Compute(20_000)
    }
}
