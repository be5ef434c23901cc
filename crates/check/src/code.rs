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
//! A Rust policy has no line coverage: its report's `hooks called:` line
//! ([`crate::hooks`]) says which of its methods ran.

use serde::Serialize;
use std::fmt::Write;
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
