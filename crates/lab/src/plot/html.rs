//! Self-contained HTML pages: the report of a results file (`tlbkit report`)
//! and the reproduction table with a chart per claim (`tlbkit reproduce --html`).
//!
//! A page holds its charts as inline SVG and its style as inline CSS; it has no
//! scripts and loads nothing, so it can be mailed or archived as one file.

use super::chart::{escape, Chart, Point, Series, XAxis};
use super::data::{ChartSpec, Coord, Results, Row};
use crate::claims::ClaimResult;
use crate::stats::{self, Summary, SYMBOLS};
use std::fmt::Write;
use tlbkit_sim::workload;

const STYLE: &str = "body{font-family:'DejaVu Sans',Verdana,sans-serif;margin:2em;color:#222;max-width:1600px}\
h1{font-size:1.5em}h2{font-size:1.25em;border-bottom:1px solid #ccc;margin-top:2em}h3{font-size:1.05em}\
.charts{display:flex;flex-wrap:wrap;gap:12px}.charts svg{border:1px solid #ddd}\
pre{background:#f6f6f6;padding:.6em;font-size:12px;overflow-x:auto}\
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px}\
td.num{text-align:right;font-family:'DejaVu Sans Mono',monospace}.note{color:#555}";

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

/// Returns the report page of `results` (read from `source`): per workload, a
/// chart of each of its results against the coordinate that varies (one line
/// per policy, min–max bars over seeds), one set of charts per value of the
/// other varying coordinates, and ministat tables comparing the policies at
/// every grid point.
pub fn report(results: &Results, source: &str) -> Result<String, String> {
    let mut body = String::new();
    let _ = writeln!(
        body,
        "<p>{} runs from <code>{}</code>. Marks are means over the runs at a point (seeds); bars span their \
         minimum to maximum. Tables are ministat's: every policy against the first in name order, Student's t at \
         95% confidence.</p>",
        results.rows.len(),
        escape(source)
    );
    let workloads = Results::values(&results.rows, "workload");
    if workloads.is_empty() {
        return Err(format!("{source}: no line has a 'workload': is it a results file of tlbkit sweep?"));
    }
    for wl in &workloads {
        let wl_filter = vec![("workload".to_string(), wl.to_string())];
        let rows = results.select(&wl_filter);
        let metrics = results_of(&wl.to_string(), &rows);
        let keys: Vec<String> = {
            let mut k: Vec<String> = Vec::new();
            for (name, _) in rows.iter().flat_map(|r| r.coords()) {
                if !k.contains(name) && !["policy", "workload", "seed"].contains(&name.as_str()) {
                    k.push(name.clone());
                }
            }
            k
        };
        let varying: Vec<String> =
            keys.iter().filter(|k| Results::values(rows.iter().copied(), k).len() > 1).cloned().collect();
        let fixed: Vec<String> = keys
            .iter()
            .filter(|k| !varying.contains(k))
            .map(|k| {
                let v: Vec<String> = Results::values(rows.iter().copied(), k).iter().map(|c| c.to_string()).collect();
                format!("{k}={}", v.join("|"))
            })
            .collect();
        let x = choose_x(&varying);
        let panel_keys: Vec<&String> = varying.iter().filter(|k| Some(*k) != x.as_ref()).collect();
        let _ = writeln!(body, "<h2>{}</h2>", escape(&wl.to_string()));
        let policies: Vec<String> =
            Results::values(rows.iter().copied(), "policy").iter().map(|c| c.to_string()).collect();
        let _ = writeln!(
            body,
            "<p>{} runs; policies {}; varying: {}; fixed: {}.</p>",
            rows.len(),
            escape(&policies.join(", ")),
            escape(&if varying.is_empty() { "nothing but the seed".into() } else { varying.join(", ") }),
            escape(&fixed.join(", "))
        );
        if metrics.is_empty() {
            body.push_str("<p class=\"note\">No results of this workload in the file.</p>\n");
            continue;
        }
        // Every combination of the panel coordinates that some run has.
        let mut panels: Vec<Vec<(String, String)>> = rows
            .iter()
            .map(|r| {
                panel_keys
                    .iter()
                    .map(|k| (k.to_string(), r.coord(k).map(|c| c.to_string()).unwrap_or_default()))
                    .collect()
            })
            .collect();
        panels.sort_by(|a, b| {
            let key = |p: &Vec<(String, String)>| p.iter().map(|(_, v)| coord_of_text(v)).collect::<Vec<Coord>>();
            key(a).cmp(&key(b))
        });
        panels.dedup();
        for panel in &panels {
            let mut filters = wl_filter.clone();
            filters.extend(panel.iter().cloned());
            if !panel.is_empty() {
                let p: Vec<String> = panel.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let _ = writeln!(body, "<h3>{}</h3>", escape(&p.join(", ")));
            }
            body.push_str("<div class=\"charts\">\n");
            for m in &metrics {
                let title = match panel.is_empty() {
                    true => format!("{wl}: {m}"),
                    false => {
                        let p: Vec<String> = panel.iter().map(|(k, v)| format!("{k}={v}")).collect();
                        format!("{wl}: {m} ({})", p.join(", "))
                    }
                };
                let spec = ChartSpec {
                    x: x.clone().unwrap_or_else(|| "policy".into()),
                    y: m.clone(),
                    group: x.as_ref().map(|_| "policy".into()),
                    filters: filters.clone(),
                    title: Some(title),
                };
                match results.chart(&spec) {
                    Ok((chart, _)) => body.push_str(&chart.to_svg(false)),
                    Err(e) => {
                        let _ = writeln!(body, "<p class=\"note\">{}</p>", escape(&e));
                    }
                }
            }
            body.push_str("</div>\n");
            // ministat per grid point: the panel, and each x value.
            let in_panel = results.select(&filters);
            let xs = x.as_ref().map(|k| Results::values(in_panel.iter().copied(), k)).unwrap_or_default();
            let points: Vec<Option<&Coord>> = if xs.is_empty() { vec![None] } else { xs.iter().map(Some).collect() };
            for xv in points {
                let at: Vec<&Row> = in_panel
                    .iter()
                    .copied()
                    .filter(|r| match (&x, xv) {
                        (Some(k), Some(v)) => r.coord(k).as_ref() == Some(v),
                        _ => true,
                    })
                    .collect();
                let mut pre = String::new();
                if let (Some(k), Some(v)) = (&x, xv) {
                    let _ = writeln!(pre, "{k}={v}");
                }
                for m in &metrics {
                    let sets: Vec<(String, Vec<f64>)> = Results::values(at.iter().copied(), "policy")
                        .iter()
                        .map(|p| {
                            let vals =
                                at.iter().filter(|r| r.coord("policy").as_ref() == Some(p)).filter_map(|r| r.figure(m));
                            (p.to_string(), vals.collect())
                        })
                        .collect();
                    pre.push_str(&ministat(m, &sets));
                    pre.push('\n');
                }
                let _ = writeln!(body, "<pre class=\"ministat\">{}</pre>", escape(pre.trim_end()));
            }
        }
    }
    Ok(page("tlbkit report", &body))
}

/// Returns the coordinate a filter's text stands for (a number if it reads as one).
fn coord_of_text(v: &str) -> Coord {
    v.parse::<f64>().map(Coord::Num).unwrap_or_else(|_| Coord::Text(v.to_string()))
}

/// Returns the chart of one claim: a pair of bars per variant, the seed's ratio
/// beside the simulated one.
pub fn claim_chart(r: &ClaimResult) -> Chart {
    let rows: Vec<(String, f64, f64)> = if r.variants.is_empty() {
        vec![(r.variant.clone(), r.seed_ratio, r.sim_ratio)]
    } else {
        r.variants.iter().map(|v| (v.name.clone(), v.seed_ratio, v.sim_ratio)).collect()
    };
    let bar = |i: usize, v: f64| Point { x: i as f64, mean: v, min: v, max: v, n: 1 };
    Chart {
        title: format!("{} (seed {})", r.id, r.seed),
        x_label: "variant".into(),
        y_label: format!("ratio: variant / {}", r.baseline),
        x_axis: XAxis::Categories(rows.iter().map(|(n, _, _)| n.clone()).collect()),
        series: vec![
            Series { name: "seed ratio".into(), points: rows.iter().enumerate().map(|(i, r)| bar(i, r.1)).collect() },
            Series {
                name: "simulated ratio".into(),
                points: rows.iter().enumerate().map(|(i, r)| bar(i, r.2)).collect(),
            },
        ],
        legend_title: None,
    }
}

/// Returns the reproduction page: the table `tlbkit reproduce` prints, then one
/// bar chart per claim.
pub fn claims_page(results: &[ClaimResult]) -> String {
    let mut b = String::new();
    b.push_str(
        "<p>Each claim of a seed paper, run in the simulator: the seed's ratio (variant over baseline) beside \
         the simulated one.</p>\n<table>\n<tr><th>claim</th><th>seed</th><th>baseline</th><th>variant</th>\
         <th>sim base</th><th>sim var</th><th>seed ratio</th><th>sim ratio</th><th>verdict</th></tr>\n",
    );
    for r in results {
        let rows: Vec<(&str, f64, f64, f64, String)> = if r.variants.is_empty() {
            vec![(r.variant.as_str(), r.sim_variant, r.seed_ratio, r.sim_ratio, r.verdict.clone())]
        } else {
            r.variants
                .iter()
                .map(|v| (v.name.as_str(), v.sim_variant, v.seed_ratio, v.sim_ratio, v.verdict_with_note()))
                .collect()
        };
        for (variant, sim_var, seed_ratio, sim_ratio, verdict) in rows {
            let _ = writeln!(
                b,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{:.4}</td>\
                 <td class=\"num\">{sim_var:.4}</td><td class=\"num\">{seed_ratio:.4}</td>\
                 <td class=\"num\">{sim_ratio:.4}</td><td>{}</td></tr>",
                escape(&r.id),
                escape(&r.seed),
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
        b.push_str(&claim_chart(r).to_svg(false));
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
            seed: "000".into(),
            description: "switches cost less with ASIDs".into(),
            baseline: "arm64-noasid".into(),
            variant: "arm64-freebsd-asid".into(),
            seed_ratio: 0.5,
            sim_ratio: 0.55,
            sim_baseline: 3.4,
            sim_variant: 1.87,
            checks: Vec::new(),
            verdict: "agrees".into(),
            variants: variants
                .iter()
                .map(|(n, s, m)| VariantResult {
                    name: n.to_string(),
                    seed_ratio: *s,
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
    fn claims_page_has_the_table_and_a_bar_pair_per_variant() {
        let page =
            claims_page(&[claim("asid", &[]), claim("multi", &[("v1", 2.0, 2.1), ("v2", 3.0, 2.9), ("v3", 1.0, 1.0)])]);
        assert!(page.starts_with("<!DOCTYPE html>") && !page.contains("<script"));
        // One table row per variant: 1 + 3, under the header.
        assert_eq!(page.matches("<tr>").count(), 5);
        assert_eq!(page.matches("<svg ").count(), 2);
        // Bars: a pair for the single claim, three pairs for the other.
        assert_eq!(page.matches("class=\"bar\"").count(), 2 + 6);
        assert!(page.contains(">seed ratio</text>") && page.contains(">simulated ratio</text>"));
        assert!(page.contains("ratio: variant / arm64-noasid"));
    }

    #[test]
    fn claims_page_carries_every_note_the_table_prints() {
        let mut multi = claim("seed004-exit", &[("simple", 1.08, 1.12), ("robust", 1.21, 1.27)]);
        multi.variants[0].expected_violations = 2400;
        multi.variants[0].note = Some("2400 expected violations of no_x: breaks a <contract> & more".into());
        multi.notes = vec!["ranking accepted as modelled: a < b".into()];
        let mut single = claim("seed002", &[]);
        single.notes = vec!["check tlb_misses falls at least 10x: sim 514.9580 -> 5.9940: holds".into()];
        let page = claims_page(&[multi.clone(), single.clone()]);
        // The verdict cell carries the variant's note, as the table's does.
        assert!(page.contains(&format!("<td>{}</td>", escape(&multi.variants[0].verdict_with_note()))), "{page}");
        assert!(page.contains("breaks a &lt;contract&gt; &amp; more)"), "{page}");
        // Every note under a claim, in the table and beside its chart.
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
