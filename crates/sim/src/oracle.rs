//! The oracle: what counts as a stale translation, judged from ground truth the
//! policies cannot see.
//!
//! A page-table change that removes or weakens a translation (unmap, write-protect,
//! copy-on-write replacement, teardown) *opens an obligation*; the flush call the
//! kernel makes for that change *discharges* it when it returns. In between, the
//! old translation may still be used: that is the race window every kernel
//! tolerates. After it, no CPU may use it. A lazy flush (LATR: a policy that
//! took the completion of a `munmap` or `madvise(MADV_DONTNEED)` flush over
//! with `Hw::defer_flush`) discharges its obligation when the policy reports
//! it complete instead, and the kernel holds the frames it freed until then,
//! so `no_reuse_while_mapped` still guards every reuse. The properties, by name:
//!
//! - `no_stale_use`: a CPU uses a TLB entry filled before a change whose obligation
//!   is discharged.
//! - `no_asid_alias`: a CPU uses a user entry filled from another address space
//!   (a reused ASID, or a global user entry from a previous address space).
//! - `no_stale_held` (with `--strict`): a CPU merely *holds* such an entry under the
//!   tag it is running with — speculation could use it at any moment — or caches a
//!   walk through a page-table page that has been freed. Checked after every
//!   address-space switch and every discharge. A *lazy* CPU (idle or a kernel
//!   thread, a user address space still loaded: x86 Linux's `is_lazy`) is exempt
//!   for leaf entries: Linux skips lazy CPUs on purpose and brings them up to date
//!   through `tlb_gen` when they switch back, and the scan after that switch judges
//!   them. Its walk cache is not exempt: a walk through a freed table page is a
//!   violation on every CPU, lazy ones included.
//! - `no_reuse_while_mapped`: a frame is handed out again while an undischarged
//!   obligation still covers a mapping of it.
//! - `no_lost_dirty` (contiguous PTEs): data is lost. What the kernel tracks is
//!   the dirtiness of the *folio*: `zap_present_folio_ptes` marks a file folio
//!   dirty if any value it gets back for one of the folio's PTEs is dirty, and a
//!   contiguous block lies in one folio. A page of a file that a CPU wrote since
//!   it was mapped is lost when its PTE is cleared (a teardown, `munmap`,
//!   `madvise`) and no value of that operation marks its folio dirty and no valid
//!   PTE of the folio still records the write, or when, after a change to a
//!   block's access flags or permissions, no valid PTE of its folio records it
//!   any more. Only file pages are judged, the ones whose dirtiness the kernel
//!   acts on (an anonymous page is freed, dirty or not).
//! - `no_ungathered_dirty` (contiguous PTEs): a value returned for a cleared PTE
//!   of a file page is clean while its block was dirty, as `ptep_get` would have
//!   gathered it, when the PTE was exchanged. That breaks the per-PTE contract
//!   of `ptep_get_and_clear_full` (return what `ptep_get` would have reported),
//!   a weaker property than `no_lost_dirty`: another value of the same folio may
//!   still mark it dirty, and then nothing is lost.
//! - `no_tlb_conflict` (contiguous PTEs): a walk (or, under `--strict`, a write
//!   through `PteMem`) finds a contiguous block whose valid PTEs disagree in
//!   anything but the access flag, the dirty state and the write permission
//!   (Arm ARM, "Misprogramming of the Contiguous bit"); or a CPU holds a 64 KB
//!   entry and a 4 KB entry for the same page under one tag. Break-before-make is
//!   what prevents both. Write permission alone may differ while
//!   `contpte_wrprotect_ptes` write-protects a whole block in place, until its
//!   flush; a 64 KB entry a walk reads writable from such a block is stale
//!   (`no_stale_use`) once that flush has returned.

use serde::Serialize;
use std::fmt;

/// A property the oracle checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Property {
    /// Use of a translation whose removal was flushed.
    NoStaleUse,
    /// Use of another address space's translation.
    NoAsidAlias,
    /// A stale or alien entry held under the running tag (strict mode).
    NoStaleHeld,
    /// A frame reused while a not-yet-flushed mapping of it may remain.
    NoReuseWhileMapped,
    /// A written file page whose folio is never marked dirty (contiguous PTEs).
    NoLostDirty,
    /// A cleared PTE's value without its block's gathered dirty state (contiguous PTEs).
    NoUngatheredDirty,
    /// A misprogrammed contiguous block, or overlapping 64 KB and 4 KB entries.
    NoTlbConflict,
}

impl Property {
    /// Returns the property's name as the checker prints it.
    pub fn name(self) -> &'static str {
        match self {
            Property::NoStaleUse => "no_stale_use",
            Property::NoAsidAlias => "no_asid_alias",
            Property::NoStaleHeld => "no_stale_held",
            Property::NoReuseWhileMapped => "no_reuse_while_mapped",
            Property::NoLostDirty => "no_lost_dirty",
            Property::NoUngatheredDirty => "no_ungathered_dirty",
            Property::NoTlbConflict => "no_tlb_conflict",
        }
    }

    /// Returns one line saying what the property forbids (for `tlbkit list`).
    pub fn description(self) -> &'static str {
        match self {
            Property::NoStaleUse => "no CPU uses a translation after the flush for its removal or weakening returned",
            Property::NoAsidAlias => "no CPU uses a user translation filled from another address space",
            Property::NoStaleHeld => {
                "--strict: no CPU holds a stale or foreign entry under the tag it runs with (speculation could use it; \
                 a lazy CPU's leaf entries excepted), nor a walk through a freed page-table page"
            }
            Property::NoReuseWhileMapped => "no frame is reused while a not-yet-flushed mapping of it may remain",
            Property::NoLostDirty => {
                "contpte: a file page written since it was mapped has its folio marked dirty (no data lost)"
            }
            Property::NoUngatheredDirty => {
                "contpte: a cleared PTE's value carries its block's gathered dirty state (ptep_get_and_clear_full)"
            }
            Property::NoTlbConflict => {
                "contpte: no contiguous block's valid PTEs disagree, no CPU holds a 64 KB and a 4 KB entry of one page"
            }
        }
    }

    /// Every property, in the order the documentation lists them.
    pub const ALL: [Property; 7] = [
        Property::NoStaleUse,
        Property::NoAsidAlias,
        Property::NoStaleHeld,
        Property::NoReuseWhileMapped,
        Property::NoLostDirty,
        Property::NoUngatheredDirty,
        Property::NoTlbConflict,
    ];
}

/// An open or discharged duty to invalidate.
#[derive(Clone, Debug)]
pub struct Obligation {
    /// Address space (slot) of the change.
    pub mm: u32,
    /// Never-reused id of that address space.
    pub mm_uid: u32,
    /// First page of the change.
    pub va: u64,
    /// Pages covered.
    pub pages: u64,
    /// What changed ("munmap", "mprotect", "cow", ...).
    pub change: &'static str,
    /// The flush that discharges it ("flush_range", "flush_mm", ...).
    pub flush: &'static str,
    /// The change's sequence number (PTE version).
    pub seq: u64,
    /// CPU that made the change.
    pub cpu: u32,
    /// When it was opened, in cycles.
    pub opened: u64,
    /// When its flush returned, in cycles.
    pub discharged: Option<u64>,
}

/// One violation, with everything needed to understand and replay it.
#[derive(Clone, Debug, Serialize)]
pub struct Violation {
    /// The property violated.
    pub property: &'static str,
    /// The CPU that used or held the translation.
    pub cpu: u32,
    /// When, in simulated nanoseconds.
    pub time_ns: f64,
    /// The virtual address.
    pub va: String,
    /// The address space running on that CPU.
    pub mm: String,
    /// What was wrong.
    pub detail: String,
    /// The PTE change that should no longer be visible, if one applies.
    pub change: Option<String>,
    /// The flush that should have covered it, if one applies.
    pub flush: Option<String>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} on cpu{} at {:.3} us, va {} in {}: {}",
            self.property,
            self.cpu,
            self.time_ns / 1000.0,
            self.va,
            self.mm,
            self.detail
        )?;
        if let Some(c) = &self.change {
            write!(f, "; change: {c}")?;
        }
        if let Some(fl) = &self.flush {
            write!(f, "; flush that should have covered it: {fl}")?;
        }
        Ok(())
    }
}

/// The obligations and the violations found so far.
///
/// # Memory
/// A long run opens an obligation per flush, hundreds of millions of them at
/// thousands of CPUs, and almost all are soon of no use: discharged, and named
/// by no PTE's floor (a later change's replaced it) and no freed frame. The
/// simulator collects those between events ([`Oracle::wants_collection`],
/// [`Oracle::collect`]): their ids go on a free list that [`Oracle::open`]
/// takes from, so the table stays as large as what is still referred to.
/// What refers to an obligation: an undischarged one is referred to by the
/// flush that will discharge it (kept always); a discharged one only by PTE
/// floors (`Pte::floor_obl`: a stale use is described by it) and by frames
/// freed under it, for which a discharged obligation is the same as none (a
/// reuse check passes both), so the simulator clears those first. No id is ever
/// printed, so which id a new obligation gets changes no output.
pub struct Oracle {
    /// The obligations by id (id 0 is a placeholder for "none"): every one
    /// opened, except that the slot of one collected is reused by a later one.
    pub obligations: Vec<Obligation>,
    /// Ids collected and free for [`Oracle::open`] to reuse, the next one last.
    free: Vec<u32>,
    /// Obligations opened since the last collection.
    opened_since: usize,
    /// Openings after which, with no free id left, a collection is due.
    collect_after: usize,
    /// Violations, the first [`Oracle::KEEP`] in full.
    pub violations: Vec<Violation>,
    /// Violations found in all, kept or not.
    pub count: u64,
    /// Violations found in all, kept or not, by property name.
    pub by_property: std::collections::BTreeMap<&'static str, u64>,
    /// Whether `no_stale_held` is checked.
    pub strict: bool,
    /// The change sequence counter (PTE versions).
    pub seq: u64,
    /// Stale or foreign leaf entries `no_stale_held` found on lazy CPUs and did
    /// not report (a lazy CPU's leaf entries are exempt; see the module docs).
    pub lazy_exempt: u64,
}

impl Oracle {
    /// How many violations are kept in full.
    pub const KEEP: usize = 64;

    /// Returns an oracle with nothing open.
    pub fn new(strict: bool) -> Self {
        let none = Obligation {
            mm: 0,
            mm_uid: 0,
            va: 0,
            pages: 0,
            change: "",
            flush: "",
            seq: 0,
            cpu: 0,
            opened: 0,
            discharged: Some(0),
        };
        Oracle {
            obligations: vec![none],
            violations: Vec::new(),
            count: 0,
            by_property: Default::default(),
            strict,
            seq: 1,
            lazy_exempt: 0,
            free: Vec::new(),
            opened_since: 0,
            collect_after: Self::COLLECT_AFTER,
        }
    }

    /// Openings (with no free id left) after which the first collection is due;
    /// later ones wait for at least as many as were live after the last, so that
    /// the work of a collection is paid for by the openings it follows.
    pub const COLLECT_AFTER: usize = 1 << 20;

    /// Sets the openings after which a collection is due (tests make it small to
    /// collect often).
    pub fn set_collect_after(&mut self, n: usize) {
        self.collect_after = n.max(1);
    }

    /// Returns whether a collection is due: no free id is left and enough have
    /// been opened since the last.
    pub fn wants_collection(&self) -> bool {
        self.free.is_empty() && self.opened_since >= self.collect_after
    }

    /// Frees the id of every obligation that is discharged and not in
    /// `referenced` (the ids the simulation still refers to: see the type's
    /// documentation). Returns how many obligations stay live.
    pub fn collect(&mut self, referenced: impl IntoIterator<Item = u32>) -> usize {
        let mut live: Vec<bool> = self.obligations.iter().map(|o| o.discharged.is_none()).collect();
        live[0] = true;
        for id in referenced {
            live[id as usize] = true;
        }
        // Highest id first, so that the lowest is reused first.
        self.free = (1..live.len() as u32).rev().filter(|&i| !live[i as usize]).collect();
        let n = live.len() - self.free.len();
        self.opened_since = 0;
        self.collect_after = self.collect_after.max(n);
        n
    }

    /// Returns the next change sequence number.
    pub fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Opens an obligation and returns its id.
    #[allow(clippy::too_many_arguments)]
    pub fn open(
        &mut self,
        mm: u32,
        mm_uid: u32,
        va: u64,
        pages: u64,
        change: &'static str,
        flush: &'static str,
        seq: u64,
        cpu: u32,
        now: u64,
    ) -> u32 {
        let o = Obligation { mm, mm_uid, va, pages, change, flush, seq, cpu, opened: now, discharged: None };
        self.opened_since += 1;
        if let Some(id) = self.free.pop() {
            self.obligations[id as usize] = o;
            return id;
        }
        self.obligations.push(o);
        (self.obligations.len() - 1) as u32
    }

    /// Returns whether obligation `id` is discharged.
    pub fn discharged(&self, id: u32) -> bool {
        self.obligations[id as usize].discharged.is_some()
    }

    /// Describes the change of obligation `id`.
    pub fn describe_change(&self, id: u32, cycles_per_ns: f64) -> String {
        let o = &self.obligations[id as usize];
        format!(
            "{} of {} page(s) at {:#x} in mm{} (uid {}) by cpu{} at {:.3} us",
            o.change,
            o.pages,
            o.va,
            o.mm,
            o.mm_uid,
            o.cpu,
            o.opened as f64 / cycles_per_ns / 1000.0
        )
    }

    /// Describes the flush of obligation `id`.
    pub fn describe_flush(&self, id: u32, cycles_per_ns: f64) -> String {
        let o = &self.obligations[id as usize];
        match o.discharged {
            Some(t) => format!("{} returned at {:.3} us", o.flush, t as f64 / cycles_per_ns / 1000.0),
            None => format!("{} (still in progress)", o.flush),
        }
    }

    /// Records a violation.
    pub fn report(&mut self, v: Violation) {
        self.count += 1;
        *self.by_property.entry(v.property).or_default() += 1;
        if self.violations.len() < Self::KEEP {
            self.violations.push(v);
        }
    }
}
