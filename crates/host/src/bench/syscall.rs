//! `null_syscall` and `pipe_rw`: the cost of entering the kernel, bare and
//! with the pipe code of two 1-byte transfers.

use super::harness::{self, Trial};
use super::sys::now;
use super::{Bench, Effort, Measurement};
use crate::Error;
use std::io::{Read, Write};

/// Measures `null_syscall`: `syscall(SYS_getppid)`, ns per call.
///
/// `getppid` takes no lock and reads one pointer (kernel/sys.c); through
/// `syscall(2)` it is never cached by the C library, as `getpid` once was.
pub(super) fn null_syscall(effort: Effort) -> Result<Measurement, Error> {
    harness::run(Bench::NullSyscall, effort, 1, |ops| {
        let t0 = now()?;
        for _ in 0..ops {
            // SAFETY: getppid takes no arguments, touches no memory of this
            // process and cannot fail.
            std::hint::black_box(unsafe { libc::syscall(libc::SYS_getppid) });
        }
        Ok(Trial::per_op((now()? - t0) as f64, ops))
    })
}

/// Measures `pipe_rw`: one thread writes 1 byte to a pipe and reads it
/// back, two syscalls per operation; ns per operation.
pub(super) fn pipe_rw(effort: Effort) -> Result<Measurement, Error> {
    let (mut rx, mut tx) = std::io::pipe().map_err(|source| Error::Io { what: "pipe for pipe_rw".into(), source })?;
    harness::run(Bench::PipeRw, effort, 1, |ops| {
        let mut byte = [0u8];
        let t0 = now()?;
        for _ in 0..ops {
            tx.write_all(&[1]).map_err(|source| Error::Io { what: "write of 1 byte to the pipe".into(), source })?;
            rx.read_exact(&mut byte)
                .map_err(|source| Error::Io { what: "read of 1 byte from the pipe".into(), source })?;
        }
        Ok(Trial::per_op((now()? - t0) as f64, ops))
    })
}
