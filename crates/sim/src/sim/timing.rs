//! Time a run carries from one event to the next ([`Timing`]): the cycles of
//! demand walks and of page faults so far, which a multi-page touch reads to
//! overlap its walks and keep its faults serial (`sim/access.rs`), and the
//! spread of compute and system-call times
//! ([`Sim::set_jitter`](super::Sim::set_jitter)), and how a core's threads
//! share its speed (`sim/smt.rs`).
//!
//! The counters only grow, except where a fault's time replaces what walks
//! inside it counted ([`Timing::fault_since`]): a touch's walk and fault time is
//! the difference of two [`Timing::mark`]s.

use super::smt::Smt;

/// The walk and fault cycles a run has counted, and its jitter.
pub(super) struct Timing {
    /// Cycles of demand walks so far (speculative walks are not counted).
    walk_cycles: u64,
    /// Cycles of page faults so far, each counted whole, serial.
    fault_cycles: u64,
    /// The spread of compute and system-call times
    /// ([`Sim::set_jitter`](super::Sim::set_jitter)): 0 draws nothing.
    jitter: f64,
    /// How a core's threads share its speed, where they do (`sim/smt.rs`).
    smt: Option<Smt>,
}

/// The walk and fault cycles at one moment ([`Timing::mark`]).
#[derive(Clone, Copy)]
pub(super) struct TimingMark {
    /// Demand-walk cycles counted until then.
    pub(super) walk: u64,
    /// Fault cycles counted until then.
    pub(super) fault: u64,
}

impl Timing {
    /// Returns a run's timing before its first event: nothing counted, no jitter.
    pub(super) fn new() -> Self {
        Timing { walk_cycles: 0, fault_cycles: 0, jitter: 0.0, smt: None }
    }

    /// Returns the walk and fault cycles counted so far: a touch's start, whose
    /// difference from its end is what it walked and faulted.
    #[inline]
    pub(super) fn mark(&self) -> TimingMark {
        TimingMark { walk: self.walk_cycles, fault: self.fault_cycles }
    }

    /// Returns the cycles of page faults counted so far.
    #[inline]
    pub(super) fn fault_cycles(&self) -> u64 {
        self.fault_cycles
    }

    /// Counts a demand walk's `cycles` (the hardware walker's time, which a
    /// touch's independent loads overlap).
    #[inline]
    pub(super) fn count_walk(&mut self, cycles: u64) {
        self.walk_cycles += cycles;
    }

    /// Counts `cycles` of a fault's time (serial: nothing overlaps it).
    #[inline]
    pub(super) fn count_fault(&mut self, cycles: u64) {
        self.fault_cycles += cycles;
    }

    /// Counts a fault that began at `mark` and took `cycles`: the walks counted
    /// since are part of its serial time, so the walk count goes back to the
    /// mark's and the fault count becomes the mark's plus `cycles`.
    #[inline]
    pub(super) fn fault_since(&mut self, mark: TimingMark, cycles: u64) {
        self.walk_cycles = mark.walk;
        self.fault_cycles = mark.fault + cycles;
    }

    /// Sets how a core's threads share its speed (`None`: a core each).
    pub(super) fn set_smt(&mut self, smt: Option<Smt>) {
        self.smt = smt;
    }

    /// Returns how a core's threads share its speed, where they do.
    pub(super) fn smt(&self) -> Option<&Smt> {
        self.smt.as_ref()
    }

    /// Returns how a core's threads share its speed, where they do, to begin
    /// an event with.
    pub(super) fn smt_mut(&mut self) -> Option<&mut Smt> {
        self.smt.as_mut()
    }

    /// Sets the spread of compute and system-call times: a factor from
    /// `[1 - jitter, 1 + jitter]`.
    pub(super) fn set_jitter(&mut self, jitter: f64) {
        self.jitter = jitter;
    }

    /// Returns whether `cycles` are jittered, i.e. whether [`Timing::jittered`]
    /// needs a draw: with jitter, and for a time that is not 0.
    #[inline]
    pub(super) fn jitters(&self, cycles: u64) -> bool {
        self.jitter != 0.0 && cycles != 0
    }

    /// Returns `cycles` scaled by the factor `1 + jitter * (2 * unit - 1)`,
    /// `unit` a uniform draw from `[0, 1)`.
    #[inline]
    pub(super) fn jittered(&self, cycles: u64, unit: f64) -> u64 {
        let factor = 1.0 + self.jitter * (2.0 * unit - 1.0);
        (cycles as f64 * factor).round() as u64
    }
}
