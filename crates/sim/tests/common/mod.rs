//! Test support shared by the simulator's integration tests: a small machine
//! configuration and a real policy with one kind of flush left out.

pub mod small;

use tlbkit_policy::asid::FreebsdEpoch;
use tlbkit_policy::wrap::Wrap;
use tlbkit_policy::{Hw, MmId, Policy, VirtAddr};
use tlbkit_sim::preset;
use tlbkit_sim::sim::SimConfig;

/// Returns a `cortex-a72` machine of `ncpus` with no speculation and no migration.
pub fn config(ncpus: usize, seed: u64, strict: bool) -> SimConfig {
    SimConfig { strict, ..SimConfig::quiet(preset::named("cortex-a72"), ncpus, seed) }
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
