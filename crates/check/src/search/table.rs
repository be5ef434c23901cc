//! The visited set the workers of a parallel exhaustive search share: a
//! lock-free open-addressing table of one 8-byte word per state.
//!
//! # Design
//!
//! A visit is the search's commonest shared operation (one per scheduling
//! point), so it takes no lock: a worker claims an empty slot with one
//! compare-and-swap and narrows a state's sleep mask with one atomic AND
//! (Laarman, van de Pol and Weber, "Boosting multi-core reachability
//! performance with shared hash tables", FMCAD 2010: the design of LTSmin's
//! table). Slots are only ever filled, never emptied, so linear probing needs
//! no tombstones and a reader that meets a slot mid-claim sees it empty or
//! whole.
//!
//! The table is split into [`SHARDS`] parts by the state's low bits; a part
//! grows (doubles) under its own write lock, which visits of that part take
//! for reading, so a growth stops only the visits of one part in 256.
//!
//! # What a slot holds
//!
//! A state is kept as a [`FINGERPRINT_BITS`]-bit fingerprint of its 64-bit hash (hash
//! compaction, as TLC's and SPIN's): the low 8 bits pick the part, the next
//! `k` bits the home slot in a part of `2^k` slots, and the slot stores the
//! rest (the *quotient*, `52 - k` bits, at most 40 since a part starts at
//! [`MIN_BITS`]) beside how far it lies from its home slot and the 16-bit
//! sleep mask (a scheduling point has at most 16 labels: two for each of the
//! checker's 8 CPUs):
//!
//! ```text
//! bit 63      62..56         55..16              15..0
//!     present displacement   quotient (≤ 40 b)   mask
//! ```
//!
//! The fingerprint is whole again from the part, the home slot and the
//! quotient, so a part grows, and a search saves, without the original hash.
//! Two states whose hashes agree on their low 60 bits are one state to the
//! search; [`Table::expected_collisions`] estimates how many such pairs a
//! search of its size expects (`n²/2^61`, under a ten-thousandth at 35
//! million states), and the report prints it as TLC does.
//!
//! A part grows at three quarters full, and when a state would lie more than
//! [`MAX_DISPLACEMENT`] slots past its home (then the part is crowded there,
//! and twice as many slots spread it out).

use super::saved::{Reader, Writer};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, RwLock};

/// Bits of a state hash the visited set keeps (its fingerprint).
pub const FINGERPRINT_BITS: u32 = 60;
/// `log2` of the number of parts.
const SHARD_BITS: u32 = 8;
/// Parts of the table.
const SHARDS: usize = 1 << SHARD_BITS;
/// `log2` of a part's slots at first (4,096 slots, 32 KiB): the quotient
/// then takes 40 bits, all the slot has for it.
const MIN_BITS: u32 = 12;
/// The most slots a state may lie past its home slot (7 bits).
const MAX_DISPLACEMENT: usize = 127;

const PRESENT: u64 = 1 << 63;
const MASK_BITS: u64 = 0xffff;
const FP_MASK: u64 = (1 << FINGERPRINT_BITS) - 1;

/// The fingerprint of a state hash.
pub(super) fn fingerprint(state: u64) -> u64 {
    state & FP_MASK
}

/// The part that holds fingerprint `fp`: its low bits.
fn shard_of(fp: u64) -> usize {
    (fp & (SHARDS as u64 - 1)) as usize
}

/// The pairs of states a search that kept `states` expects to have merged
/// because their hashes agree on the bits the table keeps (the usual
/// estimate for `n` uniform fingerprints of `b` bits, `n²/2^(b+1)`).
pub fn expected_collisions(states: u64) -> f64 {
    let n = states as f64;
    n * n / 2f64.powi(FINGERPRINT_BITS as i32 + 1)
}

/// One part: `2^bits` slots and how many are filled.
struct Part {
    slots: Words,
    bits: u32,
    len: AtomicUsize,
}

impl Part {
    fn new(bits: u32) -> Part {
        Part { slots: Words::new(1 << bits), bits, len: AtomicUsize::new(0) }
    }

    fn bytes(&self) -> u64 {
        (self.slots.len() * 8) as u64
    }

    /// The home slot and the quotient of fingerprint `fp` (its part's bits gone).
    fn place(&self, fp: u64) -> (usize, u64) {
        let rest = fp >> SHARD_BITS;
        ((rest & ((1 << self.bits) - 1)) as usize, rest >> self.bits)
    }

    /// The slots fingerprint `fp` may lie in, in the order it is looked for,
    /// each with the word's bits above the mask that `fp` has there: its
    /// home slot and the next [`MAX_DISPLACEMENT`].
    fn probe(&self, fp: u64) -> impl Iterator<Item = (&AtomicU64, u64)> + '_ {
        let (home, quotient) = self.place(fp);
        let n = self.slots.len() - 1;
        (0..=MAX_DISPLACEMENT).map(move |d| (&self.slots[(home + d) & n], PRESENT | (d as u64) << 56 | quotient << 16))
    }

    /// The mask of `fp`, if the part holds it.
    fn find(&self, fp: u64) -> Option<u64> {
        self.probe(fp).find_map(|(slot, key)| {
            let w = slot.load(Ordering::Acquire);
            (w & !MASK_BITS == key).then_some(w & MASK_BITS)
        })
    }

    /// The fingerprint's bits above the part's, from the slot `i` that holds
    /// `word`.
    fn rest_of(&self, i: usize, word: u64) -> u64 {
        let disp = ((word >> 56) & 0x7f) as usize;
        let home = (i.wrapping_sub(disp)) & (self.slots.len() - 1);
        let quotient = (word & !PRESENT & ((1 << 56) - 1)) >> 16;
        (quotient << self.bits) | home as u64
    }

    /// Visits fingerprint `fp` with `asleep`, or `Err(())` when the part
    /// must grow first.
    fn visit(&self, fp: u64, asleep: u64) -> Result<Visit, ()> {
        let asleep = asleep & MASK_BITS;
        for (slot, key) in self.probe(fp) {
            let mut word = slot.load(Ordering::Acquire);
            if word == 0 {
                if 4 * (self.len.load(Ordering::Relaxed) + 1) > 3 * self.slots.len() {
                    return Err(());
                }
                match slot.compare_exchange(0, key | asleep, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => {
                        self.len.fetch_add(1, Ordering::Relaxed);
                        return Ok(Visit::First);
                    }
                    // Another worker claimed the slot: it may have claimed it for this state.
                    Err(now) => word = now,
                }
            }
            if word & !MASK_BITS == key {
                // Keep the transitions both this visit and the earlier ones left asleep.
                let before = slot.fetch_and(!MASK_BITS | asleep, Ordering::AcqRel) & MASK_BITS;
                return Ok(Visit::Again { fresh: before & !asleep });
            }
        }
        Err(())
    }

    /// Puts `fp` with `mask` in a part no other thread reaches (one being
    /// built); `false` if it lies too far from its home slot. A state it
    /// holds already keeps the intersection of the masks.
    fn put(&mut self, fp: u64, mask: u64) -> bool {
        for (slot, key) in self.probe(fp) {
            let word = slot.load(Ordering::Relaxed);
            if word == 0 {
                slot.store(key | (mask & MASK_BITS), Ordering::Relaxed);
                self.len.fetch_add(1, Ordering::Relaxed);
                return true;
            }
            if word & !MASK_BITS == key {
                slot.store(word & (!MASK_BITS | mask), Ordering::Relaxed);
                return true;
            }
        }
        false
    }

    /// Every `(fingerprint bits above the part's, mask)` it holds.
    fn entries(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.slots.iter().enumerate().filter_map(|(i, s)| {
            let w = s.load(Ordering::Acquire);
            (w != 0).then(|| (self.rest_of(i, w), w & MASK_BITS))
        })
    }

    /// This part with twice the slots (or more, until every entry fits).
    fn grown(&self, shard: usize) -> Part {
        let mut bits = self.bits + 1;
        'again: loop {
            let mut p = Part::new(bits);
            for (rest, m) in self.entries() {
                if !p.put(rest << SHARD_BITS | shard as u64, m) {
                    bits += 1;
                    continue 'again;
                }
            }
            return p;
        }
    }
}

/// What a visit found.
enum Visit {
    /// The state was new.
    First,
    /// The state was there; `fresh` are the labels earlier visits left asleep and this one does not.
    Again { fresh: u64 },
}

/// A part alone on its cache lines (two parts' locks on one line would
/// bounce it between the workers that take them).
#[repr(align(128))]
struct Shard(RwLock<Part>);

/// The shared visited set: see the module documentation.
pub(super) struct Table {
    shards: Box<[Shard]>,
    /// While a party of a distributed search runs ([`Table::track`]): the
    /// fingerprints its visits inserted or narrowed.
    changed: Option<Mutex<Vec<u64>>>,
}

impl Default for Table {
    fn default() -> Self {
        Table { shards: (0..SHARDS).map(|_| Shard(RwLock::new(Part::new(MIN_BITS)))).collect(), changed: None }
    }
}

impl Table {
    fn read(&self, shard: usize) -> std::sync::RwLockReadGuard<'_, Part> {
        self.shards[shard].0.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Returns how many states it holds.
    pub(super) fn len(&self) -> usize {
        (0..SHARDS).map(|s| self.read(s).len.load(Ordering::Relaxed)).sum()
    }

    /// Returns the bytes its slots take.
    pub(super) fn bytes(&self) -> u64 {
        (0..SHARDS).map(|s| self.read(s).bytes()).sum()
    }

    /// Records a visit of `state` with the transitions in `asleep` (a mask
    /// of labels) asleep, and returns the labels this visit leaves alone
    /// (`None`: nothing left to explore here) with the bytes the table grew
    /// by to hold it (0 mostly).
    pub(super) fn visit(&self, state: u64, asleep: u64) -> (Option<u64>, u64) {
        debug_assert!(asleep & !MASK_BITS == 0, "a scheduling point has at most 16 labels");
        self.admit(fingerprint(state), asleep, true)
    }

    /// [`Table::visit`] of a fingerprint, recorded as a change while
    /// [`Table::track`]ing if `log`.
    fn admit(&self, fp: u64, asleep: u64, log: bool) -> (Option<u64>, u64) {
        let shard = shard_of(fp);
        let mut grew = 0;
        loop {
            let seen = {
                let part = self.read(shard);
                match part.visit(fp, asleep) {
                    Ok(v) => {
                        let left = match v {
                            Visit::First => Some(asleep),
                            Visit::Again { fresh: 0 } => None,
                            Visit::Again { fresh } => Some(!fresh),
                        };
                        if let (Some(changed), Some(_), true) = (&self.changed, left, log) {
                            changed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(fp);
                        }
                        return (left, grew);
                    }
                    Err(()) => part.bits,
                }
            };
            let mut part = self.shards[shard].0.write().unwrap_or_else(std::sync::PoisonError::into_inner);
            // Another worker may have grown it meanwhile.
            if part.bits == seen {
                let bigger = part.grown(shard);
                grew += bigger.bytes() - part.bytes();
                *part = bigger;
            }
        }
    }

    /// Every `(fingerprint, mask)` it holds.
    fn entries(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::with_capacity(self.len());
        for s in 0..SHARDS {
            let part = self.read(s);
            out.extend(part.entries().map(|(rest, m)| (rest << SHARD_BITS | s as u64, m)));
        }
        out
    }

    /// Adds every `(fingerprint, mask)` of `entries` (as [`Table::read_entries`]
    /// gives them); a state it already holds keeps the transitions both left
    /// unexplored (the intersection of its masks). Returns the bytes it grew
    /// by. Not recorded as changes.
    pub(super) fn admit_all(&self, entries: &[(u64, u64)]) -> u64 {
        entries.iter().map(|&(fp, m)| self.admit(fp, m, false).1).sum()
    }

    /// Records, from now on, the states each visit inserts or narrows.
    pub(super) fn track(&mut self) {
        self.changed = Some(Mutex::new(Vec::new()));
    }

    /// Returns the states recorded since [`Table::track`] or the last call,
    /// each with its mask now, and starts recording afresh.
    pub(super) fn take_changes(&self) -> Table {
        let mut keys = match &self.changed {
            Some(log) => std::mem::take(&mut *log.lock().unwrap_or_else(std::sync::PoisonError::into_inner)),
            None => Vec::new(),
        };
        keys.sort_unstable();
        keys.dedup();
        let out = Table::default();
        for fp in keys {
            if let Some(m) = self.mask_of(fp) {
                out.admit(fp, m, false);
            }
        }
        out
    }

    /// The mask of `fp`, if it holds it.
    fn mask_of(&self, fp: u64) -> Option<u64> {
        self.read(shard_of(fp)).find(fp)
    }

    /// Writes every entry into a saved search: the count, a 0 (the state of
    /// hash 0 apart, as earlier builds wrote it), then each fingerprint and
    /// mask.
    pub(super) fn save(&self, w: &mut Writer) {
        let entries = self.entries();
        w.u64(entries.len() as u64);
        w.u8(0);
        for (fp, m) in entries {
            w.u64(fp);
            w.u64(m);
        }
    }

    /// Reads what [`Table::save`] wrote (or the full hashes an earlier build
    /// saved: each is cut to its fingerprint), for [`Table::admit_all`]: a
    /// caller reads a whole save before it admits any of it, so a save that
    /// turns out corrupt leaves a table as it was.
    pub(super) fn read_entries(r: &mut Reader<'_>) -> Result<Vec<(u64, u64)>, String> {
        let n = r.len(16)?;
        let mut out = Vec::with_capacity(n + 1);
        let checked = |m: u64| {
            if m & !MASK_BITS != 0 {
                return Err("a visited state asleep on a label past the 16 a scheduling point has".to_string());
            }
            Ok(m)
        };
        if r.u8()? != 0 {
            out.push((0, checked(r.u64()?)?));
        }
        for _ in 0..n {
            let (k, m) = (r.u64()?, r.u64()?);
            out.push((fingerprint(k), checked(m)?));
        }
        Ok(out)
    }
}

/// A part's slots: zeroed words in a mapping of their own, so that a part's
/// untouched pages take no memory (the table starts at 8 MiB of slots, and
/// a small search touches few), asked for transparent huge pages from 2 MiB
/// up (a visit of a new state reads a random slot of a table that may reach
/// gigabytes; with 4 KiB pages nearly every such read also missed the TLB).
struct Words {
    ptr: std::ptr::NonNull<AtomicU64>,
    len: usize,
}

// SAFETY: `Words` owns its memory, as a `Box<[AtomicU64]>` would, and
// `AtomicU64` is `Sync`.
unsafe impl Send for Words {}
// SAFETY: as above; shared access goes through `&[AtomicU64]`.
unsafe impl Sync for Words {}

/// Parts this big or bigger are asked for huge pages.
const HUGE: usize = 2 << 20;

impl Words {
    /// `len` zeroed words; a mapping that fails is an allocation failure
    /// (the process stops, as on any; `--max-memory` is the cap that stops a
    /// search with its save instead).
    fn new(len: usize) -> Words {
        let bytes = len * 8;
        // SAFETY: a fresh private anonymous mapping (zeroed by the kernel).
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
        if p == libc::MAP_FAILED {
            std::alloc::handle_alloc_error(std::alloc::Layout::array::<u64>(len).expect("a part's size"));
        }
        if bytes >= HUGE {
            // SAFETY: our mapping; the advice only asks for huge pages, and failing it is harmless.
            unsafe { libc::madvise(p, bytes, libc::MADV_HUGEPAGE) };
        }
        let ptr = std::ptr::NonNull::new(p as *mut AtomicU64).expect("mmap returns no null mapping");
        Words { ptr, len }
    }
}

impl std::ops::Deref for Words {
    type Target = [AtomicU64];
    fn deref(&self) -> &[AtomicU64] {
        // SAFETY: `len` words, owned, zero-initialised (a valid `AtomicU64`).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Words {
    fn drop(&mut self) {
        // SAFETY: our own mapping of this size.
        unsafe { libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len * 8) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Godefroid's sleep sets with state caching, on a map: the answers the
    /// table must give.
    fn reference(map: &mut std::collections::HashMap<u64, u64>, state: u64, asleep: u64) -> Option<u64> {
        match map.get_mut(&state) {
            None => {
                map.insert(state, asleep);
                Some(asleep)
            }
            Some(mask) => {
                let fresh = *mask & !asleep;
                *mask &= asleep;
                (fresh != 0).then_some(!fresh)
            }
        }
    }

    /// The same answers as the reference, visit for visit, over enough
    /// states to grow every part several times and with masks that narrow.
    #[test]
    fn it_answers_as_sleep_sets_with_state_caching_do() {
        let t = Table::default();
        let mut v = std::collections::HashMap::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..400_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // A third of the visits go back to a state seen before.
            let state = if i % 3 == 0 && i > 0 { fingerprint(x % i + 1) } else { fingerprint(x) };
            let asleep = (x >> 40) & 0xffff;
            assert_eq!(t.visit(state, asleep).0, reference(&mut v, state, asleep), "visit {i}");
        }
        assert_eq!(t.len(), v.len());
    }

    /// A part grows by whole doublings and keeps every entry and mask; a
    /// save read back holds the same states and masks.
    #[test]
    fn growth_and_a_save_keep_every_state_and_mask() {
        let t = Table::default();
        for s in 1..1_200_000u64 {
            let h = s.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            t.visit(h, s & 0xffff);
        }
        let before = t.entries();
        assert_eq!(before.len(), 1_199_999);
        assert!(t.bytes() > (SHARDS << MIN_BITS) as u64 * 8, "the parts grew");
        let mut w = Writer::default();
        t.save(&mut w);
        let back = Table::default();
        back.admit_all(&Table::read_entries(&mut Reader::new(&w.0)).expect("its own save"));
        let (mut a, mut b) = (before, back.entries());
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b);
        for s in 1..1_200_000u64 {
            let h = s.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            assert_eq!(back.mask_of(fingerprint(h)), Some(s & 0xffff));
        }
    }

    /// Many threads visiting the same states at once: each state is new to
    /// exactly one visit, and its mask ends as the intersection of all.
    #[test]
    fn concurrent_visits_admit_each_state_once() {
        let t = Table::default();
        let firsts = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for w in 0..4u64 {
                let (t, firsts) = (&t, &firsts);
                s.spawn(move || {
                    for i in 0..50_000u64 {
                        let h = i.wrapping_mul(0xd6e8_feb8_6659_fd93);
                        if t.visit(h, 0xffff & !(1 << w)).0 == Some(0xffff & !(1 << w)) {
                            firsts.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(t.len(), 50_000);
        assert_eq!(firsts.load(Ordering::Relaxed), 50_000);
        for i in 0..50_000u64 {
            assert_eq!(t.mask_of(fingerprint(i.wrapping_mul(0xd6e8_feb8_6659_fd93))), Some(0xfff0));
        }
    }
}
