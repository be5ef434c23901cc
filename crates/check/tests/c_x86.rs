//! x86 C policies under the checker: the kernel's own `arch/x86/mm/tlb.c`,
//! compiled against the x86 shims and checked as written.
//!
//! Every test needs a C compiler; without one it says so and checks nothing.
//! The kernel file is test data of `crates/c/tests/linux` (GPL-2.0, see its
//! README); the one with a fix taken out is made from it here, in the
//! target's temporary directory.

use tlbkit_check::run::{check, replay};
use tlbkit_check::spec::{default_spec, Mode};
use tlbkit_check::CheckSpec;

use crate::common::{default_run, have_cc};

/// v6.18.2's `arch/x86/mm/tlb.c`, as its path.
fn today_path() -> String {
    format!("{}/../c/tests/linux/v6.18.2/arch/x86/mm/tlb.c", env!("CARGO_MANIFEST_DIR"))
}

/// Today's file (v6.18.2) as a policy.
fn today() -> String {
    format!("c:{}", today_path())
}

/// Writes `text` as `tlb.c` in a directory of its own named for `tag`;
/// returns the policy that names it.
fn write_tlb(tag: &str, text: &str) -> String {
    let dir =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tlbkit-x86-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tlb.c");
    std::fs::write(&path, text).unwrap();
    format!("c:{}", path.display())
}

/// 2 CPUs, 3 address spaces of one page, `ops` operations, exhaustive.
fn bounds(policy: &str, ops: usize) -> CheckSpec {
    let d = default_spec(policy);
    CheckSpec { cpus: 2, mms: 3, ops, pages: 1, mode: Mode::Exhaustive, iterations: u64::MAX, ..d }
}

#[test]
fn todays_file_passes_the_default_portfolio_and_a_complete_search() {
    if !have_cc() {
        return;
    }
    let r = default_run(&today());
    assert!(r.counterexample.is_none(), "{}", r.to_text());
    assert!(r.properties.contains(&"no_data_race") && r.properties.contains(&"no_kernel_bug"));
    // The report names the file's code that ran: the switch and the flush.
    let text = r.to_text();
    assert!(text.contains("code reached: ") && text.contains("tlb.c"), "{text}");
    let r = check(&bounds(&today(), 3)).unwrap();
    assert!(r.explored.complete && r.counterexample.is_none(), "{}", r.to_text());
    assert!(r.explored.states > 1_000, "a search too small to tell: {} states", r.explored.states);
}

/// 83b0177a6c48 ("x86/mm: Fix SMP ordering in switch_mm_irqs_off()",
/// v6.18) added the `smp_mb()` when this CPU's bit in the mm's mask is
/// already set; v6.15 to v6.17 lack it. Taken out of today's file, the
/// checker's default run finds the stale entry under x86-TSO, as it finds
/// the zoo entry in the Rust port, and the token replays it.
#[test]
fn todays_file_without_83b0177a6c48s_barrier_is_found_at_default_settings() {
    if !have_cc() {
        return;
    }
    let text = std::fs::read_to_string(today_path()).unwrap();
    let fixed = "\t\t\tcpumask_set_cpu(cpu, mm_cpumask(next));\n\t\telse\n\t\t\tsmp_mb();\n";
    assert_eq!(text.matches(fixed).count(), 1, "the fix as v6.18.2 has it");
    let reverted = write_tlb("83b0177a6c48", &text.replace(fixed, "\t\t\tcpumask_set_cpu(cpu, mm_cpumask(next));\n"));
    let r = default_run(&reverted);
    let cx = r.counterexample.as_ref().unwrap_or_else(|| panic!("not found:\n{}", r.to_text()));
    let zoo = default_run("zoo/linux-x86-83b0177a6c48");
    let zoo = zoo.counterexample.as_ref().expect("the zoo entry is found");
    assert_eq!(cx.property, zoo.property, "{}", r.to_text());
    let again = replay(&cx.token).unwrap_or_else(|e| panic!("replaying {}: {e}", cx.token));
    let re = again.counterexample.expect("the token replays a violation");
    assert_eq!((re.property, re.cpu), (cx.property, cx.cpu));
    // The trace reads in the file's terms: the mm's fields and the per-CPU
    // variables by the kernel's names, never an offset into the object.
    let text = r.to_text();
    assert!(text.contains(".cpu_bitmap") && !text.contains("[policy+"), "{text}");
}

#[test]
fn a_file_of_the_other_architecture_is_refused_in_one_line() {
    if !have_cc() {
        return;
    }
    let context = format!("{}/../c/tests/linux/v6.12/arch/arm64/mm/context.c", env!("CARGO_MANIFEST_DIR"));
    let err = |p: &str| check(&bounds(p, 2)).unwrap_err().to_string();
    let e = err(&format!("c:{context}+arch=x86"));
    assert!(e.contains("is arm64's (it defines check_and_switch_context)") && e.contains("+arch=arm64"), "{e}");
    assert!(!e.contains('\n'), "{e}");
    let e = err(&format!("{}+arch=arm64", today()));
    assert!(e.contains("is x86's (it defines switch_mm_irqs_off)") && e.contains("+arch=x86"), "{e}");
    let e = err(&format!("{}+cnp=on", today()));
    assert!(e.contains("arm64's options"), "{e}");
    let e = err(&write_tlb("empty", "int tlbkit_nothing;\n"));
    assert!(e.contains("has no switch_mm_irqs_off()"), "{e}");
}
