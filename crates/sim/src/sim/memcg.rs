//! A memory cgroup's limit on user anonymous memory, and the direct reclaim of
//! a fault that would pass it: what makes vm-scalability's `swap-w-*` cases
//! swap (`workload/swap_w_seq_mt.rs`). The reclaim pass here ([`Sim::shrink`])
//! is also the nodes' (`sim/kswapd.rs`), by `kswapd` or direct.
//!
//! # What the simulated kernel does (Linux v6.x memcg, the classic LRU)
//! - **The charge**: a fault that maps new anonymous memory (a page, or a 64 KB
//!   folio) charges its pages to the cgroup (`mem_cgroup_charge` →
//!   `try_charge`). When the charge would take the cgroup over its limit, the
//!   faulting thread reclaims first, in the fault (`try_to_free_mem_cgroup_pages`,
//!   `nr_to_reclaim = max(nr_pages, SWAP_CLUSTER_MAX)`): folios from the head
//!   of the LRU, the least recently faulted first, until at least
//!   [`SWAP_CLUSTER_MAX`] pages are reclaimed (`shrink_inactive_list` isolating
//!   one batch under the node's `lru_lock`, then `shrink_folio_list`), and
//!   charges once there is room.
//! - **Two lists** (`mm/vmscan.c`, the classic LRU): reclaim takes folios
//!   from the inactive list, where new ones join it (anonymous ones since
//!   v5.9, b518154e59aa "mm/vmscan: protect the workingset on anonymous
//!   LRU"); the active list holds those reclaim activated.
//! - **Aging first** (`folio_check_references`, [`Sim::folio_referenced`]):
//!   the rmap walk clears the young bit of each PTE of the folio (x86 without
//!   a flush, arm64 with a TLBI of the page or block,
//!   `ptep_clear_flush_young`). A folio young in one address space is kept
//!   on the inactive list's tail, marked `PG_referenced` (`FOLIOREF_KEEP`); one
//!   marked already, or young in more than one address space, goes to the
//!   active list (`FOLIOREF_ACTIVATE`); one with none is reclaimed, its mark
//!   cleared. So memory written once goes at its second look, and memory
//!   used again between two looks is activated. On x86 a page used again
//!   through its TLB entry stays old (the walk that would set its accessed
//!   bit does not happen), as on the hardware. Page-cache folios likewise
//!   (`sim/file_reclaim.rs`). `MADV_PAGEOUT` ignores the references, as the
//!   kernel's `reclaim_pages` does.
//! - **The active list's aging** (`shrink_active_list`, at the end of a pass
//!   while `inactive_is_low`: fewer inactive pages than the active list's
//!   over `int_sqrt(10 × GB)`): up to [`SWAP_CLUSTER_MAX`] pages from the
//!   active list's head are isolated under the `lru_lock`, their young bits
//!   cleared (arm64: a TLBI for each young PTE) and moved to the inactive
//!   list's tail, young or not (only executable file mappings stay active,
//!   and the model maps no code), under the lock again.
//! - **Each folio** is reclaimed as `MADV_PAGEOUT` reclaims one (`sim/reclaim.rs`:
//!   `try_to_unmap` with `TTU_BATCH_FLUSH`, the deferred flush of each PTE or
//!   batch of PTEs, `try_to_unmap_flush_dirty`, which on x86 is the policy's
//!   batch flush of the mm's CPUs, `pageout` to the swap device, the free); the
//!   mm stays marked for its next `flush_tlb_batched_pending`.
//! - **A later touch** of a reclaimed page faults it back from the swap device
//!   (`Stats::swapins`), as after `MADV_PAGEOUT`.
//! - **The page cache** is charged too when asked ([`Sim::set_file_charge`]):
//!   a fault that reads a file's folio in charges it and, over the limit,
//!   reclaims first; page-cache folios share the LRU's lists, and those a pass
//!   isolates are unmapped and freed together after one flush
//!   (`sim/file_reclaim.rs`), before the pass's anonymous ones.
//!
//! # What is not modelled
//! - Separate anonymous and file lists: both kinds share one inactive and
//!   one active list, and `inactive_is_low` weighs them together (the
//!   kernel keeps four lists and balances each kind; the workloads that
//!   reclaim use one kind). `get_scan_count`'s proportions and the scan
//!   priorities: a pass takes [`SWAP_CLUSTER_MAX`] pages from the head.
//!   The `workingset` mark and refault detection.
//! - MGLRU. A cgroup's limit is reclaimed by the faulting thread alone, as
//!   Linux's `try_charge` does (no `kswapd`); the machine's memory as NUMA
//!   nodes with their watermarks and `kswapd` is `sim/kswapd.rs`, which runs
//!   the same pass ([`Sim::shrink`]) on each node's LRU.
//! - Freed memory leaves the LRU and the charge when reclaim next finds it at
//!   the head (Linux: when it is freed, under the `lru_lock`, which
//!   `kfree_work` charges); a folio mapped more than once (after a `fork`) is
//!   not reclaimed but moved to the tail.

use super::memory::Lru;
use super::ptemem::KernelPtes;
use super::reclaim::Queued;
use super::*;
use tlbkit_policy::contpte as arch;

/// Pages one direct reclaim frees at least: `SWAP_CLUSTER_MAX`
/// (`include/linux/swap.h`), the `nr_to_reclaim` floor of
/// `try_to_free_mem_cgroup_pages`.
pub const SWAP_CLUSTER_MAX: u64 = 32;

/// A folio on the LRU: the address space that mapped it (by slot and by its
/// unique id, as slots are reused), its first page, its first frame and its
/// pages; for a page-cache folio, its file, with `va` its first page's index
/// in the file (and `mm`, `uid` the kernel's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct LruFolio {
    pub(super) mm: MmId,
    pub(super) uid: u32,
    pub(super) va: u64,
    pub(super) pfn: u64,
    pub(super) pages: u64,
    pub(super) file: Option<u32>,
    /// `PG_referenced`: reclaim found it with a young PTE on its last look
    /// (`folio_check_references`); a second such look activates it.
    pub(super) referenced: bool,
}

/// Counts of reclaim: the cgroup's, or the nodes' (direct and by `kswapd`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReclaimStats {
    /// Direct reclaims run (passes of faults that found the cgroup at its
    /// limit, or their node below its min watermark).
    pub direct_reclaims: u64,
    /// Reclaim passes `kswapd` ran (`sim/kswapd.rs`).
    pub kswapd_passes: u64,
    /// Times an allocation woke a sleeping `kswapd` (`wakeup_kswapd`).
    pub kswapd_wakes: u64,
    /// Anonymous folios they reclaimed (unmapped, written to swap, freed).
    pub folios: u64,
    /// Pages those folios had.
    pub pages: u64,
    /// Page-cache folios they reclaimed (unmapped from every address space
    /// mapping them, dropped from the page cache, freed: `sim/file_reclaim.rs`).
    pub file_folios: u64,
    /// Pages those folios had.
    pub file_pages: u64,
    /// Present PTEs of file pages that reclaim cleared.
    pub file_unmaps: u64,
    /// TLB flushes that completed file reclaim's unmaps: one batch flush per
    /// reclaim pass (`try_to_unmap_flush`) with batching, one flush per PTE
    /// (`ptep_clear_flush`) without.
    pub file_flushes: u64,
    /// Page-cache folios reclaim found mapped with a young PTE and kept for
    /// a later pass (`folio_check_references`).
    pub file_kept: u64,
    /// Anonymous folios reclaim found with a young PTE and kept: on the
    /// inactive list again (`FOLIOREF_KEEP`) or activated.
    pub anon_kept: u64,
    /// Folios, anonymous or not, reclaim activated (`FOLIOREF_ACTIVATE`:
    /// found young again while marked `PG_referenced`, or young in more than
    /// one address space).
    pub activated: u64,
    /// Folios the active list's aging moved back to the inactive list
    /// (`shrink_active_list`), their young bits cleared.
    pub deactivated: u64,
}

impl Sim {
    /// Limits user anonymous memory (and the page cache, after
    /// [`Sim::set_file_charge`]) to `pages` 4 KB pages, one cgroup holding
    /// every process: a fault that would pass the limit reclaims first (module
    /// documentation). Without a call nothing is limited. Tasks in the root
    /// cgroup (`memcg_depth` 0) move to one directly below it, which the limit is on.
    pub fn set_mem_limit(&mut self, pages: u64) {
        self.kw.leave_root_cgroup();
        self.mem.set_mem_limit(pages);
    }

    /// Returns the counts of the cgroup's reclaim so far.
    pub fn reclaim_stats(&self) -> ReclaimStats {
        self.mem.reclaim_stats()
    }

    /// The charge of a fault by `cpu` on `va` of `mm` in `vma` at `now`: if it
    /// will map new anonymous memory that takes the cgroup over its limit,
    /// reclaims first. Returns the time after it.
    pub(super) fn memcg_charge_fault(&mut self, cpu: usize, mm: MmId, vma: Vma, va: u64, now: u64) -> u64 {
        if !self.mem.lru_kept() || vma.file.is_some() {
            return now;
        }
        let root = self.kern.mm(mm).root();
        let mapped = self.pt.walk(root, va & !4095).is_some_and(|w| self.pt.pte(w.pte).valid());
        if mapped {
            return now;
        }
        let block = va & !(CONT_PTES * 4096 - 1);
        let folio = self.folios() && block >= vma.start && block + CONT_PTES * 4096 <= vma.end();
        let nr = if folio { CONT_PTES } else { 1 };
        self.make_room(cpu, nr, now)
    }

    /// Makes room for `nr` new pages that `cpu` allocates at `now`: under a
    /// cgroup, direct reclaim while the charge would pass its limit
    /// (`try_charge`); with the nodes' memory, the allocator's watermarks
    /// (`sim/kswapd.rs`). Returns the time after it.
    fn make_room(&mut self, cpu: usize, nr: u64, mut now: u64) -> u64 {
        if !self.mem.memcg_limited() {
            return self.node_alloc(cpu, nr, now);
        }
        let mut tries = 0;
        while self.mem.memcg_over(nr) && tries < MAX_RECLAIM_RETRIES {
            now = self.shrink(cpu, Lru::Memcg, false, now);
            tries += 1;
        }
        now
    }

    /// Records that a fault mapped the folio of `pages` pages at `va` of `mm`,
    /// first frame `pfn`: it joins the LRU's tail, charged.
    pub(super) fn memcg_add(&mut self, mm: MmId, va: u64, pfn: u64, pages: u64) {
        let Some(uid) = self.kern.get_mm(mm).map(|m| m.uid()) else {
            return;
        };
        self.lru_charge(LruFolio { mm, uid, va, pfn, pages, file: None, referenced: false });
    }

    /// Charges folio `f` and puts it on its LRU's tail: the cgroup's, or the
    /// LRU of the node its first frame is on.
    fn lru_charge(&mut self, f: LruFolio) {
        let node = usize::from(self.frames.node(f.pfn));
        self.mem.memcg_charge(f, node);
    }

    /// The charge of a fault by `cpu` on `va` of the file mapping `vma` at
    /// `now`, when the cgroup charges the page cache
    /// ([`Sim::set_file_charge`]): if the page must be read into the page cache
    /// (a new folio) and that takes the cgroup over its limit, reclaims first.
    /// Returns the time after it.
    pub(super) fn memcg_charge_file(&mut self, cpu: usize, vma: Vma, va: u64, now: u64) -> u64 {
        let Some(file) = vma.file.filter(|_| self.mem.lru_kept()) else {
            return now;
        };
        if !self.mem.charges_page_cache() || self.page_cached(file, vma.file_page(va)) {
            return now;
        }
        self.make_room(cpu, CONT_PTES, now)
    }

    /// Puts isolated folio `f` back at the inactive list's tail, charged (one
    /// reclaim could not free, or kept).
    pub(super) fn memcg_putback(&mut self, f: LruFolio) {
        self.lru_charge(f);
    }

    /// Puts isolated folio `f` on the active list's tail, charged
    /// (`FOLIOREF_ACTIVATE`).
    pub(super) fn memcg_activate(&mut self, f: LruFolio) {
        let node = usize::from(self.frames.node(f.pfn));
        self.mem.memcg_activate(f, node);
        self.mem.count_activated();
    }

    /// `folio_check_references` for isolated folio `f`, young in `young`
    /// address spaces ([`Sim::folio_referenced`]): in none it is reclaimed
    /// (its `PG_referenced` cleared; returns `true`); in one it is kept on
    /// the inactive list, marked, unless it was marked already, when it is
    /// activated, as it is in more than one.
    pub(super) fn check_references(&mut self, mut f: LruFolio, young: usize) -> bool {
        let was = std::mem::replace(&mut f.referenced, false);
        if young == 0 {
            return true;
        }
        f.referenced = true;
        if was || young > 1 {
            self.memcg_activate(f);
        } else {
            self.memcg_putback(f);
        }
        false
    }

    /// Records that page `index` of `file` and the `pages` after it were read
    /// into the page cache at frame `pfn` on: the folio joins the LRU's tail,
    /// charged, when the cgroup charges the page cache.
    pub(super) fn memcg_add_file(&mut self, file: u32, index: u64, pfn: u64, pages: u64) {
        if self.mem.charges_page_cache() {
            self.lru_charge(LruFolio {
                mm: MmId::KERNEL,
                uid: 0,
                va: index,
                pfn,
                pages,
                file: Some(file),
                referenced: false,
            });
        }
    }

    /// Records that a migration moved the page at `va` of `mm` (an order-0
    /// folio) to frame `pfn`: its LRU entry follows it.
    pub(super) fn memcg_moved(&mut self, mm: MmId, va: u64, pfn: u64) {
        self.mem.memcg_moved(mm, va, pfn);
    }

    /// One reclaim pass by `cpu` from `now` (module documentation): drains the
    /// CPU's LRU-add batch (`lru_add_drain()`), isolates folios from the head
    /// of LRU `lru` until they hold [`SWAP_CLUSTER_MAX`] pages, then reclaims
    /// each (`shrink_inactive_list` → `shrink_folio_list`).
    /// A direct reclaim, or with `by_kswapd` one of a node's `kswapd`
    /// (`sim/kswapd.rs`: the same path on its thread's CPU). Returns the
    /// time after it.
    pub(super) fn shrink(&mut self, cpu: usize, lru: Lru, by_kswapd: bool, mut now: u64) -> u64 {
        let isolated = self.isolate(lru);
        if isolated.is_empty() {
            return self.age_active(cpu, lru, now);
        }
        self.mem.count_reclaim_pass(by_kswapd);
        // shrink_inactive_list's lru_add_drain(), then the isolation's hold.
        now = self.lru_drain(cpu, now);
        now = self.lru_hold(cpu, now, isolated.len() as u32);
        let batch = self.mem.pageout_batch();
        // Clean page-cache folios are freed together after one flush, at the
        // end of shrink_folio_list; anonymous ones are each flushed and written
        // to swap in turn.
        let (files, anon): (Vec<LruFolio>, Vec<LruFolio>) = isolated.into_iter().partition(|f| f.file.is_some());
        if !files.is_empty() {
            now = self.reclaim_file_folios(cpu, &files, now);
        }
        for f in anon {
            let mut mem = KernelPtes::new(self, cpu, now, "reclaim");
            let ptes = (0..f.pages).map(|i| (f.mm, f.va + i * 4096));
            let young = Self::folio_referenced(&mut mem, ptes);
            if young > 0 {
                let (t, owed) = mem.finish();
                now = self.flush_unflushed(cpu, f.mm, "reclaim", owed, t);
                self.check_references(f, young);
                self.mem.count_anon_kept();
                continue;
            }
            let mut list = super::reclaim::FolioList::default();
            Self::reclaim_folio(&mut mem, f.mm, Queued { va: f.va, pages: f.pages, pfn: f.pfn }, batch, &mut list);
            let held = list.finish(&mut mem);
            let (t, owed) = mem.finish();
            self.kern.mm_mut(f.mm).defer_batched(held);
            // Every change was covered by the deferred flushes and completed.
            debug_assert!(owed.is_empty());
            now = self.flush_unflushed(cpu, f.mm, "reclaim", owed, t);
            self.mem.count_anon_reclaimed(f.pages);
        }
        self.age_active(cpu, lru, now)
    }

    /// `shrink_active_list` at the end of a pass (`shrink_lruvec` ages the
    /// active list while the inactive one is low, `inactive_is_low`):
    /// drains the CPU's LRU-add batch, isolates up to [`SWAP_CLUSTER_MAX`]
    /// pages from the active list's head under the `lru_lock`, clears each
    /// folio's young bits
    /// ([`Sim::folio_referenced`]: arm64 flushes each young PTE, x86 does not)
    /// and moves it to the inactive list's tail, whether it was young or not
    /// (only an executable file mapping stays active, and the model maps no
    /// code), under the lock again. Returns the time after it.
    fn age_active(&mut self, cpu: usize, lru: Lru, mut now: u64) -> u64 {
        let Some(mut cg) = self.mem.memcg_lend(lru) else {
            return now;
        };
        let isolated = if cg.inactive_is_low() { cg.isolate_active(|f| self.lru_state(f)) } else { Vec::new() };
        self.mem.memcg_return(lru, cg);
        if isolated.is_empty() {
            return now;
        }
        let n = isolated.len() as u32;
        // shrink_active_list's lru_add_drain(), then the isolation's hold.
        now = self.lru_drain(cpu, now);
        now = self.lru_hold(cpu, now, n);
        for f in isolated {
            let ptes: Vec<(MmId, u64)> = match f.file {
                Some(file) => {
                    self.file_mappings(&f, file).unwrap_or_default().iter().map(|&(mm, va, _)| (mm, va)).collect()
                }
                None => (0..f.pages).map(|i| (f.mm, f.va + i * 4096)).collect(),
            };
            let mm = ptes.first().map_or(f.mm, |&(mm, _)| mm);
            let mut mem = KernelPtes::new(self, cpu, now, "aging");
            Self::folio_referenced(&mut mem, ptes);
            let (t, owed) = mem.finish();
            now = self.flush_unflushed(cpu, mm, "aging", owed, t);
            self.memcg_putback(f);
            self.mem.count_deactivated();
        }
        self.lru_hold(cpu, now, n)
    }

    /// `folio_referenced`: the rmap walk ages the PTE at each of `ptes` (the
    /// folio's mappings, a PTE each) and returns in how many address spaces
    /// one was young (the kernel counts the VMAs with a young PTE,
    /// `folio_referenced_one`'s `pra->referenced`: a large folio read through
    /// its sixteen PTEs of one mapping counts once). x86 clears the accessed
    /// bit without a flush (`ptep_clear_flush_young` is
    /// `ptep_test_and_clear_young` there: a stale entry only delays the bit's
    /// next setting); arm64 flushes the page, or the contiguous block, of a
    /// young one (`ptep_clear_flush_young` → `__flush_tlb_range_nosync`,
    /// whose `DSB` the kernel elides and the model does not).
    pub(super) fn folio_referenced(mem: &mut KernelPtes<'_>, ptes: impl IntoIterator<Item = (MmId, u64)>) -> usize {
        let flush = mem.sim.cfg.preset.arch == crate::preset::Arch::Arm64;
        let mut young: Vec<MmId> = Vec::new();
        for (mm, va) in ptes {
            let v = VirtAddr(va);
            let was = if flush {
                arch::ptep_clear_flush_young(mem, mm, v)
            } else {
                arch::ptep_test_and_clear_young(mem, mm, v)
            };
            if was && !young.contains(&mm) {
                young.push(mm);
            }
        }
        young.len()
    }

    /// Takes folios off the LRU's head until they hold [`SWAP_CLUSTER_MAX`]
    /// pages or every folio was looked at once: drops (uncharges) those freed
    /// since they were faulted, moves those mapped more than once to the tail,
    /// and returns the others.
    fn isolate(&mut self, lru: Lru) -> Vec<LruFolio> {
        let Some(mut cg) = self.mem.memcg_lend(lru) else {
            return Vec::new();
        };
        let out = cg.isolate(|f| self.lru_state(f));
        self.mem.memcg_return(lru, cg);
        out
    }

    /// Returns what became of LRU folio `f` (module documentation).
    fn lru_state(&self, f: &LruFolio) -> LruState {
        if let Some(file) = f.file {
            return if self.page_cache_frame(file, f.va) == Some(f.pfn) {
                LruState::Reclaimable
            } else {
                LruState::Gone
            };
        }
        let Some(m) = self.kern.get_mm(f.mm) else {
            return LruState::Gone;
        };
        if !m.alive() || m.uid() != f.uid {
            return LruState::Gone;
        }
        let mapped = (0..f.pages).all(|i| {
            self.pt.walk(m.root(), f.va + i * 4096).is_some_and(|w| {
                let p = self.pt.pte(w.pte);
                !w.huge && p.valid() && p.pfn == f.pfn + i
            })
        });
        if !mapped || self.folio(f.pfn).pages != f.pages {
            return LruState::Gone;
        }
        if (0..f.pages).any(|i| self.frames.refs(f.pfn + i) != 1) {
            return LruState::Shared;
        }
        LruState::Reclaimable
    }
}

/// What became of a folio on the LRU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LruState {
    /// Unmapped or remapped since (freed, or its address space gone).
    Gone,
    /// Mapped more than once.
    Shared,
    /// Mapped once, as when it was faulted.
    Reclaimable,
}

/// Reclaims a charge tries before it fails (`MAX_RECLAIM_RETRIES`,
/// `mm/internal.h`); past it the charge goes through here (Linux would run
/// the OOM killer). Also the passes without progress after which `kswapd`
/// gives up until reclaim frees something (`kswapd_failures`).
pub(super) const MAX_RECLAIM_RETRIES: u32 = 16;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preset;
    use tlbkit_policy::asid::LinuxArm64;

    #[test]
    fn isolation_drops_freed_folios_and_stops_at_a_cluster() {
        let cfg = SimConfig { max_mms: 4, ..SimConfig::quiet(preset::named("altra"), 1, 1) };
        let mut sim = Sim::new(cfg, LinuxArm64::new(1, 4, 16, false).unwrap());
        sim.set_mem_limit(64);
        // Folios the kernel's address space does not map: all gone.
        for i in 0..40 {
            sim.memcg_add(MmId::KERNEL, 0x10_0000 + i * 4096, 1000 + i, 1);
        }
        assert_eq!(sim.mem.memcg_charged(), Some(40));
        assert!(sim.isolate(Lru::Memcg).is_empty());
        let cg = (sim.mem.memcg_charged().unwrap(), sim.mem.memcg_lru_len().unwrap());
        assert_eq!(cg, (0, 0), "freed folios leave the charge and the LRU");
    }
}
