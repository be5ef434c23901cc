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
//! messages one at a time (`dvm_busy` is when it is next free), so a message
//! waits behind those of other broadcasters: latency grows with the number of
//! CPUs broadcasting at the same time. A message to another socket pays
//! `dvm_cross_socket` each way. The issuing CPU's `DSB ISH` completes when the
//! last acknowledgement is back.
//!
//! # IPIs
//! [`Hw::send_ipi`] costs the sender one interrupt-controller write per target.
//! Each target takes the interrupt after the delivery latency (more across
//! sockets) and once its previous handler is done, pays exception entry, the
//! call-function dispatch (`ipi_handle`), the handler's own operations and
//! exception exit; the sender then sees its completion flag after one cache-line
//! transfer. A target that was running something loses that time (`stolen`,
//! added to its current operation by the engine); an idle one is merely busy
//! until the handler ends (`irq_until`).

use crate::preset::Costs;
use crate::tlb::{Inval, Tlb};
use std::cell::{Cell, RefCell};
use tlbkit_policy::{Asid, Barrier, CpuId, CpuMask, Domain, Hw, MmId, Note, Root, Scope, Tlbi};

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
    /// IPI handlers run for policies (TLB shootdowns).
    pub ipi_handlers: u64,
}

/// One CPU's translation state.
pub struct CpuState {
    /// The CPU's TLBs.
    pub tlb: Tlb,
    /// What TTBR0/CR3 points at.
    pub root: Root,
    /// The ASID/PCID in the root register.
    pub asid: u16,
    /// When every broadcast invalidation this CPU issued is acknowledged.
    pub sync_until: u64,
    /// When the CPU's current operation ends (kept by the engine).
    pub busy_until: u64,
    /// When the last IPI handler that interrupted this CPU returned.
    pub irq_until: u64,
    /// Cycles IPI handlers took from the operation the CPU was running.
    pub stolen: u64,
    /// Cycles this CPU spent in IPI handlers, in total.
    pub irq_cycles: u64,
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
            irq_cycles: 0,
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
    /// Per CPU: when it finishes processing its incoming DVM messages.
    pub dvm_busy: Vec<u64>,
    /// Counters.
    pub counters: HwCounters,
}

impl Machine {
    /// Returns whether CPUs `a` and `b` are on different sockets.
    pub fn cross_socket(&self, a: usize, b: usize) -> bool {
        a / self.cores_per_socket != b / self.cores_per_socket
    }

    fn tlb_op(op: Tlbi) -> Inval {
        match op {
            Tlbi::Va { asid, va } => Inval::Va { asid: asid.get(), va: va.0 },
            Tlbi::VaAllAsids { va } => Inval::VaAll { va: va.0 },
            Tlbi::Asid(a) => Inval::Asid(a.get()),
            Tlbi::All => Inval::All,
        }
    }

    /// Sends one DVM message from `from` at `t`; returns when its last
    /// acknowledgement is back.
    fn broadcast(&mut self, from: usize, t: u64, op: Inval) -> u64 {
        let c = self.costs;
        let mut done_all = t;
        for cpu in 0..self.cpus.len() {
            self.cpus[cpu].tlb.invalidate(op);
            // Every message, the issuer's own included, goes out to the interconnect
            // and its completion comes back through it (the DVM sync of DSB ISH).
            let hop = if self.cross_socket(from, cpu) { c.dvm_hop + c.dvm_cross_socket } else { c.dvm_hop };
            let start = (t + hop).max(self.dvm_busy[cpu]);
            let done = start + c.dvm_process;
            self.dvm_busy[cpu] = done;
            done_all = done_all.max(done + hop);
        }
        done_all
    }
}

/// The hardware interface of one CPU during one kernel operation.
pub struct CpuHw<'a> {
    m: RefCell<&'a mut Machine>,
    /// The CPU operations act on: the caller's, or an IPI target's inside a handler.
    cpu: Cell<usize>,
    now: Cell<u64>,
}

impl<'a> CpuHw<'a> {
    /// Returns CPU `cpu`'s interface, its clock at `now` cycles.
    pub fn new(m: &'a mut Machine, cpu: usize, now: u64) -> Self {
        CpuHw { m: RefCell::new(m), cpu: Cell::new(cpu), now: Cell::new(now) }
    }

    /// Returns the CPU's clock after what was done through this interface.
    pub fn now(&self) -> u64 {
        self.now.get()
    }

    fn spend(&self, cycles: u64) {
        self.now.set(self.now.get() + cycles);
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
        let st = &mut m.cpus[self.cpu.get()];
        st.root = root;
        st.asid = asid.get();
        if !noflush {
            st.tlb.invalidate(Inval::Asid(asid.get()));
            m.counters.local_invalidations += 1;
            m.counters.full_flushes += 1;
            cost += m.costs.root_write_flush;
        }
        drop(m);
        self.spend(cost);
    }

    fn tlbi(&self, op: Tlbi, scope: Scope) {
        let mut m = self.m.borrow_mut();
        let c = m.costs;
        let whole = matches!(op, Tlbi::Asid(_) | Tlbi::All);
        if whole {
            m.counters.full_flushes += 1;
        }
        let inv = Machine::tlb_op(op);
        match scope {
            Scope::Local => {
                m.counters.local_invalidations += 1;
                m.cpus[self.cpu.get()].tlb.invalidate(inv);
                let cost = match op {
                    Tlbi::Va { .. } | Tlbi::VaAllAsids { .. } => c.tlbi_local_va,
                    Tlbi::Asid(_) => c.tlbi_local_asid,
                    Tlbi::All => c.tlbi_local_all,
                };
                drop(m);
                self.spend(cost);
            }
            Scope::Broadcast => {
                m.counters.broadcast_invalidations += 1;
                let t = self.now.get() + c.tlbi_bcast_issue;
                let acked = m.broadcast(self.cpu.get(), t, inv);
                let st = &mut m.cpus[self.cpu.get()];
                st.sync_until = st.sync_until.max(acked);
                drop(m);
                self.spend(c.tlbi_bcast_issue);
            }
        }
    }

    fn barrier(&self, b: Barrier) {
        let m = self.m.borrow();
        let c = m.costs;
        match b {
            Barrier::Dsb(Domain::InnerShareable) => {
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
        let me = self.cpu.get();
        let c = self.m.borrow().costs;
        let mut list = Vec::new();
        targets.for_each(|t| {
            if t.index() != me {
                list.push(t.index());
            }
        });
        let mut sent = self.now.get();
        let mut done = sent;
        for target in list {
            sent += c.ipi_send;
            let (arrive, ack) = {
                let mut m = self.m.borrow_mut();
                m.counters.ipis_sent += 1;
                m.counters.ipi_handlers += 1;
                let cross = m.cross_socket(me, target);
                let arrive = sent + c.ipi_deliver + if cross { c.ipi_cross_socket } else { 0 };
                let ack = c.cacheline_transfer + if cross { c.cacheline_cross_socket } else { 0 };
                (arrive.max(m.cpus[target].irq_until), ack)
            };
            self.cpu.set(target);
            self.now.set(arrive + c.exception_entry + c.ipi_handle);
            handler(self);
            let end = self.now.get() + c.exception_exit;
            {
                let mut m = self.m.borrow_mut();
                let st = &mut m.cpus[target];
                st.irq_until = end;
                st.irq_cycles += end - arrive;
                if st.busy_until > arrive {
                    st.stolen += end - arrive;
                }
            }
            done = done.max(end + ack);
        }
        self.cpu.set(me);
        self.now.set(sent.max(done));
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
