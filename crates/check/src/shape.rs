//! The shape of the checked machine and of its exploration ([`Shape`]): its
//! CPUs, address spaces and pages, its memory model, its kernel's locking and
//! page-out path, a kernel-side bug, the operations offered.

/// Which memory model the execution follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Memory {
    /// Sequential consistency: every store is visible to every CPU at once.
    Sc,
    /// x86-TSO: plain stores wait in a per-CPU FIFO store buffer (visible to
    /// their own CPU's loads) until drained.
    Tso,
    /// The arm64 mode: store buffers as weak as Armv8 lets one CPU's stores
    /// be (a store leaves before older ones unless one writes its location or
    /// it is a store-release; a `SeqCst` store is a store-release, a load- or
    /// read-modify-write-acquire waits for the store-releases before it, and a
    /// read-modify-write without release waits only for stores to its own
    /// location: `exec::buffer`), and what arm64 adds around TLB maintenance:
    /// a root write (`MSR TTBR0_EL1`) drains nothing, so a store before it
    /// reaches other CPUs (and the walker) only at a later barrier (the `DSB
    /// ISHST` the kernel puts before it, or `__switch_to`'s `DSB ISH`); and a
    /// `DSB` that completes invalidations may complete them before the stores
    /// it drains are visible, so a walk in between refills from the page table
    /// as it was (a `TLBI` not ordered after its PTE store by `DSB ISHST`).
    /// Plain loads may be satisfied out of order: one may read a value
    /// overwritten since its CPU's last ordering point (`exec::stale`).
    /// Only for arm64 policies.
    Arm,
}

impl Memory {
    /// Every model, in the order the command line lists them.
    pub const ALL: [Memory; 3] = [Memory::Sc, Memory::Tso, Memory::Arm];

    /// Returns the model called `name` on the command line ([`Memory::name`]).
    pub fn from_name(name: &str) -> Option<Memory> {
        Memory::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Returns the model's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Memory::Sc => "sc",
            Memory::Tso => "tso",
            Memory::Arm => "arm",
        }
    }

    /// Returns whether plain stores wait in store buffers.
    pub fn buffered(self) -> bool {
        self != Memory::Sc
    }
}

/// The kernel-side bugs the checker's kernel can carry (policy bugs are
/// switches in the policy crate).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelBug {
    /// A page-table page is freed before the flush that covers it returns.
    TableFreeBeforeFlush,
    /// No `flush_tlb_batched_pending`: `munmap` and `madvise` neither look at
    /// nor complete what a reclaim of the same mm has left deferred (Linux before
    /// 3ea277194daa, v4.13).
    NoBatchedPending,
    /// The whole-range unmap is khugepaged's `collapse_pte_mapped_thp` before
    /// 3ef938c35035: `pmdp_collapse_flush` unhooks the PTE table and flushes
    /// with `flush_tlb_range`, which told x86 no page table was freed, before
    /// the table is freed.
    CollapseRangeFlush,
    /// Linux arm64's `__switch_to` issues no `DSB` (before 5108c67c376b,
    /// v3.10): a thread preempted between its `TLBI` and its `DSB ISH` leaves
    /// the `TLBI` incomplete on the CPU it left until that CPU's next barrier.
    NoSwitchToDsb,
}

/// The shape of the machine and of the exploration.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Shape {
    /// CPUs.
    pub cpus: usize,
    /// Address-space slots (processes at the start).
    pub mms: usize,
    /// Kernel operations in all, over all CPUs.
    pub ops: usize,
    /// Pages each address space maps (1 to [`crate::kernel::MAX_PAGES`]).
    pub pages: usize,
    /// Whether the policy is a Linux one: its kernel takes the `mmap_lock`
    /// (a reader-writer semaphore) per operation as Linux does, and flushes
    /// outside the PTE lock, so flushes of one address space overlap; otherwise
    /// FreeBSD's `PMAP_LOCK`, held across every change and its shootdown.
    pub linux: bool,
    /// Whether a Linux `munmap` downgrades the `mmap_lock` to its read side for
    /// the zap and the flush (v4.20's dd2283f2605e on); false for v4.10's
    /// kernel, whose `munmap` holds the write side until it returns (and for
    /// FreeBSD, which holds `PMAP_LOCK` throughout anyway).
    pub munmap_downgrades: bool,
    /// The memory model.
    pub memory: Memory,
    /// How the kernel reclaims a page of a process no CPU needs to run: the
    /// flush its page-out path calls (offered on every policy).
    pub reclaim: Reclaim,
    /// Whether the policy is arm64's: its kernel clears a PTE with a relaxed
    /// exchange, whose store may wait in the store buffer (under TSO) until a
    /// barrier, where x86's `LOCK XCHG` is visible at once.
    pub arm64: bool,
    /// A kernel-side bug, if any.
    pub bug: Option<KernelBug>,
    /// Which kinds of kernel operation CPUs may start (bits of
    /// [`crate::ops::OpKind`]).
    pub menu: u32,
    /// With contiguous PTEs: how an exit tears the block down (see
    /// the `block` module); `None`: no block.
    pub teardown: Option<tlbkit_policy::contpte::Teardown>,
    /// When pending invalidations complete.
    pub completion: Completion,
}

/// When an invalidation that waits for a barrier ([`crate::kernel::Pending`])
/// completes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Completion {
    /// At the latest point the architecture allows: its issuing CPU's
    /// completing barrier (the default; `kernel::Pending` argues that it
    /// covers every earlier point).
    #[default]
    Latest,
    /// At any point from its issue to that barrier: the scheduler may also
    /// complete a CPU's first pending invalidation as a step of its own. For
    /// checking the argument at small bounds (up to [`max_cpus`]
    /// CPUs, the labels a scheduling point may have).
    Any,
}

/// The most CPUs a search of `memory` and `completion` may have: every kind of
/// option a scheduling point has per CPU (run, drain, the arm mode's second
/// drain, an early completion) must fit the visited set's 16-label sleep mask.
pub fn max_cpus(memory: Memory, completion: Completion) -> usize {
    let per_cpu = 2 + usize::from(memory == Memory::Arm) + usize::from(completion == Completion::Any);
    (16 / per_cpu).min(8)
}

/// Reads `--memory`'s value, `NAME[+any]`: the memory model, and with `+any`
/// invalidations that may complete at any point ([`Completion::Any`]).
pub fn parse_memory(text: &str) -> Option<(Memory, Completion)> {
    let (name, completion) = match text.split_once('+') {
        Some((name, "any")) => (name, Completion::Any),
        Some(_) => return None,
        None => (text, Completion::Latest),
    };
    Some((Memory::from_name(name)?, completion))
}

/// Writes what [`parse_memory`] reads.
pub fn memory_text(memory: Memory, completion: Completion) -> &'static str {
    match (memory, completion) {
        (m, Completion::Latest) => m.name(),
        (Memory::Sc, Completion::Any) => "sc+any",
        (Memory::Tso, Completion::Any) => "tso+any",
        (Memory::Arm, Completion::Any) => "arm+any",
    }
}

/// How a kernel takes a page away from a process while reclaiming memory: the
/// flush its page-out path calls. Either kernel does it from a kernel thread, for
/// an address space that may run on other CPUs or on none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reclaim {
    /// Linux: `kswapd` clears the PTE in `try_to_unmap_one`, queues the mm for
    /// the deferred flush (`set_tlb_ubc_flush_pending`), and `try_to_unmap_flush`
    /// flushes every queued mm at once ([`tlbkit_policy::Policy::flush_batch`]; mm/rmap.c).
    LinuxBatched,
    /// FreeBSD: the page daemon (`vm_pageout_scan_inactive` -> `vm_pageout_clean`
    /// / `vm_page_try_remove_all` -> `pmap_remove_all`) takes each mapping's pmap
    /// lock, clears the PTE and calls `pmap_invalidate_page(pmap, va)` for that
    /// pmap ([`tlbkit_policy::Policy::flush_page`]), loaded on some CPU or on none
    /// (sys/amd64/amd64/pmap.c and sys/arm64/arm64/pmap.c, `pmap_remove_all`).
    FreebsdPageDaemon,
}
