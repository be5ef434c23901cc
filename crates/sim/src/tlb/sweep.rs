//! The fast path for a run of consecutive pages that miss the L1 and hit the
//! L2 (the steady state of a loop over more pages than the L1 holds):
//! [`Tlb::sweep`] probes the L2 and moves its LRU stamps page by page as a
//! lookup does, takes runs swept before whole ([`super::runs`]), and owes the
//! L1 its copies instead of making them ([`super::deferred`]).

use super::l1::L1_SCAN_MIN;
use super::l2::first_usable;
use super::slots::MAX_L1_ENTRIES;
use super::{Tlb, TlbEntry, F_WRITE};
use crate::pagetable::SHIFT_4K;

/// What the oracle and the access require of every entry [`Tlb::sweep`] uses;
/// the sweep stops at the first page whose entry falls short, so that the
/// caller's general path judges it (and reports what it must).
#[derive(Clone, Copy, Debug)]
pub struct SweepRule {
    /// The ASID the CPU runs with.
    pub asid: u16,
    /// The address space the CPU translates user addresses for: an entry filled
    /// from another is an alias (`no_asid_alias`).
    pub uid: u32,
    /// `crate::pagetable::PageTables::max_floor`: an entry of a PTE version at
    /// least this cannot be stale (`no_stale_use`).
    pub min_ver: u64,
    /// Whether the access writes: the entry must allow writes.
    pub write: bool,
}

/// What a sweep asks of each page at every level of [`Tlb::sweep`]: the rule
/// its entry must pass, and the caller's `used`, called with each entry the
/// sweep uses. The levels hand the one value down with the pages they pass on.
struct Sweeper<'r, F> {
    rule: &'r SweepRule,
    used: F,
}

impl Tlb {
    /// Translates up to `pages` consecutive 4 KB pages from `va` (page-aligned)
    /// for as long as each misses the L1 and hits a 4 KB entry in the L2 that
    /// `rule` accepts, exactly as [`Tlb::lookup_entry`] would one page after the
    /// other, and returns how many pages it translated. It calls `used` with
    /// each entry it uses, in page order, but for the pages of a run swept
    /// before and taken whole (a read's: a write calls it for every page). It
    /// stops, changing nothing for that page, at the first page the L1 holds
    /// (the L1 as the run of copies owed found it, see `deferred.rs`), the L2
    /// has no 4 KB entry for, or whose entry `rule` refuses: the caller's
    /// general path takes that page.
    ///
    /// The L2 stamps move and the clock ticks as the lookups would; the L1
    /// copies are deferred. While 64 KB entries may be held it translates
    /// nothing.
    #[inline]
    pub fn sweep(&mut self, va: u64, pages: u64, rule: &SweepRule, used: impl FnMut(&TlbEntry)) -> u64 {
        if self.summary.conts {
            return 0;
        }
        let page = va >> SHIFT_4K;
        if self.l1.owes() && !self.continues_run(page, rule.asid) {
            self.l1.settle_run(&self.l2, &mut self.summary);
        }
        let by = &mut Sweeper { rule, used };
        // The set's ways known to the compiler where they are a preset's.
        let done = match self.l2.ways {
            4 => self.sweep_ways::<4>(page, pages, by),
            8 => self.sweep_ways::<8>(page, pages, by),
            _ => self.sweep_ways::<0>(page, pages, by),
        };
        self.end_sweep(page, done, rule)
    }

    /// Returns whether copies owed may go on after page number `page` under
    /// `asid`: `page` is the run's next page and no 64 KB entry may be held.
    #[inline]
    pub(super) fn continues_run(&self, page: u64, asid: u16) -> bool {
        let d = self.l1.deferred();
        !self.summary.conts && d.next_page == page && d.asid == asid
    }

    /// [`Tlb::sweep`] from page number `page`; `WAYS`: the L2's ways, or 0
    /// where the caller does not know them.
    #[inline(always)]
    fn sweep_ways<const WAYS: usize>(
        &mut self,
        page: u64,
        pages: u64,
        by: &mut Sweeper<'_, impl FnMut(&TlbEntry)>,
    ) -> u64 {
        debug_assert!(!self.summary.conts);
        let rule = by.rule;
        // Each page is checked against the L1 as the run found it until the
        // run owes a copy for every slot (one a page): then none of it is left.
        // The first page it holds stops the sweep.
        let l = self.l1.len() as u64;
        let checked = pages.min(l.saturating_sub(self.l1.deferred().n as u64));
        // A first page the L1 holds ends the sweep at once, as does one the L2
        // cannot give: either way nothing is swept, so which is asked first
        // changes nothing but the host's time. A short sweep asks the L1
        // first: its key index and keys are what `Sim::prefetch_upcoming`
        // fetches ahead at thousands of CPUs, where the L2 set is cold, and
        // short sweeps (a small buffer read again and again) often find their
        // first page in the L1. A long one asks the L2 first, which spares its
        // pass over the L1 where the L2 misses. (Where the L1 does not hold
        // the first page, `clear_pages` below probes it again: one probe
        // of about 34 instructions, on short sweeps only.)
        if pages < L1_SCAN_MIN && checked > 0 && self.l1.clear_pages(page, 1, rule.asid) == 0 {
            return 0;
        }
        if self.l2.usable(self.l2.set(page).start, page << 2, rule.asid).is_none() {
            return 0;
        }
        let clear = self.l1.clear_pages(page, checked, rule.asid);
        let limit = if clear < checked { clear } else { pages };
        // Runs swept before, whole, and the pages between them page by page
        // (each such stretch made a run for the next sweep).
        let mut done = 0;
        loop {
            if !rule.write {
                done += self.sweep_runs(page + done, limit - done, rule);
            }
            if done == limit {
                return done;
            }
            let p = page + done;
            let upto = self.runs.clear_of(p, limit - done, rule.asid, &mut self.l2.stamps);
            let swept = self.sweep_pages::<WAYS>(p, upto, by);
            if !rule.write {
                self.make_run(p, swept, rule.asid);
            }
            done += swept;
            if swept < upto || done == limit {
                return done;
            }
        }
    }

    /// The page-by-page part of [`Tlb::sweep_ways`]: up to `pages` pages from
    /// page number `page`, none of which the L1 holds and none in a run.
    ///
    /// Only the copies of the last `L` pages can survive: the loop owes those
    /// before the last `L` pages without naming their L2 slots. Where it stops
    /// short, the ones among the last `L` copies after all are named after it,
    /// by the loop's own probe (nothing it reads has changed since).
    #[inline(always)]
    fn sweep_pages<const WAYS: usize>(
        &mut self,
        page: u64,
        pages: u64,
        by: &mut Sweeper<'_, impl FnMut(&TlbEntry)>,
    ) -> u64 {
        let l = self.l1.len() as u64;
        let quiet = pages.saturating_sub(l);
        let n = self.l1.deferred().n;
        let mid = self.sweep_l2::<WAYS, false>(page, quiet, by);
        let last = if mid == quiet { self.sweep_l2::<WAYS, true>(page + mid, pages - mid, by) } else { 0 };
        for t in mid - l.saturating_sub(last).min(mid)..mid {
            let q = page + t;
            let found = self.l2.usable(self.l2.set(q).start, q << 2, by.rule.asid);
            debug_assert!(found.is_some(), "a swept page no longer in the L2");
            self.l1.deferred_mut().slots[(n + t as usize) % MAX_L1_ENTRIES] = found.unwrap_or(0) as u32;
        }
        mid + last
    }

    /// Records where a sweep from page `page` that translated `done` pages
    /// leaves the run (nothing, if it translated none); returns `done`.
    #[inline(always)]
    fn end_sweep(&mut self, page: u64, done: u64, rule: &SweepRule) -> u64 {
        if done > 0 {
            let d = self.l1.deferred_mut();
            d.asid = rule.asid;
            d.next_page = page + done;
        }
        done
    }

    /// The loop of [`Tlb::sweep`], for up to `pages` pages from page number
    /// `page`: each page's 4 KB entry (the first usable way of its set, as
    /// [`L2::usable`](super::l2::L2::usable) finds it) must pass `rule`; its
    /// stamp moves and its L1 copy is owed, its L2 slot written to the ring
    /// with `NAMED` (without, the caller names the slots of the copies that
    /// can survive). Returns the pages translated. `WAYS`: the L2's ways where
    /// the caller knows them (then the compiler does too), else 0. No slot it
    /// stamps is in a run ([`super::runs::Runs`]): the caller dissolved those
    /// first.
    #[inline(always)]
    fn sweep_l2<const WAYS: usize, const NAMED: bool>(
        &mut self,
        page: u64,
        pages: u64,
        by: &mut Sweeper<'_, impl FnMut(&TlbEntry)>,
    ) -> u64 {
        let rule = by.rule;
        let l2 = &mut self.l2;
        let ways = if WAYS == 0 { l2.ways } else { WAYS };
        let d = self.l1.deferred_mut();
        let (mut clock, mut n) = (self.clock, d.n);
        let mut done = 0;
        // Consecutive pages fall in consecutive sets: from the first page's set
        // to the last set, then from set 0 on.
        let mut from = l2.set_of(page);
        'run: while done < pages {
            // The sets from `from` on, to the last or as far as pages are left.
            let span = (l2.sets - from).min((pages - done) as usize);
            let (at, end) = (from * ways, (from + span) * ways);
            let keys = l2.keys[at..end].chunks_exact(ways);
            let entries = l2.entries[at..end].chunks_exact(ways);
            let stamps = l2.stamps[at..end].chunks_exact_mut(ways);
            let mut base = at;
            for ((keys, entries), stamps) in keys.zip(entries).zip(stamps) {
                let p = page + done;
                let Some(w) = first_usable(keys, entries, p << 2, rule.asid) else {
                    break 'run;
                };
                let e = &entries[w];
                if e.mm_uid != rule.uid || e.ver < rule.min_ver || (rule.write && e.flags & F_WRITE == 0) {
                    break 'run;
                }
                debug_assert!(!super::runs::in_run(stamps[w]), "the page-by-page sweep stamps a slot of a run");
                (by.used)(e);
                clock += 1;
                stamps[w] = clock;
                if NAMED {
                    d.slots[n % MAX_L1_ENTRIES] = (base + w) as u32;
                }
                n += 1;
                done += 1;
                base += ways;
            }
            from = 0;
        }
        self.clock = clock;
        d.n = n;
        done
    }
}
