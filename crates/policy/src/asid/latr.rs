//! LATR, lazy translation coherence (Kumar, Maass, Kashyap, Veselý, Yan, Kim,
//! Bhattacharjee and Krishna, ASPLOS 2018), on the Linux x86 v4.10 it was
//! built on ([`LinuxX86v410`]): `munmap` and `madvise(MADV_DONTNEED)` record
//! their shootdown in per-CPU state and return without IPIs; every CPU applies
//! the records that name it at its next scheduler tick or context switch; the
//! memory the unmap freed is reclaimed only once every CPU named has done so.
//!
//! # The algorithm (the authors' artifact, `sslab-gatech/latr`, `latr.patch`)
//! Per CPU, a single-producer ring of *LATR states* (`shootdown_entries_t`:
//! `start`, `end` and [`RING`] entries, the slot of index `i` being `i mod
//! RING`), each `{flush_mm, flush_start, flush_end, cpu_mask, valid}`.
//!
//! - **Initiator** (`native_flush_tlb_others`, reached from `flush_tlb_mm_range`
//!   after the local flush when another CPU is in `mm_cpumask`): while the mm's
//!   `munmap_inprogress` is set (here the kernel's [`Hw::defer_flush`] with
//!   [`Defer::WhileMmFlagged`]) it runs `flush_tlb_func` locally once
//!   more and saves a state (`native_flush_save_state`): if its ring is not
//!   full and the slot at `end` is free, it fills in the request, copies
//!   `mm_cpumask(mm)` (itself included) into `cpu_mask`, publishes `valid = 1`
//!   and advances `end`. Saved, it returns: no IPI, no wait. Otherwise (ring
//!   full) it falls back to the IPI shootdown of v4.10.
//! - **Sweep** (`native_flush_saved_states`, from `scheduler_tick` and from
//!   `__schedule` before the context switch): the CPU walks every CPU's ring
//!   from `start` to `end`; for each valid state with its bit set it runs
//!   `flush_tlb_func` for the request (a flush if the mm is its `active_mm`,
//!   `leave_mm` if it is lazy on it, nothing otherwise: without PCIDs a CPU
//!   that switched away kept nothing), clears its bit, and the CPU that empties
//!   the mask clears `valid`. Then it retires the invalid states at the head of
//!   its own ring (`start` advances).
//! - **Reclamation.** The paper's rule: the frames, the page-table pages and
//!   the virtual range of a lazy unmap go back only when every CPU in the
//!   state's mask has invalidated. Here the CPU whose sweep empties the mask
//!   reports the flush complete ([`Hw::flush_complete`]), and the kernel frees
//!   then. The paper's background thread checks the states 2 ms after the
//!   unmap; freeing at the moment the mask empties is the same rule applied as
//!   early as it allows.
//!
//! # The relaxation, in the oracle's terms
//! A lazy flush's obligations are discharged when the state's mask empties,
//! not when `munmap` returns: until then another CPU may still use (read or
//! write) the old translation, reaching a frame nobody else can have, because
//! the frame is not yet free. What still must hold: `no_reuse_while_mapped`
//! (no frame or page-table page handed out while a CPU may hold a translation
//! of it) and, from the completion on, `no_stale_use` and `no_stale_held`.
//!
//! # Who goes lazy: a per-mm flag
//! The artifact's `munmap` system call (mm/mmap.c:2820-2838, under the write
//! side of `mmap_sem` throughout) and `madvise_dontneed` (mm/madvise.c:480-487,
//! under the read side) set `mm->munmap_inprogress` with `atomic_set` around
//! their zap and clear it after; `native_flush_tlb_others` tests that flag and
//! nothing else (arch/x86/mm/tlb.c:688-702, efad1a12). So every remote flush of
//! the mm goes lazy while it is set, not only the flag-setter's: a
//! copy-on-write fault (`wp_page_copy` -> `ptep_clear_flush_notify`, under the
//! read side, so beside a `madvise`), a migration (`try_to_unmap_one` ->
//! `ptep_clear_flush`, no `mmap_sem`, so beside either), KSM. Those callers
//! free their old page as soon as the flush returns, while other CPUs may
//! still hold it: the checker finds it (findings `latr-artifact-cow` and
//! `latr-artifact-migrate`, `docs/findings/latr-artifact.md`). [`Latr::new`]
//! is the artifact's rule; [`Latr::with_defer`] with [`Defer::OwnUnmap`]
//! (`x86-latr-syscall-only`) defers only the flushes of the `munmap` or
//! `madvise` that set the flag, safer by design. Reclaim's batched flush
//! passes no mm and is never lazy, nor are kernel ranges.
//!
//! # Deliberate readings
//! - The artifact's ring has 256 states per CPU ([`RING`]); the paper says 64.
//!   The checker's small shapes use two, so that the fallback to IPIs is
//!   reached ([`Latr::with_small_shapes`]).
//! - The artifact's reclamation is a timer (a kthread frees what is older than
//!   two seconds) and its default configuration frees at once
//!   (`CONFIG_LAZY_MEM_FREE=n`, [`Variant::ArtifactEagerFree`], which the
//!   checker shows unsafe); the paper's rule is the one modelled. With `=y`
//!   only the flag-setter's own `mmu_gather` holds memory back
//!   (`tlb_flush_mmu_free`, mm/memory.c:255-281); even then a batch of 500
//!   pages or more, or one whose `GFP_NOWAIT` list page cannot be allocated
//!   (`update_lazy_list`, memory.c:824-846), is freed at once, and since `ret`
//!   is not reset per batch a full batch after a deferred one is neither freed
//!   nor deferred (leaked). None of the three is modelled: the checker's
//!   operations free one page or one page table at a time, and its kernel
//!   never fails an allocation. Its
//!   second kthread, which falls back to IPIs for states still pending after
//!   two wake-ups of a second, is not modelled: with the paper's rule a state
//!   pends only while a CPU named in it takes no tick (idle under `NO_HZ`), and
//!   such a CPU sweeps before it runs a task again.
//! - AutoNUMA's lazy hinting changes (`CONFIG_LAZY_MIGRATION`, off by default)
//!   are not modelled.
//! - The completion of a state is decided by the CPU that clears `valid`, with
//!   an atomic exchange, so that two CPUs emptying the mask at once report it
//!   once (the artifact's plain store of `valid = 0` by both is harmless there
//!   because it reclaims by timer).

use crate::cpumask::CpuMask;
use crate::fields::{Fields, Value};
use crate::hw::{Access, Defer, FlushTicket, Hw};
use crate::policy::{Policy, Tick};
use crate::shootdown::{addr_of, CacheLine};
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use crate::types::{MmId, VirtAddr};
use alloc::vec::Vec;

use super::linux_x86_410::LinuxX86v410;
use super::linux_x86_common::Range;

/// LATR states per CPU (`LAZY_TLB_NUM_ENTRIES` in the artifact).
pub const RING: usize = 256;

/// `flush_end` of a request for the whole mm (`TLB_FLUSH_ALL`), as stored.
const FLUSH_ALL: u64 = u64::MAX;

/// How a [`Latr`] reclaims: the paper's rule, or a broken variant the checker
/// must find.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// The memory of a state is reclaimed when its mask is empty.
    Paper,
    /// A deliberately broken variant: reclaimed when one CPU of the mask is
    /// left, one sweep (a tick, an epoch) early.
    ReclaimOneEarly,
    /// The artifact's default build (`CONFIG_LAZY_MEM_FREE=n`): the memory is
    /// freed as soon as the state is saved, while other CPUs may still hold
    /// translations of it.
    ArtifactEagerFree,
}

/// One LATR state (`lazytlb_shootdown_t`).
#[repr(align(64))]
struct State {
    /// `flush_mm`: the slot and incarnation of the mm.
    mm: AtomicU32,
    uid: AtomicU64,
    /// `flush_start`, and the page count ([`FLUSH_ALL`] for the whole mm).
    start: AtomicU64,
    pages: AtomicU64,
    /// `cpu_mask`: the CPUs that still have to invalidate.
    cpu_mask: CpuMask,
    /// `valid`: the state is live.
    valid: AtomicBool,
    /// The kernel's ticket for the flush (the memory it holds back).
    ticket: AtomicU32,
    /// Whether the ticket has been handed back.
    reclaimed: AtomicBool,
}

/// A ring's indices, in a cache line of their own.
struct Head {
    start: AtomicU64,
    end: AtomicU64,
}

/// One CPU's ring (`shootdown_entries_t`).
struct Ring {
    /// The oldest state not yet retired, and one past the newest, as ever-growing
    /// indices (the owner alone writes them).
    head: CacheLine<Head>,
    states: Vec<State>,
}

/// LATR on Linux x86 v4.10.
pub struct Latr {
    base: LinuxX86v410,
    rings: Vec<Ring>,
    variant: Variant,
    defer: Defer,
}

impl Latr {
    /// Returns the policy for `ncpus` CPUs and `max_mms` slots, [`RING`] states
    /// per CPU, deferring as the artifact does ([`Defer::WhileMmFlagged`]) and
    /// reclaiming by the paper's rule ([`Variant::Paper`]).
    pub fn new(ncpus: usize, max_mms: usize) -> Self {
        Self::with_ring(ncpus, max_mms, RING)
    }

    fn with_ring(ncpus: usize, max_mms: usize, ring: usize) -> Self {
        let state = || State {
            mm: AtomicU32::new(0),
            uid: AtomicU64::new(0),
            start: AtomicU64::new(0),
            pages: AtomicU64::new(0),
            cpu_mask: CpuMask::new(ncpus),
            valid: AtomicBool::new(false),
            ticket: AtomicU32::new(0),
            reclaimed: AtomicBool::new(false),
        };
        let rings = (0..ncpus)
            .map(|_| Ring {
                head: CacheLine(Head { start: AtomicU64::new(0), end: AtomicU64::new(0) }),
                states: (0..ring).map(|_| state()).collect(),
            })
            .collect();
        Latr { base: LinuxX86v410::new(ncpus, max_mms), rings, variant: Variant::Paper, defer: Defer::WhileMmFlagged }
    }

    /// The checker's small shapes: two states per CPU, so that a ring fills and
    /// the fallback to IPIs is explored.
    pub fn with_small_shapes(self) -> Self {
        let ncpus = self.base.ncpus();
        let mms = self.base.mm_slots();
        Latr { variant: self.variant, defer: self.defer, ..Self::with_ring(ncpus, mms, 2) }
    }

    /// Returns the policy asking for lazy flushes under `rule`: the artifact's
    /// [`Defer::WhileMmFlagged`] (the default) or [`Defer::OwnUnmap`].
    pub fn with_defer(mut self, rule: Defer) -> Self {
        self.defer = rule;
        self
    }

    /// Returns the policy with reclamation `variant`.
    pub fn with_variant(mut self, variant: Variant) -> Self {
        self.variant = variant;
        self
    }

    /// Returns the v4.10 policy underneath.
    pub fn base(&self) -> &LinuxX86v410 {
        &self.base
    }

    /// Returns the number of states pending (valid) in `cpu`'s ring.
    pub fn pending(&self, cpu: usize) -> usize {
        // Relaxed: a report.
        self.rings[cpu].states.iter().filter(|s| s.valid.load(Ordering::Relaxed)).count()
    }

    /// v4.10's `flush_tlb_mm_range` with LATR's `native_flush_tlb_others`.
    fn flush_tlb_mm_range<H: Hw>(&self, hw: &H, mm: MmId, range: Range) {
        self.base.flush_tlb_mm_range_with(hw, mm, range, |mask, r| self.flush_others(hw, mask, mm, r));
    }

    /// `native_flush_tlb_others` for mm `mm`: a saved state when the kernel
    /// lets the flush complete late (under the policy's [`Defer`] rule), IPIs
    /// otherwise or when the ring is full.
    fn flush_others<H: Hw>(&self, hw: &H, mask: &CpuMask, mm: MmId, range: Range) {
        let Some(ticket) = hw.defer_flush(mm, self.defer) else {
            return self.base.flush_others(hw, mask, Some(mm), range);
        };
        // The artifact runs the handler here once more (a second local flush).
        self.base.flush_tlb_func(hw, Some(mm), range);
        if self.save_state(hw, mask, mm, range, ticket) {
            return;
        }
        self.base.flush_others(hw, mask, Some(mm), range);
        hw.flush_complete(ticket);
    }

    /// `native_flush_save_state`: records the request in this CPU's ring;
    /// false when the ring is full or its next slot still pends.
    fn save_state<H: Hw>(&self, hw: &H, mask: &CpuMask, mm: MmId, range: Range, ticket: FlushTicket) -> bool {
        let ring = &self.rings[hw.cpu().index()];
        let n = ring.states.len() as u64;
        hw.shared(addr_of(&*ring.head), Access::Read);
        // Relaxed: only this CPU writes its ring's indices.
        let (start, end) = (ring.head.start.load(Ordering::Relaxed), ring.head.end.load(Ordering::Relaxed));
        if (end + 1) % n == start % n {
            return false;
        }
        let s = &ring.states[(end % n) as usize];
        hw.shared(addr_of(s), Access::Read);
        // Acquire: pairs with the sweeper's release of `valid` (the artifact's smp_rmb).
        if s.valid.load(Ordering::Acquire) {
            return false;
        }
        hw.shared(addr_of(s), Access::Write);
        let (va, pages) = range.map_or((0, FLUSH_ALL), |(va, p)| (va.0, p));
        // Relaxed: published by the release store of `valid` below (smp_wmb).
        s.mm.store(mm.0, Ordering::Relaxed);
        s.uid.store(self.base.uid_of(mm), Ordering::Relaxed);
        s.start.store(va, Ordering::Relaxed);
        s.pages.store(pages, Ordering::Relaxed);
        s.cpu_mask.copy_from(mask);
        s.ticket.store(ticket.0, Ordering::Relaxed);
        s.reclaimed.store(false, Ordering::Relaxed);
        // Release: the request before the flag (smp_wmb; valid = 1).
        s.valid.store(true, Ordering::Release);
        hw.shared(addr_of(&*ring.head), Access::Write);
        // Release: the state before the index that makes sweepers look at it.
        ring.head.end.store(end + 1, Ordering::Release);
        if self.variant == Variant::ArtifactEagerFree {
            // Relaxed: this CPU's own write above.
            s.reclaimed.store(true, Ordering::Relaxed);
            hw.flush_complete(ticket);
        }
        true
    }

    /// `native_flush_saved_states`: applies every state that names this CPU,
    /// then retires the drained head of its own ring.
    fn sweep<H: Hw>(&self, hw: &H) {
        let me = hw.cpu();
        for ring in &self.rings {
            let n = ring.states.len() as u64;
            // A walk: each ring's head is found from the CPU's number, and the
            // ring's slots from the head (the walk's index for them).
            hw.shared(addr_of(&*ring.head), Access::ReadAheadIndex);
            // Acquire: pairs with the owner's release of `end`.
            let stop = ring.head.end.load(Ordering::Acquire);
            let mut i = ring.head.start.load(Ordering::Acquire);
            // `end` is read before `start`: the owner may have moved both in
            // between, leaving `start` past this `stop`. The artifact bounds the
            // walk by the ring's size for that (and prints "BUG BUG BUG" when it
            // hits the bound); so does this.
            let mut walked = 0;
            while i != stop && walked <= n {
                let s = &ring.states[(i % n) as usize];
                i += 1;
                walked += 1;
                hw.shared(addr_of(s), Access::ReadAhead);
                // Acquire: the request is read after the flag (smp_rmb).
                if !s.valid.load(Ordering::Acquire) || !s.cpu_mask.test(me) {
                    continue;
                }
                // Relaxed: ordered after the acquire of `valid`.
                let mm = MmId(s.mm.load(Ordering::Relaxed));
                let uid = s.uid.load(Ordering::Relaxed);
                let va = s.start.load(Ordering::Relaxed);
                let pages = s.pages.load(Ordering::Relaxed);
                let range = (pages != FLUSH_ALL).then_some((VirtAddr(va), pages));
                self.base.flush_tlb_func_of(hw, mm, uid, range);
                hw.shared(addr_of(&s.cpu_mask), Access::Rmw);
                s.cpu_mask.clear(me);
                let left = s.cpu_mask.weight();
                let due = match self.variant {
                    Variant::Paper | Variant::ArtifactEagerFree => 0,
                    Variant::ReclaimOneEarly => 1,
                };
                // Relaxed: the ticket was published with `valid`.
                let ticket = FlushTicket(s.ticket.load(Ordering::Relaxed));
                // SeqCst: one CPU hands the ticket back, after its own flush.
                if left <= due && !s.reclaimed.swap(true, Ordering::SeqCst) {
                    hw.flush_complete(ticket);
                }
                if left == 0 {
                    // Release: pairs with the owner's acquire before reusing the slot.
                    s.valid.store(false, Ordering::Release);
                }
            }
        }
        let ring = &self.rings[me.index()];
        let n = ring.states.len() as u64;
        // Relaxed: only this CPU writes its ring's indices.
        let (mut start, end) = (ring.head.start.load(Ordering::Relaxed), ring.head.end.load(Ordering::Relaxed));
        let old = start;
        while start != end && !ring.states[(start % n) as usize].valid.load(Ordering::Acquire) {
            start += 1;
        }
        if start != old {
            hw.shared(addr_of(&*ring.head), Access::Write);
            // Release: sweepers that see the new head see the states before it drained.
            ring.head.start.store(start, Ordering::Release);
        }
    }
}

/// Every method but the flushes of one mm, the tick and the field names is
/// v4.10's ([`crate::wrap::Wrap`] forwards them): reclaim's batch is not lazy (its flush
/// passes no mm), nor are kernel ranges.
impl crate::wrap::Wrap for Latr {
    type Inner = LinuxX86v410;

    fn inner(&self) -> &LinuxX86v410 {
        &self.base
    }

    fn flush_page<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        self.flush_tlb_mm_range(hw, mm, Some((va, 1)));
    }

    fn flush_range<H: Hw>(&self, hw: &H, mm: MmId, start: VirtAddr, pages: u64) {
        self.flush_tlb_mm_range(hw, mm, Some((start, pages)));
    }

    fn flush_mm<H: Hw>(&self, hw: &H, mm: MmId) {
        self.flush_tlb_mm_range(hw, mm, None);
    }

    fn ticks(&self) -> bool {
        true
    }

    fn defers(&self) -> Option<Defer> {
        Some(self.defer)
    }

    /// The sweep, at every tick and every `__schedule`.
    fn tick<H: Hw>(&self, hw: &H, _at: Tick) {
        self.sweep(hw)
    }

    fn name_fields(&self, f: &mut dyn Fields) {
        self.base.name_fields(f);
        for (c, r) in self.rings.iter().enumerate() {
            f.add(&r.head.start, format_args!("latr_states[cpu{c}].start"), Value::Number);
            f.add(&r.head.end, format_args!("latr_states[cpu{c}].end"), Value::Number);
            for (i, s) in r.states.iter().enumerate() {
                let e = format_args!("latr_states[cpu{c}].entries[{i}]");
                f.add(&s.mm, format_args!("{e}.flush_mm"), Value::Mm);
                f.add(&s.uid, format_args!("{e}.flush_mm->uid"), Value::Number);
                f.add(&s.start, format_args!("{e}.flush_start"), Value::Number);
                f.add(&s.pages, format_args!("{e}.pages"), Value::Number);
                f.add(&s.cpu_mask, format_args!("{e}.cpu_mask"), Value::Cpus { first: 0 });
                f.add(&s.valid, format_args!("{e}.valid"), Value::Bool);
                f.add(&s.ticket, format_args!("{e}.ticket"), Value::Number);
                f.add(&s.reclaimed, format_args!("{e}.reclaimed"), Value::Bool);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Lazy;
    use crate::testhw::{both_on, init_mms, invlpg, root, with_mms};
    use crate::types::CpuId;
    use std::string::ToString;
    use std::vec;

    fn latr(ncpus: usize, n: u32) -> Latr {
        with_mms(Latr::new(ncpus, n as usize + 1), n)
    }

    #[test]
    fn munmap_saves_a_state_and_sends_no_ipi() {
        let p = latr(2, 1);
        let (h0, h1) = both_on(&p, MmId(1));
        h0.lazy.set(true);
        p.flush_page(&h0, MmId(1), VirtAddr(0x1000));
        // The local flush, the artifact's second local flush, and no IPI.
        assert_eq!(h0.take(), vec![invlpg(0, 0x1000), "defer ticket 1".to_string(), invlpg(0, 0x1000)]);
        assert_eq!(p.pending(0), 1);
        // cpu1 applies it at its tick; cpu0's bit (its own) is still set.
        p.tick(&h1, Tick::Timer);
        assert_eq!(h1.take(), vec![invlpg(0, 0x1000)]);
        assert_eq!(p.pending(0), 1);
        // cpu0's own sweep empties the mask: the flush is complete, the state retired.
        p.tick(&h0, Tick::Schedule);
        assert_eq!(h0.take(), vec![invlpg(0, 0x1000), "complete ticket 1".to_string()]);
        assert_eq!(p.pending(0), 0);
    }

    #[test]
    fn a_sweep_walks_each_ring_from_its_head() {
        let p = latr(2, 1);
        let (h0, mut h1) = both_on(&p, MmId(1));
        h0.lazy.set(true);
        p.flush_page(&h0, MmId(1), VirtAddr(0x1000));
        h1.take();
        h1.coherence = true;
        p.tick(&h1, Tick::Timer);
        let log = h1.take();
        let head = |c: usize| format!("shared {:#x} ReadAheadIndex", addr_of(&*p.rings[c].head));
        let slot = format!("shared {:#x} ReadAhead", addr_of(&p.rings[0].states[0]));
        // Every ring's head, each a walk's index; cpu0's saved slot a walk load
        // after its head, then the flush and the mask's atomic.
        let at = |l: &str| log.iter().position(|x| x == l).unwrap_or_else(|| panic!("{l} not in {log:#?}"));
        assert!(at(&head(0)) < at(&slot) && at(&slot) < at(&head(1)), "{log:#?}");
        assert!(log.iter().any(|l| l.ends_with(" Rmw")), "{log:#?}");
    }

    #[test]
    fn outside_munmap_the_shootdown_is_v410s() {
        let p = latr(2, 1);
        let (h0, _h1) = both_on(&p, MmId(1));
        p.flush_page(&h0, MmId(1), VirtAddr(0x1000));
        assert_eq!(
            h0.take(),
            vec![invlpg(0, 0x1000), "ipi [1]".to_string(), "cpu1: ".to_string() + &invlpg(0, 0x1000)]
        );
        assert_eq!(p.pending(0), 0);
    }

    #[test]
    fn another_callers_flush_of_a_flagged_mm_is_lazy_only_under_the_artifacts_rule() {
        // Another thread's madvise has set the mm's munmap_inprogress; this CPU's
        // flush (a COW fault's ptep_clear_flush) is not the madvise's own.
        for (rule, lazy) in [(Defer::WhileMmFlagged, true), (Defer::OwnUnmap, false)] {
            let p = latr(2, 1).with_defer(rule);
            let (h0, _h1) = both_on(&p, MmId(1));
            h0.flagged.set(true);
            p.flush_page(&h0, MmId(1), VirtAddr(0x1000));
            let log = h0.take();
            assert_eq!(log.contains(&"defer ticket 1".to_string()), lazy, "{rule:?}: {log:?}");
            assert_eq!(log.contains(&"ipi [1]".to_string()), !lazy, "{rule:?}: {log:?}");
            assert_eq!(p.pending(0), usize::from(lazy), "{rule:?}");
        }
    }

    #[test]
    fn a_full_ring_falls_back_to_ipis_and_completes_at_once() {
        let p = Latr::new(2, 2).with_small_shapes();
        init_mms(&p, 1..=1);
        let (h0, _h1) = both_on(&p, MmId(1));
        h0.lazy.set(true);
        // Two slots, one always kept empty: the first request is saved...
        p.flush_page(&h0, MmId(1), VirtAddr(0x1000));
        assert_eq!(p.pending(0), 1);
        h0.take();
        // ...the second finds the ring full and interrupts cpu1.
        p.flush_page(&h0, MmId(1), VirtAddr(0x2000));
        assert_eq!(
            h0.take(),
            vec![
                invlpg(0, 0x2000),
                "defer ticket 2".to_string(),
                invlpg(0, 0x2000),
                "ipi [1]".to_string(),
                "cpu1: ".to_string() + &invlpg(0, 0x2000),
                "complete ticket 2".to_string()
            ]
        );
    }

    #[test]
    fn a_cpu_that_switched_away_only_drops_its_bit() {
        let p = latr(2, 2);
        let (h0, h1) = both_on(&p, MmId(1));
        h0.lazy.set(true);
        p.flush_page(&h0, MmId(1), VirtAddr(0x1000));
        h1.take();
        // cpu1 moves to mm2 (a CR3 load without PCID drops everything of mm1)...
        p.switch_mm(&h1, MmId(2));
        assert_eq!(h1.take(), vec![root(2, 0, false)]);
        // ...so its sweep has nothing to invalidate, and only clears its bit.
        p.tick(&h1, Tick::Schedule);
        assert_eq!(h1.take(), Vec::<std::string::String>::new());
        p.tick(&h0, Tick::Timer);
        assert!(h0.take().contains(&"complete ticket 1".to_string()));
        assert!(!p.base().in_mm_cpumask(MmId(1), CpuId(1)));
    }

    #[test]
    fn a_lazy_cpu_leaves_the_mm_at_its_sweep() {
        let p = latr(2, 1);
        let (h0, h1) = both_on(&p, MmId(1));
        p.enter_lazy(&h1, Lazy::Idle);
        h1.take();
        h0.lazy.set(true);
        p.flush_page(&h0, MmId(1), VirtAddr(0x1000));
        p.tick(&h1, Tick::Schedule);
        assert_eq!(h1.take(), vec![root(0, 0, false)]);
        assert!(!p.base().in_mm_cpumask(MmId(1), CpuId(1)));
    }

    #[test]
    fn the_early_variant_completes_while_a_cpu_is_still_owed() {
        let p = latr(2, 1).with_variant(Variant::ReclaimOneEarly);
        let (h0, h1) = both_on(&p, MmId(1));
        h0.lazy.set(true);
        p.flush_page(&h0, MmId(1), VirtAddr(0x1000));
        h0.take();
        h1.take();
        p.tick(&h0, Tick::Timer);
        assert_eq!(h0.take(), vec![invlpg(0, 0x1000), "complete ticket 1".to_string()]);
        // cpu1 has not invalidated yet, and still does at its sweep.
        p.tick(&h1, Tick::Timer);
        assert_eq!(h1.take(), vec![invlpg(0, 0x1000)]);
        assert_eq!(p.pending(0), 0);
    }
}
