use super::*;
use crate::testhw::{invlpg, on_after_idle, on_one_cpu, root, with_mms, Rec};
use std::format;
use std::string::String;
use std::vec;
use std::vec::Vec;

/// Returns a policy with mms 1..=n initialised.
fn x86(ncpus: usize, n: u32, pcid: bool) -> LinuxX86 {
    with_mms(LinuxX86::new(ncpus, n as usize + 1, pcid), n)
}

#[test]
fn boot_state_is_init_mm_in_slot_zero() {
    let p = x86(2, 1, true);
    assert_eq!(p.loaded_mm(CpuId(1)), MmId::KERNEL);
    assert_eq!(p.loaded_mm_asid(CpuId(1)), 0);
    assert_eq!(p.slot(CpuId(1), 0), (INIT_MM_CTX_ID, 0));
    assert_eq!(p.slot(CpuId(1), 1), (0, 0));
    assert_eq!(p.ctx_id(MmId(1)), 2, "user ctx_ids start after init_mm's");
}

#[test]
fn nopcid_flushes_on_every_mm_change() {
    let p = x86(1, 2, false);
    let hw = Rec::new(0, 1);
    for mm in [1, 2, 1, 2] {
        p.switch_mm(&hw, MmId(mm));
    }
    assert_eq!(hw.take(), vec![root(1, 0, false), root(2, 0, false), root(1, 0, false), root(2, 0, false)]);
    assert_eq!(p.slot(CpuId(0), 0), (p.ctx_id(MmId(2)), 0));
}

#[test]
fn choose_new_asid_reuses_slot_of_recent_mm_without_flush() {
    let p = x86(1, 2, true);
    let hw = Rec::new(0, 1);
    for mm in [1, 2, 1] {
        p.switch_mm(&hw, MmId(mm));
    }
    // Slot 0 holds init_mm, so A takes slot 1 (PCID 2) and B slot 2 (PCID 3).
    assert_eq!(hw.take(), vec![root(1, 2, false), root(2, 3, false), root(1, 2, true)]);
    assert_eq!(p.loaded_mm_asid(CpuId(0)), 1);
    assert_eq!(p.slot(CpuId(0), 1), (p.ctx_id(MmId(1)), 0));
}

#[test]
fn same_mm_switch_without_lazy_writes_no_cr3() {
    let p = x86(1, 1, true);
    let hw = on_one_cpu(&p, MmId(1));
    p.switch_mm(&hw, MmId(1));
    assert_eq!(hw.take(), Vec::<String>::new());
}

#[test]
fn choose_new_asid_flushes_reused_slot_when_tlb_gen_is_behind() {
    let p = x86(1, 2, true);
    let hw = Rec::new(0, 1);
    p.switch_mm(&hw, MmId(1));
    p.switch_mm(&hw, MmId(2));
    hw.take();
    // A is loaded nowhere: only its generation moves.
    p.flush_page(&hw, MmId(1), VirtAddr(0x1000));
    assert_eq!(hw.take(), Vec::<String>::new());
    assert_eq!(p.tlb_gen(MmId(1)), 1);
    p.switch_mm(&hw, MmId(1));
    assert_eq!(hw.take(), vec![root(1, 2, false)]);
    assert_eq!(p.slot(CpuId(0), 1), (p.ctx_id(MmId(1)), 1));
}

#[test]
fn seventh_mm_evicts_round_robin() {
    let p = x86(1, 7, true);
    let hw = Rec::new(0, 1);
    for mm in 1..=7 {
        p.switch_mm(&hw, MmId(mm));
    }
    // Slots 1..=5, then the wrap takes slot 0 (init_mm's) and slot 1 (mm 1's).
    let want: Vec<String> = [(1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 1), (7, 2)]
        .into_iter()
        .map(|(mm, pcid)| root(mm, pcid, false))
        .collect();
    assert_eq!(hw.take(), want);
    assert_eq!(p.slot(CpuId(0), 0).0, p.ctx_id(MmId(6)));
    assert_eq!(p.slot(CpuId(0), 1).0, p.ctx_id(MmId(7)));
    // mm 2 still owns slot 2 and reuses it; mm 1 was evicted and takes next_asid,
    // which is 2 again, evicting mm 2.
    p.switch_mm(&hw, MmId(2));
    p.switch_mm(&hw, MmId(1));
    assert_eq!(hw.take(), vec![root(2, 3, true), root(1, 3, false)]);
}

#[test]
fn partial_flush_only_when_next_generation() {
    let p = x86(1, 1, true);
    let hw = on_one_cpu(&p, MmId(1));
    // local 0, new 1, mm 1: exactly the next generation.
    p.flush_range(&hw, MmId(1), VirtAddr(0x1000), 2);
    assert_eq!(hw.take(), vec![invlpg(2, 0x1000), invlpg(2, 0x2000)]);
    assert_eq!(p.slot(CpuId(0), 1).1, 1);
    // A late duplicate of generation 1 finds nothing to do.
    let late = FlushTlbInfo {
        mm: Some(MmId(1)),
        extent: FlushExtent::Pages { start: VirtAddr(0x1000), pages: 1 },
        new_tlb_gen: 1,
        freed_tables: false,
    };
    p.flush_tlb_func(&hw, &late);
    assert_eq!(hw.take(), Vec::<String>::new());
}

#[test]
fn skipped_generation_falls_back_to_full_flush() {
    let page = |gen| FlushTlbInfo {
        mm: Some(MmId(1)),
        extent: FlushExtent::Pages { start: VirtAddr(0x1000), pages: 1 },
        new_tlb_gen: gen,
        freed_tables: false,
    };
    // Generation 2's partial flush arrives before generation 1's: local 0, new 2.
    let p = x86(1, 1, true);
    let hw = on_one_cpu(&p, MmId(1));
    p.mms[1].tlb_gen.store(2, Ordering::SeqCst);
    p.flush_tlb_func(&hw, &page(2));
    assert_eq!(hw.take(), vec!["tlbi Asid(Asid(2)) Local"]);
    assert_eq!(p.slot(CpuId(0), 1).1, 2);
    p.flush_tlb_func(&hw, &page(1));
    assert_eq!(hw.take(), Vec::<String>::new(), "generation 1 is covered by the full flush");

    // Generation 1 arrives while 2 already exists: new == local + 1 but != mm.
    let p = x86(1, 1, true);
    p.switch_mm(&hw, MmId(1));
    hw.take();
    p.mms[1].tlb_gen.store(2, Ordering::SeqCst);
    p.flush_tlb_func(&hw, &page(1));
    assert_eq!(hw.take(), vec!["tlbi Asid(Asid(2)) Local"]);
    assert_eq!(p.slot(CpuId(0), 1).1, 2);
}

#[test]
fn lazy_cpu_gets_no_ipi_and_catches_up_on_switch() {
    let p = x86(2, 1, true);
    let cpu0 = Rec::new(0, 2);
    let cpu1 = Rec::new(1, 2);
    p.switch_mm(&cpu1, MmId(1));
    p.switch_mm(&cpu1, MmId::KERNEL);
    assert!(p.is_lazy(CpuId(1)));
    assert_eq!(cpu1.take(), vec![root(1, 2, false)], "entering lazy mode keeps CR3");
    p.switch_mm(&cpu0, MmId(1));
    cpu0.take();
    p.flush_page(&cpu0, MmId(1), VirtAddr(0x1000));
    assert_eq!(cpu0.take(), vec![invlpg(2, 0x1000)]);
    assert!(p.in_mm_cpumask(MmId(1), CpuId(1)), "a lazy CPU stays in mm_cpumask");
    assert_eq!(p.slot(CpuId(1), 1).1, 0);
    p.switch_mm(&cpu1, MmId(1));
    assert_eq!(cpu1.take(), vec![root(1, 2, false)]);
    assert_eq!(p.slot(CpuId(1), 1), (p.ctx_id(MmId(1)), 1));
    assert!(!p.is_lazy(CpuId(1)));
}

#[test]
fn lazy_cpu_returning_to_up_to_date_mm_writes_no_cr3() {
    let p = x86(1, 1, true);
    let hw = Rec::new(0, 1);
    p.switch_mm(&hw, MmId(1));
    p.switch_mm(&hw, MmId::KERNEL);
    p.switch_mm(&hw, MmId(1));
    assert_eq!(hw.take(), vec![root(1, 2, false)]);
    assert!(!p.is_lazy(CpuId(0)));
}

#[test]
fn idle_on_init_mm_is_not_lazy() {
    let p = x86(1, 0, true);
    let hw = Rec::new(0, 1);
    p.switch_mm(&hw, MmId::KERNEL);
    assert!(!p.is_lazy(CpuId(0)));
    assert_eq!(hw.take(), Vec::<String>::new());
}

#[test]
fn freed_tables_ipi_reaches_lazy_cpus_which_switch_to_init_mm() {
    let p = x86(2, 1, true);
    let (cpu0, _cpu1) = on_after_idle(&p, MmId(1));
    p.flush_mm(&cpu0, MmId(1));
    // init_mm still owns slot 0 on cpu1 and is up to date: no flush needed there.
    assert_eq!(cpu0.take(), vec!["tlbi Asid(Asid(2)) Local", "ipi [1]", "cpu1: root Mm(MmId(0)) asid 1 noflush true"]);
    assert_eq!(p.loaded_mm(CpuId(1)), MmId::KERNEL);
    assert!(!p.is_lazy(CpuId(1)));
    assert!(!p.in_mm_cpumask(MmId(1), CpuId(1)));
    assert!(p.in_mm_cpumask(MmId(1), CpuId(0)));
}

#[test]
fn running_cpu_gets_ipi_and_flushes_its_own_pcid() {
    let p = x86(2, 2, true);
    let cpu0 = Rec::new(0, 2);
    let cpu1 = Rec::new(1, 2);
    // cpu1 runs mm 1 in slot 2 (PCID 3), cpu0 in slot 1 (PCID 2).
    p.switch_mm(&cpu1, MmId(2));
    p.switch_mm(&cpu1, MmId(1));
    p.switch_mm(&cpu0, MmId(1));
    cpu0.take();
    p.flush_page(&cpu0, MmId(1), VirtAddr(0x3000));
    assert_eq!(cpu0.take(), vec![invlpg(2, 0x3000), "ipi [1]".into(), format!("cpu1: {}", invlpg(3, 0x3000))]);
    assert_eq!(p.slot(CpuId(1), 2), (p.ctx_id(MmId(1)), 1));
}

#[test]
fn ceiling_33_pages_turns_range_into_full_flush() {
    let p = x86(1, 1, true);
    let hw = on_one_cpu(&p, MmId(1));
    p.flush_range(&hw, MmId(1), VirtAddr(0), 33);
    let want: Vec<String> = (0..33).map(|i| invlpg(2, i * 4096)).collect();
    assert_eq!(hw.take(), want);
    p.flush_range(&hw, MmId(1), VirtAddr(0), 34);
    assert_eq!(hw.take(), vec!["tlbi Asid(Asid(2)) Local"]);
    assert_eq!(p.tlb_gen(MmId(1)), 2);
}

#[test]
fn flush_ceiling_moves_the_switch_to_a_full_flush() {
    for (ceiling, by_page, whole) in [(8, 8, 9), (64, 64, 65)] {
        let p = x86(1, 1, true).with_flush_ceiling(ceiling);
        let hw = on_one_cpu(&p, MmId(1));
        p.flush_range(&hw, MmId(1), VirtAddr(0), by_page);
        let want: Vec<String> = (0..by_page).map(|i| invlpg(2, i * 4096)).collect();
        assert_eq!(hw.take(), want, "ceiling {ceiling}");
        p.flush_range(&hw, MmId(1), VirtAddr(0), whole);
        assert_eq!(hw.take(), vec!["tlbi Asid(Asid(2)) Local"], "ceiling {ceiling}");
    }
    // 0: even one page is a full flush (the debugfs file accepts it).
    let p = x86(1, 1, true).with_flush_ceiling(0);
    let hw = on_one_cpu(&p, MmId(1));
    p.flush_page(&hw, MmId(1), VirtAddr(0x1000));
    assert_eq!(hw.take(), vec!["tlbi Asid(Asid(2)) Local"]);
}

#[test]
fn pti_with_invpcid_flushes_the_user_pcid_page_by_page() {
    let p = x86(1, 1, true).with_pti(Pti::Invpcid);
    let hw = on_one_cpu(&p, MmId(1));
    p.flush_range(&hw, MmId(1), VirtAddr(0x1000), 2);
    // Slot 1: kernel PCID 2, user PCID 2 | 2048.
    assert_eq!(hw.take(), vec![invlpg(2, 0x1000), invlpg(2050, 0x1000), invlpg(2, 0x2000), invlpg(2050, 0x2000)]);
}

#[test]
fn pti_without_invpcid_defers_the_user_pcid_to_one_flushing_cr3_write() {
    let p = x86(1, 1, true).with_pti(Pti::Deferred);
    let hw = on_one_cpu(&p, MmId(1));
    p.flush_range(&hw, MmId(1), VirtAddr(0x1000), 2);
    assert_eq!(hw.take(), vec![invlpg(2, 0x1000), invlpg(2, 0x2000), root(1, 2, false)]);
    // A full flush invalidates the user PCID too (flush_tlb_local), with or without INVPCID.
    for how in [Pti::Invpcid, Pti::Deferred] {
        let p = x86(1, 1, true).with_pti(how);
        p.switch_mm(&hw, MmId(1));
        hw.take();
        p.flush_mm(&hw, MmId(1));
        assert_eq!(hw.take(), vec!["tlbi Asid(Asid(2)) Local".to_string(), root(1, 2, false)], "{how:?}");
    }
}

#[test]
fn kernel_range_flush_runs_on_every_cpu() {
    let p = x86(2, 0, true);
    let hw = Rec::new(0, 2);
    p.flush_kernel_range(&hw, VirtAddr(0x5000), 1);
    assert_eq!(
        hw.take(),
        vec![
            "tlbi VaAllAsids { va: VirtAddr(20480) } Local",
            "ipi [1]",
            "cpu1: tlbi VaAllAsids { va: VirtAddr(20480) } Local"
        ]
    );
    p.flush_kernel_range(&hw, VirtAddr(0x5000), 34);
    assert_eq!(hw.take(), vec!["tlbi All Local", "ipi [1]", "cpu1: tlbi All Local"]);
}

/// Four CPUs: cpu1 runs mm 1, cpu2 runs mm 2, cpu3 ran mm 1 and is lazy on it;
/// cpu0 (reclaim) runs init_mm. Every user mm sits in slot 1 (PCID 2).
fn reclaim_machine(p: &LinuxX86) -> [Rec; 4] {
    let cpus = [0, 1, 2, 3].map(|c| Rec::new(c, 4));
    p.switch_mm(&cpus[3], MmId(1));
    p.switch_mm(&cpus[3], MmId::KERNEL);
    p.switch_mm(&cpus[1], MmId(1));
    p.switch_mm(&cpus[2], MmId(2));
    for c in &cpus {
        c.take();
    }
    cpus
}

#[test]
fn batch_flush_brings_every_running_cpu_of_the_batch_up_to_date() {
    let p = x86(4, 2, true);
    let [cpu0, ..] = reclaim_machine(&p);
    p.flush_batch(&cpu0, &[MmId(1), MmId(2)]);
    // One request with no generation: each non-lazy CPU flushes its loaded PCID
    // in full; the lazy cpu3 gets no IPI.
    assert_eq!(cpu0.take(), vec!["ipi [1, 2]", "cpu1: tlbi Asid(Asid(2)) Local", "cpu2: tlbi Asid(Asid(2)) Local"]);
    assert_eq!((p.tlb_gen(MmId(1)), p.tlb_gen(MmId(2))), (1, 1));
    assert_eq!(p.slot(CpuId(1), 1).1, 1);
    assert_eq!(p.slot(CpuId(2), 1).1, 1);
    assert_eq!(p.slot(CpuId(3), 1).1, 0, "lazy: catches up at its next switch to mm 1");
    let cpu3 = Rec::new(3, 4);
    p.switch_mm(&cpu3, MmId(1));
    assert_eq!(cpu3.take(), vec![root(1, 2, false)]);
}

#[test]
fn batch_flush_of_this_cpus_mm_alone_runs_here_without_ipi() {
    let p = x86(2, 1, true);
    let hw = Rec::new(0, 2);
    p.switch_mm(&hw, MmId(1));
    hw.take();
    p.flush_batch(&hw, &[MmId(1)]);
    assert_eq!(hw.take(), vec!["tlbi Asid(Asid(2)) Local"]);
    assert_eq!(p.slot(CpuId(0), 1).1, 1);
}

#[test]
fn zoo_8f1d56f64f8d_batch_flush_invalidates_nothing() {
    // The handler compares the batch's generation 0 with each CPU's and returns.
    let p = x86(4, 2, true).with_bug(Bug::LinuxX868f1d56f64f8d);
    assert_eq!(p.bug(), Some(Bug::LinuxX868f1d56f64f8d));
    let [cpu0, ..] = reclaim_machine(&p);
    p.flush_batch(&cpu0, &[MmId(1), MmId(2)]);
    assert_eq!(cpu0.take(), vec!["ipi [1, 2]"]);
    assert_eq!((p.slot(CpuId(1), 1).1, p.slot(CpuId(2), 1).1), (0, 0));
    // Also when the batch is this CPU's alone.
    let p = x86(2, 1, true).with_bug(Bug::LinuxX868f1d56f64f8d);
    let hw = Rec::new(0, 2);
    p.switch_mm(&hw, MmId(1));
    hw.take();
    p.flush_batch(&hw, &[MmId(1)]);
    assert_eq!(hw.take(), Vec::<String>::new());
    // Targeted flushes carry a generation and are unaffected.
    p.flush_page(&hw, MmId(1), VirtAddr(0x1000));
    assert_eq!(hw.take(), vec!["tlbi Asid(Asid(2)) Local"], "local 0, new 2, mm 2: a full flush");
}

#[test]
#[should_panic(expected = "does not apply to Linux x86")]
fn with_bug_rejects_another_policys_bug() {
    let _ = LinuxX86::new(1, 1, true).with_bug(Bug::LinuxArm64A8ffaaa060b8);
}

#[test]
fn reused_slot_is_a_new_mm_even_while_a_lazy_cpu_holds_the_dead_one() {
    let p = x86(2, 1, true);
    let cpu0 = Rec::new(0, 2);
    let cpu1 = Rec::new(1, 2);
    // The last thread of mm 1 exits on cpu0: flush, go lazy, release.
    p.switch_mm(&cpu0, MmId(1));
    p.flush_mm(&cpu0, MmId(1));
    p.switch_mm(&cpu0, MmId::KERNEL);
    p.mm_release(&cpu0, MmId(1));
    assert_eq!(p.slot(CpuId(0), 1).1, 1);
    // Slot 1 is reused; the new mm reaches generation 1 on cpu1 alone.
    p.mm_init(MmId(1));
    assert!(!p.in_mm_cpumask(MmId(1), CpuId(0)), "a new mm starts with an empty mm_cpumask");
    p.switch_mm(&cpu1, MmId(1));
    p.flush_page(&cpu1, MmId(1), VirtAddr(0x1000));
    cpu0.take();
    // cpu0 still has the dead mm loaded at generation 1: matching the slot number
    // and generation must not let it skip the switch.
    p.switch_mm(&cpu0, MmId(1));
    assert_eq!(cpu0.take(), vec![root(1, 3, false)]);
    assert_eq!(p.slot(CpuId(0), 2), (p.ctx_id(MmId(1)), 1));
    assert_eq!(p.ctx_id(MmId(1)), 3);
}
