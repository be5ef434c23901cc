//! Test support shared by the simulator's integration tests: a small machine
//! configuration and a real policy with one kind of flush left out.

use tlbkit_policy::asid::FreebsdEpoch;
use tlbkit_policy::{Hw, MmId, Policy, VirtAddr};
use tlbkit_sim::preset;
use tlbkit_sim::sim::SimConfig;

/// Returns a `cortex-a72` machine of `ncpus` with no speculation and no migration.
pub fn config(ncpus: usize, seed: u64, strict: bool) -> SimConfig {
    SimConfig { strict, ..SimConfig::quiet(preset::cortex_a72(), ncpus, seed) }
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

impl Policy for Skips {
    fn mm_init(&self, mm: MmId) {
        self.0.mm_init(mm)
    }
    fn mm_release<H: Hw>(&self, hw: &H, mm: MmId) {
        self.0.mm_release(hw, mm)
    }
    fn switch_mm<H: Hw>(&self, hw: &H, next: MmId) {
        self.0.switch_mm(hw, next)
    }
    fn flush_page<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        self.0.flush_page(hw, mm, va)
    }
    fn flush_range<H: Hw>(&self, hw: &H, mm: MmId, start: VirtAddr, pages: u64) {
        if self.1 != Flush::Range {
            self.0.flush_range(hw, mm, start, pages)
        }
    }
    fn flush_mm<H: Hw>(&self, hw: &H, mm: MmId) {
        self.0.flush_mm(hw, mm)
    }
    fn flush_kernel_range<H: Hw>(&self, hw: &H, start: VirtAddr, pages: u64) {
        if self.1 != Flush::Kernel {
            self.0.flush_kernel_range(hw, start, pages)
        }
    }
}
