//! The visited set of an exhaustive search: every state hash seen, with the
//! transitions its visits left asleep (sleep sets with state caching).

/// A set of state hashes, each with the labels every visit so far left
/// asleep: an open-addressing table of `(hash, mask)` pairs probed linearly,
/// so that a visit of a state not seen before (the common case, and a cache
/// miss in a table of millions) touches one cache line. Its keys are state
/// hashes already (XXH3-64), so their low bits index it as they are.
#[derive(Default)]
pub(super) struct Visited {
    /// `(hash, mask)`, a hash of 0 marking an empty slot; the length is a
    /// power of two (or 0 before the first visit).
    slots: Slots,
    /// The mask of the state whose hash is 0, if it was visited.
    zero: Option<u64>,
    len: usize,
    /// While a party of a distributed search runs ([`Visited::track`]): the
    /// states its visits inserted or narrowed, so that only those travel at
    /// the end of a round (the other parties have the rest).
    changed: Option<Vec<u64>>,
}

impl Visited {
    /// Returns how many states it holds.
    pub(super) fn len(&self) -> usize {
        self.len + self.zero.is_some() as usize
    }

    /// Returns the bytes its table takes.
    pub(super) fn bytes(&self) -> u64 {
        (self.slots.len() * std::mem::size_of::<(u64, u64)>()) as u64
    }

    /// Returns the bytes its table would take after the next insertion.
    pub(super) fn bytes_after_insert(&self) -> u64 {
        let slots = if self.full() { self.grown_len() } else { self.slots.len() };
        (slots * std::mem::size_of::<(u64, u64)>()) as u64
    }

    /// Returns whether the next insertion grows the table: it stays at most
    /// three quarters full, so that probes stay short.
    fn full(&self) -> bool {
        4 * (self.len + 1) > 3 * self.slots.len()
    }

    /// Returns the slots the table has once grown: double, 16 at first.
    fn grown_len(&self) -> usize {
        (2 * self.slots.len()).max(16)
    }

    /// Records, from now on, the states each visit inserts or narrows.
    pub(super) fn track(&mut self) {
        self.changed = Some(Vec::new());
    }

    /// Returns the states recorded since [`Visited::track`] or the last call,
    /// each with its mask now, and starts recording afresh.
    pub(super) fn take_changes(&mut self) -> Visited {
        let mut keys = self.changed.replace(Vec::new()).unwrap_or_default();
        keys.sort_unstable();
        keys.dedup();
        let mut out = Visited::default();
        for k in keys {
            let m = if k == 0 { self.zero.expect("a recorded state is held") } else { self.slots[self.slot(k)].1 };
            out.entry(k, m);
        }
        out
    }

    /// Adds every state of `other`; a state both hold keeps the transitions
    /// both left unexplored (the intersection of its masks).
    pub(super) fn merge(&mut self, other: &Visited) {
        let zero = other.zero.iter().map(|&m| (0, m));
        for (k, m) in other.slots.iter().copied().filter(|&(k, _)| k != 0).chain(zero) {
            let (mask, first) = self.entry(k, m);
            if !first {
                *mask &= m;
            }
        }
    }

    /// Writes every entry into a saved search.
    pub(super) fn save(&self, w: &mut super::saved::Writer) {
        w.u64(self.len as u64);
        match self.zero {
            Some(m) => {
                w.u8(1);
                w.u64(m);
            }
            None => w.u8(0),
        }
        for &(k, v) in self.slots.iter().filter(|&&(k, _)| k != 0) {
            w.u64(k);
            w.u64(v);
        }
    }

    /// Reads what [`Visited::save`] wrote.
    pub(super) fn load(r: &mut super::saved::Reader<'_>) -> Result<Visited, String> {
        let n = r.len(16)?;
        let zero = if r.u8()? != 0 { Some(r.u64()?) } else { None };
        let mut v = Visited { zero, ..Visited::default() };
        for _ in 0..n {
            let (k, m) = (r.u64()?, r.u64()?);
            if k == 0 {
                return Err("a visited state of hash 0 among the others".into());
            }
            let (mask, first) = v.entry(k, m);
            if !first {
                return Err("a visited state saved twice".into());
            }
            *mask = m;
        }
        Ok(v)
    }

    /// Returns the mask of `state`, inserting `asleep` first if it has none
    /// (then with `true`).
    fn entry(&mut self, state: u64, asleep: u64) -> (&mut u64, bool) {
        if state == 0 {
            let fresh = self.zero.is_none();
            return (self.zero.get_or_insert(asleep), fresh);
        }
        if self.full() {
            self.grow();
        }
        let i = self.slot(state);
        let first = self.slots[i].0 == 0;
        if first {
            self.slots[i] = (state, asleep);
            self.len += 1;
        }
        (&mut self.slots[i].1, first)
    }

    /// Returns the slot that holds `state` (not 0), or the empty one where it
    /// goes: linear probing from the slot its low bits name.
    fn slot(&self, state: u64) -> usize {
        let mask = self.slots.len() - 1;
        let mut i = state as usize & mask;
        while self.slots[i].0 != state && self.slots[i].0 != 0 {
            i = (i + 1) & mask;
        }
        i
    }

    /// Doubles the table (16 slots at first) and puts every entry back.
    fn grow(&mut self) {
        let n = self.grown_len();
        let old = std::mem::replace(&mut self.slots, Slots::new(n));
        for &(k, v) in old.iter().filter(|&&(k, _)| k != 0) {
            let i = self.slot(k);
            self.slots[i] = (k, v);
        }
    }
}

/// The visited table's slots, zeroed. Tables of 2 MiB and more are mapped
/// on their own and asked for transparent huge pages: a visit of a new state
/// reads a random slot of a table that reaches a gigabyte, and with 4 KiB
/// pages nearly every such read also missed the TLB (the page walk cost
/// about as much as the slot's own cache miss).
struct Slots {
    ptr: std::ptr::NonNull<(u64, u64)>,
    len: usize,
    /// Whether `ptr` is a mapping of its own (else a boxed slice's).
    mapped: bool,
}

// SAFETY: `Slots` owns its memory, as a `Vec` would.
unsafe impl Send for Slots {}

/// Tables this big or bigger are mapped with huge pages asked for.
const HUGE: usize = 2 << 20;

impl Default for Slots {
    fn default() -> Self {
        Slots { ptr: std::ptr::NonNull::dangling(), len: 0, mapped: false }
    }
}

impl Slots {
    /// Returns `len` zeroed slots.
    fn new(len: usize) -> Self {
        let bytes = len * std::mem::size_of::<(u64, u64)>();
        if bytes >= HUGE {
            // SAFETY: a fresh private anonymous mapping (zeroed by the kernel);
            // the advice only asks for huge pages, and failing it is harmless.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    bytes,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                // SAFETY: as above.
                unsafe { libc::madvise(p, bytes, libc::MADV_HUGEPAGE) };
                let ptr = std::ptr::NonNull::new(p as *mut (u64, u64)).expect("mmap returns no null mapping");
                return Slots { ptr, len, mapped: true };
            }
        }
        let boxed: Box<[(u64, u64)]> = vec![(0, 0); len].into_boxed_slice();
        // SAFETY: a box's pointer is never null.
        let ptr = unsafe { std::ptr::NonNull::new_unchecked(Box::into_raw(boxed) as *mut (u64, u64)) };
        Slots { ptr, len, mapped: false }
    }

    fn len(&self) -> usize {
        self.len
    }
}

impl std::ops::Deref for Slots {
    type Target = [(u64, u64)];
    fn deref(&self) -> &[(u64, u64)] {
        // SAFETY: `len` initialised slots, owned.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for Slots {
    fn deref_mut(&mut self) -> &mut [(u64, u64)] {
        // SAFETY: as for `deref`, and borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        if self.mapped {
            // SAFETY: our own mapping of this size.
            unsafe {
                libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len * std::mem::size_of::<(u64, u64)>())
            };
        } else if self.len > 0 {
            // SAFETY: the boxed slice `new` made, of `len` slots.
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.len)) });
        }
    }
}

/// Records a visit of `state` with the transitions in `asleep` (a mask of
/// labels) asleep, and returns the labels this visit leaves alone, or `None`
/// when it has nothing left to explore. The first visit explores every
/// transition not asleep; a later one only those every earlier visit left
/// asleep and this one does not (Godefroid's sleep sets with state caching:
/// the state keeps the intersection of its visits' sleep sets).
pub(super) fn visit(map: &mut Visited, state: u64, asleep: u64) -> Option<u64> {
    let (mask, first) = map.entry(state, asleep);
    let left = if first {
        Some(asleep)
    } else {
        let before = *mask;
        let fresh = before & !asleep;
        if fresh == 0 {
            return None;
        }
        *mask = before & asleep;
        Some(!fresh)
    };
    if let Some(log) = &mut map.changed {
        log.push(state);
    }
    left
}
