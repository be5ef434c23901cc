//! Invalidations (by VA, by ASID, of everything), on every level: each reads
//! only what can hold what it removes, by the summaries, the key index, the
//! sets of the address's tags and the ASID tag mirrors.

use super::entry::{equal_mask, keys_of, Inval, NO_ASID};
use super::summary::block_bucket;
use super::Tlb;
use crate::pagetable::{SHIFT_2M, SHIFT_4K, SHIFT_64K};

impl Tlb {
    /// Removes what `op` names from every level; returns how many TLB entries went.
    pub fn invalidate(&mut self, op: Inval) -> usize {
        let mut l1 = self.l1.settled(&self.l2, &mut self.summary);
        match op {
            Inval::Va { asid, .. } | Inval::Asid(asid) | Inval::AsidOfThread { asid, .. }
                if !self.summary.may_hold(asid) || !self.summary.asid_counted(asid) =>
            {
                return 0
            }
            _ => {}
        }
        // By VA, only an entry whose key is the 4 KB, 64 KB or 2 MB key of `va`
        // can go. Without 64 KB entries, only two keys and two L2 sets, as always.
        let conts = self.summary.conts;
        let keys = match op {
            Inval::Va { va, .. } | Inval::VaAll { va } => Some(keys_of(va, conts)),
            Inval::Asid(_) | Inval::All | Inval::AllNonGlobal | Inval::AsidOfThread { .. } | Inval::Thread { .. } => {
                None
            }
        };
        let n = if conts {
            l1.invalidate::<true>(op, keys, &mut self.summary) + self.invalidate_l2::<true>(op, keys)
        } else {
            l1.invalidate::<false>(op, keys, &mut self.summary) + self.invalidate_l2::<false>(op, keys)
        };
        match op {
            Inval::All => {
                self.summary.clear_asids();
                self.summary.conts = false;
            }
            // Global entries are not in the ASID filter.
            Inval::AllNonGlobal => self.summary.clear_asids(),
            // The other threads' entries stay: the filter and the flag with them.
            _ => {}
        }
        n
    }

    /// The L2's and the walk cache's part of [`Tlb::invalidate`]; returns how
    /// many L2 entries went. `keys`: as for [`super::l1::L1::invalidate`].
    #[inline]
    fn invalidate_l2<const CONT: bool>(&mut self, op: Inval, keys: Option<(u64, u64, u64)>) -> usize {
        if let Inval::Asid(a) | Inval::AsidOfThread { asid: a, .. } = op {
            let n = self.invalidate_l2_asid(op, a);
            self.pwc.invalidate(op, None, &mut self.summary);
            return n;
        }
        let mut n = 0;
        let other = |k: u64, (k4, k64, k2): (u64, u64, u64)| k != k4 && k != k2 && (!CONT || k != k64);
        // An entry sits in the L2 set its tag selects (see `fill`), so an operation
        // by VA need only scan the sets of its 4 KB, 64 KB (if any may be held) and
        // 2 MB tags.
        let (a, b, c) = match op {
            Inval::Va { va, .. } | Inval::VaAll { va } => (
                self.l2.set(va >> SHIFT_4K),
                self.l2.set(va >> SHIFT_2M),
                if CONT { self.l2.set(va >> SHIFT_64K) } else { 0..0 },
            ),
            Inval::All | Inval::AllNonGlobal | Inval::Thread { .. } => (0..self.l2.entries.len(), 0..0, 0..0),
            Inval::Asid(_) | Inval::AsidOfThread { .. } => unreachable!("removed by invalidate_l2_asid"),
        };
        let b = if b == a { 0..0 } else { b };
        let c = if c == a || c == b { 0..0 } else { c };
        for set in [a, b, c] {
            for i in set {
                if keys.is_some_and(|ks| other(self.l2.keys[i], ks)) {
                    continue;
                }
                let e = &self.l2.entries[i];
                if e.valid && op.removes(e) {
                    self.remove_l2(i);
                    n += 1;
                }
            }
        }
        self.pwc.invalidate(op, keys.map(|(_, _, k2)| k2 >> 2), &mut self.summary);
        n
    }

    /// Empties L2 slot `i`, which holds an entry, keeping the mirrors and the
    /// counts in step.
    #[inline]
    fn remove_l2(&mut self, i: usize) {
        self.runs.leave(i, &mut self.l2.stamps);
        let e = &mut self.l2.entries[i];
        e.valid = false;
        self.summary.blocks[block_bucket(e.block())] -= 1;
        self.l2.keys[i] = u64::MAX;
        self.summary.count_asid(self.l2.asids[i], false);
        self.l2.asids[i] = NO_ASID;
    }

    /// Removes the L2's non-global entries of `asid` that `op` removes (all of
    /// them, or one thread's): the slots whose tag mirror names it, found 64 at
    /// a time. Returns how many went.
    fn invalidate_l2_asid(&mut self, op: Inval, asid: u16) -> usize {
        let mut n = 0;
        let len = self.l2.asids.len();
        for c in 0..len.div_ceil(64) {
            let base = c * 64;
            let end = (base + 64).min(len);
            let mut m = equal_mask(&self.l2.asids[base..end], asid as u32);
            while m != 0 {
                let i = base + m.trailing_zeros() as usize;
                m &= m - 1;
                let e = &self.l2.entries[i];
                debug_assert!(e.valid && !e.global() && e.asid == asid);
                if op.removes(e) {
                    self.remove_l2(i);
                    n += 1;
                }
            }
        }
        n
    }
}
