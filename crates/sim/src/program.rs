//! What simulated threads run: small programs that ask the simulated kernel for
//! memory accesses, computation and system calls, one operation at a time.
//!
//! A workload builds its programs from these operations; the kernel executes
//! them on a CPU with real costs, faults, TLB lookups and policy calls.

/// Start of every process's text (read-only, 16 pages).
pub const TEXT_VA: u64 = 0x40_0000;
/// Pages of text.
pub const TEXT_PAGES: u64 = 16;
/// Lowest page of every process's stack (read-write, 16 pages).
pub const STACK_VA: u64 = 0x7fff_ff00_0000;
/// Pages of stack.
pub const STACK_PAGES: u64 = 16;
/// Start of every process's data and bss (libc's included; read-write, 16 pages).
pub const DATA_VA: u64 = 0x60_0000;
/// Pages of data.
pub const DATA_PAGES: u64 = 16;
/// Page of the text VMA where the C library's code sits.
pub const LIBC_TEXT_PAGE: u64 = 8;
/// Where `mmap` places mappings, growing upwards.
pub const MMAP_BASE: u64 = 0x10_0000_0000;
/// Start of the kernel's half of the address space (TTBR1 on arm64).
pub const KERNEL_BASE: u64 = 0xffff_0000_0000_0000;
/// Start of the kernel VA pool that [`Sys::KernelMapCycle`] maps buffer pages
/// into (FreeBSD's buffer KVA / `sf_buf` window), far above the kernel heap.
pub const KMAP_BASE: u64 = KERNEL_BASE + (64 << 30);
/// Slots in that pool; cycles take them round-robin, so each slot's VA is mapped,
/// unmapped and mapped again to other frames over and over, and a kernel TLB entry
/// that survived an invalidation would translate to a frame that was freed.
pub const KMAP_SLOTS: u64 = 16;
/// Pages one slot holds: the most one [`Sys::KernelMapCycle`] may map (256 KB,
/// FreeBSD's `MAXPHYS` of 128 KB twice over).
pub const KMAP_SLOT_PAGES: u64 = 64;
/// End of the user addresses a fixed mapping may use ([`Sys::MmapFixed`],
/// [`crate::sim::Sim::spawn_with`]): x86-64's 128 TB user half (arm64's 48-bit
/// one is larger), so that a traced program's addresses fit either architecture.
pub const USER_VA_END: u64 = 1 << 47;

/// Pages an address space maps at a fixed address: part of a traced program's
/// image (see [`crate::sim::Sim::spawn_with`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// First page.
    pub va: u64,
    /// Pages.
    pub pages: u64,
    /// Whether the pages are writable.
    pub write: bool,
}

/// A system call.
pub enum Sys {
    /// Maps `pages` anonymous pages; returns the address.
    Mmap {
        /// Pages to map.
        pages: u64,
        /// Whether the mapping is writable.
        write: bool,
    },
    /// Maps `pages` pages of file `file` from its start, shared (`MAP_SHARED`),
    /// writable if `write`; returns the address. The file's pages live in the
    /// page cache, which keeps them after every mapping is gone: another mapping
    /// of the same file, in this or another process, maps the same frames. A
    /// write marks the page dirty in its PTE, and the kernel must see that
    /// dirtiness when it clears the PTE (unmap, `madvise`, exit) to write the
    /// page back: the oracle's `no_lost_dirty`. The page cache holds 64 KB
    /// folios; with `contpte` on a fault maps a whole folio, and without it a
    /// read fault maps the cached pages of its 16-page window (fault-around).
    MmapFile {
        /// Which file (any number; files exist from their first mapping).
        file: u32,
        /// Pages to map.
        pages: u64,
        /// Whether the mapping is writable.
        write: bool,
        /// Whether it is private (`MAP_PRIVATE`): a read maps the page cache's
        /// page read-only, and a write copies it to a page of the mapping's
        /// own, which the page cache never sees (copy-on-write); otherwise
        /// shared.
        private: bool,
    },
    /// Maps `pages` anonymous pages at `va` (page-aligned, below
    /// [`USER_VA_END`]), replacing whatever the range mapped, as Linux's `mmap`
    /// with `MAP_FIXED` does; returns `va`. The replaced part is zapped as
    /// [`Sys::Madvise`] zaps (the span of pages actually cleared is flushed, and
    /// nothing when none was present) and stops being mapped. Trace replay maps
    /// every traced mapping at the traced program's own address this way.
    MmapFixed {
        /// First page.
        va: u64,
        /// Pages to map.
        pages: u64,
        /// Whether the mapping is writable.
        write: bool,
    },
    /// Unmaps `pages` pages at `va`.
    Munmap {
        /// First page.
        va: u64,
        /// Pages.
        pages: u64,
    },
    /// Changes the protection of `pages` pages at `va`.
    Mprotect {
        /// First page.
        va: u64,
        /// Pages.
        pages: u64,
        /// Whether writes are allowed afterwards.
        write: bool,
    },
    /// Creates a child process with a copy-on-write copy of this address space,
    /// running `child`; returns the child's thread id.
    Fork(Box<dyn Program>),
    /// [`Sys::Fork`] of a child bound to CPU `cpu` (modulo the machine's CPUs),
    /// as `fork` after `sched_setaffinity` or hwloc binding does (the child
    /// inherits its parent's affinity): it starts there and never migrates.
    ForkOn(usize, Box<dyn Program>),
    /// Creates a thread in this address space running `thread` (Linux `clone`
    /// with `CLONE_VM`, FreeBSD `thr_new`), on the least-loaded CPU (this one on
    /// ties, as Linux's fork balancing keeps a child local when no group is
    /// idler); returns its thread id. The address space lives until its last
    /// thread exits.
    Clone(Box<dyn Program>),
    /// [`Sys::Clone`] of a thread bound to CPU `cpu` (modulo the machine's
    /// CPUs), as `pthread_create` after `sched_setaffinity` or hwloc binding
    /// does: it starts there and never migrates.
    CloneOn(usize, Box<dyn Program>),
    /// `madvise(MADV_DONTNEED)` of `pages` pages at `va`: zaps the range's PTEs
    /// and frees their frames after the flush, but keeps the mapping, so a later
    /// touch faults in a fresh zero page. The flush covers the pages actually
    /// zapped (Linux's `mmu_gather` range); when none was, nothing is flushed.
    Madvise {
        /// First page.
        va: u64,
        /// Pages.
        pages: u64,
    },
    /// `madvise(MADV_PAGEOUT)` of `pages` pages at `va` (Linux v7.0, arm64 in
    /// mind): every folio of anonymous private memory that the range covers
    /// whole and maps exclusively is reclaimed: its PTEs are cleared, each
    /// clear's TLB flush is deferred and all of them completed before the folio
    /// is freed, and a later touch faults a fresh page in (a swap-in; swap I/O is
    /// not modelled). With [`crate::sim::Sim::set_pageout_batch`] a large folio's
    /// PTEs go in one batch (Dev Jain's series) instead of one at a time. Shared
    /// folios, folios the range covers in part and file mappings are left alone.
    /// See `sim/reclaim.rs`.
    MadvisePageout {
        /// First page.
        va: u64,
        /// Pages.
        pages: u64,
    },
    /// `migrate_pages(2)` of the process whose thread is `tid` (the
    /// `migratepages PID FROM TO` command): moves every page of its anonymous
    /// memory on NUMA node `from` to a new page on node `to`; returns the pages
    /// moved. Each page is unmapped (its TLB flush sent at once, or deferred
    /// into one flush per batch of 512 with Linux v6.3's batching), copied and
    /// mapped again; a CPU touching it meanwhile waits. A node is a socket of
    /// the machine (`--set numa=2` makes two of each). See `sim/migrate.rs`.
    MigratePages {
        /// A thread of the process whose pages move.
        tid: usize,
        /// The node they are on.
        from: u8,
        /// The node they move to.
        to: u8,
    },
    /// Replaces this process's address space with a fresh one holding a new
    /// text, data and stack (`execve`): the old one is torn down and flushed as
    /// exit tears down a last user's, and the calling thread goes on, on this
    /// CPU, in the new one. The thread's program continues; it stands for the
    /// new image. Only a single-threaded process may exec.
    Execve,
    /// A kernel path that maps `pages` (1 to [`KMAP_SLOT_PAGES`]) freshly
    /// allocated pages at a kernel VA from the [`KMAP_BASE`] pool, copies each one
    /// (a write), unmaps them and invalidates the range on every CPU with
    /// `flush_kernel_range`: FreeBSD's buffer cache `pmap_qenter` / `pmap_qremove`
    /// (and `sf_buf` where there is no direct map), whose ranged shootdown of
    /// `kernel_pmap` reaches every CPU. The frames are freed after the flush.
    KernelMapCycle {
        /// Pages mapped.
        pages: u64,
    },
    /// A kernel module's direct call of the policy's range flush
    /// (`flush_tlb_range` on Linux, `pmap_invalidate_range` on FreeBSD) for
    /// `pages` pages of this address space at `va`, with no PTE changed: the
    /// flush alone, as a test module that calls `__flush_tlb_range` in a loop
    /// times it, or a tracepoint around `flush_tlb_mm_range`. The pages must
    /// be mapped. [`crate::sim::Stats::flush_cycles`] counts the call's own
    /// time (without the system call's entry and exit, which stand for the
    /// module's loop).
    FlushRange {
        /// First page.
        va: u64,
        /// Pages.
        pages: u64,
    },
    /// Creates a pipe (or eventfd); returns its id.
    Pipe,
    /// Creates a pipe that holds at most `cap` tokens (a pipe's 64 KiB buffer
    /// in messages): a write to a full one blocks until a read makes room.
    PipeBounded(u64),
    /// Writes one token into pipe `id`, waking a blocked reader (blocking while
    /// a bounded pipe is full).
    PipeWrite(u32),
    /// Reads one token from pipe `id`, blocking while it is empty.
    PipeRead(u32),
    /// Gives up the CPU to the next runnable thread.
    Yield,
    /// A system call that does nothing (`getppid`): entry, dispatch and exit
    /// only.
    Null,
}

/// One operation of a program.
pub enum Op {
    /// Accesses `pages` consecutive 4 KB pages from `va`, one access each.
    Touch {
        /// First page.
        va: u64,
        /// Pages.
        pages: u64,
        /// Whether the accesses are writes.
        write: bool,
    },
    /// Spends `cycles` computing without memory traffic of interest.
    Compute(u64),
    /// Makes a system call.
    Sys(Sys),
    /// Records the current time under a name (for the workload's result).
    Mark(&'static str),
    /// Exits the thread (and its process with its last thread).
    Exit,
    /// Exits as [`Op::Exit`] does, then writes one token into pipe `id`
    /// (unbounded, or not full), waking a reader blocked on it: a child's exit
    /// waking its parent in `wait`, which Linux's `do_exit` does in
    /// `exit_notify`, after `exit_mm` has torn the address space down. A parent
    /// that reads the pipe so goes on only once the child's teardown is done,
    /// where a token written before [`Op::Exit`] lets it go on during it.
    ExitNotify(u32),
}

/// A thread's code: returns the next operation, given the previous one's result
/// (a system call's return value, 0 otherwise).
pub trait Program {
    /// Returns the next operation.
    fn next(&mut self, ret: u64) -> Op;
}
