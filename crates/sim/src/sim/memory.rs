//! Memory beyond the page tables ([`MemoryState`]): the page cache, the memory
//! cgroup's charge and LRU, the swap device, pages under migration, and the
//! switches of reclaim and of NUMA nodes without CPUs.
//!
//! The paths that use it (`sim/contpte.rs`'s page-cache reads, `sim/memcg.rs`,
//! `sim/file_reclaim.rs`, `sim/reclaim.rs`, `sim/migrate.rs`) reach it through
//! the methods here, each named for the kernel's or the hardware's action it
//! models, and each keeping what its documentation says true:
//! - the page cache: a cached page's slot holds its frame, a page not cached
//!   holds [`NO_FRAME`]; a folio enters and leaves whole;
//! - the cgroup ([`MemLimit`]): its charge is the pages of every folio on its
//!   LRU, freed ones until reclaim finds them (charging puts a folio on the
//!   LRU, isolating takes it off, both with its pages);
//! - or, instead of the cgroup, the NUMA nodes' memory (`sim/kswapd.rs`): each
//!   node's LRU is a [`MemLimit`] whose limit is the node's managed pages, and
//!   a folio is on the LRU of the node its first frame is on ([`Lru`]);
//! - pages under migration: each is known by its address space's unique id
//!   and page, with when it was unmapped and when it is mapped again.

use super::kswapd::NodeMem;
use super::memcg::{LruFolio, LruState, ReclaimStats, SWAP_CLUSTER_MAX};
use crate::swapdev::{Fill, SwapDevice};
use std::collections::{BTreeMap, VecDeque};
use tlbkit_policy::MmId;

/// A page-cache slot with no frame.
const NO_FRAME: u64 = u64::MAX;

/// Memory beyond the page tables: the page cache, reclaim and swap, the
/// memory cgroup, pages under migration and memory-only NUMA nodes.
pub(super) struct MemoryState {
    /// The page cache: per file, per page, the frame holding it (`NO_FRAME`
    /// while not cached). The cache holds one reference on each frame until
    /// reclaim drops the folio (`sim/file_reclaim.rs`).
    files: Vec<Vec<u64>>,
    /// Whether `MADV_PAGEOUT` unmaps a large anonymous folio's PTEs in one batch
    /// (Dev Jain's series, [`Sim::set_pageout_batch`]) rather than one at a time
    /// (Linux v7.0).
    ///
    /// [`Sim::set_pageout_batch`]: super::Sim::set_pageout_batch
    pageout_batch: bool,
    /// Pages under migration, by address space (unique id) and page: when each
    /// is unmapped and when it is mapped again (`sim/migrate.rs`). Empty unless
    /// a migration ran.
    migrating: BTreeMap<(u32, u64), (u64, u64)>,
    /// NUMA nodes with memory and no CPUs ([`Sim::add_cpuless_node`]).
    ///
    /// [`Sim::add_cpuless_node`]: super::Sim::add_cpuless_node
    cpuless_nodes: usize,
    /// Whether the memory cgroup charges the page cache and reclaims it
    /// ([`Sim::set_file_charge`]; off: only anonymous memory is charged).
    ///
    /// [`Sim::set_file_charge`]: super::Sim::set_file_charge
    file_charge: bool,
    /// The swap device.
    swap: SwapDevice,
    /// What the workload's anonymous pages hold, as the swap device sees it
    /// (ordinary data unless the workload says otherwise).
    anon_fill: Fill,
    /// The memory cgroup's limit and LRU, if memory is limited
    /// ([`Sim::set_mem_limit`]).
    ///
    /// [`Sim::set_mem_limit`]: super::Sim::set_mem_limit
    memcg: Option<MemLimit>,
    /// The NUMA nodes' memory, when the machine's memory is limited
    /// ([`Sim::set_machine_memory`], `sim/kswapd.rs`); empty otherwise. Never
    /// both this and `memcg`.
    ///
    /// [`Sim::set_machine_memory`]: super::Sim::set_machine_memory
    pub(super) nodes: Vec<NodeMem>,
    /// Counts of reclaim, direct and by `kswapd`.
    reclaim: ReclaimStats,
}

/// The LRU a folio is on and reclaim isolates from: the memory cgroup's, or
/// a NUMA node's (by index into [`MemoryState::nodes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lru {
    /// The memory cgroup's.
    Memcg,
    /// Node `n`'s.
    Node(usize),
}

/// The cgroup: its limit, its charge and its LRU, an inactive and an active
/// list (anonymous and page-cache folios share them). The charge is the
/// pages of every folio on either list (freed ones until reclaim finds them).
#[derive(Clone, Debug, Default)]
pub(super) struct MemLimit {
    /// The limit, in 4 KB pages (`memory.max`; a node's managed pages).
    pub(super) limit: u64,
    /// Pages charged: every folio on the LRU (freed ones until reclaim finds them).
    pub(super) charged: u64,
    /// The inactive list, in the order folios joined it, the oldest first:
    /// new folios (anonymous ones from v5.9, b518154e59aa), kept ones and
    /// those the active list's aging returns.
    lru: VecDeque<LruFolio>,
    /// The active list, likewise: folios reclaim activated.
    active: VecDeque<LruFolio>,
    /// Pages on the active list.
    active_pages: u64,
}

impl MemLimit {
    /// Returns an empty LRU with a limit of `pages`.
    pub(super) fn with_limit(pages: u64) -> Self {
        MemLimit { limit: pages, ..MemLimit::default() }
    }

    /// Charges folio `f` and puts it on the LRU's tail (`mem_cgroup_charge`,
    /// then `folio_add_lru`).
    fn charge(&mut self, f: LruFolio) {
        self.lru.push_back(f);
        self.charged += f.pages;
    }

    /// Charges folio `f` and puts it on the active list's tail.
    fn activate(&mut self, f: LruFolio) {
        self.active.push_back(f);
        self.charged += f.pages;
        self.active_pages += f.pages;
    }

    /// `inactive_is_low`: whether the inactive list holds too few pages for
    /// the active one's, `inactive × ratio < active`, the ratio
    /// `int_sqrt(10 × GB)` of the lists' size in whole GB (1 below 1 GB).
    pub(super) fn inactive_is_low(&self) -> bool {
        let inactive = self.charged.saturating_sub(self.active_pages);
        let gb = self.charged >> 18;
        let ratio = if gb > 0 { (10 * gb).isqrt() } else { 1 };
        inactive * ratio < self.active_pages
    }

    /// Takes folios off the active list's head for its aging
    /// (`shrink_active_list`), as [`MemLimit::isolate`] takes them off the
    /// inactive list's.
    pub(super) fn isolate_active(&mut self, state: impl FnMut(&LruFolio) -> LruState) -> Vec<LruFolio> {
        let (out, left) = take_head(&mut self.active, state);
        self.charged -= left;
        self.active_pages -= left;
        out
    }

    /// Takes folios off the inactive list's head until they hold [`SWAP_CLUSTER_MAX`]
    /// pages or every folio was looked at once (`isolate_lru_folios`), as
    /// `state` finds each: drops (uncharges) those gone since they were
    /// charged, moves those mapped more than once to the tail, and returns
    /// the others, uncharged.
    pub(super) fn isolate(&mut self, state: impl FnMut(&LruFolio) -> LruState) -> Vec<LruFolio> {
        let (out, left) = take_head(&mut self.lru, state);
        self.charged -= left;
        out
    }
}

/// Takes folios off `list`'s head until they hold [`SWAP_CLUSTER_MAX`] pages
/// or every folio was looked at once, as `state` finds each: drops those
/// gone, moves those mapped more than once to the tail; returns the others
/// and the pages that left the list (theirs and the dropped ones').
fn take_head(list: &mut VecDeque<LruFolio>, mut state: impl FnMut(&LruFolio) -> LruState) -> (Vec<LruFolio>, u64) {
    let mut out = Vec::new();
    let (mut pages, mut left, mut looked) = (0, 0, 0);
    let n = list.len();
    while pages < SWAP_CLUSTER_MAX && looked < n {
        let Some(f) = list.pop_front() else {
            break;
        };
        looked += 1;
        match state(&f) {
            LruState::Shared => list.push_back(f),
            LruState::Gone => left += f.pages,
            LruState::Reclaimable => {
                pages += f.pages;
                left += f.pages;
                out.push(f);
            }
        }
    }
    (out, left)
}

impl MemoryState {
    /// Returns the memory of a booted machine: nothing cached, charged or
    /// migrating, with `swap` as its swap device.
    pub(super) fn new(swap: SwapDevice) -> Self {
        MemoryState {
            files: Vec::new(),
            pageout_batch: false,
            migrating: BTreeMap::new(),
            cpuless_nodes: 0,
            file_charge: false,
            swap,
            anon_fill: Fill::Data,
            memcg: None,
            nodes: Vec::new(),
            reclaim: ReclaimStats::default(),
        }
    }

    /// Returns the frame of page `index` of `file` in the page cache, if it is
    /// there (`filemap_get_folio`).
    pub(super) fn page_cache_frame(&self, file: u32, index: u64) -> Option<u64> {
        let f = self.files.get(file as usize)?;
        f.get(index as usize).copied().filter(|&p| p != NO_FRAME)
    }

    /// Adds the folio of `pages` pages from page `index` of `file`, its first
    /// frame `pfn`, to the page cache (`filemap_add_folio`): page `index + i`
    /// is then at frame `pfn + i`.
    pub(super) fn page_cache_add(&mut self, file: u32, index: u64, pfn: u64, pages: u64) {
        let f = file as usize;
        if self.files.len() <= f {
            self.files.resize(f + 1, Vec::new());
        }
        let end = (index + pages) as usize;
        let cache = &mut self.files[f];
        if cache.len() < end {
            cache.resize(end, NO_FRAME);
        }
        for (i, slot) in cache[index as usize..end].iter_mut().enumerate() {
            *slot = pfn + i as u64;
        }
    }

    /// Drops the folio of `pages` pages from page `index` of `file` from the
    /// page cache (`__remove_mapping`): none of its pages is cached after.
    /// The folio must be cached.
    pub(super) fn page_cache_remove(&mut self, file: u32, index: u64, pages: u64) {
        let cache = &mut self.files[file as usize];
        cache[index as usize..(index + pages) as usize].fill(NO_FRAME);
    }

    /// Makes `MADV_PAGEOUT` and the cgroup's reclaim unmap a large folio's
    /// PTEs in batches (`on`) or one at a time.
    pub(super) fn set_pageout_batch(&mut self, on: bool) {
        self.pageout_batch = on;
    }

    /// Returns whether reclaim unmaps a large folio's PTEs in batches.
    pub(super) fn pageout_batch(&self) -> bool {
        self.pageout_batch
    }

    /// Adds a NUMA node with memory and no CPUs.
    pub(super) fn add_cpuless_node(&mut self) {
        self.cpuless_nodes += 1;
    }

    /// Returns the NUMA nodes with memory and no CPUs.
    pub(super) fn cpuless_nodes(&self) -> usize {
        self.cpuless_nodes
    }

    /// Makes the cgroup charge the page cache (and its reclaim reclaim it).
    pub(super) fn charge_page_cache(&mut self) {
        self.file_charge = true;
    }

    /// Returns whether the cgroup charges the page cache.
    pub(super) fn charges_page_cache(&self) -> bool {
        self.file_charge
    }

    /// `pageout`: writes `pages` pages to the swap device from `now`; returns
    /// when the writing CPU goes on.
    pub(super) fn swap_out(&mut self, now: u64, pages: u64) -> u64 {
        self.swap.write(now, pages, self.anon_fill)
    }

    /// A swap-in: reads `pages` pages from the swap device from `now`;
    /// returns when they are in memory.
    pub(super) fn swap_in(&mut self, now: u64, pages: u64) -> u64 {
        self.swap.read(now, pages, self.anon_fill)
    }

    /// Says what the workload's anonymous pages hold ([`Sim::set_anon_fill`]).
    ///
    /// [`Sim::set_anon_fill`]: super::Sim::set_anon_fill
    pub(super) fn set_anon_fill(&mut self, fill: Fill) {
        self.anon_fill = fill;
    }

    /// Marks page `va` of the address space with unique id `uid` as under
    /// migration: unmapped at `at` (its PTE a migration entry in Linux) and
    /// mapped again at `until`.
    pub(super) fn mark_migrating(&mut self, uid: u32, va: u64, at: u64, until: u64) {
        self.migrating.insert((uid, va), (at, until));
    }

    /// Forgets every page under migration that is mapped again by `now`.
    pub(super) fn forget_migrated(&mut self, now: u64) {
        self.migrating.retain(|_, (_, until)| *until > now);
    }

    /// Returns whether any page was marked under migration and not forgotten
    /// (a TLB miss then asks [`MemoryState::migration_of`]).
    #[inline]
    pub(super) fn any_migrating(&self) -> bool {
        !self.migrating.is_empty()
    }

    /// Returns, for page `page` (page-aligned) of the address space with unique
    /// id `uid` if it was marked under migration, when it was unmapped and
    /// when it is mapped again.
    pub(super) fn migration_of(&self, uid: u32, page: u64) -> Option<(u64, u64)> {
        self.migrating.get(&(uid, page)).copied()
    }

    /// Limits memory to `pages` 4 KB pages (at least [`SWAP_CLUSTER_MAX`]): a
    /// new cgroup, nothing charged.
    pub(super) fn set_mem_limit(&mut self, pages: u64) {
        self.memcg = Some(MemLimit { limit: pages.max(SWAP_CLUSTER_MAX), ..MemLimit::default() });
    }

    /// Returns whether memory is limited (there is a cgroup).
    pub(super) fn memcg_limited(&self) -> bool {
        self.memcg.is_some()
    }

    /// Returns whether charging `pages` more pages would take the cgroup over
    /// its limit (`try_charge` must reclaim first); `false` without a cgroup.
    pub(super) fn memcg_over(&self, pages: u64) -> bool {
        self.memcg.as_ref().is_some_and(|cg| cg.charged + pages > cg.limit)
    }

    /// Returns the pages charged to the cgroup, if there is one (for tests).
    #[cfg(test)]
    pub(super) fn memcg_charged(&self) -> Option<u64> {
        self.memcg.as_ref().map(|cg| cg.charged)
    }

    /// Returns whether folios are kept on an LRU for reclaim: there is a
    /// cgroup, or the nodes' memory is limited.
    pub(super) fn lru_kept(&self) -> bool {
        self.memcg.is_some() || !self.nodes.is_empty()
    }

    /// Returns the LRU of a folio whose first frame is on node `node`: the
    /// cgroup's if there is one, else that node's (the last node's for a
    /// node past them), `None` if no LRU is kept.
    pub(super) fn lru_of(&self, node: usize) -> Option<Lru> {
        if self.memcg.is_some() {
            return Some(Lru::Memcg);
        }
        let last = self.nodes.len().checked_sub(1)?;
        Some(Lru::Node(node.min(last)))
    }

    /// Returns the LRU a folio whose first frame is on node `node` joins
    /// ([`MemoryState::lru_of`]), if an LRU is kept.
    fn lru_mut(&mut self, node: usize) -> Option<&mut MemLimit> {
        match self.lru_of(node)? {
            Lru::Memcg => self.memcg.as_mut(),
            Lru::Node(n) => Some(&mut self.nodes[n].lru),
        }
    }

    /// Charges folio `f`, whose first frame is on node `node`, and puts it on
    /// its LRU's inactive list, if an LRU is kept.
    pub(super) fn memcg_charge(&mut self, f: LruFolio, node: usize) {
        if let Some(lru) = self.lru_mut(node) {
            lru.charge(f);
        }
    }

    /// Charges folio `f`, whose first frame is on node `node`, and puts it on
    /// its LRU's active list, if an LRU is kept.
    pub(super) fn memcg_activate(&mut self, f: LruFolio, node: usize) {
        if let Some(lru) = self.lru_mut(node) {
            lru.activate(f);
        }
    }

    /// Records that a migration moved the order-0 folio at `va` of `mm` to
    /// frame `pfn`: its LRU entry follows it.
    /// (On the nodes' LRUs it stays on its old node's, an approximation no
    /// workload with node memory meets: none migrates.)
    pub(super) fn memcg_moved(&mut self, mm: MmId, va: u64, pfn: u64) {
        let lrus = self.memcg.iter_mut().chain(self.nodes.iter_mut().map(|n| &mut n.lru));
        for cg in lrus {
            if let Some(f) =
                cg.lru.iter_mut().chain(cg.active.iter_mut()).find(|f| f.mm == mm && f.va == va && f.pages == 1)
            {
                f.pfn = pfn;
                return;
            }
        }
    }

    /// Lends LRU `lru` out, if it is kept, for reclaim to isolate folios from
    /// ([`MemLimit::isolate`]) while it looks at the rest of the machine;
    /// [`MemoryState::memcg_return`] gives it back. Memory counts as not
    /// limited meanwhile (a node's: as empty).
    pub(super) fn memcg_lend(&mut self, lru: Lru) -> Option<MemLimit> {
        match lru {
            Lru::Memcg => self.memcg.take(),
            Lru::Node(n) => self.nodes.get_mut(n).map(|node| std::mem::take(&mut node.lru)),
        }
    }

    /// Gives back LRU `lru`, which [`MemoryState::memcg_lend`] lent.
    pub(super) fn memcg_return(&mut self, lru: Lru, cg: MemLimit) {
        match lru {
            Lru::Memcg => self.memcg = Some(cg),
            Lru::Node(n) => self.nodes[n].lru = cg,
        }
    }

    /// Returns the folios on the cgroup's LRU (for tests).
    #[cfg(test)]
    pub(super) fn memcg_lru_len(&self) -> Option<usize> {
        self.memcg.as_ref().map(|cg| cg.lru.len() + cg.active.len())
    }

    /// Returns the counts of the cgroup's reclaim so far.
    pub(super) fn reclaim_stats(&self) -> ReclaimStats {
        self.reclaim
    }

    /// Counts a reclaim pass: a direct reclaim, or one of `kswapd`'s.
    pub(super) fn count_reclaim_pass(&mut self, by_kswapd: bool) {
        if by_kswapd {
            self.reclaim.kswapd_passes += 1;
        } else {
            self.reclaim.direct_reclaims += 1;
        }
    }

    /// Counts a wake-up of a node's `kswapd`.
    pub(super) fn count_kswapd_wake(&mut self) {
        self.reclaim.kswapd_wakes += 1;
    }

    /// Returns the pages reclaim has freed so far, anonymous and page cache.
    pub(super) fn reclaimed_pages(&self) -> u64 {
        self.reclaim.pages + self.reclaim.file_pages
    }

    /// Counts an anonymous folio of `pages` pages the cgroup's reclaim
    /// reclaimed.
    pub(super) fn count_anon_reclaimed(&mut self, pages: u64) {
        self.reclaim.folios += 1;
        self.reclaim.pages += pages;
    }

    /// Counts a TLB flush that completed file reclaim's unmaps.
    pub(super) fn count_file_flush(&mut self) {
        self.reclaim.file_flushes += 1;
    }

    /// Counts an anonymous folio reclaim kept (or activated) for its young PTEs.
    pub(super) fn count_anon_kept(&mut self) {
        self.reclaim.anon_kept += 1;
    }

    /// Counts a folio reclaim activated.
    pub(super) fn count_activated(&mut self) {
        self.reclaim.activated += 1;
    }

    /// Counts a folio the active list's aging returned to the inactive list.
    pub(super) fn count_deactivated(&mut self) {
        self.reclaim.deactivated += 1;
    }

    /// Counts a page-cache folio reclaim kept for its young PTEs.
    pub(super) fn count_file_kept(&mut self) {
        self.reclaim.file_kept += 1;
    }

    /// Counts a page-cache folio of `pages` pages the cgroup's reclaim
    /// reclaimed, `unmaps` present PTEs cleared for it.
    pub(super) fn count_file_reclaimed(&mut self, pages: u64, unmaps: u64) {
        self.reclaim.file_folios += 1;
        self.reclaim.file_pages += pages;
        self.reclaim.file_unmaps += unmaps;
    }
}
