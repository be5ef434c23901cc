//! What a check reached of a C policy's own code, line by line, and of the
//! lines a change made: a "no violation" says nothing of code no execution
//! ran (TLC prints its coverage for the same reason).
//!
//! The measurement is the C front end's ([`tlbkit_c::coverage`]: the
//! checker's build marks every basic block that runs). [`reached`] reads it
//! once the check is over and, given a base (`--base`: the same files at a
//! git revision, or other files), which of the changed lines hold code and
//! whether any execution reached one of them. The report prints a line per
//! file, and its result says so when the change was never reached.
//!
//! A Rust policy's lines are measured in a binary built for coverage (the
//! `coverage` profile, [`RustCoverage`]: LLVM's counters, read in place by
//! [`crate::llvmcov`]); with `--base @REV` the changed lines are those of
//! every instrumented file that differs at the git revision `REV`. In any
//! other build the report's `hooks called:` line ([`crate::hooks`]) says
//! which of its methods ran.

use crate::llvmcov;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::OnceLock;
use tlbkit_c::coverage::{self, FileCoverage};
use tlbkit_c::Sources;

/// Unreached lines (as ranges) and functions a text report lists before it
/// says how many more there are.
const LISTED: usize = 12;

/// What a check reached of one C file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CodeReached {
    /// The file, as named.
    pub file: String,
    /// Lines that hold code the compiler kept.
    pub lines: usize,
    /// Of them, the lines some execution ran.
    pub reached: usize,
    /// The lines with code no execution ran.
    pub unreached: Vec<u32>,
    /// The file's functions no execution entered.
    pub functions_unreached: Vec<String>,
    /// The lines changed since the base, where one was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changed: Option<ChangeReached>,
}

/// What a check reached of the lines a change made to one file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChangeReached {
    /// The base the file is compared with (`context.c@v6.12`).
    pub base: String,
    /// The file's lines that differ from the base's (changed or added).
    pub lines: Vec<u32>,
    /// Of them, the lines that hold code.
    pub with_code: Vec<u32>,
    /// Of those, the lines no execution ran.
    pub unreached: Vec<u32>,
}

impl CodeReached {
    /// True when the file changed since the base in lines with code, and no
    /// execution ran any of them.
    pub fn change_unreached(&self) -> bool {
        self.changed.as_ref().is_some_and(|c| !c.with_code.is_empty() && c.unreached.len() == c.with_code.len())
    }

    /// The text report's lines for the file.
    pub fn lines(&self) -> String {
        let mut s = format!("code reached: {} {} of {} lines with code", self.file, self.reached, self.lines);
        if !self.unreached.is_empty() {
            let _ = write!(s, "; never: lines {}", listed(&self.unreached));
        }
        if !self.functions_unreached.is_empty() {
            let more = self.functions_unreached.len().saturating_sub(LISTED);
            let _ = write!(
                s,
                "; functions never entered: {}",
                self.functions_unreached[..self.functions_unreached.len().min(LISTED)].join(", ")
            );
            if more > 0 {
                let _ = write!(s, " and {more} more");
            }
        }
        s.push('\n');
        if let Some(c) = &self.changed {
            let _ = write!(s, "changed since {}: ", c.base);
            if c.lines.is_empty() {
                s.push_str("no line\n");
            } else if c.with_code.is_empty() {
                let _ = writeln!(s, "lines {}, none of them code the compiler kept", listed(&c.lines));
            } else {
                let n = c.with_code.len();
                let _ = write!(s, "{n} line{} with code ({}), ", if n == 1 { "" } else { "s" }, listed(&c.with_code));
                match c.unreached.len() {
                    0 => s.push_str("every one reached"),
                    k if k == n => s.push_str("none reached"),
                    _ => {
                        let _ = write!(s, "{} reached; never: {}", n - c.unreached.len(), listed(&c.unreached));
                    }
                }
                s.push('\n');
            }
        }
        s
    }
}

/// Returns `lines` as ranges, the first [`LISTED`] of them, then how many
/// more (the JSON report lists every one).
fn listed(lines: &[u32]) -> String {
    let runs = coverage::runs(lines);
    if runs.len() <= LISTED {
        return runs.join(", ");
    }
    format!("{} and {} more ranges", runs[..LISTED].join(", "), runs.len() - LISTED)
}

/// Returns what the checks this process ran of the C policy `policy`
/// (`c:FILE...`, pinned or not) reached of each of its files, and, with
/// `base`, of the lines changed since it: `@REV` (every file at that git
/// revision of its tree) or another C policy's files (`c:FILE[@REV]...`),
/// paired with the policy's by file name. Empty for a policy no check ran.
pub fn reached(policy: &str, base: Option<&str>) -> Result<Vec<CodeReached>, tlbkit_c::Error> {
    let name = tlbkit_c::source::unpinned(policy);
    let sources = Sources::parse(name)?;
    let base = base.map(|b| base_sources(name, b)).transpose()?;
    let Some(files) = coverage::reached(&sources)? else {
        return Ok(Vec::new());
    };
    Ok(files
        .into_iter()
        .zip(sources.files.iter().filter(|f| f.role == tlbkit_c::source::Role::Code))
        .map(|(f, src)| {
            let changed = base.as_ref().map(|b| {
                let old = b.files.iter().find(|o| o.file_name == src.file_name);
                let lines: Vec<u32> =
                    coverage::changed_lines(old.map_or(&[][..], |o| &o.text[..]), &src.text).into_iter().collect();
                let with_code: Vec<u32> = lines.iter().copied().filter(|l| f.lines.contains_key(l)).collect();
                let unreached = with_code.iter().copied().filter(|l| !f.lines[l]).collect();
                ChangeReached {
                    base: old.map_or_else(|| format!("nothing (no {} in the base)", src.file_name), |o| o.name.clone()),
                    lines,
                    with_code,
                    unreached,
                }
            });
            of(f, changed)
        })
        .collect())
}

fn of(f: FileCoverage, changed: Option<ChangeReached>) -> CodeReached {
    let (lines, reached) = f.counts();
    CodeReached {
        unreached: f.unreached(),
        functions_unreached: f.functions.iter().filter(|(_, &r)| !r).map(|(n, _)| n.clone()).collect(),
        file: f.name,
        lines,
        reached,
        changed,
    }
}

/// Reads the base `base` of the C policy `policy` (as [`reached`] takes
/// them): an error says why it cannot, before a check runs.
pub fn read_base(policy: &str, base: &str) -> Result<(), tlbkit_c::Error> {
    base_sources(tlbkit_c::source::unpinned(policy), base).map(drop)
}

/// The base's files: `@REV` is the policy's own files at `REV`.
fn base_sources(policy: &str, base: &str) -> Result<Sources, tlbkit_c::Error> {
    match base.strip_prefix('@') {
        Some(rev) => {
            let list = policy.strip_prefix(tlbkit_registry::C_PREFIX).unwrap_or(policy);
            let at: Vec<String> = list
                .split('+')
                .map(|part| {
                    if part.contains('=') {
                        part.to_string()
                    } else {
                        format!("{}@{rev}", part.split_once('@').map_or(part, |(p, _)| p))
                    }
                })
                .collect();
            Sources::parse(&at.join("+"))
        }
        None => Sources::parse(base),
    }
}

/// What a check reached of a Rust policy's code: this process's own
/// coverage counters ([`crate::llvmcov`]), read before the check and after.
/// Only a binary built for coverage (the `coverage` profile) has them.
pub struct RustCoverage {
    before: llvmcov::Counters,
}

/// This executable's coverage map, read once.
fn process() -> Result<Option<&'static llvmcov::Process>, llvmcov::Error> {
    static PROCESS: OnceLock<Result<Option<llvmcov::Process>, llvmcov::Error>> = OnceLock::new();
    PROCESS.get_or_init(llvmcov::Process::open).as_ref().map(Option::as_ref).map_err(Clone::clone)
}

/// Whether this binary measures Rust policies' lines (a `coverage` build).
pub fn rust_lines_measured() -> bool {
    matches!(process(), Ok(Some(_)))
}

impl RustCoverage {
    /// Starts measuring: `None` in a binary built without coverage.
    pub fn start() -> Result<Option<RustCoverage>, llvmcov::Error> {
        Ok(process()?.map(|p| RustCoverage { before: p.now() }))
    }

    /// Returns what ran since [`RustCoverage::start`], per source file that
    /// ran or (with `base`, `@REV`) changed since the git revision `REV`.
    /// Files are named relative to the current directory where they lie
    /// under it.
    pub fn reached(&self, base: Option<&str>) -> Result<Vec<CodeReached>, llvmcov::Error> {
        let p = process()?.expect("started in a coverage build");
        let before = p.read(&self.before)?;
        let after = p.read(&p.now())?;
        let rev = base.map(|b| b.strip_prefix('@').unwrap_or(b));
        let changed = match rev {
            Some(rev) => changed_files(after.keys(), rev)?,
            None => BTreeMap::new(),
        };
        let cwd = std::env::current_dir().ok();
        let mut out = Vec::new();
        let registry = format!("{}/", tlbkit_registry::SOURCE_DIR);
        for (path, now) in after.iter().filter(|(p, _)| !p.starts_with(&registry)) {
            let then = before.get(path);
            let ran = |line: &u32, count: &u64| then.and_then(|t| t.lines.get(line)).map_or(*count > 0, |c| count > c);
            let change = changed.get(path);
            if !now.lines.iter().any(|(l, c)| ran(l, c)) && change.is_none() {
                continue;
            }
            let text = std::fs::read(path).unwrap_or_default();
            // The file's lines, split once (line `l` is `source[l - 1]`).
            let source: Vec<&[u8]> = text.split(|&c| c == b'\n').collect();
            let at = |l: u32| source.get((l as usize).wrapping_sub(1)).copied().unwrap_or_default();
            let code_line = |l: u32| {
                let t = at(l).trim_ascii();
                !t.is_empty() && !t.starts_with(b"//")
            };
            let lines: BTreeMap<u32, bool> =
                now.lines.iter().filter(|(l, _)| code_line(**l)).map(|(l, c)| (*l, ran(l, c))).collect();
            let entered =
                |line: &u32, count: &u64| then.and_then(|t| t.functions.get(line)).map_or(*count > 0, |c| count > c);
            let functions = now.functions.iter().map(|(l, c)| (function_name(at(*l), *l), entered(l, c))).fold(
                BTreeMap::new(),
                |mut m: BTreeMap<String, bool>, (n, e)| {
                    *m.entry(n).or_default() |= e;
                    m
                },
            );
            let name = cwd
                .as_ref()
                .and_then(|d| std::path::Path::new(path).strip_prefix(d).ok())
                .map_or_else(|| path.clone(), |p| p.display().to_string());
            let changed = change.map(|(base, new)| {
                let with_code: Vec<u32> = new.iter().copied().filter(|l| lines.contains_key(l)).collect();
                let unreached = with_code.iter().copied().filter(|l| !lines[l]).collect();
                ChangeReached { base: base.clone(), lines: new.clone(), with_code, unreached }
            });
            out.push(of(FileCoverage { name, lines, functions }, changed));
        }
        Ok(out)
    }
}

/// Reads the base `base` (`@REV`) of a Rust policy against this build's
/// instrumented files, so that one that cannot be read fails before the
/// check runs.
pub fn read_rust_base(base: &str) -> Result<(), llvmcov::Error> {
    let Some(p) = process()? else { return Ok(()) };
    let files = p.read(&p.now())?;
    changed_files(files.keys(), base.strip_prefix('@').unwrap_or(base)).map(drop)
}

/// The name of the function whose code starts on line `line`, whose text
/// is `text` (the identifier after `fn`), or `line N` where none is there.
fn function_name(text: &[u8], line: u32) -> String {
    let l = String::from_utf8_lossy(text);
    let named = l
        .split("fn ")
        .nth(1)
        .map(|rest| rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>())
        .filter(|n| !n.is_empty());
    match named {
        Some(n) => n,
        None if l.contains('|') => format!("a closure at line {line}"),
        None => format!("line {line}"),
    }
}

/// Returns, for each of `files` that differs at the git revision `rev` of
/// its tree, `FILE@REV` and the lines changed since (every line of a file
/// `rev` lacks).
fn changed_files<'a>(
    files: impl Iterator<Item = &'a String>,
    rev: &str,
) -> Result<BTreeMap<String, (String, Vec<u32>)>, llvmcov::Error> {
    let fail = |why: String| llvmcov::Error::Io(format!("--base @{rev}: {why}"));
    let git = |dir: &std::path::Path, args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .map_err(|e| fail(format!("running git: {e} (a base revision needs git)")))
    };
    // The files by the git tree they lie in.
    let mut trees: BTreeMap<std::path::PathBuf, Vec<&str>> = BTreeMap::new();
    let mut tops: BTreeMap<std::path::PathBuf, Option<std::path::PathBuf>> = BTreeMap::new();
    for f in files {
        let Some(dir) = std::path::Path::new(f.as_str()).parent() else { continue };
        if !dir.is_dir() {
            continue;
        }
        let top = match tops.get(dir) {
            Some(t) => t.clone(),
            None => {
                let out = git(dir, &["rev-parse", "--show-toplevel"])?;
                let t =
                    out.status.success().then(|| std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
                tops.insert(dir.to_path_buf(), t.clone());
                t
            }
        };
        if let Some(top) = top {
            trees.entry(top).or_default().push(f);
        }
    }
    if trees.is_empty() {
        return Err(fail("the policy's sources are not in a git tree".into()));
    }
    let mut out = BTreeMap::new();
    for (top, files) in trees {
        let ok = git(&top, &["rev-parse", "--verify", "--quiet", &format!("{rev}^{{commit}}")])?;
        if !ok.status.success() {
            return Err(fail(format!("{} has no revision {rev}", top.display())));
        }
        let diff = git(&top, &["diff", "--name-only", "--no-renames", rev, "--"])?;
        if !diff.status.success() {
            return Err(fail(format!("git diff {rev}: {}", String::from_utf8_lossy(&diff.stderr).trim())));
        }
        let names: std::collections::BTreeSet<String> =
            String::from_utf8_lossy(&diff.stdout).lines().map(|l| top.join(l).display().to_string()).collect();
        for f in files {
            if !names.contains(f) {
                continue;
            }
            let rel = std::path::Path::new(f).strip_prefix(&top).unwrap_or(std::path::Path::new(f));
            let old = git(&top, &["show", &format!("{rev}:{}", rel.display())])?;
            let old = if old.status.success() { old.stdout } else { Vec::new() };
            let new = std::fs::read(f).map_err(|e| fail(format!("{f}: {e}")))?;
            let lines: Vec<u32> = coverage::changed_lines(&old, &new).into_iter().collect();
            let base = format!("{}@{rev}", rel.display());
            out.insert(f.to_string(), (base, lines));
        }
    }
    Ok(out)
}
