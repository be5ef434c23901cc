//! Which of a policy's hooks a check called, and how often: the first thing
//! to read when a check says "no violation" of a change (a hook it never
//! called is code it never ran).
//!
//! Every policy a check's search builds is wrapped in [`Counted`] (by the
//! searches' runners in `crate::run`), which adds one to its hook's counter
//! and calls the policy's own method. The counters are the search's
//! ([`Tally`], on the stack of the call that runs it and lent to every policy
//! it builds), outside the arena and outside the policy's named state, so
//! they change no state, hash or schedule; they are plain atomics, since the
//! workers of a parallel search share them.

use crate::ops::OpKind;
use crate::shape::{KernelBug, Shape};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use tlbkit_policy::wrap::Wrap;
use tlbkit_policy::{Hw, Lazy, MmId, Policy, Tick, VirtAddr};

/// A hook counted: its place in [`HOOKS`].
#[derive(Clone, Copy)]
enum Hook {
    MmInit,
    MmRelease,
    SwitchMm,
    EnterLazy,
    FlushPage,
    FlushRange,
    FlushMm,
    FlushBatch,
    TlbbatchAddPending,
    FlushBatchedPending,
    FlushKernelRange,
    Tick,
}

/// The hooks counted, in the order of the `Policy` trait (and of the private `Hook`).
pub const HOOKS: [&str; 12] = [
    "mm_init",
    "mm_release",
    "switch_mm",
    "enter_lazy",
    "flush_page",
    "flush_range",
    "flush_mm",
    "flush_batch",
    "tlbbatch_add_pending",
    "flush_batched_pending",
    "flush_kernel_range",
    "tick",
];

/// One check's counters, one per entry of [`HOOKS`], and whether the
/// policy works at ticks (else the checker never calls `tick`).
pub struct Tally {
    calls: [AtomicU64; HOOKS.len()],
    ticks: AtomicBool,
    /// The most pages one `flush_range` call asked for.
    range_pages: AtomicU64,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            calls: [const { AtomicU64::new(0) }; HOOKS.len()],
            ticks: AtomicBool::new(false),
            range_pages: AtomicU64::new(0),
        }
    }
}

/// What of a check's shape decides which hooks its operations can call: the
/// menu, the kernel (Linux or FreeBSD), the operations of an execution and a
/// zoo entry's kernel bug.
#[derive(Clone, Copy, Debug)]
pub struct Reach {
    /// The kinds of operation CPUs may start (bits of [`OpKind`]).
    pub menu: u32,
    /// Whether the kernel is Linux's (else FreeBSD's).
    pub linux: bool,
    /// Kernel operations per execution.
    pub ops: usize,
    /// Whether an unmapped page table is flushed by its range, as before
    /// 3ef938c35035 (the zoo's [`KernelBug::CollapseRangeFlush`]).
    pub collapse_range: bool,
}

impl Reach {
    /// Returns what `shape` lets its operations reach.
    pub fn of(shape: &Shape) -> Reach {
        Reach {
            menu: shape.menu,
            linux: shape.linux,
            ops: shape.ops,
            collapse_range: shape.bug == Some(KernelBug::CollapseRangeFlush),
        }
    }
}

/// The kinds of operation whose kernel paths call each hook (in the order
/// of [`HOOKS`]; `crate::ops`) under the kernel `r` says: a hook none of the
/// menu's kinds calls cannot run. `mm_init` runs as every address space is
/// made; `flush_kernel_range` no operation calls; `flush_batched_pending`
/// needs a reclaim to mark an mm and then an unmap (below). A `munmap` of
/// one page calls `flush_page` (`ops::pages`); `flush_range` comes from
/// Linux's `madvise(MADV_DONTNEED)` and, before 3ef938c35035, a collapsed
/// page table; FreeBSD's page daemon invalidates each page it takes
/// (`flush_page`, `shape::Reclaim::FreebsdPageDaemon`), where Linux batches
/// reclaim's flushes.
fn callers(hook: usize, r: &Reach) -> u32 {
    use OpKind::*;
    let any = |kinds: &[OpKind]| kinds.iter().fold(0, |m, k| m | k.bit());
    match HOOKS[hook] {
        "mm_release" => any(&[Exit]),
        "switch_mm" => any(&[Switch]),
        // An exiting task's CPU goes idle.
        "enter_lazy" => any(&[Idle, Exit]),
        "flush_page" if r.linux => any(&[Munmap, Cow, Migrate]),
        // FreeBSD's page daemon; no migration or reclaimed pairs.
        "flush_page" => any(&[Munmap, Reclaim, Cow]),
        "flush_range" if r.collapse_range => any(&[Madvise, UnmapTable]),
        "flush_range" => any(&[Madvise]),
        "flush_mm" => any(&[UnmapTable, Exit]),
        "flush_batch" | "tlbbatch_add_pending" | "flush_batched_pending" => any(&[Reclaim, Reclaim2]),
        "tick" => any(&[Switch, Idle, Tick, Exit]),
        _ => 0,
    }
}

/// Says why a check of `r` cannot call hook `k`, where the shape alone
/// decides it.
fn unreachable(k: usize, r: &Reach, ticks: bool) -> Option<String> {
    let name = HOOKS[k];
    if name == "mm_init" {
        return None;
    }
    if name == "flush_kernel_range" {
        return Some("no operation of the checker calls it".into());
    }
    if name == "tick" && !ticks {
        return Some("the policy does not work at ticks".into());
    }
    let batched = matches!(name, "flush_batch" | "tlbbatch_add_pending" | "flush_batched_pending");
    if batched && !r.linux {
        return Some("FreeBSD's page daemon invalidates each page it takes with flush_page: only Linux batches".into());
    }
    if name == "flush_range" && !r.linux {
        return Some(
            "FreeBSD's kernel here invalidates a munmap's page with flush_page, a page table's pmap with flush_mm"
                .into(),
        );
    }
    let callers = callers(k, r);
    if r.menu & callers == 0 {
        return Some(format!("the menu has none of {}", OpKind::names(callers).replace(',', ", ")));
    }
    // A process's own operations come after its CPU's switch to it.
    let user = OpKind::Munmap.bit() | OpKind::Madvise.bit() | OpKind::Cow.bit() | OpKind::UnmapTable.bit();
    if r.ops < 2 && r.menu & callers & !user == 0 {
        return Some(format!(
            "an execution has {} operation (ops {}): a process's {} comes after its CPU's switch to it",
            r.ops,
            r.ops,
            OpKind::names(r.menu & callers).replace(',', " or ")
        ));
    }
    if name == "flush_batched_pending" {
        let unmaps = OpKind::Munmap.bit() | OpKind::Madvise.bit() | OpKind::UnmapTable.bit();
        if r.menu & unmaps == 0 {
            return Some(format!("the menu has none of {}", OpKind::names(unmaps).replace(',', ", ")));
        }
        if r.ops < 2 {
            return Some(format!(
                "an execution has {} operation (ops {}): it needs a reclaim, then a munmap or madvise of that process",
                r.ops, r.ops
            ));
        }
    }
    None
}

/// A hook and the times a check called it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct HookCount {
    /// Its name ([`HOOKS`]).
    pub hook: &'static str,
    /// Calls over every execution of the check.
    pub calls: u64,
    /// For a hook never called that the shape cannot call: why (no
    /// operation of the menu calls it, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unreachable: Option<String>,
    /// For `flush_range` called: the most pages one call asked for. A
    /// policy's path for longer ranges (x86's `tlb_single_page_flush_ceiling`,
    /// arm64's `MAX_TLBI_OPS`) runs only past it: the checker's `madvise`
    /// zaps one page, a collapsed page table (`--bug`) `--pages` pages, a
    /// contiguous block its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub most_pages: Option<u64>,
}

impl Tally {
    fn add(&self, hook: Hook) {
        // Relaxed: a count read once the check is over.
        self.calls[hook as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Returns every hook with its calls so far, and for each never called
    /// that a check of `reach` cannot call, why.
    pub fn counts(&self, reach: &Reach) -> Vec<HookCount> {
        // Relaxed: read after the workers were joined.
        let ticks = self.ticks.load(Ordering::Relaxed);
        HOOKS
            .iter()
            .zip(&self.calls)
            .enumerate()
            .map(|(k, (&hook, c))| {
                let calls = c.load(Ordering::Relaxed);
                let most = self.range_pages.load(Ordering::Relaxed);
                HookCount {
                    hook,
                    calls,
                    unreachable: if calls == 0 { unreachable(k, reach, ticks) } else { None },
                    most_pages: (hook == "flush_range" && calls > 0).then_some(most),
                }
            })
            .collect()
    }
}

/// Returns `a` and `b` summed hook by hook (a portfolio's shapes); either may
/// be empty (a check that counted nothing).
pub fn sum(a: &[HookCount], b: &[HookCount]) -> Vec<HookCount> {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_vec(),
        (_, true) => a.to_vec(),
        // A hook no shape called is unreachable where every shape says so.
        _ => a
            .iter()
            .zip(b)
            .map(|(x, y)| HookCount {
                hook: x.hook,
                calls: x.calls + y.calls,
                unreachable: x.unreachable.clone().filter(|_| y.unreachable.is_some()),
                most_pages: x.most_pages.max(y.most_pages),
            })
            .collect(),
    }
}

/// A policy whose hook calls are counted into a [`Tally`].
pub struct Counted<'t, P> {
    inner: P,
    tally: &'t Tally,
}

impl<'t, P: Policy> Counted<'t, P> {
    /// Returns `inner` with its hook calls counted into `tally`.
    pub(crate) fn new(inner: P, tally: &'t Tally) -> Self {
        // Relaxed: every policy a check builds says the same.
        tally.ticks.store(inner.ticks(), Ordering::Relaxed);
        Counted { inner, tally }
    }

    fn count(&self, hook: Hook) {
        self.tally.add(hook);
    }
}

impl<P: Policy> Wrap for Counted<'_, P> {
    type Inner = P;

    fn inner(&self) -> &P {
        &self.inner
    }

    fn mm_init(&self, mm: MmId) {
        self.count(Hook::MmInit);
        self.inner.mm_init(mm)
    }

    fn mm_release<H: Hw>(&self, hw: &H, mm: MmId) {
        self.count(Hook::MmRelease);
        self.inner.mm_release(hw, mm)
    }

    fn switch_mm<H: Hw>(&self, hw: &H, next: MmId) {
        self.count(Hook::SwitchMm);
        self.inner.switch_mm(hw, next)
    }

    fn enter_lazy<H: Hw>(&self, hw: &H, who: Lazy) {
        self.count(Hook::EnterLazy);
        self.inner.enter_lazy(hw, who)
    }

    fn flush_page<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        self.count(Hook::FlushPage);
        self.inner.flush_page(hw, mm, va)
    }

    fn flush_range<H: Hw>(&self, hw: &H, mm: MmId, start: VirtAddr, pages: u64) {
        self.count(Hook::FlushRange);
        // Relaxed: read once the check is over.
        self.tally.range_pages.fetch_max(pages, Ordering::Relaxed);
        self.inner.flush_range(hw, mm, start, pages)
    }

    fn flush_mm<H: Hw>(&self, hw: &H, mm: MmId) {
        self.count(Hook::FlushMm);
        self.inner.flush_mm(hw, mm)
    }

    fn flush_batch<H: Hw>(&self, hw: &H, mms: &[MmId]) {
        self.count(Hook::FlushBatch);
        self.inner.flush_batch(hw, mms)
    }

    fn tlbbatch_add_pending<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        self.count(Hook::TlbbatchAddPending);
        self.inner.tlbbatch_add_pending(hw, mm, va)
    }

    fn flush_batched_pending<H: Hw>(&self, hw: &H, mm: MmId) {
        self.count(Hook::FlushBatchedPending);
        self.inner.flush_batched_pending(hw, mm)
    }

    fn flush_kernel_range<H: Hw>(&self, hw: &H, start: VirtAddr, pages: u64) {
        self.count(Hook::FlushKernelRange);
        self.inner.flush_kernel_range(hw, start, pages)
    }

    fn tick<H: Hw>(&self, hw: &H, at: Tick) {
        self.count(Hook::Tick);
        self.inner.tick(hw, at)
    }
}

/// Returns the report's line of hooks: each called one with its calls, then
/// those never called, each with why where the shape could not call it.
pub fn line(counts: &[HookCount]) -> String {
    let called: Vec<String> = counts
        .iter()
        .filter(|c| c.calls > 0)
        .map(|c| match c.most_pages {
            Some(n) => format!("{} {} (at most {n} page{} a call)", c.hook, c.calls, if n == 1 { "" } else { "s" }),
            None => format!("{} {}", c.hook, c.calls),
        })
        .collect();
    let never: Vec<String> = counts
        .iter()
        .filter(|c| c.calls == 0)
        .map(|c| match &c.unreachable {
            Some(why) => format!("{} ({why})", c.hook),
            None => c.hook.to_string(),
        })
        .collect();
    let mut s = format!("hooks called: {}", if called.is_empty() { "none".into() } else { called.join(", ") });
    if !never.is_empty() {
        s.push_str(&format!("; never called: {}", never.join(", ")));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_what_ran_and_what_never_did() {
        let t = Tally::default();
        t.add(Hook::SwitchMm);
        t.add(Hook::SwitchMm);
        t.add(Hook::FlushPage);
        let c = t.counts(&linux(OpKind::all(), 6));
        assert_eq!(c.len(), HOOKS.len());
        let l = line(&c);
        assert!(l.starts_with("hooks called: switch_mm 2, flush_page 1; never called: mm_init, mm_release, "), "{l}");
        assert!(l.contains("flush_kernel_range (no operation of the checker calls it)"), "{l}");
        assert!(l.ends_with("tick (the policy does not work at ticks)"), "{l}");
        assert_eq!(sum(&c, &c)[2].calls, 4);
        assert_eq!(sum(&[], &c), c);
    }

    #[test]
    fn a_hook_the_menu_cannot_reach_says_so() {
        let t = Tally::default();
        t.ticks.store(true, Ordering::Relaxed);
        let menu = OpKind::Switch.bit() | OpKind::Idle.bit() | OpKind::Munmap.bit();
        let c = t.counts(&linux(menu, 6));
        let why = |h: &str| c.iter().find(|c| c.hook == h).unwrap().unreachable.clone();
        assert_eq!(why("flush_batch").as_deref(), Some("the menu has none of reclaim, reclaim2"));
        assert_eq!(why("mm_release").as_deref(), Some("the menu has none of exit"));
        // In the menu, or only the schedule decides: no reason given.
        assert_eq!((why("flush_page"), why("tick"), why("mm_init")), (None, None, None));
        // With a reclaim but no unmap, flush_batched_pending has nothing to find.
        let c = t.counts(&linux(OpKind::Reclaim.bit() | OpKind::Switch.bit(), 6));
        let why = c.iter().find(|c| c.hook == "flush_batched_pending").unwrap().unreachable.clone();
        assert_eq!(why.as_deref(), Some("the menu has none of munmap, unmap-table, madvise"));
        // A portfolio keeps a reason only where every shape gives it.
        let open = t.counts(&linux(menu | OpKind::Reclaim.bit(), 6));
        assert_eq!(sum(&t.counts(&linux(menu, 6)), &open)[7].unreachable, None);
    }

    /// A Linux shape of `menu` and `ops` operations.
    fn linux(menu: u32, ops: usize) -> Reach {
        Reach { menu, linux: true, ops, collapse_range: false }
    }

    #[test]
    fn a_hook_the_kernel_or_the_bounds_cannot_reach_says_why() {
        let t = Tally::default();
        let why = |r: Reach, h: &str| t.counts(&r).iter().find(|c| c.hook == h).unwrap().unreachable.clone();
        // FreeBSD batches nothing and flushes no range, whatever the menu.
        let bsd = Reach { linux: false, ..linux(OpKind::all(), 6) };
        for h in ["flush_batch", "tlbbatch_add_pending", "flush_batched_pending"] {
            assert!(why(bsd, h).is_some_and(|w| w.starts_with("FreeBSD's page daemon")), "{h}");
        }
        assert!(why(bsd, "flush_range").is_some_and(|w| w.starts_with("FreeBSD's kernel here")));
        assert_eq!(why(bsd, "flush_page"), None);
        // On Linux a range flush needs madvise, unless the zoo's collapse bug
        // flushes an unmapped table by its range.
        let no_madvise = linux(OpKind::all() & !OpKind::Madvise.bit(), 6);
        assert_eq!(why(no_madvise, "flush_range").as_deref(), Some("the menu has none of madvise"));
        assert_eq!(why(Reach { collapse_range: true, ..no_madvise }, "flush_range"), None);
        // A reclaim and then an unmap take two operations.
        let one = why(linux(OpKind::all(), 1), "flush_batched_pending").unwrap();
        assert!(one.starts_with("an execution has 1 operation (ops 1)"), "{one}");
        assert_eq!(why(linux(OpKind::all(), 2), "flush_batched_pending"), None);
        let one = why(linux(OpKind::all(), 1), "flush_range").unwrap();
        assert_eq!(one, "an execution has 1 operation (ops 1): a process's madvise comes after its CPU's switch to it");
    }
}
