//! EEVDF, Linux's Earliest Eligible Virtual Deadline First scheduler as of
//! v6.6 (`kernel/sched/fair.c`; commit 147f3efaa241 "sched/fair: Implement an
//! EEVDF-like scheduling policy" and its follow-ups in v6.6), with
//! RUN_TO_PARITY (63304558ba5d "sched/eevdf: Curb wakeup-preemption").
//!
//! - The average virtual runtime `V` (`avg_vruntime`) is the weighted mean
//!   over the queued tasks and the running one; a task is eligible when its
//!   virtual runtime is not past it (`entity_eligible`, lag >= 0).
//! - Pick (`pick_eevdf`): the eligible task with the earliest virtual
//!   deadline; the running task is a candidate while eligible, and under
//!   RUN_TO_PARITY it is kept, without looking further, until its deadline
//!   moves (the kernel marks it by `vlag == deadline` at `set_next_entity`).
//! - Deadline (`update_deadline`): once a running task's virtual runtime
//!   reaches its deadline it gets a new one, `vruntime + base_slice / weight`,
//!   and is rescheduled if another task is queued.
//! - Wake-up (`check_preempt_wakeup`): the woken task preempts when the pick,
//!   with the running task as a candidate, would be the woken task.
//! - Lag (`update_entity_lag`): at dequeue a task keeps `V - vruntime`,
//!   clamped to one `max(2 * slice, tick)` either way; placement
//!   (`place_entity`, PLACE_LAG) puts it back at `V - lag`, the lag scaled by
//!   `(load + w) / load` so that adding it leaves `V` where it was, with a
//!   deadline one slice on (half a slice for a new task, PLACE_DEADLINE_INITIAL).
//!
//! - Delayed dequeue (DELAY_DEQUEUE with DELAY_ZERO, v6.12, where
//!   the `delay_dequeue` toggle says, [`crate::toggle::DELAY_DEQUEUE`]): a task that goes to sleep while not
//!   eligible stays queued, asleep, until a pick takes it off (with its lag, a
//!   positive one cut to zero) or its wake-up finds it there
//!   (`sim/scheduler/delayed.rs`).
//!
//! Not modelled: PREEMPT_SHORT (v6.12; nothing to do while every task has the
//! base slice), custom slices (`sched_attr`).

use super::{calc_delta_fair, Entity, RunQueue, Tunables};

/// The running task's part in the average: its virtual runtime and weight.
type Curr = Option<(u64, u32)>;

/// Returns `avg_vruntime`'s sum and load over `rq` and the running task.
#[inline]
fn sums(rq: &RunQueue, curr: Curr) -> (i64, i64) {
    let (mut avg, mut load) = rq.sums();
    if let Some((v, w)) = curr {
        avg = avg.wrapping_add(rq.rel(v).wrapping_mul(i64::from(w)));
        load += i64::from(w);
    }
    (avg, load)
}

/// `avg_vruntime`: the weighted mean virtual runtime of `rq` and its running task.
pub fn avg_vruntime(rq: &RunQueue, curr: Curr) -> u64 {
    let (avg, load) = sums(rq, curr);
    if load == 0 {
        return rq.min_vruntime;
    }
    // Floor division, as the kernel's (`avg -= load - 1` when negative).
    rq.min_vruntime.wrapping_add(avg.div_euclid(load) as u64)
}

/// `entity_eligible`: whether virtual runtime `v` is not past the average.
#[inline]
pub fn eligible(rq: &RunQueue, curr: Curr, v: u64) -> bool {
    let (avg, load) = sums(rq, curr);
    avg >= rq.rel(v).wrapping_mul(load)
}

/// The virtual length of a task's slice.
#[inline]
fn vslice(se: &Entity, t: &Tunables) -> u64 {
    calc_delta_fair(t.base_slice, se.weight)
}

/// `update_deadline`: gives the running task `se` a new deadline once it
/// reached its own; returns whether it did (the caller reschedules when
/// another task is queued).
pub fn update_deadline(se: &mut Entity, t: &Tunables) -> bool {
    if (se.vruntime.wrapping_sub(se.deadline) as i64) < 0 {
        return false;
    }
    se.deadline = se.vruntime + vslice(se, t);
    se.protect = false;
    true
}

/// `update_entity_lag` for `se`, the running task of `rq`, as it leaves the
/// queue (to sleep, or to move to another CPU).
pub fn save_lag(rq: &RunQueue, se: &mut Entity, t: &Tunables) {
    let v = avg_vruntime(rq, Some((se.vruntime, se.weight)));
    let lag = v.wrapping_sub(se.vruntime) as i64;
    let limit = calc_delta_fair((2 * t.base_slice).max(t.tick), se.weight) as i64;
    se.vlag = lag.clamp(-limit, limit);
}

/// `update_entity_lag` for `se`, queued on `rq` (it left the queue already),
/// whose running task is `curr`: what a task moved by the balancer keeps.
pub fn save_lag_queued(rq: &RunQueue, curr: Curr, se: &mut Entity, t: &Tunables) {
    // The average the kernel takes still counts the task being dequeued.
    let (avg, load) = sums(rq, curr);
    let w = i64::from(se.weight);
    let (avg, load) = (avg.wrapping_add(rq.rel(se.vruntime).wrapping_mul(w)), load + w);
    let v = rq.min_vruntime.wrapping_add(avg.div_euclid(load) as u64);
    let lag = v.wrapping_sub(se.vruntime) as i64;
    let limit = calc_delta_fair((2 * t.base_slice).max(t.tick), se.weight) as i64;
    se.vlag = lag.clamp(-limit, limit);
}

/// `place_entity`: puts `se` (a waking, moved or, with `initial`, new task)
/// into `rq`, whose running task is `curr`, at its saved lag from the average,
/// and gives it a deadline.
pub fn place(rq: &RunQueue, curr: Curr, se: &mut Entity, t: &Tunables, initial: bool) {
    let v = avg_vruntime(rq, curr);
    let (_, load) = sums(rq, curr);
    let mut lag = 0i64;
    if load > 0 && se.vlag != 0 {
        lag = ((i128::from(se.vlag) * i128::from(load + i64::from(se.weight))) / i128::from(load)) as i64;
    }
    se.vruntime = v.wrapping_sub(lag as u64);
    let mut vs = vslice(se, t);
    if initial {
        vs /= 2;
    }
    se.deadline = se.vruntime + vs;
    se.protect = false;
}

/// What [`pick`] chose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pick {
    /// The running task goes on.
    Curr,
    /// The queued task at this position.
    Queued(usize),
    /// Nothing is runnable.
    Idle,
}

/// `pick_eevdf`: the eligible task with the earliest deadline among `rq`'s and
/// the running one (`curr`, if it is still runnable), RUN_TO_PARITY keeping
/// a protected running task.
pub fn pick(rq: &RunQueue, curr: Option<&Entity>) -> Pick {
    let c = curr.map(|e| (e.vruntime, e.weight));
    let curr = curr.filter(|e| eligible(rq, c, e.vruntime));
    if let Some(e) = curr {
        if e.protect {
            return Pick::Curr;
        }
    }
    let (avg, load) = sums(rq, c);
    let mut best: Option<(usize, u64)> = None;
    // Sorted by virtual runtime: the eligible tasks are a prefix.
    for (i, e) in rq.iter().enumerate() {
        if avg < rq.rel(e.key).wrapping_mul(load) {
            break;
        }
        if best.is_none_or(|(_, d)| (e.deadline.wrapping_sub(d) as i64) < 0) {
            best = Some((i, e.deadline));
        }
    }
    match (curr, best) {
        (Some(e), Some((_, d))) if (e.deadline.wrapping_sub(d) as i64) < 0 => Pick::Curr,
        (_, Some((i, _))) => Pick::Queued(i),
        (Some(_), None) => Pick::Curr,
        // No eligible task: cannot happen with a consistent average; the
        // kernel then takes the leftmost.
        (None, None) if !rq.is_empty() => Pick::Queued(0),
        (None, None) => Pick::Idle,
    }
}

/// `check_preempt_wakeup`: whether task `woken`, just queued on `rq`,
/// preempts the running task `curr`.
pub fn wakeup_preempts(rq: &RunQueue, curr: &Entity, woken: usize) -> bool {
    match pick(rq, Some(curr)) {
        Pick::Queued(i) => rq.get(i).is_some_and(|e| e.tid as usize == woken),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::super::SchedKind;
    use super::*;

    fn tun() -> Tunables {
        // 4 CPUs: factor 3, base slice 2.25 ms (1 GHz: ns = cycles).
        Tunables::new(SchedKind::Eevdf, 4, 1.0, 4000.0, None)
    }

    fn se(v: u64, d: u64) -> Entity {
        Entity { vruntime: v, deadline: d, ..Entity::default() }
    }

    #[test]
    fn picks_the_eligible_task_with_the_earliest_deadline() {
        let mut rq = RunQueue::with_floor(0);
        rq.insert(se(100, 5_000).queued(1, false));
        rq.insert(se(200, 3_000).queued(2, false));
        rq.insert(se(900, 1_000).queued(3, false));
        // V = 400: tasks 1 and 2 are eligible, 3 (earliest deadline) is not.
        assert_eq!(avg_vruntime(&rq, None), 400);
        assert_eq!(pick(&rq, None), Pick::Queued(1));
    }

    #[test]
    fn run_to_parity_keeps_a_protected_task_that_is_eligible() {
        let mut rq = RunQueue::with_floor(0);
        rq.insert(se(100, 1_000).queued(2, false));
        let mut curr = se(100, 2_000);
        curr.protect = true;
        assert_eq!(pick(&rq, Some(&curr)), Pick::Curr);
        assert!(!wakeup_preempts(&rq, &curr, 2));
        curr.protect = false;
        assert!(wakeup_preempts(&rq, &curr, 2), "an earlier eligible deadline wins once unprotected");
        // Past the average, even a protected task loses.
        let mut ahead = se(1_000, 2_000);
        ahead.protect = true;
        assert!(wakeup_preempts(&rq, &ahead, 2));
    }

    #[test]
    fn a_placed_task_keeps_its_lag_and_leaves_the_average() {
        let t = tun();
        let mut rq = RunQueue::with_floor(0);
        rq.insert(se(10_000, 0).queued(1, false));
        let curr = Some((12_000u64, 1024u32));
        assert_eq!(avg_vruntime(&rq, curr), 11_000);
        let mut w = Entity { vlag: 600, ..Entity::default() };
        place(&rq, curr, &mut w, &t, false);
        // lag 600 scaled by (2048 + 1024) / 2048 = 900 below V.
        assert_eq!(w.vruntime, 10_100);
        assert_eq!(w.deadline, 10_100 + 2_250_000);
        rq.insert(w.queued(2, false));
        assert_eq!(avg_vruntime(&rq, curr), 11_000 - 300, "V moves by the lag's share");
    }

    #[test]
    fn lag_is_clamped_to_two_slices() {
        let t = tun();
        let rq = RunQueue::with_floor(0);
        let mut s = se(0, 0);
        s.vruntime = 0;
        save_lag(&rq, &mut s, &t);
        assert_eq!(s.vlag, 0, "alone, a task is at the average");
        let mut rq = RunQueue::with_floor(0);
        rq.insert(se(100_000_000, 0).queued(1, false));
        let mut behind = se(0, 0);
        save_lag(&rq, &mut behind, &t);
        assert_eq!(behind.vlag, 4_500_000);
    }
}
