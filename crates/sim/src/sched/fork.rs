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
//! The levels are the simulated machine's ([`ForkDomains::levels`]): the
//! machine, its groups its NUMA nodes (the model's sockets); a node, its
//! groups its cache domains; a cache domain, its groups its cores (with SMT)
//! or CPUs; a core, its groups its hardware threads. A level of one group is
//! left out, as the kernel removes degenerate domains. A level's groups are
//! listed from the group of the CPU reached, then on in CPU order round the
//! level (`build_sched_groups`' `for_each_cpu_wrap`), and the first of equal
//! candidates wins.
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
//! `imbalance_pct` is 110 at the core level (SMT), 117 at the cache domain
//! (`sd_init`) and above it 125 before v5.10, 117 from it
//! ([`crate::kernel::Kernel::upper_imbalance_pct`]).

use super::group::{CpuLoad, GroupStats, GroupType, Reader, SCALE};
use super::pelt::{RqAvg, SchedAvg};
use super::{LLC_IMBALANCE_PCT, SMT_IMBALANCE_PCT};
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

/// A level of the machine's scheduling domains, from the top.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// The whole machine; its groups are the NUMA nodes.
    Machine,
    /// A node; its groups are its cache domains.
    Node,
    /// A cache domain; its groups are its cores (with SMT) or CPUs.
    Llc,
    /// A core; its groups are its hardware threads.
    Core,
}

/// The machine's scheduling domains as fork balancing reads them.
#[derive(Clone, Debug)]
pub struct ForkDomains {
    /// CPUs of the run.
    ncpus: usize,
    /// CPUs to a NUMA node (a socket of the model), numbered together.
    per_node: usize,
    /// Hardware threads to a core that share it (1: each CPU a core): a
    /// node's CPU `l` and `l + per_node / threads` are threads of one core.
    threads: usize,
    /// The NUMA rule.
    numa: NumaFork,
    /// The kernel (`imbalance_pct` of the node and machine levels, how a
    /// group is typed).
    kernel: Kernel,
}

impl ForkDomains {
    /// Returns the domains of a run of `ncpus` CPUs, `per_node` to a node,
    /// `threads` to a core, under `kernel`'s rules (`numa` its NUMA rule
    /// on this machine: [`Kernel::fork_balancing`]).
    pub fn new(ncpus: usize, per_node: usize, threads: usize, numa: NumaFork, kernel: Kernel) -> Self {
        let per_node = per_node.max(1);
        let threads = if threads > 1 && per_node.is_multiple_of(threads) { threads } else { 1 };
        ForkDomains { ncpus, per_node, threads, numa, kernel }
    }

    /// Returns the CPU a task forked on `parent` starts on, with `cpus[c]`
    /// CPU `c`'s figures and `llcs` the cache domains (first CPU, one past
    /// the last).
    pub fn find_idlest_cpu(&self, llcs: &[(u32, u32)], cpus: &[CpuLoad], parent: usize) -> usize {
        let mut cpu = parent;
        for level in self.levels(llcs, parent) {
            let groups = self.groups(level, cpu, llcs);
            if let Some(g) = self.idlest_group(level, &groups, cpus) {
                cpu = idlest_group_cpu(&groups[g], cpus);
            }
        }
        cpu
    }

    /// Returns the levels of `cpu`'s domains with more than one group, from
    /// the top.
    pub fn levels(&self, llcs: &[(u32, u32)], cpu: usize) -> Vec<Level> {
        let mut v = Vec::with_capacity(4);
        if self.ncpus > self.per_node {
            v.push(Level::Machine);
        }
        let node = self.node_span(cpu);
        if llcs.iter().filter(|l| node.contains(&(l.0 as usize))).count() > 1 {
            v.push(Level::Node);
        }
        let llc = llc_span(llcs, cpu);
        if self.child_span(Level::Llc, llc.start, llcs).len() < llc.len() {
            v.push(Level::Llc);
        }
        if self.core(cpu).count() > 1 {
            v.push(Level::Core);
        }
        v
    }

    /// Returns the groups of `cpu`'s domain at `level`: its own first, then
    /// on round the domain in CPU order.
    fn groups(&self, level: Level, cpu: usize, llcs: &[(u32, u32)]) -> Vec<Vec<usize>> {
        let span: Vec<usize> = match level {
            Level::Machine => (0..self.ncpus).collect(),
            Level::Node => self.node_span(cpu).collect(),
            Level::Llc => llc_span(llcs, cpu).collect(),
            Level::Core => self.core(cpu).collect(),
        };
        let at = span.iter().position(|&c| c == cpu).unwrap_or(0);
        let mut covered = vec![false; self.ncpus];
        let mut groups = Vec::new();
        for &c in span[at..].iter().chain(&span[..at]) {
            if covered[c] {
                continue;
            }
            let g = self.child_span(level, c, llcs);
            for &x in &g {
                covered[x] = true;
            }
            groups.push(g);
        }
        groups
    }

    /// Returns the CPUs of the group at `level` that holds `cpu`: the span of
    /// the level below.
    fn child_span(&self, level: Level, cpu: usize, llcs: &[(u32, u32)]) -> Vec<usize> {
        match level {
            Level::Machine => self.node_span(cpu).collect(),
            Level::Node => llc_span(llcs, cpu).collect(),
            Level::Llc if self.threads > 1 => {
                let llc = llc_span(llcs, cpu);
                self.core(cpu).filter(|c| llc.contains(c)).collect()
            }
            Level::Llc | Level::Core => vec![cpu],
        }
    }

    /// Returns the CPUs of `cpu`'s node.
    fn node_span(&self, cpu: usize) -> std::ops::Range<usize> {
        let first = cpu / self.per_node * self.per_node;
        first..(first + self.per_node).min(self.ncpus)
    }

    /// Returns the hardware threads to a core (1: each CPU a core).
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Returns whether a core's hardware threads share it (SMT).
    pub fn smt(&self) -> bool {
        self.threads > 1
    }

    /// Returns the hardware threads of `cpu`'s core, in CPU order.
    pub fn core(&self, cpu: usize) -> impl Iterator<Item = usize> {
        let (ncpus, cores) = (self.ncpus, self.per_node / self.threads);
        let (base, core) = (cpu / self.per_node * self.per_node, cpu % self.per_node % cores);
        (0..self.threads).map(move |k| base + k * cores + core).filter(move |&c| c < ncpus)
    }

    /// `find_idlest_group`: the group other than the first (the local one)
    /// the task goes to at `level`, `None` to stay.
    fn idlest_group(&self, level: Level, groups: &[Vec<usize>], cpus: &[CpuLoad]) -> Option<usize> {
        let pct = match level {
            Level::Core => SMT_IMBALANCE_PCT,
            Level::Llc => LLC_IMBALANCE_PCT,
            Level::Node | Level::Machine => self.kernel.upper_imbalance_pct(),
        };
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

/// Returns the cache domain holding `cpu`.
fn llc_span(llcs: &[(u32, u32)], cpu: usize) -> std::ops::Range<usize> {
    llcs.iter()
        .find(|l| (l.0 as usize..l.1 as usize).contains(&cpu))
        .map_or(cpu..cpu + 1, |l| l.0 as usize..l.1 as usize)
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
    let mut rqs = vec![RqAvg::default(); d.ncpus];
    let mut cpus = vec![CpuLoad::default(); d.ncpus];
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
