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
///
/// Each set is `words` 64-bit words, and has a summary of `sums` words (bit `w`
/// of it for word `w` of the set), which is set whenever word `w` gains a CPU
/// and cleared when a visit empties it: a superset of the set's non-empty
/// words. A broadcast reads the summary and then the words it names, not the
/// whole set: at 4096 CPUs a set is 64 words (eight cache lines) of which one
/// or two are usually non-empty.
pub struct Holders {
    /// 64-bit words per CPU set.
    words: usize,
    /// 64-bit words per summary.
    sums: usize,
    /// `ASID_BUCKETS` sets, `words` words each.
    by_asid: Vec<u64>,
    /// `BLOCK_BUCKETS` sets, `words` words each.
    by_block: Vec<u64>,
    /// `ASID_BUCKETS` summaries, `sums` words each.
    asid_sums: Vec<u64>,
    /// `BLOCK_BUCKETS` summaries, `sums` words each.
    block_sums: Vec<u64>,
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
        let sums = words.div_ceil(64);
        Holders {
            words,
            sums,
            by_asid: vec![0; ASID_BUCKETS * words],
            by_block: vec![0; BLOCK_BUCKETS * words],
            asid_sums: vec![0; ASID_BUCKETS * sums],
            block_sums: vec![0; BLOCK_BUCKETS * sums],
        }
    }

    /// Records that `cpu`'s TLB was filled with an entry in the 2 MB block of `va`,
    /// non-global under `asid` if one is given.
    #[inline(always)]
    pub fn filled(&mut self, cpu: usize, asid: Option<u16>, va: u64) {
        let (w, bit) = (cpu / 64, 1u64 << (cpu % 64));
        // Usually the CPU is in both sets already and nothing is written.
        if let Some(a) = asid {
            let a = asid_bucket(a);
            let word = &mut self.by_asid[a * self.words + w];
            if *word & bit == 0 {
                *word |= bit;
                self.asid_sums[a * self.sums + w / 64] |= 1 << (w % 64);
            }
        }
        let b = block_bucket(va >> SHIFT_2M);
        let word = &mut self.by_block[b * self.words + w];
        if *word & bit == 0 {
            *word |= bit;
            self.block_sums[b * self.sums + w / 64] |= 1 << (w % 64);
        }
    }

    /// Calls `visit` with every CPU whose TLB may hold something `op` removes (every
    /// CPU for [`Inval::All`], in increasing order); `visit` invalidates and says
    /// what the TLB may still hold, and a CPU that holds nothing of a bucket any
    /// more leaves that bucket's set.
    pub fn candidates(&mut self, ncpus: usize, op: Inval, mut visit: impl FnMut(usize) -> Still) {
        let (words, sums) = (self.words, self.sums);
        let (asid, block) = match op {
            Inval::Va { asid, va } => (Some(asid_bucket(asid)), Some(block_bucket(va >> SHIFT_2M))),
            Inval::VaAll { va } => (None, Some(block_bucket(va >> SHIFT_2M))),
            Inval::Asid(asid) | Inval::AsidOfThread { asid, .. } => (Some(asid_bucket(asid)), None),
            Inval::All | Inval::AllNonGlobal | Inval::Thread { .. } => {
                for cpu in 0..ncpus {
                    visit(cpu);
                }
                return;
            }
        };
        for sw in 0..sums {
            let sa = asid.map_or(u64::MAX, |a| self.asid_sums[a * sums + sw]);
            let sb = block.map_or(u64::MAX, |b| self.block_sums[b * sums + sw]);
            // The words both sets may have CPUs in, in increasing order.
            let mut named = sa & sb;
            while named != 0 {
                let w = sw * 64 + named.trailing_zeros() as usize;
                named &= named - 1;
                let a = asid.map_or(u64::MAX, |a| self.by_asid[a * words + w]);
                let b = block.map_or(u64::MAX, |b| self.by_block[b * words + w]);
                let mut set = a & b;
                while set != 0 {
                    let bit = set & set.wrapping_neg();
                    set &= set - 1;
                    let still = visit(w * 64 + bit.trailing_zeros() as usize);
                    if let (Some(a), false) = (asid, still.asid) {
                        self.by_asid[a * words + w] &= !bit;
                    }
                    if let (Some(b), false) = (block, still.block) {
                        self.by_block[b * words + w] &= !bit;
                    }
                }
                // A word left empty leaves its summary.
                let sbit = 1u64 << (w % 64);
                if let Some(a) = asid {
                    if self.by_asid[a * words + w] == 0 {
                        self.asid_sums[a * sums + sw] &= !sbit;
                    }
                }
                if let Some(b) = block {
                    if self.by_block[b * words + w] == 0 {
                        self.block_sums[b * sums + sw] &= !sbit;
                    }
                }
            }
        }
    }

    /// Records what a visit of `cpu` for `op` outside [`Holders::candidates`]
    /// found (an invalidation applied when it reached the CPU,
    /// [`crate::pending`]): a CPU that holds nothing of a bucket any more
    /// leaves that bucket's set.
    pub fn visited(&mut self, cpu: usize, op: Inval, still: Still) {
        let (words, sums) = (self.words, self.sums);
        let (w, bit) = (cpu / 64, 1u64 << (cpu % 64));
        let sbit = 1u64 << (w % 64);
        let (asid, block) = match op {
            Inval::Va { asid, va } => (Some(asid_bucket(asid)), Some(block_bucket(va >> SHIFT_2M))),
            Inval::VaAll { va } => (None, Some(block_bucket(va >> SHIFT_2M))),
            Inval::Asid(asid) | Inval::AsidOfThread { asid, .. } => (Some(asid_bucket(asid)), None),
            Inval::All | Inval::AllNonGlobal | Inval::Thread { .. } => return,
        };
        if let (Some(a), false) = (asid, still.asid) {
            let word = &mut self.by_asid[a * words + w];
            *word &= !bit;
            if *word == 0 {
                self.asid_sums[a * sums + w / 64] &= !sbit;
            }
        }
        if let (Some(b), false) = (block, still.block) {
            let word = &mut self.by_block[b * words + w];
            *word &= !bit;
            if *word == 0 {
                self.block_sums[b * sums + w / 64] &= !sbit;
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
            Inval::Asid(asid) | Inval::AsidOfThread { asid, .. } => in_asid(asid),
            Inval::All | Inval::AllNonGlobal | Inval::Thread { .. } => true,
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
    fn a_set_beyond_64_words_is_found_through_its_summary() {
        // 5000 CPUs: 79 words a set, two summary words.
        let mut h = Holders::new(5000);
        for cpu in [0, 63, 64, 4095, 4096, 4999] {
            h.filled(cpu, Some(9), 0x7000_0000);
        }
        h.filled(4200, Some(10), 0x7000_0000);
        assert_eq!(visited(&mut h, 5000, Inval::Asid(9), KEPT), vec![0, 63, 64, 4095, 4096, 4999]);
        assert_eq!(visited(&mut h, 5000, Inval::VaAll { va: 0x7000_0000 }, KEPT).len(), 7);
        // Emptied words leave the summary; a later fill brings them back.
        assert_eq!(visited(&mut h, 5000, Inval::Asid(9), GONE).len(), 6);
        assert!(visited(&mut h, 5000, Inval::Asid(9), KEPT).is_empty());
        assert_eq!(h.asid_sums[asid_bucket(9) * h.sums..][..2], [0, 0]);
        h.filled(4999, Some(9), 0x1000);
        assert_eq!(visited(&mut h, 5000, Inval::Va { asid: 9, va: 0x1000 }, KEPT), vec![4999]);
        assert_eq!(visited(&mut h, 5000, Inval::Va { asid: 10, va: 0x7000_0000 }, KEPT), vec![4200]);
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
