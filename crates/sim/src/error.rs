//! The simulator's errors: what went wrong, as data, for each front end to word.
//!
//! # Design
//!
//! A library function that can fail returns [`Error`], an enum whose variants
//! say what went wrong and carry what the message needs: the parameter
//! ([`Param`]) and the value given, the file, the underlying `io` error as its
//! [`source`](std::error::Error::source). A caller can match on it instead of
//! reading text.
//!
//! The words are the front end's. A message names parameters through
//! [`Names`], so each front end spells them its own way from the one template
//! per variant ([`Error::message`]): [`Library`], which [`Display`] uses, names
//! them as a Rust caller writes them (`cpus`, `set procs`); [`Flags`], the
//! command line's wording, by their flags (`--cpus`, `--set procs`); the Python
//! package by its keywords (`cpus=`). Every message still says what was wrong
//! and how to put it right.
//!
//! What is guaranteed: a variant without a parameter reads the same in every
//! wording, and [`Flags`] gives exactly the text `tlbkit` has always printed.
//! What is not: that every failure of a simulated run is a variant. The
//! kernel's own failures (a segmentation fault, an impossible request) stop a
//! run with the message in [`crate::sim::Sim::error`], which is text.
//!
//! [`Display`]: std::fmt::Display

use std::fmt;
use std::path::PathBuf;
use tlbkit_policy::MmId;

/// A parameter a user gives tlbkit, as an error names it.
///
/// One list for the simulator and the lab (which re-exports it), so that a
/// front end words every parameter in one place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Param {
    /// The machine's CPU count.
    Cpus,
    /// A workload, machine or kernel parameter, `key=value`.
    Set(String),
    /// The policies a comparison runs, the first its reference.
    Policies,
    /// The runs per policy of a comparison.
    Runs,
    /// The first seed of a comparison's runs.
    Seed,
    /// A chart's x axis: a field of the runs.
    X,
    /// A chart's plotted figure.
    Y,
    /// The field whose values are a chart's series.
    Group,
    /// A filter of a chart's runs, `field=value`.
    Where,
    /// The policy a report compares every other with.
    Baseline,
    /// A sweep's results file.
    Results,
}

/// How a front end names parameters in its messages.
pub trait Names {
    /// Returns the name of `p`: `cpus` as Rust writes it, `--cpus` on the
    /// command line.
    fn name(&self, p: &Param) -> String;

    /// Returns `p` given `value`: `cpus 5000`, `--cpus 5000`, `cpus=5000`.
    fn given(&self, p: &Param, value: &str) -> String {
        format!("{} {value}", self.name(p))
    }

    /// Returns `p` given several values: `policies [A, B]`, `--policy A
    /// --policy B`.
    fn given_each(&self, p: &Param, values: &[&str]) -> String {
        self.given(p, &format!("[{}]", values.join(", ")))
    }
}

/// The library's wording: parameters as a Rust caller writes them (the field
/// or argument, `first_seed`, and `set key` for a `key=value` setting).
#[derive(Clone, Copy, Debug, Default)]
pub struct Library;

impl Names for Library {
    fn name(&self, p: &Param) -> String {
        match p {
            Param::Cpus => "cpus".into(),
            Param::Set(key) => format!("set {key}"),
            Param::Policies => "policies".into(),
            Param::Runs => "runs".into(),
            Param::Seed => "first_seed".into(),
            Param::X => "x".into(),
            Param::Y => "y".into(),
            Param::Group => "group".into(),
            Param::Where => "filters".into(),
            Param::Baseline => "baseline".into(),
            Param::Results => "results".into(),
        }
    }

    fn given(&self, p: &Param, value: &str) -> String {
        match p {
            Param::Set(key) => format!("set {key}={value}"),
            _ => format!("{} {value}", self.name(p)),
        }
    }
}

/// The `tlbkit` command line's wording: every parameter by its flag, so that
/// its messages are the ones it has always printed.
///
/// It is here only as the bridge `impl From<Error> for String` uses, which
/// lets the command's code, written for errors as text, use the typed errors
/// unchanged; the command will take it over, and the bridge will go.
#[derive(Clone, Copy, Debug, Default)]
pub struct Flags;

impl Names for Flags {
    fn name(&self, p: &Param) -> String {
        match p {
            Param::Cpus => "--cpus".into(),
            Param::Set(key) => format!("--set {key}"),
            Param::Policies => "--policy".into(),
            Param::Runs => "--runs".into(),
            Param::Seed => "--seed".into(),
            Param::X => "--x".into(),
            Param::Y => "--y".into(),
            Param::Group => "--group".into(),
            Param::Where => "--where".into(),
            Param::Baseline => "--baseline".into(),
            Param::Results => "--results".into(),
        }
    }

    fn given(&self, p: &Param, value: &str) -> String {
        match p {
            Param::Set(key) => format!("--set {key}={value}"),
            _ => format!("{} {value}", self.name(p)),
        }
    }

    fn given_each(&self, p: &Param, values: &[&str]) -> String {
        values.iter().map(|v| self.given(p, v)).collect::<Vec<_>>().join(" ")
    }
}

impl fmt::Display for Param {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&Library.name(self))
    }
}

/// What went wrong in the simulator's library.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read or written.
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A path to write to ends in no file name (`..`, `/`).
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// Bytes that are not a trace tlbkit can replay.
    BadTrace {
        /// The file they were read from, if they were.
        path: Option<PathBuf>,
        /// What is wrong with them.
        problem: TraceProblem,
    },
    /// A workload the simulator does not have.
    UnknownWorkload {
        /// The name given.
        name: String,
    },
    /// A workload needs a parameter that was not given.
    MissingParam {
        /// The workload.
        workload: &'static str,
        /// The parameter.
        param: Param,
        /// What it gives, in words ("the trace to replay").
        what: &'static str,
        /// A placeholder for its value ("TRACE").
        placeholder: &'static str,
    },
    /// A workload parameter's value the workload cannot use, though in the
    /// parameter's range.
    BadParam {
        /// The workload.
        workload: &'static str,
        /// The parameter's key.
        key: &'static str,
        /// The value given.
        value: String,
        /// What the value must be ("a power of two").
        valid: &'static str,
    },
    /// A workload parameter exceeds another that bounds it.
    ParamExceeds {
        /// The workload.
        workload: &'static str,
        /// The parameter's key.
        key: &'static str,
        /// Its value.
        value: String,
        /// The bounding parameter's key.
        limit_key: &'static str,
        /// Its value.
        limit: String,
    },
    /// A run ended without the measurement its workload reports (too short a
    /// run, or a workload that stalled).
    Unmeasured {
        /// The workload.
        workload: &'static str,
        /// What is missing ("the ring did not complete; no timing was recorded").
        why: String,
    },
    /// A new process needs an address space and every slot is taken.
    AddressSpaces {
        /// The slots the run has.
        max: usize,
    },
    /// An image region that is not page-aligned user memory.
    ImageRegion {
        /// Its first address.
        va: u64,
        /// Its pages.
        pages: u64,
    },
    /// Two image regions that overlap.
    ImageOverlap {
        /// The first region's address.
        first: u64,
        /// The second's.
        second: u64,
    },
    /// A user access on a CPU whose root is the reserved (kernel-only) one.
    ReservedRoot {
        /// The CPU.
        cpu: usize,
        /// The address.
        va: u64,
    },
    /// An access that still faulted after its faults were handled.
    KeptFaulting {
        /// The CPU.
        cpu: usize,
        /// The address.
        va: u64,
    },
    /// A page fault on a CPU running no user address space.
    NoUserRoot {
        /// The CPU.
        cpu: usize,
        /// The address.
        va: u64,
    },
    /// An access to an address no mapping of the address space covers.
    NotMapped {
        /// The address.
        va: u64,
        /// The address space.
        mm: MmId,
    },
    /// A write to a read-only mapping.
    ReadOnly {
        /// The address.
        va: u64,
        /// The address space.
        mm: MmId,
    },
}

/// What is wrong with a trace's bytes or records ([`crate::trace::format`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceProblem {
    /// The file does not start with the magic bytes.
    NotATrace,
    /// Fewer bytes than the header.
    ShortHeader {
        /// The bytes there are.
        len: usize,
    },
    /// A format version this tlbkit does not read.
    Version {
        /// The file's version.
        version: u32,
    },
    /// Header flags this tlbkit does not know.
    UnknownFlags {
        /// The flags.
        flags: u32,
    },
    /// Fewer bytes of records than the header announces.
    ShortBody {
        /// The bytes announced.
        announced: u64,
        /// The bytes there are.
        len: u64,
    },
    /// Bytes after the records the header announces.
    Trailing {
        /// The extra bytes.
        extra: u64,
        /// The bytes announced.
        announced: u64,
    },
    /// The records do not match the header's checksum.
    Checksum,
    /// The records do not decode.
    Corrupt {
        /// What is wrong.
        what: String,
        /// The byte of the records where it was found.
        at: usize,
    },
    /// The first thread is not the first process's.
    FirstThread,
    /// A thread's records a replay could not follow.
    Thread {
        /// The thread's index.
        index: usize,
        /// Its traced id.
        tid: u32,
        /// What is wrong.
        what: String,
    },
    /// A thread no record creates.
    NeverCreated {
        /// The thread's index.
        index: usize,
    },
    /// A process's image regions are empty, overlap or leave user memory.
    Image {
        /// The process's index.
        process: usize,
    },
}

impl fmt::Display for TraceProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::trace::format::{HEADER, VERSION};
        match self {
            TraceProblem::NotATrace => write!(f, "not a tlbkit trace (no \"tlbtrace\" magic)"),
            TraceProblem::ShortHeader { len } => {
                write!(f, "truncated: {len} bytes, shorter than the {HEADER}-byte header")
            }
            TraceProblem::Version { version } => {
                write!(f, "format version {version}; this tlbkit reads version {VERSION}")
            }
            TraceProblem::UnknownFlags { flags } => write!(f, "unknown flags {flags:#x} in the header"),
            TraceProblem::ShortBody { announced, len } => {
                write!(f, "truncated: the header says {announced} bytes of records follow, the file has {len}")
            }
            TraceProblem::Trailing { extra, announced } => {
                write!(f, "{extra} bytes after the {announced} bytes of records the header announces")
            }
            TraceProblem::Checksum => write!(f, "corrupt: the records do not match the header's checksum"),
            TraceProblem::Corrupt { what, at } => write!(f, "corrupt: {what} at byte {at} of the records"),
            TraceProblem::FirstThread => write!(f, "corrupt: the first thread must belong to the first process"),
            TraceProblem::Thread { index, tid, what } => write!(f, "corrupt: thread {index} (tid {tid}): {what}"),
            TraceProblem::NeverCreated { index } => write!(f, "corrupt: thread {index} is never created"),
            TraceProblem::Image { process } => {
                write!(f, "corrupt: process {process}'s image regions are empty, overlap or leave user memory")
            }
        }
    }
}

impl Error {
    /// Returns the parameter the error is about, if it is about one.
    pub fn param(&self) -> Option<&Param> {
        match self {
            Error::MissingParam { param, .. } => Some(param),
            _ => None,
        }
    }

    /// Returns the message, naming parameters as `names` does (the one
    /// template of each variant, whatever the front end).
    pub fn message(&self, names: &dyn Names) -> String {
        match self {
            Error::Io { path, source } => format!("{}: {source}", path.display()),
            Error::NotAFile { path } => format!("{}: not a file name", path.display()),
            Error::BadTrace { path: Some(path), problem } => format!("{}: {problem}", path.display()),
            Error::BadTrace { path: None, problem } => problem.to_string(),
            Error::UnknownWorkload { name } => {
                let all: Vec<&str> = crate::workload::WORKLOADS.iter().map(|w| w.name).collect();
                format!("unknown workload '{name}'; valid workloads: {}", all.join(", "))
            }
            Error::MissingParam { workload, param, what, placeholder } => {
                format!("{workload}: give {what} with {}", names.given(param, placeholder))
            }
            Error::BadParam { workload, key, value, valid } => format!("{workload}: {key}={value} is not {valid}"),
            Error::ParamExceeds { workload, key, value, limit_key, limit } => {
                format!("{workload}: {key}={value} exceeds {limit_key}={limit}")
            }
            Error::Unmeasured { workload, why } => format!("{workload}: {why}"),
            Error::AddressSpaces { max } => format!("more than {max} address spaces"),
            Error::ImageRegion { va, pages } => format!(
                "image region of {pages} page(s) at {va:#x} is not page-aligned user memory below {:#x}",
                crate::program::USER_VA_END
            ),
            Error::ImageOverlap { first, second } => format!("image regions at {first:#x} and {second:#x} overlap"),
            Error::ReservedRoot { cpu, va } => format!("cpu{cpu} accessed user address {va:#x} with the reserved root"),
            Error::KeptFaulting { cpu, va } => format!("cpu{cpu}: access to {va:#x} kept faulting"),
            Error::NoUserRoot { cpu, va } => format!("cpu{cpu}: fault at {va:#x} without a user root"),
            Error::NotMapped { va, mm } => format!("segmentation fault: {va:#x} is not mapped in {mm}"),
            Error::ReadOnly { va, mm } => format!("segmentation fault: write to read-only {va:#x} in {mm}"),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message(&Library))
    }
}

/// The bridge for the command line's code, which handles errors as text: an
/// error becomes the message `tlbkit` prints ([`Flags`]). The command will
/// word the typed errors itself, and this conversion will go.
impl From<Error> for String {
    fn from(e: Error) -> String {
        e.message(&Flags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every parameter, for the wordings' tests.
    fn all_params() -> Vec<Param> {
        use Param::*;
        vec![Cpus, Set("procs".into()), Policies, Runs, Seed, X, Y, Group, Where, Baseline, Results]
    }

    #[test]
    fn the_command_line_names_each_parameter_by_its_flag() {
        let flags: Vec<String> = all_params().iter().map(|p| Flags.name(p)).collect();
        assert_eq!(
            flags,
            [
                "--cpus",
                "--set procs",
                "--policy",
                "--runs",
                "--seed",
                "--x",
                "--y",
                "--group",
                "--where",
                "--baseline",
                "--results"
            ]
        );
        assert_eq!(Flags.given(&Param::Set("procs".into()), "0"), "--set procs=0");
        assert_eq!(Flags.given(&Param::Cpus, "5000"), "--cpus 5000");
        assert_eq!(Flags.given_each(&Param::Policies, &["A", "B"]), "--policy A --policy B");
    }

    #[test]
    fn the_library_names_no_flag() {
        for p in all_params() {
            for text in [Library.name(&p), Library.given(&p, "1"), Library.given_each(&p, &["A", "B"])] {
                assert!(!text.contains("--"), "{p:?}: {text}");
            }
        }
        assert_eq!(Library.given(&Param::Set("procs".into()), "0"), "set procs=0");
        assert_eq!(Library.given_each(&Param::Policies, &["A", "B"]), "policies [A, B]");
    }

    #[test]
    fn a_missing_parameter_is_worded_by_each_front_end() {
        let e = Error::MissingParam {
            workload: "trace",
            param: Param::Set("file".into()),
            what: "the trace to replay",
            placeholder: "TRACE",
        };
        assert_eq!(e.param(), Some(&Param::Set("file".into())));
        assert_eq!(e.to_string(), "trace: give the trace to replay with set file=TRACE");
        assert_eq!(String::from(e), "trace: give the trace to replay with --set file=TRACE");
    }

    #[test]
    fn an_io_error_is_the_source_and_the_message_names_the_file() {
        let e = Error::Io { path: "/no/such".into(), source: std::io::Error::from(std::io::ErrorKind::NotFound) };
        assert!(std::error::Error::source(&e).is_some());
        assert!(e.to_string().starts_with("/no/such: "), "{e}");
        assert_eq!(e.param(), None);
    }
}
