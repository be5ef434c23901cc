//! The simulated machine and kernel, and the discrete-event engine that runs them.
//!
//! [`Sim::step`] pops the earliest event — "CPU *c* is ready at time *t*" — and
//! executes one operation of the thread on that CPU: a chunk of memory accesses
//! (each a TLB lookup, a page walk on a miss, a page fault on an unmapped page),
//! a computation, a system call, or a context switch. [`Sim::run`] loops `step`.
//! Every random choice comes from one ChaCha8 generator seeded from the run's
//! seed, and all state is in vectors indexed by id, so a seed gives one result.
//!
//! The kernel: processes own address spaces (slots reused like `mm_struct`s, each
//! incarnation with a never-reused uid); threads sit on per-CPU run queues of
//! the preset's scheduling class ([`crate::sched`]: FIFO for the FreeBSD
//! presets, Linux's CFS or EEVDF for the others), with the class's wake-up
//! placement, preemption and load balancing (`sim/sched.rs`,
//! `sim/balance.rs`; `migration=off` keeps every thread on its CPU). An idle CPU switches to the kernel's address space, as
//! FreeBSD's idle thread does (the policy decides what that costs; a lazy-TLB
//! policy may keep the old one loaded). The policy is told who runs there
//! ([`Policy::enter_lazy`]): the idle task, or a kernel thread (also what an
//! exiting task is from `exit_mm` on), which Linux's `enter_lazy_tlb` tells
//! apart with `is_idle_task`. System calls: `mmap`, `munmap`,
//! `mprotect`, `madvise(MADV_DONTNEED)`, `madvise(MADV_PAGEOUT)` (reclaim of
//! anonymous memory, `sim/reclaim.rs`), `fork` (copy-on-write), `clone` (a
//! thread), `execve`, `exit`, pipes with blocking reads, and a kernel path that
//! maps, copies and unmaps buffer pages in the kernel's address space (FreeBSD's
//! `pmap_qenter`/`pmap_qremove`). Pages are demand-allocated on first touch.
//!
//! Every page-table change that removes or weakens a translation hands back a
//! [`PendingFlush`] that must be given to [`Sim::flush`]: the policy's flush runs,
//! and when it returns the oracle discharges the change's obligation.
//!
//! Granularity: an operation is atomic in simulated time (another CPU's event
//! that falls inside it sees its end state); a reschedule owed to a CPU (a
//! preempting wake-up) is taken at its next event. The checker, not the simulator, explores finer interleavings; the one
//! exception is the hardware's own access/dirty updates and speculative fills,
//! which may land between two page-table accesses of the arm64 contpte code
//! (`sim/ptemem.rs`).
//!
//! Large folios and contiguous PTEs (`--set contpte=on`, arm64 Linux): see
//! `sim/contpte.rs` for what the kernel then does differently, and
//! `sim/ptemem.rs` for the page-table memory the policy crate's arch code runs on.
//!
//! Layout: this file holds the machine's and kernel's state and boots it; the
//! kernel's paths are `impl Sim` blocks of their own files: `sim/event.rs` (the
//! event loop), `sim/sched.rs` (the scheduler and the context switch),
//! `sim/balance.rs` (load balancing between CPUs),
//! `sim/access.rs` (TLB lookups, walks and page faults), `sim/flush.rs`
//! (invalidations owed, the strict scan), `sim/syscall.rs` (system-call
//! dispatch, pipes, the kernel-map path), `sim/mmap.rs` (the memory system
//! calls), `sim/reclaim.rs` (`madvise(MADV_PAGEOUT)`), `sim/memcg.rs` (a
//! memory cgroup's limit and the faults' direct reclaim) and `sim/process.rs`
//! (spawn, fork, clone, execve, exit).
//!
//! Parts: four of [`Sim`]'s parts are rooms with walls, each a type in its own
//! module whose fields only that module touches; the paths reach each through
//! methods named for what the kernel or hardware does, and each module's
//! documentation says what its methods keep true:
//! - `scheduler` (`Scheduler`, `sim/scheduler.rs`): threads, each CPU's run
//!   queue and scheduler state, the dense `loads` and the per-domain idle and
//!   overloaded counts (kept in step with the queues by its queue and
//!   running-thread setters), and the class's rules that need only them
//!   (placement, picking, preemption decisions, balancing's choices);
//! - `kern` (`KernelState`, `sim/kernel_state.rs`): address-space slots and
//!   unique ids, live threads, zombies and their reaping, pipes, the kernel
//!   heap, text and map pool, the lazy flushes the policy took over, and the
//!   spare lists of finished flushes;
//! - `mem` (`MemoryState`, `sim/memory.rs`): the page cache, the memory
//!   cgroup's charge and LRU, the swap device, pages under migration, and
//!   reclaim's switches and counts;
//! - `timing` (`Timing`, `sim/timing.rs`): the demand walks' and faults'
//!   cycles a touch overlaps, and the jitter.
//!
//! Records: an address space (`Mm`), a pipe, a thread and a CPU's scheduler
//! state own their fields too, each in its part's module (`Mm` and `Pipe` the
//! kernel state's, `Thread` and `CpuSched` the scheduler's): the paths read
//! them by id and change them through narrow methods named for what the
//! kernel does (`mm.begin_munmap()`, `thread.set_return(v)`,
//! `cpu.owe_resched()`), and what must change together (a thread's state
//! with its CPU's running thread, an address space's users with the live
//! threads) changes in one method of the part that keeps it.

mod access;
#[cfg(test)]
mod aging_tests;
mod balance;
mod contpte;
mod event;
mod file_reclaim;
mod flush;
mod hooks;
mod idle;
mod kernel_state;
#[cfg(test)]
mod kernel_time_tests;
mod kswapd;
#[cfg(test)]
mod kswapd_tests;
mod kwork;
mod lru_add;
pub use kwork::{KernelEstimate, KERNEL_ESTIMATES};
mod smt;
pub use kwork::{zeroing_gbs, MEMCG_DEPTH_MAX, MEM_BW_SUSTAINED};
mod memcg;
mod memory;
mod migrate;
mod mmap;
mod mmap_writer;
#[cfg(test)]
mod mprotect_tests;
#[cfg(test)]
mod private_file_tests;
mod process;
mod ptemem;
mod reclaim;
#[cfg(test)]
mod rwsem_sleep_tests;
#[cfg(test)]
mod rwsem_writer_tests;
mod sched;
#[cfg(test)]
mod sched_tests;
mod scheduler;
mod syscall;
#[cfg(test)]
mod tests;
mod timing;
#[cfg(test)]
mod zero_page_tests;

pub use kswapd::{watermarks, Watermarks};
pub use memcg::{ReclaimStats, SWAP_CLUSTER_MAX};

use crate::frames::{FrameKind, Frames, Freed, ZERO_PFN};
use crate::machine::{CpuHw, HwCounters, Machine};
use crate::noise::Noise;
use crate::oracle::{Oracle, Property, Violation};
use crate::pagetable::*;
use crate::preset::Preset;
use crate::program::*;
use crate::sched::domain::Domains;
use crate::sched::{SchedKind, Tunables};
use crate::swapdev::{SwapDevice, SwapKind};
use crate::tlb::{Hit, Inval, SweepRule, Tlb, TlbEntry, F_CONT, F_DIRTY, F_GLOBAL, F_HUGE, F_WRITE};
use crate::toggle::{Features, Toggle, Toggles};
use hooks::Hooks;
use kernel_state::KernelState;
use memory::MemoryState;
use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};
#[cfg(test)]
use scheduler::State;
use scheduler::{CpuSched, MayMove, Retry, Scheduler, Thread};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use timing::Timing;
use tlbkit_policy::contpte::Teardown;
use tlbkit_policy::{Lazy, MmId, Policy, Root, VirtAddr};

/// How the simulated kernel backs memory: whether it allocates large folios and
/// maps them with the contiguous bit (`--set contpte=off|folios|on`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ContMode {
    /// Base pages only, every PTE written directly: the kernel every existing
    /// result was measured on.
    #[default]
    Off,
    /// 64 KB folios for anonymous memory and the page cache, mapped without the
    /// contiguous bit through the generic PTE API (origin 004's baseline: a kernel
    /// with large anonymous folios and no contpte).
    Folios,
    /// 64 KB folios mapped with the contiguous bit by the policy crate's arm64
    /// contpte code (Linux v6.9 with `CONFIG_ARM64_CONTPTE`).
    On,
}

impl ContMode {
    /// Every mode, in the order `--set contpte` lists them.
    pub const ALL: [ContMode; 3] = [ContMode::Off, ContMode::Folios, ContMode::On];

    /// Returns the name `--set contpte=` selects the mode by.
    pub const fn name(self) -> &'static str {
        match self {
            ContMode::Off => "off",
            ContMode::Folios => "folios",
            ContMode::On => "on",
        }
    }
}

/// Large folios and contiguous PTEs in the simulated kernel.
#[derive(Clone, Copy, Debug)]
pub struct ContpteConfig {
    /// Whether the kernel uses large folios, and whether it maps them contiguous.
    pub mode: ContMode,
    /// How an exiting address space's contiguous blocks are torn down (with
    /// [`ContMode::On`]; [`ContMode::Folios`] always runs the generic per-PTE zap).
    pub teardown: Teardown,
    /// Whether the run reports the contpte metrics (set when `--set contpte` or
    /// `--set teardown` was given, so that other runs print what they always did).
    pub report: bool,
    /// Test only: the simulator drops every 16-page range flush the arch code
    /// asks [`tlbkit_policy::contpte::PteMem`] for, i.e. the TLBI of
    /// `contpte_convert` between its clears and its rewrite: a broken
    /// break-before-make the oracle must catch.
    pub skip_convert_flush: bool,
}

impl Default for ContpteConfig {
    fn default() -> Self {
        ContpteConfig { mode: ContMode::Off, teardown: Teardown::ClearPtes, report: false, skip_convert_flush: false }
    }
}

/// The run's choices among the kernel's versions' behaviours, where a switch
/// overrides the preset kernel's: its on|off toggles ([`crate::toggle`]) and
/// its memory cgroup's depth.
#[derive(Clone, Copy, Debug, Default)]
pub struct KernelChoices {
    /// The toggles the run gave; the others as the preset's kernel does.
    pub toggles: Toggles,
    /// How many cgroup levels below the root the tasks run at, whose page
    /// counters (each level's and the root's) every memcg charge and
    /// uncharge updates (`Some(0)`: the root cgroup, never charged); `None`:
    /// as the preset's kernel's time ran benchmarks
    /// ([`crate::preset::Kernel::memcg_depth`]). Linux kernels only.
    pub memcg_depth: Option<u32>,
}

impl KernelChoices {
    /// Returns these with the toggle `t` given as `on` (`None`: the kernel's).
    #[must_use]
    pub fn with(self, t: Toggle, on: impl Into<Option<bool>>) -> Self {
        KernelChoices { toggles: self.toggles.with(t, on), ..self }
    }
}

/// How the simulated machine and kernel are set up.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// The machine.
    pub preset: Preset,
    /// CPUs.
    pub ncpus: usize,
    /// The seed of the one random generator.
    pub seed: u64,
    /// Whether `no_stale_held` is checked.
    pub strict: bool,
    /// Probability, per operation of a user thread, of one speculative TLB fill.
    pub spec_rate: f64,
    /// Whether threads may move between CPUs: FIFO's balanced wake-ups and idle
    /// CPUs stealing, or the fair classes' wake-affine placement and load
    /// balancing (`sim/balance.rs`).
    pub migration: bool,
    /// The scheduling class ([`crate::sched`]): the preset's by default.
    pub sched: SchedKind,
    /// The swap device ([`crate::swapdev`]).
    pub swap: SwapKind,
    /// The FIFO class's time slice in microseconds.
    pub slice_us: f64,
    /// CFS and EEVDF: replaces the scaled base slice (EEVDF) or minimum
    /// granularity (CFS, with a latency of 8 times it), in microseconds.
    pub base_slice_us: Option<f64>,
    /// ASID width.
    pub asid_bits: u8,
    /// Address-space slots the policy is sized for.
    pub max_mms: usize,
    /// Safety bound on events.
    pub max_events: u64,
    /// Large folios and contiguous PTEs (off by default).
    pub contpte: ContpteConfig,
    /// Whether the threads of a core share it (`sim/smt.rs`) on a preset with
    /// more than one thread per core; `None`: they do. `Some(false)` runs
    /// every CPU as a core of its own.
    pub smt: Option<bool>,
    /// The kernel's behaviours that a switch chose instead of the preset
    /// kernel's (its toggles, [`crate::toggle`]).
    pub kernel: KernelChoices,
    /// Whether the seed draws the hardware's run-to-run noise: the tick's
    /// phase, IPI delivery and wake-up latencies ([`crate::noise`]). On for
    /// every `tlbkit run` unless `--set noise=off`.
    pub noise: bool,
}

impl SimConfig {
    /// Returns a quiet machine of `ncpus` CPUs of `preset` for tests and
    /// embedding: nothing drawn from the origin (no speculative fills, no
    /// migration), the preset's scheduling class, 4 ms FIFO time slices, the preset's first ASID width, 16
    /// address-space slots, at most a million events, no `--strict`, no
    /// contiguous PTEs. Change a field with struct-update syntax
    /// (`SimConfig { strict: true, ..SimConfig::quiet(p, 2, 1) }`).
    pub fn quiet(preset: Preset, ncpus: usize, seed: u64) -> Self {
        SimConfig {
            asid_bits: preset.asid_bits[0],
            sched: preset.kernel.sched(),
            preset,
            ncpus,
            seed,
            strict: false,
            spec_rate: 0.0,
            migration: false,
            swap: SwapKind::default(),
            slice_us: 4000.0,
            base_slice_us: None,
            max_mms: 16,
            max_events: 1_000_000,
            contpte: ContpteConfig::default(),
            smt: None,
            kernel: KernelChoices::default(),
            noise: false,
        }
    }
}

/// Event and behaviour counters of a run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    /// The translations and what they cost in misses, walks and faults.
    pub mmu: MmuStats,
    /// Context switches (idle counted as a thread).
    pub context_switches: u64,
    /// System calls.
    pub syscalls: u64,
    /// Events processed.
    pub events: u64,
    /// Cycles of events run on a core another of its threads was using
    /// (`sim/smt.rs`).
    pub smt_shared_cycles: u64,
    /// Cycles initiators spent inside the policy's flush calls (`flush_page`,
    /// `flush_range`, `flush_mm`, `flush_kernel_range`), IPIs and waits included.
    pub flush_cycles: u64,
    /// Flushes whose completion the policy deferred (LATR's saved states).
    pub lazy_flushes: u64,
    /// Scheduler ticks taken (policies that tick only).
    pub ticks: u64,
    /// Cycles CPUs spent in the kernel for a thread, summed over the CPUs: what
    /// `time` reports as sys (`sim/event.rs`, "Kernel time").
    pub kernel_cycles: u64,
    /// The contiguous-PTE and exit-teardown counters.
    pub contpte: ContpteStats,
    /// The reclaim, `MADV_PAGEOUT` and migration counters.
    pub pageout: PageoutStats,
    /// Faults that did not run under their VMA's lock.
    pub vma_lock: VmaLockStats,
    /// Readers of `mmap_lock` that slept in its wait queue behind a writer
    /// (faults and system calls, `sim/kwork.rs`).
    pub mmap_lock_sleeps: u64,
    /// Writers of `mmap_lock` that slept in its wait queue behind readers
    /// (`sim/mmap_writer.rs`).
    pub mmap_writer_sleeps: u64,
    /// Cycles spent in the kernel's software costs that rest on estimates
    /// ([`KERNEL_ESTIMATES`]).
    pub estimated: EstimatedCycles,
}

/// The counters of translation: what the simulator counts as it runs
/// ([`Stats::mmu`]) and what a run reports as they are
/// ([`crate::run::Metrics`], whose JSON gives them as fields of its own, in
/// this order).
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct MmuStats {
    /// Translations looked up, user and kernel (speculative fills are not).
    pub tlb_accesses: u64,
    /// Lookups that missed every TLB level (each needed a walk).
    pub tlb_misses: u64,
    /// Lookups that missed the L1 TLB.
    pub l1_tlb_misses: u64,
    /// Page walks, speculative ones included.
    pub page_walks: u64,
    /// Speculative TLB fills.
    pub spec_fills: u64,
    /// Page faults.
    pub page_faults: u64,
}

/// Cycles a run spent in each of the kernel's software costs that rest on
/// estimates ([`KERNEL_ESTIMATES`]): the holds and walks themselves,
/// not what other CPUs waited for them. In a run's metrics as
/// `zone_page_cycles`, `lru_folio_cycles` and `vma_walk_cycles`.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct EstimatedCycles {
    /// The zone lock held for pages moved (`ZONE_PAGE` each, `sim/kwork.rs`).
    pub zone_page_cycles: u64,
    /// The LRU lock held for folios added or removed (`LRU_FOLIO` each).
    pub lru_folio_cycles: u64,
    /// Further walks of a VMA tree (`VMA_WALK` each).
    pub vma_walk_cycles: u64,
}

/// Faults under per-VMA locks that fell back to `mmap_lock`
/// (`/proc/vmstat`'s `vma_lock_abort` and `vma_lock_retry`).
#[derive(Clone, Copy, Debug, Default)]
pub struct VmaLockStats {
    /// Refused by `lock_vma_under_rcu` before it took the lock.
    pub aborts: u64,
    /// Given up by the handler under the lock (`VM_FAULT_RETRY`), run again.
    pub retries: u64,
}

/// The counters of contiguous PTEs and of address spaces torn down at exit.
#[derive(Clone, Copy, Debug, Default)]
pub struct ContpteStats {
    /// 64 KB TLB fills (speculative ones included).
    pub contpte_fills: u64,
    /// Folios allocated (anonymous and page cache).
    pub folios: u64,
    /// Range flushes the arch code asked `PteMem` for (a fold or unfold's
    /// break-before-make, an access-flag update's), all told.
    pub pte_range_flushes: u64,
    /// Of those, the ones made while an exiting address space was torn down.
    pub exit_range_flushes: u64,
    /// Hardware actions between two `PteMem` calls: another CPU's write or
    /// speculative fill landing inside the arch code.
    pub hw_races: u64,
    /// File pages whose PTE was reported dirty when cleared (written back).
    pub file_writebacks: u64,
    /// Address spaces torn down by `exit` (a process's last thread leaving).
    pub exits: u64,
    /// Cycles those teardowns took: clearing every PTE, the flush, freeing.
    pub exit_teardown_cycles: u64,
}

/// The counters of reclaim, `MADV_PAGEOUT` and page migration.
#[derive(Clone, Copy, Debug, Default)]
pub struct PageoutStats {
    /// Folios `madvise(MADV_PAGEOUT)` reclaimed, and the memory cgroup's
    /// direct reclaim (an order-0 page counted as a folio of its own).
    pub pageout_folios: u64,
    /// Pages those folios had mapped.
    pub pageout_pages: u64,
    /// Folios (or pages) in a `MADV_PAGEOUT` range left alone: shared, covered
    /// only in part, or of a file mapping.
    pub pageout_skipped: u64,
    /// Deferred TLB flushes reclaim queued (`arch_tlbbatch_add_pending`), one per
    /// PTE unmapped alone or per batch of PTEs unmapped together.
    pub pageout_deferred_flushes: u64,
    /// Contiguous blocks `MADV_PAGEOUT` unfolded (its range flushes through the
    /// arch code, each one `contpte_convert`).
    pub pageout_unfolds: u64,
    /// Faults that mapped a page paged out by `MADV_PAGEOUT` again (swap-ins).
    pub swapins: u64,
    /// Unmaps of reclaim, `MADV_PAGEOUT` or migration flushed at once, one
    /// flush of the page each (`ptep_clear_flush`: `--set tlbbatch=off`, or a
    /// migration without its batch).
    pub unmap_flushes: u64,
    /// Batch flushes that completed deferred unmap flushes
    /// (`try_to_unmap_flush` and `try_to_unmap_flush_dirty`).
    pub tlbbatch_flushes: u64,
    /// Pages `migrate_pages(2)` moved to another node.
    pub migrated_pages: u64,
    /// Accesses that found a page under migration and waited for it
    /// (`migration_entry_wait`).
    pub migration_waits: u64,
}

/// A mapping of an address space.
#[derive(Clone, Copy, Debug)]
struct Vma {
    start: u64,
    pages: u64,
    write: bool,
    /// The file it maps, if any.
    file: Option<u32>,
    /// Whether its file is mapped privately (`MAP_PRIVATE`): a read maps the
    /// page cache's page read-only, a write copies it to a page of the
    /// mapping's own (`do_cow_fault`, `wp_page_copy`).
    cow: bool,
    /// The file page at `start`.
    pgoff: u64,
    /// Whether it has an `anon_vma`: prepared by the first fault that puts a
    /// page of its own in it (`anon_vma_prepare`, from `do_anonymous_page`
    /// or a copy-on-write), kept by its splits and given to a child's copy
    /// by `fork` (`anon_vma_fork`). A fault under per-VMA locks needs it
    /// ([`Sim::fault_lock`]).
    anon_vma: bool,
}

impl Vma {
    fn end(&self) -> u64 {
        self.start + self.pages * 4096
    }

    /// The file page mapped at `va` (a file mapping's; `va` inside it).
    fn file_page(&self, va: u64) -> u64 {
        self.pgoff + (va - self.start) / 4096
    }
}

/// What a flush must cover.
#[derive(Clone, Copy, Debug)]
enum FlushWhat {
    Page(u64),
    Range(u64, u64),
    Mm,
    /// Kernel (global) pages, on every CPU.
    KernelRange(u64, u64),
}

/// A page-table change whose invalidation is still owed. Hand it to
/// [`Sim::flush`]; dropping it would leave the obligation open forever.
#[must_use = "a page-table change must be flushed"]
pub struct PendingFlush {
    obl: u32,
    mm: MmId,
    what: FlushWhat,
    /// PTEs the change touched (their oracle floors rise at discharge).
    changed: Vec<PteRef>,
    /// Tables whose PTEs in the mask the change touched as one patch
    /// ([`PageTables::patch_write`]; their floors rise at discharge too).
    patched: Vec<(PteRef, [u64; 8])>,
    /// Frames whose last mapping went; freed after the flush returns.
    frames: Vec<u64>,
    /// Changes the arch code made through `PteMem` that no range flush of its own
    /// covered: discharged by this flush too.
    arch: ptemem::Unflushed,
    /// Whether it is the flush of the `munmap` or `madvise(MADV_DONTNEED)` that
    /// set its mm's `munmap_inprogress`, whose memory the kernel holds back when
    /// the policy takes its completion over ([`tlbkit_policy::Hw::defer_flush`]).
    lazy: bool,
}

/// Offsets of the 2 MB kernel-text blocks that hold each path's code: system-call
/// entry and dispatch, pipes and eventfd, the scheduler, the low-level switch.
const KTEXT_ENTRY: u64 = 0;
const KTEXT_IPC: u64 = 2 << 20;
const KTEXT_SCHED: u64 = 4 << 20;
const KTEXT_SWITCH: u64 = 6 << 20;

/// Pages accessed per event before the CPU yields to the event queue.
const TOUCH_CHUNK: u64 = 64;

/// The simulated machine, its kernel, and the policy under test.
pub struct Sim {
    /// The configuration.
    pub cfg: SimConfig,
    policy: Box<dyn Hooks>,
    m: Machine,
    pt: PageTables,
    frames: Frames,
    /// The oracle and its findings.
    pub oracle: Oracle,
    rng: ChaCha8Rng,
    /// The kernel's address spaces, pipes, maps and pending flushes.
    kern: KernelState,
    /// The scheduler: threads, run queues and their load.
    scheduler: Scheduler,
    events: event::Events,
    ev_seq: u64,
    /// Named timestamps recorded by `Op::Mark`, in cycles, with the counters
    /// then and the cycles spent invalidating TLBs until then
    /// ([`Sim::invalidating_cycles`]).
    pub marks: Vec<(&'static str, u64, Stats, u64)>,
    /// Counters.
    pub stats: Stats,
    /// The first workload error (a segmentation fault, an impossible request).
    pub error: Option<String>,
    /// Latest time any CPU reached, in cycles.
    pub end: u64,
    /// Whether user PTEs are global (from the policy).
    user_global: bool,
    /// Time owed across events: walks and faults, and the jitter.
    timing: Timing,
    /// Large folios and contiguous PTEs.
    cont: ContpteConfig,
    /// Memory beyond the page tables: page cache, swap, cgroup, migration.
    mem: MemoryState,
    /// The kernel's other work on the memory paths: locks, per-CPU lists,
    /// bandwidth.
    kw: kwork::KernelWork,
}

/// The machine size from which [`Sim::new`] asks the host to back the CPUs'
/// state with 2 MB pages ([`crate::host`]): the size from which the engine
/// prefetches for the events to come too (`PREFETCH_FROM_CPUS`), a state the
/// host's caches no longer hold. At 4096 CPUs on `altra` (about 360 MB of it)
/// the copy into 2 MB pages took 0.36 s to 0.43 s on the project's 2-core
/// development machine, before the run starts; smaller machines are left as
/// they are.
const HUGE_PAGES_FROM_CPUS: usize = 1024;

/// Returns the cache (LLC) domains of `n` CPUs, sockets of `cores_per_socket`
/// split into domains of `cores_per_ccx` (a socket's last may be smaller):
/// each domain's first CPU and one past its last.
pub(crate) fn llc_domains(n: usize, cores_per_socket: usize, cores_per_ccx: usize) -> Vec<(u32, u32)> {
    let cps = cores_per_socket.max(1);
    let ccx = cores_per_ccx.clamp(1, cps);
    let mut v = Vec::new();
    let mut start = 0;
    while start < n {
        let socket_end = (start / cps + 1) * cps;
        let end = (start + ccx).min(socket_end).min(n);
        v.push((start as u32, end as u32));
        start = end;
    }
    v
}

impl Sim {
    /// Returns a booted machine: kernel page tables with the kernel text in 2 MB
    /// blocks, a run queue per CPU, no processes.
    pub fn new<P: Policy + 'static>(cfg: SimConfig, policy: P) -> Self {
        let g = cfg.preset.tlb;
        let n = cfg.ncpus;
        let cpus = (0..n).map(|_| Tlb::new(g.l1d_entries, g.l2_entries, g.l2_ways, g.pwc_entries));
        let noise = if cfg.noise { Noise::from_seed(cfg.seed) } else { Noise::off() };
        let m = Machine::new(cfg.preset.machine_costs(), cpus.collect(), cfg.preset.cores_per_socket)
            .with_ccx(cfg.preset.cores_per_ccx)
            .with_clock(cfg.preset.freq_ghz)
            .with_noise(noise);
        let mut pt = PageTables::default();
        let kroot = pt.new_root();
        let user_global = policy.user_ptes_global();
        let ticks = policy.ticks();
        let cfg_cont = cfg.contpte;
        let (cfg_preset, cores_per_socket, swap_kind) = (cfg.preset.clone(), cfg.preset.cores_per_socket, cfg.swap);
        let smt_share = smt::Smt::of(&cfg.preset, cfg.smt);
        let kernel_choices = cfg.kernel;
        let features = cfg.kernel.toggles.resolve(&cfg.preset);
        let tun = Tunables {
            kernel: cfg.preset.kernel,
            ..Tunables::new(cfg.sched, n, cfg.preset.freq_ghz, cfg.slice_us, cfg.base_slice_us)
        };
        let llcs = llc_domains(n, cfg.preset.cores_per_socket, cfg.preset.cores_per_ccx);
        let (per_node, per_llc) = (cfg.preset.cores_per_socket, cfg.preset.cores_per_ccx);
        let threads = smt_share.as_ref().map_or(1, smt::Smt::threads);
        let domains = Domains::new(n, per_node, threads);
        let numa = cfg.preset.kernel.fork_balancing(n, per_node, per_llc);
        let mut sim = Sim {
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            cfg,
            policy: Box::new(policy),
            m,
            pt,
            frames: Frames::default(),
            oracle: Oracle::new(false),
            events: event::Events::default(),
            ev_seq: 0,
            marks: Vec::new(),
            stats: Stats::default(),
            error: None,
            end: 0,
            user_global,
            cont: cfg_cont,
            kw: kwork::KernelWork::new(&cfg_preset, n, cores_per_socket, kernel_choices.memcg_depth, features),

            scheduler: Scheduler::new(tun, features, (llcs, domains), ticks, numa),
            kern: KernelState::new(kroot),
            mem: MemoryState::new(SwapDevice::new(swap_kind, cfg_preset.freq_ghz)),
            timing: Timing::new(),
        };
        sim.oracle.strict = sim.cfg.strict;
        sim.m.set_smt_irq(smt_share.as_ref().map(smt::Smt::irq));
        if sim.cfg.preset.threads.tlbs_shared(sim.cfg.smt) {
            sim.m.share_tlbs(sim.cfg.preset.threads);
        }
        sim.timing.set_smt(smt_share);
        // Kernel text and data: 4 x 2 MB blocks, global.
        for b in 0..4u64 {
            let va = KERNEL_BASE + b * (2 << 20);
            let r = sim.pt.ensure_block(kroot, va);
            let pfn = sim.frames.alloc_contig(512);
            *sim.pt.pte_mut(r) =
                Pte { pfn, flags: P_VALID | P_WRITE | P_GLOBAL | P_HUGE | P_ACCESS, ver: 1, ..Pte::default() };
        }
        for _ in 0..n {
            let page = sim.kalloc_page();
            let next_tick = sim.m.noise.tick_phase(sim.cycles_per_tick());
            let sched_tick = sim.m.noise.tick_phase(sim.scheduler.tun().tick);
            sim.scheduler.add_cpu(page, next_tick, sched_tick);
        }
        if n >= HUGE_PAGES_FROM_CPUS {
            sim.back_with_huge_pages();
        }
        sim
    }

    /// Asks the host to back the CPUs' state with 2 MB pages ([`crate::host`]):
    /// the span of memory from the lowest to the highest address that the
    /// TLBs, the CPU states and the run queues were given.
    fn back_with_huge_pages(&self) {
        use crate::host::{hull, span};
        let tlbs = self.m.tlb_heap_bounds();
        let (lo, hi) = hull(tlbs.chain([span(&self.m.cpus), span(self.scheduler.cpu_states())]));
        crate::host::back_with_huge_pages(lo, hi);
    }

    /// Makes every `Op::Compute` and every system call's software path (entry
    /// and body) take its time times a factor drawn uniformly from
    /// `[1 - jitter, 1 + jitter]` with the run's generator: the run-to-run noise
    /// of a real machine, so that seeds give different times. With 0 (the
    /// default) nothing is drawn and a run is what it was without jitter.
    pub fn set_jitter(&mut self, jitter: f64) {
        debug_assert!((0.0..1.0).contains(&jitter), "jitter {jitter} would make times negative");
        self.timing.set_jitter(jitter);
    }

    /// Returns where `n` threads that a launcher on CPU `parent` creates in
    /// turn start, each running from its start, the first the launcher
    /// itself: Linux's fork balancing (`crate::sched::fork`); `None` on
    /// FreeBSD, whose scheduler is not modelled.
    pub fn fork_order(&self, n: usize, parent: usize) -> Option<Vec<usize>> {
        self.scheduler.fork_order(n, parent)
    }

    /// Returns the run's kernel toggles ([`crate::toggle`]): the given ones
    /// as given, the others as the preset's kernel does.
    pub fn features(&self) -> Features {
        self.kw.features()
    }

    /// Returns the hardware threads per core the run models sharing a core:
    /// the preset's, or 1 with `smt` off (`sim/smt.rs`).
    pub fn threads_per_core(&self) -> usize {
        self.timing.smt().map_or(1, smt::Smt::threads)
    }

    /// Returns `cycles` scaled by a factor from `[1 - jitter, 1 + jitter]`, or
    /// `cycles` itself, drawing nothing, without jitter.
    fn jittered(&mut self, cycles: u64) -> u64 {
        if !self.timing.jitters(cycles) {
            return cycles;
        }
        let unit = self.unit_random();
        self.timing.jittered(cycles, unit)
    }

    /// Returns the first tick after `now` of a tick every `period` cycles, on
    /// the run's tick grid (its phase drawn from the seed, [`crate::noise`]).
    fn tick_after(&self, now: u64, period: u64) -> u64 {
        crate::noise::next_tick(now, period, self.m.noise.tick_phase(period))
    }

    /// Returns the cycles of a policy's timer tick (`HZ` = 1000): a
    /// millisecond at the machine's clock.
    fn cycles_per_tick(&self) -> u64 {
        ((self.ghz() * 1e6) as u64).max(1)
    }

    /// Returns the policy under test, if it is a `P`.
    pub fn policy<P: Policy + 'static>(&self) -> Option<&P> {
        self.policy.as_any().downcast_ref()
    }

    /// Returns the hardware counters.
    pub fn counters(&self) -> HwCounters {
        self.m.counters
    }

    /// Returns the cycles all CPUs have spent invalidating TLBs so far:
    /// initiators inside the policy's flush calls (IPIs and waits included),
    /// IPI handlers, and running CPUs processing broadcast invalidations they
    /// did not issue.
    pub fn invalidating_cycles(&self) -> u64 {
        self.stats.flush_cycles + self.m.counters.ipi_handler_cycles + self.m.broadcast_stall_cycles()
    }

    /// Returns the cycles running CPUs lost processing broadcast invalidations
    /// they did not issue (`Machine::broadcast_stall_cycles`).
    pub fn broadcast_stall_cycles(&self) -> u64 {
        self.m.broadcast_stall_cycles()
    }

    /// Returns cycles per nanosecond.
    pub fn ghz(&self) -> f64 {
        self.cfg.preset.freq_ghz
    }

    fn kalloc_page(&mut self) -> u64 {
        let va = self.kern.kheap_page();
        let (pfn, _) = self.frames.alloc();
        let kroot = self.kern.kernel_root();
        let r = self.pt.ensure_leaf(kroot, va);
        let ver = self.oracle.next_seq();
        *self.pt.pte_mut(r) = Pte { pfn, flags: P_VALID | P_WRITE | P_GLOBAL | P_ACCESS, ver, ..Pte::default() };
        va
    }

    /// Allocates and maps one page of kernel memory; returns its address.
    pub fn kernel_page(&mut self) -> u64 {
        self.kalloc_page()
    }

    /// Returns the address space `cpu` last switched to.
    pub fn loaded_mm(&self, cpu: usize) -> MmId {
        self.scheduler.cpu(cpu).loaded()
    }

    /// Returns a uniform random number in [0, 1) from the run's generator.
    fn unit_random(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Returns the number of threads not yet exited.
    pub fn live_threads(&self) -> usize {
        self.kern.live()
    }

    /// Returns the time of the latest mark called `name`, in cycles.
    pub fn mark(&self, name: &str) -> Option<u64> {
        self.marks.iter().rev().find(|(n, ..)| *n == name).map(|(_, t, ..)| *t)
    }

    /// Returns the counters as they were at the latest mark called `name`.
    pub fn mark_stats(&self, name: &str) -> Option<Stats> {
        self.marks.iter().rev().find(|(n, ..)| *n == name).map(|(_, _, s, _)| *s)
    }

    /// Returns the ASID tag `cpu` runs with (for tests).
    pub fn cpu_asid(&self, cpu: usize) -> u16 {
        self.m.cpus[cpu].asid
    }
}
