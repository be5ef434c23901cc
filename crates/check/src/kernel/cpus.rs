//! What each CPU is doing, as the machine records it: its task and where it
//! stands between user mode and the kernel, and the windows it spends with
//! interrupts off (an interrupt handler, its reclaim's deferred flush), for
//! which the flushes that return meanwhile are judged late.

use super::*;

impl Machine {
    /// Sets what CPU `cpu` runs and where it stands ([`Mode`]). Keeps the
    /// scheduler's record whole: a switch starting away from another process
    /// notes that process as being left ([`CpuTasks::leaving`]) until the
    /// switch ends, and a CPU running a process holds its address space
    /// ([`CpuTasks::active`]) until it runs another.
    #[inline]
    pub fn set_task(&mut self, cpu: usize, task: Task, mode: Mode) {
        let (user, switching) = (mode == Mode::User, mode == Mode::Switching);
        let sched = &mut self.sched;
        // A switch starting: the process switched away from, if any, is being left.
        if switching && !sched.switching[cpu] {
            sched.leaving[cpu] = match sched.tasks[cpu] {
                Task::User(prev) if Task::User(prev) != task => Some(prev),
                _ => None,
            };
        } else if !switching {
            sched.leaving[cpu] = None;
        }
        if let Task::User(s) = task {
            sched.active[cpu] = Some(s);
        }
        sched.tasks[cpu] = task;
        sched.user_mode[cpu] = user;
        sched.switching[cpu] = switching;
        if user {
            // The exception return to user space synchronises the context.
            self.synchronise(cpu);
        }
    }

    /// Notes that a CPU switched to slot `slot` (it is no longer alike the
    /// slots no CPU ever ran).
    #[inline]
    pub fn touch(&mut self, slot: u32) {
        self.touched[slot as usize] = true;
    }

    /// CPU `cpu` enters an interrupt handler: until [`Machine::leave_irq`] it
    /// uses nothing of the process it interrupted, and a flush that returns
    /// meanwhile is judged for it when it leaves.
    #[inline]
    pub fn enter_irq(&mut self, cpu: usize) {
        self.in_irq[cpu] = true;
        // Taking the interrupt synchronises the context.
        self.synchronise(cpu);
    }

    /// CPU `cpu` returns from its interrupt handler: every flush that returned
    /// while it was inside is judged for it now (`no_stale_held`, as
    /// [`Machine::discharge`]), unless it is still inside its reclaim's
    /// deferred flush ([`Machine::enter_batch_flush`]), which judges them when
    /// it returns.
    pub fn leave_irq(&mut self, cpu: usize) -> Result<(), Violation> {
        self.in_irq[cpu] = false;
        if self.in_batch_flush[cpu] {
            // Inside its reclaim's flush still: judged when that returns.
            return Ok(());
        }
        self.judge_deferred(cpu, "was in an interrupt handler")
    }

    /// CPU `cpu` starts its own reclaim's deferred flush
    /// (`try_to_unmap_flush`), whose local part runs with interrupts off: a
    /// flush that returns meanwhile is judged for it when it returns
    /// ([`Machine::leave_batch_flush`]), as for a CPU inside an interrupt
    /// handler. Taken to last the whole flush, which `Hw` cannot split (an
    /// over-approximation of the window; the judgement is delayed, never
    /// dropped).
    #[inline]
    pub fn enter_batch_flush(&mut self, cpu: usize) {
        debug_assert!(!self.in_batch_flush[cpu], "cpu{cpu} is inside a batch flush already");
        self.in_batch_flush[cpu] = true;
    }

    /// CPU `cpu`'s reclaim's deferred flush has returned: every flush that
    /// returned meanwhile is judged for it now, unless it is inside an
    /// interrupt handler, whose return judges them.
    pub fn leave_batch_flush(&mut self, cpu: usize) -> Result<(), Violation> {
        self.in_batch_flush[cpu] = false;
        if self.in_irq[cpu] {
            return Ok(());
        }
        self.judge_deferred(cpu, "ran its reclaim's deferred flush")
    }
}
