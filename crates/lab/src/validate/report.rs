//! The validation's table and summary: each entry's rows as `tlbkit validate`
//! prints them, the counts per part of the corpus and in all, and the accuracy
//! targets they are held to.

use super::{Counted, Judged, Part};
use crate::validate::judge::Verdict;
use serde::Serialize;
use std::fmt::Write;

/// Counts of one kind of rows.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Tally {
    /// Ratios in band.
    pub in_band: usize,
    /// Ratios in the right direction only.
    pub direction_only: usize,
    /// Ratios in the wrong direction.
    pub wrong_direction: usize,
    /// Shapes right.
    pub shapes_right: usize,
    /// Shapes wrong.
    pub shapes_wrong: usize,
    /// Absolute figures within a factor of 2.
    pub abs_within_2x: usize,
    /// Absolute figures outside it.
    pub abs_outside_2x: usize,
    /// Rows that could not be judged.
    pub errors: usize,
}

impl Tally {
    fn add(&mut self, r: &super::Row) {
        if r.error.is_some() {
            self.errors += 1;
        } else if let Some(v) = r.verdict {
            match v {
                Verdict::InBand => self.in_band += 1,
                Verdict::DirectionOnly => self.direction_only += 1,
                Verdict::WrongDirection => self.wrong_direction += 1,
            }
        } else if let Some(right) = r.shape_right {
            if right {
                self.shapes_right += 1;
            } else {
                self.shapes_wrong += 1;
            }
        } else if let Some(f) = r.factor {
            if (0.5..=2.0).contains(&f) {
                self.abs_within_2x += 1;
            } else {
                self.abs_outside_2x += 1;
            }
        }
    }

    /// Ratios judged.
    pub fn ratios(&self) -> usize {
        self.in_band + self.direction_only + self.wrong_direction
    }

    fn ratio_line(&self) -> String {
        format!(
            "in band {}/{}, direction-only {}, wrong direction {}, errors {}",
            self.in_band,
            self.ratios(),
            self.direction_only,
            self.wrong_direction,
            self.errors
        )
    }
}

/// The counts of one part of the corpus (or of all of it).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    /// Rows counted toward the targets.
    pub counted: Tally,
    /// Rows on a stand-in mapping, counted apart.
    pub stand_in: Tally,
    /// Counted rows of entries whose figures were not blind to the model's makers.
    pub disclosed: Tally,
    /// Entries of which nothing can be expressed.
    pub not_expressible: usize,
    /// Entries with some part not expressible.
    pub partly_expressible: Vec<String>,
    /// Entries excluded (an origin's own figures).
    pub excluded: usize,
}

impl Summary {
    fn of<'a>(judged: impl Iterator<Item = &'a Judged>) -> Summary {
        let mut s = Summary::default();
        for j in judged {
            if j.excluded.is_some() {
                s.excluded += 1;
                continue;
            }
            if j.rows.is_empty() && !j.not_expressible.is_empty() {
                s.not_expressible += 1;
            } else if !j.not_expressible.is_empty() {
                s.partly_expressible.push(j.id.clone());
            }
            for r in &j.rows {
                match r.counted {
                    Counted::Yes => {
                        s.counted.add(r);
                        if j.disclosed.is_some() {
                            s.disclosed.add(r);
                        }
                    }
                    Counted::StandIn => s.stand_in.add(r),
                    Counted::No => {}
                }
            }
        }
        s
    }

    fn render(&self, out: &mut String) {
        let c = &self.counted;
        let _ = writeln!(out, "ratios: {}", c.ratio_line());
        if self.stand_in.ratios() + self.stand_in.shapes_right + self.stand_in.shapes_wrong > 0 {
            let _ = writeln!(out, "  stand-in mappings, apart: {}", self.stand_in.ratio_line());
        }
        if self.disclosed.ratios() > 0 {
            let blind = Tally {
                in_band: c.in_band - self.disclosed.in_band,
                direction_only: c.direction_only - self.disclosed.direction_only,
                wrong_direction: c.wrong_direction - self.disclosed.wrong_direction,
                errors: c.errors - self.disclosed.errors,
                ..Tally::default()
            };
            let _ = writeln!(out, "  of these, blind entries only: {}", blind.ratio_line());
        }
        let _ = write!(out, "shapes: right {}, wrong {}", c.shapes_right, c.shapes_wrong);
        if self.stand_in.shapes_right + self.stand_in.shapes_wrong > 0 {
            let _ = write!(
                out,
                " (stand-in mappings, apart: right {}, wrong {})",
                self.stand_in.shapes_right, self.stand_in.shapes_wrong
            );
        }
        let _ = writeln!(out);
        let _ = writeln!(out, "absolute figures: within 2x {}/{}", c.abs_within_2x, c.abs_within_2x + c.abs_outside_2x);
        let mut rows = format!("entries: not expressible {}", self.not_expressible);
        if !self.partly_expressible.is_empty() {
            let _ = write!(rows, " (plus parts of {})", self.partly_expressible.join(", "));
        }
        let _ = writeln!(out, "{rows}, excluded {}", self.excluded);
    }
}

/// One accuracy target and whether it is met.
#[derive(Clone, Debug, Serialize)]
pub struct Target {
    /// What is required.
    pub what: String,
    /// What was found.
    pub found: String,
    /// Whether it is met.
    pub met: bool,
}

/// The whole validation: the judged entries, the summaries, the targets.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Every entry judged.
    pub entries: Vec<Judged>,
    /// The summary of each part.
    pub parts: Vec<(Part, Summary)>,
    /// The summary of all entries.
    pub total: Summary,
    /// The accuracy targets over all counted rows.
    pub targets: Vec<Target>,
    /// Each figure is the mean over seeds 1 to this.
    pub seeds: u64,
    /// Judged rows (not in error) whose runs used an estimated cost, and all
    /// judged rows.
    pub on_estimates: (usize, usize),
    /// Runs simulated now.
    pub simulated: usize,
    /// Runs read from the cache.
    pub cached: usize,
    /// The machines `--vary` ran in place of presets, each with the costs it
    /// varied (none without `--vary`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub varied: Vec<String>,
}

impl Report {
    /// Builds the report of `entries`.
    pub fn new(entries: Vec<Judged>, seeds: u64, simulated: usize, cached: usize) -> Report {
        let mut parts = Vec::new();
        for part in [Part::AfterOrigins, Part::History] {
            if entries.iter().any(|j| j.part == part) {
                parts.push((part, Summary::of(entries.iter().filter(|j| j.part == part))));
            }
        }
        let total = Summary::of(entries.iter());
        let c = &total.counted;
        let share = |a: usize, b: usize| if b == 0 { 1.0 } else { a as f64 / b as f64 };
        let abs = c.abs_within_2x + c.abs_outside_2x;
        let shapes = c.shapes_right + c.shapes_wrong;
        let targets = vec![
            Target {
                what: "at least 2/3 of the ratios in band".into(),
                found: format!("{}/{}", c.in_band, c.ratios()),
                met: share(c.in_band, c.ratios()) >= 2.0 / 3.0,
            },
            Target {
                what: "no ratio in the wrong direction".into(),
                found: format!("{}", c.wrong_direction),
                met: c.wrong_direction == 0,
            },
            Target {
                what: "curve shapes right for at least 3/4".into(),
                found: format!("{}/{shapes}", c.shapes_right),
                met: share(c.shapes_right, shapes) >= 0.75,
            },
            Target {
                what: "absolute figures within 2x for at least 3/4".into(),
                found: format!("{}/{abs}", c.abs_within_2x),
                met: share(c.abs_within_2x, abs) >= 0.75,
            },
            Target { what: "no row in error".into(), found: format!("{}", c.errors), met: c.errors == 0 },
        ];
        let judged = entries.iter().flat_map(|j| &j.rows).filter(|r| r.error.is_none());
        let on_estimates = judged.fold((0, 0), |(e, n), r| (e + usize::from(!r.estimates.is_empty()), n + 1));
        Report { entries, parts, total, targets, seeds, on_estimates, simulated, cached, varied: Vec::new() }
    }

    /// Whether every target is met.
    pub fn passed(&self) -> bool {
        self.targets.iter().all(|t| t.met)
    }

    /// The table `tlbkit validate` prints.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if !self.varied.is_empty() {
            let _ = writeln!(out, "estimated costs varied (--vary), each machine in place of its preset:");
            for v in &self.varied {
                let _ = writeln!(out, "  {v}");
            }
            let _ = writeln!(out);
        }
        for (part, _) in &self.parts {
            let _ = writeln!(out, "## {}\n", part.title());
            for j in self.entries.iter().filter(|j| j.part == *part) {
                render_entry(j, &mut out);
            }
            let _ = writeln!(out);
        }
        for (part, s) in &self.parts {
            let _ = writeln!(out, "{}:", part.title());
            s.render(&mut out);
            let _ = writeln!(out);
        }
        if self.parts.len() > 1 {
            let _ = writeln!(out, "In all:");
            self.total.render(&mut out);
            let _ = writeln!(out);
        }
        let _ = writeln!(
            out,
            "rows whose runs spend at least 1% of their CPU time in an estimated cost (named under each row): {} of {}",
            self.on_estimates.0, self.on_estimates.1
        );
        let _ = writeln!(out);
        let _ = writeln!(out, "targets (counted rows, both parts):");
        for t in &self.targets {
            let _ = writeln!(out, "  {:<46} {:>8}  {}", t.what, t.found, if t.met { "met" } else { "NOT met" });
        }
        let seeds = match self.seeds {
            1 => "each figure from seed 1, or the mean of a run's own seeds where it asks for more".to_string(),
            n => format!("each figure the mean of seeds 1 to {n}, or to a run's own count where it asks for more"),
        };
        let _ = writeln!(out, "runs: {} simulated now, {} from cache; {seeds}", self.simulated, self.cached);
        let _ = writeln!(out, "{}", if self.passed() { "PASS" } else { "FAIL" });
        out
    }
}

fn render_entry(j: &Judged, out: &mut String) {
    let _ = writeln!(out, "{:<4} {}", j.id, j.title);
    for (what, text) in [("excluded", &j.excluded), ("disclosed", &j.disclosed), ("mapping", &j.mapping)] {
        if let Some(t) = text {
            let _ = writeln!(out, "       {what}: {t}");
        }
    }
    if let Some(t) = &j.stand_in {
        let _ = writeln!(out, "       stand-in (counted apart): {t}");
    }
    for r in &j.rows {
        let head = format!("  {:<6} {:<46}", r.kind, r.label);
        let apart = match r.counted {
            Counted::Yes => "",
            Counted::StandIn => " [stand-in]",
            Counted::No => "",
        };
        if let Some(e) = &r.error {
            let _ = writeln!(out, "{head} ERROR: {e}");
            continue;
        }
        if let Some(right) = r.shape_right {
            let _ = writeln!(out, "{head} {}: {}{apart}", if right { "right" } else { "WRONG" }, r.detail);
        } else if let (Some(s), Some(p)) = (r.sim, r.reference) {
            let figures = format!("sim {:>9}  ref {:>9}", fmt(s), fmt(p));
            let judged = match (r.verdict, r.factor) {
                (_, Some(f)) => format!("factor x{}", sig(f, 3)),
                (Some(v), _) if r.detail.is_empty() => v.words().to_string(),
                (Some(v), _) => format!("{} ({})", v.words(), r.detail),
                _ => String::new(),
            };
            let judged = if r.counted == Counted::No { format!("[{judged}; not counted]") } else { judged };
            let _ = writeln!(out, "{head} {figures}  {judged}{apart}");
        }
        // (Seeds that differ only past the printed digits are not shown.)
        if let Some((lo, hi)) = r.seeds.filter(|&(lo, hi)| r.error.is_none() && fmt(lo) != fmt(hi)) {
            // A ratio whose seeds fall on both sides of 1 has no direction yet.
            let split = r.factor.is_none() && r.verdict.is_some() && lo < 1.0 && hi > 1.0;
            let split = if split { "; the seeds disagree on its direction" } else { "" };
            let _ = writeln!(out, "         seeds alone: {} to {}{split}", fmt(lo), fmt(hi));
        }
        if let Some(n) = &r.note {
            let _ = writeln!(out, "         note: {n}");
        }
        if !r.estimates.is_empty() {
            let _ = writeln!(out, "         rests on estimates: {}", r.estimates.join("; "));
        }
    }
    for n in &j.not_expressible {
        let _ = writeln!(out, "  not expressible: {n}");
    }
    for w in &j.estimates {
        let _ = writeln!(out, "  estimate: {w}");
    }
}

/// A figure as the table prints it: four significant digits, thousands
/// separated from 10,000.
pub fn fmt(x: f64) -> String {
    let a = x.abs();
    if !x.is_finite() {
        return format!("{x}");
    }
    if a >= 10_000.0 {
        return crate::stats::grouped(x);
    }
    if a >= 1000.0 {
        return format!("{x:.0}");
    }
    sig(x, 4)
}

/// `x` to `n` significant digits (at most ten decimals); zero and non-finite
/// values as Rust prints them.
fn sig(x: f64, n: i32) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let digits = (n - 1 - x.abs().log10().floor() as i32).clamp(0, 10) as usize;
    format!("{x:.digits$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_print_as_the_published_table_does() {
        assert_eq!(fmt(1.876), "1.876");
        assert_eq!(fmt(0.879), "0.8790");
        assert_eq!(fmt(1683.2), "1683");
        assert_eq!(fmt(899603.0), "899,603");
        assert_eq!(fmt(13566210.0), "13,566,210");
        assert_eq!(sig(0.1219, 3), "0.122");
        assert_eq!(sig(2.55, 3), "2.55");
    }
}
