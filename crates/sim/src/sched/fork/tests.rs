use super::*;
use crate::kernel::Kernel;
use crate::sim::llc_domains as llcs;

#[test]
fn imb_numa_nr_is_an_eighth_of_a_single_cache_package_times_the_nodes() {
    // 2 x 16 cores x 2 threads, one L3 a socket: an eighth of 32, times 2.
    assert_eq!(imb_numa_nr(64, 32, 32), 8);
    // 2 x 26 x 2: 52 >> 3 = 6, times 2.
    assert_eq!(imb_numa_nr(104, 52, 52), 12);
    // Eight cache domains to the package: their count, times 2.
    assert_eq!(imb_numa_nr(128, 64, 8), 16);
    // A small node keeps at least one.
    assert_eq!(imb_numa_nr(8, 4, 4), 2);
}

#[test]
fn v6_spreads_forks_over_both_nodes_once_the_parents_node_runs_two_more() {
    // Two nodes of 16 cores x 2 threads as Linux v6.1 sees them: nodes of
    // 32 CPUs, a core's threads CPU c and c + 16 of its node.
    let numa = NumaFork::for_linux((6, 1), 64, 32, 32);
    assert_eq!(numa, NumaFork::Imbalance { imb_numa_nr: 8 });
    let d = ForkDomains::new(64, 32, 2, numa, Kernel::Linux(6, 1));
    let l = llcs(64, 32, 32);
    let order = fork_order(&d, &l, 12, 0);
    // Two more on node 0, then the nodes in turn (node 0 keeping its lead of
    // two while it runs at most 8), a core's first thread before a second.
    assert_eq!(order, vec![0, 1, 2, 32, 3, 33, 4, 34, 5, 35, 6, 36]);
    // 32 tasks: one on every core, none on a second thread.
    let order = fork_order(&d, &l, 32, 0);
    let cores: std::collections::BTreeSet<usize> = order.iter().map(|&c| c / 32 * 16 + c % 16).collect();
    assert_eq!(cores.len(), 32, "{order:?}");
    // 64: every CPU once.
    let mut all = fork_order(&d, &l, 64, 0);
    all.sort_unstable();
    assert_eq!(all, (0..64).collect::<Vec<_>>());
}

#[test]
fn v5_10_fills_the_parents_node_while_it_has_an_idle_cpu() {
    let numa = NumaFork::for_linux((5, 10), 64, 32, 32);
    assert_eq!(numa, NumaFork::WhileIdle);
    let d = ForkDomains::new(64, 32, 2, numa, Kernel::Linux(5, 10));
    let order = fork_order(&d, &llcs(64, 32, 32), 34, 0);
    // Node 0's cores, then their second threads, then node 1.
    let expect: Vec<usize> = (0..32).chain([32, 33]).collect();
    assert_eq!(order, expect);
}

#[test]
fn one_cache_domain_takes_cpus_in_order_then_doubles_up_from_the_parent() {
    let d = ForkDomains::new(4, 4, 1, NumaFork::WhileIdle, Kernel::Linux(5, 10));
    let l = llcs(4, 4, 4);
    assert_eq!(d.levels(&l, 0), vec![Level::Llc]);
    // Four tasks, one a CPU, each new one's utilisation half of its CPU's
    // spare capacity (512). Every CPU then has spare capacity and none is
    // idle: the fifth stays with the parent (no other group has more idle
    // CPUs). With it the parent's CPU runs 768 of 1,024 (256 more), below
    // 1,024 / 1.17: spare still, and the sixth stays too. With that one's 128
    // its CPU (896, 3 tasks) is overloaded: the seventh goes to the first of
    // the others, the eighth to the least utilised.
    assert_eq!(fork_order(&d, &l, 8, 0), vec![0, 1, 2, 3, 0, 0, 1, 2]);
    // Counting the runnable average (v5.7) changes nothing here: a new
    // task's is its utilisation.
    let v5_4 = ForkDomains::new(4, 4, 1, NumaFork::WhileIdle, Kernel::Linux(5, 4));
    assert_eq!(fork_order(&v5_4, &l, 8, 0), vec![0, 1, 2, 3, 0, 0, 1, 2]);
}

#[test]
fn among_groups_of_equal_idle_cpus_the_least_utilised_takes_the_task() {
    // One cache domain of four CPUs, each running one task: CPU 2's has run
    // least (its utilisation 200 against 900), so a fork from CPU 0 (900 too,
    // fully busy beside CPU 2's spare) goes there; with CPU 0 as idle as any
    // it stays.
    let d = ForkDomains::new(4, 4, 1, NumaFork::WhileIdle, Kernel::Linux(6, 6));
    let l = llcs(4, 4, 4);
    let task = |util: u64| CpuLoad { nr_running: 1, load: 1024, util, runnable: util };
    let cpus = [task(900), task(900), task(200), task(900)];
    assert_eq!(d.find_idlest_cpu(&l, &cpus, 0), 2);
    let cpus = [task(200), task(900), task(200), task(900)];
    assert_eq!(d.find_idlest_cpu(&l, &cpus, 0), 0);
}

#[test]
fn several_cache_domains_take_one_task_each_before_a_second() {
    // Milan-like: 64 cores in cache domains of 8, one node, no SMT.
    let numa = NumaFork::for_linux((6, 15), 64, 64, 8);
    let d = ForkDomains::new(64, 64, 1, numa, Kernel::Linux(6, 15));
    let l = llcs(64, 64, 8);
    assert_eq!(d.levels(&l, 0), vec![Level::Node, Level::Llc]);
    let order = fork_order(&d, &l, 10, 0);
    assert_eq!(order, vec![0, 8, 16, 24, 32, 40, 48, 56, 1, 9]);
}

#[test]
fn a_busy_parent_cpu_sends_the_child_to_an_idle_one() {
    let d = ForkDomains::new(8, 8, 2, NumaFork::WhileIdle, Kernel::Linux(5, 10));
    let l = llcs(8, 8, 8);
    // CPU 5's core is CPUs 1 and 5; CPU 5 runs the parent: the child goes to
    // an idle core, the first round from CPU 5's: CPUs 2 and 6.
    let busy = CpuLoad { nr_running: 1, load: 1024, util: 1024, runnable: 1024 };
    let mut cpus = vec![CpuLoad::default(); 8];
    cpus[5] = busy;
    assert_eq!(d.find_idlest_cpu(&l, &cpus, 5), 2);
    // Every core runs one thread: the parent's core is as idle as any and
    // keeps the child, on the parent's idle sibling, CPU 1.
    let cpus: Vec<CpuLoad> = [0, 0, 1, 1, 1, 1, 0, 0].map(|n| if n == 1 { busy } else { CpuLoad::default() }).into();
    assert_eq!(d.find_idlest_cpu(&l, &cpus, 5), 1);
}
