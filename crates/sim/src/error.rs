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
//! them as a Rust caller writes them (`cpus`, `set procs`); the command line
//! by its flags (`--cpus`, `--set procs`); the Python package by its keywords
//! (`cpus=`). Every message still says what was wrong and how to put it right.
//! [`Param`] and [`Names`] are the registry's (`tlbkit_registry::param`),
//! shared with the checker, so that a front end words both libraries' errors
//! in one place.
//!
//! What is guaranteed: a variant without a parameter reads the same in every
//! wording, and every error about a parameter says which one ([`Error::param`]).
//! What is not: that every failure of a simulated run is a variant. The
//! kernel's own failures (a segmentation fault, an impossible request) stop a
//! run with the message in [`crate::sim::Sim::error`], which is text, and
//! reach the caller as [`Error::Failed`].
//!
//! [`Display`]: std::fmt::Display

use crate::preset::arch_name;
use std::fmt;
use std::path::PathBuf;
use tlbkit_policy::MmId;

pub use tlbkit_registry::param::{Library, Names, Param};
use tlbkit_registry::suggest::did_you_mean;
use tlbkit_registry::Arch;

/// What went wrong in the simulator's library.
#[derive(Debug, thiserror::Error)]
// Display: the message in the library's words.
#[error("{}", self.message(&Library))]
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
        /// The workloads there are.
        valid: Vec<&'static str>,
    },
    /// A machine the simulator has no preset for.
    UnknownMachine {
        /// The name given.
        name: String,
    },
    /// `--machine host` without a usable profile of the host.
    Host(#[from] crate::preset::host::ProfileError),
    /// A machine file (`--machine PATH.toml`) that cannot be used.
    MachineFile(#[from] crate::preset::file::MachineFileError),
    /// An error of the policy registry: an unknown policy, a shape the policy
    /// refuses.
    Registry(#[from] tlbkit_registry::Error),
    /// A C policy that could not be built (a file that does not compile, no
    /// compiler, a file that stops while booting): the C front end's error.
    C(#[from] tlbkit_c::Error),
    /// A policy for another architecture than the machine's.
    WrongArch {
        /// The policy.
        policy: &'static str,
        /// Its architecture.
        policy_arch: Arch,
        /// The machine.
        machine: String,
        /// Its architecture.
        machine_arch: Arch,
        /// The policies that fit the machine.
        fits: Vec<&'static str>,
    },
    /// A policy that needs `INVLPGB` on a machine without it.
    NeedsInvlpgb {
        /// The policy.
        policy: &'static str,
        /// The machine.
        machine: String,
        /// The machines that have it.
        fits: Vec<String>,
    },
    /// A CPU count outside the simulator's range.
    CpusRange {
        /// The CPUs given (a front end that takes signed numbers reports a
        /// negative count with this too).
        cpus: i64,
        /// The most the simulator runs.
        max: usize,
    },
    /// More CPUs than the machine's sockets have cores.
    TooFewCores {
        /// The CPUs given.
        cpus: usize,
        /// The machine.
        machine: String,
        /// The cores its sockets have.
        max: usize,
        /// Its sockets.
        sockets: usize,
        /// The cores of a socket.
        per_socket: usize,
        /// The sockets the CPUs need.
        need: usize,
    },
    /// A scale study without a CPU count.
    NoCpuCounts {
        /// The most CPUs a run has.
        max: usize,
    },
    /// A setting that is not `key=value`.
    MalformedSet {
        /// The setting given.
        text: String,
    },
    /// A setting whose key is no machine, kernel or workload parameter.
    UnknownSetting {
        /// The key given.
        key: String,
        /// The keys the run takes.
        valid: Vec<&'static str>,
    },
    /// A setting's value its parameter does not take (not a number, not on or
    /// off, none of the choices).
    BadSetting {
        /// The key.
        key: String,
        /// The value given.
        value: String,
        /// What a value must be, in words ("give on or off").
        want: String,
    },
    /// A setting's value outside its parameter's range.
    SettingRange {
        /// The key.
        key: String,
        /// The value given.
        value: String,
        /// The range, in words ("0 to 1").
        range: String,
    },
    /// A setting's value the machine does not offer (ASID widths, NUMA nodes).
    Unsupported {
        /// The key.
        key: &'static str,
        /// The value given.
        value: String,
        /// The machine.
        machine: String,
        /// The values it offers.
        choices: Vec<String>,
    },
    /// A socket count outside what the machine can be grown to.
    SocketsRange {
        /// The value given.
        value: String,
        /// The machine.
        machine: String,
        /// The most sockets.
        most: usize,
        /// The cores of a socket.
        per_socket: usize,
        /// The real machine's sockets.
        real: usize,
    },
    /// A switch turned on for a policy that does not take it (`kpti`,
    /// `tlbi_range`, `flush_ceiling`, `pti`).
    SwitchNotTaken {
        /// The switch's key.
        key: String,
        /// The policy.
        policy: &'static str,
        /// The policies that take it, in words (its entry's).
        takers: String,
        /// Whether its values are on and off (the message names `KEY=on`).
        on_off: bool,
    },
    /// A TLB mode word for a policy without TLB modes.
    TlbModeNotTaken {
        /// The policies that take one.
        takes: Vec<&'static str>,
        /// The policy.
        policy: &'static str,
    },
    /// Contiguous PTEs for a policy that is not arm64 Linux's.
    ContpteNotTaken {
        /// The contiguous-PTE mode asked for.
        mode: &'static str,
        /// The policies that take it.
        takes: Vec<&'static str>,
        /// The policy.
        policy: &'static str,
    },
    /// A workload's text parameter (a file) not given.
    NeedsText {
        /// The workload.
        workload: &'static str,
        /// The parameter's key.
        key: &'static str,
        /// What it gives.
        doc: &'static str,
    },
    /// A simulation that stopped with the kernel's error (a segmentation
    /// fault, an impossible request, an interrupted run).
    Failed {
        /// The workload.
        workload: &'static str,
        /// The phase that failed (`Main`, `Overhead`: [`crate::workload::Phase`]'s
        /// name); `None` for a timed phase of `bench`.
        phase: Option<&'static str>,
        /// The kernel's message ([`crate::sim::Sim::error`]).
        message: String,
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
        /// The header's bytes.
        header: usize,
    },
    /// A format version this tlbkit does not read.
    Version {
        /// The file's version.
        version: u32,
        /// The version this tlbkit reads.
        reads: u32,
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
        match self {
            TraceProblem::NotATrace => write!(f, "not a tlbkit trace (no \"tlbtrace\" magic)"),
            TraceProblem::ShortHeader { len, header } => {
                write!(f, "truncated: {len} bytes, shorter than the {header}-byte header")
            }
            TraceProblem::Version { version, reads } => {
                write!(f, "format version {version}; this tlbkit reads version {reads}")
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
    pub fn param(&self) -> Option<Param> {
        match self {
            Error::MissingParam { param, .. } => Some(param.clone()),
            Error::UnknownMachine { .. } | Error::Host(_) | Error::MachineFile(_) => Some(Param::Machine),
            Error::UnknownWorkload { .. } => Some(Param::Workload),
            Error::Registry(_) | Error::C(_) | Error::WrongArch { .. } | Error::NeedsInvlpgb { .. } => {
                Some(Param::Policy)
            }
            Error::CpusRange { .. } | Error::TooFewCores { .. } | Error::NoCpuCounts { .. } => Some(Param::Cpus),
            Error::MalformedSet { .. } => Some(Param::Sets),
            Error::UnknownSetting { key, .. }
            | Error::BadSetting { key, .. }
            | Error::SettingRange { key, .. }
            | Error::SwitchNotTaken { key, .. } => Some(set_param(key)),
            Error::Unsupported { key, .. } | Error::NeedsText { key, .. } => Some(set_param(key)),
            Error::SocketsRange { .. } => Some(set_param("sockets")),
            Error::TlbModeNotTaken { .. } => Some(set_param("tlb_mode")),
            Error::ContpteNotTaken { .. } => Some(set_param("contpte")),
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
            Error::UnknownWorkload { name, valid: all } => {
                format!(
                    "unknown workload '{name}'{}; valid workloads: {}",
                    did_you_mean(name, all.iter().copied()),
                    all.join(", ")
                )
            }
            Error::UnknownMachine { name } => {
                let all: Vec<String> = crate::preset::names();
                format!(
                    "unknown machine '{name}'{}; valid machines: {}",
                    did_you_mean(name, all.iter().map(String::as_str)),
                    all.join(", ")
                ) + "; or the path of a machine file (my.toml)"
            }
            Error::Host(e) => e.to_string(),
            Error::MachineFile(e) => e.to_string(),
            Error::Registry(e) => e.to_string(),
            Error::C(e) => e.to_string(),
            Error::WrongArch { policy, policy_arch, machine, machine_arch, fits } => format!(
                "policy '{policy}' is for {} machines but '{machine}' is {}; policies that fit: {}",
                arch_name(*policy_arch),
                arch_name(*machine_arch),
                fits.join(", ")
            ),
            Error::NeedsInvlpgb { policy, machine, fits } => format!(
                "policy '{policy}' needs INVLPGB, which '{machine}' does not have; machines with it: {}",
                fits.join(", ")
            ),
            Error::CpusRange { cpus, max } => {
                format!("{} is out of range: give 1 to {max}", names.given(&Param::Cpus, &cpus.to_string()))
            }
            Error::TooFewCores { cpus, machine, max, sockets, per_socket, need } => format!(
                "{}: {machine} has {max} cores ({sockets} socket{} of {per_socket}); give {}, or model a larger \
                 machine of the same sockets with {}",
                names.given(&Param::Cpus, &cpus.to_string()),
                if *sockets == 1 { "" } else { "s" },
                names.given(&Param::Cpus, &format!("1 to {max}")),
                names.given(&Param::Set("sockets".into()), &need.to_string())
            ),
            Error::NoCpuCounts { max } => {
                format!("{} needs at least one CPU count from 1 to {max}", names.name(&Param::Cpus))
            }
            Error::MalformedSet { text } => format!(
                "malformed {} '{text}': expected key=value, e.g. {}",
                names.name(&Param::Sets),
                names.given(&Param::Set("asid_bits".into()), "8")
            ),
            Error::UnknownSetting { key, valid } => {
                format!(
                    "unknown parameter '{key}'{}; valid keys: {}",
                    did_you_mean(key, valid.iter().copied()),
                    valid.join(", ")
                )
            }
            Error::BadSetting { key, value, want } => format!("{}: {want}", names.given(&set_param(key), value)),
            Error::SettingRange { key, value, range } => {
                format!("{} is out of range: give {range}", names.given(&set_param(key), value))
            }
            Error::Unsupported { key, value, machine, choices } => format!(
                "{} is not supported by {machine}: choose one of {}",
                names.given(&set_param(key), value),
                choices.join(", ")
            ),
            Error::SocketsRange { value, machine, most, per_socket, real } => format!(
                "{} is out of range for {machine}: give a whole number from 1 to {most} ({per_socket} cores each; \
                 the real machine has {real})",
                names.given(&set_param("sockets"), value)
            ),
            Error::SwitchNotTaken { key, policy, takers, on_off } => {
                let p = set_param(key);
                let what = if *on_off { names.given(&p, "on") } else { names.name(&p) };
                format!("{what} applies to {takers} only, not {policy}")
            }
            Error::TlbModeNotTaken { takes, policy } => {
                format!("{} applies to {} only, not {policy}", names.name(&set_param("tlb_mode")), takes.join(", "))
            }
            Error::ContpteNotTaken { mode, takes, policy } => format!(
                "{} and {} model arm64 Linux's contiguous PTEs (contpte.c) and apply only to the arm64 Linux \
                 policies ({}), not {policy}",
                names.given(&set_param("contpte"), mode),
                names.name(&set_param("teardown")),
                takes.join(", ")
            ),
            Error::NeedsText { workload, key, doc } => format!(
                "workload {workload} needs {}: {doc} (e.g. {})",
                names.given(&set_param(key), "..."),
                names.given(&set_param(key), "examples/traces/gzip.trace")
            ),
            Error::Failed { workload, phase: Some(phase), message } => {
                format!("{workload} ({phase} phase): {message}")
            }
            Error::Failed { phase: None, message, .. } => message.clone(),
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

/// The front door's error (`tlbkit_c::front::with_policy`): the registry's
/// or the C front end's, each its own variant.
impl From<tlbkit_c::front::Error> for Error {
    fn from(e: tlbkit_c::front::Error) -> Self {
        match e {
            tlbkit_c::front::Error::Registry(e) => Error::Registry(e),
            tlbkit_c::front::Error::C(e) => Error::C(e),
        }
    }
}

/// Returns the parameter of the setting `key`.
fn set_param(key: &str) -> Param {
    Param::Set(key.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_names_no_flag() {
        let all = [Param::Cpus, Param::Set("procs".into()), Param::Sets, Param::Policies, Param::Pages, Param::Asids];
        for p in all {
            for text in [Library.name(&p), Library.given(&p, "1"), Library.given_each(&p, &["A", "B"])] {
                assert!(!text.contains("--"), "{p:?}: {text}");
            }
        }
        assert_eq!(Library.given(&Param::Set("procs".into()), "0"), "set procs=0");
        assert_eq!(Library.given_each(&Param::Policies, &["A", "B"]), "policies [A, B]");
    }

    #[test]
    fn a_setting_out_of_range_names_its_parameter_and_the_range() {
        let e =
            Error::SettingRange { key: "procs".into(), value: "0".into(), range: "a whole number from 2 to 64".into() };
        assert_eq!(e.param(), Some(Param::Set("procs".into())));
        assert_eq!(e.to_string(), "set procs=0 is out of range: give a whole number from 2 to 64");
        let e = Error::CpusRange { cpus: 5000, max: 4096 };
        assert_eq!(e.param(), Some(Param::Cpus));
        assert_eq!(e.to_string(), "cpus 5000 is out of range: give 1 to 4096");
    }

    #[test]
    fn a_missing_parameter_is_worded_by_each_front_end() {
        let e = Error::MissingParam {
            workload: "trace",
            param: Param::Set("file".into()),
            what: "the trace to replay",
            placeholder: "TRACE",
        };
        assert_eq!(e.param(), Some(Param::Set("file".into())));
        assert_eq!(e.to_string(), "trace: give the trace to replay with set file=TRACE");
    }

    #[test]
    fn an_io_error_is_the_source_and_the_message_names_the_file() {
        let e = Error::Io { path: "/no/such".into(), source: std::io::Error::from(std::io::ErrorKind::NotFound) };
        assert!(std::error::Error::source(&e).is_some());
        assert!(e.to_string().starts_with("/no/such: "), "{e}");
        assert_eq!(e.param(), None);
    }
}
