//! Taking a CPU's pending interrupts at the start of its step: each
//! handler runs on the CPU, with what the code it interrupted was waiting
//! for and about to access kept aside (and in the state's hash) until it
//! returns.

use super::*;

impl Core {
    /// Runs CPU `cpu`'s pending interrupt handlers, oldest first, unless its
    /// interrupts are off or it is in a handler already.
    #[inline(never)]
    pub(super) fn take_interrupts(&self, cpu: usize) {
        loop {
            let irq = {
                let mut st = self.st.borrow_mut();
                let c = &mut st.cpus[cpu];
                if c.irq_off > 0 || c.in_handler {
                    return;
                }
                let Some(irq) = c.pending.pop_front() else { return };
                c.in_handler = true;
                // A CPU that was waiting runs the handler; it waits again after.
                c.interrupted = Some((std::mem::replace(&mut c.block, Block::No), c.next.take()));
                let saved = c.history;
                let resting = st.stale.resting() & 1 << cpu != 0;
                st.m.enter_irq(cpu);
                (irq, saved, resting)
            };
            let (irq, saved, resting) = irq;
            // The handler's loads see what the sender stored before it
            // (Linux's IPI handlers begin with a fully ordered `xchg`).
            self.catch_up(cpu);
            self.event_kind(cpu, 0x1_0000 + irq.from as u64, Kind::Ipi, || {
                format!("interrupt: IPI from cpu{}", irq.from)
            });
            // SAFETY: lifetime only: the core outlives every step of its execution,
            // and this `&'static` goes only into `hw`, which the handler gets by
            // reference (`CheckHw` is not `Clone`) and which drops in this call.
            let core: &'static Core = unsafe { &*(self as *const Core) };
            let hw = CheckHw { core, cpu };
            // SAFETY: a synchronous handler borrows from its sender, which waits
            // until every target has run it; an asynchronous one lives in the
            // execution's arena and borrows only what outlives every shootdown
            // (see `send_ipi_async`).
            unsafe { (*irq.handler)(&hw) };
            let judged = {
                let mut st = self.st.borrow_mut();
                let c = &mut st.cpus[cpu];
                c.in_handler = false;
                (c.block, c.next) = c.interrupted.take().expect("a handler's interrupted code");
                // The handler leaves the interrupted code's locals as they were, so
                // its history is what the interrupted code had; what the handler
                // did lives on in shared memory and the machine.
                st.cpus[cpu].history = mix(saved, irq.from as u64);
                if irq.sync {
                    st.cpus[irq.from].sync_out -= 1;
                }
                // Flushes that returned while this CPU was in the handler are
                // judged for it now, before it can run anything else.
                st.m.leave_irq(cpu)
            };
            // Back at rest if it was (what it loads next comes after an
            // ordering point still).
            if resting {
                self.rest(cpu);
            }
            if let Err(v) = judged {
                self.violated(v);
            }
            if self.record {
                let mut st = self.st.borrow_mut();
                let step = st.step;
                let text = "return from interrupt".to_string();
                st.events.push(Event { cpu: Some(cpu), drain: false, step, text, kind: Kind::Other });
            }
        }
    }
}
