//! What the kernel operations ([`crate::ops`], [`crate::block`]) need of the
//! execution that runs them: the [`Engine`] trait, which the execution's core
//! ([`crate::exec`]) implements.
//!
//! The operations are written against this trait and never name the engine,
//! so the engine can call them (every CPU runs [`crate::ops`]'s kernel loop)
//! while the modules stay in layers: `exec` above `ops` above `block`, all
//! three above this one.

use crate::kernel::{LockSide, Machine, Violation};
use crate::shape::Shape;
use crate::trace::Kind;
use std::cell::{Ref, RefMut};
use tlbkit_policy::Hw;

/// The execution a kernel operation runs in, seen from the CPU running it:
/// the machine's ground truth, the preemption points, the trace, the oracle's
/// verdicts and the CPU's own execution state.
///
/// A kernel operation runs on one CPU's coroutine; everything between two
/// calls of [`Engine::pause`] (or of a call that pauses) is one atomic step.
pub(crate) trait Engine {
    /// The hardware a CPU's policy calls act on.
    type Hw<'a>: Hw
    where
        Self: 'a;

    /// Returns the hardware of CPU `cpu`, for calling the policy.
    fn hw(&self, cpu: usize) -> Self::Hw<'_>;

    /// Returns the shape of the machine and of the exploration.
    fn shape(&self) -> &Shape;

    /// Borrows the machine to read it.
    fn machine(&self) -> Ref<'_, Machine>;

    /// Borrows the machine to change it: the engine takes its hash again
    /// before it next needs it.
    fn machine_mut(&self) -> RefMut<'_, Machine>;

    /// Suspends the current CPU until the scheduler steps it again (a
    /// preemption point), then takes any interrupt that is due.
    fn pause(&self);

    /// Records that CPU `cpu` did something: folds `key` into its history
    /// and, when recording, adds the event `text` makes.
    fn event(&self, cpu: usize, key: u64, text: impl FnOnce() -> String);

    /// As [`Engine::event`], for an event of kind `kind`.
    fn event_kind(&self, cpu: usize, key: u64, kind: Kind, text: impl FnOnce() -> String);

    /// Folds `key` into CPU `cpu`'s history without recording an event (what
    /// it read, where traces would drown in reads).
    fn remember(&self, cpu: usize, key: u64);

    /// Records a violation found by the kernel side (the first one wins).
    fn violated(&self, v: Violation);

    /// Makes an operation choice (a [`crate::search::ChoiceKind::Op`]) among
    /// `labels`, the options' indices, and returns the option taken; `None`
    /// when the search stops the execution here.
    fn choose_op(&self, labels: &[u32]) -> Option<usize>;

    /// Makes the choice of the kernel operation the current CPU starts among
    /// `n`, as [`Engine::choose_op`] does; a script picks by what each one is,
    /// `words(i)` naming option `i` as a script line does
    /// ([`crate::search::Chooser::script_op`]).
    fn choose_kernel_op(&self, n: usize, words: &dyn Fn(usize) -> String) -> Option<usize>;

    /// Tells the chooser that CPU `cpu` is between kernel operations
    /// ([`crate::search::Chooser::op_boundary`]).
    fn op_boundary(&self, cpu: usize);

    /// Waits for interrupts only, for good: the current CPU has no operation
    /// left to start.
    fn idle(&self) -> !;

    /// Sleeps until `side` of the `mmap_lock` of `slot` can be taken
    /// (interrupts are taken meanwhile); the caller takes it then.
    fn wait_mm_lock(&self, slot: u32, side: LockSide);

    /// Takes the PTE lock of `slot`'s page-table page for the step that
    /// changes one of its PTEs: the lock's read-modify-write drains the
    /// current CPU's store buffer, and another CPU's release of it is visible
    /// only once the PTE clear it buffered before the release is (TSO keeps a
    /// buffer in order). It waits too while another CPU holds the lock across
    /// steps (`Machine::hold_ptl`: Linux reclaim, until its
    /// `arch_tlbbatch_add_pending` returns).
    fn pte_lock(&self, slot: u32);

    /// Makes every store in CPU `cpu`'s store buffer visible, oldest first.
    fn drain_own(&self, cpu: usize);

    /// Returns whether CPU `cpu` has stores in its store buffer.
    fn has_buffered(&self, cpu: usize) -> bool;

    /// Puts a store clearing PTE `page` of `slot` (version `ver`) into the
    /// current CPU's store buffer.
    fn buffer_pte_clear(&self, slot: u32, page: usize, ver: u32);

    /// Returns how many kernel operations CPU `cpu` has started.
    fn ops_done(&self, cpu: usize) -> usize;

    /// Forgets CPU `cpu`'s locals between two kernel operations (it has none
    /// there): what it did lives on in shared memory and the machine, so its
    /// history starts afresh and executions that did the same operations in
    /// another order meet again.
    fn forget_locals(&self, cpu: usize);

    /// Counts a kernel operation CPU `cpu` starts, as it starts (under
    /// `--memory arm` its loads read nothing overwritten before now).
    fn count_op(&self, cpu: usize);

    /// Lets the thread CPU `cpu` runs be preempted before its next `DSB ISH`
    /// and finish on another CPU (`on`), or stops letting it; returns whether
    /// it moved since the last call (the search chooses at the barrier:
    /// [`crate::ops`]'s `flush_preemptibly`).
    fn preemptible(&self, cpu: usize, on: bool) -> bool;

    /// Offers the search the move of the thread CPU `cpu` runs to another CPU
    /// now, before `what` (a point the harness names), if it may be preempted
    /// there (interrupts on, outside handlers and spin locks); returns whether
    /// it moved.
    /// If it did, this CPU first runs `meanwhile` (its switch to the next
    /// thread); then, until `preemptible` ends it, the thread's barriers
    /// complete none of this CPU's invalidations.
    fn offer_move(&self, cpu: usize, what: &'static str, meanwhile: impl FnOnce()) -> bool;

    /// Turns CPU `cpu`'s interrupts off (one level deeper: they nest).
    fn irq_disable(&self, cpu: usize);

    /// Undoes one [`Engine::irq_disable`] of CPU `cpu`.
    fn irq_enable(&self, cpu: usize);
}
