//! The page-walk cache: level-2 table descriptors, so that a walk for a VA
//! under one needs one load. A small fully associative cache with LRU
//! replacement ([`Slots`]), keyed by the 2 MB block number, tagged with an
//! ASID unless it caches a kernel (TTBR1) walk.

use super::entry::{equal_mask, thread_of, Inval, NO_ASID};
use super::slots::Slots;
use super::summary::Summary;
use crate::pagetable::{TableRef, SHIFT_2M};

/// A cached level-2 table descriptor: a walk for a VA under it needs one load.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct PwcEntry {
    pub(super) valid: bool,
    /// `va >> 21`.
    pub(super) key: u64,
    pub(super) asid: u16,
    /// Kernel (TTBR1) walks are cached regardless of ASID.
    pub(super) global: bool,
    /// Ground truth: the last-level table the descriptor pointed at.
    pub(super) table: TableRef,
    /// Ground truth: the never-reused id of the address space walked.
    pub(super) mm_uid: u32,
}

impl PwcEntry {
    /// Returns whether `op` removes the entry.
    fn removed_by(&self, op: Inval) -> bool {
        match op {
            Inval::Va { asid, va } => !self.global && self.asid == asid && self.key == va >> SHIFT_2M,
            Inval::VaAll { va } => self.key == va >> SHIFT_2M,
            Inval::Asid(a) => !self.global && self.asid == a,
            Inval::All => true,
            Inval::AllNonGlobal => !self.global,
            Inval::AsidOfThread { asid, thread } => {
                !self.global && self.asid == asid && thread_of(self.key << SHIFT_2M) == thread
            }
            Inval::Thread { thread, global } => (global || !self.global) && thread_of(self.key << SHIFT_2M) == thread,
        }
    }
}

/// A walk-cache entry as the oracle sees it.
#[derive(Clone, Copy, Debug)]
pub struct WalkEntry {
    /// The first address of the 2 MB region the cached descriptor covers.
    pub va: u64,
    /// The ASID it was filled under.
    pub asid: u16,
    /// Whether it is a kernel (global) walk.
    pub global: bool,
    /// The last-level table it points at.
    pub table: TableRef,
    /// The address space walked.
    pub mm_uid: u32,
}

/// One core's walk cache.
#[derive(Clone)]
pub(super) struct Pwc {
    pub(super) entries: Vec<PwcEntry>,
    /// The keys (the 2 MB block number), index and recency order.
    pub(super) slots: Slots,
    /// [`asid_tag`](super::entry::asid_tag)s of the slots.
    pub(super) asids: Vec<u32>,
}

impl Pwc {
    /// Returns an empty walk cache of `n` entries.
    pub(super) fn new(n: usize) -> Self {
        Pwc { entries: vec![PwcEntry::default(); n], slots: Slots::new(n), asids: vec![NO_ASID; n] }
    }

    /// Returns whether the cache has no slot at all.
    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Returns whether the cache holds the level-2 descriptor for `va`, making
    /// it the most recently used.
    pub(super) fn lookup(&mut self, va: u64, asid: u16, global: bool) -> bool {
        let key = va >> SHIFT_2M;
        // The slots of the key, in increasing order, as a scan would meet them.
        let mut m = self.slots.candidates(key);
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let p = &self.entries[i];
            if self.slots.keys[i] == key && p.global == global && (global || p.asid == asid) {
                self.slots.order.touch(i);
                return true;
            }
        }
        false
    }

    /// Caches the level-2 descriptor for `va` in the first empty slot, else the
    /// least recently used one (the cache has slots).
    pub(super) fn fill(
        &mut self,
        va: u64,
        asid: u16,
        global: bool,
        table: TableRef,
        mm_uid: u32,
        summary: &mut Summary,
    ) {
        let victim = self.slots.victim();
        // As in the L2's fill, what the victim held is counted out from the
        // mirrors (its key is its block), without reading its entry.
        let old_key = self.slots.keys[victim];
        debug_assert_eq!(old_key != u64::MAX, self.entries[victim].valid);
        if old_key != u64::MAX {
            debug_assert_eq!(old_key, self.entries[victim].key);
            summary.count_block(old_key, false);
            summary.count_asid(self.asids[victim], false);
        }
        let key = va >> SHIFT_2M;
        let tag = if global { NO_ASID } else { asid as u32 };
        summary.count_asid(tag, true);
        summary.count_block(key, true);
        self.entries[victim] = PwcEntry { valid: true, key, asid, global, table, mm_uid };
        self.slots.set_key(victim, key);
        self.slots.order.touch(victim);
        self.asids[victim] = tag;
    }

    /// Removes what `op` names; `k2`: for an operation by VA, the 2 MB block
    /// number of its address (only that key can go).
    pub(super) fn invalidate(&mut self, op: Inval, k2: Option<u64>, summary: &mut Summary) {
        let n = self.entries.len();
        if n == 0 {
            return;
        }
        // The slots that can hold what `op` removes: by VA, those of its block's
        // key (a superset, from the index); by ASID, those of its tag; else
        // every one.
        let mut m = match (op, k2) {
            (_, Some(k2)) => self.slots.candidates(k2),
            (Inval::Asid(a) | Inval::AsidOfThread { asid: a, .. }, None) => equal_mask(&self.asids, a as u32),
            _ => u64::MAX >> (64 - n),
        };
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let p = &mut self.entries[i];
            if p.valid && p.removed_by(op) {
                p.valid = false;
                let key = p.key;
                summary.blocks[super::summary::block_bucket(key)] -= 1;
                self.slots.set_key(i, u64::MAX);
                summary.count_asid(self.asids[i], false);
                self.asids[i] = NO_ASID;
            }
        }
    }

    /// Calls `f` for every valid entry, in slot order.
    pub(super) fn for_each(&self, mut f: impl FnMut(WalkEntry)) {
        for p in self.entries.iter().filter(|p| p.valid) {
            f(WalkEntry { va: p.key << SHIFT_2M, asid: p.asid, global: p.global, table: p.table, mm_uid: p.mm_uid });
        }
    }
}
