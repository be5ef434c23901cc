//! Local steps explored alone (`tlbkit_check::search::with_local_steps`): a
//! CPU about to access a field the policy declares its own (or data under a
//! lock it holds), with interrupts off, takes that step before any other CPU
//! moves. The reduction leaves states out, so these tests compare verdicts,
//! not states: for every registered policy, the zoo entries an exhaustive
//! search finds quickly, two pages under TSO and the parallel search. A
//! policy that breaks its own declaration is reported, not trusted.

use tlbkit_check::run::{check_exhaustive_jobs, check_policy};
use tlbkit_check::search::{with_local_steps, with_reduction};
use tlbkit_check::{check, CheckReport};
use tlbkit_policy::asid::NoAsid;
use tlbkit_policy::sync::{AtomicU32, Ordering};
use tlbkit_policy::wrap::Wrap;
use tlbkit_policy::{Fields, Hw, MmId, Owner, Policy, Value};

use crate::common;

/// Runs `check` (sleep sets on) with local steps explored alone or not.
fn local(on: bool, check: &dyn Fn() -> CheckReport) -> CheckReport {
    with_local_steps(on, check)
}

#[test]
fn every_policy_gives_the_same_verdict_with_local_steps_alone_and_not() {
    let fewer = common::no_more_states_with("local steps", local);
    // The policies that declare per-CPU fields or data under a lock reach fewer
    // states: Linux x86's `cpu_tlbstate`, FreeBSD's `struct pcpu`, Linux
    // arm64's `tlb_flush_pending` under `cpu_asid_lock`.
    for p in ["x86-linux-pcid", "x86-linux-invlpgb", "x86-freebsd-gen", "arm64-linux"] {
        assert!(fewer.contains(&p), "{p} reached no fewer states with local steps ({fewer:?} did)");
    }
}

#[test]
fn two_pages_and_tso_give_the_same_verdicts_with_local_steps() {
    for (p, s) in common::two_pages_under_tso() {
        let (on, off) = common::on_and_off(&s, local);
        common::assert_same_verdict_in_no_more_states(p, &on, &off);
    }
}

#[test]
fn zoo_entries_are_found_exhaustively_with_local_steps() {
    common::quick_zoo_found_on_and_off("local steps", local);
}

#[test]
fn the_parallel_search_with_local_steps_gives_the_verdict_of_the_full_search() {
    for policy in ["x86-linux-invlpgb", "arm64-linux"] {
        let s = common::small_spec(policy, 1, 3);
        let full = with_reduction(false, || check(&s)).unwrap();
        for jobs in [1, 2, 3] {
            let on = check_exhaustive_jobs(&s, jobs).unwrap();
            assert!(
                on.explored.complete && on.counterexample.is_none() && full.counterexample.is_none(),
                "{policy} --jobs {jobs}"
            );
            assert!(
                on.explored.states < full.explored.states,
                "{policy} --jobs {jobs}: {} states, {} without any reduction",
                on.explored.states,
                full.explored.states
            );
        }
    }
}

/// `arm64-noasid` with a field every CPU writes at each switch, declared
/// CPU 0's own: a wrong declaration.
struct WrongOwner {
    inner: NoAsid,
    last: AtomicU32,
}

impl Wrap for WrongOwner {
    type Inner = NoAsid;
    fn inner(&self) -> &NoAsid {
        &self.inner
    }
    fn switch_mm<H: Hw>(&self, hw: &H, next: MmId) {
        self.last.store(hw.cpu().0, Ordering::Relaxed);
        self.inner.switch_mm(hw, next)
    }
    fn name_fields(&self, f: &mut dyn Fields) {
        self.inner.name_fields(f);
        f.add(&self.last, format_args!("last_switcher"), Value::Number);
        f.own(&self.last, Owner::Cpu { cpu: 0, others_read: false });
    }
}

#[test]
fn a_policy_that_breaks_its_declaration_is_reported() {
    let s = common::noasid_switches_spec();
    for local in [true, false] {
        let build = || WrongOwner { inner: NoAsid::new(s.cpus), last: AtomicU32::new(0) };
        let r = with_local_steps(local, || check_policy(&s, &build)).unwrap();
        let cx = r.counterexample.expect("the broken declaration is found");
        assert_eq!(cx.property, "no_policy_panic");
        let expected =
            "cpu1 wrote last_switcher against the policy's declaration in name_fields (only cpu0 touches it)";
        assert!(cx.detail.contains(expected), "{}", cx.detail);
    }
}
