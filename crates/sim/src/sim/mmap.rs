//! The memory system calls: `mmap`, `munmap`, `mprotect` and
//! `madvise(MADV_DONTNEED)`, and the splits and zaps of mappings they make.

use super::*;
use crate::pagetable::{highest_bit, lowest_bit, zip};
use crate::toggle::PTE_NEEDS_FLUSH;

/// What a zap clears: `pages` pages from `va` in `mm`, the PTE changes named
/// `change` for the oracle. [`Sim::zap_range`] takes it, and hands it on to
/// the folio path ([`Sim::zap_folio`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct Zap {
    pub(super) mm: MmId,
    pub(super) va: u64,
    pub(super) pages: u64,
    pub(super) change: &'static str,
}

impl Sim {
    /// Places a mapping of `pages` pages (of `file` from its start, shared, if
    /// given) above the address space's previous ones; returns its address. With
    /// large folios the start is 64 KB-aligned, so that every whole block of it
    /// can be mapped by one folio.
    pub(super) fn mmap(&mut self, mm: MmId, pages: u64, write: bool, file: Option<u32>, cow: bool) -> u64 {
        let folios = self.cont.mode != ContMode::Off;
        self.kern.mm_mut(mm).map_above(pages, write, file, cow, folios.then_some(CONT_PTES * 4096))
    }

    /// `mmap(MAP_FIXED)` of `pages` anonymous pages at `va`: what the range
    /// mapped is zapped (flushed only where a PTE was present) and replaced.
    pub(super) fn mmap_fixed(&mut self, cpu: usize, mm: MmId, va: u64, pages: u64, write: bool, now: u64) -> u64 {
        let end = pages.checked_mul(4096).and_then(|b| va.checked_add(b)).filter(|&e| e <= USER_VA_END);
        let Some(end) = end.filter(|_| va.is_multiple_of(4096) && pages > 0) else {
            self.error.get_or_insert(format!(
                "mmap: {pages} page(s) at {va:#x} are not page-aligned user memory below {USER_VA_END:#x}"
            ));
            return now;
        };
        let mut now = now + self.m.costs.kernel.fault_path;
        if self.kern.mm(mm).vmas().iter().any(|v| v.start < end && va < v.end()) {
            self.split_vmas(mm, va, pages);
            self.kern.mm_mut(mm).retain_vmas_outside(va, end);
            now = self.zap_range(cpu, Zap { mm, va, pages, change: "mmap-fixed" }, now);
        }
        self.kern.mm_mut(mm).map_fixed(Vma {
            start: va,
            pages,
            write,
            file: None,
            cow: false,
            pgoff: 0,
            anon_vma: false,
        });
        now
    }

    /// Splits VMAs so that `[va, va + pages)` starts and ends on VMA boundaries.
    pub(super) fn split_vmas(&mut self, mm: MmId, va: u64, pages: u64) {
        self.kern.mm_mut(mm).split_vmas(va, va + pages * 4096);
    }

    /// `munmap`: removes the VMAs of the range, clears its present PTEs and
    /// flushes the span of pages it cleared, from the first to the last (Linux's
    /// `mmu_gather` grows its range only when `zap_pte_range` clears a PTE, and
    /// `tlb_finish_mmu` flushes nothing when it cleared none); the frames are
    /// freed after the flush. Page-table pages are never freed here, so the
    /// widening of the range and the non-leaf flush that `free_pgtables` adds in
    /// Linux when a whole table goes are not modelled.
    pub(super) fn munmap(&mut self, cpu: usize, mm: MmId, va: u64, pages: u64, now: u64) -> u64 {
        self.split_vmas(mm, va, pages);
        let end = va + pages * 4096;
        self.kern.mm_mut(mm).retain_vmas_outside(va, end);
        // The zap path: VMA lookup and page-table walk, as madvise's, with LATR's
        // flag set around it (the artifact's `munmap` system call only).
        self.kern.mm_mut(mm).begin_munmap();
        let zap = Zap { mm, va, pages, change: "munmap" };
        let now = self.zap_range(cpu, zap, now + self.m.costs.kernel.fault_path);
        self.kern.mm_mut(mm).end_munmap();
        now
    }

    pub(super) fn mprotect(&mut self, cpu: usize, mm: MmId, va: u64, pages: u64, write: bool, now: u64) -> u64 {
        self.split_vmas(mm, va, pages);
        let end = va + pages * 4096;
        self.kern.mm_mut(mm).protect_vmas(va, end, write);
        let c = self.m.costs;
        let mut now = now + c.kernel.fault_path;
        if self.folios() && !write {
            let (now, owed, present) = self.wrprotect_folio(cpu, mm, va, pages, now);
            if present == 0 {
                return now;
            }
            let seq = self.oracle.next_seq();
            let pf = self
                .open_flush(cpu, mm, FlushWhat::Range(va, pages), "mprotect", seq, Vec::new(), Vec::new(), now)
                .with_arch(owed);
            return self.flush(cpu, pf, now);
        }
        let root = self.kern.mm(mm).root();
        let seq = self.oracle.next_seq();
        let rule = self.mprotect_rule(write);
        // The shared (file) mappings of the range: an upgrade makes their PTEs
        // writable at once (a shared mapping of tmpfs memory, the only kind the
        // simulated kernel has, wants no write notification, so its
        // `vm_page_prot` is writable).
        let shared: Vec<(u64, u64)> = (self.kern.mm(mm).vmas().iter())
            .filter(|v| rule.grants && v.file.is_some() && !v.cow && v.end() > va && v.start < end)
            .map(|v| (v.start, v.end()))
            .collect();
        let mut changed = Vec::new();
        let mut patched = Vec::new();
        let mut runs = Vec::new();
        self.pt.for_each_run(root, va, pages, |a, r, n, block| runs.push((a, r, n, block)));
        // `change_pte_range` rewrites every present PTE (an atomic exchange and
        // a store). A downgrade takes the write bit away; an upgrade gives it
        // to a shared mapping's PTEs, and (`MM_CP_TRY_CHANGE_WRITABLE`) to a
        // dirty private anonymous page mapped here only, and leaves the rest
        // read-only for write faults to upgrade. What is flushed follows
        // [`MprotectRule`]. A table's PTEs outside shared mappings are picked
        // from its bitmaps and changed as one patch (the simulator's time, not
        // the simulated one: see `pagetable::patch`); a 2 MB block, and a run
        // that a shared mapping overlaps, PTE by PTE.
        let mut present = 0;
        let mut span: Option<(u64, u64)> = None;
        let mut widen = |a: u64, e: u64| span = Some(span.map_or((a, e), |(s0, e0)| (s0.min(a), e0.max(e))));
        let in_shared = |a: u64, e: u64| shared.iter().any(|&(s0, e0)| s0 < e && a < e0);
        let epoch = self.frames.share_epoch();
        for (first_va, first, n, block) in runs {
            if !block && !in_shared(first_va, first_va + n * 4096) {
                let table = first - first % 512;
                let table_va = first_va - u64::from(first % 512) * 4096;
                let m = self.pt.run_masks(first, n);
                let flip = if !write {
                    m.writable
                } else if rule.in_place {
                    // Valid, read-only, not contiguous, dirty, and one reference.
                    let pick = zip(
                        &zip(&m.valid, &m.writable, |v, w| v & !w),
                        &zip(&m.cont, &m.dirty, |c, d| !c & d),
                        |a, b| a & b,
                    );
                    let frames = &self.frames;
                    self.pt.one_reference(table, &pick, epoch, |pfn| frames.refs(pfn) == 1)
                } else {
                    [0; 8]
                };
                present += m.valid.iter().map(|w| u64::from(w.count_ones())).sum::<u64>();
                let spans = if rule.arch { flip } else { m.valid };
                if let (Some(lo), Some(hi)) = (lowest_bit(&spans), highest_bit(&spans)) {
                    widen(table_va + lo * 4096, table_va + (hi + 1) * 4096);
                }
                if flip.iter().any(|&w| w != 0) {
                    self.pt.patch_write(table, flip, write, seq);
                    patched.push((table, flip));
                }
                continue;
            }
            // A 2 MB block is one PTE for all its pages (`change_huge_pmd`).
            let size = if block { 2 << 20 } else { 4096 };
            for i in 0..n {
                let (a, r) = (if block { first_va & !(size - 1) } else { first_va + i * 4096 }, first + i as PteRef);
                let old = self.pt.pte(r);
                if !old.valid() {
                    continue;
                }
                present += 1;
                let gains = write
                    && !old.writable()
                    && old.flags & P_CONT == 0
                    && (in_shared(a, a + size)
                        || (rule.in_place && old.flags & P_DIRTY != 0 && self.frames.refs(old.pfn) == 1));
                let loses = !write && old.writable();
                if gains || loses {
                    let p = self.pt.pte_mut(r);
                    p.flags ^= P_WRITE;
                    p.ver = seq;
                    changed.push(r);
                }
                if !rule.arch || gains || loses {
                    widen(a, a + size);
                }
            }
        }
        now += present * c.mem_access * 4;
        let what = match (rule.gathers, span) {
            // v5.15's `flush_tlb_range` of the whole range once it met a present PTE.
            (false, _) if present > 0 => FlushWhat::Range(va, pages),
            (true, Some((s, e))) => FlushWhat::Range(s, (e - s) / 4096),
            _ => return now,
        };
        let pf = self.open_flush(cpu, mm, what, "mprotect", seq, changed, Vec::new(), now).with_patched(patched);
        self.flush(cpu, pf, now)
    }

    /// What `mprotect` changes and flushes under the run's kernel (`write`:
    /// whether it adds write access).
    fn mprotect_rule(&self, write: bool) -> MprotectRule {
        let kernel = self.cfg.preset.kernel;
        let grants = kernel.mprotect_grants_write() && !self.folios();
        MprotectRule {
            grants,
            gathers: kernel.mprotect_gathers(),
            arch: self.features().on(PTE_NEEDS_FLUSH),
            in_place: write && grants && kernel.mprotect_upgrades_in_place(),
        }
    }

    /// `madvise(MADV_DONTNEED)`: zaps the range's PTEs, keeps its VMAs, and
    /// flushes the span of pages actually zapped (Linux's `mmu_gather` grows its
    /// range only when it clears a PTE, and flushes nothing when it cleared none).
    pub(super) fn madvise_dontneed(&mut self, cpu: usize, mm: MmId, va: u64, pages: u64, now: u64) -> u64 {
        if !self.all_mapped(mm, va, pages) {
            self.error.get_or_insert(format!(
                "madvise: {pages} page(s) at {va:#x} are not all mapped (or not page-aligned) in {mm}"
            ));
            return now;
        }
        // The zap path: VMA lookup and page-table walk, as munmap's, with LATR's
        // flag set around it (`madvise_dontneed`).
        let now = now + self.m.costs.kernel.fault_path;
        self.kern.mm_mut(mm).begin_munmap();
        let now = self.zap_range(cpu, Zap { mm, va, pages, change: "madvise" }, now);
        self.kern.mm_mut(mm).end_munmap();
        now
    }

    /// Returns the pieces of `pages` pages at `va` (page-aligned) that VMAs
    /// of `mm` map, each its start and pages, lowest first: what
    /// `madvise_walk_vmas` visits of a range with holes.
    pub(super) fn mapped_pieces(&self, mm: MmId, va: u64, pages: u64) -> Vec<(u64, u64)> {
        let end = va + pages * 4096;
        let mut pieces: Vec<(u64, u64)> = (self.kern.mm(mm).vmas().iter())
            .filter(|v| v.start < end && va < v.end())
            .map(|v| (v.start.max(va), (v.end().min(end) - v.start.max(va)) / 4096))
            .collect();
        pieces.sort_unstable();
        pieces
    }

    /// Returns whether `pages` pages at `va` are page-aligned and all mapped in `mm`.
    pub(super) fn all_mapped(&self, mm: MmId, va: u64, pages: u64) -> bool {
        let end = va + pages * 4096;
        let covered: u64 =
            self.kern.mm(mm).vmas().iter().map(|v| v.end().min(end).saturating_sub(v.start.max(va)) / 4096).sum();
        va.is_multiple_of(4096) && covered == pages
    }

    /// [`Sys::FlushRange`]: the policy's range flush of `pages` pages at `va`,
    /// called directly (a kernel module's call), no PTE changed; returns when
    /// the call returns. The pages must be mapped.
    pub(super) fn flush_call(&mut self, cpu: usize, mm: MmId, va: u64, pages: u64, now: u64) -> u64 {
        if pages == 0 || !self.all_mapped(mm, va, pages) {
            self.error.get_or_insert(format!(
                "a flush call: {pages} page(s) at {va:#x} are not all mapped (or not page-aligned) in {mm}"
            ));
            return now;
        }
        let seq = self.oracle.next_seq();
        let pf = self.open_flush(cpu, mm, FlushWhat::Range(va, pages), "flush_call", seq, Vec::new(), Vec::new(), now);
        self.flush(cpu, pf, now)
    }

    /// Clears the present PTEs of the pages `zap` names, flushes the span of
    /// pages actually cleared (nothing when none was) and frees their frames
    /// after the flush: `madvise(MADV_DONTNEED)`'s zap, which `munmap` and a
    /// `MAP_FIXED` mapping also make of what they remove. It begins, as the
    /// kernel's did until v6.14, by draining the CPU's LRU-add batch
    /// ([`Sim::lru_drain_at_zap`]).
    pub(super) fn zap_range(&mut self, cpu: usize, zap: Zap, now: u64) -> u64 {
        let Zap { mm, va, pages, change } = zap;
        let now = self.lru_drain_at_zap(cpu, now);
        if self.folios() {
            let (now, owed, frames, span) = self.zap_folio(cpu, zap, now);
            let Some((lo, hi)) = span else {
                return self.flush_unflushed(cpu, mm, change, owed, now);
            };
            let seq = self.oracle.next_seq();
            let what = FlushWhat::Range(lo, (hi - lo) / 4096 + 1);
            let pf = self.open_flush(cpu, mm, what, change, seq, Vec::new(), frames, now).with_arch(owed);
            return self.flush(cpu, pf, now);
        }
        let root = self.kern.mm(mm).root();
        let seq = self.oracle.next_seq();
        let mut slots = Vec::new();
        self.pt.for_each_slot(root, va, pages, |a, r| slots.push((a, r)));
        let (mut changed, mut frames) = (Vec::new(), Vec::new());
        let (mut lo, mut hi) = (u64::MAX, 0);
        for (a, r) in slots {
            let p = self.pt.pte_mut(r);
            if p.valid() {
                frames.push(p.pfn);
                // `pte_clear`: the slot is none again (a later read's
                // fault-around maps it, `pte_range_none` counts it).
                p.pfn = 0;
                p.flags = 0;
                p.ver = seq;
                changed.push(r);
                lo = lo.min(a);
                hi = hi.max(a);
            }
        }
        if changed.is_empty() {
            return now;
        }
        let n = (hi - lo) / 4096 + 1;
        let pf = self.open_flush(cpu, mm, FlushWhat::Range(lo, n), change, seq, changed, frames, now);
        self.flush(cpu, pf, now)
    }
}

/// How the run's kernel's `mprotect` changes PTEs and what it flushes
/// ([`crate::preset::Kernel::mprotect_gathers`] and the two after it).
#[derive(Clone, Copy, Debug)]
struct MprotectRule {
    /// Whether an upgrade may make PTEs writable
    /// ([`crate::preset::Kernel::mprotect_grants_write`]), with base pages:
    /// not with large folios (`contpte`), where
    /// a commit that completes a block would fold it again and the model
    /// does not: both leave every upgraded PTE as it was.
    grants: bool,
    /// Flush the span of the PTEs picked, nothing if none; else the whole
    /// range once any PTE was present.
    gathers: bool,
    /// Pick a PTE only when its write bit changed (`pte_needs_flush`, the
    /// only bit `mprotect` changes here); else every present PTE.
    arch: bool,
    /// An upgrade makes a dirty, exclusive private anonymous PTE writable.
    in_place: bool,
}
