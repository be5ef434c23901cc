//! One `tlbkit run`, end to end: check the request, build the machine and the
//! policy, run the workload's phases, and collect metrics, result and violations.
//!
//! Every error here is the user's to fix (an unknown name, an impossible value),
//! so each message says what was wrong and what would be accepted.
//!
//! The request's switches and parameters are resolved in `run/resolve.rs`;
//! `tlbkit bench`'s timed phases and scale runs are `run/bench.rs`.

use crate::error::Error;
use crate::oracle::Violation;
use crate::preset::{self, Preset};
use crate::sched::SchedKind;
use crate::sim::{ContMode, ContpteConfig, KernelChoices, MmuStats, Sim, SimConfig};
use crate::swapdev::SwapKind;
use crate::workload::{self, Params, Phase, Texts};
use serde::Serialize;
use serde_json::json;
use std::collections::BTreeMap;
use tlbkit_policy::contpte::Teardown;
use tlbkit_policy::Policy;
use tlbkit_registry::{self as registry, Build, PolicyDef, WithPolicy, POLICIES};

mod bench;
mod resolve;
mod switches;

pub use bench::{
    bench, bench_scale, scale_specs, BenchResult, ScaleRow, MAX_SHORT_RUNS, SCALE_MACHINE, SCALE_POLICY,
    SCALE_WORKLOADS,
};
pub use resolve::machine_keys;
use resolve::{resolve, resolve_on, MachineParams, Resolved};
pub use switches::{all as all_switches, sockets_for, switch, Switch, SOCKETS};

/// The most CPUs a machine may have (Linux's `NR_CPUS` default on arm64 and x86).
pub use crate::preset::MAX_CPUS;

/// What to run.
#[derive(Clone, Debug)]
pub struct RunSpec {
    /// Machine preset name.
    pub machine: String,
    /// CPUs.
    pub cpus: usize,
    /// Policy name.
    pub policy: String,
    /// Workload name.
    pub workload: String,
    /// `--set key=value` pairs, in command-line order.
    pub sets: Vec<String>,
    /// Seed.
    pub seed: u64,
    /// Whether `no_stale_held` is checked.
    pub strict: bool,
}

impl RunSpec {
    /// Returns the command line that repeats this run.
    pub fn command(&self) -> String {
        let mut c = format!(
            "tlbkit run --machine {} --cpus {} --policy {} --workload {}",
            self.machine, self.cpus, self.policy, self.workload
        );
        for s in &self.sets {
            c.push_str(&format!(" --set {s}"));
        }
        c.push_str(&format!(" --seed {}", self.seed));
        if self.strict {
            c.push_str(" --strict");
        }
        c
    }
}

/// The metrics every run reports.
#[derive(Clone, Debug, Serialize)]
pub struct Metrics {
    /// Simulated time until the last CPU stopped, in nanoseconds.
    pub sim_time_ns: f64,
    /// The translations, their misses, walks, speculative fills and page
    /// faults, as the simulator counted them.
    #[serde(flatten)]
    pub mmu: MmuStats,
    /// Local TLB invalidation operations.
    pub local_invalidations: u64,
    /// Broadcast TLB invalidation operations.
    pub broadcast_invalidations: u64,
    /// The IPIs and shootdowns.
    #[serde(flatten)]
    pub ipi: IpiMetrics,
    /// Cache-line transfers of policy state.
    pub line_transfers: u64,
    /// Context switches.
    pub context_switches: u64,
    /// ASID rollovers (epoch resets, generation bumps).
    pub asid_rollovers: u64,
    /// Invalidations of a whole ASID or the whole TLB.
    pub full_flushes: u64,
    /// System calls.
    pub syscalls: u64,
    /// Simulator events processed.
    pub events: u64,
    /// Cycles CPUs ran while another thread of their core was running (on a
    /// machine whose cores' threads share them; absent elsewhere).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub smt_shared_cycles: Option<u64>,
    /// The contiguous-PTE and exit-teardown metrics.
    #[serde(flatten)]
    pub contpte: ContpteMetrics,
    /// Cycles spent in the kernel's software costs that rest on estimates
    /// (`zone_page_cycles`, `lru_folio_cycles`, `vma_walk_cycles`).
    #[serde(flatten)]
    pub estimated: crate::sim::EstimatedCycles,
}

/// The IPIs a run sent and the shootdowns it made (in JSON, fields of the
/// run's metrics).
#[derive(Clone, Debug, Serialize)]
pub struct IpiMetrics {
    /// IPIs sent.
    pub ipis_sent: u64,
    /// Linux call-function requests run by a handler already on its way to
    /// their CPU, with no IPI of their own.
    pub ipis_coalesced: u64,
    /// Time IPI handlers ran, in nanoseconds, summed over CPUs.
    pub ipi_handler_ns: f64,
    /// Of that, time spent invalidating TLBs.
    pub ipi_invalidating_ns: f64,
    /// Of that, time spent synchronising on shared cache lines.
    pub ipi_sync_ns: f64,
    /// Shootdowns that reported their phases (issue .. done).
    pub shootdowns: u64,
    /// Their total latency from issue to done, in nanoseconds.
    pub shootdown_ns: f64,
}

/// The contpte metrics: reported when `--set contpte` or `--set teardown` is
/// given (so other runs print what they always printed), and in JSON fields
/// of the run's metrics.
#[derive(Clone, Debug, Serialize)]
pub struct ContpteMetrics {
    /// 64 KB TLB fills, speculative ones included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contpte_fills: Option<u64>,
    /// 64 KB folios allocated (anonymous and page cache).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub folios: Option<u64>,
    /// Range flushes the arm64 arch code made through `PteMem` (fold and unfold
    /// break-before-make, access-flag updates, copy-on-write).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pte_range_flushes: Option<u64>,
    /// Of those, the ones made while exiting address spaces were torn down
    /// (`noopt`: one per contiguous block; the other strategies none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_range_flushes: Option<u64>,
    /// Address spaces torn down by `exit` (each process's last thread).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exits: Option<u64>,
    /// Simulated time those teardowns took, in nanoseconds, summed: clearing
    /// every PTE, the flush of the address space, freeing the frames (the
    /// `exit_group` cost origin 004 measures; divide by `exits`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_teardown_ns: Option<f64>,
    /// Hardware actions (another CPU's write or speculative fill) the simulator
    /// placed between two page-table accesses of the arch code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hw_races: Option<u64>,
    /// File pages reported dirty when their PTE was cleared (written back).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_writebacks: Option<u64>,
}

impl Metrics {
    /// Returns metrics of zero, with the contpte ones present when `contpte`
    /// (as a run with `--set contpte` or `--set teardown` reports them).
    pub fn zero(contpte: bool) -> Metrics {
        let report = contpte.then_some(0);
        // A literal of every field, so that a new metric cannot be left out here.
        Metrics {
            sim_time_ns: 0.0,
            mmu: MmuStats {
                tlb_accesses: 0,
                tlb_misses: 0,
                l1_tlb_misses: 0,
                page_walks: 0,
                spec_fills: 0,
                page_faults: 0,
            },
            local_invalidations: 0,
            broadcast_invalidations: 0,
            ipi: IpiMetrics {
                ipis_sent: 0,
                ipis_coalesced: 0,
                ipi_handler_ns: 0.0,
                ipi_invalidating_ns: 0.0,
                ipi_sync_ns: 0.0,
                shootdowns: 0,
                shootdown_ns: 0.0,
            },
            line_transfers: 0,
            context_switches: 0,
            asid_rollovers: 0,
            full_flushes: 0,
            syscalls: 0,
            events: 0,
            smt_shared_cycles: report,
            contpte: ContpteMetrics {
                contpte_fills: report,
                folios: report,
                pte_range_flushes: report,
                exit_range_flushes: report,
                exits: report,
                exit_teardown_ns: report.map(|x| x as f64),
                hw_races: report,
                file_writebacks: report,
            },
            estimated: crate::sim::EstimatedCycles::default(),
        }
    }
}

/// What a run produced.
#[derive(Clone, Debug, Serialize)]
pub struct RunOutput {
    /// Machine preset.
    pub machine: String,
    /// CPUs.
    pub cpus: usize,
    /// Policy.
    pub policy: String,
    /// Workload.
    pub workload: String,
    /// Seed.
    pub seed: u64,
    /// Every parameter's effective value.
    pub params: BTreeMap<String, serde_json::Value>,
    /// Metrics of the main phase.
    pub metrics: Metrics,
    /// The workload's result.
    pub result: BTreeMap<String, f64>,
    /// Violations (the first [`crate::oracle::Oracle::KEEP`] of each phase).
    pub violations: Vec<Violation>,
    /// Violations found in all.
    pub violations_total: u64,
    /// Violations found in all, by property (absent when there are none).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub violations_by_property: BTreeMap<String, u64>,
    /// The command that replays this run.
    pub replay: String,
}

impl RunOutput {
    /// Returns every figure of the run by name: the workload's results and the
    /// metrics (the names [`metric_names`] lists).
    pub fn metric_values(&self) -> BTreeMap<String, f64> {
        let mut all = self.result.clone();
        if let serde_json::Value::Object(m) = serde_json::to_value(&self.metrics).unwrap_or_default() {
            all.extend(m.into_iter().filter_map(|(k, v)| v.as_f64().map(|x| (k, x))));
        }
        all
    }
}

/// The key under which `--set jitter` is kept in a run's [`Params`].
const JITTER: &str = "jitter";

/// Applies the run's `--set jitter`, if given, to a freshly built simulator.
fn apply_jitter(sim: &mut Sim, params: &Params) {
    if let Some(&j) = params.get(JITTER) {
        sim.set_jitter(j);
    }
}

/// The main phase's simulator state that outlives the run, and the rest.
struct Outcome {
    metrics: Metrics,
    result: BTreeMap<String, f64>,
    violations: Vec<Violation>,
    total: u64,
    by_property: BTreeMap<String, u64>,
}

fn metrics(sim: &Sim) -> Metrics {
    let s = sim.stats;
    let h = sim.counters();
    let cont = |x: u64| sim.cfg.contpte.report.then_some(x);
    Metrics {
        sim_time_ns: sim.end as f64 / sim.ghz(),
        mmu: s.mmu,
        local_invalidations: h.local_invalidations,
        broadcast_invalidations: h.broadcast_invalidations,
        ipi: IpiMetrics {
            ipis_sent: h.ipis_sent,
            ipis_coalesced: h.ipis_coalesced,
            ipi_handler_ns: h.ipi_handler_cycles as f64 / sim.ghz(),
            ipi_invalidating_ns: h.ipi_invalidating_cycles as f64 / sim.ghz(),
            ipi_sync_ns: h.ipi_sync_cycles as f64 / sim.ghz(),
            shootdowns: h.shootdowns,
            shootdown_ns: h.shootdown_cycles as f64 / sim.ghz(),
        },
        line_transfers: h.line_transfers,
        context_switches: s.context_switches,
        asid_rollovers: h.asid_rollovers,
        full_flushes: h.full_flushes,
        syscalls: s.syscalls,
        events: s.events,
        smt_shared_cycles: (sim.threads_per_core() > 1).then_some(s.smt_shared_cycles),
        contpte: ContpteMetrics {
            contpte_fills: cont(s.contpte.contpte_fills),
            folios: cont(s.contpte.folios),
            pte_range_flushes: cont(s.contpte.pte_range_flushes),
            exit_range_flushes: cont(s.contpte.exit_range_flushes),
            exits: cont(s.contpte.exits),
            exit_teardown_ns: sim.cfg.contpte.report.then_some(s.contpte.exit_teardown_cycles as f64 / sim.ghz()),
            hw_races: cont(s.contpte.hw_races),
            file_writebacks: cont(s.contpte.file_writebacks),
        },
        estimated: s.estimated,
    }
}

/// Runs a workload's phases under the policy `mk` builds. The simulator holds
/// the policy behind its hooks (`sim/hooks.rs`), so only the policy's own code
/// is compiled per policy type, not the simulator.
pub fn run_phases<P: Policy + 'static>(
    cfg: &SimConfig,
    wl: &workload::WorkloadDef,
    params: &Params,
    mk: &dyn Fn() -> P,
) -> Result<(Sim, Option<Sim>), Error> {
    phases(cfg, wl, params, &Texts::new(), mk)
}

/// [`run_phases`] with the workload's text parameters.
fn phases<P: Policy + 'static>(
    cfg: &SimConfig,
    wl: &workload::WorkloadDef,
    params: &Params,
    texts: &Texts,
    mk: &dyn Fn() -> P,
) -> Result<(Sim, Option<Sim>), Error> {
    let phase = |ph: Phase| -> Result<Sim, Error> {
        let mut sim = Sim::new(cfg.clone(), mk());
        apply_jitter(&mut sim, params);
        workload::setup_with(wl.name, params, texts, &mut sim, ph)?;
        sim.run();
        if let Some(e) = &sim.error {
            return Err(Error::Failed { workload: wl.name, phase: Some(ph.name()), message: e.clone() });
        }
        Ok(sim)
    };
    let main = phase(Phase::Main)?;
    let ovr = if wl.has_overhead { Some(phase(Phase::Overhead)?) } else { None };
    Ok((main, ovr))
}

fn outcome<P: Policy + 'static>(
    cfg: &SimConfig,
    wl: &workload::WorkloadDef,
    params: &Params,
    texts: &Texts,
    mk: &dyn Fn() -> P,
) -> Result<Outcome, Error> {
    let (main, ovr) = phases(cfg, wl, params, texts, mk)?;
    let result = workload::result(wl.name, params, &main, ovr.as_ref())?;
    let mut violations = main.oracle.violations.clone();
    let mut total = main.oracle.count;
    let mut by_property: BTreeMap<String, u64> = BTreeMap::new();
    for (p, n) in main.oracle.by_property.iter().chain(ovr.iter().flat_map(|o| o.oracle.by_property.iter())) {
        *by_property.entry(p.to_string()).or_default() += n;
    }
    if let Some(o) = &ovr {
        violations.extend(o.oracle.violations.iter().cloned());
        total += o.oracle.count;
    }
    Ok(Outcome { metrics: metrics(&main), result, violations, total, by_property })
}

/// Returns the address-space slots a run needs: the workload's, plus one per CPU
/// for exited address spaces a lazy-TLB CPU still has loaded.
fn mm_slots(wl: &workload::WorkloadDef, params: &Params, texts: &Texts, cpus: usize) -> usize {
    workload::max_mms_with(wl.name, params, texts, cpus) + cpus
}

/// Returns the simulator configuration for a resolved request.
fn config(spec: &RunSpec, mut preset: Preset, mp: &MachineParams, max_mms: usize) -> SimConfig {
    // Each NUMA node is a "socket" of the model: crossing it pays the cross-socket costs.
    let v = &mp.values;
    preset.cores_per_socket = (preset.cores_per_socket / v.numa).max(1);
    // Each node has its share of the socket's memory channels.
    preset.mem_bw_gbs /= v.numa as f64;
    // PTI's CR3 writes at every kernel entry (SWITCH_TO_KERNEL_CR3) and return
    // to user (SWITCH_TO_USER_CR3), with PCIDs NOFLUSH: one `root_write` each
    // way. Charged at every exception entry and exit, an interrupt of kernel
    // code (which switches no CR3) included.
    if v.pti {
        preset.costs.exception_entry += preset.costs.root_write;
        preset.costs.exception_exit += preset.costs.root_write;
    }
    SimConfig {
        preset,
        ncpus: spec.cpus,
        seed: spec.seed,
        strict: spec.strict,
        spec_rate: v.spec_rate,
        migration: v.migration(),
        sched: v.sched,
        swap: v.swap,
        slice_us: v.fifo_slice_us(),
        base_slice_us: v.slice_us,
        asid_bits: v.asid_bits,
        max_mms,
        max_events: 500_000_000,
        contpte: v.contpte(),
        smt: v.smt,
        kernel: KernelChoices { toggles: mp.toggles, memcg_depth: v.memcg_depth },
        noise: v.noise,
    }
}

/// The registry's builder input for a run: the machine's shape and the
/// switches the policy takes.
fn build(spec: &RunSpec, mp: &MachineParams, max_mms: usize) -> Build {
    let v = &mp.values;
    Build {
        cpus: spec.cpus,
        mm_slots: max_mms,
        asid_bits: v.asid_bits,
        kpti: v.kpti,
        tlbi_range: v.tlbi_range,
        tlb_mode: v.tlb_mode,
        flush_ceiling: v.flush_ceiling,
        pti: v.pti,
        invpcid: mp.invpcid,
        bug: None,
        checker: false,
    }
}

/// One run of a workload's phases, for [`tlbkit_c::front::with_policy`].
struct Runs<'a> {
    cfg: &'a SimConfig,
    wl: &'a workload::WorkloadDef,
    params: &'a Params,
    texts: &'a Texts,
}

impl WithPolicy for Runs<'_> {
    type Out = Result<Outcome, Error>;
    fn with<P: Policy + 'static>(self, mk: &dyn Fn() -> P) -> Self::Out {
        outcome(self.cfg, self.wl, self.params, self.texts, mk)
    }
}

/// Checks a request as [`run`] would, without running it.
pub fn check(spec: &RunSpec) -> Result<(), Error> {
    resolve(spec).map(|_| ())
}

/// Returns the names of the figures a run of `spec` reports, after checking
/// `spec`: its workload's results (the headline first), then the metrics.
pub fn metric_names(spec: &RunSpec) -> Result<Vec<String>, Error> {
    let Resolved { preset, wl, mp, .. } = resolve(spec)?;
    let mut names: Vec<String> = wl.results.iter().map(|r| r.to_string()).collect();
    let mut zero = Metrics::zero(mp.values.contpte_reported());
    // Only a run whose cores' threads share them reports the cycles they did.
    zero.smt_shared_cycles = preset.threads.shared(mp.values.smt).then_some(0);
    // A struct of numbers always serialises, to an object.
    if let Ok(serde_json::Value::Object(m)) = serde_json::to_value(&zero) {
        names.extend(m.into_iter().map(|(k, _)| k));
    }
    Ok(names)
}

/// Runs one request; `Err` says what was wrong with it, or why the run failed.
pub fn run(spec: &RunSpec) -> Result<RunOutput, Error> {
    run_on(spec, preset::resolve(&spec.machine)?)
}

/// Runs one request on the machine `preset` (a preset changed by its caller:
/// `tlbkit calibrate` fits a host's costs this way); `spec.machine` only names
/// it in the output.
pub fn run_on(spec: &RunSpec, preset: Preset) -> Result<RunOutput, Error> {
    let Resolved { preset, wl, mp, params, texts } = resolve_on(spec, preset)?;
    let max_mms = mm_slots(wl, &params, &texts, spec.cpus);
    let cx = switches::Context { preset: &preset, pol: mp.pol, cpus: spec.cpus, sockets: mp.values.sockets };
    let shown = switches::shown(&mp, &cx);
    let cfg = config(spec, preset, &mp, max_mms);
    let runs = Runs { cfg: &cfg, wl, params: &params, texts: &texts };
    let out = tlbkit_c::front::with_policy(&spec.policy, &build(spec, &mp, max_mms), runs)??;
    let mut pv: BTreeMap<String, serde_json::Value> =
        params.iter().map(|(k, v)| (k.clone(), if k == JITTER { json!(*v) } else { json!(*v as i64) })).collect();
    pv.extend(texts.iter().map(|(k, v)| (k.clone(), json!(v))));
    pv.extend(shown.into_iter().map(|(k, v)| (k.to_string(), v)));
    pv.insert("kernel".into(), json!(cfg.preset.kernel.name()));
    Ok(RunOutput {
        machine: spec.machine.clone(),
        cpus: spec.cpus,
        policy: spec.policy.clone(),
        workload: spec.workload.clone(),
        seed: spec.seed,
        params: pv,
        metrics: out.metrics,
        result: out.result,
        violations: out.violations,
        violations_total: out.total,
        violations_by_property: out.by_property,
        replay: spec.command(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preset::Arch;

    #[test]
    fn every_registered_policy_runs_in_the_simulator() {
        for p in POLICIES {
            let machine = match p.arch {
                Arch::Arm64 => "cortex-a72",
                Arch::X86_64 if p.needs_broadcast_tlbi => "milan",
                Arch::X86_64 => "skylake",
            };
            let spec = RunSpec {
                machine: machine.into(),
                cpus: 2,
                policy: p.name.into(),
                workload: "lat_ctx".into(),
                sets: vec!["procs=4".into(), "rounds=3".into()],
                seed: 1,
                strict: true,
            };
            let out = run(&spec).unwrap_or_else(|e| panic!("{}: {e}", p.name));
            assert_eq!(out.violations_total, 0, "{}", p.name);
            assert!(out.metrics.context_switches > 0, "{}", p.name);
        }
    }

    #[test]
    fn a_run_names_the_metrics_it_reports_with_and_without_smt() {
        for (sets, smt) in [(vec![], true), (vec!["smt=off".to_string()], false)] {
            let spec = RunSpec {
                machine: "skx8170".into(),
                cpus: 2,
                policy: "x86-linux-pcid".into(),
                workload: "lat_ctx".into(),
                sets: [vec!["procs=4".to_string(), "rounds=3".to_string()], sets].concat(),
                seed: 1,
                strict: false,
            };
            let names = metric_names(&spec).unwrap();
            let figures = run(&spec).unwrap().metric_values();
            assert_eq!(names.len(), figures.len(), "{names:?}");
            assert_eq!(figures.contains_key("smt_shared_cycles"), smt);
        }
    }
}
