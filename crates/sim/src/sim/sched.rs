//! The scheduler: per-CPU run queues ordered by the class's key
//! ([`crate::sched`]: FIFO, CFS or EEVDF), wake-ups and where they place the
//! woken thread, wake-up and tick preemption, and the context switch: the
//! address-space switch the policy makes, or lazy mode. Balancing between
//! CPUs is `sim/balance.rs`.
//!
//! FIFO (the FreeBSD presets) is what the simulator always had: a wake-up
//! queues the thread last on its CPU (on the least-loaded CPU with
//! `migration=on`), it runs until it blocks, yields, exits or has used its
//! `slice_us`, and an idle CPU steals with `migration=on`.
//!
//! CFS and EEVDF (Linux, `kernel/sched/fair.c`):
//! - Wake-up placement (`select_task_rq_fair`, with `migration` on): unless
//!   the waker and wakee switch partners too often (`wake_wide`), the waker's
//!   CPU or the wakee's previous one by `wake_affine` (WA_IDLE: an idle waker
//!   CPU sharing cache with the previous one, a sync wake-up onto a waker
//!   running alone, an idle previous CPU (v6.x); then WA_WEIGHT, loads compared
//!   with half the domain's `imbalance_pct` as bias), then
//!   `select_idle_sibling`: the target if idle, the previous CPU if idle and
//!   sharing cache, else the first idle CPU of the target's cache domain
//!   scanning from the target (SIS_PROP/SIS_UTIL's scan limits not modelled).
//!   A thread bound to a CPU (`CloneOn`) stays there; with `migration=off`
//!   every thread wakes on its previous CPU. Pipe wake-ups are sync, as
//!   `pipe_write`'s and `pipe_read`'s `wake_up_interruptible_sync_poll`.
//! - The woken thread is placed in the queue by the class's rule and may
//!   preempt the running thread (`check_preempt_wakeup`): a reschedule, taken
//!   at the target CPU's next event (an operation is atomic), signalled by a
//!   reschedule IPI when the target is another CPU.
//! - A thread woken onto another CPU's queue costs the waker that queue's lock
//!   line (one cache-line transfer between the two CPUs); the IPI's handler
//!   (exception entry and return) is taken from the target's operation.
//! - An idle CPU woken by another is armed after the reschedule IPI's
//!   delivery, each wake-up's latency drawn from the seed around its mean
//!   ([`crate::noise`]).
//! - At the 1 ms tick of a busy CPU (on the run's tick grid, its phase drawn
//!   from the seed): the running thread's runtime is charged,
//!   the class's tick preemption is checked, and balancing runs when due.
//! - Load is a count of runnable threads (no PELT), loads compared with it.

use super::*;
use crate::sched::{cfs, eevdf, wake_wide, Queued};
use tlbkit_policy::Tick;

impl Sim {
    /// Returns the least load of any CPU and the lowest CPU with it (`None`
    /// without CPUs), from the dense [`Sim`] `loads`.
    fn least_load(&self) -> Option<(u32, usize)> {
        self.scheduler.loads.iter().enumerate().min_by_key(|&(c, &l)| (l, c)).map(|(c, &l)| (l, c))
    }

    /// Returns the CPU with the fewest threads queued or running (lowest id on ties).
    pub(super) fn least_loaded(&self) -> usize {
        let cpu = self.least_load().map_or(0, |(_, c)| c);
        debug_assert_eq!(cpu, (0..self.scheduler.sched.len()).min_by_key(|&c| (self.load(c), c)).unwrap_or(0));
        cpu
    }

    /// Returns the CPU with the fewest threads queued or running, `near` itself on
    /// ties, then the lowest id: Linux's `find_idlest_cpu` keeps a new task on the
    /// local group unless another group is idler.
    pub(super) fn least_loaded_near(&self, near: usize) -> usize {
        let cpu = match self.least_load() {
            Some((min, c)) if self.scheduler.loads.get(near) != Some(&min) => c,
            _ => near,
        };
        debug_assert_eq!(
            cpu,
            (0..self.scheduler.sched.len()).min_by_key(|&c| (self.load(c), c != near, c)).unwrap_or(near)
        );
        cpu
    }

    /// Returns the threads queued on or running on `cpu`, from its scheduler
    /// state: what the debug checks of `loads` compare it with.
    pub(super) fn load(&self, cpu: usize) -> usize {
        let load = self.scheduler.sched[cpu].runq.len() + self.scheduler.sched[cpu].cur.is_some() as usize;
        debug_assert_eq!(load, self.scheduler.loads[cpu] as usize, "CPU {cpu}'s load changed without its setter");
        load
    }

    /// Returns whether `cpu` has nothing running or queued (`available_idle_cpu`).
    #[inline]
    pub(super) fn idle(&self, cpu: usize) -> bool {
        self.scheduler.loads[cpu] == 0
    }

    /// Keeps the per-domain idle and movable counts in step after `cpu`'s load
    /// was `load` and its movable queued threads `movable`.
    #[inline]
    fn track(&mut self, cpu: usize, load: u32, movable: u32) {
        let llc = self.scheduler.sched[cpu].llc as usize;
        let (l1, m1) = (self.scheduler.loads[cpu], self.scheduler.sched[cpu].runq.movable());
        if (load == 0) != (l1 == 0) {
            if l1 == 0 {
                self.scheduler.idle_llc[llc] += 1;
            } else {
                self.scheduler.idle_llc[llc] -= 1;
            }
        }
        if (movable > 0) != (m1 > 0) {
            if m1 > 0 {
                self.scheduler.ovl_llc[llc] += 1;
                self.scheduler.ovl_total += 1;
            } else {
                self.scheduler.ovl_llc[llc] -= 1;
                self.scheduler.ovl_total -= 1;
            }
        }
    }

    /// Queues `tid` on `cpu`'s run queue: last (FIFO), or by its virtual runtime.
    pub(super) fn queue(&mut self, cpu: usize, tid: usize) {
        let (load, movable) = (self.scheduler.loads[cpu], self.scheduler.sched[cpu].runq.movable());
        let t = &self.scheduler.threads[tid];
        let e = if self.scheduler.tun.kind.is_fair() {
            t.se.queued(tid, t.pinned)
        } else {
            self.scheduler.fifo_seq += 1;
            Queued { key: self.scheduler.fifo_seq, deadline: 0, tid: tid as u32, weight: t.se.weight, pinned: t.pinned }
        };
        self.scheduler.sched[cpu].runq.insert(e);
        self.scheduler.loads[cpu] += 1;
        self.track(cpu, load, movable);
    }

    /// Takes the thread queued at `at` on `cpu`'s run queue (0: the first).
    pub(super) fn unqueue(&mut self, cpu: usize, at: usize) -> Option<usize> {
        let (load, movable) = (self.scheduler.loads[cpu], self.scheduler.sched[cpu].runq.movable());
        let tid = self.scheduler.sched[cpu].runq.remove(at).map(|e| e.tid as usize);
        self.scheduler.loads[cpu] -= tid.is_some() as u32;
        self.track(cpu, load, movable);
        tid
    }

    /// Sets the thread running on `cpu` (`None`: none).
    pub(super) fn set_cur(&mut self, cpu: usize, tid: Option<usize>) {
        let (load, movable) = (self.scheduler.loads[cpu], self.scheduler.sched[cpu].runq.movable());
        let s = &mut self.scheduler.sched[cpu];
        self.scheduler.loads[cpu] = self.scheduler.loads[cpu] + tid.is_some() as u32 - s.cur.is_some() as u32;
        s.cur = tid;
        self.track(cpu, load, movable);
    }

    /// Queues `tid`, runnable, on `cpu` at `now` (`from`: the CPU that made it
    /// runnable): wakes `cpu` if it is idle, or, for the fair classes, checks
    /// whether it preempts the thread running there.
    pub(super) fn enqueue(&mut self, tid: usize, cpu: usize, now: u64, from: usize) {
        self.scheduler.threads[tid].state = State::Runnable;
        self.scheduler.threads[tid].cpu = cpu;
        self.queue(cpu, tid);
        if self.scheduler.sched[cpu].cur.is_none() && !self.scheduler.sched[cpu].armed {
            let c = self.m.costs;
            let mut t = now.max(self.scheduler.sched[cpu].clock);
            if cpu != from {
                // Wake an idle CPU with a reschedule IPI.
                self.m.counters.ipis_sent += 1;
                let mean = c.ipi.ipi_deliver + if self.m.cross_socket(from, cpu) { c.ipi.ipi_cross_socket } else { 0 };
                t += c.ipi.ipi_send + self.m.noise.wake_delivery(mean);
            }
            self.arm(cpu, t);
        } else if self.scheduler.tun.kind.is_fair() {
            self.check_preempt(cpu, tid, now, from);
        }
    }

    /// Charges the thread running on `cpu` its runtime up to `now`
    /// (`update_curr`) and raises the queue's `min_vruntime`; returns whether an
    /// EEVDF thread reached its deadline (and got a new one).
    pub(super) fn update_curr(&mut self, cpu: usize, now: u64) -> bool {
        let Some(c) = self.scheduler.sched[cpu].cur else { return false };
        let se = &mut self.scheduler.threads[c].se;
        se.account(now);
        let expired = self.scheduler.tun.kind == SchedKind::Eevdf && eevdf::update_deadline(se, &self.scheduler.tun);
        let v = se.vruntime;
        self.scheduler.sched[cpu].runq.update_min(Some(v));
        expired
    }

    /// `check_preempt_wakeup`: whether `tid`, just queued on `cpu`, preempts the
    /// thread running there; if so, a reschedule is owed (an IPI from `from` if
    /// that is another CPU).
    fn check_preempt(&mut self, cpu: usize, tid: usize, now: u64, from: usize) {
        let Some(cur) = self.scheduler.sched[cpu].cur else { return };
        if self.scheduler.sched[cpu].need_resched {
            return;
        }
        let expired = self.update_curr(cpu, now);
        let curr = &self.scheduler.threads[cur].se;
        let preempt = match self.scheduler.tun.kind {
            SchedKind::Fifo => false,
            SchedKind::Cfs => cfs::wakeup_preempts(curr.vruntime, &self.scheduler.threads[tid].se, &self.scheduler.tun),
            SchedKind::Eevdf => expired || eevdf::wakeup_preempts(&self.scheduler.sched[cpu].runq, curr, tid),
        };
        if preempt {
            self.resched(cpu, from);
        }
    }

    /// Owes `cpu` a reschedule, sending it a reschedule IPI from `from` if that
    /// is another CPU: its handler's entry and return are taken from the
    /// operation the target runs.
    fn resched(&mut self, cpu: usize, from: usize) {
        self.scheduler.sched[cpu].need_resched = true;
        if cpu != from {
            let c = self.m.costs;
            self.m.counters.ipis_sent += 1;
            self.m.cpus[cpu].stolen += c.exception_entry + c.exception_exit;
            self.m.cpus[cpu].irq_stolen += c.exception_entry + c.exception_exit;
        }
    }

    /// Wakes `tid` from `from` at `now`, synchronously when the waker is about to
    /// sleep (`sync`, as pipe wake-ups are); returns the waker's time after it.
    pub(super) fn wake(&mut self, tid: usize, from: usize, now: u64, sync: bool) -> u64 {
        if !self.scheduler.tun.kind.is_fair() {
            let t = &self.scheduler.threads[tid];
            let cpu = if self.cfg.migration && !t.pinned { self.least_loaded() } else { t.cpu };
            self.enqueue(tid, cpu, now, from);
            return now;
        }
        let prev = self.scheduler.threads[tid].cpu;
        if let Some(w) = self.scheduler.sched[from].cur {
            let hz = self.scheduler.tun.ms * 1000;
            self.scheduler.threads[w].se.record_wakee(tid, now, hz);
        }
        let cpu = if self.cfg.migration && !self.scheduler.threads[tid].pinned {
            self.select_task_rq(tid, prev, from, sync)
        } else {
            prev
        };
        self.update_curr(cpu, now);
        self.place(tid, prev, cpu, false);
        self.enqueue(tid, cpu, now, from);
        if cpu != from {
            now + self.m.transfer_cost(from, cpu)
        } else {
            now
        }
    }

    /// Places `tid` (last on `prev`'s queue, or new with `new`) in `cpu`'s
    /// queue by the class's rule, before it is queued there.
    pub(super) fn place(&mut self, tid: usize, prev: usize, cpu: usize, new: bool) {
        let curr = self.scheduler.sched[cpu]
            .cur
            .map(|c| (self.scheduler.threads[c].se.vruntime, self.scheduler.threads[c].se.weight));
        let rq = &self.scheduler.sched[cpu].runq;
        let se = &mut self.scheduler.threads[tid].se;
        match self.scheduler.tun.kind {
            SchedKind::Fifo => {}
            SchedKind::Cfs if new => {
                se.vruntime = 0;
                cfs::place_new(rq, se, &self.scheduler.tun, curr.map_or(0, |(_, w)| w));
            }
            SchedKind::Cfs => {
                if prev != cpu {
                    // Relative to the old queue's floor, then to the new one's.
                    let from_min = self.scheduler.sched[prev].runq.min_vruntime;
                    se.vruntime = se.vruntime.wrapping_sub(from_min).wrapping_add(rq.min_vruntime);
                }
                cfs::place_wakeup(rq, se, &self.scheduler.tun);
            }
            SchedKind::Eevdf => {
                if new {
                    se.vlag = 0;
                }
                eevdf::place(rq, curr, se, &self.scheduler.tun, new);
            }
        }
    }

    /// Places the new thread `tid` on `cpu` (from `from`) and queues it there
    /// (`wake_up_new_task`).
    pub(super) fn enqueue_new(&mut self, tid: usize, cpu: usize, now: u64, from: usize) {
        if self.scheduler.tun.kind.is_fair() {
            self.update_curr(cpu, now);
            self.place(tid, cpu, cpu, true);
        }
        self.enqueue(tid, cpu, now, from);
    }

    /// `select_task_rq_fair` for a wake-up of `tid`, last on `prev`, by the
    /// thread running on `this`.
    pub(super) fn select_task_rq(&mut self, tid: usize, prev: usize, this: usize, sync: bool) -> usize {
        let llc = &self.scheduler.llcs[self.scheduler.sched[this].llc as usize];
        let llc_size = (llc.1 - llc.0) as usize;
        let wide = self.scheduler.sched[this].cur.is_some_and(|w| {
            wake_wide(self.scheduler.threads[w].se.wakee_flips, self.scheduler.threads[tid].se.wakee_flips, llc_size)
        });
        let target = if !wide && this != prev { self.wake_affine(this, prev, sync) } else { prev };
        self.select_idle_sibling(prev, target)
    }

    /// Returns whether CPUs `a` and `b` share a cache (LLC) domain.
    #[inline]
    pub(super) fn share_cache(&self, a: usize, b: usize) -> bool {
        self.scheduler.sched[a].llc == self.scheduler.sched[b].llc
    }

    /// `wake_affine`: the waker's CPU `this` or the wakee's previous one.
    fn wake_affine(&self, this: usize, prev: usize, sync: bool) -> usize {
        // WA_IDLE (`wake_affine_idle`).
        if self.idle(this) && self.share_cache(this, prev) {
            return if self.idle(prev) { prev } else { this };
        }
        if sync && self.scheduler.loads[this] == 1 {
            return this;
        }
        if self.scheduler.tun.affine_prev_idle && self.idle(prev) {
            return prev;
        }
        // WA_WEIGHT (`wake_affine_weight`), loads in tasks: the waker leaves
        // `this` when sync, the wakee joins it; the sleeping wakee is not
        // counted on `prev`.
        let mut this_load = i64::from(self.scheduler.loads[this]);
        if sync {
            if this_load < 1 {
                return this;
            }
            this_load -= 1;
        }
        let this_eff = (this_load + 1) * 100;
        let prev_eff =
            i64::from(self.scheduler.loads[prev]) * (100 + (self.scheduler.tun.imbalance_pct as i64 - 100) / 2);
        if this_eff < prev_eff {
            this
        } else {
            prev
        }
    }

    /// `select_idle_sibling`: an idle CPU sharing cache with `target`, or `target`.
    fn select_idle_sibling(&self, prev: usize, target: usize) -> usize {
        if self.idle(target) {
            return target;
        }
        if prev != target && self.share_cache(prev, target) && self.idle(prev) {
            return prev;
        }
        let llc = self.scheduler.sched[target].llc as usize;
        if self.scheduler.idle_llc[llc] == 0 {
            return target;
        }
        // `select_idle_cpu`: the first idle CPU after the target, wrapping.
        let (lo, hi) = (self.scheduler.llcs[llc].0 as usize, self.scheduler.llcs[llc].1 as usize);
        (target + 1..hi).chain(lo..target).find(|&c| self.idle(c)).unwrap_or(target)
    }

    /// Puts the running thread `tid` of `cpu` back on its queue at `now`,
    /// runnable: preempted, its slice used, or yielding (`yielded`).
    pub(super) fn requeue(&mut self, cpu: usize, tid: usize, now: u64, yielded: bool) {
        self.scheduler.threads[tid].state = State::Runnable;
        if self.scheduler.tun.kind.is_fair() {
            let t = self.scheduler.tun;
            let se = &mut self.scheduler.threads[tid].se;
            se.account(now);
            if t.kind == SchedKind::Eevdf {
                eevdf::update_deadline(se, &t);
                if yielded {
                    // `yield_task_fair`: the deadline moves a slice on.
                    se.deadline += crate::sched::calc_delta_fair(t.base_slice, se.weight);
                    se.protect = false;
                }
            } else if yielded {
                self.scheduler.sched[cpu].skip = Some(tid as u32);
            }
        }
        self.queue(cpu, tid);
    }

    /// The fair classes' tick on busy `cpu` running `tid` at `now`: charges its
    /// runtime, checks tick preemption, and balances when due.
    pub(super) fn sched_tick(&mut self, cpu: usize, tid: usize, now: u64) {
        self.scheduler.sched[cpu].sched_tick = self.tick_after(now, self.scheduler.tun.tick);
        let expired = self.update_curr(cpu, now);
        let rq = &self.scheduler.sched[cpu].runq;
        if !rq.is_empty() {
            let preempt = match self.scheduler.tun.kind {
                SchedKind::Cfs => cfs::tick_preempts(
                    rq,
                    &self.scheduler.threads[tid].se,
                    now - self.scheduler.sched[cpu].slice_start,
                    &self.scheduler.tun,
                ),
                _ => expired,
            };
            if preempt {
                self.scheduler.sched[cpu].need_resched = true;
            }
        }
        if self.cfg.migration {
            self.tick_balance(cpu, now);
        }
    }

    /// The thread the fair class picks to run next on `cpu`, taken off the queue.
    fn pick_next(&mut self, cpu: usize) -> Option<usize> {
        let skip = self.scheduler.sched[cpu].skip.take();
        let rq = &self.scheduler.sched[cpu].runq;
        let at = match self.scheduler.tun.kind {
            SchedKind::Fifo => 0,
            SchedKind::Cfs => usize::from(rq.len() > 1 && rq.get(0).map(|e| e.tid) == skip),
            SchedKind::Eevdf => match eevdf::pick(rq, None) {
                eevdf::Pick::Queued(i) => i,
                _ => return None,
            },
        };
        self.unqueue(cpu, at)
    }

    /// Switches `cpu` (whose previous thread was `prev`) to its next runnable
    /// thread, or to idle.
    pub(super) fn schedule(&mut self, cpu: usize, prev: Option<usize>, mut now: u64) -> u64 {
        let fair = self.scheduler.tun.kind.is_fair();
        if let (true, Some(p)) = (fair, prev) {
            self.put_prev(cpu, p, now);
        }
        let mut next = self.pick_next(cpu);
        if next.is_none() && self.cfg.migration {
            next = if fair {
                let (pulled, t) = self.newidle_balance(cpu, now);
                now = t;
                pulled
            } else {
                self.steal(cpu)
            };
        }
        let c = self.m.costs;
        now += c.kernel.switch_path;
        self.stats.context_switches += 1;
        // The scheduler's code and the low-level switch code sit in their own
        // 2 MB blocks of kernel text.
        now = self.kaccess(cpu, self.kern.ktext + KTEXT_SCHED, now);
        now = self.kaccess(cpu, self.kern.ktext + KTEXT_SWITCH, now);
        let rq = self.scheduler.sched[cpu].runq_page;
        now = self.kaccess(cpu, rq, now);
        if let Some(p) = prev {
            now = self.kaccess(cpu, self.scheduler.threads[p].tstruct, now);
        }
        // After `pick_next_task`, before the switch (LATR's sweep).
        now = self.tick(cpu, Tick::Schedule, now);
        self.scheduler.sched[cpu].need_resched = false;
        let Some(next) = next else {
            // Idle: the idle thread runs on the kernel's address space.
            self.set_cur(cpu, None);
            return self.enter_lazy(cpu, Lazy::Idle, now);
        };
        now = self.kaccess(cpu, self.scheduler.threads[next].tstruct, now);
        now = self.kaccess(cpu, self.scheduler.threads[next].kstack, now);
        let mm = self.scheduler.threads[next].mm;
        now = if mm.is_kernel() { self.enter_lazy(cpu, Lazy::KernelThread, now) } else { self.switch_mm(cpu, mm, now) };
        self.set_cur(cpu, Some(next));
        self.scheduler.sched[cpu].slice_start = now;
        let t = &mut self.scheduler.threads[next];
        t.state = State::Running;
        t.cpu = cpu;
        // `set_next_entity`: runtime counts from here; RUN_TO_PARITY's mark.
        t.se.exec_start = now;
        t.se.protect = true;
        if fair && self.scheduler.sched[cpu].sched_tick <= now {
            self.scheduler.sched[cpu].sched_tick = self.tick_after(now, self.scheduler.tun.tick);
        }
        self.arm(cpu, now);
        now
    }

    /// The fair classes' `put_prev_task` for `prev`, which left `cpu` blocked
    /// or dead (a runnable one was queued again by [`Sim::requeue`]): its
    /// runtime up to `now`, EEVDF's lag, the queue's floor.
    fn put_prev(&mut self, cpu: usize, prev: usize, now: u64) {
        let t = self.scheduler.tun;
        let rq = &mut self.scheduler.sched[cpu].runq;
        let th = &mut self.scheduler.threads[prev];
        if th.state == State::Runnable {
            return;
        }
        th.se.account(now);
        if t.kind == SchedKind::Eevdf && th.state == State::Blocked {
            eevdf::save_lag(rq, &mut th.se, &t);
        }
        rq.update_min(None);
    }

    /// Takes the last queued thread that is not pinned from the busiest other CPU.
    pub(super) fn steal(&mut self, cpu: usize) -> Option<usize> {
        let movable = |c: usize| self.scheduler.sched[c].runq.iter().rposition(|e| !e.pinned);
        let victim = (0..self.scheduler.sched.len())
            .filter(|&c| c != cpu && movable(c).is_some())
            .max_by_key(|&c| (self.scheduler.sched[c].runq.len(), Reverse(c)))?;
        let at = movable(victim)?;
        self.unqueue(victim, at)
    }

    pub(super) fn switch_mm(&mut self, cpu: usize, mm: MmId, now: u64) -> u64 {
        let hw = CpuHw::new(&mut self.m, cpu, now);
        self.policy.switch_mm(&hw, mm);
        let now = hw.now();
        self.switched(cpu, mm, now)
    }

    /// Leaves `cpu` running the kernel with no address space of its own, `who`
    /// being the idle task or a kernel thread (`enter_lazy_tlb`).
    pub(super) fn enter_lazy(&mut self, cpu: usize, who: Lazy, now: u64) -> u64 {
        let hw = CpuHw::new(&mut self.m, cpu, now);
        self.policy.enter_lazy(&hw, who);
        let now = hw.now();
        self.switched(cpu, MmId::KERNEL, now)
    }

    /// After the policy switched `cpu` to `mm`: the oracle's scan and the release
    /// of address spaces no root points at any more.
    pub(super) fn switched(&mut self, cpu: usize, mm: MmId, now: u64) -> u64 {
        self.scheduler.sched[cpu].loaded = mm;
        self.complete_lazy(now);
        if self.oracle.strict {
            self.strict_scan(cpu, now);
        }
        self.reap(cpu, now)
    }
}
