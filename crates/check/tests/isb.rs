//! A root write takes effect at the CPU's next context synchronisation: an
//! arm64 policy that writes `TTBR0_EL1` and goes on without its `ISB` lets
//! the CPU's walks use the root it wrote over (`kernel::Machine::synchronise`).
//! `arm64-linux-skipbcast` parks a lazy CPU on the reserved table with an
//! `ISB` before it stops counting the CPU as one that may hold the address
//! space's entries; without that `ISB` the CPU may still fill from the
//! address space after it stopped being counted, and a flush that no longer
//! reaches it leaves it holding a stale entry.

use tlbkit_check::portfolio::portfolio;
use tlbkit_check::report::Counterexample;
use tlbkit_check::run::check_policy;
use tlbkit_policy::asid::LinuxArm64;
use tlbkit_policy::wrap::{Wrap, WrapHw};
use tlbkit_policy::{Barrier, Hw, Lazy, Policy};

const NAME: &str = "arm64-linux-skipbcast";

/// A view of the hardware without `ISB`: every other operation is the
/// CPU's own.
struct NoIsb<H> {
    hw: *const H,
}

impl<H: Hw> NoIsb<H> {
    fn of(hw: &H) -> Self {
        NoIsb { hw }
    }
}

impl<H: Hw> WrapHw for NoIsb<H> {
    type Inner = H;
    type Carry = ();

    fn inner(&self) -> &H {
        // SAFETY: made from a live `&H` inside the call that lent it (`of`, or
        // `on_target` in a handler), and used only within that call.
        unsafe { &*self.hw }
    }

    fn carry(&self) {}

    fn on_target(_: &(), hw: &H) -> Self {
        NoIsb::of(hw)
    }

    fn barrier(&self, b: Barrier) {
        if b != Barrier::Isb {
            self.inner().barrier(b)
        }
    }
}

/// The skip-broadcast policy whose lazy entry (`enter_lazy`: the reserved
/// TTBR0, then uncounting the CPU) leaves out the `ISB`, or as written.
struct LazyIsb {
    inner: LinuxArm64,
    drop_isb: bool,
}

impl Wrap for LazyIsb {
    type Inner = LinuxArm64;

    fn inner(&self) -> &LinuxArm64 {
        &self.inner
    }

    fn enter_lazy<H: Hw>(&self, hw: &H, who: Lazy) {
        if self.drop_isb {
            self.inner.enter_lazy(&NoIsb::of(hw), who)
        } else {
            self.inner.enter_lazy(hw, who)
        }
    }
}

/// Runs the default portfolio of the skip-broadcast policy with or without
/// its lazy entry's `ISB`; returns the first violation.
fn default_check(drop_isb: bool) -> Option<Counterexample> {
    for spec in portfolio(NAME, None, 1).members.iter() {
        let build = || LazyIsb {
            inner: LinuxArm64::with_skip_broadcast(spec.cpus, spec.mms + 1, spec.asids.trailing_zeros() as u8, false)
                .expect("a policy of the portfolio's shape"),
            drop_isb,
        };
        let r = check_policy(spec, &build).expect("the check runs");
        if r.counterexample.is_some() {
            return r.counterexample;
        }
    }
    None
}

#[test]
fn a_lazy_entry_without_its_isb_is_found_and_with_it_passes() {
    let cx = default_check(true).expect("the default run finds the lazy entry without its ISB");
    assert_eq!(cx.property, "no_stale_held", "{}", cx.detail);
    // As itself: the same schedule on the policy as written (what the token
    // replays) breaks nothing.
    let real = tlbkit_check::replay(&cx.token).unwrap();
    assert!(real.counterexample.is_none(), "{NAME} as written fails the same schedule: {}", cx.token);
}
