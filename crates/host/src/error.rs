//! The crate's errors: a system that is not Linux, a CPU that cannot be used,
//! a syscall that failed, a `/sys` or `/proc` file that does not parse.
//!
//! Each `Display` is one line, fit to print after "error: " in a front end.

/// What went wrong on the host.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Every entry point that touches the host on a system other than Linux.
    #[error("measuring the host needs Linux; this system is {os}")]
    NotLinux {
        /// The system, as `std::env::consts::OS` names it.
        os: &'static str,
    },
    /// A CPU number that is not among the host's online CPUs.
    #[error("CPU {cpu} is not online here; the online CPUs are {online}")]
    NoSuchCpu {
        /// The CPU asked for.
        cpu: usize,
        /// The online CPUs, as a CPU list (`0-1`).
        online: String,
    },
    /// An online CPU outside this process's affinity mask (a cpuset, `taskset`).
    #[error("CPU {cpu} is online but this process may not run on it; it may run on {allowed}")]
    NotAllowed {
        /// The CPU asked for.
        cpu: usize,
        /// The CPUs the process may run on, as a CPU list.
        allowed: String,
    },
    /// The same CPU given twice to a benchmark that needs two.
    #[error("the two CPUs are the same; a two-CPU benchmark needs two different CPUs")]
    SameCpu,
    /// A syscall that failed, and which one.
    #[error("{what} failed: {source}")]
    Io {
        /// The call and its purpose ("mmap of the 16 MiB page-fault buffer").
        what: String,
        /// The error it returned.
        #[source]
        source: std::io::Error,
    },
    /// A file under `/sys` or `/proc`, or a CPU list, that does not parse.
    #[error("cannot parse {path}: {what}")]
    Parse {
        /// The file (or `--cpus` for a list the user gave).
        path: String,
        /// What is wrong with it.
        what: String,
    },
}

impl Error {
    /// Returns `Error::Io` for the failed call `what`, from `errno`.
    #[cfg(target_os = "linux")]
    pub(crate) fn last_os(what: impl Into<String>) -> Error {
        Error::Io { what: what.into(), source: std::io::Error::last_os_error() }
    }

    /// Returns `Error::NotLinux` naming this system.
    #[cfg(not(target_os = "linux"))]
    pub(crate) fn not_linux() -> Error {
        Error::NotLinux { os: std::env::consts::OS }
    }
}
