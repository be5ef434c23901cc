//! The parameters a user gives tlbkit, as errors name them, and how each front
//! end names them ([`Names`]).
//!
//! # Design
//!
//! The simulator's and the checker's libraries both return errors that name a
//! parameter (`cpus 5000 is out of range`), and each front end words that
//! parameter its own way: the command line by its flag (`--cpus 5000`), the
//! Python package by its keyword (`cpus=5000`), a Rust caller by the field
//! (`cpus 5000`, [`Library`]). One list of parameters ([`Param`]) and one
//! naming trait serve all of them, so a front end words every parameter in one
//! place. They live here, in the registry, because it is the one crate both
//! libraries depend on: the checker must not depend on the simulator, and a
//! second `Param` in the checker would make each front end keep two wordings
//! of the same `cpus`.
//!
//! What is guaranteed: [`Library`] names every parameter without a `--flag`.
//! What is not: that a front end's wording reads well for every parameter; a
//! front end with no spelling of its own for one falls back to [`Library`]'s.

use std::fmt;

/// A parameter a user gives tlbkit, as an error names it: the simulator's,
/// the lab's and the checker's, in one list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Param {
    /// The machine's CPU count (a run's or a check's).
    Cpus,
    /// A workload, machine or kernel parameter, `key=value`.
    Set(String),
    /// The workload, machine and kernel parameters as a whole (each
    /// `key=value`), for an error about one that has no key.
    Sets,
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
    /// The machine a run simulates.
    Machine,
    /// The policy a run or a check uses.
    Policy,
    /// The workload a run runs.
    Workload,
    /// The checker's address spaces.
    Mms,
    /// The checker's pages per address space.
    Pages,
    /// The checker's ASID space (or PCIDs per CPU, or global ASIDs).
    Asids,
    /// The checker's kernel operations per execution.
    Ops,
    /// The kernel operations the checker may choose from.
    Menu,
    /// The checker's search: exhaustive, random or pct.
    Mode,
    /// The checker's memory model: sc or tso.
    Memory,
    /// The checker's teardown of a contiguous block.
    Teardown,
    /// The worker threads of an exhaustive check.
    Jobs,
    /// The executions of a random or pct check.
    Iterations,
    /// The checker's small, fast preset of bounds.
    Quick,
    /// The checker's large, slow preset of bounds.
    Deep,
    /// The schedule (a replay token) a check starts after.
    From,
    /// The script of operations a check starts after.
    Script,
    /// The directory a check saves its search in.
    Checkpoint,
    /// The directory of a saved search a check goes on from.
    Resume,
    /// The memory a saving check keeps its visited set under.
    MaxMemory,
    /// A check's search spread over a Ray cluster.
    Ray,
    /// What a C policy's changed lines are counted against: a git revision
    /// or other files.
    Base,
    /// A check that goes on past every violation.
    AllViolations,
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
            Param::Sets => "sets".into(),
            Param::Policies => "policies".into(),
            Param::Runs => "runs".into(),
            Param::Seed => "first_seed".into(),
            Param::X => "x".into(),
            Param::Y => "y".into(),
            Param::Group => "group".into(),
            Param::Where => "filters".into(),
            Param::Baseline => "baseline".into(),
            Param::Results => "results".into(),
            Param::Machine => "machine".into(),
            Param::Policy => "policy".into(),
            Param::Workload => "workload".into(),
            Param::Mms => "mms".into(),
            Param::Pages => "pages".into(),
            Param::Asids => "asids".into(),
            Param::Ops => "ops".into(),
            Param::Menu => "menu".into(),
            Param::Mode => "mode".into(),
            Param::Memory => "memory".into(),
            Param::Teardown => "teardown".into(),
            Param::Jobs => "jobs".into(),
            Param::Iterations => "iterations".into(),
            Param::Quick => "quick".into(),
            Param::Deep => "deep".into(),
            Param::From => "from".into(),
            Param::Script => "script".into(),
            Param::Checkpoint => "checkpoint".into(),
            Param::Resume => "resume".into(),
            Param::MaxMemory => "max_memory".into(),
            Param::Ray => "ray".into(),
            Param::Base => "base".into(),
            Param::AllViolations => "all_violations".into(),
        }
    }

    fn given(&self, p: &Param, value: &str) -> String {
        match p {
            Param::Set(key) => format!("set {key}={value}"),
            _ => format!("{} {value}", self.name(p)),
        }
    }
}

impl fmt::Display for Param {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&Library.name(self))
    }
}
