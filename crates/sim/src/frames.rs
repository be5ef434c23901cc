//! The physical frame allocator: a LIFO free list, so a freed frame is the next
//! one handed out — exactly the reuse that turns a late invalidation into a
//! visible corruption. Frames have reference counts (copy-on-write sharing) and
//! remember the obligation under which their last mapping was removed, so that
//! the oracle can tell when a frame is reused while still mapped by a TLB that
//! has not been flushed yet.

/// Physical memory.
#[derive(Default)]
pub struct Frames {
    free: Vec<u64>,
    next: u64,
    refs: Vec<u32>,
    /// Per frame: the obligation that must be discharged before reuse (0 = none).
    pending: Vec<u32>,
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
        let obl = std::mem::take(&mut self.pending[pfn as usize]);
        (pfn, obl)
    }

    /// Returns `n` physically contiguous new frames (for 2 MB blocks), first one first.
    pub fn alloc_contig(&mut self, n: u64) -> u64 {
        let first = self.next;
        self.next += n;
        self.refs.resize(self.next as usize, 1);
        self.pending.resize(self.next as usize, 0);
        first
    }

    /// Adds a reference (a copy-on-write share).
    pub fn get(&mut self, pfn: u64) {
        self.refs[pfn as usize] += 1;
    }

    /// Returns the reference count.
    pub fn refs(&self, pfn: u64) -> u32 {
        self.refs[pfn as usize]
    }

    /// Drops a reference; the frame goes back to the free list at zero. `obl` is the
    /// obligation under which the mapping was removed (0 when already discharged).
    pub fn put(&mut self, pfn: u64, obl: u32) {
        let r = &mut self.refs[pfn as usize];
        debug_assert!(*r > 0, "frame {pfn} freed twice");
        *r -= 1;
        if *r == 0 {
            self.pending[pfn as usize] = obl;
            self.free.push(pfn);
        }
    }

    /// Returns how many frames were ever handed out.
    pub fn high_water(&self) -> u64 {
        self.next
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
