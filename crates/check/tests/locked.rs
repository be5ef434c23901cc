//! The data a policy's spin lock protects is part of the checker's state
//! (`Policy::hash_locked`). The checker's hooks see only facade atomics; the
//! plain data under a `SpinLock` (Linux arm64's ASID map, cursor and reserved
//! ASIDs, FreeBSD arm64's ASID set) changes in critical sections that can run
//! in either order and leave every atomic, the lock word included, the
//! same. Without it in the hash, two such states would be taken
//! for one, and whatever the search had not explored from the second would be
//! pruned.

use crate::common::noasid_switches_spec as spec;
use tlbkit_check::run::check_policy;
use tlbkit_policy::asid::NoAsid;
use tlbkit_policy::sync::SpinLock;
use tlbkit_policy::wrap::Wrap;
use tlbkit_policy::{Fields, Hw, MmId, Named, Policy, Value};

/// `arm64-noasid` with a lock whose plain data records which CPU switched
/// last: two CPUs' switches in either order leave the same atomics and
/// different data. `feed` says whether `hash_locked` feeds it to the checker.
struct LastSwitcher {
    inner: NoAsid,
    last: SpinLock<u32>,
    feed: bool,
}

impl Wrap for LastSwitcher {
    type Inner = NoAsid;
    fn inner(&self) -> &NoAsid {
        &self.inner
    }
    fn switch_mm<H: Hw>(&self, hw: &H, next: MmId) {
        *self.last.lock() = hw.cpu().0;
        self.inner.switch_mm(hw, next)
    }
    fn name_fields(&self, f: &mut dyn Fields) {
        self.inner.name_fields(f);
        self.last.name_to(f, format_args!("last_lock"), Value::Lock);
    }
    unsafe fn hash_locked(&self, h: &mut dyn std::hash::Hasher) {
        if self.feed {
            // SAFETY: no CPU runs the policy meanwhile (this function's contract).
            h.write_u32(unsafe { *self.last.peek() });
        }
    }
}

#[test]
fn states_that_differ_only_in_locked_data_are_two_states() {
    let s = spec();
    let states = |feed: bool| {
        let build = || LastSwitcher { inner: NoAsid::new(s.cpus), last: SpinLock::new(u32::MAX), feed };
        let r = check_policy(&s, &build).unwrap();
        assert!(r.explored.complete && r.counterexample.is_none(), "{:?}", r.counterexample.map(|c| c.detail));
        r.explored.states
    };
    let (fed, hidden) = (states(true), states(false));
    assert!(fed > hidden, "{fed} states with the locked data in the hash, {hidden} without");
}
