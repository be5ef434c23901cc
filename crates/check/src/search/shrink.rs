//! Shrinking a counterexample to the fewest context switches.

use super::{Choice, ChoiceKind, Chooser, Outcome, Replay};
use crate::kernel::Violation;

/// Shrinks a violating schedule: every scheduling choice that can be made the
/// non-preempting one (option 0), and every thread's move to another CPU
/// that can be undone (option 0, [`ChoiceKind::Move`]), while a violation of
/// the same property is still reached is made so, until nothing changes.
/// Returns the shrunk choices.
pub fn shrink(run: &mut dyn FnMut(&mut dyn Chooser) -> Outcome, found: &Outcome) -> Vec<u32> {
    let property = found.violation.as_ref().map(|v| v.property);
    shrink_where(run, found, &|v| v.map(|v| v.property) == property)
}

/// [`shrink`], keeping a trial when `same` holds of the violation it reached
/// (`None`: it reached none): an all-violations check keeps each class of
/// violation its own ([`crate::report::class_of`]).
pub fn shrink_where(
    run: &mut dyn FnMut(&mut dyn Chooser) -> Outcome,
    found: &Outcome,
    same: &dyn Fn(Option<&Violation>) -> bool,
) -> Vec<u32> {
    let mut best: Vec<Choice> = found.choices.clone();
    let takes = |c: &[Choice]| c.iter().map(|c| c.taken).collect::<Vec<u32>>();
    loop {
        let mut changed = false;
        let mut i = 0;
        while i < best.len() {
            if best[i].point != ChoiceKind::Op && best[i].taken != 0 {
                let mut trial = takes(&best);
                trial[i] = 0;
                let out = run(&mut Replay::new(&trial));
                if same(out.violation.as_ref()) {
                    best = out.choices;
                    changed = true;
                }
            }
            i += 1;
        }
        if !changed {
            break;
        }
    }
    // Trailing zeros are what replay does anyway.
    let mut t = takes(&best);
    while t.last() == Some(&0) {
        t.pop();
    }
    t
}
