//! The exhaustive search's chooser: depth-first search over every choice,
//! replaying a prefix and pruning at states seen before, with partial-order
//! reduction (sleep sets; local steps explored alone) and the switches the
//! soundness tests turn off to compare.

use super::{Choice, ChoiceKind, Chooser, Foot, Pick};

/// A transition asleep at a scheduling point (the sleep sets of
/// partial-order reduction): a CPU's step, by label, and what it touched when
/// the search ran it.
pub(super) type Asleep = (u32, Foot);

/// What the search keeps for each choice of the current path, beside the
/// choice itself (one node per choice, always: `nodes[i]` is `stack[i]`'s): at
/// a scheduling point, its labels, the transitions asleep on arrival, the ones
/// explored here before the current option (with their footprints), and the
/// footprint of the current option once it has run. An operation choice keeps
/// nothing: every option of it is explored.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Node {
    sched: bool,
    pub(super) labels: Labels,
    sleep: Vec<Asleep>,
    pub(super) done: Vec<Asleep>,
    pub(super) foot: Option<Foot>,
    /// Labels this visit leaves alone (asleep, explored by an earlier visit,
    /// or left for a local step explored alone).
    skip: u64,
    /// When a local step is explored alone here: the labels to leave alone
    /// should it turn out not to be local after all.
    unless_local: Option<u64>,
    /// The claim, not yet answered, of this state from the node that owns
    /// it (a sharded search's; 0 for none): its answer may narrow `skip`.
    /// Not saved: a claim's answer finds its node only in the worker that
    /// sent it (and no claim is unanswered when a search is saved).
    pub(super) claim: u64,
}

/// A scheduling point's labels, held inline: a CPU's step or its store
/// buffer's drain, `2 * cpu` and `2 * cpu + 1`, so at most 16 of them for the
/// checker's 8 CPUs (one node per choice: a vector would be an allocation
/// each).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Labels {
    len: u8,
    at: [u8; 16],
}

impl Labels {
    fn new(labels: &[u32]) -> Self {
        let mut l = Labels { len: labels.len() as u8, at: [0; 16] };
        assert!(labels.len() <= l.at.len(), "more options than 8 CPUs have");
        for (a, &b) in l.at.iter_mut().zip(labels) {
            *a = u8::try_from(b).expect("a label of one of 8 CPUs");
        }
        l
    }

    fn len(&self) -> usize {
        self.len as usize
    }
}

impl std::ops::Index<usize> for Labels {
    type Output = u8;
    fn index(&self, k: usize) -> &u8 {
        &self.at[..self.len as usize][k]
    }
}

impl Node {
    /// Writes the node into a saved search.
    pub(super) fn save(&self, w: &mut super::saved::Writer) {
        w.u8(u8::from(self.sched));
        w.u8(self.labels.len);
        self.labels.at[..self.labels.len()].iter().for_each(|&a| w.u8(a));
        for list in [&self.sleep, &self.done] {
            w.u64(list.len() as u64);
            for (label, foot) in list {
                w.u32(*label);
                foot.save(w);
            }
        }
        match &self.foot {
            Some(f) => {
                w.u8(1);
                f.save(w);
            }
            None => w.u8(0),
        }
        w.u64(self.skip);
        match self.unless_local {
            Some(m) => {
                w.u8(1);
                w.u64(m);
            }
            None => w.u8(0),
        }
    }

    /// Reads what [`Node::save`] wrote.
    pub(super) fn load(r: &mut super::saved::Reader<'_>) -> Result<Node, String> {
        let sched = r.u8()? != 0;
        let len = r.u8()?;
        let mut at = [0u8; 16];
        if len as usize > at.len() {
            return Err("a choice with too many options".into());
        }
        for a in &mut at[..len as usize] {
            *a = r.u8()?;
        }
        let mut lists = [Vec::new(), Vec::new()];
        for list in &mut lists {
            let n = r.len(5)?;
            for _ in 0..n {
                let label = r.u32()?;
                list.push((label, Foot::load(r)?));
            }
        }
        let [sleep, done] = lists;
        let foot = if r.u8()? != 0 { Some(Foot::load(r)?) } else { None };
        let skip = r.u64()?;
        let unless_local = if r.u8()? != 0 { Some(r.u64()?) } else { None };
        Ok(Node { sched, labels: Labels { len, at }, sleep, done, foot, skip, unless_local, claim: 0 })
    }

    /// Returns the next option after `taken` this visit explores.
    pub(super) fn next_option(&self, taken: u32, n: u32) -> Option<u32> {
        (taken + 1..n).find(|&k| !self.sched || self.skip & (1 << self.labels[k as usize]) == 0)
    }

    /// Leaves `skip`'s labels alone from now on (a claim's answer): the
    /// options after the current one that it names are not taken.
    pub(super) fn narrow(&mut self, skip: u64) {
        self.claim = 0;
        self.skip |= skip;
    }

    /// Returns the transitions asleep after taking the current option: those
    /// asleep here or explored here before it that are independent of it.
    fn sleep_after(&self) -> Vec<Asleep> {
        let Some(f) = &self.foot else { return Vec::new() };
        self.sleep.iter().chain(&self.done).filter(|(_, u)| f.independent(u)).cloned().collect()
    }
}

/// The search's switches the soundness tests turn off to compare: all are on
/// by default.
#[derive(Clone, Copy)]
pub(super) struct Switches {
    /// Partial-order reduction (sleep sets).
    reduce: bool,
    /// Local steps explored alone (persistent sets; only with `reduce`).
    local: bool,
    /// State hashes with frames and uids up to a renaming.
    rename: bool,
    /// Executions that start from a checkpoint instead of replaying their
    /// prefix ([`crate::exec::Checkpoints`]), where the caller runs them
    /// with [`crate::exec::run_from`].
    checkpoints: bool,
}

thread_local! {
    /// The switches of searches started on this thread (see [`with_reduction`]
    /// and [`with_renaming`]).
    pub(super) static SWITCHES: std::cell::Cell<Switches> = const { std::cell::Cell::new(Switches { reduce: true, local: true, rename: true, checkpoints: true }) };
}

/// Runs `f` with the switches `set` makes for the exhaustive searches it starts
/// on this thread, their workers included; restores them after.
fn with_switches<T>(set: impl FnOnce(&mut Switches), f: impl FnOnce() -> T) -> T {
    let was = SWITCHES.with(std::cell::Cell::get);
    let mut now = was;
    set(&mut now);
    SWITCHES.with(|s| s.set(now));
    let out = f();
    SWITCHES.with(|s| s.set(was));
    out
}

/// Runs `f` with partial-order reduction `on` (it is on by default) for the
/// exhaustive searches it starts on this thread, their workers included: the
/// soundness tests compare the two.
pub fn with_reduction<T>(on: bool, f: impl FnOnce() -> T) -> T {
    with_switches(|s| s.reduce = on, f)
}

/// Runs `f` with local steps explored alone `on` (the default) for the
/// exhaustive searches it starts on this thread, their workers included (it
/// takes partial-order reduction on as well): the soundness tests compare the
/// two.
pub fn with_local_steps<T>(on: bool, f: impl FnOnce() -> T) -> T {
    with_switches(|s| s.local = on, f)
}

/// Runs `f` with the state hashes' renaming of frames and uids `on` (it is on
/// by default) for the exhaustive searches it starts on this thread, their
/// workers included: the soundness tests compare the two.
pub fn with_renaming<T>(on: bool, f: impl FnOnce() -> T) -> T {
    with_switches(|s| s.rename = on, f)
}

/// Runs `f` with checkpoints `on` (they are on by default) for the
/// exhaustive searches it starts on this thread, their workers included: with
/// them off, every execution replays its prefix from the beginning. The
/// soundness tests compare the two.
pub fn with_checkpoints<T>(on: bool, f: impl FnOnce() -> T) -> T {
    with_switches(|s| s.checkpoints = on, f)
}

/// Depth-first search over every choice, replaying a prefix and pruning at any
/// state seen before (`visit`, given the state and the mask of labels asleep,
/// says which labels to leave alone, or `None` to prune). With reduction on,
/// a CPU's step that is independent of the steps taken since it was explored
/// (or found asleep) is not explored again from here: the two orders reach the
/// same state (sleep sets).
pub(super) struct Dfs<'a> {
    prefix: &'a [Choice],
    nodes: &'a mut Vec<Node>,
    at: usize,
    visit: &'a mut dyn FnMut(u128, u64) -> Option<u64>,
    switches: Switches,
    /// The last scheduling choice made, whose step's footprint comes next.
    last_sched: Option<usize>,
    /// The label of a local step at the next scheduling choice (with local
    /// steps on).
    local: Option<u32>,
    /// The prefix's last scheduling choice when the prefix ends with a
    /// load's choice of value: its step makes the rest of the prefix's
    /// choices, that one among them.
    prefix_sched: Option<usize>,
    /// For each state `visit` answered [`CLAIMED`], the index of its choice
    /// (where the execution made a node for it, unless nothing was left to
    /// explore there).
    claimed: Vec<u32>,
}

/// A flag `visit` adds to its answer for a state another node owns and is
/// asked about (a sharded search's claim): the state is explored as the
/// answer says meanwhile, and the claim's answer may narrow its node's
/// options later ([`Dfs::take_claimed`] says which node it is).
pub(super) const CLAIMED: u64 = 1 << 62;

impl<'a> Dfs<'a> {
    /// Returns the search's chooser for an execution that replays `prefix`
    /// (with its `nodes`) and then explores, visiting states with `visit`.
    pub(super) fn new(
        prefix: &'a [Choice],
        nodes: &'a mut Vec<Node>,
        visit: &'a mut dyn FnMut(u128, u64) -> Option<u64>,
        switches: Switches,
    ) -> Self {
        // Only a load's choice: a step that chooses an operation is global
        // whichever it chooses.
        let read = prefix.last().is_some_and(|c| c.point == ChoiceKind::Read);
        let prefix_sched = if read { prefix.iter().rposition(|c| c.point == ChoiceKind::Sched) } else { None };
        Dfs { prefix, nodes, at: 0, visit, switches, last_sched: None, local: None, prefix_sched, claimed: Vec::new() }
    }

    /// The choices at the states its execution claimed, in the order
    /// claimed.
    pub(super) fn take_claimed(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.claimed)
    }
}

impl Chooser for Dfs<'_> {
    fn choose(&mut self, point: ChoiceKind, labels: &[u32], state: u128) -> Pick {
        let i = self.at;
        self.at += 1;
        if let Some(c) = self.prefix.get(i) {
            debug_assert_eq!(c.n as usize, labels.len(), "a replayed prefix took another path");
            if point == ChoiceKind::Sched {
                self.last_sched = Some(i);
            }
            return Pick::Take(c.taken as usize);
        }
        self.nodes.truncate(i);
        if point != ChoiceKind::Sched {
            self.nodes.push(Node::default());
            return Pick::Take(0);
        }
        let sleep = match self.last_sched {
            Some(p) if self.switches.reduce => self.nodes[p].sleep_after(),
            _ => Vec::new(),
        };
        let asleep = sleep.iter().fold(0u64, |m, (l, _)| m | 1 << l);
        // A local step is explored alone, and its state is not looked up: a
        // later visit runs the step again and meets the state after it. Should
        // the step turn out not to be local, every option not asleep is
        // explored, as at a first visit.
        let mut claimed = false;
        let (skip, unless_local) = match self.local.take() {
            Some(l) => (asleep | !(1u64 << l), Some(asleep)),
            None => match (self.visit)(state, asleep) {
                Some(skip) if skip & CLAIMED != 0 => {
                    claimed = true;
                    (skip & !CLAIMED, None)
                }
                Some(skip) => (skip, None),
                None => return Pick::Prune,
            },
        };
        if claimed {
            self.claimed.push(i as u32);
        }
        let Some(first) = (0..labels.len()).find(|&k| skip & (1 << labels[k]) == 0) else {
            return Pick::Prune;
        };
        self.nodes.push(Node {
            sched: true,
            labels: Labels::new(labels),
            sleep,
            done: Vec::new(),
            foot: None,
            skip,
            unless_local,
            claim: 0,
        });
        self.last_sched = Some(i);
        Pick::Take(first)
    }

    /// Only past the replayed prefix: a prefix's states were visited by the
    /// execution that first took it, and hashing them again is most of the
    /// work of a re-execution.
    fn wants_state(&self) -> bool {
        self.at >= self.prefix.len() && self.local.is_none()
    }

    fn wants_footprint(&self) -> bool {
        self.switches.reduce && self.at >= self.prefix.len()
    }

    fn renames(&self) -> bool {
        self.switches.rename
    }

    /// A step with a choice within it (which value a load reads) runs once
    /// for each option, the later ones as replays: its footprint is all of
    /// theirs together, kept until the scheduling choice moves on.
    fn tracks_step(&self) -> bool {
        self.wants_footprint() || (self.switches.reduce && self.prefix_sched.is_some_and(|p| self.at == p + 1))
    }

    fn stepped(&mut self, foot: Foot) {
        if let Some(p) = self.last_sched {
            match &mut self.nodes[p].foot {
                Some(f) if p < self.prefix.len() => f.add(&foot),
                f => *f = Some(foot),
            }
        }
    }

    fn local(&mut self, label: u32) {
        if self.switches.local {
            self.local = Some(label);
        }
    }

    fn not_local(&mut self) {
        if let Some(p) = self.last_sched {
            if let Some(skip) = self.nodes[p].unless_local.take() {
                self.nodes[p].skip = skip;
            }
        }
    }

    /// Up to the prefix's last choice, which is the new one.
    fn replaying(&self) -> bool {
        self.at < self.prefix.len()
    }

    fn forced(&self) -> Option<&[Choice]> {
        self.switches.checkpoints.then_some(self.prefix)
    }

    /// Past the prefix, when the choice has an option this visit explores
    /// after the one taken; within it, always (another worker may own the
    /// rest of its options, which this one cannot tell).
    fn may_return(&self) -> bool {
        let i = self.at - 1;
        if i < self.prefix.len() {
            return true;
        }
        let node = &self.nodes[i];
        let taken = (0..node.labels.len()).find(|&k| node.skip & (1 << node.labels[k]) == 0);
        taken.is_some_and(|t| node.next_option(t as u32, node.labels.len() as u32).is_some())
    }

    /// The skipped choices are the prefix's, whose nodes the search keeps.
    fn skip(&mut self, made: usize, last_sched: Option<usize>) {
        debug_assert!(made <= self.prefix.len() && self.at == 0, "a checkpoint off the prefix");
        self.at = made;
        self.last_sched = last_sched;
    }
}

/// Moves the path `stack` (with its `nodes`) to the next choice to explore:
/// the deepest choice with an option this visit explores left, the option it
/// leaves recorded as explored. Returns `false` when none is left below
/// `frozen` choices.
pub(super) fn backtrack(
    stack: &mut Vec<Choice>,
    nodes: &mut Vec<Node>,
    frozen: usize,
    ends: Option<&mut Vec<u32>>,
) -> bool {
    debug_assert_eq!(nodes.len(), stack.len(), "one node per choice");
    let mut ends = ends;
    while stack.len() > frozen {
        let i = stack.len() - 1;
        let end = ends.as_ref().map_or(stack[i].n, |e| e[i]);
        let taken = stack[i].taken;
        let node = &mut nodes[i];
        if let Some(k) = node.next_option(taken, end) {
            if node.sched {
                let foot = node.foot.take().unwrap_or_else(Foot::global);
                node.done.push((node.labels[taken as usize].into(), foot));
            }
            stack[i].taken = k;
            return true;
        }
        stack.pop();
        nodes.truncate(stack.len());
        if let Some(e) = ends.as_mut() {
            e.pop();
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn foot(reads: &[usize], writes: &[usize]) -> Foot {
        let mut f = Foot::default();
        reads.iter().for_each(|&k| assert!(f.reads.insert(k)));
        writes.iter().for_each(|&k| assert!(f.writes.insert(k)));
        f
    }

    /// Runs one execution of `prefix` to its end: a scheduling choice of two
    /// CPUs, then a load's choice of value in that CPU's step, which reports
    /// `stepped`. Returns whether the step was tracked.
    fn replay(prefix: &[Choice], nodes: &mut Vec<Node>, stepped: Foot) -> bool {
        let mut visit = |_: u128, asleep: u64| Some(asleep);
        let mut dfs = Dfs::new(prefix, nodes, &mut visit, SWITCHES.with(std::cell::Cell::get));
        assert!(matches!(dfs.choose(ChoiceKind::Sched, &[0, 2], 1), Pick::Take(_)));
        let tracked = dfs.tracks_step();
        assert!(matches!(dfs.choose(ChoiceKind::Read, &[0, 1], 0), Pick::Take(_)));
        if tracked {
            dfs.stepped(stepped);
        }
        tracked
    }

    #[test]
    fn a_step_that_chooses_a_loads_value_has_the_footprint_of_all_its_options() {
        let mut nodes = Vec::new();
        // The first execution makes both choices anew.
        assert!(replay(&[], &mut nodes, foot(&[8], &[])));
        let mut stack = vec![
            Choice { point: ChoiceKind::Sched, n: 2, taken: 0 },
            Choice { point: ChoiceKind::Read, n: 2, taken: 0 },
        ];
        // The next takes the load's other option, replaying the step.
        assert!(backtrack(&mut stack, &mut nodes, 0, None));
        assert_eq!(stack[1].taken, 1);
        assert!(replay(&stack, &mut nodes, foot(&[], &[16])), "the replayed step reports its footprint");
        assert_eq!(nodes[0].foot, Some(foot(&[8], &[16])), "both options' footprints together");
        // Moving on to the other CPU leaves the first asleep with both.
        assert!(backtrack(&mut stack, &mut nodes, 0, None));
        assert_eq!(stack.len(), 1);
        assert_eq!(nodes[0].done, vec![(0, foot(&[8], &[16]))]);
    }

    #[test]
    fn a_replay_that_ends_with_an_operation_choice_reports_no_footprint() {
        let prefix =
            [Choice { point: ChoiceKind::Sched, n: 2, taken: 0 }, Choice { point: ChoiceKind::Op, n: 2, taken: 1 }];
        let mut nodes = vec![Node::default(), Node::default()];
        let mut visit = |_: u128, asleep: u64| Some(asleep);
        let mut dfs = Dfs::new(&prefix, &mut nodes, &mut visit, SWITCHES.with(std::cell::Cell::get));
        assert!(matches!(dfs.choose(ChoiceKind::Sched, &[0, 2], 1), Pick::Take(0)));
        assert!(!dfs.tracks_step(), "an operation's choice makes its step global anyway");
    }

    #[test]
    fn an_answer_narrows_the_options_after_the_current_one() {
        let mut node = Node { sched: true, labels: Labels::new(&[0, 2, 4]), ..Node::default() };
        node.claim = 7;
        node.narrow(1 << 2);
        assert_eq!((node.claim, node.next_option(0, 3)), (0, Some(2)), "label 2 is left alone, label 4 is not");
        node.narrow(1 << 4);
        assert_eq!(node.next_option(0, 3), None);
    }
}
