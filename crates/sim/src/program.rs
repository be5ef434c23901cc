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

/// A system call.
pub enum Sys {
    /// Maps `pages` anonymous pages; returns the address.
    Mmap {
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
    /// Creates a pipe (or eventfd); returns its id.
    Pipe,
    /// Writes one token into pipe `id`, waking a blocked reader.
    PipeWrite(u32),
    /// Reads one token from pipe `id`, blocking while it is empty.
    PipeRead(u32),
    /// Gives up the CPU to the next runnable thread.
    Yield,
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
}

/// A thread's code: returns the next operation, given the previous one's result
/// (a system call's return value, 0 otherwise).
pub trait Program {
    /// Returns the next operation.
    fn next(&mut self, ret: u64) -> Op;
}
