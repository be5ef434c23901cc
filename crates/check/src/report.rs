//! What a check found: the [`CheckReport`], its text (and, through serde,
//! JSON) form, and the counterexample with its summary and default view.

use crate::kernel::Violation;
pub use crate::known::{known, Known};
use crate::search::{Outcome, Stats};
use crate::spec::{menu_offered, CheckSpec, CONTPTE_PROPERTIES, C_PROPERTIES, PROPERTIES};
use crate::trace::{Event, Kind, DRAINS, INTO_BUFFER, ISSUED};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use tlbkit_policy::contpte::Teardown;

mod summary;
use summary::summary;

/// One step of a counterexample: what one CPU did between two others' turns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Step {
    /// 1-based.
    pub n: usize,
    /// Who stepped: `cpu0`, or `cpu0 store buffer`.
    pub who: String,
    /// What happened, in order (speculative fills included).
    pub events: Vec<String>,
}

/// A violation with the schedule that reaches it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Counterexample {
    /// The property broken.
    pub property: &'static str,
    /// The CPU concerned.
    pub cpu: usize,
    /// What was wrong.
    pub detail: String,
    /// The steps, every event of each.
    pub steps: Vec<Step>,
    /// The replay token (`tlbkit replay TOKEN`).
    pub token: String,
    /// Three lines: what was used (`used: ...`), by which CPU (`by: ...`), and
    /// why it was stale (`why: ...`, which rollover or flush it missed).
    pub summary: Vec<String>,
    /// The steps that matter, numbered as in `steps`, with only the events that
    /// matter ([`Counterexample::trace_view`]).
    pub view: Vec<Step>,
    /// What is already recorded that this violation may be ([`known`]): the
    /// zoo entry a `zoo/` policy re-introduces, or a finding of the policy
    /// that breaks the same property. Empty for anything new.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub known: Vec<Known>,
}

/// How much a check explored: its executions, states and longest execution,
/// and the most of the policy's rollovers and initiators one execution
/// reached. In JSON these are fields of the report itself.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Explored {
    /// Executions run.
    pub executions: u64,
    /// Distinct states reached (exhaustive mode).
    pub states: u64,
    /// Executions cut at a state seen before.
    pub pruned: u64,
    /// Exhaustive mode: how its visited set kept states; absent otherwise.
    #[serde(flatten)]
    pub kept: Option<Kept>,
    /// The longest execution, in steps.
    pub max_steps: usize,
    /// Whether the search covered all it set out to.
    pub complete: bool,
    /// Worker threads of an exhaustive search (1 otherwise). With more than one,
    /// `executions`, `pruned`, `max_steps`, `rollovers` and `initiators` may
    /// differ from run to run: which executions run depends on which worker
    /// reaches a state first (and with which transitions asleep, see the
    /// crate documentation). `states`, the verdict and the counterexample do
    /// not.
    pub workers: usize,
    /// The most ASID rollovers the policy noted in one execution (0 for a policy
    /// without an ASID space, or one the run never exhausted).
    pub rollovers: u32,
    /// The most CPUs that started a cross-CPU invalidation (an IPI or a
    /// broadcast TLBI) in one execution.
    pub initiators: u32,
}

/// How an exhaustive search kept its states (in JSON, fields of the report).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Kept {
    /// The bits of a state's hash its visited set keeps (72 for a check of
    /// two CPUs, 60 for 8 with store buffers, 68 for 8 under `sc`).
    pub fingerprint_bits: u32,
    /// The pairs of distinct states the search expects to have taken for
    /// one, their hashes agreeing on those bits (`n²/2^(b+1)` for `n` states
    /// of `b` bits, the estimate TLC prints). The text report gives it from
    /// 0.001 up.
    pub collisions_expected: f64,
    /// The bytes its visited set's slots took at the end: the workers'
    /// shared table (absent for a sharded search, whose nodes each hold a
    /// part). `--max-memory` caps
    /// the workers' table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub visited_bytes: Option<u64>,
}

/// What a check found.
#[derive(Clone, Debug, Serialize)]
pub struct CheckReport {
    /// The policy.
    pub policy: String,
    /// The shape checked (in JSON, fields of the report itself).
    #[serde(flatten)]
    pub bounds: Bounds,
    /// The contiguous block's exit teardown, if the machine has one.
    pub teardown: Option<&'static str>,
    /// Search mode (`replay` for a replay).
    pub mode: &'static str,
    /// The properties checked.
    pub properties: Vec<&'static str>,
    /// How much the search explored.
    #[serde(flatten)]
    pub explored: Explored,
    /// The counterexample, if one was found.
    pub counterexample: Option<Counterexample>,
    /// A default run's shapes ([`crate::portfolio`]), in the order they run
    /// (those after the one that found a violation with no schedules: not run);
    /// empty (and absent from JSON) for a one-shape check. In a portfolio's report the shape above (`cpus` to
    /// `menu`), `executions`, `max_steps`, `rollovers` and `initiators` are
    /// those of the shape that found the violation, or, with none found,
    /// `cpus` to `menu` are the first shape's and the figures are over every
    /// shape (`executions` summed, the others their most).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub portfolio: Vec<ShapeRun>,
    /// The schedule every execution started with (`tlbkit check --from` or
    /// `--script`); absent from JSON without one. The figures above count the
    /// search after it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<After>,
    /// Every class of violation an all-violations check found
    /// (`tlbkit check --all-violations`), in the order first found, the
    /// first being `counterexample`; empty (and absent from JSON) otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<Found>,
    /// Each of the policy's hooks with the times the check called it, over
    /// every execution ([`crate::hooks`]); empty (and absent from JSON) for a
    /// replay. A hook never called is code the check never ran.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<crate::hooks::HookCount>,
    /// A C policy's files, line by line: what the check reached of each,
    /// and of the lines changed since a base ([`crate::code`]); empty (and
    /// absent from JSON) for a Rust policy.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub code: Vec<crate::code::CodeReached>,
    /// The kinds of operation `--menu` named that the policy is never offered,
    /// each with why ([`crate::spec::not_offered`]); empty (and absent from
    /// JSON) otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_offered: Vec<crate::spec::NotOffered>,
}

/// One class of violation an all-violations check found: the executions
/// that reached it, and the first of them shrunk to its counterexample.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Found {
    /// The class ([`class_of`]).
    pub class: String,
    /// Executions that ended in a violation of this class.
    pub executions: u64,
    /// The first such execution, shrunk, with its replay token.
    pub counterexample: Counterexample,
}

/// Returns the class of a violation, which an all-violations check reports
/// once: its property and its detail with every number blanked (`#`), so
/// that the same hazard at another address, ASID, CPU or generation is one
/// class, except a source line (`context.c:123`, `policy.rs:45`), which tells
/// one fault, loop or race of a file from another.
pub fn class_of(v: &Violation) -> String {
    let mut out = format!("{}: ", v.property);
    let d: Vec<char> = v.detail.chars().collect();
    let mut i = 0;
    while i < d.len() {
        if !d[i].is_ascii_digit() {
            out.push(d[i]);
            i += 1;
            continue;
        }
        let start = i;
        if d[i] == '0' && d.get(i + 1) == Some(&'x') && d.get(i + 2).is_some_and(char::is_ascii_hexdigit) {
            i += 2;
            while i < d.len() && d[i].is_ascii_hexdigit() {
                i += 1;
            }
        } else {
            while i < d.len() && d[i].is_ascii_digit() {
                i += 1;
            }
        }
        let line = [".c:", ".h:", ".rs:", ".S:"].iter().any(|e| out.ends_with(e));
        if line {
            out.extend(&d[start..i]);
        } else {
            out.push('#');
        }
    }
    out
}

/// The schedule a check started its executions with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct After {
    /// The kernel operations it started.
    pub ops: usize,
    /// Its replay token (`tlbkit replay` runs it alone; `tlbkit check --from`
    /// searches after it).
    pub token: String,
}

/// The shape a check ran: its machine, its work and its memory model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Bounds {
    /// CPUs.
    pub cpus: usize,
    /// Address spaces.
    pub mms: usize,
    /// Pages per address space.
    pub pages: usize,
    /// ASIDs.
    pub asids: u32,
    /// Operations.
    pub ops: usize,
    /// Memory model.
    pub memory: &'static str,
    /// The kinds of kernel operation offered.
    pub menu: String,
}

impl Bounds {
    /// The shape `spec` asks for.
    pub(crate) fn of(spec: &CheckSpec) -> Bounds {
        Bounds {
            cpus: spec.cpus,
            mms: spec.mms,
            pages: spec.pages,
            asids: spec.asids,
            ops: spec.ops,
            memory: crate::shape::memory_text(spec.memory, spec.completion),
            menu: crate::ops::OpKind::names(menu_offered(spec)),
        }
    }
}

/// One shape a portfolio ran: its one-shape check, the schedules it sampled and
/// whether it found the violation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ShapeRun {
    /// Its shape (in JSON, fields of the shape's own).
    #[serde(flatten)]
    pub bounds: Bounds,
    /// Schedules sampled.
    pub schedules: u64,
    /// Whether this shape found the violation.
    pub found: bool,
    /// The calls of each of the policy's hooks in this shape's executions
    /// (empty for a shape not run).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<crate::hooks::HookCount>,
    /// What this shape's executions reached of a Rust policy's lines, in a
    /// build that measures them ([`crate::code::RustCoverage`]); else empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub code: Vec<crate::code::CodeReached>,
}

impl ShapeRun {
    /// Returns the run of the shape `spec` asks for, which sampled `schedules`
    /// (0: not run) and found the violation or not.
    pub(crate) fn of(spec: &CheckSpec, schedules: u64, found: bool) -> ShapeRun {
        ShapeRun { bounds: Bounds::of(spec), schedules, found, hooks: Vec::new(), code: Vec::new() }
    }
}

/// What the executions of a check reached: the most ASID rollovers, and the
/// most CPUs that started cross-CPU invalidations, in any one execution.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Reached {
    pub(crate) rollovers: u32,
    pub(crate) initiators: u32,
}

impl Reached {
    /// Returns what one execution reached.
    pub(crate) fn of(out: &Outcome) -> Reached {
        Reached { rollovers: out.rollovers, initiators: out.initiators.count_ones() }
    }

    /// Returns the most of each of two.
    pub(crate) fn max(self, o: Reached) -> Reached {
        Reached { rollovers: self.rollovers.max(o.rollovers), initiators: self.initiators.max(o.initiators) }
    }
}

/// Returns the report of a check of `spec` in `mode` (`replay` for a
/// replay) whose search did `stats` and whose executions reached `reached`.
pub(crate) fn report(
    spec: &CheckSpec,
    mode: &'static str,
    stats: Stats,
    reached: Reached,
    counterexample: Option<Counterexample>,
) -> CheckReport {
    CheckReport {
        policy: spec.policy.clone(),
        bounds: Bounds::of(spec),
        teardown: spec.teardown.map(Teardown::name),
        mode,
        properties: PROPERTIES
            .iter()
            .chain(spec.teardown.iter().flat_map(|_| CONTPTE_PROPERTIES.iter()))
            .chain(C_PROPERTIES.iter().filter(|_| spec.policy.starts_with(tlbkit_registry::C_PREFIX)))
            .copied()
            .collect(),
        explored: Explored {
            executions: stats.executions,
            states: stats.states,
            pruned: stats.pruned,
            kept: (mode == "exhaustive").then(|| Kept {
                fingerprint_bits: spec.fingerprints().bits(),
                collisions_expected: spec.fingerprints().expected_collisions(stats.states),
                visited_bytes: (stats.visited_bytes > 0).then_some(stats.visited_bytes),
            }),
            max_steps: stats.max_steps,
            complete: stats.complete,
            workers: 1,
            rollovers: reached.rollovers,
            initiators: reached.initiators,
        },
        counterexample,
        portfolio: Vec::new(),
        after: None,
        violations: Vec::new(),
        hooks: Vec::new(),
        code: Vec::new(),
        not_offered: crate::spec::not_offered(spec),
    }
}

/// Groups an execution's events into numbered steps.
pub(crate) fn counterexample(out: &Outcome, token: String) -> Counterexample {
    let v: &Violation = out.violation.as_ref().expect("a replayed counterexample violates again");
    let mut steps: Vec<Step> = Vec::new();
    let mut last: Option<(usize, String)> = None;
    for e in &out.events {
        let who = match (e.cpu, e.drain) {
            (Some(c), false) => format!("cpu{c}"),
            (Some(c), true) => format!("cpu{c} store buffer"),
            (None, _) => String::new(),
        };
        let text = e.text.clone();
        if e.cpu.is_none() {
            // A speculative fill belongs to the step it followed.
            if let Some(s) = steps.last_mut() {
                s.events.push(text);
            }
            continue;
        }
        let same = last.as_ref().is_some_and(|(_, w)| *w == who) && !e.drain;
        if same {
            steps.last_mut().expect("a step is open").events.push(text);
        } else {
            let n = steps.len() + 1;
            steps.push(Step { n, who: who.clone(), events: vec![text] });
        }
        last = Some((e.step, who));
    }
    let view = view(v, &out.events, &steps);
    let summary = summary(v, &out.events);
    let known = known(&token, v.property);
    Counterexample { property: v.property, cpu: v.cpu, detail: v.detail.clone(), steps, token, summary, view, known }
}

/// Returns the entry a violation's detail names (`the entry for 0x400000 (asid 3, ...)`),
/// as [`crate::kernel::describe`] wrote it.
fn entry_of(detail: &str) -> Option<&str> {
    let start = ["the entry for ", "the 64 KB entry for ", "the 4 KB entry for "]
        .iter()
        .filter_map(|p| detail.find(p))
        .min()?;
    let end = detail[start..].find(')')? + start + 1;
    Some(&detail[start..end])
}

/// Returns the cached walk a violation's detail names (`a walk through the
/// freed page-table page (frame 0) of mm1`).
fn walk_of(detail: &str) -> Option<&str> {
    let start = detail.find("a walk through ")?;
    let end = detail[start..].find(" under ").map_or(detail.len(), |e| e + start);
    Some(&detail[start..end])
}

/// Returns which events matter to the story of violation `v`: kernel
/// operations, page-table changes, flushes returning, root writes,
/// invalidations, IPIs sent and taken, the policy's notes (an ASID rollover), the fills of the entry
/// the violation is about on its CPU, and the writes of shared fields that
/// carry a decision from one CPU to another: a write whose value another CPU
/// reads, and a read-modify-write that changes a value another CPU wrote. A
/// write its own CPU overwrites before anyone else looks (the fast path's
/// bookkeeping), loads, lock words, fences, barriers, shootdown phases and
/// other fills are in the verbose view only.
fn matters(v: &Violation, events: &[Event]) -> Vec<bool> {
    let entry = entry_of(&v.detail);
    let fill_prefix = format!("speculative fill on cpu{}:", v.cpu);
    let mut keep: Vec<bool> = events
        .iter()
        .map(|e| match &e.kind {
            Kind::Op | Kind::PageTable | Kind::FlushDone | Kind::Root | Kind::Invalidate | Kind::Ipi | Kind::Note => {
                true
            }
            Kind::Fill(d) => entry == Some(d.as_str()) && e.text.starts_with(&fill_prefix),
            Kind::Access { .. } | Kind::Other => false,
        })
        .collect();
    // The last write of each field: (event index, CPU).
    let mut last: BTreeMap<&str, (usize, Option<usize>)> = BTreeMap::new();
    for (i, e) in events.iter().enumerate() {
        let Kind::Access { field, read, write, lock: false } = &e.kind else { continue };
        let prev = last.get(field.as_str()).copied();
        if *read {
            if let Some((w, c)) = prev {
                if c != e.cpu {
                    // Another CPU's decision is read here: the write matters, and so
                    // does a read-modify-write that replaces it.
                    keep[w] = true;
                    keep[i] |= *write;
                }
            }
        }
        if *write {
            last.insert(field.as_str(), (i, e.cpu));
        }
    }
    keep
}

/// Returns the step number of each event, as [`counterexample`] groups them (a
/// fill belongs to the step before it; 0 before the first step).
fn step_numbers(events: &[Event]) -> Vec<usize> {
    let mut out = Vec::with_capacity(events.len());
    let mut n = 0;
    let mut last: Option<(Option<usize>, bool)> = None;
    for e in events {
        if e.cpu.is_some() {
            let same = last.is_some_and(|(c, d)| c == e.cpu && d == e.drain) && !e.drain;
            if !same {
                n += 1;
            }
            last = Some((e.cpu, e.drain));
        }
        out.push(n);
    }
    out
}

/// Returns, for each event, the index of the kernel operation (its `op:`
/// event) it belongs to: a CPU's events belong to the operation it runs; a
/// store buffer's drain of a store to the operation that made the store (a
/// CPU's buffer drains in the order it was filled); a speculative fill to the
/// operation of the event it followed.
fn operations(events: &[Event]) -> Vec<Option<usize>> {
    let mut current: BTreeMap<usize, usize> = BTreeMap::new();
    let mut buffered: BTreeMap<usize, std::collections::VecDeque<Option<usize>>> = BTreeMap::new();
    let mut out: Vec<Option<usize>> = Vec::with_capacity(events.len());
    for (i, e) in events.iter().enumerate() {
        let op = match e.cpu {
            None => out.last().copied().flatten(),
            Some(c) if e.drain => buffered.entry(c).or_default().pop_front().flatten(),
            Some(c) => {
                if e.kind == Kind::Op {
                    current.insert(c, i);
                }
                let op = current.get(&c).copied();
                if e.text.starts_with(DRAINS) {
                    // The CPU's own barrier drains it, within its operation.
                    buffered.entry(c).or_default().pop_front();
                } else if e.text.contains(INTO_BUFFER) {
                    buffered.entry(c).or_default().push_back(op);
                }
                op
            }
        };
        out.push(op);
    }
    out
}

/// Returns the default view: the steps with events that [`matters`], with
/// those events. Every event in it is under the `op:` line of the kernel
/// operation it belongs to ([`operations`]): a step that goes on with an
/// operation begun in an earlier one starts with that operation's line and
/// `, from step N`, and a store buffer's drain with the line of the operation
/// that made the store and `, its store from step N`. A kernel operation
/// whose events that matter are only root writes and field writes reads as
/// one line (`op: switch to a thread of mm1; write root: mm1, asid 1`).
fn view(v: &Violation, events: &[Event], steps: &[Step]) -> Vec<Step> {
    let nums = step_numbers(events);
    let keep = matters(v, events);
    let ops = operations(events);
    let mut out: Vec<Step> = Vec::new();
    // The operation being folded into one line: its index in the step's events.
    let mut open: Option<usize> = None;
    // The operation whose line the step shows last.
    let mut shown: Option<usize> = None;
    for (i, e) in events.iter().enumerate() {
        let n = nums[i];
        if !keep[i] || n == 0 {
            continue;
        }
        let new_step = out.last().is_none_or(|s| s.n != n);
        if new_step {
            out.push(Step { n, who: steps[n - 1].who.clone(), events: Vec::new() });
            open = None;
            shown = None;
        }
        let step = out.last_mut().expect("a step is open");
        if let Some(op) = ops[i].filter(|&op| op != i && shown != Some(op)) {
            let whose = if e.drain { "its store from step" } else { "from step" };
            let line = format!("{}, {whose} {}", events[op].text, nums[op]);
            shown = Some(op);
            open = Some(step.events.len());
            step.events.push(line);
        }
        let foldable = matches!(e.kind, Kind::Root | Kind::Access { .. });
        match (open, &e.kind) {
            (_, Kind::Op) => {
                shown = Some(i);
                open = Some(step.events.len());
                step.events.push(e.text.clone());
            }
            (Some(k), _) if foldable && step.events.len() == k + 1 && step.events[k].len() + e.text.len() < 110 => {
                step.events[k] = format!("{}; {}", step.events[k], e.text);
            }
            _ => {
                // Anything else ends the folding: the operation's later events get lines of their own.
                if let Some(k) = open.take() {
                    // Undo a fold that the rest of the operation would make hard to read.
                    let parts: Vec<String> = step.events[k].split("; ").map(str::to_string).collect();
                    step.events.splice(k..=k, parts);
                }
                step.events.push(e.text.clone());
            }
        }
    }
    out
}

/// Writes a list of step numbers: `3`, `2 and 3`, `2, 3 and 5`.
fn step_list(v: &[String]) -> String {
    match v {
        [] => String::new(),
        [a] => a.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

impl CheckReport {
    /// Renders the report as text, a counterexample in its default view (the
    /// steps that matter; [`CheckReport::to_text_verbose`] shows every event).
    pub fn to_text(&self) -> String {
        self.render(false)
    }

    /// Renders the report as text, a counterexample with every event of every step.
    pub fn to_text_verbose(&self) -> String {
        self.render(true)
    }

    fn render(&self, verbose: bool) -> String {
        let mut s = String::new();
        let shape = format!(
            "{} CPUs, {} address spaces of {} page{}, {} ASIDs, {} operations ({}), {} memory, {} mode",
            self.bounds.cpus,
            self.bounds.mms,
            self.bounds.pages,
            if self.bounds.pages == 1 { "" } else { "s" },
            self.bounds.asids,
            self.bounds.ops,
            self.bounds.menu,
            self.bounds.memory,
            self.mode
        );
        let found = self.portfolio.iter().position(|r| r.found);
        self.write_shapes(&mut s, &shape, found);
        if let Some(t) = self.teardown {
            let _ = writeln!(s, "contpte: a 64 KB contiguous block per address space, torn down at exit by {t}");
        }
        if let Some(a) = &self.after {
            let _ = writeln!(s, "after: the {} operations of {} (searched: what can follow them)", a.ops, a.token);
        }
        let _ = writeln!(s, "properties: {}", self.properties.join(", "));
        self.write_explored(&mut s, found);
        if self.mode != "replay" {
            let _ = writeln!(
                s,
                "reached: {} ASID rollover(s), {} CPU(s) starting cross-CPU invalidations (the most in one execution)",
                self.explored.rollovers, self.explored.initiators
            );
            // What a clean verdict covers: a violation speaks for itself.
            if !self.hooks.is_empty() && self.counterexample.is_none() {
                let _ = writeln!(s, "{}", crate::hooks::line(&self.hooks));
                for c in &self.code {
                    s.push_str(&c.lines());
                }
            }
        }
        self.write_result(&mut s, verbose);
        self.write_violations(&mut s);
        s
    }

    /// The shape checked, or the portfolio of shapes and the one that found
    /// the violation.
    fn write_shapes(&self, s: &mut String, shape: &str, found: Option<usize>) {
        if self.portfolio.is_empty() {
            let _ = writeln!(s, "check {}: {shape}", self.policy);
        } else {
            // The models the shapes run under, in their order (TSO, then the
            // arm mode, on arm64).
            let mut models: Vec<&str> = Vec::new();
            for r in &self.portfolio {
                if !models.contains(&r.bounds.memory) {
                    models.push(r.bounds.memory);
                }
            }
            let _ = writeln!(
                s,
                "check {}: a portfolio of {} shapes, {} memory, {} mode",
                self.policy,
                self.portfolio.len(),
                models.join(" then "),
                self.mode
            );
            for (i, r) in self.portfolio.iter().enumerate() {
                let _ = writeln!(
                    s,
                    "  {}. {} CPU{}, {} mms of {} page{}, {} ASIDs, {} ops ({}), {}: {}",
                    i + 1,
                    r.bounds.cpus,
                    if r.bounds.cpus == 1 { "" } else { "s" },
                    r.bounds.mms,
                    r.bounds.pages,
                    if r.bounds.pages == 1 { "" } else { "s" },
                    r.bounds.asids,
                    r.bounds.ops,
                    r.bounds.menu,
                    r.bounds.memory,
                    match (r.found, r.schedules) {
                        (true, n) => format!("{n} schedules, VIOLATION"),
                        (false, 0) => "not run".to_string(),
                        (false, n) => format!("{n} schedules"),
                    }
                );
            }
            if let Some(i) = found {
                let _ = writeln!(s, "found by shape {}: {shape}", i + 1);
            }
        }
    }

    /// How much was explored.
    fn write_explored(&self, s: &mut String, found: Option<usize>) {
        if self.mode == "exhaustive" {
            let _ = writeln!(
                s,
                "explored: {} states, {} executions ({} cut at a state seen before), longest {}{}{}",
                self.explored.states,
                self.explored.executions,
                self.explored.pruned,
                steps(self.explored.max_steps),
                if self.explored.complete { ", complete" } else { ", stopped early" },
                if self.explored.workers > 1 { format!(" ({} workers)", self.explored.workers) } else { String::new() }
            );
            if let Some(b) = self.explored.kept.and_then(|k| k.visited_bytes) {
                let (mib, n) = (b as f64 / (1 << 20) as f64, self.explored.states.max(1));
                let _ = if b > 10 * n {
                    writeln!(s, "visited set: {mib:.1} MiB of slots, as it starts (room for about a million states)")
                } else {
                    writeln!(s, "visited set: {mib:.1} MiB of slots, {:.1} bytes a state", b as f64 / n as f64)
                };
            }
            if let Some(k) = self.explored.kept.filter(|k| k.collisions_expected >= 1e-3) {
                let _ = writeln!(
                    s,
                    "fingerprints: {:.3} pairs of states expected taken for one (hashes alike in the {} bits kept)",
                    k.collisions_expected, k.fingerprint_bits
                );
            }
        } else if self.mode != "replay" {
            let _ = writeln!(
                s,
                "explored: {} schedules{}, longest {}",
                self.explored.executions,
                match found {
                    None if !self.portfolio.is_empty() => " over every shape",
                    Some(_) => " of that shape",
                    None => "",
                },
                steps(self.explored.max_steps)
            );
        }
    }

    /// The verdict, and a violation's counterexample and replay command.
    fn write_result(&self, s: &mut String, verbose: bool) {
        for n in &self.not_offered {
            let _ = writeln!(s, "not offered: {} ({})", n.kind, n.why);
        }
        match &self.counterexample {
            None => {
                let mut but = Vec::new();
                if let Some(c) = self.code.iter().find(|c| c.change_unreached()) {
                    let base = c.changed.as_ref().map_or("", |ch| ch.base.as_str());
                    but.push(format!(
                        "no execution reached the lines of {} changed since {base}: the verdict says nothing of the \
                         change (a shape, --menu or --ops that reaches them?)",
                        c.file
                    ));
                }
                if self.explored.rollovers == 0 && self.mode != "replay" && crate::spec::needs_rollover(&self.policy) {
                    but.push(
                        "no execution reached an ASID rollover: the verdict says nothing of the allocator's \
                         rollover (more --ops or --mms, fewer --asids, or the default portfolio without --quick)"
                            .to_string(),
                    );
                }
                let _ = match but.is_empty() {
                    true => writeln!(s, "result: no violation"),
                    false => writeln!(s, "result: no violation, but {}", but.join("; and ")),
                };
            }
            Some(cx) => {
                let _ = writeln!(s, "result: VIOLATION {} on cpu{}", cx.property, cx.cpu);
                for line in &cx.summary {
                    let _ = writeln!(s, "  {line}");
                }
                for k in &cx.known {
                    let _ = match k.kind {
                        "zoo" => writeln!(
                            s,
                            "  known: zoo/{}, the historic bug this policy re-introduces: {}",
                            k.id, k.summary
                        ),
                        _ => writeln!(
                            s,
                            "  known: may be the recorded finding {}, which breaks the same property in this policy \
                             and shows under this memory model: {} (its window, command and token: `tlbkit list`; \
                             its report: the guide's \"Findings\")",
                            k.id, k.summary
                        ),
                    };
                }
                if verbose {
                    let _ = writeln!(s, "  {}", cx.detail);
                    let _ = writeln!(s, "counterexample ({}):", steps(cx.steps.len()));
                    s.push_str(&cx.trace());
                } else {
                    let _ = writeln!(
                        s,
                        "counterexample ({}, {} shown; --verbose for every event):",
                        steps(cx.steps.len()),
                        cx.view.len()
                    );
                    s.push_str(&cx.trace_view());
                }
                let _ = writeln!(s, "replay: tlbkit replay {}", cx.token);
            }
        }
    }

    /// Every class of violation found, each with its replay command.
    fn write_violations(&self, s: &mut String) {
        if self.violations.is_empty() {
            return;
        }
        let total: u64 = self.violations.iter().map(|f| f.executions).sum();
        let _ = writeln!(
            s,
            "all violations: {} class{}, {total} violating execution{} (each class's first, shrunk; the first is above)",
            self.violations.len(),
            if self.violations.len() == 1 { "" } else { "es" },
            if total == 1 { "" } else { "s" },
        );
        for (i, f) in self.violations.iter().enumerate() {
            let cx = &f.counterexample;
            let _ = writeln!(
                s,
                "  {}. {} on cpu{} ({} execution{}): {}",
                i + 1,
                cx.property,
                cx.cpu,
                f.executions,
                if f.executions == 1 { "" } else { "s" },
                cx.detail
            );
            let _ = writeln!(s, "     replay: tlbkit replay {}", cx.token);
        }
    }
}

impl Counterexample {
    /// Renders the numbered steps. The columns are at least 4 and 18 wide and widen to the longest step
    /// number and CPU name, so that long traces and many CPUs stay aligned.
    pub fn trace(&self) -> String {
        render_steps(&self.steps)
    }

    /// Renders the default view: the steps that matter, with the events that
    /// matter (see [`Counterexample::view`]).
    pub fn trace_view(&self) -> String {
        render_steps(&self.view)
    }
}

/// Renders numbered steps in aligned columns.
fn render_steps(steps: &[Step]) -> String {
    {
        let nw = steps.iter().map(|st| st.n.to_string().len()).max().unwrap_or(0).max(4);
        let ww = steps.iter().map(|st| st.who.chars().count()).max().unwrap_or(0).max(18);
        let mut s = String::new();
        for st in steps {
            let mut first = true;
            for e in &st.events {
                if first {
                    let _ = writeln!(s, "{:>nw$}. {:<ww$} {e}", st.n, st.who);
                    first = false;
                } else {
                    let _ = writeln!(s, "{:nw$}  {:<ww$} {e}", "", "");
                }
            }
        }
        s
    }
}

/// Returns an event list's text (for tests).
pub fn texts(events: &[Event]) -> Vec<String> {
    events.iter().map(|e| e.text.clone()).collect()
}

/// Returns `N steps`, or `1 step`.
fn steps(n: usize) -> String {
    if n == 1 {
        "1 step".to_string()
    } else {
        format!("{n} steps")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_step_is_singular() {
        assert_eq!(steps(1), "1 step");
        assert_eq!(steps(0), "0 steps");
        assert_eq!(steps(7), "7 steps");
    }

    #[test]
    fn a_trace_keeps_its_columns_for_long_names_and_many_steps() {
        let step = |n: usize, who: &str| Step { n, who: who.to_string(), events: vec!["a".into(), "b".into()] };
        let cx = Counterexample {
            property: "no_stale_use",
            cpu: 0,
            detail: String::new(),
            steps: vec![step(9, "cpu0"), step(10_000, "cpu100 store buffer")],
            token: String::new(),
            summary: Vec::new(),
            view: Vec::new(),
            known: Vec::new(),
        };
        let t = cx.trace();
        // Every event starts in one column, step numbers end in another.
        let cols: Vec<usize> = t.lines().map(|l| l.chars().count() - 1).collect();
        assert!(cols.windows(2).all(|w| w[0] == w[1]), "{t}");
        let dots: Vec<usize> = t.lines().filter_map(|l| l.find(". ")).collect();
        assert_eq!(dots, vec![5, 5], "{t}");
        // The usual widths are unchanged.
        let cx = Counterexample { steps: vec![step(2, "cpu0")], ..cx };
        assert_eq!(cx.trace(), format!("   2. {:<18} a\n      {:<18} b\n", "cpu0", ""));
    }

    #[test]
    fn a_class_leaves_out_numbers_but_keeps_source_lines() {
        let v = |property, detail: &str| Violation { property, cpu: 1, detail: detail.to_string() };
        let a = v("no_stale_use", "cpu1 used the entry for 0x400000 (asid 3, frame 5) after generation 12");
        let b = v("no_stale_use", "cpu0 used the entry for 0x7f2000 (asid 1, frame 9) after generation 2");
        assert_eq!(class_of(&a), class_of(&b));
        assert_eq!(class_of(&a), "no_stale_use: cpu# used the entry for # (asid #, frame #) after generation #");
        // Another property is another class.
        assert_ne!(class_of(&a), class_of(&v("no_stale_held", &a.detail)));
        // A fault's line is its class; the address it touched is not.
        let f = |addr: &str, line: u32| {
            v("no_kernel_bug", &format!("a write to address {addr} in flush_context, context.c:{line}"))
        };
        assert_eq!(class_of(&f("0x0", 140)), class_of(&f("0x8", 140)));
        assert_ne!(class_of(&f("0x0", 140)), class_of(&f("0x0", 141)));
        assert!(class_of(&f("0x0", 140)).ends_with("context.c:140"), "{}", class_of(&f("0x0", 140)));
    }
}
