//! The physical frame allocator: a LIFO free list, so a freed frame is the next
//! one handed out — exactly the reuse that turns a late invalidation into a
//! visible corruption. Frames have reference counts (copy-on-write sharing) and
//! remember the obligation under which their last mapping was removed, so that
//! the oracle can tell when a frame is reused while still mapped by a TLB that
//! has not been flushed yet.
//!
//! With `contpte` on, the kernel also allocates *folios*: [`FOLIO_PAGES`]
//! physically contiguous frames aligned on their size (64 KB), the unit Linux's
//! large anonymous folios and the page cache's large folios come in. A folio's
//! frames keep their own reference counts (a page of it can be shared or
//! unmapped alone), and the folio goes back to a free list of its own, LIFO, once
//! all of them are free: it is allocated and freed whole, as Linux frees a folio
//! when its last reference goes. Single frames never come from a folio.

/// Frames in a folio (64 KB of 4 KB pages).
pub const FOLIO_PAGES: u64 = 16;

/// The shared zero page (`ZERO_PAGE(0)`, `my_zero_pfn`): the frame a read
/// fault on untouched private anonymous memory maps read-only
/// (`do_anonymous_page`). It is never handed out nor freed, and counts as
/// shared by many (its references are not counted: [`Frames::refs`] says
/// `u32::MAX`), so that a write to it copies (`wp_page_copy`), reclaim and
/// migration pass it by, and no frame of [`Frames::alloc`] is ever it.
pub const ZERO_PFN: u64 = 1 << 36;

/// What a frame belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FrameKind {
    /// A single frame (or a kernel block's).
    #[default]
    Single,
    /// A page of an anonymous folio.
    AnonFolio,
    /// A page of a page-cache folio (a file's).
    FileFolio,
}

/// What dropping a reference freed ([`Frames::put`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Freed {
    /// Nothing: other references remain (or other pages of its folio live).
    Nothing,
    /// A single frame.
    Page,
    /// A whole folio (its last page's reference).
    Folio,
}

/// Physical memory.
#[derive(Default)]
pub struct Frames {
    free: Vec<u64>,
    next: u64,
    refs: Vec<u32>,
    /// Per frame: the obligation that must be discharged before reuse (0 = none).
    pending: Vec<u32>,
    /// Per frame: what it belongs to (empty until the first folio).
    kind: Vec<FrameKind>,
    /// Per folio (by first frame / [`FOLIO_PAGES`]): its frames still referenced.
    folio_live: Vec<u8>,
    /// Free folios, by first frame, LIFO.
    free_folios: Vec<u64>,
    /// Per frame: the NUMA node it is on (the node of the CPU that allocated
    /// it, or a migration's target; missing means node 0, and the vector
    /// grows only when a frame is placed on another node).
    node: Vec<u8>,
    /// Bumped whenever a frame's count crosses between one reference and more
    /// (a share begins or ends): what [`Frames::refs`]` == 1` said of any
    /// mapped frame still holds while it is unchanged ([`Frames::share_epoch`]).
    share_epoch: u64,
}

impl Frames {
    /// Returns a frame with one reference, and the undischarged obligation it was
    /// last unmapped under, if the caller should check one.
    pub fn alloc(&mut self) -> (u64, u32) {
        let pfn = match self.free.pop() {
            Some(p) => p,
            None => {
                let p = self.next;
                self.next += 1;
                self.refs.push(0);
                self.pending.push(0);
                p
            }
        };
        self.refs[pfn as usize] = 1;
        if let Some(n) = self.node.get_mut(pfn as usize) {
            *n = 0;
        }
        let obl = std::mem::take(&mut self.pending[pfn as usize]);
        (pfn, obl)
    }

    /// Returns how many frames have a reference now (a pass over them all).
    #[cfg(test)]
    pub fn in_use(&self) -> usize {
        self.refs.iter().filter(|&&r| r > 0).count()
    }

    /// Returns the NUMA node frame `pfn` is on.
    pub fn node(&self, pfn: u64) -> u8 {
        self.node.get(pfn as usize).copied().unwrap_or(0)
    }

    /// Places frame `pfn` on NUMA node `node` (its allocating CPU's node, or a
    /// migration's target; a frame allocated again is on node 0 until placed).
    pub fn set_node(&mut self, pfn: u64, node: u8) {
        if self.node.len() <= pfn as usize {
            if node == 0 {
                return;
            }
            self.node.resize(pfn as usize + 1, 0);
        }
        self.node[pfn as usize] = node;
    }

    /// Returns `n` physically contiguous new frames (for 2 MB blocks), first one first.
    pub fn alloc_contig(&mut self, n: u64) -> u64 {
        let first = self.next;
        self.next += n;
        self.refs.resize(self.next as usize, 1);
        self.pending.resize(self.next as usize, 0);
        first
    }

    /// Returns a folio of [`FOLIO_PAGES`] frames aligned on its size, each with one
    /// reference, of `kind` ([`FrameKind::AnonFolio`] or [`FrameKind::FileFolio`]),
    /// and the undischarged obligations its frames were last unmapped under (0
    /// where none): the most recently freed folio first, else new frames (the
    /// frames skipped to align it go to the single-frame free list).
    pub fn alloc_folio(&mut self, kind: FrameKind) -> (u64, [u32; FOLIO_PAGES as usize]) {
        debug_assert!(kind != FrameKind::Single);
        let first = match self.free_folios.pop() {
            Some(f) => f,
            None => {
                let first = self.next.next_multiple_of(FOLIO_PAGES);
                for pfn in self.next..first {
                    self.refs.push(0);
                    self.pending.push(0);
                    self.free.push(pfn);
                }
                self.next = first + FOLIO_PAGES;
                self.refs.resize(self.next as usize, 0);
                self.pending.resize(self.next as usize, 0);
                first
            }
        };
        self.kind.resize(self.next as usize, FrameKind::Single);
        self.folio_live.resize((self.next / FOLIO_PAGES) as usize, 0);
        let mut obls = [0; FOLIO_PAGES as usize];
        for (i, obl) in obls.iter_mut().enumerate() {
            let pfn = (first + i as u64) as usize;
            self.refs[pfn] = 1;
            self.kind[pfn] = kind;
            *obl = std::mem::take(&mut self.pending[pfn]);
        }
        self.folio_live[(first / FOLIO_PAGES) as usize] = FOLIO_PAGES as u8;
        (first, obls)
    }

    /// Returns what frame `pfn` belongs to.
    #[inline]
    pub fn kind(&self, pfn: u64) -> FrameKind {
        self.kind.get(pfn as usize).copied().unwrap_or_default()
    }

    /// Returns the first frame of the folio holding `pfn`, if it belongs to one.
    pub fn folio_of(&self, pfn: u64) -> Option<u64> {
        (self.kind(pfn) != FrameKind::Single).then_some(pfn - pfn % FOLIO_PAGES)
    }

    /// Forgets every freed frame's obligation that `discharged` says is
    /// discharged: a reuse check passes it as it passes none (what lets the
    /// oracle collect it, see `Oracle::collect`).
    pub fn forget_discharged(&mut self, discharged: impl Fn(u32) -> bool) {
        for o in &mut self.pending {
            if *o != 0 && discharged(*o) {
                *o = 0;
            }
        }
    }

    /// Adds a reference (a copy-on-write share).
    pub fn get(&mut self, pfn: u64) {
        if pfn != ZERO_PFN {
            let r = &mut self.refs[pfn as usize];
            if *r == 1 {
                self.share_epoch += 1;
            }
            *r += 1;
        }
    }

    /// Returns a count that changes whenever any frame goes from one reference
    /// to more, or back: a mapped frame whose [`Frames::refs`] was 1 when this
    /// was `e` still has one reference while it is `e` (a frame comes to a
    /// mapping from [`Frames::alloc`] with one, and leaves it by
    /// [`Frames::put`], which no mapped frame with one reference sees).
    pub fn share_epoch(&self) -> u64 {
        self.share_epoch
    }

    /// Returns the reference count ([`ZERO_PFN`]'s: `u32::MAX`).
    pub fn refs(&self, pfn: u64) -> u32 {
        if pfn == ZERO_PFN {
            return u32::MAX;
        }
        self.refs[pfn as usize]
    }

    /// Drops a reference; the frame goes back to the free list at zero. `obl` is the
    /// obligation under which the mapping was removed (0 when already discharged).
    /// Returns what that freed.
    pub fn put(&mut self, pfn: u64, obl: u32) -> Freed {
        if pfn == ZERO_PFN {
            return Freed::Nothing;
        }
        let r = &mut self.refs[pfn as usize];
        debug_assert!(*r > 0, "frame {pfn} freed twice");
        if *r == 2 {
            self.share_epoch += 1;
        }
        *r -= 1;
        if *r == 0 {
            self.pending[pfn as usize] = obl;
            if self.kind(pfn) == FrameKind::Single {
                self.free.push(pfn);
                return Freed::Page;
            }
            let live = &mut self.folio_live[(pfn / FOLIO_PAGES) as usize];
            *live -= 1;
            if *live == 0 {
                self.free_folios.push(pfn - pfn % FOLIO_PAGES);
                return Freed::Folio;
            }
        }
        Freed::Nothing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_frame_is_reused_first_and_reports_its_obligation() {
        let mut f = Frames::default();
        let (a, _) = f.alloc();
        let (b, _) = f.alloc();
        f.put(a, 7);
        let (c, obl) = f.alloc();
        assert_eq!(c, a);
        assert_eq!(obl, 7);
        assert_ne!(b, c);
    }

    #[test]
    fn a_folio_is_aligned_and_reused_whole_once_every_frame_is_free() {
        let mut f = Frames::default();
        let (single, _) = f.alloc();
        let (a, _) = f.alloc_folio(FrameKind::AnonFolio);
        assert_eq!(a % FOLIO_PAGES, 0);
        assert_eq!((f.kind(a + 3), f.folio_of(a + 15), f.folio_of(single)), (FrameKind::AnonFolio, Some(a), None));
        // The frames skipped to align the folio are handed out singly.
        let (s2, _) = f.alloc();
        assert!(s2 > single && s2 < a);
        for i in 0..15 {
            f.put(a + i, 9);
        }
        let (b, _) = f.alloc_folio(FrameKind::FileFolio);
        assert_ne!(b, a, "one frame of the first folio is still referenced");
        f.put(a + 15, 9);
        let (c, obls) = f.alloc_folio(FrameKind::AnonFolio);
        assert_eq!((c, obls), (a, [9; 16]));
        let s3 = f.alloc().0;
        assert!(s3 < a && s3 != s2 && s3 != single, "single frames never come from a folio");
    }

    #[test]
    fn shared_frame_survives_one_put() {
        let mut f = Frames::default();
        let (a, _) = f.alloc();
        f.get(a);
        f.put(a, 0);
        assert_eq!(f.refs(a), 1);
        let (b, _) = f.alloc();
        assert_ne!(a, b);
    }
}
