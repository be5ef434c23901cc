//! Where Linux's `struct mm_struct` puts the words the simulator's kernel paths
//! touch, release by release: which of them share a cache line.
//!
//! A fault under `mmap_lock` writes the lock's count word twice (its
//! `down_read` and `up_read` atomics) and, after v4.19, its owner word once
//! (`rwsem_set_reader_owned`); it reads `mm->pgd` once, to start its walk of
//! the page tables (`pgd_offset` in `__handle_mm_fault`), and under per-VMA
//! locks `mm->mm_lock_seq` (`vma_start_read`). Which of these share a line
//! decides what other CPUs' faults cost each other: `pgd` on the count's line
//! is read from whichever CPU took the lock last, an owner word on it rides on
//! the count's atomic. The layout moved with every field added before them,
//! and the kernel's own notes follow it: "mm: relocate 'write_protect_seq' in
//! struct mm_struct" (2e3025434a6b, v5.13) put `mmap_lock`'s count and owner
//! back on two lines after v5.11 had moved them onto one, and "mm: move
//! mm_count into its own cache line" (c1753fd02a00, v6.5, and 6.4.4 in the
//! stable series: not the v6.4 tag) gave `mm_count` a line of its own.
//!
//! The offsets ([`layout`]) are those of each release's `include/linux/mm_types.h`
//! and `include/linux/rwsem.h` as read, the structures rebuilt in C and measured
//! with `offsetof` (x86-64, a distribution's configuration: no lockdep, no
//! structure randomisation, `CONFIG_SCHED_MM_CID` where it exists; not `pahole`
//! on a built kernel). Where the simulator runs a release between two of those
//! read, it takes the nearest one read at or before it; before the first one
//! read (v4.3), that one. An `mm_struct` comes from a cache-line aligned slab
//! (`SLAB_HWCACHE_ALIGN`; from v6.5 its first member is line aligned too), so
//! its lines begin at offsets that are multiples of 64.
//!
//! arm64's layout is x86-64's without the two compat mmap bases x86-64 has from
//! v4.12 (`mmap_compat_base`, `mmap_compat_legacy_base`, under
//! `HAVE_ARCH_COMPAT_MMAP_BASES`, x86 only): 16 bytes fewer before every word
//! here.
//!
//! `mm_count` is written when a CPU takes or drops a lazy reference to the mm
//! (`mmgrab_lazy_tlb`, `mmdrop_lazy_tlb`: `sim/sched.rs`): on the count's line
//! up to the v6.4 tag but in x86-64's v5.11-v5.12 and v6.4, on a line of its
//! own from v6.5.
//!
//! Not modelled: `mm_users`, `pgtables_bytes` (one atomic per page-table page
//! allocated) and `page_table_lock`, which share those lines in some
//! releases; and the context switch's read of `pgd` (`switch_mm`), counted in
//! the switch path.

use crate::kernel::Kernel;
use crate::preset::Arch;

/// Where one release puts the words of `struct mm_struct` the kernel paths
/// touch: byte offsets from the structure's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmLayout {
    /// `pgd`, the page tables' root.
    pub pgd: u16,
    /// `mmap_lock`'s count word (`mmap_sem` before v5.8).
    pub count: u16,
    /// `mmap_lock`'s owner word.
    pub owner: u16,
    /// `mm_lock_seq`, which a fault under per-VMA locks reads: after
    /// `mmap_lock` and `mmlist` (and from v6.15 `vma_writer_wait`), where the
    /// per-VMA lock series put it, also on a kernel before v6.4 that runs the
    /// series by switch.
    pub lock_seq: u16,
    /// `mm_count`, the mm's reference count that lazy-TLB CPUs hold: at the
    /// structure's start, alone on its line, from v6.5.
    pub mm_count: u16,
}

impl MmLayout {
    /// Returns whether `pgd` shares a line with a word of `mmap_lock` that
    /// every taker writes: its read then may find the line another CPU's.
    pub fn pgd_on_lock_line(self) -> bool {
        let line = self.pgd / 64;
        line == self.count / 64 || line == self.owner / 64
    }
}

/// One release's layout on x86-64: from `release` on, `pgd`, `mmap_lock`'s
/// count and owner and `mm_count` at these offsets; `compat` whether the two
/// compat mmap bases come before them (arm64 lacks them) and before a
/// `mm_count` that is not the structure's first word.
struct Row {
    release: (u8, u8),
    pgd: u16,
    count: u16,
    owner: u16,
    mm_count: u16,
    compat: bool,
}

/// The releases read, oldest first (see the module's docs).
const ROWS: &[Row] = &[
    // v4.3 to v4.10: rwsem's owner last in the semaphore (40 bytes).
    Row { release: (4, 3), pgd: 64, count: 104, owner: 136, mm_count: 76, compat: false },
    // The compat bases (v4.12) and a 64-bit vmacache_seqnum.
    Row { release: (4, 14), pgd: 80, count: 120, owner: 152, mm_count: 92, compat: true },
    // pgtables_bytes in place of nr_ptes and nr_pmds (v4.15).
    Row { release: (4, 19), pgd: 80, count: 112, owner: 144, mm_count: 92, compat: true },
    // The rwsem's owner beside its count (v5.3), membarrier_state, has_pinned.
    Row { release: (5, 10), pgd: 80, count: 120, owner: 128, mm_count: 96, compat: true },
    // write_protect_seq before mmap_lock (v5.11): count and owner on one line.
    Row { release: (5, 11), pgd: 80, count: 128, owner: 136, mm_count: 96, compat: true },
    // write_protect_seq moved after mmap_lock (2e3025434a6b, v5.13).
    Row { release: (5, 13), pgd: 80, count: 120, owner: 128, mm_count: 96, compat: true },
    // The maple tree in place of the rbtree and vmacache (v6.1).
    Row { release: (6, 1), pgd: 72, count: 112, owner: 120, mm_count: 88, compat: true },
    // The mm_cid fields after mm_count (v6.4).
    Row { release: (6, 4), pgd: 72, count: 128, owner: 136, mm_count: 88, compat: true },
    // mm_count on a line of its own at the start (c1753fd02a00, v6.5).
    Row { release: (6, 5), pgd: 136, count: 184, owner: 192, mm_count: 0, compat: true },
    // The maple tree's fields reordered, get_unmapped_area's pointer gone (v6.9).
    Row { release: (6, 9), pgd: 128, count: 176, owner: 184, mm_count: 0, compat: true },
    // The mm_cid fields grown (nr_cpus_allowed, max_nr_cid, cpus_allowed_lock).
    Row { release: (6, 13), pgd: 120, count: 184, owner: 192, mm_count: 0, compat: true },
];

/// Bytes from `mmap_lock`'s count to `mm_lock_seq`: the rest of the semaphore
/// (40 bytes in all) and `mmlist` (16), then from v6.15 `vma_writer_wait` (8).
fn lock_seq_after_count(release: (u8, u8)) -> u16 {
    if release >= (6, 15) {
        64
    } else {
        56
    }
}

/// Returns `kernel`'s layout on `arch`; `None` for a kernel that is not Linux.
pub fn layout(kernel: Kernel, arch: Arch) -> Option<MmLayout> {
    let Kernel::Linux(a, b) = kernel else { return None };
    let release = (a, b);
    let row = ROWS.iter().rev().find(|r| r.release <= release).unwrap_or(&ROWS[0]);
    let less = if arch == Arch::Arm64 && row.compat { 16 } else { 0 };
    let count = row.count - less;
    Some(MmLayout {
        pgd: row.pgd - less,
        count,
        owner: row.owner - less,
        lock_seq: count + lock_seq_after_count(release),
        mm_count: if row.mm_count == 0 { 0 } else { row.mm_count - less },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(kernel: Kernel, arch: Arch) -> (u16, u16, u16, u16) {
        let l = layout(kernel, arch).expect("a Linux layout");
        (l.pgd / 64, l.count / 64, l.owner / 64, l.lock_seq / 64)
    }

    #[test]
    fn the_lines_of_each_release_read() {
        use Arch::{Arm64, X86_64};
        let l = Kernel::Linux;
        // pgd, count, owner, mm_lock_seq: the line of each.
        assert_eq!(lines(l(4, 10), X86_64), (1, 1, 2, 2));
        assert_eq!(lines(l(5, 10), X86_64), (1, 1, 2, 2));
        assert_eq!(lines(l(5, 12), X86_64), (1, 2, 2, 2), "write_protect_seq pushed mmap_lock on");
        assert_eq!(lines(l(5, 15), X86_64), (1, 1, 2, 2), "relocated in v5.13");
        assert_eq!(lines(l(6, 1), X86_64), (1, 1, 1, 2));
        assert_eq!(lines(l(6, 4), X86_64), (1, 2, 2, 2), "the v6.4 tag: mm_count still beside mm_users");
        assert_eq!(lines(l(6, 5), X86_64), (2, 2, 3, 3));
        assert_eq!(lines(l(6, 9), X86_64), (2, 2, 2, 3));
        assert_eq!(lines(l(6, 13), X86_64), (1, 2, 3, 3));
        assert_eq!(lines(l(6, 18), X86_64), (1, 2, 3, 3));
        assert_eq!(layout(l(6, 18), X86_64).map(|l| l.lock_seq), Some(248));
        assert_eq!(lines(l(4, 19), Arm64), (1, 1, 2, 2));
        assert_eq!(lines(l(5, 10), Arm64), (1, 1, 1, 2));
        assert_eq!(lines(l(6, 1), Arm64), (0, 1, 1, 2));
        assert_eq!(lines(l(6, 9), Arm64), (1, 2, 2, 3));
        assert_eq!(lines(l(6, 18), Arm64), (1, 2, 2, 3));
    }

    #[test]
    fn mm_count_shares_the_counts_line_to_v6_4_but_where_the_count_moved_and_has_its_own_from_v6_5() {
        use Arch::{Arm64, X86_64};
        let l = Kernel::Linux;
        let at = |k, arch| layout(k, arch).map(|l| (l.mm_count, l.mm_count / 64 == l.count / 64));
        assert_eq!(at(l(4, 10), X86_64), Some((76, true)));
        assert_eq!(at(l(4, 19), X86_64), Some((92, true)));
        assert_eq!(at(l(5, 10), X86_64), Some((96, true)));
        assert_eq!(at(l(5, 12), X86_64), Some((96, false)), "write_protect_seq pushed the count on");
        assert_eq!(at(l(6, 1), X86_64), Some((88, true)));
        assert_eq!(at(l(6, 4), X86_64), Some((88, false)), "the v6.4 tag: the count at 128");
        assert_eq!(at(l(6, 5), X86_64), Some((0, false)));
        assert_eq!(at(l(4, 10), Arm64), Some((76, true)));
        assert_eq!(at(l(4, 19), Arm64), Some((76, true)));
        assert_eq!(at(l(5, 12), Arm64), Some((80, true)));
        assert_eq!(at(l(6, 4), Arm64), Some((72, true)));
        assert_eq!(at(l(6, 18), Arm64), Some((0, false)));
    }

    #[test]
    fn a_release_between_two_read_takes_the_earlier_and_freebsd_has_none() {
        assert_eq!(layout(Kernel::Linux(6, 6), Arch::X86_64), layout(Kernel::Linux(6, 5), Arch::X86_64));
        assert_eq!(layout(Kernel::Linux(3, 15), Arch::X86_64), layout(Kernel::Linux(4, 3), Arch::X86_64));
        assert_eq!(layout(Kernel::FreeBsd(13), Arch::Arm64), None);
    }

    #[test]
    fn pgd_shares_a_lock_line_where_the_release_puts_it_there() {
        let on = |a, b, arch| layout(Kernel::Linux(a, b), arch).is_some_and(MmLayout::pgd_on_lock_line);
        assert!(on(4, 10, Arch::X86_64) && on(6, 1, Arch::X86_64) && on(6, 9, Arch::X86_64));
        assert!(!on(5, 12, Arch::X86_64) && !on(6, 13, Arch::X86_64) && !on(6, 15, Arch::X86_64));
        assert!(on(5, 10, Arch::Arm64) && !on(6, 1, Arch::Arm64) && !on(6, 9, Arch::Arm64));
    }
}
