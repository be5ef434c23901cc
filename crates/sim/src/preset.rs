//! Machines: topology, TLB geometry and costs, one file per machine.
//!
//! The types a machine is made of are here; the machines themselves are data,
//! one TOML file each in `crates/sim/machines/` ([`mod@file`] reads them). Every
//! field carries its source or `estimate: why`: a preset's costs are its
//! architecture's base (`machines/base/arm64.toml`, `x86-64.toml`) with the
//! figures that differ set in the preset's own file, with their sources. The
//! long-form notes, with the measurements each figure is derived from, are in
//! `docs/costs/<preset>.md`. Costs are per machine, never per claim: every
//! workload and policy on a preset uses the same table.

pub use crate::kernel::Kernel;
use std::collections::BTreeMap;
use std::sync::OnceLock;

pub mod file;
pub mod host;
pub mod vary;

/// The instruction-set family (the registry's), which decides the policies that can run.
pub use tlbkit_registry::Arch;

/// TLB and walk-cache geometry of one core.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TlbGeometry {
    /// L1 data TLB entries (fully associative).
    pub l1d_entries: usize,
    /// Unified L2 TLB entries.
    pub l2_entries: usize,
    /// Unified L2 TLB ways.
    pub l2_ways: usize,
    /// Page-walk cache entries (cached level-2 table descriptors).
    pub pwc_entries: usize,
}

/// What each hardware operation costs, in cycles.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Costs {
    /// One ordinary load or store that hits the L1 data cache.
    pub mem_access: u64,
    /// Extra cycles of an L1 TLB miss that hits the L2 TLB.
    pub tlb_l2_hit: u64,
    /// One page-table load during a walk (the table line is in the cache hierarchy).
    pub walk_level: u64,
    /// Fixed overhead of starting a walk after an L2 TLB miss.
    pub walk_start: u64,
    /// The local TLB invalidations.
    #[serde(flatten)]
    pub local: LocalTlbiCosts,
    /// The broadcast invalidations and the interconnect that carries them.
    #[serde(flatten)]
    pub dvm: DvmCosts,
    /// `DSB` (without waiting for outstanding broadcast invalidations); on x86
    /// with `INVLPGB`, `TLBSYNC`'s own cost besides that wait.
    pub dsb: u64,
    /// `ISB`.
    pub isb: u64,
    /// A full memory barrier between ordinary accesses: arm64's `DMB ISH`,
    /// x86's `MFENCE` (the kernel's `smp_mb()` before Linux v4.15; from
    /// v4.15 a locked add, which costs `atomic_hit`: [`Preset::smp_mb_cost`]).
    pub full_barrier: u64,
    /// Writing the translation root (`MSR TTBR0_EL1`, `MOV CR3` with NOFLUSH), without the ISB.
    pub root_write: u64,
    /// Extra cycles of a root write that flushes the tag's entries (x86 `MOV CR3`
    /// without NOFLUSH); arm64 never writes the root that way.
    pub root_write_flush: u64,
    /// Exception entry (SVC, fault, IRQ) including register save.
    pub exception_entry: u64,
    /// Exception return (`ERET`) including register restore.
    pub exception_exit: u64,
    /// Inter-processor interrupts.
    #[serde(flatten)]
    pub ipi: IpiCosts,
    /// Cache-line transfers between CPUs.
    #[serde(flatten)]
    pub lines: LineCosts,
    /// The kernel's own paths.
    #[serde(flatten)]
    pub kernel: KernelPathCosts,
    /// The idle states an idle CPU waits in and what leaving them costs.
    #[serde(flatten)]
    pub idle: IdleCosts,
    /// Independent loads of one multi-page touch the out-of-order core overlaps
    /// (fill buffers and L2 TLB ports): their L1/L2 TLB and cache latency is divided by this.
    pub mlp: u64,
    /// Page walks the core runs at once: the walk latency of a multi-page touch
    /// is divided by this.
    pub walkers: u64,
}

/// The local TLB invalidations (this CPU's TLB only), in cycles.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LocalTlbiCosts {
    /// A local TLBI by VA (`TLBI VAE1`/`VALE1`, `INVLPG`).
    pub tlbi_local_va: u64,
    /// A local TLBI of one ASID (`TLBI ASIDE1`, `INVPCID` type 1).
    pub tlbi_local_asid: u64,
    /// A local TLBI of everything (`TLBI VMALLE1`).
    pub tlbi_local_all: u64,
    /// x86 `INVPCID` type 0 (individual address): one page of a PCID other than
    /// the one in CR3, since `INVLPG` acts on the current PCID only (Intel SDM
    /// vol. 2A, INVLPG and INVPCID). A local by-VA invalidation of a tag other
    /// than CR3's is charged this (Linux's page-table isolation flushes the user
    /// PCID's page so). Zero where the machine has no `INVPCID`
    /// ([`Preset::invpcid`]), and on arm64, whose `TLBI VAE1` names any ASID at
    /// `tlbi_local_va`.
    pub invpcid_va: u64,
}

/// A broadcast TLB invalidation's costs and the interconnect's (DVM) limits, in cycles or counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DvmCosts {
    /// Issuing one broadcast TLBI (`TLBI ...IS`, AMD `INVLPGB`) into the interconnect.
    ///
    /// On x86 machines with `INVLPGB` (AMD Zen 3 and later) the broadcast fields
    /// below (`dvm_*`) carry that instruction's figures: it reaches every CPU
    /// through the data fabric and is processed by hardware, with no interrupt,
    /// and `TLBSYNC` waits for this CPU's earlier ones as `DSB ISH` does. On x86
    /// machines without it they are zero and never charged.
    pub tlbi_bcast_issue: u64,
    /// Interconnect latency of one DVM message to a CPU in the same socket, each way.
    pub dvm_hop: u64,
    /// Extra latency for a DVM message crossing a socket, each way.
    pub dvm_cross_socket: u64,
    /// Time a CPU takes to process one incoming by-VA invalidation message
    /// (`TLBI VAE1IS`/`VALE1IS`/`VAAE1IS`: one set of each TLB looked up); a CPU
    /// processes its incoming messages one at a time, and a running CPU loses that time.
    pub dvm_process: u64,
    /// The same for a message that invalidates a whole ASID or everything
    /// (`TLBI ASIDE1IS`, `VMALLE1IS`): every entry of every TLB is examined.
    pub dvm_process_asid: u64,
    /// Cores that share one requester's slots for broadcasts
    /// ([`crate::interconnect`]): 1 where each core has its own port to the
    /// interconnect, a cluster's size where its cores share one (0 counts as 1).
    pub dvm_issuer_cores: u64,
    /// Broadcasts one requester may have outstanding (issued, not yet
    /// completed); a further `TLBI ...IS` or `INVLPGB` waits for the earliest
    /// to complete. 0: no limit (x86 machines without `INVLPGB`).
    pub dvm_issuer_outstanding: u64,
    /// Broadcasts the DVM nodes (Arm CMN's DN, CCN's MN, AMD's data fabric)
    /// track at once, from dispatch to completion; a further one waits at the
    /// node for the earliest to complete. 0: no limit.
    pub dvm_node_outstanding: u64,
    /// Cycles a DVM node is busy with one broadcast (sending it on to the
    /// receivers), during which it sends no other; and, on a machine of several
    /// sockets, with each other socket's node's completion of a broadcast.
    pub dvm_node_process: u64,
}

/// An inter-processor interrupt's costs, in cycles, and how the machine sends one.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct IpiCosts {
    /// Sending an IPI (writing the interrupt controller's SGI/ICR register).
    pub ipi_send: u64,
    /// Delivering an IPI to a CPU in the same socket.
    pub ipi_deliver: u64,
    /// The interrupted CPU's software work to dispatch a call-function IPI
    /// (finding the request, calling the function, clearing the completion flag).
    pub ipi_handle: u64,
    /// Extra IPI delivery latency across sockets.
    pub ipi_cross_socket: u64,
    /// How many CPUs one interrupt-controller write of a Linux call-function
    /// IPI can reach: 16 in x2APIC cluster mode (`__x2apic_send_IPI_mask`,
    /// arch/x86/kernel/apic/x2apic_cluster.c, v4.10 to v6.x: one ICR write per
    /// cluster of 16 logical APIC IDs, its targets in the mask collected into
    /// that write), 0 for one write per target. Clusters are taken as 16
    /// consecutive CPUs of a socket.
    pub ipi_cluster: u64,
    /// Whether Linux sends a call-function IPI whose targets are every other
    /// CPU with the APIC's all-excluding-self shorthand, one write
    /// (`native_send_call_func_ipi`: v4.10 when the mask equals the online CPUs
    /// but this one; v5.5 on under `apic_use_ipi_shorthand`, the same test).
    pub ipi_shorthand: bool,
}

/// A cache line's move between CPUs, in cycles, by how far it goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LineCosts {
    /// Moving one cache line between cores in the same socket.
    pub cacheline_transfer: u64,
    /// Extra for a cache-line transfer between two L3 domains (AMD CCXs) of one
    /// socket: `cacheline_transfer` is then the figure inside one. Zero where a
    /// socket is one domain.
    pub cacheline_cross_ccx: u64,
    /// Extra for a cache-line transfer across sockets (on top of
    /// `cacheline_cross_ccx`: sockets never share a CCX).
    pub cacheline_cross_socket: u64,
    /// Extra latency of a line read from another NUMA node's memory over one
    /// read from the reading CPU's own node (Intel MLC's idle latency matrix,
    /// remote less local). A copy of a page on another node pays it for each
    /// of the page's lines, `mlp` at a time ([`crate::sim::Sim`]'s page work).
    pub mem_remote_extra: u64,
    /// An atomic read-modify-write on a line this CPU already holds (x86's
    /// `LOCK`ed instructions and `XCHG` with memory, which drain the store
    /// buffer; arm64's atomics): charged in place of `mem_access` where an
    /// atomic hits ([`crate::coherence`]). An atomic that moves the line
    /// costs the move alone: the transfer figures above are core-to-core
    /// timings of a line passed by atomics, most of them compare-and-exchange
    /// round trips, the atomic included.
    pub atomic_hit: u64,
}

/// The kernel's own paths (system calls, switches, faults, page work), in cycles.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct KernelPathCosts {
    /// The kernel's software work in one system call besides entry and exit
    /// (argument checks, file lookup), excluding the call's own body.
    pub syscall_body: u64,
    /// The kernel's software work of one pipe or eventfd read or write body.
    pub pipe_op: u64,
    /// The scheduler's software path of one context switch (dequeue, pick, save
    /// and restore of thread state), excluding the address-space switch.
    pub switch_path: u64,
    /// Software path of a page fault besides entry/exit (VMA lookup, PTE install).
    pub fault_path: u64,
    /// Zeroing or copying one 4 KB page.
    pub page_copy: u64,
    /// The core mm's work per present PTE a teardown clears, besides the
    /// page-table accesses themselves (`zap_pte_range`: the rmap removal, RSS
    /// accounting, gathering the page for freeing). Charged only with large folios
    /// (`contpte=folios|on`), so runs without them are unchanged.
    pub zap_page: u64,
    /// The core mm's work per folio a teardown frees (dropping the last reference
    /// and returning the folio to the allocator, `folios_put`), with large folios
    /// only; an order-0 page is a folio of its own.
    pub zap_folio: u64,
}

/// The idle states of a CPU (cpuidle's table, `sim/idle.rs`): up to four,
/// shallowest first, each with its exit latency and (but state 0) target
/// residency in cycles, and how many of them, from the shallowest, poll the
/// thread flags so that a remote CPU wakes them with a store rather than an
/// IPI. A state of target residency 0 (but state 0) is not there.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct IdleCosts {
    /// The states, from state 0, in which the idle CPU polls its
    /// `TIF_NEED_RESCHED` (x86 `TIF_POLLING_NRFLAG`): x86's POLL state and
    /// every state entered with `MWAIT` on the thread-flags line; 0 where
    /// idle is `HLT` or arm64's `WFI`.
    pub idle_polling_states: u64,
    /// State 0's exit latency: x86's POLL state (0), or the machine's
    /// shallowest state where there is no POLL state. State 0 has no target
    /// residency: it is the state of an idle time no deeper one's covers.
    pub idle0_exit: u64,
    /// State 1's exit latency.
    pub idle1_exit: u64,
    /// State 1's target residency: 0 where the machine has no state 1.
    pub idle1_residency: u64,
    /// State 2's exit latency.
    pub idle2_exit: u64,
    /// State 2's target residency: 0 where there is no state 2.
    pub idle2_residency: u64,
    /// State 3's exit latency (the deepest the model keeps).
    pub idle3_exit: u64,
    /// State 3's target residency: 0 where there is no state 3.
    pub idle3_residency: u64,
}

impl IdleCosts {
    /// Returns the state a CPU idle for `idle` cycles is in: the deepest
    /// present whose target residency `idle` covers (state 0 if none does),
    /// with its exit latency and whether it polls.
    pub fn state(&self, idle: u64) -> (usize, u64, bool) {
        let states = [
            (self.idle0_exit, 0),
            (self.idle1_exit, self.idle1_residency),
            (self.idle2_exit, self.idle2_residency),
            (self.idle3_exit, self.idle3_residency),
        ];
        let mut at = 0;
        for (i, &(_, residency)) in states.iter().enumerate().skip(1) {
            if residency > 0 && residency <= idle {
                at = i;
            }
        }
        (at, states[at].0, (at as u64) < self.idle_polling_states)
    }
}

/// Which faults on a file mapping a per-VMA lock serves
/// ([`Kernel::vma_lock_file_faults`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VmaLockFiles {
    /// None: the fault takes `mmap_lock`.
    None,
    /// A read fault whose page is in the page cache (fault-around maps it);
    /// any other is retried under `mmap_lock`.
    FaultAround,
    /// Every one.
    All,
}

/// How long a Linux writer spins on a `rw_semaphore` its readers hold before
/// it sleeps in the wait queue ([`Kernel::rwsem_writer_spin`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriterSpin {
    /// Until they leave (the owner word names no reader: Linux before v4.8,
    /// and FreeBSD's `sx`, as the model keeps it).
    Unbounded,
    /// Not at all: `rwsem_can_spin_on_owner` refuses a reader-owned lock
    /// (v4.8 to v5.2, `rwsem-xadd.c`).
    Never,
    /// For (10 + readers/2) us, the readers counted up to 30
    /// (`rwsem_rspin_threshold`, v5.3 on), and not at all once a writer has
    /// given up on them (`RWSEM_NONSPINNABLE`).
    Threshold,
}

impl Kernel {
    /// Returns whether a fault takes only its VMA's lock (Linux v6.4,
    /// "mm: introduce per-VMA lock" and the arch fault handlers that use it).
    pub fn per_vma_locks(self) -> bool {
        self.linux_from(6, 4)
    }

    /// Returns which faults on a file mapping a per-VMA lock serves (Linux,
    /// where the fault takes one: [`Kernel::per_vma_locks`] or `--set
    /// vma_locks=on`): none before v6.6 (`lock_vma_under_rcu` refuses a VMA
    /// that is not anonymous, as the per-VMA lock series had it); from v6.6
    /// (Matthew Wilcox's "Handle most file-backed faults under the VMA lock",
    /// with "mm: Run the fault-around code under the VMA lock") a read fault
    /// whose page fault-around maps, every other one retried under
    /// `mmap_lock`; from v6.7 ("Handle more faults under the VMA lock": read,
    /// shared and copy-on-write faults) every one.
    pub fn vma_lock_file_faults(self) -> VmaLockFiles {
        match self {
            Kernel::Linux(a, b) if (a, b) >= (6, 7) => VmaLockFiles::All,
            Kernel::Linux(6, 6) => VmaLockFiles::FaultAround,
            _ => VmaLockFiles::None,
        }
    }

    /// Returns whether a reader of a Linux `rw_semaphore` writes its owner
    /// word at every acquisition (`rwsem_set_reader_owned` leaving the
    /// reader's task there: the kernels after v4.19); v4.19 and earlier
    /// write it only when it does not already say "reader-owned". FreeBSD's
    /// `sx` locks keep no reader in an owner word.
    pub fn rwsem_readers_write_owner(self) -> bool {
        matches!(self, Kernel::Linux(a, b) if (a, b) > (4, 19))
    }

    /// Returns whether a Linux `rw_semaphore` reader that finds a writer
    /// holding it sleeps in the wait queue (`rwsem_down_read_slowpath`,
    /// woken by the writer's release, which grants it the lock) rather than
    /// spinning while the writer runs: before v5.3 (`rwsem-xadd.c`'s
    /// `__rwsem_down_read_failed_common` always queues and sleeps; only
    /// writers spin) and from v5.11 (617f3ef95177, "locking/rwsem: Remove
    /// reader optimistic spinning"); v5.3 to v5.10 spin on a writer owner
    /// that runs ("locking/rwsem: Enable readers spinning on writer"), as
    /// the model's writers do. FreeBSD's `sx` shared waiters spin while
    /// the exclusive owner runs (`ADAPTIVE_SX`, `sys/kern/kern_sx.c`).
    pub fn rwsem_readers_sleep(self) -> bool {
        match self {
            Kernel::Linux(a, b) => (a, b) < (5, 3) || (a, b) >= (5, 11),
            Kernel::FreeBsd(_) => false,
        }
    }

    /// Returns how long a Linux `rw_semaphore` writer that finds readers
    /// holding it spins before it sleeps in the wait queue (where `--set
    /// rwsem_writer_sleep` leaves it on): before v4.8 the owner word names
    /// no reader and `rwsem_optimistic_spin` goes on while it is empty;
    /// from v4.8 ("locking/rwsem: Add reader-owned state to the owner
    /// field": `RWSEM_READER_OWNED`, absent in v4.7.4 and present in
    /// v4.8.15) `rwsem_can_spin_on_owner` refuses a reader-owned lock; from
    /// v5.3 ("locking/rwsem: Enable time-based spinning on reader-owned
    /// rwsem") it spins for `rwsem_rspin_threshold`, (10 + readers/2) us
    /// with the readers counted up to 30, the same formula to v6.13.
    /// FreeBSD's `sx` exclusive waiters spin on its sharers a bounded
    /// number of loops (`asx_retries`, `asx_loops`), kept here as spinning
    /// until they leave.
    pub fn rwsem_writer_spin(self) -> WriterSpin {
        match self {
            Kernel::Linux(a, b) if (a, b) >= (5, 3) => WriterSpin::Threshold,
            Kernel::Linux(a, b) if (a, b) >= (4, 8) => WriterSpin::Never,
            _ => WriterSpin::Unbounded,
        }
    }

    /// Returns whether a Linux `rw_semaphore` reader that finds a writer
    /// asleep in the wait queue takes the lock anyway when no other reader
    /// holds it (from v5.11, "locking/rwsem: Enable reader optimistic lock
    /// stealing"); before, it queues behind the writer (before v5.3
    /// `__down_read` finds the count negative; v5.3 to v5.10's readers
    /// neither spin nor steal once the writer that gave up spinning has
    /// set `RWSEM_RD_NONSPINNABLE`).
    pub fn rwsem_readers_steal(self) -> bool {
        self.linux_from(5, 11)
    }

    /// Returns whether a read trylock of a Linux `rw_semaphore`
    /// (`down_read_trylock`, the page fault's `mmap_read_trylock`) loads the
    /// count before its `cmpxchg`: up to v5.1 (x86's `__down_read_trylock`
    /// in `arch/x86/include/asm/rwsem.h`, a `mov` then `lock cmpxchg`; the
    /// generic one an `atomic_long_read` first) and again from v5.16
    /// (14c240488411, "locking/rwsem: Optimize down_read_trylock() under
    /// highly contended case"); v5.2 to v5.15 try the `cmpxchg` first with
    /// the unlocked value as their guess (ddb20d1d3aed, "locking/rwsem:
    /// Optimize down_read_trylock()"). FreeBSD's `sx_slock` and `sx_sunlock`
    /// read the lock word before their `atomic_fcmpset` in every release the
    /// presets run (`sys/kern/kern_sx.c`).
    pub fn read_trylock_loads_first(self) -> bool {
        match self {
            Kernel::Linux(a, b) => (a, b) <= (5, 1) || (a, b) >= (5, 16),
            Kernel::FreeBsd(_) => true,
        }
    }

    /// Returns whether a context switch between two tasks without an mm of
    /// their own hands the lent `active_mm` on without touching its
    /// `mm_count` (Linux v5.4 on: 139d025cda1d, "sched: Clean up active_mm
    /// reference counting"); before it, `context_switch()` took a reference
    /// on the lent mm at every switch to such a task and `finish_task_switch`
    /// dropped the one the previous task held.
    pub fn hands_lazy_mm_on(self) -> bool {
        self.linux_from(5, 4)
    }

    /// Returns whether `migrate_pages` unmaps a batch of folios before one
    /// flush and then moves them (Linux v6.3, Huang Ying's "migrate_pages:
    /// batch TLB flushing" series: `migrate_pages_batch`, `try_to_migrate`
    /// with `TTU_BATCH_FLUSH`).
    pub fn batches_migration(self) -> bool {
        self.linux_from(6, 3)
    }

    /// Returns how many memory-cgroup levels below the root a benchmark's
    /// tasks run at by default ([`crate::sim::KernelChoices::memcg_depth`]). A
    /// Linux task in the root cgroup is never charged (`try_charge` returns
    /// at once for the root, and `uncharge_folio` adds nothing for it); one
    /// `d` levels down charges the page counters of its cgroup, of every
    /// ancestor and of the root (`page_counter_try_charge` and
    /// `page_counter_uncharge` walk `counter->parent` to the root's, whose
    /// counter parents every top-level cgroup's). systemd v238 (March 2018)
    /// made `MemoryAccounting=` default to on, so a test a service runs is
    /// charged in `/system.slice/NAME.service` (the 0-day robot's runs come
    /// from `lkp-bootstrap.service`, lkp-tests' `rootfs/addon`): 2 for the
    /// kernels released after it, v4.16 on. Before, services ran without the
    /// memory controller, in the root cgroup: 0. FreeBSD has no memory
    /// cgroups: 0.
    pub fn memcg_depth(self) -> u32 {
        match self {
            Kernel::Linux(a, b) if (a, b) >= (4, 16) => 2,
            _ => 0,
        }
    }

    /// Returns whether a zap begins by draining the CPU's LRU-add batch
    /// (`lru_add_drain()`): the first call of `zap_page_range` and
    /// `zap_page_range_single` (`mm/memory.c`, what `madvise(MADV_DONTNEED)`
    /// runs), of `unmap_region` (`mm/mmap.c`, later `mm/vma.c`: `munmap` and
    /// a `MAP_FIXED` mapping over an old one) and of `exit_mmap`, from before
    /// v4.14 to v6.14. Rik van Riel's "mm: remove unnecessary calls to
    /// lru_add_drain" took them out; it was in Andrew Morton's mm-unstable
    /// branch on 2025-01-26, during v6.14's merge window and not in it, so
    /// v6.15 is taken as the first release without them.
    pub fn drains_lru_at_zap(self) -> bool {
        matches!(self, Kernel::Linux(a, b) if (a, b) < (6, 15))
    }

    /// Returns whether `mprotect` gathers what it changed in an `mmu_gather`
    /// and flushes only the span of the PTEs `pte_needs_flush` picks, nothing if
    /// none (`change_pte_range`, Nadav Amit's "mm/mprotect: use mmu_gather" and
    /// "mm/mprotect: do not flush when not required architecturally", posted
    /// in March 2022 and taken as first released in v5.19), instead of
    /// `flush_tlb_range` of the whole range whenever it rewrote a present PTE
    /// (v5.15's `change_protection_range`). No registered policy's kernel lies
    /// between v5.13 and v6.13, where the exact release would matter.
    pub fn mprotect_gathers(self) -> bool {
        self.linux_from(5, 19)
    }

    /// Returns whether `pte_needs_flush` is the architecture's own, not the
    /// generic `true` for every present PTE: on x86 from the same series as
    /// [`Kernel::mprotect_gathers`] (a flush when the frame, or the write,
    /// user, NX or cache bits changed, or dirty, accessed or present were
    /// cleared); on arm64 from Dev Jain's c320dbb7c80d (a flush when a valid
    /// PTE's hardware bits changed; posted in September 2025 against
    /// v6.17-rc6, taken as first released in v6.19). `--set pte_needs_flush`
    /// overrides it.
    pub fn pte_needs_flush(self, arch: Arch) -> bool {
        match (self, arch) {
            (Kernel::Linux(a, b), Arch::X86_64) => (a, b) >= (5, 19),
            (Kernel::Linux(a, b), Arch::Arm64) => (a, b) >= (6, 19),
            _ => false,
        }
    }

    /// Returns whether a read fault on untouched private anonymous memory maps
    /// the shared zero page (`do_anonymous_page`, unless the mm forbids it,
    /// which only s390's KVM guests do): every Linux. FreeBSD's `vm_fault`
    /// allocates a zeroed page for a read too.
    pub fn maps_zero_page(self) -> bool {
        matches!(self, Kernel::Linux(..))
    }

    /// Returns whether the kernel's full barrier on x86-64, `smp_mb()`, is a
    /// locked add to the stack (`lock; addl $0,-4(%rsp)`: Linux v4.15 on,
    /// 450cbdd0125c, "locking/x86: Use LOCK ADD for smp_mb() instead of
    /// MFENCE"), which costs an atomic that hits ([`LineCosts::atomic_hit`]);
    /// before it `MFENCE` (a v4.14 tree's `__smp_mb()` is `mb()`), the
    /// preset's `full_barrier`. No FreeBSD policy issues a full barrier on
    /// x86: `false`.
    pub fn smp_mb_is_locked_add(self) -> bool {
        self.linux_from(4, 15)
    }

    /// Returns whether a read fault in a file mapping also maps the cached
    /// pages of its 16-page window (`do_fault_around`, `filemap_map_pages`:
    /// Linux v3.15, "mm: introduce vm_ops->map_pages()"). FreeBSD's
    /// `vm_fault_prefault` is not modelled.
    pub fn faults_around(self) -> bool {
        self.linux_from(3, 15)
    }

    /// Returns whether an `mprotect` that adds write access may make PTEs
    /// writable: Linux's `change_pte_range` (a shared mapping's writable
    /// `vm_page_prot`, and [`Kernel::mprotect_upgrades_in_place`]). FreeBSD's
    /// `pmap_protect` never grants write access.
    pub fn mprotect_grants_write(self) -> bool {
        matches!(self, Kernel::Linux(..))
    }

    /// Returns whether an `mprotect` that adds write access makes a private
    /// anonymous page's PTE writable at once when the page is dirty and
    /// mapped by this process only (`MM_CP_TRY_CHANGE_WRITABLE`,
    /// `can_change_pte_writable`: David Hildenbrand's "mm/mprotect: try
    /// avoiding write faults for exclusive anonymous pages when changing
    /// protection", taken as first released in v6.0), rather than leaving it
    /// read-only for a write fault to upgrade.
    pub fn mprotect_upgrades_in_place(self) -> bool {
        self.linux_from(6, 0)
    }

    /// Returns the folios of a per-CPU LRU batch (`PAGEVEC_SIZE`: 15, and 31
    /// in recent kernels, whose `pagevec.h` sizes the batch so that 31 pointers
    /// and a header make a power of two; taken here as from v6.10, an estimate
    /// of the version: `docs/costs/kernel.md`).
    pub fn lru_batch(self) -> u32 {
        match self {
            Kernel::Linux(a, b) if (a, b) >= (6, 10) => 31,
            _ => 15,
        }
    }

    /// Returns the pages a per-CPU page list is refilled and drained by
    /// (`zone_batchsize()` for a zone of 1 GiB or more, `mm/page_alloc.c`: a
    /// quarter of the pages in 512 KB, rounded to a power of two less one
    /// after adding half: 31; from v4.19, d8a759b57035 "mm, page_alloc:
    /// double zone's batchsize", a quarter of 1 MB: 63). FreeBSD's per-domain
    /// page caches are not modelled apart: Linux's current figure.
    pub fn pcp_batch(self) -> u32 {
        match self {
            Kernel::Linux(a, b) if (a, b) < (4, 19) => 31,
            _ => 63,
        }
    }

    /// Returns a per-CPU page list's high mark: `6 * batch`, as
    /// `pageset_set_batch` set it before v5.14; later kernels derive it from
    /// the zone's low watermark and the node's CPUs (an estimate there,
    /// `docs/costs/kernel.md`).
    pub fn pcp_high(self) -> u32 {
        6 * self.pcp_batch()
    }

    /// Returns whether x86 page-table isolation is on by default on a CPU
    /// affected by Meltdown: Linux from v4.15 (aa8c6248f8c7 "x86/mm/pti: Add
    /// infrastructure for page table isolation"; `pti_check_boottime_disable`
    /// turns it on where the CPU has `X86_BUG_CPU_MELTDOWN`, unless `pti=off`
    /// or `nopti` is given). FreeBSD's PTI (`vm.pmap.pti`) belongs to its x86
    /// policies, which do not model it.
    pub fn pti_on_meltdown(self) -> bool {
        self.linux_from(4, 15)
    }

    /// Returns the pages a CPU's memcg stock is refilled with
    /// (`MEMCG_CHARGE_BATCH`: 32, 64 from v6.1).
    pub fn memcg_batch(self) -> u32 {
        match self {
            Kernel::Linux(a, b) if (a, b) >= (6, 1) => 64,
            _ => 32,
        }
    }
}

/// A machine: topology, geometry, costs, each field with its source. The
/// presets are files (`crates/sim/machines/NAME.toml`, [`mod@file`]); a user's
/// own machine is a file too (`--machine PATH.toml`).
#[derive(Clone, Debug)]
pub struct Preset {
    /// The name used on the command line.
    pub name: String,
    /// One line for `tlbkit list`.
    pub description: String,
    /// Instruction-set family.
    pub arch: Arch,
    /// Clock frequency, to turn cycles into time.
    pub freq_ghz: f64,
    /// Cores in one socket; `--cpus` beyond this adds sockets of this size.
    pub cores_per_socket: usize,
    /// Cores sharing one L3 (an AMD CCX); `cores_per_socket` where the whole
    /// socket is one domain. Cache-line transfers between two of them pay
    /// `cacheline_cross_ccx`.
    pub cores_per_ccx: usize,
    /// Cores on the real machine (`cores` in a machine file).
    pub real_cores: usize,
    /// The ASID widths the machine accepts; the first is the default.
    pub asid_bits: Vec<u8>,
    /// The NUMA node counts the machine can be booted with (`--set numa=N`); the
    /// first is the default. `cores_per_socket` is divided among the nodes, and a
    /// message between nodes pays the cross-socket costs.
    pub numa: Vec<usize>,
    /// TLB geometry.
    pub tlb: TlbGeometry,
    /// The kernel the machine's measurements were taken on.
    pub kernel: Kernel,
    /// Peak memory bandwidth of one socket in GB/s (channels times transfer
    /// rate times 8 bytes); a machine booted with more NUMA nodes
    /// (`--set numa=N`) gives each node its share.
    pub mem_bw_gbs: f64,
    /// Whether the CPUs have arm64's range TLB invalidation (`FEAT_TLBIRANGE`,
    /// `TLBI RVAE1IS`), which Linux uses when the ID register says so. A range
    /// message costs its receivers `dvm_process`, as a by-VA one does (no
    /// figure for a range's receiver cost was found; see `docs/costs/`).
    pub tlbi_range: bool,
    /// Whether the CPUs have x86 `INVPCID` (CPUID.(EAX=07H,ECX=0):EBX bit 10):
    /// Intel from Haswell, AMD from Zen 2; never on arm64. Linux's page-table
    /// isolation flushes a user PCID's page with it, and without it defers the
    /// whole user PCID's flush to the next return to user (`--set pti=on`).
    pub invpcid: bool,
    /// Whether the CPUs are affected by Meltdown (x86's `X86_BUG_CPU_MELTDOWN`:
    /// Intel before Ice Lake and Cascade Lake's `RDCL_NO`, no AMD CPU). A Linux
    /// kernel from v4.15 then runs with page-table isolation by default
    /// ([`Kernel::pti_on_meltdown`]; `--set pti=off` overrides it). Always
    /// false on arm64, whose policies take KPTI as their `kpti` switch.
    pub meltdown: bool,
    /// The hardware threads of a core (SMT) and how they share it.
    pub threads: CoreThreads,
    /// Costs.
    pub costs: Costs,
    /// The costs that rest on one weak source, or on none for this machine
    /// (`tlbkit validate` names them beside every row whose runs use them).
    pub estimates: Vec<Estimate>,
    /// The machine's notes, with the measurements each figure derives from
    /// (`docs/costs/NAME.md` for a preset).
    pub cost_sources: String,
    /// Every field's source, by the name `tlbkit list machines --format json`
    /// gives the field (`freq_ghz`, `tlb.l2_ways`, `costs_cycles.dvm_hop`):
    /// the source, `estimate: why`, `notes: FILE`, or `set in FILE` for a
    /// plain value of a user's file.
    pub sources: BTreeMap<String, String>,
}

/// The hardware threads of a core (SMT) and how they share it
/// (`threads_per_core`, `smt_share` and `smt_tlbs` in a machine file).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CoreThreads {
    /// Threads per core: 1, or the threads a core runs at once, each a CPU of
    /// the model. A socket's `cores_per_socket` CPUs are its cores' first
    /// threads, then their second ones, as Linux numbers them; `--set
    /// smt=off` runs each as a core of its own.
    pub per_core: usize,
    /// With two or more threads of a core running, the share of the core's
    /// one-thread speed each gets for the software it runs (the kernel's
    /// paths and the programs' own computing): 1 is a core each.
    pub share: f64,
    /// Whether the threads share the core's TLBs, walk cache and page walkers
    /// competitively (each entry its filling thread's, every thread's entries
    /// competing for the same slots: `crate::tlb::ThreadTlb`), as on Intel's
    /// and AMD's cores; false: each thread has its own.
    pub tlbs: bool,
}

impl CoreThreads {
    /// One thread per core: nothing shared.
    pub const ONE: CoreThreads = CoreThreads { per_core: 1, share: 1.0, tlbs: false };

    /// Returns whether a run's cores are shared by their threads: where they
    /// have more than one, unless `--set smt=off` (`smt` `Some(false)`).
    pub fn shared(self, smt: Option<bool>) -> bool {
        self.per_core > 1 && smt != Some(false)
    }

    /// Returns whether a run's cores share their TLBs between their threads:
    /// where the cores are shared ([`CoreThreads::shared`]) and their TLBs
    /// are ([`CoreThreads::tlbs`]).
    pub fn tlbs_shared(self, smt: Option<bool>) -> bool {
        self.shared(smt) && self.tlbs
    }

    /// Returns the other CPUs of `cpu`'s core among `ncpus`, on a machine of
    /// `per_socket` CPUs to a socket numbered as Linux numbers them: a
    /// socket's cores' first threads, then their second ones.
    pub fn siblings(self, per_socket: usize, cpu: usize, ncpus: usize) -> impl Iterator<Item = usize> {
        let (per_socket, threads) = (per_socket.max(1), self.per_core.max(1));
        let cores = (per_socket / threads).max(1);
        let (socket, core) = (cpu / per_socket, cpu % per_socket % cores);
        (0..threads).map(move |k| socket * per_socket + k * cores + core).filter(move |&c| c != cpu && c < ncpus)
    }
}

/// Costs of a preset that rest on one weak source, or on another machine's
/// figure: what a result that depends on them can be trusted for is what the
/// source can carry (the preset's notes in `docs/costs/` give the arithmetic).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Estimate {
    /// The costs, as `Costs` names them.
    pub costs: String,
    /// The metric that counts the operations that pay them (one of
    /// [`ESTIMATE_USES`]).
    pub used_when: String,
    /// Where they come from.
    pub why: String,
}

/// The cycles one operation pays in the costs an estimate names.
pub type CyclesEach = fn(&Costs) -> u64;

/// The metrics an estimate can be used by, with the cycles each operation
/// they count pays in the estimated costs.
pub const ESTIMATE_USES: &[(&str, CyclesEach)] =
    &[("broadcast_invalidations", broadcast_cycles), ("context_switches", switch_cycles), ("smt_shared_cycles", |_| 1)];

impl Estimate {
    /// The cycles each operation [`Estimate::used_when`] counts pays in these costs.
    pub fn cycles_each(&self, costs: &Costs) -> u64 {
        ESTIMATE_USES.iter().find(|(m, _)| *m == self.used_when).map_or(0, |(_, f)| f(costs))
    }

    /// The share of a run's CPU time (`cpus` CPUs for `sim_time_ns` at
    /// `ghz`) that `count` operations spend in these costs.
    pub fn share(&self, costs: &Costs, count: f64, sim_time_ns: f64, ghz: f64, cpus: usize) -> f64 {
        let total = sim_time_ns * ghz * cpus as f64;
        if total > 0.0 {
            count * self.cycles_each(costs) as f64 / total
        } else {
            0.0
        }
    }
}

/// What one broadcast invalidation costs its issuer in the DVM estimates:
/// the issue, the message's two hops and one receiver's processing.
fn broadcast_cycles(c: &Costs) -> u64 {
    c.dvm.tlbi_bcast_issue + 2 * c.dvm.dvm_hop + c.dvm.dvm_process
}

/// What one context switch costs besides the address-space switch.
fn switch_cycles(c: &Costs) -> u64 {
    c.kernel.switch_path
}

impl Preset {
    /// Returns whether the machine has broadcast TLB invalidation: every arm64
    /// machine (`TLBI ...IS`), and x86 machines with `INVLPGB` (those whose
    /// broadcast costs are set).
    pub fn has_broadcast_tlbi(&self) -> bool {
        self.arch == Arch::Arm64 || self.costs.dvm.dvm_hop > 0
    }

    /// Returns what the kernel's full barrier (`smp_mb()`, [`Costs::full_barrier`]
    /// where a policy asks for one) costs on this machine: an x86-64 Linux
    /// from v4.15 runs a locked add ([`Kernel::smp_mb_is_locked_add`]), an
    /// atomic that hits; otherwise the preset's `full_barrier` (`MFENCE`,
    /// arm64's `DMB ISH`).
    pub fn smp_mb_cost(&self) -> u64 {
        match self.arch == Arch::X86_64 && self.kernel.smp_mb_is_locked_add() {
            true => self.costs.lines.atomic_hit,
            false => self.costs.full_barrier,
        }
    }

    /// Returns the costs the simulator's machine charges: the preset's, with
    /// a policy's full barrier the kernel's `smp_mb()` ([`Preset::smp_mb_cost`]).
    pub fn machine_costs(&self) -> Costs {
        Costs { full_barrier: self.smp_mb_cost(), ..self.costs }
    }
}

/// The built-in presets, read once from the files compiled in.
fn builtin() -> &'static Result<Vec<Preset>, file::MachineFileError> {
    static PRESETS: OnceLock<Result<Vec<Preset>, file::MachineFileError>> = OnceLock::new();
    PRESETS.get_or_init(file::builtin)
}

/// Returns every preset, in the order of their files' names.
pub fn all() -> Vec<Preset> {
    builtin().clone().unwrap_or_default()
}

/// Returns the preset called `name` (not `host`, which [`resolve`] reads).
pub fn by_name(name: &str) -> Option<Preset> {
    builtin().as_ref().ok()?.iter().find(|p| p.name == name).cloned()
}

/// Returns the built-in preset called `name`, for tests and examples that
/// name one.
///
/// # Panics
/// When no preset is called `name`: a caller names a preset that exists.
pub fn named(name: &str) -> Preset {
    match by_name(name) {
        Some(p) => p,
        None => panic!("no preset is called '{name}': machines are {:?}", names()),
    }
}

/// Returns the costs every preset of `arch` starts from (its base file,
/// `machines/base/ARCH.toml`).
pub fn base_costs(arch: Arch) -> Result<Costs, file::MachineFileError> {
    file::base_costs(arch)
}

/// The name of the machine built from the host's calibration ([`host`]).
pub const HOST: &str = "host";

/// Returns every name `--machine` takes: the presets, then `host`.
pub fn names() -> Vec<String> {
    let presets = builtin().as_ref().map(|all| all.iter().map(|p| p.name.clone()).collect()).unwrap_or_default();
    [presets, vec![HOST.to_string()]].concat()
}

/// Returns the machine `name` names: a preset; for `host` the machine
/// `tlbkit calibrate` measured ([`host::load`]); for a path ending in `.toml`
/// the machine file there ([`file::load_path`]).
pub fn resolve(name: &str) -> Result<Preset, crate::Error> {
    if name == HOST {
        return Ok(host::load()?);
    }
    if name.ends_with(".toml") {
        return Ok(file::load_path(std::path::Path::new(name))?);
    }
    if let Err(e) = builtin() {
        return Err(e.clone().into());
    }
    by_name(name).ok_or_else(|| crate::Error::UnknownMachine { name: name.to_string() })
}

/// Returns an architecture's name as machine files and `tlbkit list` give it.
pub fn arch_name(a: Arch) -> &'static str {
    match a {
        Arch::Arm64 => "arm64",
        Arch::X86_64 => "x86-64",
    }
}

/// The most CPUs a machine may have (Linux's `NR_CPUS` default on arm64 and x86).
pub const MAX_CPUS: usize = 4096;

/// The most loads a core may have in flight at once (a machine's `mlp`, checked
/// when its file is read): above any core's L1D fill buffers.
pub const MAX_MLP: u64 = 64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_machine_file_loads_and_every_field_has_a_source() {
        let all = all();
        assert!(all.len() >= 18, "{:?}", builtin().as_ref().err());
        for p in &all {
            for (field, source) in &p.sources {
                assert!(!source.trim().is_empty(), "{}: {field} has no source", p.name);
                // What the machine is (its name, words and notes, its instruction
                // set) is no figure to source.
                if ["description", "cost_sources", "arch"].contains(&field.as_str()) {
                    continue;
                }
                assert!(!source.starts_with("set in"), "{}: {field} is a plain value: give its source", p.name);
                // Every figure says whether it is sourced or estimated (`validate
                // --vary` varies only estimated costs): a bare pointer to the
                // notes would count it as sourced whatever they say, and a figure
                // kept from the base says nothing of this machine.
                assert!(
                    !source.starts_with("notes: ") && !source.starts_with("estimate: a base figure"),
                    "{}: {field} says only '{source}': give the notes' source for it, or 'estimate: why'",
                    p.name
                );
            }
            let fields: Vec<&String> = p.sources.keys().collect();
            assert_eq!(
                fields,
                file::all_paths().iter().collect::<std::collections::BTreeSet<_>>().into_iter().collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn intel_server_presets_count_hardware_threads_as_cpus() {
        let got: Vec<_> = ["skx8170", "icx8358", "icx8336c"]
            .map(named)
            .iter()
            .map(|p| (p.name.clone(), p.cores_per_socket, p.real_cores))
            .collect();
        let want = [("skx8170", 52, 104), ("icx8358", 64, 128), ("icx8336c", 64, 128)];
        assert_eq!(got, want.map(|(n, a, b)| (n.to_string(), a, b)));
    }

    #[test]
    fn second_round_servers_count_threads_as_cpus_and_fill_their_sockets() {
        let ps = ["hsw48", "skl56", "numa4x48"].map(named);
        let got: Vec<_> = ps
            .iter()
            .map(|p| (p.name.as_str(), p.cores_per_socket, p.real_cores, p.real_cores / p.cores_per_socket, p.numa[0]))
            .collect();
        assert_eq!(got, [("hsw48", 24, 48, 2, 1), ("skl56", 28, 56, 2, 1), ("numa4x48", 12, 48, 4, 1)]);
        for p in ps {
            assert!(!p.has_broadcast_tlbi(), "{}: Intel before INVLPGB reaches other CPUs by IPI", p.name);
            assert!(p.costs.lines.cacheline_cross_socket > p.costs.lines.cacheline_transfer, "{}", p.name);
        }
    }

    #[test]
    fn invpcid_is_costed_exactly_where_the_cpus_have_it() {
        let mut with: Vec<String> = all().into_iter().filter(|p| p.invpcid).map(|p| p.name).collect();
        with.sort();
        assert_eq!(with, ["haswell2s", "hsw48", "icx8336c", "icx8358", "milan", "skl56", "skx8170", "skylake"]);
        for p in all() {
            assert_eq!(p.invpcid, p.costs.local.invpcid_va > 0, "{}", p.name);
            assert!(!p.invpcid || p.arch == Arch::X86_64, "{}", p.name);
        }
    }

    #[test]
    fn numa4x48_has_no_invpcid_so_a_pcid_flush_is_a_cr3_write() {
        let p = named("numa4x48");
        assert_eq!(p.costs.local.tlbi_local_asid, p.costs.root_write + p.costs.root_write_flush);
        assert_eq!(p.kernel, Kernel::Linux(4, 3));
    }

    #[test]
    fn ice_lake_sp_converts_its_mesh_and_upi_latencies_at_each_parts_clock() {
        let (a, b) = (named("icx8358").costs, named("icx8336c").costs);
        assert_eq!(
            (a.lines.cacheline_transfer, a.lines.cacheline_cross_socket, a.ipi.ipi_cross_socket),
            (133, 147, 147)
        );
        assert_eq!(
            (b.lines.cacheline_transfer, b.lines.cacheline_cross_socket, b.ipi.ipi_cross_socket),
            (118, 130, 130)
        );
        // The core's figures are in cycles and the same for both parts.
        assert_eq!((a.mem_access, a.local.tlbi_local_va, a.walkers), (b.mem_access, b.local.tlbi_local_va, b.walkers));
    }

    #[test]
    fn preset_names_are_unique_and_match_their_files() {
        let names: Vec<String> = all().into_iter().map(|p| p.name).collect();
        let mut unique = names.clone();
        unique.dedup();
        assert_eq!(unique, names, "presets are in file-name order, each once");
        for p in all() {
            assert_eq!(p.cost_sources, format!("docs/costs/{}.md", p.name));
        }
    }

    #[test]
    fn kunpeng920_is_two_sockets_of_two_32_core_dies_without_range_tlbi() {
        let p = named("kunpeng920");
        assert_eq!((p.arch, p.cores_per_socket, p.cores_per_ccx, p.real_cores), (Arch::Arm64, 64, 32, 128));
        assert!(p.costs.lines.cacheline_cross_ccx > 0 && !p.tlbi_range && p.has_broadcast_tlbi());
        assert_eq!(p.asid_bits[0], 16);
    }

    #[test]
    fn ivb3320m_is_four_threads_on_one_die_with_ipis_only() {
        let p = named("ivb3320m");
        assert_eq!((p.arch, p.cores_per_socket, p.cores_per_ccx, p.real_cores), (Arch::X86_64, 4, 4, 4));
        assert!(!p.has_broadcast_tlbi());
        // No INVPCID: a whole-PCID flush is a flushing CR3 write.
        assert_eq!(p.costs.local.tlbi_local_asid, p.costs.root_write + p.costs.root_write_flush);
    }

    #[test]
    fn an_x86_linux_from_v4_15_runs_smp_mb_as_a_locked_add_and_earlier_ones_as_mfence() {
        let mut p = named("skx8170");
        assert_eq!(p.kernel, Kernel::Linux(5, 10));
        assert_eq!(p.smp_mb_cost(), p.costs.lines.atomic_hit);
        assert_ne!(p.costs.lines.atomic_hit, p.costs.full_barrier);
        p.kernel = Kernel::Linux(4, 14);
        assert_eq!(p.smp_mb_cost(), p.costs.full_barrier, "MFENCE before v4.15");
        // arm64's smp_mb() is DMB ISH, whatever the release.
        let a = named("altra");
        assert_eq!(a.smp_mb_cost(), a.costs.full_barrier);
    }
}
