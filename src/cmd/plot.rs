//! `tlbkit plot` and `tlbkit report`: their flags, and SVG, PNG and HTML files
//! of a sweep's results (the charts and pages are `tlbkit_lab::plot`; the files
//! are written through `crate::files`).

use crate::error::CliError;
use crate::files::{check_writable, write_atomically};
use clap::Args;
use std::path::PathBuf;
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
    let results = Results::load(&a.results)?;
    let spec = ChartSpec { x: a.x, y: a.y, group: a.group, filters, title: a.title };
    let (chart, pooled) = results.chart(&spec)?;
    if !pooled.is_empty() {
        eprintln!(
            "tlbkit plot: note: each point pools runs that differ in {} (narrow with --where FIELD=VALUE, or \
             --group one of them)",
            pooled.join(", ")
        );
    }
    let svg = chart.to_svg(true);
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
