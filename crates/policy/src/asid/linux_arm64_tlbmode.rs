//! Christoph Lameter's per-mm TLB modes for Ampere ("ARM64: Base TLB functions",
//! gentwo.org `linux.git` 0dd557529479, December 2023, not merged), on top of the
//! rollover allocator of [`super::linux_arm64`]. Build it with
//! [`LinuxArm64::with_tlb_mode`].
//!
//! # The algorithm
//! A TLB can hold an mm's entries only if the mm ran on that CPU, so each user
//! flush picks one of four ways from the weight of the mm's `mm_cpumask`:
//!
//! - `TLB_NONE` (bit 12 of the mode word): no CPU has used the mm, so no TLBI;
//! - `TLB_LOCAL` (bit 10): only this CPU has, so TLBIs without `IS`, completed
//!   by `DSB NSH`;
//! - `TLB_IPI` (a weight of at most the threshold in bits 0–9, not 0): an IPI to
//!   every CPU of the mask (`on_each_cpu_mask(.., wait)`, this CPU included if
//!   it is in the mask); each handler issues the local TLBIs for the mm's ASID
//!   and `DSB NSH`;
//! - `TLB_BROADCAST` (more than the threshold, or the threshold 0): the stock
//!   `TLBI ...IS` and `DSB ISH`.
//!
//! The mode word is the kernel's `tlb_mode=` boot parameter (`--set
//! tlb_mode=N`). Bit 11, range TLBIs, is `--set tlbi_range` here.
//!
//! Stock arm64 has not kept `mm_cpumask` since 38d96287504a. As in Fujitsu's
//! 2019 proposal to restore it (Takao Indoh, QI Fuli: "arm64: mm: Restore
//! mm_cpumask"), the only public arm64 precedent: a CPU sets its bit at the
//! `switch_mm_fastpath` label of `check_and_switch_context`, before TTBR0 is
//! written, and `new_context` clears the mask when the mm takes a fresh ASID
//! number (nothing is cached under it anywhere, and the switching CPU sets its
//! bit next). Nothing else clears a bit: a lazy CPU keeps the mm in TTBR0 (arm64's
//! `enter_lazy_tlb` does nothing), and Catalin Marinas rejected clearing at
//! switch-out with a local flush (2019-07-23: not enough with CnP).
//!
//! # What is guaranteed
//! A CPU that can hold entries of the mm under its current ASID set its bit, and
//! made it visible, before it could walk the tables; a flush reads the mask after
//! its page-table stores are complete. Either the flush sees the bit and reaches
//! that CPU (by IPI or broadcast), or the CPU's walks see the new PTE.
//!
//! # Deliberate readings
//! Only the series' commit message could be read; its diff and companion commits
//! were not reachable. What the message does not say is read as follows, and
//! chosen before any run:
//! - The default threshold, "a weight that depends on the number of cpus in the
//!   system": `max(1, log2(ncpus))` ([`default_mode`]), with `TLB_LOCAL` and
//!   `TLB_NONE` on. An IPI flush costs the sender about one message per CPU in
//!   the mask while a broadcast costs a fixed DVM operation whose reach grows with
//!   the machine, so the crossover grows slowly with the machine's size.
//! - The barriers: the switching CPU issues `DSB ISHST` after setting its bit (only
//!   when it was clear), and every user flush issues a full `DSB ISH` before it
//!   reads the mask, the store-buffering pair `TLB_NONE` and `TLB_LOCAL` need (the
//!   same pair as Ryan Roberts' `active_cpu`, [`super::linux_arm64_activecpu`]).
//! - The IPI handlers are Fujitsu's: `local_flush_tlb_mm` (`DSB NSHST`,
//!   `TLBI ASIDE1`, `DSB NSH`) and per-page `VALE1` for a page or range, each
//!   reading the mm's ASID in the handler.
//! - The mask charges its cache line through [`Hw::shared`].

use super::linux_arm64::LinuxArm64;
use crate::cpumask::CpuMask;
use crate::fields::{Fields, Value};
use crate::hw::{Access, Barrier, Domain, Hw};
use crate::shootdown::CacheLine;
use crate::sync::{fence, Ordering};
use crate::types::{CpuId, MmId};
use alloc::vec::Vec;

/// Bits 0–9 of the mode word: the largest mask weight flushed by IPIs.
pub const TLB_MODE_THRESHOLD: u32 = 0x3ff;
/// Bit 10: `TLB_LOCAL` for an mm only this CPU has used.
pub const TLB_MODE_LOCAL: u32 = 1 << 10;
/// Bit 11: range TLBIs (given here as `--set tlbi_range`).
pub const TLB_MODE_RANGE: u32 = 1 << 11;
/// Bit 12: `TLB_NONE` for an mm no CPU has used.
pub const TLB_MODE_NONE: u32 = 1 << 12;

/// Returns the mode word used when none is given, for `ncpus` CPUs: threshold
/// `max(1, log2(ncpus))` (this crate's reading; the series' formula was not
/// available), `TLB_LOCAL` and `TLB_NONE` on.
pub fn default_mode(ncpus: usize) -> u32 {
    let threshold = ncpus.max(2).ilog2().min(TLB_MODE_THRESHOLD);
    threshold | TLB_MODE_LOCAL | TLB_MODE_NONE
}

/// How one user flush goes (`enum tlb_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlbMode {
    /// No CPU has used the mm: nothing to invalidate.
    None,
    /// Only this CPU has: local TLBIs, `DSB NSH`.
    Local,
    /// A few CPUs have: an IPI to each, whose handler flushes locally.
    Ipi,
    /// Many have: `TLBI ...IS`, `DSB ISH`.
    Broadcast,
}

/// The per-mm masks and the mode word.
pub(super) struct TlbModes {
    /// The `tlb_mode` word.
    word: u32,
    /// Per mm slot: `mm_cpumask`.
    masks: Vec<CacheLine<CpuMask>>,
    /// The fix candidate for the finding `arm64-tlbmode-mask-clear-reorder`:
    /// a barrier orders the mask's clear before the new `context.id`
    /// ([`LinuxArm64::with_mask_clear_ordered`]).
    clear_ordered: bool,
}

impl TlbModes {
    /// Returns the state for `ncpus` CPUs, `slots` mm slots and mode word `word`.
    pub(super) fn new(ncpus: usize, slots: usize, word: u32) -> Self {
        TlbModes { word, masks: (0..slots).map(|_| CacheLine(CpuMask::new(ncpus))).collect(), clear_ordered: false }
    }

    /// Returns the mask of the mm in slot `mm`.
    pub(super) fn mask(&self, mm: MmId) -> &CpuMask {
        &self.masks[mm.index()].0
    }

    /// Names the series' fields (see [`Policy::name_fields`](crate::Policy::name_fields)).
    pub(super) fn name_fields(&self, f: &mut dyn Fields) {
        for (m, mask) in self.masks.iter().enumerate() {
            f.add(&mask.0, format_args!("mm_cpumask(mm[{m}])"), Value::Cpus { first: 0 });
        }
    }

    /// `mm_init_cpumask` for a new mm in slot `mm`.
    pub(super) fn init_new_context(&self, mm: MmId) {
        self.mask(mm).clear_all();
    }

    /// `cpumask_clear(mm_cpumask(mm))` when `new_context` hands out a fresh number
    /// (under `cpu_asid_lock`).
    pub(super) fn clear_mask<H: Hw>(&self, hw: &H, mm: MmId) {
        let mask = self.mask(mm);
        hw.shared(core::ptr::from_ref(mask) as usize, Access::Write);
        mask.clear_all();
        if self.clear_ordered {
            // smp_wmb(): the clear is visible before the id the caller stores
            // next, which the fast path reads without the lock.
            fence(Ordering::Release);
        }
    }

    /// At `switch_mm_fastpath`, before TTBR0 is written: sets `cpu`'s bit in `mm`'s
    /// mask, with the `DSB ISHST` that makes it visible before any walk.
    pub(super) fn on_switch_in<H: Hw>(&self, hw: &H, mm: MmId, cpu: CpuId) {
        let mask = self.mask(mm);
        let addr = core::ptr::from_ref(mask) as usize;
        hw.shared(addr, Access::Read);
        if mask.test(cpu) {
            return;
        }
        hw.shared(addr, Access::Rmw);
        mask.set(cpu);
        // The switching CPU's half of the pair: the bit before the walks.
        fence(Ordering::SeqCst);
        hw.barrier(Barrier::DsbSt(Domain::InnerShareable));
    }

    /// Decides how a user flush of `mm` goes, after the full barrier that
    /// completes the flush's page-table stores.
    pub(super) fn mode_for<H: Hw>(&self, hw: &H, mm: MmId) -> TlbMode {
        // The flusher's half of the pair: PTE stores complete before the mask is read.
        fence(Ordering::SeqCst);
        hw.barrier(Barrier::Dsb(Domain::InnerShareable));
        let mask = self.mask(mm);
        hw.shared(core::ptr::from_ref(mask) as usize, Access::Read);
        let weight = mask.weight() as u32;
        let threshold = self.word & TLB_MODE_THRESHOLD;
        if self.word & TLB_MODE_NONE != 0 && weight == 0 {
            TlbMode::None
        } else if self.word & TLB_MODE_LOCAL != 0 && weight == 1 && mask.test(hw.cpu()) {
            TlbMode::Local
        } else if threshold != 0 && weight <= threshold {
            TlbMode::Ipi
        } else {
            TlbMode::Broadcast
        }
    }
}

impl LinuxArm64 {
    /// Returns the stock allocator of [`LinuxArm64::new`] with Christoph Lameter's
    /// TLB modes on top, under mode word `word` (the `tlb_mode=` boot parameter;
    /// [`default_mode`] when none is given). Bit 11 (range TLBIs) must be clear:
    /// give it with [`LinuxArm64::with_tlbi_range`].
    ///
    /// Fails as [`LinuxArm64::new`] does, or for a word with bit 11 or any bit
    /// above 12 set.
    pub fn with_tlb_mode(
        ncpus: usize,
        max_mms: usize,
        asid_bits: u8,
        kpti: bool,
        word: u32,
    ) -> Result<Self, super::linux_arm64::ConfigError> {
        if word & !(TLB_MODE_THRESHOLD | TLB_MODE_LOCAL | TLB_MODE_NONE) != 0 {
            return Err(super::linux_arm64::ConfigError::TlbModeWord(word));
        }
        Self::build(ncpus, max_mms, asid_bits, kpti, super::linux_arm64::Extension::TlbMode(word))
    }

    /// Returns this policy with a barrier (`smp_wmb()`) between `new_context`'s
    /// clear of `mm_cpumask` and the store of the new `context.id`: the fix
    /// candidate for the finding `arm64-tlbmode-mask-clear-reorder`, where a CPU
    /// that switches in on the new id sees it before the clear and then loses
    /// its bit to it. Not from the series: this project's.
    ///
    /// # Panics
    /// If the policy has no TLB modes ([`LinuxArm64::with_tlb_mode`]).
    pub fn with_mask_clear_ordered(mut self) -> Self {
        self.tlb_modes.as_mut().expect("a policy with the TLB modes").clear_ordered = true;
        self
    }

    /// Returns the `mm_cpumask` weight of the mm in slot `mm`, or `None` for a
    /// policy without the TLB modes.
    pub fn mm_cpumask_weight(&self, mm: MmId) -> Option<usize> {
        self.tlb_modes.as_ref().map(|t| t.mask(mm).weight())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::Tlbi;
    use crate::policy::Policy;
    use crate::testhw::{cpus_with_barriers, init_mms, Rec};
    use crate::types::VirtAddr;

    fn policy(ncpus: usize, word: u32) -> (LinuxArm64, Vec<Rec>) {
        let p = LinuxArm64::with_tlb_mode(ncpus, 8, 16, false, word).unwrap();
        init_mms(&p, 1..=7);
        (p, cpus_with_barriers(ncpus))
    }

    fn tlbis(r: &Rec) -> Vec<String> {
        r.take().into_iter().filter(|e| !e.starts_with("root ") && !e.starts_with("note ")).collect()
    }

    #[test]
    fn default_threshold_grows_with_log2_of_the_cpus() {
        assert_eq!(default_mode(2) & TLB_MODE_THRESHOLD, 1);
        assert_eq!(default_mode(16) & TLB_MODE_THRESHOLD, 4);
        assert_eq!(default_mode(192) & TLB_MODE_THRESHOLD, 7);
        assert_eq!(default_mode(4096) & TLB_MODE_THRESHOLD, 12);
        assert_eq!(default_mode(4) & (TLB_MODE_LOCAL | TLB_MODE_NONE | TLB_MODE_RANGE), TLB_MODE_LOCAL | TLB_MODE_NONE);
    }

    #[test]
    fn bad_mode_words_are_errors() {
        assert!(LinuxArm64::with_tlb_mode(2, 4, 16, false, TLB_MODE_RANGE).is_err());
        assert!(LinuxArm64::with_tlb_mode(2, 4, 16, false, 1 << 13).is_err());
    }

    #[test]
    fn mode_follows_the_mask_weight() {
        let (p, cpus) = policy(8, 2 | TLB_MODE_LOCAL | TLB_MODE_NONE);
        let mm = MmId(1);
        // Never run: nothing to invalidate, only the barrier of the decision.
        cpus[0].take();
        p.flush_page(&cpus[0], mm, VirtAddr(0x4000));
        assert_eq!(tlbis(&cpus[0]), ["barrier Dsb(InnerShareable)"]);
        // Run here only: local TLBIs completed by DSB NSH.
        p.switch_mm(&cpus[0], mm);
        cpus[0].take();
        p.flush_page(&cpus[0], mm, VirtAddr(0x4000));
        let asid = p.asid_of(mm);
        let local = format!("tlbi {:?} Local", Tlbi::Va { asid, va: VirtAddr(0x4000) });
        assert_eq!(tlbis(&cpus[0]), ["barrier Dsb(InnerShareable)", &local, "barrier Dsb(NonShareable)"]);
        // Run on cpu0 and cpu3, flushed from cpu5: an IPI to both (weight 2 <= 2).
        p.switch_mm(&cpus[3], mm);
        cpus[5].take();
        p.flush_page(&cpus[5], mm, VirtAddr(0x4000));
        let ev = tlbis(&cpus[5]);
        assert_eq!(ev[1], "ipi [0, 3]", "{ev:?}");
        assert!(ev.contains(&format!("cpu3: {local}")), "{ev:?}");
        assert!(!ev.iter().any(|e| e.ends_with("Broadcast")), "{ev:?}");
        // A third CPU: over the threshold, broadcast.
        p.switch_mm(&cpus[6], mm);
        cpus[5].take();
        p.flush_mm(&cpus[5], mm);
        let ev = tlbis(&cpus[5]);
        assert_eq!(
            ev,
            [
                "barrier Dsb(InnerShareable)",
                &format!("tlbi {:?} Broadcast", Tlbi::Asid(asid)),
                "barrier Dsb(InnerShareable)"
            ]
        );
    }

    #[test]
    fn ipi_flush_includes_this_cpu_when_it_is_in_the_mask() {
        let (p, cpus) = policy(4, 3);
        let mm = MmId(1);
        p.switch_mm(&cpus[0], mm);
        p.switch_mm(&cpus[1], mm);
        cpus[0].take();
        p.flush_mm(&cpus[0], mm);
        let asid = p.asid_of(mm);
        let ev = tlbis(&cpus[0]);
        let local = format!("tlbi {:?} Local", Tlbi::Asid(asid));
        assert!(ev.contains(&local), "{ev:?}");
        assert!(ev.contains(&"ipi [1]".to_string()), "{ev:?}");
        assert!(ev.contains(&format!("cpu1: {local}")), "{ev:?}");
    }

    #[test]
    fn a_fresh_asid_clears_the_mask_and_the_switching_cpu_sets_its_bit() {
        let (p, cpus) = policy(2, default_mode(2));
        let mm = MmId(1);
        p.switch_mm(&cpus[0], mm);
        p.switch_mm(&cpus[1], mm);
        assert_eq!(p.mm_cpumask_weight(mm), Some(2));
        p.mm_init(mm);
        assert_eq!(p.mm_cpumask_weight(mm), Some(0));
        p.switch_mm(&cpus[1], MmId(2));
        p.switch_mm(&cpus[1], mm);
        assert_eq!(p.mm_cpumask_weight(mm), Some(1));
        // A lazy CPU keeps its bit: it still has the mm in TTBR0.
        p.switch_mm(&cpus[1], MmId::KERNEL);
        assert_eq!(p.mm_cpumask_weight(mm), Some(1));
        cpus[0].take();
        p.flush_page(&cpus[0], mm, VirtAddr(0));
        let ev = tlbis(&cpus[0]);
        assert!(ev.iter().any(|e| e == "ipi [1]"), "{ev:?}");
    }
}
