use super::*;
use crate::testhw::{invlpg, root, with_mms, Rec};
use std::format;
use std::string::{String, ToString};
use std::vec;
use std::vec::Vec;

const BOTH: [Version; 2] = [Version::V512, Version::V513];

/// Returns the policy with mms 1..=n initialised.
fn x86(ncpus: usize, n: u32, v: Version) -> LinuxX86v513 {
    with_mms(LinuxX86v513::new(ncpus, n as usize + 1, v), n)
}

/// Returns `ncpus` CPUs, each with shared-line accesses logged when `coherence`.
fn cpus(ncpus: usize, coherence: bool) -> Vec<Rec> {
    (0..ncpus as u32)
        .map(|c| {
            let mut r = Rec::new(c, ncpus);
            r.coherence = coherence;
            r
        })
        .collect()
}

/// Switches each CPU of `running` to mm 1 (slot 1, PCID 2), and each of
/// `lazy` to mm 1 then to a kernel thread; clears the logs.
fn machine(p: &LinuxX86v513, hw: &[Rec], running: &[usize], lazy: &[usize]) {
    for &c in running.iter().chain(lazy) {
        p.switch_mm(&hw[c], MmId(1));
    }
    for &c in lazy {
        p.switch_mm(&hw[c], MmId::KERNEL);
    }
    for h in hw {
        h.take();
    }
}

/// Returns `v`'s policy on `ncpus` CPUs set up by [`machine`], the CPUs, and
/// CPU 0's log of its flush of page 0x1000 of mm 1.
fn flushed_page(
    ncpus: usize,
    v: Version,
    coherence: bool,
    running: &[usize],
    lazy: &[usize],
) -> (LinuxX86v513, Vec<Rec>, Vec<String>) {
    let p = x86(ncpus, 1, v);
    let hw = cpus(ncpus, coherence);
    machine(&p, &hw, running, lazy);
    p.flush_page(&hw[0], MmId(1), VirtAddr(0x1000));
    let log = hw[0].take();
    (p, hw, log)
}

fn shared(addr: usize, a: Access) -> String {
    format!("shared {addr:#x} {a:?}")
}

fn position(log: &[String], line: &str) -> usize {
    log.iter().position(|l| l == line).unwrap_or_else(|| panic!("{line:?} not in {log:#?}"))
}

#[test]
fn before_flushes_here_first_then_sends_the_ipi() {
    let (_p, _hw, log) = flushed_page(2, Version::V512, false, &[0, 1], &[]);
    let remote = format!("cpu1: {}", invlpg(2, 0x1000));
    assert_eq!(log, vec![invlpg(2, 0x1000), "ipi async [1]".to_string(), remote]);
}

#[test]
fn after_sends_the_ipi_then_flushes_here() {
    let (_p, _hw, log) = flushed_page(2, Version::V513, false, &[0, 1], &[]);
    // The simulated handler runs when it is sent: before the local flush.
    let remote = format!("cpu1: {}", invlpg(2, 0x1000));
    assert_eq!(log, vec!["ipi async [1]".to_string(), remote, invlpg(2, 0x1000)]);
}

#[test]
fn after_local_flush_runs_between_dispatch_and_sync_before_after_done() {
    for v in BOTH {
        let (_p, _hw, log) = flushed_page(3, v, true, &[0, 1, 2], &[]);
        let local = position(&log, &invlpg(2, 0x1000));
        let (dispatch, sync) = (position(&log, "phase Dispatch"), position(&log, "phase Sync"));
        match v {
            Version::V512 => assert!(local < position(&log, "phase Issue"), "{log:#?}"),
            Version::V513 => assert!(dispatch < local && local < sync, "{log:#?}"),
        }
    }
}

#[test]
fn before_is_lazy_shares_the_line_of_loaded_mm_and_the_first_slots() {
    let line = |a: usize| a / 64;
    let p = x86(2, 0, Version::V512);
    let st = &p.cpu_tlbstate[1];
    let lazy = p.is_lazy_addr(CpuId(1));
    assert_eq!(line(lazy), line(p.loaded_mm_addr(CpuId(1))));
    assert_eq!(line(addr_of(&st.ctxs[1].tlb_gen)), line(lazy));
    assert_ne!(line(addr_of(&st.ctxs[2].tlb_gen)), line(lazy));
    let p = x86(2, 0, Version::V513);
    assert_ne!(line(p.is_lazy_addr(CpuId(1))), line(p.loaded_mm_addr(CpuId(1))));
    assert_ne!(line(p.is_lazy_addr(CpuId(1))), line(addr_of(&p.cpu_tlbstate[1].ctxs[1].tlb_gen)));
}

#[test]
fn the_initiator_reads_each_targets_is_lazy() {
    for v in BOTH {
        let (p, _hw, log) = flushed_page(2, v, true, &[0, 1], &[]);
        // A load of a walk over the mask: its address comes from the mask.
        position(&log, &shared(p.is_lazy_addr(CpuId(1)), Access::ReadAhead));
    }
}

#[test]
fn before_writes_is_lazy_at_every_switch_after_only_when_it_changes() {
    for v in BOTH {
        let p = x86(1, 2, v);
        let hw = cpus(1, true);
        let lazy = shared(p.is_lazy_addr(CpuId(0)), Access::Write);
        p.switch_mm(&hw[0], MmId(1));
        p.switch_mm(&hw[0], MmId(2));
        let busy = hw[0].take();
        assert_eq!(busy.iter().filter(|l| **l == lazy).count(), if v == Version::V512 { 2 } else { 0 }, "{v:?}");
        p.switch_mm(&hw[0], MmId::KERNEL);
        p.switch_mm(&hw[0], MmId(2));
        let back = hw[0].take();
        // enter_lazy_tlb sets it and the switch back clears it, in both.
        assert_eq!(back.iter().filter(|l| **l == lazy).count(), 2, "{v:?}");
        assert!(!p.is_lazy(CpuId(0)));
    }
}

#[test]
fn before_runs_the_flush_here_again_after_the_wait() {
    let (p, _hw, log) = flushed_page(2, Version::V512, true, &[0, 1], &[]);
    // on_each_cpu_cond_mask's local tlb_is_not_lazy and flush_tlb_func_remote's
    // read of tlb_gen, after the wait.
    let done = position(&log, "phase Done");
    let tail = &log[done..];
    assert!(tail.contains(&shared(p.is_lazy_addr(CpuId(0)), Access::ReadAhead)), "{log:#?}");
    assert!(tail.contains(&shared(addr_of(&p.mms[1]), Access::Read)), "{log:#?}");
    // Up to date: nothing flushed.
    assert!(!tail.iter().any(|l| l.starts_with("tlbi")), "{log:#?}");
}

#[test]
fn the_handler_releases_its_csd_and_the_initiator_polls_each() {
    for v in BOTH {
        let (p, _hw, log) = flushed_page(3, v, true, &[0, 1, 2], &[]);
        let (c1, c2) = (p.csd_addr(CpuId(0), CpuId(1)), p.csd_addr(CpuId(0), CpuId(2)));
        let spin = position(&log, &format!("spin on {c1:#x}"));
        let sent = position(&log, "ipi async [1, 2]");
        let locked = position(&log, &shared(c2, Access::Write));
        let unlocked = position(&log, &format!("cpu2: {}", shared(c2, Access::Write)));
        let sync = position(&log, "phase Sync");
        let polled = log.iter().rposition(|l| *l == shared(c2, Access::Read)).unwrap();
        assert!(locked < spin && spin < sent && sent < unlocked && unlocked < sync && sync < polled, "{log:#?}");
        assert!(log[sync..].contains(&shared(c1, Access::Read)), "{log:#?}");
        for t in 1..3 {
            assert!(!p.csd_locked(CpuId(0), CpuId(t)));
        }
    }
}

#[test]
fn before_one_target_takes_the_stack_csd_after_the_per_cpu_one() {
    for v in BOTH {
        let (p, _hw, log) = flushed_page(2, v, true, &[0, 1], &[]);
        let csd = match v {
            Version::V512 => p.csd_stack_addr(CpuId(0)),
            Version::V513 => p.csd_addr(CpuId(0), CpuId(1)),
        };
        position(&log, &format!("spin on {csd:#x}"));
        position(&log, &format!("cpu1: {}", shared(csd, Access::Write)));
    }
}

#[test]
fn before_waits_on_the_csd_of_a_lazy_cpu_it_skipped() {
    for v in BOTH {
        let (p, _hw, log) = flushed_page(3, v, true, &[0, 1], &[2]);
        position(&log, "ipi async [1]");
        let skipped = shared(p.csd_addr(CpuId(0), CpuId(2)), Access::Read);
        let sync = position(&log, "phase Sync");
        assert_eq!(log[sync..].contains(&skipped), v == Version::V512, "{v:?}: {log:#?}");
    }
}

#[test]
fn alone_in_the_mask_flushes_here_without_ipis() {
    for v in BOTH {
        let (_p, _hw, log) = flushed_page(2, v, false, &[0], &[]);
        assert_eq!(log, vec![invlpg(2, 0x1000)], "{v:?}");
    }
}

#[test]
fn pti_flushes_the_user_pcid_per_page_with_invpcid_or_at_the_return_without() {
    for v in BOTH {
        let hw = cpus(1, false);
        // Slot 1: kernel PCID 2, user PCID 2 | 2048.
        let p = x86(1, 1, v).with_pti(Pti::Invpcid);
        machine(&p, &hw, &[0], &[]);
        p.flush_range(&hw[0], MmId(1), VirtAddr(0x1000), 2);
        let want = vec![invlpg(2, 0x1000), invlpg(2050, 0x1000), invlpg(2, 0x2000), invlpg(2050, 0x2000)];
        assert_eq!(hw[0].take(), want, "{v:?}");
        let p = x86(1, 1, v).with_pti(Pti::Deferred);
        machine(&p, &hw, &[0], &[]);
        p.flush_range(&hw[0], MmId(1), VirtAddr(0x1000), 2);
        assert_eq!(hw[0].take(), vec![invlpg(2, 0x1000), invlpg(2, 0x2000), root(1, 2, false)], "{v:?}");
        // flush_tlb_local marks the user PCID whatever the CPU has.
        for how in [Pti::Invpcid, Pti::Deferred] {
            let p = x86(1, 1, v).with_pti(how);
            machine(&p, &hw, &[0], &[]);
            p.flush_mm(&hw[0], MmId(1));
            assert_eq!(hw[0].take(), vec!["tlbi Asid(Asid(2)) Local".to_string(), root(1, 2, false)], "{v:?}");
        }
        // Without PTI, the kernel PCID alone.
        let p = x86(1, 1, v);
        machine(&p, &hw, &[0], &[]);
        p.flush_range(&hw[0], MmId(1), VirtAddr(0x1000), 1);
        assert_eq!(hw[0].take(), vec![invlpg(2, 0x1000)], "{v:?}");
    }
}

#[test]
fn a_lazy_cpu_gets_no_ipi_and_catches_up_at_its_switch() {
    for v in BOTH {
        let (p, hw, log) = flushed_page(2, v, false, &[0], &[1]);
        assert_eq!(log, vec![invlpg(2, 0x1000)], "{v:?}");
        assert!(p.in_mm_cpumask(MmId(1), CpuId(1)));
        p.switch_mm(&hw[1], MmId(1));
        assert_eq!(hw[1].take(), vec![root(1, 2, false)], "{v:?}");
        assert_eq!(p.slot(CpuId(1), 1), (p.ctx_id(MmId(1)), 1));
    }
}

#[test]
fn freed_tables_reach_a_lazy_cpu_which_leaves_the_mm() {
    for v in BOTH {
        let p = x86(2, 1, v);
        let hw = cpus(2, false);
        machine(&p, &hw, &[0], &[1]);
        p.flush_mm(&hw[0], MmId(1));
        let log = hw[0].take();
        assert!(log.contains(&"cpu1: root Mm(MmId(0)) asid 1 noflush true".to_string()), "{v:?}: {log:#?}");
        assert_eq!(p.loaded_mm(CpuId(1)), MmId::KERNEL);
        assert!(!p.in_mm_cpumask(MmId(1), CpuId(1)));
        assert!(!p.is_lazy(CpuId(1)));
    }
}

#[test]
fn a_range_above_the_ceiling_flushes_the_pcid() {
    for v in BOTH {
        let p = x86(2, 1, v);
        let hw = cpus(2, false);
        machine(&p, &hw, &[0, 1], &[]);
        p.flush_range(&hw[0], MmId(1), VirtAddr(0), 34);
        let log = hw[0].take();
        let full: Vec<&String> = log.iter().filter(|l| l.contains("tlbi Asid(Asid(2)) Local")).collect();
        assert_eq!(full.len(), 2, "{v:?}: {log:#?}");
    }
}

#[test]
fn kernel_range_runs_here_after_the_wait_before_and_before_it_after() {
    for v in BOTH {
        let p = x86(2, 0, v);
        let hw = cpus(2, true);
        p.flush_kernel_range(&hw[0], VirtAddr(0x5000), 1);
        let log = hw[0].take();
        let local = position(&log, "tlbi VaAllAsids { va: VirtAddr(20480) } Local");
        position(&log, "cpu1: tlbi VaAllAsids { va: VirtAddr(20480) } Local");
        let sync = position(&log, "phase Sync");
        assert_eq!(local > sync, v == Version::V512, "{v:?}: {log:#?}");
    }
}

#[test]
fn batch_flushes_the_running_cpus_of_every_mm() {
    for v in BOTH {
        let p = x86(3, 2, v);
        let hw = cpus(3, false);
        machine(&p, &hw, &[1], &[]);
        p.switch_mm(&hw[2], MmId(2));
        hw[2].take();
        p.flush_batch(&hw[0], &[MmId(1), MmId(2)]);
        let log = hw[0].take();
        assert_eq!(
            log,
            vec!["ipi async [1, 2]", "cpu1: tlbi Asid(Asid(2)) Local", "cpu2: tlbi Asid(Asid(2)) Local"],
            "{v:?}"
        );
        assert_eq!((p.slot(CpuId(1), 1).1, p.slot(CpuId(2), 1).1), (1, 1));
    }
}
