//! Linux arm64 "arm64: tlbflush: Don't broadcast if mm was only active on local
//! cpu" (Ryan Roberts, RFC v1 2/2, 2025-08-29, on v6.17-rc3; the idea is James
//! Morse's), on top of the rollover allocator of [`super::linux_arm64`], which it
//! reuses unchanged. Build it with [`LinuxArm64::with_active_cpu`].
//!
//! # The algorithm
//! If no CPU but the flushing one can ever have walked an mm's page tables, no
//! other TLB can hold its entries, and the TLBI need not be broadcast. The patch
//! tracks that in one word per mm, `mm->context.active_cpu`, which only ever
//! moves forward: `ACTIVE_CPU_NONE` (never run) → the id of the one CPU that ran
//! it → `ACTIVE_CPU_MULTIPLE`.
//!
//! - `init_new_context` (fork, exec): the word is `NONE`. A child does not
//!   inherit its parent's value.
//! - `check_and_switch_context`, after the ASID is settled (the
//!   `switch_mm_fastpath` label, reached by both paths) and before TTBR0 is
//!   written: load the word; if it is neither this CPU nor `MULTIPLE`, try to
//!   swap `NONE` for this CPU (`cmpxchg_relaxed`), and if another CPU was (or just
//!   got) there, store `MULTIPLE`; then `DSB ISHST`, so that the store is visible
//!   before this CPU can walk the tables it installs. The common case (the word
//!   already says this CPU, or many) is one load, no atomic and no barrier.
//! - Every user flush (`flush_tlb_mm`, `__flush_tlb_page_nosync`,
//!   `__flush_tlb_range_nosync`, and so reclaim's batch and the contpte unfold)
//!   replaces its leading `DSB ISHST` with `flush_tlb_user_pre`: load the word
//!   (before any barrier); if it says this CPU, upgrade to a full `DSB ISH`, so
//!   that the page-table stores are complete before a second load, and decide on
//!   that load; otherwise the stock `DSB ISHST` and a broadcast. A local flush
//!   issues the same operations without `IS` (`TLBI VALE1`, `ASIDE1`, `RVALE1`)
//!   and is still completed by `DSB ISH`; v1 never uses `DSB NSH`.
//! - The ASID is read after the barrier, as stock (5e10f9887ed8). Kernel flushes
//!   are untouched.
//!
//! The two barriers make a store-buffering pair (Catalin Marinas's litmus test in
//! the review, 2025-09-02): the switching CPU stores the word then (after `DSB
//! ISHST`, by its walks) reads the PTE; the flushing CPU stores the PTE then
//! (after `DSB ISH`) reads the word. Either the flusher sees the other CPU and
//! broadcasts, or that CPU's walks see the new PTE.
//!
//! # What is guaranteed
//! A CPU that walks an mm's tables has first made the word say it (or
//! `MULTIPLE`) visible; a flush that goes local read the word after its PTE store
//! was complete, so any CPU it did not see walks the new PTE. Since the word never
//! goes back, a CPU that ran the mm once, lazily holding it or not, is always
//! reached. The rollover guarantees of [`super::linux_arm64`] are untouched.
//!
//! # The zoo
//! [`Bug::ActiveCpuEarlyRead`] decides on the speculative load made before the
//! barrier, without the `DSB ISH` and the second load: the load can pass the
//! PTE store still in the store buffer, and the checker finds a CPU that switched
//! in meanwhile walking the old PTE (`no_stale_held` under `--memory tso`).
//!
//! # Deliberate readings
//! - v1 as posted and reviewed. v2 (Linu Cherian, 2026) was not available; its
//!   companion "Reset active_cpu on ASID rollover" (Catalin Marinas suggested it
//!   in `new_context`, 2025-09-18) is not modelled: the word never goes back.
//! - `migrate_disable()` between the decision and the TLBIs has nothing to do
//!   here: a flush runs on one CPU from start to end.
//! - Software TTBR0 PAN is off, so the update is before `cpu_switch_mm`.
//! - `kthread_use_mm` (a kernel thread adopting the mm, which makes it
//!   `MULTIPLE` through `switch_mm`) is not among the kernel's operations.
//! - The word charges its cache line through [`Hw::shared`] (a line of its own
//!   in `mm_context_t`): a load on every switch and flush, an RMW or store when
//!   it changes.

use super::linux_arm64::LinuxArm64;
use crate::fields::{Fields, Value};
use crate::hw::{Access, Barrier, Domain, Hw};
use crate::shootdown::CacheLine;
use crate::sync::{fence, AtomicU32, Ordering};
use crate::types::{CpuId, MmId};
use crate::zoo::Bug;
use alloc::vec::Vec;
use core::fmt;

/// `ACTIVE_CPU_NONE`: the mm never ran on any CPU.
pub const ACTIVE_CPU_NONE: u32 = u32::MAX;
/// `ACTIVE_CPU_MULTIPLE`: the mm has run on more than one CPU.
pub const ACTIVE_CPU_MULTIPLE: u32 = u32::MAX - 1;

/// The per-mm word the patch adds to `mm_context_t`.
pub(super) struct ActiveCpu {
    /// Per mm slot: `context.active_cpu`.
    words: Vec<CacheLine<AtomicU32>>,
}

/// Shows an `active_cpu` word.
fn show_active_cpu(v: u64, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match v as u32 {
        ACTIVE_CPU_NONE => f.write_str("none"),
        ACTIVE_CPU_MULTIPLE => f.write_str("multiple"),
        c => write!(f, "cpu{c}"),
    }
}

impl ActiveCpu {
    /// Returns the state for `slots` mm slots, none of which ran anywhere.
    pub(super) fn new(slots: usize) -> Self {
        ActiveCpu { words: (0..slots).map(|_| CacheLine(AtomicU32::new(ACTIVE_CPU_NONE))).collect() }
    }

    fn word(&self, mm: MmId) -> &AtomicU32 {
        &self.words[mm.index()].0
    }

    /// Names the patch's field (see [`Policy::name_fields`](crate::Policy::name_fields)).
    pub(super) fn name_fields(&self, f: &mut dyn Fields) {
        for (m, w) in self.words.iter().enumerate() {
            f.add(&w.0, format_args!("mm[{m}].context.active_cpu"), Value::Custom(show_active_cpu));
        }
    }

    /// `init_new_context`: the new mm in slot `mm` never ran.
    pub(super) fn init_new_context(&self, mm: MmId) {
        // Relaxed (WRITE_ONCE): the new mm reaches other CPUs through the kernel's own
        // hand-off (fork, wake-up), which orders this store before their reads.
        self.word(mm).store(ACTIVE_CPU_NONE, Ordering::Relaxed);
    }

    /// Forgets where the mm in slot `mm` ran: the reset on an ASID rollover
    /// that the patch's v2 adds ("Reset active_cpu on ASID rollover"), here only
    /// in the zoo's misplaced form, [`Bug::ActiveCpuResetReserved`]. Runs under
    /// `cpu_asid_lock`.
    pub(super) fn reset<H: Hw>(&self, hw: &H, mm: MmId) {
        let word = self.word(mm);
        hw.shared(word.as_ptr() as usize, crate::hw::Access::Write);
        // Relaxed (WRITE_ONCE): every switch that records itself afterwards does
        // so after taking the lock this CPU holds.
        word.store(ACTIVE_CPU_NONE, Ordering::Relaxed);
    }

    /// Returns the word of the mm in slot `mm`.
    pub(super) fn get(&self, mm: MmId) -> u32 {
        // Relaxed: a snapshot for observers and assertions.
        self.word(mm).load(Ordering::Relaxed)
    }

    /// At `switch_mm_fastpath`, before TTBR0 is written: records that `cpu` runs
    /// `mm`, with the `DSB ISHST` that makes the record visible before any walk.
    /// `no_dsb` is the zoo bug [`Bug::ActiveCpuNoSwitchDsb`].
    pub(super) fn on_switch_in<H: Hw>(&self, hw: &H, mm: MmId, cpu: CpuId, no_dsb: bool) {
        let word = self.word(mm);
        let addr = word.as_ptr() as usize;
        hw.shared(addr, Access::Read);
        // Relaxed (READ_ONCE): only this CPU can make the word say this CPU, and
        // MULTIPLE is final, so a stale value only sends us down the update below.
        let mut active = word.load(Ordering::Relaxed);
        if active == cpu.0 || active == ACTIVE_CPU_MULTIPLE {
            return;
        }
        if active == ACTIVE_CPU_NONE {
            hw.shared(addr, Access::Rmw);
            // Relaxed (cmpxchg_relaxed): the DSB below orders it before the walks.
            active = match word.compare_exchange(ACTIVE_CPU_NONE, cpu.0, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(old) | Err(old) => old,
            };
        }
        if active != ACTIVE_CPU_NONE {
            // Another CPU ran it (or won the race to be the first).
            hw.shared(addr, Access::Write);
            // Relaxed (WRITE_ONCE): ordered before the walks by the DSB below.
            word.store(ACTIVE_CPU_MULTIPLE, Ordering::Relaxed);
        }
        if no_dsb {
            // Zoo bug activecpu-no-switch-dsb: straight on to the TTBR0 write.
            return;
        }
        // dsb(ishst): the switching CPU's half of the store-buffering pair; the
        // SeqCst fence stands for it to the checker's store buffers.
        fence(Ordering::SeqCst);
        hw.barrier(Barrier::DsbSt(Domain::InnerShareable));
    }

    /// `flush_tlb_user_pre`: the leading barrier of a user flush of `mm`, and
    /// whether the flush may stay on this CPU. `early_read` is the zoo bug
    /// [`Bug::ActiveCpuEarlyRead`].
    pub(super) fn flush_pre<H: Hw>(&self, hw: &H, mm: MmId, early_read: bool) -> bool {
        let word = self.word(mm);
        let addr = word.as_ptr() as usize;
        let me = hw.cpu().0;
        hw.shared(addr, Access::Read);
        // Relaxed (READ_ONCE before any barrier): speculative; only "this CPU"
        // is acted on, and then only after the full barrier and a second load.
        let mut active = word.load(Ordering::Relaxed);
        if active == me && !early_read {
            // dsb(ish): the page-table stores that made this flush necessary are
            // complete before the word is loaded again (the flusher's half of the
            // pair; the SeqCst fence stands for it to the checker).
            fence(Ordering::SeqCst);
            hw.barrier(Barrier::Dsb(Domain::InnerShareable));
            hw.shared(addr, Access::Read);
            // Relaxed: ordered after the PTE stores by the barrier above.
            active = word.load(Ordering::Relaxed);
        } else {
            // Zoo bug activecpu-early-read: the stock dsb(ishst) only, and the
            // decision on the load above, which may have passed the PTE store.
            hw.barrier(Barrier::DsbSt(Domain::InnerShareable));
        }
        active == me
    }
}

impl LinuxArm64 {
    /// Returns the stock allocator of [`LinuxArm64::new`] with Ryan Roberts'
    /// `active_cpu` patch (RFC v1, 2025) on top: user flushes of an mm that has
    /// only ever run on the flushing CPU stay local.
    ///
    /// Fails as [`LinuxArm64::new`] does.
    pub fn with_active_cpu(
        ncpus: usize,
        max_mms: usize,
        asid_bits: u8,
        kpti: bool,
    ) -> Result<Self, super::linux_arm64::ConfigError> {
        Self::build(ncpus, max_mms, asid_bits, kpti, super::linux_arm64::Extension::ActiveCpu)
    }

    /// Returns `mm->context.active_cpu` of the mm in slot `mm`
    /// ([`ACTIVE_CPU_NONE`], [`ACTIVE_CPU_MULTIPLE`] or a CPU id), or `None` for a
    /// policy without the patch.
    pub fn active_cpu(&self, mm: MmId) -> Option<u32> {
        self.active.as_ref().map(|a| a.get(mm))
    }

    /// Whether the zoo bug that reads `active_cpu` too early is re-introduced.
    pub(super) fn active_cpu_read_early(&self) -> bool {
        self.bug == Some(Bug::ActiveCpuEarlyRead)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::{Scope, Tlbi};
    use crate::policy::Policy;
    use crate::testhw::{cpus_with_barriers, init_mms, Rec};
    use crate::types::VirtAddr;

    fn policy(ncpus: usize) -> (LinuxArm64, Vec<Rec>) {
        let p = LinuxArm64::with_active_cpu(ncpus, 8, 16, false).unwrap();
        init_mms(&p, 1..=7);
        (p, cpus_with_barriers(ncpus))
    }

    fn tlbis(r: &Rec) -> Vec<String> {
        r.take().into_iter().filter(|e| e.starts_with("tlbi ") || e.starts_with("barrier ")).collect()
    }

    #[test]
    fn word_goes_none_then_one_cpu_then_multiple_and_stays() {
        let (p, cpus) = policy(3);
        let mm = MmId(1);
        assert_eq!(p.active_cpu(mm), Some(ACTIVE_CPU_NONE));
        p.switch_mm(&cpus[2], mm);
        assert_eq!(p.active_cpu(mm), Some(2));
        // Away and back on the same CPU: still one CPU.
        p.switch_mm(&cpus[2], MmId(2));
        p.switch_mm(&cpus[2], mm);
        assert_eq!(p.active_cpu(mm), Some(2));
        p.switch_mm(&cpus[0], mm);
        assert_eq!(p.active_cpu(mm), Some(ACTIVE_CPU_MULTIPLE));
        // It never goes back, even when only cpu0 runs it from now on.
        p.switch_mm(&cpus[2], MmId(3));
        p.switch_mm(&cpus[0], MmId(2));
        p.switch_mm(&cpus[0], mm);
        assert_eq!(p.active_cpu(mm), Some(ACTIVE_CPU_MULTIPLE));
        // A new mm in the slot (fork, exec) starts again at none.
        p.mm_init(mm);
        assert_eq!(p.active_cpu(mm), Some(ACTIVE_CPU_NONE));
    }

    #[test]
    fn the_update_is_before_ttbr0_with_a_dsb_ishst_and_only_when_it_writes() {
        let (p, cpus) = policy(2);
        let mm = MmId(1);
        cpus[0].take();
        p.switch_mm(&cpus[0], mm);
        let ev = cpus[0].take();
        let dsb = ev.iter().position(|e| e == "barrier DsbSt(InnerShareable)").expect("dsb(ishst) on first run");
        let root = ev.iter().position(|e| e.starts_with("root ")).expect("TTBR0 written");
        assert!(dsb < root, "{ev:?}");
        // Back to it on the same CPU after another mm: the word already says cpu0,
        // so the switch adds no barrier of its own.
        p.switch_mm(&cpus[0], MmId(2));
        cpus[0].take();
        p.switch_mm(&cpus[0], mm);
        let ev = cpus[0].take();
        assert!(!ev.iter().any(|e| e.starts_with("barrier DsbSt")), "{ev:?}");
    }

    #[test]
    fn flush_of_an_mm_only_this_cpu_ran_is_local_but_completed_by_dsb_ish() {
        let (p, cpus) = policy(2);
        let mm = MmId(1);
        p.switch_mm(&cpus[1], mm);
        cpus[1].take();
        p.flush_page(&cpus[1], mm, VirtAddr(0x4000));
        let asid = p.asid_of(mm);
        let want = [
            "barrier Dsb(InnerShareable)".to_string(),
            format!("tlbi {:?} Local", Tlbi::Va { asid, va: VirtAddr(0x4000) }),
            "barrier Dsb(InnerShareable)".to_string(),
        ];
        assert_eq!(tlbis(&cpus[1]), want);
    }

    #[test]
    fn flush_from_another_cpu_or_of_a_shared_mm_broadcasts_with_the_stock_barriers() {
        let (p, cpus) = policy(2);
        let mm = MmId(1);
        p.switch_mm(&cpus[1], mm);
        // cpu0 never ran it: the word says cpu1, not this CPU.
        cpus[0].take();
        p.flush_mm(&cpus[0], mm);
        let asid = p.asid_of(mm);
        let bcast = [
            "barrier DsbSt(InnerShareable)".to_string(),
            format!("tlbi {:?} Broadcast", Tlbi::Asid(asid)),
            "barrier Dsb(InnerShareable)".to_string(),
        ];
        assert_eq!(tlbis(&cpus[0]), bcast);
        // Once cpu0 ran it too, even cpu1's flush broadcasts.
        p.switch_mm(&cpus[0], mm);
        cpus[1].take();
        p.flush_mm(&cpus[1], mm);
        assert_eq!(tlbis(&cpus[1]), bcast);
    }

    #[test]
    fn range_flushes_go_local_too_and_kernel_flushes_stay_broadcast() {
        let (p, cpus) = policy(2);
        let p = p.with_tlbi_range(true);
        let mm = MmId(1);
        p.switch_mm(&cpus[0], mm);
        cpus[0].take();
        p.flush_range(&cpus[0], mm, VirtAddr(0x10000), 16);
        let ev = tlbis(&cpus[0]);
        assert!(ev.iter().any(|e| e.starts_with("tlbi Range") && e.ends_with("Local")), "{ev:?}");
        assert!(!ev.iter().any(|e| e.ends_with("Broadcast")), "{ev:?}");
        p.flush_kernel_range(&cpus[0], VirtAddr(0xffff_0000_0000_0000), 1);
        let ev = tlbis(&cpus[0]);
        assert!(ev.iter().any(|e| e.starts_with("tlbi") && e.ends_with(&format!("{:?}", Scope::Broadcast))), "{ev:?}");
    }

    #[test]
    fn zoo_early_read_decides_without_the_full_barrier() {
        let (p, cpus) = policy(2);
        let p = p.with_bug(Bug::ActiveCpuEarlyRead);
        let mm = MmId(1);
        p.switch_mm(&cpus[1], mm);
        cpus[1].take();
        p.flush_page(&cpus[1], mm, VirtAddr(0x4000));
        let ev = tlbis(&cpus[1]);
        assert_eq!(ev.first().map(String::as_str), Some("barrier DsbSt(InnerShareable)"), "{ev:?}");
        assert!(ev.iter().any(|e| e.starts_with("tlbi") && e.ends_with("Local")), "{ev:?}");
    }
}
