//! Load balancing between CPUs for the fair classes (CFS, EEVDF) with
//! `migration` on: Linux's `load_balance` (`kernel/sched/fair.c`) at each
//! domain level, its decisions ([`crate::sched::busiest`]: the busiest group
//! and CPU and what to move, from the groups' PELT figures,
//! [`crate::sched::group`]) and its `detach_tasks` here.
//!
//! The domains are the cache (LLC) domain (`cores_per_ccx` CPUs, the MC
//! level; its groups its CPUs), the socket (its groups its cache domains)
//! and the machine (its groups the nodes, a NUMA level); a level of one
//! group is left out, as the kernel removes degenerate domains.
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
//! - Idle CPUs (the NOHZ idle balancer, `nohz_balancer_kick`): at its tick, a
//!   busy CPU with a queued task that may move kicks an idle CPU (of its
//!   cache domain first, then its socket, then the machine), at most once per
//!   cache-domain balance interval, and that CPU balances for itself
//!   (`rebalance_domains` with `CPU_IDLE`) from its lowest level up to the
//!   first that moves tasks. The kernel's idle load balancer balances every
//!   idle CPU whose interval is due; here only the kicked one does.
//! - Busy CPUs (`rebalance_domains` at the tick): every balance interval times
//!   `busy_factor` (32 before v5.10, 16 from it), a CPU balances its cache
//!   domain, then (when that moved nothing) its socket and the machine, there
//!   only as the first CPU of a group with no idle CPU (`should_we_balance`).
//!   A busy CPU takes tasks only by load from an overloaded group, or to even
//!   out siblings' task counts before v6.6 (from v6.6 `sibling_imbalance` is
//!   nothing for a busy CPU).
//! - `detach_tasks`: of the source's queued tasks, least recently run first,
//!   at most `sysctl_sched_nr_migrate` (32) and as many as it runs are looked
//!   at; each that may move is taken while the imbalance lasts: by load (a
//!   task whose load, halved by each failed balance of the level from v5.10
//!   and halved once before, exceeds what is left stays), by utilisation (one
//!   whose utilisation exceeds it stays; 6.12.63 halves it per failure as it
//!   does load, which is not modelled), or one task for one; never the
//!   source's last task for an idle CPU.
//! - A domain's balance interval is its weight in milliseconds (`sd_init`:
//!   `balance_interval = sd_weight`; the doubling on failure not modelled).
//! - `can_migrate_task`: never a task bound to its CPU, nor the running one,
//!   nor one whose dequeue is delayed (EEVDF, `sim/scheduler/delayed.rs`)
//!   unless the balance migrates load; not a cache-hot one (`task_hot`: it
//!   ran within `sysctl_sched_migration_cost`, or, under CFS, it is a next
//!   or last buddy and the pulling CPU runs something), unless more of the
//!   CPU's balances at that level failed than its `cache_nice_tries`
//!   (`nr_balance_failed`, per CPU and level: a periodic balance that finds
//!   an imbalance and moves nothing counts one; one that moves a task or
//!   finds the level balanced, newly idle ones included, resets it;
//!   `cache_nice_tries` is 1 at the cache domain and the package, 2 at NUMA,
//!   `sd_init`).
//! - A balance that moves tasks costs the CPU that makes it two cache-line
//!   transfers from the other CPU (its run-queue lock and the tasks'
//!   scheduling state); the tasks' working sets re-warming in the new CPU's
//!   caches is not modelled.
//! - A moved task keeps its place: CFS its virtual runtime relative to
//!   `min_vruntime`, EEVDF its lag.
//!
//! Not modelled: `update_blocked_averages`' own cost, the SMT level below the
//! cache domain (a cache domain's groups are its CPUs), misfit and
//! asymmetric capacity, NUMA balancing, the active balance that stops a
//! running task to move it, the `LBF_NEED_BREAK` restart.
//!
//! Cost: a balance reads the figures of its level's CPUs (PELT's, brought to
//! the balance's time); newly idle balancing is skipped outright while no
//! CPU has a task to move (the per-machine count kept by the queue setters).
//!
//! The scheduler part (`sim/scheduler.rs`) keeps the figures and detaches
//! the tasks in virtual time; this file decides when to balance, where to
//! look and what to take, and charges the moves.

use super::*;
use crate::sched::busiest::{find_busiest_group, find_busiest_queue, Idle, Imbalance, Level, Migration};
use crate::sched::LLC_IMBALANCE_PCT;
use std::ops::Range;

impl Sim {
    /// Returns the socket of cache domain `llc`.
    fn llc_socket(&self, llc: usize) -> usize {
        self.scheduler.llc_range(llc).0 as usize / self.m.cores_per_socket.max(1)
    }

    /// Returns the cache domains other than `cpu`'s whose count `count` is not
    /// zero, those of `cpu`'s socket first (then by index).
    fn other_llcs<'a>(&'a self, cpu: usize, count: &'a [u32]) -> impl Iterator<Item = usize> + 'a {
        self.level_llcs(cpu, 1).chain(self.level_llcs(cpu, 2)).filter(move |&l| count[l] > 0)
    }

    /// Returns the cache domains level `level` of `cpu` spans beyond the
    /// level below (by index): none for a level that spans what the one below
    /// spans, a degenerate domain.
    fn level_llcs(&self, cpu: usize, level: usize) -> impl Iterator<Item = usize> + '_ {
        let own = self.scheduler.cpu(cpu).llc() as usize;
        let socket = self.llc_socket(own);
        (0..self.scheduler.nllcs()).filter(move |&l| match level {
            0 => l == own,
            1 => l != own && self.llc_socket(l) == socket,
            _ => self.llc_socket(l) != socket,
        })
    }

    /// What reading the run queues of level `level` of `cpu` costs it: a line
    /// transfer from each CPU of the level that runs something, `cpu` aside.
    fn newidle_scan(&self, cpu: usize, level: usize) -> u64 {
        (0..=level)
            .flat_map(|l| self.level_llcs(cpu, l))
            .map(|l| {
                let (lo, hi) = self.scheduler.llc_range(l);
                let mut busy = u64::from(hi - lo - self.scheduler.idle_llcs()[l]);
                if l == self.scheduler.cpu(cpu).llc() as usize && !self.scheduler.idle(cpu) {
                    busy -= 1;
                }
                busy * self.m.transfer_cost(cpu, lo as usize)
            })
            .sum()
    }

    /// Returns the groups of `cpu`'s domain at `level` (0 its cache domain,
    /// whose groups are its CPUs; 1 its socket, whose groups are its cache
    /// domains; 2 the machine, whose groups are the nodes) and which is
    /// `cpu`'s.
    fn level_groups(&self, cpu: usize, level: usize) -> (Vec<Range<usize>>, usize) {
        let own = self.scheduler.cpu(cpu).llc() as usize;
        let groups: Vec<Range<usize>> = match level {
            0 => self.scheduler.llc_cpus(own).map(|c| c..c + 1).collect(),
            1 => {
                let socket = self.llc_socket(own);
                (0..self.scheduler.nllcs())
                    .filter(|&l| self.llc_socket(l) == socket)
                    .map(|l| self.scheduler.llc_cpus(l))
                    .collect()
            }
            _ => {
                let (n, cps) = (self.scheduler.ncpus(), self.m.cores_per_socket.max(1));
                (0..n.div_ceil(cps)).map(|s| s * cps..((s + 1) * cps).min(n)).collect()
            }
        };
        let local = groups.iter().position(|g| g.contains(&cpu)).unwrap_or(0);
        (groups, local)
    }

    /// `find_busiest_group` and `find_busiest_queue` for `cpu`'s balance of
    /// `level` at `now` ([`crate::sched::busiest`]): the CPU to take from and
    /// what to take; `None` when the level is balanced (or has one group).
    fn find_imbalance(&self, cpu: usize, level: usize, idle: Idle, now: u64) -> Option<(usize, Imbalance)> {
        let (groups, local) = self.level_groups(cpu, level);
        if groups.len() < 2 {
            return None;
        }
        // The level's CPUs' figures, numbered from its first CPU.
        let base = groups.first()?.start;
        let cpus = self.scheduler.cpu_loads_of(base..groups.last()?.end, now);
        let groups: Vec<Range<usize>> = groups.iter().map(|g| g.start - base..g.end - base).collect();
        let kernel = self.scheduler.tun().kernel;
        let numa = (level == 2).then(|| {
            let (cps, ccx) = (self.m.cores_per_socket.max(1), self.cfg.preset.cores_per_ccx);
            crate::sched::fork::imb_numa_nr(self.scheduler.ncpus(), cps, ccx)
        });
        let l = Level {
            groups: &groups,
            local,
            pct: if level == 0 { LLC_IMBALANCE_PCT } else { kernel.upper_imbalance_pct() },
            llc: level == 0,
            prefer_sibling: level > 0,
            numa,
            threads: self.scheduler.threads_per_core(),
            kernel,
        };
        let imb = find_busiest_group(&l, &cpus, idle)?;
        let src = find_busiest_queue(groups[imb.group].clone(), &cpus, &imb, kernel)?;
        Some((base + src, imb))
    }

    /// `detach_tasks`: takes tasks from `src`'s queue for `cpu`'s balance of
    /// `level` at `now` until `imb` is met (one for a newly idle balance);
    /// returns them, not yet queued anywhere.
    fn detach_tasks(
        &mut self,
        src: usize,
        cpu: usize,
        level: usize,
        imb: Imbalance,
        idle: Idle,
        now: u64,
    ) -> Vec<usize> {
        let mut moved = Vec::new();
        let kernel = self.scheduler.tun().kernel;
        let (hot_ok, failed) = (self.hot_ok(cpu, level), self.scheduler.cpu(cpu).balance_failed(level));
        let mut left = i128::from(imb.amount);
        let load = imb.kind == Migration::Load;
        for tid in self.scheduler.balance_candidates(src) {
            if self.scheduler.load_of(src) <= 1 {
                break;
            }
            if !self.scheduler.can_migrate(tid, src, cpu, now, hot_ok, load) {
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
                    if i128::from(u) > left {
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
        if self.scheduler.overloaded() == 0 {
            return (None, now);
        }
        let domain_gate = self.cfg.preset.kernel.newidle_gate_is_domain_cost();
        let ni = self.scheduler.cpu_mut(cpu).newidle_mut();
        let avg = ni.avg_idle();
        let gate = if domain_gate { ni.level_cost(0, now, second) } else { tun.migration_cost };
        if avg < gate {
            return (None, now);
        }
        let (mut t, mut spent) = (now, 0);
        let levels: [bool; LEVELS] = std::array::from_fn(|l| self.level_llcs(cpu, l).next().is_some());
        for level in (0..LEVELS).filter(|&l| levels[l]) {
            if avg < spent + self.scheduler.cpu_mut(cpu).newidle_mut().level_cost(level, t, second) {
                break;
            }
            let t0 = t;
            t += self.newidle_scan(cpu, level);
            let mut pulled = None;
            let found = self.find_imbalance(cpu, level, Idle::NewlyIdle, t);
            if let Some((src, imb)) = found {
                pulled = self.detach_tasks(src, cpu, level, imb, Idle::NewlyIdle, t).first().copied();
                if pulled.is_some() {
                    t += 2 * self.m.transfer_cost(src, cpu);
                }
            }
            // A newly idle balance resets the level's failures when it moves a
            // task or finds the level balanced; its failures are not counted.
            if found.is_none() || pulled.is_some() {
                self.scheduler.cpu_mut(cpu).balanced(level, true);
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

    /// Balancing at the tick of busy `cpu` at `now`: handing a task to an idle
    /// CPU, and the periodic balance of its cache domain.
    pub(super) fn tick_balance(&mut self, cpu: usize, now: u64) {
        let own = self.scheduler.cpu(cpu).llc() as usize;
        let weight = u64::from(self.scheduler.llc_range(own).1 - self.scheduler.llc_range(own).0);
        let interval = self.scheduler.tun().ms * weight;
        if self.scheduler.cpu(cpu).runq().movable() > 0 && now >= self.scheduler.cpu(cpu).next_kick() {
            self.scheduler.cpu_mut(cpu).kick_next_at(now + interval);
            let idle = if self.scheduler.idle_llcs()[own] > 0 {
                self.scheduler.llc_cpus(own).find(|&c| self.scheduler.idle(c))
            } else {
                self.other_llcs(cpu, self.scheduler.idle_llcs())
                    .next()
                    .and_then(|l| self.scheduler.llc_cpus(l).find(|&c| self.scheduler.idle(c)))
            };
            if let Some(dst) = idle {
                // The kicked idle CPU's balances (`rebalance_domains` with
                // `CPU_IDLE`), from its lowest level up to the first that
                // moves tasks.
                for level in 0..LEVELS {
                    if self.balance(dst, level, Idle::Idle, now) {
                        break;
                    }
                }
            }
        }
        if now >= self.scheduler.cpu(cpu).next_balance() {
            let at = now + interval * self.scheduler.tun().kernel.busy_factor();
            self.scheduler.cpu_mut(cpu).balance_next_at(at);
            if self.llc_balance(cpu, own, now) {
                return;
            }
        }
        self.upper_balance(cpu, now);
    }

    /// The periodic balance of busy `cpu`'s cache domain `own` at `now`
    /// ([`Sim::balance`] with `CPU_NOT_IDLE`); returns whether it moved a
    /// task.
    fn llc_balance(&mut self, cpu: usize, own: usize, now: u64) -> bool {
        // `update_sd_lb_stats` ends with SIS_UTIL's count (v6.0 on).
        self.scheduler.update_idle_cpu_scan(own, now);
        self.balance(cpu, 0, Idle::Busy, now)
    }

    /// `cpu`'s periodic balance of domain level `level` at `now`, busy or
    /// idle (`load_balance`): the tasks [`crate::sched::busiest`] finds,
    /// queued on `cpu`, the balance costing two line transfers from the
    /// source (its run-queue lock and the tasks' state); returns whether it
    /// moved any. A balance that finds an imbalance and moves nothing counts
    /// a failure of the level, any other resets them.
    fn balance(&mut self, cpu: usize, level: usize, idle: Idle, now: u64) -> bool {
        let Some((src, imb)) = self.find_imbalance(cpu, level, idle, now) else {
            self.scheduler.cpu_mut(cpu).balanced(level, true);
            return false;
        };
        let moved = self.detach_tasks(src, cpu, level, imb, idle, now);
        let t = now + 2 * self.m.transfer_cost(src, cpu);
        for &tid in &moved {
            if self.scheduler.is_delayed(tid) {
                self.scheduler.attach_delayed(cpu, tid, t);
            } else {
                self.enqueue(tid, cpu, t, cpu);
            }
        }
        self.scheduler.cpu_mut(cpu).balanced(level, !moved.is_empty());
        !moved.is_empty()
    }

    /// Returns whether `cpu`'s balance at domain level `level` may move a
    /// cache-hot task: once more of its balances there failed than the
    /// level's `cache_nice_tries` (`can_migrate_task`).
    fn hot_ok(&self, cpu: usize, level: usize) -> bool {
        self.scheduler.cpu(cpu).balance_failed(level) > CACHE_NICE_TRIES[level]
    }

    /// The periodic balance of busy `cpu`'s domains above its cache domain at
    /// its tick (`rebalance_domains`): its socket, whose groups are its cache
    /// domains, then the machine, whose groups are the nodes, each every
    /// `busy_factor` times its weight in milliseconds, each a
    /// [`Sim::balance`] with `CPU_NOT_IDLE`. Only the first CPU of a group
    /// with no idle CPU balances for it (`should_we_balance`; an idle CPU's
    /// balance is the idle paths'); it stops at the first level that moved
    /// tasks.
    fn upper_balance(&mut self, cpu: usize, now: u64) {
        for up in 0..2 {
            let level = up + 1;
            if now < self.scheduler.cpu(cpu).next_balance_up(up) {
                continue;
            }
            let (groups, local) = self.level_groups(cpu, level);
            let weight = groups.iter().map(|g| g.len() as u64).sum::<u64>();
            let t = *self.scheduler.tun();
            self.scheduler.cpu_mut(cpu).balance_up_next_at(up, now + t.ms * weight * t.kernel.busy_factor());
            if groups.len() < 2 {
                continue;
            }
            // `should_we_balance`: not this CPU's turn, which the kernel
            // counts as balanced (`out_balanced`).
            if groups[local].start != cpu || groups[local].clone().any(|c| self.scheduler.idle(c)) {
                self.scheduler.cpu_mut(cpu).balanced(level, true);
                continue;
            }
            if self.balance(cpu, level, Idle::Busy, now) {
                return;
            }
        }
    }
}

/// The domain levels newly idle balancing walks: the cache domain, the
/// socket, the machine.
const LEVELS: usize = 3;

/// `sd->cache_nice_tries` of each level (`sd_init`): 1 at the cache domain
/// and the package, 2 at a NUMA level (the machine's nodes here).
const CACHE_NICE_TRIES: [u8; LEVELS] = [1, 1, 2];

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
    fn level_cost(&mut self, level: usize, now: u64, second: u64) -> u64 {
        let (cost, at) = &mut self.cost[level];
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
    fn spent(&mut self, level: usize, cost: u64, now: u64) {
        if cost > self.cost[level].0 {
            self.cost[level] = (cost, now);
        }
    }
}
