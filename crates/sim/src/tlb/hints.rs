//! Hints to the host, none of which the simulation sees: prefetches of the
//! lines the next lookup, invalidation or kernel path will read, and the span
//! of host memory the TLBs allocated (for 2 MB host pages, see
//! [`crate::host`]).

use super::summary::asid_count_bucket;
use super::{asid_bucket, Tlb, TlbEntry};
use crate::host::span;
use crate::pagetable::{SHIFT_2M, SHIFT_4K};

/// Asks the host CPU to bring the cache lines of `bytes` bytes at `p` into its
/// cache: a hint with no effect on any result (a no-op on hosts other than
/// x86-64).
#[inline(always)]
pub(crate) fn prefetch_bytes<T: ?Sized>(p: *const T, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let p = p as *const u8;
        let mut off = 0;
        while off < bytes {
            // SAFETY: a prefetch reads nothing the program sees and cannot fault,
            // whatever the address.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.wrapping_add(off) as *const i8)
            };
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, bytes);
}

impl Tlb {
    /// Prefetches the lines a lookup reads first, whatever the address: the
    /// L1's key index and keys (1.5 KB). The L2 set and the L1 entry a lookup
    /// reads depend on the address, not known before the event runs.
    pub(crate) fn prefetch(&self) {
        self.l1.prefetch();
    }

    /// Prefetches what an invalidation by `asid` reads first: its word of the
    /// ASID filter and its exact count. A hint that reads nothing the
    /// simulation sees.
    pub(crate) fn prefetch_asid(&self, asid: u16) {
        prefetch_bytes(&self.summary.asids[asid_bucket(asid) / 64], 8);
        prefetch_bytes(&self.summary.asid_counts[asid_count_bucket(asid as u32)], 2);
    }

    /// Prefetches the L2 sets a lookup or fill of the `pages` 4 KB pages from
    /// `va` reads (keys, entries, stamps and ASID tags), and the set of their
    /// first 2 MB block: for a kernel path that is about to touch a few pages a
    /// large machine's TLB has long evicted from the host's cache. A hint that
    /// reads nothing the simulation sees.
    pub(crate) fn prefetch_l2(&self, va: u64, pages: u64) {
        let l2 = &self.l2;
        let ways = l2.ways;
        let sets = |first: usize, n: usize| {
            let (at, len) = (first * ways, n * ways);
            prefetch_bytes(l2.keys[at..].as_ptr(), len * 8);
            prefetch_bytes(l2.entries[at..].as_ptr(), len * std::mem::size_of::<TlbEntry>());
            prefetch_bytes(l2.stamps[at..].as_ptr(), len * 8);
            prefetch_bytes(l2.asids[at..].as_ptr(), len * 4);
        };
        let first = l2.set_of(va >> SHIFT_4K);
        let n = (pages as usize).min(l2.sets);
        let head = n.min(l2.sets - first);
        sets(first, head);
        if head < n {
            sets(0, n - head);
        }
        sets(l2.set_of(va >> SHIFT_2M), 1);
    }

    /// Returns the lowest address of the host memory the TLBs allocated (their
    /// entries, mirrors, indexes and counts) and the address just past the
    /// highest: what [`crate::host`] is asked to back with 2 MB pages.
    pub(crate) fn heap_bounds(&self) -> (usize, usize) {
        let l2 = &self.l2;
        let s = &self.summary;
        crate::host::hull(self.l1.heap_spans().into_iter().chain([
            span(&l2.entries),
            span(&l2.stamps),
            span(&l2.keys),
            span(&l2.asids),
            span(&self.pwc.entries),
            span(&self.pwc.asids),
            span(&self.pwc.slots.keys),
            span(&self.pwc.slots.index[..]),
            span(&s.asids[..]),
            span(&s.blocks[..]),
            span(&s.asid_counts[..]),
        ]))
    }
}
