//! `tlbkit bench`: one phase of a run timed around `Sim::run`, and the scale
//! workloads at several CPU counts with their peak memory.

use super::*;

/// What `tlbkit bench` measures: one phase of a run, timed around `Sim::run`.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct BenchResult {
    /// Simulated translations per wall-clock second.
    pub translations_per_sec: f64,
    /// Simulator events per wall-clock second.
    pub events_per_sec: f64,
    /// Wall-clock seconds of the timed phase.
    pub wall_s: f64,
    /// Simulator events of the timed phase.
    pub events: u64,
    /// Simulated translations of the timed phase.
    pub translations: u64,
}

/// One timed main phase, for [`tlbkit_c::front::with_policy`].
struct Bench<'a>(Runs<'a>);

impl WithPolicy for Bench<'_> {
    type Out = Result<BenchResult, Error>;
    fn with<P: Policy + 'static>(self, mk: &dyn Fn() -> P) -> Self::Out {
        bench_typed(self.0.cfg, self.0.wl, self.0.params, self.0.texts, mk())
    }
}

fn bench_typed<P: Policy + 'static>(
    cfg: &SimConfig,
    wl: &workload::WorkloadDef,
    params: &Params,
    texts: &Texts,
    p: P,
) -> Result<BenchResult, Error> {
    let mut sim = Sim::new(cfg.clone(), p);
    apply_jitter(&mut sim, params);
    workload::setup_with(wl.name, params, texts, &mut sim, Phase::Main)?;
    let t = std::time::Instant::now();
    sim.run();
    let wall = t.elapsed().as_secs_f64().max(1e-9);
    if let Some(e) = &sim.error {
        return Err(Error::Failed { workload: wl.name, phase: None, message: e.clone() });
    }
    Ok(BenchResult {
        translations_per_sec: sim.stats.mmu.tlb_accesses as f64 / wall,
        events_per_sec: sim.stats.events as f64 / wall,
        wall_s: wall,
        events: sim.stats.events,
        translations: sim.stats.mmu.tlb_accesses,
    })
}

/// Times the main phase of `spec` (setup excluded) `reps` times and returns the
/// repetition with the median translation rate: the host is shared and noisy.
pub fn bench(spec: &RunSpec, reps: usize) -> Result<BenchResult, Error> {
    let Resolved { preset, wl, mp, params, texts } = resolve(spec)?;
    let max_mms = mm_slots(wl, &params, &texts, spec.cpus);
    let cfg = config(spec, preset, &mp, max_mms);
    let mut runs = Vec::with_capacity(reps.max(1));
    for _ in 0..reps.max(1) {
        let one = Bench(Runs { cfg: &cfg, wl, params: &params, texts: &texts });
        runs.push(tlbkit_c::front::with_policy(&spec.policy, &build(spec, &mp, max_mms), one)??);
    }
    runs.sort_by(|a, b| a.translations_per_sec.total_cmp(&b.translations_per_sec));
    Ok(runs[runs.len() / 2])
}

/// The machine `tlbkit bench --cpus` runs on: the largest preset, whose kernel
/// default (`NR_CPUS`) is [`MAX_CPUS`].
pub const SCALE_MACHINE: &str = "altra";

/// The policy `tlbkit bench --cpus` runs unless told otherwise: the stock Linux
/// arm64 policy, which broadcasts every user and kernel flush.
pub const SCALE_POLICY: &str = "arm64-linux";

/// The workloads `tlbkit bench --cpus` times, with the parameters it sets: a fixed
/// amount of work per CPU (one copy or thread per CPU), so that an ideal simulator
/// would keep its events per second at every CPU count.
pub const SCALE_WORKLOADS: &[(&str, &[&str])] = &[("mprotect_threaded", &["iters=200"]), ("fileserver", &["ops=500"])];

/// One row of `tlbkit bench --cpus`: one workload at one CPU count.
#[derive(Clone, Debug, Serialize)]
pub struct ScaleRow {
    /// Workload.
    pub workload: String,
    /// CPUs.
    pub cpus: usize,
    /// Simulator events of the timed phase.
    pub events: u64,
    /// Simulated translations of the timed phase.
    pub translations: u64,
    /// Wall-clock seconds of the timed phase (setup excluded).
    pub wall_s: f64,
    /// Events per wall-clock second.
    pub events_per_sec: f64,
    /// Translations per wall-clock second.
    pub translations_per_sec: f64,
    /// `events_per_sec` relative to the first CPU count's, for the same workload.
    pub speed_ratio: f64,
    /// Peak resident memory of the process during the run (setup included), in
    /// MiB, where the host reports it (Linux: `VmHWM`, reset before each run);
    /// `None` elsewhere. It includes what the allocator kept from earlier runs,
    /// so it is exact only when CPU counts are given in increasing order.
    pub peak_rss_mib: Option<f64>,
    /// The command that runs the same simulation.
    pub command: String,
}

/// Returns the specs `tlbkit bench --cpus` runs, CPU count by CPU count (in the
/// order given) and workload by workload, after checking every one of them (so
/// that bad input fails before anything runs). `workloads` empty means
/// [`SCALE_WORKLOADS`]; `sets` replace a workload's own bench parameters of the
/// same key.
pub fn scale_specs(cpus: &[usize], workloads: &[String], policy: &str, sets: &[String]) -> Result<Vec<RunSpec>, Error> {
    if cpus.is_empty() {
        return Err(Error::NoCpuCounts { max: MAX_CPUS });
    }
    let chosen: Vec<String> = if workloads.is_empty() {
        SCALE_WORKLOADS.iter().map(|(w, _)| w.to_string()).collect()
    } else {
        workloads.to_vec()
    };
    let key = |s: &str| s.split_once('=').map_or(s.to_string(), |(k, _)| k.to_string());
    let mut specs = Vec::new();
    for &n in cpus {
        for w in &chosen {
            let own = SCALE_WORKLOADS.iter().find(|(name, _)| name == w).map_or(&[][..], |(_, s)| *s);
            let own = own.iter().filter(|o| !sets.iter().any(|s| key(s) == key(o))).map(|s| s.to_string());
            // A scale study asks for a larger machine of the preset's sockets.
            let preset = preset::by_name(SCALE_MACHINE).expect("the scale machine is a preset");
            let grow = sockets_for(&preset, n).filter(|_| !sets.iter().any(|s| key(s) == SOCKETS));
            let spec = RunSpec {
                machine: SCALE_MACHINE.into(),
                cpus: n,
                policy: policy.into(),
                workload: w.clone(),
                sets: own.chain(grow).chain(sets.iter().cloned()).collect(),
                seed: 1,
                strict: false,
            };
            resolve(&spec)?;
            specs.push(spec);
        }
    }
    Ok(specs)
}

/// The most runs [`bench_scale`] makes of a spec whose run is short.
pub const MAX_SHORT_RUNS: usize = 101;

/// Times the main phase of each spec (see [`scale_specs`]) and returns one row
/// per spec, each with its speed relative to the first spec of its workload. A
/// row is one run when a run takes a second or more; a shorter run is repeated
/// until the runs add up to a second (at least three, at most
/// [`MAX_SHORT_RUNS`]) and the row is the run with the median event rate: a run
/// of a few milliseconds is at the mercy of a shared host's load, and a median
/// of many is not. `progress` is called before each spec.
pub fn bench_scale(specs: &[RunSpec], mut progress: impl FnMut(&RunSpec)) -> Result<Vec<ScaleRow>, Error> {
    let mut rows: Vec<ScaleRow> = Vec::with_capacity(specs.len());
    for spec in specs {
        progress(spec);
        let can_reset = tlbkit_host::memory::reset_peak();
        let mut runs = vec![bench(spec, 1)?];
        let mut total = runs[0].wall_s;
        while runs[0].wall_s < 1.0 && runs.len() < MAX_SHORT_RUNS && (runs.len() < 3 || total < 1.0) {
            let b = bench(spec, 1)?;
            total += b.wall_s;
            runs.push(b);
        }
        runs.sort_by(|a, b| a.events_per_sec.total_cmp(&b.events_per_sec));
        let b = runs[runs.len() / 2];
        let peak =
            if can_reset { tlbkit_host::memory::peak_bytes().map(|b| b as f64 / f64::from(1 << 20)) } else { None };
        let first = rows.iter().find(|r| r.workload == spec.workload).map_or(b.events_per_sec, |r| r.events_per_sec);
        rows.push(ScaleRow {
            workload: spec.workload.clone(),
            cpus: spec.cpus,
            events: b.events,
            translations: b.translations,
            wall_s: b.wall_s,
            events_per_sec: b.events_per_sec,
            translations_per_sec: b.translations_per_sec,
            speed_ratio: b.events_per_sec / first,
            peak_rss_mib: peak,
            command: spec.command(),
        });
    }
    Ok(rows)
}
