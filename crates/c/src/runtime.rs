//! The functions compiled C calls (the `tlbkit_ops` table of `tlbkit/ops.h`),
//! acting on the CPU that runs the code.
//!
//! A call into C ([`enter`]) makes a [`Frame`] current: the [`Hw`] of the
//! calling CPU (type-erased into a [`HwVt`]) and the policy's [`State`]. The
//! checker runs every CPU as a coroutine on one thread and may switch CPUs
//! inside any operation that reaches a hook (an atomic, a lock, a barrier,
//! a TLBI); each operation therefore reads its frame when it starts and puts
//! it back as current when it returns, so that the frame is always that of
//! the CPU whose code is running.
//!
//! Marked accesses go through the facade atomics of [`tlbkit_policy::sync`]
//! (the checker's scheduling points; the simulator's plain atomics), each
//! accounted to the machine's cache model with [`Hw::shared`] first, as Rust
//! policies account theirs. A shootdown's phases, which the kernel does not
//! mark, are read off its instructions: a flush call starts in `Issue`, its
//! first TLBI starts `Dispatch`, the DSB that follows a TLBI starts `Sync`,
//! and the call's return is `Done`.

mod describe;

use crate::race;
use describe::describe;
pub(crate) use describe::{per_cpu_stride, GlueField};
use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_int, c_void, CStr};
use tlbkit_policy::sync::{self, AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};
use tlbkit_policy::{
    Access, Asid, Barrier, CpuId, CpuMask, Domain, Hw, MmId, Note, Phase, Root, Scope, Tlbi, VirtAddr,
};

/// The table the C side calls (`struct tlbkit_ops`, in that order): its
/// fields in three parts, laid out as the one flat C struct (every field a
/// function pointer, so the parts add no padding).
#[repr(C)]
pub struct Ops {
    mem: MemOps,
    machine: MachineOps,
    x86: X86Ops,
}

/// Marked accesses, locks, the CPU and barriers.
#[repr(C)]
struct MemOps {
    load: extern "C-unwind" fn(*const c_void, c_int) -> u64,
    store: extern "C-unwind" fn(*mut c_void, c_int, u64),
    rmw: extern "C-unwind" fn(*mut c_void, c_int, c_int, c_int, u64, u64) -> u64,
    spin_lock: extern "C-unwind" fn(*mut c_void),
    spin_unlock: extern "C-unwind" fn(*mut c_void),
    spin_wait: extern "C-unwind" fn(),
    cpu: extern "C-unwind" fn() -> u32,
    barrier: extern "C-unwind" fn(c_int),
}

/// TLB maintenance and roots (arm64's), the machine's bookkeeping, memory,
/// diagnostics and the checker's instrumentation.
#[repr(C)]
struct MachineOps {
    tlbi: extern "C-unwind" fn(c_int, u64),
    write_root: extern "C-unwind" fn(c_int, u32, u32),
    phase: extern "C-unwind" fn(c_int),
    rollover: extern "C-unwind" fn(),
    alloc: extern "C-unwind" fn(usize) -> *mut c_void,
    free: extern "C-unwind" fn(*mut c_void),
    plain: extern "C-unwind" fn(*const c_void, c_int, c_int, *const c_void),
    bug: extern "C-unwind" fn(*const c_char, *const c_char, c_int),
    run_asm: extern "C-unwind" fn(*const c_char, *const c_char, *mut u64),
    reached: extern "C-unwind" fn(*const c_void),
}

/// What x86's file needs besides: IPIs, the clock, interrupts, CR3 and its
/// TLB instructions.
#[repr(C)]
struct X86Ops {
    ipi: extern "C-unwind" fn(*const u64, extern "C-unwind" fn(*mut c_void), *mut c_void),
    jiffies: extern "C-unwind" fn() -> u64,
    irq: extern "C-unwind" fn(c_int),
    write_cr3: extern "C-unwind" fn(c_int, u32, u32, c_int),
    x86_tlbi: extern "C-unwind" fn(c_int, u64, u32, u32),
    ipi_async: extern "C-unwind" fn(*const u64, extern "C-unwind" fn(*mut c_void), *mut c_void),
    spin_on: extern "C-unwind" fn(*const c_void),
}

/// The table every loaded copy gets.
pub const OPS: Ops = Ops {
    mem: MemOps {
        load: op_load,
        store: op_store,
        rmw: op_rmw,
        spin_lock: op_spin_lock,
        spin_unlock: op_spin_unlock,
        spin_wait: op_spin_wait,
        cpu: op_cpu,
        barrier: op_barrier,
    },
    machine: MachineOps {
        tlbi: op_tlbi,
        write_root: op_write_root,
        phase: op_phase,
        rollover: op_rollover,
        alloc: op_alloc,
        free: op_free,
        plain: op_plain,
        bug: op_bug,
        run_asm: op_run_asm,
        reached: op_reached,
    },
    x86: X86Ops {
        ipi: op_ipi,
        jiffies: op_jiffies,
        irq: op_irq,
        write_cr3: op_write_cr3,
        x86_tlbi: op_x86_tlbi,
        ipi_async: op_ipi_async,
        spin_on: op_spin_on,
    },
};

/// An IPI handler the sender does not wait for: it owns what it uses (see
/// [`Hw::send_ipi_async`]); it gets the target's `&H`, type-erased.
type Handler = Box<dyn Fn(*const ())>;

/// A [`Hw`] with its type erased: one function per method the C side needs.
#[derive(Clone, Copy)]
pub struct HwVt {
    cpu: fn(*const ()) -> CpuId,
    write_root: fn(*const (), Root, Asid, bool),
    tlbi: fn(*const (), Tlbi, Scope),
    barrier: fn(*const (), Barrier),
    phase: fn(*const (), Phase),
    note: fn(*const (), Note),
    shared: fn(*const (), usize, Access),
    send_ipi: fn(*const (), &CpuMask, &dyn Fn(*const ())),
    send_ipi_async: fn(*const (), &CpuMask, Handler),
    spin_on: fn(*const (), usize),
    jiffies: fn(*const ()) -> u64,
    irq: fn(*const (), bool),
}

impl HwVt {
    /// Returns the table of `H`'s methods.
    pub fn of<H: Hw>() -> HwVt {
        // SAFETY (each): `p` is the `&H` a frame was made from, alive for
        // the frame's call (see `Frame::new`).
        HwVt {
            // SAFETY: the fields are private and called only as
            // `(vt.f)(frame.hw)`, with the `&H` that `Frame::new` took along
            // with this `H`'s table; `CPolicy` makes each frame inside the
            // call that lent that `&H` and drops it before returning.
            cpu: |p| unsafe { &*p.cast::<H>() }.cpu(),
            // SAFETY: as for `cpu`: `p` is its frame's live `&H`.
            write_root: |p, r, a, n| unsafe { &*p.cast::<H>() }.write_root(r, a, n),
            // SAFETY: as for `cpu`: `p` is its frame's live `&H`.
            tlbi: |p, op, s| unsafe { &*p.cast::<H>() }.tlbi(op, s),
            // SAFETY: as for `cpu`: `p` is its frame's live `&H`.
            barrier: |p, b| unsafe { &*p.cast::<H>() }.barrier(b),
            // SAFETY: as for `cpu`: `p` is its frame's live `&H`.
            phase: |p, ph| unsafe { &*p.cast::<H>() }.phase(ph),
            // SAFETY: as for `cpu`: `p` is its frame's live `&H`.
            note: |p, n| unsafe { &*p.cast::<H>() }.note(n),
            // SAFETY: as for `cpu`: `p` is its frame's live `&H`.
            shared: |p, a, k| unsafe { &*p.cast::<H>() }.shared(a, k),
            // SAFETY: as for `cpu`: `p` is its frame's live `&H`; the handler
            // gets each target's `&H`, alive while it runs.
            send_ipi: |p, m, f| unsafe { &*p.cast::<H>() }.send_ipi(m, |h: &H| f(std::ptr::from_ref(h).cast())),
            // SAFETY: as for `cpu`: `p` is its frame's live `&H`; the handler owns what it uses.
            send_ipi_async: |p, m, f| {
                // SAFETY: as for `cpu`: `p` is its frame's live `&H`.
                let h = unsafe { &*p.cast::<H>() };
                h.send_call_function_ipi_async(m, move |t: &H| f(std::ptr::from_ref(t).cast()));
            },
            // SAFETY: as for `cpu`: `p` is its frame's live `&H`.
            spin_on: |p, a| unsafe { &*p.cast::<H>() }.spin_on(a),
            // SAFETY: as for `cpu`: `p` is its frame's live `&H`.
            jiffies: |p| unsafe { &*p.cast::<H>() }.jiffies(),
            // SAFETY: as for `cpu`: `p` is its frame's live `&H`.
            irq: |p, off| {
                // SAFETY: as for `cpu`: `p` is its frame's live `&H`.
                let h = unsafe { &*p.cast::<H>() };
                if off {
                    h.irq_disable();
                } else {
                    h.irq_enable();
                }
            },
        }
    }
}

/// Where a flush call is in its shootdown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flush {
    /// Not in a flush call (a context switch, boot).
    None,
    /// Started, nothing issued.
    Issue,
    /// An x86 flush call that has sent nothing to another CPU yet: it is a
    /// shootdown (its phases start) only from its first IPI or `INVLPGB`;
    /// a flush that stays on this CPU is none, as in the Rust ports.
    Local,
    /// TLBIs issued.
    Dispatch,
    /// Completing.
    Sync,
}

/// What the C code of one policy may touch besides its own memory.
pub struct State {
    /// The ASID width the machine reports to the file.
    pub asid_bits: u8,
    /// Whether plain accesses are checked (the checker's build).
    pub checker: bool,
    /// True while the file's initcalls run (one CPU: nothing races).
    pub booting: Cell<bool>,
    /// The address of `asid_generation`, whose increment is a rollover, if the file has it.
    pub generation: usize,
    /// The blocks the file allocated: `(address, bytes)`.
    pub heap: RefCell<Vec<(usize, usize)>>,
    /// The plain-access discipline.
    pub races: RefCell<race::Tracker>,
    /// The spin locks each CPU holds (their words' addresses).
    pub held: RefCell<Vec<Vec<usize>>>,
    /// The copy's system-register functions, for the file's `msr` and `mrs`
    /// (arm64's glue; x86's has none).
    pub sysregs: Option<SysregFns>,
    /// The compiled policy (its symbols name the sites of a race).
    pub lib: std::sync::Arc<crate::Lib>,
    /// Where the copy's address 0 is.
    pub load_base: usize,
}

/// One call into C: the CPU that makes it and the policy it runs.
pub struct Frame {
    hw: *const (),
    vt: Option<HwVt>,
    state: *const State,
    flush: Cell<Flush>,
    /// In an IPI handler: the CPU that sent it, whose request the handler
    /// carries out (see [`op_ipi`]).
    sender: Option<usize>,
}

impl Frame {
    /// A frame for a call by the CPU `hw` stands for.
    pub fn new<H: Hw>(hw: &H, state: &State, flush: Flush) -> Frame {
        Frame {
            hw: std::ptr::from_ref(hw).cast(),
            vt: Some(HwVt::of::<H>()),
            state,
            flush: Cell::new(flush),
            sender: None,
        }
    }

    /// A frame for a call made by no CPU (building the policy, a new mm).
    pub fn boot(state: &State) -> Frame {
        Frame { hw: std::ptr::null(), vt: None, state, flush: Cell::new(Flush::None), sender: None }
    }

    fn state(&self) -> &State {
        // SAFETY: the state outlives every call made with it (the policy owns both).
        unsafe { &*self.state }
    }

    fn vt(&self) -> HwVt {
        self.vt.unwrap_or_else(|| panic!("no_kernel_bug: the file used the CPU outside any CPU's call (while booting)"))
    }

    /// Returns the calling CPU: the boot CPU, 0, for a call no CPU makes.
    fn cpu(&self) -> CpuId {
        self.vt.map_or(CpuId(0), |vt| (vt.cpu)(self.hw))
    }

    fn shared(&self, addr: usize, access: Access) {
        if let Some(vt) = self.vt {
            (vt.shared)(self.hw, addr, access);
        }
    }

    fn phase(&self, phase: Phase) {
        if let Some(vt) = self.vt {
            (vt.phase)(self.hw, phase);
        }
    }

    /// The call sends work to other CPUs (an IPI, a broadcast): its
    /// dispatch starts, and an x86 flush becomes a shootdown.
    fn dispatch(&self) {
        match self.flush.get() {
            Flush::Local => {
                self.phase(Phase::Issue);
                self.flush.set(Flush::Dispatch);
                self.phase(Phase::Dispatch);
            }
            Flush::Issue => {
                self.flush.set(Flush::Dispatch);
                self.phase(Phase::Dispatch);
            }
            _ => {}
        }
    }

    /// Whether the call's shootdown has started (its `Done` is due).
    pub fn started(&self) -> bool {
        !matches!(self.flush.get(), Flush::None | Flush::Local)
    }
}

thread_local! {
    static CURRENT: Cell<*const Frame> = const { Cell::new(std::ptr::null()) };
}

/// Runs `f` (a call into C) with `frame` current, then puts back the frame
/// that was (an IPI handler or a nested call returns to its caller's).
pub fn enter<R>(frame: &Frame, f: impl FnOnce() -> R) -> R {
    struct Restore(*const Frame);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(CURRENT.with(|c| c.replace(frame)));
    f()
}

/// Runs `f` with the current frame, and makes that frame current again when
/// it returns: `f` may have let other CPUs run, whose calls changed it.
fn with<R>(f: impl FnOnce(&Frame) -> R) -> R {
    let p = CURRENT.with(Cell::get);
    assert!(!p.is_null(), "no_kernel_bug: the compiled file called tlbkit outside a call from tlbkit");
    // SAFETY: a current frame lives on the stack of the `enter` that set it,
    // which has not returned (it is below this call).
    let frame = unsafe { &*p };
    let r = f(frame);
    CURRENT.with(|c| c.set(p));
    r
}

fn order(o: c_int) -> Ordering {
    match o {
        1 => Ordering::Acquire,
        2 => Ordering::Release,
        3 => Ordering::SeqCst,
        _ => Ordering::Relaxed,
    }
}

fn atomic64<'a>(p: *const c_void) -> &'a AtomicU64 {
    // SAFETY: the C side passes the address of a naturally aligned 64-bit
    // object (an atomic64_t's counter, an unsigned long) that lives as long
    // as the policy; the facade atomic is `repr(transparent)` over it.
    unsafe { &*p.cast::<AtomicU64>() }
}

fn atomic32<'a>(p: *const c_void) -> &'a AtomicU32 {
    // SAFETY: as `atomic64`, for a 32-bit object.
    unsafe { &*p.cast::<AtomicU32>() }
}

fn atomic16<'a>(p: *const c_void) -> &'a AtomicU16 {
    // SAFETY: as `atomic64`, for a 16-bit object (x86's `u16` per-CPU ASIDs).
    unsafe { &*p.cast::<AtomicU16>() }
}

fn atomic8<'a>(p: *const c_void) -> &'a AtomicU8 {
    // SAFETY: as `atomic64`, for a byte (a `bool` flag such as `is_lazy`).
    unsafe { &*p.cast::<AtomicU8>() }
}

extern "C-unwind" fn op_load(p: *const c_void, bytes: c_int) -> u64 {
    with(|f| {
        f.shared(p as usize, Access::Read);
        match bytes {
            8 => atomic64(p).load(Ordering::Relaxed),
            4 => u64::from(atomic32(p).load(Ordering::Relaxed)),
            2 => u64::from(atomic16(p).load(Ordering::Relaxed)),
            _ => u64::from(atomic8(p).load(Ordering::Relaxed)),
        }
    })
}

/// Checks an access of the file for a data race: `record` is given the CPU
/// it counts as (an IPI handler's accesses are its sender's, who waits for
/// it) and the locks it holds, and returns the race the access makes. Only
/// in the checker's build, once the file has booted, on a CPU.
fn check_race(f: &Frame, record: impl FnOnce(&mut race::Tracker, usize, &[usize]) -> Option<race::Race>) {
    let st = f.state();
    if !st.checker || st.booting.get() || f.vt.is_none() {
        return;
    }
    let cpu = f.cpu().index();
    let held = st.held.borrow().get(cpu).cloned().unwrap_or_default();
    let cpu = f.sender.unwrap_or(cpu);
    let race = record(&mut st.races.borrow_mut(), cpu, &held);
    if let Some(race) = race {
        panic!("no_data_race: {}", describe(st, &race));
    }
}

/// A marked write of the file: checked against other CPUs' plain reads
/// where marked writes count (an mm's fields, [`race::Tracker::track_marked_writes`]).
fn marked_write(f: &Frame, p: usize, bytes: usize) {
    check_race(f, |t, cpu, held| t.marked_write(cpu, p, bytes.max(1), held));
}

extern "C-unwind" fn op_store(p: *mut c_void, bytes: c_int, v: u64) {
    with(|f| {
        marked_write(f, p as usize, bytes as usize);
        f.shared(p as usize, Access::Write);
        match bytes {
            8 => atomic64(p).store(v, Ordering::Relaxed),
            4 => atomic32(p).store(v as u32, Ordering::Relaxed),
            2 => atomic16(p).store(v as u16, Ordering::Relaxed),
            _ => atomic8(p).store(v as u8, Ordering::Relaxed),
        }
    })
}

extern "C-unwind" fn op_rmw(p: *mut c_void, bytes: c_int, kind: c_int, ord: c_int, a: u64, b: u64) -> u64 {
    with(|f| {
        marked_write(f, p as usize, if bytes == 4 { 4 } else { 8 });
        f.shared(p as usize, Access::Rmw);
        let o = order(ord);
        let old = if bytes == 4 {
            let x = atomic32(p);
            let (a, b) = (a as u32, b as u32);
            u64::from(match kind {
                0 => x.swap(a, o),
                1 => x.compare_exchange(a, b, o, Ordering::Relaxed).unwrap_or_else(|v| v),
                2 => x.fetch_add(a, o),
                3 => x.fetch_or(a, o),
                _ => x.fetch_and(!a, o),
            })
        } else {
            let x = atomic64(p);
            match kind {
                0 => x.swap(a, o),
                1 => x.compare_exchange(a, b, o, Ordering::Relaxed).unwrap_or_else(|v| v),
                2 => x.fetch_add(a, o),
                3 => x.fetch_or(a, o),
                _ => x.fetch_and(!a, o),
            }
        };
        if kind == 2 && p as usize == f.state().generation {
            if let Some(vt) = f.vt {
                (vt.note)(f.hw, Note::AsidRollover);
            }
        }
        old
    })
}

extern "C-unwind" fn op_spin_lock(word: *mut c_void) {
    with(|f| {
        f.shared(word as usize, Access::Rmw);
        sync::raw_spin_lock(atomic64(word));
        if f.vt.is_some() {
            let cpu = f.cpu().index();
            let mut held = f.state().held.borrow_mut();
            if held.len() <= cpu {
                held.resize_with(cpu + 1, Vec::new);
            }
            held[cpu].push(word as usize);
        }
    })
}

extern "C-unwind" fn op_spin_unlock(word: *mut c_void) {
    with(|f| {
        if f.vt.is_some() {
            let cpu = f.cpu().index();
            if let Some(h) = f.state().held.borrow_mut().get_mut(cpu) {
                if let Some(k) = h.iter().rposition(|&w| w == word as usize) {
                    h.remove(k);
                }
            }
        }
        f.shared(word as usize, Access::Write);
        sync::raw_spin_unlock(atomic64(word));
    })
}

extern "C-unwind" fn op_spin_wait() {
    with(|_| sync::spin_loop())
}

extern "C-unwind" fn op_cpu() -> u32 {
    with(|f| f.cpu().0)
}

/// A barrier the shims ask for: `enum tlbkit_barrier` of `tlbkit/ops.h`, in
/// its order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CBarrier {
    DsbNsh,
    DsbIsh,
    DsbNshSt,
    DsbIshSt,
    Isb,
    SmpMb,
    SmpRmb,
    SmpWmb,
}

impl CBarrier {
    /// The barrier of `enum tlbkit_barrier`'s value `kind` (past the last,
    /// the last, as the shims never pass one).
    fn of(kind: c_int) -> CBarrier {
        const ALL: [CBarrier; 8] = [
            CBarrier::DsbNsh,
            CBarrier::DsbIsh,
            CBarrier::DsbNshSt,
            CBarrier::DsbIshSt,
            CBarrier::Isb,
            CBarrier::SmpMb,
            CBarrier::SmpRmb,
            CBarrier::SmpWmb,
        ];
        ALL[usize::try_from(kind).unwrap_or(ALL.len() - 1).min(ALL.len() - 1)]
    }
}

extern "C-unwind" fn op_barrier(kind: c_int) {
    barrier(CBarrier::of(kind));
}

/// Runs barrier `kind` on the current CPU: a DSB or ISB through the policy's
/// hardware, `smp_rmb()` and `smp_wmb()` as fences.
fn barrier(kind: CBarrier) {
    with(|f| {
        let b = match kind {
            CBarrier::DsbNsh => Barrier::Dsb(Domain::NonShareable),
            CBarrier::DsbIsh => Barrier::Dsb(Domain::InnerShareable),
            CBarrier::DsbNshSt => Barrier::DsbSt(Domain::NonShareable),
            CBarrier::DsbIshSt => Barrier::DsbSt(Domain::InnerShareable),
            CBarrier::Isb => Barrier::Isb,
            // With no CPU's call (a new mm), the fence of the facade atomics alone.
            CBarrier::SmpMb if f.vt.is_none() => return sync::fence(Ordering::SeqCst),
            CBarrier::SmpMb => Barrier::Full,
            CBarrier::SmpRmb => return sync::fence(Ordering::Acquire),
            CBarrier::SmpWmb => return sync::fence(Ordering::Release),
        };
        if matches!(b, Barrier::Dsb(_) | Barrier::TlbSync) && f.flush.get() == Flush::Dispatch {
            f.flush.set(Flush::Sync);
            f.phase(Phase::Sync);
        }
        (f.vt().barrier)(f.hw, b);
    })
}

/// Decodes a TLBI: which operation (`enum tlbkit_tlbi`) and its register.
fn tlbi_of(op: c_int, arg: u64, asid_bits: u8) -> Result<(Tlbi, Scope), String> {
    // The ASID field's bits above the machine's width are ignored (TCR_EL1.AS).
    let asid = || {
        let a = ((arg >> 48) as u32) & ((1 << asid_bits) - 1);
        Asid::new(a, asid_bits).map_err(|_| format!("a TLBI of ASID {a}, beyond the machine's {asid_bits} bits"))
    };
    // The operand holds VA[55:12]; bit 55 says which half (TTBR1's when set), as the top byte does.
    let sign = |va: u64| if va & (1 << 55) != 0 { va | 0xff00_0000_0000_0000 } else { va };
    let va = VirtAddr(sign((arg & ((1 << 44) - 1)) << 12));
    let range = |asid: Option<Asid>| {
        let num = (arg >> 39) & 0x1f;
        let scale = (arg >> 44) & 0x3;
        let pages = ((num + 1) << (5 * scale + 1)) as u32;
        Tlbi::Range { asid, va: VirtAddr(sign((arg & ((1 << 37) - 1)) << 12)), pages }
    };
    use Scope::{Broadcast as B, Local as L};
    Ok(match op {
        0 => (Tlbi::All, L),
        1 => (Tlbi::All, B),
        2 | 4 => (Tlbi::Va { asid: asid()?, va }, L),
        3 | 5 => (Tlbi::Va { asid: asid()?, va }, B),
        6 => (Tlbi::Asid(asid()?), L),
        7 => (Tlbi::Asid(asid()?), B),
        8 | 9 => (Tlbi::VaAllAsids { va }, B),
        10 | 11 => (range(Some(asid()?)), B),
        12 | 13 => (range(None), B),
        _ => return Err(format!("TLBI operation {op}")),
    })
}

extern "C-unwind" fn op_tlbi(op: c_int, arg: u64) {
    with(|f| {
        let (t, scope) = tlbi_of(op, arg, f.state().asid_bits).unwrap_or_else(|e| panic!("no_kernel_bug: {e}"));
        if f.flush.get() == Flush::Issue {
            f.flush.set(Flush::Dispatch);
            f.phase(Phase::Dispatch);
        }
        (f.vt().tlbi)(f.hw, t, scope);
    })
}

extern "C-unwind" fn op_write_root(reserved: c_int, slot: u32, asid: u32) {
    with(|f| {
        let bits = f.state().asid_bits;
        // As for a TLBI: the TTBR's ASID bits above the machine's width are ignored.
        let asid = Asid::new(asid & ((1 << bits) - 1), bits).unwrap_or_else(|_| {
            panic!("no_kernel_bug: ASID {asid} written to a TTBR, beyond the machine's {bits} bits")
        });
        let root = if reserved != 0 { Root::Reserved } else { Root::Mm(MmId(slot)) };
        (f.vt().write_root)(f.hw, root, asid, true);
    })
}

extern "C-unwind" fn op_phase(phase: c_int) {
    with(|f| {
        f.phase(match phase {
            0 => Phase::Issue,
            1 => Phase::Dispatch,
            2 => Phase::Sync,
            _ => Phase::Done,
        })
    })
}

extern "C-unwind" fn op_rollover() {
    with(|f| {
        if let Some(vt) = f.vt {
            (vt.note)(f.hw, Note::AsidRollover);
        }
    })
}

extern "C-unwind" fn op_alloc(bytes: usize) -> *mut c_void {
    with(|f| {
        let layout = std::alloc::Layout::from_size_align(bytes.max(1), 16).expect("a small allocation");
        // SAFETY: a non-zero size.
        let p = unsafe { std::alloc::alloc(layout) };
        if !p.is_null() {
            let st = f.state();
            st.heap.borrow_mut().push((p as usize, bytes.max(1)));
            if st.checker && !st.booting.get() {
                st.races.borrow_mut().track(p as usize, p as usize + bytes.max(1));
            }
        }
        p.cast()
    })
}

extern "C-unwind" fn op_free(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    with(|f| {
        let mut heap = f.state().heap.borrow_mut();
        let Some(k) = heap.iter().position(|&(a, _)| a == p as usize) else {
            panic!("no_kernel_bug: kfree of {p:p}, which the file never allocated");
        };
        let (_, bytes) = heap.remove(k);
        f.state().races.borrow_mut().untrack(p as usize);
        let layout = std::alloc::Layout::from_size_align(bytes, 16).expect("as allocated");
        // SAFETY: allocated by `op_alloc` with this layout and not freed since.
        unsafe { std::alloc::dealloc(p.cast(), layout) };
    })
}

extern "C-unwind" fn op_plain(p: *const c_void, bytes: c_int, write: c_int, pc: *const c_void) {
    with(|f| {
        check_race(f, |t, cpu, held| t.access(cpu, p as usize, bytes.max(1) as usize, write != 0, pc as usize, held))
    })
}

/// A basic block of the file ran (the checker's build): marked in the
/// object's record of what ran ([`crate::coverage`]). Code run outside any
/// call from tlbkit marks nothing.
extern "C-unwind" fn op_reached(pc: *const c_void) {
    let p = CURRENT.with(Cell::get);
    if p.is_null() {
        return;
    }
    // SAFETY: as in `with`: the current frame lives below this call.
    let st = unsafe { &*p }.state();
    st.lib.mark_reached((pc as usize).wrapping_sub(st.load_base));
}

/// Returns a C string's text (empty for null).
fn text(s: *const c_char) -> String {
    if s.is_null() {
        return String::new();
    }
    // SAFETY: the C side passes NUL-terminated strings (literals).
    unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
}

extern "C-unwind" fn op_bug(what: *const c_char, file: *const c_char, line: c_int) {
    let file = text(file);
    let file = file.rsplit('/').next().unwrap_or(&file).to_string();
    panic!("no_kernel_bug: {} at {file}:{line}", text(what));
}

extern "C-unwind" fn op_run_asm(template: *const c_char, names: *const c_char, ops: *mut u64) {
    let (template, names) = (text(template), text(names));
    let insns = crate::asm::parse(&template, &names)
        .unwrap_or_else(|e| panic!("no_kernel_bug: an asm statement tlbkit cannot run: {e}"));
    let operand = |i: usize| {
        // SAFETY: the translated statement passes one value per operand
        // (and a trailing 0), and the template numbers only its operands.
        unsafe { ops.add(i) }
    };
    for insn in insns {
        match insn {
            crate::asm::Insn::Tlbi(what, reg) => {
                // SAFETY: `operand(r)` is inside the statement's array (`asm::parse`
                // rejects an index past its operands), a local `tlbkit_u64[]` of the
                // C caller, which waits in this call and touches it only after.
                let arg = reg.map_or(0, |r| unsafe { *operand(r) });
                let code = TLBI_NAMES.iter().position(|n| *n == what).unwrap_or_else(|| {
                    panic!("no_kernel_bug: an asm statement tlbkit cannot run: the instruction `tlbi {what}`")
                });
                op_tlbi(code as c_int, arg);
            }
            crate::asm::Insn::Dsb(opt) => barrier(match opt.as_str() {
                "nsh" => CBarrier::DsbNsh,
                "ish" | "sy" => CBarrier::DsbIsh,
                "nshst" => CBarrier::DsbNshSt,
                "ishst" => CBarrier::DsbIshSt,
                other => panic!("no_kernel_bug: an asm statement tlbkit cannot run: `dsb {other}`"),
            }),
            crate::asm::Insn::Dmb(opt) => barrier(match opt.as_str() {
                "ishld" => CBarrier::SmpRmb,
                "ishst" => CBarrier::SmpWmb,
                _ => CBarrier::SmpMb,
            }),
            crate::asm::Insn::Isb => barrier(CBarrier::Isb),
            crate::asm::Insn::Msr(reg, r) => with(|f| {
                // SAFETY: as for `tlbi`: an element of the waiting caller's array.
                let v = unsafe { *operand(r) };
                (sysregs(f).1)(sysreg(&reg), v);
            }),
            crate::asm::Insn::Mrs(r, reg) => with(|f| {
                let v = (sysregs(f).0)(sysreg(&reg));
                // SAFETY: as for `tlbi`; the caller's array is writable (`ops` is
                // `*mut`), and the caller reads its outputs back from it after.
                unsafe { *operand(r) = v };
            }),
        }
    }
}

/// Sends an IPI to every CPU of `targets` (a mask of `NR_CPUS` bits) but
/// this one, runs `func(info)` on each and returns when all have returned:
/// `smp_call_function_many_cond` of the x86 shims, after they picked the
/// targets. An IPI starts a flush call's dispatch.
///
/// The plain accesses of a handler count as its sender's for the
/// plain-access discipline ([`crate::race`]): the sender wrote the request
/// (`flush_tlb_info`) before the IPI and waits for every handler before it
/// writes again, so the IPI orders them, which a lockset cannot express.
/// What this misses: a race between a handler and code its own CPU runs
/// with interrupts on.
extern "C-unwind" fn op_ipi(targets: *const u64, func: extern "C-unwind" fn(*mut c_void), info: *mut c_void) {
    with(|f| {
        let mask = targets_of(f, targets);
        f.dispatch();
        let vt = f.vt();
        let sender = f.cpu().index();
        let handler = |h: *const ()| {
            let frame =
                Frame { hw: h, vt: Some(vt), state: f.state, flush: Cell::new(Flush::None), sender: Some(sender) };
            enter(&frame, || func(info));
        };
        (vt.send_ipi)(f.hw, &mask, &handler);
    })
}

/// Reads an IPI's targets: the shims' cpumask of NR_CPUS bits.
fn targets_of(f: &Frame, targets: *const u64) -> CpuMask {
    let n = f.state().held.borrow().len();
    let mask = CpuMask::new(n);
    for c in 0..n {
        // SAFETY: the shims pass a cpumask of NR_CPUS bits, on the sender's
        // stack, alive for the call that reads it.
        if unsafe { *targets.add(c / 64) } >> (c % 64) & 1 != 0 {
            mask.set(CpuId(c as u32));
        }
    }
    mask
}

/// `tlbkit_ops.ipi_async`: the call-function IPIs of kernel/smp.c, sent and
/// not waited for ([`Hw::send_call_function_ipi_async`]); the glue waits on
/// its csds. Each handler runs `func(info)` in a frame of its own on its
/// CPU, its plain accesses counted as the sender's, who waits for it.
extern "C-unwind" fn op_ipi_async(targets: *const u64, func: extern "C-unwind" fn(*mut c_void), info: *mut c_void) {
    with(|f| {
        let mask = targets_of(f, targets);
        f.dispatch();
        let vt = f.vt();
        let sender = f.cpu().index();
        // The policy's state outlives every execution, and `info` is the
        // glue's (never the sender's stack): the handler owns what it uses.
        let state = f.state;
        let handler = Box::new(move |h: *const ()| {
            let frame = Frame { hw: h, vt: Some(vt), state, flush: Cell::new(Flush::None), sender: Some(sender) };
            enter(&frame, || func(info));
        });
        (vt.send_ipi_async)(f.hw, &mask, handler);
    })
}

/// `tlbkit_ops.spin_on`: the sender will poll `p` until its targets answer.
extern "C-unwind" fn op_spin_on(p: *const c_void) {
    with(|f| (f.vt().spin_on)(f.hw, p as usize))
}

extern "C-unwind" fn op_jiffies() -> u64 {
    with(|f| f.vt.map_or(0, |vt| (vt.jiffies)(f.hw)))
}

extern "C-unwind" fn op_irq(off: c_int) {
    with(|f| {
        if let Some(vt) = f.vt {
            (vt.irq)(f.hw, off != 0);
        }
    })
}

/// The PCIDs of an x86 CR3 (12 bits): the machine's tags.
const PCID_BITS: u8 = 12;

fn pcid(p: u32) -> Asid {
    Asid::new(p & ((1 << PCID_BITS) - 1), PCID_BITS).expect("12 bits")
}

extern "C-unwind" fn op_write_cr3(reserved: c_int, slot: u32, pcid_: u32, noflush: c_int) {
    with(|f| {
        let root = if reserved != 0 { Root::Reserved } else { Root::Mm(MmId(slot)) };
        (f.vt().write_root)(f.hw, root, pcid(pcid_), noflush != 0);
    })
}

/// Where x86 kernel addresses start: the upper half.
const X86_KERNEL_VA: u64 = 0xffff_8000_0000_0000;

/// Decodes an x86 TLB operation (`enum tlbkit_x86_tlbi`), or says it is a
/// `TLBSYNC` (`None`).
fn x86_tlbi_of(op: c_int, va: u64, p: u32, nr: u32) -> Result<Option<(Tlbi, Scope)>, String> {
    use Scope::{Broadcast as B, Local as L};
    let page = VirtAddr(va & !0xfff);
    Ok(Some(match op {
        // A kernel page is global (tlbkit's kernel mappings are): INVLPG drops it whatever the PCID.
        0 if va >= X86_KERNEL_VA => (Tlbi::VaAllAsids { va: page }, L),
        0 => (Tlbi::Va { asid: pcid(p), va: page }, L),
        1 => (Tlbi::Va { asid: pcid(p), va: page }, L),
        2 => (Tlbi::Asid(pcid(p)), L),
        3 => (Tlbi::All, L),
        4 => (Tlbi::AllNonGlobal, L),
        5 => (Tlbi::Range { asid: Some(pcid(p)), va: page, pages: nr.max(1) }, B),
        6 => (Tlbi::Asid(pcid(p)), B),
        7 => (Tlbi::Range { asid: None, va: page, pages: nr.max(1) }, B),
        8 => (Tlbi::All, B),
        9 => (Tlbi::AllNonGlobal, B),
        10 => return Ok(None),
        _ => return Err(format!("x86 TLB operation {op}")),
    }))
}

extern "C-unwind" fn op_x86_tlbi(op: c_int, va: u64, p: u32, nr: u32) {
    let what = x86_tlbi_of(op, va, p, nr).unwrap_or_else(|e| panic!("no_kernel_bug: {e}"));
    match what {
        None => barrier_x86_tlbsync(),
        Some((t, scope)) => with(|f| {
            if scope == Scope::Broadcast {
                f.dispatch();
            }
            (f.vt().tlbi)(f.hw, t, scope);
        }),
    }
}

/// `TLBSYNC`: the sync of this CPU's `INVLPGB`s.
fn barrier_x86_tlbsync() {
    with(|f| {
        if f.flush.get() == Flush::Dispatch {
            f.flush.set(Flush::Sync);
            f.phase(Phase::Sync);
        }
        (f.vt().barrier)(f.hw, Barrier::TlbSync);
    })
}

/// The TLBI operations in the order of `enum tlbkit_tlbi`.
const TLBI_NAMES: [&str; 14] = [
    "vmalle1",
    "vmalle1is",
    "vae1",
    "vae1is",
    "vale1",
    "vale1is",
    "aside1",
    "aside1is",
    "vaae1is",
    "vaale1is",
    "rvae1is",
    "rvale1is",
    "rvaae1is",
    "rvaale1is",
];

/// Returns `enum tlbkit_sysreg`'s number for `name`.
fn sysreg(name: &str) -> c_int {
    match name {
        "ttbr0_el1" => 0,
        "ttbr1_el1" => 1,
        "tcr_el1" => 2,
        "id_aa64mmfr0_el1" => 3,
        other => panic!("no_kernel_bug: an asm statement tlbkit cannot run: system register {other}"),
    }
}

/// The glue's system-register functions (`tlbkit_read_sysreg`, `tlbkit_write_sysreg`) of a copy.
pub type SysregFns = (extern "C-unwind" fn(c_int) -> u64, extern "C-unwind" fn(c_int, u64));

fn sysregs(f: &Frame) -> SysregFns {
    f.state()
        .sysregs
        .unwrap_or_else(|| panic!("no_kernel_bug: an asm statement tlbkit cannot run: msr or mrs in an x86 file"))
}
