//! LATR's lazy flushes: offered at an unmap, taken by each CPU at its next
//! tick or switch, and completed when every CPU has taken it.

use super::*;

/// Offers CPU `cpu`'s next flush to the policy as one it may complete late
/// (`munmap`, `madvise(MADV_DONTNEED)`; LATR's `munmap_inprogress`): it
/// discharges `ids` and frees `frames`, and keeps the pages `detached` (bits)
/// of slot `s` reserved until then.
pub(super) fn offer_lazy<E: Engine>(
    core: &E,
    cpu: usize,
    s: u32,
    ids: &[usize],
    frames: &[u32],
    flush: &'static str,
    detached: u8,
) {
    core.machine_mut().offer_lazy(cpu, s, ids, frames, flush, detached);
}

/// After a flush [`offer_lazy`] offered: withdraws the offer and returns whether
/// the policy took it (`defer_flush`), which makes its completion the policy's.
pub(super) fn taken_lazy<E: Engine>(core: &E, cpu: usize) -> bool {
    core.machine_mut().withdraw_lazy(cpu)
}

/// Completes the lazy flush of `ticket` on behalf of CPU `cpu`, whose policy
/// code reported it done (`flush_complete`): its obligations are discharged
/// (judged as any flush's return), its frames freed and its range released. A
/// ticket not pending is a violation of the policy's contract.
pub(crate) fn complete_lazy<E: Engine>(core: &E, cpu: usize, ticket: u32) {
    core.pause();
    let l = core.machine_mut().complete_lazy(ticket);
    let Some(l) = l else {
        return core.violated(crate::kernel::Violation {
            property: "no_stale_use",
            cpu,
            detail: format!(
                "the policy completed flush ticket {ticket}, which is not pending (completed twice, or never handed \
                 out by defer_flush): the kernel can no longer tell when its memory may be reused"
            ),
        });
    };
    core.event_kind(cpu, 0x1b_0000 + ticket as u64, Kind::FlushDone, || {
        if l.flush == crate::kernel::BARE_FLUSH {
            format!("deferred flush of mm{} (ticket {ticket}) complete: it held nothing", l.slot)
        } else {
            format!("deferred {} of mm{} (ticket {ticket}) complete", l.flush, l.slot)
        }
    });
    discharge(core, cpu, &l.obligations, l.flush);
    free_frames(core, &l.frames);
    let mut m = core.machine_mut();
    if m.space(l.slot).uid == l.uid {
        m.reattach(l.slot, l.detached);
    }
}
