//! `tlbkit calibrate`: the machine model against the machine it runs on.
//!
//! The host's side measures fourteen microbenchmarks (the `tlbkit-host`
//! crate); this module takes their figures, fits the few costs the model can
//! take from them ([`fit`]), builds the host's machine (`--machine host`,
//! [`tlbkit_sim::preset::host`]), runs the same fourteen in the model and
//! sets each beside the host's figure ([`compare`]).
//!
//! # Which figures test the model
//! Seven microbenchmarks each give one cost ([`FITTED`]): the null system call
//! the system-call path, zeroing the page copy and the memory bandwidth, the
//! page fault the fault path, the pipe's write and read its body, the pipe
//! ping-pong the context switch, the line ping-pong the cache-line transfer.
//! Their rows agree by construction (a row that does not says the fit could
//! not reach the host's figure, which is itself a finding: the model charges
//! more than the host takes even with that cost at 0). The other six (`mmap`,
//! `munmap`, `madvise`, `mprotect`, `lock_handoff`, `shootdown`) are
//! predictions: the model composes them from the fitted costs and from the
//! costs the host does not give, which keep the base preset's sourced figures
//! (IPIs, TLB invalidations, walks). A prediction outside the band names
//! those costs, so that a reader knows where the difference can come from.
//!
//! # The verdict
//! `reproduce`'s rule ([`crate::claims::verdict`]), applied as `reproduce`
//! applies it to a claim: to a ratio of a microbenchmark over the simpler one
//! it extends ([`base_of`]), the host's ratio as the origin's and the model's
//! as the simulated one. A system call's microbenchmark is set against the
//! null system call, `lock_handoff` against `line_pingpong` (a handoff is the
//! lock word's line and the counter's), and `shootdown` against two
//! `mprotect` calls (what the remote CPU adds). So a figure is judged by how
//! much it adds to its base on each side: `reproduced` within
//! `max(0.05, 0.35 |ln r|)` of the host's ratio `r` in log terms,
//! `direction-only` when only the side of 1 agrees. A prediction is also
//! judged by its own figure: one whose `model/host` is outside ½ to 2 (the
//! validation corpus's rule for absolute figures, `crate::validate`) is
//! `not-reproduced` whatever its increment, with a note that says so, since
//! a large base can hide a figure several times the host's. The zeroing
//! rates, and `null_syscall` itself, are fitted and have no base: their
//! verdict is `fitted`, and `model/host` says how close the fit came.

mod fit;

pub use fit::{fit, policy_for, Fitted, FITTED};

use crate::claims::verdict;
use crate::Error;
use serde::Serialize;
use std::collections::BTreeMap;
use tlbkit_host::Bench;
use tlbkit_sim::preset::{self, host::HostProfile, Preset};
use tlbkit_sim::run::{run_on, RunSpec};
use tlbkit_sim::workload::microbench;

/// The factors of the host's figure a predicted figure must lie within
/// (the module documentation, "The verdict").
pub const ABSOLUTE_BAND: (f64, f64) = (0.5, 2.0);

/// Returns the line `tlbkit calibrate` ends its table with: how many
/// microbenchmarks have each verdict.
pub fn summary(rows: &[Row]) -> String {
    let count = |v: &str| rows.iter().filter(|r| r.verdict == v).count();
    format!(
        "verdicts: {} reproduced, {} direction-only, {} not-reproduced, {} fitted, of {} microbenchmarks",
        count("reproduced"),
        count("direction-only"),
        count("not-reproduced"),
        count("fitted"),
        rows.len()
    )
}

/// The host's figures, by microbenchmark name, in its unit.
pub type Figures = BTreeMap<String, f64>;

/// Returns the microbenchmark `bench` is judged against and how many of its
/// operations one of `bench`'s extends (`None`: `bench` has no base).
pub fn base_of(bench: &str) -> Option<(&'static str, f64)> {
    match bench {
        "page_fault" | "mmap" | "munmap" | "madvise" | "mprotect" | "pipe_rw" | "pipe_switch" => {
            Some(("null_syscall", 1.0))
        }
        "lock_handoff" => Some(("line_pingpong", 1.0)),
        "shootdown" => Some(("mprotect", 2.0)),
        _ => None,
    }
}

/// The costs a prediction's figure is made of besides the fitted ones: what
/// a difference can come from.
fn unfitted(bench: &str) -> &'static [&'static str] {
    match bench {
        "mmap" | "munmap" | "madvise" | "mprotect" => {
            &["the mmap_lock and page-table walks", "local TLB invalidations (tlbi_local_*)", "zap_page, zap_folio"]
        }
        "lock_handoff" => &["the queued spinlock's model: one handoff per acquisition, no spinning cost"],
        "shootdown" => &["IPIs (ipi_send, ipi_deliver, ipi_handle)", "local TLB invalidations (tlbi_local_*)"],
        _ => &[],
    }
}

/// One microbenchmark on the host and in the model.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The microbenchmark.
    pub bench: String,
    /// Its unit.
    pub unit: String,
    /// The host's figure.
    pub host: f64,
    /// The model's figure.
    pub model: f64,
    /// `model / host`.
    pub ratio: f64,
    /// `reproduce`'s verdict (see the module documentation).
    pub verdict: String,
    /// The cost fitted to this microbenchmark, if one was.
    pub fitted: Option<String>,
    /// The command that runs the model's side, where it is a simulator run.
    pub command: Option<String>,
    /// Why a figure outside the band may differ: the costs it uses that the
    /// host did not give.
    pub note: Option<String>,
}

/// Returns the model's figure for every microbenchmark of `benches` on
/// `preset` (the host's machine), in the host's units; `all_cpus` is how
/// many CPUs `zeroing_all` used on the host.
pub fn model_figures(preset: &Preset, policy: &str, benches: &[&str], all_cpus: usize) -> Result<Figures, Error> {
    let mut out = Figures::new();
    for &b in benches {
        out.insert(b.to_string(), model_figure(preset, policy, b, all_cpus)?.0);
    }
    Ok(out)
}

/// Returns the model's figure of `bench` on `preset` and, for a simulator
/// run, its command.
fn model_figure(preset: &Preset, policy: &str, bench: &str, all_cpus: usize) -> Result<(f64, Option<String>), Error> {
    use tlbkit_sim::machine_bench::{atomic_hit_ns, line_pingpong_ns, lock_handoff_ns};
    use tlbkit_sim::sim::zeroing_gbs;
    let per_package = preset.cores_per_socket.max(1);
    Ok(match bench {
        "zeroing" => (zeroing_gbs(preset, 1), None),
        "zeroing_all" => {
            // Each package is a node with its own bandwidth.
            let full = all_cpus / per_package;
            let rest = all_cpus % per_package;
            let gbs =
                full as f64 * zeroing_gbs(preset, per_package) + if rest > 0 { zeroing_gbs(preset, rest) } else { 0.0 };
            (gbs, None)
        }
        "line_pingpong" => (line_pingpong_ns(preset, 0, 1, 1000), None),
        "atomic_hit" => (atomic_hit_ns(preset, 1000), None),
        "lock_handoff" => (lock_handoff_ns(preset, 0, 1, 1000), None),
        _ => {
            let n = microbench::number(bench).ok_or_else(|| Error::UnknownMicrobench { name: bench.to_string() })?;
            let cpus = if bench == "shootdown" { 2 } else { 1 };
            let spec = RunSpec {
                machine: preset::HOST.into(),
                cpus,
                policy: policy.into(),
                workload: microbench::DEF.name.into(),
                sets: vec![format!("bench={n}")],
                seed: 1,
                strict: false,
            };
            let out = run_on(&spec, preset.clone())?;
            (out.result["ns_per_op"], Some(spec.command()))
        }
    })
}

/// Returns, for each microbenchmark of `host` in [`Bench::ALL`]'s order, the
/// host's figure beside the model's on the machine `profile` describes.
pub fn compare(profile: &HostProfile, host: &Figures, all_cpus: usize) -> Result<Vec<Row>, Error> {
    let preset = preset::host::preset(profile).map_err(tlbkit_sim::Error::from)?;
    let policy = policy_for(profile);
    let mut model = BTreeMap::new();
    for bench in Bench::ALL.iter().map(|b| b.name()) {
        if host.contains_key(bench) {
            model.insert(bench, model_figure(&preset, policy, bench, all_cpus)?);
        }
    }
    let mut rows = Vec::new();
    for b in Bench::ALL {
        let (bench, unit) = (b.name(), b.unit());
        let (Some(&h), Some((m, command))) = (host.get(bench), model.get(bench)) else { continue };
        let (m, command) = (*m, command.clone());
        let verdict = match base_of(bench) {
            Some((base, ops)) => match (host.get(base), model.get(base).map(|x| x.0)) {
                (Some(hb), Some(mb)) => verdict(h / (hb * ops), m / (mb * ops)).to_string(),
                _ => "-".to_string(),
            },
            None => "fitted".to_string(),
        };
        let fitted = FITTED.iter().find(|f| f.bench == bench).map(|f| f.cost.to_string());
        let why = unfitted(bench);
        // A prediction's own figure: outside a factor of 2 of the host's, it
        // is not reproduced, however its increment over its base compares.
        let off = verdict != "fitted" && !(ABSOLUTE_BAND.0..=ABSOLUTE_BAND.1).contains(&(m / h));
        let verdict = if off { "not-reproduced".to_string() } else { verdict };
        let judged = verdict != "reproduced" && verdict != "fitted";
        let mut notes = Vec::new();
        if off {
            notes.push(format!("the model's figure is {:.2}x the host's, outside 1/2 to 2", m / h));
        }
        if judged && !why.is_empty() {
            notes.push(format!("not from this host: {}", why.join("; ")));
        }
        let note = (!notes.is_empty()).then(|| notes.join("; "));
        rows.push(Row {
            bench: bench.into(),
            unit: unit.into(),
            host: h,
            model: m,
            ratio: m / h,
            verdict,
            fitted,
            command,
            note,
        });
    }
    Ok(rows)
}
