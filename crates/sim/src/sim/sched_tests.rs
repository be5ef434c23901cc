//! The fair classes' scheduler in the engine: wake-up preemption, placement,
//! wake-affine, and balancing, each on a machine state built for the rule.

use super::*;
use crate::preset::{self, Kernel};
use crate::toggle::{DELAY_DEQUEUE, LAST_BUDDY, SYNC_SKIP_DELAYED, TTWU_QUEUE};
use tlbkit_policy::asid::LinuxArm64;

/// Computes in steps of 30,000 cycles, `left` of them, then exits.
struct Spin {
    left: u32,
}

impl Program for Spin {
    fn next(&mut self, _: u64) -> Op {
        if self.left == 0 {
            return Op::Exit;
        }
        self.left -= 1;
        Op::Compute(30_000)
    }
}

/// Opens a pipe and reads it: it sleeps until woken.
struct Sleeper {
    step: u32,
}

impl Program for Sleeper {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        match self.step {
            1 => Op::Sys(Sys::Pipe),
            2 => Op::Sys(Sys::PipeRead(ret as u32)),
            _ => Op::Exit,
        }
    }
}

/// Returns `ncpus` CPUs of an Ampere Altra under `sched`, with `migration`.
fn machine(sched: SchedKind, ncpus: usize, migration: bool) -> Sim {
    let cfg = SimConfig { sched, migration, max_events: 100_000, ..SimConfig::quiet(preset::named("altra"), ncpus, 1) };
    Sim::new(cfg, LinuxArm64::new(ncpus, 16, 16, false).unwrap())
}

/// Returns one CPU under `sched` where a [`Sleeper`] sleeps and a [`Spin`]
/// runs, and their thread ids.
fn spinner_and_sleeper(sched: SchedKind) -> (Sim, usize, usize) {
    let mut sim = machine(sched, 1, false);
    let sleeper = sim.spawn(Box::new(Sleeper { step: 0 })).unwrap();
    let spin = sim.spawn(Box::new(Spin { left: 1_000 })).unwrap();
    while !(sim.scheduler.thread(sleeper).state() == State::Blocked && sim.scheduler.cpu(0).cur() == Some(spin)) {
        assert!(sim.step(), "the sleeper never slept under the spinner");
    }
    // Let the spinner run a while (its slice protection is set at its pick).
    for _ in 0..10 {
        sim.step();
    }
    assert_eq!(sim.scheduler.cpu(0).cur(), Some(spin));
    (sim, spin, sleeper)
}

#[test]
fn cfs_a_wakeup_preempts_when_the_running_task_leads_by_more_than_the_wakeup_granularity() {
    let (mut sim, spin, sleeper) = spinner_and_sleeper(SchedKind::Cfs);
    let now = sim.scheduler.cpu(0).clock();
    // Level with the spinner: no preemption.
    sim.scheduler.update_curr(0, now);
    sim.scheduler.thread_mut(sleeper).se_mut().vruntime = sim.scheduler.thread(spin).se().vruntime;
    sim.wake(sleeper, 0, now, false);
    assert!(!sim.scheduler.cpu(0).need_resched(), "a wakee level with the running task does not preempt");
    // Behind by more than the granularity: it preempts, and runs next.
    let (mut sim, spin, sleeper) = spinner_and_sleeper(SchedKind::Cfs);
    let now = sim.scheduler.cpu(0).clock();
    sim.scheduler.update_curr(0, now);
    let gran = sim.scheduler.tun().wakeup_gran;
    sim.scheduler.thread_mut(sleeper).se_mut().vruntime = sim.scheduler.thread(spin).se().vruntime - gran - 1;
    sim.wake(sleeper, 0, now, false);
    assert!(sim.scheduler.cpu(0).need_resched());
    sim.step();
    assert_eq!(sim.scheduler.cpu(0).cur(), Some(sleeper), "the woken task runs at the CPU's next event");
    assert_eq!(sim.scheduler.thread(spin).state(), State::Runnable, "the preempted one is queued again");
}

#[test]
fn eevdf_a_wakeup_with_lag_preempts_and_one_without_waits_for_parity() {
    // No lag: placed at the average, it cannot beat the protected running task.
    let (mut sim, _, sleeper) = spinner_and_sleeper(SchedKind::Eevdf);
    let now = sim.scheduler.cpu(0).clock();
    sim.scheduler.thread_mut(sleeper).se_mut().vlag = 0;
    sim.wake(sleeper, 0, now, false);
    assert!(!sim.scheduler.cpu(0).need_resched(), "RUN_TO_PARITY keeps the running task");
    // Owed time: placed behind the average, it makes the running task
    // ineligible, and its deadline comes first.
    let (mut sim, _, sleeper) = spinner_and_sleeper(SchedKind::Eevdf);
    let now = sim.scheduler.cpu(0).clock();
    sim.scheduler.thread_mut(sleeper).se_mut().vlag = (sim.scheduler.tun().base_slice / 2) as i64;
    sim.wake(sleeper, 0, now, false);
    assert!(sim.scheduler.cpu(0).need_resched());
    sim.step();
    assert_eq!(sim.scheduler.cpu(0).cur(), Some(sleeper));
}

#[test]
fn cfs_a_long_sleeper_is_placed_half_a_latency_behind_min_vruntime() {
    let (mut sim, _, sleeper) = spinner_and_sleeper(SchedKind::Cfs);
    let now = sim.scheduler.cpu(0).clock();
    sim.scheduler.thread_mut(sleeper).se_mut().vruntime = 0;
    sim.wake(sleeper, 0, now, false);
    let floor = sim.scheduler.cpu(0).runq().min_vruntime - sim.scheduler.tun().latency / 2;
    assert_eq!(sim.scheduler.thread(sleeper).se().vruntime, floor);
}

#[test]
fn eevdf_a_sleeper_is_placed_at_its_lag_behind_the_average() {
    let (mut sim, spin, sleeper) = spinner_and_sleeper(SchedKind::Eevdf);
    let now = sim.scheduler.cpu(0).clock();
    sim.scheduler.update_curr(0, now);
    let v = sim.scheduler.thread(spin).se().vruntime;
    sim.scheduler.thread_mut(sleeper).se_mut().vlag = 1_000;
    sim.wake(sleeper, 0, now, false);
    // Alone with the spinner, the average is its virtual runtime; the lag is
    // scaled by (1024 + 1024) / 1024.
    let se = *sim.scheduler.thread(sleeper).se();
    assert_eq!(se.vruntime, v - 2_000);
    assert_eq!(se.deadline, se.vruntime + sim.scheduler.tun().base_slice);
}

/// Sets `loads` as the CPUs' runnable counts that the placement rules read
/// (and the idle counts beside them), without threads behind them.
fn set_loads(sim: &mut Sim, loads: &[u32]) {
    sim.scheduler.fake_loads(loads);
}

#[test]
fn wake_affine_puts_a_sync_wakee_on_the_wakers_cpu() {
    let mut sim = machine(SchedKind::Eevdf, 4, true);
    let wakee = sim.spawn(Box::new(Sleeper { step: 0 })).unwrap();
    // The waker runs alone on cpu0; the wakee last ran on cpu1, which runs one
    // task; every CPU is busy.
    set_loads(&mut sim, &[1, 1, 2, 2]);
    assert_eq!(sim.scheduler.select_task_rq(wakee, 1, 0, true).cpu, 0, "sync: the waker is about to sleep");
    assert_eq!(sim.scheduler.select_task_rq(wakee, 1, 0, false).cpu, 1, "not sync: two tasks here against one there");
    // An idle CPU sharing the cache is taken over both.
    set_loads(&mut sim, &[1, 1, 0, 2]);
    assert_eq!(sim.scheduler.select_task_rq(wakee, 1, 0, true).cpu, 2);
}

/// Returns 2 CPUs where cpu0 has two tasks queued and cpu1 none, nothing run yet.
fn two_queued_on_cpu0() -> (Sim, [usize; 2]) {
    let mut sim = machine(SchedKind::Eevdf, 2, true);
    let mm = sim.new_mm().unwrap();
    let [a, b] = [0, 1].map(|_| {
        let t = sim.new_thread(mm, Box::new(Spin { left: 10 }), 0, false);
        sim.enqueue_new(t, 0, 0, 0);
        t
    });
    assert_eq!(sim.scheduler.cpu(0).runq().len(), 2);
    assert_eq!(sim.scheduler.load_of(1), 0);
    (sim, [a, b])
}

#[test]
fn newly_idle_balance_pulls_a_task_from_the_busiest_cpu() {
    let (mut sim, queued) = two_queued_on_cpu0();
    let now = 10 * sim.scheduler.tun().migration_cost;
    let (pulled, after) = sim.newidle_balance(1, now);
    let t = pulled.expect("cpu1 pulls one of cpu0's tasks");
    assert!(queued.contains(&t));
    assert_eq!(sim.scheduler.thread(t).cpu(), 1);
    assert_eq!(sim.scheduler.cpu(0).runq().len(), 1);
    assert!(after > now, "the pull costs the run-queue lock and the task's state");
}

#[test]
fn newly_idle_balance_leaves_a_cache_hot_task() {
    let (mut sim, queued) = two_queued_on_cpu0();
    let now = 10 * sim.scheduler.tun().migration_cost;
    for t in queued {
        sim.scheduler.thread_mut(t).se_mut().exec_start = now - sim.scheduler.tun().migration_cost / 2;
    }
    assert_eq!(sim.newidle_balance(1, now).0, None, "both ran within the migration cost");
    let later = now + sim.scheduler.tun().migration_cost;
    assert!(sim.newidle_balance(1, later).0.is_some(), "cold again");
}

/// Makes `cpu`'s idle periods, as wake-ups end them, `period` cycles long
/// until its `avg_idle` has all but reached that.
fn idle_periods_of(sim: &mut Sim, cpu: usize, period: u64) {
    let ni = sim.scheduler.cpu_mut(cpu).newidle_mut();
    for i in 0..200 {
        ni.idle_from(i * 10 * period);
        ni.woken(i * 10 * period + period);
    }
    assert!(ni.avg_idle().abs_diff(period) <= period / 100 + 8, "{} against {period}", ni.avg_idle());
}

#[test]
fn a_cpu_whose_idle_periods_are_shorter_than_a_balance_does_not_balance() {
    let (mut sim, _) = two_queued_on_cpu0();
    assert!(sim.cfg.preset.kernel.newidle_gate_is_domain_cost());
    let now = 10 * sim.scheduler.tun().migration_cost;
    // A first balance, pulling nothing (both tasks cache-hot), costs the
    // cache domain's scan: cpu0's run queue.
    for t in 0..sim.scheduler.nthreads() {
        sim.scheduler.thread_mut(t).se_mut().exec_start = now;
    }
    let (pulled, after) = sim.newidle_balance(1, now);
    assert_eq!(pulled, None);
    let scan = after - now;
    assert_eq!(scan, sim.m.transfer_cost(1, 0), "one busy CPU's run queue read");
    // Idle periods shorter than that: no balance, and no time spent.
    idle_periods_of(&mut sim, 1, scan / 2);
    let later = now + 10 * sim.scheduler.tun().migration_cost;
    assert_eq!(sim.newidle_balance(1, later), (None, later));
    // Longer ones: it balances and pulls the (now cold) task.
    idle_periods_of(&mut sim, 1, 4 * scan);
    assert!(sim.newidle_balance(1, later).0.is_some());
}

#[test]
fn before_v5_16_an_average_idle_time_under_the_migration_cost_skips_the_balance() {
    let (mut v6, _) = two_queued_on_cpu0();
    let mc = v6.scheduler.tun().migration_cost;
    let now = 10 * mc;
    // v5.16 and later: the cache domain's cost (never measured: 0) is the gate.
    idle_periods_of(&mut v6, 1, mc * 4 / 5);
    assert!(v6.newidle_balance(1, now).0.is_some());
    let (mut sim, _) = two_queued_on_cpu0();
    idle_periods_of(&mut sim, 1, mc * 4 / 5);
    sim.cfg.preset.kernel = preset::Kernel::Linux(5, 13);
    assert_eq!(sim.newidle_balance(1, now), (None, now), "v5.13: 0.8 of the migration cost is too short");
    idle_periods_of(&mut sim, 1, mc * 5 / 4);
    assert!(sim.newidle_balance(1, now).0.is_some());
}

#[test]
fn a_pinned_task_is_never_pulled() {
    let (mut sim, queued) = two_queued_on_cpu0();
    for t in queued {
        sim.scheduler.thread_mut(t).pin();
    }
    // Queue them again so that the queue knows.
    let (x, y) = (sim.scheduler.unqueue(0, 0, 0).unwrap(), sim.scheduler.unqueue(0, 0, 0).unwrap());
    sim.scheduler.queue(0, x, 0);
    sim.scheduler.queue(0, y, 0);
    assert_eq!(sim.scheduler.cpu(0).runq().movable(), 0);
    assert_eq!(sim.newidle_balance(1, 10 * sim.scheduler.tun().migration_cost).0, None);
}

/// Starts a [`Sleeper`] and a [`Spin`] on `sim` and runs it until the sleeper
/// sleeps while the spinner runs; returns their ids.
fn sleeper_under_spinner(sim: &mut Sim) -> (usize, usize) {
    let sleeper = sim.spawn(Box::new(Sleeper { step: 0 })).unwrap();
    let spin = sim.spawn(Box::new(Spin { left: 1_000 })).unwrap();
    while sim.scheduler.thread(sleeper).state() != State::Blocked
        || sim.scheduler.thread(spin).state() != State::Running
    {
        assert!(sim.step(), "the sleeper never slept while the spinner ran");
    }
    (sleeper, spin)
}

/// Returns 40 CPUs of a Kunpeng 920 (cache domains of 32: CPUs 0 to 31 and
/// 32 to 39) under CFS, a [`Spin`] running on one CPU and a [`Sleeper`]
/// asleep, with `ttwu_queue`; and the spinner's CPU and the sleeper's id.
fn busy_cpu_and_sleeper(ttwu_queue: Option<bool>) -> (Sim, usize, usize) {
    let kernel = KernelChoices::default().with(TTWU_QUEUE, ttwu_queue);
    let cfg = SimConfig { sched: SchedKind::Cfs, kernel, ..SimConfig::quiet(preset::named("kunpeng920"), 40, 1) };
    let mut sim = Sim::new(cfg, LinuxArm64::new(40, 16, 16, false).unwrap());
    let (sleeper, spin) = sleeper_under_spinner(&mut sim);
    let busy = sim.scheduler.thread(spin).cpu();
    (sim, busy, sleeper)
}

#[test]
fn a_wakeup_across_cache_domains_queues_on_the_targets_wake_list_with_an_ipi() {
    let (mut sim, busy, sleeper) = busy_cpu_and_sleeper(None);
    assert!(busy < 32, "the spinner runs in the first cache domain");
    // ttwu_queue_cond: another cache domain's waker, not one sharing the cache.
    assert!(sim.queues_on_wakelist(busy, 33) && !sim.queues_on_wakelist(busy, 31 - busy % 2));
    let now = sim.scheduler.cpu(busy).clock();
    let (ipis, stolen) = (sim.m.counters.ipis_sent, sim.m.cpus[busy].stolen);
    // Level with the spinner, the wakee does not preempt: the IPI is sent anyway,
    // and its handler queues the thread.
    sim.scheduler.thread_mut(sleeper).se_mut().vruntime =
        sim.scheduler.thread(sim.scheduler.cpu(busy).cur().unwrap()).se().vruntime;
    let queued = sim.scheduler.cpu(busy).runq().len();
    sim.enqueue_wakelist(sleeper, busy, now, 33);
    assert_eq!(sim.m.counters.ipis_sent, ipis + 1);
    let c = sim.m.costs;
    assert_eq!(sim.m.cpus[busy].stolen, stolen + c.exception_entry + c.exception_exit);
    // Until the handler runs the thread is on the list, on no run queue.
    assert_eq!(sim.scheduler.thread(sleeper).state(), State::Blocked);
    assert_eq!(sim.scheduler.cpu(busy).runq().len(), queued);
    assert!(sim.scheduler.cpu(busy).wakes_pending());
    // The busy CPU's next event runs the handler first.
    let events = sim.stats.events;
    while sim.scheduler.cpu(busy).wakes_pending() {
        assert!(sim.step(), "the busy CPU never ran again");
    }
    assert!(sim.stats.events > events);
    assert_eq!(sim.scheduler.thread(sleeper).state(), State::Runnable);
    assert_eq!(sim.scheduler.thread(sleeper).cpu(), busy);
    assert_eq!(sim.scheduler.cpu(busy).runq().len(), queued + 1);
    assert!(!sim.scheduler.cpu(busy).need_resched());
    // With the switch off the waker takes the remote lock: no wake list.
    let (off, busy, _) = busy_cpu_and_sleeper(Some(false));
    assert!(!off.queues_on_wakelist(busy, 33));
}

/// One CFS CPU running `spinners` [`Spin`]s, where a woken [`Sleeper`]
/// preempts the running spinner `s`, whose virtual runtime lies half a wake-up
/// granularity past the leftmost queued spinner's. Returns the simulator
/// with the sleeper running, `s`, and the leftmost spinner. `last_buddy`:
/// the `--set last_buddy` switch.
fn preempted_near_the_leftmost(spinners: usize, last_buddy: Option<bool>) -> (Sim, usize, usize) {
    let kernel = KernelChoices::default().with(LAST_BUDDY, last_buddy);
    let cfg = SimConfig {
        sched: SchedKind::Cfs,
        max_events: 100_000,
        kernel,
        ..SimConfig::quiet(preset::named("altra"), 1, 1)
    };
    let mut sim = Sim::new(cfg, LinuxArm64::new(1, 16, 16, false).unwrap());
    let sleeper = sim.spawn(Box::new(Sleeper { step: 0 })).unwrap();
    for _ in 0..spinners {
        sim.spawn(Box::new(Spin { left: 1_000 })).unwrap();
    }
    while sim.scheduler.thread(sleeper).state() != State::Blocked {
        assert!(sim.step(), "the sleeper never slept");
    }
    for _ in 0..20 {
        sim.step();
    }
    let now = sim.scheduler.cpu(0).clock();
    sim.scheduler.update_curr(0, now);
    let s = sim.scheduler.cpu(0).cur().expect("a spinner runs");
    let left = sim.scheduler.cpu(0).runq().get(0).expect("spinners queued");
    let (left, left_v) = (left.tid as usize, left.key);
    let gran = sim.scheduler.tun().wakeup_gran;
    sim.scheduler.thread_mut(s).se_mut().vruntime = left_v + gran / 2;
    sim.scheduler.thread_mut(sleeper).se_mut().vruntime = left_v - gran;
    sim.wake(sleeper, 0, now, false);
    assert!(sim.scheduler.cpu(0).need_resched(), "the woken sleeper preempts");
    sim.step();
    assert_eq!(sim.scheduler.cpu(0).cur(), Some(sleeper));
    (sim, s, left)
}

#[test]
fn cfs_the_task_a_wakeup_preempted_runs_next_from_eight_tasks_on_the_queue() {
    // Eight tasks with the woken one: the preempted spinner is the last buddy,
    // and runs again when the sleeper exits, ahead of the leftmost.
    let (mut sim, s, left) = preempted_near_the_leftmost(7, None);
    assert_eq!(sim.scheduler.cpu(0).buddies().last, Some(s as u32));
    while sim.scheduler.cpu(0).cur() != Some(s) && sim.scheduler.cpu(0).cur() != Some(left) {
        assert!(sim.step());
    }
    assert_eq!(sim.scheduler.cpu(0).cur(), Some(s), "the last buddy runs before the leftmost");
    assert_eq!(sim.scheduler.cpu(0).buddies().last, None, "picked, it is no buddy any more");
    // Seven with the woken one, or eight under NO_LAST_BUDDY: no last buddy,
    // the leftmost runs.
    for (spinners, last_buddy) in [(6, None), (7, Some(false))] {
        let (mut sim, s, left) = preempted_near_the_leftmost(spinners, last_buddy);
        assert_eq!(sim.scheduler.cpu(0).buddies().last, None, "{spinners} spinners, {last_buddy:?}");
        while sim.scheduler.cpu(0).cur() != Some(s) && sim.scheduler.cpu(0).cur() != Some(left) {
            assert!(sim.step());
        }
        assert_eq!(sim.scheduler.cpu(0).cur(), Some(left), "{spinners} spinners, {last_buddy:?}");
    }
}

/// Returns a Linux x86 machine of `preset`'s first `ncpus` CPUs, SMT as `smt` says.
fn x86(preset: &str, ncpus: usize, smt: Option<bool>) -> Sim {
    use tlbkit_policy::asid::LinuxX86;
    let cfg = SimConfig { max_mms: 16, smt, ..SimConfig::quiet(preset::named(preset), ncpus, 1) };
    Sim::new(cfg, LinuxX86::new(ncpus, 16, true))
}

#[test]
fn forks_spread_over_the_nodes_and_cores_as_the_presets_kernel_balances_them() {
    // icx8336c runs Linux v6.1: 2 nodes of 32 cores x 2 threads (node 1 from
    // CPU 64). Processes a launcher on CPU 0 forks: two more on node 0, then
    // the nodes in turn, one to a core.
    let mut sim = x86("icx8336c", 128, None);
    let tids: Vec<usize> = (0..6).map(|_| sim.spawn(Box::new(Spin { left: 10 })).unwrap()).collect();
    let cpus: Vec<usize> = tids.iter().map(|&t| sim.scheduler.thread(t).cpu()).collect();
    assert_eq!(cpus, vec![0, 1, 2, 64, 3, 65]);
    assert_eq!(sim.fork_order(4, 0), Some(vec![0, 1, 2, 64]), "pft's threads start as forks do");
    // With SMT off each CPU is a core: CPU 32 is node 0's thirty-third core.
    assert_eq!(x86("icx8336c", 128, Some(false)).fork_order(4, 0), Some(vec![0, 1, 2, 64]));
    // skx8170 runs v5.10: node 0 until it has no idle CPU (52 of them).
    let order = x86("skx8170", 104, None).fork_order(53, 0).unwrap();
    assert!(order[..52].iter().all(|&c| c < 52) && order[52] == 52, "{order:?}");
    // FreeBSD's scheduler is not modelled: no fork balancing.
    assert_eq!(x86("westmere", 4, None).fork_order(4, 0), None);
}

#[test]
fn a_wakeup_takes_a_wholly_idle_core_before_an_idle_thread_of_a_busy_one() {
    // icx8336c, v6.1 (CFS): node 0's core c is CPUs c and c + 32. CPU 36
    // (core 4's second thread) and CPU 5 (core 5's first) are busy: the scan
    // from 37 passes CPU 37, idle beside busy CPU 5, for CPU 38, whose core
    // is idle. With SMT off each CPU is a core: 37.
    let mut busy = vec![0; 128];
    (busy[36], busy[5]) = (1, 1);
    for (smt, expect) in [(None, 38), (Some(false), 37)] {
        let mut sim = x86("icx8336c", 128, smt);
        let wakee = sim.spawn(Box::new(Sleeper { step: 0 })).unwrap();
        // Its recently used CPU is its previous one: no candidate of its own.
        sim.scheduler.thread_mut(wakee).recent_used_cpu = 36;
        set_loads(&mut sim, &busy);
        assert_eq!(sim.scheduler.select_task_rq(wakee, 36, 36, false).cpu, expect, "smt {smt:?}");
    }
    // No core wholly idle: the first idle CPU of the scan.
    let mut sim = x86("icx8336c", 128, None);
    let wakee = sim.spawn(Box::new(Sleeper { step: 0 })).unwrap();
    let loads: Vec<u32> = (0..128).map(|c| u32::from(c < 32 || c == 36)).collect();
    set_loads(&mut sim, &loads);
    assert_eq!(sim.scheduler.select_task_rq(wakee, 36, 36, false).cpu, 37);
}

#[test]
fn with_no_idle_core_a_wakeup_takes_an_idle_thread_of_the_previous_cpus_core_from_v5_13() {
    // icx8336c (v6.1): node 0's cache domain is CPUs 0 to 63, core c CPUs c
    // and c + 32. Every CPU of it busy but 37 (core 5's second thread) and
    // 39 (core 7's): no core is wholly idle. The wakee last ran on CPU 7 and
    // is woken from CPU 36: the scan of the cache domain would take 37, its
    // first idle CPU; `select_idle_smt` takes CPU 7's idle sibling, 39.
    let mut loads = vec![0; 128];
    for c in (0..64).filter(|&c| c != 37 && c != 39) {
        loads[c] = 1;
    }
    let pick = |kernel: Option<preset::Kernel>| {
        let mut p = preset::named("icx8336c");
        if let Some(k) = kernel {
            p.kernel = k;
        }
        use tlbkit_policy::asid::LinuxX86;
        let cfg = SimConfig { max_mms: 16, ..SimConfig::quiet(p, 128, 1) };
        let mut sim = Sim::new(cfg, LinuxX86::new(128, 16, true));
        let wakee = sim.spawn(Box::new(Sleeper { step: 0 })).unwrap();
        sim.scheduler.thread_mut(wakee).recent_used_cpu = 7;
        set_loads(&mut sim, &loads);
        sim.scheduler.select_task_rq(wakee, 7, 36, false).cpu
    };
    assert_eq!(pick(None), 39);
    // v5.12 had no such step: the scan's first idle CPU.
    assert_eq!(pick(Some(preset::Kernel::Linux(5, 12))), 37);
    assert!(preset::Kernel::Linux(5, 13).idle_smt_prev() && !preset::Kernel::Linux(5, 12).idle_smt_prev());
}

#[test]
fn a_wakeup_takes_the_wakees_recently_used_cpu_when_it_is_idle() {
    // icx8336c (v6.1, from v5.15's rule): CPUs 36 (the wakee's previous
    // one, the target) and 3 busy, CPU 7 (its recently used one) idle.
    let mut loads = vec![0; 128];
    (loads[36], loads[3]) = (1, 1);
    let mut sim = x86("icx8336c", 128, None);
    let wakee = sim.spawn(Box::new(Sleeper { step: 0 })).unwrap();
    set_loads(&mut sim, &loads);
    sim.scheduler.thread_mut(wakee).recent_used_cpu = 7;
    assert_eq!(sim.scheduler.select_task_rq(wakee, 36, 36, false).cpu, 7, "not the scan's first idle CPU, 37");
    assert_eq!(sim.scheduler.thread(wakee).recent_used_cpu, 36, "its record is now its previous CPU");
    // A busy recently used CPU: the scan, and the record moves all the same (v5.15 on).
    sim.scheduler.thread_mut(wakee).recent_used_cpu = 3;
    assert_eq!(sim.scheduler.select_task_rq(wakee, 36, 36, false).cpu, 37);
    assert_eq!(sim.scheduler.thread(wakee).recent_used_cpu, 36);
    // v5.10 (skx8170): the record moves only when taken, and an affine
    // wake-up makes the waker's CPU the waker's record.
    let mut sim = x86("skx8170", 104, None);
    let waker = sim.spawn(Box::new(Spin { left: 10 })).unwrap();
    let wakee = sim.spawn(Box::new(Sleeper { step: 0 })).unwrap();
    let this = sim.scheduler.thread(waker).cpu();
    sim.scheduler.run(this, waker, 0);
    sim.scheduler.thread_mut(wakee).recent_used_cpu = 3;
    let mut loads = vec![0; 104];
    (loads[this], loads[3], loads[20]) = (1, 1, 1);
    set_loads(&mut sim, &loads);
    sim.scheduler.select_task_rq(wakee, 20, this, false);
    assert_eq!(sim.scheduler.thread(wakee).recent_used_cpu, 3, "v5.10 keeps a record it did not take");
    assert_eq!(sim.scheduler.thread(waker).recent_used_cpu, this);
    use crate::sched::RecentUsed;
    use preset::Kernel;
    assert_eq!(Kernel::Linux(4, 16).recent_used(), RecentUsed::Never);
    assert_eq!(Kernel::Linux(4, 17).recent_used(), RecentUsed::Waker);
    assert_eq!(Kernel::Linux(5, 15).recent_used(), RecentUsed::Prev);
}

#[test]
fn a_busy_node_takes_a_task_from_a_busier_one_at_its_balance() {
    // icx8336c with SMT off, v6.1: nodes of 64 CPUs. Node 0 runs two tasks a
    // CPU, node 1 one: node 1's first CPU, busy, balances the machine level
    // and pulls one task from node 0; node 1's second CPU does not balance
    // for it (`should_we_balance`), nor does a node with an idle CPU.
    let setup = |idle_in_node1: bool| {
        let mut sim = x86("icx8336c", 128, Some(false));
        let mm = sim.new_mm().unwrap();
        for cpu in 0..128 {
            let n = if cpu < 64 { 2 } else { u32::from(!(idle_in_node1 && cpu == 72)) };
            for _ in 0..n {
                let t = sim.new_thread(mm, Box::new(Spin { left: 1_000 }), cpu, false);
                sim.enqueue_new(t, cpu, 0, cpu);
            }
        }
        sim
    };
    let now = 10_000_000_000;
    let mut sim = setup(false);
    let load = |sim: &Sim| (0..128).map(|c| sim.scheduler.load_of(c)).sum::<u32>();
    let before: Vec<u32> = (0..128).map(|c| sim.scheduler.load_of(c)).collect();
    sim.tick_balance(65, now);
    assert_eq!((0..128).map(|c| sim.scheduler.load_of(c)).collect::<Vec<_>>(), before, "not the group's first CPU");
    sim.tick_balance(64, now);
    assert_eq!(sim.scheduler.load_of(64), 2, "node 1's first CPU pulled a task");
    assert_eq!((0..64).map(|c| sim.scheduler.load_of(c)).sum::<u32>(), 127);
    assert_eq!(load(&sim), 192);
    // Not again before its interval (64 ms times busy_factor).
    sim.tick_balance(64, now + 1);
    assert_eq!(sim.scheduler.load_of(64), 2);
    // A node with an idle CPU: CPU 64's own balance of the machine is not
    // its to make (CPU 72, idle, balances for the node); its cache domain
    // having more than one busy CPU, it kicks the first idle CPU, 72, which
    // balances for itself (`CPU_IDLE`): nothing in its cache domain (no CPU
    // there runs two), one of node 0's tasks at the machine level (128 tasks
    // against 63: half the difference).
    let mut sim = setup(true);
    sim.tick_balance(64, now);
    assert_eq!((sim.scheduler.load_of(72), sim.scheduler.load_of(64)), (1, 1));
    assert_eq!((0..64).map(|c| sim.scheduler.load_of(c)).sum::<u32>(), 127);
}

/// Two CPUs of an Ampere Altra under EEVDF with `delay_dequeue`: a [`Spin`]
/// runs on one and a [`Sleeper`] queued behind it there, a slice and more
/// behind in virtual time, so that the spinner is past the queue's average
/// (not eligible) when it is then made to sleep at `now`. Returns the
/// simulator, the spinner's CPU, the other CPU (idle), the spinner, the
/// sleeper and `now`.
fn spinner_asleep_while_ahead(delay_dequeue: bool) -> (Sim, usize, usize, usize, usize, u64) {
    spinner_asleep_under(KernelChoices::default().with(DELAY_DEQUEUE, delay_dequeue))
}

/// [`spinner_asleep_while_ahead`] under the kernel's choices `kernel`.
fn spinner_asleep_under(kernel: KernelChoices) -> (Sim, usize, usize, usize, usize, u64) {
    let cfg = SimConfig {
        sched: SchedKind::Eevdf,
        migration: true,
        max_events: 100_000,
        kernel,
        ..SimConfig::quiet(preset::named("altra"), 2, 1)
    };
    let mut sim = Sim::new(cfg, LinuxArm64::new(2, 16, 16, false).unwrap());
    let (sleeper, spin) = sleeper_under_spinner(&mut sim);
    let c = sim.scheduler.thread(spin).cpu();
    let other = 1 - c;
    assert!(sim.scheduler.idle(other), "the other CPU is idle");
    let now = sim.scheduler.cpu(c).clock();
    sim.scheduler.update_curr(c, now);
    sim.scheduler.place(sleeper, c, c, false);
    let behind = sim.scheduler.thread(spin).se().vruntime - 4 * sim.scheduler.tun().base_slice;
    sim.scheduler.thread_mut(sleeper).se_mut().vruntime = behind;
    sim.enqueue(sleeper, c, now, c);
    sim.scheduler.sleep(c, spin, now);
    sim.schedule(c, Some(spin), now);
    (sim, c, other, spin, sleeper, now)
}

#[test]
fn eevdf_delays_the_dequeue_of_a_task_that_sleeps_ahead_and_wakes_it_where_it_is_queued() {
    let (mut sim, c, other, spin, sleeper, now) = spinner_asleep_while_ahead(true);
    assert!(sim.scheduler.is_delayed(spin), "not eligible when it slept: its dequeue is delayed");
    assert_eq!(sim.scheduler.thread(spin).state(), State::Blocked);
    assert_eq!(sim.scheduler.cpu(c).cur(), Some(sleeper), "the pick runs the eligible task");
    let queued = sim.scheduler.cpu(c).runq().get(0).copied().expect("the sleeping spinner stays queued");
    assert_eq!((queued.tid as usize, queued.delayed), (spin, true));
    assert_eq!(sim.scheduler.load_of(c), 2, "counted in the CPU's load, as nr_running counts it");
    // An idle CPU's pull (migrate_task) leaves a delayed task; a busy CPU's
    // balance of load may move it.
    assert!(!sim.scheduler.can_migrate(spin, c, other, now, MayMove { cache_hot: true, delayed: false }));
    assert!(sim.scheduler.can_migrate(spin, c, other, now, MayMove { cache_hot: true, delayed: true }));
    // Woken from the idle CPU: it runs where it is queued (ttwu_runnable), with
    // no choice of CPU.
    sim.wake(spin, other, now, false);
    assert!(!sim.scheduler.is_delayed(spin));
    assert_eq!(sim.scheduler.thread(spin).state(), State::Runnable);
    assert_eq!(sim.scheduler.thread(spin).cpu(), c);
    assert!(sim.scheduler.idle(other));
    // Without DELAY_DEQUEUE it left the queue when it slept, and its wake-up
    // goes to the idle CPU.
    let (mut off, c, other, spin, _, now) = spinner_asleep_while_ahead(false);
    assert!(!off.scheduler.is_delayed(spin));
    assert_eq!(off.scheduler.load_of(c), 1);
    off.wake(spin, other, now, false);
    assert_eq!(off.scheduler.thread(spin).cpu(), other);
}

#[test]
fn from_v6_15_a_sync_wakeup_leaves_the_wakers_delayed_tasks_out_of_running_alone() {
    // The waker (the task that ran after the spinner) runs on CPU c, the
    // spinner asleep in its queue; the wakee last ran on the idle CPU.
    let under = |skip: Option<bool>| {
        let kernel = KernelChoices::default().with(DELAY_DEQUEUE, true).with(SYNC_SKIP_DELAYED, skip);
        let (sim, c, other, spin, wakee, _) = spinner_asleep_under(kernel);
        assert!(sim.scheduler.is_delayed(spin) && sim.scheduler.load_of(c) == 2);
        assert_eq!(sim.scheduler.cpu(c).runq().delayed(), 1);
        (sim.scheduler.wake_affine(c, other, wakee, true), c, other)
    };
    // altra's kernel (v6.9) counts the delayed spinner: two tasks, so the
    // wakee goes back to its idle CPU.
    let (v6_9, _, other) = under(None);
    assert_eq!(v6_9, other);
    let (off, _, other) = under(Some(false));
    assert_eq!(off, other);
    // From v6.15 the waker runs alone: the wakee comes to its CPU.
    let (on, c, _) = under(Some(true));
    assert_eq!(on, c);
    use preset::Kernel;
    assert!(Kernel::Linux(6, 15).sync_skip_delayed() && !Kernel::Linux(6, 14).sync_skip_delayed());
}

#[test]
fn a_pick_that_finds_a_delayed_task_completes_its_dequeue_with_no_positive_lag() {
    let (mut sim, c, _, spin, sleeper, now) = spinner_asleep_while_ahead(true);
    assert!(sim.scheduler.is_delayed(spin) && sim.scheduler.load_of(c) == 2);
    // The sleeper, which runs, sleeps too: the pick meets the delayed
    // spinner, alone and so eligible, completes its dequeue and finds nothing.
    sim.scheduler.sleep(c, sleeper, now + 1000);
    sim.schedule(c, Some(sleeper), now + 1000);
    assert!(!sim.scheduler.is_delayed(spin));
    assert_eq!(sim.scheduler.thread(spin).state(), State::Blocked);
    assert!(sim.scheduler.thread(spin).se().vlag <= 0, "DELAY_ZERO: no positive lag");
    assert_eq!((sim.scheduler.cpu(c).cur(), sim.scheduler.load_of(c)), (None, 0), "the CPU goes idle");
    use preset::Kernel;
    assert!(Kernel::Linux(6, 12).delay_dequeue() && Kernel::Linux(6, 18).delay_dequeue());
    assert!(!Kernel::Linux(6, 11).delay_dequeue() && !Kernel::FreeBsd(14).delay_dequeue());
}

/// Returns `ncpus` CPUs of an Ampere Altra under EEVDF running `kernel`, with
/// migration.
fn machine_on(kernel: preset::Kernel, ncpus: usize) -> Sim {
    let mut p = preset::named("altra");
    p.kernel = kernel;
    let cfg =
        SimConfig { sched: SchedKind::Eevdf, migration: true, max_events: 200_000, ..SimConfig::quiet(p, ncpus, 1) };
    Sim::new(cfg, LinuxArm64::new(ncpus, 16, 16, false).unwrap())
}

#[test]
fn a_cpus_load_keeps_a_sleeping_tasks_decaying_load_until_it_wakes_elsewhere() {
    // altra's kernel is v6.9; no migration, so each stays where it starts.
    let mut sim = machine(SchedKind::Eevdf, 2, false);
    // A sleeper runs briefly and sleeps on CPU 0, a filler spins on CPU 1,
    // and a spinner then runs on CPU 0 for about 64 ms (3 GHz, 30,000
    // cycles a step).
    let sleeper = sim.spawn(Box::new(Sleeper { step: 0 })).unwrap();
    let filler = sim.spawn(Box::new(Spin { left: 20_000 })).unwrap();
    let spin = sim.spawn(Box::new(Spin { left: 7_000 })).unwrap();
    let cpus = [sleeper, filler, spin].map(|t| sim.scheduler.thread(t).cpu());
    assert_eq!(cpus, [0, 1, 0]);
    let ms = sim.scheduler.tun().ms;
    while sim.scheduler.cpu(0).clock() < 64 * ms {
        assert!(sim.step(), "the spinner stopped early");
    }
    assert_eq!(sim.scheduler.thread(sleeper).state(), State::Blocked);
    // The spinner's load is its weight; the sleeper's, 64 ms (62 periods of
    // 1,024 us) old, has halved about twice and stays in CPU 0's.
    let (spinner, cpu0) = (sim.scheduler.task_load(spin), sim.scheduler.load_avg(0));
    assert!(spinner > 1000, "a task always running weighs its weight: {spinner}");
    assert!((1100..1500).contains(&cpu0), "CPU 0 holds the spinner's load and the sleeper's, decayed: {cpu0}");
    // Woken on CPU 1, the sleeper's load decays for its sleep, joins CPU 1's
    // and leaves CPU 0's at its next update.
    let now = sim.scheduler.cpu(0).clock();
    let (asleep, cpu1) = (sim.scheduler.task_load(sleeper), sim.scheduler.load_avg(1));
    sim.enqueue(sleeper, 1, now, 0);
    let carried = sim.scheduler.task_load(sleeper);
    assert!(carried > 0 && carried < asleep / 2, "64 ms asleep: {asleep} decays to {carried}");
    assert!(sim.scheduler.load_avg(1) >= cpu1 + carried);
    while sim.scheduler.cpu(0).clock() < now + 2 * ms {
        assert!(sim.step());
    }
    let after = sim.scheduler.load_avg(0);
    assert!(after < cpu0 - carried / 2, "CPU 0 still holds the sleeper: {after} (was {cpu0}, it carried {carried})");
}

#[test]
fn wake_affine_weight_compares_pelt_loads_with_the_bias_and_breaks_ties_by_kernel() {
    // CPUs 0 (the waker's) and 1 (the wakee's previous) each run something,
    // so that neither idle rule decides; the loads are set as PELT's.
    let decide = |kernel: preset::Kernel, this: u64, prev: u64, wakee: u64| {
        let mut sim = machine_on(kernel, 2);
        let t = sim.spawn(Box::new(Sleeper { step: 0 })).unwrap();
        set_loads(&mut sim, &[2, 2]);
        sim.scheduler.fake_load_avg(0, this);
        sim.scheduler.fake_load_avg(1, prev);
        sim.scheduler.thread_mut(t).se_mut().pelt.avg.load_avg = wakee;
        sim.scheduler.wake_affine(0, 1, t, false)
    };
    let v6 = preset::Kernel::Linux(6, 9);
    // (1024 + 1024) x 100 against (3072 - 1024) x 108: the waker's CPU.
    assert_eq!(decide(v6, 1024, 3072, 1024), 0);
    // (2048 + 1024) x 100 against the same: the previous CPU.
    assert_eq!(decide(v6, 2048, 3072, 1024), 1);
    // A tie (108 x 100 against 100 x 108) stays on the previous CPU from
    // v4.17 and goes to the waker's before.
    assert_eq!(decide(v6, 108, 100, 0), 1);
    assert_eq!(decide(preset::Kernel::Linux(4, 14), 108, 100, 0), 0);
}

#[test]
fn from_v6_0_a_busy_cache_domain_stops_the_idle_scan() {
    // Four spinners fill altra's four CPUs for 40 ms: utilisation near full.
    let run = |kernel: preset::Kernel| {
        let mut sim = machine_on(kernel, 4);
        for _ in 0..4 {
            sim.spawn(Box::new(Spin { left: 5_000 })).unwrap();
        }
        let ms = sim.scheduler.tun().ms;
        while sim.scheduler.cpu(0).clock() < 40 * ms {
            assert!(sim.step());
        }
        let llc = sim.scheduler.cpu(0).llc() as usize;
        let now = sim.scheduler.cpu(0).clock();
        sim.scheduler.update_idle_cpu_scan(llc, now);
        {
            let (a, b) = sim.scheduler.llc_range(llc);
            (sim.scheduler.nr_idle_scan(llc), b - a)
        }
    };
    let (scan, cpus) = run(preset::Kernel::Linux(6, 9));
    assert_eq!(scan, 0, "a domain over 85% busy is not scanned");
    // Before v6.0 (SIS_PROP, which reads no utilisation) the count stays the whole domain.
    assert_eq!(run(preset::Kernel::Linux(5, 15)), (cpus, cpus));
}

#[test]
fn a_busy_balance_moves_a_cache_hot_task_only_after_more_failures_than_cache_nice_tries() {
    // altra as v6.1: CPU 0 runs three new tasks (overloaded), CPU 1 one,
    // every task having just run (cache-hot). CPU 1's periodic balance of its
    // cache domain (`cache_nice_tries` 1) fails twice, then moves one.
    let setup = |kernel| {
        let mut sim = machine_on(kernel, 2);
        let mm = sim.new_mm().unwrap();
        for cpu in [0, 0, 0, 1] {
            let t = sim.new_thread(mm, Box::new(Spin { left: 1_000 }), cpu, false);
            sim.enqueue_new(t, cpu, 0, cpu);
        }
        sim
    };
    // From v6.6 a busy CPU takes no tasks by count (`sibling_imbalance` is 0
    // for it): CPU 1, its new task leaving it spare capacity, finds the level
    // balanced.
    let mut v6_9 = setup(preset::Kernel::Linux(6, 9));
    v6_9.tick_balance(1, 10_000_000_000);
    assert_eq!(
        (v6_9.scheduler.load_of(0), v6_9.scheduler.cpu(1).balancing().failures(crate::sched::domain::Level::Llc)),
        (3, 0)
    );
    let mut sim = setup(preset::Kernel::Linux(6, 1));
    let tun = *sim.scheduler.tun();
    let interval = tun.ms * 2 * tun.kernel.busy_factor();
    let mut now = 10_000_000_000;
    for failures in 1..=2 {
        for t in 0..sim.scheduler.nthreads() {
            sim.scheduler.thread_mut(t).se_mut().exec_start = now;
        }
        sim.tick_balance(1, now);
        assert_eq!((sim.scheduler.load_of(0), sim.scheduler.load_of(1)), (3, 1), "balance {failures}");
        assert_eq!(sim.scheduler.cpu(1).balancing().failures(crate::sched::domain::Level::Llc), failures);
        now += interval;
    }
    for t in 0..sim.scheduler.nthreads() {
        sim.scheduler.thread_mut(t).se_mut().exec_start = now;
    }
    sim.tick_balance(1, now);
    assert_eq!((sim.scheduler.load_of(0), sim.scheduler.load_of(1)), (2, 2), "the third moves a hot task");
    assert_eq!(sim.scheduler.cpu(1).balancing().failures(crate::sched::domain::Level::Llc), 0);
}

#[test]
fn the_domains_parameters_follow_the_kernels_version() {
    use crate::sched::{LLC_IMBALANCE_PCT, SMT_IMBALANCE_PCT};
    use preset::Kernel;
    let (v5_9, v5_10) = (Kernel::Linux(5, 9), Kernel::Linux(5, 10));
    assert_eq!((v5_9.upper_imbalance_pct(), v5_10.upper_imbalance_pct()), (125, 117));
    assert_eq!((v5_9.busy_factor(), v5_10.busy_factor()), (32, 16));
    assert!(!v5_9.load_shr_failed() && v5_10.load_shr_failed());
    assert!(!Kernel::Linux(6, 7).util_shr_failed() && Kernel::Linux(6, 8).util_shr_failed());
    assert!(!Kernel::Linux(4, 15).affine_prev_idle() && Kernel::Linux(4, 16).affine_prev_idle());
    // The lowest domain holding two CPUs gives wake_affine_weight its
    // bias: icx8336c (v6.1, SMT: CPU c and c + 32 of a node are one core).
    let sim = x86("icx8336c", 128, None);
    assert_eq!(sim.scheduler.imbalance_pct(3, 35), SMT_IMBALANCE_PCT);
    assert_eq!(sim.scheduler.imbalance_pct(3, 4), LLC_IMBALANCE_PCT);
    assert_eq!(sim.scheduler.imbalance_pct(3, 72), 117);
}

#[test]
fn a_busy_balance_of_the_socket_takes_tasks_until_the_imbalance_is_met() {
    // milan (v6.15), 16 CPUs: cache domains 0-7 and 8-15. Each CPU of the
    // first runs one new task (utilisation 512: spare capacity), each of the
    // second three (overloaded). CPU 0's balance of its own cache domain finds
    // nothing; of the socket it fills its group's spare utilisation
    // (`migrate_util`, 4,096) from CPU 8, the first of the busiest: both of
    // CPU 8's queued tasks fit, and CPU 8 keeps one.
    let mut sim = x86("milan", 16, None);
    let mm = sim.new_mm().unwrap();
    for cpu in 0..16 {
        for _ in 0..if cpu < 8 { 1 } else { 3 } {
            let t = sim.new_thread(mm, Box::new(Spin { left: 1_000 }), cpu, false);
            sim.enqueue_new(t, cpu, 0, cpu);
        }
    }
    sim.tick_balance(0, 10_000_000_000);
    let loads: Vec<u32> = (0..16).map(|c| sim.scheduler.load_of(c)).collect();
    assert_eq!(loads, [3, 1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3]);
}

#[test]
fn before_sis_util_the_idle_scan_is_limited_by_the_wakers_idle_time_against_its_scan_cost() {
    use tlbkit_policy::asid::LinuxX86;
    // milan's first cache domain (8 CPUs) under an older kernel: CPUs 0 to
    // 6 run a task each, CPU 7 is idle. A wake-up on CPU 1 of a task last on
    // CPU 1 targets it (busy) and scans from CPU 2: CPU 7 is the sixth
    // looked at.
    let setup = |kernel: preset::Kernel, costly: bool| {
        let mut p = preset::named("milan");
        p.kernel = kernel;
        let mut sim = Sim::new(SimConfig { max_mms: 16, ..SimConfig::quiet(p, 8, 1) }, LinuxX86::new(8, 16, true));
        let mm = sim.new_mm().unwrap();
        for cpu in 0..7 {
            let t = sim.new_thread(mm, Box::new(Spin { left: 1_000 }), cpu, false);
            sim.enqueue_new(t, cpu, 0, cpu);
        }
        let wakee = sim.new_thread(mm, Box::new(Spin { left: 1_000 }), 1, false);
        if costly {
            // Scans that cost far more than the waker's idle time over 512.
            for _ in 0..50 {
                sim.scheduler.scan_took(1, 1_000_000);
            }
        }
        let placed = sim.scheduler.select_task_rq(wakee, 1, 1, false);
        (placed.cpu, placed.busy_read, placed.idle_scan)
    };
    use preset::Kernel;
    // Cheap scans: the whole domain, CPU 7 found after five busy ones.
    assert_eq!(setup(Kernel::Linux(5, 10), false), (7, 5, Some(5)));
    // SIS_PROP (v4.13 to v5.19): `nr` 4, three CPUs looked at, none idle.
    assert_eq!(setup(Kernel::Linux(5, 10), true), (1, 3, Some(3)));
    // v4.9 to v4.12: no scan at all.
    assert_eq!(setup(Kernel::Linux(4, 10), true), (1, 0, None));
    // SIS_UTIL (v6.0 on) reads the domain's utilisation, not the cost.
    assert_eq!(setup(Kernel::Linux(6, 15), true).0, 7);
}

/// Returns `ncpus` CPUs of an Ampere Altra under `kernel` where a
/// [`Sleeper`] has blocked on CPU 0 and left it idle holding a lazy reference
/// to its mm; and the Sleeper's thread id and mm.
fn idle_after_a_sleeper(kernel: Kernel, ncpus: usize) -> (Sim, usize, MmId) {
    let mut p = preset::named("altra");
    p.kernel = kernel;
    let cfg = SimConfig { max_events: 100_000, ..SimConfig::quiet(p, ncpus, 1) };
    let mut sim = Sim::new(cfg, LinuxArm64::new(ncpus, 16, 16, false).unwrap());
    let sleeper = sim.spawn(Box::new(Sleeper { step: 0 })).unwrap();
    let mm = sim.scheduler.thread(sleeper).mm();
    while sim.scheduler.thread(sleeper).state() != State::Blocked || sim.scheduler.cpu(0).cur().is_some() {
        assert!(sim.step(), "the sleeper never slept");
    }
    assert_eq!(sim.scheduler.cpu(0).lazy_ref(), Some(mm));
    (sim, sleeper, mm)
}

#[test]
fn a_cpu_that_leaves_a_user_task_for_idle_holds_a_lazy_reference_until_it_runs_one_again() {
    // One CPU (Linux v6.1 on Altra): a Sleeper blocks on its pipe and the
    // CPU goes idle, keeping the Sleeper's mm as its lazy active_mm with a
    // reference (mmgrab_lazy_tlb: an atomic on mm_count's line, written by
    // CPU 0: its own read of the word then hits); woken, the Sleeper runs
    // again and the reference is dropped (mmdrop_lazy_tlb); it exits (exit_mm
    // takes one) and the CPU stays idle holding it.
    let (mut sim, sleeper, mm) = idle_after_a_sleeper(Kernel::Linux(6, 1), 1);
    let word = sim.kw.mm_count_word(mm).expect("Linux has mm_count");
    let now = sim.scheduler.cpu(0).clock();
    assert_eq!(sim.m.kread(0, now, word, 0), now + sim.m.costs.mem_access, "CPU 0 wrote mm_count");
    sim.wake(sleeper, 0, now, false);
    while sim.scheduler.cpu(0).cur() != Some(sleeper) {
        assert!(sim.step(), "the sleeper never ran again");
    }
    assert_eq!(sim.scheduler.cpu(0).lazy_ref(), None);
    sim.run();
    assert_eq!(sim.scheduler.cpu(0).lazy_ref(), Some(mm), "exit_mm's reference, kept by the idle CPU");
    // From v5.4 a switch between two tasks without an mm hands the lent one
    // on; before, it took a reference and dropped the previous task's.
    assert!(!Kernel::Linux(5, 3).hands_lazy_mm_on() && Kernel::Linux(5, 4).hands_lazy_mm_on());
    // FreeBSD takes none.
    let mut p = preset::named("altra");
    p.kernel = Kernel::FreeBsd(14);
    let mut sim = Sim::new(SimConfig::quiet(p, 1, 1), LinuxArm64::new(1, 16, 16, false).unwrap());
    sim.spawn(Box::new(Sleeper { step: 0 })).unwrap();
    sim.run();
    assert_eq!(sim.scheduler.cpu(0).lazy_ref(), None);
}

#[test]
fn before_v5_4_a_kernel_thread_after_the_idle_task_takes_and_drops_a_reference_on_the_lent_mm() {
    // One CPU holds a Sleeper's mm lazily (it went idle after the Sleeper
    // blocked); another CPU then writes mm_count's line. A kernel thread
    // started on the first CPU: v4.19's context_switch takes a reference on
    // the lent mm (its atomic brings the line back) and finish_task_switch
    // drops the idle task's; v5.4 hands the mm on and touches nothing.
    let moves = |kernel| {
        let (mut sim, _, mm) = idle_after_a_sleeper(kernel, 2);
        let word = sim.kw.mm_count_word(mm).expect("Linux has mm_count");
        let now = sim.scheduler.cpu(0).clock();
        sim.m.katomic(1, now, word);
        let before = sim.m.counters.line_transfers;
        sim.spawn_kernel_thread(Box::new(Spin { left: 1 }), 0);
        while sim.scheduler.cpu(0).cur().is_none() {
            assert!(sim.step(), "the kernel thread never ran");
        }
        assert_eq!(sim.scheduler.cpu(0).lazy_ref(), Some(mm), "the lent mm stays the CPU's");
        sim.m.counters.line_transfers - before
    };
    assert_eq!(moves(Kernel::Linux(4, 19)), 1);
    assert_eq!(moves(Kernel::Linux(5, 4)), 0);
}
