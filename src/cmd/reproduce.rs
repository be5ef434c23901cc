//! `tlbkit reproduce`: every origin claim tlbkit models (or one), run and compared
//! with the origin's ratio, as a table, JSON, or an HTML page with a forest plot
//! (the claims and their verdicts are `tlbkit_lab::claims`).

use super::Format;
use crate::error::CliError;
use crate::files::{check_writable, write_atomically};
use crate::progress::{self, Unit};
use crate::table::{Align, Table};
use clap::Args;
use std::path::PathBuf;
use tlbkit_lab::claims::{self, CLAIMS};

/// `tlbkit reproduce`'s flags.
#[derive(Args)]
pub struct ReproduceArgs {
    /// Only the claim with this id.
    #[arg(long)]
    only: Option<String>,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    /// Also write the table as an HTML page, with one forest plot of every claim
    /// (simulated and origin ratios, the verdict's tolerance band, a line at 1).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

/// Runs `tlbkit reproduce`; returns the exit code.
pub fn reproduce(a: ReproduceArgs) -> Result<u8, CliError> {
    let ReproduceArgs { only, format, html } = a;
    if let Some(path) = &html {
        check_writable(path, "--html", false)?;
    }
    let selected: Vec<&claims::Claim> = match only.as_deref() {
        None => CLAIMS.iter().collect(),
        Some(id) => claims::find(id).into_iter().collect(),
    };
    if selected.is_empty() {
        let ids: Vec<&str> = CLAIMS.iter().map(|c| c.id).collect();
        let only = only.unwrap_or_default();
        let near = tlbkit_registry::suggest::did_you_mean(&only, ids.iter().copied());
        return Err(format!("unknown claim '{only}'{near}; valid claims: {}", ids.join(", ")).into());
    }
    let bar = progress::bar(selected.iter().map(|c| c.runs() as u64).sum(), Unit::Runs);
    let mut results = Vec::new();
    for c in selected {
        bar.set_message(c.id);
        results.push(claims::check(c, 1, || bar.inc(1))?);
    }
    bar.finish_and_clear();
    if let Some(path) = html {
        write_atomically(&path, tlbkit_lab::plot::html::claims_page(&results).as_bytes())?;
    }
    if format == Format::Json {
        let doc = claims::json(&results);
        println!("{}", serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?);
        return Ok(0);
    }
    use Align::{Left, Right};
    let mut t = Table::new(&[Left, Left, Left, Left, Right, Right, Left, Right, Right, Left]);
    t.row([
        "claim",
        "origin",
        "baseline",
        "variant",
        "sim base",
        "sim var",
        "unit",
        "origin ratio",
        "sim ratio",
        "verdict",
    ]);
    let figures = |base: f64, var: f64, origin_ratio: f64, sim_ratio: f64| {
        [base, var, origin_ratio, sim_ratio].map(|x| format!("{x:.4}"))
    };
    for r in &results {
        // A claim with several variants prints one row per variant.
        for v in &r.variants {
            let [b, var, origin_ratio, sim_ratio] = figures(r.sim_baseline, v.sim_variant, v.origin_ratio, v.sim_ratio);
            let verdict = v.verdict_with_note();
            // A variant of settings is labelled by them (`contpte=on teardown=simple`).
            let name = if v.sets.is_empty() { v.name.clone() } else { v.sets.join(" ") };
            let unit = unit_label(&r.unit);
            t.row([&r.id, &r.origin, &r.baseline, &name, &b, &var, &unit, &origin_ratio, &sim_ratio, &verdict]);
        }
        if r.variants.is_empty() {
            let [b, var, origin_ratio, sim_ratio] = figures(r.sim_baseline, r.sim_variant, r.origin_ratio, r.sim_ratio);
            let unit = unit_label(&r.unit);
            t.row([&r.id, &r.origin, &r.baseline, &r.variant, &b, &var, &unit, &origin_ratio, &sim_ratio, &r.verdict]);
        }
        for n in &r.notes {
            t.note(n.clone());
        }
    }
    print!("{}", t.render());
    println!("{}", claims::summary(&results));
    Ok(0)
}

/// Returns a claim's unit as the table shows it: a count or a ratio says so.
fn unit_label(unit: &str) -> String {
    if unit.is_empty() {
        "-".to_string()
    } else {
        unit.to_string()
    }
}
