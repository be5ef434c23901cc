//! An address-space slot as the kernel operations change it: its life (fork,
//! exit, release), the VMAs a `munmap` has detached, reclaim's
//! `tlb_flush_batched` mark, LATR's flag and lazy flushes, and the contiguous
//! block's PTEs and the writes they record.

use super::*;

impl Machine {
    /// Claims free slot `slot` for a fork in the step that chose it: no other
    /// fork may take it, and it is not runnable until [`Machine::fork`] fills it.
    #[inline]
    pub fn claim_for_fork(&mut self, slot: u32) {
        let s = &mut self.spaces[slot as usize];
        debug_assert_eq!(s.life, Life::Free, "a fork into mm{slot}");
        s.life = Life::Forking;
    }

    /// The last thread of slot `slot`'s process begins to exit: from now on no
    /// CPU may switch to it (the exit holds the only thread there is).
    #[inline]
    pub fn start_exit(&mut self, slot: u32) {
        let s = &mut self.spaces[slot as usize];
        debug_assert_eq!(s.life, Life::Live, "an exit of mm{slot}");
        s.life = Life::Exiting;
    }

    /// The last thread of slot `slot`'s process exits (`exit_mm`): the slot is
    /// a zombie, torn down by its exit and released once no CPU's root points
    /// at it or holds it ([`Machine::start_release`]).
    #[inline]
    pub fn exit_mm(&mut self, slot: u32) {
        self.spaces[slot as usize].life = Life::Zombie;
    }

    /// Starts releasing zombie slot `slot` (the policy's `mm_release` runs
    /// next): no fork may use it until [`Machine::finish_release`]. Unhooks its
    /// page-table page, if it still has one, and returns it (freed after the
    /// release).
    #[inline]
    pub fn start_release(&mut self, slot: u32) -> Option<u32> {
        let s = &mut self.spaces[slot as usize];
        debug_assert_eq!(s.life, Life::Zombie, "a release of mm{slot}");
        s.life = Life::Releasing;
        s.table.take()
    }

    /// Ends the release of slot `slot` ([`Machine::start_release`]): a fork may
    /// use it now.
    #[inline]
    pub fn finish_release(&mut self, slot: u32) {
        self.spaces[slot as usize].life = Life::Free;
    }

    /// A `munmap` removes the VMAs of `pages` (bits) of slot `slot` under the
    /// write side of its `mmap_lock`: no fault maps them again, and a
    /// `madvise` of them fails, until [`Machine::reattach`].
    #[inline]
    pub fn detach(&mut self, slot: u32, pages: u8) {
        self.spaces[slot as usize].detached |= pages;
    }

    /// The `munmap` that detached `pages` (bits) of slot `slot` is done with
    /// them (its flush returned, or its lazy flush completed): their range is
    /// free to map again.
    #[inline]
    pub fn reattach(&mut self, slot: u32, pages: u8) {
        self.spaces[slot as usize].detached &= !pages;
    }

    /// A reclaim's PTE clear marks slot `slot`'s mm `tlb_flush_batched`
    /// (`set_tlb_ubc_flush_pending`'s `atomic_inc`, saturating); every
    /// `flush_tlb_batched_pending` of it in progress will now find the mark
    /// changed.
    #[inline]
    pub fn mark_batched(&mut self, slot: u32) {
        let sp = &mut self.spaces[slot as usize];
        sp.batched = sp.batched.saturating_add(1);
        sp.watching = 0;
    }

    /// `flush_tlb_batched_pending`'s read of the mark on CPU `cpu`: returns it
    /// (the number of reclaim clears not covered yet) and, when set, starts
    /// watching it for [`Machine::clear_batched`].
    #[inline]
    pub fn read_batched(&mut self, slot: u32, cpu: usize) -> u8 {
        let sp = &mut self.spaces[slot as usize];
        if sp.batched != 0 {
            sp.watching |= 1 << cpu;
        }
        sp.batched
    }

    /// `flush_tlb_batched_pending`'s `atomic_cmpxchg` on CPU `cpu` after its
    /// flush: clears slot `slot`'s mark unless a reclaim marked the mm since
    /// [`Machine::read_batched`] (Linux compares the whole word, whose pending
    /// count only grows).
    #[inline]
    pub fn clear_batched(&mut self, slot: u32, cpu: usize) {
        let sp = &mut self.spaces[slot as usize];
        if sp.watching & (1 << cpu) != 0 {
            sp.batched = 0;
        }
        sp.watching &= !(1 << cpu);
    }

    /// Forgets slot `slot`'s `tlb_flush_batched` mark outright: the caller has
    /// seen that no reclaim of it is in flight any more.
    #[inline]
    pub fn forget_batched(&mut self, slot: u32) {
        self.spaces[slot as usize].batched = 0;
    }

    /// Stores `on` in slot `slot`'s `munmap_inprogress` (LATR's flag; a plain
    /// store, the last writer wins), only where the policy reads it
    /// ([`RunConstants::reads_flag`]): otherwise it stays clear and adds no
    /// state.
    #[inline]
    pub fn set_munmap_flag(&mut self, slot: u32, on: bool) {
        if self.consts.reads_flag {
            self.spaces[slot as usize].munmap_inprogress = on;
        }
    }

    /// Offers CPU `cpu`'s next flush of slot `slot` to the policy as one it may
    /// complete late ([`Machine::take_lazy`]): it discharges `ids`, frees
    /// `frames` and keeps the pages `detached` (bits) reserved. The offer
    /// stands until [`Machine::withdraw_lazy`].
    pub fn offer_lazy(
        &mut self,
        cpu: usize,
        slot: u32,
        ids: &[usize],
        frames: &[u32],
        flush: &'static str,
        detached: u8,
    ) {
        let uid = self.spaces[slot as usize].uid;
        self.lazy_offer[cpu] = Some(LazyFlush {
            ticket: 0,
            obligations: ids.to_vec(),
            frames: frames.to_vec(),
            flush,
            slot,
            uid,
            detached,
        });
    }

    /// Withdraws CPU `cpu`'s offer ([`Machine::offer_lazy`]) as its flush
    /// returns; returns whether the policy took it meanwhile (`defer_flush`),
    /// which made its completion the policy's.
    #[inline]
    pub fn withdraw_lazy(&mut self, cpu: usize) -> bool {
        self.lazy_offer[cpu].take().is_none()
    }

    /// Returns PTE `j` of slot `slot`'s contiguous block.
    #[inline]
    pub fn block_pte(&self, slot: u32, j: usize) -> PteVal {
        self.spaces[slot as usize].block[j]
    }

    /// Writes PTE `j` of slot `slot`'s contiguous block (the arch code's
    /// store, exchange or compare-and-exchange); returns the value it replaced.
    #[inline]
    pub fn write_block_pte(&mut self, slot: u32, j: usize, v: PteVal) -> PteVal {
        std::mem::replace(&mut self.spaces[slot as usize].block[j], v)
    }

    /// A user write to page `i` of slot `slot`'s block, which the hardware
    /// records as dirty in block PTE `j`: the PTE is marked dirty and the
    /// ground truth notes the page written.
    #[inline]
    pub fn record_write(&mut self, slot: u32, i: usize, j: usize) {
        let s = &mut self.spaces[slot as usize];
        s.block[j] = s.block[j].mkdirty();
        s.written |= 1 << i;
    }

    /// Forgets the writes of the block pages of slot `slot` that one operation
    /// cleared (`cleared`: page and the value the clear returned, in order).
    /// Returns the first page written since it was mapped whose value came
    /// back clean, unless some value marks the folio dirty or a valid dirty
    /// PTE of the block still records a write (the write then lives on there,
    /// noted against that PTE's page): a write lost (`no_lost_dirty`).
    pub fn forget_block_writes(&mut self, slot: u32, cleared: &[(usize, PteVal)]) -> Option<(usize, PteVal)> {
        let s = &mut self.spaces[slot as usize];
        let mut unrecorded = None;
        for &(j, pte) in cleared {
            if s.written & (1 << j) != 0 && !pte.dirty() {
                unrecorded.get_or_insert((j, pte));
            }
            s.written &= !(1 << j);
        }
        let marked = cleared.iter().any(|c| c.1.dirty());
        match unrecorded {
            Some(_) if marked => None,
            Some(u) => match s.block.iter().position(|p| p.valid() && p.dirty()) {
                Some(k) => {
                    s.written |= 1 << k;
                    None
                }
                None => Some(u),
            },
            None => None,
        }
    }
}
