//! The wake-up of an idle CPU: the idle state it waits in, whether the waker
//! must interrupt it, and what leaving the state costs.
//!
//! - **Polling idle.** An idle CPU whose idle loop polls its thread flags has
//!   `TIF_POLLING_NRFLAG` set, and a remote CPU wakes it by setting
//!   `TIF_NEED_RESCHED` alone, with no IPI: Linux's `resched_curr`
//!   (`kernel/sched/core.c`: `set_nr_and_not_polling`, v3.16 to v6.x; v3.15's
//!   `resched_task` tests `tsk_is_polling` the same way) and the wake list's
//!   `send_call_function_single_ipi` (`set_nr_if_polling`, v5.8 on;
//!   `ttwu_queue_remote` from v3.16). x86's polling states are
//!   cpuidle's POLL state (`drivers/cpuidle/poll_state.c`, `poll_idle`) and
//!   every state entered with `MWAIT` on the thread-flags line
//!   (`mwait_idle_with_hints`, `arch/x86/include/asm/mwait.h`, which
//!   `intel_idle` and `acpi_idle`'s FFH states call; `mwait_idle` in
//!   `arch/x86/kernel/process.c`): the store to the monitored line ends the
//!   `MWAIT`. arm64's `WFI` and x86's `HLT` do not poll: they need the IPI.
//!   FreeBSD's x86 `cpu_idle_mwait` (`sys/x86/x86/cpu_machdep.c`) likewise
//!   waits on a monitored state word, and `cpu_idle_wakeup`, which ULE's
//!   `tdq_notify` calls first, ends it with a store and no IPI; the FIFO
//!   class's wake-up goes through the same path here, so a FreeBSD preset's
//!   `idle_polling_states` says the same.
//! - **Exit latency.** The woken CPU starts after the exit latency of the
//!   state it was in (the preset's `idle*_exit`, from `intel_idle`'s tables
//!   where the kernel has one for the CPU model), after the flag's store
//!   reached it (one cache-line transfer, drawn from the seed around its mean
//!   as an IPI's delivery is: [`crate::noise`]) when it polls, after the
//!   reschedule IPI's delivery when it does not.
//! - **Which state.** cpuidle's governor (menu, teo) picks the state by the
//!   idle time it predicts; the model takes the deepest state whose target
//!   residency the CPU's idle time, up to the wake-up, covers, as a governor
//!   predicting it exactly would (a simplification: no misprediction, no
//!   PM QoS latency limit, no promotion or demotion by the hardware). A
//!   preset keeps at most four states: x86's POLL and the machine's C1,
//!   C1E and deepest core state, an intermediate one (Haswell's C3) left out.
//!
//! `--set cpuidle=off` wakes every idle CPU with a reschedule IPI and starts
//! it at the IPI's delivery, as the model did before idle states existed.

use super::*;
use crate::toggle::CPUIDLE;

impl Sim {
    /// Wakes `cpu`, idle since its clock, from `from` at `t`; returns when it
    /// starts running: after the IPI's delivery (counted) or the flag's
    /// store, and its idle state's exit latency.
    pub(super) fn wake_idle(&mut self, cpu: usize, from: usize, t: u64) -> u64 {
        let c = self.m.costs;
        let (exit, polls) = if self.features().on(CPUIDLE) {
            let idle = t.saturating_sub(self.scheduler.cpu(cpu).clock());
            let (_, exit, polls) = c.idle.state(idle);
            (exit, polls)
        } else {
            (0, false)
        };
        if polls {
            // The store's line reaches the monitor as any line does: its
            // latency drawn as an IPI's is (`crate::noise`).
            let line = self.m.transfer_cost(from, cpu);
            return t + self.m.noise.wake_delivery(line) + exit;
        }
        self.m.counters.ipis_sent += 1;
        let mean = c.ipi.ipi_deliver + if self.m.cross_socket(from, cpu) { c.ipi.ipi_cross_socket } else { 0 };
        t + c.ipi.ipi_send + self.m.noise.wake_delivery(mean) + exit
    }
}

#[cfg(test)]
mod tests {
    use crate::preset::{self, IdleCosts};
    use crate::sim::{Sim, SimConfig};
    use crate::toggle::CPUIDLE;
    use tlbkit_policy::asid::LinuxX86;

    /// A quiet machine of 4 CPUs of `machine`, nothing run: every CPU idle
    /// since time 0.
    fn sim(machine: &str, cpuidle: bool) -> Sim {
        let cfg = SimConfig { max_mms: 4, ..SimConfig::quiet(preset::named(machine), 4, 1) };
        let cfg = SimConfig { kernel: cfg.kernel.with(CPUIDLE, cpuidle), ..cfg };
        Sim::new(cfg, LinuxX86::new(4, 4, true))
    }

    #[test]
    fn the_state_is_the_deepest_whose_residency_the_idle_time_covers() {
        let i = IdleCosts {
            idle_polling_states: 2,
            idle0_exit: 0,
            idle1_exit: 10,
            idle1_residency: 100,
            idle2_exit: 50,
            idle2_residency: 400,
            idle3_exit: 0,
            idle3_residency: 0,
        };
        assert_eq!(i.state(99), (0, 0, true));
        assert_eq!(i.state(100), (1, 10, true));
        assert_eq!(i.state(10_000), (2, 50, false), "state 3 is absent; state 2 does not poll");
    }

    #[test]
    fn a_polling_idle_cpu_is_woken_with_no_ipi_after_its_exit_latency() {
        // skx8170: intel_idle, every state MWAIT; C6 after 600 us idle.
        let mut s = sim("skx8170", true);
        let p = preset::named("skx8170");
        let idle_since = s.scheduler.cpu(1).clock();
        let t = idle_since + 2_000_000; // ~950 us at 2.1 GHz: C6
        let ipis = s.m.counters.ipis_sent;
        let start = s.wake_idle(1, 0, t);
        assert_eq!(s.m.counters.ipis_sent, ipis, "no IPI to a polling CPU");
        assert_eq!(start - t, s.m.transfer_cost(0, 1) + p.costs.idle.idle3_exit);
        // Shortly idle: POLL, nothing but the flag's line.
        let start = s.wake_idle(1, 0, idle_since + 1);
        assert_eq!(start - idle_since - 1, s.m.transfer_cost(0, 1));
    }

    #[test]
    fn a_wfi_cpu_gets_an_ipi_and_cpuidle_off_is_the_old_wake_up() {
        let p = preset::named("altra");
        let mut s = sim("altra", true);
        let t = s.scheduler.cpu(1).clock() + 5_000_000;
        let start = s.wake_idle(1, 0, t);
        assert_eq!(s.m.counters.ipis_sent, 1, "WFI does not poll");
        assert_eq!(start - t, p.costs.ipi.ipi_send + p.costs.ipi.ipi_deliver + p.costs.idle.idle0_exit);
        let mut off = sim("skx8170", false);
        let t = off.scheduler.cpu(1).clock() + 2_000_000;
        let start = off.wake_idle(1, 0, t);
        let q = preset::named("skx8170").costs.ipi;
        assert_eq!((off.m.counters.ipis_sent, start - t), (1, q.ipi_send + q.ipi_deliver));
    }
}
