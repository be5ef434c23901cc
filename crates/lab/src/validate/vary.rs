//! `tlbkit validate --vary KIND=FACTOR`: the corpus run again with each
//! preset's estimated costs of a kind multiplied by a factor
//! ([`tlbkit_sim::preset::vary`]), so that a verdict that changes is seen to
//! turn on what was estimated, not measured. The runs read each varied
//! machine from a partial machine file on its preset; a preset that
//! estimates nothing of the kind, and a run on a machine file, run as they
//! are.

use super::Entry;
use std::collections::BTreeMap;
use std::path::Path;
use tlbkit_sim::preset::vary::{self, CostKind, COST_KINDS};

/// What `--vary` takes: a kind and its factor.
pub type Vary = (&'static CostKind, f64);

/// Parses `KIND=FACTOR` (`ipi=2`, `software=0.5`).
pub fn parse(arg: &str) -> Result<Vary, String> {
    let kinds = || COST_KINDS.iter().map(|k| k.name).collect::<Vec<_>>().join(", ");
    let Some((name, factor)) = arg.split_once('=') else {
        return Err(format!("--vary {arg}: give KIND=FACTOR (ipi=2, software=0.5); kinds: {}", kinds()));
    };
    let kind = vary::kind(name).ok_or_else(|| format!("--vary {arg}: no cost kind '{name}'; kinds: {}", kinds()))?;
    match factor.parse::<f64>() {
        Ok(f) if f.is_finite() && (0.01..=100.0).contains(&f) => Ok((kind, f)),
        _ => Err(format!("--vary {arg}: the factor must be a number from 0.01 to 100, not '{factor}'")),
    }
}

/// Returns `entries` with every run on a preset that estimates costs of the
/// kinds in `vary` moved to that preset varied, its machine file written
/// under `dir`; and one line for each varied machine: its name and each
/// cost before and after. With no kinds, the entries as they are and nothing
/// written.
pub fn apply(entries: &[&Entry], vary: &[Vary], dir: &Path) -> Result<(Vec<Entry>, Vec<String>), String> {
    for (i, (kind, _)) in vary.iter().enumerate() {
        if vary[..i].iter().any(|(k, _)| k.name == kind.name) {
            return Err(format!("--vary names '{}' twice: give each kind once", kind.name));
        }
    }
    let mut machines: BTreeMap<String, Option<(String, String)>> = BTreeMap::new();
    let mut out = Vec::new();
    for e in entries {
        let mut e = (*e).clone();
        for run in e.runs.values_mut() {
            if !machines.contains_key(&run.machine) {
                let made = match tlbkit_sim::preset::by_name(&run.machine) {
                    Some(p) => vary::varied(&p, vary).map(|v| write(&v, dir)).transpose()?,
                    None => None,
                };
                machines.insert(run.machine.clone(), made);
            }
            if let Some(Some((path, _))) = machines.get(&run.machine) {
                run.machine = path.clone();
            }
        }
        out.push(e);
    }
    let lines = machines.into_values().flatten().map(|(_, line)| line).collect();
    Ok((out, lines))
}

/// Writes `v`'s machine file under `dir` (to a temporary file, then renamed:
/// two validations at once write the same bytes); returns its path and the
/// line that says what it varies.
fn write(v: &vary::Varied, dir: &Path) -> Result<(String, String), String> {
    let cannot = |e: std::io::Error| format!("--vary: cannot write the varied machine under {}: {e}", dir.display());
    std::fs::create_dir_all(dir).map_err(cannot)?;
    let path = dir.join(format!("{}.toml", v.name));
    let tmp = dir.join(format!("{}.tmp{}", v.name, std::process::id()));
    std::fs::write(&tmp, &v.file).map_err(cannot)?;
    std::fs::rename(&tmp, &path).map_err(cannot)?;
    let changes: Vec<String> = v.changes.iter().map(|(f, a, b)| format!("{f} {a} -> {b}")).collect();
    Ok((path.display().to_string(), format!("{}: {}", v.name, changes.join(", "))))
}
