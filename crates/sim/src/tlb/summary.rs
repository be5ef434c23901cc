//! What a TLB may hold, said cheaply, so that an invalidation (and the
//! interconnect, which delivers a broadcast only to TLBs that may hold what it
//! removes, see [`crate::holders`]) can skip a TLB that holds nothing of it: a
//! filter of the ASIDs non-global entries were filled under, exact counts of
//! entries per ASID bucket and per 2 MB-block bucket, and whether a 64 KB entry
//! may be held. Every answer errs only towards "may hold".

/// Words of the ASID filter.
const ASID_FILTER_WORDS: usize = 64;

/// Buckets of the ASID filter: [`asid_bucket`] takes values below this.
pub const ASID_BUCKETS: usize = 64 * ASID_FILTER_WORDS;

/// Buckets of the per-block counts: [`block_bucket`] takes values below this.
pub const BLOCK_BUCKETS: usize = 1024;

/// Buckets of the exact per-ASID counts.
pub(super) const ASID_COUNT_BUCKETS: usize = 256;

/// Returns the bucket of the ASID filter `asid` falls in.
pub fn asid_bucket(asid: u16) -> usize {
    asid as usize % ASID_BUCKETS
}

/// Returns the bucket 2 MB block number `block` (`va >> 21`) is counted in: a
/// Fibonacci hash, so that blocks at the same offset of distant regions (kernel
/// text, kernel heap, the kernel map pool, user mappings) rarely share a bucket.
pub fn block_bucket(block: u64) -> usize {
    (block.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - BLOCK_BUCKETS.trailing_zeros())) as usize
}

/// Returns the bucket of the per-ASID counts an ASID tag falls in.
#[inline(always)]
pub(super) fn asid_count_bucket(tag: u32) -> usize {
    tag as usize % ASID_COUNT_BUCKETS
}

/// The summaries of what one core's TLBs (every level: L1, L2, walk cache) hold.
#[derive(Clone)]
pub(super) struct Summary {
    /// A filter of the ASIDs non-global entries were filled under (bit
    /// [`asid_bucket`]), cleared only when everything is invalidated: an
    /// invalidation for an ASID whose bit is clear has nothing to remove and skips
    /// the scan.
    pub(super) asids: Box<[u64; ASID_FILTER_WORDS]>,
    /// Valid entries of every level by [`block_bucket`] of their 2 MB block: a
    /// bucket at zero holds nothing an invalidation by VA in one of its blocks
    /// could remove. (A fixed-size array: a bucket indexes it with no check.)
    pub(super) blocks: Box<[u16; BLOCK_BUCKETS]>,
    /// Whether a 64 KB entry may be held: set by the first such fill, cleared
    /// when everything is invalidated. Until then lookups and invalidations do
    /// not probe for that size, so a run without contiguous PTEs pays nothing
    /// for it.
    pub(super) conts: bool,
    /// Valid non-global entries of every level by [`asid_count_bucket`] of their
    /// ASID, exact (unlike the filter): an invalidation by ASID whose bucket is at
    /// zero has nothing to remove and reads no slot. A TLB the interconnect
    /// still delivers to because its filter says "may hold" (an mm flushed
    /// again and again while running elsewhere or nowhere) costs one read.
    pub(super) asid_counts: Box<[u16; ASID_COUNT_BUCKETS]>,
}

impl Summary {
    /// Returns the summaries of empty TLBs.
    pub(super) fn new() -> Self {
        Summary {
            asids: Box::new([0; ASID_FILTER_WORDS]),
            blocks: Box::new([0; BLOCK_BUCKETS]),
            conts: false,
            asid_counts: Box::new([0; ASID_COUNT_BUCKETS]),
        }
    }

    /// Counts a valid entry into (`up`) or out of its block's bucket.
    #[inline]
    pub(super) fn count_block(&mut self, block: u64, up: bool) {
        let c = &mut self.blocks[block_bucket(block)];
        if up {
            *c += 1;
        } else {
            debug_assert!(*c > 0, "block bucket count underflow");
            *c -= 1;
        }
    }

    /// Counts an entry of ASID tag `tag` ([`super::entry::asid_tag`];
    /// [`NO_ASID`](super::entry::NO_ASID) is not counted) into (`up`) or out of
    /// its bucket.
    #[inline]
    pub(super) fn count_asid(&mut self, tag: u32, up: bool) {
        if tag == super::entry::NO_ASID {
            return;
        }
        let c = &mut self.asid_counts[asid_count_bucket(tag)];
        if up {
            *c += 1;
        } else {
            debug_assert!(*c > 0, "asid bucket count underflow");
            *c -= 1;
        }
    }

    /// Returns whether a valid non-global entry of `asid` may be held, by the
    /// exact counts (false: certainly none).
    #[inline]
    pub(super) fn asid_counted(&self, asid: u16) -> bool {
        self.asid_counts[asid_count_bucket(asid as u32)] > 0
    }

    /// Records in the filter that a non-global entry of `asid` was filled.
    pub(super) fn note_asid(&mut self, asid: u16) {
        let b = asid_bucket(asid);
        self.asids[b / 64] |= 1 << (b % 64);
    }

    /// Empties the ASID filter: no non-global entry is held any more.
    pub(super) fn clear_asids(&mut self) {
        *self.asids = [0; ASID_FILTER_WORDS];
    }

    /// Returns whether a non-global entry tagged `asid` may be held (at any level).
    pub(super) fn may_hold(&self, asid: u16) -> bool {
        let b = asid_bucket(asid);
        self.asids[b / 64] & (1 << (b % 64)) != 0
    }

    /// Returns whether an entry in 2 MB block `block` may be held.
    pub(super) fn may_hold_block(&self, block: u64) -> bool {
        self.blocks[block_bucket(block)] > 0
    }
}
