//! Where a new task starts: Linux's fork balancing.
//!
//! `wake_up_new_task` asks `select_task_rq_fair` with `WF_FORK`, which takes
//! the highest scheduling domain of the parent's CPU that balances at fork
//! (`SD_BALANCE_FORK`, every level here: a NUMA level loses it only beyond
//! `node_reclaim_distance`, 30, and the modelled machines' nodes are one
//! hop apart) and walks down it (`find_idlest_cpu`, `sched_balance_find_dst_cpu`
//! from v6.10): at each level `find_idlest_group` compares the group of the
//! CPU it has reached with the idlest other group; when the other wins, the
//! walk moves to a CPU of it (`find_idlest_group_cpu`: an idle one, else the
//! least loaded) and goes on a level below that CPU. What no level moves stays
//! on the parent's CPU.
//!
//! The levels are the simulated machine's ([`super::domain`], walked from
//! the top: [`ForkDomains::levels`]), each level's groups listed from the
//! group of the CPU reached; the first of equal candidates wins.
//!
//! A group's figures (`update_sg_wakeup_stats`) and type are
//! [`super::group`]'s, from each CPU's PELT load, utilisation and runnable
//! average ([`CpuLoad`]; the task being placed is on no queue yet): spare
//! capacity, fully busy or overloaded; the average load of a busy group,
//! its load over its capacity. Among the other groups the idlest is the one
//! of the least busy type, then (`update_pick_idlest`) the most idle CPUs and
//! the lowest utilisation (spare capacity), or the lowest average load.
//!
//! `find_idlest_group`'s decision between the local group and the idlest:
//! - the less busy type wins;
//! - both fully busy or overloaded: the local group unless the idlest's
//!   average load is lower by more than the level's `imbalance_pct` (at a
//!   NUMA level, by more than `imbalance_pct - 100` per cent of a task);
//! - both with spare capacity: the group with more idle CPUs, the local one on
//!   ties; at a NUMA level the local node also keeps the task while the
//!   imbalance is allowed ([`NumaFork`]).
//!
//! `imbalance_pct` is each level's ([`crate::kernel::Kernel::imbalance_pct`]).

use super::domain::{Domains, Level};
use super::group::{CpuLoad, GroupStats, GroupType, Reader, SCALE};
use super::pelt::{RqAvg, SchedAvg};
use crate::kernel::Kernel;

/// `NUMA_IMBALANCE_MIN`: a node may run this many more tasks than another
/// while it is lightly loaded (a communicating pair stays together).
const NUMA_IMBALANCE_MIN: u32 = 2;

/// How fork balancing weighs an imbalance between NUMA nodes that both have
/// spare capacity (the `SD_NUMA` case of `find_idlest_group`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumaFork {
    /// The task stays on the parent's node while the node has an idle CPU
    /// (Vincent Guittot's rework of `find_idlest_group`, 57abff067a08, v5.5,
    /// to v5.10). Kernels before v5.5 chose by spare capacity and load, with
    /// the same answer on a node with an idle CPU at this level; they take
    /// this rule.
    WhileIdle,
    /// The task stays on the parent's node while the node, with it, would run
    /// at most `imb_numa_nr` tasks and the nodes' idle CPUs differ by at most
    /// `NUMA_IMBALANCE_MIN` (`adjust_numa_imbalance`, Mel Gorman's
    /// cb29a5c19d2d, v5.19); otherwise the node with more idle CPUs, the
    /// parent's on ties. `imb_numa_nr` is [`imb_numa_nr`]'s. Between v5.11
    /// and v5.18 the allowance was first a quarter of the machine's CPUs, then
    /// of the node's, then `imb_numa_nr` without the idle-CPU test; no preset
    /// runs one of those kernels, and they take this rule.
    Imbalance {
        /// The NUMA domain's `imb_numa_nr`.
        imb_numa_nr: u32,
    },
}

impl NumaFork {
    /// Returns the rule of Linux `version` (major, minor) on a run of `ncpus`
    /// CPUs, `per_node` to a node and `per_llc` to a cache domain
    /// ([`crate::kernel::Kernel::fork_balancing`] gives it for a preset's kernel).
    pub fn for_linux(version: (u8, u8), ncpus: usize, per_node: usize, per_llc: usize) -> NumaFork {
        if version >= (5, 19) {
            NumaFork::Imbalance { imb_numa_nr: imb_numa_nr(ncpus, per_node, per_llc) }
        } else {
            NumaFork::WhileIdle
        }
    }

    /// Returns whether the local node keeps a task when it runs `local_running`
    /// tasks and the nodes' idle CPUs differ by `imbalance`, before the test of
    /// idle CPUs that every level makes.
    fn keeps_local(self, local_running: u32, local_idle: u32, imbalance: u32) -> bool {
        match self {
            NumaFork::WhileIdle => local_idle > 0,
            // `adjust_numa_imbalance(imbalance, local + 1, imb_numa_nr) == 0`:
            // the node with the task runs at most `imb_numa_nr`.
            NumaFork::Imbalance { imb_numa_nr } => {
                if local_running < imb_numa_nr {
                    imbalance <= NUMA_IMBALANCE_MIN
                } else {
                    imbalance == 0
                }
            }
        }
    }
}

/// `sd->imb_numa_nr` of the NUMA domain of a machine of `ncpus` CPUs,
/// `per_node` to a node and `per_llc` to a cache domain (`build_sched_domains`
/// from v5.19, with 026b98a93bbd's eighth). It is computed before degenerate
/// domains are removed, at the first domain above the cache domain, the
/// package: with one cache domain to the package, an eighth of the package's
/// CPUs (at least one); with several, their count. Each NUMA domain above
/// takes that times its span over the first NUMA domain's (the node's).
pub fn imb_numa_nr(ncpus: usize, per_node: usize, per_llc: usize) -> u32 {
    let per_node = per_node.max(1);
    let llcs = per_node / per_llc.clamp(1, per_node);
    let imb = if llcs == 1 { (per_node >> 3).max(1) } else { llcs };
    (imb * (ncpus / per_node).max(1)) as u32
}

/// The machine's scheduling domains as fork balancing reads them: the
/// topology ([`Domains`]), the NUMA rule and the kernel.
#[derive(Clone, Debug)]
pub struct ForkDomains {
    /// The domains.
    domains: Domains,
    /// The NUMA rule.
    numa: NumaFork,
    /// The kernel (`imbalance_pct` of each level, how a group is typed).
    kernel: Kernel,
}

impl ForkDomains {
    /// Returns the domains of a run of `ncpus` CPUs, `per_node` to a node,
    /// `threads` to a core, under `kernel`'s rules (`numa` its NUMA rule
    /// on this machine: [`Kernel::fork_balancing`]).
    pub fn new(ncpus: usize, per_node: usize, threads: usize, numa: NumaFork, kernel: Kernel) -> Self {
        ForkDomains::on(Domains::new(ncpus, per_node, threads), numa, kernel)
    }

    /// Returns fork balancing over `domains` under `kernel`'s rules (`numa`
    /// its NUMA rule on this machine).
    pub fn on(domains: Domains, numa: NumaFork, kernel: Kernel) -> Self {
        ForkDomains { domains, numa, kernel }
    }

    /// Returns the CPU a task forked on `parent` starts on, with `cpus[c]`
    /// CPU `c`'s figures and `llcs` the cache domains (first CPU, one past
    /// the last).
    pub fn find_idlest_cpu(&self, llcs: &[(u32, u32)], cpus: &[CpuLoad], parent: usize) -> usize {
        let mut cpu = parent;
        for level in self.levels(llcs, parent) {
            let groups = self.domains.groups(level, cpu, llcs);
            if let Some(g) = self.idlest_group(level, &groups, cpus) {
                cpu = idlest_group_cpu(&groups[g], cpus);
            }
        }
        cpu
    }

    /// Returns the levels of `cpu`'s domains with more than one group, from
    /// the top.
    pub fn levels(&self, llcs: &[(u32, u32)], cpu: usize) -> Vec<Level> {
        let mut v = self.domains.levels(llcs, cpu);
        v.reverse();
        v
    }

    /// Returns the machine's domains.
    pub fn domains(&self) -> &Domains {
        &self.domains
    }

    /// `find_idlest_group`: the group other than the first (the local one)
    /// the task goes to at `level`, `None` to stay.
    fn idlest_group(&self, level: Level, groups: &[Vec<usize>], cpus: &[CpuLoad]) -> Option<usize> {
        let pct = self.kernel.imbalance_pct(level);
        let stats = |g: &[usize]| GroupStats::of(g.iter().map(|&c| cpus[c]), pct, Reader::Wakeup, self.kernel);
        let local = stats(groups.first()?);
        let mut idlest: Option<(usize, GroupStats)> = None;
        for (i, g) in groups.iter().enumerate().skip(1) {
            let s = stats(g);
            if idlest.is_none_or(|(_, best)| better(&best, &s)) {
                idlest = Some((i, s));
            }
        }
        let (i, best) = idlest?;
        if local.kind != best.kind {
            return (local.kind > best.kind).then_some(i);
        }
        let numa = level == Level::Machine;
        if local.kind != GroupType::HasSpare {
            let imbalance = SCALE * (pct - 100) / 100;
            let stays = (numa && best.avg_load + imbalance >= local.avg_load)
                || best.avg_load >= local.avg_load + imbalance
                || 100 * local.avg_load <= pct * best.avg_load;
            return (!stays).then_some(i);
        }
        if numa && self.numa.keeps_local(local.nr_running, local.idle_cpus, local.idle_cpus.abs_diff(best.idle_cpus)) {
            return None;
        }
        (local.idle_cpus < best.idle_cpus).then_some(i)
    }
}

/// `update_pick_idlest`: whether `s` beats the idlest group so far.
fn better(best: &GroupStats, s: &GroupStats) -> bool {
    if s.kind != best.kind {
        return s.kind < best.kind;
    }
    match s.kind {
        GroupType::HasSpare => s.idle_cpus > best.idle_cpus || (s.idle_cpus == best.idle_cpus && s.util < best.util),
        _ => s.avg_load < best.avg_load,
    }
}

/// `find_idlest_group_cpu`: the first idle CPU of `g` (the kernel prefers the
/// shallowest idle state, then the CPU idle the shortest time; neither is
/// told apart here), else its least loaded (`cpu_load`), the first on ties.
fn idlest_group_cpu(g: &[usize], cpus: &[CpuLoad]) -> usize {
    g.iter().copied().find(|&c| cpus[c].idle()).or_else(|| g.iter().copied().min_by_key(|&c| cpus[c].load)).unwrap_or(0)
}

/// Returns where `n` tasks forked in turn from `parent` start, the first being
/// the parent itself and each running once started (threads that spin until
/// all have started, as pft's do). Each is a new task of nice 0 when it
/// joins its CPU (`init_entity_runnable_average`, then
/// `post_init_entity_util_avg`: [`RqAvg::attach_new`]); the forks follow one
/// another too closely for any average to decay.
pub fn fork_order(d: &ForkDomains, llcs: &[(u32, u32)], n: usize, parent: usize) -> Vec<usize> {
    let ncpus = d.domains.ncpus();
    let mut rqs = vec![RqAvg::default(); ncpus];
    let mut cpus = vec![CpuLoad::default(); ncpus];
    let mut order = Vec::with_capacity(n);
    for j in 0..n {
        let cpu = if j == 0 { parent } else { d.find_idlest_cpu(llcs, &cpus, parent) };
        let weight = SCALE as u32;
        rqs[cpu].attach_new(&mut SchedAvg::new_task(weight), weight);
        let a = rqs[cpu].avg;
        cpus[cpu] = CpuLoad {
            nr_running: cpus[cpu].nr_running + 1,
            load: a.load_avg,
            util: a.util_avg.min(SCALE),
            runnable: a.runnable_avg,
        };
        order.push(cpu);
    }
    order
}

#[cfg(test)]
mod tests;
