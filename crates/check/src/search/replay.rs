//! Replay of a recorded schedule (a replay token's choices, or a trial of
//! shrinking).

use super::{ChoiceKind, Chooser, Pick};

/// Replays a schedule: choice `i` takes `choices[i]` (clamped to the options
/// there), and every choice past the end takes option 0 (no preemption, the
/// first operation offered).
pub struct Replay<'a> {
    choices: &'a [u32],
    at: usize,
}

impl<'a> Replay<'a> {
    /// Returns a chooser that follows `choices`.
    pub fn new(choices: &'a [u32]) -> Self {
        Replay { choices, at: 0 }
    }
}

impl Chooser for Replay<'_> {
    fn choose(&mut self, _point: ChoiceKind, labels: &[u32], _state: u128) -> Pick {
        let i = self.choices.get(self.at).copied().unwrap_or(0) as usize;
        self.at += 1;
        Pick::Take(i.min(labels.len() - 1))
    }
}
