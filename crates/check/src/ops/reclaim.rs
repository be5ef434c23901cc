//! Reclaim: `kswapd`'s and the page daemon's unmaps and their batched flush,
//! a pair of processes' pages in one batch, and the marks and reaping of
//! reclaims in flight.

use super::*;

/// `kswapd` reclaims two pages, of two processes, in one batch: each PTE is
/// cleared and queued (`arch_tlbbatch_add_pending`) under its PTE lock as
/// [`zap_page`]'s reclaim does, then one deferred flush of both mms returns
/// and discharges both (Linux's `shrink_folio_list` unmaps folio after folio
/// and flushes once, `try_to_unmap_flush`).
#[inline(never)]
pub(super) fn reclaim_pair<E: Engine, P: Policy>(core: &E, p: &P, cpu: usize, pages: [(u32, usize); 2]) {
    let deferred = core.shape().arm64 && core.shape().memory.buffered();
    let (mut slots, mut ids, mut frames) = (Vec::new(), Vec::new(), Vec::new());
    for (s, pg) in pages {
        core.pte_lock(s);
        core.machine_mut().hold_ptl(s, cpu);
        let Some((id, frame)) = clear_page(core, cpu, s, pg, RECLAIM, deferred) else {
            core.machine_mut().release_ptl(s, cpu);
            continue;
        };
        add_pending_and_unlock(core, p, cpu, s, pg);
        slots.push(MmId(s));
        ids.push(id);
        frames.push(frame);
    }
    if !ids.is_empty() {
        flush_batch_preemptibly(core, p, cpu, &slots);
        discharge(core, cpu, &ids, "flush_batch");
        for s in &slots {
            forget_mark(core, s.0);
        }
        free_frames(core, &frames);
    }
    end_op(core, cpu);
}

/// `flush_tlb_batched_pending(mm)` (mm/rmap.c), called by a Linux `munmap` or
/// `madvise` of slot `s` with the PTE lock just taken, before it changes the
/// PTEs of `pages` (bits): if a reclaim marked the mm, the policy's
/// [`Policy::flush_batched_pending`], then the mark cleared unless a reclaim set
/// it again meanwhile. Puts into `owed` the reclaim obligations of those pages
/// still open now, which the caller judges when it returns (its callers rely on
/// it as on a flush of their own). Returns whether it called the policy (and so
/// paused). Before 3ea277194daa ([`KernelBug::NoBatchedPending`]) the kernel did
/// none of this and relied on nothing, but a `munmap` still returns with the
/// page gone, so the obligations are owed all the same.
pub(super) fn batched_pending<E: Engine, P: Policy>(
    core: &E,
    p: &P,
    cpu: usize,
    s: u32,
    pages: u8,
    owed: &mut Vec<usize>,
) -> bool {
    {
        let m = core.machine();
        owed.extend(
            open_reclaims(&m, s)
                .filter(|(_, o)| o.stale.page.is_some_and(|pg| pages & (1 << pg) != 0))
                .map(|(id, _)| id),
        );
    }
    if core.shape().bug == Some(KernelBug::NoBatchedPending) || core.machine_mut().read_batched(s, cpu) == 0 {
        return false;
    }
    core.event_kind(cpu, 0x21_0000 + s as u64, Kind::Invalidate, || {
        format!("mm{s} is marked tlb_flush_batched: flush_tlb_batched_pending flushes it")
    });
    let hw = core.hw(cpu);
    p.flush_batched_pending(&hw, MmId(s));
    core.pause();
    core.machine_mut().clear_batched(s, cpu);
    core.event_kind(cpu, 0x22_0000 + s as u64, Kind::FlushDone, || "flush_tlb_batched_pending returned".to_string());
    true
}

/// Returns whether a reclaim of slot `s`'s process has cleared a PTE and not yet
/// returned from its deferred flush. The kernel's batch names no mm (x86 keeps a
/// cpumask, arm64 nothing), so Linux may free the `mm_struct` meanwhile; here the
/// policy's [`Policy::flush_batch`] is handed the mm, so the slot is released
/// (and reused) only after it returns.
pub(super) fn reclaim_in_flight(m: &Machine, s: u32) -> bool {
    open_reclaims(m, s).next().is_some()
}

/// The open obligations (with their ids) of the reclaims of slot `s`'s current
/// process: cleared by a reclaim whose deferred flush has not returned.
pub(super) fn open_reclaims(m: &Machine, s: u32) -> impl Iterator<Item = (usize, &crate::kernel::Obligation)> {
    let uid = m.space(s).uid;
    m.obligations()
        .iter()
        .enumerate()
        .filter(move |(_, o)| !o.discharged && o.stale.slot == s && o.stale.uid == uid && o.stale.change == RECLAIM)
}

/// Clears slot `s`'s `tlb_flush_batched` mark once no reclaim of it is in flight
/// (called as a reclaim's deferred flush returns, in the step that discharges
/// it). Linux keeps the mark until the next `munmap`, `madvise` or `mprotect`
/// of the mm, whose `flush_tlb_batched_pending` then flushes the whole mm again:
/// a redundant flush once every reclaim's own flush has returned, since each
/// completed everything it had queued. The checker leaves it out. The mark
/// still makes those paths flush while any reclaim of the mm is in flight, the
/// window 3ea277194daa and 4b634918384c are about. A `flush_tlb_batched_pending`
/// that read the mark before it was forgotten still compares as Linux's does,
/// against the marks made since its read ([`Machine::read_batched`]), not the
/// count's value, which forgetting can bring back to the one it read.
/// Keeping it as Linux does
/// cost 1.6 times the states at the standard bounds (`x86-linux-invlpgb`: 55.1
/// million instead of 34.6) and found nothing more
/// (`bench/2026-11-25-check-reclaim-unlocked.md`).
pub(super) fn forget_mark<E: Engine>(core: &E, s: u32) {
    let mut m = core.machine_mut();
    if !reclaim_in_flight(&m, s) {
        m.forget_batched(s);
    }
}

/// What a reclaim's obligations are opened for (`Obligation::change`).
pub(super) const RECLAIM: &str = "reclaim";

/// Releases every exited address space no CPU's root points at and no CPU holds
/// (Linux frees an `mm_struct` when its last lazy user drops `mm_count`).
#[inline(never)]
pub(super) fn reap<E: Engine, P: Policy>(core: &E, p: &P, cpu: usize) {
    loop {
        let z = {
            let m = core.machine();
            (1..m.spaces().len() as u32).find(|&s| {
                m.space(s).life == Life::Zombie
                    && m.roots_on(s) == 0
                    && !m.sched().active.contains(&Some(s))
                    && !reclaim_in_flight(&m, s)
            })
        };
        let Some(s) = z else { return };
        let table = core.machine_mut().start_release(s);
        let hw = core.hw(cpu);
        p.mm_release(&hw, MmId(s));
        // Only now may a fork reuse the slot: mm_release still wrote the old mm's
        // state, and the free hands the mm to the next allocation through the
        // allocator's own synchronisation, whose release orders those stores
        // first: none waits in this CPU's buffer after.
        core.drain_own(cpu);
        core.machine_mut().finish_release(s);
        core.pause();
        if let Some(t) = table {
            free_frames(core, &[t]);
        }
        core.event_kind(cpu, 0x17_0000 + s as u64, Kind::PageTable, || {
            format!("mm{s} released (no CPU's root points at it)")
        });
    }
}
