//! The contiguous block (`--teardown`): every address space also maps one
//! 64 KB file folio through [`BLOCK`] contiguous PTEs, and the kernel changes
//! them with the policy crate's arm64 contpte code — the code the simulator runs
//! — through `CheckPtes`, its [`PteMem`] over the checked machine.
//!
//! # What happens to the block
//! - **A write** (operation `write`, by a CPU in user mode): the CPU writes a page
//!   of its process's block through a TLB entry it holds. Through a 64 KB entry
//!   the hardware records the write in *any one* valid contiguous PTE of the
//!   block (FEAT_HAFDBS; which one is a choice the search explores); through a
//!   4 KB entry, in the page's own PTE. With no valid PTE to record it in, the
//!   write would fault and is not offered. The ground truth notes the page as
//!   written ([`crate::kernel::Space::written`]).
//! - **`munmap` of one page** (`zap_pte_range` without `fullmm`): `ptep_get`,
//!   then `ptep_get_and_clear`, which unfolds the block (break-before-make: 16
//!   exchanges, a range flush, 16 writes), then the range flush of the page.
//!   Every strategy takes this path for a single page.
//! - **A fault** on an unmapped page (`filemap_map_pages` of one page): `set_ptes`
//!   of one writable, young, clean PTE, which refolds the block when it completes
//!   it.
//! - **Aging** (with reclaim, by `kswapd` on an idle CPU): `folio_referenced`'s
//!   `ptep_clear_flush_young` of the block's first mapped page, which ages all
//!   16 PTEs of a contiguous block and flushes it if any was young. PTEs are
//!   mapped young (the fault's own block is not prefaulted old); the hardware's
//!   access-flag updates on later walks are not modelled, so an aged PTE stays
//!   old, which is what gives `robust` its clean-PTE path.
//! - **Exit**: `teardown_range` with the chosen strategy over the block
//!   (`zap_pte_range` with `fullmm`), then the exit's `flush_mm`.
//!
//! Every PTE access of `munmap` and of a fault is a preemption point, and writes
//! by other CPUs of the same process may come between any two. An exiting
//! process has no threads left, so nothing else touches its block: the teardown
//! runs without preemption, but the hardware still fills every TLB from the
//! block after every access (as after every step) and the oracle looks.
//!
//! # What is judged
//! - `no_lost_dirty`, judged on the folio, as the kernel tracks it
//!   (`zap_present_folio_ptes` marks the folio dirty if any value it gets back
//!   is dirty; the block is one folio): a page written since it was mapped is
//!   cleared clean while no value of the same operation marks the folio dirty
//!   and no valid PTE of the block still records the write; or, after any
//!   operation, a written page's PTE is valid and no valid PTE of the block
//!   records the write.
//! - `no_ungathered_dirty`: a value the arch code returns for a cleared PTE is
//!   clean while the block was dirty, as `ptep_get` would have gathered it, when
//!   the PTE was exchanged: the per-PTE contract of `ptep_get_and_clear_full`,
//!   weaker than `no_lost_dirty` (the simulator judges both the same way).
//! - `no_tlb_conflict` ([`crate::kernel::Machine::check_block`]).
//!
//! Not judged for the block: `no_stale_use`, `no_stale_held` and
//! `no_reuse_while_mapped` (its frames are page-cache frames, never freed); the
//! ordinary page of every address space carries those. A write through an entry
//! filled from an already-dirty PTE, which real hardware completes without
//! updating any PTE, is always made here to record itself in a PTE as well.

use crate::engine::Engine;
use crate::kernel::{folio_pfn, va_of, Violation, BLOCK, BLOCK_PAGE};
use crate::trace::Kind;
use tlbkit_policy::contpte::{
    ptep_clear_flush_young, ptep_get, ptep_get_and_clear, set_ptes, teardown_range, Folio, MmFlushOwed, PteMem, PteVal,
};
use tlbkit_policy::{MmId, Policy, VirtAddr};

/// The block's PTEs of the checked machine, as the arch code sees them from CPU
/// `cpu`.
pub(crate) struct CheckPtes<'a, E: Engine, P: Policy> {
    core: &'a E,
    policy: &'a P,
    cpu: usize,
    /// Whether other CPUs may write the block meanwhile: then every access is a
    /// preemption point. Otherwise the hardware fills after each access inline.
    racy: bool,
    /// Per block page: whether the block was dirty, as `ptep_get` gathers it,
    /// when the page's valid PTE was last exchanged (`no_ungathered_dirty`).
    gathered: [Option<bool>; BLOCK],
}

/// Returns the block index of `va`.
fn index(va: VirtAddr) -> usize {
    let j = ((va.0 - va_of(BLOCK_PAGE)) / VirtAddr::PAGE_SIZE) as usize;
    assert!(j < BLOCK, "the contpte code touched {:#x}, outside the block", va.0);
    j
}

fn key(v: PteVal) -> u64 {
    v.pfn << 16 | v.flags as u64
}

impl<'a, E: Engine, P: Policy> CheckPtes<'a, E, P> {
    pub(crate) fn new(core: &'a E, policy: &'a P, cpu: usize, racy: bool) -> Self {
        CheckPtes { core, policy, cpu, racy, gathered: [None; BLOCK] }
    }

    fn before(&self) {
        if self.racy {
            self.core.pause();
        }
    }

    /// The hardware between two accesses: fill, then judge what it may now hold.
    fn after(&self) {
        if self.racy {
            return;
        }
        let judged = {
            let mut m = self.core.machine_mut();
            m.fill_all();
            m.check_block()
        };
        if let Err(v) = judged {
            self.core.violated(v);
        }
    }

    fn pte(&self, mm: MmId, j: usize) -> PteVal {
        self.core.machine().block_pte(mm.0, j)
    }

    fn put(&self, mm: MmId, j: usize, v: PteVal, what: &'static str) {
        let old = self.core.machine_mut().write_block_pte(mm.0, j, v);
        self.core.event_kind(self.cpu, 0x19_0000 ^ (j as u64) << 40 ^ key(v), Kind::PageTable, || {
            format!("{what} PTE of {:#x} in mm{}: {old:?} -> {v:?}", va_of(BLOCK_PAGE + j), mm.0)
        });
    }
}

impl<E: Engine, P: Policy> PteMem for CheckPtes<'_, E, P> {
    fn get(&mut self, mm: MmId, va: VirtAddr) -> PteVal {
        self.before();
        let j = index(va);
        let v = self.pte(mm, j);
        // A read shapes what the CPU does next, so it is history; it is not shown.
        self.core.remember(self.cpu, 0x1a_0000 ^ (j as u64) << 40 ^ key(v));
        self.after();
        v
    }

    fn set(&mut self, mm: MmId, va: VirtAddr, pte: PteVal) {
        self.before();
        self.put(mm, index(va), pte, "write");
        self.after();
    }

    fn get_and_clear(&mut self, mm: MmId, va: VirtAddr) -> PteVal {
        self.before();
        let j = index(va);
        let old = self.pte(mm, j);
        if old.valid() {
            let block_dirty = self.core.machine().space(mm.0).block.iter().any(|p| p.valid_cont() && p.dirty());
            self.gathered[j] = Some(if old.valid_cont() { block_dirty } else { old.dirty() });
        }
        self.put(mm, j, PteVal::NONE, "clear");
        self.core.remember(self.cpu, key(old));
        self.after();
        old
    }

    fn cmpxchg(&mut self, mm: MmId, va: VirtAddr, old: PteVal, new: PteVal) -> Result<(), PteVal> {
        self.before();
        let j = index(va);
        let now = self.pte(mm, j);
        let r = if now == old {
            self.put(mm, j, new, "cmpxchg");
            Ok(())
        } else {
            self.core.remember(self.cpu, 0x1b_0000 ^ key(now));
            Err(now)
        };
        self.after();
        r
    }

    fn flush_tlb_range(&mut self, mm: MmId, va: VirtAddr, pages: u64) {
        let hw = self.core.hw(self.cpu);
        self.core.event_kind(self.cpu, 0x1c_0000 ^ va.0 ^ pages << 48, Kind::Op, || {
            format!("flush_tlb_range {:#x}, {pages} page(s), of mm{}", va.0, mm.0)
        });
        self.policy.flush_range(&hw, mm, va, pages);
        self.after();
    }
}

/// Returns the block indices where a write by CPU `cpu` (running `slot`) to
/// block page `i` could be recorded: any valid contiguous PTE if it holds a
/// 64 KB entry of the block under the tag it runs with, the page's own valid PTE
/// if it holds a 4 KB entry of the page.
pub(crate) fn write_targets(m: &crate::kernel::Machine, cpu: usize, slot: u32, i: usize) -> Vec<usize> {
    let s = m.space(slot);
    let tag = m.root(cpu).1;
    let mut targets = Vec::new();
    let held = |big: bool| {
        m.tlb(cpu).iter().any(|e| {
            (e.global || e.asid == tag)
                && e.uid == s.uid
                && e.big == big
                && if big { e.page as usize == BLOCK_PAGE } else { e.page as usize == BLOCK_PAGE + i }
        })
    };
    if held(true) {
        targets.extend((0..s.block.len()).filter(|&j| s.block[j].valid_cont()));
    }
    if held(false) && s.block[i].valid() && !targets.contains(&i) {
        targets.push(i);
    }
    targets
}

/// The write operation: CPU `cpu`, running `slot`, writes block page `i`, and the
/// hardware records it in one of `targets` (chosen by the search).
pub(crate) fn write<E: Engine>(core: &E, cpu: usize, slot: u32, i: usize) {
    let targets = write_targets(&core.machine(), cpu, slot, i);
    let labels: Vec<u32> = (0..targets.len() as u32).collect();
    let Some(k) = core.choose_op(&labels) else { return };
    let j = targets[k];
    core.machine_mut().record_write(slot, i, j);
    core.event_kind(cpu, 0x1d_0000 ^ (i as u64) << 8 ^ j as u64, Kind::PageTable, || {
        format!(
            "user write to {:#x}: the hardware records it as dirty in the PTE of {:#x}",
            va_of(BLOCK_PAGE + i),
            va_of(BLOCK_PAGE + j)
        )
    });
}

/// Judges the values the arch code returned when one operation cleared block
/// pages of `slot` (`cleared`: page and value, in order; `gathered`: what
/// [`CheckPtes`] recorded at each page's exchange), and forgets the pages'
/// writes. The block is one folio, which the core mm marks dirty if any value
/// is dirty (`zap_present_folio_ptes`):
/// - `no_lost_dirty`: a page written since it was mapped came back clean, no
///   value marked the folio dirty, and no valid PTE of the block still records
///   it (if one does, it carries the write from then on);
/// - `no_ungathered_dirty`: a value came back clean while the block was dirty,
///   as `ptep_get` would have gathered it, when the PTE was exchanged (the
///   per-PTE contract of `ptep_get_and_clear_full`; nothing is lost by itself).
fn judge<E: Engine>(
    core: &E,
    cpu: usize,
    slot: u32,
    cleared: &[(usize, PteVal)],
    gathered: &[Option<bool>; BLOCK],
    how: &str,
) {
    let lost = core.machine_mut().forget_block_writes(slot, cleared);
    let ungathered = cleared.iter().find(|&&(j, pte)| gathered[j] == Some(true) && !pte.dirty()).copied();
    if let Some((j, pte)) = lost {
        core.violated(Violation {
            property: "no_lost_dirty",
            cpu,
            detail: format!(
                "file page {:#x} of mm{slot} was written since it was mapped, but {how} returned its PTE clean \
                 ({pte:?}) and no value or valid PTE of its folio records the write: the folio is never marked \
                 dirty, the write never written back",
                va_of(BLOCK_PAGE + j)
            ),
        });
    }
    if let Some((j, pte)) = ungathered {
        core.violated(Violation {
            property: "no_ungathered_dirty",
            cpu,
            detail: format!(
                "{how} returned the PTE of file page {:#x} of mm{slot} clean ({pte:?}) while its contiguous block was \
                 dirty: the value does not carry the block's gathered dirty state (nothing is lost if another value \
                 marks the folio dirty)",
                va_of(BLOCK_PAGE + j)
            ),
        });
    }
}

/// Checks that every valid PTE of a written page of `slot`'s block still has
/// the write recorded in a valid PTE of the block, the folio that clearing any
/// of them marks dirty.
pub(crate) fn check_dirty_kept<E: Engine>(core: &E, cpu: usize, slot: u32) {
    let lost = {
        let m = core.machine();
        let s = m.space(slot);
        let folio_dirty = s.block.iter().any(|p| p.valid() && p.dirty());
        (0..s.block.len()).find(|&j| s.written & (1 << j) != 0 && s.block[j].valid() && !folio_dirty)
    };
    if let Some(j) = lost {
        core.violated(Violation {
            property: "no_lost_dirty",
            cpu,
            detail: format!(
                "file page {:#x} of mm{slot} was written, but no valid PTE of its folio records it any more",
                va_of(BLOCK_PAGE + j)
            ),
        });
    }
}

/// The file folio of `slot`'s block.
fn folio(slot: u32) -> Folio {
    Folio { pfn: folio_pfn(slot), pages: BLOCK as u64 }
}

/// `munmap` of block page `j` of `slot` (the caller holds its `mmap_lock`).
pub(crate) fn unmap<E: Engine, P: Policy>(core: &E, p: &P, cpu: usize, slot: u32, j: usize) {
    let mm = MmId(slot);
    let va = VirtAddr(va_of(BLOCK_PAGE + j));
    let mut mem = CheckPtes::new(core, p, cpu, true);
    // `zap_pte_range` skips a PTE another thread's `munmap` cleared meanwhile.
    if !ptep_get(&mut mem, mm, va).valid() {
        return;
    }
    let pte = ptep_get_and_clear(&mut mem, mm, va);
    let gathered = mem.gathered;
    judge(core, cpu, slot, &[(j, pte)], &gathered, "ptep_get_and_clear");
    // munmap's own flush of the page (`tlb_finish_mmu`).
    mem.flush_tlb_range(mm, va, 1);
    check_dirty_kept(core, cpu, slot);
}

/// A fault mapping block page `j` of `slot` again (the caller holds its
/// `mmap_lock`).
pub(crate) fn fault<E: Engine, P: Policy>(core: &E, p: &P, cpu: usize, slot: u32, j: usize) {
    let mm = MmId(slot);
    let va = VirtAddr(va_of(BLOCK_PAGE + j));
    let pte = PteVal::new(folio_pfn(slot) + j as u64, PteVal::VALID | PteVal::WRITE | PteVal::YOUNG);
    let mut mem = CheckPtes::new(core, p, cpu, true);
    // As `finish_fault` rechecks `pte_none` under the page-table lock: another
    // thread's fault may have mapped the page while this one slept.
    if !ptep_get(&mut mem, mm, va).none() {
        return;
    }
    set_ptes(&mut mem, mm, va, pte, 1, Some(folio(slot)));
    check_dirty_kept(core, cpu, slot);
}

/// kswapd ages the first mapped page of `slot`'s block (the caller holds its
/// `mmap_lock`, standing for the page-table lock `folio_referenced` takes).
pub(crate) fn age<E: Engine, P: Policy>(core: &E, p: &P, cpu: usize, slot: u32) {
    let first = core.machine().space(slot).block.iter().position(|v| v.valid());
    let Some(j) = first else { return };
    let mut mem = CheckPtes::new(core, p, cpu, true);
    let young = ptep_clear_flush_young(&mut mem, MmId(slot), VirtAddr(va_of(BLOCK_PAGE + j)));
    core.event(cpu, 0x1f_0000 + young as u64, || {
        format!("the block of mm{slot} was {}", if young { "young: aged and flushed" } else { "old already" })
    });
    check_dirty_kept(core, cpu, slot);
}

/// Tears the block of exiting `slot` down with `strategy`; returns the flush
/// still owed (the exit's `flush_mm`).
pub(crate) fn teardown<E: Engine, P: Policy>(
    core: &E,
    p: &P,
    cpu: usize,
    slot: u32,
    strategy: tlbkit_policy::contpte::Teardown,
) -> MmFlushOwed {
    let mm = MmId(slot);
    let mut mem = CheckPtes::new(core, p, cpu, false);
    let f = folio(slot);
    let start = VirtAddr(va_of(BLOCK_PAGE));
    let mut cleared = Vec::with_capacity(BLOCK);
    let owed = teardown_range(
        strategy,
        &mut mem,
        mm,
        start,
        BLOCK as u64,
        |pfn| f.contains(pfn).then_some(f),
        |va, pte| cleared.push((index(va), pte)),
    );
    judge(core, cpu, slot, &cleared, &mem.gathered, "the exit teardown");
    owed
}
