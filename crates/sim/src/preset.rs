//! Machine presets: topology, TLB geometry and costs, one table per machine.
//!
//! Every cost is in core cycles and carries its source or its reason: a preset's
//! costs are its architecture's base (`ARM64_BASE`, `X86_BASE`) with the figures
//! that differ set, with their sources, in the preset's own function. The
//! long-form notes, with the measurements each figure is derived from, are in
//! `docs/costs/<preset>.md`. Costs are per machine, never per claim: every
//! workload and policy on a preset uses the same table.

use crate::sched::SchedKind;

pub mod host;

/// The instruction-set family (the registry's), which decides the policies that can run.
pub use tlbkit_registry::Arch;

/// TLB and walk-cache geometry of one core.
#[derive(Clone, Copy, Debug, serde::Serialize)]
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
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Costs {
    /// One ordinary load or store that hits the L1 data cache.
    pub mem_access: u64,
    /// Extra cycles of an L1 TLB miss that hits the L2 TLB.
    pub tlb_l2_hit: u64,
    /// One page-table load during a walk (the table line is in the cache hierarchy).
    pub walk_level: u64,
    /// Fixed overhead of starting a walk after an L2 TLB miss.
    pub walk_start: u64,
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
    /// `DSB` (without waiting for outstanding broadcast invalidations); on x86
    /// with `INVLPGB`, `TLBSYNC`'s own cost besides that wait.
    pub dsb: u64,
    /// `ISB`.
    pub isb: u64,
    /// A full memory barrier between ordinary accesses.
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
    /// Moving one cache line between cores in the same socket.
    pub cacheline_transfer: u64,
    /// Extra for a cache-line transfer between two L3 domains (AMD CCXs) of one
    /// socket: `cacheline_transfer` is then the figure inside one. Zero where a
    /// socket is one domain.
    pub cacheline_cross_ccx: u64,
    /// Extra for a cache-line transfer across sockets (on top of
    /// `cacheline_cross_ccx`: sockets never share a CCX).
    pub cacheline_cross_socket: u64,
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
    /// Independent loads of one multi-page touch the out-of-order core overlaps
    /// (fill buffers and L2 TLB ports): their L1/L2 TLB and cache latency is divided by this.
    pub mlp: u64,
    /// Page walks the core runs at once: the walk latency of a multi-page touch
    /// is divided by this.
    pub walkers: u64,
}

/// `zap_page` of every preset, in cycles: the core mm's per-page work when a
/// teardown clears a present PTE. No public per-page figure for these cores was
/// found; the value is fitted to origin 004's no-opt figure on one NUMA node
/// (`docs/costs/altra.md` section 7 gives the arithmetic and the plausibility check).
const ZAP_PAGE: u64 = 35;

/// `zap_folio` of every preset, in cycles: the core mm's work to free one folio
/// after a teardown (an estimate, `docs/costs/altra.md` section 7).
const ZAP_FOLIO: u64 = 150;

/// The kernel whose paths the simulator's kernel follows on a machine, where
/// they differ by kernel or version (the memory paths' locks and batches:
/// `sim/kwork.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Kernel {
    /// Linux, major and minor version.
    Linux(u8, u8),
    /// FreeBSD, major version.
    FreeBsd(u8),
}

impl Default for Kernel {
    fn default() -> Self {
        Kernel::Linux(6, 9)
    }
}

impl Kernel {
    /// Returns whether a fault takes only its VMA's lock (Linux v6.4,
    /// "mm: introduce per-VMA lock" and the arch fault handlers that use it).
    pub fn per_vma_locks(self) -> bool {
        matches!(self, Kernel::Linux(a, b) if (a, b) >= (6, 4))
    }

    /// Returns whether `migrate_pages` unmaps a batch of folios before one
    /// flush and then moves them (Linux v6.3, Huang Ying's "migrate_pages:
    /// batch TLB flushing" series: `migrate_pages_batch`, `try_to_migrate`
    /// with `TTU_BATCH_FLUSH`).
    pub fn batches_migration(self) -> bool {
        matches!(self, Kernel::Linux(a, b) if (a, b) >= (6, 3))
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

    /// Returns the scheduler class of the kernel (`--set sched=` overrides
    /// it): Linux's CFS before v6.6, EEVDF from v6.6 (147f3efaa241
    /// "sched/fair: Implement an EEVDF-like scheduling policy"); FreeBSD's
    /// ULE is not modelled, so per-CPU FIFO queues.
    pub fn sched(self) -> SchedKind {
        match self {
            Kernel::Linux(a, b) if (a, b) >= (6, 6) => SchedKind::Eevdf,
            Kernel::Linux(..) => SchedKind::Cfs,
            Kernel::FreeBsd(_) => SchedKind::Fifo,
        }
    }

    /// Returns whether x86 page-table isolation is on by default on a CPU
    /// affected by Meltdown: Linux from v4.15 (aa8c6248f8c7 "x86/mm/pti: Add
    /// infrastructure for page table isolation"; `pti_check_boottime_disable`
    /// turns it on where the CPU has `X86_BUG_CPU_MELTDOWN`, unless `pti=off`
    /// or `nopti` is given). FreeBSD's PTI (`vm.pmap.pti`) belongs to its x86
    /// policies, which do not model it.
    pub fn pti_on_meltdown(self) -> bool {
        matches!(self, Kernel::Linux(a, b) if (a, b) >= (4, 15))
    }

    /// Returns the kernel's name as a run's parameters give it, one word:
    /// `linux-5.13`, `freebsd-12`.
    pub fn name(self) -> String {
        match self {
            Kernel::Linux(a, b) => format!("linux-{a}.{b}"),
            Kernel::FreeBsd(a) => format!("freebsd-{a}"),
        }
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

/// A machine: topology, geometry, costs.
#[derive(Clone, Debug)]
pub struct Preset {
    /// The name used on the command line.
    pub name: &'static str,
    /// One line for `tlbkit list`.
    pub description: &'static str,
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
    /// Cores on the real machine.
    pub real_cores: usize,
    /// The ASID widths the machine accepts; the first is the default.
    pub asid_bits: &'static [u8],
    /// The NUMA node counts the machine can be booted with (`--set numa=N`); the
    /// first is the default. `cores_per_socket` is divided among the nodes, and a
    /// message between nodes pays the cross-socket costs.
    pub numa: &'static [usize],
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
    /// Whether the CPUs have x86 `INVPCID` (CPUID.(EAX=07H,ECX=0):EBX[10]):
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
    /// Costs.
    pub costs: Costs,
    /// The costs that rest on one weak source, or on none for this machine
    /// (`tlbkit validate` names them beside every row whose runs use them).
    pub estimates: &'static [Estimate],
}

/// Costs of a preset that rest on one weak source, or on another machine's
/// figure: what a result that depends on them can be trusted for is what the
/// source can carry (the preset's notes in `docs/costs/` give the arithmetic).
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Estimate {
    /// The costs, as `Costs` names them.
    pub costs: &'static str,
    /// The metric that counts the operations that pay them.
    pub used_when: &'static str,
    /// The cycles each such operation pays in them.
    #[serde(skip)]
    pub cycles_each: fn(&Costs) -> u64,
    /// Where they come from.
    pub why: &'static str,
}

impl Estimate {
    /// The share of a run's CPU time (`cpus` CPUs for `sim_time_ns` at
    /// `ghz`) that `count` operations spend in these costs.
    pub fn share(&self, costs: &Costs, count: f64, sim_time_ns: f64, ghz: f64, cpus: usize) -> f64 {
        let total = sim_time_ns * ghz * cpus as f64;
        if total > 0.0 {
            count * (self.cycles_each)(costs) as f64 / total
        } else {
            0.0
        }
    }
}

/// What one broadcast invalidation costs its issuer in the DVM estimates:
/// the issue, the message's two hops and one receiver's processing.
fn broadcast_cycles(c: &Costs) -> u64 {
    c.tlbi_bcast_issue + 2 * c.dvm_hop + c.dvm_process
}

/// What one context switch costs besides the address-space switch.
fn switch_cycles(c: &Costs) -> u64 {
    c.switch_path
}

/// The arm64 broadcast-invalidation costs of the presets whose `dvm_hop` is
/// derived from, or scaled from, `altra`'s.
const ARM64_DVM_FROM_ONE_MPROTECT: Estimate = Estimate {
    costs: "tlbi_bcast_issue, dvm_hop, dvm_process, dvm_process_asid",
    used_when: "broadcast_invalidations",
    cycles_each: broadcast_cycles,
    why: "dvm_hop follows from one TLBI + DSB time difference in mprotect on an unnamed Arm server (Dev Jain, \
          2025: 3.2 us -> 2.85 us), kept in ns or scaled for this machine; issue and processing are estimates",
};

/// `switch_path` of the Intel presets after `skylake`'s.
const INTEL_SWITCH_FROM_SKYLAKE: Estimate = Estimate {
    costs: "switch_path",
    used_when: "context_switches",
    cycles_each: switch_cycles,
    why: "skylake's 847 cycles, fitted to origin 002's one ping-pong figure on a Skylake desktop, carried to this \
          core: no lat_ctx was found for it",
};

impl Preset {
    /// Returns whether the machine has broadcast TLB invalidation: every arm64
    /// machine (`TLBI ...IS`), and x86 machines with `INVLPGB` (those whose
    /// broadcast costs are set).
    pub fn has_broadcast_tlbi(&self) -> bool {
        self.arch == Arch::Arm64 || self.costs.dvm_hop > 0
    }
}

/// Returns every preset.
pub fn all() -> Vec<Preset> {
    vec![
        cortex_a72(),
        skylake(),
        emag(),
        altra(),
        thunderx(),
        westmere(),
        milan(),
        haswell2s(),
        ampereone(),
        graviton4(),
        skx8170(),
        icx8358(),
        icx8336c(),
        kunpeng920(),
        ivb3320m(),
        hsw48(),
        skl56(),
        numa4x48(),
    ]
}

/// Returns the preset called `name` (not `host`, which [`resolve`] reads).
pub fn by_name(name: &str) -> Option<Preset> {
    all().into_iter().find(|p| p.name == name)
}

/// The name of the machine built from the host's calibration ([`host`]).
pub const HOST: &str = "host";

/// Returns every name `--machine` takes: the presets, then `host`.
pub fn names() -> Vec<&'static str> {
    all().iter().map(|p| p.name).chain([HOST]).collect()
}

/// Returns the machine called `name`: a preset, or for `host` the machine
/// `tlbkit calibrate` measured ([`host::load`]).
pub fn resolve(name: &str) -> Result<Preset, crate::Error> {
    if name == HOST {
        return Ok(host::load()?);
    }
    by_name(name).ok_or_else(|| crate::Error::UnknownMachine { name: name.to_string() })
}

/// The costs every arm64 preset starts from: a figure here holds for each
/// arm64 preset that does not set its own. A preset sets the figures that
/// differ, each with its source, and restates a figure it shares with this
/// base where it has a source of its own for it, so that every source stays
/// beside its machine's figure. A comment here gives the reason that holds for
/// every preset keeping the figure; a figure without one is shared with no
/// source common to the presets that keep it (where every preset sets its own,
/// it is one of theirs), and each preset's notes (`docs/costs/<preset>.md`) give
/// its source.
const ARM64_BASE: Costs = Costs {
    mem_access: 4,
    tlb_l2_hit: 6,
    walk_level: 11,
    walk_start: 5,
    // Local TLBIs need no interconnect traffic; no public figure, a few tens of cycles
    // for the TLB RAM scan, more for the whole-ASID and whole-TLB forms.
    tlbi_local_va: 20,
    tlbi_local_asid: 40,
    tlbi_local_all: 40,
    // arm64 has no INVPCID: a TLBI VAE1 of any ASID is tlbi_local_va.
    invpcid_va: 0,
    // Issuing a DVM message is a store-like operation into the interconnect queue.
    tlbi_bcast_issue: 10,
    dvm_hop: 300,
    dvm_cross_socket: 300,
    dvm_process: 40,
    dvm_process_asid: 40,
    dvm_issuer_cores: 1,
    // A requester's outstanding broadcasts: no limit (0). No figure for these cores was
    // found; CCN-502's four bounds the DVM snoops sent *to* an RN-F, not the requests it
    // issues, so it is not a source for this limit.
    dvm_issuer_outstanding: 0,
    // No tracker limit (0). CCN-502's TRM ("DVM messages") lets the interconnect send an
    // RN-F at most four DVM snoops at once, but the credit loop that bounds is not
    // published, and these machines' interconnects are not CCN-502: holding four for a
    // whole issuer round trip (the only reading the model could make) is not a source.
    dvm_node_outstanding: 0,
    // The node's time per message (accept, then send the snoops on): no figure found;
    // 20 cycles assumed, a pipeline pass of a few interconnect cycles (EST).
    dvm_node_process: 20,
    // DSB/ISB drain the pipeline (~15 stages): no published figure (the A72's estimate).
    dsb: 20,
    isb: 20,
    full_barrier: 20,
    // MSR to a translation register serialises; ~30-50 with its ISB (estimate).
    root_write: 20,
    // Not used on arm64 (TTBR0 writes never flush); the local whole-ASID TLBI cost.
    root_write_flush: 40,
    exception_entry: 80,
    exception_exit: 70,
    ipi_send: 100,
    ipi_deliver: 1000,
    // Linux generic_smp_call_function_single_interrupt: a llist walk and an
    // indirect call; a few hundred instructions (estimate).
    ipi_handle: 300,
    ipi_cross_socket: 500,
    // GICv3's gic_ipi_send_mask writes ICC_SGI1R once per group of CPUs that
    // share Aff3.Aff2.Aff1; how the presets' MPIDRs group is not sourced, so
    // one write per target is kept. No shorthand: Linux arm64 never uses IRM.
    ipi_cluster: 0,
    ipi_shorthand: false,
    cacheline_transfer: 200,
    cacheline_cross_ccx: 0,
    cacheline_cross_socket: 300,
    syscall_body: 150,
    pipe_op: 400,
    switch_path: 4000,
    fault_path: 1500,
    // Zeroing 4 KB with DC ZVA at ~16 bytes/cycle.
    page_copy: 256,
    zap_page: ZAP_PAGE,
    zap_folio: ZAP_FOLIO,
    mlp: 8,
    walkers: 4,
};

/// The costs every x86 preset starts from, as [`ARM64_BASE`] is for arm64: a
/// preset sets what differs with its source, and restates a shared figure
/// where it has a source of its own; a figure without a comment has its source
/// in each preset's notes. Without `INVLPGB` an x86 machine has no
/// broadcast invalidation, so the broadcast figures here are zero and never
/// charged; a preset with `INVLPGB` sets them.
const X86_BASE: Costs = Costs {
    mem_access: 4,
    tlb_l2_hit: 7,
    walk_level: 12,
    walk_start: 10,
    tlbi_local_va: 230,
    tlbi_local_asid: 150,
    tlbi_local_all: 150,
    // No INVPCID unless a preset says so (and sets its cost).
    invpcid_va: 0,
    // No broadcast invalidation without INVLPGB: remote CPUs are reached by IPI.
    tlbi_bcast_issue: 0,
    dvm_hop: 0,
    dvm_cross_socket: 0,
    dvm_process: 0,
    dvm_process_asid: 0,
    // No INVLPGB: no broadcasts, so no interconnect limits.
    dvm_issuer_cores: 0,
    dvm_issuer_outstanding: 0,
    dvm_node_outstanding: 0,
    dvm_node_process: 0,
    // x86 has no DSB/ISB.
    dsb: 0,
    isb: 0,
    full_barrier: 20,
    // MOV CR3: estimates bounded by Ingo Molnar's 96-251 cycles for a flushing write.
    root_write: 100,
    root_write_flush: 100,
    exception_entry: 100,
    exception_exit: 80,
    ipi_send: 150,
    ipi_deliver: 1200,
    ipi_handle: 300,
    ipi_cross_socket: 200,
    // x2APIC cluster mode: Linux's choice where the firmware enables x2APIC and
    // the FADT does not force physical destination mode (x2apic_cluster.c's
    // probe); the server presets' notes assume it (skx8170.md, icx8358.md,
    // haswell2s.md, section 0).
    ipi_cluster: 16,
    ipi_shorthand: true,
    cacheline_transfer: 100,
    cacheline_cross_ccx: 0,
    cacheline_cross_socket: 190,
    // The kernel's syscall dispatch, eventfd body, page fault, 4 KB clear: estimates
    // (Linux's; a FreeBSD preset sets its own where they differ).
    syscall_body: 150,
    pipe_op: 400,
    switch_path: 4000,
    fault_path: 1500,
    page_copy: 256,
    zap_page: ZAP_PAGE,
    zap_folio: ZAP_FOLIO,
    // Independent loads in flight (L1D fill buffers): estimate.
    mlp: 10,
    walkers: 1,
};

/// The origin 000 machine: an AWS EC2 a1 (Graviton 1) with 16 Cortex-A72 cores
/// at 2.3 GHz in 4 clusters of 4, one socket. Notes: `docs/costs/cortex-a72.md`.
pub fn cortex_a72() -> Preset {
    Preset {
        name: "cortex-a72",
        description: "AWS EC2 a1 (Graviton 1): 16 x Cortex-A72 @ 2.3 GHz, 8/16-bit ASIDs (origin 000)",
        arch: Arch::Arm64,
        // AWS a1 instance type page: "2.3 GHz"; lscpu of an a1.xlarge in sbc-bench results/2iFY.txt.
        freq_ghz: 2.3,
        cores_per_socket: 16,
        cores_per_ccx: 16,
        real_cores: 16,
        // ID_AA64MMFR0_EL1.ASIDBits: the A72 implements 16; 8 is kept for rollover studies.
        asid_bits: &[16, 8],
        numa: &[1],
        tlb: TlbGeometry {
            // Cortex-A72 TRM (100095) and its product page: 32-entry fully associative L1 DTLB.
            l1d_entries: 32,
            // Cortex-A72 TRM section 5.2.3: "1024-entry 4-way set-associative" L2 TLB.
            l2_entries: 1024,
            l2_ways: 4,
            // Not published for the A72; A53/A55 TRMs give a 64-entry walk cache. Assumed equal.
            pwc_entries: 64,
        },
        // Origin 000 is FreeBSD 13-CURRENT (2020).
        kernel: Kernel::FreeBsd(13),
        // Not published for Graviton 1: EST, two DDR4-2400 channels (docs/costs/kernel.md).
        mem_bw_gbs: 38.4,
        tlbi_range: false,
        invpcid: false,
        // arm64: `meltdown` is x86's (the arm64 policies' KPTI is their `kpti` switch).
        meltdown: false,
        estimates: &[ARM64_DVM_FROM_ONE_MPROTECT],
        costs: Costs {
            // L1D load-to-use of 4 cycles (LLVM's Cortex-A57 model, used for -mcpu=cortex-a72).
            mem_access: 4,
            // Graviton 1 tinymembench: 4 KB vs huge pages at a 1 MiB block differ by 2.6 ns = 6 cycles.
            tlb_l2_hit: 6,
            // One page-table load hitting the cluster L2: ~21 cycles (tinymembench, 7.3 ns extra + L1).
            walk_level: 21,
            // Walk-unit start after an L2 TLB miss: not published; the 8 MiB tinymembench gap
            // (~25 cycles for a walk-cache hit with the leaf in L2) less one 21-cycle load.
            walk_start: 4,
            // The one public measurement of an uncontended TLBI IS + DSB ISH on an Arm server is
            // ~805 cycles (0.35 us, Linux "arm64/mm: Elide TLB flush in certain pte protection
            // transitions"). With issue (10), processing (40) and the DSB (20), two interconnect
            // hops of 370 cycles give 810. Graviton 1's cross-cluster coherence is ~4x its
            // ~50-cycle intra-cluster latency (AnandTech), so ~200 per hop is the floor of this.
            dvm_hop: 370,
            // One socket on the real machine; a second socket is assumed to add a CCIX-like hop.
            dvm_cross_socket: 300,
            // The receiving TLB's invalidation walk: the cost of a local whole-TLB scan,
            // for either kind of message (no A72 figure separates them).
            dvm_process: 40,
            dvm_process_asid: 40,
            // Interconnect limits (docs/costs/cortex-a72.md, "Broadcasts in flight"). A72 cores reach the interconnect through their
            // cluster's shared 2 MB L2 (Graviton 1 lscpu, notes §2): a 4-core cluster is one
            // requester (SRC-derived).
            dvm_issuer_cores: 4,
            // L4Re's measured SVC round trip: 138 cycles on A76, 230 on A53; the A72 lies between.
            exception_entry: 90,
            exception_exit: 90,
            // GIC SGI: no public A72 figure; derived from the ThunderX2 IPI benchmark
            // (~2.4 us delivery with the Linux call-function machinery) scaled to a single die.
            ipi_send: 100,
            ipi_deliver: 1000,
            // Core-to-core: ~50 cycles inside a cluster, ~200 across (AnandTech's 4x remark).
            cacheline_transfer: 200,
            // FreeBSD syscall dispatch (sys_* lookup, fget): a few hundred instructions.
            syscall_body: 300,
            // Pipe read/write body: uiomove of a word, pipe locks, selwakeup: estimate.
            pipe_op: 600,
            // FreeBSD sleepq + sched_switch + cpu_switch. No public A72 figure exists; this is
            // calibrated once for the machine from origin 000's *after* measurement (2.908 us =
            // 6688 cycles per switch) less the hardware costs this model adds to a switch.
            // Every other cost of this machine is independent of the origin, and the before/after
            // difference comes from the TLB model alone.
            switch_path: 5600,
            // vm_fault: map lookup, page allocation, pmap_enter: estimate.
            fault_path: 1500,
            // The A72's overlap of independent TLB misses is not published: 1, no overlap.
            // Origin 000's workloads touch one page at a time, which this never affects.
            mlp: 1,
            walkers: 1,
            ..ARM64_BASE
        },
    }
}

/// The origin 002 machine: a Skylake laptop at 2.3 GHz (turbo off), measured in a
/// KVM guest. Every figure's source or reason is in `docs/costs/skylake.md`.
pub fn skylake() -> Preset {
    Preset {
        name: "skylake",
        description: "Skylake laptop @ 2.3 GHz, 12-bit PCIDs, measured under KVM (origin 002)",
        arch: Arch::X86_64,
        // Origin 002: "a Skylake laptop at 2.3 GHz (turbo off ...)".
        freq_ghz: 2.3,
        // The origin names no part; an i5-6200U-class dual core (2.3 GHz base) is assumed.
        cores_per_socket: 2,
        cores_per_ccx: 2,
        real_cores: 2,
        // CR3 bits 11:0 (Intel SDM vol. 3A, 4.10.1); Linux uses 6 dynamic ones per CPU.
        asid_bits: &[12],
        numa: &[1],
        tlb: TlbGeometry {
            // Intel optimization manual table 2-15 (Skylake client): DTLB 64 entries, 4-way,
            // modelled fully associative; STLB 1536 entries, 12-way, 4 KB and 2 MB (wikichip).
            l1d_entries: 64,
            l2_entries: 1536,
            l2_ways: 12,
            // PDE-cache size is not published: 32 assumed (origin 002's pages span one 2 MB region).
            pwc_entries: 32,
        },
        // Origin 002: the PCID series merged in v4.14.
        kernel: Kernel::Linux(4, 14),
        // Intel ARK, i5-6200U: "Max Memory Bandwidth 34.1 GB/s" (2 x DDR4-2133).
        mem_bw_gbs: 34.1,
        tlbi_range: false,
        // INVPCID: Intel from Haswell ("systems with INVPCID (Haswell and newer)", Dave Hansen, LKML 2017).
        invpcid: true,
        // Skylake client: Meltdown-affected (Intel's affected-processor list, CVE-2017-5754; no RDCL_NO).
        meltdown: true,
        estimates: &[Estimate {
            costs: "switch_path",
            used_when: "context_switches",
            cycles_each: switch_cycles,
            why: "fitted to origin 002's one ping-pong figure (1.22 us) on this Skylake desktop",
        }],
        costs: Costs {
            // Intel optimization manual, Skylake client caches: L1D fastest latency 4.
            mem_access: 4,
            // STLB hit: 12-cycle L2 TLB load latency measured on Haswell less the 4-cycle L1D.
            tlb_l2_hit: 8,
            // A paging-structure load hitting the L2 (12, Intel manual); the walk's fixed part
            // is an estimate that also holds, under KVM, the EPT translation of the leaf
            // table's guest-physical address with EPT caches warm (2-D walks are not modelled).
            walk_start: 10,
            walk_level: 12,
            // INVLPG ~100 ns (Dave Hansen, pre-Skylake Intel); INVPCID single-context: estimate;
            // INVPCID all-contexts 376 ns on Andy Lutomirski's Skylake laptop.
            tlbi_local_va: 230,
            tlbi_local_asid: 400,
            tlbi_local_all: 865,
            // INVPCID type 0: EST, no timing outside the predicted series found; microcoded and "_slow_"
            // (Hansen's PTI commit "x86/mm: Use INVPCID for __native_flush_tlb_single()"): ~1.7 x INVLPG.
            invpcid_va: 400,
            // MFENCE or a LOCKed instruction: estimate.
            full_barrier: 30,
            // SYSCALL entry / SYSRET exit before PTI (the origin predates it): estimates below the
            // 191 ns getpid measured on Skylake-X.
            exception_entry: 80,
            exception_exit: 60,
            // In a KVM guest an IPI exits to the host: estimates bounded by ~5 us measured guest IPIs.
            ipi_send: 2000,
            ipi_deliver: 2500,
            ipi_handle: 400,
            ipi_cross_socket: 0,
            // Core-to-core hand-off ~45 ns on an i7-6700K (Willy Tarreau's latency test).
            cacheline_transfer: 100,
            cacheline_cross_socket: 0,
            // Linux schedule() + __switch_to besides switch_mm: no public figure for this machine;
            // calibrated once from origin 002's *after* figure (1.22 us = 2806 cycles per turn of
            // the PCID ping-pong) less the hardware costs this model adds to a turn. Every other
            // figure is independent of the origin; the before/after difference comes from the
            // TLB model alone.
            switch_path: 847,
            // Intel optimization manual (Skylake client): "two page walks in parallel".
            walkers: 2,
            ..X86_BASE
        },
    }
}

/// Origin 001's machine: a 32-core Ampere eMAG 8180 at 3.0 GHz, one node.
/// Every figure's source or reason: `docs/costs/emag.md` (SRC / SRC-derived / EST there).
pub fn emag() -> Preset {
    Preset {
        name: "emag",
        description: "Ampere eMAG 8180: 32 cores @ 3.0 GHz, one NUMA node, 16-bit ASIDs (origin 001)",
        arch: Arch::Arm64,
        freq_ghz: 3.0,
        cores_per_socket: 32,
        cores_per_ccx: 32,
        real_cores: 32,
        asid_bits: &[16, 8],
        numa: &[1],
        // Measured 48-entry L1 DTLB and 1024-entry L2 TLB (ways and walk cache assumed).
        tlb: TlbGeometry { l1d_entries: 48, l2_entries: 1024, l2_ways: 4, pwc_entries: 64 },
        // A RHEL 8 (4.18-based) tree, docs/costs/emag.md.
        kernel: Kernel::Linux(4, 18),
        // eMAG 8180: 8 x DDR4-2667 channels (Ampere product brief).
        mem_bw_gbs: 170.7,
        tlbi_range: false,
        invpcid: false,
        // arm64: `meltdown` is x86's (the arm64 policies' KPTI is their `kpti` switch).
        meltdown: false,
        estimates: &[Estimate {
            costs: "dvm_hop, dvm_process_asid",
            used_when: "broadcast_invalidations",
            cycles_each: broadcast_cycles,
            why: "dvm_process_asid derived from origin 001's stock mprotect figure on this machine; dvm_hop a \
                  core-to-core hand-off times 3.0 (an estimate)",
        }],
        costs: Costs {
            mem_access: 5,
            walk_level: 13,
            // Core-to-core ~70 ns on eMAG (AnandTech) for a one-way hop.
            dvm_hop: 210,
            // A by-VA message looks up one set per TLB, as a local TLBI VA does: no eMAG
            // figure, as the A72 preset.
            dvm_process: 40,
            // Derived from origin 001: stock mprotect-threaded spends (2.1696 - 0.13941) s /
            // 20,000 = 101.5 us more per mprotect; each mprotect of 4 MiB (1024 4 KB pages, at
            // least MAX_TLBI_OPS) is one TLBI ASIDE1IS, and 32 copies send at once, so each
            // receiver works 304,500 / 32 = ~9,500 cycles per message. QI Fuli's ThunderX2
            // figure in the same thread (a core loses 29% to one other core's mprotect loop)
            // says receivers pay microseconds per message. docs/costs/emag.md, section 0.
            dvm_process_asid: 9500,
            // Interconnect limits (docs/costs/emag.md, "Broadcasts in flight"). Core pairs share an L2 (AnandTech: "two core pairs
            // sharing the same 256KB L2 cache"), the port to the fabric: SRC-derived.
            dvm_issuer_cores: 2,
            exception_entry: 90,
            exception_exit: 90,
            cacheline_transfer: 210,
            // Linux's scheduler path: no eMAG figure; the cortex-a72 value scaled by the
            // L1D-latency ratio would be arbitrary, so a Linux-typical 1.3 us / 3.0 GHz estimate.
            switch_path: 4000,
            mlp: 4,
            walkers: 1,
            ..ARM64_BASE
        },
    }
}

/// Origin 004's machine: an 80-core Ampere Altra (Neoverse N1) at 3.0 GHz, booted as
/// one NUMA node (`numa=1`) or two (`numa=2`). Notes: `docs/costs/altra.md`.
pub fn altra() -> Preset {
    Preset {
        name: "altra",
        description: "Ampere Altra: 80 x Neoverse N1 @ 3.0 GHz, numa=1|2, 16-bit ASIDs (origin 004)",
        arch: Arch::Arm64,
        freq_ghz: 3.0,
        cores_per_socket: 80,
        cores_per_ccx: 80,
        real_cores: 80,
        asid_bits: &[16, 8],
        numa: &[1, 2],
        // Neoverse N1 TRM: 48-entry L1 DTLB, 1280-entry 5-way L2 TLB (walk cache assumed).
        tlb: TlbGeometry { l1d_entries: 48, l2_entries: 1280, l2_ways: 5, pwc_entries: 64 },
        // Origin 004: contpte merged in v6.9.
        kernel: Kernel::Linux(6, 9),
        // Altra: 8 x DDR4-3200 channels (Ampere datasheet).
        mem_bw_gbs: 204.8,
        tlbi_range: false,
        invpcid: false,
        // arm64: `meltdown` is x86's (the arm64 policies' KPTI is their `kpti` switch).
        meltdown: false,
        estimates: &[ARM64_DVM_FROM_ONE_MPROTECT],
        costs: Costs {
            tlb_l2_hit: 3,
            // ~0.35 us for TLBI IS + DSB ISH on an Arm server (as for cortex-a72).
            dvm_hop: 490,
            // Weak: from origin 004's numa=2 / numa=1 unfold costs (x4.3).
            dvm_cross_socket: 1700,
            // Not separated from the by-VA cost: no Neoverse N1 figure.
            dvm_process_asid: 40,
            // Interconnect limits (docs/costs/altra.md, "Broadcasts in flight"). Two N1 cores share a DSU, whose port to the mesh is
            // the requester (AnandTech's Altra Max review: "two DSUs, each with two Neoverse-N1
            // cores, connected to a CAL, connected to a single XP"): SRC-derived.
            dvm_issuer_cores: 2,
            ipi_deliver: 800,
            cacheline_transfer: 150,
            cacheline_cross_socket: 1000,
            // No origin figure to calibrate against yet: the emag estimate.
            switch_path: 4000,
            // Neoverse N1: four page walks in flight.
            walkers: 4,
            ..ARM64_BASE
        },
    }
}

/// Ampere AmpereOne A192-32X: 192 Ampere-1a cores at 3.2 GHz, one socket, one
/// cache domain (the machine Linux's per-mm TLB modes for Ampere target). Many
/// figures are carried over from `altra` or scaled from it; notes:
/// `docs/costs/ampereone.md`.
pub fn ampereone() -> Preset {
    Preset {
        name: "ampereone",
        description: "Ampere AmpereOne A192-32X: 192 x Ampere-1a @ 3.2 GHz, 1 socket, 16-bit ASIDs",
        arch: Arch::Arm64,
        // lscpu and sbc-bench of an A192-32X (sbc-bench results/XUpQ.txt): 3.2 GHz, 192 cores, 1 socket.
        freq_ghz: 3.2,
        cores_per_socket: 192,
        // One 64 MB system-level cache for the die; the 2 MB L2s are private.
        cores_per_ccx: 192,
        real_cores: 192,
        asid_bits: &[16, 8],
        numa: &[1],
        // Not published: N1/V2's 48-entry L1 DTLB and a 2K 8-way L2 TLB assumed (EST).
        tlb: TlbGeometry { l1d_entries: 48, l2_entries: 2048, l2_ways: 8, pwc_entries: 64 },
        // Armv8.6 says it should; no ID-register dump confirms it (EST: off).
        // EST: the mechanisms it is the target of are posted against 2025-2026 mainline.
        kernel: Kernel::Linux(6, 18),
        // AmpereOne A192-32X: 8 x DDR5-5200 channels (Ampere product brief).
        mem_bw_gbs: 332.8,
        tlbi_range: false,
        invpcid: false,
        // arm64: `meltdown` is x86's (the arm64 policies' KPTI is their `kpti` switch).
        meltdown: false,
        estimates: &[ARM64_DVM_FROM_ONE_MPROTECT],
        costs: Costs {
            // LLVM AArch64SchedAmpere1.td LoadLatency 4; ramlat 1.254 ns x 3.2.
            mem_access: 4,
            tlb_l2_hit: 5,
            // ramlat in the private 2 MB L2: 3.444 ns x 3.2.
            walk_level: 11,
            // altra's 163 ns, scaled for a larger mesh (522 to 810 cycles; EST).
            dvm_hop: 600,
            // Single-socket part: altra's, unused at 192 CPUs.
            dvm_cross_socket: 1700,
            // A 2048-entry TLB scanned for a tag: 1.6 x 40 (EST).
            dvm_process_asid: 60,
            // Interconnect limits (docs/costs/ampereone.md, "Broadcasts in flight"). Each core's 2 MB L2 is private (STH, notes §1):
            // one requester per core assumed (EST: whether a 4-core cluster shares a port is unknown).
            dvm_issuer_cores: 1,
            // altra's 267 ns at 3.2 GHz.
            ipi_deliver: 850,
            // ~55 ns: above the 40-44 ns SLC load latency (ramlat) a dirty line's trip needs.
            cacheline_transfer: 175,
            cacheline_cross_socket: 1000,
            ..ARM64_BASE
        },
    }
}

/// AWS Graviton4: 96 Neoverse V2 cores at 2.8 GHz per socket (two sockets on
/// the 48xlarge sizes), CMN-700, `FEAT_TLBIRANGE`. Notes: `docs/costs/graviton4.md`.
pub fn graviton4() -> Preset {
    Preset {
        name: "graviton4",
        description: "AWS Graviton4: 96 x Neoverse V2 @ 2.8 GHz per socket, FEAT_TLBIRANGE, 16-bit ASIDs",
        arch: Arch::Arm64,
        // AWS Graviton getting-started table: 2800 MHz, no turbo, 96 cores per socket.
        freq_ghz: 2.8,
        cores_per_socket: 96,
        // One 36 MB LLC; no cluster step in core-to-core latency (chipsandcheese).
        cores_per_ccx: 96,
        real_cores: 192,
        // m8g.metal ID_AA64MMFR0_EL1.ASIDBits = 2.
        asid_bits: &[16, 8],
        numa: &[1],
        // V2: 48-entry L1 DTLB (Hot Chips 2023); L2 TLB 2K 8-way (EST, V1/X925 class).
        tlb: TlbGeometry { l1d_entries: 48, l2_entries: 2048, l2_ways: 8, pwc_entries: 64 },
        // m8g.metal ID_AA64ISAR0_EL1.TLB = 0b0010: FEAT_TLBIOS and FEAT_TLBIRANGE.
        // EST: the mechanisms it is the target of are posted against 2025-2026 mainline.
        kernel: Kernel::Linux(6, 18),
        // Graviton4: 12 x DDR5-5600 channels per socket (AWS re:Invent 2023 announcement).
        mem_bw_gbs: 537.6,
        tlbi_range: true,
        invpcid: false,
        // arm64: `meltdown` is x86's (the arm64 policies' KPTI is their `kpti` switch).
        meltdown: false,
        estimates: &[ARM64_DVM_FROM_ONE_MPROTECT],
        costs: Costs {
            // LLVM AArch64SchedNeoverseV2.td LoadLatency 4.
            mem_access: 4,
            tlb_l2_hit: 5,
            // V2 L2: 10-cycle load-to-use (Hot Chips 2023).
            walk_level: 10,
            // altra's 163 ns kept in ns (EST): in-socket bounce latency on par with Graviton 2/3.
            dvm_hop: 460,
            // Cross-socket extra 93.6 ns (chipsandcheese 138.6 ns less 45) x ~1.5 (EST).
            dvm_cross_socket: 400,
            dvm_process_asid: 60,
            // Interconnect limits (docs/costs/graviton4.md, "Broadcasts in flight"). Each V2 core has a private 2 MB L2 on the CMN-700
            // mesh (AWS Graviton4 listing, notes): one requester per core (SRC-derived).
            dvm_issuer_cores: 1,
            // Grace (V2) null syscall 178.4 ns at 3.1-3.44 GHz, 553-614 cycles, split 200/200/150.
            exception_entry: 200,
            exception_exit: 200,
            ipi_deliver: 750,
            // The cross-socket extra of a cache line.
            ipi_cross_socket: 262,
            // 45 ns (chipsandcheese: 30-60 ns in a socket) x 2.8.
            cacheline_transfer: 126,
            // 138.6 - 45 ns across sockets, x 2.8.
            cacheline_cross_socket: 262,
            // ROB 320, three load pipes; miss buffers unpublished (EST).
            mlp: 12,
            ..ARM64_BASE
        },
    }
}

/// HiSilicon Kunpeng 920-6426: two sockets of 64 TaiShan v110 cores at 2.6 GHz
/// (the common two-socket part; other Kunpeng 920 SKUs differ in cores and
/// clock). Each socket is two 32-core compute dies (SCCLs), each with its own
/// L3, modelled as two cache domains of 32. Armv8.2: 16-bit ASIDs, broadcast
/// `TLBI ...IS`, no `FEAT_TLBIRANGE`. No SMT: one thread per core. Fixed from
/// hardware documentation and core-to-core measurements before any workload
/// ran on it; notes, with every estimate marked: `docs/costs/kunpeng920.md`.
pub fn kunpeng920() -> Preset {
    Preset {
        name: "kunpeng920",
        description: "HiSilicon Kunpeng 920-6426: 2 sockets x 64 TaiShan v110 cores @ 2.6 GHz, 16-bit ASIDs",
        arch: Arch::Arm64,
        // nviennot/core-to-core-latency results file "HiSilicon Kunpeng 920-6426 @ 2.6GHz"; WikiChip 920-6426.
        freq_ghz: 2.6,
        cores_per_socket: 64,
        // chipsandcheese: an SCCL die holds "up to 32 TaiShan v110 CPU cores with L3 cache".
        cores_per_ccx: 32,
        // Two sockets of 64 cores, one thread each (WikiChip: 64 cores, 64 threads).
        real_cores: 128,
        // EST: ID_AA64MMFR0_EL1.ASIDBits not found for TaiShan v110; Armv8.2 server cores give 16.
        asid_bits: &[16, 8],
        // Linux makes each SCCL a NUMA node; the model's cache domains carry the die crossing instead.
        numa: &[1],
        // EST: TaiShan v110's TLBs are not published; Cortex-A76/Neoverse N1-class geometry assumed.
        tlb: TlbGeometry { l1d_entries: 48, l2_entries: 1280, l2_ways: 5, pwc_entries: 64 },
        // EST: a 2020-2022 distribution or mainline kernel of the machine's era; workloads set their own.
        kernel: Kernel::Linux(5, 10),
        // WikiChip TaiShan v110: 8 channels of DDR4-2933 per socket (8 x 2933 x 8 bytes).
        mem_bw_gbs: 187.7,
        // Armv8.2-A (WikiChip); range TLBI is Armv8.4 (FEAT_TLBIRANGE): absent.
        tlbi_range: false,
        invpcid: false,
        // arm64: `meltdown` is x86's (the arm64 policies' KPTI is their `kpti` switch).
        meltdown: false,
        estimates: &[ARM64_DVM_FROM_ONE_MPROTECT],
        costs: Costs {
            // LLVM AArch64SchedTSV110.td: LoadLatency 4.
            mem_access: 4,
            // One Arm-server TLBI IS + DSB ISH round trip, ~0.35 us (as cortex-a72), at 2.6 GHz:
            // 910 cycles less issue, processing and DSB (70), two hops of 420 (EST, not this machine).
            dvm_hop: 420,
            // EST: the cross-socket extra of a cache line (below).
            dvm_cross_socket: 180,
            // Not separated from the by-VA cost: no TaiShan v110 figure (EST).
            dvm_process_asid: 40,
            // EST: each core has a private 512 KB L2 (WikiChip), taken as its own requester.
            dvm_issuer_cores: 1,
            // EST: one interrupt-controller crossing, as a cache line's cross-socket extra.
            ipi_cross_socket: 180,
            // nviennot/core-to-core-latency (920-6426): 30-38 ns inside one SCCL, ~35 ns x 2.6.
            cacheline_transfer: 91,
            // Same data: 72-88 ns between the two SCCLs of a socket, ~80 - 35 = 45 ns x 2.6.
            cacheline_cross_ccx: 117,
            // EST: no cross-socket measurement found; ~70 ns over the cross-die figure.
            cacheline_cross_socket: 180,
            ..ARM64_BASE
        },
    }
}

/// An Ivy Bridge laptop: Intel Core i5-3320M, 2 cores with 2 threads each at
/// 2.6 GHz base, one socket, PCID present and no INVPCID. The simulator has no
/// SMT, so each of the 4 hardware threads is modelled as a core (what that
/// leaves out: `docs/costs/ivb3320m.md`, "SMT"). Fixed from hardware
/// documentation and microbenchmarks before any workload ran on it; notes,
/// with every estimate marked: `docs/costs/ivb3320m.md`.
pub fn ivb3320m() -> Preset {
    Preset {
        name: "ivb3320m",
        description: "Ivy Bridge laptop, Core i5-3320M: 2 cores x 2 threads @ 2.6 GHz, PCID, no INVPCID",
        arch: Arch::X86_64,
        // Intel ARK, i5-3320M: 2.6 GHz base (3.3 GHz turbo), 2 cores, 4 threads.
        freq_ghz: 2.6,
        // The 4 hardware threads, each modelled as a core (no SMT in the simulator).
        cores_per_socket: 4,
        // One 3 MB L3 shared by the whole die.
        cores_per_ccx: 4,
        real_cores: 4,
        // CR3 bits 11:0 with CR4.PCIDE (PCID since Westmere); INVPCID came with Haswell.
        asid_bits: &[12],
        numa: &[1],
        // L1 DTLB 64 entries 4-way (modelled fully associative), STLB 512 4-way as in
        // Nehalem (Tom's Hardware; Haswell doubled it); PDE cache: EST.
        tlb: TlbGeometry { l1d_entries: 64, l2_entries: 512, l2_ways: 4, pwc_entries: 32 },
        // EST: a 2013-2015 kernel of the laptop's era; workloads set what they need.
        kernel: Kernel::Linux(3, 15),
        // Intel ARK, i5-3320M: "Max Memory Bandwidth 25.6 GB/s" (2 x DDR3-1600).
        mem_bw_gbs: 25.6,
        tlbi_range: false,
        // No INVPCID: it came with Haswell (PTI defers a user PCID's flush to the return to user).
        invpcid: false,
        // Ivy Bridge: Meltdown-affected (Intel's affected-processor list, CVE-2017-5754).
        meltdown: true,
        estimates: &[INTEL_SWITCH_FROM_SKYLAKE],
        costs: Costs {
            // Intel optimization manual, Sandy Bridge family: L1D load-to-use 4.
            mem_access: 4,
            // mynavi RMMA Haswell article: Ivy Bridge's L2 TLB latency 11 cycles, less the 4 of L1D.
            tlb_l2_hit: 7,
            // A paging-structure load from L2 (12, Sandy Bridge family); walk start: EST.
            walk_level: 12,
            walk_start: 8,
            // EST: pre-Skylake Intel INVLPG, inside the 96-260 cycles of the notes' loop measurements.
            tlbi_local_va: 230,
            // No INVPCID: a whole-PCID flush is a flushing MOV CR3 (root_write + root_write_flush).
            tlbi_local_asid: 200,
            // No INVPCID: a global flush toggles CR4.PGE, ~750 cycles hot (EST, unnamed Intel core).
            tlbi_local_all: 750,
            // LOCK ADD ~20.5 cycles on Sandy Bridge-E (rygorous atomic_ops_test).
            full_barrier: 20,
            // EST: a single die's APIC message plus interrupt entry, ~460 ns.
            ipi_deliver: 1200,
            // One socket.
            ipi_cross_socket: 0,
            // nviennot/core-to-core-latency, i5-4590 (Haswell quad, ring at core clock): ~21 ns
            // at 3.3 GHz = ~70 cycles; the same ring design, in cycles (SRC-derived proxy).
            cacheline_transfer: 70,
            cacheline_cross_socket: 0,
            // EST: skylake's calibrated 847 cycles, raised for an older core (haswell2s: 900).
            switch_path: 950,
            // Intel: before Skylake one page walk at a time.
            walkers: 1,
            ..X86_BASE
        },
    }
}

/// A two-socket Intel Xeon E5-2680 v3 (Haswell-EP): 12 cores and 24 hardware
/// threads per socket at 2.5 GHz, 48 threads in all, each thread a CPU of the
/// model (which has no SMT). Fixed from hardware documentation and
/// microbenchmarks of the hardware before any workload ran on it; nothing
/// comes from a result reported for a mechanism it predicts. Notes, with every
/// source, every estimate and what modelling a thread as a core leaves out:
/// `docs/costs/hsw48.md`.
pub fn hsw48() -> Preset {
    Preset {
        name: "hsw48",
        description: "Intel Xeon E5-2680 v3 (Haswell-EP): 2 sockets x 12 cores x 2 threads @ 2.5 GHz, 48 CPUs",
        arch: Arch::X86_64,
        // Intel ARK, Xeon E5-2680 v3: 12 cores, 24 threads, 2.5 GHz base (3.3 GHz turbo).
        freq_ghz: 2.5,
        // 12 cores x 2 threads per socket, each thread a CPU (no SMT in the model).
        cores_per_socket: 24,
        // One 30 MB L3 per socket on the two rings of the 12-core die; Cluster-on-Die off (EST).
        cores_per_ccx: 24,
        real_cores: 48,
        // CR3 bits 11:0 (Intel SDM vol. 3A, 4.10.1); INVPCID since Haswell.
        asid_bits: &[12],
        numa: &[1],
        // AIDA64 on 2 x E5-2660 v3 (InstLatx64, the same Haswell-EP core): "L1D 4K TLB: 64
        // entries, 4 way" (modelled fully associative), "L2I+D 4K+2M TLB: 1024 entries, 8 way";
        // PDE cache: EST.
        tlb: TlbGeometry { l1d_entries: 64, l2_entries: 1024, l2_ways: 8, pwc_entries: 32 },
        // EST: Linux 4.9, an LTS kernel of the machine's service years; workloads set theirs.
        kernel: Kernel::Linux(4, 9),
        // 4 x DDR4-2133 channels per socket (Intel ARK, E5-2680 v3): 4 x 2133 x 8 bytes.
        mem_bw_gbs: 68.3,
        tlbi_range: false,
        // INVPCID: Intel from Haswell ("systems with INVPCID (Haswell and newer)", Dave Hansen, LKML 2017).
        invpcid: true,
        // Haswell-EP: Meltdown-affected (Intel's affected-processor list, CVE-2017-5754).
        meltdown: true,
        estimates: &[INTEL_SWITCH_FROM_SKYLAKE],
        costs: Costs {
            // InstLatx64 E5-2660 v3: L1D 4, L2 12 cycles; STLB hit: Haswell's 12-cycle L2 TLB
            // (mynavi RMMA Haswell article) less L1D; the walk's fixed part: EST.
            mem_access: 4,
            tlb_l2_hit: 8,
            walk_level: 12,
            walk_start: 8,
            // EST: pre-Skylake Intel INVLPG, X86_BASE's 230 (docs/costs/hsw48.md, section 3).
            tlbi_local_va: 230,
            // A whole-mm flush: a flushing CR3 write (root_write + root_write_flush), EST.
            tlbi_local_asid: 200,
            // INVPCID all-contexts: haswell2s's estimate for the same core (EST).
            tlbi_local_all: 520,
            // INVPCID type 0: EST, no timing outside the predicted series found; microcoded and "_slow_"
            // (Hansen's PTI commit "x86/mm: Use INVPCID for __native_flush_tlb_single()"): ~1.7 x INVLPG.
            invpcid_va: 400,
            // LOCK ADD ~20.5 cycles (Sandy Bridge-E, rygorous atomic_ops_test); EST for Haswell.
            full_barrier: 20,
            // MOV CR3: the X86_BASE pair (EST).
            root_write: 100,
            root_write_flush: 100,
            // SYSCALL/SYSRET and interrupt entry without PTI (Linux 4.9): X86_BASE's estimates.
            exception_entry: 100,
            exception_exit: 80,
            // x2APIC ICR write, delivery (ring trip, acceptance, IDT vectoring) and Linux's
            // call-function dispatch: estimates as skx8170 (no bare-metal Haswell-EP figure).
            ipi_send: 150,
            ipi_deliver: 1000,
            ipi_handle: 300,
            // One QPI crossing: the cross-socket extra of a cache-line hand-off, below.
            ipi_cross_socket: 206,
            // Core-to-core CAS one-way medians on a 2 x Xeon E5-2680 v4 (Broadwell-EP, the same
            // two-ring die and QPI; nviennot/core-to-core-latency): 45.2 ns in a socket, 127.5
            // ns across, x 2.5.
            cacheline_transfer: 113,
            cacheline_cross_socket: 206,
            // Linux software paths: estimates as for the other Linux presets; the switch path is
            // haswell2s's estimate for a Haswell core (skylake's calibrated 847, raised).
            syscall_body: 150,
            pipe_op: 400,
            switch_path: 900,
            fault_path: 1500,
            page_copy: 256,
            // L1D fill buffers: EST (X86_BASE).
            mlp: 10,
            // Intel: before Skylake one page walk at a time.
            walkers: 1,
            ..X86_BASE
        },
    }
}

/// A two-socket Intel Xeon Gold 6132 (Skylake-SP): 14 cores and 28 hardware
/// threads per socket at 2.6 GHz, 56 threads in all, each thread a CPU. The
/// Skylake-SP core's figures are `skx8170`'s; the mesh and UPI are measured on
/// a part of the same 18-core die. Fixed before any workload ran on it, from
/// hardware documentation and microbenchmarks only. Notes: `docs/costs/skl56.md`.
pub fn skl56() -> Preset {
    Preset {
        name: "skl56",
        description: "Intel Xeon Gold 6132 (Skylake-SP): 2 sockets x 14 cores x 2 threads @ 2.6 GHz, 56 CPUs",
        arch: Arch::X86_64,
        // Intel ARK, Xeon Gold 6132: 14 cores, 28 threads, 2.6 GHz base (3.7 GHz turbo).
        freq_ghz: 2.6,
        // 14 cores x 2 threads per socket, each thread a CPU (no SMT in the model).
        cores_per_socket: 28,
        // One mesh and one non-inclusive L3 (19.25 MB) per socket; sub-NUMA clustering off (EST).
        cores_per_ccx: 28,
        real_cores: 56,
        asid_bits: &[12],
        numa: &[1],
        // The Skylake-SP core's TLBs, as skx8170 (AIDA64, InstLatx64 i9-7900X).
        tlb: TlbGeometry { l1d_entries: 64, l2_entries: 1536, l2_ways: 12, pwc_entries: 32 },
        // EST: as skx8170, a v5.x kernel of the machine's service years.
        kernel: Kernel::Linux(5, 10),
        // 6 x DDR4-2666 channels per socket (Intel ARK, Gold 6132): 6 x 2666 x 8 bytes.
        mem_bw_gbs: 128.0,
        tlbi_range: false,
        // INVPCID: Intel from Haswell ("systems with INVPCID (Haswell and newer)", Dave Hansen, LKML 2017).
        invpcid: true,
        // Skylake-SP: Meltdown-affected (Intel's affected-processor list, CVE-2017-5754; no RDCL_NO).
        meltdown: true,
        estimates: &[INTEL_SWITCH_FROM_SKYLAKE],
        costs: Costs {
            // skx8170's Skylake-SP core figures (InstLatx64 i9-7900X; the walk's fixed part EST).
            mem_access: 4,
            tlb_l2_hit: 9,
            walk_level: 14,
            walk_start: 10,
            // INVLPG / INVPCID single-context / all-contexts: skx8170's (SRC-derived / EST / SRC-derived).
            tlbi_local_va: 230,
            tlbi_local_asid: 400,
            tlbi_local_all: 865,
            // INVPCID type 0: EST, no timing outside the predicted series found; microcoded and "_slow_"
            // (Hansen's PTI commit "x86/mm: Use INVPCID for __native_flush_tlb_single()"): ~1.7 x INVLPG.
            invpcid_va: 400,
            // LOCK ADD ~20.5 cycles (Sandy Bridge-E, rygorous atomic_ops_test); EST for Skylake-SP.
            full_barrier: 20,
            // MOV CR3: the X86_BASE pair (EST).
            root_write: 100,
            root_write_flush: 100,
            // SYSCALL/SYSRET without PTI's CR3 writes (skylake's estimates): the run adds them
            // where PTI is on (by default here, a Meltdown-affected CPU).
            exception_entry: 80,
            exception_exit: 60,
            // x2APIC IPIs: estimates as skx8170 (no Skylake-SP figure).
            ipi_send: 150,
            ipi_deliver: 1000,
            ipi_handle: 300,
            // One UPI crossing: the cross-socket extra of a cache-line hand-off, below.
            ipi_cross_socket: 243,
            // Core-to-core CAS one-way medians on a 2 x Xeon Gold 6242 (Cascade Lake on the same
            // 18-core die, three UPI links as the 6132; nviennot/core-to-core-latency): 48.0 ns
            // in a socket, 141.4 ns across, x 2.6.
            cacheline_transfer: 125,
            cacheline_cross_socket: 243,
            // Linux software paths: skx8170's estimates (a Skylake core).
            syscall_body: 150,
            pipe_op: 400,
            switch_path: 850,
            fault_path: 1500,
            page_copy: 256,
            // L1D fill buffers: EST (as skylake).
            mlp: 10,
            // Intel optimization manual (Skylake): "two page walks in parallel".
            walkers: 2,
            ..X86_BASE
        },
    }
}

/// A four-socket Intel Xeon E5-4607 (Sandy Bridge-EP) server of the Linux v4.3
/// era: 6 cores and 12 hardware threads per socket at 2.2 GHz (no turbo), 48
/// threads in all, one NUMA node per socket (4 nodes), PCID and no INVPCID.
/// The sockets are joined in a ring by their two QPI links, which the model's
/// single cross-socket cost averages. Fixed before any workload ran on it, from
/// hardware documentation and microbenchmarks only. Notes: `docs/costs/numa4x48.md`.
pub fn numa4x48() -> Preset {
    Preset {
        name: "numa4x48",
        description: "Intel Xeon E5-4607 (Sandy Bridge-EP): 4 sockets x 6 cores x 2 threads @ 2.2 GHz, 4 NUMA nodes, \
                      48 CPUs, PCID, no INVPCID",
        arch: Arch::X86_64,
        // Intel ARK, Xeon E5-4607: 6 cores, 12 threads, 2.2 GHz, no Turbo Boost.
        freq_ghz: 2.2,
        // 6 cores x 2 threads per socket, each thread a CPU; 48 CPUs fill 4 sockets.
        cores_per_socket: 12,
        // One 12 MB L3 per socket on the ring.
        cores_per_ccx: 12,
        real_cores: 48,
        // CR3 bits 11:0 with CR4.PCIDE (PCID since Westmere); INVPCID came with Haswell.
        asid_bits: &[12],
        // One node per socket: 4 sockets are 4 NUMA nodes.
        numa: &[1],
        // AIDA64 on a Sandy Bridge-EP (InstLatx64, family 6 model 2D): "L1D 4K TLB: 64 entries,
        // 4 way" (modelled fully associative), "L2I+D 4K TLB: 512 entries, 4 way"; PDE cache: EST.
        tlb: TlbGeometry { l1d_entries: 64, l2_entries: 512, l2_ways: 4, pwc_entries: 32 },
        // EST: the v4.3 era (2015) the machine is dated to; workloads set what they need.
        kernel: Kernel::Linux(4, 3),
        // 4 x DDR3-1066 channels per socket (Intel ARK, E5-4607): 4 x 1066 x 8 bytes.
        mem_bw_gbs: 34.1,
        tlbi_range: false,
        // No INVPCID: it came with Haswell (PTI defers a user PCID's flush to the return to user).
        invpcid: false,
        // Sandy Bridge-EP: Meltdown-affected (Intel's affected-processor list, CVE-2017-5754).
        meltdown: true,
        estimates: &[INTEL_SWITCH_FROM_SKYLAKE],
        costs: Costs {
            // AIDA64 on a Sandy Bridge-EP (InstLatx64): L1D 4, L2 12 cycles. STLB hit: Ivy
            // Bridge's 11-cycle L2 TLB (mynavi RMMA) less L1D, as ivb3320m; walk start: EST.
            mem_access: 4,
            tlb_l2_hit: 7,
            walk_level: 12,
            walk_start: 8,
            // EST: pre-Skylake Intel INVLPG, as ivb3320m.
            tlbi_local_va: 230,
            // No INVPCID: a whole-PCID flush is a flushing MOV CR3 (root_write + root_write_flush).
            tlbi_local_asid: 200,
            // No INVPCID: a global flush toggles CR4.PGE, ~750 cycles (EST, as ivb3320m).
            tlbi_local_all: 750,
            // LOCK ADD ~20.5 cycles on Sandy Bridge-E, the desktop part of this die (rygorous).
            full_barrier: 20,
            // MOV CR3: the X86_BASE pair (EST).
            root_write: 100,
            root_write_flush: 100,
            // SYSCALL/SYSRET and interrupt entry without PTI (v4.3 predates it): X86_BASE's EST.
            exception_entry: 100,
            exception_exit: 80,
            // x2APIC IPIs: estimates as skx8170 and hsw48 (no Sandy Bridge-EP figure).
            ipi_send: 150,
            ipi_deliver: 1000,
            ipi_handle: 300,
            // The mean cross-socket extra of a cache-line hand-off, below.
            ipi_cross_socket: 240,
            // Core-to-core CAS one-way medians on a 2 x Xeon E5-2690 (Sandy Bridge-EP, the same
            // die; nviennot/core-to-core-latency): 32.4 ns in a socket at 2.9 GHz, a ring at core
            // clock, kept in cycles (94); 81.9 ns more across one QPI link, and a second link for
            // the socket opposite in the ring (EST): (2 x 81.9 + 163.8) / 3 = 109 ns, x 2.2.
            cacheline_transfer: 94,
            cacheline_cross_socket: 240,
            // Linux software paths: estimates as ivb3320m (a Sandy Bridge-family core).
            syscall_body: 150,
            pipe_op: 400,
            switch_path: 950,
            fault_path: 1500,
            page_copy: 256,
            // L1D fill buffers: EST (X86_BASE).
            mlp: 10,
            // Intel: before Skylake one page walk at a time.
            walkers: 1,
            ..X86_BASE
        },
    }
}

/// A two-socket Cavium ThunderX (CN88xx): 2 x 48 cores at 2.0 GHz. Most figures
/// are estimates; notes: `docs/costs/thunderx.md`.
pub fn thunderx() -> Preset {
    Preset {
        name: "thunderx",
        description: "Cavium ThunderX CN88xx: 2 sockets x 48 cores @ 2.0 GHz, 16-bit ASIDs",
        arch: Arch::Arm64,
        freq_ghz: 2.0,
        cores_per_socket: 48,
        cores_per_ccx: 48,
        real_cores: 96,
        asid_bits: &[16, 8],
        numa: &[1],
        tlb: TlbGeometry { l1d_entries: 32, l2_entries: 1024, l2_ways: 4, pwc_entries: 64 },
        // EST: a ThunderX-era distribution kernel (no measurement names one).
        kernel: Kernel::Linux(4, 19),
        // CN88xx: 4 x DDR4-2133 channels per socket (Cavium product brief).
        mem_bw_gbs: 68.3,
        tlbi_range: false,
        invpcid: false,
        // arm64: `meltdown` is x86's (the arm64 policies' KPTI is their `kpti` switch).
        meltdown: false,
        estimates: &[Estimate {
            costs: "tlbi_bcast_issue, dvm_hop, dvm_process, dvm_process_asid",
            used_when: "broadcast_invalidations",
            cycles_each: broadcast_cycles,
            why: "estimates: no ThunderX TLBI or DVM latency was found",
        }],
        costs: Costs {
            walk_level: 40,
            // CCPI between the sockets.
            dvm_cross_socket: 1500,
            dvm_process: 100,
            // Not separated from the by-VA cost: no ThunderX figure.
            dvm_process_asid: 100,
            // Interconnect limits (docs/costs/thunderx.md, "Broadcasts in flight"). Each core is taken as its own requester (EST: the
            // ThunderX coherent interconnect is not documented).
            dvm_issuer_cores: 1,
            dsb: 30,
            full_barrier: 30,
            // Erratum 27456: every TTBR write is followed by IC IALLU; DSB NSH; ISB.
            root_write: 200,
            exception_exit: 80,
            ipi_deliver: 1500,
            ipi_handle: 400,
            ipi_cross_socket: 1000,
            cacheline_cross_socket: 600,
            syscall_body: 200,
            pipe_op: 500,
            fault_path: 2000,
            page_copy: 512,
            mlp: 2,
            walkers: 1,
            ..ARM64_BASE
        },
    }
}

/// Origin 003's machine: a Westmere file server, 2 sockets x 4 cores with
/// hyper-threading off (the origin first says "2 sockets x 2 cores x 2 threads",
/// then corrects it: "actually 4 cores, 1 thread each"). Notes:
/// `docs/costs/westmere.md`.
pub fn westmere() -> Preset {
    Preset {
        name: "westmere",
        description: "Intel Westmere (Xeon 5600 class) file server: 2 sockets x 4 cores @ 2.67 GHz (origin 003)",
        arch: Arch::X86_64,
        freq_ghz: 2.67,
        // Origin 003: "it's actually 4 cores, 1 thread each" (per socket: the 8 CPUs
        // first taken for 2 x 2 x 2; Xeon 5600 parts have 4 or 6 cores).
        cores_per_socket: 4,
        cores_per_ccx: 4,
        real_cores: 8,
        asid_bits: &[12],
        numa: &[1],
        // Nehalem/Westmere: 64-entry DTLB, 512-entry 4-way STLB.
        tlb: TlbGeometry { l1d_entries: 64, l2_entries: 512, l2_ways: 4, pwc_entries: 32 },
        // Origin 003 is FreeBSD (12-CURRENT era).
        kernel: Kernel::FreeBsd(12),
        // Intel ARK, Xeon X5650: "Max Memory Bandwidth 32 GB/s" (3 x DDR3-1333).
        mem_bw_gbs: 32.0,
        tlbi_range: false,
        // No INVPCID: it came with Haswell (PTI defers a user PCID's flush to the return to user).
        invpcid: false,
        // Westmere: Meltdown-affected (Intel's affected-processor list, CVE-2017-5754).
        meltdown: true,
        estimates: &[],
        costs: Costs {
            walk_level: 10,
            // INVLPG ~50 cycles (origin 003's own figure).
            tlbi_local_va: 50,
            // Call-function IPIs only (Linux); FreeBSD's TLB vectors enter their
            // handlers directly, and their request and acknowledgement are accounted
            // as shared-line accesses.
            ipi_handle: 300,
            // Core-to-core ~37 ns on a socket, ~74 ns across QPI (dual X5650).
            cacheline_transfer: 99,
            cacheline_cross_socket: 99,
            syscall_body: 300,
            pipe_op: 600,
            page_copy: 300,
            ..X86_BASE
        },
    }
}

/// AMD EPYC 7763 ("Milan", Zen 3): 64 cores at 2.45 GHz in eight CCDs of eight,
/// one socket by default, two with `--set sockets=2`; the first x86 preset with
/// `INVLPGB`/`TLBSYNC`. Every figure was fixed from hardware documentation and
/// microbenchmarks of the hardware before any policy that uses `INVLPGB` ran a
/// workload; nothing comes from a result reported for a mechanism it predicts.
/// Notes, with every source and every estimate marked: `docs/costs/milan.md`.
pub fn milan() -> Preset {
    Preset {
        name: "milan",
        description: "AMD EPYC 7763 (Zen 3): 64 cores @ 2.45 GHz in 8-core CCXs, sockets=1|2, INVLPGB",
        arch: Arch::X86_64,
        // Base clock (techgage launch table: "7763 | 64C (128T) | 2.45 GHz (3.5)");
        // fabric latencies measured in ns are converted at it.
        freq_ghz: 2.45,
        cores_per_socket: 64,
        // AnandTech Milan review: "eight chiplets of eight cores each ... all eight cores
        // in the chiplet are connected" (one CCX, one L3, per CCD).
        cores_per_ccx: 8,
        real_cores: 64,
        asid_bits: &[12],
        // NPS2/NPS4 exist, but a node boundary inside a socket costs no more than any
        // cross-CCD transfer (core-to-core measurements on a 2 x 7R13), so one node.
        numa: &[1],
        tlb: TlbGeometry {
            // chipsandcheese: "Zen 3 has a 64 entry L1 DTLB" (fully associative);
            // CPUID 0x80000006 of a 7763: "Last level dTLB entries: 4KB 2048"; ways
            // not published for Zen 3 (8 assumed); PDEs live in the L2 TLB (64 assumed).
            l1d_entries: 64,
            l2_entries: 2048,
            l2_ways: 8,
            pwc_entries: 64,
        },
        // INVLPGB flushing merged in v6.15.
        kernel: Kernel::Linux(6, 15),
        // EPYC 7763: 8 x DDR4-3200 channels (AMD product page).
        mem_bw_gbs: 204.8,
        tlbi_range: false,
        // INVPCID: AMD from Zen 2 (CPUID 7.EBX[10] on Zen 2 and later).
        invpcid: true,
        // AMD: not affected (Linux sets X86_BUG_CPU_MELTDOWN on no AMD CPU: cpu_vuln_whitelist's NO_MELTDOWN).
        meltdown: false,
        estimates: &[Estimate {
            costs: "switch_path",
            used_when: "context_switches",
            cycles_each: switch_cycles,
            why: "3,200 cycles: the Linux-typical 1.3 us of the arm64 presets at 2.45 GHz; no Zen 3 lat_ctx was found",
        }],
        costs: Costs {
            // AMD software optimization guide 19h (via LLVM's Znver3 model): 4-cycle
            // load-to-use; L2 13 cycles (Rome, same L2); L2-TLB hit and walk start: estimates.
            mem_access: 4,
            tlb_l2_hit: 7,
            walk_level: 13,
            walk_start: 5,
            // INVLPG / INVPCID single-context / all: no AMD timing published;
            // estimates inside the 96-260 cycles measured for INVLPG on Intel.
            tlbi_local_va: 150,
            tlbi_local_asid: 300,
            tlbi_local_all: 500,
            // INVPCID type 0: no AMD timing published; EST, as INVPCID single-context above (microcoded).
            invpcid_va: 300,
            // INVLPGB (estimates, floors from measurements): issue like an INVLPG that
            // does not wait; one way through the IO die at least one cross-CCD
            // transfer (108 ns median, core-to-core on a 7R13); +89 ns across sockets
            // (197 ns cross-socket median, same data); remote processing by hardware,
            // no interrupt: a TLB set lookup by VA, a tag scan for a whole PCID.
            tlbi_bcast_issue: 150,
            dvm_hop: 265,
            dvm_cross_socket: 218,
            dvm_process: 50,
            dvm_process_asid: 200,
            // INVLPGB's limits in the data fabric (docs/costs/milan.md, "Broadcasts in flight"): no
            // AMD figure for outstanding INVLPGBs or the fabric's serialisation was found. Each
            // core issues its own (EST); no limit on the INVLPGBs a core has outstanding or on
            // the fabric's tracker, since neither is published (0); 20 cycles of fabric time per
            // message (EST).
            dvm_issuer_cores: 1,
            dvm_issuer_outstanding: 0,
            dvm_node_outstanding: 0,
            dvm_node_process: 20,
            // TLBSYNC's own cost besides waiting: estimate.
            dsb: 50,
            // A LOCKed RMW with a store-buffer drain: estimate above LLVM's load + 3.
            full_barrier: 25,
            // MOV CR3 with NOFLUSH, and the extra of a flushing one: estimates.
            root_write: 100,
            root_write_flush: 150,
            // SYSCALL/SYSRET: 160 together, inside the ~200-cycle empty-syscall round
            // trip measured on Zen 2 (mode-switch-stat).
            exception_entry: 90,
            exception_exit: 70,
            // x2APIC IPIs: no public Zen 3 figure; delivery at least one cross-CCD trip
            // (265) plus interrupt entry (estimate); +89 ns across sockets.
            ipi_send: 150,
            ipi_deliver: 700,
            ipi_handle: 400,
            ipi_cross_socket: 218,
            // Core-to-core CAS one-way medians on a 2 x EPYC 7R13 (nviennot/core-to-core-latency):
            // 22.7 ns in a CCX, 108 ns across CCDs, 197 ns across sockets.
            cacheline_transfer: 56,
            cacheline_cross_ccx: 209,
            cacheline_cross_socket: 218,
            // No Zen 3 lmbench figures: the estimates the other Linux presets use; the
            // switch path is the "Linux-typical 1.3 us" estimate of emag/altra.
            switch_path: 3200,
            // AnandTech Zen 3 deep dive: "a total of 6 table walkers".
            walkers: 6,
            ..X86_BASE
        },
    }
}

/// LATR's machine (Kumar et al., ASPLOS 2018): "a 2-socket machine" of 16 cores,
/// modelled as two 8-core Haswell-EP Xeons (E5-2630 v3 class, 2.4 GHz; the part is
/// an estimate, the paper's setup section was not available) under Linux 4.10,
/// which never enables PCIDs. Fixed before any LATR workload ran, from hardware
/// documentation and microbenchmarks only. Notes: `docs/costs/haswell2s.md`.
pub fn haswell2s() -> Preset {
    Preset {
        name: "haswell2s",
        description: "LATR's machine: 2 sockets x 8 Haswell-EP cores @ 2.4 GHz (E5-2630 v3 class), Linux 4.10",
        arch: Arch::X86_64,
        freq_ghz: 2.4,
        cores_per_socket: 8,
        cores_per_ccx: 8,
        real_cores: 16,
        // CR3 bits 11:0 exist; Linux 4.10 never sets CR4.PCIDE (run the nopcid policies).
        asid_bits: &[12],
        numa: &[1],
        // InstLatx64 (2 x E5-2660 v3): "L1D 4K TLB: 64 entries, 4 way" (modelled fully
        // associative), "L2I+D 4K+2M TLB: 1024 entries, 8 way"; PDE cache: estimate.
        tlb: TlbGeometry { l1d_entries: 64, l2_entries: 1024, l2_ways: 8, pwc_entries: 32 },
        // LATR ran Linux 4.10.
        kernel: Kernel::Linux(4, 10),
        // Intel ARK, E5-2630 v3: "Max Memory Bandwidth 59 GB/s" (4 x DDR4-1866).
        mem_bw_gbs: 59.0,
        tlbi_range: false,
        // INVPCID: Intel from Haswell ("systems with INVPCID (Haswell and newer)", Dave Hansen, LKML 2017).
        invpcid: true,
        // Haswell-EP: Meltdown-affected (Intel's affected-processor list, CVE-2017-5754).
        meltdown: true,
        estimates: &[INTEL_SWITCH_FROM_SKYLAKE],
        costs: Costs {
            // InstLatx64 E5-2660 v3: L1D 4, L2 12 cycles; STLB hit 12 - 4 and an STLB
            // miss with cached upper levels ~20 cycles (mynavi RMMA, Haswell).
            mem_access: 4,
            tlb_l2_hit: 8,
            walk_level: 12,
            walk_start: 8,
            // INVLPG ~230 cycles (Ingo Molnar 2015, Dave Hansen 2014, pre-Skylake Intel);
            // a whole-mm flush in 4.10 is a flushing CR3 reload (96-251 cycles, Molnar);
            // INVPCID type 2: Molnar's global flush scaled by Lutomirski's INVPCID/CR4 ratio.
            tlbi_local_va: 230,
            tlbi_local_asid: 200,
            tlbi_local_all: 520,
            // INVPCID type 0: EST, no timing outside the predicted series found; microcoded and "_slow_"
            // (Hansen's PTI commit "x86/mm: Use INVPCID for __native_flush_tlb_single()"): ~1.7 x INVLPG.
            invpcid_va: 400,
            // LOCK ADD ~20.5 cycles (Sandy Bridge-E, rygorous atomic_ops_test).
            full_barrier: 20,
            // MOV CR3: the pair inside Molnar's 96-251 cycles for a flushing write.
            root_write: 100,
            root_write_flush: 100,
            // No bare-metal Haswell IPI latency found: estimates, chosen so that one
            // same-socket remote flush (1,804 cycles, 752 ns) stays under the ~775 ns an
            // extra remote single-page shootdown of baseline Linux costs on a bare-metal
            // Haswell (Nadav Amit, 2019).
            ipi_send: 200,
            ipi_deliver: 800,
            ipi_handle: 300,
            // One QPI crossing: the cross-socket extra of a cache-line hand-off.
            ipi_cross_socket: 190,
            // Core-to-core CAS one-way on a dual E5-2630 v4 (Broadwell-EP, the same uncore;
            // nviennot/core-to-core-latency): 39 ns in a socket, 117.8 ns across.
            cacheline_transfer: 94,
            cacheline_cross_socket: 190,
            // Linux 4.10 software paths: estimates as for the other Linux presets; the
            // switch path is skylake's (the project's only Linux figure), for a Haswell core.
            switch_path: 900,
            // Intel: "previous generations" before Skylake do one page walk at a time.
            walkers: 1,
            ..X86_BASE
        },
    }
}

/// A two-socket Intel Xeon Platinum 8170 (Skylake-SP): 26 cores and 52
/// hardware threads per socket at 2.1 GHz, 104 threads in all, each thread a
/// CPU of the model (which has no SMT). Fixed from hardware documentation and
/// microbenchmarks of the hardware before any workload ran on it; nothing comes
/// from a result reported for a mechanism it predicts. Notes, with every
/// source, every estimate and what modelling a thread as a core leaves out:
/// `docs/costs/skx8170.md`.
pub fn skx8170() -> Preset {
    Preset {
        name: "skx8170",
        description: "Intel Xeon Platinum 8170 (Skylake-SP): 2 sockets x 26 cores x 2 threads @ 2.1 GHz, 104 CPUs",
        arch: Arch::X86_64,
        // Intel: "Intel(R) Xeon(R) Platinum 8170 CPU @ 2.10GHz" (base); ns figures converted at it.
        freq_ghz: 2.1,
        // 26 cores x 2 threads per socket; the model has no SMT, so each thread is a CPU.
        cores_per_socket: 52,
        // One mesh and one non-inclusive L3 (35.75 MB) per socket; sub-NUMA clustering off (EST).
        cores_per_ccx: 52,
        real_cores: 104,
        // CR3 bits 11:0 (Intel SDM vol. 3A, 4.10.1).
        asid_bits: &[12],
        numa: &[1],
        tlb: TlbGeometry {
            // AIDA64 on a Skylake-SP core (InstLatx64, i9-7900X): "L1D 4K TLB: 64 entries, 4 way"
            // (modelled fully associative), "L2I+D 4K+2M TLB: 1536 entries, 12 way"; PDE cache: EST.
            l1d_entries: 64,
            l2_entries: 1536,
            l2_ways: 12,
            pwc_entries: 32,
        },
        // EST: a v5.x kernel of the machine's service years (no source pins one; workloads set theirs).
        kernel: Kernel::Linux(5, 10),
        // Xeon Platinum 8170: 6 x DDR4-2666 channels per socket (Intel ARK).
        mem_bw_gbs: 128.0,
        tlbi_range: false,
        // INVPCID: Intel from Haswell ("systems with INVPCID (Haswell and newer)", Dave Hansen, LKML 2017).
        invpcid: true,
        // Skylake-SP: Meltdown-affected (Intel's affected-processor list, CVE-2017-5754; no RDCL_NO).
        meltdown: true,
        estimates: &[INTEL_SWITCH_FROM_SKYLAKE],
        costs: Costs {
            // InstLatx64 Skylake-SP core (i9-7900X), Page_Random: 4 cycles to 32 KB, 14 in the 1 MB L2.
            mem_access: 4,
            // Same table, 4 KB stride: 14 at 256 KB (inside the DTLB's reach), 23 at 384 KB
            // (an STLB hit and an L2 hit), so an STLB hit adds 9.
            tlb_l2_hit: 9,
            // A paging-structure load hitting the L2: 14 (same table).
            walk_level: 14,
            // Fixed part of a walk with its upper levels cached: EST.
            walk_start: 10,
            // INVLPG ~230 cycles loop-measured (Molnar 2015, Hansen 2014, pre-Skylake Intel), as skylake.
            tlbi_local_va: 230,
            // INVPCID single-context: EST, as skylake (no figure).
            tlbi_local_asid: 400,
            // INVPCID all-contexts 376 ns on a Skylake core at 2.3 GHz (Lutomirski): 865 cycles.
            tlbi_local_all: 865,
            // INVPCID type 0: EST, no timing outside the predicted series found; microcoded and "_slow_"
            // (Hansen's PTI commit "x86/mm: Use INVPCID for __native_flush_tlb_single()"): ~1.7 x INVLPG.
            invpcid_va: 400,
            // LOCK ADD ~20.5 cycles (Sandy Bridge-E, rygorous atomic_ops_test); EST for Skylake-SP.
            full_barrier: 20,
            // MOV CR3: the pair inside Molnar's 96-251 cycles for a flushing write (EST).
            root_write: 100,
            root_write_flush: 100,
            // SYSCALL/SYSRET as skylake (80/60, EST). PTI's CR3 write each way is the run's
            // (`root_write`, added where PTI is on: by default here, a Meltdown-affected CPU).
            exception_entry: 80,
            exception_exit: 60,
            // x2APIC ICR write after the kernel's fence: EST (no Skylake-SP figure).
            ipi_send: 150,
            // Mesh trip (~100) plus interrupt acceptance and IDT vectoring: EST, no figure.
            ipi_deliver: 1000,
            // Linux's call-function dispatch: a few hundred instructions (EST).
            ipi_handle: 300,
            // The cross-socket extra of a cache-line hand-off (UPI), below.
            ipi_cross_socket: 184,
            // Core-to-core CAS one-way medians on a 2 x Xeon 8275CL (Cascade Lake, Skylake-SP's
            // mesh and UPI; nviennot/core-to-core-latency): 46.6 ns in a socket, 134.1 ns across.
            cacheline_transfer: 98,
            cacheline_cross_socket: 184,
            // Linux software paths: estimates as for the other Linux presets; the switch path
            // is skylake's calibrated 847 (the project's only Linux figure, a Skylake core).
            syscall_body: 150,
            pipe_op: 400,
            switch_path: 850,
            fault_path: 1500,
            page_copy: 256,
            // L1D fill buffers: EST (as skylake).
            mlp: 10,
            // Intel optimization manual (Skylake): "two page walks in parallel".
            walkers: 2,
            ..X86_BASE
        },
    }
}

/// The Ice Lake-SP figures shared by [`icx8358`] and [`icx8336c`], at `freq_ghz`:
/// the core's figures are in cycles and the same for both parts; the
/// uncore's (mesh, UPI), measured in ns, are converted at the part's clock.
/// Every figure's source or reason: `docs/costs/icx8358.md`.
fn icelake_sp_costs(freq_ghz: f64) -> Costs {
    let cycles = |ns: f64| (ns * freq_ghz).round() as u64;
    Costs {
        // Sunny Cove's 48 KB L1D: 5-cycle load-to-use (EST, not confirmed in a source read).
        mem_access: 5,
        // STLB hit, walk load (the 1.25 MB L2) and walk start: skx8170's Skylake-SP figures (EST).
        tlb_l2_hit: 9,
        walk_level: 14,
        walk_start: 10,
        // INVLPG / INVPCID single / all: no Ice Lake figures; skx8170's, a Skylake-family TLB (EST).
        tlbi_local_va: 230,
        tlbi_local_asid: 400,
        tlbi_local_all: 865,
        // INVPCID type 0: EST, no timing outside the predicted series found; microcoded and "_slow_"
        // (Hansen's PTI commit "x86/mm: Use INVPCID for __native_flush_tlb_single()"): ~1.7 x INVLPG.
        invpcid_va: 400,
        // LOCK ADD: Sandy Bridge-E's ~20.5 cycles (rygorous atomic_ops_test); EST for Sunny Cove.
        full_barrier: 20,
        // MOV CR3: the pair inside Molnar's 96-251 cycles for a flushing write (EST).
        root_write: 100,
        root_write_flush: 100,
        // SYSCALL/SYSRET without PTI (Ice Lake-SP is listed not affected by Meltdown): skylake's EST.
        exception_entry: 80,
        exception_exit: 60,
        // x2APIC ICR write, delivery (mesh trip, acceptance, IDT vectoring) and Linux's
        // call-function dispatch: estimates, as skx8170 (no Ice Lake-SP figure).
        ipi_send: 150,
        ipi_deliver: 1000,
        ipi_handle: 300,
        // Core-to-core CAS one-way medians on a 2 x Xeon 8375C (Ice Lake-SP;
        // nviennot/core-to-core-latency): 51.3 ns in a socket, 107.8 ns across; an IPI
        // crossing UPI pays the line's cross-socket extra.
        ipi_cross_socket: cycles(107.8 - 51.3),
        cacheline_transfer: cycles(51.3),
        cacheline_cross_socket: cycles(107.8 - 51.3),
        // Linux software paths: estimates as for skx8170 (a Skylake-family core).
        syscall_body: 150,
        pipe_op: 400,
        switch_path: 850,
        fault_path: 1500,
        page_copy: 256,
        // L1D fill buffers: EST (as skx8170).
        mlp: 10,
        // Page walkers: Skylake's two kept (EST: no Sunny Cove figure found).
        walkers: 2,
        ..X86_BASE
    }
}

/// The Ice Lake-SP TLB: CPUID leaf 0x18 of an Ice Lake-SP (InstLatx64, Xeon Gold
/// 6330): a 64-entry 4-way load DTLB for 4 KB pages (modelled fully
/// associative) and two 1024-entry 8-way second-level arrays that both hold
/// 4 KB pages (one shares them with 2 MB, the other with 1 GB), modelled as one
/// 2048-entry 16-way STLB. PDE cache: EST.
const ICELAKE_SP_TLB: TlbGeometry = TlbGeometry { l1d_entries: 64, l2_entries: 2048, l2_ways: 16, pwc_entries: 32 };

/// A two-socket Intel Xeon Platinum 8358 (Ice Lake-SP): 32 cores and 64
/// hardware threads per socket at 2.6 GHz, 128 threads in all, each thread a
/// CPU. Fixed before any workload ran on it, from hardware documentation and
/// microbenchmarks only. Notes: `docs/costs/icx8358.md`.
pub fn icx8358() -> Preset {
    Preset {
        name: "icx8358",
        description: "Intel Xeon Platinum 8358 (Ice Lake-SP): 2 sockets x 32 cores x 2 threads @ 2.6 GHz, 128 CPUs",
        arch: Arch::X86_64,
        // Intel: "Intel(R) Xeon(R) Platinum 8358 CPU @ 2.60GHz" (base).
        freq_ghz: 2.6,
        // 32 cores x 2 threads per socket, each thread a CPU (no SMT in the model).
        cores_per_socket: 64,
        // One mesh and one L3 (48 MB) per socket; sub-NUMA clustering off (EST).
        cores_per_ccx: 64,
        real_cores: 128,
        asid_bits: &[12],
        numa: &[1],
        tlb: ICELAKE_SP_TLB,
        // EST: a v6.x kernel of the machine's service years (no source pins one).
        kernel: Kernel::Linux(6, 1),
        // Ice Lake-SP: 8 x DDR4-3200 channels per socket (Intel ARK, Xeon Platinum 8358).
        mem_bw_gbs: 204.8,
        tlbi_range: false,
        // INVPCID: Intel from Haswell ("systems with INVPCID (Haswell and newer)", Dave Hansen, LKML 2017).
        invpcid: true,
        // Ice Lake-SP: not Meltdown-affected (it enumerates RDCL_NO; Intel's affected-processor list).
        meltdown: false,
        estimates: &[INTEL_SWITCH_FROM_SKYLAKE],
        costs: icelake_sp_costs(2.6),
    }
}

/// A two-socket Intel Xeon Platinum 8336C (Ice Lake-SP, a custom part): 16
/// cores and 32 hardware threads per socket at 2.3 GHz, 64 threads in all. The
/// Ice Lake-SP figures of [`icx8358`] at this clock. Notes: `docs/costs/icx8336c.md`.
pub fn icx8336c() -> Preset {
    Preset {
        name: "icx8336c",
        description: "Intel Xeon Platinum 8336C (Ice Lake-SP): 2 sockets x 16 cores x 2 threads @ 2.3 GHz, 64 CPUs",
        arch: Arch::X86_64,
        // lscpu: "Intel(R) Xeon(R) Platinum 8336C CPU @ 2.30GHz", model 106 (Ice Lake-SP).
        freq_ghz: 2.3,
        // lscpu: "Core(s) per socket: 16", "Socket(s): 2"; x 2 threads, each a CPU.
        cores_per_socket: 32,
        cores_per_ccx: 32,
        real_cores: 64,
        asid_bits: &[12],
        numa: &[1],
        tlb: ICELAKE_SP_TLB,
        // EST: as icx8358.
        kernel: Kernel::Linux(6, 1),
        // EST: the Ice Lake-SP platform's 8 x DDR4-3200 (a custom part; no datasheet found).
        mem_bw_gbs: 204.8,
        tlbi_range: false,
        // INVPCID: Intel from Haswell ("systems with INVPCID (Haswell and newer)", Dave Hansen, LKML 2017).
        invpcid: true,
        // Ice Lake-SP: not Meltdown-affected (it enumerates RDCL_NO; Intel's affected-processor list).
        meltdown: false,
        estimates: &[INTEL_SWITCH_FROM_SKYLAKE],
        costs: icelake_sp_costs(2.3),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intel_server_presets_count_hardware_threads_as_cpus() {
        let got: Vec<_> =
            [skx8170(), icx8358(), icx8336c()].iter().map(|p| (p.name, p.cores_per_socket, p.real_cores)).collect();
        assert_eq!(got, [("skx8170", 52, 104), ("icx8358", 64, 128), ("icx8336c", 32, 64)]);
    }

    #[test]
    fn second_round_servers_count_threads_as_cpus_and_fill_their_sockets() {
        let got: Vec<_> = [hsw48(), skl56(), numa4x48()]
            .iter()
            .map(|p| (p.name, p.cores_per_socket, p.real_cores, p.real_cores / p.cores_per_socket, p.numa[0]))
            .collect();
        assert_eq!(got, [("hsw48", 24, 48, 2, 1), ("skl56", 28, 56, 2, 1), ("numa4x48", 12, 48, 4, 1)]);
        for p in [hsw48(), skl56(), numa4x48()] {
            assert!(!p.has_broadcast_tlbi(), "{}: Intel before INVLPGB reaches other CPUs by IPI", p.name);
            assert!(p.costs.cacheline_cross_socket > p.costs.cacheline_transfer, "{}", p.name);
        }
    }

    #[test]
    fn invpcid_is_costed_exactly_where_the_cpus_have_it() {
        let with: Vec<&str> = all().iter().filter(|p| p.invpcid).map(|p| p.name).collect();
        assert_eq!(with, ["skylake", "milan", "haswell2s", "skx8170", "icx8358", "icx8336c", "hsw48", "skl56"]);
        for p in all() {
            assert_eq!(p.invpcid, p.costs.invpcid_va > 0, "{}", p.name);
            assert!(!p.invpcid || p.arch == Arch::X86_64, "{}", p.name);
        }
    }

    #[test]
    fn numa4x48_has_no_invpcid_so_a_pcid_flush_is_a_cr3_write() {
        let p = numa4x48();
        assert_eq!(p.costs.tlbi_local_asid, p.costs.root_write + p.costs.root_write_flush);
        assert_eq!(p.kernel, Kernel::Linux(4, 3));
    }

    #[test]
    fn ice_lake_sp_converts_its_mesh_and_upi_latencies_at_each_parts_clock() {
        let (a, b) = (icx8358().costs, icx8336c().costs);
        assert_eq!((a.cacheline_transfer, a.cacheline_cross_socket, a.ipi_cross_socket), (133, 147, 147));
        assert_eq!((b.cacheline_transfer, b.cacheline_cross_socket, b.ipi_cross_socket), (118, 130, 130));
        // The core's figures are in cycles and the same for both parts.
        assert_eq!((a.mem_access, a.tlbi_local_va, a.walkers), (b.mem_access, b.tlbi_local_va, b.walkers));
    }

    #[test]
    fn the_history_presets_follow_graviton4_in_all_once_each() {
        let names: Vec<&str> = all().iter().map(|p| p.name).collect();
        let g = names.iter().position(|n| *n == "graviton4").expect("graviton4 is a preset");
        assert_eq!(
            &names[g + 1..],
            ["skx8170", "icx8358", "icx8336c", "kunpeng920", "ivb3320m", "hsw48", "skl56", "numa4x48"]
        );
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "a preset name appears twice: {names:?}");
    }

    #[test]
    fn kunpeng920_is_two_sockets_of_two_32_core_dies_without_range_tlbi() {
        let p = kunpeng920();
        assert_eq!((p.arch, p.cores_per_socket, p.cores_per_ccx, p.real_cores), (Arch::Arm64, 64, 32, 128));
        assert!(p.costs.cacheline_cross_ccx > 0 && !p.tlbi_range && p.has_broadcast_tlbi());
        assert_eq!(p.asid_bits[0], 16);
    }

    #[test]
    fn ivb3320m_is_four_threads_on_one_die_with_ipis_only() {
        let p = ivb3320m();
        assert_eq!((p.arch, p.cores_per_socket, p.cores_per_ccx, p.real_cores), (Arch::X86_64, 4, 4, 4));
        assert!(!p.has_broadcast_tlbi());
        // No INVPCID: a whole-PCID flush is a flushing CR3 write.
        assert_eq!(p.costs.tlbi_local_asid, p.costs.root_write + p.costs.root_write_flush);
    }
}
