//! Two flushes of one address space at once. Linux zaps
//! pages under the `mmap_lock` read side (`madvise(MADV_DONTNEED)`, a `munmap`
//! after its downgrade) and reclaim under no `mmap_lock` at all, and flushes
//! after dropping the PTE lock, so flushes of one mm overlap; x86's `tlb_gen`
//! exists for exactly that. [`PartialFlush`] wraps the real `x86-linux-pcid`
//! and breaks one thing in the flushes of single pages: where `flush_tlb_func`
//! must flush the whole PCID because the request is not the mm's newest
//! generation (`f->new_tlb_gen == local_tlb_gen + 1 && f->new_tlb_gen ==
//! mm_tlb_gen` fails), it invalidates only the request's page, and then records
//! the mm's newest generation as done as the real one does. A second flush of
//! the same mm, for another page, that bumped the generation meanwhile finds its
//! work done and returns early: its page stays cached. The checker finds that
//! whenever two CPUs run threads of one mm with two pages.

use tlbkit_check::ops::OpKind;
use tlbkit_check::run::check_policy;
use tlbkit_check::spec::default_spec;
use tlbkit_check::{check, CheckReport, CheckSpec, Mode};
use tlbkit_policy::asid::linux_pcid::LinuxX86;
use tlbkit_policy::wrap::{Wrap, WrapHw};
use tlbkit_policy::{Hw, MmId, Policy, Scope};
use tlbkit_policy::{Tlbi, VirtAddr};

use crate::common;

/// The hardware as a single-page flush of [`PartialFlush`] sees it, locally and
/// in the IPI handlers it sends: a whole-PCID invalidation becomes the
/// invalidation of the request's page alone.
///
/// It holds a pointer, not a reference: an IPI handler is given `&Self` of the
/// sender's type, whose lifetime cannot name the target CPU's shorter borrow.
struct OnePage<H> {
    hw: *const H,
    va: VirtAddr,
}

impl<H: Hw> OnePage<H> {
    fn new(hw: &H, va: VirtAddr) -> Self {
        OnePage { hw, va }
    }
}

impl<H: Hw> WrapHw for OnePage<H> {
    type Inner = H;
    type Carry = VirtAddr;
    fn inner(&self) -> &H {
        // SAFETY: every `OnePage` is made from a live `&H` and dropped before the
        // call that lent it returns (a flush, or an IPI handler).
        unsafe { &*self.hw }
    }
    fn carry(&self) -> VirtAddr {
        self.va
    }
    fn on_target(va: &VirtAddr, hw: &H) -> Self {
        OnePage::new(hw, *va)
    }
    fn tlbi(&self, op: Tlbi, scope: Scope) {
        match op {
            // The broken part: the page of this request instead of the whole PCID.
            Tlbi::Asid(asid) => self.inner().tlbi(Tlbi::Va { asid, va: self.va }, scope),
            op => self.inner().tlbi(op, scope),
        }
    }
}

/// `x86-linux-pcid` whose single-page flushes do a partial flush where a full
/// one is due (see the file's documentation); everything else is the real
/// policy's.
struct PartialFlush(LinuxX86);

impl Wrap for PartialFlush {
    type Inner = LinuxX86;
    fn inner(&self) -> &LinuxX86 {
        &self.0
    }
    fn flush_page<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        self.0.flush_page(&OnePage::new(hw, va), mm, va)
    }
    fn flush_range<H: Hw>(&self, hw: &H, mm: MmId, start: VirtAddr, pages: u64) {
        if pages == 1 {
            self.0.flush_range(&OnePage::new(hw, start), mm, start, pages)
        } else {
            self.0.flush_range(hw, mm, start, pages)
        }
    }
}

/// A small exhaustive check of `policy`: 2 CPUs, `mms` address spaces of 2
/// pages, its default ASID space, `ops` operations of the kinds in `menu`.
fn small(policy: &str, mms: usize, ops: usize, menu: &str) -> CheckSpec {
    CheckSpec { mms, ops, menu: OpKind::parse(menu).unwrap(), ..common::small_spec(policy, 2, ops) }
}

fn partial_flush(spec: &CheckSpec) -> CheckReport {
    check_policy(spec, &|| PartialFlush(LinuxX86::new(spec.cpus, spec.mms + 1, true))).unwrap()
}

/// The default run (up to 300,000 PCT schedules at 3 CPUs, 3 address spaces of
/// 2 pages, 9 operations): it finds the lost flush within its first schedules.
#[test]
fn the_default_run_finds_a_partial_flush_that_claims_a_later_generation() {
    let spec = default_spec("x86-linux-pcid");
    assert_eq!((spec.cpus, spec.mms, spec.pages, spec.mode), (3, 3, 2, Mode::Pct));
    let r = partial_flush(&spec);
    let cx = r.counterexample.expect("the lost flush is found by the default run");
    assert!(matches!(cx.property, "no_stale_held" | "no_stale_use"), "{}: {}", cx.property, cx.detail);
    assert!(cx.trace().contains("tlb_gen"), "{}", cx.trace());
}

#[test]
fn two_flushes_of_one_mm_at_once_catch_a_partial_flush_that_claims_a_later_generation() {
    // Two CPUs run threads of one mm with two pages and zap one page each: the
    // second flush finds the generation done by the first's partial flush.
    let r = partial_flush(&small("x86-linux-pcid", 1, 5, "switch,munmap,madvise,fault"));
    let cx = r.counterexample.expect("the lost flush is found with two pages");
    assert!(matches!(cx.property, "no_stale_held" | "no_stale_use"), "{}: {}", cx.property, cx.detail);
    let trace = cx.trace();
    for page in ["0x400000", "0x401000"] {
        assert!(trace.contains(&format!("PTE of {page} in mm1 cleared")), "{trace}");
    }
    assert!(trace.contains("tlb_gen"), "{trace}");
}

#[test]
fn with_one_page_the_partial_flush_is_never_caught_since_flushes_of_one_mm_cover_one_page() {
    // The same broken policy, on the shape before address spaces had two pages:
    // every flush of one page of an mm covers the same page, so the lost one's
    // page went with the first. The search is complete and finds nothing, which
    // is why the default shape needs two pages.
    let spec = CheckSpec { pages: 1, ..small("x86-linux-pcid", 1, 5, "switch,munmap,madvise,fault") };
    let r = partial_flush(&spec);
    assert!(r.explored.complete && r.counterexample.is_none(), "{:?}", r.counterexample.map(|c| c.trace()));
}

#[test]
fn the_real_policies_pass_two_threads_of_one_mm_zapping_its_two_pages_at_once() {
    // Every Linux policy, where zaps of one mm overlap; and a FreeBSD one, where
    // PMAP_LOCK keeps them apart. Two operations each: both CPUs switch in, then
    // zap a page each.
    for policy in ["x86-linux-pcid", "x86-linux-nopcid", "arm64-linux", "arm64-linux-skipbcast", "x86-freebsd-gen"] {
        let r = check(&small(policy, 1, 4, "switch,munmap,madvise")).unwrap();
        assert!(r.explored.complete, "{policy}: stopped early");
        assert!(r.counterexample.is_none(), "{policy}: {:?}", r.counterexample.map(|c| c.trace()));
        assert!(r.explored.states > 100, "{policy}: only {} states", r.explored.states);
    }
}
