//! The hardware: per-CPU TLBs and translation registers, the interconnect that
//! carries broadcast invalidations, and [`CpuHw`], the implementation of the
//! policies' hardware interface for one CPU.
//!
//! # Timing of a policy call
//! A policy call runs to completion at one point of the event order (policies
//! are functionally atomic in the simulator; the checker explores finer
//! interleavings). Its *cost* accumulates in [`CpuHw`]'s clock: each operation
//! adds its cycles, and a `DSB ISH` waits until every broadcast invalidation this
//! CPU issued has been acknowledged.
//!
//! # The interconnect
//! A broadcast TLBI is one DVM message to every CPU. Before it goes out it
//! needs a free slot of its requester and a free entry of the DVM nodes'
//! tracker, and the nodes send one message at a time ([`crate::interconnect`]):
//! a CPU whose requester has too many broadcasts outstanding waits in its
//! `TLBI`, and a message waits at the nodes behind those in flight. With
//! several sockets, the issuer's node collects every other node's completion.
//! Each CPU processes incoming
//! messages one at a time (each socket's queue: [`crate::stalls`]), and removes
//! what a message names once it has processed it ([`crate::pending`]), so a message
//! waits behind those of other broadcasters: latency grows with the number of
//! CPUs broadcasting at the same time. A by-VA message costs a receiver
//! `dvm_process`, a whole-ASID or whole-TLB one `dvm_process_asid`, and a
//! receiver that is running something loses that time (`stolen`), as a
//! ThunderX2 running Himeno lost 29% of its speed to one other core's
//! `mprotect` loop (origin 001's thread). A message to another socket pays
//! `dvm_cross_socket` each way. The issuing CPU's `DSB ISH` completes when the
//! last acknowledgement is back and every node's completion is collected: after
//! every receiver has processed the message (debug builds check it).
//!
//! Three shortcuts keep a message's host cost independent of the CPU count; none
//! changes a result. The CPUs of one socket receive every message at the same
//! time, so their queues are always equal and one queue per socket stands for
//! them (and the sockets whose queues are in step share one, [`crate::stalls`]). A message is applied only to the TLBs that may hold what it removes
//! ([`crate::holders`]); that is why every TLB fill goes through [`Machine::fill`]
//! or [`Machine::pwc_fill`]. And a running receiver's stall is charged when its
//! `stolen` time is taken ([`crate::stalls`]); that is why the engine goes
//! through [`Machine::take_stolen`] and [`Machine::set_busy_until`].
//!
//! # IPIs
//! [`Hw::send_ipi`] and [`Hw::send_ipi_async`] cost the sender one
//! interrupt-controller write per target; [`Hw::send_ipi_all_but_self_async`] one
//! write for all of them (the APIC's "all excluding self" shorthand), so every
//! target is interrupted at about the same time. Each target takes the interrupt
//! after the delivery latency (more across sockets; each IPI's drawn from the
//! seed around that mean, [`crate::noise`]) and once its previous handler
//! is done, pays exception entry, the handler's own operations and exception exit;
//! a call-function IPI ([`Hw::send_ipi`]) also pays the generic dispatch
//! (`ipi_handle`: finding the request, calling the function, clearing its flag),
//! which a vectored one does not: its stub calls the handler directly, and the
//! handler accounts for reading its request and acknowledging it through
//! [`Hw::shared`] (FreeBSD's `IDTVEC(invlrng)` calls `invlrng_handler`). The
//! sender of a call-function IPI sees each completion flag one cache-line transfer
//! after the handler ends. Handlers run in the order their CPUs are interrupted. A
//! target that was running something loses that time (`stolen`, added to its
//! current operation by the engine); an idle one is merely busy until the handler
//! ends (`irq_until`).
//!
//! Linux's call-function IPIs ([`Hw::send_ipi`], [`Hw::send_call_function_ipi_async`])
//! go through the target's `call_single_queue` (kernel/smp.c,
//! `smp_call_function_many_cond` and `generic_exec_single`, v4.10 to v6.x): the
//! initiator's `llist_add` returns true only on an empty queue, and only then is
//! the target sent an IPI; the handler's `flush_smp_call_function_queue` takes
//! the whole queue (`llist_del_all`) and runs every request in it. So a request
//! queued on a CPU before the handler of an IPI already sent there has taken its
//! queue gets no IPI: that handler runs it after its other functions, with no
//! entry or exit of its own (`ipis_coalesced` counts them). The queue's head is
//! a line ([`KLine::CallQueue`]): for [`Hw::send_ipi`] the sender pushes onto
//! each target's in turn before any IPI goes ([`Machine::llist_add`]: the
//! `READ_ONCE` of the head and the exchange, each a move where another CPU
//! wrote the line last), and each handler's `llist_del_all` is an exchange on
//! its own, so initiators flushing the same CPUs queue on those lines as they
//! do in the kernel (a policy that sends with
//! [`Hw::send_call_function_ipi_async`] accounts its pushes and takes itself,
//! through [`Hw::shared`]). The IPIs that are sent
//! go as `native_send_call_func_ipi` sends them: with one write when they are for
//! every other CPU (the all-excluding-self shorthand, [`Costs::ipi_shorthand`]),
//! otherwise one write per x2APIC cluster of targets ([`Costs::ipi_cluster`];
//! `__x2apic_send_IPI_mask`), or one per target where the machine has no
//! clusters. Vectored IPIs (FreeBSD's) are written once per target as before.
//!
//! # Coherence
//! A policy's shared variables live in cache lines (by address, 64 bytes), beside
//! the kernel's own contended lines: [`crate::coherence`] holds the model (reads
//! share and overlap, writes queue one move at a time, an access follows the
//! latest write to its variable, a spinning initiator takes its line back).
//!
//! # The sync phase
//! In a shootdown's sync phase (between [`Phase::Sync`] and [`Phase::Done`]) the
//! initiating CPU only waits: it polls one acknowledgement after another in a loop
//! whose exit the core predicts, and the address of each poll does not depend on
//! the value of the one before. So once its first poll has returned, the core has
//! the loads of the following ones in flight together, up to `mlp` of them (the
//! fill buffers), instead of one after another.
//!
//! # Walks
//! Outside the sync phase, a run of [`Access::ReadAhead`] loads (a policy's
//! walk over per-CPU lines whose addresses come from a counter or a mask read
//! before it) overlaps the same way from its first load on: the core issues
//! each before the ones ahead of it return, a load waiting only for a fill
//! buffer, up to `mlp` in flight. A walk load whose value the next ones'
//! addresses come from ([`Access::ReadAheadIndex`]: LATR's sweep reads each
//! CPU's ring head, then the ring's slots from it) holds those back until it
//! returns, but no load of the walk before it. The run ends
//! at anything else that takes this CPU's time (a store, an atomic, a barrier,
//! a TLB operation: an x86 locked instruction or `INVLPG` lets no later load
//! pass it, nor does a `DSB`), and the next walk load starts a new one.
//!
//! Time an IPI handler spends in TLB operations counts as *invalidating*, time in
//! shared-line accesses as *synchronising*.
//!
//! # When a TLB loses what an invalidation removes
//! A local invalidation (`TLBI` without `IS`, `INVLPG`, `INVPCID`, a CR3 write)
//! is applied when issued. A broadcast one (`TLBI ...IS`, `INVLPGB`) is applied
//! on each CPU when its DVM message has been processed there, or at the
//! issuer's `DSB ISH` / `TLBSYNC` if that comes first in the order of events
//! ([`crate::pending`]); until then the CPU may still hit on, and refill, what
//! it removes. That is why every TLB operation of the engine comes after a
//! [`Machine::catch_up`] at its time, and every fill carries its time.

use crate::coherence::{Hits, KLine, LineAccess, Lines};
pub use crate::cpu::CpuState;
use crate::holders::{Holders, Still};
use crate::interconnect::Interconnect;
use crate::noise::Noise;
use crate::pagetable::TableRef;
use crate::pending::Pending;
use crate::preset::Costs;
use crate::stalls::Stalls;
use crate::tlb::{Inval, ThreadTlb, Tlb, TlbEntry};
use std::cell::{Cell, RefCell};
use tlbkit_policy::{
    Access, Asid, Barrier, CpuId, CpuMask, Defer, Domain, FlushTicket, Hw, MmId, Note, Phase, Root, Scope, Tlbi,
};

/// Counters of hardware events.
#[derive(Clone, Copy, Debug, Default)]
pub struct HwCounters {
    /// TLBI operations executed with local scope (and CR3 flushes).
    pub local_invalidations: u64,
    /// TLBI operations broadcast to every CPU (counted once per operation).
    pub broadcast_invalidations: u64,
    /// Invalidations of a whole ASID or of everything.
    pub full_flushes: u64,
    /// ASID rollovers / epoch resets reported by the policy.
    pub asid_rollovers: u64,
    /// IPIs sent (reschedule and TLB-flush IPIs).
    pub ipis_sent: u64,
    /// Linux call-function requests run by a handler already on its way to
    /// their CPU, which therefore sent no IPI of their own.
    pub ipis_coalesced: u64,
    /// Cycles IPI handlers spent in all (entry and exit included).
    pub ipi_handler_cycles: u64,
    /// Cycles IPI handlers spent in TLB invalidations and root writes.
    pub ipi_invalidating_cycles: u64,
    /// Cycles IPI handlers spent on shared cache lines (waiting and transfers).
    pub ipi_sync_cycles: u64,
    /// Shootdowns completed (a policy's `Phase::Issue` .. `Phase::Done`).
    pub shootdowns: u64,
    /// Cycles from issue to done, summed over shootdowns.
    pub shootdown_cycles: u64,
    /// Cache-line transfers.
    pub line_transfers: u64,
}

/// Hardware state shared by all CPUs.
pub struct Machine {
    /// Cost table.
    pub costs: Costs,
    /// CPU states, by CPU number.
    pub cpus: Vec<CpuState>,
    /// The TLBs: one per CPU, or one per core where its threads share them
    /// ([`Machine::share_tlbs`]); a CPU's are `tlbs[cpus[cpu].tlb_at]`,
    /// reached through [`Machine::tlb`].
    tlbs: Vec<Tlb>,
    /// Cores per socket (for cross-socket latencies).
    pub cores_per_socket: usize,
    /// Cores per L3 domain (AMD CCX), for cross-CCX cache-line transfers.
    pub cores_per_ccx: usize,
    /// Cycles in a millisecond (one jiffy at `HZ` = 1000), for [`Hw::jiffies`].
    cycles_per_ms: u64,
    /// The seed's noise: the tick's phase (which [`Hw::jiffies`] follows) and
    /// IPI delivery latencies ([`crate::noise`]).
    pub(crate) noise: Noise,
    /// Which CPUs' TLBs a broadcast invalidation must visit.
    holders: Holders,
    /// The DVM queues, and the stalls of running receivers, charged lazily.
    stalls: Stalls,
    /// The limits on broadcasts in flight: requesters' slots, the DVM nodes.
    interconnect: Interconnect,
    /// Broadcast invalidations sent and not yet applied everywhere.
    pending: Pending,
    /// A time no later operation of any CPU comes before: the start of the
    /// event running (kept by the engine, [`Machine::set_floor`]).
    floor: u64,
    /// Scratch: the sockets a message reaches at another time than the rest.
    deviations: Vec<(u32, u64)>,
    /// Counters.
    pub counters: HwCounters,
    /// Cache lines of policy state and of the kernel's named structures.
    lines: Lines,
    /// Per address-space slot: how many CPUs' roots point at it.
    root_refs: Vec<u32>,
    /// How many times a slot's count in `root_refs` fell to zero.
    root_releases: u64,
    /// Lazy flushes ([`Hw::defer_flush`]).
    pub lazy: LazyFlushes,
    /// Where a core's threads share it: an interrupt's costs on a core alone
    /// and on one whose other thread runs a task ([`Machine::set_smt_irq`]).
    smt_irq: Option<SmtIrq>,
}

/// What an interrupt costs the CPU it lands on besides its handler's work:
/// the entry, a call-function request's dispatch, the exit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IrqCosts {
    /// `exception_entry`.
    pub entry: u64,
    /// `ipi_handle`.
    pub dispatch: u64,
    /// `exception_exit`.
    pub exit: u64,
}

impl IrqCosts {
    /// Returns an interrupt's costs at `c`.
    pub fn of(c: &Costs) -> IrqCosts {
        IrqCosts { entry: c.exception_entry, dispatch: c.ipi.ipi_handle, exit: c.exception_exit }
    }
}

/// A machine whose cores' threads share them (`sim/smt.rs`): which CPUs are a
/// core's, and an interrupt's costs on a core alone and on a shared one.
#[derive(Clone, Copy, Debug)]
pub struct SmtIrq {
    /// The cores' threads.
    pub threads: crate::preset::CoreThreads,
    /// On a core no other thread is using.
    pub alone: IrqCosts,
    /// On a core another thread is running a task on.
    pub shared: IrqCosts,
}

/// What the kernel says of the flush running now, for [`Hw::defer_flush`]'s
/// rules ([`Defer`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Deferrable {
    /// It is the flush of the `munmap` or `madvise(MADV_DONTNEED)` that set its
    /// mm's `munmap_inprogress` ([`Defer::OwnUnmap`]).
    pub own: bool,
    /// Its mm's `munmap_inprogress` is set ([`Defer::WhileMmFlagged`]).
    pub flagged: bool,
}

/// The kernel's side of lazy flushes: whether the flush running now may be
/// deferred, the tickets handed out, and the completions to act on.
#[derive(Debug, Default)]
pub struct LazyFlushes {
    /// Set by the kernel around each flush; cleared when a ticket is handed out.
    pub allowed: Deferrable,
    /// The ticket handed out during the current flush, if any.
    pub taken: Option<u32>,
    /// Tickets in use (handed out, not yet completed).
    pub in_use: std::collections::BTreeSet<u32>,
    /// Tickets completed since the kernel last looked, in order.
    pub completed: Vec<u32>,
}

impl Machine {
    /// Returns a machine of one CPU per TLB of `tlbs`, each CPU's its own,
    /// with the given costs and topology.
    pub fn new(costs: Costs, tlbs: Vec<Tlb>, cores_per_socket: usize) -> Self {
        let n = tlbs.len();
        let cpus: Vec<CpuState> = (0..n).map(CpuState::new).collect();
        let mut m = Machine {
            costs,
            cpus: Vec::new(),
            tlbs,
            cores_per_socket,
            cores_per_ccx: cores_per_socket,
            cycles_per_ms: 1_000_000,
            noise: Noise::off(),
            holders: Holders::new(n),
            stalls: Stalls::new(n, cores_per_socket),
            interconnect: Interconnect::new(&costs, n, cores_per_socket),
            pending: Pending::new(cores_per_socket),
            floor: 0,
            deviations: Vec::new(),
            counters: HwCounters::default(),
            lines: Lines::default(),
            root_refs: Vec::new(),
            root_releases: 0,
            lazy: LazyFlushes::default(),
            smt_irq: None,
        };
        for c in &cpus {
            m.root_ref(c.root);
        }
        m.cpus = cpus;
        m
    }

    /// Makes the threads of each core share its TLBs ([`crate::tlb::ThreadTlb`]:
    /// each thread's entries its own, all of them competing for the first
    /// thread's TLBs' slots): the TLBs of the other threads go. Before any CPU
    /// has filled anything.
    pub fn share_tlbs(&mut self, threads: crate::preset::CoreThreads) {
        let n = self.cpus.len();
        // Each CPU's core's first thread (the lowest CPU of the core), and
        // its own number among the core's threads.
        let mut first = Vec::with_capacity(n);
        for (cpu, st) in self.cpus.iter_mut().enumerate() {
            let mut core: Vec<usize> = threads.siblings(self.cores_per_socket, cpu, n).chain([cpu]).collect();
            core.sort_unstable();
            first.push(core[0]);
            st.thread = core.iter().position(|&c| c == cpu).unwrap_or(0) as u8;
            st.tlb_shared = core.len() > 1;
        }
        // The cores' TLBs, in the order of their first threads.
        let mut at = vec![u32::MAX; n];
        let mut kept = Vec::new();
        for (cpu, tlb) in std::mem::take(&mut self.tlbs).into_iter().enumerate() {
            if first[cpu] == cpu {
                at[cpu] = kept.len() as u32;
                kept.push(tlb);
            }
        }
        for (st, &f) in self.cpus.iter_mut().zip(&first) {
            st.tlb_at = at[f];
        }
        self.tlbs = kept;
    }

    /// Returns `cpu`'s view of its TLBs (its core's, where its threads share
    /// them).
    #[inline(always)]
    pub fn tlb(&mut self, cpu: usize) -> ThreadTlb<'_> {
        self.cpus[cpu].tlb_in(&mut self.tlbs)
    }

    /// Returns `cpu`'s TLBs whole, for hints that read nothing the simulation
    /// sees (prefetches).
    #[inline(always)]
    pub fn tlb_whole(&self, cpu: usize) -> &Tlb {
        &self.tlbs[self.cpus[cpu].tlb_at as usize]
    }

    /// Prefetches the L2 sets a lookup or fill of `cpu`'s of the `pages` pages
    /// from `va` reads ([`Tlb::prefetch_l2`]).
    pub(crate) fn prefetch_l2(&self, cpu: usize, va: u64, pages: u64) {
        self.tlb_whole(cpu).prefetch_l2(crate::tlb::thread_va(va, self.cpus[cpu].thread), pages);
    }

    /// Returns the lowest and highest heap addresses of every TLB.
    pub(crate) fn tlb_heap_bounds(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.tlbs.iter().map(Tlb::heap_bounds)
    }

    /// Makes an interrupt cost what `smt` says of its CPU's core: the shared
    /// costs while another thread of the core runs a task, the CPU's sender's
    /// otherwise (`None`: every interrupt at the running event's costs).
    pub fn set_smt_irq(&mut self, smt: Option<SmtIrq>) {
        self.smt_irq = smt;
    }

    /// Returns whether another thread of `cpu`'s core is running a task
    /// (never where cores are not shared: [`Machine::set_smt_irq`]).
    pub fn core_shared(&self, cpu: usize) -> bool {
        self.smt_irq.is_some_and(|s| {
            s.threads.siblings(self.cores_per_socket, cpu, self.cpus.len()).any(|o| self.cpus[o].running)
        })
    }

    /// Returns what an interrupt landing on `cpu` costs it now, the running
    /// event's costs `c` where cores are not shared.
    fn irq_costs(&self, cpu: usize, c: &Costs) -> IrqCosts {
        match self.smt_irq {
            Some(s) if self.core_shared(cpu) => s.shared,
            Some(s) => s.alone,
            None => IrqCosts::of(c),
        }
    }

    /// Returns this machine with `cores_per_ccx` cores to an L3 domain (at most a
    /// socket's).
    pub fn with_ccx(mut self, cores_per_ccx: usize) -> Self {
        self.cores_per_ccx = cores_per_ccx.clamp(1, self.cores_per_socket.max(1));
        self
    }

    /// Sends `op` from `from` to every TLB: each applies it when the message
    /// reaches it, or at the issuer's barrier ([`crate::pending`]), the message
    /// having just been through the DVM queues.
    fn broadcast_inval(&mut self, from: usize, op: Inval) {
        if cfg!(debug_assertions) {
            // (A TLB threads share says "may hold" of its summaries, which
            // count every thread's entries: only a TLB of one CPU is exact
            // enough to check.)
            for cpu in 0..self.cpus.len() {
                debug_assert!(
                    self.cpus[cpu].tlb_shared || self.holders.is_candidate(cpu, op) || !self.tlb(cpu).may_hold_any(op),
                    "cpu{cpu} may hold what {op:?} removes but is not a candidate: a TLB fill bypassed Machine::fill"
                );
            }
        }
        let common = self.stalls.last_processed(&mut self.deviations);
        if self.pending.send(from, op, common, &self.deviations) {
            let (cpus, tlbs, holders) = (&self.cpus, &mut self.tlbs, &mut self.holders);
            self.pending.complete_reached(self.floor, |op, applied| complete_inval(cpus, tlbs, holders, op, applied));
        }
    }

    /// Applies to `cpu`'s TLB every broadcast invalidation that has reached
    /// it by `now` ([`crate::pending`]). Every operation on a CPU's TLB but
    /// the policies' own comes after it, at the operation's time.
    #[inline(always)]
    pub fn catch_up(&mut self, cpu: usize, now: u64) {
        if now >= self.pending.earliest() {
            self.apply_due(cpu, now);
        }
    }

    /// [`Machine::catch_up`] while something is in flight.
    #[inline(never)]
    fn apply_due(&mut self, cpu: usize, now: u64) {
        let mut tlb = self.cpus[cpu].tlb_in(&mut self.tlbs);
        let holders = &mut self.holders;
        self.pending.due(cpu, now, |op| apply_inval(&mut tlb, holders, cpu, op));
    }

    /// Completes every broadcast invalidation `issuer` sent (its `DSB ISH` or
    /// `TLBSYNC`): each CPU that may hold what one removes and has not
    /// applied it yet applies it now.
    fn complete(&mut self, issuer: usize) {
        let (cpus, tlbs, holders) = (&self.cpus, &mut self.tlbs, &mut self.holders);
        self.pending.complete(issuer, |op, applied| complete_inval(cpus, tlbs, holders, op, applied));
    }

    /// Returns when the first broadcast invalidation `cpu` has still to apply
    /// reaches it (`u64::MAX`: none).
    #[cfg(test)]
    pub fn pending_for(&self, cpu: usize) -> u64 {
        self.pending.next_for(cpu)
    }

    /// Sets the start of the event the engine runs now: no later operation of
    /// any CPU comes before it.
    #[inline]
    pub fn set_floor(&mut self, t: u64) {
        self.floor = t;
    }

    /// Returns the start of the event the engine runs now ([`Machine::set_floor`]):
    /// what a line or a lock keeps of its past goes back to it.
    #[inline]
    pub(crate) fn floor(&self) -> u64 {
        self.floor
    }

    /// Returns this machine with a clock of `freq_ghz` (1 GHz unless set), which
    /// only [`Hw::jiffies`] reads: every cost is in cycles.
    pub fn with_clock(mut self, freq_ghz: f64) -> Self {
        self.cycles_per_ms = ((freq_ghz * 1e6).round() as u64).max(1);
        self
    }

    /// Returns this machine with the seed's noise (none unless set).
    pub fn with_noise(mut self, noise: Noise) -> Self {
        self.noise = noise;
        self
    }

    /// Returns what moving a cache line from CPU `a` to CPU `b` costs.
    pub(crate) fn transfer_cost(&self, a: usize, b: usize) -> u64 {
        transfer_cost(&self.costs, self.cores_per_socket, self.cores_per_ccx, a, b)
    }

    /// Returns how long a walk of loads takes (module docs, "Walks"): `runs`
    /// gives, in issue order, so many loads of so many cycles each; each load
    /// starts once one of the `mlp` fill buffers is free, none waiting for the
    /// value of another. The scheduler's scans of other CPUs' run queues are
    /// such walks: each CPU's address comes from the scan's counter.
    pub(crate) fn walk_time(&self, runs: impl IntoIterator<Item = (u64, u64)>) -> u64 {
        const MAX: usize = crate::preset::MAX_MLP as usize;
        let mlp = (self.costs.mlp.max(1) as usize).min(MAX);
        // When each of the last `mlp` loads returns, oldest at `head`.
        let (mut ring, mut len, mut head) = ([0u64; MAX], 0, 0);
        for (n, cycles) in runs {
            let first = n.min(mlp as u64) as usize;
            for _ in 0..first {
                if len < mlp {
                    ring[len] = cycles;
                    len += 1;
                } else {
                    ring[head] += cycles;
                    head = (head + 1) % mlp;
                }
            }
            // The rest of the run: each load starts as the one `mlp` before
            // it, of the same run, returns.
            let rest = n - first as u64;
            if rest > 0 {
                let (rounds, extra) = (rest / mlp as u64, (rest % mlp as u64) as usize);
                ring[..mlp].iter_mut().for_each(|t| *t += rounds * cycles);
                for _ in 0..extra {
                    ring[head] += cycles;
                    head = (head + 1) % mlp;
                }
            }
        }
        ring[..len].iter().copied().max().unwrap_or(0)
    }

    /// Returns the cycles running CPUs lost processing broadcast invalidations
    /// (DVM messages, `INVLPGB`) they did not issue, so far: those charged
    /// and those still owed ([`Stalls::total`]).
    pub fn broadcast_stall_cycles(&self) -> u64 {
        self.stalls.total(&self.cpus)
    }

    /// Returns how many CPUs' roots point at `mm` (a lazy-TLB CPU's included).
    pub fn roots_on(&self, mm: MmId) -> u32 {
        self.root_refs.get(mm.index()).copied().unwrap_or(0)
    }

    /// Returns how many times some address space's [`Machine::roots_on`] fell to
    /// zero: when it has not changed, no address space has lost its last root.
    pub fn root_releases(&self) -> u64 {
        self.root_releases
    }

    fn root_ref(&mut self, root: Root) {
        if let Root::Mm(mm) = root {
            if self.root_refs.len() <= mm.index() {
                self.root_refs.resize(mm.index() + 1, 0);
            }
            self.root_refs[mm.index()] += 1;
        }
    }

    fn root_unref(&mut self, root: Root) {
        if let Root::Mm(mm) = root {
            let r = &mut self.root_refs[mm.index()];
            *r -= 1;
            if *r == 0 {
                self.root_releases += 1;
            }
        }
    }

    /// Performs an atomic whose order among CPUs decides nothing by `cpu` at
    /// `t` on the kernel's named line `line` (an rwsem's count, a page
    /// counter: [`Access::RmwAnyOrder`]); returns when it is done.
    pub fn katomic(&mut self, cpu: usize, t: u64, line: KLine) -> u64 {
        self.line_access(cpu, t, line.addr(), Access::RmwAnyOrder)
    }

    /// Loads a word of the kernel's line `line` and then compare-and-exchanges
    /// it, by `cpu` at `t`, in whatever order the other CPUs' accesses reach
    /// the line: where another CPU wrote the line last, the load brings a
    /// shared copy and the exchange takes it for writing, two moves. An
    /// exchange that fails (another CPU's write landed between the two)
    /// leaves the line with this CPU, whose retry then hits. Returns when it
    /// is done.
    pub fn kload_cmpxchg(&mut self, cpu: usize, t: u64, line: KLine) -> u64 {
        let read = self.line_access(cpu, t, line.addr(), Access::Read);
        self.line_access(cpu, read, line.addr(), Access::RmwAnyOrder)
    }

    /// Pushes onto the lock-free list whose head is the kernel's line `line`
    /// (`llist_add`, lib/llist.c in every release), by `cpu` at `t`: a
    /// `READ_ONCE` of the head, then the compare-and-exchange that links the
    /// node in ([`Machine::kload_cmpxchg`]), in whatever order the other
    /// CPUs' pushes and the owner's `llist_del_all` reach the line. Returns
    /// when it is done.
    pub fn llist_add(&mut self, cpu: usize, t: u64, line: KLine) -> u64 {
        self.kload_cmpxchg(cpu, t, line)
    }

    /// Reads, by `cpu` at `t`, the variable `offset` bytes into the kernel's
    /// named line `line` (a field that shares the line with a lock word);
    /// returns when it is done.
    pub fn kread(&mut self, cpu: usize, t: u64, line: KLine, offset: usize) -> u64 {
        self.line_access(cpu, t, line.addr() + offset, Access::Read)
    }

    /// Performs `access` by `cpu` at `t` on the shared variable at `addr`, a
    /// move of its line costing the distance between the two CPUs (see the
    /// module docs, "Coherence"); counts the moves and returns when it is done.
    fn line_access(&mut self, cpu: usize, t: u64, addr: usize, access: Access) -> u64 {
        let c = self.costs;
        let (cps, ccx) = (self.cores_per_socket, self.cores_per_ccx);
        let cost = |from: Option<u32>, to: u32| transfer_cost(&c, cps, ccx, from.unwrap_or(to) as usize, to as usize);
        let req = LineAccess { cpu: cpu as u32, t, addr, kind: access };
        let hit = Hits { mem: c.mem_access, atomic: c.lines.atomic_hit };
        let (done, moves) = self.lines.access(req, self.floor, hit, cost);
        self.counters.line_transfers += moves;
        done
    }

    /// Makes `cpu` spin on the line holding `addr` from `since` (`None`: stop).
    fn set_spinner(&mut self, addr: usize, spinner: Option<(usize, u64)>) {
        self.lines.set_spinner(addr, spinner.map(|(c, t)| (c as u32, t)));
    }

    /// Takes the cycles IPI handlers and incoming DVM messages took from `cpu`'s
    /// current operation.
    #[inline]
    pub fn take_stolen(&mut self, cpu: usize) -> u64 {
        self.stalls.settle(cpu, &mut self.cpus[cpu]);
        std::mem::take(&mut self.cpus[cpu].stolen)
    }

    /// Sets when `cpu`'s current operation ends.
    #[inline]
    pub fn set_busy_until(&mut self, cpu: usize, t: u64) {
        self.stalls.settle(cpu, &mut self.cpus[cpu]);
        self.cpus[cpu].busy_until = t;
    }

    /// Fills walked translation `e` into `cpu`'s TLB at `now` (see
    /// [`Tlb::fill`]), after what has reached it by then; a broadcast
    /// invalidation that has not reached it yet will remove the entry if it
    /// names it ([`crate::pending`]: the fill puts the CPU in the sets the
    /// issuer's barrier visits).
    #[inline]
    pub fn fill(&mut self, cpu: usize, e: TlbEntry, speculative: bool, now: u64) {
        self.catch_up(cpu, now);
        self.holders.filled(cpu, (!e.global()).then_some(e.asid), e.va());
        self.tlb(cpu).fill(e, speculative);
    }

    /// Caches the level-2 descriptor for `va` in `cpu`'s walk cache at `now`
    /// (see [`Tlb::pwc_fill`]), as [`Machine::fill`] fills the TLB.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn pwc_fill(&mut self, cpu: usize, va: u64, asid: u16, global: bool, table: TableRef, mm_uid: u32, now: u64) {
        self.catch_up(cpu, now);
        self.holders.filled(cpu, (!global).then_some(asid), va);
        self.tlb(cpu).pwc_fill(va, asid, global, table, mm_uid);
    }

    /// Returns whether CPUs `a` and `b` are on different sockets.
    pub fn cross_socket(&self, a: usize, b: usize) -> bool {
        a / self.cores_per_socket != b / self.cores_per_socket
    }

    /// Returns the x2APIC cluster of `cpu` ([`Costs::ipi_cluster`] consecutive
    /// CPUs of one socket), as (socket, cluster in the socket).
    fn ipi_cluster_of(&self, cpu: usize) -> (usize, usize) {
        let per = self.costs.ipi.ipi_cluster.max(1) as usize;
        (cpu / self.cores_per_socket, cpu % self.cores_per_socket / per)
    }

    /// Calls `f` with what `op` removes, in the TLB's own terms: one [`Inval`],
    /// or one per page of a range.
    fn tlb_ops(op: Tlbi, mut f: impl FnMut(Inval)) {
        match op {
            Tlbi::Va { asid, va } => f(Inval::Va { asid: asid.get(), va: va.0 }),
            Tlbi::VaAllAsids { va } => f(Inval::VaAll { va: va.0 }),
            Tlbi::Asid(a) => f(Inval::Asid(a.get())),
            Tlbi::All => f(Inval::All),
            Tlbi::AllNonGlobal => f(Inval::AllNonGlobal),
            Tlbi::Range { asid, va, pages } => {
                for i in 0..pages.max(1) as u64 {
                    let va = va.add_pages(i).0;
                    f(match asid {
                        Some(a) => Inval::Va { asid: a.get(), va },
                        None => Inval::VaAll { va },
                    });
                }
            }
        }
    }

    /// Sends one DVM message (or `INVLPGB`) from `from`, whose `TLBI` starts at
    /// `t`; returns when the issuer could issue it (a slot of its requester
    /// free: it waits until then, then spends `tlbi_bcast_issue`) and when it
    /// completes for the issuer (every acknowledgement and node completion back).
    fn broadcast(&mut self, from: usize, t: u64, op: Tlbi) -> (u64, u64) {
        let c = self.costs;
        let process = match op {
            Tlbi::Va { .. } | Tlbi::VaAllAsids { .. } | Tlbi::Range { .. } => c.dvm.dvm_process,
            Tlbi::Asid(_) | Tlbi::All | Tlbi::AllNonGlobal => c.dvm.dvm_process_asid,
        };
        // Every message, the issuer's own included, goes out to the interconnect
        // and its completion comes back through it (the DVM sync of DSB ISH). A
        // receiver that is running something stalls while its TLBs are
        // invalidated (the issuer is waiting in its DSB anyway).
        let (stalls, cpus) = (&mut self.stalls, &mut self.cpus);
        let (admitted, done) = self.interconnect.broadcast(from, t, c.dvm.tlbi_bcast_issue, |dispatched| {
            stalls.broadcast(from, dispatched, process, c.dvm.dvm_hop, c.dvm.dvm_cross_socket, cpus)
        });
        // Each TLB applies it when its socket has processed the message, by
        // `done` (the issuer's barrier waits for that: `crate::pending`).
        Self::tlb_ops(op, |inv| self.broadcast_inval(from, inv));
        debug_assert!(
            self.stalls.last_processed(&mut self.deviations) <= done && self.deviations.iter().all(|&(_, t)| t <= done),
            "a socket processes a message after its issuer's barrier completes"
        );
        (admitted.issued, done)
    }
}

/// Applies `op` to `cpu`'s TLB `tlb` and records in `holders` what it may
/// still hold.
fn apply_inval(tlb: &mut ThreadTlb<'_>, holders: &mut Holders, cpu: usize, op: Inval) {
    tlb.invalidate(op);
    holders.visited(cpu, op, still(tlb, op));
}

/// Returns what `tlb` may still hold of the sets `op` names.
#[inline]
fn still(tlb: &ThreadTlb<'_>, op: Inval) -> Still {
    let (asid, block) = match op {
        Inval::Va { asid, va } => (tlb.may_hold(asid), tlb.may_hold_block(va)),
        Inval::VaAll { va } => (true, tlb.may_hold_block(va)),
        Inval::Asid(asid) | Inval::AsidOfThread { asid, .. } => (tlb.may_hold(asid), true),
        Inval::All | Inval::AllNonGlobal | Inval::Thread { .. } => (true, true),
    };
    Still { asid, block }
}

/// Completes `op` on the CPUs `cpus`, whose TLBs are `tlbs`: each that may
/// hold what it removes and is not among `applied` (those that applied it
/// when it reached them) applies it now.
fn complete_inval(cpus: &[CpuState], tlbs: &mut [Tlb], holders: &mut Holders, op: Inval, applied: &[u32]) {
    holders.candidates(cpus.len(), op, |cpu| {
        let mut tlb = cpus[cpu].tlb_in(tlbs);
        if !applied.contains(&(cpu as u32)) {
            tlb.invalidate(op);
        }
        still(&tlb, op)
    });
}

/// Returns what moving a cache line from CPU `a` to CPU `b` costs: within an L3
/// domain (`cores_per_ccx` cores), across domains of a socket, or across sockets.
fn transfer_cost(c: &Costs, cores_per_socket: usize, cores_per_ccx: usize, a: usize, b: usize) -> u64 {
    let (cps, ccx) = (cores_per_socket.max(1), cores_per_ccx.max(1));
    let mut cost = c.lines.cacheline_transfer;
    if a / ccx != b / ccx {
        cost += c.lines.cacheline_cross_ccx;
    }
    if a / cps != b / cps {
        cost += c.lines.cacheline_cross_socket;
    }
    cost
}

/// How an IPI is sent and how its handler is entered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IpiKind {
    /// A call-function IPI ([`Hw::send_ipi`], Linux `smp_call_function_many`): one
    /// interrupt-controller write per target, and the target's generic dispatch
    /// (`ipi_handle`) finds the request, calls the function and clears its flag.
    CallFunction,
    /// A vectored IPI ([`Hw::send_ipi_async`], FreeBSD `ipi_selected`): one write
    /// per target; the vector's stub calls the handler directly, and the handler
    /// reads its request and acknowledges through shared variables it accounts
    /// itself, so no dispatch is charged.
    Vector,
    /// A vectored IPI to every other CPU with one write
    /// ([`Hw::send_ipi_all_but_self_async`], FreeBSD `ipi_all_but_self`).
    VectorAllButSelf,
    /// Linux's call-function IPI whose handler accounts its own dispatch
    /// ([`Hw::send_call_function_ipi_async`]): queued and sent as
    /// [`IpiKind::CallFunction`], entered as [`IpiKind::Vector`].
    CallQueued,
}

impl IpiKind {
    /// Whether the request goes through Linux's `call_single_queue`.
    fn queued(self) -> bool {
        matches!(self, IpiKind::CallFunction | IpiKind::CallQueued)
    }
}

/// The hardware interface of one CPU during one kernel operation.
pub struct CpuHw<'a> {
    m: RefCell<&'a mut Machine>,
    /// The CPU operations act on: the caller's, or an IPI target's inside a handler.
    cpu: Cell<usize>,
    now: Cell<u64>,
    /// Whether operations run inside an IPI handler (for the time split).
    in_irq: Cell<bool>,
    /// When this CPU's current shootdown was issued.
    issued: Cell<Option<u64>>,
    /// The variable this CPU will spin on after its next IPI dispatch ([`Hw::spin_on`]).
    spin: Cell<Option<usize>>,
    /// The variable the sender spins on while the handlers of its IPI run.
    spinning: Cell<Option<usize>>,
    /// In the sync phase: when each of its polls so far returned (module docs,
    /// "The sync phase").
    polls: RefCell<Option<Vec<u64>>>,
    /// The walk under way (module docs, "Walks").
    walk: RefCell<Walk>,
}

/// A run of [`Access::ReadAhead`] loads: when it started, when each of its loads
/// returned, and the CPU's clock after the last, which any other work moves on.
#[derive(Default)]
struct Walk {
    start: u64,
    done: Vec<u64>,
    after: Option<u64>,
    /// When the walk's latest index load returns.
    index: u64,
}

/// When a load overlapping the loads of `done` (each's return, in issue
/// order) may start, none before `floor`: once one of the `mlp` fill buffers
/// is free, the one of the load `mlp` before it.
fn fill_buffer_free(done: &[u64], floor: u64, mlp: usize) -> u64 {
    done.len().checked_sub(mlp).map_or(floor, |i| done[i].max(floor))
}

impl Walk {
    /// When the next load of the walk may start, the CPU's clock being `now`
    /// and its fill buffers `mlp`: a load of the same run once a buffer is free
    /// (and, unless it is an `index` itself, once the latest index is back),
    /// the first of a new run at `now`.
    fn start_at(&mut self, now: u64, mlp: usize, index: bool) -> u64 {
        if self.after != Some(now) {
            self.start = now;
            self.index = now;
            self.done.clear();
        }
        let buffer = fill_buffer_free(&self.done, self.start, mlp);
        if index {
            buffer
        } else {
            buffer.max(self.index)
        }
    }
}

impl<'a> CpuHw<'a> {
    /// Returns CPU `cpu`'s interface, its clock at `now` cycles.
    pub fn new(m: &'a mut Machine, cpu: usize, now: u64) -> Self {
        CpuHw {
            m: RefCell::new(m),
            cpu: Cell::new(cpu),
            now: Cell::new(now),
            in_irq: Cell::new(false),
            issued: Cell::new(None),
            spin: Cell::new(None),
            spinning: Cell::new(None),
            polls: RefCell::new(None),
            walk: RefCell::new(Walk::default()),
        }
    }

    /// Returns the CPU's clock after what was done through this interface.
    pub fn now(&self) -> u64 {
        self.now.get()
    }

    /// Ends the walk under way, if any (module docs, "Walks").
    fn end_walk(&self) {
        self.walk.borrow_mut().after = None;
    }

    fn spend(&self, cycles: u64) {
        self.now.set(self.now.get() + cycles);
    }

    /// Spends `cycles` of TLB work, counted as invalidating inside a handler.
    fn spend_tlb(&self, cycles: u64) {
        if self.in_irq.get() {
            self.m.borrow_mut().counters.ipi_invalidating_cycles += cycles;
        }
        self.spend(cycles);
    }

    /// Runs `handler` on each target as an IPI; returns (when the sender is done
    /// sending, when the last completion flag is back).
    ///
    /// `kind` says how the IPI is sent and entered. Handlers run in the order their
    /// CPUs are interrupted (then by CPU number). A Linux call-function request
    /// (module docs, "IPIs") whose target's queue a handler has not yet taken is
    /// run by that handler, after its functions, and gets no IPI.
    fn deliver<F: Fn(&Self)>(&self, targets: &CpuMask, kind: IpiKind, handler: F) -> (u64, u64) {
        let c = self.m.borrow().costs;
        let calls = kind == IpiKind::CallFunction;
        let me = self.cpu.get();
        let mut queued_at = self.now.get();
        // (when the handler starts, target, whether it rides an earlier IPI).
        let mut list = Vec::new();
        let sent = {
            let mut m = self.m.borrow_mut();
            let mut send = Vec::new();
            targets.for_each(|t| {
                let target = t.index();
                if target == me {
                    return;
                }
                if calls {
                    // smp_call_function_many_cond's llist_add onto the target's
                    // queue, one after another (a locked exchange waits for the
                    // one before it); the IPIs go after the last.
                    queued_at = m.llist_add(me, queued_at, KLine::CallQueue(target as u32));
                }
                let st = &m.cpus[target];
                if kind.queued() && queued_at < st.csq_taken {
                    // llist_add found the queue non-empty: no IPI.
                    list.push((st.csq_end.max(queued_at), target, true));
                    m.counters.ipis_coalesced += 1;
                } else {
                    send.push(target);
                }
            });
            let others = m.cpus.len() - 1;
            let one_write = kind == IpiKind::VectorAllButSelf
                || (kind.queued() && c.ipi.ipi_shorthand && !send.is_empty() && send.len() == others);
            let mut sent = queued_at;
            if one_write {
                sent += c.ipi.ipi_send;
            }
            let clustered = kind.queued() && c.ipi.ipi_cluster > 0;
            let mut cluster = None;
            for target in send {
                if !one_write {
                    let here = clustered.then(|| m.ipi_cluster_of(target));
                    if here.is_none() || here != cluster {
                        sent += c.ipi.ipi_send;
                    }
                    cluster = here;
                }
                m.counters.ipis_sent += 1;
                let cross = m.cross_socket(me, target);
                let latency = m.noise.ipi_delivery(c.ipi.ipi_deliver + if cross { c.ipi.ipi_cross_socket } else { 0 });
                let arrive = sent + latency;
                list.push((arrive.max(m.cpus[target].irq_until), target, false));
            }
            sent
        };
        list.sort_unstable();
        // The sender spins from its last interrupt-controller write on.
        if let Some(addr) = self.spin.take() {
            self.m.borrow_mut().set_spinner(addr, Some((me, sent)));
            self.spinning.set(Some(addr));
        }
        let mut done = sent;
        for (start, target, rides) in list {
            let (ack, irq) = {
                let m = self.m.borrow();
                (m.transfer_cost(me, target), m.irq_costs(target, &c))
            };
            let dispatch = if calls { irq.dispatch } else { 0 };
            self.cpu.set(target);
            self.in_irq.set(true);
            let entered = if rides { start } else { start + irq.entry };
            // flush_smp_call_function_queue's llist_del_all: an exchange on
            // the queue's head, in the order the line's requests reach it.
            let took = if calls && !rides {
                self.m.borrow_mut().katomic(target, entered, KLine::CallQueue(target as u32))
            } else {
                entered
            };
            self.now.set(took + dispatch);
            // A handler's walks are its CPU's; the sender's ends at its IPIs.
            self.end_walk();
            handler(self);
            self.end_walk();
            self.in_irq.set(false);
            let returned = self.now.get();
            let end = returned + irq.exit;
            {
                let mut m = self.m.borrow_mut();
                let st = &mut m.cpus[target];
                if kind.queued() {
                    if !rides {
                        st.csq_taken = start + irq.entry;
                    }
                    st.csq_end = returned;
                }
                // A request that rides an earlier handler adds its own run to that
                // handler's time, which already counts its entry and exit.
                let took = if rides { returned - start } else { end - start };
                st.irq_until = st.irq_until.max(end);
                // A running CPU loses the handler's time from what it runs, whether
                // the interrupt lands in the operation the engine last ran there or
                // in the next one (which runs from `busy_until` on).
                if st.busy_until > start || st.running {
                    st.stolen += took;
                    st.irq_stolen += took;
                }
                m.counters.ipi_handler_cycles += took;
            }
            done = done.max(end + ack);
        }
        self.cpu.set(me);
        if let Some(addr) = self.spinning.take() {
            self.m.borrow_mut().set_spinner(addr, None);
        }
        (sent, done)
    }
}

impl Hw for CpuHw<'_> {
    fn cpu(&self) -> CpuId {
        CpuId(self.cpu.get() as u32)
    }

    fn ncpus(&self) -> usize {
        self.m.borrow().cpus.len()
    }

    fn write_root(&self, root: Root, asid: Asid, noflush: bool) {
        self.end_walk();
        let mut m = self.m.borrow_mut();
        let mut cost = m.costs.root_write;
        let old = std::mem::replace(&mut m.cpus[self.cpu.get()].root, root);
        m.root_ref(root);
        m.root_unref(old);
        let cpu = self.cpu.get();
        m.cpus[cpu].asid = asid.get();
        if !noflush {
            m.tlb(cpu).invalidate(Inval::Asid(asid.get()));
            m.counters.local_invalidations += 1;
            m.counters.full_flushes += 1;
            cost += m.costs.root_write_flush;
        }
        drop(m);
        self.spend_tlb(cost);
    }

    fn tlbi(&self, op: Tlbi, scope: Scope) {
        self.end_walk();
        let mut m = self.m.borrow_mut();
        let c = m.costs;
        let whole = matches!(op, Tlbi::Asid(_) | Tlbi::All | Tlbi::AllNonGlobal);
        if whole {
            m.counters.full_flushes += 1;
        }
        match scope {
            Scope::Local => {
                m.counters.local_invalidations += 1;
                let cpu = self.cpu.get();
                let current = m.cpus[cpu].asid;
                let mut tlb = m.tlb(cpu);
                Machine::tlb_ops(op, |inv| {
                    tlb.invalidate(inv);
                });
                // A local range is one instruction (arm64 `TLBI RVAE1`). On x86 a page
                // of a PCID other than CR3's cannot be INVLPG, which acts on the
                // current PCID only: it is INVPCID type 0 (`Costs::invpcid_va`, zero
                // on arm64 and where the machine has no INVPCID).
                let cost = match op {
                    Tlbi::Va { asid, .. } if c.local.invpcid_va > 0 && asid.get() != current => c.local.invpcid_va,
                    Tlbi::Va { .. } | Tlbi::VaAllAsids { .. } | Tlbi::Range { .. } => c.local.tlbi_local_va,
                    Tlbi::Asid(_) => c.local.tlbi_local_asid,
                    Tlbi::All | Tlbi::AllNonGlobal => c.local.tlbi_local_all,
                };
                drop(m);
                self.spend_tlb(cost);
            }
            Scope::Broadcast => {
                m.counters.broadcast_invalidations += 1;
                let now = self.now.get();
                let (issued, acked) = m.broadcast(self.cpu.get(), now, op);
                let st = &mut m.cpus[self.cpu.get()];
                st.sync_until = st.sync_until.max(acked);
                drop(m);
                // Waiting for a slot of its requester, then issuing.
                self.spend_tlb(issued - now + c.dvm.tlbi_bcast_issue);
            }
        }
    }

    fn barrier(&self, b: Barrier) {
        self.end_walk();
        let m = self.m.borrow();
        let c = m.costs;
        match b {
            Barrier::Dsb(Domain::InnerShareable) | Barrier::TlbSync => {
                let until = m.cpus[self.cpu.get()].sync_until;
                drop(m);
                // Every receiver has processed them by `until`
                // (`crate::pending`): none may use what they removed after.
                self.m.borrow_mut().complete(self.cpu.get());
                self.now.set(self.now.get().max(until) + c.dsb);
            }
            Barrier::Dsb(Domain::NonShareable) | Barrier::DsbSt(_) => {
                drop(m);
                self.spend(c.dsb);
            }
            Barrier::Isb => {
                drop(m);
                self.spend(c.isb);
            }
            Barrier::Full => {
                drop(m);
                self.spend(c.full_barrier);
            }
        }
    }

    fn send_ipi<F: Fn(&Self)>(&self, targets: &CpuMask, handler: F) {
        let (sent, done) = self.deliver(targets, IpiKind::CallFunction, handler);
        self.now.set(sent.max(done));
    }

    fn send_ipi_async<F: Fn(&Self)>(&self, targets: &CpuMask, handler: F) {
        let (sent, _) = self.deliver(targets, IpiKind::Vector, handler);
        self.now.set(sent);
    }

    fn send_call_function_ipi_async<F: Fn(&Self)>(&self, targets: &CpuMask, handler: F) {
        let (sent, _) = self.deliver(targets, IpiKind::CallQueued, handler);
        self.now.set(sent);
    }

    fn send_ipi_all_but_self_async<F: Fn(&Self)>(&self, handler: F) {
        let all = CpuMask::new(self.ncpus());
        all.set_all();
        let (sent, _) = self.deliver(&all, IpiKind::VectorAllButSelf, handler);
        self.now.set(sent);
    }

    fn shared(&self, addr: usize, access: Access) {
        #[cfg(all(debug_assertions, target_os = "linux"))]
        crate::event_frame::refuse_temporary(addr);
        let now = self.now.get();
        // In the sync phase a poll after the first is issued when the first returned,
        // once an earlier poll has freed a fill buffer (module docs, "The sync
        // phase"); anything but a poll ends the overlap.
        let load = matches!(access, Access::Read | Access::ReadAhead | Access::ReadAheadIndex);
        let index = access == Access::ReadAheadIndex;
        let mut polls = self.polls.take().filter(|_| load && !self.in_irq.get());
        let walk = (index || access == Access::ReadAhead) && polls.is_none();
        let mlp = || self.m.borrow().costs.mlp.max(1) as usize;
        let t = match polls.as_deref() {
            Some(done @ [first, ..]) => fill_buffer_free(done, *first, mlp()),
            _ if walk => self.walk.borrow_mut().start_at(now, mlp(), index),
            _ => now,
        };
        let access = if load { Access::Read } else { access };
        let end = self.m.borrow_mut().line_access(self.cpu.get(), t, addr, access);
        if self.in_irq.get() {
            self.m.borrow_mut().counters.ipi_sync_cycles += end - t;
        }
        if let Some(done) = polls.as_mut() {
            done.push(end);
        }
        self.polls.replace(polls);
        self.now.set(now.max(end));
        let mut w = self.walk.borrow_mut();
        if walk {
            w.done.push(end);
            w.after = Some(self.now.get());
            if index {
                w.index = end;
            }
        } else {
            w.after = None;
        }
    }

    fn spin_on(&self, addr: usize) {
        self.spin.set(Some(addr));
    }

    fn phase(&self, phase: Phase) {
        match phase {
            Phase::Issue => self.issued.set(Some(self.now.get())),
            Phase::Dispatch => {}
            Phase::Sync => {
                self.polls.replace(Some(Vec::new()));
            }
            Phase::Done => {
                self.polls.take();
                if let Some(t) = self.issued.take() {
                    let mut m = self.m.borrow_mut();
                    m.counters.shootdowns += 1;
                    m.counters.shootdown_cycles += self.now.get() - t;
                }
            }
        }
    }

    fn jiffies(&self) -> u64 {
        let m = self.m.borrow();
        let period = m.cycles_per_ms;
        crate::noise::ticks_by(self.now.get(), period, m.noise.tick_phase(period))
    }

    /// Runs `f`: the simulator runs an IPI handler whole when it is sent, so
    /// nothing can interleave with `f` anyway.
    fn irqs_off<R>(&self, f: impl FnOnce() -> R) -> R {
        f()
    }

    /// A ticket (the smallest free number) inside a flush the kernel allows
    /// to be deferred under `rule` ([`LazyFlushes::allowed`]).
    fn defer_flush(&self, _mm: MmId, rule: Defer) -> Option<FlushTicket> {
        let mut m = self.m.borrow_mut();
        let l = &mut m.lazy;
        let a = std::mem::take(&mut l.allowed);
        let ok = match rule {
            Defer::WhileMmFlagged => a.flagged,
            Defer::OwnUnmap => a.own,
        };
        if !ok {
            return None;
        }
        let t = (1..).find(|t| !l.in_use.contains(t)).expect("a free ticket");
        l.in_use.insert(t);
        l.taken = Some(t);
        Some(FlushTicket(t))
    }

    /// Queues the completion for the kernel, which acts on it when the policy
    /// call returns (and reports a ticket that is not pending as an error).
    fn flush_complete(&self, ticket: FlushTicket) {
        let mut m = self.m.borrow_mut();
        m.lazy.in_use.remove(&ticket.0);
        m.lazy.completed.push(ticket.0);
    }

    fn note(&self, note: Note) {
        match note {
            Note::AsidRollover => self.m.borrow_mut().counters.asid_rollovers += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preset;
    use tlbkit_policy::{Asid, VirtAddr};

    fn asid() -> Asid {
        Asid::new(1, 16).unwrap()
    }

    /// Three CPUs of an eMAG; CPU 1 is in the middle of an operation until `busy`.
    fn machine(busy: u64) -> Machine {
        let p = preset::named("emag");
        let g = p.tlb;
        let cpus = (0..3).map(|_| Tlb::new(g.l1d_entries, g.l2_entries, g.l2_ways, g.pwc_entries));
        let mut m = Machine::new(p.costs, cpus.collect(), p.cores_per_socket);
        m.cpus[1].busy_until = busy;
        m
    }

    /// CPU 0 broadcasts `op` at time 0 and waits for it; returns when its DSB completes.
    fn broadcast_and_sync(m: &mut Machine, op: Tlbi) -> u64 {
        let hw = CpuHw::new(m, 0, 0);
        hw.tlbi(op, Scope::Broadcast);
        hw.barrier(Barrier::Dsb(Domain::InnerShareable));
        hw.now()
    }

    #[test]
    fn a_broadcast_reaches_each_thread_of_a_shared_tlb_for_its_own_entries() {
        // Four CPUs of emag's costs as two cores of two threads (CPUs 0 and
        // 2 one core): CPU 0 holds an entry of ASID 1 and CPU 2 one of ASID
        // 2 at the same address, in the one TLB of their core. A broadcast
        // of ASID 1's page removes CPU 0's alone; then one of ASID 2's,
        // CPU 2's. (CPU 2 never held ASID 1, which its core's summaries
        // count: the debug check of candidates must not take that for a
        // TLB the interconnect skipped.)
        let p = preset::named("emag");
        let g = p.tlb;
        let tlbs = (0..4).map(|_| Tlb::new(g.l1d_entries, g.l2_entries, g.l2_ways, g.pwc_entries));
        let mut m = Machine::new(p.costs, tlbs.collect(), 4);
        m.share_tlbs(crate::preset::CoreThreads { per_core: 2, share: 0.6, tlbs: true });
        assert_eq!((m.cpus[0].tlb_at, m.cpus[2].tlb_at, m.cpus[1].tlb_at), (0, 0, 1));
        let entry = |a: u16| {
            let mut e = TlbEntry { pfn: 9, asid: a, valid: true, ..Default::default() };
            e.tag = 0x1000 >> e.shift();
            e
        };
        m.fill(0, entry(1), false, 0);
        m.fill(2, entry(2), false, 0);
        let held = |m: &mut Machine, cpu: usize, a: u16| m.tlb(cpu).lookup_entry(0x1000, a).is_some();
        let one = Tlbi::Va { asid: Asid::new(1, 16).unwrap(), va: VirtAddr(0x1000) };
        broadcast_and_sync(&mut m, one);
        assert!(!held(&mut m, 0, 1) && held(&mut m, 2, 2), "ASID 1's broadcast leaves CPU 2's entry");
        let two = Tlbi::Va { asid: Asid::new(2, 16).unwrap(), va: VirtAddr(0x1000) };
        broadcast_and_sync(&mut m, two);
        assert!(!held(&mut m, 2, 2));
    }

    #[test]
    fn a_running_receiver_loses_the_processing_time_and_an_idle_one_does_not() {
        let c = preset::named("emag").costs;
        let va = Tlbi::Va { asid: asid(), va: VirtAddr(0x1000) };
        let mut m = machine(1_000_000);
        broadcast_and_sync(&mut m, va);
        assert_eq!(m.take_stolen(1), c.dvm.dvm_process, "a running CPU stalls while its TLB is searched");
        assert_eq!(m.take_stolen(2), 0, "an idle CPU loses nothing");
        assert_eq!(m.take_stolen(0), 0, "the issuer waits in its DSB instead");
    }

    #[test]
    fn an_ipi_handler_is_kernel_time_of_a_running_receiver_and_a_dvm_message_is_not() {
        let c = preset::named("emag").costs;
        let mut m = machine(1_000_000);
        let hw = CpuHw::new(&mut m, 0, 0);
        let targets = CpuMask::new(3);
        targets.set(CpuId(1));
        targets.set(CpuId(2));
        hw.send_ipi(&targets, |_| {});
        hw.tlbi(Tlbi::Va { asid: asid(), va: VirtAddr(0x1000) }, Scope::Broadcast);
        hw.barrier(Barrier::Dsb(Domain::InnerShareable));
        // The handler's take of its queue brings the line CPU 0 pushed onto.
        let handler = c.exception_entry + m.transfer_cost(0, 1) + c.ipi.ipi_handle + c.exception_exit;
        assert_eq!(m.cpus[1].irq_stolen, handler, "the busy CPU runs the handler in the kernel");
        assert_eq!(m.take_stolen(1), handler + c.dvm.dvm_process, "and loses the DVM message's processing too");
        assert_eq!(m.cpus[2].irq_stolen, 0, "an idle CPU's handler is idle time");
    }

    #[test]
    fn an_interrupt_costs_a_cpu_what_its_core_s_sharing_says() {
        // Four CPUs of two cores (CPUs 0 and 2 one core, 1 and 3 the other):
        // CPU 0 sends to 1 and 2 while every CPU runs a task (both land on
        // shared cores), then while CPU 3 is idle (CPU 1 has its core alone).
        let p = preset::named("ivb3320m");
        let alone = IrqCosts { entry: 100, dispatch: 300, exit: 80 };
        let shared = IrqCosts { entry: 200, dispatch: 600, exit: 160 };
        let machine = |idle: Option<usize>| {
            let g = p.tlb;
            let cpus = (0..4).map(|_| Tlb::new(g.l1d_entries, g.l2_entries, g.l2_ways, g.pwc_entries));
            let mut m = Machine::new(p.costs, cpus.collect(), p.cores_per_socket);
            m.set_smt_irq(Some(SmtIrq { threads: p.threads, alone, shared }));
            for c in (0..4).filter(|&c| Some(c) != idle) {
                m.cpus[c].running = true;
                m.cpus[c].busy_until = 1_000_000;
            }
            m
        };
        let send = |m: &mut Machine, to: &[u32]| {
            let hw = CpuHw::new(m, 0, 0);
            let targets = CpuMask::new(4);
            for &t in to {
                targets.set(CpuId(t));
            }
            hw.send_ipi(&targets, |_| {});
        };
        // Each handler's take of its queue is a line move, which sharing does
        // not stretch.
        let mut m = machine(None);
        let (t1, t2) = (m.transfer_cost(0, 1), m.transfer_cost(0, 2));
        send(&mut m, &[1, 2]);
        let whole = shared.entry + shared.dispatch + shared.exit;
        assert_eq!((m.cpus[1].irq_stolen, m.cpus[2].irq_stolen), (whole + t1, whole + t2));
        let mut m = machine(Some(3));
        send(&mut m, &[1, 2]);
        let one = alone.entry + alone.dispatch + alone.exit;
        assert_eq!((m.cpus[1].irq_stolen, m.cpus[2].irq_stolen), (one + t1, whole + t2), "CPU 1's sibling is idle");
    }

    #[test]
    fn a_whole_asid_message_costs_every_receiver_more_than_a_by_va_one() {
        let c = preset::named("emag").costs;
        assert!(c.dvm.dvm_process_asid > c.dvm.dvm_process);
        let mut m = machine(10_000_000);
        let by_va = broadcast_and_sync(&mut m, Tlbi::Va { asid: asid(), va: VirtAddr(0x1000) });
        let mut m = machine(10_000_000);
        let whole = broadcast_and_sync(&mut m, Tlbi::Asid(asid()));
        assert_eq!(whole - by_va, c.dvm.dvm_process_asid - c.dvm.dvm_process);
        assert_eq!(m.take_stolen(1), c.dvm.dvm_process_asid);
    }

    /// `n` CPUs of the Westmere preset (four to a socket).
    fn westmere(n: usize) -> Machine {
        let p = preset::named("westmere");
        let g = p.tlb;
        let cpus = (0..n).map(|_| Tlb::new(g.l1d_entries, g.l2_entries, g.l2_ways, g.pwc_entries));
        Machine::new(p.costs, cpus.collect(), p.cores_per_socket)
    }

    /// Returns (CPU, clock) at the entry of each handler `send` runs, in order,
    /// and the sender's clock after sending, CPU `from` sending at 0.
    fn entries_from(m: &mut Machine, from: usize, send: impl Fn(&CpuHw, &dyn Fn(&CpuHw))) -> (Vec<(usize, u64)>, u64) {
        let seen = RefCell::new(Vec::new());
        let hw = CpuHw::new(m, from, 0);
        send(&hw, &|h: &CpuHw| seen.borrow_mut().push((h.cpu().index(), h.now())));
        (seen.take(), hw.now())
    }

    /// [`entries_from`] CPU 0.
    fn entries(m: &mut Machine, send: impl Fn(&CpuHw, &dyn Fn(&CpuHw))) -> (Vec<(usize, u64)>, u64) {
        entries_from(m, 0, send)
    }

    #[test]
    fn all_but_self_is_one_write_and_a_vectored_ipi_enters_its_handler_directly() {
        let c = preset::named("westmere").costs;
        let all = CpuMask::new(4);
        all.set_all();
        let entry = c.ipi.ipi_send + c.ipi.ipi_deliver + c.exception_entry;
        let (seen, sent) = entries(&mut westmere(4), |hw, f| hw.send_ipi_all_but_self_async(f));
        assert_eq!(seen, vec![(1, entry), (2, entry), (3, entry)]);
        assert_eq!(sent, c.ipi.ipi_send);
        let (seen, sent) = entries(&mut westmere(4), |hw, f| hw.send_ipi_async(&all, f));
        let each = c.ipi.ipi_send;
        assert_eq!(seen, vec![(1, entry), (2, entry + each), (3, entry + 2 * each)]);
        assert_eq!(sent, 3 * c.ipi.ipi_send);
        // A call-function IPI also pays the generic dispatch, after the
        // sender's pushes onto the three queues (each a read and an exchange
        // of a line from memory) and the handler's take of its own.
        let mut m = westmere(4);
        let (x, take) = (m.transfer_cost(0, 0), m.transfer_cost(0, 1));
        let (seen, _) = entries(&mut m, |hw, f| hw.send_ipi(&all, f));
        assert_eq!(seen[0], (1, 6 * x + entry + take + c.ipi.ipi_handle));
    }

    #[test]
    fn a_call_function_ipi_pushes_onto_each_targets_queue_and_its_handler_takes_it() {
        let c = preset::named("westmere").costs;
        let mut m = westmere(4);
        let x = m.transfer_cost(0, 0);
        let two = CpuMask::new(4);
        two.set(CpuId(1));
        two.set(CpuId(2));
        let (seen, _) = entries(&mut m, |hw, f| hw.send_ipi(&two, f));
        // Two pushes of two moves each (lines from memory), two takes: six
        // moves; the IPIs go once the last push is done, and each handler
        // takes its queue from CPU 0 before its dispatch.
        assert_eq!(m.counters.line_transfers, 6);
        let sent = 4 * x + c.ipi.ipi_send;
        let body = c.ipi.ipi_deliver + c.exception_entry + m.transfer_cost(0, 1) + c.ipi.ipi_handle;
        assert_eq!(seen[0], (1, sent + body));
        let q1 = KLine::CallQueue(1);
        // Two CPUs push onto CPU 1's queue at once: the second's exchange waits
        // for the first's, and takes the line from it.
        let t = 100_000;
        let first = m.llist_add(2, t, q1);
        assert_eq!(first, t + m.transfer_cost(1, 2) + m.transfer_cost(1, 2), "CPU 1's take wrote the head last");
        let second = m.llist_add(3, t, q1);
        assert_eq!(second, first + m.transfer_cost(2, 3));
        // Alone, a push onto a line this CPU holds costs two hits: a load and
        // a locked exchange.
        assert_eq!(m.llist_add(3, second, q1), second + c.mem_access + c.lines.atomic_hit);
    }

    #[test]
    fn handlers_run_in_the_order_their_cpus_are_interrupted() {
        // From CPU 4, its own socket (CPUs 5..8) is interrupted first, the other later.
        let (seen, _) = entries_from(&mut westmere(8), 4, |hw, f| hw.send_ipi_all_but_self_async(f));
        let cpus: Vec<usize> = seen.iter().map(|&(c, _)| c).collect();
        assert_eq!(cpus, vec![5, 6, 7, 0, 1, 2, 3]);
        assert_eq!(seen[3].1 - seen[2].1, preset::named("westmere").costs.ipi.ipi_cross_socket);
    }

    #[test]
    fn a_call_function_request_queued_before_the_pending_handler_takes_the_queue_rides_it() {
        let c = preset::named("westmere").costs;
        let mut m = westmere(4);
        let one = CpuMask::new(4);
        one.set(CpuId(1));
        let seen = RefCell::new(Vec::new());
        let record = |h: &CpuHw| {
            seen.borrow_mut().push((h.cpu().index(), h.now()));
            h.spend(500);
        };
        CpuHw::new(&mut m, 0, 0).send_call_function_ipi_async(&one, record);
        let first = c.ipi.ipi_send + c.ipi.ipi_deliver + c.exception_entry;
        assert_eq!(seen.borrow()[0], (1, first));
        assert_eq!((m.counters.ipis_sent, m.cpus[1].csq_taken, m.cpus[1].csq_end), (1, first, first + 500));
        // CPU 2 queues on CPU 1 before that handler took the queue: no IPI, and
        // the handler runs the request after its own function.
        let hw = CpuHw::new(&mut m, 2, first - 1);
        hw.send_call_function_ipi_async(&one, record);
        assert_eq!(hw.now(), first - 1, "no interrupt-controller write");
        drop(hw);
        assert_eq!(seen.borrow()[1], (1, first + 500));
        assert_eq!((m.counters.ipis_sent, m.counters.ipis_coalesced), (1, 1));
        assert_eq!(m.cpus[1].irq_until, first + 1000 + c.exception_exit, "one exit, after both functions");
        // CPU 3 queues once the queue was taken: an IPI of its own, entered when
        // it arrives (after the first handler's exit).
        CpuHw::new(&mut m, 3, first).send_call_function_ipi_async(&one, record);
        assert_eq!(m.counters.ipis_sent, 2);
        assert!(first + c.ipi.ipi_send + c.ipi.ipi_deliver > first + 1000 + c.exception_exit);
        assert_eq!(seen.borrow()[2], (1, first + c.ipi.ipi_send + c.ipi.ipi_deliver + c.exception_entry));
    }

    #[test]
    fn a_blocking_call_function_ipi_rides_a_pending_handler_too_but_a_vectored_one_never_does() {
        let mut m = westmere(3);
        let one = CpuMask::new(3);
        one.set(CpuId(1));
        CpuHw::new(&mut m, 0, 0).send_ipi(&one, |_| {});
        CpuHw::new(&mut m, 2, 1).send_ipi(&one, |_| {});
        assert_eq!((m.counters.ipis_sent, m.counters.ipis_coalesced), (1, 1));
        CpuHw::new(&mut m, 2, 2).send_ipi_async(&one, |_| {});
        assert_eq!((m.counters.ipis_sent, m.counters.ipis_coalesced), (2, 1));
    }

    /// Returns when CPU 0 of a 40-CPU socket (x2APIC clusters of 16) is done
    /// sending a call-function IPI to `targets`.
    fn sent_to(targets: impl IntoIterator<Item = usize>) -> u64 {
        let p = preset::named("icx8358");
        let g = p.tlb;
        let cpus = (0..40).map(|_| Tlb::new(g.l1d_entries, g.l2_entries, g.l2_ways, g.pwc_entries));
        let mut m = Machine::new(p.costs, cpus.collect(), 40);
        let mask = CpuMask::new(40);
        targets.into_iter().for_each(|t| mask.set(CpuId(t as u32)));
        let hw = CpuHw::new(&mut m, 0, 0);
        hw.send_call_function_ipi_async(&mask, |_| {});
        hw.now()
    }

    #[test]
    fn a_call_function_ipi_is_one_write_per_x2apic_cluster_or_one_for_every_other_cpu() {
        let send = preset::named("icx8358").costs.ipi.ipi_send;
        assert_eq!(preset::named("icx8358").costs.ipi.ipi_cluster, 16);
        assert_eq!(sent_to([5]), send);
        assert_eq!(sent_to(1..16), send, "one cluster");
        assert_eq!(sent_to([3, 17, 18, 39]), 3 * send, "three clusters");
        assert_eq!(sent_to(1..39), 3 * send, "every cluster, one CPU left out");
        assert_eq!(sent_to(1..40), send, "every other CPU: the shorthand");
        // arm64's presets have neither: one write per target.
        let a = preset::named("altra").costs;
        assert_eq!((a.ipi.ipi_cluster, a.ipi.ipi_shorthand), (0, false));
    }

    #[test]
    fn a_walk_of_loads_overlaps_them_up_to_the_fill_buffers() {
        let mut m = westmere(4);
        m.costs.mlp = 4;
        assert_eq!(m.walk_time([]), 0);
        // Ten loads of 100 cycles: three rounds of at most four.
        assert_eq!(m.walk_time([(10, 100)]), 300);
        assert_eq!(m.walk_time([(4, 100)]), 100);
        // Runs of different costs, in issue order: two loads of 50 start at 0,
        // five of 100 at 0, 0, 50, 50 and 100 (the first buffer free again).
        assert_eq!(m.walk_time([(2, 50), (5, 100)]), 200);
        // The order matters: the cheap loads after the dear ones wait for them.
        assert_eq!(m.walk_time([(5, 100), (2, 50)]), 200);
        assert_eq!(m.walk_time([(4, 100), (2, 50)]), 150);
        // One fill buffer: one load after another.
        m.costs.mlp = 1;
        assert_eq!(m.walk_time([(2, 50), (5, 100), (1, 7)]), 607);
        // Agrees with the CPU's own walk of the same lines (three flags other
        // CPUs wrote, each one transfer away).
        for mlp in 1..=3 {
            let mut m = flags_written(mlp);
            let hw = CpuHw::new(&mut m, 0, 1000);
            for f in FLAGS {
                hw.shared(f, Access::ReadAhead);
            }
            let took = hw.now() - 1000;
            drop(hw);
            let line = m.transfer_cost(1, 0);
            assert_eq!(took, m.walk_time([(3, line)]), "mlp {mlp}");
        }
    }

    /// The three flags CPUs 1..=3 write, one line each.
    const FLAGS: [usize; 3] = [0x1000, 0x2000, 0x3000];

    /// A four-CPU machine with `mlp` fill buffers on which CPUs 1..=3 have each
    /// written their own flag at time 0.
    fn flags_written(mlp: u64) -> Machine {
        let mut m = westmere(4);
        m.costs.mlp = mlp;
        for (i, &f) in FLAGS.iter().enumerate() {
            CpuHw::new(&mut m, i + 1, 0).shared(f, Access::Write);
        }
        m
    }

    /// Returns when CPU 0, starting at 1000, has read the three flags, in its
    /// sync phase or not.
    fn read_three_flags(sync: bool) -> u64 {
        let mut m = flags_written(preset::named("westmere").costs.mlp);
        let hw = CpuHw::new(&mut m, 0, 1000);
        if sync {
            hw.phase(Phase::Issue);
            hw.phase(Phase::Sync);
        }
        for f in FLAGS {
            hw.shared(f, Access::Read);
        }
        hw.now()
    }

    #[test]
    fn polls_of_the_sync_phase_overlap_after_the_first() {
        let t = preset::named("westmere").costs.lines.cacheline_transfer;
        assert_eq!(read_three_flags(false), 1000 + 3 * t, "one after another");
        assert_eq!(read_three_flags(true), 1000 + 2 * t, "the first, then the other two together");
    }

    /// Returns when CPU 0, starting at 1000 with `mlp` fill buffers, has read
    /// the three flags as a walk, with `between` after the first.
    fn walk_three_flags(mlp: u64, between: impl Fn(&CpuHw)) -> u64 {
        let mut m = flags_written(mlp);
        let hw = CpuHw::new(&mut m, 0, 1000);
        hw.shared(FLAGS[0], Access::ReadAhead);
        between(&hw);
        for f in &FLAGS[1..] {
            hw.shared(*f, Access::ReadAhead);
        }
        hw.now()
    }

    #[test]
    fn a_walks_loads_overlap_from_the_first_until_the_cpu_does_something_else() {
        let c = preset::named("westmere").costs;
        let t = c.lines.cacheline_transfer;
        assert_eq!(walk_three_flags(3, |_| {}), 1000 + t, "all three in flight together");
        assert_eq!(walk_three_flags(2, |_| {}), 1000 + 2 * t, "two, then the third in the first's buffer");
        assert_eq!(walk_three_flags(1, |_| {}), 1000 + 3 * t, "one buffer: one at a time, as plain loads");
        let invlpg = Tlbi::Va { asid: Asid::new(1, 12).unwrap(), va: VirtAddr(0x1000) };
        let tlbi = walk_three_flags(3, |hw| hw.tlbi(invlpg, Scope::Local));
        assert_eq!(tlbi, 1000 + t + c.local.tlbi_local_va + t, "an INVLPG ends the walk: the first, then the rest");
        let store = walk_three_flags(3, |hw| hw.shared(0x8000, Access::Write));
        assert!(store > 1000 + t + t, "a store ends it too: {store}");
    }

    #[test]
    fn a_walks_index_holds_back_the_loads_after_it_and_waits_for_none_before_it() {
        let t = preset::named("westmere").costs.lines.cacheline_transfer;
        let mut m = flags_written(3);
        let hw = CpuHw::new(&mut m, 0, 1000);
        hw.shared(FLAGS[0], Access::ReadAhead);
        hw.shared(FLAGS[1], Access::ReadAheadIndex);
        assert_eq!(hw.now(), 1000 + t, "the index went with the load before it");
        hw.shared(FLAGS[2], Access::ReadAhead);
        assert_eq!(hw.now(), 1000 + 2 * t, "the load after it waited for it");
    }

    /// CPU 0 owns a counter and sends an IPI whose handlers (CPUs 1..=3) each
    /// increment it, then polls it; returns when its poll sees the last increment.
    fn count_three(spin: bool) -> u64 {
        let mut m = westmere(4);
        let counter = 0x4000;
        CpuHw::new(&mut m, 0, 0).shared(counter, Access::Write);
        let hw = CpuHw::new(&mut m, 0, 1000);
        if spin {
            hw.spin_on(counter);
        }
        hw.send_ipi_all_but_self_async(|h| h.shared(counter, Access::Rmw));
        hw.shared(counter, Access::Read);
        hw.now()
    }

    #[test]
    fn a_spinning_initiator_takes_the_counter_back_after_every_increment() {
        let c = preset::named("westmere").costs;
        let (t, mem) = (c.lines.cacheline_transfer, c.mem_access);
        let entry = 1000 + c.ipi.ipi_send + c.ipi.ipi_deliver + c.exception_entry;
        // Three increments back to back, then the poll's own move.
        assert_eq!(count_three(false), entry + 3 * t + t);
        // Each increment is followed by the spinner's move; the poll then hits.
        assert_eq!(count_three(true), entry + 6 * t + mem);
    }

    /// `n` CPUs of the Altra preset, `cores_per_socket` to a socket, all idle.
    fn altra(n: usize, cores_per_socket: usize) -> Machine {
        let p = preset::named("altra");
        let g = p.tlb;
        let cpus = (0..n).map(|_| Tlb::new(g.l1d_entries, g.l2_entries, g.l2_ways, g.pwc_entries));
        Machine::new(p.costs, cpus.collect(), cores_per_socket)
    }

    /// The Altra costs with limits on broadcasts in flight, which no preset sets
    /// today: four per requester (of two cores) and four in the nodes' tracker.
    fn limited_costs() -> Costs {
        let mut c = preset::named("altra").costs;
        (c.dvm.dvm_issuer_outstanding, c.dvm.dvm_node_outstanding) = (4, 4);
        c
    }

    /// `n` CPUs of [`limited_costs`], `cores_per_socket` to a socket, all idle.
    fn altra_limited(n: usize, cores_per_socket: usize) -> Machine {
        let p = preset::named("altra");
        let g = p.tlb;
        let cpus = (0..n).map(|_| Tlb::new(g.l1d_entries, g.l2_entries, g.l2_ways, g.pwc_entries));
        Machine::new(limited_costs(), cpus.collect(), cores_per_socket)
    }

    /// CPU `cpu` broadcasts a by-VA TLBI at `t` and waits for it; returns when its DSB completes.
    fn sync_from(m: &mut Machine, cpu: usize, t: u64) -> u64 {
        let hw = CpuHw::new(m, cpu, t);
        hw.tlbi(Tlbi::Va { asid: asid(), va: VirtAddr(0x1000) }, Scope::Broadcast);
        hw.barrier(Barrier::Dsb(Domain::InnerShareable));
        hw.now()
    }

    #[test]
    fn an_uncontended_broadcast_costs_issue_two_hops_processing_and_the_dsb() {
        // As before the interconnect's limits: one socket, nothing in flight.
        let c = preset::named("altra").costs;
        let done = sync_from(&mut altra(8, 80), 0, 0);
        assert_eq!(done, c.dvm.tlbi_bcast_issue + 2 * c.dvm.dvm_hop + c.dvm.dvm_process + c.dsb);
    }

    #[test]
    fn broadcast_completion_grows_with_broadcasts_in_flight() {
        // Sixteen CPUs each broadcast at 0: each waits behind the others at
        // every receiver, and once the nodes' tracker is full, for an entry.
        let c = limited_costs();
        let mut m = altra_limited(16, 80);
        let done: Vec<u64> = (0..16).map(|cpu| sync_from(&mut m, cpu, 0)).collect();
        assert!(done.windows(2).all(|w| w[1] > w[0]), "{done:?}");
        let alone = sync_from(&mut altra_limited(16, 80), 0, 0);
        let tracked = c.dvm.dvm_node_outstanding as usize;
        // It is dispatched when the first completes (its DSB aside), then
        // takes an uncontended broadcast's time (its issue aside).
        assert_eq!(
            done[tracked],
            (done[0] - c.dsb) + (alone - c.dvm.tlbi_bcast_issue),
            "the first beyond the tracker waits for the first's completion: {done:?}"
        );
    }

    #[test]
    fn a_per_issuer_limit_makes_a_cpus_next_broadcast_wait() {
        let c = limited_costs();
        let limit = c.dvm.dvm_issuer_outstanding;
        let mut m = altra_limited(4, 80);
        let hw = CpuHw::new(&mut m, 0, 0);
        let op = Tlbi::Va { asid: asid(), va: VirtAddr(0x1000) };
        for _ in 0..limit {
            hw.tlbi(op, Scope::Broadcast);
        }
        assert_eq!(hw.now(), limit * c.dvm.tlbi_bcast_issue, "within the limit each costs its issue");
        hw.tlbi(op, Scope::Broadcast);
        let first_done = c.dvm.tlbi_bcast_issue + 2 * c.dvm.dvm_hop + c.dvm.dvm_process;
        assert_eq!(hw.now(), first_done + c.dvm.tlbi_bcast_issue, "the next waits for the first to complete");
    }

    #[test]
    fn a_machine_of_more_sockets_completes_a_broadcast_later() {
        // Two sockets and four: the cross-socket hops are the same, but the
        // issuer's node collects the completion of each other node.
        let c = preset::named("altra").costs;
        let two = sync_from(&mut altra(160, 80), 0, 0);
        let four = sync_from(&mut altra(320, 80), 0, 0);
        assert_eq!(four - two, 2 * c.dvm.dvm_node_process);
        assert!(two > sync_from(&mut altra(80, 80), 0, 0));
    }

    #[test]
    fn concurrent_broadcasts_queue_at_each_receiver() {
        let c = preset::named("emag").costs;
        let mut m = machine(0);
        let op = Tlbi::Asid(asid());
        let first = broadcast_and_sync(&mut m, op);
        // A second message issued at the same time waits behind the first at every CPU.
        let second = broadcast_and_sync(&mut m, op);
        assert_eq!(second - first, c.dvm.dvm_process_asid);
    }
}
