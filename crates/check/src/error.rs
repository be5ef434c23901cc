//! The checker's errors: what went wrong, as data, for each front end to word.
//!
//! # Design
//!
//! As in the simulator (`tlbkit_sim::error`), a function that can fail returns
//! [`Error`], whose variants say what went wrong and carry what the message
//! needs: the parameter ([`Param`]) and the value given. [`Error::message`] is
//! the one template of each variant, naming parameters through [`Names`]:
//! [`Library`], which [`Display`] uses, as a Rust caller writes them
//! (`pages 9`); the command line by its flags (`--pages 9`); the Python
//! package by its keywords (`pages=9`).
//!
//! [`Param`] and [`Names`] are the registry's, not the checker's own: the
//! checker must not depend on the simulator, and the registry is the crate
//! both depend on, so one list of parameters serves both libraries and a
//! front end words `cpus` once for a run and a check.
//!
//! What is not typed: why a replay token does not decode ([`Error::BadToken`])
//! and why a policy refuses a shape (the registry's
//! [`tlbkit_registry::Error::Refused`]), which are text about the token and in
//! the policy's own words.
//!
//! [`Display`]: std::fmt::Display

use std::fmt;
pub use tlbkit_registry::param::{Library, Names, Param};

/// What went wrong in the checker.
#[derive(Debug, thiserror::Error)]
// Display: the message in the library's words.
#[error("{}", self.message(&Library))]
pub enum Error {
    /// The registry's error for the policy given: a shape it refuses, a bug
    /// it has no switch for.
    Registry {
        /// The policy, as given.
        policy: String,
        /// The registry's error.
        #[source]
        source: tlbkit_registry::Error,
    },
    /// The C front end's error for the C policy given: a file that does not
    /// compile, no compiler, a file that stops while booting, files changed
    /// since a token or save pinned them.
    CPolicy {
        /// The policy, as given.
        policy: String,
        /// The C front end's error.
        #[source]
        source: Box<tlbkit_c::Error>,
    },
    /// A name that is neither a registered policy nor a bug-zoo entry.
    UnknownPolicy {
        /// The name given.
        name: String,
    },
    /// A `zoo/<id>` the bug zoo does not have.
    UnknownZooEntry {
        /// The name given.
        name: String,
    },
    /// A bug-zoo entry whose base is not a registered policy (a tlbkit bug).
    ZooBase {
        /// The entry.
        name: String,
        /// Its base.
        base: &'static str,
    },
    /// A bug-zoo entry given where a registered policy is needed (a policy of
    /// the caller's own is checked as the policy it is written like).
    ZooNotWrittenLike {
        /// The entry.
        policy: String,
    },
    /// A parameter's value the checker cannot use.
    Invalid {
        /// The parameter.
        param: Param,
        /// The value given, if the message shows it.
        value: Option<String>,
        /// What is wrong, and what to give instead.
        problem: String,
    },
    /// An ASID space that is not a power of two in the policy's range.
    Asids {
        /// The ASIDs given.
        asids: u32,
        /// The space, in words ("an arm64 ASID space is").
        space: String,
        /// The fewest.
        min: u32,
        /// The most.
        max: u32,
    },
    /// An empty menu of operations.
    EmptyMenu,
    /// Both presets of bounds at once.
    QuickAndDeep,
    /// Worker threads for a search that is not exhaustive.
    JobsNotExhaustive {
        /// The search asked for.
        mode: &'static str,
    },
    /// No worker thread.
    NoJobs,
    /// Every violation asked of a parallel search, which stops at its first.
    AllViolationsJobs,
    /// A request that is not one exhaustive search of one shape, given what
    /// runs nothing else (saving, the distributed search).
    NotOneExhaustive {
        /// What asked for one: [`Param::Checkpoint`], [`Param::Ray`].
        asked: Param,
    },
    /// A base for a C policy's changed lines that cannot be read, or given
    /// for a policy whose lines are not measured (a Rust one).
    Base {
        /// The base, as given.
        base: String,
        /// The C front end's error.
        #[source]
        source: Box<tlbkit_c::Error>,
    },
    /// A base given for a Rust policy in a binary that does not measure
    /// its lines (not a `coverage` build), or not as a git revision.
    BaseNotC {
        /// The base, as given.
        base: String,
        /// The policy.
        policy: String,
    },
    /// A Rust policy's base revision, or what a `coverage` build's counters
    /// say, could not be read.
    RustCoverage {
        /// The policy.
        policy: String,
        /// Why.
        #[source]
        source: crate::llvmcov::Error,
    },
    /// What a check reached of a C policy's files could not be read.
    Coverage {
        /// The policy.
        policy: String,
        /// The C front end's error.
        #[source]
        source: Box<tlbkit_c::Error>,
    },
    /// No execution ran: a clean verdict would read as a proof.
    NoExecution,
    /// The binary's global allocator is not the checker's arena
    /// ([`crate::arena`]): checkpoints would not restore what policies allocate.
    NoCheckAlloc,
    /// No CPU could start an operation: a clean verdict would read as a proof.
    NothingStarted {
        /// The menu, comma-separated.
        menu: String,
        /// The address spaces.
        mms: usize,
    },
    /// A litmus file that cannot be read.
    LitmusRead {
        /// The file, as given.
        file: String,
        /// Why not (the system's words).
        why: String,
    },
    /// A litmus file tlbkit cannot read as a test of its subset.
    Litmus(#[from] crate::litmus::LitmusError),
    /// A litmus test the engine cannot run.
    LitmusRun {
        /// What went wrong, with the test's name.
        why: String,
    },
    /// A save body that cannot be read (a distributed search's part or state).
    Saved {
        /// Why, with the file.
        why: String,
    },
    /// A saved search's file that cannot be resumed here, or a save that
    /// could not be written.
    Save {
        /// The file (`DIR/search.ckpt`).
        file: String,
        /// What is wrong.
        problem: SaveProblem,
    },
    /// A saving search stopped before its end (a signal, the memory cap),
    /// saved where it got to.
    Stopped {
        /// The bytes the visited set needed past the cap, or `None` when a
        /// signal stopped it.
        needed: Option<u64>,
        /// The states reached.
        states: u64,
        /// The cap, if there was one.
        cap: Option<u64>,
        /// The save's directory.
        dir: String,
    },
    /// Text that is not a replay token tlbkit can replay.
    BadToken {
        /// The token, its first 120 characters.
        shown: String,
        /// Why not.
        why: String,
    },
}

impl Error {
    /// Returns the parameter the error is about, if it is about one.
    pub fn param(&self) -> Option<Param> {
        match self {
            Error::Registry { .. }
            | Error::CPolicy { .. }
            | Error::UnknownPolicy { .. }
            | Error::UnknownZooEntry { .. }
            | Error::ZooBase { .. }
            | Error::ZooNotWrittenLike { .. } => Some(Param::Policy),
            Error::Invalid { param, .. } => Some(param.clone()),
            Error::Asids { .. } => Some(Param::Asids),
            Error::EmptyMenu => Some(Param::Menu),
            Error::QuickAndDeep => Some(Param::Quick),
            Error::JobsNotExhaustive { .. } | Error::NoJobs | Error::AllViolationsJobs => Some(Param::Jobs),
            Error::NotOneExhaustive { asked } => Some(asked.clone()),
            Error::Base { .. } | Error::BaseNotC { .. } => Some(Param::Base),
            Error::Coverage { .. } | Error::RustCoverage { .. } => Some(Param::Policy),
            Error::NoExecution => Some(Param::Iterations),
            Error::NoCheckAlloc => None,
            Error::NothingStarted { .. } => Some(Param::Menu),
            Error::Saved { .. } | Error::Save { .. } | Error::Stopped { .. } => None,
            Error::BadToken { .. } | Error::LitmusRead { .. } | Error::Litmus(_) | Error::LitmusRun { .. } => None,
        }
    }

    /// Returns the message, naming parameters as `names` does (the one
    /// template of each variant, whatever the front end).
    pub fn message(&self, names: &dyn Names) -> String {
        match self {
            Error::Registry { policy, source } => about_policy(policy, source.to_string()),
            Error::CPolicy { policy, source } => about_policy(policy, source.to_string()),
            Error::UnknownPolicy { name } => {
                let all: Vec<&str> = tlbkit_registry::POLICIES.iter().map(|p| p.name).collect();
                format!(
                    "unknown policy '{name}'{}: the policies are {}, and the bug zoo's zoo/<id> (see `tlbkit list`)",
                    tlbkit_registry::suggest::did_you_mean(name, all.iter().copied()),
                    all.join(", ")
                )
            }
            Error::UnknownZooEntry { name } => {
                let ids: Vec<String> = tlbkit_policy::zoo::ZOO.iter().map(|e| format!("zoo/{}", e.id)).collect();
                format!(
                    "unknown bug-zoo entry '{name}'{}: the zoo has {}",
                    tlbkit_registry::suggest::did_you_mean(name, ids.iter().map(String::as_str)),
                    ids.join(", ")
                )
            }
            Error::ZooBase { name, base } => {
                format!("bug-zoo entry '{name}' is based on '{base}', which is not a registered policy")
            }
            Error::ZooNotWrittenLike { policy } => {
                format!("{policy}: give the registered policy your policy is written like, not a bug-zoo entry")
            }
            Error::Invalid { param, value: Some(value), problem } => {
                format!("{}: {problem}", names.given(param, value))
            }
            Error::Invalid { param, value: None, problem } => format!("{}: {problem}", names.name(param)),
            Error::Asids { asids, space, min, max } => format!(
                "{}: {space} a power of two between {min} and {max} (try {})",
                names.given(&Param::Asids, &asids.to_string()),
                names.given(&Param::Asids, &min.to_string())
            ),
            Error::EmptyMenu => format!(
                "{}: give at least one operation, e.g. {}",
                names.name(&Param::Menu),
                names.given(&Param::Menu, "switch,munmap")
            ),
            Error::QuickAndDeep => {
                format!("{} and {} cannot be used together", names.name(&Param::Quick), names.name(&Param::Deep))
            }
            Error::JobsNotExhaustive { mode } => {
                format!("{} applies to exhaustive mode, not {mode}", names.name(&Param::Jobs))
            }
            Error::NotOneExhaustive { asked } => format!(
                "{} runs an exhaustive search of one shape: give the shape ({}, {}, ...) and {}, or {}, without {} or {}",
                names.name(asked),
                names.name(&Param::Cpus),
                names.name(&Param::Mms),
                names.given(&Param::Mode, "exhaustive"),
                names.name(&Param::Deep),
                names.name(&Param::From),
                names.name(&Param::Script)
            ),
            Error::Base { base, source } => format!("{}: {source}", names.given(&Param::Base, base)),
            Error::BaseNotC { base, policy } if crate::code::rust_lines_measured() => format!(
                "{}: a Rust policy's change is a git revision of its sources: {} (for {policy})",
                names.given(&Param::Base, base),
                names.given(&Param::Base, "@REV")
            ),
            Error::BaseNotC { base, policy } => format!(
                "{}: this build does not measure a Rust policy's lines ({policy}); the command line's `coverage` \
                 build does (`cargo build --profile coverage`, then `target/coverage/tlbkit check` with the same \
                 flags); here the report's `hooks called:` line says which of its methods the check ran",
                names.given(&Param::Base, base)
            ),
            Error::RustCoverage { policy, source } => {
                format!("{policy}: what the check reached of its code could not be read: {source}")
            }
            Error::Coverage { policy, source } => {
                format!("{policy}: what the check reached of its code could not be read: {source}")
            }
            Error::AllViolationsJobs => format!(
                "a search with {} stops at its first violation: every violation is searched for on one thread, so \
                 leave {} out",
                names.name(&Param::Jobs),
                names.name(&Param::Jobs)
            ),
            Error::NoJobs => {
                format!("{} runs nothing: give 1 or more worker threads", names.given(&Param::Jobs, "0"))
            }
            Error::NoCheckAlloc => "this program's global allocator is not the checker's arena, so a search would \
                                     restore policies' atomics but not what they allocate and report states no \
                                     execution reaches: add `#[global_allocator] static ALLOC: \
                                     tlbkit_check::arena::CheckAlloc = tlbkit_check::arena::CheckAlloc;` to the \
                                     binary (or test file) that runs the check"
                .to_string(),
            Error::NoExecution => format!(
                "nothing was checked: no execution ran ({}); give {} or more",
                names.given(&Param::Iterations, "0"),
                names.given(&Param::Iterations, "1")
            ),
            Error::NothingStarted { menu, mms } => format!(
                "nothing was checked: no CPU could start an operation from the menu ({menu}) with {mms} address \
                 space(s); widen {} or {} (see `tlbkit check --help`)",
                names.name(&Param::Menu),
                names.name(&Param::Mms)
            ),
            Error::LitmusRead { file, why } => format!("{file}: cannot read the litmus test: {why}"),
            Error::Litmus(e) => e.to_string(),
            Error::LitmusRun { why } => {
                format!("{why}; the test is outside the subset tlbkit models (see `tlbkit litmus --help`)")
            }
            Error::Saved { why } => why.clone(),
            Error::Save { file, problem } => problem.message(file),
            Error::Stopped { needed, states, cap, dir } => {
                let mib = |b: u64| format!("{:.1} MiB", b as f64 / f64::from(1 << 20));
                let what = match needed {
                    None => format!("interrupted after {states} states"),
                    Some(need) => format!(
                        "the visited set needs {} to go on past {states} states, over the cap of {}",
                        mib(*need),
                        mib(cap.unwrap_or(0))
                    ),
                };
                let more = match needed {
                    Some(need) => format!(" --max-memory {}M", ((2 * need) >> 20).max(1)),
                    None => String::new(),
                };
                format!("{what}; the search is saved in {dir}: go on with `tlbkit check --resume {dir}{more}`")
            }
            Error::BadToken { shown, why } => {
                format!("not a tlbkit replay token ({why}): '{shown}'; copy it whole from `tlbkit check`'s output")
            }
        }
    }

    /// Returns the error of building the policy given (`policy`) through the
    /// front door (`tlbkit_c::front`): the registry's, or the C front end's.
    pub(crate) fn building(policy: &str, e: tlbkit_c::front::Error) -> Error {
        let policy = policy.to_string();
        match e {
            tlbkit_c::front::Error::Registry(source) => Error::Registry { policy, source },
            tlbkit_c::front::Error::C(source) => Error::CPolicy { policy, source: Box::new(source) },
        }
    }

    /// Returns the error of `param` given `value`, with what is wrong.
    pub(crate) fn invalid(param: Param, value: impl fmt::Display, problem: impl Into<String>) -> Error {
        Error::Invalid { param, value: Some(value.to_string()), problem: problem.into() }
    }
}

/// Returns `said` about `policy`, after the policy's name unless it names the
/// policy already (as a C policy's error names its files, and a refused bug
/// its policy).
fn about_policy(policy: &str, said: String) -> String {
    if said.starts_with(tlbkit_c::front::unpinned(policy)) {
        said
    } else {
        format!("{policy}: {said}")
    }
}

/// What is wrong with a saved search's file (`tlbkit check --resume DIR`),
/// or with writing one (`--checkpoint DIR`): each its own kind, so that a
/// front end (and a test) tells a file cut short from one corrupted, from
/// another build's and from one that is no save at all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SaveProblem {
    /// No file to read (the system's words).
    Missing {
        /// Why not.
        why: String,
    },
    /// A file that does not start as a tlbkit save does.
    NotASave,
    /// A save of another format version.
    Format {
        /// The save's version.
        found: u32,
        /// The version this tlbkit reads.
        reads: u32,
    },
    /// A file shorter than its header says: written only in part, or cut in a copy.
    CutShort {
        /// Its bytes.
        have: u64,
        /// The bytes its header says it has, or `None` when the header itself is cut.
        need: Option<u64>,
    },
    /// A file whose checksum does not match its bytes.
    Corrupted,
    /// A save made by another build of tlbkit.
    OtherBuild {
        /// The hash of the build that made it.
        theirs: String,
        /// This build's.
        ours: String,
    },
    /// A save of another check.
    OtherCheck {
        /// The check it saved (its replay token's header).
        theirs: String,
        /// The check asked for.
        ours: String,
    },
    /// A save of the same check of a C policy whose files have changed since.
    OtherContent {
        /// The policy, as named.
        policy: String,
    },
    /// A file whose checksums match but whose contents this build cannot
    /// read (a tlbkit bug, or a file made to look like a save).
    Unreadable {
        /// What is wrong.
        why: String,
    },
    /// A save that could not be written: the one there before, if any, is
    /// as it was, and the partial file is removed.
    WriteFailed {
        /// Why (the system's words).
        why: String,
    },
    /// A save written and renamed into place whose directory could not be
    /// synced: it is there, but may not survive a power cut.
    NotSynced {
        /// Why (the system's words).
        why: String,
    },
}

impl SaveProblem {
    /// Returns the one line that says what is wrong with `file` and what to do.
    pub fn message(&self, file: &str) -> String {
        let again = "or start the search again";
        match self {
            SaveProblem::Missing { why } => format!("no saved search to resume: {file}: {why}"),
            SaveProblem::NotASave => format!(
                "{file} is not a saved tlbkit search (it does not start with TLBKITSV): resume from the directory \
                 a saving check wrote"
            ),
            SaveProblem::Format { found, reads } => {
                let which = if found < reads { "an older" } else { "a newer" };
                format!(
                    "{file} is a save of format {found}, from {which} tlbkit; this one reads format {reads}: resume \
                     it with the build that made it, {again}"
                )
            }
            SaveProblem::CutShort { have, need: Some(need) } => format!(
                "{file} is cut short ({have} of its {need} bytes): it was half-written or truncated; resume from a \
                 whole copy, {again}"
            ),
            SaveProblem::CutShort { have, need: None } => format!(
                "{file} is cut short ({have} bytes, less than its header): it was half-written or truncated; resume \
                 from a whole copy, {again}"
            ),
            SaveProblem::Corrupted => format!(
                "{file} is corrupted: its checksum does not match (a byte of it changed after it was written); resume \
                 from a good copy, {again}"
            ),
            SaveProblem::OtherBuild { theirs, ours } => format!(
                "{file} was saved by another build of tlbkit (binary {theirs}, this is {ours}): resume it with that \
                 build, {again}"
            ),
            SaveProblem::OtherCheck { theirs, ours } => format!(
                "{file} is a save of another check ({theirs}); this one is {ours}: resume it as the check it saved, \
                 or save this one in another directory"
            ),
            SaveProblem::OtherContent { policy } => format!(
                "{file} saved a search of {policy} as its files were then, and they have changed since: a search of \
                 one program cannot go on over another; start the search again (a new --checkpoint directory), or \
                 restore the files to resume"
            ),
            SaveProblem::Unreadable { why } => format!(
                "{file} matches its checksums but cannot be read ({why}): a tlbkit bug, or not a file tlbkit wrote; \
                 start the search again"
            ),
            SaveProblem::WriteFailed { why } => format!(
                "cannot write {file}: {why}; the save there before (if any) is as it was and nothing half-written \
                 is left: fix the cause and resume from it"
            ),
            SaveProblem::NotSynced { why } => format!(
                "{file} is written but its directory could not be synced ({why}): the save may not survive a power \
                 cut"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_is_named_by_the_library_without_a_flag() {
        let e = Error::invalid(Param::Pages, 9, "an address space maps 1 to 8 pages");
        assert_eq!(e.param(), Some(Param::Pages));
        assert_eq!(e.to_string(), "pages 9: an address space maps 1 to 8 pages");
        let e = Error::Asids { asids: 3, space: "an arm64 ASID space is".into(), min: 4, max: 65536 };
        assert_eq!(e.to_string(), "asids 3: an arm64 ASID space is a power of two between 4 and 65536 (try asids 4)");
        for e in [Error::EmptyMenu, Error::QuickAndDeep, Error::NoJobs, Error::NoExecution] {
            assert!(!e.to_string().contains("--"), "{e}");
        }
    }
}
