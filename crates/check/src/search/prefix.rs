//! A search that starts after a fixed schedule (`tlbkit check --from TOKEN`):
//! every execution first takes the schedule's choices, then the search's.
//!
//! A bug may need a long history before the short window where it shows: a
//! global ASID allocator has to hand out and take back a dozen ASIDs before
//! its second reset. No search reaches fifty operations in every order, but
//! a search of every order of the last few, after a history that got there,
//! is as exhaustive as the shape it starts from. The wrapped search sees only
//! the choices after the schedule (its own indices start at 0), so the
//! exhaustive search's nodes, the random schedules' budget and shrinking all
//! work on the continuation; the execution records every choice, so a
//! counterexample's token is the schedule's choices and then the search's,
//! and `tlbkit replay` needs nothing else.

use super::{Choice, ChoiceKind, Chooser, Foot, Pick};

/// Takes `prefix` first, then asks `inner`.
pub struct Prefixed<'a> {
    prefix: &'a [Choice],
    inner: &'a mut dyn Chooser,
    /// Choices made so far, the prefix's included.
    at: usize,
    /// Whether an execution ran the whole prefix before this one (its steps
    /// were judged then).
    judged: bool,
    /// Whether the last scheduling choice was the inner search's.
    inner_sched: bool,
    /// The prefix, then the inner search's forced choices (for checkpoints).
    forced: Option<Vec<Choice>>,
}

impl<'a> Prefixed<'a> {
    /// Returns a chooser that takes `prefix` (the choices of an execution that
    /// made them, so that their option counts are known) and then `inner`'s;
    /// `judged`: an earlier execution ran the prefix through.
    pub fn new(prefix: &'a [Choice], inner: &'a mut dyn Chooser, judged: bool) -> Self {
        let forced = inner.forced().map(|f| prefix.iter().chain(f).copied().collect());
        Prefixed { prefix, inner, at: 0, judged, inner_sched: false, forced }
    }
}

impl Chooser for Prefixed<'_> {
    fn choose(&mut self, point: ChoiceKind, labels: &[u32], state: u128) -> Pick {
        let i = self.at;
        self.at += 1;
        if let Some(c) = self.prefix.get(i) {
            debug_assert_eq!(c.n as usize, labels.len(), "the schedule took another path");
            if point == ChoiceKind::Sched {
                self.inner_sched = false;
            }
            return Pick::Take(c.taken as usize);
        }
        if point == ChoiceKind::Sched {
            self.inner_sched = true;
        }
        self.inner.choose(point, labels, state)
    }

    fn wants_state(&self) -> bool {
        self.at >= self.prefix.len() && self.inner.wants_state()
    }

    fn wants_footprint(&self) -> bool {
        self.inner_sched && self.inner.wants_footprint()
    }

    fn renames(&self) -> bool {
        self.inner.renames()
    }

    fn tracks_step(&self) -> bool {
        self.inner_sched && self.inner.tracks_step()
    }

    fn stepped(&mut self, foot: Foot) {
        if self.inner_sched {
            self.inner.stepped(foot);
        }
    }

    fn local(&mut self, label: u32) {
        if self.at >= self.prefix.len() {
            self.inner.local(label);
        }
    }

    fn not_local(&mut self) {
        if self.inner_sched {
            self.inner.not_local();
        }
    }

    fn replaying(&self) -> bool {
        if self.at <= self.prefix.len() {
            self.judged
        } else {
            self.inner.replaying()
        }
    }

    fn forced(&self) -> Option<&[Choice]> {
        self.forced.as_deref()
    }

    /// Never to a choice of the prefix, which no execution changes.
    fn may_return(&self) -> bool {
        self.at > self.prefix.len() && self.inner.may_return()
    }

    fn skip(&mut self, made: usize, last_sched: Option<usize>) {
        let k = self.prefix.len();
        self.at = made;
        self.inner_sched = last_sched.is_some_and(|s| s >= k);
        if made > k {
            self.inner.skip(made - k, last_sched.and_then(|s| s.checked_sub(k)));
        }
    }
}

/// Follows a schedule's choices and stops the execution after the last one
/// (a schedule's first run, which learns each choice's option count).
pub struct Schedule<'a> {
    choices: &'a [u32],
    at: usize,
    /// Why the schedule does not fit the machine, if it does not.
    pub mismatch: Option<String>,
}

impl<'a> Schedule<'a> {
    /// Returns a chooser that follows `choices`, then stops.
    pub fn new(choices: &'a [u32]) -> Self {
        Schedule { choices, at: 0, mismatch: None }
    }
}

impl Chooser for Schedule<'_> {
    fn choose(&mut self, _point: ChoiceKind, labels: &[u32], _state: u128) -> Pick {
        let Some(&c) = self.choices.get(self.at) else { return Pick::Prune };
        if c as usize >= labels.len() {
            self.mismatch = Some(format!(
                "choice {} of the schedule takes option {c} of {}: it was made on another machine (give the \
                 check the policy, shape, memory model and menu of its token)",
                self.at + 1,
                labels.len()
            ));
            return Pick::Prune;
        }
        self.at += 1;
        Pick::Take(c as usize)
    }
}
