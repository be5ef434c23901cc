//! Linux x86 PCIDs as a per-CPU cache of recently used address spaces (origin 002,
//! `arch/x86/mm/tlb.c`, modelled on v5.4–v6.1: lazy TLB mode with `is_lazy`,
//! `freed_tables`, the `new_tlb_gen <= local_tlb_gen` early exit of v6.0
//! (aa44284960d5, with 8f1d56f64f8d), and reclaim's batched flush as in v6.0–v6.4).
//!
//! # The algorithm
//! No mm owns a PCID. Each CPU keeps `ctxs[TLB_NR_DYN_ASIDS]` (6) slots of
//! `{ctx_id, tlb_gen}`: which mm's user entries may sit in the TLB under that slot's
//! PCID, and the generation of that mm they are up to date with. An mm carries a
//! `ctx_id` that is never reused (a fresh one on every `init_new_context`) and an
//! atomic `tlb_gen` that every flush of it increments.
//!
//! - `choose_new_asid(next)`: a slot holding `next.ctx_id` is reused, flushing only
//!   if its `tlb_gen` is behind `next.tlb_gen`; otherwise the slot at `next_asid` is
//!   taken round-robin (wrapping at 6) and flushed. Without `X86_FEATURE_PCID` the
//!   answer is always slot 0 with a flush, so every change of mm flushes the TLB.
//! - `switch_mm_irqs_off(next)`: if `next` is already loaded, a CPU that was not
//!   lazy has nothing to do, and a lazy one compares its slot's generation with
//!   `next.tlb_gen` (after a full barrier) and flushes in place if it fell behind.
//!   Otherwise it leaves the previous mm's `mm_cpumask`, joins `next`'s *before*
//!   reading `next.tlb_gen`, chooses a slot and writes CR3 with the PCID, adding
//!   `CR3_NOFLUSH` (bit 63) when the slot is up to date.
//! - `enter_lazy_tlb` (a kernel thread or idle): only sets `is_lazy`; CR3 and
//!   `loaded_mm` stay, and the CPU stays in the mm's `mm_cpumask`.
//! - `flush_tlb_mm_range(mm, range, freed_tables)`: more than 33 pages
//!   (`tlb_single_page_flush_ceiling`) become a full flush; `tlb_gen += 1` (a full
//!   barrier); the flush function runs here if `mm` is loaded, and on the other CPUs
//!   of `mm_cpumask` by IPI — only on those not lazy, unless page tables were freed
//!   (a lazy CPU could otherwise walk freed tables speculatively).
//! - `flush_tlb_func`: a lazy CPU switches to `init_mm` instead of flushing; a CPU
//!   already at `new_tlb_gen` does nothing; per-page `INVLPG` only if this flush is
//!   exactly the next generation and the latest (`new == local + 1 == mm.tlb_gen`),
//!   else the whole PCID; either way the slot's generation becomes `mm.tlb_gen`.
//! - Kernel ranges: `INVLPG` per page (kernel PTEs are global) on every CPU, or a
//!   flush of everything including global entries above the ceiling.
//! - Reclaim's batched flush ([`Policy::flush_batch`], `try_to_unmap_flush`):
//!   `arch_tlbbatch_add_mm` bumps each mm's `tlb_gen` (a full barrier after its PTE
//!   changes) and ORs its `mm_cpumask` into the batch's mask; `arch_tlbbatch_flush`
//!   sends one flush with no mm and no generation (`TLB_GENERATION_INVALID`) to the
//!   batch's CPUs that are not lazy (or runs it here alone when this CPU is the only
//!   one): each brings whatever mm it has loaded up to that mm's `tlb_gen` with a
//!   whole-PCID flush.
//!
//! # What is guaranteed
//! A CPU that is not lazy and has `mm` loaded is in `mm_cpumask(mm)` and receives
//! every flush of `mm`; a lazy one misses flushes without freed tables and catches up
//! through `tlb_gen` when it returns to `mm`. A slot's entries are used again only if
//! its `ctx_id` matches, and `ctx_id`s are never reused, so a slot left behind by a
//! dead mm never matches again and `mm_release` has nothing to do.
//!
//! # Shared with the later models
//! What this file's `tlb.c` does as v5.12–v6.15 do is written once in
//! `linux_x86_common.rs`: the slot search of `choose_new_asid`,
//! `init_new_context`, `inc_mm_tlb_gen`, the switch's `mm_cpumask` update and
//! lazy catch-up, `arch_tlbbatch_add_mm`, the flush `flush_tlb_func` ends with,
//! the kernel-range flush, and `switch_mm` and the user flushes of
//! `tlbflush.h` as [`Policy`] methods. This model accounts no cache lines, so the
//! shared code's accounting is off here; `is_loaded` stays its own (it reads
//! the loaded slot's `ctx_id`, keeping no `loaded_ctx_id`).
//!
//! # Deliberate readings
//! - The PCID written is `kern_pcid(asid) = asid + 1` as in every kernel since v4.15
//!   (PCID 0 stays for PCID-unaware code); without PCID the tag is 0.
//! - The whole-PCID flush is modelled as `INVPCID` single-context ([`Tlbi::Asid`](crate::hw::Tlbi::Asid));
//!   the kernel reloads CR3 without `NOFLUSH`, which drops the same entries.
//! - Whether `next` is the loaded mm is decided by slot *and* `ctx_id`. In Linux a
//!   lazy CPU holds a reference to its `loaded_mm`, so an mm's memory is never reused
//!   while some CPU still has it loaded; the simulator reuses a slot at once, so a
//!   slot number alone would let a lazy CPU take a new mm for the dead one it holds.
//! - The local flush runs before the IPIs are sent (v5.4–v5.12); since v5.13
//!   (4ce94eabac16, "x86/mm/tlb: Flush remote and local TLBs concurrently") the
//!   IPIs go out first and the local flush runs while they are in flight, which a
//!   blocking [`Hw::send_ipi`] cannot express: [`super::linux_x86_513`] models both.
//! - The batch's `arch_tlbbatch_add_mm` runs for every mm at the start of
//!   [`Policy::flush_batch`]; the kernel runs it as `try_to_unmap_one` clears each
//!   PTE. Either way the increment follows the PTE change and the mask is read
//!   after it; reading the mask later only adds CPUs that joined meanwhile.
//! - Not modelled: LAM, IBPB / L1D mitigations, paravirt flushes, the per-page
//!   `arch_tlbbatch_add_pending` of v6.5 and later.
//!
//! # The full-flush ceiling
//! `tlb_single_page_flush_ceiling` (33, a debugfs tunable; present at 33 in the
//! v4.10 and v5.10 `arch/x86/mm/tlb.c` read for this model) turns a range of
//! more pages into a full flush in `flush_tlb_mm_range` and
//! `flush_tlb_kernel_range` alike. [`LinuxX86::with_flush_ceiling`] writes the
//! tunable (`--set flush_ceiling=N`); 0 flushes every range whole.
//!
//! # Page-table isolation (PTI, v4.15 on; [`LinuxX86::with_pti`])
//! With PTI each mm has two PCIDs, the kernel's `kern_pcid(asid)` and the
//! user's `user_pcid(asid)` (the same with bit 11, `X86_CR3_PTI_PCID_USER_BIT`),
//! and every entry to the kernel and return to user writes CR3 between them
//! (`SWITCH_TO_KERNEL_CR3` / `SWITCH_TO_USER_CR3`, NOFLUSH unless the user
//! PCID's bit in the per-CPU `user_pcid_flush_mask` is set). What the model
//! does with it (v5.10 `arch/x86/mm/tlb.c`):
//! - `__flush_tlb_one_user(addr)`: `INVLPG` of the kernel PCID's entry, then,
//!   with `X86_FEATURE_INVPCID_SINGLE`, `invpcid_flush_one(user_pcid(asid),
//!   addr)`: an `INVPCID` type 0 of the user PCID per page
//!   ([`Tlbi::Va`](crate::hw::Tlbi::Va) of a tag other than CR3's, which the
//!   machine charges as `INVPCID`); without it, `invalidate_user_asid(asid)`,
//!   and the user PCID is flushed whole by the CR3 write of the next return
//!   to user. The model does that flush once at the end of the flush
//!   function, as a CR3 write without NOFLUSH of the loaded mm: the user
//!   mappings it drops are the same, a little earlier (the kernel runs
//!   between the two and touches no user page in the model).
//! - `flush_tlb_local` (a full flush): `invalidate_user_asid` always, so a
//!   full flush under PTI costs a second flushing CR3 write, modelled the same way.
//! - The CR3 writes at every kernel entry and exit are not the policy's: the
//!   run adds one `root_write` to each exception entry and exit (`--set pti=on`).
//! - Simplified: the simulator's TLB has one tag per CPU's CR3, so user accesses
//!   fill entries under the kernel PCID; the user PCID's `INVPCID` finds
//!   nothing, and its cost is what is modelled. A deferred user flush charges
//!   a CR3 write where the real one replaces the return's NOFLUSH write (one
//!   `root_write` more than the kernel). Kernel ranges under PTI
//!   (`invalidate_other`, non-global kernel PTEs) and the user PCID's flush
//!   after a flushing switch are not modelled.
//!
//! # The zoo
//! [`LinuxX86::with_bug`] re-introduces [`Bug::LinuxX868f1d56f64f8d`] in
//! `flush_tlb_func`: the batch's generation of 0 is compared, so every handler
//! returns without flushing.

use crate::cpumask::CpuMask;
use crate::fields::{Fields, Owner, Value};
use crate::hw::{Hw, Root};
use crate::policy::Policy;
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use crate::types::{Asid, CpuId, MmId, VirtAddr};
use crate::zoo::Bug;
use alloc::vec::Vec;

use super::linux_x86_common::{
    boot_mms, choose_dynamic_asid, cpumask_any_but, do_kernel_range_flush, flush_local, kern_pcid, user_pcid,
    FlushTlbInfo, PcidMms, TlbContext, TLB_GENERATION_INVALID,
};
use super::linux_x86_common::{pcid_mms_in_slots, pcid_switch_and_flushes};
pub use super::linux_x86_common::{FlushExtent, Pti, INIT_MM_CTX_ID, TLB_NR_DYN_ASIDS, TLB_SINGLE_PAGE_FLUSH_CEILING};

/// A CPU's TLB state (`cpu_tlbstate`, with `is_lazy` from `cpu_tlbstate_shared`).
struct TlbState {
    /// The mm whose page tables are in CR3 (slot number; see `ctxs` for identity).
    loaded_mm: AtomicU32,
    /// The slot CR3's PCID belongs to.
    loaded_mm_asid: AtomicU32,
    /// The slot the next mm without one takes.
    next_asid: AtomicU32,
    ctxs: [TlbContext; TLB_NR_DYN_ASIDS],
    /// Running a kernel thread or idle on `loaded_mm`'s page tables. Read by other
    /// CPUs deciding whom to interrupt.
    is_lazy: AtomicBool,
}

/// The per-mm part (`mm->context` and `mm_cpumask`).
struct MmContext {
    ctx_id: AtomicU64,
    tlb_gen: AtomicU64,
    cpumask: CpuMask,
}

/// The Linux x86 TLB code: per-CPU PCID slots, lazy TLB mode and generation-tracked
/// IPI shootdowns, with or without `X86_FEATURE_PCID`.
pub struct LinuxX86 {
    pcid: bool,
    /// `tlb_single_page_flush_ceiling`: ranges of more pages are flushed whole.
    ceiling: u64,
    /// Page-table isolation, if on.
    pti: Option<Pti>,
    /// `last_mm_ctx_id`: the last `ctx_id` handed out.
    last_mm_ctx_id: AtomicU64,
    cpu_tlbstate: Vec<TlbState>,
    mms: Vec<MmContext>,
    /// Every CPU, for `on_each_cpu`.
    all_cpus: CpuMask,
    /// The zoo bug re-introduced, if any (see [`LinuxX86::with_bug`]).
    bug: Option<Bug>,
}

impl LinuxX86 {
    /// Returns the policy for `ncpus` CPUs and `max_mms` address-space slots (slot 0
    /// is `init_mm`), with PCIDs used if `pcid` (the origin's "patched") or every CR3
    /// write that changes mm flushing (the origin's "patched, nopcid").
    ///
    /// Every CPU starts as after `initialize_tlbstate_and_flush`: `init_mm` loaded in
    /// slot 0, `next_asid` 1.
    pub fn new(ncpus: usize, max_mms: usize, pcid: bool) -> Self {
        let cpu_tlbstate = (0..ncpus)
            .map(|_| TlbState {
                loaded_mm: AtomicU32::new(MmId::KERNEL.0),
                loaded_mm_asid: AtomicU32::new(0),
                next_asid: AtomicU32::new(1),
                ctxs: TlbContext::boot_slots(),
                is_lazy: AtomicBool::new(false),
            })
            .collect();
        let mms =
            boot_mms(max_mms, |ctx_id| MmContext { ctx_id, tlb_gen: AtomicU64::new(0), cpumask: CpuMask::new(ncpus) });
        let all_cpus = CpuMask::new(ncpus);
        all_cpus.set_all();
        LinuxX86 {
            pcid,
            ceiling: TLB_SINGLE_PAGE_FLUSH_CEILING,
            pti: None,
            last_mm_ctx_id: AtomicU64::new(INIT_MM_CTX_ID),
            cpu_tlbstate,
            mms,
            all_cpus,
            bug: None,
        }
    }

    /// Returns this policy with `tlb_single_page_flush_ceiling` set to `pages`
    /// (the debugfs file's write): user and kernel ranges of more pages become
    /// full flushes, 0 making every range one.
    pub fn with_flush_ceiling(mut self, pages: u64) -> Self {
        self.ceiling = pages;
        self
    }

    /// Returns this policy with page-table isolation, flushing the user PCID as
    /// `how` says (see the module's comment). PTI needs PCIDs here: without
    /// them every CR3 write at entry and exit flushes the TLB, which the
    /// simulator's kernel does not model.
    ///
    /// # Panics
    /// If the policy runs without PCIDs.
    pub fn with_pti(mut self, how: Pti) -> Self {
        assert!(self.pcid, "PTI is modelled with PCIDs only");
        self.pti = Some(how);
        self
    }

    /// Returns how the user PCID is flushed under PTI, `None` without PTI.
    pub fn pti(&self) -> Option<Pti> {
        self.pti
    }

    /// Returns this policy with `bug` re-introduced (see [`crate::zoo`]): only
    /// [`Bug::LinuxX868f1d56f64f8d`] applies, with or without PCIDs.
    ///
    /// # Panics
    /// If `bug` is another one, or a bug was re-introduced already.
    pub fn with_bug(mut self, bug: Bug) -> Self {
        assert!(bug == Bug::LinuxX868f1d56f64f8d, "{bug} does not apply to Linux x86");
        assert!(self.bug.is_none(), "one zoo bug at a time");
        self.bug = Some(bug);
        self
    }

    /// Returns the zoo bug this policy re-introduces, if any.
    pub fn bug(&self) -> Option<Bug> {
        self.bug
    }

    /// Returns whether PCIDs are used (`X86_FEATURE_PCID`).
    pub fn pcid(&self) -> bool {
        self.pcid
    }

    /// Returns the mm whose page tables `cpu` has in CR3 (lazily or not).
    pub fn loaded_mm(&self, cpu: CpuId) -> MmId {
        // Relaxed: a report of another CPU's state, not a decision.
        MmId(self.cpu_tlbstate[cpu.index()].loaded_mm.load(Ordering::Relaxed))
    }

    /// Returns the slot `cpu`'s CR3 uses (its PCID is this plus one when PCIDs are on).
    pub fn loaded_mm_asid(&self, cpu: CpuId) -> u16 {
        // Relaxed: a report, as in `loaded_mm`.
        self.cpu_tlbstate[cpu.index()].loaded_mm_asid.load(Ordering::Relaxed) as u16
    }

    /// Returns whether `cpu` is in lazy TLB mode.
    pub fn is_lazy(&self, cpu: CpuId) -> bool {
        // SeqCst: as every access to `is_lazy` (see `switch_mm_irqs_off`).
        self.cpu_tlbstate[cpu.index()].is_lazy.load(Ordering::SeqCst)
    }

    /// Returns `(ctx_id, tlb_gen)` of slot `asid` of `cpu`.
    ///
    /// # Panics
    /// If `asid` is not below [`TLB_NR_DYN_ASIDS`].
    pub fn slot(&self, cpu: CpuId, asid: usize) -> (u64, u64) {
        let c = &self.cpu_tlbstate[cpu.index()].ctxs[asid];
        // Relaxed: a report, as in `loaded_mm`.
        (c.ctx_id.load(Ordering::Relaxed), c.tlb_gen.load(Ordering::Relaxed))
    }

    /// Returns the `ctx_id` of the mm in slot `mm`.
    pub fn ctx_id(&self, mm: MmId) -> u64 {
        PcidMms::ctx_id(self, mm)
    }

    /// Returns the flush generation of `mm`.
    pub fn tlb_gen(&self, mm: MmId) -> u64 {
        PcidMms::tlb_gen(self, mm)
    }

    /// Returns whether `cpu` is in `mm_cpumask(mm)`.
    pub fn in_mm_cpumask(&self, mm: MmId, cpu: CpuId) -> bool {
        self.mms[mm.index()].cpumask.test(cpu)
    }

    /// Returns whether `cpu`'s loaded mm is `mm` — the same slot and the same
    /// incarnation of it (the loaded slot always holds the loaded mm's `ctx_id`).
    /// Not the later models' shared test: this model keeps no `loaded_ctx_id`.
    fn is_loaded(&self, st: &TlbState, mm: MmId) -> bool {
        // Relaxed: only this CPU writes its own tlbstate.
        let loaded = st.loaded_mm.load(Ordering::Relaxed);
        let asid = st.loaded_mm_asid.load(Ordering::Relaxed) as usize;
        loaded == mm.0 && st.ctxs[asid].ctx_id.load(Ordering::Relaxed) == self.ctx_id(mm)
    }

    /// Returns the TLB tag of slot `asid`: its PCID, or 0 without PCIDs (`build_cr3`).
    fn tag(&self, asid: u16) -> Asid {
        if self.pcid {
            debug_assert!((asid as usize) < TLB_NR_DYN_ASIDS);
            kern_pcid(asid.into())
        } else {
            Asid::ZERO
        }
    }

    /// Returns the slot for `next` on this CPU and whether it must be flushed
    /// (`choose_new_asid`: the shared search of the slots, or without PCIDs
    /// always slot 0 with a flush).
    fn choose_new_asid(&self, st: &TlbState, next: MmId, next_tlb_gen: u64) -> (u16, bool) {
        if !self.pcid {
            return (0, true);
        }
        let (asid, need_flush) = choose_dynamic_asid(&st.ctxs, &st.next_asid, self.ctx_id(next), next_tlb_gen);
        (asid as u16, need_flush)
    }

    /// Makes `next` this CPU's mm (`switch_mm_irqs_off`); `next` may be
    /// [`MmId::KERNEL`] for an explicit switch to `init_mm` (leaving lazy mode).
    fn switch_mm_irqs_off<H: Hw>(&self, hw: &H, next: MmId) {
        let cpu = hw.cpu();
        let st = &self.cpu_tlbstate[cpu.index()];
        // Relaxed: only this CPU writes loaded_mm and loaded_mm_asid.
        let real_prev = MmId(st.loaded_mm.load(Ordering::Relaxed));
        let prev_asid = st.loaded_mm_asid.load(Ordering::Relaxed) as u16;
        // SeqCst: a flusher increments tlb_gen and then reads is_lazy; we clear
        // is_lazy and then read tlb_gen. With both sides SeqCst, at least one of us
        // sees the other, so the flush is done by its IPI or by us below.
        let was_lazy = st.is_lazy.load(Ordering::SeqCst);
        if was_lazy {
            st.is_lazy.store(false, Ordering::SeqCst);
        }

        let next_tlb_gen;
        let new_asid;
        let need_flush;
        if self.is_loaded(st, next) {
            // Another thread of the same process, or back from a kernel thread.
            if !was_lazy {
                return;
            }
            // Flushes skipped while lazy are caught up in the same slot.
            let Some(behind) = self.lazy_catch_up(hw, &st.ctxs[prev_asid as usize], next) else {
                return;
            };
            next_tlb_gen = behind;
            new_asid = prev_asid;
            need_flush = true;
        } else {
            // Leave the previous mm's mask, join next's, then read its generation.
            next_tlb_gen = self.switch_mm_cpumask(hw, real_prev, next);
            (new_asid, need_flush) = self.choose_new_asid(st, next, next_tlb_gen);
        }

        let slot = &st.ctxs[new_asid as usize];
        if need_flush {
            slot.fill(self.ctx_id(next), next_tlb_gen);
        }
        hw.write_root(Root::Mm(next), self.tag(new_asid), !need_flush);
        // Relaxed: only this CPU writes them; CR3 is written first (it serializes).
        st.loaded_mm.store(next.0, Ordering::Relaxed);
        st.loaded_mm_asid.store(new_asid as u32, Ordering::Relaxed);
    }

    /// Notes that a kernel thread or idle runs on this CPU (`enter_lazy_tlb`): CR3
    /// keeps the user mm, which stops receiving flushes without freed tables.
    fn enter_lazy_tlb<H: Hw>(&self, hw: &H) {
        let st = &self.cpu_tlbstate[hw.cpu().index()];
        // Relaxed: only this CPU writes loaded_mm.
        if st.loaded_mm.load(Ordering::Relaxed) == MmId::KERNEL.0 {
            return;
        }
        // SeqCst: see `switch_mm_irqs_off`.
        st.is_lazy.store(true, Ordering::SeqCst);
    }

    /// Brings this CPU's TLB up to date for `f` (`flush_tlb_func`), locally or in an
    /// IPI handler.
    fn flush_tlb_func<H: Hw>(&self, hw: &H, f: &FlushTlbInfo) {
        let st = &self.cpu_tlbstate[hw.cpu().index()];
        // Relaxed: this CPU's own state (the handler runs on the target CPU).
        let loaded_mm = MmId(st.loaded_mm.load(Ordering::Relaxed));
        let loaded_mm_asid = st.loaded_mm_asid.load(Ordering::Relaxed) as u16;
        let local_tlb_gen = st.ctxs[loaded_mm_asid as usize].tlb_gen.load(Ordering::Relaxed);

        // The CPU switched away after the flusher read mm_cpumask (a batched flush,
        // with no mm, is for whatever mm is loaded).
        if f.mm.is_some_and(|mm| !self.is_loaded(st, mm)) || loaded_mm.is_kernel() {
            return;
        }
        // SeqCst: see `switch_mm_irqs_off`.
        if st.is_lazy.load(Ordering::SeqCst) {
            // Only a freed-tables flush gets here: leave the mm rather than flush it.
            self.switch_mm_irqs_off(hw, MmId::KERNEL);
            return;
        }
        // Whether the request has a generation to compare. Zoo bug 8f1d56f64f8d: before
        // that fix the batch's TLB_GENERATION_INVALID (0) was compared too, and as
        // 0 <= every local generation it always looked done.
        let has_gen = f.new_tlb_gen != TLB_GENERATION_INVALID || self.bug == Some(Bug::LinuxX868f1d56f64f8d);
        if has_gen && f.new_tlb_gen <= local_tlb_gen {
            // Already done by an earlier flush or switch.
            return;
        }
        let mm_tlb_gen = self.tlb_gen(loaded_mm);
        if local_tlb_gen == mm_tlb_gen {
            return;
        }
        debug_assert!(local_tlb_gen < mm_tlb_gen && f.new_tlb_gen <= mm_tlb_gen);

        // Partial or whole (`FlushExtent::partial`); PTI's user PCID as
        // `flush_local` says (the module's comment).
        let range = f.extent.partial(f.new_tlb_gen, local_tlb_gen, mm_tlb_gen);
        let tag = self.tag(loaded_mm_asid);
        flush_local(hw, self.pti, tag, user_pcid(loaded_mm_asid.into()), Root::Mm(loaded_mm), range);
        // Relaxed: this CPU's own slot.
        st.ctxs[loaded_mm_asid as usize].tlb_gen.store(mm_tlb_gen, Ordering::Relaxed);
    }

    /// Invalidates `extent` of `mm` on every CPU that may cache it and returns when
    /// that is done (`flush_tlb_mm_range`). `freed_tables` says page tables were
    /// freed, so lazy CPUs must be interrupted too.
    pub fn flush_tlb_mm_range<H: Hw>(&self, hw: &H, mm: MmId, extent: FlushExtent, freed_tables: bool) {
        let cpu = hw.cpu();
        let extent = extent.capped(self.ceiling);
        // A full barrier, ordering the page-table change and the increment before
        // the reads of mm_cpumask and is_lazy below.
        let new_tlb_gen = self.inc_mm_tlb_gen(hw, mm);
        let info = FlushTlbInfo { mm: Some(mm), extent, new_tlb_gen, freed_tables };

        if self.is_loaded(&self.cpu_tlbstate[cpu.index()], mm) {
            self.flush_tlb_func(hw, &info);
        }

        let targets = CpuMask::new(self.cpu_tlbstate.len());
        let mut any = false;
        self.mms[mm.index()].cpumask.for_each(|c| {
            // tlb_is_not_lazy, unless freed page tables must reach lazy CPUs too.
            if c != cpu && (info.freed_tables || !self.is_lazy(c)) {
                targets.set(c);
                any = true;
            }
        });
        if any {
            hw.send_ipi(&targets, |h| self.flush_tlb_func(h, &info));
        }
    }

    /// Flushes the CPUs of a reclaim batch (`arch_tlbbatch_flush`, v6.0–v6.4): one
    /// request with no mm, the whole address space and no generation, run by every
    /// CPU of `batch` that is not lazy (`flush_tlb_multi` without freed tables, this
    /// CPU included), or here alone when this is the batch's only CPU.
    fn arch_tlbbatch_flush<H: Hw>(&self, hw: &H, batch: &CpuMask) {
        let cpu = hw.cpu();
        let info = FlushTlbInfo::BATCH;
        if cpumask_any_but(batch, cpu) {
            // flush_tlb_multi: tlb_is_not_lazy on every CPU of the batch, this one
            // included; lazy CPUs catch up through tlb_gen at their next switch.
            if batch.test(cpu) && !self.is_lazy(cpu) {
                self.flush_tlb_func(hw, &info);
            }
            let targets = CpuMask::new(self.cpu_tlbstate.len());
            let mut any = false;
            batch.for_each(|c| {
                if c != cpu && !self.is_lazy(c) {
                    targets.set(c);
                    any = true;
                }
            });
            if any {
                hw.send_ipi(&targets, |h| self.flush_tlb_func(h, &info));
            }
        } else if batch.test(cpu) {
            self.flush_tlb_func(hw, &info);
        }
    }
}

// The shared code reaches `mm->context` here; this model accounts no lines.
pcid_mms_in_slots!(LinuxX86, lines = false);

impl Policy for LinuxX86 {
    /// `init_new_context` and `mm_init_cpumask`: a fresh `ctx_id`, generation 0 and
    /// an empty `mm_cpumask`.
    fn mm_init(&self, mm: MmId) {
        self.init_new_context(mm, &self.last_mm_ctx_id);
    }

    /// Does nothing: the mm's slots on each CPU never match a new `ctx_id`.
    fn mm_release<H: Hw>(&self, _hw: &H, _mm: MmId) {}

    // `switch_mm` and the user flushes, as every model with PCIDs has them.
    pcid_switch_and_flushes!();

    /// `try_to_unmap_flush`: every mm joins one batch (`arch_tlbbatch_add_mm`, as
    /// in v4.13–v6.4), then one `arch_tlbbatch_flush`.
    fn flush_batch<H: Hw>(&self, hw: &H, mms: &[MmId]) {
        let batch = CpuMask::new(self.cpu_tlbstate.len());
        for &mm in mms {
            self.arch_tlbbatch_add_mm(hw, &batch, mm);
        }
        self.arch_tlbbatch_flush(hw, &batch);
    }

    /// `flush_tlb_kernel_range`: on every CPU, `INVLPG` per page (kernel PTEs are
    /// global), or a flush of everything above the ceiling.
    fn flush_kernel_range<H: Hw>(&self, hw: &H, start: VirtAddr, pages: u64) {
        let full = pages > self.ceiling;
        let flush = |h: &H| do_kernel_range_flush(h, start, pages, full);
        flush(hw);
        if self.cpu_tlbstate.len() > 1 {
            hw.send_ipi(&self.all_cpus, flush);
        }
    }

    fn name_fields(&self, f: &mut dyn Fields) {
        f.add(&self.last_mm_ctx_id, format_args!("last_mm_ctx_id"), Value::Number);
        for (c, t) in self.cpu_tlbstate.iter().enumerate() {
            f.add(&t.loaded_mm, format_args!("cpu_tlbstate[cpu{c}].loaded_mm"), Value::Mm);
            f.add(&t.loaded_mm_asid, format_args!("cpu_tlbstate[cpu{c}].loaded_mm_asid"), Value::Number);
            f.add(&t.next_asid, format_args!("cpu_tlbstate[cpu{c}].next_asid"), Value::Number);
            TlbContext::name_slots(&t.ctxs, f, c);
            f.add(&t.is_lazy, format_args!("cpu_tlbstate_shared[cpu{c}].is_lazy"), Value::Bool);
            // Per-CPU variables only their CPU writes; the CPUs that flush
            // read `loaded_mm`, `loaded_mm_asid` and `is_lazy`.
            let (mine, read_by_all) = Owner::per_cpu(c);
            f.own(&t.loaded_mm, read_by_all);
            f.own(&t.loaded_mm_asid, read_by_all);
            f.own(&t.is_lazy, read_by_all);
            f.own(&t.next_asid, mine);
            for x in &t.ctxs {
                f.own(&x.ctx_id, mine);
                f.own(&x.tlb_gen, mine);
            }
        }
        for m in 0..self.mms.len() {
            self.mm_fields(MmId(m as u32)).name(f, m);
        }
        f.add(&self.all_cpus, format_args!("cpu_online_mask"), Value::Cpus { first: 0 });
    }
}

#[cfg(test)]
mod tests;
