//! A scheduling group's figures and type, as fork placement
//! (`update_sg_wakeup_stats`) and the load balancer (`update_sg_lb_stats`)
//! read them: Linux's `struct sg_lb_stats` and `group_classify` from Vincent
//! Guittot's rework of the load balancer (0b0695f2b34a, v5.5), over each
//! CPU's PELT averages ([`super::pelt`]).
//!
//! A group's capacity is 1,024 a CPU (every modelled CPU runs at full
//! capacity: no asymmetric cores, no frequency scaling, no capacity taken by
//! interrupts or other classes). Its type:
//! - **overloaded** when it runs more tasks than it has CPUs and its
//!   utilisation or its runnable average passes its capacity by the
//!   domain's `imbalance_pct` (`group_is_overloaded`);
//! - **fully busy** when it has no capacity to spare: as many tasks as CPUs
//!   or more, and its runnable average past its capacity by `imbalance_pct`
//!   or its utilisation within `imbalance_pct` of it (`group_has_capacity`);
//!   the runnable average is read from v5.7 (070f5e860ee2 "sched/fair: Take
//!   into account runnable_avg to classify group"), the utilisation alone
//!   before;
//! - **has spare** otherwise: fewer tasks than CPUs, or tasks that sleep
//!   enough to leave capacity free.
//!
//! Of the types between fully busy and overloaded, the balancer sets SMT
//! balance ([`super::busiest`]); the others (misfit, asymmetric packing,
//! imbalanced by affinity) need what the model lacks (cores of different
//! capacities, `SD_ASYM_PACKING`, tasks bound to some CPUs of a group) and
//! are not told apart.

use crate::kernel::Kernel;

/// The capacity of one CPU, and the load of a nice-0 task
/// (`SCHED_CAPACITY_SCALE`, `scale_load_down(NICE_0_LOAD)`).
pub const SCALE: u64 = 1024;

/// One CPU's figures as a balance reads them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuLoad {
    /// Tasks queued or running (`rq->nr_running`).
    pub nr_running: u32,
    /// Its fair queue's load average (`cpu_load`).
    pub load: u64,
    /// Its utilisation, at most its capacity (`cpu_util_cfs`).
    pub util: u64,
    /// Its fair queue's runnable average (`cpu_runnable`).
    pub runnable: u64,
}

impl CpuLoad {
    /// Returns whether it runs nothing (`available_idle_cpu`, no wake-up
    /// pending).
    pub fn idle(&self) -> bool {
        self.nr_running == 0
    }
}

/// A group's type, in the kernel's order: a later one is busier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum GroupType {
    /// Capacity to spare (`group_has_spare`).
    HasSpare,
    /// No capacity to spare, and no more tasks than it can run
    /// (`group_fully_busy`).
    FullyBusy,
    /// A core's threads running more than one task while the balancing CPU
    /// is idle (`group_smt_balance`, v6.6 on: fee1759e4f04): set by the
    /// balancer ([`super::busiest`]), never by [`GroupStats::of`].
    SmtBalance,
    /// More tasks than it can run (`group_overloaded`).
    Overloaded,
}

/// Which path reads a group, for when its average load is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reader {
    /// Fork placement (`update_sg_wakeup_stats`): the average load of a group
    /// fully busy or overloaded.
    Wakeup,
    /// The load balancer (`update_sg_lb_stats`): of an overloaded group only
    /// (0 otherwise, as the kernel leaves it, until `calculate_imbalance`
    /// computes the local group's).
    Balance,
}

/// One group's figures (`struct sg_lb_stats`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupStats {
    /// Its CPUs (`group_weight`).
    pub weight: u32,
    /// Tasks queued or running on them (`sum_nr_running`).
    pub nr_running: u32,
    /// Its CPUs that run nothing (`idle_cpus`).
    pub idle_cpus: u32,
    /// The sum of its CPUs' load averages (`group_load`).
    pub load: u64,
    /// The sum of their utilisations (`group_util`).
    pub util: u64,
    /// The sum of their runnable averages (`group_runnable`).
    pub runnable: u64,
    /// Its type.
    pub kind: GroupType,
    /// Its load over its capacity, times [`SCALE`] (`avg_load`), where its
    /// [`Reader`] computes it; 0 elsewhere.
    pub avg_load: u64,
}

impl GroupStats {
    /// Returns the figures of a group of the CPUs `cpus`, in a domain of
    /// `imbalance_pct`, as `reader` computes them under `kernel`.
    pub fn of(cpus: impl IntoIterator<Item = CpuLoad>, imbalance_pct: u64, reader: Reader, kernel: Kernel) -> Self {
        let mut s = GroupStats {
            weight: 0,
            nr_running: 0,
            idle_cpus: 0,
            load: 0,
            util: 0,
            runnable: 0,
            kind: GroupType::HasSpare,
            avg_load: 0,
        };
        for c in cpus {
            s.weight += 1;
            s.nr_running += c.nr_running;
            s.idle_cpus += u32::from(c.idle());
            s.load += c.load;
            s.util += c.util;
            s.runnable += c.runnable;
        }
        s.kind = s.classify(imbalance_pct, kernel.group_runnable());
        let averaged = match reader {
            Reader::Wakeup => s.kind >= GroupType::FullyBusy,
            Reader::Balance => s.kind == GroupType::Overloaded,
        };
        if averaged {
            s.avg_load = s.load_per_capacity();
        }
        s
    }

    /// Its capacity (`group_capacity`).
    pub fn capacity(&self) -> u64 {
        u64::from(self.weight.max(1)) * SCALE
    }

    /// Its load over its capacity, times [`SCALE`].
    pub fn load_per_capacity(&self) -> u64 {
        self.load * SCALE / self.capacity()
    }

    /// `group_classify`, of the types the model tells apart, reading the
    /// runnable average where `runnable`.
    fn classify(&self, pct: u64, runnable: bool) -> GroupType {
        if self.is_overloaded(pct, runnable) {
            GroupType::Overloaded
        } else if !self.has_capacity(pct, runnable) {
            GroupType::FullyBusy
        } else {
            GroupType::HasSpare
        }
    }

    /// `group_has_capacity`.
    fn has_capacity(&self, pct: u64, runnable: bool) -> bool {
        if self.nr_running < self.weight {
            return true;
        }
        if runnable && self.capacity() * pct < self.runnable * 100 {
            return false;
        }
        self.capacity() * 100 > self.util * pct
    }

    /// `group_is_overloaded`.
    fn is_overloaded(&self, pct: u64, runnable: bool) -> bool {
        if self.nr_running <= self.weight {
            return false;
        }
        self.capacity() * 100 < self.util * pct || (runnable && self.capacity() * pct < self.runnable * 100)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(nr_running: u32, util: u64, runnable: u64) -> CpuLoad {
        CpuLoad { nr_running, load: 1024 * u64::from(nr_running), util, runnable }
    }

    #[test]
    fn a_group_is_typed_by_its_tasks_then_its_utilisation_and_runnable_average() {
        let v6 = Kernel::Linux(6, 6);
        let of = |cpus: &[CpuLoad]| GroupStats::of(cpus.iter().copied(), 117, Reader::Balance, v6).kind;
        // Fewer tasks than CPUs: spare, however busy.
        assert_eq!(of(&[cpu(1, 1024, 1024), cpu(0, 0, 0)]), GroupType::HasSpare);
        // As many: fully busy once the utilisation is within 117% of the
        // capacity (2048 * 100 <= 1751 * 117), spare below it.
        assert_eq!(of(&[cpu(1, 900, 900), cpu(1, 851, 851)]), GroupType::FullyBusy);
        assert_eq!(of(&[cpu(1, 900, 900), cpu(1, 850, 850)]), GroupType::HasSpare);
        // More tasks than CPUs that sleep enough: spare; that run: overloaded.
        assert_eq!(of(&[cpu(2, 300, 400), cpu(1, 200, 200)]), GroupType::HasSpare);
        assert_eq!(of(&[cpu(2, 1024, 2048), cpu(1, 1024, 1024)]), GroupType::Overloaded);
        // Runnable tasks waiting past the capacity: overloaded though the
        // utilisation is low (tasks that wait more than they run), from v5.7.
        assert_eq!(of(&[cpu(3, 500, 2500)]), GroupType::Overloaded);
        let v5_4 = GroupStats::of([cpu(3, 500, 2500)], 117, Reader::Balance, Kernel::Linux(5, 4));
        assert_eq!(v5_4.kind, GroupType::HasSpare);
    }

    #[test]
    fn the_average_load_is_computed_where_each_reader_computes_it() {
        let v6 = Kernel::Linux(6, 6);
        let busy = [cpu(1, 1024, 1024), cpu(1, 1024, 1024)];
        let w = GroupStats::of(busy, 117, Reader::Wakeup, v6);
        let b = GroupStats::of(busy, 117, Reader::Balance, v6);
        assert_eq!((w.kind, w.avg_load), (GroupType::FullyBusy, 1024));
        assert_eq!((b.kind, b.avg_load), (GroupType::FullyBusy, 0));
        let over = [cpu(3, 1024, 3072), cpu(1, 1024, 1024)];
        assert_eq!(GroupStats::of(over, 117, Reader::Balance, v6).avg_load, 2048);
        assert_eq!(GroupStats::of(over, 117, Reader::Balance, v6).idle_cpus, 0);
    }
}
