//! The oracle's judgements on the machine: a flush owed for each PTE taken
//! away, discharged by the invalidations that cover it or judged at the
//! points where the kernel relies on it; the contiguous block's and the
//! translations' use checked against the page tables.

use super::*;

impl Machine {
    /// Discharges obligation `id` (its flush returned: the initiator's protocol
    /// stopped waiting) and checks `no_stale_held`: no CPU that runs the process
    /// (not lazily) may still hold the translation under the tag it runs with.
    ///
    /// A CPU inside an interrupt handler is judged when the handler returns
    /// instead ([`Machine::leave_irq`]): it cannot use a user translation
    /// before, which is what lets a target acknowledge a request before it
    /// invalidates (FreeBSD's `invlop_handler`, `sys/amd64/amd64/mp_machdep.c`:
    /// the target "cannot return to userspace before handler finishes"). A target
    /// whose IPI is still pending, not yet taken, is judged now.
    pub fn discharge(&mut self, id: usize, flush: &'static str) -> Result<(), Violation> {
        self.obligations[id].discharged = true;
        self.judge_open(id, flush)
    }

    /// Kills obligation `id`'s translation and judges `no_stale_held` for it on
    /// every CPU as [`Machine::discharge`] does, leaving it open: another CPU's
    /// flush returned that the kernel relies on for it
    /// (`flush_tlb_batched_pending` for a reclaim's clear, or a `munmap` of the
    /// page that found it cleared), while the flush that discharges it, and frees
    /// its frame, is still to come. From now on no CPU may use the translation.
    pub fn judge_open(&mut self, id: usize, flush: &'static str) -> Result<(), Violation> {
        let o = self.obligations[id].clone();
        if o.stale.page.is_some() {
            self.dead.insert((o.stale.uid, o.stale.page.unwrap_or(0), o.stale.ver));
        }
        for c in 0..self.tlbs.len() {
            if self.in_irq[c] || self.in_batch_flush[c] {
                self.deferred[c].insert(Deferred { stale: o.stale.clone(), flush, cpu: o.cpu, rehooked: false });
                continue;
            }
            self.judge_held(c, &o, flush, "")?;
        }
        Ok(())
    }

    /// Marks every late judgement of a page-table page of `slot` at `frame` as
    /// rehooked ([`Deferred::rehooked`]): the process's new page-table page is
    /// at that frame.
    pub(super) fn note_rehook(&mut self, slot: u32, frame: u32) {
        let uid = self.spaces[slot as usize].uid;
        for set in &mut self.deferred {
            let hit = |d: &Deferred| {
                let s = &d.stale;
                s.page.is_none() && s.slot == slot && s.frame == frame && s.uid == uid && !d.rehooked
            };
            if !set.iter().any(hit) {
                continue;
            }
            let marked: Vec<Deferred> =
                set.iter().filter(|d| hit(d)).map(|d| Deferred { rehooked: true, ..d.clone() }).collect();
            set.retain(|d| !hit(d));
            set.extend(marked);
        }
    }

    /// Judges the flushes deferred for CPU `cpu`, which `was` in a window with
    /// interrupts off that has now ended.
    pub(super) fn judge_deferred(&mut self, cpu: usize, was: &str) -> Result<(), Violation> {
        for d in std::mem::take(&mut self.deferred[cpu]).into_iter().filter(|d| !d.rehooked) {
            let o = Obligation { stale: d.stale, cpu: d.cpu, discharged: true };
            let when = format!(" (by cpu{}, while cpu{cpu} {was}, which has now returned)", d.cpu);
            self.judge_held(cpu, &o, d.flush, &when)?;
        }
        Ok(())
    }

    /// Checks `no_stale_held` for obligation `o` (discharged by `flush`) on CPU
    /// `c`; `when` is added to the report after the flush's name.
    pub(super) fn judge_held(&self, c: usize, o: &Obligation, flush: &str, when: &str) -> Result<(), Violation> {
        let (uid, slot) = (o.stale.uid, o.stale.slot);
        let asid = self.roots[c].1;
        let Some(page) = o.stale.page else {
            // A page-table page: no CPU may still cache a walk through it under the
            // tag it runs with, lazily or not (its root may still point there). A
            // CPU in the middle of a context switch is exempt: it runs with
            // interrupts off, and the kernel frees page-table pages only after every
            // CPU has had interrupts on again (`MMU_GATHER_RCU_TABLE_FREE`), by which
            // time its switch is over.
            let frame = o.stale.frame;
            // Judged late (after an interrupt handler), the frame may be the
            // process's page-table page again: a walk through it is then current.
            let live = self.spaces[slot as usize].uid == uid && self.spaces[slot as usize].table == Some(frame);
            // The tags its walks may use: the one it runs with and, until it
            // synchronises its context (arm64's `ISB`), any it wrote over.
            let mut walked = std::iter::once(asid).chain(self.roots.unsynced[c].iter().map(|&(_, a)| a));
            let cached = walked.find(|&a| self.walks[c].contains(&(a, frame, uid)));
            if let (false, false, Some(asid)) = (self.sched.switching[c], live, cached) {
                return Err(Violation {
                    property: "no_stale_held",
                    cpu: c,
                    detail: format!(
                        "after {flush} returned{when}, cpu{c} still caches a walk through the freed page-table page \
                         (frame {frame}) of mm{slot} under {} (asid {asid}): a speculative walk can follow it into \
                         whatever the frame holds next",
                        if asid == self.roots[c].1 {
                            "the tag it runs with"
                        } else {
                            "the tag of a root it wrote over with no context synchronisation (ISB) since"
                        }
                    ),
                });
            }
            return Ok(());
        };
        if self.sched.tasks[c] != Task::User(slot)
            || self.sched.switching[c]
            || self.roots[c].0 != Root::Mm(tlbkit_policy::MmId(slot))
        {
            return Ok(());
        }
        let ver = o.stale.ver;
        if let Some(e) =
            self.tlbs[c].iter().find(|e| (e.global || e.asid == asid) && e.uid == uid && e.page == page && e.ver == ver)
        {
            return Err(Violation {
                property: "no_stale_held",
                cpu: c,
                detail: format!(
                    "after {flush} returned{when}, cpu{c}, running mm{slot}, still holds {} under the tag it runs \
                     with (asid {asid}); the change was {}",
                    describe(e),
                    o.stale.change
                ),
            });
        }
        Ok(())
    }

    /// Checks `no_tlb_conflict` for the contiguous blocks: the valid contiguous
    /// PTEs of a block every CPU may walk agree (Arm ARM, "Misprogramming of the
    /// Contiguous bit"), and no CPU holds a 64 KB and a 4 KB entry of one page
    /// under one tag (a TLB conflict abort, or either translation).
    pub fn check_block(&self) -> Result<(), Violation> {
        if !self.consts.contpte {
            return Ok(());
        }
        for c in 0..self.tlbs.len() {
            if let (Root::Mm(mm), _) = self.roots[c] {
                let s = &self.spaces[mm.index()];
                if !matches!(s.life, Life::Free | Life::Releasing) && !block_agrees(&s.block) {
                    return Err(Violation {
                        property: "no_tlb_conflict",
                        cpu: c,
                        detail: format!(
                            "cpu{c} may walk the contiguous block of mm{} at {:#x}, whose valid contiguous PTEs \
                             disagree: {:?}",
                            mm.0,
                            va_of(BLOCK_PAGE),
                            s.block
                        ),
                    });
                }
            }
            for big in self.tlbs[c].iter().filter(|e| e.big) {
                if let Some(small) = self.tlbs[c]
                    .iter()
                    .find(|e| !e.big && e.page as usize >= BLOCK_PAGE && e.global == big.global && e.asid == big.asid)
                {
                    return Err(Violation {
                        property: "no_tlb_conflict",
                        cpu: c,
                        detail: format!("cpu{c} holds both {} and {}", describe(big), describe(small)),
                    });
                }
            }
        }
        Ok(())
    }

    /// Checks every CPU in user mode: anything it holds under its running tag it
    /// may use at this instant (`no_asid_alias`, `no_stale_use`).
    pub fn check_uses(&self) -> Result<(), Violation> {
        for c in 0..self.tlbs.len() {
            let Task::User(slot) = self.sched.tasks[c] else { continue };
            // A CPU inside an interrupt handler runs the kernel, whatever it
            // interrupted: it uses nothing of the process until the handler returns.
            if !self.sched.user_mode[c] || self.in_irq[c] {
                continue;
            }
            let uid = self.spaces[slot as usize].uid;
            let asid = self.roots[c].1;
            for e in self.tlbs[c].iter().filter(|e| e.global || e.asid == asid) {
                if e.uid != uid {
                    return Err(Violation {
                        property: "no_asid_alias",
                        cpu: c,
                        detail: format!(
                            "cpu{c} runs mm{slot} (uid {uid}) in user mode with asid {asid} and can use {}, filled from \
                             another address space",
                            describe(e)
                        ),
                    });
                }
                if self.dead.contains(&(e.uid, e.page, e.ver)) {
                    return Err(Violation {
                        property: "no_stale_use",
                        cpu: c,
                        detail: format!(
                            "cpu{c} runs mm{slot} in user mode with asid {asid} and can use {}, whose removal was \
                             flushed",
                            describe(e)
                        ),
                    });
                }
            }
        }
        Ok(())
    }
}
