//! What the Linux x86 `arch/x86/mm/tlb.c` models share: the pieces whose
//! kernel code is the same in every release they model.
//!
//! From v4.14 on (PCIDs, `tlb_gen`) a CPU caches mms in `TLB_NR_DYN_ASIDS`
//! `struct tlb_context` slots, an mm carries a `ctx_id` and a `tlb_gen`, and
//! `choose_new_asid`, `inc_mm_tlb_gen`, `init_new_context` and the flush that
//! `flush_tlb_func` ends with read the same from [`super::linux_pcid`]
//! (v5.4–v6.1) through [`super::linux_x86_513`] (v5.12, v5.13) to
//! [`super::linux_x86_615`] (v6.13–v6.15), and so do `switch_mm` and the user
//! flushes of `arch/x86/include/asm/tlbflush.h` (`flush_tlb_page`,
//! `flush_tlb_range`, `flush_tlb_mm`), which those models' `impl Policy` take
//! from `pcid_switch_and_flushes!`. v4.10's [`super::linux_x86_410`], without
//! PCIDs, shares the kernel-range flush and `cpumask_any_but`.
//!
//! Each model keeps its release's `cpu_tlbstate` and `mm->context` as its own
//! types: their layouts are the release's, and the simulator charges, and the
//! checker hashes, the lines they give. The shared code reaches an mm's
//! context through [`PcidMms::mm_fields`], and a CPU's slots as arguments.
//! Where a release differs in a detail, its model keeps its own code and says
//! why; what is here does what each model did before, atomic for atomic and
//! line for line.

use crate::cpumask::CpuMask;
use crate::fields::{Fields, Value};
use crate::hw::{Access, Barrier, Hw, Root, Scope, Tlbi};
use crate::shootdown::addr_of;
use crate::sync::{fence, AtomicU32, AtomicU64, Ordering};
use crate::types::{Asid, CpuId, MmId, Pcid, VirtAddr};
use alloc::vec::Vec;

/// The number of PCID slots each CPU caches mms in (`TLB_NR_DYN_ASIDS`).
pub const TLB_NR_DYN_ASIDS: usize = 6;

/// More pages than this in one flush become a flush of the whole address space
/// (or, for a kernel range, of everything): the default of the debugfs-tunable
/// `tlb_single_page_flush_ceiling`, 33 in every release modelled.
pub const TLB_SINGLE_PAGE_FLUSH_CEILING: u64 = 33;

/// The `ctx_id` of `init_mm` ([`MmId::KERNEL`]); user mms get 2, 3, ...
pub const INIT_MM_CTX_ID: u64 = 1;

/// A `new_tlb_gen` of 0 means "no generation" (reclaim's batched flushes carry
/// it, named `TLB_GENERATION_INVALID` since 8f1d56f64f8d); the early exit of
/// `flush_tlb_func` must not compare it.
pub(super) const TLB_GENERATION_INVALID: u64 = 0;

/// A user range to flush page by page (`Some((start, pages))`), or `None` for
/// the whole address space (its PCID, or without PCIDs a CR3 reload).
pub(super) type Range = Option<(VirtAddr, u64)>;

/// Returns the TLB tag the kernel writes into CR3 for ASID `asid`
/// (`kern_pcid(asid) = asid + 1`, PCID 0 staying for PCID-unaware code): a
/// dynamic slot, or in v6.15 a global ASID.
pub(super) fn kern_pcid(asid: u32) -> Asid {
    match Pcid::new(asid as u16 + 1) {
        Ok(p) => p.asid(),
        Err(_) => unreachable!("ASIDs stay below MAX_ASID_AVAILABLE + 1 < 4095"),
    }
}

/// Returns the user PCID of slot `asid` under PTI (`user_pcid`): the kernel's
/// with bit 11 (`X86_CR3_PTI_PCID_USER_BIT`) set.
pub(super) fn user_pcid(asid: u32) -> Asid {
    match Pcid::new((asid as u16 + 1) | (1 << 11)) {
        Ok(p) => p.asid(),
        Err(_) => unreachable!("slots are below TLB_NR_DYN_ASIDS"),
    }
}

/// How a kernel with page-table isolation flushes a page of the user PCID
/// (`__flush_tlb_one_user`, by `X86_FEATURE_INVPCID_SINGLE`; what is modelled
/// is in [`super::linux_pcid`]'s module comment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pti {
    /// `invpcid_flush_one(user_pcid(asid), addr)`: one `INVPCID` type 0 per page.
    Invpcid,
    /// `invalidate_user_asid(asid)`: the user PCID is flushed whole at the next
    /// return to user (a CPU without `INVPCID`: Ivy Bridge and older).
    Deferred,
}

/// Flushes, on this CPU, `pages` from `start` (`Some`) or the whole of PCID
/// `tag` (`None`), with PTI's user side as `pti` says (`user` is the user
/// twin's tag): per page by INVPCID, or, deferred, one CR3 write without
/// NOFLUSH of `root` standing for the next return to user; `flush_tlb_local`
/// marks the user PCID always. The flush function of every x86 Linux model
/// with PCIDs.
pub(super) fn flush_local<H: Hw>(hw: &H, pti: Option<Pti>, tag: Asid, user: Asid, root: Root, range: Range) {
    let mut flush_user = false;
    match range {
        Some((start, pages)) => {
            for i in 0..pages {
                let va = start.add_pages(i);
                hw.tlbi(Tlbi::Va { asid: tag, va }, Scope::Local);
                match pti {
                    Some(Pti::Invpcid) => hw.tlbi(Tlbi::Va { asid: user, va }, Scope::Local),
                    Some(Pti::Deferred) => flush_user = true,
                    None => {}
                }
            }
        }
        None => {
            hw.tlbi(Tlbi::Asid(tag), Scope::Local);
            flush_user = pti.is_some();
        }
    }
    if flush_user {
        hw.write_root(root, tag, false);
    }
}

/// `do_kernel_range_flush` on this CPU (`do_flush_tlb_all` when `full`, a range
/// above the ceiling): `INVLPG` per page, kernel PTEs being global, or a flush
/// of everything including global entries. The same from v4.10 on.
pub(super) fn do_kernel_range_flush<H: Hw>(hw: &H, start: VirtAddr, pages: u64, full: bool) {
    if full {
        hw.tlbi(Tlbi::All, Scope::Local);
    } else {
        for i in 0..pages {
            hw.tlbi(Tlbi::VaAllAsids { va: start.add_pages(i) }, Scope::Local);
        }
    }
}

/// Returns whether a CPU other than `cpu` is in `mask` (`cpumask_any_but(mask,
/// cpu) < nr_cpu_ids`), reading every word of the mask.
pub(super) fn cpumask_any_but(mask: &CpuMask, cpu: CpuId) -> bool {
    let mut any = false;
    mask.for_each(|c| any |= c != cpu);
    any
}

/// What a flush covers: the kernel's `start`/`end`, with `end == TLB_FLUSH_ALL`
/// as [`FlushExtent::All`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushExtent {
    /// `pages` base pages from `start`.
    Pages {
        /// The first page.
        start: VirtAddr,
        /// How many pages.
        pages: u64,
    },
    /// The whole address space.
    All,
}

impl FlushExtent {
    /// Returns the extent `flush_tlb_mm_range` flushes: a range of more pages
    /// than `ceiling` (`tlb_single_page_flush_ceiling`) becomes everything.
    pub(super) fn capped(self, ceiling: u64) -> FlushExtent {
        match self {
            FlushExtent::Pages { pages, .. } if pages > ceiling => FlushExtent::All,
            e => e,
        }
    }

    /// Returns what `flush_tlb_func` flushes of this extent, requested as
    /// generation `new_tlb_gen`, on a CPU whose slot is at `local_tlb_gen`
    /// while the mm is at `mm_tlb_gen`: the pages only if every generation
    /// before this one is done and none after it exists (`f->new_tlb_gen ==
    /// local_tlb_gen + 1 && f->new_tlb_gen == mm_tlb_gen`), since anything
    /// else would skip or duplicate work; otherwise the whole PCID.
    pub(super) fn partial(self, new_tlb_gen: u64, local_tlb_gen: u64, mm_tlb_gen: u64) -> Range {
        match self {
            FlushExtent::Pages { start, pages } if new_tlb_gen == local_tlb_gen + 1 && new_tlb_gen == mm_tlb_gen => {
                Some((start, pages))
            }
            _ => None,
        }
    }
}

/// One flush request (`struct flush_tlb_info`) as v5.4–v6.13 have it, handed to
/// every CPU that runs it ([`super::linux_x86_615`] keeps its own: v6.14 adds
/// `trim_cpumask`).
#[derive(Clone, Copy, Debug)]
pub(super) struct FlushTlbInfo {
    /// `None` for reclaim's batched flush, which is for whatever mm each CPU
    /// has loaded.
    pub(super) mm: Option<MmId>,
    /// `start` and `end`.
    pub(super) extent: FlushExtent,
    /// The generation this flush brings the mm to; [`TLB_GENERATION_INVALID`]
    /// for the batch.
    pub(super) new_tlb_gen: u64,
    /// Page tables were freed: lazy CPUs must get the flush too.
    pub(super) freed_tables: bool,
}

impl FlushTlbInfo {
    /// Reclaim's batched flush (`arch_tlbbatch_flush`): everything, for
    /// whatever mm each CPU has loaded, with no generation.
    pub(super) const BATCH: FlushTlbInfo =
        FlushTlbInfo { mm: None, extent: FlushExtent::All, new_tlb_gen: TLB_GENERATION_INVALID, freed_tables: false };
}

/// Returns the `ctx_id` that boot leaves in slot `slot` (an mm slot, or a
/// CPU's PCID slot): `init_mm`'s ([`INIT_MM_CTX_ID`]) in slot 0, none (0) in
/// the others.
fn boot_ctx_id(slot: usize) -> AtomicU64 {
    AtomicU64::new(if slot == 0 { INIT_MM_CTX_ID } else { 0 })
}

/// Returns a model's per-mm contexts as boot leaves them: `max_mms` slots (at
/// least one, `init_mm`'s slot 0), `new` making each from its `ctx_id`
/// ([`INIT_MM_CTX_ID`] in slot 0, 0 in the free slots).
pub(super) fn boot_mms<M>(max_mms: usize, new: impl FnMut(AtomicU64) -> M) -> Vec<M> {
    (0..max_mms.max(1)).map(boot_ctx_id).map(new).collect()
}

/// Builds one CPU's `cpu_tlbstate` of the model's type `$state` as
/// `initialize_tlbstate_and_flush` leaves it, for the models that keep the
/// loaded mm's `ctx_id` (v5.12 on): `init_mm` loaded in slot 0 under ASID 0,
/// the next mm without a slot going to slot 1, and the PCID slots of
/// [`TlbContext::boot_slots`]; the model's own fields follow as
/// `field: value`. A macro rather than a shared type, because each model's
/// `cpu_tlbstate` keeps its release's layout.
macro_rules! boot_tlbstate {
    ($state:ident { $($field:ident: $value:expr),* $(,)? }) => {
        $state {
            loaded_mm: $crate::sync::AtomicU32::new($crate::MmId::KERNEL.0),
            loaded_ctx_id: $crate::sync::AtomicU64::new($crate::asid::linux_x86_common::INIT_MM_CTX_ID),
            loaded_mm_asid: $crate::sync::AtomicU32::new(0),
            next_asid: $crate::sync::AtomicU32::new(1),
            ctxs: $crate::asid::linux_x86_common::TlbContext::boot_slots(),
            $($field: $value,)*
        }
    };
}
pub(super) use boot_tlbstate;

/// One PCID slot of a CPU (`struct tlb_context`): which mm's user entries may
/// sit in the TLB under the slot's PCID, and the generation of that mm they
/// are up to date with. Only its own CPU touches it.
pub(super) struct TlbContext {
    /// The `ctx_id` of the mm cached in the slot.
    pub(super) ctx_id: AtomicU64,
    /// The mm's `tlb_gen` the slot's entries are up to date with.
    pub(super) tlb_gen: AtomicU64,
}

impl TlbContext {
    /// Returns a CPU's slots as `initialize_tlbstate_and_flush` leaves them:
    /// `init_mm` in slot 0 at generation 0, the others empty.
    pub(super) fn boot_slots() -> [TlbContext; TLB_NR_DYN_ASIDS] {
        core::array::from_fn(|asid| TlbContext { ctx_id: boot_ctx_id(asid), tlb_gen: AtomicU64::new(0) })
    }

    /// Names CPU `c`'s slots `ctxs` for the checker
    /// (`cpu_tlbstate[cpuC].ctxs[A].ctx_id` and `.tlb_gen`).
    pub(super) fn name_slots(ctxs: &[TlbContext], f: &mut dyn Fields, c: usize) {
        for (a, x) in ctxs.iter().enumerate() {
            f.add(&x.ctx_id, format_args!("cpu_tlbstate[cpu{c}].ctxs[{a}].ctx_id"), Value::Number);
            f.add(&x.tlb_gen, format_args!("cpu_tlbstate[cpu{c}].ctxs[{a}].tlb_gen"), Value::Number);
        }
    }

    /// The end of `flush_tlb_func` from v5.12 on, this being slot `asid` of
    /// this CPU: flushes `range` of `loaded_mm` under the slot's PCIDs, then
    /// records that the slot is up to date with `mm_tlb_gen`
    /// (`this_cpu_write(cpu_tlbstate.ctxs[asid].tlb_gen, mm_tlb_gen)`), a
    /// store to the slot's line (where it lies is each model's layout).
    pub(super) fn flush_up_to<H: Hw>(
        &self,
        hw: &H,
        pti: Option<Pti>,
        asid: u32,
        loaded_mm: MmId,
        range: Range,
        mm_tlb_gen: u64,
    ) {
        flush_local(hw, pti, kern_pcid(asid), user_pcid(asid), Root::Mm(loaded_mm), range);
        hw.shared(addr_of(self), Access::Write);
        // Relaxed: this CPU's own slot.
        self.tlb_gen.store(mm_tlb_gen, Ordering::Relaxed);
    }

    /// Makes the slot cache the mm of `ctx_id` at generation `tlb_gen`
    /// (`switch_mm_irqs_off` after a flushing `choose_new_asid`:
    /// `this_cpu_write(cpu_tlbstate.ctxs[new_asid].ctx_id, ...)` and
    /// `.tlb_gen`).
    pub(super) fn fill(&self, ctx_id: u64, tlb_gen: u64) {
        // Relaxed: only this CPU reads or writes its slots.
        self.ctx_id.store(ctx_id, Ordering::Relaxed);
        self.tlb_gen.store(tlb_gen, Ordering::Relaxed);
    }
}

/// `choose_new_asid`'s search of this CPU's dynamic slots `ctxs` for the mm of
/// `ctx_id` at generation `next_tlb_gen`: the slot that holds it, to be flushed
/// only if its generation is behind; otherwise the slot at `next_asid`, taken
/// round-robin (wrapping at [`TLB_NR_DYN_ASIDS`] to 0) and flushed. Returns the
/// slot and whether it must be flushed.
pub(super) fn choose_dynamic_asid(
    ctxs: &[TlbContext; TLB_NR_DYN_ASIDS],
    next_asid: &AtomicU32,
    ctx_id: u64,
    next_tlb_gen: u64,
) -> (u32, bool) {
    for (asid, slot) in ctxs.iter().enumerate() {
        // Relaxed (the slots and `next_asid`): only this CPU reads or writes them.
        if slot.ctx_id.load(Ordering::Relaxed) == ctx_id {
            return (asid as u32, slot.tlb_gen.load(Ordering::Relaxed) < next_tlb_gen);
        }
    }
    let mut asid = next_asid.fetch_add(1, Ordering::Relaxed);
    if asid as usize >= TLB_NR_DYN_ASIDS {
        asid = 0;
        next_asid.store(1, Ordering::Relaxed);
    }
    (asid, true)
}

/// The fields of `mm->context` and `mm_cpumask(mm)` every PCID release has,
/// borrowed from a model's own per-mm context (whose layout is its release's).
#[derive(Clone, Copy)]
pub(super) struct MmFields<'a> {
    /// The address the machine accounts the context's line at (the model's
    /// per-mm context itself).
    pub(super) line: usize,
    /// `mm->context.ctx_id`: never reused, a fresh one at every
    /// `init_new_context`.
    pub(super) ctx_id: &'a AtomicU64,
    /// `mm->context.tlb_gen`: incremented by every flush of the mm.
    pub(super) tlb_gen: &'a AtomicU64,
    /// `mm_cpumask(mm)`.
    pub(super) cpumask: &'a CpuMask,
}

impl MmFields<'_> {
    /// Names the context of mm slot `m` for the checker
    /// (`mm[M].context.ctx_id`, `.tlb_gen`, `mm_cpumask(mm[M])`).
    pub(super) fn name(self, f: &mut dyn Fields, m: usize) {
        f.add(self.ctx_id, format_args!("mm[{m}].context.ctx_id"), Value::Number);
        f.add(self.tlb_gen, format_args!("mm[{m}].context.tlb_gen"), Value::Number);
        f.add(self.cpumask, format_args!("mm_cpumask(mm[{m}])"), Value::Cpus { first: 0 });
    }
}

/// A Linux x86 model with PCIDs and `tlb_gen` (v4.14 on): what its `tlb.c`
/// does with an mm's context the same way in every release, given where the
/// model keeps that context ([`PcidMms::mm_fields`]).
pub(super) trait PcidMms {
    /// Whether the model accounts the lines of `mm->context` and
    /// `mm_cpumask` ([`Hw::shared`]); [`super::linux_pcid`], the older model
    /// with a blocking [`Hw::send_ipi`], accounts none.
    const LINES: bool = true;

    /// Returns where the model keeps `mm`'s context.
    fn mm_fields(&self, mm: MmId) -> MmFields<'_>;

    /// Returns the `ctx_id` of the mm in slot `mm`.
    fn ctx_id(&self, mm: MmId) -> u64 {
        // Relaxed: set in `mm_init` before the mm is published to any CPU, then constant.
        self.mm_fields(mm).ctx_id.load(Ordering::Relaxed)
    }

    /// Returns the flush generation of `mm` (`atomic64_read(&mm->context.tlb_gen)`).
    fn tlb_gen(&self, mm: MmId) -> u64 {
        // SeqCst: every access to tlb_gen (the increment is a full barrier).
        self.mm_fields(mm).tlb_gen.load(Ordering::SeqCst)
    }

    /// Accounts an access to `mm`'s context line (`tlb_gen`, and whatever else
    /// the release keeps there), where the model accounts lines.
    fn touch_ctx<H: Hw>(&self, hw: &H, mm: MmId, a: Access) {
        if Self::LINES {
            hw.shared(self.mm_fields(mm).line, a);
        }
    }

    /// Returns whether a CPU other than this one is in `mm_cpumask(mm)`
    /// (`cpumask_any_but(mm_cpumask(mm), get_cpu()) < nr_cpu_ids`, the test of
    /// x86's `arch_tlbbatch_should_defer`).
    fn other_cpu_in_mask<H: Hw>(&self, hw: &H, mm: MmId) -> bool {
        self.touch_mask(hw, mm, Access::Read);
        cpumask_any_but(self.mm_fields(mm).cpumask, hw.cpu())
    }

    /// Accounts an access to `mm_cpumask(mm)`, where the model accounts lines.
    fn touch_mask<H: Hw>(&self, hw: &H, mm: MmId, a: Access) {
        if Self::LINES {
            hw.shared(addr_of(self.mm_fields(mm).cpumask), a);
        }
    }

    /// Reads `mm`'s `tlb_gen`, accounting the line.
    fn read_tlb_gen<H: Hw>(&self, hw: &H, mm: MmId) -> u64 {
        self.touch_ctx(hw, mm, Access::Read);
        self.tlb_gen(mm)
    }

    /// `inc_mm_tlb_gen`: a locked increment of `mm`'s `tlb_gen`, a full
    /// barrier ordering the page-table change before it and the reads of
    /// `mm_cpumask` and `is_lazy` after it; returns the new generation.
    fn inc_mm_tlb_gen<H: Hw>(&self, hw: &H, mm: MmId) -> u64 {
        self.touch_ctx(hw, mm, Access::Rmw);
        // SeqCst: the full barrier.
        self.mm_fields(mm).tlb_gen.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// `init_new_context` and `mm_init_cpumask`: a fresh `ctx_id` from
    /// `last_mm_ctx_id`, generation 0 and an empty `mm_cpumask`.
    fn init_new_context(&self, mm: MmId, last_mm_ctx_id: &AtomicU64) {
        debug_assert!(!mm.is_kernel());
        let m = self.mm_fields(mm);
        // Relaxed: RMWs of one atomic are totally ordered, which is all uniqueness needs.
        let ctx_id = last_mm_ctx_id.fetch_add(1, Ordering::Relaxed) + 1;
        // Relaxed: the mm is published to other CPUs (fork, wakeup) after this.
        m.ctx_id.store(ctx_id, Ordering::Relaxed);
        // SeqCst: as every access to `tlb_gen`.
        m.tlb_gen.store(0, Ordering::SeqCst);
        m.cpumask.clear_all();
    }

    /// `switch_mm_irqs_off` to an mm not loaded, as v4.14–v6.13 do it: stop
    /// receiving flushes for `prev` (`cpumask_clear_cpu`; `init_mm`'s mask is
    /// unused), start receiving them for `next` (`cpumask_set_cpu`), both
    /// locked RMWs, then read `next`'s `tlb_gen`, which this returns. A
    /// flusher that bumped `tlb_gen` after the read sees this CPU's bit (SeqCst
    /// mask update and SeqCst `tlb_gen` accesses on both sides), and one that
    /// bumped it before is covered by the generation read.
    fn switch_mm_cpumask<H: Hw>(&self, hw: &H, prev: MmId, next: MmId) -> u64 {
        let cpu = hw.cpu();
        if !prev.is_kernel() {
            self.touch_mask(hw, prev, Access::RmwAnyOrder);
            self.mm_fields(prev).cpumask.clear(cpu);
        }
        if !next.is_kernel() {
            self.touch_mask(hw, next, Access::RmwAnyOrder);
            self.mm_fields(next).cpumask.set(cpu);
        }
        self.read_tlb_gen(hw, next)
    }

    /// `switch_mm_irqs_off` back on the loaded mm `next` after lazy mode:
    /// after a full barrier (`smp_mb()`, pairing with the one of the
    /// `tlb_gen` increment), compares `slot`, the loaded one, with `next`'s
    /// `tlb_gen`. Returns that generation if flushes were skipped while lazy
    /// (catch up in the same slot), `None` if the slot is up to date.
    fn lazy_catch_up<H: Hw>(&self, hw: &H, slot: &TlbContext, next: MmId) -> Option<u64> {
        fence(Ordering::SeqCst);
        hw.barrier(Barrier::Full);
        let next_tlb_gen = self.read_tlb_gen(hw, next);
        // Relaxed: this CPU's own slot.
        (slot.tlb_gen.load(Ordering::Relaxed) != next_tlb_gen).then_some(next_tlb_gen)
    }

    /// Queues `mm` in a reclaim batch whose CPUs are `batch`
    /// (`arch_tlbbatch_add_mm`, v4.13–v6.4, and v6.5's
    /// `arch_tlbbatch_add_pending` per mm): bumps its generation (a full
    /// barrier after its PTE changes), then ORs its `mm_cpumask` into the batch
    /// (`cpumask_or`).
    fn arch_tlbbatch_add_mm<H: Hw>(&self, hw: &H, batch: &CpuMask, mm: MmId) {
        self.inc_mm_tlb_gen(hw, mm);
        self.touch_mask(hw, mm, Access::Read);
        self.mm_fields(mm).cpumask.for_each(|c| batch.set(c));
    }

    /// Returns whether a CPU whose `cpu_tlbstate` holds `loaded_mm` and
    /// `loaded_ctx_id` has this incarnation of `mm` loaded: the same slot and
    /// the same `ctx_id`. Not the kernel's test (a lazy CPU's reference keeps
    /// its `loaded_mm` alive there): the simulator reuses a slot at once, so
    /// the models of v5.13 and v6.13 on keep the `ctx_id` they loaded per CPU.
    fn is_loaded_as(&self, loaded_mm: &AtomicU32, loaded_ctx_id: &AtomicU64, mm: MmId) -> bool {
        // Relaxed: only the owning CPU writes these, and this is that CPU.
        loaded_mm.load(Ordering::Relaxed) == mm.0 && loaded_ctx_id.load(Ordering::Relaxed) == self.ctx_id(mm)
    }
}

/// [`PcidMms`] for a model that keeps each mm's context in `self.mms`, indexed
/// by slot, with its `ctx_id`, `tlb_gen` and `cpumask` fields: the line the
/// machine accounts is the context itself. `lines = false` for a model that
/// accounts no lines ([`PcidMms::LINES`]).
macro_rules! pcid_mms_in_slots {
    ($model:ty) => {
        $crate::asid::linux_x86_common::pcid_mms_in_slots!($model, lines = true);
    };
    ($model:ty, lines = $lines:expr) => {
        impl $crate::asid::linux_x86_common::PcidMms for $model {
            const LINES: bool = $lines;
            fn mm_fields(&self, mm: $crate::MmId) -> $crate::asid::linux_x86_common::MmFields<'_> {
                let m = &self.mms[mm.index()];
                $crate::asid::linux_x86_common::MmFields {
                    line: $crate::shootdown::addr_of(m),
                    ctx_id: &m.ctx_id,
                    tlb_gen: &m.tlb_gen,
                    cpumask: &m.cpumask,
                }
            }
        }
    };
}
pub(super) use pcid_mms_in_slots;

/// The [`Policy`](crate::Policy) methods whose kernel code is the same in
/// every Linux x86 model with PCIDs (v5.4–v6.1, v5.12/v5.13, v6.13–v6.15), for
/// a model's `impl Policy`: `switch_mm` and the three user flushes of
/// `arch/x86/include/asm/tlbflush.h`, which are `flush_tlb_mm_range` with fixed
/// arguments there (`flush_tlb_mm` and `flush_tlb_range` are macros,
/// `flush_tlb_page` an inline function). The model provides
/// `enter_lazy_tlb(hw)`, `switch_mm_irqs_off(hw, next)` and
/// `flush_tlb_mm_range(hw, mm, extent, freed_tables)`. A macro, because an
/// `impl Policy` cannot take methods from another trait's defaults, and a
/// blanket `impl Policy` would overlap [`crate::wrap::Wrap`]'s.
macro_rules! pcid_switch_and_flushes {
    () => {
        /// `switch_mm_irqs_off` for a user mm; [`MmId::KERNEL`] (a kernel
        /// thread or idle) is `enter_lazy_tlb`, which leaves CR3 alone.
        fn switch_mm<H: $crate::Hw>(&self, hw: &H, next: $crate::MmId) {
            if next.is_kernel() {
                self.enter_lazy_tlb(hw);
            } else {
                self.switch_mm_irqs_off(hw, next);
            }
        }

        /// `flush_tlb_page`: one page, no page tables freed.
        fn flush_page<H: $crate::Hw>(&self, hw: &H, mm: $crate::MmId, va: $crate::VirtAddr) {
            let extent = $crate::asid::linux_x86_common::FlushExtent::Pages { start: va, pages: 1 };
            self.flush_tlb_mm_range(hw, mm, extent, false);
        }

        /// `flush_tlb_range`: `pages` pages from `start`, no page tables freed.
        fn flush_range<H: $crate::Hw>(&self, hw: &H, mm: $crate::MmId, start: $crate::VirtAddr, pages: u64) {
            let extent = $crate::asid::linux_x86_common::FlushExtent::Pages { start, pages };
            self.flush_tlb_mm_range(hw, mm, extent, false);
        }

        /// `flush_tlb_mm`: everything (`0UL, TLB_FLUSH_ALL`), with page tables
        /// freed.
        fn flush_mm<H: $crate::Hw>(&self, hw: &H, mm: $crate::MmId) {
            self.flush_tlb_mm_range(hw, mm, $crate::asid::linux_x86_common::FlushExtent::All, true);
        }

        /// `arch_tlbbatch_should_defer`: only when another CPU is in
        /// `mm_cpumask(mm)`.
        fn tlbbatch_should_defer<H: $crate::Hw>(&self, hw: &H, mm: $crate::MmId) -> bool {
            $crate::asid::linux_x86_common::PcidMms::other_cpu_in_mask(self, hw, mm)
        }
    };
}
pub(super) use pcid_switch_and_flushes;
