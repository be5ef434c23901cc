//! One CPU's run queue: the queued (runnable, not running) tasks in key order,
//! and what the fair classes keep beside them (`min_vruntime`, EEVDF's
//! weighted sum of keys for the average virtual runtime).
//!
//! A sorted ring buffer, not the kernel's red-black tree: the queues of the
//! simulated workloads hold a handful to a few hundred tasks, where a binary
//! search and a short move beat a tree's pointer chasing, and nothing is
//! allocated once the buffer has grown. The FIFO class keys by arrival, so
//! its inserts append and its picks take the front, both O(1).

use std::collections::VecDeque;

/// A queued task: its key (virtual runtime, or arrival order for FIFO), EEVDF
/// deadline, weight and whether it is bound to this CPU, copied in so that a
/// pick or a balance scan reads the queue only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Queued {
    /// The sort key: `vruntime`, or the arrival order (FIFO).
    pub key: u64,
    /// EEVDF's virtual deadline.
    pub deadline: u64,
    /// The thread.
    pub tid: u32,
    /// Its weight.
    pub weight: u32,
    /// Bound to this CPU (`CloneOn`): balancing leaves it.
    pub pinned: bool,
    /// Asleep, its dequeue delayed (EEVDF DELAY_DEQUEUE): a pick takes it
    /// off the queue instead of running it.
    pub delayed: bool,
}

/// Where every queue's `min_vruntime` starts: far from both ends of `u64`, so
/// that virtual runtimes, moved between queues relative to their floors and
/// placed below them by the sleeper credit, compare as plain integers (the
/// kernel compares them as differences, and starts near the wrap instead).
pub const VRUNTIME_BASE: u64 = 1 << 60;

/// One CPU's queue of runnable tasks, least key first (equal keys in arrival
/// order, as the kernel's tree inserts an equal key to the right).
#[derive(Debug)]
pub struct RunQueue {
    q: VecDeque<Queued>,
    /// `cfs_rq->min_vruntime`: a monotonic floor of the queue's virtual time.
    pub min_vruntime: u64,
    /// EEVDF `avg_vruntime`: the sum of `(key - min_vruntime) * weight` over the
    /// queued tasks (the running one is added by the caller).
    sum_key: i64,
    /// `avg_load`: the sum of the queued tasks' weights.
    sum_w: i64,
    /// Queued tasks not bound to this CPU.
    movable: u32,
    /// Queued tasks asleep, their dequeue delayed (`cfs_h_nr_delayed`).
    delayed: u32,
}

impl Default for RunQueue {
    fn default() -> Self {
        RunQueue { q: VecDeque::new(), min_vruntime: VRUNTIME_BASE, sum_key: 0, sum_w: 0, movable: 0, delayed: 0 }
    }
}

impl RunQueue {
    /// Returns an empty queue whose `min_vruntime` is `floor`.
    pub fn with_floor(floor: u64) -> Self {
        RunQueue { min_vruntime: floor, ..RunQueue::default() }
    }

    /// Returns the number of queued tasks.
    #[inline]
    pub fn len(&self) -> usize {
        self.q.len()
    }

    /// Returns whether no task is queued.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    /// Returns the number of queued tasks balancing may move.
    #[inline]
    pub fn movable(&self) -> u32 {
        self.movable
    }

    /// Returns the number of queued tasks asleep, their dequeue delayed.
    #[inline]
    pub fn delayed(&self) -> u32 {
        self.delayed
    }

    /// Returns the queued tasks in key order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Queued> + ExactSizeIterator {
        self.q.iter()
    }

    /// Returns the queued task at `at` (0: the least key).
    #[inline]
    pub fn get(&self, at: usize) -> Option<&Queued> {
        self.q.get(at)
    }

    /// Returns the weighted sum of keys relative to `min_vruntime` and the sum of
    /// weights of the queued tasks (EEVDF's `avg_vruntime` and `avg_load`).
    #[inline]
    pub fn sums(&self) -> (i64, i64) {
        (self.sum_key, self.sum_w)
    }

    /// Queues `e` after every task whose key is not greater.
    #[inline]
    pub fn insert(&mut self, e: Queued) {
        let at = match self.q.back() {
            Some(b) if b.key > e.key => self.q.partition_point(|x| x.key <= e.key),
            _ => self.q.len(),
        };
        self.q.insert(at, e);
        // Wrapping: the sums mean something for EEVDF only, whose keys stay
        // near `min_vruntime`; FIFO's arrival keys must not overflow them.
        self.sum_key = self.sum_key.wrapping_add(self.rel(e.key).wrapping_mul(i64::from(e.weight)));
        self.sum_w += i64::from(e.weight);
        self.movable += u32::from(!e.pinned);
        self.delayed += u32::from(e.delayed);
    }

    /// Takes the task at `at`.
    #[inline]
    pub fn remove(&mut self, at: usize) -> Option<Queued> {
        let e = if at == 0 { self.q.pop_front() } else { self.q.remove(at) }?;
        self.sum_key = self.sum_key.wrapping_sub(self.rel(e.key).wrapping_mul(i64::from(e.weight)));
        self.sum_w -= i64::from(e.weight);
        self.movable -= u32::from(!e.pinned);
        self.delayed -= u32::from(e.delayed);
        Some(e)
    }

    /// Returns the position of thread `tid` in the queue.
    pub fn position(&self, tid: usize) -> Option<usize> {
        self.q.iter().position(|e| e.tid as usize == tid)
    }

    /// `key` relative to `min_vruntime`.
    #[inline]
    pub fn rel(&self, key: u64) -> i64 {
        key.wrapping_sub(self.min_vruntime) as i64
    }

    /// `update_min_vruntime`: raises `min_vruntime` to the least of the running
    /// task's virtual runtime (`curr`) and the first queued one's, never lowering it.
    pub fn update_min(&mut self, curr: Option<u64>) {
        let first = self.q.front().map(|e| e.key);
        let least = match (curr, first) {
            (Some(c), Some(f)) => c.min(f),
            (Some(v), None) | (None, Some(v)) => v,
            (None, None) => return,
        };
        if least > self.min_vruntime {
            let d = (least - self.min_vruntime) as i64;
            self.sum_key = self.sum_key.wrapping_sub(d.wrapping_mul(self.sum_w));
            self.min_vruntime = least;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(key: u64, tid: u32) -> Queued {
        Queued { key, deadline: 0, tid, weight: 1024, pinned: tid == 9, delayed: false }
    }

    #[test]
    fn keeps_key_order_and_arrival_order_among_equal_keys() {
        let mut rq = RunQueue::with_floor(0);
        for (k, t) in [(5, 1), (3, 2), (5, 3), (1, 4), (9, 9)] {
            rq.insert(q(k, t));
        }
        let order: Vec<u32> = rq.iter().map(|e| e.tid).collect();
        assert_eq!(order, [4, 2, 1, 3, 9]);
        assert_eq!(rq.movable(), 4);
        assert_eq!(rq.sums(), ((1 + 3 + 5 + 5 + 9) * 1024, 5 * 1024));
        rq.update_min(Some(2));
        assert_eq!(rq.min_vruntime, 1, "the first queued task is behind the running one");
        rq.remove(0);
        rq.update_min(None);
        assert_eq!((rq.min_vruntime, rq.sums().0), (3, (2 + 2 + 6) * 1024));
        rq.remove(rq.position(9).unwrap());
        assert_eq!(rq.movable(), 3);
        rq.insert(Queued { delayed: true, ..q(7, 5) });
        assert_eq!(rq.delayed(), 1);
        rq.remove(rq.position(5).unwrap());
        assert_eq!(rq.delayed(), 0);
    }
}
