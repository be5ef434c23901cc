//! Memory accesses: TLB lookups, page walks and fills (speculative ones too), page
//! faults, and the oracle's judgement of every translation used.

use super::kwork::{FaultLock, NewFrame};
use super::*;
use crate::error::Error;

impl Sim {
    /// Touches `pages` consecutive pages. The loads of a multi-page touch are
    /// independent, so the out-of-order core overlaps them: their cache and TLB
    /// latency counts `1/mlp`, their walks `1/walkers`; page faults are serial.
    pub(super) fn touch(&mut self, cpu: usize, tid: usize, va: u64, pages: u64, write: bool, mut now: u64) -> u64 {
        let n = pages.min(TOUCH_CHUNK);
        let c = self.m.costs;
        let (start, t0) = (now, self.timing.mark());
        let mut i = 0;
        // The first access restarts one a fault interrupted: it was counted.
        let mut restart = self.scheduler.thread_mut(tid).take_restart();
        while i < n {
            // One page alone gains nothing from the fast path (its one copy is
            // owed and settled at once); trying would cost a lookup's first steps.
            if n - i > 1 && !restart {
                let swept = self.sweep(cpu, va + i * 4096, n - i, write, now);
                now += swept * (c.mem_access + c.tlb_l2_hit);
                i += swept;
                if i == n {
                    break;
                }
            }
            now = match self.access_as(cpu, va + i * 4096, write, now, Some((tid, restart))) {
                Ok(t) => t,
                Err(e) => {
                    self.error.get_or_insert(e.to_string());
                    return now;
                }
            };
            if restart {
                // A restarted access that did not fault leaves no grant behind.
                self.scheduler.thread_mut(tid).take_granted();
            }
            restart = false;
            if self.scheduler.thread(tid).in_fault() {
                // A fault stopped at its unlock: the event ends there, and the
                // thread's next one releases the lock and restarts this access.
                self.scheduler.thread_mut(tid).restart_access();
                break;
            }
            i += 1;
        }
        if pages > 1 {
            let t1 = self.timing.mark();
            let (walk, fault) = (t1.walk - t0.walk, t1.fault - t0.fault);
            let rest = now - start - walk - fault;
            // (A division is dear on the host; most touches walk nothing.)
            let walk = if walk == 0 { 0 } else { walk.div_ceil(c.walkers.max(1)) };
            now = start + fault + rest.div_ceil(c.mlp.max(1)) + walk;
        }
        // The rest: past the chunk, or from the access a fault left to restart.
        if pages > i {
            self.scheduler.thread_mut(tid).resume_later(va + i * 4096, pages - i, write);
        }
        now
    }

    /// The fast path of [`Sim::touch`]: translates up to `pages` consecutive
    /// pages from `va` for as long as each misses the L1 TLB, hits the L2 and
    /// passes the oracle's judgement without a word ([`Tlb::sweep`]), and
    /// counts them as [`Sim::access`] would; returns how many. Each page costs
    /// what `access` charges an L2 hit, which the caller adds.
    ///
    /// It preserves every result: the TLB ends as the lookups one by one leave
    /// it, a page it does not take is left for `access` untouched, and an entry
    /// it takes is one whose use `check_use` would accept (the address space it
    /// was filled from is the one running, its PTE version is at least every
    /// floor) and, for a write, allows writes, whose PTE it then marks written.
    ///
    /// The broadcast invalidations that have reached the CPU by `now`, when
    /// the sweep starts, are applied first; one that reaches it during the
    /// sweep is applied at the next access (the sweep stands for one
    /// operation's loads, which overlap).
    ///
    /// [`Tlb::sweep`]: crate::tlb::Tlb::sweep
    #[inline]
    fn sweep(&mut self, cpu: usize, va: u64, pages: u64, write: bool, now: u64) -> u64 {
        let Some((_, uid)) = self.root_of(cpu, va) else {
            return 0;
        };
        self.m.catch_up(cpu, now);
        let rule = SweepRule { asid: self.m.cpus[cpu].asid, uid, min_ver: self.pt.max_floor(), write };
        let pt = &mut self.pt;
        let done = self.m.tlb(cpu).sweep(va, pages, &rule, |e| {
            if write {
                pt.set_written(e.pte);
            }
        });
        self.stats.mmu.tlb_accesses += done;
        self.stats.mmu.l1_tlb_misses += done;
        done
    }

    /// Returns the page-table root and address-space uid `cpu` translates `va`
    /// with: the kernel's for a kernel address, else the user root's (`None`
    /// while it runs with the reserved root).
    #[inline]
    fn root_of(&self, cpu: usize, va: u64) -> Option<(u32, u32)> {
        if va >= KERNEL_BASE {
            Some((self.kern.kernel_root(), 0))
        } else {
            self.user_root(cpu).map(|(r, u, _)| (r, u))
        }
    }

    /// Returns the page-table root and uid of what `cpu` translates user addresses with.
    #[inline]
    pub(super) fn user_root(&self, cpu: usize) -> Option<(u32, u32, MmId)> {
        match self.m.cpus[cpu].root {
            Root::Mm(mm) => {
                let m = self.kern.mm(mm);
                Some((m.root(), m.uid(), mm))
            }
            Root::Reserved => None,
        }
    }

    /// Judges a TLB hit against ground truth.
    #[inline(always)]
    pub(super) fn check_use(&mut self, cpu: usize, e: TlbEntry, va: u64, cur_uid: u32, now: u64) {
        let kernel = va >= KERNEL_BASE;
        if !kernel && e.mm_uid != cur_uid {
            self.report_alias(cpu, &e, va, cur_uid, now);
            return;
        }
        if e.flags & F_CONT != 0 {
            self.check_cont_use(cpu, e, va, cur_uid, now);
            return;
        }
        // Fast path: an entry filled from a PTE version no floor exceeds cannot
        // be stale, so its PTE need not be read (the judgement is the same).
        // No floor at all, then none in its table: at 4096 CPUs the PTE is a
        // cold line of a large arena, the table's bound one of a small array.
        if e.ver >= self.pt.max_floor() || e.ver >= self.pt.floor_bound(e.pte) {
            debug_assert!(e.ver >= self.pt.pte(e.pte).floor, "a floor was raised outside PageTables::raise_floor");
            return;
        }
        let p = self.pt.pte(e.pte);
        if e.ver < p.floor {
            self.report_stale(Property::NoStaleUse, cpu, va, &e, p.floor_obl, cur_uid, now);
        }
    }

    /// Reports the use of entry `e`, filled from another address space, by
    /// `cpu` running uid `cur_uid` (`no_asid_alias`). (Out of line: the
    /// access it is checked on stays small.)
    #[cold]
    #[inline(never)]
    fn report_alias(&mut self, cpu: usize, e: &TlbEntry, va: u64, cur_uid: u32, now: u64) {
        let mm = self.mm_name_of_uid(cur_uid);
        let v = Violation {
            property: Property::NoAsidAlias.name(),
            cpu: cpu as u32,
            time_ns: now as f64 / self.ghz(),
            va: format!("{va:#x}"),
            mm,
            detail: format!(
                "used a {} entry (asid {}) filled from address space uid {} while running uid {}",
                if e.global() { "global" } else { "non-global" },
                e.asid,
                e.mm_uid,
                cur_uid
            ),
            change: None,
            flush: None,
        };
        self.oracle.report(v);
    }

    #[allow(clippy::too_many_arguments)]
    #[cold]
    #[inline(never)]
    pub(super) fn report_stale(
        &mut self,
        prop: Property,
        cpu: usize,
        va: u64,
        e: &TlbEntry,
        obl: u32,
        cur_uid: u32,
        now: u64,
    ) {
        let g = self.ghz();
        let v = Violation {
            property: prop.name(),
            cpu: cpu as u32,
            time_ns: now as f64 / g,
            va: format!("{va:#x}"),
            mm: self.mm_name_of_uid(cur_uid),
            detail: format!(
                "{} entry (asid {}, frame {}) from PTE version {} predates a flushed change",
                if prop == Property::NoStaleHeld { "holds an" } else { "used an" },
                e.asid,
                e.pfn,
                e.ver
            ),
            change: Some(self.oracle.describe_change(obl, g)),
            flush: Some(self.oracle.describe_flush(obl, g)),
        };
        self.oracle.report(v);
    }

    pub(super) fn mm_name_of_uid(&self, uid: u32) -> String {
        match self.kern.slot_of_uid(uid) {
            Some(0) => "mm:kernel".to_string(),
            Some(s) => format!("mm{s} (uid {uid})"),
            None => format!("uid {uid}"),
        }
    }

    /// Translates and performs one access by `cpu`; returns the time after it.
    pub(super) fn access(&mut self, cpu: usize, va: u64, write: bool, now: u64) -> Result<u64, Error> {
        self.access_as(cpu, va, write, now, None)
    }

    /// [`Sim::access`] by user code: `user` is the thread whose instruction
    /// it is, and whether the instruction is one a fault interrupted being
    /// restarted (not counted again). A fault it takes that holds a lock
    /// returns at its unlock point with the rest left to the thread's next
    /// event ([`Sim::fault`]); the access then returns at once, unfinished
    /// (the caller sees `fault_exit` set), and the thread restarts it.
    pub(super) fn access_as(
        &mut self,
        cpu: usize,
        va: u64,
        write: bool,
        mut now: u64,
        user: Option<(usize, bool)>,
    ) -> Result<u64, Error> {
        // (The two costs it charges, not a copy of them all.)
        let (mem_access, tlb_l2_hit) = (self.m.costs.mem_access, self.m.costs.tlb_l2_hit);
        let Some((root, uid)) = self.root_of(cpu, va) else {
            return Err(Error::ReservedRoot { cpu, va });
        };
        // A restarted access that faults again keeps its fault whole: without
        // that, CPUs that reclaim each other's pages between a fault and its
        // restart (a memcg at its limit) could refault for ever, where the
        // kernel's fresh pages wait in a per-CPU LRU batch (`folio_add_lru`),
        // out of reclaim's reach, until the batch is drained.
        let restarted = user.is_some_and(|(_, restart)| restart);
        let tid = user.filter(|_| !restarted).map(|(tid, _)| tid);
        if !restarted {
            self.stats.mmu.tlb_accesses += 1;
            now += mem_access;
        }
        for _attempt in 0..3 {
            self.m.catch_up(cpu, now);
            let asid = self.m.cpus[cpu].asid;
            let hit = self.m.tlb(cpu).lookup_entry(va, asid);
            if let Some((h, e)) = hit {
                if matches!(h, Hit::L2(_)) {
                    self.stats.mmu.l1_tlb_misses += 1;
                    now += tlb_l2_hit;
                }
                self.check_use(cpu, e, va, uid, now);
                if write && e.flags & F_WRITE == 0 {
                    now = self.timed_fault(cpu, va, write, now, tid)?;
                    if tid.is_some_and(|t| self.scheduler.thread(t).in_fault()) {
                        return Ok(now);
                    }
                    continue;
                }
                if write {
                    self.hw_write(cpu, &e, va);
                }
                return Ok(now);
            }
            self.stats.mmu.l1_tlb_misses += 1;
            self.stats.mmu.tlb_misses += 1;
            if self.mem.any_migrating() {
                now = self.migration_entry_wait(cpu, va, now);
            }
            match self.walk_fill(cpu, root, uid, va, None, &mut now) {
                Some(e) if !write || e.flags & F_WRITE != 0 => {
                    if write {
                        self.hw_write(cpu, &e, va);
                    }
                    return Ok(now);
                }
                _ => {
                    now = self.timed_fault(cpu, va, write, now, tid)?;
                    if tid.is_some_and(|t| self.scheduler.thread(t).in_fault()) {
                        return Ok(now);
                    }
                }
            }
        }
        Err(Error::KeptFaulting { cpu, va })
    }

    /// A write through `e` (hardware dirty-bit management, arm64 DBM, x86 D): a
    /// 4 KB or 2 MB entry marks its own PTE dirty; a 64 KB entry follows
    /// [`Sim::cont_write`]'s rule. The page is written (ground truth).
    #[inline]
    pub(super) fn hw_write(&mut self, cpu: usize, e: &TlbEntry, va: u64) {
        if e.flags & F_CONT != 0 {
            self.cont_write(cpu, e, va);
            return;
        }
        self.pt.set_written(e.pte);
    }

    pub(super) fn timed_fault(
        &mut self,
        cpu: usize,
        va: u64,
        write: bool,
        now: u64,
        user: Option<usize>,
    ) -> Result<u64, Error> {
        let mark = self.timing.mark();
        let t = self.fault(cpu, va, write, now, user)?;
        // Walks inside the fault (none today) are part of its serial time.
        self.timing.fault_since(mark, t - now);
        Ok(t)
    }

    /// Walks `root` for `va` and fills the TLB if the PTE is valid. `spec`:
    /// `None` for a demand walk, whose time is `now` (advanced by its cost);
    /// for a speculative one, the time the hardware walks at (`now` then only
    /// counts the walk's cycles).
    pub(super) fn walk_fill(
        &mut self,
        cpu: usize,
        root: u32,
        uid: u32,
        va: u64,
        spec: Option<u64>,
        now: &mut u64,
    ) -> Option<TlbEntry> {
        let c = self.m.costs;
        self.stats.mmu.page_walks += 1;
        let kernel = va >= KERNEL_BASE;
        let at = spec.unwrap_or(*now);
        let spec = spec.is_some();
        self.m.catch_up(cpu, at);
        let asid = self.m.cpus[cpu].asid;
        let pwc_hit = self.m.tlb(cpu).pwc_lookup(va, asid, kernel);
        let w = self.pt.walk(root, va);
        let loads = match (w, pwc_hit) {
            (Some(_), true) => 1,
            (Some(w), false) => w.levels,
            (None, _) => 2,
        };
        let cost = c.walk_start + loads as u64 * c.walk_level;
        *now += cost;
        if !spec {
            self.timing.count_walk(cost);
        }
        let w = w?;
        // Every 4 KB walk fills the walk cache, also after a hit in it: the
        // LRU slot then takes a second copy of the descriptor, where a real
        // walker allocates nothing. Kept as it is while results must stay
        // byte-identical; filling only on a miss changes the walk
        // costs of every run.
        // The TLB's time of the fill: after the walk.
        let at = if spec { at } else { *now };
        if !w.huge {
            let table = self.pt.table_of(w.pte);
            self.m.pwc_fill(cpu, va, asid, kernel, table, uid, at);
        }
        let flags = self.pt.pte(w.pte).flags;
        if flags & P_VALID == 0 {
            return None;
        }
        if flags & P_CONT != 0 {
            if let Some(e) = self.fill_cont(cpu, w.pte, uid, va, spec, *now, at) {
                return Some(e);
            }
        }
        let pte = self.pt.pte_mut(w.pte);
        // The walker sets the access flag (hardware AF management).
        pte.flags |= P_ACCESS;
        let pte = *pte;
        let mut flags = 0;
        if pte.flags & P_GLOBAL != 0 {
            flags |= F_GLOBAL;
        }
        if pte.writable() {
            flags |= F_WRITE;
        }
        let shift = if w.huge {
            flags |= F_HUGE;
            SHIFT_2M
        } else {
            SHIFT_4K
        };
        let e = TlbEntry {
            tag: va >> shift,
            pfn: pte.pfn,
            asid,
            flags,
            valid: true,
            mm_uid: uid,
            ver: pte.ver,
            pte: w.pte,
        };
        if self.m.tlb(cpu).may_hold_cont() {
            self.check_overlap(cpu, &e, *now);
        }
        self.m.fill(cpu, e, spec, at);
        Some(e)
    }

    /// A kernel access (always mapped).
    pub(super) fn kaccess(&mut self, cpu: usize, va: u64, now: u64) -> u64 {
        match self.access(cpu, va, false, now) {
            Ok(t) => t,
            Err(e) => {
                self.error.get_or_insert(e.to_string());
                now
            }
        }
    }

    /// The hardware fills the TLB from a random valid PTE of the current root,
    /// at `now`.
    pub(super) fn spec_fill(&mut self, cpu: usize, now: u64) {
        let Some((root, uid, mm)) = self.user_root(cpu) else {
            return;
        };
        if mm.is_kernel() {
            return;
        }
        let n = self.kern.mm(mm).vmas().len();
        if n == 0 {
            return;
        }
        let v = self.kern.mm(mm).vmas()[(self.rng.next_u64() % n as u64) as usize];
        let va = v.start + (self.rng.next_u64() % v.pages) * 4096;
        let mut t = 0;
        if self.walk_fill(cpu, root, uid, va, Some(now), &mut t).is_some() {
            self.stats.mmu.spec_fills += 1;
        }
    }

    pub(super) fn vma_of(&self, mm: MmId, va: u64) -> Option<Vma> {
        self.kern.mm(mm).vmas().iter().copied().find(|v| v.start <= va && va < v.end())
    }

    pub(super) fn new_pte(&mut self, pfn: u64, write: bool) -> Pte {
        let mut flags = P_VALID | P_USER;
        if write {
            flags |= P_WRITE;
        }
        if self.user_global {
            flags |= P_GLOBAL;
        }
        Pte { pfn, flags, ver: self.oracle.next_seq(), ..Pte::default() }
    }

    /// Allocates a frame for `cpu` at `now` on `cpu`'s NUMA node: the default
    /// memory policy's first touch (`alloc_pages` prefers `numa_node_id()`;
    /// the model's nodes never run out).
    pub(super) fn alloc_frame(&mut self, cpu: usize, now: u64) -> u64 {
        let (pfn, obl) = self.frames.alloc();
        self.kw.lru.fresh(pfn);
        self.check_reuse(cpu, obl, || format!("frame {pfn}"), now);
        self.frames.set_node(pfn, self.cpu_node(cpu));
        pfn
    }

    /// Reports `no_reuse_while_mapped` if the frame just handed out, named by
    /// `frame`, was freed under obligation `obl` (0: none) and that obligation's
    /// flush has not returned yet.
    pub(crate) fn check_reuse(&mut self, cpu: usize, obl: u32, frame: impl FnOnce() -> String, now: u64) {
        if obl == 0 || self.oracle.discharged(obl) {
            return;
        }
        let g = self.ghz();
        let v = Violation {
            property: Property::NoReuseWhileMapped.name(),
            cpu: cpu as u32,
            time_ns: now as f64 / g,
            va: "-".into(),
            mm: "-".into(),
            detail: format!("{} handed out again while a TLB may still map it", frame()),
            change: Some(self.oracle.describe_change(obl, g)),
            flush: Some(self.oracle.describe_flush(obl, g)),
        };
        self.oracle.report(v);
    }

    /// A user page fault: demand allocation, copy-on-write, or a stale read-only
    /// entry after an upgrade, under its VMA's lock or `mmap_lock`
    /// ([`Sim::fault_lock`]).
    ///
    /// A fault from user code (`user`: its thread) that holds a lock returns
    /// at its unlock point and leaves the release and the exception's return
    /// to the thread's next event ([`Sim::fault_exit`]): the release is an
    /// atomic on a line the other CPUs' faults take, and run in the same
    /// event as the acquisition it would find the line still this CPU's
    /// whatever they did in between (`vma_end_read` and `mmap_read_unlock`
    /// are separate accesses of the line, at the end of
    /// `do_user_addr_fault`/`do_page_fault`, Linux `arch/x86/mm/fault.c`,
    /// `arch/arm64/mm/fault.c`). Where the kernel puts `pgd` on a line of
    /// `mmap_lock`'s words (`crate::mm_layout`), such a fault returns
    /// earlier still, at its read of `pgd` just after the lock: the rest of
    /// the fault has run, and the read, at the thread's next event
    /// ([`Sim::fault_pgd_read`]), finds the line as the other CPUs' accesses
    /// before it left it and delays the fault's end by what it costs.
    pub(super) fn fault(
        &mut self,
        cpu: usize,
        va: u64,
        write: bool,
        mut now: u64,
        user: Option<usize>,
    ) -> Result<u64, Error> {
        let c = self.m.costs;
        // A fault that slept in mmap_lock's wait queue goes on holding the
        // read lock its waker granted: its entry, path and lock were charged
        // before it slept. (Its restarted access passes no `user`: the
        // thread is the one running here.)
        let running = user.or_else(|| self.scheduler.cpu(cpu).cur());
        let granted = running.is_some_and(|tid| self.scheduler.thread_mut(tid).take_granted());
        if !granted {
            self.stats.mmu.page_faults += 1;
            now += c.exception_entry + c.kernel.fault_path;
        }
        let Some((root, _, mm)) = self.user_root(cpu) else {
            return Err(Error::NoUserRoot { cpu, va });
        };
        let vma = self.vma_of(mm, va).ok_or(Error::NotMapped { va, mm })?;
        if write && !vma.write {
            return Err(Error::ReadOnly { va, mm });
        }
        let (locked, held) = if granted {
            (now, FaultLock::Mmap)
        } else {
            self.fault_lock(cpu, mm, (vma, va, write), user.is_some(), now)
        };
        if let (FaultLock::Asleep, Some(tid)) = (held, user) {
            // It sleeps behind the writer; the access restarts after its wake-up.
            self.scheduler.thread_mut(tid).fault_asleep();
            self.sleep_on_mmap_lock(cpu, tid, mm, locked);
            return Ok(locked);
        }
        // Its read of pgd, first after the lock: at the thread's next event
        // where the read may find the line another CPU's (see below).
        let pgd_later = user.is_some() && !matches!(held, FaultLock::None) && self.kw.pgd_on_lock_line();
        let t = if pgd_later { locked } else { self.fault_pgd(cpu, mm, locked) };
        // A read fault that maps the zero page charges nothing.
        let zero = self.maps_zero_page(mm, vma, va, write);
        if !vma.anon_vma && ((vma.file.is_none() && !zero) || (vma.cow && write)) {
            // anon_vma_prepare: the fault puts a page of the mapping's own in it.
            self.kern.mm_mut(mm).prepare_anon_vma(vma.start);
        }
        let t = if zero { t } else { self.memcg_charge_fault(cpu, mm, vma, va, t) };
        let t = self.memcg_charge_file(cpu, vma, va, t);
        let t = if self.folios() || vma.file.is_some() {
            self.fault_folio(cpu, mm, vma, va, write, t)
        } else {
            self.fault_page(cpu, root, mm, vma, va, write, zero, t)
        };
        if let (Some(tid), FaultLock::Vma(_) | FaultLock::Mmap) = (user, held) {
            if let FaultLock::Mmap = held {
                // A writer's down_write until then waits for this read hold.
                self.kw.mmap_lock(mm).read_held_until(t);
            }
            if pgd_later {
                // The read of pgd, on a line of mmap_lock's words, runs at its
                // own event at its time, after the other CPUs' accesses before
                // it; what it costs beyond a hit delays the fault's end.
                self.scheduler.thread_mut(tid).read_pgd_later(mm, held, t - locked);
                return Ok(locked);
            }
            // The unlock is an atomic on a line other CPUs take too: it runs
            // at its own event, after theirs that come before it.
            self.scheduler.thread_mut(tid).end_fault_later(mm, held);
            return Ok(t);
        }
        Ok(self.fault_unlock(cpu, mm, held, t) + c.exception_exit)
    }

    /// The read of `mm->pgd` by a fault from user code on `cpu` that
    /// [`Sim::fault`] left to the thread's next event, at `now`; the rest of
    /// the fault, run already, takes `rest` cycles after a hit. Returns the
    /// fault's end; its release is left to the next event.
    pub(super) fn fault_pgd_read(
        &mut self,
        cpu: usize,
        tid: usize,
        mm: MmId,
        held: FaultLock,
        rest: u64,
        now: u64,
    ) -> u64 {
        let end = self.fault_pgd(cpu, mm, now) + rest;
        if let FaultLock::Mmap = held {
            self.kw.mmap_lock(mm).read_held_until(end);
        }
        self.scheduler.thread_mut(tid).end_fault_later(mm, held);
        self.timing.count_fault(end - now);
        self.stats.kernel_cycles += end - now;
        end
    }

    /// A fault's read of `mm->pgd` on `cpu` at `now` where the kernel puts
    /// `pgd` on a line of `mmap_lock`'s words (`crate::mm_layout`); returns
    /// when the fault goes on. A hit is among the fault path's own loads
    /// (`fault_path`): only what the read costs beyond it is charged.
    pub(super) fn fault_pgd(&mut self, cpu: usize, mm: MmId, now: u64) -> u64 {
        if !self.kw.pgd_on_lock_line() {
            return now;
        }
        let done = self.m.kread(cpu, now, self.kw.mm_word(mm, |l| l.pgd), 0);
        done.saturating_sub(self.m.costs.mem_access).max(now)
    }

    /// The end of a fault from user code that [`Sim::fault`] left to the
    /// thread's next event: the lock's release and the exception's return,
    /// counted as the fault's time. Returns when `cpu` goes on.
    pub(super) fn fault_exit(&mut self, cpu: usize, mm: MmId, held: FaultLock, now: u64) -> u64 {
        let end = self.fault_unlock(cpu, mm, held, now) + self.m.costs.exception_exit;
        self.timing.count_fault(end - now);
        self.stats.kernel_cycles += end - now;
        end
    }

    /// Returns whether a fault on `va` of `vma` maps the shared zero page
    /// ([`crate::preset::Kernel::maps_zero_page`]): a read fault on private
    /// anonymous memory with no page there yet and none paged out, with base
    /// pages (the large-folio paths, `contpte`, are not modelled with it).
    pub(super) fn maps_zero_page(&self, mm: MmId, vma: Vma, va: u64, write: bool) -> bool {
        if write || vma.file.is_some() || self.folios() || !self.cfg.preset.kernel.maps_zero_page() {
            return false;
        }
        let page = va & !4095;
        let root = self.kern.mm(mm).root();
        let present = self.pt.walk(root, page).is_some_and(|w| self.pt.pte(w.pte).valid());
        !present && !self.kern.mm(mm).is_swapped(page)
    }

    /// The body of a fault on a base page of `vma` (no large folios); `zero`:
    /// it maps the zero page ([`Sim::maps_zero_page`]).
    #[allow(clippy::too_many_arguments)]
    fn fault_page(
        &mut self,
        cpu: usize,
        root: u32,
        mm: MmId,
        vma: Vma,
        va: u64,
        write: bool,
        zero: bool,
        mut now: u64,
    ) -> u64 {
        let c = self.m.costs;
        let r = self.pt.ensure_leaf(root, va & !4095);
        let pte = self.pt.pte(r);
        if zero {
            // The zero page, read-only: nothing allocated, zeroed or charged.
            *self.pt.pte_mut(r) = Pte { floor: pte.floor, floor_obl: pte.floor_obl, ..self.new_pte(ZERO_PFN, false) };
        } else if !pte.valid() {
            let pfn = self.alloc_frame(cpu, now);
            now = self.kalloc_work(cpu, NewFrame::Page(pfn), now);
            now = self.write_pages(cpu, 1, None, now);
            // The slot keeps its floor: an entry from before a flushed unmap or
            // zap of this page stays stale after the page is faulted in again.
            let new = Pte { floor: pte.floor, floor_obl: pte.floor_obl, ..self.new_pte(pfn, vma.write) };
            *self.pt.pte_mut(r) = new;
            self.memcg_add(mm, va & !4095, pfn, 1);
            now = self.note_swapin(mm, va & !4095, 1, now);
        } else if write && !pte.writable() {
            if self.frames.refs(pte.pfn) > 1 {
                // Copy-on-write: a new frame replaces the shared one (of the
                // zero page, a zeroed frame: `wp_page_copy`'s
                // `alloc_zeroed_user_highpage_movable`, charged as a first write).
                let from_zero = pte.pfn == ZERO_PFN;
                let pfn = self.alloc_frame(cpu, now);
                now = self.kalloc_work(cpu, NewFrame::Page(pfn), now);
                now = self.write_pages(cpu, 1, (!from_zero).then(|| self.frames.node(pte.pfn)), now);
                if from_zero {
                    self.memcg_add(mm, va & !4095, pfn, 1);
                }
                let new = self.new_pte(pfn, true);
                let seq = new.ver;
                *self.pt.pte_mut(r) = new;
                let pf = self.open_flush(cpu, mm, FlushWhat::Page(va & !4095), "cow", seq, vec![r], vec![pte.pfn], now);
                now = self.flush(cpu, pf, now);
            } else {
                let mut new = pte;
                new.flags |= P_WRITE;
                new.ver = self.oracle.next_seq();
                *self.pt.pte_mut(r) = new;
            }
        } else {
            // A stale, weaker entry: the PTE already allows the access.
            self.m.tlb(cpu).invalidate(Inval::VaAll { va });
            now += c.local.tlbi_local_va;
        }
        now
    }
}
