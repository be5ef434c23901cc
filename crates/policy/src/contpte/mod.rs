//! arm64 contiguous PTEs (contpte): Linux `arch/arm64/mm/contpte.c` and the contpte
//! wrappers of `arch/arm64/include/asm/pgtable.h` as of v6.9, plus the two exit
//! teardowns of origin 004 that never landed (the v2 "simple" and the "robust"
//! `ptep_get_and_clear_full`).
//!
//! # What the hardware does
//! With 4 KB pages, [`CONT_PTES`] (16) consecutive PTEs that map 16 physically
//! contiguous pages, with the block 64 KB-aligned both virtually and physically and
//! every PTE carrying the contiguous bit ([`PteVal::CONT`]), may be cached by the
//! TLB as one 64 KB entry (Arm ARM, "The Contiguous bit"). The PTEs of such a block
//! must agree in everything but the access flag and the dirty state, or the TLB may
//! return any of them or raise a TLB conflict abort (Arm ARM, "Misprogramming of the
//! Contiguous bit"). Hardware updates of the access flag and
//! of the dirty state (FEAT_HAFDBS) land in *any one* PTE of the block, so reading
//! one PTE alone says nothing about whether its page was accessed or written.
//!
//! # What Linux does about it (v6.9)
//! The contiguous bit is private to the arch layer: the core mm calls the usual
//! `set_ptes`, `ptep_get`, `ptep_get_and_clear`, … and the arch folds and unfolds
//! blocks behind them.
//! - **Fold** ([`try_fold`], `contpte_try_fold` + `__contpte_try_fold`): when
//!   `set_ptes` writes one PTE that is the last of a block (virtual index 15 and
//!   frame number ≡ 15 mod 16), and the block lies entirely inside the PTE's folio,
//!   and all 16 PTEs are valid, map consecutive frames and have the same
//!   permissions (ignoring access/dirty), the block is rewritten with the contiguous
//!   bit. A multi-page `set_ptes` ([`set_ptes`] with `nr > 1`, `contpte_set_ptes`)
//!   instead writes every fully covered aligned block with the bit directly (the
//!   PTEs were not present, so there is nothing to break).
//! - **Unfold** ([`try_unfold`], `contpte_try_unfold`): before any change that would
//!   make a block's PTEs disagree, the block is rewritten without the bit.
//! - Both go through `contpte_convert`, which is **break-before-make**: clear all 16
//!   PTEs (each an atomic exchange with 0, ORing the access and dirty bits it
//!   returns into the new value), invalidate the 64 KB range (`__flush_tlb_range`
//!   with a 4 KB stride, last level: [`PteMem::flush_tlb_range`]), and only then
//!   write the 16 new PTEs. No CPU can ever hold a contiguous and a non-contiguous
//!   translation for the same page at once.
//! - **Reads** ([`ptep_get`]) OR the access and dirty bits of the whole block into
//!   the returned PTE; [`ptep_get_lockless`] (for GUP-fast, without the page-table
//!   lock) re-reads the block until it sees 16 valid contiguous PTEs with
//!   consecutive frames and one protection.
//! - [`wrprotect_ptes`] write-protects whole blocks in place (the caller's later
//!   flush makes it effective) and unfolds partly covered ones;
//!   [`ptep_set_access_flags`] applies a fault's access/dirty update to all 16 PTEs
//!   when the write permission does not change and unfolds when it does;
//!   [`ptep_test_and_clear_young`] ages the whole block.
//! - **Teardown** ([`teardown`]): the four exit strategies of origin 004, selected by
//!   [`Teardown`], driven by [`teardown_range`], which is the core mm's
//!   `zap_pte_range` loop for each.
//!
//! # The interface
//! The arch code is written against [`PteMem`], the page-table memory the core
//! kernel gives it: one method is one memory access (or one TLB range flush), and
//! between any two of them another CPU, or the hardware, may act. Hardware may set
//! [`PteVal::YOUNG`] or [`PteVal::DIRTY`] in any one *valid* PTE of a contiguous
//! block between any two calls. The simulator implements `PteMem` over its page
//! tables and charges each access; a model checker implements it by yielding to
//! its scheduler at every call, and so runs this very code under every
//! interleaving with the hardware.
//!
//! Where Linux looks up `page_folio(pfn_to_page(pfn))`, the caller passes a
//! [`Folio`] (or, for a whole range, a lookup closure).
//!
//! # What is modelled and what is not
//! - The dirty state is one bit, [`PteVal::DIRTY`]: the arm64 encoding (software
//!   `PTE_DIRTY`, or hardware-dirty as `PTE_WRITE && !PTE_RDONLY` under DBM) is
//!   collapsed, so `pte_mkclean`, `pte_mkdirty`, `pte_wrprotect` and `pte_same` act
//!   on that bit alone. Hardware sets it on a write through a writable PTE.
//! - Present means valid: PROT_NONE, swap entries and PTE markers are not modelled
//!   (an invalid PTE is always [`PteVal::NONE`] once cleared).
//! - Kernel mappings ([`MmId::KERNEL`]) never get the contiguous bit, as
//!   `mm_is_user` keeps `init_mm` out; EFI mms do not exist here.
//! - Special mappings (no folio) are never folded, as in Linux: pass `None` as the
//!   folio.
//! - `__sync_icache_dcache`, MTE tags and `page_table_check` are not modelled; they
//!   touch no PTE.
//! - The PTL is the caller's: every function except [`ptep_get_lockless`] expects
//!   it held, i.e. no other *software* writer of these PTEs runs concurrently (the
//!   hardware always may).

pub mod ops;
pub mod pte;
pub mod teardown;
#[cfg(test)]
pub(crate) mod testmem;

pub use ops::{
    block_index, block_start, clear_full_ptes, get_and_clear_full_ptes, pte_batch_hint, ptep_clear_flush_young,
    ptep_get, ptep_get_and_clear, ptep_get_lockless, ptep_set_access_flags, ptep_test_and_clear_young, set_ptes,
    try_fold, try_unfold, wrprotect_ptes,
};
pub use pte::PteVal;
pub use teardown::{ptep_get_and_clear_full, teardown_range, MmFlushOwed, Teardown, UnknownTeardown};

use crate::types::{MmId, VirtAddr};

/// The number of PTEs in a contiguous block with 4 KB pages (`CONT_PTES`).
pub const CONT_PTES: u64 = 16;

/// The bytes a contiguous block maps: 64 KB (`CONT_PTE_SIZE`).
pub const CONT_PTE_SIZE: u64 = CONT_PTES * VirtAddr::PAGE_SIZE;

/// A folio: a physically contiguous allocation of `pages` base pages from frame
/// `pfn`, which the core mm tracks (dirty, accessed, mapped) as one unit.
///
/// It stands for Linux's `page_folio(pfn_to_page(pfn))`. It does not say where the
/// folio is mapped: like `__contpte_try_fold`, the code derives the folio's start
/// address from the address and frame of the PTE at hand (a folio may be mapped at
/// several addresses, in several address spaces).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Folio {
    /// The first frame.
    pub pfn: u64,
    /// The number of base pages (`folio_nr_pages`), at least 1.
    pub pages: u64,
}

impl Folio {
    /// Returns whether frame `pfn` belongs to this folio.
    pub const fn contains(self, pfn: u64) -> bool {
        pfn >= self.pfn && pfn - self.pfn < self.pages
    }

    /// Returns whether the folio has more than one page (`folio_test_large`).
    pub const fn is_large(self) -> bool {
        self.pages > 1
    }
}

/// The page-table memory the core kernel offers the arch layer.
///
/// Each call is one memory access to one PTE (or one TLB range flush): the unit
/// at which a model checker may preempt, and at which the hardware may set the
/// access flag or the dirty state in any valid PTE of a contiguous block. PTEs are
/// named by address space and virtual address (the kernel's `pte_t *`).
///
/// Implementations must make [`PteMem::get_and_clear`] and [`PteMem::cmpxchg`]
/// atomic with respect to hardware updates: those two are how the arch layer avoids
/// losing an access or dirty bit that hardware sets concurrently.
pub trait PteMem {
    /// Reads the PTE mapping `va` (`__ptep_get`, a `READ_ONCE`).
    fn get(&mut self, mm: MmId, va: VirtAddr) -> PteVal;

    /// Writes the PTE mapping `va` (`__set_pte`, a `WRITE_ONCE`). Not atomic with
    /// respect to hardware updates: the arch layer only overwrites PTEs that are
    /// invalid, or whose hardware-updated bits it has just gathered.
    fn set(&mut self, mm: MmId, va: VirtAddr, pte: PteVal);

    /// Atomically replaces the PTE mapping `va` with [`PteVal::NONE`] and returns
    /// what it held (`__ptep_get_and_clear`, `xchg_relaxed(ptep, 0)`).
    fn get_and_clear(&mut self, mm: MmId, va: VirtAddr) -> PteVal;

    /// Atomically replaces the PTE mapping `va` with `new` if it still holds `old`
    /// (`cmpxchg_relaxed`); otherwise returns what it holds. Used for the
    /// access-flag, write-protect and young updates that race the hardware.
    fn cmpxchg(&mut self, mm: MmId, va: VirtAddr, old: PteVal, new: PteVal) -> Result<(), PteVal>;

    /// Invalidates `pages` pages of `mm` from `va` in every TLB and returns when that
    /// is complete: arm64 `__flush_tlb_range(vma, va, va + pages * PAGE_SIZE,
    /// PAGE_SIZE, true, 3)` (last level, 4 KB stride, broadcast, ending with
    /// `DSB ISH`). The simulator routes it to the ASID policy's
    /// [`crate::Policy::flush_range`]; the oracle's obligations for the PTEs cleared
    /// before it are discharged when it returns.
    fn flush_tlb_range(&mut self, mm: MmId, va: VirtAddr, pages: u64);
}
