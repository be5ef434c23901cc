//! The kernel's locks as the machine keeps them: each address space's
//! `mmap_lock` (or FreeBSD's `PMAP_LOCK`) and the PTE lock a CPU holds across
//! steps. The operations take and release them here; the executor reads them
//! to tell whether a waiting CPU may go on.

use super::*;

impl Machine {
    /// Returns the CPU that holds the PTE lock of `slot`'s page-table page
    /// across steps, if one does (see [`Machine::hold_ptl`]).
    #[inline]
    pub fn ptl_holder(&self, slot: u32) -> Option<u8> {
        self.ptl_held[slot as usize]
    }

    /// CPU `cpu`, having taken the PTE lock of `slot` (`Engine::pte_lock`),
    /// keeps it across steps: Linux reclaim, from its PTE clear until
    /// `arch_tlbbatch_add_pending` returns, or a copy-on-write or migration
    /// from its clear to its new PTE. Every other CPU's `pte_lock` waits
    /// meanwhile; keeps true that one CPU at most holds it, and only the CPU
    /// that took it.
    #[inline]
    pub fn hold_ptl(&mut self, slot: u32, cpu: usize) {
        let h = &mut self.ptl_held[slot as usize];
        debug_assert!(h.is_none_or(|h| h as usize == cpu), "cpu{cpu} holds the PTE lock of mm{slot} held by {h:?}");
        *h = Some(cpu as u8);
    }

    /// CPU `cpu` drops the PTE lock of `slot` it may hold across steps
    /// ([`Machine::hold_ptl`]); nothing if it holds none (the lock was taken
    /// for one step only), never another CPU's hold.
    #[inline]
    pub fn release_ptl(&mut self, slot: u32, cpu: usize) {
        let h = &mut self.ptl_held[slot as usize];
        debug_assert!(h.is_none_or(|h| h as usize == cpu), "cpu{cpu} drops the PTE lock of mm{slot} held by {h:?}");
        *h = None;
    }

    /// Returns whether `side` of the `mmap_lock` of `slot` can be taken now.
    #[inline]
    pub fn can_lock_mm(&self, slot: u32, side: LockSide) -> bool {
        self.mm_lock[slot as usize].can_take(side)
    }

    /// CPU `cpu` takes `side` of the `mmap_lock` of `slot`, which must be free
    /// for it ([`Machine::can_lock_mm`]): keeps true that a writer holds it
    /// alone and readers only share it.
    #[inline]
    pub fn lock_mm(&mut self, slot: u32, cpu: usize, side: LockSide) {
        let l = &mut self.mm_lock[slot as usize];
        debug_assert!(l.can_take(side), "cpu{cpu} takes the mmap_lock of mm{slot} ({side:?}) held as {l:?}");
        match side {
            LockSide::Read => l.readers += 1,
            LockSide::Write => l.writer = Some(cpu as u8),
        }
    }

    /// Turns CPU `cpu`'s write hold of the `mmap_lock` of `slot` into a read
    /// hold (`mmap_write_downgrade`): readers may enter at once, writers still
    /// wait.
    #[inline]
    pub fn downgrade_mm(&mut self, slot: u32, cpu: usize) {
        let l = &mut self.mm_lock[slot as usize];
        debug_assert_eq!(l.writer, Some(cpu as u8));
        *l = MmapLock { writer: None, readers: l.readers + 1 };
    }

    /// CPU `cpu` releases its hold on `side` of the `mmap_lock` of `slot`.
    #[inline]
    pub fn unlock_mm(&mut self, slot: u32, cpu: usize, side: LockSide) {
        let l = &mut self.mm_lock[slot as usize];
        match side {
            LockSide::Read => l.readers -= 1,
            LockSide::Write => {
                debug_assert_eq!(l.writer, Some(cpu as u8), "cpu{cpu} releases the mmap_lock of mm{slot}");
                l.writer = None;
            }
        }
    }
}
