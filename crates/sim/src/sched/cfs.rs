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
//! - Buddies ([`Buddies`], `cfs_rq->next`, `->last`, `->skip`; features
//!   LAST_BUDDY on, NEXT_BUDDY off, CACHE_HOT_BUDDY on, as v4.10 to v6.5
//!   ship them; `--set last_buddy=off` is NO_LAST_BUDDY): a woken task that preempts becomes the
//!   *next* buddy, and the task it preempted, while the queue holds at least
//!   `sched_nr_latency` (8) tasks counting both, the *last* one
//!   (`check_preempt_wakeup`); a yielding task is the *skip* buddy
//!   (`yield_task_fair`). The pick (`pick_next_entity`, [`pick`]) starts from
//!   the leftmost task, takes the one after it instead when the leftmost is
//!   the skip buddy, then the last buddy and, over it, the next buddy, each
//!   only while it is not unfair: its virtual runtime leads the leftmost's by
//!   at most `wakeup_granularity` in the leftmost's virtual time
//!   (`wakeup_preempt_entity(buddy, left) < 1`). A task leaves every buddy
//!   role when it is picked or dequeued (`clear_buddies`), and the running
//!   one when a tick finds it ran its slice. Balancing counts a buddy as
//!   cache-hot when the pulling CPU runs something (`task_hot`).
//!
//! Not modelled: task groups (a buddy is set at every level of the group
//! hierarchy in the kernel; the model has one level).

use super::{calc_delta_fair, Entity, Queued, RunQueue, Tunables, SCHED_NR_LATENCY};

/// A run queue's buddies: tasks the pick prefers (`next`, `last`) or passes
/// over (`skip`) while that is not unfair to the leftmost task.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Buddies {
    /// The woken task that preempted the running one (`cfs_rq->next`).
    pub next: Option<u32>,
    /// The task it preempted (`cfs_rq->last`), with at least
    /// `sched_nr_latency` tasks on the queue.
    pub last: Option<u32>,
    /// The task that yielded (`cfs_rq->skip`).
    pub skip: Option<u32>,
}

impl Buddies {
    /// `clear_buddies`: `tid` leaves every role it has.
    pub fn clear(&mut self, tid: u32) {
        for b in [&mut self.next, &mut self.last, &mut self.skip] {
            if *b == Some(tid) {
                *b = None;
            }
        }
    }

    /// Whether `tid` is the next or the last buddy (`task_hot`'s CACHE_HOT_BUDDY).
    pub fn favours(&self, tid: u32) -> bool {
        self.next == Some(tid) || self.last == Some(tid)
    }

    /// `check_preempt_wakeup` after `woken` preempted `curr` on a queue of
    /// `nr` tasks (both counted): `woken` is the next buddy, and `curr` the
    /// last one from `sched_nr_latency` tasks, with LAST_BUDDY (`last`).
    pub fn preempted(&mut self, woken: u32, curr: u32, nr: u64, last: bool) {
        self.next = Some(woken);
        if last && nr >= SCHED_NR_LATENCY {
            self.last = Some(curr);
        }
    }
}

/// `wakeup_preempt_entity(se, left) < 1`: running `se` rather than the
/// leftmost task `left` is not unfair.
fn not_unfair(se: &Queued, left: &Queued, t: &Tunables) -> bool {
    let vdiff = se.key.wrapping_sub(left.key) as i64;
    vdiff <= calc_delta_fair(t.wakeup_gran, left.weight) as i64
}

/// `pick_next_entity`: the position in `rq` (not empty) of the task to run,
/// the preempted running task queued in it already.
pub fn pick(rq: &RunQueue, b: &Buddies, t: &Tunables) -> usize {
    let Some(left) = rq.get(0) else { return 0 };
    let buddy = |tid: Option<u32>| {
        let at = rq.position(tid? as usize)?;
        not_unfair(rq.get(at)?, left, t).then_some(at)
    };
    if let Some(at) = buddy(b.next).or_else(|| buddy(b.last)) {
        return at;
    }
    if b.skip == Some(left.tid) {
        if let Some(second) = rq.get(1) {
            if not_unfair(second, left, t) {
                return 1;
            }
        }
    }
    0
}

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
/// tasks; the caller checks only when it holds one), and whether because it
/// ran its slice (then it leaves its buddy roles).
pub fn tick_preempts(rq: &RunQueue, curr: &Entity, ran: u64, t: &Tunables) -> (bool, bool) {
    let nr = rq.len() as u64 + 1;
    let ideal = slice(t, nr, rq.sums().1 as u64 + u64::from(curr.weight), curr.weight);
    if ran > ideal {
        return (true, true);
    }
    if ran < t.min_gran {
        return (false, false);
    }
    let Some(first) = rq.get(0) else { return (false, false) };
    let delta = curr.vruntime.wrapping_sub(first.key) as i64;
    (delta > ideal as i64, false)
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

    /// A queue of tasks 1, 2, 3 at the virtual runtimes given.
    fn queue(v: [u64; 3]) -> RunQueue {
        let mut rq = RunQueue::with_floor(0);
        for (i, v) in v.into_iter().enumerate() {
            rq.insert(se(v).queued(i + 1, false));
        }
        rq
    }

    #[test]
    fn the_pick_prefers_the_next_buddy_then_the_last_while_not_unfair() {
        let t = tun();
        // Leftmost 1 at 10 ms; 2 leads it by 2 ms, 3 by 4 ms (past the 3 ms granularity).
        let rq = queue([10_000_000, 12_000_000, 14_000_000]);
        let tid = |at: usize| rq.get(at).unwrap().tid;
        assert_eq!(tid(pick(&rq, &Buddies::default(), &t)), 1, "no buddy: the leftmost");
        let b = Buddies { next: Some(2), last: Some(3), skip: None };
        assert_eq!(tid(pick(&rq, &b, &t)), 2, "the next buddy within the granularity");
        let b = Buddies { next: Some(3), last: Some(2), skip: None };
        assert_eq!(tid(pick(&rq, &b, &t)), 2, "the next buddy is unfair: the last one");
        let b = Buddies { next: None, last: Some(3), skip: None };
        assert_eq!(tid(pick(&rq, &b, &t)), 1, "the last buddy is unfair too: the leftmost");
        let b = Buddies { next: Some(9), last: None, skip: None };
        assert_eq!(tid(pick(&rq, &b, &t)), 1, "a buddy not queued here is none");
    }

    #[test]
    fn a_yielding_leftmost_task_runs_after_the_second_only_while_that_is_fair() {
        let t = tun();
        let skip = Buddies { skip: Some(1), ..Buddies::default() };
        let near = queue([10_000_000, 12_000_000, 14_000_000]);
        assert_eq!(near.get(pick(&near, &skip, &t)).unwrap().tid, 2);
        let far = queue([10_000_000, 14_000_000, 15_000_000]);
        assert_eq!(far.get(pick(&far, &skip, &t)).unwrap().tid, 1, "the second leads by 4 ms");
    }

    #[test]
    fn a_preemption_sets_the_last_buddy_only_from_eight_tasks_and_a_pick_clears_roles() {
        let mut b = Buddies::default();
        b.preempted(5, 6, 7, true);
        assert_eq!((b.next, b.last), (Some(5), None));
        b.preempted(5, 6, 8, false);
        assert_eq!((b.next, b.last), (Some(5), None), "NO_LAST_BUDDY");
        b.preempted(5, 6, 8, true);
        assert_eq!((b.next, b.last), (Some(5), Some(6)));
        assert!(b.favours(5) && b.favours(6) && !b.favours(7));
        b.clear(5);
        assert_eq!((b.next, b.last), (None, Some(6)));
        b.clear(6);
        assert_eq!(b, Buddies::default());
    }
}
