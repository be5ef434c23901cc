//! The kernel's other work on the memory paths: the locks, shared counters and
//! memory bandwidth that a fault, an `mmap`, a `munmap` or an `madvise` share
//! with every other CPU doing the same, besides the TLB work the policy does.
//!
//! Each piece is Linux's (v4.14 to v6.18; where the version matters the
//! preset's [`Kernel`] decides), on [`crate::coherence`]'s lines and
//! [`crate::locks`]' locks:
//! - **`mmap_lock`**: faults take it for reading, `mmap`, `mprotect` and
//!   `fork` for writing, `munmap` for writing while it detaches the VMAs and
//!   then for reading while it zaps (`mmap_write_downgrade`, v4.20), and
//!   `madvise(MADV_DONTNEED|MADV_PAGEOUT)` for reading. A fault tries
//!   `mmap_read_trylock` first, a `cmpxchg` loop that loads the count before
//!   its first exchange up to v5.1 and from v5.16 (v5.2 to v5.15 guess the
//!   unlocked value): a second move of the line where another CPU wrote it
//!   last ([`RwSem::down_read_cmpxchg`]); FreeBSD's `sx_slock` and
//!   `sx_sunlock` load the lock word first in every release. From v6.4 a fault
//!   takes only its VMA's lock (`lock_vma_under_rcu`: a `down_read_trylock`,
//!   from v6.15 a reference's `cmpxchg` loop, each loading the word first,
//!   and an `up_read` on the VMA's lock word), and falls back to `mmap_lock`
//!   while a writer holds it, for an anonymous VMA without an `anon_vma`
//!   yet (its first fault) and for the file faults its kernel does not
//!   serve under the VMA's lock ([`Sim::vma_lock_try`]; counted as
//!   `/proc/vmstat` counts them, [`VmaLockStats`]). FreeBSD's `vm_fault` holds its map's lock
//!   (`vm_map_lock_read`) only for the lookup.
//! - **`mmap_lock`'s owner word**: a Linux rwsem's taker writes its owner
//!   word after the count's atomic (a writer its task, `rwsem_set_owner`; a
//!   reader its task with the reader bit, `rwsem_set_reader_owned`: every
//!   reader after v4.19, only the first after a writer before), and a
//!   writer's release empties it (`rwsem_clear_owner`). Where `struct
//!   mm_struct` puts the count, the owner word, `pgd` and `mm_lock_seq`
//!   is the release's ([`crate::mm_layout`]): the owner word on the count's
//!   line rides on its atomic, on a line of its own it moves that line too
//!   where the others took it. A VMA's lock keeps both words on one line (a 40-byte
//!   `struct vma_lock` of its own, v6.4 to v6.14, whose owner word starts
//!   the next line in one object of eight, left out; a reference count in
//!   the VMA, with no owner word, from v6.15): its owner store is a hit, not
//!   charged. A fault under per-VMA locks reads `mm->mm_lock_seq`
//!   (`vma_start_read`): after another CPU took `mmap_lock`, that read
//!   brings its line back (the owner word's in v6.4 to v6.8 and from v6.13,
//!   one of its own with `mmlist` in v6.9 to v6.12).
//! - **`pgd`**: a fault reads `mm->pgd` to start its walk of the page
//!   tables (`pgd_offset` in `__handle_mm_fault`), just after it took its
//!   lock. Where the release puts `pgd` on a line of `mmap_lock`'s words, a
//!   fault from user code that holds a lock (`mmap_lock` or its VMA's)
//!   stops there and reads it at its next event ([`Sim::fault`]), when the
//!   other CPUs' takes and releases before it are on the line; the read of
//!   a line this CPU still holds costs nothing beyond the fault path's own
//!   loads (`fault_path`).
//! - **The per-VMA lock switch** (`--set vma_locks=on|off`, [`crate::toggle::VMA_LOCKS`]):
//!   v6.4's series "Per-VMA locks" (Suren Baghdasaryan; "mm: introduce
//!   CONFIG_PER_VMA_LOCK", "mm: add per-VMA lock and helper functions to
//!   control it", "mm: introduce lock_vma_under_rcu to be used from
//!   arch-specific code", and the arch fault handlers "x86/mm: try VMA
//!   lock-based page fault handling first" and "arm64/mm: try VMA lock-based
//!   page fault handling first", all merged for v6.4). Before it,
//!   `do_user_addr_fault` (x86) and `do_page_fault` (arm64) take
//!   `mmap_lock` for reading (`mmap_read_trylock`, else `mmap_read_lock`) and
//!   `find_vma` for the whole fault; after it they first call `lock_vma_under_rcu(mm,
//!   address)` (a maple-tree walk under RCU, `vma_start_read`: the
//!   `vm_lock_seq` check and `down_read_trylock(&vma->vm_lock->lock)`),
//!   handle the fault with `FAULT_FLAG_VMA_LOCK` and `vma_end_read`, and fall
//!   back to `mmap_lock` when the VMA is write-locked (a writer holds
//!   `mmap_lock` and has marked it). The switch picks either path on any Linux
//!   preset; the default is the preset's kernel's. What the lock word costs is
//!   the same in both (an atomic to take, one to release): threads faulting on
//!   one VMA share its lock word as they share `mmap_lock`'s; only faults on
//!   different VMAs, and faults while `mmap`, `munmap` or `mprotect` hold
//!   `mmap_lock` for writing, differ. The one walk of the VMA tree every
//!   fault makes (`find_vma` or `lock_vma_under_rcu`'s) is in `fault_path`;
//!   a fault that falls back to `mmap_lock` walks it again in `find_vma`
//!   ([`VMA_WALK`]). The series as its v2 posted it (January 2023, `--set
//!   vma_locks_v2=on`) walked it again after each take to check the VMA was
//!   still there, and sent a single-threaded process's faults (`mm_users`
//!   of 1) to `mmap_lock`; its v3 replaced the walk with the VMA's
//!   `detached` flag and dropped the `mm_users` test.
//! - **Page allocation and freeing**: order-0 pages through per-CPU lists
//!   (`pcp`), refilled with `batch` pages ([`Kernel::pcp_batch`]) under the
//!   node's zone lock when empty (`rmqueue_bulk`), and drained by `batch` pages when a free takes a list
//!   above `high` (`free_pcppages_bulk`). A 64 KB folio (order 4) is above the
//!   orders the per-CPU lists keep (up to `PAGE_ALLOC_COSTLY_ORDER`, 3, and the
//!   pageblock order, since v5.13), so each takes the zone lock.
//! - **Zeroing and copying** a page costs the core `page_copy`, and the node's
//!   memory write bandwidth is shared: a node writes at most its share of the
//!   preset's `mem_bw_gbs` in each window of [`BW_WINDOW`] cycles, and a page
//!   that finds its window full is written in the next one with room. Many
//!   CPUs faulting at once therefore plateau at the memory's bandwidth.
//! - **LRU**: a new anonymous or file folio goes into a per-CPU batch
//!   (`folio_batch`, [`Kernel::lru_batch`] folios) that holds a reference on
//!   it, added to the node's LRU under its `lru_lock` when full or at once if
//!   large (`sim/lru_add.rs`); freed folios leave the LRU under the same
//!   lock, a batch at a time (`folios_put_refs`), and a page unmapped while
//!   still in a batch is freed at the batch's drain. Until v6.14 every zap
//!   (`madvise(MADV_DONTNEED)`, `munmap`, exit) first drains the zapping CPU's
//!   batch onto the LRU under that lock ([`Kernel::drains_lru_at_zap`]), so a
//!   loop that faults a page and zaps it takes the lock twice per page: to add
//!   the page, then to take it off; without the drain, twice per batch.
//! - **Pipes**: a read or write holds the pipe's mutex for its copy, so a
//!   pipe's reader and writer on two CPUs hand its line back and forth.
//! - **memcg**: pages are charged from a per-CPU stock, refilled
//!   [`Kernel::memcg_batch`] pages at a time by an atomic on each page
//!   counter from the tasks' cgroup up to the root's (`consume_stock`,
//!   `page_counter_try_charge`); a free uncharges a batch with one atomic on
//!   each (`uncharge_batch`, `page_counter_uncharge`). A task in the root
//!   cgroup is never charged. How deep the tasks' cgroup is: `--set
//!   memcg_depth`, by default the kernel's time's ([`Kernel::memcg_depth`]).
//!
//! What the CPU spends in the software of these paths (the allocator's list
//! handling, the LRU and memcg bookkeeping) is in the preset's `fault_path`,
//! `zap_page` and `zap_folio` as before; this adds what is shared: the lock
//! words' and counters' transfers, the waits for their holders, the time held,
//! and the memory's bandwidth. The figures: `docs/costs/kernel.md`.
//!
//! Not modelled: per-mm RSS counters (per-CPU since v6.2, cached per task
//! before: rarely shared); the `i_mmap` lock of file mappings; the anon_vma
//! lock; `high` auto-tuning (v6.7); compaction, and reclaim under a node's
//! memory pressure (the simulated machine never runs out of frames; a memory
//! cgroup's limit, `sim/memcg.rs`, is the one reclaim a fault runs).

use super::lru_add::LruAddBatches;
use super::*;
use crate::coherence::KLine;
use crate::locks::{Mutex, RwSem, SpinLock};
use crate::mm_layout::MmLayout;
use crate::preset::{Kernel, VmaLockFiles};
use crate::toggle::{Features, LRU_DRAIN, RWSEM_READER_SLEEP, VMA_LOCKS, VMA_LOCKS_V2};

/// What a fault or a copy allocated ([`Sim::kalloc_work`]).
#[derive(Clone, Copy, Debug)]
pub(super) enum NewFrame {
    /// An order-0 page, by frame.
    Page(u64),
    /// A 64 KB folio.
    Folio,
}

/// The length of one window of the memory-bandwidth budget, in cycles: short
/// beside a fault (a few thousand cycles), long beside one page's share of the
/// bandwidth (tens to hundreds of cycles), so that a window holds tens of pages.
pub const BW_WINDOW: u64 = 8192;

/// Windows of bandwidth remembered per node (8 million cycles, milliseconds
/// at any preset's clock); a page asked for before the oldest (an operation the
/// simulator runs very late) is placed from the oldest on.
const BW_WINDOWS: usize = 1024;

/// One of the kernel's software costs that rests on an estimate, as `tlbkit
/// validate` names it under a row whose runs spend at least 1% of their CPU
/// time in it.
#[derive(Clone, Copy, Debug)]
pub struct KernelEstimate {
    /// What it is.
    pub name: &'static str,
    /// Its value, in cycles.
    pub cycles: u64,
    /// The run metric that gives the cycles spent in it ([`super::EstimatedCycles`]).
    pub metric: &'static str,
    /// Where it comes from.
    pub why: &'static str,
}

/// The kernel's software costs that rest on estimates (`docs/costs/kernel.md`).
pub const KERNEL_ESTIMATES: &[KernelEstimate] = &[
    KernelEstimate {
        name: "zone-lock hold per page",
        cycles: ZONE_PAGE,
        metric: "zone_page_cycles",
        why: "a buddy list's link or unlink and counter updates on lines the holder mostly has, tens of instructions \
              (__rmqueue_smallest, __free_one_page); not measured",
    },
    KernelEstimate {
        name: "LRU-lock hold per folio",
        cycles: LRU_FOLIO,
        metric: "lru_folio_cycles",
        why: "lruvec_add_folio / lruvec_del_folio: list links, the LRU flag, the size counters; not measured",
    },
    KernelEstimate {
        name: "a further walk of the VMA tree",
        cycles: VMA_WALK,
        metric: "vma_walk_cycles",
        why: "mas_walk of a small process's two-level maple tree held in the L1, a few dependent loads and \
              compares a level; not measured",
    },
];

/// Cycles the zone lock is held per page moved between the buddy lists and a
/// per-CPU list (`__rmqueue_smallest` or `__free_one_page`: list and counter
/// updates on lines the holder mostly has). Estimate, `docs/costs/kernel.md`.
pub const ZONE_PAGE: u64 = 60;

/// Cycles the LRU lock is held per folio added or removed (list links, the
/// LRU flag, the lruvec's size counters). Estimate, `docs/costs/kernel.md`.
pub const LRU_FOLIO: u64 = 40;

/// Lines of the LRU list an LRU-lock hold follows one from another, each last
/// written by the previous holder: `lruvec_add_folio`'s `list_add` loads the
/// list head's `next` and then writes that folio's `prev`;
/// `lruvec_del_folio`'s `list_del` loads the folio's own links (rewritten by
/// whoever added a folio next to it since) and then writes its neighbours'
/// (`include/linux/mm_inline.h`, `include/linux/list.h`). Once one folio
/// of a batch has brought them, the batch's next folios find them here. The
/// lruvec's size counter, at an address known before the hold, is fetched
/// alongside and not counted.
pub const LRU_CHAIN_LINES: u32 = 2;

/// Cycles of one walk of an address space's VMA tree (`mas_walk` on
/// `mm->mm_mt`, under RCU): a small process's tree has two levels (a root of
/// up to 10 children, leaves of 16 ranges), and at each the walk loads the
/// node's pivots up to the first at or above the address, then the slot
/// below it; the nodes stay in the L1 (every fault of the process walks
/// them). The lookup a fault always makes (`find_vma`, or
/// `lock_vma_under_rcu`'s) is in the preset's `fault_path`; this is charged
/// for each further one ([`Sim::fault_lock`]). Estimate, `docs/costs/kernel.md`.
pub const VMA_WALK: u64 = 80;

/// What a fault finds when it tries its VMA's lock ([`Sim::vma_lock_try`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum VmaLockTry {
    /// It runs under the VMA's lock.
    Taken,
    /// `lock_vma_under_rcu` refuses it before taking the lock: it runs under
    /// `mmap_lock`.
    Refused,
    /// It takes the VMA's lock, then its handler gives it up
    /// (`VM_FAULT_RETRY`): it runs again under `mmap_lock`.
    Retried,
}

/// What a fault holds while it runs: its VMA's lock or `mmap_lock`.
#[derive(Clone, Copy, Debug)]
pub(super) enum FaultLock {
    /// The VMA's lock (Linux v6.4 and later), by the VMA's first page.
    Vma(u64),
    /// `mmap_lock` for reading, released at the end of the fault.
    Mmap,
    /// Nothing left to release (FreeBSD: the map lock was held for the lookup).
    None,
    /// Nothing yet: the fault found a writer holding `mmap_lock` and sleeps
    /// in its wait queue ([`Sim::mmap_read_fault`]).
    Asleep,
}

/// The shared state of the kernel's other work.
#[derive(Default)]
pub(super) struct KernelWork {
    /// Per address-space slot: its `mmap_lock`.
    mmap_locks: Vec<RwSem>,
    /// Per address-space slot: the readers asleep behind a writer asleep in
    /// its `mmap_lock`'s wait queue (`sim/mmap_writer.rs`).
    queued_readers: Vec<Vec<usize>>,
    /// Per pipe: its mutex (`pipe->mutex`).
    pipes: Vec<Mutex>,
    /// Per node: its zone lock and its LRU lock.
    zone: Vec<SpinLock>,
    lru_lock: Vec<SpinLock>,
    /// Per CPU: order-0 pages on its per-CPU list.
    pcp: Vec<u32>,
    /// Per CPU: its LRU-add batch (`sim/lru_add.rs`).
    pub(super) lru: LruAddBatches,
    /// Per CPU: pages charged ahead in its memcg stock.
    stock: Vec<u32>,
    /// Per node: the first window remembered and the pages written in each.
    bw: Vec<(u64, VecDeque<u32>)>,
    /// Pages a node writes in one window.
    bw_pages: u32,
    /// CPUs per node.
    cpus_per_node: usize,
    /// The kernel whose paths these are.
    kernel: Kernel,
    /// Where its `struct mm_struct` puts `mmap_lock`'s words, `pgd` and
    /// `mm_lock_seq` (Linux; FreeBSD's map lock is a word at offset 0).
    mm_layout: Option<MmLayout>,
    /// The run's kernel toggles: this work reads `vma_locks` (a Linux fault
    /// takes its VMA's lock), `vma_locks_v2` (the series' v2) and
    /// `lru_drain` (a zap first drains the CPU's LRU-add batch).
    features: Features,
    /// The memory-cgroup page counters a charge or an uncharge updates, one
    /// atomic each: none in the root cgroup (and on FreeBSD), else the
    /// tasks' cgroup's, each ancestor's and the root's
    /// ([`Kernel::memcg_depth`], `--set memcg_depth`).
    memcg_counters: u8,
}

/// The deepest cgroup `--set memcg_depth` takes.
pub const MEMCG_DEPTH_MAX: u32 = 16;

impl KernelWork {
    /// Returns whether the kernel puts `pgd` on a line of `mmap_lock`'s
    /// words ([`MmLayout::pgd_on_lock_line`]; never on FreeBSD).
    pub(super) fn pgd_on_lock_line(&self) -> bool {
        self.mm_layout.is_some_and(MmLayout::pgd_on_lock_line)
    }

    /// Returns the word of `mm`'s `struct mm_struct` that `word` picks from
    /// the kernel's layout (FreeBSD: its map lock's word for any).
    pub(super) fn mm_word(&self, mm: MmId, word: fn(MmLayout) -> u16) -> KLine {
        KLine::Mm(mm.index() as u32, self.mm_layout.map_or(0, word))
    }

    /// Returns whether a switch between two tasks without an mm hands the
    /// lent one on untouched ([`Kernel::hands_lazy_mm_on`]).
    pub(super) fn hands_lazy_mm_on(&self) -> bool {
        self.kernel.hands_lazy_mm_on()
    }

    /// Returns the line of `mm`'s `mm_count` where the kernel has one (Linux:
    /// the reference lazy-TLB CPUs take, `crate::mm_layout`); `None` on
    /// FreeBSD, whose context switch takes no reference on the vmspace.
    pub(super) fn mm_count_word(&self, mm: MmId) -> Option<KLine> {
        self.mm_layout.map(|l| KLine::Mm(mm.index() as u32, l.mm_count))
    }

    /// Returns the run's kernel toggles.
    pub(super) fn features(&self) -> Features {
        self.features
    }

    /// Returns the kernel whose paths these are.
    pub(super) fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// `tid` sleeps behind the writer asleep in `mm`'s `mmap_lock` wait
    /// queue, until that writer's release.
    pub(super) fn queue_reader(&mut self, mm: MmId, tid: usize) {
        let i = mm.index();
        if self.queued_readers.len() <= i {
            self.queued_readers.resize(i + 1, Vec::new());
        }
        self.queued_readers[i].push(tid);
    }

    /// Takes the readers asleep behind a writer in `mm`'s `mmap_lock` wait
    /// queue, in the order they queued.
    pub(super) fn take_queued_readers(&mut self, mm: MmId) -> Vec<usize> {
        self.queued_readers.get_mut(mm.index()).map(std::mem::take).unwrap_or_default()
    }

    /// Returns the folios a `folio_batch` holds in the kernel modelled
    /// ([`Kernel::lru_batch`]): the LRU-add batch's size, and reclaim's list
    /// of folios to free.
    pub(super) fn folio_batch(&self) -> usize {
        self.kernel.lru_batch() as usize
    }

    /// Returns the state of `ncpus` CPUs of `preset`, `cpus_per_node` to a node,
    /// with faults and zaps as the run's `features` say, its tasks
    /// `memcg_depth` cgroup levels below the root (`None`: as the preset's
    /// kernel does).
    pub(super) fn new(
        preset: &Preset,
        ncpus: usize,
        cpus_per_node: usize,
        memcg_depth: Option<u32>,
        features: Features,
    ) -> Self {
        let depth = match preset.kernel {
            Kernel::FreeBsd(_) => 0,
            Kernel::Linux(..) => memcg_depth.unwrap_or(preset.kernel.memcg_depth()),
        };
        let nodes = ncpus.div_ceil(cpus_per_node.max(1)).max(1);
        // A node's bandwidth in pages of 4 KB a window.
        let bytes_per_cycle = preset.mem_bw_gbs * MEM_BW_SUSTAINED / preset.freq_ghz;
        let bw_pages = ((bytes_per_cycle * BW_WINDOW as f64 / 4096.0) as u32).max(1);
        KernelWork {
            mmap_locks: Vec::new(),
            queued_readers: Vec::new(),
            pipes: Vec::new(),
            zone: vec![SpinLock::default(); nodes],
            lru_lock: vec![SpinLock::default(); nodes],
            pcp: vec![0; ncpus],
            lru: LruAddBatches::new(ncpus, matches!(preset.kernel, Kernel::Linux(..))),
            stock: vec![0; ncpus],
            bw: vec![(0, VecDeque::new()); nodes],
            bw_pages,
            cpus_per_node: cpus_per_node.max(1),
            kernel: preset.kernel,
            mm_layout: crate::mm_layout::layout(preset.kernel, preset.arch),
            features,
            memcg_counters: if depth == 0 { 0 } else { (depth.min(MEMCG_DEPTH_MAX) + 1) as u8 },
        }
    }

    /// Puts the tasks of a Linux run in the root cgroup into a cgroup of their
    /// own directly below it (depth 1: its counter and the root's): a memory
    /// limit ([`Sim::set_mem_limit`]) is a cgroup's, and the root has none.
    pub(super) fn leave_root_cgroup(&mut self) {
        if self.memcg_counters == 0 && matches!(self.kernel, Kernel::Linux(..)) {
            self.memcg_counters = 2;
        }
    }

    fn node(&self, cpu: usize) -> usize {
        cpu / self.cpus_per_node
    }

    pub(super) fn mmap_lock(&mut self, mm: MmId) -> &mut RwSem {
        let i = mm.index();
        if self.mmap_locks.len() <= i {
            self.mmap_locks.resize(i + 1, RwSem::default());
        }
        &mut self.mmap_locks[i]
    }

    /// Reserves the write of `pages` pages by `cpu` from `t` in its node's
    /// bandwidth; returns when the last of them can start.
    fn reserve_bandwidth(&mut self, cpu: usize, t: u64, pages: u32) -> u64 {
        let cap = self.bw_pages;
        let node = self.node(cpu);
        let (base, used) = &mut self.bw[node];
        let mut w = (t / BW_WINDOW).max(*base);
        let mut left = pages;
        let mut start = t;
        while left > 0 {
            let i = (w - *base) as usize;
            if i >= used.len() {
                used.resize(i + 1, 0);
            }
            let take = (cap - used[i].min(cap)).min(left);
            used[i] += take;
            left -= take;
            if take > 0 {
                start = start.max(w * BW_WINDOW);
            }
            w += 1;
        }
        while used.len() > BW_WINDOWS {
            used.pop_front();
            *base += 1;
        }
        start
    }
}

/// The share of a socket's peak memory bandwidth (channels times transfer
/// rate) that a stream of page writes sustains. Estimate: STREAM-class
/// benchmarks reach 70% to 80% of the peak on server parts
/// (`docs/costs/kernel.md`).
pub const MEM_BW_SUSTAINED: f64 = 0.7;

/// Cache lines of a 4 KB page (64-byte lines on every preset's CPU).
const LINES_PER_PAGE: u64 = 4096 / 64;

/// Returns the rate, in GB/s, at which `cpus` CPUs of one node of `preset`
/// zero pages together in the model: each at its `page_copy` per page, all of
/// them within the node's sustained bandwidth (what `write_pages` charges a
/// stream of zeroings).
pub fn zeroing_gbs(preset: &Preset, cpus: usize) -> f64 {
    let one = 4096.0 * preset.freq_ghz / preset.costs.kernel.page_copy.max(1) as f64;
    (one * cpus as f64).min(preset.mem_bw_gbs * MEM_BW_SUSTAINED)
}

impl Sim {
    /// Takes what a fault on `va` of `vma` in `mm` (a write if `write`)
    /// holds while it runs, for `cpu` from `now`; returns when it holds it.
    /// Under per-VMA locks (Linux) the VMA's lock unless a writer holds
    /// `mmap_lock` or [`Sim::vma_lock_try`] says no; `mmap_lock` then, where
    /// a fault from user code (`may_sleep`) may sleep instead
    /// ([`Sim::mmap_read_fault`]).
    pub(super) fn fault_lock(
        &mut self,
        cpu: usize,
        mm: MmId,
        (vma, va, write): (Vma, u64, bool),
        may_sleep: bool,
        now: u64,
    ) -> (u64, FaultLock) {
        let writer = self.kw.mmap_lock(mm).write_held_at(now);
        // The series' v2 sent a single-threaded process's faults to mmap_lock.
        let f = self.kw.features;
        let per_vma = f.on(VMA_LOCKS) && !(f.on(VMA_LOCKS_V2) && self.kern.mm(mm).users() <= 1);
        match self.kw.kernel {
            Kernel::FreeBsd(_) => {
                // vm_map_lookup under the map's shared lock, released at once.
                let t = self.mmap_lock(cpu, mm, false, now);
                (self.mmap_unlock(cpu, mm, false, t), FaultLock::None)
            }
            Kernel::Linux(..) if per_vma && writer => {
                // lock_vma_under_rcu finds the VMA write-locked (vma_start_read
                // fails) and gives up.
                self.stats.vma_lock.aborts += 1;
                self.fault_lock_fallback(cpu, mm, may_sleep, now)
            }
            Kernel::Linux(..) if per_vma => {
                let page = vma.start >> 12;
                let line = KLine::VmaLock(mm.index() as u32, page);
                let try_lock = self.vma_lock_try(vma, va, write);
                // vma_start_read compares the VMA's vm_lock_seq with
                // mm->mm_lock_seq, on the line the release puts it on: a
                // taker of mmap_lock since may have moved it away.
                let now = match try_lock {
                    VmaLockTry::Refused => now,
                    _ => self.m.kread(cpu, now, self.kw.mm_word(mm, |l| l.lock_seq), 0),
                };
                match try_lock {
                    VmaLockTry::Taken => {
                        let t = self.vma_read_trylock(cpu, line, now);
                        // The series' v2 checked that the VMA it locked was
                        // still in the tree by walking the tree again.
                        let t = if self.kw.features.on(VMA_LOCKS_V2) { self.vma_walk(t) } else { t };
                        (t, FaultLock::Vma(page))
                    }
                    VmaLockTry::Refused => {
                        self.stats.vma_lock.aborts += 1;
                        self.fault_lock_fallback(cpu, mm, may_sleep, now)
                    }
                    VmaLockTry::Retried => {
                        self.stats.vma_lock.retries += 1;
                        // The handler found it cannot finish under the VMA's
                        // lock: vma_end_read, VM_FAULT_RETRY, the fault again
                        // under mmap_lock.
                        let t = self.vma_read_trylock(cpu, line, now);
                        let t = self.m.katomic(cpu, t, line);
                        self.fault_lock_fallback(cpu, mm, may_sleep, t)
                    }
                }
            }
            _ => self.mmap_read_fault(cpu, mm, may_sleep, now),
        }
    }

    /// Takes `mm`'s `mmap_lock` for reading for a fault, for `cpu` from
    /// `now` ([`Sim::mmap_read_trylock`]); or, where a writer holds it, the
    /// fault is from user code (`may_sleep`) and the run's readers sleep
    /// ([`Sim::mmap_reader_sleeps`]), the reader's way into the wait
    /// queue: the failed trylock, `down_read`'s atomic add, which finds the
    /// writer, and in `rwsem_down_read_slowpath` the queue's `wait_lock` and
    /// the count's adjustment, each an atomic on the count's line (the
    /// wait lock shares it), the unlock a store; the caller puts the thread
    /// to sleep until the writer's release wakes it ([`FaultLock::Asleep`]).
    fn mmap_read_fault(&mut self, cpu: usize, mm: MmId, may_sleep: bool, now: u64) -> (u64, FaultLock) {
        if !(may_sleep && self.mmap_reader_sleeps(mm, now)) {
            return (self.mmap_read_trylock(cpu, mm, now), FaultLock::Mmap);
        }
        (self.mmap_lock_queue(cpu, mm, true, now), FaultLock::Asleep)
    }

    /// Returns whether a reader of `mm`'s `mmap_lock` asking at `now` goes
    /// to sleep in its wait queue: a writer holds it (or waits for it, its
    /// hold placed already) and the run's readers sleep (`--set
    /// rwsem_reader_sleep`, by default [`Kernel::rwsem_readers_sleep`]), or
    /// a writer sleeps in the queue ahead of it ([`Sim::writer_queued`]).
    pub(super) fn mmap_reader_sleeps(&mut self, mm: MmId, now: u64) -> bool {
        (self.kw.features.on(RWSEM_READER_SLEEP) && self.kw.mmap_lock(mm).write_held_at(now))
            || self.writer_queued(mm, now)
    }

    /// The way of a waiter for `mm`'s `mmap_lock` on `cpu` into its wait
    /// queue from `now`: a reader's behind the writer holding it, a fault's
    /// failed trylock first (`trylock`: its load or failed exchange,
    /// [`crate::preset::Kernel::read_trylock_loads_first`]), then three
    /// atomics on the count's line ([`Sim::mmap_read_fault`]); a writer's
    /// behind readers, the same three (`sim/mmap_writer.rs`). Returns when
    /// the waiter goes to sleep.
    pub(super) fn mmap_lock_queue(&mut self, cpu: usize, mm: MmId, trylock: bool, now: u64) -> u64 {
        let line = self.kw.mm_word(mm, |l| l.count);
        let mut t = match (trylock, self.kw.kernel.read_trylock_loads_first()) {
            (false, _) => now,
            (true, true) => self.m.kread(cpu, now, line, 0),
            (true, false) => self.m.katomic(cpu, now, line),
        };
        for _ in 0..3 {
            t = self.m.katomic(cpu, t, line);
        }
        t
    }

    /// Takes a VMA's lock on `line` for reading, for `cpu` from `now`:
    /// `vma_start_read`'s `down_read_trylock` (v6.4 to v6.14) or its
    /// reference's `__refcount_inc_not_zero_limited_acquire` (v6.15 on),
    /// each a load of the word, then a compare-and-exchange loop. Returns
    /// when it holds it.
    fn vma_read_trylock(&mut self, cpu: usize, line: KLine, now: u64) -> u64 {
        if self.kw.kernel.read_trylock_loads_first() {
            self.m.kload_cmpxchg(cpu, now, line)
        } else {
            self.m.katomic(cpu, now, line)
        }
    }

    /// Takes `mm`'s `mmap_lock` for reading for a page fault, for `cpu` from
    /// `now`: `do_user_addr_fault` (x86) and `do_page_fault` (arm64) try
    /// `mmap_read_trylock` first, and `mmap_read_lock` only when that fails
    /// (a writer holds it); from v6.5 `lock_mm_and_find_vma`'s
    /// `get_mmap_lock_carefully` does the same. Returns when it holds it.
    fn mmap_read_trylock(&mut self, cpu: usize, mm: MmId, now: u64) -> u64 {
        let line = self.kw.mm_word(mm, |l| l.count);
        let loads_first = self.kw.kernel.read_trylock_loads_first();
        let t = self.kw.mmap_lock(mm).down_read_cmpxchg(&mut self.m, cpu, line, now, loads_first);
        self.mmap_lock_owner(cpu, mm, false, t)
    }

    /// Takes `mmap_lock` for a fault that tried its VMA's lock first and
    /// gave it up, for `cpu` from `now`: `find_vma` walks again the VMA tree
    /// `lock_vma_under_rcu` walked ([`VMA_WALK`]). The walk is charged before
    /// the lock; the kernel makes it holding the lock for reading
    /// (`lock_mm_and_find_vma` from v6.5), a read hold that much longer.
    fn fault_lock_fallback(&mut self, cpu: usize, mm: MmId, may_sleep: bool, now: u64) -> (u64, FaultLock) {
        let now = self.vma_walk(now);
        self.mmap_read_fault(cpu, mm, may_sleep, now)
    }

    /// A further walk of a VMA tree from `now` ([`VMA_WALK`]); returns its end.
    fn vma_walk(&mut self, now: u64) -> u64 {
        self.stats.estimated.vma_walk_cycles += VMA_WALK;
        now + VMA_WALK
    }

    /// What a fault on `va` of `vma` (a write if `write`) finds under
    /// per-VMA locks: `lock_vma_under_rcu` refuses an anonymous VMA without
    /// an `anon_vma` ("mm: fall back to mmap_lock if vma->anon_vma is not
    /// yet set", v6.4; later kernels retry such a fault from
    /// `vmf_anon_prepare`, under `mmap_lock` alike) and, before v6.6, any
    /// file mapping; from v6.6 the file faults the kernel serves are
    /// [`Kernel::vma_lock_file_faults`]'s, the rest retried, and a
    /// copy-on-write of a private file mapping's page retries while the
    /// mapping has no `anon_vma` (`vmf_anon_prepare`, v6.7).
    fn vma_lock_try(&self, vma: Vma, va: u64, write: bool) -> VmaLockTry {
        let Some(file) = vma.file else {
            return if vma.anon_vma { VmaLockTry::Taken } else { VmaLockTry::Refused };
        };
        match self.kw.kernel.vma_lock_file_faults() {
            VmaLockFiles::None => VmaLockTry::Refused,
            VmaLockFiles::FaultAround => {
                if !write && self.mem.page_cache_frame(file, vma.file_page(va)).is_some() {
                    VmaLockTry::Taken
                } else {
                    VmaLockTry::Retried
                }
            }
            VmaLockFiles::All if write && vma.cow && !vma.anon_vma => VmaLockTry::Retried,
            VmaLockFiles::All => VmaLockTry::Taken,
        }
    }

    /// Releases what [`Sim::fault_lock`] took, at `now`; returns when `cpu` goes on.
    pub(super) fn fault_unlock(&mut self, cpu: usize, mm: MmId, held: FaultLock, now: u64) -> u64 {
        match held {
            // vma_end_read: the VMA lock's up_read, an atomic on its word.
            FaultLock::Vma(page) => self.m.katomic(cpu, now, KLine::VmaLock(mm.index() as u32, page)),
            FaultLock::Mmap => self.mmap_unlock(cpu, mm, false, now),
            FaultLock::None | FaultLock::Asleep => now,
        }
    }

    /// Takes `mm`'s `mmap_lock` for writing (`write`) or reading, for `cpu`
    /// from `now`; returns when it holds it. On Linux the taker then writes
    /// the owner word ([`Sim::mmap_lock_owner`]).
    pub(super) fn mmap_lock(&mut self, cpu: usize, mm: MmId, write: bool, now: u64) -> u64 {
        let line = self.kw.mm_word(mm, |l| l.count);
        let freebsd = matches!(self.kw.kernel, Kernel::FreeBsd(_));
        let loads_first = self.kw.kernel.read_trylock_loads_first();
        let sem = self.kw.mmap_lock(mm);
        let t = if write {
            sem.down_write(&mut self.m, cpu, line, now)
        } else if freebsd {
            // sx_slock: an atomic_fcmpset_acq_ptr loop, the lock word's load first.
            sem.down_read_cmpxchg(&mut self.m, cpu, line, now, loads_first)
        } else {
            sem.down_read(&mut self.m, cpu, line, now)
        };
        self.mmap_lock_owner(cpu, mm, write, t)
    }

    /// The owner word's store after `cpu` took `mm`'s `mmap_lock` at `now`
    /// (Linux only): a writer names itself (`rwsem_set_owner`), a reader
    /// leaves its task there as [`RwSem::reader_owns`] says
    /// (`rwsem_set_reader_owned`). The word is where the release puts it
    /// ([`crate::mm_layout`]), so a store may move its line too; the
    /// store is charged as an atomic, since the lock's next atomic waits for
    /// it to complete. Returns when `cpu` goes on.
    fn mmap_lock_owner(&mut self, cpu: usize, mm: MmId, write: bool, now: u64) -> u64 {
        let Kernel::Linux(..) = self.kw.kernel else { return now };
        let every = self.kw.kernel.rwsem_readers_write_owner();
        let sem = self.kw.mmap_lock(mm);
        let store = if write {
            sem.writer_owns();
            true
        } else {
            sem.reader_owns(every)
        };
        if store {
            self.m.katomic(cpu, now, self.kw.mm_word(mm, |l| l.owner))
        } else {
            now
        }
    }

    /// Turns `cpu`'s write hold of `mm`'s `mmap_lock` into a read hold at `now`
    /// (`downgrade_write`: the count's atomic, then the owner word says this
    /// reader).
    pub(super) fn mmap_downgrade(&mut self, cpu: usize, mm: MmId, now: u64) -> u64 {
        let line = self.kw.mm_word(mm, |l| l.count);
        let t = self.kw.mmap_lock(mm).downgrade(&mut self.m, cpu, line, now);
        self.mmap_lock_owner(cpu, mm, false, t)
    }

    /// Releases `mm`'s `mmap_lock` held for writing (`write`: on Linux
    /// `rwsem_clear_owner` empties the owner word first) or reading (the
    /// owner word untouched).
    pub(super) fn mmap_unlock(&mut self, cpu: usize, mm: MmId, write: bool, mut now: u64) -> u64 {
        let line = self.kw.mm_word(mm, |l| l.count);
        if write && matches!(self.kw.kernel, Kernel::Linux(..)) {
            now = self.m.katomic(cpu, now, self.kw.mm_word(mm, |l| l.owner));
        }
        let freebsd = matches!(self.kw.kernel, Kernel::FreeBsd(_));
        let sem = self.kw.mmap_lock(mm);
        if write {
            sem.up_write(&mut self.m, cpu, line, now)
        } else if freebsd {
            // sx_sunlock: the lock word's load, then atomic_fcmpset_rel_ptr.
            sem.up_read_cmpxchg(&mut self.m, cpu, line, now)
        } else {
            sem.up_read(&mut self.m, cpu, line, now)
        }
    }

    /// The kernel work of allocating `new`, an order-0 page or one 64 KB
    /// folio, for `cpu` from `now`: the per-CPU list or the zone lock, the
    /// memcg charge and the LRU add. Returns when it is done.
    pub(super) fn kalloc_work(&mut self, cpu: usize, new: NewFrame, mut now: u64) -> u64 {
        let (pages, page) = match new {
            NewFrame::Page(pfn) => (1, Some(pfn)),
            NewFrame::Folio => (crate::frames::FOLIO_PAGES as u32, None),
        };
        if page.is_none() {
            now = self.zone_hold(cpu, now, 1);
        } else if self.kw.pcp[cpu] >= pages {
            self.kw.pcp[cpu] -= pages;
        } else {
            // rmqueue_bulk: a batch (or what this needs, if more) under the zone lock.
            let take = self.kw.kernel.pcp_batch().max(pages);
            now = self.zone_hold(cpu, now, take);
            self.kw.pcp[cpu] += take - pages;
        }
        now = self.memcg_charge(cpu, pages, now);
        self.lru_add(cpu, page, now)
    }

    /// Drops one reference to each frame of `pfns`; returns how many order-0
    /// pages and how many 64 KB folios that freed, leaving out the pages an
    /// LRU-add batch still holds: their freeing waits for its drain
    /// (`sim/lru_add.rs`).
    pub(super) fn put_frames(&mut self, pfns: impl IntoIterator<Item = u64>) -> (u32, u32) {
        let (mut pages, mut folios) = (0, 0);
        for pfn in pfns {
            match self.frames.put(pfn, 0) {
                Freed::Page if self.kw.lru.orphan(pfn) => {}
                Freed::Page => pages += 1,
                Freed::Folio => folios += 1,
                Freed::Nothing => {}
            }
        }
        (pages, folios)
    }

    /// The kernel work of freeing the order-0 pages and 64 KB folios (`freed`,
    /// from [`Sim::put_frames`]) that `cpu` unmapped, from `now`: the LRU
    /// removal, the memcg uncharge and the return to the per-CPU list or the
    /// zone. Returns when it is done.
    pub(super) fn kfree_work(&mut self, cpu: usize, freed: (u32, u32), mut now: u64) -> u64 {
        let (pages, folios) = freed;
        if pages + folios == 0 {
            return now;
        }
        // folios_put_refs: the LRU lock once per batch of folios released.
        let batch = self.kw.kernel.lru_batch();
        let mut left = pages + folios;
        while left > 0 {
            let n = left.min(batch);
            now = self.lru_hold(cpu, now, n);
            left -= n;
        }
        // uncharge_batch: the lot off each page counter, one atomic each.
        now = self.memcg_counters(cpu, now);
        if folios > 0 {
            now = self.zone_hold(cpu, now, folios);
        }
        self.kw.pcp[cpu] += pages;
        let batch = self.kw.kernel.pcp_batch();
        while self.kw.pcp[cpu] > self.kw.kernel.pcp_high() {
            // free_pcppages_bulk: a batch back to the buddy lists.
            now = self.zone_hold(cpu, now, batch);
            self.kw.pcp[cpu] -= batch;
        }
        now
    }

    /// Runs `work` cycles of a read or write of pipe `pipe` on `cpu` from `now`
    /// under the pipe's mutex (`__pipe_lock`: Linux's `pipe_read` and
    /// `pipe_write` hold it for the whole copy; FreeBSD's `pipelock` is a sleep
    /// lock held the same way); returns when `cpu` goes on.
    pub(super) fn pipe_locked(&mut self, cpu: usize, pipe: u32, now: u64, work: u64) -> u64 {
        let i = pipe as usize;
        if self.kw.pipes.len() <= i {
            self.kw.pipes.resize(i + 1, Mutex::default());
        }
        self.kw.pipes[i].hold(&mut self.m, cpu, now, work)
    }

    /// Holds `cpu`'s node's zone lock from `now` while `blocks` pages or
    /// folios move between its buddy lists and the CPU.
    fn zone_hold(&mut self, cpu: usize, now: u64, blocks: u32) -> u64 {
        let node = self.kw.node(cpu);
        self.stats.estimated.zone_page_cycles += ZONE_PAGE * u64::from(blocks);
        self.kw.zone[node].hold(&mut self.m, cpu, now, ZONE_PAGE * u64::from(blocks))
    }

    /// Holds `cpu`'s node's LRU lock from `now` while `folios` folios join or
    /// leave its lists, the list's links coming from the previous holder
    /// ([`LRU_CHAIN_LINES`]).
    pub(super) fn lru_hold(&mut self, cpu: usize, now: u64, folios: u32) -> u64 {
        let node = self.kw.node(cpu);
        self.stats.estimated.lru_folio_cycles += LRU_FOLIO * u64::from(folios);
        self.kw.lru_lock[node].hold_data(&mut self.m, cpu, now, LRU_FOLIO * u64::from(folios), LRU_CHAIN_LINES)
    }

    /// Charges `pages` to the memory cgroup from `cpu`'s stock, refilling it
    /// with one atomic on each page counter when short (`try_charge_memcg`:
    /// `consume_stock`, else `page_counter_try_charge` of a batch). Nothing in
    /// the root cgroup.
    fn memcg_charge(&mut self, cpu: usize, pages: u32, now: u64) -> u64 {
        if self.kw.memcg_counters == 0 {
            return now;
        }
        if self.kw.stock[cpu] >= pages {
            self.kw.stock[cpu] -= pages;
            return now;
        }
        let batch = self.kw.kernel.memcg_batch().max(pages);
        self.kw.stock[cpu] += batch - pages;
        self.memcg_counters(cpu, now)
    }

    /// One atomic by `cpu` from `now` on each page counter a charge or an
    /// uncharge walks, the tasks' cgroup's first and the root's last, each
    /// after the one before (`atomic_long_add_return` and
    /// `atomic_long_sub_return` are full barriers on x86 and arm64).
    fn memcg_counters(&mut self, cpu: usize, mut now: u64) -> u64 {
        for level in 0..self.kw.memcg_counters {
            now = self.m.katomic(cpu, now, KLine::MemcgCounter(level));
        }
        now
    }

    /// `lru_add_drain()` at the start of a zap on `cpu` at `now`, where the
    /// kernel has it ([`Kernel::drains_lru_at_zap`], `--set lru_drain`): the
    /// folios waiting in the CPU's LRU-add batch join the node's LRU under its
    /// lock, whatever their number, and the pages only the batch still held
    /// are freed ([`Sim::lru_drain`]). Returns when `cpu` goes on.
    pub(super) fn lru_drain_at_zap(&mut self, cpu: usize, now: u64) -> u64 {
        if !self.kw.features.on(LRU_DRAIN) {
            return now;
        }
        self.lru_drain(cpu, now)
    }

    /// Zeroes `pages` pages on `cpu` from `now` (`from` `None`), or copies them
    /// from pages on NUMA node `from`: the core's `page_copy` each, within its
    /// node's memory bandwidth (a copy writes one page and reads another: twice
    /// the traffic). A copy from another node's memory than `cpu`'s also waits
    /// for each line's trip there: `mem_remote_extra` per line, `mlp` lines in
    /// flight at once (Little's law; the copy's loads are independent). The
    /// pages written are charged as local wherever they lie: the copy and the
    /// clear write whole lines (`rep movs`, `rep stos`), and a store waits for
    /// nothing the next one needs. Returns when it is done.
    pub(super) fn write_pages(&mut self, cpu: usize, pages: u64, from: Option<u8>, now: u64) -> u64 {
        let traffic = (pages * if from.is_some() { 2 } else { 1 }) as u32;
        let last = self.kw.reserve_bandwidth(cpu, now, traffic);
        let c = self.m.costs;
        let mut each = c.kernel.page_copy;
        if from.is_some_and(|n| n != self.cpu_node(cpu)) {
            each += (LINES_PER_PAGE * c.lines.mem_remote_extra).div_ceil(c.mlp.max(1));
        }
        (now + each * pages).max(last + each)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preset;
    use tlbkit_policy::asid::LinuxArm64;

    /// A thread that maps `pages` pages of its own and writes each once.
    #[derive(Clone)]
    struct Toucher {
        pages: u64,
        step: u32,
    }

    impl Program for Toucher {
        fn next(&mut self, ret: u64) -> Op {
            self.step += 1;
            match self.step {
                1 => Op::Sys(Sys::Mmap { pages: self.pages, write: true }),
                2 => Op::Touch { va: ret, pages: self.pages, write: true },
                _ => Op::Exit,
            }
        }
    }

    /// A process whose `threads` threads, one bound to each CPU, each run a
    /// copy of `own` (the first thread's own, once it has started the others).
    struct Starter<T> {
        threads: usize,
        own: T,
        started: usize,
    }

    impl<T: Program + Clone + 'static> Program for Starter<T> {
        fn next(&mut self, ret: u64) -> Op {
            if self.started + 1 < self.threads {
                self.started += 1;
                return Op::Sys(Sys::CloneOn(self.started, Box::new(self.own.clone())));
            }
            self.own.next(ret)
        }
    }

    /// Runs `threads` threads of one process on an Altra changed by `change`,
    /// each faulting in `pages` pages of its own mapping; returns the cycles
    /// until the last is done and the cache-line transfers.
    fn fault_in(threads: usize, pages: u64, change: impl Fn(&mut Preset)) -> (u64, u64) {
        let sim = faulted(threads, pages, change);
        (sim.end, sim.m.counters.line_transfers)
    }

    /// [`fault_in`]'s machine after the run.
    fn faulted(threads: usize, pages: u64, change: impl Fn(&mut Preset)) -> Sim {
        let mut p = preset::named("altra");
        change(&mut p);
        let cfg = SimConfig { max_mms: 4, ..SimConfig::quiet(p, threads, 1) };
        let mut sim = Sim::new(cfg, LinuxArm64::new(threads, 4, 16, false).unwrap());
        sim.spawn(Box::new(Starter { threads, own: Toucher { pages, step: 0 }, started: 0 })).unwrap();
        sim.run();
        assert!(sim.error.is_none(), "{:?}", sim.error);
        assert_eq!(sim.stats.mmu.page_faults, threads as u64 * pages);
        sim
    }

    #[test]
    fn the_per_cpu_lists_move_31_pages_at_a_time_before_v4_19_and_63_after() {
        assert_eq!((Kernel::Linux(4, 18).pcp_batch(), Kernel::Linux(4, 19).pcp_batch()), (31, 63));
        assert_eq!((Kernel::Linux(4, 9).pcp_high(), Kernel::Linux(6, 9).pcp_high()), (186, 378));
        // One thread's 40 faults take two refills of 31 or one of 63, and its exit
        // gives the 40 pages back: the list ends with the refills whole.
        for (kernel, refilled) in [(Kernel::Linux(4, 18), 62), (Kernel::Linux(6, 9), 63)] {
            let left = faulted(1, 40, |p| p.kernel = kernel).kw.pcp[0];
            assert_eq!(left, refilled, "{kernel:?}");
        }
    }

    #[test]
    fn faults_on_their_own_vmas_share_mmap_lock_before_per_vma_locks_and_nothing_after() {
        let (old, _) = fault_in(16, 64, |p| p.kernel = Kernel::Linux(5, 15));
        let (new, _) = fault_in(16, 64, |p| p.kernel = Kernel::Linux(6, 9));
        // Each fault's two atomics move mmap_lock's line from the other CPUs,
        // which take it in between: at least the cost of those moves over the
        // fault's own work. (Each fault here is about 5,000 cycles and a move
        // about 200: 1,024 faults over 16 CPUs, so 5% or more.)
        let moves = 2 * 64 * preset::named("altra").costs.lines.cacheline_transfer;
        assert!(old > new + moves, "faults under mmap_lock took {old} cycles, under VMA locks {new}");
        let (one_old, _) = fault_in(1, 64, |p| p.kernel = Kernel::Linux(5, 15));
        let (one_new, _) = fault_in(1, 64, |p| p.kernel = Kernel::Linux(6, 9));
        // Alone, either lock is a hit after its first use: v5.15 keeps
        // mmap_lock's words on one line on arm64; v6.9 brings the VMA's line
        // and mm_lock_seq's (a line of its own in v6.9) from memory once, and
        // the VMA's first fault, which lock_vma_under_rcu refuses, walks the
        // VMA tree twice. v6.9's trylocks load their word before the
        // exchange (v5.15's try the exchange first): a hit a take, and the
        // first take of each lock word a load and an exchange from memory.
        let c = preset::named("altra").costs;
        let first_use = 4 * c.lines.cacheline_transfer + VMA_WALK + 64 * c.mem_access;
        assert!(one_old.abs_diff(one_new) <= first_use, "alone: {one_old} under mmap_lock, {one_new} under VMA locks");
    }

    #[test]
    fn a_faults_unlock_takes_mmap_locks_line_back_from_the_cpus_that_took_it_meanwhile() {
        // Sixteen CPUs fault on VMAs of their own: under per-VMA locks no line
        // of the lock is shared; under mmap_lock each fault's down_read and
        // up_read are two atomics on one line, and between them the other
        // CPUs' faults take it, so each moves it (Linux 5.15's rwsem).
        let faults = 16 * 64;
        let (_, shared) = fault_in(16, 64, |p| p.kernel = Kernel::Linux(5, 15));
        let (_, private) = fault_in(16, 64, |p| p.kernel = Kernel::Linux(6, 9));
        // With the up_read in the fault's own event (the line still this
        // CPU's whatever the others did meanwhile) the mmap_lock runs moved
        // fewer lines than the private ones; now more than one per fault.
        let per_fault = (shared as f64 - private as f64) / faults as f64;
        assert!(per_fault > 0.75, "mmap_lock's line moved {per_fault:.2} times per fault");
    }

    /// The line moves of `takes` read holds of one `mmap_lock`, taken and
    /// released by CPUs 0 and 1 in turn under `kernel` on machine `name`
    /// (arm64's Altra or x86-64's Ice Lake), with a write hold before them.
    fn read_holds(name: &str, kernel: Kernel, takes: u64) -> u64 {
        holds_taken(name, kernel, takes, |sim, cpu, mm, t| sim.mmap_lock(cpu, mm, false, t))
    }

    /// [`read_holds`] with each hold taken by `take` (by `cpu` on `mm` at `t`,
    /// returning when it holds it).
    fn holds_taken(name: &str, kernel: Kernel, takes: u64, take: impl Fn(&mut Sim, usize, MmId, u64) -> u64) -> u64 {
        let mut p = preset::named(name);
        p.kernel = kernel;
        let cfg = SimConfig::quiet(p.clone(), 2, 1);
        let mut sim = match p.arch {
            crate::preset::Arch::Arm64 => Sim::new(cfg, LinuxArm64::new(2, 4, 16, false).unwrap()),
            crate::preset::Arch::X86_64 => Sim::new(cfg, tlbkit_policy::asid::LinuxX86::new(2, 4, true)),
        };
        let mm = MmId(1);
        let mut t = sim.mmap_lock(0, mm, true, 0);
        t = sim.mmap_unlock(0, mm, true, t);
        let before = sim.m.counters.line_transfers;
        for i in 0..takes {
            let cpu = (i % 2) as usize;
            t = take(&mut sim, cpu, mm, t + 1000);
            t = sim.mmap_unlock(cpu, mm, false, t + 1000);
        }
        sim.m.counters.line_transfers - before
    }

    #[test]
    fn a_reader_of_mmap_lock_writes_its_owner_word_after_v4_19_which_moves_a_line_where_it_has_its_own() {
        // Each take after the first (on CPU 0, the writer's) moves the
        // count's line from the other CPU. On x86-64 the owner word has a
        // line of its own in v4.19 and v5.15, and after v4.19 every reader
        // leaves its task there, which moves that line too; v4.19's readers
        // write it once, after the writer, and CPU 0 has it then.
        let x86 = |kernel| read_holds("icx8358", kernel, 20);
        assert_eq!(x86(Kernel::Linux(4, 19)), 19, "x86-64 v4.19");
        assert_eq!(x86(Kernel::Linux(5, 15)), 2 * 19, "x86-64 v5.15");
        // v5.12 and v6.1 put it on the count's line: the store rides on the
        // count's atomic.
        assert_eq!(x86(Kernel::Linux(5, 12)), 19, "x86-64 v5.12");
        assert_eq!(x86(Kernel::Linux(6, 1)), 19, "x86-64 v6.1");
        // arm64 has it on the count's line from v5.3's rwsem on.
        assert_eq!(read_holds("altra", Kernel::Linux(5, 15), 20), 19, "arm64 v5.15");
        // FreeBSD's sx lock keeps no reader in an owner word; its sx_slock
        // loads the lock word before its atomic_fcmpset (a shared copy from
        // the other CPU, then the line for writing), and its sx_sunlock
        // loads it again (a hit).
        assert_eq!(read_holds("altra", Kernel::FreeBsd(13), 20), 2 * 19);
    }

    #[test]
    fn a_faults_trylock_of_mmap_lock_loads_the_count_first_to_v5_1_and_from_v5_16() {
        // CPUs 0 and 1 take mmap_lock in turn as a fault does, by
        // mmap_read_trylock: where the trylock loads the count before its
        // cmpxchg, the load brings a shared copy of the line from the other
        // CPU and the cmpxchg takes it for writing, two moves a take; v5.2 to
        // v5.15 try the cmpxchg first (one). arm64 keeps the owner word on
        // the count's line from v5.10; x86-64 v4.19 gives it a line of its
        // own, which only the first reader after the writer stores to.
        let trylock = |name, kernel| holds_taken(name, kernel, 20, |sim, cpu, mm, t| sim.mmap_read_trylock(cpu, mm, t));
        assert_eq!(trylock("altra", Kernel::Linux(5, 15)), 19, "arm64 v5.15");
        assert_eq!(trylock("altra", Kernel::Linux(5, 16)), 2 * 19, "arm64 v5.16");
        assert_eq!(trylock("altra", Kernel::Linux(6, 9)), 2 * 19, "arm64 v6.9");
        assert_eq!(trylock("icx8358", Kernel::Linux(4, 19)), 2 * 19, "x86-64 v4.19");
        assert_eq!(trylock("icx8358", Kernel::Linux(5, 12)), 19, "x86-64 v5.12");
        assert!(Kernel::Linux(5, 1).read_trylock_loads_first() && !Kernel::Linux(5, 2).read_trylock_loads_first());
    }

    #[test]
    fn a_fault_under_its_vmas_lock_reads_mm_lock_seq_on_the_line_mmap_locks_takers_write() {
        // x86-64 v6.13 puts mm_lock_seq on the owner word's line.
        let mut p = preset::named("icx8358");
        p.kernel = Kernel::Linux(6, 13);
        let mut sim = Sim::new(SimConfig::quiet(p, 2, 1), tlbkit_policy::asid::LinuxX86::new(2, 4, true));
        let mm = MmId(1);
        let vma = Vma { start: 0x10_0000, pages: 16, write: true, file: None, cow: false, pgoff: 0, anon_vma: true };
        let fault = |sim: &mut Sim, t: u64| {
            let (t, held) = sim.fault_lock(0, mm, (vma, vma.start, true), false, t);
            assert!(matches!(held, FaultLock::Vma(_)), "{held:?}");
            sim.fault_unlock(0, mm, held, t)
        };
        let t = fault(&mut sim, 0);
        // Again on the same CPU: the VMA lock's line and mm_lock_seq's are hits.
        let before = sim.m.counters.line_transfers;
        let t = fault(&mut sim, t + 100);
        assert_eq!(sim.m.counters.line_transfers, before);
        // CPU 1 takes mmap_lock to read (an madvise): its owner store takes
        // the line mm_lock_seq is on, which the next fault's read brings back.
        let t = sim.mmap_lock(1, mm, false, t + 100);
        let t = sim.mmap_unlock(1, mm, false, t);
        let before = sim.m.counters.line_transfers;
        fault(&mut sim, t + 100);
        assert_eq!(sim.m.counters.line_transfers - before, 1);
    }

    #[test]
    fn a_faults_read_of_pgd_brings_mmap_locks_line_back_where_the_release_puts_pgd_on_it() {
        // CPU 0 holds mmap_lock for reading; CPU 1 takes and releases it (a
        // fault of its own); then CPU 0's fault reads pgd.
        let read = |kernel| {
            let mut p = preset::named("icx8358");
            p.kernel = kernel;
            let mut sim = Sim::new(SimConfig::quiet(p, 2, 1), tlbkit_policy::asid::LinuxX86::new(2, 4, true));
            let mm = MmId(1);
            let t = sim.mmap_lock(0, mm, false, 0);
            let own = sim.fault_pgd(0, mm, t + 10) - (t + 10);
            let t = sim.mmap_lock(1, mm, false, t + 20);
            let t = sim.mmap_unlock(1, mm, false, t) + 10;
            let before = sim.m.counters.line_transfers;
            let taken = sim.fault_pgd(0, mm, t) - t;
            (own, taken, sim.m.counters.line_transfers - before)
        };
        // x86-64 v6.1 puts pgd on the count's line: the read brings the line
        // from CPU 1; while CPU 0 still has it, nothing beyond a hit.
        let c = preset::named("icx8358").costs;
        let (own, taken, moves) = read(Kernel::Linux(6, 1));
        assert_eq!((own, moves), (0, 1));
        assert_eq!(taken, c.lines.cacheline_transfer - c.mem_access, "one move within the socket, less the hit");
        // v6.13 puts it on a line no taker writes: never charged.
        assert_eq!(read(Kernel::Linux(6, 13)), (0, 0, 0));
    }

    #[test]
    fn a_second_walk_of_the_vma_tree_costs_a_fault_vma_walk() {
        // One CPU, nothing shared: the time to take a fault's lock, as a VMA
        // with (`anon`) or without an anon_vma finds it, in a process of
        // `users` threads, per-VMA locks as merged or as the series' v2.
        let take = |v2: bool, anon: bool, users: u32| {
            let mut p = preset::named("altra");
            p.kernel = Kernel::Linux(6, 9);
            let mut config = SimConfig::quiet(p, 1, 1);
            config.kernel = config.kernel.with(VMA_LOCKS_V2, v2);
            let mut sim = Sim::new(config, LinuxArm64::new(1, 4, 16, false).unwrap());
            let vma =
                Vma { start: 0x10_0000, pages: 16, write: true, file: None, cow: false, pgoff: 0, anon_vma: anon };
            let mm = MmId(sim.kern.take_slot(4).unwrap());
            for _ in 0..users {
                sim.kern.join(mm);
            }
            // Warm the lines: the first take of each brings it from memory.
            let (t, held) = sim.fault_lock(0, mm, (vma, vma.start, true), false, 0);
            let t = sim.fault_unlock(0, mm, held, t) + 100;
            let (done, held) = sim.fault_lock(0, mm, (vma, vma.start, true), false, t);
            (done - t, matches!(held, FaultLock::Vma(_)))
        };
        // The time to take mmap_lock for reading as a fault does, warm.
        let mut p = preset::named("altra");
        p.kernel = Kernel::Linux(6, 9);
        let mut sim = Sim::new(SimConfig::quiet(p, 1, 1), LinuxArm64::new(1, 4, 16, false).unwrap());
        let mm = MmId(1);
        let t = sim.mmap_read_trylock(0, mm, 0);
        let t = sim.mmap_unlock(0, mm, false, t) + 100;
        let plain = sim.mmap_read_trylock(0, mm, t) - t;

        let (merged, under_vma) = take(false, true, 2);
        assert!(under_vma);
        assert_eq!(take(false, true, 1), (merged, true), "merged: one thread takes the VMA's lock too");
        // v2 found the VMA again after locking it, and sent a
        // single-threaded process to mmap_lock with one lookup.
        assert_eq!(take(true, true, 2), (merged + VMA_WALK, true));
        assert_eq!(take(true, true, 1), (plain, false));
        // A fault lock_vma_under_rcu refuses finds its VMA again with
        // find_vma under mmap_lock.
        let (refused, under_vma) = take(false, false, 2);
        assert!(!under_vma);
        assert!(refused >= plain + VMA_WALK, "refused {refused}, mmap_lock alone {plain}");
    }

    #[test]
    fn a_vmas_first_fault_takes_mmap_lock_until_it_has_an_anon_vma() {
        // A thread maps 16 pages and writes them: the VMA's first fault finds
        // no anon_vma and runs under mmap_lock (lock_vma_under_rcu refuses
        // it), the other 15 under the VMA's lock.
        let sim = faulted(1, 16, |p| p.kernel = Kernel::Linux(6, 9));
        assert_eq!((sim.stats.vma_lock.aborts, sim.stats.vma_lock.retries), (1, 0));
        // The fall-back's walk, and the pages' and folios' moves under the
        // zone and LRU locks, are counted as time in estimated costs.
        let e = sim.stats.estimated;
        assert_eq!(e.vma_walk_cycles, VMA_WALK, "one further walk");
        assert!(e.zone_page_cycles > 0 && e.zone_page_cycles % ZONE_PAGE == 0, "{e:?}");
        assert!(e.lru_folio_cycles % LRU_FOLIO == 0, "{e:?}");
        // Before per-VMA locks nothing falls back: everything takes mmap_lock.
        let old = faulted(1, 16, |p| p.kernel = Kernel::Linux(6, 3));
        assert_eq!((old.stats.vma_lock.aborts, old.stats.vma_lock.retries), (0, 0));
    }

    /// A thread that maps 32 pages of file 7 and reads them, then maps them
    /// again (`private`: copy-on-write) and reads and writes them there.
    struct FileToucher {
        private: bool,
        step: u32,
        va: u64,
    }

    impl Program for FileToucher {
        fn next(&mut self, ret: u64) -> Op {
            self.step += 1;
            let map = |private| Op::Sys(Sys::MmapFile { file: 7, pages: 32, write: true, private });
            match self.step {
                1 => map(false),
                2 => Op::Touch { va: ret, pages: 32, write: false },
                3 => map(self.private),
                4 => {
                    self.va = ret;
                    Op::Touch { va: ret, pages: 32, write: false }
                }
                5 => Op::Touch { va: self.va, pages: 32, write: true },
                _ => Op::Exit,
            }
        }
    }

    /// The faults of [`FileToucher`] under `kernel` on an Altra that fell back
    /// to `mmap_lock`: refused, retried.
    fn file_fallbacks(kernel: Kernel, private: bool) -> (u64, u64, u64) {
        let mut p = preset::named("altra");
        p.kernel = kernel;
        let mut sim = Sim::new(SimConfig::quiet(p, 1, 1), LinuxArm64::new(1, 4, 16, false).unwrap());
        sim.spawn(Box::new(FileToucher { private, step: 0, va: 0 })).unwrap();
        sim.run();
        assert!(sim.error.is_none(), "{:?}", sim.error);
        (sim.stats.mmu.page_faults, sim.stats.vma_lock.aborts, sim.stats.vma_lock.retries)
    }

    #[test]
    fn file_faults_take_the_vma_lock_by_the_kernels_rules() {
        // The first mapping's two read faults (16 pages each by fault-around)
        // bring the pages into the cache; the second's two find them there;
        // its 32 writes copy (private) or find the pages mapped (shared: a
        // write fault each on the read-only PTEs).
        let (faults, aborts, retries) = file_fallbacks(Kernel::Linux(6, 5), true);
        assert_eq!((aborts, retries), (faults, 0), "v6.5: every file fault refused");
        // v6.6: the reads of cached pages under the VMA's lock, the rest retried.
        let (faults, aborts, retries) = file_fallbacks(Kernel::Linux(6, 6), true);
        assert_eq!((aborts, retries), (0, faults - 2), "v6.6");
        // v6.7: only the first copy-on-write, before the mapping has an anon_vma.
        let (_, aborts, retries) = file_fallbacks(Kernel::Linux(6, 7), true);
        assert_eq!((aborts, retries), (0, 1), "v6.7, private");
        let (_, aborts, retries) = file_fallbacks(Kernel::Linux(6, 7), false);
        assert_eq!((aborts, retries), (0, 0), "v6.7, shared");
        let files = |a, b| Kernel::Linux(a, b).vma_lock_file_faults();
        assert_eq!(
            (files(6, 5), files(6, 6), files(6, 7), files(6, 13)),
            (VmaLockFiles::None, VmaLockFiles::FaultAround, VmaLockFiles::All, VmaLockFiles::All)
        );
        assert_eq!(Kernel::FreeBsd(13).vma_lock_file_faults(), VmaLockFiles::None);
    }

    /// A thread that maps `pages` pages and, for each, writes it (a fault that
    /// allocates it and adds it to the CPU's LRU batch) and zaps it with a
    /// one-page `madvise(MADV_DONTNEED)`: will-it-scale `tlb_flush2`'s loop.
    #[derive(Clone)]
    struct FaultAndZap {
        pages: u64,
        va: u64,
        step: u64,
    }

    impl Program for FaultAndZap {
        fn next(&mut self, ret: u64) -> Op {
            self.step += 1;
            if self.step == 1 {
                return Op::Sys(Sys::Mmap { pages: self.pages, write: true });
            }
            if self.step == 2 {
                self.va = ret;
            }
            let i = self.step - 2;
            let va = self.va + i / 2 * 4096;
            match i {
                i if i >= 2 * self.pages => Op::Exit,
                i if i % 2 == 0 => Op::Touch { va, pages: 1, write: true },
                _ => Op::Sys(Sys::Madvise { va, pages: 1 }),
            }
        }
    }

    /// The threads of [`fault_and_zap`]'s process, and the pages each faults
    /// and zaps.
    const THREADS: usize = 8;
    const PAGES: u64 = 62;

    /// Runs [`THREADS`] threads on an Altra under `kernel` with `choices`,
    /// each faulting and zapping [`PAGES`] pages one at a time.
    fn fault_and_zap(kernel: Kernel, choices: KernelChoices) -> Sim {
        let mut p = preset::named("altra");
        p.kernel = kernel;
        let cfg = SimConfig { max_mms: 2, kernel: choices, ..SimConfig::quiet(p, THREADS, 1) };
        let mut sim = Sim::new(cfg, LinuxArm64::new(THREADS, 4, 16, false).unwrap());
        let own = FaultAndZap { pages: PAGES, va: 0, step: 0 };
        sim.spawn(Box::new(Starter { threads: THREADS, own, started: 0 })).unwrap();
        sim.run();
        assert!(sim.error.is_none(), "{:?}", sim.error);
        assert_eq!(sim.stats.mmu.page_faults, THREADS as u64 * PAGES);
        sim
    }

    #[test]
    fn a_zap_drains_the_cpus_lru_batch_until_v6_14_and_not_from_v6_15() {
        assert!(Kernel::Linux(4, 14).drains_lru_at_zap() && Kernel::Linux(6, 14).drains_lru_at_zap());
        assert!(!Kernel::Linux(6, 15).drains_lru_at_zap() && !Kernel::FreeBsd(14).drains_lru_at_zap());
        let run_with = |kernel: Kernel, lru_drain: Option<bool>| {
            fault_and_zap(kernel, KernelChoices::default().with(LRU_DRAIN, lru_drain))
        };
        let run = |kernel: Kernel| run_with(kernel, None);
        // v6.14 and v6.15 differ in nothing else the simulator models. Under
        // v6.14 each madvise first takes the node's LRU lock to add the page
        // its fault left in the CPU's batch; under v6.15 the batch of 31 is
        // added when it fills, and the pages zapped in it freed after, twice
        // per thread. With eight CPUs taking the
        // lock in turn, most of v6.14's extra acquisitions move its line.
        let (old, new) = (run(Kernel::Linux(6, 14)), run(Kernel::Linux(6, 15)));
        let drains = THREADS as u64 * PAGES;
        let moved = old.m.counters.line_transfers - new.m.counters.line_transfers;
        assert!(moved >= drains / 2, "{drains} drains moved {moved} more lines than none");
        assert!(old.end > new.end, "the drains took no time: {} against {} cycles", old.end, new.end);
        // `--set lru_drain` gives either kernel the other's zaps.
        assert_eq!(run_with(Kernel::Linux(6, 15), Some(true)).end, old.end);
        assert_eq!(run_with(Kernel::Linux(6, 14), Some(false)).end, new.end);
    }

    #[test]
    fn a_page_zapped_in_its_cpus_lru_batch_is_freed_when_the_batch_drains() {
        // One thread faults and zaps 40 pages in turn; a batch holds 31.
        use super::super::lru_add::tests::{lru_folios as folios, one_cpu_altra};
        let run = |kernel: Kernel| {
            let mut sim = one_cpu_altra(kernel);
            sim.spawn(Box::new(FaultAndZap { pages: 40, va: 0, step: 0 })).unwrap();
            sim.run();
            assert!(sim.error.is_none(), "{:?}", sim.error);
            sim
        };
        // v6.14 drains at each zap: every page joins the LRU and leaves it
        // at its zap, two holds of the lock a page.
        let old = run(Kernel::Linux(6, 14));
        assert_eq!(folios(&old), 80);
        // v6.15: the zap drops the mapping's reference and the batch's
        // remains; the 31st fault drains the batch, adding 31 pages and then
        // freeing them; the last 9 wait in the batch, still unfreed at exit
        // (nothing drains it).
        let mut new = run(Kernel::Linux(6, 15));
        assert_eq!(folios(&new), 62);
        assert_eq!(new.kw.lru.drain(0), super::super::lru_add::Drained { added: 9, freed: 9 });
        // FreeBSD's page queues hold no reference: each free is its own
        // (and its model's batches are 15).
        let bsd = run(Kernel::FreeBsd(14));
        assert_eq!(folios(&bsd), 30 + 40);
    }

    #[test]
    fn charges_walk_every_page_counter_from_the_tasks_cgroup_to_the_roots_and_none_in_the_root() {
        assert_eq!(Kernel::Linux(4, 15).memcg_depth(), 0);
        assert_eq!(Kernel::Linux(4, 16).memcg_depth(), 2);
        assert_eq!(Kernel::FreeBsd(14).memcg_depth(), 0);
        let run = |kernel: Kernel, memcg_depth: Option<u32>| {
            fault_and_zap(kernel, KernelChoices { memcg_depth, ..KernelChoices::default() })
        };
        let transfers = |sim: &Sim| sim.m.counters.line_transfers;
        // Each one-page madvise uncharges its page from every counter at
        // once (uncharge_batch); the charges come from the stock, a batch at
        // a time. Eight CPUs doing it in turn move each counter's line at
        // most uncharges.
        let uncharges = THREADS as u64 * PAGES;
        let kernel = Kernel::Linux(6, 6);
        let (root, one, two) = (run(kernel, Some(0)), run(kernel, Some(1)), run(kernel, Some(2)));
        assert_eq!(root.kw.memcg_counters, 0);
        assert_eq!((one.kw.memcg_counters, two.kw.memcg_counters), (2, 3));
        let (first, second) = (transfers(&one) - transfers(&root), transfers(&two) - transfers(&one));
        assert!(first >= uncharges && first <= 3 * uncharges, "two counters moved {first} more lines than none");
        assert!(second >= uncharges / 2 && second <= 2 * uncharges, "a third counter moved {second} more lines");
        // What the counters cost shows in the lines they move (above): the
        // run's length with eight threads turns on how their faults, their
        // zaps' IPIs and the others' mmaps interleave, by more than that.
        // The kernel's time decides by default.
        assert_eq!(run(kernel, None).end, two.end);
        assert_eq!(run(Kernel::Linux(4, 14), None).end, run(Kernel::Linux(4, 14), Some(0)).end);
        // A memory limit is a cgroup's: tasks in the root move below it.
        let mut limited = run(Kernel::Linux(4, 14), None);
        limited.set_mem_limit(1 << 20);
        assert_eq!(limited.kw.memcg_counters, 2);
    }

    #[test]
    fn zeroing_plateaus_at_the_nodes_memory_bandwidth() {
        // The same faults with ample bandwidth and with a node that writes 2 GB/s.
        let (fast, _) = fault_in(16, 64, |_| {});
        let (slow, _) = fault_in(16, 64, |p| p.mem_bw_gbs = 2.0);
        // 1024 pages of 4 KB at 0.7 x 2 GB/s take 3 ms, 9 million cycles at 3 GHz.
        assert!(slow > 8_000_000 && slow > 5 * fast, "{slow} cycles at 2 GB/s against {fast} at 204.8 GB/s");
        let (one, _) = fault_in(1, 64, |p| p.mem_bw_gbs = 2.0);
        assert!(one * 4 < slow, "one thread alone ({one}) is not bandwidth-bound as sixteen ({slow}) are");
    }

    #[test]
    fn the_bandwidth_budget_moves_pages_to_the_next_window_with_room() {
        let mut p = preset::named("altra");
        p.mem_bw_gbs = 4096.0 * 4.5 * p.freq_ghz / BW_WINDOW as f64 / MEM_BW_SUSTAINED;
        let mut kw = KernelWork::new(&p, 2, 80, None, Features::default());
        assert_eq!(kw.bw_pages, 4);
        assert_eq!(kw.reserve_bandwidth(0, 100, 3), 100);
        // One page left in the first window, then the next window.
        assert_eq!(kw.reserve_bandwidth(1, 200, 2), BW_WINDOW);
        // A page of an earlier time the simulator runs late still finds the room left.
        assert_eq!(kw.reserve_bandwidth(0, BW_WINDOW + 10, 3), BW_WINDOW + 10);
        assert_eq!(kw.reserve_bandwidth(0, 50, 1), 2 * BW_WINDOW);
    }
}
