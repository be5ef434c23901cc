//! A pipe ([`Pipe`]): its tokens, bound and buffer page, and the threads
//! blocked on it. A token is added only below the bound and taken only when
//! there is one; the thread each operation wakes comes off the queue of the
//! other side.

use std::collections::VecDeque;

/// A pipe.
pub(in crate::sim) struct Pipe {
    count: u64,
    /// The most tokens it holds (`u64::MAX`: unbounded).
    cap: u64,
    /// Blocked readers.
    waiters: VecDeque<usize>,
    /// Writers blocked on a full pipe.
    writers: VecDeque<usize>,
    kva: u64,
}

impl Pipe {
    /// Returns an empty pipe holding at most `cap` tokens, its buffer at
    /// kernel address `kva`.
    pub(super) fn new(cap: u64, kva: u64) -> Self {
        Pipe { count: 0, cap, waiters: VecDeque::new(), writers: VecDeque::new(), kva }
    }

    /// Returns its buffer's kernel address.
    #[inline]
    pub(in crate::sim) fn kva(&self) -> u64 {
        self.kva
    }

    /// Returns whether it holds as many tokens as it may.
    #[inline]
    pub(in crate::sim) fn is_full(&self) -> bool {
        self.count >= self.cap
    }

    /// Returns whether it holds a token.
    #[inline]
    pub(in crate::sim) fn has_token(&self) -> bool {
        self.count > 0
    }

    /// Adds a token (it is not full); returns the blocked reader it wakes, if any.
    #[inline]
    pub(in crate::sim) fn put(&mut self) -> Option<usize> {
        debug_assert!(!self.is_full(), "a write to a full pipe");
        self.count += 1;
        self.waiters.pop_front()
    }

    /// Takes a token (it holds one); returns the blocked writer it wakes, if any.
    #[inline]
    pub(in crate::sim) fn take(&mut self) -> Option<usize> {
        debug_assert!(self.has_token(), "a read of an empty pipe");
        self.count -= 1;
        self.writers.pop_front()
    }

    /// Thread `tid` blocks until a token comes.
    #[inline]
    pub(in crate::sim) fn wait_to_read(&mut self, tid: usize) {
        self.waiters.push_back(tid);
    }

    /// Thread `tid` blocks until there is room.
    #[inline]
    pub(in crate::sim) fn wait_to_write(&mut self, tid: usize) {
        self.writers.push_back(tid);
    }
}
