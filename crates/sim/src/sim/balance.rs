//! Load balancing between CPUs for the fair classes (CFS, EEVDF) with
//! `migration` on: Linux's `load_balance` reduced to the moves it makes
//! between run queues of nice-0 tasks (`kernel/sched/fair.c`).
//!
//! The domains are the cache (LLC) domain (`cores_per_ccx` CPUs, the MC
//! level), the socket, and the machine; a level that spans what the one
//! below spans is left out, as the kernel removes degenerate domains.
//! - Newly idle (`newidle_balance`, `sched_balance_newidle` from v6.10): a
//!   CPU about to go idle, when some CPU has a task balancing may move
//!   (`rd->overload`), balances its domains from the lowest up and stops at
//!   the first task pulled (one task, as a preemptible kernel stops after
//!   the first): the busiest CPU (most runnable tasks, at least two) of its
//!   cache domain, then of its socket's other cache domains, then of the
//!   other sockets'. What a level costs is timed ([`NewIdle`]): reading the
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
//!   busy CPU with a queued task that may move hands one to an idle CPU (of
//!   its cache domain first, then its socket, then the machine), at most once
//!   per cache-domain balance interval, as idle CPUs balance at theirs.
//! - Busy CPUs (`rebalance_domains` at the tick): every balance interval times
//!   `busy_factor` (32 before v5.10, 16 from it), a CPU pulls one task from
//!   the busiest CPU of its cache domain when that one runs at least two more
//!   tasks and more than the domain's `imbalance_pct` (117) percent of its own
//!   (`find_busiest_group`'s test, loads in tasks); and at the socket (groups:
//!   its cache domains) and the machine (groups: the nodes), the first CPU of
//!   a group with no idle CPU pulls one task from the busiest group's busiest
//!   CPU when that group's average load passes its own by more than the
//!   level's `imbalance_pct` (125 before v5.10, 117 from it), its own is below
//!   the level's average and the imbalance is a whole task (`upper_balance`).
//! - A domain's balance interval is its weight in milliseconds (`sd_init`:
//!   `balance_interval = sd_weight`; the doubling on failure not modelled).
//! - `can_migrate_task`: never a task bound to its CPU, nor the running one,
//!   nor one whose dequeue is delayed (EEVDF, `sim/scheduler/delayed.rs`)
//!   unless the balance migrates load (`migrate_load`: the busy CPUs'
//!   balances; an idle CPU's pull is `migrate_task` or `migrate_util`);
//!   not a cache-hot one (`task_hot`: it ran within `sysctl_sched_migration_cost`,
//!   or, under CFS, it is a next or last buddy and the pulling CPU runs something),
//!   unless more of the CPU's balances at that level failed than its
//!   `cache_nice_tries` (`nr_balance_failed`, per CPU and level: a periodic
//!   balance that finds an imbalance and moves nothing counts one; one that
//!   moves a task or finds the level balanced, newly idle ones included,
//!   resets it; `cache_nice_tries` is 1 at the cache domain and the
//!   package, 2 at NUMA, `sd_init`). Of the movable tasks, at
//!   most `sysctl_sched_nr_migrate` (32) are looked at and the one that ran
//!   least recently goes (the tail of `rq->cfs_tasks`).
//! - A move costs the CPU that makes it two cache-line transfers from the
//!   other CPU (its run-queue lock and the task's scheduling state); the
//!   task's working set re-warming in the new CPU's caches is not modelled.
//! - The moved task keeps its place: CFS its virtual runtime relative to
//!   `min_vruntime`, EEVDF its lag.
//!
//! Not modelled: PELT load and utilisation here (the balances count runnable
//! tasks; only wake-affine placement reads PELT, `sim/scheduler/pelt.rs`),
//! and so `update_blocked_averages`' own cost, the SMT level below the cache domain, misfit and asymmetric
//! capacity, NUMA balancing, the active balance that stops a running task to
//! move it.
//!
//! Cost: a balance counts a level's busy CPUs from the per-domain counts of
//! idle and overloaded CPUs kept by the queue setters, never every CPU at
//! every event.
//!
//! The choices (the busiest CPU, the task to move, its detaching in virtual
//! time) are the scheduler part's (`sim/scheduler.rs`); this file decides
//! when to balance and where to look, and charges the moves.

use super::*;
use crate::sched::LLC_IMBALANCE_PCT;

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

    /// The busiest CPU of the cache domains level `level` of `cpu` adds, with
    /// a task balancing may move.
    fn newidle_source(&self, cpu: usize, level: usize) -> Option<usize> {
        let mut best: Option<usize> = None;
        for l in self.level_llcs(cpu, level).filter(|&l| self.scheduler.overloaded_llcs()[l] > 0) {
            let Some(b) = self.scheduler.busiest(cpu, self.scheduler.llc_cpus(l)) else { continue };
            if best.is_none_or(|s| (self.scheduler.load_of(b), Reverse(b)) > (self.scheduler.load_of(s), Reverse(s))) {
                best = Some(b);
            }
        }
        best
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
            let source = self.newidle_source(cpu, level);
            if let Some(src) = source {
                let hot_ok = self.hot_ok(cpu, level);
                if let Some(at) = self.scheduler.task_to_move(src, cpu, t, hot_ok, false) {
                    pulled = self.scheduler.detach(src, at, cpu, t);
                    t += 2 * self.m.transfer_cost(src, cpu);
                }
            }
            // A newly idle balance resets the level's failures when it moves a
            // task or finds none to move; its failures are not counted.
            if source.is_none() || pulled.is_some() {
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
                // The idle CPU's balance of the lowest level holding both.
                let level = self.level_of(dst, cpu);
                let hot_ok = self.hot_ok(dst, level);
                let moved = self.scheduler.task_to_move(cpu, dst, now, hot_ok, false).is_some_and(|at| {
                    // The idle CPU takes the task from this one's queue.
                    let t = now + 2 * self.m.transfer_cost(cpu, dst);
                    let tid = self.scheduler.detach(cpu, at, dst, now);
                    if let Some(tid) = tid {
                        self.enqueue(tid, dst, t, cpu);
                    }
                    tid.is_some()
                });
                self.scheduler.cpu_mut(dst).balanced(level, moved);
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

    /// The periodic balance of busy `cpu`'s cache domain `own`: one task
    /// from its busiest CPU when that runs at least two more tasks and more
    /// than `imbalance_pct` percent of this one's. Returns whether it moved one.
    fn llc_balance(&mut self, cpu: usize, own: usize, now: u64) -> bool {
        // `update_sd_lb_stats` ends with SIS_UTIL's count (v6.0 on).
        self.scheduler.update_idle_cpu_scan(own, now);
        let Some(src) = self.scheduler.busiest(cpu, self.scheduler.llc_cpus(own)) else {
            self.scheduler.cpu_mut(cpu).balanced(0, true);
            return false;
        };
        let (b, l) = (u64::from(self.scheduler.load_of(src)), u64::from(self.scheduler.load_of(cpu)));
        if 100 * b <= LLC_IMBALANCE_PCT * l || b < l + 2 {
            self.scheduler.cpu_mut(cpu).balanced(0, true);
            return false;
        }
        self.pull_from(src, cpu, 0, now)
    }

    /// Returns the lowest domain level of `cpu` that holds `other`: 0 its
    /// cache domain, 1 its socket, 2 the machine.
    fn level_of(&self, cpu: usize, other: usize) -> usize {
        let (a, b) = (self.scheduler.cpu(cpu).llc() as usize, self.scheduler.cpu(other).llc() as usize);
        if a == b {
            0
        } else if self.llc_socket(a) == self.llc_socket(b) {
            1
        } else {
            2
        }
    }

    /// Returns whether `cpu`'s balance at domain level `level` may move a
    /// cache-hot task: once more of its balances there failed than the
    /// level's `cache_nice_tries` (`can_migrate_task`).
    fn hot_ok(&self, cpu: usize, level: usize) -> bool {
        self.scheduler.cpu(cpu).balance_failed(level) > CACHE_NICE_TRIES[level]
    }

    /// Moves a task balancing may move from `src`'s queue to busy `cpu`'s
    /// at domain level `level` (a cache-hot one only after more failed
    /// balances there than `cache_nice_tries`); returns whether it moved one.
    fn pull_from(&mut self, src: usize, cpu: usize, level: usize, now: u64) -> bool {
        let hot_ok = self.hot_ok(cpu, level);
        let moved = match self.scheduler.task_to_move(src, cpu, now, hot_ok, true) {
            Some(at) => {
                match self.scheduler.detach(src, at, cpu, now) {
                    Some(tid) if self.scheduler.is_delayed(tid) => self.scheduler.attach_delayed(cpu, tid, now),
                    Some(tid) => self.enqueue(tid, cpu, now, cpu),
                    None => {}
                }
                true
            }
            None => false,
        };
        self.scheduler.cpu_mut(cpu).balanced(level, moved);
        moved
    }

    /// The periodic balance of busy `cpu`'s domains above its cache domain at
    /// its tick (`rebalance_domains`, `load_balance`): its socket, whose
    /// groups are its cache domains, then the machine, whose groups are the
    /// nodes, each every `busy_factor` times its weight in milliseconds. Only
    /// the first CPU of a group with no idle CPU balances for it
    /// (`should_we_balance`; an idle CPU's balance is the idle paths'). The
    /// busiest other group (the highest average load, 1024 a task over 1024 a
    /// CPU) gives up a task when it is busier than the group by more than
    /// `imbalance_pct`, the group is below the level's average, and the
    /// imbalance (`calculate_imbalance`'s `migrate_load`: the lesser of the
    /// busiest's excess over the average and the group's shortfall, times
    /// their CPUs) is at least a task's load, halved by each failed balance
    /// of the level from v5.10 and halved once before (`detach_tasks`; less
    /// is a failed balance); the task comes from the busiest group's busiest
    /// CPU. One task a balance, as at the cache domain.
    fn upper_balance(&mut self, cpu: usize, now: u64) {
        let cps = self.m.cores_per_socket.max(1);
        let n = self.scheduler.ncpus();
        for level in 0..2 {
            if now < self.scheduler.cpu(cpu).next_balance_up(level) {
                continue;
            }
            let groups: Vec<std::ops::Range<usize>> = if level == 0 {
                let own = self.llc_socket(self.scheduler.cpu(cpu).llc() as usize);
                (0..self.scheduler.nllcs())
                    .filter(|&l| self.llc_socket(l) == own)
                    .map(|l| self.scheduler.llc_cpus(l))
                    .collect()
            } else {
                (0..n.div_ceil(cps)).map(|s| s * cps..((s + 1) * cps).min(n)).collect()
            };
            let weight = groups.iter().map(|g| g.len() as u64).sum::<u64>();
            let t = *self.scheduler.tun();
            self.scheduler.cpu_mut(cpu).balance_up_next_at(level, now + t.ms * weight * t.kernel.busy_factor());
            if groups.len() < 2 {
                continue;
            }
            let Some(local) = groups.iter().position(|g| g.contains(&cpu)) else { continue };
            // `should_we_balance`, `find_busiest_group`, `find_busiest_queue`:
            // the busiest group's busiest CPU and the imbalance, or nothing to
            // do, which resets the level's failures (`out_balanced`).
            let found = 'find: {
                if groups[local].start != cpu || groups[local].clone().any(|c| self.scheduler.idle(c)) {
                    break 'find None;
                }
                let tasks =
                    |g: &std::ops::Range<usize>| g.clone().map(|c| u64::from(self.scheduler.load_of(c))).sum::<u64>();
                let avg = |g: &std::ops::Range<usize>| tasks(g) * 1024 / g.len().max(1) as u64;
                let level_avg = groups.iter().map(tasks).sum::<u64>() * 1024 / weight.max(1);
                let busiest = (0..groups.len()).filter(|&i| i != local).max_by_key(|&i| (avg(&groups[i]), Reverse(i)));
                let Some(b) = busiest else { break 'find None };
                let (la, ba) = (avg(&groups[local]), avg(&groups[b]));
                if ba <= la || la >= level_avg || 100 * ba <= t.kernel.upper_imbalance_pct() * la {
                    break 'find None;
                }
                let excess = (ba - level_avg) * groups[b].len() as u64;
                let short = (level_avg - la) * groups[local].len() as u64;
                self.scheduler.busiest(cpu, groups[b].clone()).map(|src| (src, excess.min(short)))
            };
            let Some((src, imbalance)) = found else {
                self.scheduler.cpu_mut(cpu).balanced(level + 1, true);
                continue;
            };
            // `detach_tasks`: a task whose load, halved by each failed balance
            // (from v5.10; halved once before), exceeds the imbalance stays;
            // moving none is a failure.
            let task = if t.kernel.load_shr_failed() {
                1024u64 >> self.scheduler.cpu(cpu).balance_failed(level + 1).min(63)
            } else {
                512
            };
            if imbalance < task {
                self.scheduler.cpu_mut(cpu).balanced(level + 1, false);
                continue;
            }
            if self.pull_from(src, cpu, level + 1, now) {
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
