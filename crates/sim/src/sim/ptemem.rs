//! [`PteMem`] for the simulated kernel: the page-table memory the policy crate's
//! arm64 contpte code runs on, over the page tables of every address space.
//!
//! # Cost
//! Each call costs the CPU simulated time, in units of the preset's `mem_access`
//! (an L1 hit), as the kernel's other page-table loops are charged: a load
//! ([`PteMem::get`]) or a plain store ([`PteMem::set`]) one unit, an atomic
//! exchange or compare-and-exchange three (so that an exchange and a store cost
//! the four units `mprotect` charges per PTE). A load that directly follows
//! another load of the same operation (no store, exchange or flush between:
//! `contpte_ptep_get` gathering a block, the robust teardown's scans) does not
//! depend on it, so the out-of-order core overlaps it with the run's first: each
//! such load costs `mem_access / mlp`, the preset's overlap of independent loads,
//! the run's total rounded up once. [`PteMem::flush_tlb_range`] costs what the
//! ASID policy's `flush_range` costs on this CPU's [`CpuHw`].
//!
//! # The oracle
//! A write that removes or weakens a valid translation (clears it, changes its
//! frame, takes away write permission, the user bit or the contiguous bit)
//! opens an obligation (one per address space per kernel operation) and gives
//! the PTE a fresh version. A range flush discharges the changes it covers: their
//! floors rise and `no_stale_use` holds any CPU still using them afterwards to
//! account. What no range flush of the arch code's covered is handed back by
//! [`KernelPtes::finish`] for the kernel's own flush (the `mmu_gather` flush of a
//! `munmap`, `mprotect`, fork or exit), which discharges it. Access-flag and
//! dirty changes weaken nothing and keep the version. Under `--strict` each write
//! is followed by a check of its block (`no_tlb_conflict`), and the end of each
//! operation by a check that every written file page of the blocks it touched
//! still has its dirty state in a valid PTE of its folio (`no_lost_dirty`).
//! Each exchange of a valid PTE records whether its block was dirty as
//! `ptep_get` would have gathered it, for `no_ungathered_dirty`.
//!
//! Reclaim's deferred flushes ([`KernelPtes::flush_deferred`],
//! `arch_tlbbatch_add_pending`) issue their invalidations at once but hold back
//! the barrier that completes them (arm64), or only queue their mm (x86); the
//! changes they cover wait, owed, until [`KernelPtes::sync_deferred`]
//! (`arch_tlbbatch_flush`) issues that barrier or the batch's flush, and only
//! then are they discharged (`sim/reclaim.rs`).
//!
//! # The hardware between two calls
//! A policy call is atomic in simulated time, so without help no other CPU would
//! ever act in the middle of a fold, an unfold or a teardown. The arch code's
//! contract is that the hardware may act between any two of its page-table
//! accesses; so, with probability [`HW_RACE`] after each call, while another CPU
//! runs the same address space, that CPU acts on the block just accessed: if it
//! holds a writable 64 KB entry for the block, it writes a random page of it
//! through the entry (setting the dirty state in one valid PTE of the block,
//! chosen at random, if the entry has not written before: FEAT_HAFDBS as the
//! policy crate describes it), otherwise it fills its TLB speculatively from a
//! random page of the block. That is how a simulation can show the race of origin
//! 004: hardware setting dirty in one PTE while software clears another. It is a
//! sample, not a search: the checker explores every interleaving.

use super::contpte::block_conflict;
use super::reclaim::{Held, NoSync};
use super::*;
use crate::toggle::TLBBATCH;
use tlbkit_policy::contpte::{PteMem, PteVal};

/// Cost of a PTE load or plain store, in `mem_access` units.
const PLAIN: u64 = 1;
/// Cost of an atomic exchange or compare-and-exchange of a PTE, in `mem_access`
/// units (`mprotect`'s exchange-and-store is charged four).
const ATOMIC: u64 = 3;

/// Probability, after each `PteMem` call while another CPU runs the address
/// space, that that CPU acts on the block just accessed (module documentation).
pub(super) const HW_RACE: f64 = 1.0 / 32.0;

/// The bits whose removal from a valid PTE weakens its translation.
const PROT_BITS: u16 = P_WRITE | P_USER | P_GLOBAL | P_CONT | P_HUGE;

/// One weakening the arch code made that no flush has covered yet.
#[derive(Clone, Copy, Debug)]
pub(super) struct Weakened {
    mm: MmId,
    va: u64,
    pte: PteRef,
    /// The change's sequence number (the PTE's version after it).
    seq: u64,
    /// The obligation it belongs to.
    obl: u32,
}

/// The weakenings of one kernel operation no range flush of the arch code
/// covered, and their obligations: the kernel's own flush discharges them.
#[derive(Debug, Default)]
pub struct Unflushed {
    changes: Vec<Weakened>,
    obls: Vec<u32>,
}

impl Unflushed {
    /// Returns whether nothing is owed.
    pub(super) fn is_empty(&self) -> bool {
        self.obls.is_empty()
    }

    /// Adds what `other` owes.
    pub(super) fn append(&mut self, mut other: Unflushed) {
        self.changes.append(&mut other.changes);
        self.obls.append(&mut other.obls);
    }
}

/// The page tables as the arch code sees them during one kernel operation on
/// `cpu`, whose clock is `now`.
pub(super) struct KernelPtes<'s> {
    pub(super) sim: &'s mut Sim,
    pub(super) cpu: usize,
    pub(super) now: u64,
    /// What the operation is, for the obligations it opens.
    change: &'static str,
    owed: Unflushed,
    /// Blocks written (address space, `va >> 16`), for the dirty check at the end.
    touched: Vec<(MmId, u64)>,
    /// Whether the last access was a load (a run of loads is under way).
    in_loads: bool,
    /// Loads of the current run after its first, not yet charged.
    overlapped: u64,
    /// Every exchange of a valid PTE, in order: the page and whether its block's
    /// dirty state as `ptep_get` gathers it was dirty at that moment (what
    /// `no_ungathered_dirty` holds the value returned for the page to).
    pub(super) exchanged: Vec<(u64, bool)>,
    /// Weakenings whose invalidations a deferred flush issued without waiting
    /// for them ([`KernelPtes::flush_deferred`]): discharged at the next
    /// [`KernelPtes::sync_deferred`].
    deferred: Vec<Weakened>,
    /// The completion barriers those deferred flushes held back.
    held: Held,
    /// x86: the mms whose deferred flushes wait for the batch flush
    /// (`current->tlb_ubc`).
    batch: Vec<MmId>,
}

/// Returns the arch layer's view of a PTE.
fn val(p: &Pte) -> PteVal {
    PteVal::new(p.pfn, p.flags)
}

/// Returns whether replacing `old` with `new` removes or weakens a translation.
fn weakens(old: &Pte, new: PteVal) -> bool {
    old.valid() && (!new.valid() || new.pfn != old.pfn || old.flags & !new.flags & PROT_BITS != 0)
}

impl<'s> KernelPtes<'s> {
    /// Returns the page tables for an operation called `change` by `cpu` at `now`.
    pub(super) fn new(sim: &'s mut Sim, cpu: usize, now: u64, change: &'static str) -> Self {
        KernelPtes {
            sim,
            cpu,
            now,
            change,
            owed: Unflushed::default(),
            touched: Vec::new(),
            in_loads: false,
            overlapped: 0,
            exchanged: Vec::new(),
            deferred: Vec::new(),
            held: Held::default(),
            batch: Vec::new(),
        }
    }

    /// Ends the operation: checks the dirty state of the blocks it wrote and
    /// returns its clock and what its own flushes left owed.
    pub(super) fn finish(mut self) -> (u64, Unflushed) {
        self.end_loads();
        // A deferred flush nobody completed leaves its changes to the kernel's
        // own flush (reclaim completes every one, so this is only a safety net).
        debug_assert!(self.deferred.is_empty(), "a deferred flush was never completed");
        let deferred = std::mem::take(&mut self.deferred);
        self.owed.changes.extend(deferred);
        let touched = std::mem::take(&mut self.touched);
        for (mm, block) in touched {
            self.sim.check_dirty_kept(self.cpu, mm, block << SHIFT_64K, self.now);
        }
        (self.now, self.owed)
    }

    /// Charges an access other than a load: ends the run of loads first.
    fn charge(&mut self, units: u64) {
        self.end_loads();
        self.now += units * self.sim.m.costs.mem_access;
    }

    /// Charges a load: a full `mem_access` if it starts a run of loads, its
    /// overlapped share otherwise (module documentation).
    fn charge_load(&mut self) {
        if self.in_loads {
            self.overlapped += 1;
        } else {
            self.now += PLAIN * self.sim.m.costs.mem_access;
            self.in_loads = true;
        }
    }

    /// Ends a run of loads, charging its overlapped loads.
    fn end_loads(&mut self) {
        let c = self.sim.m.costs;
        self.now += (self.overlapped * PLAIN * c.mem_access).div_ceil(c.mlp.max(1));
        self.overlapped = 0;
        self.in_loads = false;
    }

    /// Returns the PTE slot mapping `va` in `mm`, if its table exists.
    fn resolve(&self, mm: MmId, va: VirtAddr) -> Option<PteRef> {
        let root = self.sim.kern.mm(mm).root();
        self.sim.pt.walk(root, va.0).filter(|w| !w.huge).map(|w| w.pte)
    }

    /// Writes `new` into slot `r` (mapping `va` of `mm`), keeping the oracle's
    /// floor and the ground truth of the page, with the versioning and the
    /// obligations the module documentation describes.
    fn write(&mut self, mm: MmId, va: VirtAddr, r: PteRef, new: PteVal) {
        let old = self.sim.pt.pte(r);
        let relevant = |flags: u16| flags & !(P_ACCESS | P_DIRTY);
        let changed = old.valid() != new.valid()
            || (new.valid() && (old.pfn != new.pfn || relevant(old.flags) != relevant(new.flags)));
        let mut ver = old.ver;
        if weakens(&old, new) {
            ver = self.sim.oracle.next_seq();
            let obl = self.obligation(mm, va.0, ver);
            self.owed.changes.push(Weakened { mm, va: va.0, pte: r, seq: ver, obl });
        } else if changed {
            ver = self.sim.oracle.next_seq();
        }
        let p = self.sim.pt.pte_mut(r);
        p.pfn = new.pfn;
        p.flags = new.flags;
        p.ver = ver;
        let block = va.0 >> SHIFT_64K;
        if self.touched.last() != Some(&(mm, block)) {
            self.touched.push((mm, block));
        }
        if self.sim.oracle.strict {
            let base = r - ((va.0 >> SHIFT_4K) & (CONT_PTES - 1)) as PteRef;
            if let Some(why) = block_conflict(&self.sim.pt, base, true) {
                let uid = self.sim.kern.mm(mm).uid();
                self.sim.report_conflict(self.cpu, va.0 & !(CONT_PTES * 4096 - 1), uid, why, self.now);
            }
        }
    }

    /// Returns the obligation this operation's weakenings of `mm` belong to,
    /// opening it at the first.
    fn obligation(&mut self, mm: MmId, va: u64, seq: u64) -> u32 {
        let sim = &mut *self.sim;
        if let Some(&o) = self.owed.obls.iter().find(|&&o| sim.oracle.obligations[o as usize].mm == mm.0) {
            let ob = &mut sim.oracle.obligations[o as usize];
            let end = (ob.va + ob.pages * 4096).max(va + 4096);
            ob.va = ob.va.min(va);
            ob.pages = (end - ob.va) / 4096;
            return o;
        }
        let uid = sim.kern.mm(mm).uid();
        let o = sim.oracle.open(mm.0, uid, va, 1, self.change, "flush_range", seq, self.cpu as u32, self.now);
        self.owed.obls.push(o);
        o
    }

    /// Lets the hardware act between two calls (module documentation).
    fn hw_between(&mut self, mm: MmId, va: VirtAddr) {
        if self.sim.cont.mode != ContMode::On || mm.is_kernel() {
            return;
        }
        let here = self.sim.m.cpus[self.cpu].root == Root::Mm(mm);
        if self.sim.m.roots_on(mm) <= here as u32 || self.sim.unit_random() >= HW_RACE {
            return;
        }
        let others: Vec<usize> =
            (0..self.sim.m.cpus.len()).filter(|&c| c != self.cpu && self.sim.m.cpus[c].root == Root::Mm(mm)).collect();
        if others.is_empty() {
            return;
        }
        let other = others[(self.sim.rng.next_u64() % others.len() as u64) as usize];
        self.sim.stats.contpte.hw_races += 1;
        self.sim.hw_act_on_block(other, mm, va.0, self.now);
    }
}

impl KernelPtes<'_> {
    /// Queues the invalidation of `pages` pages of `mm` from `va` without
    /// waiting for it: reclaim's `set_tlb_ubc_flush_pending` →
    /// `arch_tlbbatch_add_pending`. The changes it covers stay owed until
    /// [`KernelPtes::sync_deferred`].
    ///
    /// On arm64 (`__flush_tlb_range_nosync`) the policy's
    /// [`Policy::flush_range`] runs on a view of the CPU that holds back every
    /// completion barrier it issues on this CPU (`DSB ISH`, `TLBSYNC`;
    /// [`NoSync`]): its `DSB ISHST` and TLBIs go out now. On x86 the policy's
    /// own batch hook [`Policy::tlbbatch_add_pending`] runs, once per page, on
    /// the same view (most x86 policies queue nothing there: their
    /// `arch_tlbbatch_add_pending` runs inside [`Policy::flush_batch`], once per
    /// mm), and `mm` joins the batch that [`KernelPtes::sync_deferred`] flushes.
    ///
    /// With `--set tlbbatch=off` ([`crate::toggle::TLBBATCH`]) nothing is deferred:
    /// [`KernelPtes::flush_now`] flushes the pages at once.
    pub(super) fn flush_deferred(&mut self, mm: MmId, va: VirtAddr, pages: u64) {
        if self.sim.features().on(TLBBATCH) && self.should_defer(mm) {
            self.defer_flush(mm, va, pages);
        } else {
            self.flush_now(mm, va, pages);
        }
    }

    /// Asks the policy whether this unmap's flush goes to the batch
    /// (`should_defer_flush` → [`Policy::tlbbatch_should_defer`]): x86 Linux
    /// batches only when another CPU is in `mm_cpumask`, and otherwise
    /// flushes the page at once (`ptep_clear_flush`).
    fn should_defer(&mut self, mm: MmId) -> bool {
        self.end_loads();
        let sim = &mut *self.sim;
        let hw = CpuHw::new(&mut sim.m, self.cpu, self.now);
        let defer = sim.policy.tlbbatch_should_defer(&hw, mm);
        self.now = hw.now();
        defer
    }

    /// Flushes `pages` pages of `mm` from `va` and waits for the flush, as
    /// `ptep_clear_flush` → `flush_tlb_page` does for an unmap that is not
    /// batched (Linux before v4.3's `try_to_unmap_flush`; arm64 before v6.5): the
    /// policy's [`Policy::flush_range`] on this CPU, completion barriers
    /// included; the changes it covers are discharged at once. Nothing reaches
    /// [`Policy::tlbbatch_add_pending`] or [`Policy::flush_batch`].
    pub(super) fn flush_now(&mut self, mm: MmId, va: VirtAddr, pages: u64) {
        self.end_loads();
        let sim = &mut *self.sim;
        sim.stats.pageout.unmap_flushes += 1;
        let hw = CpuHw::new(&mut sim.m, self.cpu, self.now);
        sim.policy.flush_range(&hw, mm, va, pages);
        self.now = hw.now();
        let end = va.0 + pages * 4096;
        let (covered, rest): (Vec<Weakened>, Vec<Weakened>) =
            std::mem::take(&mut self.owed.changes).into_iter().partition(|w| w.mm == mm && w.va >= va.0 && w.va < end);
        self.owed.changes = rest;
        for w in covered {
            sim.pt.raise_floor(w.pte, w.seq, w.obl);
        }
        let (changes, deferred) = (&self.owed.changes, &self.deferred);
        discharge_settled(
            sim,
            &mut self.owed.obls,
            |o| changes.iter().chain(deferred.iter()).any(|w| w.obl == o),
            self.now,
        );
    }

    /// The deferred flush of [`KernelPtes::flush_deferred`] (module
    /// documentation): issued now, completed by [`KernelPtes::sync_deferred`].
    pub(super) fn defer_flush(&mut self, mm: MmId, va: VirtAddr, pages: u64) {
        self.end_loads();
        let sim = &mut *self.sim;
        sim.stats.pageout.pageout_deferred_flushes += 1;
        let x86 = sim.x86_tlbbatch();
        let hw = CpuHw::new(&mut sim.m, self.cpu, self.now);
        let view = NoSync::new(&hw);
        if x86 {
            for i in 0..pages {
                sim.policy.tlbbatch_add_pending(&view, mm, va.add_pages(i));
            }
            if !self.batch.contains(&mm) {
                self.batch.push(mm);
            }
        } else {
            sim.policy.flush_range_unsynced(&view, mm, va, pages);
        }
        self.held.merge(view.held());
        self.now = hw.now();
        let end = va.0 + pages * 4096;
        let (mut covered, rest): (Vec<Weakened>, Vec<Weakened>) =
            std::mem::take(&mut self.owed.changes).into_iter().partition(|w| w.mm == mm && w.va >= va.0 && w.va < end);
        self.owed.changes = rest;
        self.deferred.append(&mut covered);
    }

    /// Completes every deferred flush since the last call
    /// (`try_to_unmap_flush_dirty` → `arch_tlbbatch_flush`), then discharges
    /// the changes they covered. On arm64 that issues once each completion
    /// barrier they held back (a lone `DSB ISH`); on x86 it is the policy's
    /// [`Policy::flush_batch`] of the mms in the batch (`flush_tlb_multi` of
    /// the CPUs gathered from their `mm_cpumask`, or one `INVLPGB` of
    /// everything), then any barrier the add-pending hooks held back. Returns
    /// what the mm's next `flush_tlb_batched_pending` owes: the barriers
    /// issued, and on x86 the mark.
    pub(super) fn sync_deferred(&mut self) -> Held {
        self.end_loads();
        let mut held = std::mem::take(&mut self.held);
        let batch = std::mem::take(&mut self.batch);
        let sim = &mut *self.sim;
        if !batch.is_empty() || held.any() {
            sim.stats.pageout.tlbbatch_flushes += 1;
        }
        if !batch.is_empty() {
            let hw = CpuHw::new(&mut sim.m, self.cpu, self.now);
            sim.policy.flush_batch(&hw, &batch);
            held.issue(&hw);
            self.now = hw.now();
            held.merge(Held::marked());
        } else if held.any() {
            let hw = CpuHw::new(&mut sim.m, self.cpu, self.now);
            held.issue(&hw);
            self.now = hw.now();
        }
        let now = self.now;
        for w in std::mem::take(&mut self.deferred) {
            sim.pt.raise_floor(w.pte, w.seq, w.obl);
        }
        let changes = &self.owed.changes;
        discharge_settled(sim, &mut self.owed.obls, |o| changes.iter().any(|w| w.obl == o), now);
        held
    }
}

impl PteMem for KernelPtes<'_> {
    fn get(&mut self, mm: MmId, va: VirtAddr) -> PteVal {
        self.charge_load();
        let v = self.resolve(mm, va).map_or(PteVal::NONE, |r| val(&self.sim.pt.pte(r)));
        self.hw_between(mm, va);
        v
    }

    fn set(&mut self, mm: MmId, va: VirtAddr, pte: PteVal) {
        self.charge(PLAIN);
        let root = self.sim.kern.mm(mm).root();
        let r = self.sim.pt.ensure_leaf(root, va.0);
        self.write(mm, va, r, pte);
        self.hw_between(mm, va);
    }

    fn get_and_clear(&mut self, mm: MmId, va: VirtAddr) -> PteVal {
        self.charge(ATOMIC);
        let Some(r) = self.resolve(mm, va) else {
            self.hw_between(mm, va);
            return PteVal::NONE;
        };
        let old = val(&self.sim.pt.pte(r));
        if old.valid() {
            let gathered = if old.valid_cont() {
                let base = r - ((va.0 >> SHIFT_4K) & (CONT_PTES - 1)) as PteRef;
                (0..CONT_PTES as PteRef)
                    .map(|i| self.sim.pt.pte(base + i))
                    .any(|p| p.valid_cont() && p.flags & P_DIRTY != 0)
            } else {
                old.dirty()
            };
            self.exchanged.push((va.0, gathered));
        }
        if !old.none() {
            self.write(mm, va, r, PteVal::NONE);
        }
        self.hw_between(mm, va);
        old
    }

    fn cmpxchg(&mut self, mm: MmId, va: VirtAddr, old: PteVal, new: PteVal) -> Result<(), PteVal> {
        self.charge(ATOMIC);
        let now = self.resolve(mm, va).map_or(PteVal::NONE, |r| val(&self.sim.pt.pte(r)));
        let res = if now != old {
            Err(now)
        } else {
            if now != new {
                let root = self.sim.kern.mm(mm).root();
                let r = self.sim.pt.ensure_leaf(root, va.0);
                self.write(mm, va, r, new);
            }
            Ok(())
        };
        self.hw_between(mm, va);
        res
    }

    fn flush_tlb_range(&mut self, mm: MmId, va: VirtAddr, pages: u64) {
        self.end_loads();
        let sim = &mut *self.sim;
        sim.stats.contpte.pte_range_flushes += 1;
        if sim.kern.in_exit() {
            sim.stats.contpte.exit_range_flushes += 1;
        }
        if sim.cont.skip_convert_flush && pages == CONT_PTES {
            return;
        }
        let hw = CpuHw::new(&mut sim.m, self.cpu, self.now);
        sim.policy.flush_range(&hw, mm, va, pages);
        self.now = hw.now();
        // Discharge what the flush covers.
        let end = va.0 + pages * 4096;
        let pt = &mut sim.pt;
        self.owed.changes.retain(|w| {
            let covered = w.mm == mm && w.va >= va.0 && w.va < end;
            if covered {
                pt.raise_floor(w.pte, w.seq, w.obl);
            }
            !covered
        });
        let (changes, deferred, now) = (&self.owed.changes, &self.deferred, self.now);
        let open = |o| changes.iter().any(|w: &Weakened| w.obl == o) || deferred.iter().any(|w| w.obl == o);
        discharge_settled(sim, &mut self.owed.obls, open, now);
    }
}

/// Marks discharged at `now` every obligation of `obls` that no change still
/// owed holds (`open`), keeps the others, and under `--strict` scans every
/// CPU's TLB against what is now flushed.
fn discharge_settled(sim: &mut Sim, obls: &mut Vec<u32>, open: impl Fn(u32) -> bool, now: u64) {
    obls.retain(|&o| {
        let open = open(o);
        if !open {
            sim.oracle.obligations[o as usize].discharged = Some(now);
        }
        open
    });
    if sim.oracle.strict {
        for c in 0..sim.m.cpus.len() {
            sim.strict_scan(c, now);
        }
    }
}

impl Sim {
    /// Discharges, at `now`, the changes of `owed` that the kernel's flush `what`
    /// of `mm`, which has just returned, covers. A change it does not cover stays
    /// owed for ever, its obligation open (a frame it mapped is then reported if
    /// reused): correct arch code leaves owed only changes inside the range its
    /// caller flushes.
    pub(super) fn discharge_unflushed(&mut self, owed: Unflushed, mm: MmId, what: FlushWhat, now: u64) {
        let covers = |w: &Weakened| {
            w.mm == mm
                && match what {
                    FlushWhat::Page(va) => w.va == va,
                    FlushWhat::Range(va, n) => w.va >= va && w.va < va + n * 4096,
                    FlushWhat::Mm => true,
                    FlushWhat::KernelRange(..) => false,
                }
        };
        let mut open = Vec::new();
        for w in owed.changes {
            if !covers(&w) {
                open.push(w.obl);
                continue;
            }
            self.pt.raise_floor(w.pte, w.seq, w.obl);
        }
        for o in owed.obls {
            if !open.contains(&o) {
                self.oracle.obligations[o as usize].discharged = Some(now);
            }
        }
    }
}
