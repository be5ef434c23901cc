//! Runs of pages a read sweep translated page by page, kept so that a later
//! sweep of the same pages takes each run whole ([`Runs`]): their L2 slots and
//! one number for their LRU stamps.

use super::entry::{key, TlbEntry};
use super::l2::L2;
use super::slots::MAX_L1_ENTRIES;
use super::sweep::SweepRule;
use super::Tlb;

/// Runs a TLB keeps ([`Runs`]).
pub(super) const RUNS: usize = 8;

/// The fewest pages a run has: fewer gain less than making and dissolving the
/// run costs. (In the unit tests, two: so that the differential test makes many.)
const RUN_MIN: u64 = if cfg!(test) { 2 } else { 16 };

/// The most pages a run has: a touch's chunk (the simulator's `TOUCH_CHUNK`).
pub(super) const RUN_MAX: usize = 64;

/// Where a slot of a run keeps the run's tag in its stamp: stamps, the clock's
/// ticks, stay far below.
const RUN_SHIFT: u32 = 56;

/// Runs of consecutive 4 KB pages that a read [`Tlb::sweep`] translated page by
/// page, kept so that a later sweep of the same pages takes each run whole
/// instead of page by page.
///
/// A run of `len` pages from page `first`, swept under `asid`, records for each
/// page `first + j` the L2 slot that holds its entry (`slots[k][j]`, `k` the
/// run's index): the first usable under `asid`, a non-global 4 KB entry
/// filled from address space `uid` at a PTE version of at least `min_ver`. Its
/// pages' LRU stamps are `base + j`, in one number: the slots' own stamps hold
/// the run's tag (its index plus one, at bit [`RUN_SHIFT`]) instead
/// ([`Runs::stamp`] reads either).
///
/// Why a run can be taken whole: while it lasts, what it records stays true.
/// Whatever would change it dissolves it first ([`Runs::dissolve`] writes the
/// stamps out): a fill whose victim is one of its slots, or a global fill of
/// a key one of its slots holds (a non-global fill of the run's key and ASID
/// is its duplicate, so its victim); an invalidation that removes one of its
/// entries; a lookup that stamps one of its slots; a page-by-page sweep of
/// its pages under its ASID. So a sweep that reaches `first` under `asid`, with `len`
/// pages to go that the L1 holds none of, and whose rule the run meets (`uid`
/// running, no floor above `min_ver`, a read) would find each page's entry in
/// `slots[k][j]`, accept it, and stamp it with the next tick: it sets `base`
/// to the next tick, moves the clock by `len`, and owes the L1 the last
/// copies, as the page-by-page loop does. (A run holds a page per set: no longer than the
/// L2 has sets.)
#[derive(Clone)]
pub(super) struct Runs {
    /// Bit `k` set: run `k` is live. (Here, not in the box: a TLB with none
    /// reads nothing of them.)
    pub(super) live: u8,
    pub(super) table: Box<RunTable>,
}

/// The runs themselves, behind [`Runs`]' box.
#[derive(Clone)]
pub(super) struct RunTable {
    pub(super) run: [Run; RUNS],
    /// Run `k`'s L2 slots, page by page (apart from the runs' other fields,
    /// which a sweep scans: they stay a few lines).
    pub(super) slots: [[u32; RUN_MAX]; RUNS],
    /// The run a new one replaces next (in turn).
    next: usize,
}

/// One of [`Runs`] (`len` 0: none).
#[derive(Clone, Copy, Default)]
pub(super) struct Run {
    pub(super) first: u64,
    pub(super) len: u32,
    pub(super) asid: u16,
    uid: u32,
    min_ver: u64,
    pub(super) base: u64,
}

/// Returns whether an L2 stamp is a run's tag rather than a stamp.
#[inline(always)]
pub(super) fn in_run(stamp: u64) -> bool {
    stamp >> RUN_SHIFT != 0
}

impl Runs {
    /// Returns no runs.
    pub(super) fn new() -> Self {
        Runs {
            live: 0,
            table: Box::new(RunTable { run: [Run::default(); RUNS], slots: [[0; RUN_MAX]; RUNS], next: 0 }),
        }
    }

    /// Writes out the stamps of run `k` into `stamps` (the L2's) and frees it.
    #[inline(never)]
    pub(super) fn dissolve(&mut self, k: usize, stamps: &mut [u64]) {
        let r = &self.table.run[k];
        for (j, &slot) in self.table.slots[k][..r.len as usize].iter().enumerate() {
            debug_assert_eq!(stamps[slot as usize] >> RUN_SHIFT, k as u64 + 1);
            stamps[slot as usize] = r.base + j as u64;
        }
        self.table.run[k].len = 0;
        self.live &= !(1 << k);
    }

    /// Dissolves the run L2 slot `i` is in, if any: before its stamp or entry
    /// changes.
    #[inline(always)]
    pub(super) fn leave(&mut self, i: usize, stamps: &mut [u64]) {
        if self.live == 0 {
            return;
        }
        let r = stamps[i] >> RUN_SHIFT;
        if r != 0 {
            self.dissolve(r as usize - 1, stamps);
        }
    }

    /// Returns whether a slot of `stamps` (a set's) is in a run.
    #[inline(always)]
    pub(super) fn any_in(&self, stamps: &[u64]) -> bool {
        self.live != 0 && stamps.iter().fold(0, |m, &t| m | t) >> RUN_SHIFT != 0
    }

    /// Returns L2 slot `i`'s stamp: its own, or for a slot in a run the one
    /// the run gives its page.
    #[inline(always)]
    pub(super) fn stamp(&self, i: usize, l2: &L2) -> u64 {
        match l2.stamps[i] >> RUN_SHIFT {
            0 => l2.stamps[i],
            r => {
                let r = &self.table.run[r as usize - 1];
                r.base + ((l2.keys[i] >> 2) - r.first)
            }
        }
    }

    /// Returns how many of the `pages` pages from page number `page` a sweep
    /// under `asid` may take page by page: up to the first page of the next
    /// run under `asid`, which the sweep then tries to take whole. A run under
    /// `asid` that holds `page` but does not start there is dissolved: the
    /// page-by-page loop is about to stamp its slots. (A page's entry a sweep
    /// under `asid` uses is global or filled under `asid`, and a run holds no
    /// global entry: no other run can be in its way.)
    #[inline]
    pub(super) fn clear_of(&mut self, page: u64, pages: u64, asid: u16, stamps: &mut [u64]) -> u64 {
        let mut upto = pages;
        let mut live = self.live;
        while live != 0 {
            let k = live.trailing_zeros() as usize;
            live &= live - 1;
            let r = &self.table.run[k];
            if r.asid != asid {
                continue;
            }
            if r.first <= page && page < r.first + r.len as u64 {
                // (One that starts at `page` did not fit or meet the rule.)
                self.dissolve(k, stamps);
            } else if page < r.first && r.first - page < upto {
                upto = r.first - page;
            }
        }
        upto
    }
}

impl Tlb {
    /// Takes the runs that follow one another from page number `page`, whole,
    /// for as long as each starts where the last ended, fits in the `pages`
    /// pages and meets `rule` (a read: a write marks every page's PTE, which
    /// the page-by-page loop does); returns the pages translated. Each run's
    /// pages take the stamps the lookups one by one would give them (the next
    /// ticks of the clock, in page order) by a new `base`, and the last `L` of
    /// them are named in the ring of owed copies.
    #[inline]
    pub(super) fn sweep_runs(&mut self, page: u64, pages: u64, rule: &SweepRule) -> u64 {
        let mut done = 0;
        let l = self.l1.len();
        'next: while done < pages {
            let p = page + done;
            let mut live = self.runs.live;
            while live != 0 {
                let k = live.trailing_zeros() as usize;
                live &= live - 1;
                let table = &mut *self.runs.table;
                let r = &table.run[k];
                if r.first != p || r.asid != rule.asid {
                    continue;
                }
                let len = r.len as u64;
                if len > pages - done || r.uid != rule.uid || r.min_ver < rule.min_ver {
                    return done;
                }
                let d = self.l1.deferred_mut();
                let (n, len_us) = (d.n, r.len as usize);
                // The ring's positions of the named copies, in at most two pieces.
                let from = len_us.saturating_sub(l);
                let at = (n + from) % MAX_L1_ENTRIES;
                let head = (len_us - from).min(MAX_L1_ENTRIES - at);
                let named = &table.slots[k][from..len_us];
                d.slots[at..at + head].copy_from_slice(&named[..head]);
                d.slots[..named.len() - head].copy_from_slice(&named[head..]);
                d.n = n + len_us;
                table.run[k].base = self.clock + 1;
                self.clock += len;
                done += len;
                continue 'next;
            }
            break;
        }
        done
    }

    /// Makes the `pages` pages from page number `page`, just swept page by
    /// page under `asid`, a run, if they are enough and each is a non-global
    /// entry in a set of its own; the run's slot replaces the one made longest
    /// ago, which is dissolved.
    pub(super) fn make_run(&mut self, page: u64, pages: u64, asid: u16) {
        if pages < RUN_MIN || pages > RUN_MAX as u64 || pages > self.l2.sets as u64 {
            return;
        }
        let mut run =
            Run { first: page, len: pages as u32, asid, uid: 0, min_ver: u64::MAX, base: self.clock + 1 - pages };
        let mut slots = [0u32; RUN_MAX];
        for (j, slot) in slots[..pages as usize].iter_mut().enumerate() {
            let q = page + j as u64;
            let set = self.l2.set(q);
            let Some(i) = self.l2.usable(set.start, q << 2, asid) else {
                debug_assert!(false, "a swept page no longer in the L2");
                return;
            };
            let e = &self.l2.entries[i];
            if e.global() {
                return;
            }
            debug_assert_eq!(self.l2.stamps[i], run.base + j as u64, "a swept page's stamp out of order");
            run.uid = e.mm_uid;
            run.min_ver = run.min_ver.min(e.ver);
            *slot = i as u32;
        }
        let runs = &mut self.runs;
        let k = runs.table.next;
        runs.table.next = (k + 1) % RUNS;
        if runs.table.run[k].len > 0 {
            runs.dissolve(k, &mut self.l2.stamps);
        }
        let tag = (k as u64 + 1) << RUN_SHIFT;
        for &slot in &slots[..pages as usize] {
            self.l2.stamps[slot as usize] = tag;
        }
        runs.table.run[k] = run;
        runs.table.slots[k] = slots;
        runs.live |= 1 << k;
    }

    /// Dissolves the runs a fill of `e` into L2 slot `victim` changes, where a
    /// slot of its set is in one: the victim's, and for a global `e`, any
    /// whose slot in the set holds `e`'s key (`e` might come before it in the
    /// set, usable under its ASID; a non-global entry of the run's key and
    /// ASID is its duplicate, so its victim).
    #[inline(never)]
    pub(super) fn leave_runs_of_fill(&mut self, e: &TlbEntry, victim: usize) {
        self.runs.leave(victim, &mut self.l2.stamps);
        if e.global() {
            let base = self.l2.set_of(e.tag) * self.l2.ways;
            let k = key(e);
            for i in base..base + self.l2.ways {
                if self.l2.stamps[i] >> RUN_SHIFT != 0 && self.l2.keys[i] == k {
                    self.runs.leave(i, &mut self.l2.stamps);
                }
            }
        }
    }
}
