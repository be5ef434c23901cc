//! One execution: the CPUs as coroutines running kernel operations and the policy
//! code they call, one step at a time, with every choice made by a [`Chooser`].
//!
//! A *step* runs one CPU from where it was paused to its next preemption point:
//! every facade atomic operation (through the hooks of
//! `tlbkit_policy::sync::check`), every [`Hw`] call that acts on the machine, and
//! the start of every kernel operation. Draining one store from a CPU's store
//! buffer is a step of its own. After every step the hardware fills every TLB
//! from every reachable PTE and the oracle looks at every CPU in user mode.
//!
//! The choices are of two kinds ([`ChoiceKind`]): which step comes next, and which
//! kernel operation a CPU starts. The sequence of choices *is* the schedule: the
//! same sequence replays the same execution, event for event.

use crate::arena;
use crate::engine::Engine;
use crate::kernel::{describe, LockSide, Machine, Part, Pending, RunConstants, Violation};

/// [`Pending::key`]'s type.
type PendingKey = (u8, u64, u64, u64, u8);
use crate::search::{choices_buffer, Choice, ChoiceKind, Chooser, Foot, Outcome, Pick};
use crate::shape::{Completion, Memory, Shape};
use crate::trace::{entries_removed, Event, Kind, DRAINS, INTO_BUFFER, ISSUED};
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use std::cell::{Cell, Ref, RefCell, RefMut};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::ptr::NonNull;
use std::rc::Rc;
use tlbkit_policy::sync::check::{write_raw, Hooks, Width};
use tlbkit_policy::sync::{check, Ordering};
use tlbkit_policy::{
    Access, Barrier, CpuId, CpuMask, Defer, Domain, Fields, FlushTicket, Hw, MmId, Note, Owner, Phase, Policy, Root,
    Scope, Tlbi, Value,
};

/// Store-buffer addresses at or above this stand for a PTE-clearing store:
/// `PTE_STORE | slot << 8 | page`, the value being the version it clears.
const PTE_STORE: usize = usize::MAX << 32;

/// Returns the slot and page of a PTE-store address.
fn pte_store(addr: usize) -> Option<(u32, usize)> {
    (addr & PTE_STORE == PTE_STORE).then_some((((addr >> 8) & 0xff_ffff) as u32, addr & 0xff))
}

/// Forgets CPU `cpu`'s invalidation `key` in [`State::issued`] once it
/// completes (at its barrier, or before it), returning the event index of its
/// issue (the latest, if it was issued again).
fn forget_issued(issued: &mut Vec<(usize, PendingKey, usize)>, cpu: usize, key: PendingKey) -> Option<usize> {
    let at = issued.iter().rposition(|i| i.0 == cpu && i.1 == key).map(|i| issued[i].2);
    issued.retain(|i| !(i.0 == cpu && i.1 == key));
    at
}

/// Gives CPU `cpu`'s invalidation `key` in [`State::issued`] the key `to`,
/// when a barrier completed it on the issuer's TLB only.
fn rekey_issued(issued: &mut [(usize, PendingKey, usize)], cpu: usize, key: PendingKey, to: PendingKey) {
    issued.iter_mut().filter(|i| i.0 == cpu && i.1 == key).for_each(|i| i.1 = to);
}

/// The most steps one execution may take before it is reported as not making
/// progress.
pub const MAX_STEPS: usize = 20_000;

/// Why a CPU is not runnable.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Block {
    /// Runnable.
    No,
    /// Spinning until one of the addresses it read since its last spin is
    /// written again (marked `true` once a store to it became visible since the
    /// spin's first read of it), or, when it read none, until any store after
    /// store number `.1` becomes visible.
    Spin(Vec<(usize, bool)>, u64),
    /// Waiting for the handlers of its synchronous IPI.
    Sync,
    /// No operations left: waits for interrupts only.
    Idle,
    /// Sleeping on the `mmap_lock` of this slot, for this side (interrupts are
    /// taken meanwhile).
    MmLock(u32, crate::kernel::LockSide),
    /// Spinning on the PTE lock of this slot's page-table page, whose release by
    /// another CPU still waits in that CPU's store buffer behind its PTE clear
    /// (interrupts are taken meanwhile: `spin_lock` leaves them on).
    Ptl(u32),
}

/// An IPI handler whose lifetimes were erased (see [`erase`]).
type Handler = *const (dyn Fn(&CheckHw<'static>) + 'static);

/// An interrupt waiting to be taken.
#[derive(Clone, Copy)]
struct Irq {
    handler: Handler,
    from: usize,
    sync: bool,
    /// The sender's history when it sent the IPI: what the handler captured is a
    /// function of it, so it stands for the handler in the state (an asynchronous
    /// sender may have moved on by the time the handler runs).
    key: u64,
}

/// A CPU's execution state besides the machine's.
#[derive(Clone)]
struct Cpu {
    block: Block,
    irq_off: u32,
    in_handler: bool,
    /// While it runs an interrupt handler, where the code it interrupted
    /// stands: why it was not runnable (it waits so again after the
    /// handler), and the access it had paused before (it makes it at once
    /// after the handler, with no scheduling point between). Hashed: the
    /// interrupted code's locals live on in its history, these only here.
    interrupted: Option<(Block, Option<(usize, bool)>)>,
    pending: VecDeque<Irq>,
    buffer: Buffer,
    sync_out: usize,
    history: u64,
    /// Policy addresses read since the last spin, each once, with whether a
    /// store to it became visible since its first read: a spin wakes when any
    /// of them was written since, and what a later read of one saw is at
    /// least as new, so the first read decides alone (a read again is left
    /// out of the list and the hash).
    reads: Vec<(usize, bool)>,
    /// The order of those reads, repeats included, as two running hashes: of
    /// the addresses (what a spin compares with its loop's [`Cpu::anchor`])
    /// and of their keys (what the state hash holds, the same on every thread).
    trail: (u64, u64),
    /// The shared access this CPU performs when it next steps: `(address, writes)`.
    next: Option<(usize, bool)>,
    /// In a spin loop: the history at its first wait and the [`Cpu::trail`] of
    /// the reads each iteration makes. Every later wait of the same loop resets
    /// the history to it, since an iteration that ends in a wait leaves no
    /// locals behind.
    anchor: Option<(u64, (u64, u64))>,
    /// Kernel operations started.
    ops_done: usize,
    /// The spin locks this CPU holds, by their words' offsets in the arena
    /// ([`NO_LOCK`] for none): what makes an access to data a lock protects
    /// local ([`Owner::Lock`]).
    held: [u32; MAX_HELD],
    /// Whether the thread it runs may be preempted before its next `DSB ISH`
    /// (or where the harness offers it) and finish on another CPU
    /// ([`Engine::preemptible`]). Not hashed: it
    /// follows from where the CPU's code is, which its history stands for (a
    /// move is a choice, recorded as an event).
    preempt: Preempt,
}

/// Where a CPU's thread stands towards a move to another CPU before its
/// barrier ([`Core::move_thread`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Preempt {
    /// It cannot be preempted here (or the kernel's switch completes its
    /// invalidations anyway).
    No,
    /// It may be preempted before its next `DSB ISH`.
    May,
    /// It was: its barriers run on another CPU until the flush ends.
    Moved,
}

/// The most spin locks one CPU holds at once.
const MAX_HELD: usize = 4;

/// An empty entry of [`Cpu::held`].
const NO_LOCK: u32 = u32::MAX;

/// The machine with a note of whether it may have changed since the core
/// last hashed it ([`Core::refresh_machine`]): every mutable borrow sets it,
/// so a step that only reads the machine (most steps of policy code) leaves
/// its hash as it was.
#[derive(Clone, Default)]
struct Tracked {
    m: Machine,
    changed: bool,
}

/// A map kept as a vector sorted by key (builds with debug assertions: the
/// policy's fields touched, a few dozen). Iterates in key order, as a
/// `BTreeMap` does.
#[derive(Clone, Debug)]
#[cfg(debug_assertions)]
struct SortedMap<K, V>(Vec<(K, V)>);

/// The mutable state of an execution. (Its `Default` is an empty
/// placeholder.)
#[derive(Clone, Default)]
struct State {
    m: Tracked,
    cpus: Vec<Cpu>,
    /// How many stores have become visible.
    writes: u64,
    violation: Option<Violation>,
    events: Vec<Event>,
    /// While recording: per invalidation still pending, its CPU, its
    /// [`Pending::key`] and its event's index, so that one completed in the
    /// step that issued it reads in the trace as it takes effect.
    issued: Vec<(usize, PendingKey, usize)>,
    step: usize,
    /// The policy's memory as the state hash takes it: the XOR, over every
    /// store that became visible to a facade atomic of the policy, of
    /// [`cell_hash`] of the field before and after ([`Core::wrote`]). The
    /// XORs of a field's stores telescope to its value when built against its
    /// value now, so this is a function of the fields' values alone (which
    /// ones were touched, and in what order, drop out), updated in constant
    /// time at each store rather than read field by field at each hash.
    mem: u128,
    /// Builds with debug assertions: the facade atomics of the policy touched
    /// so far, with their width and value at the first touch, to check
    /// [`State::mem`] against at every state hash.
    #[cfg(debug_assertions)]
    shared: SortedMap<usize, (Width, u64)>,
    /// Under `--memory arm`: overwritten values some CPU may still read.
    stale: Stale,
}

/// An execution in progress: what the hooks and the CPU coroutines share.
struct Core {
    st: RefCell<State>,
    yielders: Vec<Cell<*const Yielder<(), ()>>>,
    current: Cell<usize>,
    /// Per CPU: an address on its coroutine's stack at its last pause, a
    /// little above the stack pointer it is suspended at (a checkpoint saves
    /// the stack from there up, see [`checkpoint`]).
    low: Vec<Cell<usize>>,
    /// The execution's chooser, set per execution by [`Core::lend`] (a
    /// checkpointed core outlives it) and reached only through
    /// [`Core::with_chooser`]; `None` before the first `lend`, and while
    /// `with_chooser` holds it.
    chooser: Cell<Option<NonNull<dyn Chooser>>>,
    choices: RefCell<Vec<Choice>>,
    pruned: Cell<bool>,
    shape: Shape,
    record: bool,
    base: usize,
    mark: usize,
    /// When recording: the policy's names for its fields, by address.
    names: BTreeMap<usize, (String, Value)>,
    /// When recording: policy addresses accessed without a name.
    unnamed: RefCell<BTreeSet<usize>>,
    /// ASID rollovers noted so far (a measure of what the run reached, kept out
    /// of the state: it does not change what can happen next).
    rollovers: Cell<u32>,
    /// CPUs that started a cross-CPU invalidation so far (a mask; out of the state too).
    initiators: Cell<u64>,
    /// The state hash's buffer, kept between hashes ([`StateBytes`]).
    bytes: RefCell<Vec<u8>>,
    /// The 128-bit XXH3 hash of the machine's serialization, which the state
    /// hash and [`Core::others`] begin with: written once per scheduling
    /// point ([`Core::refresh_machine`]) for both, since serializing and
    /// hashing the machine is most of either.
    machine_hash: Cell<u128>,
    /// The footprint of the step running, when the chooser wants it.
    foot: RefCell<Option<Foot>>,
    /// Feeds the policy's locked data ([`Policy::hash_locked`]) to a hasher.
    locked: Cell<LockedData>,
    /// Who may access each byte of the policy's memory, by offset from
    /// `base`, as the policy declares it ([`Policy::name_fields`]).
    owners: Rc<[Option<Own>]>,
}

/// An [`Owner`], its lock named by the offset of its word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Own {
    Cpu { cpu: usize, others_read: bool },
    Lock { lock: u32 },
    Reader { cpu: usize },
}

/// How an access touches a field, as [`Core::check_owner`] checks it
/// against the policy's declaration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Touch {
    /// A plain load (`LDR`): only a declared reader's may read an older value.
    PlainLoad,
    /// A load-acquire.
    Load,
    /// A store or a read-modify-write.
    Write,
}

/// Collects a policy's [`Owner`] declarations by offset, below `mark`.
struct OwnerTable<'a> {
    base: usize,
    mark: usize,
    declared: &'a mut Vec<(usize, Own)>,
}

/// A way to feed a policy's locked data to a hasher, its lifetime erased.
type LockedData = *const (dyn Fn(&mut dyn Hasher) + 'static);

/// The state hash's hasher: every write appends its bytes to a buffer and
/// [`StateBytes::wide`] hashes the buffer in one pass with XXH3-128 (the
/// `Hasher` trait's `finish`, XXH3-64, only for a step's footprint, which
/// needs no more: [`Core::others`]). A state is
/// hundreds of small fields, and a streaming hasher (SipHash) pays its rounds
/// per field: that was three quarters of an exhaustive search's time. XXH3
/// passes SMHasher, which the collision bound in the crate docs assumes.
struct StateBytes<'a>(&'a mut Vec<u8>);

/// Collects a policy's field names ([`Policy::name_fields`]).
struct NameTable<'a>(&'a mut BTreeMap<usize, (String, Value)>);

thread_local! {
    static CURRENT: Cell<*const Core> = const { Cell::new(std::ptr::null()) };
}

/// Runs `f` on the execution the calling thread is stepping, if any.
fn current() -> Option<&'static Core> {
    let p = CURRENT.with(|c| c.get());
    // SAFETY: CURRENT points at a Core only while `run` holds it alive and steps it.
    unsafe { p.as_ref() }
}

fn mix(h: u64, x: u64) -> u64 {
    (h ^ x).wrapping_mul(0x100_0000_01b3).rotate_left(29) ^ 0x9e37_79b9_7f4a_7c15
}

impl Core {
    fn cpu(&self) -> usize {
        self.current.get()
    }

    /// As [`Core::event`]; `in_spin` marks what a spin loop's iteration may do
    /// (a load, a failed compare-exchange, a fence), anything else ends the loop.
    fn event_in(&self, cpu: usize, key: u64, in_spin: bool, text: impl FnOnce() -> (Kind, String)) {
        let mut st = self.st.borrow_mut();
        st.cpus[cpu].history = mix(st.cpus[cpu].history, key);
        if !in_spin {
            st.cpus[cpu].anchor = None;
        }
        if self.record {
            let step = st.step;
            let (kind, mut text) = text();
            // A compiled policy's event says where in the user's file it was made.
            if let Some(at) = arena::outside(tlbkit_c::site::caller) {
                text.push_str(&format!(" ({at})"));
            }
            st.events.push(Event { cpu: Some(cpu), drain: false, step, text, kind });
        }
    }

    /// Keys a memory address for hashing.
    fn addr_key(&self, addr: usize) -> u64 {
        if pte_store(addr).is_some() {
            return addr as u64;
        }
        if arena::below(addr, self.mark) {
            (addr - self.base) as u64
        } else {
            u64::MAX
        }
    }

    /// Names a memory address for traces: the policy's name for the field, or
    /// the offset form for one it did not name (noted in [`Outcome::unnamed`]).
    fn addr_name(&self, addr: usize) -> String {
        if let Some((slot, page)) = pte_store(addr) {
            return format!("PTE of {:#x} in mm{slot}", crate::kernel::va_of(page));
        }
        if let Some((name, _)) = self.names.get(&addr) {
            return name.clone();
        }
        if arena::below(addr, self.mark) {
            let off = addr - self.base;
            self.unnamed.borrow_mut().insert(off);
            format!("[policy+{off:#x}]")
        } else {
            "[local]".to_string()
        }
    }

    /// Shows a value of the field at `addr` as the policy reads it (hex for a
    /// field without a name).
    fn show(&self, addr: usize, v: u64) -> String {
        match self.names.get(&addr) {
            Some((_, value)) => value.show(v).to_string(),
            None => format!("{v:#x}"),
        }
    }

    /// Returns the trace of the store of `v` to `addr` leaving a store buffer.
    fn drained(&self, addr: usize, v: u64) -> String {
        format!("{DRAINS}{} = {}", self.addr_name(addr), self.show(addr, v))
    }

    /// Returns the kind of an access `how` to the field at `addr` (a PTE
    /// store drained is a page-table change).
    fn access_kind(&self, addr: usize, how: Rw) -> Kind {
        if pte_store(addr).is_some() {
            return Kind::PageTable;
        }
        let lock = matches!(self.names.get(&addr), Some((_, Value::Lock)));
        let (read, write) = match how {
            Rw::Read => (true, false),
            Rw::Write => (false, true),
            Rw::ReadWrite => (true, true),
        };
        Kind::Access { field: self.addr_name(addr), read, write, lock }
    }

    /// Pauses before the current CPU's access to policy memory at `addr`,
    /// announcing it to the scheduler.
    fn pause_for(&self, addr: usize, write: bool) {
        let cpu = self.cpu();
        self.st.borrow_mut().cpus[cpu].next = Some((addr, write));
        self.pause();
        self.st.borrow_mut().cpus[cpu].next = None;
    }

    /// Returns whether CPU `c`'s access to the policy field at offset `k`
    /// (`write`: it may store) is one no other CPU can race with: to a field
    /// declared `c`'s own (only read, where others read it too), or to data
    /// a lock `c` holds protects.
    fn local_access(&self, c: &Cpu, cpu: usize, k: usize, write: bool) -> bool {
        match self.owners.get(k).copied().flatten() {
            Some(Own::Cpu { cpu: o, others_read }) => o == cpu && !(write && others_read),
            Some(Own::Lock { lock }) => c.held.contains(&lock),
            Some(Own::Reader { .. }) | None => false,
        }
    }

    /// Panics (a `no_policy_panic` violation) if the current CPU's access to
    /// `addr` breaks what the policy declared of the field
    /// ([`Fields::owner`]): the reduction relies on the declarations, so
    /// every access checks them.
    fn check_owner(&self, cpu: usize, addr: usize, how: Touch) {
        let Some(own) = self.owners.get(addr - self.base).copied().flatten() else { return };
        let ok = match own {
            Own::Cpu { cpu: o, others_read } => o == cpu || (how != Touch::Write && others_read),
            Own::Lock { lock } => self.st.borrow().cpus[cpu].held.contains(&lock),
            Own::Reader { cpu: o } => o == cpu || how != Touch::PlainLoad,
        };
        if !ok {
            // The names table notes unnamed addresses: never in the arena.
            let msg = arena::outside(|| {
                let what = match how {
                    Touch::PlainLoad => "read (a plain load)",
                    Touch::Load => "read",
                    Touch::Write => "wrote",
                };
                let declared = match own {
                    Own::Cpu { cpu: o, others_read: true } => format!("only cpu{o} writes it"),
                    Own::Cpu { cpu: o, others_read: false } => format!("only cpu{o} touches it"),
                    Own::Lock { lock } => {
                        format!("only a holder of {} touches it", self.addr_name(self.base + lock as usize))
                    }
                    Own::Reader { cpu: o } => format!("only cpu{o} reads it with a plain load"),
                };
                format!(
                    "cpu{cpu} {what} {} against the policy's declaration in name_fields ({declared}): \
                     fix the declaration or the access",
                    self.addr_name(addr)
                )
            });
            std::panic::panic_any(msg);
        }
    }

    /// Returns the CPU among `runs` whose next step is *local*, if any: it is
    /// paused before an access to a policy field that no other CPU can race
    /// with ([`Core::local_access`]), with interrupts off (so the step is
    /// that access and what follows it up to the next pause, not a handler)
    /// and an empty store buffer. Such a step reads and writes nothing
    /// another CPU writes or reads, now or later (what the declarations say,
    /// checked at every access), so it commutes with every step of the other
    /// CPUs and neither enables nor disables one: exploring it alone is
    /// enough, if it turns out to do nothing else ([`Core::is_local`]).
    fn local_cpu(&self, runs: &[usize]) -> Option<usize> {
        if self.owners.is_empty() {
            return None;
        }
        let st = self.st.borrow();
        // The lowest such CPU, whichever ran last: the choice is the state's.
        runs.iter()
            .copied()
            .filter(|&c| {
                let s = &st.cpus[c];
                matches!(s.block, Block::No)
                    && (s.irq_off > 0 || s.in_handler)
                    && s.buffer.is_empty()
                    && s.next.is_some_and(|(a, w)| self.local_access(s, c, a - self.base, w))
            })
            .min()
    }

    /// Returns whether a step of CPU `cpu` with footprint `foot` was local:
    /// not global, and every field it read or wrote local to it.
    fn is_local(&self, cpu: usize, foot: &Foot) -> bool {
        let st = self.st.borrow();
        let c = &st.cpus[cpu];
        !foot.global
            && !foot.reads_all
            && foot.reads.iter().all(|k| self.local_access(c, cpu, k, false))
            && foot.writes.iter().all(|k| self.local_access(c, cpu, k, true))
    }

    /// Returns whether `addr` is policy memory (shared); anything else a policy
    /// touches through the facade is a temporary of the calling CPU.
    fn shared_addr(&self, addr: usize) -> bool {
        arena::below(addr, self.mark)
    }

    /// Blocks the current CPU for `why` until the scheduler finds it runnable.
    fn block(&self, why: Block) {
        let cpu = self.cpu();
        self.st.borrow_mut().cpus[cpu].block = why;
        self.pause();
        self.st.borrow_mut().cpus[cpu].block = Block::No;
    }

    /// Makes the stores of CPU `cpu`'s buffer in `leaving` visible, oldest
    /// first, within the running step (all of them for [`Leaving::MAX`], however
    /// many there are).
    fn drain_within(&self, cpu: usize, mut leaving: Leaving) {
        loop {
            let e = self.st.borrow_mut().cpus[cpu].buffer.take_oldest(&mut leaving);
            let Some(Stored { addr, w, v, .. }) = e else { return };
            self.drain_one(cpu, addr, w, v);
            let k = self.addr_key(addr);
            self.event_in(cpu, mix(0x3_0000, k ^ arena::position_free(v)), false, || {
                (self.access_kind(addr, Rw::Write), self.drained(addr, v))
            });
        }
    }

    /// Makes one buffered store of CPU `cpu` visible.
    fn drain_one(&self, cpu: usize, addr: usize, w: Width, v: u64) {
        if let Some((slot, page)) = pte_store(addr) {
            self.st.borrow_mut().m.drain_pte(slot, page, v as u32);
            return;
        }
        // SAFETY: the address came from a live facade atomic of width `w`; the
        // policy outlives the execution's steps.
        self.store(cpu, addr, w, || unsafe { write_raw(addr, w, v) });
        self.touch(addr, true);
    }

    /// Adds a policy field to the running step's footprint, if one is kept.
    fn touch(&self, addr: usize, write: bool) {
        if let Some(f) = self.foot.borrow_mut().as_mut() {
            let k = addr.wrapping_sub(self.base);
            let v = if write { &mut f.writes } else { &mut f.reads };
            if !v.insert(k) {
                f.global = true;
            }
        }
    }

    /// Marks the running step's footprint global, if one is kept.
    fn touch_global(&self) {
        if let Some(f) = self.foot.borrow_mut().as_mut() {
            f.global = true;
        }
    }

    /// Returns a hash of what a step of CPU `cpu` must leave alone to be
    /// independent of other CPUs' steps ([`Foot`]): the machine and every other
    /// CPU's execution state, raw (write versions as they are).
    ///
    /// The machine's part is the hash of the last [`Core::refresh_machine`]:
    /// call it first whenever the machine may have changed.
    fn others(&self, cpu: usize) -> u64 {
        let st = self.st.borrow();
        // Compared only with the same CPU's before and after one step: 64
        // bits are plenty (a false match per 2^64 steps).
        self.hash_bytes(
            |h| h.finish(),
            |h| {
                self.machine_hash.get().hash(h);
                for (d, c) in st.cpus.iter().enumerate().filter(|&(d, _)| d != cpu) {
                    d.hash(h);
                    // A spin's flags are left out: a store marks the fields it
                    // wrote on every CPU spinning on them, and is dependent on those
                    // CPUs' steps through the field itself (they read it).
                    match &c.block {
                        Block::Spin(reads, w) => {
                            std::mem::discriminant(&c.block).hash(h);
                            reads.iter().for_each(|r| r.0.hash(h));
                            w.hash(h);
                        }
                        other => other.hash(h),
                    }
                    (c.irq_off, c.in_handler, c.sync_out, c.history, c.ops_done, c.next).hash(h);
                    c.interrupted.hash(h);
                    c.pending.iter().for_each(|i| (i.from, i.sync, i.key).hash(h));
                    c.buffer.iter().for_each(|s| {
                        (s.addr, s.w, s.v).hash(h);
                        if s.release {
                            true.hash(h);
                        }
                    });
                }
            },
        )
    }

    /// Serializes and hashes the machine, as the state hash and
    /// [`Core::others`] begin with it.
    fn refresh_machine(&self) {
        let mut st = self.st.borrow_mut();
        let rename = self.with_chooser(|c| c.renames());
        self.machine_hash.set(self.hash_bytes(|h| h.wide(), |h| st.m.hash_as(h, rename)));
        st.m.changed = false;
    }

    /// Refreshes the machine's hash if the machine may have changed since.
    fn fresh_machine(&self) {
        if self.st.borrow().m.changed {
            self.refresh_machine();
        }
    }

    /// Returns the hash `finish` makes ([`StateBytes::wide`] or the 64-bit
    /// `Hasher::finish`) of what `write` writes, in the core's buffer.
    fn hash_bytes<T>(&self, finish: impl FnOnce(&StateBytes<'_>) -> T, write: impl FnOnce(&mut StateBytes<'_>)) -> T {
        let mut bytes = self.bytes.borrow_mut();
        bytes.clear();
        let mut h = StateBytes(&mut bytes);
        write(&mut h);
        finish(&h)
    }

    /// Notes in the state that a store of CPU `cpu` to the policy's facade
    /// atomic at `addr`, from `old` to `new`, became visible.
    fn wrote(&self, cpu: usize, addr: usize, old: u64, new: u64) {
        let mut st = self.st.borrow_mut();
        st.wrote(addr, (addr - self.base) as u64, old, new);
        if self.shape.memory == Memory::Arm {
            let readers = self.plain_readers(addr) & ((1u32 << self.shape.cpus) - 1) as u16;
            st.stale.overwrote(readers, cpu, addr, old, new);
        }
    }

    /// Performs `write`, a store of CPU `cpu` to the policy's facade atomic
    /// of width `w` at `addr` that becomes visible now, and notes it
    /// ([`Core::wrote`]).
    fn store(&self, cpu: usize, addr: usize, w: Width, write: impl FnOnce()) {
        // SAFETY: a live facade atomic of width `w` (policy memory) before
        // and after `write`.
        let old = unsafe { read_raw(addr, w) };
        write();
        // SAFETY: as above.
        let new = unsafe { read_raw(addr, w) };
        self.wrote(cpu, addr, old, new);
    }

    /// Builds with debug assertions: notes a facade atomic of the policy as
    /// touched, with its value now, for the check of [`State::mem`] (release
    /// builds keep nothing).
    fn note_shared(&self, addr: usize, w: Width) {
        #[cfg(debug_assertions)]
        if arena::below(addr, self.mark) {
            // SAFETY: a live facade atomic of width `w` (policy memory).
            let v = unsafe { read_raw(addr, w) };
            self.st.borrow_mut().shared.or_insert(addr, (w, v));
        }
        #[cfg(not(debug_assertions))]
        let _ = (addr, w);
    }

    /// Returns whether CPU `c` may take the PTE lock of `slot` now: no other
    /// CPU holds it across steps ([`Machine::ptl_holder`]) and none has a store
    /// to one of its PTEs still buffered (made before its release).
    fn ptl_free(st: &State, c: usize, slot: u32) -> bool {
        st.m.ptl_holder(slot).is_none_or(|h| h as usize == c) && !Self::pte_store_pending(st, c, slot)
    }

    /// Returns whether a CPU other than `c` still buffers a PTE store of `slot`.
    fn pte_store_pending(st: &State, c: usize, slot: u32) -> bool {
        st.cpus
            .iter()
            .enumerate()
            .any(|(o, s)| o != c && s.buffer.iter().any(|b| pte_store(b.addr).is_some_and(|(sl, _)| sl == slot)))
    }

    /// Returns whether CPU `c` can take a step.
    fn runnable(st: &State, c: usize) -> bool {
        let s = &st.cpus[c];
        let irq = s.irq_off == 0 && !s.in_handler && !s.pending.is_empty();
        match &s.block {
            Block::No => true,
            Block::Spin(reads, e) if reads.is_empty() => st.writes > *e || irq,
            Block::Spin(reads, _) => irq || reads.iter().any(|r| r.1),
            Block::Sync => s.sync_out == 0 || irq,
            Block::Idle => irq,
            Block::MmLock(s, side) => irq || st.m.can_lock_mm(*s, *side),
            Block::Ptl(slot) => irq || Self::ptl_free(st, c, *slot),
        }
    }

    /// Makes a choice among `labels`, recording it.
    fn choose(&self, point: ChoiceKind, labels: &[u32], state: u128) -> Option<usize> {
        let n = labels.len();
        // A step that chooses an operation is not one transition; one that
        // chooses which value a load reads is one for each option, and its
        // footprint is theirs together (`Chooser::tracks_step`).
        if point != ChoiceKind::Sched && point != ChoiceKind::Read {
            self.touch_global();
        }
        // Every scheduling point reaches the chooser (a search may prune at any state,
        // even one with a single way on); an operation choice only when there is one.
        if n == 1 && point == ChoiceKind::Op {
            return Some(0);
        }
        // The chooser's memory outlives the execution: never in its arena (an
        // operation's choice is made from inside a CPU's coroutine).
        arena::outside(|| {
            match self.with_chooser(|c| c.choose(point, labels, state)) {
                Pick::Take(i) => {
                    debug_assert!(i < n);
                    // The choices go to the outcome, which outlives the execution:
                    // never in its arena either.
                    self.choices.borrow_mut().push(Choice { point, n: n as u32, taken: i as u32 });
                    Some(i)
                }
                Pick::Prune => {
                    self.pruned.set(true);
                    None
                }
            }
        })
    }

    /// Returns the hash of the whole state. The machine's part is the hash of
    /// the last [`Core::refresh_machine`]: call it first.
    fn state_hash(&self) -> u128 {
        let st = self.st.borrow();
        self.hash_bytes(
            |h| h.wide(),
            |h| {
                self.machine_hash.get().hash(h);
                for c in &st.cpus {
                    c.hash_keyed(h, |a| self.addr_key(a), |w| st.writes > w);
                }
                #[cfg(debug_assertions)]
                {
                    let mem = st.shared.iter().fold(0, |m, (&addr, &(w, first))| {
                        let k = (addr - self.base) as u64;
                        // SAFETY: a live facade atomic of width `w` (policy memory).
                        let now = unsafe { read_raw(addr, w) };
                        m ^ cell_hash(k, arena::position_free(first)) ^ cell_hash(k, arena::position_free(now))
                    });
                    assert_eq!(mem, st.mem, "a store to the policy's memory went past the checker's hooks");
                }
                st.mem.hash(h);
                // Only `--memory arm` keeps overwritten values: no other state's
                // hash has their bytes.
                for o in st.stale.olds() {
                    (self.addr_key(o.addr), arena::position_free(o.v), o.readers).hash(h);
                }
                if st.stale.resting() != 0 {
                    st.stale.resting().hash(h);
                }
                // SAFETY: the policy outlives the core; no CPU runs during a hash.
                unsafe { (*self.locked.get())(h) };
            },
        )
    }
}

impl Engine for Core {
    type Hw<'a> = CheckHw<'a>;

    fn hw(&self, cpu: usize) -> CheckHw<'_> {
        CheckHw { core: self, cpu }
    }

    fn shape(&self) -> &Shape {
        &self.shape
    }

    fn machine(&self) -> Ref<'_, Machine> {
        Ref::map(self.st.borrow(), |st| &*st.m)
    }

    fn machine_mut(&self) -> RefMut<'_, Machine> {
        // Through `Tracked`'s `DerefMut`, which notes the machine changed.
        RefMut::map(self.st.borrow_mut(), |st| &mut *st.m)
    }

    fn pause(&self) {
        let cpu = self.cpu();
        let y = self.yielders[cpu].get();
        let here = 0u8;
        self.low[cpu].set(std::hint::black_box(&here) as *const u8 as usize);
        // SAFETY: set by this CPU's coroutine at its start; valid while it runs.
        unsafe { (*y).suspend(()) };
        self.take_interrupts(cpu);
    }

    fn event(&self, cpu: usize, key: u64, text: impl FnOnce() -> String) {
        self.event_in(cpu, key, false, || (Kind::Other, text()));
    }

    fn event_kind(&self, cpu: usize, key: u64, kind: Kind, text: impl FnOnce() -> String) {
        self.event_in(cpu, key, false, || (kind, text()));
    }

    fn remember(&self, cpu: usize, key: u64) {
        let mut st = self.st.borrow_mut();
        st.cpus[cpu].history = mix(st.cpus[cpu].history, key);
        st.cpus[cpu].anchor = None;
    }

    fn violated(&self, v: Violation) {
        self.st.borrow_mut().violation.get_or_insert(v);
    }

    fn choose_op(&self, labels: &[u32]) -> Option<usize> {
        self.choose(ChoiceKind::Op, labels, 0)
    }

    fn choose_kernel_op(&self, n: usize, words: &dyn Fn(usize) -> String) -> Option<usize> {
        if !self.with_chooser(|c| c.scripted()) {
            let labels: Vec<u32> = (0..n as u32).collect();
            return self.choose(ChoiceKind::Op, &labels, 0);
        }
        let cpu = self.cpu();
        // A script's strings are made in a CPU's coroutine: never in the arena.
        let pick = arena::outside(|| {
            let offered: Vec<String> = (0..n).map(words).collect();
            self.with_chooser(|c| c.script_op(cpu, &offered))
        });
        match pick {
            Pick::Take(i) => {
                self.touch_global();
                // Recorded as `choose` records it: only a choice of two or more.
                if n > 1 {
                    arena::outside(|| {
                        self.choices.borrow_mut().push(Choice { point: ChoiceKind::Op, n: n as u32, taken: i as u32 })
                    });
                }
                Some(i)
            }
            Pick::Prune => {
                self.pruned.set(true);
                None
            }
        }
    }

    fn op_boundary(&self, cpu: usize) {
        // Before any operation, while an execution starts, there is nothing to tell.
        arena::outside(|| self.with_lent_chooser(|c| c.op_boundary(cpu)));
    }

    fn idle(&self) -> ! {
        loop {
            // It loads nothing before the interrupt it waits for.
            self.rest(self.cpu());
            self.block(Block::Idle);
        }
    }

    fn wait_mm_lock(&self, slot: u32, side: LockSide) {
        self.block(Block::MmLock(slot, side));
    }

    fn pte_lock(&self, slot: u32) {
        let cpu = self.cpu();
        self.drain_own(cpu);
        loop {
            if Self::ptl_free(&self.st.borrow(), cpu, slot) {
                return;
            }
            self.block(Block::Ptl(slot));
        }
    }

    fn drain_own(&self, cpu: usize) {
        self.drain_within(cpu, Leaving::MAX);
    }

    fn has_buffered(&self, cpu: usize) -> bool {
        !self.st.borrow().cpus[cpu].buffer.is_empty()
    }

    fn buffer_pte_clear(&self, slot: u32, page: usize, ver: u32) {
        let cpu = self.cpu();
        let addr = PTE_STORE | (slot as usize) << 8 | page;
        self.st.borrow_mut().cpus[cpu].buffer.push(Stored { addr, w: Width::W64, v: ver as u64, release: false });
    }

    fn ops_done(&self, cpu: usize) -> usize {
        self.st.borrow().cpus[cpu].ops_done
    }

    fn forget_locals(&self, cpu: usize) {
        // Between operations: it loads nothing before the next one starts.
        self.rest(cpu);
        let mut st = self.st.borrow_mut();
        let c = &mut st.cpus[cpu];
        c.history = 0;
        c.forget_reads();
        c.anchor = None;
    }

    fn count_op(&self, cpu: usize) {
        // An operation starts bound to the latest value of every location
        // (`stale`: a bound of the model, not an Armv8 barrier).
        self.catch_up(cpu);
        self.st.borrow_mut().cpus[cpu].ops_done += 1;
    }

    fn preemptible(&self, cpu: usize, on: bool) -> bool {
        let c = &mut self.st.borrow_mut().cpus[cpu];
        let moved = c.preempt == Preempt::Moved;
        c.preempt = if on { Preempt::May } else { Preempt::No };
        moved
    }

    fn offer_move(&self, cpu: usize, what: &'static str, meanwhile: impl FnOnce()) -> bool {
        self.move_thread(cpu, what, meanwhile)
    }

    fn irq_disable(&self, cpu: usize) {
        self.st.borrow_mut().cpus[cpu].irq_off += 1;
    }

    fn irq_enable(&self, cpu: usize) {
        self.st.borrow_mut().cpus[cpu].irq_off -= 1;
    }
}

/// The [`Hw`] of one checked CPU.
pub(crate) struct CheckHw<'a> {
    core: &'a Core,
    cpu: usize,
}

mod buffer;
pub mod checkpoint;
mod drive;
mod hooks;
mod hw;
mod interrupts;
mod stale;
mod state;
use buffer::{Buffer, Leaving, Stored};
pub use checkpoint::{run_from, steps_run, Checkpoints};
pub use drive::run;
use drive::*;
use hooks::*;
use stale::Stale;
use state::*;
mod gone_wrong;
pub(crate) use gone_wrong::guard_policy_code;

/// How an access used a field, for its event's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rw {
    /// A load.
    Read,
    /// A store (or a store leaving a store buffer).
    Write,
    /// A read-modify-write that changed the value.
    ReadWrite,
}
