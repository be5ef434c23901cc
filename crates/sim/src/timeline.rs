//! A resource used one interval at a time in simulated time: the moves of a
//! cache line ([`crate::coherence`]), the holds of a spinlock or mutex
//! ([`crate::locks`]).
//!
//! Requests reach a [`Timeline`] in the order the simulator runs code, not in
//! the order of simulated time, so each is placed in the first gap at or after
//! the time it asks that is long enough for it. Two structures serve that:
//! - the intervals themselves, by start, each with what the caller keeps of it
//!   (the CPU a lock's hold was for): what a request follows and what is in
//!   progress at a time, found by binary search;
//! - their union as busy runs (intervals that touch merged), by start: a request
//!   behind a queue of any length steps over the whole queue at once, so
//!   placing the n-th of n contenders costs `O(log n)`, not `O(n)`.
//!
//! # What is kept
//! Nothing is dropped for want of room: a timeline holds every interval that a
//! request can still meet. The engine runs events in order of their start
//! ([`crate::machine::Machine::set_floor`]), and no operation of any CPU comes
//! before the start of the event running, so an interval that ended by then
//! can neither delay a request nor be in progress at one. [`Timeline::forget`]
//! drops those, but keeps the payload of the latest of them: a request at or
//! after the floor may follow it (a lock's handoff comes from its holder). A
//! timeline quiet at the floor so keeps nothing outside itself, and a request
//! reads no memory but the timeline's own fields. What remains is
//! bounded by the requests still ahead of the floor, that is by the
//! contenders and what each asks within one event, never by a constant: 4,096
//! CPUs queued on one lock are 4,096 holds, served one after another.
//!
//! A request before an interval already forgotten (which the engine never
//! makes) is placed after it: serialisation never depends on what is kept.

use std::collections::VecDeque;

/// Intervals `[start, end)` of simulated time, no two overlapping, each with a
/// payload `T` (module docs).
#[derive(Clone, Debug)]
pub(crate) struct Timeline<T> {
    /// `(start, end, payload)`, by start; no two overlap, so by end too.
    items: VecDeque<(u64, u64, T)>,
    /// The union of `items` as maximal runs `(start, end)`: by start, disjoint
    /// and not touching.
    runs: VecDeque<(u64, u64)>,
    /// The end of the latest run forgotten: nothing is placed before it.
    forgotten: u64,
    /// The payload of the latest interval forgotten: what a request follows
    /// when no interval kept ends before it. Kept here, not in `items`, so that
    /// a timeline that is quiet at the floor reads nothing but itself.
    last: Option<T>,
}

impl<T> Default for Timeline<T> {
    fn default() -> Self {
        Timeline { items: VecDeque::new(), runs: VecDeque::new(), forgotten: 0, last: None }
    }
}

impl<T: Copy> Timeline<T> {
    /// Returns the interval in progress at `t` (`start <= t < end`), if any.
    #[inline]
    pub(crate) fn at(&self, t: u64) -> Option<(u64, u64, T)> {
        let i = self.items.partition_point(|x| x.1 <= t);
        self.items.get(i).copied().filter(|x| x.0 <= t)
    }

    /// Returns the payload of the latest interval that ends by `t` (`t` at or
    /// after every interval forgotten), if any.
    #[inline]
    fn before(&self, t: u64) -> Option<T> {
        match self.items.partition_point(|x| x.1 <= t) {
            0 => self.last,
            i => Some(self.items[i - 1].2),
        }
    }

    /// Returns the first start `s` from `t` on of an interval that overlaps no
    /// other, where an interval starting at `s` lasts `len(s, before)`, `before`
    /// being the payload of the latest interval that ends by `s`; returns `s`
    /// and that payload.
    #[inline]
    pub(crate) fn fit(&self, t: u64, mut len: impl FnMut(u64, Option<T>) -> u64) -> (u64, Option<T>) {
        let mut s = t.max(self.forgotten);
        // Runs are disjoint and in order: the first that may be in the way is
        // the first that ends after `s`; the gap before each next run is tried.
        let mut j = self.runs.partition_point(|r| r.1 <= s);
        loop {
            let before = self.before(s);
            let d = len(s, before);
            match self.runs.get(j) {
                Some(&(a, b)) if a < s + d => {
                    s = s.max(b);
                    j += 1;
                }
                _ => return (s, before),
            }
        }
    }

    /// Records `[start, end)` with `payload`; it overlaps no interval kept (as
    /// [`Timeline::fit`] places them).
    #[inline]
    pub(crate) fn insert(&mut self, start: u64, end: u64, payload: T) {
        let i = self.items.partition_point(|x| x.0 <= start);
        debug_assert!(i == 0 || self.items[i - 1].1 <= start, "overlaps the interval before");
        debug_assert!(self.items.get(i).is_none_or(|x| end <= x.0), "overlaps the interval after");
        self.items.insert(i, (start, end, payload));
        // Merge it with every run it touches.
        let k = self.runs.partition_point(|r| r.1 < start);
        let (mut lo, mut hi, mut m) = (start, end, k);
        while let Some(&(a, b)) = self.runs.get(m).filter(|r| r.0 <= end) {
            (lo, hi) = (lo.min(a), hi.max(b));
            m += 1;
        }
        if m == k {
            self.runs.insert(k, (lo, hi));
        } else {
            self.runs[k] = (lo, hi);
            self.runs.drain(k + 1..m);
        }
    }

    /// Forgets what no request from `floor` on can meet: every interval that
    /// ended by `floor` (the latest one's payload kept) and the runs that ended
    /// by then.
    #[inline]
    pub(crate) fn forget(&mut self, floor: u64) {
        while let Some(&(_, _, p)) = self.items.front().filter(|x| x.1 <= floor) {
            self.last = Some(p);
            self.items.pop_front();
        }
        while let Some(&(_, b)) = self.runs.front().filter(|r| r.1 <= floor) {
            self.forgotten = self.forgotten.max(b);
            self.runs.pop_front();
        }
    }

    /// Returns how many intervals are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Returns the intervals kept, by start.
    #[cfg(test)]
    pub(crate) fn intervals(&self) -> impl Iterator<Item = (u64, u64, T)> + '_ {
        self.items.iter().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Places a request of `d` cycles at `t`; returns its start.
    fn place(tl: &mut Timeline<u32>, t: u64, d: u64, who: u32) -> u64 {
        let (s, _) = tl.fit(t, |_, _| d);
        tl.insert(s, s + d, who);
        s
    }

    #[test]
    fn requests_fill_gaps_in_order_and_queue_behind_busy_runs() {
        let mut tl = Timeline::default();
        assert_eq!(place(&mut tl, 1000, 100, 0), 1000);
        assert_eq!(place(&mut tl, 1300, 100, 1), 1300);
        // 1100..1300 has room for 100 but not for 250.
        assert_eq!(place(&mut tl, 1000, 250, 2), 1400);
        assert_eq!(place(&mut tl, 1050, 100, 3), 1100);
        // Now 1000..1200 and 1300..1650 are busy: 1200..1300 fits exactly 100.
        assert_eq!(place(&mut tl, 900, 150, 4), 1650);
        assert_eq!(place(&mut tl, 1150, 100, 5), 1200);
        assert_eq!(tl.runs, VecDeque::from([(1000, 1800)]), "touching intervals are one run");
        let starts: Vec<u64> = tl.intervals().map(|x| x.0).collect();
        assert_eq!(starts, vec![1000, 1100, 1200, 1300, 1400, 1650]);
    }

    #[test]
    fn the_length_may_depend_on_the_interval_followed() {
        // A handoff from cpu 1 costs 500 more; from anyone else nothing more.
        let mut tl = Timeline::default();
        tl.insert(0, 100, 1u32);
        tl.insert(500, 600, 2);
        let (s, before) = tl.fit(50, |_, b| 100 + if b == Some(1) { 500 } else { 0 });
        // After cpu 1 (at 100) 600 do not fit before 500; after cpu 2 100 do.
        assert_eq!((s, before), (600, Some(2)));
    }

    #[test]
    fn forgetting_keeps_who_ended_last_and_never_reopens_a_gap() {
        let mut tl = Timeline::default();
        for i in 0..10 {
            place(&mut tl, i * 1000, 100, i as u32);
        }
        tl.forget(5050);
        // Intervals 5.. are kept (5 in progress at 5050); 0..=4 ended by then.
        assert_eq!(tl.len(), 5);
        assert_eq!(tl.at(5050).map(|x| x.2), Some(5));
        assert_eq!(tl.fit(5100, |_, _| 100), (5100, Some(5)));
        // A request from before the floor (which the engine never makes) goes
        // after what was forgotten, not into a gap among it, and follows 4.
        assert_eq!(tl.fit(1500, |_, _| 100), (4100, Some(4)));
        // Everything ended: nothing kept but who held it last.
        tl.forget(20_000);
        assert_eq!((tl.len(), tl.fit(20_000, |_, _| 1)), (0, (20_000, Some(9))));
    }

    #[test]
    fn thousands_of_simultaneous_requests_queue_one_after_another() {
        let mut tl = Timeline::default();
        for cpu in 0..4096u32 {
            assert_eq!(place(&mut tl, 0, 10, cpu), u64::from(cpu) * 10);
        }
        assert_eq!(tl.len(), 4096);
        assert_eq!(tl.runs.len(), 1);
    }
}
