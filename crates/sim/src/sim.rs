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
//! incarnation with a never-reused uid); threads sit on per-CPU FIFO run queues;
//! a thread runs until it blocks, yields, exits or uses up its time slice.
//! Migration is off unless `migration=on`, which balances wake-ups and lets idle
//! CPUs pull work. An idle CPU switches to the kernel's address space, as
//! FreeBSD's idle thread does (the policy decides what that costs; a lazy-TLB
//! policy may keep the old one loaded). The policy is told who runs there
//! ([`Policy::enter_lazy`]): the idle task, or a kernel thread (also what an
//! exiting task is from `exit_mm` on), which Linux's `enter_lazy_tlb` tells
//! apart with `is_idle_task`. System calls: `mmap`, `munmap`,
//! `mprotect`, `madvise(MADV_DONTNEED)`, `fork` (copy-on-write), `clone` (a
//! thread), `execve`, `exit`, pipes with blocking reads, and a kernel path that
//! maps, copies and unmaps buffer pages in the kernel's address space (FreeBSD's
//! `pmap_qenter`/`pmap_qremove`). Pages are demand-allocated on first touch.
//!
//! Every page-table change that removes or weakens a translation hands back a
//! [`PendingFlush`] that must be given to [`Sim::flush`]: the policy's flush runs,
//! and when it returns the oracle discharges the change's obligation.
//!
//! Granularity: an operation is atomic in simulated time (another CPU's event
//! that falls inside it sees its end state). Wake-ups do not preempt the running
//! thread. The checker, not the simulator, explores finer interleavings; the one
//! exception is the hardware's own access/dirty updates and speculative fills,
//! which may land between two page-table accesses of the arm64 contpte code
//! (`sim/ptemem.rs`).
//!
//! Large folios and contiguous PTEs (`--set contpte=on`, arm64 Linux): see
//! `sim/contpte.rs` for what the kernel then does differently, and
//! `sim/ptemem.rs` for the page-table memory the policy crate's arch code runs on.

mod contpte;
mod ptemem;
#[cfg(test)]
mod tests;

use crate::frames::{FrameKind, Frames};
use crate::machine::{CpuHw, CpuState, HwCounters, Machine};
use crate::oracle::{Oracle, Property, Violation};
use crate::pagetable::*;
use crate::preset::Preset;
use crate::program::*;
use crate::tlb::{Hit, Inval, Tlb, TlbEntry, F_CONT, F_DIRTY, F_GLOBAL, F_HUGE, F_WRITE};
use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
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
    /// contiguous bit through the generic PTE API (seed 004's baseline: a kernel
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
    /// Whether threads may move between CPUs.
    pub migration: bool,
    /// Scheduler time slice in microseconds.
    pub slice_us: f64,
    /// ASID width.
    pub asid_bits: u8,
    /// Address-space slots the policy is sized for.
    pub max_mms: usize,
    /// Safety bound on events.
    pub max_events: u64,
    /// Large folios and contiguous PTEs (off by default).
    pub contpte: ContpteConfig,
}

/// Event and behaviour counters of a run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    /// Translations looked up (user and kernel, not speculative).
    pub tlb_accesses: u64,
    /// Lookups that missed every TLB level and needed a walk.
    pub tlb_misses: u64,
    /// Lookups that missed the L1 TLB.
    pub l1_tlb_misses: u64,
    /// Page walks, speculative ones included.
    pub page_walks: u64,
    /// Speculative fills.
    pub spec_fills: u64,
    /// Page faults.
    pub page_faults: u64,
    /// Context switches (idle counted as a thread).
    pub context_switches: u64,
    /// System calls.
    pub syscalls: u64,
    /// Events processed.
    pub events: u64,
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

/// A mapping of an address space.
#[derive(Clone, Copy, Debug)]
struct Vma {
    start: u64,
    pages: u64,
    write: bool,
    /// The file it maps (shared), if any.
    file: Option<u32>,
    /// The file page at `start`.
    pgoff: u64,
}

impl Vma {
    fn end(&self) -> u64 {
        self.start + self.pages * 4096
    }
}

struct Mm {
    uid: u32,
    root: u32,
    vmas: Vec<Vma>,
    users: u32,
    mmap_next: u64,
    alive: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Runnable,
    Running,
    Blocked,
    Dead,
}

struct Thread {
    mm: MmId,
    state: State,
    cpu: usize,
    prog: Box<dyn Program>,
    ret: u64,
    /// The rest of a touch that did not fit in one event.
    pending: Option<(u64, u64, bool)>,
    /// A pipe read to retry after a wake-up.
    retry_read: Option<u32>,
    kstack: u64,
    tstruct: u64,
}

struct CpuSched {
    cur: Option<usize>,
    runq: VecDeque<usize>,
    loaded: MmId,
    slice_start: u64,
    clock: u64,
    armed: bool,
    runq_page: u64,
}

struct Pipe {
    count: u64,
    waiters: VecDeque<usize>,
    kva: u64,
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
    /// Frames whose last mapping went; freed after the flush returns.
    frames: Vec<u64>,
    /// Changes the arch code made through `PteMem` that no range flush of its own
    /// covered: discharged by this flush too.
    arch: ptemem::Unflushed,
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
pub struct Sim<P: Policy> {
    /// The configuration.
    pub cfg: SimConfig,
    policy: P,
    m: Machine,
    pt: PageTables,
    frames: Frames,
    /// The oracle and its findings.
    pub oracle: Oracle,
    rng: ChaCha8Rng,
    mms: Vec<Mm>,
    free_slots: Vec<u32>,
    next_uid: u32,
    threads: Vec<Thread>,
    sched: Vec<CpuSched>,
    pipes: Vec<Pipe>,
    events: BinaryHeap<Reverse<(u64, u64, u32)>>,
    ev_seq: u64,
    kheap_next: u64,
    ktext: u64,
    live: usize,
    /// Named timestamps recorded by `Op::Mark`, in cycles, with the counters then.
    pub marks: Vec<(&'static str, u64, Stats)>,
    /// Counters.
    pub stats: Stats,
    /// The first workload error (a segmentation fault, an impossible request).
    pub error: Option<String>,
    /// Latest time any CPU reached, in cycles.
    pub end: u64,
    /// Whether user PTEs are global (from the policy).
    user_global: bool,
    /// Cycles of demand walks and of page faults so far (to overlap walks in touches).
    walk_cycles: u64,
    fault_cycles: u64,
    /// Exited address spaces some CPU's root may still point at.
    zombies: Vec<MmId>,
    /// [`Machine::root_releases`] when `reap` last looked at every zombie, or
    /// `None` when a zombie was added since: `reap` has nothing to do while neither
    /// a zombie was added nor some address space lost its last root.
    reaped_at: Option<u64>,
    /// The next slot of the kernel-map pool ([`KMAP_BASE`]).
    kmap_next: u64,
    /// Large folios and contiguous PTEs.
    cont: ContpteConfig,
    /// The page cache: per file, per page, the frame holding it (`NO_FRAME`
    /// while not cached). The cache holds one reference on each frame and never
    /// drops it, so file frames are never freed.
    files: Vec<Vec<u64>>,
    /// Whether an exiting address space is being torn down (for the metrics).
    in_exit: bool,
    /// The spread of compute and system-call times ([`Sim::set_jitter`]).
    jitter: f64,
}

/// A page-cache slot with no frame.
const NO_FRAME: u64 = u64::MAX;

impl<P: Policy> Sim<P> {
    /// Returns a booted machine: kernel page tables with the kernel text in 2 MB
    /// blocks, a run queue per CPU, no processes.
    pub fn new(cfg: SimConfig, policy: P) -> Self {
        let g = cfg.preset.tlb;
        let n = cfg.ncpus;
        let cpus = (0..n).map(|_| CpuState::new(Tlb::new(g.l1d_entries, g.l2_entries, g.l2_ways, g.pwc_entries)));
        let m = Machine::new(cfg.preset.costs, cpus.collect(), cfg.preset.cores_per_socket);
        let mut pt = PageTables::default();
        let kroot = pt.new_root();
        let user_global = policy.user_ptes_global();
        let cfg_cont = cfg.contpte;
        let mut sim = Sim {
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            cfg,
            policy,
            m,
            pt,
            frames: Frames::default(),
            oracle: Oracle::new(false),
            mms: vec![Mm { uid: 0, root: kroot, vmas: Vec::new(), users: 0, mmap_next: 0, alive: true }],
            free_slots: Vec::new(),
            next_uid: 1,
            threads: Vec::new(),
            sched: Vec::new(),
            pipes: Vec::new(),
            events: BinaryHeap::new(),
            ev_seq: 0,
            kheap_next: KERNEL_BASE + (1 << 30),
            ktext: KERNEL_BASE,
            live: 0,
            marks: Vec::new(),
            stats: Stats::default(),
            error: None,
            end: 0,
            user_global,
            walk_cycles: 0,
            fault_cycles: 0,
            zombies: Vec::new(),
            reaped_at: None,
            kmap_next: 0,
            cont: cfg_cont,
            files: Vec::new(),
            in_exit: false,
            jitter: 0.0,
        };
        sim.oracle.strict = sim.cfg.strict;
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
            sim.sched.push(CpuSched {
                cur: None,
                runq: VecDeque::new(),
                loaded: MmId::KERNEL,
                slice_start: 0,
                clock: 0,
                armed: false,
                runq_page: page,
            });
        }
        sim
    }

    /// Makes every `Op::Compute` and every system call's software path (entry
    /// and body) take its time times a factor drawn uniformly from
    /// `[1 - jitter, 1 + jitter]` with the run's generator: the run-to-run noise
    /// of a real machine, so that seeds give different times. With 0 (the
    /// default) nothing is drawn and a run is what it was without jitter.
    pub fn set_jitter(&mut self, jitter: f64) {
        debug_assert!((0.0..1.0).contains(&jitter), "jitter {jitter} would make times negative");
        self.jitter = jitter;
    }

    /// Returns `cycles` scaled by a factor from `[1 - jitter, 1 + jitter]`, or
    /// `cycles` itself, drawing nothing, without jitter.
    fn jittered(&mut self, cycles: u64) -> u64 {
        if self.jitter == 0.0 || cycles == 0 {
            return cycles;
        }
        let factor = 1.0 + self.jitter * (2.0 * self.unit_random() - 1.0);
        (cycles as f64 * factor).round() as u64
    }

    /// Returns the policy under test.
    pub fn policy(&self) -> &P {
        &self.policy
    }

    /// Returns the hardware counters.
    pub fn counters(&self) -> HwCounters {
        self.m.counters
    }

    /// Returns cycles per nanosecond.
    pub fn ghz(&self) -> f64 {
        self.cfg.preset.freq_ghz
    }

    fn kalloc_page(&mut self) -> u64 {
        let va = self.kheap_next;
        self.kheap_next += 4096;
        let (pfn, _) = self.frames.alloc();
        let kroot = self.mms[0].root;
        let r = self.pt.ensure_leaf(kroot, va);
        let ver = self.oracle.next_seq();
        *self.pt.pte_mut(r) = Pte { pfn, flags: P_VALID | P_WRITE | P_GLOBAL | P_ACCESS, ver, ..Pte::default() };
        va
    }

    fn new_mm(&mut self) -> Option<MmId> {
        let slot = match self.free_slots.pop() {
            Some(s) => s,
            None => {
                if self.mms.len() >= self.cfg.max_mms {
                    return None;
                }
                self.mms.push(Mm { uid: 0, root: 0, vmas: Vec::new(), users: 0, mmap_next: 0, alive: false });
                (self.mms.len() - 1) as u32
            }
        };
        let root = self.pt.new_root();
        let uid = self.next_uid;
        self.next_uid += 1;
        self.mms[slot as usize] = Mm { uid, root, vmas: Vec::new(), users: 0, mmap_next: MMAP_BASE, alive: true };
        let mm = MmId(slot);
        self.policy.mm_init(mm);
        Some(mm)
    }

    fn new_thread(&mut self, mm: MmId, prog: Box<dyn Program>, cpu: usize) -> usize {
        let kstack = self.kalloc_page();
        let tstruct = if self.threads.len().is_multiple_of(8) {
            self.kalloc_page()
        } else {
            self.threads.last().unwrap().tstruct
        };
        self.threads.push(Thread {
            mm,
            state: State::Runnable,
            cpu,
            prog,
            ret: 0,
            pending: None,
            retry_read: None,
            kstack,
            tstruct,
        });
        self.mms[mm.index()].users += 1;
        self.live += 1;
        self.threads.len() - 1
    }

    /// Returns the CPU with the fewest threads queued or running (lowest id on ties).
    fn least_loaded(&self) -> usize {
        (0..self.sched.len()).min_by_key(|&c| (self.load(c), c)).unwrap_or(0)
    }

    /// Returns the CPU with the fewest threads queued or running, `near` itself on
    /// ties, then the lowest id: Linux's `find_idlest_cpu` keeps a new task on the
    /// local group unless another group is idler.
    fn least_loaded_near(&self, near: usize) -> usize {
        (0..self.sched.len()).min_by_key(|&c| (self.load(c), c != near, c)).unwrap_or(near)
    }

    /// Returns the threads queued on or running on `cpu`.
    fn load(&self, cpu: usize) -> usize {
        self.sched[cpu].runq.len() + self.sched[cpu].cur.is_some() as usize
    }

    /// Starts a new process running `prog` with a text and a stack mapping, on
    /// the least-loaded CPU; returns its thread id.
    pub fn spawn(&mut self, prog: Box<dyn Program>) -> Result<usize, String> {
        let mm = self.new_mm().ok_or_else(|| format!("more than {} address spaces", self.cfg.max_mms))?;
        self.map_image(mm);
        Ok(self.start_process(mm, prog))
    }

    /// Starts a new process running `prog` whose address space maps `image`
    /// instead of the standard text, data and stack (a traced program's memory
    /// as exec and its loader left it, see [`crate::trace`]), on the
    /// least-loaded CPU; returns its thread id. The regions must be page-aligned,
    /// below [`USER_VA_END`] and disjoint.
    pub fn spawn_with(&mut self, prog: Box<dyn Program>, image: &[Region]) -> Result<usize, String> {
        let mut sorted = image.to_vec();
        sorted.sort_by_key(|r| r.va);
        for (i, r) in sorted.iter().enumerate() {
            let end = r.pages.checked_mul(4096).and_then(|b| r.va.checked_add(b));
            if !r.va.is_multiple_of(4096) || r.pages == 0 || end.is_none_or(|e| e > USER_VA_END) {
                return Err(format!(
                    "image region of {} page(s) at {:#x} is not page-aligned user memory below {USER_VA_END:#x}",
                    r.pages, r.va
                ));
            }
            if let Some(next) = sorted.get(i + 1).filter(|n| n.va < r.va + r.pages * 4096) {
                return Err(format!("image regions at {:#x} and {:#x} overlap", r.va, next.va));
            }
        }
        let mm = self.new_mm().ok_or_else(|| format!("more than {} address spaces", self.cfg.max_mms))?;
        let m = &mut self.mms[mm.index()];
        m.vmas.extend(sorted.iter().map(|r| Vma { start: r.va, pages: r.pages, write: r.write, file: None, pgoff: 0 }));
        Ok(self.start_process(mm, prog))
    }

    /// Gives the new address space `mm` its first thread, running `prog` on the
    /// least-loaded CPU; returns the thread id.
    fn start_process(&mut self, mm: MmId, prog: Box<dyn Program>) -> usize {
        let cpu = self.least_loaded();
        let tid = self.new_thread(mm, prog, cpu);
        self.enqueue(tid, cpu, 0, cpu);
        tid
    }

    /// Gives a new address space a program image: text, data and stack.
    fn map_image(&mut self, mm: MmId) {
        let m = &mut self.mms[mm.index()];
        m.vmas.push(Vma { start: TEXT_VA, pages: TEXT_PAGES, write: false, file: None, pgoff: 0 });
        m.vmas.push(Vma { start: DATA_VA, pages: DATA_PAGES, write: true, file: None, pgoff: 0 });
        m.vmas.push(Vma { start: STACK_VA, pages: STACK_PAGES, write: true, file: None, pgoff: 0 });
    }

    /// Starts a kernel thread running `prog` on `cpu`: it runs on the kernel's
    /// address space (FreeBSD's `pmap0`, Linux's `init_mm`), so it can touch
    /// kernel addresses only. Returns its thread id.
    pub fn spawn_kernel_thread(&mut self, prog: Box<dyn Program>, cpu: usize) -> usize {
        let cpu = cpu.min(self.sched.len() - 1);
        let tid = self.new_thread(MmId::KERNEL, prog, cpu);
        self.enqueue(tid, cpu, 0, cpu);
        tid
    }

    /// Allocates and maps one page of kernel memory; returns its address.
    pub fn kernel_page(&mut self) -> u64 {
        self.kalloc_page()
    }

    /// Returns the address space `cpu` last switched to.
    pub fn loaded_mm(&self, cpu: usize) -> MmId {
        self.sched[cpu].loaded
    }

    fn arm(&mut self, cpu: usize, t: u64) {
        if !self.sched[cpu].armed {
            self.sched[cpu].armed = true;
            self.ev_seq += 1;
            self.events.push(Reverse((t, self.ev_seq, cpu as u32)));
        }
    }

    fn enqueue(&mut self, tid: usize, cpu: usize, now: u64, from: usize) {
        self.threads[tid].state = State::Runnable;
        self.threads[tid].cpu = cpu;
        self.sched[cpu].runq.push_back(tid);
        if self.sched[cpu].cur.is_none() && !self.sched[cpu].armed {
            let c = self.m.costs;
            let mut t = now.max(self.sched[cpu].clock);
            if cpu != from {
                // Wake an idle CPU with a reschedule IPI.
                self.m.counters.ipis_sent += 1;
                t += c.ipi_send + c.ipi_deliver + if self.m.cross_socket(from, cpu) { c.ipi_cross_socket } else { 0 };
            }
            self.arm(cpu, t);
        }
    }

    fn wake(&mut self, tid: usize, from: usize, now: u64) {
        let cpu = if self.cfg.migration { self.least_loaded() } else { self.threads[tid].cpu };
        self.enqueue(tid, cpu, now, from);
    }

    /// Returns whether events remain.
    pub fn pending(&self) -> bool {
        !self.events.is_empty()
    }

    /// Advances the simulation by one event; returns false when none is left.
    pub fn step(&mut self) -> bool {
        let Some(Reverse((t, _, cpu))) = self.events.pop() else {
            return false;
        };
        self.stats.events += 1;
        let cpu = cpu as usize;
        self.sched[cpu].armed = false;
        // IPI handlers that interrupted the CPU's last operation made it longer.
        let stolen = self.m.take_stolen(cpu);
        let now = (t.max(self.sched[cpu].clock) + stolen).max(self.m.cpus[cpu].irq_until);
        let now = self.run_cpu(cpu, now);
        self.sched[cpu].clock = now;
        self.m.set_busy_until(cpu, now);
        self.end = self.end.max(now);
        true
    }

    /// Runs until no event is left, the event bound is reached or an error occurs.
    pub fn run(&mut self) {
        while self.error.is_none() && self.stats.events < self.cfg.max_events && self.step() {}
        if self.error.is_none() && self.stats.events >= self.cfg.max_events && self.pending() {
            self.error = Some(format!(
                "the run did not finish within {} events; lower the workload's size",
                self.cfg.max_events
            ));
        }
    }

    fn run_cpu(&mut self, cpu: usize, now: u64) -> u64 {
        let Some(tid) = self.sched[cpu].cur else {
            return self.schedule(cpu, None, now);
        };
        let slice = (self.cfg.slice_us * 1000.0 * self.ghz()) as u64;
        if now - self.sched[cpu].slice_start >= slice && !self.sched[cpu].runq.is_empty() {
            self.threads[tid].state = State::Runnable;
            self.sched[cpu].runq.push_back(tid);
            self.sched[cpu].cur = None;
            return self.schedule(cpu, Some(tid), now);
        }
        let now = self.exec(cpu, tid, now);
        if self.sched[cpu].cur == Some(tid) {
            self.arm(cpu, now);
            now
        } else {
            // The thread blocked, yielded or exited: pick the next one.
            self.schedule(cpu, Some(tid), now)
        }
    }

    /// Switches `cpu` (whose previous thread was `prev`) to its next runnable
    /// thread, or to idle.
    fn schedule(&mut self, cpu: usize, prev: Option<usize>, mut now: u64) -> u64 {
        let mut next = self.sched[cpu].runq.pop_front();
        if next.is_none() && self.cfg.migration {
            next = self.steal(cpu);
        }
        let c = self.m.costs;
        now += c.switch_path;
        self.stats.context_switches += 1;
        // The scheduler's code and the low-level switch code sit in their own
        // 2 MB blocks of kernel text.
        now = self.kaccess(cpu, self.ktext + KTEXT_SCHED, now);
        now = self.kaccess(cpu, self.ktext + KTEXT_SWITCH, now);
        let rq = self.sched[cpu].runq_page;
        now = self.kaccess(cpu, rq, now);
        if let Some(p) = prev {
            now = self.kaccess(cpu, self.threads[p].tstruct, now);
        }
        let Some(next) = next else {
            // Idle: the idle thread runs on the kernel's address space.
            self.sched[cpu].cur = None;
            return self.enter_lazy(cpu, Lazy::Idle, now);
        };
        now = self.kaccess(cpu, self.threads[next].tstruct, now);
        now = self.kaccess(cpu, self.threads[next].kstack, now);
        let mm = self.threads[next].mm;
        now = if mm.is_kernel() { self.enter_lazy(cpu, Lazy::KernelThread, now) } else { self.switch_mm(cpu, mm, now) };
        let s = &mut self.sched[cpu];
        s.cur = Some(next);
        s.slice_start = now;
        self.threads[next].state = State::Running;
        self.threads[next].cpu = cpu;
        self.arm(cpu, now);
        now
    }

    /// Takes the last queued thread of the busiest other CPU.
    fn steal(&mut self, cpu: usize) -> Option<usize> {
        let victim = (0..self.sched.len())
            .filter(|&c| c != cpu && !self.sched[c].runq.is_empty())
            .max_by_key(|&c| (self.sched[c].runq.len(), Reverse(c)))?;
        self.sched[victim].runq.pop_back()
    }

    fn switch_mm(&mut self, cpu: usize, mm: MmId, now: u64) -> u64 {
        let hw = CpuHw::new(&mut self.m, cpu, now);
        self.policy.switch_mm(&hw, mm);
        let now = hw.now();
        self.switched(cpu, mm, now)
    }

    /// Leaves `cpu` running the kernel with no address space of its own, `who`
    /// being the idle task or a kernel thread (`enter_lazy_tlb`).
    fn enter_lazy(&mut self, cpu: usize, who: Lazy, now: u64) -> u64 {
        let hw = CpuHw::new(&mut self.m, cpu, now);
        self.policy.enter_lazy(&hw, who);
        let now = hw.now();
        self.switched(cpu, MmId::KERNEL, now)
    }

    /// After the policy switched `cpu` to `mm`: the oracle's scan and the release
    /// of address spaces no root points at any more.
    fn switched(&mut self, cpu: usize, mm: MmId, now: u64) -> u64 {
        self.sched[cpu].loaded = mm;
        if self.oracle.strict {
            self.strict_scan(cpu, now);
        }
        self.reap(cpu, now)
    }

    fn exec(&mut self, cpu: usize, tid: usize, mut now: u64) -> u64 {
        if self.cfg.spec_rate > 0.0 && self.unit_random() < self.cfg.spec_rate {
            self.spec_fill(cpu);
        }
        if let Some((va, pages, write)) = self.threads[tid].pending.take() {
            return self.touch(cpu, tid, va, pages, write, now);
        }
        if let Some(p) = self.threads[tid].retry_read.take() {
            return self.pipe_read(cpu, tid, p, now);
        }
        let ret = self.threads[tid].ret;
        self.threads[tid].ret = 0;
        let op = self.threads[tid].prog.next(ret);
        match op {
            Op::Touch { va, pages, write } => self.touch(cpu, tid, va, pages, write, now),
            Op::Compute(c) => now + self.jittered(c),
            Op::Mark(name) => {
                self.marks.push((name, now, self.stats));
                now
            }
            Op::Exit => self.exit(cpu, tid, now),
            Op::Sys(s) => {
                let c = self.m.costs;
                self.stats.syscalls += 1;
                now += self.jittered(c.exception_entry + c.syscall_body);
                now = self.kaccess(cpu, self.ktext + KTEXT_ENTRY, now);
                now = self.kaccess(cpu, self.threads[tid].kstack, now);
                now = self.syscall(cpu, tid, s, now);
                now + c.exception_exit
            }
        }
    }

    /// Touches `pages` consecutive pages. The loads of a multi-page touch are
    /// independent, so the out-of-order core overlaps them: their cache and TLB
    /// latency counts `1/mlp`, their walks `1/walkers`; page faults are serial.
    fn touch(&mut self, cpu: usize, tid: usize, va: u64, pages: u64, write: bool, mut now: u64) -> u64 {
        let n = pages.min(TOUCH_CHUNK);
        let c = self.m.costs;
        let (start, w0, f0) = (now, self.walk_cycles, self.fault_cycles);
        for i in 0..n {
            now = match self.access(cpu, va + i * 4096, write, now) {
                Ok(t) => t,
                Err(e) => {
                    self.error.get_or_insert(e);
                    return now;
                }
            };
        }
        if pages > 1 {
            let (walk, fault) = (self.walk_cycles - w0, self.fault_cycles - f0);
            let rest = now - start - walk - fault;
            now = start + fault + rest.div_ceil(c.mlp.max(1)) + walk.div_ceil(c.walkers.max(1));
        }
        if pages > n {
            self.threads[tid].pending = Some((va + n * 4096, pages - n, write));
        }
        now
    }

    /// Returns the page-table root and uid of what `cpu` translates user addresses with.
    #[inline]
    fn user_root(&self, cpu: usize) -> Option<(u32, u32, MmId)> {
        match self.m.cpus[cpu].root {
            Root::Mm(mm) => {
                let m = &self.mms[mm.index()];
                Some((m.root, m.uid, mm))
            }
            Root::Reserved => None,
        }
    }

    /// Judges a TLB hit against ground truth.
    #[inline(always)]
    fn check_use(&mut self, cpu: usize, e: TlbEntry, va: u64, cur_uid: u32, now: u64) {
        let kernel = va >= KERNEL_BASE;
        if !kernel && e.mm_uid != cur_uid {
            let mm = self.mm_name_of_uid(cur_uid);
            let v = Violation {
                property: Property::NoAsidAlias.name(),
                cpu: cpu as u32,
                time_ns: now as f64 / self.ghz(),
                va: format!("{va:#x}"),
                mm,
                detail: format!(
                    "used a {} entry (asid {}) filled from address space uid {} while running uid {}",
                    if e.global() { "global" } else { "non-global" },
                    e.asid,
                    e.mm_uid,
                    cur_uid
                ),
                change: None,
                flush: None,
            };
            self.oracle.report(v);
            return;
        }
        if e.flags & F_CONT != 0 {
            self.check_cont_use(cpu, e, va, cur_uid, now);
            return;
        }
        let p = *self.pt.pte(e.pte);
        if e.ver < p.floor {
            self.report_stale(Property::NoStaleUse, cpu, va, &e, p.floor_obl, cur_uid, now);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn report_stale(&mut self, prop: Property, cpu: usize, va: u64, e: &TlbEntry, obl: u32, cur_uid: u32, now: u64) {
        let g = self.ghz();
        let v = Violation {
            property: prop.name(),
            cpu: cpu as u32,
            time_ns: now as f64 / g,
            va: format!("{va:#x}"),
            mm: self.mm_name_of_uid(cur_uid),
            detail: format!(
                "{} entry (asid {}, frame {}) from PTE version {} predates a flushed change",
                if prop == Property::NoStaleHeld { "holds an" } else { "used an" },
                e.asid,
                e.pfn,
                e.ver
            ),
            change: Some(self.oracle.describe_change(obl, g)),
            flush: Some(self.oracle.describe_flush(obl, g)),
        };
        self.oracle.report(v);
    }

    fn mm_name_of_uid(&self, uid: u32) -> String {
        match self.mms.iter().position(|m| m.alive && m.uid == uid) {
            Some(0) => "mm:kernel".to_string(),
            Some(s) => format!("mm{s} (uid {uid})"),
            None => format!("uid {uid}"),
        }
    }

    /// Translates and performs one access by `cpu`; returns the time after it.
    fn access(&mut self, cpu: usize, va: u64, write: bool, mut now: u64) -> Result<u64, String> {
        let c = self.m.costs;
        let kernel = va >= KERNEL_BASE;
        let (root, uid) = if kernel {
            (self.mms[0].root, 0)
        } else {
            match self.user_root(cpu) {
                Some((r, u, _)) => (r, u),
                None => return Err(format!("cpu{cpu} accessed user address {va:#x} with the reserved root")),
            }
        };
        self.stats.tlb_accesses += 1;
        now += c.mem_access;
        for _attempt in 0..3 {
            let asid = self.m.cpus[cpu].asid;
            let hit = self.m.cpus[cpu].tlb.lookup(va, asid);
            if let Some(h) = hit {
                let e = *self.m.cpus[cpu].tlb.entry(h);
                if matches!(h, Hit::L2(_)) {
                    self.stats.l1_tlb_misses += 1;
                    now += c.tlb_l2_hit;
                }
                self.check_use(cpu, e, va, uid, now);
                if write && e.flags & F_WRITE == 0 {
                    now = self.timed_fault(cpu, va, write, now)?;
                    continue;
                }
                if write {
                    self.hw_write(cpu, &e, va);
                }
                return Ok(now);
            }
            self.stats.l1_tlb_misses += 1;
            self.stats.tlb_misses += 1;
            match self.walk_fill(cpu, root, uid, va, false, &mut now) {
                Some(e) if !write || e.flags & F_WRITE != 0 => {
                    if write {
                        self.hw_write(cpu, &e, va);
                    }
                    return Ok(now);
                }
                _ => now = self.timed_fault(cpu, va, write, now)?,
            }
        }
        Err(format!("cpu{cpu}: access to {va:#x} kept faulting"))
    }

    /// A write through `e` (hardware dirty-bit management, arm64 DBM, x86 D): a
    /// 4 KB or 2 MB entry marks its own PTE dirty; a 64 KB entry follows
    /// [`Sim::cont_write`]'s rule. The page is written (ground truth).
    #[inline]
    fn hw_write(&mut self, cpu: usize, e: &TlbEntry, va: u64) {
        if e.flags & F_CONT != 0 {
            self.cont_write(cpu, e, va);
            return;
        }
        let p = self.pt.pte_mut(e.pte);
        p.flags |= P_DIRTY;
        p.written = true;
    }

    fn timed_fault(&mut self, cpu: usize, va: u64, write: bool, now: u64) -> Result<u64, String> {
        let (w0, f0) = (self.walk_cycles, self.fault_cycles);
        let t = self.fault(cpu, va, write, now)?;
        // Walks inside the fault (none today) are part of its serial time.
        self.walk_cycles = w0;
        self.fault_cycles = f0 + (t - now);
        Ok(t)
    }

    /// Walks `root` for `va` and fills the TLB if the PTE is valid.
    fn walk_fill(&mut self, cpu: usize, root: u32, uid: u32, va: u64, spec: bool, now: &mut u64) -> Option<TlbEntry> {
        let c = self.m.costs;
        self.stats.page_walks += 1;
        let kernel = va >= KERNEL_BASE;
        let asid = self.m.cpus[cpu].asid;
        let pwc_hit = self.m.cpus[cpu].tlb.pwc_lookup(va, asid, kernel);
        let w = self.pt.walk(root, va);
        let loads = match (w, pwc_hit) {
            (Some(_), true) => 1,
            (Some(w), false) => w.levels,
            (None, _) => 2,
        };
        let cost = c.walk_start + loads as u64 * c.walk_level;
        *now += cost;
        if !spec {
            self.walk_cycles += cost;
        }
        let w = w?;
        if !w.huge {
            let table = self.pt.table_of(w.pte);
            self.m.pwc_fill(cpu, va, asid, kernel, table, uid);
        }
        let flags = self.pt.pte(w.pte).flags;
        if flags & P_VALID == 0 {
            return None;
        }
        if flags & P_CONT != 0 {
            if let Some(e) = self.fill_cont(cpu, w.pte, uid, va, spec, *now) {
                return Some(e);
            }
        }
        let pte = self.pt.pte_mut(w.pte);
        // The walker sets the access flag (hardware AF management).
        pte.flags |= P_ACCESS;
        let pte = *pte;
        let mut flags = 0;
        if pte.flags & P_GLOBAL != 0 {
            flags |= F_GLOBAL;
        }
        if pte.writable() {
            flags |= F_WRITE;
        }
        let shift = if w.huge {
            flags |= F_HUGE;
            SHIFT_2M
        } else {
            SHIFT_4K
        };
        let e = TlbEntry {
            tag: va >> shift,
            pfn: pte.pfn,
            asid,
            flags,
            valid: true,
            mm_uid: uid,
            ver: pte.ver,
            pte: w.pte,
            ..Default::default()
        };
        if self.m.cpus[cpu].tlb.may_hold_cont() {
            self.check_overlap(cpu, &e, *now);
        }
        self.m.fill(cpu, e, spec);
        Some(e)
    }

    /// A kernel access (always mapped).
    fn kaccess(&mut self, cpu: usize, va: u64, now: u64) -> u64 {
        match self.access(cpu, va, false, now) {
            Ok(t) => t,
            Err(e) => {
                self.error.get_or_insert(e);
                now
            }
        }
    }

    /// The hardware fills the TLB from a random valid PTE of the current root.
    fn spec_fill(&mut self, cpu: usize) {
        let Some((root, uid, mm)) = self.user_root(cpu) else {
            return;
        };
        if mm.is_kernel() {
            return;
        }
        let n = self.mms[mm.index()].vmas.len();
        if n == 0 {
            return;
        }
        let v = self.mms[mm.index()].vmas[(self.rng.next_u64() % n as u64) as usize];
        let va = v.start + (self.rng.next_u64() % v.pages) * 4096;
        let mut t = 0;
        if self.walk_fill(cpu, root, uid, va, true, &mut t).is_some() {
            self.stats.spec_fills += 1;
        }
    }

    /// Returns a uniform random number in [0, 1) from the run's generator.
    fn unit_random(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn vma_of(&self, mm: MmId, va: u64) -> Option<Vma> {
        self.mms[mm.index()].vmas.iter().copied().find(|v| v.start <= va && va < v.end())
    }

    fn new_pte(&mut self, pfn: u64, write: bool) -> Pte {
        let mut flags = P_VALID | P_USER;
        if write {
            flags |= P_WRITE;
        }
        if self.user_global {
            flags |= P_GLOBAL;
        }
        Pte { pfn, flags, ver: self.oracle.next_seq(), ..Pte::default() }
    }

    fn alloc_frame(&mut self, cpu: usize, now: u64) -> u64 {
        let (pfn, obl) = self.frames.alloc();
        self.check_reuse(cpu, obl, || format!("frame {pfn}"), now);
        pfn
    }

    /// Reports `no_reuse_while_mapped` if the frame just handed out, named by
    /// `frame`, was freed under obligation `obl` (0: none) and that obligation's
    /// flush has not returned yet.
    pub(crate) fn check_reuse(&mut self, cpu: usize, obl: u32, frame: impl FnOnce() -> String, now: u64) {
        if obl == 0 || self.oracle.discharged(obl) {
            return;
        }
        let g = self.ghz();
        let v = Violation {
            property: Property::NoReuseWhileMapped.name(),
            cpu: cpu as u32,
            time_ns: now as f64 / g,
            va: "-".into(),
            mm: "-".into(),
            detail: format!("{} handed out again while a TLB may still map it", frame()),
            change: Some(self.oracle.describe_change(obl, g)),
            flush: Some(self.oracle.describe_flush(obl, g)),
        };
        self.oracle.report(v);
    }

    /// A user page fault: demand allocation, copy-on-write, or a stale read-only
    /// entry after an upgrade.
    fn fault(&mut self, cpu: usize, va: u64, write: bool, mut now: u64) -> Result<u64, String> {
        let c = self.m.costs;
        self.stats.page_faults += 1;
        now += c.exception_entry + c.fault_path;
        let Some((root, _, mm)) = self.user_root(cpu) else {
            return Err(format!("cpu{cpu}: fault at {va:#x} without a user root"));
        };
        let vma = self.vma_of(mm, va).ok_or_else(|| format!("segmentation fault: {va:#x} is not mapped in {mm}"))?;
        if write && !vma.write {
            return Err(format!("segmentation fault: write to read-only {va:#x} in {mm}"));
        }
        if self.folios() || vma.file.is_some() {
            let t = self.fault_folio(cpu, mm, vma, va, write, now);
            return Ok(t + c.exception_exit);
        }
        let r = self.pt.ensure_leaf(root, va & !4095);
        let pte = *self.pt.pte(r);
        if !pte.valid() {
            let pfn = self.alloc_frame(cpu, now);
            now += c.page_copy;
            // The slot keeps its floor: an entry from before a flushed unmap or
            // zap of this page stays stale after the page is faulted in again.
            let new = Pte { floor: pte.floor, floor_obl: pte.floor_obl, ..self.new_pte(pfn, vma.write) };
            *self.pt.pte_mut(r) = new;
        } else if write && !pte.writable() {
            if self.frames.refs(pte.pfn) > 1 {
                // Copy-on-write: a new frame replaces the shared one.
                let pfn = self.alloc_frame(cpu, now);
                now += c.page_copy;
                let new = self.new_pte(pfn, true);
                let seq = new.ver;
                *self.pt.pte_mut(r) = new;
                let pf = self.open_flush(cpu, mm, FlushWhat::Page(va & !4095), "cow", seq, vec![r], vec![pte.pfn], now);
                now = self.flush(cpu, pf, now);
            } else {
                let mut new = pte;
                new.flags |= P_WRITE;
                new.ver = self.oracle.next_seq();
                *self.pt.pte_mut(r) = new;
            }
        } else {
            // A stale, weaker entry: the PTE already allows the access.
            self.m.cpus[cpu].tlb.invalidate(Inval::VaAll { va });
            now += c.tlbi_local_va;
        }
        Ok(now + c.exception_exit)
    }

    #[allow(clippy::too_many_arguments)]
    fn open_flush(
        &mut self,
        cpu: usize,
        mm: MmId,
        what: FlushWhat,
        change: &'static str,
        seq: u64,
        changed: Vec<PteRef>,
        frames: Vec<u64>,
        now: u64,
    ) -> PendingFlush {
        let (va, pages, flush) = match what {
            FlushWhat::Page(va) => (va, 1, "flush_page"),
            FlushWhat::Range(va, p) => (va, p, "flush_range"),
            FlushWhat::Mm => (0, 0, "flush_mm"),
            FlushWhat::KernelRange(va, p) => (va, p, "flush_kernel_range"),
        };
        let uid = self.mms[mm.index()].uid;
        let obl = self.oracle.open(mm.0, uid, va, pages, change, flush, seq, cpu as u32, now);
        PendingFlush { obl, mm, what, changed, frames, arch: ptemem::Unflushed::default() }
    }

    /// [`Sim::open_flush`] for an operation that also changed PTEs through the
    /// arch code: `arch` is what its own flushes left owed.
    #[allow(clippy::too_many_arguments)]
    fn open_flush_arch(
        &mut self,
        cpu: usize,
        mm: MmId,
        what: FlushWhat,
        change: &'static str,
        seq: u64,
        frames: Vec<u64>,
        arch: ptemem::Unflushed,
        now: u64,
    ) -> PendingFlush {
        let pf = self.open_flush(cpu, mm, what, change, seq, Vec::new(), frames, now);
        PendingFlush { arch, ..pf }
    }

    /// Runs the policy's flush for a change, discharges its obligation when the
    /// flush returns, then frees the frames the change unmapped.
    pub fn flush(&mut self, cpu: usize, pf: PendingFlush, now: u64) -> u64 {
        let hw = CpuHw::new(&mut self.m, cpu, now);
        match pf.what {
            FlushWhat::Page(va) => self.policy.flush_page(&hw, pf.mm, VirtAddr(va)),
            FlushWhat::Range(va, n) => self.policy.flush_range(&hw, pf.mm, VirtAddr(va), n),
            FlushWhat::Mm => self.policy.flush_mm(&hw, pf.mm),
            FlushWhat::KernelRange(va, n) => self.policy.flush_kernel_range(&hw, VirtAddr(va), n),
        }
        let now = hw.now();
        let seq = self.oracle.obligations[pf.obl as usize].seq;
        self.oracle.obligations[pf.obl as usize].discharged = Some(now);
        for r in &pf.changed {
            let p = self.pt.pte_mut(*r);
            if p.floor < seq {
                p.floor = seq;
                p.floor_obl = pf.obl;
            }
        }
        if !pf.arch.is_empty() {
            self.discharge_unflushed(pf.arch, pf.mm, pf.what, now);
        }
        for pfn in pf.frames {
            self.frames.put(pfn, 0);
        }
        if self.oracle.strict {
            for c in 0..self.m.cpus.len() {
                self.strict_scan(c, now);
            }
        }
        // A flush IPI may have moved a lazy CPU off an exited address space.
        self.reap(cpu, now)
    }

    /// Returns whether `cpu` is lazy: it runs idle or a kernel thread while its
    /// root still points at a user address space (x86 Linux's `is_lazy`).
    pub fn is_lazy(&self, cpu: usize) -> bool {
        self.sched[cpu].loaded.is_kernel() && matches!(self.m.cpus[cpu].root, Root::Mm(mm) if !mm.is_kernel())
    }

    /// `no_stale_held`: does `cpu` hold, under the tag it runs with, an entry
    /// from another address space or one a flushed change superseded, or a walk
    /// cached through a page-table page that has been freed?
    ///
    /// A lazy CPU's leaf entries are not judged: it runs no user code, and the
    /// kernel brings it up to date before it returns to the address space (x86
    /// Linux skips lazy CPUs on purpose and catches up through `tlb_gen` in
    /// `switch_mm_irqs_off`); the scan after that switch judges them. They are
    /// counted in [`Oracle::lazy_exempt`]. Its walk cache is judged like any
    /// CPU's: a speculative walk through a freed table page reads whatever the
    /// page holds next, lazy or not (why Linux sends flushes that free page
    /// tables to lazy CPUs too).
    fn strict_scan(&mut self, cpu: usize, now: u64) {
        let asid = self.m.cpus[cpu].asid;
        let cur = self.user_root(cpu).map(|(_, uid, _)| uid);
        let lazy = self.is_lazy(cpu);
        let mut found: Vec<(TlbEntry, Option<u32>, u64)> = Vec::new();
        let mut exempt = 0;
        let pt = &self.pt;
        self.m.cpus[cpu].tlb.for_each(|e| {
            if !e.usable_under(asid) {
                return;
            }
            let kernel = e.va() >= KERNEL_BASE;
            if !kernel {
                match cur {
                    Some(u) if u != e.mm_uid => {
                        if lazy {
                            exempt += 1;
                        } else {
                            found.push((*e, None, e.va()));
                        }
                        return;
                    }
                    None => return,
                    _ => {}
                }
            }
            let stale = if e.cont() {
                contpte::cont_held_stale(pt, e)
            } else {
                let p = pt.pte(e.pte);
                (e.ver < p.floor).then_some((e.va(), p.floor_obl))
            };
            if let Some((va, obl)) = stale {
                if lazy && !kernel {
                    exempt += 1;
                } else {
                    found.push((*e, Some(obl), va));
                }
            }
        });
        let mut walks = Vec::new();
        self.m.cpus[cpu].tlb.for_each_walk(|w| {
            let usable = if w.global { true } else { cur.is_some() && w.asid == asid };
            if usable && pt.table_freed(w.table) {
                walks.push(w);
            }
        });
        self.oracle.lazy_exempt += exempt;
        let uid = cur.unwrap_or(0);
        for w in walks {
            let v = Violation {
                property: Property::NoStaleHeld.name(),
                cpu: cpu as u32,
                time_ns: now as f64 / self.ghz(),
                va: format!("{:#x}", w.va),
                mm: self.mm_name_of_uid(uid),
                detail: format!(
                    "{}caches a walk (asid {}) of address space uid {} through a freed page-table page (PTE arena \
                     chunk {}) under the running tag: a speculative walk reads whatever the page holds next",
                    if lazy { "lazy, " } else { "" },
                    w.asid,
                    w.mm_uid,
                    w.table.chunk
                ),
                change: None,
                flush: None,
            };
            self.oracle.report(v);
        }
        for (e, obl, va) in found {
            match obl {
                Some(o) => self.report_stale(Property::NoStaleHeld, cpu, va, &e, o, uid, now),
                None => {
                    let v = Violation {
                        property: Property::NoStaleHeld.name(),
                        cpu: cpu as u32,
                        time_ns: now as f64 / self.ghz(),
                        va: format!("{:#x}", e.va()),
                        mm: self.mm_name_of_uid(uid),
                        detail: format!(
                            "holds an entry (asid {}) filled from address space uid {} under the running tag",
                            e.asid, e.mm_uid
                        ),
                        change: None,
                        flush: None,
                    };
                    self.oracle.report(v);
                }
            }
        }
    }

    fn syscall(&mut self, cpu: usize, tid: usize, s: Sys, mut now: u64) -> u64 {
        let c = self.m.costs;
        let mm = self.threads[tid].mm;
        if mm.is_kernel()
            && matches!(
                s,
                Sys::Mmap { .. }
                    | Sys::MmapFile { .. }
                    | Sys::MmapFixed { .. }
                    | Sys::Munmap { .. }
                    | Sys::Mprotect { .. }
                    | Sys::Madvise { .. }
                    | Sys::Fork(_)
                    | Sys::Execve
            )
        {
            self.error.get_or_insert(
                "a kernel thread has no user address space to map, unmap, protect, advise, fork or exec".into(),
            );
            return now;
        }
        match s {
            Sys::Mmap { pages, write } => {
                self.threads[tid].ret = self.mmap(mm, pages, write, None);
                now + c.fault_path
            }
            Sys::MmapFile { file, pages, write } => {
                self.threads[tid].ret = self.mmap(mm, pages, write, Some(file));
                now + c.fault_path
            }
            Sys::MmapFixed { va, pages, write } => {
                self.threads[tid].ret = va;
                self.mmap_fixed(cpu, mm, va, pages, write, now)
            }
            Sys::Munmap { va, pages } => self.munmap(cpu, mm, va, pages, now),
            Sys::Mprotect { va, pages, write } => self.mprotect(cpu, mm, va, pages, write, now),
            Sys::Fork(child) => self.fork(cpu, tid, child, now),
            Sys::Clone(thread) => self.clone_thread(cpu, tid, thread, now),
            Sys::Madvise { va, pages } => self.madvise_dontneed(cpu, mm, va, pages, now),
            Sys::Execve => self.execve(cpu, tid, now),
            Sys::KernelMapCycle { pages } => self.kmap_cycle(cpu, pages, now),
            Sys::Pipe => {
                let kva = self.kalloc_page();
                self.pipes.push(Pipe { count: 0, waiters: VecDeque::new(), kva });
                self.threads[tid].ret = (self.pipes.len() - 1) as u32 as u64;
                now + c.pipe_op
            }
            Sys::PipeWrite(p) => {
                let Some(pipe) = self.pipes.get_mut(p as usize) else {
                    self.error.get_or_insert(format!("write to unknown pipe {p}"));
                    return now;
                };
                pipe.count += 1;
                let kva = pipe.kva;
                let waiter = pipe.waiters.pop_front();
                now = self.kaccess(cpu, self.ktext + KTEXT_IPC, now);
                now = self.kaccess(cpu, kva, now + c.pipe_op);
                if let Some(w) = waiter {
                    now = self.kaccess(cpu, self.threads[w].tstruct, now);
                    self.wake(w, cpu, now);
                }
                now
            }
            Sys::PipeRead(p) => self.pipe_read(cpu, tid, p, now),
            Sys::Yield => {
                self.threads[tid].state = State::Runnable;
                self.sched[cpu].runq.push_back(tid);
                self.sched[cpu].cur = None;
                now
            }
        }
    }

    /// Places a mapping of `pages` pages (of `file` from its start, shared, if
    /// given) above the address space's previous ones; returns its address. With
    /// large folios the start is 64 KB-aligned, so that every whole block of it
    /// can be mapped by one folio.
    fn mmap(&mut self, mm: MmId, pages: u64, write: bool, file: Option<u32>) -> u64 {
        let folios = self.cont.mode != ContMode::Off;
        let m = &mut self.mms[mm.index()];
        let va = if folios { m.mmap_next.next_multiple_of(CONT_PTES * 4096) } else { m.mmap_next };
        m.mmap_next = va + (pages + 16) * 4096;
        m.vmas.push(Vma { start: va, pages, write, file, pgoff: 0 });
        va
    }

    /// `mmap(MAP_FIXED)` of `pages` anonymous pages at `va`: what the range
    /// mapped is zapped (flushed only where a PTE was present) and replaced.
    fn mmap_fixed(&mut self, cpu: usize, mm: MmId, va: u64, pages: u64, write: bool, now: u64) -> u64 {
        let end = pages.checked_mul(4096).and_then(|b| va.checked_add(b)).filter(|&e| e <= USER_VA_END);
        let Some(end) = end.filter(|_| va.is_multiple_of(4096) && pages > 0) else {
            self.error.get_or_insert(format!(
                "mmap: {pages} page(s) at {va:#x} are not page-aligned user memory below {USER_VA_END:#x}"
            ));
            return now;
        };
        let mut now = now + self.m.costs.fault_path;
        if self.mms[mm.index()].vmas.iter().any(|v| v.start < end && va < v.end()) {
            self.split_vmas(mm, va, pages);
            self.mms[mm.index()].vmas.retain(|v| v.end() <= va || v.start >= end);
            now = self.zap_range(cpu, mm, va, pages, "mmap-fixed", now);
        }
        let m = &mut self.mms[mm.index()];
        m.vmas.push(Vma { start: va, pages, write, file: None, pgoff: 0 });
        if end > m.mmap_next {
            m.mmap_next = end + 16 * 4096;
        }
        now
    }

    fn pipe_read(&mut self, cpu: usize, tid: usize, p: u32, now: u64) -> u64 {
        let c = self.m.costs;
        let Some(pipe) = self.pipes.get_mut(p as usize) else {
            self.error.get_or_insert(format!("read from unknown pipe {p}"));
            return now;
        };
        let kva = pipe.kva;
        let now = self.kaccess(cpu, self.ktext + KTEXT_IPC, now);
        let Some(pipe) = self.pipes.get_mut(p as usize) else {
            return now;
        };
        if pipe.count > 0 {
            pipe.count -= 1;
            return self.kaccess(cpu, kva, now + c.pipe_op);
        }
        pipe.waiters.push_back(tid);
        self.threads[tid].state = State::Blocked;
        self.threads[tid].retry_read = Some(p);
        self.sched[cpu].cur = None;
        self.kaccess(cpu, kva, now + c.pipe_op)
    }

    /// Splits VMAs so that `[va, va + pages)` starts and ends on VMA boundaries.
    fn split_vmas(&mut self, mm: MmId, va: u64, pages: u64) {
        let end = va + pages * 4096;
        let vmas = &mut self.mms[mm.index()].vmas;
        let inside = |v: &Vma, x: u64| v.start < x && x < v.end();
        if !vmas.iter().any(|v| inside(v, va) || inside(v, end)) {
            // Already on boundaries (an mprotect loop's common case): nothing to allocate.
            return;
        }
        let mut out = Vec::with_capacity(vmas.len() + 2);
        for v in vmas.drain(..) {
            let (mut cuts, mut n) = ([v.start; 4], 1);
            for x in [va, end] {
                if inside(&v, x) {
                    cuts[n] = x;
                    n += 1;
                }
            }
            cuts[n] = v.end();
            for w in cuts[..=n].windows(2) {
                let pgoff = v.pgoff + (w[0] - v.start) / 4096;
                out.push(Vma { start: w[0], pages: (w[1] - w[0]) / 4096, pgoff, ..v });
            }
        }
        *vmas = out;
    }

    fn munmap(&mut self, cpu: usize, mm: MmId, va: u64, pages: u64, now: u64) -> u64 {
        self.split_vmas(mm, va, pages);
        let end = va + pages * 4096;
        self.mms[mm.index()].vmas.retain(|v| v.end() <= va || v.start >= end);
        if self.folios() {
            let now = now + self.m.costs.fault_path;
            let (now, owed, frames, _) = self.zap_folio(cpu, mm, va, pages, "munmap", now);
            let seq = self.oracle.next_seq();
            let what = FlushWhat::Range(va, pages);
            let pf = self.open_flush_arch(cpu, mm, what, "munmap", seq, frames, owed, now);
            return self.flush(cpu, pf, now);
        }
        let root = self.mms[mm.index()].root;
        let seq = self.oracle.next_seq();
        let mut changed = Vec::new();
        let mut frames = Vec::new();
        let pt = &mut self.pt;
        let mut slots = Vec::new();
        pt.for_each_slot(root, va, pages, |_, r| slots.push(r));
        for r in slots {
            let p = pt.pte_mut(r);
            if p.valid() {
                frames.push(p.pfn);
                p.flags = 0;
                p.ver = seq;
                changed.push(r);
            }
        }
        let pf = self.open_flush(cpu, mm, FlushWhat::Range(va, pages), "munmap", seq, changed, frames, now);
        self.flush(cpu, pf, now + self.m.costs.fault_path)
    }

    fn mprotect(&mut self, cpu: usize, mm: MmId, va: u64, pages: u64, write: bool, now: u64) -> u64 {
        self.split_vmas(mm, va, pages);
        let end = va + pages * 4096;
        for v in &mut self.mms[mm.index()].vmas {
            if v.start >= va && v.end() <= end {
                v.write = write;
            }
        }
        let c = self.m.costs;
        let mut now = now + c.fault_path;
        if self.folios() && !write {
            let (now, owed, present) = self.wrprotect_folio(cpu, mm, va, pages, now);
            if present == 0 {
                return now;
            }
            let seq = self.oracle.next_seq();
            let pf = self.open_flush_arch(cpu, mm, FlushWhat::Range(va, pages), "mprotect", seq, Vec::new(), owed, now);
            return self.flush(cpu, pf, now);
        }
        let root = self.mms[mm.index()].root;
        let seq = self.oracle.next_seq();
        let mut changed = Vec::new();
        let mut slots = Vec::new();
        self.pt.for_each_slot(root, va, pages, |_, r| slots.push(r));
        // Linux's change_pte_range rewrites every present PTE (an atomic exchange
        // and a store) and flushes the whole range if it met any, upgrade or not.
        // An upgrade of private anonymous memory leaves the PTEs read-only (write
        // access comes back per page through write faults), so only downgrades
        // change what the TLBs may hold.
        let mut present = 0;
        for r in slots {
            let p = self.pt.pte_mut(r);
            if !p.valid() {
                continue;
            }
            present += 1;
            if !write && p.writable() {
                p.flags &= !P_WRITE;
                p.ver = seq;
                changed.push(r);
            }
        }
        now += present * c.mem_access * 4;
        if present == 0 {
            return now;
        }
        let pf = self.open_flush(cpu, mm, FlushWhat::Range(va, pages), "mprotect", seq, changed, Vec::new(), now);
        self.flush(cpu, pf, now)
    }

    fn fork(&mut self, cpu: usize, tid: usize, child: Box<dyn Program>, mut now: u64) -> u64 {
        let c = self.m.costs;
        let parent = self.threads[tid].mm;
        let Some(cm) = self.new_mm() else {
            self.error.get_or_insert(format!("fork: more than {} address spaces", self.cfg.max_mms));
            return now;
        };
        let vmas = self.mms[parent.index()].vmas.clone();
        self.mms[cm.index()].vmas = vmas.clone();
        self.mms[cm.index()].mmap_next = self.mms[parent.index()].mmap_next;
        let (proot, croot) = (self.mms[parent.index()].root, self.mms[cm.index()].root);
        let seq = self.oracle.next_seq();
        let mut changed = Vec::new();
        let mut owed = ptemem::Unflushed::default();
        for v in &vmas {
            if v.file.is_some() {
                // A shared file mapping's PTEs are not copied: the child faults them in.
                continue;
            }
            if self.folios() {
                let (t, o) = self.copy_folio_vma(cpu, parent, cm, *v, now);
                now = t;
                owed.append(o);
                continue;
            }
            let mut slots = Vec::new();
            self.pt.for_each_slot(proot, v.start, v.pages, |va, r| slots.push((va, r)));
            for (va, r) in slots {
                let mut p = *self.pt.pte(r);
                if !p.valid() {
                    continue;
                }
                now += c.mem_access * 4;
                if p.writable() {
                    p.flags &= !P_WRITE;
                    p.ver = seq;
                    *self.pt.pte_mut(r) = p;
                    changed.push(r);
                }
                self.frames.get(p.pfn);
                let cr = self.pt.ensure_leaf(croot, va);
                let mut cp = p;
                cp.ver = seq;
                cp.floor = 0;
                cp.floor_obl = 0;
                *self.pt.pte_mut(cr) = cp;
            }
        }
        // Fork balancing places the child on the least-loaded CPU, as both
        // kernels do; `migration` only governs moving threads afterwards.
        let ccpu = self.least_loaded();
        let ct = self.new_thread(cm, child, ccpu);
        self.threads[tid].ret = ct as u64;
        now += c.fault_path * 4;
        let mut pf = self.open_flush(cpu, parent, FlushWhat::Mm, "fork-wrprotect", seq, changed, Vec::new(), now);
        pf.arch = owed;
        now = self.flush(cpu, pf, now);
        self.enqueue(ct, ccpu, now, cpu);
        now
    }

    fn exit(&mut self, cpu: usize, tid: usize, now: u64) -> u64 {
        let mm = self.threads[tid].mm;
        self.threads[tid].state = State::Dead;
        self.sched[cpu].cur = None;
        self.live -= 1;
        let m = &mut self.mms[mm.index()];
        m.users -= 1;
        if m.users > 0 || mm.is_kernel() {
            return now;
        }
        // Last user: tear the address space down while it is still current here
        // (FreeBSD pmap_remove_pages), switch away, then release it.
        self.in_exit = true;
        let start = now;
        let now = self.teardown(cpu, mm, "exit", now);
        self.in_exit = false;
        self.stats.exits += 1;
        self.stats.exit_teardown_cycles += now - start;
        // The exiting thread's CPU leaves the address space (`exit_mm` calls
        // `enter_lazy_tlb` with the exiting task, not the idle one); a lazy-TLB
        // policy may keep it loaded, and then it lives on (Linux's mmgrab by the
        // lazy `active_mm`) until no CPU's root points at it.
        self.enter_lazy(cpu, Lazy::KernelThread, now)
    }

    /// Tears down `mm`, whose last user is leaving it while it is still current on
    /// `cpu`: clears every PTE, flushes the whole address space, frees the frames
    /// after the flush, and queues `mm` for release once no CPU's root points at
    /// it (the caller switches this CPU away). `change` names the teardown for the
    /// oracle. Returns the time after the flush.
    fn teardown(&mut self, cpu: usize, mm: MmId, change: &'static str, mut now: u64) -> u64 {
        let m = &mut self.mms[mm.index()];
        let root = m.root;
        let vmas = std::mem::take(&mut m.vmas);
        if self.folios() {
            let (t, owed, frames) = self.teardown_folio(cpu, mm, &vmas, change, now);
            let seq = self.oracle.next_seq();
            let pf = self.open_flush_arch(cpu, mm, FlushWhat::Mm, change, seq, frames, owed, t);
            now = self.flush(cpu, pf, t);
            self.zombies.push(mm);
            self.reaped_at = None;
            return now;
        }
        let seq = self.oracle.next_seq();
        let mut frames = Vec::new();
        for v in &vmas {
            let mut slots = Vec::new();
            self.pt.for_each_slot(root, v.start, v.pages, |_, r| slots.push(r));
            for r in slots {
                let p = self.pt.pte_mut(r);
                if p.valid() {
                    frames.push(p.pfn);
                    p.flags = 0;
                    p.ver = seq;
                    now += self.m.costs.mem_access;
                }
            }
        }
        let pf = self.open_flush(cpu, mm, FlushWhat::Mm, change, seq, Vec::new(), frames, now);
        now = self.flush(cpu, pf, now);
        self.zombies.push(mm);
        self.reaped_at = None;
        now
    }

    /// `clone` of a thread into the caller's address space.
    fn clone_thread(&mut self, cpu: usize, tid: usize, thread: Box<dyn Program>, mut now: u64) -> u64 {
        let mm = self.threads[tid].mm;
        let target = self.least_loaded_near(cpu);
        let t = self.new_thread(mm, thread, target);
        self.threads[tid].ret = t as u64;
        // Thread creation (kernel stack, thread structure, register copy) is about
        // half of fork's fixed software path, which also copies the address space:
        // an estimate, as fork's is.
        now += self.m.costs.fault_path * 2;
        self.enqueue(t, target, now, cpu);
        now
    }

    /// `madvise(MADV_DONTNEED)`: zaps the range's PTEs, keeps its VMAs, and
    /// flushes the span of pages actually zapped (Linux's `mmu_gather` grows its
    /// range only when it clears a PTE, and flushes nothing when it cleared none).
    fn madvise_dontneed(&mut self, cpu: usize, mm: MmId, va: u64, pages: u64, now: u64) -> u64 {
        let end = va + pages * 4096;
        let covered: u64 =
            self.mms[mm.index()].vmas.iter().map(|v| v.end().min(end).saturating_sub(v.start.max(va)) / 4096).sum();
        if !va.is_multiple_of(4096) || covered != pages {
            self.error.get_or_insert(format!(
                "madvise: {pages} page(s) at {va:#x} are not all mapped (or not page-aligned) in {mm}"
            ));
            return now;
        }
        // The zap path: VMA lookup and page-table walk, as munmap's.
        let now = now + self.m.costs.fault_path;
        self.zap_range(cpu, mm, va, pages, "madvise", now)
    }

    /// Clears the present PTEs of `pages` pages at `va` (named `change` for the
    /// oracle), flushes the span of pages actually cleared (nothing when none
    /// was) and frees their frames after the flush: `madvise(MADV_DONTNEED)`'s
    /// zap, which a `MAP_FIXED` mapping also makes of what it replaces.
    fn zap_range(&mut self, cpu: usize, mm: MmId, va: u64, pages: u64, change: &'static str, now: u64) -> u64 {
        if self.folios() {
            let (now, owed, frames, span) = self.zap_folio(cpu, mm, va, pages, change, now);
            let Some((lo, hi)) = span else {
                return self.flush_unflushed(cpu, mm, change, owed, now);
            };
            let seq = self.oracle.next_seq();
            let what = FlushWhat::Range(lo, (hi - lo) / 4096 + 1);
            let pf = self.open_flush_arch(cpu, mm, what, change, seq, frames, owed, now);
            return self.flush(cpu, pf, now);
        }
        let root = self.mms[mm.index()].root;
        let seq = self.oracle.next_seq();
        let mut slots = Vec::new();
        self.pt.for_each_slot(root, va, pages, |a, r| slots.push((a, r)));
        let (mut changed, mut frames) = (Vec::new(), Vec::new());
        let (mut lo, mut hi) = (u64::MAX, 0);
        for (a, r) in slots {
            let p = self.pt.pte_mut(r);
            if p.valid() {
                frames.push(p.pfn);
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

    /// `execve`: a fresh address space with a new image replaces the caller's,
    /// which is torn down as exit tears down a last user's.
    fn execve(&mut self, cpu: usize, tid: usize, mut now: u64) -> u64 {
        let old = self.threads[tid].mm;
        if self.mms[old.index()].users > 1 {
            self.error.get_or_insert(format!(
                "execve from {old}, which has {} threads: the simulated kernel does not end the other threads",
                self.mms[old.index()].users
            ));
            return now;
        }
        let Some(new) = self.new_mm() else {
            self.error.get_or_insert(format!("execve: more than {} address spaces", self.cfg.max_mms));
            return now;
        };
        self.map_image(new);
        // Image activation (reading the header, building the stack and arguments)
        // is costed like fork's fixed path: an estimate.
        now += self.m.costs.fault_path * 4;
        self.threads[tid].mm = new;
        self.mms[new.index()].users = 1;
        self.mms[old.index()].users = 0;
        now = self.teardown(cpu, old, "execve", now);
        self.switch_mm(cpu, new, now)
    }

    /// A kernel map cycle: map buffer pages at a pool VA (`pmap_qenter`), copy
    /// each one, unmap them (`pmap_qremove`) and invalidate the range on every CPU.
    fn kmap_cycle(&mut self, cpu: usize, pages: u64, mut now: u64) -> u64 {
        if pages == 0 || pages > KMAP_SLOT_PAGES {
            self.error.get_or_insert(format!("kernel map cycle of {pages} pages: give 1 to {KMAP_SLOT_PAGES}"));
            return now;
        }
        let c = self.m.costs;
        let va = KMAP_BASE + (self.kmap_next % KMAP_SLOTS) * KMAP_SLOT_PAGES * 4096;
        self.kmap_next += 1;
        let kroot = self.mms[0].root;
        // pmap_qenter: one global PTE store per page. The pool's PTEs are invalid
        // between cycles, so entering them needs no invalidation (FreeBSD
        // invalidates only when an old PTE was valid).
        let mut slots = Vec::with_capacity(pages as usize);
        for i in 0..pages {
            let pfn = self.alloc_frame(cpu, now);
            let r = self.pt.ensure_leaf(kroot, va + i * 4096);
            let old = *self.pt.pte(r);
            debug_assert!(!old.valid(), "kernel map pool slot still mapped");
            let ver = self.oracle.next_seq();
            // The slot keeps its floor, so an entry from an earlier cycle stays stale.
            *self.pt.pte_mut(r) = Pte {
                pfn,
                flags: P_VALID | P_WRITE | P_GLOBAL | P_ACCESS,
                ver,
                floor: old.floor,
                floor_obl: old.floor_obl,
                written: false,
            };
            slots.push(r);
            now += c.mem_access;
        }
        // The copy (uiomove): a write to each page through the TLB, and the copy itself.
        for i in 0..pages {
            now = match self.access(cpu, va + i * 4096, true, now) {
                Ok(t) => t + c.page_copy,
                Err(e) => {
                    self.error.get_or_insert(e);
                    return now;
                }
            };
        }
        // pmap_qremove: clear each PTE, then one ranged invalidation of kernel_pmap.
        let seq = self.oracle.next_seq();
        let mut frames = Vec::with_capacity(slots.len());
        for &r in &slots {
            let p = self.pt.pte_mut(r);
            frames.push(p.pfn);
            p.flags = 0;
            p.ver = seq;
            now += c.mem_access;
        }
        let pf = self.open_flush(
            cpu,
            MmId::KERNEL,
            FlushWhat::KernelRange(va, pages),
            "kmap-unmap",
            seq,
            slots,
            frames,
            now,
        );
        self.flush(cpu, pf, now)
    }

    /// Releases every exited address space no CPU's root still points at: frees
    /// its page tables, lets the policy release it and frees its slot.
    fn reap(&mut self, cpu: usize, mut now: u64) -> u64 {
        let releases = self.m.root_releases();
        if self.zombies.is_empty() || self.reaped_at == Some(releases) {
            return now;
        }
        // A release during the scan (by `mm_release`) makes the next call scan again.
        self.reaped_at = Some(releases);
        let mut i = 0;
        while i < self.zombies.len() {
            let mm = self.zombies[i];
            if self.m.roots_on(mm) > 0 {
                i += 1;
                continue;
            }
            self.zombies.swap_remove(i);
            self.pt.free_tree(self.mms[mm.index()].root);
            let hw = CpuHw::new(&mut self.m, cpu, now);
            self.policy.mm_release(&hw, mm);
            now = hw.now();
            self.mms[mm.index()].alive = false;
            self.free_slots.push(mm.0);
        }
        now
    }

    /// Returns the number of threads not yet exited.
    pub fn live_threads(&self) -> usize {
        self.live
    }

    /// Returns the time of the latest mark called `name`, in cycles.
    pub fn mark(&self, name: &str) -> Option<u64> {
        self.marks.iter().rev().find(|(n, _, _)| *n == name).map(|(_, t, _)| *t)
    }

    /// Returns the counters as they were at the latest mark called `name`.
    pub fn mark_stats(&self, name: &str) -> Option<Stats> {
        self.marks.iter().rev().find(|(n, _, _)| *n == name).map(|(_, _, s)| *s)
    }

    /// Returns the ASID tag `cpu` runs with (for tests).
    pub fn cpu_asid(&self, cpu: usize) -> u16 {
        self.m.cpus[cpu].asid
    }
}
