//! Machines as data: a machine is a TOML file of its fields, each with its
//! source.
//!
//! The presets are the files in `crates/sim/machines/` (compiled into the
//! binary: `build.rs` lists them), and `--machine PATH.toml` reads a user's
//! own. A file's keys are the names `tlbkit list machines --format json`
//! gives: top-level fields (`freq_ghz`, `cores`, `cores_per_socket`, ...),
//! `[tlb]` and `[costs_cycles]` tables, and `estimates`. A field is either a
//! plain value (`cores = 32`) or a table saying where the value comes from:
//!
//! ```toml
//! freq_ghz = { value = 2.6, source = "Intel ARK: 2.60 GHz base" }
//! walkers = { value = 2, estimate = "no Sunny Cove figure found: Skylake's two" }
//! walk_start = { value = 10, source_as = "walk_level" }   # the sibling's source
//! cacheline_transfer = { ns = 51.3, source = "..." }      # a cost in ns, at freq_ghz
//! dvm_hop = { value = 300, source = "notes" }             # the machine's notes file
//! ```
//!
//! A file may name a `base` (a preset, or one of the architecture bases in
//! `machines/base/`, which hold costs only): it starts from the base's fields
//! and replaces those it sets. A file without a base sets every field. The
//! loader checks every key against the fields a machine has (an unknown key
//! is refused with the known ones), every type, and the ranges the simulator
//! needs ([`check`]), so a bad file is an error that says what to change,
//! never a panic.
//!
//! Layers are resolved in three steps: each file to a `Layer` of entries
//! (its own keys, nothing inherited); the chain of bases merged, the later
//! file's entries replacing the earlier's; the merged entries typed into a
//! [`Preset`], the costs given in ns converted at the final clock.

use super::{Arch, CoreThreads, Costs, Estimate, Kernel, Preset, TlbGeometry, ESTIMATE_USES};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// The top-level fields a machine file sets, with what each holds (the
/// `[tlb]` and `[costs_cycles]` keys are those of [`TlbGeometry`] and
/// [`Costs`]).
const TOP: &[(&str, Kind)] = &[
    ("description", Kind::Text),
    ("cost_sources", Kind::Text),
    ("arch", Kind::Arch),
    ("freq_ghz", Kind::Float),
    ("cores", Kind::Count),
    ("cores_per_socket", Kind::Count),
    ("cores_per_ccx", Kind::Count),
    ("asid_bits", Kind::Counts),
    ("numa", Kind::Counts),
    ("kernel", Kind::Kernel),
    ("mem_bw_gbs", Kind::Float),
    ("tlbi_range", Kind::Flag),
    ("invpcid", Kind::Flag),
    ("meltdown", Kind::Flag),
    ("threads_per_core", Kind::Count),
    ("smt_share", Kind::Float),
    ("smt_tlbs", Kind::Flag),
];

/// The top-level fields a file may leave out, with the value and source they
/// then take: a machine without SMT, whatever its file's age.
const DEFAULTS: &[(&str, Default, &str)] = &[
    ("threads_per_core", Default::Count(1), "one hardware thread per core: no SMT unless the machine's file says so"),
    ("smt_share", Default::Count(1), "unused: one hardware thread per core"),
    (
        "smt_tlbs",
        Default::Flag(false),
        "each thread's TLBs its own unless the machine's file says its cores share them",
    ),
];

/// A default of [`DEFAULTS`].
#[derive(Clone, Copy)]
enum Default {
    Count(i64),
    Flag(bool),
}

/// Keys a file has besides its fields.
const META: &[&str] = &["name", "base", "estimates", "tlb", "costs_cycles"];

/// The most layers of bases a file may stand on.
const MAX_DEPTH: usize = 8;

/// The largest cost a file may give, in cycles (a second at 10 GHz: more is a
/// mistake, and would overflow the simulator's time arithmetic).
const MAX_CYCLES: u64 = 10_000_000_000;

/// What a field holds.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Text,
    Arch,
    Float,
    Count,
    Counts,
    Kernel,
    Flag,
    Cycles,
}

impl Kind {
    fn expected(self) -> &'static str {
        match self {
            Kind::Text => "a string",
            Kind::Arch => "\"arm64\" or \"x86-64\"",
            Kind::Float => "a number",
            Kind::Count => "a whole number",
            Kind::Counts => "a list of whole numbers",
            Kind::Kernel => "a kernel such as \"linux-6.9\" or \"freebsd-13\"",
            Kind::Flag => "true or false",
            Kind::Cycles => "a whole number of cycles (or { ns = ... })",
        }
    }
}

/// Why a machine file could not be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}: {why}")]
pub struct MachineFileError {
    /// The file (a path, or `machines/NAME.toml` for a preset).
    pub file: String,
    /// What is wrong and how to fix it.
    pub why: String,
}

/// One field as a file gives it.
#[derive(Clone, Debug)]
struct Entry {
    value: Value,
    source: Source,
}

/// A field's value: as given, or a cost in ns to convert at the clock.
#[derive(Clone, Debug)]
enum Value {
    Given(toml::Value),
    Ns(f64),
}

/// Where a field's value comes from, as its file says.
#[derive(Clone, Debug)]
enum Source {
    /// A source (`source = "..."`); `notes` stands for the machine's notes.
    Given(String),
    /// An estimate and its reason.
    Estimate(String),
    /// The same source as the named field of the same table.
    As(String),
    /// A plain value: the file that set it.
    File(String),
}

/// One file's own keys.
#[derive(Clone, Debug)]
struct Layer {
    file: String,
    name: String,
    base: Option<String>,
    /// Field path (`freq_ghz`, `tlb.l2_ways`, `costs_cycles.dvm_hop`) to entry.
    entries: BTreeMap<String, Entry>,
    estimates: Option<Vec<Estimate>>,
}

/// The machine files compiled in: `(stem, text)` of every preset, of every
/// architecture base, and the shared estimates (`build.rs`).
mod embedded {
    include!(concat!(env!("OUT_DIR"), "/machines.rs"));
}

/// Returns every built-in preset, in file-name order.
pub(super) fn builtin() -> Result<Vec<Preset>, MachineFileError> {
    embedded::PRESETS
        .iter()
        .map(|(stem, _)| {
            let file = format!("machines/{stem}.toml");
            resolve_chain(base_layer(stem, &file)?, &file)
        })
        .collect()
}

/// Returns the costs an architecture's base file gives (the figures every
/// preset of it starts from).
pub(super) fn base_costs(arch: Arch) -> Result<Costs, MachineFileError> {
    let stem = super::arch_name(arch);
    let layer = base_layer(stem, "the simulator")?;
    let mut c = CostMap::new(&layer.file)?;
    for (path, e) in &layer.entries {
        if let Some(key) = path.strip_prefix("costs_cycles.") {
            let Value::Given(v) = &e.value else { continue };
            c.set(key, v, &layer.file)?;
        }
    }
    c.costs(&layer.file)
}

/// Reads the machine file at `path`.
pub fn load_path(path: &std::path::Path) -> Result<Preset, MachineFileError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| MachineFileError {
        file: file.clone(),
        why: format!("cannot read it ({e}); --machine takes a preset's name or the path of a .toml machine file"),
    })?;
    load_text(&text, &file)
}

/// Reads a machine from `text`, the contents of `file`.
pub fn load_text(text: &str, file: &str) -> Result<Preset, MachineFileError> {
    resolve_chain(parse(text, file)?, file)
}

/// Resolves a parsed file's chain of bases and types the machine.
fn resolve_chain(top: Layer, file: &str) -> Result<Preset, MachineFileError> {
    let mut chain = vec![top];
    while let Some(base) = chain.last().and_then(|l| l.base.clone()) {
        if chain.len() > MAX_DEPTH {
            return Err(err(file, format!("more than {MAX_DEPTH} bases deep (a base names itself in a circle?)")));
        }
        if chain.iter().any(|l| l.name == base) {
            return Err(err(file, format!("base '{base}' is in a circle of bases")));
        }
        let from = chain.last().map(|l| l.file.clone()).unwrap_or_default();
        chain.push(base_layer(&base, &from)?);
    }
    build(chain, file)
}

/// Returns the layer of the preset or architecture base called `name`.
fn base_layer(name: &str, from: &str) -> Result<Layer, MachineFileError> {
    // Each compiled-in file is parsed once per process, however many files
    // stand on it.
    type Parsed = BTreeMap<&'static str, Result<Layer, MachineFileError>>;
    static LAYERS: OnceLock<Parsed> = OnceLock::new();
    let layers = LAYERS.get_or_init(|| {
        let presets = embedded::PRESETS.iter().map(|(s, t)| (*s, parse(t, &format!("machines/{s}.toml"))));
        let bases = embedded::BASES.iter().map(|(s, t)| (*s, parse(t, &format!("machines/base/{s}.toml"))));
        bases.chain(presets).collect()
    });
    match layers.get(name) {
        Some(layer) => layer.clone(),
        None => {
            let names: Vec<&str> = embedded::PRESETS.iter().chain(embedded::BASES.iter()).map(|(s, _)| *s).collect();
            Err(err(from, format!("unknown base '{name}'; a base is one of: {}", names.join(", "))))
        }
    }
}

fn err(file: &str, why: String) -> MachineFileError {
    MachineFileError { file: file.to_string(), why }
}

/// Returns the kind of the field at `path`, or `None` for a key no machine has.
fn kind_of(path: &str) -> Option<Kind> {
    if let Some(k) = path.strip_prefix("tlb.") {
        return tlb_fields().iter().any(|f| f == k).then_some(Kind::Count);
    }
    if let Some(k) = path.strip_prefix("costs_cycles.") {
        return cost_fields().iter().any(|f| f == k).then_some(Kind::Cycles);
    }
    TOP.iter().find(|(k, _)| *k == path).map(|(_, kind)| *kind)
}

/// The names of the TLB geometry's fields, as a file gives them.
fn tlb_fields() -> &'static [String] {
    static NAMES: OnceLock<Vec<String>> = OnceLock::new();
    NAMES.get_or_init(|| field_names(&TlbGeometry::default()))
}

/// The names of the costs, as a file gives them.
fn cost_fields() -> &'static [String] {
    static NAMES: OnceLock<Vec<String>> = OnceLock::new();
    NAMES.get_or_init(|| field_names(&Costs::default()))
}

/// Returns the field names of a struct as it serialises.
fn field_names<T: serde::Serialize>(t: &T) -> Vec<String> {
    match serde_json::to_value(t) {
        Ok(serde_json::Value::Object(m)) => m.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// Returns every field path a complete machine sets.
pub(crate) fn all_paths() -> Vec<String> {
    let top = TOP.iter().map(|(k, _)| k.to_string());
    let tlb = tlb_fields().iter().map(|k| format!("tlb.{k}"));
    let costs = cost_fields().iter().map(|k| format!("costs_cycles.{k}"));
    top.chain(tlb).chain(costs).collect()
}

/// Parses one file into its layer, checking every key and the form of every entry.
fn parse(text: &str, file: &str) -> Result<Layer, MachineFileError> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| err(file, format!("not TOML: {e}")))?;
    let name = match table.get("name") {
        Some(toml::Value::String(s)) if !s.trim().is_empty() => s.clone(),
        Some(_) => return Err(err(file, "'name' must be a non-empty string".into())),
        None => return Err(err(file, "no 'name': a machine file names its machine (name = \"my-machine\")".into())),
    };
    let base = match table.get("base") {
        None => None,
        Some(toml::Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(err(file, "'base' must be a preset's name, as a string (base = \"milan\")".into())),
    };
    let mut entries = BTreeMap::new();
    for (key, v) in &table {
        match key.as_str() {
            "tlb" | "costs_cycles" => {
                let toml::Value::Table(t) = v else {
                    return Err(err(file, format!("'{key}' must be a table ([{key}])")));
                };
                for (k, v) in t {
                    let path = format!("{key}.{k}");
                    entries.insert(path.clone(), entry(&path, v, file)?);
                }
            }
            k if META.contains(&k) => {}
            k => {
                entries.insert(k.to_string(), entry(k, v, file)?);
            }
        }
    }
    let estimates = match table.get("estimates") {
        None => None,
        Some(v) => Some(estimates(v, file)?),
    };
    Ok(Layer { file: file.to_string(), name, base, entries, estimates })
}

/// Parses one field's entry.
fn entry(path: &str, v: &toml::Value, file: &str) -> Result<Entry, MachineFileError> {
    let Some(kind) = kind_of(path) else {
        let (table, key) = path.rsplit_once('.').map_or(("", path), |(t, k)| (t, k));
        let known: Vec<String> = all_paths()
            .into_iter()
            .filter(|p| p.rsplit_once('.').map_or("", |(t, _)| t) == table)
            .map(|p| p.rsplit_once('.').map_or(p.clone(), |(_, k)| k.to_string()))
            .collect();
        let hint = if key == "sockets" {
            " (sockets follow from cores / cores_per_socket; a run takes --set sockets=N)".to_string()
        } else {
            String::new()
        };
        let place = if table.is_empty() {
            "a machine (besides name, base, estimates, [tlb] and [costs_cycles])".to_string()
        } else {
            format!("[{table}]")
        };
        let near = tlbkit_registry::suggest::did_you_mean(key, known.iter().map(String::as_str));
        return Err(err(file, format!("unknown field '{path}'{near}{hint}; {place} takes: {}", known.join(", "))));
    };
    let toml::Value::Table(t) = v else {
        return Ok(Entry { value: Value::Given(v.clone()), source: Source::File(file.to_string()) });
    };
    for k in t.keys() {
        if !["value", "ns", "source", "estimate", "source_as"].contains(&k.as_str()) {
            return Err(err(
                file,
                format!("{path}: unknown key '{k}'; a field is a value or {{ value = ..., source = \"...\" }} (or estimate, source_as, and ns for a cost)"),
            ));
        }
    }
    let value = match (t.get("value"), t.get("ns")) {
        (Some(v), None) => Value::Given(v.clone()),
        (None, Some(ns)) if kind == Kind::Cycles => match ns.as_float().or_else(|| ns.as_integer().map(|i| i as f64)) {
            Some(x) if x.is_finite() && x >= 0.0 => Value::Ns(x),
            _ => return Err(err(file, format!("{path}: ns must be a number of nanoseconds, 0 or more"))),
        },
        (None, Some(_)) => {
            return Err(err(file, format!("{path}: only a cost under [costs_cycles] can be given in ns")))
        }
        (Some(_), Some(_)) => return Err(err(file, format!("{path}: give value or ns, not both"))),
        (None, None) => return Err(err(file, format!("{path}: no value (value = ...)"))),
    };
    let text = |k: &str| t.get(k).and_then(|v| v.as_str()).map(str::to_string);
    let source = match (text("source"), text("estimate"), text("source_as")) {
        (Some(s), None, None) => Source::Given(s),
        (None, Some(s), None) => Source::Estimate(s),
        (None, None, Some(s)) => Source::As(s),
        (None, None, None) => Source::File(file.to_string()),
        _ => return Err(err(file, format!("{path}: give one of source, estimate or source_as, as a string"))),
    };
    Ok(Entry { value, source })
}

/// Parses `estimates`: a list of shared estimates' names or of tables.
fn estimates(v: &toml::Value, file: &str) -> Result<Vec<Estimate>, MachineFileError> {
    let toml::Value::Array(items) = v else {
        return Err(err(file, "'estimates' must be a list ([[estimates]] tables, or names of shared ones)".into()));
    };
    let shared: toml::Table =
        embedded::ESTIMATES.parse().map_err(|e: toml::de::Error| err("machines/estimates.toml", e.to_string()))?;
    items
        .iter()
        .map(|item| {
            let t = match item {
                toml::Value::String(name) => match shared.get(name) {
                    Some(toml::Value::Table(t)) => t,
                    _ => {
                        let known: Vec<&str> = shared.keys().map(String::as_str).collect();
                        return Err(err(
                            file,
                            format!("unknown shared estimate '{name}'; known: {}", known.join(", ")),
                        ));
                    }
                },
                toml::Value::Table(t) => t,
                _ => {
                    return Err(err(
                        file,
                        "an estimate is a table (costs, used_when, why) or a shared one's name".into(),
                    ))
                }
            };
            let text = |k: &str| {
                t.get(k)
                    .and_then(|v| v.as_str())
                    .map(str::to_string)
                    .ok_or_else(|| err(file, format!("an estimate needs '{k}' as a string (costs, used_when, why)")))
            };
            let used_when = text("used_when")?;
            if !ESTIMATE_USES.iter().any(|(m, _)| *m == used_when) {
                let known: Vec<&str> = ESTIMATE_USES.iter().map(|(m, _)| *m).collect();
                return Err(err(file, format!("estimate used_when '{used_when}': one of {}", known.join(", "))));
            }
            Ok(Estimate { costs: text("costs")?, used_when, why: text("why")? })
        })
        .collect()
}

/// Gives each field of [`DEFAULTS`] that no layer set its default.
fn fill_defaults(merged: &mut BTreeMap<String, (Entry, String)>, file: &str) {
    for (key, value, source) in DEFAULTS {
        if !merged.contains_key(*key) {
            let value = match *value {
                Default::Count(n) => toml::Value::Integer(n),
                Default::Flag(b) => toml::Value::Boolean(b),
            };
            let e = Entry { value: Value::Given(value), source: Source::Given(source.to_string()) };
            merged.insert(key.to_string(), (e, file.to_string()));
        }
    }
}

/// Merges a chain of layers (the file first, its deepest base last) and types
/// the result.
fn build(chain: Vec<Layer>, file: &str) -> Result<Preset, MachineFileError> {
    let own = chain[0].clone();
    let mut merged: BTreeMap<String, (Entry, String)> = BTreeMap::new();
    let mut estimates = Vec::new();
    for layer in chain.iter().rev() {
        for (path, e) in &layer.entries {
            merged.insert(path.clone(), (e.clone(), layer.file.clone()));
        }
        if let Some(e) = &layer.estimates {
            estimates = e.clone();
        }
    }
    // A partial file keeps its base's description unless it gives its own.
    if let (Some(base), false) = (&own.base, own.entries.contains_key("description")) {
        if let Some((e, from)) = merged.get("description").cloned() {
            if let Value::Given(toml::Value::String(d)) = e.value {
                let changed: Vec<&str> = own.entries.keys().map(String::as_str).collect();
                let text = format!("{base} with {} from {file}: {d}", changed.join(", "));
                merged
                    .insert("description".into(), (Entry { value: Value::Given(text.into()), source: e.source }, from));
            }
        }
    }
    fill_defaults(&mut merged, file);
    let missing: Vec<String> = all_paths().into_iter().filter(|p| !merged.contains_key(p)).collect();
    if !missing.is_empty() {
        return Err(err(
            file,
            format!(
                "missing {}: {} (name a base = \"<preset>\" to start from one, or set them)",
                if missing.len() == 1 { "field" } else { "fields" },
                missing.join(", ")
            ),
        ));
    }
    // The value of the field at `p`, with the file that gave it (every field
    // is there: checked above), and the error of one of the wrong kind.
    let given = |p: &str| -> Result<(&toml::Value, &str), MachineFileError> {
        match merged.get(p) {
            Some((Entry { value: Value::Given(v), .. }, f)) => Ok((v, f.as_str())),
            Some((_, f)) => Err(err(f, format!("{p}: only a cost can be given in ns"))),
            None => Err(err(file, format!("missing field {p}"))),
        }
    };
    let wrong = |f: &str, p: &str, kind: Kind| err(f, format!("{p}: expected {}", kind.expected()));
    let text = |p: &str| -> Result<String, MachineFileError> {
        match given(p)? {
            (toml::Value::String(s), _) => Ok(s.clone()),
            (_, f) => Err(wrong(f, p, Kind::Text)),
        }
    };
    let float = |p: &str| -> Result<f64, MachineFileError> {
        match given(p)? {
            (toml::Value::Float(x), _) => Ok(*x),
            (toml::Value::Integer(i), _) => Ok(*i as f64),
            (_, f) => Err(wrong(f, p, Kind::Float)),
        }
    };
    let count = |p: &str| -> Result<usize, MachineFileError> {
        match given(p)? {
            (toml::Value::Integer(i), _) if *i >= 0 => Ok(*i as usize),
            (toml::Value::Integer(i), f) => Err(err(f, format!("{p}: {i} is below 0"))),
            (_, f) => Err(wrong(f, p, Kind::Count)),
        }
    };
    let counts = |p: &str| -> Result<Vec<usize>, MachineFileError> {
        match given(p)? {
            (toml::Value::Array(a), f) => a
                .iter()
                .map(|v| {
                    v.as_integer().filter(|i| *i >= 0).map(|i| i as usize).ok_or_else(|| wrong(f, p, Kind::Counts))
                })
                .collect(),
            (_, f) => Err(wrong(f, p, Kind::Counts)),
        }
    };
    let flag = |p: &str| -> Result<bool, MachineFileError> {
        match given(p)? {
            (toml::Value::Boolean(b), _) => Ok(*b),
            (_, f) => Err(wrong(f, p, Kind::Flag)),
        }
    };
    let arch = match text("arch")?.as_str() {
        "arm64" => Arch::Arm64,
        "x86-64" => Arch::X86_64,
        other => return Err(err(file, format!("arch '{other}': expected {}", Kind::Arch.expected()))),
    };
    let kernel_name = text("kernel")?;
    let kernel = parse_kernel(&kernel_name)
        .ok_or_else(|| err(file, format!("kernel '{kernel_name}': expected {}", Kind::Kernel.expected())))?;
    let freq_ghz = float("freq_ghz")?;
    let mut tlb = TlbGeometry::default();
    let mut costs = CostMap::new(file)?;
    for (path, (e, f)) in &merged {
        if let Some(k) = path.strip_prefix("tlb.") {
            let n = count(path)?;
            match k {
                "l1d_entries" => tlb.l1d_entries = n,
                "l2_entries" => tlb.l2_entries = n,
                "l2_ways" => tlb.l2_ways = n,
                "pwc_entries" => tlb.pwc_entries = n,
                _ => return Err(err(f, format!("unknown field '{path}'"))),
            }
        } else if let Some(k) = path.strip_prefix("costs_cycles.") {
            match &e.value {
                Value::Given(v) => costs.set(k, v, f)?,
                Value::Ns(ns) => {
                    let cycles = (ns * freq_ghz).round();
                    costs.set(k, &toml::Value::Integer(cycles as i64), f)?;
                }
            }
        }
    }
    let costs = costs.costs(file)?;
    let cost_sources = text("cost_sources")?;
    let sources = sources(&merged, &cost_sources)?;
    let asid_bits = counts("asid_bits")?
        .into_iter()
        .map(|b| u8::try_from(b).map_err(|_| err(file, format!("asid_bits: {b} bits is more than any machine has"))))
        .collect::<Result<Vec<u8>, _>>()?;
    let preset = Preset {
        name: own.name.clone(),
        description: text("description")?,
        arch,
        freq_ghz,
        cores_per_socket: count("cores_per_socket")?,
        cores_per_ccx: count("cores_per_ccx")?,
        real_cores: count("cores")?,
        asid_bits,
        numa: counts("numa")?,
        tlb,
        kernel,
        mem_bw_gbs: float("mem_bw_gbs")?,
        tlbi_range: flag("tlbi_range")?,
        invpcid: flag("invpcid")?,
        meltdown: flag("meltdown")?,
        threads: CoreThreads {
            per_core: count("threads_per_core")?,
            share: float("smt_share")?,
            tlbs: flag("smt_tlbs")?,
        },
        costs,
        estimates,
        cost_sources,
        sources,
    };
    check(&preset).map_err(|why| err(file, why))?;
    Ok(preset)
}

/// The costs being set, by name, as JSON values: typed into [`Costs`] once
/// every field is set.
struct CostMap(serde_json::Map<String, serde_json::Value>);

impl CostMap {
    /// Every cost at zero.
    fn new(file: &str) -> Result<Self, MachineFileError> {
        match serde_json::to_value(Costs::default()) {
            Ok(serde_json::Value::Object(m)) => Ok(CostMap(m)),
            _ => Err(err(file, "internal: costs do not serialise".into())),
        }
    }

    /// Sets the cost `key` from a TOML value, checking its type and range.
    fn set(&mut self, key: &str, v: &toml::Value, file: &str) -> Result<(), MachineFileError> {
        let json = match (self.0.get(key), v) {
            (Some(serde_json::Value::Bool(_)), toml::Value::Boolean(b)) => serde_json::Value::from(*b),
            (Some(serde_json::Value::Number(_)), toml::Value::Integer(i)) if *i >= 0 && (*i as u64) <= MAX_CYCLES => {
                serde_json::Value::from(*i as u64)
            }
            (Some(serde_json::Value::Number(_)), toml::Value::Integer(i)) => {
                return Err(err(file, format!("costs_cycles.{key}: {i} is out of range (0 to {MAX_CYCLES} cycles)")))
            }
            (Some(serde_json::Value::Bool(_)), _) => {
                return Err(err(file, format!("costs_cycles.{key}: expected {}", Kind::Flag.expected())))
            }
            (Some(_), _) => return Err(err(file, format!("costs_cycles.{key}: expected {}", Kind::Cycles.expected()))),
            (None, _) => return Err(err(file, format!("unknown field 'costs_cycles.{key}'"))),
        };
        self.0.insert(key.to_string(), json);
        Ok(())
    }

    /// The costs, typed.
    fn costs(self, file: &str) -> Result<Costs, MachineFileError> {
        serde_json::from_value(serde_json::Value::Object(self.0)).map_err(|e| err(file, format!("costs_cycles: {e}")))
    }
}

/// Returns each field's source as text: the source, `estimate: why`, or the
/// file that set a plain value; `notes` is the machine's notes file. A
/// `source_as` must lead, sibling by sibling, to a field with a source: one
/// that names a field the machine does not set, or comes back to itself, is
/// an error of the file that wrote it.
fn sources(
    merged: &BTreeMap<String, (Entry, String)>,
    notes: &str,
) -> Result<BTreeMap<String, String>, MachineFileError> {
    let resolve = |start: &str, set_in: &str| -> Result<String, MachineFileError> {
        let mut path = start.to_string();
        for _ in 0..=merged.len() {
            let Some((e, _)) = merged.get(&path) else {
                return Err(err(
                    set_in,
                    format!(
                        "{start}: source_as leads to '{path}', which this machine does not set; name a field of \
                         the same table that has a source or an estimate"
                    ),
                ));
            };
            match &e.source {
                Source::Given(s) if s == "notes" => return Ok(format!("notes: {notes}")),
                Source::Given(s) => return Ok(s.clone()),
                Source::Estimate(s) => return Ok(format!("estimate: {s}")),
                Source::File(f) => return Ok(format!("set in {f}")),
                Source::As(sibling) => {
                    path = match path.rsplit_once('.') {
                        Some((table, _)) => format!("{table}.{sibling}"),
                        None => sibling.clone(),
                    }
                }
            }
        }
        Err(err(
            set_in,
            format!("{start}: its source_as comes back to itself; end it at a field with a source or an estimate"),
        ))
    };
    merged.iter().map(|(p, (_, set_in))| Ok((p.clone(), resolve(p, set_in)?))).collect()
}

/// Returns the kernel a file names (`linux-6.9`, `freebsd-13`).
pub fn parse_kernel(s: &str) -> Option<Kernel> {
    if let Some(v) = s.strip_prefix("linux-") {
        let (a, b) = v.split_once('.')?;
        return Some(Kernel::Linux(a.parse().ok()?, b.parse().ok()?));
    }
    s.strip_prefix("freebsd-").and_then(|v| v.parse().ok()).map(Kernel::FreeBsd)
}

/// Checks that a machine is one the simulator can build; returns what is wrong.
pub fn check(p: &Preset) -> Result<(), String> {
    let mut bad = Vec::new();
    if !(p.freq_ghz.is_finite() && (0.1..=20.0).contains(&p.freq_ghz)) {
        bad.push(format!("freq_ghz {} is out of range (0.1 to 20)", p.freq_ghz));
    }
    if p.real_cores == 0 || p.cores_per_socket == 0 || p.cores_per_ccx == 0 {
        bad.push("cores, cores_per_socket and cores_per_ccx must each be 1 or more".into());
    } else if !p.cores_per_socket.is_multiple_of(p.cores_per_ccx) {
        bad.push(format!(
            "cores_per_ccx {} does not divide cores_per_socket {} (a socket is whole cache domains)",
            p.cores_per_ccx, p.cores_per_socket
        ));
    }
    if p.real_cores > super::MAX_CPUS {
        bad.push(format!("cores {} is more than the simulator's {} CPUs", p.real_cores, super::MAX_CPUS));
    }
    let max_bits = if p.arch == Arch::X86_64 { 12 } else { 16 };
    if p.asid_bits.is_empty() || p.asid_bits.iter().any(|b| *b == 0 || *b > max_bits) {
        bad.push(format!("asid_bits {:?}: one or more widths, each 1 to {max_bits} on this arch", p.asid_bits));
    }
    if p.numa.is_empty() || p.numa.iter().any(|n| *n == 0 || *n > p.cores_per_socket.max(1)) {
        bad.push(format!("numa {:?}: one or more node counts, each 1 to cores_per_socket", p.numa));
    }
    let t = &p.tlb;
    if t.l1d_entries == 0 || t.l2_entries == 0 || t.l2_ways == 0 || t.pwc_entries == 0 {
        bad.push("every [tlb] size must be 1 or more".into());
    } else if !t.l2_entries.is_multiple_of(t.l2_ways) {
        bad.push(format!("tlb.l2_entries {} is not a multiple of tlb.l2_ways {}", t.l2_entries, t.l2_ways));
    }
    let most = crate::tlb::MAX_L1_ENTRIES;
    if t.l1d_entries > most || t.pwc_entries > most {
        bad.push(format!(
            "tlb.l1d_entries {} and tlb.pwc_entries {}: the simulator's L1 TLB and walk cache hold at most {most} \
             entries each (a machine with more: give {most})",
            t.l1d_entries, t.pwc_entries
        ));
    }
    if t.l2_entries > 1 << 20 {
        bad.push(format!("tlb.l2_entries {} is beyond any machine's (at most 1048576)", t.l2_entries));
    }
    let most = super::MAX_MLP;
    if !(1..=most).contains(&p.costs.mlp) {
        bad.push(format!(
            "costs_cycles.mlp {}: the loads a core has in flight at once (its L1D fill buffers), 1 to {most}",
            p.costs.mlp
        ));
    }
    if !(p.mem_bw_gbs.is_finite() && p.mem_bw_gbs > 0.0) {
        bad.push(format!("mem_bw_gbs {} must be a positive number", p.mem_bw_gbs));
    }
    let (threads, share) = (p.threads.per_core, p.threads.share);
    if !(1..=8).contains(&threads) || !p.cores_per_socket.is_multiple_of(threads.max(1)) {
        bad.push(format!(
            "threads_per_core {} must be 1 to 8 and divide cores_per_socket {} (a socket's CPUs are whole cores)",
            threads, p.cores_per_socket
        ));
    }
    if !(share.is_finite() && share > 0.0 && share <= 1.0) {
        bad.push(format!("smt_share {share} must be above 0 and at most 1"));
    }
    if p.invpcid && p.arch != Arch::X86_64 {
        bad.push("invpcid is an x86 instruction: false on arm64".into());
    }
    if let Err(why) = check_idle(&p.costs.idle) {
        bad.push(why);
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(bad.join("; "))
    }
}

/// Checks a machine's idle states: at most four polling, and the present
/// ones' target residencies rising with depth (cpuidle's table is ordered so).
fn check_idle(i: &super::IdleCosts) -> Result<(), String> {
    if i.idle_polling_states > 4 {
        return Err(format!(
            "costs_cycles.idle_polling_states {} must be 0 to 4 (the states kept)",
            i.idle_polling_states
        ));
    }
    let present: Vec<u64> =
        [i.idle1_residency, i.idle2_residency, i.idle3_residency].into_iter().filter(|&r| r > 0).collect();
    if present.windows(2).any(|w| w[0] > w[1]) {
        return Err(format!(
            "costs_cycles.idle1_residency to idle3_residency {present:?} must rise with the state's depth \
             (0 for a state the machine lacks)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Preset, String> {
        load_text(text, "my.toml").map_err(|e| e.to_string())
    }

    #[test]
    fn a_partial_file_starts_from_its_base_and_replaces_what_it_sets() {
        let milan = crate::preset::named("milan");
        let p = load(
            "name = \"milan32\"\nbase = \"milan\"\ncores = 32\ncores_per_socket = { value = 32, source = \"a 32-core part\" }\n\
             [costs_cycles]\nipi_deliver = 900\ncacheline_transfer = { ns = 20, estimate = \"a guess\" }\n",
        )
        .unwrap();
        assert_eq!((p.name.as_str(), p.real_cores, p.cores_per_socket), ("milan32", 32, 32));
        assert_eq!((p.costs.ipi.ipi_deliver, p.costs.lines.cacheline_transfer), (900, 49), "20 ns at 2.45 GHz");
        assert_eq!(p.costs.dvm.dvm_hop, milan.costs.dvm.dvm_hop);
        assert_eq!((p.tlb, p.kernel, p.estimates.clone()), (milan.tlb, milan.kernel, milan.estimates.clone()));
        assert_eq!(p.sources["cores"], "set in my.toml");
        assert_eq!(p.sources["cores_per_socket"], "a 32-core part");
        assert_eq!(p.sources["costs_cycles.cacheline_transfer"], "estimate: a guess");
        assert_eq!(p.sources["costs_cycles.dvm_hop"], milan.sources["costs_cycles.dvm_hop"]);
        assert!(p.description.starts_with("milan with "), "{}", p.description);
    }

    #[test]
    fn a_cost_in_ns_follows_the_clock_a_derived_file_sets() {
        let p = load("name = \"slow\"\nbase = \"icx8358\"\nfreq_ghz = 1.0\n").unwrap();
        assert_eq!(p.costs.lines.cacheline_transfer, 51, "icx8358's 51.3 ns at 1 GHz");
        assert_eq!(p.costs.walk_level, crate::preset::named("icx8358").costs.walk_level, "cycles stay cycles");
    }

    #[test]
    fn bad_files_are_refused_with_what_to_change() {
        let cases = [
            ("name = \"x\"\nbase = \"milan\"\ncorez = 3\n", "unknown field 'corez' (did you mean 'cores'?); a machine (besides name, base, estimates, [tlb] and [costs_cycles]) takes: description"),
            ("name = \"x\"\nbase = \"milan\"\n[costs_cycles]\nipi_delivr = 3\n", "'costs_cycles.ipi_delivr' (did you mean 'ipi_deliver'?); [costs_cycles] takes: atomic_hit, cacheline_cross_ccx"),
            ("name = \"x\"\nbase = \"milan\"\nsockets = 2\n", "a run takes --set sockets=N"),
            ("name = \"x\"\nbase = \"milan\"\ncores = -1\n", "cores: -1 is below 0"),
            ("name = \"x\"\nbase = \"milan\"\ncores = \"many\"\n", "cores: expected a whole number"),
            ("name = \"x\"\nbase = \"milan\"\ncores = 0\n", "must each be 1 or more"),
            ("name = \"x\"\nbase = \"milan\"\nfreq_ghz = 0\n", "freq_ghz 0 is out of range"),
            ("name = \"x\"\nbase = \"milan\"\n[tlb]\nl2_ways = 7\n", "not a multiple of tlb.l2_ways 7"),
            ("name = \"x\"\nbase = \"milan\"\n[costs_cycles]\ndvm_hop = 1e3\n", "dvm_hop: expected a whole number of cycles"),
            ("name = \"x\"\nbase = \"milna\"\n", "unknown base 'milna'; a base is one of: altra"),
            ("name = \"x\"\narch = \"arm64\"\n", "missing fields: description, cost_sources, freq_ghz"),
            ("base = \"milan\"\n", "no 'name'"),
            ("name = \"x\"\nbase = \"milan\"\nkernel = \"linux-six\"\n", "kernel 'linux-six': expected a kernel"),
            ("name = \"x\"\nbase = \"milan\"\ncores = { value = 3, sauce = \"me\" }\n", "cores: unknown key 'sauce'"),
            ("name = \"x\"\nbase = \"milan\"\n[costs_cycles]\nmlp = { ns = -1 }\n", "ns must be a number"),
            ("name = \"x\"\nbase = \"milan\"\nestimates = [\"nope\"]\n", "unknown shared estimate 'nope'"),
            ("name = \"x\"\nbase = \"milan\"\ncores = 9000\n", "more than the simulator's 4096 CPUs"),
            ("name = \"x\"\nbase = \"milan\"\ninvpcid = 1\n", "invpcid: expected true or false"),
            ("name = \"x\"\nbase = \"milan\"\ncores = 3\n[[x]]\n", "unknown field 'x'"),
            ("name = \"x\"\n[costs_cycles\n", "not TOML"),
            ("name = \"x\"\nbase = \"skx8170\"\n[costs_cycles]\nidle_polling_states = 5\n", "must be 0 to 4"),
            ("name = \"x\"\nbase = \"skx8170\"\n[costs_cycles]\nidle2_residency = 1\n", "must rise with the state's depth"),
            ("name = \"x\"\nbase = \"milan\"\n[tlb]\npwc_entries = 65\n", "hold at most 64 entries each"),
            ("name = \"x\"\nbase = \"milan\"\n[costs_cycles]\nmlp = 0\n", "costs_cycles.mlp 0: the loads a core has in flight"),
            ("name = \"x\"\nbase = \"milan\"\n[costs_cycles]\nmlp = 65\n", "1 to 64"),
            ("name = \"x\"\nbase = \"milan\"\n[tlb]\nl1d_entries = 72\n", "tlb.l1d_entries 72"),
            ("name = \"x\"\nbase = \"milan\"\n[tlb]\nl2_entries = { value = 2048, source_as = \"l2_entires\" }\n", "tlb.l2_entries: source_as leads to 'tlb.l2_entires', which this machine does not set"),
            ("name = \"x\"\nbase = \"milan\"\n[tlb]\nl2_entries = { value = 2048, source_as = \"l2_ways\" }\nl2_ways = { value = 8, source_as = \"l2_entries\" }\n", "comes back to itself"),
        ];
        for (text, want) in cases {
            let e = load(text).expect_err(text);
            assert!(e.starts_with("my.toml: ") && e.contains(want), "{text:?}: {e}");
        }
    }
}
