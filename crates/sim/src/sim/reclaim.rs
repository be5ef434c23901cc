//! `madvise(MADV_PAGEOUT)` of anonymous private memory: reclaim of the range's
//! folios as Linux v7.0 does it, with or without Dev Jain's batching ("mm/rmap:
//! Optimize anonymous large folio unmapping", 2026, v1 to v4, not merged at v7.0).
//!
//! # What the simulated kernel does (Linux v7.0)
//! - **The walk** (`madvise_cold_or_pageout_pte_range`, per last-level table, i.e.
//!   per 2 MB of the range in each anonymous VMA): `flush_tlb_batched_pending`
//!   first (below), then per present PTE a `ptep_get` (with contiguous PTEs the
//!   gathering read of the block: 17 loads) and, for a large folio, the
//!   `folio_pte_batch` that finds how many PTEs from it map consecutive pages of
//!   the folio, advancing by arm64's `pte_batch_hint` (so one read per block, none
//!   more for a 64 KB folio mapped by one block; without the contiguous bit, one
//!   read per further PTE). A folio the range covers whole and maps exclusively
//!   (every frame mapped once: `folio_mapcount == folio_nr_pages`) is queued; the
//!   young bits are left alone (only `MADV_COLD` clears them). At the end of the
//!   table the queue is reclaimed (`reclaim_pages` → `shrink_folio_list`), folio
//!   by folio, in order.
//! - **Unmap, v7.0** (`try_to_unmap(TTU_BATCH_FLUSH)` → `try_to_unmap_one`): for
//!   an anonymous swap-backed folio `folio_unmap_pte_batch` returns 1, so every
//!   PTE is unmapped alone: the walk's `ptep_get` (`check_pte`), `try_to_unmap_one`'s
//!   own `ptep_get`, `get_and_clear_ptes(nr = 1)` (arm64: `contpte_try_unfold`,
//!   then one exchange: on the first PTE of a contiguous block the unfold is 16
//!   exchanges, a synchronous 64 KB range flush and 16 writes), the deferred flush
//!   of that page (`set_tlb_ubc_flush_pending` → `arch_tlbbatch_add_pending` =
//!   `__flush_tlb_range_nosync`: `DSB ISHST` and the TLBI, no `DSB ISH`), then the
//!   swap PTE (`set_pte_at`: one read and one store).
//! - **Unmap, Dev Jain's series** ([`Sim::set_pageout_batch`]): `folio_unmap_pte_batch`
//!   batches anonymous folios too (`folio_pte_batch_flags` with the write
//!   permission respected, capped at the folio's end): a 64 KB folio fully mapped
//!   by one aligned block is one batch: the two `ptep_get`s once,
//!   `get_and_clear_ptes(nr = 16)` (whole block: no unfold, 16 exchanges), one
//!   deferred flush of the 64 KB range, and the 16 swap PTEs written in one go (16
//!   stores). Without the contiguous bit (`contpte=folios`) a large folio is
//!   batched the same way (the series is core mm; only the unfold it saves is
//!   arm64's), reading each PTE of the batch; order-0 pages (`contpte=off`) are
//!   unmapped one at a time either way.
//! - **Then, per folio**: `try_to_unmap_flush_dirty`, which completes the
//!   deferred flushes ([`KernelPtes::sync_deferred`]: one `DSB ISH` on arm64)
//!   only when a PTE cleared since the last completion was dirty
//!   (`set_tlb_ubc_flush_pending` sets `tlb_ubc->writable` from `pte_dirty`,
//!   mm/rmap.c): another CPU could otherwise still write the page through its
//!   TLB while it goes to swap; a clean PTE's TLBI waits. Then `pageout`
//!   (writing the folio to the swap device), and the folio goes on the list's
//!   folios to free (`free_folios`, a `folio_batch`, [`FolioList`]): when that
//!   fills, and at the list's end, `try_to_unmap_flush` completes every deferred
//!   flush and the folios are freed. So pages only read since they were swapped
//!   in (clean PTEs) share one completion per batch, and dirty ones take one
//!   each. Frames are returned to the allocator only after the flush covering
//!   their PTEs completed, which the oracle's `no_reuse_while_mapped` judges. A
//!   `MADV_PAGEOUT`'s list is one page table's folios (`reclaim_pages` after
//!   each table's walk); a memcg reclaim's, one folio.
//! - **`flush_tlb_batched_pending`**: a deferred flush leaves the mm marked
//!   (`mm->tlb_flush_batched`); the next walk of its page tables under the
//!   page-table lock completes it again (x86: below). arm64's `arch_flush_tlb_batched_pending`
//!   is a lone `DSB ISH` (v6.5, "arm64: support batched/deferred tlb shootdown
//!   during page reclamation/migration"; recalled from the kernel, not from the
//!   notes this model was written from). It is issued at each table of a
//!   `MADV_PAGEOUT` walk after a table whose folios were reclaimed, and by the
//!   first table of the next `MADV_PAGEOUT` of the mm.
//! - **A later touch** of a paged-out page faults (its PTE is none here, a swap
//!   entry in Linux): the ordinary anonymous fault maps a fresh frame, or a fresh
//!   64 KB folio where the fault would map one (v7.0 swaps large folios in from
//!   a synchronous device such as zram), counted as one swap-in
//!   ([`Stats::swapins`]).
//!
//! # Costs
//! Only the preset's figures: `fault_path` for the system call's VMA lookup and
//! walk (as `madvise(MADV_DONTNEED)`), every page-table access through
//! [`KernelPtes`] as the arch code's are charged, the policy's flushes and the
//! held-back barriers as the machine charges TLBIs, DVM messages and `DSB`s, and
//! per reclaimed folio the core mm's per-page and per-folio teardown work,
//! `zap_page` per PTE and `zap_folio` per folio (their meaning is a zap's: rmap
//! removal, counters, freeing; reclaim does the same work, plus what is listed as
//! not costed below), in every mode (`contpte=off` included: the zaps charge
//! them only with folios, to keep earlier results; this path had none). No cost
//! figure was added for this path.
//!
//! # How the deferred flushes reach the policy, and how that differs from arm64
//! Each deferred flush is one call of the policy's [`Policy::flush_range`] of
//! the pages it covers (1 page per PTE in v7.0, the batch with Dev Jain's), made
//! on a view of the CPU ([`NoSync`]) that passes every operation through except
//! the barriers that wait for invalidations to complete (`DSB ISH`, and x86's
//! `TLBSYNC`) issued on this CPU, which it holds back; `try_to_unmap_flush_dirty`
//! issues each held kind once. A broadcast TLBI reaches each TLB when its DVM
//! message has been processed there, and the held `DSB ISH` waits for the last
//! and completes every one of them (`crate::pending`): until then another CPU
//! may still translate through, or refill, what they remove (the hardware
//! acting between two page-table accesses, `sim/ptemem.rs`). So the DVM
//! messages of one folio's deferred flushes queue behind each other and one
//! `DSB ISH` waits for the last, as on arm64. For `arm64-linux` this is arm64's sequence exactly:
//! per deferred flush `DSB ISHST` and the TLBIs of `__flush_tlb_range_op` (one
//! `TLBI VALE1IS` per page, or with `tlbi_range=on` range operations and a single
//! op for one page), and one `DSB ISH` per folio. What differs:
//! - the policy decides each deferred flush as it decides any `flush_range`
//!   (`arm64-linux-skipbcast` may make one local, and a local flush's `DSB NSH`
//!   is not held back), where Linux's `arch_tlbbatch_add_pending` has no such
//!   choice;
//! - the TLBIs are `flush_range`'s, which `Tlbi::Va` stands for whether Linux
//!   issues `VALE1IS` (last level, as reclaim does) or `VAE1IS`;
//! - the whole-ASID fallback of `flush_range` past its page limit would be held
//!   back too (Linux's `flush_tlb_mm` there completes at once); a deferred flush
//!   covers at most one folio, 16 pages, so it never happens here;
//! - the shootdown phases a policy reports end before the held barrier, so its
//!   wait is not in `shootdown_ns`;
//! - the x86 side is below: x86 uses the policy's own batch.
//!
//! # x86: the policy's own batch
//! On an x86 preset each deferred flush is the policy's
//! [`Policy::tlbbatch_add_pending`] of each page it covers (on the same
//! [`NoSync`] view), the mm joins the batch, and `try_to_unmap_flush_dirty` is
//! the policy's [`Policy::flush_batch`] of the batch's mms, so that each x86
//! policy flushes as its kernel's `arch/x86/mm/tlb.c` does:
//! - v4.13 to v6.14 (`x86-linux-pcid`, `x86-linux-613`, `x86-linux-lazytrim`):
//!   `arch_tlbbatch_add_pending` is `inc_mm_tlb_gen(mm)` and
//!   `cpumask_or(&batch->cpumask, &batch->cpumask, mm_cpumask(mm))`;
//!   `arch_tlbbatch_flush` is `flush_tlb_multi` of the gathered mask (a full
//!   flush per CPU through `flush_tlb_func`, lazy CPUs skipped; with the lazy
//!   mask, `should_flush_tlb`'s choice, stale CPUs trimmed once a second) or
//!   the local full flush alone. The policies run the add-pending part once
//!   per mm inside `flush_batch` (what the flush reads is the same).
//! - v4.3 to v4.12 (`x86-linux-410`): `set_tlb_ubc_flush_pending` ORs the mm's
//!   mask into `tlb_ubc->cpumask` and `try_to_unmap_flush` reloads CR3 here if
//!   this CPU is in it and sends `flush_tlb_others` to the rest.
//! - v6.15+ with `INVLPGB` (`x86-linux-invlpgb`): one broadcast `INVLPGB` of
//!   every non-global entry and `TLBSYNC`; the posted targeted batch
//!   (`x86-linux-invlpgb-tlbbatch`) issues an `INVLPGB` per page in
//!   add-pending (held `TLBSYNC`), IPIs for mms without a global ASID.
//!
//! Per folio that is one flush of everything on every CPU of the mask, where
//! the arm64 mapping sends one range flush per deferred flush. The mark
//! (`mm->tlb_flush_batched`) stays after the batch flush, and the next table
//! of a `MADV_PAGEOUT` walk (or the next `MADV_PAGEOUT` of the mm) calls
//! `arch_flush_tlb_batched_pending`, x86's `flush_tlb_mm(mm)`: the policy's
//! [`Policy::flush_batched_pending`] ([`Sim::flush_tlb_batched_pending`]).
//! Only when another CPU is in `mm_cpumask` does x86 defer
//! (`arch_tlbbatch_should_defer`, [`Policy::tlbbatch_should_defer`]): an mm
//! on no other CPU is flushed at once, page by page, as `ptep_clear_flush`
//! does ([`KernelPtes::flush_now`]), and neither batched nor marked. The other
//! x86 kernels (FreeBSD) take the trait's defaults: always deferred, a
//! `flush_mm` per mm.
//!
//! # Without the batch (`--set tlbbatch=off`)
//! Before v4.3 (Mel Gorman's "mm: send one IPI per CPU to TLB flush all
//! entries after unmapping pages") `try_to_unmap_one` cleared each PTE with
//! `ptep_clear_flush`, whose `flush_tlb_page` sends the page's flush to the
//! mm's CPUs and waits for it; arm64 had no batch until v6.5 (43b3dfdd0455),
//! so there each unmap was a `TLBI VALE1IS` and a `DSB ISH` of its own. With
//! [`crate::toggle::TLBBATCH`] off every deferred flush above is instead the
//! policy's [`Policy::flush_range`] of its pages on the CPU itself, completed
//! before the next PTE is read ([`KernelPtes::flush_now`]): nothing reaches
//! [`Policy::tlbbatch_add_pending`] or [`Policy::flush_batch`], no barrier is
//! held, and the mm is not marked. Migration (`sim/migrate.rs`) follows the
//! same switch.
//!
//! # Not modelled
//! - Swap's bookkeeping: `folio_alloc_swap` and the swap cache. `pageout`'s
//!   write and a swap-in's read go to the swap device ([`crate::swapdev`]:
//!   zram's compression on the CPU by default); a swap-in also costs the
//!   ordinary fault's zero-fill (`page_copy`), which its read replaces in Linux.
//! - Swap entries: a paged-out PTE is none, so any zap later skips it (Linux
//!   frees its swap slot, touching no TLB), and a fork copies none of them (the
//!   child's touches count as swap-ins all the same).
//! - Large folios the range covers in part (Linux splits an exclusive one and
//!   reclaims its pages) and folios mapped more than once (Linux skips them too)
//!   are left mapped and counted in [`Stats::pageout_skipped`]. File mappings are
//!   skipped whole (Linux would reclaim their page-cache folios).
//! - A failed order-4 swap-slot allocation (Linux then splits the folio and
//!   unmaps order-0 pages): slots never run out here.
//! - Dev Jain's sub-batches by anonymous exclusivity: a private folio's pages are
//!   all exclusive here, so a batch is the run the write permission allows.
//! - `flush_tlb_batched_pending` in the other walkers (`munmap`,
//!   `madvise(MADV_DONTNEED)`, `mprotect`, exit): each would issue one `DSB ISH`
//!   after a `MADV_PAGEOUT` that left the mm marked.
//! - The rmap walk, LRU isolation, folio locks and MMU notifiers are not charged
//!   beyond `zap_page` and `zap_folio`.

use super::ptemem::KernelPtes;
use super::*;
use crate::machine::CpuHw;
use std::cell::Cell;
use tlbkit_policy::contpte::{self as arch, PteMem, PteVal};
use tlbkit_policy::hw::{Defer, FlushTicket, Note};
use tlbkit_policy::{Access, Asid, Barrier, CpuId, CpuMask, Domain, Hw, Phase, Scope, Tlbi};

/// The completion barriers deferred flushes held back, and on x86 whether
/// the batch marked the mm (what the mm's next `flush_tlb_batched_pending`
/// does).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Held {
    /// `DSB ISH` (arm64).
    dsb_ish: bool,
    /// `TLBSYNC` (x86 with `INVLPGB`).
    tlbsync: bool,
    /// x86: `mm->tlb_flush_batched` is set, and the next walk's
    /// `flush_tlb_batched_pending` is `arch_flush_tlb_batched_pending`, the
    /// policy's [`Policy::flush_batched_pending`] (`flush_tlb_mm`).
    marked: bool,
}

impl Held {
    /// Adds what `other` held.
    pub(super) fn merge(&mut self, other: Held) {
        self.dsb_ish |= other.dsb_ish;
        self.tlbsync |= other.tlbsync;
        self.marked |= other.marked;
    }

    /// Returns whether a barrier was held or the mm marked.
    pub(super) fn any(self) -> bool {
        self.dsb_ish || self.tlbsync || self.marked
    }

    /// Returns what an x86 batch flush leaves: the mm marked.
    pub(super) fn marked() -> Held {
        Held { marked: true, ..Held::default() }
    }

    /// Issues each held barrier once on `hw` (the mark is the caller's: see
    /// [`Sim::flush_tlb_batched_pending`]).
    pub(super) fn issue<H: Hw>(self, hw: &H) {
        if self.dsb_ish {
            hw.barrier(Barrier::Dsb(Domain::InnerShareable));
        }
        if self.tlbsync {
            hw.barrier(Barrier::TlbSync);
        }
    }
}

/// The CPU as a deferred flush sees it (`__flush_tlb_range_nosync`): every
/// operation goes to the CPU's [`CpuHw`], except the barriers that wait for
/// invalidations to complete (`DSB ISH`, `TLBSYNC`) issued on this CPU outside an
/// IPI handler, which are held back ([`NoSync::held`]).
pub(crate) struct NoSync<'h, 'm> {
    hw: &'h CpuHw<'m>,
    /// IPI handlers running (their barriers are the target CPU's own, never held).
    handlers: Cell<u32>,
    held: Cell<Held>,
}

impl<'h, 'm> NoSync<'h, 'm> {
    /// Returns the view of `hw`.
    pub(super) fn new(hw: &'h CpuHw<'m>) -> Self {
        NoSync { hw, handlers: Cell::new(0), held: Cell::new(Held::default()) }
    }

    /// Returns the barriers held back so far.
    pub(super) fn held(&self) -> Held {
        self.held.get()
    }

    /// Runs an IPI handler that the machine calls with `target`, which is this
    /// view's own [`CpuHw`] acting for the target CPU (the machine runs a
    /// handler on the sender's interface), with barriers passed through.
    fn in_handler<F: Fn(&Self)>(&self, target: &CpuHw<'m>, handler: &F) {
        debug_assert!(std::ptr::eq(target, self.hw), "the machine ran a handler on another interface");
        self.handlers.set(self.handlers.get() + 1);
        handler(self);
        self.handlers.set(self.handlers.get() - 1);
    }
}

impl Hw for NoSync<'_, '_> {
    fn cpu(&self) -> CpuId {
        self.hw.cpu()
    }
    fn ncpus(&self) -> usize {
        self.hw.ncpus()
    }
    fn write_root(&self, root: Root, asid: Asid, noflush: bool) {
        self.hw.write_root(root, asid, noflush)
    }
    fn tlbi(&self, op: Tlbi, scope: Scope) {
        self.hw.tlbi(op, scope)
    }
    fn barrier(&self, b: Barrier) {
        if self.handlers.get() == 0 {
            let mut held = self.held.get();
            match b {
                Barrier::Dsb(Domain::InnerShareable) => held.dsb_ish = true,
                Barrier::TlbSync => held.tlbsync = true,
                _ => return self.hw.barrier(b),
            }
            self.held.set(held);
            return;
        }
        self.hw.barrier(b)
    }
    fn send_ipi<F: Fn(&Self)>(&self, targets: &CpuMask, handler: F) {
        self.hw.send_ipi(targets, |h| self.in_handler(h, &handler))
    }
    fn send_ipi_async<F: Fn(&Self)>(&self, targets: &CpuMask, handler: F) {
        self.hw.send_ipi_async(targets, |h| self.in_handler(h, &handler))
    }
    fn send_call_function_ipi_async<F: Fn(&Self)>(&self, targets: &CpuMask, handler: F) {
        self.hw.send_call_function_ipi_async(targets, |h| self.in_handler(h, &handler))
    }
    fn send_ipi_all_but_self_async<F: Fn(&Self)>(&self, handler: F) {
        self.hw.send_ipi_all_but_self_async(|h| self.in_handler(h, &handler))
    }
    fn shared(&self, addr: usize, access: Access) {
        self.hw.shared(addr, access)
    }
    fn spin_on(&self, addr: usize) {
        self.hw.spin_on(addr)
    }
    fn phase(&self, phase: Phase) {
        self.hw.phase(phase)
    }
    fn note(&self, note: Note) {
        self.hw.note(note)
    }
    fn jiffies(&self) -> u64 {
        self.hw.jiffies()
    }
    fn irqs_off<R>(&self, f: impl FnOnce() -> R) -> R {
        self.hw.irqs_off(f)
    }
    fn irq_disable(&self) {
        self.hw.irq_disable()
    }
    fn irq_enable(&self) {
        self.hw.irq_enable()
    }
    fn defer_flush(&self, mm: MmId, rule: Defer) -> Option<FlushTicket> {
        self.hw.defer_flush(mm, rule)
    }
    fn flush_complete(&self, ticket: FlushTicket) {
        self.hw.flush_complete(ticket)
    }
}

/// A folio the walk queued for reclaim: its first page, its pages (all mapped
/// from there, in order) and its first frame.
#[derive(Clone, Copy, Debug)]
pub(super) struct Queued {
    pub(super) va: u64,
    pub(super) pages: u64,
    pub(super) pfn: u64,
}

/// What `shrink_folio_list` keeps across the folios of one list: whether a
/// PTE it cleared since its last complete flush was dirty (`tlb_ubc->writable`,
/// set by `set_tlb_ubc_flush_pending` from `pte_dirty`), the folios written
/// out and waiting to be freed (`free_folios`, a `folio_batch`: when it fills,
/// `try_to_unmap_flush` and then `free_unref_folios`), and the barriers its
/// flushes issued (what the mm's next `flush_tlb_batched_pending` issues again).
#[derive(Default)]
pub(super) struct FolioList {
    dirty: bool,
    free: Vec<std::ops::Range<u64>>,
    held: Held,
}

impl FolioList {
    /// `try_to_unmap_flush`, then the waiting folios freed.
    fn flush_and_free(&mut self, mem: &mut KernelPtes<'_>) {
        self.held.merge(mem.sync_deferred());
        self.dirty = false;
        for r in std::mem::take(&mut self.free) {
            let freed = mem.sim.put_frames(r);
            mem.now = mem.sim.kfree_work(mem.cpu, freed, mem.now);
        }
    }

    /// The end of `shrink_folio_list`: completes every deferred flush, frees
    /// the folios still waiting, and returns the barriers the list's flushes
    /// issued.
    pub(super) fn finish(mut self, mem: &mut KernelPtes<'_>) -> Held {
        self.flush_and_free(mem);
        self.held
    }
}

/// Returns how many PTEs from `va`, at most `max_nr`, map consecutive pages
/// from `first`'s frame with `first`'s protection (`folio_pte_batch_flags`; the
/// write permission compared only with `respect_write`, the access and dirty
/// state never), reading one PTE per step of arm64's `pte_batch_hint`.
fn folio_pte_batch(
    mem: &mut KernelPtes<'_>,
    mm: MmId,
    va: u64,
    first: PteVal,
    max_nr: u64,
    respect_write: bool,
) -> u64 {
    let ignore = if respect_write { PteVal::CONT } else { PteVal::CONT | PteVal::WRITE };
    let prot = first.prot() & !ignore;
    let mut nr = arch::pte_batch_hint(VirtAddr(va), first).min(max_nr);
    while nr < max_nr {
        let v = VirtAddr(va).add_pages(nr);
        let pte = arch::ptep_get(mem, mm, v);
        if !pte.valid() || pte.pfn != first.pfn + nr || pte.prot() & !ignore != prot {
            break;
        }
        nr += arch::pte_batch_hint(v, pte).min(max_nr - nr);
    }
    nr
}

impl Sim {
    /// Returns whether reclaim's deferred flushes go through the policy's own
    /// batch hooks (x86: module documentation) rather than held-back range
    /// flushes (arm64).
    pub(super) fn x86_tlbbatch(&self) -> bool {
        self.cfg.preset.arch == crate::preset::Arch::X86_64
    }

    /// `flush_tlb_batched_pending(mm)` by `cpu` at `now`, for what the mm's
    /// last reclaim left (`pending`): the held barriers again (arm64), or,
    /// where the batch marked the mm (x86), `arch_flush_tlb_batched_pending`,
    /// the policy's [`Policy::flush_batched_pending`] (x86's `flush_tlb_mm`).
    /// Returns the time after it.
    pub(super) fn flush_tlb_batched_pending(&mut self, cpu: usize, mm: MmId, pending: Held, now: u64) -> u64 {
        let hw = CpuHw::new(&mut self.m, cpu, now);
        pending.issue(&hw);
        if pending.marked {
            self.policy.flush_batched_pending(&hw, mm);
        }
        hw.now()
    }

    /// Says what the workload's anonymous pages hold: [`Fill::Same`] for pages
    /// `memset` to one value, which zram stores and swaps in without
    /// compressing (`crate::swapdev`); ordinary data otherwise.
    ///
    /// [`Fill::Same`]: crate::swapdev::Fill::Same
    pub fn set_anon_fill(&mut self, fill: crate::swapdev::Fill) {
        self.mem.set_anon_fill(fill);
    }

    /// Makes `MADV_PAGEOUT` unmap each large anonymous folio's PTEs in batches
    /// (Dev Jain's series) with `on`, one at a time (Linux v7.0, the default)
    /// without. See the module documentation.
    pub fn set_pageout_batch(&mut self, on: bool) {
        self.mem.set_pageout_batch(on);
    }

    /// `madvise(MADV_PAGEOUT)` of `pages` pages at `va` in `mm` (module
    /// documentation); returns the time after it.
    pub(super) fn madvise_pageout(&mut self, cpu: usize, mm: MmId, va: u64, pages: u64, now: u64) -> u64 {
        let end = va + pages * 4096;
        let mut vmas: Vec<Vma> =
            self.kern.mm(mm).vmas().iter().copied().filter(|v| v.start < end && va < v.end()).collect();
        let covered: u64 = vmas.iter().map(|v| v.end().min(end).saturating_sub(v.start.max(va)) / 4096).sum();
        if !va.is_multiple_of(4096) || covered != pages {
            self.error.get_or_insert(format!(
                "madvise: {pages} page(s) at {va:#x} are not all mapped (or not page-aligned) in {mm}"
            ));
            return now;
        }
        vmas.sort_by_key(|v| v.start);
        let root = self.kern.mm(mm).root();
        let unfolds = self.stats.contpte.pte_range_flushes;
        let batch = self.mem.pageout_batch();
        let mut pending = self.kern.mm_mut(mm).take_batched();
        let mut mem = KernelPtes::new(self, cpu, now + self.m.costs.kernel.fault_path, "pageout");
        for v in vmas.iter().filter(|v| v.file.is_none()) {
            let (s, e) = (v.start.max(va), v.end().min(end));
            let mut tables = Vec::new();
            mem.sim.pt.for_each_leaf_table(root, s, (e - s) / 4096, |a, n| tables.push((a, n)));
            for (a, n) in tables {
                // flush_tlb_batched_pending, under the page-table lock.
                if pending.any() {
                    mem.now = mem.sim.flush_tlb_batched_pending(cpu, mm, pending, mem.now);
                    pending = Held::default();
                }
                let queued = Self::pageout_scan(&mut mem, mm, a, a + n * 4096);
                // reclaim_pages: the table's folios are one list.
                let mut list = FolioList::default();
                for f in queued {
                    Self::reclaim_folio(&mut mem, mm, f, batch, &mut list);
                }
                pending.merge(list.finish(&mut mem));
            }
        }
        let (now, owed) = mem.finish();
        self.kern.mm_mut(mm).keep_batched(pending);
        self.stats.pageout.pageout_unfolds += self.stats.contpte.pte_range_flushes - unfolds;
        // Every change was covered by a deferred flush and completed: nothing owed.
        debug_assert!(owed.is_empty());
        self.flush_unflushed(cpu, mm, "pageout", owed, now)
    }

    /// The walk of one last-level table's part `[start, end)` of an anonymous
    /// VMA: returns the folios it queues for reclaim, in address order.
    fn pageout_scan(mem: &mut KernelPtes<'_>, mm: MmId, start: u64, end: u64) -> Vec<Queued> {
        let mut queued = Vec::new();
        let mut a = start;
        while a < end {
            let pte = arch::ptep_get(mem, mm, VirtAddr(a));
            if !pte.valid() {
                a += 4096;
                continue;
            }
            let folio = mem.sim.folio(pte.pfn);
            let mut nr = 1;
            if folio.is_large() {
                let max_nr = (folio.pfn + folio.pages - pte.pfn).min((end - a) / 4096);
                nr = folio_pte_batch(mem, mm, a, pte, max_nr, false);
                if nr < folio.pages {
                    // Covered in part (Linux would split it) or mapped in part.
                    mem.sim.stats.pageout.pageout_skipped += 1;
                    a += nr * 4096;
                    continue;
                }
            }
            let exclusive = (0..nr).all(|i| mem.sim.frames.refs(pte.pfn + i) == 1);
            if exclusive && mem.sim.frames.kind(pte.pfn) != FrameKind::FileFolio {
                queued.push(Queued { va: a, pages: nr, pfn: pte.pfn });
            } else {
                mem.sim.stats.pageout.pageout_skipped += 1;
            }
            a += nr * 4096;
        }
        queued
    }

    /// Reclaims one queued folio of `list` (module documentation): unmaps its
    /// PTEs, one at a time or in batches, each with a deferred flush; completes
    /// the deferred flushes first if one of the PTEs it cleared since the last
    /// completion was dirty (`try_to_unmap_flush_dirty`); writes it to swap; and
    /// puts it on `list`'s folios to free, which are freed after the list's
    /// next complete flush ([`FolioList::finish`]).
    pub(super) fn reclaim_folio(mem: &mut KernelPtes<'_>, mm: MmId, f: Queued, batch: bool, list: &mut FolioList) {
        let large = f.pages > 1;
        let mut i = 0;
        while i < f.pages {
            let v = VirtAddr(f.va).add_pages(i);
            // page_vma_mapped_walk's check_pte, then try_to_unmap_one's own read.
            arch::ptep_get(mem, mm, v);
            let pte = arch::ptep_get(mem, mm, v);
            let nr = if batch && large { folio_pte_batch(mem, mm, v.0, pte, f.pages - i, true) } else { 1 };
            // get_and_clear_ptes: get_and_clear_full_ptes with full = 0; the
            // dirty bit decides set_tlb_ubc_flush_pending's `writable`.
            let old = arch::get_and_clear_full_ptes(mem, mm, v, nr);
            list.dirty |= old.dirty();
            mem.flush_deferred(mm, v, nr);
            // The swap PTEs (none here: swap entries are not modelled).
            if nr == 1 {
                arch::set_ptes(mem, mm, v, PteVal::NONE, 1, None);
            } else {
                for j in 0..nr {
                    mem.set(mm, v.add_pages(j), PteVal::NONE);
                }
            }
            i += nr;
        }
        // try_to_unmap_flush_dirty: a flush before the write only when a PTE
        // cleared since the last one was dirty (another CPU could otherwise
        // still write through it while the page goes to swap).
        if std::mem::take(&mut list.dirty) {
            list.held.merge(mem.sync_deferred());
        }
        // pageout (the write to the swap device); the folio waits on the list
        // to be freed.
        let c = mem.sim.m.costs;
        mem.now += c.kernel.zap_page * f.pages + c.kernel.zap_folio;
        mem.now = mem.sim.mem.swap_out(mem.now, f.pages);
        let sim = &mut *mem.sim;
        sim.kern.mm_mut(mm).paged_out((0..f.pages).map(|j| f.va + j * 4096));
        sim.stats.pageout.pageout_folios += 1;
        sim.stats.pageout.pageout_pages += f.pages;
        list.free.push(f.pfn..f.pfn + f.pages);
        if list.free.len() >= mem.sim.kw.folio_batch() {
            list.flush_and_free(mem);
        }
    }

    /// Records that a fault mapped `pages` pages from `va` in `mm` at `now`:
    /// those that `MADV_PAGEOUT` had paged out are swapped in (one swap-in per
    /// fault), read from the swap device. Returns when they are in memory.
    pub(super) fn note_swapin(&mut self, mm: MmId, va: u64, pages: u64, now: u64) -> u64 {
        let hit = self.kern.mm_mut(mm).take_swapped(va, va + pages * 4096);
        if hit.is_empty() {
            return now;
        }
        self.stats.pageout.swapins += 1;
        self.mem.swap_in(now, hit.len() as u64)
    }

    /// Forgets the paged-out pages of `pages` pages from `va` in `mm`: their swap
    /// entries are zapped (`munmap`, `MAP_FIXED`, `MADV_DONTNEED`), which frees the
    /// swap slots and touches no TLB.
    pub(super) fn forget_swapped(&mut self, mm: MmId, va: u64, pages: u64) {
        let end = va.saturating_add(pages.saturating_mul(4096));
        self.kern.mm_mut(mm).take_swapped(va, end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tlbkit_policy::contpte::CONT_PTES;

    #[test]
    fn held_barriers_merge_and_are_issued_once_each() {
        let mut h = Held::default();
        assert!(!h.any());
        h.merge(Held { dsb_ish: true, ..Held::default() });
        h.merge(Held { dsb_ish: true, ..Held::default() });
        assert_eq!(h, Held { dsb_ish: true, ..Held::default() });
        assert!(h.any());
        assert!(Held::marked().any(), "an x86 batch's mark is owed to the next walk");
    }

    #[test]
    fn the_batch_hint_is_the_rest_of_a_contiguous_block() {
        let cont = PteVal::new(0x100, PteVal::VALID | PteVal::CONT);
        assert_eq!(arch::pte_batch_hint(VirtAddr(0x40_0000), cont), CONT_PTES);
        assert_eq!(arch::pte_batch_hint(VirtAddr(0x40_3000), cont), CONT_PTES - 3);
        assert_eq!(arch::pte_batch_hint(VirtAddr(0x40_3000), PteVal::new(0x100, PteVal::VALID)), 1);
    }
}
