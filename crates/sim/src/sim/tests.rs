//! The oracle's rule for lazy CPUs, on machine states a faithful policy never
//! reaches on its own (the simulated kernel frees page tables only once no
//! CPU's root points at them).

use super::*;
use crate::preset;
use tlbkit_policy::asid::LinuxX86;

/// A process that writes a page and then waits on a pipe nobody writes: its CPU
/// goes idle with the process's address space still loaded.
struct WriteThenWait {
    step: u32,
}

impl Program for WriteThenWait {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        match self.step {
            1 => Op::Sys(Sys::Mmap { pages: 1, write: true }),
            2 => Op::Touch { va: ret, pages: 1, write: true },
            3 => Op::Sys(Sys::Pipe),
            4 => Op::Sys(Sys::PipeRead(ret as u32)),
            _ => Op::Exit,
        }
    }
}

/// Returns a 2-CPU x86 Linux (PCID) machine whose cpu0 went idle, lazily, from
/// a process that wrote a page.
fn lazy_cpu0() -> Sim {
    let preset = preset::named("westmere");
    let cfg = SimConfig { strict: true, max_mms: 4, max_events: 10_000, ..SimConfig::quiet(preset, 2, 1) };
    let mut sim = Sim::new(cfg, LinuxX86::new(2, 4, true));
    sim.spawn(Box::new(WriteThenWait { step: 0 })).unwrap();
    while !sim.is_lazy(0) {
        assert!(sim.step(), "cpu0 never went idle from the process");
    }
    assert!(sim.error.is_none() && sim.oracle.violations.is_empty(), "{:?}", sim.oracle.violations);
    sim
}

/// Returns a last-level table of a tree built and freed: a freed page-table page.
fn freed_table(sim: &mut Sim) -> TableRef {
    let root = sim.pt.new_root();
    let leaf = sim.pt.ensure_leaf(root, 0x4000_0000);
    let t = sim.pt.table_of(leaf);
    sim.pt.free_tree(root);
    t
}

#[test]
fn a_policys_full_barrier_costs_what_the_kernels_smp_mb_runs() {
    // milan runs v6.15: smp_mb() is a locked add, an atomic that hits.
    let p = preset::named("milan");
    let sim = Sim::new(SimConfig::quiet(p.clone(), 1, 1), LinuxX86::new(1, 4, true));
    assert_eq!(sim.m.costs.full_barrier, p.costs.lines.atomic_hit);
    // haswell2s runs v4.10: MFENCE, the preset's full_barrier.
    let p = preset::named("haswell2s");
    let sim = Sim::new(SimConfig::quiet(p.clone(), 1, 1), LinuxX86::new(1, 4, true));
    assert_eq!(sim.m.costs.full_barrier, p.costs.full_barrier);
    // A core's threads sharing it charge the same barrier (their costs
    // stretched from the machine's, not the preset's).
    let p = preset::named("icx8336c");
    let mut smt = smt::Smt::of(&p, None).expect("two threads a core");
    for shared in [false, true] {
        assert_eq!(smt.begin(shared).full_barrier, p.costs.lines.atomic_hit);
    }
}

#[test]
fn a_lazy_cpus_walk_through_a_freed_table_page_is_a_violation() {
    let mut sim = lazy_cpu0();
    let (asid, now) = (sim.m.cpus[0].asid, sim.end);
    let Root::Mm(mm) = sim.m.cpus[0].root else { panic!("cpu0 is lazy, so a user root is loaded") };
    let uid = sim.kern.mm(mm).uid();
    let table = freed_table(&mut sim);
    sim.m.pwc_fill(0, 0x4000_0000, asid, false, table, uid, 0);
    sim.strict_scan(0, now);
    let v = &sim.oracle.violations;
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_eq!((v[0].property, v[0].cpu), ("no_stale_held", 0));
    assert!(v[0].detail.starts_with("lazy, caches a walk") && v[0].detail.contains("freed page-table page"), "{v:#?}");
    // The same entry under another tag is not usable by what cpu0 runs.
    let mut sim = lazy_cpu0();
    let table = freed_table(&mut sim);
    sim.m.pwc_fill(0, 0x4000_0000, asid + 1, false, table, uid, 0);
    sim.strict_scan(0, now);
    assert!(sim.oracle.violations.is_empty(), "{:#?}", sim.oracle.violations);
}

#[test]
fn a_lazy_cpus_stale_leaf_entry_is_exempt_and_judged_once_it_runs_the_mm_again() {
    let mut sim = lazy_cpu0();
    let now = sim.end;
    let Root::Mm(mm) = sim.m.cpus[0].root else { panic!("cpu0 is lazy, so a user root is loaded") };
    // Supersede every leaf entry cpu0 holds for the process, as a flushed change
    // the lazy CPU was skipped for would.
    let mut held = Vec::new();
    sim.m.tlb(0).for_each(|e| {
        if e.va() < KERNEL_BASE && e.mm_uid == sim.kern.mm(mm).uid() {
            held.push(e.pte);
        }
    });
    assert!(!held.is_empty(), "cpu0 holds the page it wrote");
    let obl = sim.oracle.open(mm.0, sim.kern.mm(mm).uid(), 0, 1, "mprotect", "flush_range", 2, 1, now);
    sim.oracle.obligations[obl as usize].discharged = Some(now);
    for r in held {
        let ver = sim.pt.pte(r).ver;
        sim.pt.raise_floor(r, ver + 1, obl);
    }
    sim.strict_scan(0, now);
    assert!(sim.oracle.violations.is_empty(), "{:#?}", sim.oracle.violations);
    assert!(sim.oracle.lazy_exempt > 0);
    // Back in the address space without the catch-up flush: judged, and reported.
    sim.scheduler.cpu_mut(0).switched_to(mm);
    sim.strict_scan(0, now);
    assert!(!sim.oracle.violations.is_empty());
    assert!(sim.oracle.violations.iter().all(|v| v.property == "no_stale_held" && v.detail.starts_with("holds an")));
}

/// A process that writes one 64 KB block and then waits on a pipe nobody
/// writes.
struct WriteBlockThenWait {
    step: u32,
    va: u64,
}

impl Program for WriteBlockThenWait {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        match self.step {
            1 => Op::Sys(Sys::Mmap { pages: 16, write: true }),
            2 => {
                self.va = ret;
                Op::Touch { va: ret, pages: 16, write: true }
            }
            3 => Op::Sys(Sys::Pipe),
            4 => Op::Sys(Sys::PipeRead(ret as u32)),
            _ => Op::Exit,
        }
    }
}

/// Returns a 1-CPU arm64 Linux machine with contiguous PTEs whose cpu0 went
/// idle, lazily, from a process that wrote a folded 64 KB block, the block's
/// address and its first PTE.
fn lazy_cpu0_with_a_block() -> (Sim, u64, PteRef) {
    let contpte = ContpteConfig { mode: ContMode::On, ..ContpteConfig::default() };
    let cfg = SimConfig {
        strict: true,
        max_mms: 4,
        max_events: 10_000,
        contpte,
        ..SimConfig::quiet(preset::named("altra"), 1, 1)
    };
    let mut sim = Sim::new(cfg, tlbkit_policy::asid::LinuxArm64::new(1, 4, 16, false).unwrap());
    sim.spawn(Box::new(WriteBlockThenWait { step: 0, va: 0 })).unwrap();
    while !sim.is_lazy(0) {
        assert!(sim.step(), "cpu0 never went idle from the process");
    }
    assert!(sim.error.is_none() && sim.oracle.violations.is_empty(), "{:?}", sim.oracle.violations);
    let Root::Mm(mm) = sim.m.cpus[0].root else { panic!("cpu0 is lazy, so a user root is loaded") };
    let root = sim.kern.mm(mm).root();
    let v = *sim.kern.mm(mm).vmas().iter().find(|v| v.pages == 16 && sim.pt.walk(root, v.start).is_some()).unwrap();
    let base = sim.pt.walk(root, v.start).unwrap().pte;
    assert!((0..16).all(|i| sim.pt.pte(base + i).valid_cont() && sim.pt.pte(base + i).writable()));
    (sim, v.start, base)
}

/// Write-protects PTE 3 of the block at `base` as `wrprotect_ptes` in place
/// does; with `flushed`, the change's flush has returned.
fn wrprotect_pte_3(sim: &mut Sim, va: u64, base: PteRef, flushed: bool) {
    let now = sim.end;
    let Root::Mm(mm) = sim.m.cpus[0].root else { unreachable!() };
    let seq = sim.oracle.next_seq();
    let obl = sim.oracle.open(mm.0, sim.kern.mm(mm).uid(), va + 3 * 4096, 1, "fork-wrprotect", "flush_mm", seq, 0, now);
    let p = sim.pt.pte_mut(base + 3);
    p.flags &= !P_WRITE;
    p.ver = seq;
    if flushed {
        sim.oracle.obligations[obl as usize].discharged = Some(now);
        sim.pt.raise_floor(base + 3, seq, obl);
    }
    sim.m.tlb(0).invalidate(Inval::All);
}

#[test]
fn a_walk_of_a_block_disagreeing_only_in_write_permission_is_stale_once_the_wrprotect_is_flushed() {
    // Before the flush: the window of contpte_wrprotect_ptes, no conflict, and
    // the writable 64 KB entry the walk of PTE 0 gives may still be written
    // through on page 3.
    let (mut sim, va, base) = lazy_cpu0_with_a_block();
    wrprotect_pte_3(&mut sim, va, base, false);
    let now = sim.end;
    sim.access(0, va, false, now).unwrap();
    assert_eq!(sim.stats.contpte.contpte_fills, 2, "the walk filled a 64 KB entry");
    sim.access(0, va + 3 * 4096, true, now).unwrap();
    assert!(sim.oracle.violations.is_empty(), "{:#?}", sim.oracle.violations);
    // After the flush the block must agree: a writable entry read from it is
    // stale for page 3 (and its use is reported).
    let (mut sim, va, base) = lazy_cpu0_with_a_block();
    wrprotect_pte_3(&mut sim, va, base, true);
    let now = sim.end;
    sim.access(0, va, false, now).unwrap();
    sim.access(0, va + 3 * 4096, true, now).unwrap();
    let v = &sim.oracle.violations;
    assert!(!v.is_empty() && v.iter().all(|v| v.property == "no_stale_use"), "{v:#?}");
    assert!(v[0].va.ends_with("3000"), "{v:#?}");
}

/// LATR (`x86-latr`) on its microbenchmark: each `munmap` is deferred (no
/// shootdown IPI), the other CPUs apply it at their ticks and switches, and the
/// simulated kernel frees the frames only when the policy completes the flush,
/// with no violation under `--strict`.
#[test]
fn latr_defers_munmap_flushes_and_frees_only_on_completion() {
    use crate::workload::{self, Params};
    use tlbkit_policy::asid::Latr;
    let preset = preset::by_name("haswell2s").unwrap();
    let cfg = SimConfig { strict: true, max_mms: 4, max_events: 200_000, ..SimConfig::quiet(preset, 4, 1) };
    let mut sim = Sim::new(cfg, Latr::new(4, 4));
    let mut p: Params =
        workload::by_name("munmap_latency").unwrap().params.iter().map(|d| (d.key.to_string(), d.default)).collect();
    p.insert("iters".to_string(), 20.0);
    workload::setup("munmap_latency", &p, &mut sim, workload::Phase::Main).unwrap();
    let mut held_seen = false;
    while sim.step() {
        // While a flush is pending, none of its frames is on the free list.
        for pf in sim.kern.lazy_held() {
            held_seen = true;
            for &f in &pf.frames {
                assert!(sim.frames.refs(f) > 0, "frame {f} of a pending lazy flush is free");
            }
        }
    }
    assert!(sim.error.is_none(), "{:?}", sim.error);
    assert!(sim.oracle.violations.is_empty(), "{:?}", sim.oracle.violations);
    assert!(sim.stats.lazy_flushes >= 20, "only {} lazy flushes", sim.stats.lazy_flushes);
    assert!(held_seen, "no flush was ever pending");
    let completed = sim.stats.lazy_flushes - sim.kern.lazy_held().len() as u64;
    assert!(completed >= 19, "only {completed} of {} lazy flushes completed", sim.stats.lazy_flushes);
    assert!(sim.stats.ticks > 0);
}

/// A process that maps `pages` pages and calls the range flush on `flushed`
/// pages from the mapping's start.
struct FlushCall {
    pages: u64,
    flushed: u64,
    step: u32,
}

impl Program for FlushCall {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        match self.step {
            1 => Op::Sys(Sys::Mmap { pages: self.pages, write: true }),
            2 => Op::Sys(Sys::FlushRange { va: ret, pages: self.flushed }),
            _ => Op::Exit,
        }
    }
}

#[test]
fn a_flush_call_past_the_mapping_is_an_error() {
    let run = |flushed| {
        let cfg = SimConfig { max_mms: 4, max_events: 10_000, ..SimConfig::quiet(preset::named("westmere"), 1, 1) };
        let mut sim = Sim::new(cfg, LinuxX86::new(1, 4, true));
        sim.spawn(Box::new(FlushCall { pages: 2, flushed, step: 0 })).unwrap();
        while sim.step() {}
        sim.error
    };
    assert_eq!(run(2), None);
    for flushed in [0, 3] {
        let e = run(flushed).unwrap_or_else(|| panic!("flushing {flushed} of 2 mapped pages was taken"));
        assert!(e.starts_with(&format!("a flush call: {flushed} page(s) at ")), "{e}");
    }
}
