//! One CPU's translation state: which TLBs are its (its core's), its
//! translation root and tag, and the times the machine keeps for it (its
//! operation's end, its interrupts, the cycles taken from it). The machine
//! (`machine.rs`) holds one per CPU, and the TLBs, one per core; the DVM
//! queues (`stalls.rs`) charge their stalls to it.

use crate::tlb::{ThreadTlb, Tlb};
use tlbkit_policy::{MmId, Root};

/// One CPU's translation state.
pub struct CpuState {
    /// Which of the machine's TLBs are this CPU's (`Machine::tlb`): its own,
    /// or its core's, which it shares with the core's other threads.
    pub tlb_at: u32,
    /// This CPU's thread number in its core where the core's threads share
    /// its TLBs (`crate::tlb::ThreadTlb`); 0 otherwise.
    pub thread: u8,
    /// Whether other CPUs use the same TLBs.
    pub tlb_shared: bool,
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
    /// Of `stolen`, the cycles of IPI handlers: kernel time of the interrupted
    /// CPU (the rest is DVM processing, which the hardware does without
    /// entering the kernel). Taken by the engine with `stolen`.
    pub irq_stolen: u64,
    /// Whether a thread runs here (kept by the engine after each event): its next
    /// operation has begun at `busy_until` as far as an interrupt is concerned, so
    /// a handler arriving later takes its time from that operation instead of
    /// holding the operation back until the handler's end.
    pub running: bool,
    /// When the last call-function handler here took its `call_single_queue`
    /// (`llist_del_all`): a request queued before then is run by that handler,
    /// with no IPI of its own.
    pub csq_taken: u64,
    /// When that handler's last function returned (before its exception exit).
    pub csq_end: u64,
}

impl CpuState {
    /// Returns CPU `cpu`, with TLBs of its own, its root on the kernel's tables.
    pub fn new(cpu: usize) -> Self {
        CpuState {
            tlb_at: cpu as u32,
            thread: 0,
            tlb_shared: false,
            root: boot_root(),
            asid: 0,
            sync_until: 0,
            busy_until: 0,
            irq_until: 0,
            stolen: 0,
            irq_stolen: 0,
            running: false,
            csq_taken: 0,
            csq_end: 0,
        }
    }

    /// Returns this CPU's view of its TLBs among the machine's `tlbs`.
    #[inline(always)]
    pub fn tlb_in<'a>(&self, tlbs: &'a mut [Tlb]) -> ThreadTlb<'a> {
        ThreadTlb::new(&mut tlbs[self.tlb_at as usize], self.thread, self.tlb_shared)
    }
}

/// Returns the root register value of a CPU that has not yet run anything.
pub fn boot_root() -> Root {
    Root::Mm(MmId::KERNEL)
}
