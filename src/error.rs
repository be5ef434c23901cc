//! The command line's errors: each library's typed error, and the command's
//! own messages, worded for a person at a shell.
//!
//! The libraries return errors as data and name parameters through
//! [`Names`]; [`Flags`] is the command line's naming, every parameter by its
//! flag (`--cpus 5000`, `--set procs=0`), so that `tlbkit` prints the messages
//! it has always printed. A command's own messages (a file it cannot write, a
//! flag's value clap cannot check) are text already worded with flags.

use std::fmt;
use tlbkit_registry::param::{Names, Param};

/// The `tlbkit` command line's wording: every parameter by its flag.
#[derive(Clone, Copy, Debug, Default)]
pub struct Flags;

impl Names for Flags {
    fn name(&self, p: &Param) -> String {
        match p {
            Param::Cpus => "--cpus".into(),
            Param::Set(key) => format!("--set {key}"),
            Param::Sets => "--set".into(),
            Param::Policies | Param::Policy => "--policy".into(),
            Param::Runs => "--runs".into(),
            Param::Seed => "--seed".into(),
            Param::X => "--x".into(),
            Param::Y => "--y".into(),
            Param::Group => "--group".into(),
            Param::Where => "--where".into(),
            Param::Baseline => "--baseline".into(),
            Param::Results => "--results".into(),
            Param::Machine => "--machine".into(),
            Param::Workload => "--workload".into(),
            Param::Mms => "--mms".into(),
            Param::Pages => "--pages".into(),
            Param::Asids => "--asids".into(),
            Param::Ops => "--ops".into(),
            Param::Menu => "--menu".into(),
            Param::Mode => "--mode".into(),
            Param::Memory => "--memory".into(),
            Param::Teardown => "--teardown".into(),
            Param::Jobs => "--jobs".into(),
            Param::Iterations => "--iterations".into(),
            Param::Quick => "--quick".into(),
            Param::Deep => "--deep".into(),
            Param::From => "--from".into(),
            Param::Script => "--script".into(),
            Param::Checkpoint => "--checkpoint".into(),
            Param::Resume => "--resume".into(),
            Param::MaxMemory => "--max-memory".into(),
            Param::Ray => "--ray".into(),
            Param::Base => "--base".into(),
            Param::AllViolations => "--all-violations".into(),
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

/// Why a command failed on bad input (exit 2).
#[derive(Debug)]
pub enum CliError {
    /// The simulator's library's error.
    Sim(tlbkit_sim::Error),
    /// The lab's.
    Lab(tlbkit_lab::Error),
    /// The checker's.
    Check(tlbkit_check::Error),
    /// The policy registry's.
    Registry(tlbkit_registry::Error),
    /// The command's own message, worded already.
    Message(String),
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Sim(e) => f.write_str(&e.message(&Flags)),
            CliError::Lab(e) => f.write_str(&e.message(&Flags)),
            CliError::Check(e) => f.write_str(&e.message(&Flags)),
            CliError::Registry(e) => write!(f, "{e}"),
            CliError::Message(m) => f.write_str(m),
        }
    }
}

impl From<tlbkit_sim::Error> for CliError {
    fn from(e: tlbkit_sim::Error) -> Self {
        CliError::Sim(e)
    }
}

impl From<tlbkit_lab::Error> for CliError {
    fn from(e: tlbkit_lab::Error) -> Self {
        CliError::Lab(e)
    }
}

impl From<tlbkit_check::Error> for CliError {
    fn from(e: tlbkit_check::Error) -> Self {
        CliError::Check(e)
    }
}

impl From<tlbkit_registry::Error> for CliError {
    fn from(e: tlbkit_registry::Error) -> Self {
        CliError::Registry(e)
    }
}

impl From<String> for CliError {
    fn from(m: String) -> Self {
        CliError::Message(m)
    }
}

impl From<&str> for CliError {
    fn from(m: &str) -> Self {
        CliError::Message(m.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_names_each_parameter_by_its_flag() {
        assert_eq!(Flags.given(&Param::Set("procs".into()), "0"), "--set procs=0");
        assert_eq!(Flags.given(&Param::Cpus, "5000"), "--cpus 5000");
        assert_eq!(Flags.given_each(&Param::Policies, &["A", "B"]), "--policy A --policy B");
        let e = CliError::from(tlbkit_lab::Error::TooFewRuns { runs: 1 });
        assert_eq!(
            e.to_string(),
            "--runs 1 is too few: give at least 2 runs per policy (a standard deviation needs two)"
        );
        let e = CliError::from(tlbkit_sim::Error::CpusRange { cpus: 5000, max: 4096 });
        assert_eq!(e.to_string(), "--cpus 5000 is out of range: give 1 to 4096");
        let e = CliError::from(tlbkit_check::Error::NoJobs);
        assert_eq!(e.to_string(), "--jobs 0 runs nothing: give 1 or more worker threads");
    }
}
