//! `mprotect`'s PTE changes and flushes under each kernel's rule
//! ([`crate::preset::Kernel::mprotect_gathers`], `pte_needs_flush`,
//! `MM_CP_TRY_CHANGE_WRITABLE`), on one CPU: a process writes four pages of a
//! private mapping and four of a shared one, changes their protection, and
//! waits on a pipe nobody writes (its CPU goes idle with its mappings there to
//! read). What one call flushed is the difference between two runs that differ
//! in that call only.

use super::*;
use crate::preset::{self, Arch, Kernel};
use tlbkit_policy::asid::{LinuxArm64, LinuxX86};

/// Which mapping a step works on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum On {
    Private,
    Shared,
}

/// A step after the writes.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// `mprotect` of the whole mapping, adding write access or taking it away.
    Protect(On, bool),
    /// `madvise(MADV_DONTNEED)` of one page of the private mapping.
    Zap(u64),
}

struct Script {
    steps: Vec<Step>,
    at: usize,
    private: u64,
    shared: u64,
}

impl Program for Script {
    fn next(&mut self, ret: u64) -> Op {
        self.at += 1;
        match self.at {
            1 => Op::Sys(Sys::Mmap { pages: 4, write: true }),
            2 => {
                self.private = ret;
                Op::Touch { va: ret, pages: 4, write: true }
            }
            3 => Op::Sys(Sys::MmapFile { file: 0, pages: 4, write: true, private: false }),
            4 => {
                self.shared = ret;
                Op::Touch { va: ret, pages: 4, write: true }
            }
            n if n - 5 < self.steps.len() => match self.steps[n - 5] {
                Step::Protect(on, write) => {
                    let va = if on == On::Private { self.private } else { self.shared };
                    Op::Sys(Sys::Mprotect { va, pages: 4, write })
                }
                Step::Zap(page) => Op::Sys(Sys::Madvise { va: self.private + page * 4096, pages: 1 }),
            },
            n if n - 5 == self.steps.len() => Op::Sys(Sys::Pipe),
            n if n - 5 == self.steps.len() + 1 => Op::Sys(Sys::PipeRead(ret as u32)),
            _ => Op::Exit,
        }
    }
}

/// What a run left: the invalidations issued (local or broadcast), and which PTEs of the
/// private and of the shared mapping are writable.
#[derive(Debug, PartialEq, Eq)]
struct Left {
    invalidations: u64,
    private: [bool; 4],
    shared: [bool; 4],
    /// Whether the private mapping's PTEs still hold a change as their
    /// table's patch (`pagetable::patch`), not yet written one by one.
    private_patched: bool,
}

/// Runs `steps` on one CPU of `preset` running `kernel`, with `--set
/// pte_needs_flush` as `rule`.
fn run(preset: &str, kernel: Kernel, rule: Option<bool>, steps: &[Step]) -> Left {
    let mut p = preset::named(preset);
    p.kernel = kernel;
    let kernel = KernelChoices::default().with(crate::toggle::PTE_NEEDS_FLUSH, rule);
    let cfg = SimConfig { max_mms: 4, max_events: 10_000, kernel, ..SimConfig::quiet(p, 1, 1) };
    let mut sim = match cfg.preset.arch {
        Arch::Arm64 => Sim::new(cfg, LinuxArm64::new(1, 4, 16, false).unwrap()),
        Arch::X86_64 => Sim::new(cfg, LinuxX86::new(1, 4, true)),
    };
    sim.spawn(Box::new(Script { steps: steps.to_vec(), at: 0, private: 0, shared: 0 })).unwrap();
    while !sim.is_lazy(0) {
        assert!(sim.step(), "cpu0 never went idle from the process");
    }
    assert!(sim.error.is_none(), "{:?}", sim.error);
    let Root::Mm(mm) = sim.m.cpus[0].root else { panic!("cpu0 is lazy, so a user root is loaded") };
    let root = sim.kern.mm(mm).root();
    let vma = |file: bool| *sim.kern.mm(mm).vmas().iter().find(|v| v.pages == 4 && v.file.is_some() == file).unwrap();
    let writable = |v: Vma| {
        std::array::from_fn(|i| {
            sim.pt.walk(root, v.start + i as u64 * 4096).is_some_and(|w| sim.pt.pte(w.pte).writable())
        })
    };
    let private_patched = sim.pt.walk(root, vma(false).start).is_some_and(|w| sim.pt.patched(w.pte));
    Left {
        invalidations: sim.m.counters.local_invalidations + sim.m.counters.broadcast_invalidations,
        private: writable(vma(false)),
        shared: writable(vma(true)),
        private_patched,
    }
}

/// Returns the invalidations the last of `steps` issued, and what the run left.
fn last(preset: &str, kernel: Kernel, rule: Option<bool>, steps: &[Step]) -> (u64, Left) {
    let before = run(preset, kernel, rule, &steps[..steps.len() - 1]).invalidations;
    let after = run(preset, kernel, rule, steps);
    (after.invalidations - before, after)
}

const RO: [bool; 4] = [false; 4];
const RW: [bool; 4] = [true; 4];
use On::{Private, Shared};
use Step::{Protect, Zap};

const DOWN_UP: [Step; 2] = [Protect(Private, false), Protect(Private, true)];
const SHARED_DOWN_UP: [Step; 2] = [Protect(Shared, false), Protect(Shared, true)];

#[test]
fn x86_stops_flushing_upgrades_that_change_nothing_from_v5_19() {
    let down = |k| last("skylake", k, None, &DOWN_UP[..1]).0;
    let up = |k| last("skylake", k, None, &DOWN_UP);
    let shared_up = |k| last("skylake", k, None, &SHARED_DOWN_UP);
    for k in [Kernel::Linux(5, 15), Kernel::Linux(5, 19), Kernel::Linux(6, 13)] {
        assert_eq!(down(k), 4, "{k:?}: a downgrade flushes its 4 pages");
        // A shared mapping's PTEs become writable, a change x86 flushes.
        let (n, left) = shared_up(k);
        assert_eq!((n, left.shared), (4, RW), "{k:?}");
    }
    // v5.15: the upgrade leaves private PTEs read-only and flushes the range.
    let (n, left) = up(Kernel::Linux(5, 15));
    assert_eq!((n, left.private), (4, RO));
    // v5.19: it changed nothing, so it flushes nothing.
    let (n, left) = up(Kernel::Linux(5, 19));
    assert_eq!((n, left.private), (0, RO));
    // v6.0 on: written pages of this process only become writable at once,
    // and that change is flushed.
    let (n, left) = up(Kernel::Linux(6, 13));
    assert_eq!((n, left.private), (4, RW));
}

#[test]
fn arm64_flushes_every_present_pte_until_its_own_pte_needs_flush() {
    // An upgrade of writable PTEs changes nothing: the generic rule flushes
    // them anyway, arm64's own (v6.19, or `--set pte_needs_flush=on`) does not.
    let again = |k, rule| last("altra", k, rule, &[Protect(Private, true)]).0;
    assert!(again(Kernel::Linux(6, 18), None) > 0);
    assert_eq!(again(Kernel::Linux(6, 19), None), 0);
    assert_eq!(again(Kernel::Linux(6, 18), Some(true)), 0);
    assert!(again(Kernel::Linux(6, 19), Some(false)) > 0);
    // Both flush an upgrade that changes the write bit.
    for k in [Kernel::Linux(6, 18), Kernel::Linux(6, 19)] {
        let (n, left) = last("altra", k, None, &DOWN_UP);
        assert!(n > 0 && left.private == RW, "{k:?}: {n} {left:?}");
    }
}

#[test]
fn a_gathered_flush_covers_only_the_span_of_the_ptes_it_picked() {
    // With the first and last page zapped, an upgrade under v6.13 changes and
    // flushes the middle two; v5.15 flushes the whole range.
    let steps = [Protect(Private, false), Zap(0), Zap(3), Protect(Private, true)];
    let (n, left) = last("skylake", Kernel::Linux(6, 13), None, &steps);
    assert_eq!((n, left.private), (2, [false, true, true, false]));
    let (n, left) = last("skylake", Kernel::Linux(5, 15), None, &steps);
    assert_eq!((n, left.private), (4, RO));
}

#[test]
fn mprotect_changes_a_tables_ptes_as_one_patch() {
    // Both calls change every PTE of the private mapping; written one by one,
    // the origin's `mprotect_threaded` at 4,096 CPUs cost the host some 15
    // times as long (`bench/2026-11-29-sim-4096-mprotect-patches.md`).
    let left = run("altra", Kernel::Linux(6, 9), None, &DOWN_UP);
    assert_eq!(left.private, RW);
    assert!(left.private_patched, "the upgrade's PTEs were written one by one");
}
