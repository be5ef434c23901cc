//! The checker's memory models as policy code sees them: two classic shapes
//! run inside a real policy's context switch (cpu0 is one side, cpu1 the
//! other), so that only the model decides whether the outcome shows.
//!
//! - **MP** (message passing): cpu0 stores `data` then `flag`; cpu1 reads
//!   `flag` then `data`, and panics on
//!   `flag = 1, data = 0`. With plain (`Relaxed`) stores Armv8 lets the second
//!   store become visible first, so `--memory arm` finds the panic; x86-TSO
//!   drains its store buffer in order and `--memory tso` does not. A `Release`
//!   store of `flag` (`STLR`) keeps the stores in order, but Armv8 also lets
//!   cpu1's two plain loads be satisfied out of order, so `--memory arm` still
//!   finds it unless cpu1 orders them: a load-acquire of `flag` (`LDAR`), an
//!   `Acquire` fence (`DMB ISHLD`) or a `DSB ISHST` between them (which orders
//!   only stores, but no later instruction executes until it completes).
//! - **SB** (store buffering) with release stores and acquire loads: cpu0
//!   stores `data` and reads `flag`, cpu1 stores `flag` and reads `data`, each
//!   marking (in a word of its own) a read of 0 and panicking if the
//!   other side marked one. x86 lets a store pass a later load of another
//!   address, a `Release` store and an `Acquire` load too (plain `MOV`s), so
//!   `--memory tso` finds both reads 0; on arm64 an `LDAR` is ordered after an
//!   earlier `STLR`, and `--memory arm` does not.

use tlbkit_check::ops::OpKind;
use tlbkit_check::run::check_policy;
use tlbkit_check::shape::Memory;
use tlbkit_check::spec::{default_spec, Mode};
use tlbkit_check::CheckSpec;
use tlbkit_policy::asid::LinuxArm64;
use tlbkit_policy::sync::{fence, AtomicU64, Ordering};
use tlbkit_policy::wrap::Wrap;
use tlbkit_policy::{Barrier, Domain, Hw, MmId, Policy};

/// Which shape the wrapper runs, and how strongly ordered its accesses are.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// MP, `flag` stored with this ordering, the loads ordered as said.
    Mp(Ordering, Loads),
    /// SB with release stores and acquire loads.
    Sb,
}

/// How MP's reader orders its two loads.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Loads {
    /// Two plain loads (`LDR; LDR`).
    Plain,
    /// A load-acquire of `flag` (`LDAR; LDR`).
    Acquire,
    /// Plain loads with an `Acquire` fence between (`LDR; DMB ISHLD; LDR`).
    Fence,
    /// Plain loads with a `DSB ISHST` between: it orders only stores, but no
    /// later instruction executes until it completes.
    DsbSt,
}

/// `arm64-linux` with a litmus shape run in its context switch.
struct Litmus {
    inner: LinuxArm64,
    shape: Shape,
    data: AtomicU64,
    flag: AtomicU64,
    /// SB's marks: the idle entry read `flag` 0, the switch read `data` 0.
    marks: [AtomicU64; 2],
}

impl Litmus {
    /// SB's side `me` read 0: it marks so, and panics if the other side did.
    fn read_zero(&self, me: usize) {
        self.marks[me].store(1, Ordering::Relaxed);
        assert_eq!(self.marks[1 - me].load(Ordering::Relaxed), 0, "SB: both loads read 0");
    }
}

impl Wrap for Litmus {
    type Inner = LinuxArm64;

    fn inner(&self) -> &LinuxArm64 {
        &self.inner
    }

    fn switch_mm<H: Hw>(&self, hw: &H, next: MmId) {
        let first = hw.cpu().0 == 0;
        match (self.shape, first) {
            (Shape::Mp(ord, _), true) => {
                self.data.store(1, Ordering::Relaxed);
                self.flag.store(1, ord);
            }
            (Shape::Mp(_, loads), false) => {
                let first = if loads == Loads::Acquire { Ordering::Acquire } else { Ordering::Relaxed };
                if self.flag.load(first) == 1 {
                    match loads {
                        Loads::Fence => fence(Ordering::Acquire),
                        Loads::DsbSt => hw.barrier(Barrier::DsbSt(Domain::InnerShareable)),
                        Loads::Plain | Loads::Acquire => {}
                    }
                    assert_eq!(self.data.load(Ordering::Relaxed), 1, "MP: flag seen before data");
                }
            }
            (Shape::Sb, true) => {
                self.data.store(1, Ordering::Release);
                if self.flag.load(Ordering::Acquire) == 0 {
                    self.read_zero(0);
                }
            }
            (Shape::Sb, false) => {
                self.flag.store(1, Ordering::Release);
                if self.data.load(Ordering::Acquire) == 0 {
                    self.read_zero(1);
                }
            }
        }
        self.inner.switch_mm(hw, next)
    }
}

/// Returns the property of the violation an exhaustive search of two CPUs
/// switching finds under `memory`, if any.
fn run(shape: Shape, memory: Memory) -> Option<&'static str> {
    let d = default_spec("arm64-linux");
    let spec = CheckSpec {
        cpus: 2,
        mms: 2,
        asids: 16,
        ops: 2,
        pages: 1,
        mode: Mode::Exhaustive,
        iterations: u64::MAX,
        memory,
        menu: OpKind::parse("switch").expect("a menu"),
        ..d
    };
    let build = || Litmus {
        inner: LinuxArm64::new(spec.cpus, spec.mms + 1, spec.asids.trailing_zeros() as u8, false)
            .expect("a policy of the spec's shape"),
        shape,
        data: AtomicU64::new(0),
        flag: AtomicU64::new(0),
        marks: [AtomicU64::new(0), AtomicU64::new(0)],
    };
    let r = check_policy(&spec, &build).expect("the check runs");
    r.counterexample.map(|c| c.property)
}

#[test]
fn plain_stores_pass_each_other_under_arm_and_not_under_tso() {
    assert_eq!(run(Shape::Mp(Ordering::Relaxed, Loads::Acquire), Memory::Arm), Some("no_policy_panic"));
    assert_eq!(run(Shape::Mp(Ordering::Relaxed, Loads::Plain), Memory::Tso), None);
}

#[test]
fn plain_loads_pass_each_other_under_arm_after_a_store_release() {
    assert_eq!(run(Shape::Mp(Ordering::Release, Loads::Plain), Memory::Arm), Some("no_policy_panic"));
    assert_eq!(run(Shape::Mp(Ordering::SeqCst, Loads::Plain), Memory::Arm), Some("no_policy_panic"));
    assert_eq!(run(Shape::Mp(Ordering::Release, Loads::Plain), Memory::Tso), None);
}

#[test]
fn a_store_release_and_an_ordered_reader_forbid_mp() {
    for loads in [Loads::Acquire, Loads::Fence, Loads::DsbSt] {
        assert_eq!(run(Shape::Mp(Ordering::Release, loads), Memory::Arm), None);
        assert_eq!(run(Shape::Mp(Ordering::SeqCst, loads), Memory::Arm), None);
    }
}

#[test]
fn a_load_acquire_waits_for_an_earlier_store_release_under_arm_only() {
    assert_eq!(run(Shape::Sb, Memory::Tso), Some("no_policy_panic"));
    assert_eq!(run(Shape::Sb, Memory::Arm), None);
}
