//! The simulated kernel with large folios (`--set contpte=folios`) and with
//! contiguous PTEs (`--set contpte=on`, arm64 Linux v6.9 with
//! `CONFIG_ARM64_CONTPTE`), and the hardware and oracle side of contiguous blocks.
//!
//! # The kernel
//! With either mode every PTE change of a user address space goes through the
//! policy crate's arm64 PTE API ([`tlbkit_policy::contpte`]) on [`KernelPtes`],
//! so fold and unfold happen where Linux makes them; with `folios` no PTE ever
//! gets the contiguous bit, so the same calls are the generic ones (plus the few
//! reads the contpte wrappers make).
//! - **Anonymous fault** (`do_anonymous_page` with a large folio): a fault in a
//!   64 KB-aligned block that lies wholly inside the VMA and whose 16 PTEs are all
//!   none allocates a folio, zeroes it and maps all 16 pages with one
//!   `set_ptes(nr = 16)`, young (arm64's `PROT_DEFAULT` has the access flag), and
//!   writable and dirty if the VMA is writable (`pte_mkwrite(pte_mkdirty())`).
//!   Elsewhere a single page is mapped the same way. (Linux maps the zero page on
//!   a read fault, before it would allocate a folio; with folios the simulator
//!   does not, only with base pages: [`Sim::maps_zero_page`].)
//! - **File fault** (`filemap_map_pages`, fault-around): a fault in a shared file
//!   mapping looks the file's 64 KB folio up in the page cache (reading it in if
//!   absent) and maps all of it when the block lies inside the VMA and the file
//!   offset is folio-aligned, else the one page: young, clean, writable if the
//!   VMA is. The write that faulted then goes through the TLB, and the hardware
//!   records it (FEAT_HAFDBS). The model gives shared file mappings no write
//!   notification (no `page_mkwrite`, no dirty accounting fault), so the dirty
//!   state lives only in the PTEs, which is what origin 004's teardowns must report.
//! - **Write fault on a read-only PTE**: copy-on-write of a shared anonymous page
//!   (`wp_page_copy`: `ptep_clear_flush`, which unfolds the block, then
//!   `set_ptes` of the copy), otherwise `ptep_set_access_flags` with write, dirty
//!   and young, which unfolds a contiguous block because the write permission
//!   changes.
//! - **`munmap`, `madvise(DONTNEED)`** (`zap_pte_range` without `fullmm`): with
//!   `teardown=clear_ptes` (v6.9) the per-folio batching of `zap_present_ptes`
//!   (`get_and_clear_full_ptes`: whole blocks cleared without unfolding, blocks
//!   the range covers in part unfolded); with the older strategies, and with
//!   `folios`, `ptep_get` then `ptep_get_and_clear` per present PTE, which unfolds
//!   a contiguous block first. The kernel's range flush follows, as before.
//! - **`madvise(MADV_PAGEOUT)`** (`try_to_unmap_one` from reclaim): v7.0 clears
//!   an anonymous folio's PTEs one at a time with `get_and_clear_ptes(nr = 1)`,
//!   which unfolds the block at the first; Dev Jain's series clears a whole
//!   block with one `get_and_clear_ptes(nr = 16)`. Each clear's flush is
//!   deferred and completed before the folio is freed: `sim/reclaim.rs`.
//! - **`mprotect` removing write**: `wrprotect_ptes` over each run of present
//!   PTEs (whole blocks write-protected in place, partly covered ones unfolded),
//!   then the range flush. Adding write changes no PTE, as without folios.
//! - **`fork`** (`copy_present_ptes`): per batch of PTEs mapping consecutive pages
//!   of one folio, `wrprotect_ptes` in the parent and `set_ptes` of the
//!   write-protected, old PTEs in the child, which folds whole aligned blocks.
//!   Shared file mappings are not copied (the child faults them in), as Linux
//!   skips VMAs without anonymous pages.
//! - **Exit and `execve`**: `teardown_range` with the `teardown` strategy over each
//!   last-level table of each VMA (`zap_pte_range` with `fullmm`; `folios` runs
//!   the generic per-PTE loop, the `noopt` code path without contiguous bits),
//!   then the one flush of the whole address space `MmFlushOwed` asks for, then
//!   the frames are freed.
//! - **The core mm's work per page and per folio**: every teardown above (exit,
//!   `execve`, `munmap`, `madvise`) also costs the preset's `zap_page` per PTE it
//!   cleared (rmap removal, RSS accounting, gathering the page) and `zap_folio`
//!   per folio it freed, the bulk of Linux's `exit_group`. Only here: runs
//!   without folios charge neither and stay as they were. (`MADV_PAGEOUT`, a
//!   later path with no earlier result to keep, charges both in every mode.)
//!
//! Every PTE value the kernel gets back from a clear feeds the oracle
//! ([`Sim::judge_clears`]): a file page reported dirty is written back
//! (`file_writebacks`) and marks its folio dirty; a written file page whose
//! folio no value marks dirty and no valid PTE still records is `no_lost_dirty`
//! (data lost); a value that is clean while its block was dirty when it was
//! exchanged is `no_ungathered_dirty` (the per-PTE contract of
//! `ptep_get_and_clear_full` broken, nothing lost by itself).
//!
//! # The hardware
//! A walk that reaches a valid PTE with the contiguous bit reads its block: if the
//! block's valid PTEs agree (same protection, consecutive frames of a 64 KB-aligned
//! run), the TLB gets one 64 KB entry, and, if the PTE it read lacks the access
//! flag, the hardware sets it in one valid PTE of the block chosen at random; if
//! they disagree, that is `no_tlb_conflict` and the walk fills a 4 KB entry from
//! the PTE it read. PTEs that disagree in write permission alone are the window
//! `contpte_wrprotect_ptes` opens when it write-protects a whole block in place
//! (fork, `mprotect`): "until the flush, the page may or may not be
//! wrprotected", so the walk gets a 64 KB entry with the permission of the PTE it
//! read; a writable one dates from before the block's earliest write-protection,
//! so it is stale once that change is flushed. The first write through a 64 KB entry sets the dirty state in
//! one valid PTE of the block chosen at random and the entry remembers it wrote
//! (an entry filled from a dirty PTE starts so); the ground truth remembers which
//! page was written. Non-contiguous PTEs keep their behaviour: the walker sets the
//! access flag of the PTE it read, every write the dirty state of its own PTE.
//!
//! # What is judged, and how
//! A 64 KB entry's version is the change sequence number at its fill: it is stale
//! for a page once a weakening of that page's PTE made after the fill has been
//! flushed, or once the clear of a PTE that was already invalid when the block
//! was read has been flushed. A TLB that holds a 64 KB and a 4 KB entry of one page
//! under one tag is a conflict (checked at every fill).

use super::kwork::NewFrame;
use super::mmap::Zap;
use super::ptemem::{KernelPtes, Unflushed};
use super::*;
use tlbkit_policy::contpte::{self as arch, Folio, PteMem, PteVal};

/// Bytes of a contiguous block.
const BLOCK: u64 = CONT_PTES * 4096;

/// Returns why the contiguous block whose first PTE is `base` is misprogrammed,
/// or `None` if it is not: a valid PTE with the contiguous bit whose valid
/// siblings do not all have the bit, the same flags apart from the access flag and
/// the dirty state (and the write permission if `ignore_write`), and consecutive
/// frames of a run aligned on 16. Blocks without a valid contiguous PTE are never
/// misprogrammed.
///
/// `ignore_write` is for states in the middle of an operation: `wrprotect_ptes`
/// write-protects a whole block in place, one PTE after another, and relies on the
/// flush after it ("until the flush, the page may or may not be wrprotected",
/// `contpte_wrprotect_ptes`).
pub(super) fn block_conflict(pt: &PageTables, base: PteRef, ignore_write: bool) -> Option<String> {
    let ptes: [Pte; CONT_PTES as usize] = std::array::from_fn(|i| pt.pte(base + i as PteRef));
    if !ptes.iter().any(|p| p.valid_cont()) {
        return None;
    }
    let mask = !(P_ACCESS | P_DIRTY | if ignore_write { P_WRITE } else { 0 });
    let mut first: Option<(u64, u16)> = None;
    for (i, p) in ptes.iter().enumerate().filter(|(_, p)| p.valid()) {
        let run = p.pfn.wrapping_sub(i as u64);
        if !p.valid_cont() {
            return Some(format!("PTE {i} of a contiguous block is valid without the contiguous bit"));
        }
        if run % CONT_PTES != 0 {
            return Some(format!("PTE {i} of a contiguous block maps frame {} (block not 64 KB-aligned)", p.pfn));
        }
        match first {
            None => first = Some((run, p.flags & mask)),
            Some((r, f)) if r != run || f != p.flags & mask => {
                return Some(format!(
                    "PTE {i} of a contiguous block (frame {}, flags {:#x}) disagrees with its siblings (run from \
                     frame {r}, flags {f:#x})",
                    p.pfn,
                    p.flags & mask
                ))
            }
            Some(_) => {}
        }
    }
    None
}

/// Returns the page of a held 64 KB entry that is stale, and the obligation that
/// makes it so: a weakening of its PTE flushed after the fill, or the flushed
/// clear of a PTE that was invalid at the fill.
fn cont_stale_page(pt: &PageTables, e: &TlbEntry) -> Option<(u64, u32)> {
    (0..CONT_PTES).find_map(|j| {
        let p = pt.pte(e.pte + j as PteRef);
        let cleared = !p.valid() && p.ver > 0 && p.floor >= p.ver;
        (e.ver < p.floor || cleared).then_some((e.va() + j * 4096, p.floor_obl))
    })
}

/// Returns whether a held 64 KB entry has a stale page (for the strict scan).
pub(super) fn cont_held_stale(pt: &PageTables, e: &TlbEntry) -> Option<(u64, u32)> {
    cont_stale_page(pt, e)
}

impl Sim {
    /// Returns whether user memory comes in large folios.
    pub(super) fn folios(&self) -> bool {
        self.cont.mode != ContMode::Off
    }

    /// Reports a `no_tlb_conflict` at `va` on `cpu`, running address space `uid`.
    pub(super) fn report_conflict(&mut self, cpu: usize, va: u64, uid: u32, detail: String, now: u64) {
        self.report_page(Property::NoTlbConflict, cpu, va, uid, detail, now);
    }

    /// Reports a `no_lost_dirty` for page `va` of `mm`.
    fn report_lost_dirty(&mut self, cpu: usize, mm: MmId, va: u64, detail: String, now: u64) {
        let uid = self.kern.mm(mm).uid();
        self.report_page(Property::NoLostDirty, cpu, va, uid, detail, now);
    }

    /// Reports a violation of `property` at page `va` of address space `uid` on
    /// `cpu`, without a change or flush to cite.
    fn report_page(&mut self, property: Property, cpu: usize, va: u64, uid: u32, detail: String, now: u64) {
        let v = Violation {
            property: property.name(),
            cpu: cpu as u32,
            time_ns: now as f64 / self.ghz(),
            va: format!("{va:#x}"),
            mm: self.mm_name_of_uid(uid),
            detail,
            change: None,
            flush: None,
        };
        self.oracle.report(v);
    }

    /// Returns a valid PTE of the block whose first PTE is `base`, chosen with the
    /// machine's generator; `None` if none is valid.
    fn random_valid(&mut self, base: PteRef) -> Option<PteRef> {
        let valid: Vec<PteRef> =
            (0..CONT_PTES as PteRef).map(|i| base + i).filter(|&r| self.pt.pte(r).valid()).collect();
        if valid.is_empty() {
            return None;
        }
        Some(valid[(self.rng.next_u64() % valid.len() as u64) as usize])
    }

    /// A write by `cpu` to `va` through the 64 KB entry `e`: the page is written
    /// (ground truth); if the entry has not written before, the hardware sets the
    /// dirty state in one valid PTE of the block, chosen at random, and the entry
    /// remembers it wrote.
    #[inline(never)]
    pub(super) fn cont_write(&mut self, cpu: usize, e: &TlbEntry, va: u64) {
        self.pt.pte_mut(e.pte_of(va)).written = true;
        if e.flags & F_DIRTY == 0 {
            if let Some(r) = self.random_valid(e.pte) {
                self.pt.pte_mut(r).flags |= P_DIRTY;
            }
            self.m.tlb(cpu).set_cont_dirty(va, e.asid);
        }
    }

    /// Fills `cpu`'s TLB with a 64 KB entry for `va` from the block of the valid
    /// contiguous PTE `r` it walked to, if the block is consistent; otherwise
    /// reports the conflict and returns `None` (the caller fills a 4 KB entry).
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn fill_cont(
        &mut self,
        cpu: usize,
        r: PteRef,
        uid: u32,
        va: u64,
        spec: bool,
        now: u64,
        at: u64,
    ) -> Option<TlbEntry> {
        let idx = (va >> SHIFT_4K) & (CONT_PTES - 1);
        let base = r - idx as PteRef;
        if let Some(why) = block_conflict(&self.pt, base, true) {
            self.report_conflict(cpu, va & !(BLOCK - 1), uid, format!("a walk read a misprogrammed block: {why}"), now);
            return None;
        }
        let pte = self.pt.pte(r);
        // The block's valid PTEs may disagree in write permission alone: the
        // window of `contpte_wrprotect_ptes` write-protecting a whole block in
        // place ("until the flush, the page may or may not be wrprotected"). The
        // entry takes the permission of the PTE walked; a writable one holds the
        // translation from before the earliest write-protection in the block, so
        // its version is set just before it, and once that change is flushed the
        // entry is stale for the page (a block left mixed after its flush is
        // reported on use).
        let mut ver = self.oracle.seq;
        if pte.writable() {
            for i in 0..CONT_PTES as PteRef {
                let p = self.pt.pte(base + i);
                if p.valid() && !p.writable() {
                    ver = ver.min(p.ver.saturating_sub(1));
                }
            }
        }
        if pte.flags & P_ACCESS == 0 {
            if let Some(k) = self.random_valid(base) {
                self.pt.pte_mut(k).flags |= P_ACCESS;
            }
        }
        let mut flags = F_CONT;
        if pte.flags & P_GLOBAL != 0 {
            flags |= F_GLOBAL;
        }
        if pte.writable() {
            flags |= F_WRITE;
        }
        if pte.flags & P_DIRTY != 0 {
            flags |= F_DIRTY;
        }
        let e = TlbEntry {
            tag: va >> SHIFT_64K,
            pfn: pte.pfn - idx,
            asid: self.m.cpus[cpu].asid,
            flags,
            valid: true,
            mm_uid: uid,
            ver,
            pte: base,
        };
        self.check_overlap(cpu, &e, now);
        self.m.fill(cpu, e, spec, at);
        self.stats.contpte.contpte_fills += 1;
        Some(e)
    }

    /// Reports a conflict if `cpu` holds an entry of the other size that overlaps
    /// `e`, which it is about to fill.
    #[inline(never)]
    pub(super) fn check_overlap(&mut self, cpu: usize, e: &TlbEntry, now: u64) {
        if let Some(o) = self.m.tlb(cpu).overlap(e) {
            let size = |x: &TlbEntry| if x.cont() { "64 KB" } else { "4 KB" };
            let detail = format!(
                "fills a {} entry (asid {}) while holding a {} entry at {:#x} for the same page",
                size(e),
                e.asid,
                size(&o),
                o.va()
            );
            self.report_conflict(cpu, e.va(), e.mm_uid, detail, now);
        }
    }

    /// Judges `cpu`'s use of the 64 KB entry `e` for `va` (after the alias check).
    #[inline(never)]
    pub(super) fn check_cont_use(&mut self, cpu: usize, e: TlbEntry, va: u64, cur_uid: u32, now: u64) {
        let p = self.pt.pte(e.pte_of(va));
        let j = (va >> SHIFT_4K) & (CONT_PTES - 1);
        if e.ver < p.floor || (!p.valid() && p.ver > 0 && p.floor >= p.ver) {
            self.report_stale(Property::NoStaleUse, cpu, va, &e, p.floor_obl, cur_uid, now);
        } else if p.valid() && p.pfn != e.pfn + j {
            let detail = format!(
                "used a 64 KB entry that maps page {j} of its block to frame {}, while its PTE maps frame {}",
                e.pfn + j,
                p.pfn
            );
            self.report_conflict(cpu, va, cur_uid, detail, now);
        }
    }

    /// Another CPU whose root is `mm` acts on the block of `va` between two
    /// `PteMem` calls: if it runs a thread of `mm` and holds a writable 64 KB entry
    /// for the block, a write through it or a speculative fill from a random page
    /// of the block, one or the other with even odds; otherwise (an idle CPU that
    /// kept `mm` loaded lazily only walks speculatively) the fill.
    pub(super) fn hw_act_on_block(&mut self, cpu: usize, mm: MmId, va: u64, now: u64) {
        let (root, uid) = (self.kern.mm(mm).root(), self.kern.mm(mm).uid());
        let asid = self.m.cpus[cpu].asid;
        let block = va & !(BLOCK - 1);
        let runs_mm = self.scheduler.cpu(cpu).cur().is_some_and(|t| self.scheduler.thread(t).mm() == mm);
        self.m.catch_up(cpu, now);
        let tlb = self.m.tlb(cpu);
        let writer = tlb.cont_entries(block, asid).find(|e| runs_mm && e.flags & F_WRITE != 0);
        match writer.filter(|_| self.rng.next_u64() & 1 == 0) {
            Some(e) => {
                let Some(r) = self.random_valid(e.pte) else {
                    return;
                };
                let page = block + (r - e.pte) as u64 * 4096;
                self.check_use(cpu, e, page, uid, now);
                self.cont_write(cpu, &e, page);
            }
            None => {
                let page = block + (self.rng.next_u64() % CONT_PTES) * 4096;
                let mut t = now;
                if self.walk_fill(cpu, root, uid, page, Some(now), &mut t).is_some() {
                    self.stats.mmu.spec_fills += 1;
                }
            }
        }
    }

    /// `no_lost_dirty` after an operation: every valid PTE of a file page written
    /// since it was mapped, in the block of `block_va` in `mm`, must still have
    /// the write recorded in a valid PTE of its folio there (the page's own, or a
    /// sibling's: clearing any of them marks the folio dirty).
    pub(super) fn check_dirty_kept(&mut self, cpu: usize, mm: MmId, block_va: u64, now: u64) {
        let root = self.kern.mm(mm).root();
        let Some(w) = self.pt.walk(root, block_va).filter(|w| !w.huge) else {
            return;
        };
        let base = w.pte;
        let ptes: [Pte; CONT_PTES as usize] = std::array::from_fn(|i| self.pt.pte(base + i as PteRef));
        for (j, p) in ptes.iter().enumerate() {
            if !p.valid() || !p.written || self.frames.kind(p.pfn) != FrameKind::FileFolio {
                continue;
            }
            let folio = self.folio(p.pfn);
            if !ptes.iter().any(|q| q.valid() && q.flags & P_DIRTY != 0 && folio.contains(q.pfn)) {
                let va = block_va + j as u64 * 4096;
                let detail = format!(
                    "file page (frame {}) was written, but no valid PTE of its folio records it any more",
                    p.pfn
                );
                self.report_lost_dirty(cpu, mm, va, detail, now);
                self.pt.pte_mut(base + j as PteRef).written = false;
            }
        }
    }

    /// Feeds the oracle the values the arch code returned when one operation
    /// cleared PTEs of `mm` (`cleared`, in order), `exchanged` being what
    /// [`KernelPtes`] recorded at each exchange. The core mm marks a file folio
    /// dirty when any value it gets back for one of the folio's pages is dirty
    /// (`zap_present_folio_ptes`), and the folio's dirty pages are written back:
    /// - a value that is clean although its block was dirty, as `ptep_get` would
    ///   have gathered it when the PTE was exchanged, breaks the contract of
    ///   `ptep_get_and_clear_full`: `no_ungathered_dirty` (nothing is lost if
    ///   another value marks the folio);
    /// - a file page written since it was mapped and reported clean is lost
    ///   (`no_lost_dirty`) only if no value of the operation marked its folio
    ///   dirty and no valid PTE of the folio left in its block still records the
    ///   dirty state; if one does, that PTE carries the write from then on.
    fn judge_clears(&mut self, cpu: usize, mm: MmId, cleared: &[(u64, PteVal)], exchanged: &[(u64, bool)], now: u64) {
        let root = self.kern.mm(mm).root();
        let mut marked: Vec<u64> = Vec::new();
        let mut unrecorded: Vec<(u64, u64)> = Vec::new();
        for &(va, pte) in cleared {
            let written = match self.pt.walk(root, va) {
                Some(w) if !w.huge => std::mem::take(&mut self.pt.pte_mut(w.pte).written),
                _ => false,
            };
            if self.frames.kind(pte.pfn) != FrameKind::FileFolio {
                continue;
            }
            if pte.dirty() {
                self.stats.contpte.file_writebacks += 1;
                marked.push(self.folio(pte.pfn).pfn);
                continue;
            }
            if written {
                unrecorded.push((va, pte.pfn));
            }
            // The last exchange of the page is the one whose value was returned.
            if exchanged.iter().rev().find(|e| e.0 == va).is_some_and(|e| e.1) {
                let detail = format!(
                    "clearing the PTE of file page (frame {}) returned it clean ({pte:?}) while its contiguous block \
                     was dirty: the value does not carry the block's gathered dirty state (the \
                     ptep_get_and_clear_full contract)",
                    pte.pfn
                );
                let uid = self.kern.mm(mm).uid();
                self.report_page(Property::NoUngatheredDirty, cpu, va, uid, detail, now);
            }
        }
        for (va, pfn) in unrecorded {
            let folio = self.folio(pfn);
            if marked.contains(&folio.pfn) {
                continue;
            }
            if let Some(r) = self.dirty_pte_of_folio(root, va, folio) {
                self.pt.pte_mut(r).written = true;
                continue;
            }
            let detail = format!(
                "file page (frame {pfn}) was written since it was mapped, but its PTE was cleared clean and no \
                 value or valid PTE of its folio (frame {}) records the write: the folio is never marked dirty",
                folio.pfn
            );
            self.report_lost_dirty(cpu, mm, va, detail, now);
        }
    }

    /// Returns a valid, dirty PTE in the 64 KB block of `va` under `root` that
    /// maps a page of `folio`, if there is one.
    fn dirty_pte_of_folio(&self, root: u32, va: u64, folio: Folio) -> Option<PteRef> {
        let base = va & !(BLOCK - 1);
        (0..CONT_PTES).find_map(|i| {
            let w = self.pt.walk(root, base + i * 4096).filter(|w| !w.huge)?;
            let p = self.pt.pte(w.pte);
            (p.valid() && p.flags & P_DIRTY != 0 && folio.contains(p.pfn)).then_some(w.pte)
        })
    }

    /// Returns the frame holding page `page` of file `file`, reading the file's
    /// 64 KB folio into the page cache if it is not there (zeroing it, as a read
    /// from a device is not modelled), and the time after that.
    fn page_cache(&mut self, cpu: usize, file: u32, page: u64, mut now: u64) -> (u64, u64) {
        if let Some(pfn) = self.mem.page_cache_frame(file, page) {
            return (pfn, now);
        }
        let chunk = page - page % CONT_PTES;
        let first = self.alloc_folio(cpu, FrameKind::FileFolio, now);
        if self.mem.charges_page_cache() {
            // The allocation's shared work and the zeroing within the
            // node's bandwidth, as an anonymous folio's (sim/file_reclaim.rs).
            now = self.kalloc_work(cpu, NewFrame::Folio, now);
            now = self.write_pages(cpu, CONT_PTES, None, now);
        } else {
            now += self.m.costs.kernel.page_copy * CONT_PTES;
        }
        self.mem.page_cache_add(file, chunk, first, CONT_PTES);
        self.memcg_add_file(file, chunk, first, CONT_PTES);
        (first + (page - chunk), now)
    }

    /// Allocates a folio of `kind`, reporting any of its frames reused while a
    /// not-yet-flushed mapping of it may remain.
    fn alloc_folio(&mut self, cpu: usize, kind: FrameKind, now: u64) -> u64 {
        let (first, obls) = self.frames.alloc_folio(kind);
        self.stats.contpte.folios += 1;
        let node = self.cpu_node(cpu);
        for (i, obl) in obls.into_iter().enumerate() {
            self.check_reuse(cpu, obl, || format!("frame {} (of a folio)", first + i as u64), now);
            self.frames.set_node(first + i as u64, node);
        }
        first
    }

    /// Returns the folio frame `pfn` belongs to, as the core mm's `page_folio`
    /// sees it (a single frame is a folio of one page).
    pub(super) fn folio(&self, pfn: u64) -> Folio {
        match self.frames.folio_of(pfn) {
            Some(first) => Folio { pfn: first, pages: CONT_PTES },
            None => Folio { pfn, pages: 1 },
        }
    }

    /// Returns, sorted by frame, the folio of every frame the `pages` PTEs from
    /// `va` in `root` map: the `vm_normal_page` lookups of a zap, made before it.
    fn folio_map(&self, root: u32, va: u64, pages: u64) -> Vec<(u64, Folio)> {
        let mut map = Vec::new();
        self.pt.for_each_slot(root, va, pages, |_, r| {
            let p = self.pt.pte(r);
            if p.valid() {
                map.push((p.pfn, self.folio(p.pfn)));
            }
        });
        map.sort_unstable_by_key(|e| e.0);
        map.dedup_by_key(|e| e.0);
        map
    }

    /// Returns the exit teardown strategy the kernel runs: the configured one with
    /// contiguous PTEs, the generic per-PTE loop (`noopt` without contiguous bits)
    /// with folios alone.
    fn teardown_strategy(&self) -> Teardown {
        if self.cont.mode == ContMode::On {
            self.cont.teardown
        } else {
            Teardown::NoOpt
        }
    }

    /// Writes `nr` PTEs from `va` for consecutive frames from `pte`'s, all of
    /// `folio`: `set_ptes` of the contpte API (folding whole aligned blocks) with
    /// contiguous PTEs, the generic `set_ptes` (never contiguous) otherwise.
    fn map_ptes(mem: &mut KernelPtes<'_>, mm: MmId, va: u64, pte: PteVal, nr: u64, folio: Folio) {
        if mem.sim.cont.mode == ContMode::On {
            arch::set_ptes(mem, mm, VirtAddr(va), pte, nr, Some(folio));
        } else {
            for i in 0..nr {
                mem.set(mm, VirtAddr(va).add_pages(i), pte.advance_pfn(i));
            }
        }
    }

    /// The page-fault handler with folios (module documentation): `vma` holds
    /// `va`. Returns the time before the exception return.
    pub(super) fn fault_folio(&mut self, cpu: usize, mm: MmId, vma: Vma, va: u64, write: bool, mut now: u64) -> u64 {
        let c = self.m.costs;
        let page = va & !4095;
        let root = self.kern.mm(mm).root();
        let cur = match self.pt.walk(root, page) {
            Some(w) if !w.huge => self.pt.pte(w.pte),
            _ => Pte::default(),
        };
        if !cur.valid() {
            return self.fault_map(cpu, mm, vma, page, write, now);
        }
        if write && !cur.writable() {
            let mut mem = KernelPtes::new(self, cpu, now, "write-fault");
            let orig = arch::ptep_get(&mut mem, mm, VirtAddr(page));
            // A private file mapping's page-cache page is shared with the cache.
            let mut copied = None;
            if (vma.file.is_none() || vma.cow) && mem.sim.frames.refs(orig.pfn) > 1 {
                // wp_page_copy: the copy first, then ptep_clear_flush and the new PTE.
                let pfn = mem.sim.alloc_frame(cpu, mem.now);
                mem.now = mem.sim.kalloc_work(cpu, NewFrame::Page(pfn), mem.now);
                let from = mem.sim.frames.node(orig.pfn);
                mem.now = mem.sim.write_pages(cpu, 1, Some(from), mem.now);
                let old = arch::ptep_get_and_clear(&mut mem, mm, VirtAddr(page));
                mem.flush_tlb_range(mm, VirtAddr(page), 1);
                let flags = P_VALID | P_USER | P_WRITE | P_DIRTY | P_ACCESS | (orig.flags & P_GLOBAL);
                arch::set_ptes(&mut mem, mm, VirtAddr(page), PteVal::new(pfn, flags), 1, Some(Folio { pfn, pages: 1 }));
                let sim = &mut *mem.sim;
                if let Some(w) = sim.pt.walk(root, page) {
                    sim.pt.pte_mut(w.pte).written = false;
                }
                if old.valid() {
                    sim.frames.put(old.pfn, 0);
                }
                copied = Some(pfn);
            } else {
                let entry = PteVal::new(orig.pfn, orig.flags | P_WRITE | P_DIRTY | P_ACCESS);
                arch::ptep_set_access_flags(&mut mem, mm, VirtAddr(page), entry, true);
            }
            let (t, owed) = mem.finish();
            if let (Some(pfn), true) = (copied, vma.cow) {
                // The copy of a file's page is the mapping's own anonymous page.
                self.memcg_add(mm, page, pfn, 1);
            }
            return self.flush_unflushed(cpu, mm, "write-fault", owed, t);
        }
        // A stale, weaker entry: the PTE already allows the access.
        self.m.tlb(cpu).invalidate(Inval::VaAll { va });
        now += c.local.tlbi_local_va;
        now
    }

    /// Maps the page `page` of `vma`, whose PTE is none, with a folio where one
    /// fits (module documentation), for a write fault if `write`. An anonymous
    /// PTE is dirty only for a write: `do_anonymous_page` maps a new page dirty
    /// (it serves write faults), `do_swap_page` a page swapped in by a read
    /// clean; the first write through a clean one sets the bit (the hardware's
    /// dirty-bit management, [`crate::pagetable::PageTables::set_written`]),
    /// as on the order-0 path.
    fn fault_map(&mut self, cpu: usize, mm: MmId, vma: Vma, page: u64, write: bool, mut now: u64) -> u64 {
        let block = page & !(BLOCK - 1);
        // A private file mapping's faults map base pages (its large folios are not modelled).
        let mut fits = self.folios() && !vma.cow && block >= vma.start && block + BLOCK <= vma.end();
        if let (true, Some(_)) = (fits, vma.file) {
            fits = vma.file_page(block).is_multiple_of(CONT_PTES);
        }
        let mut flags = P_VALID | P_USER | P_ACCESS;
        // A private file mapping's read maps the page cache's page read-only;
        // its write maps the copy (`do_cow_fault`), dirty as an anonymous page.
        let copy = vma.cow && write;
        if vma.write && (!vma.cow || write) {
            flags |= P_WRITE;
            if (vma.file.is_none() || copy) && write {
                flags |= P_DIRTY;
            }
        }
        if self.user_global {
            flags |= P_GLOBAL;
        }
        let mut mem = KernelPtes::new(self, cpu, now, "fault");
        if fits {
            // pte_range_none: every PTE of the block must be none.
            fits = (0..CONT_PTES).all(|i| mem.get(mm, VirtAddr(block).add_pages(i)).none());
        }
        let (va, nr) = if fits { (block, CONT_PTES) } else { (page, 1) };
        let pfn = match vma.file {
            Some(f) if copy => {
                // The file's page into the page cache first, then the copy.
                let (cached, t) = mem.sim.page_cache(cpu, f, vma.file_page(va), mem.now);
                let pfn = mem.sim.alloc_frame(cpu, t);
                mem.now = mem.sim.kalloc_work(cpu, NewFrame::Page(pfn), t);
                let from = mem.sim.frames.node(cached);
                mem.now = mem.sim.write_pages(cpu, 1, Some(from), mem.now);
                pfn
            }
            Some(f) => {
                let (pfn, t) = mem.sim.page_cache(cpu, f, vma.file_page(va), mem.now);
                mem.now = t;
                pfn
            }
            None if fits => {
                let pfn = mem.sim.alloc_folio(cpu, FrameKind::AnonFolio, mem.now);
                mem.now = mem.sim.kalloc_work(cpu, NewFrame::Folio, mem.now);
                mem.now = mem.sim.write_pages(cpu, CONT_PTES, None, mem.now);
                pfn
            }
            None => {
                let pfn = mem.sim.alloc_frame(cpu, mem.now);
                mem.now = mem.sim.kalloc_work(cpu, NewFrame::Page(pfn), mem.now);
                mem.now = mem.sim.write_pages(cpu, 1, None, mem.now);
                pfn
            }
        };
        if vma.file.is_some() && !copy {
            for i in 0..nr {
                mem.sim.frames.get(pfn + i);
            }
        }
        let folio = mem.sim.folio(pfn);
        Self::map_ptes(&mut mem, mm, va, PteVal::new(pfn, flags), nr, folio);
        let around = match vma.file {
            Some(f) if !write && !mem.sim.folios() => Self::fault_around(&mut mem, mm, vma, f, page, flags),
            _ => Vec::new(),
        };
        let root = mem.sim.kern.mm(mm).root();
        for a in (0..nr).map(|i| va + i * 4096).chain(around) {
            if let Some(w) = mem.sim.pt.walk(root, a) {
                mem.sim.pt.pte_mut(w.pte).written = false;
            }
        }
        let (t, owed) = mem.finish();
        now = t;
        if vma.file.is_none() {
            self.memcg_add(mm, va, pfn, nr);
            now = self.note_swapin(mm, va, nr, now);
        } else if copy {
            self.memcg_add(mm, va, pfn, nr);
        }
        self.flush_unflushed(cpu, mm, "fault", owed, now)
    }

    /// `do_fault_around` of a read fault on base page `page` of the file
    /// mapping `vma` ([`crate::preset::Kernel::faults_around`];
    /// `fault_around_bytes` 64 KB): `filemap_map_pages` maps, with `flags`,
    /// every other page of the 16-page window around `page` (aligned, inside
    /// the VMA and its last-level table) whose PTE is none and whose page is
    /// in the page cache already; it reads nothing in. Returns the pages it
    /// mapped. Base pages only: with folios the fault maps the file's whole
    /// 64 KB folio where it fits (above). (The prefaulted PTEs are young here;
    /// arm64 maps them old, which its hardware access flag makes young at the
    /// first access.)
    fn fault_around(mem: &mut KernelPtes<'_>, mm: MmId, vma: Vma, file: u32, page: u64, flags: u16) -> Vec<u64> {
        if !mem.sim.cfg.preset.kernel.faults_around() {
            return Vec::new();
        }
        const WINDOW: u64 = 16;
        let slot = (page / 4096) % 512;
        let first = slot - slot % WINDOW;
        let table = page - slot * 4096;
        let (lo, hi) = ((table + first * 4096).max(vma.start), (table + (first + WINDOW) * 4096).min(vma.end()));
        let mut mapped = Vec::new();
        for a in (lo..hi).step_by(4096).filter(|&a| a != page) {
            let index = vma.file_page(a);
            let Some(pfn) = mem.sim.page_cache_frame(file, index) else { continue };
            if !mem.get(mm, VirtAddr(a)).none() {
                continue;
            }
            mem.sim.frames.get(pfn);
            mem.set(mm, VirtAddr(a), PteVal::new(pfn, flags));
            mapped.push(a);
        }
        mapped
    }

    /// Flushes what an operation's arch calls left owed, if anything (a fold's
    /// rewrite owes nothing; an unfold's clears are flushed by the unfold).
    pub(super) fn flush_unflushed(
        &mut self,
        cpu: usize,
        mm: MmId,
        change: &'static str,
        owed: Unflushed,
        now: u64,
    ) -> u64 {
        if owed.is_empty() {
            return now;
        }
        let seq = self.oracle.next_seq();
        let pf = self.open_flush(cpu, mm, FlushWhat::Mm, change, seq, Vec::new(), Vec::new(), now).with_arch(owed);
        self.flush(cpu, pf, now)
    }

    /// Clears the present PTEs of the pages `zap` names as `zap_pte_range`
    /// does without `fullmm` (module documentation); returns the time after,
    /// what the arch code left owed, the frames to free after the flush and
    /// the first and last page cleared.
    pub(super) fn zap_folio(
        &mut self,
        cpu: usize,
        zap: Zap,
        now: u64,
    ) -> (u64, Unflushed, Vec<u64>, Option<(u64, u64)>) {
        let Zap { mm, va, pages, change } = zap;
        let root = self.kern.mm(mm).root();
        let mut pieces = Vec::new();
        self.pt.for_each_leaf_table(root, va, pages, |a, n| pieces.push((a, n)));
        let batched = self.teardown_strategy() == Teardown::ClearPtes;
        let mut reports: Vec<(u64, PteVal)> = Vec::new();
        let mut mem = KernelPtes::new(self, cpu, now, change);
        for (a, n) in pieces {
            if batched {
                let map = mem.sim.folio_map(root, a, n);
                let folio_of = |pfn: u64| map.binary_search_by_key(&pfn, |e| e.0).ok().map(|i| map[i].1);
                // The range flush after the zap is what MmFlushOwed stands for here.
                let _ = arch::teardown_range(Teardown::ClearPtes, &mut mem, mm, VirtAddr(a), n, folio_of, |v, p| {
                    reports.push((v.0, p))
                });
            } else {
                for i in 0..n {
                    let v = VirtAddr(a).add_pages(i);
                    if arch::ptep_get(&mut mem, mm, v).valid() {
                        reports.push((v.0, arch::ptep_get_and_clear(&mut mem, mm, v)));
                    }
                }
            }
        }
        let exchanged = std::mem::take(&mut mem.exchanged);
        let (now, owed) = mem.finish();
        let span = reports.first().map(|f| f.0).zip(reports.last().map(|l| l.0));
        self.judge_clears(cpu, mm, &reports, &exchanged, now);
        let frames: Vec<u64> = reports.iter().map(|r| r.1.pfn).collect();
        let now = now + self.zap_work(&frames);
        (now, owed, frames, span)
    }

    /// Removes write permission from the present PTEs of `pages` pages from `va`
    /// with `wrprotect_ptes`, run by run; returns the time after, what is owed
    /// and how many PTEs were present.
    pub(super) fn wrprotect_folio(
        &mut self,
        cpu: usize,
        mm: MmId,
        va: u64,
        pages: u64,
        now: u64,
    ) -> (u64, Unflushed, u64) {
        let root = self.kern.mm(mm).root();
        let mut runs: Vec<(u64, u64)> = Vec::new();
        self.pt.for_each_slot(root, va, pages, |a, r| {
            if self.pt.pte(r).valid() {
                match runs.last_mut() {
                    Some((s, n)) if *s + *n * 4096 == a => *n += 1,
                    _ => runs.push((a, 1)),
                }
            }
        });
        let present = runs.iter().map(|r| r.1).sum();
        let mut mem = KernelPtes::new(self, cpu, now, "mprotect");
        for (a, n) in runs {
            arch::wrprotect_ptes(&mut mem, mm, VirtAddr(a), n);
        }
        let (now, owed) = mem.finish();
        (now, owed, present)
    }

    /// Copies `vma`'s present PTEs from `parent` (root `proot`) to `child` for a
    /// fork, write-protecting the parent's (module documentation). Returns the
    /// time after and what the parent's write-protection owes.
    pub(super) fn copy_folio_vma(
        &mut self,
        cpu: usize,
        parent: MmId,
        child: MmId,
        vma: Vma,
        now: u64,
    ) -> (u64, Unflushed) {
        let proot = self.kern.mm(parent).root();
        // folio_pte_batch: runs of PTEs mapping consecutive pages of one folio
        // with the same protection.
        let mut batches: Vec<(u64, u64, u64, u16)> = Vec::new();
        self.pt.for_each_slot(proot, vma.start, vma.pages, |a, r| {
            let p = self.pt.pte(r);
            if !p.valid() {
                return;
            }
            let prot = p.flags & !(P_ACCESS | P_DIRTY);
            let folio = self.frames.folio_of(p.pfn);
            match batches.last_mut() {
                Some((s, n, pfn, f))
                    if *s + *n * 4096 == a
                        && *pfn + *n == p.pfn
                        && *f == prot
                        && folio.is_some()
                        && self.frames.folio_of(*pfn) == folio =>
                {
                    *n += 1
                }
                _ => batches.push((a, 1, p.pfn, prot)),
            }
        });
        let mut mem = KernelPtes::new(self, cpu, now, "fork-wrprotect");
        for (a, n, pfn, _) in batches {
            let pte = arch::ptep_get(&mut mem, parent, VirtAddr(a));
            if pte.write() {
                arch::wrprotect_ptes(&mut mem, parent, VirtAddr(a), n);
            }
            let folio = mem.sim.folio(pfn);
            Self::map_ptes(&mut mem, child, a, pte.wrprotect().mkold().mknoncont(), n, folio);
            for i in 0..n {
                mem.sim.frames.get(pfn + i);
            }
        }
        mem.finish()
    }

    /// Tears `mm` down with folios: `teardown_range` over every last-level table
    /// of every VMA (module documentation). Returns the time after, what is
    /// owed (the whole address space's flush is the caller's) and the frames to
    /// free after it.
    pub(super) fn teardown_folio(
        &mut self,
        cpu: usize,
        mm: MmId,
        vmas: &[Vma],
        change: &'static str,
        now: u64,
    ) -> (u64, Unflushed, Vec<u64>) {
        let root = self.kern.mm(mm).root();
        let strategy = self.teardown_strategy();
        let mut reports: Vec<(u64, PteVal)> = Vec::new();
        let mut mem = KernelPtes::new(self, cpu, now, change);
        for v in vmas {
            let mut pieces = Vec::new();
            mem.sim.pt.for_each_leaf_table(root, v.start, v.pages, |a, n| pieces.push((a, n)));
            for (a, n) in pieces {
                let map = mem.sim.folio_map(root, a, n);
                let folio_of = |pfn: u64| map.binary_search_by_key(&pfn, |e| e.0).ok().map(|i| map[i].1);
                let owed = arch::teardown_range(strategy, &mut mem, mm, VirtAddr(a), n, folio_of, |va, p| {
                    reports.push((va.0, p))
                });
                // Every range owes the same whole-mm flush; the caller makes it once.
                debug_assert_eq!(owed.mm, mm);
            }
        }
        let exchanged = std::mem::take(&mut mem.exchanged);
        let (now, owed) = mem.finish();
        self.judge_clears(cpu, mm, &reports, &exchanged, now);
        let frames: Vec<u64> = reports.iter().map(|r| r.1.pfn).collect();
        let now = now + self.zap_work(&frames);
        (now, owed, frames)
    }

    /// Returns the core mm's cycles for zapping the pages whose frames are
    /// `frames` (in the order they were cleared) and freeing their folios:
    /// `zap_page` per page, `zap_folio` per run of pages of one folio (an
    /// order-0 page being a folio of its own).
    fn zap_work(&self, frames: &[u64]) -> u64 {
        let c = self.m.costs;
        let mut folios = 0;
        let mut last = None;
        for &pfn in frames {
            let f = self.frames.folio_of(pfn).unwrap_or(pfn);
            if last != Some(f) {
                folios += 1;
                last = Some(f);
            }
        }
        c.kernel.zap_page * frames.len() as u64 + c.kernel.zap_folio * folios
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Returns page tables with one block from `va` 0x40_0000 whose PTEs `make`
    /// gives, and its first PTE.
    fn block_of(make: impl Fn(u64) -> Pte) -> (PageTables, PteRef) {
        let mut pt = PageTables::default();
        let root = pt.new_root();
        let base = pt.ensure_leaf(root, 0x40_0000);
        for i in 0..CONT_PTES {
            *pt.pte_mut(base + i as PteRef) = make(i);
        }
        (pt, base)
    }

    fn cont(pfn: u64, flags: u16) -> Pte {
        Pte { pfn, flags: flags | P_VALID | P_CONT, ver: 1, ..Pte::default() }
    }

    #[test]
    fn a_consistent_block_with_holes_is_no_conflict_and_access_dirty_may_differ() {
        let (pt, base) = block_of(|i| match i {
            3 => Pte::default(),
            5 => cont(0x105, P_USER | P_WRITE | P_DIRTY),
            7 => cont(0x107, P_USER | P_WRITE | P_ACCESS),
            _ => cont(0x100 + i, P_USER | P_WRITE),
        });
        assert_eq!(block_conflict(&pt, base, false), None);
        let (pt, base) = block_of(|i| Pte { pfn: 0x200 + i, flags: P_VALID | P_USER, ..Pte::default() });
        assert_eq!(block_conflict(&pt, base, false), None, "no contiguous bit, no block");
    }

    #[test]
    fn a_block_whose_ptes_disagree_is_a_conflict() {
        let write = block_of(|i| cont(0x100 + i, P_USER | if i == 9 { 0 } else { P_WRITE }));
        assert!(block_conflict(&write.0, write.1, false).is_some_and(|w| w.starts_with("PTE 9")));
        assert_eq!(block_conflict(&write.0, write.1, true), None, "wrprotect_ptes in place, before its flush");
        let frames = block_of(|i| cont(if i == 4 { 0x300 } else { 0x100 + i }, P_USER));
        assert!(block_conflict(&frames.0, frames.1, false).is_some_and(|w| w.starts_with("PTE 4")));
        let plain =
            block_of(
                |i| if i == 2 { Pte { flags: P_VALID | P_USER, ..cont(0x102, 0) } } else { cont(0x100 + i, P_USER) },
            );
        assert!(block_conflict(&plain.0, plain.1, true).is_some_and(|w| w.contains("without the contiguous bit")));
        let misaligned = block_of(|i| cont(0x101 + i, P_USER));
        assert!(block_conflict(&misaligned.0, misaligned.1, false).is_some_and(|w| w.contains("not 64 KB-aligned")));
    }

    #[test]
    fn the_simulators_pte_bits_are_the_arch_layers() {
        assert_eq!(
            (P_VALID, P_WRITE, P_ACCESS, P_DIRTY, P_CONT),
            (PteVal::VALID, PteVal::WRITE, PteVal::YOUNG, PteVal::DIRTY, PteVal::CONT)
        );
    }
}
