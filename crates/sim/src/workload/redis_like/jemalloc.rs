//! jemalloc's value arena as `redis_like`'s server uses it: one large size
//! class's extents, the thread cache, dirty extents and their decay
//! (`decay_t`, the smoothstep table), and the background thread's purges and
//! wake-ups.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// jemalloc's thread-cache slots for a large size class (`opt_tcache_nslots_large`).
const TCACHE_NSLOTS_LARGE: usize = 20;
/// jemalloc's decay epochs (`SMOOTHSTEP_NSTEPS`).
const NSTEPS: usize = 200;
/// The binary fixed point of its smoothstep table (`SMOOTHSTEP_BFP`).
const BFP: u32 = 24;
/// Dirty pages below which the background thread sleeps a whole decay period
/// (`ARENA_DEFERRED_PURGE_NPAGES_THRESHOLD`).
const NPAGES_THRESHOLD: u64 = 1024;

/// Returns jemalloc's `h_steps`: `smootherstep((i + 1) / 200)` in 24-bit fixed point.
fn h_steps() -> Vec<u64> {
    (1..=NSTEPS)
        .map(|i| {
            let x = i as f64 / NSTEPS as f64;
            let y = x * x * x * (x * (6.0 * x - 15.0) + 10.0);
            (y * (1u64 << BFP) as f64) as u64
        })
        .collect()
}

/// What an extent of the value arena holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    /// Purged or never used: its pages are absent.
    Retained,
    /// A key's value.
    Live,
    /// Freed into the thread cache.
    Cached,
    /// Freed to the arena: dirty, to decay.
    Dirty,
    /// Taken by the background thread to be purged.
    Purging,
}

/// jemalloc's dirty-page decay (`decay_t`), in the server's cycles.
struct Decay {
    h: Vec<u64>,
    interval: u64,
    epoch: u64,
    backlog: [u64; NSTEPS],
    nunpurged: u64,
    limit: u64,
}

impl Decay {
    fn new(interval: u64) -> Self {
        Decay { h: h_steps(), interval: interval.max(1), epoch: 0, backlog: [0; NSTEPS], nunpurged: 0, limit: 0 }
    }

    /// `decay_maybe_advance_epoch` (its deadline without jitter): returns whether an epoch passed.
    fn advance(&mut self, now: u64, current: u64) -> bool {
        if now < self.epoch + self.interval {
            return false;
        }
        let n = (now - self.epoch) / self.interval;
        self.epoch += n * self.interval;
        if n as usize >= NSTEPS {
            self.backlog = [0; NSTEPS];
        } else {
            let n = n as usize;
            self.backlog.rotate_left(n);
            for b in &mut self.backlog[NSTEPS - n..NSTEPS - 1] {
                *b = 0;
            }
        }
        self.backlog[NSTEPS - 1] = current.saturating_sub(self.nunpurged);
        let sum: u64 = self.backlog.iter().zip(&self.h).map(|(b, h)| b * h).sum();
        self.limit = sum >> BFP;
        self.nunpurged = self.limit.max(current);
        true
    }

    /// `decay_npurge_after_interval`: pages the limit drops by in `interval` epochs.
    fn npurge_after(&self, interval: usize) -> u64 {
        let mut sum = 0;
        for i in 0..NSTEPS {
            let h = if i < interval { self.h[i] } else { self.h[i] - self.h[i - interval] };
            sum += self.backlog[i] * h;
        }
        sum >> BFP
    }

    /// `decay_ns_until_purge` in cycles; `None` when nothing will ever be purged.
    fn until_purge(&self, current: u64) -> Option<u64> {
        if current == 0 && self.backlog.iter().all(|&b| b == 0) {
            return None;
        }
        if current <= NPAGES_THRESHOLD {
            return Some(self.interval * NSTEPS as u64);
        }
        let (mut lb, mut ub) = (2, NSTEPS);
        let mut npurge_lb = self.npurge_after(lb);
        if npurge_lb > NPAGES_THRESHOLD {
            return Some(self.interval * lb as u64);
        }
        let mut npurge_ub = self.npurge_after(ub);
        if npurge_ub < NPAGES_THRESHOLD {
            return Some(self.interval * ub as u64);
        }
        while npurge_lb + NPAGES_THRESHOLD < npurge_ub && lb + 2 < ub {
            let target = (lb + ub) / 2;
            let npurge = self.npurge_after(target);
            if npurge > NPAGES_THRESHOLD {
                ub = target;
                npurge_ub = npurge;
            } else {
                lb = target;
                npurge_lb = npurge;
            }
        }
        Some(self.interval * (ub + lb) as u64 / 2)
    }

    /// `decay_npages_purge_in`: of `npages_new` new dirty pages, those purged within `time` cycles.
    fn purge_in(&self, time: u64, npages_new: u64) -> u64 {
        let n = (time / self.interval) as usize;
        if n >= NSTEPS {
            return npages_new;
        }
        (npages_new * (self.h[NSTEPS - 1] - self.h[NSTEPS - 1 - n])) >> BFP
    }
}

/// The value arena of jemalloc: one size class's extents, its thread cache, its
/// dirty extents and their decay, and the background thread's schedule.
pub(super) struct Jemalloc {
    pub(super) pages: u64,
    slots: Vec<Slot>,
    /// The thread cache's bin, most recently freed last.
    tcache: VecDeque<u32>,
    /// Dirty extents by address, and by the order they were dirtied.
    dirty: BTreeSet<u32>,
    lru: BTreeMap<u64, u32>,
    dirtied: Vec<u64>,
    seq: u64,
    retained: BTreeSet<u32>,
    decay: Decay,
    /// The background thread's shortest sleep, cycles.
    min_sleep: u64,
    /// Whether the background thread is asleep on its pipe.
    pub(super) bg_asleep: bool,
    /// When it wakes by itself (`None`: it sleeps until woken).
    bg_wake_at: Option<u64>,
    /// Whether it must be woken now (deferred work while it slept).
    bg_wake_now: bool,
    npages_to_purge_new: u64,
}

impl Jemalloc {
    pub(super) fn new(pages: u64, live: u64, slots: u64, decay_cycles: u64, min_sleep: u64) -> Self {
        let mut s = vec![Slot::Retained; slots as usize];
        s[..live as usize].fill(Slot::Live);
        Jemalloc {
            pages,
            slots: s,
            tcache: VecDeque::new(),
            dirty: BTreeSet::new(),
            lru: BTreeMap::new(),
            dirtied: vec![0; slots as usize],
            seq: 0,
            retained: (live as u32..slots as u32).collect(),
            decay: Decay::new(decay_cycles / NSTEPS as u64),
            min_sleep,
            bg_asleep: false,
            bg_wake_at: None,
            bg_wake_now: false,
            npages_to_purge_new: 0,
        }
    }

    fn ndirty_pages(&self) -> u64 {
        self.dirty.len() as u64 * self.pages
    }

    fn take_dirty(&mut self, s: u32) {
        self.dirty.remove(&s);
        self.lru.remove(&self.dirtied[s as usize]);
    }

    /// Allocates a value: the thread cache's last, else the lowest dirty
    /// extent, else the lowest retained one. Returns the extent.
    pub(super) fn alloc(&mut self) -> u32 {
        let s = if let Some(s) = self.tcache.pop_back() {
            s
        } else if let Some(&s) = self.dirty.first() {
            self.take_dirty(s);
            s
        } else {
            self.retained.pop_first().expect("a retained extent")
        };
        self.slots[s as usize] = Slot::Live;
        s
    }

    /// Frees a value at server time `now`: into the thread cache, flushing its
    /// oldest half to the arena first when it is full.
    pub(super) fn free(&mut self, s: u32, now: u64) {
        if self.tcache.len() == TCACHE_NSLOTS_LARGE {
            for _ in 0..TCACHE_NSLOTS_LARGE / 2 {
                let f = self.tcache.pop_front().expect("a full cache");
                self.slots[f as usize] = Slot::Dirty;
                self.seq += 1;
                self.dirtied[f as usize] = self.seq;
                self.lru.insert(self.seq, f);
                self.dirty.insert(f);
            }
            self.deferred_work(now);
        }
        self.slots[s as usize] = Slot::Cached;
        self.tcache.push_back(s);
    }

    /// An application thread's reaction to new dirty pages
    /// (`arena_handle_deferred_work`, and the decay tick's
    /// `arena_maybe_do_deferred_work`): wake the background thread now if it
    /// sleeps indefinitely, or if more than the threshold would be purged
    /// before it wakes.
    fn deferred_work(&mut self, now: u64) {
        if self.bg_asleep && self.bg_wake_at.is_none() {
            self.bg_wake_now = true;
            return;
        }
        let current = self.ndirty_pages();
        if !self.decay.advance(now, current) {
            return;
        }
        let Some(wake) = self.bg_wake_at.filter(|&w| w > self.decay.epoch) else {
            return;
        };
        let npages_new = self.decay.backlog[NSTEPS - 1];
        self.npages_to_purge_new += self.decay.purge_in(wake - self.decay.epoch, npages_new);
        if self.npages_to_purge_new > NPAGES_THRESHOLD {
            self.npages_to_purge_new = 0;
            self.bg_wake_now = true;
        }
    }

    /// Returns whether the main thread must wake the background thread at
    /// server time `now`, and marks it awake if so.
    pub(super) fn bg_due(&mut self, now: u64) -> bool {
        let due = self.bg_asleep && (self.bg_wake_now || self.bg_wake_at.is_some_and(|w| w <= now));
        if due {
            self.bg_asleep = false;
            self.bg_wake_now = false;
        }
        due
    }

    /// The background thread's work at server time `now` after a sleep
    /// (`background_work_sleep_once`): unless it slept indefinitely, advance
    /// the decay and take the extents to purge down to the limit (as runs of
    /// extents: first and count); then set its next wake-up.
    pub(super) fn bg_work(&mut self, now: u64) -> Vec<(u32, u32)> {
        let mut runs = Vec::new();
        if self.bg_wake_at.is_some() {
            self.decay.advance(now, self.ndirty_pages());
            while self.ndirty_pages() > self.decay.limit {
                let (_, &s) = self.lru.first_key_value().expect("a dirty extent");
                let (mut lo, mut hi) = (s, s);
                while lo > 0 && self.slots[lo as usize - 1] == Slot::Dirty {
                    lo -= 1;
                }
                while (hi as usize) + 1 < self.slots.len() && self.slots[hi as usize + 1] == Slot::Dirty {
                    hi += 1;
                }
                for e in lo..=hi {
                    self.take_dirty(e);
                    self.slots[e as usize] = Slot::Purging;
                }
                runs.push((lo, hi - lo + 1));
            }
        }
        self.npages_to_purge_new = 0;
        self.bg_wake_at = self.decay.until_purge(self.ndirty_pages()).map(|t| now + t.max(self.min_sleep));
        runs
    }

    /// The extents of a run the background thread has purged are retained.
    pub(super) fn purged(&mut self, (first, n): (u32, u32)) {
        for e in first..first + n {
            self.slots[e as usize] = Slot::Retained;
            self.retained.insert(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn h_steps_are_jemallocs_table() {
        // smoothstep.h, STEP(1), STEP(2), STEP(100), STEP(200).
        let h = h_steps();
        assert_eq!((h[0], h[1], h[99], h[199]), (0x14, 0xa5, 0x80_0000, 0x100_0000));
    }

    #[test]
    fn dirty_pages_may_stay_for_their_epoch_then_decay_and_are_purged_as_one_run() {
        // Epochs of 100 cycles (decay 20000), extents of 4 pages.
        let mut jm = Jemalloc::new(4, 2, 40, 20_000, 1);
        jm.bg_asleep = true;
        jm.bg_wake_at = Some(1_000_000);
        // 21 frees: the 21st flushes the cache's 10 oldest to the arena.
        for s in 2..23 {
            jm.free(s, 0);
        }
        assert_eq!((jm.tcache.len(), jm.dirty.len()), (11, 10));
        // The first epoch records the 40 new pages, all of which may stay.
        assert!(jm.bg_work(150).is_empty());
        assert_eq!(jm.bg_wake_at, Some(150 + 20_000));
        // One epoch later the limit is 40 * h[198] >> 24 = 39: the oldest
        // extent goes, merged with its 9 dirty neighbours, one run of 10.
        assert_eq!(jm.bg_work(250), vec![(2, 10)]);
        // Nothing dirty, but the backlog remembers: sleep a whole decay period.
        assert_eq!(jm.bg_wake_at, Some(250 + 20_000));
        jm.purged((2, 10));
        assert_eq!(jm.alloc(), 22, "the cache's last first");
    }
}
