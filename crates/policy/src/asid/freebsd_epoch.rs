//! FreeBSD arm64 ASIDs with the epoch allocator (origin 000, `sys/arm64/arm64/pmap.c`,
//! committed as r354286 in November 2019; the functions below are unchanged in
//! freebsd-src 6631b589, read for the findings catalogue).
//!
//! # The algorithm
//! User PTEs carry nG, so TLB entries are tagged with the pmap's ASID and survive
//! a context switch. A set holds a bitmap of `1 << asid_bits` ASIDs, a cursor
//! `asid_next`, an epoch and a spin lock; ASIDs 0 (kernel processes, `pmap0`) and
//! 1 (EFI runtime services) are reserved. A pmap's *cookie* packs `(asid, epoch)`;
//! `pmap0` starts as `(0, INT_MIN)`, a negative epoch that `activate` never
//! reallocates, and `(-1, INT_MAX)` marks a new pmap that gets its ASID at its
//! first activation.
//!
//! - `activate(p)` (`pmap_activate_int`): if `p` is already `curpmap`, only a
//!   `DSB ISH` (an interrupted thread may have issued a TLBI without its DSB).
//!   Otherwise set `curpmap`, `DSB ISH` (the store must be visible before the
//!   epoch is read, so that a concurrent reset sees it), and if `p`'s epoch is not
//!   negative and not current, `alloc(p)`. Then write TTBR0 with the ASID; no
//!   invalidation.
//! - `alloc(p)` (`pmap_alloc_asid`): under the lock, return if `p`'s epoch became
//!   current meanwhile (a reset on another CPU adopted it); search the bitmap from
//!   `asid_next` to the end, then from 2 to `asid_next`; if full, `reset` and
//!   search from 2.
//! - `reset` (`pmap_reset_asid_set`): `epoch += 1` (wrapping to 0 at `INT_MAX`),
//!   one broadcast `TLBI VMALLE1IS` between `DSB ISHST` and `DSB ISH; ISB`, clear
//!   bits `[2, size)`, then for every *other* CPU whose `pc_curpmap` has an ASID
//!   (not -1) re-reserve that ASID and stamp the pmap with the new epoch. The
//!   kernel makes no exception for `pmap0`: an idle CPU's `pmap0` is restamped
//!   `(0, epoch)`, a non-negative epoch, so once a later reset leaves it behind,
//!   its next activation goes through `alloc` and `pmap0` runs on an ordinary
//!   ASID from then on (bit 0 stays set, so ASID 0 is never handed out).
//! - `release(p)`: clear `p`'s bit only if its cookie's epoch is current.
//! - User invalidations are always broadcast: `TLBI VAE1IS` per page, `ASIDE1IS`
//!   for the whole pmap; kernel ones `TLBI VAAE1IS`.
//!
//! # What is guaranteed, and what is not
//! No two pmaps hold the same ASID in the current epoch *by their cookies*. What
//! is **not** guaranteed is that an ASID is handed out again only after every TLB
//! entry tagged with it is gone: the reset's broadcast flush runs while the
//! resetting CPU (which skips itself) and any CPU between its `curpmap` store and
//! its TTBR0 write still have an unreserved ASID in TTBR0, and a speculative walk
//! refills under it after the flush. That ASID is then handed to another pmap, and
//! the CPU that holds the refilled entry can use it under the new owner. The
//! checker finds both windows (`tlbkit list`, findings
//! `freebsd-arm64-asid-reset-self` and `freebsd-arm64-asid-reset-curpmap`; see
//! `docs/findings/freebsd-arm64-asid-reset.md`); [`Variant`] selects the fix
//! candidates that close them, as policies beside this one.
//!
//! The other hazard is the epoch counter's wrap: a pmap idle for a whole cycle of
//! epochs then matches the current epoch with a stale ASID (Alan Cox names it in
//! review D21922; [`FreebsdEpoch::with_epoch_limit`] narrows the counter to any
//! width, and zoo bug [`Bug::FreebsdArm64EpochWrap`], through
//! [`FreebsdEpoch::with_bug`], to one bit at the wrap in `reset`).

use crate::fields::{Fields, Owner, Value};
use crate::hw::{Barrier, Domain, Hw, Note, Root, Scope, Tlbi};
use crate::policy::Policy;
use crate::sync::{AtomicI32, AtomicU32, AtomicU64, Ordering, SpinLock};
use crate::types::{Asid, MmId, VirtAddr};
use crate::zoo::Bug;
use alloc::vec;
use alloc::vec::Vec;

/// The first ASID the allocator hands out; 0 and 1 are reserved.
pub const ASID_FIRST_AVAILABLE: u32 = 2;
/// The ASID of kernel processes (`pmap0`).
pub const ASID_RESERVED_FOR_PID_0: i32 = 0;
/// The largest epoch value plus one: epochs live in `[0, EPOCH_MAX)`.
pub const EPOCH_MAX: i32 = i32::MAX;
/// Where the epoch wraps with zoo bug [`Bug::FreebsdArm64EpochWrap`]: a 1-bit
/// counter, epochs 0 and 1.
pub const ZOO_EPOCH_LIMIT: i32 = 2;

/// Returns the cookie for `(asid, epoch)`.
pub const fn cookie(asid: i32, epoch: i32) -> u64 {
    (asid as u32 as u64) | ((epoch as u32 as u64) << 32)
}

/// Returns the ASID of a cookie (-1 for none yet).
pub const fn cookie_asid(c: u64) -> i32 {
    c as u32 as i32
}

/// Returns the epoch of a cookie.
pub const fn cookie_epoch(c: u64) -> i32 {
    (c >> 32) as u32 as i32
}

/// Which code [`FreebsdEpoch`] runs: FreeBSD's, or a fix candidate for the reset
/// window finding. Each fix is one switch in the faithful code, registered as a
/// policy of its own beside `arm64-freebsd-asid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// FreeBSD's code (`arm64-freebsd-asid`), with the reset window.
    Faithful,
    /// `arm64-freebsd-asid-fix-reserved-ttbr0`, three switches that close both
    /// windows of the finding:
    /// 1. `activate` loads the reserved empty table into TTBR0 (ASID 0, never
    ///    handed out) and synchronises it with an `ISB` *before* it stores
    ///    `curpmap`, so that from the `curpmap` store to the TTBR0 write of the new
    ///    pmap no walk uses the old pmap's ASID (on the resetting CPU: window 1; on
    ///    a CPU in the middle of its switch: window 2). Linux loads its reserved
    ///    TTBR0 around a switch for the same reason (`cpu_set_reserved_ttbr0`);
    ///    the illumos aarch64 HAT ports set `TCR_EL1.EPD0` when they switch to the
    ///    kernel HAT.
    /// 2. `reset` issues its broadcast flush *after* the loop over `pc_curpmap`,
    ///    not before it: otherwise a CPU that runs its old pmap through the flush,
    ///    refills under its ASID and then switches before the loop reads its
    ///    `curpmap` keeps an entry under an ASID the loop never reserved (the
    ///    checker found this with 1 alone).
    /// 3. `reset` restamps only a `curpmap` whose cookie is of the epoch being
    ///    closed (or pmap0's negative one): a stale cookie belongs to a CPU waiting
    ///    in `alloc`, and its old number may be another running pmap's now; that
    ///    CPU then allocates afresh under the lock. (Reasoned from the code; the
    ///    checker has not been shown to need it at the bounds it was run at.)
    ///
    /// Cost: one more TTBR0 write and `ISB` per switch to another pmap.
    ReservedTtbr0,
    /// `arm64-freebsd-asid-fix-self`: `reset` first loads the reserved empty table
    /// into the resetting CPU's own TTBR0 (it is about to write TTBR0 anyway), so
    /// the ASID it skips can no longer be refilled here after the flush. This
    /// closes window 1 only, at no cost outside resets: a CPU between its
    /// `curpmap` store and its TTBR0 write still has an ASID in TTBR0 that the
    /// reset does not reserve (window 2), which is why this variant is in the
    /// catalogue: the checker finds window 2 on it alone. (Reserving the own ASID,
    /// as Linux's `flush_context` does, would close window 1 too, but needs one
    /// ASID more than FreeBSD's "fewer CPUs than ASIDs" KASSERT allows for.)
    ParkSelf,
}

impl Variant {
    /// Every variant, the faithful one first.
    pub const ALL: [Variant; 3] = [Variant::Faithful, Variant::ReservedTtbr0, Variant::ParkSelf];

    /// Returns the registry name of the policy this variant is.
    pub const fn policy_name(self) -> &'static str {
        match self {
            Variant::Faithful => "arm64-freebsd-asid",
            Variant::ReservedTtbr0 => "arm64-freebsd-asid-fix-reserved-ttbr0",
            Variant::ParkSelf => "arm64-freebsd-asid-fix-self",
        }
    }

    /// Returns the variant registered as `name`, if any.
    pub fn from_policy_name(name: &str) -> Option<Variant> {
        Variant::ALL.into_iter().find(|v| v.policy_name() == name)
    }
}

/// The state under `asid_set_mutex`.
struct AsidSet {
    /// One bit per ASID: allocated in the current epoch.
    map: Vec<u64>,
    /// Where the next search starts.
    next: u32,
}

impl AsidSet {
    fn test(&self, a: u32) -> bool {
        self.map[(a / 64) as usize] & (1 << (a % 64)) != 0
    }
    fn set(&mut self, a: u32) {
        self.map[(a / 64) as usize] |= 1 << (a % 64);
    }
    fn clear(&mut self, a: u32) {
        self.map[(a / 64) as usize] &= !(1 << (a % 64));
    }
    /// Returns the first clear bit in `[from, to)` (FreeBSD `bit_ffc_at`).
    fn first_clear(&self, from: u32, to: u32) -> Option<u32> {
        (from..to).find(|&a| !self.test(a))
    }
}

/// The FreeBSD arm64 epoch ASID allocator and its pmap activation/invalidation.
pub struct FreebsdEpoch {
    asid_bits: u8,
    size: u32,
    /// Epochs wrap to 0 when they reach this value (`INT_MAX` in the kernel).
    epoch_limit: i32,
    set: SpinLock<AsidSet>,
    /// `asid_epoch`: written under the lock, read without it in `activate`.
    epoch: AtomicI32,
    /// Per pmap slot: its cookie.
    cookies: Vec<AtomicU64>,
    /// Per CPU: the pmap in TTBR0 (`pc_curpmap`).
    curpmap: Vec<AtomicU32>,
    /// The zoo bug re-introduced, if any (see [`FreebsdEpoch::with_bug`]).
    bug: Option<Bug>,
    /// FreeBSD's code or a fix candidate (see [`FreebsdEpoch::with_variant`]).
    variant: Variant,
}

impl FreebsdEpoch {
    /// Returns the allocator for `ncpus` CPUs, `max_mms` pmap slots and an ASID
    /// width of `asid_bits` (8 or 16, from `ID_AA64MMFR0_EL1.ASIDBits`).
    pub fn new(ncpus: usize, max_mms: usize, asid_bits: u8) -> Self {
        Self::with_epoch_limit(ncpus, max_mms, asid_bits, EPOCH_MAX)
    }

    /// Returns the allocator with epochs wrapping at `epoch_limit` instead of
    /// `INT_MAX`: a narrow epoch counter, for exposing the wrap hazard.
    pub fn with_epoch_limit(ncpus: usize, max_mms: usize, asid_bits: u8, epoch_limit: i32) -> Self {
        // Hardware has 8 or 16 bits; the checker shrinks the space to reach resets.
        debug_assert!((2..=16).contains(&asid_bits));
        debug_assert!(epoch_limit > 0);
        let size = 1u32 << asid_bits;
        let mut set = AsidSet { map: vec![0; size.div_ceil(64) as usize], next: ASID_FIRST_AVAILABLE };
        set.set(0);
        set.set(1);
        let cookies: Vec<AtomicU64> = (0..max_mms.max(1)).map(|_| AtomicU64::new(cookie(-1, EPOCH_MAX))).collect();
        // pmap0: reserved ASID, negative epoch, never reallocated.
        cookies[0].store(cookie(ASID_RESERVED_FOR_PID_0, i32::MIN), Ordering::Relaxed);
        FreebsdEpoch {
            asid_bits,
            size,
            epoch_limit,
            set: SpinLock::new(set),
            epoch: AtomicI32::new(0),
            cookies,
            curpmap: (0..ncpus).map(|_| AtomicU32::new(MmId::KERNEL.0)).collect(),
            bug: None,
            variant: Variant::Faithful,
        }
    }

    /// Returns this allocator running `variant`: FreeBSD's code or one of the fix
    /// candidates for the reset window.
    pub fn with_variant(mut self, variant: Variant) -> Self {
        self.variant = variant;
        self
    }

    /// Returns which code this allocator runs.
    pub fn variant(&self) -> Variant {
        self.variant
    }

    /// Returns this allocator with `bug` re-introduced (see [`crate::zoo`]):
    /// [`Bug::FreebsdArm64EpochWrap`] wraps the epoch at [`ZOO_EPOCH_LIMIT`]
    /// whatever the limit it was built with; [`Bug::FreebsdArm64R355427`]
    /// leaves out the `DSB ISH` of a switch to the pmap already current.
    ///
    /// # Panics
    /// If `bug` is another one, or a bug was re-introduced already.
    pub fn with_bug(mut self, bug: Bug) -> Self {
        assert!(
            matches!(bug, Bug::FreebsdArm64EpochWrap | Bug::FreebsdArm64R355427),
            "{bug} does not apply to the FreeBSD arm64 epoch allocator"
        );
        assert!(self.bug.is_none(), "one zoo bug at a time");
        self.bug = Some(bug);
        self
    }

    /// Returns the zoo bug this allocator re-introduces, if any.
    pub fn bug(&self) -> Option<Bug> {
        self.bug
    }

    /// Returns the cookie of the pmap in slot `mm`.
    pub fn cookie_of(&self, mm: MmId) -> u64 {
        // SeqCst: cookies are written by resets on other CPUs.
        self.cookies[mm.index()].load(Ordering::SeqCst)
    }

    /// Returns the current epoch.
    pub fn epoch(&self) -> i32 {
        // SeqCst: pairs with the store in `reset`.
        self.epoch.load(Ordering::SeqCst)
    }

    /// Returns the hardware tag for a cookie's ASID field (an unallocated `-1`
    /// becomes all ones, truncated to the ASID width as the TLBI operand is).
    fn tag(&self, c: u64) -> Asid {
        let raw = cookie_asid(c) as u32 & (self.size - 1);
        Asid::new(raw, self.asid_bits).unwrap_or(Asid::ZERO)
    }

    /// `pmap_alloc_asid`.
    fn alloc<H: Hw>(&self, hw: &H, mm: MmId) {
        let mut set = self.set.lock();
        // A reset on another CPU may have adopted this pmap while we waited.
        if cookie_epoch(self.cookie_of(mm)) == self.epoch() {
            return;
        }
        let mut asid = set.first_clear(set.next, self.size);
        if asid.is_none() {
            asid = set.first_clear(ASID_FIRST_AVAILABLE, set.next);
        }
        let asid = match asid {
            Some(a) => a,
            None => {
                self.reset(hw, &mut set);
                let a = set.first_clear(ASID_FIRST_AVAILABLE, self.size);
                // Only CPUs other than this one keep ASIDs across a reset, and there
                // are fewer CPUs than ASIDs.
                a.expect("ASID set full right after a reset: more CPUs than ASIDs")
            }
        };
        set.set(asid);
        set.next = asid + 1;
        // SeqCst: other CPUs' resets read and rewrite cookies.
        self.cookies[mm.index()].store(cookie(asid as i32, self.epoch()), Ordering::SeqCst);
    }

    /// `pmap_reset_asid_set`: a new epoch, one broadcast flush, and re-reservation
    /// of the ASIDs the other CPUs are running. Called with the lock held.
    fn reset<H: Hw>(&self, hw: &H, set: &mut AsidSet) {
        let old = self.epoch();
        let mut epoch = old + 1;
        // FreeBSD wraps at INT_MAX. Zoo bug freebsd-arm64-epoch-wrap: a 1-bit epoch, so
        // a pmap idle for two resets finds its stale cookie current again.
        let limit = if self.bug == Some(Bug::FreebsdArm64EpochWrap) { ZOO_EPOCH_LIMIT } else { self.epoch_limit };
        if epoch >= limit {
            epoch = 0;
        }
        // SeqCst: the new epoch must be visible before curpmap of other CPUs is read,
        // pairing with the curpmap store + DSB in `activate`.
        self.epoch.store(epoch, Ordering::SeqCst);
        hw.note(Note::AsidRollover);
        if self.variant == Variant::ParkSelf {
            // Partial fix: this CPU's TTBR0 still holds the ASID the loop below skips.
            hw.write_root(Root::Reserved, Asid::ZERO, true);
            hw.barrier(Barrier::Isb);
        }
        let fix = self.variant == Variant::ReservedTtbr0;
        if !fix {
            Self::flush_all(hw);
        }
        for a in ASID_FIRST_AVAILABLE..self.size {
            set.clear(a);
        }
        let me = hw.cpu().index();
        for (cpu, cur) in self.curpmap.iter().enumerate() {
            if cpu == me {
                continue;
            }
            // SeqCst: pairs with the store in `activate` (see above).
            let p = cur.load(Ordering::SeqCst) as usize;
            let c = self.cookies[p].load(Ordering::SeqCst);
            let asid = cookie_asid(c);
            // Only -1 is skipped: pmap0's (0, INT_MIN) is restamped like any other.
            if asid == -1 {
                continue;
            }
            // Fix candidate: a cookie from an older epoch belongs to a CPU waiting in
            // `alloc`; its number may be another running pmap's now.
            let e = cookie_epoch(c);
            if fix && e >= 0 && e != old {
                continue;
            }
            set.set(asid as u32);
            self.cookies[p].store(cookie(asid, epoch), Ordering::SeqCst);
        }
        if fix {
            // Fix candidate: flush after the loop, so that nothing a CPU filled under
            // an ASID the loop did not reserve outlives the reset.
            Self::flush_all(hw);
        }
    }

    /// The reset's flush: `TLBI VMALLE1IS` between `DSB ISHST` and `DSB ISH; ISB`.
    fn flush_all<H: Hw>(hw: &H) {
        hw.barrier(Barrier::DsbSt(Domain::InnerShareable));
        hw.tlbi(Tlbi::All, Scope::Broadcast);
        hw.barrier(Barrier::Dsb(Domain::InnerShareable));
        hw.barrier(Barrier::Isb);
    }

    /// `pmap_s1_invalidate_*`: `DSB ISHST`, then the TLBIs `ops` makes, then `DSB
    /// ISH; ISB`. The operands are made after the `DSB ISHST`, as FreeBSD reads
    /// `pm_cookie` there (`COOKIE_TO_ASID(pmap->pm_cookie)` after `dsb(ishst)`,
    /// whose `memory` clobber keeps the load after it): the PTE store is visible
    /// before the ASID is read.
    fn invalidate<H: Hw, I: Iterator<Item = Tlbi>>(hw: &H, ops: impl FnOnce() -> I) {
        hw.barrier(Barrier::DsbSt(Domain::InnerShareable));
        for op in ops() {
            hw.tlbi(op, Scope::Broadcast);
        }
        hw.barrier(Barrier::Dsb(Domain::InnerShareable));
        hw.barrier(Barrier::Isb);
    }
}

/// Reads a pmap cookie: `epoch 3, asid 5`, or `none` before the first activation.
fn show_cookie(c: u64, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    match (cookie_epoch(c), cookie_asid(c)) {
        (EPOCH_MAX, -1) => f.write_str("none"),
        (e, -1) => write!(f, "epoch {e}, no asid"),
        (e, a) => write!(f, "epoch {e}, asid {a}"),
    }
}

impl Policy for FreebsdEpoch {
    fn mm_init(&self, mm: MmId) {
        debug_assert!(!mm.is_kernel());
        // SeqCst: published before the pmap is first activated anywhere.
        self.cookies[mm.index()].store(cookie(-1, EPOCH_MAX), Ordering::SeqCst);
    }

    fn mm_release<H: Hw>(&self, _hw: &H, mm: MmId) {
        let mut set = self.set.lock();
        let c = self.cookie_of(mm);
        if cookie_epoch(c) == self.epoch() {
            let a = cookie_asid(c);
            debug_assert!(a >= ASID_FIRST_AVAILABLE as i32 && (a as u32) < self.size);
            set.clear(a as u32);
        }
        self.cookies[mm.index()].store(cookie(-1, EPOCH_MAX), Ordering::SeqCst);
    }

    fn switch_mm<H: Hw>(&self, hw: &H, next: MmId) {
        let cur = &self.curpmap[hw.cpu().index()];
        // SeqCst: see the store below; a same-pmap check needs no ordering of its own.
        if cur.load(Ordering::SeqCst) == next.0 {
            // A preempted thread may have issued a TLBI without its DSB, and
            // finish on another CPU, whose DSB completes none of this CPU's.
            // Zoo: Bug::FreebsdArm64R355427 returns without it.
            if self.bug != Some(Bug::FreebsdArm64R355427) {
                hw.barrier(Barrier::Dsb(Domain::InnerShareable));
            }
            return;
        }
        if self.variant == Variant::ReservedTtbr0 {
            // Fix candidate: no walk under the old ASID from here to the new TTBR0.
            hw.write_root(Root::Reserved, Asid::ZERO, true);
            hw.barrier(Barrier::Isb);
        }
        // SeqCst: curpmap must be visible to a concurrent reset before we read the epoch.
        cur.store(next.0, Ordering::SeqCst);
        hw.barrier(Barrier::Dsb(Domain::InnerShareable));
        let e = cookie_epoch(self.cookie_of(next));
        // pmap0's INT_MIN is negative until a reset restamps it.
        if e >= 0 && e != self.epoch() {
            self.alloc(hw, next);
        }
        let c = self.cookie_of(next);
        hw.write_root(Root::Mm(next), self.tag(c), true);
        hw.barrier(Barrier::Isb);
    }

    fn flush_page<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        Self::invalidate(hw, || core::iter::once(Tlbi::Va { asid: self.tag(self.cookie_of(mm)), va }));
    }

    fn flush_range<H: Hw>(&self, hw: &H, mm: MmId, start: VirtAddr, pages: u64) {
        Self::invalidate(hw, || {
            let asid = self.tag(self.cookie_of(mm));
            (0..pages).map(move |i| Tlbi::Va { asid, va: start.add_pages(i) })
        });
    }

    fn flush_mm<H: Hw>(&self, hw: &H, mm: MmId) {
        Self::invalidate(hw, || core::iter::once(Tlbi::Asid(self.tag(self.cookie_of(mm)))));
    }

    fn flush_kernel_range<H: Hw>(&self, hw: &H, start: VirtAddr, pages: u64) {
        Self::invalidate(hw, || (0..pages).map(|i| Tlbi::VaAllAsids { va: start.add_pages(i) }));
    }

    /// The ASID set under `asid_set_mutex`: its bitmap and its cursor.
    unsafe fn hash_locked(&self, h: &mut dyn core::hash::Hasher) {
        // SAFETY: no CPU runs the policy meanwhile (this function's contract).
        let s = unsafe { self.set.peek() };
        s.map.iter().for_each(|w| h.write_u64(*w));
        h.write_u32(s.next);
    }

    fn name_fields(&self, f: &mut dyn Fields) {
        f.add(&self.set, format_args!("asid_set.asid_set_mutex"), Value::Lock);
        f.add(&self.epoch, format_args!("asid_set.asid_epoch"), Value::Number);
        for (m, c) in self.cookies.iter().enumerate() {
            f.add(c, format_args!("pmap[{m}].pm_cookie"), Value::Custom(show_cookie));
        }
        for (c, p) in self.curpmap.iter().enumerate() {
            f.add(p, format_args!("pc_curpmap[cpu{c}]"), Value::Mm);
            // Only the CPU itself switches its pmap.
            f.own(p, Owner::Cpu { cpu: c as u32, others_read: true });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testhw::{init_mms, Rec};

    fn asid_of(p: &FreebsdEpoch, mm: u32) -> i32 {
        cookie_asid(p.cookie_of(MmId(mm)))
    }

    #[test]
    fn first_activation_allocates_from_two_without_flushing() {
        let p = FreebsdEpoch::new(1, 8, 8);
        let hw = Rec::new(0, 1);
        p.mm_init(MmId(1));
        p.switch_mm(&hw, MmId(1));
        assert_eq!(asid_of(&p, 1), 2);
        assert_eq!(hw.take(), vec!["root Mm(MmId(1)) asid 2 noflush true"]);
    }

    #[test]
    fn exhaustion_resets_epoch_with_one_broadcast_and_keeps_running_asids() {
        // 8-bit ASIDs: 254 allocatable. CPU 1 keeps running mm 1 across the reset.
        let p = FreebsdEpoch::new(2, 300, 8);
        let cpu0 = Rec::new(0, 2);
        let cpu1 = Rec::new(1, 2);
        init_mms(&p, 1..=254);
        p.switch_mm(&cpu1, MmId(1));
        for mm in 2..=254 {
            p.switch_mm(&cpu0, MmId(mm));
        }
        assert_eq!(p.epoch(), 0);
        cpu0.take();
        p.mm_init(MmId(255));
        p.switch_mm(&cpu0, MmId(255));
        assert_eq!(p.epoch(), 1, "the 255th pmap needs a new epoch");
        let log = cpu0.take();
        assert_eq!(log[0], "note AsidRollover");
        assert_eq!(log[1], "tlbi All Broadcast");
        assert_eq!(log.iter().filter(|l| l.starts_with("tlbi")).count(), 1);
        // mm 1 (running on cpu1) was re-reserved and stamped with the new epoch...
        assert_eq!(cookie_epoch(p.cookie_of(MmId(1))), 1);
        assert_eq!(asid_of(&p, 1), 2);
        // ...so the new pmap cannot get ASID 2 and takes 3.
        assert_eq!(asid_of(&p, 255), 3);
        // mm 254 was running on cpu0 (the resetting CPU): not re-reserved.
        assert_eq!(cookie_epoch(p.cookie_of(MmId(254))), 0);
    }

    #[test]
    fn release_frees_only_a_current_epoch_asid() {
        let p = FreebsdEpoch::new(1, 8, 8);
        let hw = Rec::new(0, 1);
        p.mm_init(MmId(1));
        p.switch_mm(&hw, MmId(1));
        p.switch_mm(&hw, MmId::KERNEL);
        p.mm_release(&hw, MmId(1));
        p.mm_init(MmId(2));
        p.switch_mm(&hw, MmId(2));
        // The cursor moved past 2, so 3 is taken even though 2 is free again.
        assert_eq!(asid_of(&p, 2), 3);
    }

    #[test]
    fn kernel_pmap_runs_on_asid_zero_until_a_reset_restamps_it() {
        let p = FreebsdEpoch::new(2, 4, 8);
        let hw = Rec::new(0, 2);
        p.switch_mm(&hw, MmId(1));
        p.switch_mm(&hw, MmId::KERNEL);
        assert_eq!(hw.take().last().unwrap(), "root Mm(MmId(0)) asid 0 noflush true");
        assert_eq!(cookie_epoch(p.cookie_of(MmId::KERNEL)), i32::MIN);
    }

    #[test]
    fn reset_restamps_an_idle_cpus_pmap0_which_then_allocates_an_ordinary_asid() {
        // pmap_reset_asid_set skips only ASID -1: cpu1, idle on pmap0 (0, INT_MIN),
        // has pmap0 restamped with the new epoch.
        let p = FreebsdEpoch::new(2, 600, 8);
        let cpu0 = Rec::new(0, 2);
        let cpu1 = Rec::new(1, 2);
        init_mms(&p, 1..=508);
        for mm in 1..=255 {
            p.switch_mm(&cpu0, MmId(mm));
        }
        assert_eq!(p.epoch(), 1);
        assert_eq!(p.cookie_of(MmId::KERNEL), cookie(ASID_RESERVED_FOR_PID_0, 1));
        // cpu1 leaves pmap0; a second reset no longer sees pmap0 on any CPU.
        p.switch_mm(&cpu1, MmId(1));
        for mm in 256..=508 {
            p.switch_mm(&cpu0, MmId(mm));
        }
        assert_eq!(p.epoch(), 2);
        assert_eq!(cookie_epoch(p.cookie_of(MmId::KERNEL)), 1);
        cpu1.take();
        // pmap_activate_int: epoch 1 >= 0 and != 2, so pmap_alloc_asid.
        p.switch_mm(&cpu1, MmId::KERNEL);
        let c = p.cookie_of(MmId::KERNEL);
        assert_eq!(cookie_epoch(c), 2);
        assert!(cookie_asid(c) >= ASID_FIRST_AVAILABLE as i32, "pmap0 got {}", cookie_asid(c));
        assert_eq!(cpu1.take(), vec![format!("root Mm(MmId(0)) asid {} noflush true", cookie_asid(c))]);
    }

    #[test]
    fn reserved_ttbr0_fix_loads_the_empty_table_before_the_curpmap_store() {
        let p = FreebsdEpoch::new(1, 8, 8).with_variant(Variant::ReservedTtbr0);
        let mut hw = Rec::new(0, 1);
        hw.barriers = true;
        p.mm_init(MmId(1));
        p.switch_mm(&hw, MmId(1));
        assert_eq!(
            hw.take(),
            vec![
                "root Reserved asid 0 noflush true",
                "barrier Isb",
                "barrier Dsb(InnerShareable)",
                "root Mm(MmId(1)) asid 2 noflush true",
                "barrier Isb",
            ]
        );
        // Switching to the pmap already in curpmap writes no TTBR0 at all.
        p.switch_mm(&hw, MmId(1));
        assert_eq!(hw.take(), vec!["barrier Dsb(InnerShareable)"]);
        // The faithful code writes TTBR0 once.
        let f = FreebsdEpoch::new(1, 8, 8);
        f.mm_init(MmId(1));
        f.switch_mm(&hw, MmId(1));
        assert_eq!(hw.take().iter().filter(|l| l.starts_with("root")).count(), 1);
    }

    #[test]
    fn variants_round_trip_their_policy_names() {
        for v in Variant::ALL {
            assert_eq!(Variant::from_policy_name(v.policy_name()), Some(v));
        }
        assert_eq!(Variant::from_policy_name("arm64-freebsd-asid-fix"), None);
    }

    #[test]
    fn user_invalidations_broadcast_by_asid() {
        let p = FreebsdEpoch::new(1, 4, 16);
        let hw = Rec::new(0, 1);
        p.mm_init(MmId(1));
        p.switch_mm(&hw, MmId(1));
        hw.take();
        p.flush_page(&hw, MmId(1), VirtAddr(0x1000));
        p.flush_mm(&hw, MmId(1));
        let asid = Asid::new(2, 16).unwrap();
        assert_eq!(
            hw.take(),
            vec![
                format!("tlbi {:?} Broadcast", Tlbi::Va { asid, va: VirtAddr(0x1000) }),
                format!("tlbi {:?} Broadcast", Tlbi::Asid(asid)),
            ]
        );
    }

    /// One CPU with 8-bit ASIDs: mm 1 takes ASID 2 in epoch 0, then mms 2..=509 run
    /// once each, 254 per epoch: mm 255 resets (epoch 1) and takes ASID 2, mm 509
    /// resets again and takes ASID 2. Returns the policy and the log of mm 1's next
    /// activation.
    fn idle_through_two_resets(p: FreebsdEpoch) -> (FreebsdEpoch, Vec<String>) {
        let hw = Rec::new(0, 1);
        init_mms(&p, 1..=509);
        for mm in 1..=509 {
            p.switch_mm(&hw, MmId(mm));
        }
        assert_eq!(asid_of(&p, 255), 2);
        assert_eq!(asid_of(&p, 509), 2);
        hw.take();
        p.switch_mm(&hw, MmId(1));
        let log = hw.take();
        (p, log)
    }

    #[test]
    fn pmap_idle_through_two_resets_takes_a_fresh_asid() {
        let (p, log) = idle_through_two_resets(FreebsdEpoch::new(1, 600, 8));
        assert_eq!(p.epoch(), 2);
        assert_eq!(p.cookie_of(MmId(1)), cookie(3, 2));
        assert_eq!(log, vec!["root Mm(MmId(1)) asid 3 noflush true"]);
    }

    #[test]
    fn zoo_epoch_wrap_reuses_a_stale_cookie_after_two_resets() {
        // With a 1-bit epoch the second reset is epoch 0 again: mm 1's cookie (2, 0)
        // from before both resets looks current, and mm 1 runs on ASID 2, which mm
        // 509 holds in this epoch (an ASID alias as soon as both have run here).
        let (p, log) = idle_through_two_resets(FreebsdEpoch::new(1, 600, 8).with_bug(Bug::FreebsdArm64EpochWrap));
        assert_eq!(p.epoch(), 0);
        assert_eq!(p.cookie_of(MmId(1)), cookie(2, 0));
        assert_eq!(p.cookie_of(MmId(509)), cookie(2, 0));
        assert_eq!(log, vec!["root Mm(MmId(1)) asid 2 noflush true"]);
    }

    #[test]
    fn zoo_epoch_wrap_still_reallocates_after_one_reset() {
        // One bit tells consecutive epochs apart: idle across a single reset, a pmap
        // reallocates exactly as with FreeBSD's 31 bits.
        let p = FreebsdEpoch::new(1, 600, 8).with_bug(Bug::FreebsdArm64EpochWrap);
        let hw = Rec::new(0, 1);
        init_mms(&p, 1..=256);
        for mm in 1..=256 {
            p.switch_mm(&hw, MmId(mm));
        }
        assert_eq!((p.epoch(), asid_of(&p, 255), asid_of(&p, 256)), (1, 2, 3));
        p.switch_mm(&hw, MmId(1));
        assert_eq!(p.cookie_of(MmId(1)), cookie(4, 1));
    }

    #[test]
    fn flush_batch_defaults_to_one_flush_mm_per_mm() {
        let p = FreebsdEpoch::new(1, 8, 16);
        let hw = Rec::new(0, 1);
        init_mms(&p, 1..=2);
        p.switch_mm(&hw, MmId(1));
        p.switch_mm(&hw, MmId(2));
        hw.take();
        p.flush_batch(&hw, &[MmId(2), MmId(1)]);
        let asid = |n| Asid::new(n, 16).unwrap();
        assert_eq!(
            hw.take(),
            vec![
                format!("tlbi {:?} Broadcast", Tlbi::Asid(asid(3))),
                format!("tlbi {:?} Broadcast", Tlbi::Asid(asid(2))),
            ]
        );
    }

    #[test]
    fn narrow_epoch_wraps_to_zero() {
        let p = FreebsdEpoch::with_epoch_limit(1, 600, 8, 2);
        let hw = Rec::new(0, 1);
        for mm in 1..=510 {
            p.mm_init(MmId(mm));
            p.switch_mm(&hw, MmId(mm));
        }
        // Two resets with a limit of 2: epoch 0 -> 1 -> 0.
        assert_eq!(p.epoch(), 0);
    }
}
