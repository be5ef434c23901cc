//! `tlbkit validate`: the simulator against measurements published by the
//! mechanisms' authors and the kernel's test robots.
//!
//! The **corpus** is data, one TOML file per source or mechanism
//! (`crates/lab/corpus/`, built into the binary; `--corpus DIR` reads another
//! folder). An entry holds the facts of one published result: what was
//! measured, on which machine, the figure exactly as published (`published`,
//! verbatim, and `[numbers]`, the same numbers as data), its source, and how
//! tlbkit expresses it: the runs (`[runs.NAME]`: machine, CPUs, policy,
//! workload, `--set` values; `{x}` is a curve's point) and the figures
//! (`[[figure]]`), each a published and a simulated expression ([`expr`]) and
//! the rule that judges them ([`judge`]). Where the mapping is a stand-in (SMT
//! threads run as cores, another benchmark standing for the published one, an
//! unnamed machine), `stand_in` says so and its rows are counted apart.
//!
//! A validation is three steps, so that the front end owns the running (its
//! cores, its cache, its progress): [`plan`] lists the runs the selected
//! entries need (each a [`RunSpec`] once per seed, deduplicated by command);
//! [`judge_all`] evaluates every figure on their metrics; [`Report`] prints the
//! rows and the summary against the accuracy targets; [`charts`] draws each
//! curve, published against simulated.
//!
//! A simulated figure is the mean over seeds 1 to N ([`DEFAULT_SEEDS`]), or
//! to the run's own count where it asks for more ([`RunTemplate::seeds`]), of
//! each run's metric: a seed draws the tick's phase and the IPI and wake-up
//! latencies, and one draw can move a workload that turns on the order of
//! wake-ups by several percent, as a single run on hardware can; a published
//! figure is itself a mean of runs. Where the seeds' runs differ, a row also
//! gives the figure each seed's runs give alone, lowest and highest
//! ([`Row::seeds`]), and says when they disagree on its direction: such a
//! verdict is not a finding.

pub mod charts;
pub mod expr;
pub mod judge;
mod report;
pub mod vary;

pub use report::{Report, Summary, Tally};

use expr::{Expr, Scope, Value};
use judge::Verdict;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use tlbkit_sim::run::RunSpec;

/// Seeds per run by default (`tlbkit validate --seeds`).
pub const DEFAULT_SEEDS: u64 = 3;

/// The most seeds a corpus run may ask for ([`RunTemplate::seeds`]).
pub const MAX_RUN_SEEDS: u64 = 100;

/// The corpus shipped with tlbkit: `(file name, contents)` of every file in
/// `crates/lab/corpus/`, listed by the build script.
pub const SHIPPED: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/corpus_files.rs"));

/// Which part of the corpus an entry belongs to: the two are summarised apart.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Part {
    /// The mechanisms modelled after the origins, measured by their authors.
    AfterOrigins,
    /// The shootdown history before the origins, and the baselines around it.
    History,
}

impl Part {
    /// Its heading in the table.
    pub fn title(self) -> &'static str {
        match self {
            Part::AfterOrigins => "The mechanisms after the origins",
            Part::History => "The history before the origins (H01-H25)",
        }
    }
}

/// One published result and how tlbkit runs it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// Identifier (`H05`, `invlpgb-2`): what `--only` selects.
    pub id: String,
    /// What the entry is, in one line.
    pub title: String,
    /// The part of the corpus.
    pub part: Part,
    /// The benchmark and its parameters, as the source gives them.
    pub benchmark: String,
    /// The machine the source measured on, as it names it.
    pub machine: String,
    /// The published figures, verbatim.
    pub published: String,
    /// Where they were published.
    pub source: String,
    /// How tlbkit expresses the measurement, and where that differs.
    #[serde(default)]
    pub mapping: Option<String>,
    /// Why the mapping is a stand-in, if it is: its rows are counted apart.
    #[serde(default)]
    pub stand_in: Option<String>,
    /// Why the figure was not blind to the model's makers, if it was not.
    #[serde(default)]
    pub disclosed: Option<String>,
    /// Why the entry is not judged at all (an origin's own figures).
    #[serde(default)]
    pub excluded: Option<String>,
    /// The parts of the result tlbkit cannot express, each with what is missing.
    #[serde(default)]
    pub not_expressible: Vec<String>,
    /// The published numbers by name: a number, a list (repeated runs) or a
    /// table by point (`{ "1" = 315000, "2" = 423000 }`).
    #[serde(default)]
    pub numbers: BTreeMap<String, toml::Value>,
    /// The runs, by name.
    #[serde(default)]
    pub runs: BTreeMap<String, RunTemplate>,
    /// The figures judged.
    #[serde(default, rename = "figure")]
    pub figures: Vec<Figure>,
    /// The file the entry came from.
    #[serde(skip)]
    pub file: String,
}

/// A run of the simulator, `{x}` standing for a curve's point.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunTemplate {
    /// Machine preset.
    pub machine: String,
    /// CPUs: a number, or `"{x}"`.
    pub cpus: toml::Value,
    /// Policy.
    pub policy: String,
    /// Workload.
    pub workload: String,
    /// `--set` values.
    #[serde(default)]
    pub sets: Vec<String>,
    /// The fewest seeds this run's metrics are the mean of (`--seeds` when it
    /// asks for more): a figure that turns on the order of wake-ups
    /// (hackbench's) comes from a distribution over seeds, whose spread its
    /// row shows.
    #[serde(default)]
    pub seeds: Option<u64>,
}

impl RunTemplate {
    /// Returns how many seeds this run takes when every run takes at least
    /// `seeds`.
    pub fn seed_count(&self, seeds: u64) -> u64 {
        self.seeds.map_or(seeds, |own| own.max(seeds))
    }
}

/// How a figure is judged.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A ratio (after / before), at each point if there are points.
    Ratio,
    /// A ratio against a published upper bound.
    AtMost,
    /// An absolute figure: the factor sim / ref.
    Abs,
    /// The trend of each step of a curve of ratios.
    Trend,
    /// The knee of a curve.
    Knee,
    /// The peak of a curve.
    Peak,
    /// The first point of a curve below 1.
    Crossover,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Ratio | Kind::AtMost => "ratio",
            Kind::Abs => "abs",
            Kind::Trend | Kind::Knee | Kind::Peak | Kind::Crossover => "shape",
        }
    }

    fn is_curve(self) -> bool {
        matches!(self, Kind::Trend | Kind::Knee | Kind::Peak | Kind::Crossover)
    }
}

/// One figure of an entry.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Figure {
    /// How it is judged.
    pub kind: Kind,
    /// Its name in the table (`513/512 per_thread_ops @128`, `(A)`).
    #[serde(default)]
    pub label: String,
    /// The points of a curve (threads, pages); a ratio or absolute figure
    /// with points is one row per point.
    #[serde(default)]
    pub x: Vec<f64>,
    /// The simulated value.
    pub sim: String,
    /// The published value.
    #[serde(rename = "ref")]
    pub reference: String,
    /// Why this figure alone is a stand-in.
    #[serde(default)]
    pub stand_in: Option<String>,
    /// Whether the figure counts toward the summary: `false` prints it as
    /// information only (a second mapping of a figure already judged).
    #[serde(default = "yes")]
    pub counted: bool,
    /// A remark printed under the row.
    #[serde(default)]
    pub note: Option<String>,
}

fn yes() -> bool {
    true
}

/// The corpus: every entry, checked.
#[derive(Clone, Debug)]
pub struct Corpus {
    /// The entries, ordered by part and file.
    pub entries: Vec<Entry>,
}

impl Corpus {
    /// Returns the corpus shipped with tlbkit.
    pub fn shipped() -> Result<Corpus, String> {
        Corpus::from_files(SHIPPED.iter().map(|(n, t)| (n.to_string(), t.to_string())))
    }

    /// Reads every `.toml` file of `dir`.
    pub fn from_dir(dir: &Path) -> Result<Corpus, String> {
        let read =
            std::fs::read_dir(dir).map_err(|e| format!("cannot read the corpus folder {}: {e}", dir.display()))?;
        let mut files = Vec::new();
        for f in read {
            let path = f.map_err(|e| format!("cannot read the corpus folder {}: {e}", dir.display()))?.path();
            if path.extension().is_some_and(|e| e == "toml") {
                let text =
                    std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                files.push((path.display().to_string(), text));
            }
        }
        if files.is_empty() {
            return Err(format!("no .toml file in {}: a corpus is one TOML file per source", dir.display()));
        }
        files.sort();
        Corpus::from_files(files)
    }

    /// Parses and checks files `(name, text)`: every name an expression reads
    /// must be defined, every curve must have points, ids must be unique.
    pub fn from_files(files: impl IntoIterator<Item = (String, String)>) -> Result<Corpus, String> {
        let mut entries = Vec::new();
        for (name, text) in files {
            let mut e: Entry = toml::from_str(&text).map_err(|err| format!("{name}: {err}"))?;
            e.file = name.clone();
            check_entry(&e).map_err(|err| format!("{name}: entry {}: {err}", e.id))?;
            entries.push(e);
        }
        let mut seen = HashMap::new();
        for e in &entries {
            if let Some(other) = seen.insert(e.id.clone(), e.file.clone()) {
                return Err(format!("entry id '{}' is in both {other} and {}; ids must be unique", e.id, e.file));
            }
        }
        entries.sort_by(|a, b| (a.part, &a.file).cmp(&(b.part, &b.file)));
        Ok(Corpus { entries })
    }

    /// The entries `only` selects (an id, or every entry): an unknown id is an
    /// error listing the valid ones.
    pub fn select(&self, only: Option<&str>) -> Result<Vec<&Entry>, String> {
        let Some(id) = only else { return Ok(self.entries.iter().collect()) };
        let found: Vec<&Entry> = self.entries.iter().filter(|e| e.id.eq_ignore_ascii_case(id)).collect();
        if found.is_empty() {
            let ids: Vec<&str> = self.entries.iter().map(|e| e.id.as_str()).collect();
            return Err(format!("no corpus entry '{id}'; the entries are: {}", ids.join(", ")));
        }
        Ok(found)
    }
}

/// Checks what can be checked before any run.
fn check_entry(e: &Entry) -> Result<(), String> {
    for (name, v) in &e.numbers {
        published_value(name, v, None).or_else(|err| match v {
            // A table by point is checked where it is read.
            toml::Value::Table(_) => Ok(Value::Num(0.0)),
            _ => Err(err),
        })?;
    }
    for (name, r) in &e.runs {
        match &r.cpus {
            toml::Value::Integer(n) if *n > 0 => {}
            toml::Value::String(s) if s.contains("{x}") => {}
            other => return Err(format!("run '{name}': cpus must be a positive number or \"{{x}}\", not {other}")),
        }
        if let Some(n) = r.seeds.filter(|n| !(1..=MAX_RUN_SEEDS).contains(n)) {
            return Err(format!("run '{name}': seeds = {n}; give 1 to {MAX_RUN_SEEDS} (or leave it out for --seeds)"));
        }
        for (field, v) in [("machine", &r.machine), ("policy", &r.policy), ("workload", &r.workload)] {
            if v.contains("{x}") {
                return Err(format!("run '{name}': {field} '{v}' holds {{x}}, a point only cpus and sets may use"));
            }
        }
    }
    if e.excluded.is_none() && e.figures.is_empty() && e.not_expressible.is_empty() {
        return Err("no figure, and no reason it has none (not_expressible or excluded)".into());
    }
    for f in &e.figures {
        let what = if f.label.is_empty() { format!("{:?}", f.kind) } else { f.label.clone() };
        let parse = |text: &str, side: &str| Expr::parse(text).map_err(|err| format!("figure '{what}', {side}: {err}"));
        let (sim, reference) = (parse(&f.sim, "sim")?, parse(&f.reference, "ref")?);
        if f.kind.is_curve() && f.x.len() < 2 {
            return Err(format!("figure '{what}': a {:?} needs at least two points in x", f.kind));
        }
        for ex in [&sim, &reference] {
            for (run, _) in ex.metrics() {
                let Some(t) = e.runs.get(run) else {
                    let names: Vec<&str> = e.runs.keys().map(String::as_str).collect();
                    return Err(format!(
                        "figure '{what}' reads run '{run}', which is not defined (runs: {})",
                        names.join(", ")
                    ));
                };
                if f.x.is_empty() && t.uses_x() {
                    return Err(format!(
                        "figure '{what}' reads run '{run}', whose cpus or sets use {{x}}, but has no points: \
                         give the figure x = [...] or the run fixed values"
                    ));
                }
            }
            for n in ex.published_names() {
                if !e.numbers.contains_key(n) {
                    return Err(format!("figure '{what}' reads '{n}', which is not in [numbers]"));
                }
            }
            if ex.uses_x() && f.x.is_empty() {
                return Err(format!("figure '{what}' reads x but has no points"));
            }
        }
    }
    Ok(())
}

/// A published value at point `x`.
fn published_value(name: &str, v: &toml::Value, x: Option<f64>) -> Result<Value, String> {
    let num = |v: &toml::Value| match v {
        toml::Value::Integer(i) => Some(*i as f64),
        toml::Value::Float(f) => Some(*f),
        _ => None,
    };
    match v {
        toml::Value::Array(a) => a
            .iter()
            .map(|v| num(v).ok_or_else(|| format!("'{name}' holds {v}, not a number")))
            .collect::<Result<_, _>>()
            .map(Value::List),
        toml::Value::Table(t) => {
            let Some(x) = x else { return Err(format!("'{name}' is a table by point, read where there is no point")) };
            let key = judge::num(x);
            let v = t.get(&key).ok_or_else(|| format!("'{name}' has no value at x={key}"))?;
            num(v).map(Value::Num).ok_or_else(|| format!("'{name}' at x={key} is {v}, not a number"))
        }
        other => num(other).map(Value::Num).ok_or_else(|| format!("'{name}' is {other}, not a number")),
    }
}

impl RunTemplate {
    /// Whether its CPUs or `--set` values hold the point `{x}`.
    fn uses_x(&self) -> bool {
        matches!(&self.cpus, toml::Value::String(c) if c.contains("{x}")) || self.sets.iter().any(|s| s.contains("{x}"))
    }

    /// The run at point `x` with `seed`.
    pub fn at(&self, x: Option<f64>, seed: u64) -> Result<RunSpec, String> {
        let fill = |s: &str| match x {
            Some(x) => s.replace("{x}", &judge::num(x)),
            None => s.to_string(),
        };
        let cpus = match &self.cpus {
            toml::Value::Integer(n) => *n as usize,
            toml::Value::String(s) => {
                let s = fill(s);
                s.parse().map_err(|_| format!("cpus '{s}' is not a number of CPUs"))?
            }
            other => return Err(format!("cpus {other} is not a number of CPUs")),
        };
        Ok(RunSpec {
            machine: self.machine.clone(),
            cpus,
            policy: self.policy.clone(),
            workload: self.workload.clone(),
            sets: self.sets.iter().map(|s| fill(s)).collect(),
            seed,
            strict: false,
        })
    }
}

/// The points a figure is evaluated at: its `x`, or one point without one.
fn points(f: &Figure) -> Vec<Option<f64>> {
    if f.x.is_empty() {
        vec![None]
    } else {
        f.x.iter().map(|x| Some(*x)).collect()
    }
}

/// Returns the runs `entries` need with seeds 1 to `seeds`, each once, in a
/// stable order.
pub fn plan(entries: &[&Entry], seeds: u64) -> Result<Vec<RunSpec>, String> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for e in entries {
        for f in &e.figures {
            let exprs = [Expr::parse(&f.sim)?, Expr::parse(&f.reference)?];
            for x in points(f) {
                for ex in &exprs {
                    for (run, _) in ex.metrics() {
                        for seed in 1..=e.runs[run].seed_count(seeds) {
                            let spec =
                                e.runs[run].at(x, seed).map_err(|err| format!("{}: run '{run}': {err}", e.id))?;
                            if seen.insert(spec.command()) {
                                out.push(spec);
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

/// The metrics of every run, by the command that repeats it; a run that
/// failed holds its error.
pub type Results = HashMap<String, Result<BTreeMap<String, f64>, String>>;

struct At<'a> {
    entry: &'a Entry,
    x: Option<f64>,
    results: &'a Results,
    /// Whose runs' metrics are read.
    seeds: Seeds,
}

/// The seeds of a run whose metrics a figure reads.
#[derive(Clone, Copy)]
enum Seeds {
    /// The mean over seeds 1 to N, or to the run's own count where it asks
    /// for more ([`RunTemplate::seeds`]).
    Mean(u64),
    /// This seed alone; a run with fewer seeds gives its mean over 1 to N.
    One(u64, u64),
}

impl Seeds {
    /// Returns the seeds of `run` this reads.
    fn of(self, run: &RunTemplate) -> std::ops::RangeInclusive<u64> {
        match self {
            Seeds::Mean(n) => 1..=run.seed_count(n),
            Seeds::One(seed, n) if seed <= run.seed_count(n) => seed..=seed,
            Seeds::One(_, n) => 1..=run.seed_count(n),
        }
    }
}

impl Scope for At<'_> {
    fn published(&self, name: &str) -> Result<Value, String> {
        let v = self.entry.numbers.get(name).ok_or_else(|| format!("no published number '{name}'"))?;
        published_value(name, v, self.x)
    }

    /// The mean of `metric` over the run's seeds.
    fn metric(&self, run: &str, metric: &str) -> Result<f64, String> {
        let template = self.entry.runs.get(run).ok_or_else(|| format!("no run '{run}'"))?;
        let (mut sum, seeds) = (0.0, self.seeds.of(template));
        for seed in seeds.clone() {
            let command = template.at(self.x, seed)?.command();
            sum += match self.results.get(&command) {
                None => return Err(format!("'{command}' was not run")),
                Some(Err(e)) => return Err(format!("'{command}' failed: {e}")),
                Some(Ok(m)) => m.get(metric).copied().ok_or_else(|| {
                    let names: Vec<&str> = m.keys().map(String::as_str).collect();
                    format!("run '{run}' has no metric '{metric}'; it has: {}", names.join(", "))
                })?,
            };
        }
        Ok(sum / seeds.count() as f64)
    }

    fn x(&self) -> Result<f64, String> {
        self.x.ok_or_else(|| "x read where the figure has no points".to_string())
    }
}

/// How a row counts in the summary.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Counted {
    /// Counted toward the targets.
    Yes,
    /// Counted apart: the mapping is a stand-in.
    StandIn,
    /// Printed, not counted.
    No,
}

/// One judged row.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// `ratio`, `abs`, `shape` or `info`.
    pub kind: &'static str,
    /// Its label (with the point, for a row of a curve).
    pub label: String,
    /// The point, for a ratio or absolute figure of a curve.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub x: Option<f64>,
    /// The simulated value (a ratio, an absolute figure).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sim: Option<f64>,
    /// The published value.
    #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
    pub reference: Option<f64>,
    /// A ratio's verdict.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// A shape's verdict: right or not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape_right: Option<bool>,
    /// An absolute figure's factor sim / ref.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub factor: Option<f64>,
    /// The shape's points (`sim peaks at x=4, ref at x=24`), or the bound.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// How it counts.
    pub counted: Counted,
    /// Why it could not be judged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The figure's note.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// For a curve: the simulated and published values at each point.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub curve: Vec<(f64, f64, f64)>,
    /// The estimated costs its simulated runs rest on (`machine: costs`): the
    /// [`tlbkit_sim::preset::Estimate`]s of their machines that take at least
    /// [`ESTIMATE_SHARE`] of a run's CPU time.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub estimates: Vec<String>,
    /// For a ratio or absolute figure whose seeds' runs differ: the lowest and
    /// highest figure one seed's runs give alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seeds: Option<(f64, f64)>,
}

/// The judged rows of one entry.
#[derive(Clone, Debug, Serialize)]
pub struct Judged {
    /// The entry's id.
    pub id: String,
    /// Its title.
    pub title: String,
    /// Its part.
    pub part: Part,
    /// Its mapping.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mapping: Option<String>,
    /// Why it is a stand-in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stand_in: Option<String>,
    /// Why it was not blind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disclosed: Option<String>,
    /// Why it is excluded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub excluded: Option<String>,
    /// What cannot be expressed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_expressible: Vec<String>,
    /// The source.
    pub source: String,
    /// The rows.
    pub rows: Vec<Row>,
    /// Every estimate its rows name, with where it comes from
    /// (`machine: costs: why`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub estimates: Vec<String>,
}

/// Judges every figure of `entries` on `results`, each run's metric the mean
/// over its seeds 1 to `seeds`.
pub fn judge_all(entries: &[&Entry], results: &Results, seeds: u64) -> Vec<Judged> {
    entries.iter().map(|e| judge_entry(e, results, seeds)).collect()
}

fn judge_entry(e: &Entry, results: &Results, seeds: u64) -> Judged {
    let mut rows = Vec::new();
    let mut why = Vec::new();
    for f in &e.figures {
        let counted = if !f.counted {
            Counted::No
        } else if e.stand_in.is_some() || f.stand_in.is_some() {
            Counted::StandIn
        } else {
            Counted::Yes
        };
        let row = |label: String, x: Option<f64>| Row {
            kind: if f.counted { f.kind.word() } else { "info" },
            label,
            x,
            sim: None,
            reference: None,
            verdict: None,
            shape_right: None,
            factor: None,
            detail: String::new(),
            counted,
            error: None,
            note: f.note.clone(),
            curve: Vec::new(),
            estimates: Vec::new(),
            seeds: None,
        };
        let (sim, reference) = match (Expr::parse(&f.sim), Expr::parse(&f.reference)) {
            (Ok(s), Ok(r)) => (s, r),
            (Err(err), _) | (_, Err(err)) => {
                let mut r = row(f.label.clone(), None);
                r.error = Some(err);
                rows.push(r);
                continue;
            }
        };
        let eval = |x: Option<f64>| -> Result<(f64, f64), String> {
            let scope = At { entry: e, x, results, seeds: Seeds::Mean(seeds) };
            Ok((sim.eval(&scope)?, reference.eval(&scope)?))
        };
        // The figure of each seed's runs alone, lowest and highest, where they differ.
        let spread = |x: Option<f64>| -> Option<(f64, f64)> {
            let one = |seed| sim.eval(&At { entry: e, x, results, seeds: Seeds::One(seed, seeds) }).ok();
            let most = sim.metrics().into_iter().filter_map(|(run, _)| e.runs.get(run)).map(|r| r.seed_count(seeds));
            let each: Vec<f64> = (1..=most.max().unwrap_or(seeds)).map(one).collect::<Option<_>>()?;
            let lo = each.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = each.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            (hi - lo > 1e-9 * hi.abs().max(lo.abs())).then_some((lo, hi))
        };
        if f.kind.is_curve() {
            let mut r = row(f.label.clone(), None);
            for x in &f.x {
                estimates_used(e, &sim, Some(*x), results, &mut r.estimates, &mut why);
            }
            match f.x.iter().map(|x| eval(Some(*x))).collect::<Result<Vec<_>, _>>() {
                Err(err) => r.error = Some(err),
                Ok(v) => {
                    let (s, p): (Vec<f64>, Vec<f64>) = v.into_iter().unzip();
                    r.curve = f.x.iter().zip(s.iter().zip(&p)).map(|(x, (s, p))| (*x, *s, *p)).collect();
                    judge_curve(f, &s, &p, &mut r);
                }
            }
            rows.push(r);
            continue;
        }
        for x in points(f) {
            let label = match x {
                Some(x) if f.label.is_empty() => format!("x={}", judge::num(x)),
                Some(x) => format!("{} x={}", f.label, judge::num(x)),
                None => f.label.clone(),
            };
            let mut r = row(label, x);
            estimates_used(e, &sim, x, results, &mut r.estimates, &mut why);
            match eval(x) {
                Err(err) => r.error = Some(err),
                Ok((s, p)) => {
                    r.sim = Some(s);
                    r.reference = Some(p);
                    r.seeds = spread(x);
                    match f.kind {
                        Kind::Abs => r.factor = Some(s / p),
                        Kind::AtMost => {
                            r.verdict = Some(judge::bound(s, p, true));
                            r.detail = format!("bound <= {}", report::fmt(p));
                        }
                        _ => r.verdict = Some(judge::ratio(s, p)),
                    }
                }
            }
            rows.push(r);
        }
    }
    Judged {
        id: e.id.clone(),
        title: e.title.clone(),
        part: e.part,
        mapping: e.mapping.clone(),
        stand_in: e.stand_in.clone(),
        disclosed: e.disclosed.clone(),
        excluded: e.excluded.clone(),
        not_expressible: e.not_expressible.clone(),
        source: e.source.clone(),
        rows,
        estimates: why,
    }
}

/// The share of a run's CPU time an estimated cost must take for a row to
/// name it: a cost below it cannot move the run's figure by 1% even if it
/// were twice as large.
pub const ESTIMATE_SHARE: f64 = 0.01;

/// Adds to `used` each estimate (`machine: costs`, or `kernel: cost` for the
/// kernel's software costs, [`tlbkit_sim::sim::KERNEL_ESTIMATES`]) that takes
/// at least [`ESTIMATE_SHARE`] of a run of `sim` at `x` (its seed 1 run), and
/// to `why` its source, each once.
fn estimates_used(
    e: &Entry,
    sim: &Expr,
    x: Option<f64>,
    results: &Results,
    used: &mut Vec<String>,
    why: &mut Vec<String>,
) {
    for (run, _) in sim.metrics() {
        let Some(Ok(spec)) = e.runs.get(run).map(|t| t.at(x, 1)) else { continue };
        let Some(Ok(metrics)) = results.get(&spec.command()) else { continue };
        // A preset, or a machine file (a preset varied by `--vary`).
        let Ok(preset) = tlbkit_sim::preset::resolve(&spec.machine) else { continue };
        let time = metrics.get("sim_time_ns").copied().unwrap_or(0.0);
        let mut name_it = |name: String, source: &str| {
            let full = format!("{name}: {source}");
            if !used.contains(&name) {
                used.push(name);
            }
            if !why.contains(&full) {
                why.push(full);
            }
        };
        for est in &preset.estimates {
            let count = metrics.get(&est.used_when).copied().unwrap_or(0.0);
            if est.share(&preset.costs, count, time, preset.freq_ghz, spec.cpus) >= ESTIMATE_SHARE {
                name_it(format!("{}: {}", preset.name, est.costs), &est.why);
            }
        }
        // The kernel's own software costs that rest on estimates: their
        // cycles over the run's CPU time.
        let total = time * preset.freq_ghz * spec.cpus as f64;
        for k in tlbkit_sim::sim::KERNEL_ESTIMATES {
            let cycles = metrics.get(k.metric).copied().unwrap_or(0.0);
            if total > 0.0 && cycles / total >= ESTIMATE_SHARE {
                name_it(format!("kernel: {} ({} cycles)", k.name, k.cycles), k.why);
            }
        }
    }
}

fn judge_curve(f: &Figure, s: &[f64], p: &[f64], r: &mut Row) {
    let x = &f.x;
    let n = |v: f64| judge::num(v);
    match f.kind {
        Kind::Trend => {
            let wrong = judge::trend(x, s, p);
            r.shape_right = Some(wrong.is_empty());
            r.detail = if wrong.is_empty() {
                "every step rises/falls where the reference's does".into()
            } else {
                wrong.iter().map(judge::WrongStep::describe).collect::<Vec<_>>().join("; ")
            };
        }
        Kind::Knee => {
            let (a, b) = (judge::knee(x, s), judge::knee(x, p));
            r.shape_right = Some(judge::within_a_doubling(a, b));
            r.detail = format!("sim peaks/flattens at x={}, ref at x={}", n(a), n(b));
        }
        Kind::Peak => {
            let (a, b) = (judge::peak(x, s), judge::peak(x, p));
            r.shape_right = Some(judge::within_a_doubling(a, b));
            r.detail = format!("sim peaks at x={}, ref at x={}", n(a), n(b));
        }
        Kind::Crossover => {
            let (a, b) = (judge::crossover(x, s), judge::crossover(x, p));
            r.shape_right = Some(match (a, b) {
                (Some(a), Some(b)) => judge::within_a_doubling(a, b),
                (None, None) => true,
                _ => false,
            });
            let at = |v: Option<f64>| v.map_or("nowhere".to_string(), |v| format!("x={}", n(v)));
            r.detail = format!("sim from {}, ref from {}", at(a), at(b));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
