//! Which CPUs' TLBs may hold what a broadcast invalidation removes, so that the
//! interconnect delivers a DVM message to those TLBs only.
//!
//! Why: a broadcast reaches every CPU, and visiting every TLB per message made
//! the simulator's time grow with the square of the CPUs (at 4096 CPUs, nearly
//! all of it). A TLB that holds nothing a message removes is left as it was
//! whether or not the message visits it, so visiting fewer changes no result.
//!
//! Two tables of CPU sets, one per bucket of [`Tlb`]'s ASID filter
//! ([`asid_bucket`]) and one per bucket of its per-2 MB-block counts
//! ([`block_bucket`]). A CPU joins a set whenever its TLB is filled with an entry
//! of that bucket ([`Holders::filled`]), and leaves it when a visit finds that the
//! TLB holds nothing of the bucket any more ([`Tlb::may_hold`],
//! [`Tlb::may_hold_block`]).
//!
//! # What is guaranteed
//! A CPU whose TLB may hold a non-global entry under an ASID of bucket `a` is in
//! the ASID set `a`; one whose TLB holds an entry (of any level) in a block of
//! bucket `b` is in the block set `b`. The sets are supersets: a CPU whose entries
//! went by local invalidation or eviction stays in them until a visit prunes it.
//! Hence [`Holders::candidates`] never leaves out a TLB an invalidation would
//! change. This holds only if every fill goes through [`crate::machine::Machine::fill`]
//! or [`crate::machine::Machine::pwc_fill`]; debug builds check it at every
//! broadcast.
//!
//! [`Tlb`]: crate::tlb::Tlb
//! [`Tlb::may_hold`]: crate::tlb::Tlb::may_hold
//! [`Tlb::may_hold_block`]: crate::tlb::Tlb::may_hold_block

use crate::pagetable::SHIFT_2M;
use crate::tlb::{asid_bucket, block_bucket, Inval, ASID_BUCKETS, BLOCK_BUCKETS};

/// Per bucket, the set of CPUs whose TLBs may hold entries of it.
pub struct Holders {
    /// 64-bit words per CPU set.
    words: usize,
    /// `ASID_BUCKETS` sets, `words` words each.
    by_asid: Vec<u64>,
    /// `BLOCK_BUCKETS` sets, `words` words each.
    by_block: Vec<u64>,
}

/// Which sets a TLB a visit found may still be in.
#[derive(Clone, Copy, Debug)]
pub struct Still {
    /// The TLB may still hold entries of the operation's ASID bucket.
    pub asid: bool,
    /// The TLB may still hold entries of the operation's block bucket.
    pub block: bool,
}

impl Holders {
    /// Returns empty sets for `ncpus` CPUs.
    pub fn new(ncpus: usize) -> Self {
        let words = ncpus.div_ceil(64);
        Holders { words, by_asid: vec![0; ASID_BUCKETS * words], by_block: vec![0; BLOCK_BUCKETS * words] }
    }

    /// Records that `cpu`'s TLB was filled with an entry in the 2 MB block of `va`,
    /// non-global under `asid` if one is given.
    #[inline]
    pub fn filled(&mut self, cpu: usize, asid: Option<u16>, va: u64) {
        let (w, bit) = (cpu / 64, 1u64 << (cpu % 64));
        if let Some(a) = asid {
            self.by_asid[asid_bucket(a) * self.words + w] |= bit;
        }
        self.by_block[block_bucket(va >> SHIFT_2M) * self.words + w] |= bit;
    }

    /// Calls `visit` with every CPU whose TLB may hold something `op` removes (every
    /// CPU for [`Inval::All`], in increasing order); `visit` invalidates and says
    /// what the TLB may still hold, and a CPU that holds nothing of a bucket any
    /// more leaves that bucket's set.
    pub fn candidates(&mut self, ncpus: usize, op: Inval, mut visit: impl FnMut(usize) -> Still) {
        let words = self.words;
        let (asid, block) = match op {
            Inval::Va { asid, va } => (Some(asid_bucket(asid) * words), Some(block_bucket(va >> SHIFT_2M) * words)),
            Inval::VaAll { va } => (None, Some(block_bucket(va >> SHIFT_2M) * words)),
            Inval::Asid(asid) => (Some(asid_bucket(asid) * words), None),
            Inval::All | Inval::AllNonGlobal => {
                for cpu in 0..ncpus {
                    visit(cpu);
                }
                return;
            }
        };
        for w in 0..words {
            let a = asid.map_or(u64::MAX, |a| self.by_asid[a + w]);
            let b = block.map_or(u64::MAX, |b| self.by_block[b + w]);
            let mut set = a & b;
            while set != 0 {
                let bit = set & set.wrapping_neg();
                set &= set - 1;
                let still = visit(w * 64 + bit.trailing_zeros() as usize);
                if let (Some(a), false) = (asid, still.asid) {
                    self.by_asid[a + w] &= !bit;
                }
                if let (Some(b), false) = (block, still.block) {
                    self.by_block[b + w] &= !bit;
                }
            }
        }
    }

    /// Returns whether `cpu` is among the candidates of `op` (for debug checks).
    pub fn is_candidate(&self, cpu: usize, op: Inval) -> bool {
        let (w, bit) = (cpu / 64, 1u64 << (cpu % 64));
        let in_asid = |a: u16| self.by_asid[asid_bucket(a) * self.words + w] & bit != 0;
        let in_block = |va: u64| self.by_block[block_bucket(va >> SHIFT_2M) * self.words + w] & bit != 0;
        match op {
            Inval::Va { asid, va } => in_asid(asid) && in_block(va),
            Inval::VaAll { va } => in_block(va),
            Inval::Asid(asid) => in_asid(asid),
            Inval::All | Inval::AllNonGlobal => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn visited(h: &mut Holders, n: usize, op: Inval, still: Still) -> Vec<usize> {
        let mut v = Vec::new();
        h.candidates(n, op, |c| {
            v.push(c);
            still
        });
        v
    }

    const GONE: Still = Still { asid: false, block: false };
    const KEPT: Still = Still { asid: true, block: true };

    #[test]
    fn a_broadcast_visits_only_cpus_filled_with_its_asid_and_block() {
        let mut h = Holders::new(130);
        h.filled(3, Some(7), 0x4000_0000);
        h.filled(129, Some(7), 0x8000_0000);
        h.filled(64, None, 0x4000_1000);
        assert_eq!(visited(&mut h, 130, Inval::Asid(7), KEPT), vec![3, 129]);
        assert_eq!(visited(&mut h, 130, Inval::Va { asid: 7, va: 0x4000_2000 }, KEPT), vec![3]);
        assert_eq!(visited(&mut h, 130, Inval::VaAll { va: 0x4000_0000 }, KEPT), vec![3, 64]);
        assert_eq!(visited(&mut h, 130, Inval::All, KEPT).len(), 130);
    }

    #[test]
    fn a_cpu_that_holds_nothing_more_leaves_the_set_until_filled_again() {
        let mut h = Holders::new(4);
        h.filled(2, Some(5), 0x1000);
        assert_eq!(visited(&mut h, 4, Inval::Asid(5), GONE), vec![2]);
        assert!(visited(&mut h, 4, Inval::Asid(5), KEPT).is_empty());
        assert_eq!(visited(&mut h, 4, Inval::VaAll { va: 0x1000 }, KEPT), vec![2], "only the ASID set was pruned");
        h.filled(2, Some(5), 0x1000);
        assert!(h.is_candidate(2, Inval::Va { asid: 5, va: 0x1000 }));
    }
}
