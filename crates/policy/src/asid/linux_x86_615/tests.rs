use super::*;
use crate::testhw::{init_mms, invlpg, on_one_cpu, root, with_mms, Rec};
use std::string::String;
use std::vec;
use std::vec::Vec;

/// Returns a policy with mms 1..=n initialised.
fn x86(kernel: Kernel, ncpus: usize, n: u32) -> LinuxX86v615 {
    with_mms(LinuxX86v615::new(ncpus, n as usize + 1, kernel), n)
}

/// Returns a Rec of CPU `cpu` that logs barriers.
fn cpu(cpu: u32, ncpus: usize) -> Rec {
    let mut hw = Rec::new(cpu, ncpus);
    hw.barriers = true;
    hw
}

fn bcast_range(pcid: u16, va: u64, pages: u32) -> String {
    format!("tlbi Range {{ asid: Some(Asid({pcid})), va: VirtAddr({va}), pages: {pages} }} Broadcast")
}

/// Returns `hw`'s log of TLB invalidations and CR3 writes.
fn tlb_ops(hw: &Rec) -> Vec<String> {
    hw.take().into_iter().filter(|l| l.starts_with("tlbi") || l.starts_with("root")).collect()
}

#[test]
fn the_flush_ceiling_and_pti_reach_the_613_flush() {
    for kernel in [Kernel::V613, Kernel::LazyTrim] {
        let p = x86(kernel, 1, 1).with_flush_ceiling(2);
        let hw = on_one_cpu(&p, MmId(1));
        p.flush_range(&hw, MmId(1), VirtAddr(0), 2);
        assert_eq!(tlb_ops(&hw), vec![invlpg(2, 0), invlpg(2, 4096)], "{kernel:?}");
        p.flush_range(&hw, MmId(1), VirtAddr(0), 3);
        assert_eq!(tlb_ops(&hw), vec!["tlbi Asid(Asid(2)) Local"], "{kernel:?}");

        let p = x86(kernel, 1, 1).with_pti(Pti::Invpcid);
        p.switch_mm(&hw, MmId(1));
        hw.take();
        p.flush_page(&hw, MmId(1), VirtAddr(0x1000));
        assert_eq!(tlb_ops(&hw), vec![invlpg(2, 0x1000), invlpg(2050, 0x1000)], "{kernel:?}");

        let p = x86(kernel, 1, 1).with_pti(Pti::Deferred);
        p.switch_mm(&hw, MmId(1));
        hw.take();
        p.flush_page(&hw, MmId(1), VirtAddr(0x1000));
        assert_eq!(tlb_ops(&hw), vec![invlpg(2, 0x1000), root(1, 2, false)], "{kernel:?}");
    }
}

#[test]
fn v613_leaves_the_old_mask_and_lazytrim_keeps_it() {
    for (kernel, kept) in [(Kernel::V613, false), (Kernel::LazyTrim, true), (Kernel::Invlpgb, true)] {
        let p = x86(kernel, 1, 2);
        let hw = Rec::new(0, 1);
        p.switch_mm(&hw, MmId(1));
        p.switch_mm(&hw, MmId(2));
        assert_eq!(p.in_mm_cpumask(MmId(1), CpuId(0)), kept, "{kernel:?}");
        assert!(p.in_mm_cpumask(MmId(2), CpuId(0)));
        assert_eq!(p.loaded_mm(CpuId(0)), Some(MmId(2)));
    }
}

#[test]
fn a_stale_cpu_gets_no_flush_until_the_mask_is_trimmed() {
    let p = x86(Kernel::LazyTrim, 2, 2);
    let (h0, h1) = (cpu(0, 2), cpu(1, 2));
    p.switch_mm(&h0, MmId(1));
    p.switch_mm(&h1, MmId(1));
    p.switch_mm(&h1, MmId(2));
    h0.take();
    h1.take();
    // cpu1's bit in mm 1 is stale. The first multi-CPU flush sets the deadline.
    p.flush_page(&h0, MmId(1), VirtAddr(0x1000));
    assert_eq!(h0.take(), vec![invlpg(2, 0x1000)]);
    assert!(p.in_mm_cpumask(MmId(1), CpuId(1)));
    // Within the second: still no IPI to the stale CPU.
    h0.jiffies.set(HZ);
    p.flush_page(&h0, MmId(1), VirtAddr(0x1000));
    assert_eq!(h0.take(), vec![invlpg(2, 0x1000)]);
    // After it: the flush reaches cpu1, which leaves the mask without flushing.
    h0.jiffies.set(HZ + 1);
    p.flush_page(&h0, MmId(1), VirtAddr(0x1000));
    assert_eq!(h0.take(), vec![invlpg(2, 0x1000), "ipi [1]".to_string()]);
    assert!(!p.in_mm_cpumask(MmId(1), CpuId(1)));
    // Now only this CPU is in the mask: the local path, no trimming.
    p.flush_page(&h0, MmId(1), VirtAddr(0x1000));
    assert_eq!(h0.take(), vec![invlpg(2, 0x1000)]);
}

#[test]
fn a_cpu_in_the_middle_of_a_switch_gets_the_flush() {
    let p = x86(Kernel::LazyTrim, 2, 2);
    let (h0, h1) = (cpu(0, 2), cpu(1, 2));
    p.switch_mm(&h0, MmId(1));
    p.switch_mm(&h1, MmId(1));
    p.switch_mm(&h1, MmId(2));
    let f = FlushTlbInfo {
        mm: Some(MmId(1)),
        extent: FlushExtent::All,
        new_tlb_gen: 1,
        freed_tables: false,
        trim_cpumask: false,
    };
    assert!(!p.should_flush_tlb(&h0, CpuId(1), &f), "running another mm, no trim");
    p.cpu_tlbstate[1].loaded_mm.store(LOADED_MM_SWITCHING, Ordering::Relaxed);
    assert!(p.should_flush_tlb(&h0, CpuId(1), &f), "fea4e317f9e7: SWITCHING may be either mm");
    p.cpu_tlbstate[1].is_lazy.store(true, Ordering::Relaxed);
    assert!(!p.should_flush_tlb(&h0, CpuId(1), &f), "lazy CPUs catch up at their next switch");
    assert!(!p.should_flush_tlb(&h0, CpuId(1), &FlushTlbInfo { mm: None, ..f }), "a lazy CPU skips a batch too");
}

#[test]
fn the_switch_announces_itself_before_reading_tlb_gen() {
    // 83b0177a6c48: a full barrier between the SWITCHING store and the tlb_gen
    // read also when the mask bit is already set.
    let p = x86(Kernel::LazyTrim, 1, 2);
    let hw = cpu(0, 1);
    p.switch_mm(&hw, MmId(1));
    p.switch_mm(&hw, MmId(2));
    hw.take();
    p.switch_mm(&hw, MmId(1));
    assert_eq!(hw.take(), vec!["barrier Full".to_string(), root(1, 2, true)]);
    // v6.13 sets the bit with a locked RMW every time, and has no such barrier.
    let p = x86(Kernel::V613, 1, 2);
    p.switch_mm(&hw, MmId(1));
    p.switch_mm(&hw, MmId(2));
    hw.take();
    p.switch_mm(&hw, MmId(1));
    assert_eq!(hw.take(), vec![root(1, 2, true)]);
}

#[test]
fn default_threshold_needs_four_cpus_running_the_mm() {
    let p = x86(Kernel::Invlpgb, 4, 1);
    let hws: Vec<Rec> = (0..4).map(|c| Rec::new(c, 4)).collect();
    for h in &hws[..3] {
        p.switch_mm(h, MmId(1));
    }
    // Three CPUs (sampled: cpu0 at jiffy 0) do not exceed the threshold of 3.
    p.flush_page(&hws[0], MmId(1), VirtAddr(0x1000));
    assert_eq!(p.global_asid(MmId(1)), 0);
    p.switch_mm(&hws[3], MmId(1));
    // Four do, but only when the task is sampled: (pid & 31) == (jiffies & 31).
    hws[0].jiffies.set(1);
    p.flush_page(&hws[0], MmId(1), VirtAddr(0x1000));
    assert_eq!(p.global_asid(MmId(1)), 0, "cpu0 is sampled at jiffies 0, 32, ...");
    hws[0].jiffies.set(32);
    p.flush_page(&hws[0], MmId(1), VirtAddr(0x1000));
    assert_eq!(p.global_asid(MmId(1)), TLB_NR_DYN_ASIDS, "the first global ASID");
    assert!(p.in_asid_transition(MmId(1)));
}

#[test]
fn the_transition_moves_every_cpu_to_the_global_asid_then_flushes_are_broadcasts() {
    let p = x86(Kernel::Invlpgb, 2, 1).with_small_shapes(2);
    init_mms(&p, 1..=1);
    let (h0, h1) = (cpu(0, 2), cpu(1, 2));
    p.switch_mm(&h0, MmId(1));
    p.switch_mm(&h1, MmId(1));
    h0.take();
    h1.take();
    // An IPI flush, then the mm qualifies: the first allocation resets the space.
    p.flush_page(&h0, MmId(1), VirtAddr(0x1000));
    assert_eq!(
        h0.take(),
        vec![
            invlpg(2, 0x1000),
            "ipi [1]".to_string(),
            format!("cpu1: {}", invlpg(2, 0x1000)),
            "tlbi AllNonGlobal Broadcast".to_string(),
            "barrier TlbSync".to_string(),
            "note AsidRollover".to_string(),
        ]
    );
    let g = p.global_asid(MmId(1));
    assert_eq!(g, 6);
    // The next flush broadcasts to PCID 7, and both CPUs, still on dynamic
    // ASIDs, get the IPI that moves them (no flush of the old PCID).
    p.flush_range(&h0, MmId(1), VirtAddr(0x1000), 10);
    assert_eq!(
        h0.take(),
        vec![
            bcast_range(7, 0x1000, 8),
            bcast_range(7, 0x9000, 2),
            root(1, 7, true),
            "ipi [1]".to_string(),
            format!("cpu1: {}", root(1, 7, true)),
            "barrier TlbSync".to_string(),
        ]
    );
    assert!(p.in_asid_transition(MmId(1)), "cleared only by a scan that finds no straggler");
    p.flush_mm(&h0, MmId(1));
    assert_eq!(h0.take(), vec!["tlbi Asid(Asid(7)) Broadcast".to_string(), "barrier TlbSync".to_string()]);
    assert!(!p.in_asid_transition(MmId(1)));
    // Broadcasts keep G current: back from lazy mode, a switch writes nothing.
    p.switch_mm(&h1, MmId::KERNEL);
    p.switch_mm(&h1, MmId(1));
    assert_eq!(h1.take(), Vec::<String>::new());
    assert_eq!(p.loaded_mm_asid(CpuId(1)), g);
}

#[test]
fn the_allocator_reuses_freed_ids_only_after_a_reset_and_can_hand_out_max() {
    // MAX_ASID_AVAILABLE = 2 + 7 = 9: IDs 6..=8, two counted available.
    let p = x86(Kernel::Invlpgb, 2, 4).with_small_shapes(2);
    init_mms(&p, 1..=4);
    let hw = cpu(0, 2);
    let take = |mm: u32| {
        p.use_global_asid(&hw, MmId(mm));
        p.global_asid(MmId(mm))
    };
    assert_eq!(take(1), 6);
    assert_eq!(take(2), 7);
    assert_eq!(take(3), 0, "none counted available");
    p.mm_release(&hw, MmId(1));
    // One counted available; the search from 7 finds 8 (the count is one short
    // of the IDs in [6, MAX-1], Hou Wenlong's report).
    assert_eq!(take(3), 8);
    p.mm_release(&hw, MmId(2));
    hw.take();
    // last (8) >= MAX - 1: reset, then 6 (freed by mm 1) is free again.
    assert_eq!(take(4), 6);
    assert_eq!(
        hw.take(),
        vec!["tlbi AllNonGlobal Broadcast".to_string(), "barrier TlbSync".to_string(), "note AsidRollover".to_string()]
    );
    // mm 3 holds 8, mm 4 holds 6, none counted available; 7 is free, last = 6.
    p.mm_init(MmId(1));
    p.mm_init(MmId(2));
    assert_eq!(take(1), 0);
    p.mm_release(&hw, MmId(3));
    assert_eq!(take(1), 7);
    // mm 4 exits: one counted available, but [7, 9) holds 7 (live) and 8
    // (freed, not yet reset). The search returns MAX_ASID_AVAILABLE itself,
    // beyond the bitmap, without a reset.
    p.mm_release(&hw, MmId(4));
    hw.take();
    assert_eq!(take(2), 9);
    assert_eq!(hw.take(), Vec::<String>::new());
}

/// The allocator's two quirks together give one global ASID to two live mms:
/// the search returns `MAX_ASID_AVAILABLE` when `[last, MAX)` is full, and
/// never reads that bit, so a later round hands it out again while its first
/// holder lives. The shortest such sequence (a search of the allocator
/// alone): with five IDs in `[6, MAX-1]`, twelve allocations and eight
/// frees, three rounds. No smaller ID space gives one.
#[test]
fn the_allocator_hands_max_asid_available_to_two_live_mms() {
    // MAX_ASID_AVAILABLE = 4 + 7 = 11: IDs 6..=10, four counted available.
    let p = x86(Kernel::Invlpgb, 2, 12).with_small_shapes(4);
    let hw = cpu(0, 2);
    let take = |mm: u32| {
        p.use_global_asid(&hw, MmId(mm));
        p.global_asid(MmId(mm))
    };
    let free = |mm: u32| p.mm_release(&hw, MmId(mm));
    // Round 1: 6, 7, 8, 9 taken; 6 freed; 10 taken; 7 freed.
    assert_eq!([take(1), take(2), take(3), take(4)], [6, 7, 8, 9]);
    free(1);
    assert_eq!(take(5), 10);
    free(2);
    // Round 2 (a reset at the allocation after 10): 6 and 7 are reused and
    // freed again, so [7, 11) is full and the search returns 11 itself.
    assert_eq!(take(6), 6);
    free(6);
    assert_eq!(take(7), 7);
    free(7);
    let a = 8;
    assert_eq!(take(a), 11, "MAX_ASID_AVAILABLE handed out");
    free(3);
    // Round 3: the reset clears bit 11 among the freed ones; mm 8 still holds 11.
    hw.take();
    assert_eq!(take(9), 6);
    assert!(hw.take().contains(&"note AsidRollover".to_string()));
    free(9);
    assert_eq!(take(10), 7);
    free(10);
    assert_eq!(take(11), 8);
    free(11);
    // [8, 11) is full again: 11 once more, while mm 8 lives.
    let b = 12;
    assert_eq!(take(b), 11);
    assert_eq!(p.global_asid(MmId(a)), 11, "the first holder still has it");
    // No reset came between: the second holder moves onto PCID 12 without
    // a flush, where the first one's entries are.
    let st = &p.cpu_tlbstate[1];
    assert_eq!(p.choose_new_asid(&cpu(1, 2), st, MmId(b), 1), (11, false));
}

#[test]
fn reclaim_and_kernel_flushes_are_broadcasts_without_ipis() {
    let p = x86(Kernel::Invlpgb, 2, 1);
    let (h0, h1) = (cpu(0, 2), cpu(1, 2));
    p.switch_mm(&h0, MmId(1));
    p.switch_mm(&h1, MmId(1));
    h0.take();
    p.flush_batch(&h0, &[MmId(1)]);
    assert_eq!(h0.take(), vec!["tlbi AllNonGlobal Broadcast".to_string(), "barrier TlbSync".to_string()]);
    assert_eq!(p.tlb_gen(MmId(1)), 1);
    p.flush_kernel_range(&h0, VirtAddr(0x8000_0000), 10);
    assert_eq!(
        h0.take(),
        vec![
            "tlbi Range { asid: None, va: VirtAddr(2147483648), pages: 8 } Broadcast".to_string(),
            "tlbi Range { asid: None, va: VirtAddr(2147516416), pages: 2 } Broadcast".to_string(),
            "barrier TlbSync".to_string(),
        ]
    );
    // Without INVLPGB the batch is an IPI flush of whatever each CPU has loaded.
    let p = x86(Kernel::LazyTrim, 2, 1);
    p.switch_mm(&h0, MmId(1));
    p.switch_mm(&h1, MmId(1));
    h0.take();
    p.flush_batch(&h0, &[MmId(1)]);
    assert_eq!(
        h0.take(),
        vec![
            "tlbi Asid(Asid(2)) Local".to_string(),
            "ipi [1]".to_string(),
            "cpu1: tlbi Asid(Asid(2)) Local".to_string()
        ]
    );
}

/// Returns the log of reclaiming page 0x1000 of mm 1 with the targeted
/// batch (`bug` re-introduced, if any) while both CPUs still run mm 1 on
/// dynamic PCIDs and it has just got global ASID 6 (PCID 7).
fn targeted_batch_in_transition(bug: Option<Bug>) -> Vec<String> {
    let p = x86(Kernel::Invlpgb, 2, 1).with_small_shapes(2).with_targeted_tlbbatch();
    let p = match bug {
        Some(b) => p.with_bug(b),
        None => p,
    };
    init_mms(&p, 1..=1);
    let (h0, h1) = (cpu(0, 2), cpu(1, 2));
    p.switch_mm(&h0, MmId(1));
    p.switch_mm(&h1, MmId(1));
    p.flush_page(&h0, MmId(1), VirtAddr(0x1000));
    assert_eq!((p.global_asid(MmId(1)), p.in_asid_transition(MmId(1))), (6, true));
    h0.take();
    p.tlbbatch_add_pending(&h0, MmId(1), VirtAddr(0x1000));
    p.flush_batch(&h0, &[MmId(1)]);
    h0.take()
}

#[test]
fn the_targeted_batch_also_ipis_an_mm_in_transition_and_waits_for_its_invlpgb() {
    // v5 to v15: the INVLPGB of PCID 7, the generation bump and the mask,
    // then the IPI flush, which moves each straggler to PCID 7. This CPU's
    // own move is a `switch_mm_irqs_off`, whose tlbsync() (v11 on) waits for
    // the INVLPGB there; the flush's tlbsync() at the end finds none left.
    assert_eq!(
        targeted_batch_in_transition(None),
        vec![
            bcast_range(7, 0x1000, 1),
            "barrier TlbSync".to_string(),
            root(1, 7, true),
            "ipi [1]".to_string(),
            format!("cpu1: {}", root(1, 7, true)),
        ]
    );
}

#[test]
fn v4_and_v1_reclaim_leaves_the_stragglers_on_their_dynamic_pcids() {
    // v4: the INVLPGB only; v1's flush: TLBSYNC instead of the IPIs.
    for bug in [Bug::InvlpgbTlbbatchNoTransition, Bug::InvlpgbTlbbatchSyncOrIpi] {
        assert_eq!(
            targeted_batch_in_transition(Some(bug)),
            vec![bcast_range(7, 0x1000, 1), "barrier TlbSync".to_string()],
            "{bug}"
        );
    }
}

#[test]
fn a_lazy_cpu_leaves_for_init_mm_on_a_freed_tables_flush() {
    let p = x86(Kernel::LazyTrim, 2, 1);
    let (h0, h1) = (cpu(0, 2), cpu(1, 2));
    p.switch_mm(&h0, MmId(1));
    p.switch_mm(&h1, MmId(1));
    p.switch_mm(&h1, MmId::KERNEL);
    h0.take();
    // Without freed tables the lazy CPU is skipped.
    p.flush_page(&h0, MmId(1), VirtAddr(0x1000));
    assert_eq!(h0.take(), vec![invlpg(2, 0x1000)]);
    // With them it is interrupted and switches to init_mm (slot 0 still holds it).
    p.flush_mm(&h0, MmId(1));
    let log = h0.take();
    assert_eq!(log[..2], ["tlbi Asid(Asid(2)) Local".to_string(), "ipi [1]".to_string()]);
    assert!(log[2].starts_with("cpu1: barrier Full"), "{log:?}");
    assert_eq!(log[3], "cpu1: root Mm(MmId(0)) asid 1 noflush true");
    assert_eq!(p.loaded_mm(CpuId(1)), Some(MmId::KERNEL));
}

#[test]
fn a_flush_writes_the_line_whose_loaded_mm_the_lazy_mask_reads_remotely() {
    // The kernel's layout: slots 0 and 1 on the line of `loaded_mm`, slot 2 on
    // the next, `is_lazy` on a line of its own.
    let line = |a: usize| a / 64;
    let p = x86(Kernel::LazyTrim, 2, 1);
    let st = &p.cpu_tlbstate[1];
    let state = line(addr_of(&st.loaded_mm));
    assert_eq!(line(addr_of(&st.loaded_mm_asid)), state);
    assert_eq!(line(addr_of(&st.ctxs[0].ctx_id)), state);
    assert_eq!(line(addr_of(&st.ctxs[1].tlb_gen)), state);
    assert_ne!(line(addr_of(&st.ctxs[2].ctx_id)), state);
    assert_ne!(line(addr_of(&*st.is_lazy)), state);
    assert_ne!(line(addr_of(&*st.is_lazy)), line(addr_of(&st.ctxs[5].tlb_gen)));

    // A flush's target writes its slot (slot 1: a CPU's first user mm); v6.14's
    // `should_flush_tlb` reads the target's `loaded_mm`, on that line, where
    // v6.13's `tlb_is_not_lazy` reads `is_lazy` alone.
    for (kernel, reads_state) in [(Kernel::V613, false), (Kernel::LazyTrim, true)] {
        let p = x86(kernel, 2, 1);
        let (mut h0, mut h1) = (Rec::new(0, 2), Rec::new(1, 2));
        (h0.coherence, h1.coherence) = (true, true);
        p.switch_mm(&h0, MmId(1));
        p.switch_mm(&h1, MmId(1));
        assert_eq!(p.cpu_tlbstate[1].loaded_mm_asid.load(Ordering::Relaxed), 1);
        h0.take();
        p.flush_page(&h0, MmId(1), VirtAddr(0x1000));
        let log = h0.take();
        let st = &p.cpu_tlbstate[1];
        let read = format!("shared {:#x} Read", addr_of(st));
        let written = format!("cpu1: shared {:#x} Write", addr_of(&st.ctxs[1]));
        assert_eq!(log.contains(&read), reads_state, "{kernel:?}: {log:#?}");
        assert!(log.contains(&written), "{kernel:?}: {log:#?}");
        assert_eq!(line(addr_of(&st.ctxs[1])), line(addr_of(st)));
    }
}
