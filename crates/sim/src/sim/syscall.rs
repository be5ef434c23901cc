//! System-call dispatch, pipes with blocking reads, and the kernel path that maps,
//! copies and unmaps buffer pages in the kernel's address space.

use super::*;

/// `-ENOMEM` as a system call returns it to user space.
const ENOMEM: u64 = (-12i64) as u64;

/// Returns how system call `s` takes its address space's `mmap_lock`: for
/// writing (`Some(true)`) while the VMAs change, for reading while only
/// their pages do; `None` if it does not.
pub(super) fn mmap_lock_mode(s: &Sys) -> Option<bool> {
    match s {
        Sys::Mmap { .. }
        | Sys::MmapFile { .. }
        | Sys::MmapFixed { .. }
        | Sys::Mprotect { .. }
        | Sys::Fork(_)
        | Sys::ForkOn(..)
        | Sys::Munmap { .. } => Some(true),
        Sys::Madvise { .. } | Sys::MadvisePageout { .. } => Some(false),
        _ => None,
    }
}

impl Sim {
    pub(super) fn syscall(&mut self, cpu: usize, tid: usize, s: Sys, now: u64) -> u64 {
        let mm = self.scheduler.thread(tid).mm();
        if mm.is_kernel()
            && matches!(
                s,
                Sys::Mmap { .. }
                    | Sys::MmapFile { .. }
                    | Sys::MmapFixed { .. }
                    | Sys::Munmap { .. }
                    | Sys::Mprotect { .. }
                    | Sys::Madvise { .. }
                    | Sys::MadvisePageout { .. }
                    | Sys::FlushRange { .. }
                    | Sys::Fork(_)
                    | Sys::ForkOn(..)
                    | Sys::Execve
            )
        {
            self.error.get_or_insert(
                "a kernel thread has no user address space to map, unmap, protect, advise, flush, fork or exec".into(),
            );
            return now;
        }
        if matches!(
            s,
            Sys::MmapFixed { .. }
                | Sys::Munmap { .. }
                | Sys::Mprotect { .. }
                | Sys::Madvise { .. }
                | Sys::MadvisePageout { .. }
                | Sys::FlushRange { .. }
        ) {
            // These end in a flush of the address space whose first reads on
            // the issuing TLB (its ASID filter and count) a large machine's
            // other CPUs have long evicted from the host's cache.
            self.m.tlb_whole(cpu).prefetch_asid(self.m.cpus[cpu].asid);
        }
        let Some(write) = mmap_lock_mode(&s) else {
            return self.syscall_body(cpu, tid, s, now);
        };
        if !write && self.mmap_reader_sleeps(mm, now) {
            // mmap_read_lock behind a writer: the reader sleeps in the wait
            // queue and runs on, holding the read lock, after the writer's
            // release wakes it (syscall_granted).
            let t = self.mmap_lock_queue(cpu, mm, false, now);
            self.scheduler.thread_mut(tid).sys_asleep(s);
            self.sleep_on_mmap_lock(cpu, tid, mm, t);
            return t;
        }
        if write {
            if let Some(t) = self.mmap_writer_sleeps(mm, now) {
                // mmap_write_lock behind readers: the writer sleeps in the
                // wait queue until the last reader's release wakes it
                // (sim/mmap_writer.rs).
                self.scheduler.thread_mut(tid).sys_asleep(s);
                return self.sleep_behind_readers(cpu, tid, mm, t);
            }
        }
        self.syscall_locked(cpu, tid, s, write, now)
    }

    /// Runs system call `s` of `tid` on `cpu` from `now` under its address
    /// space's `mmap_lock`, taken for writing (`write`) or reading: munmap
    /// writes, then reads while it zaps. Returns when `cpu` goes on.
    pub(super) fn syscall_locked(&mut self, cpu: usize, tid: usize, s: Sys, write: bool, now: u64) -> u64 {
        let c = self.m.costs;
        let mm = self.scheduler.thread(tid).mm();
        let mut now = self.mmap_lock(cpu, mm, write, now);
        let mut write = write;
        if let Sys::Munmap { .. } = s {
            // Detach the VMAs (the path's fault_path), then zap under the read hold.
            now = self.mmap_downgrade(cpu, mm, now + c.kernel.fault_path) - c.kernel.fault_path;
            write = false;
        }
        let end = self.syscall_body(cpu, tid, s, now);
        self.mmap_unlock(cpu, mm, write, end)
    }

    /// Runs on system call `s` of `tid` on `cpu` from `now`, after its sleep in
    /// `mmap_lock`'s wait queue: a reader holds the read lock its waker
    /// granted (`rwsem_mark_wake`), runs its body and releases the lock; a
    /// writer takes the lock first ([`Sim::writer_granted`]).
    pub(super) fn syscall_granted(&mut self, cpu: usize, tid: usize, s: Sys, now: u64) -> u64 {
        if mmap_lock_mode(&s) == Some(true) {
            return self.writer_granted(cpu, tid, s, now);
        }
        let mm = self.scheduler.thread(tid).mm();
        let end = match s {
            Sys::Madvise { va, pages } | Sys::MadvisePageout { va, pages }
                if va.is_multiple_of(4096) && !self.all_mapped(mm, va, pages) =>
            {
                // Another thread unmapped part of the range while this one
                // slept: `madvise_walk_vmas` advises each VMA the range still
                // meets and returns -ENOMEM.
                let mut t = now;
                for (start, n) in self.mapped_pieces(mm, va, pages) {
                    let piece = match s {
                        Sys::Madvise { .. } => Sys::Madvise { va: start, pages: n },
                        _ => Sys::MadvisePageout { va: start, pages: n },
                    };
                    t = self.syscall_body(cpu, tid, piece, t);
                }
                self.scheduler.thread_mut(tid).set_return(ENOMEM);
                t
            }
            _ => self.syscall_body(cpu, tid, s, now),
        };
        self.mmap_unlock(cpu, mm, false, end)
    }

    /// Runs system call `s` of `tid` on `cpu` from `now` (its locks held).
    fn syscall_body(&mut self, cpu: usize, tid: usize, s: Sys, now: u64) -> u64 {
        let c = self.m.costs;
        let mm = self.scheduler.thread(tid).mm();
        match s {
            Sys::Mmap { pages, write } => {
                let va = self.mmap(mm, pages, write, None, false);
                self.scheduler.thread_mut(tid).set_return(va);
                now + c.kernel.fault_path
            }
            Sys::MmapFile { file, pages, write, private } => {
                let va = self.mmap(mm, pages, write, Some(file), private);
                self.scheduler.thread_mut(tid).set_return(va);
                now + c.kernel.fault_path
            }
            Sys::MmapFixed { va, pages, write } => {
                self.scheduler.thread_mut(tid).set_return(va);
                self.forget_swapped(mm, va, pages);
                self.mmap_fixed(cpu, mm, va, pages, write, now)
            }
            Sys::Munmap { va, pages } => {
                self.forget_swapped(mm, va, pages);
                self.munmap(cpu, mm, va, pages, now)
            }
            Sys::Mprotect { va, pages, write } => self.mprotect(cpu, mm, va, pages, write, now),
            Sys::Fork(child) => self.fork(cpu, tid, child, None, now),
            Sys::ForkOn(bind, child) => self.fork(cpu, tid, child, Some(bind), now),
            Sys::Clone(thread) => self.clone_thread(cpu, tid, thread, None, now),
            Sys::CloneOn(bind, thread) => self.clone_thread(cpu, tid, thread, Some(bind), now),
            Sys::Madvise { va, pages } => {
                self.forget_swapped(mm, va, pages);
                self.madvise_dontneed(cpu, mm, va, pages, now)
            }
            Sys::MadvisePageout { va, pages } => self.madvise_pageout(cpu, mm, va, pages, now),
            Sys::MigratePages { tid: target, from, to } => {
                let (t, moved) = self.migrate_pages(cpu, target, from, to, now);
                self.scheduler.thread_mut(tid).set_return(moved);
                t
            }
            Sys::Execve => self.execve(cpu, tid, now),
            Sys::KernelMapCycle { pages } => self.kmap_cycle(cpu, pages, now),
            Sys::FlushRange { va, pages } => self.flush_call(cpu, mm, va, pages, now),
            Sys::Pipe => self.new_pipe(tid, u64::MAX, now),
            Sys::PipeBounded(cap) => self.new_pipe(tid, cap.max(1), now),
            Sys::PipeWrite(p) => self.pipe_write(cpu, tid, p, now),
            Sys::PipeRead(p) => self.pipe_read(cpu, tid, p, now),
            Sys::Null => now,
            Sys::Yield => {
                self.scheduler.requeue(cpu, tid, now, true);
                self.scheduler.set_cur(cpu, None, now);
                now
            }
        }
    }

    /// Creates a pipe holding at most `cap` tokens and returns its id to `tid`.
    fn new_pipe(&mut self, tid: usize, cap: u64, now: u64) -> u64 {
        let kva = self.kalloc_page();
        let p = self.kern.new_pipe(cap, kva);
        self.scheduler.thread_mut(tid).set_return(p as u64);
        now + self.m.costs.kernel.pipe_op
    }

    pub(super) fn pipe_write(&mut self, cpu: usize, tid: usize, p: u32, mut now: u64) -> u64 {
        let c = self.m.costs;
        let Some(pipe) = self.kern.pipe_mut(p) else {
            self.error.get_or_insert(format!("write to unknown pipe {p}"));
            return now;
        };
        let kva = pipe.kva();
        if pipe.is_full() {
            // Full: sleep until a read makes room, then write again.
            pipe.wait_to_write(tid);
            self.scheduler.block(cpu, tid, Retry::Write(p), now);
            now = self.kaccess(cpu, self.kern.ktext() + KTEXT_IPC, now);
            let t = self.pipe_locked(cpu, p, now, c.kernel.pipe_op);
            return self.kaccess(cpu, kva, t);
        }
        let waiter = pipe.put();
        now = self.kaccess(cpu, self.kern.ktext() + KTEXT_IPC, now);
        let t = self.pipe_locked(cpu, p, now, c.kernel.pipe_op);
        now = self.kaccess(cpu, kva, t);
        if let Some(w) = waiter {
            now = self.kaccess(cpu, self.scheduler.thread(w).tstruct(), now);
            now = self.wake(w, cpu, now, true);
        }
        now
    }

    pub(super) fn pipe_read(&mut self, cpu: usize, tid: usize, p: u32, now: u64) -> u64 {
        let c = self.m.costs;
        let Some(kva) = self.kern.pipe(p).map(|pipe| pipe.kva()) else {
            self.error.get_or_insert(format!("read from unknown pipe {p}"));
            return now;
        };
        let now = self.kaccess(cpu, self.kern.ktext() + KTEXT_IPC, now);
        let Some(pipe) = self.kern.pipe_mut(p) else {
            return now;
        };
        if pipe.has_token() {
            let writer = pipe.take();
            let t = self.pipe_locked(cpu, p, now, c.kernel.pipe_op);
            let mut now = self.kaccess(cpu, kva, t);
            if let Some(w) = writer {
                now = self.kaccess(cpu, self.scheduler.thread(w).tstruct(), now);
                now = self.wake(w, cpu, now, true);
            }
            return now;
        }
        pipe.wait_to_read(tid);
        self.scheduler.block(cpu, tid, Retry::Read(p), now);
        let t = self.pipe_locked(cpu, p, now, c.kernel.pipe_op);
        self.kaccess(cpu, kva, t)
    }

    /// A kernel map cycle: map buffer pages at a pool VA (`pmap_qenter`), copy
    /// each one, unmap them (`pmap_qremove`) and invalidate the range on every CPU.
    pub(super) fn kmap_cycle(&mut self, cpu: usize, pages: u64, mut now: u64) -> u64 {
        if pages == 0 || pages > KMAP_SLOT_PAGES {
            self.error.get_or_insert(format!("kernel map cycle of {pages} pages: give 1 to {KMAP_SLOT_PAGES}"));
            return now;
        }
        let c = self.m.costs;
        let va = self.kern.kmap_slot();
        let kroot = self.kern.kernel_root();
        // The copy below looks each page up: fetch its TLB sets while the PTEs are entered.
        self.m.prefetch_l2(cpu, va, pages);
        // pmap_qenter: one global PTE store per page. The pool's PTEs are invalid
        // between cycles, so entering them needs no invalidation (FreeBSD
        // invalidates only when an old PTE was valid).
        let (mut slots, mut frames) = self.spare_lists();
        for i in 0..pages {
            let pfn = self.alloc_frame(cpu, now);
            let r = self.pt.ensure_leaf(kroot, va + i * 4096);
            let old = self.pt.pte(r);
            debug_assert!(!old.valid(), "kernel map pool slot still mapped");
            let ver = self.oracle.next_seq();
            // The slot keeps its floor, so an entry from an earlier cycle stays stale.
            *self.pt.pte_mut(r) = Pte {
                pfn,
                flags: P_VALID | P_WRITE | P_GLOBAL | P_ACCESS,
                ver,
                floor: old.floor,
                floor_obl: old.floor_obl,
                written: false,
            };
            slots.push(r);
            now += c.mem_access;
        }
        // The copy (uiomove): a write to each page through the TLB, and the copy itself.
        for i in 0..pages {
            now = match self.access(cpu, va + i * 4096, true, now) {
                Ok(t) => t + c.kernel.page_copy,
                Err(e) => {
                    self.error.get_or_insert(e.to_string());
                    return now;
                }
            };
        }
        // pmap_qremove: clear each PTE, then one ranged invalidation of kernel_pmap.
        let seq = self.oracle.next_seq();
        for &r in &slots {
            let p = self.pt.pte_mut(r);
            frames.push(p.pfn);
            p.flags = 0;
            p.ver = seq;
            now += c.mem_access;
        }
        let pf = self.open_flush(
            cpu,
            MmId::KERNEL,
            FlushWhat::KernelRange(va, pages),
            "kmap-unmap",
            seq,
            slots,
            frames,
            now,
        );
        self.flush(cpu, pf, now)
    }
}
