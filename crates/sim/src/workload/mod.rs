//! The seeds' benchmarks, written as programs for the simulated kernel.
//!
//! A workload declares its parameters (with defaults and limits, so `--set`
//! can check them), builds its processes in a booted [`Sim`], and turns what the
//! run recorded into its result. Some, like lmbench's `lat_ctx`, measure a second
//! *overhead* phase that is subtracted, as the original benchmark does.

pub mod lat_ctx;
pub mod pingpong;

use crate::sim::Sim;
use std::collections::BTreeMap;
use tlbkit_policy::Policy;

/// A workload parameter: its name, default, inclusive limits and meaning.
#[derive(Clone, Copy, Debug)]
pub struct ParamDef {
    /// The `--set` key.
    pub key: &'static str,
    /// Default value.
    pub default: f64,
    /// Smallest allowed value.
    pub min: f64,
    /// Largest allowed value.
    pub max: f64,
    /// What it means.
    pub doc: &'static str,
}

/// Which part of a workload's measurement a simulation runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// The measurement itself.
    Main,
    /// The benchmark's own overhead, subtracted from the main phase.
    Overhead,
}

/// A registered workload.
#[derive(Clone, Copy, Debug)]
pub struct WorkloadDef {
    /// The name used on the command line.
    pub name: &'static str,
    /// One line for `tlbkit list`.
    pub description: &'static str,
    /// Its parameters.
    pub params: &'static [ParamDef],
    /// Whether it has an overhead phase.
    pub has_overhead: bool,
    /// The result keys it reports, the first one being its headline.
    pub results: &'static [&'static str],
}

/// Every workload.
pub const WORKLOADS: &[WorkloadDef] = &[lat_ctx::DEF, pingpong::DEF];

/// Returns the workload called `name`.
pub fn by_name(name: &str) -> Option<&'static WorkloadDef> {
    WORKLOADS.iter().find(|w| w.name == name)
}

/// Parameter values by key.
pub type Params = BTreeMap<String, f64>;

/// Starts the processes of workload `name` for `phase`.
pub fn setup<P: Policy>(name: &str, p: &Params, sim: &mut Sim<P>, phase: Phase) -> Result<(), String> {
    match name {
        "lat_ctx" => lat_ctx::setup(p, sim, phase),
        "pingpong" => pingpong::setup(p, sim, phase),
        _ => Err(format!("unknown workload {name}")),
    }
}

/// Computes the result of workload `name` from its finished phases.
pub fn result<P: Policy>(
    name: &str,
    p: &Params,
    main: &Sim<P>,
    overhead: Option<&Sim<P>>,
) -> Result<BTreeMap<String, f64>, String> {
    match name {
        "lat_ctx" => lat_ctx::result(p, main, overhead),
        "pingpong" => pingpong::result(p, main),
        _ => Err(format!("unknown workload {name}")),
    }
}

/// Returns the number of address spaces a workload needs at most at once.
pub fn max_mms(name: &str, p: &Params) -> usize {
    match name {
        "lat_ctx" => p["procs"] as usize + 8,
        "pingpong" => 8,
        _ => 64,
    }
}
