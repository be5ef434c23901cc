//! The checked machine's kernel side and its ground truth: address spaces with
//! their page tables, frames, TLBs, obligations, and the oracle's judgements.
//!
//! Everything here is small on purpose: each address space maps `--pages`
//! pages (at most [`MAX_PAGES`]) through one page-table page, frames come from a short LIFO free list
//! (so a freed frame is the next one handed out, the quickest way to a reuse),
//! and a TLB is an unbounded set of entries (see the crate documentation for why
//! that is sound). Versions and uids are the ground truth policies never see.

use std::fmt;
use tlbkit_policy::contpte::{PteVal, CONT_PTES};
use tlbkit_policy::{Defer, Root, Scope, Tlbi};

mod cpus;
mod hash;
mod locks;
mod oracle;
mod slots;
mod sorted_set;
mod tlb;
mod views;

pub use sorted_set::SortedSet;
pub use tlb::RootWalks;

/// The most pages an address space maps (`--pages`).
pub const MAX_PAGES: usize = 4;
/// The virtual address of page 0 of every address space.
pub const VA0: u64 = 0x40_0000;

/// PTEs in the contiguous block (`CONT_PTES`).
pub const BLOCK: usize = CONT_PTES as usize;
/// The page index of the contiguous block's first page (indices from here on
/// name the block's pages).
pub const BLOCK_PAGE: usize = 16;
/// The virtual address of the contiguous block: 64 KB-aligned, 2 MB above
/// [`VA0`], so mapped through a last-level table of its own, which no operation
/// frees.
pub const BLOCK_VA: u64 = VA0 + (2 << 20);

/// Returns the virtual address of page `p` (a block page from [`BLOCK_PAGE`] on).
pub fn va_of(p: usize) -> u64 {
    match p.checked_sub(BLOCK_PAGE) {
        Some(j) => BLOCK_VA + (j as u64) * 4096,
        None => VA0 + (p as u64) * 4096,
    }
}

/// Returns the page index of `va`, the inverse of [`va_of`] (`None` for an
/// address no page has).
pub fn page_of(va: u64) -> Option<usize> {
    if (BLOCK_VA..BLOCK_VA + CONT_PTES * 4096).contains(&va) {
        return Some(BLOCK_PAGE + ((va - BLOCK_VA) / 4096) as usize);
    }
    (VA0..VA0 + MAX_PAGES as u64 * 4096).contains(&va).then(|| ((va - VA0) / 4096) as usize)
}

/// Returns the first frame of the 64 KB file folio the block of `slot` maps
/// (page-cache frames, outside the frames processes allocate: a file page
/// outlives every mapping of it).
pub fn folio_pfn(slot: u32) -> u64 {
    0x1000 + CONT_PTES * slot as u64
}

/// The value of block PTE `j` of `slot` as a file fault maps it: valid, writable,
/// young (`filemap_map_pages` maps young), clean, contiguous.
fn mapped_block_pte(slot: u32, j: usize) -> PteVal {
    PteVal::new(folio_pfn(slot) + j as u64, PteVal::VALID | PteVal::WRITE | PteVal::YOUNG | PteVal::CONT)
}

/// A valid leaf PTE: the frame it maps and its version (ground truth).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pte {
    /// Frame number.
    pub frame: u32,
    /// Version: a fresh number for every PTE write.
    pub ver: u32,
}

/// The life of an address-space slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Life {
    /// A process runs in it.
    Live,
    /// Its last thread has begun to exit ([`Machine::start_exit`], claimed in the
    /// step that chose the exit): no thread is left to switch to, but its pages
    /// stay mapped, for reclaim and migration to take, until `exit_mmap` tears
    /// them down ([`Machine::exit_mm`]).
    Exiting,
    /// Its last thread exited and it is torn down; it is released when no CPU's
    /// root points at it any more.
    Zombie,
    /// Being released: the policy's `mm_release` runs, and no fork may use the
    /// slot until it returns (a new process gets a new pmap or `mm_struct` in the
    /// kernel, never the one a release is still tearing down).
    Releasing,
    /// Released: a fork may use the slot.
    Free,
    /// Being forked into: claimed by one CPU, not yet runnable.
    Forking,
}

impl Life {
    /// Whether the process's pages are still mapped ([`Life::Live`] or
    /// [`Life::Exiting`]): what kernel threads (reclaim, migration) may take.
    #[inline]
    pub fn mapped(self) -> bool {
        matches!(self, Life::Live | Life::Exiting)
    }
}

/// One address-space slot.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Space {
    /// Never-reused id of the process in the slot.
    pub uid: u32,
    /// Where it is in its life.
    pub life: Life,
    /// The page-table page, if the range is mapped at all.
    pub table: Option<u32>,
    /// The leaf PTEs (those from the shape's page count on stay `None`).
    pub ptes: [Option<Pte>; MAX_PAGES],
    /// Per page: the version its next PTE write gets (versions are per page, so
    /// that writes to different pages in either order give the same state).
    pub vers: [u32; MAX_PAGES],
    /// Bit `p` is set while a `munmap` that removed page `p`'s VMA still tears
    /// it down under the downgraded `mmap_lock`: no fault can map the page again
    /// until it is done (mapping it needs `mmap` and so the write side).
    pub detached: u8,
    /// With contiguous PTEs (`--teardown`): the [`BLOCK`] PTEs of a shared
    /// writable file mapping of one 64 KB folio, from [`va_of`]`(BLOCK_PAGE)`;
    /// empty otherwise.
    pub block: Vec<PteVal>,
    /// Ground truth: bit `j` is set when page `j` of the block was written since it
    /// was mapped (what `no_lost_dirty` judges each clear against).
    pub written: u16,
    /// Linux's `mm->tlb_flush_batched`, as the number of reclaim clears of the mm
    /// that no `flush_tlb_batched_pending` has covered yet (the kernel's pending
    /// count less its flushed count): reclaim raises it under the PTE lock, and
    /// `flush_tlb_batched_pending` clears it after its flush unless a reclaim
    /// raised it again meanwhile (its `atomic_cmpxchg`).
    pub batched: u8,
    /// Bit `c` is set while CPU `c`'s `flush_tlb_batched_pending` of the mm is
    /// between reading the mark and its `atomic_cmpxchg`, and no reclaim has
    /// marked the mm since: Linux's mark only grows (pending and flushed
    /// counts in one word), so that compare fails after any reclaim's mark,
    /// even one that brings [`Space::batched`] back to the value read after the
    /// checker forgot the mark ([`Machine::forget_batched`]).
    pub watching: u8,
    /// LATR's `mm->munmap_inprogress`: set with a plain store as a `munmap`
    /// (the system call) or `madvise(MADV_DONTNEED)`'s zap starts, cleared as it
    /// ends, so the last writer wins. Kept only while [`RunConstants::reads_flag`]
    /// (false otherwise); a fork starts with it clear (the checker's fork is a
    /// fresh mm, not a `dup_mm` copy of a parent's).
    pub munmap_inprogress: bool,
}

/// A cached translation, with the ground truth it was filled from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Entry {
    /// Matches every tag.
    pub global: bool,
    /// The tag it was filled under.
    pub asid: u16,
    /// The page.
    pub page: u8,
    /// The frame it maps.
    pub frame: u32,
    /// The process it came from.
    pub uid: u32,
    /// The version of the PTE it came from (0 for the contiguous block's entries,
    /// which `no_stale_use` does not judge).
    pub ver: u32,
    /// A 64 KB entry for the whole contiguous block (`page` is its first page,
    /// `frame` its first frame).
    pub big: bool,
}

/// What a CPU is running.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Task {
    /// The idle thread (a kernel thread: the address space stays lazily loaded
    /// where the policy keeps it).
    Idle,
    /// A thread of the process in this slot.
    User(u32),
}

/// Where a CPU stands between its task's user code and the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// In the kernel: an operation, or idle.
    Kernel,
    /// In a context switch: its task is the next one, its root and tag may
    /// still be the previous one's.
    Switching,
    /// In user mode, between kernel operations.
    User,
}

/// A translation a change made stale: what an [`Obligation`] must see gone
/// from every TLB, and what a [`Deferred`] judgement judges.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Stale {
    /// The process whose translation changed.
    pub uid: u32,
    /// Its slot.
    pub slot: u32,
    /// The page whose PTE changed, or `None` for the page-table page itself.
    pub page: Option<u8>,
    /// The PTE version that must go (0 for a page-table page).
    pub ver: u32,
    /// The frame that mapping pointed at.
    pub frame: u32,
    /// What changed.
    pub change: &'static str,
}

/// An open or discharged duty to invalidate.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Obligation {
    /// The translation that must go.
    pub stale: Stale,
    /// The CPU that changed it.
    pub cpu: u32,
    /// Whether the flush for it has returned.
    pub discharged: bool,
}

/// A flush that returned while a CPU was inside an interrupt handler, judged for
/// that CPU when the handler returns (see [`Machine::discharge`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Deferred {
    /// The translation that had to go.
    pub stale: Stale,
    /// The flush that returned.
    pub flush: &'static str,
    /// The CPU whose flush returned.
    pub cpu: u32,
    /// For a page-table page: the process has hooked a page-table page at the
    /// same frame again since (a fault after the unmap). A walk through the
    /// frame then leads into its current table, stale or not, and the next
    /// unhook's own flush judges it; so the late judgement skips it.
    pub rehooked: bool,
}

/// A flush whose completion the policy took over ([`tlbkit_policy::Hw::defer_flush`]):
/// LATR's lazy shootdown. Its obligations stay open, its frames held and its
/// pages' range reserved (no fault maps them again) until the policy completes it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LazyFlush {
    /// The ticket the policy was given (0 while only offered).
    pub ticket: u32,
    /// The obligations it discharges.
    pub obligations: Vec<usize>,
    /// The frames it frees (page-table pages included).
    pub frames: Vec<u32>,
    /// The flush's name.
    pub flush: &'static str,
    /// The address space and the process in it.
    pub slot: u32,
    /// The process in the slot.
    pub uid: u32,
    /// The pages whose range a `munmap` removed (bits), reserved until completion.
    pub detached: u8,
}

/// [`LazyFlush::flush`] of a ticket that holds nothing: another caller's flush
/// of an mm whose `munmap_inprogress` is set, which it took as done.
pub const BARE_FLUSH: &str = "flush taken as done";

/// A broken property, as the oracle reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The property's name (`no_stale_use`, ...).
    pub property: &'static str,
    /// The CPU concerned.
    pub cpu: usize,
    /// What was wrong.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} on cpu{}: {}", self.property, self.cpu, self.detail)
    }
}

/// Which side of an address space's lock an operation takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LockSide {
    /// Shared: `mmap_read_lock` (faults, `madvise(MADV_DONTNEED)`, a `munmap`
    /// after its downgrade).
    Read,
    /// Exclusive: `mmap_write_lock`, or FreeBSD's `PMAP_LOCK`.
    Write,
}

/// One address space's sleeping lock: a writer, or any number of readers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MmapLock {
    /// The CPU holding it for write.
    pub writer: Option<u8>,
    /// How many CPUs hold it for read.
    pub readers: u8,
}

impl MmapLock {
    /// Returns whether `side` can be taken now.
    pub fn can_take(&self, side: LockSide) -> bool {
        match side {
            LockSide::Read => self.writer.is_none(),
            LockSide::Write => self.writer.is_none() && self.readers == 0,
        }
    }
}

/// The machine's ground truth and the kernel's memory. (Its `Default` is a
/// machine of no CPUs and no address spaces, a placeholder.)
///
/// Its fields are its own: the kernel operations read them through views
/// ([`Machine::space`], [`Machine::sched`], ...) and change them only through
/// methods named for what the kernel does (`hold_ptl`, `lock_mm`,
/// `enter_batch_flush`, `offer_lazy`, ...), each keeping its part of the state
/// consistent, so that no caller keeps an invariant of the machine's for it.
#[derive(Clone, Debug, Default)]
pub struct Machine {
    /// Address-space slots; slot 0 is the kernel's and never used.
    spaces: Vec<Space>,
    /// Free frames, the next one to hand out last.
    free: Vec<u32>,
    /// Every obligation, by id.
    obligations: Vec<Obligation>,
    /// `(uid, page, ver)` of every translation whose obligation is discharged.
    dead: SortedSet<(u32, u8, u32)>,
    /// Per CPU: the TLB.
    tlbs: Vec<SortedSet<Entry>>,
    /// Per CPU: the walk cache, as `(asid, page-table frame, uid)`: a cached
    /// pointer to an address space's page-table page, which speculative walks
    /// under that tag may follow without reading the upper levels again.
    walks: Vec<SortedSet<(u16, u32, u32)>>,
    /// Per CPU: the translation root and the tag it runs with, and those its
    /// walks may still use ([`CpuRoots`]).
    roots: CpuRoots,
    /// Per slot: whether any CPU ever switched to it or it was forked (slots
    /// never touched are alike, which the operation menu exploits).
    touched: Vec<bool>,
    /// Per slot: its `mmap_lock` (Linux, a reader-writer semaphore) or its
    /// `PMAP_LOCK` (FreeBSD, a mutex, taken as a writer); see `crate::ops` for
    /// which operation takes which side when.
    mm_lock: Vec<MmapLock>,
    /// Per slot: the CPU that holds its PTE lock across steps, if one does:
    /// Linux reclaim, from its PTE clear until `arch_tlbbatch_add_pending`
    /// returns (`try_to_unmap_one` calls it under the lock). Every other holder
    /// takes the lock for the one step that changes a PTE
    /// ([`crate::engine::Engine::pte_lock`]), waiting while this is another CPU.
    ptl_held: Vec<Option<u8>>,
    /// Per CPU: whether it is inside an interrupt handler (a mirror of the
    /// executor's CPU state, which the state hash already holds).
    in_irq: Vec<bool>,
    /// Per CPU: whether it is inside its own reclaim's deferred flush
    /// (`try_to_unmap_flush`), whose local part runs with interrupts off (x86's
    /// `flush_tlb_func` on a lazy CPU switches to `init_mm` there). A flush
    /// that returns meanwhile is judged for it when that flush returns, as for a
    /// CPU inside an interrupt handler: a page-table page freed meanwhile is
    /// reused only after every CPU has had interrupts on again
    /// (`MMU_GATHER_RCU_TABLE_FREE`). Taken to last the whole flush, which
    /// `Hw` cannot split (an over-approximation of the window; the judgement is
    /// delayed, never dropped).
    in_batch_flush: Vec<bool>,
    /// Per CPU: the flushes that returned while it was inside an interrupt
    /// handler, still to be judged for it when the handler returns.
    deferred: Vec<SortedSet<Deferred>>,
    /// Per CPU: the flush it runs now, if the kernel lets it complete late
    /// (`munmap`, `madvise(MADV_DONTNEED)`), until the policy takes it with
    /// `defer_flush` (its ticket then set) or the flush returns.
    lazy_offer: Vec<Option<LazyFlush>>,
    /// Lazy flushes taken over and not yet completed, in ticket order.
    lazy: Vec<LazyFlush>,
    /// Per CPU: the invalidations it issued that are not complete yet, each
    /// once, ordered by [`Pending::key`]: they take effect on every TLB they
    /// cover at this CPU's next barrier that completes them
    /// ([`Machine::complete`]). See [`Pending`] for which wait and until when.
    pending: Vec<Vec<Pending>>,
    /// Per CPU: what it runs, and where it is between kernel and user.
    sched: CpuTasks,
    /// What stays the same for a run.
    consts: RunConstants,
    next_uid: u32,
    /// Per CPU: what its last speculative fill ([`Machine::fill_all`]) filled
    /// from, until an invalidation takes entries from it. A fill from the same
    /// root, tag and page table adds nothing, so it is skipped. Not part of
    /// the state: it only says what the TLB already holds.
    filled: Vec<Option<Filled>>,
}

/// Per CPU: the translation root and tag it runs with (indexing gives it),
/// and on arm64 those it wrote over since its last context synchronisation.
#[derive(Clone, Debug, Default)]
pub struct CpuRoots {
    /// Per CPU: the root and tag it runs with.
    now: Vec<(Root, u16)>,
    /// Per CPU (arm64): the roots and tags it wrote over since its last
    /// context synchronisation (`ISB`, an exception's entry or return). Until
    /// then its walks may still use any of them, as well as the new one
    /// (`MSR TTBR0_EL1` takes effect for later translations only after a
    /// context synchronisation event, and speculative walks between may use
    /// either); empty at every step's end for a policy whose `ISB` follows
    /// its root write at once.
    unsynced: Vec<Vec<(Root, u16)>>,
}

impl std::ops::Index<usize> for CpuRoots {
    type Output = (Root, u16);
    fn index(&self, cpu: usize) -> &(Root, u16) {
        &self.now[cpu]
    }
}

impl std::ops::IndexMut<usize> for CpuRoots {
    fn index_mut(&mut self, cpu: usize) -> &mut (Root, u16) {
        &mut self.now[cpu]
    }
}

/// Per CPU: what it runs and where it stands between user and kernel mode.
#[derive(Clone, Debug, Default)]
pub struct CpuTasks {
    /// Per CPU: what it runs.
    pub tasks: Vec<Task>,
    /// Per CPU: the process whose address space it holds a reference on (the
    /// scheduler's `active_mm`): the one it runs, or lazily the last one it ran.
    /// An exited address space is released only when no CPU holds it.
    pub active: Vec<Option<u32>>,
    /// Per CPU: whether it is in user mode (between kernel operations).
    pub user_mode: Vec<bool>,
    /// Per CPU: whether it is in the middle of a context switch (its task is
    /// the next one, its root and tag may still be the previous one's).
    pub switching: Vec<bool>,
    /// Per CPU in a context switch away from a process: that process. Its thread
    /// is still alive until the switch completes (it is being switched out, not
    /// exiting), so no exit of the process may start elsewhere meanwhile.
    pub leaving: Vec<Option<u32>>,
}

/// The machine's settings for a run: its size and what the policy and the
/// architecture make of it.
#[derive(Clone, Debug, Default)]
pub struct RunConstants {
    /// Pages each address space maps.
    pub pages: usize,
    /// Whether user PTEs are global (the no-ASID baseline).
    pub global_user: bool,
    /// Whether every address space maps a contiguous block (`--teardown`).
    pub contpte: bool,
    /// Whether an invalidation by address also drops the cached walks of its
    /// ASID: x86's `INVLPG` and `INVPCID` by address invalidate every
    /// paging-structure-cache entry of the PCID, whatever the address (Intel SDM
    /// vol. 3A, 4.10.4.1), where arm64's `TLBI VALE1` is leaf-only. Set for x86
    /// policies; constant for a run.
    pub va_drops_walks: bool,
    /// Whether the policy reads each mm's `munmap_inprogress`
    /// ([`Defer::WhileMmFlagged`]): only then do `munmap` and `madvise` keep
    /// the flag, so that it adds no state for other policies. Constant for a
    /// run.
    pub reads_flag: bool,
}

/// An invalidation issued and not yet complete: until its issuing CPU executes
/// a barrier that completes it, every TLB it covers (the issuer's for a local
/// one, every CPU's for a broadcast) may still hold, use and refill what it
/// removes.
///
/// Which invalidations wait, and for what:
/// - arm64: every `TLBI`, local or broadcast (`…IS`), is guaranteed complete
///   only after a `DSB` executed by the PE that issued it, whose domain covers
///   the PEs it applies to (Arm ARM, DDI 0487, "Ordering and completion of TLB
///   maintenance instructions": R_YNJCP, finished for another PE only after a
///   `DSB` by the issuer; R_PSMWS, `DSB NSH` is sufficient for one that
///   applies to a single PE, `DSB ISH` for one that applies to the Inner
///   Shareable domain; R_BLDZX, for the issuer's own TLB, after a `DSB` by it,
///   with no domain named). So `DSB ISH` completes every one; `DSB NSH`
///   completes a local one, and of a broadcast one only the issuer's own TLB
///   ([`Pending::issuer_done`]): the other CPUs' wait for a `DSB ISH`. R_BLDZX
///   also asks for a context synchronisation event after the `DSB` (without
///   FEAT_ETS2) before the issuer's own later accesses are guaranteed not to
///   use what it removed: every access judged here is a user access, made
///   after the exception return that ends the kernel's path, which is one.
///   `DSB ISHST` does not complete one, nor does `ISB`, nor Linux's
///   `smp_mb()` (`DMB ISH`, [`tlbkit_policy::Barrier::Full`]). Linux's
///   `__switch_to` issues
///   `dsb(ish)` ("Complete any pending TLB or cache maintenance on this CPU in
///   case the thread migrates to a different CPU",
///   arch/arm64/kernel/process.c), so a Linux context switch completes the
///   switching CPU's invalidations when it ends.
/// - x86: `INVLPG`, `INVPCID` and a CR3 write are synchronous and never
///   wait here; an `INVLPGB` (a broadcast) is complete on every CPU, its
///   issuer's included, only after a `TLBSYNC` on the CPU that issued it (AMD64
///   APM vol. 3, `TLBSYNC`).
///
/// Completing at the latest point the architecture allows: until then a TLB it
/// covers holds a superset of what it would hold had the invalidation
/// completed earlier (an earlier completion only removes entries, and what it
/// removes is refilled, if at all, from the same page tables the fills here
/// read at every step); when it completes it removes every matching entry,
/// refills included. Every property judges entries only by their presence (a
/// policy cannot see a TLB). The two differ after the completion only if a
/// PTE the invalidation covers changed between the earlier completion and the
/// latest one: an entry refilled from the old PTE in between survives the
/// earlier completion, not the latest. Where that store is the issuer's own
/// and not ordered before the `TLBI` by `DSB ISHST` (it sits in the store
/// buffer), `--memory arm` explores the earlier completion: the completing
/// `DSB` completes before it drains, with a step between. A store of another
/// CPU in the window is that CPU's change, covered by its own flush under the
/// same rule. What is not explored by default: a policy whose correctness
/// rests on an invalidation completing *late*, after a later store, which no
/// kernel here does. `--memory NAME+any` ([`crate::shape::Completion::Any`])
/// explores it: the scheduler may also complete a CPU's pending invalidation
/// at any step before its barrier. At small bounds every registered policy
/// and zoo entry gets the same verdict both ways (`tests/completion.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pending {
    /// What it removes.
    pub op: Tlbi,
    /// Whether it covers every CPU's TLB (otherwise the issuer's only).
    pub broadcast: bool,
    /// A broadcast one whose issuer's own TLB it has already been completed
    /// on, by a `DSB NSH`: it still covers every other CPU's.
    pub issuer_done: bool,
}

/// How much of a pending invalidation a barrier completes
/// ([`Machine::complete`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// None of it: it stays pending as it is.
    Nothing,
    /// Its issuer's own TLB only (arm64's `DSB NSH` and a broadcast `TLBI`):
    /// it stays pending for the other CPUs'.
    IssuersTlb,
    /// Every TLB it still covers.
    Whole,
}

impl Pending {
    /// Returns what a barrier that completes `part` of it still has to do:
    /// the issuer's part of a local one is the whole of it, and a broadcast
    /// one done on its issuer has no such part left.
    pub fn left(&self, part: Part) -> Part {
        match part {
            Part::IssuersTlb if !self.broadcast => Part::Whole,
            Part::IssuersTlb if self.issuer_done => Part::Nothing,
            part => part,
        }
    }

    /// Returns the key the pending list is ordered and hashed by (one per
    /// invalidation, so two lists with the same invalidations are equal).
    /// Its last member is 0 for a local one, 1 for a broadcast one, 3 for a
    /// broadcast one done on its issuer's TLB.
    pub fn key(&self) -> (u8, u64, u64, u64, u8) {
        let asid = |a: tlbkit_policy::Asid| a.get() as u64;
        let (k, a, b, c) = match self.op {
            Tlbi::Va { asid: a, va } => (0, asid(a), va.0, 0),
            Tlbi::VaAllAsids { va } => (1, 0, va.0, 0),
            Tlbi::Asid(a) => (2, asid(a), 0, 0),
            Tlbi::All => (3, 0, 0, 0),
            Tlbi::Range { asid: a, va, pages } => (4, a.map_or(u64::MAX, asid), va.0, pages as u64),
            Tlbi::AllNonGlobal => (5, 0, 0, 0),
        };
        (k, a, b, c, self.broadcast as u8 | (self.issuer_done as u8) << 1)
    }
}

/// What a CPU's speculative fill reads: its root and tag, and the page table
/// of the process that root points at.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Filled {
    root: (Root, u16),
    uid: u32,
    life: Life,
    table: Option<u32>,
    ptes: [Option<Pte>; MAX_PAGES],
}

impl std::hash::Hash for Machine {
    /// Hashes what decides the machine's future: open obligations as a set (their
    /// ids and the order they were opened in do not matter), discharged ones only
    /// through the translations they killed, and frames and process uids up to a
    /// renaming (`Renaming`): two machines that differ only in which frame
    /// number or uid each use got hash alike.
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.hash_as(h, true);
    }
}

thread_local! {
    /// [`Machine::hash_renamed`]'s vectors, kept from one hash to the next.
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

/// An open obligation as the hash orders it: what is not renamed first (slot,
/// version, page, CPU, change), then its uid and frame.
type OpenKey = (u32, u32, Option<u8>, u32, &'static str, u32, u32);

/// Vectors a machine's hash sorts renamed sets in.
#[derive(Default)]
struct Scratch {
    open: Vec<OpenKey>,
    entries: Vec<Entry>,
    walks: Vec<(u16, u32, u32)>,
    deferred: Vec<Deferred>,
    dead: Vec<(u32, u8, u32)>,
}

/// A renaming of labels (frames, uids) by order of first appearance.
///
/// Renaming frames and uids is sound because both are labels and nothing that
/// runs can tell one apart from another: the kernel and the oracle only compare
/// them for equality, a new uid is only ever a fresh one (above every uid
/// given), the free list keeps its order (which the renaming keeps), no policy
/// sees either (the contiguous block's folio frames, which a policy's PTE
/// values do name, lie above the renamed range and keep their numbers), and no
/// CPU's history, store buffer or pending interrupt holds one. So two states
/// whose machines rename alike reach the same states, up to the same renaming,
/// and the same verdicts.
struct Renaming {
    names: [u8; RENAMED],
    next: u8,
    /// Whether to rename at all (every label is its own name otherwise).
    on: bool,
}

/// Labels below this are renamed; a label at or above it keeps its number,
/// moved above every name given (`label + RENAMED`), so none collides: it is
/// still told apart, only not merged. The frame pool (`mms * (pages + 1) + 2`,
/// at most 42) stays below it, and so do the uids of any run that forks fewer
/// than 55 times; folio frames (from `0x1000`) are above it.
const RENAMED: usize = 64;

impl Renaming {
    fn new(on: bool) -> Self {
        Renaming { names: [u8::MAX; RENAMED], next: 0, on }
    }

    /// Returns the name of `label`, giving it the next free one if it has none.
    fn name(&mut self, label: u32) -> u32 {
        if !self.on {
            return label;
        }
        match self.names.get_mut(label as usize) {
            Some(n) => {
                if *n == u8::MAX {
                    *n = self.next;
                    self.next += 1;
                }
                *n as u32
            }
            None => label + RENAMED as u32,
        }
    }
}

impl Machine {
    /// Returns a machine of `cpus` CPUs and `mms` address-space slots of
    /// `consts.pages` pages each (1 to [`MAX_PAGES`]), every CPU idle on the
    /// reserved root, every frame free.
    pub fn new(cpus: usize, mms: usize, consts: RunConstants) -> Self {
        let pages = consts.pages;
        debug_assert!((1..=MAX_PAGES).contains(&pages));
        let frames = (mms * (pages + 1) + 2) as u32;
        let empty = Space {
            uid: 0,
            life: Life::Free,
            table: None,
            ptes: [None; MAX_PAGES],
            vers: [0; MAX_PAGES],
            detached: 0,
            block: Vec::new(),
            written: 0,
            batched: 0,
            watching: 0,
            munmap_inprogress: false,
        };
        Machine {
            spaces: vec![empty; mms + 1],
            free: (0..frames).rev().collect(),
            obligations: Vec::new(),
            dead: SortedSet::default(),
            tlbs: vec![SortedSet::default(); cpus],
            walks: vec![SortedSet::default(); cpus],
            roots: CpuRoots { now: vec![(Root::Reserved, 0); cpus], unsynced: vec![Vec::new(); cpus] },
            touched: vec![false; mms + 1],
            mm_lock: vec![MmapLock::default(); mms + 1],
            ptl_held: vec![None; mms + 1],
            in_irq: vec![false; cpus],
            in_batch_flush: vec![false; cpus],
            deferred: vec![SortedSet::default(); cpus],
            lazy_offer: vec![None; cpus],
            lazy: Vec::new(),
            pending: vec![Vec::new(); cpus],
            sched: CpuTasks {
                tasks: vec![Task::Idle; cpus],
                active: vec![None; cpus],
                user_mode: vec![false; cpus],
                switching: vec![false; cpus],
                leaving: vec![None; cpus],
            },
            consts,
            next_uid: 1,
            filled: vec![None; cpus],
        }
    }

    /// Takes the next free frame; reports `no_reuse_while_mapped` if an open
    /// obligation still covers it. `None` when no frame is free.
    pub fn alloc_frame(&mut self, cpu: usize) -> Result<Option<u32>, Violation> {
        let Some(f) = self.free.pop() else { return Ok(None) };
        if let Some(o) = self.obligations.iter().find(|o| !o.discharged && o.stale.frame == f) {
            let what = match o.stale.page {
                Some(p) => format!("page {:#x}", va_of(p as usize)),
                None => "page-table page".to_string(),
            };
            return Err(Violation {
                property: "no_reuse_while_mapped",
                cpu,
                detail: format!(
                    "frame {f} handed out again while the {} of mm{} (uid {}) that mapped it, removed by cpu{} ({}), is \
                     not yet flushed",
                    what, o.stale.slot, o.stale.uid, o.cpu, o.stale.change
                ),
            });
        }
        Ok(Some(f))
    }

    /// Takes over the completion of CPU `cpu`'s flush of slot `slot` with the
    /// smallest free ticket, if the kernel allows it under `rule`
    /// (`defer_flush`): the flush CPU `cpu`'s `munmap` or `madvise` offered
    /// ([`Defer::OwnUnmap`], or [`Defer::WhileMmFlagged`] while the flag is
    /// still set), which holds that call's memory; or, under
    /// [`Defer::WhileMmFlagged`] alone, any other flush of a slot whose
    /// `munmap_inprogress` is set, which holds nothing (its caller treats it as
    /// done when it returns). Returns the ticket and whether it holds memory;
    /// `None` when the kernel does not allow it (an offer then stays until
    /// the flush returns).
    pub fn take_lazy(&mut self, cpu: usize, slot: u32, rule: Defer) -> Option<(u32, bool)> {
        let own = self.lazy_offer[cpu].as_ref().is_some_and(|l| l.slot == slot);
        let flagged = (slot as usize) < self.spaces.len() && self.spaces[slot as usize].munmap_inprogress;
        let ok = match rule {
            Defer::OwnUnmap => own,
            Defer::WhileMmFlagged => flagged,
        };
        if !ok {
            return None;
        }
        let mut l = match self.lazy_offer[cpu].take() {
            Some(l) if own => l,
            other => {
                self.lazy_offer[cpu] = other;
                LazyFlush {
                    ticket: 0,
                    obligations: Vec::new(),
                    frames: Vec::new(),
                    flush: BARE_FLUSH,
                    slot,
                    uid: self.spaces[slot as usize].uid,
                    detached: 0,
                }
            }
        };
        let t = (1..).find(|t| !self.lazy.iter().any(|x| x.ticket == *t)).expect("a free ticket");
        l.ticket = t;
        let at = self.lazy.partition_point(|x| x.ticket < t);
        self.lazy.insert(at, l);
        Some((t, own))
    }

    /// Removes and returns the lazy flush of `ticket`, if it is pending.
    pub fn complete_lazy(&mut self, ticket: u32) -> Option<LazyFlush> {
        let i = self.lazy.iter().position(|l| l.ticket == ticket)?;
        Some(self.lazy.remove(i))
    }

    /// Returns `frames` to the free list in their order: the last one is the
    /// next [`Machine::alloc_frame`] hands out.
    #[inline]
    pub fn release_frames(&mut self, frames: &[u32]) {
        for &f in frames {
            self.free.push(f);
        }
    }

    /// Starts a process in free slot `slot` with every page mapped. Returns
    /// `Ok(false)` if frames ran out (the fork fails, as with `ENOMEM`).
    pub fn fork(&mut self, slot: u32, cpu: usize) -> Result<bool, Violation> {
        debug_assert!(matches!(self.spaces[slot as usize].life, Life::Free | Life::Forking));
        let uid = self.next_uid;
        self.next_uid += 1;
        let initial = uid < self.spaces.len() as u32;
        let s = &mut self.spaces[slot as usize];
        s.uid = uid;
        s.life = Life::Live;
        // The initial processes (uids 1..=mms) start alike; a forked one does not.
        self.touched[slot as usize] = !initial;
        s.table = None;
        s.ptes = [None; MAX_PAGES];
        s.vers = [0; MAX_PAGES];
        s.detached = 0;
        s.block =
            if self.consts.contpte { (0..BLOCK).map(|j| mapped_block_pte(slot, j)).collect() } else { Vec::new() };
        s.written = 0;
        s.batched = 0;
        s.watching = 0;
        s.munmap_inprogress = false;
        for p in 0..self.consts.pages {
            if !self.map(slot, p, cpu)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Maps page `p` of `slot` to a new frame (allocating the page-table page
    /// first if the range has none). `Ok(false)` if frames ran out.
    pub fn map(&mut self, slot: u32, p: usize, cpu: usize) -> Result<bool, Violation> {
        if self.spaces[slot as usize].table.is_none() {
            let Some(t) = self.alloc_frame(cpu)? else { return Ok(false) };
            self.spaces[slot as usize].table = Some(t);
            self.note_rehook(slot, t);
        }
        let Some(f) = self.alloc_frame(cpu)? else { return Ok(false) };
        let s = &mut self.spaces[slot as usize];
        s.vers[p] += 1;
        s.ptes[p] = Some(Pte { frame: f, ver: s.vers[p] });
        Ok(true)
    }

    /// Points PTE `p` of `slot` at frame `f` (a copy-on-write fault's or a
    /// migration's new page), with a new version.
    pub fn set_pte(&mut self, slot: u32, p: usize, f: u32) {
        let s = &mut self.spaces[slot as usize];
        s.vers[p] += 1;
        s.ptes[p] = Some(Pte { frame: f, ver: s.vers[p] });
    }

    /// Clears PTE `p` of `slot` and opens an obligation for it; returns its id
    /// and the frame, or `None` if the PTE was not valid.
    pub fn clear_pte(&mut self, slot: u32, p: usize, change: &'static str, cpu: usize) -> Option<(usize, u32)> {
        let r = self.clear_pte_deferred(slot, p, change, cpu)?;
        self.spaces[slot as usize].ptes[p] = None;
        Some(r)
    }

    /// Opens the obligation for clearing PTE `p` of `slot` but leaves the PTE
    /// valid in memory: the clearing store waits in the CPU's store buffer (see
    /// [`Machine::drain_pte`]). Returns the obligation's id and the frame.
    pub fn clear_pte_deferred(
        &mut self,
        slot: u32,
        p: usize,
        change: &'static str,
        cpu: usize,
    ) -> Option<(usize, u32)> {
        let s = &self.spaces[slot as usize];
        let pte = s.ptes[p]?;
        self.obligations.push(Obligation {
            stale: Stale { uid: s.uid, slot, page: Some(p as u8), ver: pte.ver, frame: pte.frame, change },
            cpu: cpu as u32,
            discharged: false,
        });
        Some((self.obligations.len() - 1, pte.frame))
    }

    /// Makes a buffered clear of PTE `p` of `slot` (version `ver`) visible.
    pub fn drain_pte(&mut self, slot: u32, p: usize, ver: u32) {
        let s = &mut self.spaces[slot as usize];
        if s.ptes[p].is_some_and(|e| e.ver == ver) {
            s.ptes[p] = None;
        }
    }

    /// Unhooks the page-table page of `slot` and opens an obligation for it.
    pub fn clear_table(&mut self, slot: u32, change: &'static str, cpu: usize) -> Option<(usize, u32)> {
        let s = &mut self.spaces[slot as usize];
        let t = s.table.take()?;
        let uid = s.uid;
        self.obligations.push(Obligation {
            stale: Stale { uid, slot, page: None, ver: 0, frame: t, change },
            cpu: cpu as u32,
            discharged: false,
        });
        Some((self.obligations.len() - 1, t))
    }
}

/// Returns whether the valid contiguous PTEs of `block` agree: one protection,
/// and each maps the frame its place in a 64 KB-aligned run says.
pub fn block_agrees(block: &[PteVal]) -> bool {
    let mut cont = block.iter().enumerate().filter(|(_, p)| p.valid_cont());
    let Some((j0, first)) = cont.next() else { return true };
    let base = first.pfn.wrapping_sub(j0 as u64);
    base.is_multiple_of(CONT_PTES)
        && cont.all(|(j, p)| p.prot() == first.prot() && p.pfn == base.wrapping_add(j as u64))
}

/// Returns whether invalidation `op` removes entry `e`.
fn removes(op: Tlbi, e: &Entry) -> bool {
    // A 64 KB entry goes with an invalidation of any page it covers.
    let covers = |va: tlbkit_policy::VirtAddr| match page_of(va.0) {
        None => false,
        Some(p) if e.big => p >= BLOCK_PAGE,
        Some(p) => p == e.page as usize,
    };
    match op {
        Tlbi::Va { asid, va } => !e.global && e.asid == asid.get() && covers(va),
        Tlbi::VaAllAsids { va } => covers(va),
        Tlbi::Asid(a) => !e.global && e.asid == a.get(),
        Tlbi::All => true,
        Tlbi::AllNonGlobal => !e.global,
        Tlbi::Range { asid, va, pages } => {
            let hit = (0..pages.max(1) as u64).any(|i| covers(va.add_pages(i)));
            hit && asid.is_none_or(|a| !e.global && e.asid == a.get())
        }
    }
}

/// Describes an entry for a trace or a violation.
pub fn describe(e: &Entry) -> String {
    let tag = if e.global { "global".to_string() } else { format!("asid {}", e.asid) };
    if e.big {
        return format!(
            "the 64 KB entry for {:#x} ({tag}, frames {}-{}, from uid {})",
            va_of(e.page as usize),
            e.frame,
            e.frame + CONT_PTES as u32 - 1,
            e.uid
        );
    }
    if e.page as usize >= BLOCK_PAGE {
        return format!(
            "the 4 KB entry for {:#x} ({tag}, frame {}, from uid {})",
            va_of(e.page as usize),
            e.frame,
            e.uid
        );
    }
    format!("the entry for {:#x} ({tag}, frame {}, from uid {} PTE v{})", va_of(e.page as usize), e.frame, e.uid, e.ver)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tlbkit_policy::{Asid, MmId, VirtAddr};

    /// One CPU running mm1, whose block is mapped, with its TLB filled.
    fn running() -> Machine {
        let mut m = Machine::new(1, 1, RunConstants { pages: 1, contpte: true, ..RunConstants::default() });
        m.fork(1, 0).unwrap();
        m.roots[0] = (Root::Mm(MmId(1)), 1);
        m.fill_all();
        m
    }

    /// `m` with every frame renamed by `f` and every uid by `u`.
    fn renamed(m: &Machine, f: impl Fn(u32) -> u32, u: impl Fn(u32) -> u32) -> Machine {
        let mut r = m.clone();
        for s in &mut r.spaces {
            s.uid = u(s.uid);
            s.table = s.table.map(&f);
            for p in s.ptes.iter_mut().flatten() {
                p.frame = f(p.frame);
            }
        }
        r.free.iter_mut().for_each(|x| *x = f(*x));
        for o in &mut r.obligations {
            (o.stale.uid, o.stale.frame) = (u(o.stale.uid), f(o.stale.frame));
        }
        r.dead = r.dead.iter().map(|&(id, p, v)| (u(id), p, v)).collect();
        for t in &mut r.tlbs {
            *t = t.iter().map(|e| Entry { uid: u(e.uid), frame: f(e.frame), ..*e }).collect();
        }
        for w in &mut r.walks {
            *w = w.iter().map(|&(a, fr, id)| (a, f(fr), u(id))).collect();
        }
        r
    }

    fn hash_of(m: &Machine, rename: bool) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        m.hash_as(&mut h, rename);
        std::hash::Hasher::finish(&h)
    }

    #[test]
    fn machines_that_differ_only_in_frame_numbers_and_uids_hash_alike() {
        // Two processes with a page each, both in the TLB, one page cleared and
        // its flush pending: frames in tables, pages, the free list, an
        // obligation, TLB and walk-cache entries.
        let mut m = Machine::new(1, 2, RunConstants { pages: 1, ..RunConstants::default() });
        m.fork(1, 0).unwrap();
        m.fork(2, 0).unwrap();
        for mm in [2, 1] {
            m.roots[0] = (Root::Mm(MmId(mm)), mm as u16);
            m.fill_all();
        }
        m.clear_pte_deferred(1, 0, "munmap", 0).expect("page 0 of mm1 is mapped");
        // Six frames (`mms * (pages + 1) + 2`), numbered backwards; uids 1 and 2 swapped.
        let swapped = renamed(&m, |f| 5 - f, |u| if u == 0 { 0 } else { 3 - u });
        assert_ne!(hash_of(&m, false), hash_of(&swapped, false), "the renaming changed nothing");
        assert_eq!(hash_of(&m, true), hash_of(&swapped, true));
        // A TLB entry pointing at another frame than its PTE did is another state.
        let mut moved = m.clone();
        let e = *moved.tlbs[0].iter().find(|e| !e.big && e.uid == moved.spaces[2].uid).expect("mm2's entry");
        moved.tlbs[0].remove(&e);
        moved.tlbs[0].insert(Entry { frame: moved.free[0], ..e });
        assert_ne!(hash_of(&m, true), hash_of(&moved, true));
        // So is one whose uid names the other process.
        let mut other = m.clone();
        other.tlbs[0].remove(&e);
        other.tlbs[0].insert(Entry { uid: m.spaces[1].uid, ..e });
        assert_ne!(hash_of(&m, true), hash_of(&other, true));
    }

    #[test]
    fn an_invalidation_by_address_drops_the_cached_walks_of_its_asid_on_x86_only() {
        for x86 in [false, true] {
            let mut m = Machine::new(1, 1, RunConstants { pages: 2, ..RunConstants::default() });
            m.consts.va_drops_walks = x86;
            m.fork(1, 0).unwrap();
            m.roots[0] = (Root::Mm(MmId(1)), 1);
            assert!(m.fill(&mut Vec::new()));
            assert_eq!(m.walks[0].len(), 1);
            let asid = Asid::new(1, 8).unwrap();
            assert_eq!(m.tlbi(0, Tlbi::Va { asid, va: VirtAddr(va_of(0)) }, Scope::Local), 1);
            // arm64's TLBI VALE1 is leaf-only; x86's INVLPG drops the PCID's walks.
            assert_eq!(m.walks[0].is_empty(), x86);
            assert_eq!(m.tlbs[0].len(), 1, "the other page's entry stays");
        }
    }

    #[test]
    fn a_fill_from_what_was_filled_from_adds_nothing_until_an_invalidation_takes_entries() {
        let mut m = Machine::new(2, 2, RunConstants { pages: 2, ..RunConstants::default() });
        m.fork(1, 0).unwrap();
        m.fork(2, 0).unwrap();
        m.roots[0] = (Root::Mm(MmId(1)), 1);
        let mut new = Vec::new();
        assert!(m.fill(&mut new));
        assert_eq!(new.len(), 2, "{new:?}");
        new.clear();
        assert!(!m.fill(&mut new), "the same root and page table fill nothing new");
        // A local invalidation takes one page; the next fill puts it back.
        let asid = Asid::new(1, 8).unwrap();
        assert_eq!(m.tlbi(0, Tlbi::Va { asid, va: VirtAddr(va_of(1)) }, Scope::Local), 1);
        assert!(m.fill(&mut new));
        assert_eq!(new.iter().map(|(c, e)| (*c, e.page)).collect::<Vec<_>>(), vec![(0, 1)]);
        // A broadcast one from the other CPU, by ASID, takes both pages and the walk.
        new.clear();
        m.tlbi(1, Tlbi::Asid(asid), Scope::Broadcast);
        assert!(m.tlbs[0].is_empty() && m.walks[0].is_empty());
        assert!(m.fill(&mut new) && new.len() == 2);
        // A flushing root write of the same root and tag, and a changed PTE.
        new.clear();
        m.write_root(0, Root::Mm(MmId(1)), 1, false, RootWalks::NewOnly);
        assert!(m.fill(&mut new) && new.len() == 2);
        new.clear();
        m.spaces[1].ptes[0].as_mut().unwrap().ver += 1;
        assert!(m.fill(&mut new) && new.len() == 1);
        // The other CPU, on its first root, fills from nothing filled before.
        new.clear();
        m.roots[1] = (Root::Mm(MmId(2)), 2);
        assert!(m.fill(&mut new) && new.iter().all(|(c, _)| *c == 1) && new.len() == 2);
    }

    #[test]
    fn a_pending_invalidation_removes_nothing_until_it_completes_then_takes_refills_too() {
        let mut m = Machine::new(2, 1, RunConstants { pages: 2, ..RunConstants::default() });
        m.fork(1, 0).unwrap();
        m.roots[0] = (Root::Mm(MmId(1)), 1);
        m.fill_all();
        let asid = Asid::new(1, 8).unwrap();
        let op = Tlbi::Va { asid, va: VirtAddr(va_of(0)) };
        // Issued by cpu1, broadcast: cpu0 keeps the entry, a second issue is the same one.
        assert!(m.issue(1, op, Scope::Broadcast));
        assert!(!m.issue(1, op, Scope::Broadcast));
        assert_eq!((m.tlbs[0].len(), m.pending[1].len()), (2, 1));
        // The PTE changes meanwhile and cpu0 refills from it: both versions held.
        m.spaces[1].ptes[0].as_mut().unwrap().ver += 1;
        m.fill_all();
        assert_eq!(m.tlbs[0].len(), 3);
        // Completing something else leaves it pending; completing it takes both.
        let mut done = Vec::new();
        let local = |p: &Pending| if p.broadcast { Part::Nothing } else { Part::Whole };
        m.complete(1, local, |p, n, _| done.push((p, n)));
        assert!(done.is_empty() && m.pending[1].len() == 1);
        m.complete(1, |_| Part::Whole, |p, n, _| done.push((p, n)));
        assert_eq!(done, vec![(Pending { op, broadcast: true, issuer_done: false }, 2)]);
        assert!(m.pending[1].is_empty() && m.tlbs[0].iter().all(|e| e.page == 1));
        // Pending lists are state: machines that differ only there hash apart.
        let mut other = m.clone();
        other.issue(0, op, Scope::Local);
        assert_ne!(hash_of(&m, true), hash_of(&other, true));
    }

    #[test]
    fn a_dsb_nsh_completes_a_broadcast_invalidation_on_its_issuers_tlb_only() {
        let mut m = Machine::new(2, 1, RunConstants { pages: 2, ..RunConstants::default() });
        m.fork(1, 0).unwrap();
        m.roots[0] = (Root::Mm(MmId(1)), 1);
        m.roots[1] = (Root::Mm(MmId(1)), 1);
        m.fill_all();
        assert_eq!((m.tlbs[0].len(), m.tlbs[1].len()), (2, 2));
        let asid = Asid::new(1, 8).unwrap();
        let op = Tlbi::Va { asid, va: VirtAddr(va_of(0)) };
        let pages = |m: &Machine, c: usize| m.tlbs[c].iter().map(|e| e.page).collect::<Vec<_>>();
        assert!(m.issue(1, op, Scope::Broadcast));
        let mut done = Vec::new();
        m.complete(1, |_| Part::IssuersTlb, |p, n, rest| done.push((p, n, rest)));
        let rest = Pending { op, broadcast: true, issuer_done: true };
        assert_eq!(done, vec![(Pending { issuer_done: false, ..rest }, 1, Some(rest))]);
        assert_eq!((pages(&m, 0), pages(&m, 1)), (vec![0, 1], vec![1]));
        assert_eq!(m.pending[1], vec![rest]);
        // Done and not done differ in the state.
        let mut other = m.clone();
        other.pending[1][0].issuer_done = false;
        assert_ne!(hash_of(&m, true), hash_of(&other, true));
        // A second DSB NSH has nothing left to do; the issuer refills from the
        // page table, and that entry survives the completion elsewhere.
        m.complete(1, |_| Part::IssuersTlb, |p, n, rest| done.push((p, n, rest)));
        assert_eq!(done.len(), 1);
        m.fill_all();
        assert_eq!(pages(&m, 1).len(), 2);
        m.complete(1, |_| Part::Whole, |p, n, rest| done.push((p, n, rest)));
        assert_eq!(done[1], (rest, 1, None));
        assert_eq!((pages(&m, 0), pages(&m, 1).len()), (vec![1], 2));
        assert!(m.pending[1].is_empty());
        // A local one is done whole by the issuer's part.
        m.issue(0, op, Scope::Local);
        m.complete(0, |_| Part::IssuersTlb, |p, n, rest| done.push((p, n, rest)));
        assert_eq!(done[2].2, None);
        assert!(m.pending[0].is_empty());
    }

    #[test]
    fn a_folded_block_fills_one_64k_entry_that_any_page_invalidation_removes() {
        let mut m = running();
        let big: Vec<_> = m.tlbs[0].iter().filter(|e| e.big).copied().collect();
        assert_eq!(big.len(), 1);
        assert_eq!((big[0].page as usize, big[0].frame as u64), (BLOCK_PAGE, folio_pfn(1)));
        assert!(m.check_block().is_ok());
        let asid = Asid::new(1, 8).unwrap();
        assert_eq!(m.tlbi(0, Tlbi::Va { asid, va: VirtAddr(va_of(BLOCK_PAGE + 9)) }, Scope::Local), 1);
        assert!(m.tlbs[0].iter().all(|e| !e.big));
    }

    #[test]
    fn a_misprogrammed_block_and_a_64k_entry_beside_a_4k_one_are_conflicts() {
        let mut m = running();
        m.spaces[1].block[3].pfn += 1;
        let v = m.check_block().unwrap_err();
        assert_eq!(v.property, "no_tlb_conflict");
        assert!(v.detail.contains("disagree"), "{}", v.detail);

        // Rewriting one PTE without the contiguous bit, without breaking the block
        // first: the walk caches a 4 KB entry while the 64 KB one is still there.
        let mut m = running();
        m.spaces[1].block[5] = m.spaces[1].block[5].mknoncont();
        m.fill_all();
        let v = m.check_block().unwrap_err();
        assert_eq!(v.property, "no_tlb_conflict");
        assert!(v.detail.contains("holds both the 64 KB entry for 0x600000"), "{}", v.detail);
    }
}
