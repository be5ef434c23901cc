//! Linux arm64 "skip tlbi broadcast" (origin 001): Andrea Arcangeli's patch 3/3 of
//! "arm64: tlb: skip tlbi broadcast v2" (posted 2020-02-23, never merged), on top
//! of the rollover allocator of [`super::linux_arm64`], which it reuses unchanged.
//! Build it with [`LinuxArm64::with_skip_broadcast`].
//!
//! # The algorithm
//! A broadcast `TLBI ...IS` is needed only if another CPU may hold the mm's
//! translations *and* may use them before it flushes them itself. The patch
//! tracks the first half with a counter and turns the second into a deferred
//! local flush:
//!
//! - Per mm, `nr_active_mm`: how many CPUs have the mm in TTBR0 and are not lazy.
//!   Per CPU, `cpu_not_lazy_tlb`: whether it runs a user mm (false at boot).
//! - Per mm, the `mm_cpumask`, read as a *stale* mask: a set bit means that CPU
//!   may hold translations of the mm that a flush skipped on it.
//! - `switch_mm(prev, next)`: from the lazy state, mark this CPU not lazy, count
//!   it in `next` and switch; from a running mm `prev != next`, count it in
//!   `next`, switch, then uncount it from `prev`. The same mm again does nothing.
//!   Leaving the lazy state always switches, even back to the mm it left: its
//!   TTBR0 holds the reserved table.
//! - `enter_lazy_tlb` for the idle task (`is_idle_task`) of a CPU not yet lazy:
//!   mark it lazy, install the reserved TTBR0 so that nothing can be walked or
//!   speculatively filled from the mm any more, and uncount it. For any other
//!   task (a kernel thread, or a user task in `exit_mm`) it does nothing: the CPU
//!   stays counted in its `active_mm`, whose ASID stays in TTBR0, so flushes of
//!   that mm keep reaching it ([`crate::Lazy`]).
//! - At switch-in (`check_and_switch_context`, after the ASID is settled, at the
//!   fast-path label): a full barrier orders the count's increment before the
//!   test; if this CPU is stale for the mm, clear the bit and flush the ASID
//!   locally (`DSB NSHST`, `TLBI ASIDE1`, `DSB NSH`) before TTBR0 is written.
//! - `new_context`: when the mm takes a fresh ASID number, clear its stale mask:
//!   nothing is cached under that number on a CPU that may run it.
//! - [`LinuxArm64::tlb_flush_check`] (`tlb_flush_check`): if `nr_active_mm <= 1`,
//!   mark every CPU stale (unless all but this one already are, when this CPU runs
//!   the mm), full barrier, read the count again; if it is still `<= 1` and this
//!   CPU runs the mm non-lazily, clear its own bit and answer
//!   [`TlbFlushKind::Local`]; if the count is 0, [`TlbFlushKind::No`]. Anything
//!   else is [`TlbFlushKind::Broadcast`].
//! - `flush_tlb_page`, `__flush_tlb_range` (still falling back to the whole-mm
//!   flush from 512 pages, `MAX_TLBI_OPS`) and `flush_tlb_mm` ask it first: `No`
//!   issues nothing, not even a barrier; `Local` issues the TLBIs without `IS`
//!   between `DSB NSHST` and `DSB NSH`; `Broadcast` is the stock sequence.
//!
//! The two full barriers make a store-buffering pair: the switching CPU writes
//! the count then reads the mask, the flushing CPU writes the mask then reads the
//! count. At least one of them sees the other: either the flusher sees the count
//! go up and broadcasts, or the switching CPU sees its stale bit and flushes
//! locally before it runs the mm.
//!
//! # What is guaranteed
//! Under this crate's [`Hw`] model, in which a TTBR0 write ends every walk from
//! the old table at once: when a flush returns, no CPU counted in the mm (one
//! that runs it, or a kernel thread with it as `active_mm`, TTBR0 still on it)
//! holds a translation the flush was meant to remove, and every other CPU either
//! has the reserved TTBR0 or another mm loaded and is marked stale, so it
//! flushes the ASID before it can use the mm again. The stock rollover
//! guarantees of [`super::linux_arm64`] are untouched; a rollover's local flush of
//! everything does not clear stale bits (an extra local flush, as in the patch).
//!
//! # What review found, and what is modelled
//! - *No DSB between the TTBR0 write and the count's decrement* (Catalin Marinas,
//!   2020-03-09; Mark Rutland, 2020-03-16 and 2020-03-31: an `ISB` does not
//!   complete walks already in flight, a `DSB` is needed). Andrea's follow-up of
//!   2020-03-31 adds `DSB ISH` after the TTBR0 write, before the decrement, in
//!   both `switch_mm` and `enter_lazy_tlb`. **Not modelled**: this is v2 as posted
//!   and measured. The [`Hw`] interface has no walks in flight after
//!   [`Hw::write_root`], so the barrier would change cost only; the gap is pinned
//!   by the test `v2_drops_the_count_after_the_ttbr0_write_with_an_isb_and_no_dsb`.
//! - *Intermediate walk caches* (Catalin, Mark): a page-table page freed after a
//!   local-only flush may still be reachable from a remote CPU's cached
//!   table-walk entries, and a speculative walk can run through whatever the page
//!   now holds, whatever ASID is live. **Not modelled**: the oracle has no walk
//!   caches, and [`Tlbi::Va`] stands for the leaf-only `VALE1`.
//! - *Speculative walks of an mm a CPU held earlier*: a lazy CPU keeping the old
//!   TTBR0 could fill entries after its count was dropped (Catalin Marinas on v1,
//!   2020-02-10). **Modelled, and covered**: lazy entry installs the reserved TTBR0
//!   before it uncounts; zoo bug [`Bug::SkipbcastV1`] takes that away.
//! - The 2025 successor (`active_cpu`: none, one CPU, or many) takes another route
//!   and is not modelled here.
//!
//! # The zoo
//! [`LinuxArm64::with_bug`] re-introduces two bugs of this mechanism (see
//! [`crate::zoo`]):
//! - [`Bug::SkipbcastV1`], in `enter_lazy_tlb`: lazy entry leaves TTBR0 on the mm,
//!   as stock arm64 and v1 (2020-02-03) do, while it still drops this CPU from
//!   `nr_active_mm`, for a kernel thread as for the idle task. The count then
//!   stands in for v1's `mm_users`, which a lazy kernel thread holding the mm in
//!   TTBR0 is not part of either: a flush that the count makes local misses a CPU
//!   that can still walk the mm.
//! - [`Bug::SkipbcastNoBarrier`], in [`LinuxArm64::tlb_flush_check`]: no full
//!   barrier between marking CPUs stale and reading the count again. The mask is
//!   set with plain stores (`cpumask_setall` is `bitmap_fill`; [`CpuMask::set_all`]
//!   uses Relaxed stores) and the count is read with a plain load (`atomic_read`),
//!   so only the barrier orders them.
//!
//! # Deliberate readings
//! - v2 writes the re-check as `likely(atomic_read(&nr_active_mm)) <= 1`, which
//!   compares the 0-or-1 result of `likely()` and is therefore always true: as
//!   posted, a flusher that runs the mm answers `Local` even when the re-read
//!   count is 2, and a CPU that switched in and tested its stale bit before the
//!   mask was set keeps stale entries. The count is compared here, as the
//!   comment beside it intends.
//! - [`crate::Policy::switch_mm`] to [`MmId::KERNEL`] does not say who runs; it
//!   is taken as the idle task. The kernels (the simulator's and the checker's)
//!   call [`crate::Policy::enter_lazy`], which says.
//! - Software TTBR0 PAN is off (`system_uses_ttbr0_pan()` false), so lazy entry
//!   writes the reserved TTBR0 itself. `efi_set_pgd` and patches 1/3 (`use_mm`
//!   takes `mm_users`) and 2/3 (`CPUMASK_OFFSTACK`) have nothing to act on here.
//! - The patch (on v5.6) computes the TLBI operand from `ASID(mm)` before
//!   `tlb_flush_check`; here the id is read after the flush's first `DSB`, as the
//!   stock policy does since 5e10f9887ed8, which is after the check.
//! - The count and the mask charge their cache lines through [`Hw::shared`]
//!   (each on a line of its own, as in `mm_struct`), so the switch path pays for
//!   the atomics the patch adds to it; `cpu_not_lazy_tlb` is per CPU and free.
//!
//! [`Tlbi::Va`]: crate::hw::Tlbi::Va

use super::linux_arm64::{ConfigError, LinuxArm64, NO_MM};
use crate::cpumask::CpuMask;
use crate::fields::{Fields, Owner, Value};
use crate::hw::{Access, Barrier, Hw, Root};
use crate::policy::Lazy;
use crate::shootdown::CacheLine;
use crate::sync::{fence, AtomicBool, AtomicI32, Ordering};
use crate::types::{Asid, CpuId, MmId};
use crate::zoo::Bug;
use alloc::vec::Vec;

/// Where a user invalidation must reach (`enum tlb_flush_types`), as
/// [`LinuxArm64::tlb_flush_check`] decides it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlbFlushKind {
    /// No CPU runs the mm: no TLBI and no barrier (`TLB_FLUSH_NO`). Every CPU was
    /// marked stale for it.
    No,
    /// Only this CPU runs the mm: TLBIs without `IS`, completed by `DSB NSH`
    /// (`TLB_FLUSH_LOCAL`). Every other CPU was marked stale for it.
    Local,
    /// Another CPU may run the mm: the stock `TLBI ...IS` and `DSB ISH`
    /// (`TLB_FLUSH_BROADCAST`).
    Broadcast,
}

/// The per-mm and per-CPU state the patch adds.
pub(super) struct SkipBroadcast {
    /// Per mm slot: `context.nr_active_mm`, the CPUs that have the mm in TTBR0 and
    /// are not lazy.
    nr_active_mm: Vec<CacheLine<AtomicI32>>,
    /// Per mm slot: `mm_cpumask`, reused as the mask of CPUs that may hold stale
    /// translations of the mm.
    stale: Vec<CacheLine<CpuMask>>,
    /// Per CPU: `cpu_not_lazy_tlb`, whether it runs a user mm (not idle).
    cpu_not_lazy_tlb: Vec<AtomicBool>,
}

impl SkipBroadcast {
    /// Returns the state for `ncpus` CPUs and `slots` mm slots: nothing counted,
    /// nothing stale, every CPU lazy (as at boot).
    pub(super) fn new(ncpus: usize, slots: usize) -> Self {
        SkipBroadcast {
            nr_active_mm: (0..slots).map(|_| CacheLine(AtomicI32::new(0))).collect(),
            stale: (0..slots).map(|_| CacheLine(CpuMask::new(ncpus))).collect(),
            cpu_not_lazy_tlb: (0..ncpus).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    /// Names the patch's fields (see [`Policy::name_fields`](crate::Policy::name_fields)).
    pub(super) fn name_fields(&self, f: &mut dyn Fields) {
        for (m, n) in self.nr_active_mm.iter().enumerate() {
            f.add(&n.0, format_args!("mm[{m}].context.nr_active_mm"), Value::Number);
        }
        for (m, n) in self.stale.iter().enumerate() {
            f.add(&n.0, format_args!("mm_cpumask(mm[{m}])"), Value::Cpus { first: 0 });
        }
        for (c, n) in self.cpu_not_lazy_tlb.iter().enumerate() {
            f.add(n, format_args!("cpu_not_lazy_tlb[cpu{c}]"), Value::Bool);
            // A per-CPU variable only its CPU reads and writes.
            f.own(n, Owner::Cpu { cpu: c as u32, others_read: false });
        }
    }

    fn count(&self, mm: MmId) -> &AtomicI32 {
        &self.nr_active_mm[mm.index()].0
    }

    fn mask(&self, mm: MmId) -> &CpuMask {
        &self.stale[mm.index()].0
    }

    /// `init_new_context` and `mm_init_cpumask` for a new mm in slot `mm`.
    pub(super) fn init_new_context(&self, mm: MmId) {
        // Relaxed: the new mm reaches other CPUs through the kernel's own hand-off
        // (fork, wake-up), which orders this store before their reads.
        self.count(mm).store(0, Ordering::Relaxed);
        self.mask(mm).clear_all();
    }

    /// Returns `mm`'s `nr_active_mm`.
    pub(super) fn nr_active_mm(&self, mm: MmId) -> i32 {
        self.count(mm).peek()
    }

    /// Reads `mm`'s count for `tlb_flush_check`, accounting its line.
    fn read_count<H: Hw>(&self, hw: &H, mm: MmId) -> i32 {
        let count = self.count(mm);
        hw.shared(count.as_ptr() as usize, Access::Read);
        // Relaxed: `atomic_read` is a plain load; in the flusher's half of the
        // store-buffering pair (mask stores, full barrier, count load) the SeqCst
        // fence of that barrier orders it, against the switch path's SeqCst RMW.
        count.load(Ordering::Relaxed)
    }

    /// Counts this CPU in `mm` (`atomic_inc(&nr_active_mm)`).
    fn activate<H: Hw>(&self, hw: &H, mm: MmId) {
        let count = self.count(mm);
        hw.shared(count.as_ptr() as usize, Access::Rmw);
        // SeqCst: the switch path's half of the pair with tlb_flush_check (count
        // RMW before the stale-mask test at switch-in).
        count.fetch_add(1, Ordering::SeqCst);
    }

    /// Uncounts this CPU from `mm` (`atomic_dec(&nr_active_mm)`).
    fn deactivate<H: Hw>(&self, hw: &H, mm: MmId) {
        let count = self.count(mm);
        hw.shared(count.as_ptr() as usize, Access::Rmw);
        // SeqCst: a flusher's re-read after its SeqCst fence sees the lower count only
        // if this decrement precedes that fence, and with it the TTBR0 switch away
        // from `mm` that comes first in program order.
        let was = count.fetch_sub(1, Ordering::SeqCst);
        debug_assert!(was > 0, "nr_active_mm of {mm} went negative");
    }

    /// `cpumask_clear(mm_cpumask(mm))` in `new_context` (under `cpu_asid_lock`).
    pub(super) fn clear_stale_mask<H: Hw>(&self, hw: &H, mm: MmId) {
        let mask = self.mask(mm);
        hw.shared(core::ptr::from_ref(mask) as usize, Access::Write);
        mask.clear_all();
    }

    /// At the switch-in label: full barrier, then tests this CPU's stale bit for
    /// `mm` and clears it. Returns whether the caller must flush the ASID locally.
    pub(super) fn take_stale_on_switch_in<H: Hw>(&self, hw: &H, mm: MmId, cpu: CpuId) -> bool {
        // smp_mb(): the count's increment in switch_mm before the mask test.
        hw.barrier(Barrier::Full);
        let mask = self.mask(mm);
        let addr = core::ptr::from_ref(mask) as usize;
        hw.shared(addr, Access::Read);
        if !mask.test(cpu) {
            return false;
        }
        hw.shared(addr, Access::Rmw);
        mask.clear(cpu);
        true
    }

    /// Returns whether `cpu` runs a user mm (`cpu_not_lazy_tlb`).
    fn not_lazy(&self, cpu: CpuId) -> bool {
        // Relaxed: only `cpu` writes its own flag, and only `cpu` reads it here.
        self.cpu_not_lazy_tlb[cpu.index()].load(Ordering::Relaxed)
    }

    /// Sets `cpu`'s `cpu_not_lazy_tlb`.
    fn set_not_lazy(&self, cpu: CpuId, not_lazy: bool) {
        // Relaxed: as in `not_lazy`.
        self.cpu_not_lazy_tlb[cpu.index()].store(not_lazy, Ordering::Relaxed);
    }
}

impl LinuxArm64 {
    /// Returns the allocator of [`LinuxArm64::new`] with origin 001's skip-broadcast
    /// on top: user flushes of an mm that runs only on the flushing CPU stay local,
    /// flushes of an mm that runs nowhere issue nothing, and the CPUs they skipped
    /// flush the ASID locally at their next switch to it.
    ///
    /// Fails as [`LinuxArm64::new`] does.
    pub fn with_skip_broadcast(ncpus: usize, max_mms: usize, asid_bits: u8, kpti: bool) -> Result<Self, ConfigError> {
        Self::build(ncpus, max_mms, asid_bits, kpti, super::linux_arm64::Extension::SkipBroadcast)
    }

    /// Returns whether this is the skip-broadcast policy.
    pub fn skips_broadcast(&self) -> bool {
        self.skip.is_some()
    }

    /// Returns `nr_active_mm` of the mm in slot `mm`: how many CPUs run it and are
    /// not lazy. `None` for the stock policy, which does not count.
    pub fn nr_active_mm(&self, mm: MmId) -> Option<i32> {
        self.skip.as_ref().map(|s| s.nr_active_mm(mm))
    }

    /// Returns whether `cpu` is marked stale for the mm in slot `mm`: it flushes
    /// the mm's ASID locally at its next switch to it. Always false for the stock
    /// policy.
    pub fn is_stale(&self, mm: MmId, cpu: CpuId) -> bool {
        self.skip.as_ref().is_some_and(|s| s.mask(mm).test(cpu))
    }

    /// Returns `cpu`'s `cpu_not_lazy_tlb`: whether it runs a user mm rather than
    /// idling with the reserved TTBR0. `None` for the stock policy.
    pub fn cpu_not_lazy_tlb(&self, cpu: CpuId) -> Option<bool> {
        self.skip.as_ref().map(|s| s.not_lazy(cpu))
    }

    /// Decides where a user flush of the mm in slot `mm`, issued on the CPU `hw`
    /// stands for, must reach (`tlb_flush_check(mm, cpu)`), marking the CPUs it
    /// will skip as stale. The stock policy always answers
    /// [`TlbFlushKind::Broadcast`] and changes nothing.
    pub fn tlb_flush_check<H: Hw>(&self, hw: &H, mm: MmId) -> TlbFlushKind {
        let Some(skip) = &self.skip else {
            return TlbFlushKind::Broadcast;
        };
        if skip.read_count(hw, mm) > 1 {
            return TlbFlushKind::Broadcast;
        }
        let cpu = hw.cpu();
        // Relaxed: this CPU's own entry, written only by this CPU.
        let is_local = self.active_mm[cpu.index()].load(Ordering::Relaxed) == mm.0 && skip.not_lazy(cpu);
        let mask = skip.mask(mm);
        let addr = core::ptr::from_ref(mask) as usize;
        hw.shared(addr, Access::Read);
        // cpumask_next_zero, skipping this CPU when it runs the mm: a CPU that the
        // flush would skip and that is not marked yet.
        let unmarked = mask.any_clear_except(is_local.then_some(cpu));
        let local_is_clear = if unmarked {
            hw.shared(addr, Access::Write);
            mask.set_all();
            false
        } else {
            is_local && !mask.test(cpu)
        };
        // smp_mb(): the mask stores above before the count is read again, the
        // flusher's half of the store-buffering pair. Zoo bug skipbcast-no-barrier
        // leaves it out: the stores may still be buffered when the count is read.
        if self.bug != Some(Bug::SkipbcastNoBarrier) {
            // SeqCst fence: the Relaxed mask stores before the count load below.
            fence(Ordering::SeqCst);
            hw.barrier(Barrier::Full);
        }
        if skip.read_count(hw, mm) <= 1 {
            if is_local {
                if !local_is_clear {
                    hw.shared(addr, Access::Rmw);
                    mask.clear(cpu);
                }
                return TlbFlushKind::Local;
            }
            if skip.read_count(hw, mm) == 0 {
                return TlbFlushKind::No;
            }
        }
        TlbFlushKind::Broadcast
    }

    /// `switch_mm` as origin 001 changes it (to [`MmId::KERNEL`]: `enter_lazy_tlb`
    /// for the idle task).
    pub(super) fn switch_mm_skip_broadcast<H: Hw>(&self, hw: &H, next: MmId) {
        let Some(skip) = &self.skip else {
            unreachable!("called only when built with_skip_broadcast");
        };
        let cpu = hw.cpu();
        let loaded = &self.active_mm[cpu.index()];
        // Relaxed: this CPU's own entry (mm_init only retires a dead slot's value).
        let prev = loaded.load(Ordering::Relaxed);
        if next.is_kernel() {
            self.enter_lazy_tlb(hw, skip, cpu, prev, Lazy::Idle);
            return;
        }
        if !skip.not_lazy(cpu) {
            // Out of the lazy state: the count was dropped and TTBR0 is reserved,
            // so even prev == next is a real switch.
            skip.set_not_lazy(cpu, true);
            skip.activate(hw, next);
            self.check_and_switch_context(hw, next);
        } else if prev != next.0 {
            debug_assert!(prev != NO_MM && prev != MmId::KERNEL.0, "cpu{} runs no user mm but is not lazy", cpu.0);
            skip.activate(hw, next);
            self.check_and_switch_context(hw, next);
            // v2 uncounts prev right after the ISB; see the module docs on the DSB.
            skip.deactivate(hw, MmId(prev));
        } else {
            return;
        }
        debug_assert!(skip.nr_active_mm(next) > 0);
        // Relaxed: as above.
        loaded.store(next.0, Ordering::Relaxed);
    }

    /// `enter_lazy_tlb` as origin 001 changes it, for `who`.
    pub(super) fn enter_lazy_skip_broadcast<H: Hw>(&self, hw: &H, who: Lazy) {
        let Some(skip) = &self.skip else {
            unreachable!("called only when built with_skip_broadcast");
        };
        let cpu = hw.cpu();
        // Relaxed: this CPU's own entry (mm_init only retires a dead slot's value).
        let active = self.active_mm[cpu.index()].load(Ordering::Relaxed);
        self.enter_lazy_tlb(hw, skip, cpu, active, who);
    }

    /// `enter_lazy_tlb` for `who` on `cpu`, which was running the mm in slot
    /// `active` (the scheduler's `active_mm`, which it keeps): only the idle task
    /// of a CPU that is not lazy yet drops the count.
    fn enter_lazy_tlb<H: Hw>(&self, hw: &H, skip: &SkipBroadcast, cpu: CpuId, active: u32, who: Lazy) {
        // Zoo bug skipbcast-v1: v1 decided on mm_users, which a kernel thread is not
        // part of either, so under it every lazy entry stops counting this CPU.
        let idle = who == Lazy::Idle || self.bug == Some(Bug::SkipbcastV1);
        if !skip.not_lazy(cpu) || !idle {
            return;
        }
        skip.set_not_lazy(cpu, false);
        // Zoo bug skipbcast-v1: v1 left lazy entry as stock arm64 has it, the mm still
        // in TTBR0, while its decision (mm_users there, the count below here) stops
        // counting this CPU: flushes go local and miss its speculative walks.
        if self.bug != Some(Bug::SkipbcastV1) {
            // cpu_set_reserved_ttbr0: no walk or speculative fill from the mm after this.
            hw.write_root(Root::Reserved, Asid::ZERO, true);
            hw.barrier(Barrier::Isb);
        }
        // v2 uncounts right after the ISB; see the module docs on the DSB.
        skip.deactivate(hw, MmId(active));
    }
}

#[cfg(test)]
mod tests;
