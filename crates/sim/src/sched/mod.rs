//! The scheduling classes of the simulated kernel: what orders a CPU's run
//! queue, where a waking task is placed in it, and when it preempts the task
//! running. The engine's side (wake-ups, the switch, balancing between CPUs)
//! is `sim/sched.rs` and `sim/balance.rs`; this module is pure arithmetic on a
//! run queue and the tasks' scheduling entities, in integer cycles.
//!
//! Three classes ([`SchedKind`]), chosen by the machine preset's kernel:
//! - [`SchedKind::Fifo`]: a FIFO queue per CPU and a fixed slice (`slice_us`),
//!   for the FreeBSD presets (ULE is not modelled; see `docs/costs/scheduler.md`).
//! - [`SchedKind::Cfs`]: Linux's Completely Fair Scheduler, as in v4.10 to
//!   v6.5 (`kernel/sched/fair.c` at v4.14 is the reference): [`cfs`].
//! - [`SchedKind::Eevdf`]: Linux's EEVDF scheduler from v6.6 (commit
//!   147f3efaa241 "sched/fair: Implement an EEVDF-like scheduling policy"),
//!   with RUN_TO_PARITY (63304558ba5d, in v6.6): [`eevdf`].
//!
//! What is modelled: one `cfs_rq` per CPU of nice-0 tasks (weight 1024; the
//! arithmetic takes any weight), virtual runtime, the classes' pick, placement
//! and preemption rules, and the kernel's default tunables scaled as
//! `sysctl_sched_tunable_scaling = SCHED_TUNABLESCALING_LOG` scales them
//! ([`Tunables`]); CFS's buddies are [`cfs`]'s, EEVDF's delayed dequeue
//! [`eevdf`]'s, load tracking (PELT) [`pelt`]'s. Not modelled: task groups
//! (cgroups, autogroup), EEVDF's PREEMPT_SHORT
//! (v6.12: nothing to do between equal-slice tasks), real-time classes, and `hrtick` (preemption is checked at the 1 ms tick and
//! at wake-ups, as with `HZ` = 1000 and `HRTICK` off).

pub mod busiest;
pub mod cfs;
pub mod domain;
pub mod eevdf;
pub mod fork;
pub mod group;
pub mod pelt;
pub mod rules;
pub mod runq;

pub use runq::{Queued, RunQueue};

use crate::kernel::Kernel;

/// How a wake-up's `select_idle_sibling` uses the wakee's recently used CPU
/// (`p->recent_used_cpu`), by kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RecentUsed {
    /// Not at all (before v4.17).
    #[default]
    Never,
    /// v4.17 to v5.14 (32e839dda3ba): an idle recently used CPU sharing the
    /// target's cache is taken, and the wakee's record becomes its previous
    /// CPU then only; the *waker*'s record becomes the waker's CPU at every
    /// affine wake-up it makes (`current->recent_used_cpu = cpu`).
    Waker,
    /// From v5.15 (89aafd67f28c "sched/fair: Use prev instead of new target
    /// as recent_used_cpu"): the same test, and the wakee's record becomes
    /// its previous CPU at every wake-up that reaches it.
    Prev,
}

/// What limits a wake-up's scan of the target's cache domain for an idle CPU
/// (`select_idle_cpu`, `kernel/sched/fair.c`), by kernel. The scan's cost is
/// measured in cycles (the run-queue lines it reads) and its average kept
/// per waking CPU (`avg_scan_cost`, an eighth of each sample), against the
/// waking CPU's `avg_idle`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanLimit {
    /// None: the whole domain (kernels before v4.9).
    None,
    /// No scan when `avg_idle / 512` is below the average scan cost
    /// (10e2f1acd010 "sched/core: Rewrite and improve
    /// select_idle_siblings()", v4.9 to v4.12).
    AvgCost,
    /// SIS_PROP (1ad3aaf3fcd2 "sched/core: Implement new approach to scale
    /// select_idle_cpu()", v4.13 to v5.19): at most `nr - 1` CPUs, `nr` the
    /// domain's weight times `avg_idle / 512` over the average scan cost
    /// when that exceeds 4, else 4. As v5.10 has it; v5.12 to v5.16 changed
    /// whose idle time and which cost it reads (not modelled).
    Prop,
    /// SIS_UTIL (70fb5ccf2ebb, v6.0 on): at most the domain's
    /// `nr_idle_scan`, set from its utilisation at each periodic balance;
    /// none at all, idle cores included, when that is 0.
    Util,
}

/// The scheduler a simulated kernel runs: the preset's kernel's, unless
/// `--set sched=` says otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SchedKind {
    /// Per-CPU FIFO queues and a fixed time slice, no wake-up preemption (the
    /// FreeBSD presets: ULE is not modelled).
    #[default]
    Fifo,
    /// Linux's CFS (v2.6.23 to v6.5).
    Cfs,
    /// Linux's EEVDF (v6.6 on).
    Eevdf,
}

impl SchedKind {
    /// Every class, in the order `--set sched` lists them.
    pub const ALL: [SchedKind; 3] = [SchedKind::Fifo, SchedKind::Cfs, SchedKind::Eevdf];

    /// Returns the name `--set sched=` selects the class by.
    pub const fn name(self) -> &'static str {
        match self {
            SchedKind::Fifo => "fifo",
            SchedKind::Cfs => "cfs",
            SchedKind::Eevdf => "eevdf",
        }
    }

    /// Returns whether this is one of Linux's fair classes (CFS or EEVDF).
    pub const fn is_fair(self) -> bool {
        !matches!(self, SchedKind::Fifo)
    }
}

/// The weight of a nice-0 task (`NICE_0_LOAD` with `scale_load_down`, 1024).
pub const NICE_0_WEIGHT: u32 = 1024;

/// `sysctl_sched_latency`'s default before scaling, in ns (fair.c: 6 ms).
pub const SCHED_LATENCY_NS: u64 = 6_000_000;
/// `sysctl_sched_min_granularity`'s default before scaling, in ns (fair.c, CFS: 0.75 ms).
pub const MIN_GRANULARITY_NS: u64 = 750_000;
/// `sysctl_sched_wakeup_granularity`'s default before scaling, in ns (fair.c, CFS: 1 ms).
pub const WAKEUP_GRANULARITY_NS: u64 = 1_000_000;
/// `sysctl_sched_base_slice`'s default before scaling, in ns (fair.c, EEVDF: 0.75 ms).
pub const BASE_SLICE_NS: u64 = 750_000;
/// `sched_nr_latency`: above this many tasks CFS's period grows (fair.c: 8).
pub const SCHED_NR_LATENCY: u64 = 8;
/// `sysctl_sched_migration_cost`, in ns (fair.c: 0.5 ms): a task that ran
/// more recently than this is cache-hot and not moved by the balancer.
pub const MIGRATION_COST_NS: u64 = 500_000;
/// The scheduler tick, in ns (`HZ` = 1000, as the engine's policy tick).
pub const TICK_NS: u64 = 1_000_000;
/// `sysctl_sched_nr_migrate`: the most tasks one balance pass looks at (32).
pub const NR_MIGRATE: usize = 32;

/// `sd->imbalance_pct` of a core's domain, its hardware threads
/// (`SD_SHARE_CPUCAPACITY`: `sd_init`).
pub const SMT_IMBALANCE_PCT: u64 = 110;
/// `sd->imbalance_pct` of a cache domain (the MC level, `SD_SHARE_PKG_RESOURCES`,
/// `SD_SHARE_LLC` from v6.9: `sd_init`), the same in every kernel modelled;
/// the levels above take [`crate::kernel::Kernel::upper_imbalance_pct`].
pub const LLC_IMBALANCE_PCT: u64 = 117;

/// Returns the factor the kernel scales its latency tunables by on `ncpus`
/// CPUs: `1 + ilog2(min(ncpus, 8))` (`get_update_sysctl_factor`,
/// `SCHED_TUNABLESCALING_LOG`, the default).
pub fn tunable_factor(ncpus: usize) -> u64 {
    1 + u64::from(ncpus.clamp(1, 8).ilog2())
}

/// The class's tunables for one machine, in cycles.
#[derive(Clone, Copy, Debug)]
pub struct Tunables {
    /// The class.
    pub kind: SchedKind,
    /// CFS's `sysctl_sched_latency` (scaled).
    pub latency: u64,
    /// CFS's `sysctl_sched_min_granularity` (scaled).
    pub min_gran: u64,
    /// CFS's `sysctl_sched_wakeup_granularity` (scaled).
    pub wakeup_gran: u64,
    /// EEVDF's `sysctl_sched_base_slice` (scaled).
    pub base_slice: u64,
    /// `sysctl_sched_migration_cost` (not scaled).
    pub migration_cost: u64,
    /// The tick.
    pub tick: u64,
    /// The FIFO class's slice.
    pub fifo_slice: u64,
    /// Cycles per millisecond (balance intervals are in ms).
    pub ms: u64,
    /// The kernel whose rules the scheduler follows where they differ by
    /// version ([`rules`]: the wake-up's steps, SIS_UTIL, `wake_affine_weight`'s
    /// loads and ties); the default kernel in [`Tunables::new`].
    pub kernel: Kernel,
}

impl Tunables {
    /// Returns the tunables of `kind` on `ncpus` CPUs at `ghz`: the FIFO slice is
    /// `fifo_slice_us`; `base_slice_us`, when given, replaces the scaled base
    /// slice (EEVDF) or minimum granularity (CFS, whose latency is then
    /// `sched_nr_latency` times it), as writing the debugfs knob does.
    pub fn new(kind: SchedKind, ncpus: usize, ghz: f64, fifo_slice_us: f64, base_slice_us: Option<f64>) -> Self {
        let f = tunable_factor(ncpus);
        let cyc = |ns: u64| ((ns as f64) * ghz).round() as u64;
        let (mut latency, mut min_gran, mut base_slice) =
            (cyc(SCHED_LATENCY_NS * f), cyc(MIN_GRANULARITY_NS * f), cyc(BASE_SLICE_NS * f));
        if let Some(us) = base_slice_us {
            let s = (us * 1000.0 * ghz).round().max(1.0) as u64;
            (latency, min_gran, base_slice) = (s * SCHED_NR_LATENCY, s, s);
        }
        Tunables {
            kind,
            latency,
            min_gran,
            wakeup_gran: cyc(WAKEUP_GRANULARITY_NS * f),
            base_slice,
            migration_cost: cyc(MIGRATION_COST_NS),
            tick: cyc(TICK_NS).max(1),
            fifo_slice: (fifo_slice_us * 1000.0 * ghz) as u64,
            ms: cyc(1_000_000).max(1),
            kernel: Kernel::default(),
        }
    }
}

/// `calc_delta_fair`: `delta` of real time as virtual time for a task of `weight`.
#[inline]
pub fn calc_delta_fair(delta: u64, weight: u32) -> u64 {
    if weight == NICE_0_WEIGHT {
        delta
    } else {
        ((u128::from(delta) * u128::from(NICE_0_WEIGHT)) / u128::from(weight.max(1))) as u64
    }
}

/// A task's scheduling entity (`struct sched_entity`), all times in cycles.
#[derive(Clone, Copy, Debug)]
pub struct Entity {
    /// Virtual runtime.
    pub vruntime: u64,
    /// EEVDF: the virtual deadline.
    pub deadline: u64,
    /// EEVDF: the lag saved when it went to sleep (`vlag`).
    pub vlag: i64,
    /// Load weight (1024 for nice 0).
    pub weight: u32,
    /// EEVDF RUN_TO_PARITY: set when picked, cleared when its deadline moves
    /// (the kernel keeps `vlag == deadline` as this mark).
    pub protect: bool,
    /// When its runtime was last accounted (`exec_start`): while it runs, the
    /// last update; after, when it stopped. 0: it never ran.
    pub exec_start: u64,
    /// `wakee_flips`, `wakee_flip_decay_ts` and `last_wakee` (`record_wakee`).
    pub wakee_flips: u32,
    /// When `wakee_flips` was last halved.
    pub flip_decay: u64,
    /// The task it woke last (`u32::MAX`: none).
    pub last_wakee: u32,
    /// EEVDF DELAY_DEQUEUE (`sched_delayed`): it went to sleep while not
    /// eligible and stays queued, asleep, until a pick or a wake-up
    /// ([`eevdf`]'s module docs).
    pub delayed: bool,
    /// Its load tracking ([`pelt`]).
    pub pelt: pelt::TaskAvg,
}

impl Default for Entity {
    fn default() -> Self {
        Entity {
            vruntime: 0,
            deadline: 0,
            vlag: 0,
            weight: NICE_0_WEIGHT,
            protect: false,
            exec_start: 0,
            wakee_flips: 0,
            flip_decay: 0,
            last_wakee: u32::MAX,
            delayed: false,
            pelt: pelt::TaskAvg::new(NICE_0_WEIGHT),
        }
    }
}

impl Entity {
    /// `update_curr` for a running entity: charges the time since `exec_start`
    /// as virtual runtime. Returns the real time charged.
    #[inline]
    pub fn account(&mut self, now: u64) -> u64 {
        let delta = now.saturating_sub(self.exec_start);
        if delta > 0 {
            self.vruntime += calc_delta_fair(delta, self.weight);
            self.exec_start = now;
        }
        delta
    }

    /// Returns the queue entry for this entity as task `tid`.
    #[inline]
    pub fn queued(&self, tid: usize, pinned: bool) -> Queued {
        let (key, deadline, weight, delayed) = (self.vruntime, self.deadline, self.weight, self.delayed);
        Queued { key, deadline, tid: tid as u32, weight, pinned, delayed }
    }

    /// `record_wakee`: this task woke `wakee` at `now` (`hz`: cycles in a
    /// second, the decay period).
    pub fn record_wakee(&mut self, wakee: usize, now: u64, hz: u64) {
        if now > self.flip_decay + hz {
            self.wakee_flips >>= 1;
            self.flip_decay = now;
        }
        if self.last_wakee != wakee as u32 {
            self.last_wakee = wakee as u32;
            self.wakee_flips += 1;
        }
    }
}

/// `wake_wide`: whether a waker with `waker_flips` and a wakee with
/// `wakee_flips` switch partners so often (many-to-many, past the LLC's size
/// `llc_size`) that wake-affine placement is skipped (fair.c, since v4.3).
pub fn wake_wide(waker_flips: u32, wakee_flips: u32, llc_size: usize) -> bool {
    let (master, slave) = (waker_flips.max(wakee_flips) as u64, waker_flips.min(wakee_flips) as u64);
    let factor = llc_size as u64;
    !(slave < factor || master < slave * factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tunables_scale_with_the_log_of_up_to_eight_cpus() {
        assert_eq!([1, 2, 3, 4, 8, 64, 4096].map(tunable_factor), [1, 2, 2, 3, 4, 4, 4]);
        let t = Tunables::new(SchedKind::Cfs, 16, 1.0, 4000.0, None);
        assert_eq!((t.latency, t.min_gran, t.wakeup_gran), (24_000_000, 3_000_000, 4_000_000));
        let e = Tunables::new(SchedKind::Eevdf, 2, 2.0, 4000.0, None);
        assert_eq!((e.base_slice, e.migration_cost, e.tick), (3_000_000, 1_000_000, 2_000_000));
    }

    #[test]
    fn wake_wide_needs_many_partners_on_both_sides() {
        assert!(!wake_wide(1, 1, 8));
        assert!(!wake_wide(100, 4, 8), "the wakee has fewer than llc_size partners");
        assert!(wake_wide(100, 9, 8));
        assert!(!wake_wide(60, 9, 8), "the waker's flips are under llc_size times the wakee's");
    }
}
