//! The ops a workload's program has decided ahead of returning them.
//!
//! Many programs decide a burst of ops at once (a slice of a compilation, a
//! turn of a ring, one timed iteration) while the simulator asks for one op
//! per call of [`Program::next`](crate::program::Program::next). Such a
//! program keeps an [`OpQueue`]: its `next` returns what the queue holds
//! first, and decides the next burst only once the queue is empty.

use crate::program::Op;
use std::collections::VecDeque;

/// Ops decided and not yet returned, first in, first out. Its buffer is kept
/// when it empties, so a program that queues a burst every turn allocates
/// once.
#[derive(Default)]
pub(crate) struct OpQueue(VecDeque<Op>);

impl OpQueue {
    /// Returns the next op queued, or `None` when every one has been returned.
    pub(crate) fn pop(&mut self) -> Option<Op> {
        self.0.pop_front()
    }

    /// Returns whether every op queued has been returned.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Queues `op` after those queued.
    pub(crate) fn push(&mut self, op: Op) {
        self.0.push_back(op);
    }

    /// Queues `ops`, in order, after those queued.
    pub(crate) fn extend(&mut self, ops: impl IntoIterator<Item = Op>) {
        self.0.extend(ops);
    }

    /// Starts a burst: queues `ops` in order and returns the first, which the
    /// program returns now. The queue is empty (its program returns what is
    /// queued before it decides more) and `ops` holds at least one op.
    pub(crate) fn start(&mut self, ops: impl IntoIterator<Item = Op>) -> Op {
        debug_assert!(self.0.is_empty(), "a burst starts once the last one has been returned");
        self.extend(ops);
        self.pop().expect("a burst holds an op")
    }
}

#[cfg(test)]
mod tests {
    use super::{Op, OpQueue};

    #[test]
    fn a_burst_comes_back_in_order_after_its_first_op() {
        let mut q = OpQueue::default();
        assert!(matches!(q.start([Op::Compute(1), Op::Compute(2)]), Op::Compute(1)));
        q.push(Op::Compute(3));
        q.extend([Op::Compute(4)]);
        let cycles = |op| match op {
            Op::Compute(c) => c,
            _ => panic!("only computations were queued"),
        };
        assert_eq!(std::iter::from_fn(|| q.pop()).map(cycles).collect::<Vec<_>>(), [2, 3, 4]);
        assert!(q.pop().is_none());
    }
}
