//! Four-level page tables (arm64 4 KB granule / x86-64 4-level paging) for every
//! address space, in one arena.
//!
//! Levels 0-2 are directory nodes of 512 descriptors; a level-2 descriptor is a
//! table or a 2 MB block; level-3 tables hold 512 PTEs. PTEs live in a PTE arena
//! in chunks of 512 so that a TLB entry can name its PTE by index ([`PteRef`]):
//! that is how the oracle finds the ground truth of a cached translation in one
//! load. Besides the architectural bits, each PTE carries a *version* (the global
//! change sequence number of its last change) and the oracle's *floor* (the
//! sequence number of the latest weakening change whose flush has returned).

mod patch;

pub use patch::{highest_bit, lowest_bit, zip};
use patch::{ExclMemo, PatchHead};

/// Shift of a 4 KB page.
pub const SHIFT_4K: u32 = 12;
/// Shift of a 2 MB block.
pub const SHIFT_2M: u32 = 21;

/// Index of a PTE in the arena.
pub type PteRef = u32;

/// PTE bit: the translation is valid.
pub const P_VALID: u16 = 1;
/// PTE bit: writes are allowed.
pub const P_WRITE: u16 = 2;
/// PTE bit: user-accessible (arm64 `AP[1]`, x86 U/S).
pub const P_USER: u16 = 4;
/// PTE bit: global (arm64 nG clear, x86 G set).
pub const P_GLOBAL: u16 = 8;
/// PTE bit: accessed (arm64 AF, x86 A).
pub const P_ACCESS: u16 = 16;
/// PTE bit: dirty (arm64 DBM-managed, x86 D).
pub const P_DIRTY: u16 = 32;
/// PTE bit: a 2 MB block descriptor.
pub const P_HUGE: u16 = 64;
/// PTE bit: one of 16 PTEs of a 64 KB-aligned block that map 16 physically
/// contiguous, equally aligned frames, which the TLB may cache as one 64 KB entry
/// (arm64 `PTE_CONT`; the policy crate's `PteVal::CONT`).
pub const P_CONT: u16 = 128;
/// Shift of a 64 KB contiguous block.
pub const SHIFT_64K: u32 = 16;
/// PTEs in a contiguous block.
pub const CONT_PTES: u64 = 16;

/// A page-table entry with its ground-truth bookkeeping.
#[derive(Clone, Copy, Debug, Default)]
pub struct Pte {
    /// Physical frame number.
    pub pfn: u64,
    /// `P_*` bits.
    pub flags: u16,
    /// Sequence number of the last change to this entry.
    pub ver: u64,
    /// Oracle: sequence number of the latest weakening change already flushed.
    pub floor: u64,
    /// Oracle: the obligation of that change.
    pub floor_obl: u32,
    /// Ground truth: a CPU wrote the page through this mapping since the kernel
    /// last mapped it or took its dirty state (what `no_lost_dirty` judges a
    /// teardown's report by). Kept across a clear until the kernel judges it.
    pub written: bool,
}

impl Pte {
    /// Returns whether the entry is valid.
    pub fn valid(&self) -> bool {
        self.flags & P_VALID != 0
    }
    /// Returns whether the entry allows writes.
    pub fn writable(&self) -> bool {
        self.flags & P_WRITE != 0
    }
    /// Returns whether the entry is valid and has the contiguous bit.
    pub fn valid_cont(&self) -> bool {
        self.flags & (P_VALID | P_CONT) == P_VALID | P_CONT
    }
}

/// The result of a walk that found a valid descriptor chain.
#[derive(Clone, Copy, Debug)]
pub struct Walked {
    /// The leaf PTE (or the block descriptor).
    pub pte: PteRef,
    /// Whether it is a 2 MB block.
    pub huge: bool,
    /// Table loads a cold walk needs (4 for a page, 3 for a block).
    pub levels: u32,
}

const EMPTY: u32 = 0;
const BLOCK: u32 = 1 << 31;

/// What [`PageTables::for_each_leaf`] finds in range: a 2 MB block's PTE, or the
/// part `[va, stop)` of a last-level table whose PTEs start at `chunk`.
enum Leaf {
    Block { va: u64, pte: PteRef },
    Table { va: u64, chunk: u32, stop: u64 },
}

/// One incarnation of a last-level table: its chunk of the PTE arena and how
/// many times that chunk had been freed when the table was read. A walk cache
/// that kept it walks through a freed page-table page once the chunk's count
/// moved on (`PageTables::table_freed`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableRef {
    /// The arena index of the table's first PTE.
    pub chunk: u32,
    /// The chunk's free count when the table was read.
    pub gen: u32,
}

/// Every address space's page tables.
#[derive(Default)]
pub struct PageTables {
    dirs: Vec<[u32; 512]>,
    /// Per directory, used for roots only: the level-2 directory the root's
    /// tree last gained or found under one 1 GB region (see [`L2Hint`]).
    l2_hints: Vec<L2Hint>,
    free_dirs: Vec<u32>,
    ptes: Vec<Pte>,
    free_chunks: Vec<u32>,
    /// Per chunk of 512 PTEs: how many times it was freed.
    freed: Vec<u32>,
    /// Per chunk of 512 PTEs: which are valid, and of those which are
    /// writable, dirty or contiguous, as bitmaps of the PTEs as stored (a
    /// patch's change not in them), recomputed on demand after any
    /// [`PageTables::pte_mut`] of the chunk (see [`PageTables::run_masks`]).
    bits: Vec<ChunkBits>,
    /// Per chunk of 512 PTEs: which words of its [`ChunkBits`] have stale bits,
    /// its PTEs' counts by flag (as of the last count) and its patch, dense so
    /// that a whole table counted again with nothing changed reads its head
    /// alone.
    heads: Vec<ChunkHead>,
    /// Per chunk of 512 PTEs: the PTEs its head's patch changes, where that
    /// is not every PTE ([`PatchHead`]).
    patch_masks: Vec<[u64; 8]>,
    /// Per chunk of 512 PTEs: which of its PTEs' frames had one reference,
    /// as last looked up ([`ExclMemo`]).
    excl: Vec<ExclMemo>,
    /// Per chunk of 512 PTEs: the frames' share epoch its memo was looked up
    /// at (`u64::MAX`: none, or a PTE of it changed since).
    excl_epoch: Vec<u64>,
    /// The highest floor any PTE has been given through
    /// [`PageTables::raise_floor`]: an entry filled from a PTE version at least
    /// this high cannot be stale, whatever its PTE's floor.
    max_floor: u64,
    /// Per chunk of 512 PTEs: the highest floor given to one of its PTEs since
    /// the chunk was last allocated, the same bound for one table (see
    /// [`PageTables::floor_bound`]); 8 bytes a table, dense, where the PTE it
    /// spares a read of is 32 bytes among a large machine's hundreds of MB.
    floors: Vec<u64>,
}

/// The summary of a chunk's [`ChunkBits`]: bit `w` of `stale` is set when word
/// `w` of its `stale` may be non-zero; `valid` and `writable` count the bits
/// of its `valid` and `writable` bitmaps.
#[derive(Clone, Copy, Debug, Default)]
struct ChunkHead {
    stale: u8,
    valid: u16,
    /// Writable PTEs, as [`PageTables::pte`] shows them (with the patch).
    writable: u16,
    dirty: u16,
    cont: u16,
    /// A change of many of its PTEs not yet written into them.
    patch: PatchHead,
    /// Whether its memo found every PTE's frame with one reference (while
    /// its `excl_epoch` is the frames' share epoch).
    excl_all: bool,
}

/// A chunk's PTEs by flag, as bitmaps (bit `i` of word `i / 64` for PTE `i`):
/// exact for every PTE but those marked stale, which
/// [`PageTables::pte_mut`] may have changed since they were last counted.
#[derive(Clone, Copy, Debug, Default)]
struct ChunkBits {
    stale: [u64; 8],
    valid: [u64; 8],
    writable: [u64; 8],
    /// Valid PTEs with the dirty bit.
    dirty: [u64; 8],
    /// Valid PTEs with the contiguous bit.
    cont: [u64; 8],
}

/// A root's shortcut to one of its level-2 directories: the directory that
/// covers the 1 GB region `gb` (`va >> 30`), `gb == NO_REGION` for none.
///
/// Why: a walk from the root reads three directories one after another, and
/// with thousands of address spaces each is a cold line of the host's memory;
/// the shortcut is one line per root in a dense table (the simulator's time,
/// never the simulated: a walk costs the same simulated cycles either way).
/// It stays right because a directory entry, once set, changes only when its
/// whole tree is freed ([`PageTables::free_tree`]), which clears the
/// shortcut; a reused directory starts with none.
#[derive(Clone, Copy, Debug)]
struct L2Hint {
    gb: u32,
    dir: u32,
}

const NO_REGION: u32 = u32::MAX;

impl L2Hint {
    const NONE: L2Hint = L2Hint { gb: NO_REGION, dir: 0 };
}

/// The 1 GB region of `va`, as an [`L2Hint`] names it: the bits the walk's
/// first two levels index (`va` bits 30 to 47).
#[inline]
fn region(va: u64) -> u32 {
    ((va >> 30) & 0x3ffff) as u32
}

#[inline]
fn idx(va: u64, level: u32) -> usize {
    ((va >> (39 - 9 * level)) & 511) as usize
}

impl PageTables {
    /// Returns a fresh, empty level-0 table.
    pub fn new_root(&mut self) -> u32 {
        self.alloc_dir()
    }

    fn alloc_dir(&mut self) -> u32 {
        if let Some(d) = self.free_dirs.pop() {
            self.dirs[d as usize] = [EMPTY; 512];
            self.l2_hints[d as usize] = L2Hint::NONE;
            d
        } else {
            self.dirs.push([EMPTY; 512]);
            self.l2_hints.push(L2Hint::NONE);
            (self.dirs.len() - 1) as u32
        }
    }

    fn alloc_chunk(&mut self) -> u32 {
        if let Some(c) = self.free_chunks.pop() {
            for p in &mut self.ptes[c as usize..c as usize + 512] {
                *p = Pte::default();
            }
            // Every PTE is none again: nothing valid, nothing stale.
            let i = (c / 512) as usize;
            debug_assert!(!self.heads[i].patch.on, "a freed chunk kept its patch");
            self.bits[i] = ChunkBits::default();
            self.heads[i] = ChunkHead::default();
            self.floors[i] = 0;
            self.excl_epoch[i] = u64::MAX;
            c
        } else {
            let c = self.ptes.len() as u32;
            self.ptes.resize(self.ptes.len() + 512, Pte::default());
            self.freed.push(0);
            self.bits.push(ChunkBits::default());
            self.heads.push(ChunkHead::default());
            self.floors.push(0);
            self.patch_masks.push([0; 8]);
            self.excl.push(ExclMemo::default());
            self.excl_epoch.push(u64::MAX);
            c
        }
    }

    /// Returns the last-level table that holds PTE `r`, as of now.
    #[inline]
    pub fn table_of(&self, r: PteRef) -> TableRef {
        let chunk = r & !511;
        TableRef { chunk, gen: self.freed[(chunk / 512) as usize] }
    }

    /// Returns whether the table `t` was read from has been freed since.
    #[inline]
    pub fn table_freed(&self, t: TableRef) -> bool {
        self.freed[(t.chunk / 512) as usize] != t.gen
    }

    /// Returns the PTE at `r` (a copy, with any change its table's patch
    /// holds for it: [`PatchHead`]).
    #[inline]
    pub fn pte(&self, r: PteRef) -> Pte {
        let chunk = (r / 512) as usize;
        let p = self.ptes[r as usize];
        if self.heads[chunk].patch.on && self.in_patch(chunk, (r % 512) as usize) {
            return self.heads[chunk].patch.apply(p);
        }
        p
    }

    /// Returns the PTE at `r` for writing.
    #[inline]
    pub fn pte_mut(&mut self, r: PteRef) -> &mut Pte {
        let (chunk, i) = ((r / 512) as usize, (r % 512) as usize);
        if self.heads[chunk].patch.on {
            self.materialize(chunk);
        }
        self.bits[chunk].stale[i / 64] |= 1 << (i % 64);
        self.heads[chunk].stale |= 1 << (i / 64);
        self.excl_epoch[chunk] = u64::MAX;
        &mut self.ptes[r as usize]
    }

    /// Raises PTE `r`'s floor to `seq`, the change of obligation `obl`, unless it
    /// is already as high: the oracle's record that `obl`'s flush has returned.
    /// Every floor is raised here (a copy of a PTE keeps its floor), so that
    /// [`PageTables::max_floor`] bounds them all.
    #[inline]
    pub fn raise_floor(&mut self, r: PteRef, seq: u64, obl: u32) {
        if self.heads[(r / 512) as usize].patch.on {
            self.materialize((r / 512) as usize);
        }
        let p = &mut self.ptes[r as usize];
        if p.floor < seq {
            p.floor = seq;
            p.floor_obl = obl;
            self.max_floor = self.max_floor.max(seq);
            let f = &mut self.floors[(r / 512) as usize];
            *f = (*f).max(seq);
        }
    }

    /// Returns a bound on the floor of every PTE in `r`'s table, as
    /// [`PageTables::max_floor`] is for all of them: an entry filled from PTE
    /// `r` at a version at least this high cannot be stale. (A PTE written
    /// through [`PageTables::pte_mut`] keeps its slot's floor or lowers it;
    /// a reallocated chunk starts again from none.)
    #[inline]
    pub fn floor_bound(&self, r: PteRef) -> u64 {
        self.floors[(r / 512) as usize]
    }

    /// Returns a bound on every PTE's floor (see [`PageTables::raise_floor`]).
    #[inline]
    pub fn max_floor(&self) -> u64 {
        self.max_floor
    }

    /// Records a write through PTE `r`: the dirty bit set (hardware dirty-bit
    /// management) and the page written (ground truth). Neither is in the
    /// chunk's bitmaps, so the PTE is not marked stale.
    #[inline]
    pub fn set_written(&mut self, r: PteRef) {
        let p = &mut self.ptes[r as usize];
        p.flags |= P_DIRTY;
        p.written = true;
        if p.valid() {
            let (chunk, i) = ((r / 512) as usize, (r % 512) as usize);
            let word = &mut self.bits[chunk].dirty[i / 64];
            if *word & (1 << (i % 64)) == 0 {
                *word |= 1 << (i % 64);
                self.heads[chunk].dirty += 1;
            }
        }
    }

    /// Returns every PTE's floor obligation (`Pte::floor_obl`), free tables'
    /// included: what the oracle's collection keeps (see `Oracle::collect`).
    pub fn floor_obligations(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.ptes.len() as PteRef).map(|r| self.pte(r).floor_obl)
    }

    /// Brings chunk `chunk`'s bitmaps up to date: the PTEs a
    /// [`PageTables::pte_mut`] handed out since the last count, read again.
    fn recount(&mut self, chunk: usize) {
        let h = &mut self.heads[chunk];
        if h.stale == 0 {
            return;
        }
        debug_assert!(!h.patch.on, "a patched chunk has PTEs changed since its patch");
        let ptes = &self.ptes[chunk * 512..chunk * 512 + 512];
        let b = &mut self.bits[chunk];
        let mut words = std::mem::take(&mut h.stale);
        while words != 0 {
            let w = words.trailing_zeros() as usize;
            words &= words - 1;
            let mut stale = std::mem::take(&mut b.stale[w]);
            while stale != 0 {
                let bit = stale.trailing_zeros();
                stale &= stale - 1;
                let p = &ptes[w * 64 + bit as usize];
                let v = p.valid();
                let set = |word: &mut u64, on: bool| *word = (*word & !(1 << bit)) | ((on as u64) << bit);
                set(&mut b.valid[w], v);
                set(&mut b.writable[w], v && p.writable());
                set(&mut b.dirty[w], v && p.flags & P_DIRTY != 0);
                set(&mut b.cont[w], v && p.flags & P_CONT != 0);
            }
        }
        let count = |m: &[u64; 8]| m.iter().map(|w| w.count_ones() as u16).sum();
        (h.valid, h.writable, h.dirty, h.cont) = (count(&b.valid), count(&b.writable), count(&b.dirty), count(&b.cont));
    }

    /// Walks `root` for `va`; `None` when a table on the way is missing. The
    /// returned PTE may still be invalid.
    #[inline]
    pub fn walk(&self, root: u32, va: u64) -> Option<Walked> {
        let (mut d, first) = self.start_of_walk(root, va);
        for level in first..3 {
            let e = self.dirs[d as usize][idx(va, level)];
            if e == EMPTY {
                return None;
            }
            if e & BLOCK != 0 {
                debug_assert_eq!(level, 2);
                return Some(Walked { pte: (e & !BLOCK) - 1, huge: true, levels: 3 });
            }
            if level == 2 {
                return Some(Walked { pte: e - 1 + idx(va, 3) as u32, huge: false, levels: 4 });
            }
            d = e - 1;
        }
        unreachable!()
    }

    /// Returns where a walk of `root` for `va` may begin: the level-2
    /// directory and level 2 when the root's [`L2Hint`] covers `va`, the root
    /// and level 0 otherwise.
    #[inline]
    fn start_of_walk(&self, root: u32, va: u64) -> (u32, u32) {
        let h = self.l2_hints[root as usize];
        let start = if h.gb == region(va) { (h.dir, 2) } else { (root, 0) };
        #[cfg(debug_assertions)]
        if start.1 == 2 {
            let top = self.dirs[root as usize][idx(va, 0)];
            let l1 = self.dirs[(top - 1) as usize][idx(va, 1)];
            debug_assert_eq!(l1 - 1, h.dir, "a root's level-2 shortcut names another directory");
        }
        start
    }

    /// Returns the level-2 directory covering `va`, allocating missing levels,
    /// and makes it the root's shortcut ([`L2Hint`]).
    fn ensure_l2_dir(&mut self, root: u32, va: u64) -> u32 {
        let h = self.l2_hints[root as usize];
        if h.gb == region(va) {
            return h.dir;
        }
        let mut d = root;
        for level in 0..2 {
            let i = idx(va, level);
            let e = self.dirs[d as usize][i];
            d = if e == EMPTY {
                let n = self.alloc_dir();
                self.dirs[d as usize][i] = n + 1;
                n
            } else {
                e - 1
            };
        }
        self.l2_hints[root as usize] = L2Hint { gb: region(va), dir: d };
        d
    }

    /// Returns the leaf PTE slot for `va`, allocating missing tables.
    pub fn ensure_leaf(&mut self, root: u32, va: u64) -> PteRef {
        let d = self.ensure_l2_dir(root, va);
        let i = idx(va, 2);
        let e = self.dirs[d as usize][i];
        debug_assert!(e & BLOCK == 0, "4 KB mapping inside a 2 MB block");
        let chunk = if e == EMPTY {
            let c = self.alloc_chunk();
            self.dirs[d as usize][i] = c + 1;
            c
        } else {
            e - 1
        };
        chunk + idx(va, 3) as u32
    }

    /// Returns the block descriptor slot for the 2 MB block containing `va`.
    pub fn ensure_block(&mut self, root: u32, va: u64) -> PteRef {
        let d = self.ensure_l2_dir(root, va);
        let i = idx(va, 2);
        let e = self.dirs[d as usize][i];
        if e != EMPTY {
            debug_assert!(e & BLOCK != 0, "2 MB block over a 4 KB table");
            return (e & !BLOCK) - 1;
        }
        let c = self.alloc_chunk();
        self.dirs[d as usize][i] = (c + 1) | BLOCK;
        c
    }

    /// Calls `f(va, pte)` for every existing leaf slot of `pages` pages from `start`
    /// (4 KB granularity; blocks are reported once, at their first page in range),
    /// in ascending order. Missing tables are skipped whole at every level.
    pub fn for_each_slot(&self, root: u32, start: u64, pages: u64, mut f: impl FnMut(u64, PteRef)) {
        self.for_each_leaf(root, start, pages, |leaf| match leaf {
            Leaf::Block { va, pte } => f(va, pte),
            Leaf::Table { mut va, chunk, stop } => {
                while va < stop {
                    f(va, chunk + idx(va, 3) as u32);
                    va += 4096;
                }
            }
        });
    }

    /// Calls `f(va, first, n, block)` for each run of slots of `pages` pages
    /// from `start`, in ascending order: `n` consecutive PTEs of one last-level
    /// table from `first`, the first for `va`, or a 2 MB block's descriptor
    /// (`block`, `n` 1). The slots are those [`PageTables::for_each_slot`]
    /// visits, a table at a time.
    pub fn for_each_run(&self, root: u32, start: u64, pages: u64, mut f: impl FnMut(u64, PteRef, u64, bool)) {
        self.for_each_leaf(root, start, pages, |leaf| match leaf {
            Leaf::Block { va, pte } => f(va, pte, 1, true),
            Leaf::Table { va, chunk, stop } => f(va, chunk + idx(va, 3) as u32, (stop - va) / 4096, false),
        });
    }

    /// Calls `f(va, pages)` for each piece of `pages` pages from `start` that one
    /// existing last-level table covers, in ascending order: the ranges a
    /// `zap_pmd_range` hands to `zap_pte_range` (missing tables and 2 MB blocks
    /// are skipped).
    pub fn for_each_leaf_table(&self, root: u32, start: u64, pages: u64, mut f: impl FnMut(u64, u64)) {
        self.for_each_leaf(root, start, pages, |leaf| {
            if let Leaf::Table { va, stop, .. } = leaf {
                f(va, (stop - va) / 4096);
            }
        });
    }

    /// Walks the tables under `root` over `pages` pages from `start`, in ascending
    /// order, calling `f` for each 2 MB block and each part of a last-level table
    /// in range; missing tables are skipped whole at every level.
    fn for_each_leaf(&self, root: u32, start: u64, pages: u64, mut f: impl FnMut(Leaf)) {
        let end = start + pages * 4096;
        // The first address of the next region of `1 << shift` bytes, capped at `end`.
        let next = |va: u64, shift: u32| ((((va >> shift) as u128 + 1) << shift).min(end as u128)) as u64;
        let mut va = start;
        while va < end {
            let (mut d, first) = self.start_of_walk(root, va);
            for level in first..3 {
                let e = self.dirs[d as usize][idx(va, level)];
                if e == EMPTY {
                    va = next(va, 39 - 9 * level);
                    break;
                }
                if e & BLOCK != 0 {
                    f(Leaf::Block { va, pte: (e & !BLOCK) - 1 });
                    va = next(va, SHIFT_2M);
                    break;
                }
                if level == 2 {
                    let stop = next(va, SHIFT_2M);
                    f(Leaf::Table { va, chunk: e - 1, stop });
                    va = stop;
                    break;
                }
                d = e - 1;
            }
        }
    }

    /// Frees every table of the tree under `root`, the root included.
    pub fn free_tree(&mut self, root: u32) {
        self.l2_hints[root as usize] = L2Hint::NONE;
        self.free_dir(root, 0);
    }

    fn free_dir(&mut self, d: u32, level: u32) {
        for i in 0..512 {
            let e = self.dirs[d as usize][i];
            if e == EMPTY {
                continue;
            }
            if level == 2 {
                let c = (e & !BLOCK) - 1;
                // Its PTEs' floors outlive it (`floor_obligations`).
                if self.heads[(c / 512) as usize].patch.on {
                    self.materialize((c / 512) as usize);
                }
                self.freed[(c / 512) as usize] += 1;
                self.free_chunks.push(c);
            } else {
                self.free_dir(e - 1, level + 1);
            }
        }
        self.free_dirs.push(d);
    }
}

#[cfg(test)]
mod tests {
    use super::patch::RunMasks;
    use super::*;

    #[test]
    fn a_tables_floor_bound_covers_its_ptes_and_no_other_table() {
        let mut pt = PageTables::default();
        let root = pt.new_root();
        let a = pt.ensure_leaf(root, 0x40_0000);
        let b = pt.ensure_leaf(root, 0x80_0000);
        assert_eq!((pt.floor_bound(a), pt.floor_bound(b)), (0, 0));
        pt.raise_floor(a + 7, 9, 1);
        pt.raise_floor(a + 300, 5, 2);
        // Every PTE of `a`'s table is bounded by its highest floor; `b`'s
        // table had none raised.
        assert_eq!((pt.floor_bound(a), pt.floor_bound(a + 511), pt.floor_bound(b)), (9, 9, 0));
        assert_eq!(pt.max_floor(), 9);
        // A table freed and allocated again starts from no floor, as its PTEs do.
        pt.free_tree(root);
        let root = pt.new_root();
        let c = pt.ensure_leaf(root, 0x40_0000);
        let d = pt.ensure_leaf(root, 0x80_0000);
        let mut again = [c & !511, d & !511];
        again.sort();
        assert_eq!(again, [a & !511, b & !511], "both chunks are used again");
        assert_eq!((pt.pte(c).floor, pt.pte(d).floor), (0, 0));
        assert_eq!((pt.floor_bound(c), pt.floor_bound(d)), (0, 0));
    }

    #[test]
    fn walk_finds_what_ensure_leaf_made() {
        let mut pt = PageTables::default();
        let root = pt.new_root();
        assert!(pt.walk(root, 0x7f00_1234_5000).is_none());
        let r = pt.ensure_leaf(root, 0x7f00_1234_5000);
        pt.pte_mut(r).flags = P_VALID;
        let w = pt.walk(root, 0x7f00_1234_5000).unwrap();
        assert_eq!(w.pte, r);
        assert_eq!(w.levels, 4);
        assert!(!pt.pte(pt.walk(root, 0x7f00_1234_6000).unwrap().pte).valid());
    }

    #[test]
    fn run_masks_agree_with_the_ptes_after_every_change() {
        let mut pt = PageTables::default();
        let root = pt.new_root();
        let base = pt.ensure_leaf(root, 0);
        // The run's PTEs by flag, read one by one.
        let direct = |pt: &PageTables, first: PteRef, n: u64| {
            let mut m = RunMasks::default();
            for r in first..first + n as PteRef {
                let (p, w, bit) = (pt.pte(r), ((r - base) / 64) as usize, 1u64 << ((r - base) % 64));
                let set = |word: &mut [u64; 8], on: bool| word[w] |= if on { bit } else { 0 };
                set(&mut m.valid, p.valid());
                set(&mut m.writable, p.valid() && p.writable());
                set(&mut m.dirty, p.valid() && p.flags & P_DIRTY != 0);
                set(&mut m.cont, p.valid() && p.flags & P_CONT != 0);
            }
            m
        };
        let ranges = [(0, 512), (0, 1), (5, 70), (63, 2), (64, 64), (100, 412), (511, 1)];
        let kinds = [P_VALID, P_VALID | P_WRITE, P_WRITE, 0, P_VALID | P_DIRTY, P_VALID | P_CONT | P_WRITE];
        for step in 0..200u32 {
            // A pseudo-random PTE gets pseudo-random flags (some writable, not valid).
            let r = base + (step.wrapping_mul(2_654_435_761) >> 7) % 512;
            pt.pte_mut(r).flags = kinds[(step % 6) as usize];
            if step % 5 == 0 {
                pt.set_written(r);
            }
            // The whole table first on even steps, last on odd ones (a part
            // read while the change is still stale).
            let order: Vec<_> = if step % 2 == 0 { ranges.to_vec() } else { ranges.iter().rev().copied().collect() };
            for &(lo, n) in &order {
                assert_eq!(pt.run_masks(base + lo, n), direct(&pt, base + lo, n), "step {step}, [{lo}, +{n})");
            }
        }
        // A freed chunk handed out again starts empty.
        pt.free_tree(root);
        let again = pt.new_root();
        let base = pt.ensure_leaf(again, 0);
        assert_eq!(pt.run_masks(base, 512), RunMasks::default());
    }

    #[test]
    fn a_table_read_before_its_tree_was_freed_is_freed() {
        let mut pt = PageTables::default();
        let root = pt.new_root();
        let leaf = pt.ensure_leaf(root, 0x1000);
        let t = pt.table_of(leaf);
        assert!(!pt.table_freed(t));
        pt.free_tree(root);
        assert!(pt.table_freed(t));
        // Reused for another address space, it is still not the table that was read.
        let again = pt.new_root();
        let leaf = pt.ensure_leaf(again, 0x1000);
        let t2 = pt.table_of(leaf);
        assert_eq!(t2.chunk, t.chunk);
        assert!(pt.table_freed(t) && !pt.table_freed(t2));
    }

    #[test]
    fn freed_tables_are_reused_clean() {
        let mut pt = PageTables::default();
        let a = pt.new_root();
        let r = pt.ensure_leaf(a, 0x1000);
        pt.pte_mut(r).flags = P_VALID;
        pt.free_tree(a);
        let b = pt.new_root();
        assert_eq!(a, b);
        let r2 = pt.ensure_leaf(b, 0x1000);
        assert_eq!(r, r2);
        assert!(!pt.pte(r2).valid());
    }

    #[test]
    fn for_each_slot_visits_what_a_page_by_page_walk_finds() {
        let mut pt = PageTables::default();
        let root = pt.new_root();
        for va in [0x1000, 0x1f_f000, 0x40_0000, 0x4000_0000, 0x80_0000_0000, 0x80_0020_0000] {
            pt.ensure_leaf(root, va);
        }
        pt.ensure_block(root, 0x60_0000);
        let (start, pages) = (0x1000, (0x80_0040_0000 - 0x1000) / 4096);
        let mut seen = Vec::new();
        pt.for_each_slot(root, start, pages, |va, r| seen.push((va, r)));
        let mut want = Vec::new();
        let mut va = start;
        while va < start + pages * 4096 {
            match pt.walk(root, va) {
                Some(w) if w.huge => {
                    want.push((va, w.pte));
                    va = ((va >> SHIFT_2M) + 1) << SHIFT_2M;
                }
                Some(w) => {
                    want.push((va, w.pte));
                    va += 4096;
                }
                None => va += 4096,
            }
        }
        assert_eq!(seen, want);
        // Five leaf tables (the first from its second slot) and one block.
        assert_eq!(seen.len(), 511 + 4 * 512 + 1);
    }

    #[test]
    fn leaf_tables_cover_what_for_each_slot_visits() {
        let mut pt = PageTables::default();
        let root = pt.new_root();
        for va in [0x1000, 0x40_0000, 0x4000_0000] {
            pt.ensure_leaf(root, va);
        }
        pt.ensure_block(root, 0x60_0000);
        let mut pieces = Vec::new();
        pt.for_each_leaf_table(root, 0x3000, (0x4010_0000 - 0x3000) / 4096, |va, n| pieces.push((va, n)));
        assert_eq!(pieces, vec![(0x3000, 509), (0x40_0000, 512), (0x4000_0000, 256)]);
    }

    #[test]
    fn block_covers_two_megabytes() {
        let mut pt = PageTables::default();
        let root = pt.new_root();
        let b = pt.ensure_block(root, 0xffff_0000_0020_0000);
        let w = pt.walk(root, 0xffff_0000_003f_f000).unwrap();
        assert!(w.huge);
        assert_eq!(w.pte, b);
        assert_eq!(w.levels, 3);
    }
}
