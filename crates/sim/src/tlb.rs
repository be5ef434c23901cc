//! One core's translation caches: a fully associative L1 data TLB, a set-associative
//! unified L2 TLB and a page-walk cache, all with LRU replacement.
//!
//! Entries are tagged with an ASID and a global bit and come in three sizes: 4 KB,
//! 64 KB (a block of 16 PTEs with the contiguous bit, cached as one entry) and
//! 2 MB. A by-VA invalidation of any page a 64 KB entry covers removes it. Each entry also remembers *ground truth* the policies never see: the
//! address space it was filled from (`mm_uid`, never reused) and the version of
//! the PTE it was filled from. The oracle judges every use with those.
//!
//! Two summaries say cheaply what a TLB may hold, so that an invalidation (and the
//! interconnect, which delivers a broadcast only to TLBs that may hold what it
//! removes, see [`crate::holders`]) can skip a TLB that holds nothing of it: a
//! filter of the ASIDs non-global entries were filled under ([`Tlb::may_hold`]),
//! and a count of valid entries per bucket of 2 MB blocks ([`Tlb::may_hold_block`]).
//! Both only ever err towards "may hold". A third, [`Tlb::may_hold_cont`], says
//! whether a 64 KB entry may be held: until one is filled, lookups and
//! invalidations do not probe for that size, so a run without contiguous PTEs
//! pays nothing for it.
//!
//! A run of consecutive pages that miss the L1 and hit the L2 (the steady state
//! of a loop over more pages than the L1 holds) takes a fast path,
//! [`Tlb::sweep`]: it probes the L2 and moves its LRU stamps page by page as a
//! lookup does, but defers the copies into the L1, of which only the last
//! L1-size survive (see [`Deferred`]). A lookup or a walk's fill of the run's
//! next page adds to them; every other method that reads the L1 settles them
//! first, so nothing outside the fast path ever sees a TLB with copies owed.
//! Copies that replace the whole L1 are settled by parking them ([`Parked`]):
//! they are written into their slots only when something reads them, which
//! in such a loop is seldom before the L1's next wholesale replacement.

use crate::pagetable::{PteRef, TableRef, CONT_PTES, SHIFT_2M, SHIFT_4K, SHIFT_64K};

/// Entry flag: the entry is global (matches every ASID).
pub const F_GLOBAL: u8 = 1;
/// Entry flag: the translation allows writes.
pub const F_WRITE: u8 = 2;
/// Entry flag: the entry maps a 2 MB block.
pub const F_HUGE: u8 = 4;
/// Entry flag: the entry maps a 64 KB contiguous block (16 PTEs with `P_CONT`).
pub const F_CONT: u8 = 8;
/// Entry flag (64 KB entries only): the entry has recorded a write, i.e. it was
/// filled from a dirty PTE or its first write set the dirty state in the block;
/// later writes through it update no PTE (FEAT_HAFDBS caches the dirty state).
pub const F_DIRTY: u8 = 16;
/// The flags that give an entry's size.
const F_SIZE: u8 = F_HUGE | F_CONT;
/// Page shift by `(flags & F_SIZE) >> 2`: 4 KB, 2 MB, 64 KB (the fourth is unused).
const SHIFT_BY_SIZE: [u32; 4] = [SHIFT_4K, SHIFT_2M, SHIFT_64K, SHIFT_2M];
/// Size code of [`key`] by `(flags & F_SIZE) >> 2`: 4 KB 0, 2 MB 2, 64 KB 1.
const CODE_BY_SIZE: [u64; 4] = [0, 2, 1, 2];
/// A key no entry has (size code 3): what a lookup compares against for a size the
/// TLB cannot hold.
const NO_KEY: u64 = 3;

/// A cached translation.
#[derive(Clone, Copy, Debug, Default)]
pub struct TlbEntry {
    /// `va >> 12` for 4 KB entries, `va >> 16` for 64 KB ones, `va >> 21` for 2 MB ones.
    pub tag: u64,
    /// Physical frame number of the page (of the block's first page for 64 KB and 2 MB).
    pub pfn: u64,
    /// ASID the entry was filled under (ignored when global).
    pub asid: u16,
    /// `F_*` flags.
    pub flags: u8,
    /// Whether the slot holds an entry.
    pub valid: bool,
    /// Ground truth: which address space (by never-reused uid) it came from.
    pub mm_uid: u32,
    /// Ground truth: the version of the PTE it was filled from. For a 64 KB entry,
    /// the oldest state of the block it stands for: the least version of the 16
    /// PTEs, a PTE that was invalid at the fill counting as just older than the
    /// change that cleared it (see `Sim`'s walk).
    pub ver: u64,
    /// Ground truth: where that PTE lives (for a 64 KB entry, the block's first
    /// PTE; the block's PTEs follow it in the arena).
    pub pte: PteRef,
}

impl TlbEntry {
    /// Returns the page shift of the entry.
    #[inline]
    pub fn shift(&self) -> u32 {
        SHIFT_BY_SIZE[((self.flags & F_SIZE) >> 2) as usize]
    }

    /// Returns whether the entry maps a 64 KB contiguous block.
    #[inline]
    pub fn cont(&self) -> bool {
        self.flags & F_CONT != 0
    }

    /// Returns the arena index of the PTE that maps `va` in this entry's ground
    /// truth: the entry's own, or for a 64 KB entry the one of `va`'s page.
    #[inline]
    pub fn pte_of(&self, va: u64) -> PteRef {
        if self.cont() {
            self.pte + ((va >> SHIFT_4K) & (CONT_PTES - 1)) as PteRef
        } else {
            self.pte
        }
    }

    /// Returns the first virtual address the entry covers.
    pub fn va(&self) -> u64 {
        self.tag << self.shift()
    }

    /// Returns the number of the 2 MB block the entry lies in (`va >> 21`).
    #[inline]
    fn block(&self) -> u64 {
        self.tag >> (SHIFT_2M - self.shift())
    }

    /// Returns whether the entry is global.
    pub fn global(&self) -> bool {
        self.flags & F_GLOBAL != 0
    }

    /// Returns whether the entry is usable by a CPU running `asid`.
    pub fn usable_under(&self, asid: u16) -> bool {
        self.valid && (self.global() || self.asid == asid)
    }
}

/// A cached level-2 table descriptor: a walk for a VA under it needs one load.
#[derive(Clone, Copy, Debug, Default)]
struct PwcEntry {
    valid: bool,
    /// `va >> 21`.
    key: u64,
    asid: u16,
    /// Kernel (TTBR1) walks are cached regardless of ASID.
    global: bool,
    /// Ground truth: the last-level table the descriptor pointed at.
    table: TableRef,
    /// Ground truth: the never-reused id of the address space walked.
    mm_uid: u32,
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

/// Where a lookup hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hit {
    /// In the L1 TLB.
    L1(usize),
    /// In the L2 TLB (and was copied into the L1).
    L2(usize),
}

/// What an invalidation removes, in the TLB's own terms.
#[derive(Clone, Copy, Debug)]
pub enum Inval {
    /// Non-global entries of `asid` covering `va`.
    Va { asid: u16, va: u64 },
    /// Every entry covering `va`, global too.
    VaAll { va: u64 },
    /// Non-global entries of `asid`.
    Asid(u16),
    /// Everything.
    All,
    /// Every non-global entry.
    AllNonGlobal,
}

impl Inval {
    fn removes(&self, e: &TlbEntry) -> bool {
        match *self {
            Inval::Va { asid, va } => !e.global() && e.asid == asid && e.tag == va >> e.shift(),
            Inval::VaAll { va } => e.tag == va >> e.shift(),
            Inval::Asid(a) => !e.global() && e.asid == a,
            Inval::All => true,
            Inval::AllNonGlobal => !e.global(),
        }
    }

    fn removes_pwc(&self, p: &PwcEntry) -> bool {
        match *self {
            Inval::Va { asid, va } => !p.global && p.asid == asid && p.key == va >> SHIFT_2M,
            Inval::VaAll { va } => p.key == va >> SHIFT_2M,
            Inval::Asid(a) => !p.global && p.asid == a,
            Inval::All => true,
            Inval::AllNonGlobal => !p.global,
        }
    }
}

/// One core's TLBs.
#[derive(Clone)]
pub struct Tlb {
    l1: Vec<TlbEntry>,
    /// The L1's keys ([`key`]), their index, its free slots and recency order.
    l1_slots: Slots,
    l2: Vec<TlbEntry>,
    /// The L2's LRU stamps: the clock's tick of each slot's last fill or hit.
    l2_lru: Vec<u64>,
    /// Mirror of the L2's tags, as for the L1.
    l2_keys: Vec<u64>,
    /// [`asid_tag`] of each L2 slot: an invalidation by ASID compares these, 64
    /// at a time, instead of reading whole entries.
    l2_asids: Vec<u32>,
    /// [`asid_tag`] of each L1 slot, for the same.
    l1_asids: Vec<u32>,
    l2_ways: usize,
    l2_sets: usize,
    pwc: Vec<PwcEntry>,
    /// The walk cache's keys (the 2 MB block number), as for the L1.
    pwc_slots: Slots,
    /// [`asid_tag`]s of the walk cache's slots.
    pwc_asids: Vec<u32>,
    clock: u64,
    /// A filter of the ASIDs non-global entries were filled under (bit
    /// [`asid_bucket`]), cleared only when everything is invalidated: an
    /// invalidation for an ASID whose bit is clear has nothing to remove and skips
    /// the scan.
    asids: Box<[u64; ASID_FILTER_WORDS]>,
    /// Valid entries of every level (L1, L2, walk cache) by [`block_bucket`] of
    /// their 2 MB block: a bucket at zero holds nothing an invalidation by VA in
    /// one of its blocks could remove.
    /// (A fixed-size array: a bucket indexes it with no check.)
    blocks: Box<[u16; BLOCK_BUCKETS]>,
    /// Whether a 64 KB entry may be held: set by the first such fill, cleared
    /// when everything is invalidated.
    conts: bool,
    /// Valid non-global entries of every level by [`asid_count_bucket`] of their
    /// ASID, exact (unlike the filter): an invalidation by ASID whose bucket is at
    /// zero has nothing to remove and reads no slot. A TLB the interconnect
    /// still delivers to because its filter says "may hold" (an mm flushed
    /// again and again while running elsewhere or nowhere) costs one read.
    asid_counts: Box<[u16; ASID_COUNT_BUCKETS]>,
    /// L1 copies of L2 hits that [`Tlb::sweep`] owes, applied by [`Tlb::settle`].
    deferred: Deferred,
    /// The copies of a run that replaced the whole L1, not yet written into it.
    parked: Parked,
    /// Runs of pages swept before whose L2 stamps are kept as one number each.
    runs: Box<Runs>,
    /// Bit `k` set: run `k` of `runs` is live. (Here, not in the box: a TLB
    /// with none reads nothing of them.)
    runs_live: u8,
}

/// The L1 copies [`Tlb::sweep`] owes: the L2 slots it hit, in order, for a run
/// of consecutive 4 KB pages under one ASID, none of which the L1 held.
///
/// Why they can wait: a lookup that misses the L1 and hits the L2 copies the
/// entry into the L1's victim, and the victims of `L` such copies in a row (`L`
/// the L1's size) are a fixed cycle: the empty slots in increasing order, then
/// the held slots from least recently used (each copy moves its slot to the
/// most recent end, so after the cycle the order starts again). Of `m` copies
/// only the last `min(m, L)` survive, and copy `j` lands in slot `cycle[j % L]`;
/// an entry a copy evicts was not one the run's pages needed (the run checks
/// every page against the L1 as it was, until its copies have replaced every
/// slot and nothing of that L1 is left, and its own copies are of other pages).
/// Nothing else reads the L1 while copies are owed: every method of [`Tlb`]
/// that reads it settles them first, but for a lookup of the run's next page
/// and the fill of its walked translation, which add their copy to them (both
/// see the L1 as the run found it, which holds nothing of that page). The L2
/// entries they name do not change before: an invalidation settles first, and
/// a fill whose L2 victim is the original of a copy that survives does too.
/// The walk cache shares only the clock and the counts with the L1, and copies
/// change the counts by adding, so its lookups and fills let them wait. So
/// the TLB that [`Tlb::settle`] leaves is the one the lookups one by
/// one would have left, entries, recency order, key index and counts alike.
/// (The lookups and fills themselves settle by [`Tlb::settle_run`], which
/// parks `L` copies or more instead of writing them: see [`Parked`].)
#[derive(Clone)]
struct Deferred {
    /// The L2 slot of copy `j`, at `j % MAX_L1_ENTRIES` (the last `L` are kept).
    slots: [u32; MAX_L1_ENTRIES],
    /// Copies owed.
    n: usize,
    /// The ASID the run translates under.
    asid: u16,
    /// The 4 KB page number the run's next page would be (`va >> 12`).
    next_page: u64,
}

/// An L1 that a run's copies replaced wholly, kept as the run left it instead
/// of written out: slot `slot[k]` holds a copy of L2 slot `from[k]`, the
/// run's page `page + k - lo`, for the pending copies `k` in `lo..len` (at
/// `len` = L, the L1's size, the last copy), least recently used first.
///
/// Why it can wait: after a run of `m >= L` copies the L1 is the last `L` of
/// them, in copy order, and in a loop over more pages than the L1 holds they
/// are seldom read: what runs next (a system call, a switch) misses the L1, and
/// each of its L2 hits evicts the least recently used slot, the oldest pending
/// copy. So the slots of pending copies keep their old contents (and the
/// counts, which count what the slots hold, keep counting those), and:
/// - a lookup reads the other slots as ever, and no pending slot; a lookup of
///   a page among the pending copies writes them all out first
///   ([`Tlb::unpark`]), as does a fill whose L2 victim is a pending copy's
///   original (which covers a fill that duplicates a pending copy: its victim
///   is that copy's original);
/// - a copy into the L1 takes the oldest pending copy's slot: with every slot
///   held and every slot not pending used since the run, it is the least
///   recently used (a pending slot is never free, a hit on a pending copy
///   writes them out first);
/// - a new run's victims are the pending copies' slots, oldest first, then
///   the others from least recently used;
/// - every other method that reads the L1, or the counts exactly, writes them
///   out first ([`Tlb::settle`]).
///
/// Written out, the pending copies take the least recent end of the recency
/// order, in copy order, before every slot used since: the L1, its index,
/// recency order and counts are then what copying them one by one would have
/// left.
///
/// (The copies' slots are behind a `Box`: they are read only while a run is
/// parked, and a CPU's state, which the event loop fetches ahead whole, stays
/// smaller.)
#[derive(Clone)]
struct Parked {
    /// The L1 slot of copy `k`.
    slot: Box<[u8; MAX_L1_ENTRIES]>,
    /// The L2 slot whose entry copy `k` is.
    from: Box<[u32; MAX_L1_ENTRIES]>,
    /// The pending copies are `lo..len`.
    lo: usize,
    len: usize,
    /// The page number (`va >> 12`) of copy `lo`.
    page: u64,
    /// Bit `i` set: slot `i` holds a pending copy.
    mask: u64,
}

impl Parked {
    /// Returns whether a pending copy is of page number `page`.
    #[inline(always)]
    fn covers(&self, page: u64) -> bool {
        page.wrapping_sub(self.page) < (self.len - self.lo) as u64
    }
}

/// Runs of consecutive 4 KB pages that a read [`Tlb::sweep`] translated page by
/// page, kept so that a later sweep of the same pages takes each run whole
/// instead of page by page.
///
/// A run of `len` pages from page `first`, swept under `asid`, records for each
/// page `first + j` the L2 slot that holds its entry (`slots[k][j]`, `k` the
/// run's index): the first usable under `asid`, a non-global 4 KB entry
/// filled from address space `uid` at a PTE version of at least `min_ver`. Its pages' LRU stamps
/// are `base + j`, in one number: the slots' own stamps hold the run's tag
/// (its index plus one, at bit [`RUN_SHIFT`]) instead ([`Tlb::l2_stamp`] reads
/// either).
///
/// Why a run can be taken whole: while it lasts, what it records stays true.
/// Whatever would change it dissolves it first ([`Tlb::dissolve`] writes the
/// stamps out): a fill whose victim is one of its slots, or a global fill of
/// a key one of its slots holds (a non-global fill of the run's key and ASID
/// is its duplicate, so its victim); an invalidation that removes one of its
/// entries; a lookup that stamps one of its slots; a page-by-page sweep of
/// its pages under its ASID. So a sweep that reaches `first` under `asid`, with `len`
/// pages to go that the L1 holds none of, and whose rule the run meets (`uid`
/// running, no floor above `min_ver`, a read) would find each page's entry in
/// `slots[k][j]`, accept it, and stamp it with the next tick: it sets `base`
/// to the next tick, moves the clock by `len`, and owes the L1 the last
/// copies, as the page-by-page loop does. (A run holds a page per set: no longer than the
/// L2 has sets.)
#[derive(Clone)]
struct Runs {
    run: [Run; RUNS],
    /// Run `k`'s L2 slots, page by page (apart from the runs' other fields,
    /// which a sweep scans: they stay a few lines).
    slots: [[u32; RUN_MAX]; RUNS],
    /// The run a new one replaces next (in turn).
    next: usize,
}

impl Default for Runs {
    fn default() -> Self {
        Runs { run: [Run::default(); RUNS], slots: [[0; RUN_MAX]; RUNS], next: 0 }
    }
}

/// One of [`Runs`] (`len` 0: none).
#[derive(Clone, Copy, Default)]
struct Run {
    first: u64,
    len: u32,
    asid: u16,
    uid: u32,
    min_ver: u64,
    base: u64,
}

/// Runs a TLB keeps ([`Runs`]).
const RUNS: usize = 8;

/// The fewest pages a run has: fewer gain less than making and dissolving the
/// run costs. (In tests, two: so that the differential test makes many.)
const RUN_MIN: u64 = if cfg!(test) { 2 } else { 16 };

/// The most pages a run has: a touch's chunk (the simulator's `TOUCH_CHUNK`).
const RUN_MAX: usize = 64;

/// Where a slot of a run keeps the run's tag in its stamp: stamps, the clock's
/// ticks, stay far below.
const RUN_SHIFT: u32 = 56;

/// What the oracle and the access require of every entry [`Tlb::sweep`] uses;
/// the sweep stops at the first page whose entry falls short, so that the
/// caller's general path judges it (and reports what it must).
#[derive(Clone, Copy, Debug)]
pub struct SweepRule {
    /// The ASID the CPU runs with.
    pub asid: u16,
    /// The address space the CPU translates user addresses for: an entry filled
    /// from another is an alias (`no_asid_alias`).
    pub uid: u32,
    /// [`crate::pagetable::PageTables::max_floor`]: an entry of a PTE version at
    /// least this cannot be stale (`no_stale_use`).
    pub min_ver: u64,
    /// Whether the access writes: the entry must allow writes.
    pub write: bool,
}

/// Buckets of [`Tlb`]'s exact per-ASID counts.
const ASID_COUNT_BUCKETS: usize = 256;

/// Returns the bucket of [`Tlb`]'s per-ASID counts an ASID tag falls in.
#[inline(always)]
fn asid_count_bucket(tag: u32) -> usize {
    tag as usize % ASID_COUNT_BUCKETS
}

/// Buckets of the index by key of [`Slots`].
const L1_BUCKETS: usize = 128;

/// The most L1 entries a [`Tlb`] has: one bit each in the L1's index.
pub const MAX_L1_ENTRIES: usize = 64;

/// Returns the bucket of the L1's index a key falls in: a Fibonacci hash, so that
/// the keys of neighbouring pages spread over the buckets.
#[inline(always)]
fn l1_bucket(key: u64) -> usize {
    (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - L1_BUCKETS.trailing_zeros())) as usize
}

/// Returns the first of a set's ways (its `keys` and `entries`) that holds an
/// entry of key `k` usable under `asid`, in way order, as a scan meets them.
#[inline(always)]
fn first_usable(keys: &[u64], entries: &[TlbEntry], k: u64, asid: u16) -> Option<usize> {
    keys.iter().zip(entries).position(|(&wk, e)| wk == k && (e.flags & F_GLOBAL != 0 || e.asid == asid))
}

/// The fewest pages [`Tlb::l1_clear_pages`] checks by one pass over the L1's
/// held slots rather than a probe of the key index for each page: a probe
/// costs about a tenth of a pass over a full 48-entry L1.
const L1_SCAN_MIN: u64 = 12;

/// Returns a mask of the `n` lowest bits (`n` at most 64).
#[inline(always)]
fn low_bits(n: usize) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1 << n) - 1
    }
}

/// Returns the key of a 2 MB entry covering page number `page` (`va >> 12`).
#[inline(always)]
fn block_key(page: u64) -> u64 {
    ((page >> (SHIFT_2M - SHIFT_4K)) << 2) | 2
}

/// Returns whether the L1 (its slots and entries) holds an entry of key `k`
/// usable under `asid` outside the slots of `pending` (those of a [`Parked`]
/// run, whose contents are stale); a free function, for a caller that holds
/// other parts of the [`Tlb`] mutably.
#[inline(always)]
fn l1_holds_in(slots: &Slots, l1: &[TlbEntry], pending: u64, k: u64, asid: u16) -> bool {
    let mut m = slots.candidates(k) & !pending;
    while m != 0 {
        let i = m.trailing_zeros() as usize;
        m &= m - 1;
        let e = &l1[i];
        if slots.keys[i] == k && (e.flags & F_GLOBAL != 0 || e.asid == asid) {
            return true;
        }
    }
    false
}

/// Words of [`Tlb`]'s ASID filter.
const ASID_FILTER_WORDS: usize = 64;

/// Buckets of [`Tlb`]'s ASID filter: [`asid_bucket`] takes values below this.
pub const ASID_BUCKETS: usize = 64 * ASID_FILTER_WORDS;

/// Buckets of [`Tlb`]'s per-block counts: [`block_bucket`] takes values below this.
pub const BLOCK_BUCKETS: usize = 1024;

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
        prefetch_bytes(&*self.l1_slots.index, std::mem::size_of::<[u64; L1_BUCKETS]>());
        prefetch_bytes(self.l1_slots.keys.as_ptr(), self.l1_slots.keys.len() * 8);
    }

    /// Prefetches what an invalidation by `asid` reads first: its word of the
    /// ASID filter and its exact count. A hint that reads nothing the
    /// simulation sees.
    pub(crate) fn prefetch_asid(&self, asid: u16) {
        prefetch_bytes(&self.asids[asid_bucket(asid) / 64], 8);
        prefetch_bytes(&self.asid_counts[asid_count_bucket(asid as u32)], 2);
    }

    /// Prefetches the L2 sets a lookup or fill of the `pages` 4 KB pages from
    /// `va` reads (keys, entries, stamps and ASID tags), and the set of their
    /// first 2 MB block: for a kernel path that is about to touch a few pages a
    /// large machine's TLB has long evicted from the host's cache. A hint that
    /// reads nothing the simulation sees.
    pub(crate) fn prefetch_l2(&self, va: u64, pages: u64) {
        let ways = self.l2_ways;
        let sets = |first: usize, n: usize| {
            let (at, len) = (first * ways, n * ways);
            prefetch_bytes(self.l2_keys[at..].as_ptr(), len * 8);
            prefetch_bytes(self.l2[at..].as_ptr(), len * std::mem::size_of::<TlbEntry>());
            prefetch_bytes(self.l2_lru[at..].as_ptr(), len * 8);
            prefetch_bytes(self.l2_asids[at..].as_ptr(), len * 4);
        };
        let first = self.l2_set_of(va >> SHIFT_4K);
        let n = (pages as usize).min(self.l2_sets);
        let head = n.min(self.l2_sets - first);
        sets(first, head);
        if head < n {
            sets(0, n - head);
        }
        sets(self.l2_set_of(va >> SHIFT_2M), 1);
    }

    /// Returns the lowest address of the host memory the TLBs allocated (their
    /// entries, mirrors, indexes and counts) and the address just past the
    /// highest: what [`crate::host`] is asked to back with 2 MB pages.
    pub(crate) fn heap_bounds(&self) -> (usize, usize) {
        use crate::host::span;
        crate::host::hull([
            span(&self.l1),
            span(&self.l2),
            span(&self.l2_lru),
            span(&self.l2_keys),
            span(&self.l2_asids),
            span(&self.l1_asids),
            span(&self.pwc),
            span(&self.pwc_asids),
            span(&self.l1_slots.keys),
            span(&self.pwc_slots.keys),
            span(&self.l1_slots.index[..]),
            span(&self.pwc_slots.index[..]),
            span(&self.asids[..]),
            span(&self.blocks[..]),
            span(&self.asid_counts[..]),
        ])
    }

    /// Returns empty TLBs of the given geometry.
    ///
    /// # Panics
    ///
    /// If `l1` is 0 or more than [`MAX_L1_ENTRIES`].
    pub fn new(l1: usize, l2: usize, l2_ways: usize, pwc: usize) -> Self {
        debug_assert!(l2.is_multiple_of(l2_ways));
        assert!((1..=MAX_L1_ENTRIES).contains(&l1), "an L1 TLB of {l1} entries: give 1 to {MAX_L1_ENTRIES}");
        assert!(pwc <= MAX_L1_ENTRIES, "a walk cache of {pwc} entries: give 0 to {MAX_L1_ENTRIES}");
        Tlb {
            l1: vec![TlbEntry::default(); l1],
            l1_slots: Slots::new(l1),
            l2: vec![TlbEntry::default(); l2],
            l2_lru: vec![0; l2],
            l2_keys: vec![u64::MAX; l2],
            l2_asids: vec![NO_ASID; l2],
            l1_asids: vec![NO_ASID; l1],
            l2_ways,
            l2_sets: l2 / l2_ways,
            pwc: vec![PwcEntry::default(); pwc],
            pwc_slots: Slots::new(pwc),
            pwc_asids: vec![NO_ASID; pwc],
            clock: 0,
            asids: Box::new([0; ASID_FILTER_WORDS]),
            blocks: Box::new([0; BLOCK_BUCKETS]),
            conts: false,
            asid_counts: Box::new([0; ASID_COUNT_BUCKETS]),
            deferred: Deferred { slots: [0; MAX_L1_ENTRIES], n: 0, asid: 0, next_page: 0 },
            parked: Parked {
                slot: Box::new([0; MAX_L1_ENTRIES]),
                from: Box::new([0; MAX_L1_ENTRIES]),
                lo: 0,
                len: 0,
                page: 0,
                mask: 0,
            },
            runs: Box::default(),
            runs_live: 0,
        }
    }

    /// Counts a valid entry into (`up`) or out of its block's bucket.
    #[inline]
    fn count_block(&mut self, block: u64, up: bool) {
        let c = &mut self.blocks[block_bucket(block)];
        if up {
            *c += 1;
        } else {
            debug_assert!(*c > 0, "block bucket count underflow");
            *c -= 1;
        }
    }

    /// Counts an entry of ASID tag `tag` ([`asid_tag`]; [`NO_ASID`] is not
    /// counted) into (`up`) or out of its bucket.
    #[inline]
    fn count_asid(&mut self, tag: u32, up: bool) {
        if tag == NO_ASID {
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
    fn asid_counted(&self, asid: u16) -> bool {
        self.asid_counts[asid_count_bucket(asid as u32)] > 0
    }

    #[inline]
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Returns the keys of the entries of each size that could cover `va`: 4 KB,
    /// 64 KB ([`NO_KEY`] while none may be held) and 2 MB.
    #[inline]
    fn keys(&self, va: u64) -> (u64, u64, u64) {
        let k64 = if self.conts { ((va >> SHIFT_64K) << 2) | 1 } else { NO_KEY };
        ((va >> SHIFT_4K) << 2, k64, ((va >> SHIFT_2M) << 2) | 2)
    }

    /// Returns the range of L2 slots of the set an entry of tag `tag` lives in.
    #[inline]
    fn l2_set(&self, tag: u64) -> std::ops::Range<usize> {
        let set = self.l2_set_of(tag);
        set * self.l2_ways..(set + 1) * self.l2_ways
    }

    /// Returns the number of the L2 set of tag `tag`: `tag % sets`, a mask when
    /// the sets are a power of two (every preset's), a division otherwise.
    #[inline(always)]
    fn l2_set_of(&self, tag: u64) -> usize {
        if self.l2_sets.is_power_of_two() {
            (tag as usize) & (self.l2_sets - 1)
        } else {
            (tag as usize) % self.l2_sets
        }
    }

    /// Looks `va` up under `asid`; an L2 hit is copied into the L1.
    #[inline]
    pub fn lookup(&mut self, va: u64, asid: u16) -> Option<Hit> {
        self.lookup_entry(va, asid).map(|(h, _)| h)
    }

    /// [`Tlb::lookup`], also returning (a copy of) the entry hit, as
    /// [`Tlb::entry`] would after it. (Inlined into its one caller on the
    /// simulator's path, `Sim::access`.)
    #[inline(always)]
    pub fn lookup_entry(&mut self, va: u64, asid: u16) -> Option<(Hit, TlbEntry)> {
        if self.owes() {
            if let Some(r) = self.lookup_in_run(va, asid) {
                return r;
            }
            self.settle_run();
        }
        if self.parked.covers(va >> SHIFT_4K) {
            self.unpark();
        }
        // Without 64 KB entries the lookup compares two keys, as it always did.
        if self.conts {
            self.lookup_sized::<true>(va, asid)
        } else {
            self.lookup_sized::<false>(va, asid)
        }
    }

    /// [`Tlb::lookup_entry`]; `CONT`: whether a 64 KB entry may be held.
    #[inline(always)]
    fn lookup_sized<const CONT: bool>(&mut self, va: u64, asid: u16) -> Option<(Hit, TlbEntry)> {
        let now = self.tick();
        let k4 = (va >> SHIFT_4K) << 2;
        let k64 = if CONT { ((va >> SHIFT_64K) << 2) | 1 } else { NO_KEY };
        let k2 = ((va >> SHIFT_2M) << 2) | 2;
        if let Some(i) = self.l1_usable::<CONT>(k4, k64, k2, asid) {
            let copy = self.l1[i];
            self.l1_slots.order.touch(i);
            return Some((Hit::L1(i), copy));
        }
        let probes = [(SHIFT_4K, k4), (SHIFT_64K, k64), (SHIFT_2M, k2)];
        for (shift, k) in probes {
            if !CONT && shift == SHIFT_64K {
                continue;
            }
            if let Some(i) = self.l2_usable(self.l2_set(va >> shift).start, k, asid) {
                let copy = self.l2[i];
                self.leave_run(i);
                self.l2_lru[i] = now;
                self.insert_l1(copy);
                return Some((Hit::L2(i), copy));
            }
        }
        None
    }

    /// Returns the first L1 slot (in slot order, as a scan meets them) that holds
    /// an entry usable under `asid` whose key is `k4`, `k2` or (`CONT`) `k64`.
    #[inline(always)]
    fn l1_usable<const CONT: bool>(&self, k4: u64, k64: u64, k2: u64, asid: u16) -> Option<usize> {
        let mut m = self.l1_slots.candidates(k4) | self.l1_slots.candidates(k2);
        if CONT {
            m |= self.l1_slots.candidates(k64);
        }
        // A pending slot's contents are stale (and a page among the pending
        // copies was written out before).
        m &= !self.parked.mask;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let k = self.l1_slots.keys[i];
            if k == k4 || k == k2 || (CONT && k == k64) {
                let e = &self.l1[i];
                if e.flags & F_GLOBAL != 0 || e.asid == asid {
                    return Some(i);
                }
            }
        }
        None
    }

    /// Returns the first way (in way order, as a scan meets them) of the L2 set
    /// starting at slot `base` that holds an entry of key `k` usable under `asid`.
    #[inline(always)]
    fn l2_usable(&self, base: usize, k: u64, asid: u16) -> Option<usize> {
        let set = base..base + self.l2_ways;
        first_usable(&self.l2_keys[set.clone()], &self.l2[set], k, asid).map(|w| base + w)
    }

    /// Returns the L1 slot holding a duplicate of `e` (its key, ASID and
    /// globalness), which a fill of `e` replaces in place. The key mirror
    /// matches exactly the valid entries of the same tag and size.
    #[inline]
    fn l1_duplicate(&self, e: &TlbEntry) -> Option<usize> {
        let k = key(e);
        let mut m = self.l1_slots.candidates(k) & !self.parked.mask;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            if self.l1_slots.keys[i] == k && self.l1[i].asid == e.asid && self.l1[i].global() == e.global() {
                return Some(i);
            }
        }
        None
    }

    /// Translates up to `pages` consecutive 4 KB pages from `va` (page-aligned)
    /// for as long as each misses the L1 and hits a 4 KB entry in the L2 that
    /// `rule` accepts, exactly as [`Tlb::lookup_entry`] would one page after the
    /// other; calls `used` with each entry used and returns how many pages it
    /// translated. It stops, changing nothing for that page, at the first page
    /// the L1 holds, the L2 has no 4 KB entry for, or whose entry `rule`
    /// refuses: the caller's general path takes that page.
    ///
    /// The L2 stamps move and the clock ticks as the lookups would; the L1
    /// copies are deferred ([`Deferred`]). While 64 KB entries may be held it
    /// translates nothing.
    #[inline]
    pub fn sweep(&mut self, va: u64, pages: u64, rule: &SweepRule, mut used: impl FnMut(&TlbEntry)) -> u64 {
        if self.conts {
            return 0;
        }
        let page = va >> SHIFT_4K;
        if self.owes() && !self.continues_run(page, rule.asid) {
            self.settle_run();
        }
        // The set's ways known to the compiler where they are a preset's.
        let done = match self.l2_ways {
            4 => self.sweep_ways::<4>(page, pages, rule, &mut used),
            8 => self.sweep_ways::<8>(page, pages, rule, &mut used),
            _ => self.sweep_ways::<0>(page, pages, rule, &mut used),
        };
        self.end_sweep(page, done, rule)
    }

    /// [`Tlb::sweep`] from page number `page`; `WAYS`: the L2's ways, or 0
    /// where the caller does not know them.
    #[inline(always)]
    fn sweep_ways<const WAYS: usize>(
        &mut self,
        page: u64,
        pages: u64,
        rule: &SweepRule,
        used: &mut impl FnMut(&TlbEntry),
    ) -> u64 {
        // Each page is checked against the L1 as the run found it until the
        // run owes a copy for every slot (one a page): then none of it is left.
        // The first page it holds stops the sweep.
        let l = self.l1.len() as u64;
        let checked = pages.min(l.saturating_sub(self.deferred.n as u64));
        // A first page the L1 holds ends the sweep at once, as does one the L2
        // cannot give: either way nothing is swept, so which is asked first
        // changes nothing but the host's time. A short sweep asks the L1
        // first: its key index and keys are what `Sim::prefetch_upcoming`
        // fetches ahead at thousands of CPUs, where the L2 set is cold, and
        // short sweeps (a small buffer read again and again) often find their
        // first page in the L1. A long one asks the L2 first, which spares its
        // pass over the L1 where the L2 misses. (Where the L1 does not hold
        // the first page, `l1_clear_pages` below probes it again: one probe
        // of about 34 instructions, on short sweeps only.)
        if pages < L1_SCAN_MIN && checked > 0 && self.l1_clear_pages(page, 1, rule.asid) == 0 {
            return 0;
        }
        if self.l2_usable(self.l2_set(page).start, page << 2, rule.asid).is_none() {
            return 0;
        }
        let clear = self.l1_clear_pages(page, checked, rule.asid);
        let limit = if clear < checked { clear } else { pages };
        // Runs swept before, whole, and the pages between them page by page
        // (each such stretch made a run for the next sweep).
        let mut done = 0;
        loop {
            if !rule.write {
                done += self.sweep_runs(page + done, limit - done, rule);
            }
            if done == limit {
                return done;
            }
            let p = page + done;
            let upto = self.clear_of_runs(p, limit - done, rule.asid);
            let swept = self.sweep_pages::<WAYS>(p, upto, rule, used);
            if !rule.write {
                self.make_run(p, swept, rule.asid);
            }
            done += swept;
            if swept < upto || done == limit {
                return done;
            }
        }
    }

    /// The page-by-page part of [`Tlb::sweep_ways`]: up to `pages` pages from
    /// page number `page`, none of which the L1 holds and none in a run.
    ///
    /// Only the copies of the last `L` pages can survive: the loop owes those
    /// before the last `L` pages without naming their L2 slots. Where it stops
    /// short, the ones among the last `L` copies after all are named after it,
    /// by the loop's own probe (nothing it reads has changed since).
    #[inline(always)]
    fn sweep_pages<const WAYS: usize>(
        &mut self,
        page: u64,
        pages: u64,
        rule: &SweepRule,
        used: &mut impl FnMut(&TlbEntry),
    ) -> u64 {
        let l = self.l1.len() as u64;
        let quiet = pages.saturating_sub(l);
        let n = self.deferred.n;
        let mid = self.sweep_l2::<WAYS, false>(page, quiet, rule, used);
        let last = if mid == quiet { self.sweep_l2::<WAYS, true>(page + mid, pages - mid, rule, used) } else { 0 };
        for t in mid - l.saturating_sub(last).min(mid)..mid {
            let q = page + t;
            let found = self.l2_usable(self.l2_set(q).start, q << 2, rule.asid);
            debug_assert!(found.is_some(), "a swept page no longer in the L2");
            self.deferred.slots[(n + t as usize) % MAX_L1_ENTRIES] = found.unwrap_or(0) as u32;
        }
        mid + last
    }

    /// Returns how many of the `n` pages (at most [`MAX_L1_ENTRIES`]) from page
    /// number `page` the L1, as a run found it, holds nothing of: the pages
    /// before the first that a slot outside a parked run's pending copies
    /// holds usable under `asid` (a 4 KB entry of the page, a 2 MB entry of its
    /// block) or that is among the pending copies. One pass over the held
    /// slots, where a probe of the key index for every page and block cost
    /// about 34 host instructions a page. (No 64 KB entry is held: a sweep
    /// translates nothing while one may be.)
    #[inline(always)]
    fn l1_clear_pages(&self, page: u64, n: u64, asid: u16) -> u64 {
        debug_assert!(n <= MAX_L1_ENTRIES as u64 && !self.conts);
        // A few pages are probed one by one in the key index, as a lookup does.
        if n < L1_SCAN_MIN {
            let pending = self.parked.mask;
            let holds = |k: u64| l1_holds_in(&self.l1_slots, &self.l1, pending, k, asid);
            let mut block_end = page;
            for p in page..page + n {
                if p == block_end {
                    if holds(block_key(p)) {
                        return p - page;
                    }
                    block_end = ((p >> (SHIFT_2M - SHIFT_4K)) + 1) << (SHIFT_2M - SHIFT_4K);
                }
                if holds(p << 2) || self.parked.covers(p) {
                    return p - page;
                }
            }
            return n;
        }
        // Bit `j`: page `page + j` is held (no bit at `n` or above).
        let pages_from = |first: u64, count: u64| -> u64 {
            // The window's bits for pages `first..first + count`.
            let lo = first.max(page);
            let hi = (first + count).min(page + n);
            if lo >= hi {
                return 0;
            }
            low_bits((hi - lo) as usize) << (lo - page)
        };
        let mut held = pages_from(self.parked.page, (self.parked.len - self.parked.lo) as u64);
        let mut slots = !self.l1_slots.free & !self.parked.mask & low_bits(self.l1.len());
        while slots != 0 {
            let i = slots.trailing_zeros() as usize;
            slots &= slots - 1;
            // Usable under `asid`: global, or of `asid` (by the tag mirror, a
            // few lines where the entries are thirty).
            let k = self.l1_slots.keys[i];
            let tag = self.l1_asids[i];
            if tag != NO_ASID && tag != asid as u32 {
                continue;
            }
            held |= match k & 3 {
                0 => {
                    let off = (k >> 2).wrapping_sub(page);
                    if off < n {
                        1 << off
                    } else {
                        0
                    }
                }
                2 => pages_from((k >> 2) << (SHIFT_2M - SHIFT_4K), 1 << (SHIFT_2M - SHIFT_4K)),
                _ => 0,
            };
        }
        held.trailing_zeros().min(n as u32) as u64
    }

    /// Records where a sweep from page `page` that translated `done` pages
    /// leaves the run (nothing, if it translated none); returns `done`.
    #[inline(always)]
    fn end_sweep(&mut self, page: u64, done: u64, rule: &SweepRule) -> u64 {
        if done > 0 {
            self.deferred.asid = rule.asid;
            self.deferred.next_page = page + done;
        }
        done
    }

    /// The loop of [`Tlb::sweep`], for up to `pages` pages from page number
    /// `page`: each page's 4 KB entry (the first usable way of its set, as
    /// `l2_usable` finds it) must pass `rule`; its stamp moves and its L1 copy
    /// is owed, its L2 slot written to the ring with `NAMED` (without, the
    /// caller names the slots of the copies that can survive). Returns the
    /// pages translated. `WAYS`: the L2's ways where the caller knows them
    /// (then the compiler does too), else 0. No slot it stamps is in a run
    /// ([`Runs`]): the caller dissolved those first.
    #[inline(always)]
    fn sweep_l2<const WAYS: usize, const NAMED: bool>(
        &mut self,
        page: u64,
        pages: u64,
        rule: &SweepRule,
        used: &mut impl FnMut(&TlbEntry),
    ) -> u64 {
        let ways = if WAYS == 0 { self.l2_ways } else { WAYS };
        let (mut clock, mut n) = (self.clock, self.deferred.n);
        let mut done = 0;
        // Consecutive pages fall in consecutive sets: from the first page's set
        // to the last set, then from set 0 on.
        let mut from = self.l2_set_of(page);
        'run: while done < pages {
            // The sets from `from` on, to the last or as far as pages are left.
            let span = (self.l2_sets - from).min((pages - done) as usize);
            let (at, end) = (from * ways, (from + span) * ways);
            let keys = self.l2_keys[at..end].chunks_exact(ways);
            let entries = self.l2[at..end].chunks_exact(ways);
            let stamps = self.l2_lru[at..end].chunks_exact_mut(ways);
            let mut base = at;
            for ((keys, entries), stamps) in keys.zip(entries).zip(stamps) {
                let p = page + done;
                let Some(w) = first_usable(keys, entries, p << 2, rule.asid) else {
                    break 'run;
                };
                let e = &entries[w];
                if e.mm_uid != rule.uid || e.ver < rule.min_ver || (rule.write && e.flags & F_WRITE == 0) {
                    break 'run;
                }
                debug_assert_eq!(stamps[w] >> RUN_SHIFT, 0, "the page-by-page sweep stamps a slot of a run");
                used(e);
                clock += 1;
                stamps[w] = clock;
                if NAMED {
                    self.deferred.slots[n % MAX_L1_ENTRIES] = (base + w) as u32;
                }
                n += 1;
                done += 1;
                base += ways;
            }
            from = 0;
        }
        self.clock = clock;
        self.deferred.n = n;
        done
    }

    /// Takes the runs ([`Runs`]) that follow one another from page number
    /// `page`, whole, for as long as each starts where the last ended, fits in
    /// the `pages` pages and meets `rule` (a read: a write marks every page's
    /// PTE, which the page-by-page loop does); returns the pages translated.
    /// Each run's pages take the stamps the lookups one by one would give them
    /// (the next ticks of the clock, in page order) by a new `base`, and the
    /// last `L` of them are named in the ring of owed copies.
    #[inline]
    fn sweep_runs(&mut self, page: u64, pages: u64, rule: &SweepRule) -> u64 {
        let mut done = 0;
        'next: while done < pages {
            let p = page + done;
            let mut live = self.runs_live;
            while live != 0 {
                let k = live.trailing_zeros() as usize;
                live &= live - 1;
                let r = &self.runs.run[k];
                if r.first != p || r.asid != rule.asid {
                    continue;
                }
                let len = r.len as u64;
                if len > pages - done || r.uid != rule.uid || r.min_ver < rule.min_ver {
                    return done;
                }
                let (l, n, len_us) = (self.l1.len(), self.deferred.n, r.len as usize);
                // The ring's positions of the named copies, in at most two pieces.
                let from = len_us.saturating_sub(l);
                let at = (n + from) % MAX_L1_ENTRIES;
                let head = (len_us - from).min(MAX_L1_ENTRIES - at);
                let named = &self.runs.slots[k][from..len_us];
                self.deferred.slots[at..at + head].copy_from_slice(&named[..head]);
                self.deferred.slots[..named.len() - head].copy_from_slice(&named[head..]);
                self.runs.run[k].base = self.clock + 1;
                self.clock += len;
                self.deferred.n = n + len_us;
                done += len;
                continue 'next;
            }
            break;
        }
        done
    }

    /// Makes the `pages` pages from page number `page`, just swept page by
    /// page under `asid`, a run ([`Runs`]), if they are enough and each is a
    /// non-global entry in a set of its own; the run's slot replaces the one
    /// made longest ago, which is dissolved.
    fn make_run(&mut self, page: u64, pages: u64, asid: u16) {
        if pages < RUN_MIN || pages > RUN_MAX as u64 || pages > self.l2_sets as u64 {
            return;
        }
        let mut run =
            Run { first: page, len: pages as u32, asid, uid: 0, min_ver: u64::MAX, base: self.clock + 1 - pages };
        let mut slots = [0u32; RUN_MAX];
        for (j, slot) in slots[..pages as usize].iter_mut().enumerate() {
            let q = page + j as u64;
            let set = self.l2_set(q);
            let Some(i) = self.l2_usable(set.start, q << 2, asid) else {
                debug_assert!(false, "a swept page no longer in the L2");
                return;
            };
            let e = &self.l2[i];
            if e.global() {
                return;
            }
            debug_assert_eq!(self.l2_lru[i], run.base + j as u64, "a swept page's stamp out of order");
            run.uid = e.mm_uid;
            run.min_ver = run.min_ver.min(e.ver);
            *slot = i as u32;
        }
        let k = self.runs.next;
        self.runs.next = (k + 1) % RUNS;
        if self.runs.run[k].len > 0 {
            self.dissolve(k);
        }
        let tag = (k as u64 + 1) << RUN_SHIFT;
        for &slot in &slots[..pages as usize] {
            self.l2_lru[slot as usize] = tag;
        }
        self.runs.run[k] = run;
        self.runs.slots[k] = slots;
        self.runs_live |= 1 << k;
    }

    /// Writes out the stamps of run `k` ([`Runs`]) and frees it.
    #[inline(never)]
    fn dissolve(&mut self, k: usize) {
        let r = &self.runs.run[k];
        for (j, &slot) in self.runs.slots[k][..r.len as usize].iter().enumerate() {
            debug_assert_eq!(self.l2_lru[slot as usize] >> RUN_SHIFT, k as u64 + 1);
            self.l2_lru[slot as usize] = r.base + j as u64;
        }
        self.runs.run[k].len = 0;
        self.runs_live &= !(1 << k);
    }

    /// Dissolves the run L2 slot `i` is in, if any: before its stamp or entry
    /// changes.
    #[inline(always)]
    fn leave_run(&mut self, i: usize) {
        if self.runs_live == 0 {
            return;
        }
        let r = self.l2_lru[i] >> RUN_SHIFT;
        if r != 0 {
            self.dissolve(r as usize - 1);
        }
    }

    /// Returns how many of the `pages` pages from page number `page` a sweep
    /// under `asid` may take page by page: up to the first page of the next
    /// run under `asid` ([`Runs`]), which the sweep then tries to take whole.
    /// A run under `asid` that holds `page` but does not start there is
    /// dissolved: the page-by-page loop is about to stamp its slots. (A page's
    /// entry a sweep under `asid` uses is global or filled under `asid`, and a
    /// run holds no global entry: no other run can be in its way.)
    #[inline]
    fn clear_of_runs(&mut self, page: u64, pages: u64, asid: u16) -> u64 {
        let mut upto = pages;
        let mut live = self.runs_live;
        while live != 0 {
            let k = live.trailing_zeros() as usize;
            live &= live - 1;
            let r = &self.runs.run[k];
            if r.asid != asid {
                continue;
            }
            if r.first <= page && page < r.first + r.len as u64 {
                // (One that starts at `page` did not fit or meet the rule.)
                self.dissolve(k);
            } else if page < r.first && r.first - page < upto {
                upto = r.first - page;
            }
        }
        upto
    }

    /// Returns L2 slot `i`'s stamp: its own, or for a slot in a run the one
    /// the run gives its page.
    #[inline(always)]
    fn l2_stamp(&self, i: usize) -> u64 {
        match self.l2_lru[i] >> RUN_SHIFT {
            0 => self.l2_lru[i],
            r => {
                let r = &self.runs.run[r as usize - 1];
                r.base + ((self.l2_keys[i] >> 2) - r.first)
            }
        }
    }

    /// Brings the L1 up to date: applies the copies [`Tlb::sweep`] deferred
    /// (see [`Deferred`]) and writes out a parked run's (see [`Parked`]), so
    /// that the L1, its index, recency order and the counts are what the
    /// lookups one by one would have left.
    #[inline]
    pub fn settle(&mut self) {
        self.settle_run();
        if self.parked.mask != 0 {
            self.unpark();
        }
    }

    /// Applies the copies [`Tlb::sweep`] deferred, as far as the lookups and
    /// fills need: a run that replaced the whole L1 is parked.
    #[inline]
    fn settle_run(&mut self) {
        if self.owes() {
            self.settle_owed();
        }
    }

    /// [`Tlb::settle_run`] with copies owed: of the `m` owed the last
    /// `min(m, L)` survive, copy `j` in slot `cycle[j % L]`. Fewer than `L`
    /// are copied in order, so that the recency order ends as the copies one
    /// by one leave it; `L` or more are parked.
    #[inline(never)]
    fn settle_owed(&mut self) {
        let m = self.deferred.n;
        self.deferred.n = 0;
        let l = self.l1.len();
        if m < l && self.parked.mask != 0 {
            self.unpark();
        }
        // The cycle of victims (as far as the copies reach into it): the empty
        // slots in increasing order, then the held ones from least recently
        // used, a parked run's pending copies first.
        let want = m.min(l);
        let mut cycle = [0u8; MAX_L1_ENTRIES];
        let mut k = 0;
        let pending = self.parked.mask;
        let free = self.l1_slots.free & !pending;
        let mut f = free;
        while f != 0 && k < want {
            cycle[k] = f.trailing_zeros() as u8;
            k += 1;
            f &= f - 1;
        }
        let p = &self.parked;
        let held = (p.len - p.lo).min(want - k);
        cycle[k..k + held].copy_from_slice(&p.slot[p.lo..p.lo + held]);
        k += held;
        let order = &self.l1_slots.order;
        if want == l {
            // Every slot: the rest are all held and not pending, so found as
            // well from the most recent end, where a parked run's are (each
            // was used since it parked), and the list's order restored.
            let mut s = order.prev[order.end as usize] as usize;
            let mut j = l;
            while j > k {
                if (free | pending) & (1 << s) == 0 {
                    j -= 1;
                    cycle[j] = s as u8;
                }
                s = order.prev[s] as usize;
            }
        } else {
            let mut s = order.lru();
            while k < want {
                if (free | pending) & (1 << s) == 0 {
                    cycle[k] = s as u8;
                    k += 1;
                }
                s = order.next[s] as usize;
            }
        }
        if m < l {
            for (j, &i) in cycle[..m].iter().enumerate() {
                let e = self.l2[self.deferred.slots[j] as usize];
                self.set_l1(i as usize, e);
            }
            return;
        }
        // Park the last `L` copies, oldest first: nothing of the L1 is left
        // (a parked run's pending copies go with the rest).
        // Copy `j` (of `m - l..m`) is slot `cycle[j % l]` and the ring's
        // `j % MAX_L1_ENTRIES`: both rotations.
        let p = &mut self.parked;
        let r = m % l;
        p.slot[..l - r].copy_from_slice(&cycle[r..l]);
        p.slot[l - r..l].copy_from_slice(&cycle[..r]);
        let ring = &self.deferred.slots;
        let r = (m - l) % MAX_L1_ENTRIES;
        let wrap = (MAX_L1_ENTRIES - r).min(l);
        p.from[..wrap].copy_from_slice(&ring[r..r + wrap]);
        p.from[wrap..l].copy_from_slice(&ring[..l - wrap]);
        p.lo = 0;
        p.len = l;
        p.page = self.deferred.next_page - l as u64;
        p.mask = u64::MAX >> (64 - l);
    }

    /// Writes a parked run's pending copies into their slots (see [`Parked`]):
    /// each slot's old entry is counted out and the copy in, and the recency
    /// order becomes the pending copies in copy order, then every other slot
    /// in its order (each was used since the run).
    #[inline(never)]
    fn unpark(&mut self) {
        let count_bucket = |t: u64| asid_count_bucket(t as u32);
        let p = &self.parked;
        let (lo, len, pending) = (p.lo, p.len, p.mask);
        let l = self.l1.len();
        // The order of the slots not pending, before anything changes.
        let mut rest = [0u8; MAX_L1_ENTRIES];
        let mut n_rest = 0;
        let order = &self.l1_slots.order;
        let mut s = order.lru();
        while s != order.end as usize {
            if pending & (1 << s) == 0 {
                rest[n_rest] = s as u8;
                n_rest += 1;
            }
            s = order.next[s] as usize;
        }
        debug_assert_eq!(n_rest + (len - lo), l, "a slot neither pending nor in the recency order");
        let slots = &mut self.l1_slots;
        let (l1, l1_keys, l1_asids) = (&mut self.l1[..l], &mut slots.keys[..l], &mut self.l1_asids[..l]);
        let (l2, l2_keys, l2_asids) = (&self.l2[..], &self.l2_keys[..], &self.l2_asids[..]);
        let (counts, asid_counts) = (&mut self.blocks[..], &mut self.asid_counts[..]);
        // Out: each pending slot's old entry, read from the key and ASID tag
        // mirrors (an empty slot's key is `u64::MAX`, its tag `NO_ASID`).
        let (mut blocks, mut asids) = (Tally::new(), Tally::new());
        for &i in &p.slot[lo..len] {
            let (k, tag) = (l1_keys[i as usize], l1_asids[i as usize]);
            if k != u64::MAX {
                slots.index[l1_bucket(k)] &= !(1 << i);
                blocks.add(key_block(k), counts, block_bucket, false);
            }
            if tag != NO_ASID {
                asids.add(tag as u64, asid_counts, count_bucket, false);
            }
        }
        blocks.flush(counts, block_bucket, false);
        asids.flush(asid_counts, count_bucket, false);
        // In: the copies, every one a valid 4 KB entry whose key and tag the
        // L2's mirrors hold, linked in copy order.
        let end = slots.order.end;
        let mut prev = end;
        for (&i, &from) in p.slot[lo..len].iter().zip(&p.from[lo..len]) {
            let (i, from) = (i as usize, from as usize);
            let (k, tag) = (l2_keys[from], l2_asids[from]);
            debug_assert!(k & 3 == 0 && k == key(&l2[from]), "a pending copy of no 4 KB entry");
            l1_keys[i] = k;
            slots.index[l1_bucket(k)] |= 1 << i;
            slots.order.next[prev as usize] = i as u8;
            slots.order.prev[i] = prev;
            prev = i as u8;
            blocks.add(k >> (2 + SHIFT_2M - SHIFT_4K), counts, block_bucket, true);
            l1_asids[i] = tag;
            if tag != NO_ASID {
                asids.add(tag as u64, asid_counts, count_bucket, true);
            }
            l1[i] = l2[from];
        }
        blocks.flush(counts, block_bucket, true);
        asids.flush(asid_counts, count_bucket, true);
        for &i in &rest[..n_rest] {
            slots.order.next[prev as usize] = i;
            slots.order.prev[i as usize] = prev;
            prev = i;
        }
        slots.order.next[prev as usize] = end;
        slots.order.prev[end as usize] = prev;
        slots.free &= !pending;
        self.parked.lo = self.parked.len;
        self.parked.mask = 0;
    }

    /// Returns whether a pending copy of a parked run is of L2 slot `i`.
    #[inline]
    fn parked_from(&self, i: usize) -> bool {
        let p = &self.parked;
        p.from[p.lo..p.len].contains(&(i as u32))
    }

    /// Returns whether L1 copies are owed (see [`Deferred`]).
    #[inline]
    fn owes(&self) -> bool {
        self.deferred.n > 0
    }

    /// Returns the entry a hit refers to.
    #[inline]
    pub fn entry(&self, hit: Hit) -> &TlbEntry {
        debug_assert!(!self.owes(), "the L1 read with copies owed");
        match hit {
            Hit::L1(i) => &self.l1[i],
            Hit::L2(i) => &self.l2[i],
        }
    }

    /// Replaces the L1's victim with `e`: [`Slots::victim`], or while a run is
    /// parked, its oldest pending copy's slot (see [`Parked`]).
    fn insert_l1(&mut self, e: TlbEntry) {
        if self.parked.mask == 0 {
            self.set_l1(self.l1_slots.victim(), e);
            return;
        }
        debug_assert_eq!(self.l1_slots.free & !self.parked.mask, 0, "an empty slot while a run is parked");
        let p = &mut self.parked;
        let i = p.slot[p.lo] as usize;
        p.lo += 1;
        p.page += 1;
        p.mask &= !(1 << i);
        // The slot's old entry is the one counted out, as the counts count it.
        self.set_l1(i, e);
    }

    /// Fills a walked translation into the L2 and, unless `speculative`, the L1.
    pub fn fill(&mut self, mut e: TlbEntry, speculative: bool) {
        // Settling reads the L2 and changes none of it: the victim stays.
        let (victim, in_run) = self.l2_victim(&e);
        if in_run {
            self.leave_runs_of_fill(&e, victim);
        }
        if self.owes() && !self.fill_keeps_run(&e, speculative, victim) {
            self.settle_run();
        }
        // A parked run's copy of the victim is written out before the L2
        // entry goes. (A pending copy that duplicates `e`, which the L1 would
        // replace in place, is one: its original in the L2 duplicates `e`
        // too, and a fill's victim is its duplicate first.)
        if self.parked.mask != 0 && self.parked_from(victim) {
            self.unpark();
        }
        // Copies still owed now: this fill's own L1 copy joins them.
        let joins_run = self.owes() && !speculative;
        let now = self.tick();
        if !e.global() {
            self.note_asid(e.asid);
        }
        if e.cont() {
            self.conts = true;
        }
        e.valid = true;
        self.l2_lru[victim] = now;
        // What the victim held is counted out from the mirrors, which name it
        // exactly: an empty slot (the usual victim of a page filled again after
        // its invalidation) reads neither its entry nor its ASID tag, lines a
        // large machine's TLBs have long had evicted from the host's cache; the
        // stores below need not wait for them.
        let old_key = self.l2_keys[victim];
        debug_assert_eq!(old_key != u64::MAX, self.l2[victim].valid);
        if old_key != u64::MAX {
            debug_assert_eq!(key_block(old_key), self.l2[victim].block());
            self.count_block(key_block(old_key), false);
            self.count_asid(self.l2_asids[victim], false);
        }
        self.count_block(e.block(), true);
        self.count_asid(asid_tag(&e), true);
        self.l2[victim] = e;
        self.l2_keys[victim] = key(&e);
        self.l2_asids[victim] = asid_tag(&e);
        if joins_run {
            self.owe(victim, e.tag + 1);
        } else if !speculative {
            match self.l1_duplicate(&e) {
                Some(i) => self.set_l1(i, e),
                None => self.insert_l1(e),
            }
        }
    }

    /// Returns the L2 slot a fill of `e` takes: a duplicate of the same
    /// translation first, then the set's LRU way. The key mirror names exactly
    /// the valid entries of a tag and size, so only a slot of the same key has
    /// its entry read.
    /// Also returns whether a slot of the set is in a run ([`Runs`]).
    #[inline(always)]
    fn l2_victim(&self, e: &TlbEntry) -> (usize, bool) {
        let base = self.l2_set_of(e.tag) * self.l2_ways;
        let set = base..base + self.l2_ways;
        let k = key(e);
        let same = self.l2_keys[set.clone()].iter().zip(&self.l2[set.clone()]).position(|(&wk, w)| {
            wk == k && w.flags & F_SIZE == e.flags & F_SIZE && w.asid == e.asid && w.global() == e.global()
        });
        // Whether a slot of the set is in a run ([`Runs`]).
        let in_run = self.runs_live != 0 && self.l2_lru[set.clone()].iter().fold(0, |m, &t| m | t) >> RUN_SHIFT != 0;
        let victim = base
            + same.unwrap_or_else(|| {
                if in_run {
                    lru_victim(&self.l2_keys[set.clone()], set.clone().map(|i| self.l2_stamp(i)))
                } else {
                    lru_victim(&self.l2_keys[set.clone()], self.l2_lru[set.clone()].iter().copied())
                }
            });
        (victim, in_run)
    }

    /// Dissolves the runs ([`Runs`]) a fill of `e` into L2 slot `victim`
    /// changes, where a slot of its set is in one: the victim's, and for a
    /// global `e`, any whose slot in the set holds `e`'s key (`e` might come
    /// before it in the set, usable under its ASID; a non-global entry of the
    /// run's key and ASID is its duplicate, so its victim).
    #[inline(never)]
    fn leave_runs_of_fill(&mut self, e: &TlbEntry, victim: usize) {
        self.leave_run(victim);
        if e.global() {
            let base = self.l2_set_of(e.tag) * self.l2_ways;
            let k = key(e);
            for i in base..base + self.l2_ways {
                if self.l2_lru[i] >> RUN_SHIFT != 0 && self.l2_keys[i] == k {
                    self.leave_run(i);
                }
            }
        }
    }

    /// Returns whether copies owed may go on after page number `page` under
    /// `asid`: `page` is the run's next page and no 64 KB entry may be held.
    #[inline]
    fn continues_run(&self, page: u64, asid: u16) -> bool {
        !self.conts && self.deferred.next_page == page && self.deferred.asid == asid
    }

    /// Returns whether `n` copies owed replace every L1 slot: then nothing of
    /// the L1 as the run found it is left (each slot is in the victims' cycle).
    #[inline]
    fn l1_replaced(&self, n: usize) -> bool {
        n >= self.l1.len()
    }

    /// Owes the L1 a copy of L2 slot `i`, the run's page before `next_page`.
    #[inline]
    fn owe(&mut self, i: usize, next_page: u64) {
        let d = &mut self.deferred;
        d.slots[d.n % MAX_L1_ENTRIES] = i as u32;
        d.n += 1;
        d.next_page = next_page;
    }

    /// Returns whether L2 slot `i` holds the original of an owed copy that
    /// survives (one of the last L1-size).
    fn owed_from(&self, i: usize) -> bool {
        let n = self.deferred.n;
        (n.saturating_sub(self.l1.len())..n).any(|j| self.deferred.slots[j % MAX_L1_ENTRIES] as usize == i)
    }

    /// [`Tlb::lookup_entry`] of the page after a run whose L1 copies are owed,
    /// where it can answer without settling them; `None` where it cannot (a
    /// page the L1 held when the run began, a 2 MB entry to copy, another
    /// page or ASID). A 4 KB hit in the L2 is owed to the L1 like the run's.
    fn lookup_in_run(&mut self, va: u64, asid: u16) -> Option<Option<(Hit, TlbEntry)>> {
        let page = va >> SHIFT_4K;
        if !self.continues_run(page, asid) {
            return None;
        }
        let (k4, k2) = (page << 2, block_key(page));
        // The L1 as the run found it, while some of it is left: the run's
        // copies are of other pages. (A parked run's pending copy of the page
        // counts as held. The run's own copies, which evict the pending ones
        // first and oldest first, have in fact always evicted it by the time
        // the run reaches it; the check costs little and assumes none of that.)
        if !self.l1_replaced(self.deferred.n)
            && (self.l1_usable::<false>(k4, NO_KEY, k2, asid).is_some() || self.parked.covers(page))
        {
            return None;
        }
        if let Some(i) = self.l2_usable(self.l2_set(page).start, k4, asid) {
            let now = self.tick();
            self.leave_run(i);
            self.l2_lru[i] = now;
            self.owe(i, page + 1);
            return Some(Some((Hit::L2(i), self.l2[i])));
        }
        if self.l2_usable(self.l2_set(va >> SHIFT_2M).start, k2, asid).is_some() {
            return None;
        }
        self.tick();
        Some(None)
    }

    /// Returns whether a fill of `e` leaves the L1 copies owed as they are: a
    /// fill of no 64 KB entry that is speculative (it fills the L2 alone) or
    /// the walked translation of the run's next page (its L1 copy joins the
    /// run's: the L1 as the run found it holds no duplicate to replace, and the
    /// victim cycle goes on), whose L2 victim is not the original of a copy
    /// that survives. `victim`: that L2 slot ([`Tlb::l2_victim`]). (A parked
    /// run's pending copy of the page counts as a duplicate, as in
    /// [`Tlb::lookup_in_run`].)
    fn fill_keeps_run(&self, e: &TlbEntry, speculative: bool, victim: usize) -> bool {
        if e.cont() {
            return false;
        }
        if !speculative {
            let dup =
                !self.l1_replaced(self.deferred.n) && (self.l1_duplicate(e).is_some() || self.parked.covers(e.tag));
            if e.flags & F_SIZE != 0 || !self.continues_run(e.tag, e.asid) || dup {
                return false;
            }
        }
        !self.owed_from(victim)
    }

    fn set_l1(&mut self, i: usize, e: TlbEntry) {
        // The old entry's key and block from the key mirror (`u64::MAX`: empty).
        let (old, new) = (self.l1_slots.keys[i], if e.valid { key(&e) } else { u64::MAX });
        // An entry replaced by one of the same 2 MB block leaves the counts as they are.
        let (old_block, new_block) = (key_block(old), key_block(new));
        if !(old != u64::MAX && new != u64::MAX && old_block == new_block) {
            if old != u64::MAX {
                self.count_block(old_block, false);
            }
            if new != u64::MAX {
                self.count_block(new_block, true);
            }
        }
        self.l1_slots.set_key(i, new);
        let (old_tag, tag) = (self.l1_asids[i], asid_tag(&e));
        if old_tag != tag {
            self.count_asid(old_tag, false);
            self.count_asid(tag, true);
            self.l1_asids[i] = tag;
        }
        self.l1_slots.order.touch(i);
        self.l1[i] = e;
    }

    /// Returns whether the walk cache holds the level-2 descriptor for `va`.
    pub fn pwc_lookup(&mut self, va: u64, asid: u16, global: bool) -> bool {
        // The walk cache and the L1 share no state but the clock and the
        // counts, which owed copies change by adding: nothing to settle.
        self.tick();
        let key = va >> SHIFT_2M;
        // The slots of the key, in increasing order, as a scan would meet them.
        let mut m = self.pwc_slots.candidates(key);
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let p = &self.pwc[i];
            if self.pwc_slots.keys[i] == key && p.global == global && (global || p.asid == asid) {
                self.pwc_slots.order.touch(i);
                return true;
            }
        }
        false
    }

    /// Caches the level-2 descriptor for `va`, which points at `table` of
    /// address space `mm_uid`.
    pub fn pwc_fill(&mut self, va: u64, asid: u16, global: bool, table: TableRef, mm_uid: u32) {
        if self.pwc.is_empty() {
            return;
        }
        if !global {
            self.note_asid(asid);
        }
        self.tick();
        let victim = self.pwc_slots.victim();
        // As in the L2's fill, what the victim held is counted out from the
        // mirrors (its key is its block), without reading its entry.
        let old_key = self.pwc_slots.keys[victim];
        debug_assert_eq!(old_key != u64::MAX, self.pwc[victim].valid);
        if old_key != u64::MAX {
            debug_assert_eq!(old_key, self.pwc[victim].key);
            self.count_block(old_key, false);
            self.count_asid(self.pwc_asids[victim], false);
        }
        let key = va >> SHIFT_2M;
        let tag = if global { NO_ASID } else { asid as u32 };
        self.count_asid(tag, true);
        self.count_block(key, true);
        self.pwc[victim] = PwcEntry { valid: true, key, asid, global, table, mm_uid };
        self.pwc_slots.set_key(victim, key);
        self.pwc_slots.order.touch(victim);
        self.pwc_asids[victim] = tag;
    }

    /// Removes what `op` names from every level; returns how many TLB entries went.
    pub fn invalidate(&mut self, op: Inval) -> usize {
        self.settle();
        match op {
            Inval::Va { asid, .. } | Inval::Asid(asid) if !self.may_hold(asid) || !self.asid_counted(asid) => return 0,
            _ => {}
        }
        // Without 64 KB entries, by VA only two keys and two L2 sets, as always.
        let n = if self.conts { self.invalidate_sized::<true>(op) } else { self.invalidate_sized::<false>(op) };
        match op {
            Inval::All => {
                *self.asids = [0; ASID_FILTER_WORDS];
                self.conts = false;
            }
            // Global entries are not in the ASID filter.
            Inval::AllNonGlobal => *self.asids = [0; ASID_FILTER_WORDS],
            _ => {}
        }
        n
    }

    /// [`Tlb::invalidate`] once the filter has let `op` through; `CONT`: whether a
    /// 64 KB entry may be held.
    #[inline]
    fn invalidate_sized<const CONT: bool>(&mut self, op: Inval) -> usize {
        let mut n = 0;
        // By VA, only an L1 entry whose key is the 4 KB, 64 KB or 2 MB key of `va` can go.
        let keys = match op {
            Inval::Va { va, .. } | Inval::VaAll { va } => Some(self.keys(va)),
            Inval::Asid(_) | Inval::All | Inval::AllNonGlobal => None,
        };
        let other = |k: u64, (k4, k64, k2): (u64, u64, u64)| k != k4 && k != k2 && (!CONT || k != k64);
        // By VA only the slots the index names for those keys can hold one.
        let mut m = match keys {
            Some((k4, k64, k2)) => {
                let m = self.l1_slots.candidates(k4) | self.l1_slots.candidates(k2);
                if CONT {
                    m | self.l1_slots.candidates(k64)
                } else {
                    m
                }
            }
            // By ASID only the slots whose tag mirror names it.
            None => match op {
                Inval::Asid(a) => equal_mask(&self.l1_asids, a as u32),
                _ => u64::MAX >> (64 - self.l1.len()),
            },
        };
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            if keys.is_some_and(|ks| other(self.l1_slots.keys[i], ks)) {
                continue;
            }
            let e = &mut self.l1[i];
            if e.valid && op.removes(e) {
                e.valid = false;
                let b = block_bucket(e.block());
                self.blocks[b] -= 1;
                self.l1_slots.set_key(i, u64::MAX);
                self.count_asid(self.l1_asids[i], false);
                self.l1_asids[i] = NO_ASID;
                n += 1;
            }
        }
        if let Inval::Asid(a) = op {
            n += self.invalidate_l2_asid(a);
            self.invalidate_pwc(op, None);
            return n;
        }
        // An entry sits in the L2 set its tag selects (see `fill`), so an operation
        // by VA need only scan the sets of its 4 KB, 64 KB (if any may be held) and
        // 2 MB tags.
        let (a, b, c) = match op {
            Inval::Va { va, .. } | Inval::VaAll { va } => (
                self.l2_set(va >> SHIFT_4K),
                self.l2_set(va >> SHIFT_2M),
                if CONT { self.l2_set(va >> SHIFT_64K) } else { 0..0 },
            ),
            Inval::All | Inval::AllNonGlobal => (0..self.l2.len(), 0..0, 0..0),
            Inval::Asid(_) => unreachable!("removed by invalidate_l2_asid"),
        };
        let b = if b == a { 0..0 } else { b };
        let c = if c == a || c == b { 0..0 } else { c };
        for set in [a, b, c] {
            for i in set {
                if keys.is_some_and(|ks| other(self.l2_keys[i], ks)) {
                    continue;
                }
                let e = &self.l2[i];
                if e.valid && op.removes(e) {
                    self.remove_l2(i);
                    n += 1;
                }
            }
        }
        self.invalidate_pwc(op, keys.map(|(_, _, k2)| k2 >> 2));
        n
    }

    /// Empties L2 slot `i`, which holds an entry, keeping the mirrors and the
    /// counts in step.
    #[inline]
    fn remove_l2(&mut self, i: usize) {
        self.leave_run(i);
        let e = &mut self.l2[i];
        e.valid = false;
        self.blocks[block_bucket(e.block())] -= 1;
        self.l2_keys[i] = u64::MAX;
        self.count_asid(self.l2_asids[i], false);
        self.l2_asids[i] = NO_ASID;
    }

    /// Removes the L2's non-global entries of `asid`: the slots whose tag mirror
    /// names it, found 64 at a time. Returns how many went.
    fn invalidate_l2_asid(&mut self, asid: u16) -> usize {
        let mut n = 0;
        for c in 0..self.l2_asids.len().div_ceil(64) {
            let base = c * 64;
            let end = (base + 64).min(self.l2_asids.len());
            let mut m = equal_mask(&self.l2_asids[base..end], asid as u32);
            while m != 0 {
                let i = base + m.trailing_zeros() as usize;
                m &= m - 1;
                let e = &self.l2[i];
                debug_assert!(e.valid && !e.global() && e.asid == asid);
                self.remove_l2(i);
                n += 1;
            }
        }
        n
    }

    /// Removes what `op` names from the walk cache; `k2`: for an operation by
    /// VA, the 2 MB block number of its address (only that key can go).
    fn invalidate_pwc(&mut self, op: Inval, k2: Option<u64>) {
        let n = self.pwc.len();
        if n == 0 {
            return;
        }
        // The slots that can hold what `op` removes: by VA, those of its block's
        // key (a superset, from the index); by ASID, those of its tag; else
        // every one.
        let mut m = match (op, k2) {
            (_, Some(k2)) => self.pwc_slots.candidates(k2),
            (Inval::Asid(a), None) => equal_mask(&self.pwc_asids, a as u32),
            _ => u64::MAX >> (64 - n),
        };
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let p = &mut self.pwc[i];
            if p.valid && op.removes_pwc(p) {
                p.valid = false;
                let key = p.key;
                self.blocks[block_bucket(key)] -= 1;
                self.pwc_slots.set_key(i, u64::MAX);
                self.count_asid(self.pwc_asids[i], false);
                self.pwc_asids[i] = NO_ASID;
            }
        }
    }

    fn note_asid(&mut self, asid: u16) {
        let b = asid_bucket(asid);
        self.asids[b / 64] |= 1 << (b % 64);
    }

    /// Returns whether a non-global entry tagged `asid` may be held (at any level).
    pub fn may_hold(&self, asid: u16) -> bool {
        let b = asid_bucket(asid);
        self.asids[b / 64] & (1 << (b % 64)) != 0
    }

    /// Returns whether a 64 KB entry may be held.
    #[inline]
    pub fn may_hold_cont(&self) -> bool {
        self.conts
    }

    /// Returns the valid 64 KB entries usable under `asid` that cover `va` (in the
    /// L1 and the L2; an L1 entry is usually a copy of an L2 one), without
    /// touching LRU state.
    pub fn cont_entries(&self, va: u64, asid: u16) -> impl Iterator<Item = &TlbEntry> {
        // A sweep defers nothing while 64 KB entries may be held. A run parked
        // before the first 64 KB fill may still be: its pending slots' old
        // contents hold no 64 KB entry either (none was ever filled before
        // the run, or everything was invalidated since), and its copies are
        // 4 KB ones, so no slot of key `k64` is stale or pending.
        debug_assert!(!self.conts || !self.owes(), "the L1 read with copies owed");
        let k64 = if self.conts { ((va >> SHIFT_64K) << 2) | 1 } else { NO_KEY };
        let l1 = self.l1_slots.keys.iter().zip(self.l1.iter()).filter(move |(k, _)| **k == k64).map(|(_, e)| e);
        let set = if k64 == NO_KEY { 0..0 } else { self.l2_set(va >> SHIFT_64K) };
        let l2 = set.filter(move |&i| self.l2_keys[i] == k64).map(|i| &self.l2[i]);
        l1.chain(l2).filter(move |e| e.usable_under(asid))
    }

    /// Records that the 64 KB entries covering `va` under `asid` have written
    /// (see [`F_DIRTY`]).
    pub fn set_cont_dirty(&mut self, va: u64, asid: u16) {
        self.settle();
        let k64 = ((va >> SHIFT_64K) << 2) | 1;
        for i in 0..self.l1.len() {
            if self.l1_slots.keys[i] == k64 && self.l1[i].usable_under(asid) {
                self.l1[i].flags |= F_DIRTY;
            }
        }
        for i in self.l2_set(va >> SHIFT_64K) {
            if self.l2_keys[i] == k64 && self.l2[i].usable_under(asid) {
                self.l2[i].flags |= F_DIRTY;
            }
        }
    }

    /// Returns an entry held that overlaps `e` with the other page size, under the
    /// same tag (a 4 KB one inside the 64 KB `e`, or a 64 KB one covering the 4 KB
    /// `e`): what the Arm ARM calls a TLB conflict. Only 4 KB and 64 KB entries
    /// are compared, and a 4 KB `e` only while a 64 KB entry may be held.
    pub fn overlap(&mut self, e: &TlbEntry) -> Option<TlbEntry> {
        self.settle();
        if e.flags & F_HUGE != 0 || !(self.conts || e.cont()) {
            return None;
        }
        let same_tag = |w: &TlbEntry| w.valid && w.global() == e.global() && (e.global() || w.asid == e.asid);
        if e.cont() {
            let hit = |w: &TlbEntry| same_tag(w) && w.flags & F_SIZE == 0 && w.tag >> (SHIFT_64K - SHIFT_4K) == e.tag;
            let l1 = self.l1.iter().find(|w| hit(w));
            let first = e.tag << (SHIFT_64K - SHIFT_4K);
            let mut l2 = (first..first + CONT_PTES).flat_map(|t| self.l2_set(t)).map(|i| &self.l2[i]);
            l1.or_else(|| l2.find(|w| hit(w))).copied()
        } else {
            let va = e.va();
            let hit = |w: &&TlbEntry| same_tag(w) && w.cont() && w.tag == va >> SHIFT_64K;
            let l1 = self.l1.iter().find(hit);
            l1.or_else(|| self.l2_set(va >> SHIFT_64K).map(|i| &self.l2[i]).find(hit)).copied()
        }
    }

    /// Returns whether an entry (of any level, global or not) in the 2 MB block of
    /// `va` may be held. While L1 copies are owed ([`Deferred`]) or parked
    /// ([`Parked`]) the counts still count what they evict, and every copy's L2
    /// original counts its block: the answer only errs towards "may hold", as
    /// always.
    pub fn may_hold_block(&self, va: u64) -> bool {
        self.blocks[block_bucket(va >> SHIFT_2M)] > 0
    }

    /// Returns whether `op` may remove anything here (false: it certainly removes
    /// nothing).
    pub fn may_hold_any(&self, op: Inval) -> bool {
        match op {
            Inval::Va { asid, va } => self.may_hold(asid) && self.may_hold_block(va),
            Inval::VaAll { va } => self.may_hold_block(va),
            Inval::Asid(asid) => self.may_hold(asid),
            Inval::All | Inval::AllNonGlobal => true,
        }
    }

    /// Calls `f` for every valid entry of every level.
    pub fn for_each(&mut self, mut f: impl FnMut(&TlbEntry)) {
        self.settle();
        for e in self.l1.iter().chain(self.l2.iter()) {
            if e.valid {
                f(e);
            }
        }
    }

    /// Calls `f` for every valid walk-cache entry.
    pub fn for_each_walk(&self, mut f: impl FnMut(WalkEntry)) {
        for p in self.pwc.iter().filter(|p| p.valid) {
            f(WalkEntry { va: p.key << SHIFT_2M, asid: p.asid, global: p.global, table: p.table, mm_uid: p.mm_uid });
        }
    }
}

/// The slots of a small fully associative cache with LRU replacement (the L1
/// TLB, the walk cache), beside its entries: a mirror of their keys, an index
/// by key, the empty slots and the recency order.
#[derive(Clone)]
struct Slots {
    /// Per slot: its entry's key, or `u64::MAX` when empty.
    keys: Vec<u64>,
    /// An index by key, so that a lookup reads a few slots instead of scanning
    /// them all: bucket [`l1_bucket`] of a key has bit `i` set for every slot
    /// `i` whose key falls in it (see [`Slots::candidates`]).
    index: Box<[u64; L1_BUCKETS]>,
    /// Bit `i` set: slot `i` is empty.
    free: u64,
    /// The slots from least to most recently used.
    order: Recency,
}

impl Slots {
    /// Returns `n` empty slots (at most [`MAX_L1_ENTRIES`]).
    fn new(n: usize) -> Self {
        Slots {
            keys: vec![u64::MAX; n],
            index: Box::new([0; L1_BUCKETS]),
            free: if n == 0 { 0 } else { u64::MAX >> (64 - n) },
            order: Recency::new(n),
        }
    }

    /// Returns a superset of the slots whose key is `k`, as a bit mask (bit `i`
    /// for slot `i`): the slots of `k`'s bucket of the index. Iterating its bits
    /// in increasing order and checking each slot's key visits the slots of key
    /// `k` in the order a scan of every slot would.
    #[inline(always)]
    fn candidates(&self, k: u64) -> u64 {
        self.index[l1_bucket(k)]
    }

    /// Sets slot `i`'s key to `k` (`u64::MAX`: empty), keeping the index and
    /// the mask of free slots in step.
    #[inline]
    fn set_key(&mut self, i: usize, k: u64) {
        let old = self.keys[i];
        if old != u64::MAX {
            self.index[l1_bucket(old)] &= !(1 << i);
        }
        if k != u64::MAX {
            self.index[l1_bucket(k)] |= 1 << i;
            self.free &= !(1 << i);
        } else {
            self.free |= 1 << i;
        }
        self.keys[i] = k;
    }

    /// Returns the slot a new entry replaces: the first empty one, else the
    /// least recently used one (the head of [`Recency`]).
    #[inline]
    fn victim(&self) -> usize {
        if self.free != 0 {
            self.free.trailing_zeros() as usize
        } else {
            self.order.lru()
        }
    }
}

/// The recency order of a [`Slots`]' slots, least recently used first: what the LRU
/// stamps of the model (a fresh tick of the TLB's clock on every hit and every
/// fill of a slot) order them by. Stamps are distinct, every one being a new
/// tick, so the slot of the smallest stamp is the list's head, and "give slot
/// `i` the newest stamp" is "move `i` to the tail". A slot whose entry was
/// invalidated keeps its place; it is refilled (and moved to the tail) before
/// the slots are full again, so the head of full slots is always a held entry's.
#[derive(Clone)]
struct Recency {
    /// `prev[i]`, `next[i]`: slot `i`'s neighbours; index `n` (the slot count)
    /// is the sentinel, whose `next` is the head and `prev` the tail.
    prev: [u8; MAX_L1_ENTRIES + 1],
    next: [u8; MAX_L1_ENTRIES + 1],
    /// The sentinel's index.
    end: u8,
}

impl Recency {
    /// Returns the order of `n` slots that have never been used: slot 0 first.
    fn new(n: usize) -> Self {
        let mut o = Recency { prev: [0; MAX_L1_ENTRIES + 1], next: [0; MAX_L1_ENTRIES + 1], end: n as u8 };
        for i in 0..=n {
            o.next[i] = ((i + 1) % (n + 1)) as u8;
            o.prev[(i + 1) % (n + 1)] = i as u8;
        }
        o
    }

    /// Returns the least recently used slot.
    #[inline(always)]
    fn lru(&self) -> usize {
        self.next[self.end as usize] as usize
    }

    /// Makes slot `i` the most recently used.
    #[inline(always)]
    fn touch(&mut self, i: usize) {
        let end = self.end as usize;
        if self.prev[end] as usize == i {
            return;
        }
        let (p, n) = (self.prev[i], self.next[i]);
        self.next[p as usize] = n;
        self.prev[n as usize] = p;
        let tail = self.prev[end];
        self.next[tail as usize] = i as u8;
        self.prev[i] = tail;
        self.next[i] = end as u8;
        self.prev[end] = i as u8;
    }
}

/// Returns the key of an entry in the tag mirrors: `tag << 2` with the size code
/// in the low bits (0 for 4 KB, 1 for 64 KB, 2 for 2 MB).
#[inline]
fn key(e: &TlbEntry) -> u64 {
    (e.tag << 2) | CODE_BY_SIZE[((e.flags & F_SIZE) >> 2) as usize]
}

/// Returns the 2 MB block number of the entry whose mirror key is `k` (what
/// [`TlbEntry::block`] returns for it).
#[inline(always)]
fn key_block(k: u64) -> u64 {
    const SHIFT_BY_CODE: [u32; 4] = [SHIFT_2M - SHIFT_4K, SHIFT_2M - SHIFT_64K, 0, 0];
    (k >> 2) >> SHIFT_BY_CODE[(k & 3) as usize]
}

/// Changes of one sign to bucketed counts, gathered while they fall in a run of
/// one value (a block, an ASID) and applied a run at a time: the counts end as
/// the changes one by one leave them.
struct Tally {
    value: u64,
    n: u16,
}

impl Tally {
    fn new() -> Self {
        Tally { value: 0, n: 0 }
    }

    /// Counts one entry of `value` into (`up`) or out of `counts[bucket(value)]`.
    #[inline(always)]
    fn add(&mut self, value: u64, counts: &mut [u16], bucket: impl Fn(u64) -> usize, up: bool) {
        if self.n > 0 && value != self.value {
            self.flush(counts, &bucket, up);
        }
        self.value = value;
        self.n += 1;
    }

    /// Applies the run gathered so far.
    #[inline(always)]
    fn flush(&mut self, counts: &mut [u16], bucket: impl Fn(u64) -> usize, up: bool) {
        if self.n > 0 {
            let c = &mut counts[bucket(self.value)];
            if up {
                *c += self.n;
            } else {
                debug_assert!(*c >= self.n, "bucket count underflow");
                *c -= self.n;
            }
            self.n = 0;
        }
    }
}

/// The ASID tag mirrors' value for a slot an invalidation by ASID never removes:
/// an empty one or a global entry.
const NO_ASID: u32 = u32::MAX;

/// Returns the value of `e`'s slot in the ASID tag mirrors: its ASID if it is a
/// valid non-global entry, else [`NO_ASID`].
#[inline]
fn asid_tag(e: &TlbEntry) -> u32 {
    if e.valid && !e.global() {
        e.asid as u32
    } else {
        NO_ASID
    }
}

/// Returns a mask with bit `j` set where `tags[j] == want` (at most 64 tags):
/// written as one pass of compares so that the compiler makes it vector code.
#[inline]
fn equal_mask<T: Copy + PartialEq>(tags: &[T], want: T) -> u64 {
    debug_assert!(tags.len() <= 64);
    let mut m = 0u64;
    for (j, &t) in tags.iter().enumerate() {
        m |= ((t == want) as u64) << j;
    }
    m
}

/// Returns the way of a set to fill: the first empty one (its key mirror
/// `keys` at `u64::MAX`), else the one of the least LRU stamp (`stamps`, the
/// set's; the first of equals).
fn lru_victim(keys: &[u64], stamps: impl Iterator<Item = u64>) -> usize {
    let mut best = 0;
    let mut best_lru = u64::MAX;
    for (i, (&k, lru)) in keys.iter().zip(stamps).enumerate() {
        if k == u64::MAX {
            return i;
        }
        if lru < best_lru {
            best_lru = lru;
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(va: u64, asid: u16, flags: u8) -> TlbEntry {
        let mut e = TlbEntry { pfn: 7, asid, flags, ..Default::default() };
        e.tag = va >> e.shift();
        e
    }

    #[test]
    fn asid_tags_separate_address_spaces_and_global_matches_all() {
        let mut t = Tlb::new(4, 16, 4, 4);
        t.fill(entry(0x1000, 3, 0), false);
        assert!(t.lookup(0x1000, 3).is_some());
        assert!(t.lookup(0x1000, 4).is_none());
        t.fill(entry(0x5000, 3, F_GLOBAL), false);
        assert!(t.lookup(0x5000, 9).is_some());
    }

    #[test]
    fn huge_entry_covers_its_block() {
        let mut t = Tlb::new(4, 16, 4, 4);
        t.fill(entry(0x20_0000, 1, F_HUGE), false);
        assert!(t.lookup(0x3f_f000, 1).is_some());
        assert!(t.lookup(0x40_0000, 1).is_none());
    }

    #[test]
    fn invalidate_by_asid_keeps_globals_and_other_asids() {
        let mut t = Tlb::new(4, 16, 4, 4);
        t.fill(entry(0x1000, 1, 0), false);
        t.fill(entry(0x2000, 2, 0), false);
        t.fill(entry(0x3000, 1, F_GLOBAL), false);
        // Each fill lands in the L1 and the L2.
        assert_eq!(t.invalidate(Inval::Asid(1)), 2);
        assert!(t.lookup(0x1000, 1).is_none());
        assert!(t.lookup(0x2000, 2).is_some());
        assert!(t.lookup(0x3000, 1).is_some());
    }

    #[test]
    fn invalidate_by_va_finds_page_and_block_entries_in_their_sets() {
        let mut t = Tlb::new(1, 64, 4, 4);
        // A 2 MB block, two 4 KB pages (one inside the block's range), all in the L2.
        t.fill(entry(0x4020_0000, 1, F_HUGE), true);
        t.fill(entry(0x4020_3000, 1, 0), true);
        t.fill(entry(0x4020_4000, 1, 0), true);
        assert_eq!(t.invalidate(Inval::VaAll { va: 0x4020_3000 }), 2);
        assert!(t.lookup(0x4020_3000, 1).is_none());
        assert!(t.lookup(0x4020_4000, 1).is_some());
        assert_eq!(t.invalidate(Inval::Va { asid: 1, va: 0x4020_4000 }), 2, "the L2 entry and its L1 copy");
    }

    #[test]
    fn asid_filter_skips_only_what_cannot_be_held() {
        let mut t = Tlb::new(4, 16, 4, 4);
        t.fill(entry(0x1000, 1, 0), false);
        t.pwc_fill(0x1000, 1, false, TableRef::default(), 0);
        // ASID 7 was never filled; 4097 shares ASID 1's filter bit but not its entries.
        assert_eq!(t.invalidate(Inval::Asid(7)), 0);
        assert_eq!(t.invalidate(Inval::Asid(4097)), 0);
        assert!(t.lookup(0x1000, 1).is_some());
        assert!(t.pwc_lookup(0x1000, 1, false));
        assert_eq!(t.invalidate(Inval::Va { asid: 1, va: 0x1000 }), 2);
        assert!(!t.pwc_lookup(0x1000, 1, false));
        t.fill(entry(0x2000, 2, 0), false);
        assert_eq!(t.invalidate(Inval::All), 2);
        assert!(!t.may_hold(2));
    }

    /// Recounts valid entries per block bucket from scratch.
    fn recount(t: &Tlb) -> Vec<u16> {
        let mut c = vec![0; BLOCK_BUCKETS];
        t.clone().for_each(|e| c[block_bucket(e.block())] += 1);
        for p in t.pwc.iter().filter(|p| p.valid) {
            c[block_bucket(p.key)] += 1;
        }
        c
    }

    #[test]
    fn block_counts_follow_fills_evictions_and_invalidations() {
        // A small TLB, so that fills evict from every level.
        let mut t = Tlb::new(2, 8, 2, 2);
        let vas = [0x1000, 0x2000, 0x20_3000, 0x40_0000, 0x4000_0000, 0x7fff_0000_1000];
        for (i, &va) in vas.iter().enumerate() {
            let flags = if i == 3 {
                F_HUGE
            } else if i == 4 {
                F_GLOBAL
            } else {
                0
            };
            t.fill(entry(va, (i % 2) as u16, flags), i == 2);
            t.pwc_fill(va, (i % 2) as u16, flags & F_GLOBAL != 0, TableRef::default(), 0);
            let _ = t.lookup(vas[0], 0);
            assert_eq!(t.blocks.to_vec(), recount(&t), "after filling {va:#x}");
        }
        assert!(t.may_hold_block(0x7fff_0000_1000) && !t.may_hold_block(0x6000_0000_0000));
        for op in [Inval::Va { asid: 1, va: 0x2000 }, Inval::VaAll { va: 0x4000_0000 }, Inval::Asid(0), Inval::All] {
            t.invalidate(op);
            assert_eq!(t.blocks.to_vec(), recount(&t), "after {op:?}");
        }
        assert!(!t.may_hold_block(0x7fff_0000_1000));
    }

    /// The exact per-ASID counts, recounted from every level's valid entries.
    fn recount_asids(t: &Tlb) -> Vec<u16> {
        let mut c = vec![0; ASID_COUNT_BUCKETS];
        t.clone().for_each(|e| {
            if !e.global() {
                c[asid_count_bucket(e.asid as u32)] += 1;
            }
        });
        for p in t.pwc.iter().filter(|p| p.valid && !p.global) {
            c[asid_count_bucket(p.asid as u32)] += 1;
        }
        c
    }

    #[test]
    fn asid_counts_are_exact_and_an_uncounted_asid_is_not_scanned() {
        // A small TLB, so that fills evict from every level; ASIDs 0, 1 and
        // 1 + ASID_COUNT_BUCKETS (which shares ASID 1's bucket).
        let mut t = Tlb::new(2, 8, 2, 2);
        let asids = [0u16, 1, (1 + ASID_COUNT_BUCKETS) as u16];
        for i in 0..24u64 {
            let asid = asids[(i % 3) as usize];
            let flags = match i % 5 {
                3 => F_HUGE,
                4 => F_GLOBAL,
                _ => 0,
            };
            let va = 0x1000 * (i + 1) + ((i % 4) << 21);
            t.fill(entry(va, asid, flags), i % 7 == 2);
            t.pwc_fill(va, asid, flags & F_GLOBAL != 0, TableRef::default(), 0);
            let _ = t.lookup(0x1000, 0);
            assert_eq!(t.asid_counts.to_vec(), recount_asids(&t), "after fill {i}");
        }
        let ops = [
            Inval::Va { asid: 1, va: 0x2000 },
            Inval::VaAll { va: 0x5000 },
            Inval::Asid(1),
            Inval::Asid(1),
            Inval::AllNonGlobal,
            Inval::Asid(0),
            Inval::All,
        ];
        for op in ops {
            let held = recount_asids(&t);
            let n = t.invalidate(op);
            assert_eq!(t.asid_counts.to_vec(), recount_asids(&t), "after {op:?}");
            if let Inval::Asid(a) = op {
                // Nothing of `a` is left, and its bucket kept only the other ASID's.
                let mut left = 0;
                t.for_each(|e| left += (!e.global() && e.asid == a) as usize);
                assert_eq!(left, 0, "{op:?}");
                let b = asid_count_bucket(a as u32);
                assert!(n as u16 <= held[b]);
            }
        }
        assert!(t.asid_counts.iter().all(|&c| c == 0));
        // With the counts at zero, an invalidation by ASID removes nothing.
        assert_eq!(t.invalidate(Inval::Asid(0)), 0);
    }

    #[test]
    fn a_64k_entry_covers_its_block_and_any_page_invalidation_removes_it() {
        let mut t = Tlb::new(4, 64, 4, 4);
        assert!(!t.may_hold_cont());
        t.fill(entry(0x4001_0000, 1, F_CONT), true);
        assert!(t.may_hold_cont());
        assert!(t.lookup(0x4001_f000, 1).is_some(), "the block's last page, through the L2");
        assert!(t.lookup(0x4002_0000, 1).is_none());
        assert!(t.lookup(0x4001_3000, 2).is_none(), "another ASID");
        assert_eq!(t.cont_entries(0x4001_5000, 1).count(), 2, "the L2 entry and its L1 copy");
        assert_eq!(t.invalidate(Inval::Va { asid: 1, va: 0x4001_9000 }), 2);
        assert!(t.lookup(0x4001_0000, 1).is_none());
        t.fill(entry(0x4001_0000, 1, F_CONT), false);
        assert_eq!(t.invalidate(Inval::Asid(1)), 2);
        t.fill(entry(0x4001_0000, 1, F_CONT), false);
        assert_eq!(t.blocks.to_vec(), recount(&t));
        assert_eq!(t.invalidate(Inval::All), 2);
        assert!(!t.may_hold_cont());
    }

    #[test]
    fn a_64k_entry_and_a_4k_entry_of_one_page_overlap() {
        let mut t = Tlb::new(4, 64, 4, 4);
        let small = entry(0x4001_3000, 1, 0);
        let big = entry(0x4001_0000, 1, F_CONT);
        assert!(t.overlap(&big).is_none());
        t.fill(small, true);
        assert_eq!(t.overlap(&big).map(|e| e.tag), Some(small.tag), "a 4 KB entry inside, in the L2");
        t.fill(big, false);
        assert_eq!(t.overlap(&small).map(|e| e.tag), Some(big.tag));
        assert!(t.overlap(&entry(0x4002_0000, 1, 0)).is_none());
        assert!(t.overlap(&entry(0x4001_4000, 2, 0)).is_none(), "another ASID");
    }

    #[test]
    fn the_dirty_state_of_a_64k_entry_is_recorded_in_every_copy() {
        let mut t = Tlb::new(4, 64, 4, 4);
        t.fill(entry(0x4001_0000, 1, F_CONT | F_WRITE), false);
        assert!(t.cont_entries(0x4001_0000, 1).all(|e| e.flags & F_DIRTY == 0));
        t.set_cont_dirty(0x4001_8000, 1);
        assert!(t.cont_entries(0x4001_0000, 1).all(|e| e.flags & F_DIRTY != 0));
    }

    #[test]
    fn a_walk_cache_fill_takes_the_first_empty_slot_else_the_least_recently_used() {
        let mut t = Tlb::new(4, 8, 2, 4);
        let block = |i: u64| i << SHIFT_2M;
        for i in 0..4 {
            t.pwc_fill(block(i), 1, false, TableRef::default(), 0);
        }
        assert!(t.pwc_lookup(block(0), 1, false), "block 0 is now the most recently used");
        t.invalidate(Inval::Va { asid: 1, va: block(2) });
        assert!(!t.pwc_lookup(block(2), 1, false));
        t.pwc_fill(block(4), 1, false, TableRef::default(), 0);
        let held = |t: &mut Tlb| (0..6).filter(|&i| t.pwc_lookup(block(i), 1, false)).collect::<Vec<_>>();
        assert_eq!(held(&mut t), vec![0, 1, 3, 4], "the empty slot is refilled before anything is evicted");
        // The lookups just made ran 0, 1, 3, 4 in that order: 0 is the least recent.
        t.pwc_fill(block(5), 1, false, TableRef::default(), 0);
        assert_eq!(held(&mut t), vec![1, 3, 4, 5]);
        assert!(!t.pwc_lookup(block(1), 2, false), "another ASID's descriptor is not this one's");
    }

    /// Everything a lookup, a fill or an invalidation can tell apart, after the
    /// copies a clone of `t` owes are settled (`t` itself keeps them owed).
    fn state(t: &Tlb) -> String {
        let mut t = t.clone();
        t.settle();
        for k in 0..RUNS {
            if t.runs.run[k].len > 0 {
                t.dissolve(k);
            }
        }
        let valid = |e: &TlbEntry| if e.valid { format!("{e:?}") } else { "-".into() };
        let mut order = Vec::new();
        let mut s = t.l1_slots.order.lru();
        while s != t.l1_slots.order.end as usize {
            order.push(s);
            s = t.l1_slots.order.next[s] as usize;
        }
        format!(
            "l1 {:?}\nkeys {:?} free {:x} order {:?} asids {:?}\nindex {:?}\nl2 {:?}\n{:?} {:?} {:?}\nblocks {:?}\ncounts {:?} clock {}",
            t.l1.iter().map(valid).collect::<Vec<_>>(),
            t.l1_slots.keys,
            t.l1_slots.free,
            order,
            t.l1_asids,
            t.l1_slots.index.to_vec(),
            t.l2.iter().map(valid).collect::<Vec<_>>(),
            t.l2_keys,
            t.l2_lru,
            t.l2_asids,
            t.blocks.to_vec(),
            t.asid_counts.to_vec(),
            t.clock
        )
    }

    #[test]
    fn a_sweep_leaves_the_tlb_as_lookups_one_by_one_do() {
        use rand_chacha::ChaCha8Rng;
        use rand_core::{Rng, SeedableRng};
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut swept_pages = 0;
        let mut full_settles = 0;
        let mut runs_taken = 0;
        for round in 0..300 {
            // Small L1s and L2s, so that runs outgrow them, with free slots left.
            let l1 = [2, 3, 5, 8, 48][round % 5];
            // Every L2 geometry the sweep has a path for: the ways it knows (4,
            // 8) and others, sets a power of two or not.
            let ways = [1, 2, 4, 8][round % 4];
            let mut a = Tlb::new(l1, ways * [8, 12, 32][round % 3], ways, 4);
            let mut b = a.clone();
            let asids = [1u16, 2];
            let base = 0x4000_0000u64 + ((rng.next_u64() % 2) << 21) - 0x8000;
            let mut ops = Vec::new();
            for step in 0..120 {
                let mut asid = asids[(rng.next_u64() % 2) as usize];
                let page = base + (rng.next_u64() % 40) * 4096;
                let op = rng.next_u64() % 11;
                match op {
                    0..=2 => {
                        // Fills of a run of pages, mostly 4 KB, a few global or 2 MB.
                        let flags = match rng.next_u64() % 12 {
                            0 => F_GLOBAL,
                            1 => F_HUGE,
                            _ => 0,
                        };
                        let spec = rng.next_u64() % 2 == 0;
                        for i in 0..1 + rng.next_u64() % 12 {
                            let mut e = TlbEntry { pfn: step, asid, flags, mm_uid: 1, ..Default::default() };
                            e.tag = (page + i * 4096) >> e.shift();
                            a.fill(e, spec);
                            b.fill(e, spec);
                        }
                    }
                    3 => {
                        let r = a.lookup(page, asid);
                        assert_eq!(r, b.lookup(page, asid), "round {round} step {step}: lookup of {page:#x}");
                    }
                    9 | 10 if a.owes() => {
                        // The run's next page, as the general path takes it
                        // after a sweep stopped there: a lookup, then on a
                        // miss the walk's fill (of another ASID's now and then).
                        let next = a.deferred.next_page << 12;
                        let owner = if rng.next_u64() % 8 == 0 {
                            asids[0] + asids[1] - a.deferred.asid
                        } else {
                            a.deferred.asid
                        };
                        // Op 10 fills with no lookup first (as nothing in the
                        // simulator does, but a fill must not rely on it).
                        let r = (op == 9).then(|| a.lookup_entry(next, owner));
                        if let Some(r) = r {
                            assert_eq!(
                                r.map(|(h, e)| (h, e.tag)),
                                b.lookup_entry(next, owner).map(|(h, e)| (h, e.tag)),
                                "round {round} step {step}: lookup of the run's next page {next:#x}"
                            );
                        }
                        if r.is_none_or(|r| r.is_none()) {
                            let flags = if rng.next_u64() % 10 == 0 { F_GLOBAL } else { 0 };
                            let e = TlbEntry {
                                tag: next >> 12,
                                pfn: step,
                                asid: owner,
                                flags,
                                mm_uid: 1,
                                ..Default::default()
                            };
                            let spec = rng.next_u64() % 4 == 0;
                            a.fill(e, spec);
                            b.fill(e, spec);
                        }
                    }
                    4 => {
                        let inval = [Inval::Va { asid, va: page }, Inval::Asid(asid), Inval::VaAll { va: page }];
                        let i = inval[(rng.next_u64() % 3) as usize];
                        assert_eq!(a.invalidate(i), b.invalidate(i), "round {round} step {step}: {i:?}");
                    }
                    _ => {
                        // A run from `page`, the page after the run owed (a
                        // continuation, as a touch's next chunk is), or a page
                        // just below a parked run's pending copies (so that it
                        // meets them while it checks the L1).
                        let live = a.runs.run.iter().filter(|r| r.len > 0).count();
                        let mut pages = 1 + rng.next_u64() % 24;
                        let va = match rng.next_u64() % 6 {
                            0 | 1 if a.owes() => a.deferred.next_page << 12,
                            // The first page of a run swept before (under
                            // either ASID), mostly with as many pages as it
                            // has or a few more.
                            4 | 5 if live > 0 => {
                                let k = (rng.next_u64() as usize) % live;
                                let r = a.runs.run.iter().filter(|r| r.len > 0).nth(k).copied().unwrap_or_default();
                                if rng.next_u64() % 4 != 0 {
                                    pages = r.len as u64 + rng.next_u64() % 4;
                                    asid = r.asid;
                                }
                                r.first << 12
                            }
                            2 if a.parked.mask != 0 => {
                                a.parked.page.saturating_sub(rng.next_u64() % (l1 as u64 + 1)) << 12
                            }
                            _ => page,
                        };
                        let rule = SweepRule { asid, uid: 1, min_ver: 0, write: false };
                        let owed = a.deferred.n;
                        let before = a.runs.run.map(|r| (r.len, r.first, r.base));
                        let done = a.sweep(va, pages, &rule, |_| {});
                        swept_pages += done;
                        // A run kept with a new base was taken whole.
                        runs_taken += (0..RUNS)
                            .filter(|&k| {
                                let r = a.runs.run[k];
                                r.len > 0 && (r.len, r.first) == (before[k].0, before[k].1) && r.base != before[k].2
                            })
                            .count();
                        if owed + (done as usize) >= l1 && done > 0 {
                            full_settles += 1;
                        }
                        for i in 0..done {
                            let hit = b.lookup_entry(va + i * 4096, asid);
                            assert!(
                                matches!(hit, Some((Hit::L2(_), e)) if e.flags & F_SIZE == 0),
                                "round {round} step {step}: page {i} of the run swept but {hit:?} one by one"
                            );
                        }
                        if done < pages {
                            // The page it stopped at is one the general path must
                            // take, or one the L1 held when the run began (a copy
                            // of the run may have evicted it since).
                            let next = va + done * 4096;
                            let mut c = b.clone();
                            let hit = c.lookup_entry(next, asid);
                            let held = [block_key(next >> 12), (next >> 12) << 2]
                                .iter()
                                .any(|&k| l1_holds_in(&a.l1_slots, &a.l1, a.parked.mask, k, asid))
                                || a.parked.covers(next >> 12);
                            assert!(
                                held || !matches!(hit, Some((Hit::L2(_), e)) if e.flags & F_SIZE == 0),
                                "round {round} step {step}: stopped at {next:#x}, which one by one is {hit:?}"
                            );
                        }
                    }
                }
                ops.push(op);
                assert_eq!(state(&a), state(&b), "round {round} step {step} (ops {ops:?})");
            }
        }
        // The differential test reached what it is for.
        assert!(swept_pages > 10_000, "only {swept_pages} pages swept");
        assert!(full_settles > 1_000, "only {full_settles} runs outgrew the L1");
        assert!(runs_taken > 500, "only {runs_taken} runs taken whole");
    }

    /// Sweeps of the same chunks again and again, as a loop over a buffer makes
    /// them, with now and then a fill, a lookup or an invalidation among their
    /// pages' sets and a sweep of other pages (which evicts the L1): a TLB that
    /// takes runs whole ends every step as one whose lookups go one by one.
    #[test]
    fn runs_taken_whole_leave_the_tlb_as_lookups_one_by_one_do() {
        use rand_chacha::ChaCha8Rng;
        use rand_core::{Rng, SeedableRng};
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let mut taken = 0;
        for round in 0..24 {
            let ways = [2, 4, 5, 8][round % 4];
            let sets = [16, 64, 256][round % 3];
            let l1 = [8, 48][round % 2];
            let mut a = Tlb::new(l1, ways * sets, ways, 4);
            let mut b = a.clone();
            let (buf, other) = (0x10_0000_0000u64 >> 12, 0x20_0000_0000u64 >> 12);
            let chunk = 1 + rng.next_u64() % sets.min(RUN_MAX) as u64;
            let chunks = 1 + rng.next_u64() % 4;
            let fill = |a: &mut Tlb, b: &mut Tlb, page: u64, asid: u16, global: bool| {
                let flags = if global { F_GLOBAL } else { 0 };
                let e = TlbEntry { tag: page, pfn: page, asid, flags, mm_uid: 1, ver: 3, ..Default::default() };
                a.fill(e, false);
                b.fill(e, false);
            };
            for page in buf..buf + chunk * chunks {
                fill(&mut a, &mut b, page, 1, false);
            }
            for step in 0..60 {
                // The loop over the buffer, chunk by chunk, a page missed now and then.
                for c in 0..chunks {
                    let first = buf + c * chunk;
                    let uid = if step % 5 == 4 { 2 } else { 1 };
                    let rule = SweepRule { asid: 1, uid, min_ver: [0, 3, 4][step % 3], write: false };
                    let mut page = first;
                    while page < first + chunk {
                        let before = a.runs.run.map(|r| (r.len, r.first, r.base));
                        let done = a.sweep(page << 12, first + chunk - page, &rule, |_| {});
                        taken += (0..RUNS)
                            .filter(|&k| {
                                let r = a.runs.run[k];
                                r.len > 0 && (r.len, r.first) == (before[k].0, before[k].1) && r.base != before[k].2
                            })
                            .count();
                        for i in 0..done {
                            let hit = b.lookup_entry((page + i) << 12, 1);
                            assert!(
                                matches!(hit, Some((Hit::L2(_), e)) if e.ver >= rule.min_ver && e.mm_uid == rule.uid),
                                "round {round} step {step}: page {i} swept under {rule:?} but {hit:?} one by one"
                            );
                        }
                        page += done;
                        if page < first + chunk {
                            // The general path: a lookup, a fill on a miss.
                            let hit = a.lookup_entry(page << 12, 1).map(|(h, _)| h);
                            assert_eq!(hit, b.lookup_entry(page << 12, 1).map(|(h, _)| h), "round {round} step {step}");
                            if hit.is_none() {
                                fill(&mut a, &mut b, page, 1, false);
                            }
                            page += 1;
                        }
                        assert_eq!(state(&a), state(&b), "round {round} step {step} chunk {c}");
                    }
                }
                // Something else in the buffer's sets.
                let page = buf + rng.next_u64() % (chunk * chunks);
                match rng.next_u64() % 8 {
                    0 => fill(&mut a, &mut b, page + sets as u64 * (1 + rng.next_u64() % 3), 2, false),
                    1 => fill(&mut a, &mut b, page, 2, rng.next_u64() % 2 == 0),
                    2 => fill(&mut a, &mut b, page, 1, false),
                    3 => assert_eq!(a.lookup(page << 12, 1), b.lookup(page << 12, 1)),
                    4 => assert_eq!(
                        a.invalidate(Inval::Va { asid: 1, va: page << 12 }),
                        b.invalidate(Inval::Va { asid: 1, va: page << 12 })
                    ),
                    5 if step % 7 == 0 => assert_eq!(a.invalidate(Inval::Asid(1)), b.invalidate(Inval::Asid(1))),
                    _ => {
                        // Another process's pages, which evict the L1.
                        for p in other..other + l1 as u64 + 2 {
                            if a.lookup(p << 12, 3).is_none() {
                                assert!(b.lookup(p << 12, 3).is_none());
                                fill(&mut a, &mut b, p, 3, false);
                            } else {
                                assert!(b.lookup(p << 12, 3).is_some());
                            }
                        }
                    }
                }
                assert_eq!(state(&a), state(&b), "round {round} step {step}");
            }
        }
        assert!(taken > 200, "only {taken} runs taken whole");
    }

    #[test]
    fn l1_evicts_least_recently_used_and_l2_refills_it() {
        let mut t = Tlb::new(2, 16, 4, 4);
        for va in [0x1000, 0x2000, 0x3000] {
            t.fill(entry(va, 1, 0), false);
        }
        assert!(matches!(t.lookup(0x1000, 1), Some(Hit::L2(_))));
        assert!(matches!(t.lookup(0x1000, 1), Some(Hit::L1(_))));
    }
}
