//! The experiment file of `tlbkit sweep`: a TOML document naming the axes of
//! a grid, parsed with `serde` and checked name by name, every error naming the
//! file's line and the field it is about.
//!
//! ```toml
//! machines  = ["cortex-a72"]                 # machine presets
//! cpus      = [1, 2]                         # CPU counts
//! policies  = ["arm64-noasid", "arm64-freebsd-asid"]
//! workloads = ["lat_ctx", "buildkernel"]
//! seeds     = { first = 1, count = 5 }       # or a list: seeds = [1, 2, 3]
//! results   = "latctx.jsonl"                 # optional; default: this file's name, .jsonl
//!
//! [set]               # --set values of every run: one value, or a list (an axis)
//! jitter = 0.02
//!
//! [set.lat_ctx]       # --set values of lat_ctx's runs only
//! procs = [4, 16]
//! ```
//!
//! Every field but `results` and `set` is required, and every list must have a
//! value. A policy is paired only with the machines of its architecture (the
//! other pairs are counted, not run). A value under `[set]` must be valid for
//! every workload; one under `[set.W]` replaces a `[set]` value of the same key
//! for W.

use crate::error::{Error, Param};
use crate::sweep::MAX_RUNS;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use tlbkit_sim::preset;
use tlbkit_sim::run::MAX_CPUS;
use tlbkit_sim::workload;
use toml::Spanned;

/// One `--set` value as the file gives it.
#[derive(Clone, Debug, PartialEq)]
pub enum ParamValue {
    /// A whole number.
    Int(i64),
    /// A number with a fraction or exponent.
    Float(f64),
    /// A word (`on`, `clear_ptes`, …).
    Text(String),
}

impl ParamValue {
    /// Returns the value as `--set key=value` spells it.
    pub fn arg(&self) -> String {
        match self {
            ParamValue::Int(i) => i.to_string(),
            ParamValue::Float(f) => f.to_string(),
            ParamValue::Text(s) => s.clone(),
        }
    }

    /// Returns the value as a results line records it.
    pub fn json(&self) -> serde_json::Value {
        match self {
            ParamValue::Int(i) => serde_json::json!(i),
            ParamValue::Float(f) => serde_json::json!(f),
            ParamValue::Text(s) => serde_json::json!(s),
        }
    }
}

/// One parameter's values: an axis of the grid.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// The `--set` key.
    pub key: String,
    /// Its values, in the file's order.
    pub values: Vec<ParamValue>,
    /// Where the values are in the file.
    span: Range<usize>,
}

/// A parsed and checked experiment file.
#[derive(Clone, Debug)]
pub struct Sweep {
    /// Where the file came from (for messages).
    pub origin: String,
    /// Machine presets.
    pub machines: Vec<String>,
    /// CPU counts.
    pub cpus: Vec<usize>,
    /// Policies.
    pub policies: Vec<String>,
    /// Workloads.
    pub workloads: Vec<String>,
    /// Seeds.
    pub seeds: Vec<u64>,
    /// The results file as the file names it, if it does.
    pub results: Option<String>,
    /// Per workload, its parameter axes in key order (`[set]` merged with `[set.W]`).
    pub axes: BTreeMap<String, Vec<Axis>>,
    /// The file's text, to turn spans into lines.
    text: String,
    /// Where `workloads` is, for errors about a workload's runs.
    workloads_span: Range<usize>,
}

/// Returns the key a line of TOML assigns (`procs = [` gives `procs`), if it
/// assigns one.
fn key_of(line: &str) -> Option<String> {
    let t = line.trim_start();
    let (k, _) = t.split_once('=')?;
    let k = k.trim();
    (!k.is_empty() && !t.starts_with('#') && k.chars().all(|c| c.is_alphanumeric() || "_-.\"".contains(c)))
        .then(|| k.trim_matches('"').to_string())
}

/// Returns `(line, field)` for a byte offset of `text`: the 1-based line, and
/// the dotted key of the assignment it belongs to (the table header it is under,
/// then the key on its line or, inside a multi-line value, the nearest above).
pub fn locate(text: &str, offset: usize) -> (usize, String) {
    let offset = offset.min(text.len());
    let line_no = text[..offset].matches('\n').count();
    let lines: Vec<&str> = text.lines().collect();
    let header_of = |l: &str| {
        let t = l.trim();
        (t.starts_with('[') && !t.contains('=')).then(|| t.trim_matches(|c| c == '[' || c == ']').trim().to_string())
    };
    let mut key = None;
    let mut header = None;
    for l in lines.iter().take(line_no + 1).rev() {
        if let Some(h) = header_of(l) {
            header = Some(h);
            break;
        }
        if key.is_none() {
            key = key_of(l);
        }
    }
    let field = match (header, key) {
        (Some(h), Some(k)) => format!("{h}.{k}"),
        (Some(h), None) => h,
        (None, Some(k)) => k,
        (None, None) => "(top level)".into(),
    };
    (line_no + 1, field)
}

/// Where a parse error at `offset` comes from an array or inline table left
/// open on an earlier line: the offset of its `[` or `{` and the bracket that
/// closes it, when `offset` is inside it and its line starts a new key or
/// table (the parser reads on and stops at the next line's key, not at the
/// line that lacks the bracket). Strings and comments are skipped; a `[` that
/// starts a line outside any value is a table header, not an array.
fn unclosed(text: &str, offset: usize) -> Option<(usize, char)> {
    let offset = offset.min(text.len());
    let bytes = text.as_bytes();
    let mut open: Vec<usize> = Vec::new();
    let mut i = 0;
    let mut line_start = true;
    while i < offset {
        let c = bytes[i];
        match c {
            b'\n' => line_start = true,
            b' ' | b'\t' | b'\r' => {}
            b'#' => {
                while i < offset && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'"' | b'\'' => {
                // A basic string honours backslash escapes; a literal one does not.
                i += 1;
                while i < offset && bytes[i] != c && bytes[i] != b'\n' {
                    i += if c == b'"' && bytes[i] == b'\\' { 2 } else { 1 };
                }
                line_start = false;
            }
            b'[' if line_start && open.is_empty() => {
                while i < offset && bytes[i] != b'\n' && bytes[i] != b']' {
                    i += 1;
                }
                line_start = false;
            }
            b'[' | b'{' => {
                open.push(i);
                line_start = false;
            }
            b']' | b'}' => {
                open.pop();
                line_start = false;
            }
            _ => line_start = false,
        }
        i += 1;
    }
    let &start = open.last()?;
    let line_of = |o: usize| text[..o].matches('\n').count();
    let from = text[..offset].rfind('\n').map_or(0, |n| n + 1);
    let to = text[offset..].find('\n').map_or(text.len(), |n| offset + n);
    let line = &text[from..to];
    let starts_key = line.trim_start().starts_with('[') || key_of(line).is_some();
    (line_of(start) < line_of(offset) && starts_key).then(|| (start, if bytes[start] == b'[' { ']' } else { '}' }))
}

/// The file's fields as `serde` reads them, with where each value is.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    machines: Spanned<Vec<Spanned<String>>>,
    cpus: Spanned<Vec<Spanned<i64>>>,
    policies: Spanned<Vec<Spanned<String>>>,
    workloads: Spanned<Vec<Spanned<String>>>,
    seeds: Spanned<Seeds>,
    #[serde(default)]
    results: Option<Spanned<String>>,
    #[serde(default)]
    set: BTreeMap<String, Spanned<SetEntry>>,
}

/// `seeds`: a list, or `{ first, count }`.
enum Seeds {
    List(Vec<u64>),
    Range { first: u64, count: u64 },
}

/// A value of `[set]`: values of one key for every workload, or a workload's table.
enum SetEntry {
    Values(Vec<ParamValue>),
    Workload(BTreeMap<String, Spanned<Values>>),
}

/// One value or a non-empty list of them.
struct Values(Vec<ParamValue>);

const SCALAR: &str = "a number or a string (e.g. 4, 0.02 or \"on\")";

/// Reads a single parameter value.
struct ScalarVisitor;

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = ParamValue;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(SCALAR)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<ParamValue, E> {
        Ok(ParamValue::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<ParamValue, E> {
        i64::try_from(v).map(ParamValue::Int).map_err(|_| E::custom(format!("{v} is too large")))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<ParamValue, E> {
        if v.is_finite() {
            Ok(ParamValue::Float(v))
        } else {
            Err(E::custom(format!("{v} is not a finite number")))
        }
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<ParamValue, E> {
        Ok(ParamValue::Text(v.to_string()))
    }
}

impl<'de> Deserialize<'de> for ParamValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ScalarVisitor)
    }
}

/// Reads one value or a list of them; with `tables`, also a workload's table.
struct EntryVisitor {
    tables: bool,
}

fn non_empty<E: de::Error>(v: Vec<ParamValue>) -> Result<Vec<ParamValue>, E> {
    if v.is_empty() {
        return Err(E::custom("an empty list leaves the grid no point: give at least one value"));
    }
    Ok(v)
}

impl<'de> Visitor<'de> for EntryVisitor {
    type Value = SetEntry;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        if self.tables {
            write!(f, "{SCALAR}, a list of them, or a workload's table")
        } else {
            write!(f, "{SCALAR} or a list of them")
        }
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<SetEntry, E> {
        ScalarVisitor.visit_i64(v).map(|x| SetEntry::Values(vec![x]))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<SetEntry, E> {
        ScalarVisitor.visit_u64(v).map(|x| SetEntry::Values(vec![x]))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<SetEntry, E> {
        ScalarVisitor.visit_f64(v).map(|x| SetEntry::Values(vec![x]))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<SetEntry, E> {
        ScalarVisitor.visit_str(v).map(|x| SetEntry::Values(vec![x]))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<SetEntry, A::Error> {
        let mut v = Vec::new();
        while let Some(x) = seq.next_element::<ParamValue>()? {
            v.push(x);
        }
        non_empty(v).map(SetEntry::Values)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SetEntry, A::Error> {
        if !self.tables {
            return Err(de::Error::custom(format!("expected {SCALAR} or a list of them, not a table")));
        }
        let mut t = BTreeMap::new();
        while let Some(k) = map.next_key::<String>()? {
            t.insert(k, map.next_value::<Spanned<Values>>()?);
        }
        Ok(SetEntry::Workload(t))
    }
}

impl<'de> Deserialize<'de> for SetEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(EntryVisitor { tables: true })
    }
}

impl<'de> Deserialize<'de> for Values {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match d.deserialize_any(EntryVisitor { tables: false })? {
            SetEntry::Values(v) => Ok(Values(v)),
            SetEntry::Workload(_) => unreachable!("tables are refused without `tables`"),
        }
    }
}

struct SeedsVisitor;

impl<'de> Visitor<'de> for SeedsVisitor {
    type Value = Seeds;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of seeds or { first = 1, count = 10 }")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Seeds, A::Error> {
        let mut v = Vec::new();
        while let Some(s) = seq.next_element::<u64>()? {
            v.push(s);
        }
        Ok(Seeds::List(v))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Seeds, A::Error> {
        let (mut first, mut count) = (None, None);
        while let Some(k) = map.next_key::<String>()? {
            match k.as_str() {
                "first" => first = Some(map.next_value::<u64>()?),
                "count" => count = Some(map.next_value::<u64>()?),
                other => return Err(de::Error::unknown_field(other, &["first", "count"])),
            }
        }
        Ok(Seeds::Range {
            first: first.ok_or_else(|| de::Error::missing_field("first"))?,
            count: count.ok_or_else(|| de::Error::missing_field("count"))?,
        })
    }
}

impl<'de> Deserialize<'de> for Seeds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SeedsVisitor)
    }
}

impl Sweep {
    /// Returns the error `e` of the run `spec`, at the line of the `set` key
    /// its parameter names, or else at `workloads`.
    pub(crate) fn about_run(&self, spec: &tlbkit_sim::run::RunSpec, e: tlbkit_sim::Error) -> Error {
        let axes = self.axes.get(&spec.workload).map(Vec::as_slice).unwrap_or_default();
        let named = match e.param() {
            Some(Param::Set(key)) => axes.iter().find(|a| a.key == key),
            _ => None,
        };
        let span = named.map_or(&self.workloads_span, |a| &a.span);
        let (line, field) = locate(&self.text, span.start);
        Error::GridRun {
            origin: self.origin.clone(),
            line,
            field,
            at_setting: named.is_some(),
            run: Box::new(spec.clone()),
            source: Box::new(e),
        }
    }

    /// Parses and checks an experiment file's text; `origin` names it in messages.
    pub fn parse(text: &str, origin: &str) -> Result<Sweep, Error> {
        let file = ExperimentFile { text, origin };
        let raw = file.read()?;
        let machines_known = preset::names();
        let machines = file.names(
            &raw.machines,
            "machine",
            "machines",
            // A machine file is read when its runs start (`preset::resolve`).
            &|n| machines_known.iter().any(|m| m == n) || n.ends_with(".toml"),
            machines_known.iter().map(String::as_str).collect(),
        )?;
        let policies = file.names(
            &raw.policies,
            "policy",
            "policies",
            &|n| tlbkit_registry::policy(n).is_some(),
            tlbkit_registry::POLICIES.iter().map(|p| p.name).collect(),
        )?;
        let workloads = file.names(
            &raw.workloads,
            "workload",
            "workloads",
            &|n| workload::by_name(n).is_some(),
            workload::WORKLOADS.iter().map(|w| w.name).collect(),
        )?;
        let cpus = file.cpus(&raw.cpus)?;
        let seeds = file.seeds(&raw.seeds)?;
        let axes = file.axes(&raw.set, &workloads)?;
        let results = raw.results.as_ref().map(|r| r.get_ref().clone());
        if let Some(r) = &raw.results {
            if r.get_ref().trim().is_empty() {
                return Err(file.here(&r.span(), "give a file name".into()));
            }
        }
        Ok(Sweep {
            origin: origin.to_string(),
            machines,
            cpus,
            policies,
            workloads,
            seeds,
            results,
            axes,
            text: text.to_string(),
            workloads_span: raw.workloads.span(),
        })
    }
}

/// An experiment file being checked: its text, and the name it goes by in
/// messages.
struct ExperimentFile<'a> {
    /// The file's text.
    text: &'a str,
    /// Where it came from.
    origin: &'a str,
}

impl ExperimentFile<'_> {
    /// Returns the error `msg` at `span` of the file.
    fn here(&self, span: &Range<usize>, msg: String) -> Error {
        at(self.origin, self.text, span, msg)
    }

    /// Reads the file's fields with `serde`; a bracket left open is reported
    /// at the line that opens it.
    fn read(&self) -> Result<Raw, Error> {
        let text = self.text;
        toml::from_str(text).map_err(|e| match e.span() {
            Some(span) => match unclosed(text, span.start) {
                Some((open, close)) => {
                    let (stop, _) = locate(text, span.start);
                    let msg = format!(
                        "`{}` is not closed: add `{close}` (the parser stopped at line {stop}: {})",
                        &text[open..open + 1],
                        e.message().trim_end()
                    );
                    self.here(&(open..open), msg)
                }
                None => at(self.origin, text, &span, e.message()),
            },
            None => Error::Experiment { origin: self.origin.to_string(), place: None, what: e.message().to_string() },
        })
    }

    /// Checks a list of names (`what` each, `whats` together): at least one,
    /// each `valid` and given once; an unknown one is refused with the `all`
    /// valid names.
    fn names(
        &self,
        list: &Spanned<Vec<Spanned<String>>>,
        what: &str,
        whats: &str,
        valid: &dyn Fn(&str) -> bool,
        all: Vec<&str>,
    ) -> Result<Vec<String>, Error> {
        if list.get_ref().is_empty() {
            return Err(self.here(&list.span(), format!("give at least one {what}")));
        }
        let mut out: Vec<String> = Vec::new();
        for n in list.get_ref() {
            if !valid(n.get_ref()) {
                let near = tlbkit_registry::suggest::did_you_mean(n.get_ref(), all.iter().copied());
                let msg = format!("unknown {what} '{}'{near}; valid {whats}: {}", n.get_ref(), all.join(", "));
                return Err(self.here(&n.span(), msg));
            }
            if out.contains(n.get_ref()) {
                return Err(self.here(&n.span(), format!("{what} '{}' is given twice", n.get_ref())));
            }
            out.push(n.get_ref().clone());
        }
        Ok(out)
    }

    /// Checks the CPU counts: at least one, each in range and given once.
    fn cpus(&self, cpus: &Spanned<Vec<Spanned<i64>>>) -> Result<Vec<usize>, Error> {
        if cpus.get_ref().is_empty() {
            return Err(self.here(&cpus.span(), "give at least one CPU count".into()));
        }
        let mut out = Vec::new();
        for c in cpus.get_ref() {
            let n = *c.get_ref();
            if n < 1 || n > MAX_CPUS as i64 {
                return Err(self.here(&c.span(), format!("{n} CPUs is out of range: give 1 to {MAX_CPUS}")));
            }
            if out.contains(&(n as usize)) {
                return Err(self.here(&c.span(), format!("{n} CPUs is given twice")));
            }
            out.push(n as usize);
        }
        Ok(out)
    }

    /// Returns the seeds of a list (at least one, each given once) or of a
    /// range (of 1 to [`MAX_RUNS`] seeds that fit in 64 bits).
    fn seeds(&self, seeds: &Spanned<Seeds>) -> Result<Vec<u64>, Error> {
        match seeds.get_ref() {
            Seeds::List(v) => {
                if v.is_empty() {
                    return Err(self.here(&seeds.span(), "give at least one seed".into()));
                }
                let mut seen = std::collections::BTreeSet::new();
                if let Some(d) = v.iter().find(|s| !seen.insert(**s)) {
                    return Err(self.here(&seeds.span(), format!("seed {d} is given twice")));
                }
                Ok(v.clone())
            }
            &Seeds::Range { first, count } => {
                if count == 0 || first.checked_add(count - 1).is_none() {
                    return Err(self.here(
                        &seeds.span(),
                        format!(
                            "{{ first = {first}, count = {count} }} is no seed range: give a count from 1 and \
                                 seeds that fit in 64 bits"
                        ),
                    ));
                }
                if count > MAX_RUNS as u64 {
                    return Err(self.here(
                        &seeds.span(),
                        format!("{count} seeds: a sweep holds at most {MAX_RUNS} runs; split it into several files"),
                    ));
                }
                Ok((first..=first + (count - 1)).collect())
            }
        }
    }

    /// Returns each workload's parameter axes in key order: `[set]`'s, a
    /// `[set.W]` value replacing one of the same key for W; a `[set.W]`
    /// naming no workload of the sweep is refused.
    fn axes(
        &self,
        set: &BTreeMap<String, Spanned<SetEntry>>,
        workloads: &[String],
    ) -> Result<BTreeMap<String, Vec<Axis>>, Error> {
        let mut common: Vec<Axis> = Vec::new();
        let mut own: BTreeMap<String, Vec<Axis>> = BTreeMap::new();
        for (key, entry) in set {
            match entry.get_ref() {
                SetEntry::Values(v) => common.push(Axis { key: key.clone(), values: v.clone(), span: entry.span() }),
                SetEntry::Workload(t) => {
                    if !workloads.contains(key) {
                        return Err(self.here(
                            &entry.span(),
                            format!(
                                "[set.{key}] names no workload of this sweep (workloads: {})",
                                workloads.join(", ")
                            ),
                        ));
                    }
                    let axes =
                        t.iter().map(|(k, v)| Axis { key: k.clone(), values: v.get_ref().0.clone(), span: v.span() });
                    own.insert(key.clone(), axes.collect());
                }
            }
        }
        let mut axes = BTreeMap::new();
        for w in workloads {
            let mut merged: BTreeMap<String, Axis> = common.iter().map(|a| (a.key.clone(), a.clone())).collect();
            for a in own.get(w).into_iter().flatten() {
                merged.insert(a.key.clone(), a.clone());
            }
            axes.insert(w.clone(), merged.into_values().collect());
        }
        Ok(axes)
    }
}

/// Returns the error `msg` at `span` of `text` (`origin: line N, field: msg`).
fn at(origin: &str, text: &str, span: &Range<usize>, msg: impl fmt::Display) -> Error {
    Error::Experiment { origin: origin.to_string(), place: Some(locate(text, span.start)), what: msg.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
machines  = ["cortex-a72", "skylake"]
cpus      = [1, 2]
policies  = ["arm64-noasid", "x86-linux-pcid"]
workloads = ["lat_ctx", "pingpong"]
seeds     = { first = 3, count = 2 }

[set]
jitter = 0.02
rounds = [10, 20]

[set.lat_ctx]
procs = [4, 16]
rounds = 5
"#;

    /// Returns the message of the error in experiment file `text`.
    fn err(text: &str) -> String {
        let e = Sweep::parse(text, "x.toml").unwrap_err();
        assert!(matches!(&e, Error::Experiment { origin, .. } if origin == "x.toml"), "{e:?}");
        e.to_string()
    }

    #[test]
    fn a_workloads_table_adds_axes_and_replaces_common_ones() {
        let s = Sweep::parse(GOOD, "x.toml").unwrap();
        assert_eq!(s.seeds, [3, 4]);
        let keys = |w: &str| -> Vec<(String, Vec<String>)> {
            s.axes[w].iter().map(|a| (a.key.clone(), a.values.iter().map(ParamValue::arg).collect())).collect()
        };
        let own = |k: &str, v: &[&str]| (k.to_string(), v.iter().map(|x| x.to_string()).collect::<Vec<_>>());
        assert_eq!(keys("lat_ctx"), [own("jitter", &["0.02"]), own("procs", &["4", "16"]), own("rounds", &["5"])]);
        assert_eq!(keys("pingpong"), [own("jitter", &["0.02"]), own("rounds", &["10", "20"])]);
    }

    #[test]
    fn a_type_error_names_its_line_and_field() {
        let e = err(&GOOD.replace("cpus      = [1, 2]", "cpus      = [1, \"two\"]"));
        assert!(e.starts_with("x.toml: line 3, cpus: invalid type: string \"two\""), "{e}");
        let e = err(&GOOD.replace("procs = [4, 16]", "procs = [4, true]"));
        assert!(
            e.starts_with("x.toml: line 13, set.lat_ctx.procs: invalid type: boolean `true`, expected a number"),
            "{e}"
        );
        let e = err(&GOOD.replace("jitter = 0.02", "jitter = []"));
        assert!(e.starts_with("x.toml: line 9, set.jitter: an empty list leaves the grid no point"), "{e}");
    }

    #[test]
    fn unknown_and_missing_fields_are_named() {
        let e = err(&GOOD.replace("cpus ", "cpu "));
        assert!(e.starts_with("x.toml: line 3, cpu: unknown field `cpu`"), "{e}");
        let e = err(&GOOD.replace("seeds     = { first = 3, count = 2 }", ""));
        assert!(e.contains("missing field `seeds`"), "{e}");
        let e = err(&GOOD.replace("count = 2", "cuont = 2"));
        assert!(e.starts_with("x.toml: line 6, seeds: unknown field `cuont`, expected `first` or `count`"), "{e}");
    }

    #[test]
    fn unknown_names_and_bad_values_are_refused_at_their_line() {
        let e = err(&GOOD.replace("\"skylake\"", "\"vax\""));
        assert!(e.starts_with("x.toml: line 2, machines: unknown machine 'vax'; valid machines: "), "{e}");
        let e = err(&GOOD.replace("\"x86-linux-pcid\"", "\"x86-linux-pcdi\""));
        assert!(
            e.starts_with(
                "x.toml: line 4, policies: unknown policy 'x86-linux-pcdi' (did you mean 'x86-linux-pcid'?); \
                 valid policies: arm64-noasid, "
            ),
            "{e}"
        );
        let e = err(&GOOD.replace("\"pingpong\"]", "\"pingpong\", \"lat_ctx\"]"));
        assert!(e.starts_with("x.toml: line 5, workloads: workload 'lat_ctx' is given twice"), "{e}");
        let e = err(&GOOD.replace("[1, 2]", "[0]"));
        assert!(e.starts_with("x.toml: line 3, cpus: 0 CPUs is out of range"), "{e}");
        let e = Sweep::parse(&GOOD.replace("[1, 2]", "[0]"), "x.toml").unwrap_err();
        assert!(matches!(e, Error::Experiment { place: Some((3, field)), .. } if field == "cpus"));
        let e = err(&GOOD.replace("count = 2", "count = 0"));
        assert!(e.starts_with("x.toml: line 6, seeds: { first = 3, count = 0 } is no seed range"), "{e}");
        let e = err(&GOOD.replace("[set.lat_ctx]", "[set.sort_compute]"));
        assert!(e.starts_with("x.toml: line 12, set.sort_compute: [set.sort_compute] names no workload"), "{e}");
        let e = err("machines = [\"altra\"\n");
        assert!(e.starts_with("x.toml: line 1, machines: "), "{e}");
    }

    #[test]
    fn a_seed_range_longer_than_a_sweep_holds_is_refused_before_it_is_listed() {
        let e = err(&GOOD.replace("count = 2", "count = 10000000000000"));
        assert!(e.starts_with("x.toml: line 6, seeds: 10000000000000 seeds: a sweep holds at most 100000 runs"), "{e}");
        assert!(Sweep::parse(&GOOD.replace("count = 2", "count = 100000"), "x.toml").is_ok());
        let e = err(&GOOD.replace("seeds     = { first = 3, count = 2 }", "seeds = [1, 2, 3, 2]"));
        assert!(e.starts_with("x.toml: line 6, seeds: seed 2 is given twice"), "{e}");
    }

    #[test]
    fn a_bracket_left_open_is_reported_at_its_own_line() {
        let e = err(&GOOD.replace("cpus      = [1, 2]", "cpus      = [1, 2"));
        assert!(
            e.starts_with("x.toml: line 3, cpus: `[` is not closed: add `]` (the parser stopped at line 4: "),
            "{e}"
        );
        let e = err(&GOOD.replace("procs = [4, 16]", "procs = [4, 16"));
        assert!(e.starts_with("x.toml: line 13, set.lat_ctx.procs: `[` is not closed: add `]`"), "{e}");
        let e = err(&GOOD.replace("count = 2 }", "count = 2"));
        assert!(e.starts_with("x.toml: line 6, seeds: `{` is not closed: add `}`"), "{e}");
        // A multi-line array whose element is wrong is not an unclosed one.
        let e = err("machines = [\n  \"altra\",\n  3 4,\n]\n");
        assert!(!e.contains("not closed"), "{e}");
        // Brackets in strings and comments are not counted.
        let e = err("# [ a comment\nmachines = [\"a[\", \"b\"\ncpus = [1]\n");
        assert!(e.starts_with("x.toml: line 2, machines: `[` is not closed"), "{e}");
    }

    #[test]
    fn locate_finds_the_key_of_a_multi_line_value_under_its_table() {
        let text = "a = 1\n[set]\nprocs = [\n  1,\n  2,\n]\n";
        assert_eq!(locate(text, text.find("2,").unwrap()), (5, "set.procs".to_string()));
        assert_eq!(locate(text, 0), (1, "a".to_string()));
    }
}
