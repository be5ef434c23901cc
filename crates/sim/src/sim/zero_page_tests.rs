//! The shared zero page ([`Sim::maps_zero_page`]): a Linux read fault on
//! untouched private anonymous memory maps it read-only and allocates
//! nothing; the first write copies it (a zeroed frame) and flushes the old
//! translation; FreeBSD allocates a zeroed page for the read.

use super::*;
use crate::preset::{self, Kernel};
use tlbkit_policy::asid::LinuxX86;

/// Maps two writable pages, reads them, writes the first if `write`, and
/// waits on a pipe nobody writes (its CPU goes idle with them mapped).
struct ReadThenWait {
    step: u32,
    va: u64,
    write: bool,
}

impl Program for ReadThenWait {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        // Without the write, the steps after the read come one earlier.
        let step = if self.write || self.step < 3 { self.step } else { self.step + 1 };
        match step {
            1 => Op::Sys(Sys::Mmap { pages: 2, write: true }),
            2 => {
                self.va = ret;
                Op::Touch { va: ret, pages: 2, write: false }
            }
            3 => Op::Touch { va: self.va, pages: 1, write: true },
            4 => Op::Sys(Sys::Pipe),
            5 => Op::Sys(Sys::PipeRead(ret as u32)),
            _ => Op::Exit,
        }
    }
}

/// What a run left: the frames of the two pages (if mapped), whether each is
/// writable, the frames in use and the invalidations issued.
fn run(kernel: Kernel, write: bool) -> ([Option<u64>; 2], [bool; 2], usize, u64) {
    let mut p = preset::named("skylake");
    p.kernel = kernel;
    let cfg = SimConfig { max_mms: 4, max_events: 10_000, ..SimConfig::quiet(p, 1, 1) };
    let mut sim = Sim::new(cfg, LinuxX86::new(1, 4, true));
    sim.spawn(Box::new(ReadThenWait { step: 0, va: 0, write })).unwrap();
    while !sim.is_lazy(0) {
        assert!(sim.step(), "cpu0 never went idle from the process");
    }
    assert!(sim.error.is_none() && sim.oracle.violations.is_empty(), "{:?} {:?}", sim.error, sim.oracle.violations);
    let Root::Mm(mm) = sim.m.cpus[0].root else { panic!("cpu0 is lazy, so a user root is loaded") };
    let root = sim.kern.mm(mm).root();
    let va = sim.kern.mm(mm).vmas().iter().find(|v| v.pages == 2 && v.file.is_none()).unwrap().start;
    let pte = |i: u64| sim.pt.walk(root, va + i * 4096).map(|w| sim.pt.pte(w.pte)).filter(|p| p.valid());
    let (a, b) = (pte(0), pte(1));
    let c = sim.m.counters;
    (
        [a.map(|p| p.pfn), b.map(|p| p.pfn)],
        [a.is_some_and(|p| p.writable()), b.is_some_and(|p| p.writable())],
        sim.frames.in_use(),
        c.local_invalidations + c.broadcast_invalidations,
    )
}

#[test]
fn a_linux_read_fault_maps_the_zero_page_and_a_write_copies_it() {
    let linux = Kernel::Linux(6, 13);
    let (pfns, writable, frames, read_only) = run(linux, false);
    assert_eq!(pfns, [Some(ZERO_PFN); 2]);
    assert_eq!(writable, [false; 2]);
    let (pfns, writable, written, flushes) = run(linux, true);
    assert!(pfns[0].is_some_and(|p| p != ZERO_PFN) && pfns[1] == Some(ZERO_PFN), "{pfns:?}");
    assert_eq!(writable, [true, false]);
    assert_eq!(written, frames + 1, "one zeroed frame for the written page");
    assert!(flushes > read_only, "the copy flushes the zero page's translation");
    // FreeBSD's read fault allocates a zeroed page for each.
    let (pfns, _, freebsd, _) = run(Kernel::FreeBsd(14), false);
    assert!(pfns.iter().all(|p| p.is_some_and(|p| p != ZERO_PFN)), "{pfns:?}");
    assert_eq!(freebsd, frames + 2);
}
