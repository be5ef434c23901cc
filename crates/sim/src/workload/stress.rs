//! A flush-path stress test for the `--strict` oracle: threads of one address
//! space on many CPUs at once, changing and using shared mappings.
//!
//! The origins' workloads rarely flush a user mapping that another CPU is using at
//! that moment: their processes are single-threaded, or their second thread
//! sleeps, so on x86 almost every user flush is local and a shootdown that
//! forgot its remote CPUs goes unnoticed. This workload is built to make every
//! user flush of every policy matter on other CPUs.
//!
//! What it runs: `procs` processes. Each maps an anonymous region of `pages`
//! pages, writes all of it, and starts `threads - 1` more threads (`clone`,
//! placed by fork balancing, or on the least-loaded CPU on FreeBSD, so a
//! process's threads spread over the machine). Every thread then makes
//! `iters` operations, each chosen by its own
//! generator, seeded from the run's seed (the same seed gives the same run). The
//! region is cut into chunks of 16 pages; an operation picks a chunk and a random
//! sub-range of it, so operations of different threads overlap partially:
//!
//! - a touch (read, or write where the pages are writable) of the mapped pages
//!   of the sub-range: entries of the mm in the TLBs of many CPUs;
//! - `munmap` of the sub-range (the pages other threads touch; a later
//!   `mmap(MAP_FIXED)` of the chunk maps it again);
//! - `mmap(MAP_FIXED)` of the whole chunk, zapping what it replaces;
//! - `mprotect` read-only of a mapped sub-range, and writable again;
//! - `madvise(MADV_DONTNEED)` of a mapped sub-range;
//! - `munmap` of the whole region followed by its `mmap(MAP_FIXED)` (a range
//!   past x86 Linux's 33-page ceiling with the default size: a whole-mm flush);
//! - `fork` (at most `forks` per thread): the copy-on-write write-protection of
//!   a multi-threaded parent flushes the whole mm while its other threads run,
//!   the parent's next writes copy pages (a one-page flush on a CPU while others
//!   run the mm), and the child touches, writes, advises and unmaps its copy and
//!   exits (a teardown of an mm that other CPUs may still hold loaded);
//! - the kernel map cycle ([`Sys::KernelMapCycle`]): a kernel-range flush;
//! - `sched_yield`, so that threads of both processes share CPUs, ASIDs and
//!   PCID slots change hands, and, with migration (`--set migration=on`, the
//!   default on the Linux presets), idle CPUs steal or pull
//!   threads mid-run.
//!
//! A thread decides each operation from the region's current state (which page
//! is mapped, which is writable) at the moment it runs, and a touch's pages
//! stay out of the other threads' `munmap` and `mprotect` until the toucher
//! decides its next operation (a touch that faults returns to the task and
//! restarts after the fault's unlock, a later event, so other threads run in
//! between). A mapping change (`munmap`, `mprotect`, `mmap(MAP_FIXED)`, and a
//! `fork`'s copy of the whole region) may sleep on `mmap_lock` behind readers
//! and take effect well after it was chosen, so until its thread decides
//! again the other threads choose nothing on its pages but a yield. So no
//! operation faults on a page another thread removed. The last thread of each process exits last
//! and tears the address space down while the CPUs its threads ran on may still
//! have it loaded lazily; its page-table pages are freed when no CPU's root
//! points at it any more, which the oracle's freed-table check judges.
//!
//! Flush paths reached, per policy, while other CPUs run the mm or hold its
//! entries: the range flush (`flush_range`: x86 Linux's `flush_tlb_mm_range`
//! IPIs to the non-lazy CPUs of `mm_cpumask`, per page up to its 33-page ceiling
//! and a whole-PCID flush past it, which the whole-region `munmap` of the default
//! 64 pages is; FreeBSD x86's `pmap_invalidate_range` IPIs to the other CPUs of
//! `pm_active` under each completion protocol; arm64's broadcast per-page
//! `TLBI VAE1IS`; the skip-broadcast policy's choice between a local and a
//! broadcast TLBI, which has to broadcast here), the page flush (`flush_page`:
//! copy-on-write faults after a fork), the whole-mm flush (`flush_mm`: the fork's
//! write-protection of a running multi-threaded parent, and exit teardowns, with
//! freed tables on x86 Linux), and the kernel-range flush. With the defaults at 4
//! CPUs and the strict matrix's settings (`westmere`, seed 11, migration on,
//! speculation 0.2) the x86 policies send 123 to 202 IPIs (`ipis_sent`: their
//! flushes' and the wake-ups'), and a range flush that invalidates only on the
//! calling CPU is caught by this workload and, on x86, by no origin's (on arm64
//! `redis_like`'s threads catch it too; `crates/sim/tests/stress.rs`).
//!
//! Not reached, because the simulated kernel does not model them: reclaim
//! (`try_to_unmap` and [`tlbkit_policy::Policy::flush_batch`]), and the freeing of page-table
//! pages by `munmap` (`free_pgtables`; the simulator frees an address space's
//! tables only when it is released after exit).
//!
//! Use it with `--strict --set migration=on`. Result: `elapsed_s`, the
//! simulated time until the last thread finished. Host time grows with
//! `procs * threads * iters`; the defaults run in a fraction of a second.

use super::{params, Params, WorkloadDef};
use crate::error::Error;
use crate::program::{Op, Program, Sys, KMAP_SLOT_PAGES};
use crate::sim::Sim;
use std::cell::RefCell;
use std::rc::Rc;

params! {
    PARAMS;
    PROCS: Count("procs", 2, 1..=64)
        "processes";
    THREADS: Count("threads", 4, 1..=256)
        "threads per process (the first maps the region and clones the others)";
    ITERS: Count("iters", 60, 1..=1_000_000)
        "operations of each thread";
    PAGES: Count("pages", 64, 1..=65536)
        "4 KB pages of each process's shared region (chunks of 16)";
    FORKS: Count("forks", 2, 0..=64)
        "forks each thread may make at most";
}

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef::new(
    "stress",
    "threads of one mm on many CPUs racing munmap, mmap(MAP_FIXED), mprotect, madvise(DONTNEED), \
     fork and exit over shared pages: cross-CPU flushes for --strict (use with --set migration=on)",
    PARAMS,
    &["elapsed_s"],
    |p, _, sim, _| setup(p, sim),
    |_, main, _| super::elapsed("stress", main),
    |p, _, _| max_mms(p),
);

/// Pages of one chunk of the region.
const CHUNK: u64 = 16;

/// Operations a forked child makes before it exits.
const CHILD_OPS: u32 = 6;

/// What a page of the region is, as the process's threads last left it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PageState {
    /// Not mapped (a `munmap` removed it).
    Unmapped,
    /// Mapped read-write.
    Writable,
    /// Mapped read-only (`mprotect`).
    ReadOnly,
}

/// A process's shared region, as all its threads see it.
struct Region {
    /// First page.
    base: u64,
    /// Each page's state.
    pages: Vec<PageState>,
    /// The operations under way: first page, pages, the thread's index,
    /// and whether it is a system call that changes the mappings (else a
    /// touch).
    busy: Vec<Busy>,
}

/// An operation under way on a range of the region, from its thread's
/// choice to that thread's next choice.
#[derive(Clone, Copy)]
struct Busy {
    first: u64,
    len: u64,
    thread: u64,
    /// A system call that changes the mappings (which, asleep on
    /// `mmap_lock`, may take effect well after it was chosen) rather than
    /// a touch.
    sys: bool,
}

impl Region {
    /// Returns the number of chunks.
    fn chunks(&self) -> u64 {
        (self.pages.len() as u64).div_ceil(CHUNK)
    }

    /// Returns a random sub-range `(first page, pages)` of a random chunk.
    fn pick(&self, rng: &mut SplitMix) -> (u64, u64) {
        let (first, len) = self.chunk(rng.below(self.chunks()));
        let a = rng.below(len);
        (first + a, 1 + rng.below(len - a))
    }

    /// Returns chunk `k` as `(first page, pages)`.
    fn chunk(&self, k: u64) -> (u64, u64) {
        let first = k * CHUNK;
        (first, CHUNK.min(self.pages.len() as u64 - first))
    }

    /// Returns the address of page `i`.
    fn va(&self, i: u64) -> u64 {
        self.base + i * 4096
    }

    /// Returns whether every page of `[first, first + len)` is mapped.
    fn all_mapped(&self, first: u64, len: u64) -> bool {
        self.span(first, len).iter().all(|&s| s != PageState::Unmapped)
    }

    /// Returns the states of `[first, first + len)`.
    fn span(&self, first: u64, len: u64) -> &[PageState] {
        &self.pages[first as usize..(first + len) as usize]
    }

    /// Sets the states of `[first, first + len)`.
    fn set(&mut self, first: u64, len: u64, s: PageState) {
        self.pages[first as usize..(first + len) as usize].fill(s);
    }

    /// Returns a touch of the first run of mapped pages in `[first, first +
    /// len)`, a write if `write` and every page of the run is writable, or
    /// `None` when none of them is mapped.
    fn touch(&self, first: u64, len: u64, write: bool) -> Option<Op> {
        let s = self.span(first, len);
        let start = s.iter().position(|&x| x != PageState::Unmapped)?;
        let run = s[start..].iter().take_while(|&&x| x != PageState::Unmapped).count();
        let write = write && s[start..start + run].iter().all(|&x| x == PageState::Writable);
        Some(Op::Touch { va: self.va(first + start as u64), pages: run as u64, write })
    }
}

/// Sebastiano Vigna's SplitMix64: a small generator of its own per thread, so
/// that a thread's choices depend only on the run's seed and its index.
#[derive(Clone)]
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Returns a number below `n` (`n` > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Returns a generator for stream `i` of this one's seed.
    fn fork(&self, i: u64) -> SplitMix {
        let mut g = SplitMix(self.0 ^ i.wrapping_mul(0xd6e8_feb8_6659_fd93));
        g.next();
        g
    }
}

/// The sizes every thread shares.
#[derive(Clone, Copy)]
struct Sizes {
    threads: u64,
    iters: u64,
    pages: u64,
    forks: u64,
}

/// A thread of a process: the first one maps and writes the region and clones
/// the others, then all make their operations.
struct Worker {
    /// The thread's index in its process (the leader's 0).
    id: u64,
    sizes: Sizes,
    rng: SplitMix,
    /// The region, once mapped (shared by the process's threads).
    region: Option<Rc<RefCell<Region>>>,
    /// Setup steps taken (the first thread only).
    setup: u64,
    /// Whether this is the first thread.
    leader: bool,
    /// Operations left.
    left: u64,
    /// Forks left.
    forks: u64,
    /// Whether the next operation maps the whole region again (after it was unmapped).
    remap_all: bool,
    /// Whether the thread has recorded its end.
    ended: bool,
}

impl Worker {
    /// The first thread's setup: map, write, clone; `None` when it is done.
    fn setup_op(&mut self, ret: u64) -> Option<Op> {
        self.setup += 1;
        let s = self.sizes;
        match self.setup {
            1 => return Some(Op::Sys(Sys::Mmap { pages: s.pages, write: true })),
            2 => {
                let pages = vec![PageState::Writable; s.pages as usize];
                self.region = Some(Rc::new(RefCell::new(Region { base: ret, pages, busy: Vec::new() })));
            }
            _ => {}
        }
        let region = self.region.as_ref()?.borrow();
        // Write the region 64 pages at a time (one simulator event each).
        let written = (self.setup - 2) * 64;
        if written < s.pages {
            return Some(Op::Touch { va: region.va(written), pages: 64.min(s.pages - written), write: true });
        }
        let cloned = self.setup - 2 - s.pages.div_ceil(64);
        if cloned + 1 < s.threads {
            let w = Worker {
                id: cloned + 1,
                sizes: s,
                rng: self.rng.fork(cloned + 1),
                region: self.region.clone(),
                setup: 0,
                leader: false,
                left: s.iters,
                forks: s.forks,
                remap_all: false,
                ended: false,
            };
            return Some(Op::Sys(Sys::Clone(Box::new(w))));
        }
        None
    }

    /// Chooses one operation from the region's current state.
    fn operation(&mut self) -> Op {
        let region = self.region.clone().expect("the region is mapped before any thread operates");
        let mut r = region.borrow_mut();
        let n = r.pages.len() as u64;
        if std::mem::take(&mut self.remap_all) {
            // No other thread chose anything while the region was unmapped
            // by this one: each found the whole of it under way.
            r.set(0, n, PageState::Writable);
            r.busy.push(Busy { first: 0, len: n, thread: self.id, sys: true });
            return Op::Sys(Sys::MmapFixed { va: r.base, pages: n, write: true });
        }
        let rng = &mut self.rng;
        let (first, len) = r.pick(rng);
        let dice = rng.below(100);
        let me = self.id;
        // Whether another thread's operation under way covers any of the
        // pages: any (`touches`), or only its system calls.
        let under_way = |r: &Region, first: u64, len: u64, touches: bool| {
            r.busy
                .iter()
                .any(|b| b.thread != me && (b.sys || touches) && b.first < first + len && first < b.first + b.len)
        };
        let op = match dice {
            // Nothing waits on another thread's mapping change: it may not have
            // taken effect yet.
            0..=34 | 63..=74 | 78..=82
                if under_way(&r, first, len, false) || (dice >= 78 && under_way(&r, 0, n, false)) =>
            {
                Some(Op::Sys(Sys::Yield))
            }
            0..=34 => {
                let op = r.touch(first, len, rng.below(2) == 0);
                if let Some(Op::Touch { va, pages, .. }) = &op {
                    let at = (va - r.base) / 4096;
                    r.busy.push(Busy { first: at, len: *pages, thread: me, sys: false });
                }
                op
            }
            35..=62 | 75..=77 if under_way(&r, first, len, true) || (dice >= 75 && under_way(&r, 0, n, true)) => {
                Some(Op::Sys(Sys::Yield))
            }
            35..=44 => {
                r.set(first, len, PageState::Unmapped);
                Some(Op::Sys(Sys::Munmap { va: r.va(first), pages: len }))
            }
            45..=54 if r.all_mapped(first, len) => {
                r.set(first, len, PageState::ReadOnly);
                Some(Op::Sys(Sys::Mprotect { va: r.va(first), pages: len, write: false }))
            }
            55..=62 if r.all_mapped(first, len) => {
                r.set(first, len, PageState::Writable);
                Some(Op::Sys(Sys::Mprotect { va: r.va(first), pages: len, write: true }))
            }
            63..=74 if r.all_mapped(first, len) => Some(Op::Sys(Sys::Madvise { va: r.va(first), pages: len })),
            75..=77 => {
                self.remap_all = true;
                r.set(0, n, PageState::Unmapped);
                Some(Op::Sys(Sys::Munmap { va: r.base, pages: n }))
            }
            78..=82 if self.forks > 0 => {
                self.forks -= 1;
                let child = Child { rng: rng.fork(0x0f0f + self.forks), region: r.clone_state(), ops: 0 };
                Some(Op::Sys(Sys::Fork(Box::new(child))))
            }
            83..=85 => Some(Op::Sys(Sys::KernelMapCycle { pages: 1 + rng.below(KMAP_SLOT_PAGES.min(4)) })),
            86..=91 => Some(Op::Sys(Sys::Yield)),
            _ => None,
        };
        let op = op.unwrap_or_else(|| {
            // Nothing of that kind fits the sub-range now: map its chunk afresh
            // (a MAP_FIXED replacement, which zaps what the chunk held), unless
            // another thread's mapping change is under way there.
            let (cf, cl) = r.chunk(first / CHUNK);
            if under_way(&r, cf, cl, false) {
                return Op::Sys(Sys::Yield);
            }
            r.set(cf, cl, PageState::Writable);
            Op::Sys(Sys::MmapFixed { va: r.va(cf), pages: cl, write: true })
        });
        // A mapping change stays under way until this thread's next choice; a
        // fork's copy is of the whole region as it is when the fork runs,
        // which the child's view must match.
        let changed = match &op {
            Op::Sys(Sys::Munmap { va, pages } | Sys::Mprotect { va, pages, .. } | Sys::MmapFixed { va, pages, .. }) => {
                Some(((va - r.base) / 4096, *pages))
            }
            Op::Sys(Sys::Fork(_)) => Some((0, n)),
            _ => None,
        };
        if let Some((first, len)) = changed {
            r.busy.push(Busy { first, len, thread: me, sys: true });
        }
        op
    }
}

impl Region {
    /// Returns a private copy of the region's state (a forked child's view).
    fn clone_state(&self) -> Region {
        Region { base: self.base, pages: self.pages.clone(), busy: Vec::new() }
    }
}

impl Program for Worker {
    fn next(&mut self, ret: u64) -> Op {
        // Its last touch, if any, is over.
        if let Some(region) = &self.region {
            let me = self.id;
            region.borrow_mut().busy.retain(|b| b.thread != me);
        }
        if self.leader {
            if let Some(op) = self.setup_op(ret) {
                return op;
            }
            self.leader = false;
        }
        if self.left > 0 || self.remap_all {
            self.left = self.left.saturating_sub(1);
            return self.operation();
        }
        if !std::mem::replace(&mut self.ended, true) {
            return Op::Mark("end");
        }
        Op::Exit
    }
}

/// A forked child: touches, writes (copy-on-write), advises and unmaps parts of
/// its copy of the region, then exits.
struct Child {
    rng: SplitMix,
    region: Region,
    ops: u32,
}

impl Program for Child {
    fn next(&mut self, _ret: u64) -> Op {
        self.ops += 1;
        if self.ops > CHILD_OPS {
            return Op::Exit;
        }
        let r = &mut self.region;
        let (first, len) = r.pick(&mut self.rng);
        let op = match self.rng.below(4) {
            0 if r.all_mapped(first, len) => Some(Op::Sys(Sys::Madvise { va: r.va(first), pages: len })),
            1 => {
                r.set(first, len, PageState::Unmapped);
                Some(Op::Sys(Sys::Munmap { va: r.va(first), pages: len }))
            }
            _ => r.touch(first, len, true),
        };
        op.unwrap_or(Op::Compute(1000))
    }
}

/// Starts the processes.
pub fn setup(p: &Params, sim: &mut Sim) -> Result<(), Error> {
    let sizes = Sizes { threads: THREADS.of(p), iters: ITERS.of(p), pages: PAGES.of(p), forks: FORKS.of(p) };
    let root = SplitMix(sim.cfg.seed ^ 0x5354_5245_5353);
    for i in 0..PROCS.of(p) {
        let w = Worker {
            id: 0,
            sizes,
            rng: root.fork(i << 16),
            region: None,
            setup: 0,
            leader: true,
            left: sizes.iters,
            forks: sizes.forks,
            remap_all: false,
            ended: false,
        };
        sim.spawn(Box::new(w))?;
    }
    Ok(())
}

/// Returns the address spaces the workload may have at once: every process and
/// every child its threads may fork.
pub fn max_mms(p: &Params) -> usize {
    let procs = PROCS.usize(p);
    procs * (1 + THREADS.usize(p) * FORKS.usize(p)) + 8
}
