//! The forest plot of `tlbkit reproduce --html`: one row per claim (per
//! variant, for a claim with several), on a logarithmic ratio axis, with the
//! simulated ratio, the origin's reported ratio, the tolerance band of the
//! verdict rule ([`crate::claims`]) and a vertical line at 1 (no change).
//!
//! A ratio axis is logarithmic because the verdict rule is: halving and
//! doubling lie equally far from 1, and the tolerance band is symmetric around
//! the origin's ratio in `ln`.

use super::chart::{escape, wrap, FONT};
use crate::claims::{ClaimResult, CLAIMS};
use std::fmt::Write;
use tlbkit_sim::metrics;

/// One row of the plot.
#[derive(Clone, Debug, PartialEq)]
pub struct ForestRow {
    /// The first line of the row's label (the claim's id, and the variant's name).
    pub label: String,
    /// The second line: what is compared.
    pub detail: String,
    /// The origin's ratio, variant / baseline.
    pub origin_ratio: f64,
    /// The simulated ratio.
    pub sim_ratio: f64,
    /// The verdict.
    pub verdict: String,
    /// The tooltip: the claim's description.
    pub description: String,
}

/// Returns the tolerance of the verdict rule around `origin` in `ln` units:
/// `max(0.05, 0.35 * |ln origin|)`, so that the band is `origin * exp(±tol)`.
pub fn tolerance(origin: f64) -> f64 {
    (0.35 * origin.ln().abs()).max(0.05)
}

/// Returns the ratios a simulated ratio must lie between to be `reproduced`
/// against `origin`: `origin * exp(±tolerance)`, cut at 1 on the side away from
/// the origin (a ratio across 1 has the wrong direction, whatever its distance).
pub fn band(origin: f64) -> (f64, f64) {
    let t = tolerance(origin).exp();
    let (lo, hi) = (origin / t, origin * t);
    if origin < 1.0 {
        (lo, hi.min(1.0))
    } else {
        (lo.max(1.0), hi)
    }
}

/// Returns the rows of `results`: one per claim, or one per variant of a claim
/// with several.
pub fn rows(results: &[ClaimResult]) -> Vec<ForestRow> {
    let mut out = Vec::new();
    for r in results {
        let metric = CLAIMS
            .iter()
            .find(|c| c.id == r.id)
            .map(|c| c.metric)
            .map(|m| metrics::by_name(m).map_or_else(|| m.to_string(), |d| d.label.to_string()))
            .unwrap_or_else(|| "ratio".into());
        if r.variants.is_empty() {
            out.push(ForestRow {
                label: r.id.clone(),
                detail: format!("{metric}: {} vs {}", r.variant, r.baseline),
                origin_ratio: r.origin_ratio,
                sim_ratio: r.sim_ratio,
                verdict: r.verdict.clone(),
                description: r.description.clone(),
            });
        }
        for v in &r.variants {
            out.push(ForestRow {
                label: format!("{} · {}", r.id, v.name),
                detail: format!("{metric}: vs {}", r.baseline),
                origin_ratio: v.origin_ratio,
                sim_ratio: v.sim_ratio,
                verdict: v.verdict.clone(),
                description: r.description.clone(),
            });
        }
    }
    out
}

const WIDTH: f64 = 1060.0;
const LABELS: f64 = 400.0;
const PLOT_LEFT: f64 = 420.0;
const PLOT_RIGHT: f64 = 880.0;
const ROW: f64 = 36.0;
const TOP: f64 = 92.0;
/// The simulated ratio's colour (Okabe and Ito's blue) and the origin's (vermillion).
const SIM: &str = "#0072B2";
const ORIGIN: &str = "#D55E00";

/// Returns the 1-2-5 ticks of a logarithmic axis covering `lo..=hi` (both > 0),
/// or every whole multiple of each power of ten (0.5, 0.6, ... 1) where that
/// gives fewer than four.
pub fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let coarse = log_ticks_of(lo, hi, &[1.0, 2.0, 5.0]);
    if coarse.len() >= 4 {
        return coarse;
    }
    log_ticks_of(lo, hi, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
}

/// Returns the ticks `m * 10^k` (for each `m` of `mantissas`) in `lo..=hi`.
fn log_ticks_of(lo: f64, hi: f64, mantissas: &[f64]) -> Vec<f64> {
    let mut out = Vec::new();
    let mut decade = 10f64.powf(lo.log10().floor());
    while decade <= hi * 10.0 {
        for &m in mantissas {
            let t = m * decade;
            if t >= lo * 0.999_999 && t <= hi * 1.000_001 {
                out.push(t);
            }
        }
        decade *= 10.0;
    }
    out
}

/// Returns a tick's label on the ratio axis (`0.05`, `1`, `20`).
fn ratio_label(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Returns the forest plot of `rows` as SVG to inline in HTML.
pub fn forest_svg(rows: &[ForestRow]) -> String {
    let axis = RatioAxis::of(rows);
    let bottom = TOP + ROW * rows.len() as f64;
    let mut o = String::new();
    draw_head(&mut o, bottom + 78.0);
    draw_legend(&mut o);
    // The grid and ticks under the rows; the line at 1 and the axis over them.
    draw_grid(&mut o, &axis, bottom);
    o.push_str("<g class=\"rows\">\n");
    for (i, r) in rows.iter().enumerate() {
        draw_row(&mut o, &axis, i, r);
    }
    o.push_str("</g>\n");
    draw_axis(&mut o, &axis, bottom);
    o.push_str("</svg>\n");
    o
}

/// The ratio axis: its ends, at the 1-2-5 ticks just outside every ratio
/// and band edge, and 1.
struct RatioAxis {
    /// The lowest ratio on the axis.
    lo: f64,
    /// The highest ratio on the axis.
    hi: f64,
}

impl RatioAxis {
    /// Returns the axis of `rows`: every ratio and band edge, and 1, with a
    /// margin, out to 1-2-5 ticks.
    fn of(rows: &[ForestRow]) -> RatioAxis {
        let mut lo: f64 = 1.0;
        let mut hi: f64 = 1.0;
        for r in rows {
            let (b0, b1) = band(r.origin_ratio);
            for v in [b0, b1, r.sim_ratio] {
                if v.is_finite() && v > 0.0 {
                    lo = lo.min(v);
                    hi = hi.max(v);
                }
            }
        }
        // The range extends to the ticks just outside the data.
        let steps = [1.0, 2.0, 5.0];
        let below = |v: f64| log_ticks_of(v / 10.0, v, &steps).into_iter().rfind(|t| *t <= v).unwrap_or(v);
        let above = |v: f64| log_ticks_of(v, v * 10.0, &steps).into_iter().find(|t| *t >= v).unwrap_or(v);
        RatioAxis { lo: below(lo), hi: above(hi) }
    }

    /// Returns the horizontal position of ratio `v` (clamped to the axis).
    fn x(&self, v: f64) -> f64 {
        let v = v.clamp(self.lo, self.hi);
        PLOT_LEFT + (v.ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln()) * (PLOT_RIGHT - PLOT_LEFT)
    }
}

/// Draws the opening of the SVG, `height` pixels high: its element, title,
/// white ground and the plot's title.
fn draw_head(o: &mut String, height: f64) {
    let _ = writeln!(
        o,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"forest\" width=\"{WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {WIDTH} {height}\" font-family=\"{FONT}\" font-size=\"12\">"
    );
    let title = "Every claim: simulated ratio against the origin's, variant / baseline";
    let _ = writeln!(o, "<title>{title}</title>");
    let _ = writeln!(o, "<rect width=\"{WIDTH}\" height=\"{height}\" fill=\"white\"/>");
    let _ = writeln!(
        o,
        "<text class=\"title\" x=\"{:.1}\" y=\"24\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">\
         {title}</text>",
        WIDTH / 2.0
    );
}

/// Draws the legend, one line across the top, and the columns' headings.
fn draw_legend(o: &mut String) {
    let ly = 50.0;
    o.push_str("<g class=\"legend\">\n");
    let _ = writeln!(
        o,
        "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"5\" fill=\"{SIM}\"/><text x=\"{:.1}\" y=\"{:.1}\">simulated ratio (one \
         run each)</text>",
        LABELS - 300.0,
        ly - 4.0,
        LABELS - 290.0,
        ly
    );
    let _ = writeln!(
        o,
        "{}<text x=\"{:.1}\" y=\"{:.1}\">origin's reported ratio</text>",
        diamond(LABELS - 80.0, ly - 4.0, 6.0, ORIGIN),
        LABELS - 68.0,
        ly
    );
    let _ = writeln!(
        o,
        "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"22\" height=\"12\" fill=\"#f2c9a6\" fill-opacity=\"0.6\"/>\
         <text x=\"{:.1}\" y=\"{:.1}\">tolerance: |ln sim − ln origin| ≤ max(0.05, 0.35·|ln origin|)</text>",
        LABELS + 90.0,
        ly - 10.0,
        LABELS + 118.0,
        ly
    );
    let _ = writeln!(
        o,
        "<path d=\"M{:.1},{:.1} v14\" stroke=\"#333\" stroke-dasharray=\"4 3\"/><text x=\"{:.1}\" y=\"{:.1}\">1: no \
         change</text>",
        LABELS + 480.0,
        ly - 11.0,
        LABELS + 488.0,
        ly
    );
    o.push_str("</g>\n");
    let _ = writeln!(
        o,
        "<text x=\"{:.1}\" y=\"{:.1}\" font-weight=\"bold\">claim</text><text x=\"{:.1}\" y=\"{:.1}\" \
         font-weight=\"bold\">verdict</text>",
        12.0,
        TOP - 8.0,
        PLOT_RIGHT + 14.0,
        TOP - 8.0
    );
}

/// Draws the grid lines and ticks of `axis`, from the top of the rows down
/// to `bottom`.
fn draw_grid(o: &mut String, axis: &RatioAxis, bottom: f64) {
    o.push_str("<g class=\"x-axis\">\n");
    for t in log_ticks(axis.lo, axis.hi) {
        let x = axis.x(t);
        let _ = writeln!(
            o,
            "<line x1=\"{x:.1}\" y1=\"{TOP:.1}\" x2=\"{x:.1}\" y2=\"{bottom:.1}\" stroke=\"#d8d8d8\" \
             stroke-width=\"0.8\"/><line x1=\"{x:.1}\" y1=\"{bottom:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#333\"/>\
             <text class=\"tick\" x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            bottom + 5.0,
            bottom + 19.0,
            ratio_label(t)
        );
    }
    o.push_str("</g>\n");
}

/// Draws row `i`: a shaded stripe every other row, the label, the band and
/// the marks, and the verdict.
fn draw_row(o: &mut String, axis: &RatioAxis, i: usize, r: &ForestRow) {
    let y = TOP + ROW * i as f64;
    let mid = y + ROW / 2.0;
    let _ = writeln!(
        o,
        "<g class=\"row\" data-claim=\"{}\"><title>{}: {}; origin {}, simulated {:.4}: {}</title>",
        escape(&r.label),
        escape(&r.label),
        escape(&r.description),
        ratio_label(r.origin_ratio),
        r.sim_ratio,
        escape(&r.verdict)
    );
    if i.is_multiple_of(2) {
        let _ =
            writeln!(o, "<rect x=\"4\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{ROW}\" fill=\"#f4f6f8\"/>", WIDTH - 8.0);
    }
    let _ = writeln!(
        o,
        "<text class=\"label\" x=\"12\" y=\"{:.1}\" font-weight=\"bold\">{}</text>",
        mid - 3.0,
        escape(&r.label)
    );
    let detail = wrap(&r.detail, 62).into_iter().next().unwrap_or_default();
    let _ = writeln!(
        o,
        "<text class=\"detail\" x=\"12\" y=\"{:.1}\" font-size=\"11\" fill=\"#555\">{}</text>",
        mid + 11.0,
        escape(&detail)
    );
    let (b0, b1) = band(r.origin_ratio);
    let (b0, b1) = (axis.x(b0), axis.x(b1));
    let _ = writeln!(
        o,
        "<rect class=\"band\" x=\"{b0:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#f2c9a6\" \
         fill-opacity=\"0.6\"/>",
        y + 7.0,
        b1 - b0,
        ROW - 14.0
    );
    let _ = writeln!(
        o,
        "{}",
        diamond(axis.x(r.origin_ratio), mid, 7.0, ORIGIN).replace("<path ", "<path class=\"origin\" ")
    );
    if r.sim_ratio.is_finite() && r.sim_ratio > 0.0 {
        let _ = writeln!(
            o,
            "<circle class=\"sim\" cx=\"{:.1}\" cy=\"{mid:.1}\" r=\"5\" fill=\"{SIM}\"/>",
            axis.x(r.sim_ratio)
        );
    }
    let colour = match r.verdict.as_str() {
        "reproduced" => "#1a7a3a",
        "direction-only" => "#9a6200",
        _ => "#b00020",
    };
    let _ = writeln!(
        o,
        "<text class=\"verdict\" x=\"{:.1}\" y=\"{:.1}\" fill=\"{colour}\">{}</text>",
        PLOT_RIGHT + 14.0,
        mid + 4.0,
        escape(&r.verdict)
    );
    o.push_str("</g>\n");
}

/// Draws what lies over the rows: the line at 1, the axis at `bottom` and
/// its label.
fn draw_axis(o: &mut String, axis: &RatioAxis, bottom: f64) {
    let one = axis.x(1.0);
    let _ = writeln!(
        o,
        "<line class=\"one\" x1=\"{one:.1}\" y1=\"{:.1}\" x2=\"{one:.1}\" y2=\"{bottom:.1}\" stroke=\"#333\" \
         stroke-dasharray=\"4 3\"/>",
        TOP - 4.0
    );
    let _ = writeln!(
        o,
        "<path class=\"axes\" d=\"M{PLOT_LEFT:.1},{bottom:.1} H{PLOT_RIGHT:.1}\" stroke=\"#333\" fill=\"none\"/>"
    );
    let _ = writeln!(
        o,
        "<text class=\"x-label\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"13\">ratio: variant / \
         baseline (log scale; below 1: the variant's figure is lower)</text>",
        (PLOT_LEFT + PLOT_RIGHT) / 2.0,
        bottom + 40.0
    );
}

/// Returns a diamond of half-width `r` centred on (`x`, `y`), outlined in
/// `colour` and filled white (an open marker, told from the filled circle).
fn diamond(x: f64, y: f64, r: f64, colour: &str) -> String {
    format!(
        "<path d=\"M{:.1},{y:.1} L{x:.1},{:.1} L{:.1},{y:.1} L{x:.1},{:.1} Z\" fill=\"white\" fill-opacity=\"0.6\" \
         stroke=\"{colour}\" stroke-width=\"2\"/>",
        x - r,
        y - r,
        x + r,
        y + r
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(label: &str, origin: f64, sim: f64, verdict: &str) -> ForestRow {
        ForestRow {
            label: label.into(),
            detail: "time per context switch: a vs b".into(),
            origin_ratio: origin,
            sim_ratio: sim,
            verdict: verdict.into(),
            description: "d".into(),
        }
    }

    #[test]
    fn log_ticks_are_one_two_five_in_range() {
        assert_eq!(log_ticks(0.05, 10.0), [0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0]);
        let fine: Vec<String> = log_ticks(0.5, 1.0).into_iter().map(ratio_label).collect();
        assert_eq!(fine, ["0.5", "0.6", "0.7", "0.8", "0.9", "1"]);
    }

    #[test]
    fn tolerance_band_is_where_the_verdict_rule_says_reproduced() {
        use crate::claims::verdict;
        // Each band edge is exactly where the verdict turns, on both sides.
        for origin in [0.0643, 0.8114, 0.97, 0.99, 1.02, 2.9, 8.68] {
            let (lo, hi) = band(origin);
            assert_eq!(verdict(origin, lo * 1.001), "reproduced", "{origin}");
            assert_eq!(verdict(origin, hi * 0.999), "reproduced", "{origin}");
            assert_ne!(verdict(origin, lo * 0.999), "reproduced", "{origin}");
            assert_ne!(verdict(origin, hi * 1.001), "reproduced", "{origin}");
        }
        // Near 1 the band stops at 1: across it the direction is wrong.
        assert_eq!(band(0.99).1, 1.0);
        assert_eq!(band(1.02).0, 1.0);
    }

    #[test]
    fn forest_has_a_row_band_and_two_marks_per_claim_and_a_line_at_one() {
        let svg = forest_svg(&[row("a", 0.5, 0.55, "reproduced"), row("b<c", 8.68, 5.9, "direction-only")]);
        assert_eq!(svg.matches("<g class=\"row\"").count(), 2);
        assert_eq!(svg.matches("class=\"band\"").count(), 2);
        assert_eq!(svg.matches("class=\"sim\"").count(), 2);
        assert_eq!(svg.matches("class=\"origin\"").count(), 2);
        assert_eq!(svg.matches("class=\"one\"").count(), 1);
        assert!(svg.contains(">b&lt;c</text>"));
        // The axis reaches past both band edges of 8.68 and includes 1.
        assert!(svg.contains(">1</text>") && svg.contains(">20</text>"), "{svg}");
        // The grid lies under the rows.
        assert!(svg.find("class=\"x-axis\"").unwrap() < svg.find("class=\"rows\"").unwrap());
        assert_eq!(svg.matches("<g").count(), svg.matches("</g>").count());
        assert_eq!(svg, forest_svg(&[row("a", 0.5, 0.55, "reproduced"), row("b<c", 8.68, 5.9, "direction-only")]));
    }
}
