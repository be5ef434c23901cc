//! The checked kernel's operations: what a CPU may do next, and how each one
//! changes the page tables and calls the policy, as a kernel does.

use crate::block;
use crate::engine::Engine;
use crate::kernel::{va_of, Life, LockSide, Machine, Mode, Part, Task, BLOCK, BLOCK_PAGE, VA0};
/// How the kernel pages out (part of the machine's [`crate::shape::Shape`]),
/// by the name [`crate::spec`] uses for it.
pub(crate) use crate::shape::Reclaim;
use crate::shape::{KernelBug, Memory};
use crate::trace::{entries_removed, Kind, INTO_BUFFER};
use tlbkit_policy::{Lazy, MmId, Policy, Tick, VirtAddr};

mod exit;
mod lazy;
mod pages;
mod reclaim;
use exit::*;
pub(crate) use lazy::complete_lazy;
use lazy::*;
use pages::*;
use reclaim::*;

/// A kernel operation a CPU can start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Switch to a thread of the process in this slot.
    Switch(u32),
    /// Switch to the idle thread.
    Idle,
    /// `munmap` of one page of the running process.
    Unmap(usize),
    /// Fault one page of the running process back in.
    Map(usize),
    /// Reclaim (by `kswapd`, a kernel thread: offered to idle CPUs) a page of the
    /// process in this slot: the PTE goes, the flush is reclaim's batched one
    /// (`Policy::flush_batch`). Linux's page-out ([`Reclaim::LinuxBatched`]).
    Reclaim(u32, usize),
    /// Page out (by FreeBSD's page daemon, a kernel thread: offered to idle CPUs)
    /// a page of the process in this slot: under the pmap's lock the PTE goes and
    /// that pmap's page is invalidated (`Policy::flush_page`), whether or not any
    /// CPU runs it. FreeBSD's page-out ([`Reclaim::FreebsdPageDaemon`]).
    PageOut(u32, usize),
    /// `munmap` of the whole range, freeing its page-table page.
    UnmapTable,
    /// The running process's last thread exits.
    Exit,
    /// Start a process in a free slot.
    Fork(u32),
    /// A thread of the running process writes this page of its contiguous block
    /// (`--teardown`; see the `block` module).
    Write(usize),
    /// `munmap` of this page of the running process's contiguous block.
    UnmapBlock(usize),
    /// Fault this page of the running process's contiguous block back in.
    MapBlock(usize),
    /// Page aging (by `kswapd`, offered to idle CPUs) of the contiguous block of
    /// the process in this slot.
    Age(u32),
    /// `madvise(MADV_DONTNEED)` of one page of the running process (Linux: under
    /// the `mmap_lock` read side, so it overlaps other readers' flushes).
    Madvise(usize),
    /// A scheduler tick (`scheduler_tick`, interrupts off): offered only to
    /// policies that work at ticks ([`Policy::ticks`]), on every CPU.
    Tick,
    /// Reclaim (by `kswapd`, offered to idle CPUs) of a page of each of two
    /// processes, these slots and pages, in one batch: both PTEs go, each
    /// queued with `Policy::tlbbatch_add_pending`, then one
    /// `Policy::flush_batch` of both (one `shrink_folio_list`, one
    /// `try_to_unmap_flush`). Linux only.
    Reclaim2(u32, usize, u32, usize),
    /// A copy-on-write fault on this page of the running process (Linux
    /// `wp_page_copy`): under the `mmap_lock` read side and the PTE lock, a new
    /// frame replaces the old one with `ptep_clear_flush` (`flush_page`), and
    /// the old frame is freed at once.
    Cow(usize),
    /// Migration (by `kcompactd`, a kernel thread: offered to idle CPUs) of a
    /// page of the process in this slot (Linux `try_to_unmap_one` with
    /// `TTU_MIGRATION`, no `mmap_lock`): under the PTE lock the PTE is cleared
    /// and flushed with `ptep_clear_flush` (`flush_page`, not the batch), a new
    /// frame is mapped, and the old one is freed.
    Migrate(u32, usize),
}

/// The kinds of kernel operation, as `--menu` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// [`Op::Switch`].
    Switch,
    /// [`Op::Idle`].
    Idle,
    /// [`Op::Unmap`].
    Munmap,
    /// [`Op::Map`].
    Fault,
    /// [`Op::Reclaim`].
    Reclaim,
    /// [`Op::UnmapTable`].
    UnmapTable,
    /// [`Op::Exit`].
    Exit,
    /// [`Op::Fork`].
    Fork,
    /// [`Op::Write`].
    Write,
    /// [`Op::Madvise`].
    Madvise,
    /// [`Op::Tick`].
    Tick,
    /// [`Op::Cow`].
    Cow,
    /// [`Op::Migrate`].
    Migrate,
    /// [`Op::Reclaim2`]: offered only when a menu names it (not in
    /// [`OpKind::all`]).
    Reclaim2,
}

impl OpKind {
    /// Every kind, in menu order (`cow`, `migrate` and `reclaim2` last, so that
    /// the bits of the others, and the tokens that carry them, are as before
    /// they came).
    pub const ALL: [OpKind; 14] = [
        OpKind::Switch,
        OpKind::Idle,
        OpKind::Munmap,
        OpKind::Fault,
        OpKind::Reclaim,
        OpKind::UnmapTable,
        OpKind::Exit,
        OpKind::Fork,
        OpKind::Write,
        OpKind::Madvise,
        OpKind::Tick,
        OpKind::Cow,
        OpKind::Migrate,
        OpKind::Reclaim2,
    ];

    /// Returns the kind's name.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Switch => "switch",
            OpKind::Idle => "idle",
            OpKind::Munmap => "munmap",
            OpKind::Fault => "fault",
            OpKind::Reclaim => "reclaim",
            OpKind::UnmapTable => "unmap-table",
            OpKind::Exit => "exit",
            OpKind::Fork => "fork",
            OpKind::Write => "write",
            OpKind::Madvise => "madvise",
            OpKind::Tick => "tick",
            OpKind::Cow => "cow",
            OpKind::Migrate => "migrate",
            OpKind::Reclaim2 => "reclaim2",
        }
    }

    /// Returns the kind's bit in a menu mask.
    pub fn bit(self) -> u32 {
        1 << (self as u32)
    }

    /// Returns the mask of the default menu: every kind but `cow`, `migrate`
    /// and `reclaim2`, which a menu must name (added after the checker's
    /// standard bounds were measured, they would change every default search).
    pub fn all() -> u32 {
        let named_only = OpKind::Cow.bit() | OpKind::Migrate.bit() | OpKind::Reclaim2.bit();
        Self::ALL.iter().fold(0, |m, k| m | k.bit()) & !named_only
    }

    /// Parses a comma-separated list of kinds into a mask.
    pub fn parse(list: &str) -> Result<u32, crate::Error> {
        let mut m = 0;
        for w in list.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            let k = Self::ALL.iter().find(|k| k.name() == w).ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|k| k.name()).collect();
                crate::Error::Invalid {
                    param: crate::error::Param::Menu,
                    value: None,
                    problem: format!("unknown operation '{w}'; the operations are {}", names.join(", ")),
                }
            })?;
            m |= k.bit();
        }
        if m == 0 {
            return Err(crate::Error::EmptyMenu);
        }
        Ok(m)
    }

    /// Returns the comma-separated names of a mask.
    pub fn names(mask: u32) -> String {
        Self::ALL.iter().filter(|k| mask & k.bit() != 0).map(|k| k.name()).collect::<Vec<_>>().join(",")
    }
}

impl Op {
    /// Returns the operation's kind.
    pub fn kind(self) -> OpKind {
        match self {
            Op::Switch(_) => OpKind::Switch,
            Op::Idle => OpKind::Idle,
            Op::Unmap(_) => OpKind::Munmap,
            Op::Map(_) => OpKind::Fault,
            Op::Reclaim(..) | Op::PageOut(..) => OpKind::Reclaim,
            Op::UnmapTable => OpKind::UnmapTable,
            Op::Exit => OpKind::Exit,
            Op::Fork(_) => OpKind::Fork,
            Op::Write(_) => OpKind::Write,
            Op::UnmapBlock(_) => OpKind::Munmap,
            Op::MapBlock(_) => OpKind::Fault,
            Op::Age(_) => OpKind::Reclaim,
            Op::Madvise(_) => OpKind::Madvise,
            Op::Tick => OpKind::Tick,
            Op::Cow(_) => OpKind::Cow,
            Op::Migrate(..) => OpKind::Migrate,
            Op::Reclaim2(..) => OpKind::Reclaim2,
        }
    }

    fn name(self) -> String {
        match self {
            Op::Switch(s) => format!("switch to a thread of mm{s}"),
            Op::Idle => "switch to the idle thread".to_string(),
            Op::Unmap(p) => format!("munmap page {:#x}", va_of(p)),
            Op::Map(p) => format!("fault in page {:#x}", va_of(p)),
            Op::Reclaim(s, p) => format!("kswapd reclaims page {:#x} of mm{s} (batched flush)", va_of(p)),
            Op::PageOut(s, p) => {
                format!("the page daemon pages out page {:#x} of mm{s} (pmap_remove_all)", va_of(p))
            }
            Op::UnmapTable => "munmap the whole range, freeing its page table".to_string(),
            Op::Exit => "exit: the process's last thread leaves".to_string(),
            Op::Fork(s) => format!("fork a new process into slot mm{s}"),
            Op::Write(j) => format!("user write to page {:#x} of the contiguous block", va_of(BLOCK_PAGE + j)),
            Op::UnmapBlock(j) => format!("munmap page {:#x} of the contiguous block", va_of(BLOCK_PAGE + j)),
            Op::MapBlock(j) => format!("fault in page {:#x} of the contiguous block", va_of(BLOCK_PAGE + j)),
            Op::Age(s) => format!("kswapd ages the contiguous block of mm{s} (ptep_clear_flush_young)"),
            Op::Madvise(p) => format!("madvise(MADV_DONTNEED) of page {:#x}", va_of(p)),
            Op::Tick => "scheduler tick".to_string(),
            Op::Cow(p) => format!("copy-on-write fault on page {:#x}", va_of(p)),
            Op::Migrate(s, p) => format!("kcompactd migrates page {:#x} of mm{s} (ptep_clear_flush)", va_of(p)),
            Op::Reclaim2(s, p, t, q) => format!(
                "kswapd reclaims page {:#x} of mm{s} and page {:#x} of mm{t} (one batched flush)",
                va_of(p),
                va_of(q)
            ),
        }
    }

    /// Returns the operation as a script line names it (after its CPU):
    /// `switch mm2`, `munmap 0`, `reclaim mm1 1` (see [`crate::search::Script`]).
    pub fn script_words(self) -> String {
        match self {
            Op::Switch(s) => format!("switch mm{s}"),
            Op::Idle => "idle".into(),
            Op::Unmap(p) => format!("munmap {p}"),
            Op::Map(p) => format!("fault {p}"),
            Op::Reclaim(s, p) | Op::PageOut(s, p) => format!("reclaim mm{s} {p}"),
            Op::Reclaim2(s, p, t, q) => format!("reclaim2 mm{s} {p} mm{t} {q}"),
            Op::UnmapTable => "unmap-table".into(),
            Op::Exit => "exit".into(),
            Op::Fork(s) => format!("fork mm{s}"),
            Op::Madvise(p) => format!("madvise {p}"),
            Op::Tick => "tick".into(),
            Op::Cow(p) => format!("cow {p}"),
            Op::Migrate(s, p) => format!("migrate mm{s} {p}"),
            // Not a script's: the contiguous block's operations.
            Op::Write(_) | Op::UnmapBlock(_) | Op::MapBlock(_) | Op::Age(_) => format!("({})", self.name()),
        }
    }

    fn key(self) -> u64 {
        match self {
            Op::Switch(s) => 0x100 + s as u64,
            Op::Idle => 0x200,
            Op::Unmap(p) => 0x300 + p as u64,
            Op::Map(p) => 0x400 + p as u64,
            Op::Reclaim(s, p) => 0x500 + ((s as u64) << 4) + p as u64,
            Op::UnmapTable => 0x600,
            Op::Exit => 0x700,
            Op::Fork(s) => 0x800 + s as u64,
            Op::Write(j) => 0x900 + j as u64,
            Op::UnmapBlock(j) => 0xa00 + j as u64,
            Op::MapBlock(j) => 0xb00 + j as u64,
            Op::Age(s) => 0xc00 + s as u64,
            Op::PageOut(s, p) => 0xd00 + ((s as u64) << 4) + p as u64,
            Op::Madvise(p) => 0xe00 + p as u64,
            Op::Tick => 0xf00,
            Op::Cow(p) => 0x1000 + p as u64,
            Op::Migrate(s, p) => 0x1100 + ((s as u64) << 4) + p as u64,
            Op::Reclaim2(s, p, t, q) => {
                0x1_0000 + ((s as u64) << 12) + ((p as u64) << 8) + ((t as u64) << 4) + q as u64
            }
        }
    }
}

/// Returns how many operations CPU `cpu` starts: `ops` shared out evenly, the
/// lower-numbered CPUs taking the remainder.
pub fn budget(ops: usize, cpus: usize, cpu: usize) -> usize {
    ops / cpus + usize::from(cpu < ops % cpus)
}

/// Returns the operations CPU `cpu` may start now (empty when its budget is
/// spent). Switches to a process nobody has run yet are offered only for the
/// lowest such slot: untouched processes are alike, so the others add nothing.
/// A CPU running a process is offered its page-table changes first, then the
/// switches: exhaustive search explores the first choice first, so it reaches
/// two threads of one process changing its page tables at once early, where
/// leaving first would take it through every other process before.
fn menu<E: Engine>(core: &E, cpu: usize, ticks: bool) -> Vec<Op> {
    let mut ops = Vec::new();
    if core.ops_done(cpu) >= budget(core.shape().ops, core.shape().cpus, cpu) {
        return ops;
    }

    let m = core.machine();
    // The menu depends on every CPU's task and every slot's life.
    let cur = m.sched().tasks[cpu];
    let mut fresh_offered = false;
    for s in 1..m.spaces().len() as u32 {
        if m.space(s).life != Life::Live || cur == Task::User(s) {
            continue;
        }
        if !m.touched(s) {
            if fresh_offered {
                continue;
            }
            fresh_offered = true;
        }
        ops.push(Op::Switch(s));
    }
    let Task::User(s) = cur else {
        // Both kernels reclaim from a kernel thread (`kswapd`, the page daemon),
        // for processes running elsewhere or nowhere.
        for r in 1..m.spaces().len() as u32 {
            let sp = m.space(r);
            if !sp.life.mapped() {
                continue;
            }
            for p in 0..m.consts().pages {
                if sp.ptes[p].is_some() {
                    ops.push(match core.shape().reclaim {
                        Reclaim::LinuxBatched => Op::Reclaim(r, p),
                        Reclaim::FreebsdPageDaemon => Op::PageOut(r, p),
                    });
                    if core.shape().linux {
                        ops.push(Op::Migrate(r, p));
                    }
                }
            }
            if sp.block.iter().any(|v| v.valid()) {
                ops.push(Op::Age(r));
            }
        }
        if core.shape().menu & OpKind::Reclaim2.bit() != 0 && core.shape().reclaim == Reclaim::LinuxBatched {
            push_reclaim_pairs(&m, &mut ops);
        }
        push_forks(&m, &mut ops);
        if ticks {
            ops.push(Op::Tick);
        }
        ops.retain(|o| core.shape().menu & o.kind().bit() != 0);
        return ops;
    };
    // The switches go after this process's own operations.
    let switches = std::mem::take(&mut ops);
    let space = m.space(s);
    let in_flight = core.shape().linux && reclaim_in_flight(&m, s);
    if in_flight {
        // A reclaim of this process has cleared a PTE and not yet returned from
        // its deferred flush. Linux lets every operation of the process run in
        // that window; of them, the checker offers the one whose outcome depends
        // on the flush: a `munmap` of a page, which calls
        // `flush_tlb_batched_pending` and then relies on it (3ea277194daa's and
        // 4b634918384c's races). Faults, `madvise`, forks, exits and a whole-range
        // `munmap` wait until the flush has returned. This is a bound, like the
        // number of operations: offering all of them cost 1.1 to 3.7 times the
        // states at the standard bounds and found nothing more
        // (`bench/2026-11-25-check-reclaim-unlocked.md`).
        for p in 0..m.consts().pages {
            if space.ptes[p].is_some() || space.detached & (1 << p) == 0 {
                ops.push(Op::Unmap(p));
            }
        }
    } else {
        for p in 0..m.consts().pages {
            if space.ptes[p].is_some() {
                ops.push(Op::Unmap(p));
                // FreeBSD's MADV_DONTNEED keeps the mapping (`pmap_advise` only clears
                // the accessed and modified bits), so it removes no translation there.
                if core.shape().linux {
                    ops.push(Op::Madvise(p));
                    ops.push(Op::Cow(p));
                }
            } else if space.detached & (1 << p) == 0 {
                // A page whose VMA a munmap is still tearing down cannot be mapped
                // again before it is done (`mmap` needs the write side).
                // (A munmap of it clears no PTE: with no reclaim in flight it changes
                // nothing the oracle judges, so it is not offered.)
                ops.push(Op::Map(p));
            }
        }
        if space.table.is_some() {
            ops.push(Op::UnmapTable);
        }
        if !space.block.is_empty() {
            for j in 0..BLOCK {
                if !block::write_targets(&m, cpu, s, j).is_empty() {
                    ops.push(Op::Write(j));
                }
                ops.push(if space.block[j].valid() { Op::UnmapBlock(j) } else { Op::MapBlock(j) });
            }
        }
    }
    ops.extend(switches);
    ops.push(Op::Idle);
    if !in_flight {
        // The last thread exits only when no other CPU runs a thread of the
        // process or is still switching one out.
        let sched = m.sched();
        let elsewhere = |c: usize| c != cpu && (sched.tasks[c] == Task::User(s) || sched.leaving[c] == Some(s));
        if !(0..sched.tasks.len()).any(elsewhere) {
            ops.push(Op::Exit);
        }
        push_forks(&m, &mut ops);
    }
    // A tick may come to any CPU (the sweeps of a ticking policy are what its
    // lazy flushes wait for).
    if ticks {
        ops.push(Op::Tick);
    }
    ops.retain(|o| core.shape().menu & o.kind().bit() != 0);
    ops
}

/// Offers `kswapd` a mapped page of each of two live processes (lower slot
/// first) for one batch ([`Op::Reclaim2`]).
fn push_reclaim_pairs(m: &Machine, ops: &mut Vec<Op>) {
    let spaces = m.spaces();
    let live = |r: usize| spaces[r].life.mapped();
    let mapped = |r: usize| (0..m.consts().pages).filter(move |&p| spaces[r].ptes[p].is_some());
    for r in (1..spaces.len()).filter(|&r| live(r)) {
        for t in (r + 1..spaces.len()).filter(|&t| live(t)) {
            for p in mapped(r) {
                for q in mapped(t) {
                    ops.push(Op::Reclaim2(r as u32, p, t as u32, q));
                }
            }
        }
    }
}

fn push_forks(m: &Machine, ops: &mut Vec<Op>) {
    let spaces = m.spaces();
    if let Some(s) = (1..spaces.len()).find(|&s| spaces[s].life == Life::Free) {
        ops.push(Op::Fork(s as u32));
    }
}

/// Runs CPU `cpu`'s kernel: operation after operation while its budget lasts,
/// then interrupts only.
pub(crate) fn kernel_loop<E: Engine, P: Policy>(core: &E, p: &P, cpu: usize) {
    loop {
        core.forget_locals(cpu);
        core.op_boundary(cpu);
        core.pause();
        let ops = menu(core, cpu, p.ticks());
        if ops.is_empty() {
            core.idle();
        }
        let Some(i) = core.choose_kernel_op(ops.len(), &|i| ops[i].script_words()) else {
            // Pruned: stop here (the scheduler ends the execution).
            core.idle();
        };
        core.count_op(cpu);
        run_op(core, p, cpu, ops[i]);
    }
}

/// Returns the side of the lock of an address space that an operation taking
/// `linux` side takes: on FreeBSD every page-table change and its shootdown run
/// under the pmap's `PMAP_LOCK`, a mutex (`pmap_remove`, `pmap_enter` and the
/// page daemon's `pmap_remove_all` in amd64 and arm64 `pmap.c` invalidate before
/// `PMAP_UNLOCK`), taken here as the write side.
fn side<E: Engine>(core: &E, linux: LockSide) -> LockSide {
    if core.shape().linux {
        linux
    } else {
        LockSide::Write
    }
}

/// Takes `side` of the `mmap_lock` of `slot`, sleeping while it cannot.
fn lock_mm<E: Engine>(core: &E, cpu: usize, slot: u32, side: LockSide) {
    loop {
        let free = core.machine().can_lock_mm(slot, side);
        if free {
            core.machine_mut().lock_mm(slot, cpu, side);
            return;
        }
        core.wait_mm_lock(slot, side);
    }
}

/// Turns CPU `cpu`'s write hold of the `mmap_lock` of `slot` into a read hold
/// (`mmap_write_downgrade`): readers may enter at once, writers still wait.
fn downgrade_mm<E: Engine>(core: &E, cpu: usize, slot: u32) {
    core.machine_mut().downgrade_mm(slot, cpu);
}

/// Releases `side` of the `mmap_lock` of `slot`. A release orders every earlier
/// store, so the CPU's store buffer drains first.
fn unlock_mm<E: Engine>(core: &E, cpu: usize, slot: u32, side: LockSide) {
    core.drain_own(cpu);
    core.machine_mut().unlock_mm(slot, cpu, side);
}

/// Sets what CPU `cpu` runs and where it stands ([`Mode`]).
fn set_task<E: Engine>(core: &E, cpu: usize, task: Task, mode: Mode) {
    // What a CPU may use depends on its task as much as on its TLB.
    core.machine_mut().set_task(cpu, task, mode);
}

fn run_op<E: Engine, P: Policy>(core: &E, p: &P, cpu: usize, op: Op) {
    core.event_kind(cpu, 0xf_0000 ^ op.key(), Kind::Op, || match op {
        // The whole-range unmap stands for khugepaged's collapse there.
        Op::UnmapTable if core.shape().bug == Some(KernelBug::CollapseRangeFlush) => {
            "op: khugepaged collapses the range into a huge page, freeing its page table".to_string()
        }
        _ => format!("op: {}", op.name()),
    });
    let task = core.machine().sched().tasks[cpu];
    debug_assert!(allowed(&core.machine(), op, task), "{op:?} offered to a CPU running {task:?}");
    if let (Op::Write(j), Task::User(s)) = (op, task) {
        // A user write is not a kernel operation: the CPU stays in user mode.
        return block::write(core, cpu, s, j);
    }
    // Claims are made in the step that chose the operation, before anything can
    // pause: the thread switched to is this CPU's (no exit of its process may
    // start elsewhere), an exiting process has no thread left to switch to, and
    // a slot forked into is taken.
    match op {
        Op::Switch(s) => set_task(core, cpu, Task::User(s), Mode::Switching),
        Op::Exit => {
            if let Task::User(s) = task {
                core.machine_mut().start_exit(s);
            }
            set_task(core, cpu, task, Mode::Kernel);
        }
        Op::Fork(s) => {
            core.machine_mut().claim_for_fork(s);
            set_task(core, cpu, task, Mode::Kernel);
        }
        _ => set_task(core, cpu, task, Mode::Kernel),
    }
    reap(core, p, cpu);
    match (op, task) {
        (Op::Switch(s), _) => switch(core, p, cpu, s),
        (Op::Idle, _) => switch_idle(core, p, cpu),
        (Op::Tick, _) => timer_tick(core, p, cpu),
        (Op::Unmap(pg), Task::User(s)) => zap_page(core, p, cpu, s, pg, Zap::Munmap),
        (Op::Reclaim(s, pg), _) => zap_page(core, p, cpu, s, pg, Zap::Reclaim),
        (Op::PageOut(s, pg), _) => zap_page(core, p, cpu, s, pg, Zap::PageOut),
        (Op::Reclaim2(s, pg, t, qg), _) => reclaim_pair(core, p, cpu, [(s, pg), (t, qg)]),
        (Op::Map(pg), Task::User(s)) => fault(core, cpu, s, pg),
        (Op::Madvise(pg), Task::User(s)) => zap_page(core, p, cpu, s, pg, Zap::Madvise),
        (Op::Cow(pg), Task::User(s)) => replace_page(core, p, cpu, s, pg, Replace::Cow),
        (Op::Migrate(s, pg), _) => replace_page(core, p, cpu, s, pg, Replace::Migrate),
        (Op::UnmapTable, Task::User(s)) => unmap_table(core, p, cpu, s),
        // The contiguous block's operations keep the whole lock for their change
        // and flush (see the crate documentation).
        (Op::UnmapBlock(j), Task::User(s)) => {
            lock_mm(core, cpu, s, LockSide::Write);
            block::unmap(core, p, cpu, s, j);
            unlock_mm(core, cpu, s, LockSide::Write);
            back_to_user(core, cpu, s);
        }
        (Op::Age(s), _) => {
            lock_mm(core, cpu, s, LockSide::Write);
            block::age(core, p, cpu, s);
            unlock_mm(core, cpu, s, LockSide::Write);
            end_op(core, cpu);
        }
        (Op::MapBlock(j), Task::User(s)) => {
            lock_mm(core, cpu, s, LockSide::Write);
            block::fault(core, p, cpu, s, j);
            unlock_mm(core, cpu, s, LockSide::Write);
            back_to_user(core, cpu, s);
        }
        (Op::Exit, Task::User(s)) => exit(core, p, cpu, s),
        (Op::Fork(s), _) => fork(core, p, cpu, s, task),
        (op, task) => unreachable!("{op:?} offered to a CPU running {task:?}"),
    }
}

/// Whether the kernel allows `op` on a CPU running `task` in this state, as the
/// menu must offer it: a switch only to a live process (not one whose last
/// thread is exiting), a process's own operations only while it lives,
/// reclaim and migration only of pages still mapped, a fork only into a free
/// slot. Checked on every operation in debug builds.
fn allowed(m: &Machine, op: Op, task: Task) -> bool {
    let life = |s: u32| m.space(s).life;
    match (op, task) {
        (Op::Switch(s), _) => life(s) == Life::Live && task != Task::User(s),
        (Op::Reclaim(s, _) | Op::PageOut(s, _) | Op::Migrate(s, _) | Op::Age(s), _) => life(s).mapped(),
        (Op::Reclaim2(s, _, t, _), _) => life(s).mapped() && life(t).mapped(),
        (Op::Fork(s), _) => life(s) == Life::Free,
        (Op::Idle | Op::Tick, _) => true,
        (_, Task::User(s)) => life(s) == Life::Live,
        _ => false,
    }
}

/// A context switch to user thread `s` (`__schedule`, then `switch_mm`).
fn switch<E: Engine, P: Policy>(core: &E, p: &P, cpu: usize, s: u32) {
    let hw = core.hw(cpu);
    {
        core.irq_disable(cpu);
        core.machine_mut().touch(s);
    }
    set_task(core, cpu, Task::User(s), Mode::Switching);
    // `__schedule`: after the next task is picked, before the switch.
    if p.ticks() {
        p.tick(&hw, Tick::Schedule);
    }
    p.switch_mm(&hw, MmId(s));
    core.irq_enable(cpu);
    core.pause();
    switch_to(core, cpu);
    set_task(core, cpu, Task::User(s), Mode::User);
}

/// The timer interrupt's tick.
fn timer_tick<E: Engine, P: Policy>(core: &E, p: &P, cpu: usize) {
    let hw = core.hw(cpu);
    // The timer interrupt: judged as an IPI handler is (flushes that
    // return meanwhile are judged for this CPU when it returns), since
    // it cannot run anything else before.
    {
        core.irq_disable(cpu);
        core.machine_mut().enter_irq(cpu);
    }
    p.tick(&hw, Tick::Timer);
    let judged = {
        core.irq_enable(cpu);
        core.machine_mut().leave_irq(cpu)
    };
    if let Err(v) = judged {
        core.violated(v);
    }
    end_op(core, cpu);
}

/// A page fault of user thread `s` on page `pg`, which maps it.
fn fault<E: Engine>(core: &E, cpu: usize, s: u32, pg: usize) {
    // Linux faults under the read side (the PTE lock makes the change);
    // FreeBSD's `pmap_enter` under `PMAP_LOCK`.
    let side = side(core, LockSide::Read);
    lock_mm(core, cpu, s, side);
    if core.shape().linux {
        core.pte_lock(s);
    }
    // As Linux rechecks `pte_none` under the page-table lock: another
    // thread's fault may have mapped the page while this one slept.
    let (mapped, detached) = {
        let m = core.machine();
        let sp = m.space(s);
        (sp.ptes[pg].is_some(), sp.detached & (1 << pg) != 0)
    };
    if mapped || detached {
        core.event(cpu, 0x10_0002 + detached as u64, || {
            if detached {
                "a munmap removed the page's VMA meanwhile: the fault fails".to_string()
            } else {
                "the page is mapped already: the fault is done".to_string()
            }
        });
        unlock_mm(core, cpu, s, side);
        return back_to_user(core, cpu, s);
    }
    let r = core.machine_mut().map(s, pg, cpu);
    match r {
        Err(v) => core.violated(v),
        Ok(ok) => core.event_kind(cpu, 0x10_0000 + ok as u64, Kind::PageTable, || {
            if ok {
                format!("PTE of {:#x} in mm{s} set", va_of(pg))
            } else {
                "no free frame: the fault fails".to_string()
            }
        }),
    }
    unlock_mm(core, cpu, s, side);
    back_to_user(core, cpu, s);
}

/// Creates process `s` by a fork, its pages mapped, then returns to the
/// user thread `task` ran, if it ran one.
fn fork<E: Engine, P: Policy>(core: &E, p: &P, cpu: usize, s: u32, task: Task) {
    p.mm_init(MmId(s));
    core.pause();
    // The child becomes runnable under its runqueue's lock
    // (`wake_up_new_task`), whose release orders every store of the fork
    // before any CPU can switch to it: none waits in a store buffer after.
    core.drain_own(cpu);
    let r = core.machine_mut().fork(s, cpu);
    match r {
        Err(v) => core.violated(v),
        Ok(ok) => core.event_kind(cpu, 0x11_0000 + ok as u64, Kind::PageTable, || {
            if ok {
                format!("mm{s} created with its pages mapped")
            } else {
                format!("mm{s} created; frames ran out before all its pages were mapped")
            }
        }),
    }
    if let Task::User(r) = task {
        back_to_user(core, cpu, r);
    }
}

/// Returns CPU `cpu` to user mode in process `s` at the end of an operation.
fn back_to_user<E: Engine>(core: &E, cpu: usize, s: u32) {
    core.pause();
    set_task(core, cpu, Task::User(s), Mode::User);
}

#[inline(never)]
fn switch_idle<E: Engine, P: Policy>(core: &E, p: &P, cpu: usize) {
    let hw = core.hw(cpu);
    core.irq_disable(cpu);
    set_task(core, cpu, Task::Idle, Mode::Switching);
    if p.ticks() {
        p.tick(&hw, Tick::Schedule);
    }
    p.enter_lazy(&hw, Lazy::Idle);
    core.irq_enable(cpu);
    core.pause();
    switch_to(core, cpu);
    set_task(core, cpu, Task::Idle, Mode::Kernel);
}

/// Ends a context switch on CPU `cpu` as the kernel's `__switch_to` does. On
/// Linux arm64 that is `dsb(ish)`, which completes every invalidation the CPU
/// issued and has not completed yet ("Complete any pending TLB or cache
/// maintenance on this CPU in case the thread migrates to a different CPU",
/// arch/arm64/kernel/process.c); it is taken at the switch's last step, the
/// latest point (see `kernel::Pending`). In the arm mode it also drains the
/// store buffer (the root write did not, [`Memory::Arm`]), in a step after the
/// completions, as any `DSB` there may. Before 5108c67c376b (v3.10) there was
/// no such `DSB` ([`KernelBug::NoSwitchToDsb`]). FreeBSD's and x86's switches
/// complete nothing a policy did not complete itself.
fn switch_to<E: Engine>(core: &E, cpu: usize) {
    if !switch_completes(core.shape()) {
        return;
    }
    let (mut k, mut n) = (0, 0);
    core.machine_mut().complete(
        cpu,
        |_| Part::Whole,
        |_, removed, _| {
            k += 1;
            n += removed;
        },
    );
    if k > 0 {
        core.event_kind(cpu, 0x12_0000, Kind::Invalidate, || {
            format!("__switch_to's DSB ISH: {k} invalidation(s) complete, {n} {}", entries_removed(n))
        });
    }
    if core.shape().memory == Memory::Arm && core.has_buffered(cpu) {
        // A point of its own: the history says where this CPU stands.
        core.remember(cpu, 0x12_0001);
        core.pause();
        core.drain_own(cpu);
    }
}

/// Returns whether the kernel's `__switch_to` completes the switching CPU's
/// pending invalidations ([`switch_to`]): Linux arm64's, since 5108c67c376b.
fn switch_completes(sh: &crate::shape::Shape) -> bool {
    sh.arm64 && sh.linux && sh.bug != Some(KernelBug::NoSwitchToDsb)
}

/// Runs `flush`, a user-page flush the kernel makes where its thread may be
/// preempted (a `munmap`'s, a page-out's, a page table's unmap; not an
/// exit's, after which the CPU runs another address space, whose switch has
/// a barrier of its own): FreeBSD's `pmap_invalidate_*` under `PMAP_LOCK`, a
/// sleep mutex (arm64 issues `TLBI ..IS` and its `DSB ISH` unpinned). The
/// search may move the thread to another CPU before its `DSB ISH`
/// ([`Engine::preemptible`]); then this CPU has switched to another thread of
/// the process it runs ([`switch_after_move`]), and the policy's switch finds
/// the address space current (`pmap_activate_int`): that switch is what
/// completes what the thread left pending here, or not.
/// It is run after the flush returns: between its `DSB ISH` and its return
/// FreeBSD's flush executes an `ISB` only, which completes nothing.
///
/// Not offered the move: a kernel that pins the thread across its flushes
/// ([`Policy::flushes_pinned`]: FreeBSD arm64 before ASIDs); Linux arm64,
/// whose `__switch_to` issues `DSB ISH` ([`switch_to`]), so a moved thread
/// leaves nothing pending that the switch does not complete (offered before
/// that `DSB`, [`KernelBug::NoSwitchToDsb`]); x86, where the kernel pins the
/// CPU between `INVLPGB` and `TLBSYNC` (`get_cpu`), except across reclaim's
/// batch ([`flush_batch_preemptibly`]).
fn flush_preemptibly<E: Engine, P: Policy>(core: &E, p: &P, cpu: usize, flush: impl FnOnce()) {
    if !core.shape().arm64 || switch_completes(core.shape()) || p.flushes_pinned() {
        return flush();
    }
    core.preemptible(cpu, true);
    flush();
    if core.preemptible(cpu, false) {
        switch_after_move(core, p, cpu);
    }
}

/// Reclaim's deferred flush of `mms` (`try_to_unmap_flush`), run by the
/// thread that queued the pages once it has dropped their PTE locks. The
/// thread may be preempted before `arch_tlbbatch_flush` pins it (`get_cpu`)
/// and finish on another CPU; the search is offered that move where this CPU
/// holds invalidations the policy issued without waiting (the posted x86
/// targeted batch's `INVLPGB`s). Then this CPU first switches to its next
/// thread ([`switch_after_move`]: the policy's own switch, whose `tlbsync()`
/// is what waits for them), and the flush runs as the other CPU's: its
/// `TLBSYNC` completes none of this CPU's. It runs on this CPU's data for
/// that other CPU, so its local flush and its IPIs trade places, which
/// changes when a TLB is flushed, not which; and it reads this CPU's
/// `need_tlbsync`, which the switch has just cleared, as every switch clears
/// the flag of the CPU the thread resumes on. Not offered on arm64: Linux's
/// flush there is a `DSB ISH`, and `__switch_to`'s own ([`switch_to`])
/// completes whatever a moved thread left.
fn flush_batch_preemptibly<E: Engine, P: Policy>(core: &E, p: &P, cpu: usize, mms: &[MmId]) {
    let left = !core.shape().arm64 && core.machine().pending(cpu).iter().any(|q| q.broadcast);
    let moved = left && core.offer_move(cpu, "arch_tlbbatch_flush", || switch_after_move(core, p, cpu));
    core.machine_mut().enter_batch_flush(cpu);
    p.flush_batch(&core.hw(cpu), mms);
    let r = core.machine_mut().leave_batch_flush(cpu);
    if moved {
        core.preemptible(cpu, false);
    }
    if let Err(v) = r {
        core.violated(v);
    }
}

/// What CPU `cpu` does once the thread it ran has moved to another CPU: it
/// switches to another thread of the process it runs (idle: another kernel
/// thread) through the policy's own switch, which finds the address space
/// current, with interrupts off and the scheduler's tick as [`switch`] has
/// them, and ends it as the kernel's `__switch_to` does ([`switch_to`]).
fn switch_after_move<E: Engine, P: Policy>(core: &E, p: &P, cpu: usize) {
    let hw = core.hw(cpu);
    core.irq_disable(cpu);
    if p.ticks() {
        p.tick(&hw, Tick::Schedule);
    }
    let task = core.machine().sched().tasks[cpu];
    match task {
        Task::User(s) => {
            core.event(cpu, 0x12_0002, || format!("cpu{cpu} switches to another thread of mm{s}"));
            p.switch_mm(&hw, MmId(s));
        }
        Task::Idle => {
            core.event(cpu, 0x12_0003, || format!("cpu{cpu} switches to another kernel thread"));
            p.enter_lazy(&hw, Lazy::KernelThread);
        }
    }
    core.irq_enable(cpu);
    switch_to(core, cpu);
}

/// Frees frames after the flush that covers them returned.
fn free_frames<E: Engine>(core: &E, frames: &[u32]) {
    if !frames.is_empty() {
        core.machine_mut().release_frames(frames);
    }
}

/// Discharges `ids` after `flush` returned and reports what the oracle finds.
fn discharge<E: Engine>(core: &E, cpu: usize, ids: &[usize], flush: &'static str) {
    core.pause();
    for &id in ids {
        let r = core.machine_mut().discharge(id, flush);
        if let Err(v) = r {
            core.violated(v);
        }
    }
    let n = ids.len();
    core.event_kind(cpu, 0x12_0000, Kind::FlushDone, || format!("{flush} returned: {n} obligation(s) discharged"));
}

/// Ends an operation that kept the CPU's task: back to user mode if it runs a
/// process.
fn end_op<E: Engine>(core: &E, cpu: usize) {
    let task = core.machine().sched().tasks[cpu];
    match task {
        Task::User(s) => back_to_user(core, cpu, s),
        Task::Idle => {
            core.pause();
            set_task(core, cpu, Task::Idle, Mode::Kernel);
        }
    }
}

/// Clears every valid PTE of `s` for `change`; returns the obligations opened
/// and the frames to free once they are discharged.
fn clear_all<E: Engine>(core: &E, cpu: usize, s: u32, change: &'static str) -> (Vec<usize>, Vec<u32>) {
    let mut m = core.machine_mut();
    (0..m.consts().pages).filter_map(|pg| m.clear_pte(s, pg, change, cpu)).unzip()
}
