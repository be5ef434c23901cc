//! Checks the CPUs a benchmark asks for, then runs it on a thread of its own
//! pinned to CPU `a`.

use super::sys::{allowed, check_cpu, online, pin};
use super::{fault, line, shootdown, switch, syscall, vm, zeroing};
use super::{Bench, Cpus, Effort, Measurement};
use crate::Error;

/// Checks the first `used` CPUs of `cpus` (1: `a`; 2: `a` and `b`, which
/// must differ); returns the CPUs both online and allowed.
pub(super) fn check(cpus: Cpus, used: usize) -> Result<Vec<usize>, Error> {
    let online = online()?;
    let allowed = allowed()?;
    check_cpu(cpus.a, &online, &allowed)?;
    if used == 2 {
        check_cpu(cpus.b, &online, &allowed)?;
        if cpus.a == cpus.b {
            return Err(Error::SameCpu);
        }
    }
    Ok(online.into_iter().filter(|c| allowed.contains(c)).collect())
}

/// Runs `bench` in a thread pinned to `cpus.a`.
pub(super) fn measure(bench: Bench, cpus: Cpus, effort: Effort) -> Result<Measurement, Error> {
    let usable = check(cpus, bench.cpus_used().max(1))?;
    let run = || {
        pin(cpus.a)?;
        match bench {
            Bench::NullSyscall => syscall::null_syscall(effort),
            Bench::PageFault => fault::page_fault(effort),
            Bench::Zeroing => zeroing::zeroing(effort),
            Bench::ZeroingAll => zeroing::zeroing_all(effort, &usable),
            Bench::Mmap => vm::mmap(effort),
            Bench::Munmap => vm::munmap(effort),
            Bench::Madvise => vm::madvise(effort),
            Bench::Mprotect => vm::mprotect(effort),
            Bench::PipeRw => syscall::pipe_rw(effort),
            Bench::PipeSwitch => switch::pipe_switch(effort),
            Bench::LinePingPong => line::line_pingpong(effort, cpus),
            Bench::AtomicHit => line::atomic_hit(effort),
            Bench::LockHandoff => line::lock_handoff(effort, cpus),
            Bench::Shootdown => shootdown::shootdown(effort, cpus),
        }
    };
    std::thread::scope(|s| {
        let thread = std::thread::Builder::new()
            .name(bench.name().into())
            .spawn_scoped(s, run)
            .map_err(|source| Error::Io { what: format!("spawning the {} thread", bench.name()), source })?;
        thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}
