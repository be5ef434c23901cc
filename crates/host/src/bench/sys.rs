//! The few syscalls the microbenchmarks are made of, each checked, each
//! failure an [`Error::Io`] that names it: the clock, pinning, the CPUs this
//! process may use, and anonymous mappings.

use crate::topology::{format_cpu_list, parse_cpu_list};
use crate::Error;

/// Returns `CLOCK_MONOTONIC` in ns.
///
/// # Errors
/// [`Error::Io`] if `clock_gettime` fails.
#[inline]
pub(super) fn now() -> Result<u64, Error> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable `timespec`.
    if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) } != 0 {
        return Err(Error::last_os("clock_gettime(CLOCK_MONOTONIC)"));
    }
    Ok(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// Returns the mean time, in ns, of an empty timed section (two [`now`]s):
/// what a benchmark that times each operation apart subtracts from each.
pub(super) fn bracket_ns() -> Result<f64, Error> {
    const SAMPLES: u64 = 1000;
    let mut sum = 0;
    for _ in 0..SAMPLES {
        let t0 = now()?;
        sum += now()? - t0;
    }
    Ok(sum as f64 / SAMPLES as f64)
}

/// Returns the base page size (4 KiB on x86; 4, 16 or 64 KiB on arm64).
pub(super) fn page_size() -> usize {
    // SAFETY: `sysconf` reads a constant of the system.
    match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        size if size > 0 => size as usize,
        _ => 4096,
    }
}

/// Pins the calling thread to `cpu`.
pub(super) fn pin(cpu: usize) -> Result<(), Error> {
    let what = || format!("sched_setaffinity of a benchmark thread to CPU {cpu}");
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(Error::Io { what: what(), source: std::io::Error::from_raw_os_error(libc::EINVAL) });
    }
    // SAFETY: all zeros is the empty `cpu_set_t`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` is below CPU_SETSIZE, checked above.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid `cpu_set_t` of the size given; pid 0 is the
    // calling thread.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) } != 0 {
        return Err(Error::last_os(what()));
    }
    Ok(())
}

/// Returns the CPUs the calling thread may run on (`sched_getaffinity`).
pub(super) fn allowed() -> Result<Vec<usize>, Error> {
    // SAFETY: all zeros is the empty `cpu_set_t`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable `cpu_set_t` of the size given.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) } != 0 {
        return Err(Error::last_os("sched_getaffinity"));
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

/// Returns the online CPUs (`/sys/devices/system/cpu/online`).
pub(super) fn online() -> Result<Vec<usize>, Error> {
    const PATH: &str = "/sys/devices/system/cpu/online";
    let text = std::fs::read_to_string(PATH).map_err(|source| Error::Io { what: format!("reading {PATH}"), source })?;
    parse_cpu_list(&text).map_err(|e| Error::Parse { path: PATH.into(), what: e.to_string() })
}

/// Returns an error if `cpu` is not online or not allowed.
pub(super) fn check_cpu(cpu: usize, online: &[usize], allowed: &[usize]) -> Result<(), Error> {
    if !online.contains(&cpu) {
        return Err(Error::NoSuchCpu { cpu, online: format_cpu_list(online) });
    }
    if !allowed.contains(&cpu) {
        return Err(Error::NotAllowed { cpu, allowed: format_cpu_list(allowed) });
    }
    Ok(())
}

/// An anonymous private read-write mapping, unmapped when dropped.
///
/// Its memory is reached only through raw pointers ([`Mapping::ptr`]), never
/// through Rust references, so `madvise` and `mprotect` of it cannot break
/// what a reference promises.
pub(super) struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory of this process; it is only read and
// written through raw pointers with volatile or `write_bytes` accesses.
unsafe impl Send for Mapping {}
// SAFETY: as for `Send`: sharing it shares the address, not a reference.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes; `what` names the mapping in an error.
    pub fn new(len: usize, what: &'static str) -> Result<Mapping, Error> {
        // SAFETY: a fresh anonymous mapping at an address the kernel picks
        // touches no memory of this process.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(Error::last_os(format!("mmap of {what}")));
        }
        Ok(Mapping { ptr: ptr.cast(), len })
    }

    /// Returns its first byte's address.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Returns its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Writes one byte at the start of each page, in order. The mapping must
    /// be writable (not after [`Mapping::protect`] read-only).
    #[inline]
    pub fn touch(&self, page: usize) {
        for offset in (0..self.len).step_by(page) {
            // SAFETY: `offset` is inside the mapping, which is ours and
            // writable.
            unsafe { self.ptr.add(offset).write_volatile(1) };
        }
    }

    /// Calls `madvise(advice)` on the whole mapping.
    #[inline]
    pub fn advise(&self, advice: libc::c_int, what: &'static str) -> Result<(), Error> {
        // SAFETY: the range is this mapping; the advice used here
        // (MADV_NOHUGEPAGE, MADV_DONTNEED) leaves it mapped.
        if unsafe { libc::madvise(self.ptr.cast(), self.len, advice) } != 0 {
            return Err(Error::last_os(what));
        }
        Ok(())
    }

    /// Calls `mprotect(prot)` on the whole mapping.
    #[inline]
    pub fn protect(&self, prot: libc::c_int, what: &'static str) -> Result<(), Error> {
        // SAFETY: the range is this mapping; no Rust reference points into it.
        if unsafe { libc::mprotect(self.ptr.cast(), self.len, prot) } != 0 {
            return Err(Error::last_os(what));
        }
        Ok(())
    }

    /// Unmaps it, saying whether `munmap` failed.
    #[inline]
    pub fn unmap(self, what: &'static str) -> Result<(), Error> {
        let (ptr, len) = (self.ptr, self.len);
        std::mem::forget(self);
        // SAFETY: the range is this mapping, forgotten above so that nothing
        // unmaps it twice.
        if unsafe { libc::munmap(ptr.cast(), len) } != 0 {
            return Err(Error::last_os(what));
        }
        Ok(())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the range is this mapping, unmapped once. A failure leaves
        // it mapped, a leak and no more.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}
