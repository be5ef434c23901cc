//! Reclaim of page-cache folios: what a memory cgroup that charges the page
//! cache ([`Sim::set_file_charge`]) does when a file read would take it over
//! its limit, and what a node's `kswapd` or a direct reclaimer does when reads
//! took the node below its watermarks (`sim/kswapd.rs`; vm-scalability's
//! `lru-file-mmap-read`, `workload/lru_file_mmap_read.rs`).
//!
//! # What the simulated kernel does (Linux `shrink_folio_list`, `mm/vmscan.c`)
//! - **The charge**: a fault that reads a file's 64 KB folio into the page
//!   cache charges its pages (`filemap_add_folio` → `mem_cgroup_charge`); over
//!   the limit, the faulting thread reclaims first, as for anonymous memory
//!   (`sim/memcg.rs`). The page cache keeps the folio after every mapping is
//!   gone, so a file read once fills memory with clean, mapped or formerly
//!   mapped folios, the oldest first on the LRU.
//! - **Aging first** (`folio_check_references` → `folio_referenced`, the same
//!   rule since Linux 2.6.34's "vmscan: detect mapped file pages used only
//!   once"): the rmap walk reads every mapping's PTE and clears its young
//!   bit (x86 without a flush; arm64 with a TLBI of the page,
//!   `ptep_clear_flush_young`). A folio with a young PTE is kept for a later
//!   pass, as an anonymous one is (`sim/memcg.rs`: on the inactive list,
//!   marked `PG_referenced`, or, marked already or young in more than one
//!   mapping, on the active list). Found again with no young PTE, it is
//!   reclaimed (`FOLIOREF_RECLAIM_CLEAN`). A page read once is so reclaimed
//!   on its second look.
//! - **Unmap** (`try_to_unmap` → `rmap_walk_file` over the file's
//!   `i_mmap` tree → `try_to_unmap_one` for each mapping): every address space
//!   that maps a page of the folio has its PTE read twice (`check_pte`, then
//!   `try_to_unmap_one`'s own read) and cleared (`get_and_clear_full_ptes`,
//!   one PTE). With `TTU_BATCH_FLUSH` (the default: Mel Gorman's "mm: defer
//!   flush of writable TLB entries" series, v4.3, x86's
//!   `ARCH_WANT_BATCHED_UNMAP_TLB_FLUSH`; arm64 from v6.5, "arm64: support
//!   batched/deferred tlb shootdown during page reclamation/migration") each
//!   clear's flush is deferred (`set_tlb_ubc_flush_pending`: on x86 the mm's
//!   `mm_cpumask` joins the batch, on arm64 the TLBI is issued without its
//!   `DSB`; `KernelPtes::flush_deferred`). Without batching (`--set
//!   tlbbatch=off`: x86 before v4.3, arm64 before v6.5) each
//!   clear is `ptep_clear_flush`, a flush of that page on every CPU of the mm
//!   at once (`flush_tlb_page`).
//! - **Then, for the pass**: a clean file folio needs no write-back, so
//!   `__remove_mapping` drops it from the page cache and it waits on the
//!   pass's free list; after the last folio of the pass, `try_to_unmap_flush`
//!   completes every deferred flush at once (x86: the policy's
//!   [`Policy::flush_batch`] of every mm whose PTEs were cleared: one flush of
//!   the union of their `mm_cpumask`s; arm64: one `DSB ISH`), and only then
//!   are the folios freed (`free_unref_folios`). A pass is one isolation of at
//!   least [`SWAP_CLUSTER_MAX`] pages (`sim/memcg.rs`).
//!
//! # Costs
//! The preset's `zap_page` per PTE cleared and `zap_folio` per folio, as for an
//! anonymous folio (`sim/reclaim.rs`); the page-table accesses through
//! [`KernelPtes`]; the flushes as the policy makes them. While the page cache
//! is charged, a folio read into it also costs what an anonymous folio's
//! allocation does (`sim/kwork.rs`: the zone lock, the memcg stock, the LRU
//! batch) and its zeroing (reading a hole) is written within the node's
//! memory bandwidth; elsewhere the page cache keeps its plain `page_copy` per
//! page, so that earlier results stay as they were.
//!
//! # Not modelled
//! - arm64's TLBI of a young PTE waits for its `DSB` here, where the
//!   kernel's `__flush_tlb_page_nosync` does not.
//! - The `i_mmap` lock, the folio lock, the page cache's `xa_lock` and the
//!   rmap walk's own cost beyond the PTE accesses.
//! - Dirty file folios (written back before they are freed): a folio whose
//!   PTE records a write is not reclaimed but moved to the LRU's tail (the
//!   workload that charges the page cache only reads its files).

use super::ptemem::KernelPtes;
use super::*;
use crate::sim::memcg::LruFolio;
use crate::toggle::TLBBATCH;
use tlbkit_policy::contpte::{self as arch, PteMem};

/// A present PTE of a page-cache page: the address space, the page and the frame.
type Mapping = (MmId, u64, u64);

impl Sim {
    /// Makes the memory cgroup ([`Sim::set_mem_limit`]) charge the page cache
    /// and reclaim its folios too (module documentation), deferring each
    /// clear's flush to one flush per pass ([`crate::toggle::TLBBATCH`],
    /// Linux v4.3 on x86, v6.5 on arm64) or flushing each clear at once
    /// (`--set tlbbatch=off`). Off by default: only anonymous memory is charged.
    pub fn set_file_charge(&mut self) {
        self.mem.charge_page_cache();
    }

    /// Returns the frame of page `index` of `file` in the page cache, if it is there.
    pub(super) fn page_cache_frame(&self, file: u32, index: u64) -> Option<u64> {
        self.mem.page_cache_frame(file, index)
    }

    /// Returns whether page `index` of `file` is in the page cache.
    pub(super) fn page_cached(&self, file: u32, index: u64) -> bool {
        self.page_cache_frame(file, index).is_some()
    }

    /// Returns every present PTE that maps a page of the page-cache folio `f`:
    /// the address space, the page and the frame (`rmap_walk_file`). `None`
    /// when one of them records a write (a dirty folio: not reclaimed here).
    pub(super) fn file_mappings(&self, f: &LruFolio, file: u32) -> Option<Vec<Mapping>> {
        let (first, last) = (f.va, f.va + f.pages);
        let mut out = Vec::new();
        for (mm, m) in self.kern.user_mms() {
            if !m.alive() {
                continue;
            }
            for v in m.vmas().iter().filter(|v| v.file == Some(file)) {
                let (lo, hi) = (first.max(v.pgoff), last.min(v.pgoff + v.pages));
                for index in lo..hi {
                    let va = v.start + (index - v.pgoff) * 4096;
                    let Some(w) = self.pt.walk(m.root(), va).filter(|w| !w.huge) else {
                        continue;
                    };
                    let p = self.pt.pte(w.pte);
                    if p.valid() && p.pfn == f.pfn + (index - first) {
                        if p.written || p.flags & P_DIRTY != 0 {
                            return None;
                        }
                        out.push((mm, va, p.pfn));
                    }
                }
            }
        }
        Some(out)
    }

    /// Reclaims the page-cache folios `folios` of one pass by `cpu` from `now`
    /// (module documentation): unmaps each from every address space, completes
    /// the flushes, drops them from the page cache and frees them. Returns the
    /// time after it.
    pub(super) fn reclaim_file_folios(&mut self, cpu: usize, folios: &[LruFolio], now: u64) -> u64 {
        let batch = self.features().on(TLBBATCH);
        let mut mem = KernelPtes::new(self, cpu, now, "reclaim");
        let mut done: Vec<(LruFolio, Vec<Mapping>)> = Vec::new();
        let mut mms: Vec<MmId> = Vec::new();
        for f in folios {
            let Some(file) = f.file else { continue };
            let Some(maps) = mem.sim.file_mappings(f, file) else {
                // Dirty: back to the LRU's tail, charged again.
                mem.sim.memcg_putback(*f);
                continue;
            };
            let young = Self::folio_referenced(&mut mem, maps.iter().map(|&(mm, va, _)| (mm, va)));
            if !mem.sim.check_references(*f, young) {
                // A mapping used since the last look keeps it for a later
                // pass (FOLIOREF_KEEP or _ACTIVATE).
                mem.sim.mem.count_file_kept();
                continue;
            }
            for &(mm, va, _) in &maps {
                let v = VirtAddr(va);
                // page_vma_mapped_walk's check_pte, then try_to_unmap_one's own read.
                arch::ptep_get(&mut mem, mm, v);
                arch::ptep_get(&mut mem, mm, v);
                arch::get_and_clear_full_ptes(&mut mem, mm, v, 1);
                if batch {
                    mem.flush_deferred(mm, v, 1);
                } else {
                    // ptep_clear_flush: flush_tlb_page at once.
                    mem.flush_tlb_range(mm, v, 1);
                    mem.sim.mem.count_file_flush();
                }
                if !mms.contains(&mm) {
                    mms.push(mm);
                }
            }
            done.push((*f, maps));
        }
        // try_to_unmap_flush, before the pass's folios are freed.
        let mut held = reclaim::Held::default();
        if batch && done.iter().any(|(_, m)| !m.is_empty()) {
            held = mem.sync_deferred();
            mem.sim.mem.count_file_flush();
        }
        let c = mem.sim.m.costs;
        for (f, maps) in &done {
            mem.now += c.kernel.zap_page * maps.len() as u64 + c.kernel.zap_folio;
            mem.sim.mem.page_cache_remove(f.file.unwrap_or_default(), f.va, f.pages);
            // The mappings' references, then the page cache's.
            let unmapped: Vec<u64> = maps.iter().map(|&(_, _, pfn)| pfn).collect();
            let mut freed = mem.sim.put_frames(unmapped);
            let cache = mem.sim.put_frames(f.pfn..f.pfn + f.pages);
            freed = (freed.0 + cache.0, freed.1 + cache.1);
            mem.now = mem.sim.kfree_work(mem.cpu, freed, mem.now);
            mem.sim.mem.count_file_reclaimed(f.pages, maps.len() as u64);
        }
        let (t, owed) = mem.finish();
        if held.any() {
            for &mm in &mms {
                self.kern.mm_mut(mm).defer_batched(held);
            }
        }
        // Every change was covered by a flush and completed.
        debug_assert!(owed.is_empty());
        match mms.first() {
            Some(&mm) => self.flush_unflushed(cpu, mm, "reclaim", owed, t),
            None => t,
        }
    }
}
