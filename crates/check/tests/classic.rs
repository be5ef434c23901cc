//! The classic shapes of Armv8's ordinary accesses, run in the checker's own
//! engine (not `tlbkit litmus`'s), each thread inside a real policy's context
//! switch (`arm64-noasid`: thread `t` is CPU `t`'s first switch), and their
//! verdicts under `--memory arm` compared with the architecture's.
//!
//! A thread runs its accesses, then says whether its loads read what the
//! shape's outcome asks (a store-release of its mark) and counts itself done
//! (a fully ordered add); the last one reads the marks and the final values
//! and panics if the outcome showed, so a search that finds `no_policy_panic`
//! has found the outcome. What comes after a thread's accesses orders nothing
//! among them.
//!
//! Armv8's verdicts are the well-known ones (Pulte et al., "Simplifying ARM
//! concurrency", POPL 2018; the herd7 `aarch64.cat` model), for the forms
//! written here with what Rust's atomics give: a plain access is `LDR`/`STR`,
//! a `Release` store `STLR`, an `Acquire` load `LDAR`, a `SeqCst` fence `DMB
//! ISH`, an `Acquire` fence `DMB ISHLD`. Where the checker is stronger than
//! Armv8 the test says so and why ([`Test::checker`]); a weaker verdict is
//! never accepted.

use tlbkit_check::ops::OpKind;
use tlbkit_check::run::check_policy;
use tlbkit_check::shape::Memory;
use tlbkit_check::spec::{default_spec, Mode};
use tlbkit_check::CheckSpec;
use tlbkit_policy::asid::NoAsid;
use tlbkit_policy::sync::{fence, AtomicU64, Ordering};
use tlbkit_policy::wrap::Wrap;
use tlbkit_policy::{Hw, MmId, Policy};

use Ordering::{Acquire as Acq, Relaxed as Rlx, Release as Rel, SeqCst as Sc};

/// One access of a thread.
#[derive(Clone, Copy)]
enum I {
    /// A store to location `0`, of value `1`, with ordering `2`.
    St(usize, u64, Ordering),
    /// A load of a location with an ordering; its value is the thread's next
    /// register.
    Ld(usize, Ordering),
    /// A fence.
    Fence(Ordering),
}

/// Whether an outcome may show.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Allowed,
    Forbidden,
}
use Verdict::{Allowed, Forbidden};

/// A shape, its outcome and its verdicts.
struct Test {
    name: &'static str,
    threads: &'static [&'static [I]],
    /// The outcome: (thread, register, value) for loads, all to hold.
    regs: &'static [(usize, usize, u64)],
    /// And the final value of locations: (location, value).
    finals: &'static [(usize, u64)],
    /// Armv8's verdict.
    arm: Verdict,
    /// The checker's, where it differs from Armv8's, and why (stronger only).
    checker: Option<(Verdict, &'static str)>,
}

/// A test Armv8 and the checker agree on.
const fn t(
    name: &'static str,
    threads: &'static [&'static [I]],
    regs: &'static [(usize, usize, u64)],
    finals: &'static [(usize, u64)],
    arm: Verdict,
) -> Test {
    Test { name, threads, regs, finals, arm, checker: None }
}

impl Test {
    /// The checker's verdict is `v` instead, for the reason `why`.
    const fn stronger(self, (v, why): (Verdict, &'static str)) -> Test {
        Test { checker: Some((v, why)), ..self }
    }
}

/// The locations a shape uses, at most.
const LOCS: usize = 2;
/// The threads a shape has, at most. Shapes of four threads (`IRIW`) are left
/// to `tlbkit litmus`: four CPUs each running a whole context switch are
/// more than an exhaustive search of this harness finishes in minutes.
const THREADS: usize = 2;

/// Load buffering: a store passing an earlier load of another location.
const NO_LB: &str = "no store passes an earlier load in the checker (load buffering)";

const TESTS: &[Test] = &[
    t(
        "MP",
        &[&[I::St(0, 1, Rlx), I::St(1, 1, Rlx)], &[I::Ld(1, Rlx), I::Ld(0, Rlx)]],
        &[(1, 0, 1), (1, 1, 0)],
        &[],
        Allowed,
    ),
    t(
        "MP+rel+po",
        &[&[I::St(0, 1, Rlx), I::St(1, 1, Rel)], &[I::Ld(1, Rlx), I::Ld(0, Rlx)]],
        &[(1, 0, 1), (1, 1, 0)],
        &[],
        Allowed,
    ),
    t(
        "MP+rel+acq",
        &[&[I::St(0, 1, Rlx), I::St(1, 1, Rel)], &[I::Ld(1, Acq), I::Ld(0, Rlx)]],
        &[(1, 0, 1), (1, 1, 0)],
        &[],
        Forbidden,
    ),
    t(
        "MP+dmb+dmb.ld",
        &[&[I::St(0, 1, Rlx), I::Fence(Sc), I::St(1, 1, Rlx)], &[I::Ld(1, Rlx), I::Fence(Acq), I::Ld(0, Rlx)]],
        &[(1, 0, 1), (1, 1, 0)],
        &[],
        Forbidden,
    ),
    t(
        "MP+dmb+po",
        &[&[I::St(0, 1, Rlx), I::Fence(Sc), I::St(1, 1, Rlx)], &[I::Ld(1, Rlx), I::Ld(0, Rlx)]],
        &[(1, 0, 1), (1, 1, 0)],
        &[],
        Allowed,
    ),
    t(
        "SB",
        &[&[I::St(0, 1, Rlx), I::Ld(1, Rlx)], &[I::St(1, 1, Rlx), I::Ld(0, Rlx)]],
        &[(0, 0, 0), (1, 0, 0)],
        &[],
        Allowed,
    ),
    t(
        "SB+dmbs",
        &[&[I::St(0, 1, Rlx), I::Fence(Sc), I::Ld(1, Rlx)], &[I::St(1, 1, Rlx), I::Fence(Sc), I::Ld(0, Rlx)]],
        &[(0, 0, 0), (1, 0, 0)],
        &[],
        Forbidden,
    ),
    t(
        "SB+rel+acqs",
        &[&[I::St(0, 1, Rel), I::Ld(1, Acq)], &[I::St(1, 1, Rel), I::Ld(0, Acq)]],
        &[(0, 0, 0), (1, 0, 0)],
        &[],
        Forbidden,
    ),
    t(
        "LB",
        &[&[I::Ld(0, Rlx), I::St(1, 1, Rlx)], &[I::Ld(1, Rlx), I::St(0, 1, Rlx)]],
        &[(0, 0, 1), (1, 0, 1)],
        &[],
        Allowed,
    )
    .stronger((Forbidden, NO_LB)),
    t(
        "LB+dmbs",
        &[&[I::Ld(0, Rlx), I::Fence(Sc), I::St(1, 1, Rlx)], &[I::Ld(1, Rlx), I::Fence(Sc), I::St(0, 1, Rlx)]],
        &[(0, 0, 1), (1, 0, 1)],
        &[],
        Forbidden,
    ),
    t(
        "S",
        &[&[I::St(0, 2, Rlx), I::Fence(Sc), I::St(1, 1, Rlx)], &[I::Ld(1, Rlx), I::St(0, 1, Rlx)]],
        &[(1, 0, 1)],
        &[(0, 2)],
        Allowed,
    )
    .stronger((Forbidden, NO_LB)),
    t(
        "2+2W",
        &[&[I::St(0, 1, Rlx), I::St(1, 2, Rlx)], &[I::St(1, 1, Rlx), I::St(0, 2, Rlx)]],
        &[],
        &[(0, 1), (1, 1)],
        Allowed,
    ),
    t(
        "2+2W+dmbs",
        &[&[I::St(0, 1, Rlx), I::Fence(Sc), I::St(1, 2, Rlx)], &[I::St(1, 1, Rlx), I::Fence(Sc), I::St(0, 2, Rlx)]],
        &[],
        &[(0, 1), (1, 1)],
        Forbidden,
    ),
    t("CoRR", &[&[I::St(0, 1, Rlx)], &[I::Ld(0, Rlx), I::Ld(0, Rlx)]], &[(1, 0, 1), (1, 1, 0)], &[], Forbidden),
    t("CoWR", &[&[I::St(0, 1, Rlx), I::Ld(0, Rlx)], &[I::St(0, 2, Rlx)]], &[(0, 0, 2)], &[(0, 1)], Forbidden),
];

/// `arm64-noasid` with the threads of `test` run in the CPUs' first switches.
struct Shape {
    inner: NoAsid,
    test: &'static Test,
    loc: [AtomicU64; LOCS],
    /// Whether thread `t` has run (only its CPU reads or writes it).
    ran: [AtomicU64; THREADS],
    /// Whether thread `t`'s loads read what the outcome asks.
    hit: [AtomicU64; THREADS],
    done: AtomicU64,
}

impl Shape {
    /// Runs thread `t` and, if it is the last to finish, judges the outcome.
    fn thread(&self, t: usize) {
        let mut regs = Vec::new();
        for &i in self.test.threads[t] {
            match i {
                I::St(l, v, ord) => self.loc[l].store(v, ord),
                I::Ld(l, ord) => regs.push(self.loc[l].load(ord)),
                I::Fence(ord) => fence(ord),
            }
        }
        let mine = self.test.regs.iter().filter(|r| r.0 == t);
        let hit = mine.clone().all(|&(_, k, v)| regs[k] == v);
        self.hit[t].store(hit as u64, Ordering::Release);
        let n = self.test.threads.len() as u64;
        if self.done.fetch_add(1, Ordering::AcqRel) + 1 < n {
            return;
        }
        let all = (0..self.test.threads.len())
            .filter(|&u| self.test.regs.iter().any(|r| r.0 == u))
            .all(|u| self.hit[u].load(Ordering::Acquire) == 1);
        let finals = self.test.finals.iter().all(|&(l, v)| self.loc[l].load(Ordering::Acquire) == v);
        assert!(!(all && finals), "{}: the outcome showed", self.test.name);
    }
}

impl Wrap for Shape {
    type Inner = NoAsid;

    fn inner(&self) -> &NoAsid {
        &self.inner
    }

    fn switch_mm<H: Hw>(&self, hw: &H, next: MmId) {
        let t = hw.cpu().0 as usize;
        if self.ran[t].load(Ordering::Relaxed) == 0 {
            self.ran[t].store(1, Ordering::Relaxed);
            self.thread(t);
        }
        self.inner.switch_mm(hw, next)
    }
}

/// Returns whether an exhaustive search under `memory` shows `test`'s outcome.
fn shows(test: &'static Test, memory: Memory) -> Verdict {
    let n = test.threads.len();
    let spec = CheckSpec {
        cpus: n,
        mms: 1,
        asids: 16,
        ops: n,
        pages: 1,
        mode: Mode::Exhaustive,
        iterations: u64::MAX,
        memory,
        menu: OpKind::parse("switch").expect("a menu"),
        ..default_spec("arm64-noasid")
    };
    let build = || Shape {
        inner: NoAsid::new(n),
        test,
        loc: Default::default(),
        ran: Default::default(),
        hit: Default::default(),
        done: AtomicU64::new(0),
    };
    let r = check_policy(&spec, &build).expect("the check runs");
    match r.counterexample.map(|c| c.property) {
        Some("no_policy_panic") => Allowed,
        None => Forbidden,
        Some(other) => panic!("{}: the search found {other}", test.name),
    }
}

/// Runs every test under `--memory arm` and returns the verdicts that are
/// neither Armv8's nor a listed stronger one.
fn disagreements() -> Vec<String> {
    let mut wrong = Vec::new();
    for test in TESTS {
        let want = test.checker.map_or(test.arm, |c| c.0);
        if let Some((checker, _)) = test.checker {
            assert!(test.arm == Allowed && checker == Forbidden, "{}: only a stronger verdict is listed", test.name);
        }
        let got = shows(test, Memory::Arm);
        if got != want {
            wrong.push(format!("{}: {got:?} under arm, expected {want:?}", test.name));
        }
    }
    wrong
}

#[test]
fn the_classic_shapes_in_the_checkers_own_engine_agree_with_armv8_or_are_stronger() {
    let wrong = disagreements();
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn under_tso_only_a_store_passes_a_later_load() {
    for (name, want) in [("MP", Forbidden), ("SB", Allowed), ("LB", Forbidden), ("2+2W", Forbidden)] {
        let test = TESTS.iter().find(|t| t.name == name).expect("a test of that name");
        assert_eq!(shows(test, Memory::Tso), want, "{name} under tso");
    }
}
