//! A page's PTE taken away: zapped (`munmap`, `madvise`), cleared under its
//! lock, its flush owed or judged, or its frame replaced (copy-on-write,
//! migration).

use super::*;

/// Which operation removes a single page.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Zap {
    /// `munmap`: on Linux the write side, the VMA detached, downgraded to the
    /// read side for the zap and the flush (`do_vmi_align_munmap` since v4.20,
    /// dd2283f2605e); `flush_page`.
    Munmap,
    /// `madvise(MADV_DONTNEED)`: the read side throughout (`zap_page_range_single`
    /// under `mmap_read_lock`); `flush_range` of the page, page tables kept.
    Madvise,
    /// `kswapd`'s reclaim (`try_to_unmap_one` with `TTU_BATCH_FLUSH`): no
    /// `mmap_lock` (the rmap walk takes none); under the PTE lock the clear,
    /// `arch_tlbbatch_add_pending` and the mark on the mm; the deferred flush
    /// (`try_to_unmap_flush`) after the lock is dropped.
    Reclaim,
    /// FreeBSD's page daemon: `pmap_remove_all` under the pmap's lock, then
    /// `flush_page` of a pmap that may be loaded nowhere.
    PageOut,
}

impl Zap {
    pub(super) fn change(self) -> &'static str {
        match self {
            Zap::Munmap => "munmap",
            Zap::Madvise => "madvise",
            Zap::Reclaim => RECLAIM,
            Zap::PageOut => "page-out",
        }
    }
}

/// Removes page `pg` of `s` and flushes it, under the lock the kernel takes for
/// `zap`. On Linux the PTE is cleared under the PTE lock, which the model holds
/// only for the clearing step (the flush of a zap runs after `pte_unmap_unlock`,
/// in `tlb_finish_mmu`), so two zaps of one address space flush at once.
#[inline(never)]
pub(super) fn zap_page<E: Engine, P: Policy>(core: &E, p: &P, cpu: usize, s: u32, pg: usize, zap: Zap) {
    let hw = core.hw(cpu);
    let change = zap.change();
    let linux = core.shape().linux;
    // The side held from the clear to the end, if any.
    let held = match (zap, linux) {
        (_, false) => {
            lock_mm(core, cpu, s, LockSide::Write);
            Some(LockSide::Write)
        }
        // Reclaim takes no `mmap_lock`: other CPUs change the address space while
        // its flush is deferred, completing it with `flush_tlb_batched_pending`.
        (Zap::Reclaim, true) => None,
        (Zap::PageOut, true) => {
            lock_mm(core, cpu, s, LockSide::Write);
            Some(LockSide::Write)
        }
        (Zap::Madvise, true) => {
            lock_mm(core, cpu, s, LockSide::Read);
            Some(LockSide::Read)
        }
        (Zap::Munmap, true) => {
            lock_mm(core, cpu, s, LockSide::Write);
            // The VMA goes under the write side; the zap and the flush run under
            // the read side, which the same step takes over (v4.20 on; v4.10
            // keeps the write side). LATR's flag is set in the same step.
            core.machine_mut().detach(s, 1 << pg);
            set_flag(core, s, true);
            if core.shape().munmap_downgrades {
                downgrade_mm(core, cpu, s);
                Some(LockSide::Read)
            } else {
                Some(LockSide::Write)
            }
        }
    };
    // A madvise of a page whose VMA a munmap detached meanwhile fails (`ENOMEM`)
    // before it walks the page tables; the munmap clears the PTE itself.
    let gone = zap == Zap::Madvise && core.machine().space(s).detached & (1 << pg) != 0;
    // `release_va`: false when a lazy flush keeps the page's range reserved.
    let finish = |core: &E, release_va: bool| {
        if let Some(side) = held {
            if zap == Zap::Munmap && linux && release_va {
                core.machine_mut().reattach(s, 1 << pg);
            }
            if (zap == Zap::Munmap || zap == Zap::Madvise && !gone) && linux {
                set_flag(core, s, false);
            }
            unlock_mm(core, cpu, s, side);
        }
        end_op(core, cpu);
    };
    // arm64 clears with a relaxed exchange, whose store may wait in the store
    // buffer until a barrier; x86's LOCK XCHG is visible at once.
    let deferred = core.shape().arm64 && core.shape().memory.buffered();
    // What a reclaim of this page has left deferred, judged when this returns.
    let mut owed = Vec::new();
    if zap == Zap::Madvise && linux && !gone {
        // `madvise_dontneed` sets LATR's flag before its zap.
        set_flag(core, s, true);
    }
    if linux {
        core.pte_lock(s);
        if zap == Zap::Reclaim {
            // Held until `arch_tlbbatch_add_pending` returns.
            core.machine_mut().hold_ptl(s, cpu);
        }
        if zap != Zap::Reclaim && !gone && batched_pending(core, p, cpu, s, 1 << pg, &mut owed) {
            // The flush paused: take the PTE lock again for the change.
            core.pte_lock(s);
        }
    }
    let cleared = if gone { None } else { clear_page(core, cpu, s, pg, change, deferred) };
    let Some((id, frame)) = cleared else {
        core.machine_mut().release_ptl(s, cpu);
        judge_owed(core, &owed, zap.change());
        return finish(core, true);
    };
    let flush = match zap {
        Zap::Reclaim => {
            // `arch_tlbbatch_add_pending` under the PTE lock, then the deferred
            // flush once it is dropped (`try_to_unmap_flush`, the same task).
            add_pending_and_unlock(core, p, cpu, s, pg);
            flush_batch_preemptibly(core, p, cpu, &[MmId(s)]);
            "flush_batch"
        }
        Zap::Munmap | Zap::PageOut => {
            let lazy = (zap == Zap::Munmap).then(|| offer_lazy(core, cpu, s, &[id], &[frame], "flush_page", 1 << pg));
            flush_preemptibly(core, p, cpu, || p.flush_page(&hw, MmId(s), VirtAddr(va_of(pg))));
            if lazy.is_some() && taken_lazy(core, cpu) {
                judge_owed(core, &owed, zap.change());
                return finish(core, !linux);
            }
            "flush_page"
        }
        Zap::Madvise => {
            offer_lazy(core, cpu, s, &[id], &[frame], "flush_range", 0);
            p.flush_range(&hw, MmId(s), VirtAddr(va_of(pg)), 1);
            if taken_lazy(core, cpu) {
                judge_owed(core, &owed, zap.change());
                return finish(core, true);
            }
            "flush_range"
        }
    };
    discharge(core, cpu, &[id], flush);
    if zap == Zap::Reclaim {
        forget_mark(core, s);
    }
    judge_owed(core, &owed, zap.change());
    free_frames(core, &[frame]);
    finish(core, true);
}

/// Clears the PTE of page `pg` of `s` for `change` (into CPU `cpu`'s store
/// buffer when `deferred`) and records it; returns its obligation and frame,
/// `None` if the page was not mapped. A reclaim's clear also counts the mm's
/// `tlb_flush_batched` (`set_tlb_ubc_flush_pending`'s `atomic_inc`) in the
/// clear's step: the kernel does it after `arch_tlbbatch_add_pending`, still
/// under the PTE lock, where no other holder can tell the two apart.
pub(super) fn clear_page<E: Engine>(
    core: &E,
    cpu: usize,
    s: u32,
    pg: usize,
    change: &'static str,
    deferred: bool,
) -> Option<(usize, u32)> {
    let mark = change == RECLAIM && core.shape().bug != Some(KernelBug::NoBatchedPending);
    let (id, frame, ver) = {
        let mut m = core.machine_mut();
        let cleared = if deferred {
            m.clear_pte_deferred(s, pg, change, cpu).map(|(id, f)| (id, f, m.obligations()[id].stale.ver))
        } else {
            m.clear_pte(s, pg, change, cpu).map(|(id, f)| (id, f, 0))
        };
        if cleared.is_some() && mark {
            m.mark_batched(s);
        }
        cleared
    }?;
    if deferred {
        core.buffer_pte_clear(s, pg, ver);
    }
    core.event_kind(cpu, 0x13_0000 + pg as u64, Kind::PageTable, || {
        let buffered = if deferred { format!(", the store {INTO_BUFFER}") } else { String::new() };
        format!("PTE of {:#x} in mm{s} cleared (frame {frame}){buffered}", va_of(pg))
    });
    Some((id, frame))
}

/// Queues reclaim's flush of page `pg` of `s` (`arch_tlbbatch_add_pending`)
/// under the PTE lock, then drops the lock (`page_vma_mapped_walk_done`): the
/// rest of the rmap walk and of `shrink_folio_list` runs before the flush.
/// That gap is a step of its own only while this CPU's invalidations are still
/// pending (arm64's TLBI): otherwise nothing of the machine's changes before
/// the flush's first access, where the other CPUs may run anyway.
pub(super) fn add_pending_and_unlock<E: Engine, P: Policy>(core: &E, p: &P, cpu: usize, s: u32, pg: usize) {
    p.tlbbatch_add_pending(&core.hw(cpu), MmId(s), VirtAddr(va_of(pg)));
    let pending = {
        let mut m = core.machine_mut();
        m.release_ptl(s, cpu);
        !m.pending(cpu).is_empty()
    };
    if pending {
        core.pause();
    }
}

/// Judges, as the `change` that owed them returns (`munmap`, `madvise`), the
/// reclaim obligations [`batched_pending`] collected that are still open: no
/// CPU running the process may hold those translations any more.
pub(super) fn judge_owed<E: Engine>(core: &E, owed: &[usize], change: &'static str) {
    for &id in owed {
        let r = {
            let mut m = core.machine_mut();
            if m.obligations()[id].discharged {
                continue;
            }
            m.judge_open(id, change)
        };
        if let Err(v) = r {
            core.violated(v);
            return;
        }
    }
}

/// Stores `on` in slot `s`'s `munmap_inprogress` (LATR's flag; a plain store,
/// the last writer wins), where the policy reads it
/// ([`crate::kernel::Machine::set_munmap_flag`]).
pub(super) fn set_flag<E: Engine>(core: &E, s: u32, on: bool) {
    core.machine_mut().set_munmap_flag(s, on);
}

/// Which operation replaces a page's frame with a new one.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Replace {
    /// A copy-on-write fault (`wp_page_copy`): a user CPU, the `mmap_lock`
    /// read side (so it runs beside a `madvise`, not beside v4.10's `munmap`).
    Cow,
    /// Migration (`migrate_pages` -> `try_to_unmap_one`, `TTU_MIGRATION`): a
    /// kernel thread, no `mmap_lock` (so it runs beside either).
    Migrate,
}

impl Replace {
    pub(super) fn change(self) -> &'static str {
        match self {
            Replace::Cow => "cow",
            Replace::Migrate => "migrate",
        }
    }
}

/// Replaces the frame of page `pg` of `s` (Linux only): a new frame is
/// allocated first (`wp_page_copy`'s `alloc_page_vma`, `unmap_and_move`'s
/// `get_new_page`), then under the PTE lock, held from the clear to the new
/// PTE, `ptep_clear_flush` clears the PTE and calls `flush_page`, the PTE is
/// pointed at the new frame and the old frame is freed. The caller takes the
/// flush as done when it returns, whatever the policy did with it: a ticket
/// [`Hw::defer_flush`](tlbkit_policy::Hw::defer_flush) gave it holds nothing
/// (LATR's artifact, `Defer::WhileMmFlagged`). The old frame stands for the
/// last reference: `wp_page_copy` frees it when the other sharer has gone, a
/// migration always. The clear is taken as visible at once, as x86's
/// `LOCK XCHG` is (arm64's relaxed exchange is not modelled here), and
/// migration's two PTE-lock holds (the clear, `remove_migration_ptes`) as one.
#[inline(never)]
pub(super) fn replace_page<E: Engine, P: Policy>(core: &E, p: &P, cpu: usize, s: u32, pg: usize, how: Replace) {
    let hw = core.hw(cpu);
    let change = how.change();
    let side = (how == Replace::Cow).then_some(LockSide::Read);
    if let Some(side) = side {
        lock_mm(core, cpu, s, side);
    }
    let finish = |core: &E| {
        if let Some(side) = side {
            unlock_mm(core, cpu, s, side);
        }
        end_op(core, cpu);
    };
    let new = core.machine_mut().alloc_frame(cpu);
    let new = match new {
        Err(v) => return core.violated(v),
        Ok(None) => {
            core.event(cpu, 0x23_0000, || format!("no free frame: the {change} fails"));
            return finish(core);
        }
        Ok(Some(f)) => f,
    };
    core.pte_lock(s);
    // As the kernel rechecks the PTE under its lock (`pte_same`, the rmap walk):
    // a zap may have cleared it, or the process exited, meanwhile; a fault
    // finds no VMA once a munmap has removed it.
    let cleared = {
        let mut m = core.machine_mut();
        let sp = m.space(s);
        let live = sp.life.mapped() && !(how == Replace::Cow && sp.detached & (1 << pg) != 0);
        let r = if live { m.clear_pte(s, pg, change, cpu) } else { None };
        if r.is_some() {
            m.hold_ptl(s, cpu);
        }
        r
    };
    let Some((id, old)) = cleared else {
        core.event(cpu, 0x23_0001, || format!("the page is no longer mapped: the {change} gives up"));
        free_frames(core, &[new]);
        return finish(core);
    };
    core.event_kind(cpu, 0x24_0000 + pg as u64, Kind::PageTable, || {
        format!("PTE of {:#x} in mm{s} cleared for {change} (frame {old}, new frame {new})", va_of(pg))
    });
    p.flush_page(&hw, MmId(s), VirtAddr(va_of(pg)));
    discharge(core, cpu, &[id], "flush_page");
    {
        let mut m = core.machine_mut();
        m.set_pte(s, pg, new);
        m.release_ptl(s, cpu);
    }
    // Not a change the oracle judges (the new PTE adds a translation).
    core.event(cpu, 0x25_0000 + pg as u64, || {
        format!("PTE of {:#x} in mm{s} set to frame {new}; frame {old} freed", va_of(pg))
    });
    free_frames(core, &[old]);
    finish(core);
}
