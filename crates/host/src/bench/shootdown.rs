//! `shootdown`: an `mprotect` that must invalidate a translation another CPU
//! holds.
//!
//! While a thread of the process runs on `b` reading the page, `b` is in the
//! address space's `mm_cpumask` and not lazy, so making the page read-only
//! must flush `b`'s TLB: on x86 an IPI to `b` and a wait for its answer
//! (`flush_tlb_mm_range`, arch/x86/mm/tlb.c), on arm64 a broadcast `TLBI`.
//! Making it writable again may need no flush: a private page's PTE stays
//! read-only under a read-write `mprotect` (write access comes back through a
//! write fault), and x86's `pte_needs_flush` (arch/x86/include/asm/tlbflush.h)
//! skips a PTE that did not change; one whose write bit did change is flushed.

use super::harness::{self, Trial};
use super::sys::{now, page_size, pin, Mapping};
use super::{Bench, Cpus, Effort, Measurement};
use crate::Error;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

/// The partner's state: still starting, reading, or failed to pin.
const STARTING: u8 = 0;
const READING: u8 = 1;
const FAILED: u8 = 2;

/// Measures `shootdown`: a thread on `b` writes the page once (so it is
/// present), then reads one byte of it in a loop until told to stop; the
/// thread on `a` times `mprotect(PROT_READ)` then `mprotect(PROT_READ |
/// PROT_WRITE)` of the page; ns per pair.
pub(super) fn shootdown(effort: Effort, cpus: Cpus) -> Result<Measurement, Error> {
    let page = Mapping::new(page_size(), "the shootdown page")?;
    let state = AtomicU8::new(STARTING);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let (page, state, stop) = (&page, &state, &stop);
        let reader = move || {
            if let Err(e) = pin(cpus.b) {
                // Release: publishes the error, returned below.
                state.store(FAILED, Ordering::Release);
                return Err(e);
            }
            page.touch(page.len());
            // Relaxed: the page is the kernel's to order; nothing else is shared.
            state.store(READING, Ordering::Relaxed);
            // Relaxed: stopping a little late is harmless.
            while !stop.load(Ordering::Relaxed) {
                // SAFETY: the page is mapped (and readable) until the scope
                // ends, after this thread.
                std::hint::black_box(unsafe { page.ptr().read_volatile() });
            }
            Ok(())
        };
        let spawn = std::thread::Builder::new().name(format!("shootdown-{}", cpus.b));
        let reader = spawn
            .spawn_scoped(s, reader)
            .map_err(|source| Error::Io { what: format!("spawning the shootdown reader of CPU {}", cpus.b), source })?;
        // Acquire: pairs with the failure's Release.
        while state.load(Ordering::Acquire) == STARTING {
            std::hint::spin_loop();
        }
        let measured = match state.load(Ordering::Acquire) {
            READING => Some(harness::run(Bench::Shootdown, effort, 1, |ops| {
                let t0 = now()?;
                for _ in 0..ops {
                    page.protect(libc::PROT_READ, "mprotect(PROT_READ) of the shootdown page")?;
                    page.protect(
                        libc::PROT_READ | libc::PROT_WRITE,
                        "mprotect(PROT_READ | PROT_WRITE) of the shootdown page",
                    )?;
                }
                Ok(Trial::per_op((now()? - t0) as f64, ops))
            })),
            _ => None,
        };
        stop.store(true, Ordering::Relaxed);
        let read = reader.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        match (measured, read) {
            (Some(measured), _) => measured,
            (None, Err(e)) => Err(e),
            // Only a reader that could not pin stops before reading.
            (None, Ok(())) => unreachable!("the shootdown reader stopped without an error"),
        }
    })
}
