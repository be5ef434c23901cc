//! LATR's lazy shootdown (`x86-latr`): `munmap` returns before other CPUs have
//! invalidated, and the memory it freed is held until every CPU named in the
//! saved state has swept it at a tick or a context switch. The checker must
//! pass the real policy, and find a variant that reclaims one sweep early
//! (`Variant::ReclaimOneEarly`: the memory goes back when one CPU of the state's
//! mask is still to sweep).

use tlbkit_check::ops::OpKind;
use tlbkit_check::report::Counterexample;
use tlbkit_check::run::check_policy;
use tlbkit_check::shape::Memory;
use tlbkit_check::spec::default_spec;
use tlbkit_check::{check, CheckReport, CheckSpec};
use tlbkit_policy::asid::latr::{Latr, Variant};

use crate::common;

fn small(ops: usize, menu: &str) -> CheckSpec {
    CheckSpec { mms: 1, ops, menu: OpKind::parse(menu).unwrap(), ..common::small_spec("x86-latr", 2, ops) }
}

/// Checks `spec` on `x86-latr` built with reclamation `variant`.
fn check_variant(spec: &CheckSpec, variant: Variant) -> CheckReport {
    check_policy(spec, &|| Latr::new(spec.cpus, spec.mms + 1).with_small_shapes().with_variant(variant)).unwrap()
}

fn early(spec: &CheckSpec) -> CheckReport {
    check_variant(spec, Variant::ReclaimOneEarly)
}

/// Asserts that `cx` broke a property that memory freed before every CPU
/// swept its state breaks: a stale entry held or used, or a frame reused
/// while mapped.
fn assert_memory_reused_too_early(cx: &Counterexample) {
    assert!(
        matches!(cx.property, "no_stale_held" | "no_stale_use" | "no_reuse_while_mapped"),
        "{}: {}",
        cx.property,
        cx.detail
    );
}

#[test]
fn the_real_policy_passes_two_cpus_unmapping_and_sweeping() {
    for memory in [Memory::Sc, Memory::Tso] {
        let spec = CheckSpec { memory, ..small(5, "switch,munmap,madvise,fault,tick") };
        let r = check(&spec).unwrap();
        assert!(r.explored.complete, "{memory:?}: stopped early");
        assert!(r.counterexample.is_none(), "{memory:?}: {:?}", r.counterexample.map(|c| c.trace()));
        assert!(r.explored.states > 1000, "{memory:?}: only {} states", r.explored.states);
    }
}

#[test]
fn the_early_reclaim_variant_is_found_with_its_trace() {
    let r = early(&small(5, "switch,munmap,fault,tick"));
    let cx = r.counterexample.expect("the early reclaim is found");
    assert_memory_reused_too_early(&cx);
    let trace = cx.trace();
    assert!(trace.contains("the flush is deferred (ticket "), "{trace}");
    assert!(trace.contains("deferred flush_page of mm1 (ticket "), "{trace}");
    assert!(trace.contains("latr_states[cpu"), "{trace}");
}

#[test]
fn the_default_run_finds_the_early_reclaim_variant() {
    let spec = default_spec("x86-latr");
    let r = early(&spec);
    assert!(r.counterexample.is_some(), "the default PCT run misses the early reclaim");
}

#[test]
fn without_ticks_or_switches_a_lazy_munmap_never_completes_and_nothing_is_freed() {
    // Two CPUs on one mm, one munmaps: with no sweep the flush stays pending,
    // so the frame is never reused and nothing can go wrong; the search is
    // complete and clean.
    let r = early(&small(4, "switch,munmap,fault"));
    assert!(r.explored.complete && r.counterexample.is_none(), "{:?}", r.counterexample.map(|c| c.trace()));
}

#[test]
fn a_sweep_that_reads_start_past_its_end_stops_at_the_rings_size() {
    // The schedule the standard bounds found before the walk was bounded: cpu1
    // reads cpu0's `end` (0), cpu0 saves a state, sweeps it and retires it
    // (`start` = 1), and cpu1 then reads `start` = 1, past its `end`. Unbounded,
    // its walk never met `end` again (no_livelock); the artifact's bound ends it.
    let r = tlbkit_check::replay("t5~x86-latr~2~3~1~6~6~sc~7ff~-~z23.1z17.1z14.1z13.100301z7.1~192773af").unwrap();
    assert!(r.counterexample.is_none(), "{:?}", r.counterexample.map(|c| c.trace()));
}

#[test]
fn the_artifacts_default_build_frees_while_a_cpu_still_holds_the_page() {
    // CONFIG_LAZY_MEM_FREE=n, the artifact's default: the frame goes back as the
    // state is saved, before the other CPU has swept it.
    let spec = small(4, "switch,munmap,fault,tick");
    let r = check_variant(&spec, Variant::ArtifactEagerFree);
    let cx = r.counterexample.expect("the eager free is found");
    assert_memory_reused_too_early(&cx);
}
