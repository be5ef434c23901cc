//! A buggy patch is a finding, never the checker's death or hang: policy
//! code that faults (a NULL pointer, a division by zero) is a `no_kernel_bug`
//! violation and code that loops without reaching the machine a
//! `no_livelock` one, each with the function and line and a replay token
//! that replays it (`tlbkit_fault`). The C cases are one-line patches of
//! Linux v6.12's `context.c` (the C tests need a C compiler; without one
//! they say so and check nothing).

use std::path::PathBuf;
use tlbkit_check::options::Options;
use tlbkit_check::run::{check_policy, replay};
use tlbkit_check::CheckReport;
use tlbkit_policy::shootdown::Completion;
use tlbkit_policy::wrap::Wrap;
use tlbkit_policy::{asid::FreebsdX86, Fields, Hw, MmId, Policy, VirtAddr};

use crate::common::{have_cc, small_spec};

/// Writes v6.12's `context.c` with `line` added at the top of
/// `flush_context()`'s body (after its declarations), as `NAME.c` in a
/// directory of this test's, and returns the path and the patched line's number.
fn patched(name: &str, line: &str) -> (PathBuf, usize) {
    let src = format!("{}/../../third_party/linux/v6.12/arch/arm64/mm/context.c", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(src).expect("the shipped v6.12 context.c");
    let head = "static void flush_context(void)\n{\n\tint i;\n\tu64 asid;\n";
    let at = text.find(head).expect("flush_context's opening lines") + head.len();
    let lineno = text[..at].lines().count() + 1;
    let out = format!("{}{line}\n{}", &text[..at], &text[at..]);
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tlbkit-faults-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.c"));
    std::fs::write(&path, out).unwrap();
    (path, lineno)
}

/// `tlbkit check --policy POLICY` with no other flag.
fn default_run(policy: &str) -> CheckReport {
    Options { policy: policy.to_string(), seed: 1, ..Default::default() }
        .run(&mut |_| {})
        .unwrap_or_else(|e| panic!("{policy}: {e}"))
}

/// Asserts that `r` found `property` with `needles` in its detail, and that
/// its token replays the same violation.
fn found(r: &CheckReport, property: &str, needles: &[&str]) {
    let cx = r.counterexample.as_ref().unwrap_or_else(|| panic!("no violation found:\n{}", r.to_text()));
    assert_eq!(cx.property, property, "{}", r.to_text());
    for n in needles {
        assert!(cx.detail.contains(n), "the detail names {n}: {}", cx.detail);
    }
    let again = replay(&cx.token).unwrap_or_else(|e| panic!("replaying {}: {e}", cx.token));
    let re = again.counterexample.unwrap_or_else(|| panic!("the token {} replays no violation", cx.token));
    assert_eq!(
        (re.property, re.cpu, &re.detail),
        (cx.property, cx.cpu, &cx.detail),
        "the token replays another violation"
    );
}

#[test]
fn a_null_write_in_flush_context_is_a_kernel_bug_at_its_line() {
    if !have_cc() {
        return;
    }
    let (path, line) = patched("null_write", "\t*(volatile int *)0 = 1;");
    let t = std::time::Instant::now();
    let r = default_run(&format!("c:{}", path.display()));
    eprintln!("found in {:.1} s (test build)", t.elapsed().as_secs_f64());
    found(
        &r,
        "no_kernel_bug",
        &["SIGSEGV", "a write to address 0x0", "flush_context", &format!("null_write.c:{line}")],
    );
}

#[test]
fn a_search_for_all_violations_goes_on_past_every_fault_and_counts_them_as_one_class() {
    if !have_cc() {
        return;
    }
    let (path, line) = patched("null_write_all", "\t*(volatile int *)0 = 1;");
    let policy = format!("c:{}", path.display());
    // Random schedules of the one-shape defaults, which reach rollovers.
    let mode = Some("random".to_string());
    let o = Options { policy, mode, iterations: Some(2_000), seed: 1, all_violations: true, ..Default::default() };
    let r = o.run(&mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
    // Every schedule ran: the search did not stop at the first fault.
    assert_eq!(r.explored.executions, 2_000, "{}", r.to_text());
    assert!(r.explored.complete, "{}", r.to_text());
    let site = format!("null_write_all.c:{line}");
    let faults: Vec<_> = r.violations.iter().filter(|f| f.class.contains(&site)).collect();
    assert_eq!(faults.len(), 1, "one class for the fault at its line, whatever CPU and schedule:\n{}", r.to_text());
    let f = faults[0];
    assert!(f.executions > 1, "the fault was met again and counted: {}", r.to_text());
    assert_eq!(f.counterexample.property, "no_kernel_bug");
    // The first class is the report's counterexample, and each token replays
    // a violation of its own class.
    assert_eq!(r.counterexample.as_ref(), Some(&r.violations[0].counterexample));
    for f in &r.violations {
        let again = replay(&f.counterexample.token).unwrap_or_else(|e| panic!("{e}"));
        let v = again.counterexample.unwrap_or_else(|| panic!("{} replays no violation", f.counterexample.token));
        let v = tlbkit_check::kernel::Violation { property: v.property, cpu: v.cpu, detail: v.detail };
        assert_eq!(tlbkit_check::report::class_of(&v), f.class, "the token replays another class");
    }
    assert!(r.to_text().contains("all violations: "), "{}", r.to_text());
}

#[test]
fn a_division_by_zero_in_flush_context_is_a_kernel_bug() {
    if !have_cc() {
        return;
    }
    let (path, _) = patched("divide", "\t{ volatile u64 n = 7, zero = 0; volatile u64 q = n / zero; (void)q; }");
    let r = default_run(&format!("c:{}", path.display()));
    found(&r, "no_kernel_bug", &["divided by zero", "divide.c:"]);
}

#[test]
fn an_endless_loop_in_flush_context_is_a_livelock_at_its_function() {
    if !have_cc() {
        return;
    }
    let (path, _) = patched("endless", "\tfor (;;) ;");
    let t = std::time::Instant::now();
    let r = default_run(&format!("c:{}", path.display()));
    eprintln!("found in {:.1} s (test build)", t.elapsed().as_secs_f64());
    // The compiler gives the loop's jump the line of the code it was moved
    // beside (in new_context, where flush_context is inlined).
    found(&r, "no_livelock", &["without reaching the machine", "new_context", "endless.c:"]);
}

/// `x86-freebsd-gen` whose `flush_page` goes wrong: `Panic` panics,
/// `Spin` loops without calling the machine, `Null` writes through NULL.
struct Broken {
    inner: FreebsdX86,
    how: How,
}

#[derive(Clone, Copy)]
enum How {
    Panic,
    Spin,
    Null,
}

impl Wrap for Broken {
    type Inner = FreebsdX86;
    fn inner(&self) -> &FreebsdX86 {
        &self.inner
    }
    fn flush_page<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        match self.how {
            How::Panic => panic!("pmap_invalidate_page: a broken invariant"),
            How::Spin => spin_forever(),
            How::Null => null_write(),
        }
        self.inner.flush_page(hw, mm, va)
    }
    unsafe fn hash_locked(&self, h: &mut dyn std::hash::Hasher) {
        // SAFETY: the caller keeps every CPU out of the policy, as ours.
        unsafe { self.inner.hash_locked(h) }
    }
    fn name_fields(&self, f: &mut dyn Fields) {
        self.inner.name_fields(f)
    }
}

/// Loops until a flag nobody sets is set, touching nothing of the machine's.
#[inline(never)]
fn spin_forever() {
    while !std::hint::black_box(false) {
        std::hint::spin_loop();
    }
}

/// Writes through a NULL pointer.
#[inline(never)]
fn null_write() {
    let p: *mut u32 = std::hint::black_box(std::ptr::null_mut());
    // SAFETY: not safe at all: the test's point is a policy that faults.
    unsafe { p.write_volatile(1) };
}

fn broken(how: How) -> CheckReport {
    let spec = tlbkit_check::spec::default_spec("x86-freebsd-gen");
    let build = || Broken { inner: FreebsdX86::new(spec.cpus, spec.mms + 1, Completion::Generation), how };
    check_policy(&spec, &build).unwrap()
}

#[test]
fn a_rust_policy_that_panics_in_a_hook_is_a_policy_panic() {
    let r = broken(How::Panic);
    let cx = r.counterexample.as_ref().expect("found");
    assert_eq!(cx.property, "no_policy_panic", "{}", r.to_text());
    assert!(cx.detail.contains("pmap_invalidate_page: a broken invariant"), "{}", cx.detail);
}

#[test]
fn a_rust_policy_that_loops_in_a_hook_is_a_livelock_at_its_function() {
    let t = std::time::Instant::now();
    let r = broken(How::Spin);
    eprintln!("found in {:.1} s (test build)", t.elapsed().as_secs_f64());
    let cx = r.counterexample.as_ref().expect("found");
    assert_eq!(cx.property, "no_livelock", "{}", r.to_text());
    assert!(cx.detail.contains("spin_forever"), "{}", cx.detail);
    assert!(cx.detail.contains("faults.rs:"), "{}", cx.detail);
}

#[test]
fn a_rust_policy_that_writes_through_null_is_a_kernel_bug() {
    let r = broken(How::Null);
    let cx = r.counterexample.as_ref().expect("found");
    assert_eq!(cx.property, "no_kernel_bug", "{}", r.to_text());
    assert!(cx.detail.contains("a write to address 0x0") && cx.detail.contains("null_write"), "{}", cx.detail);
}

#[test]
fn the_checker_goes_on_after_a_fault_in_the_same_thread() {
    // The fault's coroutine is abandoned mid-call: the next check on this
    // thread runs as if it had not happened.
    // A complete search of a small shape reaches the same states on a
    // thread no fault touched and on this one, after the fault.
    let spec = small_spec("x86-freebsd-gen", 1, 3);
    let search = move || {
        let build = || FreebsdX86::new(spec.cpus, spec.mms + 1, Completion::Generation);
        let r = check_policy(&spec, &build).unwrap();
        assert!(r.counterexample.is_none() && r.explored.complete, "{}", r.to_text());
        r.explored.states
    };
    let fresh = std::thread::spawn(search.clone()).join().unwrap();
    let faulted = broken(How::Null);
    assert!(faulted.counterexample.is_some());
    assert_eq!(search(), fresh, "the search after the fault reaches what a fresh thread's does");
}
