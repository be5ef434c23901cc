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
//! The choices are of two kinds ([`Point`]): which step comes next, and which
//! kernel operation a CPU starts. The sequence of choices *is* the schedule: the
//! same sequence replays the same execution, event for event.

use crate::arena;
use crate::engine::Engine;
use crate::kernel::{describe, LockSide, Machine, Pending, Violation};

/// [`Pending::key`]'s type.
type PendingKey = (u8, u64, u64, u64, bool);
use crate::search::{choices_buffer, Choice, Chooser, Foot, Outcome, Pick, Point};
use crate::shape::{Memory, Shape};
use crate::trace::{Event, Kind, DRAINS, INTO_BUFFER, ISSUED};
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use std::cell::{Cell, Ref, RefCell, RefMut};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::ptr::NonNull;
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
    pending: VecDeque<Irq>,
    buffer: VecDeque<(usize, Width, u64)>,
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
}

/// The most spin locks one CPU holds at once.
const MAX_HELD: usize = 4;

/// An empty entry of [`Cpu::held`].
const NO_LOCK: u32 = u32::MAX;

impl Cpu {
    /// Hashes the CPU's state with every policy address it holds keyed by
    /// `key` (its offset in the arena, see [`Core::addr_key`]): the same state
    /// hashes the same on every thread, whose arenas lie at different addresses.
    ///
    /// Of the stores made since a read, what decides the future is whether
    /// there was one (a spin wakes or not), not how many: `any_since` says
    /// whether a store after store number `w` became visible.
    fn hash_keyed<H: Hasher>(&self, h: &mut H, key: impl Fn(usize) -> u64, any_since: impl Fn(u64) -> bool) {
        match &self.block {
            Block::Spin(reads, w) => {
                1u8.hash(h);
                reads.iter().for_each(|&(a, written)| (key(a), written).hash(h));
                if reads.is_empty() {
                    any_since(*w).hash(h);
                }
            }
            other => {
                std::mem::discriminant(other).hash(h);
                match other {
                    Block::MmLock(slot, side) => (slot, side).hash(h),
                    Block::Ptl(slot) => slot.hash(h),
                    _ => {}
                }
            }
        }
        self.irq_off.hash(h);
        self.in_handler.hash(h);
        for i in &self.pending {
            (i.from, i.sync, i.key).hash(h);
        }
        self.buffer.iter().for_each(|&(a, w, v)| (key(a), w, v).hash(h));
        // What it has left to do: two CPUs that swapped their operations can
        // reach the same machine with different budgets, and different futures.
        (self.sync_out, self.history, self.ops_done, self.held).hash(h);
        self.reads.iter().for_each(|&(a, written)| (key(a), written).hash(h));
        self.trail.1.hash(h);
        self.next.map(|(a, w)| (key(a), w)).hash(h);
        // The spin-loop anchor decides the history after the loop's next wait:
        // leaving it out would let the order of the search decide which
        // histories (and so which states) it meets.
        if let Some((hist, trail)) = &self.anchor {
            (hist, trail.1).hash(h);
        }
    }

    /// Forgets the reads since the last spin (a spin, or an operation's end).
    fn forget_reads(&mut self) {
        self.reads.clear();
        self.trail = (0, 0);
    }
}

/// The machine with a note of whether it may have changed since the core
/// last hashed it ([`Core::refresh_machine`]): every mutable borrow sets it,
/// so a step that only reads the machine (most steps of policy code) leaves
/// its hash as it was.
#[derive(Clone, Default)]
struct Tracked {
    m: Machine,
    changed: bool,
}

impl std::ops::Deref for Tracked {
    type Target = Machine;
    fn deref(&self) -> &Machine {
        &self.m
    }
}

impl std::ops::DerefMut for Tracked {
    fn deref_mut(&mut self) -> &mut Machine {
        self.changed = true;
        &mut self.m
    }
}

/// A map kept as a vector sorted by key (builds with debug assertions: the
/// policy's fields touched, a few dozen). Iterates in key order, as a
/// `BTreeMap` does.
#[derive(Clone, Debug)]
#[cfg(debug_assertions)]
struct SortedMap<K, V>(Vec<(K, V)>);

#[cfg(debug_assertions)]
impl<K, V> Default for SortedMap<K, V> {
    fn default() -> Self {
        SortedMap(Vec::new())
    }
}

#[cfg(debug_assertions)]
impl<K: Ord + Copy, V> SortedMap<K, V> {
    /// Returns the value of `k`, inserting `v` first if it has none.
    fn or_insert(&mut self, k: K, v: V) -> &mut V {
        let i = match self.0.binary_search_by(|(q, _)| q.cmp(&k)) {
            Ok(i) => i,
            Err(i) => {
                self.0.insert(i, (k, v));
                i
            }
        };
        &mut self.0[i].1
    }

    fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

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
    mem: u64,
    /// Builds with debug assertions: the facade atomics of the policy touched
    /// so far, with their width and value at the first touch, to check
    /// [`State::mem`] against at every state hash.
    #[cfg(debug_assertions)]
    shared: SortedMap<usize, (Width, u64)>,
}

/// A facade atomic's part of [`State::mem`]: its offset `k` in the arena with
/// its value `v`, mixed (two rounds of MurmurHash3's 64-bit finaliser, each a
/// bijection, so that distinct pairs give unrelated words).
fn cell_hash(k: u64, v: u64) -> u64 {
    fn fmix(mut x: u64) -> u64 {
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        x ^ (x >> 33)
    }
    fmix(fmix(k ^ 0x6a09_e667_f3bc_c908) ^ v)
}

impl State {
    /// Notes that a store to `addr` became visible, from `old` to `new` (of
    /// the field at offset `k`): every CPU that read it since its last spin,
    /// or spins on it, has it written since.
    fn wrote(&mut self, addr: usize, k: u64, old: u64, new: u64) {
        self.mem ^= cell_hash(k, old) ^ cell_hash(k, new);
        self.writes += 1;
        for c in &mut self.cpus {
            let spin = match &mut c.block {
                Block::Spin(reads, _) => &mut reads[..],
                _ => &mut [],
            };
            for r in c.reads.iter_mut().chain(spin).filter(|r| r.0 == addr) {
                r.1 = true;
            }
        }
    }

    /// Notes that CPU `cpu` read `addr`, whose key is `key` (for its next spin).
    fn read(&mut self, cpu: usize, addr: usize, key: u64) {
        let c = &mut self.cpus[cpu];
        c.trail = (mix(c.trail.0, addr as u64), mix(c.trail.1, key));
        if !c.reads.iter().any(|r| r.0 == addr) {
            c.reads.push((addr, false));
        }
    }
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
    /// The XXH3 hash of the machine's serialization, which the state hash and
    /// [`Core::others`] begin with: written once per scheduling point
    /// ([`Core::refresh_machine`]) for both, since serializing and hashing the
    /// machine is most of either.
    machine_hash: Cell<u64>,
    /// The footprint of the step running, when the chooser wants it.
    foot: RefCell<Option<Foot>>,
    /// Feeds the policy's locked data ([`Policy::hash_locked`]) to a hasher.
    locked: Cell<LockedData>,
    /// Who may access each byte of the policy's memory, by offset from
    /// `base`, as the policy declares it ([`Policy::name_fields`]).
    owners: Vec<Option<Own>>,
}

/// An [`Owner`], its lock named by the offset of its word.
#[derive(Clone, Copy, Debug)]
enum Own {
    Cpu { cpu: usize, others_read: bool },
    Lock { lock: u32 },
}

/// Collects a policy's [`Owner`] declarations by offset.
struct OwnerTable<'a> {
    base: usize,
    table: &'a mut Vec<Option<Own>>,
}

impl Fields for OwnerTable<'_> {
    fn field(&mut self, _addr: usize, _name: std::fmt::Arguments<'_>, _value: Value) {}

    fn owner(&mut self, addr: usize, owner: Owner) {
        // Only the policy's memory: a field or lock anywhere else is not
        // shared (`Core::shared_addr`), and its declaration says nothing.
        let offset = |a: usize| a.checked_sub(self.base).filter(|&k| k < self.table.len());
        let Some(k) = offset(addr) else { return };
        let own = match owner {
            Owner::Cpu { cpu, others_read } => Own::Cpu { cpu: cpu as usize, others_read },
            Owner::Lock { lock } => match offset(lock) {
                Some(l) => Own::Lock { lock: l as u32 },
                None => return,
            },
        };
        self.table[k] = Some(own);
    }
}

/// Returns the policy's declarations of who may access its fields
/// ([`Fields::owner`]), by offset from `base` up to `mark` (the policy's
/// memory in the arena), or an empty table if it declares none.
fn owners<P: Policy>(policy: &P, base: usize, mark: usize) -> Vec<Option<Own>> {
    let mut table = vec![None; mark];
    // The table lives outside the arena, which the next execution reuses.
    arena::outside(|| policy.name_fields(&mut OwnerTable { base, table: &mut table }));
    if table.iter().all(Option::is_none) {
        table.clear();
    }
    table
}

/// A way to feed a policy's locked data to a hasher, its lifetime erased.
type LockedData = *const (dyn Fn(&mut dyn Hasher) + 'static);

/// The state hash's hasher: every write appends its bytes to a buffer and
/// `finish` hashes the buffer in one pass with XXH3-64. A state is hundreds of
/// small fields, and a streaming hasher (SipHash) pays its rounds per field:
/// that was three quarters of an exhaustive search's time. XXH3 passes
/// SMHasher, which the collision bound in the crate docs assumes.
struct StateBytes<'a>(&'a mut Vec<u8>);

impl Hasher for StateBytes<'_> {
    fn write(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }
    fn write_u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn write_u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn write_u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn write_u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    fn finish(&self) -> u64 {
        xxhash_rust::xxh3::xxh3_64(self.0)
    }
}

/// Collects a policy's field names ([`Policy::name_fields`]).
struct NameTable<'a>(&'a mut BTreeMap<usize, (String, Value)>);

impl Fields for NameTable<'_> {
    fn field(&mut self, addr: usize, name: std::fmt::Arguments<'_>, value: Value) {
        self.0.insert(addr, (name.to_string(), value));
    }
}

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
            let (kind, text) = text();
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

    /// Returns the kind of an access to the field at `addr` (a PTE store drained
    /// is a page-table change).
    fn access_kind(&self, addr: usize, read: bool, write: bool) -> Kind {
        if pte_store(addr).is_some() {
            return Kind::PageTable;
        }
        let lock = matches!(self.names.get(&addr), Some((_, Value::Lock)));
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
            None => false,
        }
    }

    /// Panics (a `no_policy_panic` violation) if the current CPU's access to
    /// `addr` breaks what the policy declared of the field
    /// ([`Fields::owner`]): the reduction relies on the declarations, so
    /// every access checks them.
    fn check_owner(&self, cpu: usize, addr: usize, write: bool) {
        let Some(own) = self.owners.get(addr - self.base).copied().flatten() else { return };
        let ok = match own {
            Own::Cpu { cpu: o, others_read } => o == cpu || (!write && others_read),
            Own::Lock { lock } => self.st.borrow().cpus[cpu].held.contains(&lock),
        };
        if !ok {
            // The names table notes unnamed addresses: never in the arena.
            let msg = arena::outside(|| {
                let what = if write { "wrote" } else { "read" };
                let declared = match own {
                    Own::Cpu { cpu: o, others_read: true } => format!("only cpu{o} writes it"),
                    Own::Cpu { cpu: o, others_read: false } => format!("only cpu{o} touches it"),
                    Own::Lock { lock } => {
                        format!("only a holder of {} touches it", self.addr_name(self.base + lock as usize))
                    }
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

    #[inline(never)]
    fn take_interrupts(&self, cpu: usize) {
        loop {
            let irq = {
                let mut st = self.st.borrow_mut();
                let c = &mut st.cpus[cpu];
                if c.irq_off > 0 || c.in_handler {
                    return;
                }
                let Some(irq) = c.pending.pop_front() else { return };
                c.in_handler = true;
                // A CPU that was waiting runs the handler; it waits again after.
                let blocked = std::mem::replace(&mut c.block, Block::No);
                let saved = c.history;
                st.m.in_irq[cpu] = true;
                (irq, saved, blocked)
            };
            let (irq, saved, blocked) = irq;
            self.event_kind(cpu, 0x1_0000 + irq.from as u64, Kind::Ipi, || {
                format!("interrupt: IPI from cpu{}", irq.from)
            });
            // SAFETY: lifetime only: the core outlives every step of its execution,
            // and this `&'static` goes only into `hw`, which the handler gets by
            // reference (`CheckHw` is not `Clone`) and which drops in this call.
            let core: &'static Core = unsafe { &*(self as *const Core) };
            let hw = CheckHw { core, cpu };
            // SAFETY: a synchronous handler borrows from its sender, which waits
            // until every target has run it; an asynchronous one lives in the
            // execution's arena and borrows only what outlives every shootdown
            // (see `send_ipi_async`).
            unsafe { (*irq.handler)(&hw) };
            let judged = {
                let mut st = self.st.borrow_mut();
                st.cpus[cpu].in_handler = false;
                st.cpus[cpu].block = blocked;
                // The handler leaves the interrupted code's locals as they were, so
                // its history is what the interrupted code had; what the handler
                // did lives on in shared memory and the machine.
                st.cpus[cpu].history = mix(saved, irq.from as u64);
                if irq.sync {
                    st.cpus[irq.from].sync_out -= 1;
                }
                st.m.in_irq[cpu] = false;
                // Flushes that returned while this CPU was in the handler are
                // judged for it now, before it can run anything else.
                st.m.judge_after_irq(cpu)
            };
            if let Err(v) = judged {
                self.violated(v);
            }
            if self.record {
                let mut st = self.st.borrow_mut();
                let step = st.step;
                let text = "return from interrupt".to_string();
                st.events.push(Event { cpu: Some(cpu), drain: false, step, text, kind: Kind::Other });
            }
        }
    }

    /// Makes one buffered store of CPU `cpu` visible.
    fn drain_one(&self, addr: usize, w: Width, v: u64) {
        if let Some((slot, page)) = pte_store(addr) {
            self.st.borrow_mut().m.drain_pte(slot, page, v as u32);
            return;
        }
        // SAFETY: the address came from a live facade atomic of width `w`; the
        // policy outlives the execution's steps.
        self.store(addr, w, || unsafe { write_raw(addr, w, v) });
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
        self.hash_bytes(|h| {
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
                c.pending.iter().for_each(|i| (i.from, i.sync, i.key).hash(h));
                c.buffer.iter().for_each(|&(a, w, v)| (a, w, v).hash(h));
            }
        })
    }

    /// Serializes and hashes the machine, as the state hash and
    /// [`Core::others`] begin with it.
    fn refresh_machine(&self) {
        let mut st = self.st.borrow_mut();
        let rename = self.with_chooser(|c| c.renames());
        self.machine_hash.set(self.hash_bytes(|h| st.m.hash_as(h, rename)));
        st.m.changed = false;
    }

    /// Refreshes the machine's hash if the machine may have changed since.
    fn fresh_machine(&self) {
        if self.st.borrow().m.changed {
            self.refresh_machine();
        }
    }

    /// Returns the XXH3 hash of what `write` writes, in the core's buffer.
    fn hash_bytes(&self, write: impl FnOnce(&mut StateBytes<'_>)) -> u64 {
        let mut bytes = self.bytes.borrow_mut();
        bytes.clear();
        let mut h = StateBytes(&mut bytes);
        write(&mut h);
        h.finish()
    }

    /// Notes in the state that a store to the policy's facade atomic at
    /// `addr`, from `old` to `new`, became visible.
    fn wrote(&self, addr: usize, old: u64, new: u64) {
        self.st.borrow_mut().wrote(addr, (addr - self.base) as u64, old, new);
    }

    /// Performs `write`, a store to the policy's facade atomic of width `w`
    /// at `addr` that becomes visible now, and notes it ([`Core::wrote`]).
    fn store(&self, addr: usize, w: Width, write: impl FnOnce()) {
        // SAFETY: a live facade atomic of width `w` (policy memory) before
        // and after `write`.
        let old = unsafe { read_raw(addr, w) };
        write();
        // SAFETY: as above.
        let new = unsafe { read_raw(addr, w) };
        self.wrote(addr, old, new);
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
    /// CPU holds it across steps ([`Machine::ptl_held`]) and none has a store
    /// to one of its PTEs still buffered (made before its release).
    fn ptl_free(st: &State, c: usize, slot: u32) -> bool {
        st.m.ptl_held[slot as usize].is_none_or(|h| h as usize == c) && !Self::pte_store_pending(st, c, slot)
    }

    /// Returns whether a CPU other than `c` still buffers a PTE store of `slot`.
    fn pte_store_pending(st: &State, c: usize, slot: u32) -> bool {
        st.cpus.iter().enumerate().any(|(o, s)| {
            o != c && s.buffer.iter().any(|&(addr, _, _)| pte_store(addr).is_some_and(|(sl, _)| sl == slot))
        })
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
            Block::MmLock(s, side) => irq || st.m.mm_lock[*s as usize].can_take(*side),
            Block::Ptl(slot) => irq || Self::ptl_free(st, c, *slot),
        }
    }

    /// Makes a choice among `labels`, recording it.
    fn choose(&self, point: Point, labels: &[u32], state: u64) -> Option<usize> {
        let n = labels.len();
        if point == Point::Op {
            // A step that chooses is not one transition.
            self.touch_global();
        }
        // Every scheduling point reaches the chooser (a search may prune at any state,
        // even one with a single way on); an operation choice only when there is one.
        if n == 1 && point == Point::Op {
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
    fn state_hash(&self) -> u64 {
        let st = self.st.borrow();
        self.hash_bytes(|h| {
            self.machine_hash.get().hash(h);
            for c in &st.cpus {
                c.hash_keyed(h, |a| self.addr_key(a), |w| st.writes > w);
            }
            #[cfg(debug_assertions)]
            {
                let mem = st.shared.iter().fold(0, |m, (&addr, &(w, first))| {
                    let k = (addr - self.base) as u64;
                    // SAFETY: a live facade atomic of width `w` (policy memory).
                    m ^ cell_hash(k, first) ^ cell_hash(k, unsafe { read_raw(addr, w) })
                });
                assert_eq!(mem, st.mem, "a store to the policy's memory went past the checker's hooks");
            }
            st.mem.hash(h);
            // SAFETY: the policy outlives the core; no CPU runs during a hash.
            unsafe { (*self.locked.get())(h) };
        })
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
        self.choose(Point::Op, labels, 0)
    }

    fn choose_kernel_op(&self, n: usize, words: &dyn Fn(usize) -> String) -> Option<usize> {
        if !self.with_chooser(|c| c.scripted()) {
            let labels: Vec<u32> = (0..n as u32).collect();
            return self.choose(Point::Op, &labels, 0);
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
                        self.choices.borrow_mut().push(Choice { point: Point::Op, n: n as u32, taken: i as u32 })
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
        loop {
            let e = self.st.borrow_mut().cpus[cpu].buffer.pop_front();
            let Some((addr, w, v)) = e else { return };
            self.drain_one(addr, w, v);
            let k = self.addr_key(addr);
            self.event_in(cpu, mix(0x3_0000, k ^ v), false, || {
                (self.access_kind(addr, false, true), self.drained(addr, v))
            });
        }
    }

    fn has_buffered(&self, cpu: usize) -> bool {
        !self.st.borrow().cpus[cpu].buffer.is_empty()
    }

    fn buffer_pte_clear(&self, slot: u32, page: usize, ver: u32) {
        let cpu = self.cpu();
        let addr = PTE_STORE | (slot as usize) << 8 | page;
        self.st.borrow_mut().cpus[cpu].buffer.push_back((addr, Width::W64, ver as u64));
    }

    fn ops_done(&self, cpu: usize) -> usize {
        self.st.borrow().cpus[cpu].ops_done
    }

    fn forget_locals(&self, cpu: usize) {
        let mut st = self.st.borrow_mut();
        let c = &mut st.cpus[cpu];
        c.history = 0;
        c.forget_reads();
        c.anchor = None;
    }

    fn count_op(&self, cpu: usize) {
        self.st.borrow_mut().cpus[cpu].ops_done += 1;
    }

    fn irq_disable(&self, cpu: usize) {
        self.st.borrow_mut().cpus[cpu].irq_off += 1;
    }

    fn irq_enable(&self, cpu: usize) {
        self.st.borrow_mut().cpus[cpu].irq_off -= 1;
    }
}

/// Reads the facade atomic of width `w` at `addr`.
///
/// # Safety
/// `addr` must be a live facade atomic of that width.
unsafe fn read_raw(addr: usize, w: Width) -> u64 {
    use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering as O};
    // SAFETY: per the contract; facade atomics are repr(transparent) over core's.
    unsafe {
        match w {
            Width::W8 => (*(addr as *const AtomicBool)).load(O::SeqCst) as u64,
            Width::W32 => (*(addr as *const AtomicU32)).load(O::SeqCst) as u64,
            Width::W64 => (*(addr as *const AtomicU64)).load(O::SeqCst),
        }
    }
}

fn h_load(addr: usize, w: Width, _ord: Ordering, read: &dyn Fn() -> u64) -> u64 {
    let Some(core) = current().filter(|c| c.shared_addr(addr)) else { return read() };
    core.pause_for(addr, false);
    let cpu = core.cpu();
    core.check_owner(cpu, addr, false);
    core.note_shared(addr, w);
    core.touch(addr, false);
    let k = core.addr_key(addr);
    core.st.borrow_mut().read(cpu, addr, k);
    let fwd = core.st.borrow().cpus[cpu].buffer.iter().rev().find(|e| e.0 == addr).map(|e| e.2);
    let v = fwd.unwrap_or_else(read);
    core.event_in(cpu, mix(0x4_0000 ^ k, v), true, || {
        let buffered = if fwd.is_some() { " (from its store buffer)" } else { "" };
        (
            core.access_kind(addr, true, false),
            format!("load {} -> {}{buffered}", core.addr_name(addr), core.show(addr, v)),
        )
    });
    v
}

fn h_store(addr: usize, w: Width, ord: Ordering, v: u64, write: &dyn Fn(u64)) {
    let Some(core) = current().filter(|c| c.shared_addr(addr)) else { return write(v) };
    core.pause_for(addr, true);
    let cpu = core.cpu();
    core.check_owner(cpu, addr, true);
    core.note_shared(addr, w);
    let k = core.addr_key(addr);
    let text = |tail: &str| {
        (core.access_kind(addr, false, true), format!("store {} = {}{tail}", core.addr_name(addr), core.show(addr, v)))
    };
    if core.shape.memory.buffered() && ord != Ordering::SeqCst {
        core.st.borrow_mut().cpus[cpu].buffer.push_back((addr, w, v));
        core.event_in(cpu, mix(0x5_0000 ^ k, v), false, || text(&format!(" ({INTO_BUFFER})")));
    } else {
        core.drain_own(cpu);
        core.store(addr, w, || write(v));
        core.touch(addr, true);
        core.event_in(cpu, mix(0x6_0000 ^ k, v), false, || text(""));
    }
}

fn h_rmw(addr: usize, w: Width, _ord: Ordering, op: check::RmwOp<'_>) -> u64 {
    let Some(core) = current().filter(|c| c.shared_addr(addr)) else { return op().0 };
    core.pause_for(addr, true);
    let cpu = core.cpu();
    core.check_owner(cpu, addr, true);
    core.note_shared(addr, w);
    core.drain_own(cpu);
    core.touch(addr, false);
    core.touch(addr, true);
    let k = core.addr_key(addr);
    core.st.borrow_mut().read(cpu, addr, k);
    let (old, new) = op();
    // A failed compare-exchange stores nothing.
    if old != new {
        core.wrote(addr, old, new);
    }
    core.event_in(cpu, mix(mix(0x7_0000 ^ k, old), new), old == new, || {
        let kind = core.access_kind(addr, true, old != new);
        (kind, format!("rmw {}: {} -> {}", core.addr_name(addr), core.show(addr, old), core.show(addr, new)))
    });
    old
}

fn h_fence(ord: Ordering) {
    let Some(core) = current() else {
        return std::sync::atomic::fence(ord);
    };
    let cpu = core.cpu();
    if ord == Ordering::SeqCst && !core.st.borrow().cpus[cpu].buffer.is_empty() {
        // Only a fence with stores to drain does anything another CPU can see.
        core.pause();
        core.drain_own(cpu);
    }
    core.event_in(cpu, 0x8_0000, true, || (Kind::Other, format!("fence({ord:?})")));
}

fn h_spin() {
    let Some(core) = current() else {
        return std::hint::spin_loop();
    };
    let cpu = core.cpu();
    let why = {
        let mut st = core.st.borrow_mut();
        let reads = std::mem::take(&mut st.cpus[cpu].reads);
        if reads.is_empty() {
            // It waits for any store after this one: which stores come before
            // it is not a matter of fields.
            core.touch_global();
        }
        let c = &mut st.cpus[cpu];
        let trail = std::mem::take(&mut c.trail);
        match &c.anchor {
            Some((h, a)) if a.0 == trail.0 => c.history = *h,
            _ => c.anchor = Some((c.history, trail)),
        }
        Block::Spin(reads, st.writes)
    };
    core.block(why);
}

fn h_lock(word: usize, taken: bool) {
    let Some(core) = current() else { return };
    let cpu = core.cpu();
    let mut st = core.st.borrow_mut();
    let c = &mut st.cpus[cpu];
    if core.shared_addr(word) {
        let k = (word - core.base) as u32;
        let (from, to) = if taken { (NO_LOCK, k) } else { (k, NO_LOCK) };
        let Some(slot) = c.held.iter_mut().find(|l| **l == from) else {
            drop(st);
            panic!("cpu{cpu} holds more than {MAX_HELD} spin locks at once");
        };
        *slot = to;
    }
    if taken {
        c.irq_off += 1;
    } else {
        c.irq_off -= 1;
    }
}

static HOOKS: Hooks = Hooks {
    load: h_load,
    store: h_store,
    rmw: h_rmw,
    fence: h_fence,
    spin: h_spin,
    lock: h_lock,
    region: h_region,
    outside: h_outside,
};

/// Runs `f` with this thread's arena off (what it allocates outlives the execution).
fn h_outside(f: &mut dyn FnMut()) {
    arena::outside(f);
}

/// A policy's state outside the allocator asks to start this thread's arena
/// ([`arena::adopt`]): only while a policy is built for an execution, when
/// the arena is active and empty.
fn h_region(base: usize, len: usize, prefix: usize) -> bool {
    if !arena::is_active() {
        return false;
    }
    arena::adopt(base, len, prefix);
    true
}

/// The [`Hw`] of one checked CPU.
pub(crate) struct CheckHw<'a> {
    core: &'a Core,
    cpu: usize,
}

impl<'a> CheckHw<'a> {
    fn st(&self) -> std::cell::RefMut<'_, State> {
        self.core.st.borrow_mut()
    }

    /// Counts this CPU among the initiators of cross-CPU invalidations.
    fn initiated(&self) {
        self.core.initiators.set(self.core.initiators.get() | 1 << self.cpu);
    }

    fn enqueue(&self, targets: impl Iterator<Item = usize>, handler: Handler, sync: bool) {
        let me = self.cpu;
        self.core.drain_own(me);
        let mut list = Vec::new();
        {
            let mut st = self.st();
            let key = st.cpus[me].history;
            for t in targets.filter(|&t| t != me) {
                st.cpus[t].pending.push_back(Irq { handler, from: me, sync, key });
                list.push(t);
            }
            if sync {
                st.cpus[me].sync_out += list.len();
            }
        }
        let key = list.iter().fold(0x9_0000 + sync as u64, |h, &t| mix(h, t as u64));
        self.core.event_kind(me, key, Kind::Ipi, || {
            let l: Vec<String> = list.iter().map(|t| format!("cpu{t}")).collect();
            format!("send {} IPI to {}", if sync { "synchronous" } else { "asynchronous" }, l.join(", "))
        });
    }
}

/// Erases the lifetime of an IPI handler so that a target can run it later.
///
/// # Safety
/// The caller must keep what `f` borrows alive until every target has run it.
unsafe fn erase<'a, 'b>(f: &'a (dyn Fn(&CheckHw<'b>) + 'a)) -> Handler {
    // SAFETY: only the lifetimes change; see the contract.
    unsafe { std::mem::transmute::<&'a (dyn Fn(&CheckHw<'b>) + 'a), &'static (dyn Fn(&CheckHw<'static>) + 'static)>(f) }
}

impl<'c> Hw for CheckHw<'c> {
    fn cpu(&self) -> CpuId {
        CpuId(self.cpu as u32)
    }

    fn ncpus(&self) -> usize {
        self.core.shape.cpus
    }

    fn write_root(&self, root: Root, asid: tlbkit_policy::Asid, noflush: bool) {
        self.core.pause();
        // Under TSO a context switch makes this CPU's stores visible before it
        // runs the new context: x86's CR3 write serialises, and arm64's
        // `__switch_to` issues `DSB ISH`, whose store drain is taken here to
        // come with the root write. The arm mode keeps arm64's weaker rule: `MSR
        // TTBR0_EL1` is no barrier, so what the switch stored before it waits for
        // the policy's own barrier or the `DSB ISH` at the switch's end
        // (`ops::switch_to`). What that `DSB` completes of this CPU's
        // invalidations it completes there, the latest point; the root write
        // itself completes nothing.
        if self.core.shape.memory != Memory::Arm {
            self.core.drain_own(self.cpu);
        }
        let a = asid.get();
        self.st().m.write_root(self.cpu, root, a, noflush);
        let rk = match root {
            Root::Mm(m) => m.0 as u64,
            Root::Reserved => 0xffff,
        };
        self.core.event_kind(self.cpu, mix(mix(0xa_0000 ^ rk, a as u64), noflush as u64), Kind::Root, || {
            let r = match root {
                Root::Mm(m) => format!("mm{}", m.0),
                Root::Reserved => "the reserved table".to_string(),
            };
            format!("write root: {r}, asid {a}{}", if noflush { "" } else { ", flushing that asid" })
        });
    }

    fn tlbi(&self, op: Tlbi, scope: Scope) {
        self.core.pause();
        if scope == Scope::Broadcast {
            self.initiated();
        }
        // x86's local invalidations are synchronous; every other one waits for
        // its issuer's completing barrier (`kernel::Pending`).
        let waits = self.core.shape.arm64 || scope == Scope::Broadcast;
        let (n, fresh) = if waits {
            (0, self.st().m.issue(self.cpu, op, scope))
        } else {
            (self.st().m.tlbi(self.cpu, op, scope), false)
        };
        let key = match op {
            Tlbi::Va { asid, va } => mix(asid.get() as u64, va.0),
            Tlbi::VaAllAsids { va } => mix(1, va.0),
            Tlbi::Asid(a) => mix(2, a.get() as u64),
            Tlbi::All => 3,
            Tlbi::Range { asid, va, pages } => {
                mix(mix(4, asid.map_or(u64::MAX, |a| a.get() as u64)), mix(va.0, pages as u64))
            }
            Tlbi::AllNonGlobal => 5,
        };
        self.core.event_kind(self.cpu, mix(0xb_0000 ^ key, scope as u64), Kind::Invalidate, || {
            let what = match op {
                Tlbi::Va { asid, va } => format!("va {:#x} asid {}", va.0, asid.get()),
                Tlbi::VaAllAsids { va } => format!("va {:#x} all asids", va.0),
                Tlbi::Asid(a) => format!("asid {}", a.get()),
                Tlbi::All => "everything".to_string(),
                Tlbi::Range { asid: Some(a), va, pages } => {
                    format!("{pages} page(s) from {:#x} asid {}", va.0, a.get())
                }
                Tlbi::Range { asid: None, va, pages } => format!("{pages} page(s) from {:#x} in every asid", va.0),
                Tlbi::AllNonGlobal => "every non-global entry".to_string(),
            };
            let s = match scope {
                Scope::Local => "local",
                Scope::Broadcast => "broadcast",
            };
            if waits {
                let by = if self.core.shape.arm64 { "DSB" } else { "TLBSYNC" };
                format!("invalidate {what} ({s}): {ISSUED} {by}")
            } else {
                format!("invalidate {what} ({s}): {n} entr{} removed", if n == 1 { "y" } else { "ies" })
            }
        });
        if fresh && self.core.record {
            let mut st = self.st();
            let at = st.events.len() - 1;
            let key = Pending { op, broadcast: scope == Scope::Broadcast }.key();
            st.issued.push((self.cpu, key, at));
        }
    }

    fn barrier(&self, b: Barrier) {
        // Which of this CPU's pending invalidations the barrier completes
        // (`kernel::Pending`): arm64's `DSB ISH` all, `DSB NSH` the local ones;
        // x86's `TLBSYNC` its `INVLPGB`s.
        let completes = |p: &Pending| match b {
            Barrier::Dsb(Domain::InnerShareable) => true,
            Barrier::Dsb(Domain::NonShareable) => !p.broadcast,
            Barrier::TlbSync => p.broadcast,
            Barrier::DsbSt(_) | Barrier::Isb | Barrier::Full => false,
        };
        let (drains, pending) = {
            let st = self.core.st.borrow();
            (
                !matches!(b, Barrier::Isb) && !st.cpus[self.cpu].buffer.is_empty(),
                st.m.pending[self.cpu].iter().any(completes),
            )
        };
        // Only a barrier with stores to drain does anything another CPU can see.
        // Completing invalidations needs no point of its own: a step of another
        // CPU that could come between this step's start and the barrier can come
        // before this step, where the same invalidations are pending and the
        // page tables are the same, so completing within the step is completing
        // at the barrier (and a TLBI followed at once by its DSB is explored as
        // it was when invalidations took effect when issued).
        //
        // In the arm mode a `DSB` that both completes invalidations and drains
        // stores may do the first before the second is visible: nothing orders a
        // `TLBI` after an earlier store but a `DSB ISHST` between them. That
        // order is explored here: the invalidations complete in the barrier's
        // step and the stores drain in a step of their own after it, so the
        // hardware's fills in between read the page tables without them. The
        // other order, the stores first, is a drain the scheduler offers before
        // the barrier's step.
        let split = drains && pending && self.core.shape.memory == Memory::Arm;
        if drains {
            self.core.pause();
            if !split {
                self.core.drain_own(self.cpu);
            }
        }
        // Those issued in this step read in the trace as taking effect when
        // issued (nothing could come between); the others are told here.
        let (mut k, mut n) = (0, 0);
        if pending {
            let me = self.cpu;
            let record = self.core.record;
            let st = &mut *self.st();
            let State { m, events, issued, step, .. } = st;
            m.complete(me, completes, |p, removed| {
                let key = p.key();
                let at = issued.iter().rposition(|i| i.0 == me && i.1 == key).map(|i| issued[i].2);
                issued.retain(|i| !(i.0 == me && i.1 == key));
                match at.filter(|&at| record && events[at].step == *step) {
                    Some(at) => {
                        let e = &mut events[at];
                        let head = e.text.split(": ").next().unwrap_or_default().to_string();
                        e.text = format!("{head}: {removed} entr{} removed", if removed == 1 { "y" } else { "ies" });
                    }
                    None => {
                        k += 1;
                        n += removed;
                    }
                }
            });
        }
        self.core.event(self.cpu, 0xc_0000, || {
            if k == 0 {
                format!("barrier {b:?}")
            } else {
                format!(
                    "barrier {b:?}: {k} invalidation(s) issued in earlier steps complete, {n} entr{} removed",
                    if n == 1 { "y" } else { "ies" }
                )
            }
        });
        if split {
            self.core.pause();
            self.core.drain_own(self.cpu);
        }
    }

    fn send_ipi<F: Fn(&Self)>(&self, targets: &CpuMask, handler: F) {
        self.core.pause();
        self.initiated();
        let mut list = Vec::new();
        targets.for_each(|c| list.push(c.index()));
        let h: &dyn Fn(&CheckHw<'c>) = &handler;
        // SAFETY: this call returns only after every target ran the handler.
        let p = unsafe { erase(h) };
        self.enqueue(list.into_iter(), p, true);
        while self.core.st.borrow().cpus[self.cpu].sync_out > 0 {
            self.core.block(Block::Sync);
        }
    }

    fn send_ipi_async<F: Fn(&Self)>(&self, targets: &CpuMask, handler: F) {
        self.core.pause();
        self.initiated();
        let mut list = Vec::new();
        targets.for_each(|c| list.push(c.index()));
        // The sender does not wait: its handlers may run after it has returned
        // (when the protocol stops waiting, as the kernel's initiator does), so the
        // handler is moved into a box in the execution's arena, which lives until
        // the execution ends. What it borrows must outlive every shootdown, as a
        // kernel's handler reads only global and per-CPU memory: the contract of
        // `Hw::send_ipi_async`, which the policies' handlers keep by capturing only
        // the policy's shared state and values they own.
        let b: Box<dyn Fn(&CheckHw<'c>) + '_> = Box::new(handler);
        let b: &dyn Fn(&CheckHw<'c>) = Box::leak(b);
        // SAFETY: see above.
        let p = unsafe { erase(b) };
        self.enqueue(list.into_iter(), p, false);
    }

    fn send_ipi_all_but_self_async<F: Fn(&Self)>(&self, handler: F) {
        self.core.pause();
        self.initiated();
        let b: Box<dyn Fn(&CheckHw<'c>) + '_> = Box::new(handler);
        let b: &dyn Fn(&CheckHw<'c>) = Box::leak(b);
        // SAFETY: as in `send_ipi_async`.
        let p = unsafe { erase(b) };
        self.enqueue(0..self.core.shape.cpus, p, false);
    }

    fn shared(&self, _addr: usize, _access: Access) {}

    fn spin_on(&self, _addr: usize) {}

    fn phase(&self, phase: Phase) {
        self.core.event(self.cpu, 0xd_0000 + phase as u64, || {
            format!(
                "phase: {}",
                match phase {
                    Phase::Issue => "issue",
                    Phase::Dispatch => "dispatch",
                    Phase::Sync => "sync",
                    Phase::Done => "done",
                }
            )
        });
        if phase == Phase::Done {
            // The protocol has stopped waiting, and so does the initiator: the
            // handlers of its asynchronous IPIs may still be pending or running (a
            // protocol may acknowledge before it invalidates, or stop waiting too
            // early), and what its caller does next (the oracle's judgement, freeing
            // frames, the next request) happens as it would in the kernel.
            self.core.st.borrow_mut().cpus[self.cpu].forget_reads();
        }
    }

    /// A second for every operation any CPU has started: every deadline a policy
    /// set has passed by its next operation. The value read is part of this CPU's
    /// history (it depends on what other CPUs did).
    fn jiffies(&self) -> u64 {
        self.core.pause();
        let started: u64 = self.st().cpus.iter().map(|c| c.ops_done as u64).sum();
        let j = started * 1000;
        self.core.remember(self.cpu, mix(0x19_0000, j));
        j
    }

    fn irqs_off<R>(&self, f: impl FnOnce() -> R) -> R {
        self.st().cpus[self.cpu].irq_off += 1;
        let r = f();
        self.st().cpus[self.cpu].irq_off -= 1;
        r
    }

    /// The flush of `mm` this CPU runs, taken over with the smallest free
    /// ticket where the kernel allows it under `rule` (see
    /// `Machine::take_lazy`).
    fn defer_flush(&self, mm: MmId, rule: Defer) -> Option<FlushTicket> {
        let (t, holds) = self.st().m.take_lazy(self.cpu, mm.0, rule)?;
        // A lazy shootdown is a cross-CPU invalidation started here.
        self.initiated();
        self.core.event(self.cpu, mix(0x1a_0000 + u64::from(!holds) * 0x100, t as u64), || {
            if holds {
                format!("the flush is deferred (ticket {t}): its memory is held until the policy completes it")
            } else {
                format!(
                    "the flush is deferred (ticket {t}) as mm{}'s munmap_inprogress is set: it holds nothing, \
                     and its caller takes it as done when it returns",
                    mm.0
                )
            }
        });
        Some(FlushTicket(t))
    }

    /// Discharges the ticket's obligations and frees what it held, as the
    /// kernel's reclamation does (see `crate::ops::complete_lazy`).
    fn flush_complete(&self, ticket: FlushTicket) {
        crate::ops::complete_lazy(self.core, self.cpu, ticket.0);
    }

    fn note(&self, note: Note) {
        match note {
            Note::AsidRollover => self.core.rollovers.set(self.core.rollovers.get() + 1),
        }
        self.core.event_kind(self.cpu, 0xe_0000, Kind::Note, || match note {
            Note::AsidRollover => "ASID rollover: a new generation begins".to_string(),
        });
    }
}

/// Runs one execution of `policy` on `shape` with `chooser` making every choice.
/// `build` constructs the policy (in the execution's arena).
pub fn run<P: Policy>(shape: &Shape, build: &dyn Fn() -> P, chooser: &mut dyn Chooser, record: bool) -> Outcome {
    check::install(&HOOKS);
    guard_policy_code();
    arena::ensure();
    arena::reset();
    let was = arena::set_active(true);
    let (policy, mark) = build_policy(shape, build);
    // Read after the build: a policy may have moved the arena (`arena::adopt`).
    let base = arena::base();
    let mut names = BTreeMap::new();
    if record {
        // The table lives outside the arena, which the next execution reuses.
        arena::outside(|| policy.name_fields(&mut NameTable(&mut names)));
    }
    let core = new_core(shape, &*policy, base, mark, names, record);
    // SAFETY: the core calls this only between steps, when no CPU runs the policy.
    let locked_data = |h: &mut dyn Hasher| unsafe { policy.hash_locked(h) };
    // SAFETY: the closure and the chooser outlive the core, which is dropped
    // before them below.
    unsafe { core.lend(chooser, &locked_data) };
    arena::set_active(false);
    let mut cos = start(&core, &*policy, take_stack);
    let outcome = drive(&core, &mut cos, Resume::default(), None);
    cos.into_iter().enumerate().for_each(|(cpu, co)| abandon(cpu, co));
    arena::set_active(was);
    give_buffer(core.bytes.take());
    drop(core);
    drop(policy);
    outcome
}

/// Builds the policy in the calling thread's (reset, active) arena and
/// initialises every address space's policy data; returns it and the arena
/// mark below which its shared memory lies.
fn build_policy<P: Policy>(shape: &Shape, build: &dyn Fn() -> P) -> (Box<P>, usize) {
    let policy = Box::new(build());
    let mark = arena::used();
    for s in 1..=shape.mms as u32 {
        policy.mm_init(MmId(s));
    }
    (policy, mark)
}

/// Returns a fresh execution's core (every address space forked by the
/// kernel, every CPU between operations), with no chooser yet ([`Core::lend`]).
fn new_core<P: Policy>(
    shape: &Shape,
    policy: &P,
    base: usize,
    mark: usize,
    names: BTreeMap<usize, (String, Value)>,
    record: bool,
) -> Core {
    let global_user = policy.user_ptes_global();
    let mut m = Machine::new(shape.cpus, shape.mms, shape.pages, global_user, shape.teardown.is_some());
    m.va_drops_walks = !shape.arm64;
    m.reads_flag = policy.defers() == Some(Defer::WhileMmFlagged);
    for s in 1..=shape.mms as u32 {
        m.fork(s, 0).expect("a fresh machine has no obligations");
    }
    let cpus = (0..shape.cpus)
        .map(|_| Cpu {
            block: Block::No,
            irq_off: 0,
            in_handler: false,
            pending: VecDeque::new(),
            buffer: VecDeque::new(),
            sync_out: 0,
            history: 0,
            reads: Vec::new(),
            trail: (0, 0),
            next: None,
            anchor: None,
            ops_done: 0,
            held: [NO_LOCK; MAX_HELD],
        })
        .collect();
    let st = State {
        m: Tracked { m, changed: true },
        cpus,
        writes: 0,
        violation: None,
        events: Vec::new(),
        issued: Vec::new(),
        step: 0,
        mem: 0,
        #[cfg(debug_assertions)]
        shared: SortedMap::default(),
    };
    let no_data: LockedData = std::ptr::null::<fn(&mut dyn Hasher)>();
    Core {
        st: RefCell::new(st),
        yielders: (0..shape.cpus).map(|_| Cell::new(std::ptr::null())).collect(),
        current: Cell::new(0),
        low: (0..shape.cpus).map(|_| Cell::new(0)).collect(),
        chooser: Cell::new(None),
        choices: RefCell::new(choices_buffer()),
        pruned: Cell::new(false),
        shape: shape.clone(),
        record,
        base,
        mark,
        names,
        unnamed: RefCell::new(BTreeSet::new()),
        rollovers: Cell::new(0),
        initiators: Cell::new(0),
        bytes: RefCell::new(take_buffer()),
        machine_hash: Cell::new(0),
        foot: RefCell::new(None),
        locked: Cell::new(no_data),
        owners: owners(policy, base, mark),
    }
}

impl Core {
    /// Hands the core the execution's chooser and the way to hash the
    /// policy's locked data.
    ///
    /// # Safety
    /// Both must outlive every use of the core until the next `lend`.
    unsafe fn lend(&self, chooser: &mut dyn Chooser, locked: &dyn Fn(&mut dyn Hasher)) {
        let chooser: NonNull<dyn Chooser + '_> = NonNull::from(chooser);
        let locked: *const (dyn Fn(&mut dyn Hasher) + '_) = locked;
        // SAFETY: lifetimes only (same pointer types, same metadata): the
        // caller keeps both alive until the next `lend`, per the contract.
        unsafe {
            self.chooser.set(Some(std::mem::transmute::<NonNull<dyn Chooser + '_>, NonNull<dyn Chooser>>(chooser)));
            self.locked.set(std::mem::transmute::<*const (dyn Fn(&mut dyn Hasher) + '_), LockedData>(locked));
        }
    }

    /// Runs `f` with the execution's chooser: the one way the core reaches it.
    ///
    /// # Panics
    /// If no chooser was lent, or when called again inside `f`.
    fn with_chooser<R>(&self, f: impl FnOnce(&mut dyn Chooser) -> R) -> R {
        self.with_lent_chooser(f).expect("a chooser is lent before the execution steps, and not in use")
    }

    /// Runs `f` with the execution's chooser if one is lent (`None` if not:
    /// the CPUs run to their first pause before it is, when an execution starts
    /// for checkpoints).
    fn with_lent_chooser<R>(&self, f: impl FnOnce(&mut dyn Chooser) -> R) -> Option<R> {
        // Taken out while `f` runs, so that no second reference can be made
        // meanwhile (a call inside `f` finds none).
        let mut chooser = self.chooser.take()?;
        // SAFETY: `lend`'s caller keeps the chooser alive and lets nothing
        // else use it until the next `lend` (it lent a `&mut`), so it is
        // valid here; the pointer is out of the cell, so this reference is
        // the only one while `f` runs. `Core` is not `Sync`: no other thread
        // can be in here at once.
        let out = f(unsafe { chooser.as_mut() });
        self.chooser.set(Some(chooser));
        Some(out)
    }
}

thread_local! {
    static STACKS: RefCell<Vec<DefaultStack>> = const { RefCell::new(Vec::new()) };
    /// The hash buffers of [`Core`], kept from one execution to the next so
    /// that each execution does not grow them again from nothing.
    static BUFFERS: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// Returns an empty hash buffer, with the capacity an earlier execution gave it.
fn take_buffer() -> Vec<u8> {
    arena::outside(|| BUFFERS.with(|b| b.borrow_mut().pop()).unwrap_or_default())
}

/// Keeps a hash buffer for the next execution, unless it grew while the arena
/// was active (the hashes run with it off, so it should not): the arena is
/// reset between executions, so its memory must not outlive this one. Called
/// before that reset, when everything this execution allocated there lies
/// below [`arena::used`].
fn give_buffer(mut b: Vec<u8>) {
    if arena::below(b.as_ptr() as usize, arena::used()) {
        debug_assert!(false, "a hash buffer grew inside the execution's arena");
        std::mem::forget(b);
        return;
    }
    b.clear();
    arena::outside(|| BUFFERS.with(|v| v.borrow_mut().push(b)));
}

/// The coroutine stack size: policy code in debug builds with nested handlers.
const STACK_BYTES: usize = 256 << 10;

fn take_stack() -> DefaultStack {
    STACKS.with(|s| s.borrow_mut().pop()).unwrap_or_else(|| {
        arena::outside(|| DefaultStack::new(STACK_BYTES).expect("the checker could not map a coroutine stack"))
    })
}

fn give_stack(s: DefaultStack) {
    // A coroutine abandoned where it was (or trapped) never returned from
    // its frames, so AddressSanitizer's marks of their redzones and scopes
    // are still on the stack: clear them, or the next coroutine's frames
    // there read as overflows (nothing without the `asan` feature).
    use corosensei::stack::Stack as _;
    let (base, limit) = (s.base().get(), s.limit().get());
    tlbkit_fault::asan_unpoison(limit, base - limit);
    arena::outside(|| STACKS.with(|v| v.borrow_mut().push(s)));
}

/// Abandons CPU `cpu`'s coroutine where it is and keeps its stack for the
/// next execution: what its stack owns is in the arena. Its frames never
/// return, so its sanitizer fiber goes too.
fn abandon(cpu: usize, mut co: Co<'_>) {
    if !co.done() {
        // SAFETY: nothing on the stack needs dropping for soundness: its
        // objects are arena memory or guards of this execution's own state.
        unsafe { co.force_reset() };
    }
    tlbkit_fault::forget_fiber(cpu);
    give_stack(co.into_stack());
}

type Co<'a> = Coroutine<(), (), (), DefaultStack>;

pub mod checkpoint;
pub use checkpoint::{run_from, Checkpoints};
mod gone_wrong;
pub(crate) use gone_wrong::guard_policy_code;

/// Puts into `out` the store-buffer drains worth offering, as `(cpu, last index to
/// drain)`: a buffered store matters to other CPUs only when one of them is about
/// to access its address, or spins on it, so a CPU's buffer drains up to the
/// newest such store (its older stores drain with it: the buffer is FIFO). When
/// no CPU can step (`stuck`), every buffer may drain whole. Draining later than
/// a real CPU would is never observable before that access.
fn drain_options(st: &State, stuck: bool, out: &mut Vec<(usize, usize)>) {
    out.clear();
    for c in 0..st.cpus.len() {
        let buf = &st.cpus[c].buffer;
        if buf.is_empty() {
            continue;
        }
        // A PTE store is wanted at once: page-table walkers read all the time.
        let wanted = |addr: usize| {
            pte_store(addr).is_some()
                || st.cpus.iter().enumerate().any(|(d, cpu)| {
                    d != c
                        && (cpu.next.is_some_and(|(a, _)| a == addr)
                            || matches!(&cpu.block, Block::Spin(reads, _) if reads.iter().any(|(a, _)| *a == addr)))
                })
        };
        if let Some(k) = (0..buf.len()).rev().find(|&k| wanted(buf[k].0)) {
            out.push((c, k));
        } else if stuck {
            out.push((c, buf.len() - 1));
        }
    }
}

thread_local! {
    /// Whether this thread is running policy code in a coroutine (see [`quiet_panics`]).
    static IN_POLICY: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` (which resumes a CPU's coroutine) with panics kept quiet: a policy's
/// panic is a finding, reported as the `no_policy_panic` violation with its
/// message, so the process-wide panic hook must neither print it nor capture a
/// backtrace. Capturing one is also unsafe here: the standard library's
/// symbolisation caches would be allocated in the execution's arena, which the
/// next execution reuses (with `RUST_BACKTRACE=1` that ended in a segfault).
///
/// The hook is installed once per process and passes every panic outside a
/// coroutine on to the hook that was there before, so the checker's own bugs and
/// other threads' panics still print as usual.
fn quiet_panics<T>(f: impl FnOnce() -> T) -> T {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        // The hook lives as long as the process: not in the arena.
        let was = arena::set_active(false);
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !IN_POLICY.with(Cell::get) {
                previous(info);
            }
        }));
        arena::set_active(was);
    });
    IN_POLICY.with(|p| p.set(true));
    let r = f();
    IN_POLICY.with(|p| p.set(false));
    r
}

/// Creates every CPU's coroutine (on stacks from `stack`) and runs each up
/// to its first pause, with the arena active while it runs.
fn start<P: Policy>(core: &Core, policy: &P, mut stack: impl FnMut() -> DefaultStack) -> Vec<Co<'static>> {
    let n = core.shape.cpus;
    let mut cos: Vec<Co<'_>> = Vec::with_capacity(n);
    for cpu in 0..n {
        let c: *const Core = core;
        let p: *const P = policy;
        // SAFETY: `core` and `policy` outlive the coroutines: every coroutine is
        // reset before they are dropped (by `run`, or by a checkpointed
        // execution's owner).
        let co = unsafe {
            Coroutine::with_stack_unchecked(stack(), move |y: &Yielder<(), ()>, ()| {
                let core = &*c;
                core.yielders[cpu].set(y);
                crate::ops::kernel_loop(core, &*p, cpu);
            })
        };
        cos.push(co);
    }
    CURRENT.with(|c| c.set(core));
    for (cpu, co) in cos.iter_mut().enumerate() {
        core.current.set(cpu);
        let trap = co.trap_handler();
        let _ = arena::inside(|| tlbkit_fault::guarded(cpu, trap, || co.resume(())));
    }
    CURRENT.with(|c| c.set(std::ptr::null()));
    cos
}

/// Where [`drive`] starts: the scheduler's own variables at a scheduling point.
#[derive(Clone, Copy, Debug, Default)]
struct Resume {
    /// Steps taken so far.
    steps: usize,
    /// The CPU that stepped last (`None` before the first step).
    last: Option<usize>,
    /// The state's hash there, where the search computed one (0 otherwise):
    /// builds with debug assertions check that a restored checkpoint
    /// hashes the same.
    hash: u64,
}

/// Steps the execution from `from` until it ends, then returns how; with
/// `saved`, it saves a checkpoint at every scheduling point deeper than its
/// deepest where the chooser may come back ([`Chooser::may_return`]).
fn drive(core: &Core, cos: &mut [Co<'_>], from: Resume, mut saved: Option<&mut checkpoint::Saved>) -> Outcome {
    let n = core.shape.cpus;
    CURRENT.with(|c| c.set(core));
    arena::set_active(false);
    let mut violation = None;
    let mut steps = from.steps;
    let mut last = from.last.unwrap_or(usize::MAX);
    // The options' buffers, kept across steps (this loop runs for every step of
    // every execution, replayed or not).
    let mut runs: Vec<usize> = Vec::with_capacity(n);
    let mut drains: Vec<(usize, usize)> = Vec::with_capacity(n);
    let mut labels: Vec<u32> = Vec::with_capacity(2 * n);
    if cfg!(debug_assertions) && from.hash != 0 {
        let kept = (!core.st.borrow().m.changed).then(|| core.machine_hash.get());
        core.refresh_machine();
        if let Some(kept) = kept {
            assert_eq!(kept, core.machine_hash.get(), "a restored checkpoint kept a stale machine hash");
        }
        assert_eq!(core.state_hash(), from.hash, "a restored checkpoint hashes differently from the state it saved");
    }
    loop {
        // The options: stepping a runnable CPU (the one that ran last first, so that
        // option 0 never preempts), or draining a store buffer.
        {
            let st = core.st.borrow();
            runs.clear();
            runs.extend((0..n).filter(|&c| Core::runnable(&st, c)));
            if let Some(i) = runs.iter().position(|&c| c == last) {
                runs.remove(i);
                runs.insert(0, last);
            }
            drain_options(&st, runs.is_empty(), &mut drains);
        }
        let total = runs.len() + drains.len();
        if total == 0 {
            let st = core.st.borrow();
            if let Some(c) = (0..n).find(|&c| !matches!(st.cpus[c].block, Block::Idle)) {
                violation = Some(Violation {
                    property: "no_deadlock",
                    cpu: c,
                    detail: format!(
                        "no CPU can take a step: cpu{c} waits ({:?}) for something that can no longer happen",
                        st.cpus[c].block
                    ),
                });
            }
            break;
        }
        // A local step, told to the chooser first: a state with one needs no
        // hash (see `Chooser::local`).
        let local = if core.with_chooser(|c| c.wants_footprint()) { core.local_cpu(&runs) } else { None };
        if let Some(c) = local {
            core.with_chooser(|ch| ch.local(2 * c as u32));
        }
        // The machine is serialized and hashed once here for the state hash and the
        // footprint's "before", which see the same machine.
        let hash = if core.with_chooser(|c| c.wants_state()) {
            core.fresh_machine();
            core.state_hash()
        } else {
            0
        };
        labels.clear();
        labels.extend(runs.iter().map(|&c| 2 * c as u32).chain(drains.iter().map(|&(c, _)| 2 * c as u32 + 1)));
        let Some(i) = core.choose(Point::Sched, &labels, hash) else { break };
        if let Some(saved) = saved.as_deref_mut() {
            if saved.is_empty() || core.with_chooser(|c| c.may_return()) {
                let depth = core.choices.borrow().len() - 1;
                let last = (last != usize::MAX).then_some(last);
                saved.save(core, cos, depth, Resume { steps, last, hash });
            }
        }
        let track = core.with_chooser(|c| c.wants_footprint());
        let before = (track && i < runs.len()).then(|| {
            *core.foot.borrow_mut() = Some(Foot::default());
            core.fresh_machine();
            core.others(runs[i])
        });
        steps += 1;
        core.st.borrow_mut().step = steps;
        if i < runs.len() {
            let cpu = runs[i];
            last = cpu;
            core.current.set(cpu);
            let trap = cos[cpu].trap_handler();
            let r = arena::inside(|| {
                quiet_panics(|| {
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        tlbkit_fault::guarded(cpu, trap, || cos[cpu].resume(()))
                    }))
                })
            });
            match r {
                Ok(CoroutineResult::Yield(())) => {}
                Ok(CoroutineResult::Return(())) => unreachable!("a CPU's kernel loop never returns"),
                Err(e) => {
                    violation = Some(gone_wrong::violation(cpu, e.as_ref()));
                    break;
                }
            }
        } else {
            let (cpu, upto) = drains[i - runs.len()];
            // What a drain adds to the state is the state's: in the arena.
            arena::inside(|| {
                for _ in 0..=upto {
                    let (addr, w, v) = core.st.borrow_mut().cpus[cpu].buffer.pop_front().expect("a buffered store");
                    core.drain_one(addr, w, v);
                    let k = core.addr_key(addr);
                    let mut st = core.st.borrow_mut();
                    st.cpus[cpu].history = mix(st.cpus[cpu].history, mix(0x18_0000 ^ k, v));
                    if core.record {
                        st.events.push(Event {
                            cpu: Some(cpu),
                            drain: true,
                            step: steps,
                            text: core.drained(addr, v),
                            kind: core.access_kind(addr, false, true),
                        });
                    }
                }
            });
        }
        if track {
            if before.is_some() {
                core.fresh_machine();
            }
            let foot = core.foot.borrow_mut().take();
            let foot = match (foot, before) {
                (Some(f), Some(h)) if core.others(runs[i]) == h => f,
                // A drain, or a step that changed what other CPUs see.
                (Some(f), _) => Foot { global: true, ..f },
                (None, _) => Foot::global(),
            };
            // A local step that did more than its access: the rest of the
            // state's options are explored after all.
            let broke = local.is_some_and(|c| i >= runs.len() || runs[i] != c || !core.is_local(c, &foot));
            core.with_chooser(|c| c.stepped(foot));
            if broke {
                core.with_chooser(|c| c.not_local());
            }
        }
        if core.pruned.get() {
            break;
        }
        // The hardware fills speculatively; the oracle looks.
        let mut st = core.st.borrow_mut();
        // What the fills add to the state is the state's: in the arena.
        let filled = arena::inside(|| {
            let mut fills = Vec::new();
            // Not through `DerefMut`: a fill that adds nothing changes nothing.
            let filled = st.m.m.fill(&mut fills);
            if core.record {
                for &(c, e) in &fills {
                    let entry = describe(&e);
                    let text = format!("speculative fill on cpu{c}: {entry}");
                    st.events.push(Event { cpu: None, drain: false, step: steps, text, kind: Kind::Fill(entry) });
                }
            }
            filled
        });
        st.m.changed |= filled;
        if let Some(v) = st.violation.take() {
            violation = Some(v);
            break;
        }
        let judged_before = core.with_chooser(|c| c.replaying());
        if !judged_before {
            if let Err(v) = st.m.check_uses().and_then(|()| st.m.check_block()) {
                violation = Some(v);
                break;
            }
        }
        if steps >= MAX_STEPS {
            violation = Some(Violation {
                property: "no_livelock",
                cpu: last,
                detail: format!("the execution took {MAX_STEPS} steps without ending"),
            });
            break;
        }
    }
    CURRENT.with(|c| c.set(std::ptr::null()));
    // Copy what the outcome keeps out of the arena (the engine runs with it off,
    // but violations and events made inside coroutines, drains and fills live
    // there).
    let mut st = core.st.borrow_mut();
    let events = std::mem::take(&mut st.events)
        .into_iter()
        .map(|e| Event { text: e.text.as_str().to_string(), kind: e.kind.clone(), ..e })
        .collect();
    let ops = st.cpus.iter().map(|c| c.ops_done).sum();
    Outcome {
        choices: core.choices.take(),
        violation: violation.map(|v| Violation { detail: v.detail.as_str().to_string(), ..v }),
        pruned: core.pruned.get(),
        steps,
        ops,
        events,
        unnamed: core.unnamed.borrow().iter().copied().collect(),
        rollovers: core.rollovers.get(),
        initiators: core.initiators.get(),
    }
}
