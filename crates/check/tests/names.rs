//! Counterexamples in kernel terms: every field a registered policy or a zoo
//! variant touches has a name (`Policy::name_fields`), so no trace falls back to
//! the `[policy+0x..]` offset form.

use tlbkit_check::run::unnamed_fields;
use tlbkit_check::shape::Memory;
use tlbkit_check::spec::default_spec;
use tlbkit_check::{check, CheckSpec};
use tlbkit_policy::zoo::ZOO;

/// The spec `tlbkit check --policy POLICY` runs with no other flag, sampled
/// randomly `iterations` times.
fn spec(policy: &str, iterations: u64) -> CheckSpec {
    CheckSpec { pages: 1, mode: tlbkit_check::Mode::Random, iterations, seed: 7, ..default_spec(policy) }
}

#[test]
fn every_field_a_registered_policy_or_zoo_variant_touches_has_a_name() {
    let mut policies: Vec<String> = tlbkit_registry::POLICIES.iter().map(|p| p.name.to_string()).collect();
    policies.extend(ZOO.iter().map(|e| format!("zoo/{}", e.id)));
    // Every access an execution under `sc` makes, one under `tso` can make too
    // (the one that drains each store at once).
    let memory = Memory::Tso;
    for policy in &policies {
        // Three CPUs reach the shootdown protocols' second initiator too.
        for cpus in [2, 3] {
            let asids = tlbkit_check::spec::default_asids(policy, cpus);
            let s = CheckSpec { memory, cpus, asids, ..spec(policy, 200) };
            let unnamed = unnamed_fields(&s, s.iterations).unwrap_or_else(|e| panic!("{policy}: {e}"));
            assert!(
                unnamed.is_empty(),
                "{policy} ({cpus} CPUs, {}): fields accessed without a name at policy offsets {unnamed:x?}",
                memory.name(),
            );
        }
    }
}

#[test]
fn every_zoo_counterexample_names_fields_and_opens_with_its_summary() {
    for e in ZOO {
        let policy = format!("zoo/{}", e.id);
        let d = default_spec(&policy);
        let s = CheckSpec { mode: d.mode, iterations: 100_000, seed: 1, ..spec(&policy, 1) };
        let r = check(&s).unwrap_or_else(|m| panic!("{policy}: {m}"));
        let cx = r.counterexample.as_ref().unwrap_or_else(|| panic!("{policy} not found"));
        for (view, text) in [("default", r.to_text()), ("verbose", r.to_text_verbose())] {
            assert!(!text.contains("+0x"), "{policy}: the {view} view shows an offset:\n{text}");
            // The three summary lines come right after the result line.
            let lines: Vec<&str> = text.lines().collect();
            let at = lines.iter().position(|l| l.starts_with("result: VIOLATION")).expect("a result line");
            let labels: Vec<&str> =
                lines[at + 1..at + 4].iter().map(|l| l.trim_start().split(':').next().unwrap()).collect();
            assert_eq!(labels, ["used", "by", "why"], "{policy} ({view}):\n{text}");
        }
        assert_eq!(cx.summary.len(), 3, "{policy}");
        // The default view is a part of the verbose one, step numbers included;
        // every step in it starts with the line of an operation, and a line that
        // goes on with an operation of an earlier step is that step's `op:` line.
        let all: Vec<(usize, &String)> = cx.steps.iter().flat_map(|s| s.events.iter().map(move |e| (s.n, e))).collect();
        for st in &cx.view {
            assert!(st.events[0].starts_with("op: "), "{policy}: step {} has no op: line\n{}", st.n, r.to_text());
            for line in &st.events {
                for part in line.split("; ") {
                    let earlier = [", from step ", ", its store from step "].iter().find_map(|m| {
                        let (op, n) = part.rsplit_once(m)?;
                        Some((op, n.parse::<usize>().expect("a step number")))
                    });
                    let (text, n) = earlier.unwrap_or((part, st.n));
                    assert!(all.iter().any(|(k, e)| *k == n && e.as_str() == text), "{policy}: {part} (step {})", st.n);
                    assert!(earlier.is_none() || (text.starts_with("op: ") && n < st.n), "{policy}: {part}");
                }
            }
        }
        assert!(cx.view.iter().map(|s| s.events.len()).sum::<usize>() < all.len(), "{policy}: nothing was left out");
    }
}

#[test]
fn shared_accesses_show_names_and_decoded_values() {
    let r = check(&CheckSpec {
        mode: tlbkit_check::Mode::Pct,
        iterations: 100_000,
        seed: 1,
        ..spec("zoo/linux-arm64-a8ffaaa060b8", 1)
    })
    .unwrap();
    let cx = r.counterexample.expect("a8ffaaa060b8 is found");
    let trace = cx.trace();
    for needle in [
        "load asid_generation -> gen 1",
        "rmw asid_generation: gen 1 -> gen 2",
        "store active_asids[cpu0] = gen 1, asid 1",
        "store mm[1].context.id = gen 1, asid 1",
        "rmw cpu_asid_lock: free -> held",
        "store tlb_flush_pending = {cpu0, cpu1}",
    ] {
        assert!(trace.contains(needle), "{needle}:\n{trace}");
    }
}

/// A user's policy that names nothing: NoAsid without its `name_fields`.
struct Nameless(tlbkit_policy::asid::NoAsid);

impl tlbkit_policy::Policy for Nameless {
    fn user_ptes_global(&self) -> bool {
        self.0.user_ptes_global()
    }
    fn mm_init(&self, mm: tlbkit_policy::MmId) {
        self.0.mm_init(mm)
    }
    fn mm_release<H: tlbkit_policy::Hw>(&self, hw: &H, mm: tlbkit_policy::MmId) {
        self.0.mm_release(hw, mm)
    }
    fn switch_mm<H: tlbkit_policy::Hw>(&self, hw: &H, next: tlbkit_policy::MmId) {
        self.0.switch_mm(hw, next)
    }
    fn flush_page<H: tlbkit_policy::Hw>(&self, hw: &H, mm: tlbkit_policy::MmId, va: tlbkit_policy::VirtAddr) {
        self.0.flush_page(hw, mm, va)
    }
    fn flush_mm<H: tlbkit_policy::Hw>(&self, hw: &H, mm: tlbkit_policy::MmId) {
        self.0.flush_mm(hw, mm)
    }
    fn flush_kernel_range<H: tlbkit_policy::Hw>(&self, hw: &H, start: tlbkit_policy::VirtAddr, pages: u64) {
        self.0.flush_kernel_range(hw, start, pages)
    }
}

#[test]
fn a_policy_that_names_nothing_gets_offsets_and_is_reported_unnamed() {
    use tlbkit_check::exec::run;
    use tlbkit_check::shape::Shape;
    let shape = Shape {
        cpus: 2,
        mms: 2,
        ops: 4,
        pages: 1,
        linux: false,
        munmap_downgrades: false,
        memory: Memory::Sc,
        reclaim: tlbkit_check::shape::Reclaim::FreebsdPageDaemon,
        arm64: true,
        bug: None,
        menu: tlbkit_check::ops::OpKind::all(),
        teardown: None,
        completion: Default::default(),
    };
    {
        // Dropped before the next execution reuses the arena.
        let mut first = tlbkit_check::search::Replay::new(&[]);
        let named = run(&shape, &|| tlbkit_policy::asid::NoAsid::new(2), &mut first, true);
        assert!(named.unnamed.is_empty(), "{:x?}", named.unnamed);
        assert!(named.events.iter().any(|e| e.text.starts_with("store pc_curpmap[cpu0] = mm")), "{:?}", named.events);
    }
    let mut first = tlbkit_check::search::Replay::new(&[]);
    let out = run(&shape, &|| Nameless(tlbkit_policy::asid::NoAsid::new(2)), &mut first, true);
    assert!(!out.unnamed.is_empty());
    assert!(out.events.iter().any(|e| e.text.starts_with("store [policy+0x")), "{:?}", out.events);
}
