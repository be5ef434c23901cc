//! The workloads added for the predictions of later mechanisms: `lat_proc`
//! (lmbench's fork), `buildkernel`'s kernel time, `madvise_bench`'s calls in
//! chunks and its `munmap`, and `flush_range` (an `mprotect`'s range flush by
//! its page count). Each runs clean under `--strict` and does what its
//! documentation says.

use crate::common::{run_alone, run_clean, spec};
use tlbkit_policy::asid::LinuxArm64;
use tlbkit_sim::preset;
use tlbkit_sim::program::{Op, Program, Sys};
use tlbkit_sim::run::RunOutput;
use tlbkit_sim::sim::{Sim, SimConfig};
use tlbkit_sim::workload::{self, Params, Phase};

/// Runs `workload` with `sets` on `cpus` CPUs of `graviton4` under `policy`,
/// strict; returns the output after checking it found no violation.
fn graviton4(policy: &str, workload: &str, cpus: usize, sets: &[&str]) -> RunOutput {
    let spec = spec("graviton4", cpus, policy, workload, sets);
    let out = run_clean(&spec);
    for (k, v) in &out.result {
        assert!(v.is_finite() && *v > 0.0, "{}: {k} = {v}", spec.command());
    }
    out
}

/// Returns workload `name`'s parameters: its defaults with `set` applied.
fn params(name: &str, set: &[(&str, f64)]) -> Params {
    let mut p: Params =
        workload::by_name(name).unwrap().params.iter().map(|d| (d.key.to_string(), d.default)).collect();
    for (k, v) in set {
        assert!(p.insert(k.to_string(), *v).is_some(), "{name} has no parameter {k}");
    }
    p
}

/// Runs `name` with `set` on a quiet 4-CPU `graviton4` under stock arm64 Linux.
fn sim_of(name: &str, set: &[(&str, f64)]) -> Sim {
    let cfg = SimConfig { max_mms: 16, max_events: 5_000_000, ..SimConfig::quiet(preset::named("graviton4"), 4, 1) };
    let mut sim = Sim::new(cfg, LinuxArm64::new(4, 16, 16, false).unwrap());
    workload::setup(name, &params(name, set), &mut sim, Phase::Main).unwrap();
    sim.run();
    assert!(sim.error.is_none(), "{:?}", sim.error);
    sim
}

#[test]
fn lat_proc_forks_once_per_iteration_and_each_child_exits() {
    let out = graviton4("arm64-linux", "lat_proc", 4, &["iters=3"]);
    assert!(out.result.contains_key("us_per_fork"));
    let sim = sim_of("lat_proc", &[("iters", 3.0)]);
    // The warm-up child, three timed ones and the parent.
    assert_eq!(sim.stats.contpte.exits, 5);
    let sim = sim_of("lat_proc", &[("iters", 3.0), ("extra_kb", 64.0)]);
    assert_eq!(sim.stats.contpte.exits, 5);
}

#[test]
fn a_larger_parent_makes_each_fork_copy_and_protect_more() {
    let base = graviton4("arm64-linux", "lat_proc", 2, &["iters=4"]).result["us_per_fork"];
    let big = graviton4("arm64-linux", "lat_proc", 2, &["iters=4", "extra_kb=4096"]).result["us_per_fork"];
    assert!(big > base, "a 4 MB larger parent forks in {big} us, the default in {base} us");
}

/// A child that marks, then exits with [`Op::ExitNotify`] on the pipe.
struct Child(u32, u8);

impl Program for Child {
    fn next(&mut self, _: u64) -> Op {
        self.1 += 1;
        match self.1 {
            1 => Op::Touch { va: tlbkit_sim::program::STACK_VA, pages: 1, write: true },
            2 => Op::Mark("exiting"),
            _ => Op::ExitNotify(self.0),
        }
    }
}

/// A parent that writes its stack, forks [`Child`] and waits for it on a pipe.
struct Parent(u32, u8);

impl Program for Parent {
    fn next(&mut self, ret: u64) -> Op {
        self.1 += 1;
        match self.1 {
            1 => Op::Touch { va: tlbkit_sim::program::STACK_VA, pages: 4, write: true },
            2 => Op::Sys(Sys::Pipe),
            3 => {
                self.0 = ret as u32;
                Op::Sys(Sys::Fork(Box::new(Child(self.0, 0))))
            }
            4 => Op::Sys(Sys::PipeRead(self.0)),
            5 => Op::Mark("woken"),
            _ => Op::Exit,
        }
    }
}

#[test]
fn exit_notify_wakes_the_waiting_parent_only_after_the_child_s_teardown() {
    let cfg = SimConfig { max_mms: 8, max_events: 100_000, ..SimConfig::quiet(preset::named("graviton4"), 2, 1) };
    let sim = run_alone(cfg, LinuxArm64::new(2, 16, 16, false).unwrap(), Box::new(Parent(0, 0)));
    assert!(sim.error.is_none(), "{:?}", sim.error);
    let (exiting, woken) = (sim.mark("exiting").unwrap(), sim.mark("woken").unwrap());
    let at_wake = sim.mark_stats("woken").unwrap();
    assert_eq!(at_wake.contpte.exits, 1, "the child's address space was torn down before the parent ran");
    assert!(at_wake.contpte.exit_teardown_cycles > 0);
    assert!(
        woken >= exiting + at_wake.contpte.exit_teardown_cycles,
        "woken at {woken}, the child started exiting at {exiting} and tore down for {}",
        at_wake.contpte.exit_teardown_cycles
    );
    assert_eq!(sim.stats.contpte.exits, 2);
}

#[test]
fn buildkernel_reports_kernel_time_below_all_cpu_time() {
    let sets = [
        "jobs=4",
        "units=2",
        "compute_ms=1",
        "slices=4",
        "text_pages=512",
        "text_ws=32",
        "heap_pages=192",
        "heap_ws=64",
    ];
    let cpus = 4;
    let out = graviton4("arm64-linux", "buildkernel", cpus, &sets);
    let (elapsed, sys) = (out.result["elapsed_s"], out.result["sys_s"]);
    // Four compilations at once of 1 ms of computation each: the kernel's
    // share (exec, faults of a 2 MB heap and the text, exits) is a part.
    assert!(sys > 0.0 && sys < elapsed * cpus as f64, "sys {sys} s of {elapsed} s on {cpus} CPUs");
    let compute = 8.0 * 1e-3;
    assert!(sys < elapsed * cpus as f64 - compute * 0.9, "sys {sys} s leaves no room for 8 ms of computation");
}

#[test]
fn madvise_bench_in_chunks_makes_one_call_per_chunk_and_sums_them_per_range() {
    // 1 MB: 256 pages.
    for (chunk_kb, calls) in [(0.0, 1), (4.0, 256), (64.0, 16), (6.0, 128)] {
        let sim = sim_of("madvise_bench", &[("size_mb", 1.0), ("iters", 2.0), ("advice", 1.0), ("chunk_kb", chunk_kb)]);
        let starts = sim.marks.iter().filter(|(n, ..)| *n == "call_start").count();
        assert_eq!(starts, 2 * calls, "chunk_kb={chunk_kb}");
        // Each iteration: mmap, the calls, munmap.
        assert_eq!(sim.stats.syscalls, 2 * (calls as u64 + 2), "chunk_kb={chunk_kb}");
        let r = workload::result(
            "madvise_bench",
            &params("madvise_bench", &[("iters", 2.0), ("chunk_kb", chunk_kb)]),
            &sim,
            None,
        )
        .unwrap();
        let (ms, us) = (r["ms_per_call"], r["us_per_call"]);
        assert!((ms * 1e3 - us * calls as f64).abs() < 1e-9 * ms * 1e3, "chunk_kb={chunk_kb}: {ms} ms, {us} us");
    }
}

#[test]
fn madvise_bench_munmap_unmaps_the_range_in_its_timed_calls_and_nothing_after() {
    for (chunk_kb, calls) in [(0.0, 1), (64.0, 16)] {
        let sim = sim_of("madvise_bench", &[("size_mb", 1.0), ("iters", 3.0), ("advice", 2.0), ("chunk_kb", chunk_kb)]);
        // Each iteration: mmap and the calls, which leave nothing to unmap.
        assert_eq!(sim.stats.syscalls, 3 * (calls + 1), "chunk_kb={chunk_kb}");
    }
    let out = graviton4(
        "arm64-linux",
        "madvise_bench",
        2,
        &["size_mb=1", "iters=2", "advice=2", "chunk_kb=4", "contpte=on", "teardown=noopt"],
    );
    assert!(out.result["us_per_call"] < out.result["ms_per_call"] * 1e3);
}

/// Returns what each timed `mprotect` of `flush_range` with `pages` adds to a
/// run's broadcast and local invalidations on 4 CPUs of `graviton4` under
/// `policy` with `tlbi_range` `range`.
fn per_call(policy: &str, pages: u64, range: &str) -> (u64, u64) {
    let with = |iters: u64| {
        let sets = [format!("pages={pages}"), format!("iters={iters}"), format!("tlbi_range={range}")];
        let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
        graviton4(policy, "flush_range", 4, &sets).metrics
    };
    let (a, b) = (with(2), with(4));
    let calls = 4;
    let (bcast, local) =
        (b.broadcast_invalidations - a.broadcast_invalidations, b.local_invalidations - a.local_invalidations);
    assert_eq!((bcast % calls, local % calls), (0, 0), "pages={pages} tlbi_range={range}");
    (bcast / calls, local / calls)
}

#[test]
fn flush_range_issues_linux_s_tlbis_per_call_for_each_page_count() {
    // (pages, TLBIs without range operations, with them).
    for (pages, off, on) in [(1, 1, 1), (2, 2, 1), (16, 16, 1), (65, 65, 2), (511, 511, 3), (512, 1, 1)] {
        assert_eq!(per_call("arm64-linux", pages, "off"), (off, 0), "pages={pages}, tlbi_range=off");
        assert_eq!(per_call("arm64-linux", pages, "on"), (on, 0), "pages={pages}, tlbi_range=on");
    }
}

#[test]
fn flush_range_s_spinners_keep_the_flushes_broadcast_under_active_cpu() {
    assert_eq!(per_call("arm64-linux-activecpu", 16, "on"), (1, 0));
    // Without them (one CPU's worth), the address space has run on one CPU only.
    let one = graviton4("arm64-linux-activecpu", "flush_range", 1, &["pages=16", "iters=2"]).metrics;
    assert_eq!(one.broadcast_invalidations, 0);
}
