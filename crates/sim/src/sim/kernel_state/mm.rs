//! An address space ([`Mm`]): the kernel's record of one `mm_struct`.
//!
//! It owns its unique id and page-table root, its mappings (VMAs) and where
//! the next one is placed, its users, whether its slot is live, the pages
//! `MADV_PAGEOUT` paged out, the completion barriers reclaim deferred, and
//! LATR's `munmap_inprogress`. The kernel state ([`KernelState`]) counts its
//! users with the live threads and opens and releases it with its slot; the
//! memory system calls change its mappings and flags through the methods
//! here, each named for what the kernel does, so that what goes together
//! (a mapping placed and the next placement moved past it, a zap's flag set
//! and cleared) changes together.
//!
//! [`KernelState`]: super::KernelState

use crate::sim::reclaim::Held;
use crate::sim::Vma;
use std::collections::BTreeSet;

/// An address space.
pub(in crate::sim) struct Mm {
    uid: u32,
    root: u32,
    vmas: Vec<Vma>,
    users: u32,
    mmap_next: u64,
    alive: bool,
    /// Pages `MADV_PAGEOUT` paged out and nothing has mapped or zapped since
    /// (their PTEs are none: the model has no swap entries).
    swapped: BTreeSet<u64>,
    /// Reclaim deferred flushes of this address space that no later page-table
    /// walk has completed yet (`mm->tlb_flush_batched`): the completion barriers
    /// the next `MADV_PAGEOUT` walk issues first (`flush_tlb_batched_pending`).
    batched: Held,
    /// LATR's `mm->munmap_inprogress`: set (a plain store) as a `munmap` or
    /// `madvise(MADV_DONTNEED)` of this address space starts, cleared as it
    /// ends. Every system call runs whole here, so no other flush of the
    /// address space happens while it is set.
    munmap_inprogress: bool,
}

impl Mm {
    /// Returns an address space with no mappings and no users.
    pub(super) fn new(uid: u32, root: u32, mmap_next: u64, alive: bool) -> Self {
        Mm {
            uid,
            root,
            vmas: Vec::new(),
            users: 0,
            mmap_next,
            alive,
            swapped: Default::default(),
            batched: Default::default(),
            munmap_inprogress: false,
        }
    }

    /// Returns its unique id (never reused, unlike its slot).
    #[inline]
    pub(in crate::sim) fn uid(&self) -> u32 {
        self.uid
    }

    /// Returns its page-table root.
    #[inline]
    pub(in crate::sim) fn root(&self) -> u32 {
        self.root
    }

    /// Returns its mappings.
    #[inline]
    pub(in crate::sim) fn vmas(&self) -> &[Vma] {
        &self.vmas
    }

    /// Returns the threads using it.
    pub(in crate::sim) fn users(&self) -> u32 {
        self.users
    }

    /// Returns whether its slot holds it (from open to release).
    #[inline]
    pub(in crate::sim) fn alive(&self) -> bool {
        self.alive
    }

    /// Returns whether a `munmap` or `madvise(MADV_DONTNEED)` of it is in
    /// progress (LATR's `munmap_inprogress`).
    #[inline]
    pub(in crate::sim) fn munmap_inprogress(&self) -> bool {
        self.munmap_inprogress
    }

    /// A thread joined it.
    pub(super) fn add_user(&mut self) {
        self.users += 1;
    }

    /// A thread left it; returns the users left.
    pub(super) fn drop_user(&mut self) -> u32 {
        debug_assert!(self.users > 0, "a thread left an address space it did not use");
        self.users -= 1;
        self.users
    }

    /// `execve`: its one user moves to another address space (`false`), or
    /// to it from its old one (`true`).
    pub(super) fn exec_user(&mut self, arrives: bool) {
        debug_assert_eq!(self.users, u32::from(!arrives), "execve moves its one user");
        self.users = u32::from(arrives);
    }

    /// Its slot is released: it is no longer live.
    pub(super) fn release(&mut self) {
        self.alive = false;
    }

    /// `mmap`: places a mapping of `pages` pages (of `file` from its start,
    /// if given, privately if `cow`) above the previous ones, its start a
    /// multiple of `align` bytes if given, the next placement 16 pages past its
    /// end; returns its address.
    pub(in crate::sim) fn map_above(
        &mut self,
        pages: u64,
        write: bool,
        file: Option<u32>,
        cow: bool,
        align: Option<u64>,
    ) -> u64 {
        let va = align.map_or(self.mmap_next, |a| self.mmap_next.next_multiple_of(a));
        self.mmap_next = va + (pages + 16) * 4096;
        self.vmas.push(Vma { start: va, pages, write, file, cow: cow && file.is_some(), pgoff: 0, anon_vma: false });
        va
    }

    /// `mmap(MAP_FIXED)` (or an image's region): adds mapping `v`, where
    /// nothing is mapped, moving the next placement past it if it ends above.
    pub(in crate::sim) fn map_fixed(&mut self, v: Vma) {
        debug_assert!(!self.vmas.iter().any(|w| w.start < v.end() && v.start < w.end()), "{v:?} overlaps");
        self.vmas.push(v);
        if v.end() > self.mmap_next {
            self.mmap_next = v.end() + 16 * 4096;
        }
    }

    /// Adds mapping `v` of a new program image (the placements stay where
    /// they are).
    pub(in crate::sim) fn map_image(&mut self, v: Vma) {
        self.vmas.push(v);
    }

    /// Splits its mappings so that `[va, end)` starts and ends on mapping
    /// boundaries.
    pub(in crate::sim) fn split_vmas(&mut self, va: u64, end: u64) {
        let inside = |v: &Vma, x: u64| v.start < x && x < v.end();
        if !self.vmas.iter().any(|v| inside(v, va) || inside(v, end)) {
            // Already on boundaries (an mprotect loop's common case): nothing to allocate.
            return;
        }
        let mut out = Vec::with_capacity(self.vmas.len() + 2);
        for v in self.vmas.drain(..) {
            let (mut cuts, mut n) = ([v.start; 4], 1);
            for x in [va, end] {
                if inside(&v, x) {
                    cuts[n] = x;
                    n += 1;
                }
            }
            cuts[n] = v.end();
            for w in cuts[..=n].windows(2) {
                let pgoff = v.file_page(w[0]);
                out.push(Vma { start: w[0], pages: (w[1] - w[0]) / 4096, pgoff, ..v });
            }
        }
        self.vmas = out;
    }

    /// Removes the mappings inside `[va, end)` (split at its ends first).
    pub(in crate::sim) fn retain_vmas_outside(&mut self, va: u64, end: u64) {
        self.vmas.retain(|v| v.end() <= va || v.start >= end);
    }

    /// `mprotect`: the mappings inside `[va, end)` (split at its ends first)
    /// become writable or read-only.
    pub(in crate::sim) fn protect_vmas(&mut self, va: u64, end: u64, write: bool) {
        for v in &mut self.vmas {
            if v.start >= va && v.end() <= end {
                v.write = write;
            }
        }
    }

    /// `anon_vma_prepare`: the mapping that starts at `start` has an
    /// `anon_vma` from now on.
    pub(in crate::sim) fn prepare_anon_vma(&mut self, start: u64) {
        if let Some(v) = self.vmas.iter_mut().find(|v| v.start == start) {
            v.anon_vma = true;
        }
    }

    /// Takes every mapping away (a teardown); returns them.
    pub(in crate::sim) fn take_vmas(&mut self) -> Vec<Vma> {
        std::mem::take(&mut self.vmas)
    }

    /// `fork`: this new address space gets the parent `parent`'s mappings,
    /// placements and paged-out pages (`copy_nonpresent_pte`: a touch swaps
    /// them in here too).
    pub(in crate::sim) fn fork_from(&mut self, vmas: Vec<Vma>, mmap_next: u64, swapped: BTreeSet<u64>) {
        debug_assert!(self.vmas.is_empty() && self.swapped.is_empty(), "fork into a used address space");
        (self.vmas, self.mmap_next, self.swapped) = (vmas, mmap_next, swapped);
    }

    /// Returns what a child forked from it inherits: its mappings, next
    /// placement and paged-out pages ([`Mm::fork_from`]).
    pub(in crate::sim) fn fork_copy(&self) -> (Vec<Vma>, u64, BTreeSet<u64>) {
        (self.vmas.clone(), self.mmap_next, self.swapped.clone())
    }

    /// `MADV_PAGEOUT` paged `pages` out (their PTEs are none now).
    pub(in crate::sim) fn paged_out(&mut self, pages: impl Iterator<Item = u64>) {
        self.swapped.extend(pages);
    }

    /// Takes the paged-out pages in `[va, end)` off the paged-out set (a
    /// fault swaps them in, or a zap frees their swap slots); returns them,
    /// in order.
    /// Returns whether the page at `va` was paged out (a swap entry).
    pub(in crate::sim) fn is_swapped(&self, va: u64) -> bool {
        self.swapped.contains(&va)
    }

    pub(in crate::sim) fn take_swapped(&mut self, va: u64, end: u64) -> Vec<u64> {
        if self.swapped.is_empty() {
            return Vec::new();
        }
        let hit: Vec<u64> = self.swapped.range(va..end).copied().collect();
        for p in &hit {
            self.swapped.remove(p);
        }
        hit
    }

    /// Reclaim deferred flushes of it whose completion barriers `held` are
    /// still owed (`mm->tlb_flush_batched`).
    #[inline]
    pub(in crate::sim) fn defer_batched(&mut self, held: Held) {
        self.batched.merge(held);
    }

    /// Takes the barriers deferred flushes of it still owe, for a walk's
    /// `flush_tlb_batched_pending`; [`Mm::keep_batched`] puts back what the
    /// walk leaves owed.
    pub(in crate::sim) fn take_batched(&mut self) -> Held {
        std::mem::take(&mut self.batched)
    }

    /// The barriers `held` a walk that took them ([`Mm::take_batched`]) leaves owed.
    pub(in crate::sim) fn keep_batched(&mut self, held: Held) {
        self.batched = held;
    }

    /// A `munmap` or `madvise(MADV_DONTNEED)` of it starts (LATR's flag set).
    #[inline]
    pub(in crate::sim) fn begin_munmap(&mut self) {
        debug_assert!(!self.munmap_inprogress, "a zap inside a zap");
        self.munmap_inprogress = true;
    }

    /// The `munmap` or `madvise(MADV_DONTNEED)` of it ends (LATR's flag cleared).
    #[inline]
    pub(in crate::sim) fn end_munmap(&mut self) {
        debug_assert!(self.munmap_inprogress, "a zap ends that did not start");
        self.munmap_inprogress = false;
    }
}
