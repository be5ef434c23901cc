//! The scheduler's rules that differ by kernel and version, as methods of
//! [`Kernel`]: which class, which wake-up and balancing steps, from which
//! release. The scheduler keeps the run's kernel in its tunables
//! ([`super::Tunables::kernel`]) and asks these where it decides.

use super::fork::NumaFork;
use super::{RecentUsed, ScanLimit, SchedKind};
use crate::kernel::Kernel;

impl Kernel {
    /// Returns how Linux's fork balancing weighs NUMA nodes on a run of
    /// `ncpus` CPUs, `per_node` to a node and `per_llc` to a cache domain
    /// (`crate::sched::fork`); `None` for FreeBSD, whose scheduler (ULE) is
    /// not modelled: its new tasks take the least-loaded CPU.
    pub fn fork_balancing(self, ncpus: usize, per_node: usize, per_llc: usize) -> Option<NumaFork> {
        match self {
            Kernel::Linux(a, b) => Some(NumaFork::for_linux((a, b), ncpus, per_node, per_llc)),
            Kernel::FreeBsd(_) => None,
        }
    }

    /// Returns whether a CPU going idle skips its newly idle balance when its
    /// average idle time is below the cost of balancing its lowest domain
    /// (`sd->max_newidle_lb_cost`: Vincent Guittot's c5b0a7eefc70, "sched/fair:
    /// Remove sysctl_sched_migration_cost condition", v5.16), rather than below
    /// `sysctl_sched_migration_cost` (0.5 ms, every kernel before; `sim/balance.rs`).
    pub fn newidle_gate_is_domain_cost(self) -> bool {
        self.linux_from(5, 16)
    }

    /// Returns the scheduler class of the kernel (`--set sched=` overrides
    /// it): Linux's CFS before v6.6, EEVDF from v6.6 (147f3efaa241
    /// "sched/fair: Implement an EEVDF-like scheduling policy"); FreeBSD's
    /// ULE is not modelled, so per-CPU FIFO queues.
    pub fn sched(self) -> SchedKind {
        match self {
            Kernel::Linux(a, b) if (a, b) >= (6, 6) => SchedKind::Eevdf,
            Kernel::Linux(..) => SchedKind::Cfs,
            Kernel::FreeBsd(_) => SchedKind::Fifo,
        }
    }

    /// Returns whether EEVDF delays a sleeping task's dequeue while it is not
    /// eligible (DELAY_DEQUEUE, `sim/scheduler/delayed.rs`): Linux from v6.12
    /// (152e11f6df29 "sched/fair: Implement delayed dequeue"); `--set
    /// delay_dequeue` overrides it.
    pub fn delay_dequeue(self) -> bool {
        self.linux_from(6, 12)
    }

    /// Returns whether a wake-up that finds no wholly idle core in the
    /// target's cache domain takes an idle thread of the previous CPU's core
    /// before scanning for any idle CPU: Linux from v5.13 (c722f35b513f
    /// "sched/fair: Bring back select_idle_smt(), but differently"). v4.9 to
    /// v5.11 tried the target's siblings after a failed scan, which in the
    /// model (no scan limits) finds nothing the scan did not.
    pub fn idle_smt_prev(self) -> bool {
        self.linux_from(5, 13)
    }

    /// Returns how a wake-up's scan of the cache domain for an idle CPU
    /// (`select_idle_cpu`) is limited ([`ScanLimit`]), by kernel.
    pub fn scan_limit(self) -> ScanLimit {
        if self.linux_from(6, 0) {
            ScanLimit::Util
        } else if self.linux_from(4, 13) {
            ScanLimit::Prop
        } else if self.linux_from(4, 9) {
            ScanLimit::AvgCost
        } else {
            ScanLimit::None
        }
    }

    /// Returns whether a wake-up's scan of the cache domain for an idle CPU
    /// is limited by the domain's utilisation (SIS_UTIL, [`ScanLimit::Util`]).
    pub fn sis_util(self) -> bool {
        self.scan_limit() == ScanLimit::Util
    }

    /// Returns whether `wake_affine_weight` reads a CPU's load as its fair
    /// queue's load average, blocked tasks included (`cpu_load`): Linux from
    /// v5.5 (Vincent Guittot's rework of load balancing, "sched/fair: use load
    /// instead of runnable load in wakeup path"); before, the runnable tasks'
    /// loads alone (`weighted_cpuload`, `cpu_runnable_load`).
    pub fn wake_load_blocked(self) -> bool {
        self.linux_from(5, 5)
    }

    /// Returns whether `wake_affine_weight` keeps the wakee on its previous
    /// CPU when the loads are equal, a sync wake-up's previous CPU counted one
    /// more (`this_eff_load < prev_eff_load`): Linux from v4.17 (082f764a2f3f
    /// "sched/fair: Do not migrate on wake_affine_weight() if weights are
    /// equal", of the series that brought `recent_used_cpu`); before, a tie
    /// goes to the waker's CPU.
    pub fn affine_ties_prev(self) -> bool {
        self.linux_from(4, 17)
    }

    /// Returns how a wake-up's `select_idle_sibling` uses the wakee's
    /// recently used CPU ([`RecentUsed`]): not before Linux v4.17, the
    /// waker's record v4.17 to v5.14, the wakee's previous CPU from v5.15;
    /// never on FreeBSD.
    pub fn recent_used(self) -> RecentUsed {
        match self {
            Kernel::Linux(a, b) if (a, b) >= (5, 15) => RecentUsed::Prev,
            Kernel::Linux(a, b) if (a, b) >= (4, 17) => RecentUsed::Waker,
            _ => RecentUsed::Never,
        }
    }

    /// Returns whether a sync wake-up's "the waker runs alone" test
    /// (`wake_affine_idle`) counts the waker's CPU's tasks without those whose
    /// dequeue is delayed: Linux from v6.15 (aa3ee4f0b754 "sched/fair: Fixup
    /// wake_up_sync() vs DELAYED_DEQUEUE", also in v6.12's stable releases from
    /// July 2025, which the model's v6.12 is not); `--set sync_skip_delayed`
    /// overrides it.
    pub fn sync_skip_delayed(self) -> bool {
        self.linux_from(6, 15)
    }

    /// Returns `sd->imbalance_pct` of the domains above the cache domain (the
    /// package and NUMA levels: `sd_init`'s default): 125 before Linux v5.10,
    /// 117 from it (2208cdaa56c9 "sched/fair: Reduce minimal imbalance
    /// threshold"). A core's domain takes [`super::SMT_IMBALANCE_PCT`] and a
    /// cache domain [`super::LLC_IMBALANCE_PCT`] in every version.
    pub fn upper_imbalance_pct(self) -> u64 {
        if self.linux_from(5, 10) {
            117
        } else {
            125
        }
    }

    /// Returns `sd->busy_factor`, by which a busy CPU stretches its domains'
    /// balance intervals: 32 before Linux v5.10, 16 from it (6e7499135db7
    /// "sched/fair: Reduce busy load balance interval").
    pub fn busy_factor(self) -> u64 {
        if self.linux_from(5, 10) {
            16
        } else {
            32
        }
    }

    /// Returns whether `wake_affine_idle` keeps a wakee on its previous CPU
    /// when that CPU is idle, after the waker's CPU's own tests: Linux from
    /// v4.16 (806486c377e3 "sched/fair: Do not migrate if the prev_cpu is
    /// idle", of Mel Gorman's series that also brought `recent_used_cpu`).
    pub fn affine_prev_idle(self) -> bool {
        self.linux_from(4, 16)
    }

    /// Returns whether the balancer's `detach_tasks` weighs a task's load
    /// against the imbalance halved once for each failed balance of the
    /// domain (`shr_bound(load, nr_balance_failed)`): Linux from v5.10
    /// (5a7f55590467 "sched/fair: Relax constraint on task's load during load
    /// balance"); before, halved once always (`load / 2`).
    pub fn load_shr_failed(self) -> bool {
        self.linux_from(5, 10)
    }

    /// Returns whether `detach_tasks` weighs a task's utilisation against the
    /// imbalance halved once for each failed balance of the domain, as it
    /// weighs load (`shr_bound(util, nr_balance_failed)`): Linux from v6.8
    /// (3af7524b1419 "sched/fair: Use all little CPUs for CPU-bound
    /// workloads"; stable series took it later, which the model, reading
    /// mainline versions, does not follow); before, whole.
    pub fn util_shr_failed(self) -> bool {
        self.linux_from(6, 8)
    }

    /// Returns whether a scheduling group's type reads its runnable average
    /// besides its utilisation (a group whose tasks wait past its capacity
    /// is overloaded): Linux from v5.7 (070f5e860ee2 "sched/fair: Take into
    /// account runnable_avg to classify group"; [`super::group`]).
    pub fn group_runnable(self) -> bool {
        self.linux_from(5, 7)
    }
}
