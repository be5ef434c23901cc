//! What a node knows of the states other nodes own: for each, an upper
//! bound of its mask in its owner's table, from what the node's workers
//! claimed of it.
//!
//! A state's mask in its owner's table only narrows (each visit keeps the
//! labels both it and the earlier ones left asleep). So after a claim of a
//! state with `asleep`, the owner's mask is within `asleep` for good, and a
//! later visit that leaves at least those labels asleep would be answered
//! "nothing to explore": it is pruned at once, without a claim; one that
//! does not leaves alone the labels outside the bound, which the earlier
//! claims explore (or explored). Any worker of the node may rely on any
//! other's claim: the owner admits labels for the claim that came first,
//! and that claim's worker explores them. Nothing here is needed for the
//! search to be whole: a state forgotten is claimed again.
//!
//! # Layout
//!
//! A direct-mapped cache of one word a slot, shared by the node's workers,
//! so that a reader never sees half of a write: the state's 64 bits less
//! the ones its slot's number gives, the bound (16 labels at most) and a
//! bit that says the slot is used. Two workers that write one slot at once
//! keep one of their two words, each a bound of its state's mask.
//!
//! A slot names its state by 64 bits of its hash (the slot's number and 46
//! more), so a visit of a state the cache does not hold takes another
//! state's bound with odds of at most 2^-46: 1.4 × 10^-4 over 10^10 visits
//! of other nodes' states, beside the visited set's own fingerprint
//! collisions (`table.rs`), which the report estimates.
//!
//! Each worker had a cache of its own, of 2^16 slots of 16 bytes (a state
//! and its bound, 1 MiB a worker). One node's, shared, did better in the
//! same memory (two in-process nodes of `arm64-linux` 1.05 times `--jobs
//! 2`'s executions where the workers' own ran 1.07; with four workers a
//! node 1.08 where they ran 1.12-1.14); how much it holds is what counts:
//! at 2^17, 2^18, 2^19 and 2^20 words (1 to 8 MiB) two nodes ran 1.06,
//! 1.05, 1.04 and 1.04 times (`x86-linux-410`), 1.05, 1.03-1.04, 1.02 and
//! 1.02 (`arm64-linux`). It has 2^18 (2 MiB a node), where the gains of a
//! further doubling fall to a percent or two
//! (`bench/2026-12-05-check-sharded-known.md`).

use super::ALL_LABELS;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// `log2` of the slots: 2^18 words, 2 MiB a node (see the module
/// documentation).
const SLOT_BITS: u32 = 18;
/// The slots of a node's [`Known`].
const KNOWN_SLOTS: usize = 1 << SLOT_BITS;
/// Where the slot's number lies in a state's hash (its low bits pick the
/// owner and the table's part; these are free of both: XXH3 mixes them).
const SLOT_SHIFT: u32 = 40;
/// Bits of a slot below the state's: the bound's 16, then the used bit.
const STATE_SHIFT: u32 = 17;
const _: () = assert!(ALL_LABELS < 1 << (STATE_SHIFT - 1), "a bound fits below the state's bits");
const _: () = assert!(STATE_SHIFT <= SLOT_BITS, "the state's 64 - SLOT_BITS bits fit above the bound");

/// A node's cache of bounds of other nodes' states' masks (see the module
/// documentation).
pub(super) struct Known {
    slots: Box<[AtomicU64]>,
}

impl Known {
    pub(super) fn new() -> Known {
        Known { slots: (0..KNOWN_SLOTS).map(|_| AtomicU64::new(0)).collect() }
    }

    /// The slot of `state`, and the word that names it there with `bound`.
    fn place(&self, state: u64, bound: u64) -> (&AtomicU64, u64) {
        let i = (state >> SLOT_SHIFT) as usize & (KNOWN_SLOTS - 1);
        // The hash's other 46 bits, the bound, the used bit.
        let low = state & ((1 << SLOT_SHIFT) - 1);
        let rest = low | (state >> (SLOT_SHIFT + SLOT_BITS)) << SLOT_SHIFT;
        (&self.slots[i], rest << STATE_SHIFT | (bound & ALL_LABELS) << 1 | 1)
    }

    /// The bound a slot's word `w` holds for the state of `word`, if it
    /// holds that state.
    fn bound(w: u64, word: u64) -> Option<u64> {
        (w >> STATE_SHIFT == word >> STATE_SHIFT && w & 1 == 1).then_some((w >> 1) & ALL_LABELS)
    }

    /// What a visit of `state` with `asleep` leaves alone, by what is known
    /// of it (`None`: nothing to explore); if not `None`, the visit claims
    /// the state, and `asleep` is noted as claimed.
    pub(super) fn unsettled(&self, state: u128, asleep: u64) -> Option<u64> {
        let asleep = asleep & ALL_LABELS;
        // A slot names its state by the hash's low word (see the layout).
        let (slot, word) = self.place(state as u64, asleep);
        let Some(bound) = Known::bound(slot.load(Relaxed), word) else {
            slot.store(word, Relaxed);
            return Some(asleep);
        };
        if bound & !asleep == 0 {
            return None;
        }
        // The labels outside the bound are explored from the state, or are
        // being explored, by the claims and visits it came from.
        slot.store(word & !(ALL_LABELS << 1) | (bound & asleep) << 1, Relaxed);
        Some(asleep | (ALL_LABELS & !bound))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_claimed_with_a_mask_is_settled_for_every_wider_one_and_no_other() {
        let k = Known::new();
        // Never claimed: claim it (and remember the mask).
        assert_eq!(k.unsettled(7, 0b0110), Some(0b0110));
        // The owner's mask is within 0b0110 now: a visit leaving those asleep
        // (and more) has nothing to explore; one waking label 0b0010 may,
        // and leaves alone the labels the first claim explores.
        assert_eq!(k.unsettled(7, 0b0110), None);
        assert_eq!(k.unsettled(7, 0b1110), None);
        assert_eq!(k.unsettled(7, 0b0100), Some(0xffff & !0b0010));
        // That claim narrowed what is known to 0b0100.
        assert_eq!(k.unsettled(7, 0b0100), None);
        assert_eq!(k.unsettled(7, 0), Some(0xffff & !0b0100));
        assert_eq!(k.unsettled(7, 0b1), None);
        // Only the 16 mask bits count; the hash 0 is a state like any other.
        assert_eq!(k.unsettled(7, 1 << 20), None);
        assert_eq!(k.unsettled(0, 0xffff), Some(0xffff));
        assert_eq!(k.unsettled(0, 0xffff), None);
    }

    #[test]
    fn another_state_of_the_slot_replaces_it_and_every_bit_of_the_hash_counts() {
        let k = Known::new();
        let s = 0x1234_5678_9abc_def0;
        assert_eq!(k.unsettled(s, 0), Some(0));
        assert_eq!(k.unsettled(s, 0), None);
        // Differs only outside the slot's bits: the same slot, replaced.
        let other = s ^ 1;
        assert_eq!(k.unsettled(other, 0), Some(0));
        assert_eq!(k.unsettled(s, 0), Some(0), "forgotten: claimed again");
        // Differs in the slot's bits: another slot.
        assert_eq!(k.unsettled(s ^ (1 << SLOT_SHIFT), 0), Some(0));
        assert_eq!(k.unsettled(s, 0), None, "its slot kept");
        // The top bit is the state's too.
        assert_eq!(k.unsettled(u64::MAX.into(), 0), Some(0));
        assert_eq!(k.unsettled((u64::MAX >> 1).into(), 0), Some(0));
        assert_eq!(k.unsettled((u64::MAX >> 1).into(), 0), None);
        assert_eq!(k.unsettled(u64::MAX.into(), 0), Some(0));
    }
}
