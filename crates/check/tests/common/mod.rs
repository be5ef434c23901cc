//! What the checker's test files share.
// Each test file uses the part it needs.
#![allow(dead_code)]

use tlbkit_check::ops::OpKind;
use tlbkit_check::shape::Memory;
use tlbkit_check::{CheckSpec, Mode};
use tlbkit_policy::contpte::Teardown;

/// A check of `arm64-linux` with one address space whose contiguous block exits
/// by `teardown`, on `cpus` CPUs with `ops` operations of the kinds in `menu`.
pub fn contpte_spec(teardown: Teardown, cpus: usize, ops: usize, menu: &str, mode: Mode, iterations: u64) -> CheckSpec {
    CheckSpec {
        policy: "arm64-linux".to_string(),
        cpus,
        mms: 1,
        pages: 1,
        asids: 4,
        ops,
        mode,
        iterations,
        seed: 1,
        memory: Memory::Sc,
        menu: OpKind::parse(menu).expect("a valid menu"),
        teardown: Some(teardown),
        completion: Default::default(),
    }
}

/// The small exhaustive check the fast tests run: `policy` on 2 CPUs, 3 address
/// spaces of `pages` pages, its default ASID space, `ops` operations of every
/// kind, sequentially consistent.
pub fn small_spec(policy: &str, pages: usize, ops: usize) -> CheckSpec {
    CheckSpec {
        policy: policy.to_string(),
        cpus: 2,
        mms: 3,
        pages,
        asids: tlbkit_check::spec::default_asids(policy, 2),
        ops,
        mode: Mode::Exhaustive,
        iterations: u64::MAX,
        seed: 1,
        memory: Memory::Sc,
        menu: OpKind::all(),
        teardown: None,
        completion: Default::default(),
    }
}

/// The soundness tests' case where flushes of one address space overlap and
/// stores wait in buffers: the policies with the most cross-CPU traffic, each
/// as [`small_spec`] with two pages and two operations, under TSO.
pub fn two_pages_under_tso() -> impl Iterator<Item = (&'static str, CheckSpec)> {
    ["arm64-linux-skipbcast", "x86-linux-pcid", "x86-freebsd-scoreboard"].into_iter().map(|p| {
        let mut s = small_spec(p, 2, 2);
        s.memory = Memory::Tso;
        (p, s)
    })
}

/// An exhaustive check of zoo entry `id` at its default shape, one page per
/// address space.
pub fn zoo_spec(id: &str) -> CheckSpec {
    let policy = format!("zoo/{id}");
    CheckSpec { pages: 1, mode: Mode::Exhaustive, iterations: u64::MAX, ..tlbkit_check::spec::default_spec(&policy) }
}

/// The zoo entries an exhaustive search of their default shape finds in well
/// under a second (release), with the property each breaks; the others are in
/// `full.rs`.
pub const QUICK_ZOO: [(&str, &str); 2] =
    [("linux-x86-8f1d56f64f8d", "no_stale_held"), ("freebsd-arm64-epoch-wrap", "no_asid_alias")];

/// Checks every registered policy as [`small_spec`] with three operations,
/// with a search switch on and off (`with(on, check)`); asserts the same
/// verdict both ways and, where no violation is found, that both searches
/// completed, and hands the two reports to `compare` with the policy's name.
pub fn every_policy_on_and_off(
    what: &str,
    with: impl Switch,
    mut compare: impl FnMut(&'static str, &tlbkit_check::CheckReport, &tlbkit_check::CheckReport),
) {
    for p in tlbkit_registry::POLICIES {
        let (on, off) = on_and_off(&small_spec(p.name, 1, 3), &with);
        assert_eq!(verdict(&on), verdict(&off), "{} with and without {what}", p.name);
        if verdict(&off).is_none() {
            assert!(on.explored.complete && off.explored.complete, "{}", p.name);
            compare(p.name, &on, &off);
        }
    }
}

/// As [`every_policy_on_and_off`], asserting that the search with the switch
/// on completes in no more states. Returns the policies that reached fewer.
pub fn no_more_states_with(what: &str, with: impl Switch) -> Vec<&'static str> {
    let mut fewer = Vec::new();
    every_policy_on_and_off(what, with, |name, on, off| {
        assert!(
            on.explored.states <= off.explored.states,
            "{name}: {} states with {what}, {} without",
            on.explored.states,
            off.explored.states
        );
        if on.explored.states < off.explored.states {
            fewer.push(name);
        }
    });
    fewer
}

/// A search switch: runs the check it is given with the switch on or off (as
/// `tlbkit_check::search::with_renaming` does).
pub trait Switch: Fn(bool, &dyn Fn() -> tlbkit_check::CheckReport) -> tlbkit_check::CheckReport {}
impl<F: Fn(bool, &dyn Fn() -> tlbkit_check::CheckReport) -> tlbkit_check::CheckReport> Switch for F {}

/// Checks `spec` with a search switch on and off (`with(on, check)`); returns
/// both reports.
pub fn on_and_off(spec: &CheckSpec, with: impl Switch) -> (tlbkit_check::CheckReport, tlbkit_check::CheckReport) {
    let check = || tlbkit_check::check(spec).unwrap();
    (with(true, &check), with(false, &check))
}

/// Asserts that the complete search `on` (a search switch on) gives the
/// verdict of the complete search `off` in no more states; `what` names the
/// check.
pub fn assert_same_verdict_in_no_more_states(
    what: &str,
    on: &tlbkit_check::CheckReport,
    off: &tlbkit_check::CheckReport,
) {
    assert_eq!(verdict(on), verdict(off), "{what}");
    assert!(
        on.explored.complete && off.explored.complete && on.explored.states <= off.explored.states,
        "{what}: {} vs {}",
        on.explored.states,
        off.explored.states
    );
}

/// Asserts that an exhaustive search finds the bug of each of the
/// [`QUICK_ZOO`] entries with a search switch (`what`) on and off.
pub fn quick_zoo_found_on_and_off(what: &str, with: impl Switch) {
    for (id, property) in QUICK_ZOO {
        let (on, off) = on_and_off(&zoo_spec(id), &with);
        assert_eq!(verdict(&on), Some(property), "zoo/{id} with {what}");
        assert_eq!(verdict(&off), Some(property), "zoo/{id} without {what}");
    }
}

/// An exhaustive check of `arm64-noasid` on 2 CPUs with 2 address spaces of
/// one page and 4 operations, switches and idles only.
pub fn noasid_switches_spec() -> CheckSpec {
    CheckSpec {
        cpus: 2,
        mms: 2,
        pages: 1,
        ops: 4,
        mode: Mode::Exhaustive,
        iterations: u64::MAX,
        menu: OpKind::parse("switch,idle").unwrap(),
        ..tlbkit_check::spec::default_spec("arm64-noasid")
    }
}

/// The verdict of a report: the property its counterexample broke, if any.
pub fn verdict(r: &tlbkit_check::CheckReport) -> Option<&'static str> {
    r.counterexample.as_ref().map(|c| c.property)
}

/// The check of the global ASID finding's report: `policy` after the script
/// `docs/findings/x86-global-asid-max.script` on its machine (2 CPUs, 6
/// address spaces of 2 pages, 4 global ASIDs, 61 operations in all).
pub fn global_asid_script(policy: &str) -> tlbkit_check::options::Options {
    tlbkit_check::options::Options {
        policy: policy.to_string(),
        cpus: Some(2),
        mms: Some(6),
        pages: Some(2),
        asids: Some(4),
        ops: Some(61),
        memory: Some("sc".into()),
        menu: Some("switch,munmap,exit,fork".into()),
        seed: 1,
        script: Some(include_str!("../../../../docs/findings/x86-global-asid-max.script").into()),
        ..Default::default()
    }
}

/// The same finding in the kernel's own `tlb.c`: `file` (its path) with
/// `INVLPGB` and every flush sampled, after the script
/// `docs/findings/x86-global-asid-max.c.script` on its machine (4 CPUs, the
/// file's own threshold; 6 address spaces of 2 pages; 32 PCIDs, so global
/// ASIDs 6 to 13; 232 operations in all).
pub fn global_asid_c_script(file: &str, mode: &str, iterations: u64) -> tlbkit_check::options::Options {
    tlbkit_check::options::Options {
        policy: format!("c:{file}+invlpgb=on+sample=every"),
        cpus: Some(4),
        mms: Some(6),
        pages: Some(2),
        asids: Some(32),
        ops: Some(232),
        memory: Some("sc".into()),
        menu: Some("switch,munmap,exit,fork,idle".into()),
        mode: Some(mode.into()),
        iterations: Some(iterations),
        seed: 1,
        script: Some(include_str!("../../../../docs/findings/x86-global-asid-max.c.script").into()),
        ..Default::default()
    }
}

/// Returns whether a C compiler is installed (C policies can be built),
/// saying so when not: the tests of C policies then check nothing.
pub fn have_cc() -> bool {
    let ok = tlbkit_c::build::have_compiler();
    if !ok {
        eprintln!("skipped: no C compiler (cc or $TLBKIT_CC) on this machine");
    }
    ok
}

/// `tlbkit check --policy POLICY` with no other flag (seed 1).
pub fn default_run(policy: &str) -> tlbkit_check::CheckReport {
    tlbkit_check::options::Options { policy: policy.to_string(), seed: 1, ..Default::default() }
        .run(&mut |_| {})
        .unwrap_or_else(|e| panic!("{policy}: {e}"))
}

/// Writes `text` as `file` in a directory of its own under the tests' scratch
/// directory, named for `tag`; returns the file's path.
pub fn write_source(tag: &str, file: &str, text: &str) -> String {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tlbkit-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(file);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}
