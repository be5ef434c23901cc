//! LATR's lazy shootdown (`x86-latr`): `munmap` returns before other CPUs have
//! invalidated, and the memory it freed is held until every CPU named in the
//! saved state has swept it at a tick or a context switch. The checker must
//! pass the real policy, and find a variant that reclaims one sweep early
//! (`Variant::ReclaimOneEarly`: the memory goes back when one CPU of the state's
//! mask is still to sweep).

use tlbkit_check::exec::Memory;
use tlbkit_check::ops::OpKind;
use tlbkit_check::spec::{check_policy, default_spec, CheckReport};
use tlbkit_check::{check, CheckSpec};
use tlbkit_policy::asid::latr::{Latr, Variant};

mod common;

#[global_allocator]
static ALLOC: tlbkit_check::arena::CheckAlloc = tlbkit_check::arena::CheckAlloc;

fn small(ops: usize, menu: &str) -> CheckSpec {
    CheckSpec { mms: 1, ops, menu: OpKind::parse(menu).unwrap(), ..common::small_spec("x86-latr", 2, ops) }
}

fn early(spec: &CheckSpec) -> CheckReport {
    check_policy(spec, &|| {
        Latr::new(spec.cpus, spec.mms + 1).with_small_shapes().with_variant(Variant::ReclaimOneEarly)
    })
    .unwrap()
}

#[test]
fn the_real_policy_passes_two_cpus_unmapping_and_sweeping() {
    for memory in [Memory::Sc, Memory::Tso] {
        let spec = CheckSpec { memory, ..small(5, "switch,munmap,madvise,fault,tick") };
        let r = check(&spec).unwrap();
        assert!(r.complete, "{memory:?}: stopped early");
        assert!(r.counterexample.is_none(), "{memory:?}: {:?}", r.counterexample.map(|c| c.trace()));
        assert!(r.states > 1000, "{memory:?}: only {} states", r.states);
    }
}

#[test]
fn the_early_reclaim_variant_is_found_with_its_trace() {
    let r = early(&small(5, "switch,munmap,fault,tick"));
    let cx = r.counterexample.expect("the early reclaim is found");
    assert!(
        matches!(cx.property, "no_stale_held" | "no_stale_use" | "no_reuse_while_mapped"),
        "{}: {}",
        cx.property,
        cx.detail
    );
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
    assert!(r.complete && r.counterexample.is_none(), "{:?}", r.counterexample.map(|c| c.trace()));
}
