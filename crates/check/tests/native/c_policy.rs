//! C policies under the checker: the kernel's own `arch/arm64/mm/context.c`,
//! checked as written (`tlbkit check --c FILE`).
//!
//! Every test needs a C compiler; without one it says so and checks nothing
//! (`.ci/run` runs them where one is installed). The kernel files are the test
//! data of `third_party/linux` (GPL-2.0, see its README).

use tlbkit_check::ops::OpKind;
use tlbkit_check::run::{check, replay};
use tlbkit_check::search::with_checkpoints;
use tlbkit_check::shape::Memory;
use tlbkit_check::spec::{default_spec, Mode};
use tlbkit_check::{CheckReport, CheckSpec};

use crate::common::{default_run, have_cc, write_source};

/// A file of the test data, as a path: `linux/...` under `third_party`, the
/// rest the C front end's own (`crates/c/tests`).
fn data(file: &str) -> String {
    match file.strip_prefix("linux/") {
        Some(kernel) => format!("{}/../../third_party/linux/{kernel}", env!("CARGO_MANIFEST_DIR")),
        None => format!("{}/../c/tests/{file}", env!("CARGO_MANIFEST_DIR")),
    }
}

/// Today's file (v6.12).
fn today() -> String {
    format!("c:{}", data("linux/v6.12/arch/arm64/mm/context.c"))
}

/// The files of 5e10f9887ed8's parent (`fixed`: with the commit's headers).
fn at_5e10f9887ed8(fixed: bool, cnp: bool) -> String {
    with_5e10f9887ed8s(fixed, fixed, cnp)
}

/// The parent's `context.c` with the commit's `tlbflush.h` and `mmu.h` or the
/// parent's, each as asked.
fn with_5e10f9887ed8s(tlbflush: bool, mmu: bool, cnp: bool) -> String {
    let at = |fixed: bool| if fixed { "5e10f9887ed8" } else { "5e10f9887ed8-parent" };
    let mut p = format!(
        "c:{}+{}+{}",
        data("linux/5e10f9887ed8-parent/arch/arm64/mm/context.c"),
        data(&format!("linux/{}/arch/arm64/include/asm/tlbflush.h", at(tlbflush))),
        data(&format!("linux/{}/arch/arm64/include/asm/mmu.h", at(mmu))),
    );
    if cnp {
        p.push_str("+cnp=on");
    }
    p
}

/// The standard bounds but for the operations: 2 CPUs, 3 address spaces of
/// one page, 4 ASIDs, exhaustive.
fn bounds(policy: &str, ops: usize) -> CheckSpec {
    let d = default_spec(policy);
    CheckSpec { cpus: 2, mms: 3, asids: 4, ops, pages: 1, mode: Mode::Exhaustive, iterations: u64::MAX, ..d }
}

/// Asserts that `r` found a violation of `property` and that its token replays it.
fn found(r: &CheckReport, property: &str, what: &str) {
    let cx = r.counterexample.as_ref().unwrap_or_else(|| panic!("{what}: no violation found"));
    assert_eq!(cx.property, property, "{what}:\n{}", r.to_text());
    let again = replay(&cx.token).unwrap_or_else(|e| panic!("{what}: replaying {}: {e}", cx.token));
    let re = again.counterexample.unwrap_or_else(|| panic!("{what}: the token replays no violation"));
    assert_eq!((re.property, re.cpu), (cx.property, cx.cpu), "{what}: the token replays another violation");
}

#[test]
fn todays_file_passes_a_complete_search() {
    if !have_cc() {
        return;
    }
    let r = check(&bounds(&today(), 4)).unwrap();
    assert!(r.explored.complete && r.counterexample.is_none(), "{}", r.to_text());
    assert!(r.explored.states > 10_000, "a search too small to tell: {} states", r.explored.states);
    // The Rust port at the same bounds: the same verdict.
    let rust = check(&bounds("arm64-linux", 4)).unwrap();
    assert!(rust.explored.complete && rust.counterexample.is_none(), "{}", rust.to_text());
    assert!(r.properties.contains(&"no_data_race") && r.properties.contains(&"no_kernel_bug"));
}

/// The standard bounds (6 operations): about a minute in a release build.
/// `cargo test --release -p tlbkit-check --test native -- c_policy:: --ignored`.
#[test]
#[ignore]
fn todays_file_passes_the_standard_bounds() {
    if !have_cc() {
        return;
    }
    for p in [today(), "arm64-linux".to_string()] {
        let r = check(&bounds(&p, 6)).unwrap();
        assert!(r.explored.complete && r.counterexample.is_none(), "{}", r.to_text());
        println!("{p}: {} states, {} executions", r.explored.states, r.explored.executions);
    }
}

#[test]
fn the_compiled_file_searches_alike_with_checkpoints_on_and_off() {
    if !have_cc() {
        return;
    }
    let spec = bounds(&today(), 3);
    let run = |on| {
        let r = with_checkpoints(on, || tlbkit_check::run::check_exhaustive_jobs(&spec, 1)).unwrap();
        (r.explored.executions, r.explored.states, r.explored.pruned, r.explored.max_steps, r.explored.complete)
    };
    assert_eq!(run(true), run(false));
}

#[test]
fn a8ffaaa060b8s_parent_is_found_as_the_zoo_finds_it() {
    if !have_cc() {
        return;
    }
    let file = format!("c:{}", data("linux/a8ffaaa060b8-parent/arch/arm64/mm/context.c"));
    let c = default_run(&file);
    let rust = default_run("zoo/linux-arm64-a8ffaaa060b8");
    let zoo = rust.counterexample.as_ref().expect("the zoo entry is found").property;
    found(&c, zoo, "a8ffaaa060b8's parent");
    // The counterexample reads in the file's terms: its per-CPU active_asids.
    let text = c.to_text();
    assert!(text.contains("active_asids[cpu"), "{text}");
}

/// The shape of a portfolio run `r` that found its violation, as one spec of `policy`.
fn found_shape(r: &CheckReport, policy: &str) -> CheckSpec {
    let shape = r.portfolio.iter().find(|s| s.found).expect("the shape that found it");
    CheckSpec {
        policy: policy.to_string(),
        cpus: shape.bounds.cpus,
        mms: shape.bounds.mms,
        pages: shape.bounds.pages,
        asids: shape.bounds.asids,
        ops: shape.bounds.ops,
        memory: match shape.bounds.memory {
            "tso" => Memory::Tso,
            "arm" => Memory::Arm,
            _ => Memory::Sc,
        },
        menu: OpKind::parse(&shape.bounds.menu).unwrap(),
        mode: Mode::Pct,
        iterations: shape.schedules,
        ..default_spec(policy)
    }
}

/// 5e10f9887ed8's parent has two bugs the commit fixed. Its `ASID(mm)`
/// (`asm/mmu.h`) reads `mm->context.id.counter` plainly, which a rollover
/// on another CPU writes with `atomic64_set` (the commit made it
/// `atomic64_read`): the default run finds that data race first, naming the
/// mm's field. With the commit's `mmu.h` alone, the default run finds the
/// zoo entry's stale translation (the TLBI of `tlbflush.h`); with both of the
/// commit's headers, the shape that found it passes.
#[test]
fn _5e10f9887ed8s_parent_is_found_as_the_zoo_finds_it_and_the_fix_passes() {
    if !have_cc() {
        return;
    }
    let rust = default_run("zoo/linux-arm64-5e10f9887ed8");
    let zoo = rust.counterexample.as_ref().expect("the zoo entry is found").property;
    let mut tlbi = None;
    for cnp in [false, true] {
        // On a machine with FEAT_TTCnP (the file then writes the reserved TTBR0 first) too.
        let parent = at_5e10f9887ed8(false, cnp);
        let c = default_run(&parent);
        found(&c, "no_data_race", "5e10f9887ed8's parent's ASID(mm)");
        let detail = &c.counterexample.as_ref().unwrap().detail;
        assert!(detail.contains("plain read of mm[") && detail.contains("].context.id by cpu"), "{detail}");
        assert!(detail.contains("marked write of it"), "{detail}");
        let c = default_run(&with_5e10f9887ed8s(false, true, cnp));
        found(&c, zoo, "5e10f9887ed8's parent's TLBI");
        tlbi = tlbi.or(Some(c));
    }
    // The commit's headers, on the shape and schedules that found it (without FEAT_TTCnP).
    let c = tlbi.expect("the loop ran");
    let fixed = check(&found_shape(&c, &at_5e10f9887ed8(true, false))).unwrap();
    assert!(fixed.counterexample.is_none(), "{}", fixed.to_text());
}

#[test]
fn a_plain_access_race_is_reported_with_both_sites() {
    if !have_cc() {
        return;
    }
    let spec = |f: &str| CheckSpec { asids: 16, ops: 3, ..bounds(&format!("c:{}", data(f)), 3) };
    let r = check(&spec("constructed/race.c")).unwrap();
    found(&r, "no_data_race", "race.c");
    let detail = &r.counterexample.as_ref().unwrap().detail;
    assert!(detail.contains("switches"), "{detail}");
    assert_eq!(detail.matches("check_and_switch_context+").count(), 2, "both sites: {detail}");
    assert!(detail.contains("holding no lock"), "{detail}");
    let locked = check(&spec("constructed/locked.c")).unwrap();
    assert!(locked.explored.complete && locked.counterexample.is_none(), "{}", locked.to_text());
}

#[test]
fn a_file_that_does_not_build_says_why_in_one_line() {
    if !have_cc() {
        return;
    }
    let err = |f: &str| check(&bounds(&format!("c:{}", data(f)), 2)).unwrap_err().to_string();
    let broken = err("constructed/broken.c");
    assert!(broken.contains("does not compile against tlbkit's shims"), "{broken}");
    assert!(broken.contains("<linux/no_such_header.h>"), "{broken}");
    assert!(!broken.contains('\n'), "one line: {broken}");
    let missing = err("constructed/noswitch.c");
    assert!(missing.contains("has no check_and_switch_context()"), "{missing}");
}

/// Writes `text` as `context.c` in a directory of its own named for `tag`;
/// returns the file's path.
fn write_context(tag: &str, text: &str) -> String {
    write_source(&format!("code-{tag}"), "context.c", text)
}

#[test]
fn a_change_no_execution_reaches_is_named_and_a_change_that_runs_is_counted() {
    if !have_cc() {
        return;
    }
    let today = std::fs::read_to_string(data("linux/v6.12/arch/arm64/mm/context.c")).unwrap();
    let line = "\t\tasid = atomic64_xchg_relaxed(&per_cpu(active_asids, i), 0);\n";
    assert!(today.contains(line), "the test's anchor in flush_context");
    // The base has a branch no execution takes (the generation never gets
    // near that value); the change is behind it.
    let guarded = |body: &str| {
        today.replacen(
            line,
            &format!("{line}\t\tif (atomic64_read(&asid_generation) == 0x5a5a5a5a00000000ULL)\n\t\t\t{body}\n"),
            1,
        )
    };
    let base = write_context("base", &guarded("atomic64_inc(&asid_generation);"));
    let behind = write_context("behind", &guarded("atomic64_dec(&asid_generation);"));
    // Eight operations: enough forks for rollovers (flush_context).
    let spec = |file: &str| CheckSpec { mode: Mode::Pct, iterations: 3_000, ..bounds(&format!("c:{file}"), 8) };
    let mut r = check(&spec(&behind)).unwrap();
    assert!(r.counterexample.is_none() && r.explored.rollovers > 0, "flush_context runs: {}", r.to_text());
    r.code = tlbkit_check::code::reached(&format!("c:{behind}"), Some(&format!("c:{base}"))).unwrap();
    let c = &r.code[0];
    let changed = c.changed.as_ref().expect("a base was given");
    let body_line = today[..today.find(line).unwrap()].lines().count() as u32 + 3;
    assert_eq!(
        (changed.lines.clone(), changed.with_code.clone()),
        (vec![body_line], vec![body_line]),
        "{}",
        r.to_text()
    );
    assert!(c.change_unreached(), "{}", r.to_text());
    let text = r.to_text();
    assert!(text.contains("result: no violation, but no execution reached the lines of"), "{text}");
    assert!(c.reached > 0 && c.reached < c.lines, "{text}");
    assert!(!c.functions_unreached.iter().any(|f| f == "flush_context"), "{text}");

    // The same change where it runs: counted, and the verdict stands alone.
    let runs = write_context("runs", &today.replacen(line, &line.replace(", 0);", ", 0 * 1);"), 1));
    let mut r = check(&spec(&runs)).unwrap();
    r.code = tlbkit_check::code::reached(
        &format!("c:{runs}"),
        Some(&format!("c:{}", data("linux/v6.12/arch/arm64/mm/context.c"))),
    )
    .unwrap();
    let changed = r.code[0].changed.as_ref().unwrap();
    assert_eq!(changed.with_code.len(), 1, "{}", r.to_text());
    assert!(changed.unreached.is_empty() && !r.code[0].change_unreached(), "{}", r.to_text());
    assert!(r.to_text().contains("result: no violation\n"), "{}", r.to_text());
    for f in [base, behind, runs] {
        let _ = std::fs::remove_dir_all(std::path::Path::new(&f).parent().unwrap());
    }
}

/// The finding `linux-arm64-asid-publish`'s shape: 2 CPUs, 2 address spaces
/// of a page, 3 operations of switch, reclaim, munmap and idle, arm memory,
/// exhaustive.
fn publish_shape(policy: &str) -> CheckSpec {
    CheckSpec {
        mms: 2,
        ops: 3,
        menu: OpKind::parse("switch,reclaim,munmap,idle").unwrap(),
        memory: Memory::Arm,
        ..bounds(policy, 3)
    }
}

#[test]
fn the_asid_publish_window_is_in_the_kernels_own_c_with_the_bitops_of_v4_19_to_v5_19() {
    if !have_cc() {
        return;
    }
    // v5.15's code (the 5e10f9887ed8 fix included): with the generic bitops of
    // v4.19 to v5.19, the slow path's cpumask_test_and_clear_cpu on a clear bit
    // is a plain read, and the new context.id can still be buffered when the
    // switching CPU walks under the new ASID, as the Rust port shows.
    let v5 = format!("{}+bitops=v4.19", at_5e10f9887ed8(true, false));
    found(&check(&publish_shape(&v5)).unwrap(), "no_stale_use", "v4.19 bitops");
    let rust = check(&publish_shape("arm64-linux")).unwrap();
    assert_eq!(rust.counterexample.map(|c| c.property), Some("no_stale_use"));
    // From v6.0 that test-and-clear is a fully ordered atomic whatever it finds,
    // which the arm mode takes as draining the store buffer: the search passes.
    let v6 = check(&publish_shape(&at_5e10f9887ed8(true, false))).unwrap();
    assert!(v6.explored.complete && v6.counterexample.is_none(), "{}", v6.to_text());
}
