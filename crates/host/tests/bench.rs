//! Every microbenchmark at `Quick` effort on this host: finite positive
//! figures in order. No test states how fast anything is.

#![cfg(target_os = "linux")]

use std::sync::Mutex;
use tlbkit_host::topology::{format_cpu_list, read_host};
use tlbkit_host::{check_cpus, measure, Bench, Cpus, Effort, Error};

/// One benchmark at a time: they pin threads and spin, and the host's CPUs
/// are few.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Returns the first two online CPUs (`b` = `a` on a one-CPU host).
fn cpus() -> Cpus {
    let online = read_host().unwrap().online;
    Cpus { a: online[0], b: *online.get(1).unwrap_or(&online[0]) }
}

/// Returns the affinity of the calling thread, as the kernel lists it.
fn my_affinity() -> String {
    let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("Cpus_allowed_list:")).unwrap();
    line.to_string()
}

/// Measures `bench` at Quick and checks the figures' shape.
fn quick(bench: Bench) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let cpus = cpus();
    if bench.cpus_used() == 2 && cpus.a == cpus.b {
        assert!(matches!(measure(bench, cpus, Effort::Quick), Err(Error::SameCpu)));
        return;
    }
    let before = my_affinity();
    let m = measure(bench, cpus, Effort::Quick).unwrap_or_else(|e| panic!("{}: {e}", bench.name()));
    assert_eq!(my_affinity(), before, "the caller's affinity is left as it was");
    assert_eq!(m.bench, bench);
    assert_eq!(m.trials, 3);
    assert!(m.ops_per_trial > 0);
    for figure in [m.min, m.median, m.max] {
        assert!(figure.is_finite() && figure > 0.0, "{}: {m:?}", bench.name());
    }
    assert!(m.min <= m.median && m.median <= m.max, "{}: {m:?}", bench.name());
}

macro_rules! quick_tests {
    ($($test:ident: $bench:ident,)*) => {
        $(#[test] fn $test() { quick(Bench::$bench) })*

        #[test]
        fn every_benchmark_has_a_test() {
            assert_eq!(Bench::ALL, [$(Bench::$bench),*]);
        }
    };
}

quick_tests! {
    null_syscall_measures: NullSyscall,
    page_fault_measures: PageFault,
    zeroing_measures: Zeroing,
    zeroing_all_measures: ZeroingAll,
    mmap_measures: Mmap,
    munmap_measures: Munmap,
    madvise_measures: Madvise,
    mprotect_measures: Mprotect,
    pipe_rw_measures: PipeRw,
    pipe_switch_measures: PipeSwitch,
    line_pingpong_measures: LinePingPong,
    atomic_hit_measures: AtomicHit,
    lock_handoff_measures: LockHandoff,
    shootdown_measures: Shootdown,
}

#[test]
fn page_fault_trials_are_whole_16_mib_buffers() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let m = measure(Bench::PageFault, cpus(), Effort::Quick).unwrap();
    // x86's base page is 4 KiB; arm64's may be 16 or 64 KiB.
    if std::env::consts::ARCH == "x86_64" {
        assert_eq!(m.ops_per_trial % 4096, 0, "{m:?}");
    }
}

#[test]
fn a_cpu_that_is_not_online_is_no_such_cpu() {
    let online = read_host().unwrap().online;
    let off = online.last().unwrap() + 1;
    let list = format_cpu_list(&online);
    let no_such = |r: Result<_, Error>| match r {
        Err(Error::NoSuchCpu { cpu, online }) => assert_eq!((cpu, online), (off, list.clone())),
        other => panic!("expected NoSuchCpu, got {other:?}"),
    };
    no_such(measure(Bench::NullSyscall, Cpus { a: off, b: online[0] }, Effort::Quick).map(|_| ()));
    no_such(measure(Bench::LinePingPong, Cpus { a: online[0], b: off }, Effort::Quick).map(|_| ()));
    no_such(check_cpus(Cpus { a: online[0], b: off }));
    no_such(check_cpus(Cpus { a: off, b: online[0] }));
}

#[test]
fn one_cpu_benchmarks_ignore_b() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let a = cpus().a;
    let m = measure(Bench::NullSyscall, Cpus { a, b: 100_000 }, Effort::Quick).unwrap();
    assert_eq!(m.bench, Bench::NullSyscall);
}

#[test]
fn the_same_cpu_twice_is_refused_where_two_are_needed() {
    let a = cpus().a;
    let same = Cpus { a, b: a };
    assert!(matches!(check_cpus(same), Err(Error::SameCpu)));
    for bench in [Bench::LinePingPong, Bench::LockHandoff, Bench::Shootdown] {
        assert!(matches!(measure(bench, same, Effort::Quick), Err(Error::SameCpu)));
    }
}

#[test]
fn two_distinct_online_cpus_pass_the_check() {
    let cpus = cpus();
    if cpus.a != cpus.b {
        check_cpus(cpus).unwrap();
    }
}

#[test]
fn error_texts_are_one_line() {
    let e = Error::NoSuchCpu { cpu: 7, online: "0-1".into() };
    assert_eq!(e.to_string(), "CPU 7 is not online here; the online CPUs are 0-1");
    let e = Error::Io { what: "mmap of 16 pages".into(), source: std::io::Error::from_raw_os_error(12) };
    assert_eq!(e.to_string(), "mmap of 16 pages failed: Cannot allocate memory (os error 12)");
    for e in [e, Error::SameCpu, Error::NotLinux { os: "macos" }] {
        assert!(!e.to_string().contains('\n'));
    }
}
