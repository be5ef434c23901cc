//! Invalidations owed: a page-table change opens an obligation, the policy's
//! flush runs, its return discharges it; and `--strict`'s scan of what each CPU
//! holds.

use super::kernel_state::LazyDone;
use super::*;

impl PendingFlush {
    /// Returns the flush of an operation that also changed PTEs through the
    /// arch code: it discharges `arch`, what the arch code's own flushes left
    /// owed, too.
    pub(super) fn with_arch(self, arch: ptemem::Unflushed) -> PendingFlush {
        PendingFlush { arch, ..self }
    }

    /// Returns the flush of a change that also touched whole sets of a
    /// table's PTEs as patches: their floors rise when it is discharged too.
    pub(super) fn with_patched(self, patched: Vec<(PteRef, [u64; 8])>) -> PendingFlush {
        PendingFlush { patched, ..self }
    }
}

impl Sim {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn open_flush(
        &mut self,
        cpu: usize,
        mm: MmId,
        what: FlushWhat,
        change: &'static str,
        seq: u64,
        changed: Vec<PteRef>,
        frames: Vec<u64>,
        now: u64,
    ) -> PendingFlush {
        let (va, pages, flush) = match what {
            FlushWhat::Page(va) => (va, 1, "flush_page"),
            FlushWhat::Range(va, p) => (va, p, "flush_range"),
            FlushWhat::Mm => (0, 0, "flush_mm"),
            FlushWhat::KernelRange(va, p) => (va, p, "flush_kernel_range"),
        };
        let uid = self.kern.mm(mm).uid();
        let obl = self.oracle.open(mm.0, uid, va, pages, change, flush, seq, cpu as u32, now);
        // The two calls that set LATR's `munmap_inprogress`: only their own
        // flushes hold memory back when deferred.
        let lazy = matches!(change, "munmap" | "madvise");
        PendingFlush { obl, mm, what, changed, patched: Vec::new(), frames, arch: ptemem::Unflushed::default(), lazy }
    }

    /// Runs the policy's flush for a change, discharges its obligation when the
    /// flush returns, then frees the frames the change unmapped. A flush whose
    /// completion the policy took over ([`tlbkit_policy::Hw::defer_flush`]) is
    /// discharged and freed when the policy completes it instead, if it is the
    /// flush of the `munmap` or `madvise` that set the mm's `munmap_inprogress`;
    /// any other flush the policy deferred is treated as done when it returns
    /// (what the artifact's callers do), its ticket's completion a no-op.
    pub fn flush(&mut self, cpu: usize, pf: PendingFlush, now: u64) -> u64 {
        let start = now;
        let flagged = !pf.mm.is_kernel()
            && !matches!(pf.what, FlushWhat::KernelRange(..))
            && self.kern.mm(pf.mm).munmap_inprogress();
        self.m.lazy.allowed = crate::machine::Deferrable { own: pf.lazy, flagged };
        let hw = CpuHw::new(&mut self.m, cpu, now);
        match pf.what {
            FlushWhat::Page(va) => self.policy.flush_page(&hw, pf.mm, VirtAddr(va)),
            FlushWhat::Range(va, n) => self.policy.flush_range(&hw, pf.mm, VirtAddr(va), n),
            FlushWhat::Mm => self.policy.flush_mm(&hw, pf.mm),
            FlushWhat::KernelRange(va, n) => self.policy.flush_kernel_range(&hw, VirtAddr(va), n),
        }
        let mut now = hw.now();
        self.m.lazy.allowed = Default::default();
        self.stats.flush_cycles += now.saturating_sub(start);
        match self.m.lazy.taken.take() {
            Some(t) if pf.lazy => {
                self.stats.lazy_flushes += 1;
                self.kern.hold_lazy(t, pf);
            }
            Some(t) => {
                self.stats.lazy_flushes += 1;
                self.kern.hold_bare(t);
                now = self.finish_flush(Some(cpu), pf, now);
            }
            None => now = self.finish_flush(Some(cpu), pf, now),
        }
        self.complete_lazy(now);
        // A flush IPI may have moved a lazy CPU off an exited address space.
        self.reap(cpu, now)
    }

    /// What a flush's return (or completion) does: the obligation discharged,
    /// the changed PTEs' floors raised, the frames freed, and `--strict`'s scan.
    /// The freeing's kernel work ([`Sim::kfree_work`]) is charged to `cpu`, the
    /// CPU the flush returned on; a lazy flush completed later (`None`) frees
    /// without it. Returns when `cpu` goes on.
    fn finish_flush(&mut self, cpu: Option<usize>, pf: PendingFlush, now: u64) -> u64 {
        let seq = self.oracle.obligations[pf.obl as usize].seq;
        self.oracle.obligations[pf.obl as usize].discharged = Some(now);
        for r in &pf.changed {
            self.pt.raise_floor(*r, seq, pf.obl);
        }
        for (table, mask) in &pf.patched {
            self.pt.raise_floor_mask(*table, mask, seq, pf.obl);
        }
        if !pf.arch.is_empty() {
            self.discharge_unflushed(pf.arch, pf.mm, pf.what, now);
        }
        let freed = self.put_frames(pf.frames.iter().copied());
        if self.oracle.strict {
            for c in 0..self.m.cpus.len() {
                self.strict_scan(c, now);
            }
        }
        self.kern.keep_spare(pf.changed, pf.frames);
        match cpu {
            Some(cpu) => self.kfree_work(cpu, freed, now),
            None => now,
        }
    }

    /// Returns empty lists for a change's PTEs and frames, with the room a
    /// finished flush's had ([`PendingFlush`]'s `changed` and `frames`).
    pub(super) fn spare_lists(&mut self) -> (Vec<PteRef>, Vec<u64>) {
        self.kern.spare_lists()
    }

    /// Finishes every lazy flush the policy completed since the last look
    /// ([`tlbkit_policy::Hw::flush_complete`]).
    pub(super) fn complete_lazy(&mut self, now: u64) {
        if self.m.lazy.completed.is_empty() {
            return;
        }
        for t in std::mem::take(&mut self.m.lazy.completed) {
            match self.kern.complete_lazy(t) {
                LazyDone::Held(pf) => {
                    self.finish_flush(None, pf, now);
                }
                LazyDone::Bare => {}
                LazyDone::Unknown => {
                    self.error.get_or_insert(format!(
                        "the policy completed flush ticket {t}, which is not pending (completed twice, or never \
                         handed out by defer_flush): a bug in the policy"
                    ));
                }
            }
        }
    }

    /// Runs the policy's work at scheduler point `at` on `cpu` (policies that
    /// tick only), then finishes the lazy flushes it completed.
    pub(super) fn tick(&mut self, cpu: usize, at: tlbkit_policy::Tick, now: u64) -> u64 {
        if !self.scheduler.ticks() {
            return now;
        }
        let hw = CpuHw::new(&mut self.m, cpu, now);
        self.policy.tick(&hw, at);
        let now = hw.now();
        self.complete_lazy(now);
        now
    }

    /// Returns whether `cpu` is lazy: it runs idle or a kernel thread while its
    /// root still points at a user address space (x86 Linux's `is_lazy`).
    pub fn is_lazy(&self, cpu: usize) -> bool {
        self.scheduler.cpu(cpu).loaded().is_kernel() && matches!(self.m.cpus[cpu].root, Root::Mm(mm) if !mm.is_kernel())
    }

    /// `no_stale_held`: does `cpu` hold, under the tag it runs with, an entry
    /// from another address space or one a flushed change superseded, or a walk
    /// cached through a page-table page that has been freed?
    ///
    /// A lazy CPU's leaf entries are not judged: it runs no user code, and the
    /// kernel brings it up to date before it returns to the address space (x86
    /// Linux skips lazy CPUs on purpose and catches up through `tlb_gen` in
    /// `switch_mm_irqs_off`); the scan after that switch judges them. They are
    /// counted in [`Oracle::lazy_exempt`]. Its walk cache is judged like any
    /// CPU's: a speculative walk through a freed table page reads whatever the
    /// page holds next, lazy or not (why Linux sends flushes that free page
    /// tables to lazy CPUs too).
    pub(super) fn strict_scan(&mut self, cpu: usize, now: u64) {
        let asid = self.m.cpus[cpu].asid;
        let cur = self.user_root(cpu).map(|(_, uid, _)| uid);
        let lazy = self.is_lazy(cpu);
        let mut found: Vec<(TlbEntry, Option<u32>, u64)> = Vec::new();
        let mut exempt = 0;
        let pt = &self.pt;
        self.m.tlb(cpu).for_each(|e| {
            if !e.usable_under(asid) {
                return;
            }
            let kernel = e.va() >= KERNEL_BASE;
            if !kernel {
                match cur {
                    Some(u) if u != e.mm_uid => {
                        if lazy {
                            exempt += 1;
                        } else {
                            found.push((*e, None, e.va()));
                        }
                        return;
                    }
                    None => return,
                    _ => {}
                }
            }
            let stale = if e.cont() {
                contpte::cont_held_stale(pt, e)
            } else {
                let p = pt.pte(e.pte);
                (e.ver < p.floor).then_some((e.va(), p.floor_obl))
            };
            if let Some((va, obl)) = stale {
                if lazy && !kernel {
                    exempt += 1;
                } else {
                    found.push((*e, Some(obl), va));
                }
            }
        });
        let mut walks = Vec::new();
        self.m.tlb(cpu).for_each_walk(|w| {
            let usable = if w.global { true } else { cur.is_some() && w.asid == asid };
            if usable && pt.table_freed(w.table) {
                walks.push(w);
            }
        });
        self.oracle.lazy_exempt += exempt;
        let uid = cur.unwrap_or(0);
        for w in walks {
            let v = Violation {
                property: Property::NoStaleHeld.name(),
                cpu: cpu as u32,
                time_ns: now as f64 / self.ghz(),
                va: format!("{:#x}", w.va),
                mm: self.mm_name_of_uid(uid),
                detail: format!(
                    "{}caches a walk (asid {}) of address space uid {} through a freed page-table page (PTE arena \
                     chunk {}) under the running tag: a speculative walk reads whatever the page holds next",
                    if lazy { "lazy, " } else { "" },
                    w.asid,
                    w.mm_uid,
                    w.table.chunk
                ),
                change: None,
                flush: None,
            };
            self.oracle.report(v);
        }
        for (e, obl, va) in found {
            match obl {
                Some(o) => self.report_stale(Property::NoStaleHeld, cpu, va, &e, o, uid, now),
                None => {
                    let v = Violation {
                        property: Property::NoStaleHeld.name(),
                        cpu: cpu as u32,
                        time_ns: now as f64 / self.ghz(),
                        va: format!("{:#x}", e.va()),
                        mm: self.mm_name_of_uid(uid),
                        detail: format!(
                            "holds an entry (asid {}) filled from address space uid {} under the running tag",
                            e.asid, e.mm_uid
                        ),
                        change: None,
                        flush: None,
                    };
                    self.oracle.report(v);
                }
            }
        }
    }
}
