//! EEVDF's delayed dequeue (Linux v6.12: 152e11f6df29 "sched/fair: Implement
//! delayed dequeue", with "sched/fair: Implement ENQUEUE_DELAYED" and
//! "sched/fair: Implement DELAY_ZERO" of the same series; `kernel/sched/fair.c`):
//! the scheduler's side of [`crate::sched::eevdf`]'s DELAY_DEQUEUE.
//!
//! - **Sleep** (`dequeue_entity` with `DEQUEUE_SLEEP`): a task that goes to
//!   sleep while not eligible (its virtual runtime past the queue's average,
//!   the running task counted) is not dequeued: it stays in its CPU's queue,
//!   asleep (`sched_delayed`), and keeps competing for its negative lag.
//!   It is counted in the CPU's load, as `nr_running` counts it.
//! - **Pick** (`pick_next_entity`): a pick that finds a delayed task completes
//!   its dequeue (`dequeue_entities` with `DEQUEUE_DELAYED`) and picks again:
//!   it leaves the queue with its lag, a positive one cut to zero (DELAY_ZERO,
//!   `finish_delayed_dequeue_entity`).
//! - **Wake-up** (`ttwu_runnable`, `enqueue_task_fair` with `ENQUEUE_DELAYED`,
//!   `requeue_delayed_entity`): a delayed task is still queued, so its
//!   wake-up neither chooses a CPU nor queues it anew: it runs where it is,
//!   keeping its place, unless it became eligible meanwhile, when it is
//!   placed again with no lag (DELAY_ZERO). The waker pays the remote queue's
//!   lock and the preemption check, no wake list (`TTWU_QUEUE` comes later in
//!   `try_to_wake_up`).
//! - **Balancing** (`can_migrate_task`): a delayed task is moved only by a
//!   balance that migrates load (`migrate_load`: the busy CPUs' balances here),
//!   never by an idle CPU's pull (`migrate_task`, `migrate_util`), and stays
//!   delayed on its new CPU.
//!
//! - **A sync wake-up** (`wake_affine_idle`): from v6.15 (aa3ee4f0b754
//!   "sched/fair: Fixup wake_up_sync() vs DELAYED_DEQUEUE", `--set
//!   sync_skip_delayed`) its "the waker runs alone" test counts the waker's
//!   CPU's tasks without the delayed ones (`nr_running - cfs_h_nr_delayed`);
//!   v6.12 to v6.14 count them, so a waker with a delayed task behind it
//!   does not take the wakee.
//!
//! Load tracking (`scheduler/pelt.rs`): a delayed task stays queued, so its
//! weight stays in its CPU's queue and its load accrues, as the kernel's
//! does; it is not runnable (v6.13's `h_nr_delayed`, 76f2f783294d, taken
//! for every kernel: the runnable average is read by nothing modelled).
//!
//! Not modelled: v6.13's PLACE_REL_DEADLINE, which
//! keeps a moved task's deadline relative to its virtual runtime.

use super::{Scheduler, State};
use crate::sched::{eevdf, SchedKind};
use crate::toggle::DELAY_DEQUEUE;

impl Scheduler {
    /// Returns whether thread `tid` is asleep on a queue, its dequeue delayed.
    #[inline]
    pub(in crate::sim) fn is_delayed(&self, tid: usize) -> bool {
        self.threads[tid].se.delayed
    }

    /// `dequeue_entity` for `tid`, which went to sleep running on `cpu` and
    /// whose runtime is charged: under DELAY_DEQUEUE one that is not eligible
    /// stays queued there, asleep. Returns whether it did.
    pub(super) fn delay_dequeue(&mut self, cpu: usize, tid: usize, now: u64) -> bool {
        if !self.features.on(DELAY_DEQUEUE) || self.tun.kind != SchedKind::Eevdf {
            return false;
        }
        let se = &self.threads[tid].se;
        if eevdf::eligible(&self.sched[cpu].runq, Some((se.vruntime, se.weight)), se.vruntime) {
            return false;
        }
        self.threads[tid].se.delayed = true;
        self.queue(cpu, tid, now);
        true
    }

    /// `pick_eevdf` on `cpu`'s queue, as `pick_next_entity` makes it: a
    /// delayed task picked has its dequeue completed ([`Scheduler::finish_delayed`])
    /// and the pick is made again. Returns the position of the task to run,
    /// `None` when the queue holds none.
    pub(super) fn pick_eevdf(&mut self, cpu: usize, now: u64) -> Option<usize> {
        loop {
            let rq = &self.sched[cpu].runq;
            match eevdf::pick(rq, None) {
                eevdf::Pick::Queued(i) if rq.get(i).is_some_and(|e| e.delayed) => self.finish_delayed(cpu, i, now),
                eevdf::Pick::Queued(i) => return Some(i),
                _ => return None,
            }
        }
    }

    /// A pick on `cpu` found the delayed task at `at` of its queue: its
    /// dequeue completes, with its lag (DELAY_ZERO: none above zero).
    fn finish_delayed(&mut self, cpu: usize, at: usize, now: u64) {
        let Some(tid) = self.unqueue(cpu, at, now) else { return };
        let t = self.tun;
        let th = &mut self.threads[tid];
        debug_assert!(th.se.delayed && th.state == State::Blocked, "{tid} was not asleep on CPU {cpu}");
        let se = &mut th.se;
        se.delayed = false;
        eevdf::save_lag_queued(&self.sched[cpu].runq, None, se, &t);
        se.vlag = se.vlag.min(0);
        self.sched[cpu].runq.update_min(None);
        // Off the queue now: its load tracking stops counting it queued.
        self.pelt_task(tid, now);
    }

    /// Wakes the delayed `tid` where it is queued (`requeue_delayed_entity`):
    /// runnable in its place, or, if its lag turned positive, placed again at
    /// the average with no lag. Returns its CPU.
    pub(in crate::sim) fn requeue_delayed(&mut self, tid: usize, now: u64) -> usize {
        let cpu = self.threads[tid].cpu;
        let at = self.sched[cpu].runq.position(tid);
        debug_assert!(at.is_some() && self.threads[tid].se.delayed, "{tid} is not delayed on CPU {cpu}");
        if let Some(at) = at {
            self.unqueue(cpu, at, now);
        }
        let t = self.tun;
        let curr = self.sched[cpu].cur.map(|c| (self.threads[c].se.vruntime, self.threads[c].se.weight));
        let rq = &self.sched[cpu].runq;
        let se = &mut self.threads[tid].se;
        se.delayed = false;
        eevdf::save_lag_queued(rq, curr, se, &t);
        if se.vlag > 0 {
            se.vlag = 0;
            eevdf::place(rq, curr, se, &t, false);
        }
        self.queue_runnable(cpu, tid, now);
        cpu
    }

    /// Queues `tid`, delayed and detached for `cpu` by a balance
    /// ([`Scheduler::detach`], which set its CPU), there: still asleep.
    pub(in crate::sim) fn attach_delayed(&mut self, cpu: usize, tid: usize, now: u64) {
        debug_assert!(self.threads[tid].se.delayed && self.threads[tid].cpu == cpu, "{tid} is not delayed for {cpu}");
        self.queue(cpu, tid, now);
    }
}
