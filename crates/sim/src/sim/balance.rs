//! Load balancing between CPUs for the fair classes (CFS, EEVDF) with
//! `migration` on: Linux's `load_balance` reduced to the moves it makes
//! between run queues of nice-0 tasks (`kernel/sched/fair.c`).
//!
//! The domains are the cache (LLC) domain (`cores_per_ccx` CPUs, the MC
//! level), the socket, and the machine.
//! - Newly idle (`newidle_balance`, formerly `idle_balance`): a CPU about to
//!   go idle pulls one queued task from the busiest CPU (most runnable tasks,
//!   at least two) of its cache domain, else of its socket, else of the
//!   machine; one task, as a preemptible kernel stops after the first. After
//!   a search past the cache domain found nothing, the CPU searches only its
//!   own domain for a tick (EST, standing for the kernel's limit of newly idle
//!   balancing by its cost against the CPU's average idle time).
//! - Idle CPUs (the NOHZ idle balancer, `nohz_balancer_kick`): at its tick, a
//!   busy CPU with a queued task that may move hands one to an idle CPU (of
//!   its cache domain first, then its socket, then the machine), at most once
//!   per cache-domain balance interval, as idle CPUs balance at theirs.
//! - Busy CPUs (`rebalance_domains` at the tick): every balance interval times
//!   `busy_factor`, a CPU pulls one task from the busiest CPU of its cache
//!   domain when that one runs at least two more tasks and more than
//!   `imbalance_pct` percent of its own (`find_busiest_group`'s test, loads
//!   in tasks). The socket and machine levels are left to the idle paths.
//! - A domain's balance interval is its weight in milliseconds (`sd_init`:
//!   `balance_interval = sd_weight`; the doubling on failure not modelled).
//! - `can_migrate_task`: never a task bound to its CPU, nor the running one;
//!   not a cache-hot one (`task_hot`: it ran within `sysctl_sched_migration_cost`),
//!   unless the busy balance found only hot ones the time before
//!   (`nr_balance_failed > cache_nice_tries`, 0). Of the movable tasks, at
//!   most `sysctl_sched_nr_migrate` (32) are looked at and the one that ran
//!   least recently goes (the tail of `rq->cfs_tasks`).
//! - A move costs the CPU that makes it two cache-line transfers from the
//!   other CPU (its run-queue lock and the task's scheduling state); the
//!   task's working set re-warming in the new CPU's caches is not modelled.
//! - The moved task keeps its place: CFS its virtual runtime relative to
//!   `min_vruntime`, EEVDF its lag.
//!
//! Not modelled: PELT load and utilisation, `avg_idle` (newly idle balance
//! always runs), misfit and asymmetric capacity, NUMA balancing, the active
//! balance that stops a running task to move it.
//!
//! Cost: a balance scans a cache domain's CPUs, or the per-domain counts of
//! idle and overloaded CPUs kept by the queue setters, never every CPU at
//! every event.
//!
//! The choices (the busiest CPU, the task to move, its detaching in virtual
//! time) are the scheduler part's (`sim/scheduler.rs`); this file decides
//! when to balance and where to look, and charges the moves.

use super::*;

impl Sim {
    /// Returns the socket of cache domain `llc`.
    fn llc_socket(&self, llc: usize) -> usize {
        self.scheduler.llc_range(llc).0 as usize / self.m.cores_per_socket.max(1)
    }

    /// Returns the cache domains other than `cpu`'s whose count `count` is not
    /// zero, those of `cpu`'s socket first (then by index).
    fn other_llcs<'a>(&'a self, cpu: usize, count: &'a [u32]) -> impl Iterator<Item = usize> + 'a {
        let own = self.scheduler.cpu(cpu).llc() as usize;
        let socket = self.llc_socket(own);
        let near =
            (0..self.scheduler.nllcs()).filter(move |&l| l != own && count[l] > 0 && self.llc_socket(l) == socket);
        let far = (0..self.scheduler.nllcs()).filter(move |&l| count[l] > 0 && self.llc_socket(l) != socket);
        near.chain(far)
    }

    /// Newly idle balance: `cpu`, about to go idle at `now`, pulls one task;
    /// returns it (not queued: it runs next) and the time after the pull.
    pub(super) fn newidle_balance(&mut self, cpu: usize, now: u64) -> (Option<usize>, u64) {
        if self.scheduler.overloaded() == 0 {
            return (None, now);
        }
        let own = self.scheduler.cpu(cpu).llc() as usize;
        let mut sources: [Option<usize>; 3] = [None; 3];
        if self.scheduler.overloaded_llcs()[own] > 0 {
            sources[0] = self.scheduler.busiest(cpu, self.scheduler.llc_cpus(own));
        }
        let wide = self.scheduler.overloaded() > self.scheduler.overloaded_llcs()[own]
            && now >= self.scheduler.cpu(cpu).next_wide();
        if wide {
            // The socket's other domains, then the machine's: the busiest of each level.
            let socket = self.llc_socket(own);
            let (mut near, mut far): (Option<usize>, Option<usize>) = (None, None);
            for l in self.other_llcs(cpu, self.scheduler.overloaded_llcs()) {
                let Some(b) = self.scheduler.busiest(cpu, self.scheduler.llc_cpus(l)) else { continue };
                let slot = if self.llc_socket(l) == socket { &mut near } else { &mut far };
                if slot
                    .is_none_or(|s| (self.scheduler.load_of(b), Reverse(b)) > (self.scheduler.load_of(s), Reverse(s)))
                {
                    *slot = Some(b);
                }
            }
            (sources[1], sources[2]) = (near, far);
        }
        for src in sources.into_iter().flatten() {
            if let Some(at) = self.scheduler.task_to_move(src, now, false) {
                let tid = self.scheduler.detach(src, at, cpu);
                return (tid, now + 2 * self.m.transfer_cost(src, cpu));
            }
        }
        if wide {
            // Nothing to take past the cache domain: not looked for again for
            // a tick (the kernel's newidle cost limit, `max_newidle_lb_cost`
            // against `avg_idle`, stops such searches too).
            let at = now + self.scheduler.tun().tick;
            self.scheduler.cpu_mut(cpu).wide_next_at(at);
        }
        (None, now)
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
                if let Some(at) = self.scheduler.task_to_move(cpu, now, false) {
                    // The idle CPU takes the task from this one's queue.
                    let t = now + 2 * self.m.transfer_cost(cpu, dst);
                    if let Some(tid) = self.scheduler.detach(cpu, at, dst) {
                        self.enqueue(tid, dst, t, cpu);
                    }
                }
            }
        }
        if now >= self.scheduler.cpu(cpu).next_balance() {
            let at = now + interval * self.scheduler.tun().busy_factor;
            self.scheduler.cpu_mut(cpu).balance_next_at(at);
            let Some(src) = self.scheduler.busiest(cpu, self.scheduler.llc_cpus(own)) else { return };
            let (b, l) = (u64::from(self.scheduler.load_of(src)), u64::from(self.scheduler.load_of(cpu)));
            if 100 * b <= self.scheduler.tun().imbalance_pct * l || b < l + 2 {
                return;
            }
            let hot_ok = self.scheduler.cpu(cpu).balance_failed();
            match self.scheduler.task_to_move(src, now, hot_ok) {
                Some(at) => {
                    self.scheduler.cpu_mut(cpu).set_balance_failed(false);
                    if let Some(tid) = self.scheduler.detach(src, at, cpu) {
                        self.enqueue(tid, cpu, now, cpu);
                    }
                }
                None => self.scheduler.cpu_mut(cpu).set_balance_failed(true),
            }
        }
    }
}
