//! Taking an address space's tables away: a page table unmapped whole and
//! an exiting process's address space torn down.

use super::*;

/// `munmap` of the whole range: on Linux the write side while the VMAs go, then
/// the read side for the zap, `free_pgtables` and the flush (as [`Zap::Munmap`]);
/// on FreeBSD `PMAP_LOCK` throughout.
#[inline(never)]
pub(super) fn unmap_table<E: Engine, P: Policy>(core: &E, p: &P, cpu: usize, s: u32) {
    let hw = core.hw(cpu);
    lock_mm(core, cpu, s, LockSide::Write);
    let side = if core.shape().linux {
        let mut m = core.machine_mut();
        let all = ((1u32 << m.consts().pages) - 1) as u8;
        m.detach(s, all);
        drop(m);
        set_flag(core, s, true);
        if core.shape().munmap_downgrades {
            downgrade_mm(core, cpu, s);
            LockSide::Read
        } else {
            LockSide::Write
        }
    } else {
        LockSide::Write
    };
    let linux = core.shape().linux;
    let finish = |core: &E| {
        // Every page's range is free to map again.
        core.machine_mut().reattach(s, u8::MAX);
        if linux {
            set_flag(core, s, false);
        }
        unlock_mm(core, cpu, s, side);
        back_to_user(core, cpu, s);
    };
    let mut owed = Vec::new();
    if core.shape().linux {
        core.pte_lock(s);
        let all = ((1u32 << core.machine().consts().pages) - 1) as u8;
        if batched_pending(core, p, cpu, s, all, &mut owed) {
            core.pte_lock(s);
        }
    }
    let (mut ids, mut frames) = clear_all(core, cpu, s, "munmap");
    let table = core.machine_mut().clear_table(s, "free_pgtables", cpu);
    let Some((tid, tframe)) = table else {
        judge_owed(core, &owed, "munmap");
        return finish(core);
    };
    ids.push(tid);
    core.event_kind(cpu, 0x14_0000, Kind::PageTable, || {
        format!("PTEs of mm{s} cleared, page-table page (frame {tframe}) unhooked")
    });
    let early = core.shape().bug == Some(KernelBug::TableFreeBeforeFlush);
    if early {
        free_frames(core, &[tframe]);
        core.event_kind(cpu, 0x15_0000, Kind::PageTable, || {
            format!("page-table frame {tframe} freed before the flush")
        });
    }
    if !early {
        frames.push(tframe);
    }
    let all = core.machine().space(s).detached;
    // Kernel bug 3ef938c35035: khugepaged's collapse flushed the PMD's range
    // with flush_tlb_range, which passed freed_tables=false on x86.
    let collapse = core.shape().bug == Some(KernelBug::CollapseRangeFlush);
    let flush = if collapse { "flush_range" } else { "flush_mm" };
    offer_lazy(core, cpu, s, &ids, &frames, flush, all);
    if collapse {
        let pages = core.machine().consts().pages as u64;
        p.flush_range(&hw, MmId(s), VirtAddr(VA0), pages);
    } else {
        flush_preemptibly(core, p, cpu, || p.flush_mm(&hw, MmId(s)));
    }
    if taken_lazy(core, cpu) {
        // The range stays reserved until the flush completes.
        judge_owed(core, &owed, "munmap");
        set_flag(core, s, false);
        unlock_mm(core, cpu, s, side);
        return back_to_user(core, cpu, s);
    }
    discharge(core, cpu, &ids, flush);
    judge_owed(core, &owed, "munmap");
    free_frames(core, &frames);
    finish(core);
}

#[inline(never)]
pub(super) fn exit<E: Engine, P: Policy>(core: &E, p: &P, cpu: usize, s: u32) {
    let hw = core.hw(cpu);
    // `exit_mmap`: no thread is left to contend.
    lock_mm(core, cpu, s, LockSide::Write);
    if core.shape().linux {
        core.pte_lock(s);
    }
    // No thread is left to switch to: nothing but this CPU touches the mm now.
    core.machine_mut().exit_mm(s);
    let (ids, frames) = clear_all(core, cpu, s, "exit");
    core.event_kind(cpu, 0x16_0000, Kind::PageTable, || format!("mm{s} torn down: its PTEs cleared"));
    if let Some(strategy) = core.shape().teardown {
        let owed = block::teardown(core, p, cpu, s, strategy);
        core.event_kind(cpu, 0x16_0001, Kind::PageTable, || {
            format!("contiguous block of mm{s} torn down ({strategy})")
        });
        debug_assert_eq!(owed.mm, MmId(s));
    }
    p.flush_mm(&hw, MmId(s));
    discharge(core, cpu, &ids, "flush_mm");
    free_frames(core, &frames);
    unlock_mm(core, cpu, s, LockSide::Write);
    core.pause();
    switch_idle(core, p, cpu);
}
