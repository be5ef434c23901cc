//! x86 C policies under the checker: the kernel's own `arch/x86/mm/tlb.c`,
//! compiled against the x86 shims and checked as written.
//!
//! Every test needs a C compiler; without one it says so and checks nothing.
//! The kernel file is test data of `third_party/linux` (GPL-2.0, see its
//! README); the one with a fix taken out is made from it here, in the
//! target's temporary directory.

use tlbkit_check::run::{check, replay};
use tlbkit_check::spec::{default_spec, Mode};
use tlbkit_check::CheckSpec;

use crate::common::{default_run, global_asid_c_script, have_cc, write_source};

/// v6.18.2's `arch/x86/mm/tlb.c`, as its path.
fn today_path() -> String {
    format!("{}/../../third_party/linux/v6.18.2/arch/x86/mm/tlb.c", env!("CARGO_MANIFEST_DIR"))
}

/// Today's file (v6.18.2) as a policy.
fn today() -> String {
    format!("c:{}", today_path())
}

/// v6.13.y's file (the stable tree's, v6.13.7 to v6.13.11), as its path.
fn stable_613_path() -> String {
    format!("{}/../../third_party/linux/v6.13.7/arch/x86/mm/tlb.c", env!("CARGO_MANIFEST_DIR"))
}

/// Asserts that `r` found what the zoo entry `zoo` finds in the Rust port
/// (the same property) and that its token replays it.
fn found_as_the_zoo(r: &tlbkit_check::CheckReport, zoo: &str) {
    let cx = r.counterexample.as_ref().unwrap_or_else(|| panic!("not found:\n{}", r.to_text()));
    let z = default_run(zoo);
    let z = z.counterexample.as_ref().unwrap_or_else(|| panic!("{zoo} is found"));
    assert_eq!(cx.property, z.property, "{}", r.to_text());
    let again = replay(&cx.token).unwrap_or_else(|e| panic!("replaying {}: {e}", cx.token));
    let re = again.counterexample.expect("the token replays a violation");
    assert_eq!((re.property, re.cpu), (cx.property, cx.cpu));
}

/// Writes `text` as `tlb.c` in a directory of its own named for `tag`;
/// returns the policy that names it.
fn write_tlb(tag: &str, text: &str) -> String {
    format!("c:{}", write_source(&format!("x86-{tag}"), "tlb.c", text))
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
    found_as_the_zoo(&r, "zoo/linux-x86-83b0177a6c48");
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
    let context = format!("{}/../../third_party/linux/v6.12/arch/arm64/mm/context.c", env!("CARGO_MANIFEST_DIR"));
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

/// 8f1d56f64f8d ("x86/mm/tlb: Ignore f->new_tlb_gen when zero", v6.0) made
/// `flush_tlb_func` compare `new_tlb_gen` only when a flush has one;
/// reclaim's `arch_tlbbatch_flush` passes none (`TLB_GENERATION_INVALID`,
/// 0), and without the test every CPU took it for a flush done already.
/// Taken out of today's file, the default run finds reclaim's stale entry as
/// the zoo finds the Rust re-creation.
#[test]
fn todays_file_without_8f1d56f64f8ds_test_is_found_at_default_settings() {
    if !have_cc() {
        return;
    }
    let text = std::fs::read_to_string(today_path()).unwrap();
    let fixed =
        "\tif (unlikely(f->new_tlb_gen != TLB_GENERATION_INVALID &&\n\t\t     f->new_tlb_gen <= local_tlb_gen)) {";
    assert_eq!(text.matches(fixed).count(), 1, "the fix as v6.18.2 has it");
    let reverted =
        write_tlb("8f1d56f64f8d", &text.replace(fixed, "\tif (unlikely(f->new_tlb_gen <= local_tlb_gen)) {"));
    found_as_the_zoo(&default_run(&reverted), "zoo/linux-x86-8f1d56f64f8d");
}

/// fea4e317f9e7's parent as v6.14 released it: the lazy `mm_cpumask`, and a
/// `should_flush_tlb` that skips a CPU showing `LOADED_MM_SWITCHING`. The
/// default run finds it as the zoo's re-creation is found.
#[test]
fn v6_14s_file_fea4e317f9e7s_parent_is_found_as_the_zoo_entry_is() {
    if !have_cc() {
        return;
    }
    let file = format!("c:{}/../../third_party/linux/v6.14/arch/x86/mm/tlb.c", env!("CARGO_MANIFEST_DIR"));
    found_as_the_zoo(&default_run(&file), "zoo/linux-x86-fea4e317f9e7");
}

/// v6.13.y's `should_flush_tlb` skips a CPU whose `loaded_mm` is
/// `LOADED_MM_SWITCHING`: the bug fea4e317f9e7 ("x86/mm: Eliminate window
/// where TLB flushes may be inadvertently skipped") fixed after v6.13.y's
/// last release. The stable tree's own file is found at default settings,
/// as the zoo's re-creation is.
#[test]
fn the_v6_13_stable_file_is_found_as_fea4e317f9e7s_zoo_entry_is() {
    if !have_cc() {
        return;
    }
    let r = default_run(&format!("c:{}", stable_613_path()));
    found_as_the_zoo(&r, "zoo/linux-x86-fea4e317f9e7");
}

/// With fea4e317f9e7's test as the stable trees took it (6.14.7, 6.12.29 and
/// others: `should_flush_tlb` sends to a CPU showing
/// `LOADED_MM_SWITCHING`), added to the same file: its switch still stores
/// that only after reading `tlb_gen` and choosing a PCID, and the default
/// run finds the check/use order the zoo's `stable-check-use-order` shows.
#[test]
fn the_v6_13_file_with_the_stable_test_for_switching_is_found_by_its_check_use_order() {
    if !have_cc() {
        return;
    }
    let text = std::fs::read_to_string(stable_613_path()).unwrap();
    let at = "\t/* No mm means kernel memory flush. */\n\tif (!info->mm)\n\t\treturn true;\n";
    assert_eq!(text.matches(at).count(), 1, "should_flush_tlb as v6.13.y has it");
    let test = "\n\tif (per_cpu(cpu_tlbstate.loaded_mm, cpu) == LOADED_MM_SWITCHING)\n\t\treturn true;\n";
    let patched = write_tlb("stable-switching", &text.replace(at, &format!("{at}{test}")));
    let r = default_run(&patched);
    found_as_the_zoo(&r, "zoo/linux-x86-stable-check-use-order");
}

/// The mm's own fields are checked for races as the file's memory is: a
/// plain write of `next->context.ctx_id` added to today's switch races with
/// another CPU's plain read of it in `choose_new_asid`, named by the mm's
/// field.
#[test]
fn a_plain_write_of_an_mms_field_is_a_data_race_named_by_the_field() {
    if !have_cc() {
        return;
    }
    let text = std::fs::read_to_string(today_path()).unwrap();
    let at = "\tthis_cpu_write(cpu_tlbstate.loaded_mm, next);\n";
    assert_eq!(text.matches(at).count(), 1);
    let racy = write_tlb("ctx-id", &text.replace(at, &format!("{at}\tnext->context.ctx_id++;\n")));
    let r = check(&bounds(&racy, 3)).unwrap();
    let cx = r.counterexample.as_ref().unwrap_or_else(|| panic!("not found:\n{}", r.to_text()));
    assert_eq!(cx.property, "no_data_race", "{}", r.to_text());
    assert!(cx.detail.contains("].context.ctx_id by cpu") && cx.detail.contains("choose_new_asid"), "{}", cx.detail);
}

/// `tlbkit check --policy c:FILE --quick` of the test data's file of
/// release `dir`: asserts it passes 10,000 schedules and returns the report.
fn quick_passes(dir: &str) -> tlbkit_check::CheckReport {
    let file = format!("c:{}/../../third_party/linux/{dir}/arch/x86/mm/tlb.c", env!("CARGO_MANIFEST_DIR"));
    let r = tlbkit_check::options::Options { policy: file.clone(), quick: true, seed: 1, ..Default::default() }
        .run(&mut |_| {})
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    assert!(r.counterexample.is_none(), "{}", r.to_text());
    assert!(r.explored.executions >= 10_000, "{}", r.to_text());
    r
}

/// v5.12's file, before the concurrent flushes of v5.13, compiles against the
/// same shims (its `is_lazy` in `cpu_tlbstate`, its own `asm("invlpg")`, its
/// `const` flush request in read-only data, `smp_call_function_many`) and
/// passes a quick run.
#[test]
fn v5_12s_file_compiles_and_passes_a_quick_run() {
    if !have_cc() {
        return;
    }
    quick_passes("v5.12.9");
}

/// v5.13's file, the first with the concurrent flushes (one
/// `flush_tlb_func`, `native_flush_tlb_multi` opening its own
/// `on_each_cpu_cond_mask` with a per-CPU `flush_tlb_mask`), compiles against
/// the same shims and passes a quick run.
#[test]
fn v5_13s_file_compiles_and_passes_a_quick_run() {
    if !have_cc() {
        return;
    }
    quick_passes("v5.13");
}

/// v4.14's file, the first with PCIDs and `tlb_gen` (origin 002 as merged),
/// compiles against the headers of its time (CR3 built and the flush
/// primitives defined in `asm/`, `flush_tlb_mm_range` taking the VMA's flags)
/// and passes a quick run: with PCIDs a lazy CPU switches to `init_mm` at once.
#[test]
fn v4_14s_file_compiles_against_its_headers_and_passes_a_quick_run() {
    if !have_cc() {
        return;
    }
    let r = quick_passes("v4.14");
    assert!(r.hooks.iter().any(|h| h.hook == "enter_lazy" && h.calls > 0), "{}", r.to_text());
}

/// With `+invlpgb=on` the file runs its `INVLPGB` paths, but a global ASID
/// goes only to an mm more than three CPUs run at once: the quick run's
/// shape never reaches `allocate_global_asid`, and its report says so (the
/// guide's "Check today's file" does too; a check that reaches it should
/// change both).
#[test]
fn with_invlpgb_a_quick_run_passes_and_says_no_global_asid_was_handed_out() {
    if !have_cc() {
        return;
    }
    let policy = format!("{}+invlpgb=on", today());
    let r = tlbkit_check::options::Options { policy, quick: true, seed: 1, ..Default::default() }
        .run(&mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(r.counterexample.is_none(), "{}", r.to_text());
    let text = r.to_text();
    let never = text.lines().find(|l| l.starts_with("code reached:")).unwrap_or_else(|| panic!("{text}"));
    assert!(never.contains("allocate_global_asid"), "{never}");
}

/// v6.17's file (v6.16's too; its global ASID allocator is v6.15's,
/// d504d1247e36, unchanged), and the same with Hou Wenlong's posted patch 2/3
/// ("mm/tlb: Fix wrong judgement in allocate_global_asid()"), as paths.
fn v6_17_paths() -> (String, String) {
    let at = |dir: &str| format!("{}/../../third_party/linux/{dir}/arch/x86/mm/tlb.c", env!("CARGO_MANIFEST_DIR"));
    (at("v6.17"), at("v6.17-hou-2of3"))
}

/// The finding `x86-global-asid-max` in the kernel's own C: after the
/// finding's script for the file (four CPUs, so that the file's own
/// threshold hands out global ASIDs), v6.17's `allocate_global_asid` gives
/// `MAX_ASID_AVAILABLE` (14 with 32 PCIDs) to process A and then to process
/// B while A holds it, and a CPU that cached A's translations under PCID 15
/// uses them for B. Hou Wenlong's patch 2/3 applied, the same search
/// passes: the second search's first allocation that finds nothing free
/// returns 0.
#[test]
fn v6_17s_global_asid_allocator_hands_max_out_twice_and_hous_patch_passes() {
    if !have_cc() {
        return;
    }
    let (file, fixed) = v6_17_paths();
    let r = global_asid_c_script(&file, "pct", 2_000).run(&mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
    let cx = r.counterexample.as_ref().unwrap_or_else(|| panic!("not found:\n{}", r.to_text()));
    assert_eq!(cx.property, "no_asid_alias", "{}", r.to_text());
    let trace = cx.trace();
    // The trace is in the file's names: A (mm3) gets 14, then B (mm4) does, A still holding it.
    let a = trace.find("store mm[3].context.global_asid = 14").unwrap_or_else(|| panic!("{trace}"));
    let b = trace.find("store mm[4].context.global_asid = 14").unwrap_or_else(|| panic!("{trace}"));
    assert!(a < b && !trace[a..b].contains("store mm[3].context.global_asid = 0"), "{trace}");
    // Each event made in the file says where: the store in use_global_asid (mm_assign_global_asid inlined).
    assert!(trace[b..].starts_with("store mm[4].context.global_asid = 14 (use_global_asid, tlb.c:"), "{trace}");
    let again = replay(&cx.token).unwrap_or_else(|e| panic!("replaying {}: {e}", cx.token));
    assert_eq!(again.counterexample.map(|c| c.property), Some("no_asid_alias"));
    let r = global_asid_c_script(&fixed, "pct", 2_000).run(&mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
    assert!(r.counterexample.is_none(), "{}", r.to_text());
    assert_eq!(r.explored.executions, 2_000, "{}", r.to_text());
}

/// The same in v6.15's file (reconstructed, `third_party/linux/README.md`),
/// the release that added the allocator, and with patch 2/3's hunk applied
/// to it.
#[test]
fn v6_15s_file_hands_max_out_twice_and_with_hous_patch_passes() {
    if !have_cc() {
        return;
    }
    let file = format!("{}/../../third_party/linux/v6.15/arch/x86/mm/tlb.c", env!("CARGO_MANIFEST_DIR"));
    let r = global_asid_c_script(&file, "pct", 2_000).run(&mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
    let cx = r.counterexample.as_ref().unwrap_or_else(|| panic!("not found:\n{}", r.to_text()));
    assert_eq!(cx.property, "no_asid_alias", "{}", r.to_text());
    let text = std::fs::read_to_string(&file).unwrap();
    let test = "if (asid >= MAX_ASID_AVAILABLE && !global_asid_available) {";
    assert_eq!(text.matches(test).count(), 1);
    let fixed = write_tlb("v615-hou", &text.replace(test, &test.replace("!global", "global")));
    let fixed = fixed.strip_prefix("c:").expect("a C policy");
    let r = global_asid_c_script(fixed, "pct", 2_000).run(&mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
    assert!(r.counterexample.is_none() && r.explored.executions == 2_000, "{}", r.to_text());
}
