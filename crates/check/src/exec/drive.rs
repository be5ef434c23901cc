//! Running one execution: building the policy and the engine's core, the CPUs'
//! coroutines and their stacks, and the drive loop that asks the chooser for
//! each step and runs it.

use super::*;
use arrayvec::ArrayVec;

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
pub(super) fn build_policy<P: Policy>(shape: &Shape, build: &dyn Fn() -> P) -> (Box<P>, usize) {
    let policy = Box::new(build());
    let mark = arena::used();
    for s in 1..=shape.mms as u32 {
        policy.mm_init(MmId(s));
    }
    (policy, mark)
}

/// Returns a fresh execution's core (every address space forked by the
/// kernel, every CPU between operations), with no chooser yet ([`Core::lend`]).
pub(super) fn new_core<P: Policy>(
    shape: &Shape,
    policy: &P,
    base: usize,
    mark: usize,
    names: BTreeMap<usize, (String, Value)>,
    record: bool,
) -> Core {
    let global_user = policy.user_ptes_global();
    let consts = RunConstants {
        pages: shape.pages,
        global_user,
        contpte: shape.teardown.is_some(),
        va_drops_walks: !shape.arm64,
        reads_flag: policy.defers() == Some(Defer::WhileMmFlagged),
    };
    let mut m = Machine::new(shape.cpus, shape.mms, consts);
    for s in 1..=shape.mms as u32 {
        m.fork(s, 0).expect("a fresh machine has no obligations");
    }
    let cpus = (0..shape.cpus)
        .map(|_| Cpu {
            block: Block::No,
            irq_off: 0,
            in_handler: false,
            interrupted: None,
            pending: VecDeque::new(),
            buffer: Buffer::default(),
            sync_out: 0,
            history: 0,
            reads: Vec::new(),
            trail: (0, 0),
            next: None,
            anchor: None,
            ops_done: 0,
            held: [NO_LOCK; MAX_HELD],
            preempt: Preempt::No,
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
        stale: Stale::default(),
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
    pub(super) unsafe fn lend(&self, chooser: &mut dyn Chooser, locked: &dyn Fn(&mut dyn Hasher)) {
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
    pub(super) fn with_chooser<R>(&self, f: impl FnOnce(&mut dyn Chooser) -> R) -> R {
        self.with_lent_chooser(f).expect("a chooser is lent before the execution steps, and not in use")
    }

    /// Runs `f` with the execution's chooser if one is lent (`None` if not:
    /// the CPUs run to their first pause before it is, when an execution starts
    /// for checkpoints).
    pub(super) fn with_lent_chooser<R>(&self, f: impl FnOnce(&mut dyn Chooser) -> R) -> Option<R> {
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
pub(super) fn take_buffer() -> Vec<u8> {
    arena::outside(|| BUFFERS.with(|b| b.borrow_mut().pop()).unwrap_or_default())
}

/// Keeps a hash buffer for the next execution, unless it grew while the arena
/// was active (the hashes run with it off, so it should not): the arena is
/// reset between executions, so its memory must not outlive this one. Called
/// before that reset, when everything this execution allocated there lies
/// below [`arena::used`].
pub(super) fn give_buffer(mut b: Vec<u8>) {
    if arena::below(b.as_ptr() as usize, arena::used()) {
        debug_assert!(false, "a hash buffer grew inside the execution's arena");
        std::mem::forget(b);
        return;
    }
    b.clear();
    arena::outside(|| BUFFERS.with(|v| v.borrow_mut().push(b)));
}

/// The coroutine stack size: policy code in debug builds with nested handlers.
pub(super) const STACK_BYTES: usize = 256 << 10;

pub(super) fn take_stack() -> DefaultStack {
    STACKS.with(|s| s.borrow_mut().pop()).unwrap_or_else(|| {
        arena::outside(|| DefaultStack::new(STACK_BYTES).expect("the checker could not map a coroutine stack"))
    })
}

pub(super) fn give_stack(s: DefaultStack) {
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
pub(super) fn abandon(cpu: usize, mut co: Co<'_>) {
    if !co.done() {
        // SAFETY: nothing on the stack needs dropping for soundness: its
        // objects are arena memory or guards of this execution's own state.
        unsafe { co.force_reset() };
    }
    tlbkit_fault::forget_fiber(cpu);
    give_stack(co.into_stack());
}

pub(super) type Co<'a> = Coroutine<(), (), (), DefaultStack>;

/// One drain the scheduler may offer: the stores of CPU `cpu`'s buffer in
/// `leaving` become visible (a wanted store with every store that must be
/// visible before it, [`Buffer::with_older`]). `second` marks the arm mode's
/// second drain of a CPU (its own label, [`drain_label`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct Drain {
    pub cpu: usize,
    pub leaving: Leaving,
    pub second: bool,
}

/// Returns the scheduling label of a drain among `n` CPUs: `2 * cpu + 1`, and
/// for the arm mode's second drain of a CPU `2 * n + cpu` (then invalidations
/// completed early take `3 * n + cpu`, [`complete_label`]).
pub(super) fn drain_label(d: &Drain, n: usize) -> u32 {
    if d.second {
        (2 * n + d.cpu) as u32
    } else {
        2 * d.cpu as u32 + 1
    }
}

/// Returns the scheduling label of completing CPU `cpu`'s first pending
/// invalidation early ([`Completion::Any`]): after every CPU's run and drain
/// labels.
pub(super) fn complete_label(memory: Memory, cpu: usize, n: usize) -> u32 {
    let first = if memory == Memory::Arm { 3 * n } else { 2 * n };
    (first + cpu) as u32
}

/// Puts into `out` the store-buffer drains worth offering. A buffered store
/// matters to other CPUs only when one of them is about to access its address,
/// or spins on it (a PTE store always: page-table walkers read all the time);
/// draining a store later than a real CPU would is never observable before
/// that access. Under TSO a CPU's buffer drains up to the newest such store
/// (the older ones leave with it). Under the arm mode a wanted store leaves
/// with only what must precede it, and a CPU offers two drains when it holds
/// two wanted stores that may leave apart: the oldest and the newest (three or
/// more wanted at once leave in no other order; the guide says so). When no
/// CPU can step (`stuck`), every buffer may drain whole.
pub(super) fn drain_options(st: &State, memory: Memory, stuck: bool, out: &mut Options<Drain>) {
    out.clear();
    let fifo = memory != Memory::Arm;
    for c in 0..st.cpus.len() {
        let buf = &st.cpus[c].buffer;
        if buf.is_empty() {
            continue;
        }
        let wanted = |addr: usize| {
            pte_store(addr).is_some()
                || st.cpus.iter().enumerate().any(|(d, cpu)| {
                    d != c
                        && (cpu.next.is_some_and(|(a, _)| a == addr)
                            || matches!(&cpu.block, Block::Spin(reads, _) if reads.iter().any(|(a, _)| *a == addr)))
                })
        };
        let mut wants = buf.iter().enumerate().filter(|(_, s)| wanted(s.addr)).map(|(k, _)| k);
        let Some(oldest) = wants.next() else {
            if stuck {
                out.push(Drain { cpu: c, leaving: Leaving::MAX, second: false });
            }
            continue;
        };
        let newest = wants.last().unwrap_or(oldest);
        if fifo {
            out.push(Drain { cpu: c, leaving: buf.with_older(newest, true), second: false });
            continue;
        }
        out.push(Drain { cpu: c, leaving: buf.with_older(oldest, false), second: false });
        let last = buf.with_older(newest, false);
        if oldest < 64 && last & 1 << oldest == 0 {
            out.push(Drain { cpu: c, leaving: last, second: true });
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
pub(super) fn quiet_panics<T>(f: impl FnOnce() -> T) -> T {
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
pub(super) fn start<P: Policy>(core: &Core, policy: &P, mut stack: impl FnMut() -> DefaultStack) -> Vec<Co<'static>> {
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

/// The most options of one kind at a scheduling point: a run and two drains
/// for each of the checker's 8 CPUs fit, as do an early completion for each.
const OPTIONS: usize = 16;

/// A scheduling point's options of one kind, on the stack.
pub(super) type Options<T> = ArrayVec<T, OPTIONS>;

/// Where [`drive`] starts: the scheduler's own variables at a scheduling point.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Resume {
    /// Steps taken so far.
    pub(super) steps: usize,
    /// The CPU that stepped last (`None` before the first step).
    last: Option<usize>,
    /// The state's hash there, where the search computed one (0 otherwise):
    /// builds with debug assertions check that a restored checkpoint
    /// hashes the same.
    hash: u128,
}

/// Steps the execution from `from` until it ends, then returns how; with
/// `saved`, it saves a checkpoint at every scheduling point deeper than its
/// deepest where the chooser may come back ([`Chooser::may_return`]).
pub(super) fn drive(
    core: &Core,
    cos: &mut [Co<'_>],
    from: Resume,
    mut saved: Option<&mut checkpoint::Saved>,
) -> Outcome {
    let n = core.shape.cpus;
    CURRENT.with(|c| c.set(core));
    arena::set_active(false);
    let mut violation = None;
    let mut steps = from.steps;
    let mut last = from.last.unwrap_or(usize::MAX);
    // The options' buffers, kept across steps (this loop runs for every step of
    // every execution, replayed or not), on this thread's stack: small heap
    // blocks read at every step lay on cache lines another worker's blocks
    // shared (the allocator hands a block freed by one thread to that
    // thread, and work moves between workers with its vectors), and those
    // lines moved between cores at every step (see
    // `bench/2026-12-01-check-step-overheads.md`).
    let mut runs: Options<usize> = Options::new();
    let mut drains: Options<Drain> = Options::new();
    // Filled only with `Completion::Any`.
    let mut completes: Options<usize> = Options::new();
    let mut labels: ArrayVec<u32, { 2 * OPTIONS }> = ArrayVec::new();
    let mut after: Option<After> = None;
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
            drain_options(&st, core.shape.memory, runs.is_empty(), &mut drains);
            completes.clear();
            if core.shape.completion == Completion::Any {
                completes.extend((0..n).filter(|&c| st.m.has_pending(c)));
            }
        }
        let total = runs.len() + drains.len() + completes.len();
        if total == 0 {
            violation = deadlock(core);
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
        labels.extend(runs.iter().map(|&c| 2 * c as u32).chain(drains.iter().map(|d| drain_label(d, n))));
        labels.extend(completes.iter().map(|&c| complete_label(core.shape.memory, c, n)));
        let Some(i) = core.choose(ChoiceKind::Sched, &labels, hash) else {
            break;
        };
        if let Some(saved) = saved.as_deref_mut() {
            if saved.is_empty() || core.with_chooser(|c| c.may_return()) {
                let depth = core.choices.borrow().len() - 1;
                let last = (last != usize::MAX).then_some(last);
                saved.save(core, cos, depth, Resume { steps, last, hash });
            }
        }
        let track = core.with_chooser(|c| c.tracks_step());
        // What the last step's footprint left, good for this step only.
        let kept = after.take();
        let before = (track && i < runs.len()).then(|| {
            *core.foot.borrow_mut() = Some(Foot::default());
            core.fresh_machine();
            match kept {
                Some(k) if k.cpu == runs[i] && k.machine == core.machine_hash.get() => {
                    debug_assert_eq!(k.others, core.others(k.cpu), "a kept footprint hash went stale");
                    k.others
                }
                _ => core.others(runs[i]),
            }
        });
        steps += 1;
        core.st.borrow_mut().step = steps;
        if i < runs.len() {
            let cpu = runs[i];
            last = cpu;
            if let Err(v) = step_cpu(core, cos, cpu) {
                violation = Some(v);
                break;
            }
        } else if i < runs.len() + drains.len() {
            let d = drains[i - runs.len()];
            drain(core, d.cpu, d.leaving, steps);
        } else {
            complete_early(core, completes[i - runs.len() - drains.len()], steps);
        }
        if track {
            after = footprint(core, runs.get(i).copied(), before, local);
        }
        if core.pruned.get() {
            break;
        }
        if let Some(v) = fill_and_judge(core, steps) {
            violation = Some(v);
            break;
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
    outcome(core, violation, steps)
}

/// The violation when no CPU can take a step: a CPU that is not idle waits
/// for something that can no longer happen (none when every CPU is idle).
fn deadlock(core: &Core) -> Option<Violation> {
    let st = core.st.borrow();
    let c = (0..core.shape.cpus).find(|&c| !matches!(st.cpus[c].block, Block::Idle))?;
    Some(Violation {
        property: "no_deadlock",
        cpu: c,
        detail: format!(
            "no CPU can take a step: cpu{c} waits ({:?}) for something that can no longer happen",
            st.cpus[c].block
        ),
    })
}

/// Runs `cpu`'s kernel to its next yield; a panic or a fault of the policy
/// is the violation returned.
fn step_cpu(core: &Core, cos: &mut [Co<'_>], cpu: usize) -> Result<(), Violation> {
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
        Ok(CoroutineResult::Yield(())) => Ok(()),
        Ok(CoroutineResult::Return(())) => unreachable!("a CPU's kernel loop never returns"),
        Err(e) => Err(gone_wrong::violation(cpu, e.as_ref())),
    }
}

/// Drains the stores of `cpu`'s store buffer in `leaving`, oldest first, as
/// one scheduling step.
fn drain(core: &Core, cpu: usize, mut leaving: Leaving, steps: usize) {
    // What a drain adds to the state is the state's: in the arena.
    arena::inside(|| loop {
        let taken = core.st.borrow_mut().cpus[cpu].buffer.take_oldest(&mut leaving);
        let Some(Stored { addr, w, v, .. }) = taken else { break };
        core.drain_one(cpu, addr, w, v);
        let k = core.addr_key(addr);
        let mut st = core.st.borrow_mut();
        st.cpus[cpu].history = mix(st.cpus[cpu].history, mix(0x18_0000 ^ k, v));
        if core.record {
            st.events.push(Event {
                cpu: Some(cpu),
                drain: true,
                step: steps,
                text: core.drained(addr, v),
                kind: core.access_kind(addr, Rw::Write),
            });
        }
    });
}

/// Completes CPU `cpu`'s first pending invalidation (in [`Pending::key`]
/// order) before its barrier, as a step of its own ([`Completion::Any`]): on
/// every TLB it covers, its refills since it was issued included.
fn complete_early(core: &Core, cpu: usize, steps: usize) {
    arena::inside(|| {
        let mut st = core.st.borrow_mut();
        let first = Cell::new(true);
        let mut done = None;
        let part = |_: &Pending| if first.replace(false) { Part::Whole } else { Part::Nothing };
        st.m.complete(cpu, part, |p, removed, _| done = Some((p, removed)));
        let Some((p, removed)) = done else { return };
        forget_issued(&mut st.issued, cpu, p.key());
        if core.record {
            let text = format!(
                "cpu{cpu}: {:?} issued earlier completes before its barrier, {removed} {}",
                p.op,
                entries_removed(removed)
            );
            st.events.push(Event { cpu: Some(cpu), drain: false, step: steps, text, kind: Kind::Invalidate });
        }
    });
}

/// [`Core::others`] of the CPU that just stepped, after its step, with the
/// machine hash it began with.
///
/// Nothing between a step's footprint and the next scheduling point changes
/// a CPU's execution state (the speculative fills and the oracle touch the
/// machine only), so when the same CPU steps next (the search's first option
/// at every point) and the machine hashes the same, this is the next step's
/// "before" as it stands, and one of the two hashes of a step is not made.
/// Good for the next scheduling point only: a drain or a completion there
/// changes a CPU's state without a footprint.
#[derive(Clone, Copy)]
struct After {
    cpu: usize,
    machine: u128,
    others: u64,
}

/// Tells the chooser the footprint of the step just taken: `ran` the CPU
/// that stepped (`None` for a drain), `before` what the other CPUs saw
/// before it, `local` the CPU whose step was announced as local. Returns
/// what the other CPUs see after it, when it hashed that ([`After`]).
fn footprint(core: &Core, ran: Option<usize>, before: Option<u64>, local: Option<usize>) -> Option<After> {
    if before.is_some() {
        core.fresh_machine();
    }
    let foot = core.foot.borrow_mut().take();
    let after = match (&foot, before, ran) {
        (Some(_), Some(_), Some(cpu)) => {
            Some(After { cpu, machine: core.machine_hash.get(), others: core.others(cpu) })
        }
        _ => None,
    };
    let foot = match foot {
        Some(f) if after.is_some_and(|a| Some(a.others) == before) => f,
        // A drain, or a step that changed what other CPUs see.
        Some(f) => Foot { global: true, ..f },
        None => Foot::global(),
    };
    // A local step that did more than its access: the rest of the
    // state's options are explored after all.
    let broke = local.is_some_and(|c| ran != Some(c) || !core.is_local(c, &foot));
    core.with_chooser(|c| c.stepped(foot));
    if broke {
        core.with_chooser(|c| c.not_local());
    }
    after
}

/// After a step: the hardware fills speculatively, then the oracle looks;
/// returns the violation it sees.
fn fill_and_judge(core: &Core, steps: usize) -> Option<Violation> {
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
        return Some(v);
    }
    let judged_before = core.with_chooser(|c| c.replaying());
    if judged_before {
        return None;
    }
    st.m.check_uses().and_then(|()| st.m.check_block()).err()
}

/// The execution's outcome, once it ended with `violation` after `steps`.
fn outcome(core: &Core, violation: Option<Violation>, steps: usize) -> Outcome {
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
