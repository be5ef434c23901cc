//! `pipe_switch`: lmbench's `lat_ctx -s 0 2`, two processes on one CPU
//! passing a token around a ring of two pipes.
//!
//! lmbench (src/lat_ctx.c) forks its processes and passes an int around the
//! ring; here the token is 1 byte. The forked child inherits the affinity of
//! the thread that forks, which is pinned to CPU `a`: both processes run on
//! `a`, and every pass blocks one in `pipe_read` and switches to the other.

use super::harness::{self, Trial};
use super::sys::now;
use super::{Bench, Effort, Measurement};
use crate::Error;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, RawFd};

/// The token's value while passing.
const TOKEN: u8 = 0;
/// The byte that tells the child to exit.
const STOP: u8 = 1;

/// Measures `pipe_switch`: the parent writes the token to the child's pipe
/// and reads it back from its own; ns per pass (half a round trip: one
/// write, one read and one switch).
pub(super) fn pipe_switch(effort: Effort) -> Result<Measurement, Error> {
    let pipe = |what: &str| {
        std::io::pipe().map_err(|source| Error::Io { what: format!("pipe to the {what} of pipe_switch"), source })
    };
    let (to_child_rx, mut to_child) = pipe("child")?;
    let (mut from_child, from_child_tx) = pipe("parent")?;
    // SAFETY: the child of this (multithreaded) process runs only `child`,
    // which calls async-signal-safe `read`, `write` and `_exit`, nothing that
    // needs a lock another thread held at the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(Error::last_os("fork of the pipe_switch child"));
    }
    if pid == 0 {
        child(to_child_rx.as_raw_fd(), from_child_tx.as_raw_fd(), [to_child.as_raw_fd(), from_child.as_raw_fd()]);
    }
    // The child's ends: closed here, so that a child that dies is a read of
    // 0 bytes (an error), not a wait.
    drop((to_child_rx, from_child_tx));
    let result = harness::run(Bench::PipeSwitch, effort, 2, |ops| {
        let mut token = [TOKEN];
        let t0 = now()?;
        for _ in 0..ops / 2 {
            to_child
                .write_all(&token)
                .map_err(|source| Error::Io { what: "write of the token to the pipe_switch child".into(), source })?;
            from_child
                .read_exact(&mut token)
                .map_err(|source| Error::Io { what: "read of the token from the pipe_switch child".into(), source })?;
        }
        Ok(Trial::per_op((now()? - t0) as f64, ops))
    });
    if to_child.write_all(&[STOP]).is_err() {
        // SAFETY: `pid` is our child, not yet reaped.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    reap(pid)?;
    result
}

/// Closes the parent's ends `parents`, then passes the token from `rx` back
/// to `tx` until it reads [`STOP`] or the pipe fails (the parent gone: with
/// its ends closed here, a read of 0 bytes); never returns.
fn child(rx: RawFd, tx: RawFd, parents: [RawFd; 2]) -> ! {
    for fd in parents {
        // SAFETY: `fd` is this process's copy of a parent's end, used by
        // nothing in the child.
        unsafe { libc::close(fd) };
    }
    let mut byte = TOKEN;
    loop {
        // SAFETY: `byte` is a valid 1-byte buffer; `rx` is an open pipe end.
        let read = unsafe { libc::read(rx, (&mut byte as *mut u8).cast(), 1) };
        if read != 1 || byte == STOP {
            // SAFETY: `_exit` ends the child without running the parent's
            // destructors or atexit handlers.
            unsafe { libc::_exit(0) };
        }
        // SAFETY: `byte` is a valid 1-byte buffer; `tx` is an open pipe end.
        if unsafe { libc::write(tx, (&byte as *const u8).cast(), 1) } != 1 {
            // SAFETY: as above.
            unsafe { libc::_exit(1) };
        }
    }
}

/// Waits for the child `pid` to exit.
fn reap(pid: libc::pid_t) -> Result<(), Error> {
    let mut status = 0;
    // SAFETY: `status` is a valid, writable int; `pid` is our child.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(Error::Io { what: "waitpid of the pipe_switch child".into(), source: e });
        }
    }
    Ok(())
}
