//! The runs of a results file (`tlbkit sweep`'s JSON lines) and the charts made
//! of them: runs that share a point (same x, same group; different seeds, say)
//! become one mark at their mean with a min–max error bar.
//!
//! A line's keys before `command` are the run's coordinates (`machine`, `cpus`,
//! `policy`, `workload`, its parameters, `seed`); the keys after it are its
//! figures (`violations`, the workload's results, the metrics). Lines are read
//! in any order: points, series and categories are sorted, so a chart does not
//! depend on the order in which a sweep's runs finished.

use super::chart::{axis_label, Chart, Datum, Series, XAxis};
use crate::error::{Error, Param};
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use tlbkit_sim::{metrics, workload};

/// One value of a coordinate, ordered numbers first (by value), then text.
#[derive(Clone, Debug, PartialEq)]
pub enum Coord {
    /// A number.
    Num(f64),
    /// Anything else, as text.
    Text(String),
}

impl Coord {
    /// Returns the coordinate of a JSON value (a string without its quotes).
    pub fn of(v: &Value) -> Coord {
        match v {
            Value::Number(n) => Coord::Num(n.as_f64().unwrap_or(f64::NAN)),
            Value::String(s) => Coord::Text(s.clone()),
            other => Coord::Text(other.to_string()),
        }
    }
}

impl Eq for Coord {}

impl Ord for Coord {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Coord::Num(a), Coord::Num(b)) => a.total_cmp(b),
            (Coord::Num(_), Coord::Text(_)) => Ordering::Less,
            (Coord::Text(_), Coord::Num(_)) => Ordering::Greater,
            (Coord::Text(a), Coord::Text(b)) => a.cmp(b),
        }
    }
}

impl PartialOrd for Coord {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Coord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Coord::Num(x) => write!(f, "{x}"),
            Coord::Text(s) => f.write_str(s),
        }
    }
}

/// One results line: its keys and values in the order the line gives them.
#[derive(Clone, Debug, PartialEq)]
pub struct Row(pub Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Row {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Row, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Row;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Row, A::Error> {
                let mut fields = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, Value>()? {
                    fields.push((k, v));
                }
                Ok(Row(fields))
            }
        }
        d.deserialize_map(V)
    }
}

impl Row {
    /// Returns the value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Returns the coordinate `key` of the run.
    pub fn coord(&self, key: &str) -> Option<Coord> {
        self.get(key).map(Coord::of)
    }

    /// Returns the run's coordinates: the keys before `command`.
    pub fn coords(&self) -> impl Iterator<Item = &(String, Value)> {
        self.0.iter().take_while(|(k, _)| k != "command")
    }

    /// Returns the run's figures: the numeric values after `command`.
    pub fn figures(&self) -> impl Iterator<Item = (&str, f64)> {
        self.0.iter().skip_while(|(k, _)| k != "command").skip(1).filter_map(|(k, v)| Some((k.as_str(), v.as_f64()?)))
    }

    /// Returns the figure `key`.
    pub fn figure(&self, key: &str) -> Option<f64> {
        self.figures().find(|(k, _)| *k == key).map(|(_, v)| v)
    }
}

/// Returns the axis label of field or figure `name` of runs of `workload` (if
/// they share one): a figure's short name and unit from the metrics catalogue
/// ([`tlbkit_sim::metrics`]), a workload parameter's meaning with its key, the
/// common coordinates' names in words; anything else as [`axis_label`] gives it.
pub fn field_label(name: &str, workload: Option<&str>) -> String {
    if let Some(m) = metrics::by_name(name) {
        return m.axis_label();
    }
    let params = workload.and_then(workload::by_name).map(|w| w.params).unwrap_or(&[]);
    if let Some(p) = params.iter().find(|p| p.key == name) {
        return format!("{} ({name})", p.doc);
    }
    match name {
        "cpus" => "CPUs".into(),
        "machine" => "machine preset".into(),
        "policy" => "policy".into(),
        "seed" => "seed".into(),
        "violations" => "oracle violations".into(),
        _ => axis_label(name),
    }
}

/// Returns what the spread of `rows` over seeds comes from, for a note beside
/// their figure: `Some` when they were run with `--set jitter` (so that the
/// min–max bars and any confidence interval measure that synthetic noise, not a
/// real machine's) or when each point is a single run; `None` otherwise.
pub fn spread_note(rows: &[&Row]) -> Option<String> {
    let jitters = Results::values(rows.iter().copied(), "jitter");
    let seeds = Results::values(rows.iter().copied(), "seed");
    let shown: Vec<String> = jitters.iter().map(|j| j.to_string()).collect();
    match jitters.iter().any(|j| matches!(j, Coord::Num(v) if *v > 0.0)) {
        true => Some(format!(
            "Spread over seeds is synthetic: these runs set jitter={} (every compute time and system call scaled by \
             a random factor within ±jitter, drawn from the seed), so bars and confidence intervals measure that \
             noise and the seed's speculative fills, not a real machine's variation.",
            shown.join("|")
        )),
        false if seeds.len() > 1 => Some(
            "No jitter: seeds differ only in the simulator's seed-drawn events (speculative TLB fills, hardware \
             races); where every seed gives the same value there is no spread, and a difference is exact, not a \
             statistic."
                .into(),
        ),
        false => None,
    }
}

/// The runs of a results file.
#[derive(Clone, Debug, PartialEq)]
pub struct Results {
    /// Every line, in file order.
    pub rows: Vec<Row>,
}

/// The request for one chart.
#[derive(Clone, Debug, Default)]
pub struct ChartSpec {
    /// The x axis's field.
    pub x: String,
    /// The plotted figure.
    pub y: String,
    /// The field whose values are the series, if any.
    pub group: Option<String>,
    /// Only runs whose field has this value (its text, as `Coord` prints it).
    pub filters: Vec<(String, String)>,
    /// The title (default: "Y by X" and the filters).
    pub title: Option<String>,
    /// Draw a numeric x as categories, one band per value (a bar chart):
    /// for an x of one or two values, where a line has nothing to show.
    pub bars: bool,
}

impl Results {
    /// Reads the results file at `path`.
    pub fn load(path: &Path) -> Result<Results, Error> {
        let text = crate::error::read_file(path)?;
        Results::parse(&text, &path.display().to_string())
    }

    /// Parses JSON lines; a line that is not a JSON object is an error naming
    /// `origin` and the line's number. Blank lines are skipped.
    pub fn parse(text: &str, origin: &str) -> Result<Results, Error> {
        let mut rows = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let row: Row = serde_json::from_str(line).map_err(|source| Error::ResultsLine {
                origin: origin.to_string(),
                line: i + 1,
                source,
            })?;
            rows.push(row);
        }
        if rows.is_empty() {
            return Err(Error::NoRuns { origin: origin.to_string() });
        }
        Ok(Results { rows })
    }

    /// Returns every coordinate's name (the fields `--x` and `--group` take), in
    /// the order lines first give them.
    pub fn fields(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (k, _) in self.rows.iter().flat_map(|r| r.coords()) {
            if !out.contains(k) {
                out.push(k.clone());
            }
        }
        out
    }

    /// Returns every figure's name (the metrics `--y` takes), in the order lines
    /// first give them.
    pub fn metrics(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (k, _) in self.rows.iter().flat_map(|r| r.figures()) {
            if !out.iter().any(|o| o == k) {
                out.push(k.to_string());
            }
        }
        out
    }

    /// Returns the distinct values of coordinate `key` among `rows`, sorted.
    pub fn values<'a>(rows: impl IntoIterator<Item = &'a Row>, key: &str) -> Vec<Coord> {
        let mut v: Vec<Coord> = rows.into_iter().filter_map(|r| r.coord(key)).collect();
        v.sort();
        v.dedup();
        v
    }

    /// Returns the runs that pass `filters`.
    pub fn select(&self, filters: &[(String, String)]) -> Vec<&Row> {
        self.rows
            .iter()
            .filter(|r| filters.iter().all(|(k, v)| r.coord(k).is_some_and(|c| c.to_string() == *v)))
            .collect()
    }

    /// Returns the chart `spec` asks for, and the coordinates (besides x, the
    /// group and `seed`) that differ between runs pooled into one point.
    ///
    /// An unknown field or metric is an error listing the known ones.
    pub fn chart(&self, spec: &ChartSpec) -> Result<(Chart, Vec<String>), Error> {
        let fields = self.fields();
        let metrics = self.metrics();
        let check = |param: Param, name: &str| {
            if fields.iter().any(|f| f == name) {
                Ok(())
            } else {
                Err(Error::UnknownName { param, what: "field", name: name.to_string(), valid: fields.clone() })
            }
        };
        check(Param::X, &spec.x)?;
        if let Some(g) = &spec.group {
            check(Param::Group, g)?;
        }
        for (k, _) in &spec.filters {
            check(Param::Where, k)?;
        }
        if !metrics.contains(&spec.y) {
            return Err(Error::UnknownName { param: Param::Y, what: "metric", name: spec.y.clone(), valid: metrics });
        }
        let rows: Vec<&Row> = self
            .select(&spec.filters)
            .into_iter()
            .filter(|r| r.get(&spec.x).is_some() && r.figure(&spec.y).is_some())
            .filter(|r| spec.group.as_ref().is_none_or(|g| r.get(g).is_some()))
            .collect();
        if rows.is_empty() {
            return Err(Error::NoData { x: spec.x.clone(), y: spec.y.clone() });
        }
        let numeric = !spec.bars && rows.iter().all(|r| matches!(r.coord(&spec.x), Some(Coord::Num(_))));
        let cats = Results::values(rows.iter().copied(), &spec.x);
        let mut cells: BTreeMap<(Option<Coord>, Coord), Vec<f64>> = BTreeMap::new();
        for r in &rows {
            let g = spec.group.as_ref().and_then(|g| r.coord(g));
            let x = r.coord(&spec.x).unwrap_or(Coord::Num(f64::NAN));
            cells.entry((g, x)).or_default().push(r.figure(&spec.y).unwrap_or(f64::NAN));
        }
        let mut series: Vec<Series> = Vec::new();
        for ((g, x), ys) in &cells {
            let name = g.as_ref().map(|g| g.to_string()).unwrap_or_default();
            if series.last().is_none_or(|s| s.name != name) {
                series.push(Series { name: name.clone(), points: Vec::new() });
            }
            let xv = match x {
                Coord::Num(v) if numeric => *v,
                _ => cats.iter().position(|c| c == x).unwrap_or(0) as f64,
            };
            let n = ys.len();
            let mean = ys.iter().sum::<f64>() / n as f64;
            let (min, max) = ys.iter().fold((f64::MAX, f64::MIN), |(l, h), &v| (l.min(v), h.max(v)));
            if let Some(s) = series.last_mut() {
                s.points.push(Datum { x: xv, mean, min, max, n });
            }
        }
        // Coordinates that vary inside a point: the reader should know what a mark pools.
        let mut pooled = Vec::new();
        for f in &fields {
            if f == &spec.x || Some(f) == spec.group.as_ref() || f == "seed" {
                continue;
            }
            let varies = cells.keys().any(|(g, x)| {
                let inside = rows.iter().copied().filter(|r| {
                    r.coord(&spec.x).as_ref() == Some(x) && spec.group.as_ref().and_then(|k| r.coord(k)) == *g
                });
                Results::values(inside, f).len() > 1
            });
            if varies {
                pooled.push(f.clone());
            }
        }
        let runs_per_point: Vec<usize> = series.iter().flat_map(|s| s.points.iter().map(|p| p.n)).collect();
        let (lo, hi) =
            (runs_per_point.iter().min().copied().unwrap_or(0), runs_per_point.iter().max().copied().unwrap_or(0));
        let per = if lo == hi { format!("{lo}") } else { format!("{lo} to {hi}") };
        let title = spec.title.clone().unwrap_or_else(|| {
            // The figure's short name from the catalogue; the x field's key (its axis says what it is).
            let y = metrics::by_name(&spec.y).map_or(spec.y.as_str(), |m| m.label);
            let mut t = format!("{y} by {}", spec.x);
            if !spec.filters.is_empty() {
                let f: Vec<String> = spec.filters.iter().map(|(k, v)| format!("{k}={v}")).collect();
                t.push_str(&format!(" ({})", f.join(", ")));
            }
            t
        });
        let workloads = Results::values(rows.iter().copied(), "workload");
        let wl = match workloads.as_slice() {
            [Coord::Text(w)] => Some(w.as_str()),
            _ => None,
        };
        let chart = Chart {
            title,
            x_label: field_label(&spec.x, wl),
            y_label: format!("{} — mean of {per} run{}", field_label(&spec.y, wl), if hi == 1 { "" } else { "s" }),
            x_axis: if numeric {
                XAxis::Numeric
            } else {
                XAxis::Categories(cats.iter().map(|c| c.to_string()).collect())
            },
            series,
            legend_title: spec.group.clone(),
            note: spread_note(&rows),
        };
        Ok((chart, pooled))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINES: &str = concat!(
        r#"{"machine":"m","cpus":1,"policy":"b","workload":"w","procs":2,"seed":1,"command":"c1","violations":0,"lat_us":3.0,"misses":10}"#,
        "\n",
        r#"{"machine":"m","cpus":1,"policy":"b","workload":"w","procs":2,"seed":2,"command":"c2","violations":0,"lat_us":5.0,"misses":12}"#,
        "\n",
        r#"{"machine":"m","cpus":1,"policy":"a","workload":"w","procs":8,"seed":1,"command":"c3","violations":0,"lat_us":1.0,"misses":4}"#,
        "\n",
        r#"{"machine":"m","cpus":1,"policy":"a","workload":"w","procs":2,"seed":1,"command":"c4","violations":0,"lat_us":2.0,"misses":4}"#,
        "\n",
    );

    #[test]
    fn fields_are_coordinates_and_metrics_are_figures() {
        let r = Results::parse(LINES, "t").unwrap();
        assert_eq!(r.fields(), ["machine", "cpus", "policy", "workload", "procs", "seed"]);
        assert_eq!(r.metrics(), ["violations", "lat_us", "misses"]);
    }

    #[test]
    fn runs_sharing_a_point_give_mean_min_and_max() {
        let r = Results::parse(LINES, "t").unwrap();
        let spec =
            ChartSpec { x: "procs".into(), y: "lat_us".into(), group: Some("policy".into()), ..Default::default() };
        let (c, pooled) = r.chart(&spec).unwrap();
        assert_eq!(c.x_axis, XAxis::Numeric);
        assert!(pooled.is_empty());
        // Series sorted by name whatever the line order.
        assert_eq!(c.series[0].name, "a");
        assert_eq!(c.series[0].points.len(), 2);
        assert_eq!(c.series[1].points, vec![Datum { x: 2.0, mean: 4.0, min: 3.0, max: 5.0, n: 2 }]);
        assert_eq!(c.y_label, "lat_us (µs) — mean of 1 to 2 runs");
    }

    #[test]
    fn text_x_makes_a_bar_chart_and_pooled_coordinates_are_named() {
        let r = Results::parse(LINES, "t").unwrap();
        let spec = ChartSpec { x: "policy".into(), y: "misses".into(), ..Default::default() };
        let (c, pooled) = r.chart(&spec).unwrap();
        assert_eq!(c.x_axis, XAxis::Categories(vec!["a".into(), "b".into()]));
        assert_eq!(pooled, ["procs"]);
    }

    #[test]
    fn unknown_names_list_the_known_ones() {
        let r = Results::parse(LINES, "t").unwrap();
        let e = r.chart(&ChartSpec { x: "nope".into(), y: "lat_us".into(), ..Default::default() }).unwrap_err();
        assert!(matches!(&e, Error::UnknownName { param: Param::X, what: "field", name, valid }
            if name == "nope" && valid[..3] == ["machine", "cpus", "policy"]));
        assert_eq!(
            e.to_string(),
            "unknown field 'nope' for x; the results have: machine, cpus, policy, workload, procs, seed"
        );
        let spec =
            ChartSpec { x: "procs".into(), y: "lat_us".into(), group: Some("nope".into()), ..Default::default() };
        assert_eq!(r.chart(&spec).unwrap_err().param(), Some(Param::Group));
        let spec = ChartSpec { filters: vec![("nope".into(), "1".into())], ..spec };
        assert_eq!(r.chart(&ChartSpec { group: None, ..spec }).unwrap_err().param(), Some(Param::Where));
        let e = r.chart(&ChartSpec { x: "procs".into(), y: "nope".into(), ..Default::default() }).unwrap_err();
        assert!(matches!(&e, Error::UnknownName { param: Param::Y, what: "metric", name, valid }
            if name == "nope" && *valid == ["violations", "lat_us", "misses"]));
        assert!(e.to_string().starts_with("unknown metric 'nope' for y;"), "{e}");
    }

    #[test]
    fn malformed_line_is_named_by_number() {
        let text = format!("{LINES}{{\"machine\": \n");
        let e = Results::parse(&text, "r.jsonl").unwrap_err();
        assert!(matches!(&e, Error::ResultsLine { origin, line: 5, .. } if origin == "r.jsonl"), "{e:?}");
        assert!(std::error::Error::source(&e).is_some());
        assert!(e.to_string().starts_with("r.jsonl:5: not a results line (a JSON object): "), "{e}");
        assert!(matches!(Results::parse("\n", "r.jsonl"), Err(Error::NoRuns { .. })));
    }
}
