//! Linux arm64 ASIDs with the rollover allocator (`arch/arm64/mm/context.c`) and the
//! user-space invalidations of `arch/arm64/include/asm/tlbflush.h`, as in v5.11
//! (pinned ASIDs) through v6.x.
//!
//! # The algorithm
//! User PTEs carry nG, so TLB entries are tagged with the mm's ASID and survive a
//! context switch. An mm's `context.id` packs `generation | asid`: the low
//! `asid_bits` bits are the hardware ASID, the bits above are the generation it was
//! allocated in (0 means "never allocated"). The global `asid_generation` starts at
//! `1 << asid_bits` and steps by that much on every rollover, so it never wraps in
//! practice and a stale id never matches again (no ABA).
//!
//! - `check_and_switch_context(mm)`, fast path without the lock: if this CPU's
//!   `active_asids` entry is not 0, the mm's generation is current, and a
//!   compare-and-exchange replaces the entry with the mm's id, just write TTBR0.
//!   The exchange fails when a rollover zeroed the entry meanwhile (a8ffaaa060b8:
//!   never overwrite a 0, or the rollover loses track of what this CPU runs).
//! - Slow path under `cpu_asid_lock`: re-read the id; if its generation is stale,
//!   `new_context`. If this CPU is in `tlb_flush_pending`, clear it and flush the
//!   whole local TLB before running the new ASID. Record the id in `active_asids`.
//!   The test is `cpumask_test_and_clear_cpu`, modelled as v4.19 to v5.19's
//!   generic `test_and_clear_bit` is: a plain read, and an atomic only when the
//!   bit is set. From v6.0 (415d83249709) it is a fully ordered atomic whatever
//!   it finds, which orders the new `context.id` before later explicit accesses
//!   (the finding `linux-arm64-asid-publish` is about that difference).
//! - `new_context(mm)`: an mm that had an ASID keeps its number in the current
//!   generation if some CPU reserved it at the last rollover (every such reserved
//!   entry is updated), if it is pinned, or if its bit is still free. Otherwise take
//!   the next free bit from the cursor `cur_idx`; if there is none, bump the
//!   generation, `flush_context`, and search again from 1.
//! - `flush_context`: rebuild the bitmap from the pinned ASIDs and, for every CPU,
//!   the ASID it runs (swapped out of `active_asids` for 0) or, if that was already
//!   0, the one it reserved at the previous rollover; record those as
//!   `reserved_asids` and mark every CPU in `tlb_flush_pending`. There is *no*
//!   broadcast invalidation: each CPU flushes its own TLB locally when it next
//!   takes the slow path.
//! - Pinned ASIDs (`arm64_mm_context_get`/`_put`, added for devices that share an
//!   mm's page tables): a refcount per mm and a `pinned_asid_map` that seeds the
//!   bitmap on every rollover, at most `available - ncpus - 2` of them so that an
//!   ASID is always free after a rollover.
//! - KPTI: ASIDs come in pairs, the even one for the kernel's view of the mm and
//!   `asid | 1` for user space. The odd bits are set in the bitmaps from the start,
//!   so only even ASIDs are allocated, and every user invalidation is issued a
//!   second time for `asid | 1` (`__tlbi_user`).
//! - User invalidations are always broadcast: `TLBI VALE1IS` per page (modelled as
//!   [`Tlbi::Va`]), `ASIDE1IS` for the whole mm, and a range of 512 pages or more
//!   (`MAX_TLBI_OPS`, without FEAT_TLBIRANGE) becomes the whole-mm flush. The ASID is
//!   read after the `DSB ISHST` (5e10f9887ed8): a CPU that gives the mm a new ASID
//!   after that read walks the updated tables. Each user flush reports its
//!   shootdown phases: issue at the start, dispatch before the TLBIs, sync before
//!   the completing `DSB ISH`, done at the end.
//! - Reclaim's deferred flush (v6.5, 43b3dfdd0455, with 4b634918384c of v6.16):
//!   `arch_tlbbatch_add_pending` is the page's user flush without its completing
//!   `DSB ISH` (`__flush_tlb_range_nosync`), `arch_tlbbatch_flush` that `DSB ISH`
//!   alone, on the CPU that issued the TLBIs, and `arch_flush_tlb_batched_pending`
//!   (another CPU's `munmap` or `madvise` of the mm meanwhile) `flush_tlb_mm`. The
//!   skip-broadcast, `active_cpu` and TLB-mode variants keep the unbatched
//!   defaults (a whole-mm flush at `try_to_unmap_flush`).
//! - Kernel threads and idle keep the previous mm in TTBR0 (lazy TLB: arm64's
//!   `enter_lazy_tlb` does nothing), and `switch_mm` does nothing when the next mm
//!   is the one already loaded.
//!
//! # The zoo
//! [`LinuxArm64::with_bug`] re-introduces two bugs of this file's history (see
//! [`crate::zoo`]): [`Bug::LinuxArm64A8ffaaa060b8`], the fast path's unconditional
//! `xchg` of `active_asids`, in `check_and_switch_context`;
//! [`Bug::LinuxArm645e10f9887ed8`], the user flush's ASID read before its `DSB
//! ISHST`, in `begin_user_flush`; and [`Bug::LinuxArm644b634918384c`],
//! v6.5-v6.15's `arch_flush_tlb_batched_pending` (a lone `dsb(ish)` on the
//! wrong CPU), in `flush_batched_pending`. The first two apply with or without
//! skip-broadcast, whose own two zoo bugs are described in
//! [`super::linux_arm64_skipbcast`]; the third only to the stock kernel.
//!
//! [`LinuxArm64::with_skip_broadcast`] builds the same allocator with Andrea
//! Arcangeli's "arm64: tlb: skip tlbi broadcast" (origin 001) on top: user flushes
//! stay local or vanish when no other CPU runs the mm, lazy CPUs drop to the
//! reserved TTBR0, and a CPU flushes an ASID locally when it finds itself stale
//! for it at switch-in. See [`super::linux_arm64_skipbcast`]. [`LinuxArm64::new`]
//! is the stock kernel, unchanged by that mode.
//!
//! # What is guaranteed
//! Within a generation no two mms hold the same ASID number. A number goes to a
//! different mm only in a later generation, and every CPU flushes its whole TLB
//! locally at its first context switch after the rollover, before it runs an ASID
//! of the new generation; until then it keeps running (or lazily holding) the mm it
//! had, whose number stays reserved for that mm. Nothing is freed earlier: an
//! exited mm's bit stays set until the next rollover.
//!
//! # Deliberate readings
//! - The per-CPU lazily-loaded mm (the scheduler's `active_mm`) is tracked here
//!   because the [`Policy`] interface passes only `next`. Linux keeps an exited mm
//!   alive (`mmgrab`) while a CPU has it loaded lazily; slots here are reused, so
//!   [`Policy::mm_init`] makes every CPU forget a lazily loaded previous occupant of
//!   the slot, and the next switch to the new mm there is a real one.
//! - With `kpti` false this models a kernel built without
//!   `CONFIG_UNMAP_KERNEL_AT_EL0`: a kernel built with it pre-sets the odd bits at
//!   boot even on CPUs that turn out not to need KPTI, so its first generation
//!   allocates only even ASIDs.
//! - TTBR0 is written with the even (kernel-view) ASID under KPTI, as
//!   `cpu_do_switch_mm` does; the exception-return trampoline's switch to
//!   `asid | 1` is not modelled. Neither are CNP, software PAN, branch-predictor
//!   hardening nor FEAT_TLBIRANGE range operations.
//! - The hardware ignores the ASID bits above an 8-bit width in TTBR0 and in TLBI
//!   operands, where the kernel's `ASID(mm)` (`& 0xffff`) would leave generation
//!   bits; the tag here is masked to the width.
//! - A flush of an mm that never had an ASID (`context.id == 0`) skips the TLBI
//!   and its completing `DSB ISH`: nothing was ever cached under it. The kernel
//!   issues the TLBI with ASID 0. The `DSB ISHST` before the id is read stays.

use super::linux_arm64_activecpu::ActiveCpu;
use super::linux_arm64_skipbcast::{SkipBroadcast, TlbFlushKind};
use super::linux_arm64_tlbmode::{TlbMode, TlbModes};
use crate::cpumask::CpuMask;
use crate::fields::{Fields, Owner, Value};
use crate::hw::{Barrier, Domain, Hw, Note, Phase, Root, Scope, Tlbi};
use crate::policy::{Lazy, Policy};
use crate::sync::{AtomicU32, AtomicU64, Ordering, SpinLock};
use crate::types::{Asid, CpuId, MmId, VirtAddr};
use crate::zoo::Bug;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

mod flush;
use flush::*;

/// The number of per-page TLBIs above which a range flush gives up
/// (`MAX_TLBI_OPS`: `PTRS_PER_PTE` with 4 KB pages). A user range of this many
/// pages or more becomes one whole-ASID flush; a kernel range of more than this
/// many pages becomes `flush_tlb_all`.
pub const MAX_TLBI_OPS: u64 = 512;

/// `MAX_TLBI_RANGE_PAGES`: the most pages one range operation covers
/// (`__TLBI_RANGE_PAGES(31, 3)`, 2^21). With `FEAT_TLBIRANGE`, only a user range
/// of more pages becomes the whole-ASID flush.
pub const MAX_TLBI_RANGE_PAGES: u64 = range_pages(31, 3);

/// A per-CPU `active_mm` value meaning "no mm we know of": set when the slot the
/// CPU has lazily loaded is given to a new mm.
pub(super) const NO_MM: u32 = u32::MAX;

/// The error for a machine the allocator cannot run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// The ASID width is neither 8 nor 16 bits (`ID_AA64MMFR0_EL1.ASIDBits`).
    AsidWidth(u8),
    /// Fewer than `ncpus + 2` usable ASIDs: after a rollover every CPU may keep
    /// one, ASID 0 is never allocated, and one more must be free to allocate
    /// (the kernel's `WARN_ON` in `asids_update_limit`).
    TooManyCpus {
        /// The CPUs asked for.
        ncpus: usize,
        /// The usable ASIDs (half the space under KPTI).
        available: u32,
    },
    /// A `tlb_mode` word with bits the TLB modes do not have (above 12), or with
    /// bit 11 (range TLBIs), which is given as `tlbi_range` instead.
    TlbModeWord(u32),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ConfigError::AsidWidth(bits) => write!(
                f,
                "{bits}-bit ASIDs asked for, but arm64 ASIDs are 8 or 16 bits (the checker also takes {MIN_ASID_BITS} \
                 to 7 to reach rollovers quickly)"
            ),
            ConfigError::TooManyCpus { ncpus, available } => write!(
                f,
                "{ncpus} CPUs need at least {} usable ASIDs (one per CPU after a rollover, ASID 0 and one to \
                 allocate), but only {available} are available",
                ncpus + 2
            ),
            ConfigError::TlbModeWord(word) => write!(
                f,
                "tlb_mode={word:#x}: the word is a CPU-count threshold in bits 0-9 (IPIs up to that many CPUs, \
                 broadcast above; 0 always broadcasts), bit 10 (0x400) for local flushes of an mm only this CPU ran, \
                 bit 12 (0x1000) for no flush of an mm no CPU ran; give range TLBIs (bit 11) as tlbi_range=on"
            ),
        }
    }
}

/// The narrowest ASID width accepted. Hardware has 8 or 16 bits; the checker
/// shrinks the space so that a few context switches reach a rollover.
pub const MIN_ASID_BITS: u8 = 2;

/// A fixed-size bitmap of ASID numbers (the kernel's `unsigned long *` bitmaps).
struct Bitmap {
    words: Vec<u64>,
    /// How many bits there are (bits past it in the last word never count as free).
    len: u32,
}

impl Bitmap {
    /// Returns an empty bitmap of `bits` bits.
    fn new(bits: u32) -> Self {
        Bitmap { words: vec![0; bits.div_ceil(64) as usize], len: bits }
    }

    fn test(&self, a: u32) -> bool {
        self.words[(a / 64) as usize] & (1 << (a % 64)) != 0
    }

    fn set(&mut self, a: u32) {
        self.words[(a / 64) as usize] |= 1 << (a % 64);
    }

    fn clear(&mut self, a: u32) {
        self.words[(a / 64) as usize] &= !(1 << (a % 64));
    }

    /// Sets bit `a` and returns whether it was already set (`__test_and_set_bit`).
    fn test_and_set(&mut self, a: u32) -> bool {
        let was = self.test(a);
        self.set(a);
        was
    }

    /// Returns the first clear bit at or after `from` (`find_next_zero_bit`; the
    /// kernel's "not found" is the bitmap size).
    fn find_next_zero(&self, from: u32) -> Option<u32> {
        let mut w = (from / 64) as usize;
        let mut mask = !0u64 << (from % 64);
        while w < self.words.len() {
            let free = !self.words[w] & mask;
            if free != 0 {
                let a = w as u32 * 64 + free.trailing_zeros();
                return (a < self.len).then_some(a);
            }
            mask = !0;
            w += 1;
        }
        None
    }

    /// Overwrites the bitmap with every odd bit set (`set_kpti_asid_bits`: the odd
    /// ASID of each pair is user space's, so only even ones are allocated).
    fn set_kpti_asid_bits(&mut self) {
        self.words.fill(0xaaaa_aaaa_aaaa_aaaa);
    }

    fn copy_from(&mut self, other: &Bitmap) {
        self.words.copy_from_slice(&other.words);
    }
}

/// The state under `cpu_asid_lock`.
struct Allocator {
    /// `asid_map`: one bit per ASID number taken in the current generation.
    asid_map: Bitmap,
    /// `cur_idx`: where the next search for a free ASID starts.
    cur_idx: u32,
    /// `reserved_asids`, per CPU: the id it was running at the last rollover.
    reserved_asids: Vec<u64>,
    /// `tlb_flush_pending`: CPUs that must flush their TLB locally before they run
    /// an ASID of the current generation.
    tlb_flush_pending: CpuMask,
    /// `pinned_asid_map`: pinned ASID numbers (plus the odd bits under KPTI); the
    /// bitmap starts from a copy of it at every rollover.
    pinned_asid_map: Bitmap,
    /// `nr_pinned_asids`: how many mms are pinned.
    nr_pinned_asids: u32,
}

/// The Linux arm64 rollover ASID allocator and its user TLB invalidation.
pub struct LinuxArm64 {
    asid_bits: u8,
    /// Whether the kernel is unmapped at EL0 (`arm64_kernel_unmapped_at_el0`).
    kpti: bool,
    /// Whether the CPUs have `FEAT_TLBIRANGE` (`system_supports_tlb_range`).
    tlbi_range: bool,
    /// `max_pinned_asids`.
    max_pinned_asids: u32,
    /// `asid_generation`: written under the lock, read without it on the fast path.
    asid_generation: AtomicU64,
    /// `cpu_asid_lock` and what it protects.
    cpu_asid_lock: SpinLock<Allocator>,
    /// `active_asids`, per CPU: the id it runs, or 0 once a rollover took note of it.
    active_asids: Vec<AtomicU64>,
    /// Per CPU: the mm whose tables are in TTBR0 (the scheduler's `active_mm`),
    /// kept through kernel threads and idle. With skip-broadcast a lazy CPU's TTBR0
    /// holds the reserved table instead, but this stays the mm it was running.
    pub(super) active_mm: Vec<AtomicU32>,
    /// Per mm slot: `context.id` (`generation | asid`, 0 before the first switch).
    context_id: Vec<AtomicU64>,
    /// Per mm slot: `context.pinned`, the pin refcount. Changed only under the lock.
    pinned: Vec<AtomicU32>,
    /// The origin 001 state (`nr_active_mm`, the stale masks, `cpu_not_lazy_tlb`) when
    /// built by [`LinuxArm64::with_skip_broadcast`]; `None` for the stock kernel.
    pub(super) skip: Option<SkipBroadcast>,
    /// The `active_cpu` words when built by [`LinuxArm64::with_active_cpu`];
    /// `None` otherwise.
    pub(super) active: Option<ActiveCpu>,
    /// The `mm_cpumask`s and the mode word when built by
    /// [`LinuxArm64::with_tlb_mode`]; `None` otherwise.
    pub(super) tlb_modes: Option<TlbModes>,
    /// The zoo bug re-introduced, if any (see [`LinuxArm64::with_bug`]).
    pub(super) bug: Option<Bug>,
}

impl LinuxArm64 {
    /// Returns the allocator for `ncpus` CPUs, `max_mms` mm slots, an ASID width
    /// of `asid_bits` (8 or 16, from `ID_AA64MMFR0_EL1.ASIDBits`) and, with `kpti`,
    /// the kernel unmapped at EL0 (ASIDs allocated in even/odd pairs).
    ///
    /// Fails when the width is not 8 or 16, or when there are too few usable ASIDs
    /// for the CPUs (see [`ConfigError::TooManyCpus`]).
    pub fn new(ncpus: usize, max_mms: usize, asid_bits: u8, kpti: bool) -> Result<Self, ConfigError> {
        Self::build(ncpus, max_mms, asid_bits, kpti, Extension::None)
    }

    /// Returns the allocator as [`LinuxArm64::new`] does, with the state of
    /// `ext` on top.
    pub(super) fn build(
        ncpus: usize,
        max_mms: usize,
        asid_bits: u8,
        kpti: bool,
        ext: Extension,
    ) -> Result<Self, ConfigError> {
        if !(MIN_ASID_BITS..=8).contains(&asid_bits) && asid_bits != 16 {
            return Err(ConfigError::AsidWidth(asid_bits));
        }
        let num_user_asids = 1u32 << asid_bits;
        let available = if kpti { num_user_asids / 2 } else { num_user_asids };
        if (available as usize) < ncpus + 2 {
            return Err(ConfigError::TooManyCpus { ncpus, available });
        }
        let mut asid_map = Bitmap::new(num_user_asids);
        let mut pinned_asid_map = Bitmap::new(num_user_asids);
        if kpti {
            asid_map.set_kpti_asid_bits();
            pinned_asid_map.set_kpti_asid_bits();
        }
        let alloc = Allocator {
            asid_map,
            cur_idx: 1,
            reserved_asids: vec![0; ncpus],
            tlb_flush_pending: CpuMask::new(ncpus),
            pinned_asid_map,
            nr_pinned_asids: 0,
        };
        let slots = max_mms.max(1);
        Ok(LinuxArm64 {
            asid_bits,
            kpti,
            tlbi_range: false,
            max_pinned_asids: available - ncpus as u32 - 2,
            asid_generation: AtomicU64::new(1 << asid_bits),
            cpu_asid_lock: SpinLock::new(alloc),
            active_asids: (0..ncpus).map(|_| AtomicU64::new(0)).collect(),
            active_mm: (0..ncpus).map(|_| AtomicU32::new(MmId::KERNEL.0)).collect(),
            context_id: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            pinned: (0..slots).map(|_| AtomicU32::new(0)).collect(),
            skip: (ext == Extension::SkipBroadcast).then(|| SkipBroadcast::new(ncpus, slots)),
            active: (ext == Extension::ActiveCpu).then(|| ActiveCpu::new(slots)),
            tlb_modes: match ext {
                Extension::TlbMode(word) => Some(TlbModes::new(ncpus, slots, word)),
                _ => None,
            },
            bug: None,
        })
    }

    /// Returns this policy with range invalidation (`FEAT_TLBIRANGE`) on or off:
    /// with it a user or kernel range is flushed with range operations, and
    /// only one of more than [`MAX_TLBI_RANGE_PAGES`] pages becomes the
    /// whole-ASID (or whole-TLB) flush (Linux v7.0 `__flush_tlb_range_nosync`,
    /// `flush_tlb_kernel_range`); without it, as before.
    pub fn with_tlbi_range(mut self, on: bool) -> Self {
        self.tlbi_range = on;
        self
    }

    /// Returns this allocator with `bug` re-introduced (see [`crate::zoo`]):
    /// [`Bug::LinuxArm64A8ffaaa060b8`] and [`Bug::LinuxArm645e10f9887ed8`] on any
    /// of these policies, [`Bug::SkipbcastV1`] and [`Bug::SkipbcastNoBarrier`] only on
    /// the one built by [`LinuxArm64::with_skip_broadcast`],
    /// [`Bug::ActiveCpuEarlyRead`] and [`Bug::ActiveCpuNoSwitchDsb`] only on
    /// [`LinuxArm64::with_active_cpu`]'s, [`Bug::LinuxArm644b634918384c`] only on
    /// the stock one (the only one that batches reclaim's flushes).
    ///
    /// # Panics
    /// If `bug` is another one, a skip-broadcast bug is asked of the stock policy, or
    /// a bug was re-introduced already.
    pub fn with_bug(mut self, bug: Bug) -> Self {
        match bug {
            Bug::LinuxArm64A8ffaaa060b8 | Bug::LinuxArm645e10f9887ed8 => {}
            Bug::LinuxArm644b634918384c => {
                assert!(self.batches_reclaim(), "{bug} applies only to the stock policy, which batches reclaim");
            }
            Bug::SkipbcastV1 | Bug::SkipbcastNoBarrier => {
                assert!(self.skip.is_some(), "{bug} applies only to the skip-broadcast policy");
            }
            Bug::ActiveCpuEarlyRead | Bug::ActiveCpuNoSwitchDsb | Bug::ActiveCpuResetReserved => {
                assert!(self.active.is_some(), "{bug} applies only to the active_cpu policy");
            }
            _ => panic!("{bug} does not apply to Linux arm64"),
        }
        assert!(self.bug.is_none(), "one zoo bug at a time");
        self.bug = Some(bug);
        self
    }

    /// Returns the zoo bug this allocator re-introduces, if any.
    pub fn bug(&self) -> Option<Bug> {
        self.bug
    }

    /// Returns the `context.id` (`generation | asid`) of the mm in slot `mm`, 0 if
    /// it has not had an ASID yet.
    pub fn context_id(&self, mm: MmId) -> u64 {
        // Relaxed: a snapshot for observers; the allocator never relies on it.
        self.context_id[mm.index()].load(Ordering::Relaxed)
    }

    /// Returns the hardware ASID the mm in slot `mm` is tagged with now (the
    /// kernel's `ASID(mm)`).
    pub fn asid_of(&self, mm: MmId) -> Asid {
        self.tag(self.context_id(mm))
    }

    /// Returns the current `asid_generation` (a multiple of `1 << asid_bits`).
    pub fn generation(&self) -> u64 {
        // Relaxed: a snapshot for observers.
        self.asid_generation.load(Ordering::Relaxed)
    }

    /// Returns `cpu`'s `active_asids` entry: the id it runs, or 0 after a rollover
    /// until its next slow-path switch.
    pub fn active_asid(&self, cpu: CpuId) -> u64 {
        // Relaxed: a snapshot for observers.
        self.active_asids[cpu.index()].load(Ordering::Relaxed)
    }

    /// Returns `cpu`'s `reserved_asids` entry, taking the lock.
    pub fn reserved_asid(&self, cpu: CpuId) -> u64 {
        self.cpu_asid_lock.lock().reserved_asids[cpu.index()]
    }

    /// Returns how many mms may be pinned at once (`max_pinned_asids`).
    pub fn max_pinned_asids(&self) -> u32 {
        self.max_pinned_asids
    }

    /// Pins the ASID of the mm in slot `mm` so that it survives rollovers, for a
    /// device that shares the mm's page tables (`arm64_mm_context_get`), and returns
    /// it (under KPTI the user ASID, `asid | 1`). Pins are counted: each needs an
    /// [`LinuxArm64::unpin`].
    ///
    /// Returns `None` when [`LinuxArm64::max_pinned_asids`] mms are pinned already
    /// and this one is not among them. Allocating an ASID for an mm whose
    /// generation is stale may roll over, as a context switch may.
    pub fn pin<H: Hw>(&self, hw: &H, mm: MmId) -> Option<Asid> {
        debug_assert!(!mm.is_kernel());
        let mut a = self.cpu_asid_lock.lock();
        let slot = &self.context_id[mm.index()];
        // Relaxed: the lock orders this read after every store to the id (all under it).
        let mut asid = slot.load(Ordering::Relaxed);
        let pinned = &self.pinned[mm.index()];
        // Relaxed: the refcount changes only under the lock we hold.
        let refs = pinned.load(Ordering::Relaxed);
        if refs != 0 {
            // Relaxed: as above.
            pinned.store(refs + 1, Ordering::Relaxed);
        } else {
            if a.nr_pinned_asids >= self.max_pinned_asids {
                return None;
            }
            if !self.asid_gen_match(asid) {
                // One or more rollovers since the mm last had an ASID (or it never
                // had one): keep its number if still possible, else take a new one.
                asid = self.new_context(hw, &mut a, mm);
                // Relaxed: readers without the lock tolerate a stale id (see the fast path).
                slot.store(asid, Ordering::Relaxed);
            }
            a.nr_pinned_asids += 1;
            let n = self.ctxid2asid(asid);
            a.pinned_asid_map.set(n);
            // Relaxed: as above.
            pinned.store(1, Ordering::Relaxed);
        }
        drop(a);
        let mut n = self.ctxid2asid(asid);
        if self.kpti {
            // The device works on user space: the odd ASID of the pair.
            n |= 1;
        }
        Some(self.tag(u64::from(n)))
    }

    /// Drops one pin of the mm in slot `mm` (`arm64_mm_context_put`); the last one
    /// lets its ASID go at the next rollover like any other.
    pub fn unpin(&self, mm: MmId) {
        // Relaxed: a pinned mm's ASID number never changes, so any id read names the right bit.
        let asid = self.context_id[mm.index()].load(Ordering::Relaxed);
        let mut a = self.cpu_asid_lock.lock();
        let pinned = &self.pinned[mm.index()];
        // Relaxed: the refcount changes only under the lock we hold.
        let refs = pinned.load(Ordering::Relaxed);
        debug_assert!(refs > 0, "unpin of {mm}, which is not pinned");
        if refs == 0 {
            return;
        }
        // Relaxed: as above.
        pinned.store(refs - 1, Ordering::Relaxed);
        if refs == 1 {
            a.pinned_asid_map.clear(self.ctxid2asid(asid));
            a.nr_pinned_asids -= 1;
        }
    }

    /// Returns the ASID number of a context id (`ctxid2asid`).
    fn ctxid2asid(&self, id: u64) -> u32 {
        (id & ((1u64 << self.asid_bits) - 1)) as u32
    }

    /// Returns whether `id` belongs to the current generation (`asid_gen_match`).
    fn asid_gen_match(&self, id: u64) -> bool {
        // Relaxed: without the lock a stale generation is caught by the cmpxchg on
        // active_asids (a rollover zeroes it first); under the lock, the lock orders it.
        (id ^ self.asid_generation.load(Ordering::Relaxed)) >> self.asid_bits == 0
    }

    /// Returns the hardware tag for a context id: its low `asid_bits` bits.
    fn tag(&self, id: u64) -> Asid {
        // Masked to the width, so it always fits.
        Asid::new(self.ctxid2asid(id), self.asid_bits).unwrap_or(Asid::ZERO)
    }

    /// `flush_context`: starts the bitmap of a new generation from the pinned ASIDs
    /// and what each CPU runs, and queues a local flush on every CPU. Called with
    /// the lock held, right after the generation was bumped.
    fn flush_context<H: Hw>(&self, hw: &H, a: &mut Allocator) {
        hw.note(Note::AsidRollover);
        // set_reserved_asid_bits: the pinned map already carries the KPTI odd bits.
        let Allocator { asid_map, pinned_asid_map, reserved_asids, .. } = a;
        asid_map.copy_from(pinned_asid_map);
        for (cpu, active) in self.active_asids.iter().enumerate() {
            // Relaxed: RMWs on one location are totally ordered, so this either sees
            // the CPU's fast-path cmpxchg (and reserves its id) or makes it fail.
            let mut asid = active.swap(0, Ordering::Relaxed);
            if asid == 0 {
                // The CPU has not switched since the previous rollover: what it
                // reserved then is the only record of the mm it still runs.
                asid = reserved_asids[cpu];
            }
            asid_map.set(self.ctxid2asid(asid));
            reserved_asids[cpu] = asid;
        }
        a.tlb_flush_pending.set_all();
    }

    /// `check_update_reserved_asid`: if some CPU reserved `asid` at the last
    /// rollover, moves every such entry to `newasid` (all of them, or a later
    /// rollover would miss a copy) and returns true.
    fn check_update_reserved_asid(a: &mut Allocator, asid: u64, newasid: u64) -> bool {
        let mut hit = false;
        for r in a.reserved_asids.iter_mut().filter(|r| **r == asid) {
            *r = newasid;
            hit = true;
        }
        hit
    }

    /// `new_context`: returns the id `mm` gets in the current generation, rolling
    /// over if the ASID space is exhausted. Called with the lock held.
    fn new_context<H: Hw>(&self, hw: &H, a: &mut Allocator, mm: MmId) -> u64 {
        // Relaxed: the lock orders these reads after every store to them (all under it).
        let asid = self.context_id[mm.index()].load(Ordering::Relaxed);
        let mut generation = self.asid_generation.load(Ordering::Relaxed);
        if let (Some(active), Some(Bug::ActiveCpuResetReserved)) = (&self.active, self.bug) {
            // Zoo bug: the rollover reset of active_cpu before the reserved check,
            // so also for an mm that keeps its number while a CPU still runs it.
            active.reset(hw, mm);
        }
        if asid != 0 {
            let n = self.ctxid2asid(asid);
            let newasid = generation | u64::from(n);
            // Still running somewhere through a rollover: keep it. Checked before
            // the pin so that the reserved entries learn the new generation.
            if Self::check_update_reserved_asid(a, asid, newasid) {
                return newasid;
            }
            // Relaxed: the refcount changes only under the lock we hold.
            if self.pinned[mm.index()].load(Ordering::Relaxed) != 0 {
                return newasid;
            }
            // The old number is free in this generation: reuse it.
            if !a.asid_map.test_and_set(n) {
                return newasid;
            }
        }
        let n = match a.asid_map.find_next_zero(a.cur_idx) {
            Some(n) => n,
            None => {
                // Out of ASIDs: a new generation.
                // Relaxed: readers without the lock also need their cmpxchg on
                // active_asids to succeed, which flush_context's swap prevents.
                generation =
                    self.asid_generation.fetch_add(1 << self.asid_bits, Ordering::Relaxed) + (1 << self.asid_bits);
                self.flush_context(hw, a);
                // At most ncpus reserved and max_pinned_asids pinned numbers leave one free.
                a.asid_map
                    .find_next_zero(1)
                    .expect("no free ASID after a rollover: the constructor's limits prevent this")
            }
        };
        a.asid_map.set(n);
        a.cur_idx = n;
        if let Some(skip) = &self.skip {
            // A number taken afresh holds no entry on any CPU that may run it: either
            // it was free all this generation, or this allocation rolled over and
            // every CPU flushes locally before it runs the new generation.
            skip.clear_stale_mask(hw, mm);
        }
        if let Some(modes) = &self.tlb_modes {
            // set_asid: nothing is cached under a fresh number; this CPU sets its
            // bit before it runs the mm.
            modes.clear_mask(hw, mm);
        }
        generation | u64::from(n)
    }

    /// `check_and_switch_context`: makes sure `mm` has an ASID of the current
    /// generation, then loads its tables and ASID into TTBR0. With skip-broadcast,
    /// first flushes the ASID locally if this CPU is marked stale for `mm`.
    pub(super) fn check_and_switch_context<H: Hw>(&self, hw: &H, mm: MmId) {
        let cpu = hw.cpu();
        let active = &self.active_asids[cpu.index()];
        let slot = &self.context_id[mm.index()];
        // Relaxed: a stale id fails the generation check or is the one a concurrent
        // rollover reserves for this CPU (see the cmpxchg).
        let mut asid = slot.load(Ordering::Relaxed);
        let fast = if self.bug == Some(Bug::LinuxArm64A8ffaaa060b8) {
            // Zoo bug a8ffaaa060b8, the fast path before that fix: the xchg replaces the
            // entry whatever it holds, so a concurrent rollover's 0 is overwritten with
            // this (possibly old-generation) id even when the 0 sends us to the slow
            // path, and a second rollover then reserves that id for this CPU.
            // Relaxed: atomic64_xchg_relaxed.
            self.asid_gen_match(asid) && active.swap(asid, Ordering::Relaxed) != 0
        } else {
            // Relaxed: only a rollover changes it behind our back (to 0), which the cmpxchg sees.
            let old_active_asid = active.load(Ordering::Relaxed);
            // Relaxed: RMWs on one location are totally ordered: either a rollover's swap
            // comes later and reserves our id, or it came first and this fails (a8ffaaa060b8).
            old_active_asid != 0
                && self.asid_gen_match(asid)
                && active.compare_exchange(old_active_asid, asid, Ordering::Relaxed, Ordering::Relaxed).is_ok()
        };
        if !fast {
            let mut a = self.cpu_asid_lock.lock();
            // Relaxed: the lock orders this read after every store to the id (all under it).
            asid = slot.load(Ordering::Relaxed);
            if !self.asid_gen_match(asid) {
                asid = self.new_context(hw, &mut a, mm);
                // Relaxed: readers without the lock tolerate a stale id (see above).
                slot.store(asid, Ordering::Relaxed);
            }
            if a.tlb_flush_pending.test(cpu) {
                a.tlb_flush_pending.clear(cpu);
                Self::local_flush_tlb_all(hw);
            }
            // Relaxed: read back by this CPU, and by rollovers under the lock we hold.
            active.store(asid, Ordering::Relaxed);
        }
        // switch_mm_fastpath.
        if let Some(skip) = &self.skip {
            if skip.take_stale_on_switch_in(hw, mm, cpu) {
                self.local_flush_tlb_asid(hw, self.tag(asid));
            }
        }
        if let Some(active) = &self.active {
            active.on_switch_in(hw, mm, cpu, self.bug == Some(Bug::ActiveCpuNoSwitchDsb));
        }
        if let Some(modes) = &self.tlb_modes {
            modes.on_switch_in(hw, mm, cpu);
        }
        // cpu_switch_mm: the number is the one now in context.id (a rollover since
        // our read keeps it for this CPU).
        hw.write_root(Root::Mm(mm), self.tag(asid), true);
        hw.barrier(Barrier::Isb);
    }
}

/// What a policy's mechanism adds to the stock allocator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Extension {
    /// Nothing: the stock kernel.
    None,
    /// Origin 001's skip-broadcast ([`super::linux_arm64_skipbcast`]).
    SkipBroadcast,
    /// Ryan Roberts' `active_cpu` ([`super::linux_arm64_activecpu`]).
    ActiveCpu,
    /// Christoph Lameter's TLB modes under this mode word
    /// ([`super::linux_arm64_tlbmode`]).
    TlbMode(u32),
}

/// Reads an `active_mm` word: an mm slot, or none.
fn show_active_mm(v: u64, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match v as u32 {
        NO_MM => f.write_str("none"),
        0 => f.write_str("kernel"),
        m => write!(f, "mm{m}"),
    }
}

impl Policy for LinuxArm64 {
    fn mm_init(&self, mm: MmId) {
        debug_assert!(!mm.is_kernel());
        // init_new_context.
        // Relaxed: the new mm reaches other CPUs through the kernel's own hand-off
        // (fork, wake-up), which orders these stores before their reads.
        self.context_id[mm.index()].store(0, Ordering::Relaxed);
        // Relaxed: as above.
        self.pinned[mm.index()].store(0, Ordering::Relaxed);
        // The slot's previous mm is gone; a CPU still holding it lazily must not
        // take the new one for "already loaded".
        for m in &self.active_mm {
            // Relaxed: as above; only that CPU otherwise writes its entry.
            let _ = m.compare_exchange(mm.0, NO_MM, Ordering::Relaxed, Ordering::Relaxed);
        }
        if let Some(skip) = &self.skip {
            skip.init_new_context(mm);
        }
        if let Some(active) = &self.active {
            active.init_new_context(mm);
        }
        if let Some(modes) = &self.tlb_modes {
            modes.init_new_context(mm);
        }
    }

    fn mm_release<H: Hw>(&self, _hw: &H, mm: MmId) {
        // destroy_context is empty on arm64: the ASID's bit stays set until the next
        // rollover, and the mm must have been unpinned.
        // Relaxed: the refcount of a dead mm no longer changes.
        debug_assert_eq!(self.pinned[mm.index()].peek(), 0, "{mm} released while pinned");
        if let Some(skip) = &self.skip {
            // Every CPU that ran it has switched away or gone lazy (dropping it).
            debug_assert_eq!(skip.nr_active_mm(mm), 0, "{mm} released while active");
        }
    }

    fn switch_mm<H: Hw>(&self, hw: &H, next: MmId) {
        if self.skip.is_some() {
            self.switch_mm_skip_broadcast(hw, next);
            return;
        }
        if next.is_kernel() {
            // Kernel thread or idle: enter_lazy_tlb does nothing, TTBR0 keeps prev.
            return;
        }
        let loaded = &self.active_mm[hw.cpu().index()];
        // Relaxed: this CPU's own entry (mm_init only retires a dead slot's value).
        if loaded.load(Ordering::Relaxed) == next.0 {
            // switch_mm with prev == next.
            return;
        }
        self.check_and_switch_context(hw, next);
        // Relaxed: as above.
        loaded.store(next.0, Ordering::Relaxed);
    }

    fn enter_lazy<H: Hw>(&self, hw: &H, who: Lazy) {
        if self.skip.is_some() {
            self.enter_lazy_skip_broadcast(hw, who);
        }
        // Stock arm64: enter_lazy_tlb does nothing for either, TTBR0 keeps prev.
    }

    fn flush_page<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        self.user_flush(hw, mm, |asid| core::iter::once(Tlbi::Va { asid, va }));
    }

    /// `__flush_tlb_range_limit_excess` decides the whole-ASID flush; the rest is
    /// `__flush_tlb_range_op`'s, page by page or (`FEAT_TLBIRANGE`) by ranges.
    fn flush_range<H: Hw>(&self, hw: &H, mm: MmId, start: VirtAddr, pages: u64) {
        if (!self.tlbi_range && pages >= MAX_TLBI_OPS) || pages > MAX_TLBI_RANGE_PAGES {
            self.flush_mm(hw, mm);
            return;
        }
        if self.tlbi_range {
            self.user_flush(hw, mm, |asid| range_ops(start, pages, Some(asid)).into_iter());
            return;
        }
        self.user_flush(hw, mm, |asid| (0..pages).map(move |i| Tlbi::Va { asid, va: start.add_pages(i) }));
    }

    fn flush_mm<H: Hw>(&self, hw: &H, mm: MmId) {
        self.user_flush(hw, mm, |asid| core::iter::once(Tlbi::Asid(asid)));
    }

    /// `arch_tlbbatch_add_pending` (v6.5, 43b3dfdd0455): `__flush_tlb_range_nosync`
    /// of the page, last level only: `DSB ISHST`, the mm's ASID read after it,
    /// `TLBI VALE1IS`, and *no* `DSB ISH`. The TLBI stays pending on this CPU
    /// until [`Policy::flush_batch`]'s `DSB ISH` (the same task; if it migrated,
    /// `__switch_to`'s `dsb(ish)` on this CPU completed it first).
    fn tlbbatch_add_pending<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        if self.batches_reclaim() {
            self.user_flush_sync(hw, mm, |asid| core::iter::once(Tlbi::Va { asid, va }), false);
        }
    }

    /// `arch_tlbbatch_flush`: one `DSB ISH`, which completes every TLBI this
    /// CPU's [`Policy::tlbbatch_add_pending`] calls issued; the batch names no mm.
    fn flush_batch<H: Hw>(&self, hw: &H, mms: &[MmId]) {
        if !self.batches_reclaim() {
            for &mm in mms {
                self.flush_mm(hw, mm);
            }
            return;
        }
        hw.phase(Phase::Sync);
        hw.barrier(Barrier::Dsb(Domain::InnerShareable));
        hw.phase(Phase::Done);
    }

    /// `arch_flush_tlb_batched_pending` since 4b634918384c ("arm64/mm: Close
    /// theoretical race where stale TLB entry remains valid", Ryan Roberts, v6.16):
    /// `flush_tlb_mm(mm)`, a broadcast `TLBI ASIDE1IS` that this CPU's own `DSB
    /// ISH` completes. From v6.5 to v6.15 it was a lone `dsb(ish)`
    /// ([`Bug::LinuxArm644b634918384c`]), which completes only this CPU's TLBIs,
    /// never those a reclaim on another CPU left pending.
    fn flush_batched_pending<H: Hw>(&self, hw: &H, mm: MmId) {
        if self.bug == Some(Bug::LinuxArm644b634918384c) {
            // Zoo bug 4b634918384c: v6.5-v6.15's dsb(ish), on the wrong CPU.
            hw.barrier(Barrier::Dsb(Domain::InnerShareable));
            return;
        }
        self.flush_mm(hw, mm);
    }

    fn flush_kernel_range<H: Hw>(&self, hw: &H, start: VirtAddr, pages: u64) {
        hw.barrier(Barrier::DsbSt(Domain::InnerShareable));
        if self.tlbi_range {
            // v7.0 (a923705c69f7): RVAALE1IS ranges, everything only past the range limit.
            if pages > MAX_TLBI_RANGE_PAGES {
                hw.tlbi(Tlbi::All, Scope::Broadcast);
            } else {
                for op in range_ops(start, pages, None) {
                    hw.tlbi(op, Scope::Broadcast);
                }
            }
        } else if pages > MAX_TLBI_OPS {
            // flush_tlb_all.
            hw.tlbi(Tlbi::All, Scope::Broadcast);
        } else {
            for i in 0..pages {
                hw.tlbi(Tlbi::VaAllAsids { va: start.add_pages(i) }, Scope::Broadcast);
            }
        }
        hw.barrier(Barrier::Dsb(Domain::InnerShareable));
        hw.barrier(Barrier::Isb);
    }

    // ANCHOR: name_fields
    fn name_fields(&self, f: &mut dyn Fields) {
        let bits = self.asid_bits;
        f.add(&self.asid_generation, format_args!("asid_generation"), Value::Generation { asid_bits: bits });
        f.add(&self.cpu_asid_lock, format_args!("cpu_asid_lock"), Value::Lock);
        self.cpu_asid_lock.name_inner(f, |a, f| {
            f.add(&a.tlb_flush_pending, format_args!("tlb_flush_pending"), Value::Cpus { first: 0 })
        });
        // Each CPU's own: other CPUs exchange it (`flush_context`) or retire a
        // dead slot's value with a compare-exchange (`mm_init`), never load it.
        for (c, a) in self.active_asids.iter().enumerate() {
            f.add(a, format_args!("active_asids[cpu{c}]"), Value::GenAsid { asid_bits: bits });
            f.own(a, Owner::Reader { cpu: c as u32 });
        }
        for (c, m) in self.active_mm.iter().enumerate() {
            f.add(m, format_args!("active_mm[cpu{c}]"), Value::Custom(show_active_mm));
            f.own(m, Owner::Reader { cpu: c as u32 });
        }
        for (m, id) in self.context_id.iter().enumerate() {
            f.add(id, format_args!("mm[{m}].context.id"), Value::GenAsid { asid_bits: bits });
        }
        for (m, p) in self.pinned.iter().enumerate() {
            f.add(p, format_args!("mm[{m}].context.pinned"), Value::Number);
        }
        if let Some(skip) = &self.skip {
            skip.name_fields(f);
        }
        if let Some(active) = &self.active {
            active.name_fields(f);
        }
        if let Some(modes) = &self.tlb_modes {
            modes.name_fields(f);
        }
    }
    // ANCHOR_END: name_fields

    /// The allocator under `cpu_asid_lock`: the map, the cursor, the reserved
    /// ASIDs and the pinned map and count (`tlb_flush_pending` is atomics).
    unsafe fn hash_locked(&self, h: &mut dyn core::hash::Hasher) {
        // SAFETY: no CPU runs the policy meanwhile (this function's contract).
        let a = unsafe { self.cpu_asid_lock.peek() };
        a.asid_map.words.iter().for_each(|w| h.write_u64(*w));
        h.write_u32(a.cur_idx);
        a.reserved_asids.iter().for_each(|r| h.write_u64(*r));
        a.pinned_asid_map.words.iter().for_each(|w| h.write_u64(*w));
        h.write_u32(a.nr_pinned_asids);
    }
}

#[cfg(test)]
mod tests;
