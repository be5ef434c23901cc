//! Linux x86 `arch/x86/mm/tlb.c` after the origins: the lazily updated
//! `mm_cpumask` with periodic trimming (Rik van Riel, v6.14) and AMD broadcast TLB
//! invalidation with global ASIDs (Rik van Riel's series, v6.15), with the fixes
//! that followed them (`fea4e317f9e7`, v6.15-rc6; `83b0177a6c48`, v6.18-rc and
//! 6.17.5), and the v6.13 code they change as the baseline. [`super::linux_pcid`] is the older
//! v5.4–v6.1 model of origin 002; this one is written against the later file.
//!
//! # The three kernels ([`Kernel`])
//! - [`Kernel::V613`], the baseline: a CPU leaves the old mm's `mm_cpumask` at
//!   every switch and joins the new one's (two locked RMWs); a remote flush goes to
//!   every CPU of the mask that is not lazy (`tlb_is_not_lazy`), or to all of them
//!   when page tables were freed.
//! - [`Kernel::LazyTrim`] (v6.14's `209954cbc7d0`, `6db2526c1d69`, `953753db887f`,
//!   as v6.18 runs them without `INVLPGB`: with v6.15's earlier
//!   `LOADED_MM_SWITCHING` store from `be88a1dd6112`, `fea4e317f9e7` and
//!   `83b0177a6c48`; the zoo has the states before): a switch no longer clears the old
//!   mm's bit and sets the new one's only when it is absent (otherwise it issues a
//!   full barrier). The first flush IPI that finds another mm loaded clears the
//!   target's bit (`flush_tlb_func`), and once a second per mm
//!   (`next_trim_cpumask`) a flush is sent to the mask's stale CPUs too so that they
//!   do. `should_flush_tlb` picks the targets: not lazy, and running the mm, in the
//!   middle of a switch (`LOADED_MM_SWITCHING`, which the switcher stores before it
//!   reads `tlb_gen` since `be88a1dd6112`), or due to be trimmed.
//! - [`Kernel::Invlpgb`] (v6.15 on `LazyTrim`): an mm flushed while more than
//!   three other CPUs run it gets a *global ASID*, the same PCID on every CPU, for
//!   the rest of its life. Its flushes are `INVLPGB`s of that PCID, which every
//!   CPU's TLB processes without an interrupt, then `TLBSYNC`: no IPI, no
//!   `tlb_gen` comparison, no PCID slot. While some CPU may still run the mm on
//!   its old per-CPU PCID (`asid_transition`), `finish_asid_transition` sends the
//!   old IPI flush to the whole mask, which moves each straggler to the global
//!   PCID. Kernel ranges become `INVLPGB`s with global entries; reclaim's batched
//!   flush becomes one `INVLPGB` of every non-global entry (`0b7eb55cb706`).
//!
//! The global ASID allocator and the broadcast flushes are in `global_asid.rs`,
//! reclaim's targeted batch in `targeted.rs`.
//!
//! # Shared with the earlier models
//! What v6.13's `tlb.c` does as v5.4 and v5.13 do (the dynamic-slot search of
//! `choose_new_asid`, `init_new_context`, `inc_mm_tlb_gen`, v6.13's
//! `mm_cpumask` update and the lazy catch-up of a switch, the batch's
//! generation bump and mask, the flush `flush_tlb_func` ends with, the
//! `mm->context` line accounting, `switch_mm` and the user flushes of
//! `tlbflush.h` as [`Policy`] methods) is written once in
//! `linux_x86_common.rs`;
//! the lazy mask, `LOADED_MM_SWITCHING` and global ASIDs are this module's.
//!
//! # Deliberate readings
//! - PCIDs are on (`INVLPGB` depends on them since `44126343d58c`) and PTI off
//!   (`94a17f2dc90b` disables `INVLPGB` under PTI): one PCID per ASID, `asid + 1`.
//! - The `LOADED_MM_SWITCHING` store is modelled where a remote CPU reads it
//!   (`LazyTrim`, `Invlpgb`); v6.13 stores it too, for `nmi_uaccess_okay` only.
//! - Whether a CPU has `mm` loaded is decided by slot *and* `ctx_id` (each CPU
//!   keeps the `ctx_id` it loaded), as in [`super::linux_pcid`]: a slot may hold a
//!   new mm while a lazy CPU still has the old one's tables. Remote readers compare
//!   slots, as the kernel compares pointers; a stale match costs an IPI.
//! - `next_trim_cpumask` is set to `jiffies + HZ` at the mm's first multi-CPU
//!   flush rather than in `init_new_context` ([`Policy::mm_init`] has no clock), so
//!   no mm is trimmed in the first second of its flushing rather than of its life.
//! - `consider_global_asid` samples a task one jiffy in 32 by
//!   `(current->pid & 31) == (jiffies & 31)`; the flushing CPU's number stands in
//!   for the pid (one pinned thread per CPU in the benchmarks this predicts).
//! - `arch_tlbbatch_add_pending` runs once per mm at the start of
//!   [`Policy::flush_batch`] (the kernel runs it per unmapped PTE); its generation
//!   bump and mask union are what the flush reads, and the flush is of everything.
//! - The initiator runs its own share of `on_each_cpu_cond_mask` before it sends
//!   the IPIs and waits for them (the kernel overlaps the two): [`Hw::send_ipi`]
//!   blocks.
//! - For the checker's small shapes ([`LinuxX86v615::with_small_shapes`]) the
//!   CPU threshold is 0 and every flush samples, so that two CPUs reach a global
//!   ASID; the space size comes from `--asids`.

use crate::cpumask::CpuMask;
use crate::fields::{Fields, Owner, Value};
use crate::hw::{Access, Barrier, Hw, Note, Root, Scope, Tlbi};
use crate::policy::Policy;
use crate::shootdown::{addr_of, CacheLine};
use crate::sync::{fence, spin_loop, AtomicBool, AtomicU32, AtomicU64, Ordering, SpinLock};
use crate::types::{Asid, CpuId, MmId, VirtAddr};
use crate::zoo::Bug;
use alloc::vec::Vec;

mod global_asid;
mod targeted;

use super::linux_x86_common as common;
use common::{
    boot_mms, choose_dynamic_asid, cpumask_any_but, do_kernel_range_flush, kern_pcid, FlushExtent, PcidMms, TlbContext,
    INIT_MM_CTX_ID, TLB_GENERATION_INVALID,
};
use common::{boot_tlbstate, pcid_mms_in_slots, pcid_switch_and_flushes};
pub use common::{Pti, TLB_SINGLE_PAGE_FLUSH_CEILING};
use global_asid::GlobalAsids;

/// The number of per-CPU dynamic PCID slots; global ASIDs start here (the
/// shared count, as this model's ASIDs: a `u32`).
pub const TLB_NR_DYN_ASIDS: u32 = common::TLB_NR_DYN_ASIDS as u32;

/// `loaded_mm` while a CPU is inside `switch_mm_irqs_off` changing mm.
const LOADED_MM_SWITCHING: u32 = u32::MAX;

/// `jiffies` per second ([`Hw::jiffies`] counts at 1000 Hz).
pub const HZ: u64 = 1000;

/// `MAX_ASID_AVAILABLE` with the PTI configuration compiled in (the distribution
/// default): `(1 << 11) - 2`.
pub const MAX_ASID_AVAILABLE: u32 = 2046;

/// Pages one `INVLPGB` may cover on the modelled part (`invlpgb_count_max`,
/// CPUID 0x80000008 EDX bits 15 to 0, plus 1): an estimate, `docs/costs/milan.md`.
pub const INVLPGB_COUNT_MAX: u32 = 8;

/// `mm_active_cpus_exceeds(mm, 3)`: more than three CPUs must run an mm before it
/// gets a global ASID.
pub const GLOBAL_ASID_CPU_THRESHOLD: usize = 3;

/// Which kernel's `tlb.c` this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// v6.13: `mm_cpumask` exact, updated at every switch.
    V613,
    /// v6.14 and later: the lazy `mm_cpumask`, trimmed once a second.
    LazyTrim,
    /// v6.15 and later with `X86_FEATURE_INVLPGB`: `LazyTrim` plus global ASIDs
    /// and broadcast invalidation.
    Invlpgb,
}

/// One flush request (`struct flush_tlb_info`): not the earlier models' shared
/// one, as v6.14 adds `trim_cpumask`.
#[derive(Clone, Copy, Debug)]
struct FlushTlbInfo {
    /// `None` for reclaim's batch: for whatever mm each CPU has loaded.
    mm: Option<MmId>,
    extent: FlushExtent,
    new_tlb_gen: u64,
    freed_tables: bool,
    /// Send to the mask's stale CPUs too, so that they leave it.
    trim_cpumask: bool,
}

impl FlushTlbInfo {
    /// Reclaim's batched flush (`arch_tlbbatch_flush`'s `&full_flush_tlb_info`):
    /// everything, for whatever mm each CPU has loaded.
    const BATCH: FlushTlbInfo = FlushTlbInfo {
        mm: None,
        extent: FlushExtent::All,
        new_tlb_gen: TLB_GENERATION_INVALID,
        freed_tables: false,
        trim_cpumask: false,
    };
}

/// A CPU's TLB state (`cpu_tlbstate`, `is_lazy` from `cpu_tlbstate_shared`),
/// laid out so that its lines hold what the kernel's hold
/// (`arch/x86/include/asm/tlbflush.h`, v6.13 to v6.18, `DECLARE_PER_CPU_ALIGNED`):
/// `loaded_mm`, `last_user_mm`, `loaded_mm_asid`, `next_asid`, the flags, `cr4`
/// and `ctxs[0..2]` in the first 64 bytes (`ctxs[0]` at 32), `ctxs[2..6]` on the
/// second line; `is_lazy` alone on a third (`cpu_tlbstate_shared`). So a flush
/// of slot 0 or 1 (a CPU's first user mm takes slot 1: `next_asid` starts at 1)
/// writes the line whose `loaded_mm` v6.14's `should_flush_tlb` reads remotely.
#[repr(C, align(64))]
struct TlbState {
    /// The mm in CR3 (slot), or [`LOADED_MM_SWITCHING`]. Read by other CPUs.
    loaded_mm: AtomicU32,
    /// Not the kernel's: the `ctx_id` of the mm in CR3 (which incarnation of the
    /// slot), where the kernel has `last_user_mm`.
    loaded_ctx_id: AtomicU64,
    /// A dynamic slot (below [`TLB_NR_DYN_ASIDS`]) or a global ASID. Read by other
    /// CPUs (`finish_asid_transition`).
    loaded_mm_asid: AtomicU32,
    next_asid: AtomicU32,
    /// The CR4 shadow: this CPU's alone, never touched here.
    _cr4: u64,
    ctxs: [TlbContext; common::TLB_NR_DYN_ASIDS],
    is_lazy: CacheLine<AtomicBool>,
}

/// The per-mm part (`mm->context` and `mm_cpumask`): the context's fields on
/// one line, the mask on its own.
#[repr(align(64))]
struct MmContext {
    ctx_id: AtomicU64,
    tlb_gen: AtomicU64,
    cpumask: CacheLine<CpuMask>,
    /// `jiffies` after which the next multi-CPU flush trims; `u64::MAX` until
    /// the first one sets it.
    next_trim_cpumask: AtomicU64,
    /// 0, or the mm's global ASID for the rest of its life.
    global_asid: AtomicU32,
    /// Some CPU may still run the mm on a dynamic ASID.
    asid_transition: AtomicBool,
}

/// Reclaim's batch of one CPU under the posted targeted tlbbatch (the task's
/// `tlb_ubc.arch` and v14's `cpu_tlbstate.need_tlbsync`).
struct TlbBatch {
    /// `batch->cpumask`: the CPUs of the mms flushed by IPI.
    cpumask: CpuMask,
    /// `INVLPGB`s issued and not yet waited for (v5's `batch->used_invlpgb`).
    need_tlbsync: AtomicBool,
}

/// Linux x86 `tlb.c` of v6.13, v6.14+ or v6.15+ with INVLPGB ([`Kernel`]).
pub struct LinuxX86v615 {
    kernel: Kernel,
    /// `MAX_ASID_AVAILABLE`.
    max_asid: u32,
    /// `invlpgb_count_max`.
    count_max: u32,
    /// `mm_active_cpus_exceeds` threshold.
    threshold: usize,
    /// Whether `consider_global_asid` samples one jiffy in 32.
    sample: bool,
    last_mm_ctx_id: AtomicU64,
    cpu_tlbstate: Vec<TlbState>,
    mms: Vec<MmContext>,
    global_asid_lock: SpinLock<GlobalAsids>,
    /// The zoo bug re-introduced, if any ([`LinuxX86v615::with_bug`]).
    bug: Option<Bug>,
    /// Whether a search that finds no clear ID fails the allocation instead of
    /// handing out `MAX_ASID_AVAILABLE` ([`LinuxX86v615::with_max_refused`]).
    refuse_max: bool,
    /// Per CPU, reclaim's batch under the posted targeted tlbbatch; empty for
    /// the merged one ([`LinuxX86v615::with_targeted_tlbbatch`]).
    tlbbatches: Vec<TlbBatch>,
    /// `tlb_single_page_flush_ceiling` ([`LinuxX86v615::with_flush_ceiling`]).
    ceiling: u64,
    /// Page-table isolation, if on ([`LinuxX86v615::with_pti`]).
    pti: Option<Pti>,
    /// Whether the targeted tlbbatch's switches leave out their `tlbsync()`
    /// ([`LinuxX86v615::without_switch_tlbsync`]).
    no_switch_tlbsync: bool,
}

impl LinuxX86v615 {
    /// Returns the policy for `ncpus` CPUs and `max_mms` address-space slots
    /// (slot 0 is `init_mm`), every CPU on `init_mm` in slot 0.
    pub fn new(ncpus: usize, max_mms: usize, kernel: Kernel) -> Self {
        let cpu_tlbstate = (0..ncpus)
            .map(|_| boot_tlbstate!(TlbState { _cr4: 0, is_lazy: CacheLine(AtomicBool::new(false)) }))
            .collect();
        let mms = boot_mms(max_mms, |ctx_id| MmContext {
            ctx_id,
            tlb_gen: AtomicU64::new(0),
            cpumask: CacheLine(CpuMask::new(ncpus)),
            next_trim_cpumask: AtomicU64::new(u64::MAX),
            global_asid: AtomicU32::new(0),
            asid_transition: AtomicBool::new(false),
        });
        LinuxX86v615 {
            kernel,
            max_asid: MAX_ASID_AVAILABLE,
            count_max: INVLPGB_COUNT_MAX,
            threshold: GLOBAL_ASID_CPU_THRESHOLD,
            sample: true,
            last_mm_ctx_id: AtomicU64::new(INIT_MM_CTX_ID),
            cpu_tlbstate,
            mms,
            global_asid_lock: SpinLock::new(GlobalAsids::new(MAX_ASID_AVAILABLE)),
            bug: None,
            refuse_max: false,
            tlbbatches: Vec::new(),
            ceiling: TLB_SINGLE_PAGE_FLUSH_CEILING,
            pti: None,
            no_switch_tlbsync: false,
        }
    }

    /// Returns this policy with `tlb_single_page_flush_ceiling` set to `pages`
    /// (the debugfs file's write): user and kernel ranges of more pages become
    /// full flushes, 0 making every range one.
    pub fn with_flush_ceiling(mut self, pages: u64) -> Self {
        self.ceiling = pages;
        self
    }

    /// Returns this policy with page-table isolation, the user PCID flushed as
    /// `how` says: as [`super::linux_pcid::LinuxX86::with_pti`], whose module
    /// comment says what is modelled and what is not.
    ///
    /// # Panics
    /// On the INVLPGB kernel (AMD, which needs no PTI; global ASIDs have no
    /// user twin here).
    pub fn with_pti(mut self, how: Pti) -> Self {
        assert!(!self.invlpgb(), "PTI is modelled for the kernels without INVLPGB");
        self.pti = Some(how);
        self
    }

    /// Returns this policy with `bug` re-introduced (see [`crate::zoo`]):
    /// [`Bug::LinuxX86Fea4e317f9e7`], [`Bug::LinuxX8683b0177a6c48`] or
    /// [`Bug::LinuxX86StableCheckUseOrder`] on a kernel with the lazy mask;
    /// [`Bug::InvlpgbTlbbatchNoTransition`] or [`Bug::InvlpgbTlbbatchSyncOrIpi`]
    /// with the targeted tlbbatch ([`LinuxX86v615::with_targeted_tlbbatch`]).
    ///
    /// # Panics
    /// If `bug` is another one, its kernel or batch is not this one's, or a bug
    /// was re-introduced already.
    pub fn with_bug(mut self, bug: Bug) -> Self {
        let tlbbatch = matches!(bug, Bug::InvlpgbTlbbatchNoTransition | Bug::InvlpgbTlbbatchSyncOrIpi);
        assert!(
            tlbbatch
                || matches!(
                    bug,
                    Bug::LinuxX86Fea4e317f9e7 | Bug::LinuxX8683b0177a6c48 | Bug::LinuxX86StableCheckUseOrder
                ),
            "{bug} does not apply to Linux x86 v6.14+"
        );
        assert!(self.lazy_mask(), "{bug} is a bug of the lazy mm_cpumask (v6.14 and later)");
        assert_eq!(tlbbatch, self.targeted(), "{bug}: the tlbbatch bugs are the targeted tlbbatch's, and only they");
        assert!(self.bug.is_none(), "one zoo bug at a time");
        self.bug = Some(bug);
        self
    }

    /// Returns the zoo bug this policy re-introduces, if any.
    pub fn bug(&self) -> Option<Bug> {
        self.bug
    }

    /// Returns this policy shaped for the checker's small machines: `global`
    /// global ASIDs counted available (`MAX_ASID_AVAILABLE = global + 7`), an mm
    /// qualifying once any other CPU runs it (threshold 0), and every flush
    /// sampled. Only heuristics change: which mms get a global ASID and when.
    ///
    /// # Panics
    /// If `global` is 0.
    pub fn with_small_shapes(mut self, global: u32) -> Self {
        assert!(global > 0, "a global ASID space needs at least one ID");
        self.max_asid = global + TLB_NR_DYN_ASIDS + 1;
        self.global_asid_lock = SpinLock::new(GlobalAsids::new(self.max_asid));
        self.threshold = 0;
        self.sample = false;
        self
    }

    /// Returns this policy with Hou Wenlong's fix to `allocate_global_asid`
    /// ("x86/mm: Fix wrong judgement in allocate_global_asid()", 2025-03-29,
    /// patch 2 of 3, `Fixes: d504d1247e36`; reviewed by Rik van Riel, not merged
    /// in the trees read): when the search from `last_global_asid` finds no clear
    /// ID below `MAX_ASID_AVAILABLE` the allocation fails, as its warning meant
    /// (the test read `!global_asid_available`, which `use_global_asid` already
    /// made false), and the mm stays on per-CPU ASIDs. A failed search leaves
    /// `last_global_asid` where it was, so no reset follows and every later
    /// search fails too: with the patch alone, global ASIDs end there (safe,
    /// as the mms keep per-CPU ASIDs; the kernel's file does the same).
    pub fn with_max_refused(mut self) -> Self {
        self.refuse_max = true;
        self
    }

    /// Returns this policy with reclaim's batch as the posted, unmerged "x86/mm:
    /// do targeted broadcast flushing from tlbbatch code" has it (v5 to v15 of
    /// the series; module docs): per page an `INVLPGB` of a global-ASID mm, IPIs
    /// for the other mms and for one in transition, `TLBSYNC` after the IPIs.
    ///
    /// # Panics
    /// If the kernel is not [`Kernel::Invlpgb`], or a bug was re-introduced
    /// already (the tlbbatch bugs apply to this batch: build it first).
    pub fn with_targeted_tlbbatch(mut self) -> Self {
        assert!(self.invlpgb(), "the targeted tlbbatch needs INVLPGB");
        assert!(self.bug.is_none(), "choose the batch before the zoo bug");
        let ncpus = self.cpu_tlbstate.len();
        self.tlbbatches = (0..ncpus)
            .map(|_| TlbBatch { cpumask: CpuMask::new(ncpus), need_tlbsync: AtomicBool::new(false) })
            .collect();
        self
    }

    /// Returns whether reclaim's batch is the posted targeted one.
    pub fn targeted(&self) -> bool {
        !self.tlbbatches.is_empty()
    }

    /// Returns the kernel modelled.
    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    fn lazy_mask(&self) -> bool {
        self.kernel != Kernel::V613
    }

    fn invlpgb(&self) -> bool {
        self.kernel == Kernel::Invlpgb
    }

    /// Returns the mm slot `cpu` has in CR3 (`None` in the middle of a switch).
    pub fn loaded_mm(&self, cpu: CpuId) -> Option<MmId> {
        // Relaxed: a report, not a decision.
        let m = self.cpu_tlbstate[cpu.index()].loaded_mm.load(Ordering::Relaxed);
        (m != LOADED_MM_SWITCHING).then_some(MmId(m))
    }

    /// Returns the ASID `cpu`'s CR3 uses: a dynamic slot below
    /// [`TLB_NR_DYN_ASIDS`], or a global ASID.
    pub fn loaded_mm_asid(&self, cpu: CpuId) -> u32 {
        // Relaxed: a report.
        self.cpu_tlbstate[cpu.index()].loaded_mm_asid.load(Ordering::Relaxed)
    }

    /// Returns whether `cpu` is in `mm_cpumask(mm)`.
    pub fn in_mm_cpumask(&self, mm: MmId, cpu: CpuId) -> bool {
        self.mms[mm.index()].cpumask.test(cpu)
    }

    /// Returns `mm`'s global ASID, 0 for none (`mm_global_asid`).
    pub fn global_asid(&self, mm: MmId) -> u32 {
        if !self.invlpgb() {
            return 0;
        }
        // Acquire: pairs with the release in `use_global_asid`, so that a reader
        // of the ASID also sees `asid_transition` set.
        self.mms[mm.index()].global_asid.load(Ordering::Acquire)
    }

    /// Returns whether `mm` may still run on a dynamic ASID somewhere.
    pub fn in_asid_transition(&self, mm: MmId) -> bool {
        // Relaxed: READ_ONCE; ordered after `global_asid`'s acquire where it matters.
        self.invlpgb() && self.mms[mm.index()].asid_transition.load(Ordering::Relaxed)
    }

    /// Returns the flush generation of `mm`.
    pub fn tlb_gen(&self, mm: MmId) -> u64 {
        PcidMms::tlb_gen(self, mm)
    }

    /// Accounts an access to CPU `c`'s `cpu_tlbstate` line (`loaded_mm`).
    fn touch_state<H: Hw>(&self, hw: &H, c: CpuId, a: Access) {
        hw.shared(addr_of(&self.cpu_tlbstate[c.index()]), a);
    }

    /// Accounts an access to CPU `c`'s `is_lazy` (`cpu_tlbstate_shared`).
    fn touch_lazy<H: Hw>(&self, hw: &H, c: CpuId, a: Access) {
        hw.shared(addr_of(&*self.cpu_tlbstate[c.index()].is_lazy), a);
    }

    /// Returns whether `st`'s CPU has this incarnation of `mm` loaded, by slot
    /// and the `ctx_id` it keeps.
    fn is_loaded(&self, st: &TlbState, mm: MmId) -> bool {
        self.is_loaded_as(&st.loaded_mm, &st.loaded_ctx_id, mm)
    }

    /// `mm_needs_global_asid`: `mm` has a global ASID and this CPU is not on it.
    fn needs_global_asid(&self, mm: MmId, asid: u32) -> bool {
        let g = self.global_asid(mm);
        g != 0 && asid != g
    }

    /// Returns the ASID for `next` on this CPU and whether it must be flushed
    /// (`choose_new_asid`).
    fn choose_new_asid<H: Hw>(&self, hw: &H, st: &TlbState, next: MmId, next_tlb_gen: u64) -> (u32, bool) {
        // A global ASID is always current: every flush of the mm reached it.
        if self.invlpgb() {
            self.touch_ctx(hw, next, Access::Read);
        }
        let g = self.global_asid(next);
        if g != 0 {
            return (g, false);
        }
        choose_dynamic_asid(&st.ctxs, &st.next_asid, self.ctx_id(next), next_tlb_gen)
    }

    /// Makes `next` this CPU's mm (`switch_mm_irqs_off`); `next` may be
    /// [`MmId::KERNEL`] (leaving lazy mode for `init_mm`).
    fn switch_mm_irqs_off<H: Hw>(&self, hw: &H, next: MmId) {
        self.switch_tlbsync(hw);
        let cpu = hw.cpu();
        let st = &self.cpu_tlbstate[cpu.index()];
        // Relaxed: this CPU's own state.
        let prev = MmId(st.loaded_mm.load(Ordering::Relaxed));
        let prev_asid = st.loaded_mm_asid.load(Ordering::Relaxed);
        // SeqCst: a flusher bumps tlb_gen then reads is_lazy; we clear is_lazy then
        // read tlb_gen (with a full barrier in between on every path below).
        let was_lazy = st.is_lazy.load(Ordering::SeqCst);
        if was_lazy {
            self.touch_lazy(hw, cpu, Access::Write);
            st.is_lazy.store(false, Ordering::SeqCst);
        }

        let (asid, need_flush, next_tlb_gen);
        if self.is_loaded(st, next) {
            if self.invlpgb() && self.needs_global_asid(next, prev_asid) {
                // The mm got a global ASID while this CPU ran it: move to it.
                next_tlb_gen = self.read_tlb_gen(hw, next);
                (asid, need_flush) = self.choose_new_asid(hw, st, next, next_tlb_gen);
            } else if self.invlpgb() && prev_asid >= TLB_NR_DYN_ASIDS {
                // Broadcasts kept the global ASID current, lazy or not.
                return;
            } else if !was_lazy {
                return;
            } else {
                // Back from lazy mode: catch up in the same slot if it fell behind.
                let Some(behind) = self.lazy_catch_up(hw, &st.ctxs[prev_asid as usize], next) else {
                    return;
                };
                (asid, need_flush, next_tlb_gen) = (prev_asid, true, behind);
            }
        } else if self.lazy_mask() {
            // Zoo bugs fea4e317f9e7 (v6.14.0) and the stable backports of its fix
            // (v6.14.7): SWITCHING stored only after choosing.
            let late = matches!(self.bug, Some(Bug::LinuxX86Fea4e317f9e7 | Bug::LinuxX86StableCheckUseOrder));
            if !late {
                // Announce the switch before reading tlb_gen (be88a1dd6112, v6.15):
                // a flusher that sees neither SWITCHING nor next here must be one
                // whose tlb_gen increment we read below.
                // Release: `is_lazy` above is visible to whoever sees this store.
                self.touch_state(hw, cpu, Access::Write);
                st.loaded_mm.store(LOADED_MM_SWITCHING, Ordering::Release);
            }
            // The previous mm keeps this CPU's bit until a flush trims it.
            if !next.is_kernel() {
                self.touch_mask(hw, next, Access::Read);
            }
            if !next.is_kernel() && !self.mms[next.index()].cpumask.test(cpu) {
                // A locked RMW: a full barrier.
                self.touch_mask(hw, next, Access::RmwAnyOrder);
                self.mms[next.index()].cpumask.set(cpu);
            } else if !late && self.bug != Some(Bug::LinuxX8683b0177a6c48) {
                // 83b0177a6c48 (zoo bug: v6.15-v6.17 lack it): a full barrier even
                // without the RMW, between the SWITCHING store and the tlb_gen read
                // (Dekker with the flusher's increment and loaded_mm read).
                fence(Ordering::SeqCst);
                hw.barrier(Barrier::Full);
            }
            next_tlb_gen = self.read_tlb_gen(hw, next);
            (asid, need_flush) = self.choose_new_asid(hw, st, next, next_tlb_gen);
            if late {
                // Relaxed: v6.14's this_cpu_write after choose_new_asid.
                self.touch_state(hw, cpu, Access::Write);
                st.loaded_mm.store(LOADED_MM_SWITCHING, Ordering::Relaxed);
            }
        } else {
            // v6.13: leave prev's mask, join next's, then read its generation.
            next_tlb_gen = self.switch_mm_cpumask(hw, prev, next);
            (asid, need_flush) = self.choose_new_asid(hw, st, next, next_tlb_gen);
        }

        if need_flush {
            debug_assert!(asid < TLB_NR_DYN_ASIDS, "a global ASID is never flushed at a switch");
            let slot = &st.ctxs[asid as usize];
            hw.shared(addr_of(slot), Access::Write);
            slot.fill(self.ctx_id(next), next_tlb_gen);
        }
        hw.write_root(Root::Mm(next), kern_pcid(asid), !need_flush);
        // Relaxed: CR3 was written first (it serialises); readers of loaded_mm
        // read loaded_mm_asid after it (x86 keeps loads in order).
        st.loaded_ctx_id.store(self.ctx_id(next), Ordering::Relaxed);
        st.loaded_mm_asid.store(asid, Ordering::Relaxed);
        // Release: the ASID above is visible to whoever sees this mm.
        self.touch_state(hw, cpu, Access::Write);
        st.loaded_mm.store(next.0, Ordering::Release);
    }

    /// `enter_lazy_tlb`: CR3 keeps the user mm; this CPU stays in its mask.
    fn enter_lazy_tlb<H: Hw>(&self, hw: &H) {
        self.switch_tlbsync(hw);
        let st = &self.cpu_tlbstate[hw.cpu().index()];
        // Relaxed: this CPU's own state.
        if st.loaded_mm.load(Ordering::Relaxed) == MmId::KERNEL.0 {
            return;
        }
        // SeqCst: see `switch_mm_irqs_off`.
        self.touch_lazy(hw, hw.cpu(), Access::Write);
        st.is_lazy.store(true, Ordering::SeqCst);
    }

    /// Brings this CPU's TLB up to date for `f` (`flush_tlb_func`), in an IPI
    /// handler or on the initiator.
    fn flush_tlb_func<H: Hw>(&self, hw: &H, f: &FlushTlbInfo) {
        let cpu = hw.cpu();
        let st = &self.cpu_tlbstate[cpu.index()];
        if let Some(mm) = f.mm {
            if !self.is_loaded(st, mm) {
                // Switched away since the flusher read the mask: leave it.
                if self.lazy_mask() {
                    self.touch_mask(hw, mm, Access::RmwAnyOrder);
                    self.mms[mm.index()].cpumask.clear(cpu);
                }
                return;
            }
        }
        // Relaxed: this CPU's own state.
        let loaded_mm = MmId(st.loaded_mm.load(Ordering::Relaxed));
        if loaded_mm.is_kernel() {
            return;
        }
        if self.invlpgb() {
            let asid = st.loaded_mm_asid.load(Ordering::Relaxed);
            if self.needs_global_asid(loaded_mm, asid) {
                // A straggler of the transition: move to the global ASID (this
                // also ends lazy mode, the v6.15 order).
                self.switch_mm_irqs_off(hw, loaded_mm);
            }
            if st.loaded_mm_asid.load(Ordering::Relaxed) >= TLB_NR_DYN_ASIDS {
                // Broadcasts keep a global ASID current.
                return;
            }
        }
        // SeqCst: see `switch_mm_irqs_off`.
        if st.is_lazy.load(Ordering::SeqCst) {
            self.switch_mm_irqs_off(hw, MmId::KERNEL);
            return;
        }
        let asid = st.loaded_mm_asid.load(Ordering::Relaxed);
        let local_tlb_gen = st.ctxs[asid as usize].tlb_gen.load(Ordering::Relaxed);
        if f.new_tlb_gen != TLB_GENERATION_INVALID && f.new_tlb_gen <= local_tlb_gen {
            return;
        }
        let mm_tlb_gen = self.read_tlb_gen(hw, loaded_mm);
        if local_tlb_gen == mm_tlb_gen {
            return;
        }
        // Partial only if this is exactly the next generation and the latest;
        // PTI's user PCID as `linux_pcid`'s flush function.
        let range = f.extent.partial(f.new_tlb_gen, local_tlb_gen, mm_tlb_gen);
        // Slots 0 and 1 share the line of `loaded_mm` (the struct's docs).
        st.ctxs[asid as usize].flush_up_to(hw, self.pti, asid, loaded_mm, range, mm_tlb_gen);
    }

    /// Whether CPU `c` gets `f` (`should_flush_tlb`; v6.13's `tlb_is_not_lazy`).
    fn should_flush_tlb<H: Hw>(&self, hw: &H, c: CpuId, f: &FlushTlbInfo) -> bool {
        let st = &self.cpu_tlbstate[c.index()];
        self.touch_lazy(hw, c, Access::Read);
        if !self.lazy_mask() {
            // SeqCst: see `switch_mm_irqs_off`.
            return !st.is_lazy.load(Ordering::SeqCst);
        }
        // Acquire (smp_rmb() after the read, fea4e317f9e7): is_lazy below is at
        // least as new as the loaded_mm read here.
        self.touch_state(hw, c, Access::Read);
        let lm = st.loaded_mm.load(Ordering::Acquire);
        // SeqCst: see `switch_mm_irqs_off`.
        if st.is_lazy.load(Ordering::SeqCst) {
            return false;
        }
        // Zoo bug fea4e317f9e7: v6.14.0 did not treat SWITCHING as running the mm
        // (nor had it the smp_rmb(): Acquire is free under x86's TSO).
        let switching = lm == LOADED_MM_SWITCHING && self.bug != Some(Bug::LinuxX86Fea4e317f9e7);
        match f.mm {
            None => true,
            Some(mm) => switching || lm == mm.0 || f.trim_cpumask,
        }
    }

    /// Runs `f` on the CPUs of `mask` that need it and waits
    /// (`native_flush_tlb_multi`): all of them when page tables were freed or the
    /// mm is in transition, else those `should_flush_tlb` picks; this CPU runs
    /// its own share itself.
    fn flush_tlb_multi<H: Hw>(&self, hw: &H, mask: &CpuMask, f: &FlushTlbInfo) {
        hw.shared(addr_of(mask), Access::Read);
        self.flush_tlb_multi_read(hw, mask, f);
    }

    /// [`Self::flush_tlb_multi`] over a mask only this CPU writes (reclaim's
    /// batch, the reclaiming task's own `tlb_ubc`): no shared line to account.
    fn flush_tlb_multi_read<H: Hw>(&self, hw: &H, mask: &CpuMask, f: &FlushTlbInfo) {
        let me = hw.cpu();
        let all = f.freed_tables || f.mm.is_some_and(|mm| self.in_asid_transition(mm));
        let targets = CpuMask::new(self.cpu_tlbstate.len());
        let mut any = false;
        mask.for_each(|c| {
            if c != me && (all || self.should_flush_tlb(hw, c, f)) {
                targets.set(c);
                any = true;
            }
        });
        if mask.test(me) && (all || self.should_flush_tlb(hw, me, f)) {
            hw.irqs_off(|| self.flush_tlb_func(hw, f));
        }
        if any {
            hw.send_ipi(&targets, |h| self.flush_tlb_func(h, f));
        }
    }

    /// `should_trim_cpumask`: once a second per mm, a flush also reaches the
    /// mask's stale CPUs.
    fn should_trim_cpumask<H: Hw>(&self, hw: &H, mm: MmId) -> bool {
        let m = &self.mms[mm.index()];
        let now = hw.jiffies();
        // Relaxed: READ_ONCE/WRITE_ONCE; racing flushers at worst trim twice.
        self.touch_ctx(hw, mm, Access::Read);
        let next = m.next_trim_cpumask.load(Ordering::Relaxed);
        if next == u64::MAX {
            self.touch_ctx(hw, mm, Access::Write);
            m.next_trim_cpumask.store(now + HZ, Ordering::Relaxed);
            return false;
        }
        // time_after(jiffies, next).
        if (next.wrapping_sub(now) as i64) < 0 {
            self.touch_ctx(hw, mm, Access::Write);
            m.next_trim_cpumask.store(now + HZ, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Invalidates `extent` of `mm` everywhere it may be cached and returns when
    /// that is done (`flush_tlb_mm_range`).
    fn flush_tlb_mm_range<H: Hw>(&self, hw: &H, mm: MmId, extent: FlushExtent, freed_tables: bool) {
        let cpu = hw.cpu();
        let extent = extent.capped(self.ceiling);
        // A locked RMW, a full barrier ordering the page-table change before
        // every read below and before the INVLPGBs.
        let new_tlb_gen = self.inc_mm_tlb_gen(hw, mm);
        let mut info = FlushTlbInfo { mm: Some(mm), extent, new_tlb_gen, freed_tables, trim_cpumask: false };
        let mask = &self.mms[mm.index()].cpumask;
        if self.invlpgb() {
            self.touch_ctx(hw, mm, Access::Read);
        }
        if self.global_asid(mm) != 0 {
            self.broadcast_tlb_flush(hw, &info);
        } else if self.other_in(hw, mask, cpu) {
            if self.lazy_mask() {
                info.trim_cpumask = self.should_trim_cpumask(hw, mm);
            }
            self.flush_tlb_multi(hw, mask, &info);
            if self.invlpgb() {
                self.consider_global_asid(hw, mm);
            }
        } else if self.is_loaded(&self.cpu_tlbstate[cpu.index()], mm) {
            hw.irqs_off(|| self.flush_tlb_func(hw, &info));
        }
    }

    /// Returns whether a CPU other than `me` is in `mask` (`cpumask_any_but`).
    fn other_in<H: Hw>(&self, hw: &H, mask: &CpuMask, me: CpuId) -> bool {
        hw.shared(addr_of(mask), Access::Read);
        cpumask_any_but(mask, me)
    }

    /// Flushes reclaim's batch of `mms` (`arch_tlbbatch_add_pending` for each,
    /// then `arch_tlbbatch_flush`). The batch lives in the reclaiming task
    /// (`current->tlb_ubc`), here a local: its reads are no shared line's (a
    /// temporary's host address must never name a simulated cache line, or
    /// every CPU would share one stack slot and the result would depend on the
    /// build).
    fn tlbbatch<H: Hw>(&self, hw: &H, mms: &[MmId]) {
        let cpu = hw.cpu();
        let batch = CpuMask::new(self.cpu_tlbstate.len());
        let mut unmapped_pages = false;
        for &mm in mms {
            self.arch_tlbbatch_add_mm(hw, &batch, mm);
            unmapped_pages = true;
        }
        let info = FlushTlbInfo::BATCH;
        if self.invlpgb() && unmapped_pages {
            // Global-ASID mms may be cached anywhere: every non-global entry goes.
            hw.tlbi(Tlbi::AllNonGlobal, Scope::Broadcast);
            hw.barrier(Barrier::TlbSync);
        } else if cpumask_any_but(&batch, cpu) {
            self.flush_tlb_multi_read(hw, &batch, &info);
        } else if batch.test(cpu) {
            hw.irqs_off(|| self.flush_tlb_func(hw, &info));
        }
    }
}

// The shared code reaches `mm->context` here, whose line also holds the trim
// deadline and the global ASID.
pcid_mms_in_slots!(LinuxX86v615);

impl Policy for LinuxX86v615 {
    /// `init_new_context`: a fresh `ctx_id`, generation 0, an empty mask, no
    /// global ASID.
    fn mm_init(&self, mm: MmId) {
        self.init_new_context(mm, &self.last_mm_ctx_id);
        let m = &self.mms[mm.index()];
        // Relaxed: the mm is not yet visible to any other CPU.
        m.next_trim_cpumask.store(u64::MAX, Ordering::Relaxed);
        m.global_asid.store(0, Ordering::Relaxed);
        m.asid_transition.store(false, Ordering::Relaxed);
    }

    /// `destroy_context`: a global ASID goes to the freed set, reusable after
    /// the next reset's flush (`mm_free_global_asid`).
    fn mm_release<H: Hw>(&self, _hw: &H, mm: MmId) {
        if self.global_asid(mm) == 0 {
            return;
        }
        let g = self.global_asid_lock.lock();
        let m = &self.mms[mm.index()];
        // Relaxed: under the lock.
        let asid = m.global_asid.load(Ordering::Relaxed);
        GlobalAsids::set(&g.freed, asid, true);
        m.global_asid.store(0, Ordering::Relaxed);
        let avail = g.global_asid_available.load(Ordering::Relaxed);
        g.global_asid_available.store(avail + 1, Ordering::Relaxed);
    }

    // `switch_mm` and the user flushes, as every model with PCIDs has them.
    pcid_switch_and_flushes!();

    /// The merged batch (`arch_tlbbatch_add_pending` per mm, then one `INVLPGB`
    /// of every non-global entry), or the targeted one's flush of what
    /// [`Policy::tlbbatch_add_pending`] queued (the batch names no mm).
    fn flush_batch<H: Hw>(&self, hw: &H, mms: &[MmId]) {
        if self.targeted() {
            self.targeted_tlbbatch_flush(hw);
        } else {
            self.tlbbatch(hw, mms);
        }
    }

    /// The targeted tlbbatch's `arch_tlbbatch_add_pending`; the merged one's
    /// runs in [`Policy::flush_batch`].
    fn tlbbatch_add_pending<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        if self.targeted() {
            self.targeted_add_pending(hw, mm, va);
        }
    }

    /// `flush_tlb_kernel_range`: with INVLPGB, broadcasts that include global
    /// entries (or one of everything above the ceiling) and `TLBSYNC`; without,
    /// `INVLPG` per page (or everything) on every CPU by IPI.
    fn flush_kernel_range<H: Hw>(&self, hw: &H, start: VirtAddr, pages: u64) {
        let full = pages > self.ceiling;
        if self.invlpgb() {
            if full {
                hw.tlbi(Tlbi::All, Scope::Broadcast);
            } else {
                self.invlpgb_range(hw, None, start, pages);
            }
            hw.barrier(Barrier::TlbSync);
            return;
        }
        let flush = |h: &H| do_kernel_range_flush(h, start, pages, full);
        flush(hw);
        if self.cpu_tlbstate.len() > 1 {
            let all = CpuMask::new(self.cpu_tlbstate.len());
            all.set_all();
            hw.send_ipi(&all, flush);
        }
    }

    fn name_fields(&self, f: &mut dyn Fields) {
        f.add(&self.last_mm_ctx_id, format_args!("last_mm_ctx_id"), Value::Number);
        for (c, t) in self.cpu_tlbstate.iter().enumerate() {
            f.add(&t.loaded_mm, format_args!("cpu_tlbstate[cpu{c}].loaded_mm"), Value::Custom(show_loaded_mm));
            f.add(&t.loaded_ctx_id, format_args!("cpu_tlbstate[cpu{c}].loaded_mm->context.ctx_id"), Value::Number);
            f.add(&t.loaded_mm_asid, format_args!("cpu_tlbstate[cpu{c}].loaded_mm_asid"), Value::Number);
            f.add(&t.next_asid, format_args!("cpu_tlbstate[cpu{c}].next_asid"), Value::Number);
            TlbContext::name_slots(&t.ctxs, f, c);
            f.add(&*t.is_lazy, format_args!("cpu_tlbstate_shared[cpu{c}].is_lazy"), Value::Bool);
            // ANCHOR: own_fields
            // Per-CPU variables only their CPU writes (`this_cpu_write`); the
            // CPUs that flush read `loaded_mm`, `loaded_mm_asid` and `is_lazy`.
            let (mine, read_by_all) = Owner::per_cpu(c);
            f.own(&t.loaded_mm, read_by_all);
            f.own(&t.loaded_mm_asid, read_by_all);
            f.own(&*t.is_lazy, read_by_all);
            f.own(&t.loaded_ctx_id, mine);
            f.own(&t.next_asid, mine);
            for x in &t.ctxs {
                f.own(&x.ctx_id, mine);
                f.own(&x.tlb_gen, mine);
            }
            // ANCHOR_END: own_fields
        }
        for (m, x) in self.mms.iter().enumerate() {
            self.mm_fields(MmId(m as u32)).name(f, m);
            f.add(&x.next_trim_cpumask, format_args!("mm[{m}].context.next_trim_cpumask"), Value::Number);
            f.add(&x.global_asid, format_args!("mm[{m}].context.global_asid"), Value::Number);
            f.add(&x.asid_transition, format_args!("mm[{m}].context.asid_transition"), Value::Bool);
        }
        for (c, b) in self.tlbbatches.iter().enumerate() {
            f.add(&b.cpumask, format_args!("tlbbatch[cpu{c}].cpumask"), Value::Cpus { first: 0 });
            f.add(&b.need_tlbsync, format_args!("tlbbatch[cpu{c}].need_tlbsync"), Value::Bool);
            // The batch is the reclaiming task's, on its CPU.
            let mine = Owner::Cpu { cpu: c as u32, others_read: false };
            f.own(&b.cpumask, mine);
            f.own(&b.need_tlbsync, mine);
        }
        f.add(&self.global_asid_lock, format_args!("global_asid_lock"), Value::Lock);
        self.global_asid_lock.name_inner(f, |g, f| {
            for (i, w) in g.used.iter().enumerate() {
                f.add(w, format_args!("global_asid_used[{i}]"), Value::Hex);
            }
            for (i, w) in g.freed.iter().enumerate() {
                f.add(w, format_args!("global_asid_freed[{i}]"), Value::Hex);
            }
            f.add(&g.last_global_asid, format_args!("last_global_asid"), Value::Number);
            f.add(&g.global_asid_available, format_args!("global_asid_available"), Value::Number);
        });
    }
}

fn show_loaded_mm(v: u64, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    match v as u32 {
        LOADED_MM_SWITCHING => f.write_str("LOADED_MM_SWITCHING"),
        0 => f.write_str("init_mm"),
        m => write!(f, "mm{m}"),
    }
}

#[cfg(test)]
mod tests;
