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
use crate::Error;
use results::ResultsFile;
use schema::{ParamValue, Sweep};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use tlbkit_sim::preset;
use tlbkit_sim::run::{self, RunOutput, RunSpec};

/// One point of the grid.
#[derive(Clone, Debug)]
pub struct GridPoint {
    /// The run.
    pub spec: RunSpec,
    /// Its parameter values, in key order (the same as `spec.sets`).
    pub params: Vec<(String, ParamValue)>,
}

impl GridPoint {
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
    pub points: Vec<GridPoint>,
    /// Points left out because the policy is for another architecture than the machine.
    pub other_arch: usize,
}

impl Sweep {
    /// Reads and checks the experiment file at `path`.
    pub fn load(path: &Path) -> Result<Sweep, Error> {
        let text = crate::error::read_file(path)?;
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
    pub fn grid(&self) -> Result<Grid, Error> {
        self.check_size()?;
        let mut points = Vec::new();
        let mut other_arch = 0;
        for machine in &self.machines {
            let arch = preset::resolve(machine).ok().map(|p| p.arch);
            for &cpus in &self.cpus {
                for policy in &self.policies {
                    let fits = tlbkit_registry::policy(policy).map(|p| p.arch) == arch;
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
                                    run::check(&spec).map_err(|e| self.about_run(&spec, e))?;
                                }
                                points.push(GridPoint { spec, params: params.clone() });
                            }
                        }
                    }
                }
            }
        }
        if points.is_empty() {
            return Err(Error::NoFittingPolicy { origin: self.origin.clone() });
        }
        Ok(Grid { points, other_arch })
    }
}

impl Sweep {
    /// Refuses a grid of more than [`MAX_RUNS`] runs, counting them without
    /// building them (a few lines of TOML can describe more runs than memory holds).
    fn check_size(&self) -> Result<(), Error> {
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
            _ => Err(Error::TooManyRuns { origin: self.origin.clone(), runs, most: MAX_RUNS }),
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
pub fn line(p: &GridPoint, out: &RunOutput) -> String {
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

/// A sweep in progress: the grid, its open (locked) results file, and what has
/// been recorded so far. [`run()`] drives one on the host's cores; another
/// executor (the Python binding's Ray backend) drives one with runs made
/// elsewhere, handing back each run's line, so that expansion, resumption and
/// writing are this one piece of code whoever makes the runs.
#[derive(Debug)]
pub struct Session {
    /// The grid's points, in grid order.
    pub grid: Grid,
    file: ResultsFile,
    /// The points the results file did not record when the session opened.
    pub pending: Vec<GridPoint>,
    already: usize,
    ran: usize,
    failed: Vec<String>,
}

impl Session {
    /// Expands and checks the grid (bad input fails here, before anything
    /// runs), opens and locks the results file, and finds the points to run.
    pub fn open(sweep: &Sweep, results: &Path) -> Result<Session, Error> {
        let grid = sweep.grid()?;
        let file = ResultsFile::open(results)?;
        let pending: Vec<GridPoint> =
            grid.points.iter().filter(|p| !file.recorded.contains_key(&p.key())).cloned().collect();
        let already = grid.points.len() - pending.len();
        Ok(Session { grid, file, pending, already, ran: 0, failed: Vec::new() })
    }

    /// Returns the event a sweep reports before its first run.
    pub fn start(&self) -> Event<'static> {
        Event::Start { total: self.grid.points.len(), already: self.already, torn_bytes: self.file.torn_bytes }
    }

    /// Records the outcome of the run of pending point `i`: its results line
    /// (appended at once, in one write), or why it failed (kept for the report,
    /// not written). `Err` only when the results file cannot take the line: the
    /// caller should stop, keeping what the file has.
    pub fn record(&mut self, i: usize, outcome: Result<String, String>) -> Result<(), Error> {
        let p = self.pending.get(i).ok_or(Error::NoPendingPoint { index: i })?;
        let line = match outcome {
            Ok(line) => line,
            Err(e) => {
                self.failed.push(format!("{e} (repeat with: {})", p.spec.command()));
                return Ok(());
            }
        };
        // A line made elsewhere must be this point's, whole, on one line.
        let (command, violations) = results::parse_line(line.as_bytes())
            .filter(|(c, _)| *c == p.key() && !line.contains('\n'))
            .ok_or_else(|| Error::NotItsLine { command: p.key() })?;
        self.file.append(&line)?;
        self.file.recorded.insert(command, violations);
        self.ran += 1;
        Ok(())
    }

    /// Returns why the last recorded run failed, if it did.
    pub fn last_failure(&self) -> Option<&str> {
        self.failed.last().map(String::as_str)
    }

    /// Runs the pending points on up to `jobs` host threads, recording each as
    /// it finishes and telling `on`; when `on` breaks, no further run starts
    /// (the runs in progress are still recorded).
    pub fn run_local(&mut self, jobs: usize, mut on: impl FnMut(Event) -> ControlFlow<()>) -> Result<(), Error> {
        let specs: Vec<RunSpec> = self.pending.iter().map(|p| p.spec.clone()).collect();
        let mut write_error = None;
        let mut stop = false;
        batch::run_all(&specs, jobs, |i, out| {
            let spec = &specs[i];
            let outcome = out.map(|o| line(&self.pending[i], &o)).map_err(|e| e.to_string());
            let failed = outcome.is_err();
            if let Err(e) = self.record(i, outcome) {
                // The results file cannot take more: stop, keeping what it has.
                let _ = on(Event::Ran { spec, error: Some(&e.to_string()) });
                write_error = Some(e);
                return ControlFlow::Break(());
            }
            let error = if failed { self.last_failure() } else { None };
            stop |= on(Event::Ran { spec, error }).is_break();
            if stop {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        write_error.map_or(Ok(()), Err)
    }

    /// Ends the sweep. Once every point of the grid is recorded, the results
    /// file is put in grid order (the grid's lines first, then any other lines
    /// as they were), through a temporary file and a rename, so that a sweep's
    /// file does not depend on the order runs finished in, on how many threads
    /// or machines made them, nor on how often it was interrupted: the same grid
    /// gives the same bytes.
    pub fn finish(self) -> Result<Report, Error> {
        let Session { grid, file, already, ran, failed, .. } = self;
        let violating: Vec<String> =
            grid.points.iter().map(GridPoint::key).filter(|k| file.recorded.get(k).is_some_and(|&v| v > 0)).collect();
        let in_grid = grid.points.iter().filter(|p| file.recorded.contains_key(&p.key())).count();
        let report = Report {
            total: grid.points.len(),
            other_arch: grid.other_arch,
            already,
            ran,
            failed,
            torn_bytes: file.torn_bytes,
            other_lines: file.recorded.len() - in_grid + file.duplicates,
            violating,
            results: file.path().to_path_buf(),
        };
        if in_grid == grid.points.len() {
            file.put_in_order(&grid.points.iter().map(GridPoint::key).collect::<Vec<_>>())?;
        }
        Ok(report)
    }
}

impl Report {
    /// The sweep's one-line summary, as `tlbkit sweep` prints it (`file` is
    /// the experiment file's name as shown).
    pub fn summary(&self, file: &str) -> String {
        let left_out = match self.other_arch {
            0 => String::new(),
            n => format!(" ({n} more left out: a policy for another architecture than the machine)"),
        };
        let mut summary = format!(
            "{file}: {} runs{left_out}; {} already in {}, {} run now",
            self.total,
            self.already,
            self.results.display(),
            self.ran
        );
        if self.other_lines > 0 {
            summary.push_str(&format!("; {} lines of the results file are not of this grid", self.other_lines));
        }
        summary
    }

    /// Returns the error of a sweep some of whose runs failed, if any did.
    pub fn failure(&self) -> Option<String> {
        self.failed.first().map(|first| {
            format!(
                "{} run(s) failed and were not recorded (running the sweep again retries them); the first: {first}",
                self.failed.len()
            )
        })
    }
}

/// Runs every point of `sweep` that the results file at `results` does not
/// record, on up to `jobs` host threads, appending a line per finished run, and
/// tells `on` what happens.
pub fn run(sweep: &Sweep, results: &Path, jobs: usize, mut on: impl FnMut(Event)) -> Result<Report, Error> {
    let mut session = Session::open(sweep, results)?;
    on(session.start());
    session.run_local(jobs, |ev| {
        on(ev);
        ControlFlow::Continue(())
    })?;
    session.finish()
}

impl GridPoint {
    /// Returns the point as one JSON text, for a run made in another process
    /// (a Ray task): [`GridPoint::decode`] gives it back, and [`run_encoded`] runs it.
    pub fn encode(&self) -> String {
        use serde_json::json;
        let params: Vec<serde_json::Value> = self.params.iter().map(|(k, v)| json!([k, v.json()])).collect();
        let s = &self.spec;
        json!({"machine": s.machine, "cpus": s.cpus, "policy": s.policy, "workload": s.workload,
               "params": params, "seed": s.seed})
        .to_string()
    }

    /// Returns the point [`GridPoint::encode`] wrote.
    pub fn decode(text: &str) -> Result<GridPoint, Error> {
        let bad = || Error::BadPoint { text: text.to_string() };
        let v: serde_json::Value = serde_json::from_str(text).map_err(|_| bad())?;
        let str_of = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_string).ok_or_else(bad);
        let mut params = Vec::new();
        for kv in v.get("params").and_then(|p| p.as_array()).ok_or_else(bad)? {
            let (k, x) = (kv.get(0).and_then(|k| k.as_str()).ok_or_else(bad)?, kv.get(1).ok_or_else(bad)?);
            let value = if let Some(i) = x.as_i64().filter(|_| x.is_i64() || x.is_u64()) {
                ParamValue::Int(i)
            } else if let Some(f) = x.as_f64() {
                ParamValue::Float(f)
            } else {
                ParamValue::Text(x.as_str().ok_or_else(bad)?.to_string())
            };
            params.push((k.to_string(), value));
        }
        let spec = RunSpec {
            machine: str_of("machine")?,
            cpus: v.get("cpus").and_then(|c| c.as_u64()).ok_or_else(bad)? as usize,
            policy: str_of("policy")?,
            workload: str_of("workload")?,
            sets: params.iter().map(|(k, v)| format!("{k}={}", v.arg())).collect(),
            seed: v.get("seed").and_then(|c| c.as_u64()).ok_or_else(bad)?,
            strict: false,
        };
        Ok(GridPoint { spec, params })
    }
}

/// Runs the point [`GridPoint::encode`] wrote and returns its results line: what a
/// worker of a distributed sweep does for one point.
pub fn run_encoded(point: &str) -> Result<String, Error> {
    let p = GridPoint::decode(point)?;
    let out = run::run(&p.spec)?;
    Ok(line(&p, &out))
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
        let mut keys: Vec<String> = g.points.iter().map(GridPoint::key).collect();
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
        assert!(matches!(&e, Error::GridRun { line: 9, field, .. } if field == "set.size_kb"), "{e:?}");
        assert_eq!(e.param(), Some(crate::error::Param::Set("size_kb".into())));
        let e = e.to_string();
        assert!(e.starts_with("s.toml: line 9, set.size_kb: unknown parameter 'size_kb'"), "{e}");
        assert!(e.ends_with("(in the runs of pingpong on cortex-a72, cpus 1, policy arm64-noasid)"), "{e}");
        let text = SMALL.replace("procs = [2, 3]", "procs = [2, 0]");
        let e = Sweep::parse(&text, "s.toml").unwrap().grid().unwrap_err().to_string();
        assert!(e.starts_with("s.toml: line 10, set.lat_ctx.procs: set procs=0 is out of range"), "{e}");
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
        assert!(matches!(e, Error::TooManyRuns { runs: Some(2_400_000), .. }), "{e:?}");
        let e = e.to_string();
        assert!(e.starts_with("s.toml: the grid has 2400000 runs"), "{e}");
        assert!(e.ends_with(&format!("a sweep holds at most {MAX_RUNS}: split it into several files")), "{e}");
        // So many axes that the count overflows.
        let axes: String = (0..70).map(|i| format!("k{i} = [1, 2]\n")).collect();
        let text = SMALL.replace("procs = [2, 3]\n", &axes);
        let e = Sweep::parse(&text, "s.toml").unwrap().grid().unwrap_err();
        assert!(matches!(e, Error::TooManyRuns { runs: None, .. }), "{e:?}");
        assert!(e.to_string().starts_with("s.toml: the grid has more than 2^64 runs"), "{e}");
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
    fn an_encoded_point_runs_elsewhere_to_the_same_line() {
        // A whole number, a fraction and the seed survive the trip.
        let text = SMALL.replace("rounds = 3", "rounds = 3\njitter = 0.02");
        let g = Sweep::parse(&text, "s.toml").unwrap().grid().unwrap();
        for p in &g.points[..3] {
            let back = GridPoint::decode(&p.encode()).unwrap();
            assert_eq!((back.key(), &back.params, &back.spec.sets), (p.key(), &p.params, &p.spec.sets));
            assert_eq!(run_encoded(&p.encode()).unwrap(), line(p, &run::run(&p.spec).unwrap()));
        }
        let e = GridPoint::decode("{\"machine\":1}").unwrap_err();
        assert!(matches!(&e, Error::BadPoint { text } if text == "{\"machine\":1}"), "{e:?}");
        assert!(e.to_string().starts_with("not an encoded sweep point"));
    }

    #[test]
    fn a_complete_sweep_puts_its_file_in_grid_order_whatever_order_runs_finished_in() {
        let dir = std::env::temp_dir().join(format!("tlbkit-sweep-order-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.jsonl");
        std::fs::write(&path, "{\"command\":\"another grid's run\",\"violations\":0}\n").unwrap();
        let s = Sweep::parse(&SMALL.replace("[\"cortex-a72\", \"skylake\"]", "[\"cortex-a72\"]"), "s.toml").unwrap();
        // Half the grid recorded backwards, after a line of another grid.
        let mut session = Session::open(&s, &path).unwrap();
        let n = session.pending.len();
        for i in (0..n / 2).rev() {
            let l = run_encoded(&session.pending[i].encode()).map_err(|e| e.to_string());
            session.record(i, l).unwrap();
        }
        let r = session.finish().unwrap();
        assert_eq!((r.ran, r.other_lines), (n / 2, 1));
        let unordered = std::fs::read_to_string(&path).unwrap();
        assert!(unordered.starts_with("{\"command\":\"another"), "an incomplete sweep is left as written");
        // The rest, then the file is the grid's lines in order and the other line last.
        let mut session = Session::open(&s, &path).unwrap();
        assert_eq!(session.pending.len(), n - n / 2);
        for i in (0..session.pending.len()).rev() {
            let l = run_encoded(&session.pending[i].encode()).map_err(|e| e.to_string());
            session.record(i, l).unwrap();
        }
        let keys: Vec<String> = session.grid.points.iter().map(GridPoint::key).collect();
        session.finish().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let commands: Vec<String> = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["command"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(commands[..n], keys[..]);
        assert_eq!(commands[n..], ["another grid's run"]);
        let mut sorted: Vec<&str> = text.lines().collect();
        let mut before: Vec<&str> = unordered.lines().collect();
        before.sort();
        sorted.sort();
        assert!(before.iter().all(|l| sorted.contains(l)), "a line was lost");
        // A record handed back for another point is refused, and nothing written.
        let mut session = Session::open(&s, &dir.join("other.jsonl")).unwrap();
        let wrong = run_encoded(&session.pending[1].encode()).map_err(|e| e.to_string());
        let e = session.record(0, wrong).unwrap_err();
        assert!(matches!(&e, Error::NotItsLine { command } if *command == session.pending[0].key()), "{e:?}");
        assert!(e.to_string().ends_with("is not its results line"));
        assert!(matches!(session.record(99, Err("boom".into())), Err(Error::NoPendingPoint { index: 99 })));
        session.record(0, Err("boom".into())).unwrap();
        assert!(session.finish().unwrap().failure().unwrap().contains("1 run(s) failed"));
        assert_eq!(std::fs::read_to_string(dir.join("other.jsonl")).unwrap(), "");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn no_parameter_shares_a_name_with_a_coordinate_or_a_figure() {
        let mut taken = vec!["machine", "cpus", "policy", "workload", "seed", "command", "violations"];
        let spec = |w: &str| RunSpec {
            machine: "altra".into(),
            cpus: 1,
            policy: "arm64-linux".into(),
            workload: w.into(),
            sets: if !tlbkit_sim::workload::text_params(w).is_empty() {
                // A workload with text parameters (`trace`) needs its file; the
                // fixture's trace will do.
                vec!["contpte=on".into(), format!("file={}/../sim/tests/data/tiny.trace", env!("CARGO_MANIFEST_DIR"))]
            } else {
                vec!["contpte=on".into()]
            },
            seed: 1,
            strict: false,
        };
        let figures: Vec<String> = WORKLOADS.iter().flat_map(|w| run::metric_names(&spec(w.name)).unwrap()).collect();
        taken.extend(figures.iter().map(String::as_str));
        let params =
            WORKLOADS.iter().flat_map(|w| w.params.iter().map(|p| p.key)).chain(run::machine_keys().map(|(k, _)| k));
        for p in params {
            assert!(!taken.contains(&p), "parameter {p} would overwrite a field of a results line");
        }
    }
}
