//! The microbenchmarks by name: what each measures, in what unit, on how many
//! CPUs. The crate documentation defines each exactly.

use serde::{Deserialize, Serialize};

/// One microbenchmark of the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Bench {
    /// `getppid` through `syscall(2)`.
    NullSyscall,
    /// The first write to a page of a fresh anonymous mapping.
    PageFault,
    /// Zeroing a 64 MiB buffer from one CPU.
    Zeroing,
    /// Zeroing 64 MiB buffers on every CPU at once.
    ZeroingAll,
    /// `mmap` of 16 anonymous pages.
    Mmap,
    /// `munmap` of 16 touched pages.
    Munmap,
    /// `madvise(MADV_DONTNEED)` of 16 touched pages.
    Madvise,
    /// `mprotect` of 16 pages, alternately read-only and read-write.
    Mprotect,
    /// A 1-byte pipe write and read by one thread.
    PipeRw,
    /// A token passed between two processes on one CPU (lmbench `lat_ctx`).
    PipeSwitch,
    /// A cache line passed between two CPUs.
    LinePingPong,
    /// An atomic add to a line the CPU holds.
    AtomicHit,
    /// A ticket spinlock handed between two CPUs.
    LockHandoff,
    /// `mprotect` that must flush another CPU's TLB.
    Shootdown,
}

impl Bench {
    /// Every microbenchmark, in the order of the enum.
    pub const ALL: &'static [Bench] = &[
        Bench::NullSyscall,
        Bench::PageFault,
        Bench::Zeroing,
        Bench::ZeroingAll,
        Bench::Mmap,
        Bench::Munmap,
        Bench::Madvise,
        Bench::Mprotect,
        Bench::PipeRw,
        Bench::PipeSwitch,
        Bench::LinePingPong,
        Bench::AtomicHit,
        Bench::LockHandoff,
        Bench::Shootdown,
    ];

    /// Returns the benchmark's name (`null_syscall`), as a command line and
    /// the JSON of a [`Measurement`](super::Measurement) report it.
    pub fn name(self) -> &'static str {
        match self {
            Bench::NullSyscall => "null_syscall",
            Bench::PageFault => "page_fault",
            Bench::Zeroing => "zeroing",
            Bench::ZeroingAll => "zeroing_all",
            Bench::Mmap => "mmap",
            Bench::Munmap => "munmap",
            Bench::Madvise => "madvise",
            Bench::Mprotect => "mprotect",
            Bench::PipeRw => "pipe_rw",
            Bench::PipeSwitch => "pipe_switch",
            Bench::LinePingPong => "line_pingpong",
            Bench::AtomicHit => "atomic_hit",
            Bench::LockHandoff => "lock_handoff",
            Bench::Shootdown => "shootdown",
        }
    }

    /// Returns the benchmark named `name`, if there is one.
    pub fn from_name(name: &str) -> Option<Bench> {
        Bench::ALL.iter().copied().find(|b| b.name() == name)
    }

    /// Returns the unit of its figures: `GB/s` (10^9 bytes a second) for the
    /// zeroing ones, `ns` per operation for the rest.
    pub fn unit(self) -> &'static str {
        match self {
            Bench::Zeroing | Bench::ZeroingAll => "GB/s",
            _ => "ns",
        }
    }

    /// Returns one line that says what one operation is.
    pub fn doc(self) -> &'static str {
        match self {
            Bench::NullSyscall => "one syscall(SYS_getppid)",
            Bench::PageFault => "the first write to one 4 KiB page of a fresh anonymous mapping",
            Bench::Zeroing => "zeroing a pre-faulted 64 MiB buffer, as bytes a second",
            Bench::ZeroingAll => "zeroing a 64 MiB buffer on every usable online CPU at once, the rates summed",
            Bench::Mmap => "one mmap of 16 anonymous private read-write pages",
            Bench::Munmap => "one munmap of 16 written pages",
            Bench::Madvise => "one madvise(MADV_DONTNEED) of 16 written pages",
            Bench::Mprotect => "one mprotect of 16 written pages (read-only and read-write alternately)",
            Bench::PipeRw => "a 1-byte write to a pipe and its read back, by one thread",
            Bench::PipeSwitch => {
                "one pass of a 1-byte token between two processes on CPU a: a write, a read and a context switch"
            }
            Bench::LinePingPong => "one pass of a cache line from the CPU that wrote it to the other, spinning",
            Bench::AtomicHit => "one fully ordered atomic add to a counter alone in a line this CPU holds",
            Bench::LockHandoff => "one acquisition of a ticket spinlock that the other CPU released",
            Bench::Shootdown => {
                "mprotect read-only then read-write of a page that CPU b is reading: the first flushes b's TLB"
            }
        }
    }

    /// Returns how many CPUs it pins threads to: 1 (CPU `a`) or 2 (`a` and
    /// `b`). `ZeroingAll` gives 0: it runs on every online CPU this process
    /// may use, whatever `a` and `b` are.
    pub fn cpus_used(self) -> usize {
        match self {
            Bench::ZeroingAll => 0,
            Bench::LinePingPong | Bench::LockHandoff | Bench::Shootdown => 2,
            _ => 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_distinct() {
        for (i, bench) in Bench::ALL.iter().enumerate() {
            assert_eq!(Bench::from_name(bench.name()), Some(*bench));
            assert!(Bench::ALL[..i].iter().all(|b| b.name() != bench.name()));
        }
        assert_eq!(Bench::ALL.len(), 14);
        assert_eq!(Bench::from_name("pagefault"), None);
    }

    #[test]
    fn only_zeroing_is_in_gb_per_second() {
        let gb: Vec<_> = Bench::ALL.iter().filter(|b| b.unit() == "GB/s").collect();
        assert_eq!(gb, [&Bench::Zeroing, &Bench::ZeroingAll]);
    }
}
