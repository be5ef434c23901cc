//! Loaded copies of a compiled policy.
//!
//! Each copy is the object loaded from a file of its own (the dynamic loader
//! shares one load per file), so each has its own globals: a checker thread
//! keeps one copy for all its executions, a simulated machine one for its
//! life. Copies go back to their [`Lib`]'s pool when their thread ends or
//! their policy is dropped, and are never unloaded: the checker's arena
//! registry may still name their memory.
//!
//! # The memory of a copy, and why the checker may own it
//! [`crate::build`] links the object so that its writable data is one run:
//! `tlbkit_data_begin` (page-aligned, first), the file's and the glue's
//! globals and statics, then `tlbkit_heap` ([`HEAP_BYTES`], zeroed, last).
//! `load` checks that every object of the file lies in
//! `[tlbkit_data_begin, tlbkit_heap)` (the *state*, `prefix` bytes) and
//! refuses the object otherwise. The checker then adopts
//! `[tlbkit_data_begin, tlbkit_heap + HEAP_BYTES)` as the thread's arena
//! (`tlbkit_check::arena::adopt`): the state is its first `prefix` bytes,
//! kept by every reset, and the heap past it serves the executions'
//! allocations — the file's `kmalloc` and everything the checker allocates
//! while the policy runs. So the file's globals sit at the same offsets in
//! every copy, are saved and restored with the arena at checkpoints, and are
//! hashed by offset: two threads' copies give equal states equal hashes.
//!
//! This is sound because:
//! - **one copy, one thread.** [`Lib::thread_copy`] leases a copy to the
//!   calling thread until the thread ends (the simulator's policy holds its
//!   own lease); no other thread runs its code or adopts its region until
//!   the lease goes back to the pool, and the thread that held it runs no
//!   more executions then (its thread-locals are being destroyed);
//! - **the region is registered with its own length**, so a block of it
//!   freed on any thread is recognised as the arena's and never handed to
//!   the system allocator, however large the file's globals (the arena is
//!   always at least `tlbkit_check::arena::ARENA_BYTES` past them);
//! - **nothing outside the arena points into a copy's heap across
//!   executions**: what an execution allocated is dead at its end
//!   (the arena's contract); what must outlive executions (the pool, the
//!   symbol table, this module's bookkeeping) is allocated with the arena
//!   off (`check::outside_executions`), and the arena's own list of spare
//!   regions is a fixed table, never a growable list (one that grew while a
//!   copy was being adopted put its buffer in the copy's heap, and the next
//!   thread took a garbage region from it);
//! - **a copy is never unloaded**, so an address that some registry still
//!   names stays mapped.
//!
//! `crates/check/tests/native/c_layout.rs` tests the edges: a file with megabytes
//! of globals, a file that allocates in its operations, many threads
//! checking one file at once.

pub use crate::build::{Entries, LoadedCopy};
use crate::build::{Lib, HEAP_BYTES};
use crate::error::Error;
use crate::runtime::OPS;
use std::cell::RefCell;
use std::ffi::CString;
use std::sync::Arc;

// SAFETY: a copy is used by one thread at a time (its lease's); its
// addresses are plain numbers.
unsafe impl Send for LoadedCopy {}

impl LoadedCopy {
    /// Returns the address of `name` in this copy.
    pub fn addr(&self, lib: &Lib, name: &str) -> Option<usize> {
        lib.symbol(name).map(|s| self.load_base + s.value as usize)
    }

    /// Puts the state back as it was when loaded.
    pub fn reset(&self) {
        // SAFETY: `[base, base + prefix)` is the copy's writable data, which
        // no code of the copy uses while its policy is being built.
        unsafe { std::ptr::copy_nonoverlapping(self.pristine.as_ptr(), self.base as *mut u8, self.prefix) };
    }
}

/// Returns the function at `addr` as the function-pointer type `F`.
///
/// # Safety
/// `addr` must be a function of `F`'s signature.
unsafe fn entry<F: Copy>(addr: usize) -> F {
    // SAFETY: per the contract; function pointers are address-sized.
    unsafe { std::mem::transmute_copy(&addr) }
}

/// Loads a new copy of `lib`'s object.
fn load(lib: &Lib) -> Result<Box<LoadedCopy>, Error> {
    let n = {
        let mut c = lib.copies.lock().expect("the copy count");
        *c += 1;
        *c
    };
    let fail = |why: String| Error::Load { path: lib.path.display().to_string(), why };
    let file = lib.path.with_file_name(format!("copy-{}-{n}.so", std::process::id()));
    std::fs::copy(&lib.path, &file).map_err(|e| fail(format!("copying it: {e}")))?;
    let cpath = CString::new(file.as_os_str().as_encoded_bytes()).map_err(|e| fail(e.to_string()))?;
    // SAFETY: a path to an object tlbkit built, with no constructors of its
    // own beyond the sanitizer's (a no-op in tsan.c).
    let handle = unsafe { libc::dlopen(cpath.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    let _ = std::fs::remove_file(&file);
    if handle.is_null() {
        // SAFETY: dlerror returns a message or null.
        let e = unsafe { libc::dlerror() };
        let why = if e.is_null() {
            "dlopen failed".to_string()
        } else {
            // SAFETY: a NUL-terminated message from the loader.
            unsafe { std::ffi::CStr::from_ptr(e) }.to_string_lossy().into_owned()
        };
        return Err(fail(why));
    }
    let sym = |name: &str| -> Result<usize, Error> {
        let c = CString::new(name).expect("a symbol name");
        // SAFETY: a live handle and a NUL-terminated name.
        let p = unsafe { libc::dlsym(handle, c.as_ptr()) };
        if p.is_null() {
            return Err(fail(format!("it has no {name}")));
        }
        Ok(p as usize)
    };
    let boot = sym("tlbkit_boot")?;
    let load_base = boot
        - lib.symbol("tlbkit_boot").ok_or_else(|| fail("no symbol table entry for tlbkit_boot".into()))?.value as usize;
    let base = sym("tlbkit_data_begin")?;
    // The copy's file is gone: a fault in its code is described from the
    // object it was copied from (the code lies below the state).
    tlbkit_fault::name_code(load_base, base, load_base, lib.path.clone());
    crate::site::register(lib, load_base, base);
    let heap = sym("tlbkit_heap")?;
    let ops = sym("tlbkit_ops")?;
    if heap <= base || ops < base || ops >= heap {
        return Err(fail(
            "the linker did not lay out the state as tlbkit needs it (tlbkit_data_begin .. tlbkit_heap)".into(),
        ));
    }
    for s in lib.symbols.iter().filter(|s| s.object && s.name != "tlbkit_heap") {
        let a = load_base + s.value as usize;
        // A `const` object (read-only, relocated once) is no state.
        if s.writable && a >= load_base && (a < base || a + s.size as usize > heap) && lib.is_file_object(&s.name) {
            return Err(fail(format!("the file's {} lies outside the state tlbkit saves", s.name)));
        }
    }
    let c_size = lib.symbol("tlbkit_ops").map_or(0, |s| s.size as usize);
    if c_size != std::mem::size_of::<crate::runtime::Ops>() {
        return Err(fail(format!(
            "its struct tlbkit_ops has {c_size} bytes where tlbkit's table has {} (shims of another tlbkit?)",
            std::mem::size_of::<crate::runtime::Ops>()
        )));
    }
    // SAFETY: `ops` is the glue's `struct tlbkit_ops`, which `Ops` mirrors
    // (the same size, checked above; the same order, by construction).
    unsafe { (ops as *mut crate::runtime::Ops).write(OPS) };
    let prefix = heap - base;
    let mut pristine = vec![0u8; prefix];
    // SAFETY: the copy's writable data, just loaded.
    unsafe { std::ptr::copy_nonoverlapping(base as *const u8, pristine.as_mut_ptr(), prefix) };
    // SAFETY: each is the glue's function of the C signature of its field.
    let entries = unsafe {
        Entries {
            boot: entry(boot),
            mm_init: entry(sym("tlbkit_mm_init")?),
            switch_mm: entry(sym("tlbkit_switch_mm")?),
            flush_page: entry(sym("tlbkit_flush_page")?),
            flush_range: entry(sym("tlbkit_flush_range")?),
            flush_mm: entry(sym("tlbkit_flush_mm")?),
            flush_kernel_range: entry(sym("tlbkit_flush_kernel_range")?),
            tlbbatch_add_pending: entry(sym("tlbkit_tlbbatch_add_pending")?),
            tlbbatch_flush: entry(sym("tlbkit_tlbbatch_flush")?),
            flush_batched_pending: entry(sym("tlbkit_flush_batched_pending")?),
            sysregs: match (sym("tlbkit_read_sysreg"), sym("tlbkit_write_sysreg")) {
                (Ok(read), Ok(write)) => Some((entry(read), entry(write))),
                _ => None,
            },
            mm_release: sym("tlbkit_mm_release").ok().map(|a| entry(a)),
            tlbbatch_should_defer: sym("tlbkit_tlbbatch_should_defer").ok().map(|a| entry(a)),
        }
    };
    Ok(Box::new(LoadedCopy { load_base, base, prefix, pristine, entries }))
}

impl Lib {
    /// Returns whether the object `name` is the file's (not tlbkit's glue).
    pub(crate) fn is_file_object(&self, name: &str) -> bool {
        const LINKER: [&str; 6] =
            ["_DYNAMIC", "_GLOBAL_OFFSET_TABLE_", "__dso_handle", "_edata", "_end", "__bss_start"];
        !(name.starts_with("tlbkit_") || name.starts_with("__tlbkit") || name == "init_mm" || LINKER.contains(&name))
    }

    /// Takes a copy from the pool, or loads one.
    pub fn lease(self: &Arc<Lib>) -> Result<Lease, Error> {
        let copy = self.pool.lock().expect("the pool").pop();
        let copy = match copy {
            Some(c) => c,
            None => load(self)?,
        };
        Ok(Lease { lib: self.clone(), copy: Some(copy) })
    }

    /// Returns the copy this thread keeps for the checker's executions,
    /// leasing it on first use; it goes back to the pool when the thread ends.
    pub fn thread_copy(self: &Arc<Lib>) -> Result<*const LoadedCopy, Error> {
        THREAD.with(|t| {
            let mut t = t.borrow_mut();
            if let Some(l) = t.0.iter().find(|l| Arc::ptr_eq(&l.lib, self)) {
                return Ok(l.copy());
            }
            let lease = self.lease()?;
            let p = lease.copy();
            t.0.push(lease);
            Ok(p)
        })
    }

    /// Returns how big a region the checker's arena gets from a copy.
    pub fn region_bytes(copy: &LoadedCopy) -> usize {
        copy.prefix + HEAP_BYTES
    }
}

/// A copy in use; back to the pool on drop.
pub struct Lease {
    lib: Arc<Lib>,
    copy: Option<Box<LoadedCopy>>,
}

impl Lease {
    /// Returns the copy.
    pub fn copy(&self) -> *const LoadedCopy {
        self.copy.as_deref().map_or(std::ptr::null(), std::ptr::from_ref)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(c) = self.copy.take() {
            if let Ok(mut pool) = self.lib.pool.lock() {
                pool.push(c);
            }
        }
    }
}

/// The copies this thread keeps.
struct Kept(Vec<Lease>);

thread_local! {
    static THREAD: RefCell<Kept> = const { RefCell::new(Kept(Vec::new())) };
}
