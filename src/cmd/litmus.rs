//! `tlbkit litmus`: the published Arm VMSA system litmus tests (or any in
//! their format and subset) run under tlbkit's model of translation, each
//! verdict set against the published one (`tlbkit_check::litmus`).

use super::Format;
use crate::error::CliError;
use crate::table::{Align, Table};
use clap::Args;
use std::path::PathBuf;
use tlbkit_check::litmus::{self, Agreement};

/// `tlbkit litmus`'s flags.
#[derive(Args)]
#[command(after_help = "The shipped tests, their source and licence: crates/check/litmus/vmsa/ \
                        (tlbkit litmus crates/check/litmus/vmsa)\n\
                        Exit status: 0 when every verdict agrees with the published one or is a known \
                        difference, 3 when one disagrees, 2 for a file tlbkit cannot read.")]
pub struct LitmusArgs {
    /// isla `.litmus.toml` files, or folders of them.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
}

/// Runs `tlbkit litmus`; returns the exit code.
pub fn litmus(a: LitmusArgs) -> Result<u8, CliError> {
    let published = litmus::published(litmus::EXPECTED_CSV);
    let mut rows = Vec::new();
    for path in &a.files {
        for file in litmus::files(path)? {
            let test = litmus::load(&file)?;
            let run = litmus::run(&test)?;
            let theirs = published.get(&test.name).copied();
            let agreement = litmus::compare(&test.name, run.verdict, theirs);
            rows.push((file, test, run, theirs, agreement));
        }
    }
    let disagree = rows.iter().any(|r| r.4 == Agreement::Disagree);
    if a.format == Format::Json {
        let tests: Vec<_> = rows
            .iter()
            .map(|(file, test, run, theirs, agreement)| {
                let reason = match agreement {
                    Agreement::KnownStrengthening(r) | Agreement::KnownWeakening(r) => Some(*r),
                    _ => None,
                };
                serde_json::json!({
                    "test": test.name,
                    "file": file.display().to_string(),
                    "tlbkit": run.verdict,
                    "published": theirs,
                    "comparison": agreement.word(),
                    "reason": reason,
                    "states": run.states,
                })
            })
            .collect();
        let doc = serde_json::json!({ "tests": tests, "disagreements": rows.iter().filter(|r| r.4 == Agreement::Disagree).count() });
        println!("{}", serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?);
    } else {
        use Align::{Left, Right};
        let mut t = Table::new(&[Left, Left, Left, Left, Right]);
        t.row(["test", "tlbkit", "published", "comparison", "states"]);
        for (_, test, run, theirs, agreement) in &rows {
            let theirs = theirs.map_or("-", |v| v.word());
            t.row([test.name.as_str(), run.verdict.word(), theirs, agreement.word(), &run.states.to_string()]);
            if let Agreement::KnownStrengthening(r) | Agreement::KnownWeakening(r) = agreement {
                t.note(format!("{}: {r}", test.name));
            }
        }
        print!("{}", t.render());
        let agree = rows.iter().filter(|r| r.4 == Agreement::Agree).count();
        let known = rows
            .iter()
            .filter(|r| matches!(r.4, Agreement::KnownStrengthening(_) | Agreement::KnownWeakening(_)))
            .count();
        let wrong = rows.iter().filter(|r| r.4 == Agreement::Disagree).count();
        println!("{} tests: {agree} agree, {known} known differences, {wrong} disagree", rows.len());
    }
    Ok(if disagree { 3 } else { 0 })
}
