//! A line or bar chart with labelled axes, tick labels, a legend and min–max
//! error bars, written as SVG text (no dependencies).
//!
//! A line chart has a numeric x axis; a bar chart has one band per category and
//! one bar per series in each band. Every point carries a mean (the mark) and a
//! min and max (the error bar, drawn only where they differ). The y axis starts
//! at 0 when every value is positive, so bar heights compare honestly.
//!
//! Each series of a line chart has its own colour, marker shape and dash
//! pattern, so that series are told apart without colour; a series of fewer
//! than three points gets markers only (a line through two points suggests a
//! trend nobody measured). Where the marks of two series coincide (closer than
//! a marker), every series is nudged sideways by a few pixels and the legend
//! says so. Titles and axis labels too long for the chart wrap onto more lines.

use std::fmt::Write;

/// The kind of chart: what the x axis holds.
#[derive(Clone, Debug, PartialEq)]
pub enum XAxis {
    /// Numbers: points joined by lines, in x order.
    Numeric,
    /// Categories, in this order: a point's `x` is its category's index.
    Categories(Vec<String>),
}

/// One point: the mean of the runs at one x, and their extremes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Datum {
    /// The x value (for a bar chart, the category's index).
    pub x: f64,
    /// Mean of the runs.
    pub mean: f64,
    /// Smallest run.
    pub min: f64,
    /// Largest run.
    pub max: f64,
    /// How many runs.
    pub n: usize,
}

/// One line, or one bar per category: a legend entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// The legend's text (empty: no legend entry).
    pub name: String,
    /// Points in x order.
    pub points: Vec<Datum>,
}

/// A chart, ready to be written as SVG.
#[derive(Clone, Debug, PartialEq)]
pub struct Chart {
    /// Title above the plot.
    pub title: String,
    /// The x axis's label.
    pub x_label: String,
    /// The y axis's label.
    pub y_label: String,
    /// What the x axis holds.
    pub x_axis: XAxis,
    /// The lines or bar sets.
    pub series: Vec<Series>,
    /// The legend's title (e.g. the `--group` field), if any.
    pub legend_title: Option<String>,
    /// A remark printed under the chart (e.g. where its spread comes from).
    pub note: Option<String>,
}

/// How a chart is drawn: its size, its type and its axes' scales
/// (`tlbkit plot --width --height --font --font-size --log-x --log-y`).
///
/// A larger font is a smaller drawing scaled up: the chart is laid out on a
/// canvas of the size divided by `font_size / 12` at the default sizes of
/// its texts and marks, then drawn at the size asked for, so that texts,
/// marks and lines grow together and the layout (wrapping, margins) fits
/// them.
#[derive(Clone, Debug, PartialEq)]
pub struct Style {
    /// Width of the drawing, in pixels.
    pub width: f64,
    /// Height of the drawing, in pixels (more where the title, the x label
    /// or the note wrap onto more lines).
    pub height: f64,
    /// The body text's size, in pixels (titles and labels in proportion).
    pub font_size: f64,
    /// The font family (CSS: families in order of preference).
    pub font: String,
    /// A logarithmic x axis (a numeric one; every x above 0).
    pub log_x: bool,
    /// A logarithmic y axis (every mark and error bar above 0).
    pub log_y: bool,
}

impl Default for Style {
    fn default() -> Style {
        Style { width: WIDTH, height: HEIGHT, font_size: 12.0, font: FONT.to_string(), log_x: false, log_y: false }
    }
}

impl Style {
    /// Refuses a style no chart can have: a size too small for the margins
    /// and legend, or a font size out of proportion to it.
    pub fn check(&self) -> Result<(), String> {
        if !(self.width.is_finite() && self.width >= 320.0 && self.width <= 10_000.0) {
            return Err(format!("width {}: give 320 to 10000 pixels", self.width));
        }
        if !(self.height.is_finite() && self.height >= 200.0 && self.height <= 10_000.0) {
            return Err(format!("height {}: give 200 to 10000 pixels", self.height));
        }
        if !(self.font_size.is_finite() && self.font_size >= 6.0 && self.font_size <= 48.0) {
            return Err(format!("font size {}: give 6 to 48 pixels", self.font_size));
        }
        let k = self.font_size / 12.0;
        if self.width / k < 320.0 || self.height / k < 200.0 {
            return Err(format!(
                "font size {} on {}x{} pixels leaves too little room: give a larger size or a smaller font \
                 (at most {:.0} here)",
                self.font_size,
                self.width,
                self.height,
                12.0 * (self.width / 320.0).min(self.height / 200.0)
            ));
        }
        if self.font.contains(['"', '<', '>', '&']) {
            return Err(format!("font '{}': give font family names, comma-separated", self.font));
        }
        Ok(())
    }
}

/// Colours of the series, in order (Okabe and Ito's palette, readable by
/// colour-blind readers), then again.
pub const PALETTE: [&str; 8] = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"];

/// Marker shapes of the series, in order, then again.
pub const SHAPES: [Shape; 6] =
    [Shape::Circle, Shape::Square, Shape::TriangleUp, Shape::Diamond, Shape::TriangleDown, Shape::Cross];
/// Dash patterns of the series' lines, in order, then again (empty: solid).
pub const DASHES: [&str; 5] = ["", "7 4", "2 3", "9 3 2 3", "4 2"];

/// A marker's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A filled circle.
    Circle,
    /// A filled square.
    Square,
    /// A filled triangle, point up.
    TriangleUp,
    /// A filled diamond.
    Diamond,
    /// A filled triangle, point down.
    TriangleDown,
    /// An X.
    Cross,
}

impl Shape {
    /// Returns the SVG element of this marker centred on (`x`, `y`), about
    /// `2 * r` across.
    pub fn svg(self, x: f64, y: f64, r: f64, colour: &str, class: &str) -> String {
        let path = |d: String| format!("<path class=\"{class}\" d=\"{d}\" fill=\"{colour}\"/>");
        match self {
            Shape::Circle => {
                format!("<circle class=\"{class}\" cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{r:.1}\" fill=\"{colour}\"/>")
            }
            Shape::Square => {
                let a = r * 0.9;
                path(format!("M{:.1},{:.1} h{:.1} v{:.1} h{:.1} Z", x - a, y - a, 2.0 * a, 2.0 * a, -2.0 * a))
            }
            Shape::TriangleUp => {
                let a = r * 1.2;
                path(format!(
                    "M{x:.1},{:.1} L{:.1},{:.1} L{:.1},{:.1} Z",
                    y - a,
                    x + a,
                    y + a * 0.8,
                    x - a,
                    y + a * 0.8
                ))
            }
            Shape::TriangleDown => {
                let a = r * 1.2;
                path(format!(
                    "M{x:.1},{:.1} L{:.1},{:.1} L{:.1},{:.1} Z",
                    y + a,
                    x + a,
                    y - a * 0.8,
                    x - a,
                    y - a * 0.8
                ))
            }
            Shape::Diamond => {
                let a = r * 1.25;
                path(format!("M{:.1},{y:.1} L{x:.1},{:.1} L{:.1},{y:.1} L{x:.1},{:.1} Z", x - a, y - a, x + a, y + a))
            }
            Shape::Cross => format!(
                "<path class=\"{class}\" d=\"M{:.1},{:.1} L{:.1},{:.1} M{:.1},{:.1} L{:.1},{:.1}\" stroke=\"{colour}\" \
                 stroke-width=\"2.2\" fill=\"none\"/>",
                x - r,
                y - r,
                x + r,
                y + r,
                x - r,
                y + r,
                x + r,
                y - r
            ),
        }
    }
}

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 440.0;
const LEFT: f64 = 90.0;
const BOTTOM: f64 = 70.0;
const RIGHT: f64 = 24.0;
const LEGEND_WIDTH: f64 = 190.0;
/// Sideways nudge between coinciding series, in pixels.
const NUDGE: f64 = 5.0;
/// How close (in pixels) two marks must be to count as coinciding.
const COINCIDE: f64 = 6.0;
/// Maps an x value to its horizontal position.
type XMap = Box<dyn Fn(f64) -> f64>;

/// The font family of every figure (the charts and the forest plot).
pub(super) const FONT: &str = "DejaVu Sans, Verdana, sans-serif";

/// Returns `name`'s axis label: the name, then the unit its suffix names, e.g.
/// `overhead_us` → `overhead_us (µs)`, `ring_us_per_hop` → `ring_us_per_hop (µs per hop)`.
pub fn axis_label(name: &str) -> String {
    let words: Vec<&str> = name.split('_').collect();
    let unit = |w: &str| match w {
        "us" => Some("µs"),
        "ns" => Some("ns"),
        "ms" => Some("ms"),
        "s" => Some("s"),
        "kb" => Some("KiB"),
        "mb" => Some("MiB"),
        "pct" => Some("%"),
        _ => None,
    };
    for (i, w) in words.iter().enumerate().filter(|_| words.len() > 1) {
        if let Some(u) = unit(w) {
            let rest = &words[i + 1..];
            // Only a unit that ends the name or starts a "per X" phrase is a unit.
            if rest.is_empty() {
                return format!("{name} ({u})");
            }
            if rest[0] == "per" && rest.len() > 1 {
                return format!("{name} ({u} {})", rest.join(" "));
            }
        }
    }
    name.to_string()
}

/// Returns `text` broken at spaces into lines of at most `width` characters
/// (a longer word stands alone on its line, whole).
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// Returns how many characters of text `size` pixels high fit in `px` pixels
/// (DejaVu Sans averages about 0.55 em per character of lower-case text;
/// bold, 0.62: a little more is allowed for capitals and digits).
fn fits(px: f64, size: f64, bold: bool) -> usize {
    (px / (size * if bold { 0.64 } else { 0.57 })).floor().max(8.0) as usize
}

/// Returns `<tspan>`s of `lines`, each `step` pixels below the last, at `x`.
fn tspans(lines: &[String], x: f64, step: f64) -> String {
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| format!("<tspan x=\"{x:.1}\" dy=\"{}\">{}</tspan>", if i == 0 { 0.0 } else { step }, escape(l)))
        .collect()
}

/// Returns "nice" tick values covering `lo..=hi`: about `target` of them, at
/// multiples of 1, 2 or 5 times a power of ten, and the step between them.
pub fn ticks(lo: f64, hi: f64, target: usize) -> (Vec<f64>, f64) {
    let (lo, hi) = if hi > lo { (lo, hi) } else { (lo - 1.0, lo + 1.0) };
    let raw = (hi - lo) / target.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    let first = (lo / step).floor();
    let last = (hi / step).ceil();
    let ticks = (0..=(last - first) as i64).map(|i| (first + i as f64) * step).collect();
    (ticks, step)
}

/// Returns the ticks of a logarithmic axis covering `lo..=hi` (both above
/// 0): the powers of ten around them, with 2 and 5 times each where the
/// values span two and a half decades or less.
pub fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil().max(lo.log10().floor() + 1.0) as i32);
    let steps: &[f64] = if (hi / lo).log10() <= 2.5 { &[1.0, 2.0, 5.0] } else { &[1.0] };
    let mut t: Vec<f64> = Vec::new();
    for e in a..=b {
        for m in steps {
            let v = m * 10f64.powi(e);
            if e == b && *m > 1.0 {
                break;
            }
            t.push(v);
        }
    }
    // Trim the decades' ticks outside the values, keeping one each side.
    let first = t.iter().rposition(|&v| v <= lo).unwrap_or(0);
    let last = t.iter().position(|&v| v >= hi).unwrap_or(t.len() - 1);
    t[first..=last].to_vec()
}

/// Returns a logarithmic axis's tick label: its value with the decimals it
/// needs (`0.05`, `2`, `1000`).
fn log_label(v: f64) -> String {
    let decimals = (-v.log10().floor()).max(0.0) as usize;
    format!("{v:.decimals$}")
}

/// Returns a size in the SVG's text: whole pixels without decimals.
fn num(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Returns a tick's label: as many decimals as the step needs, no more.
fn tick_label(v: f64, step: f64) -> String {
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    let s = format!("{v:.decimals$}");
    if s.starts_with('-') && s.trim_start_matches(['-', '0', '.']).is_empty() {
        s[1..].to_string()
    } else {
        s
    }
}

/// Returns `s` with XML's special characters escaped.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

impl Chart {
    /// Returns the chart as a standalone SVG document (with an XML declaration
    /// when `standalone`; without, for inlining in HTML), in the default
    /// [`Style`].
    pub fn to_svg(&self, standalone: bool) -> String {
        self.to_svg_styled(standalone, &Style::default())
    }

    /// Refuses a logarithmic axis over values at or below 0.
    pub fn check_scales(&self, style: &Style) -> Result<(), String> {
        if style.log_x {
            if self.x_axis != XAxis::Numeric {
                return Err("--log-x: the x axis holds categories, not numbers".into());
            }
            if let Some(p) = self.points().find(|p| p.x <= 0.0) {
                return Err(format!("--log-x: x {} is not above 0 (a logarithmic axis has no place for it)", p.x));
            }
        }
        if style.log_y {
            if let Some(v) = self.points().flat_map(|p| [p.min, p.mean, p.max]).find(|v| *v <= 0.0) {
                return Err(format!("--log-y: a value of {v} is not above 0 (a logarithmic axis has no place for it)"));
            }
        }
        Ok(())
    }

    /// Returns the chart as SVG in `style` (see [`Chart::to_svg`]); a
    /// logarithmic scale over values not above 0 is drawn linear (refuse
    /// them first with [`Chart::check_scales`]).
    pub fn to_svg_styled(&self, standalone: bool, style: &Style) -> String {
        let log_x = style.log_x && self.x_axis == XAxis::Numeric && self.points().all(|p| p.x > 0.0);
        let log_y = style.log_y && self.points().flat_map(|p| [p.min, p.mean, p.max]).all(|v| v > 0.0);
        let frame = self.frame(style);
        let ys = self.y_scale(log_y, &frame);
        let (xs, xticks) = self.x_scale(log_x, &frame);
        let coincide = self.coincide(&xs, &ys);
        let plot = Plot { chart: self, frame, ys, xs, xticks, coincide };
        let mut o = String::new();
        plot.draw_head(&mut o, standalone, &style.font);
        plot.draw_ticks(&mut o);
        plot.draw_labels(&mut o);
        for (si, s) in self.series.iter().enumerate() {
            plot.draw_series(&mut o, si, s);
        }
        if plot.frame.legend {
            plot.draw_legend(&mut o);
        }
        o.push_str("</svg>\n");
        o
    }

    /// Returns every point of every series, series by series.
    fn points(&self) -> impl Iterator<Item = &Datum> + '_ {
        self.series.iter().flat_map(|s| s.points.iter())
    }

    /// Returns where the chart's parts lie in `style`: the wrapped texts
    /// decide the margins, the title's lines above, the x label's and the
    /// note's below.
    fn frame(&self, style: &Style) -> Frame {
        let k = style.font_size / 12.0;
        let (width, canvas_height) = (style.width / k, style.height / k);
        let legend = self.series.iter().any(|s| !s.name.is_empty());
        let plot_right = width - RIGHT - if legend { LEGEND_WIDTH } else { 0.0 };
        let title = wrap(&self.title, fits(width - 40.0, 15.0, true));
        let x_label = wrap(&self.x_label, fits(plot_right - LEFT, 13.0, false));
        let note = self.note.as_deref().map(|n| wrap(n, fits(width - 40.0, 11.0, false))).unwrap_or_default();
        let top = 30.0 + 19.0 * title.len() as f64;
        let bottom_margin = BOTTOM + 15.0 * (x_label.len() as f64 - 1.0) + 14.0 * note.len() as f64;
        let height = canvas_height + 19.0 * (title.len() as f64 - 1.0) + (bottom_margin - BOTTOM);
        let (x0, x1, y0, y1) = (LEFT, plot_right, height - bottom_margin, top);
        let y_label = wrap(&self.y_label, fits(y0 - y1 + 60.0, 13.0, false));
        Frame { k, width, height, x0, x1, y0, y1, legend, title, x_label, y_label, note }
    }

    /// Returns the y axis of `frame`: its range covers every mark and error
    /// bar, and 0 when all are positive.
    fn y_scale(&self, log: bool, frame: &Frame) -> YScale {
        let values = self.points().flat_map(|p| [p.min, p.max, p.mean]);
        let (mut lo, mut hi) =
            values.filter(|v| v.is_finite()).fold((f64::MAX, f64::MIN), |(l, h), v| (l.min(v), h.max(v)));
        if lo > hi {
            (lo, hi) = (0.0, 1.0);
        }
        if lo >= 0.0 && !log {
            lo = 0.0;
        }
        if hi <= lo {
            // All zero (or one value): a unit range above it, not one straddling 0.
            hi = if log { lo * 10.0 } else { lo + 1.0 };
        }
        let (ticks, labels) = if log {
            let t = log_ticks(lo, hi);
            let l = t.iter().map(|&v| log_label(v)).collect::<Vec<_>>();
            (t, l)
        } else {
            let (t, step) = ticks(lo, hi, 6);
            let l = t.iter().map(|&v| tick_label(v, step)).collect::<Vec<_>>();
            (t, l)
        };
        YScale { ticks, labels, log, y0: frame.y0, y1: frame.y1 }
    }

    /// Returns the x mapping of `frame` and the x axis's ticks: a position
    /// per number, or a band per category.
    fn x_scale(&self, log: bool, frame: &Frame) -> (XMap, Vec<(f64, String)>) {
        let (x0, x1) = (frame.x0, frame.x1);
        match &self.x_axis {
            XAxis::Numeric => {
                let xv = self.points().map(|p| p.x);
                let (l, h) = xv.fold((f64::MAX, f64::MIN), |(l, h), v| (l.min(v), h.max(v)));
                let (l, h) = if l > h { (0.0, 1.0) } else { (l, h) };
                // A margin inside the axis, so that marks at the ends are not cut by it.
                let (a, b) = (x0 + 12.0, x1 - 12.0);
                if log {
                    let h = if h <= l { l * 10.0 } else { h };
                    let xt = log_ticks(l, h);
                    let (xlo, xhi) = (xt[0].log10(), xt[xt.len() - 1].log10());
                    let labels = xt.iter().map(|&v| (v, log_label(v))).collect();
                    (Box::new(move |v: f64| a + (v.log10() - xlo) / (xhi - xlo) * (b - a)), labels)
                } else {
                    let (xt, xstep) = ticks(l, h, 8);
                    let (xlo, xhi) = (xt[0], xt[xt.len() - 1]);
                    let labels = xt.iter().map(|&v| (v, tick_label(v, xstep))).collect();
                    (Box::new(move |v| a + (v - xlo) / (xhi - xlo) * (b - a)), labels)
                }
            }
            XAxis::Categories(cats) => {
                let band = frame.band(cats.len());
                let labels = cats.iter().enumerate().map(|(i, c)| (i as f64, c.clone())).collect();
                (Box::new(move |v| x0 + (v + 0.5) * band), labels)
            }
        }
    }

    /// Returns whether marks of different series of a line chart coincide
    /// (closer than [`COINCIDE`] pixels both ways).
    fn coincide(&self, xs: &XMap, ys: &YScale) -> bool {
        self.x_axis == XAxis::Numeric
            && self.series.iter().enumerate().any(|(i, a)| {
                self.series[i + 1..].iter().any(|b| {
                    a.points.iter().any(|p| {
                        b.points.iter().any(|q| {
                            (xs(p.x) - xs(q.x)).abs() < COINCIDE && (ys.at(p.mean) - ys.at(q.mean)).abs() < COINCIDE
                        })
                    })
                })
            })
    }
}

/// Where a chart's parts lie on its canvas, in the canvas's pixels (before
/// the drawing is scaled up by `k`): the plot's box, and the wrapped texts
/// that decide its margins.
struct Frame {
    /// The drawing's scale over the canvas (`font_size / 12`).
    k: f64,
    /// The canvas's width.
    width: f64,
    /// The canvas's height, with the wrapped texts' extra lines.
    height: f64,
    /// The plot's left edge.
    x0: f64,
    /// The plot's right edge.
    x1: f64,
    /// The plot's bottom.
    y0: f64,
    /// The plot's top.
    y1: f64,
    /// Whether a legend stands right of the plot (some series has a name).
    legend: bool,
    /// The title's lines.
    title: Vec<String>,
    /// The x label's lines.
    x_label: Vec<String>,
    /// The y label's lines.
    y_label: Vec<String>,
    /// The note's lines (none without a note).
    note: Vec<String>,
}

impl Frame {
    /// Returns the width of each band of a bar chart of `categories`.
    fn band(&self, categories: usize) -> f64 {
        (self.x1 - self.x0) / categories.max(1) as f64
    }
}

/// The y axis: its ticks, their labels and the height of a value.
struct YScale {
    /// The tick values, lowest first: the first and last are the axis's ends.
    ticks: Vec<f64>,
    /// The ticks' labels.
    labels: Vec<String>,
    /// Whether the axis is logarithmic.
    log: bool,
    /// The plot's bottom.
    y0: f64,
    /// The plot's top.
    y1: f64,
}

impl YScale {
    /// Returns the height of value `v`.
    fn at(&self, v: f64) -> f64 {
        let (lo, hi) = (self.ticks[0], self.ticks[self.ticks.len() - 1]);
        if self.log {
            self.y0 - (v.log10() - lo.log10()) / (hi.log10() - lo.log10()) * (self.y0 - self.y1)
        } else {
            self.y0 - (v - lo) / (hi - lo) * (self.y0 - self.y1)
        }
    }

    /// Returns where a bar starts: 0, or the bottom of a logarithmic axis.
    fn base(&self) -> f64 {
        if self.log {
            self.ticks[0]
        } else {
            0.0
        }
    }
}

/// A chart being drawn: the chart, where its parts lie, its scales, and
/// whether its series are nudged apart.
struct Plot<'a> {
    /// The chart drawn.
    chart: &'a Chart,
    /// Where its parts lie.
    frame: Frame,
    /// The y axis.
    ys: YScale,
    /// The x mapping.
    xs: XMap,
    /// The x axis's ticks: value and label.
    xticks: Vec<(f64, String)>,
    /// Marks of different series coincide: each series is then nudged
    /// sideways by its own offset.
    coincide: bool,
}

impl Plot<'_> {
    /// Returns whether the x axis holds numbers (lines and markers, not bars).
    fn numeric(&self) -> bool {
        self.chart.x_axis == XAxis::Numeric
    }

    /// Returns how many series share the plot (at least 1).
    fn nseries(&self) -> f64 {
        self.chart.series.len().max(1) as f64
    }

    /// Returns the sideways nudge of series `si`'s marks (0 unless marks
    /// coincide).
    fn nudge(&self, si: usize) -> f64 {
        if self.coincide {
            (si as f64 - (self.nseries() - 1.0) / 2.0) * NUDGE
        } else {
            0.0
        }
    }

    /// Draws the opening of the SVG: its element (in `font`), its title, the
    /// white ground and the chart's title.
    fn draw_head(&self, o: &mut String, standalone: bool, font: &str) {
        let Frame { k, width, height, .. } = self.frame;
        if standalone {
            o.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        }
        let _ = writeln!(
            o,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" \
             viewBox=\"0 0 {} {}\" font-family=\"{font}\" font-size=\"12\">",
            num(width * k),
            num(height * k),
            num(width),
            num(height)
        );
        let _ = writeln!(o, "<title>{}</title>", escape(&self.chart.title));
        let _ = writeln!(o, "<rect width=\"{}\" height=\"{}\" fill=\"white\"/>", num(width), num(height));
        let _ = writeln!(
            o,
            "<text class=\"title\" x=\"{:.1}\" y=\"24\" text-anchor=\"middle\" font-size=\"15\" \
             font-weight=\"bold\">{}</text>",
            width / 2.0,
            tspans(&self.frame.title, width / 2.0, 19.0)
        );
    }

    /// Draws the grid lines and y ticks, then the x ticks.
    fn draw_ticks(&self, o: &mut String) {
        let Frame { x0, x1, y0, .. } = self.frame;
        o.push_str("<g class=\"y-axis\">\n");
        for (&v, label) in self.ys.ticks.iter().zip(&self.ys.labels) {
            let y = self.ys.at(v);
            let _ = writeln!(o, "<line x1=\"{x0:.1}\" y1=\"{y:.1}\" x2=\"{x1:.1}\" y2=\"{y:.1}\" stroke=\"#e0e0e0\"/>");
            let _ = writeln!(
                o,
                "<text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                x0 - 6.0,
                y + 4.0,
                label
            );
        }
        o.push_str("</g>\n<g class=\"x-axis\">\n");
        for (v, label) in &self.xticks {
            let x = (self.xs)(*v);
            let _ = writeln!(
                o,
                "<line x1=\"{x:.1}\" y1=\"{y0:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#333\"/>",
                y0 + 5.0
            );
            let _ = writeln!(
                o,
                "<text class=\"tick\" x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                y0 + 19.0,
                escape(label)
            );
        }
        o.push_str("</g>\n");
    }

    /// Draws the axes themselves, their labels and the note under the chart.
    fn draw_labels(&self, o: &mut String) {
        let Frame { x0, x1, y0, y1, height, .. } = self.frame;
        let (y_label, note) = (&self.frame.y_label, &self.frame.note);
        let _ = writeln!(
            o,
            "<path class=\"axes\" d=\"M{x0:.1},{y1:.1} V{y0:.1} H{x1:.1}\" fill=\"none\" stroke=\"#333\"/>"
        );
        let _ = writeln!(
            o,
            "<text class=\"x-label\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"13\">{}</text>",
            (x0 + x1) / 2.0,
            y0 + 48.0,
            tspans(&self.frame.x_label, (x0 + x1) / 2.0, 15.0)
        );
        // A rotated label's lines stack leftwards: the first line furthest out.
        let yl_x = (22.0 - 7.5 * (y_label.len() as f64 - 1.0)).max(10.0);
        let _ = writeln!(
            o,
            "<text class=\"y-label\" transform=\"translate({yl_x:.1},{:.1}) rotate(-90)\" text-anchor=\"middle\" \
             font-size=\"13\">{}</text>",
            (y0 + y1) / 2.0,
            tspans(y_label, 0.0, 15.0)
        );
        if !note.is_empty() {
            let _ = writeln!(
                o,
                "<text class=\"note\" x=\"20\" y=\"{:.1}\" font-size=\"11\" fill=\"#555\">{}</text>",
                height - 8.0 - 14.0 * (note.len() as f64 - 1.0),
                tspans(note, 20.0, 14.0)
            );
        }
    }

    /// Draws series `si`: its line and markers, or its bars, with their
    /// error bars.
    fn draw_series(&self, o: &mut String, si: usize, s: &Series) {
        let colour = PALETTE[si % PALETTE.len()];
        let _ = writeln!(o, "<g class=\"series\" data-name=\"{}\">", escape(&s.name));
        let marks = match &self.chart.x_axis {
            XAxis::Numeric => self.draw_line(o, si, s, colour),
            XAxis::Categories(cats) => self.draw_bars(o, si, s, colour, cats.len()),
        };
        for (x, p) in &marks {
            if p.max > p.min {
                let (a, b) = (self.ys.at(p.min), self.ys.at(p.max));
                let _ = writeln!(
                    o,
                    "<path class=\"errorbar\" d=\"M{x:.1},{a:.1} V{b:.1} M{:.1},{a:.1} H{:.1} M{:.1},{b:.1} H{:.1}\" \
                     stroke=\"#222\" stroke-width=\"1.2\" fill=\"none\"/>",
                    x - 4.0,
                    x + 4.0,
                    x - 4.0,
                    x + 4.0
                );
            }
        }
        // Markers over the error bars, so that a short bar does not hide them.
        if self.numeric() {
            let shape = SHAPES[si % SHAPES.len()];
            for (x, p) in &marks {
                let _ = writeln!(o, "{}", shape.svg(*x, self.ys.at(p.mean), 4.0, colour, "mark"));
            }
        }
        o.push_str("</g>\n");
    }

    /// Draws the line of series `si` of a line chart (none through fewer
    /// than three points: markers only); returns where its marks go.
    fn draw_line(&self, o: &mut String, si: usize, s: &Series, colour: &str) -> Vec<(f64, Datum)> {
        let dx = self.nudge(si);
        let pts: Vec<String> =
            s.points.iter().map(|p| format!("{:.1},{:.1}", (self.xs)(p.x) + dx, self.ys.at(p.mean))).collect();
        if pts.len() >= 3 {
            let dash = dash_attribute(si);
            let _ = writeln!(
                o,
                "<polyline class=\"line\" points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"{dash}/>",
                pts.join(" ")
            );
        }
        s.points.iter().map(|p| ((self.xs)(p.x) + dx, *p)).collect()
    }

    /// Draws the bars of series `si` of a bar chart of `categories`, one in
    /// each category's band; returns where their error bars go.
    fn draw_bars(&self, o: &mut String, si: usize, s: &Series, colour: &str, categories: usize) -> Vec<(f64, Datum)> {
        let band = self.frame.band(categories);
        let w = band * 0.8 / self.nseries();
        let base = self.ys.base();
        let mut marks = Vec::new();
        for p in &s.points {
            let left = self.frame.x0 + p.x * band + band * 0.1 + si as f64 * w;
            let (top, bottom) = (self.ys.at(p.mean.max(base)), self.ys.at(p.mean.min(base)));
            let _ = writeln!(
                o,
                "<rect class=\"bar\" x=\"{left:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{:.1}\" \
                 fill=\"{colour}\"><title>{}</title></rect>",
                w * 0.92,
                bottom - top,
                escape(&format!("{}: {}", s.name, p.mean))
            );
            marks.push((left + w * 0.46, *p));
        }
        marks
    }

    /// Draws the legend: its title, a key and the name of each named
    /// series, then remarks on what the marks mean.
    fn draw_legend(&self, o: &mut String) {
        let lx = self.frame.x1 + 16.0;
        let mut ly = self.frame.y1 + 6.0;
        let names = fits(LEGEND_WIDTH - 48.0, 12.0, false);
        o.push_str("<g class=\"legend\">\n");
        if let Some(t) = &self.chart.legend_title {
            let _ = writeln!(o, "<text x=\"{lx:.1}\" y=\"{ly:.1}\" font-weight=\"bold\">{}</text>", escape(t));
            ly += 20.0;
        }
        for (si, s) in self.chart.series.iter().enumerate().filter(|(_, s)| !s.name.is_empty()) {
            let key = self.legend_key(si, s, lx, ly);
            let name = wrap(&s.name, names);
            let _ = writeln!(
                o,
                "{key}<text x=\"{:.1}\" y=\"{ly:.1}\">{}</text>",
                lx + 30.0,
                tspans(&name, lx + 30.0, 14.0)
            );
            ly += 18.0 + 14.0 * (name.len() as f64 - 1.0);
        }
        ly += 8.0;
        for r in self.remarks() {
            let _ = writeln!(o, "<text x=\"{lx:.1}\" y=\"{ly:.1}\" font-size=\"11\" fill=\"#555\">{r}</text>");
            ly += 14.0;
        }
        o.push_str("</g>\n");
    }

    /// Returns the legend's key of series `si`, its name's baseline at
    /// (`lx`, `ly`): its line and marker, or its bars' colour.
    fn legend_key(&self, si: usize, s: &Series, lx: f64, ly: f64) -> String {
        let colour = PALETTE[si % PALETTE.len()];
        if !self.numeric() {
            return format!("<rect x=\"{lx:.1}\" y=\"{:.1}\" width=\"24\" height=\"10\" fill=\"{colour}\"/>", ly - 9.0);
        }
        let line = if s.points.len() >= 3 {
            let dash = dash_attribute(si);
            format!("<path d=\"M{lx:.1},{:.1} h24\" stroke=\"{colour}\" stroke-width=\"2\"{dash}/>", ly - 4.0)
        } else {
            String::new()
        };
        format!("{line}{}", SHAPES[si % SHAPES.len()].svg(lx + 12.0, ly - 4.0, 4.0, colour, "key"))
    }

    /// Returns the legend's remarks, one line each: what marks and bars
    /// mean, and why lines are missing or marks moved.
    fn remarks(&self) -> Vec<&'static str> {
        let mut remarks: Vec<&str> = Vec::new();
        if self.chart.points().any(|p| p.max > p.min) {
            remarks.extend(["marks: mean;", "bars: min to max"]);
        }
        if self.numeric() && self.chart.series.iter().any(|s| !s.points.is_empty() && s.points.len() < 3) {
            remarks.extend(["fewer than 3 points:", "marks only, no line"]);
        }
        if self.coincide {
            remarks.extend(["series coincide: marks", "nudged apart sideways", "by 5 px each"]);
        }
        remarks
    }
}

/// Returns the dash attribute of series `si`'s line (none for a solid one).
fn dash_attribute(si: usize) -> String {
    let dash = DASHES[si % DASHES.len()];
    if dash.is_empty() {
        String::new()
    } else {
        format!(" stroke-dasharray=\"{dash}\"")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(x: f64, min: f64, mean: f64, max: f64) -> Datum {
        Datum { x, mean, min, max, n: 3 }
    }

    fn line_chart() -> Chart {
        Chart {
            title: "lat_ctx on cortex-a72".into(),
            x_label: axis_label("procs"),
            y_label: axis_label("us_per_switch"),
            x_axis: XAxis::Numeric,
            series: vec![
                Series { name: "arm64-noasid".into(), points: vec![pt(2.0, 3.0, 3.4, 3.6), pt(8.0, 4.0, 4.5, 4.9)] },
                Series {
                    name: "arm64-freebsd-asid".into(),
                    points: vec![pt(2.0, 1.0, 1.0, 1.0), pt(8.0, 1.2, 1.3, 1.4)],
                },
            ],
            legend_title: Some("policy".into()),
            note: None,
        }
    }

    #[test]
    fn axis_label_names_the_unit_of_the_suffix() {
        assert_eq!(axis_label("overhead_us"), "overhead_us (µs)");
        assert_eq!(axis_label("sim_time_ns"), "sim_time_ns (ns)");
        assert_eq!(axis_label("ring_us_per_hop"), "ring_us_per_hop (µs per hop)");
        assert_eq!(axis_label("us_per_switch"), "us_per_switch (µs per switch)");
        assert_eq!(axis_label("size_kb"), "size_kb (KiB)");
        assert_eq!(axis_label("tlb_misses"), "tlb_misses");
        assert_eq!(axis_label("us"), "us");
    }

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(0.0, 4.9, 6), (vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0], 1.0));
        let (t, step) = ticks(2.0, 8.0, 8);
        assert_eq!((t[0], *t.last().unwrap(), step), (2.0, 8.0, 1.0));
        assert_eq!(tick_label(0.30000000000000004, 0.1), "0.3");
        assert_eq!(tick_label(-0.0, 0.5), "0.0");
    }

    #[test]
    fn logarithmic_ticks_are_decades_or_one_two_five_and_cover_the_range() {
        assert_eq!(log_ticks(1.0, 128.0), vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0]);
        assert_eq!(log_ticks(0.5, 5000.0), vec![0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0]);
        assert_eq!(log_ticks(3.0, 3.0), vec![2.0, 5.0]);
        assert_eq!((log_label(0.05), log_label(2.0), log_label(1000.0)), ("0.05".into(), "2".into(), "1000".into()));
    }

    #[test]
    fn a_style_scales_the_drawing_and_refuses_what_cannot_be_drawn() {
        let c = line_chart();
        assert_eq!(c.to_svg(true), c.to_svg_styled(true, &Style::default()));
        let big = Style { width: 1520.0, height: 880.0, font_size: 24.0, ..Style::default() };
        let svg = c.to_svg_styled(true, &big);
        // The default layout, drawn twice the size.
        assert!(svg.contains("width=\"1520\" height=\"880\" viewBox=\"0 0 760 440\""), "{svg}");
        assert!(Style { width: 100.0, ..Style::default() }.check().is_err());
        assert!(Style { font_size: 30.0, ..Style::default() }.check().unwrap_err().contains("too little room"));
        assert!(Style { font: "a\"b".into(), ..Style::default() }.check().is_err());
        let log = Style { log_y: true, ..Style::default() };
        assert!(c.check_scales(&log).is_ok());
        let mut zero = line_chart();
        zero.series[0].points[0].min = 0.0;
        assert!(zero.check_scales(&log).unwrap_err().contains("not above 0"));
    }

    #[test]
    fn line_chart_has_axes_labels_legend_and_error_bars() {
        let svg = line_chart().to_svg(true);
        assert!(svg.starts_with("<?xml"));
        assert!(svg.contains("class=\"axes\""));
        assert!(svg.contains(">procs</tspan>"));
        assert!(svg.contains(">us_per_switch (µs per switch)</tspan>"));
        assert!(svg.contains("<g class=\"legend\">"));
        assert!(svg.contains(">arm64-noasid</tspan>") && svg.contains(">arm64-freebsd-asid</tspan>"));
        // Two points a series: markers only, and the legend says so.
        assert_eq!(svg.matches("class=\"line\"").count(), 0);
        assert!(svg.contains(">marks only, no line</text>"));
        assert_eq!(svg.matches("class=\"mark\"").count(), 4);
        // Three of the four points have a spread; the one with min == max has no bar.
        assert_eq!(svg.matches("class=\"errorbar\"").count(), 3);
        // Tick labels on both axes: 0..5 on y, 2..8 on x.
        assert!(svg.contains(">5</text>") && svg.contains(">8</text>"));
        assert!(svg.trim_end().ends_with("</svg>"));
    }

    #[test]
    fn bar_chart_has_one_bar_per_series_and_category() {
        let chart = Chart {
            title: "claim".into(),
            x_label: "variant".into(),
            y_label: "ratio".into(),
            x_axis: XAxis::Categories(vec!["a".into(), "b<c".into()]),
            series: vec![
                Series { name: "origin ratio".into(), points: vec![pt(0.0, 2.0, 2.0, 2.0), pt(1.0, 3.0, 3.0, 3.0)] },
                Series { name: "simulated ratio".into(), points: vec![pt(0.0, 1.9, 1.9, 1.9), pt(1.0, 3.2, 3.2, 3.2)] },
            ],
            legend_title: None,
            note: None,
        };
        let svg = chart.to_svg(false);
        assert!(!svg.starts_with("<?xml"));
        let mut zero = chart.clone();
        zero.series.iter_mut().flat_map(|s| s.points.iter_mut()).for_each(|p| *p = pt(p.x, 0.0, 0.0, 0.0));
        let z = zero.to_svg(false);
        assert!(z.contains(">0.0</text>") && z.contains(">1.0</text>") && !z.contains(">-"), "all-zero: y from 0 to 1");
        assert_eq!(svg.matches("class=\"bar\"").count(), 4);
        assert_eq!(svg.matches("class=\"errorbar\"").count(), 0);
        assert!(svg.contains(">b&lt;c</text>"), "category labels are escaped");
        assert!(svg.contains(">origin ratio</tspan>"));
    }

    #[test]
    fn coinciding_series_get_own_shapes_dashes_and_a_nudge_and_long_titles_wrap() {
        let same = vec![pt(1.0, 2.0, 2.0, 2.0), pt(2.0, 3.0, 3.0, 3.0), pt(3.0, 4.0, 4.0, 4.0)];
        let chart = Chart {
            title: "a title long enough that it cannot fit on one line of a chart seven hundred and sixty pixels \
                    wide, so it wraps"
                .into(),
            x_label: "x".into(),
            y_label: "y".into(),
            x_axis: XAxis::Numeric,
            series: vec![Series { name: "a".into(), points: same.clone() }, Series { name: "b".into(), points: same }],
            legend_title: None,
            note: Some("spread from jitter".into()),
        };
        let svg = chart.to_svg(false);
        // Three points: lines, the second dashed; a circle for a, a square (path) for b.
        assert_eq!(svg.matches("class=\"line\"").count(), 2);
        assert_eq!(svg.matches("stroke-dasharray=\"7 4\"").count(), 2, "the line and its legend key");
        assert_eq!(svg.matches("<circle class=\"mark\"").count(), 3);
        assert_eq!(svg.matches("<path class=\"mark\"").count(), 3);
        // Nudged 2.5 px apart either side of x, and the legend says so.
        let a = svg.split("<circle class=\"mark\" cx=\"").nth(1).unwrap();
        let ax: f64 = a.split('"').next().unwrap().parse().unwrap();
        assert!(svg.contains(&format!("<path class=\"mark\" d=\"M{:.1},", ax + 5.0 - 3.6)), "{svg}");
        assert!(svg.contains(">series coincide: marks</text>"));
        // The title takes two lines, the note its own under the chart.
        assert_eq!(
            svg.split("<text class=\"title\"")
                .nth(1)
                .unwrap()
                .split("</text>")
                .next()
                .unwrap()
                .matches("<tspan")
                .count(),
            2
        );
        assert!(svg.contains(">spread from jitter</tspan>"));
    }

    #[test]
    fn wrap_breaks_at_spaces_within_the_width() {
        assert_eq!(wrap("one two three", 7), ["one two", "three"]);
        assert_eq!(wrap("unbreakable-word x", 5), ["unbreakable-word", "x"]);
        assert_eq!(wrap("", 5), [""]);
    }

    #[test]
    fn svg_is_deterministic() {
        assert_eq!(line_chart().to_svg(true), line_chart().to_svg(true));
    }
}
