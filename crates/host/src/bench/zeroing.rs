//! `zeroing` and `zeroing_all`: memory bandwidth as the kernel spends it when
//! it clears pages, from one CPU and from all at once.

use super::harness::{self, Trial};
use super::sys::{now, page_size, pin, Mapping};
use super::{Bench, Effort, Measurement};
use crate::Error;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Barrier, Condvar, Mutex, PoisonError};

/// Each thread's buffer: 64 MiB, more than the last-level cache of any CPU
/// measured so that the writes reach memory.
const LEN: usize = 64 << 20;

/// Maps and pre-faults a zeroing buffer.
fn buffer() -> Result<Mapping, Error> {
    let buffer = Mapping::new(LEN, "the 64 MiB zeroing buffer")?;
    buffer.touch(page_size());
    Ok(buffer)
}

/// Zeroes `buffer` `passes` times; returns the ns it took.
fn zero(buffer: &Mapping, passes: u64) -> Result<u64, Error> {
    let t0 = now()?;
    for _ in 0..passes {
        // SAFETY: the range is the whole mapping, which is ours and writable.
        unsafe { std::ptr::write_bytes(buffer.ptr(), 0, buffer.len()) };
        // Each pass's stores may be read: none is a dead store to remove.
        std::hint::black_box(buffer.ptr());
    }
    Ok(now()? - t0)
}

/// Returns the rate in GB/s (bytes per ns) of `passes` over a buffer in `ns`.
fn rate(passes: u64, ns: u64) -> f64 {
    (passes as f64 * LEN as f64) / (ns.max(1) as f64)
}

/// Measures `zeroing`: `ptr::write_bytes` (the C library's `memset`) over a
/// pre-faulted 64 MiB buffer, `ops_per_trial` times; GB/s.
pub(super) fn zeroing(effort: Effort) -> Result<Measurement, Error> {
    let buffer = buffer()?;
    harness::run(Bench::Zeroing, effort, 1, |ops| {
        let ns = zero(&buffer, ops)?;
        Ok(Trial { ns: ns as f64, figure: rate(ops, ns) })
    })
}

/// Measures `zeroing_all`: one thread pinned to each CPU of `cpus`, each
/// zeroing its own pre-faulted 64 MiB buffer, all starting together at a
/// barrier; a trial's figure is the sum of the threads' rates (each over its
/// own time), in GB/s.
pub(super) fn zeroing_all(effort: Effort, cpus: &[usize]) -> Result<Measurement, Error> {
    let n = cpus.len();
    let go: (Mutex<Option<bool>>, Condvar) = (Mutex::new(None), Condvar::new());
    let barrier = Barrier::new(n + 1);
    // The passes of the next trial, 0 to stop; the barrier orders it.
    let passes = AtomicU64::new(0);
    let elapsed: Vec<AtomicU64> = cpus.iter().map(|_| AtomicU64::new(0)).collect();
    let failure: Mutex<Option<Error>> = Mutex::new(None);
    let fail = |e: Error| {
        failure.lock().unwrap_or_else(PoisonError::into_inner).get_or_insert(e);
    };
    std::thread::scope(|s| {
        let mut spawned = Ok(());
        for (i, &cpu) in cpus.iter().enumerate() {
            let (go, barrier, passes, elapsed, fail) = (&go, &barrier, &passes, &elapsed, &fail);
            let worker = move || {
                // Wait until every worker is spawned: a failed spawn leaves
                // the barrier short, and the others must not wait on it.
                let lock = go.0.lock().unwrap_or_else(PoisonError::into_inner);
                let started = *go.1.wait_while(lock, |go| go.is_none()).unwrap_or_else(PoisonError::into_inner);
                if started != Some(true) {
                    return;
                }
                let buffer = pin(cpu).and_then(|()| buffer()).map_err(fail).ok();
                barrier.wait();
                loop {
                    barrier.wait();
                    let (Some(buffer), p @ 1..) = (&buffer, passes.load(Relaxed)) else {
                        return;
                    };
                    elapsed[i].store(zero(buffer, p).map_err(fail).unwrap_or(0), Relaxed);
                    barrier.wait();
                }
            };
            let spawn = std::thread::Builder::new().name(format!("zeroing-{cpu}"));
            if let Err(source) = spawn.spawn_scoped(s, worker) {
                spawned = Err(Error::Io { what: format!("spawning the zeroing thread of CPU {cpu}"), source });
                break;
            }
        }
        *go.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(spawned.is_ok());
        go.1.notify_all();
        spawned?;
        let failed = || failure.lock().unwrap_or_else(PoisonError::into_inner).take();
        barrier.wait();
        let result = match failed() {
            Some(e) => Err(e),
            None => harness::run(Bench::ZeroingAll, effort, 1, |ops| {
                passes.store(ops, Relaxed);
                barrier.wait();
                barrier.wait();
                if let Some(e) = failed() {
                    return Err(e);
                }
                let ns: Vec<u64> = elapsed.iter().map(|e| e.load(Relaxed)).collect();
                Ok(Trial {
                    ns: ns.iter().copied().max().unwrap_or(0) as f64,
                    figure: ns.iter().map(|&ns| rate(ops, ns)).sum(),
                })
            }),
        };
        passes.store(0, Relaxed);
        barrier.wait();
        result
    })
}
