//! The contiguous block (`--teardown`): the checker finds origin 004's `simple`
//! teardown returning a page's PTE without the block's gathered dirty state
//! (`no_ungathered_dirty`) but never losing a write (`no_lost_dirty`: the folio
//! is marked dirty by the PTE that holds the bit), replays it, and finds nothing
//! against the other three strategies, with writes racing `munmap`'s unfold and
//! a fault's refold.

use crate::common;

use tlbkit_check::{check, replay, CheckSpec, Mode};
use tlbkit_policy::contpte::Teardown;

fn spec(teardown: Teardown, cpus: usize, ops: usize, menu: &str, mode: Mode, iterations: u64) -> CheckSpec {
    common::contpte_spec(teardown, cpus, ops, menu, mode, iterations)
}

#[test]
fn simple_returns_a_value_without_the_blocks_dirty_state_at_exit_and_replays_identically() {
    let r = check(&spec(Teardown::Simple, 1, 3, "switch,write,exit", Mode::Exhaustive, u64::MAX)).unwrap();
    for p in ["no_lost_dirty", "no_ungathered_dirty", "no_tlb_conflict"] {
        assert!(r.properties.contains(&p), "{p}: {:?}", r.properties);
    }
    let cx = r.counterexample.expect("simple's breach is found");
    assert_eq!(cx.property, "no_ungathered_dirty");
    assert!(cx.detail.starts_with("the exit teardown returned the PTE of file page 0x600000"), "{}", cx.detail);
    // The write was recorded in another PTE of the block than its own page's.
    let trace = cx.trace();
    assert!(trace.contains("user write to 0x600000: the hardware records it as dirty in the PTE of 0x60"), "{trace}");
    assert!(cx.token.starts_with("t5~arm64-linux~1~1~1~4~3~sc~") && cx.token.contains("~simple~"), "{}", cx.token);
    let again = replay(&cx.token).unwrap().counterexample.expect("the replay violates again");
    assert_eq!(again.trace(), trace);
    assert_eq!((again.property, &again.detail), (cx.property, &cx.detail));
}

#[test]
fn the_other_strategies_keep_every_write_through_exit() {
    for t in [Teardown::NoOpt, Teardown::Robust, Teardown::ClearPtes] {
        let r = check(&spec(t, 1, 3, "switch,write,exit", Mode::Exhaustive, u64::MAX)).unwrap();
        assert!(r.explored.complete, "{t}");
        assert!(r.counterexample.is_none(), "{t}: {:?}", r.counterexample);
        // A write anywhere in the block, recorded anywhere in it: thousands of states.
        assert!(r.explored.states > 5_000, "{t}: {} states", r.explored.states);
    }
}

#[test]
fn writes_racing_munmaps_unfold_and_a_faults_refold_lose_nothing() {
    // Two threads of one process: one writes while the other unmaps and faults
    // pages back, every PTE access a preemption point.
    for t in Teardown::ALL {
        let r = check(&spec(t, 2, 8, "switch,write,munmap,fault", Mode::Random, 300)).unwrap();
        assert!(r.counterexample.is_none(), "{t}: {:?}", r.counterexample.map(|c| c.trace()));
        assert!(r.explored.max_steps > 60, "{t}: the unfold's accesses are steps ({} steps)", r.explored.max_steps);
    }
}

#[test]
fn teardown_needs_an_arm64_linux_policy() {
    let mut s = spec(Teardown::NoOpt, 1, 3, "switch", Mode::Exhaustive, 1);
    s.policy = "x86-linux-pcid".to_string();
    let e = check(&s).unwrap_err();
    assert!(e.to_string().contains("teardown noopt: contiguous PTEs are arm64 Linux's"), "{e}");
    assert_eq!(e.param(), Some(tlbkit_check::error::Param::Teardown));
}

#[test]
fn with_kswapd_aging_the_block_only_simple_breaks_the_per_pte_contract() {
    // Aging leaves PTEs old, so exits meet clean-and-old PTEs too (robust's
    // gathering path) as well as dirty-and-old ones.
    for t in Teardown::ALL {
        let r = check(&spec(t, 2, 6, "switch,idle,write,exit,reclaim", Mode::Pct, 2_000)).unwrap();
        match t {
            Teardown::Simple => assert_eq!(r.counterexample.map(|c| c.property), Some("no_ungathered_dirty")),
            _ => assert!(r.counterexample.is_none(), "{t}: {:?}", r.counterexample.map(|c| c.trace())),
        }
    }
}
