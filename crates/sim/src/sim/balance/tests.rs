//! The periodic, idle and active balances on machine states built for each
//! rule.

use super::*;
use crate::preset::{self, Kernel};
use tlbkit_policy::asid::LinuxX86;

/// Computes in steps of 30,000 cycles, a thousand of them.
struct Spin(u32);

impl Program for Spin {
    fn next(&mut self, _: u64) -> Op {
        self.0 = self.0.saturating_sub(1);
        if self.0 == 0 {
            Op::Exit
        } else {
            Op::Compute(30_000)
        }
    }
}

/// `machine` (all its CPUs, SMT as the preset has it) running `kernel`,
/// with a new task queued on each CPU of `cpus` (a CPU named twice gets
/// two).
fn machine(machine: &str, kernel: Kernel, cpus: &[usize]) -> Sim {
    let mut p = preset::named(machine);
    p.kernel = kernel;
    let n = p.real_cores;
    let cfg = SimConfig { max_mms: 4, ..SimConfig::quiet(p, n, 1) };
    let mut sim = Sim::new(cfg, LinuxX86::new(n, 4, true));
    let mm = sim.new_mm().unwrap();
    for &cpu in cpus {
        let t = sim.new_thread(mm, Box::new(Spin(1_000)), cpu, false);
        sim.enqueue_new(t, cpu, 0, cpu);
    }
    sim
}

#[test]
fn an_idle_core_takes_a_task_from_a_core_running_two_by_active_balance() {
    // icx8336c: nodes of 32 cores x 2 threads, CPU c and c + 32 one core.
    // Core 0's threads run a task each; CPU 1's core is idle. Its balance
    // of the cache domain (groups: cores) finds core 0 two tasks ahead and
    // wants one, but neither thread has a task to spare: each balance fails
    // and the fourth (more than `cache_nice_tries` + 2) has CPU 0's stopper
    // push its task over. v6.6 reaches it as `group_smt_balance`, v6.1 by
    // `prefer_sibling`. The balances come a domain's interval apart: its
    // weight in ms, 64.
    for kernel in [Kernel::Linux(6, 1), Kernel::Linux(6, 6)] {
        let mut sim = machine("icx8336c", kernel, &[0, 32]);
        let ms = sim.scheduler.tun().ms;
        let mut now = 10_000 * ms;
        for failures in 1..=3 {
            sim.rebalance_domains(1, 1, Idle::Idle, now);
            assert_eq!(sim.scheduler.cpu(1).balancing().failures(Level::Llc), failures, "{kernel:?}");
            assert!(!sim.scheduler.cpu(0).balancing().pushing());
            now += 64 * ms;
        }
        sim.rebalance_domains(1, 1, Idle::Idle, now);
        assert!(sim.scheduler.cpu(0).balancing().pushing(), "{kernel:?}: the fourth failure starts an active balance");
        assert!(sim.scheduler.cpu_mut(0).resched_owed(), "the stopper preempts CPU 0's task");
        sim.schedule(0, None, now);
        let loads: Vec<u32> = [0, 32, 1].iter().map(|&c| sim.scheduler.load_of(c)).collect();
        assert_eq!(loads, [0, 1, 1], "{kernel:?}");
        assert_eq!(sim.scheduler.cpu(1).balancing().failures(Level::Llc), 0);
    }
}

#[test]
fn from_v6_6_a_group_balances_from_its_first_idle_cpu_on_an_idle_core() {
    // icx8336c's node 1 (CPUs 64-127; CPU c and c + 32 one core): CPUs 64,
    // 65, 97 and 98 busy, so 66 is idle on a busy core (its sibling 98
    // runs) and 67 the first idle CPU of a wholly idle core. The node's
    // balance of the machine is 66's to make before v6.6, 67's from it.
    let first = |kernel| {
        let sim = machine("icx8336c", kernel, &[64, 65, 97, 98]);
        (64..128).find(|&c| sim.should_we_balance(c, Level::Machine, &sim.span(c, Level::Machine), Idle::Idle))
    };
    assert_eq!(first(Kernel::Linux(6, 1)), Some(66));
    assert_eq!(first(Kernel::Linux(6, 6)), Some(67));
}

#[test]
fn the_kicked_idle_cpu_balances_every_idle_cpu_that_is_due_itself_last() {
    // milan (v6.15), cache domains of 8 CPUs: CPU 0 runs three tasks, every
    // other CPU is idle. CPU 0's own balance finds nothing to take, and its
    // node's balance is an idle CPU's to make; running two or more, it
    // kicks the first idle CPU, 1, which balances CPU 2 (one of CPU 0's
    // three: half the difference), CPU 3 (half of 2 - 0), and no more: CPU
    // 0 is left with one, and CPU 1 has balanced itself last, for nothing.
    let mut sim = machine("milan", Kernel::Linux(6, 15), &[0, 0, 0]);
    let ms = sim.scheduler.tun().ms;
    sim.tick_balance(0, 10_000 * ms);
    let loads: Vec<u32> = (0..8).map(|c| sim.scheduler.load_of(c)).collect();
    assert_eq!(loads, [1, 0, 1, 1, 0, 0, 0, 0]);
    assert_eq!((8..64).map(|c| sim.scheduler.load_of(c)).sum::<u32>(), 0);
    // No kick again before `nohz.next_balance`.
    assert!(sim.scheduler.nohz_next() > 10_000 * ms);
}
