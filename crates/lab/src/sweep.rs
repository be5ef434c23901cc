//! `tlbkit sweep`: every point of a grid of runs (machines × CPU counts ×
//! policies × workloads × parameter values × seeds, described by a TOML file:
//! [`schema`]), run on the host's cores, each recorded as one JSON line of a
//! results file as it finishes ([`results`]). Running the same file again runs
//! only the points the results file does not hold, so an interrupted sweep
//! resumes where it stopped.
//!
//! A results line holds the point's coordinates (`machine`, `cpus`, `policy`,
//! `workload`, each parameter under its own key, `seed`), the command that
//! repeats the run (`command`, which is also the point's identity), the
//! violations it found (`violations`), then every figure of the run: the
//! workload's results and the metrics, under their names.

pub mod results;
pub mod schema;

/// The most runs one experiment file may describe (its grid's points, the
/// policy and machine pairs of different architectures counted too): a larger
/// grid is refused, before anything is allocated for it, with a message to
/// split it.
pub const MAX_RUNS: usize = 100_000;

use crate::batch;
use results::ResultsFile;
use schema::{ParamValue, Sweep};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use tlbkit_sim::preset;
use tlbkit_sim::registry;
use tlbkit_sim::run::{self, RunOutput, RunSpec};

/// One point of the grid.
#[derive(Clone, Debug)]
pub struct Point {
    /// The run.
    pub spec: RunSpec,
    /// Its parameter values, in key order (the same as `spec.sets`).
    pub params: Vec<(String, ParamValue)>,
}

impl Point {
    /// Returns the point's identity in a results file: the command that repeats it.
    pub fn key(&self) -> String {
        self.spec.command()
    }
}

/// The points of a grid.
#[derive(Clone, Debug)]
pub struct Grid {
    /// Every point to run, machine by machine, CPU count by CPU count, policy by
    /// policy, workload by workload, parameter values (the last key fastest), seed.
    pub points: Vec<Point>,
    /// Points left out because the policy is for another architecture than the machine.
    pub other_arch: usize,
}

impl Sweep {
    /// Reads and checks the experiment file at `path`.
    pub fn load(path: &Path) -> Result<Sweep, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Sweep::parse(&text, &path.display().to_string())
    }

    /// Returns the results file of the experiment file at `file`: its `results`,
    /// relative to the file's folder, or else the file's own name with `.jsonl`.
    pub fn results_path(&self, file: &Path) -> PathBuf {
        match &self.results {
            Some(r) => file.parent().unwrap_or(Path::new("")).join(r),
            None => file.with_extension("jsonl"),
        }
    }

    /// Returns every point of the grid, after checking each as `tlbkit run` would
    /// (a parameter a workload does not take, a value out of range), so that bad
    /// input fails before anything runs.
    pub fn grid(&self) -> Result<Grid, String> {
        self.check_size()?;
        let mut points = Vec::new();
        let mut other_arch = 0;
        for machine in &self.machines {
            let arch = preset::by_name(machine).map(|p| p.arch);
            for &cpus in &self.cpus {
                for policy in &self.policies {
                    let fits = registry::policy(policy).map(|p| p.arch) == arch;
                    for workload in &self.workloads {
                        for params in combinations(&self.axes[workload]) {
                            let sets: Vec<String> = params.iter().map(|(k, v)| format!("{k}={}", v.arg())).collect();
                            for (i, &seed) in self.seeds.iter().enumerate() {
                                if !fits {
                                    other_arch += 1;
                                    continue;
                                }
                                let spec = RunSpec {
                                    machine: machine.clone(),
                                    cpus,
                                    policy: policy.clone(),
                                    workload: workload.clone(),
                                    sets: sets.clone(),
                                    seed,
                                    strict: false,
                                };
                                if i == 0 {
                                    run::check(&spec).map_err(|e| {
                                        self.about_workload(
                                            workload,
                                            &format!("{e} (in the runs of {workload} on {machine}, cpus {cpus}, policy {policy})"),
                                        )
                                    })?;
                                }
                                points.push(Point { spec, params: params.clone() });
                            }
                        }
                    }
                }
            }
        }
        if points.is_empty() {
            return Err(format!(
                "{}: no policy of this sweep fits one of its machines (arm64 policies run on arm64 machines, x86 \
                 ones on x86 machines)",
                self.origin
            ));
        }
        Ok(Grid { points, other_arch })
    }
}

impl Sweep {
    /// Refuses a grid of more than [`MAX_RUNS`] runs, counting them without
    /// building them (a few lines of TOML can describe more runs than memory holds).
    fn check_size(&self) -> Result<(), String> {
        let combos = self.workloads.iter().try_fold(0usize, |sum, w| {
            let axes = self.axes.get(w).map(Vec::as_slice).unwrap_or_default();
            sum.checked_add(axes.iter().try_fold(1usize, |n, a| n.checked_mul(a.values.len()))?)
        });
        let runs = [self.machines.len(), self.cpus.len(), self.policies.len(), self.seeds.len()]
            .into_iter()
            .try_fold(combos.unwrap_or(usize::MAX), |n, k| n.checked_mul(k))
            .filter(|_| combos.is_some());
        match runs {
            Some(n) if n <= MAX_RUNS => Ok(()),
            _ => Err(format!(
                "{}: the grid has {} runs (machines x CPU counts x policies x parameter combinations x seeds); a \
                 sweep holds at most {MAX_RUNS}: split it into several files",
                self.origin,
                runs.map_or("more than 2^64".to_string(), |n| n.to_string())
            )),
        }
    }
}

/// Returns every combination of one value per axis, the last axis fastest (one
/// empty combination without axes).
fn combinations(axes: &[schema::Axis]) -> Vec<Vec<(String, ParamValue)>> {
    let mut out: Vec<Vec<(String, ParamValue)>> = vec![Vec::new()];
    for a in axes {
        out = out
            .into_iter()
            .flat_map(|c| {
                a.values.iter().map(move |v| {
                    let mut c = c.clone();
                    c.push((a.key.clone(), v.clone()));
                    c
                })
            })
            .collect();
    }
    out
}

/// Returns the results line of a point's run (without a newline).
pub fn line(p: &Point, out: &RunOutput) -> String {
    use serde_json::{json, Value};
    let mut fields: Vec<(String, Value)> = vec![
        ("machine".into(), json!(p.spec.machine)),
        ("cpus".into(), json!(p.spec.cpus)),
        ("policy".into(), json!(p.spec.policy)),
        ("workload".into(), json!(p.spec.workload)),
    ];
    fields.extend(p.params.iter().map(|(k, v)| (k.clone(), v.json())));
    fields.push(("seed".into(), json!(p.spec.seed)));
    fields.push(("command".into(), json!(p.key())));
    fields.push(("violations".into(), json!(out.violations_total)));
    fields.extend(out.result.iter().map(|(k, v)| (k.clone(), json!(v))));
    if let Ok(Value::Object(m)) = serde_json::to_value(&out.metrics) {
        fields.extend(m);
    }
    let body: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{}:{}", Value::String(k.clone()), serde_json::to_string(v).unwrap_or_default()))
        .collect();
    format!("{{{}}}", body.join(","))
}

/// What a sweep reports while it runs.
#[derive(Debug)]
pub enum Event<'a> {
    /// Before the first run: the grid's size, and what the results file holds.
    Start {
        /// Points in the grid.
        total: usize,
        /// Of those, points the results file already records.
        already: usize,
        /// Bytes of a torn last line dropped from the results file.
        torn_bytes: usize,
    },
    /// A run finished (recorded), or failed (not recorded).
    Ran {
        /// The run.
        spec: &'a RunSpec,
        /// Why it failed, if it did.
        error: Option<&'a str>,
    },
}

/// What a sweep did.
#[derive(Clone, Debug)]
pub struct Report {
    /// Points in the grid.
    pub total: usize,
    /// Points left out because the policy does not fit the machine's architecture.
    pub other_arch: usize,
    /// Points the results file recorded before this sweep.
    pub already: usize,
    /// Runs made and recorded now.
    pub ran: usize,
    /// Runs that failed (not recorded), with why.
    pub failed: Vec<String>,
    /// Bytes of a torn last line dropped from the results file.
    pub torn_bytes: usize,
    /// Lines of the results file that record no point of this grid.
    pub other_lines: usize,
    /// The commands of the grid's recorded runs that found violations.
    pub violating: Vec<String>,
    /// The results file.
    pub results: PathBuf,
}

/// Runs every point of `sweep` that the results file at `results` does not
/// record, on up to `jobs` host threads, appending a line per finished run, and
/// tells `on` what happens.
pub fn run(sweep: &Sweep, results: &Path, jobs: usize, mut on: impl FnMut(Event)) -> Result<Report, String> {
    let grid = sweep.grid()?;
    let mut file = ResultsFile::open(results)?;
    let pending: Vec<&Point> = grid.points.iter().filter(|p| !file.recorded.contains_key(&p.key())).collect();
    let already = grid.points.len() - pending.len();
    on(Event::Start { total: grid.points.len(), already, torn_bytes: file.torn_bytes });
    let specs: Vec<RunSpec> = pending.iter().map(|p| p.spec.clone()).collect();
    let (mut ran, mut failed, mut write_error) = (0, Vec::new(), None);
    batch::run_all(&specs, jobs, |i, out| {
        let spec = &specs[i];
        match out.map(|o| (file.append(&line(pending[i], &o)), o)) {
            Ok((Ok(()), o)) => {
                file.recorded.insert(pending[i].key(), o.violations_total);
                ran += 1;
                on(Event::Ran { spec, error: None });
                ControlFlow::Continue(())
            }
            // The results file cannot take more: stop, keeping what it has.
            Ok((Err(e), _)) => {
                on(Event::Ran { spec, error: Some(&e) });
                write_error = Some(e);
                ControlFlow::Break(())
            }
            Err(e) => {
                let e = format!("{e} (repeat with: {})", spec.command());
                on(Event::Ran { spec, error: Some(&e) });
                failed.push(e);
                ControlFlow::Continue(())
            }
        }
    });
    if let Some(e) = write_error {
        return Err(e);
    }
    let violating =
        grid.points.iter().map(Point::key).filter(|k| file.recorded.get(k).is_some_and(|&v| v > 0)).collect();
    let in_grid = grid.points.iter().filter(|p| file.recorded.contains_key(&p.key())).count();
    Ok(Report {
        total: grid.points.len(),
        other_arch: grid.other_arch,
        already,
        ran,
        failed,
        torn_bytes: file.torn_bytes,
        other_lines: file.recorded.len() - in_grid + file.duplicates,
        violating,
        results: results.to_path_buf(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tlbkit_sim::workload::WORKLOADS;

    const SMALL: &str = r#"
machines  = ["cortex-a72", "skylake"]
cpus      = [1, 2]
policies  = ["arm64-noasid", "arm64-freebsd-asid", "x86-linux-pcid"]
workloads = ["lat_ctx"]
seeds     = [1, 2]
[set]
rounds = 3
[set.lat_ctx]
procs = [2, 3]
"#;

    #[test]
    fn the_grid_pairs_policies_with_machines_of_their_architecture() {
        let g = Sweep::parse(SMALL, "s.toml").unwrap().grid().unwrap();
        // 2 machines x 2 CPU counts x 3 policies x 2 procs x 2 seeds = 48; the
        // arm64 policies on skylake and x86-linux-pcid on cortex-a72 are left out.
        assert_eq!((g.points.len(), g.other_arch), (24, 24));
        assert_eq!(
            g.points[0].key(),
            "tlbkit run --machine cortex-a72 --cpus 1 --policy arm64-noasid --workload lat_ctx --set procs=2 \
             --set rounds=3 --seed 1"
        );
        assert_eq!(g.points[1].spec.seed, 2);
        assert_eq!(g.points[2].spec.sets, ["procs=3", "rounds=3"]);
        let mut keys: Vec<String> = g.points.iter().map(Point::key).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), 24);
    }

    #[test]
    fn a_parameter_a_workload_does_not_take_is_refused_at_its_line() {
        // `rounds` is pingpong's too, and `procs` is under [set.lat_ctx] only; but
        // lat_ctx's `size_kb` under [set] is not pingpong's.
        let text = SMALL.replace("workloads = [\"lat_ctx\"]", "workloads = [\"lat_ctx\", \"pingpong\"]");
        assert!(Sweep::parse(&text, "s.toml").unwrap().grid().is_ok());
        let text = text.replace("rounds = 3", "rounds = 3\nsize_kb = 0");
        let e = Sweep::parse(&text, "s.toml").unwrap().grid().unwrap_err();
        assert!(e.starts_with("s.toml: line 9, set.size_kb: unknown parameter 'size_kb'"), "{e}");
        assert!(e.ends_with("(in the runs of pingpong on cortex-a72, cpus 1, policy arm64-noasid)"), "{e}");
        let text = SMALL.replace("procs = [2, 3]", "procs = [2, 0]");
        let e = Sweep::parse(&text, "s.toml").unwrap().grid().unwrap_err();
        assert!(e.starts_with("s.toml: line 10, set.lat_ctx.procs: --set procs=0 is out of range"), "{e}");
    }

    #[test]
    fn a_grid_of_more_runs_than_a_sweep_holds_is_refused_before_it_is_built() {
        // 2 machines x 2 CPU counts x 3 policies x 2 values of procs x 2 seeds.
        let g = Sweep::parse(SMALL, "s.toml").unwrap().grid().unwrap();
        assert_eq!(g.points.len() + g.other_arch, 48);
        // Five axes of ten values: 10^5 combinations, x 24 x 2 runs.
        let axes: String = ["procs", "size_kb", "rounds", "jitter", "spec_rate"]
            .iter()
            .map(|k| format!("{k} = [{}]\n", (1..=10).map(|v| v.to_string()).collect::<Vec<_>>().join(", ")))
            .collect();
        let text =
            SMALL.replace("[set]\nrounds = 3\n[set.lat_ctx]\nprocs = [2, 3]\n", &format!("[set.lat_ctx]\n{axes}"));
        let e = Sweep::parse(&text, "s.toml").unwrap().grid().unwrap_err();
        assert!(e.starts_with("s.toml: the grid has 2400000 runs"), "{e}");
        assert!(e.ends_with(&format!("a sweep holds at most {MAX_RUNS}: split it into several files")), "{e}");
        // So many axes that the count overflows.
        let axes: String = (0..70).map(|i| format!("k{i} = [1, 2]\n")).collect();
        let text = SMALL.replace("procs = [2, 3]\n", &axes);
        let e = Sweep::parse(&text, "s.toml").unwrap().grid().unwrap_err();
        assert!(e.starts_with("s.toml: the grid has more than 2^64 runs"), "{e}");
    }

    #[test]
    fn a_line_holds_the_coordinates_the_command_and_every_figure() {
        let g = Sweep::parse(SMALL, "s.toml").unwrap().grid().unwrap();
        let p = &g.points[0];
        let out = run::run(&p.spec).unwrap();
        let l = line(p, &out);
        let v: serde_json::Value = serde_json::from_str(&l).unwrap();
        for (k, want) in [
            ("machine", serde_json::json!("cortex-a72")),
            ("cpus", serde_json::json!(1)),
            ("policy", serde_json::json!("arm64-noasid")),
            ("workload", serde_json::json!("lat_ctx")),
            ("procs", serde_json::json!(2)),
            ("rounds", serde_json::json!(3)),
            ("seed", serde_json::json!(1)),
            ("command", serde_json::json!(p.key())),
            ("violations", serde_json::json!(0)),
        ] {
            assert_eq!(v[k], want, "{k}");
        }
        for name in run::metric_names(&p.spec).unwrap() {
            assert!(v[&name].is_number(), "{name}");
        }
        assert!(l.starts_with("{\"machine\":\"cortex-a72\",\"cpus\":1,\"policy\""), "{l}");
        assert!(!l.contains('\n'));
    }

    #[test]
    fn no_parameter_shares_a_name_with_a_coordinate_or_a_figure() {
        let mut taken = vec!["machine", "cpus", "policy", "workload", "seed", "command", "violations"];
        let spec = |w: &str| RunSpec {
            machine: "altra".into(),
            cpus: 1,
            policy: "arm64-linux".into(),
            workload: w.into(),
            sets: if w == "trace" {
                // The trace workload needs its file; the fixture's trace will do.
                vec!["contpte=on".into(), format!("file={}/../sim/tests/data/tiny.trace", env!("CARGO_MANIFEST_DIR"))]
            } else {
                vec!["contpte=on".into()]
            },
            seed: 1,
            strict: false,
        };
        let figures: Vec<String> = WORKLOADS.iter().flat_map(|w| run::metric_names(&spec(w.name)).unwrap()).collect();
        taken.extend(figures.iter().map(String::as_str));
        let params = WORKLOADS
            .iter()
            .flat_map(|w| w.params.iter().map(|p| p.key))
            .chain(run::machine_keys().iter().map(|(k, _)| *k));
        for p in params {
            assert!(!taken.contains(&p), "parameter {p} would overwrite a field of a results line");
        }
    }
}
