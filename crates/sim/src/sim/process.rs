//! Processes and threads: spawning, `fork` (copy-on-write), `clone`, `execve`,
//! `exit` with its address-space teardown, and the reaping of dead address spaces.

use super::*;
use crate::error::Error;

impl Sim {
    pub(super) fn new_mm(&mut self) -> Option<MmId> {
        let slot = self.kern.take_slot(self.cfg.max_mms)?;
        let root = self.pt.new_root();
        let mm = self.kern.open_mm(slot, root, MMAP_BASE);
        self.policy.mm_init(mm);
        Some(mm)
    }

    pub(super) fn new_thread(&mut self, mm: MmId, prog: Box<dyn Program>, cpu: usize, pinned: bool) -> usize {
        let kstack = self.kalloc_page();
        let n = self.scheduler.nthreads();
        let tstruct = if n.is_multiple_of(8) { self.kalloc_page() } else { self.scheduler.thread(n - 1).tstruct() };
        let tid = self.scheduler.add_thread(Thread::new(mm, prog, cpu, pinned, kstack, tstruct));
        self.kern.join(mm);
        tid
    }

    /// Starts a new process running `prog` with a text and a stack mapping,
    /// where a launcher on CPU 0 forking it would start it
    /// (`Sim::start_process`); returns its thread id.
    pub fn spawn(&mut self, prog: Box<dyn Program>) -> Result<usize, Error> {
        let mm = self.new_mm().ok_or(Error::AddressSpaces { max: self.cfg.max_mms })?;
        self.map_image(mm);
        Ok(self.start_process(mm, prog))
    }

    /// Starts a new process running `prog` whose address space maps `image`
    /// instead of the standard text, data and stack (a traced program's memory
    /// as exec and its loader left it, see [`crate::trace`]), placed as
    /// [`Sim::spawn`] places it; returns its thread id. The regions must be page-aligned,
    /// below [`USER_VA_END`] and disjoint.
    pub fn spawn_with(&mut self, prog: Box<dyn Program>, image: &[Region]) -> Result<usize, Error> {
        let mut sorted = image.to_vec();
        sorted.sort_by_key(|r| r.va);
        for (i, r) in sorted.iter().enumerate() {
            let end = r.pages.checked_mul(4096).and_then(|b| r.va.checked_add(b));
            if !r.va.is_multiple_of(4096) || r.pages == 0 || end.is_none_or(|e| e > USER_VA_END) {
                return Err(Error::ImageRegion { va: r.va, pages: r.pages });
            }
            if let Some(next) = sorted.get(i + 1).filter(|n| n.va < r.va + r.pages * 4096) {
                return Err(Error::ImageOverlap { first: r.va, second: next.va });
            }
        }
        let mm = self.new_mm().ok_or(Error::AddressSpaces { max: self.cfg.max_mms })?;
        let m = self.kern.mm_mut(mm);
        for r in &sorted {
            m.map_image(Vma {
                start: r.va,
                pages: r.pages,
                write: r.write,
                file: None,
                cow: false,
                pgoff: 0,
                anon_vma: r.write,
            });
        }
        Ok(self.start_process(mm, prog))
    }

    /// Gives the new address space `mm` its first thread, running `prog`
    /// where a launcher on CPU 0 forking it would start it (Linux's fork
    /// balancing; on FreeBSD, the least-loaded CPU); returns the thread id.
    pub(super) fn start_process(&mut self, mm: MmId, prog: Box<dyn Program>) -> usize {
        let cpu = self.scheduler.fork_cpu(0, 0).unwrap_or_else(|| self.scheduler.least_loaded());
        let tid = self.new_thread(mm, prog, cpu, false);
        self.enqueue_new(tid, cpu, 0, cpu);
        tid
    }

    /// Gives a new address space a program image: text, data and stack.
    pub(super) fn map_image(&mut self, mm: MmId) {
        let m = self.kern.mm_mut(mm);
        m.map_image(Vma {
            start: TEXT_VA,
            pages: TEXT_PAGES,
            write: false,
            file: None,
            cow: false,
            pgoff: 0,
            anon_vma: false,
        });
        m.map_image(Vma {
            start: DATA_VA,
            pages: DATA_PAGES,
            write: true,
            file: None,
            cow: false,
            pgoff: 0,
            anon_vma: true,
        });
        m.map_image(Vma {
            start: STACK_VA,
            pages: STACK_PAGES,
            write: true,
            file: None,
            cow: false,
            pgoff: 0,
            anon_vma: true,
        });
    }

    /// Starts a kernel thread running `prog` on `cpu`: it runs on the kernel's
    /// address space (FreeBSD's `pmap0`, Linux's `init_mm`), so it can touch
    /// kernel addresses only. Returns its thread id.
    pub fn spawn_kernel_thread(&mut self, prog: Box<dyn Program>, cpu: usize) -> usize {
        let cpu = cpu.min(self.scheduler.ncpus() - 1);
        let tid = self.new_thread(MmId::KERNEL, prog, cpu, false);
        self.enqueue_new(tid, cpu, 0, cpu);
        tid
    }

    pub(super) fn fork(
        &mut self,
        cpu: usize,
        tid: usize,
        child: Box<dyn Program>,
        bind: Option<usize>,
        mut now: u64,
    ) -> u64 {
        let c = self.m.costs;
        let parent = self.scheduler.thread(tid).mm();
        let Some(cm) = self.new_mm() else {
            self.error.get_or_insert(format!("fork: {}", Error::AddressSpaces { max: self.cfg.max_mms }));
            return now;
        };
        let proot = self.kern.mm(parent).root();
        // The child's PTEs of pages the parent paged out are swap entries too
        // (copy_nonpresent_pte): a touch swaps them in.
        let (vmas, mmap_next, swapped) = self.kern.mm(parent).fork_copy();
        let m = self.kern.mm_mut(cm);
        m.fork_from(vmas.clone(), mmap_next, swapped);
        let croot = m.root();
        let seq = self.oracle.next_seq();
        let mut changed = Vec::new();
        let mut owed = ptemem::Unflushed::default();
        for v in &vmas {
            if v.file.is_some() {
                // A file mapping's PTEs are not copied: the child faults them in
                // (a private one's copies too, which Linux copies for COW: not modelled).
                continue;
            }
            if self.folios() {
                let (t, o) = self.copy_folio_vma(cpu, parent, cm, *v, now);
                now = t;
                owed.append(o);
                continue;
            }
            let mut slots = Vec::new();
            self.pt.for_each_slot(proot, v.start, v.pages, |va, r| slots.push((va, r)));
            for (va, r) in slots {
                let mut p = self.pt.pte(r);
                if !p.valid() {
                    continue;
                }
                now += c.mem_access * 4;
                if p.writable() {
                    p.flags &= !P_WRITE;
                    p.ver = seq;
                    *self.pt.pte_mut(r) = p;
                    changed.push(r);
                }
                self.frames.get(p.pfn);
                let cr = self.pt.ensure_leaf(croot, va);
                let mut cp = p;
                cp.ver = seq;
                cp.floor = 0;
                cp.floor_obl = 0;
                *self.pt.pte_mut(cr) = cp;
            }
        }
        // Fork balancing places the child (Linux's from the parent's CPU,
        // `crate::sched::fork`; FreeBSD's child takes the least-loaded CPU);
        // `migration` only governs moving threads afterwards. A bound child
        // starts on its CPU and stays there.
        let ccpu = match bind {
            Some(b) => b % self.scheduler.ncpus(),
            None => self.scheduler.fork_cpu(cpu, now).unwrap_or_else(|| self.scheduler.least_loaded()),
        };
        let ct = self.new_thread(cm, child, ccpu, bind.is_some());
        self.scheduler.thread_mut(tid).set_return(ct as u64);
        now += c.kernel.fault_path * 4;
        let mut pf = self.open_flush(cpu, parent, FlushWhat::Mm, "fork-wrprotect", seq, changed, Vec::new(), now);
        pf.arch = owed;
        now = self.flush(cpu, pf, now);
        self.enqueue_new(ct, ccpu, now, cpu);
        now
    }

    /// [`Op::ExitNotify`]: `tid` exits, then its CPU writes one token into pipe
    /// `p` and wakes a reader.
    pub(super) fn exit_notify(&mut self, cpu: usize, tid: usize, p: u32, now: u64) -> u64 {
        let now = self.exit(cpu, tid, now);
        match self.kern.pipe(p) {
            // The dead thread cannot block on a full pipe.
            Some(pipe) if !pipe.is_full() => self.pipe_write(cpu, tid, p, now),
            _ => {
                self.error.get_or_insert(format!("exit notifies pipe {p}, which is unknown or full"));
                now
            }
        }
    }

    pub(super) fn exit(&mut self, cpu: usize, tid: usize, now: u64) -> u64 {
        let mm = self.scheduler.thread(tid).mm();
        self.scheduler.exit(cpu, tid, now);
        // exit_mm: the exiting task keeps mm as its lazy active_mm, with a
        // reference (`mmgrab_lazy_tlb`) its CPU's next switch passes on or drops.
        let now = self.lazy_grab(cpu, mm, false, now);
        if self.kern.leave(mm) > 0 || mm.is_kernel() {
            return now;
        }
        // Last user: tear the address space down while it is still current here
        // (FreeBSD pmap_remove_pages), switch away, then release it.
        self.kern.set_in_exit(true);
        let start = now;
        let now = self.teardown(cpu, mm, "exit", now);
        self.kern.set_in_exit(false);
        self.stats.contpte.exits += 1;
        self.stats.contpte.exit_teardown_cycles += now - start;
        // The exiting thread's CPU leaves the address space (`exit_mm` calls
        // `enter_lazy_tlb` with the exiting task, not the idle one); a lazy-TLB
        // policy may keep it loaded, and then it lives on (Linux's mmgrab by the
        // lazy `active_mm`) until no CPU's root points at it.
        self.enter_lazy(cpu, Lazy::KernelThread, now)
    }

    /// Tears down `mm`, whose last user is leaving it while it is still current on
    /// `cpu`: clears every PTE, flushes the whole address space, frees the frames
    /// after the flush, and queues `mm` for release once no CPU's root points at
    /// it (the caller switches this CPU away). `change` names the teardown for the
    /// oracle. Like `exit_mmap` until v6.14, it first drains the CPU's LRU-add
    /// batch ([`Sim::lru_drain_at_zap`]). Returns the time after the flush.
    pub(super) fn teardown(&mut self, cpu: usize, mm: MmId, change: &'static str, now: u64) -> u64 {
        let mut now = self.lru_drain_at_zap(cpu, now);
        let root = self.kern.mm(mm).root();
        let vmas = self.kern.mm_mut(mm).take_vmas();
        if self.folios() {
            let (t, owed, frames) = self.teardown_folio(cpu, mm, &vmas, change, now);
            let seq = self.oracle.next_seq();
            let pf = self.open_flush(cpu, mm, FlushWhat::Mm, change, seq, Vec::new(), frames, t).with_arch(owed);
            now = self.flush(cpu, pf, t);
            self.kern.bury(mm);
            return now;
        }
        let seq = self.oracle.next_seq();
        let mut frames = Vec::new();
        for v in &vmas {
            let mut slots = Vec::new();
            self.pt.for_each_slot(root, v.start, v.pages, |_, r| slots.push(r));
            for r in slots {
                let p = self.pt.pte_mut(r);
                if p.valid() {
                    frames.push(p.pfn);
                    p.flags = 0;
                    p.ver = seq;
                    now += self.m.costs.mem_access;
                }
            }
        }
        let pf = self.open_flush(cpu, mm, FlushWhat::Mm, change, seq, Vec::new(), frames, now);
        now = self.flush(cpu, pf, now);
        self.kern.bury(mm);
        now
    }

    /// `clone` of a thread into the caller's address space.
    pub(super) fn clone_thread(
        &mut self,
        cpu: usize,
        tid: usize,
        thread: Box<dyn Program>,
        bind: Option<usize>,
        mut now: u64,
    ) -> u64 {
        let mm = self.scheduler.thread(tid).mm();
        let target = match bind {
            Some(b) => b % self.scheduler.ncpus(),
            None => self.scheduler.fork_cpu(cpu, now).unwrap_or_else(|| self.scheduler.least_loaded_near(cpu)),
        };
        let t = self.new_thread(mm, thread, target, bind.is_some());
        self.scheduler.thread_mut(tid).set_return(t as u64);
        // Thread creation (kernel stack, thread structure, register copy) is about
        // half of fork's fixed software path, which also copies the address space:
        // an estimate, as fork's is.
        now += self.m.costs.kernel.fault_path * 2;
        self.enqueue_new(t, target, now, cpu);
        now
    }

    /// `execve`: a fresh address space with a new image replaces the caller's,
    /// which is torn down as exit tears down a last user's.
    pub(super) fn execve(&mut self, cpu: usize, tid: usize, mut now: u64) -> u64 {
        let old = self.scheduler.thread(tid).mm();
        if self.kern.mm(old).users() > 1 {
            self.error.get_or_insert(format!(
                "execve from {old}, which has {} threads: the simulated kernel does not end the other threads",
                self.kern.mm(old).users()
            ));
            return now;
        }
        let Some(new) = self.new_mm() else {
            self.error.get_or_insert(format!("execve: {}", Error::AddressSpaces { max: self.cfg.max_mms }));
            return now;
        };
        self.map_image(new);
        // Image activation (reading the header, building the stack and arguments)
        // is costed like fork's fixed path: an estimate.
        now += self.m.costs.kernel.fault_path * 4;
        self.scheduler.thread_mut(tid).exec_into(new);
        self.kern.exec(old, new);
        now = self.teardown(cpu, old, "execve", now);
        self.switch_mm(cpu, new, now)
    }

    /// Releases every exited address space no CPU's root still points at: frees
    /// its page tables, lets the policy release it and frees its slot.
    pub(super) fn reap(&mut self, cpu: usize, mut now: u64) -> u64 {
        let releases = self.m.root_releases();
        // A release during the scan (by `mm_release`) makes the next call scan again.
        if !self.kern.reap_due(releases) {
            return now;
        }
        let mut i = 0;
        while let Some(mm) = self.kern.zombie(i) {
            if self.m.roots_on(mm) > 0 {
                i += 1;
                continue;
            }
            self.kern.unbury(i);
            self.pt.free_tree(self.kern.mm(mm).root());
            let hw = CpuHw::new(&mut self.m, cpu, now);
            self.policy.mm_release(&hw, mm);
            now = hw.now();
            self.kern.free_slot(mm);
        }
        now
    }
}
