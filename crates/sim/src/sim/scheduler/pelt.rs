//! The scheduler's side of per-entity load tracking ([`crate::sched::pelt`]):
//! when a task's and a CPU's averages are brought up to date, and how a task
//! joins and leaves a CPU's.
//!
//! - Every change of a CPU's fair queue (a task queued or taken off it, the
//!   running task set or cleared: [`Scheduler::queue`], `unqueue`, `set_cur`)
//!   brings the queue's averages up to that time with the queue as it was
//!   since its last change (`update_cfs_rq_load_avg`: its tasks' weight,
//!   how many are runnable, whether one ran), then the averages of the
//!   tasks it changed, each with its own state since its last change
//!   (`__update_load_avg_se`: queued, runnable, running). The kernel updates
//!   at the same points (`enqueue_entity`, `dequeue_entity`,
//!   `set_next_entity`, `put_prev_entity`); at each tick of a busy CPU
//!   (`entity_tick`) the running task's and the queue's are brought up to
//!   date too, so that a long run is read as it is.
//! - A task queued on a CPU whose averages do not hold it joins them
//!   (`attach_entity_load_avg`; a new task with `post_init_entity_util_avg`
//!   first); if another CPU's held it, as after a wake-up there, that one
//!   has it removed (`remove_entity_load_avg`, applied at its next update).
//!   A task the balancer moves is detached from its old CPU's at once
//!   (`detach_entity_load_avg`, `DO_DETACH`); a task that dies is removed
//!   (`task_dead_fair`).
//! - What reads them: `wake_affine_weight` (WA_WEIGHT), which compares the
//!   waker's CPU's load with the wakee's and the previous CPU's, and SIS_UTIL
//!   (v6.0), whose count of CPUs a wake-up's idle scan may look at each
//!   periodic balance of a cache domain sets from its CPUs' utilisation;
//!   fork placement and the load balancer, which type and compare groups by
//!   their loads, utilisations and runnable averages ([`crate::sched::group`],
//!   [`crate::sched::busiest`]).
//! - Time is the cycle clock in ns (every CPU at full capacity and
//!   frequency, so `rq_clock_pelt` is the task clock).
//!
//! The FIFO class (FreeBSD's runs here) keeps no averages.

use super::{Scheduler, State};
use crate::sched::group::{CpuLoad, SCALE};
use crate::sched::pelt::{idle_scan_count, RqAvg, TaskState};
use crate::sched::LLC_IMBALANCE_PCT;

impl Scheduler {
    /// Returns the PELT clock at cycle `now`, in ns.
    fn pelt_clock(&self, now: u64) -> u64 {
        (u128::from(now) * 1_000_000 / u128::from(self.tun.ms.max(1))) as u64
    }

    /// Brings `cpu`'s queue averages to `now` with the queue as it was since
    /// their last update, and records it as it is.
    pub(in crate::sim) fn pelt_rq(&mut self, cpu: usize, now: u64) {
        if !self.tun.kind.is_fair() {
            return;
        }
        let ns = self.pelt_clock(now);
        let s = &self.sched[cpu];
        let cur = s.cur;
        let weight = s.runq.sums().1.max(0) as u64 + cur.map_or(0, |c| u64::from(self.threads[c].se.weight));
        let runnable = u64::from(self.loads[cpu] - s.runq.delayed());
        self.sched[cpu].pelt.update(ns, weight, runnable, cur.is_some());
    }

    /// Brings thread `tid`'s averages to `now` with its state since their
    /// last update, moves them to the queue of the CPU it is queued on (or
    /// out of every queue's, dead), and records its state as it is.
    pub(in crate::sim) fn pelt_task(&mut self, tid: usize, now: u64) {
        if !self.tun.kind.is_fair() {
            return;
        }
        let ns = self.pelt_clock(now);
        let (cpu, weight, state, delayed) = {
            let t = &self.threads[tid];
            (t.cpu, t.se.weight, t.state, t.se.delayed)
        };
        let running = self.sched[cpu].cur == Some(tid);
        let now_is = match state {
            State::Running | State::Runnable => TaskState { on_rq: true, runnable: true, running },
            State::Blocked => TaskState { on_rq: delayed, runnable: false, running },
            State::Dead => TaskState { on_rq: false, runnable: false, running },
        };
        let p = &mut self.threads[tid].se.pelt;
        let arrives = now_is.on_rq && p.rq != Some(cpu as u32);
        match p.rq {
            // Woken on another CPU (`migrate_task_rq_fair`): its averages
            // are brought, blocked, only to its old queue's last update, and
            // that queue drops them at its next.
            Some(old) if arrives => {
                self.sched[old as usize].pelt.remove(&mut p.avg, weight);
                p.rq = None;
            }
            Some(old) => {
                p.avg.update_task(ns, weight, p.held);
                if state == State::Dead {
                    // `task_dead_fair`.
                    self.sched[old as usize].pelt.remove(&mut p.avg, weight);
                    p.rq = None;
                }
            }
            None => {}
        }
        p.held = now_is;
        if !arrives {
            return;
        }
        let rq: &mut RqAvg = &mut self.sched[cpu].pelt;
        if p.new {
            rq.attach_new(&mut p.avg, weight);
            p.new = false;
        } else {
            rq.attach(&mut p.avg, weight);
        }
        p.rq = Some(cpu as u32);
    }

    /// The balancer took `tid` off `src`'s queue (`unqueue`, which brought
    /// both averages up to that time): its averages leave `src`'s at once,
    /// to join its new CPU's when it is queued there.
    pub(super) fn pelt_detach(&mut self, tid: usize, src: usize) {
        if !self.tun.kind.is_fair() {
            return;
        }
        let weight = self.threads[tid].se.weight;
        let p = &mut self.threads[tid].se.pelt;
        if p.rq == Some(src as u32) {
            self.sched[src].pelt.detach(&mut p.avg, weight);
            p.rq = None;
        }
    }

    /// WA_WEIGHT (`wake_affine_weight`), with PELT's loads
    /// (`scheduler/pelt.rs`): `this` when its load, less the waker's if sync
    /// and with the wakee's, is below `prev`'s without the wakee's, `prev`'s
    /// biased by half the `imbalance_pct` of the lowest domain holding both; a tie stays on `prev`
    /// from v4.17 (a sync one counting `prev` one more). Every CPU's capacity
    /// is the same, so the kernel's products with `capacity_of` cancel.
    pub(super) fn wake_affine_weight(&self, this: usize, prev: usize, tid: usize, sync: bool) -> usize {
        let mut this_eff = self.wake_load(this) as i64;
        if sync {
            let waker = self.sched[this].cur.map_or(0, |w| self.task_load(w)) as i64;
            if waker > this_eff {
                return this;
            }
            this_eff -= waker;
        }
        let task = self.task_load(tid) as i64;
        this_eff = (this_eff + task) * 100;
        let mut prev_eff =
            (self.wake_load(prev) as i64 - task) * (100 + (self.imbalance_pct(this, prev) as i64 - 100) / 2);
        let take = if self.tun.kernel.affine_ties_prev() {
            prev_eff += i64::from(sync);
            this_eff < prev_eff
        } else {
            this_eff <= prev_eff
        };
        if take {
            this
        } else {
            prev
        }
    }

    /// SIS_UTIL's `update_idle_cpu_scan`, at a periodic balance of cache
    /// domain `llc` at `now` ([`idle_scan_count`] of its CPUs'
    /// utilisations; the newly idle balance does not update it).
    pub(in crate::sim) fn update_idle_cpu_scan(&mut self, llc: usize, now: u64) {
        if !self.tun.kernel.sis_util() {
            return;
        }
        let (lo, hi) = (self.llcs[llc].0 as usize, self.llcs[llc].1 as usize);
        let sum: u64 = (lo..hi).map(|c| self.cpu_util(c, now)).sum();
        self.nr_idle_scan[llc] = idle_scan_count(sum, (hi - lo) as u64, LLC_IMBALANCE_PCT);
    }

    /// Returns how many CPUs of cache domain `llc` a wake-up's idle scan may
    /// look at.
    pub(in crate::sim) fn nr_idle_scan(&self, llc: usize) -> u32 {
        self.nr_idle_scan[llc]
    }

    /// Returns `cpu`'s utilisation at `now` (`cpu_util_cfs`, at most its
    /// capacity; `util_est` not modelled), as [`Scheduler::pelt_at`] reads it.
    fn cpu_util(&self, cpu: usize, now: u64) -> u64 {
        self.pelt_at(cpu, now, self.sched[cpu].pelt.avg.util_avg).min(SCALE)
    }

    /// Returns `value`, one of `cpu`'s queue averages, at `now`: as last
    /// updated while the CPU has tasks (its tick keeps it current);
    /// idle, decayed since, as the NOHZ idle balancer's updates of blocked
    /// averages keep an idle CPU's.
    fn pelt_at(&self, cpu: usize, now: u64, value: u64) -> u64 {
        if self.loads[cpu] > 0 {
            return value;
        }
        let idle_ns = self.pelt_clock(now).saturating_sub(self.sched[cpu].pelt.avg.last_update);
        crate::sched::pelt::decay_load(value, idle_ns >> 20)
    }

    /// Returns every CPU's figures at `now` as fork placement reads them
    /// ([`CpuLoad`]): its tasks, and its queue's load, utilisation and
    /// runnable averages ([`Scheduler::pelt_at`]); under the FIFO class,
    /// which keeps no averages, its tasks as whole loads and a busy CPU's
    /// utilisation as full.
    pub(in crate::sim) fn cpu_loads(&self, now: u64) -> Vec<CpuLoad> {
        (0..self.sched.len()).map(|c| self.cpu_load(c, now)).collect()
    }

    /// Returns the figures of `cpus` ([`Scheduler::cpu_loads`]), in their
    /// order: what a balance of a domain spanning them reads.
    pub(in crate::sim) fn cpu_loads_at(&self, cpus: &[usize], now: u64) -> Vec<CpuLoad> {
        cpus.iter().map(|&c| self.cpu_load(c, now)).collect()
    }

    /// Returns CPU `c`'s figures at `now` ([`Scheduler::cpu_loads`]).
    fn cpu_load(&self, c: usize, now: u64) -> CpuLoad {
        let nr_running = self.loads[c];
        if !self.tun.kind.is_fair() {
            let n = u64::from(nr_running);
            return CpuLoad { nr_running, load: n * SCALE, util: n.min(1) * SCALE, runnable: n * SCALE };
        }
        let a = &self.sched[c].pelt.avg;
        CpuLoad {
            nr_running,
            load: self.pelt_at(c, now, a.load_avg),
            util: self.cpu_util(c, now),
            runnable: self.pelt_at(c, now, a.runnable_avg),
        }
    }

    /// Returns `cpu`'s fair queue's load average as last updated.
    pub(in crate::sim) fn load_avg(&self, cpu: usize) -> u64 {
        self.sched[cpu].pelt.avg.load_avg
    }

    /// Sets `cpu`'s fair queue's load average (for tests).
    #[cfg(test)]
    pub(in crate::sim) fn fake_load_avg(&mut self, cpu: usize, load: u64) {
        self.sched[cpu].pelt.avg.load_avg = load;
    }

    /// Returns `cpu`'s load as `wake_affine_weight` reads it: its queue's
    /// load average, blocked tasks' included (`cpu_load`, v5.5 on), or the
    /// runnable tasks' loads alone (`weighted_cpuload`, before).
    fn wake_load(&self, cpu: usize) -> u64 {
        if self.tun.kernel.wake_load_blocked() {
            return self.load_avg(cpu);
        }
        let s = &self.sched[cpu];
        let queued = s.runq.iter().filter(|e| !e.delayed).map(|e| self.task_load(e.tid as usize));
        queued.sum::<u64>() + s.cur.map_or(0, |c| self.task_load(c))
    }

    /// Returns task `tid`'s utilisation (`task_util_est`; `util_est` not
    /// modelled).
    pub(in crate::sim) fn task_util(&self, tid: usize) -> u64 {
        self.threads[tid].se.pelt.avg.util_avg
    }

    /// Returns task `tid`'s load average (`task_h_load`: a task of the
    /// root's queue, no groups).
    pub(in crate::sim) fn task_load(&self, tid: usize) -> u64 {
        self.threads[tid].se.pelt.avg.load_avg
    }
}
