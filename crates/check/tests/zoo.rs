//! The bug zoo: every entry is found with its tailored shape (the smallest its
//! bug needs, which a one-shape run of it starts from and `--deep` searches),
//! its counterexample is short, and replaying its token gives the very same
//! trace. Its default run is its base policy's portfolio: `portfolio.rs`, and
//! `full.rs`'s `every_zoo_entry_with_its_defaults` for every entry.

use tlbkit_check::run::check_policy;
use tlbkit_check::shape::Memory;
use tlbkit_check::spec::default_spec;
use tlbkit_check::{check, replay, CheckSpec, Mode};
use tlbkit_policy::asid::freebsd_epoch::Variant;
use tlbkit_policy::asid::FreebsdEpoch;
use tlbkit_policy::wrap::Wrap;
use tlbkit_policy::zoo::{Bug, ZOO};

/// The tailored shape of `zoo/<id>`, as a one-shape check runs it.
fn zoo_spec(id: &str) -> CheckSpec {
    let policy = format!("zoo/{id}");
    CheckSpec { pages: 1, iterations: 100_000, ..default_spec(&policy) }
}

#[test]
fn every_zoo_entry_is_found_short_and_replays_identically() {
    for e in ZOO {
        let spec = zoo_spec(e.id);
        let r = check(&spec).unwrap_or_else(|m| panic!("zoo/{}: {m}", e.id));
        let cx =
            r.counterexample.unwrap_or_else(|| panic!("zoo/{} not found in {} schedules", e.id, r.explored.executions));
        assert!(cx.steps.len() <= 30, "zoo/{}: {} steps", e.id, cx.steps.len());
        let again = replay(&cx.token).expect("the token replays");
        let cx2 = again.counterexample.expect("the replay violates again");
        assert_eq!(cx2.trace(), cx.trace(), "zoo/{}: replay differs", e.id);
        assert_eq!((cx2.property, &cx2.detail), (cx.property, &cx.detail));
    }
}

#[test]
fn zoo_entries_find_the_property_their_bug_breaks() {
    let expect = [
        ("linux-arm64-a8ffaaa060b8", "no_asid_alias"),
        ("linux-arm64-5e10f9887ed8", "no_stale_held"),
        ("linux-x86-8f1d56f64f8d", "no_stale_held"),
        ("arm64-skipbcast-v1", "no_stale_held"),
        ("arm64-skipbcast-no-barrier", "no_stale_use"),
        ("freebsd-arm64-epoch-wrap", "no_asid_alias"),
        ("freebsd-arm64-r355427", "no_stale_held"),
        ("freebsd-x86-counter-early-ack", "no_stale_held"),
        ("linux-table-free-before-flush", "no_reuse_while_mapped"),
        ("linux-x86-fea4e317f9e7", "no_stale_use"),
        ("linux-x86-83b0177a6c48", "no_stale_use"),
        ("linux-x86-stable-check-use-order", "no_stale_use"),
        ("arm64-activecpu-early-read", "no_stale_held"),
        ("arm64-activecpu-no-switch-dsb", "no_stale_use"),
        ("arm64-activecpu-reset-reserved", "no_stale_held"),
        ("linux-arm64-4b634918384c", "no_stale_held"),
        ("linux-x86-3ea277194daa", "no_stale_held"),
        ("linux-x86-3ef938c35035", "no_stale_held"),
        ("linux-arm64-5108c67c376b", "no_stale_held"),
        ("linux-x86-invlpgb-tlbbatch-v4", "no_stale_held"),
        ("linux-x86-invlpgb-tlbbatch-v1", "no_stale_held"),
    ];
    assert_eq!(expect.len(), ZOO.len());
    for (id, property) in expect {
        let cx = check(&zoo_spec(id)).unwrap().counterexample.unwrap();
        assert_eq!(cx.property, property, "zoo/{id}: {}", cx.detail);
    }
}

/// Checks that zoo entry `id`, searched as its defaults search it but under
/// `memory`, is not found: its bug needs a weaker model.
fn passes_under(id: &str, memory: Memory) {
    let mut spec = zoo_spec(id);
    spec.memory = memory;
    spec.iterations = 20_000;
    let r = check(&spec).unwrap();
    assert!(r.counterexample.is_none(), "zoo/{id} under {}: {:?}", memory.name(), r.counterexample.map(|c| c.detail));
}

#[test]
fn the_store_buffering_bugs_need_store_buffers() {
    // Under sequential consistency one of the two CPUs always sees the other's
    // store: the missing barrier is harmless there.
    passes_under("arm64-skipbcast-no-barrier", Memory::Sc);
    // 83b0177a6c48's missing smp_mb() orders a store before a load: only a
    // store buffer can reorder them.
    passes_under("linux-x86-83b0177a6c48", Memory::Sc);
    // The load that decides a local flush passes the PTE store only in a store
    // buffer: under sequential consistency the early read is as good as the fix.
    passes_under("arm64-activecpu-early-read", Memory::Sc);
}

#[test]
fn the_stable_trees_late_switching_store_needs_no_store_buffer() {
    // Unlike 83b0177a6c48, the half-fixed backport's window is an interleaving:
    // the switch reads tlb_gen before it stores LOADED_MM_SWITCHING.
    let spec = zoo_spec("linux-x86-stable-check-use-order");
    assert_eq!(spec.memory, Memory::Sc);
    let cx = check(&spec).unwrap().counterexample.expect("found under sequential consistency");
    assert_eq!(cx.property, "no_stale_use", "{}", cx.detail);
}

#[test]
fn the_missing_switch_dsb_needs_the_arm_mode() {
    // Under TSO the root write drains the store buffer, as x86's CR3 write
    // does: only arm64's rule, that `MSR TTBR0_EL1` orders nothing, shows the
    // walk that runs before the record of this CPU is visible.
    passes_under("arm64-activecpu-no-switch-dsb", Memory::Tso);
}

/// FreeBSD's epoch allocator with the fix candidate and r355427 undone,
/// whose flushes pin their thread (`sched_pin`) where `pinned` says so.
struct Pinned {
    inner: FreebsdEpoch,
    pinned: bool,
}

impl Wrap for Pinned {
    type Inner = FreebsdEpoch;

    fn inner(&self) -> &FreebsdEpoch {
        &self.inner
    }

    fn flushes_pinned(&self) -> bool {
        self.pinned
    }
}

#[test]
fn r355427_needs_a_thread_that_moves_before_its_dsb() {
    // The switch without its DSB is harmless unless a thread left a TLBI
    // pending on the CPU it left: the counterexample shows the move.
    let mut spec = zoo_spec("freebsd-arm64-r355427");
    let cx = check(&spec).unwrap().counterexample.expect("found");
    let trace = cx.trace();
    assert!(trace.contains("preempted before DSB ISH"), "{trace}");
    // Flushes that pin their thread (FreeBSD before late 2019) give it no
    // such move: the same search of the same code passes.
    spec.policy = "arm64-freebsd-asid-fix-reserved-ttbr0".to_string();
    let found = |pinned: bool| {
        let build = || Pinned {
            inner: FreebsdEpoch::new(spec.cpus, spec.mms + 1, spec.asids.trailing_zeros() as u8)
                .with_variant(Variant::ReservedTtbr0)
                .with_bug(Bug::FreebsdArm64R355427),
            pinned,
        };
        check_policy(&spec, &build).unwrap().counterexample.map(|c| c.property)
    };
    assert_eq!(found(false), Some("no_stale_held"));
    assert_eq!(found(true), None);
}

#[test]
fn switch_to_without_its_dsb_needs_a_thread_that_moves_before_its_dsb() {
    // Linux arm64 before 5108c67c376b: a flush preempted before its DSB ISH
    // leaves its TLBI incomplete on the CPU it left, whose switch completes
    // nothing. The counterexample shows the move; with __switch_to's DSB no
    // move is offered (it would complete what a moved thread left), and the
    // same search of the same policy passes (the_fixed_bases_pass_the_zoo_shapes).
    let cx = check(&zoo_spec("linux-arm64-5108c67c376b")).unwrap().counterexample.expect("found");
    let trace = cx.trace();
    assert!(trace.contains("preempted before DSB ISH"), "{trace}");
}

#[test]
fn the_fixed_bases_pass_the_zoo_shapes() {
    // The same shape, memory and search as each bug's, on the policy without it:
    // what the zoo finds is the bug, not the shape.
    for e in ZOO {
        let mut spec = zoo_spec(e.id);
        spec.policy = e.base.to_string();
        spec.iterations = 5_000;
        let r = check(&spec).unwrap();
        if e.base == "arm64-freebsd-asid" {
            // The faithful epoch allocator has a finding of its own, the reset window
            // (tlbkit_policy::findings): it is found here too, and the fix candidate,
            // which changes nothing about the epoch's width, passes the same search.
            let cx = r.counterexample.expect("the reset-window finding");
            assert_eq!(cx.property, "no_asid_alias", "{}", cx.detail);
            spec.policy = "arm64-freebsd-asid-fix-reserved-ttbr0".to_string();
            let r = check(&spec).unwrap();
            assert!(
                r.counterexample.is_none(),
                "{} fixed ({}): {:?}",
                e.base,
                e.id,
                r.counterexample.map(|c| c.detail)
            );
            continue;
        }
        assert!(r.counterexample.is_none(), "{} ({}): {:?}", e.base, e.id, r.counterexample.map(|c| c.detail));
    }
}

#[test]
fn modes_and_bad_tokens() {
    let mut spec = zoo_spec("linux-x86-8f1d56f64f8d");
    spec.mode = Mode::Random;
    assert!(check(&spec).unwrap().counterexample.is_some());
    let e = replay("t1~nope").unwrap_err();
    assert!(e.to_string().contains("not a tlbkit replay token"), "{e}");
    let body = "t5~zoo/nothing~2~3~1~4~6~sc~ff~-~0";
    let e = replay(&format!("{body}~{:08x}", tlbkit_check::token::crc32(body.as_bytes()))).unwrap_err();
    assert!(e.to_string().contains("unknown bug-zoo entry"), "{e}");
    assert!(matches!(e, tlbkit_check::Error::UnknownZooEntry { .. }), "{e:?}");
}
