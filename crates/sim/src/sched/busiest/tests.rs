use super::*;

/// A CPU running `n` tasks that keep it `util` busy, each of load 1024.
fn run(n: u32, util: u64) -> CpuLoad {
    CpuLoad { nr_running: n, load: 1024 * u64::from(n), util, runnable: 1024 * u64::from(n) }
}

/// Groups of one CPU each, `n` of them.
fn singles(n: usize) -> Vec<Range<usize>> {
    (0..n).map(|c| c..c + 1).collect()
}

fn llc<'a>(groups: &'a [Range<usize>], local: usize, kernel: Kernel) -> Domain<'a> {
    Domain {
        groups,
        local,
        level: Level::Llc,
        prefer_sibling: false,
        smt_groups: false,
        numa: None,
        threads: 1,
        kernel,
    }
}

#[test]
fn a_newly_idle_cpu_takes_one_task_from_the_overloaded_cpu() {
    let g = singles(4);
    let cpus = [run(3, 1024), run(1, 1024), run(1, 1024), run(0, 0)];
    for k in [Kernel::Linux(5, 10), Kernel::Linux(6, 1), Kernel::Linux(6, 12)] {
        let imb = find_busiest_group(&llc(&g, 3, k), &cpus, Idle::NewlyIdle).expect("an imbalance");
        // Half the difference in tasks, 3 to none: one.
        assert_eq!(imb, Imbalance { group: 0, kind: Migration::Task, amount: 1 }, "{k:?}");
        assert_eq!(find_busiest_queue(g[0].clone(), &cpus, &imb, k), Some(0));
    }
    // No CPU runs two tasks: nothing to take.
    let cpus = [run(1, 1024), run(1, 1024), run(1, 1024), run(0, 0)];
    assert_eq!(find_busiest_group(&llc(&g, 3, Kernel::Linux(6, 6)), &cpus, Idle::NewlyIdle), None);
}

#[test]
fn a_busy_cpu_takes_load_only_from_an_overloaded_cpu() {
    let g = singles(4);
    // CPU 0 runs two tasks, the others one, all busy: CPU 1 (fully busy)
    // takes load, the lesser of CPU 0's excess over the average (2048 - 1280)
    // and its own shortfall (1280 - 1024).
    let cpus = [run(2, 1024), run(1, 1024), run(1, 1024), run(1, 1024)];
    let imb = find_busiest_group(&llc(&g, 1, Kernel::Linux(6, 6)), &cpus, Idle::Busy);
    assert_eq!(imb, Some(Imbalance { group: 0, kind: Migration::Load, amount: 256 }));
    // One task each: fully busy everywhere, balanced.
    let cpus = [run(1, 1024); 4];
    assert_eq!(find_busiest_group(&llc(&g, 1, Kernel::Linux(6, 6)), &cpus, Idle::Busy), None);
    // Two tasks that sleep enough to leave CPU 0 spare capacity: a busy CPU
    // takes nothing from a group that is not overloaded.
    let sleepy = CpuLoad { nr_running: 2, load: 1200, util: 600, runnable: 700 };
    let cpus = [sleepy, run(1, 1024), run(1, 1024), run(1, 1024)];
    assert_eq!(find_busiest_group(&llc(&g, 1, Kernel::Linux(6, 6)), &cpus, Idle::Busy), None);
}

#[test]
fn an_idle_cache_domain_fills_its_spare_utilisation_from_an_overloaded_one() {
    // Two cache domains of four CPUs; the second idle, the first running
    // five busy tasks (overloaded). The second's newly idle CPU 4 balances
    // the level above: utilisation, up to its whole capacity, from the CPU
    // of the first running two.
    let groups = [0..4, 4..8];
    let cpus = [run(2, 1024), run(1, 1024), run(1, 1024), run(1, 1024), run(0, 0), run(0, 0), run(0, 0), run(0, 0)];
    let level = Domain { level: Level::Node, prefer_sibling: true, local: 1, ..llc(&groups, 1, Kernel::Linux(6, 6)) };
    let imb = find_busiest_group(&level, &cpus, Idle::NewlyIdle).expect("an imbalance");
    assert_eq!(imb, Imbalance { group: 0, kind: Migration::Util, amount: 4096 });
    assert_eq!(find_busiest_queue(groups[0].clone(), &cpus, &imb, Kernel::Linux(6, 6)), Some(0));
}

#[test]
fn a_numa_level_allows_a_lightly_loaded_node_its_small_lead() {
    // Two nodes of four CPUs; node 0 runs two tasks (spare capacity), node 1
    // is idle. v6.1: node 1 would run 1 <= imb_numa_nr with one task and the
    // imbalance (1) is within NUMA_IMBALANCE_MIN: balanced. v5.10: the busier
    // node runs no more than two: balanced too.
    let groups = [0..4, 4..8];
    let cpus = [run(1, 1024), run(1, 1024), run(0, 0), run(0, 0), run(0, 0), run(0, 0), run(0, 0), run(0, 0)];
    for k in [Kernel::Linux(5, 10), Kernel::Linux(6, 1)] {
        let level = Domain {
            level: Level::Machine,
            prefer_sibling: true,
            numa: Some(4),
            local: 1,
            ..llc(&groups, 1, Kernel::Linux(6, 1))
        };
        let level = Domain { kernel: k, ..level };
        assert_eq!(find_busiest_group(&level, &cpus, Idle::NewlyIdle), None, "{k:?}");
    }
    // Without the NUMA allowance the idle node takes one (half of 2 - 0).
    let level =
        Domain { level: Level::Machine, prefer_sibling: true, local: 1, ..llc(&groups, 1, Kernel::Linux(6, 1)) };
    let imb = find_busiest_group(&level, &cpus, Idle::NewlyIdle);
    assert_eq!(imb, Some(Imbalance { group: 0, kind: Migration::Task, amount: 1 }));
}

#[test]
fn by_load_a_cpu_running_one_task_heavier_than_the_imbalance_is_passed_over() {
    let cpus = [run(1, 1024), run(2, 1024)];
    let imb = Imbalance { group: 0, kind: Migration::Load, amount: 512 };
    assert_eq!(find_busiest_queue(0..2, &cpus, &imb, Kernel::Linux(6, 6)), Some(1));
    let cpus = [run(1, 1024), CpuLoad { nr_running: 1, load: 400, util: 400, runnable: 400 }];
    assert_eq!(find_busiest_queue(0..2, &cpus, &imb, Kernel::Linux(6, 6)), Some(1));
}
