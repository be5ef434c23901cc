//! Where a load balance takes tasks from, and how much: Linux's
//! `find_busiest_group` (`update_sd_pick_busiest`, `calculate_imbalance`) and
//! `find_busiest_queue` after Vincent Guittot's rework (0b0695f2b34a, v5.5),
//! over the groups' PELT figures ([`super::group`]). The simulator's balances
//! (`sim/balance.rs`) call these at each domain level and move the tasks
//! (`detach_tasks`).
//!
//! The steps, as `kernel/sched/fair.c` has them in v5.10, v6.1 and v6.6 to
//! v6.12 (read at 5.10.140, 6.1.20, 6.6.63 and 6.12.63; where they differ,
//! each kernel takes the nearest of those before it, and kernels before
//! v5.5, whose balancer differed, take v5.10's; stable releases differ too:
//! 6.1.55 has v6.6's test of the domain's average load, 6.1.20 does not):
//! - The busiest group: of the groups other than the balancing CPU's that
//!   run a task, the busiest type; among overloaded ones the highest average
//!   load, among fully busy ones the first (from v6.6 the last: their average
//!   loads, not computed, tie), among ones with spare capacity the fewest
//!   idle CPUs, then the most tasks.
//! - No imbalance (`out_balanced`) when there is no such group, when the
//!   local group is busier, when the local group is overloaded and its
//!   average load is not below the busiest's, the domain's, or the busiest's
//!   by `imbalance_pct`; then, unless the groups prefer siblings and the
//!   local one has spare capacity while the busiest runs two more tasks (from
//!   v6.6: `sibling_imbalance` above 1), a busiest group that is not
//!   overloaded gives nothing to a busy CPU, nothing when the two differ by at
//!   most one idle CPU (groups of several CPUs), and nothing when it runs one
//!   task.
//! - How much (`calculate_imbalance`): a local group with spare capacity takes
//!   utilisation to fill it from an overloaded group of another cache domain
//!   (`migrate_util`; one task if that is nothing and the CPU is idle), else
//!   tasks: half the difference in tasks (groups of one CPU, or preferring
//!   siblings; from v6.6 `sibling_imbalance`, by cores) or in idle CPUs, less
//!   at a NUMA level while the imbalance is allowed (`adjust_numa_imbalance`);
//!   a fully busy or overloaded local group takes load (`migrate_load`): the
//!   lesser of the busiest's excess over the domain's average and its own
//!   shortfall, nothing if its average load is already the busiest's or (from
//!   v6.6) the domain's.
//! - The busiest CPU of that group (`find_busiest_queue`): by load for load,
//!   one running a single task whose load exceeds the imbalance left alone; by
//!   utilisation among those running two or more for utilisation; by tasks for
//!   tasks; the first on ties. From v6.1 a CPU running nothing is passed over.
//!
//! - From v6.6 (fee1759e4f04), for an idle balancing CPU, another core
//!   running more than one task on its threads is `group_smt_balance`: busier
//!   than fully busy, picked as a group with spare capacity while either has
//!   an idle CPU, kept on ties as the busiest, and it gives one task.
//!
//! Not modelled: misfit tasks, asymmetric packing and capacities, the
//! `group_imbalanced` type, EAS (`overutilized`), NUMA balancing's
//! `fbq_type`. Active balance is the caller's (`sim/balance.rs`).

use super::domain::Level;
use super::group::{CpuLoad, GroupStats, GroupType, Reader, SCALE};
use crate::kernel::Kernel;
use std::ops::Range;

/// The balancing CPU's state (`enum cpu_idle_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Idle {
    /// It runs something: the periodic balance of a busy CPU.
    Busy,
    /// It is idle: the periodic (or NOHZ) balance of an idle CPU.
    Idle,
    /// It is about to go idle (`newidle_balance`).
    NewlyIdle,
}

/// What a balance moves (`enum migration_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Migration {
    /// Load, in PELT load units (`migrate_load`).
    Load,
    /// Utilisation (`migrate_util`).
    Util,
    /// Tasks (`migrate_task`).
    Task,
}

/// A balance's finding: the busiest group, what to move and how much.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Imbalance {
    /// The busiest group, by index.
    pub group: usize,
    /// What to move.
    pub kind: Migration,
    /// How much (`env->imbalance`).
    pub amount: u64,
}

/// One domain of the balancing CPU as a balance of it reads it.
#[derive(Clone, Copy, Debug)]
pub struct Domain<'a> {
    /// Its groups, as ranges of the CPUs' figures the balance reads.
    pub groups: &'a [Range<usize>],
    /// The group holding the balancing CPU.
    pub local: usize,
    /// Its level (`imbalance_pct`; whether its CPUs share a cache).
    pub level: Level,
    /// Whether its groups prefer siblings (their own domains have
    /// `SD_PREFER_SIBLING`: groups of several CPUs, not of one).
    pub prefer_sibling: bool,
    /// Whether its groups are cores of several threads (their domain has
    /// `SD_SHARE_CPUCAPACITY`).
    pub smt_groups: bool,
    /// At a NUMA level, its `imb_numa_nr`.
    pub numa: Option<u32>,
    /// Hardware threads to a core (1 without SMT), for counting cores.
    pub threads: u32,
    /// The kernel.
    pub kernel: Kernel,
}

/// `find_busiest_group`: the busiest group of `level` with `cpus` the CPUs'
/// figures and the balancing CPU `idle`, and what to move from it; `None`
/// when the level is balanced.
pub fn find_busiest_group(level: &Domain<'_>, cpus: &[CpuLoad], idle: Idle) -> Option<Imbalance> {
    let pct = level.kernel.imbalance_pct(level.level);
    // `smt_balance` (v6.6 on): another core running more than one task,
    // for an idle balancing CPU, unless it is overloaded.
    let smt_balance = level.smt_groups && idle != Idle::Busy && level.kernel.linux_from(6, 6);
    let stats: Vec<GroupStats> = level
        .groups
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let mut s = GroupStats::of(g.clone().map(|c| cpus[c]), pct, Reader::Balance, level.kernel);
            if smt_balance && i != level.local && s.nr_running > 1 && s.kind < GroupType::SmtBalance {
                s.kind = GroupType::SmtBalance;
            }
            s
        })
        .collect();
    let local = *stats.get(level.local)?;
    let mut busiest: Option<usize> = None;
    for (i, s) in stats.iter().enumerate() {
        if i != level.local && s.nr_running > 0 && busiest.is_none_or(|b| picks(level, &stats[b], s)) {
            busiest = Some(i);
        }
    }
    let b = busiest?;
    let bs = stats[b];
    if local.kind > bs.kind {
        return None;
    }
    let total_load: u64 = stats.iter().map(|s| s.load).sum();
    let total_capacity: u64 = stats.iter().map(GroupStats::capacity).sum();
    let domain_avg = total_load * SCALE / total_capacity.max(1);
    if local.kind == GroupType::Overloaded
        && (local.avg_load >= bs.avg_load || local.avg_load >= domain_avg || 100 * bs.avg_load <= pct * local.avg_load)
    {
        return None;
    }
    let sibling = || sibling_imbalance(level, idle, &bs, &local);
    let forced = level.prefer_sibling
        && local.kind == GroupType::HasSpare
        && if level.kernel.linux_from(6, 6) { sibling() > 1 } else { bs.nr_running > local.nr_running + 1 };
    if !forced
        && bs.kind != GroupType::Overloaded
        && (idle == Idle::Busy || (bs.weight > 1 && local.idle_cpus <= bs.idle_cpus + 1) || bs.nr_running == 1)
    {
        return None;
    }
    let (kind, amount) = calculate_imbalance(level, idle, &local, &bs, domain_avg);
    (amount > 0).then_some(Imbalance { group: b, kind, amount })
}

/// `update_sd_pick_busiest`: whether group `s` is busier than `busiest`.
fn picks(level: &Domain<'_>, busiest: &GroupStats, s: &GroupStats) -> bool {
    if s.kind != busiest.kind {
        return s.kind > busiest.kind;
    }
    let has_spare =
        || s.idle_cpus < busiest.idle_cpus || (s.idle_cpus == busiest.idle_cpus && s.nr_running > busiest.nr_running);
    match s.kind {
        GroupType::Overloaded => s.avg_load > busiest.avg_load,
        // With an idle CPU in either, as groups with spare capacity.
        GroupType::SmtBalance if s.idle_cpus != 0 || busiest.idle_cpus != 0 => has_spare(),
        // Average loads not computed for these (0): a tie, the first kept
        // before v6.6; from it the candidate is taken, unless the busiest so
        // far is a core's threads (they "need more help").
        GroupType::FullyBusy | GroupType::SmtBalance => {
            s.avg_load > busiest.avg_load
                || (s.avg_load == busiest.avg_load && level.kernel.linux_from(6, 6) && !level.smt_groups)
        }
        GroupType::HasSpare => has_spare(),
    }
}

/// `sibling_imbalance` (v6.6 on): the tasks to even out between the local
/// group and the busiest by their cores, before halving; 0 for a busy CPU.
fn sibling_imbalance(level: &Domain<'_>, idle: Idle, busiest: &GroupStats, local: &GroupStats) -> u64 {
    if idle == Idle::Busy || busiest.nr_running == 0 {
        return 0;
    }
    let cores = |s: &GroupStats| u64::from((s.weight / level.threads.max(1)).max(1));
    let (ncl, ncb) = (cores(local), cores(busiest));
    let (bn, ln) = (u64::from(busiest.nr_running), u64::from(local.nr_running));
    if ncl == ncb {
        return bn.saturating_sub(ln);
    }
    let imb = (ncl * bn).saturating_sub(ncb * ln);
    let imb = (2 * imb + ncl + ncb) / (ncl + ncb);
    if imb <= 1 && ln == 0 && bn > 1 {
        2
    } else {
        imb
    }
}

/// `calculate_imbalance`: what to move from group `busiest` to `local` and
/// how much, `domain_avg` the domain's average load.
fn calculate_imbalance(
    level: &Domain<'_>,
    idle: Idle,
    local: &GroupStats,
    busiest: &GroupStats,
    domain_avg: u64,
) -> (Migration, u64) {
    let k = level.kernel;
    if busiest.kind == GroupType::SmtBalance {
        // Fewer tasks sharing a core: one.
        return (Migration::Task, 1);
    }
    if local.kind == GroupType::HasSpare {
        if busiest.kind > GroupType::FullyBusy && !level.level.shares_cache() {
            let util = local.capacity().max(local.util) - local.util;
            if idle != Idle::Busy && util == 0 {
                return (Migration::Task, 1);
            }
            return (Migration::Util, util);
        }
        // v5.10 halves each count at once; from v6.1 (v5.19 here) the result
        // is halved after the NUMA allowance.
        let late_halving = k.linux_from(5, 19);
        let halve = |x: u64| if late_halving { x } else { x >> 1 };
        let imb = if busiest.weight == 1 || level.prefer_sibling {
            if k.linux_from(6, 6) {
                sibling_imbalance(level, idle, busiest, local)
            } else {
                halve(u64::from(busiest.nr_running.saturating_sub(local.nr_running)))
            }
        } else {
            halve(u64::from(local.idle_cpus.saturating_sub(busiest.idle_cpus)))
        };
        let imb = match level.numa {
            // `adjust_numa_imbalance(imb, local + 1, imb_numa_nr)`.
            Some(imb_numa_nr) if late_halving => {
                if local.nr_running < imb_numa_nr && imb <= NUMA_IMBALANCE_MIN {
                    0
                } else {
                    imb
                }
            }
            // v5.10's `adjust_numa_imbalance(imb, busiest)`.
            Some(_) if busiest.nr_running <= NUMA_IMBALANCE_MIN as u32 => 0,
            _ => imb,
        };
        return (Migration::Task, if late_halving { imb >> 1 } else { imb });
    }
    let mut local_avg = local.avg_load;
    if local.kind < GroupType::Overloaded {
        local_avg = local.load_per_capacity();
        if local_avg >= busiest.avg_load || (k.linux_from(6, 6) && local_avg >= domain_avg) {
            return (Migration::Load, 0);
        }
    }
    let excess = busiest.avg_load.saturating_sub(domain_avg) * busiest.capacity();
    let short = domain_avg.saturating_sub(local_avg) * local.capacity();
    (Migration::Load, excess.min(short) / SCALE)
}

/// `NUMA_IMBALANCE_MIN`: the tasks by which a lightly loaded node may stay
/// ahead of another.
const NUMA_IMBALANCE_MIN: u64 = 2;

/// `find_busiest_queue`: the CPU of `group` a balance of `imbalance` takes
/// from, with `cpus` the CPUs' figures.
pub fn find_busiest_queue(
    group: Range<usize>,
    cpus: &[CpuLoad],
    imbalance: &Imbalance,
    kernel: Kernel,
) -> Option<usize> {
    let mut best: Option<(usize, u64)> = None;
    for c in group {
        let f = cpus[c];
        if f.nr_running == 0 && kernel.linux_from(6, 1) {
            continue;
        }
        let key = match imbalance.kind {
            Migration::Load if f.nr_running == 1 && f.load > imbalance.amount => continue,
            Migration::Load => f.load,
            Migration::Util if f.nr_running <= 1 => continue,
            Migration::Util => f.util,
            Migration::Task => u64::from(f.nr_running),
        };
        if best.is_none_or(|(_, k)| key > k) {
            best = Some((c, key));
        }
    }
    best.map(|(c, _)| c)
}

#[cfg(test)]
mod tests;
