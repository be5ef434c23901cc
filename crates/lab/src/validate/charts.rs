//! One small chart per curve of a validation: the published and the simulated
//! curve on the same axes. A curve of ratios (a trend) is drawn as it is; a
//! curve of absolute figures (a knee, a peak) is drawn relative to its first
//! point, since the two curves' units may differ (a stand-in benchmark, a
//! call timed differently) and what is judged is their shape.

use super::{Judged, Row};
use crate::plot::chart::{Chart, Datum, Series, XAxis};

/// Returns `(file name, SVG)` for every curve of `entries`: `H09-3.svg` is
/// entry H09's third row.
pub fn charts(entries: &[Judged]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for j in entries {
        for (i, r) in j.rows.iter().enumerate() {
            if r.curve.len() < 2 || r.error.is_some() {
                continue;
            }
            let name = format!("{}-{}.svg", j.id, i + 1);
            out.push((name, chart(j, r).to_svg(true)));
        }
    }
    out
}

fn chart(j: &Judged, r: &Row) -> Chart {
    let relative = r.label.contains("knee") || r.label.contains("peak");
    let series = |name: &str, pick: fn(&(f64, f64, f64)) -> f64| {
        let first = pick(&r.curve[0]);
        let points = r
            .curve
            .iter()
            .map(|c| {
                let v = if relative { pick(c) / first } else { pick(c) };
                Datum { x: c.0, mean: v, min: v, max: v, n: 1 }
            })
            .collect();
        Series { name: name.to_string(), points }
    };
    let verdict = match r.shape_right {
        Some(true) => "right",
        Some(false) => "WRONG",
        None => "",
    };
    Chart {
        title: format!("{} {}: {verdict}", j.id, r.label),
        x_label: "x (threads, tasks or pages, as the entry says)".into(),
        y_label: if relative { "relative to the first point".into() } else { "ratio after / before".into() },
        x_axis: XAxis::Numeric,
        series: vec![series("published", |c| c.2), series("simulated", |c| c.1)],
        legend_title: None,
        note: Some(r.detail.clone()),
    }
}
