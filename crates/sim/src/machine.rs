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
//! A broadcast TLBI is one DVM message to every CPU. Each CPU processes incoming
//! messages one at a time (each socket's queue: [`crate::stalls`]), so a message
//! waits behind those of other broadcasters: latency grows with the number of
//! CPUs broadcasting at the same time. A by-VA message costs a receiver
//! `dvm_process`, a whole-ASID or whole-TLB one `dvm_process_asid`, and a
//! receiver that is running something loses that time (`stolen`), as a
//! ThunderX2 running Himeno lost 29% of its speed to one other core's
//! `mprotect` loop (seed 001's thread). A message to another socket pays
//! `dvm_cross_socket` each way. The issuing CPU's `DSB ISH` completes when the
//! last acknowledgement is back.
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
//! after the delivery latency (more across sockets) and once its previous handler
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
//! # Coherence
//! A policy's shared variables live in cache lines (by address, 64 bytes). A write
//! or atomic by a CPU that does not hold the line alone, or a read by a CPU
//! without a copy, moves the line (`cacheline_transfer`, more across sockets). A
//! plain store waits in the store buffer, not in the CPU, and later stores by the
//! same CPU ride on the same move.
//!
//! Accesses reach the machine in the order the simulator runs code, which is not
//! the order of simulated time: the handlers of one IPI run one after another,
//! each to its end, although they run at the same time on their CPUs. So each
//! line keeps a short history in simulated time: who owned it from when, which
//! CPUs read each version, and the intervals in which it was moving. An access is
//! placed at its own time in that history:
//! - a read costs a transfer from the owner of the version it finds (nothing if
//!   the CPU already holds that version); reads of one version do not wait for
//!   one another, only for a move in progress;
//! - a write or atomic waits for the first gap in which the line is not moving,
//!   one move at a time per line;
//! - an access never completes before the latest write to the *same variable*
//!   that ran before it in simulator order is visible: what it reads or
//!   overwrites is that write's value. (A spin lock's acquisition therefore
//!   waits for the previous holder's release.)
//!
//! So a counter every IPI handler increments is a queue of moves while the
//! handlers' reads of the request beside it overlap, and per-CPU flags are not a
//! queue at all. A CPU that announced it spins on a line while its IPIs are
//! handled ([`Hw::spin_on`]) asks for the line again as soon as a write takes it
//! away, and has it back before the next writer: every other CPU's write to that
//! line costs one more move. (This is the most the spinner can cost the writers:
//! with arbitration that serves requests strictly in the order they are made, a
//! writer already waiting would go first. The seed-003 notes in
//! `docs/costs/westmere.md` give both.)
//!
//! # The sync phase
//! In a shootdown's sync phase (between [`Phase::Sync`] and [`Phase::Done`]) the
//! initiating CPU only waits: it polls one acknowledgement after another in a loop
//! whose exit the core predicts, and the address of each poll does not depend on
//! the value of the one before. So once its first poll has returned, the core has
//! the loads of the following ones in flight together, up to `mlp` of them (the
//! fill buffers), instead of one after another.
//!
//! Time an IPI handler spends in TLB operations counts as *invalidating*, time in
//! shared-line accesses as *synchronising*.

use crate::holders::{Holders, Still};
use crate::pagetable::TableRef;
use crate::preset::Costs;
use crate::stalls::Stalls;
use crate::tlb::{Inval, Tlb, TlbEntry};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use tlbkit_policy::{
    Access, Asid, Barrier, CpuId, CpuMask, Domain, FlushTicket, Hw, MmId, Note, Phase, Root, Scope, Tlbi,
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

/// One version of a cache line: written by one CPU, read by others until the next
/// write.
#[derive(Clone, Debug)]
struct Version {
    /// When the write that made it completed (0 for the line's first version).
    at: u64,
    /// The CPU that wrote it; `None` for the line's first version (from memory).
    writer: Option<u32>,
    /// CPUs that read it, each with when its copy arrived.
    readers: Vec<(u32, u64)>,
}

/// An interval in which a line moves, to a new owner or back to a CPU spinning on it.
#[derive(Clone, Copy, Debug)]
struct Move {
    start: u64,
    end: u64,
}

/// How many versions and moves a line remembers. The simulator runs policy calls
/// in the order they start, so an access lands among the last few; older history
/// is dropped.
const LINE_HISTORY: usize = 64;

/// One cache line of policy state: its recent history in simulated time.
#[derive(Clone, Debug)]
struct Line {
    /// Versions, oldest first, by `at`; never empty.
    versions: Vec<Version>,
    /// Moves, by start; no two overlap.
    moves: Vec<Move>,
    /// Per variable on the line (by address): when its latest write, in the order
    /// the simulator ran them, was visible.
    vars: Vec<(usize, u64)>,
    /// The CPU spinning on the line and since when, while its handlers run.
    spinner: Option<(u32, u64)>,
}

impl Default for Line {
    fn default() -> Self {
        Line {
            versions: vec![Version { at: 0, writer: None, readers: Vec::new() }],
            moves: Vec::new(),
            vars: Vec::new(),
            spinner: None,
        }
    }
}

impl Line {
    /// Returns the index of the version current at `t`.
    fn version_at(&self, t: u64) -> usize {
        self.versions.partition_point(|v| v.at <= t).saturating_sub(1)
    }

    /// Returns the end of the move in progress at `t`, if any.
    fn moving_at(&self, t: u64) -> Option<u64> {
        self.moves.iter().find(|m| m.start <= t && t < m.end).map(|m| m.end)
    }

    /// Returns the end of a move to `cpu` in progress at `t`, if any: its stores
    /// wait for that one in the store buffer and need no move of their own.
    fn moving_to(&self, cpu: u32, t: u64) -> Option<u64> {
        let end = self.moving_at(t)?;
        let v = &self.versions[self.version_at(end)];
        (v.at == end && v.writer == Some(cpu)).then_some(end)
    }

    /// Returns when the latest write to variable `addr` was visible (0 if none).
    fn visible(&self, addr: usize) -> u64 {
        self.vars.iter().find(|&&(a, _)| a == addr).map_or(0, |&(_, t)| t)
    }

    /// Records that a write to `addr` is visible at `t`.
    fn set_visible(&mut self, addr: usize, t: u64) {
        match self.vars.iter_mut().find(|(a, _)| *a == addr) {
            Some(v) => v.1 = v.1.max(t),
            None => self.vars.push((addr, t)),
        }
    }

    /// Returns the first start from `t` on of a move lasting `d` that overlaps no
    /// other move.
    fn gap(&self, t: u64, d: u64) -> u64 {
        let mut s = t;
        for m in &self.moves {
            if m.end <= s {
                continue;
            }
            if m.start >= s + d {
                break;
            }
            s = m.end;
        }
        s
    }

    /// Inserts `m` in start order.
    fn insert_move(&mut self, m: Move) {
        let i = self.moves.partition_point(|x| x.start <= m.start);
        self.moves.insert(i, m);
        if self.moves.len() > LINE_HISTORY {
            self.moves.remove(0);
        }
    }

    /// Inserts a version written by `writer` and complete at `at`; returns its index.
    fn insert_version(&mut self, at: u64, writer: u32) -> usize {
        let i = self.versions.partition_point(|v| v.at <= at);
        self.versions.insert(i, Version { at, writer: Some(writer), readers: Vec::new() });
        if self.versions.len() > LINE_HISTORY {
            // Drop the oldest version other than this one.
            let oldest = usize::from(i == 0);
            self.versions.remove(oldest);
            if oldest < i {
                return i - 1;
            }
        }
        i
    }

    /// Performs `access` by CPU `me` at `t` on the variable at `addr` of this line,
    /// a line move from CPU `a` to CPU `b` costing `cost(a, b)` (`a` is `None` for
    /// memory) and a hit `mem`. Returns when the access is done and how many moves
    /// it caused.
    fn access(
        &mut self,
        me: u32,
        t_in: u64,
        addr: usize,
        access: Access,
        mem: u64,
        cost: impl Fn(Option<u32>, u32) -> u64,
    ) -> (u64, u64) {
        // What this access reads or overwrites is the latest write to the variable.
        let t = t_in.max(self.visible(addr));
        // A line in motion is nobody's to use until it arrives.
        let moving = self.moving_at(t);
        match access {
            Access::Read => {
                let t = moving.unwrap_or(t);
                let v = self.version_at(t);
                let version = &self.versions[v];
                if version.writer == Some(me) || version.readers.iter().any(|&(r, at)| r == me && at <= t) {
                    return (t + mem, 0);
                }
                let end = t + cost(version.writer, me);
                self.versions[v].readers.push((me, end));
                (end, 1)
            }
            Access::Write | Access::Rmw => {
                let store = access == Access::Write;
                // Behind a move to this CPU already under way, the access rides on it.
                if let Some(end) = self.moving_to(me, t) {
                    self.set_visible(addr, end + mem);
                    return (if store { t_in } else { end } + mem, 0);
                }
                let version = &self.versions[self.version_at(t)];
                if moving.is_none()
                    && version.writer == Some(me)
                    && version.readers.iter().all(|&(r, at)| r == me || at > t)
                {
                    self.set_visible(addr, t + mem);
                    // A plain store retires into the store buffer without waiting.
                    return (if store { t_in } else { t } + mem, 0);
                }
                let start = self.gap(t, cost(version.writer, me));
                let end = start + cost(self.versions[self.version_at(start)].writer, me);
                self.insert_move(Move { start, end });
                let nv = self.insert_version(end, me);
                self.set_visible(addr, end);
                let mut moves = 1;
                // A CPU spinning on the line asks for it back as soon as it loses it,
                // and has it back before the next writer.
                if let Some((spinner, _)) = self.spinner.filter(|&(sp, since)| sp != me && since <= start) {
                    let back = cost(Some(me), spinner);
                    let s = self.gap(end, back);
                    self.insert_move(Move { start: s, end: s + back });
                    self.versions[nv].readers.push((spinner, s + back));
                    moves += 1;
                }
                // A plain store retires into the store buffer: the writer goes on
                // while the line moves, and readers of the variable wait for it.
                (if store { t_in + mem } else { end }, moves)
            }
        }
    }
}

/// One CPU's translation state.
pub struct CpuState {
    /// The CPU's TLBs.
    pub tlb: Tlb,
    /// What TTBR0/CR3 points at (written only by [`Hw::write_root`], which keeps
    /// [`Machine::roots_on`] in step).
    pub root: Root,
    /// The ASID/PCID in the root register.
    pub asid: u16,
    /// When every broadcast invalidation this CPU issued is acknowledged.
    pub sync_until: u64,
    /// When the CPU's current operation ends (kept by the engine through
    /// [`Machine::set_busy_until`]).
    pub busy_until: u64,
    /// When the last IPI handler that interrupted this CPU returned.
    pub irq_until: u64,
    /// Cycles IPI handlers and incoming DVM messages took from the operation the CPU
    /// was running (the DVM messages' only once [`Machine::take_stolen`] settles them).
    pub stolen: u64,
    /// Whether a thread runs here (kept by the engine after each event): its next
    /// operation has begun at `busy_until` as far as an interrupt is concerned, so
    /// a handler arriving later takes its time from that operation instead of
    /// holding the operation back until the handler's end.
    pub running: bool,
}

impl CpuState {
    /// Returns a CPU with empty TLBs, its root on the kernel's tables.
    pub fn new(tlb: Tlb) -> Self {
        CpuState {
            tlb,
            root: boot_root(),
            asid: 0,
            sync_until: 0,
            busy_until: 0,
            irq_until: 0,
            stolen: 0,
            running: false,
        }
    }
}

/// Hardware state shared by all CPUs.
pub struct Machine {
    /// Cost table.
    pub costs: Costs,
    /// CPU states, by CPU number.
    pub cpus: Vec<CpuState>,
    /// Cores per socket (for cross-socket latencies).
    pub cores_per_socket: usize,
    /// Cores per L3 domain (AMD CCX), for cross-CCX cache-line transfers.
    pub cores_per_ccx: usize,
    /// Cycles in a millisecond (one jiffy at `HZ` = 1000), for [`Hw::jiffies`].
    cycles_per_ms: u64,
    /// Which CPUs' TLBs a broadcast invalidation must visit.
    holders: Holders,
    /// The DVM queues, and the stalls of running receivers, charged lazily.
    stalls: Stalls,
    /// Counters.
    pub counters: HwCounters,
    /// Cache lines of policy state, by address / 64 (looked up, never iterated).
    lines: HashMap<usize, Line, BuildHasherDefault<std::collections::hash_map::DefaultHasher>>,
    /// Per address-space slot: how many CPUs' roots point at it.
    root_refs: Vec<u32>,
    /// How many times a slot's count in `root_refs` fell to zero.
    root_releases: u64,
    /// Lazy flushes ([`Hw::defer_flush`]).
    pub lazy: LazyFlushes,
}

/// The kernel's side of lazy flushes: whether the flush running now may be
/// deferred, the tickets handed out, and the completions to act on.
#[derive(Debug, Default)]
pub struct LazyFlushes {
    /// Set by the kernel around a flush it lets complete late (`munmap`,
    /// `madvise(MADV_DONTNEED)`); cleared when a ticket is handed out.
    pub allowed: bool,
    /// The ticket handed out during the current flush, if any.
    pub taken: Option<u32>,
    /// Tickets in use (handed out, not yet completed).
    pub in_use: std::collections::BTreeSet<u32>,
    /// Tickets completed since the kernel last looked, in order.
    pub completed: Vec<u32>,
}

impl Machine {
    /// Returns a machine of `cpus` with the given costs and topology.
    pub fn new(costs: Costs, cpus: Vec<CpuState>, cores_per_socket: usize) -> Self {
        let n = cpus.len();
        let mut m = Machine {
            costs,
            cpus: Vec::new(),
            cores_per_socket,
            cores_per_ccx: cores_per_socket,
            cycles_per_ms: 1_000_000,
            holders: Holders::new(n),
            stalls: Stalls::new(n, cores_per_socket),
            counters: HwCounters::default(),
            lines: HashMap::default(),
            root_refs: Vec::new(),
            root_releases: 0,
            lazy: LazyFlushes::default(),
        };
        for c in &cpus {
            m.root_ref(c.root);
        }
        m.cpus = cpus;
        m
    }

    /// Returns this machine with `cores_per_ccx` cores to an L3 domain (at most a
    /// socket's).
    pub fn with_ccx(mut self, cores_per_ccx: usize) -> Self {
        self.cores_per_ccx = cores_per_ccx.clamp(1, self.cores_per_socket.max(1));
        self
    }

    /// Applies `op` to every TLB that may hold what it removes.
    fn broadcast_inval(&mut self, op: Inval) {
        let n = self.cpus.len();
        if cfg!(debug_assertions) {
            for cpu in 0..n {
                debug_assert!(
                    self.holders.is_candidate(cpu, op) || !self.cpus[cpu].tlb.may_hold_any(op),
                    "cpu{cpu} may hold what {op:?} removes but is not a candidate: a TLB fill bypassed Machine::fill"
                );
            }
        }
        let cpus = &mut self.cpus;
        self.holders.candidates(n, op, |cpu| {
            let tlb = &mut cpus[cpu].tlb;
            tlb.invalidate(op);
            let (asid, block) = match op {
                Inval::Va { asid, va } => (tlb.may_hold(asid), tlb.may_hold_block(va)),
                Inval::VaAll { va } => (true, tlb.may_hold_block(va)),
                Inval::Asid(asid) => (tlb.may_hold(asid), true),
                Inval::All | Inval::AllNonGlobal => (true, true),
            };
            Still { asid, block }
        });
    }

    /// Returns this machine with a clock of `freq_ghz` (1 GHz unless set), which
    /// only [`Hw::jiffies`] reads: every cost is in cycles.
    pub fn with_clock(mut self, freq_ghz: f64) -> Self {
        self.cycles_per_ms = ((freq_ghz * 1e6).round() as u64).max(1);
        self
    }

    /// Returns what moving a cache line from CPU `a` to CPU `b` costs.
    pub(crate) fn transfer_cost(&self, a: usize, b: usize) -> u64 {
        transfer_cost(&self.costs, self.cores_per_socket, self.cores_per_ccx, a, b)
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

    /// Performs `access` by `cpu` at `t` on the shared variable at `addr`; returns
    /// when it is done (see the module docs, "Coherence").
    fn line_access(&mut self, cpu: usize, t: u64, addr: usize, access: Access) -> u64 {
        let c = self.costs;
        let (cps, ccx) = (self.cores_per_socket, self.cores_per_ccx);
        let cost = |from: Option<u32>, to: u32| transfer_cost(&c, cps, ccx, from.unwrap_or(to) as usize, to as usize);
        let line = self.lines.entry(addr / 64).or_default();
        let (done, moves) = line.access(cpu as u32, t, addr, access, c.mem_access, cost);
        self.counters.line_transfers += moves;
        done
    }

    /// Makes `cpu` spin on the line holding `addr` from `since` (`None`: stop).
    fn set_spinner(&mut self, addr: usize, spinner: Option<(usize, u64)>) {
        let line = self.lines.entry(addr / 64).or_default();
        line.spinner = spinner.map(|(c, t)| (c as u32, t));
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

    /// Fills walked translation `e` into `cpu`'s TLB (see [`Tlb::fill`]).
    #[inline]
    pub fn fill(&mut self, cpu: usize, e: TlbEntry, speculative: bool) {
        self.holders.filled(cpu, (!e.global()).then_some(e.asid), e.va());
        self.cpus[cpu].tlb.fill(e, speculative);
    }

    /// Caches the level-2 descriptor for `va` in `cpu`'s walk cache (see [`Tlb::pwc_fill`]).
    #[inline]
    pub fn pwc_fill(&mut self, cpu: usize, va: u64, asid: u16, global: bool, table: TableRef, mm_uid: u32) {
        self.holders.filled(cpu, (!global).then_some(asid), va);
        self.cpus[cpu].tlb.pwc_fill(va, asid, global, table, mm_uid);
    }

    /// Returns whether CPUs `a` and `b` are on different sockets.
    pub fn cross_socket(&self, a: usize, b: usize) -> bool {
        a / self.cores_per_socket != b / self.cores_per_socket
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

    /// Sends one DVM message (or `INVLPGB`) from `from` at `t`; returns when its
    /// last acknowledgement is back.
    fn broadcast(&mut self, from: usize, t: u64, op: Tlbi) -> u64 {
        let c = self.costs;
        let process = match op {
            Tlbi::Va { .. } | Tlbi::VaAllAsids { .. } | Tlbi::Range { .. } => c.dvm_process,
            Tlbi::Asid(_) | Tlbi::All | Tlbi::AllNonGlobal => c.dvm_process_asid,
        };
        Self::tlb_ops(op, |inv| self.broadcast_inval(inv));
        // Every message, the issuer's own included, goes out to the interconnect
        // and its completion comes back through it (the DVM sync of DSB ISH). A
        // receiver that is running something stalls while its TLBs are
        // invalidated (the issuer is waiting in its DSB anyway).
        self.stalls.broadcast(from, t, process, c.dvm_hop, c.dvm_cross_socket, &mut self.cpus)
    }
}

/// Returns what moving a cache line from CPU `a` to CPU `b` costs: within an L3
/// domain (`cores_per_ccx` cores), across domains of a socket, or across sockets.
fn transfer_cost(c: &Costs, cores_per_socket: usize, cores_per_ccx: usize, a: usize, b: usize) -> u64 {
    let (cps, ccx) = (cores_per_socket.max(1), cores_per_ccx.max(1));
    let mut cost = c.cacheline_transfer;
    if a / ccx != b / ccx {
        cost += c.cacheline_cross_ccx;
    }
    if a / cps != b / cps {
        cost += c.cacheline_cross_socket;
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
        }
    }

    /// Returns the CPU's clock after what was done through this interface.
    pub fn now(&self) -> u64 {
        self.now.get()
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
    /// CPUs are interrupted (then by CPU number).
    fn deliver<F: Fn(&Self)>(&self, targets: &CpuMask, kind: IpiKind, handler: F) -> (u64, u64) {
        let shorthand = kind == IpiKind::VectorAllButSelf;
        let dispatch = if kind == IpiKind::CallFunction { self.m.borrow().costs.ipi_handle } else { 0 };
        let me = self.cpu.get();
        let c = self.m.borrow().costs;
        let mut sent = self.now.get();
        let mut list = Vec::new();
        {
            let mut m = self.m.borrow_mut();
            if shorthand {
                sent += c.ipi_send;
            }
            targets.for_each(|t| {
                let target = t.index();
                if target == me {
                    return;
                }
                if !shorthand {
                    sent += c.ipi_send;
                }
                m.counters.ipis_sent += 1;
                let cross = m.cross_socket(me, target);
                let arrive = sent + c.ipi_deliver + if cross { c.ipi_cross_socket } else { 0 };
                list.push((arrive.max(m.cpus[target].irq_until), target));
            });
        }
        list.sort_unstable();
        // The sender spins from its last interrupt-controller write on.
        if let Some(addr) = self.spin.take() {
            self.m.borrow_mut().set_spinner(addr, Some((me, sent)));
            self.spinning.set(Some(addr));
        }
        let mut done = sent;
        for (arrive, target) in list {
            let ack = self.m.borrow().transfer_cost(me, target);
            self.cpu.set(target);
            self.in_irq.set(true);
            self.now.set(arrive + c.exception_entry + dispatch);
            handler(self);
            self.in_irq.set(false);
            let end = self.now.get() + c.exception_exit;
            {
                let mut m = self.m.borrow_mut();
                m.counters.ipi_handler_cycles += end - arrive;
                let st = &mut m.cpus[target];
                st.irq_until = end;
                // A running CPU loses the handler's time from what it runs, whether
                // the interrupt lands in the operation the engine last ran there or
                // in the next one (which runs from `busy_until` on).
                if st.busy_until > arrive || st.running {
                    st.stolen += end - arrive;
                }
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
        let mut m = self.m.borrow_mut();
        let mut cost = m.costs.root_write;
        let old = std::mem::replace(&mut m.cpus[self.cpu.get()].root, root);
        m.root_ref(root);
        m.root_unref(old);
        let st = &mut m.cpus[self.cpu.get()];
        st.asid = asid.get();
        if !noflush {
            st.tlb.invalidate(Inval::Asid(asid.get()));
            m.counters.local_invalidations += 1;
            m.counters.full_flushes += 1;
            cost += m.costs.root_write_flush;
        }
        drop(m);
        self.spend_tlb(cost);
    }

    fn tlbi(&self, op: Tlbi, scope: Scope) {
        let mut m = self.m.borrow_mut();
        let c = m.costs;
        let whole = matches!(op, Tlbi::Asid(_) | Tlbi::All | Tlbi::AllNonGlobal);
        if whole {
            m.counters.full_flushes += 1;
        }
        match scope {
            Scope::Local => {
                m.counters.local_invalidations += 1;
                let tlb = &mut m.cpus[self.cpu.get()].tlb;
                Machine::tlb_ops(op, |inv| {
                    tlb.invalidate(inv);
                });
                // A local range is one instruction (arm64 `TLBI RVAE1`).
                let cost = match op {
                    Tlbi::Va { .. } | Tlbi::VaAllAsids { .. } | Tlbi::Range { .. } => c.tlbi_local_va,
                    Tlbi::Asid(_) => c.tlbi_local_asid,
                    Tlbi::All | Tlbi::AllNonGlobal => c.tlbi_local_all,
                };
                drop(m);
                self.spend_tlb(cost);
            }
            Scope::Broadcast => {
                m.counters.broadcast_invalidations += 1;
                let t = self.now.get() + c.tlbi_bcast_issue;
                let acked = m.broadcast(self.cpu.get(), t, op);
                let st = &mut m.cpus[self.cpu.get()];
                st.sync_until = st.sync_until.max(acked);
                drop(m);
                self.spend_tlb(c.tlbi_bcast_issue);
            }
        }
    }

    fn barrier(&self, b: Barrier) {
        let m = self.m.borrow();
        let c = m.costs;
        match b {
            Barrier::Dsb(Domain::InnerShareable) | Barrier::TlbSync => {
                let until = m.cpus[self.cpu.get()].sync_until;
                drop(m);
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

    fn send_ipi_all_but_self_async<F: Fn(&Self)>(&self, handler: F) {
        let all = CpuMask::new(self.ncpus());
        all.set_all();
        let (sent, _) = self.deliver(&all, IpiKind::VectorAllButSelf, handler);
        self.now.set(sent);
    }

    fn shared(&self, addr: usize, access: Access) {
        let now = self.now.get();
        // In the sync phase a poll after the first is issued when the first returned,
        // once an earlier poll has freed a fill buffer (module docs, "The sync
        // phase"); anything but a poll ends the overlap.
        let mut polls = self.polls.take().filter(|_| access == Access::Read && !self.in_irq.get());
        let t = match polls.as_deref() {
            Some(done @ [first, ..]) => {
                let mlp = self.m.borrow().costs.mlp.max(1) as usize;
                done.len().checked_sub(mlp).map_or(*first, |i| done[i].max(*first))
            }
            _ => now,
        };
        let end = self.m.borrow_mut().line_access(self.cpu.get(), t, addr, access);
        if self.in_irq.get() {
            self.m.borrow_mut().counters.ipi_sync_cycles += end - t;
        }
        if let Some(done) = polls.as_mut() {
            done.push(end);
        }
        self.polls.replace(polls);
        self.now.set(now.max(end));
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
        self.now.get() / self.m.borrow().cycles_per_ms
    }

    /// Runs `f`: the simulator runs an IPI handler whole when it is sent, so
    /// nothing can interleave with `f` anyway.
    fn irqs_off<R>(&self, f: impl FnOnce() -> R) -> R {
        f()
    }

    /// A ticket (the smallest free number) inside a flush the kernel allowed
    /// to be deferred ([`LazyFlushes::allowed`]).
    fn defer_flush(&self) -> Option<FlushTicket> {
        let mut m = self.m.borrow_mut();
        let l = &mut m.lazy;
        if !std::mem::take(&mut l.allowed) {
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

/// Returns the root register value of a CPU that has not yet run anything.
pub fn boot_root() -> Root {
    Root::Mm(MmId::KERNEL)
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
        let p = preset::emag();
        let g = p.tlb;
        let cpus = (0..3).map(|_| CpuState::new(Tlb::new(g.l1d_entries, g.l2_entries, g.l2_ways, g.pwc_entries)));
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
    fn a_running_receiver_loses_the_processing_time_and_an_idle_one_does_not() {
        let c = preset::emag().costs;
        let va = Tlbi::Va { asid: asid(), va: VirtAddr(0x1000) };
        let mut m = machine(1_000_000);
        broadcast_and_sync(&mut m, va);
        assert_eq!(m.take_stolen(1), c.dvm_process, "a running CPU stalls while its TLB is searched");
        assert_eq!(m.take_stolen(2), 0, "an idle CPU loses nothing");
        assert_eq!(m.take_stolen(0), 0, "the issuer waits in its DSB instead");
    }

    #[test]
    fn a_whole_asid_message_costs_every_receiver_more_than_a_by_va_one() {
        let c = preset::emag().costs;
        assert!(c.dvm_process_asid > c.dvm_process);
        let mut m = machine(10_000_000);
        let by_va = broadcast_and_sync(&mut m, Tlbi::Va { asid: asid(), va: VirtAddr(0x1000) });
        let mut m = machine(10_000_000);
        let whole = broadcast_and_sync(&mut m, Tlbi::Asid(asid()));
        assert_eq!(whole - by_va, c.dvm_process_asid - c.dvm_process);
        assert_eq!(m.take_stolen(1), c.dvm_process_asid);
    }

    /// `n` CPUs of the Westmere preset (four to a socket).
    fn westmere(n: usize) -> Machine {
        let p = preset::westmere();
        let g = p.tlb;
        let cpus = (0..n).map(|_| CpuState::new(Tlb::new(g.l1d_entries, g.l2_entries, g.l2_ways, g.pwc_entries)));
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
        let c = preset::westmere().costs;
        let all = CpuMask::new(4);
        all.set_all();
        let entry = c.ipi_send + c.ipi_deliver + c.exception_entry;
        let (seen, sent) = entries(&mut westmere(4), |hw, f| hw.send_ipi_all_but_self_async(f));
        assert_eq!(seen, vec![(1, entry), (2, entry), (3, entry)]);
        assert_eq!(sent, c.ipi_send);
        let (seen, sent) = entries(&mut westmere(4), |hw, f| hw.send_ipi_async(&all, f));
        let each = c.ipi_send;
        assert_eq!(seen, vec![(1, entry), (2, entry + each), (3, entry + 2 * each)]);
        assert_eq!(sent, 3 * c.ipi_send);
        // A call-function IPI also pays the generic dispatch.
        let (seen, _) = entries(&mut westmere(4), |hw, f| hw.send_ipi(&all, f));
        assert_eq!(seen[0], (1, entry + c.ipi_handle));
    }

    #[test]
    fn handlers_run_in_the_order_their_cpus_are_interrupted() {
        // From CPU 4, its own socket (CPUs 5..8) is interrupted first, the other later.
        let (seen, _) = entries_from(&mut westmere(8), 4, |hw, f| hw.send_ipi_all_but_self_async(f));
        let cpus: Vec<usize> = seen.iter().map(|&(c, _)| c).collect();
        assert_eq!(cpus, vec![5, 6, 7, 0, 1, 2, 3]);
        assert_eq!(seen[3].1 - seen[2].1, preset::westmere().costs.ipi_cross_socket);
    }

    /// CPUs 1..=3 each write their own flag (one line each) at time 0; returns
    /// when CPU 0, starting at 1000, has read all three, in its sync phase or not.
    fn read_three_flags(sync: bool) -> u64 {
        let mut m = westmere(4);
        let flags = [0x1000, 0x2000, 0x3000];
        for (i, &f) in flags.iter().enumerate() {
            CpuHw::new(&mut m, i + 1, 0).shared(f, Access::Write);
        }
        let hw = CpuHw::new(&mut m, 0, 1000);
        if sync {
            hw.phase(Phase::Issue);
            hw.phase(Phase::Sync);
        }
        for f in flags {
            hw.shared(f, Access::Read);
        }
        hw.now()
    }

    #[test]
    fn polls_of_the_sync_phase_overlap_after_the_first() {
        let t = preset::westmere().costs.cacheline_transfer;
        assert_eq!(read_three_flags(false), 1000 + 3 * t, "one after another");
        assert_eq!(read_three_flags(true), 1000 + 2 * t, "the first, then the other two together");
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
        let c = preset::westmere().costs;
        let (t, mem) = (c.cacheline_transfer, c.mem_access);
        let entry = 1000 + c.ipi_send + c.ipi_deliver + c.exception_entry;
        // Three increments back to back, then the poll's own move.
        assert_eq!(count_three(false), entry + 3 * t + t);
        // Each increment is followed by the spinner's move; the poll then hits.
        assert_eq!(count_three(true), entry + 6 * t + mem);
    }

    /// One move of a line costs 100 cycles, a hit 4.
    fn access(line: &mut Line, cpu: u32, t: u64, var: usize, a: Access) -> u64 {
        line.access(cpu, t, var, a, 4, |_, _| 100).0
    }

    /// Returns a line whose variables 0 and 8 CPU 0 wrote at time 0 (visible at 100).
    fn written_by_cpu0() -> Line {
        let mut line = Line::default();
        access(&mut line, 0, 0, 0, Access::Write);
        access(&mut line, 0, 0, 8, Access::Write);
        line
    }

    #[test]
    fn reads_of_one_version_overlap() {
        let mut line = written_by_cpu0();
        assert_eq!(access(&mut line, 1, 1000, 0, Access::Read), 1100);
        assert_eq!(access(&mut line, 2, 1000, 0, Access::Read), 1100, "not behind cpu1's read");
        assert_eq!(access(&mut line, 1, 1100, 8, Access::Read), 1104, "cpu1 holds this version");
    }

    #[test]
    fn atomics_on_one_line_queue_one_move_at_a_time() {
        let mut line = written_by_cpu0();
        let done: Vec<u64> = (1..=3).map(|cpu| access(&mut line, cpu, 1000, 8, Access::Rmw)).collect();
        assert_eq!(done, vec![1100, 1200, 1300]);
    }

    #[test]
    fn an_earlier_read_is_not_put_behind_a_later_write_the_simulator_ran_first() {
        // IPI handlers run one after another: cpu1's increment at 2000 is known
        // before cpu2's read of the other variable at 1000.
        let mut line = written_by_cpu0();
        assert_eq!(access(&mut line, 1, 2000, 8, Access::Rmw), 2100);
        assert_eq!(access(&mut line, 2, 1000, 0, Access::Read), 1100);
        // ... and cpu2's own increment afterwards follows cpu1's.
        assert_eq!(access(&mut line, 2, 1500, 8, Access::Rmw), 2200);
    }

    #[test]
    fn an_access_follows_the_latest_write_to_its_variable() {
        // A spin lock: cpu1 takes it at 0 and releases it at 5000 (a store to its
        // own line); cpu2's acquisition at 1000, run afterwards, must see the release.
        let mut line = Line::default();
        assert_eq!(access(&mut line, 1, 0, 0, Access::Rmw), 100);
        assert_eq!(access(&mut line, 1, 5000, 0, Access::Write), 5004);
        assert_eq!(access(&mut line, 2, 1000, 0, Access::Rmw), 5104);
    }

    #[test]
    fn a_spinner_takes_the_line_back_after_each_write_before_the_next_writer() {
        let mut line = written_by_cpu0();
        line.spinner = Some((0, 0));
        // cpu1 at 1000: moves 1000..1100, then back to cpu0 1100..1200.
        assert_eq!(access(&mut line, 1, 1000, 8, Access::Rmw), 1100);
        // cpu2, ready at 1000 too, gets it after cpu0: 1200..1300, cpu0 1300..1400.
        assert_eq!(access(&mut line, 2, 1000, 8, Access::Rmw), 1300);
        // The spinner sees the last value when the line is back.
        assert_eq!(access(&mut line, 0, 0, 8, Access::Read), 1404);
        // Without a spinner the two increments are back to back.
        let mut line = written_by_cpu0();
        access(&mut line, 1, 1000, 8, Access::Rmw);
        assert_eq!(access(&mut line, 2, 1000, 8, Access::Rmw), 1200);
        assert_eq!(access(&mut line, 0, 0, 8, Access::Read), 1300);
    }

    #[test]
    fn a_line_remembers_a_bounded_history() {
        let mut line = Line::default();
        for i in 0..200u64 {
            access(&mut line, (i % 2) as u32, i * 1000, 0, Access::Rmw);
        }
        assert!(line.versions.len() <= LINE_HISTORY && line.moves.len() <= LINE_HISTORY);
        // A write placed before everything remembered keeps the newest history.
        line.vars.clear();
        line.moves.clear();
        access(&mut line, 2, 0, 8, Access::Write);
        assert_eq!(line.versions.len(), LINE_HISTORY);
        assert_eq!(line.versions.last().map(|v| v.at), Some(199_100));
    }

    #[test]
    fn stores_behind_a_move_to_the_same_cpu_share_it() {
        // cpu1 writes three variables of a line cpu0 owns: one move, not three.
        let mut line = written_by_cpu0();
        let moves: u64 = [0, 8, 16].iter().map(|&v| line.access(1, 1000, v, Access::Write, 4, |_, _| 100).1).sum();
        assert_eq!(moves, 1);
        assert_eq!(access(&mut line, 2, 1000, 16, Access::Read), 1204, "visible once the line has arrived");
    }

    #[test]
    fn concurrent_broadcasts_queue_at_each_receiver() {
        let c = preset::emag().costs;
        let mut m = machine(0);
        let op = Tlbi::Asid(asid());
        let first = broadcast_and_sync(&mut m, op);
        // A second message issued at the same time waits behind the first at every CPU.
        let second = broadcast_and_sync(&mut m, op);
        assert_eq!(second - first, c.dvm_process_asid);
    }
}
