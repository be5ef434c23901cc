//! The machine's memory as NUMA nodes with their watermarks, and `kswapd`,
//! one kernel thread per node, which reclaims a node that allocations took
//! below its low watermark until it is above its high one: how Linux relieves
//! memory pressure on a machine, where a memory cgroup's limit
//! (`sim/memcg.rs`) is reclaimed by the faulting thread alone.
//!
//! # Design
//! A workload whose pressure is the machine's memory
//! ([`Sim::set_machine_memory`]) splits it evenly among the nodes its CPUs are
//! on. Each node keeps an LRU of its own ([`NodeMem`], a [`MemLimit`] whose
//! limit is the node's managed pages); a folio joins the LRU of the node its
//! first frame is on (its allocating CPU's node), and a node's free pages are
//! its managed pages less those on its LRU. The allocator's checks before a
//! fault maps new memory ([`Sim::node_alloc`]), and `kswapd`'s loop
//! ([`Sim::kswapd_run`]), read those counts against the node's watermarks.
//! Reclaim itself is the cgroup's pass ([`Sim::shrink`]: isolation of
//! [`SWAP_CLUSTER_MAX`] pages from the LRU's head, aging, unmap with
//! `TTU_BATCH_FLUSH`, the pass's `try_to_unmap_flush`), run by whichever
//! thread reclaims, on the CPU it runs on.
//!
//! # What the simulated kernel does (Linux v6.x, `mm/page_alloc.c`, `mm/vmscan.c`)
//! - **Watermarks** ([`watermarks`]): `calculate_min_free_kbytes` sets
//!   `min_free_kbytes` to the integer square root of 16 times the low memory
//!   in KB, clamped to 128 KB .. 256 MB; `__setup_per_zone_wmarks` gives each
//!   zone its share of those pages in proportion to its managed pages as its
//!   min watermark, and low and high at min plus one and two steps of
//!   `max(min / 4, managed * watermark_scale_factor / 10000)`
//!   (`watermark_scale_factor` 10, from v4.6's "mm: scale kswapd watermarks
//!   in proportion to memory"; before it the step was `min / 4` for low and
//!   `min / 2` for high).
//! - **An allocation** (`__alloc_pages`): the fast path
//!   (`get_page_from_freelist` with `ALLOC_WMARK_LOW`) takes pages while the
//!   node stays at or above low after it (`zone_watermark_ok`: free pages less
//!   the allocation's, less one, above the mark). Otherwise the slow path
//!   (`__alloc_pages_slowpath`) wakes the node's `kswapd`
//!   (`wake_all_kswapds` → `wakeup_kswapd`: only a sleeping one, and only
//!   while the node is not balanced) and tries again against min
//!   (`ALLOC_WMARK_MIN`); below min the allocating thread reclaims itself
//!   (`__alloc_pages_direct_reclaim` → `try_to_free_pages`, a pass of
//!   `SWAP_CLUSTER_MAX`) until the allocation fits above min, at most
//!   `MAX_RECLAIM_RETRIES` passes.
//! - **`kswapd`** (`kswapd` → `balance_pgdat` → `kswapd_shrink_node` →
//!   `shrink_node`): woken, it reclaims its node one pass of
//!   `SWAP_CLUSTER_MAX` at a time, the same `shrink_inactive_list` and
//!   `shrink_folio_list` as direct reclaim (so the unmaps' flushes are
//!   deferred and sent from its CPU at the pass's end, x86's
//!   `arch_tlbbatch_should_defer` and `arch_tlbbatch_flush` as modelled in
//!   `sim/reclaim.rs`), until the node is balanced (`pgdat_balanced`: free
//!   pages above high), then sleeps (`kswapd_try_to_sleep`). Each pass is one
//!   event of its thread, which the scheduler runs on a CPU as any thread
//!   (`cond_resched` between passes), its time kernel time there. After
//!   `MAX_RECLAIM_RETRIES` passes in a row that found nothing to reclaim it
//!   sleeps and is not woken (`kswapd_failures`, which Linux counts per
//!   `balance_pgdat` that freed nothing) until a pass on the node, its own
//!   or a direct one, frees pages.
//!
//! # Simplified
//! - `kswapd_try_to_sleep`'s short sleep (`HZ / 10`, after which it checks
//!   again that the node is still balanced before sleeping for good) is left
//!   out: a balanced `kswapd` sleeps at once.
//! - One zone per node, and no fallback: an allocation takes its pages from
//!   its CPU's node, and reclaim (direct and `kswapd`) from that node's LRU,
//!   where Linux's zone list would take them from another node first, and
//!   wake the nodes' `kswapd`s only when every node is below low. In a
//!   workload spread evenly over the nodes the nodes fill together.
//! - Only folios on the LRU (anonymous and page cache) count against a node's
//!   memory: page tables and the kernel's own allocations do not; freed
//!   folios leave the count when reclaim next finds them (`sim/memcg.rs`).
//!   No fragmentation: an allocation of 16 pages needs 16 free pages.
//! - `kswapd`'s thread may run on any CPU (Linux binds it to its node's).
//!   Its wake-up is [`Sim::wake`]'s (placement, IPI, the waker's line), the
//!   wait queue's lock not charged; `balance_pgdat`'s priority loop, its
//!   `sc.nr_to_reclaim` of the high watermark (reclaim stops at balance
//!   here) and the watermark boost are not modelled.
//! - No cgroup limits the tasks: they stay in the cgroup the preset's kernel
//!   runs them in (`memcg_depth`), charged as before, where the cgroup stand-in
//!   moved tasks of the root cgroup into one below it. A memory cgroup's limit
//!   ([`Sim::set_mem_limit`]) stays reclaimed directly, with no `kswapd`, as
//!   Linux's `try_charge` does.
//! - FreeBSD's page daemon is not modelled: on a FreeBSD preset, and with
//!   `--set kswapd=off`, the machine's memory is the cgroup limit as before.

use super::memcg::MAX_RECLAIM_RETRIES;
use super::memory::{Lru, MemLimit};
use super::*;
use crate::preset::Kernel;
use crate::toggle::KSWAPD;

/// A zone's watermarks, in 4 KB pages (`_watermark[WMARK_MIN|LOW|HIGH]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Watermarks {
    /// Below it only reclaim lets an allocation through.
    pub min: u64,
    /// Below it an allocation wakes `kswapd`.
    pub low: u64,
    /// `kswapd` reclaims until free pages are above it.
    pub high: u64,
}

/// `watermark_scale_factor`'s default (`mm/page_alloc.c`): 10 ten-thousandths.
const WATERMARK_SCALE_FACTOR: u64 = 10;

/// Returns the watermarks of zones of `managed` pages each (4 KB pages, all
/// of them low memory, as on a 64-bit machine), as `calculate_min_free_kbytes`
/// and `__setup_per_zone_wmarks` compute them; `scale_factor`: whether the
/// kernel has `watermark_scale_factor` (v4.6 on). See the module
/// documentation.
pub fn watermarks(managed: &[u64], scale_factor: bool) -> Vec<Watermarks> {
    let lowmem_pages: u64 = managed.iter().sum();
    let min_free_kbytes = (lowmem_pages * 4 * 16).isqrt().clamp(128, 262_144);
    let pages_min = min_free_kbytes / 4;
    managed
        .iter()
        .map(|&m| {
            let min = (pages_min * m).checked_div(lowmem_pages).unwrap_or(0);
            let (low, high) = if scale_factor {
                let step = (min / 4).max(m * WATERMARK_SCALE_FACTOR / 10_000);
                (min + step, min + 2 * step)
            } else {
                (min + min / 4, min + min / 2)
            };
            Watermarks { min, low, high }
        })
        .collect()
}

/// A NUMA node's memory: its LRU, its watermarks and its `kswapd`.
#[derive(Debug)]
pub(super) struct NodeMem {
    /// Its LRU; the limit is the node's managed pages, the charge the pages
    /// on the LRU.
    pub(super) lru: MemLimit,
    /// Its watermarks.
    pub(super) wmark: Watermarks,
    /// Its `kswapd`'s thread.
    pub(super) kswapd: usize,
    /// Whether `kswapd` sleeps (on `pgdat->kswapd_wait`): a wake-up finds it there.
    pub(super) asleep: bool,
    /// Passes in a row that freed nothing (`kswapd_failures`).
    pub(super) failures: u32,
}

impl NodeMem {
    /// Returns its free pages: managed pages not on the LRU.
    pub(super) fn free(&self) -> u64 {
        self.lru.limit.saturating_sub(self.lru.charged)
    }

    /// `zone_watermark_ok` for an allocation of `nr` pages against `mark`:
    /// whether the free pages less `nr - 1` are above it.
    pub(super) fn watermark_ok(&self, nr: u64, mark: u64) -> bool {
        self.free() + 1 > mark + nr
    }

    /// `pgdat_balanced` (order 0): whether the free pages are above high.
    pub(super) fn balanced(&self) -> bool {
        self.watermark_ok(1, self.wmark.high)
    }
}

/// `kswapd`'s program: never asked for an operation, since the kernel runs
/// its loop itself ([`Sim::kswapd_run`]); it would exit if it were.
struct Kswapd;

impl Program for Kswapd {
    fn next(&mut self, _: u64) -> Op {
        Op::Exit
    }
}

impl Sim {
    /// Sets the machine's memory to `pages` 4 KB pages, which the workload's
    /// memory (and, after [`Sim::set_file_charge`], its page cache) fills:
    /// split evenly among the NUMA nodes the run's CPUs are on, each with its
    /// watermarks and a sleeping `kswapd` thread (module documentation). With
    /// `--set kswapd=off`, and on a FreeBSD preset, a memory cgroup's limit
    /// of `pages` instead ([`Sim::set_mem_limit`]).
    pub fn set_machine_memory(&mut self, pages: u64) {
        let Kernel::Linux(major, minor) = self.cfg.preset.kernel else {
            return self.set_mem_limit(pages);
        };
        if !self.features().on(KSWAPD) {
            return self.set_mem_limit(pages);
        }
        let per = self.node_cpus();
        let n = self.cfg.ncpus.div_ceil(per).max(1) as u64;
        let pages = pages.max(SWAP_CLUSTER_MAX * n);
        let managed: Vec<u64> = (0..n).map(|i| pages * (i + 1) / n - pages * i / n).collect();
        let marks = watermarks(&managed, (major, minor) >= (4, 6));
        for (i, (m, w)) in managed.into_iter().zip(marks).enumerate() {
            let cpu = (i * per).min(self.cfg.ncpus - 1);
            let tid = self.new_thread(MmId::KERNEL, Box::new(Kswapd), cpu, false);
            self.scheduler.park_new(tid);
            let lru = MemLimit::with_limit(m);
            self.mem.nodes.push(NodeMem { lru, wmark: w, kswapd: tid, asleep: true, failures: 0 });
        }
    }

    /// Returns the watermarks of each node, when the machine's memory is the
    /// nodes' ([`Sim::set_machine_memory`]); empty otherwise.
    pub fn node_watermarks(&self) -> Vec<Watermarks> {
        self.mem.nodes.iter().map(|n| n.wmark).collect()
    }

    /// The page allocator's checks for `nr` pages that `cpu` allocates at
    /// `now` on its node (module documentation): below low, wakes the node's
    /// `kswapd`; below min, reclaims directly until the pages fit above it.
    /// Returns the time after it.
    pub(super) fn node_alloc(&mut self, cpu: usize, nr: u64, mut now: u64) -> u64 {
        let Some(Lru::Node(node)) = self.mem.lru_of(usize::from(self.cpu_node(cpu))) else {
            return now;
        };
        if self.mem.nodes[node].watermark_ok(nr, self.mem.nodes[node].wmark.low) {
            return now;
        }
        now = self.wakeup_kswapd(cpu, node, now);
        let mut tries = 0;
        while !self.mem.nodes[node].watermark_ok(nr, self.mem.nodes[node].wmark.min) && tries < MAX_RECLAIM_RETRIES {
            now = self.shrink_node(cpu, node, false, now);
            tries += 1;
        }
        now
    }

    /// `wakeup_kswapd` of `node` by `cpu` at `now`: a sleeping `kswapd` that
    /// has not given up is woken when the node is not balanced. Returns the
    /// waker's time after it.
    fn wakeup_kswapd(&mut self, cpu: usize, node: usize, now: u64) -> u64 {
        let n = &self.mem.nodes[node];
        if !n.asleep || n.failures >= MAX_RECLAIM_RETRIES || n.balanced() {
            return now;
        }
        let tid = n.kswapd;
        self.mem.nodes[node].asleep = false;
        self.mem.count_kswapd_wake();
        let now = self.kaccess(cpu, self.scheduler.thread(tid).tstruct(), now);
        self.wake(tid, cpu, now, false)
    }

    /// Returns the node whose `kswapd` thread `tid` is, if it is one.
    #[inline]
    pub(super) fn kswapd_of(&self, tid: usize) -> Option<usize> {
        if self.mem.nodes.is_empty() {
            return None;
        }
        self.mem.nodes.iter().position(|n| n.kswapd == tid)
    }

    /// One step of `node`'s `kswapd`, thread `tid` on `cpu` from `now`
    /// (module documentation): a reclaim pass while the node is not balanced,
    /// else sleep. Returns the time after it.
    pub(super) fn kswapd_run(&mut self, cpu: usize, tid: usize, node: usize, now: u64) -> u64 {
        let n = &self.mem.nodes[node];
        if n.balanced() || n.failures >= MAX_RECLAIM_RETRIES {
            // kswapd_try_to_sleep (its short premature-sleep check left out).
            self.mem.nodes[node].asleep = true;
            self.scheduler.sleep(cpu, tid, now);
            return now;
        }
        self.shrink_node(cpu, node, true, now)
    }

    /// One reclaim pass of `node` by `cpu` from `now`, by its `kswapd` or
    /// direct; keeps `kswapd_failures`: cleared by a pass that freed pages,
    /// counted by a `kswapd` pass that found nothing to isolate. Returns the
    /// time after it.
    fn shrink_node(&mut self, cpu: usize, node: usize, by_kswapd: bool, now: u64) -> u64 {
        let (pages, passes) = (self.mem.reclaimed_pages(), self.mem.reclaim_stats().kswapd_passes);
        let now = self.shrink(cpu, Lru::Node(node), by_kswapd, now);
        let freed = self.mem.reclaimed_pages() > pages;
        let isolated = self.mem.reclaim_stats().kswapd_passes > passes;
        let n = &mut self.mem.nodes[node];
        if freed {
            n.failures = 0;
        } else if by_kswapd && !isolated {
            n.failures += 1;
        }
        now
    }
}
