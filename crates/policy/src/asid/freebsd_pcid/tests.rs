use super::*;
use crate::testhw::{invlpg, on_after_idle, root, with_mms, Rec};
use std::format;
use std::string::String;
use std::vec;
use std::vec::Vec;

/// Returns a policy with mms 1..=n initialised.
fn fbsd(ncpus: usize, n: u32, c: Completion) -> FreebsdX86 {
    with_mms(FreebsdX86::new(ncpus, n as usize + 1, c), n)
}

/// Returns the log with every shared address (of a `shared` or `spin on` line)
/// replaced by the variable's name.
fn named(p: &FreebsdX86, log: Vec<String>) -> Vec<String> {
    let syms = p.symbols();
    log.into_iter()
        .map(|line| {
            let Some((at, verb)) =
                ["shared ", "spin on "].iter().find_map(|v| line.find(&format!("{v}0x")).map(|at| (at, *v)))
            else {
                return line;
            };
            let rest = &line[at + verb.len()..];
            let end = rest.find(' ').unwrap_or(rest.len());
            let addr = usize::from_str_radix(&rest[2..end], 16).unwrap();
            let name = syms.iter().find(|(a, _)| *a == addr).map(|(_, n)| n.clone()).unwrap_or_else(|| {
                panic!("unnamed shared address {addr:#x} in {line:?}");
            });
            format!("{}{verb}{name}{}", &line[..at], &rest[end..])
        })
        .collect()
}

/// Returns the raw addresses of the `kind` accesses made by CPU `cpu`'s handler.
fn handler_accesses(log: &[String], cpu: u32, kind: &str) -> Vec<usize> {
    let prefix = format!("cpu{cpu}: shared 0x");
    log.iter()
        .filter(|l| l.starts_with(&prefix) && l.ends_with(kind))
        .map(|l| {
            let hex = &l[prefix.len()..l.len() - kind.len() - 1];
            usize::from_str_radix(hex, 16).unwrap()
        })
        .collect()
}

/// Runs mm 1 on every CPU (each gets PCID 2) with cpu0 last, and clears logs.
fn all_run_mm1(p: &FreebsdX86, ncpus: u32) -> Rec {
    for c in (0..ncpus).rev() {
        let hw = Rec::new(c, ncpus as usize);
        p.switch_mm(&hw, MmId(1));
    }
    let mut hw = Rec::new(0, ncpus as usize);
    hw.coherence = true;
    hw
}

/// Returns the [`named`] log of cpu0's shootdown of mm 1 to cpus 1 to 3 (all
/// but itself): the generations zeroed, the `local` flush, the request's
/// shared words with the protocol's `dispatch` accesses, the spin on
/// `spin`, each CPU's `handler` lines, and the `sync` reads before the
/// lock's release. Shared accesses are given without `shared `.
fn all_but_self_log(
    local: &[String],
    dispatch: &[&str],
    spin: &str,
    handler: impl Fn(u32) -> Vec<String>,
    sync: &[&str],
) -> Vec<String> {
    let shared = |l: &&str| format!("shared {l}");
    let mut want: Vec<String> =
        ["mm1.pm_gen[1] Write", "mm1.pm_gen[2] Write", "mm1.pm_gen[3] Write", "mm1.pm_active Read"]
            .iter()
            .map(shared)
            .collect();
    want.extend_from_slice(local);
    want.push("phase Issue".into());
    let request =
        ["smp_ipi_mtx Rmw", "smp_tlb_addr1 Write", "smp_tlb_addr2 Write", "smp_tlb_pmap Write", "smp_tlb_op Write"];
    want.extend(request.iter().chain(dispatch).map(shared));
    want.extend(["phase Dispatch".into(), format!("spin on {spin}"), "ipi all-but-self [1, 2, 3]".into()]);
    for c in 1..=3 {
        want.extend(handler(c));
    }
    want.push("phase Sync".into());
    want.extend(sync.iter().chain(&["smp_ipi_mtx Write"]).map(shared));
    want.push("phase Done".into());
    want
}

#[test]
fn boot_state_is_vmspace0_with_pcid_1_in_generation_1() {
    let p = fbsd(2, 1, Completion::Generation);
    assert_eq!(p.curpmap(CpuId(1)), MmId::KERNEL);
    assert_eq!(p.pm_pcids(MmId::KERNEL, CpuId(1)), (1, 1));
    assert_eq!(p.pm_pcids(MmId(1), CpuId(1)), (PMAP_PCID_NONE, 0));
    assert_eq!(p.pcid_state(CpuId(1)), (2, 1));
    assert!(p.is_active(MmId::KERNEL, CpuId(0)) && p.is_active(MmId::KERNEL, CpuId(1)));
    assert_eq!(p.name(), "x86-freebsd-gen");
}

#[test]
fn pcid_reused_with_noflush_while_generation_matches() {
    let p = fbsd(1, 2, Completion::Counter);
    let hw = Rec::new(0, 1);
    for mm in [1, 2, 1, 2] {
        p.switch_mm(&hw, MmId(mm));
    }
    assert_eq!(hw.take(), vec![root(1, 2, false), root(2, 3, false), root(1, 2, true), root(2, 3, true)]);
    assert_eq!(p.pm_pcids(MmId(1), CpuId(0)), (2, 1));
    assert_eq!(p.pcid_state(CpuId(0)), (4, 1));
    // Same pmap again: nothing at all.
    p.switch_mm(&hw, MmId(2));
    assert_eq!(hw.take(), Vec::<String>::new());
}

#[test]
fn a_smaller_pcid_space_rolls_over_at_its_own_bound() {
    // Four PCIDs: 0 is kernel_pmap's, 1 vmspace0's, so user pmaps get 2 and 3.
    let p = fbsd(1, 4, Completion::Counter).with_pcid_overmax(4);
    let hw = Rec::new(0, 1);
    p.switch_mm(&hw, MmId(1));
    p.switch_mm(&hw, MmId(2));
    assert_eq!(hw.take(), vec![root(1, 2, false), root(2, 3, false)]);
    assert_eq!(p.pcid_state(CpuId(0)), (4, 1));
    p.switch_mm(&hw, MmId(3));
    assert_eq!(hw.take(), vec!["note AsidRollover".into(), root(3, 1, false)]);
    assert_eq!(p.pcid_state(CpuId(0)), (2, 2));
}

#[test]
fn pcid_exhaustion_bumps_cpu_generation_and_flushes() {
    let p = fbsd(1, 4095, Completion::Counter);
    let hw = Rec::new(0, 1);
    // PCIDs 2..=4095 go to mms 1..=4094 in generation 1.
    for mm in 1..=4094 {
        p.switch_mm(&hw, MmId(mm));
    }
    let log = hw.take();
    assert_eq!(log.len(), 4094);
    assert_eq!(log[4093], root(4094, 4095, false));
    assert_eq!(p.pcid_state(CpuId(0)), (PMAP_PCID_OVERMAX, 1));
    // The next one starts generation 2 at PCID 1, loaded without NOFLUSH.
    p.switch_mm(&hw, MmId(4095));
    assert_eq!(hw.take(), vec!["note AsidRollover".into(), root(4095, 1, false)]);
    assert_eq!(p.pcid_state(CpuId(0)), (2, 2));
    assert_eq!(p.pm_pcids(MmId(4095), CpuId(0)), (1, 2));
    // A generation-1 PCID is stale now: mm 1 takes a new one and flushes it,
    // and so does vmspace0 (the idle pmap).
    p.switch_mm(&hw, MmId(1));
    p.switch_mm(&hw, MmId::KERNEL);
    assert_eq!(hw.take(), vec![root(1, 2, false), root(0, 3, false)]);
    assert_eq!(p.pm_pcids(MmId(1), CpuId(0)), (2, 2));
}

#[test]
fn idle_switches_cr3_to_vmspace0_and_leaves_pm_active() {
    let p = fbsd(1, 1, Completion::Generation);
    let mut hw = Rec::new(0, 1);
    hw.coherence = true;
    p.switch_mm(&hw, MmId(1));
    p.switch_mm(&hw, MmId::KERNEL);
    assert_eq!(
        named(&p, hw.take()),
        vec![
            "shared mm1.pm_active RmwAnyOrder".to_string(),
            "shared mm1.pm_gen[0] Read".into(),
            "shared mm1.pm_pcid[0] Write".into(),
            "shared mm1.pm_gen[0] Write".into(),
            root(1, 2, false),
            "shared mm0.pm_active RmwAnyOrder".into(),
            // Idle: vmspace0's pmap with its boot PCID, still current.
            "shared mm0.pm_active RmwAnyOrder".into(),
            "shared mm0.pm_gen[0] Read".into(),
            "shared mm0.pm_pcid[0] Read".into(),
            root(0, 1, true),
            "shared mm1.pm_active RmwAnyOrder".into(),
        ]
    );
    assert!(!p.is_active(MmId(1), CpuId(0)));
    assert!(p.is_active(MmId::KERNEL, CpuId(0)));
}

#[test]
fn inactive_cpu_gets_no_ipi_but_a_fresh_pcid_on_next_activation() {
    for c in Completion::ALL {
        let p = fbsd(2, 1, c);
        // cpu1 ran mm 1 in PCID 2, then went idle; cpu0 runs it in PCID 2.
        let (cpu0, cpu1) = on_after_idle(&p, MmId(1));
        p.flush_page(&cpu0, MmId(1), VirtAddr(0x1000));
        assert_eq!(cpu0.take(), vec![invlpg(2, 0x1000)], "{c}: only the local INVLPG, no IPI");
        assert_eq!(p.pm_pcids(MmId(1), CpuId(1)), (2, 0), "{c}: cpu1's generation is zeroed");
        assert_eq!(p.pm_pcids(MmId(1), CpuId(0)), (2, 1), "{c}: the loaded pmap keeps its PCID here");
        // cpu1 comes back: a fresh PCID (its next, 3) loaded without NOFLUSH.
        p.switch_mm(&cpu1, MmId(1));
        assert_eq!(cpu1.take(), vec![root(1, 3, false)], "{c}");
        assert_eq!(p.pm_pcids(MmId(1), CpuId(1)), (3, 1), "{c}");
    }
}

#[test]
fn active_cpu_gets_an_ipi_and_its_generation_zeroed() {
    let p = fbsd(2, 1, Completion::Generation);
    let hw = all_run_mm1(&p, 2);
    p.flush_page(&hw, MmId(1), VirtAddr(0x3000));
    let log: Vec<String> = hw
        .take()
        .into_iter()
        .filter(|l| !l.contains("shared") && !l.contains("phase") && !l.contains("spin"))
        .collect();
    // Every CPU runs the pmap: one IPI to all but self (`pmap_invalidate_page`'s
    // `pm_active == all_cpus` case).
    assert_eq!(log, vec![invlpg(2, 0x3000), "ipi all-but-self [1]".into(), format!("cpu1: {}", invlpg(2, 0x3000))]);
    // Both: the next activation on cpu1 takes a new PCID although it was flushed.
    assert_eq!(p.pm_pcids(MmId(1), CpuId(1)), (2, 0));
    let cpu1 = Rec::new(1, 2);
    p.switch_mm(&cpu1, MmId::KERNEL);
    p.switch_mm(&cpu1, MmId(1));
    assert_eq!(cpu1.take(), vec![root(0, 1, true), root(1, 3, false)]);
}

#[test]
fn range_of_4096_pages_becomes_full_flush() {
    let p = fbsd(2, 1, Completion::Scoreboard);
    let hw = Rec::new(0, 2);
    p.switch_mm(&Rec::new(1, 2), MmId(1));
    p.switch_mm(&hw, MmId(1));
    hw.take();
    p.flush_range(&hw, MmId(1), VirtAddr(0), 4095);
    let log = hw.take();
    // IPI, 4095 INVLPGs on cpu1, then 4095 locally (the scoreboard's order).
    assert_eq!(log.len(), 1 + 2 * 4095);
    assert_eq!(log[0], "ipi all-but-self [1]");
    assert_eq!(log[1], format!("cpu1: {}", invlpg(2, 0)));
    assert_eq!(log[4095], format!("cpu1: {}", invlpg(2, 4094 * 4096)));
    assert_eq!(log[4096], invlpg(2, 0));
    assert_eq!(log[8190], invlpg(2, 4094 * 4096));
    p.flush_range(&hw, MmId(1), VirtAddr(0), 4096);
    assert_eq!(hw.take(), vec!["ipi all-but-self [1]", "cpu1: tlbi Asid(Asid(2)) Local", "tlbi Asid(Asid(2)) Local"]);
}

#[test]
fn kernel_range_goes_to_every_cpu_as_global_invlpg_or_full_flush() {
    let p = fbsd(3, 0, Completion::Counter);
    let hw = Rec::new(1, 3);
    p.flush_kernel_range(&hw, VirtAddr(0x5000), 2);
    assert_eq!(
        hw.take(),
        vec![
            "tlbi VaAllAsids { va: VirtAddr(20480) } Local",
            "tlbi VaAllAsids { va: VirtAddr(24576) } Local",
            "ipi all-but-self [0, 2]",
            "cpu0: tlbi VaAllAsids { va: VirtAddr(20480) } Local",
            "cpu0: tlbi VaAllAsids { va: VirtAddr(24576) } Local",
            "cpu2: tlbi VaAllAsids { va: VirtAddr(20480) } Local",
            "cpu2: tlbi VaAllAsids { va: VirtAddr(24576) } Local",
        ]
    );
    p.flush_kernel_range(&hw, VirtAddr(0x5000), 4096);
    assert_eq!(
        hw.take(),
        vec!["tlbi All Local", "ipi all-but-self [0, 2]", "cpu0: tlbi All Local", "cpu2: tlbi All Local"]
    );
}

#[test]
fn shootdown_to_every_cpu_is_one_all_but_self_ipi_and_to_some_one_ipi_each() {
    for c in Completion::ALL {
        let p = fbsd(3, 1, c);
        let cpu0 = Rec::new(0, 3);
        p.switch_mm(&Rec::new(1, 3), MmId(1));
        p.switch_mm(&cpu0, MmId(1));
        cpu0.take();
        // cpu2 is idle: ipi_selected to cpu1 alone.
        p.flush_page(&cpu0, MmId(1), VirtAddr(0x1000));
        assert!(cpu0.take().contains(&"ipi async [1]".to_string()), "{c}");
        // Every CPU in pm_active, and the kernel map: ipi_all_but_self.
        p.switch_mm(&Rec::new(2, 3), MmId(1));
        p.flush_page(&cpu0, MmId(1), VirtAddr(0x1000));
        assert!(cpu0.take().contains(&"ipi all-but-self [1, 2]".to_string()), "{c}");
        p.flush_kernel_range(&cpu0, VirtAddr(0x5000), 1);
        assert!(cpu0.take().contains(&"ipi all-but-self [1, 2]".to_string()), "{c}");
    }
}

#[test]
fn counter_handlers_increment_one_shared_line() {
    let p = fbsd(4, 1, Completion::Counter);
    let hw = all_run_mm1(&p, 4);
    p.flush_page(&hw, MmId(1), VirtAddr(0x1000));
    let log = hw.take();
    let wait = p.symbols().into_iter().find(|(_, n)| n == "smp_tlb_wait").unwrap().0;
    for cpu in 1..=3 {
        assert_eq!(handler_accesses(&log, cpu, "Rmw"), vec![wait], "cpu{cpu}");
    }
    let handler = |c: u32| {
        vec![
            format!("cpu{c}: shared smp_tlb_addr1 Read"),
            format!("cpu{c}: shared smp_tlb_addr2 Read"),
            format!("cpu{c}: shared smp_tlb_pmap Read"),
            format!("cpu{c}: shared smp_tlb_op Read"),
            format!("cpu{c}: {}", invlpg(2, 0x1000)),
            format!("cpu{c}: shared smp_tlb_wait Rmw"),
        ]
    };
    let local = [invlpg(2, 0x1000)];
    // The initiator will spin on the counter's line while the handlers run.
    let want = all_but_self_log(&local, &["smp_tlb_wait Write"], "smp_tlb_wait", handler, &["smp_tlb_wait Read"]);
    assert_eq!(named(&p, log), want);
    let Protocol::Counter(c) = p.protocol() else { unreachable!() };
    assert_eq!(c.smp_tlb_wait(), 3);
}

#[test]
fn zoo_counter_early_ack_handler_counts_before_reading_and_invalidating() {
    let p = fbsd(2, 1, Completion::Counter).with_bug(Bug::FreebsdX86CounterEarlyAck);
    assert_eq!(p.bug(), Some(Bug::FreebsdX86CounterEarlyAck));
    let hw = all_run_mm1(&p, 2);
    p.flush_page(&hw, MmId(1), VirtAddr(0x1000));
    let handler: Vec<String> = named(&p, hw.take()).into_iter().filter(|l| l.starts_with("cpu1: ")).collect();
    // counter_handlers_increment_one_shared_line has the same lines with the
    // increment last.
    assert_eq!(
        handler,
        vec![
            "cpu1: shared smp_tlb_wait Rmw".to_string(),
            "cpu1: shared smp_tlb_addr1 Read".into(),
            "cpu1: shared smp_tlb_addr2 Read".into(),
            "cpu1: shared smp_tlb_pmap Read".into(),
            "cpu1: shared smp_tlb_op Read".into(),
            format!("cpu1: {}", invlpg(2, 0x1000)),
        ]
    );
}

#[test]
#[should_panic(expected = "does not apply to FreeBSD x86 with x86-freebsd-scoreboard")]
fn early_ack_applies_only_to_the_counter_protocol() {
    let _ = fbsd(2, 1, Completion::Scoreboard).with_bug(Bug::FreebsdX86CounterEarlyAck);
}

#[test]
fn generation_handlers_write_their_own_flags() {
    let p = fbsd(4, 1, Completion::Generation);
    let hw = all_run_mm1(&p, 4);
    p.flush_mm(&hw, MmId(1));
    let log = hw.take();
    let flags: Vec<usize> = (1..=3)
        .map(|cpu| {
            let w = handler_accesses(&log, cpu, "Write");
            assert_eq!(w.len(), 1, "cpu{cpu} writes exactly one line");
            w[0]
        })
        .collect();
    for (i, a) in flags.iter().enumerate() {
        for b in &flags[i + 1..] {
            assert!(a.abs_diff(*b) >= 64, "flags {a:#x} and {b:#x} share a cache line");
        }
    }
    let handler = |c: u32| {
        vec![
            format!("cpu{c}: shared smp_tlb_generation Read"),
            format!("cpu{c}: shared smp_tlb_addr1 Read"),
            format!("cpu{c}: shared smp_tlb_addr2 Read"),
            format!("cpu{c}: shared smp_tlb_pmap Read"),
            format!("cpu{c}: shared smp_tlb_op Read"),
            format!("cpu{c}: shared mm1.pm_pcid[{c}] Read"),
            format!("cpu{c}: tlbi Asid(Asid(2)) Local"),
            format!("cpu{c}: shared cpu{c}.smp_tlb_done Write"),
        ]
    };
    let local = ["shared mm1.pm_pcid[0] Read".to_string(), "tlbi Asid(Asid(2)) Local".to_string()];
    let generation = ["smp_tlb_generation Read", "smp_tlb_generation Write"];
    let done = ["cpu1.smp_tlb_done Read", "cpu2.smp_tlb_done Read", "cpu3.smp_tlb_done Read"];
    // The initiator waits for cpu1 first.
    let want = all_but_self_log(&local, &generation, "cpu1.smp_tlb_done", handler, &done);
    assert_eq!(named(&p, log), want);
    let Protocol::Generation(g) = p.protocol() else { unreachable!() };
    assert_eq!(g.smp_tlb_generation(), 1);
    assert_eq!((0..4).map(|c| g.smp_tlb_done(c)).collect::<Vec<_>>(), vec![0, 1, 1, 1]);
}

/// The full log of one scoreboard shootdown of a page of mm 1 from cpu0 to cpu1.
fn scoreboard_page_log() -> (FreebsdX86, Vec<String>) {
    let p = fbsd(2, 1, Completion::Scoreboard);
    let hw = all_run_mm1(&p, 2);
    p.flush_page(&hw, MmId(1), VirtAddr(0x1000));
    let log = named(&p, hw.take());
    (p, log)
}

#[test]
fn scoreboard_initiator_invalidates_locally_before_waiting() {
    let (p, log) = scoreboard_page_log();
    let initiator: Vec<String> = log.iter().filter(|l| !l.starts_with("cpu1: ")).cloned().collect();
    assert_eq!(
        initiator,
        vec![
            "shared mm1.pm_gen[1] Write".to_string(),
            "shared mm1.pm_active Read".into(),
            "phase Issue".into(),
            "shared cpu0.smp_tlb_addr1 Write".into(),
            "shared cpu0.smp_tlb_addr2 Write".into(),
            "shared cpu0.smp_tlb_pmap Write".into(),
            "shared cpu0.smp_tlb_op Write".into(),
            "shared cpu0.smp_tlb_gen Read".into(),
            "shared cpu0.smp_tlb_gen Write".into(),
            "shared scoreboard[1][0] Write".into(),
            "phase Dispatch".into(),
            "spin on scoreboard[1][0]".into(),
            "ipi all-but-self [1]".into(),
            // curcpu_cb: while the IPI is in flight, before the wait.
            invlpg(2, 0x1000),
            "phase Sync".into(),
            "shared scoreboard[1][0] Read".into(),
            "phase Done".into(),
        ]
    );
    let Protocol::Scoreboard(s) = p.protocol() else { unreachable!() };
    assert_eq!(s.smp_tlb_gen(CpuId(0)), 2);
    assert_eq!(s.scoreboard(CpuId(1), CpuId(0)), 2);
    assert_eq!(s.scoreboard(CpuId(0), CpuId(1)), 1, "untouched slots keep their boot value");
}

#[test]
fn scoreboard_handler_acknowledges_before_invalidating() {
    let (_, log) = scoreboard_page_log();
    let handler: Vec<String> = log.iter().filter(|l| l.starts_with("cpu1: ")).cloned().collect();
    assert_eq!(
        handler,
        vec![
            // Scan the row: initiator 0 waits.
            "cpu1: shared scoreboard[1][0] Read".to_string(),
            "cpu1: shared cpu0.smp_tlb_addr1 Read".into(),
            "cpu1: shared cpu0.smp_tlb_addr2 Read".into(),
            "cpu1: shared cpu0.smp_tlb_pmap Read".into(),
            "cpu1: shared cpu0.smp_tlb_op Read".into(),
            "cpu1: shared cpu0.smp_tlb_gen Read".into(),
            // Acknowledge, then invalidate.
            "cpu1: shared scoreboard[1][0] Write".into(),
            format!("cpu1: {}", invlpg(2, 0x1000)),
            // Scan again: nobody else waits.
            "cpu1: shared scoreboard[1][0] Read".into(),
            "cpu1: shared scoreboard[1][1] Read".into(),
        ]
    );
}

#[test]
fn generation_reaches_every_target_of_consecutive_shootdowns() {
    for c in Completion::ALL {
        let p = fbsd(3, 1, c);
        let mut hw = all_run_mm1(&p, 3);
        hw.coherence = false;
        for va in [0x1000, 0x2000] {
            p.flush_page(&hw, MmId(1), VirtAddr(va));
            let log = hw.take();
            assert!(log.contains(&format!("cpu1: {}", invlpg(2, va))), "{c}: {log:?}");
            assert!(log.contains(&format!("cpu2: {}", invlpg(2, va))), "{c}: {log:?}");
        }
        match p.protocol() {
            Protocol::Counter(x) => assert_eq!(x.smp_tlb_wait(), 2),
            Protocol::Generation(x) => assert_eq!((x.smp_tlb_done(1), x.smp_tlb_done(2)), (2, 2)),
            Protocol::Scoreboard(x) => {
                assert_eq!(x.smp_tlb_gen(CpuId(0)), 3);
                assert_eq!((x.scoreboard(CpuId(1), CpuId(0)), x.scoreboard(CpuId(2), CpuId(0))), (3, 3));
            }
        }
    }
}

#[test]
fn flush_of_pmap_not_loaded_here_only_zeroes_generations() {
    let p = fbsd(2, 2, Completion::Generation);
    let cpu0 = Rec::new(0, 2);
    p.switch_mm(&cpu0, MmId(1));
    p.switch_mm(&cpu0, MmId(2));
    cpu0.take();
    p.flush_mm(&cpu0, MmId(1));
    assert_eq!(cpu0.take(), Vec::<String>::new());
    assert_eq!(p.pm_pcids(MmId(1), CpuId(0)), (2, 0));
    p.switch_mm(&cpu0, MmId(1));
    assert_eq!(cpu0.take(), vec![root(1, 4, false)]);
}

#[test]
fn release_after_last_cpu_left_is_silent() {
    let p = fbsd(1, 1, Completion::Scoreboard);
    let hw = Rec::new(0, 1);
    p.switch_mm(&hw, MmId(1));
    p.switch_mm(&hw, MmId::KERNEL);
    hw.take();
    p.mm_release(&hw, MmId(1));
    p.mm_init(MmId(1));
    assert_eq!(hw.take(), Vec::<String>::new());
    // The new incarnation never reuses the old PCID 2 in this generation.
    p.switch_mm(&hw, MmId(1));
    assert_eq!(hw.take(), vec![root(1, 3, false)]);
}
