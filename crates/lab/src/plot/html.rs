//! Self-contained HTML pages: the report of a results file (`tlbkit report`)
//! and the reproduction table with a chart per claim (`tlbkit reproduce --html`).
//!
//! A page holds its charts as inline SVG and its style as inline CSS; it has no
//! scripts and loads nothing, so it can be mailed or archived as one file.

use super::chart::escape;
use super::data::{ChartSpec, Coord, Results, Row};
use super::forest;
use crate::claims::ClaimResult;
use crate::stats::{self, Summary, SYMBOLS};
use crate::Error;
use std::collections::BTreeMap;
use std::fmt::Write;
use tlbkit_sim::{metrics, workload};

const STYLE: &str = "body{font-family:'DejaVu Sans',Verdana,sans-serif;margin:2em;color:#222;max-width:1600px}\
h1{font-size:1.5em}h2{font-size:1.25em;border-bottom:1px solid #ccc;margin-top:2em}h3{font-size:1.05em}\
.charts{display:flex;flex-wrap:wrap;gap:12px}.charts svg{border:1px solid #ddd}\
pre{background:#f6f6f6;padding:.6em;font-size:12px;overflow-x:auto}\
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px}\
td.num{text-align:right;font-family:'DejaVu Sans Mono',monospace;white-space:nowrap}.note{color:#555}\
figure{margin:1em 0}figcaption{max-width:1060px;margin-top:.4em}";

/// Returns a whole page: `body` under a title.
fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{t}</title>\n\
         <style>{STYLE}</style>\n</head>\n<body>\n<h1>{t}</h1>\n{body}</body>\n</html>\n",
        t = escape(title)
    )
}

/// Returns ministat's table of `sets` (name, samples) for `metric`: each set's
/// figures, and every set after the first tested against the first. At most
/// seven sets (ministat's marks); more are left out with a note.
pub fn ministat(metric: &str, sets: &[(String, Vec<f64>)]) -> String {
    let mut out = format!("{metric}\n");
    let shown: Vec<(&(String, Vec<f64>), char)> = sets.iter().filter(|(_, v)| !v.is_empty()).zip(SYMBOLS).collect();
    for ((name, _), sym) in &shown {
        let _ = writeln!(out, "{sym} {name}");
    }
    let summaries: Vec<Summary> = shown.iter().filter_map(|((_, v), _)| Summary::of(v)).collect();
    let w = stats::n_width(summaries.iter().map(|s| s.n));
    out.push_str(&stats::vitals_header(w));
    out.push('\n');
    for (i, (s, (_, sym))) in summaries.iter().zip(&shown).enumerate() {
        out.push_str(&stats::vitals_line(*sym, s, w));
        out.push('\n');
        if i > 0 {
            if s.n + summaries[0].n >= 3 {
                out.push_str(&stats::verdict_text(&stats::compare(s, &summaries[0])));
            } else {
                out.push_str("(too few runs for Student's t: it needs three between the two sets)\n");
            }
        }
    }
    if sets.len() > shown.len() {
        let _ = writeln!(out, "({} more sets left out: ministat marks seven at most)", sets.len() - shown.len());
    }
    out
}

/// Returns the workload's results present in `rows`, headline first (for a
/// workload tlbkit does not know: every figure but `violations`).
fn results_of(name: &str, rows: &[&Row]) -> Vec<String> {
    let present = |m: &str| rows.iter().any(|r| r.figure(m).is_some());
    match workload::by_name(name) {
        Some(def) => def.results.iter().filter(|m| present(m)).map(|m| m.to_string()).collect(),
        None => rows
            .first()
            .map(|r| r.figures().map(|(k, _)| k.to_string()).filter(|k| k != "violations").collect())
            .unwrap_or_default(),
    }
}

/// Returns the x axis for a workload's report: the coordinate that varies,
/// preferring the workload's parameters (the last of them), then `cpus`, then
/// `machine`; `None` if only the policy and the seed vary.
fn choose_x(varying: &[String]) -> Option<String> {
    let params: Vec<&String> = varying.iter().filter(|k| *k != "machine" && *k != "cpus").collect();
    params
        .last()
        .map(|k| k.to_string())
        .or_else(|| varying.iter().find(|k| *k == "cpus").cloned())
        .or_else(|| varying.first().cloned())
}

/// Returns the reference policy at a grid point where `present` ran: the first
/// of `baselines` among them (the caller ends the list with every policy in
/// the results' order), else the first of them in name order.
fn reference<'a>(present: &'a [String], baselines: &[String]) -> Option<&'a String> {
    baselines.iter().find_map(|b| present.iter().find(|p| *p == b)).or_else(|| present.iter().min())
}

/// Returns `rows` grouped by grid point: every coordinate in `keys` (all but
/// the policy, the workload and the seed), in coordinate order.
fn grid_points<'a>(rows: &[&'a Row], keys: &[String]) -> BTreeMap<Vec<Coord>, Vec<&'a Row>> {
    let mut points: BTreeMap<Vec<Coord>, Vec<&Row>> = BTreeMap::new();
    for r in rows {
        let key = keys.iter().map(|k| r.coord(k).unwrap_or(Coord::Text(String::new()))).collect();
        points.entry(key).or_default().push(r);
    }
    points
}

/// Returns the figures `metric` of the runs of `policy` among `rows`.
fn samples(rows: &[&Row], policy: &str, metric: &str) -> Vec<f64> {
    rows.iter()
        .filter(|r| r.coord("policy").is_some_and(|p| p.to_string() == policy))
        .filter_map(|r| r.figure(metric))
        .collect()
}

/// Returns `lo – hi`, or one value where they are equal, in `%g` style.
fn range_text(values: &[f64]) -> String {
    let (lo, hi) = values.iter().fold((f64::MAX, f64::MIN), |(l, h), &v| (l.min(v), h.max(v)));
    if values.is_empty() {
        "-".into()
    } else if stats::format_g(lo, 4) == stats::format_g(hi, 4) {
        stats::format_g(lo, 4)
    } else {
        format!("{} – {}", stats::format_g(lo, 4), stats::format_g(hi, 4))
    }
}

/// One grid point of a summary row: the baseline's mean, the policy's, and
/// Student's t between them (`None` with fewer than three runs between the two).
type PointComparison = (f64, f64, Option<stats::Comparison>);

/// Returns the summary table of one workload's runs: per result and per policy
/// other than a grid point's baseline, the baseline's and the policy's means,
/// their ratio and the t tests' outcomes, over the grid points both ran at.
fn summary_rows(wl: &str, rows: &[&Row], keys: &[String], metrics: &[String], baselines: &[String]) -> String {
    let points = grid_points(rows, keys);
    let mut out = String::new();
    for m in metrics {
        let label = super::data::field_label(m, Some(wl));
        // (policy, baseline) -> per point: baseline mean, policy mean, t outcome.
        let mut pairs: BTreeMap<(String, String), Vec<PointComparison>> = BTreeMap::new();
        for at in points.values() {
            let present = policies_in(at);
            let Some(base) = reference(&present, baselines) else { continue };
            let Some(bs) = Summary::of(&samples(at, base, m)) else { continue };
            for p in present.iter().filter(|p| *p != base) {
                let Some(ps) = Summary::of(&samples(at, p, m)) else { continue };
                let t = (ps.n + bs.n >= 3).then(|| stats::compare(&ps, &bs));
                pairs.entry((p.clone(), base.clone())).or_default().push((bs.avg, ps.avg, t));
            }
        }
        for ((p, base), pts) in &pairs {
            // The ratio of the policy's means to the baseline's, pooled over the points.
            let (bsum, psum) = pts.iter().fold((0.0, 0.0), |(b, p), (bm, pm, _)| (b + bm, p + pm));
            let ratios: Vec<f64> = pts.iter().filter(|(b, _, _)| *b != 0.0).map(|(b, v, _)| v / b).collect();
            let (ratio, change) = if bsum != 0.0 {
                let g = psum / bsum;
                let word = match g {
                    g if g < 1.0 => "lower",
                    g if g > 1.0 => "higher",
                    _ => "same",
                };
                let spread = range_text(&ratios);
                let shown = match ratios.len() > 1 && spread.contains('–') {
                    true => format!("{g:.4} ({spread})"),
                    false => format!("{g:.4}"),
                };
                (shown, format!("{:+.1}% ({word})", (g - 1.0) * 100.0))
            } else if psum == bsum {
                ("-".to_string(), "none (both 0)".to_string())
            } else {
                ("-".to_string(), format!("{} (baseline 0)", if psum > 0.0 { "higher" } else { "lower" }))
            };
            let tests: Vec<&stats::Comparison> = pts.iter().filter_map(|(_, _, t)| t.as_ref()).collect();
            let lower = tests.iter().filter(|c| c.proven && c.difference < 0.0).count();
            let higher = tests.iter().filter(|c| c.proven && c.difference > 0.0).count();
            let mut t = Vec::new();
            if lower > 0 {
                t.push(format!("lower at {lower}"));
            }
            if higher > 0 {
                t.push(format!("higher at {higher}"));
            }
            if tests.len() > lower + higher {
                t.push(format!("no difference proven at {}", tests.len() - lower - higher));
            }
            if tests.len() < pts.len() {
                t.push(format!("too few runs at {}", pts.len() - tests.len()));
            }
            let base_means: Vec<f64> = pts.iter().map(|(b, _, _)| *b).collect();
            let means: Vec<f64> = pts.iter().map(|(_, v, _)| *v).collect();
            let mean_text = |v: &[f64]| {
                let mean = stats::format_g(v.iter().sum::<f64>() / v.len() as f64, 4);
                match range_text(v) {
                    r if v.len() > 1 && r.contains('–') => format!("{mean} ({r})"),
                    _ => mean,
                }
            };
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
                 <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
                escape(wl),
                escape(&label),
                escape(p),
                escape(base),
                pts.len(),
                escape(&mean_text(&base_means)),
                escape(&mean_text(&means)),
                escape(&ratio),
                escape(&change),
                escape(&t.join("; "))
            );
        }
    }
    out
}

/// Returns the report page of `results` (read from `source`): a summary table
/// of every policy against the baseline, then per workload a chart of each of
/// its results against the coordinate that varies (one line per policy,
/// min–max bars over seeds), one set of charts per value of the other varying
/// coordinates, and ministat tables comparing the policies at every grid point.
///
/// The baseline at a grid point is the first of `baselines` that ran there,
/// else the policy that comes first in the results there (a sweep runs its
/// file's `policies` in the order given, so that is the user's first); a name
/// in `baselines` that no run has is an error listing the policies the results
/// have.
pub fn report(results: &Results, source: &str, baselines: &[String]) -> Result<String, Error> {
    let order = baseline_order(results, source, baselines)?;
    let workloads = Results::values(&results.rows, "workload");
    if workloads.is_empty() {
        return Err(Error::NotSweepResults { origin: source.into() });
    }
    let mut report =
        Report { results, baselines: &order, summary: String::new(), body: String::new(), used: Vec::new() };
    for wl in &workloads {
        report.workload(&wl.to_string());
    }
    Ok(page("tlbkit report", &report.page_body(source, baselines)))
}

/// Returns the baselines in the order a grid point tries them: those `asked`
/// for, then every policy in the order of its first run; a name asked for
/// that no run has is an error listing the policies the results have.
fn baseline_order(results: &Results, source: &str, asked: &[String]) -> Result<Vec<String>, Error> {
    let all_policies: Vec<String> = Results::values(&results.rows, "policy").iter().map(|c| c.to_string()).collect();
    for b in asked {
        if !all_policies.contains(b) {
            return Err(Error::NoSuchBaseline { policy: b.clone(), origin: source.into(), valid: all_policies });
        }
    }
    let mut baselines: Vec<String> = asked.to_vec();
    for r in &results.rows {
        if let Some(p) = r.coord("policy").map(|c| c.to_string()) {
            if !baselines.contains(&p) {
                baselines.push(p);
            }
        }
    }
    Ok(baselines)
}

/// Returns the coordinates of `rows` that tell grid points apart: every one
/// but the policy, the workload and the seed, in the order first met.
fn grid_keys(rows: &[&Row]) -> Vec<String> {
    let mut k: Vec<String> = Vec::new();
    for (name, _) in rows.iter().flat_map(|r| r.coords()) {
        if !k.contains(name) && !["policy", "workload", "seed"].contains(&name.as_str()) {
            k.push(name.clone());
        }
    }
    k
}

/// Returns every combination of the coordinates `panel_keys` that some run
/// of `rows` has, in coordinate order: one panel of charts each.
fn panels(rows: &[&Row], panel_keys: &[&String]) -> Vec<Vec<(String, String)>> {
    let mut panels: Vec<Vec<(String, String)>> = rows
        .iter()
        .map(|r| {
            panel_keys.iter().map(|k| (k.to_string(), r.coord(k).map(|c| c.to_string()).unwrap_or_default())).collect()
        })
        .collect();
    panels.sort_by(|a, b| {
        let key = |p: &Vec<(String, String)>| p.iter().map(|(_, v)| coord_of_text(v)).collect::<Vec<Coord>>();
        key(a).cmp(&key(b))
    });
    panels.dedup();
    panels
}

/// Returns a panel's coordinates as its heading writes them (`procs=4, cpus=2`).
fn panel_text(panel: &[(String, String)]) -> String {
    let p: Vec<String> = panel.iter().map(|(k, v)| format!("{k}={v}")).collect();
    p.join(", ")
}

/// Returns the policies that ran among `rows`, in coordinate order.
fn policies_in(rows: &[&Row]) -> Vec<String> {
    Results::values(rows.iter().copied(), "policy").iter().map(|c| c.to_string()).collect()
}

/// A report page being written: the results, the baselines in the order a
/// grid point tries them, and the page's parts so far.
struct Report<'a> {
    /// The results reported.
    results: &'a Results,
    /// The baselines, in the order a grid point tries them.
    baselines: &'a [String],
    /// The summary table's rows.
    summary: String,
    /// The workloads' sections.
    body: String,
    /// The baselines of the grid points, in the order first used.
    used: Vec<String>,
}

impl Report<'_> {
    /// Adds workload `wl`: its summary rows, and its section of what varies,
    /// then per panel its charts and ministat tables.
    fn workload(&mut self, wl: &str) {
        let results = self.results;
        let wl_filter = vec![("workload".to_string(), wl.to_string())];
        let rows = results.select(&wl_filter);
        let metrics = results_of(wl, &rows);
        let keys = grid_keys(&rows);
        self.note_baselines(&rows, &keys);
        self.summary.push_str(&summary_rows(wl, &rows, &keys, &metrics, self.baselines));
        let varying: Vec<String> =
            keys.iter().filter(|k| Results::values(rows.iter().copied(), k).len() > 1).cloned().collect();
        let x = choose_x(&varying);
        let _ = writeln!(self.body, "<h2>{}</h2>", escape(wl));
        self.describe(&rows, &keys, &varying);
        if metrics.is_empty() {
            self.body.push_str("<p class=\"note\">No results of this workload in the file.</p>\n");
            return;
        }
        let panel_keys: Vec<&String> = varying.iter().filter(|k| Some(*k) != x.as_ref()).collect();
        for panel in &panels(&rows, &panel_keys) {
            let mut filters = wl_filter.clone();
            filters.extend(panel.iter().cloned());
            if !panel.is_empty() {
                let _ = writeln!(self.body, "<h3>{}</h3>", escape(&panel_text(panel)));
            }
            // An x of fewer than three values has no curve: a bar per policy
            // at each value compares them better than two marks a line.
            let in_panel = results.select(&filters);
            let xs = x.as_ref().map(|k| Results::values(in_panel.iter().copied(), k)).unwrap_or_default();
            let few_x = x.is_some() && xs.len() < 3;
            self.charts(wl, panel, &filters, x.as_deref(), few_x, &metrics);
            self.ministat_tables(&in_panel, x.as_deref(), &xs, &metrics);
        }
    }

    /// Adds the baseline of each grid point of `rows` (told apart by
    /// `keys`) to those used, if it is not there yet.
    fn note_baselines(&mut self, rows: &[&Row], keys: &[String]) {
        for at in grid_points(rows, keys).values() {
            if let Some(b) = reference(&policies_in(at), self.baselines) {
                if !self.used.contains(b) {
                    self.used.push(b.clone());
                }
            }
        }
    }

    /// Writes what a workload's `rows` are: how many runs, of which
    /// policies, the coordinates that vary and the fixed ones, and where
    /// their spread comes from.
    fn describe(&mut self, rows: &[&Row], keys: &[String], varying: &[String]) {
        let fixed: Vec<String> = keys
            .iter()
            .filter(|k| !varying.contains(k))
            .map(|k| {
                let v: Vec<String> = Results::values(rows.iter().copied(), k).iter().map(|c| c.to_string()).collect();
                format!("{k}={}", v.join("|"))
            })
            .collect();
        let _ = writeln!(
            self.body,
            "<p>{} runs; policies {}; varying: {}; fixed: {}.</p>",
            rows.len(),
            escape(&policies_in(rows).join(", ")),
            escape(&if varying.is_empty() { "nothing but the seed".into() } else { varying.join(", ") }),
            escape(&fixed.join(", "))
        );
        if let Some(n) = super::data::spread_note(rows) {
            let _ = writeln!(self.body, "<p class=\"note spread\">{}</p>", escape(&n));
        }
    }

    /// Writes the charts of a panel of workload `wl` (its runs: those
    /// `filters` select): one per result of `metrics` against `x`, as bars
    /// where `bars`; those 0 in every run are named, not drawn.
    fn charts(
        &mut self,
        wl: &str,
        panel: &[(String, String)],
        filters: &[(String, String)],
        x: Option<&str>,
        bars: bool,
        metrics: &[String],
    ) {
        self.body.push_str("<div class=\"charts\">\n");
        // Figures with nothing to draw (0 in every run of the panel) are
        // named in one line after the charts, not drawn empty.
        let mut flat: Vec<&str> = Vec::new();
        for m in metrics {
            let label = metrics::by_name(m).map_or(m.as_str(), |d| d.label);
            let title = match panel.is_empty() {
                true => format!("{wl}: {label}"),
                false => format!("{wl}: {label} ({})", panel_text(panel)),
            };
            let spec = ChartSpec {
                x: x.unwrap_or("policy").to_string(),
                y: m.clone(),
                group: x.map(|_| "policy".into()),
                filters: filters.to_vec(),
                title: Some(title),
                bars,
            };
            match self.results.chart(&spec) {
                Ok((chart, _)) if chart.series.iter().flat_map(|s| &s.points).all(|p| p.min == 0.0 && p.max == 0.0) => {
                    flat.push(label);
                }
                Ok((mut chart, _)) => {
                    // The spread's source is said once per workload, above its charts.
                    chart.note = None;
                    self.body.push_str(&chart.to_svg(false))
                }
                Err(e) => {
                    let _ = writeln!(self.body, "<p class=\"note\">{}</p>", escape(&e.to_string()));
                }
            }
        }
        self.body.push_str("</div>\n");
        if !flat.is_empty() {
            let _ =
                writeln!(self.body, "<p class=\"note\">Not drawn, 0 in every run: {}.</p>", escape(&flat.join(", ")));
        }
    }

    /// Writes ministat's tables of a panel's runs `in_panel`, one per grid
    /// point: at each value `xs` of `x`, or one for the panel without an x.
    fn ministat_tables(&mut self, in_panel: &[&Row], x: Option<&str>, xs: &[Coord], metrics: &[String]) {
        let points: Vec<Option<&Coord>> = if xs.is_empty() { vec![None] } else { xs.iter().map(Some).collect() };
        for xv in points {
            let at: Vec<&Row> = in_panel
                .iter()
                .copied()
                .filter(|r| match (x, xv) {
                    (Some(k), Some(v)) => r.coord(k).as_ref() == Some(v),
                    _ => true,
                })
                .collect();
            let present = policies_in(&at);
            let base = reference(&present, self.baselines).cloned().unwrap_or_default();
            let mut pre = String::new();
            if let (Some(k), Some(v)) = (x, xv) {
                let _ = writeln!(pre, "{k}={v}");
            }
            let _ = writeln!(pre, "baseline: {base}");
            // The baseline first: ministat tests every set against the first.
            let order: Vec<&String> = std::iter::once(&base).chain(present.iter().filter(|p| **p != base)).collect();
            for m in metrics {
                let sets: Vec<(String, Vec<f64>)> = order.iter().map(|p| (p.to_string(), samples(&at, p, m))).collect();
                pre.push_str(&ministat(m, &sets));
                pre.push('\n');
            }
            let _ = writeln!(self.body, "<pre class=\"ministat\">{}</pre>", escape(pre.trim_end()));
        }
    }

    /// Returns the page's body: what the runs are and the baselines `asked`
    /// for or chosen, the summary table, then the workloads' sections.
    fn page_body(&self, source: &str, asked: &[String]) -> String {
        let chosen = if asked.is_empty() {
            format!(
                "<strong>{}</strong>: at each grid point, the policy that comes first in the results (the sweep \
                 file's order) among those that ran there; choose another with <code>--baseline POLICY</code>",
                escape(&self.used.join(", "))
            )
        } else {
            format!(
                "<strong>{}</strong>: {} (<code>--baseline</code>), at each grid point the first of them that ran \
                 there, else the policy that comes first in the results",
                escape(&self.used.join(", ")),
                escape(&asked.join(", "))
            )
        };
        let mut head = String::new();
        let _ = writeln!(
            head,
            "<p>{} runs from <code>{}</code>. Baseline: {chosen}.</p>\n<h2>Summary</h2>\n<p>Per result, each policy \
             against the baseline at the grid points (same machine, CPUs and parameters; seeds pooled) where both ran. \
             The <b>means</b> are averaged over those points (the range of the points' own means in parentheses); \
             <b>ratio</b> is the policy's mean over the baseline's (the range of the points' own ratios in \
             parentheses); <b>change</b> is that ratio less 1: negative (lower) means the policy's figure is below \
             the baseline's, which for a time means faster. <b>t test</b> counts the points where Student's t at 95% \
             confidence proves the policy lower or higher (ministat's test, as in the tables below).</p>\n\
             <table class=\"summary\">\n<tr><th>workload</th><th>result</th><th>policy</th><th>baseline</th>\
             <th>points</th><th>baseline mean</th><th>policy mean</th><th>ratio policy / baseline</th><th>change</th>\
             <th>t test (95%)</th></tr>",
            self.results.rows.len(),
            escape(source)
        );
        head.push_str(&self.summary);
        head.push_str(
            "</table>\n<p>Below, per workload: marks are means over the runs at a point (seeds); bars span their \
             minimum to maximum. Tables are ministat's: every policy against the grid point's baseline (listed first), \
             Student's t at 95% confidence; a difference is the policy's mean less the baseline's.</p>\n",
        );
        head.push_str(&self.body);
        head
    }
}

/// Returns the coordinate a filter's text stands for (a number if it reads as one).
fn coord_of_text(v: &str) -> Coord {
    v.parse::<f64>().map(Coord::Num).unwrap_or_else(|_| Coord::Text(v.to_string()))
}

/// Returns the reproduction page: one forest plot of every claim
/// ([`forest`]), the table `tlbkit reproduce` prints, then each claim's
/// description and notes.
pub fn claims_page(results: &[ClaimResult]) -> String {
    let mut b = String::new();
    b.push_str(
        "<p>Each claim of an origin document, run in the simulator: the origin's ratio (variant over baseline) beside \
         the simulated one.</p>\n<figure>\n",
    );
    b.push_str(&forest::forest_svg(&forest::rows(results)));
    b.push_str(
        "<figcaption class=\"note\">Each simulated ratio is one run of the baseline and one of the variant \
         (seed 1, no <code>jitter</code>): the simulator is deterministic, so a ratio has no confidence interval, \
         and the shaded band is the verdict rule's tolerance around the origin's ratio, not a statistical interval. \
         Inside the band: reproduced; outside it on the origin's side of 1: direction-only; across 1: \
         not-reproduced.</figcaption>\n</figure>\n",
    );
    b.push_str(
        "<table>\n<tr><th>claim</th><th>origin</th><th>baseline</th><th>variant</th>\
         <th>sim base</th><th>sim var</th><th>origin ratio</th><th>sim ratio</th><th>verdict</th></tr>\n",
    );
    for r in results {
        let rows: Vec<(&str, f64, f64, f64, String)> = if r.variants.is_empty() {
            vec![(r.variant.as_str(), r.sim_variant, r.origin_ratio, r.sim_ratio, r.verdict.clone())]
        } else {
            r.variants
                .iter()
                .map(|v| (v.name.as_str(), v.sim_variant, v.origin_ratio, v.sim_ratio, v.verdict_with_note()))
                .collect()
        };
        for (variant, sim_var, origin_ratio, sim_ratio, verdict) in rows {
            let _ = writeln!(
                b,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{:.4}</td>\
                 <td class=\"num\">{sim_var:.4}</td><td class=\"num\">{origin_ratio:.4}</td>\
                 <td class=\"num\">{sim_ratio:.4}</td><td>{}</td></tr>",
                escape(&r.id),
                escape(&r.origin),
                escape(&r.baseline),
                escape(variant),
                r.sim_baseline,
                escape(&verdict)
            );
        }
        // The notes the terminal table prints under the claim's rows.
        for n in &r.notes {
            let _ = writeln!(b, "<tr><td></td><td colspan=\"8\" class=\"note\">{}</td></tr>", escape(n));
        }
    }
    b.push_str("</table>\n");
    for r in results {
        let _ = writeln!(b, "<h2>{}</h2>\n<p>{}</p>", escape(&r.id), escape(&r.description));
        for n in &r.notes {
            let _ = writeln!(b, "<p class=\"note\">{}</p>", escape(n));
        }
    }
    page("tlbkit reproduce", &b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claims::VariantResult;

    fn claim(id: &str, variants: &[(&str, f64, f64)]) -> ClaimResult {
        ClaimResult {
            id: id.into(),
            origin: "000".into(),
            description: "switches cost less with ASIDs".into(),
            baseline: "arm64-noasid".into(),
            variant: "arm64-freebsd-asid".into(),
            origin_ratio: 0.5,
            sim_ratio: 0.55,
            sim_baseline: 3.4,
            sim_variant: 1.87,
            metric: "us_per_switch".into(),
            unit: "µs".into(),
            checks: Vec::new(),
            verdict: "agrees".into(),
            variants: variants
                .iter()
                .map(|(n, s, m)| VariantResult {
                    name: n.to_string(),
                    sets: Vec::new(),
                    origin_ratio: *s,
                    sim_ratio: *m,
                    sim_variant: 1.0,
                    expected_violations: 0,
                    verdict: "agrees".into(),
                    note: None,
                })
                .collect(),
            notes: Vec::new(),
        }
    }

    #[test]
    fn claims_page_has_the_table_and_one_forest_row_per_variant() {
        let page =
            claims_page(&[claim("asid", &[]), claim("multi", &[("v1", 2.0, 2.1), ("v2", 3.0, 2.9), ("v3", 1.0, 1.0)])]);
        assert!(page.starts_with("<!DOCTYPE html>") && !page.contains("<script"));
        // One table row per variant: 1 + 3, under the header.
        assert_eq!(page.matches("<tr>").count(), 5);
        // One figure for every claim, a row per variant: 1 + 3.
        assert_eq!(page.matches("<svg ").count(), 1);
        assert_eq!(page.matches("<g class=\"row\"").count(), 4);
        assert!(page.contains(">multi · v2</text>") && page.contains(">asid</text>"), "{page}");
        assert!(page.contains("vs arm64-noasid"));
        assert!(page.contains("no confidence interval"));
    }

    fn sweep_lines() -> Results {
        let mut text = String::new();
        for (policy, base) in [("arm64-freebsd-asid", 2.0), ("arm64-noasid", 3.0), ("x86-linux-pcid", 1.0)] {
            for seed in 1..=3 {
                let v = base + seed as f64 * 0.01;
                text.push_str(&format!(
                    "{{\"machine\":\"m\",\"cpus\":1,\"policy\":\"{policy}\",\"workload\":\"lat_ctx\",\"procs\":2,\
                     \"seed\":{seed},\"jitter\":0.02,\"command\":\"c\",\"violations\":0,\"us_per_switch\":{v},\"overhead_us\":0}}\n"
                ));
            }
        }
        Results::parse(&text, "t").unwrap()
    }

    #[test]
    fn report_baseline_is_the_one_asked_for_and_the_summary_says_lower_or_higher() {
        let r = sweep_lines();
        // Default: the first policy of the results, named at the top.
        let page = report(&r, "t", &[]).unwrap();
        assert!(page.contains("Baseline: <strong>arm64-freebsd-asid</strong>: at each grid point, the policy that comes first in the results"), "{page}");
        assert!(page.contains("<td>arm64-noasid</td><td>arm64-freebsd-asid</td>"), "{page}");
        assert!(page.contains("+49.5% (higher)"), "{page}");
        // --baseline arm64-noasid: freebsd-asid is a third lower, proven at the one point.
        let page = report(&r, "t", &["arm64-noasid".into()]).unwrap();
        assert!(page.contains("<td>arm64-freebsd-asid</td><td>arm64-noasid</td>"), "{page}");
        assert!(page.contains("-33.1% (lower)"), "{page}");
        assert!(page.contains("<td>lower at 1</td>"), "{page}");
        assert!(page.contains("baseline: arm64-noasid\nus_per_switch\nx arm64-noasid\n+ arm64-freebsd-asid"), "{page}");
        // The summary comes before the first workload's section.
        assert!(page.find("class=\"summary\"").unwrap() < page.find("<h2>lat_ctx</h2>").unwrap());
        // Jitter is named beside the figures.
        assert!(page.contains("Spread over seeds is synthetic: these runs set jitter=0.02"), "{page}");
        // A figure 0 in every run is named, not drawn: one chart.
        assert_eq!(page.matches("<svg ").count(), 1, "{page}");
        assert!(page.contains("Not drawn, 0 in every run: "), "{page}");
        // The mean columns: the means (one point here).
        assert!(
            page.contains("<td class=\"num\">2.02</td><td class=\"num\">3.02</td>")
                || page.contains("<td class=\"num\">3.02</td><td class=\"num\">2.02</td>"),
            "{page}"
        );
        assert_eq!(page, report(&r, "t", &["arm64-noasid".into()]).unwrap());
    }

    #[test]
    fn report_refuses_a_baseline_the_results_lack() {
        let e = report(&sweep_lines(), "r.jsonl", &["arm64-linux".into()]).unwrap_err();
        assert!(matches!(&e, Error::NoSuchBaseline { policy, origin, valid }
            if policy == "arm64-linux" && origin == "r.jsonl" && valid.len() == 3));
        assert_eq!(
            e.to_string(),
            "baseline arm64-linux: no run of that policy in r.jsonl; the results have: arm64-freebsd-asid, \
             arm64-noasid, x86-linux-pcid"
        );
    }

    #[test]
    fn claims_page_carries_every_note_the_table_prints() {
        let mut multi = claim("origin004-exit", &[("simple", 1.08, 1.12), ("robust", 1.21, 1.27)]);
        multi.variants[0].expected_violations = 2400;
        multi.variants[0].note = Some("2400 expected violations of no_x: breaks a <contract> & more".into());
        multi.notes = vec!["ranking accepted as modelled: a < b".into()];
        let mut single = claim("origin002", &[]);
        single.notes = vec!["check tlb_misses falls at least 10x: sim 514.9580 -> 5.9940: holds".into()];
        let page = claims_page(&[multi.clone(), single.clone()]);
        // The verdict cell carries the variant's note, as the table's does.
        assert!(page.contains(&format!("<td>{}</td>", escape(&multi.variants[0].verdict_with_note()))), "{page}");
        assert!(page.contains("breaks a &lt;contract&gt; &amp; more)"), "{page}");
        // Every note under a claim, in the table and under its description.
        for n in multi.notes.iter().chain(&single.notes) {
            assert_eq!(page.matches(&escape(n)).count(), 2, "{n}: {page}");
        }
    }

    #[test]
    fn ministat_table_tests_every_set_against_the_first() {
        let t = ministat("m", &[("a".into(), vec![1.0, 2.0, 3.0]), ("b".into(), vec![11.0, 12.0, 13.0])]);
        assert!(t.contains("x a\n+ b\n"), "{t}");
        assert!(t.contains("Difference at 95.0% confidence\n\t10 +/- 2.26659\n"), "{t}");
    }
}
