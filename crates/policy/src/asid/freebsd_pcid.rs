//! FreeBSD amd64's TLB layer: per-CPU PCIDs per pmap and IPI shootdowns
//! (`sys/amd64/amd64/pmap.c`: `pmap_activate_sw`, `pmap_pcid_alloc`,
//! `pmap_invalidate_page/range/all`), over one of the three completion protocols of
//! [`crate::shootdown`] (origin 003 and its neighbours).
//!
//! # The algorithm
//! A pmap does not own a PCID: it holds `pm_pcids[cpu] = {pm_pcid, pm_gen}` for
//! every CPU, and each CPU hands out PCIDs from its own `pcid_next` within its own
//! generation `pcid_gen`. PCID 0 (`PMAP_PCID_KERN`) belongs to `kernel_pmap`, PCIDs
//! `1..PMAP_PCID_OVERMAX` (1 to 4095) to the rest.
//!
//! - `pmap_pcid_alloc(pmap, cpu)`: if `pm_gen` equals this CPU's `pcid_gen`, the
//!   PCID is still this pmap's and its entries are current: reuse it, and load CR3
//!   with `CR3_PCID_SAVE` (bit 63, NOFLUSH). Otherwise take `pcid_next`; when that
//!   reaches 4096, start a new generation (`pcid_gen + 1`, skipping 0) and restart
//!   from PCID 1. A new PCID is loaded *without* NOFLUSH, which drops whatever the
//!   previous holder of that number left behind; that is the only flush a
//!   generation change needs, so exhaustion flushes nothing else.
//! - `pmap_activate_sw(td)`: nothing if the pmap is already `curpmap`; otherwise
//!   set this CPU in the new pmap's `pm_active` (a locked operation), allocate,
//!   load CR3, set `curpmap`, clear this CPU from the old pmap's `pm_active`.
//! - Invalidating a user pmap: zero `pm_gen` of every CPU but this one (and this
//!   one's too unless the pmap is loaded here), a full fence, read `pm_active`, and
//!   shoot down the CPUs in it. A CPU that is not in `pm_active` gets no IPI: its
//!   zeroed `pm_gen` makes its next activation take a fresh PCID with a flush. A
//!   CPU in `pm_active` gets both (the pmap.c comment table: "remote user page,
//!   active pmap: zero pm_gen + IPI:INVLPG").
//! - The work, here and in the handlers (with `INVPCID`): a page is `INVLPG` in the
//!   current PCID; everything of a user pmap is `INVPCID` single-context on the
//!   pmap's PCID on that CPU; kernel pages are global, so a kernel page is `INVLPG`
//!   (which drops global entries) and all of the kernel is `INVPCID` all-context
//!   including globals. The initiator does its own part only if the pmap is loaded
//!   here, or for the kernel.
//! - A range of `PMAP_INVLPG_THRESHOLD` (4096 pages, "chosen to exceed the total
//!   size of Broadwell L2 TLB") or more becomes `pmap_invalidate_all`.
//! - Kernel ranges (`flush_kernel_range`) go to every CPU (`kernel_pmap`'s
//!   `pm_active` is `all_cpus`), with no `pm_gen` bookkeeping.
//!
//! # Kernel threads and idle
//! FreeBSD amd64 has no lazy TLB mode: `cpu_switch` calls `pmap_activate_sw` for
//! every thread, and a kernel thread's (idle's included) process shares proc0's
//! `vmspace0`, whose pmap is a pmap of its own (not `kernel_pmap`, which "must be
//! never deactivated, and we ensure that by never activating it at all") with the
//! kernel's page-table root. So [`Policy::switch_mm`] to [`MmId::KERNEL`] is an
//! ordinary switch to that pmap: CR3 is reloaded with the kernel root and the
//! pmap's PCID on this CPU (`PMAP_PCID_KERN + 1` at boot, NOFLUSH while its
//! generation holds), and the CPU leaves the user pmap's `pm_active`, so it stops
//! receiving that pmap's IPIs.
//!
//! # What is guaranteed
//! A CPU uses a PCID's non-global entries only while `pm_gen == pcid_gen`; every
//! invalidation of a pmap either reaches a CPU by IPI (it is in `pm_active`) or
//! zeroes its `pm_gen` (it is not), and the SeqCst zeroing + fence against the
//! SeqCst `pm_active` update + `pm_gen` load in activation leaves no third case. A
//! PCID number is handed out once per generation per CPU and loaded without
//! NOFLUSH when handed out, so two pmaps never share live entries under one tag.
//!
//! # Deliberate readings
//! - The pmap layer is that of FreeBSD 12 to 13 with PCIDs, `INVPCID` and PTI off
//!   (`pmap_activate_sw_pcid_nopti`, the `invpcid` handlers); it is shared by the
//!   three protocols, which run the local invalidation where their own version
//!   does. With the locked protocols it runs after the `pm_gen` zeroing here (11.x
//!   and 12.x invalidate locally first); both are the initiator's own work.
//! - `pm_pcids` is an array of 8-byte entries in the pmap, 8 CPUs to a line, as
//!   through FreeBSD 13; later kernels keep each entry in its CPU's per-CPU memory.
//! - Boot: every CPU runs `vmspace0`'s pmap ([`MmId::KERNEL`]) with PCID 1 in
//!   generation 1, `pcid_next = 2` (`pmap_pinit0`, `pmap_bootstrap`), CR3 still
//!   holding PCID 0 until the first switch.
//! - FreeBSD 13 and later also zero `kernel_pmap`'s `pm_gen` before a kernel
//!   shootdown (harmless: `kernel_pmap` is never activated); not modelled.
//!
//! # The zoo
//! [`FreebsdX86::with_bug`] re-introduces [`Bug::FreebsdX86CounterEarlyAck`] in the
//! counter protocol's handler ([`crate::shootdown::counter`]); the pmap layer here
//! is unchanged.
//!
//! Not modelled: PTI (user page-table PCIDs, `ucr3_load_mask`), PCID off or
//! `INVPCID` missing (CR3 reloads instead), EPT/RVI guest pmaps,
//! `pcid_invlpg_workaround`, delayed invalidation (`pmap_delayed_invl_*`), superpage
//! demotion rendezvous (`pmap_update_pde`).

use crate::cpumask::CpuMask;
use crate::fields::{Fields, Owner, Value};
use crate::hw::{Access, Hw, Note, Root, Scope, Tlbi};
use crate::policy::Policy;
use crate::shootdown::{addr_of, Completion, CompletionProtocol, InvlOp, Pmap, Protocol, Request};
use crate::sync::{fence, AtomicU32, Ordering};
use crate::types::{CpuId, MmId, Pcid, VirtAddr};
use crate::zoo::Bug;
use alloc::vec::Vec;

/// The PCID of `kernel_pmap` (never handed out to another pmap).
pub const PMAP_PCID_KERN: u32 = 0;
/// One past the largest PCID: `pcid_next` reaching it starts a new generation.
pub const PMAP_PCID_OVERMAX: u32 = 0x1000;
/// `pm_pcid` of a pmap that has never run on a CPU.
pub const PMAP_PCID_NONE: u32 = u32::MAX;
/// Ranges of this many pages or more are invalidated whole (`PMAP_INVLPG_THRESHOLD`
/// is `4 * 1024 * PAGE_SIZE` bytes).
pub const PMAP_INVLPG_THRESHOLD_PAGES: u64 = 4096;

/// `pm_pcids[cpu]`: a pmap's PCID on one CPU and the generation it belongs to.
#[repr(C)]
struct PmPcid {
    pm_pcid: AtomicU32,
    /// 0 when invalidated (generations are never 0).
    pm_gen: AtomicU32,
}

/// Entries per cache line.
const PCIDS_PER_LINE: usize = 8;

/// Eight consecutive `pm_pcids` entries: one cache line of the array.
#[repr(C, align(64))]
struct PcidLine([PmPcid; PCIDS_PER_LINE]);

/// The per-pmap state.
#[repr(C, align(64))]
struct PmapState {
    /// The CPUs that have this pmap loaded.
    pm_active: CpuMask,
    pm_pcids: Vec<PcidLine>,
}

impl PmapState {
    /// Returns a pmap inactive everywhere, with `{pcid, gen}` on every CPU.
    fn new(ncpus: usize, pcid: u32, gen: u32) -> Self {
        let lines = ncpus.div_ceil(PCIDS_PER_LINE);
        let entry = || PmPcid { pm_pcid: AtomicU32::new(pcid), pm_gen: AtomicU32::new(gen) };
        PmapState {
            pm_active: CpuMask::new(ncpus),
            pm_pcids: (0..lines).map(|_| PcidLine(core::array::from_fn(|_| entry()))).collect(),
        }
    }

    /// Returns `pm_pcids[cpu]`.
    fn pcids(&self, cpu: usize) -> &PmPcid {
        &self.pm_pcids[cpu / PCIDS_PER_LINE].0[cpu % PCIDS_PER_LINE]
    }
}

/// A CPU's private pmap state (its `struct pcpu` fields). Only its own CPU reads
/// or writes them, so they are not accounted as shared.
#[repr(C, align(64))]
struct PcpuPmap {
    /// `curpmap`, as a slot.
    curpmap: AtomicU32,
    /// The PCID in CR3 (what `INVLPG` acts on).
    cr3_pcid: AtomicU32,
    pcid_next: AtomicU32,
    pcid_gen: AtomicU32,
}

/// FreeBSD amd64's pmap TLB layer: per-CPU PCIDs, `pm_active` shootdowns through
/// the chosen completion protocol: one of FreeBSD's ([`Protocol`], the default),
/// or any other [`CompletionProtocol`] (a user's own, or a deliberately broken one
/// in a test) through [`FreebsdX86::with_protocol`].
pub struct FreebsdX86<C = Protocol> {
    pmaps: Vec<PmapState>,
    pcpu: Vec<PcpuPmap>,
    all_cpus: CpuMask,
    protocol: C,
    /// One past the largest PCID ([`PMAP_PCID_OVERMAX`] unless a checker shrinks
    /// the space, [`FreebsdX86::with_pcid_overmax`]).
    pcid_overmax: u32,
}

impl FreebsdX86 {
    /// Returns the policy for `ncpus` CPUs and `max_mms` address-space slots (slot
    /// 0 is `vmspace0`'s pmap, which kernel threads run on), shooting down with
    /// `completion`. Every CPU starts on slot 0 as after boot.
    pub fn new(ncpus: usize, max_mms: usize, completion: Completion) -> Self {
        FreebsdX86::with_protocol(ncpus, max_mms, Protocol::new(completion, ncpus))
    }

    /// Returns this policy with `bug` re-introduced (see [`crate::zoo`]): only
    /// [`Bug::FreebsdX86CounterEarlyAck`], and only with [`Completion::Counter`]
    /// (`FreebsdX86::new(n, mms, Completion::Counter).with_bug(..)`).
    ///
    /// # Panics
    /// If `bug` is another one, the protocol is not the counter, or a bug was
    /// re-introduced already.
    pub fn with_bug(mut self, bug: Bug) -> Self {
        let completion = self.completion();
        self.protocol = match self.protocol {
            Protocol::Counter(c) if bug == Bug::FreebsdX86CounterEarlyAck => Protocol::Counter(c.with_bug(bug)),
            _ => panic!("{bug} does not apply to FreeBSD x86 with {completion}"),
        };
        self
    }

    /// Returns the zoo bug this policy re-introduces, if any.
    pub fn bug(&self) -> Option<Bug> {
        match &self.protocol {
            Protocol::Counter(c) => c.bug(),
            Protocol::Generation(_) | Protocol::Scoreboard(_) => None,
        }
    }

    /// Returns the completion protocol shootdowns use.
    pub fn completion(&self) -> Completion {
        self.protocol.completion()
    }

    /// Returns the policy's registered name ([`Completion::name`]).
    pub fn name(&self) -> &'static str {
        self.completion().name()
    }

    /// Returns the protocol with its shared state.
    pub fn protocol(&self) -> &Protocol {
        &self.protocol
    }
}

impl<C> FreebsdX86<C> {
    /// Returns the policy for `ncpus` CPUs and `max_mms` address-space slots,
    /// shooting down with `protocol` (built for `ncpus` CPUs), in the boot state
    /// [`FreebsdX86::new`] describes.
    pub fn with_protocol(ncpus: usize, max_mms: usize, protocol: C) -> Self {
        let pmaps: Vec<PmapState> = (0..max_mms.max(1))
            .map(|slot| {
                if slot == 0 {
                    PmapState::new(ncpus, PMAP_PCID_KERN + 1, 1)
                } else {
                    PmapState::new(ncpus, PMAP_PCID_NONE, 0)
                }
            })
            .collect();
        pmaps[0].pm_active.set_all();
        let pcpu = (0..ncpus)
            .map(|_| PcpuPmap {
                curpmap: AtomicU32::new(MmId::KERNEL.0),
                cr3_pcid: AtomicU32::new(PMAP_PCID_KERN),
                pcid_next: AtomicU32::new(PMAP_PCID_KERN + 2),
                pcid_gen: AtomicU32::new(1),
            })
            .collect();
        let all_cpus = CpuMask::new(ncpus);
        all_cpus.set_all();
        FreebsdX86 { pmaps, pcpu, all_cpus, protocol, pcid_overmax: PMAP_PCID_OVERMAX }
    }

    /// Returns this policy with a PCID space of `overmax` PCIDs per CPU (0 to
    /// `overmax - 1`, 0 being `kernel_pmap`'s) instead of the hardware's 4096
    /// ([`PMAP_PCID_OVERMAX`]): the same allocator with a smaller bound, so that a
    /// bounded model checker reaches its generation rollovers
    /// (`pmap_pcid_alloc`), as a small `asid_bits` does on arm64.
    ///
    /// # Panics
    /// If `overmax` is below 3 (`vmspace0` holds PCID 1 from boot: a user pmap
    /// needs at least one more) or above [`PMAP_PCID_OVERMAX`].
    pub fn with_pcid_overmax(mut self, overmax: u32) -> Self {
        assert!(
            (PMAP_PCID_KERN + 3..=PMAP_PCID_OVERMAX).contains(&overmax),
            "a PCID space of {overmax} leaves no PCID for a user pmap, or exceeds the hardware's"
        );
        self.pcid_overmax = overmax;
        self
    }
}

impl<C: CompletionProtocol> FreebsdX86<C> {
    /// Returns the pmap loaded on `cpu` (`curpmap`).
    pub fn curpmap(&self, cpu: CpuId) -> MmId {
        // Relaxed: a report of another CPU's state, not a decision.
        MmId(self.pcpu[cpu.index()].curpmap.load(Ordering::Relaxed))
    }

    /// Returns `(pcid_next, pcid_gen)` of `cpu`.
    pub fn pcid_state(&self, cpu: CpuId) -> (u32, u32) {
        let pc = &self.pcpu[cpu.index()];
        // Relaxed: a report, as in `curpmap`.
        (pc.pcid_next.load(Ordering::Relaxed), pc.pcid_gen.load(Ordering::Relaxed))
    }

    /// Returns `(pm_pcid, pm_gen)` of `mm` on `cpu`.
    pub fn pm_pcids(&self, mm: MmId, cpu: CpuId) -> (u32, u32) {
        let e = self.pmaps[mm.index()].pcids(cpu.index());
        // Relaxed: a report, as in `curpmap`.
        (e.pm_pcid.load(Ordering::Relaxed), e.pm_gen.load(Ordering::Relaxed))
    }

    /// Returns whether `cpu` is in `pm_active` of `mm`.
    pub fn is_active(&self, mm: MmId, cpu: CpuId) -> bool {
        self.pmaps[mm.index()].pm_active.test(cpu)
    }

    /// Returns the TLB tag of a PCID this policy handed out.
    fn tag(pcid: u32) -> crate::types::Asid {
        match u16::try_from(pcid).ok().and_then(|p| Pcid::new(p).ok()) {
            Some(p) => p.asid(),
            None => unreachable!("PCIDs handed out are below PMAP_PCID_OVERMAX"),
        }
    }

    /// Returns this CPU's PCID for `pmap`, reusing it (`true`: load with NOFLUSH) if
    /// its generation is current, else taking the next one (`pmap_pcid_alloc`).
    fn pmap_pcid_alloc<H: Hw>(&self, hw: &H, mm: MmId) -> (u32, bool) {
        let cpu = hw.cpu().index();
        let pc = &self.pcpu[cpu];
        let e = self.pmaps[mm.index()].pcids(cpu);
        // (A `pm_pcid` of PMAP_PCID_KERN returns at once in FreeBSD; only
        // kernel_pmap has it, and it is never activated.)
        // Relaxed: this CPU's private generation.
        let gen = pc.pcid_gen.load(Ordering::Relaxed);
        hw.shared(addr_of(&e.pm_gen), Access::Read);
        // SeqCst: after our SeqCst pm_active update; pairs with the invalidator's
        // SeqCst zeroing and fence (see `pmap_invalidate_preipi`).
        if e.pm_gen.load(Ordering::SeqCst) == gen {
            hw.shared(addr_of(&e.pm_pcid), Access::Read);
            // Relaxed: only this CPU writes its own pm_pcid.
            return (e.pm_pcid.load(Ordering::Relaxed), true);
        }
        // Relaxed (pcid_next, pcid_gen): this CPU's private state.
        let mut next = pc.pcid_next.load(Ordering::Relaxed);
        debug_assert!(next <= self.pcid_overmax);
        let mut new_gen = gen;
        if next == self.pcid_overmax {
            new_gen = gen.wrapping_add(1);
            if new_gen == 0 {
                new_gen = 1;
            }
            // Relaxed: this CPU's private state.
            pc.pcid_gen.store(new_gen, Ordering::Relaxed);
            next = PMAP_PCID_KERN + 1;
            hw.note(Note::AsidRollover);
        }
        hw.shared(addr_of(&e.pm_pcid), Access::Write);
        // Relaxed: only this CPU writes its own pm_pcid.
        e.pm_pcid.store(next, Ordering::Relaxed);
        hw.shared(addr_of(&e.pm_gen), Access::Write);
        // SeqCst: as every access to pm_gen.
        e.pm_gen.store(new_gen, Ordering::SeqCst);
        // Relaxed: this CPU's private state.
        pc.pcid_next.store(next + 1, Ordering::Relaxed);
        (next, false)
    }

    /// Makes `next` this CPU's pmap (`pmap_activate_sw`, PCID without PTI).
    fn pmap_activate_sw<H: Hw>(&self, hw: &H, next: MmId) {
        let me = hw.cpu();
        let pc = &self.pcpu[me.index()];
        // Relaxed: only this CPU writes its curpmap.
        let old = MmId(pc.curpmap.load(Ordering::Relaxed));
        if old == next {
            return;
        }
        let new = &self.pmaps[next.index()];
        hw.shared(addr_of(&new.pm_active), Access::RmwAnyOrder);
        new.pm_active.set(me);
        let (pcid, cached) = self.pmap_pcid_alloc(hw, next);
        // FreeBSD skips the load only if cached and CR3 already holds this root,
        // which needs two pmaps sharing a root: never the case here.
        hw.write_root(Root::Mm(next), Self::tag(pcid), cached);
        // Relaxed: only this CPU reads or writes them.
        pc.curpmap.store(next.0, Ordering::Relaxed);
        pc.cr3_pcid.store(pcid, Ordering::Relaxed);
        let old = &self.pmaps[old.index()];
        hw.shared(addr_of(&old.pm_active), Access::RmwAnyOrder);
        old.pm_active.clear(me);
    }

    /// Zeroes `pm_gen` of `mm` on every CPU that must take a fresh PCID before
    /// using it again (`pmap_invalidate_preipi_pcid`): all but this one, and this
    /// one too unless `mm` is loaded here.
    fn pmap_invalidate_preipi<H: Hw>(&self, hw: &H, mm: MmId) {
        let me = hw.cpu();
        let loaded_here = self.curpmap(me) == mm;
        let p = &self.pmaps[mm.index()];
        for i in 0..self.pcpu.len() {
            if loaded_here && i == me.index() {
                continue;
            }
            let e = p.pcids(i);
            hw.shared(addr_of(&e.pm_gen), Access::Write);
            // SeqCst: with the fence below, a CPU activating `mm` concurrently
            // either is seen in pm_active or sees pm_gen zeroed.
            e.pm_gen.store(0, Ordering::SeqCst);
        }
        // SeqCst fence: `atomic_thread_fence_seq_cst` between the pm_gen stores
        // and the pm_active read.
        fence(Ordering::SeqCst);
    }

    /// Invalidates `va` on this CPU in the current PCID (`invlpg`): for the kernel,
    /// the global entry.
    fn invlpg<H: Hw>(&self, hw: &H, pmap: Pmap, va: VirtAddr) {
        match pmap {
            Pmap::Kernel => hw.tlbi(Tlbi::VaAllAsids { va }, Scope::Local),
            Pmap::Mm(_) => {
                // Relaxed: this CPU's own state.
                let pcid = self.pcpu[hw.cpu().index()].cr3_pcid.load(Ordering::Relaxed);
                hw.tlbi(Tlbi::Va { asid: Self::tag(pcid), va }, Scope::Local);
            }
        }
    }

    /// Invalidates every page of `[addr1, addr2)`, at least one (the handlers'
    /// `do { invlpg } while`).
    fn invlrng<H: Hw>(&self, hw: &H, pmap: Pmap, addr1: VirtAddr, addr2: VirtAddr) {
        let mut va = addr1;
        loop {
            self.invlpg(hw, pmap, va);
            va = va.add_pages(1);
            if va >= addr2 {
                break;
            }
        }
    }

    /// Invalidates everything of `mm` in its PCID on this CPU (`INVPCID`
    /// single-context on `pm_pcids[cpu].pm_pcid`).
    fn invpcid_ctx<H: Hw>(&self, hw: &H, mm: MmId) {
        let e = self.pmaps[mm.index()].pcids(hw.cpu().index());
        hw.shared(addr_of(&e.pm_pcid), Access::Read);
        // Relaxed: only this CPU writes its own pm_pcid.
        let pcid = e.pm_pcid.load(Ordering::Relaxed);
        // A pmap that never ran here has no PCID here (and gets no IPI: only
        // CPUs in pm_active do, and they have activated it).
        if pcid != PMAP_PCID_NONE {
            hw.tlbi(Tlbi::Asid(Self::tag(pcid)), Scope::Local);
        }
    }

    /// Runs the body of the IPI handler for `req` on this (target) CPU
    /// (`invltlb_invpcid_handler`, `invlpg_handler`, `invlrng_handler`).
    fn handler_invalidate<H: Hw>(&self, hw: &H, req: &Request) {
        match (req.op, req.pmap) {
            (InvlOp::Tlb, Pmap::Kernel) => hw.tlbi(Tlbi::All, Scope::Local),
            (InvlOp::Tlb, Pmap::Mm(mm)) => self.invpcid_ctx(hw, mm),
            (InvlOp::Page, pmap) => self.invlpg(hw, pmap, req.addr1),
            (InvlOp::Range, pmap) => self.invlrng(hw, pmap, req.addr1, req.addr2),
        }
    }

    /// Runs the initiator's own invalidation for `req` (`pmap_invalidate_*_curcpu_cb`):
    /// always for the kernel, for a user pmap only if it is loaded here.
    fn curcpu_invalidate<H: Hw>(&self, hw: &H, req: &Request) {
        if let Pmap::Mm(mm) = req.pmap {
            if self.curpmap(hw.cpu()) != mm {
                return;
            }
        }
        self.handler_invalidate(hw, req);
    }

    /// Invalidates `req` everywhere: `pm_gen` bookkeeping, then the shootdown to
    /// `pm_active` (or every CPU for the kernel).
    fn invalidate<H: Hw>(&self, hw: &H, req: Request) {
        match req.pmap {
            Pmap::Kernel => self.shootdown(hw, &self.all_cpus, &req),
            Pmap::Mm(mm) => {
                self.pmap_invalidate_preipi(hw, mm);
                let p = &self.pmaps[mm.index()];
                // A stable copy of pm_active (`CPU_COPY`).
                let targets = CpuMask::new(self.pcpu.len());
                hw.shared(addr_of(&p.pm_active), Access::Read);
                p.pm_active.for_each(|c| targets.set(c));
                self.shootdown(hw, &targets, &req);
            }
        }
    }

    /// Runs the protocol for `req` to `targets`, with this pmap layer's local and
    /// handler invalidations.
    fn shootdown<H: Hw>(&self, hw: &H, targets: &CpuMask, req: &Request) {
        self.protocol.shootdown(
            hw,
            targets,
            req,
            |h| self.curcpu_invalidate(h, req),
            |h, r| self.handler_invalidate(h, r),
        );
    }

    /// Invalidates `pages` pages of `pmap` from `start` (`pmap_invalidate_range`,
    /// or `pmap_invalidate_all` from [`PMAP_INVLPG_THRESHOLD_PAGES`] pages on).
    fn invalidate_range<H: Hw>(&self, hw: &H, pmap: Pmap, start: VirtAddr, pages: u64) {
        if pages == 0 {
            return;
        }
        let req = if pages >= PMAP_INVLPG_THRESHOLD_PAGES {
            Request { op: InvlOp::Tlb, pmap, addr1: VirtAddr(0), addr2: VirtAddr(0) }
        } else {
            Request { op: InvlOp::Range, pmap, addr1: start, addr2: start.add_pages(pages) }
        };
        self.invalidate(hw, req);
    }
}

#[cfg(test)]
impl FreebsdX86 {
    /// Returns `(address, name)` of every shared variable, for readable test logs.
    #[cfg(test)]
    fn symbols(&self) -> Vec<(usize, alloc::string::String)> {
        use alloc::format;
        let mut v = self.protocol.symbols();
        for (m, p) in self.pmaps.iter().enumerate() {
            v.push((addr_of(&p.pm_active), format!("mm{m}.pm_active")));
            for c in 0..self.pcpu.len() {
                let e = p.pcids(c);
                v.push((addr_of(&e.pm_pcid), format!("mm{m}.pm_pcid[{c}]")));
                v.push((addr_of(&e.pm_gen), format!("mm{m}.pm_gen[{c}]")));
            }
        }
        v
    }
}

/// Reads a `pm_pcid`: a number, or none before the pmap first ran on that CPU.
fn show_pcid(v: u64, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    if v == PMAP_PCID_NONE as u64 {
        f.write_str("none")
    } else {
        write!(f, "{v}")
    }
}

impl<C: CompletionProtocol + Sync> Policy for FreebsdX86<C> {
    /// Gives the pmap no PCID and generation 0 on every CPU and an empty
    /// `pm_active` (`pmap_pinit`).
    fn mm_init(&self, mm: MmId) {
        let p = &self.pmaps[mm.index()];
        for c in 0..self.pcpu.len() {
            let e = p.pcids(c);
            // Relaxed (both): the pmap is published to other CPUs after this.
            e.pm_pcid.store(PMAP_PCID_NONE, Ordering::Relaxed);
            e.pm_gen.store(0, Ordering::Relaxed);
        }
        p.pm_active.clear_all();
    }

    /// Does nothing for the TLB (`pmap_release`): the pmap's PCIDs are never handed
    /// out again in their generation, and a PCID handed out is loaded without NOFLUSH.
    fn mm_release<H: Hw>(&self, _hw: &H, mm: MmId) {
        debug_assert!(
            (0..self.pcpu.len()).all(|c| !self.pmaps[mm.index()].pm_active.peek_test(CpuId(c as u32))),
            "releasing an active pmap"
        );
    }

    /// Activates `next` (`pmap_activate_sw`); [`MmId::KERNEL`] is `vmspace0`'s pmap,
    /// which kernel threads and idle run on (see the module docs).
    fn switch_mm<H: Hw>(&self, hw: &H, next: MmId) {
        self.pmap_activate_sw(hw, next);
    }

    /// Invalidates one page of `mm` (`pmap_invalidate_page`).
    fn flush_page<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        self.invalidate(hw, Request { op: InvlOp::Page, pmap: Pmap::Mm(mm), addr1: va, addr2: VirtAddr(0) });
    }

    /// Invalidates `pages` pages of `mm` (`pmap_invalidate_range`); 4096 pages or
    /// more become `pmap_invalidate_all`.
    fn flush_range<H: Hw>(&self, hw: &H, mm: MmId, start: VirtAddr, pages: u64) {
        self.invalidate_range(hw, Pmap::Mm(mm), start, pages);
    }

    /// Invalidates every translation of `mm` (`pmap_invalidate_all`).
    fn flush_mm<H: Hw>(&self, hw: &H, mm: MmId) {
        self.invalidate(hw, Request { op: InvlOp::Tlb, pmap: Pmap::Mm(mm), addr1: VirtAddr(0), addr2: VirtAddr(0) });
    }

    /// Invalidates kernel pages on every CPU (`pmap_invalidate_range(kernel_pmap,
    /// ..)`): `INVLPG` per page, or everything including global entries from 4096
    /// pages on.
    fn flush_kernel_range<H: Hw>(&self, hw: &H, start: VirtAddr, pages: u64) {
        self.invalidate_range(hw, Pmap::Kernel, start, pages);
    }

    fn name_fields(&self, f: &mut dyn Fields) {
        self.protocol.name_fields(f);
        for (m, p) in self.pmaps.iter().enumerate() {
            f.add(&p.pm_active, format_args!("pmap[{m}].pm_active"), Value::Cpus { first: 0 });
            for c in 0..self.pcpu.len() {
                let e = p.pcids(c);
                f.add(&e.pm_pcid, format_args!("pmap[{m}].pm_pcids[cpu{c}].pm_pcid"), Value::Custom(show_pcid));
                f.add(&e.pm_gen, format_args!("pmap[{m}].pm_pcids[cpu{c}].pm_gen"), Value::Number);
            }
        }
        for (c, p) in self.pcpu.iter().enumerate() {
            f.add(&p.curpmap, format_args!("pcpu[cpu{c}].pc_curpmap"), Value::Mm);
            f.add(&p.cr3_pcid, format_args!("pcpu[cpu{c}].cr3_pcid"), Value::Number);
            f.add(&p.pcid_next, format_args!("pcpu[cpu{c}].pc_pcid_next"), Value::Number);
            f.add(&p.pcid_gen, format_args!("pcpu[cpu{c}].pc_pcid_gen"), Value::Number);
            // The CPU's `struct pcpu`: only it writes; others read `pc_curpmap`.
            let (mine, read_by_all) = Owner::per_cpu(c);
            f.own(&p.curpmap, read_by_all);
            f.own(&p.cr3_pcid, mine);
            f.own(&p.pcid_next, mine);
            f.own(&p.pcid_gen, mine);
        }
        f.add(&self.all_cpus, format_args!("all_cpus"), Value::Cpus { first: 0 });
    }
}

#[cfg(test)]
mod tests;
