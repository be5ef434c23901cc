//! The kernel a machine runs, by name and version: what the simulator's
//! kernel paths and scheduler ask when they differ by kernel or version.
//!
//! This module holds the type and its version test only, so that every
//! part of the simulator can name it: each part keeps the rules it asks of
//! a kernel beside itself, as methods of [`Kernel`] (the memory paths' in
//! `crate::preset`, the scheduler's in `crate::sched::rules`).

/// The kernel whose paths the simulator's kernel follows on a machine, where
/// they differ by kernel or version (the memory paths' locks and batches:
/// `sim/kwork.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Kernel {
    /// Linux, major and minor version.
    Linux(u8, u8),
    /// FreeBSD, major version.
    FreeBsd(u8),
}

impl Default for Kernel {
    fn default() -> Self {
        Kernel::Linux(6, 9)
    }
}

impl Kernel {
    /// Returns whether this is Linux `major.minor` or later.
    #[inline]
    pub fn linux_from(self, major: u8, minor: u8) -> bool {
        matches!(self, Kernel::Linux(a, b) if (a, b) >= (major, minor))
    }

    /// Returns the kernel's name as a run's parameters give it, one word:
    /// `linux-5.13`, `freebsd-12`.
    pub fn name(self) -> String {
        match self {
            Kernel::Linux(a, b) => format!("linux-{a}.{b}"),
            Kernel::FreeBsd(a) => format!("freebsd-{a}"),
        }
    }
}
