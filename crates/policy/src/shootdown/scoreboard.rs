//! `x86-freebsd-scoreboard`: the lock-free shootdown of kib's 2020 rework
//! (FreeBSD 13 onward, `smp_targeted_tlb_shootdown` and `invlop_handler` in
//! `sys/amd64/amd64/mp_machdep.c`; modelled on the current code).
//!
//! # The protocol
//! Each CPU owns its request fields (`pc_smp_tlb_addr1`, `pc_smp_tlb_addr2`,
//! `pc_smp_tlb_pmap`, `pc_smp_tlb_op`, `pc_smp_tlb_gen` in its `struct pcpu`), and
//! a scoreboard of `ncpus × ncpus` 32-bit generations, row = target, column =
//! initiator, tells each target which initiators wait for it. Every slot and every
//! `pc_smp_tlb_gen` starts at 1.
//!
//! - Issue (in a critical section, no lock): store the request fields in this
//!   CPU's own per-CPU area, `generation = pc_smp_tlb_gen + 1` (skipping 0), a
//!   release fence, then zero slot `[target][me]` of every target.
//! - Dispatch: send `IPI_INVLOP` (`ipi_all_but_self` when the target set is
//!   `all_cpus`), then run `curcpu_cb` — the initiator invalidates
//!   locally *while the IPIs are in flight*, not before sending them.
//! - Each target's `invlop_handler` scans its row for a zero slot; for each one:
//!   an acquire fence, read that initiator's request fields, an acquire fence,
//!   **store the generation into the slot (acknowledge), then invalidate** — and
//!   scan again until no slot is zero.
//! - Sync: for each target in turn, spin until slot `[target][me]` equals the
//!   generation.
//!
//! # Acknowledging before invalidating
//! The real handler stores the acknowledgement before running the invalidation
//! (`invlop_handler` in the current code: "As an optimization, the request is
//! acknowledged before the actual invalidation is performed"). FreeBSD argues it is
//! safe because the target cannot return to user mode before the handler finishes,
//! and an NMI that interrupts it sees the kernel handler frame and touches no user
//! page table. So when the initiator's sync ends, the targets' invalidations may
//! still be running; the simulator runs each handler to its end inside
//! [`Hw::send_ipi_async`], so the oracle sees them done, while the latency the
//! initiator measures ends with the acknowledgements. The checker lets the
//! initiator return once the acknowledgements are in, with the targets' handlers
//! still pending or running, and judges a target that is inside its handler when
//! the handler returns: the safety argument above, checked.
//!
//! # What it costs
//! No lock line. Each initiator writes its own request line and one slot per target;
//! each target reads its row, the initiator's request line, and writes its slot.
//! The scoreboard is one contiguous array of `u32`s (FreeBSD `malloc`s it), so with
//! fewer than 16 CPUs several targets' rows share a line.
//!
//! [`Hw::shared`] charges a store when it is made, so the initiator pays for
//! zeroing one slot per target (one line per target from 16 CPUs on) in series
//! before it sends a single IPI; a real store buffer overlaps those ownership
//! requests. This makes the protocol look dearer in the simulator than it is.
//!
//! # What is not modelled
//! `INVL_OP_CACHE` (`wbinvd`) and the skip of IPIs while booting or in the
//! debugger.

use super::{addr_of, others, CompletionProtocol, Request, RequestFields};
use crate::cpumask::CpuMask;
use crate::hw::{Access, Hw, Phase};
use crate::sync::{fence, AtomicU32, Ordering};
use crate::types::CpuId;
use alloc::vec::Vec;

/// Slots per cache line.
const SLOTS_PER_LINE: usize = 16;

/// One CPU's request fields and generation (a slice of its `struct pcpu`).
#[repr(C, align(64))]
struct PcpuTlb {
    req: RequestFields,
    /// `pc_smp_tlb_gen`: the generation of this CPU's latest request.
    gen: AtomicU32,
}

/// 16 consecutive scoreboard slots, 64-byte aligned like the `malloc`ed array.
#[repr(C, align(64))]
struct SlotLine([AtomicU32; SLOTS_PER_LINE]);

/// The lock-free protocol's shared state.
pub struct Scoreboard {
    ncpus: usize,
    pcpu: Vec<PcpuTlb>,
    /// `invl_scoreboard`: slot `target * ncpus + initiator`.
    invl_scoreboard: Vec<SlotLine>,
}

impl Scoreboard {
    /// Returns the protocol in its boot state for `ncpus` CPUs: every generation
    /// and every slot 1 (`invl_scoreboard_init`, `pc_smp_tlb_gen = 1`).
    pub fn new(ncpus: usize) -> Self {
        let pcpu = (0..ncpus).map(|_| PcpuTlb { req: RequestFields::new(), gen: AtomicU32::new(1) }).collect();
        let lines = (ncpus * ncpus).div_ceil(SLOTS_PER_LINE);
        let invl_scoreboard = (0..lines).map(|_| SlotLine(core::array::from_fn(|_| AtomicU32::new(1)))).collect();
        Scoreboard { ncpus, pcpu, invl_scoreboard }
    }

    /// Returns slot `[target][initiator]` (`invl_scoreboard_slot`).
    fn slot(&self, target: usize, initiator: usize) -> &AtomicU32 {
        let i = target * self.ncpus + initiator;
        &self.invl_scoreboard[i / SLOTS_PER_LINE].0[i % SLOTS_PER_LINE]
    }

    /// Returns the generation in slot `[target][initiator]`.
    pub fn scoreboard(&self, target: CpuId, initiator: CpuId) -> u32 {
        // Relaxed: a report, not a decision.
        self.slot(target.index(), initiator.index()).load(Ordering::Relaxed)
    }

    /// Returns `pc_smp_tlb_gen` of `cpu`.
    pub fn smp_tlb_gen(&self, cpu: CpuId) -> u32 {
        // Relaxed: a report, not a decision.
        self.pcpu[cpu.index()].gen.load(Ordering::Relaxed)
    }

    /// Runs `invlop_handler` on the calling (target) CPU.
    fn invlop_handler<H: Hw, I: Fn(&H, &Request)>(&self, hw: &H, invalidate: &I) {
        let me = hw.cpu().index();
        loop {
            let mut found = None;
            for initiator in 0..self.ncpus {
                let slot = self.slot(me, initiator);
                hw.shared(addr_of(slot), Access::Read);
                // Relaxed: the acquire fence below orders what follows a zero.
                if slot.load(Ordering::Relaxed) == 0 {
                    found = Some(initiator);
                    break;
                }
            }
            let Some(initiator) = found else {
                break;
            };
            // Acquire fence: pairs with the initiator's release fence between its
            // request stores and its zeroing of this slot.
            fence(Ordering::Acquire);
            let pc = &self.pcpu[initiator];
            let req = pc.req.read(hw);
            hw.shared(addr_of(&pc.gen), Access::Read);
            // Relaxed: ordered by the fence above.
            let gen = pc.gen.load(Ordering::Relaxed);
            // Acquire fence: the request loads complete before the acknowledgement
            // below can be seen (FreeBSD's second `atomic_thread_fence_acq`).
            fence(Ordering::Acquire);
            let slot = self.slot(me, initiator);
            hw.shared(addr_of(slot), Access::Write);
            // Relaxed: `atomic_store_int`; the initiator needs no ordering with the
            // invalidation, which FreeBSD deliberately runs after acknowledging.
            slot.store(gen, Ordering::Relaxed);
            invalidate(hw, &req);
        }
    }

    /// Names the shared fields (see [`crate::Policy::name_fields`]).
    pub fn name_fields(&self, f: &mut dyn crate::fields::Fields) {
        use crate::fields::Value;
        for (i, pc) in self.pcpu.iter().enumerate() {
            pc.req.name_fields(f, format_args!("pcpu[cpu{i}].pc_smp_tlb_"));
            f.add(&pc.gen, format_args!("pcpu[cpu{i}].pc_smp_tlb_gen"), Value::Number);
        }
        for t in 0..self.ncpus {
            for i in 0..self.ncpus {
                f.add(self.slot(t, i), format_args!("invl_scoreboard[cpu{t}][cpu{i}]"), Value::Number);
            }
        }
    }

    /// Returns `(address, name)` of every shared variable.
    #[cfg(test)]
    pub(crate) fn symbols(&self) -> alloc::vec::Vec<(usize, alloc::string::String)> {
        use alloc::format;
        let mut v = Vec::new();
        for (i, pc) in self.pcpu.iter().enumerate() {
            v.extend(pc.req.symbols(&format!("cpu{i}.smp_tlb_")));
            v.push((addr_of(&pc.gen), format!("cpu{i}.smp_tlb_gen")));
        }
        for t in 0..self.ncpus {
            for i in 0..self.ncpus {
                v.push((addr_of(self.slot(t, i)), format!("scoreboard[{t}][{i}]")));
            }
        }
        v
    }
}

impl CompletionProtocol for Scoreboard {
    fn shootdown<H, L, I>(&self, hw: &H, targets: &CpuMask, req: &Request, local: L, invalidate: I)
    where
        H: Hw,
        L: Fn(&H),
        I: Fn(&H, &Request),
    {
        let others = others(hw, targets);
        let mask = &others.mask;
        if others.n == 0 {
            // `goto local_cb`.
            local(hw);
            return;
        }
        let me = hw.cpu().index();
        let pc = &self.pcpu[me];

        hw.phase(Phase::Issue);
        pc.req.publish(hw, req);
        hw.shared(addr_of(&pc.gen), Access::Read);
        // Relaxed (load and store): only this CPU writes its generation; targets
        // read it after the release fence below.
        let mut generation = pc.gen.load(Ordering::Relaxed).wrapping_add(1);
        if generation == 0 {
            generation = 1;
        }
        hw.shared(addr_of(&pc.gen), Access::Write);
        pc.gen.store(generation, Ordering::Relaxed);
        // Release fence: the request stores above before the slot stores below.
        fence(Ordering::Release);
        mask.for_each(|t| {
            let slot = self.slot(t.index(), me);
            // An INVARIANTS check, not accounted (not in production kernels).
            debug_assert_ne!(slot.peek(), 0, "scoreboard slot already zero");
            hw.shared(addr_of(slot), Access::Write);
            // Relaxed: ordered after the request by the fence above, and before our
            // polls below by the IPI (the APIC write fences).
            slot.store(0, Ordering::Relaxed);
        });

        hw.phase(Phase::Dispatch);
        if let Some(first) = others.first() {
            hw.spin_on(addr_of(self.slot(first.index(), me)));
        }
        others.send(hw, move |h| self.invlop_handler(h, &invalidate));
        local(hw);

        hw.phase(Phase::Sync);
        mask.for_each(|t| {
            let slot = self.slot(t.index(), me);
            loop {
                hw.shared(addr_of(slot), Access::Read);
                // Relaxed: `atomic_load_int`; the acknowledgement carries nothing
                // the initiator must see (see the module docs).
                if slot.load(Ordering::Relaxed) == generation {
                    break;
                }
                crate::sync::spin_loop();
            }
        });
        hw.phase(Phase::Done);
    }
}
