//! What can go wrong between a C file and a running policy.

/// Why a C policy could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The policy name is malformed.
    #[error("{0}")]
    Spec(String),
    /// A pinned name's files hold other content than when it was pinned
    /// (see [`crate::source`], "Identity by content").
    #[error(
        "{name} has changed since this was recorded (its content's digest was {then:016x}, is {now:016x}): a \
         schedule or saved search of the old file cannot run on the new one; run the check again on the file as it \
         is, or restore the file"
    )]
    Changed {
        /// The files, as named.
        name: String,
        /// The digest recorded.
        then: u64,
        /// The files' digest now.
        now: u64,
    },
    /// A file could not be read.
    #[error("cannot read {path}: {why}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        why: String,
    },
    /// No C compiler.
    #[error(
        "C policies need a C compiler and none was found ({tried}): install gcc or clang, or name one in $TLBKIT_CC"
    )]
    NoCompiler {
        /// What was tried.
        tried: String,
    },
    /// The file does not compile against the shims.
    #[error("{file} does not compile against tlbkit's shims: {first}{hint} (the compiler's whole output: {log})")]
    Compile {
        /// The file.
        file: String,
        /// The compiler's first error.
        first: String,
        /// What the shims seem to lack, if it can tell.
        hint: String,
        /// Where the compiler's output was written.
        log: String,
    },
    /// A function tlbkit needs is missing.
    #[error("{file} has no {function}, which tlbkit calls {why}")]
    Missing {
        /// The file.
        file: String,
        /// The function.
        function: String,
        /// What for.
        why: String,
    },
    /// The object could not be loaded or laid out as tlbkit needs it.
    #[error("cannot load the compiled policy {path}: {why}")]
    Load {
        /// The object.
        path: String,
        /// Why.
        why: String,
    },
    /// The file's initcalls failed on this machine.
    #[error("{0}")]
    Boot(String),
}
