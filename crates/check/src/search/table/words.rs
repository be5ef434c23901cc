//! The memory of the table's parts: zeroed words, faulted in before use,
//! on transparent huge pages wherever the kernel gives them.
//!
//! A visit of a new state reads a random slot of a table that may reach
//! gigabytes; on 4 KiB pages nearly every such read also misses the TLB.
//! Huge pages need a 2 MiB range of one mapping asked for them, which a
//! part in a mapping of its own is only from 2 MiB up, and a table's 256
//! parts reach 2 MiB only once it holds about 50 million states. So parts
//! are carved from one reservation of address space asked for huge pages
//! ([`Reserve`]), one after the other: small parts share huge pages, and a
//! part of 2 MiB or more starts on a huge page's boundary. A part that is
//! dropped (it grew) gives its memory back to the kernel and its addresses
//! to the next part of its size. A part's sizes are the same in every
//! table, so a table made after another (as tests make them) finds each of
//! its sizes freed; within one search few sizes recur, so its growths take
//! about five times its final slots in address space, none of it memory
//! once freed. Where the reservation cannot be made (strict overcommit, a
//! limit on address space) or is used up, a part is a mapping of its own.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// A huge page's size (x86-64 and arm64 with 4 KiB pages).
const HUGE: usize = 2 << 20;
/// Address space the reservation asks for (none of it is memory until
/// touched); the smaller size is tried where the larger is refused (and
/// neither where the address space is too small to name it).
const RESERVE_BYTES: [u64; 2] = [1 << 40, 1 << 36];

/// A part's slots: `len` zeroed words, carved from the [`Reserve`] or in a
/// mapping of their own, whose untouched pages take no memory (the table
/// starts at 9 MiB of slots, and a small search touches few).
pub(super) struct Words {
    ptr: std::ptr::NonNull<AtomicU64>,
    len: usize,
    /// Carved from the reservation (else a mapping of its own).
    reserved: bool,
}

// SAFETY: `Words` owns its memory, as a `Box<[AtomicU64]>` would, and
// `AtomicU64` is `Sync`.
unsafe impl Send for Words {}
// SAFETY: as above; shared access goes through `&[AtomicU64]`.
unsafe impl Sync for Words {}

impl Words {
    /// `len` zeroed words; a mapping that fails is an allocation failure
    /// (the process stops, as on any; `--max-memory` is the cap that stops a
    /// search with its save instead).
    pub(super) fn new(len: usize) -> Words {
        match Reserve::get().and_then(|r| r.take(span(len))) {
            Some(p) => Words { ptr: p, len, reserved: true },
            None => Words::mapped(len),
        }
    }

    /// `len` zeroed words in a mapping of their own, asked for huge pages
    /// from 2 MiB up.
    pub(super) fn mapped(len: usize) -> Words {
        let bytes = span(len);
        let p = map(bytes, 0).unwrap_or_else(|| {
            std::alloc::handle_alloc_error(std::alloc::Layout::array::<u64>(len).expect("a part's size"))
        });
        if bytes >= HUGE {
            // SAFETY: our mapping; the advice only asks for huge pages, and failing it is harmless.
            unsafe { libc::madvise(p as *mut libc::c_void, bytes, libc::MADV_HUGEPAGE) };
        }
        let ptr = std::ptr::NonNull::new(p as *mut AtomicU64).expect("mmap returns no null mapping");
        Words { ptr, len, reserved: false }
    }
}

/// The bytes `len` words take: whole pages.
fn span(len: usize) -> usize {
    (len * 8).next_multiple_of(4096)
}

/// A fresh private anonymous mapping of `bytes` (zeroed by the kernel), with
/// extra `flags`; `None` if the kernel refuses it.
fn map(bytes: usize, flags: libc::c_int) -> Option<*mut u8> {
    // SAFETY: a new mapping, which overlaps nothing of ours.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | flags,
            -1,
            0,
        )
    };
    (p != libc::MAP_FAILED).then_some(p as *mut u8)
}

/// The process's reservation of address space for parts: one mapping asked
/// for huge pages, carved in order, each size's freed ranges kept for the
/// next part of that size.
struct Reserve {
    base: usize,
    len: usize,
    carve: Mutex<Carve>,
}

/// Where the reservation stands.
struct Carve {
    /// Offset of the first byte never handed out.
    next: usize,
    /// Freed ranges' addresses, by their size.
    free: std::collections::HashMap<usize, Vec<usize>>,
}

static RESERVE: OnceLock<Option<Reserve>> = OnceLock::new();

impl Reserve {
    /// The process's reservation, made at the first call; `None` if the
    /// kernel refused every size.
    fn get() -> Option<&'static Reserve> {
        RESERVE
            .get_or_init(|| {
                RESERVE_BYTES.iter().find_map(|&len| {
                    let len = usize::try_from(len).ok()?;
                    let p = map(len + HUGE, libc::MAP_NORESERVE)?;
                    // SAFETY: our mapping; the advice only asks for huge pages.
                    unsafe { libc::madvise(p as *mut libc::c_void, len + HUGE, libc::MADV_HUGEPAGE) };
                    let base = (p as usize).next_multiple_of(HUGE);
                    Some(Reserve { base, len, carve: Mutex::new(Carve { next: 0, free: Default::default() }) })
                })
            })
            .as_ref()
    }

    /// `bytes` of zeroed memory (whole pages), from a huge page's boundary
    /// if they are a huge page or more; `None` for another size or once the
    /// reservation is used up.
    fn take(&self, bytes: usize) -> Option<std::ptr::NonNull<AtomicU64>> {
        if bytes == 0 || !bytes.is_multiple_of(4096) {
            return None;
        }
        let mut c = self.carve.lock().unwrap_or_else(|e| e.into_inner());
        let addr = match c.free.get_mut(&bytes).and_then(Vec::pop) {
            Some(a) => a,
            None => {
                let at = c.next.next_multiple_of(if bytes >= HUGE { HUGE } else { 4096 });
                if at + bytes > self.len {
                    return None;
                }
                c.next = at + bytes;
                self.base + at
            }
        };
        std::ptr::NonNull::new(addr as *mut AtomicU64)
    }

    /// Gives a range [`Reserve::take`] handed out back: its memory to the
    /// kernel (it reads as zeros when next touched), its addresses to the
    /// next part of its size.
    fn give(&self, addr: usize, bytes: usize) {
        // SAFETY: a range of the reservation no `Words` holds any longer.
        unsafe { libc::madvise(addr as *mut libc::c_void, bytes, libc::MADV_DONTNEED) };
        let mut c = self.carve.lock().unwrap_or_else(|e| e.into_inner());
        c.free.entry(bytes).or_default().push(addr);
    }
}

/// Faults every page of a part's slots `w` in, for writing, without
/// changing them: a grown part's before it is published, and the first
/// parts' of a table when its first visitor comes or states are first
/// admitted in bulk (`Table::fault_in`).
///
/// Left to the visits, the first look at an empty slot maps the kernel's
/// shared zero page there, and the claim that writes the slot then breaks
/// that copy-on-write: the kernel replaces the entry and flushes it from
/// the TLB of every CPU the process runs on, an interrupt to each other
/// worker, with the workers taking turns at the page table's lock. With two
/// workers that cost the search a third of its CPU time, in the kernel (see
/// `bench/2026-11-29-check-table-prefault.md`). Faulted here, every page is
/// written once and none is mapped shared. The pages are the ones a search
/// touches anyway: its hashes spread over every page of a part long before
/// the part is full.
pub(super) fn populate(w: &Words) {
    populate_with(w, true);
}

/// [`populate`], with the kernel's advice first if `advise` (else only the
/// writes an older kernel gets, which a test runs on their own).
fn populate_with(w: &Words, advise: bool) {
    let (p, bytes) = (w.ptr.as_ptr() as *mut libc::c_void, span(w.len));
    // SAFETY: our private mapping of `bytes`; the advice only faults its
    // pages in, keeping their contents (Linux 5.14 and later; an older
    // kernel refuses it).
    if advise && unsafe { libc::madvise(p, bytes, libc::MADV_POPULATE_WRITE) } == 0 {
        return;
    }
    // A write to a word of each page that changes nothing, atomic because
    // visitors may be claiming slots in the part meanwhile: a
    // compare-and-swap, which writes even when it fails (an idempotent
    // `fetch_or(0)` may be compiled to a load, which would map the zero page).
    w.iter().step_by(4096 / 8).for_each(|word| {
        let _ = word.compare_exchange(0, 0, Ordering::Relaxed, Ordering::Relaxed);
    });
}

impl std::ops::Deref for Words {
    type Target = [AtomicU64];
    fn deref(&self) -> &[AtomicU64] {
        // SAFETY: `len` words, owned, zero-initialised (a valid `AtomicU64`).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Words {
    fn drop(&mut self) {
        let (p, bytes) = (self.ptr.as_ptr() as usize, span(self.len));
        match RESERVE.get() {
            Some(Some(r)) if self.reserved => r.give(p, bytes),
            // SAFETY: our own mapping of this size.
            _ => unsafe {
                libc::munmap(p as *mut libc::c_void, bytes);
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How many of the `n` pages from `addr` are mapped to a page of this
    /// process's own, from `/proc/self/pagemap` (present and exclusively
    /// mapped: the zero page, mapped where a page was only read, is neither
    /// this process's nor counted as mapped exclusively).
    /// `None` where the kernel gives no page map.
    #[cfg(target_os = "linux")]
    fn own_pages(addr: usize, n: usize) -> Option<usize> {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = std::fs::File::open("/proc/self/pagemap").ok()?;
        f.seek(SeekFrom::Start((addr / 4096 * 8) as u64)).ok()?;
        let mut buf = vec![0u8; n * 8];
        f.read_exact(&mut buf).ok()?;
        Some(
            buf.chunks(8)
                .filter(|e| u64::from_le_bytes((*e).try_into().expect("8 bytes")) >> 56 & 0x81 == 0x81)
                .count(),
        )
    }

    /// Both ways of faulting a part's pages in leave every page resident
    /// and its contents as they were; a read alone maps the zero page (so
    /// the writes are what count).
    #[cfg(target_os = "linux")]
    #[test]
    fn faulting_a_part_in_makes_every_page_resident_and_changes_nothing() {
        for advise in [true, false] {
            let w = Words::mapped(16 * 512);
            let at = w.ptr.as_ptr() as usize;
            assert_eq!(w[5].load(Ordering::Relaxed), 0);
            let Some(before) = own_pages(at, 16) else {
                eprintln!("skipped: no /proc/self/pagemap to read");
                return;
            };
            assert_eq!(before, 0, "a read maps the zero page, no page of its own");
            w[1000].store(7, Ordering::Relaxed);
            populate_with(&w, advise);
            assert_eq!(own_pages(at, 16), Some(16), "advise: {advise}");
            assert!(w.iter().enumerate().all(|(i, x)| x.load(Ordering::Relaxed) == u64::from(i == 1000) * 7));
        }
    }

    /// A part carved from the reservation reads as zeros, and so does the
    /// next part given its addresses after it was written and dropped; a
    /// part of 2 MiB or more starts on a huge page's boundary.
    #[test]
    fn carved_parts_are_zeroed_and_large_ones_aligned() {
        for len in [512, 4096, 4104, 1 << 18, 5 << 16, 1 << 19] {
            for _ in 0..3 {
                let w = Words::new(len);
                populate(&w);
                assert!(w.iter().all(|x| x.load(Ordering::Relaxed) == 0), "{len} words");
                if len * 8 >= HUGE && w.reserved {
                    assert_eq!(w.ptr.as_ptr() as usize % HUGE, 0, "{len} words");
                }
                w.iter().step_by(97).for_each(|x| x.store(u64::MAX, Ordering::Relaxed));
            }
        }
    }
}
