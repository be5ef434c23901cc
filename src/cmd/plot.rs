//! `tlbkit plot` and `tlbkit report`: their flags, and SVG, PNG and HTML files
//! of a sweep's results (the charts and pages are `tlbkit_lab::plot`; the files
//! are written through `crate::files`).

use crate::error::CliError;
use crate::files::{check_writable, write_atomically};
use clap::Args;
use std::path::PathBuf;
use tlbkit_lab::plot::chart::Style;
use tlbkit_lab::plot::data::{ChartSpec, Results};
use tlbkit_lab::plot::html;

/// Draws one figure of a results file against one of its fields.
#[derive(Args)]
pub struct PlotArgs {
    /// The results file (`tlbkit sweep`'s JSON lines).
    results: PathBuf,
    /// The x axis: a field of the runs (numbers: a line chart; text: a bar chart).
    #[arg(long)]
    x: String,
    /// The plotted figure: a workload result or a metric.
    #[arg(long)]
    y: String,
    /// One line (or bar) per value of this field, with a legend.
    #[arg(long)]
    group: Option<String>,
    /// Only runs whose FIELD has VALUE: FIELD=VALUE (repeatable).
    #[arg(long = "where", value_name = "FIELD=VALUE")]
    filters: Vec<String>,
    /// The chart's title (default: "Y by X" and the filters, Y in words from
    /// `tlbkit list metrics`, e.g. "time per context switch by procs").
    #[arg(long)]
    title: Option<String>,
    /// The file to write: .svg or .png.
    #[arg(short = 'o', long = "output")]
    output: PathBuf,
    /// The figure's width in pixels (320 to 10000).
    #[arg(long, default_value_t = 760.0)]
    width: f64,
    /// The figure's height in pixels (200 to 10000; more where the title or
    /// labels wrap).
    #[arg(long, default_value_t = 440.0)]
    height: f64,
    /// The body text's size in pixels (titles and labels in proportion):
    /// a larger font draws the chart smaller and scales it up, marks and
    /// lines with it.
    #[arg(long, default_value_t = 12.0)]
    font_size: f64,
    /// The font family, as CSS names it (families in order of preference;
    /// a PNG uses the system's fonts).
    #[arg(long, default_value = "DejaVu Sans, Verdana, sans-serif")]
    font: String,
    /// A logarithmic x axis (numbers above 0: CPU counts that double, sizes).
    #[arg(long)]
    log_x: bool,
    /// A logarithmic y axis (every figure above 0).
    #[arg(long)]
    log_y: bool,
}

/// Writes one HTML page of charts and ministat tables for a results file.
#[derive(Args)]
pub struct ReportArgs {
    /// The results file (`tlbkit sweep`'s JSON lines).
    results: PathBuf,
    /// The HTML file to write.
    #[arg(short = 'o', long = "output")]
    output: PathBuf,
    /// The policy every other is compared with (ratios, differences, ministat's
    /// reference). Repeat it for a sweep of several architectures: at each grid
    /// point the first given that ran there is the baseline. Default: the policy
    /// that comes first in the results (a sweep runs its file's policies in the
    /// order given); the page names the baseline at the top.
    #[arg(long, value_name = "POLICY")]
    baseline: Vec<String>,
}

/// Runs `tlbkit plot`.
pub fn plot(a: PlotArgs) -> Result<u8, CliError> {
    let ext = a.output.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    if ext != "svg" && ext != "png" {
        return Err(format!("-o {}: give a file ending in .svg or .png", a.output.display()).into());
    }
    check_writable(&a.output, "-o", false)?;
    let filters = a
        .filters
        .iter()
        .map(|f| match f.split_once('=') {
            Some((k, v)) => Ok((k.to_string(), v.to_string())),
            None => Err(format!("--where '{f}': give FIELD=VALUE, e.g. --where workload=lat_ctx")),
        })
        .collect::<Result<Vec<_>, String>>()?;
    let style = Style {
        width: a.width,
        height: a.height,
        font_size: a.font_size,
        font: a.font,
        log_x: a.log_x,
        log_y: a.log_y,
    };
    style.check().map_err(|e| CliError::from(format!("--width, --height, --font-size, --font: {e}")))?;
    let results = Results::load(&a.results)?;
    let spec = ChartSpec { x: a.x, y: a.y, group: a.group, filters, title: a.title, bars: false };
    let (chart, pooled) = results.chart(&spec)?;
    // A mean over different machines or CPU counts is no figure of either.
    if let Some(f) = pooled.iter().find(|f| *f == "machine" || *f == "cpus") {
        let values: Vec<String> = results
            .select(&spec.filters)
            .iter()
            .filter_map(|r| r.coord(f))
            .map(|c| c.to_string())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        return Err(format!(
            "each point would pool runs of different {f} values ({}): a mean over them is no figure of any; \
             give --where {f}=VALUE, or --group {f}",
            values.join(", ")
        )
        .into());
    }
    chart.check_scales(&style)?;
    if !pooled.is_empty() {
        eprintln!(
            "tlbkit plot: note: each point pools runs that differ in {} (narrow with --where FIELD=VALUE, or \
             --group one of them)",
            pooled.join(", ")
        );
    }
    let svg = chart.to_svg_styled(true, &style);
    let bytes = if ext == "png" { crate::png::render(&svg)? } else { svg.into_bytes() };
    write_atomically(&a.output, &bytes)?;
    Ok(0)
}

/// Runs `tlbkit report`.
pub fn report(a: ReportArgs) -> Result<u8, CliError> {
    check_writable(&a.output, "-o", false)?;
    let results = Results::load(&a.results)?;
    let page = html::report(&results, &a.results.display().to_string(), &a.baseline)?;
    write_atomically(&a.output, page.as_bytes())?;
    println!("tlbkit report: wrote {} ({} runs of {})", a.output.display(), results.rows.len(), a.results.display());
    Ok(0)
}
