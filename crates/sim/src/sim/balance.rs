//! Load balancing between CPUs for the fair classes (CFS, EEVDF) with
//! `migration` on: Linux's `load_balance` (`kernel/sched/fair.c`) over the
//! machine's scheduling domains ([`crate::sched::domain`]: a core's threads,
//! the cache domain, the node, the machine), its decisions
//! ([`crate::sched::busiest`]: the busiest group and CPU and what to move,
//! from the groups' PELT figures, [`crate::sched::group`]), and here when
//! it runs, `detach_tasks` and active balance. The kernel's code was read at
//! 5.10.140, 6.1.20, 6.6.63 and 6.12.63.
//!
//! - Periodic balancing (`rebalance_domains`): at its tick a busy CPU whose
//!   `next_balance` is due walks its domains from the lowest up, balancing
//!   each whose interval has passed since its last balance, and stops at
//!   the first it is not the one to balance for its group
//!   (`should_we_balance`: a group's first idle CPU, from v6.6 the first
//!   on a wholly idle core above the core level (b1bfeab9b002), else its
//!   first CPU; newly idle balances always balance). A domain's interval is
//!   its weight in milliseconds, doubled after a balance that found it
//!   balanced and reset by one that found an imbalance, times `busy_factor`
//!   (32 before v5.10, 16 from it) for a busy CPU. A balance that moves
//!   tasks to an idle CPU makes it busy for the levels above.
//! - Idle CPUs (NOHZ, `nohz_balancer_kick`, `_nohz_idle_balance`): at its
//!   tick, once `nohz.next_balance` has passed and some CPU is idle, a busy
//!   CPU running two tasks or more, or whose cache domain has more than one
//!   busy CPU (`nr_busy_cpus`), kicks the first idle CPU (its IPI, or the
//!   store to a polling CPU's flags, and its exit latency: `sim/idle.rs`),
//!   which runs `rebalance_domains` as `CPU_IDLE` for every idle CPU whose
//!   `next_balance` is due, from the CPU after it round to itself, then sets
//!   `nohz.next_balance` to the earliest of theirs; a kick puts it a tick
//!   ahead. A CPU going idle brings `nohz.next_balance` forward to its own
//!   (the kernel does so at the next tick's `NOHZ_NEXT_KICK`).
//! - Newly idle (`newidle_balance`, `sched_balance_newidle` from v6.10): a
//!   CPU about to go idle, when some CPU has a task balancing may move
//!   (`rd->overload`), balances its domains from the lowest up and stops at
//!   the first task pulled (one task, as a preemptible kernel stops after
//!   the first). What a level costs is timed ([`NewIdle`]): reading the
//!   run-queue line of every CPU of the level that runs something (its
//!   owner rewrites it at each enqueue, dequeue and tick: one line transfer
//!   each, a floor, since `update_sg_lb_stats` reads several fields of each
//!   run queue), and the move's two transfers. A CPU whose idle periods are
//!   short does not balance (`avg_idle`, the average idle time a wake-up
//!   ends, from 2 × `sysctl_sched_migration_cost`, an eighth of each new
//!   period, at most twice the larger of that cost and its levels'): not at
//!   all when `avg_idle` is below the migration cost (kernels before v5.16)
//!   or below its lowest level's cost (`max_newidle_lb_cost`, from v5.16:
//!   c5b0a7eefc70), and no higher level once `avg_idle` is below what the
//!   levels so far cost plus that level's. A level's cost is the largest it
//!   took, decayed by 253/256 each second it is not exceeded
//!   (`update_newidle_cost`).
//! - `detach_tasks`: of the source's queued tasks, least recently run first,
//!   at most `sysctl_sched_nr_migrate` (32) and as many as it runs are looked
//!   at; each that may move is taken while the imbalance lasts: by load (a
//!   task whose load, halved by each failed balance of the level from v5.10
//!   and halved once before, exceeds what is left stays), by utilisation (one
//!   whose utilisation, from v6.8 halved by each failed balance as load is
//!   (3af7524b1419), exceeds it stays), or one task for one; never the
//!   source's last task for an idle CPU.
//! - `can_migrate_task`: never a task bound to its CPU, nor the running one,
//!   nor one whose dequeue is delayed (EEVDF, `sim/scheduler/delayed.rs`)
//!   unless the balance migrates load; not a cache-hot one (`task_hot`: it
//!   ran within `sysctl_sched_migration_cost`, or, under CFS, it is a next
//!   or last buddy and the pulling CPU runs something), unless more of the
//!   CPU's balances at that level failed than its `cache_nice_tries`
//!   (`nr_balance_failed`, per CPU and level: a periodic balance that finds
//!   an imbalance and moves nothing counts one; one that moves a task or
//!   finds the level balanced, newly idle ones included, resets it;
//!   `cache_nice_tries` is 0 at a core, 1 at the cache domain and the
//!   package, 2 at NUMA, `sd_init`).
//! - Active balance (`need_active_balance`, `active_load_balance_cpu_stop`):
//!   a balance that found an imbalance and moved nothing, when its level has
//!   failed more than `cache_nice_tries + 2` times (from v5.12, e9b9734b7465,
//!   only where it moves tasks by count), has the source's stopper preempt
//!   its running task (a reschedule IPI) and push one task, the one it ran
//!   if it is the only one, cache-hot or not, to the balancing CPU; the
//!   stopper's switch is charged to the source. Before v5.12 the level's
//!   failures are then set to `cache_nice_tries + 1`; the push resets the
//!   balancing CPU's.
//! - A balance that moves tasks costs the CPU that makes it two cache-line
//!   transfers from the other CPU (its run-queue lock and the tasks'
//!   scheduling state); the tasks' working sets re-warming in the new CPU's
//!   caches is not modelled.
//! - A moved task keeps its place: CFS its virtual runtime relative to
//!   `min_vruntime`, EEVDF its lag.
//!
//! Not modelled: `update_blocked_averages`' own cost, the time the idle
//! load balancer spends (only its wake-up delays its balances), misfit and
//! asymmetric capacity, NUMA balancing, `SD_SERIALIZE`, the longer intervals
//! of levels whose tasks are all bound (`MAX_PINNED_INTERVAL`), the
//! `LBF_NEED_BREAK` restart.
//!
//! Cost: a balance reads the figures of its level's CPUs (PELT's, brought to
//! the balance's time); newly idle balancing is skipped outright while no
//! CPU has a task to move (the per-machine count kept by the queue setters).
//!
//! The scheduler part (`sim/scheduler.rs`) keeps the figures and detaches
//! the tasks in virtual time; this file decides when to balance, where to
//! look and what to take, and charges the moves.

use super::*;
use crate::sched::busiest::{find_busiest_group, find_busiest_queue, Domain, Idle, Imbalance, Migration};
use crate::sched::domain::{Level, LEVELS};
use std::ops::Range;

/// A CPU's domain at one level as a balance reads it: its CPUs in group
/// order, and its groups as ranges of them, the balancing CPU's first.
struct Span {
    /// The domain's CPUs, group by group.
    cpus: Vec<usize>,
    /// Its groups, as ranges of `cpus`.
    groups: Vec<Range<usize>>,
}

/// What a [`Sim::load_balance`] did.
struct Outcome {
    /// The tasks it took, not yet queued anywhere.
    moved: Vec<usize>,
    /// The CPU it took them from (the balancing CPU when none).
    src: usize,
    /// Whether the walk up the domains goes on (`continue_balancing`).
    go_on: bool,
}

impl Sim {
    /// Returns `cpu`'s domain at `level` ([`Span`]).
    fn span(&self, cpu: usize, level: Level) -> Span {
        let groups = self.scheduler.domains().groups(level, cpu, self.scheduler.llcs());
        let mut cpus = Vec::with_capacity(groups.iter().map(Vec::len).sum());
        let mut ranges = Vec::with_capacity(groups.len());
        for g in groups {
            let at = cpus.len();
            cpus.extend(g);
            ranges.push(at..cpus.len());
        }
        Span { cpus, groups: ranges }
    }

    /// What reading the run queues of `cpu`'s domain at `level` costs it: a
    /// line transfer from each of its CPUs that runs something, `cpu` aside,
    /// as one walk (`update_sg_lb_stats` takes each CPU's run queue from the
    /// loop's counter, never from a value it read).
    fn newidle_scan(&self, cpu: usize, level: Level) -> u64 {
        let d = self.scheduler.domains();
        let llcs = self.scheduler.llcs();
        let span = match level {
            Level::Core => {
                let busy = d.core(cpu).filter(|&c| c != cpu && !self.scheduler.idle(c));
                return self.m.walk_time(busy.map(|c| (1, self.m.transfer_cost(cpu, c))));
            }
            Level::Llc => crate::sched::domain::llc_span(llcs, cpu),
            Level::Node => d.node(cpu),
            Level::Machine => 0..d.ncpus(),
        };
        let own = self.scheduler.cpu(cpu).llc() as usize;
        let runs = (0..self.scheduler.nllcs())
            .filter(|&l| span.contains(&(self.scheduler.llc_range(l).0 as usize)))
            .map(|l| {
                let (lo, hi) = self.scheduler.llc_range(l);
                let mut busy = u64::from(hi - lo - self.scheduler.idle_llcs()[l]);
                if l == own && !self.scheduler.idle(cpu) {
                    busy -= 1;
                }
                (busy, self.m.transfer_cost(cpu, lo as usize))
            });
        self.m.walk_time(runs)
    }

    /// `find_busiest_group` and `find_busiest_queue` for `cpu`'s balance of
    /// `span`, its domain at `level`, at `now` ([`crate::sched::busiest`]):
    /// the CPU to take from and what to take; `None` when the level is
    /// balanced.
    fn find_imbalance(
        &self,
        cpu: usize,
        level: Level,
        span: &Span,
        idle: Idle,
        now: u64,
    ) -> Option<(usize, Imbalance)> {
        if span.groups.len() < 2 {
            return None;
        }
        let d = *self.scheduler.domains();
        let llcs = self.scheduler.llcs();
        let cpus = self.scheduler.cpu_loads_at(&span.cpus, now);
        let kernel = self.scheduler.tun().kernel;
        let numa = (level == Level::Machine).then(|| {
            let (cps, ccx) = (self.m.cores_per_socket.max(1), self.cfg.preset.cores_per_ccx);
            crate::sched::fork::imb_numa_nr(d.ncpus(), cps, ccx)
        });
        let dom = Domain {
            groups: &span.groups,
            local: 0,
            level,
            prefer_sibling: d.has_child(level, llcs, cpu),
            smt_groups: level == Level::Llc && d.exists(Level::Core, llcs, cpu),
            numa,
            threads: d.threads() as u32,
            kernel,
        };
        let imb = find_busiest_group(&dom, &cpus, idle)?;
        let src = find_busiest_queue(span.groups[imb.group].clone(), &cpus, &imb, kernel)?;
        Some((span.cpus[src], imb))
    }

    /// `should_we_balance`: whether `cpu` balances `span`, its domain at
    /// `level`, for its group.
    fn should_we_balance(&self, cpu: usize, level: Level, span: &Span, idle: Idle) -> bool {
        if idle == Idle::NewlyIdle {
            return true;
        }
        let local = &span.cpus[span.groups[0].clone()];
        let by_core = level != Level::Core && self.scheduler.tun().kernel.linux_from(6, 6);
        let d = self.scheduler.domains();
        let mut idle_smt = None;
        for &c in local.iter().filter(|&&c| self.scheduler.idle(c)) {
            if by_core && !d.core(c).all(|x| self.scheduler.idle(x)) {
                idle_smt.get_or_insert(c);
                continue;
            }
            return c == cpu;
        }
        idle_smt.unwrap_or_else(|| local.iter().copied().min().unwrap_or(cpu)) == cpu
    }

    /// `load_balance`: `cpu`'s balance of its domain at `level` at `now`, as
    /// `idle`: the tasks it takes (not yet queued), after `should_we_balance`
    /// and the level's records ([`Balancing`]); starts an active balance when
    /// due.
    fn load_balance(&mut self, cpu: usize, level: Level, idle: Idle, now: u64) -> Outcome {
        let span = self.span(cpu, level);
        let mut out = Outcome { moved: Vec::new(), src: cpu, go_on: true };
        if !self.should_we_balance(cpu, level, &span, idle) {
            self.scheduler.cpu_mut(cpu).balancing_mut().balanced(level, idle);
            out.go_on = false;
            return out;
        }
        if level == Level::Llc && idle != Idle::NewlyIdle {
            // `update_sd_lb_stats` ends with SIS_UTIL's count (v6.0 on).
            let own = self.scheduler.cpu(cpu).llc() as usize;
            self.scheduler.update_idle_cpu_scan(own, now);
        }
        let Some((src, imb)) = self.find_imbalance(cpu, level, &span, idle, now) else {
            self.scheduler.cpu_mut(cpu).balancing_mut().balanced(level, idle);
            return out;
        };
        out.src = src;
        out.moved = self.detach_tasks(src, cpu, level, imb, idle, now);
        let kernel = self.scheduler.tun().kernel;
        let rec = self.scheduler.cpu_mut(cpu).balancing_mut();
        if !out.moved.is_empty() {
            rec.moved(level);
            return out;
        }
        let failed = rec.failed(level, idle);
        // `need_active_balance`: from v5.12 only a balance by count.
        let tries = kernel.cache_nice_tries(level);
        let by_count = imb.kind == Migration::Task || !kernel.linux_from(5, 12);
        if by_count && failed > tries + 2 {
            let started = self.active_kick(src, cpu);
            let rec = self.scheduler.cpu_mut(cpu).balancing_mut();
            match started {
                // The task running there may not run here (`out_one_pinned`).
                None => rec.pinned(level, idle),
                Some(started) if !kernel.linux_from(5, 12) => rec.kicked_before_v5_12(level, tries, started),
                Some(_) => {}
            }
        }
        out
    }

    /// Starts an active balance of `src` towards `dst` (`stop_one_cpu_nowait`:
    /// the stopper preempts `src`'s running task, a reschedule IPI): `None`
    /// when that task is bound to `src`, else whether it started (not when
    /// one is already pending there).
    fn active_kick(&mut self, src: usize, dst: usize) -> Option<bool> {
        if self.scheduler.cpu(src).cur().is_some_and(|t| self.scheduler.thread(t).pinned()) {
            return None;
        }
        if !self.scheduler.cpu_mut(src).balancing_mut().push_to(dst) {
            return Some(false);
        }
        self.resched(src, dst);
        Some(true)
    }

    /// `active_load_balance_cpu_stop` on `src`, switching at `now` with its
    /// running task just put back on its queue: moves one task to `dst` (the
    /// first, least recently run, that may go there, cache-hot or not);
    /// returns `src`'s time after the stopper.
    pub(super) fn active_push(&mut self, src: usize, dst: usize, now: u64) -> u64 {
        let now = now + self.m.costs.kernel.switch_path;
        self.stats.context_switches += 1;
        let tid = self
            .scheduler
            .balance_candidates(src)
            .into_iter()
            .find(|&t| self.scheduler.can_migrate(t, src, dst, now, MayMove { cache_hot: true, delayed: false }));
        if let Some(t) = tid.and_then(|t| self.scheduler.detach_task(src, t, dst, now)) {
            let level = self.scheduler.domains().lowest_common(dst, src, self.scheduler.llcs());
            self.scheduler.cpu_mut(dst).balancing_mut().pushed(level);
            self.attach(dst, vec![t], (src, src), now);
        }
        now
    }

    /// Queues `moved`, taken from `src`, on `cpu` from `on` (the CPU whose
    /// balance took them) at `now`, after the two line transfers of the move.
    fn attach(&mut self, cpu: usize, moved: Vec<usize>, (src, on): (usize, usize), now: u64) {
        if moved.is_empty() {
            return;
        }
        let t = now + 2 * self.m.transfer_cost(src, cpu);
        for tid in moved {
            if self.scheduler.is_delayed(tid) {
                self.scheduler.attach_delayed(cpu, tid, t);
            } else {
                self.enqueue(tid, cpu, t, on);
            }
        }
    }

    /// `detach_tasks`: takes tasks from `src`'s queue for `cpu`'s balance of
    /// `level` at `now` until `imb` is met (one for a newly idle balance);
    /// returns them, not yet queued anywhere.
    fn detach_tasks(
        &mut self,
        src: usize,
        cpu: usize,
        level: Level,
        imb: Imbalance,
        idle: Idle,
        now: u64,
    ) -> Vec<usize> {
        let mut moved = Vec::new();
        let kernel = self.scheduler.tun().kernel;
        let failed = self.scheduler.cpu(cpu).balancing().failures(level);
        let may = MayMove { cache_hot: failed > kernel.cache_nice_tries(level), delayed: imb.kind == Migration::Load };
        let mut left = i128::from(imb.amount);
        for tid in self.scheduler.balance_candidates(src) {
            if self.scheduler.load_of(src) <= 1 {
                break;
            }
            if !self.scheduler.can_migrate(tid, src, cpu, now, may) {
                continue;
            }
            match imb.kind {
                Migration::Load => {
                    let l = self.scheduler.task_load(tid).max(1);
                    // Halved once per failed balance from v5.10, once before.
                    let weighed = if kernel.load_shr_failed() { l >> u32::from(failed).min(63) } else { l / 2 };
                    if i128::from(weighed) > left {
                        continue;
                    }
                    left -= i128::from(l);
                }
                Migration::Util => {
                    let u = self.scheduler.task_util(tid);
                    // Halved once per failed balance from v6.8.
                    let weighed = if kernel.util_shr_failed() { u >> u32::from(failed).min(63) } else { u };
                    if i128::from(weighed) > left {
                        continue;
                    }
                    left -= i128::from(u);
                }
                Migration::Task => left -= 1,
            }
            if let Some(t) = self.scheduler.detach_task(src, tid, cpu, now) {
                moved.push(t);
            }
            if idle == Idle::NewlyIdle || left <= 0 {
                break;
            }
        }
        moved
    }

    /// Newly idle balance: `cpu`, about to go idle at `now`, pulls one task;
    /// returns it (not queued: it runs next) and the time after the balance.
    pub(super) fn newidle_balance(&mut self, cpu: usize, now: u64) -> (Option<usize>, u64) {
        let tun = *self.scheduler.tun();
        let second = tun.ms * 1000;
        self.scheduler.cpu_mut(cpu).newidle_mut().idle_from(now);
        let levels = self.scheduler.domains().levels(self.scheduler.llcs(), cpu);
        self.idle_next_balance(cpu, &levels);
        if self.scheduler.overloaded() == 0 {
            return (None, now);
        }
        let domain_gate = self.cfg.preset.kernel.newidle_gate_is_domain_cost();
        let lowest = levels.first().copied().unwrap_or(Level::Llc);
        let ni = self.scheduler.cpu_mut(cpu).newidle_mut();
        let avg = ni.avg_idle();
        let gate = if domain_gate { ni.level_cost(lowest, now, second) } else { tun.migration_cost };
        if avg < gate {
            return (None, now);
        }
        let (mut t, mut spent) = (now, 0);
        for level in levels {
            if avg < spent + self.scheduler.cpu_mut(cpu).newidle_mut().level_cost(level, t, second) {
                break;
            }
            let t0 = t;
            t += self.newidle_scan(cpu, level);
            let out = self.load_balance(cpu, level, Idle::NewlyIdle, t);
            let pulled = out.moved.first().copied();
            if pulled.is_some() {
                t += 2 * self.m.transfer_cost(out.src, cpu);
            }
            let ni = self.scheduler.cpu_mut(cpu).newidle_mut();
            ni.spent(level, t - t0, t);
            spent += t - t0;
            if pulled.is_some() {
                ni.pulled();
                return (pulled, t);
            }
        }
        (None, t)
    }

    /// `cpu`, going idle, brings its `next_balance` forward to the earliest
    /// of its `levels`' next balances as an idle CPU, and
    /// `nohz.next_balance` to that.
    fn idle_next_balance(&mut self, cpu: usize, levels: &[Level]) {
        let next = levels.iter().map(|&l| self.next_balance_at(cpu, l, false)).min().unwrap_or(u64::MAX);
        let rec = self.scheduler.cpu_mut(cpu).balancing_mut();
        rec.next = rec.next.min(next);
        let next = rec.next;
        self.scheduler.nohz_next_at(next.min(self.scheduler.nohz_next()));
    }

    /// When `cpu`'s domain at `level` is next due, busy or not.
    fn next_balance_at(&self, cpu: usize, level: Level, busy: bool) -> u64 {
        let d = self.scheduler.domains();
        let tun = self.scheduler.tun();
        let rec = self.scheduler.cpu(cpu).balancing();
        // `get_sd_balance_interval`: `balance_interval` (the domain's weight,
        // or twice it), times `busy_factor` when busy, at most
        // `max_load_balance_interval` (HZ * CPUs / 10).
        let mut ms = d.weight(level, cpu, self.scheduler.llcs()) as u64 * rec.interval_factor(level);
        if busy {
            ms *= tun.kernel.busy_factor();
        }
        let ms = ms.clamp(1, (d.ncpus() as u64 * 100).max(1));
        rec.last(level) + ms * tun.ms
    }

    /// `rebalance_domains`: `cpu`'s periodic balance at `now` as `idle`, run
    /// on `on` (itself, or the idle load balancer).
    fn rebalance_domains(&mut self, cpu: usize, on: usize, idle: Idle, now: u64) {
        let levels = self.scheduler.domains().levels(self.scheduler.llcs(), cpu);
        let mut idle = idle;
        let mut next = u64::MAX;
        let mut go_on = true;
        for level in levels {
            if !go_on {
                break;
            }
            if now >= self.next_balance_at(cpu, level, idle != Idle::Idle) {
                let out = self.load_balance(cpu, level, idle, now);
                go_on = out.go_on;
                let moved = !out.moved.is_empty();
                self.attach(cpu, out.moved, (out.src, on), now);
                if moved {
                    idle = if self.scheduler.idle(cpu) { Idle::Idle } else { Idle::Busy };
                }
                self.scheduler.cpu_mut(cpu).balancing_mut().balanced_at(level, now);
            }
            next = next.min(self.next_balance_at(cpu, level, idle != Idle::Idle));
        }
        self.scheduler.cpu_mut(cpu).balancing_mut().next = next;
    }

    /// Balancing at the tick of busy `cpu` at `now` (`trigger_load_balance`):
    /// its own periodic balance when due, then the NOHZ kick.
    pub(super) fn tick_balance(&mut self, cpu: usize, now: u64) {
        if now >= self.scheduler.cpu(cpu).balancing().next {
            self.rebalance_domains(cpu, cpu, Idle::Busy, now);
        }
        self.nohz_balancer_kick(cpu, now);
    }

    /// `nohz_balancer_kick` from busy `cpu` at `now`, and the kicked CPU's
    /// `_nohz_idle_balance`.
    fn nohz_balancer_kick(&mut self, cpu: usize, now: u64) {
        if now < self.scheduler.nohz_next() || self.scheduler.idle_llcs().iter().all(|&n| n == 0) {
            return;
        }
        let (lo, hi) = self.scheduler.llc_range(self.scheduler.cpu(cpu).llc() as usize);
        let busy = hi - lo - self.scheduler.idle_llcs()[self.scheduler.cpu(cpu).llc() as usize];
        if self.scheduler.load_of(cpu) < 2 && busy <= 1 {
            return;
        }
        let n = self.scheduler.ncpus();
        let Some(ilb) = (0..n).find(|&c| c != cpu && self.scheduler.idle(c)) else { return };
        self.scheduler.nohz_next_at(now + self.scheduler.tun().ms);
        let t = self.wake_idle(ilb, cpu, now);
        let mut next = u64::MAX;
        for c in (ilb + 1..n).chain(0..=ilb) {
            if !self.scheduler.idle(c) {
                continue;
            }
            if t >= self.scheduler.cpu(c).balancing().next {
                self.rebalance_domains(c, ilb, Idle::Idle, t);
            }
            next = next.min(self.scheduler.cpu(c).balancing().next);
        }
        if next != u64::MAX {
            self.scheduler.nohz_next_at(next);
        }
    }
}

/// A CPU's record for periodic balancing: per domain level its
/// `last_balance`, `balance_interval` (its weight or twice it, in ms) and
/// `nr_balance_failed`; its run queue's `next_balance`; and a pending active
/// balance's target (`active_balance`, `push_cpu`).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Balancing {
    /// Per level: when it last balanced.
    last: [u64; LEVELS],
    /// Per level: whether its interval is doubled.
    doubled: [bool; LEVELS],
    /// Per level: its balances since the last that moved a task or found the
    /// level balanced, that found an imbalance and moved nothing.
    failed: [u8; LEVELS],
    /// When its next periodic balance is due (`rq->next_balance`).
    pub(super) next: u64,
    /// The CPU an active balance pushes a task of this one to.
    push: Option<u32>,
}

impl Balancing {
    /// Returns when `level` last balanced.
    fn last(&self, level: Level) -> u64 {
        self.last[level as usize]
    }

    /// Returns the factor of `level`'s weight its interval is (1 or 2).
    fn interval_factor(&self, level: Level) -> u64 {
        1 + u64::from(self.doubled[level as usize])
    }

    /// Returns `level`'s failed balances.
    pub(super) fn failures(&self, level: Level) -> u8 {
        self.failed[level as usize]
    }

    /// `level` balanced at `now`.
    fn balanced_at(&mut self, level: Level, now: u64) {
        self.last[level as usize] = now;
    }

    /// A balance of `level` as `idle` found it balanced (or was not this
    /// CPU's to make): its failures reset, its interval doubled unless the
    /// balance was newly idle (`out_balanced`).
    fn balanced(&mut self, level: Level, idle: Idle) {
        self.failed[level as usize] = 0;
        if idle != Idle::NewlyIdle {
            self.doubled[level as usize] = true;
        }
    }

    /// A balance of `level` moved tasks: failures reset, interval reset.
    fn moved(&mut self, level: Level) {
        self.failed[level as usize] = 0;
        self.doubled[level as usize] = false;
    }

    /// An active balance for `level` pushed a task here: failures reset.
    fn pushed(&mut self, level: Level) {
        self.failed[level as usize] = 0;
    }

    /// A balance of `level` as `idle` found an imbalance and moved nothing:
    /// a failure unless newly idle, the interval reset; returns the failures.
    fn failed(&mut self, level: Level, idle: Idle) -> u8 {
        let f = &mut self.failed[level as usize];
        if idle != Idle::NewlyIdle {
            *f = f.saturating_add(1);
        }
        self.doubled[level as usize] = false;
        *f
    }

    /// Before v5.12 an active balance asked for at `level` sets its
    /// failures to `tries + 1`, and one that `started` doubles its interval.
    fn kicked_before_v5_12(&mut self, level: Level, tries: u8, started: bool) {
        self.failed[level as usize] = tries + 1;
        self.doubled[level as usize] |= started;
    }

    /// An active balance at `level` as `idle` could not move the busiest
    /// CPU's running task here: its interval doubles unless newly idle.
    fn pinned(&mut self, level: Level, idle: Idle) {
        self.doubled[level as usize] |= idle != Idle::NewlyIdle;
    }

    /// Asks this CPU to push a task to `dst`; false if a push is pending.
    fn push_to(&mut self, dst: usize) -> bool {
        if self.push.is_some() {
            return false;
        }
        self.push = Some(dst as u32);
        true
    }

    /// Returns the pending push's target, if any, forgetting it.
    pub(super) fn take_push(&mut self) -> Option<usize> {
        self.push.take().map(|d| d as usize)
    }

    /// Returns whether a push is pending.
    pub(super) fn pushing(&self) -> bool {
        self.push.is_some()
    }
}

/// A CPU's record for newly idle balancing: `struct rq`'s `avg_idle` and
/// `idle_stamp`, and each of its levels' `max_newidle_lb_cost`.
#[derive(Clone, Copy, Debug)]
pub(super) struct NewIdle {
    /// The average idle period a wake-up ended, in cycles.
    avg_idle: u64,
    /// When the CPU went idle through a newly idle balance that pulled
    /// nothing, until a wake-up ends the period.
    stamp: Option<u64>,
    /// Per level: the cost, and when it last rose or decayed.
    cost: [(u64, u64); LEVELS],
    /// `sysctl_sched_migration_cost`, the floor of the bound on `avg_idle`.
    migration_cost: u64,
}

impl NewIdle {
    /// A CPU's record at boot: `avg_idle` twice the migration cost
    /// (`sched_init`), no level's cost known.
    pub(super) fn new(migration_cost: u64) -> Self {
        NewIdle { avg_idle: 2 * migration_cost, stamp: None, cost: [(0, 0); LEVELS], migration_cost }
    }

    /// Returns `avg_idle`, in cycles.
    pub(super) fn avg_idle(&self) -> u64 {
        self.avg_idle
    }

    /// It begins a newly idle balance at `now` (`idle_stamp`).
    pub(super) fn idle_from(&mut self, now: u64) {
        self.stamp = Some(now);
    }

    /// Its balance pulled a task: not idle after all.
    fn pulled(&mut self) {
        self.stamp = None;
    }

    /// A wake-up queues a task on it at `now` (`ttwu_do_activate`): an idle
    /// period that began with a newly idle balance ends, and `avg_idle`
    /// moves an eighth of the way to it (`update_avg`), at most twice the
    /// larger of the migration cost and its levels' costs
    /// (`rq->max_idle_balance_cost`).
    pub(super) fn woken(&mut self, now: u64) {
        let Some(from) = self.stamp.take() else { return };
        let (avg, period) = (self.avg_idle as i128, i128::from(now.saturating_sub(from)));
        let max = self.cost.iter().map(|c| c.0).max().unwrap_or(0).max(self.migration_cost);
        self.avg_idle = ((avg + (period - avg) / 8).max(0) as u64).min(2 * max);
    }

    /// Level `level`'s cost at `now`: the largest it took, less 1/64 for
    /// each whole `second` since it last rose or decayed.
    fn level_cost(&mut self, level: Level, now: u64, second: u64) -> u64 {
        let (cost, at) = &mut self.cost[level as usize];
        let seconds = now.saturating_sub(*at) / second.max(1);
        for _ in 0..seconds.min(4096) {
            if *cost == 0 {
                break;
            }
            *cost = *cost * 253 / 256;
        }
        *at += seconds * second;
        *cost
    }

    /// Level `level`'s balance took `cost`, ending at `now`.
    fn spent(&mut self, level: Level, cost: u64, now: u64) {
        if cost > self.cost[level as usize].0 {
            self.cost[level as usize] = (cost, now);
        }
    }
}

#[cfg(test)]
mod tests;
