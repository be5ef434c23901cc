//! The execution arena: every allocation made while an execution runs comes from
//! one bump region that is reset, not freed, between executions.
//!
//! Two things need it. State hashing keys shared memory by address, so the
//! policy's atomics must sit at the same addresses in every execution: the
//! policy is built at the start of each execution from the same empty arena, so
//! the same sequence of allocations gives the same addresses. And an execution
//! cut short (its state was seen before) is abandoned with its coroutines'
//! stacks as they are: what they own lives in the arena and goes with it.
//!
//! [`CheckAlloc`] must be the binary's global allocator for this to hold (the
//! `tlbkit` binary and the checker's tests install it). Without it everything
//! still runs, but state hashing prunes less (addresses differ from execution
//! to execution) and abandoned executions leak what their stacks owned.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A global allocator that serves the calling thread's arena while one is active.
pub struct CheckAlloc;

/// The arena of the calling thread: `base`, `len`, and how much is used.
struct Region {
    base: Cell<usize>,
    len: Cell<usize>,
    used: Cell<usize>,
    active: Cell<bool>,
}

thread_local! {
    static REGION: Region = const {
        Region { base: Cell::new(0), len: Cell::new(0), used: Cell::new(0), active: Cell::new(false) }
    };
}

// SAFETY: arena allocations are disjoint bump-allocated blocks of a region this
// thread owns for the arena's lifetime; everything else goes to `System`.
unsafe impl GlobalAlloc for CheckAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = REGION
            .try_with(|r| {
                if !r.active.get() {
                    return None;
                }
                let start = (r.base.get() + r.used.get()).next_multiple_of(layout.align());
                let end = start + layout.size();
                if end > r.base.get() + r.len.get() {
                    return None;
                }
                r.used.set(end - r.base.get());
                Some(start as *mut u8)
            })
            .ok()
            .flatten();
        // SAFETY: forwarded with the caller's layout.
        p.unwrap_or_else(|| unsafe { System.alloc(layout) })
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if !in_any_arena(ptr as usize) {
            // SAFETY: not an arena block, so `System` allocated it.
            unsafe { System.dealloc(ptr, layout) }
        }
    }
}

/// Every arena region ever handed out (by base address; each is `ARENA_BYTES`
/// long), for `dealloc` on any thread. Regions are leaked on purpose (one per
/// checker thread, reused for all its executions). A fixed table, so that no
/// allocation or lock is ever needed inside the allocator.
static REGIONS: [AtomicUsize; MAX_REGIONS] = [const { AtomicUsize::new(0) }; MAX_REGIONS];
/// How many entries of [`REGIONS`] are taken.
static NREGIONS: AtomicUsize = AtomicUsize::new(0);
/// The most checker threads a process may have.
const MAX_REGIONS: usize = 256;

/// Returns whether `addr` lies in an arena region.
fn in_any_arena(addr: usize) -> bool {
    let n = NREGIONS.load(Ordering::Acquire).min(MAX_REGIONS);
    REGIONS[..n].iter().any(|b| {
        // Acquire: pairs with the Release store of a region's base.
        let b = b.load(Ordering::Acquire);
        b != 0 && addr >= b && addr < b + ARENA_BYTES
    })
}

/// How big each thread's arena is.
const ARENA_BYTES: usize = 64 << 20;

/// Makes sure the calling thread has an arena and returns its base address.
pub fn ensure() -> usize {
    REGION.with(|r| {
        if r.len.get() == 0 {
            let layout = Layout::from_size_align(ARENA_BYTES, 4096).expect("a valid layout");
            // SAFETY: non-zero size.
            let base = unsafe { System.alloc(layout) } as usize;
            assert!(base != 0, "the checker could not reserve its {} MiB arena", ARENA_BYTES >> 20);
            let i = NREGIONS.fetch_add(1, Ordering::AcqRel);
            assert!(i < MAX_REGIONS, "more than {MAX_REGIONS} threads ran the checker");
            // Release: a thread that finds the count finds the base.
            REGIONS[i].store(base, Ordering::Release);
            r.base.set(base);
            r.len.set(ARENA_BYTES);
        }
        r.base.get()
    })
}

/// Empties the calling thread's arena. Everything allocated in it must be dead.
pub fn reset() {
    REGION.with(|r| r.used.set(0));
}

/// Routes the calling thread's allocations to its arena (`true`) or to the
/// system allocator (`false`); returns the previous setting.
pub fn set_active(on: bool) -> bool {
    REGION.with(|r| r.active.replace(on))
}

/// Runs `f` with this thread's arena inactive, so that what it allocates
/// outlives the execution (then puts the arena back as it was).
pub fn outside<T>(f: impl FnOnce() -> T) -> T {
    let was = set_active(false);
    let t = f();
    set_active(was);
    t
}

/// Runs `f` with this thread's arena active, so that what it allocates is
/// the execution's (then puts the arena back as it was).
pub fn inside<T>(f: impl FnOnce() -> T) -> T {
    let was = set_active(true);
    let t = f();
    set_active(was);
    t
}

/// Returns how many bytes of the arena are in use.
pub fn used() -> usize {
    REGION.with(|r| r.used.get())
}

/// Returns whether `addr` is in the calling thread's arena below `mark` bytes.
pub fn below(addr: usize, mark: usize) -> bool {
    REGION.with(|r| addr >= r.base.get() && addr < r.base.get() + mark)
}

/// Copies the bytes in use of the calling thread's arena into `into` (for a
/// checkpoint, [`crate::exec::Checkpoints`]).
pub fn save(into: &mut Vec<u8>) {
    REGION.with(|r| {
        let used = r.used.get();
        into.clear();
        into.reserve(used);
        // SAFETY: the region is this thread's, mapped and at least `used`
        // bytes long; `into` has room for `used` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(r.base.get() as *const u8, into.as_mut_ptr(), used);
            into.set_len(used);
        }
    })
}

/// Puts the arena back as [`save`] found it: its bytes and how much is used.
///
/// # Safety
/// Everything allocated in the arena since must be dead, and nothing may be
/// running that holds a reference into it: the bytes under every live
/// reference change.
pub unsafe fn restore(from: &[u8]) {
    REGION.with(|r| {
        assert!(from.len() <= r.len.get(), "a checkpoint of another arena");
        // SAFETY: the region is this thread's and at least `from.len()` long;
        // the caller vouches that nothing reads it meanwhile.
        unsafe { std::ptr::copy_nonoverlapping(from.as_ptr(), r.base.get() as *mut u8, from.len()) };
        r.used.set(from.len());
    })
}
