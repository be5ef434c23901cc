//! The contpte-aware PTE API arm64 gives the core mm (v6.9): fold and unfold, reads,
//! `set_ptes`, write-protect, access-flag updates, ageing and clearing.
//!
//! Each public function is one public `pgtable.h` entry point, with the
//! `contpte.c` helper it calls inlined or as a private function of the same name
//! without the `contpte_` prefix. Every PTE access goes through [`PteMem`], in the
//! order Linux makes it, so that the access count (what the simulator charges)
//! and the interleaving points (what the checker explores) are Linux's.

use super::{Folio, PteMem, PteVal, CONT_PTES, CONT_PTE_SIZE};
use crate::types::{MmId, VirtAddr};

const PAGE_SIZE: u64 = VirtAddr::PAGE_SIZE;

/// Returns the first address of the contiguous block holding `va`
/// (`ALIGN_DOWN(addr, CONT_PTE_SIZE)`, and `contpte_align_down` for the PTE pointer).
pub const fn block_start(va: VirtAddr) -> VirtAddr {
    VirtAddr(va.0 & !(CONT_PTE_SIZE - 1))
}

/// Returns the index of `va`'s PTE within its contiguous block, `0..CONT_PTES`.
pub const fn block_index(va: VirtAddr) -> u64 {
    (va.0 / PAGE_SIZE) & (CONT_PTES - 1)
}

/// Returns whether the contiguous bit may be managed in `mm` (`mm_is_user`): never
/// in the kernel's own tables, whose mappings cannot take the faults that a
/// concurrent fold or unfold causes.
const fn mm_is_user(mm: MmId) -> bool {
    !mm.is_kernel()
}

/// Writes `nr` PTEs from `va` for consecutive frames from `pte`'s (`__set_ptes`).
fn set_ptes_raw<M: PteMem>(mem: &mut M, mm: MmId, va: VirtAddr, pte: PteVal, nr: u64) {
    for i in 0..nr {
        mem.set(mm, va.add_pages(i), pte.advance_pfn(i));
    }
}

/// Rewrites the block holding `va` as `pte` says, break-before-make
/// (`contpte_convert`): clears all 16 PTEs gathering their access and dirty bits
/// into `pte`, invalidates the 64 KB range, then writes the 16 PTEs for the
/// block's consecutive frames. `pte` carries the contiguous bit for a fold and not
/// for an unfold.
fn convert<M: PteMem>(mem: &mut M, mm: MmId, va: VirtAddr, pte: PteVal) {
    let start = block_start(va);
    let mut pte = PteVal { pfn: pte.pfn & !(CONT_PTES - 1), flags: pte.flags };
    for i in 0..CONT_PTES {
        // The exchange is atomic against hardware: a bit set before it is
        // gathered here, and after it the PTE is invalid, so none is lost.
        let old = mem.get_and_clear(mm, start.add_pages(i));
        pte = pte.gather(old);
    }
    mem.flush_tlb_range(mm, start, CONT_PTES);
    set_ptes_raw(mem, mm, start, pte, CONT_PTES);
}

/// Folds the block whose last PTE, at `va`, was just written as `pte`, if it can
/// be folded (`contpte_try_fold`, then `__contpte_try_fold`).
///
/// Only tries when `va` is the block's last page and `pte` maps a frame ≡ 15 mod
/// 16 (the core mm mostly writes upwards, so this is likely the last write to the
/// block), `pte` is valid and not already contiguous, and it has a folio (special
/// mappings, `None`, are never folded). It then folds only if the block lies
/// entirely inside the folio, `mm` is a user address space, and all 16 PTEs, read
/// afresh, are valid, map consecutive frames and have `pte`'s protection (access
/// and dirty ignored). The fold itself is `contpte_convert`: break-before-make,
/// with the access and dirty bits of all 16 ORed into every new PTE.
pub fn try_fold<M: PteMem>(mem: &mut M, mm: MmId, va: VirtAddr, pte: PteVal, folio: Option<Folio>) {
    let last = CONT_PTES - 1;
    if block_index(va) != last || pte.pfn & last != last || !pte.valid() || pte.cont() {
        return;
    }
    if let Some(folio) = folio {
        fold(mem, mm, va, pte, folio);
    }
}

/// `__contpte_try_fold`: the checks that need the folio and the other 15 PTEs.
fn fold<M: PteMem>(mem: &mut M, mm: MmId, va: VirtAddr, pte: PteVal, folio: Folio) {
    if !mm_is_user(mm) {
        return;
    }
    if !folio.contains(pte.pfn) {
        debug_assert!(false, "try_fold: {pte:?} at {va} is not in {folio:?}");
        return;
    }
    // Where the folio starts if it is mapped linearly around va (Linux derives it
    // the same way, from the page's offset in its folio; wrapping as C's unsigned
    // arithmetic does).
    let folio_start = va.page_base().0.wrapping_sub((pte.pfn - folio.pfn) * PAGE_SIZE);
    let folio_end = folio_start.wrapping_add(folio.pages * PAGE_SIZE);
    let cont_start = block_start(va);
    if folio_start > cont_start.0 || folio_end < cont_start.0 + CONT_PTE_SIZE {
        return;
    }
    let mut expected = PteVal { pfn: pte.pfn & !(CONT_PTES - 1), flags: pte.prot() };
    for i in 0..CONT_PTES {
        let sub = mem.get(mm, cont_start.add_pages(i));
        if PteVal::new(sub.pfn, sub.prot()) != expected {
            return;
        }
        expected = expected.advance_pfn(1);
    }
    convert(mem, mm, va, pte.mkcont());
}

/// Unfolds the block holding `va` if `pte`, the value the caller just read from
/// `va`, is valid and contiguous (`contpte_try_unfold`, then
/// `__contpte_try_unfold`): break-before-make, every new PTE carrying the access
/// and dirty bits of all 16.
pub fn try_unfold<M: PteMem>(mem: &mut M, mm: MmId, va: VirtAddr, pte: PteVal) {
    if pte.valid_cont() {
        unfold(mem, mm, va, pte);
    }
}

/// `__contpte_try_unfold`: the caller has seen that the block is contiguous.
fn unfold<M: PteMem>(mem: &mut M, mm: MmId, va: VirtAddr, pte: PteVal) {
    if mm_is_user(mm) {
        convert(mem, mm, va, pte.mknoncont());
    }
}

/// Unfolds the blocks that `nr` PTEs from `va` cover only in part: the one holding
/// the first PTE unless the range starts on a block boundary and spans a block,
/// and the one holding the last PTE unless the range ends on a boundary
/// (`contpte_try_unfold_partial`).
fn try_unfold_partial<M: PteMem>(mem: &mut M, mm: MmId, va: VirtAddr, nr: u64) {
    if block_index(va) != 0 || nr < CONT_PTES {
        let first = mem.get(mm, va);
        try_unfold(mem, mm, va, first);
    }
    if block_index(va.add_pages(nr)) != 0 {
        let last_va = va.add_pages(nr - 1);
        let last = mem.get(mm, last_va);
        try_unfold(mem, mm, last_va, last);
    }
}

/// Returns `orig`, read from a PTE of the block holding `va`, with the access and
/// dirty bits of every valid PTE of the block ORed in (`contpte_ptep_get`).
///
/// Cleared PTEs are skipped, as the origin's v2 and robust patches added for a block
/// torn down one PTE at a time; v6.9 does not skip them, which gives the same
/// result because a cleared PTE is all zero.
pub(super) fn gather_block<M: PteMem>(mem: &mut M, mm: MmId, va: VirtAddr, orig: PteVal) -> PteVal {
    let start = block_start(va);
    let mut pte = orig;
    for i in 0..CONT_PTES {
        let sub = mem.get(mm, start.add_pages(i));
        if sub.valid() {
            pte = pte.gather(sub);
        }
    }
    pte
}

/// Reads the PTE mapping `va` as the core mm sees it (`ptep_get`): for a
/// contiguous PTE, with the access and dirty bits of the whole block ORed in
/// (hardware may have put them in any of the 16). The contiguous bit leaks
/// through, as in Linux; setters strip it.
///
/// Costs one read, plus 16 when the PTE is contiguous. Needs the page-table lock.
pub fn ptep_get<M: PteMem>(mem: &mut M, mm: MmId, va: VirtAddr) -> PteVal {
    let pte = mem.get(mm, va);
    if !pte.valid_cont() {
        return pte;
    }
    gather_block(mem, mm, va, pte)
}

/// Reads the PTE mapping `va` without the page-table lock (`ptep_get_lockless`,
/// then `contpte_ptep_get_lockless`, used by GUP-fast): like [`ptep_get`], but
/// another CPU may be folding, unfolding or changing the block meanwhile, so the
/// gathering starts over whenever a PTE of the block is not valid and contiguous,
/// maps the wrong frame, or has another protection than the first read. The result
/// is one consistent view of the block.
///
/// It does not return while another CPU keeps the block inconsistent (Linux spins
/// the same way): a model checker bounds that CPU, not this loop.
pub fn ptep_get_lockless<M: PteMem>(mem: &mut M, mm: MmId, va: VirtAddr) -> PteVal {
    let pte = mem.get(mm, va);
    if !pte.valid_cont() {
        return pte;
    }
    let start = block_start(va);
    'retry: loop {
        // contpte_ptep_get_lockless reads the PTE again rather than trust the
        // caller's read.
        let mut orig = mem.get(mm, va);
        if !orig.valid_cont() {
            return orig;
        }
        let prot = orig.prot();
        let pfn0 = orig.pfn.wrapping_sub(block_index(va));
        for i in 0..CONT_PTES {
            let sub = mem.get(mm, start.add_pages(i));
            if !sub.valid_cont() || sub.pfn != pfn0.wrapping_add(i) || sub.prot() != prot {
                continue 'retry;
            }
            orig = orig.gather(sub);
        }
        return orig;
    }
}

/// Returns how many PTEs from `va` the core mm may take as one batch without
/// reading them, given `pte`, the value just read at `va` (`pte_batch_hint`,
/// v6.9): the rest of the block for a valid contiguous PTE, else 1. The core
/// mm's `folio_pte_batch` advances by it, so it reads one PTE per block.
pub const fn pte_batch_hint(va: VirtAddr, pte: PteVal) -> u64 {
    if pte.valid_cont() {
        CONT_PTES - block_index(va)
    } else {
        1
    }
}

/// Returns the address that ends the part of `[addr, end)` inside `addr`'s block
/// (`pte_cont_addr_end`).
const fn cont_addr_end(addr: u64, end: u64) -> u64 {
    let boundary = (addr + CONT_PTE_SIZE) & !(CONT_PTE_SIZE - 1);
    if boundary.wrapping_sub(1) < end.wrapping_sub(1) {
        boundary
    } else {
        end
    }
}

/// Maps `nr` consecutive pages from `va` to consecutive frames from `pte`'s, with
/// `pte`'s flags (`set_ptes`). Any contiguous bit in `pte` is ignored.
///
/// - `nr == 1`: unfold the block if the old PTE was contiguous, write the PTE,
///   then [`try_fold`] with `folio` (the folio of `pte`'s frame, `None` for a
///   special mapping).
/// - `nr > 1` (`contpte_set_ptes`): Linux's contract is that the `nr` PTEs were not
///   present and map pages of one folio, so nothing is unfolded; every aligned
///   block the range covers entirely (virtually and physically) is written with
///   the contiguous bit directly, and the rest without it. No fold is attempted,
///   so `folio` is only checked (in debug builds).
pub fn set_ptes<M: PteMem>(mem: &mut M, mm: MmId, va: VirtAddr, pte: PteVal, nr: u64, folio: Option<Folio>) {
    let pte = pte.mknoncont();
    if nr == 1 {
        let old = mem.get(mm, va);
        try_unfold(mem, mm, va, old);
        mem.set(mm, va, pte);
        try_fold(mem, mm, va, pte, folio);
        return;
    }
    if let Some(f) = folio {
        debug_assert!(
            f.contains(pte.pfn) && f.contains(pte.pfn + nr - 1),
            "set_ptes: {nr} pages from {pte:?} leave {f:?}"
        );
    }
    if nr == 0 {
        return;
    }
    if !mm_is_user(mm) {
        set_ptes_raw(mem, mm, va, pte, nr);
        return;
    }
    let end = va.0 + nr * PAGE_SIZE;
    let mut addr = va.0;
    let mut pfn = pte.pfn;
    while addr != end {
        let next = cont_addr_end(addr, end);
        let n = (next - addr) / PAGE_SIZE;
        let aligned = (addr | next | (pfn * PAGE_SIZE)) & (CONT_PTE_SIZE - 1) == 0;
        let p = PteVal { pfn, flags: pte.flags };
        set_ptes_raw(mem, mm, VirtAddr(addr), if aligned { p.mkcont() } else { p }, n);
        addr = next;
        pfn += n;
    }
}

/// Write-protects the PTE at `va` starting from the value `pte` the caller read,
/// retrying against hardware updates (`___ptep_set_wrprotect`).
fn set_wrprotect<M: PteMem>(mem: &mut M, mm: MmId, va: VirtAddr, mut pte: PteVal) {
    while let Err(now) = mem.cmpxchg(mm, va, pte, pte.wrprotect()) {
        pte = now;
    }
}

/// Removes write permission from `nr` present PTEs from `va` (`wrprotect_ptes`,
/// for `fork` and `mprotect`), keeping their dirty state.
///
/// - `nr == 1`: a contiguous PTE unfolds its block first (one range TLBI).
/// - `nr > 1` (`contpte_wrprotect_ptes`): blocks the range covers only in part are
///   unfolded (at most two range TLBIs); whole blocks are write-protected in place,
///   contiguous bit kept, all 16 changing together as far as the caller's
///   following flush is concerned: until that flush a CPU may still write through
///   the old 64 KB entry, after it none can.
///
/// The caller flushes the range afterwards, as Linux's callers do.
pub fn wrprotect_ptes<M: PteMem>(mem: &mut M, mm: MmId, va: VirtAddr, nr: u64) {
    if nr == 1 {
        let mut orig = mem.get(mm, va);
        if orig.cont() {
            unfold(mem, mm, va, orig);
            orig = orig.mknoncont();
        }
        set_wrprotect(mem, mm, va, orig);
        return;
    }
    if nr == 0 {
        return;
    }
    try_unfold_partial(mem, mm, va, nr);
    for i in 0..nr {
        let v = va.add_pages(i);
        let pte = mem.get(mm, v);
        set_wrprotect(mem, mm, v, pte);
    }
}

/// Sets the access flag, dirty state and write permission of `entry` in the PTE at
/// `va`, never taking one away, atomically against hardware; returns whether the
/// PTE was not already `entry` (the origin's `__ptep_set_access_flags_notlbi`, the
/// body of `__ptep_set_access_flags`).
pub(super) fn set_access_flags_notlbi<M: PteMem>(mem: &mut M, mm: MmId, va: VirtAddr, entry: PteVal) -> bool {
    let pte = mem.get(mm, va);
    if pte == entry {
        return false;
    }
    let bits = entry.flags & (PteVal::YOUNG | PteVal::WRITE | PteVal::DIRTY);
    let mut old = pte;
    while let Err(now) = mem.cmpxchg(mm, va, old, PteVal { pfn: old.pfn, flags: old.flags | bits }) {
        old = now;
    }
    true
}

/// `__ptep_set_access_flags`: the above, then with `dirty` a flush of the page
/// (`flush_tlb_page`) so that no CPU keeps using a read-only or clean entry.
fn set_access_flags_one<M: PteMem>(mem: &mut M, mm: MmId, va: VirtAddr, entry: PteVal, dirty: bool) -> bool {
    let changed = set_access_flags_notlbi(mem, mm, va, entry);
    if changed && dirty {
        mem.flush_tlb_range(mm, va.page_base(), 1);
    }
    changed
}

/// Applies a fault's update `entry` (access flag, dirty state, write permission:
/// only ever more permissive) to the PTE at `va`; with `dirty`, flushes so that
/// every CPU sees the change (`ptep_set_access_flags`). Returns whether anything
/// changed.
///
/// For a contiguous PTE (`contpte_ptep_set_access_flags`): if `entry` equals the
/// block's gathered value, nothing happens. If the write permission stays as it
/// is, `entry`'s bits are applied to all 16 PTEs in place (Linux: hardware access
/// management needs only one, software management all 16) and, with `dirty`, the
/// 64 KB range is flushed once. If the write permission changes, the block is
/// unfolded first and only the one PTE updated.
pub fn ptep_set_access_flags<M: PteMem>(mem: &mut M, mm: MmId, va: VirtAddr, entry: PteVal, dirty: bool) -> bool {
    let first = mem.get(mm, va);
    let entry = entry.mknoncont();
    if !first.valid_cont() {
        return set_access_flags_one(mem, mm, va, entry, dirty);
    }
    let orig = ptep_get(mem, mm, va).mknoncont();
    if orig == entry {
        return false;
    }
    if orig.write() == entry.write() {
        let start = block_start(va);
        for i in 0..CONT_PTES {
            // entry is not advanced: only its flags are consumed.
            set_access_flags_one(mem, mm, start.add_pages(i), entry, false);
        }
        if dirty {
            mem.flush_tlb_range(mm, start, CONT_PTES);
        }
    } else {
        unfold(mem, mm, va, orig);
        set_access_flags_one(mem, mm, va, entry, dirty);
    }
    true
}

/// Clears the access flag of the PTE at `va`, retrying against hardware; returns
/// whether it was set (`__ptep_test_and_clear_young`).
fn test_and_clear_young_one<M: PteMem>(mem: &mut M, mm: MmId, va: VirtAddr) -> bool {
    let mut pte = mem.get(mm, va);
    while let Err(now) = mem.cmpxchg(mm, va, pte, pte.mkold()) {
        pte = now;
    }
    pte.young()
}

/// Clears the access flag of the PTE at `va` and returns whether it was set
/// (`ptep_test_and_clear_young`). For a contiguous PTE, all 16 of the block are
/// aged and the result is whether any was young
/// (`contpte_ptep_test_and_clear_young`: the core mm tracks access per folio, and
/// a block lies inside one folio). No TLB flush.
pub fn ptep_test_and_clear_young<M: PteMem>(mem: &mut M, mm: MmId, va: VirtAddr) -> bool {
    let orig = mem.get(mm, va);
    if !orig.valid_cont() {
        return test_and_clear_young_one(mem, mm, va);
    }
    test_and_clear_young_block(mem, mm, va)
}

/// Ages all 16 PTEs of the block holding `va`; returns whether any was young
/// (`contpte_ptep_test_and_clear_young`).
fn test_and_clear_young_block<M: PteMem>(mem: &mut M, mm: MmId, va: VirtAddr) -> bool {
    let start = block_start(va);
    let mut young = false;
    for i in 0..CONT_PTES {
        young |= test_and_clear_young_one(mem, mm, start.add_pages(i));
    }
    young
}

/// [`ptep_test_and_clear_young`], then, if it was young, a flush of the page or of
/// the whole block (`ptep_clear_flush_young`). Linux elides the trailing `DSB`
/// here (`__flush_tlb_range_nosync`); [`PteMem::flush_tlb_range`] always
/// completes, which is stronger.
pub fn ptep_clear_flush_young<M: PteMem>(mem: &mut M, mm: MmId, va: VirtAddr) -> bool {
    let orig = mem.get(mm, va);
    if !orig.valid_cont() {
        let young = test_and_clear_young_one(mem, mm, va);
        if young {
            mem.flush_tlb_range(mm, va.page_base(), 1);
        }
        return young;
    }
    let young = test_and_clear_young_block(mem, mm, va);
    if young {
        mem.flush_tlb_range(mm, block_start(va), CONT_PTES);
    }
    young
}

/// Clears the PTE at `va` and returns it, unfolding its block first if it is
/// contiguous (`ptep_get_and_clear`, and the generic `ptep_get_and_clear_full` of
/// v6.9, which ignores `full`): one range TLBI per contiguous block cleared this
/// way. The returned access and dirty bits are the whole block's, since the unfold
/// wrote them into every PTE. The caller flushes the page afterwards.
pub fn ptep_get_and_clear<M: PteMem>(mem: &mut M, mm: MmId, va: VirtAddr) -> PteVal {
    let orig = mem.get(mm, va);
    try_unfold(mem, mm, va, orig);
    mem.get_and_clear(mm, va)
}

/// Clears `nr` present PTEs from `va`, mapping consecutive pages of one folio
/// (`clear_full_ptes`; `full` is not used on arm64): with `nr == 1` as
/// [`ptep_get_and_clear`]; otherwise blocks covered only in part are unfolded and
/// whole blocks are cleared without unfolding and without a TLBI
/// (`contpte_clear_full_ptes`). The caller flushes the range (at exit, the whole
/// mm) before the frames are freed.
pub fn clear_full_ptes<M: PteMem>(mem: &mut M, mm: MmId, va: VirtAddr, nr: u64) {
    if nr == 1 {
        ptep_get_and_clear(mem, mm, va);
        return;
    }
    if nr == 0 {
        return;
    }
    try_unfold_partial(mem, mm, va, nr);
    for i in 0..nr {
        mem.get_and_clear(mm, va.add_pages(i));
    }
}

/// [`clear_full_ptes`], returning the first PTE with the access and dirty bits of
/// all `nr` ORed in (`get_and_clear_full_ptes`, `contpte_get_and_clear_full_ptes`,
/// `__get_and_clear_full_ptes`). Every bit hardware set before a PTE's exchange is
/// in the result; after its exchange a PTE is invalid and takes no more.
pub fn get_and_clear_full_ptes<M: PteMem>(mem: &mut M, mm: MmId, va: VirtAddr, nr: u64) -> PteVal {
    if nr == 1 {
        return ptep_get_and_clear(mem, mm, va);
    }
    if nr == 0 {
        return PteVal::NONE;
    }
    try_unfold_partial(mem, mm, va, nr);
    let mut pte = mem.get_and_clear(mm, va);
    for i in 1..nr {
        pte = pte.gather(mem.get_and_clear(mm, va.add_pages(i)));
    }
    pte
}

#[cfg(test)]
mod tests {
    use super::super::testmem::{va, Act, Call, Kind, TestMem, B, C, D, MM, PFN, V, VW, Y};
    use super::*;
    use std::vec;
    use std::vec::Vec;

    /// Returns 16 PTEs for frames from `pfn` with `flags`.
    fn block(pfn: u64, flags: u16) -> Vec<PteVal> {
        (0..CONT_PTES).map(|i| PteVal::new(pfn + i, flags)).collect()
    }

    /// Maps pages from `page` one `set_ptes` at a time, each with its frame's folio.
    fn map_one_by_one(mem: &mut TestMem, page: u64, ptes: &[PteVal], folio_of: impl Fn(u64) -> Option<Folio>) {
        for (i, &pte) in ptes.iter().enumerate() {
            set_ptes(mem, MM, va(page + i as u64), pte, 1, folio_of(pte.pfn));
        }
    }

    /// Returns the writes of a fold or unfold of block `B` to `after` (break-before-make).
    fn convert_writes(after: &[PteVal]) -> Vec<Call> {
        let mut w: Vec<Call> = (0..CONT_PTES).map(|i| Call::Clear(B + i)).collect();
        w.push(Call::Flush(B, CONT_PTES));
        w.extend(after.iter().enumerate().map(|(i, &p)| Call::Set(B + i as u64, p)));
        w
    }

    const FOLIO: Folio = Folio { pfn: PFN, pages: 16 };

    #[test]
    fn fold_when_the_last_pte_of_a_suitable_block_is_written() {
        let mut mem = TestMem::new();
        map_one_by_one(&mut mem, B, &block(PFN, VW)[..15], |_| Some(FOLIO));
        assert_eq!(mem.ptes(B..B + 15), block(PFN, VW)[..15].to_vec(), "nothing folds before the last PTE");
        assert_eq!(mem.count(Kind::Flush), 0);
        mem.clear_log();
        set_ptes(&mut mem, MM, va(B + 15), PteVal::new(PFN + 15, VW), 1, Some(FOLIO));
        let mut want = vec![Call::Set(B + 15, PteVal::new(PFN + 15, VW))];
        want.extend(convert_writes(&block(PFN, VW | C)));
        assert_eq!(mem.writes(), want, "break-before-make: all 16 cleared and the range flushed before any rewrite");
        assert_eq!(mem.ptes(B..B + 16), block(PFN, VW | C));
    }

    #[test]
    fn fold_needs_physical_alignment() {
        let mut mem = TestMem::new();
        let folio = Folio { pfn: PFN + 1, pages: 16 };
        map_one_by_one(&mut mem, B, &block(PFN + 1, VW), |_| Some(folio));
        assert_eq!(mem.ptes(B..B + 16), block(PFN + 1, VW));
        assert_eq!(mem.count(Kind::Clear) + mem.count(Kind::Flush), 0);
    }

    #[test]
    fn fold_needs_virtual_alignment() {
        let mut mem = TestMem::new();
        map_one_by_one(&mut mem, B + 1, &block(PFN, VW), |_| Some(FOLIO));
        assert_eq!(mem.ptes(B + 1..B + 17), block(PFN, VW));
        assert_eq!(mem.count(Kind::Clear) + mem.count(Kind::Flush), 0);
    }

    #[test]
    fn fold_needs_the_block_inside_one_folio() {
        // Consecutive frames, but two folios of 8 pages: the last PTE's folio starts mid-block.
        let mut mem = TestMem::new();
        let halves = |pfn: u64| Some(Folio { pfn: pfn & !7, pages: 8 });
        map_one_by_one(&mut mem, B, &block(PFN, VW), halves);
        assert_eq!(mem.ptes(B..B + 16), block(PFN, VW));
        // The same PTEs fold when one folio covers the block.
        set_ptes(&mut mem, MM, va(B + 15), PteVal::new(PFN + 15, VW), 1, Some(FOLIO));
        assert_eq!(mem.ptes(B..B + 16), block(PFN, VW | C));
    }

    #[test]
    fn fold_needs_matching_permissions() {
        let mut mem = TestMem::new();
        let mut ptes = block(PFN, VW);
        ptes[6] = ptes[6].wrprotect();
        map_one_by_one(&mut mem, B, &ptes, |_| Some(FOLIO));
        assert_eq!(mem.ptes(B..B + 16), ptes);
        assert_eq!(mem.count(Kind::Flush), 0);
    }

    #[test]
    fn fold_needs_consecutive_frames() {
        let mut mem = TestMem::new();
        let mut ptes = block(PFN, VW);
        ptes.swap(7, 8);
        map_one_by_one(&mut mem, B, &ptes, |_| Some(FOLIO));
        assert_eq!(mem.ptes(B..B + 16), ptes);
        assert_eq!(mem.count(Kind::Flush), 0);
    }

    #[test]
    fn fold_needs_every_pte_valid() {
        let mut mem = TestMem::new();
        let ptes = block(PFN, VW);
        map_one_by_one(&mut mem, B, &ptes[..5], |_| Some(FOLIO));
        map_one_by_one(&mut mem, B + 6, &ptes[6..], |_| Some(FOLIO));
        assert_eq!(mem.pte(MM, B + 5), PteVal::NONE);
        assert!(mem.ptes(B..B + 16).iter().all(|p| !p.cont()));
        assert_eq!(mem.count(Kind::Flush), 0);
    }

    #[test]
    fn kernel_and_special_mappings_never_fold() {
        let mut mem = TestMem::new();
        for (i, pte) in block(PFN, VW).into_iter().enumerate() {
            set_ptes(&mut mem, MmId::KERNEL, va(B + i as u64), pte, 1, Some(FOLIO));
        }
        set_ptes(&mut mem, MmId::KERNEL, va(B + 16), PteVal::new(PFN + 16, VW), 16, None);
        assert!((B..B + 32).all(|p| !mem.pte(MmId::KERNEL, p).cont()), "mm_is_user keeps init_mm out");
        map_one_by_one(&mut mem, B, &block(PFN, VW), |_| None);
        assert_eq!(mem.ptes(B..B + 16), block(PFN, VW), "no folio: pte_special");
        assert_eq!(mem.count(Kind::Flush), 0);
    }

    #[test]
    fn fold_gathers_access_and_dirty_from_every_pte() {
        let mut mem = TestMem::new();
        let mut ptes = block(PFN, VW);
        ptes[3] = ptes[3].mkdirty();
        ptes[9] = ptes[9].mkyoung();
        map_one_by_one(&mut mem, B, &ptes, |_| Some(FOLIO));
        assert_eq!(mem.ptes(B..B + 16), block(PFN, VW | Y | D | C));
    }

    #[test]
    fn multi_page_set_ptes_writes_covered_aligned_blocks_contiguous() {
        let mut mem = TestMem::new();
        let folio = Folio { pfn: PFN, pages: 64 };
        set_ptes(&mut mem, MM, va(B), PteVal::new(PFN, VW), 40, Some(folio));
        let want: Vec<PteVal> = (0..40).map(|i| PteVal::new(PFN + i, if i < 32 { VW | C } else { VW })).collect();
        assert_eq!(mem.ptes(B..B + 40), want);
        assert_eq!(mem.writes().len(), 40, "no unfold, no fold: the PTEs were not present");
        // Misaligned virtually or physically: nothing contiguous.
        let mut mem = TestMem::new();
        set_ptes(&mut mem, MM, va(B + 1), PteVal::new(PFN + 1, VW), 16, Some(folio));
        set_ptes(&mut mem, MM, va(B + 32), PteVal::new(PFN + 33, VW), 16, Some(folio));
        assert!(mem.ptes(B..B + 48).iter().all(|p| !p.cont()));
    }

    #[test]
    fn setting_a_pte_in_a_block_unfolds_it_first() {
        let mut mem = TestMem::new();
        mem.put_block(B, PFN, VW | Y);
        let ro = PteVal::new(PFN + 4, V | Y);
        set_ptes(&mut mem, MM, va(B + 4), ro, 1, Some(FOLIO));
        let mut want = convert_writes(&block(PFN, VW | Y));
        want.push(Call::Set(B + 4, ro));
        assert_eq!(mem.writes(), want);
        let mut after = block(PFN, VW | Y);
        after[4] = ro;
        assert_eq!(mem.ptes(B..B + 16), after);
    }

    #[test]
    fn rewriting_the_last_pte_unfolds_and_refolds() {
        let mut mem = TestMem::new();
        mem.put_block(B, PFN, VW);
        set_ptes(&mut mem, MM, va(B + 15), PteVal::new(PFN + 15, VW | C), 1, Some(FOLIO));
        assert_eq!(mem.count(Kind::Flush), 2);
        assert_eq!(mem.ptes(B..B + 16), block(PFN, VW | C));
    }

    #[test]
    fn unfold_gathers_access_and_dirty_into_every_pte() {
        let mut mem = TestMem::new();
        mem.put_block(B, PFN, VW);
        mem.put(MM, B + 2, PteVal::new(PFN + 2, VW | D | C));
        mem.put(MM, B + 9, PteVal::new(PFN + 9, VW | Y | C));
        let pte = mem.pte(MM, B + 5);
        try_unfold(&mut mem, MM, va(B + 5), pte);
        assert_eq!(mem.writes(), convert_writes(&block(PFN, VW | Y | D)));
        assert_eq!(mem.ptes(B..B + 16), block(PFN, VW | Y | D));
    }

    #[test]
    fn unfold_keeps_a_dirty_bit_hardware_sets_while_it_clears() {
        let mut mem = TestMem::new();
        mem.put_block(B, PFN, VW);
        mem.after(Kind::Clear, 3, Act::Hw { page: B + 12, bits: D });
        try_unfold(&mut mem, MM, va(B), PteVal::new(PFN, VW | C));
        assert_eq!(mem.hw_dropped, 0);
        assert_eq!(mem.ptes(B..B + 16), block(PFN, VW | D));
    }

    #[test]
    fn unfold_of_a_non_contiguous_pte_does_nothing() {
        let mut mem = TestMem::new();
        mem.put(MM, B, PteVal::new(PFN, VW));
        try_unfold(&mut mem, MM, va(B), PteVal::new(PFN, VW));
        assert!(mem.log.is_empty());
    }

    #[test]
    fn ptep_get_gathers_access_and_dirty_across_the_block() {
        let mut mem = TestMem::new();
        mem.put_block(B, PFN, VW);
        mem.put(MM, B + 11, PteVal::new(PFN + 11, VW | D | C));
        mem.put(MM, B + 4, PteVal::new(PFN + 4, VW | Y | C));
        assert_eq!(ptep_get(&mut mem, MM, va(B + 2)), PteVal::new(PFN + 2, VW | Y | D | C));
        assert_eq!(mem.count(Kind::Get), 17);
        assert_eq!(mem.pte(MM, B + 2), PteVal::new(PFN + 2, VW | C), "reading changes nothing");
        // Without the contiguous bit a PTE speaks only for itself.
        let mut mem = TestMem::new();
        mem.put(MM, B, PteVal::new(PFN, VW));
        mem.put(MM, B + 1, PteVal::new(PFN + 1, VW | D));
        assert_eq!(ptep_get(&mut mem, MM, va(B)), PteVal::new(PFN, VW));
        assert_eq!(mem.count(Kind::Get), 1);
    }

    #[test]
    fn lockless_read_gathers_like_ptep_get_and_ignores_hardware_updates() {
        let mut mem = TestMem::new();
        mem.put_block(B, PFN, VW);
        mem.put(MM, B + 11, PteVal::new(PFN + 11, VW | D | C));
        // Hardware marks PTE 0 young after it has been read (gets: 1 wrapper, 2 re-read, 3 = PTE 0).
        mem.after(Kind::Get, 3, Act::Hw { page: B, bits: Y });
        assert_eq!(ptep_get_lockless(&mut mem, MM, va(B + 2)), PteVal::new(PFN + 2, VW | D | C));
        assert_eq!(mem.count(Kind::Get), 18, "no retry: access/dirty changes are not inconsistencies");
    }

    #[test]
    fn lockless_read_retries_while_another_cpu_changes_the_block() {
        let mut mem = TestMem::new();
        mem.put_block(B, PFN, VW | Y);
        // After PTEs 0..=5 are read (gets 3..=8), another CPU write-protects the whole
        // block in place (as wrprotect_ptes does) and hardware dirties PTE 0.
        for i in 0..CONT_PTES {
            let pte = PteVal::new(PFN + i, V | Y | C | if i == 0 { D } else { 0 });
            mem.after(Kind::Get, 8, Act::Store { page: B + i, pte });
        }
        assert_eq!(ptep_get_lockless(&mut mem, MM, va(B + 2)), PteVal::new(PFN + 2, V | Y | D | C));
        assert_eq!(mem.count(Kind::Get), 1 + (1 + 7) + (1 + 16), "PTE 6 had the new protection: start over once");
    }

    #[test]
    fn lockless_read_of_a_block_being_unfolded_returns_the_new_pte() {
        let mut mem = TestMem::new();
        mem.put_block(B, PFN, VW);
        // Another CPU's unfold has cleared the block when we read PTE 3 (get 6), and
        // rewritten it without the contiguous bit before we re-read.
        for i in 0..CONT_PTES {
            mem.after(Kind::Get, 6, Act::Store { page: B + i, pte: PteVal::NONE });
            mem.after(Kind::Get, 7, Act::Store { page: B + i, pte: PteVal::new(PFN + i, VW | D) });
        }
        assert_eq!(ptep_get_lockless(&mut mem, MM, va(B + 2)), PteVal::new(PFN + 2, VW | D));
        assert_eq!(mem.count(Kind::Get), 1 + (1 + 5) + 1);
    }

    #[test]
    fn wrprotecting_whole_blocks_keeps_them_folded() {
        let mut mem = TestMem::new();
        mem.put_block(B, PFN, VW);
        mem.put(MM, B + 3, PteVal::new(PFN + 3, VW | D | C));
        wrprotect_ptes(&mut mem, MM, va(B), 16);
        let mut want = block(PFN, V | C);
        want[3] = want[3].mkdirty();
        assert_eq!(mem.ptes(B..B + 16), want, "dirty state kept, contiguous bit kept");
        assert_eq!(mem.writes(), (0..16).map(|i| Call::Cmpxchg(B + i, true)).collect::<Vec<_>>());
    }

    #[test]
    fn wrprotecting_part_of_a_block_unfolds_it() {
        let mut mem = TestMem::new();
        mem.put_block(B, PFN, VW);
        wrprotect_ptes(&mut mem, MM, va(B + 2), 4);
        let want: Vec<PteVal> =
            (0..16).map(|i| PteVal::new(PFN + i, if (2..6).contains(&i) { V } else { VW })).collect();
        assert_eq!(mem.ptes(B..B + 16), want);
        assert_eq!(mem.count(Kind::Flush), 1, "the end lies in the same, already unfolded, block");
    }

    #[test]
    fn wrprotecting_one_contiguous_pte_unfolds_and_retries_the_exchange() {
        let mut mem = TestMem::new();
        mem.put_block(B, PFN, VW);
        mem.put(MM, B, PteVal::new(PFN, VW | Y | C));
        wrprotect_ptes(&mut mem, MM, va(B + 5), 1);
        let mut want = block(PFN, VW | Y);
        want[5] = want[5].wrprotect();
        assert_eq!(mem.ptes(B..B + 16), want);
        // The unfold copied the access flag into PTE 5, so the value read before it is stale.
        let xchgs: Vec<Call> = mem.log.iter().copied().filter(|c| c.kind() == Kind::Cmpxchg).collect();
        assert_eq!(xchgs, vec![Call::Cmpxchg(B + 5, false), Call::Cmpxchg(B + 5, true)]);
    }

    #[test]
    fn wrprotect_keeps_a_dirty_bit_hardware_sets_meanwhile() {
        let mut mem = TestMem::new();
        mem.put(MM, B, PteVal::new(PFN, VW));
        mem.after(Kind::Get, 1, Act::Hw { page: B, bits: D });
        wrprotect_ptes(&mut mem, MM, va(B), 1);
        assert_eq!(mem.pte(MM, B), PteVal::new(PFN, V | D));
    }

    #[test]
    fn access_flags_already_set_are_a_no_op() {
        let mut mem = TestMem::new();
        mem.put_block(B, PFN, VW);
        mem.put(MM, B, PteVal::new(PFN, VW | Y | C));
        assert!(!ptep_set_access_flags(&mut mem, MM, va(B + 3), PteVal::new(PFN + 3, VW | Y), true));
        assert!(mem.writes().is_empty());
        assert_eq!(mem.count(Kind::Get), 1 + 17);
    }

    #[test]
    fn access_flags_with_the_same_write_permission_apply_to_all_16_in_place() {
        let mut mem = TestMem::new();
        mem.put_block(B, PFN, VW);
        assert!(ptep_set_access_flags(&mut mem, MM, va(B + 3), PteVal::new(PFN + 3, VW | Y | D), true));
        assert_eq!(mem.ptes(B..B + 16), block(PFN, VW | Y | D | C));
        let mut want: Vec<Call> = (0..16).map(|i| Call::Cmpxchg(B + i, true)).collect();
        want.push(Call::Flush(B, 16));
        assert_eq!(mem.writes(), want, "one range flush at the end, none per page");
        // Without `dirty`, no flush.
        let mut mem = TestMem::new();
        mem.put_block(B, PFN, VW);
        assert!(ptep_set_access_flags(&mut mem, MM, va(B + 3), PteVal::new(PFN + 3, VW | Y), false));
        assert_eq!(mem.ptes(B..B + 16), block(PFN, VW | Y | C));
        assert_eq!(mem.count(Kind::Flush), 0);
    }

    #[test]
    fn access_flags_that_add_write_permission_unfold_the_block() {
        let mut mem = TestMem::new();
        mem.put_block(B, PFN, V | Y);
        assert!(ptep_set_access_flags(&mut mem, MM, va(B + 3), PteVal::new(PFN + 3, VW | Y | D), true));
        let mut want = block(PFN, V | Y);
        want[3] = PteVal::new(PFN + 3, VW | Y | D);
        assert_eq!(mem.ptes(B..B + 16), want);
        let flushes: Vec<Call> = mem.log.iter().copied().filter(|c| c.kind() == Kind::Flush).collect();
        assert_eq!(flushes, vec![Call::Flush(B, 16), Call::Flush(B + 3, 1)], "the unfold, then flush_tlb_page");
    }

    #[test]
    fn access_flags_of_a_single_pte_survive_a_racing_hardware_update() {
        let mut mem = TestMem::new();
        mem.put(MM, B, PteVal::new(PFN, VW));
        // Hardware dirties the PTE between the read and the exchange.
        mem.after(Kind::Get, 2, Act::Hw { page: B, bits: D });
        assert!(ptep_set_access_flags(&mut mem, MM, va(B), PteVal::new(PFN, VW | Y), false));
        assert_eq!(mem.pte(MM, B), PteVal::new(PFN, VW | Y | D));
        assert_eq!(mem.count(Kind::Cmpxchg), 2);
    }

    #[test]
    fn test_and_clear_young_ages_the_whole_block() {
        let mut mem = TestMem::new();
        mem.put_block(B, PFN, VW);
        mem.put(MM, B + 7, PteVal::new(PFN + 7, VW | Y | C));
        assert!(ptep_test_and_clear_young(&mut mem, MM, va(B + 2)), "the access flag is in PTE 7");
        assert_eq!(mem.ptes(B..B + 16), block(PFN, VW | C));
        assert_eq!(mem.count(Kind::Cmpxchg), 16);
        assert_eq!(mem.count(Kind::Flush), 0);
        assert!(!ptep_test_and_clear_young(&mut mem, MM, va(B + 2)));
        // Non-contiguous: only the PTE itself.
        let mut mem = TestMem::new();
        mem.put(MM, B, PteVal::new(PFN, VW | Y));
        mem.put(MM, B + 1, PteVal::new(PFN + 1, VW | Y));
        assert!(ptep_test_and_clear_young(&mut mem, MM, va(B)));
        assert_eq!(mem.ptes(B..B + 2), vec![PteVal::new(PFN, VW), PteVal::new(PFN + 1, VW | Y)]);
    }

    #[test]
    fn clear_flush_young_flushes_the_block_once_and_only_if_young() {
        let mut mem = TestMem::new();
        mem.put_block(B, PFN, VW);
        assert!(!ptep_clear_flush_young(&mut mem, MM, va(B + 2)));
        assert_eq!(mem.count(Kind::Flush), 0);
        mem.put(MM, B + 9, PteVal::new(PFN + 9, VW | Y | C));
        assert!(ptep_clear_flush_young(&mut mem, MM, va(B + 2)));
        assert_eq!(mem.writes().last(), Some(&Call::Flush(B, 16)));
        assert_eq!(mem.count(Kind::Flush), 1);
    }

    #[test]
    fn get_and_clear_full_ptes_clears_whole_blocks_without_tlbi() {
        let mut mem = TestMem::new();
        mem.put_block(B, PFN, VW);
        mem.put_block(B + 16, PFN + 16, VW);
        mem.put(MM, B + 20, PteVal::new(PFN + 20, VW | D | C));
        mem.put(MM, B + 31, PteVal::new(PFN + 31, VW | Y | C));
        assert_eq!(get_and_clear_full_ptes(&mut mem, MM, va(B), 32), PteVal::new(PFN, VW | Y | D | C));
        assert_eq!(mem.writes(), (0..32).map(|i| Call::Clear(B + i)).collect::<Vec<_>>());
        assert!(mem.ptes(B..B + 32).iter().all(|p| p.none()));
    }

    #[test]
    fn get_and_clear_full_ptes_unfolds_blocks_covered_in_part() {
        let mut mem = TestMem::new();
        mem.put_block(B, PFN, VW);
        mem.put_block(B + 16, PFN + 16, VW);
        mem.put(MM, B + 30, PteVal::new(PFN + 30, VW | D | C));
        // Pages 4..24: the end of block 0 and the start of block 1.
        let pte = get_and_clear_full_ptes(&mut mem, MM, va(B + 4), 20);
        assert_eq!(pte, PteVal::new(PFN + 4, VW | D), "PTE 30's dirty bit was spread over block 1 by its unfold");
        let flushes: Vec<Call> = mem.log.iter().copied().filter(|c| c.kind() == Kind::Flush).collect();
        assert_eq!(flushes, vec![Call::Flush(B, 16), Call::Flush(B + 16, 16)]);
        assert_eq!(mem.ptes(B..B + 4), block(PFN, VW)[..4].to_vec());
        assert_eq!(mem.ptes(B + 24..B + 32), block(PFN + 16, VW | D)[8..].to_vec());
    }

    #[test]
    fn get_and_clear_full_ptes_keeps_a_dirty_bit_hardware_sets_midway() {
        let mut mem = TestMem::new();
        mem.put_block(B, PFN, VW);
        mem.after(Kind::Clear, 3, Act::Hw { page: B + 12, bits: D });
        assert_eq!(get_and_clear_full_ptes(&mut mem, MM, va(B), 16), PteVal::new(PFN, VW | D | C));
        assert_eq!(mem.hw_dropped, 0);
    }

    #[test]
    fn clearing_one_contiguous_pte_unfolds_its_block() {
        let mut mem = TestMem::new();
        mem.put_block(B, PFN, VW);
        mem.put(MM, B + 9, PteVal::new(PFN + 9, VW | D | C));
        assert_eq!(ptep_get_and_clear(&mut mem, MM, va(B + 2)), PteVal::new(PFN + 2, VW | D));
        assert_eq!(mem.count(Kind::Flush), 1);
        clear_full_ptes(&mut mem, MM, va(B + 3), 1);
        assert_eq!(mem.count(Kind::Flush), 1, "the block is already unfolded");
        let mut want = block(PFN, VW | D);
        want[2] = PteVal::NONE;
        want[3] = PteVal::NONE;
        assert_eq!(mem.ptes(B..B + 16), want);
    }
}
