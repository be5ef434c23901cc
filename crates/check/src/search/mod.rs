//! Search strategies, each a [`Chooser`] behind the one execution engine
//! ([`crate::exec::run`]), one file each: exhaustive depth-first search with
//! state hashing ([`exhaustive()`], its chooser in `dfs.rs`, its visited set in
//! `table.rs`, lock-free and shared by the threads of [`exhaustive_parallel`]), uniformly random
//! schedules and PCT (probabilistic concurrency testing, Burckhardt et al.,
//! ASPLOS 2010; [`randomised`]), and replay of a recorded schedule
//! ([`Replay`]). Then the shrinking of a counterexample to the fewest context
//! switches ([`shrink()`]). A search may start after a fixed schedule
//! ([`Prefixed`], `tlbkit check --from`), which a script of operations in
//! words can write ([`Script`], `tlbkit check --script`).

mod dfs;
mod exhaustive;
mod parallel;
mod pct;
mod prefix;
mod random;
mod replay;
pub mod saved;
mod script;
mod sharded;
mod shrink;
mod table;

pub use dfs::{with_checkpoints, with_local_steps, with_reduction, with_renaming};
pub use exhaustive::exhaustive;
pub use parallel::{exhaustive_parallel, exhaustive_saving, read_saved_body, Worker};
pub use prefix::{Prefixed, Schedule};
pub use random::{randomised, Randomised};
pub use replay::Replay;
pub use script::{parse_script, Script, ScriptItem};
pub use sharded::{exhaustive_sharded, Link, Orders, Pumped, Resuming, ShardNode, Traffic, MAX_NODES, SEND_EVERY};
pub use shrink::{shrink, shrink_where};
pub use table::Fingerprints;

use crate::arena;
use crate::kernel::Violation;
use crate::trace::Event;
use std::cell::RefCell;

/// A kind of choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChoiceKind {
    /// Which CPU steps next (or whose store buffer drains).
    Sched,
    /// Which kernel operation a CPU starts.
    Op,
    /// Whether a thread preempted just before its barrier finished on another
    /// CPU (option 0: it stayed). Made within a step as [`ChoiceKind::Op`] is;
    /// the shrinker prefers 0, as it prefers no preemption.
    Move,
    /// Which value a plain load under `--memory arm` reads: option 0 the
    /// latest, option `k` the `k`-th newest overwritten value its CPU may
    /// still read (loads out of order). Made within a step; the shrinker
    /// prefers 0.
    Read,
}

/// A chooser's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pick {
    /// Take option `i` (of `n`).
    Take(usize),
    /// Stop this execution here (its state was explored already).
    Prune,
}

/// What decides every choice of an execution: a search strategy or a replay.
pub trait Chooser {
    /// Picks one of `labels.len() >= 2` options at a choice point. At a
    /// [`ChoiceKind::Sched`] a label is `2 * cpu` for stepping that CPU and
    /// `2 * cpu + 1` for draining its store buffer; at a [`ChoiceKind::Op`] it is the
    /// option's index. `state` is the hash of the whole state at a
    /// [`ChoiceKind::Sched`] when [`Chooser::wants_state`], else 0.
    fn choose(&mut self, point: ChoiceKind, labels: &[u32], state: u128) -> Pick;

    /// Returns whether the next call of [`Chooser::choose`] needs the state's
    /// hash (asked before every choice at a [`ChoiceKind::Sched`]).
    fn wants_state(&self) -> bool {
        false
    }

    /// Returns whether the step about to run (chosen at the last
    /// [`ChoiceKind::Sched`]) should report its [`Foot`] to [`Chooser::stepped`].
    fn wants_footprint(&self) -> bool {
        false
    }

    /// Returns whether state hashes name frames and uids up to a renaming (the
    /// machine's [`Hash`]); the soundness tests turn it off to compare.
    fn renames(&self) -> bool {
        true
    }

    /// Returns whether the step about to run should report its [`Foot`] to
    /// [`Chooser::stepped`]: [`Chooser::wants_footprint`], or a replayed step
    /// that makes the newest choice of the replay (a choice within a step:
    /// the step's footprint is that of all its options together).
    fn tracks_step(&self) -> bool {
        self.wants_footprint()
    }

    /// Takes the footprint of the step chosen at the last [`ChoiceKind::Sched`].
    fn stepped(&mut self, _foot: Foot) {}

    /// Tells the chooser, before the next [`Chooser::choose`] at a
    /// [`ChoiceKind::Sched`], that the step of `label` is *local* (see the crate
    /// documentation's local steps): it commutes with every step any other CPU can
    /// take from here on, so exploring it alone from this state is enough
    /// (a persistent set). Asked only when [`Chooser::wants_footprint`].
    fn local(&mut self, _label: u32) {}

    /// Tells the chooser that the local step it was told of, once run, did
    /// more than its announced access ([`Chooser::stepped`] has its
    /// footprint): the state needs every option explored after all.
    fn not_local(&mut self) {}

    /// Returns whether every choice made so far replays one an earlier
    /// execution made, with everything after it up to the next choice: then the
    /// step just taken was judged by that execution, and the oracle's look at
    /// the state after it can be skipped.
    fn replaying(&self) -> bool {
        false
    }

    /// Returns the choices this chooser will take first, whatever else
    /// happens (a search's replayed prefix), when an execution may start from
    /// a checkpoint within them instead of from the beginning
    /// ([`crate::exec::Checkpoints`]); `None` (the default) runs every execution from the
    /// beginning.
    fn forced(&self) -> Option<&[Choice]> {
        None
    }

    /// Returns whether the search may come back to the scheduling choice it
    /// just made to take another option (so that a checkpoint there may be
    /// restored); `true` when it cannot tell.
    fn may_return(&self) -> bool {
        true
    }

    /// Tells the chooser that the execution starts from a checkpoint after the
    /// first `made` of its [`Chooser::forced`] choices, as if it had made them;
    /// the last scheduling choice among them is `last_sched`.
    fn skip(&mut self, _made: usize, _last_sched: Option<usize>) {}

    /// Returns whether this chooser picks kernel operations by what they are
    /// ([`Chooser::script_op`]), as a script does, instead of at a
    /// [`ChoiceKind::Op`] by [`Chooser::choose`].
    fn scripted(&self) -> bool {
        false
    }

    /// Picks, for a script ([`Script`]), which of the operations `offered` (as
    /// a script names them, [`crate::ops::Op::script_words`]) CPU `cpu` starts.
    /// Asked, when [`Chooser::scripted`], at every operation choice, even of
    /// one option, so that a script can tell when its operation is not offered.
    fn script_op(&mut self, _cpu: usize, _offered: &[String]) -> Pick {
        Pick::Prune
    }

    /// Tells the chooser that CPU `cpu` is between kernel operations: the one
    /// it ran (if any) is over, the next not chosen.
    fn op_boundary(&mut self, _cpu: usize) {}
}

/// What one step touched, for partial-order reduction: the policy fields it
/// read and wrote (by offset in the arena, the same on every thread), and
/// whether it did anything else another CPU could see or be changed by.
///
/// A step is *global* when it drains a store buffer, chooses a kernel
/// operation, or changes the machine (page tables, TLBs, roots, tasks, locks,
/// obligations) or another CPU's execution state (its pending interrupts, its
/// wait for a synchronous IPI): the engine compares a hash of all of those
/// before and after the step, so nothing the kernel model does outside the
/// policy's atomics can slip past. Two steps of different CPUs that are not
/// global and touch no field one of them writes commute, and neither enables
/// or disables the other: they are independent. A step that reads every
/// field ([`Foot::reads_all`]) is independent only of steps that write none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Foot {
    /// Fields read.
    pub reads: FieldSet,
    /// Fields written (a read-modify-write counts, even one that failed).
    pub writes: FieldSet,
    /// Whether it did anything beyond its fields and its own CPU's locals
    /// (or touched more fields than a [`FieldSet`] holds).
    pub global: bool,
    /// Whether it depends on every field another CPU writes, though it
    /// writes none: an ordering point under `--memory arm`, after which its
    /// CPU reads only the latest values (which values those are depends on
    /// which stores came first; a step that only reads commutes with it).
    pub reads_all: bool,
}

/// The most fields a [`FieldSet`] holds.
const FOOT_FIELDS: usize = 6;

/// A footprint's fields, by offset in the arena, held inline: a step pauses
/// before each access to the policy's memory, so it makes one, or a few
/// more when it drains its store buffer. A footprint allocates nothing,
/// which matters at one per step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FieldSet {
    len: u8,
    at: [u32; FOOT_FIELDS],
}

impl FieldSet {
    /// Returns the fields, in the order they were first touched.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.at[..self.len as usize].iter().map(|&k| k as usize)
    }

    /// Returns whether it holds field `k`.
    pub fn contains(&self, k: usize) -> bool {
        self.iter().any(|a| a == k)
    }

    /// Adds field `k`; returns `false` if it is full (and `k` not in it), or
    /// `k` is past what it holds (then the step must count as global).
    pub(crate) fn insert(&mut self, k: usize) -> bool {
        if self.contains(k) {
            return true;
        }
        let Ok(k) = u32::try_from(k) else { return false };
        if self.len as usize == FOOT_FIELDS {
            return false;
        }
        self.at[self.len as usize] = k;
        self.len += 1;
        true
    }
}

impl FieldSet {
    /// Writes its count and the fields it holds (the slots past them are
    /// always zero).
    fn save(&self, w: &mut saved::Writer) {
        w.u8(self.len);
        self.at[..self.len as usize].iter().for_each(|&k| w.u32(k));
    }

    fn load(r: &mut saved::Reader<'_>) -> Result<Self, String> {
        let len = r.u8()?;
        if len as usize > FOOT_FIELDS {
            return Err("a footprint with too many fields".into());
        }
        let mut at = [0; FOOT_FIELDS];
        for a in &mut at[..len as usize] {
            *a = r.u32()?;
        }
        Ok(FieldSet { len, at })
    }
}

impl Foot {
    /// Writes the footprint into a saved search.
    pub(super) fn save(&self, w: &mut saved::Writer) {
        self.reads.save(w);
        self.writes.save(w);
        w.u8(u8::from(self.global) | u8::from(self.reads_all) << 1);
    }

    /// Reads what [`Foot::save`] wrote.
    pub(super) fn load(r: &mut saved::Reader<'_>) -> Result<Self, String> {
        let (reads, writes) = (FieldSet::load(r)?, FieldSet::load(r)?);
        let flags = r.u8()?;
        Ok(Foot { reads, writes, global: flags & 1 != 0, reads_all: flags & 2 != 0 })
    }

    /// Returns the footprint of a step that may have done anything.
    pub fn global() -> Self {
        Foot { global: true, ..Foot::default() }
    }

    /// Adds what `other` touched: the footprint of a step that chose
    /// between doing what `self` did and what `other` did.
    pub fn add(&mut self, other: &Foot) {
        self.global |= other.global;
        self.reads_all |= other.reads_all;
        for k in other.reads.iter() {
            self.global |= !self.reads.insert(k);
        }
        for k in other.writes.iter() {
            self.global |= !self.writes.insert(k);
        }
    }

    /// Returns whether steps with footprints `self` and `other` (of different
    /// CPUs) are independent.
    pub fn independent(&self, other: &Foot) -> bool {
        let reads_writes = |a: &Foot, b: &Foot| a.reads_all && b.writes.len > 0;
        !self.global
            && !other.global
            && !reads_writes(self, other)
            && !reads_writes(other, self)
            && !self.writes.iter().any(|a| other.reads.contains(a) || other.writes.contains(a))
            && !other.writes.iter().any(|a| self.reads.contains(a))
    }
}

/// One choice made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Choice {
    /// Its kind.
    pub point: ChoiceKind,
    /// How many options there were.
    pub n: u32,
    /// Which was taken.
    pub taken: u32,
}

/// How an execution ended.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The choices made, in order.
    pub choices: Vec<Choice>,
    /// The violation that ended it, if any.
    pub violation: Option<Violation>,
    /// Whether a chooser cut it short.
    pub pruned: bool,
    /// Steps taken.
    pub steps: usize,
    /// Kernel operations the CPUs started, in all.
    pub ops: usize,
    /// The events, when recorded.
    pub events: Vec<Event>,
    /// When recorded: the offsets of policy fields accessed that the policy's
    /// [`tlbkit_policy::Policy::name_fields`] did not name (traces show them as `[policy+0x..]`).
    pub unnamed: Vec<usize>,
    /// ASID rollovers the policy noted ([`tlbkit_policy::Note::AsidRollover`]).
    pub rollovers: u32,
    /// The CPUs that started a cross-CPU invalidation (sent an IPI or issued a
    /// broadcast TLBI), as a mask of CPU numbers.
    pub initiators: u64,
}

/// What a search did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Executions run.
    pub executions: u64,
    /// Distinct states reached (exhaustive mode).
    pub states: u64,
    /// Executions cut short at a state seen before.
    pub pruned: u64,
    /// The longest execution, in steps.
    pub max_steps: usize,
    /// Whether the search covered everything it set out to (exhaustive: the whole
    /// state space; random/PCT: every iteration asked for).
    pub complete: bool,
    /// The bytes the visited set's slots took at the end, in exhaustive
    /// mode: the workers' shared table (0 otherwise, and for a sharded
    /// search, whose nodes each hold a part).
    pub visited_bytes: u64,
}

/// The choices an execution's record starts with room for (more than most
/// executions make, so that it does not grow choice by choice).
const CHOICES: usize = 256;

thread_local! {
    /// Records of choices done with, kept for the next execution's record.
    static CHOICE_BUFFERS: RefCell<Vec<Vec<Choice>>> = const { RefCell::new(Vec::new()) };
}

/// Returns an empty record of choices with room for [`CHOICES`], one a search
/// gave back ([`recycle_choices`]) if any: a search runs an execution for
/// every few states, and allocating a fresh record of that size for each
/// was a measurable part of its time.
pub(crate) fn choices_buffer() -> Vec<Choice> {
    arena::outside(|| CHOICE_BUFFERS.with(|b| b.borrow_mut().pop()).unwrap_or_else(|| Vec::with_capacity(CHOICES)))
}

/// Keeps a record of choices the caller is done with for [`choices_buffer`].
pub(crate) fn recycle_choices(mut v: Vec<Choice>) {
    if v.capacity() >= CHOICES && !arena::below(v.as_ptr() as usize, arena::used()) {
        v.clear();
        arena::outside(|| {
            CHOICE_BUFFERS.with(|b| {
                let mut b = b.borrow_mut();
                if b.len() < 4 {
                    b.push(v);
                }
            })
        });
    }
}
