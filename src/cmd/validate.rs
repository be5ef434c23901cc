//! `tlbkit validate`: the simulator against the published measurements of the
//! validation corpus (`tlbkit_lab::validate`), each figure simulated and judged,
//! then the summary against the accuracy targets.
//!
//! Runs are cached per command and per build of tlbkit (a digest of the
//! executable), under `$XDG_CACHE_HOME/tlbkit/validate` (or
//! `~/.cache/tlbkit/validate`), so a second validation by the same build is
//! instant and a rebuilt model never reads an older model's runs. Exit code: 0
//! when every target is met, 1 when one is not, 2 for a bad input.

use super::Format;
use crate::error::CliError;
use crate::files::write_atomically;
use crate::progress::{self, Unit};
use clap::Args;
use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use tlbkit_lab::validate::{self, Corpus, Report, Results};

/// `tlbkit validate`'s flags.
#[derive(Args)]
pub struct ValidateArgs {
    /// Only the corpus entry with this id (H05, invlpgb-2, ...).
    #[arg(long, value_name = "ID")]
    only: Option<String>,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    /// Runs at once (default: the host's cores).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// Read the corpus from this folder of TOML files instead of the one
    /// shipped with tlbkit.
    #[arg(long, value_name = "DIR")]
    corpus: Option<PathBuf>,
    /// Run each figure's runs with seeds 1 to N and take each metric's mean
    /// (a corpus run that asks for more seeds takes that many).
    #[arg(long, value_name = "N", default_value_t = validate::DEFAULT_SEEDS)]
    seeds: u64,
    /// Simulate every run again, reading and writing no cache.
    #[arg(long)]
    no_cache: bool,
    /// Also write one SVG chart per curve (published against simulated) into
    /// this folder, named by entry and row (`H09-3.svg`).
    #[arg(long, value_name = "DIR")]
    charts: Option<PathBuf>,
    /// Multiply each preset's estimated costs of KIND by FACTOR (repeatable):
    /// ipi, software, tlb, broadcast, entry or memory; sourced costs stay.
    /// Judges the corpus on the varied machines, to see which verdicts turn
    /// on what was estimated (their machine files go to the temporary folder,
    /// `tlbkit-vary/`).
    #[arg(long, value_name = "KIND=FACTOR")]
    vary: Vec<String>,
}

/// Runs `tlbkit validate`; returns the exit code.
pub fn validate(a: ValidateArgs) -> Result<u8, CliError> {
    let corpus = match &a.corpus {
        Some(dir) => Corpus::from_dir(dir)?,
        None => Corpus::shipped()?,
    };
    if a.jobs == Some(0) {
        return Err("--jobs must be at least 1".to_string().into());
    }
    if !(1..=100).contains(&a.seeds) {
        return Err(format!("--seeds must be 1 to 100, not {}", a.seeds).into());
    }
    let selected = corpus.select(a.only.as_deref())?;
    let vary = a.vary.iter().map(|v| validate::vary::parse(v)).collect::<Result<Vec<_>, _>>()?;
    // Without --vary every entry comes back as it is and nothing is written.
    let (entries, varied) = validate::vary::apply(&selected, &vary, &std::env::temp_dir().join("tlbkit-vary"))?;
    let entries: Vec<&validate::Entry> = entries.iter().collect();
    let specs = validate::plan(&entries, a.seeds)?;
    let cache = if a.no_cache { None } else { Cache::open() };
    let mut results = Results::new();
    let mut todo = Vec::new();
    for s in specs {
        let command = s.command();
        match cache.as_ref().and_then(|c| c.get(&command)) {
            Some(m) => {
                results.insert(command, Ok(m));
            }
            None => todo.push(s),
        }
    }
    let cached = results.len();
    let bar = progress::bar(todo.len() as u64, Unit::Runs);
    let jobs = a.jobs.unwrap_or_else(tlbkit_lab::batch::default_jobs);
    tlbkit_lab::batch::run_all(&todo, jobs, |i, out| {
        let command = todo[i].command();
        let out = out.map(|o| o.metric_values()).map_err(|e| e.to_string());
        if let (Some(c), Ok(m)) = (&cache, &out) {
            c.put(&command, m);
        }
        results.insert(command, out);
        bar.inc(1);
        ControlFlow::Continue(())
    });
    bar.finish_and_clear();
    let mut report = Report::new(validate::judge_all(&entries, &results, a.seeds), a.seeds, todo.len(), cached);
    report.varied = varied;
    if let Some(dir) = &a.charts {
        std::fs::create_dir_all(dir).map_err(|e| format!("--charts: cannot create {}: {e}", dir.display()))?;
        for (name, svg) in validate::charts::charts(&report.entries) {
            write_atomically(&dir.join(name), svg.as_bytes())?;
        }
    }
    if a.format == Format::Json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?);
    } else {
        print!("{}", report.render());
    }
    Ok(if report.passed() { 0 } else { 1 })
}

/// Finished runs' metrics on disk, one JSON file per command, in a folder
/// per build of tlbkit.
struct Cache {
    dir: PathBuf,
}

impl Cache {
    /// The cache of this build, or none where there is no home or the
    /// executable cannot be read (validation then runs everything).
    fn open() -> Option<Cache> {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))?;
        let exe = std::fs::read(std::env::current_exe().ok()?).ok()?;
        let dir = base.join("tlbkit").join("validate").join(format!("{:016x}", digest(&exe)));
        std::fs::create_dir_all(&dir).ok()?;
        Some(Cache { dir })
    }

    fn path(&self, command: &str) -> PathBuf {
        self.dir.join(format!("{:016x}.json", digest(command.as_bytes())))
    }

    /// The metrics of `command`, if this build ran it; a file of another
    /// command (a digest's collision) or a damaged one is ignored.
    fn get(&self, command: &str) -> Option<BTreeMap<String, f64>> {
        let text = std::fs::read_to_string(self.path(command)).ok()?;
        let doc: serde_json::Value = serde_json::from_str(&text).ok()?;
        if doc.get("command")?.as_str()? != command {
            return None;
        }
        serde_json::from_value(doc.get("metrics")?.clone()).ok()
    }

    /// Keeps the metrics of `command` (written to a temporary file, then
    /// renamed); a failure to write only costs a later run.
    fn put(&self, command: &str, metrics: &BTreeMap<String, f64>) {
        let doc = serde_json::json!({ "command": command, "metrics": metrics });
        let path = self.path(command);
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        if std::fs::write(&tmp, doc.to_string()).is_ok() && std::fs::rename(&tmp, &path).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

/// A 64-bit digest (FNV-1a: stable across builds and hosts, which the
/// standard library's hasher does not promise).
fn digest(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}
