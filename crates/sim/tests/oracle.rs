//! The oracle catches broken policies, and the real ones stay clean under stress.

use crate::common::{self, config, run_alone, run_clean, Flush, MapThen, Skips};

use tlbkit_policy::asid::FreebsdEpoch;
use tlbkit_policy::{Asid, Barrier, Domain, Hw, MmId, Policy, Root, Scope, Tlbi, VirtAddr};
use tlbkit_sim::program::{Op, Program, Sys, TEXT_VA};
use tlbkit_sim::run::RunSpec;
use tlbkit_sim::sim::Sim;

/// Gives every address space ASID 5 and never invalidates on a switch.
struct SameAsidForAll;

impl Policy for SameAsidForAll {
    fn mm_init(&self, _mm: MmId) {}
    fn mm_release<H: Hw>(&self, _hw: &H, _mm: MmId) {}
    fn switch_mm<H: Hw>(&self, hw: &H, next: MmId) {
        hw.write_root(Root::Mm(next), Asid::new(5, 16).unwrap(), true);
        hw.barrier(Barrier::Isb);
    }
    fn flush_page<H: Hw>(&self, hw: &H, _mm: MmId, va: VirtAddr) {
        hw.tlbi(Tlbi::Va { asid: Asid::new(5, 16).unwrap(), va }, Scope::Broadcast);
        hw.barrier(Barrier::Dsb(Domain::InnerShareable));
    }
    fn flush_mm<H: Hw>(&self, hw: &H, _mm: MmId) {
        hw.tlbi(Tlbi::Asid(Asid::new(5, 16).unwrap()), Scope::Broadcast);
        hw.barrier(Barrier::Dsb(Domain::InnerShareable));
    }
    fn flush_kernel_range<H: Hw>(&self, hw: &H, start: VirtAddr, pages: u64) {
        for i in 0..pages {
            hw.tlbi(Tlbi::VaAllAsids { va: start.add_pages(i) }, Scope::Broadcast);
        }
        hw.barrier(Barrier::Dsb(Domain::InnerShareable));
    }
}

/// Maps a page, touches it, unmaps it, and touches it again.
fn use_after_unmap() -> Box<MapThen> {
    MapThen::new(1, |va| vec![Op::Sys(Sys::Munmap { va, pages: 1 }), Op::Touch { va, pages: 1, write: false }])
}

#[test]
fn skipped_munmap_flush_is_caught_as_stale_use() {
    let sim = run_alone(config(1, 7, false), Skips(FreebsdEpoch::new(1, 16, 16), Flush::Range), use_after_unmap());
    let v = &sim.oracle.violations;
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_eq!(v[0].property, "no_stale_use");
    assert!(v[0].change.as_deref().unwrap().starts_with("munmap of 1 page(s)"), "{:?}", v[0].change);
    assert!(v[0].flush.as_deref().unwrap().starts_with("flush_range returned"), "{:?}", v[0].flush);
}

#[test]
fn correct_policy_faults_instead_of_using_the_unmapped_page() {
    let sim = run_alone(config(1, 7, false), FreebsdEpoch::new(1, 16, 16), use_after_unmap());
    assert!(sim.oracle.violations.is_empty());
    assert!(sim.error.as_deref().unwrap().starts_with("segmentation fault"), "{:?}", sim.error);
}

/// Touches its text, then yields, `n` times.
struct TouchAndYield(u32);

impl Program for TouchAndYield {
    fn next(&mut self, _ret: u64) -> Op {
        self.0 += 1;
        match self.0 % 2 {
            _ if self.0 > 8 => Op::Exit,
            1 => Op::Touch { va: TEXT_VA, pages: 1, write: false },
            _ => Op::Sys(Sys::Yield),
        }
    }
}

#[test]
fn one_asid_for_two_live_address_spaces_is_caught_as_alias() {
    let mut sim = Sim::new(config(1, 7, false), SameAsidForAll);
    sim.spawn(Box::new(TouchAndYield(0))).unwrap();
    sim.spawn(Box::new(TouchAndYield(0))).unwrap();
    sim.run();
    let v = &sim.oracle.violations;
    assert!(!v.is_empty());
    assert!(v.iter().all(|x| x.property == "no_asid_alias"), "{v:#?}");
    assert_eq!(v[0].va, format!("{TEXT_VA:#x}"));
}

#[test]
fn distinct_asids_keep_two_address_spaces_apart() {
    let mut sim = Sim::new(config(1, 7, false), FreebsdEpoch::new(1, 16, 16));
    sim.spawn(Box::new(TouchAndYield(0))).unwrap();
    sim.spawn(Box::new(TouchAndYield(0))).unwrap();
    sim.run();
    assert!(sim.oracle.violations.is_empty());
    assert!(sim.error.is_none(), "{:?}", sim.error);
}

/// Returns the spec of a strict `lat_ctx` run with seed 3 on `cpus` CPUs of a
/// `cortex-a72` under `policy` with `sets`.
fn spec(policy: &str, cpus: usize, sets: &[&str]) -> RunSpec {
    RunSpec { seed: 3, ..common::spec("cortex-a72", cpus, policy, "lat_ctx", sets) }
}

#[test]
fn eight_bit_asids_roll_over_without_violations_even_strict() {
    for (cpus, migration) in [(1, "off"), (4, "on")] {
        let m = format!("migration={migration}");
        let out = run_clean(&spec(
            "arm64-freebsd-asid",
            cpus,
            &["asid_bits=8", "procs=300", "rounds=4", "spec_rate=0.2", &m],
        ));
        assert!(out.metrics.asid_rollovers > 0, "cpus {cpus}: no rollover");
    }
}

#[test]
fn noasid_baseline_is_clean_under_strict_with_migration() {
    let out = run_clean(&spec("arm64-noasid", 4, &["procs=12", "rounds=5", "migration=on", "spec_rate=0.2"]));
    assert!(out.metrics.broadcast_invalidations > 0);
}

/// A kernel thread: touches a kernel page and yields, a few times.
struct KernelWorker(u32, u64);

impl Program for KernelWorker {
    fn next(&mut self, _ret: u64) -> Op {
        self.0 += 1;
        match self.0 {
            n if n > 6 => Op::Exit,
            n if n % 2 == 1 => Op::Touch { va: self.1, pages: 1, write: true },
            _ => Op::Sys(Sys::Yield),
        }
    }
}

#[test]
fn kernel_thread_runs_on_the_kernel_address_space() {
    let mut sim = Sim::new(config(1, 7, false), FreebsdEpoch::new(1, 16, 16));
    let page = sim.kernel_page();
    sim.spawn(Box::new(TouchAndYield(0))).unwrap();
    sim.spawn_kernel_thread(Box::new(KernelWorker(0, page)), 0);
    // Run until the kernel thread is on the CPU: the loaded address space is the kernel's.
    let mut saw_kernel = false;
    let mut saw_user = false;
    while sim.step() {
        match sim.loaded_mm(0) {
            m if m == MmId::KERNEL => saw_kernel = true,
            _ => saw_user = true,
        }
    }
    assert!(saw_kernel && saw_user);
    assert!(sim.error.is_none(), "{:?}", sim.error);
    assert!(sim.oracle.violations.is_empty());
    assert_eq!(sim.live_threads(), 0);
}

#[test]
fn arm64_linux_rolls_over_repeatedly_without_violations_even_strict() {
    let out =
        run_clean(&spec("arm64-linux", 4, &["asid_bits=8", "procs=300", "rounds=4", "spec_rate=0.2", "migration=on"]));
    assert!(out.metrics.asid_rollovers >= 2, "rollovers: {}", out.metrics.asid_rollovers);
}

#[test]
fn arm64_linux_kpti_rolls_over_without_violations_even_strict() {
    let out = run_clean(&spec(
        "arm64-linux",
        4,
        &["asid_bits=8", "kpti=on", "procs=200", "rounds=3", "spec_rate=0.2", "migration=on"],
    ));
    assert!(out.metrics.asid_rollovers >= 2, "rollovers: {}", out.metrics.asid_rollovers);
}

#[test]
fn x86_pcid_with_more_mms_than_slots_is_clean_even_strict() {
    let out = run_clean(&RunSpec {
        machine: "skylake".into(),
        ..spec("x86-linux-pcid", 4, &["procs=40", "rounds=6", "spec_rate=0.2", "migration=on", "sockets=2"])
    });
    // Ten address spaces per CPU cycle through six slots: CR3 writes that flush.
    assert!(out.metrics.full_flushes > out.metrics.context_switches / 4, "{:?}", out.metrics);
    assert!(out.metrics.ipi.ipis_sent > 0, "fork and exit flush other CPUs by IPI: {:?}", out.metrics);
}

#[test]
fn x86_nopcid_is_clean_even_strict() {
    run_clean(&RunSpec {
        machine: "skylake".into(),
        ..spec("x86-linux-nopcid", 4, &["procs=12", "rounds=5", "spec_rate=0.2", "migration=on", "sockets=2"])
    });
}

/// Each round: `mprotect`s a buffer read-only and back (two flushes whose
/// obligations nothing refers to once they return), then maps a page, writes
/// it, unmaps it and reads it again (with the range flush skipped, a stale use
/// that names the `munmap`'s obligation through the PTE's floor).
struct ProtectAndReuse {
    step: u32,
    round: u32,
    buf: u64,
    page: u64,
}

impl Program for ProtectAndReuse {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        match self.step {
            1 => return Op::Sys(Sys::Mmap { pages: 2, write: true }),
            2 => {
                self.buf = ret;
                return Op::Touch { va: self.buf, pages: 2, write: true };
            }
            _ => {}
        }
        if self.round == 30 {
            return Op::Exit;
        }
        match (self.step - 3) % 6 {
            0 => Op::Sys(Sys::Mprotect { va: self.buf, pages: 2, write: false }),
            1 => Op::Sys(Sys::Mprotect { va: self.buf, pages: 2, write: true }),
            2 => Op::Sys(Sys::Mmap { pages: 1, write: true }),
            3 => {
                self.page = ret;
                Op::Touch { va: self.page, pages: 1, write: true }
            }
            4 => Op::Sys(Sys::Munmap { va: self.page, pages: 1 }),
            _ => {
                self.round += 1;
                Op::Touch { va: self.page, pages: 1, write: false }
            }
        }
    }
}

/// Runs [`ProtectAndReuse`] with the range flushes skipped, collecting the
/// oracle's obligations after `collect_after` openings (see `Oracle::collect`).
fn protect_and_reuse(collect_after: Option<usize>) -> Sim {
    let mut sim = Sim::new(config(1, 3, true), Skips(FreebsdEpoch::new(1, 16, 16), Flush::Range));
    if let Some(n) = collect_after {
        sim.oracle.set_collect_after(n);
    }
    sim.spawn(Box::new(ProtectAndReuse { step: 0, round: 0, buf: 0, page: 0 })).unwrap();
    sim.run();
    assert!(sim.error.is_none(), "{:?}", sim.error);
    sim
}

#[test]
fn collecting_obligations_changes_no_violation_and_bounds_the_table() {
    let kept = protect_and_reuse(None);
    let collected = protect_and_reuse(Some(1));
    let text = |s: &Sim| s.oracle.violations.iter().map(|v| v.to_string()).collect::<Vec<_>>();
    // Under --strict, the skipped flushes are seen as held (the mprotects' and
    // the munmaps') and as used (the reads after munmap).
    let by = |s: &Sim, p: &str| s.oracle.by_property.get(p).copied().unwrap_or(0);
    assert!(by(&kept, "no_stale_use") >= 3 && by(&kept, "no_stale_held") > 30, "{:?}", kept.oracle.by_property);
    assert!(text(&kept).iter().any(|v| v.contains("change: munmap of 1 page(s)")));
    assert!(text(&kept).iter().any(|v| v.contains("change: mprotect of 2 page(s)")));
    assert_eq!(text(&kept), text(&collected));
    assert_eq!(kept.oracle.by_property, collected.oracle.by_property);
    assert_eq!(kept.oracle.count, collected.oracle.count);
    assert_eq!(kept.stats.events, collected.stats.events);
    // The 90 flushes of the rounds opened 90 obligations, and the table keeps
    // them all; collected, it holds the 30 munmaps' (each named by its PTE's
    // floor), the buffer's first downgrade and the few of the set-up.
    let (all, live) = (kept.oracle.obligations.len(), collected.oracle.obligations.len());
    assert!(all > 90, "{all}");
    assert!(live < all / 2, "{live} of {all}");
}
