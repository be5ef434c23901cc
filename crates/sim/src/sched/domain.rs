//! The machine's scheduling domains (`build_sched_domains` over x86's and
//! arm64's default topology, `kernel/sched/topology.c`): which CPUs each
//! level of a CPU spans and its groups, as fork placement
//! ([`super::fork`]), wake-affine's bias and the load balancer
//! (`sim/balance.rs`) read them.
//!
//! The levels, from the bottom ([`Level`]):
//! - a core (SMT, `cpu_smt_mask`): its hardware threads, each a group;
//! - a cache domain (MC, `cpu_coregroup_mask`: the CPUs sharing a last-level
//!   cache): its cores (with SMT) or CPUs;
//! - a node (the package: the model's sockets are its NUMA nodes): its cache
//!   domains;
//! - the machine (a NUMA level): its nodes.
//!
//! A level of one group is left out, as the kernel removes degenerate
//! domains. A level's groups are listed from the group of the CPU whose
//! domain it is, then on in CPU order round the level (`build_sched_groups`'
//! `for_each_cpu_wrap`); a walk that takes the first of equal candidates
//! takes it in that order.
//!
//! CPUs are numbered as Linux numbers them: a node's cores' first threads,
//! then their second ones (`CoreThreads::siblings`), so a core's threads of
//! node CPUs `l` and `l + per_node / threads`.

use crate::kernel::Kernel;
use std::ops::Range;

/// A level of the machine's scheduling domains, from the bottom (its
/// `usize` value indexes per-level records).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// A core (`SD_SHARE_CPUCAPACITY`); its groups are its hardware threads.
    Core,
    /// A cache domain (`SD_SHARE_PKG_RESOURCES`, `SD_SHARE_LLC` from v6.10);
    /// its groups are its cores (with SMT) or CPUs.
    Llc,
    /// A node (the package); its groups are its cache domains.
    Node,
    /// The whole machine (`SD_NUMA`); its groups are the NUMA nodes.
    Machine,
}

/// The number of [`Level`]s.
pub const LEVELS: usize = 4;

impl Level {
    /// Every level, from the bottom.
    pub const ALL: [Level; LEVELS] = [Level::Core, Level::Llc, Level::Node, Level::Machine];

    /// Returns whether the level's CPUs share a cache (`SD_SHARE_PKG_RESOURCES`:
    /// a core's threads and a cache domain).
    pub fn shares_cache(self) -> bool {
        self <= Level::Llc
    }
}

impl Kernel {
    /// Returns `sd->imbalance_pct` at `level` (`sd_init`): 110 at a core, 117
    /// at a cache domain in every version, and above it
    /// [`Kernel::upper_imbalance_pct`].
    pub fn imbalance_pct(self, level: Level) -> u64 {
        match level {
            Level::Core => super::SMT_IMBALANCE_PCT,
            Level::Llc => super::LLC_IMBALANCE_PCT,
            Level::Node | Level::Machine => self.upper_imbalance_pct(),
        }
    }

    /// Returns `sd->cache_nice_tries` at `level` (`sd_init`): none at a core,
    /// 1 at a cache domain and the package, 2 at a NUMA level.
    pub fn cache_nice_tries(self, level: Level) -> u8 {
        match level {
            Level::Core => 0,
            Level::Llc | Level::Node => 1,
            Level::Machine => 2,
        }
    }
}

/// The domains of a machine of `ncpus` CPUs, `per_node` to a node and
/// `threads` to a core, with its cache domains given by the caller (`llcs`:
/// per domain its first CPU and one past its last).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Domains {
    /// CPUs of the run.
    ncpus: usize,
    /// CPUs to a NUMA node (a socket of the model), numbered together.
    per_node: usize,
    /// Hardware threads to a core that share it (1: each CPU a core).
    threads: usize,
}

impl Domains {
    /// Returns the domains of a run of `ncpus` CPUs, `per_node` to a node,
    /// `threads` to a core (taken as 1 where a node's CPUs are not whole
    /// cores).
    pub fn new(ncpus: usize, per_node: usize, threads: usize) -> Self {
        let per_node = per_node.max(1);
        let threads = if threads > 1 && per_node.is_multiple_of(threads) { threads } else { 1 };
        Domains { ncpus, per_node, threads }
    }

    /// Returns the CPUs of the run.
    pub fn ncpus(&self) -> usize {
        self.ncpus
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
    pub fn core(&self, cpu: usize) -> impl Iterator<Item = usize> + Clone {
        let (ncpus, cores) = (self.ncpus, self.per_node / self.threads);
        let (base, core) = (cpu / self.per_node * self.per_node, cpu % self.per_node % cores);
        (0..self.threads).map(move |k| base + k * cores + core).filter(move |&c| c < ncpus)
    }

    /// Returns the CPUs of `cpu`'s node.
    pub fn node(&self, cpu: usize) -> Range<usize> {
        let first = cpu / self.per_node * self.per_node;
        first..(first + self.per_node).min(self.ncpus)
    }

    /// Returns the levels of `cpu`'s domains with more than one group, from
    /// the bottom.
    pub fn levels(&self, llcs: &[(u32, u32)], cpu: usize) -> Vec<Level> {
        Level::ALL.into_iter().filter(|&l| self.exists(l, llcs, cpu)).collect()
    }

    /// Returns whether `cpu`'s domain at `level` has more than one group.
    pub fn exists(&self, level: Level, llcs: &[(u32, u32)], cpu: usize) -> bool {
        match level {
            Level::Core => self.core(cpu).nth(1).is_some(),
            Level::Llc => {
                let llc = llc_span(llcs, cpu);
                self.child_span(Level::Llc, llc.start, llcs).len() < llc.len()
            }
            Level::Node => llcs.iter().filter(|l| self.node(cpu).contains(&(l.0 as usize))).nth(1).is_some(),
            Level::Machine => self.ncpus > self.per_node,
        }
    }

    /// Returns whether `cpu`'s domains below `level` include one with more
    /// than one group: `level`'s groups then have a domain of their own,
    /// which carries `SD_PREFER_SIBLING` unless it is a NUMA level (it never
    /// is here), so a balance at `level` prefers siblings
    /// (`sds->prefer_sibling`).
    pub fn has_child(&self, level: Level, llcs: &[(u32, u32)], cpu: usize) -> bool {
        Level::ALL.into_iter().take_while(|&l| l < level).any(|l| self.exists(l, llcs, cpu))
    }

    /// Returns how many CPUs `cpu`'s domain at `level` spans (`sd_weight`).
    pub fn weight(&self, level: Level, cpu: usize, llcs: &[(u32, u32)]) -> usize {
        match level {
            Level::Core => self.core(cpu).count(),
            Level::Llc => llc_span(llcs, cpu).len(),
            Level::Node => self.node(cpu).len(),
            Level::Machine => self.ncpus,
        }
    }

    /// Returns the CPUs of `cpu`'s domain at `level`.
    pub fn span(&self, level: Level, cpu: usize, llcs: &[(u32, u32)]) -> Vec<usize> {
        match level {
            Level::Machine => (0..self.ncpus).collect(),
            Level::Node => self.node(cpu).collect(),
            Level::Llc => llc_span(llcs, cpu).collect(),
            Level::Core => self.core(cpu).collect(),
        }
    }

    /// Returns the groups of `cpu`'s domain at `level`: its own first, then
    /// on round the domain in CPU order.
    pub fn groups(&self, level: Level, cpu: usize, llcs: &[(u32, u32)]) -> Vec<Vec<usize>> {
        let span = self.span(level, cpu, llcs);
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
            Level::Machine => self.node(cpu).collect(),
            Level::Node => llc_span(llcs, cpu).collect(),
            Level::Llc if self.threads > 1 => {
                let llc = llc_span(llcs, cpu);
                self.core(cpu).filter(|c| llc.contains(c)).collect()
            }
            Level::Llc | Level::Core => vec![cpu],
        }
    }

    /// Returns the lowest level of `a`'s domains that holds `b` (the machine
    /// when none below does).
    pub fn lowest_common(&self, a: usize, b: usize, llcs: &[(u32, u32)]) -> Level {
        if self.core(a).any(|c| c == b) {
            Level::Core
        } else if llc_span(llcs, a).contains(&b) {
            Level::Llc
        } else if self.node(a).contains(&b) {
            Level::Node
        } else {
            Level::Machine
        }
    }
}

/// Returns the cache domain holding `cpu`.
pub fn llc_span(llcs: &[(u32, u32)], cpu: usize) -> Range<usize> {
    llcs.iter()
        .find(|l| (l.0 as usize..l.1 as usize).contains(&cpu))
        .map_or(cpu..cpu + 1, |l| l.0 as usize..l.1 as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::llc_domains;

    #[test]
    fn an_smt_machines_cache_domain_groups_its_cores_and_each_core_its_threads() {
        // Two nodes of 8 CPUs, 4 cores of 2 threads each, one L3 a node.
        let d = Domains::new(16, 8, 2);
        let l = llc_domains(16, 8, 8);
        assert_eq!(d.levels(&l, 1), vec![Level::Core, Level::Llc, Level::Machine]);
        assert_eq!(d.groups(Level::Core, 5, &l), vec![vec![5], vec![1]]);
        assert_eq!(d.groups(Level::Llc, 2, &l), vec![vec![2, 6], vec![3, 7], vec![0, 4], vec![1, 5]]);
        assert_eq!(d.groups(Level::Machine, 9, &l), vec![(8..16).collect::<Vec<_>>(), (0..8).collect()]);
        assert!(!d.has_child(Level::Core, &l, 1) && d.has_child(Level::Llc, &l, 1));
        assert_eq!(d.lowest_common(1, 5, &l), Level::Core);
        assert_eq!(d.lowest_common(1, 9, &l), Level::Machine);
    }

    #[test]
    fn without_smt_the_cache_domain_is_the_lowest_level_and_prefers_no_siblings() {
        // One node of 16 CPUs in two cache domains of 8.
        let d = Domains::new(16, 16, 1);
        let l = llc_domains(16, 16, 8);
        assert_eq!(d.levels(&l, 3), vec![Level::Llc, Level::Node]);
        assert!(!d.has_child(Level::Llc, &l, 3) && d.has_child(Level::Node, &l, 3));
        assert_eq!(d.groups(Level::Node, 9, &l), vec![(8..16).collect::<Vec<_>>(), (0..8).collect()]);
        assert_eq!(Kernel::Linux(6, 6).imbalance_pct(Level::Core), 110);
        assert_eq!(Kernel::Linux(5, 4).imbalance_pct(Level::Machine), 125);
        assert_eq!(Kernel::Linux(6, 6).cache_nice_tries(Level::Machine), 2);
    }
}
