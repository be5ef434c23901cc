//! The slots of a small fully associative cache with LRU replacement (the L1
//! TLB, the walk cache): a mirror of their keys, an index by key, the empty
//! slots and the recency order ([`Recency`]), kept beside the cache's entries.

/// The most L1 entries a [`super::Tlb`] has: one bit each in the L1's index
/// (and the most walk-cache entries).
pub const MAX_L1_ENTRIES: usize = 64;

/// Buckets of the index by key of [`Slots`].
pub(super) const L1_BUCKETS: usize = 128;

/// Returns the bucket of the L1's index a key falls in: a Fibonacci hash, so that
/// the keys of neighbouring pages spread over the buckets.
#[inline(always)]
pub(super) fn l1_bucket(key: u64) -> usize {
    (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - L1_BUCKETS.trailing_zeros())) as usize
}

/// The slots of a small fully associative cache with LRU replacement, beside
/// its entries: a mirror of their keys, an index by key, the empty slots and
/// the recency order.
#[derive(Clone)]
pub(super) struct Slots {
    /// Per slot: its entry's key, or `u64::MAX` when empty.
    pub(super) keys: Vec<u64>,
    /// An index by key, so that a lookup reads a few slots instead of scanning
    /// them all: bucket [`l1_bucket`] of a key has bit `i` set for every slot
    /// `i` whose key falls in it (see [`Slots::candidates`]).
    pub(super) index: Box<[u64; L1_BUCKETS]>,
    /// Bit `i` set: slot `i` is empty.
    pub(super) free: u64,
    /// The slots from least to most recently used.
    pub(super) order: Recency,
}

impl Slots {
    /// Returns `n` empty slots (at most [`MAX_L1_ENTRIES`]).
    pub(super) fn new(n: usize) -> Self {
        Slots {
            keys: vec![u64::MAX; n],
            index: Box::new([0; L1_BUCKETS]),
            free: if n == 0 { 0 } else { u64::MAX >> (64 - n) },
            order: Recency::new(n),
        }
    }

    /// Returns a superset of the slots whose key is `k`, as a bit mask (bit `i`
    /// for slot `i`): the slots of `k`'s bucket of the index. Iterating its bits
    /// in increasing order and checking each slot's key visits the slots of key
    /// `k` in the order a scan of every slot would.
    #[inline(always)]
    pub(super) fn candidates(&self, k: u64) -> u64 {
        self.index[l1_bucket(k)]
    }

    /// Sets slot `i`'s key to `k` (`u64::MAX`: empty), keeping the index and
    /// the mask of free slots in step.
    #[inline]
    pub(super) fn set_key(&mut self, i: usize, k: u64) {
        let old = self.keys[i];
        if old != u64::MAX {
            self.index[l1_bucket(old)] &= !(1 << i);
        }
        if k != u64::MAX {
            self.index[l1_bucket(k)] |= 1 << i;
            self.free &= !(1 << i);
        } else {
            self.free |= 1 << i;
        }
        self.keys[i] = k;
    }

    /// Returns the slot a new entry replaces: the first empty one, else the
    /// least recently used one (the head of [`Recency`]).
    #[inline]
    pub(super) fn victim(&self) -> usize {
        if self.free != 0 {
            self.free.trailing_zeros() as usize
        } else {
            self.order.lru()
        }
    }
}

/// The recency order of a [`Slots`]' slots, least recently used first: what the LRU
/// stamps of the model (a fresh tick of the TLB's clock on every hit and every
/// fill of a slot) order them by. Stamps are distinct, every one being a new
/// tick, so the slot of the smallest stamp is the list's head, and "give slot
/// `i` the newest stamp" is "move `i` to the tail". A slot whose entry was
/// invalidated keeps its place; it is refilled (and moved to the tail) before
/// the slots are full again, so the head of full slots is always a held entry's.
#[derive(Clone)]
pub(super) struct Recency {
    /// `prev[i]`, `next[i]`: slot `i`'s neighbours; index `n` (the slot count)
    /// is the sentinel, whose `next` is the head and `prev` the tail.
    pub(super) prev: [u8; MAX_L1_ENTRIES + 1],
    pub(super) next: [u8; MAX_L1_ENTRIES + 1],
    /// The sentinel's index.
    pub(super) end: u8,
}

impl Recency {
    /// Returns the order of `n` slots that have never been used: slot 0 first.
    fn new(n: usize) -> Self {
        let mut o = Recency { prev: [0; MAX_L1_ENTRIES + 1], next: [0; MAX_L1_ENTRIES + 1], end: n as u8 };
        for i in 0..=n {
            o.next[i] = ((i + 1) % (n + 1)) as u8;
            o.prev[(i + 1) % (n + 1)] = i as u8;
        }
        o
    }

    /// Returns the least recently used slot.
    #[inline(always)]
    pub(super) fn lru(&self) -> usize {
        self.next[self.end as usize] as usize
    }

    /// Makes slot `i` the most recently used.
    #[inline(always)]
    pub(super) fn touch(&mut self, i: usize) {
        let end = self.end as usize;
        if self.prev[end] as usize == i {
            return;
        }
        let (p, n) = (self.prev[i], self.next[i]);
        self.next[p as usize] = n;
        self.prev[n as usize] = p;
        let tail = self.prev[end];
        self.next[tail as usize] = i as u8;
        self.prev[i] = tail;
        self.next[i] = end as u8;
        self.prev[end] = i as u8;
    }
}
