//! The hardware interface: exactly what a kernel's arch layer can ask of a CPU.
//!
//! Every method acts on the *calling* CPU ([`Hw::cpu`]); the simulator gives each
//! CPU its own implementation, a kernel would implement it with instructions.
//! Costs and timing are the implementation's business: a policy only says what
//! it does, never how long it takes.

use crate::cpumask::CpuMask;
use crate::types::{Asid, CpuId, MmId, VirtAddr};

/// What a TLB invalidation removes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tlbi {
    /// One page of one ASID, non-global entries only (arm64 `TLBI VAE1`, x86 `INVLPG`
    /// in the current PCID or `INVPCID` type 0).
    Va {
        /// The tag whose entry goes.
        asid: Asid,
        /// The page.
        va: VirtAddr,
    },
    /// One page in every ASID, global entries included (arm64 `TLBI VAAE1`).
    VaAllAsids {
        /// The page.
        va: VirtAddr,
    },
    /// Every non-global entry of one ASID (arm64 `TLBI ASIDE1`, x86 `INVPCID` type 1).
    Asid(Asid),
    /// Every entry, global ones included (arm64 `TLBI VMALLE1`, x86 `INVPCID` type 2).
    All,
    /// `pages` consecutive pages from `va` in one instruction: non-global entries of
    /// `asid` (x86 `INVLPGB` with a PCID and a count, arm64 `TLBI RVAE1`), or with
    /// `asid` `None` every entry of every tag, global ones included (x86 `INVLPGB`
    /// with `INCLUDE_GLOBAL`, for kernel ranges). The page-walk caches of the tag go
    /// too, as Linux issues it (never with `FINAL_ONLY`).
    Range {
        /// The tag whose entries go, or `None` for every tag and global entries.
        asid: Option<Asid>,
        /// The first page.
        va: VirtAddr,
        /// How many pages (at least one).
        pages: u32,
    },
    /// Every non-global entry of every tag (x86 `INVLPGB` with no match flags,
    /// Linux `invlpgb_flush_all_nonglobals`; `INVPCID` type 3).
    AllNonGlobal,
}

/// Whether an invalidation stays on this CPU or reaches every CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// This CPU only (arm64 `TLBI ...` without `IS`).
    Local,
    /// Every CPU in the inner-shareable domain (arm64 `TLBI ...IS`): it travels the
    /// interconnect and is complete only after a following `DSB ISH`.
    Broadcast,
}

/// The shareability domain of a barrier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Domain {
    /// This CPU only (`NSH`).
    NonShareable,
    /// Every CPU (`ISH`).
    InnerShareable,
}

/// A barrier instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Barrier {
    /// `DSB <domain>`: waits for earlier memory accesses and invalidations in the
    /// domain to complete (the sync phase of a broadcast invalidation).
    Dsb(Domain),
    /// `DSB <domain>ST`: orders earlier stores (page-table writes) before later
    /// invalidations.
    DsbSt(Domain),
    /// `ISB`: the instruction stream sees the new context (after a root write).
    Isb,
    /// A full memory barrier between ordinary accesses (Linux `smp_mb()`).
    Full,
    /// x86 `TLBSYNC`: waits until every `INVLPGB` this CPU issued is complete on
    /// every CPU (what `DSB ISH` is to arm64's broadcast TLBIs). It does not wait
    /// for other CPUs' `INVLPGB`s, so a policy issues both on one CPU.
    TlbSync,
}

/// What the translation root points at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Root {
    /// The page tables of an address space.
    Mm(MmId),
    /// The reserved empty table (arm64 `cpu_set_reserved_ttbr0`): no user
    /// translation can be used or speculatively filled.
    Reserved,
}

/// How a CPU touches a shared variable's cache line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// A load (a spin loop's poll included).
    Read,
    /// A load in a walk: its address does not depend on the value of any
    /// load since this CPU's last access of another kind but the walk's
    /// latest [`Access::ReadAheadIndex`] (an array of per-CPU lines read in a
    /// loop whose index is a counter or a bit of a mask read before the walk),
    /// so an out-of-order core has it in flight before the loads ahead of it
    /// return, as many at once as its fill buffers allow. Anything else the
    /// CPU does (a store, an atomic, a barrier, a TLB operation) ends the
    /// walk; a walk's first load starts at the CPU's clock. A checker treats
    /// it as [`Access::Read`]; so does a simulator that times loads one at a
    /// time.
    ReadAhead,
    /// A load in a walk, as [`Access::ReadAhead`], whose value the addresses of
    /// the walk's next loads come from (a ring's head, then its slots): those
    /// wait for it to return, and it waits for none before it.
    ReadAheadIndex,
    /// A plain store.
    Write,
    /// An atomic read-modify-write (`LOCK XADD`, `LDADD`, compare-and-exchange).
    Rmw,
    /// An atomic read-modify-write whose order among the CPUs doing it at
    /// the same time is the hardware's (whichever request reaches the line
    /// first) and changes nothing the caller goes on to do: a lock-free push
    /// onto a list (`llist_add`'s compare-and-exchange on the head, retried
    /// until it lands; which request is first in the list is never looked
    /// at), the list's owner taking it whole (`llist_del_all`'s exchange,
    /// where the simulator decides apart which requests the take finds), or
    /// an add whose result nobody reads. A simulator places it at its
    /// own time among the line's moves, where an [`Access::Rmw`] waits for the
    /// latest write to the variable that it ran before, wherever in time that
    /// write is (an atomic that takes a lock must follow the release it reads).
    RmwAnyOrder,
}

/// The three phases of a shootdown (issue, dispatch, sync; frames are freed only after sync).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Deciding what must be invalidated and where (publishing the request).
    Issue,
    /// Sending IPIs or broadcasts and invalidating locally.
    Dispatch,
    /// Waiting for every target to acknowledge; when it ends, TLBs are coherent.
    Sync,
    /// The shootdown is complete.
    Done,
}

/// A flush whose completion a policy took over with [`Hw::defer_flush`]: the
/// kernel holds what the flush's page-table change freed until the policy hands
/// the ticket back with [`Hw::flush_complete`]. Tickets are small numbers from 1,
/// reused once completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlushTicket(pub u32);

/// Which flushes a lazy shootdown asks the kernel to let complete late
/// ([`Hw::defer_flush`]). The kernel sets an mm's `munmap_inprogress` (a plain
/// store, the last writer wins) at the start of the `munmap` system call and of
/// `madvise(MADV_DONTNEED)`'s zap, and clears it at their end; the rules differ
/// in who may read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Defer {
    /// Every flush of an mm whose flag is set, whoever calls it: LATR's
    /// artifact, whose `native_flush_tlb_others` tests only
    /// `mm->munmap_inprogress` (arch/x86/mm/tlb.c:688-702 at efad1a12). A
    /// copy-on-write fault or a migration during another thread's `madvise` or
    /// `munmap` then goes lazy too, and frees its old page at once.
    WhileMmFlagged,
    /// Only the flushes of the `munmap` or `madvise(MADV_DONTNEED)` call this
    /// CPU runs, the call that set the flag and whose memory the kernel holds
    /// back, whatever the flag says by the time it flushes: safer by design.
    OwnUnmap,
}

/// Events a policy reports so that the machine can count them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Note {
    /// The ASID space was exhausted and a new epoch / generation began.
    AsidRollover,
}

// ANCHOR: hw_trait
/// The operations an arch layer has on the CPU it runs on.
pub trait Hw {
    /// Returns the CPU this code runs on.
    fn cpu(&self) -> CpuId;

    /// Returns the number of CPUs in the machine.
    fn ncpus(&self) -> usize;

    /// Writes the translation root (arm64 `TTBR0_EL1`, x86 `CR3`) with `asid`.
    /// With `noflush` false, non-global entries of `asid` are dropped as the x86 CR3
    /// write without `NOFLUSH` does; arm64 always writes with `noflush` true.
    fn write_root(&self, root: Root, asid: Asid, noflush: bool);

    /// Invalidates TLB entries on this CPU or, with [`Scope::Broadcast`], on all.
    fn tlbi(&self, op: Tlbi, scope: Scope);

    /// Executes a barrier.
    fn barrier(&self, b: Barrier);

    /// Sends an IPI to every CPU in `targets` except the caller, runs `handler` on
    /// each of them (inside the handler, [`Hw::cpu`] is that CPU and every operation
    /// acts on it), and returns once every handler has returned: Linux
    /// `smp_call_function_many(.., wait = true)` and `on_each_cpu_mask`.
    ///
    /// The caller's own CPU is never interrupted: a policy that also needs the
    /// work done locally does it itself, as the kernels do.
    fn send_ipi<F: Fn(&Self)>(&self, targets: &CpuMask, handler: F);

    /// Sends an IPI to every CPU in `targets` except the caller that runs `handler`
    /// there, and returns without waiting (FreeBSD `ipi_selected`). The policy
    /// learns of completion through shared memory it polls, accounting every
    /// poll with [`Hw::shared`].
    ///
    /// A handler may run after the caller has returned (the checker lets the
    /// initiator leave as soon as its protocol stops waiting), so it must own
    /// what it captures (a `move` closure) and borrow only what outlives every
    /// shootdown, the policy's shared state: as a kernel's handler reads the
    /// request from global or per-CPU memory, never from the initiator's stack.
    fn send_ipi_async<F: Fn(&Self)>(&self, targets: &CpuMask, handler: F);

    /// [`Hw::send_ipi_async`] for Linux's call-function IPIs whose handler
    /// accounts its own dispatch (`smp_call_function_many_cond` after the
    /// caller queued a csd on each target's `call_single_queue`): a target
    /// whose queue an earlier IPI's handler has not yet taken (`llist_add`
    /// returned false) gets no IPI, and that handler runs this request after
    /// its own; the rest are sent as the kernel's `arch_send_call_function_ipi_mask`
    /// sends them. The handler runs on every target either way, under the same
    /// contract as `send_ipi_async`'s. By default exactly `send_ipi_async`, an
    /// IPI per target: the extra IPIs' interleavings include the coalesced ones'.
    fn send_call_function_ipi_async<F: Fn(&Self)>(&self, targets: &CpuMask, handler: F) {
        self.send_ipi_async(targets, handler)
    }

    /// Sends an IPI to every CPU but the caller with one interrupt-controller
    /// write (the x86 APIC's "all excluding self" destination shorthand, FreeBSD
    /// `ipi_all_but_self`), runs `handler` on each of them and returns without
    /// waiting, as [`Hw::send_ipi_async`] does (and under the same contract on
    /// what `handler` may borrow). The targets are the same as
    /// `send_ipi_async` to every CPU; what differs is the cost: one write instead of
    /// one per target, so every target is interrupted at about the same time.
    fn send_ipi_all_but_self_async<F: Fn(&Self)>(&self, handler: F);

    /// Accounts one access of kind `access` by this CPU to the cache line holding
    /// the shared variable at `addr` (a policy passes its atomic's address). A real
    /// kernel implements this as nothing: the access itself is the atomic
    /// operation next to the call. The simulator charges cache-line transfers,
    /// serialised per line, so contention on a shared counter costs what it costs.
    ///
    /// Account before testing the value: a spin loop is `loop { hw.shared(a,
    /// Read); if done(a) { break } }`, so a poll that succeeds at once still pays
    /// for fetching the line, and waits until the line's last writer is done.
    ///
    /// Pass only the address of state that outlives the call (the policy's own,
    /// in types aligned to a line where the kernel aligns its structures to
    /// one), never a local's: the simulator names
    /// a line by its address, so a temporary would be one line for every CPU
    /// and move with the build (debug builds of the simulator refuse one).
    fn shared(&self, addr: usize, access: Access);

    /// Announces that after its next IPI dispatch this CPU spins reading the
    /// shared variable at `addr` until its targets have acknowledged (FreeBSD's
    /// `while (smp_tlb_wait < ncpu) ia32_pause();`). A spinning CPU asks for the
    /// line again as soon as a target's write takes it away, so every such write
    /// is followed by one more transfer of the line back to the spinner before the
    /// next writer can have it. A real kernel implements this as nothing; the
    /// polls themselves are still accounted with [`Hw::shared`].
    fn spin_on(&self, addr: usize);

    /// Marks the start of a shootdown phase on this CPU, for the machine's
    /// latency accounting and the checker's traces.
    fn phase(&self, phase: Phase);

    /// Reports an event for the machine's counters.
    fn note(&self, note: Note);

    /// Returns the kernel's `jiffies` at `HZ` = 1000: milliseconds since boot, as
    /// this CPU reads it. Only heuristics may depend on it (Linux trims
    /// `mm_cpumask` once a second, samples tasks for global ASIDs); the checker
    /// advances it by a second at every operation a CPU starts, so that every
    /// deadline a policy sets has passed by its next operation.
    fn jiffies(&self) -> u64;

    /// Runs `f` with interrupts off on this CPU (`local_irq_save`): no IPI handler
    /// runs here until it returns. An IPI handler and a context switch run so
    /// already; a policy uses this where the kernel disables interrupts itself
    /// (Linux runs the initiator's own `flush_tlb_func` so).
    fn irqs_off<R>(&self, f: impl FnOnce() -> R) -> R;

    /// Disables interrupts on this CPU until the matching
    /// [`Hw::irq_enable`] (`local_irq_disable`, unpaired in scope): for
    /// compiled kernel code, whose disable and enable are two calls. Nests as
    /// [`Hw::irqs_off`] does. The default does nothing, right for a machine
    /// that never interrupts a running CPU.
    fn irq_disable(&self) {}

    /// Ends the matching [`Hw::irq_disable`] (`local_irq_enable`).
    fn irq_enable(&self) {}

    /// Asks to take over the completion of the flush of `mm` this CPU runs now:
    /// the flush call may then return before every CPU has invalidated. Returns
    /// a ticket when the kernel allows it under `rule` ([`Defer`]), `None`
    /// otherwise, for a kernel range or a batch that names no mm, and on a
    /// second call in one flush. A policy that flushes synchronously never
    /// calls it.
    ///
    /// What the ticket holds depends on who flushes (LATR's kernel, the
    /// authors' artifact at `sslab-gatech/latr` efad1a12):
    /// - the `munmap` or `madvise(MADV_DONTNEED)` that set `mm`'s
    ///   `munmap_inprogress` (its own `mmu_gather`): the kernel treats the change
    ///   as flushed (discharges its obligation, frees its frames and page-table
    ///   pages, hands its virtual range out again) only when the policy calls
    ///   [`Hw::flush_complete`] with the ticket, from any CPU;
    /// - any other caller of a flush of `mm` while the flag is set (a
    ///   copy-on-write fault's `ptep_clear_flush`, page migration, KSM; only
    ///   under [`Defer::WhileMmFlagged`]): it does not know its flush was
    ///   deferred, treats it as done when the call returns and frees its old
    ///   page then. The ticket holds nothing, and its later completion is
    ///   harmless (it must still come, once).
    fn defer_flush(&self, mm: MmId, rule: Defer) -> Option<FlushTicket>;

    /// Reports that the flush of `ticket` ([`Hw::defer_flush`]) is complete on
    /// every CPU: from here on no CPU may use or hold what it removed.
    fn flush_complete(&self, ticket: FlushTicket);
}
// ANCHOR_END: hw_trait
