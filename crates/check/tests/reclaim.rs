//! Reclaim on every policy: each kernel's page-out path is
//! offered wherever the policy runs, and calls what that kernel calls: Linux's
//! batched flush (`flush_batch`) from `kswapd`, FreeBSD's per-page invalidation of
//! the pmap (`flush_page`) from the page daemon, for an address space that may
//! run on no CPU at all. A FreeBSD-style policy that skips the invalidation of a
//! pmap loaded nowhere (while a CPU still holds entries tagged with its PCID) is
//! found only by such an operation.

use std::sync::atomic::Ordering::SeqCst;
use tlbkit_check::exec;
use tlbkit_check::ops::OpKind;
use tlbkit_check::run::check_policy;
use tlbkit_check::search::{self, Randomised};
use tlbkit_check::shape::{Reclaim, Shape};
use tlbkit_check::spec::default_asids;
use tlbkit_check::{check, replay, CheckSpec, Mode};
use tlbkit_policy::asid::linux_x86_615::{Kernel, LinuxX86v615};
use tlbkit_policy::shootdown::Completion;
use tlbkit_policy::sync::AtomicU32;
use tlbkit_policy::wrap::Wrap;
use tlbkit_policy::{asid::FreebsdX86, Fields, Hw, Lazy, MmId, Policy, Value, VirtAddr};
use tlbkit_registry::{self as registry, Arch, AsidSpace, Build, WithPolicy};

/// `x86-freebsd-gen` with a plausible page-out mistake: `pmap_invalidate_page`
/// returns at once when the pmap's `pm_active` is empty ("nobody runs it, so
/// nothing to shoot down"), skipping the generation reset that makes the next
/// activation on a CPU that ran it drop the PCID's stale entries. It tracks which
/// pmap each CPU runs itself (`running[cpu]`), as `pm_active` would say.
struct SkipInactive {
    inner: FreebsdX86,
    /// The slot each CPU last switched to (0: the kernel's).
    running: Vec<AtomicU32>,
}

impl SkipInactive {
    fn new(cpus: usize, mm_slots: usize) -> Self {
        let inner = FreebsdX86::new(cpus, mm_slots, Completion::Generation).with_pcid_overmax(4);
        SkipInactive { inner, running: (0..cpus).map(|_| AtomicU32::new(0)).collect() }
    }
}

impl Wrap for SkipInactive {
    type Inner = FreebsdX86;
    fn inner(&self) -> &FreebsdX86 {
        &self.inner
    }
    fn switch_mm<H: Hw>(&self, hw: &H, next: MmId) {
        // SeqCst: the flusher reads every CPU's entry after its PTE change.
        self.running[hw.cpu().index()].store(next.0, SeqCst);
        self.inner.switch_mm(hw, next)
    }
    fn enter_lazy<H: Hw>(&self, hw: &H, who: Lazy) {
        // SeqCst: as in `switch_mm`.
        self.running[hw.cpu().index()].store(MmId::KERNEL.0, SeqCst);
        self.inner.enter_lazy(hw, who)
    }
    fn flush_page<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        // SeqCst: pairs with the stores above.
        if self.running.iter().all(|r| r.load(SeqCst) != mm.0) {
            return;
        }
        self.inner.flush_page(hw, mm, va)
    }
    unsafe fn hash_locked(&self, h: &mut dyn std::hash::Hasher) {
        // SAFETY: the caller keeps every CPU out of the policy, as ours.
        unsafe { self.inner.hash_locked(h) }
    }
    fn name_fields(&self, f: &mut dyn Fields) {
        self.inner.name_fields(f);
        for (c, r) in self.running.iter().enumerate() {
            f.add(r, format_args!("running[cpu{c}]"), Value::Mm);
        }
    }
}

/// `tlbkit check --policy x86-freebsd-gen` with no other flag, with `menu` if given.
fn default_spec(menu: Option<u32>) -> CheckSpec {
    let d = tlbkit_check::spec::default_spec("x86-freebsd-gen");
    CheckSpec { menu: menu.unwrap_or(d.menu), ..d }
}

fn skip_inactive(spec: &CheckSpec) -> impl Fn() -> SkipInactive + '_ {
    move || SkipInactive::new(spec.cpus, spec.mms + 1)
}

#[test]
fn the_default_check_finds_a_page_out_that_skips_a_pmap_loaded_nowhere() {
    let spec = default_spec(None);
    let t = std::time::Instant::now();
    let r = check_policy(&spec, &skip_inactive(&spec)).unwrap();
    let cx = r.counterexample.unwrap_or_else(|| panic!("not found in {} schedules", r.explored.executions));
    assert_eq!(cx.property, "no_stale_use", "{}", cx.detail);
    let text = cx.trace();
    assert!(text.contains("the page daemon pages out page"), "{text}");
    eprintln!("found in {} schedules, {:.1} s (test build)", r.explored.executions, t.elapsed().as_secs_f64());
}

/// A small machine on which the skip needs no more than page-out: 2 CPUs, one
/// process, 5 operations (one CPU switches to it, leaves it for idle and
/// switches back; the other pages its page out meanwhile), exhaustively.
fn small(menu: &str) -> CheckSpec {
    CheckSpec {
        cpus: 2,
        mms: 1,
        ops: 5,
        mode: Mode::Exhaustive,
        iterations: u64::MAX,
        menu: OpKind::parse(menu).unwrap(),
        ..default_spec(None)
    }
}

#[test]
fn without_page_out_the_small_machine_proves_the_skip_harmless() {
    // What the checker could do before: no reclaim on FreeBSD policies. The
    // exhaustive search completes clean without page-out and finds the skip with it.
    let without = small("switch,idle,munmap");
    let r = check_policy(&without, &skip_inactive(&without)).unwrap();
    assert!(r.explored.complete && r.counterexample.is_none(), "{:?}", r.counterexample.map(|c| c.detail));
    let with = small("switch,idle,munmap,reclaim");
    let r = check_policy(&with, &skip_inactive(&with)).unwrap();
    assert_eq!(r.counterexample.map(|c| c.property), Some("no_stale_use"));
}

#[test]
fn the_real_freebsd_policy_passes_where_the_skip_is_found() {
    let r = check(&small("switch,idle,munmap,reclaim")).unwrap();
    assert!(r.explored.complete && r.counterexample.is_none(), "{:?}", r.counterexample.map(|c| c.detail));
}

/// Random executions of a registered policy, recording their events.
struct Trace<'a> {
    shape: &'a Shape,
}

impl WithPolicy for Trace<'_> {
    type Out = Vec<String>;
    fn with<P: Policy>(self, build: &dyn Fn() -> P) -> Vec<String> {
        let mut texts = Vec::new();
        let mut run = |c: &mut dyn search::Chooser| {
            let out = exec::run(self.shape, build, c, true);
            texts.extend(out.events.iter().map(|e| e.text.clone()));
            out
        };
        search::randomised(&mut run, Randomised::Random, 200, 3);
        texts
    }
}

#[test]
fn every_policy_pages_out_through_its_kernels_flush() {
    for p in registry::POLICIES {
        let linux = p.os.is_linux();
        // The shape `tlbkit check --policy P --cpus 2 --mms 2 --ops 4 --menu switch,idle,reclaim` runs.
        let spec = CheckSpec {
            policy: p.name.to_string(),
            cpus: 2,
            mms: 2,
            asids: default_asids(p.name, 2),
            ops: 4,
            menu: OpKind::Switch.bit() | OpKind::Idle.bit() | OpKind::Reclaim.bit(),
            ..default_spec(None)
        };
        let shape = tlbkit_check::spec::shape(&spec).unwrap();
        assert_eq!(shape.reclaim, if linux { Reclaim::LinuxBatched } else { Reclaim::FreebsdPageDaemon }, "{}", p.name);
        assert_eq!(shape.arm64, p.arch == Arch::Arm64, "{}", p.name);
        // Linux x86 keeps its own PCID slots; every other space is `--asids`'s width.
        let asid_bits = if p.asids == AsidSpace::LinuxPcidSlots { 12 } else { spec.asids.trailing_zeros() as u8 };
        let build = Build { checker: true, ..Build::new(2, 3, asid_bits) };
        let texts = registry::with_policy(p.name, &build, Trace { shape: &shape }).unwrap();
        let (op, flush) = if linux {
            ("op: kswapd reclaims page", "flush_batch returned")
        } else {
            ("op: the page daemon pages out page", "flush_page returned")
        };
        let at = texts.iter().position(|t| t.starts_with(op)).unwrap_or_else(|| panic!("{}: no page-out", p.name));
        assert!(texts[at..].iter().any(|t| t.starts_with(flush)), "{}: no {flush} after the page-out", p.name);
    }
}

/// The smallest machine of the reclaim race (3ea277194daa, 4b634918384c): one
/// process, 3 operations (one CPU switches to it and unmaps its page, the other,
/// idle, reclaims the page), exhaustively.
fn race(policy: &str, menu: &str) -> CheckSpec {
    CheckSpec { policy: policy.to_string(), asids: default_asids(policy, 2), ops: 3, pages: 1, ..small(menu) }
}

#[test]
fn every_linux_policy_completes_a_deferred_reclaim_before_a_munmap_of_its_page_returns() {
    // No mmap_lock keeps a munmap out of reclaim's window: flush_tlb_batched_pending
    // is what makes it safe, on every Linux policy.
    for p in registry::POLICIES.iter().filter(|p| p.os.is_linux()) {
        let r = check(&race(p.name, "switch,munmap,reclaim")).unwrap();
        assert!(
            r.explored.complete && r.counterexample.is_none(),
            "{}: {:?}",
            p.name,
            r.counterexample.map(|c| c.detail)
        );
    }
}

#[test]
fn the_reclaim_race_needs_the_munmap_in_the_window() {
    // Without munmap nothing relies on the deferred flush before it returns:
    // both zoo entries pass; with it both are found, after the munmap returned
    // with the reclaimed page still in the TLB.
    for id in ["zoo/linux-arm64-4b634918384c", "zoo/linux-x86-3ea277194daa"] {
        let r = check(&race(id, "switch,reclaim")).unwrap();
        assert!(r.explored.complete && r.counterexample.is_none(), "{id}: {:?}", r.counterexample.map(|c| c.detail));
        let cx = check(&race(id, "switch,munmap,reclaim")).unwrap().counterexample.expect(id);
        assert_eq!(cx.property, "no_stale_held", "{id}: {}", cx.detail);
        assert!(cx.detail.starts_with("after munmap returned"), "{id}: {}", cx.detail);
        assert!(cx.detail.ends_with("the change was reclaim"), "{id}: {}", cx.detail);
    }
}

#[test]
fn a_munmap_in_an_mm_a_reclaim_marked_flushes_the_mm_first() {
    // The arm64 kernel fixed: a munmap of the other page after the reclaim calls
    // flush_tlb_batched_pending, a whole-ASID flush, because the mm is marked.
    let spec = CheckSpec { pages: 2, ops: 4, ..race("arm64-linux", "switch,munmap,reclaim") };
    let shape = tlbkit_check::spec::shape(&spec).unwrap();
    let build = Build { checker: true, ..Build::new(2, 2, 2) };
    let texts = registry::with_policy("arm64-linux", &build, Trace { shape: &shape }).unwrap();
    let marked = texts.iter().position(|t| t.contains("is marked tlb_flush_batched")).expect("a munmap of a marked mm");
    assert!(texts[marked..].iter().any(|t| t == "flush_tlb_batched_pending returned"));
}

#[test]
fn a_reclaims_mark_made_while_a_batched_pending_flush_runs_is_not_lost() {
    // Two schedules where a flush_tlb_batched_pending reads the mark, a reclaim's
    // flush returns (the checker forgets the mark), another reclaim marks the mm
    // again and its flush is still in flight when the first one's compare runs.
    // Linux's compare fails (the pending count grew); a compare of the count
    // alone succeeded, cleared the new mark, and the next munmap of that page
    // returned before its invalidation completed: a violation no kernel shows.
    for token in [
        "t5~arm64-linux~2~3~2~4~6~tso~3ff~-~z17.12z4.1z3.1002z3.1001~06a8f502",
        "t5~x86-linux-invlpgb-tlbbatch~3~1~4~2~9~sc~217~-~\
         241z28.3z29.3z4.3z5.1z32.1z17.1z32.1z43.1z74.1z20.1002~309394a9",
    ] {
        let r = replay(token).unwrap();
        assert!(r.counterexample.is_none(), "{token}: {:?}", r.counterexample.map(|c| c.detail));
    }
}

/// The posted targeted tlbbatch as the harness runs it, with or without the
/// `tlbsync()` that begins its switches.
fn targeted(spec: &CheckSpec, switch_tlbsync: bool) -> impl Fn() -> LinuxX86v615 + '_ {
    move || {
        let p = LinuxX86v615::new(spec.cpus, spec.mms + 1, Kernel::Invlpgb)
            .with_small_shapes(spec.asids)
            .with_targeted_tlbbatch();
        if switch_tlbsync {
            p
        } else {
            p.without_switch_tlbsync()
        }
    }
}

#[test]
fn a_reclaim_that_moves_leaves_its_invlpgbs_to_the_switch() {
    // kswapd queues a page of a global-ASID mm (INVLPGB, no wait) and is
    // preempted before arch_tlbbatch_flush pins it: it finishes on another
    // CPU, whose TLBSYNC waits for none of the first CPU's INVLPGBs, and a CPU
    // on the global ASID ignores the batch's IPI. The first CPU's switch to
    // its next thread waits for them (tlbsync() at the start of
    // switch_mm_irqs_off and enter_lazy_tlb); without that wait the page is
    // freed while a TLB still maps it. One mm on two CPUs, eight operations,
    // exhaustively.
    let spec = CheckSpec {
        cpus: 2,
        mms: 1,
        asids: 2,
        ops: 8,
        pages: 1,
        menu: OpKind::parse("switch,idle,munmap,fault,reclaim").unwrap(),
        mode: Mode::Exhaustive,
        iterations: 10_000_000,
        ..tlbkit_check::spec::default_spec("x86-linux-invlpgb-tlbbatch")
    };
    let without = check_policy(&spec, &targeted(&spec, false)).unwrap();
    let cx = without.counterexample.expect("the missing switch wait is found");
    assert_eq!(cx.property, "no_stale_held", "{}", cx.detail);
    let trace = cx.trace();
    assert!(trace.contains("preempted before arch_tlbbatch_flush"), "{trace}");
    assert!(trace.contains("switches to another kernel thread"), "{trace}");
    // The same search of the code as posted completes clean.
    let with = check_policy(&spec, &targeted(&spec, true)).unwrap();
    assert!(with.explored.complete, "{:?}", with.explored);
    assert!(with.counterexample.is_none(), "{:?}", with.counterexample.map(|c| c.trace()));
    // And the policy's default run finds the missing wait, by the move.
    let spec = tlbkit_check::spec::default_spec("x86-linux-invlpgb-tlbbatch");
    let cx = check_policy(&spec, &targeted(&spec, false)).unwrap().counterexample.expect("found by default");
    assert!(cx.trace().contains("preempted before arch_tlbbatch_flush"), "{}", cx.trace());
}
