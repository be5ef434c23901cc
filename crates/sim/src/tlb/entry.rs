//! What a TLB entry is: a cached translation with its flags, sizes and ground
//! truth ([`TlbEntry`]), where a lookup hit ([`Hit`]), what an invalidation
//! removes ([`Inval`]), and the keys and ASID tags the other parts mirror
//! entries by.

use crate::pagetable::{PteRef, CONT_PTES, SHIFT_2M, SHIFT_4K, SHIFT_64K};

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
pub(super) const F_SIZE: u8 = F_HUGE | F_CONT;
/// Page shift by `(flags & F_SIZE) >> 2`: 4 KB, 2 MB, 64 KB (the fourth is unused).
const SHIFT_BY_SIZE: [u32; 4] = [SHIFT_4K, SHIFT_2M, SHIFT_64K, SHIFT_2M];
/// Size code of [`key`] by `(flags & F_SIZE) >> 2`: 4 KB 0, 2 MB 2, 64 KB 1.
const CODE_BY_SIZE: [u64; 4] = [0, 2, 1, 2];
/// A key no entry has (size code 3): what a lookup compares against for a size the
/// TLB cannot hold.
pub(super) const NO_KEY: u64 = 3;

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
    pub(super) fn block(&self) -> u64 {
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
    /// Non-global entries of `asid` filled by hardware thread `thread` of a
    /// core whose threads share the TLB ([`super::ThreadTlb`]): what
    /// [`Inval::Asid`] from that thread removes there.
    AsidOfThread { asid: u16, thread: u8 },
    /// Entries filled by hardware thread `thread` of a shared TLB, the global
    /// ones too if `global`: what [`Inval::All`] (`global`) and
    /// [`Inval::AllNonGlobal`] from that thread remove there.
    Thread { thread: u8, global: bool },
}

impl Inval {
    /// Returns whether the operation removes TLB entry `e`.
    pub(super) fn removes(&self, e: &TlbEntry) -> bool {
        match *self {
            Inval::Va { asid, va } => !e.global() && e.asid == asid && e.tag == va >> e.shift(),
            Inval::VaAll { va } => e.tag == va >> e.shift(),
            Inval::Asid(a) => !e.global() && e.asid == a,
            Inval::All => true,
            Inval::AllNonGlobal => !e.global(),
            Inval::AsidOfThread { asid, thread } => !e.global() && e.asid == asid && thread_of(e.va()) == thread,
            Inval::Thread { thread, global } => (global || !e.global()) && thread_of(e.va()) == thread,
        }
    }
}

/// The lowest bit of a virtual address that a shared TLB tags with the
/// hardware thread that filled the entry ([`thread_va`]).
const THREAD_SHIFT: u32 = 52;

/// Returns `va` as the TLB of a core whose threads share it keys an entry
/// of hardware thread `thread`: bits 52 to 55, which no address the
/// simulator translates uses (user addresses are below 2^48, kernel ones
/// from `0xffff_0000_0000_0000` have them all set), flipped by the thread's
/// number. Thread 0's addresses are its own: a TLB no two threads share
/// sees exactly the addresses it always did.
#[inline(always)]
pub fn thread_va(va: u64, thread: u8) -> u64 {
    va ^ (u64::from(thread) << THREAD_SHIFT)
}

/// Returns the hardware thread whose address [`thread_va`] made `va`.
#[inline]
pub fn thread_of(va: u64) -> u8 {
    // A kernel address (bit 63 set) had bits 52 to 55 all set before.
    let canonical = if va >> 63 == 1 { 0xf } else { 0 };
    (((va >> THREAD_SHIFT) ^ canonical) & 0xf) as u8
}

/// Returns the key of an entry in the tag mirrors: `tag << 2` with the size code
/// in the low bits (0 for 4 KB, 1 for 64 KB, 2 for 2 MB).
#[inline]
pub(super) fn key(e: &TlbEntry) -> u64 {
    (e.tag << 2) | CODE_BY_SIZE[((e.flags & F_SIZE) >> 2) as usize]
}

/// Returns the 2 MB block number of the entry whose mirror key is `k` (what
/// [`TlbEntry::block`] returns for it).
#[inline(always)]
pub(super) fn key_block(k: u64) -> u64 {
    const SHIFT_BY_CODE: [u32; 4] = [SHIFT_2M - SHIFT_4K, SHIFT_2M - SHIFT_64K, 0, 0];
    (k >> 2) >> SHIFT_BY_CODE[(k & 3) as usize]
}

/// Returns the key of a 2 MB entry covering page number `page` (`va >> 12`).
#[inline(always)]
pub(super) fn block_key(page: u64) -> u64 {
    ((page >> (SHIFT_2M - SHIFT_4K)) << 2) | 2
}

/// Returns the keys of the entries of each size that could cover `va`: 4 KB,
/// 64 KB ([`NO_KEY`] unless `conts`, i.e. while none may be held) and 2 MB.
#[inline]
pub(super) fn keys_of(va: u64, conts: bool) -> (u64, u64, u64) {
    let k64 = if conts { ((va >> SHIFT_64K) << 2) | 1 } else { NO_KEY };
    ((va >> SHIFT_4K) << 2, k64, ((va >> SHIFT_2M) << 2) | 2)
}

/// The ASID tag mirrors' value for a slot an invalidation by ASID never removes:
/// an empty one or a global entry.
pub(super) const NO_ASID: u32 = u32::MAX;

/// Returns the value of `e`'s slot in the ASID tag mirrors: its ASID if it is a
/// valid non-global entry, else [`NO_ASID`].
#[inline]
pub(super) fn asid_tag(e: &TlbEntry) -> u32 {
    if e.valid && !e.global() {
        e.asid as u32
    } else {
        NO_ASID
    }
}

/// Returns a mask with bit `j` set where `tags[j] == want` (at most 64 tags):
/// written as one pass of compares so that the compiler makes it vector code.
#[inline]
pub(super) fn equal_mask<T: Copy + PartialEq>(tags: &[T], want: T) -> u64 {
    debug_assert!(tags.len() <= 64);
    let mut m = 0u64;
    for (j, &t) in tags.iter().enumerate() {
        m |= ((t == want) as u64) << j;
    }
    m
}
