//! A recording CPU for unit tests: every hardware operation a policy asks for is
//! logged as one line, prefixed with the CPU that did it when that is not the
//! CPU the test started on (an IPI handler's work).

use crate::cpumask::CpuMask;
use crate::hw::{Access, Barrier, Defer, FlushTicket, Hw, Note, Phase, Root, Scope, Tlbi};
use crate::policy::Policy;
use crate::types::{Asid, CpuId, MmId};
use std::boxed::Box;
use std::cell::{Cell, RefCell};
use std::format;
use std::string::String;
use std::vec::Vec;

/// Linux arm64's first and second generation with 8-bit ASIDs (the generation
/// counts in steps of `1 << bits`).
pub const GEN1: u64 = 1 << 8;
/// See [`GEN1`].
pub const GEN2: u64 = 2 << 8;

/// Returns the 8-bit ASID `n`.
pub fn a8(n: u32) -> Asid {
    Asid::new(n, 8).unwrap()
}

/// Creates the address spaces `mms` in `p` (`mm_init`), as fork would.
pub fn init_mms<P: Policy>(p: &P, mms: core::ops::RangeInclusive<u32>) {
    for mm in mms {
        p.mm_init(MmId(mm));
    }
}

/// Returns `p` with the address spaces 1..=`n` created ([`init_mms`]).
pub fn with_mms<P: Policy>(p: P, n: u32) -> P {
    init_mms(&p, 1..=n);
    p
}

/// Returns CPU 0 of a 1-CPU machine after it switched to `mm` in `p`, its
/// log emptied.
pub fn on_one_cpu<P: Policy>(p: &P, mm: MmId) -> Rec {
    let hw = Rec::new(0, 1);
    p.switch_mm(&hw, mm);
    hw.take();
    hw
}

/// Returns CPUs 0 and 1 of a 2-CPU machine after both switched to `mm` in
/// `p`, their logs emptied.
pub fn both_on<P: Policy>(p: &P, mm: MmId) -> (Rec, Rec) {
    let (cpu0, cpu1) = (Rec::new(0, 2), Rec::new(1, 2));
    p.switch_mm(&cpu0, mm);
    p.switch_mm(&cpu1, mm);
    cpu0.take();
    cpu1.take();
    (cpu0, cpu1)
}

/// Returns CPUs 0 and 1 of a 2-CPU machine after cpu1 ran `mm` in `p` and
/// went idle (to the kernel's tables) and cpu0 switched to `mm`, their logs
/// emptied.
pub fn on_after_idle<P: Policy>(p: &P, mm: MmId) -> (Rec, Rec) {
    let (cpu0, cpu1) = (Rec::new(0, 2), Rec::new(1, 2));
    p.switch_mm(&cpu1, mm);
    p.switch_mm(&cpu1, MmId::KERNEL);
    p.switch_mm(&cpu0, mm);
    cpu0.take();
    cpu1.take();
    (cpu0, cpu1)
}

/// Returns the log line of a root write of `mm`'s tables with tag `asid`.
pub fn root(mm: u32, asid: u16, noflush: bool) -> String {
    format!("root Mm(MmId({mm})) asid {asid} noflush {noflush}")
}

/// Returns the log line of a local invalidation of page `va` under tag `asid` (`INVLPG`).
pub fn invlpg(asid: u16, va: u64) -> String {
    format!("tlbi Va {{ asid: Asid({asid}), va: VirtAddr({va}) }} Local")
}

/// Returns CPUs 0 to `ncpus - 1` of one machine, each logging its barriers.
pub fn cpus_with_barriers(ncpus: usize) -> Vec<Rec> {
    (0..ncpus)
        .map(|c| {
            let mut r = Rec::new(c as u32, ncpus);
            r.barriers = true;
            r
        })
        .collect()
}

/// A CPU that records what the policy asked of it.
pub struct Rec {
    home: u32,
    cpu: Cell<u32>,
    ncpus: usize,
    log: RefCell<Vec<String>>,
    /// Whether barriers are logged (most tests do not care about them).
    pub barriers: bool,
    /// Whether shared-line accesses and phases are logged.
    pub coherence: bool,
    /// Code to run once just before this CPU's next barrier of a kind (see
    /// [`Rec::before_barrier`]).
    hook: RefCell<Option<(Barrier, Hook)>>,
    /// What [`Hw::jiffies`] returns (0 until a test sets it).
    pub jiffies: Cell<u64>,
    /// Whether [`Hw::defer_flush`] hands out tickets under either rule (as the
    /// kernel does inside this CPU's own `munmap`); false until a test sets it.
    pub lazy: Cell<bool>,
    /// Whether it hands them out under [`Defer::WhileMmFlagged`] alone (another
    /// thread's `munmap` or `madvise` has set the mm's `munmap_inprogress`, and
    /// this flush is not its); false until a test sets it.
    pub flagged: Cell<bool>,
    /// The last ticket handed out.
    tickets: Cell<u32>,
}

/// Another CPU's steps, run inside a policy call (see [`Rec::before_barrier`]).
type Hook = Box<dyn FnOnce()>;

impl Rec {
    /// Returns CPU `cpu` of a machine of `ncpus`.
    pub fn new(cpu: u32, ncpus: usize) -> Self {
        Rec {
            home: cpu,
            cpu: Cell::new(cpu),
            ncpus,
            log: RefCell::new(Vec::new()),
            barriers: false,
            coherence: false,
            hook: RefCell::new(None),
            jiffies: Cell::new(0),
            lazy: Cell::new(false),
            flagged: Cell::new(false),
            tickets: Cell::new(0),
        }
    }

    /// Runs `f` once, just before this CPU's next barrier `b`: other CPUs' steps
    /// interleaved at that point of a policy call, as a deterministic stand-in for
    /// a schedule the checker would explore.
    pub fn before_barrier(&self, b: Barrier, f: impl FnOnce() + 'static) {
        *self.hook.borrow_mut() = Some((b, Box::new(f)));
    }

    /// Returns and clears the log.
    pub fn take(&self) -> Vec<String> {
        self.log.take()
    }

    /// Logs `what` with the targets other than this CPU, then runs `handler` as each.
    fn interrupt<F: Fn(&Self)>(&self, what: &str, targets: &CpuMask, handler: F) {
        let me = self.cpu.get();
        let mut list = Vec::new();
        targets.for_each(|c| {
            if c.0 != me {
                list.push(c.0);
            }
        });
        self.push(format!("{what} {list:?}"));
        for c in list {
            self.cpu.set(c);
            handler(self);
        }
        self.cpu.set(me);
    }

    fn push(&self, line: String) {
        let cpu = self.cpu.get();
        let line = if cpu == self.home { line } else { format!("cpu{cpu}: {line}") };
        self.log.borrow_mut().push(line);
    }
}

impl Hw for Rec {
    fn cpu(&self) -> CpuId {
        CpuId(self.cpu.get())
    }
    fn ncpus(&self) -> usize {
        self.ncpus
    }
    fn write_root(&self, root: Root, asid: Asid, noflush: bool) {
        self.push(format!("root {root:?} asid {asid} noflush {noflush}"));
    }
    fn tlbi(&self, op: Tlbi, scope: Scope) {
        self.push(format!("tlbi {op:?} {scope:?}"));
    }
    fn barrier(&self, b: Barrier) {
        let due = self.hook.borrow().as_ref().is_some_and(|(at, _)| *at == b);
        if due {
            if let Some((_, f)) = self.hook.borrow_mut().take() {
                f();
            }
        }
        if self.barriers {
            self.push(format!("barrier {b:?}"));
        }
    }
    fn send_ipi<F: Fn(&Self)>(&self, targets: &CpuMask, handler: F) {
        self.interrupt("ipi", targets, handler);
    }
    fn send_ipi_async<F: Fn(&Self)>(&self, targets: &CpuMask, handler: F) {
        self.interrupt("ipi async", targets, handler);
    }
    fn send_ipi_all_but_self_async<F: Fn(&Self)>(&self, handler: F) {
        let all = CpuMask::new(self.ncpus);
        all.set_all();
        self.interrupt("ipi all-but-self", &all, handler);
    }
    fn shared(&self, addr: usize, access: Access) {
        if self.coherence {
            self.push(format!("shared {addr:#x} {access:?}"));
        }
    }
    fn spin_on(&self, addr: usize) {
        if self.coherence {
            self.push(format!("spin on {addr:#x}"));
        }
    }
    fn phase(&self, phase: Phase) {
        if self.coherence {
            self.push(format!("phase {phase:?}"));
        }
    }
    fn note(&self, n: Note) {
        self.push(format!("note {n:?}"));
    }
    fn jiffies(&self) -> u64 {
        self.jiffies.get()
    }
    fn irqs_off<R>(&self, f: impl FnOnce() -> R) -> R {
        f()
    }
    fn defer_flush(&self, _mm: MmId, rule: Defer) -> Option<FlushTicket> {
        if !(self.lazy.get() || (rule == Defer::WhileMmFlagged && self.flagged.get())) {
            return None;
        }
        let t = self.tickets.get() + 1;
        self.tickets.set(t);
        self.push(format!("defer ticket {t}"));
        Some(FlushTicket(t))
    }
    fn flush_complete(&self, ticket: FlushTicket) {
        self.push(format!("complete ticket {}", ticket.0));
    }
}
