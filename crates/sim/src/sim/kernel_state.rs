//! The kernel's own state ([`KernelState`]): address spaces and their slots,
//! pipes, the kernel's allocators, exits in progress, flushes the policy took
//! over, and the spare lists of finished flushes.
//!
//! The kernel's paths reach it through the methods here, each named for what
//! the kernel does, and each keeping what its documentation says true:
//! - a slot's address space is live (`alive`) from [`KernelState::open_mm`]
//!   until [`KernelState::free_slot`], and every incarnation of a slot has a
//!   unique id never used before;
//! - `live` counts the threads that joined an address space and have not left
//!   it, and each address space's `users` its own;
//! - an exited address space waits among the zombies until reaped, and `reap`
//!   looks again only after a zombie was added or a root was released;
//! - the kernel heap and the kernel-map pool hand out each address once (the
//!   pool round robin, as FreeBSD's `pmap_qenter` pool is reused);
//! - a lazy flush the policy took over is pending or bare by its ticket, until
//!   its completion takes it once.
//!
//! Records: an address space ([`Mm`], `sim/kernel_state/mm.rs`) and a pipe
//! ([`Pipe`], `sim/kernel_state/pipe.rs`) own their fields. The paths reach
//! one by id ([`KernelState::mm`], [`KernelState::pipe`] to read;
//! [`KernelState::mm_mut`], [`KernelState::pipe_mut`] for its narrow
//! methods, named for what the system call does to it), never to write a
//! field; an address space's users change only here, with the live threads.

mod mm;
mod pipe;
pub(super) use mm::Mm;
pub(super) use pipe::Pipe;

use super::PendingFlush;
use crate::pagetable::PteRef;
use crate::program::{KERNEL_BASE, KMAP_BASE, KMAP_SLOTS, KMAP_SLOT_PAGES};
use std::collections::{BTreeMap, BTreeSet};
use tlbkit_policy::MmId;

/// The most emptied lists [`KernelState::keep_spare`] keeps.
const MAX_SPARE_LISTS: usize = 8;

/// The kernel's own state: address spaces and their slots, pipes, the
/// kernel's allocators, exits in progress and flushes the policy took over.
pub(super) struct KernelState {
    /// The address spaces, by slot; slot 0 is the kernel's.
    mms: Vec<Mm>,
    /// Slots whose address space was released, for reuse.
    free_slots: Vec<u32>,
    /// The unique id the next address space gets.
    next_uid: u32,
    /// The pipes, by id.
    pipes: Vec<Pipe>,
    /// The next page of the kernel heap.
    kheap_next: u64,
    /// The kernel text's first address (its 2 MB blocks, `KTEXT_*`).
    ktext: u64,
    /// Threads not yet exited.
    live: usize,
    /// Exited address spaces some CPU's root may still point at.
    zombies: Vec<MmId>,
    /// [`Machine::root_releases`] when `reap` last looked at every zombie, or
    /// `None` when a zombie was added since: `reap` has nothing to do while neither
    /// a zombie was added nor some address space lost its last root.
    ///
    /// [`Machine::root_releases`]: crate::machine::Machine::root_releases
    reaped_at: Option<u64>,
    /// The next slot of the kernel-map pool ([`KMAP_BASE`]).
    kmap_next: u64,
    /// Whether an exiting address space is being torn down (for the metrics).
    in_exit: bool,
    /// Flushes whose completion the policy took over, by ticket: their
    /// obligations stay open and their frames held until it completes them.
    lazy_pending: BTreeMap<u32, PendingFlush>,
    /// Tickets the policy took for a flush that holds nothing (another caller's
    /// flush while an mm's `munmap_inprogress` is set): their completion is a
    /// no-op.
    lazy_bare: BTreeSet<u32>,
    /// Emptied lists of a finished flush's PTEs and frames, for the next change
    /// to fill ([`KernelState::spare_lists`]): a kernel-map cycle per request
    /// would otherwise allocate two and free them again.
    spare: Vec<(Vec<PteRef>, Vec<u64>)>,
}

/// What a lazy flush's ticket stood for when the policy completed it
/// ([`KernelState::complete_lazy`]).
pub(super) enum LazyDone {
    /// A flush held until now, to finish.
    Held(PendingFlush),
    /// A ticket of a flush that held nothing.
    Bare,
    /// Not a ticket handed out, or one already completed.
    Unknown,
}

impl KernelState {
    /// Returns a booted kernel's state: the kernel's address space in slot 0
    /// with page-table root `kroot`, no processes, pipes or pending flushes.
    pub(super) fn new(kroot: u32) -> Self {
        KernelState {
            mms: vec![Mm::new(0, kroot, 0, true)],
            free_slots: Vec::new(),
            next_uid: 1,
            pipes: Vec::new(),
            kheap_next: KERNEL_BASE + (1 << 30),
            ktext: KERNEL_BASE,
            live: 0,
            zombies: Vec::new(),
            reaped_at: None,
            kmap_next: 0,
            in_exit: false,
            lazy_pending: BTreeMap::new(),
            lazy_bare: BTreeSet::new(),
            spare: Vec::new(),
        }
    }

    /// Returns the address space in slot `mm`, which must exist.
    #[inline]
    pub(super) fn mm(&self, mm: MmId) -> &Mm {
        &self.mms[mm.index()]
    }

    /// Returns the address space in slot `mm`, which must exist, for its
    /// narrow methods.
    #[inline]
    pub(super) fn mm_mut(&mut self, mm: MmId) -> &mut Mm {
        &mut self.mms[mm.index()]
    }

    /// Returns the address space in slot `mm`, if the slot exists.
    pub(super) fn get_mm(&self, mm: MmId) -> Option<&Mm> {
        self.mms.get(mm.index())
    }

    /// Returns the page-table root of the kernel's address space.
    #[inline]
    pub(super) fn kernel_root(&self) -> u32 {
        self.mms[0].root()
    }

    /// Returns every user slot's address space (live or not), with its id.
    pub(super) fn user_mms(&self) -> impl Iterator<Item = (MmId, &Mm)> {
        self.mms.iter().enumerate().skip(1).map(|(slot, m)| (MmId(slot as u32), m))
    }

    /// Returns the slot of the live address space whose unique id is `uid`.
    pub(super) fn slot_of_uid(&self, uid: u32) -> Option<usize> {
        self.mms.iter().position(|m| m.alive() && m.uid() == uid)
    }

    /// Takes a slot for a new address space (`mm_alloc`): a released one, else a
    /// new one while there are fewer than `max`; `None` when all `max` are used.
    /// [`KernelState::open_mm`] then fills it.
    pub(super) fn take_slot(&mut self, max: usize) -> Option<u32> {
        if let Some(s) = self.free_slots.pop() {
            return Some(s);
        }
        if self.mms.len() >= max {
            return None;
        }
        self.mms.push(Mm::new(0, 0, 0, false));
        Some((self.mms.len() - 1) as u32)
    }

    /// Puts a new, live address space with page-table root `root` and no
    /// mappings in `slot` (from [`KernelState::take_slot`]), with a unique id
    /// never used before and its mappings placed from `mmap_base`.
    pub(super) fn open_mm(&mut self, slot: u32, root: u32, mmap_base: u64) -> MmId {
        let uid = self.next_uid;
        self.next_uid += 1;
        self.mms[slot as usize] = Mm::new(uid, root, mmap_base, true);
        MmId(slot)
    }

    /// A new thread uses `mm`: its users and the live threads count it.
    pub(super) fn join(&mut self, mm: MmId) {
        self.mms[mm.index()].add_user();
        self.live += 1;
    }

    /// A thread of `mm` exits: it leaves the live threads and `mm`'s users.
    /// Returns the users `mm` has left.
    pub(super) fn leave(&mut self, mm: MmId) -> u32 {
        self.live -= 1;
        self.mms[mm.index()].drop_user()
    }

    /// `execve`: the one thread of `old` moves to the new address space
    /// `new`, which it is the one user of; the live threads stay as they are.
    pub(super) fn exec(&mut self, old: MmId, new: MmId) {
        self.mms[new.index()].exec_user(true);
        self.mms[old.index()].exec_user(false);
    }

    /// Returns the threads not yet exited.
    pub(super) fn live(&self) -> usize {
        self.live
    }

    /// Marks whether an exiting address space is being torn down.
    pub(super) fn set_in_exit(&mut self, on: bool) {
        self.in_exit = on;
    }

    /// Returns whether an exiting address space is being torn down.
    #[inline]
    pub(super) fn in_exit(&self) -> bool {
        self.in_exit
    }

    /// Queues the torn-down `mm` for release once no CPU's root points at it:
    /// the next `reap` looks at every zombie.
    pub(super) fn bury(&mut self, mm: MmId) {
        self.zombies.push(mm);
        self.reaped_at = None;
    }

    /// Starts a reaping pass at `releases` ([`Machine::root_releases`]):
    /// returns whether there is a zombie that may be reapable, i.e. whether a
    /// zombie was added or a root released since the last pass.
    ///
    /// [`Machine::root_releases`]: crate::machine::Machine::root_releases
    pub(super) fn reap_due(&mut self, releases: u64) -> bool {
        if self.zombies.is_empty() || self.reaped_at == Some(releases) {
            return false;
        }
        self.reaped_at = Some(releases);
        true
    }

    /// Returns the `i`-th zombie, if there are more than `i`.
    pub(super) fn zombie(&self, i: usize) -> Option<MmId> {
        self.zombies.get(i).copied()
    }

    /// Takes the `i`-th zombie off the list (the last takes its place).
    pub(super) fn unbury(&mut self, i: usize) {
        self.zombies.swap_remove(i);
    }

    /// Releases `mm`'s slot, its page tables freed: the address space is no
    /// longer live and the slot is reused by a later [`KernelState::take_slot`].
    pub(super) fn free_slot(&mut self, mm: MmId) {
        self.mms[mm.index()].release();
        self.free_slots.push(mm.0);
    }

    /// Creates a pipe holding at most `cap` tokens, its buffer at kernel
    /// address `kva`; returns its id.
    pub(super) fn new_pipe(&mut self, cap: u64, kva: u64) -> u32 {
        self.pipes.push(Pipe::new(cap, kva));
        (self.pipes.len() - 1) as u32
    }

    /// Returns pipe `p`, if it exists.
    pub(super) fn pipe(&self, p: u32) -> Option<&Pipe> {
        self.pipes.get(p as usize)
    }

    /// Returns pipe `p`, if it exists, for its narrow methods.
    pub(super) fn pipe_mut(&mut self, p: u32) -> Option<&mut Pipe> {
        self.pipes.get_mut(p as usize)
    }

    /// Takes the kernel heap's next page (its address; the caller maps it).
    pub(super) fn kheap_page(&mut self) -> u64 {
        let va = self.kheap_next;
        self.kheap_next += 4096;
        va
    }

    /// Returns the kernel text's first address.
    #[inline]
    pub(super) fn ktext(&self) -> u64 {
        self.ktext
    }

    /// Takes the kernel-map pool's next slot, round robin: returns its first
    /// address ([`KMAP_SLOT_PAGES`] pages from there are the slot's).
    pub(super) fn kmap_slot(&mut self) -> u64 {
        let va = KMAP_BASE + (self.kmap_next % KMAP_SLOTS) * KMAP_SLOT_PAGES * 4096;
        self.kmap_next += 1;
        va
    }

    /// Holds flush `pf`, whose completion the policy took over with `ticket`,
    /// until [`KernelState::complete_lazy`] takes it.
    pub(super) fn hold_lazy(&mut self, ticket: u32, pf: PendingFlush) {
        self.lazy_pending.insert(ticket, pf);
    }

    /// Records `ticket`, which the policy took for a flush that holds nothing.
    pub(super) fn hold_bare(&mut self, ticket: u32) {
        self.lazy_bare.insert(ticket);
    }

    /// The policy completed `ticket`: returns the flush it held, if any, and
    /// forgets the ticket, so that each completes once.
    pub(super) fn complete_lazy(&mut self, ticket: u32) -> LazyDone {
        match self.lazy_pending.remove(&ticket) {
            Some(pf) => LazyDone::Held(pf),
            None if self.lazy_bare.remove(&ticket) => LazyDone::Bare,
            None => LazyDone::Unknown,
        }
    }

    /// Returns the flushes the policy took over and has not completed (for tests).
    #[cfg(test)]
    pub(super) fn lazy_held(&self) -> impl ExactSizeIterator<Item = &PendingFlush> {
        self.lazy_pending.values()
    }

    /// Keeps a finished flush's lists, emptied, for the next change to fill,
    /// while fewer than [`MAX_SPARE_LISTS`] are kept and either has room; else
    /// drops them.
    pub(super) fn keep_spare(&mut self, mut changed: Vec<PteRef>, mut frames: Vec<u64>) {
        if self.spare.len() < MAX_SPARE_LISTS && (changed.capacity() > 0 || frames.capacity() > 0) {
            changed.clear();
            frames.clear();
            self.spare.push((changed, frames));
        }
    }

    /// Returns empty lists for a change's PTEs and frames, with the room a
    /// finished flush's had, if one was kept.
    pub(super) fn spare_lists(&mut self) -> (Vec<PteRef>, Vec<u64>) {
        self.spare.pop().unwrap_or_default()
    }
}
