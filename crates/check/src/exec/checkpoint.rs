//! Checkpoints: an execution of a depth-first search starts where the
//! worker's last execution passed through the prefix the two share, not from
//! the beginning.
//!
//! A depth-first search runs one execution per choice it backtracks to, and
//! each replays the choices before it: on the standard bounds an execution
//! replays about forty steps for every new state it reaches, and replaying was
//! most of the search's time. A worker here keeps one execution alive instead
//! (its core, its coroutines on stacks it owns, its policy in the thread's
//! arena) and saves, at every scheduling point the execution passes where
//! the search may come back to take another option ([`Chooser::may_return`]),
//! what a later execution needs to stand at that point again:
//!
//! - the arena's bytes in use: the policy's memory and everything policy code
//!   and the kernel model allocated while the CPUs ran;
//! - each CPU's coroutine: its stack from the stack pointer it is suspended
//!   at up to its top, and the coroutine's handle (which holds that pointer);
//! - the execution's state (the machine, every CPU's scheduler
//!   state): its own bytes only, since everything it
//!   owns lies in the arena;
//! - the core's counters and the scheduler's own variables.
//!
//! The next execution restores the deepest checkpoint on the path it shares
//! with the last one and goes on from there; its chooser is told the choices
//! it skipped ([`Chooser::skip`]). Between executions nothing else changes:
//! the core stays at one address (the coroutines' stacks point at it), the
//! stacks are the same memory, and the arena is the thread's own, so every
//! address the restored bytes hold means what it meant when they were saved.
//!
//! What this assumes, and why it holds here:
//!
//! - *An execution is a function of its choices.* The same assumption that
//!   lets a search replay a prefix: a policy keeps its state in memory the
//!   arena serves (no statics, no thread-locals, no memory from another
//!   allocator). A checkpoint stands for every execution that made its
//!   choices, so restoring it is the same as replaying them.
//! - *Nothing below a paused coroutine's stack pointer is live* (a
//!   suspended coroutine runs nothing, and no signal handler runs on its
//!   stack). A CPU's stack is saved from a few bytes below the stack pointer
//!   its coroutine's handle holds, which the suspension saved after pushing
//!   what it keeps. (It was saved from a fixed margin below an address in the
//!   frame of the engine's pause, which held only while that frame kept its
//!   layout; the pointer itself assumes nothing of the frames, and saves
//!   about a quarter less.)
//! - *Everything the live state owns lies in the arena.* Then a bitwise copy
//!   of the state's own bytes, with the arena's, is the state: restoring both
//!   puts back every buffer it points to as it was, and the state is never
//!   cloned or dropped between executions (a restore writes over the live one
//!   without dropping it; its memory was the arena's). The state starts as a
//!   clone into the arena; CPUs run with the arena on; the scheduler, which
//!   runs with it off, turns it on where it adds to the state (store-buffer
//!   drains and speculative fills). It must be the arena's in any case,
//!   because a CPU may move part of the state onto its stack across a pause
//!   (a lazy flush it completes, the wait an interrupt handler suspends), and
//!   what a stack owns must be restored with the stack. Builds with debug
//!   assertions check that a restored state hashes as it did when saved.
//! - *The arena stays small.* The state's buffers are freed and grown at
//!   every step, so after the policy is built the arena recycles freed blocks
//!   by size class ([`arena::recycle`]), its free lists saved with its bytes:
//!   without that, every step's garbage would be copied at every later
//!   checkpoint (`arm64-linux-skipbcast` saved 19 KB per checkpoint when the
//!   state was cloned in at each restore, 6 KB with it living there).
//!
//! Builds with debug assertions check that every checkpoint restored lies
//! on the path it is restored along.
//!
//! `crates/check/tests/checkpoints.rs` compares searches with checkpoints on
//! and off: the same states, executions and verdicts for every policy, zoo
//! entries, two pages under TSO and several workers.

use super::{
    abandon, arena, build_policy, check, drive, new_core, run, start, take_stack, Choice, ChoiceKind, Chooser, Co,
    Core, Outcome, Policy, Resume, Shape, State, HOOKS, STACK_BYTES,
};
use corosensei::stack::Stack;
use std::hash::Hasher;
use std::marker::PhantomData;
use std::mem::MaybeUninit;

/// Bytes of a CPU's stack saved below the stack pointer its coroutine is
/// suspended at: none are live (the suspension pushed what it keeps and
/// then saved the pointer, and nothing runs on a suspended stack), so this
/// is a margin only.
const MARGIN: usize = 64;

/// The most checkpoints kept along one path (deeper scheduling points are
/// reached from the deepest by replaying).
const MAX_SAVED: usize = 1024;

/// The size of a coroutine's handle, saved as bytes.
const CO_BYTES: usize = std::mem::size_of::<Co<'static>>();

/// A worker's live execution and its checkpoints, for executions of one
/// policy (`P`, built by one `build`) on one shape. Executions through
/// [`run_from`] share it; dropping it ends the live execution.
pub struct Checkpoints<P> {
    live: Option<Live>,
    /// Steps its executions ran, not counting those a checkpoint put back;
    /// added to [`steps_run`]'s count when it is dropped.
    ran: u64,
    _policy: PhantomData<fn() -> P>,
}

impl<P> Default for Checkpoints<P> {
    fn default() -> Self {
        Checkpoints { live: None, ran: 0, _policy: PhantomData }
    }
}

impl<P> Checkpoints<P> {
    /// Returns a worker's empty store: its first execution starts from the
    /// beginning.
    pub fn new() -> Self {
        Self::default()
    }
}

impl<P> Drop for Checkpoints<P> {
    fn drop(&mut self) {
        STEPS_RUN.fetch_add(self.ran, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Steps run by the executions of every dropped [`Checkpoints`] of this
/// process, not counting those a checkpoint put back: the work a search did,
/// where its executions count how often it started one. Each worker adds
/// its own when it ends (a count per step would be a line every worker
/// writes), so a search's figure is the difference across it, once its
/// workers are done: the benchmarks' measure of replay.
static STEPS_RUN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// See [`STEPS_RUN`].
pub fn steps_run() -> u64 {
    STEPS_RUN.load(std::sync::atomic::Ordering::Relaxed)
}

/// The live execution: a core at a fixed address, the coroutines of its CPUs,
/// its policy (in the arena), and the checkpoints along its last path.
struct Live {
    core: Box<Core>,
    cos: Vec<Co<'static>>,
    /// The policy, in the thread's arena (its bytes are put back with the arena's).
    policy: *const (),
    saved: Saved,
}

impl Drop for Live {
    fn drop(&mut self) {
        self.cos.drain(..).enumerate().for_each(|(cpu, co)| abandon(cpu, co));
        // The live state is forgotten, not dropped: its memory is the arena's,
        // which another execution on this thread may have reset since.
        // SAFETY: nothing borrows it; an empty state owns no memory.
        unsafe { self.core.st.as_ptr().write(State::default()) };
    }
}

/// The checkpoints along the live execution's last path.
pub(super) struct Saved {
    /// Per CPU: the top of its coroutine's stack.
    tops: Vec<usize>,
    /// The choices of the last execution.
    path: Vec<Choice>,
    /// By increasing depth, each on `path`. Boxed: a checkpoint holds the
    /// state's bytes (about a kilobyte), which would otherwise be copied
    /// each time one moves between these lists (clippy's `vec_box` counts
    /// the heap's allocation, not the copies).
    #[allow(clippy::vec_box)]
    snaps: Vec<Box<Snap>>,
    /// Checkpoints no longer on the path, kept for their buffers.
    #[allow(clippy::vec_box)]
    spare: Vec<Box<Snap>>,
}

/// The checkpoint of `snaps` (along `path`) to start an execution forced
/// through `forced` from: the deepest on the prefix the two paths share and
/// before the last forced choice (the execution that made that choice must
/// run its step again, with the footprint the chooser wants), or the first.
#[allow(clippy::vec_box)]
fn candidate(path: &[Choice], snaps: &[Box<Snap>], forced: &[Choice]) -> Option<usize> {
    let common = path.iter().zip(forced).take_while(|(a, b)| a == b).count();
    snaps.iter().rposition(|s| s.depth <= common && (s.depth < forced.len() || s.depth == 0))
}

/// One checkpoint: everything an execution needs to stand again at a
/// scheduling point, before the choice made there.
struct Snap {
    /// Choices made before it.
    depth: usize,
    /// Builds with debug assertions: those choices, which the path it is
    /// restored along must begin with.
    #[cfg(debug_assertions)]
    made: Vec<Choice>,
    at: Resume,
    current: usize,
    low: Vec<usize>,
    rollovers: u32,
    initiators: u64,
    /// The core's machine hash then (the machine's, unless the state says it
    /// changed since).
    machine: u128,
    arena: arena::Image,
    /// Per CPU: the lowest address saved and the stack's bytes from there up.
    stacks: Vec<(usize, Vec<u8>)>,
    /// Per CPU: its coroutine's handle.
    cos: Vec<[u8; CO_BYTES]>,
    /// The state's own bytes, bit for bit: everything it owns lies in the
    /// arena, saved with it. Never dropped (the live state is the one owner).
    st: MaybeUninit<State>,
}

impl Snap {
    fn empty() -> Self {
        Snap {
            depth: 0,
            #[cfg(debug_assertions)]
            made: Vec::new(),
            at: Resume::default(),
            current: 0,
            low: Vec::new(),
            rollovers: 0,
            initiators: 0,
            machine: 0,
            arena: arena::Image::default(),
            stacks: Vec::new(),
            cos: Vec::new(),
            st: MaybeUninit::uninit(),
        }
    }
}

/// Returns the stack pointer a suspended coroutine's handle holds, found as
/// the lowest word of the handle inside its stack (the handle keeps the
/// pointer it resumes from and the one it started at, which is higher): a
/// checkpoint saves the stack from there up.
fn handle_sp(co: &Co<'_>, top: usize) -> Option<usize> {
    // SAFETY: the handle is plain data, read as words.
    let words = unsafe { std::slice::from_raw_parts(co as *const Co<'_> as *const usize, CO_BYTES / 8) };
    words.iter().copied().filter(|&w| w < top && w > top - STACK_BYTES).min()
}

impl Saved {
    /// Returns whether no checkpoint is saved (the first is always worth it:
    /// without one, the next execution starts from the beginning).
    pub(super) fn is_empty(&self) -> bool {
        self.snaps.is_empty()
    }

    /// Saves a checkpoint at the scheduling point where `depth` choices were
    /// made, unless one is saved there or deeper already.
    pub(super) fn save(&mut self, core: &Core, cos: &[Co<'_>], depth: usize, at: Resume) {
        if self.snaps.last().is_some_and(|s| s.depth >= depth) || self.snaps.len() >= MAX_SAVED {
            return;
        }
        let s = self.snap(core, cos, depth, at);
        self.snaps.push(s);
    }

    /// Returns a checkpoint of the execution as it stands.
    fn snap(&mut self, core: &Core, cos: &[Co<'_>], depth: usize, at: Resume) -> Box<Snap> {
        let mut s = self.spare.pop().unwrap_or_else(|| Box::new(Snap::empty()));
        s.depth = depth;
        #[cfg(debug_assertions)]
        {
            s.made.clear();
            s.made.extend_from_slice(&core.choices.borrow()[..depth]);
        }
        s.at = at;
        s.current = core.current.get();
        s.low.clear();
        s.low.extend(core.low.iter().map(std::cell::Cell::get));
        s.rollovers = core.rollovers.get();
        s.initiators = core.initiators.get();
        s.machine = core.machine_hash.get();
        arena::save(&mut s.arena);
        s.stacks.resize_with(cos.len(), || (0, Vec::new()));
        s.cos.resize(cos.len(), [0; CO_BYTES]);
        for (cpu, co) in cos.iter().enumerate() {
            let top = self.tops[cpu];
            let low = core.low[cpu].get();
            assert!(low < top && low > top - STACK_BYTES, "cpu{cpu} paused off its stack");
            let sp = handle_sp(co, top).expect("a suspended coroutine's handle holds its stack pointer");
            assert!(sp <= low, "cpu{cpu} is suspended above its pause");
            let from = (sp - MARGIN).max(top - STACK_BYTES);
            let (at, bytes) = &mut s.stacks[cpu];
            *at = from;
            bytes.clear();
            bytes.reserve(top - from);
            tlbkit_fault::asan_unpoison(from, top - from);
            // SAFETY: `from..top` is this coroutine's stack, mapped and ours
            // (it is suspended); `bytes` has room.
            unsafe {
                std::ptr::copy_nonoverlapping(from as *const u8, bytes.as_mut_ptr(), top - from);
                bytes.set_len(top - from);
                std::ptr::copy_nonoverlapping(co as *const Co<'_> as *const u8, s.cos[cpu].as_mut_ptr(), CO_BYTES);
            }
        }
        // SAFETY: a bitwise copy of the live state, which the checkpoint
        // never uses as a value except to put back in the live state's place.
        s.st = MaybeUninit::new(unsafe { std::ptr::read(&*core.st.borrow()) });
        s
    }

    /// Puts the execution back at checkpoint `k` (dropping the deeper ones);
    /// returns how many choices were made before it and where the scheduler
    /// resumes.
    fn restore(&mut self, k: usize, core: &Core, cos: &mut [Co<'_>]) -> (usize, Resume) {
        while self.snaps.len() > k + 1 {
            let s = self.snaps.pop().expect("a deeper checkpoint");
            self.spare.push(s);
        }
        let s = &self.snaps[k];
        #[cfg(debug_assertions)]
        assert_eq!(self.path[..s.depth], s.made[..], "a checkpoint restored along a path it is not on");
        // SAFETY: no coroutine runs, and nothing alive outside the arena
        // points into it except the coroutines' stacks and handles (put back
        // below) and the state (replaced below).
        unsafe { arena::restore(&s.arena) };
        for (cpu, co) in cos.iter_mut().enumerate() {
            let (from, bytes) = &s.stacks[cpu];
            // The whole stack, not only the bytes put back: the frames the
            // coroutine had below them never return, and their marks would
            // make the next frames there read as out of scope.
            let top = self.tops[cpu];
            tlbkit_fault::asan_unpoison(top - STACK_BYTES, STACK_BYTES);
            // Its frames return again from where they were.
            tlbkit_fault::rewind_fiber(cpu);
            // SAFETY: the same stack, suspended; the handle is plain data and
            // these bytes are a handle of this coroutine on this stack.
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), *from as *mut u8, bytes.len());
                std::ptr::copy_nonoverlapping(s.cos[cpu].as_ptr(), co as *mut Co<'_> as *mut u8, CO_BYTES);
            }
        }
        // The state as it was, over the live one, which is not dropped: its
        // memory was the arena's, whose bytes are now the checkpoint's.
        // SAFETY: `s.st` was saved with the arena just restored, so all it
        // points to is as it was; nothing borrows the live state now.
        unsafe { core.st.as_ptr().write(s.st.assume_init_read()) };
        core.current.set(s.current);
        for (c, &l) in core.low.iter().zip(&s.low) {
            c.set(l);
        }
        core.rollovers.set(s.rollovers);
        core.initiators.set(s.initiators);
        // With the state's note of whether the machine changed since it was
        // hashed, restored above.
        core.machine_hash.set(s.machine);
        core.pruned.set(false);
        *core.foot.borrow_mut() = None;
        let mut choices = super::choices_buffer();
        choices.extend_from_slice(&self.path[..s.depth]);
        *core.choices.borrow_mut() = choices;
        (s.depth, s.at)
    }
}

/// Runs one execution as [`run`] does (not recorded), starting from the
/// deepest checkpoint of `cp` on the path the chooser's
/// [`Chooser::forced`] choices share with the last execution, and saving
/// checkpoints along the rest. A chooser with no forced choices runs it from
/// the beginning, as [`run`] does.
///
/// The same `cp` must serve one policy built by one `build` on one `shape`,
/// on one thread.
pub fn run_from<P: Policy>(
    cp: &mut Checkpoints<P>,
    shape: &Shape,
    build: &dyn Fn() -> P,
    chooser: &mut dyn Chooser,
) -> Outcome {
    let Some(forced) = chooser.forced() else {
        let out = run(shape, build, chooser, false);
        cp.ran += out.steps as u64;
        return out;
    };
    let found = cp
        .live
        .as_mut()
        .filter(|l| l.core.shape == *shape)
        .and_then(|l| candidate(&l.saved.path, &l.saved.snaps, forced));
    check::install(&HOOKS);
    super::guard_policy_code();
    arena::ensure();
    let was = arena::set_active(false);
    let from = match found {
        Some(k) => {
            let live = cp.live.as_mut().expect("a live execution");
            let (made, at) = live.saved.restore(k, &live.core, &mut live.cos);
            let last_sched = live.saved.path[..made].iter().rposition(|c| c.point == ChoiceKind::Sched);
            chooser.skip(made, last_sched);
            at
        }
        None => {
            // The old execution ends before the new one resets the arena.
            cp.live = None;
            cp.live = Some(Live::start(shape, build));
            Resume::default()
        }
    };
    let live = cp.live.as_mut().expect("a live execution");
    let policy = live.policy as *const P;
    // SAFETY: the policy lives in the arena for as long as the live execution,
    // and the core calls this only between steps, when no CPU runs it.
    let locked = |h: &mut dyn Hasher| unsafe { (*policy).hash_locked(h) };
    // SAFETY: both outlive this execution, the last use of the core before
    // the next `lend`.
    unsafe { live.core.lend(chooser, &locked) };
    let restored = from.steps;
    let out = drive(&live.core, &mut live.cos, from, Some(&mut live.saved));
    cp.ran += out.steps.saturating_sub(restored) as u64;
    live.saved.path.clear();
    live.saved.path.extend_from_slice(&out.choices);
    arena::set_active(was);
    out
}

/// Returns a clone of `st` whose memory is the arena's, as the live state's
/// must be (see the module documentation).
fn in_arena(st: &State) -> State {
    arena::inside(|| st.clone())
}

impl Live {
    /// Builds the policy in the reset arena and starts every CPU, with no
    /// checkpoint yet.
    fn start<P: Policy>(shape: &Shape, build: &dyn Fn() -> P) -> Live {
        arena::reset();
        let (policy, mark) = arena::inside(|| build_policy(shape, build));
        // Read after the build: a policy may have moved the arena (`arena::adopt`).
        let base = arena::base();
        // From here the arena recycles what is freed: it holds the state, and
        // its bytes are saved at every checkpoint.
        arena::recycle();
        // Outside the arena: the core must keep its address and its bytes
        // when the arena's are put back.
        let core = Box::new(new_core(shape, &*policy, base, mark, Default::default(), false));
        let st = in_arena(&core.st.borrow());
        *core.st.borrow_mut() = st;
        let policy = Box::into_raw(policy);
        let stacks: Vec<_> = (0..shape.cpus).map(|_| take_stack()).collect();
        let tops = stacks.iter().map(|s| s.base().get()).collect();
        let mut stacks = stacks.into_iter();
        // SAFETY: the policy lives in the arena as long as this execution.
        let cos = start(&core, unsafe { &*policy }, || stacks.next().expect("a stack per CPU"));
        Live {
            core,
            cos,
            policy: policy as *const (),
            saved: Saved { tops, path: Vec::new(), snaps: Vec::new(), spare: Vec::new() },
        }
    }
}
