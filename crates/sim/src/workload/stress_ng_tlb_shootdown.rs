//! stress-ng's TLB shootdown stressor, `stress-ng --tlb-shootdown N`: each of N
//! instances forks child processes that share memory with it and change that
//! memory's protection over and over, while the instance itself zaps and
//! refaults pages of it.
//!
//! Source: github.com/ColinIanKing/stress-ng at `291fc4341bb6`,
//! `stress-tlb-shootdown.c` (the same structure at `ca618d2a7`, July 2025), with
//! `core-prime.c` (`stress_prime64_next_get`), `core-mwc.c` (`stress_mwc32`,
//! `stress_mwc8`) and `stress-ng.c` (the bogo-op rate). Each instance:
//! - opens a temporary file of 4 pages and maps it `MAP_SHARED` (`memfd`), and
//!   maps 512 pages `MAP_SHARED|MAP_ANONYMOUS` (`mem`, shared memory), both
//!   `MADV_NOHUGEPAGE`, and fills `mem`;
//! - forks `clamp(n_cpus, 2, 8)` children, each with its own address space
//!   sharing the pages of `mem` and `memfd`, and a stride of `137 + p` cache
//!   lines, `p` the next prime above the 32768 lines of `mem` (each fork the
//!   next: 32771, 32779, ...);
//! - loops (its own iteration): `MADV_DONTNEED` one random page of `memfd`,
//!   write each of its 64-byte lines, `msync(MS_SYNC)`; again `MADV_DONTNEED`,
//!   read the lines, `msync(MS_SYNC)`; `MADV_DONTNEED` one random page of `mem`
//!   and read it, `MADV_DONTNEED` it again and write it; read and write back
//!   x86's debugfs `tlb_single_page_flush_ceiling` (absent elsewhere: a failed
//!   open); `MADV_COLLAPSE` and `MADV_NOHUGEPAGE` of `mem` and of `memfd` (the
//!   mappings are `VM_NOHUGEPAGE`, so collapse fails at once) and
//!   `msync(MS_SYNC)`; one bogo op.
//!
//! A child's iteration: `mprotect` one random page of `mem` read-only and read
//! its lines; make it write-only and write them; `mprotect` all of `mem`
//! read-only and make 32768 strided reads (from a random byte, `stride` bytes
//! apart modulo the 2 MB); write-only and 32768 strided writes; read-write;
//! `MADV_DONTNEED` a random page of `mem` and read it back; `MADV_DONTNEED` a
//! random page of `memfd`, write it, `msync(MS_ASYNC)`; one bogo op. Parent and
//! children count into the instance's one counter, and all of them stop once it
//! reaches `--tlb-shootdown-ops`; the parent then waits for its children.
//! Offsets come from stress-ng's multiply-with-carry generator, each instance
//! seeded afresh and each child starting from its parent's state at the fork
//! (so the children of one instance draw the same offsets).
//!
//! The model: `mem` and `memfd` are shared file mappings of the simulated page
//! cache (`Sys::MmapFile`; shared memory is a file of its own), two files per
//! instance, and the counter is a page of one more file, shared by every
//! process, written at each bogo op. A page read or written line by line is one
//! access through the TLB and 63 more that hit it, charged as the simulator
//! charges a multi-page touch (`mem_access` each, `mlp` at a time); each strided
//! access is a one-page touch of its own, in the stressor's order. System calls
//! that change nothing here (`msync`, the failed open, `MADV_COLLAPSE`,
//! `MADV_NOHUGEPAGE`) cost a system call's entry, body and exit. The bogo-op rate
//! is stress-ng's "bogo ops/s (real time)": every instance's ops over the mean
//! of the instances' run times, setup and the wait for the children included.
//!
//! What stays different:
//! - `msync(MS_SYNC)` writes nothing back and write-protects nothing: the model is
//!   the temporary directory on tmpfs, where shared memory has no write-back.
//!   On a disk file system (stress-ng's default temporary path is the current
//!   directory) each `msync` would clean the dirty page with `folio_mkclean`,
//!   a `flush_tlb_page` in every address space mapping it dirty, and wait for
//!   the write; the simulated kernel has no `msync`.
//! - A child calls `sched_setaffinity(args->pid, ...)` on the instance, not on
//!   itself: the first call binds the parent to the first CPU, and one call a
//!   second moves it to the next. The model binds the parent to CPU 0 from its
//!   start (a first thread that clones it bound and exits), exact for runs
//!   shorter than a second; the simulated kernel cannot bind another process.
//!   The children stay unbound, as in the real run.
//! - stress-ng holds each child stopped until all are forked; here children poll
//!   a shared flag (untimed, 1000 cycles a poll), so that they keep the CPU fork
//!   placed them on, where a woken sleeper in the simulator would stay on its
//!   old CPU while Linux wakes it onto an idle one.
//! - (Not differences: Linux's read faults on `mem` map up to 16 pages of the page cache around
//!   the fault, fault-around, and so do the simulated kernel's. The
//!   `mprotect` that adds write access makes shared memory's PTEs writable in
//!   place, as Linux does, and the final read-write one, which changes no PTE,
//!   flushes what it met unless the kernel has arm64's own `pte_needs_flush`,
//!   v6.19 or `--set pte_needs_flush=on`.)
//! - `MADV_NOHUGEPAGE` at setup is not modelled: the simulator maps no huge
//!   pages, and its large-folio modes (`contpte`) ignore the advice.
//! - `stress_cpu_cache_data_flush` after each write pass (`__builtin___clear_cache`
//!   on arm64, barriers only where `CTR_EL0` has IDC and DIC) is not modelled, nor
//!   are the stores' cache-line transfers between CPUs.
//!
//! Results: `bogo_ops_per_s` (stress-ng's figure), `child_iter_us` (the mean time
//! of one child iteration, the part with the 512-page `mprotect`s) and
//! `tlb_share` (the share of all CPUs' time spent invalidating TLBs).

use super::{params, OpQueue, Params, WorkloadDef};
use crate::error::Error;
use crate::program::{Op, Program, Sys};
use crate::sim::Sim;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

/// `MIN_TLB_PROCS`.
const MIN_PROCS: u64 = 2;
/// `MAX_TLB_PROCS`.
const MAX_PROCS: u64 = 8;
/// `MMAP_FD_PAGES`: the pages of `memfd`.
const FD_PAGES: u64 = 4;
/// Bytes of a cache line (`STRESS_CACHE_LINE_SIZE`).
const LINE: u64 = 64;
/// The file holding the bogo-op counters (stress-ng's shared stats mapping).
const STATS_FILE: u32 = 0;
/// Cycles of one poll of the start flag by a waiting child (untimed).
const POLL: u64 = 1000;

params! {
    PARAMS;
    WORKERS: Count("workers", 1, 0..=4096)
        "stressor instances (--tlb-shootdown N; 0: one per CPU, as stress-ng's 0)";
    OPS: Count("ops", 1000, 1..=100_000_000)
        "bogo ops of each instance, its own and its children's together (--tlb-shootdown-ops)";
    PAGES: Count("pages", 512, 1..=65536)
        "4 KB pages of the shared memory the children mprotect (MMAP_PAGES, 512; a power of two)";
}

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef::new(
    "stress_ng_tlb_shootdown",
    "stress-ng --tlb-shootdown: per instance, 2 to 8 forked children mprotect shared memory (one page, \
     then all 512) and touch it, while the instance madvise(DONTNEED)s and refaults its pages",
    PARAMS,
    &["bogo_ops_per_s", "child_iter_us", "tlb_share"],
    |p, _, sim, _| setup(p, sim),
    |p, main, _| result(p, main),
    |p, _, cpus| max_mms(p, cpus),
);

/// stress-ng's multiply-with-carry generator (`core-mwc.c`, Marsaglia's).
#[derive(Clone)]
struct Mwc {
    z: u32,
    w: u32,
    n8: u32,
    saved8: u32,
}

impl Mwc {
    /// Returns a generator seeded as `--seed s` seeds it (`z` the high half, `w`
    /// the low), falling back to stress-ng's default seeds for a zero half.
    fn new(s: u64) -> Self {
        let (z, w) = ((s >> 32) as u32, s as u32);
        Mwc { z: if z == 0 { 362_436_069 } else { z }, w: if w == 0 { 521_288_629 } else { w }, n8: 0, saved8: 0 }
    }

    /// `stress_mwc32`.
    fn next32(&mut self) -> u32 {
        self.z = 36969u32.wrapping_mul(self.z & 65535).wrapping_add(self.z >> 16);
        self.w = 18000u32.wrapping_mul(self.w & 65535).wrapping_add(self.w >> 16);
        (self.z << 16).wrapping_add(self.w)
    }

    /// `stress_mwc8` (its value is unused here, but it advances the generator).
    fn next8(&mut self) {
        if self.n8 > 0 {
            self.n8 -= 1;
            self.saved8 >>= 8;
        } else {
            self.n8 = 3;
            self.saved8 = self.next32();
        }
    }
}

/// `stress_prime64_next_get` with its static state: each call returns the next
/// prime above `n` and above the previous call's.
struct Primes(u64);

impl Primes {
    fn new() -> Self {
        Primes(1009)
    }

    fn next_above(&mut self, n: u64) -> u64 {
        let odd = (n & !1) + 1;
        if self.0 < odd {
            self.0 = odd;
        }
        loop {
            self.0 += 2;
            if !n.is_multiple_of(self.0) && is_prime(self.0) {
                return self.0;
            }
        }
    }
}

/// `stress_prime64_check`.
fn is_prime(n: u64) -> bool {
    if n <= 3 {
        return n >= 2;
    }
    if n.is_multiple_of(2) || n.is_multiple_of(3) {
        return false;
    }
    let mut i = 5;
    while i * i <= n {
        if n.is_multiple_of(i) || n.is_multiple_of(i + 2) {
            return false;
        }
        i += 6;
    }
    true
}

/// Returns `tlb_procs`: the children of each instance on `cpus` CPUs.
pub fn children(cpus: usize) -> u64 {
    (cpus as u64).clamp(MIN_PROCS, MAX_PROCS)
}

/// What the processes of one instance share.
struct Instance {
    /// Bogo-op budget (`--tlb-shootdown-ops`).
    ops: u64,
    /// The instance's bogo-op counter.
    counter: Cell<u64>,
    /// Whether the parent has forked every child (stress-ng's sync start).
    go: Cell<bool>,
    /// Pages of `mem`.
    pages: u64,
    /// Addresses of `mem`, `memfd` and the counter page, the same in every
    /// process (the children inherit them).
    mem: Cell<u64>,
    memfd: Cell<u64>,
    stats: Cell<u64>,
    /// Cycles of the 63 lines of a page read or written after the first.
    rest: u64,
    /// Cycles of a system call that changes nothing.
    null_syscall: u64,
}

impl Instance {
    fn mmap_mask(&self) -> u64 {
        self.pages * 4096 - 1
    }

    /// Counts a bogo op; returns whether the budget is spent.
    fn bogo_inc(&self) -> bool {
        self.counter.set(self.counter.get() + 1);
        self.counter.get() >= self.ops
    }

    /// Queues the line-by-line read or write of the page at `va`.
    fn page(&self, q: &mut OpQueue, va: u64, write: bool) {
        q.push(Op::Touch { va, pages: 1, write });
        q.push(Op::Compute(self.rest));
    }
}

/// Where a child is in its iteration.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    Wait,
    Page,
    ReadLoop,
    WriteProtect,
    WriteLoop,
    Tail,
    Count,
    Done,
}

/// One child process (`stress_tlb_shootdown_child`).
struct Child {
    inst: Rc<Instance>,
    rng: Mwc,
    /// Bytes between strided accesses.
    stride: u64,
    done: u32,
    stage: Stage,
    queue: OpQueue,
    /// Strided accesses left in the current loop, and the next one's offset.
    left: u64,
    k: u64,
    write: bool,
}

impl Child {
    /// Queues the next stage's operations.
    fn refill(&mut self) {
        let i = self.inst.clone();
        let (mem, mask, page_mask) = (i.mem.get(), i.mmap_mask(), !4095u64);
        let q = &mut self.queue;
        match self.stage {
            Stage::Wait => {
                if !i.go.get() {
                    q.push(Op::Compute(POLL));
                    return;
                }
                q.push(Op::Mark("child_start"));
                self.stage = Stage::Page;
            }
            Stage::Page => {
                self.k = self.rng.next32() as u64 & mask;
                self.rng.next8();
                let off = self.rng.next32() as u64 & mask & page_mask;
                q.push(Op::Sys(Sys::Mprotect { va: mem + off, pages: 1, write: false }));
                i.page(q, mem + off, false);
                q.push(Op::Sys(Sys::Mprotect { va: mem + off, pages: 1, write: true }));
                self.rng.next8();
                i.page(q, mem + off, true);
                q.push(Op::Sys(Sys::Mprotect { va: mem, pages: i.pages, write: false }));
                self.stage = Stage::ReadLoop;
            }
            Stage::ReadLoop | Stage::WriteLoop => {
                self.left = i.pages * 4096 / LINE;
                self.write = self.stage == Stage::WriteLoop;
                self.stage = if self.write { Stage::Tail } else { Stage::WriteProtect };
            }
            Stage::WriteProtect => {
                q.push(Op::Sys(Sys::Mprotect { va: mem, pages: i.pages, write: true }));
                self.stage = Stage::WriteLoop;
            }
            Stage::Tail => {
                // PROT_READ | PROT_WRITE: in the simulated kernel write access
                // implies read access, as the previous call's PROT_WRITE.
                q.push(Op::Sys(Sys::Mprotect { va: mem, pages: i.pages, write: true }));
                let off = self.rng.next32() as u64 & mask & page_mask;
                q.push(Op::Sys(Sys::Madvise { va: mem + off, pages: 1 }));
                i.page(q, mem + off, false);
                let fd_off = self.rng.next32() as u64 & (FD_PAGES * 4096 - 1) & page_mask;
                q.push(Op::Sys(Sys::Madvise { va: i.memfd.get() + fd_off, pages: 1 }));
                self.rng.next8();
                i.page(q, i.memfd.get() + fd_off, true);
                // msync(MS_ASYNC): nothing to do.
                q.push(Op::Compute(i.null_syscall));
                q.push(Op::Touch { va: i.stats.get(), pages: 1, write: true });
                q.push(Op::Mark("child_op"));
                self.stage = Stage::Count;
            }
            Stage::Count => {
                if i.bogo_inc() {
                    q.push(Op::Mark("child_end"));
                    q.push(Op::Sys(Sys::PipeWrite(self.done)));
                    q.push(Op::Exit);
                    self.stage = Stage::Done;
                } else {
                    self.stage = Stage::Page;
                }
            }
            Stage::Done => q.push(Op::Exit),
        }
    }
}

impl Program for Child {
    fn next(&mut self, _ret: u64) -> Op {
        loop {
            if self.left > 0 {
                self.left -= 1;
                let va = self.inst.mem.get() + (self.k & !4095);
                self.k = (self.k + self.stride) & self.inst.mmap_mask();
                return Op::Touch { va, pages: 1, write: self.write };
            }
            if let Some(op) = self.queue.pop() {
                return op;
            }
            self.refill();
        }
    }
}

/// The first thread of an instance: clones the instance's thread bound to CPU
/// 0 (where the children's `sched_setaffinity` puts it) and exits.
struct Launcher {
    parent: Option<Parent>,
}

impl Program for Launcher {
    fn next(&mut self, _ret: u64) -> Op {
        match self.parent.take() {
            Some(p) => Op::Sys(Sys::CloneOn(0, Box::new(p))),
            None => Op::Exit,
        }
    }
}

/// The instance process (`stress_tlb_shootdown`).
struct Parent {
    inst: Rc<Instance>,
    rng: Mwc,
    files: (u32, u32),
    children: u64,
    step: u64,
    done: u32,
    primes: Primes,
    queue: OpQueue,
    looping: bool,
}

impl Parent {
    /// Queues one iteration of the instance's own loop.
    fn iteration(&mut self) {
        let i = self.inst.clone();
        let q = &mut self.queue;
        let page_mask = !4095u64;
        let memfd = i.memfd.get();
        let off = self.rng.next32() as u64 & (FD_PAGES * 4096 - 1) & page_mask;
        q.push(Op::Sys(Sys::Madvise { va: memfd + off, pages: 1 }));
        self.rng.next8();
        i.page(q, memfd + off, true);
        // msync(MS_SYNC) (see the module documentation).
        q.push(Op::Compute(i.null_syscall));
        q.push(Op::Sys(Sys::Madvise { va: memfd + off, pages: 1 }));
        i.page(q, memfd + off, false);
        q.push(Op::Compute(i.null_syscall));
        let off = self.rng.next32() as u64 & i.mmap_mask() & page_mask;
        let mem = i.mem.get();
        q.push(Op::Sys(Sys::Madvise { va: mem + off, pages: 1 }));
        i.page(q, mem + off, false);
        q.push(Op::Sys(Sys::Madvise { va: mem + off, pages: 1 }));
        self.rng.next8();
        i.page(q, mem + off, true);
        // The failed open of x86's debugfs file, MADV_COLLAPSE and
        // MADV_NOHUGEPAGE of both mappings, msync(MS_SYNC).
        q.push(Op::Compute(6 * i.null_syscall));
        q.push(Op::Touch { va: i.stats.get(), pages: 1, write: true });
        q.push(Op::Mark("op"));
    }

    /// The setup, before the loop: returns its next operation given the last one's
    /// result, or `None` once it is over.
    fn setup(&mut self, ret: u64) -> Option<Op> {
        let i = self.inst.clone();
        self.step += 1;
        let n = self.children;
        Some(match self.step {
            1 => Op::Mark("start"),
            2 => Op::Sys(Sys::MmapFile { file: STATS_FILE, pages: 1, write: true, private: false }),
            3 => {
                i.stats.set(ret);
                Op::Touch { va: ret, pages: 1, write: true }
            }
            // The temporary file's name takes one number from the generator.
            4 => {
                self.rng.next32();
                Op::Sys(Sys::MmapFile { file: self.files.1, pages: FD_PAGES, write: true, private: false })
            }
            5 => {
                i.memfd.set(ret);
                Op::Sys(Sys::MmapFile { file: self.files.0, pages: i.pages, write: true, private: false })
            }
            6 => {
                i.mem.set(ret);
                Op::Touch { va: ret, pages: i.pages, write: true }
            }
            7 => Op::Sys(Sys::Pipe),
            s if s <= 7 + n => {
                if s == 8 {
                    self.done = ret as u32;
                }
                let lines = i.pages * 4096 / LINE;
                let stride = (137 + self.primes.next_above(lines)) * LINE;
                let child = Child {
                    inst: i.clone(),
                    rng: self.rng.clone(),
                    stride,
                    done: self.done,
                    stage: Stage::Wait,
                    queue: OpQueue::default(),
                    left: 0,
                    k: 0,
                    write: false,
                };
                Op::Sys(Sys::Fork(Box::new(child)))
            }
            _ => {
                i.go.set(true);
                return None;
            }
        })
    }
}

impl Program for Parent {
    fn next(&mut self, ret: u64) -> Op {
        if !self.looping {
            if let Some(op) = self.setup(ret) {
                return op;
            }
            self.looping = true;
            self.step = 0;
        }
        loop {
            if let Some(op) = self.queue.pop() {
                return op;
            }
            if self.step == 0 {
                // The loop (do ... while): one iteration at least.
                self.iteration();
                self.step = u64::MAX;
                continue;
            }
            if self.step == u64::MAX {
                // The iteration's bogo op has been counted (its mark ran).
                self.step = if self.inst.bogo_inc() { 1 } else { 0 };
                continue;
            }
            // Wait for every child, then unmap and exit.
            self.step += 1;
            let n = self.children;
            return match self.step {
                s if s <= 1 + n => Op::Sys(Sys::PipeRead(self.done)),
                s if s == 2 + n => Op::Mark("end"),
                s if s == 3 + n => Op::Sys(Sys::Munmap { va: self.inst.mem.get(), pages: self.inst.pages }),
                s if s == 4 + n => Op::Sys(Sys::Munmap { va: self.inst.memfd.get(), pages: FD_PAGES }),
                _ => Op::Exit,
            };
        }
    }
}

/// Mixes the run's seed with an instance's index into its generator's seed.
fn seed(run: u64, instance: u64) -> u64 {
    let mut z = run ^ instance.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x7374_7265_7373_6e67;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Starts every instance.
pub fn setup(p: &Params, sim: &mut Sim) -> Result<(), Error> {
    let pages = PAGES.of(p);
    if !pages.is_power_of_two() {
        return Err(Error::BadParam {
            workload: DEF.name,
            key: PAGES.0.key,
            value: pages.to_string(),
            valid: "a power of two",
        });
    }
    let c = sim.cfg.preset.costs;
    let workers = WORKERS.or_cpus(p, sim.cfg.ncpus);
    for w in 0..workers {
        let inst = Instance {
            ops: OPS.of(p),
            counter: Cell::new(0),
            go: Cell::new(false),
            pages,
            mem: Cell::new(0),
            memfd: Cell::new(0),
            stats: Cell::new(0),
            rest: (4096 / LINE - 1) * c.mem_access / c.mlp.max(1),
            null_syscall: c.exception_entry + c.kernel.syscall_body + c.exception_exit,
        };
        let parent = Parent {
            inst: Rc::new(inst),
            rng: Mwc::new(seed(sim.cfg.seed, w)),
            files: (1 + 2 * w as u32, 2 + 2 * w as u32),
            children: children(sim.cfg.ncpus),
            step: 0,
            done: 0,
            primes: Primes::new(),
            queue: OpQueue::default(),
            looping: false,
        };
        sim.spawn(Box::new(Launcher { parent: Some(parent) }))?;
    }
    Ok(())
}

/// Returns the address spaces the run needs: each instance and its children.
pub fn max_mms(p: &Params, cpus: usize) -> usize {
    WORKERS.or_cpus(p, cpus) as usize * (1 + children(cpus) as usize) + 8
}

/// Returns `bogo_ops_per_s`, `child_iter_us` and `tlb_share`.
pub fn result(p: &Params, sim: &Sim) -> Result<BTreeMap<String, f64>, Error> {
    let workers = WORKERS.or_cpus(p, sim.cfg.ncpus) as usize;
    let (starts, ends) = (super::mark_times(sim, "start"), super::mark_times(sim, "end"));
    if starts.len() != workers || ends.len() != workers {
        return Err(super::unmeasured(DEF.name, format!("{} of {workers} instances finished", ends.len())));
    }
    let (child_starts, child_ends) = (super::mark_times(sim, "child_start"), super::mark_times(sim, "child_end"));
    let child_ops = super::mark_times(sim, "child_op").len() as u64;
    let ops = super::mark_times(sim, "op").len() as u64 + child_ops;
    let ghz = sim.ghz();
    let mean_run = (ends.iter().sum::<u64>() - starts.iter().sum::<u64>()) as f64 / workers as f64;
    let child_span = (child_ends.iter().sum::<u64>() - child_starts.iter().sum::<u64>()) as f64;
    let (first, last) = (starts.iter().min().copied().unwrap_or(0), ends.iter().max().copied().unwrap_or(0));
    let invalidating = sim.invalidating_cycles();
    let mut r = BTreeMap::new();
    r.insert("bogo_ops_per_s".to_string(), ops as f64 / (mean_run / ghz / 1e9));
    r.insert("child_iter_us".to_string(), child_span / child_ops.max(1) as f64 / ghz / 1e3);
    r.insert("tlb_share".to_string(), invalidating as f64 / ((last - first) as f64 * sim.cfg.ncpus as f64));
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strides_are_the_primes_stress_ng_draws() {
        // 512 pages are 32768 lines: the first child's stride is 137 + 32771
        // lines, and each fork takes the next prime.
        let mut p = Primes::new();
        let got: Vec<u64> = (0..4).map(|_| p.next_above(32768)).collect();
        assert_eq!(got, [32771, 32779, 32783, 32789]);
        assert!(got.iter().all(|&q| is_prime(q)));
        assert!(!is_prime(32773) && !is_prime(32777) && !is_prime(32781));
    }

    #[test]
    fn the_generator_is_stress_ng_s() {
        // stress_mwc32 from the default seeds (w 521288629, z 362436069).
        let mut g = Mwc::new((362_436_069u64 << 32) | 521_288_629);
        let z = 36969u32 * (362_436_069 & 65535) + (362_436_069 >> 16);
        let w = 18000u32 * (521_288_629 & 65535) + (521_288_629 >> 16);
        assert_eq!(g.next32(), (z << 16).wrapping_add(w));
    }

    #[test]
    fn children_are_clamped_to_two_to_eight() {
        assert_eq!([1, 2, 3, 8, 9, 192].map(children), [2, 2, 3, 8, 8, 8]);
    }
}
