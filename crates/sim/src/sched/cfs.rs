//! CFS, Linux's Completely Fair Scheduler as of v4.14 (`kernel/sched/fair.c`;
//! the rules below are unchanged from v4.10, the oldest kernel a preset
//! assumes, through v6.5): the run queue is ordered by virtual runtime and the
//! leftmost task runs.
//!
//! - Period (`__sched_period`): `sched_latency`, or `nr_running *
//!   min_granularity` past `sched_nr_latency` (8) tasks; a task's slice
//!   (`sched_slice`) is its weight's share of the period.
//! - Tick (`check_preempt_tick`, only with more than one task): resched once
//!   the task ran its slice since it was picked, or, past `min_granularity`,
//!   once its virtual runtime leads the leftmost queued task's by more than
//!   that slice.
//! - Wake-up (`check_preempt_wakeup` / `wakeup_preempt_entity`): the woken
//!   task preempts when the running one's virtual runtime leads its own by
//!   more than `wakeup_granularity` (in the woken task's virtual time).
//! - Placement (`place_entity`): a waking task gets at least `min_vruntime -
//!   sched_latency / 2` (GENTLE_FAIR_SLEEPERS halves the sleeper credit); a
//!   new one at least `min_vruntime` plus its virtual slice (START_DEBIT). The
//!   kernel starts a forked child from its parent's virtual runtime; the model
//!   places it from the target queue alone (one rule for `spawn`, `fork` and
//!   `clone`).
//! - A task moving between queues keeps its virtual runtime relative to
//!   `min_vruntime` (`migrate_task_rq_fair`, `enqueue_entity`).
//!
//! Not modelled: the buddies (LAST_BUDDY, NEXT_BUDDY, and `yield`'s skip
//! buddy beyond "another queued task runs first"), task groups.

use super::{calc_delta_fair, Entity, RunQueue, Tunables, SCHED_NR_LATENCY};

/// `__sched_period`: the period over which `nr` runnable tasks each run once.
pub fn period(t: &Tunables, nr: u64) -> u64 {
    if nr > SCHED_NR_LATENCY {
        nr * t.min_gran
    } else {
        t.latency
    }
}

/// `sched_slice`: the real time a task of `weight` gets of the period when the
/// queue (the task included) holds `nr` tasks of `total_weight`.
pub fn slice(t: &Tunables, nr: u64, total_weight: u64, weight: u32) -> u64 {
    let p = period(t, nr);
    ((u128::from(p) * u128::from(weight)) / u128::from(total_weight.max(1))) as u64
}

/// `place_entity` for a wake-up on `rq`: the sleeper credit.
pub fn place_wakeup(rq: &RunQueue, se: &mut Entity, t: &Tunables) {
    let floor = rq.min_vruntime.saturating_sub(t.latency / 2);
    se.vruntime = se.vruntime.max(floor);
}

/// `place_entity` for a new task joining `rq`, whose running task (if any)
/// has weight `curr_weight` (0: none): START_DEBIT, one virtual slice past
/// `min_vruntime`.
pub fn place_new(rq: &RunQueue, se: &mut Entity, t: &Tunables, curr_weight: u32) {
    let nr = rq.len() as u64 + u64::from(curr_weight > 0) + 1;
    let total = rq.sums().1 as u64 + u64::from(curr_weight) + u64::from(se.weight);
    let vslice = calc_delta_fair(slice(t, nr, total, se.weight), se.weight);
    se.vruntime = se.vruntime.max(rq.min_vruntime + vslice);
}

/// `wakeup_preempt_entity(curr, woken) == 1`: whether the woken task
/// preempts the running one, whose virtual runtime is `curr_vruntime`.
pub fn wakeup_preempts(curr_vruntime: u64, woken: &Entity, t: &Tunables) -> bool {
    let vdiff = curr_vruntime.wrapping_sub(woken.vruntime) as i64;
    vdiff > calc_delta_fair(t.wakeup_gran, woken.weight) as i64
}

/// `check_preempt_tick`: whether the running task `curr`, which has run for
/// `ran` since it was picked, is rescheduled at a tick (`rq` holds the other
/// tasks; the caller checks only when it holds one).
pub fn tick_preempts(rq: &RunQueue, curr: &Entity, ran: u64, t: &Tunables) -> bool {
    let nr = rq.len() as u64 + 1;
    let ideal = slice(t, nr, rq.sums().1 as u64 + u64::from(curr.weight), curr.weight);
    if ran > ideal {
        return true;
    }
    if ran < t.min_gran {
        return false;
    }
    let Some(first) = rq.get(0) else { return false };
    let delta = curr.vruntime.wrapping_sub(first.key) as i64;
    delta > ideal as i64
}

#[cfg(test)]
mod tests {
    use super::super::{SchedKind, NICE_0_WEIGHT};
    use super::*;

    fn tun() -> Tunables {
        // 4 CPUs: factor 3, latency 18 ms, min_gran 2.25 ms, wakeup_gran 3 ms (1 GHz: ns = cycles).
        Tunables::new(SchedKind::Cfs, 4, 1.0, 4000.0, None)
    }

    fn se(v: u64) -> Entity {
        Entity { vruntime: v, ..Entity::default() }
    }

    #[test]
    fn the_period_stretches_past_eight_tasks() {
        let t = tun();
        assert_eq!(period(&t, 8), 18_000_000);
        assert_eq!(period(&t, 10), 22_500_000);
        assert_eq!(slice(&t, 3, 3 * 1024, NICE_0_WEIGHT), 6_000_000);
    }

    #[test]
    fn a_wakeup_preempts_only_past_the_wakeup_granularity() {
        let t = tun();
        assert!(!wakeup_preempts(10_000_000, &se(7_000_000), &t), "3 ms ahead is not past 3 ms");
        assert!(wakeup_preempts(10_000_001, &se(7_000_000), &t));
    }

    #[test]
    fn a_sleeper_is_credited_half_the_latency_and_no_more() {
        let t = tun();
        let mut rq = RunQueue::with_floor(0);
        rq.insert(se(100_000_000).queued(1, false));
        rq.update_min(None);
        let mut long_sleeper = se(1_000);
        place_wakeup(&rq, &mut long_sleeper, &t);
        assert_eq!(long_sleeper.vruntime, 100_000_000 - 9_000_000);
        let mut short_sleeper = se(99_000_000);
        place_wakeup(&rq, &mut short_sleeper, &t);
        assert_eq!(short_sleeper.vruntime, 99_000_000, "its own is above the floor");
    }
}
