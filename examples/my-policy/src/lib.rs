//! A policy of your own, the way tlbkit expects one: tlbkit's worked example.
//!
//! The change it models: FreeBSD arm64 invalidates every user page with a
//! broadcast `TLBI ...IS` (`pmap_s1_invalidate_page`, `_range`, `_all`), even
//! for a process that has only ever run on the CPU that flushes, whose entries
//! no other TLB can hold. Ryan Roberts' `active_cpu` patch for Linux arm64
//! (RFC, 2025; `arm64-linux-activecpu`) keeps such flushes local. [`ActiveCpu`]
//! asks what that patch would do for FreeBSD: one word per pmap records where it
//! has run, and a flush of a pmap that only ever ran here issues the same
//! invalidations without `IS`. Everything else is FreeBSD's epoch allocator
//! (with the fix candidate for its ASID-reset finding, so that the check judges
//! this change and not the hazard it would inherit: see the guide's
//! "Findings").
//!
//! # The algorithm
//! - The word is `NONE` for a new pmap ([`Wrap::mm_init`]), then the one CPU that
//!   ran it, then `MULTIPLE`, and never goes back: a CPU that ran the pmap once
//!   may still hold its entries under its ASID after it switched away.
//! - [`Wrap::switch_mm`] records the CPU before FreeBSD's `pmap_activate` writes
//!   TTBR0: one load when the word already says this CPU or `MULTIPLE`;
//!   otherwise a compare-and-exchange from `NONE`, a store of `MULTIPLE` if
//!   another CPU was there first, and `DSB ISHST`, so that the word is visible
//!   before this CPU can walk the pmap's tables.
//! - A user flush loads the word; only if it says this CPU, `DSB ISH` (the page
//!   table stores that made the flush necessary are complete) and a second load
//!   decides. Then FreeBSD's own invalidation runs on a view of the hardware
//!   whose invalidations are local (`Local`), with FreeBSD's barriers.
//!   Otherwise FreeBSD's broadcast runs unchanged.
//!
//! The two barriers make a store-buffering pair: the switching CPU stores the
//! word then walks (reads PTEs); the flushing CPU stores a PTE then reads the
//! word. Either the flusher sees the other CPU and broadcasts, or that CPU's
//! walks see the new PTE.
//!
//! # How it reaches `tlbkit run`, `compare` and `check`
//! This crate implements [`Policy`] by wrapping [`FreebsdEpoch`] with [`Wrap`]
//! (only the changed methods are written; the others are the wrapped policy's),
//! and one entry in tlbkit's policy registry (`crates/registry/src/policies.rs`,
//! the `register!` table) names it `arm64-freebsd-asid-activecpu`, says what it
//! is and how it is built. Nothing else in tlbkit knows about it.
//!
//! The rules a policy follows: shared state lives in `tlbkit_policy::sync`
//! types (so that the checker can preempt the policy at every shared access)
//! and is named for the checker's states and counterexamples
//! ([`Wrap::name_fields`]), the hardware is reached only through [`Hw`], and a
//! flush call returns only when no CPU can use the removed translations any
//! more.
//!
//! # Breaking it on purpose
//! [`Mistake`] re-introduces two ways to get the change wrong, so that a test
//! (`crates/check/tests/example.rs`) can show the checker finds each at its
//! default settings: recording only the last CPU, and deciding on the first
//! load without the barrier.
#![no_std]
#![deny(missing_docs)]

extern crate alloc;

// ANCHOR: policy
use alloc::vec::Vec;
use tlbkit_policy::asid::FreebsdEpoch;
use tlbkit_policy::sync::{fence, AtomicU32, Ordering};
use tlbkit_policy::wrap::{Wrap, WrapHw};
use tlbkit_policy::{Access, Barrier, Domain, Fields, Hw, MmId, Policy, Scope, Tlbi, Value, VirtAddr};

/// The word of a pmap that never ran.
pub const NONE: u32 = u32::MAX;
/// The word of a pmap that ran on more than one CPU.
pub const MULTIPLE: u32 = u32::MAX - 1;

/// A way to get the change wrong, for tests and the guide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mistake {
    /// The switch stores the CPU it runs on, whatever the word said: the word
    /// names the last CPU, and a CPU that ran the pmap before still holds its
    /// entries when a flush from the new one stays local.
    LastCpuOnly,
    /// A flush decides on its first load of the word, without `DSB ISH` and a
    /// second load: the load can pass the PTE store still in the store buffer,
    /// and a CPU switching in meanwhile walks the old PTE.
    EarlyRead,
}

/// A pmap's word, alone on its cache line as the kernel would lay it out.
#[repr(C, align(64))]
struct Word(AtomicU32);

/// FreeBSD arm64's epoch ASIDs, with user flushes of a pmap that only ever ran
/// on the flushing CPU kept local.
pub struct ActiveCpu {
    inner: FreebsdEpoch,
    /// Per pmap slot: where it has run ([`NONE`], a CPU, [`MULTIPLE`]).
    words: Vec<Word>,
    mistake: Option<Mistake>,
}

impl ActiveCpu {
    /// Returns `inner`, for `max_mms` pmap slots, with the change.
    pub fn new(inner: FreebsdEpoch, max_mms: usize) -> Self {
        ActiveCpu { inner, words: (0..max_mms).map(|_| Word(AtomicU32::new(NONE))).collect(), mistake: None }
    }

    /// Returns this policy with `mistake` made.
    pub fn with_mistake(mut self, mistake: Mistake) -> Self {
        self.mistake = Some(mistake);
        self
    }

    /// Returns the word of the pmap in slot `mm`.
    pub fn word(&self, mm: MmId) -> u32 {
        // Relaxed: a snapshot for tests.
        self.words[mm.index()].0.load(Ordering::Relaxed)
    }

    /// Records, before TTBR0 is written, that this CPU runs `mm`.
    fn record<H: Hw>(&self, hw: &H, mm: MmId) {
        let word = &self.words[mm.index()].0;
        let (addr, me) = (word.as_ptr() as usize, hw.cpu().0);
        hw.shared(addr, Access::Read);
        // Relaxed: only this CPU makes the word say this CPU, and MULTIPLE is
        // final; a stale value only sends us down the update below.
        let mut seen = word.load(Ordering::Relaxed);
        if seen == me || seen == MULTIPLE {
            return;
        }
        if self.mistake == Some(Mistake::LastCpuOnly) {
            hw.shared(addr, Access::Write);
            // Relaxed: ordered before the walks by the DSB below.
            word.store(me, Ordering::Relaxed);
        } else {
            if seen == NONE {
                hw.shared(addr, Access::Rmw);
                // Relaxed: ordered before the walks by the DSB below.
                seen = match word.compare_exchange(NONE, me, Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(old) | Err(old) => old,
                };
            }
            if seen != NONE {
                // Another CPU ran it, or won the race to be the first.
                hw.shared(addr, Access::Write);
                // Relaxed: ordered before the walks by the DSB below.
                word.store(MULTIPLE, Ordering::Relaxed);
            }
        }
        // DSB ISHST: the word is visible before this CPU walks the tables; the
        // SeqCst fence stands for it to the checker's store buffers.
        fence(Ordering::SeqCst);
        hw.barrier(Barrier::DsbSt(Domain::InnerShareable));
    }

    /// Returns whether a user flush of `mm` may stay on this CPU, having
    /// issued the barrier the decision needs.
    fn only_here<H: Hw>(&self, hw: &H, mm: MmId) -> bool {
        let word = &self.words[mm.index()].0;
        let (addr, me) = (word.as_ptr() as usize, hw.cpu().0);
        hw.shared(addr, Access::Read);
        // Relaxed: speculative; acted on only after the barrier and a second load.
        let first = word.load(Ordering::Relaxed);
        if first != me || self.mistake == Some(Mistake::EarlyRead) {
            return first == me;
        }
        // DSB ISH: the PTE stores are complete before the word is loaded again
        // (the flusher's half of the pair; the SeqCst fence stands for it).
        fence(Ordering::SeqCst);
        hw.barrier(Barrier::Dsb(Domain::InnerShareable));
        hw.shared(addr, Access::Read);
        // Relaxed: ordered after the PTE stores by the barrier above.
        word.load(Ordering::Relaxed) == me
    }
}

impl Wrap for ActiveCpu {
    type Inner = FreebsdEpoch;

    fn inner(&self) -> &FreebsdEpoch {
        &self.inner
    }

    fn mm_init(&self, mm: MmId) {
        self.inner.mm_init(mm);
        // Relaxed: the new pmap reaches other CPUs through the kernel's own
        // hand-off (fork, wake-up), which orders this store before their reads.
        self.words[mm.index()].0.store(NONE, Ordering::Relaxed);
    }

    fn switch_mm<H: Hw>(&self, hw: &H, next: MmId) {
        if !next.is_kernel() {
            self.record(hw, next);
        }
        self.inner.switch_mm(hw, next)
    }

    fn flush_page<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        if self.only_here(hw, mm) {
            self.inner.flush_page(&Local::of(hw), mm, va)
        } else {
            self.inner.flush_page(hw, mm, va)
        }
    }

    fn flush_range<H: Hw>(&self, hw: &H, mm: MmId, start: VirtAddr, pages: u64) {
        if self.only_here(hw, mm) {
            self.inner.flush_range(&Local::of(hw), mm, start, pages)
        } else {
            self.inner.flush_range(hw, mm, start, pages)
        }
    }

    fn flush_mm<H: Hw>(&self, hw: &H, mm: MmId) {
        if self.only_here(hw, mm) {
            self.inner.flush_mm(&Local::of(hw), mm)
        } else {
            self.inner.flush_mm(hw, mm)
        }
    }

    fn name_fields(&self, f: &mut dyn Fields) {
        self.inner.name_fields(f);
        for (m, w) in self.words.iter().enumerate() {
            f.add(&w.0, format_args!("pmap[{m}].pm_active_cpu"), Value::Custom(show_word));
        }
    }
}

/// Shows a word: `none`, `multiple` or the CPU.
fn show_word(v: u64, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    match v as u32 {
        NONE => f.write_str("none"),
        MULTIPLE => f.write_str("multiple"),
        c => write!(f, "cpu{c}"),
    }
}

/// A view of the hardware whose TLB invalidations stay on this CPU (`TLBI
/// VAE1`, `ASIDE1`: the same operations without `IS`), everything else as the
/// hardware does it. FreeBSD's arm64 flushes send no IPIs; a handler sent
/// through it would flush locally on its target.
struct Local<H: Hw> {
    /// The hardware, lent for the call that made the view.
    hw: *const H,
}

impl<H: Hw> Local<H> {
    fn of(hw: &H) -> Self {
        Local { hw }
    }
}

impl<H: Hw> WrapHw for Local<H> {
    type Inner = H;
    type Carry = ();

    fn inner(&self) -> &H {
        // SAFETY: made from a live `&H` inside the call that lent it (`of`, or
        // `on_target` in a handler), and used only within that call.
        unsafe { &*self.hw }
    }

    fn carry(&self) {}

    fn on_target(_: &(), hw: &H) -> Self {
        Local::of(hw)
    }

    fn tlbi(&self, op: Tlbi, _scope: Scope) {
        self.inner().tlbi(op, Scope::Local)
    }
}

// ANCHOR_END: policy

#[cfg(test)]
mod tests {
    extern crate std;
    use super::{ActiveCpu, Mistake, MULTIPLE, NONE};
    use std::string::String;
    use std::vec::Vec;
    use tlbkit_policy::asid::freebsd_epoch::Variant;
    use tlbkit_policy::asid::FreebsdEpoch;
    use tlbkit_policy::testhw::{cpus_with_barriers, init_mms, Rec};
    use tlbkit_policy::{MmId, Policy, VirtAddr};

    fn policy(mistake: Option<Mistake>) -> (ActiveCpu, Vec<Rec>) {
        let p = ActiveCpu::new(FreebsdEpoch::new(2, 4, 8).with_variant(Variant::ReservedTtbr0), 4);
        let p = match mistake {
            Some(m) => p.with_mistake(m),
            None => p,
        };
        init_mms(&p, 1..=3);
        (p, cpus_with_barriers(2))
    }

    /// The scopes of the TLBIs in `cpu`'s log since the last call.
    fn scopes(cpu: &Rec) -> Vec<String> {
        cpu.take()
            .into_iter()
            .filter(|e| e.starts_with("tlbi "))
            .map(|e| e.rsplit(' ').next().unwrap().into())
            .collect()
    }

    #[test]
    fn the_word_goes_none_then_one_cpu_then_multiple_and_stays() {
        let (p, cpus) = policy(None);
        let mm = MmId(1);
        assert_eq!(p.word(mm), NONE);
        p.switch_mm(&cpus[1], mm);
        assert_eq!(p.word(mm), 1);
        p.switch_mm(&cpus[1], MmId(2));
        p.switch_mm(&cpus[1], mm);
        assert_eq!(p.word(mm), 1);
        p.switch_mm(&cpus[0], mm);
        assert_eq!(p.word(mm), MULTIPLE);
        p.switch_mm(&cpus[0], MmId(2));
        p.switch_mm(&cpus[1], MmId(3));
        p.switch_mm(&cpus[0], mm);
        assert_eq!(p.word(mm), MULTIPLE, "it never goes back");
        p.mm_init(mm);
        assert_eq!(p.word(mm), NONE, "a new pmap in the slot starts again");
    }

    #[test]
    fn a_pmap_that_only_ran_here_is_flushed_locally_and_any_other_by_broadcast() {
        let (p, cpus) = policy(None);
        p.switch_mm(&cpus[0], MmId(1));
        scopes(&cpus[0]);
        p.flush_page(&cpus[0], MmId(1), VirtAddr(0x40_0000));
        p.flush_range(&cpus[0], MmId(1), VirtAddr(0x40_0000), 2);
        p.flush_mm(&cpus[0], MmId(1));
        assert_eq!(scopes(&cpus[0]), ["Local"; 4]);
        // From a CPU that never ran it: broadcast.
        p.flush_page(&cpus[1], MmId(1), VirtAddr(0x40_0000));
        assert_eq!(scopes(&cpus[1]), ["Broadcast"]);
        // Once both ran it, even the first CPU broadcasts.
        p.switch_mm(&cpus[1], MmId(1));
        p.flush_page(&cpus[0], MmId(1), VirtAddr(0x40_0000));
        assert_eq!(scopes(&cpus[0]), ["Broadcast"]);
    }

    #[test]
    fn the_mistakes_change_what_they_say() {
        // LastCpuOnly: the word follows the last CPU, so the first CPU's flush
        // of a pmap the second ran stays local on the second.
        let (p, cpus) = policy(Some(Mistake::LastCpuOnly));
        p.switch_mm(&cpus[0], MmId(1));
        p.switch_mm(&cpus[1], MmId(1));
        assert_eq!(p.word(MmId(1)), 1);
        scopes(&cpus[1]);
        p.flush_page(&cpus[1], MmId(1), VirtAddr(0x40_0000));
        assert_eq!(scopes(&cpus[1]), ["Local"]);
        // EarlyRead: a local flush without the DSB ISH and second load.
        let (p, cpus) = policy(Some(Mistake::EarlyRead));
        p.switch_mm(&cpus[0], MmId(1));
        cpus[0].take();
        p.flush_page(&cpus[0], MmId(1), VirtAddr(0x40_0000));
        let log = cpus[0].take();
        let first_tlbi = log.iter().position(|e| e.starts_with("tlbi ")).unwrap();
        assert!(!log[..first_tlbi].iter().any(|e| e == "barrier Dsb(InnerShareable)"), "{log:?}");
    }
}
