//! `x86-freebsd-gen`: shootdown completion through per-CPU generation flags —
//! origin 003 (review D8041, "Reduce the cost of TLB invalidation on x86 by using
//! per-CPU completion flags", committed by kib in October 2016; the code of
//! FreeBSD 11.1 to 12.x `sys/x86/x86/mp_x86.c`).
//!
//! # The protocol
//! - The pmap layer has already invalidated locally (`local` runs first).
//! - Issue: take `smp_ipi_mtx`, store `smp_tlb_addr1`, `smp_tlb_addr2`,
//!   `smp_tlb_pmap`, and `generation = ++smp_tlb_generation`.
//! - Dispatch: send the IPIs (`ipi_all_but_self` when every CPU is a target).
//! - Each handler reads `smp_tlb_generation` on entry (before the serialising
//!   invalidation, so the load overlaps it — the review's micro-optimisation),
//!   reads the request, invalidates, and stores the generation into its own
//!   per-CPU `smp_tlb_done`.
//! - Sync: for each target in turn, spin until its `smp_tlb_done` equals the
//!   generation; release the lock.
//!
//! # What it costs
//! No line is written by two targets: each writes only its own flag, which the
//! initiator alone reads. The initiator spins on the first target's flag while
//! the handlers run ([`Hw::spin_on`]); the flags it reads after that one were
//! mostly written meanwhile, and the machine overlaps those reads (its sync
//! phase). Each flag is on its own line here (`#[repr(align(64))]`),
//! as it is in FreeBSD in practice (`pc_smp_tlb_done` in `struct pcpu`, whose other
//! fields only the owner writes); the review discussed but did not add padding.
//!
//! # What is guaranteed and what is not
//! The generation is 32 bits (kib asked for `uint32_t` in the review) and the
//! committed code does not skip 0 on wrap-around: after 2^32 shootdowns, a CPU
//! that has never acknowledged one still holds 0 and would look done. Flags start
//! at 0 and the first generation is 1, as in FreeBSD.

use super::{addr_of, CacheLine, LockedProtocol, Others, Request, RequestFields};
use crate::hw::{Access, Hw, Phase};
use crate::sync::{AtomicU32, Ordering, SpinLock};
use alloc::vec::Vec;

/// The request globals and the generation counter, on one cache line.
#[repr(C, align(64))]
struct Globals {
    req: RequestFields,
    /// `smp_tlb_generation`: the generation of the latest request.
    generation: AtomicU32,
}

/// The generation protocol's shared state.
pub struct Generation {
    /// `smp_ipi_mtx`: one initiator at a time.
    smp_ipi_mtx: CacheLine<SpinLock<()>>,
    globals: Globals,
    /// `pc_smp_tlb_done` of each CPU, each on its own line.
    smp_tlb_done: Vec<CacheLine<AtomicU32>>,
}

impl Generation {
    /// Returns the protocol in its boot state for `ncpus` CPUs.
    pub fn new(ncpus: usize) -> Self {
        Generation {
            smp_ipi_mtx: CacheLine(SpinLock::new(())),
            globals: Globals { req: RequestFields::new(), generation: AtomicU32::new(0) },
            smp_tlb_done: (0..ncpus).map(|_| CacheLine(AtomicU32::new(0))).collect(),
        }
    }

    /// Returns `smp_tlb_generation`.
    pub fn smp_tlb_generation(&self) -> u32 {
        // Relaxed: a report, not a decision.
        self.globals.generation.load(Ordering::Relaxed)
    }

    /// Returns `smp_tlb_done` of CPU `cpu`.
    pub fn smp_tlb_done(&self, cpu: usize) -> u32 {
        // Relaxed: a report, not a decision.
        self.smp_tlb_done[cpu].0.load(Ordering::Relaxed)
    }

    /// Runs one target's IPI handler: generation first, then the request, the
    /// invalidation, and the store to this CPU's own flag.
    fn handler<H: Hw, I: Fn(&H, &Request)>(&self, hw: &H, invalidate: &I) {
        hw.shared(addr_of(&self.globals.generation), Access::Read);
        // Relaxed: published by the IPI, and stable under the initiator's lock.
        let generation = self.globals.generation.load(Ordering::Relaxed);
        let req = self.globals.req.read(hw);
        invalidate(hw, &req);
        let done = &self.smp_tlb_done[hw.cpu().index()].0;
        hw.shared(addr_of(done), Access::Write);
        // Release: the initiator's Acquire poll that sees this generation sees
        // everything the handler did before it (`PCPU_SET` is a plain store; x86
        // stores are release stores).
        done.store(generation, Ordering::Release);
    }

    /// Names the shared fields (see [`crate::Policy::name_fields`]).
    pub fn name_fields(&self, f: &mut dyn crate::fields::Fields) {
        use crate::fields::Value;
        f.add(&self.smp_ipi_mtx.0, format_args!("smp_ipi_mtx"), Value::Lock);
        self.globals.req.name_fields(f, format_args!("smp_tlb_"));
        f.add(&self.globals.generation, format_args!("smp_tlb_generation"), Value::Number);
        for (i, d) in self.smp_tlb_done.iter().enumerate() {
            f.add(&d.0, format_args!("pcpu[cpu{i}].pc_smp_tlb_done"), Value::Number);
        }
    }

    /// Returns `(address, name)` of every shared variable.
    #[cfg(test)]
    pub(crate) fn symbols(&self) -> alloc::vec::Vec<(usize, alloc::string::String)> {
        let mut v = self.globals.req.symbols("smp_tlb_");
        v.push((addr_of(&self.smp_ipi_mtx.0), "smp_ipi_mtx".into()));
        v.push((addr_of(&self.globals.generation), "smp_tlb_generation".into()));
        for (i, d) in self.smp_tlb_done.iter().enumerate() {
            v.push((addr_of(&d.0), alloc::format!("cpu{i}.smp_tlb_done")));
        }
        v
    }
}

impl LockedProtocol for Generation {
    fn smp_ipi_mtx(&self) -> &SpinLock<()> {
        &self.smp_ipi_mtx.0
    }

    fn request_fields(&self) -> &RequestFields {
        &self.globals.req
    }

    fn complete<H: Hw, I: Fn(&H, &Request)>(&self, hw: &H, others: &Others, invalidate: I) {
        // `++smp_tlb_generation`: a plain increment under the lock.
        hw.shared(addr_of(&self.globals.generation), Access::Read);
        // Relaxed (load and store): only lock holders write it; handlers read it
        // after the IPI that publishes it.
        let generation = self.globals.generation.load(Ordering::Relaxed).wrapping_add(1);
        hw.shared(addr_of(&self.globals.generation), Access::Write);
        self.globals.generation.store(generation, Ordering::Relaxed);

        hw.phase(Phase::Dispatch);
        if let Some(first) = others.first() {
            hw.spin_on(addr_of(&self.smp_tlb_done[first.index()].0));
        }
        others.send(hw, move |h| self.handler(h, &invalidate));

        hw.phase(Phase::Sync);
        others.mask.for_each(|cpu| {
            let done = &self.smp_tlb_done[cpu.index()].0;
            loop {
                hw.shared(addr_of(done), Access::Read);
                // Acquire: pairs with the handler's Release store.
                if done.load(Ordering::Acquire) == generation {
                    break;
                }
                crate::sync::spin_loop();
            }
        });
    }
}
