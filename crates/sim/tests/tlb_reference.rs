//! The TLB against a plain reference: random sequences of the operations the
//! simulator makes (lookups, fills, each kind of invalidation, walk-cache
//! lookups and fills, sweeps, the queries of 64 KB entries) go through the
//! real [`Tlb`] and through [`RefTlb`], a vector of entries with timestamps and
//! a linear scan, written from the semantics alone. Every answer must agree,
//! and after every operation so must every entry held, in every slot's order:
//! an eviction of another entry than the reference's shows there.
//!
//! The real TLB keeps much that the reference does not (key mirrors and
//! indexes, summaries, L1 copies a sweep owes or parks, runs of pages whose
//! stamps are one number: see `crates/sim/src/tlb/mod.rs`). None of it may
//! change an answer, and this is where that is checked from the outside, with
//! nothing but the public API.
//!
//! Random cases are evidence, not a proof. The seed is fixed, so a run is
//! repeatable; `PROPTEST_RNG_SEED=<n>` draws other cases and
//! `PROPTEST_CASES=<n>` more of them. A failure prints the shrunk sequence of
//! operations.

use proptest::prelude::*;
use proptest::test_runner::{contextualize_config, RngSeed, TestRunner};
use tlbkit_sim::tlb::TableRef;
use tlbkit_sim::tlb::{block_bucket, thread_of, thread_va, Hit, Inval, SweepRule, Tlb, TlbEntry};
use tlbkit_sim::tlb::{F_CONT, F_DIRTY, F_GLOBAL, F_HUGE, F_WRITE};

/// A slot of the reference's caches: what it holds and when it was last used
/// (the reference clock's tick of its last fill or hit).
#[derive(Clone, Copy)]
struct Slot<T> {
    held: Option<T>,
    used: u64,
}

/// Returns `n` empty slots, never used.
fn slots<T: Clone>(n: usize) -> Vec<Slot<T>> {
    vec![Slot { held: None, used: 0 }; n]
}

/// Returns the slot a fill takes when it replaces no duplicate: the first
/// empty one, else the least recently used.
fn victim<T>(slots: &[Slot<T>]) -> usize {
    slots.iter().position(|s| s.held.is_none()).unwrap_or_else(|| {
        // `min_by_key` returns the first of equals; the ticks are distinct anyway.
        (0..slots.len()).min_by_key(|&i| slots[i].used).expect("a cache with slots")
    })
}

/// A cached level-2 descriptor: its 2 MB block, ASID, whether a kernel
/// (global) walk, the table it points at and the address space walked.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Walk {
    block: u64,
    asid: u16,
    global: bool,
    table: TableRef,
    mm_uid: u32,
}

/// Returns whether `e` covers `va` (whatever its size) and is usable under `asid`.
fn hits(e: &TlbEntry, va: u64, asid: u16) -> bool {
    e.tag == va >> e.shift() && (e.global() || e.asid == asid)
}

/// Returns whether two entries are the same translation: tag, size, ASID and
/// globalness (a fill replaces such a duplicate in place).
fn same(a: &TlbEntry, b: &TlbEntry) -> bool {
    a.tag == b.tag && a.shift() == b.shift() && a.asid == b.asid && a.global() == b.global()
}

/// Returns whether invalidation `op` removes an entry of `asid` (or a global
/// one) filled by hardware thread `thread` of a core whose threads share the
/// TLB, `covers` saying whether the entry covers an address.
fn removes(op: Inval, covers: impl Fn(u64) -> bool, asid: u16, global: bool, thread: u8) -> bool {
    match op {
        Inval::Va { asid: a, va } => !global && asid == a && covers(va),
        Inval::VaAll { va } => covers(va),
        Inval::Asid(a) => !global && asid == a,
        Inval::All => true,
        Inval::AllNonGlobal => !global,
        Inval::AsidOfThread { asid: a, thread: t } => !global && asid == a && thread == t,
        Inval::Thread { thread: t, global: g } => (g || !global) && thread == t,
    }
}

/// The reference TLB: a fully associative L1, an L2 of sets of `ways` (an
/// entry in the set of its tag, modulo the sets), a walk cache; LRU everywhere.
#[derive(Clone)]
struct RefTlb {
    l1: Vec<Slot<TlbEntry>>,
    /// Set `s`, way `w` at `s * ways + w`.
    l2: Vec<Slot<TlbEntry>>,
    ways: usize,
    pwc: Vec<Slot<Walk>>,
    now: u64,
    /// Whether a 64 KB entry was filled since everything was last invalidated.
    conts: bool,
}

impl RefTlb {
    fn new(l1: usize, l2: usize, ways: usize, pwc: usize) -> Self {
        RefTlb { l1: slots(l1), l2: slots(l2), ways, pwc: slots(pwc), now: 0, conts: false }
    }

    /// Returns the L2 slots of the set of tag `tag`.
    fn set(&self, tag: u64) -> std::ops::Range<usize> {
        let s = (tag % (self.l2.len() / self.ways) as u64) as usize;
        s * self.ways..(s + 1) * self.ways
    }

    fn tick(&mut self) -> u64 {
        self.now += 1;
        self.now
    }

    /// The first L1 slot that hits; else the first way that hits in the L2
    /// set of the 4 KB, then the 64 KB, then the 2 MB tag of `va`, copied
    /// into the L1's victim.
    fn lookup(&mut self, va: u64, asid: u16) -> Option<(Hit, TlbEntry)> {
        let now = self.tick();
        if let Some(i) = self.l1.iter().position(|s| s.held.is_some_and(|e| hits(&e, va, asid))) {
            self.l1[i].used = now;
            return self.l1[i].held.map(|e| (Hit::L1(i), e));
        }
        for shift in [12, 16, 21] {
            for i in self.set(va >> shift) {
                if let Some(e) = self.l2[i].held.filter(|e| e.shift() == shift && hits(e, va, asid)) {
                    self.l2[i].used = now;
                    let v = victim(&self.l1);
                    self.l1[v] = Slot { held: Some(e), used: now };
                    return Some((Hit::L2(i), e));
                }
            }
        }
        None
    }

    /// Into the L2 set of its tag (a duplicate's way, else the victim) and,
    /// unless speculative, the L1 (the same).
    fn fill(&mut self, mut e: TlbEntry, speculative: bool) {
        let now = self.tick();
        e.valid = true;
        self.conts |= e.cont();
        let set = self.set(e.tag);
        let ways = &self.l2[set.clone()];
        let w = ways.iter().position(|s| s.held.is_some_and(|d| same(&d, &e))).unwrap_or_else(|| victim(ways));
        self.l2[set.start + w] = Slot { held: Some(e), used: now };
        if !speculative {
            let i =
                self.l1.iter().position(|s| s.held.is_some_and(|d| same(&d, &e))).unwrap_or_else(|| victim(&self.l1));
            self.l1[i] = Slot { held: Some(e), used: now };
        }
    }

    /// Removes what `op` names from every level; returns how many TLB entries went.
    fn invalidate(&mut self, op: Inval) -> usize {
        let mut n = 0;
        for s in self.l1.iter_mut().chain(self.l2.iter_mut()) {
            let gone = |e: TlbEntry| removes(op, |va| e.tag == va >> e.shift(), e.asid, e.global(), thread_of(e.va()));
            if s.held.is_some_and(gone) {
                s.held = None;
                n += 1;
            }
        }
        for s in &mut self.pwc {
            if s.held.is_some_and(|w| removes(op, |va| w.block == va >> 21, w.asid, w.global, thread_of(w.block << 21)))
            {
                s.held = None;
            }
        }
        if matches!(op, Inval::All) {
            self.conts = false;
        }
        n
    }

    fn pwc_lookup(&mut self, va: u64, asid: u16, global: bool) -> bool {
        let now = self.tick();
        let hit = |w: &Walk| w.block == va >> 21 && w.global == global && (global || w.asid == asid);
        let Some(i) = self.pwc.iter().position(|s| s.held.is_some_and(|w| hit(&w))) else {
            return false;
        };
        self.pwc[i].used = now;
        true
    }

    fn pwc_fill(&mut self, w: Walk) {
        if !self.pwc.is_empty() {
            let (now, v) = (self.tick(), victim(&self.pwc));
            self.pwc[v] = Slot { held: Some(w), used: now };
        }
    }

    /// The valid 64 KB entries covering `va` usable under `asid`, L1 then L2.
    fn cont_entries(&self, va: u64, asid: u16) -> Vec<TlbEntry> {
        let l2 = &self.l2[self.set(va >> 16)];
        self.l1.iter().chain(l2).filter_map(|s| s.held.filter(|e| e.cont() && hits(e, va, asid))).collect()
    }

    fn set_cont_dirty(&mut self, va: u64, asid: u16) {
        for s in self.l1.iter_mut().chain(self.l2.iter_mut()) {
            if let Some(e) = s.held.as_mut().filter(|e| e.cont() && hits(e, va, asid)) {
                e.flags |= F_DIRTY;
            }
        }
    }

    /// The entries that overlap `e` with the other of the sizes 4 KB and 64 KB,
    /// under the same ASID or both global (none for a 4 KB `e` while no 64 KB
    /// entry may be held).
    fn overlaps(&self, e: &TlbEntry) -> Vec<TlbEntry> {
        if e.flags & F_HUGE != 0 || !(self.conts || e.cont()) {
            return Vec::new();
        }
        let tagged = |w: &TlbEntry| w.global() == e.global() && (e.global() || w.asid == e.asid);
        let (small, big) = if e.cont() { (None, Some(e.tag)) } else { (Some(e.tag), None) };
        let overlap = |w: &TlbEntry| match (w.shift(), small, big) {
            (12, None, Some(b)) => w.tag >> 4 == b,
            (16, Some(p), None) => w.tag == p >> 4,
            _ => false,
        };
        self.entries().into_iter().filter(|w| tagged(w) && overlap(w)).collect()
    }

    /// Every entry held, the L1's in slot order, then the L2's.
    fn entries(&self) -> Vec<TlbEntry> {
        self.l1.iter().chain(&self.l2).filter_map(|s| s.held).collect()
    }

    fn walks(&self) -> Vec<Walk> {
        self.pwc.iter().filter_map(|s| s.held).collect()
    }
}

/// What is compared of an entry: every field.
type Fields = (u64, u64, u16, u8, bool, u32, u64, u32);

fn fields(e: &TlbEntry) -> Fields {
    (e.tag, e.pfn, e.asid, e.flags, e.valid, e.mm_uid, e.ver, e.pte)
}

/// The ASIDs the cases use: 257 shares ASID 1's bucket of the exact counts,
/// 4097 its bit of the filter.
const ASIDS: [u16; 4] = [1, 2, 257, 4097];

/// Pages `0..USER_PAGES` run from 256 KB below a 2 MB boundary; the rest are
/// in a distant region (kernel-like addresses).
const USER_PAGES: u16 = 192;
const PAGES: u16 = 256;

fn va_of(page: u16) -> u64 {
    if page < USER_PAGES {
        0x4000_0000 - (64 << 12) + ((page as u64) << 12)
    } else {
        0xffff_0000_0000_0000 + (((page - USER_PAGES) as u64) << 12)
    }
}

/// The size of a filled entry.
#[derive(Clone, Copy, Debug)]
enum Size {
    Small,
    Cont,
    Huge,
}

/// Where a sweep starts.
#[derive(Clone, Copy, Debug)]
enum Start {
    Page(u16),
    /// The page after the last sweep or general-path page, under its ASID: a
    /// touch's next chunk.
    Next,
}

/// The ground truth and permission of a filled entry: the address space it
/// came from, its PTE version, whether it allows writes.
#[derive(Clone, Copy, Debug)]
struct Truth {
    uid: u32,
    ver: u64,
    write: bool,
}

#[derive(Clone, Debug)]
enum Op {
    Lookup {
        page: u16,
        asid: u16,
    },
    Fill {
        page: u16,
        asid: u16,
        size: Size,
        global: bool,
        truth: Truth,
        speculative: bool,
    },
    /// 4 KB fills of `n` pages from `page`: a buffer for sweeps to read.
    FillPages {
        page: u16,
        n: u16,
        asid: u16,
        truth: Truth,
        speculative: bool,
    },
    Sweep {
        start: Start,
        pages: u64,
        asid: u16,
        uid: u32,
        min_ver: u64,
        write: bool,
    },
    /// A loop over a buffer of `chunks` chunks of `chunk` pages from `page`,
    /// `times` times over, touching chunk by chunk (the simulator's workloads
    /// touch 64 pages at a time): from the second time on, a read sweeps runs
    /// it swept before whole.
    Loop {
        page: u16,
        chunk: u64,
        chunks: u64,
        times: u64,
        asid: u16,
        truth: Truth,
        write: bool,
    },
    /// The simulator's touch of `pages` pages (at most a chunk, 64) from `page`:
    /// sweeps, and the general path where they stop.
    Touch {
        page: u16,
        pages: u64,
        asid: u16,
        truth: Truth,
        min_ver: u64,
        write: bool,
    },
    /// The simulator's general path at the page a sweep stopped before (or
    /// under another ASID): a lookup and, on a miss, the walk's fill (or the
    /// fill alone, which the simulator never makes, but a fill must not rely on).
    Next {
        other_asid: bool,
        fill_only: bool,
        global: bool,
        truth: Truth,
        speculative: bool,
    },
    Invalidate {
        kind: u8,
        page: u16,
        asid: u16,
    },
    PwcLookup {
        page: u16,
        asid: u16,
        global: bool,
    },
    PwcFill {
        page: u16,
        asid: u16,
        global: bool,
    },
    ContEntries {
        page: u16,
        asid: u16,
    },
    ContDirty {
        page: u16,
        asid: u16,
    },
    Overlap {
        page: u16,
        asid: u16,
        cont: bool,
        global: bool,
    },
    Settle,
    /// A lookup or a fill by the other hardware thread of a core whose
    /// threads share the TLB: at the page's address as that thread's entries
    /// are keyed (`tlbkit_sim::tlb::ThreadTlb`), competing for the same slots.
    Sibling {
        page: u16,
        asid: u16,
        fill: bool,
        global: bool,
        truth: Truth,
        speculative: bool,
    },
}

fn entry(va: u64, asid: u16, size: Size, global: bool, t: Truth, serial: usize) -> TlbEntry {
    let flags = match size {
        Size::Small => 0,
        Size::Cont => F_CONT,
        Size::Huge => F_HUGE,
    } | if global { F_GLOBAL } else { 0 }
        | if t.write { F_WRITE } else { 0 };
    let mut e = TlbEntry {
        pfn: serial as u64,
        asid,
        flags,
        mm_uid: t.uid,
        ver: t.ver,
        pte: serial as u32,
        ..Default::default()
    };
    e.tag = va >> e.shift();
    e
}

fn accepts(rule: &SweepRule, e: &TlbEntry) -> bool {
    e.shift() == 12 && e.mm_uid == rule.uid && e.ver >= rule.min_ver && (!rule.write || e.flags & F_WRITE != 0)
}

/// The pages (4 KB page numbers, with the ASID they are usable under or
/// `None` for global entries) the reference's L1 has held since the real TLB
/// last settled. A sweep checks pages against the L1 as its run of copies
/// owed found it, and counts a copy parked there held whatever its ASID, so
/// it may stop at one of these where the reference would go on (which
/// changes no answer: the general path then looks the page up).
#[derive(Default)]
struct Seen(std::collections::BTreeSet<(u64, u64, Option<u16>)>);

impl Seen {
    fn note(&mut self, m: &RefTlb) {
        for e in m.l1.iter().filter_map(|s| s.held) {
            let first = e.tag << (e.shift() - 12);
            self.0.insert((first, 1 << (e.shift() - 12), (!e.global()).then_some(e.asid)));
        }
    }

    /// Returns whether the L1 held an entry of `page` usable under `asid`, or
    /// a 4 KB entry of `page` under any ASID.
    fn held(&self, page: u64, asid: u16) -> bool {
        self.0.iter().any(|&(first, n, a)| page.wrapping_sub(first) < n && (n == 1 || a.is_none_or(|a| a == asid)))
    }
}

/// How much of what the cases are for they reached, over all cases.
#[derive(Debug, Default)]
struct Reached {
    /// Pages sweeps translated.
    swept: u64,
    /// Read sweeps that took a run of pages swept before whole (they name no
    /// entry of its pages to `used`).
    whole: u64,
    /// Sweeps whose copies replaced the whole L1 (then parked).
    outgrew: u64,
    /// Sweeps that went on from the page after the last (a touch's next chunk).
    went_on: u64,
    /// Lookups of the page a sweep stopped before that hit the L2 under its ASID.
    next_hits: u64,
    /// Sweeps that stopped at a page the L1 held since the last settle, where
    /// the reference would have gone on.
    held_stops: u64,
}

impl Reached {
    fn add(&mut self, r: &Reached) {
        self.swept += r.swept;
        self.whole += r.whole;
        self.outgrew += r.outgrew;
        self.went_on += r.went_on;
        self.next_hits += r.next_hits;
        self.held_stops += r.held_stops;
    }
}

/// The real TLB and the reference, driven together.
struct Pair {
    real: Tlb,
    model: RefTlb,
    seen: Seen,
    /// The page after the last sweep or general-path page, and its ASID.
    next: Option<(u64, u16)>,
    step: usize,
    reached: Reached,
}

impl Pair {
    fn lookup(&mut self, va: u64, asid: u16) -> Result<Option<(Hit, TlbEntry)>, TestCaseError> {
        let (r, m) = (self.real.lookup_entry(va, asid), self.model.lookup(va, asid));
        let step = self.step;
        prop_assert_eq!(r.map(|(h, e)| (h, fields(&e))), m.map(|(h, e)| (h, fields(&e))), "step {}: {:#x}", step, va);
        if let Some((h, e)) = r {
            let mut settled = self.real.clone();
            settled.settle();
            prop_assert_eq!(fields(settled.entry(h)), fields(&e), "step {}: the entry of {:?}", step, h);
        }
        Ok(r)
    }

    fn fill(&mut self, e: TlbEntry, speculative: bool) {
        self.real.fill(e, speculative);
        self.model.fill(e, speculative);
    }

    /// The simulator's general path for a page: a lookup and, on a miss, the
    /// walk (through the walk cache) and the fill.
    fn access(&mut self, va: u64, asid: u16, truth: Truth) -> Result<(), TestCaseError> {
        if self.lookup(va, asid)?.is_none() {
            let step = self.step;
            prop_assert_eq!(
                self.real.pwc_lookup(va, asid, false),
                self.model.pwc_lookup(va, asid, false),
                "step {}",
                step
            );
            self.fill(entry(va, asid, Size::Small, false, truth, step), false);
            let table = TableRef { chunk: (va >> 21) as u32, gen: 0 };
            self.real.pwc_fill(va, asid, false, table, truth.uid);
            self.model.pwc_fill(Walk { block: va >> 21, asid, global: false, table, mm_uid: truth.uid });
        }
        self.next = Some(((va >> 12) + 1, asid));
        Ok(())
    }

    /// The simulator's touch of `pages` pages from `first`: a sweep while two
    /// pages or more are left, the general path for the page it stopped at.
    fn touch(&mut self, first: u64, pages: u64, rule: SweepRule, truth: Truth) -> Result<(), TestCaseError> {
        let mut i = 0;
        while i < pages {
            if pages - i > 1 {
                i += self.sweep(first + (i << 12), pages - i, rule)?;
                if i == pages {
                    break;
                }
            }
            self.access(first + (i << 12), rule.asid, truth)?;
            i += 1;
        }
        Ok(())
    }

    /// A sweep of up to `pages` pages from `first` under `rule`, checked against
    /// the reference's lookups one by one; returns the pages swept.
    fn sweep(&mut self, first: u64, pages: u64, rule: SweepRule) -> Result<u64, TestCaseError> {
        let (step, l1) = (self.step, self.model.l1.len() as u64);
        self.seen.note(&self.model);
        let mut used = Vec::new();
        let done = self.real.sweep(first, pages, &rule, |e| used.push(fields(e)));
        prop_assert!(done <= pages && (done == 0 || !self.model.conts), "step {}: swept {}", step, done);
        let mut took = Vec::new();
        for i in 0..done {
            let hit = self.model.lookup(first + (i << 12), rule.asid);
            let ok = matches!(hit, Some((Hit::L2(_), e)) if accepts(&rule, &e));
            prop_assert!(ok, "step {}: page {} swept under {:?}, but one by one: {:?}", step, i, rule, hit);
            took.extend(hit.map(|(_, e)| fields(&e)));
        }
        // A write's sweep names every entry it uses; a read's skips the runs it takes whole.
        let mut rest = took.iter();
        prop_assert!(used.iter().all(|u| rest.any(|t| t == u)), "step {}: used {:?} of {:?}", step, used, took);
        prop_assert!(!rule.write || used.len() == took.len(), "step {}: a write used {:?}", step, used);
        let reached = &mut self.reached;
        reached.swept += done;
        reached.whole += (used.len() < took.len()) as u64;
        reached.outgrew += (done >= l1) as u64;
        reached.went_on += (self.next == Some((first >> 12, rule.asid)) && done > 0) as u64;
        if done < pages && !self.model.conts {
            let va = first + (done << 12);
            let hit = self.model.clone().lookup(va, rule.asid);
            let goes_on = matches!(hit, Some((Hit::L2(_), e)) if accepts(&rule, &e));
            let held = self.seen.held(va >> 12, rule.asid);
            prop_assert!(!goes_on || held, "step {}: stopped at {:#x}, which one by one is {:?}", step, va, hit);
            self.reached.held_stops += goes_on as u64;
        }
        self.next = Some(((first >> 12) + done, rule.asid));
        Ok(done)
    }
}

/// Runs `ops` through a real TLB and the reference of the same geometry.
/// Returns what they reached.
fn check(g: (usize, usize, usize, usize), ops: &[Op]) -> Result<Reached, TestCaseError> {
    let (l1, sets, ways, pwc) = g;
    let (real, model) = (Tlb::new(l1, sets * ways, ways, pwc), RefTlb::new(l1, sets * ways, ways, pwc));
    let mut t = Pair { real, model, seen: Seen::default(), next: None, step: 0, reached: Reached::default() };
    for (step, op) in ops.iter().enumerate() {
        t.step = step;
        t.seen.note(&t.model);
        match *op {
            Op::Lookup { page, asid } => {
                t.lookup(va_of(page), asid)?;
            }
            Op::Fill { page, asid, size, global, truth, speculative } => {
                t.fill(entry(va_of(page), asid, size, global, truth, step), speculative);
            }
            Op::FillPages { page, n, asid, truth, speculative } => {
                for p in page..(page + n).min(PAGES) {
                    t.fill(entry(va_of(p), asid, Size::Small, false, truth, step), speculative);
                }
            }
            Op::Sweep { start, pages, asid, uid, min_ver, write } => {
                let (first, asid) = match (start, t.next) {
                    (Start::Next, Some((p, a))) => (p << 12, a),
                    (Start::Page(p), _) => (va_of(p), asid),
                    (Start::Next, None) => (va_of(0), asid),
                };
                t.sweep(first, pages, SweepRule { asid, uid, min_ver, write })?;
            }
            Op::Touch { page, pages, asid, truth, min_ver, write } => {
                t.touch(va_of(page), pages, SweepRule { asid, uid: truth.uid, min_ver, write }, truth)?;
            }
            Op::Loop { page, chunk, chunks, times, asid, truth, write } => {
                let rule = SweepRule { asid, uid: truth.uid, min_ver: 0, write };
                for _ in 0..times {
                    for c in 0..chunks {
                        t.touch(va_of(page) + ((c * chunk) << 12), chunk, rule, truth)?;
                    }
                }
            }
            Op::Next { other_asid, fill_only, global, truth, speculative } => {
                let Some((page, a)) = t.next else { continue };
                let asid =
                    if other_asid { ASIDS[(ASIDS.iter().position(|&x| x == a).unwrap_or(0) + 1) % 4] } else { a };
                let va = page << 12;
                let hit = if fill_only { None } else { t.lookup(va, asid)? };
                t.reached.next_hits += (!other_asid && matches!(hit, Some((Hit::L2(_), _)))) as u64;
                if hit.is_none() {
                    t.fill(entry(va, asid, Size::Small, global, truth, step), speculative);
                }
                t.next = Some((page + 1, a));
            }
            Op::Invalidate { kind, page, asid } => {
                let va = va_of(page);
                let op = match kind % 20 {
                    0..=5 => Inval::Va { asid, va },
                    6..=8 => Inval::VaAll { va },
                    9..=12 => Inval::Asid(asid),
                    13 | 14 => Inval::AllNonGlobal,
                    15 => Inval::All,
                    // A sibling thread's (`Op::Sibling`), by its addresses or narrowed to it.
                    16 => Inval::Va { asid, va: thread_va(va, 1) },
                    17 => Inval::AsidOfThread { asid, thread: kind / 20 % 2 },
                    18 => Inval::Thread { thread: kind / 20 % 2, global: false },
                    _ => Inval::Thread { thread: kind / 20 % 2, global: true },
                };
                let mut dry = t.model.clone();
                let removes = dry.invalidate(op) > 0 || dry.walks() != t.model.walks();
                prop_assert!(!removes || t.real.may_hold_any(op), "step {}: {:?} would remove something", step, op);
                prop_assert_eq!(t.real.invalidate(op), t.model.invalidate(op), "step {}: {:?}", step, op);
                t.seen = Seen::default();
            }
            Op::PwcLookup { page, asid, global } => {
                let va = va_of(page);
                let (r, m) = (t.real.pwc_lookup(va, asid, global), t.model.pwc_lookup(va, asid, global));
                prop_assert_eq!(r, m, "step {}", step);
            }
            Op::PwcFill { page, asid, global } => {
                let (va, table) = (va_of(page), TableRef { chunk: step as u32, gen: page as u32 });
                t.real.pwc_fill(va, asid, global, table, 1);
                t.model.pwc_fill(Walk { block: va >> 21, asid, global, table, mm_uid: 1 });
            }
            Op::ContEntries { page, asid } => {
                let r: Vec<_> = t.real.cont_entries(va_of(page), asid).map(fields).collect();
                let m: Vec<_> = t.model.cont_entries(va_of(page), asid).iter().map(fields).collect();
                prop_assert_eq!(r, m, "step {}", step);
            }
            Op::ContDirty { page, asid } => {
                t.real.set_cont_dirty(va_of(page), asid);
                t.model.set_cont_dirty(va_of(page), asid);
                t.seen = Seen::default();
            }
            Op::Overlap { page, asid, cont, global } => {
                let size = if cont { Size::Cont } else { Size::Small };
                let e = entry(va_of(page), asid, size, global, Truth { uid: 1, ver: 0, write: false }, step);
                let (r, m) = (t.real.overlap(&e).map(|e| fields(&e)), t.model.overlaps(&e));
                let ok = r.map_or(m.is_empty(), |r| m.iter().any(|w| fields(w) == r));
                prop_assert!(ok, "step {}: overlap of {:?}: {:?}, the reference's {:?}", step, e, r, m);
                t.seen = Seen::default();
            }
            Op::Settle => {
                t.real.settle();
                t.seen = Seen::default();
            }
            Op::Sibling { page, asid, fill, global, truth, speculative } => {
                let va = thread_va(va_of(page), 1);
                if fill {
                    t.fill(entry(va, asid, Size::Small, global, truth, step), speculative);
                } else {
                    t.lookup(va, asid)?;
                }
            }
        }
        compare(&t.real, &t.model, step, op)?;
    }
    Ok(t.reached)
}

/// Compares everything held, and the summaries against what is held.
fn compare(real: &Tlb, model: &RefTlb, step: usize, op: &Op) -> Result<(), TestCaseError> {
    let mut settled = real.clone();
    let mut held = Vec::new();
    settled.for_each(|e| held.push(fields(e)));
    let want: Vec<_> = model.entries().iter().map(fields).collect();
    prop_assert_eq!(held, want, "step {}: the entries held after {:?}", step, op);
    let mut walks = Vec::new();
    real.for_each_walk(|w| {
        walks.push(Walk { block: w.va >> 21, asid: w.asid, global: w.global, table: w.table, mm_uid: w.mm_uid })
    });
    prop_assert_eq!(walks, model.walks(), "step {}: the walk cache after {:?}", step, op);
    prop_assert_eq!(real.may_hold_cont(), model.conts, "step {}", step);
    // (ASID, global, block) of everything held, at every level.
    let all: Vec<(u16, bool, u64)> = (model.entries().iter().map(|e| (e.asid, e.global(), e.tag >> (21 - e.shift()))))
        .chain(model.walks().iter().map(|w| (w.asid, w.global, w.block)))
        .collect();
    for asid in ASIDS {
        let holds = all.iter().any(|&(a, g, _)| !g && a == asid);
        prop_assert!(!holds || real.may_hold(asid), "step {}: ASID {} held but filtered out", step, asid);
    }
    let blocks = all.iter().map(|a| a.2).chain([va_of(0) >> 21, va_of(USER_PAGES - 1) >> 21, va_of(PAGES - 1) >> 21]);
    for block in blocks {
        let bucket = all.iter().any(|a| block_bucket(a.2) == block_bucket(block));
        prop_assert!(
            !bucket || real.may_hold_block(block << 21),
            "step {}: block {:#x} held but not counted",
            step,
            block
        );
        prop_assert_eq!(
            settled.may_hold_block(block << 21),
            bucket,
            "step {}: block {:#x}'s count, settled",
            step,
            block
        );
    }
    Ok(())
}

/// Mostly ASID 1, as a process's loop over its buffers runs under one.
fn asid() -> impl Strategy<Value = u16> {
    prop::sample::select(vec![1, 1, 1, 1, 1, 1, 2, 2, ASIDS[2], ASIDS[3]])
}

fn page() -> impl Strategy<Value = u16> {
    0..PAGES
}

/// Mostly one of a few buffers' first pages, as a loop over the same pages
/// makes its sweeps; the buffers overlap a 2 MB boundary (page 64).
fn buffer() -> impl Strategy<Value = u16> {
    prop_oneof![3 => prop::sample::select(vec![0u16, 16, 32, 48, 64, 100]), 1 => page()]
}

fn truth() -> impl Strategy<Value = Truth> {
    // Mostly the address space sweeps run for, new enough and writable.
    (prop::sample::select(vec![1u32, 1, 1, 1, 1, 1, 1, 1, 1, 2]), 0..4u64, prop::bool::weighted(0.8))
        .prop_map(|(uid, ver, write)| Truth { uid, ver, write })
}

/// One operation; `conts`: whether 64 KB entries are filled (a sweep
/// translates nothing while one may be held, so most cases fill none).
fn op(conts: bool) -> impl Strategy<Value = Op> {
    let size = prop_oneof![30 => Just(Size::Small), 8 => Just(Size::Huge), 1 => Just(if conts { Size::Cont } else { Size::Small })];
    let start = prop_oneof![2 => buffer().prop_map(Start::Page), 1 => Just(Start::Next)];
    // As many pages as a touch's chunk at most.
    let pages = prop_oneof![prop::sample::select(vec![16u64, 24, 32, 48, 64]), 1..=64u64];
    let min_ver = prop::sample::select(vec![0u64, 0, 0, 2]);
    let many = prop_oneof![prop::sample::select(vec![16u16, 32, 64]), 1..=64u16];
    prop_oneof![
        16 => (page(), asid()).prop_map(|(page, asid)| Op::Lookup { page, asid }),
        12 => (page(), asid(), size, prop::bool::weighted(0.1), truth(), any::<bool>()).prop_map(
            |(page, asid, size, global, truth, speculative)| Op::Fill { page, asid, size, global, truth, speculative }
        ),
        8 => (buffer(), many, asid(), truth(), any::<bool>())
            .prop_map(|(page, n, asid, truth, speculative)| Op::FillPages { page, n, asid, truth, speculative }),
        12 => (start, pages.clone(), asid(), prop::sample::select(vec![1u32, 1, 1, 1, 1, 1, 1, 2]), min_ver.clone(), prop::bool::weighted(0.2))
            .prop_map(|(start, pages, asid, uid, min_ver, write)| Op::Sweep { start, pages, asid, uid, min_ver, write }),
        4 => (buffer(), prop::sample::select(vec![8u64, 16, 24, 32, 64]), 2..=4u64, 2..=3u64, asid(), truth(), prop::bool::weighted(0.1))
            .prop_map(|(page, chunk, chunks, times, asid, truth, write)| Op::Loop { page, chunk, chunks, times, asid, truth, write }),
        10 => (buffer(), pages.clone(), asid(), truth(), prop::sample::select(vec![0u64, 0, 0, 0, 2]), prop::bool::weighted(0.2))
            .prop_map(|(page, pages, asid, truth, min_ver, write)| Op::Touch { page, pages, asid, truth, min_ver, write }),
        10 => (prop::bool::weighted(0.1), prop::bool::weighted(0.1), prop::bool::weighted(0.1), truth(), prop::bool::weighted(0.2))
            .prop_map(|(other_asid, fill_only, global, truth, speculative)| Op::Next { other_asid, fill_only, global, truth, speculative }),
        8 => (any::<u8>(), page(), asid()).prop_map(|(kind, page, asid)| Op::Invalidate { kind, page, asid }),
        3 => (page(), asid(), prop::bool::weighted(0.2)).prop_map(|(page, asid, global)| Op::PwcLookup { page, asid, global }),
        3 => (page(), asid(), prop::bool::weighted(0.2)).prop_map(|(page, asid, global)| Op::PwcFill { page, asid, global }),
        1 => (page(), asid()).prop_map(|(page, asid)| Op::ContEntries { page, asid }),
        1 => (page(), asid()).prop_map(|(page, asid)| Op::ContDirty { page, asid }),
        1 => (page(), asid(), any::<bool>(), prop::bool::weighted(0.1))
            .prop_map(|(page, asid, cont, global)| Op::Overlap { page, asid, cont, global }),
        1 => Just(Op::Settle),
        4 => (page(), asid(), any::<bool>(), prop::bool::weighted(0.1), truth(), any::<bool>()).prop_map(
            |(page, asid, fill, global, truth, speculative)| Op::Sibling { page, asid, fill, global, truth, speculative }
        ),
    ]
}

/// The cases' settings: a fixed seed, no files of failures, and what the
/// environment overrides (`PROPTEST_RNG_SEED`, `PROPTEST_CASES`, …).
/// Cases of random operations.
const CASES: u32 = 256;

fn config(cases: u32) -> ProptestConfig {
    contextualize_config(ProptestConfig {
        cases,
        rng_seed: RngSeed::Fixed(0x7b1),
        failure_persistence: None,
        ..ProptestConfig::default()
    })
}

/// Every geometry the presets have and smaller ones (an L1 of one entry, a
/// direct-mapped L2, sets not a power of two, no walk cache), so that every
/// level evicts and a sweep's copies outgrow the L1; then that the cases
/// reached what they are for.
#[test]
fn the_tlb_answers_and_evicts_as_the_reference_does() {
    let geometry = (
        prop::sample::select(vec![1usize, 2, 3, 8, 16, 48, 48]),
        prop::sample::select(vec![4usize, 12, 16, 64, 64, 64]),
        prop::sample::select(vec![1usize, 2, 4, 5, 8]),
        prop::sample::select(vec![0usize, 1, 4]),
    );
    let reached = std::cell::RefCell::new(Reached::default());
    let mut runner = TestRunner::new(config(CASES));
    let ops = prop::bool::weighted(0.25).prop_flat_map(|conts| prop::collection::vec(op(conts), 1..300));
    let result = runner.run(&(geometry, ops), |((l1, sets, ways, pwc), ops)| {
        let r = check((l1, sets, ways, pwc), &ops)?;
        reached.borrow_mut().add(&r);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // The cases reached what they are for: each figure is about three times
    // these at the fixed seed, for the default count of cases.
    let share = |n: u64| n * u64::from(runner.config().cases) / u64::from(CASES);
    let r = reached.into_inner();
    let enough = r.swept > share(35_000)
        && r.whole > share(300)
        && r.outgrew > share(1_400)
        && r.went_on > share(1_400)
        && r.next_hits > share(120)
        && r.held_stops > share(150);
    assert!(enough, "the cases reached too little: {r:?}");
}
