use super::*;
use crate::testhw::{a8, cpus_with_barriers, init_mms, Rec, GEN1, GEN2};

/// An 8-bit, 2-CPU machine on the verge of its first rollover: cpu1 runs mm 1
/// (ASID 1), cpu0 has run mms 2..=255 (ASIDs 2..=255) and still runs mm 255.
fn full_8bit() -> (LinuxArm64, Rec, Rec) {
    let p = LinuxArm64::new(2, 400, 8, false).unwrap();
    let cpu0 = Rec::new(0, 2);
    let cpu1 = Rec::new(1, 2);
    init_mms(&p, 1..=255);
    p.switch_mm(&cpu1, MmId(1));
    for mm in 2..=255 {
        p.switch_mm(&cpu0, MmId(mm));
    }
    assert_eq!(p.context_id(MmId(255)), GEN1 | 255);
    assert_eq!(p.generation(), GEN1);
    cpu0.take();
    cpu1.take();
    (p, cpu0, cpu1)
}

#[test]
fn first_switch_allocates_asid_1_without_flushing() {
    let p = LinuxArm64::new(1, 8, 8, false).unwrap();
    let mut hw = Rec::new(0, 1);
    hw.barriers = true;
    p.mm_init(MmId(1));
    p.switch_mm(&hw, MmId(1));
    assert_eq!(p.context_id(MmId(1)), GEN1 | 1);
    assert_eq!(p.active_asid(CpuId(0)), GEN1 | 1);
    assert_eq!(hw.take(), vec!["root Mm(MmId(1)) asid 1 noflush true", "barrier Isb"]);
}

#[test]
fn fast_path_reuses_current_generation_asid_without_lock() {
    let p = LinuxArm64::new(1, 8, 16, false).unwrap();
    let hw = Rec::new(0, 1);
    p.mm_init(MmId(1));
    p.mm_init(MmId(2));
    p.switch_mm(&hw, MmId(1));
    p.switch_mm(&hw, MmId(2));
    hw.take();
    // A pending flush is only noticed under the lock: the fast path must skip it.
    p.cpu_asid_lock.lock().tlb_flush_pending.set(CpuId(0));
    p.switch_mm(&hw, MmId(1));
    assert_eq!(hw.take(), vec!["root Mm(MmId(1)) asid 1 noflush true"]);
    assert_eq!(p.context_id(MmId(1)), (1 << 16) | 1);
    assert_eq!(p.active_asid(CpuId(0)), (1 << 16) | 1);
    assert!(p.cpu_asid_lock.lock().tlb_flush_pending.test(CpuId(0)), "the slow path was taken");
    assert_eq!(p.cpu_asid_lock.lock().cur_idx, 2, "no allocation");
}

#[test]
fn rollover_keeps_reserved_asid() {
    let (p, cpu0, _cpu1) = full_8bit();
    p.mm_init(MmId(256));
    p.switch_mm(&cpu0, MmId(256));
    assert_eq!(p.generation(), GEN2);
    // Both CPUs' running ids are reserved; the new mm takes the first other number.
    assert_eq!(p.reserved_asid(CpuId(0)), GEN1 | 255);
    assert_eq!(p.reserved_asid(CpuId(1)), GEN1 | 1);
    assert_eq!(p.context_id(MmId(256)), GEN2 | 2);
    cpu0.take();
    // mm 1 (running on cpu1 through the rollover) now runs on cpu0 too: it keeps
    // ASID 1 in the new generation and the reservation follows it.
    p.switch_mm(&cpu0, MmId(1));
    assert_eq!(p.context_id(MmId(1)), GEN2 | 1);
    assert_eq!(p.reserved_asid(CpuId(1)), GEN2 | 1);
    assert_eq!(cpu0.take(), vec!["root Mm(MmId(1)) asid 1 noflush true"]);
}

#[test]
fn rollover_keeps_free_old_asid_number() {
    let (p, cpu0, _cpu1) = full_8bit();
    p.mm_init(MmId(256));
    p.switch_mm(&cpu0, MmId(256));
    // mm 100 ran in generation 1 and nowhere at the rollover; 100 is still free.
    p.switch_mm(&cpu0, MmId(100));
    assert_eq!(p.context_id(MmId(100)), GEN2 | 100);
    // mm 2's number went to mm 256, so it takes the next one from the cursor.
    p.switch_mm(&cpu0, MmId(2));
    assert_eq!(p.context_id(MmId(2)), GEN2 | 3);
}

#[test]
fn cpu_in_flush_pending_flushes_locally_before_new_generation_asid() {
    let (p, mut cpu0, mut cpu1) = full_8bit();
    cpu0.barriers = true;
    cpu1.barriers = true;
    p.mm_init(MmId(256));
    p.switch_mm(&cpu0, MmId(256));
    assert_eq!(
        cpu0.take(),
        vec![
            "note AsidRollover",
            "barrier DsbSt(NonShareable)",
            "tlbi All Local",
            "barrier Dsb(NonShareable)",
            "barrier Isb",
            "root Mm(MmId(256)) asid 2 noflush true",
            "barrier Isb",
        ]
    );
    // cpu1 has not switched since: its rollover flush is still pending, and it
    // happens on cpu1, locally, before the first ASID of the new generation.
    assert_eq!(cpu1.take(), Vec::<String>::new());
    p.switch_mm(&cpu1, MmId(3));
    assert_eq!(
        cpu1.take(),
        vec![
            "barrier DsbSt(NonShareable)",
            "tlbi All Local",
            "barrier Dsb(NonShareable)",
            "barrier Isb",
            "root Mm(MmId(3)) asid 3 noflush true",
            "barrier Isb",
        ]
    );
    // Only once.
    p.switch_mm(&cpu1, MmId(4));
    assert_eq!(cpu1.take(), vec!["root Mm(MmId(4)) asid 4 noflush true", "barrier Isb"]);
}

#[test]
fn zero_active_asid_forces_slow_path_after_rollover() {
    // a8ffaaa060b8: cpu1's active_asids entry was zeroed by cpu0's rollover; a
    // switch to an mm of the current generation must not take the fast path
    // (which would skip the pending flush and hide what cpu1 runs).
    let (p, cpu0, cpu1) = full_8bit();
    p.mm_init(MmId(256));
    p.switch_mm(&cpu0, MmId(256));
    assert_eq!(p.active_asid(CpuId(1)), 0);
    p.switch_mm(&cpu1, MmId(256));
    assert_eq!(cpu1.take(), vec!["tlbi All Local", "root Mm(MmId(256)) asid 2 noflush true"]);
    assert_eq!(p.active_asid(CpuId(1)), GEN2 | 2);
}

#[test]
fn zoo_a8ffaaa060b8_alone_takes_the_same_slow_path_as_the_fix() {
    // The unconditional xchg loses a rollover's 0 only if the rollover lands
    // between the generation check and the xchg, where no hardware operation
    // gives a sequential test a hook: the checker's interleavings expose it. Run
    // alone, even into an entry a rollover zeroed, it takes the fix's slow path.
    let run = |p: LinuxArm64| {
        let (cpu0, cpu1) = (Rec::new(0, 2), Rec::new(1, 2));
        init_mms(&p, 1..=256);
        p.switch_mm(&cpu1, MmId(1));
        for mm in 2..=256 {
            p.switch_mm(&cpu0, MmId(mm));
        }
        cpu1.take();
        // cpu0's rollover zeroed cpu1's entry; mm 256 is of the current generation.
        p.switch_mm(&cpu1, MmId(256));
        (cpu1.take(), p.active_asid(CpuId(1)), p.reserved_asid(CpuId(1)))
    };
    let fixed = run(LinuxArm64::new(2, 400, 8, false).unwrap());
    let buggy = run(LinuxArm64::new(2, 400, 8, false).unwrap().with_bug(Bug::LinuxArm64A8ffaaa060b8));
    assert_eq!(fixed.0, vec!["tlbi All Local", "root Mm(MmId(256)) asid 2 noflush true"]);
    assert_eq!(fixed, buggy);
}

/// Flushes a page of mm 2 on cpu0 of [`full_8bit`] while cpu1, at cpu0's `DSB
/// ISHST`, rolls over (mm 256 takes ASID 2) and switches to mm 2, which takes
/// ASID 3. Returns cpu0's log and mm 2's id afterwards.
fn flush_racing_a_rollover(bug: Option<Bug>) -> (Vec<String>, u64) {
    let (p, cpu0, cpu1) = full_8bit();
    let p = std::rc::Rc::new(match bug {
        Some(b) => p.with_bug(b),
        None => p,
    });
    let other = p.clone();
    cpu0.before_barrier(Barrier::DsbSt(Domain::InnerShareable), move || {
        other.mm_init(MmId(256));
        other.switch_mm(&cpu1, MmId(256));
        other.switch_mm(&cpu1, MmId(2));
    });
    p.flush_page(&cpu0, MmId(2), VirtAddr(0x1000));
    (cpu0.take(), p.context_id(MmId(2)))
}

#[test]
fn zoo_5e10f9887ed8_tlbi_uses_the_asid_read_before_the_barrier() {
    let va = VirtAddr(0x1000);
    // Fixed: the id is read after the barrier, so the TLBI is for mm 2's new ASID.
    let (log, id) = flush_racing_a_rollover(None);
    assert_eq!(id, GEN2 | 3);
    assert_eq!(log, vec![format!("tlbi {:?} Broadcast", Tlbi::Va { asid: a8(3), va })]);
    // The bug: the old ASID, now mm 256's; an entry cpu1 cached for mm 2 under
    // ASID 3 from the old PTE survives the flush.
    let (log, id) = flush_racing_a_rollover(Some(Bug::LinuxArm645e10f9887ed8));
    assert_eq!(id, GEN2 | 3);
    assert_eq!(log, vec![format!("tlbi {:?} Broadcast", Tlbi::Va { asid: a8(2), va })]);
}

#[test]
#[should_panic(expected = "applies only to the skip-broadcast policy")]
fn with_bug_rejects_a_skip_broadcast_bug_on_the_stock_policy() {
    let _ = LinuxArm64::new(1, 4, 8, false).unwrap().with_bug(Bug::SkipbcastV1);
}

#[test]
#[should_panic(expected = "one zoo bug at a time")]
fn with_bug_takes_one_bug() {
    let p = LinuxArm64::new(1, 4, 8, false).unwrap().with_bug(Bug::LinuxArm64A8ffaaa060b8);
    let _ = p.with_bug(Bug::LinuxArm645e10f9887ed8);
}

#[test]
fn rollover_never_broadcasts() {
    // One CPU, 8-bit ASIDs: 255 mms fit in the first generation, 254 in each
    // later one (the running mm's number stays reserved), so 1000 new mms take
    // 255 + 254 + 254 + 237: three rollovers.
    let p = LinuxArm64::new(1, 1001, 8, false).unwrap();
    let hw = Rec::new(0, 1);
    let mut log = Vec::new();
    for mm in 1..=1000 {
        p.mm_init(MmId(mm));
        p.switch_mm(&hw, MmId(mm));
        p.flush_page(&hw, MmId(mm), VirtAddr(0x1000));
        log.extend(hw.take());
    }
    assert_eq!(p.generation(), 4 << 8);
    assert_eq!(log.iter().filter(|l| *l == "note AsidRollover").count(), 3);
    assert_eq!(log.iter().filter(|l| *l == "tlbi All Local").count(), 3);
    assert_eq!(log.iter().filter(|l| l.starts_with("tlbi All")).count(), 3);
    // The only broadcasts are the 1000 page flushes.
    assert_eq!(log.iter().filter(|l| l.ends_with("Broadcast")).count(), 1000);
    assert!(log.iter().filter(|l| l.ends_with("Broadcast")).all(|l| l.starts_with("tlbi Va {")));
    assert_eq!(p.context_id(MmId(1000)), (4 << 8) | 237);
}

#[test]
fn pinned_asid_survives_rollover() {
    let p = LinuxArm64::new(1, 600, 8, false).unwrap();
    let hw = Rec::new(0, 1);
    p.mm_init(MmId(1));
    p.switch_mm(&hw, MmId(1));
    assert_eq!(p.pin(&hw, MmId(1)), Some(a8(1)));
    for mm in 2..=256 {
        p.mm_init(MmId(mm));
        p.switch_mm(&hw, MmId(mm));
    }
    assert_eq!(p.generation(), GEN2);
    // The rollover seeded the bitmap with the pinned ASID: mm 256 skips 1.
    assert_eq!(p.context_id(MmId(256)), GEN2 | 2);
    // mm 1 is neither running nor reserved, but keeps 1 because it is pinned.
    p.switch_mm(&hw, MmId(1));
    assert_eq!(p.context_id(MmId(1)), GEN2 | 1);
    // No other mm of generation 2 gets 1.
    for mm in 257..=508 {
        p.mm_init(MmId(mm));
        p.switch_mm(&hw, MmId(mm));
        assert_ne!(p.context_id(MmId(mm)) & 0xff, 1, "mm {mm}");
    }
    assert_eq!(p.generation(), GEN2);
    p.unpin(MmId(1));
    assert_eq!(p.cpu_asid_lock.lock().nr_pinned_asids, 0);
}

#[test]
fn pin_limit_is_available_minus_cpus_minus_two() {
    let p = LinuxArm64::new(4, 300, 8, false).unwrap();
    let hw = Rec::new(0, 4);
    assert_eq!(p.max_pinned_asids(), 256 - 4 - 2);
    for mm in 1..=251 {
        p.mm_init(MmId(mm));
    }
    for mm in 1..=250 {
        // Pinning an mm that never ran allocates its ASID.
        assert_eq!(p.pin(&hw, MmId(mm)), Some(a8(mm)), "mm {mm}");
    }
    assert_eq!(p.pin(&hw, MmId(251)), None);
    // An mm already pinned only gains a reference.
    assert_eq!(p.pin(&hw, MmId(7)), Some(a8(7)));
    p.unpin(MmId(7));
    assert_eq!(p.pin(&hw, MmId(251)), None, "mm 7 is still pinned once");
    p.unpin(MmId(7));
    assert_eq!(p.pin(&hw, MmId(251)), Some(a8(251)));
    assert!(hw.take().is_empty(), "pinning switches nothing and flushes nothing");
    let kpti = LinuxArm64::new(4, 8, 8, true).unwrap();
    assert_eq!(kpti.max_pinned_asids(), 128 - 4 - 2);
}

#[test]
fn kpti_halves_the_asid_space_and_flushes_user_asid_too() {
    let p = LinuxArm64::new(1, 200, 8, true).unwrap();
    let hw = Rec::new(0, 1);
    p.mm_init(MmId(1));
    p.switch_mm(&hw, MmId(1));
    assert_eq!(hw.take(), vec!["root Mm(MmId(1)) asid 2 noflush true"]);
    p.flush_page(&hw, MmId(1), VirtAddr(0x1000));
    p.flush_mm(&hw, MmId(1));
    let va = VirtAddr(0x1000);
    assert_eq!(
        hw.take(),
        vec![
            format!("tlbi {:?} Broadcast", Tlbi::Va { asid: a8(2), va }),
            format!("tlbi {:?} Broadcast", Tlbi::Va { asid: a8(3), va }),
            format!("tlbi {:?} Broadcast", Tlbi::Asid(a8(2))),
            format!("tlbi {:?} Broadcast", Tlbi::Asid(a8(3))),
        ]
    );
    // Even ASIDs 2..=254: 127 mms per generation; the 128th rolls over.
    for mm in 2..=127 {
        p.mm_init(MmId(mm));
        p.switch_mm(&hw, MmId(mm));
        assert_eq!(p.context_id(MmId(mm)), GEN1 | (2 * mm as u64));
    }
    assert_eq!(p.generation(), GEN1);
    p.mm_init(MmId(128));
    p.switch_mm(&hw, MmId(128));
    assert_eq!(p.generation(), GEN2);
    // 254 is reserved for this CPU; the search restarts at the bottom.
    assert_eq!(p.context_id(MmId(128)), GEN2 | 2);
    assert_eq!(p.pin(&hw, MmId(128)), Some(a8(3)), "a pinned ASID is the user one");
}

#[test]
fn range_of_512_pages_becomes_one_asid_flush() {
    let p = LinuxArm64::new(1, 4, 16, false).unwrap();
    let mut hw = Rec::new(0, 1);
    p.mm_init(MmId(1));
    p.switch_mm(&hw, MmId(1));
    hw.take();
    hw.barriers = true;
    let asid = Asid::new(1, 16).unwrap();
    p.flush_range(&hw, MmId(1), VirtAddr(0x40_0000), 511);
    let log = hw.take();
    assert_eq!(log.len(), 511 + 2);
    assert_eq!(log[0], "barrier DsbSt(InnerShareable)");
    assert_eq!(log[1], format!("tlbi {:?} Broadcast", Tlbi::Va { asid, va: VirtAddr(0x40_0000) }));
    assert_eq!(log[511], format!("tlbi {:?} Broadcast", Tlbi::Va { asid, va: VirtAddr(0x40_0000).add_pages(510) }));
    assert_eq!(log[512], "barrier Dsb(InnerShareable)");
    p.flush_range(&hw, MmId(1), VirtAddr(0x40_0000), 512);
    assert_eq!(
        hw.take(),
        vec![
            "barrier DsbSt(InnerShareable)".to_string(),
            format!("tlbi {:?} Broadcast", Tlbi::Asid(asid)),
            "barrier Dsb(InnerShareable)".to_string(),
        ]
    );
}

#[test]
fn kernel_range_over_512_pages_flushes_everything() {
    let p = LinuxArm64::new(1, 4, 16, false).unwrap();
    let mut hw = Rec::new(0, 1);
    hw.barriers = true;
    p.flush_kernel_range(&hw, VirtAddr(0xffff_0000_0000_0000), 513);
    assert_eq!(
        hw.take(),
        vec!["barrier DsbSt(InnerShareable)", "tlbi All Broadcast", "barrier Dsb(InnerShareable)", "barrier Isb"]
    );
    p.flush_kernel_range(&hw, VirtAddr(0xffff_0000_0000_0000), 512);
    let log = hw.take();
    assert_eq!(log.len(), 512 + 3);
    assert_eq!(log.iter().filter(|l| l.starts_with("tlbi VaAllAsids") && l.ends_with("Broadcast")).count(), 512);
}

/// The log of reclaim's deferred flush of a page of mm 1 on cpu0 of a stock
/// (or, with `bug`, a zoo) policy, and of cpu1's `flush_tlb_batched_pending`
/// of mm 1 in between.
fn batched_reclaim(bug: Option<Bug>) -> (Vec<String>, Vec<String>, Vec<String>) {
    let p = LinuxArm64::new(2, 4, 8, false).unwrap();
    let p = match bug {
        Some(b) => p.with_bug(b),
        None => p,
    };
    let cpus = cpus_with_barriers(2);
    let (cpu0, cpu1) = (&cpus[0], &cpus[1]);
    p.mm_init(MmId(1));
    p.switch_mm(cpu1, MmId(1));
    cpu1.take();
    let va = VirtAddr(0x1000);
    p.tlbbatch_add_pending(cpu0, MmId(1), va);
    let add = cpu0.take();
    p.flush_batched_pending(cpu1, MmId(1));
    let pending = cpu1.take();
    p.flush_batch(cpu0, &[MmId(1)]);
    (add, pending, cpu0.take())
}

#[test]
fn reclaim_issues_its_tlbi_at_add_pending_and_completes_it_at_flush() {
    let (add, pending, flush) = batched_reclaim(None);
    let tlbi = format!("tlbi {:?} Broadcast", Tlbi::Va { asid: a8(1), va: VirtAddr(0x1000) });
    // __flush_tlb_range_nosync: no DSB ISH after the TLBI.
    assert_eq!(add, vec!["barrier DsbSt(InnerShareable)".to_string(), tlbi]);
    // arch_tlbbatch_flush: the DSB ISH alone, on the CPU that issued the TLBI.
    assert_eq!(flush, vec!["barrier Dsb(InnerShareable)"]);
    // 4b634918384c: flush_tlb_mm, a broadcast this CPU completes itself.
    let asid = format!("tlbi {:?} Broadcast", Tlbi::Asid(a8(1)));
    assert_eq!(
        pending,
        vec!["barrier DsbSt(InnerShareable)".to_string(), asid, "barrier Dsb(InnerShareable)".to_string()]
    );
}

#[test]
fn zoo_4b634918384c_batched_pending_is_a_lone_dsb_on_the_wrong_cpu() {
    let (add, pending, flush) = batched_reclaim(Some(Bug::LinuxArm644b634918384c));
    assert_eq!(add.len(), 2, "{add:?}");
    assert_eq!(flush, vec!["barrier Dsb(InnerShareable)"]);
    // v6.5-v6.15: cpu1's DSB completes nothing cpu0 issued.
    assert_eq!(pending, vec!["barrier Dsb(InnerShareable)"]);
}

#[test]
fn variants_that_do_not_batch_flush_the_whole_mm_at_try_to_unmap_flush() {
    let p = LinuxArm64::with_skip_broadcast(2, 4, 8, false).unwrap();
    let hw = Rec::new(0, 2);
    p.mm_init(MmId(1));
    p.tlbbatch_add_pending(&hw, MmId(1), VirtAddr(0x1000));
    assert_eq!(hw.take(), Vec::<String>::new());
}

#[test]
#[should_panic(expected = "applies only to the stock policy")]
fn the_batched_pending_bug_needs_the_stock_policy() {
    let _ = LinuxArm64::with_skip_broadcast(2, 4, 8, false).unwrap().with_bug(Bug::LinuxArm644b634918384c);
}

#[test]
fn switch_to_kernel_keeps_mm_loaded_lazily() {
    let p = LinuxArm64::new(1, 4, 8, false).unwrap();
    let hw = Rec::new(0, 1);
    p.mm_init(MmId(1));
    p.mm_init(MmId(2));
    p.switch_mm(&hw, MmId(1));
    hw.take();
    p.switch_mm(&hw, MmId::KERNEL);
    assert_eq!(hw.take(), Vec::<String>::new(), "TTBR0 keeps mm 1");
    assert_eq!(p.active_asid(CpuId(0)), GEN1 | 1);
    p.switch_mm(&hw, MmId(1));
    assert_eq!(hw.take(), Vec::<String>::new(), "mm 1 is still loaded");
    p.switch_mm(&hw, MmId::KERNEL);
    p.switch_mm(&hw, MmId(2));
    assert_eq!(hw.take(), vec!["root Mm(MmId(2)) asid 2 noflush true"]);
}

#[test]
fn reused_slot_is_switched_to_even_if_lazily_loaded() {
    // Regression: the slot a CPU holds lazily is released and given to a new mm;
    // "already loaded" would run the new mm on the dead one's ASID.
    let p = LinuxArm64::new(1, 4, 8, false).unwrap();
    let hw = Rec::new(0, 1);
    p.mm_init(MmId(1));
    p.switch_mm(&hw, MmId(1));
    p.switch_mm(&hw, MmId::KERNEL);
    p.mm_release(&hw, MmId(1));
    p.mm_init(MmId(1));
    assert_eq!(p.context_id(MmId(1)), 0);
    hw.take();
    p.switch_mm(&hw, MmId(1));
    assert_eq!(hw.take(), vec!["root Mm(MmId(1)) asid 2 noflush true"]);
}

#[test]
fn flush_of_mm_that_never_ran_issues_no_tlbi() {
    let p = LinuxArm64::new(1, 4, 8, false).unwrap();
    let mut hw = Rec::new(0, 1);
    hw.barriers = true;
    p.mm_init(MmId(1));
    p.flush_page(&hw, MmId(1), VirtAddr(0x1000));
    p.flush_range(&hw, MmId(1), VirtAddr(0x1000), 3);
    p.flush_mm(&hw, MmId(1));
    assert_eq!(hw.take(), vec!["barrier DsbSt(InnerShareable)"; 3]);
}

#[test]
fn user_flushes_report_their_shootdown_phases() {
    let p = LinuxArm64::new(1, 4, 8, false).unwrap();
    let mut hw = Rec::new(0, 1);
    hw.barriers = true;
    hw.coherence = true;
    p.mm_init(MmId(1));
    p.mm_init(MmId(2));
    p.switch_mm(&hw, MmId(1));
    hw.take();
    p.flush_range(&hw, MmId(1), VirtAddr(0x1000), 2);
    assert_eq!(
        hw.take(),
        vec![
            "phase Issue".to_string(),
            "barrier DsbSt(InnerShareable)".to_string(),
            "phase Dispatch".to_string(),
            format!("tlbi {:?} Broadcast", Tlbi::Va { asid: a8(1), va: VirtAddr(0x1000) }),
            format!("tlbi {:?} Broadcast", Tlbi::Va { asid: a8(1), va: VirtAddr(0x2000) }),
            "phase Sync".to_string(),
            "barrier Dsb(InnerShareable)".to_string(),
            "phase Done".to_string(),
        ]
    );
    // An mm that never had an ASID: nothing to dispatch or wait for.
    p.flush_mm(&hw, MmId(2));
    assert_eq!(hw.take(), vec!["phase Issue", "barrier DsbSt(InnerShareable)", "phase Done"]);
}

#[test]
fn bad_asid_width_is_an_error() {
    let err = LinuxArm64::new(1, 4, 12, false).err().unwrap();
    assert_eq!(err, ConfigError::AsidWidth(12));
    assert_eq!(
        err.to_string(),
        "12-bit ASIDs asked for, but arm64 ASIDs are 8 or 16 bits (the checker also takes 2 to 7 to reach rollovers \
         quickly)"
    );
    let err = LinuxArm64::new(127, 4, 8, true).err().unwrap();
    assert_eq!(
        err.to_string(),
        "127 CPUs need at least 129 usable ASIDs (one per CPU after a rollover, ASID 0 and one to allocate), \
         but only 128 are available"
    );
    assert!(LinuxArm64::new(126, 4, 8, true).is_ok());
}

#[test]
fn range_ops_decompose_from_scale_3_down_and_end_with_one_page() {
    let va = VirtAddr(0x40_0000);
    let a = Some(a8(1));
    let pages = |ops: &[Tlbi]| -> Vec<u64> {
        ops.iter()
            .map(|o| match o {
                Tlbi::Range { pages, .. } => u64::from(*pages),
                Tlbi::Va { .. } | Tlbi::VaAllAsids { .. } => 1,
                other => panic!("{other:?}"),
            })
            .collect()
    };
    // One contpte block: scale 0, num 7.
    assert_eq!(pages(&range_ops(va, 16, a)), vec![16]);
    // 512 pages: scale 1, num 7; 513: the same and one page.
    assert_eq!(pages(&range_ops(va, 512, a)), vec![512]);
    assert_eq!(pages(&range_ops(va, 513, a)), vec![512, 1]);
    assert!(matches!(range_ops(va, 513, a)[1], Tlbi::Va { va: v, .. } if v == va.add_pages(512)));
    // The limit in one operation: scale 3, num 31.
    assert_eq!(pages(&range_ops(va, MAX_TLBI_RANGE_PAGES, a)), vec![MAX_TLBI_RANGE_PAGES]);
    // At most four ranges and one page: 2^21 - 1 = 31*2^16 + 31*2^11 + 31*2^6 + 31*2 ... + 1.
    let ops = range_ops(va, MAX_TLBI_RANGE_PAGES - 1, a);
    assert!(ops.len() <= 5 && pages(&ops).iter().sum::<u64>() == MAX_TLBI_RANGE_PAGES - 1, "{ops:?}");
    assert_eq!(pages(&range_ops(va, 1, a)), vec![1]);
    // Kernel ranges use every tag.
    assert!(matches!(range_ops(va, 3, None)[..], [Tlbi::Range { asid: None, pages: 2, .. }, Tlbi::VaAllAsids { .. }]));
}

#[test]
fn with_range_tlbi_a_600_page_flush_is_ranges_not_the_whole_asid() {
    let p = LinuxArm64::new(2, 4, 8, false).unwrap().with_tlbi_range(true);
    let hw = Rec::new(0, 2);
    p.mm_init(MmId(1));
    p.switch_mm(&hw, MmId(1));
    hw.take();
    p.flush_range(&hw, MmId(1), VirtAddr(0x40_0000), 600);
    let log = hw.take();
    // 576 pages at scale 1 (num 8), 24 at scale 0 (num 11).
    assert!(log.iter().all(|l| !l.starts_with("tlbi Asid(")), "{log:?}");
    assert_eq!(log.iter().filter(|l| l.starts_with("tlbi Range")).count(), 2, "{log:?}");
    // Without it, 512 pages or more are the whole ASID.
    let p = LinuxArm64::new(2, 4, 8, false).unwrap();
    p.mm_init(MmId(1));
    p.switch_mm(&hw, MmId(1));
    hw.take();
    p.flush_range(&hw, MmId(1), VirtAddr(0x40_0000), 600);
    assert!(hw.take().iter().any(|l| l.starts_with("tlbi Asid(")));
}
