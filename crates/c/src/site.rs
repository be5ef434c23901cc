//! Where in the user's file a CPU is: for a counterexample's events, the
//! function and line of the innermost frame of the running code that lies
//! in one of the user's files (`context.c`, `tlb.c`).
//!
//! Design: every loaded copy registers the range of its code. When the
//! checker records an event (only while it writes a counterexample's trace),
//! [`caller`] walks the stack with the system's unwinder (the compiled files
//! carry unwind tables: `-funwind-tables`), takes the return addresses that
//! lie in a copy's code, innermost first, and names each with `addr2line -i`:
//! of its chain of inlined calls, the innermost in a user's file, so that a
//! shim's inline helper (a cpumask test, `this_cpu_read`) counts as the
//! file's line that called it, and the glue's functions (a CR3 write, an IPI)
//! as the file's line that called them. Names are kept per object and
//! address, so a trace asks `addr2line` once per address.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A loaded copy's code: `[lo, hi)`, and the object it was copied from.
struct Range {
    lo: usize,
    hi: usize,
    object: usize,
}

/// An object whose copies were loaded: its file, where the build put the
/// user's files (`user/{i}/{name}`) and the name each is shown by, and the
/// names found so far, by offset.
struct Object {
    path: PathBuf,
    places: Vec<(String, String)>,
    named: HashMap<u64, Option<String>>,
}

#[derive(Default)]
struct Registry {
    ranges: Vec<Range>,
    objects: Vec<Object>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry { ranges: Vec::new(), objects: Vec::new() });

/// Notes that a copy of `lib` runs its code in `[lo, hi)`.
pub(crate) fn register(lib: &crate::Lib, lo: usize, hi: usize) {
    let mut r = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    let object = match r.objects.iter().position(|o| o.path == lib.path) {
        Some(k) => k,
        None => {
            let places = lib.code_files.iter().map(|(i, _, name)| (format!("user/{i}/{name}"), name.clone())).collect();
            r.objects.push(Object { path: lib.path.clone(), places, named: HashMap::new() });
            r.objects.len() - 1
        }
    };
    r.ranges.push(Range { lo, hi, object });
}

#[repr(C)]
struct UnwindContext {
    _opaque: [u8; 0],
}

extern "C" {
    fn _Unwind_Backtrace(trace: extern "C" fn(*mut UnwindContext, *mut c_void) -> c_int, arg: *mut c_void) -> c_int;
    fn _Unwind_GetIP(ctx: *mut UnwindContext) -> usize;
}

/// The frames [`caller`] looks at, at most.
const FRAMES: usize = 48;

/// `_URC_NO_REASON` (go on) and `_URC_END_OF_STACK` (stop).
const GO_ON: c_int = 0;
const STOP: c_int = 5;

extern "C" fn one_frame(ctx: *mut UnwindContext, arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `Vec` [`return_addresses`] passed, alive for the walk.
    let ips = unsafe { &mut *(arg as *mut Vec<usize>) };
    // SAFETY: a context the unwinder handed to its callback.
    let ip = unsafe { _Unwind_GetIP(ctx) };
    if ip == 0 || ips.len() >= FRAMES {
        return STOP;
    }
    ips.push(ip);
    GO_ON
}

/// The return addresses of the calls on this stack, innermost first.
fn return_addresses() -> Vec<usize> {
    let mut ips: Vec<usize> = Vec::with_capacity(FRAMES);
    // SAFETY: the callback only pushes into `ips`, which outlives the walk.
    unsafe { _Unwind_Backtrace(one_frame, &mut ips as *mut Vec<usize> as *mut c_void) };
    ips
}

/// Returns where in the user's files the running code is: `function, file:line`
/// of the innermost frame in a loaded copy whose chain of inlined calls
/// reaches one of the user's files; `None` when no such frame is on the
/// stack (a Rust policy, or the glue alone).
pub fn caller() -> Option<String> {
    let ips = return_addresses();
    let mut r = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    for ip in ips {
        let Some(range) = r.ranges.iter().find(|g| ip >= g.lo && ip < g.hi) else { continue };
        // A return address is after its call: name the call.
        let (object, off) = (range.object, (ip - range.lo - 1) as u64);
        let o = &mut r.objects[object];
        let name = match o.named.get(&off) {
            Some(n) => n.clone(),
            None => {
                let n = name_of(&o.path, &o.places, off);
                o.named.insert(off, n.clone());
                n
            }
        };
        if name.is_some() {
            return name;
        }
    }
    None
}

/// Names the code at `off` in `path` ([`crate::coverage::addr2line`]): the
/// innermost of its inlined calls that lies in one of the user's files.
fn name_of(path: &Path, places: &[(String, String)], off: u64) -> Option<String> {
    let chains = crate::coverage::addr2line(path, &[off]).ok()?;
    chains.into_iter().next()?.into_iter().find_map(|(function, file, line)| {
        let (_, shown) = places.iter().find(|(p, _)| file.ends_with(p.as_str()))?;
        Some(format!("{function}, {shown}:{line}"))
    })
}
