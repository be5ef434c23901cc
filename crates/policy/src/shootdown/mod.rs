//! Shootdown completion protocols: how the CPU that changed a page table makes the
//! other CPUs invalidate their TLBs, and how it learns that they have.
//!
//! Every protocol here runs the three phases of a shootdown on the initiating CPU and
//! reports them through [`Hw::phase`]:
//! - **issue**: publish the request (`smp_tlb_addr1`, `smp_tlb_addr2`,
//!   `smp_tlb_pmap`, the operation) where the targets will read it;
//! - **dispatch**: send the invalidation IPIs and, where the protocol does,
//!   invalidate locally while they are in flight. A target set of every CPU
//!   (`kernel_pmap`, or a pmap active everywhere) gets one
//!   [`Hw::send_ipi_all_but_self_async`] (`ipi_all_but_self`: one ICR write with the
//!   "all excluding self" shorthand), any other set one [`Hw::send_ipi_async`] per
//!   CPU (`ipi_selected`). Before sending, the initiator tells the machine which
//!   variable it will then spin on ([`Hw::spin_on`]);
//! - **sync**: wait until every target has acknowledged; only after this are the
//!   TLBs coherent and may freed page-table pages or frames be reused.
//!
//! The three protocols are FreeBSD x86's `smp_targeted_tlb_shootdown` at three
//! points in its history (`sys/x86/x86/mp_x86.c`, later
//! `sys/amd64/amd64/mp_machdep.c`):
//! - [`counter`]: before origin 003 (FreeBSD 11.0) — one spin lock, request globals,
//!   and one shared counter every target increments;
//! - [`generation`]: origin 003 (review D8041, committed October 2016, in FreeBSD
//!   11.1 to 12.x) — the same lock and globals, but each target stores the
//!   request's generation into its own per-CPU flag;
//! - [`scoreboard`]: the lock-free rework of 2020 (FreeBSD 13) — per-initiator
//!   request fields and a `[target][initiator]` scoreboard of generations.
//!
//! The closed set of protocols is [`Completion`]; [`Protocol`] holds one of them
//! with its shared state and dispatches to it.
//!
//! # What is modelled
//! Every load and store of shared protocol state is accounted with [`Hw::shared`]
//! at the address of the atomic that holds it, and the layout puts variables on
//! the cache lines FreeBSD puts them on (see each protocol), so that the machine
//! charges the coherence traffic the origin is about. Every container of shared
//! state is 64-byte aligned, so which variables share a line never depends on
//! where the allocator put them (results stay deterministic).
//!
//! # Deliberate readings
//! - The shorthand for every CPU is what the kernel origin 003 was measured on did:
//!   its `smp_tlb_shootdown` (FreeBSD 10.x, the all-CPUs path of kernel-map
//!   invalidations) always calls `ipi_all_but_self`, and so does FreeBSD 13's
//!   `smp_targeted_tlb_shootdown` when `CPU_CMP(&mask, &all_cpus) == 0`. FreeBSD
//!   11.x and 12.x merged the two paths and test `CPU_ISFULLSET(&mask)`, which a
//!   mask of `all_cpus` passes only on a machine of `MAXCPU` CPUs; elsewhere those
//!   versions send one IPI per CPU. The model follows 10.x and 13.
//!
//! # What is not
//! - `smp_ipi_mtx` also serialises other IPIs (rendezvous, cache flushes); only
//!   TLB shootdowns take it here. (Its holding is modelled by the machine: an
//!   acquisition follows the previous release of the lock word.)
//! - An initiator waiting with interrupts enabled may itself run handlers for
//!   other initiators (which the lock-free protocol relies on to avoid deadlock);
//!   the simulator runs each policy call atomically, so that never happens there.
//! - [`Hw::send_ipi_async`] is taken to order the sender's earlier stores before
//!   the handler's loads, as the APIC does (an xAPIC ICR write is serialising; in
//!   x2APIC mode `lapic_write_icr` fences explicitly — kib in D8041). That is why
//!   the request fields of the two locked protocols are Relaxed atomics.

pub mod counter;
pub mod generation;
pub mod scoreboard;

pub use counter::Counter;
pub use generation::Generation;
pub use scoreboard::Scoreboard;

use crate::cpumask::CpuMask;
use crate::hw::{Access, Hw, Phase};
use crate::sync::{AtomicU32, AtomicU64, Ordering, SpinLock};
use crate::types::{CpuId, MmId, VirtAddr};
use core::fmt;

/// Which completion protocol a FreeBSD x86 shootdown uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Completion {
    /// Every target atomically increments one shared `smp_tlb_wait` (FreeBSD 11.0).
    Counter,
    /// Every target stores the request's generation into its own per-CPU
    /// `smp_tlb_done` (origin 003).
    Generation,
    /// Lock-free: per-initiator requests and a `[target][initiator]` scoreboard
    /// (FreeBSD 13).
    Scoreboard,
}

impl Completion {
    /// Every protocol, oldest first.
    pub const ALL: [Completion; 3] = [Completion::Counter, Completion::Generation, Completion::Scoreboard];

    /// Returns the policy name the simulator registers this protocol under.
    pub const fn name(self) -> &'static str {
        match self {
            Completion::Counter => "x86-freebsd-counter",
            Completion::Generation => "x86-freebsd-gen",
            Completion::Scoreboard => "x86-freebsd-scoreboard",
        }
    }

    /// Returns the protocol registered as `name`, if any.
    pub fn from_name(name: &str) -> Option<Completion> {
        Completion::ALL.into_iter().find(|c| c.name() == name)
    }
}

impl fmt::Display for Completion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The pmap a request is for (`smp_tlb_pmap`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pmap {
    /// `kernel_pmap`: the global kernel mappings, active on every CPU.
    Kernel,
    /// The pmap of an address space ([`MmId::KERNEL`] is proc0's `vmspace0` pmap,
    /// which kernel threads run on; it maps no user pages).
    Mm(MmId),
}

impl Pmap {
    /// The encoding of [`Pmap::Kernel`] in a request word (no address space has it).
    const KERNEL_WORD: u32 = u32::MAX;

    /// Returns the request word for this pmap, the value a protocol stores in
    /// `smp_tlb_pmap` (public for protocols written outside this crate).
    pub fn word(self) -> u32 {
        match self {
            Pmap::Kernel => Self::KERNEL_WORD,
            Pmap::Mm(mm) => mm.0,
        }
    }

    /// Returns the pmap a request word stands for.
    pub fn from_word(w: u32) -> Pmap {
        if w == Self::KERNEL_WORD {
            Pmap::Kernel
        } else {
            Pmap::Mm(MmId(w))
        }
    }
}

/// What the targets must invalidate: the IPI vector of the locked protocols
/// (`IPI_INVLTLB`, `IPI_INVLPG`, `IPI_INVLRNG`), `smp_tlb_op` of the lock-free one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InvlOp {
    /// Every translation of the pmap (`invltlb_*_handler`).
    Tlb,
    /// The page at `addr1` (`invlpg_*_handler`).
    Page,
    /// The pages from `addr1` up to `addr2` (`invlrng_*_handler`), at least one.
    Range,
}

impl InvlOp {
    /// Returns the request word for this operation, the value a protocol
    /// stores in `smp_tlb_op` (public, as [`Pmap::word`]).
    pub const fn word(self) -> u32 {
        match self {
            InvlOp::Tlb => 0,
            InvlOp::Page => 1,
            InvlOp::Range => 2,
        }
    }

    /// Returns the operation a request word stands for.
    pub fn from_word(w: u32) -> InvlOp {
        match w {
            0 => InvlOp::Tlb,
            1 => InvlOp::Page,
            _ => {
                debug_assert_eq!(w, 2, "only words written by InvlOp::word are read back");
                InvlOp::Range
            }
        }
    }
}

/// One shootdown request, as the initiator publishes it and a target reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// What to invalidate.
    pub op: InvlOp,
    /// Whose translations (`smp_tlb_pmap`).
    pub pmap: Pmap,
    /// The first page (`smp_tlb_addr1`); unused by [`InvlOp::Tlb`].
    pub addr1: VirtAddr,
    /// The end of a range, exclusive (`smp_tlb_addr2`); only [`InvlOp::Range`] uses it.
    pub addr2: VirtAddr,
}

/// A completion protocol: runs one shootdown on the calling CPU.
pub trait CompletionProtocol {
    /// Makes every CPU in `targets` other than the caller run `invalidate` for
    /// `req`, and `local` run on the caller, and returns when the targets have
    /// acknowledged (FreeBSD `smp_targeted_tlb_shootdown`).
    ///
    /// `local` is the caller's own invalidation (the pmap layer's work before the
    /// locked protocols are called, the `curcpu_cb` of the lock-free one); each
    /// protocol runs it where its FreeBSD version does. `invalidate` is the body of
    /// the IPI handler, given the request as the target read it from shared memory.
    /// With no other CPU in `targets`, only `local` runs and no phase is reported.
    fn shootdown<H, L, I>(&self, hw: &H, targets: &CpuMask, req: &Request, local: L, invalidate: I)
    where
        H: Hw,
        L: Fn(&H),
        I: Fn(&H, &Request);

    /// Names the protocol's shared fields (see [`crate::Policy::name_fields`]); the
    /// default names none.
    fn name_fields(&self, f: &mut dyn crate::fields::Fields) {
        let _ = f;
    }
}

/// One completion protocol with its shared state (enum dispatch over the closed set).
pub enum Protocol {
    /// See [`Counter`].
    Counter(Counter),
    /// See [`Generation`].
    Generation(Generation),
    /// See [`Scoreboard`].
    Scoreboard(Scoreboard),
}

impl Protocol {
    /// Returns protocol `c` in its boot state for `ncpus` CPUs.
    pub fn new(c: Completion, ncpus: usize) -> Self {
        match c {
            Completion::Counter => Protocol::Counter(Counter::new()),
            Completion::Generation => Protocol::Generation(Generation::new(ncpus)),
            Completion::Scoreboard => Protocol::Scoreboard(Scoreboard::new(ncpus)),
        }
    }

    /// Returns which protocol this is.
    pub fn completion(&self) -> Completion {
        match self {
            Protocol::Counter(_) => Completion::Counter,
            Protocol::Generation(_) => Completion::Generation,
            Protocol::Scoreboard(_) => Completion::Scoreboard,
        }
    }

    /// Names the protocol's shared fields (see [`crate::Policy::name_fields`]).
    pub fn name_fields(&self, f: &mut dyn crate::fields::Fields) {
        match self {
            Protocol::Counter(p) => p.name_fields(f),
            Protocol::Generation(p) => p.name_fields(f),
            Protocol::Scoreboard(p) => p.name_fields(f),
        }
    }

    /// Returns `(address, name)` of every shared variable, for readable test logs.
    #[cfg(test)]
    pub(crate) fn symbols(&self) -> alloc::vec::Vec<(usize, alloc::string::String)> {
        match self {
            Protocol::Counter(p) => p.symbols(),
            Protocol::Generation(p) => p.symbols(),
            Protocol::Scoreboard(p) => p.symbols(),
        }
    }
}

impl CompletionProtocol for Protocol {
    fn shootdown<H, L, I>(&self, hw: &H, targets: &CpuMask, req: &Request, local: L, invalidate: I)
    where
        H: Hw,
        L: Fn(&H),
        I: Fn(&H, &Request),
    {
        match self {
            Protocol::Counter(p) => p.shootdown(hw, targets, req, local, invalidate),
            Protocol::Generation(p) => p.shootdown(hw, targets, req, local, invalidate),
            Protocol::Scoreboard(p) => p.shootdown(hw, targets, req, local, invalidate),
        }
    }

    fn name_fields(&self, f: &mut dyn crate::fields::Fields) {
        Protocol::name_fields(self, f);
    }
}

/// A value alone on its own cache line (and on no other), as the kernels lay
/// out what other CPUs touch, so that [`crate::Hw::shared`] sees one line each.
#[repr(C, align(64))]
pub(crate) struct CacheLine<T>(pub(crate) T);

impl<T> core::ops::Deref for CacheLine<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Returns the address the machine accounts an access to `r` at.
pub(crate) fn addr_of<T>(r: &T) -> usize {
    r as *const T as usize
}

/// The request fields, in the order FreeBSD declares them; 24 bytes that always
/// sit on one line together with whatever the protocol appends.
#[repr(C)]
pub(crate) struct RequestFields {
    pub(crate) addr1: AtomicU64,
    pub(crate) addr2: AtomicU64,
    pub(crate) pmap: AtomicU32,
    pub(crate) op: AtomicU32,
}

impl RequestFields {
    /// Returns empty fields.
    pub(crate) const fn new() -> Self {
        RequestFields {
            addr1: AtomicU64::new(0),
            addr2: AtomicU64::new(0),
            pmap: AtomicU32::new(0),
            op: AtomicU32::new(0),
        }
    }

    /// Stores `req`, accounting each store.
    pub(crate) fn publish<H: Hw>(&self, hw: &H, req: &Request) {
        // Relaxed (all four): the locked protocols publish them with the IPI
        // (module docs); the lock-free one with a release fence before the
        // scoreboard store that a target's acquire fence pairs with.
        hw.shared(addr_of(&self.addr1), Access::Write);
        self.addr1.store(req.addr1.0, Ordering::Relaxed);
        hw.shared(addr_of(&self.addr2), Access::Write);
        self.addr2.store(req.addr2.0, Ordering::Relaxed);
        hw.shared(addr_of(&self.pmap), Access::Write);
        self.pmap.store(req.pmap.word(), Ordering::Relaxed);
        hw.shared(addr_of(&self.op), Access::Write);
        self.op.store(req.op.word(), Ordering::Relaxed);
    }

    /// Loads the request, accounting each load.
    ///
    /// The 2016 handlers read only the fields their operation needs and learn the
    /// operation from the IPI vector; all four share one line, so reading them all
    /// costs the same.
    pub(crate) fn read<H: Hw>(&self, hw: &H) -> Request {
        // Relaxed (all four): see `publish`.
        hw.shared(addr_of(&self.addr1), Access::Read);
        let addr1 = VirtAddr(self.addr1.load(Ordering::Relaxed));
        hw.shared(addr_of(&self.addr2), Access::Read);
        let addr2 = VirtAddr(self.addr2.load(Ordering::Relaxed));
        hw.shared(addr_of(&self.pmap), Access::Read);
        let pmap = Pmap::from_word(self.pmap.load(Ordering::Relaxed));
        hw.shared(addr_of(&self.op), Access::Read);
        let op = InvlOp::from_word(self.op.load(Ordering::Relaxed));
        Request { op, pmap, addr1, addr2 }
    }

    /// Names the four fields `{prefix}addr1` ... `{prefix}op`.
    pub(crate) fn name_fields(&self, f: &mut dyn crate::fields::Fields, prefix: core::fmt::Arguments<'_>) {
        use crate::fields::Value;
        f.add(&self.addr1, format_args!("{prefix}addr1"), Value::Addr);
        f.add(&self.addr2, format_args!("{prefix}addr2"), Value::Addr);
        f.add(&self.pmap, format_args!("{prefix}pmap"), Value::Custom(show_pmap));
        f.add(&self.op, format_args!("{prefix}op"), Value::Custom(show_op));
    }

    /// Returns `(address, name)` of each field, prefixed with `prefix`.
    #[cfg(test)]
    pub(crate) fn symbols(&self, prefix: &str) -> alloc::vec::Vec<(usize, alloc::string::String)> {
        use alloc::format;
        alloc::vec![
            (addr_of(&self.addr1), format!("{prefix}addr1")),
            (addr_of(&self.addr2), format!("{prefix}addr2")),
            (addr_of(&self.pmap), format!("{prefix}pmap")),
            (addr_of(&self.op), format!("{prefix}op")),
        ]
    }
}

/// Reads a request's pmap word.
fn show_pmap(v: u64, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    match Pmap::from_word(v as u32) {
        Pmap::Kernel => f.write_str("kernel_pmap"),
        Pmap::Mm(m) => write!(f, "pmap[{}]", m.0),
    }
}

/// Reads a request's operation word.
fn show_op(v: u64, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    f.write_str(match v {
        0 => "invltlb",
        1 => "invlpg",
        2 => "invlrng",
        _ => "?",
    })
}

/// The CPUs a shootdown interrupts.
pub(crate) struct Others {
    /// The CPUs of the target set other than the caller.
    pub(crate) mask: CpuMask,
    /// How many there are.
    pub(crate) n: u32,
    /// Whether the target set was every CPU (`kernel_pmap`, or a pmap active
    /// everywhere), which FreeBSD interrupts with one `ipi_all_but_self`.
    pub(crate) all: bool,
}

impl Others {
    /// Returns the lowest-numbered of these CPUs, the one the initiator waits for first.
    pub(crate) fn first(&self) -> Option<CpuId> {
        let mut first = None;
        self.mask.for_each(|c| {
            if first.is_none() {
                first = Some(c);
            }
        });
        first
    }

    /// Sends the invalidation IPI running `handler` to these CPUs without waiting
    /// (`ipi_all_but_self` when the target set is every CPU, else `ipi_selected`).
    pub(crate) fn send<H: Hw, F: Fn(&H)>(&self, hw: &H, handler: F) {
        if self.all {
            hw.send_ipi_all_but_self_async(handler);
        } else {
            hw.send_ipi_async(&self.mask, handler);
        }
    }
}

/// Returns the CPUs of `targets` other than the caller, and whether `targets` is
/// every CPU.
pub(crate) fn others<H: Hw>(hw: &H, targets: &CpuMask) -> Others {
    let me = hw.cpu();
    let mask = CpuMask::new(targets.capacity());
    let mut n = 0;
    let mut all = true;
    for i in 0..hw.ncpus() {
        let c = CpuId(i as u32);
        if !targets.test(c) {
            all = false;
        } else if c != me {
            mask.set(c);
            n += 1;
        }
    }
    Others { mask, n, all }
}

/// A protocol whose `smp_targeted_tlb_shootdown` runs under `smp_ipi_mtx`:
/// [`counter`] (FreeBSD 11.0) and [`generation`] (FreeBSD 11.1 to 12.x), both
/// `sys/x86/x86/mp_x86.c`, whose kernels differ only in how the targets
/// acknowledge. Each is a [`CompletionProtocol`] whose shootdown is the same:
/// the caller's own invalidation first (the pmap layer's, before
/// `smp_masked_*`), nothing more without another target; otherwise, in the
/// issue phase, `mtx_lock_spin(&smp_ipi_mtx)` and the request globals
/// (`smp_tlb_addr1`, `smp_tlb_addr2`, `smp_tlb_pmap`), then the protocol's own
/// [`LockedProtocol::complete`], then `mtx_unlock_spin(&smp_ipi_mtx)`.
pub(crate) trait LockedProtocol {
    /// Returns `smp_ipi_mtx`.
    fn smp_ipi_mtx(&self) -> &SpinLock<()>;

    /// Returns the request globals.
    fn request_fields(&self) -> &RequestFields;

    /// Runs the rest of the issue phase (what the protocol publishes besides
    /// the request), the dispatch of the IPIs running `invalidate` on `others`
    /// and the sync, under the lock.
    fn complete<H: Hw, I: Fn(&H, &Request)>(&self, hw: &H, others: &Others, invalidate: I);
}

impl<P: LockedProtocol> CompletionProtocol for P {
    fn shootdown<H, L, I>(&self, hw: &H, targets: &CpuMask, req: &Request, local: L, invalidate: I)
    where
        H: Hw,
        L: Fn(&H),
        I: Fn(&H, &Request),
    {
        // pmap_invalidate_*: the local invalidation precedes smp_masked_*.
        local(hw);
        let others = others(hw, targets);
        if others.n == 0 {
            return;
        }

        hw.phase(Phase::Issue);
        let smp_ipi_mtx = self.smp_ipi_mtx();
        hw.shared(addr_of(smp_ipi_mtx), Access::Rmw);
        let guard = smp_ipi_mtx.lock();
        self.request_fields().publish(hw, req);
        self.complete(hw, &others, invalidate);
        hw.shared(addr_of(smp_ipi_mtx), Access::Write);
        drop(guard);
        hw.phase(Phase::Done);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completion_names_round_trip() {
        for c in Completion::ALL {
            assert_eq!(Completion::from_name(c.name()), Some(c));
        }
        assert_eq!(Completion::Generation.to_string(), "x86-freebsd-gen");
        assert_eq!(Completion::from_name("x86-freebsd"), None);
    }

    #[test]
    fn request_words_round_trip() {
        for op in [InvlOp::Tlb, InvlOp::Page, InvlOp::Range] {
            assert_eq!(InvlOp::from_word(op.word()), op);
        }
        for p in [Pmap::Kernel, Pmap::Mm(MmId::KERNEL), Pmap::Mm(MmId(7))] {
            assert_eq!(Pmap::from_word(p.word()), p);
        }
    }
}
