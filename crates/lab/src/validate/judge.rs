//! The rules a simulated figure is judged by against a published one. They
//! are fixed before any run and shared by every entry, so that a verdict
//! cannot be chosen per figure.
//!
//! - A **ratio** (after / before) is *in band* when
//!   `|ln sim − ln ref| ≤ max(0.05, 0.35·|ln ref|)` (the rule `tlbkit reproduce`
//!   applies to the origin claims); otherwise *direction-only* when both move
//!   the same way, a change smaller than 0.01 in ln counting as no change;
//!   otherwise *wrong direction*. A **bound** (the source says "more than
//!   50%") is in band when the simulated ratio is within it, else wrong.
//! - A curve's **trend** is right when no step goes the wrong way: a step is a
//!   rise or a fall beyond ±0.02 in ln, flat within; a step is wrong when the
//!   two curves' steps differ in kind and either is larger than 0.05 in ln.
//! - A curve's **knee** is where it stops rising: up to its maximum, the end of
//!   the last step that gains at least 0.1 in ln per doubling of `x` (the
//!   first point if none does). A **peak** is the point of the largest value,
//!   a **crossover** the first point whose value is below 1. Each is right
//!   when the simulated point is within one doubling of the published one.
//! - An **absolute** figure is reported as the factor sim / ref; it is within
//!   the target when the factor is between ½ and 2.

/// A ratio's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Within the band around the published ratio.
    InBand,
    /// Outside it, but moving the same way.
    DirectionOnly,
    /// Moving the other way (or not moving where the source's does).
    WrongDirection,
}

impl Verdict {
    /// The words the table prints.
    pub fn words(self) -> &'static str {
        match self {
            Verdict::InBand => "in band",
            Verdict::DirectionOnly => "direction-only",
            Verdict::WrongDirection => "WRONG direction",
        }
    }
}

/// The direction of a ratio: -1, 0 (within 0.01 in ln) or 1.
fn direction(r: f64) -> i8 {
    let l = r.ln();
    if l.abs() < 0.01 {
        0
    } else if l > 0.0 {
        1
    } else {
        -1
    }
}

/// Returns the verdict on simulated ratio `sim` against published `reference`.
pub fn ratio(sim: f64, reference: f64) -> Verdict {
    if !(sim > 0.0 && sim.is_finite()) {
        return Verdict::WrongDirection;
    }
    let tol = (0.35 * reference.ln().abs()).max(0.05);
    if (sim.ln() - reference.ln()).abs() <= tol {
        Verdict::InBand
    } else if direction(sim) == direction(reference) {
        Verdict::DirectionOnly
    } else {
        Verdict::WrongDirection
    }
}

/// Returns the verdict on a simulated ratio against a published upper bound
/// (`at_most`) or lower bound.
pub fn bound(sim: f64, limit: f64, at_most: bool) -> Verdict {
    let within = if at_most { sim <= limit } else { sim >= limit };
    if within && sim > 0.0 && sim.is_finite() {
        Verdict::InBand
    } else {
        Verdict::WrongDirection
    }
}

/// The kind of one step of a curve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Up by more than 0.02 in ln.
    Rise,
    /// Within ±0.02 in ln.
    Flat,
    /// Down by more than 0.02 in ln.
    Fall,
}

impl Step {
    fn of(d: f64) -> Step {
        if d > 0.02 {
            Step::Rise
        } else if d < -0.02 {
            Step::Fall
        } else {
            Step::Flat
        }
    }

    /// The word the table prints.
    pub fn word(self) -> &'static str {
        match self {
            Step::Rise => "rise",
            Step::Flat => "flat",
            Step::Fall => "fall",
        }
    }
}

/// A step where the simulated curve goes another way than the published one.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct WrongStep {
    /// The step's first point.
    pub from: f64,
    /// Its last point.
    pub to: f64,
    /// The simulated change in ln.
    pub sim: f64,
    /// The published change in ln.
    pub reference: f64,
}

impl WrongStep {
    /// The step as the table prints it: `4->8 sim rise +0.134, ref fall -0.029`.
    pub fn describe(&self) -> String {
        format!(
            "{}->{} sim {} {:+.3}, ref {} {:+.3}",
            num(self.from),
            num(self.to),
            Step::of(self.sim).word(),
            self.sim,
            Step::of(self.reference).word(),
            self.reference
        )
    }
}

/// Returns the steps where `sim` goes another way than `reference` (both
/// curves over the same points, positive values).
pub fn trend(x: &[f64], sim: &[f64], reference: &[f64]) -> Vec<WrongStep> {
    let mut wrong = Vec::new();
    for i in 1..x.len().min(sim.len()).min(reference.len()) {
        let ds = (sim[i] / sim[i - 1]).ln();
        let dr = (reference[i] / reference[i - 1]).ln();
        if Step::of(ds) != Step::of(dr) && (ds.abs() > 0.05 || dr.abs() > 0.05) || !ds.is_finite() {
            wrong.push(WrongStep { from: x[i - 1], to: x[i], sim: ds, reference: dr });
        }
    }
    wrong
}

/// Returns the knee of a curve (see the module's rule).
pub fn knee(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len().min(y.len());
    if n == 0 {
        return f64::NAN;
    }
    let top = (0..n).fold(0, |best, i| if y[i] > y[best] { i } else { best });
    let mut k = 0;
    for i in 1..=top {
        let per_doubling = (y[i] / y[i - 1]).ln() / (x[i] / x[i - 1]).log2();
        if per_doubling >= 0.1 {
            k = i;
        }
    }
    x[k]
}

/// Returns the point of a curve's largest value.
pub fn peak(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len().min(y.len());
    (0..n)
        .fold(None::<usize>, |best, i| match best {
            Some(b) if y[b] >= y[i] => Some(b),
            _ => Some(i),
        })
        .map_or(f64::NAN, |i| x[i])
}

/// Returns the first point whose value is below 1, if any.
pub fn crossover(x: &[f64], y: &[f64]) -> Option<f64> {
    x.iter().zip(y).find(|(_, v)| **v < 1.0).map(|(x, _)| *x)
}

/// Whether two points are within one doubling of each other.
pub fn within_a_doubling(a: f64, b: f64) -> bool {
    a > 0.0 && b > 0.0 && (a / b).log2().abs() <= 1.0 + 1e-9
}

/// A point as the table prints it (`4`, `0.5`).
pub fn num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_follow_the_band_and_the_dead_zone() {
        assert_eq!(ratio(1.494, 1.602), Verdict::InBand);
        assert_eq!(ratio(2.716, 1.856), Verdict::DirectionOnly);
        assert_eq!(ratio(1.876, 0.879), Verdict::WrongDirection);
        // No change (|ln| < 0.01) against a fall of 9.5%: the wrong way.
        assert_eq!(ratio(1.0, 0.9049), Verdict::WrongDirection);
        assert_eq!(ratio(0.9969, 1.164), Verdict::WrongDirection);
        // Near 1 the band is 0.05 wide.
        assert_eq!(ratio(1.0, 1.006), Verdict::InBand);
        assert_eq!(ratio(0.0, 1.2), Verdict::WrongDirection);
        assert_eq!(bound(0.2568, 0.5, true), Verdict::InBand);
        assert_eq!(bound(0.6, 0.5, true), Verdict::WrongDirection);
    }

    #[test]
    fn trend_counts_a_step_only_where_one_curve_moves_by_more_than_005() {
        // The published H23 (A) ratios against a flat simulated curve.
        let x = [1.0, 4.0, 7.0, 12.0, 21.0, 30.0, 48.0];
        let r = [0.9950, 0.9049, 0.9390, 0.9719, 1.022, 1.055, 1.164];
        let s = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.9969];
        let wrong: Vec<String> = trend(&x, &s, &r).iter().map(WrongStep::describe).collect();
        assert_eq!(
            wrong,
            [
                "1->4 sim flat +0.000, ref fall -0.095",
                "12->21 sim flat +0.000, ref rise +0.050",
                "30->48 sim flat -0.003, ref rise +0.098"
            ]
        );
        assert!(trend(&x, &r, &r).is_empty());
    }

    #[test]
    fn knee_is_the_last_strong_rise_before_the_maximum() {
        // INVLPGB's published curves (72-CPU Milan): tip flattens at 16, INVLPGB at 8.
        let x = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];
        let tip = [315e3, 423e3, 644e3, 652e3, 737e3, 759e3, 636e3];
        let invlpgb = [304e3, 424e3, 1032e3, 1267e3, 1368e3, 1199e3, 1094e3];
        assert_eq!(knee(&x, &tip), 16.0);
        assert_eq!(knee(&x, &invlpgb), 8.0);
        // sysbench on 2S Haswell-X: the 16 -> 24 step is half a doubling.
        let x = [1.0, 2.0, 4.0, 8.0, 16.0, 24.0, 32.0, 48.0];
        let hsw = [1598896.0, 2109472.0, 3448587.0, 5425778.0, 6931232.0, 7612473.0, 4296274.0, 4770029.0];
        assert_eq!(knee(&x, &hsw), 24.0);
        assert_eq!(knee(&[1.0, 2.0], &[2.0, 1.0]), 1.0);
        assert!(within_a_doubling(32.0, 16.0) && !within_a_doubling(21.0, 48.0));
    }

    #[test]
    fn peak_and_crossover() {
        let x = [1.0, 2.0, 4.0, 8.0];
        assert_eq!(peak(&x, &[1.0, 3.0, 3.0, 2.0]), 2.0);
        assert_eq!(crossover(&x, &[1.8, 1.2, 0.9, 0.5]), Some(4.0));
        assert_eq!(crossover(&x, &[1.8, 1.2, 1.1, 1.0]), None);
    }
}
