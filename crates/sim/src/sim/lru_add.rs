//! Linux's per-CPU LRU-add batches (`cpu_fbatches.lru_add`, `mm/swap.c`)
//! and the reference each holds.
//!
//! A new folio does not join its node's LRU at once: `folio_add_lru` takes a
//! reference on it (`folio_get`) and puts it in the CPU's batch; when the
//! batch is full ([`Kernel::lru_batch`](crate::preset::Kernel::lru_batch)),
//! or the folio is large (`folio_test_large`, `PageCompound` before folios),
//! or something drains the batch (`lru_add_drain()`), `folio_batch_move_lru`
//! takes the LRU lock once, adds every folio of the batch, releases the
//! lock, and then drops the batch's references (`folios_put`).
//!
//! The batch's reference is what decides where a short-lived page is freed.
//! A page unmapped while it is still in a batch (a fault, then a zap before
//! the batch fills: `madvise(MADV_DONTNEED)` without the drain at the start
//! of the zap, v6.15 on) is not freed by the zap: the zap's `folios_put_refs`
//! drops the mapping's reference and finds another. The batch's own
//! `folios_put` frees it later, with the batch's other such pages, under a
//! second hold of the LRU lock (`__page_cache_release`: the folio is on the
//! LRU by then), then uncharges and frees them. So a loop that faults a page
//! and zaps it takes the LRU lock twice per batch of pages, not once per page;
//! with the drain at every zap it takes it twice per page (the add, then the
//! zap's removal).
//!
//! The frames themselves go back to the simulator's free list at the zap
//! ([`crate::frames::Frames::put`]), up to a batch per CPU early: what waits
//! for the drain here is the kernel work of their freeing, its LRU-lock
//! hold, uncharge and per-CPU list ([`Sim::kfree_work`]). FreeBSD's page
//! queues take no such reference; its runs keep one LRU removal per free.

use super::Sim;

/// No CPU's batch holds the frame (CPUs number at most
/// [`crate::preset::MAX_CPUS`], far below it).
const NONE: u16 = u16::MAX;

/// The LRU-add batches of every CPU of a run.
#[derive(Default)]
pub(super) struct LruAddBatches {
    /// Per CPU: folios in its batch, large ones included until the drain
    /// their addition starts.
    count: Vec<u32>,
    /// Per CPU: the order-0 pages its batch holds a reference on, by frame
    /// (a frame may appear again after it was freed and reused).
    pages: Vec<Vec<u64>>,
    /// Per frame: the CPU whose batch holds a reference on it ([`NONE`]).
    holder: Vec<u16>,
    /// Per CPU: pages of its batch whose other references are gone, freed
    /// when the batch drains.
    orphans: Vec<u32>,
    /// Whether a batch holds references (Linux) or not (FreeBSD).
    holds_refs: bool,
}

/// What a drained batch leaves to do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Drained {
    /// Folios added to the LRU under one hold of its lock.
    pub added: u32,
    /// Pages whose last reference was the batch's: freed after the adds.
    pub freed: u32,
}

impl LruAddBatches {
    /// Returns empty batches for `ncpus` CPUs; `holds_refs` as the kernel's.
    pub(super) fn new(ncpus: usize, holds_refs: bool) -> Self {
        LruAddBatches {
            count: vec![0; ncpus],
            pages: vec![Vec::new(); ncpus],
            holder: Vec::new(),
            orphans: vec![0; ncpus],
            holds_refs,
        }
    }

    /// A newly allocated frame: no batch holds it yet.
    pub(super) fn fresh(&mut self, pfn: u64) {
        if let Some(h) = self.holder.get_mut(pfn as usize) {
            *h = NONE;
        }
    }

    /// Puts order-0 page `pfn` (`None`: a large folio) in `cpu`'s batch;
    /// returns the folios it then holds.
    pub(super) fn add(&mut self, cpu: usize, pfn: Option<u64>) -> u32 {
        self.count[cpu] += 1;
        if let (Some(pfn), true) = (pfn, self.holds_refs) {
            let i = pfn as usize;
            if self.holder.len() <= i {
                self.holder.resize((i + 1).next_power_of_two(), NONE);
            }
            self.holder[i] = cpu as u16;
            self.pages[cpu].push(pfn);
        }
        self.count[cpu]
    }

    /// The last reference but a batch's to order-0 page `pfn` is gone:
    /// returns whether a batch holds one, the page then freed at its drain.
    pub(super) fn orphan(&mut self, pfn: u64) -> bool {
        match self.holder.get_mut(pfn as usize) {
            Some(h) if *h != NONE => {
                self.orphans[*h as usize] += 1;
                *h = NONE;
                true
            }
            _ => false,
        }
    }

    /// Folios waiting in `cpu`'s batch.
    #[cfg(test)]
    pub(super) fn pending(&self, cpu: usize) -> u32 {
        self.count[cpu]
    }

    /// Empties `cpu`'s batch (`folio_batch_move_lru`); returns what that does.
    pub(super) fn drain(&mut self, cpu: usize) -> Drained {
        let added = std::mem::take(&mut self.count[cpu]);
        for pfn in self.pages[cpu].drain(..) {
            if self.holder[pfn as usize] == cpu as u16 {
                self.holder[pfn as usize] = NONE;
            }
        }
        Drained { added, freed: std::mem::take(&mut self.orphans[cpu]) }
    }
}

impl Sim {
    /// Adds a folio to `cpu`'s LRU-add batch from `now`: order-0 page `pfn`,
    /// or a large folio (`None`), which drains the batch at once. Returns
    /// when `cpu` goes on.
    pub(super) fn lru_add(&mut self, cpu: usize, pfn: Option<u64>, now: u64) -> u64 {
        let held = self.kw.lru.add(cpu, pfn);
        let large = pfn.is_none() && self.kw.lru.holds_refs;
        if held >= self.kw.folio_batch() as u32 || large {
            return self.lru_drain(cpu, now);
        }
        now
    }

    /// Drains `cpu`'s LRU-add batch from `now` (`folio_batch_move_lru`): one
    /// hold of the LRU lock for its folios, then the freeing of the pages
    /// only the batch still held. Returns when `cpu` goes on.
    pub(super) fn lru_drain(&mut self, cpu: usize, mut now: u64) -> u64 {
        let d = self.kw.lru.drain(cpu);
        if d.added > 0 {
            now = self.lru_hold(cpu, now, d.added);
        }
        if d.freed > 0 {
            now = self.kfree_work(cpu, (d.freed, 0), now);
        }
        now
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::preset::{self, Kernel};
    use crate::sim::kwork::{NewFrame, LRU_FOLIO};
    use crate::sim::SimConfig;
    use tlbkit_policy::asid::LinuxArm64;

    /// Folios added to or taken off the LRU by `sim` so far.
    pub(in crate::sim) fn lru_folios(sim: &Sim) -> u64 {
        sim.stats.estimated.lru_folio_cycles / LRU_FOLIO
    }

    /// A quiet one-CPU Altra whose kernel is `kernel`.
    pub(in crate::sim) fn one_cpu_altra(kernel: Kernel) -> Sim {
        let mut p = preset::named("altra");
        p.kernel = kernel;
        Sim::new(SimConfig::quiet(p, 1, 1), LinuxArm64::new(1, 4, 16, false).unwrap())
    }

    #[test]
    fn a_large_folio_drains_the_batch_at_once_and_a_page_waits_for_a_full_one() {
        let run = |kernel: Kernel| {
            let mut sim = one_cpu_altra(kernel);
            let mut now = 0;
            for _ in 0..3 {
                let pfn = sim.alloc_frame(0, now);
                now = sim.kalloc_work(0, NewFrame::Page(pfn), now);
            }
            let pages = lru_folios(&sim);
            sim.kalloc_work(0, NewFrame::Folio, now);
            (pages, lru_folios(&sim))
        };
        // Linux: three pages wait in the batch; the folio moves all four.
        assert_eq!(run(Kernel::Linux(6, 6)), (0, 4));
        // The FreeBSD model's batch fills as it always did.
        assert_eq!(run(Kernel::FreeBsd(14)), (0, 0));
    }

    #[test]
    fn a_page_unmapped_in_its_batch_is_freed_at_the_drain_once() {
        let mut b = LruAddBatches::new(2, true);
        assert_eq!(b.add(0, Some(7)), 1);
        assert_eq!(b.add(0, Some(9)), 2);
        assert!(b.orphan(7), "the batch holds page 7");
        assert!(!b.orphan(7), "its reference is counted once");
        // Page 7 reused and added by CPU 1 before CPU 0's batch drains.
        b.fresh(7);
        b.add(1, Some(7));
        assert_eq!(b.drain(0), Drained { added: 2, freed: 1 });
        assert!(!b.orphan(9), "a drained batch holds nothing");
        assert!(b.orphan(7), "CPU 1's batch still holds the reused page");
        assert_eq!(b.drain(1), Drained { added: 1, freed: 1 });
        assert_eq!(b.drain(1), Drained::default());
    }

    #[test]
    fn without_references_a_batch_frees_nothing() {
        let mut b = LruAddBatches::new(1, false);
        b.add(0, Some(3));
        assert!(!b.orphan(3));
        assert_eq!(b.drain(0), Drained { added: 1, freed: 0 });
    }
}
