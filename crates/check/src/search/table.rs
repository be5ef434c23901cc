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
//! table). Slots are only ever filled, never emptied, so a probe needs no
//! tombstones and a reader that meets a slot mid-claim sees it empty or
//! whole.
//!
//! The table is split into [`SHARDS`] parts by the state's low bits; a part
//! grows (by a quarter, [`larger`]) while the visits of that part wait, so a
//! growth stops only the visits of one part in 256.
//!
//! # Visits that write nothing shared
//!
//! A worker's visits go through its [`Visitor`], which writes only memory of
//! its own on the way in and out of a part: a flag on a cache line of its
//! own says which part it is in, and the states it added are counted
//! privately and added to the part's count every [`FLUSH`] states. (A lock
//! per part, taken for reading at every visit, was one atomic
//! read-modify-write of a line every worker writes: with the workers'
//! visits spread over every part, nearly each one moved that line from
//! another core, twice. See `bench/2026-11-29-check-table-prefault.md`.) The
//! visitor and a part's grower meet as in Dekker's algorithm: the visitor
//! sets its flag, then looks whether the part is growing (and if so leaves
//! and waits); the grower says it is growing, then waits until no flag names
//! the part. Both in sequentially consistent order, so at least one of them
//! sees the other: no visit runs in a part while it is replaced. The ways in
//! that are not a visitor's (one-off visits, saves, counts) take the part's
//! mutex, which a grower holds too.
//!
//! # What a slot holds
//!
//! A state is kept as a fingerprint of its 128-bit hash (hash compaction,
//! as TLC's and SPIN's): the low 8 bits pick the part; the next 64 at most,
//! divided by the part's number of buckets, give the home bucket (the
//! remainder) and the *quotient*, which the slot stores beside the number
//! of the probe that found it room and the state's sleep mask, one bit for
//! each label a state of the check can have asleep (two for each CPU: its
//! step and its store buffer's drain; one, its step, in a check without
//! store buffers; [`Fingerprints`]):
//!
//! ```text
//! bit 63..59           58..L        L-1..0
//!     probe + 1 (1-31)  quotient     mask (L labels)
//! ```
//!
//! The fingerprint is whole again from the part, the slot's bucket, the
//! probe and the quotient, so a part grows, and a search saves, without the
//! original hash. A part has at least `2^`[`MIN_BUCKET_BITS`] buckets, where
//! the quotient has at most `59 - L` bits, so a fingerprint keeps `76 - L`
//! bits of the hash, at most [`MOST_BITS`] (72, the part's 8 and one word
//! above them): 72 for a check of 1 or 2 CPUs, 70 for 3, 64 for 6, 60 for
//! 8; without store buffers (`sc`) 72 up to 4 CPUs, 70 for 6, 68 for 8.
//! Two states whose hashes agree on those bits are one state to the
//! search; [`Fingerprints::expected_collisions`] estimates how many such
//! pairs a search of its size expects (`n²/2^(b+1)` for `b` bits: at a
//! billion states about 4·10⁻⁴ at 70 bits, 0.03 at 64; at ten billion 0.04
//! and 2.7), and the report prints it as TLC does.
//!
//! # Full parts
//!
//! A state is looked for, and put, in the slots of its home bucket (one
//! cache line) in order, then in those of up to [`PROBES`]` - 1` more
//! buckets, each at an offset that a hash of the quotient and the probe's
//! number gives (LTSmin's "walk the line", then rehash). Every visit of a
//! state follows the same sequence, and a bucket fills from its first slot,
//! so a state is found before the first empty slot of its sequence, or is
//! new and claimed there. Buckets looked at apart are what let a part fill
//! to [`LOAD`] (92%) at about two cache lines a new state, where linear
//! probing's runs of full slots grow long past three quarters. A part grows
//! when a new state would pass [`LOAD`], and when its sequence finds every
//! bucket full (rare below it).
//!
//! Since a part grows by a quarter and the parts start at sizes spread over
//! one growth ([`first_buckets`]), the parts fill alike but grow one after
//! another, and a table past its first growths holds about 0.82 states a
//! slot (9.7–10 bytes a state) at every size, where doubling parts that
//! grew together at three quarters swung between 3/8 and 3/4 (10.7–21.3
//! bytes). What it costs is rehashing: each state is moved about four
//! times over a search, against once.

use super::saved::{BodyRead, Out, Span};
#[cfg(test)]
use super::saved::{Reader, Writer};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use words::{populate, Words};

mod words;

/// `log2` of the number of parts.
const SHARD_BITS: u32 = 8;
/// Parts of the table.
const SHARDS: usize = 1 << SHARD_BITS;
/// Slots of a bucket: one cache line of 8-byte words.
const BUCKET: usize = 8;
/// `log2` of the fewest buckets a part has (512 buckets, 4,096 slots,
/// 32 KiB): the quotient then takes all the slot has for it.
const MIN_BUCKET_BITS: u32 = 9;
/// The buckets a state may lie in, in turn (the probe's number, plus one,
/// is kept in the slot's top 5 bits: 0 is an empty slot).
const PROBES: u64 = 31;
/// Where the probe's number lies in a slot.
const PROBE_SHIFT: u32 = 59;
/// A part grows when a new state would fill more than this share of it
/// (`LOAD.0 / LOAD.1`: 92%).
const LOAD: (usize, usize) = (23, 25);

/// The most visitors a table has at once; a worker past them visits through
/// the part's mutex.
const VISITORS: usize = 64;
/// States a visitor adds to a part before it adds them to the part's count
/// (so a part may pass [`LOAD`] by up to this many for each visitor before
/// it grows).
const FLUSH: u32 = 8;

/// Every label a scheduling point can have (16: two for each of the
/// checker's 8 CPUs), as masks of them.
pub(super) const ALL_LABELS: u64 = 0xffff;
/// The slot's bits below the probe's number: the quotient and the mask.
const BELOW_PROBE: u64 = (1 << PROBE_SHIFT) - 1;
/// The most bits of a state's hash a fingerprint keeps: its part's, and a
/// word above them (which a part's home bucket and quotient split).
const MOST_BITS: u32 = SHARD_BITS + 64;

/// How a visited set keeps a check's states: one bit of a slot for each
/// label a state can have asleep, the rest of the slot for the fingerprint
/// (see the module documentation). Every table of one check (its
/// workers', its nodes', a save's and a resume's) keeps them alike.
///
/// A CPU has two labels, its step (`2c`) and its store buffer's drain
/// (`2c + 1`); a check without store buffers (`sc`) has only the steps, and
/// its slots keep a bit for each CPU's step alone, the drains' bits left to
/// its fingerprint. The table takes and gives masks of labels; only its
/// slots hold them squeezed ([`Fingerprints::squeeze`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fingerprints {
    /// The slot's bits for the mask.
    labels: u32,
    /// Whether the drains' labels are left out (a check without store
    /// buffers).
    steps_only: bool,
}

impl Fingerprints {
    /// A check of `cpus` CPUs with store buffers: two labels each.
    pub const fn for_cpus(cpus: usize) -> Fingerprints {
        Fingerprints { labels: Fingerprints::slot_bits(2 * cpus, 2), steps_only: false }
    }

    /// A check of `cpus` CPUs without store buffers (`sc`): each CPU's step,
    /// a label apiece.
    pub const fn for_steps(cpus: usize) -> Fingerprints {
        Fingerprints { labels: Fingerprints::slot_bits(cpus, 1), steps_only: true }
    }

    /// `labels` kept within `least` and the 16 a scheduling point has.
    const fn slot_bits(labels: usize, least: usize) -> u32 {
        let most = ALL_LABELS.count_ones() as usize;
        if labels < least {
            least as u32
        } else if labels > most {
            most as u32
        } else {
            labels as u32
        }
    }

    /// Bits of a state hash a fingerprint keeps: what the quotient of a
    /// part of the fewest buckets holds, above the part's and the home
    /// bucket's, and at most [`MOST_BITS`].
    pub fn bits(self) -> u32 {
        (SHARD_BITS + MIN_BUCKET_BITS + PROBE_SHIFT - self.labels).min(MOST_BITS)
    }

    /// The pairs of states a search that kept `states` expects to have
    /// merged because their hashes agree on the bits it keeps (the usual
    /// estimate for `n` uniform fingerprints of `b` bits, `n²/2^(b+1)`).
    pub fn expected_collisions(self, states: u64) -> f64 {
        let n = states as f64;
        n * n / 2f64.powi(self.bits() as i32 + 1)
    }

    /// The fingerprint of a state hash: its low [`Fingerprints::bits`].
    pub(super) fn of(self, state: u128) -> u128 {
        state & ((1 << self.bits()) - 1)
    }

    /// The slot's bits that hold the mask.
    fn mask(self) -> u64 {
        (1 << self.labels) - 1
    }

    /// The labels a mask may have: [`Fingerprints::mask`] spread.
    fn labels_mask(self) -> u64 {
        self.spread(self.mask())
    }

    /// A mask of labels as the slot keeps it: without the drains' bits
    /// when it keeps steps only (each step's bit `2c` to bit `c`).
    fn squeeze(self, labels: u64) -> u64 {
        if !self.steps_only {
            return labels;
        }
        let mut m = labels & 0x5555;
        m = (m | m >> 1) & 0x3333;
        m = (m | m >> 2) & 0x0f0f;
        (m | m >> 4) & 0x00ff
    }

    /// A slot's mask as labels: what [`Fingerprints::squeeze`] squeezed.
    fn spread(self, kept: u64) -> u64 {
        if !self.steps_only {
            return kept;
        }
        let mut m = kept & 0x00ff;
        m = (m | m << 4) & 0x0f0f;
        m = (m | m << 2) & 0x3333;
        (m | m << 1) & 0x5555
    }
}

/// The part that holds fingerprint `fp`: its low bits.
fn shard_of(fp: u128) -> usize {
    (fp & (SHARDS as u128 - 1)) as usize
}

/// The bits of fingerprint `fp` above its part's: one word, since a
/// fingerprint has at most [`MOST_BITS`].
fn rest(fp: u128) -> u64 {
    (fp >> SHARD_BITS) as u64
}

/// The fingerprint whose bits above its part's are `rest`, in part `s`.
fn whole(rest: u64, s: usize) -> u128 {
    u128::from(rest) << SHARD_BITS | s as u128
}

/// The buckets part `s` starts with: from 512 for the first part to just
/// under a growth more for the last, so that the parts (which fill alike)
/// reach [`LOAD`] one after another, not all at once, and the table as a
/// whole is as full between growths as at them.
fn first_buckets(s: usize) -> u64 {
    let least = 1u64 << MIN_BUCKET_BITS;
    least + least * s as u64 / (4 * SHARDS as u64)
}

/// The buckets a part grows to from `buckets`: a quarter more.
fn larger(buckets: u64) -> u64 {
    buckets + buckets.div_ceil(4)
}

/// Whether `buckets` buckets hold `n` states within [`LOAD`].
fn holds_states(buckets: u64, n: usize) -> bool {
    LOAD.1 * n <= LOAD.0 * buckets as usize * BUCKET
}

/// The first size of a part's growths from `buckets` that holds `n` states.
fn sized_for(mut buckets: u64, n: usize) -> u64 {
    while !holds_states(buckets, n) {
        buckets = larger(buckets);
    }
    buckets
}

/// How far, in buckets, probe `k` of a state of quotient `q` lies past the
/// state's home bucket, in a part of `buckets` (probe 0 is the home).
fn offset(q: u64, k: u64, buckets: u64) -> u64 {
    if k == 0 {
        return 0;
    }
    // A 64-bit mix of the quotient and the probe (splitmix64's finaliser),
    // scaled to the part by a multiply (Lemire's reduction).
    let mut z = q.wrapping_add(k.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    ((u128::from(z) * u128::from(buckets)) >> 64) as u64
}

/// One part: `buckets` buckets of [`BUCKET`] slots (how many are filled is
/// counted beside it, in [`Table::lens`] and the visitors), and while a
/// saving search records changes ([`Table::record_changes`]) a bit per
/// slot set when its entry is added or its mask narrows.
struct Part {
    slots: Words,
    buckets: u64,
    fp: Fingerprints,
    changed: Option<Box<[AtomicU64]>>,
}

impl Part {
    fn new(buckets: u64, fp: Fingerprints) -> Part {
        Part { slots: Words::new(buckets as usize * BUCKET), buckets, fp, changed: None }
    }

    /// A bit per slot of a part of `buckets`, all clear.
    fn change_bits(buckets: u64) -> Box<[AtomicU64]> {
        (0..(buckets as usize * BUCKET).div_ceil(64)).map(|_| AtomicU64::new(0)).collect()
    }

    /// Marks slot `i` changed, if changes are recorded.
    fn mark(&self, i: usize) {
        if let Some(c) = &self.changed {
            c[i / 64].fetch_or(1 << (i % 64), Ordering::Relaxed);
        }
    }

    fn bytes(&self) -> u64 {
        (self.slots.len() * 8) as u64
    }

    /// The home bucket and the quotient of a fingerprint whose bits above
    /// the part's are `rest`: their remainder and quotient by the part's
    /// buckets.
    fn place(&self, rest: u64) -> (u64, u64) {
        (rest % self.buckets, rest / self.buckets)
    }

    /// Calls `at` on each slot the fingerprint placed at `home` with
    /// `quotient` ([`Part::place`]) may lie in, in the order it is looked
    /// for, with the slot's index and the word's bits above the mask that
    /// the fingerprint has there (the slots of its home bucket, then of
    /// [`PROBES`]` - 1` more buckets), until `at` returns something.
    #[inline(always)]
    fn probe<R>(
        &self,
        (home, quotient): (u64, u64),
        mut at: impl FnMut(usize, &AtomicU64, u64) -> Option<R>,
    ) -> Option<R> {
        let n = self.buckets;
        let below = quotient << self.fp.labels;
        for k in 0..PROBES {
            let b = home + offset(quotient, k, n);
            let b = if b >= n { b - n } else { b } as usize * BUCKET;
            let key = (k + 1) << PROBE_SHIFT | below;
            for (j, slot) in self.slots[b..b + BUCKET].iter().enumerate() {
                if let Some(r) = at(b + j, slot, key) {
                    return Some(r);
                }
            }
        }
        None
    }

    /// The mask of the fingerprint of bits `rest` above the part's, if the
    /// part holds it.
    #[cfg(test)]
    fn find(&self, rest: u64) -> Option<u64> {
        let mask = self.fp.mask();
        self.probe(self.place(rest), |_, slot, key| {
            let w = slot.load(Ordering::Acquire);
            (w & !mask == key).then_some(w & mask)
        })
    }

    /// The fingerprint's bits above the part's, from the slot `i` that holds
    /// `word`.
    fn rest_of(&self, i: usize, word: u64) -> u64 {
        let k = (word >> PROBE_SHIFT) - 1;
        let quotient = (word & BELOW_PROBE) >> self.fp.labels;
        let (b, off) = ((i / BUCKET) as u64, offset(quotient, k, self.buckets));
        let home = if b >= off { b - off } else { b + self.buckets - off };
        quotient * self.buckets + home
    }

    /// Whether a part of `len` states has no room for one more.
    fn full(&self, len: usize) -> bool {
        !holds_states(self.buckets, len + 1)
    }

    /// Visits the fingerprint of bits `rest` above the part's with the
    /// labels `asleep`, or `Err(())` when the part must grow first; `len`
    /// tells how many states it holds (read only when the state is new).
    /// The caller counts a state it adds. A change is marked (while changes
    /// are recorded) if `record`.
    fn visit(&self, rest: u64, asleep: u64, record: bool, len: impl Fn() -> usize) -> Result<Visit, ()> {
        let mask = self.fp.mask();
        let asleep = self.fp.squeeze(asleep) & mask;
        let found = self.probe(self.place(rest), |i, slot, key| {
            let mut word = slot.load(Ordering::Acquire);
            if word == 0 {
                if self.full(len()) {
                    return Some(Err(()));
                }
                match slot.compare_exchange(0, key | asleep, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => {
                        if record {
                            self.mark(i);
                        }
                        return Some(Ok(Visit::First));
                    }
                    // Another worker claimed the slot: it may have claimed it for this state.
                    Err(now) => word = now,
                }
            }
            if word & !mask != key {
                return None;
            }
            if word & mask & !asleep == 0 {
                // Nothing to narrow (a mask only narrows, so a later word
                // would not differ): no write to the line.
                return Some(Ok(Visit::Again { fresh: 0 }));
            }
            // Keep the transitions both this visit and the earlier ones left asleep.
            let before = slot.fetch_and(!mask | asleep, Ordering::AcqRel) & mask;
            let fresh = before & !asleep;
            if record && fresh != 0 {
                self.mark(i);
            }
            Some(Ok(Visit::Again { fresh: self.fp.spread(fresh) }))
        });
        found.unwrap_or(Err(()))
    }

    /// Puts the fingerprint placed at `home` with `quotient` ([`Part::place`])
    /// with `mask` in a part no other thread reaches (one being built),
    /// marked changed if `changed`; `false` if every bucket it may lie in is
    /// full. A state it holds already keeps the intersection of the masks.
    fn put(&self, place: (u64, u64), mask: u64, changed: bool) -> bool {
        let bits = self.fp.mask();
        let at = self.probe(place, |i, slot, key| {
            let word = slot.load(Ordering::Relaxed);
            (word == 0 || word & !bits == key).then(|| {
                let mask = if word == 0 { mask } else { word & mask };
                slot.store(key | (mask & bits), Ordering::Relaxed);
                i
            })
        });
        if let (Some(i), true) = (at, changed) {
            self.mark(i);
        }
        at.is_some()
    }

    /// Whether slot `i` is marked changed.
    fn marked(&self, i: usize) -> bool {
        self.changed.as_ref().is_some_and(|c| c[i / 64].load(Ordering::Relaxed) & (1 << (i % 64)) != 0)
    }

    /// Every `(fingerprint bits above the part's, mask as the slot keeps
    /// it, marked changed)` it holds.
    fn entries(&self) -> impl Iterator<Item = (u64, u64, bool)> + '_ {
        let mask = self.fp.mask();
        self.slots.iter().enumerate().filter_map(move |(i, s)| {
            let w = s.load(Ordering::Acquire);
            (w != 0).then(|| (self.rest_of(i, w), w & mask, self.marked(i)))
        })
    }

    /// This part with a quarter more buckets (or `least`, a later size of
    /// its growths, if more; or more, until every entry fits), its pages faulted in ([`populate`]) and
    /// its changes still marked, and how many states it holds.
    ///
    /// The entries go to random buckets of the new part, each a likely
    /// cache miss: an entry is placed, and its home bucket prefetched,
    /// [`AHEAD`] entries before it is put.
    fn grown(&self, least: u64) -> (Part, usize) {
        const AHEAD: usize = 16;
        let mut buckets = larger(self.buckets).max(least);
        'again: loop {
            let mut p = Part::new(buckets, self.fp);
            p.changed = self.changed.as_ref().map(|_| Part::change_bits(buckets));
            populate(&p.slots);
            let mut ring = [((0, 0), 0, false); AHEAD];
            let (mut taken, mut put) = (0, 0);
            let mut entries = self.entries();
            loop {
                let next = entries.next().map(|(rest, m, changed)| {
                    let place = p.place(rest);
                    prefetch(&p.slots[place.0 as usize * BUCKET]);
                    (place, m, changed)
                });
                while put < taken && (taken - put == AHEAD || next.is_none()) {
                    let (place, m, changed) = ring[put % AHEAD];
                    if !p.put(place, m, changed) {
                        buckets = larger(buckets);
                        continue 'again;
                    }
                    put += 1;
                }
                let Some(entry) = next else { return (p, taken) };
                ring[taken % AHEAD] = entry;
                taken += 1;
            }
        }
    }
}

/// Asks the host CPU to bring the cache line of `word` in (a hint: no
/// effect on any result; nothing on hosts other than x86-64).
#[inline(always)]
fn prefetch(word: &AtomicU64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing the program sees and cannot fault.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(word.as_ptr() as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = word;
}

/// What a visit found.
enum Visit {
    /// The state was new.
    First,
    /// The state was there; `fresh` are the labels earlier visits left asleep and this one does not.
    Again { fresh: u64 },
}

impl Visit {
    /// The labels a visit with `asleep` that found this leaves alone
    /// (`None`: nothing left to explore here).
    fn left(self, asleep: u64) -> Option<u64> {
        match self {
            Visit::First => Some(asleep),
            Visit::Again { fresh: 0 } => None,
            Visit::Again { fresh } => Some(!fresh),
        }
    }
}

/// A part and what keeps it whole while it grows, alone on its cache lines
/// (visitors of every part read them; only growers write them).
#[repr(align(128))]
struct Shard {
    /// Replaced only by a grower that holds `grow`, once no visitor is in
    /// it (see the module documentation).
    part: UnsafeCell<Part>,
    /// Set while the part is replaced: visitors stay out.
    growing: AtomicBool,
    /// Held by a grower, and by every way in that is not a visitor's.
    grow: Mutex<()>,
}

// SAFETY: `part` is written only under `grow` with no visitor inside (the
// protocol of the module documentation), and read under `grow` or inside.
unsafe impl Sync for Shard {}

/// A count alone on its cache lines.
#[repr(align(128))]
#[derive(Default)]
struct Count(AtomicUsize);

/// A visitor's flag: 0, or `s + 1` while it is in part `s`; and whether a
/// visitor holds it.
#[repr(align(128))]
#[derive(Default)]
struct Flag {
    inside: AtomicU32,
    taken: AtomicBool,
}

/// The shared visited set: see the module documentation.
pub(super) struct Table {
    shards: Box<[Shard]>,
    /// Per part: the states it holds, less those its visitors have added
    /// and not yet counted.
    lens: Box<[Count]>,
    flags: Box<[Flag]>,
    /// Done when the first visitor came, or the first states were admitted
    /// in bulk: the first parts' pages faulted in.
    faulted_in: std::sync::Once,
    /// The parts it holds states in (a sharded search's node owns some):
    /// only they are faulted in. A bit per part.
    owned: [u64; SHARDS / 64],
    /// The bytes its parts' slots take (a part's only change of size is a
    /// growth, which adds to it): read at every pump of a sharded node.
    slot_bytes: AtomicU64,
    fp: Fingerprints,
    /// Entries moved by growths ([`Moved`]).
    moved: Moved,
}

/// The entries a table's growths moved, which its tests count (what a
/// resume saves, [`Table::admit_stored`]); nothing is counted outside them.
#[cfg(test)]
type Moved = AtomicUsize;

/// See the tests' [`Moved`].
#[cfg(not(test))]
struct Moved;

#[cfg(not(test))]
impl Moved {
    fn new(_: usize) -> Moved {
        Moved
    }

    fn fetch_add(&self, _: usize, _: Ordering) {}
}

/// One worker's way into a [`Table`] (see the module documentation).
pub(super) struct Visitor<'t> {
    table: &'t Table,
    /// Its flag; `None` when every flag was taken (it visits through the
    /// parts' mutexes).
    flag: Option<usize>,
    /// Per part: states added and not yet counted, and the part's buckets
    /// when they were (a part grown since counted them itself).
    pending: Box<[(u32, u64)]>,
}

impl Visitor<'_> {
    /// [`Table::visit`], as this visitor.
    pub(super) fn visit(&mut self, state: u128, asleep: u64) -> (Option<u64>, u64) {
        let Some(k) = self.flag else { return self.table.visit(state, asleep) };
        let t = self.table;
        debug_assert!(asleep & !t.fp.labels_mask() == 0, "a label past the check's CPUs");
        let fp = t.fp.of(state);
        let s = shard_of(fp);
        let (shard, flag) = (&t.shards[s], &t.flags[k].inside);
        let mut grew = 0;
        loop {
            flag.store(s as u32 + 1, Ordering::SeqCst);
            if shard.growing.load(Ordering::SeqCst) {
                flag.store(0, Ordering::Release);
                // The grower holds the part's mutex until it is done.
                drop(t.hold(s));
                continue;
            }
            // SAFETY: inside the part, and no grower replaces it while this
            // visitor's flag names it (the module documentation).
            let part = unsafe { &*shard.part.get() };
            let (pending, buckets) = &mut self.pending[s];
            if *buckets != part.buckets {
                // Grown since: the grower counted what this visitor added.
                (*pending, *buckets) = (0, part.buckets);
            }
            let own = *pending as usize;
            let had = part.buckets;
            let seen = part.visit(rest(fp), asleep, true, || t.lens[s].0.load(Ordering::Relaxed) + own);
            if let Ok(Visit::First) = seen {
                *pending += 1;
                if *pending == FLUSH {
                    t.lens[s].0.fetch_add(FLUSH as usize, Ordering::Relaxed);
                    *pending = 0;
                }
            }
            flag.store(0, Ordering::Release);
            match seen {
                Ok(v) => return (v.left(asleep), grew),
                Err(()) => grew += t.grow(s, had),
            }
        }
    }
}

impl Drop for Visitor<'_> {
    /// Counts what it added and not yet counted, in the parts that have not
    /// grown since, and frees its flag.
    fn drop(&mut self) {
        let Some(k) = self.flag else { return };
        for (s, &(pending, buckets)) in self.pending.iter().enumerate() {
            if pending > 0 {
                let (part, _held) = self.table.hold(s);
                if part.buckets == buckets {
                    self.table.lens[s].0.fetch_add(pending as usize, Ordering::Relaxed);
                }
            }
        }
        self.table.flags[k].taken.store(false, Ordering::Release);
    }
}

/// Waits, spinning a little and then yielding, while `busy` says so (a
/// visit lasts a microsecond; its thread may have been put off its CPU).
fn wait_while(busy: impl Fn() -> bool) {
    let mut spins = 0u32;
    while busy() {
        if spins < 64 {
            std::hint::spin_loop();
            spins += 1;
        } else {
            std::thread::yield_now();
        }
    }
}

/// The bytes of a new table's slots (every part's, owned or not).
fn first_bytes() -> u64 {
    (0..SHARDS).map(|p| first_buckets(p) * (BUCKET as u64) * 8).sum()
}

/// Whether the bit of part `p` is set in `owned` (a bit per part).
fn holds(owned: &[u64; SHARDS / 64], p: usize) -> bool {
    owned[p / 64] & (1 << (p % 64)) != 0
}

impl Table {
    /// An empty table that keeps states as `fp` says.
    pub(super) fn new(fp: Fingerprints) -> Table {
        Table::owning(fp, |_| true)
    }

    /// A table that holds states only in the parts `owns` names (a node of
    /// a sharded search: the parts dealt to it). The others are made, as
    /// every part is, but after the owned ones and never faulted in, so
    /// they take address space and no memory (small parts share huge
    /// pages: made in turn, an unowned part would sit in a huge page an
    /// owned one faults in).
    pub(super) fn owning(fp: Fingerprints, owns: impl Fn(usize) -> bool) -> Table {
        let shard = |p| Shard {
            part: UnsafeCell::new(Part::new(first_buckets(p), fp)),
            growing: false.into(),
            grow: Mutex::new(()),
        };
        let mut owned = [0u64; SHARDS / 64];
        (0..SHARDS).filter(|&p| owns(p)).for_each(|p| owned[p / 64] |= 1 << (p % 64));
        // Owned parts first (in the reservation's order), then the rest.
        let mut shards: Vec<Option<Shard>> = (0..SHARDS).map(|_| None).collect();
        let (mine, others): (Vec<usize>, Vec<usize>) = (0..SHARDS).partition(|&p| holds(&owned, p));
        for p in mine.into_iter().chain(others) {
            shards[p] = Some(shard(p));
        }
        Table {
            shards: shards.into_iter().map(|s| s.expect("every part made")).collect(),
            lens: (0..SHARDS).map(|_| Count::default()).collect(),
            flags: (0..VISITORS).map(|_| Flag::default()).collect(),
            faulted_in: std::sync::Once::new(),
            owned,
            slot_bytes: AtomicU64::new(first_bytes()),
            fp,
            moved: Moved::new(0),
        }
    }

    /// Whether it holds states in part `p` (see [`Table::owning`]).
    fn owns(&self, p: usize) -> bool {
        holds(&self.owned, p)
    }

    /// Part `s`, held whole: no grower replaces it until the guard is dropped.
    fn hold(&self, s: usize) -> (&Part, MutexGuard<'_, ()>) {
        let held = self.shards[s].grow.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // SAFETY: growers replace the part only while holding this mutex.
        (unsafe { &*self.shards[s].part.get() }, held)
    }

    /// A way in for one worker: visits that write nothing another worker
    /// writes (see the module documentation), as long as it is one of the
    /// first [`VISITORS`] at once.
    pub(super) fn visitor(&self) -> Visitor<'_> {
        self.fault_in();
        let flag = self
            .flags
            .iter()
            .position(|f| f.taken.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok());
        Visitor { table: self, flag, pending: vec![(0, 0); SHARDS].into_boxed_slice() }
    }

    /// Faults the first pages of the parts it owns in, once, as a grown
    /// part's are (see [`populate`]): 9 MiB for a whole table, its share of
    /// that for a node's, for a table that workers share or that takes
    /// states in bulk. A table of one thread's few visits does not pay it.
    fn fault_in(&self) {
        self.faulted_in
            .call_once(|| (0..SHARDS).filter(|&s| self.owns(s)).for_each(|s| populate(&self.hold(s).0.slots)));
    }

    /// Returns how many states it holds (less those live visitors have not
    /// counted yet: exact once they are gone).
    pub(super) fn len(&self) -> usize {
        self.lens.iter().map(|c| c.0.load(Ordering::Relaxed)).sum()
    }

    /// Returns the bytes its slots take.
    pub(super) fn bytes(&self) -> u64 {
        self.slot_bytes.load(Ordering::Relaxed)
    }

    /// Records a visit of `state` with the transitions in `asleep` (a mask
    /// of labels) asleep, and returns the labels this visit leaves alone
    /// (`None`: nothing left to explore here) with the bytes the table grew
    /// by to hold it (0 mostly). A worker visiting often goes through its
    /// [`Table::visitor`] instead.
    pub(super) fn visit(&self, state: u128, asleep: u64) -> (Option<u64>, u64) {
        debug_assert!(asleep & !self.fp.labels_mask() == 0, "a label past the check's CPUs");
        self.admit(self.fp.of(state), asleep, true)
    }

    /// [`Table::visit`] of a fingerprint through its part's mutex, marked
    /// as a change (while [`Table::record_changes`] has it record them) if
    /// `record`.
    fn admit(&self, fp: u128, asleep: u64, record: bool) -> (Option<u64>, u64) {
        let s = shard_of(fp);
        let mut grew = 0;
        loop {
            let seen = {
                let (part, _held) = self.hold(s);
                let len = &self.lens[s].0;
                match part.visit(rest(fp), asleep, record, || len.load(Ordering::Relaxed)) {
                    Ok(v) => {
                        if let Visit::First = v {
                            len.fetch_add(1, Ordering::Relaxed);
                        }
                        return (v.left(asleep), grew);
                    }
                    Err(()) => part.buckets,
                }
            };
            grew += self.grow(s, seen);
        }
    }

    /// Grows part `s` unless it has grown since it had `buckets`; returns
    /// the bytes it grew by.
    fn grow(&self, s: usize, buckets: u64) -> u64 {
        self.grow_to(s, buckets, 0)
    }

    /// [`Table::grow`], to at least `least` buckets.
    fn grow_to(&self, s: usize, buckets: u64, least: u64) -> u64 {
        let shard = &self.shards[s];
        let (part, _held) = self.hold(s);
        if part.buckets != buckets {
            // Another worker grew it meanwhile.
            return 0;
        }
        shard.growing.store(true, Ordering::SeqCst);
        for f in self.flags.iter() {
            wait_while(|| f.inside.load(Ordering::SeqCst) == s as u32 + 1);
        }
        // Every visitor is out and waits; the ways in through the mutex wait for it.
        let (bigger, n) = part.grown(least);
        self.moved.fetch_add(n, Ordering::Relaxed);
        let grew = bigger.bytes() - part.bytes();
        // SAFETY: nothing else reads or writes the part now (above).
        unsafe { *shard.part.get() = bigger };
        self.slot_bytes.fetch_add(grew, Ordering::Relaxed);
        self.lens[s].0.store(n, Ordering::Relaxed);
        shard.growing.store(false, Ordering::Release);
        grew
    }

    /// Every `(fingerprint, mask)` it holds.
    #[cfg(test)]
    pub(super) fn entries(&self) -> Vec<(u128, u64)> {
        let mut out = Vec::with_capacity(self.len());
        self.each(&mut |fp, m| out.push((fp, m)));
        out
    }

    /// Calls `f` with every `(fingerprint, mask)` it holds.
    fn each(&self, f: &mut dyn FnMut(u128, u64)) {
        for s in 0..SHARDS {
            let (part, _held) = self.hold(s);
            part.entries().for_each(|(rest, m, _)| f(whole(rest, s), self.fp.spread(m)));
        }
    }

    /// [`Table::admit_stored`] of a list in memory.
    #[cfg(test)]
    pub(super) fn admit_all(&self, entries: &[(u128, u64)]) -> u64 {
        let listed = self.admit_listed(&mut |f| entries.iter().try_for_each(|&(fp, m)| f(fp, m)));
        listed.expect("a list in memory reads without fail")
    }

    /// Adds every `(fingerprint, mask)` of the saves' states `stored` (each
    /// cut to a fingerprint of this table's; a mask's bits past its labels
    /// dropped); a state it already holds keeps the transitions both left
    /// unexplored (the intersection of its masks). Returns the bytes it
    /// grew by, or why a state cannot be read: then the table is as it
    /// was. Not recorded as changes.
    pub(super) fn admit_stored(&self, stored: &[Stored<'_>]) -> Result<u64, String> {
        self.admit_stored_where(stored, &|_| true)
    }

    /// [`Table::admit_stored`] of the states whose fingerprints `keep` keeps.
    pub(super) fn admit_stored_where(&self, stored: &[Stored<'_>], keep: &dyn Fn(u128) -> bool) -> Result<u64, String> {
        self.admit_listed(&mut |f| {
            stored.iter().try_for_each(|s| s.each(&mut |fp, m| if keep(fp) { f(fp, m) } else { Ok(()) }))
        })
    }

    /// [`Table::admit_stored`] of what `list` lists, which it is asked for
    /// twice: first to be counted (nothing is admitted if it fails then),
    /// then to be admitted.
    ///
    /// An empty table (a resumed search's, a node's from its snapshot part)
    /// first grows each part once to the size its entries need, instead of
    /// through every size on the way (each entry rehashed about four times).
    fn admit_listed(&self, list: &mut Listing<'_>) -> Result<u64, String> {
        let mut counts = vec![0usize; SHARDS];
        list(&mut |fp, _| {
            counts[shard_of(self.fp.of(fp))] += 1;
            Ok(())
        })?;
        if counts.iter().all(|&n| n == 0) {
            return Ok(0);
        }
        self.fault_in();
        let mut grew = 0;
        if self.len() == 0 {
            for (s, &n) in counts.iter().enumerate() {
                let had = self.hold(s).0.buckets;
                let need = sized_for(had, n);
                if need > had {
                    grew += self.grow_to(s, had, need);
                }
            }
        }
        list(&mut |fp, m| {
            grew += self.admit(self.fp.of(fp), m & self.fp.labels_mask(), false).1;
            Ok(())
        })?;
        Ok(grew)
    }

    /// The mask of `fp`, if it holds it.
    #[cfg(test)]
    fn mask_of(&self, fp: u128) -> Option<u64> {
        self.hold(shard_of(fp)).0.find(rest(fp)).map(|m| self.fp.spread(m))
    }

    /// Writes every entry into a saved search ([`write_states`]), counted
    /// first (no visit may run meanwhile: a saving search's workers wait).
    pub(super) fn save(&self, w: &mut dyn Out) {
        write_states(w, self.count(), &mut |f| self.each(f));
    }

    /// Writes the entries marked as changes ([`Table::record_changes`]) as
    /// [`Table::save`] writes every entry, and clears their marks: a saving
    /// search's delta, or a sharded node's (no visit may run meanwhile).
    pub(super) fn save_changes(&self, w: &mut dyn Out) {
        write_states(w, self.changed(), &mut |f| self.drain_changes_with(f));
    }

    /// How many entries it holds, counted one by one (exact while visitors
    /// live, which [`Table::len`] is not).
    pub(super) fn count(&self) -> u64 {
        let mut n = 0;
        self.each(&mut |_, _| n += 1);
        n
    }

    /// Marks, from now on, each entry a visit adds or whose mask it narrows
    /// (not those [`Table::admit_stored`] takes in), for
    /// [`Table::drain_changes`]: a saving search's saves after its first
    /// write only those (see `saved.rs`), and a party of a distributed
    /// search hands back only those. A bit per slot.
    pub(super) fn record_changes(&mut self) {
        for shard in self.shards.iter_mut() {
            let part = shard.part.get_mut();
            part.changed = Some(Part::change_bits(part.buckets));
        }
    }

    /// Clears the marks of [`Table::record_changes`]; returns, if `list`,
    /// every `(fingerprint, mask)` they marked, with its mask now. No visit
    /// may run meanwhile (a saving search's workers wait while it saves).
    pub(super) fn drain_changes(&self, list: bool) -> Vec<(u128, u64)> {
        let mut out = Vec::new();
        self.drain_changes_with(&mut |fp, m| {
            if list {
                out.push((fp, m));
            }
        });
        out
    }

    /// [`Table::drain_changes`], calling `f` with each marked entry.
    fn drain_changes_with(&self, f: &mut dyn FnMut(u128, u64)) {
        for s in 0..SHARDS {
            let (part, _held) = self.hold(s);
            let Some(marks) = &part.changed else { continue };
            for (k, word) in marks.iter().enumerate() {
                let mut bits = word.swap(0, Ordering::Relaxed);
                while bits != 0 {
                    let i = k * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let w = part.slots[i].load(Ordering::Acquire);
                    f(whole(part.rest_of(i, w), s), part.fp.spread(w & part.fp.mask()));
                }
            }
        }
    }

    /// How many entries are marked as changes now.
    pub(super) fn changed(&self) -> u64 {
        let marked = |s| {
            let (part, _held) = self.hold(s);
            part.changed.as_ref().map_or(0, |c| c.iter().map(|w| w.load(Ordering::Relaxed).count_ones() as u64).sum())
        };
        (0..SHARDS).map(marked).sum()
    }

    /// Reads what [`Table::save`] wrote into a list.
    #[cfg(test)]
    pub(super) fn read_entries<'a>(r: &mut impl BodyRead<'a>) -> Result<Vec<(u128, u64)>, String> {
        let stored = Stored::read(r)?;
        let mut out = Vec::new();
        stored.each(&mut |fp, m| {
            out.push((fp, m));
            Ok(())
        })?;
        Ok(out)
    }
}

/// A list of entries asked for with what to do with each, which may stop
/// it with an error ([`Table::admit_listed`]).
type Listing<'f> = dyn FnMut(&mut dyn FnMut(u128, u64) -> Result<(), String>) -> Result<(), String> + 'f;

/// The states [`Table::save`] wrote into a save's body, where they lie
/// (in memory, or in the save's file: see `saved/stream.rs`).
pub(super) struct Stored<'a> {
    /// The state of hash 0's mask, kept apart by earlier builds.
    zero: Option<u64>,
    pairs: Span<'a>,
}

impl<'a> Stored<'a> {
    /// Reads the count and skips the states (read by [`Stored::each`]).
    pub(super) fn read(r: &mut impl BodyRead<'a>) -> Result<Stored<'a>, String> {
        let n = r.len(16)?;
        let zero = if r.u8()? != 0 { Some(r.u64()?) } else { None };
        Ok(Stored { zero, pairs: r.span(n as u64 * 16)? })
    }

    /// How many states it holds.
    pub(super) fn len(&self) -> u64 {
        u64::from(self.zero.is_some()) + self.pairs.len() / 16
    }

    /// Calls `f` with each `(fingerprint, mask)`, until it or a check of
    /// what was read fails.
    pub(super) fn each(&self, f: &mut dyn FnMut(u128, u64) -> Result<(), String>) -> Result<(), String> {
        if let Some(m) = self.zero {
            if m & !ALL_LABELS != 0 {
                return Err("a visited state asleep on a label past the 16 a scheduling point has".to_string());
            }
            f(0, m)?;
        }
        self.pairs.pairs(&mut |low, high| {
            let (fp, m) = unpack([low, high])?;
            f(fp, m)
        })
    }
}

/// What lists states to [`write_states`]: it calls its argument with each
/// fingerprint and mask.
pub(super) type ListStates<'a> = dyn FnMut(&mut dyn FnMut(u128, u64)) + 'a;

/// Where [`pack`]'s second word holds the state's bits past 64, above the
/// mask's 16.
const ABOVE_MASK: u32 = ALL_LABELS.count_ones();

/// A state's hash (or its fingerprint) and a mask of labels in the two
/// words a save and a sharded search's claim carry: the hash's low 64
/// bits, then the mask with the hash's bits from 64 to [`MOST_BITS`] above
/// it. The bits past those are dropped: no check's fingerprint keeps them.
pub(super) fn pack(state: u128, mask: u64) -> [u64; 2] {
    debug_assert!(mask & !ALL_LABELS == 0, "a label past the 16 a scheduling point has");
    let above = (state >> 64) as u64 & ((1 << (MOST_BITS - 64)) - 1);
    [state as u64, mask | above << ABOVE_MASK]
}

/// What [`pack`] packed, or why the words are not something it packs.
pub(super) fn unpack([low, high]: [u64; 2]) -> Result<(u128, u64), String> {
    let (mask, above) = (high & ALL_LABELS, high >> ABOVE_MASK);
    if above >> (MOST_BITS - 64) != 0 {
        return Err(format!("a state's fingerprint wider than the {MOST_BITS} bits a fingerprint keeps"));
    }
    Ok((u128::from(low) | u128::from(above) << 64, mask))
}

/// Writes `n` states as a save holds them ([`Stored`] reads them): the
/// count, a 0 (the state of hash 0 apart, as earlier builds wrote it), then
/// each state in two words, as `list` hands them to its argument: its
/// fingerprint's low 64 bits, then its mask with the fingerprint's bits
/// past 64 above it.
pub(super) fn write_states(w: &mut dyn Out, n: u64, list: &mut ListStates<'_>) {
    w.u64(n);
    w.u8(0);
    list(&mut |fp, m| {
        debug_assert!(fp >> MOST_BITS == 0, "a fingerprint past what a save holds");
        pack(fp, m).into_iter().for_each(|word| w.u64(word));
    });
}

/// The bytes [`write_states`] writes of `n` states.
pub(super) fn states_len(n: u64) -> u64 {
    9 + 16 * n
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fingerprints of a check of 8 CPUs: 16 labels, 60 bits.
    const EIGHT: Fingerprints = Fingerprints::for_cpus(8);

    /// Godefroid's sleep sets with state caching, on a map: the answers the
    /// table must give.
    fn reference(map: &mut std::collections::HashMap<u128, u64>, state: u128, asleep: u64) -> Option<u64> {
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

    /// The next of a xorshift sequence of hashes.
    fn next(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    /// The same answers as the reference, visit for visit, over enough
    /// states to grow every part several times and with masks that narrow.
    #[test]
    fn it_answers_as_sleep_sets_with_state_caching_do() {
        let t = Table::new(EIGHT);
        let mut v = std::collections::HashMap::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..400_000u64 {
            next(&mut x);
            // A third of the visits go back to a state seen before.
            let state = if i % 3 == 0 && i > 0 { EIGHT.of((x % i + 1).into()) } else { EIGHT.of(x.into()) };
            let asleep = (x >> 40) & 0xffff;
            assert_eq!(t.visit(state, asleep).0, reference(&mut v, state, asleep), "visit {i}");
        }
        assert_eq!(t.len(), v.len());
    }

    /// A node's table (the odd parts, as the second of two nodes owns):
    /// its visits of its own parts answer as a whole table's, through a
    /// visitor, and it grows them alone. (That the other parts take no
    /// memory is measured by `tlbkit bench sharded --processes`: a test's
    /// tables share the process's reservation with other tests'.)
    #[test]
    fn a_table_of_some_parts_holds_their_states_alone() {
        let t = Table::owning(EIGHT, |p| p % 2 == 1);
        assert!((0..SHARDS).all(|p| t.owns(p) == (p % 2 == 1)));
        let mut me = t.visitor();
        let mut v = std::collections::HashMap::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        // Past 92% of 128 parts of up to 5,112 slots: each grows.
        for i in 0..700_000u64 {
            let state = EIGHT.of((next(&mut x) | 1).into());
            let asleep = (x >> 40) & 0xffff;
            assert_eq!(me.visit(state, asleep).0, reference(&mut v, state, asleep), "visit {i}");
        }
        drop(me);
        assert_eq!(t.len(), v.len());
        let grew = |p: usize| t.hold(p).0.buckets > first_buckets(p);
        assert!((0..SHARDS).all(|p| grew(p) == (p % 2 == 1)), "only the owned parts grew");
        let slots: u64 = (0..SHARDS).map(|p| t.hold(p).0.bytes()).sum();
        assert_eq!(t.bytes(), slots, "the bytes counted as the parts grew are theirs");
    }

    /// A part grows and keeps every entry and mask; a
    /// save read back holds the same states and masks.
    #[test]
    fn growth_and_a_save_keep_every_state_and_mask() {
        let t = Table::new(EIGHT);
        for s in 1..1_400_000u64 {
            let h = s.wrapping_mul(0x9e37_79b9_7f4a_7c15).into();
            t.visit(h, s & 0xffff);
        }
        let before = t.entries();
        assert_eq!(before.len(), 1_399_999);
        assert!(t.bytes() > first_bytes(), "the parts grew");
        let mut w = Writer::default();
        t.save(&mut w);
        let back = Table::new(EIGHT);
        back.admit_all(&Table::read_entries(&mut Reader::new(&w.0)).expect("its own save"));
        let (mut a, mut b) = (before, back.entries());
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b);
        for s in 1..1_400_000u64 {
            let h = s.wrapping_mul(0x9e37_79b9_7f4a_7c15).into();
            assert_eq!(back.mask_of(EIGHT.of(h)), Some(s & 0xffff));
        }
    }

    /// Entries admitted into an empty table (a resume) make each part, at
    /// once, the first size of its growths that holds them, as visits
    /// would have grown it, and every entry is there; no growth moved any
    /// (admitted into a table that holds one state, each part grows through
    /// its sizes and they move more than once each).
    #[test]
    fn a_resumed_table_sizes_its_parts_once() {
        let entries: Vec<(u128, u64)> =
            (1..1_500_000u64).map(|s| (s.wrapping_mul(0x9e37_79b9_7f4a_7c15).into(), s & 0xffff)).collect();
        let t = Table::new(EIGHT);
        let grew = t.admit_all(&entries);
        assert_eq!(t.bytes(), first_bytes() + grew);
        let mut counts = [0usize; SHARDS];
        entries.iter().for_each(|&(fp, _)| counts[shard_of(EIGHT.of(fp))] += 1);
        for (p, &n) in counts.iter().enumerate() {
            assert_eq!(t.hold(p).0.buckets, sized_for(first_buckets(p), n), "part {p} of {n} states");
        }
        assert!(entries.iter().all(|&(fp, m)| t.mask_of(EIGHT.of(fp)) == Some(m)));
        assert_eq!(t.moved.load(Ordering::Relaxed), 0);
        let one = Table::new(EIGHT);
        one.visit(7, 0);
        one.admit_all(&entries);
        assert!(one.moved.load(Ordering::Relaxed) > entries.len(), "{}", one.moved.load(Ordering::Relaxed));
    }

    /// Visitors (and one visit through the mutexes) at once, while every
    /// part grows: each state is new to exactly one visit, every mask ends as
    /// the intersection of all, and the count is exact once the visitors
    /// are gone.
    #[test]
    fn visitors_admit_each_state_once_while_parts_grow() {
        const N: u64 = 800_000;
        let t = Table::new(EIGHT);
        let firsts = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for w in 0..4u64 {
                let (t, firsts) = (&t, &firsts);
                s.spawn(move || {
                    let mut me = t.visitor();
                    // Each worker in its own order (a stride prime to N), so
                    // that they meet mid-growth.
                    for i in 0..N {
                        let h = (((i * [1, 3, 7, 9][w as usize]) % N).wrapping_mul(0xd6e8_feb8_6659_fd93) | 1).into();
                        let mask = 0xffff & !(1 << w);
                        let left = if w == 3 { t.visit(h, mask).0 } else { me.visit(h, mask).0 };
                        if left == Some(mask) {
                            firsts.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert!(t.bytes() > first_bytes(), "the parts grew");
        assert_eq!(t.len(), N as usize);
        assert_eq!(firsts.load(Ordering::Relaxed), N as usize);
        for i in 0..N {
            assert_eq!(t.mask_of(EIGHT.of((i.wrapping_mul(0xd6e8_feb8_6659_fd93) | 1).into())), Some(0xfff0));
        }
    }

    /// A visitor past the table's flags visits through the mutexes, with
    /// the same answers.
    #[test]
    fn visitors_past_the_flags_still_visit() {
        let t = Table::new(EIGHT);
        let all: Vec<_> = (0..VISITORS + 1).map(|_| t.visitor()).collect();
        assert!(all[VISITORS].flag.is_none() && all[0].flag.is_some());
        let mut all = all;
        assert_eq!(all[VISITORS].visit(7, 3).0, Some(3));
        assert_eq!(all[0].visit(7, 1).0, Some(!2));
        drop(all);
        assert_eq!((t.len(), t.visitor().flag), (1, Some(0)));
    }

    /// The changes a saving search records survive growth, and each drain
    /// returns what was added or narrowed since the last, with its mask now.
    #[test]
    fn recorded_changes_are_what_was_added_or_narrowed_since_the_last_drain() {
        let mut t = Table::new(EIGHT);
        t.record_changes();
        let fp = |k: u64| EIGHT.of(k.wrapping_mul(0x9e37_79b9_7f4a_7c15).into());
        for k in 0..1_300_000 {
            t.visit(fp(k), 0xff);
        }
        assert!(t.bytes() > first_bytes(), "the parts grew");
        assert_eq!(t.drain_changes(true).len(), 1_300_000, "every state added, through the growths");
        // 1,000 narrowed, 1,000 revisited with no change, 1,000 new.
        for k in 0..1000 {
            t.visit(fp(k), 0x0f);
            t.visit(fp(1000 + k), 0xff);
            t.visit(fp(1_300_000 + k), 0x3);
        }
        let mut got = t.drain_changes(true);
        got.sort_unstable();
        let mut want: Vec<_> =
            (0..1000).map(|k| (fp(k), 0x0f)).chain((0..1000).map(|k| (fp(1_300_000 + k), 0x3))).collect();
        want.sort_unstable();
        assert_eq!(got, want);
        assert!(t.drain_changes(true).is_empty());
    }

    /// Past its first growths a table takes at most 10 bytes a state at
    /// every size (the parts grow one after another, a quarter at a time),
    /// and every state is still found with its mask.
    #[test]
    fn a_grown_table_takes_ten_bytes_a_state_or_less() {
        let t = Table::new(EIGHT);
        let mut x = 0x853c_49e6_748f_ea9bu64;
        let mut seen = Vec::new();
        for n in 1..=3_000_000u64 {
            let state = EIGHT.of(next(&mut x).into());
            t.visit(state, n & 0xff);
            if n % 250_000 == 0 && n >= 1_500_000 {
                seen.push((n, t.bytes() as f64 / t.len() as f64));
            }
        }
        assert_eq!(t.len(), 3_000_000, "no two of these hashes agree on 60 bits");
        assert!(seen.iter().all(|&(_, b)| b <= 10.0), "bytes a state: {seen:?}");
        let mut y = 0x853c_49e6_748f_ea9bu64;
        for n in 1..=3_000_000u64 {
            assert_eq!(t.mask_of(EIGHT.of(next(&mut y).into())), Some(n & 0xff), "state {n}");
        }
    }

    /// A check of 2 CPUs keeps 72 bits of the state's hash, one of 6 keeps
    /// 64 and one of 8 its low 60: two hashes apart only at bit 71 are two
    /// states to the first and one to the others, two apart only at bit 72
    /// one state to all; each keeps them through growth and a save read
    /// back.
    #[test]
    fn a_fingerprint_keeps_the_bits_its_slots_have_room_for() {
        let two = Fingerprints::for_cpus(2);
        assert_eq!((two.bits(), Fingerprints::for_cpus(5).bits(), Fingerprints::for_cpus(6).bits()), (72, 66, 64));
        assert_eq!((Fingerprints::for_cpus(7).bits(), EIGHT.bits()), (62, 60));
        for (fp, apart) in [(two, true), (EIGHT, false)] {
            let t = Table::new(fp);
            let low = |s: u64| u128::from(s.wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 0x5a << 64;
            for s in 1..1_300_000u64 {
                t.visit(low(s) | 1 << 71, s & 0x3);
            }
            assert!(t.bytes() > first_bytes(), "the parts grew");
            let n = t.len();
            let mut w = Writer::default();
            t.save(&mut w);
            let back = Table::new(fp);
            back.admit_all(&Table::read_entries(&mut Reader::new(&w.0)).expect("its own save"));
            for s in 1..1_300_000u64 {
                assert_eq!(back.mask_of(fp.of(low(s) | 1 << 71)), Some(s & 0x3), "{fp:?}");
                assert_eq!(back.mask_of(fp.of(low(s) | 1 << 71 | 1 << 72)), Some(s & 0x3), "{fp:?}, past its bits");
                let kept = back.mask_of(fp.of(low(s)));
                assert_eq!(kept, if apart { None } else { Some(s & 0x3) }, "{fp:?}, state {s}");
                back.visit(low(s), 0);
            }
            assert_eq!(back.len(), if apart { 2 * n } else { n });
        }
    }

    /// A check without store buffers keeps a bit a CPU for its mask, so
    /// its fingerprints are wider from four CPUs on (68 bits at 8 where a
    /// check with buffers keeps 60); the table still takes and gives masks
    /// of step labels (`2c`), through growth and a save read back, and
    /// answers as the reference does.
    #[test]
    fn a_check_without_store_buffers_keeps_steps_alone_in_its_masks() {
        let steps = Fingerprints::for_steps(8);
        assert_eq!((Fingerprints::for_steps(2).bits(), Fingerprints::for_steps(4).bits(), steps.bits()), (72, 72, 68));
        for m in 0..=0xffu64 {
            let labels = (0..8).filter(|c| m & 1 << c != 0).fold(0, |l, c| l | 1 << (2 * c));
            assert_eq!((steps.squeeze(labels), steps.spread(m)), (m, labels));
        }
        let t = Table::new(steps);
        let mut v = std::collections::HashMap::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for i in 0..300_000u64 {
            let h = next(&mut x);
            let state = steps.of(u128::from(h) | u128::from(h.rotate_left(23)) << 64);
            let asleep = (h >> 40) & 0x5555;
            assert_eq!(t.visit(state, asleep).0, reference(&mut v, state, asleep), "visit {i}");
        }
        let mut w = Writer::default();
        t.save(&mut w);
        let back = Table::new(steps);
        back.admit_all(&Table::read_entries(&mut Reader::new(&w.0)).expect("its own save"));
        assert!(v.iter().all(|(&state, &m)| back.mask_of(state) == Some(m)));
    }

    /// What [`pack`] packs, [`unpack`] gives back (a state's bits past
    /// [`MOST_BITS`] dropped), and words with bits past those are refused.
    #[test]
    fn a_packed_state_and_mask_unpack_to_themselves() {
        let state = 0xabcd_u128 << 96 | 0xc3 << 64 | 0x0123_4567_89ab_cdef;
        assert_eq!(unpack(pack(state, 0xffff)), Ok((state & ((1 << MOST_BITS) - 1), 0xffff)));
        assert_eq!(unpack(pack(7, 0)), Ok((7, 0)));
        assert!(unpack([0, 1 << (ABOVE_MASK + 8)]).is_err());
    }
}
