//! `x86-freebsd-counter`: shootdown completion through one shared counter, as
//! FreeBSD x86 did before origin 003 (`smp_targeted_tlb_shootdown` in
//! `sys/x86/x86/mp_x86.c`, FreeBSD 11.0).
//!
//! # The protocol
//! - The pmap layer has already invalidated locally (`local` runs first).
//! - Issue: take `smp_ipi_mtx`, store `smp_tlb_addr1`, `smp_tlb_addr2`,
//!   `smp_tlb_pmap`, then `smp_tlb_wait = 0` (a release store).
//! - Dispatch: send the IPIs (`ipi_all_but_self` when every CPU is a target).
//! - Each handler reads the request, invalidates, then `atomic_add_int(&smp_tlb_wait, 1)`.
//! - Sync: spin until `smp_tlb_wait` equals the number of targets; release the lock.
//!
//! # What it costs
//! Every target's `LOCK XADD` needs the counter's line exclusively, so the
//! increments serialise on one line, and the initiator, spinning on that line
//! from the moment it has sent the IPIs ([`Hw::spin_on`]), pulls it back after
//! each of them: the contention origin 003 removes. The request globals and the
//! counter are consecutive globals of `mp_x86.c`; they are modelled on one line,
//! the lock on another.
//!
//! # What is not modelled
//! The operation travels as the IPI vector in FreeBSD; here it is one more field
//! on the request line (same line, so no extra cost).
//!
//! # The zoo
//! [`Counter::with_bug`] (reached through
//! [`crate::asid::FreebsdX86::with_bug`]) re-introduces
//! [`Bug::FreebsdX86CounterEarlyAck`]: the handler's two statements swapped, the
//! increment first, then the read of the request and the invalidation. Once the
//! count is complete the initiator returns (its caller may free the page) and drops
//! `smp_ipi_mtx`, so the next initiator may overwrite the request globals before a
//! late target has read them. The lock-free protocol of
//! [`super::scoreboard`] also acknowledges first, but only after reading its
//! initiator's own request fields, with an acquire fence in between, and before
//! the target can return to user mode: that order is what makes its early
//! acknowledgement safe and this one not.

use super::{addr_of, CacheLine, LockedProtocol, Others, Request, RequestFields};
use crate::hw::{Access, Hw, Phase};
use crate::sync::{AtomicU32, Ordering, SpinLock};
use crate::zoo::Bug;

/// The request globals and the completion counter, on one cache line.
#[repr(C, align(64))]
struct Globals {
    req: RequestFields,
    /// `smp_tlb_wait`: how many targets have finished.
    wait: AtomicU32,
}

/// The counter protocol's shared state.
pub struct Counter {
    /// `smp_ipi_mtx`: one initiator at a time.
    smp_ipi_mtx: CacheLine<SpinLock<()>>,
    globals: Globals,
    /// The zoo bug re-introduced, if any (see [`Counter::with_bug`]).
    bug: Option<Bug>,
}

impl Default for Counter {
    fn default() -> Self {
        Self::new()
    }
}

impl Counter {
    /// Returns the protocol in its boot state.
    pub const fn new() -> Self {
        Counter {
            smp_ipi_mtx: CacheLine(SpinLock::new(())),
            globals: Globals { req: RequestFields::new(), wait: AtomicU32::new(0) },
            bug: None,
        }
    }

    /// Returns the protocol with `bug` re-introduced (see [`crate::zoo`]): only
    /// [`Bug::FreebsdX86CounterEarlyAck`] applies.
    ///
    /// # Panics
    /// If `bug` is another one, or a bug was re-introduced already.
    pub fn with_bug(mut self, bug: Bug) -> Self {
        assert!(bug == Bug::FreebsdX86CounterEarlyAck, "{bug} does not apply to the counter protocol");
        assert!(self.bug.is_none(), "one zoo bug at a time");
        self.bug = Some(bug);
        self
    }

    /// Returns the zoo bug this protocol re-introduces, if any.
    pub fn bug(&self) -> Option<Bug> {
        self.bug
    }

    /// Returns `smp_tlb_wait`.
    pub fn smp_tlb_wait(&self) -> u32 {
        // Relaxed: a report, not a decision.
        self.globals.wait.load(Ordering::Relaxed)
    }

    /// Runs one target's IPI handler: read the request, invalidate, count.
    fn handler<H: Hw, I: Fn(&H, &Request)>(&self, hw: &H, invalidate: &I) {
        // Zoo bug freebsd-x86-counter-early-ack: FreeBSD's two statements swapped, the
        // count first; the request is read and invalidated after the initiator may
        // have moved on.
        let early_ack = self.bug == Some(Bug::FreebsdX86CounterEarlyAck);
        if early_ack {
            self.acknowledge(hw);
        }
        let req = self.globals.req.read(hw);
        invalidate(hw, &req);
        if !early_ack {
            self.acknowledge(hw);
        }
    }

    /// Counts this target done (`atomic_add_int(&smp_tlb_wait, 1)`).
    fn acknowledge<H: Hw>(&self, hw: &H) {
        hw.shared(addr_of(&self.globals.wait), Access::Rmw);
        // Release: the initiator's Acquire poll that counts this increment sees
        // everything the handler did before it (`atomic_add_int` is a LOCKed
        // instruction, a full barrier on x86).
        self.globals.wait.fetch_add(1, Ordering::Release);
    }

    /// Names the shared fields (see [`crate::Policy::name_fields`]).
    pub fn name_fields(&self, f: &mut dyn crate::fields::Fields) {
        f.add(&self.smp_ipi_mtx.0, format_args!("smp_ipi_mtx"), crate::fields::Value::Lock);
        self.globals.req.name_fields(f, format_args!("smp_tlb_"));
        f.add(&self.globals.wait, format_args!("smp_tlb_wait"), crate::fields::Value::Number);
    }

    /// Returns `(address, name)` of every shared variable.
    #[cfg(test)]
    pub(crate) fn symbols(&self) -> alloc::vec::Vec<(usize, alloc::string::String)> {
        let mut v = self.globals.req.symbols("smp_tlb_");
        v.push((addr_of(&self.smp_ipi_mtx.0), "smp_ipi_mtx".into()));
        v.push((addr_of(&self.globals.wait), "smp_tlb_wait".into()));
        v
    }
}

impl LockedProtocol for Counter {
    fn smp_ipi_mtx(&self) -> &SpinLock<()> {
        &self.smp_ipi_mtx.0
    }

    fn request_fields(&self) -> &RequestFields {
        &self.globals.req
    }

    fn complete<H: Hw, I: Fn(&H, &Request)>(&self, hw: &H, others: &Others, invalidate: I) {
        hw.shared(addr_of(&self.globals.wait), Access::Write);
        // Release: `atomic_store_rel_int`; orders the request stores before it.
        self.globals.wait.store(0, Ordering::Release);

        hw.phase(Phase::Dispatch);
        hw.spin_on(addr_of(&self.globals.wait));
        others.send(hw, move |h| self.handler(h, &invalidate));

        hw.phase(Phase::Sync);
        loop {
            hw.shared(addr_of(&self.globals.wait), Access::Read);
            // Acquire: pairs with the handlers' Release increments.
            if self.globals.wait.load(Ordering::Acquire) >= others.n {
                break;
            }
            crate::sync::spin_loop();
        }
    }
}
