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
//! A checkpointed execution ([`crate::exec::Checkpoints`]) also keeps its
//! state in the arena and saves the arena's bytes at every checkpoint, so the
//! arena must stay small: once the policy is built, [`recycle`] turns on
//! size classes (powers of two from 16 bytes to 4 KiB), and a freed block of
//! a class goes on that class's free list for the next allocation of the class.
//! The lists are threaded through the free blocks themselves, so saving the
//! arena's bytes and its list heads ([`Image`]) saves the allocator with them.
//! Before [`recycle`] (and in executions that never call it), nothing is
//! reused: blocks are bumped at their exact size, as the policy's addresses
//! were always laid out.
//!
//! [`CheckAlloc`] must be the binary's global allocator for this to hold (the
//! `tlbkit` binary and the checker's tests install it). Without it a policy's
//! heap lies outside the arena, so a checkpoint restores the policy's atomics
//! but not what it allocated, and a search reports states no execution can
//! reach (a policy with a `Vec` of locks deadlocks where it cannot): the
//! checker refuses to start instead ([`installed`], `Error::NoCheckAlloc`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A global allocator that serves the calling thread's arena while one is active.
pub struct CheckAlloc;

/// The arena of the calling thread: `base`, `len`, how much is used, and,
/// once [`recycle`] is called, where recycling starts and the free lists.
struct Region {
    base: Cell<usize>,
    len: Cell<usize>,
    used: Cell<usize>,
    /// Bytes at the region's start that a reset keeps: policy state kept
    /// outside the allocator ([`adopt`]); 0 for a region of the arena's own.
    start: Cell<usize>,
    active: Cell<bool>,
    /// The offset from which blocks are size-classed and recycled
    /// ([`NO_RECYCLING`] before [`recycle`]).
    floor: Cell<usize>,
    /// Per size class: the first free block (0 when none); each free block's
    /// first word is the next.
    heads: [Cell<usize>; CLASSES],
    /// The region [`ensure`] reserved for this thread, if it has one: it goes
    /// to [`SPARE`] when the thread ends (or adopts another), for the next
    /// thread (a region is never freed: another thread may still free a
    /// block it holds into it).
    own: Cell<usize>,
}

impl Drop for Region {
    fn drop(&mut self) {
        let own = self.own.get();
        if own != 0 {
            spare_push(own);
        }
    }
}

/// Regions of threads that ended, for [`ensure`] to hand out again: a
/// process that starts checker threads by the thousand (a distributed
/// search's tasks, one search after another) needs as many regions as it
/// has threads at once, not as it ever had. Base addresses, 0 for a free
/// slot.
///
/// A fixed table, never a growable list: a region is given back while the
/// giving thread's arena may be active ([`adopt`] runs while a policy is
/// built, inside an execution), and a list that grew then would have put
/// its buffer in that arena, to be overwritten by the next execution (it
/// was: a later thread took a garbage base from it and crashed).
static SPARE: [AtomicUsize; MAX_REGIONS] = [const { AtomicUsize::new(0) }; MAX_REGIONS];

/// Gives the region at `base` back for another thread.
fn spare_push(base: usize) {
    // AcqRel: the taker that finds the base finds the region's last use before it.
    let given = SPARE.iter().any(|s| s.compare_exchange(0, base, Ordering::AcqRel, Ordering::Relaxed).is_ok());
    // Every region has a slot of REGIONS, so SPARE (as long) always has a free one.
    debug_assert!(given, "more spare regions than regions");
}

/// Takes a region given back by a thread that no longer uses it.
fn spare_pop() -> Option<usize> {
    SPARE.iter().find_map(|s| {
        let b = s.load(Ordering::Acquire);
        // AcqRel: as in `spare_push`; a slot another taker emptied first is skipped.
        (b != 0 && s.compare_exchange(b, 0, Ordering::AcqRel, Ordering::Relaxed).is_ok()).then_some(b)
    })
}

/// [`Region::floor`] while nothing is recycled.
const NO_RECYCLING: usize = usize::MAX;
/// Size classes: 16 bytes to 4 KiB, by powers of two.
const CLASSES: usize = 9;
/// The alignment of every size-classed block.
const CLASS_ALIGN: usize = 16;

/// Returns the size class of `layout` (blocks of `16 << class` bytes), or
/// `None` when it is bumped at its exact size and never recycled.
fn class(layout: Layout) -> Option<usize> {
    (layout.align() <= CLASS_ALIGN && layout.size() <= 16 << (CLASSES - 1))
        .then(|| layout.size().max(16).next_power_of_two().trailing_zeros() as usize - 4)
}

thread_local! {
    static REGION: Region = const {
        Region {
            base: Cell::new(0),
            len: Cell::new(0),
            used: Cell::new(0),
            start: Cell::new(0),
            active: Cell::new(false),
            floor: Cell::new(NO_RECYCLING),
            heads: [const { Cell::new(0) }; CLASSES],
            own: Cell::new(0),
        }
    };
}

impl Region {
    /// Returns whether `addr` lies in this region at or above the floor (a
    /// size-classed block, if it is a block).
    fn recycles(&self, addr: usize) -> bool {
        let floor = self.floor.get();
        floor != NO_RECYCLING && addr >= self.base.get() + floor && addr < self.base.get() + self.len.get()
    }

    /// Returns a block for `layout` from the free lists or the bump pointer,
    /// or null when the region is full.
    fn alloc(&self, layout: Layout) -> *mut u8 {
        let recycling = self.floor.get() != NO_RECYCLING;
        let (size, align) = match class(layout).filter(|_| recycling) {
            Some(k) => {
                let head = self.heads[k].get();
                if head != 0 {
                    // SAFETY: a free block of this region; its first word is the next.
                    self.heads[k].set(unsafe { *(head as *const usize) });
                    return head as *mut u8;
                }
                (16 << k, CLASS_ALIGN)
            }
            None => (layout.size(), layout.align()),
        };
        let start = (self.base.get() + self.used.get()).next_multiple_of(align);
        let end = start + size;
        if end > self.base.get() + self.len.get() {
            return std::ptr::null_mut();
        }
        self.used.set(end - self.base.get());
        start as *mut u8
    }
}

// SAFETY: arena allocations are disjoint blocks of a region this thread owns
// for the arena's lifetime (bumped, or taken from a free list that holds only
// blocks freed and not handed out since); everything else goes to `System`.
unsafe impl GlobalAlloc for CheckAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = REGION
            .try_with(|r| {
                if !r.active.get() {
                    return None;
                }
                let p = r.alloc(layout);
                // A recycling arena holds a checkpointed execution's state,
                // which must lie wholly in it: full is an error, not `System`.
                (!p.is_null() || r.floor.get() != NO_RECYCLING).then_some(p)
            })
            .ok()
            .flatten();
        // SAFETY: forwarded with the caller's layout.
        p.unwrap_or_else(|| unsafe { System.alloc(layout) })
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let addr = ptr as usize;
        let own = REGION
            .try_with(|r| {
                if !r.recycles(addr) {
                    return false;
                }
                if let Some(k) = class(layout) {
                    // SAFETY: a block of this class, no longer used: its first
                    // word (it has at least 16 bytes) holds the next free one.
                    unsafe { *(addr as *mut usize) = r.heads[k].get() };
                    r.heads[k].set(addr);
                }
                true
            })
            .unwrap_or(false);
        if !own && !in_any_arena(addr) {
            // SAFETY: not an arena block, so `System` allocated it.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's layout with the new size is valid (`realloc`'s contract).
        let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // A size-classed block that still fits its class stays where it is.
        let same = class(layout).is_some_and(|k| class(new) == Some(k))
            && REGION.try_with(|r| r.recycles(ptr as usize)).unwrap_or(false);
        if same {
            return ptr;
        }
        // A block of `System`'s whose new size would come from `System` too
        // (no arena is active on this thread) is `System`'s to resize: it can
        // grow in place or, for a large block, move its pages (glibc's
        // `mremap`) where a copy would fault in and write every byte again.
        // The simulator's page-table arena grows this way at thousands of CPUs.
        let arena_active = REGION.try_with(|r| r.active.get()).unwrap_or(false);
        if !arena_active && !in_any_arena(ptr as usize) {
            // SAFETY: `System` allocated `ptr` with `layout` (it is in no arena),
            // and the caller upholds `realloc`'s contract for `new_size`.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // SAFETY: as `GlobalAlloc::realloc`'s own default does.
        unsafe {
            let p = self.alloc(new);
            if !p.is_null() {
                std::ptr::copy_nonoverlapping(ptr, p, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            p
        }
    }
}

/// Every arena region ever handed out (by base address), with its length
/// in [`REGION_LENS`] ([`ARENA_BYTES`] for the arena's own; an adopted one
/// is as long as its object's state and heap), for `dealloc` on any thread.
/// Regions are leaked on purpose (one per checker thread, reused for all its
/// executions). Fixed tables, so that no allocation or lock is ever needed
/// inside the allocator.
static REGIONS: [AtomicUsize; MAX_REGIONS] = [const { AtomicUsize::new(0) }; MAX_REGIONS];
/// The length of each region of [`REGIONS`], stored before its base.
static REGION_LENS: [AtomicUsize; MAX_REGIONS] = [const { AtomicUsize::new(0) }; MAX_REGIONS];
/// How many entries of [`REGIONS`] are taken.
static NREGIONS: AtomicUsize = AtomicUsize::new(0);
/// The most arena regions a process may have: one a checker thread at once
/// (a thread that ends leaves its region to the next) and one a C policy's
/// adopted globals. A search runs at most half as many workers
/// ([`crate::run::MAX_JOBS`]).
pub(crate) const MAX_REGIONS: usize = 1024;

/// Returns whether `addr` lies in an arena region.
fn in_any_arena(addr: usize) -> bool {
    let n = NREGIONS.load(Ordering::Acquire).min(MAX_REGIONS);
    REGIONS[..n].iter().zip(&REGION_LENS).any(|(b, len)| {
        // Acquire: pairs with the Release store of a region's base, made
        // after its length's.
        let b = b.load(Ordering::Acquire);
        b != 0 && addr >= b && addr < b + len.load(Ordering::Relaxed)
    })
}

/// How big each thread's arena is.
pub const ARENA_BYTES: usize = 64 << 20;

/// Makes sure the calling thread has an arena and returns its base address.
pub fn ensure() -> usize {
    REGION.with(|r| {
        if r.len.get() == 0 {
            let spare = spare_pop();
            let base = match spare {
                Some(base) => base,
                None => {
                    let layout = Layout::from_size_align(ARENA_BYTES, 4096).expect("a valid layout");
                    // SAFETY: non-zero size.
                    let base = unsafe { System.alloc(layout) } as usize;
                    assert!(base != 0, "the checker could not reserve its {} MiB arena", ARENA_BYTES >> 20);
                    let i = NREGIONS.fetch_add(1, Ordering::AcqRel);
                    assert!(i < MAX_REGIONS, "more than {MAX_REGIONS} threads ran the checker at once");
                    REGION_LENS[i].store(ARENA_BYTES, Ordering::Relaxed);
                    // Release: a thread that finds the base finds the length.
                    REGIONS[i].store(base, Ordering::Release);
                    base
                }
            };
            r.own.set(base);
            r.base.set(base);
            r.len.set(ARENA_BYTES);
        }
        r.base.get()
    })
}

/// Empties the calling thread's arena and stops recycling. Everything
/// allocated in it must be dead.
pub fn reset() {
    REGION.with(|r| {
        r.used.set(r.start.get());
        r.floor.set(NO_RECYCLING);
        r.heads.iter().for_each(|h| h.set(0));
    });
}

/// Makes `len` bytes from `base` (at least [`ARENA_BYTES`] past `prefix`) the calling
/// thread's arena, the first `prefix` of them policy state that lives outside
/// the allocator and that every [`reset`] keeps (a compiled C file's globals,
/// whose shared object carries the region: `tlbkit_policy::sync::check::adopt_region`).
/// Blocks are handed out after the prefix, so the state lies below every
/// execution's mark, at the same offsets in every copy of the object: it is
/// policy memory, saved with the arena and keyed by offset as the rest.
///
/// Call it with nothing allocated since the last [`reset`]. The thread's old
/// region stays registered (what it held is dead).
pub fn adopt(base: usize, len: usize, prefix: usize) {
    assert!(
        len.saturating_sub(prefix) >= ARENA_BYTES,
        "an adopted arena holds at least {ARENA_BYTES} bytes past its prefix"
    );
    REGION.with(|r| {
        if r.base.get() != base {
            let n = NREGIONS.load(Ordering::Acquire).min(MAX_REGIONS);
            // Acquire: pairs with the Release store of a region's base.
            if !REGIONS[..n].iter().any(|b| b.load(Ordering::Acquire) == base) {
                let i = NREGIONS.fetch_add(1, Ordering::AcqRel);
                assert!(i < MAX_REGIONS, "more than {MAX_REGIONS} arenas in one process");
                REGION_LENS[i].store(len, Ordering::Relaxed);
                // Release: a thread that finds the base finds the length.
                REGIONS[i].store(base, Ordering::Release);
            }
            r.base.set(base);
            // All of it: the executions get the whole heap past the prefix,
            // however large the file's globals.
            r.len.set(len);
            // The region ensure reserved is dead now: another thread may have it.
            let own = r.own.replace(0);
            if own != 0 {
                spare_push(own);
            }
        }
        r.start.set(prefix);
        r.used.set(prefix);
        r.floor.set(NO_RECYCLING);
        r.heads.iter().for_each(|h| h.set(0));
    });
}

/// Returns whether [`CheckAlloc`] is the process's global allocator: an
/// allocation made with the calling thread's arena active lands in an arena
/// (found once per process). Call it between executions.
pub fn installed() -> bool {
    static INSTALLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *INSTALLED.get_or_init(|| {
        ensure();
        REGION.with(|r| {
            let used = r.used.get();
            let was = r.active.replace(true);
            let probe = Box::new(0u64);
            let at = &*probe as *const u64 as usize;
            drop(probe);
            r.active.set(was);
            // The probe's bytes are dead: the arena is as it was.
            r.used.set(used);
            in_any_arena(at)
        })
    })
}

/// Returns the calling thread's arena's base address (0 before [`ensure`]).
pub fn base() -> usize {
    REGION.with(|r| r.base.get())
}

/// Returns whether the calling thread's allocations go to its arena.
pub fn is_active() -> bool {
    REGION.with(|r| r.active.get())
}

/// Recycles, from now until the next [`reset`], the blocks the arena hands
/// out from here up (the module documentation says how); what lies below is
/// never reused.
pub fn recycle() {
    REGION.with(|r| r.floor.set(r.used.get()));
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

/// Returns `v`, a value a facade atomic holds, as a state hash takes it: an
/// address in the calling thread's arena as its offset (tagged with the top
/// bit), any other value as it is. A compiled C policy stores pointers with
/// its marked accesses (`this_cpu_write(cpu_tlbstate.loaded_mm, next)`), and
/// each thread's copy of the file lies at its own address: by offset, the
/// same state hashes alike in every worker.
pub fn position_free(v: u64) -> u64 {
    REGION.with(|r| {
        let (base, len) = (r.base.get() as u64, r.len.get() as u64);
        if v >= base && v - base < len {
            (v - base) | 1 << 63
        } else {
            v
        }
    })
}

/// Returns whether `addr` is in the calling thread's arena below `mark` bytes.
pub fn below(addr: usize, mark: usize) -> bool {
    REGION.with(|r| addr >= r.base.get() && addr < r.base.get() + mark)
}

/// A copy of the calling thread's arena: its bytes in use and its
/// allocator's state (for a checkpoint, [`crate::exec::Checkpoints`]).
#[derive(Default)]
pub struct Image {
    bytes: Vec<u8>,
    floor: usize,
    heads: [usize; CLASSES],
}

/// Copies the calling thread's arena into `into`.
pub fn save(into: &mut Image) {
    REGION.with(|r| {
        let used = r.used.get();
        let bytes = &mut into.bytes;
        bytes.clear();
        bytes.reserve(used);
        // SAFETY: the region is this thread's, mapped and at least `used`
        // bytes long; `bytes` has room for `used` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(r.base.get() as *const u8, bytes.as_mut_ptr(), used);
            bytes.set_len(used);
        }
        into.floor = r.floor.get();
        for (i, h) in into.heads.iter_mut().zip(&r.heads) {
            *i = h.get();
        }
    })
}

/// Puts the arena back as [`save`] found it: its bytes, how much is used and
/// its free lists.
///
/// # Safety
/// Everything allocated in the arena since must be dead, and nothing may be
/// running that holds a reference into it: the bytes under every live
/// reference change.
pub unsafe fn restore(from: &Image) {
    REGION.with(|r| {
        let bytes = &from.bytes;
        assert!(bytes.len() <= r.len.get(), "a checkpoint of another arena");
        // SAFETY: the region is this thread's and at least `bytes.len()`
        // long; the caller vouches that nothing reads it meanwhile.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), r.base.get() as *mut u8, bytes.len()) };
        r.used.set(bytes.len());
        r.floor.set(from.floor);
        for (h, &i) in r.heads.iter().zip(&from.heads) {
            h.set(i);
        }
    })
}
