//! What the simulator asks of the host's operating system: that a large
//! machine's TLBs lie in 2 MB pages. A hint, which no result depends on.
//!
//! Why: at thousands of simulated CPUs the TLB models take hundreds of
//! megabytes, and nearly every event starts on a CPU whose state the host has
//! long evicted from its caches. Each of the dozen or so host pages an event
//! then reads also misses the host's own TLB: a second-level TLB of 2048
//! entries (AMD Zen 3's) reaches 8 MB of 4 KB pages, and 4 GB of 2 MB ones. A
//! Linux host backs heap memory with 2 MB pages only where a program asks
//! (`/sys/kernel/mm/transparent_hugepage/enabled` at `madvise`, the default
//! of many distributions), so the simulator asks, once its CPUs exist.

/// Asks the host to back the whole 2 MB pages of private anonymous memory
/// (the heap, anonymous mappings) that lie in `lo..hi` with 2 MB pages, at
/// once: `madvise` with `MADV_HUGEPAGE`, then `MADV_COLLAPSE` (Linux 6.1),
/// whose copy into huge pages is synchronous. Errors are ignored: an older
/// kernel, a host with transparent huge pages off, or no free 2 MB page leave
/// the memory as it was. Does nothing on hosts other than Linux.
pub(crate) fn back_with_huge_pages(lo: usize, hi: usize) {
    #[cfg(target_os = "linux")]
    linux::back_with_huge_pages(lo, hi);
    #[cfg(not(target_os = "linux"))]
    let _ = (lo, hi);
}

/// Returns the host memory `s` occupies: its first address and the one just
/// past its end.
pub(crate) fn span<T>(s: &[T]) -> (usize, usize) {
    let a = s.as_ptr() as usize;
    (a, a + std::mem::size_of_val(s))
}

/// Returns the least span that covers every non-empty one of `spans` (an
/// empty slice's address says nothing of where memory lies), what
/// [`back_with_huge_pages`] is asked about.
pub(crate) fn hull(spans: impl IntoIterator<Item = (usize, usize)>) -> (usize, usize) {
    spans.into_iter().filter(|(a, b)| a < b).fold((usize::MAX, 0), |(lo, hi), (a, b)| (lo.min(a), hi.max(b)))
}

#[cfg(target_os = "linux")]
mod linux {
    /// A huge page of the host, in bytes.
    const HUGE: usize = 2 << 20;

    /// `MADV_COLLAPSE` from Linux's `include/uapi/asm-generic/mman-common.h`
    /// (not in every C library's headers).
    const MADV_COLLAPSE: libc::c_int = 25;

    pub(super) fn back_with_huge_pages(lo: usize, hi: usize) {
        let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
            return;
        };
        for (start, end) in maps.lines().filter_map(anonymous) {
            if let Some((s, e)) = whole_huge_pages(start.max(lo), end.min(hi)) {
                let p = s as *mut libc::c_void;
                // SAFETY: advice on whole pages of this process's own private
                // anonymous memory, which changes the pages that back them and
                // not what they hold.
                unsafe {
                    libc::madvise(p, e - s, libc::MADV_HUGEPAGE);
                    libc::madvise(p, e - s, MADV_COLLAPSE);
                }
            }
        }
    }

    /// Returns the whole 2 MB pages that lie in `start..end`, if any.
    pub(super) fn whole_huge_pages(start: usize, end: usize) -> Option<(usize, usize)> {
        let (s, e) = (start.next_multiple_of(HUGE), end / HUGE * HUGE);
        (s < e).then_some((s, e))
    }

    /// Returns the address range of a line of `/proc/self/maps` that is
    /// private, writable anonymous memory (the heap, or a mapping of no file).
    pub(super) fn anonymous(line: &str) -> Option<(usize, usize)> {
        let mut f = line.split_ascii_whitespace();
        let (range, perms, inode) = (f.next()?, f.next()?, f.nth(2)?);
        let path = f.next();
        if !perms.starts_with("rw") || !perms.ends_with('p') || inode != "0" || !matches!(path, None | Some("[heap]")) {
            return None;
        }
        let (a, b) = range.split_once('-')?;
        Some((usize::from_str_radix(a, 16).ok()?, usize::from_str_radix(b, 16).ok()?))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn only_private_writable_anonymous_memory_is_advised() {
            let heap = "55d0a1e00000-55d0a5e00000 rw-p 00000000 00:00 0                          [heap]";
            assert_eq!(anonymous(heap), Some((0x55d0a1e00000, 0x55d0a5e00000)));
            assert_eq!(
                anonymous("7f0000000000-7f0000400000 rw-p 00000000 00:00 0 "),
                Some((0x7f0000000000, 0x7f0000400000))
            );
            for other in [
                "7f0000000000-7f0000400000 r--p 00000000 00:00 0",
                "7f0000000000-7f0000400000 rw-s 00000000 00:01 1234                       /dev/zero (deleted)",
                "55d0a0000000-55d0a0200000 rw-p 00002000 08:01 4242                       /usr/bin/tlbkit",
                "7ffd1c000000-7ffd1c021000 rw-p 00000000 00:00 0                          [stack]",
                "not a line of maps",
            ] {
                assert_eq!(anonymous(other), None, "{other}");
            }
        }

        /// Only memory wholly inside the span is advised: a 2 MB page that
        /// sticks out of it holds memory the simulator did not ask about.
        #[test]
        fn only_whole_huge_pages_inside_the_span_are_advised() {
            assert_eq!(whole_huge_pages(0, 4 * HUGE), Some((0, 4 * HUGE)));
            assert_eq!(whole_huge_pages(1, 4 * HUGE - 1), Some((HUGE, 3 * HUGE)));
            assert_eq!(whole_huge_pages(HUGE + 1, 3 * HUGE - 1), None);
            assert_eq!(whole_huge_pages(5, HUGE), None);
            assert_eq!(whole_huge_pages(3 * HUGE, 2 * HUGE), None);
        }

        /// The span asked about covers every slice that has memory, and an
        /// empty slice's address (which may be anywhere) widens nothing.
        #[test]
        fn the_hull_covers_the_non_empty_spans() {
            let (v, w, none) = (vec![0u64; 8], vec![0u8; 3], Vec::<u64>::new());
            let (lo, hi) = crate::host::hull([crate::host::span(&v), crate::host::span(&none), crate::host::span(&w)]);
            for (a, b) in [crate::host::span(&v), crate::host::span(&w)] {
                assert!(lo <= a && b <= hi);
            }
            assert_eq!(crate::host::hull([crate::host::span(&none)]), (usize::MAX, 0));
        }

        /// The advice changes what backs the memory, never what it holds.
        #[test]
        fn advised_memory_keeps_its_contents() {
            let v: Vec<u64> = (0..(3 * HUGE as u64 / 8)).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
            let (lo, hi) = (v.as_ptr() as usize, v.as_ptr() as usize + v.len() * 8);
            super::super::back_with_huge_pages(lo, hi);
            assert!(v.iter().enumerate().all(|(i, &x)| x == (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)));
        }
    }
}
