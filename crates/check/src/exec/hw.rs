//! `CheckHw`: the hardware a policy's code drives during a check, one CPU's
//! view of the machine (`Hw`'s TLB, barrier, IPI and translation-root calls),
//! each call that acts on the machine a preemption point.

use super::*;
use crate::kernel::RootWalks;

impl<'a> CheckHw<'a> {
    pub(super) fn st(&self) -> std::cell::RefMut<'_, State> {
        self.core.st.borrow_mut()
    }

    /// Counts this CPU among the initiators of cross-CPU invalidations.
    pub(super) fn initiated(&self) {
        self.core.initiators.set(self.core.initiators.get() | 1 << self.cpu);
    }

    pub(super) fn enqueue(&self, targets: impl Iterator<Item = usize>, handler: Handler, sync: bool) {
        let me = self.cpu;
        self.core.drain_own(me);
        let mut list = Vec::new();
        {
            let mut st = self.st();
            let key = st.cpus[me].history;
            for t in targets.filter(|&t| t != me) {
                st.cpus[t].pending.push_back(Irq { handler, from: me, sync, key });
                list.push(t);
            }
            if sync {
                st.cpus[me].sync_out += list.len();
            }
        }
        let key = list.iter().fold(0x9_0000 + sync as u64, |h, &t| mix(h, t as u64));
        self.core.event_kind(me, key, Kind::Ipi, || {
            let l: Vec<String> = list.iter().map(|t| format!("cpu{t}")).collect();
            format!("send {} IPI to {}", if sync { "synchronous" } else { "asynchronous" }, l.join(", "))
        });
    }
}

/// Erases the lifetime of an IPI handler so that a target can run it later.
///
/// # Safety
/// The caller must keep what `f` borrows alive until every target has run it.
pub(super) unsafe fn erase<'a, 'b>(f: &'a (dyn Fn(&CheckHw<'b>) + 'a)) -> Handler {
    // SAFETY: only the lifetimes change; see the contract.
    unsafe { std::mem::transmute::<&'a (dyn Fn(&CheckHw<'b>) + 'a), &'static (dyn Fn(&CheckHw<'static>) + 'static)>(f) }
}

impl Core {
    /// Offers the search the move of the thread CPU `cpu` runs to another CPU,
    /// now, just before `what` (where it may be preempted: outside handlers,
    /// with interrupts on and no spin lock held); returns
    /// whether it moved. If it did, this CPU runs `meanwhile` (its switch to
    /// the next thread, where the harness runs it now), and from then until
    /// [`Engine::preemptible`] ends it the thread's barriers run on that other
    /// CPU: they complete none of this
    /// CPU's invalidations (Arm ARM: TLB maintenance completes at a `DSB`
    /// executed by the PE that issued it; AMD APM: `TLBSYNC` waits for the
    /// `INVLPGB`s of the processor that executes it), which stay pending until
    /// this CPU's next barrier, which its switch to the next thread may be.
    /// What they complete of the other CPU's is left to that CPU's own
    /// barrier, the latest point.
    pub(super) fn move_thread(&self, cpu: usize, what: &'static str, meanwhile: impl FnOnce()) -> bool {
        let may = {
            let st = self.st.borrow();
            let c = &st.cpus[cpu];
            c.irq_off == 0 && !c.in_handler && c.held.iter().all(|&h| h == NO_LOCK)
        };
        // With one CPU there is nowhere to go; a script names no such choice.
        if !may || self.shape.cpus == 1 || self.with_chooser(|c| c.scripted()) {
            return false;
        }
        let Some(i) = self.choose(ChoiceKind::Move, &[0, 1], 0) else {
            // Pruned: stop here (the scheduler ends the execution).
            self.idle()
        };
        if i == 0 {
            return false;
        }
        self.event_kind(cpu, 0xc_0100, Kind::Invalidate, || {
            format!(
                "preempted before {what}: the thread runs it on another CPU, which completes none of cpu{cpu}'s \
                 invalidations"
            )
        });
        self.st.borrow_mut().cpus[cpu].preempt = Preempt::No;
        // A switch on either CPU orders the thread's later loads.
        self.catch_up(cpu);
        meanwhile();
        self.st.borrow_mut().cpus[cpu].preempt = Preempt::Moved;
        true
    }
}

impl CheckHw<'_> {
    /// Where the thread running here stands towards a move: allowed before its
    /// next `DSB ISH` ([`Engine::preemptible`]), or moved earlier in this flush
    /// ([`Core::move_thread`]), when its barriers complete none of this CPU's
    /// invalidations.
    fn preempt(&self) -> Preempt {
        self.core.st.borrow().cpus[self.cpu].preempt
    }
}

impl<'c> Hw for CheckHw<'c> {
    fn cpu(&self) -> CpuId {
        CpuId(self.cpu as u32)
    }

    fn ncpus(&self) -> usize {
        self.core.shape.cpus
    }

    fn write_root(&self, root: Root, asid: tlbkit_policy::Asid, noflush: bool) {
        self.core.pause();
        // Under TSO a context switch makes this CPU's stores visible before it
        // runs the new context: x86's CR3 write serialises, and arm64's
        // `__switch_to` issues `DSB ISH`, whose store drain is taken here to
        // come with the root write. The arm mode keeps arm64's weaker rule: `MSR
        // TTBR0_EL1` is no barrier, so what the switch stored before it waits for
        // the policy's own barrier or the `DSB ISH` at the switch's end
        // (`ops::switch_to`). What that `DSB` completes of this CPU's
        // invalidations it completes there, the latest point; the root write
        // itself completes nothing.
        if self.core.shape.memory != Memory::Arm {
            self.core.drain_own(self.cpu);
        }
        let a = asid.get();
        let walks = if self.core.shape.arm64 { RootWalks::OldUntilSync } else { RootWalks::NewOnly };
        self.st().m.write_root(self.cpu, root, a, noflush, walks);
        let rk = match root {
            Root::Mm(m) => m.0 as u64,
            Root::Reserved => 0xffff,
        };
        self.core.event_kind(self.cpu, mix(mix(0xa_0000 ^ rk, a as u64), noflush as u64), Kind::Root, || {
            let r = match root {
                Root::Mm(m) => format!("mm{}", m.0),
                Root::Reserved => "the reserved table".to_string(),
            };
            format!("write root: {r}, asid {a}{}", if noflush { "" } else { ", flushing that asid" })
        });
    }

    fn tlbi(&self, op: Tlbi, scope: Scope) {
        self.core.pause();
        if scope == Scope::Broadcast {
            self.initiated();
        }
        // x86's local invalidations are synchronous; every other one waits for
        // its issuer's completing barrier (`kernel::Pending`).
        let waits = self.core.shape.arm64 || scope == Scope::Broadcast;
        let (n, fresh) = if waits {
            (0, self.st().m.issue(self.cpu, op, scope))
        } else {
            (self.st().m.tlbi(self.cpu, op, scope), false)
        };
        let key = match op {
            Tlbi::Va { asid, va } => mix(asid.get() as u64, va.0),
            Tlbi::VaAllAsids { va } => mix(1, va.0),
            Tlbi::Asid(a) => mix(2, a.get() as u64),
            Tlbi::All => 3,
            Tlbi::Range { asid, va, pages } => {
                mix(mix(4, asid.map_or(u64::MAX, |a| a.get() as u64)), mix(va.0, pages as u64))
            }
            Tlbi::AllNonGlobal => 5,
        };
        self.core.event_kind(self.cpu, mix(0xb_0000 ^ key, scope as u64), Kind::Invalidate, || {
            let what = match op {
                Tlbi::Va { asid, va } => format!("va {:#x} asid {}", va.0, asid.get()),
                Tlbi::VaAllAsids { va } => format!("va {:#x} all asids", va.0),
                Tlbi::Asid(a) => format!("asid {}", a.get()),
                Tlbi::All => "everything".to_string(),
                Tlbi::Range { asid: Some(a), va, pages } => {
                    format!("{pages} page(s) from {:#x} asid {}", va.0, a.get())
                }
                Tlbi::Range { asid: None, va, pages } => format!("{pages} page(s) from {:#x} in every asid", va.0),
                Tlbi::AllNonGlobal => "every non-global entry".to_string(),
            };
            let s = match scope {
                Scope::Local => "local",
                Scope::Broadcast => "broadcast",
            };
            if waits {
                let by = if self.core.shape.arm64 { "DSB" } else { "TLBSYNC" };
                format!("invalidate {what} ({s}): {ISSUED} {by}")
            } else {
                format!("invalidate {what} ({s}): {n} {}", entries_removed(n))
            }
        });
        if fresh && self.core.record {
            let mut st = self.st();
            let at = st.events.len() - 1;
            let key = Pending { op, broadcast: scope == Scope::Broadcast, issuer_done: false }.key();
            st.issued.push((self.cpu, key, at));
        }
    }

    fn barrier(&self, b: Barrier) {
        // `ISB` synchronises the context: a root written before it is the
        // only one this CPU's walks use from here (`kernel::Machine::synchronise`).
        if b == Barrier::Isb && self.core.st.borrow().m.unsynchronised(self.cpu) {
            self.st().m.synchronise(self.cpu);
        }
        // How much of this CPU's pending invalidations the barrier completes
        // (`kernel::Pending`): arm64's `DSB ISH` all, `DSB NSH` the issuer's
        // own part (all of a local one); x86's `TLBSYNC` its `INVLPGB`s.
        let completes = |p: &Pending| match b {
            Barrier::Dsb(Domain::InnerShareable) => Part::Whole,
            Barrier::Dsb(Domain::NonShareable) => Part::IssuersTlb,
            Barrier::TlbSync if p.broadcast => Part::Whole,
            _ => Part::Nothing,
        };
        let (drains, pending) = {
            let st = self.core.st.borrow();
            (
                !matches!(b, Barrier::Isb) && !st.cpus[self.cpu].buffer.is_empty(),
                st.m.pending(self.cpu).iter().any(|p| p.left(completes(p)) != Part::Nothing),
            )
        };
        // The thread may have been preempted just before a `DSB ISH` and run it
        // on another CPU, or have moved before this flush: then it completes
        // none of this CPU's invalidations.
        let pending = pending
            && self.preempt() != Preempt::Moved
            && !(b == Barrier::Dsb(Domain::InnerShareable)
                && self.preempt() == Preempt::May
                && self.core.move_thread(self.cpu, "DSB ISH", || {}));
        // Only a barrier with stores to drain does anything another CPU can see.
        // Completing invalidations needs no point of its own: a step of another
        // CPU that could come between this step's start and the barrier can come
        // before this step, where the same invalidations are pending and the
        // page tables are the same, so completing within the step is completing
        // at the barrier (and a TLBI followed at once by its DSB is explored as
        // it was when invalidations took effect when issued).
        //
        // In the arm mode a `DSB` that both completes invalidations and drains
        // stores may do the first before the second is visible: nothing orders a
        // `TLBI` after an earlier store but a `DSB ISHST` between them. That
        // order is explored here: the invalidations complete in the barrier's
        // step and the stores drain in a step of their own after it, so the
        // hardware's fills in between read the page tables without them. The
        // other order, the stores first, is a drain the scheduler offers before
        // the barrier's step.
        let split = drains && pending && self.core.shape.memory == Memory::Arm;
        if drains {
            self.core.pause();
            if !split {
                self.core.drain_own(self.cpu);
            }
        }
        if b != Barrier::TlbSync {
            // No instruction after a `DSB` (`ST` too) or an `ISB` executes
            // until it completes, and `smp_mb()` orders later loads: the
            // CPU's later loads read nothing overwritten before this point.
            self.core.catch_up(self.cpu);
        }
        // Those issued in this step read in the trace as taking effect when
        // issued (nothing could come between); the others are told here.
        let (mut k, mut n, mut own) = (0, 0, (0, 0));
        if pending {
            let me = self.cpu;
            let record = self.core.record;
            let st = &mut *self.st();
            let State { m, events, issued, step, .. } = st;
            m.complete(me, completes, |p, removed, rest| {
                if let Some(rest) = rest {
                    // Done on this CPU's TLB only: still pending, under its new key.
                    rekey_issued(issued, me, p.key(), rest.key());
                    own = (own.0 + 1, own.1 + removed);
                    return;
                }
                let at = forget_issued(issued, me, p.key());
                match at.filter(|&at| record && events[at].step == *step) {
                    Some(at) => {
                        let e = &mut events[at];
                        let head = e.text.split(": ").next().unwrap_or_default().to_string();
                        e.text = format!("{head}: {removed} {}", entries_removed(removed));
                    }
                    None => {
                        k += 1;
                        n += removed;
                    }
                }
            });
        }
        self.core.event(self.cpu, 0xc_0000, || {
            let mut text = format!("barrier {b:?}");
            if k > 0 {
                text += &format!(": {k} invalidation(s) issued in earlier steps complete, {n} {}", entries_removed(n));
            }
            if own.0 > 0 {
                text += &format!(
                    "{} {} broadcast invalidation(s) complete on this CPU's TLB only, {} {}; the other CPUs' wait for a DSB ISH",
                    if k > 0 { ";" } else { ":" },
                    own.0,
                    own.1,
                    entries_removed(own.1)
                );
            }
            text
        });
        if split {
            self.core.pause();
            self.core.drain_own(self.cpu);
        }
    }

    fn send_ipi<F: Fn(&Self)>(&self, targets: &CpuMask, handler: F) {
        self.core.pause();
        self.initiated();
        let mut list = Vec::new();
        targets.for_each(|c| list.push(c.index()));
        let h: &dyn Fn(&CheckHw<'c>) = &handler;
        // SAFETY: this call returns only after every target ran the handler.
        let p = unsafe { erase(h) };
        self.enqueue(list.into_iter(), p, true);
        while self.core.st.borrow().cpus[self.cpu].sync_out > 0 {
            self.core.block(Block::Sync);
        }
    }

    fn send_ipi_async<F: Fn(&Self)>(&self, targets: &CpuMask, handler: F) {
        self.core.pause();
        self.initiated();
        let mut list = Vec::new();
        targets.for_each(|c| list.push(c.index()));
        // The sender does not wait: its handlers may run after it has returned
        // (when the protocol stops waiting, as the kernel's initiator does), so the
        // handler is moved into a box in the execution's arena, which lives until
        // the execution ends. What it borrows must outlive every shootdown, as a
        // kernel's handler reads only global and per-CPU memory: the contract of
        // `Hw::send_ipi_async`, which the policies' handlers keep by capturing only
        // the policy's shared state and values they own.
        let b: Box<dyn Fn(&CheckHw<'c>) + '_> = Box::new(handler);
        let b: &dyn Fn(&CheckHw<'c>) = Box::leak(b);
        // SAFETY: see above.
        let p = unsafe { erase(b) };
        self.enqueue(list.into_iter(), p, false);
    }

    fn send_ipi_all_but_self_async<F: Fn(&Self)>(&self, handler: F) {
        self.core.pause();
        self.initiated();
        let b: Box<dyn Fn(&CheckHw<'c>) + '_> = Box::new(handler);
        let b: &dyn Fn(&CheckHw<'c>) = Box::leak(b);
        // SAFETY: as in `send_ipi_async`.
        let p = unsafe { erase(b) };
        self.enqueue(0..self.core.shape.cpus, p, false);
    }

    fn shared(&self, _addr: usize, _access: Access) {}

    fn spin_on(&self, _addr: usize) {}

    fn phase(&self, phase: Phase) {
        self.core.event(self.cpu, 0xd_0000 + phase as u64, || {
            format!(
                "phase: {}",
                match phase {
                    Phase::Issue => "issue",
                    Phase::Dispatch => "dispatch",
                    Phase::Sync => "sync",
                    Phase::Done => "done",
                }
            )
        });
        if phase == Phase::Done {
            // The protocol has stopped waiting, and so does the initiator: the
            // handlers of its asynchronous IPIs may still be pending or running (a
            // protocol may acknowledge before it invalidates, or stop waiting too
            // early), and what its caller does next (the oracle's judgement, freeing
            // frames, the next request) happens as it would in the kernel.
            self.core.st.borrow_mut().cpus[self.cpu].forget_reads();
        }
    }

    /// A second for every operation any CPU has started: every deadline a policy
    /// set has passed by its next operation. The value read is part of this CPU's
    /// history (it depends on what other CPUs did).
    fn jiffies(&self) -> u64 {
        self.core.pause();
        let started: u64 = self.st().cpus.iter().map(|c| c.ops_done as u64).sum();
        let j = started * 1000;
        self.core.remember(self.cpu, mix(0x19_0000, j));
        j
    }

    fn irqs_off<R>(&self, f: impl FnOnce() -> R) -> R {
        self.irq_disable();
        let r = f();
        self.irq_enable();
        r
    }

    fn irq_disable(&self) {
        self.st().cpus[self.cpu].irq_off += 1;
    }

    fn irq_enable(&self) {
        let c = &mut self.st().cpus[self.cpu];
        c.irq_off = c.irq_off.checked_sub(1).expect("no_kernel_bug: local_irq_enable without local_irq_disable");
    }

    /// The flush of `mm` this CPU runs, taken over with the smallest free
    /// ticket where the kernel allows it under `rule` (see
    /// `Machine::take_lazy`).
    fn defer_flush(&self, mm: MmId, rule: Defer) -> Option<FlushTicket> {
        let (t, holds) = self.st().m.take_lazy(self.cpu, mm.0, rule)?;
        // A lazy shootdown is a cross-CPU invalidation started here.
        self.initiated();
        self.core.event(self.cpu, mix(0x1a_0000 + u64::from(!holds) * 0x100, t as u64), || {
            if holds {
                format!("the flush is deferred (ticket {t}): its memory is held until the policy completes it")
            } else {
                format!(
                    "the flush is deferred (ticket {t}) as mm{}'s munmap_inprogress is set: it holds nothing, \
                     and its caller takes it as done when it returns",
                    mm.0
                )
            }
        });
        Some(FlushTicket(t))
    }

    /// Discharges the ticket's obligations and frees what it held, as the
    /// kernel's reclamation does (see `crate::ops::complete_lazy`).
    fn flush_complete(&self, ticket: FlushTicket) {
        crate::ops::complete_lazy(self.core, self.cpu, ticket.0);
    }

    fn note(&self, note: Note) {
        match note {
            Note::AsidRollover => self.core.rollovers.set(self.core.rollovers.get() + 1),
        }
        self.core.event_kind(self.cpu, 0xe_0000, Kind::Note, || match note {
            Note::AsidRollover => "ASID rollover: a new generation begins".to_string(),
        });
    }
}
