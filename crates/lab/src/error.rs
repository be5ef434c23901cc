//! The lab's errors: what went wrong, as data, for each front end to word.
//!
//! # Design
//!
//! As in the simulator ([`tlbkit_sim::error`], whose design this follows), a
//! function that can fail returns [`Error`], whose variants say what went
//! wrong and carry what the message needs: the parameter ([`Param`]) and the
//! value given, the file and line of a parse error, the underlying `io` or
//! JSON error as its [`source`](std::error::Error::source). An error of the
//! simulator's library arrives whole, as [`Error::Sim`].
//!
//! The words are the front end's: [`Error::message`] is the one template of
//! each variant, naming parameters through [`Names`]. [`Library`], which
//! [`Display`] uses, names them as a Rust caller writes them (`runs`, `x`);
//! the command line by its flags (`--runs`, `--x`); the Python package by its
//! keywords (`results=`). Every message says what was wrong and how to put it
//! right.
//!
//! What is not typed: the problems of an experiment file's text (its TOML,
//! its names and values), which [`Error::Experiment`] gives as text at their
//! line; a run of its grid that the simulator refuses is typed
//! ([`Error::GridRun`]).
//!
//! [`Display`]: std::fmt::Display

use std::path::PathBuf;
pub use tlbkit_sim::error::{Library, Names, Param};

/// Reads the file at `path` whole, or [`Error::Read`].
pub(crate) fn read_file(path: &std::path::Path) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|source| Error::Read { path: path.to_path_buf(), source })
}

/// What went wrong in the lab.
#[derive(Debug, thiserror::Error)]
// Display: the message in the library's words.
#[error("{}", self.message(&Library))]
pub enum Error {
    /// An error of the simulator's library: a run it refused or that failed,
    /// a trace file that cannot be written.
    Sim(#[from] tlbkit_sim::Error),
    /// A run of a sweep's grid that the simulator refuses, placed at the line
    /// of the experiment file that asks for it.
    GridRun {
        /// The experiment file, as messages name it.
        origin: String,
        /// The line (1-based).
        line: usize,
        /// The field of that line (`set.lat_ctx.procs`, `workloads`).
        field: String,
        /// Whether the line is the setting the error is about; if not, it is
        /// the `workloads` line, and the message names the workload.
        at_setting: bool,
        /// The run (boxed, as its error: the other variants are small).
        run: Box<tlbkit_sim::run::RunSpec>,
        /// Why the simulator refuses it (boxed: the other variants are small).
        #[source]
        source: Box<tlbkit_sim::Error>,
    },
    /// A run whose simulator panicked: a bug in tlbkit.
    Panicked {
        /// The panic's message.
        why: String,
        /// The command that repeats the run.
        command: String,
    },
    /// A run was stopped before it finished.
    Stopped,
    /// A microbenchmark `tlbkit calibrate` does not have.
    UnknownMicrobench {
        /// The name given.
        name: String,
    },
    /// A file could not be read.
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A log could not be opened or read.
    LogIo {
        /// The log, as messages name it.
        name: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A log that is not what its tool writes, or that disagrees with the
    /// other log of the run.
    Log {
        /// The log, as messages name it.
        name: String,
        /// The line the problem is at, if at one.
        line: Option<u64>,
        /// What is wrong, and how to make a log that reads.
        what: String,
    },
    /// A lackey log without valgrind's system-call lines, imported with a
    /// strace log whose calls need them.
    NoSyscallLines {
        /// The lackey log, as messages name it.
        lackey: String,
    },
    /// The import made a trace the simulator refuses: a bug in tlbkit.
    ImportBug {
        /// The simulator's reason.
        source: tlbkit_sim::Error,
    },
    /// An error in a sweep's experiment file.
    Experiment {
        /// The file, as messages name it.
        origin: String,
        /// The line and the dotted key of the field it is about, if it has a place.
        place: Option<(usize, String)>,
        /// What is wrong, and how to put it right.
        what: String,
    },
    /// A grid of more runs than a sweep holds.
    TooManyRuns {
        /// The experiment file, as messages name it.
        origin: String,
        /// The runs, `None` past 2^64.
        runs: Option<usize>,
        /// The most a sweep holds (`sweep::MAX_RUNS`).
        most: usize,
    },
    /// A sweep none of whose policies fits one of its machines.
    NoFittingPolicy {
        /// The experiment file, as messages name it.
        origin: String,
    },
    /// Text that is not an encoded sweep point.
    BadPoint {
        /// The text.
        text: String,
    },
    /// A sweep session has no pending point of that index.
    NoPendingPoint {
        /// The index.
        index: usize,
    },
    /// A results line handed back for a point is not its line.
    NotItsLine {
        /// The point's command.
        command: String,
    },
    /// A sweep's results file could not be opened, read or written.
    ResultsFile {
        /// The file.
        path: PathBuf,
        /// What was being done.
        step: ResultsStep,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// A results file another sweep holds.
    ResultsInUse {
        /// The file.
        path: PathBuf,
    },
    /// A results file with a line that no sweep wrote.
    ForeignLine {
        /// The file.
        path: PathBuf,
        /// The line's number (1-based).
        line: usize,
    },
    /// A comparison of fewer than two policies.
    TooFewPolicies {
        /// The policies given.
        got: usize,
    },
    /// A comparison of more policies than ministat marks.
    TooManyPolicies {
        /// The policies given.
        got: usize,
        /// The most it takes.
        max: usize,
    },
    /// A policy given twice to a comparison.
    PolicyTwice {
        /// The policy.
        policy: String,
    },
    /// Fewer than two runs per policy: no standard deviation.
    TooFewRuns {
        /// The runs given.
        runs: usize,
    },
    /// More runs per policy than a comparison holds.
    TooManyRunsEach {
        /// The runs given.
        runs: usize,
        /// The most it takes.
        max: usize,
    },
    /// A comparison's seeds would pass the largest seed.
    SeedOverflow {
        /// The first seed.
        seed: u64,
        /// The runs per policy.
        runs: usize,
    },
    /// A figure the workload's runs do not report.
    UnknownMetric {
        /// The name given.
        name: String,
        /// The workload.
        workload: String,
        /// The figures its runs report.
        valid: Vec<String>,
    },
    /// A run of a claim found violations it does not expect.
    ClaimViolations {
        /// The claim.
        claim: String,
        /// The violations.
        violations: u64,
        /// The policy.
        policy: String,
        /// The command that repeats the run.
        replay: String,
    },
    /// A claim's figure that its workload does not report.
    MissingResult {
        /// The claim.
        claim: String,
        /// The figure.
        key: String,
    },
    /// A line of a results file that is not a JSON object.
    ResultsLine {
        /// The file, as messages name it.
        origin: String,
        /// The line's number (1-based).
        line: usize,
        /// Why it does not parse.
        #[source]
        source: serde_json::Error,
    },
    /// A results file without a run.
    NoRuns {
        /// The file, as messages name it.
        origin: String,
    },
    /// A chart's field or figure that no run has.
    UnknownName {
        /// The parameter that names it.
        param: Param,
        /// `field` or `metric`.
        what: &'static str,
        /// The name given.
        name: String,
        /// The names the runs have.
        valid: Vec<String>,
    },
    /// No run has both of a chart's coordinates (and passes its filters).
    NoData {
        /// The x field.
        x: String,
        /// The figure.
        y: String,
    },
    /// A report's baseline policy that no run has.
    NoSuchBaseline {
        /// The policy given.
        policy: String,
        /// The results file, as messages name it.
        origin: String,
        /// The policies the runs have.
        valid: Vec<String>,
    },
    /// Results without a workload: not a sweep's.
    NotSweepResults {
        /// The results file, as messages name it.
        origin: String,
    },
}

/// What was being done to a results file when it failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultsStep {
    /// Opening (or creating) it.
    Open,
    /// Locking it against another sweep.
    Lock,
    /// Reading it.
    Read,
    /// Cutting off a torn last line.
    DropTorn,
    /// Rewriting it in grid order.
    Reorder,
    /// Appending a line.
    Append,
}

impl Error {
    /// Returns the parameter the error is about, if it is about one.
    pub fn param(&self) -> Option<Param> {
        match self {
            Error::Sim(e) => e.param(),
            Error::GridRun { source, .. } => source.param(),
            Error::TooFewPolicies { .. } => Some(Param::Policies),
            Error::TooFewRuns { .. } | Error::TooManyRunsEach { .. } => Some(Param::Runs),
            Error::SeedOverflow { .. } => Some(Param::Seed),
            Error::UnknownName { param, .. } => Some(param.clone()),
            Error::NoSuchBaseline { .. } => Some(Param::Baseline),
            Error::ForeignLine { .. } => Some(Param::Results),
            _ => None,
        }
    }

    /// Returns the message, naming parameters as `names` does (the one
    /// template of each variant, whatever the front end).
    pub fn message(&self, names: &dyn Names) -> String {
        let list = |v: &[String]| v.join(", ");
        match self {
            Error::Sim(e) => e.message(names),
            Error::GridRun { origin, line, field, at_setting, run, source } => format!(
                "{origin}: line {line}, {field}: {}{} (in the runs of {} on {}, cpus {}, policy {})",
                if *at_setting { String::new() } else { format!("{}: ", run.workload) },
                source.message(names),
                run.workload,
                run.machine,
                run.cpus,
                run.policy
            ),
            Error::Panicked { why, command } => format!("the simulator panicked ({why}); repeat with: {command}"),
            Error::Stopped => "a run was stopped before it finished".into(),
            Error::UnknownMicrobench { name } => {
                let all: Vec<&str> = tlbkit_host::Bench::ALL.iter().map(|b| b.name()).collect();
                let near = tlbkit_registry::suggest::did_you_mean(name, all.iter().copied());
                format!("unknown microbenchmark '{name}'{near}; valid microbenchmarks: {}", all.join(", "))
            }
            Error::Read { path, source } => format!("cannot read {}: {source}", path.display()),
            Error::LogIo { name, source } => format!("{name}: {source}"),
            Error::Log { name, line: Some(line), what } => format!("{name}:{line}: {what}"),
            Error::Log { name, line: None, what } => format!("{name}: {what}"),
            Error::NoSyscallLines { lackey } => format!(
                "{lackey}: no system-call lines to place the strace log's calls at: run valgrind with \
                 --trace-syscalls=yes as well (or import the lackey log alone)"
            ),
            Error::ImportBug { source } => {
                format!("the import made an invalid trace (a tlbkit bug): {}", source.message(names))
            }
            Error::Experiment { origin, place: Some((line, field)), what } => {
                format!("{origin}: line {line}, {field}: {what}")
            }
            Error::Experiment { origin, place: None, what } => format!("{origin}: {what}"),
            Error::TooManyRuns { origin, runs, most } => format!(
                "{origin}: the grid has {} runs (machines x CPU counts x policies x parameter combinations x \
                 seeds); a sweep holds at most {}: split it into several files",
                runs.map_or("more than 2^64".to_string(), |n| n.to_string()),
                most
            ),
            Error::NoFittingPolicy { origin } => format!(
                "{origin}: no policy of this sweep fits one of its machines (arm64 policies run on arm64 \
                 machines, x86 ones on x86 machines)"
            ),
            Error::BadPoint { text } => format!("not an encoded sweep point: {text}"),
            Error::NoPendingPoint { index } => format!("no pending point {index}"),
            Error::NotItsLine { command } => format!("the line handed back for `{command}` is not its results line"),
            Error::ResultsFile { path, step, source } => {
                let p = path.display();
                match step {
                    ResultsStep::Open => format!("cannot open results file {p}: {source}"),
                    ResultsStep::Lock => format!("cannot lock results file {p}: {source}"),
                    ResultsStep::Read => format!("cannot read results file {p}: {source}"),
                    ResultsStep::DropTorn => format!("cannot drop the torn last line of {p}: {source}"),
                    ResultsStep::Reorder => format!("cannot put results file {p} in grid order: {source}"),
                    ResultsStep::Append => format!("cannot append to results file {p}: {source}"),
                }
            }
            Error::ResultsInUse { path } => {
                format!("results file {} is in use by another tlbkit sweep", path.display())
            }
            Error::ForeignLine { path, line } => format!(
                "results file {}: line {line} is not a result of tlbkit sweep (a JSON object with \"command\" \
                 and \"violations\"); remove it or give another file with {}",
                path.display(),
                names.name(&Param::Results)
            ),
            Error::TooFewPolicies { got } => format!(
                "compare needs at least two policies ({}), got {got}",
                names.given_each(&Param::Policies, &["A", "B"])
            ),
            Error::TooManyPolicies { got, max } => format!("compare takes at most {max} policies, got {got}"),
            Error::PolicyTwice { policy } => format!("policy '{policy}' is given twice; give each policy once"),
            Error::TooFewRuns { runs } => format!(
                "{} is too few: give at least 2 runs per policy (a standard deviation needs two)",
                names.given(&Param::Runs, &runs.to_string())
            ),
            Error::TooManyRunsEach { runs, max } => format!(
                "{} is too many: give at most {max} runs per policy (each is a whole simulation, and the \
                 comparison holds every one)",
                names.given(&Param::Runs, &runs.to_string())
            ),
            Error::SeedOverflow { seed, runs } => format!(
                "{} with {} runs past the largest seed",
                names.given(&Param::Seed, &seed.to_string()),
                names.given(&Param::Runs, &runs.to_string())
            ),
            Error::UnknownMetric { name, workload, valid } => {
                format!("unknown metric '{name}'; valid metrics for {workload}: {}", list(valid))
            }
            Error::ClaimViolations { claim, violations, policy, replay } => {
                format!("{claim}: {violations} violation(s) under {policy}; run `{replay}`")
            }
            Error::MissingResult { claim, key } => format!("{claim}: the workload reports no result {key}"),
            Error::ResultsLine { origin, line, source } => {
                format!("{origin}:{line}: not a results line (a JSON object): {source}")
            }
            Error::NoRuns { origin } => format!("{origin}: no runs (the file has no results lines)"),
            Error::UnknownName { param, what, name, valid } => {
                format!("unknown {what} '{name}' for {}; the results have: {}", names.name(param), list(valid))
            }
            Error::NoData { x, y } => format!("no run has both '{x}' and '{y}' (and passes the filters)"),
            Error::NoSuchBaseline { policy, origin, valid } => format!(
                "{}: no run of that policy in {origin}; the results have: {}",
                names.given(&Param::Baseline, policy),
                list(valid)
            ),
            Error::NotSweepResults { origin } => {
                format!("{origin}: no line has a 'workload': is it a results file of tlbkit sweep?")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parameter_is_named_by_the_library_without_a_flag() {
        let e = Error::TooFewRuns { runs: 1 };
        assert_eq!(e.param(), Some(Param::Runs));
        assert_eq!(
            e.to_string(),
            "runs 1 is too few: give at least 2 runs per policy (a standard deviation needs two)"
        );
        let e = Error::SeedOverflow { seed: u64::MAX, runs: 2 };
        assert_eq!(e.to_string(), format!("first_seed {} with runs 2 runs past the largest seed", u64::MAX));
        let e = Error::TooFewPolicies { got: 1 };
        assert_eq!(e.to_string(), "compare needs at least two policies (policies [A, B]), got 1");
    }

    #[test]
    fn a_simulator_error_keeps_its_parameter_and_wording() {
        let sim = tlbkit_sim::Error::MissingParam {
            workload: "trace",
            param: Param::Set("file".into()),
            what: "the trace to replay",
            placeholder: "TRACE",
        };
        let e = Error::from(sim);
        assert_eq!(e.param(), Some(Param::Set("file".into())));
        assert_eq!(e.to_string(), "trace: give the trace to replay with set file=TRACE");
    }

    #[test]
    fn an_error_without_a_parameter_reads_the_same_in_every_wording() {
        let e = Error::Log { name: "t.lackey".into(), line: Some(5), what: "not a lackey line: 'x'".into() };
        assert_eq!(e.param(), None);
        /// A wording that names every parameter in capitals.
        struct Shout;
        impl Names for Shout {
            fn name(&self, p: &Param) -> String {
                Library.name(p).to_uppercase()
            }
        }
        assert_eq!(e.message(&Library), e.message(&Shout));
        assert_eq!(e.to_string(), "t.lackey:5: not a lackey line: 'x'");
        let e = Error::TooFewRuns { runs: 1 };
        assert_ne!(e.message(&Library), e.message(&Shout));
    }
}
