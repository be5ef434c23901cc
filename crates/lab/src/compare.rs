//! `tlbkit compare`: the same workload on the same machine under several
//! policies, each run with the seeds `first_seed..first_seed + runs`, and one
//! figure of those runs summarised and tested the way `ministat(1)` does
//! ([`crate::stats`]): every policy against the first.
//!
//! What is guaranteed: the output depends only on the request, never on the
//! number of host threads (samples are ordered by seed), and every figure of the
//! table is in the JSON and CSV forms at full precision. What is not: that the
//! runs differ. Randomness in a run comes from its seed alone (the tick's
//! phase, IPI and wake-up latencies, `tlbkit_sim::noise`; speculative TLB
//! fills, contpte's hardware races, and `--set jitter`), and a workload none of
//! it reaches gives every seed the same result. Such a policy's runs are one
//! sample repeated, not a set without spread: it is marked *deterministic:
//! one sample*, and a comparison with it gives the difference alone, with no
//! confidence interval and no verdict ([`Versus::Deterministic`]), where a t
//! test would call any difference proven.

use crate::batch;
use crate::stats::{self, Comparison, Summary, SYMBOLS};
use crate::Error;
use serde_json::json;
use std::ops::ControlFlow;
use tlbkit_sim::run::{self, RunOutput, RunSpec};

/// What to compare.
#[derive(Clone, Debug)]
pub struct CompareSpec {
    /// Machine preset.
    pub machine: String,
    /// CPUs.
    pub cpus: usize,
    /// Workload.
    pub workload: String,
    /// Policies, the first being the reference of every comparison.
    pub policies: Vec<String>,
    /// Runs per policy.
    pub runs: usize,
    /// The first seed; run `i` of each policy uses `first_seed + i`.
    pub first_seed: u64,
    /// The figure compared: a result of the workload or a metric; `None` for the
    /// workload's headline result.
    pub metric: Option<String>,
    /// `--set key=value` pairs for every run.
    pub sets: Vec<String>,
}

/// How a policy's figure compares with the first policy's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Versus {
    /// Both varied with the seed: Student's t at 95%, as ministat.
    Tested(Comparison),
    /// One of the two (or both) gave every seed the same value: that is one
    /// sample, from which no interval follows, so only the difference is given.
    Deterministic {
        /// This policy's mean minus the first's.
        difference: f64,
        /// The difference in percent of the first's mean.
        relative_pct: f64,
    },
}

impl Versus {
    /// Returns the JSON form, `vs_first`: the t test's figures and
    /// `"deterministic": false`, or the difference, `"deterministic": true`
    /// and `null` for the interval's figures and the verdict.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Versus::Tested(c) => {
                let mut o = c.to_json();
                o.as_object_mut().expect("a comparison is an object").insert("deterministic".into(), json!(false));
                o
            }
            Versus::Deterministic { difference, relative_pct } => json!({
                "deterministic": true,
                "proven": null,
                "difference": difference,
                "half_width": null,
                "relative_pct": relative_pct,
                "relative_half_width_pct": null,
                "pooled_stddev": null,
            }),
        }
    }
}

/// The words that stand for a figure every seed gave alike, in all three forms.
pub const DETERMINISTIC: &str = "deterministic: one sample";

/// One policy's samples and figures.
#[derive(Clone, Debug)]
pub struct PolicySamples {
    /// Policy.
    pub policy: String,
    /// The figure of each run, in seed order.
    pub values: Vec<f64>,
    /// Their summary.
    pub summary: Summary,
    /// Whether every seed gave the same value ([`DETERMINISTIC`]).
    pub deterministic: bool,
    /// The comparison with the first policy (`None` for the first).
    pub vs_first: Option<Versus>,
    /// Violations the runs found, summed.
    pub violations: u64,
}

/// A finished comparison.
#[derive(Clone, Debug)]
pub struct CompareOutput {
    /// Machine preset.
    pub machine: String,
    /// CPUs.
    pub cpus: usize,
    /// Workload.
    pub workload: String,
    /// `--set` pairs of every run.
    pub sets: Vec<String>,
    /// The figure compared.
    pub metric: String,
    /// The seeds every policy ran with.
    pub seeds: Vec<u64>,
    /// Per policy, in the order given.
    pub policies: Vec<PolicySamples>,
    /// The command that repeats the first run that found a violation, if any.
    pub first_violation: Option<String>,
}

/// The most policies one comparison takes: ministat's seven marks.
pub const MAX_POLICIES: usize = SYMBOLS.len();

/// The most runs per policy a comparison makes: far more than a t-test of
/// two means needs (ministat's users give tens), and few enough that the
/// runs' descriptions and results fit in memory (a billion asked for 240 GB
/// at once).
pub const MAX_RUNS: usize = 10_000;

impl CompareSpec {
    /// Returns the runs this comparison makes, policy by policy and seed by seed,
    /// and the figure it compares, after checking the whole request (so bad input
    /// fails before anything runs).
    pub fn plan(&self) -> Result<(Vec<RunSpec>, String), Error> {
        let got = self.policies.len();
        if got < 2 {
            return Err(Error::TooFewPolicies { got });
        }
        if got > MAX_POLICIES {
            return Err(Error::TooManyPolicies { got, max: MAX_POLICIES });
        }
        for (i, p) in self.policies.iter().enumerate() {
            if self.policies[..i].contains(p) {
                return Err(Error::PolicyTwice { policy: p.clone() });
            }
        }
        if self.runs < 2 {
            return Err(Error::TooFewRuns { runs: self.runs });
        }
        if self.runs > MAX_RUNS {
            return Err(Error::TooManyRunsEach { runs: self.runs, max: MAX_RUNS });
        }
        let last = self
            .first_seed
            .checked_add(self.runs as u64 - 1)
            .ok_or(Error::SeedOverflow { seed: self.first_seed, runs: self.runs })?;
        let mut specs = Vec::with_capacity(self.policies.len() * self.runs);
        let mut names = Vec::new();
        for policy in &self.policies {
            for seed in self.first_seed..=last {
                let spec = RunSpec {
                    machine: self.machine.clone(),
                    cpus: self.cpus,
                    policy: policy.clone(),
                    workload: self.workload.clone(),
                    sets: self.sets.clone(),
                    seed,
                    strict: false,
                };
                if seed == self.first_seed {
                    names = run::metric_names(&spec)?;
                }
                specs.push(spec);
            }
        }
        let metric = match &self.metric {
            None => names[0].clone(),
            Some(m) if names.contains(m) => m.clone(),
            Some(m) => {
                return Err(Error::UnknownMetric { name: m.clone(), workload: self.workload.clone(), valid: names })
            }
        };
        Ok((specs, metric))
    }

    /// Runs the comparison on up to `jobs` host threads. `progress` is handed the
    /// runs finished and the runs in all: once before the first run starts, then
    /// as each finishes (in the order they finish, which the output does not
    /// depend on).
    pub fn run(&self, jobs: usize, mut progress: impl FnMut(usize, usize)) -> Result<CompareOutput, Error> {
        let (specs, metric) = self.plan()?;
        let mut outs: Vec<Option<Result<RunOutput, Error>>> = (0..specs.len()).map(|_| None).collect();
        let mut finished = 0;
        progress(finished, specs.len());
        batch::run_all(&specs, jobs, |i, out| {
            let failed = out.is_err();
            outs[i] = Some(out);
            finished += 1;
            progress(finished, specs.len());
            if failed {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        // The first error in run order, so that the message does not depend on timing.
        let outs: Vec<RunOutput> = outs.into_iter().flatten().collect::<Result<_, _>>()?;
        if outs.len() != specs.len() {
            return Err(Error::Stopped);
        }
        let mut samples = Vec::new();
        let mut first_violation = None;
        for (policy, runs) in self.policies.iter().zip(outs.chunks(self.runs)) {
            let values = runs.iter().map(|o| o.metric_values()[&metric]).collect();
            let violations = runs.iter().map(|o| o.violations_total).sum();
            if first_violation.is_none() {
                first_violation = runs.iter().find(|o| o.violations_total > 0).map(|o| o.replay.clone());
            }
            samples.push((policy.clone(), values, violations));
        }
        let mut out = CompareOutput::from_samples(self, &metric, samples);
        out.first_violation = first_violation;
        Ok(out)
    }
}

/// Returns whether a set's samples are all one value.
pub fn is_deterministic(s: &Summary) -> bool {
    s.min == s.max
}

/// Compares `set` with the `reference` set: Student's t where both vary, the
/// difference alone where either is deterministic.
pub fn versus(set: &Summary, reference: &Summary) -> Versus {
    if is_deterministic(set) || is_deterministic(reference) {
        let difference = set.avg - reference.avg;
        Versus::Deterministic { difference, relative_pct: difference * 100.0 / reference.avg }
    } else {
        Versus::Tested(stats::compare(set, reference))
    }
}

/// Returns a set's line of the table, marked `symbol`: ministat's figures in
/// columns `n_width` wide, or the deterministic line where every sample is one
/// value.
pub fn summary_line(symbol: char, s: &Summary, n_width: usize) -> String {
    if is_deterministic(s) {
        deterministic_line(symbol, s)
    } else {
        stats::vitals_line(symbol, s, n_width)
    }
}

impl Versus {
    /// Returns the verdict's lines: ministat's, or the difference alone for a
    /// comparison with a deterministic set.
    pub fn text(&self) -> String {
        match self {
            Versus::Tested(c) => stats::verdict_text(c),
            Versus::Deterministic { difference, relative_pct } => deterministic_verdict(*difference, *relative_pct),
        }
    }
}

/// Returns the table's line for a deterministic set marked `symbol`, in place
/// of ministat's figures.
fn deterministic_line(symbol: char, s: &Summary) -> String {
    format!("{symbol} {DETERMINISTIC}, {} (every one of {} seeds)", stats::format_g(s.avg, 8), s.n)
}

/// Returns the verdict for a comparison with a deterministic set: the
/// difference, absolute and relative, and no interval.
fn deterministic_verdict(difference: f64, relative_pct: f64) -> String {
    let g = |x: f64| stats::format_g(x, 6);
    format!("Difference, {DETERMINISTIC} (no confidence interval)\n\t{}\n\t{}%\n", g(difference), g(relative_pct))
}

impl CompareOutput {
    /// Returns the comparison of given samples: per policy its name, its values in
    /// seed order and the violations its runs found. The first is the reference.
    ///
    /// # Panics
    ///
    /// If a policy has no values, or there are more than [`MAX_POLICIES`].
    pub fn from_samples(spec: &CompareSpec, metric: &str, samples: Vec<(String, Vec<f64>, u64)>) -> CompareOutput {
        assert!(samples.len() <= MAX_POLICIES, "at most {MAX_POLICIES} policies");
        let summaries: Vec<Summary> =
            samples.iter().map(|(p, v, _)| Summary::of(v).unwrap_or_else(|| panic!("no values for {p}"))).collect();
        let policies = samples
            .into_iter()
            .zip(&summaries)
            .enumerate()
            .map(|(i, ((policy, values, violations), s))| PolicySamples {
                policy,
                values,
                summary: *s,
                deterministic: is_deterministic(s),
                vs_first: (i > 0).then(|| versus(s, &summaries[0])),
                violations,
            })
            .collect();
        CompareOutput {
            machine: spec.machine.clone(),
            cpus: spec.cpus,
            workload: spec.workload.clone(),
            sets: spec.sets.clone(),
            metric: metric.to_string(),
            seeds: (0..spec.runs as u64).map(|i| spec.first_seed + i).collect(),
            policies,
            first_violation: None,
        }
    }

    /// Returns the violations all runs found.
    pub fn violations_total(&self) -> u64 {
        self.policies.iter().map(|p| p.violations).sum()
    }

    /// Returns the table: a line saying what was run, then ministat's legend,
    /// figures and verdicts (its output without the plot, `ministat -A`).
    pub fn table(&self) -> String {
        let sets: String = self.sets.iter().map(|s| format!(" --set {s}")).collect();
        let seeds = match (self.seeds.first(), self.seeds.last()) {
            (Some(a), Some(b)) => format!("seeds {a} to {b}"),
            _ => "no seeds".into(),
        };
        let mut out = format!(
            "{}: {}{sets} on {} ({} CPU{}), {} runs per policy ({seeds})\n",
            self.metric,
            self.workload,
            self.machine,
            self.cpus,
            if self.cpus == 1 { "" } else { "s" },
            self.seeds.len()
        );
        for (p, sym) in self.policies.iter().zip(SYMBOLS) {
            out.push_str(&format!("{sym} {}\n", p.policy));
        }
        let w = stats::n_width(self.policies.iter().map(|p| p.summary.n));
        out.push_str(&stats::vitals_header(w));
        out.push('\n');
        for (p, sym) in self.policies.iter().zip(SYMBOLS) {
            out.push_str(&summary_line(sym, &p.summary, w));
            out.push('\n');
            if let Some(v) = &p.vs_first {
                out.push_str(&v.text());
            }
        }
        out
    }

    /// Returns the JSON form: the request, and per policy its values and figures.
    pub fn json(&self) -> serde_json::Value {
        let policies: Vec<serde_json::Value> = self
            .policies
            .iter()
            .map(|p| {
                let mut o = p.summary.to_json();
                let m = o.as_object_mut().expect("a summary is an object");
                m.insert("policy".into(), json!(p.policy));
                m.insert("values".into(), json!(p.values));
                m.insert("deterministic".into(), json!(p.deterministic));
                m.insert("vs_first".into(), p.vs_first.map_or(serde_json::Value::Null, |c| c.to_json()));
                m.insert("violations".into(), json!(p.violations));
                o
            })
            .collect();
        json!({
            "machine": self.machine,
            "cpus": self.cpus,
            "workload": self.workload,
            "sets": self.sets,
            "metric": self.metric,
            "seeds": self.seeds,
            "confidence": stats::CONFIDENCE,
            "policies": policies,
            "violations_total": self.violations_total(),
        })
    }

    /// Returns the CSV form: a header and one row per policy with the figures of
    /// the JSON form (the comparison's columns empty for the first policy, and
    /// those of the interval and the verdict empty where the JSON has `null`;
    /// the values in seed order separated by spaces).
    pub fn csv(&self) -> String {
        let mut out = String::from(
            "machine,cpus,workload,metric,policy,n,min,max,median,avg,stddev,deterministic,confidence,proven,\
             difference,half_width,relative_pct,relative_half_width_pct,pooled_stddev,violations,values\n",
        );
        for p in &self.policies {
            let s = &p.summary;
            let cmp = match &p.vs_first {
                Some(Versus::Tested(c)) => format!(
                    "{},{},{},{},{},{},{}",
                    c.confidence,
                    c.proven,
                    c.difference,
                    c.half_width,
                    c.relative_pct,
                    c.relative_half_width_pct,
                    c.pooled_stddev
                ),
                Some(Versus::Deterministic { difference, relative_pct }) => {
                    format!(",,{difference},,{relative_pct},,")
                }
                None => ",,,,,,".into(),
            };
            let values: Vec<String> = p.values.iter().map(|v| v.to_string()).collect();
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{},{},{},{cmp},{},{}\n",
                self.machine,
                self.cpus,
                self.workload,
                self.metric,
                p.policy,
                s.n,
                s.min,
                s.max,
                s.median,
                s.avg,
                s.stddev(),
                p.deterministic,
                p.violations,
                values.join(" ")
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::tests::{PROVEN_TABLE, PROVEN_X, PROVEN_Y};

    fn spec(policies: &[&str]) -> CompareSpec {
        CompareSpec {
            machine: "cortex-a72".into(),
            cpus: 2,
            workload: "lat_ctx".into(),
            policies: policies.iter().map(|p| p.to_string()).collect(),
            runs: 10,
            first_seed: 1,
            metric: None,
            sets: vec!["procs=6".into()],
        }
    }

    #[test]
    fn fixed_samples_give_ministats_table_and_the_same_figures_in_json_and_csv() {
        // The samples of the stats tests' proven difference, as two policies' runs.
        let (x, y) = (PROVEN_X.to_vec(), PROVEN_Y.to_vec());
        let s = spec(&["arm64-noasid", "arm64-freebsd-asid"]);
        let out = CompareOutput::from_samples(
            &s,
            "us_per_switch",
            vec![("arm64-noasid".into(), x.clone(), 0), ("arm64-freebsd-asid".into(), y, 0)],
        );
        // Below the first line, ministat -A's output for these samples, names aside.
        let expected = format!(
            "us_per_switch: lat_ctx --set procs=6 on cortex-a72 (2 CPUs), 10 runs per policy (seeds 1 to 10)\n\
             x arm64-noasid\n+ arm64-freebsd-asid\n{PROVEN_TABLE}"
        );
        assert_eq!(out.table(), expected);
        let j = out.json();
        let second = &j["policies"][1];
        assert_eq!(j["seeds"], json!([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]));
        assert_eq!(j["policies"][0]["values"], json!(x));
        assert!(j["policies"][0]["vs_first"].is_null());
        assert_eq!(second["vs_first"]["proven"], json!(true));
        let csv = out.csv();
        let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
        assert_eq!(rows.len(), 3);
        for row in &rows {
            assert_eq!(row.len(), rows[0].len());
        }
        // Every figure of the JSON is the CSV's, at full precision.
        for (i, p) in j["policies"].as_array().unwrap().iter().enumerate() {
            let row = &rows[i + 1];
            let col = |name: &str| row[rows[0].iter().position(|h| *h == name).unwrap()];
            for k in ["min", "max", "median", "avg", "stddev"] {
                assert_eq!(col(k).parse::<f64>().unwrap(), p[k].as_f64().unwrap(), "{k}");
            }
            for k in ["difference", "half_width", "relative_pct", "relative_half_width_pct", "pooled_stddev"] {
                let want = p["vs_first"][k].as_f64().map(|v| v.to_string()).unwrap_or_default();
                assert_eq!(col(k), want, "{k}");
            }
            let values: Vec<f64> = col("values").split(' ').map(|v| v.parse().unwrap()).collect();
            assert_eq!(json!(values), p["values"]);
        }
    }

    #[test]
    fn identical_samples_are_one_sample_with_no_interval_in_every_form() {
        let s = spec(&["arm64-noasid", "arm64-freebsd-asid", "arm64-linux"]);
        let varying = vec![2.87, 2.86, 2.89, 2.85, 2.88, 2.87, 2.90, 2.86, 2.84, 2.88];
        let out = CompareOutput::from_samples(
            &s,
            "us_per_switch",
            vec![
                ("arm64-noasid".into(), vec![3.44; 10], 0),
                ("arm64-freebsd-asid".into(), vec![2.87; 10], 0),
                ("arm64-linux".into(), varying, 0),
            ],
        );
        // ministat (and this command before) printed a Stddev of 0 for the first
        // two and called their difference proven, -0.57 +/- 0.
        let expected = "\
us_per_switch: lat_ctx --set procs=6 on cortex-a72 (2 CPUs), 10 runs per policy (seeds 1 to 10)
x arm64-noasid
+ arm64-freebsd-asid
* arm64-linux
    N           Min           Max        Median           Avg        Stddev
x deterministic: one sample, 3.44 (every one of 10 seeds)
+ deterministic: one sample, 2.87 (every one of 10 seeds)
Difference, deterministic: one sample (no confidence interval)
\t-0.57
\t-16.5698%
*  10          2.84           2.9          2.87          2.87   0.018257419
Difference, deterministic: one sample (no confidence interval)
\t-0.57
\t-16.5698%
";
        assert_eq!(out.table(), expected);
        assert!(!out.table().contains("+/-"));
        let j = out.json();
        let deterministic: Vec<bool> =
            j["policies"].as_array().unwrap().iter().map(|p| p["deterministic"].as_bool().unwrap()).collect();
        assert_eq!(deterministic, [true, true, false]);
        for p in &j["policies"].as_array().unwrap()[1..] {
            let v = &p["vs_first"];
            assert_eq!(v["deterministic"], json!(true));
            for k in ["proven", "half_width", "relative_half_width_pct", "pooled_stddev"] {
                assert!(v[k].is_null(), "{k}");
            }
            assert!((v["difference"].as_f64().unwrap() + 0.57).abs() < 1e-12);
        }
        let csv = out.csv();
        let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
        let col = |r: usize, name: &str| rows[r][rows[0].iter().position(|h| *h == name).unwrap()];
        assert_eq!(
            [col(1, "deterministic"), col(2, "deterministic"), col(3, "deterministic")],
            ["true", "true", "false"]
        );
        for k in ["confidence", "proven", "half_width", "relative_half_width_pct", "pooled_stddev"] {
            assert_eq!(col(2, k), "", "{k}");
        }
        assert_eq!(
            col(2, "difference").parse::<f64>().unwrap(),
            j["policies"][1]["vs_first"]["difference"].as_f64().unwrap()
        );
        // Two varying sets are still tested, and say so.
        let x = PROVEN_X.to_vec();
        let tested = CompareOutput::from_samples(
            &spec(&["arm64-noasid", "arm64-linux"]),
            "us_per_switch",
            vec![("arm64-noasid".into(), x, 0), ("arm64-linux".into(), vec![2.87, 2.86, 2.89, 2.85, 2.88], 0)],
        );
        assert_eq!(tested.json()["policies"][1]["vs_first"]["deterministic"], json!(false));
        assert!(tested.table().contains("Difference at 95.0% confidence"));
    }

    #[test]
    fn bad_requests_are_refused_before_running() {
        let err = |s: CompareSpec| s.plan().unwrap_err();
        assert!(matches!(err(spec(&["arm64-noasid"])), Error::TooFewPolicies { got: 1 }));
        let e = err(spec(&["arm64-noasid", "arm64-noasid"]));
        assert!(matches!(&e, Error::PolicyTwice { policy } if policy == "arm64-noasid"), "{e:?}");
        let run_error = |s: CompareSpec| match err(s) {
            Error::Sim(e) => e.to_string(),
            e => panic!("not a run's error: {e:?}"),
        };
        assert!(run_error(spec(&["arm64-noasid", "x86-linux-pcid"])).contains("policies that fit"));
        assert!(run_error(spec(&["arm64-noasid", "nope"])).contains("unknown policy 'nope'"));
        let mut one = spec(&["arm64-noasid", "arm64-linux"]);
        one.runs = 1;
        let e = err(one);
        assert!(matches!(e, Error::TooFewRuns { runs: 1 }), "{e:?}");
        assert!(e.to_string().starts_with("runs 1 is too few: give at least 2 runs"), "{e}");
        let mut last = spec(&["arm64-noasid", "arm64-linux"]);
        last.first_seed = u64::MAX;
        assert!(matches!(err(last), Error::SeedOverflow { seed: u64::MAX, runs: 10 }));
        let mut bad = spec(&["arm64-noasid", "arm64-linux"]);
        bad.metric = Some("speed".into());
        let Error::UnknownMetric { name, workload, valid } = err(bad) else { panic!("not an unknown metric") };
        assert_eq!((name.as_str(), workload.as_str()), ("speed", "lat_ctx"));
        assert_eq!(valid[..2], ["us_per_switch", "ring_us_per_hop"]);
        assert!(valid.iter().any(|m| m == "tlb_misses") && !valid.iter().any(|m| m == "contpte_fills"), "{valid:?}");
    }

    #[test]
    fn the_default_metric_is_the_workloads_headline_result() {
        let (specs, metric) = spec(&["arm64-noasid", "arm64-linux"]).plan().unwrap();
        assert_eq!(metric, "us_per_switch");
        let seeds: Vec<u64> = specs.iter().map(|s| s.seed).collect();
        assert_eq!(seeds, [(1..=10).collect::<Vec<u64>>(), (1..=10).collect()].concat());
    }

    #[test]
    fn every_metric_name_is_a_figure_of_a_run() {
        let mut s = spec(&["arm64-linux", "arm64-linux-skipbcast"]);
        s.sets = vec!["procs=3".into(), "rounds=3".into(), "contpte=on".into()];
        let (specs, _) = s.plan().unwrap();
        let names = run::metric_names(&specs[0]).unwrap();
        let figures = run::run(&specs[0]).unwrap().metric_values();
        assert_eq!(names.len(), figures.len());
        for n in &names {
            assert!(figures.contains_key(n), "{n}");
        }
    }
}
