//! A run's result does not depend on where the host's allocator put anything.
//!
//! The simulator names a cache line by the host address of the variable a
//! policy reports ([`tlbkit_policy::Hw::shared`]), so which variables share a
//! line is decided by where their allocation starts modulo 64 bytes. The
//! policies keep their shared state where that start is fixed (in types
//! aligned to a line, as the kernel aligns its per-CPU and per-mm structures),
//! and a temporary is never reported (debug builds assert that no reported
//! address is on the stack of the event being run). This binary's allocator
//! starts every block aligned to 16 bytes or less at a chosen offset from a
//! line, and every policy's cells run at each of the four offsets: the outputs
//! must be byte-identical. (Its own binary: the allocator is the process's.)

#[path = "common/cells.rs"]
mod cells;
#[path = "common/cores.rs"]
mod cores;
#[path = "common/small.rs"]
mod small;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use small::SMALL;
use tlbkit_registry::POLICIES;
use tlbkit_sim::run::run;

/// The offset from a line at which the next small block starts.
static SHIFT: AtomicUsize = AtomicUsize::new(0);

/// [`System`], with every block of alignment 16 or less starting [`SHIFT`]
/// bytes past a line; the shift a block got is kept in the 8 bytes before it.
struct Shifted;

/// Room before a block for its shift and the shift itself.
const PAD: usize = 128;

// SAFETY: every block is the system allocator's, `PAD` bytes larger and aligned
// to a line; the returned pointer lies `64 + shift` bytes inside it (aligned to
// 16, at least the requested alignment), and `dealloc` finds the start from the
// shift stored just below the pointer.
unsafe impl GlobalAlloc for Shifted {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() > 16 {
            // SAFETY: the caller's layout, passed on unchanged.
            return unsafe { System.alloc(layout) };
        }
        let Ok(outer) = Layout::from_size_align(layout.size() + PAD, 64) else { return std::ptr::null_mut() };
        // SAFETY: `outer` has a non-zero size (at least `PAD`).
        let base = unsafe { System.alloc(outer) };
        if base.is_null() {
            return base;
        }
        let shift = SHIFT.load(Ordering::Relaxed);
        // SAFETY: `64 + shift` is at most 112 of the block's `PAD` spare bytes,
        // and the 8 bytes below it (aligned to 8) are inside the block too.
        unsafe {
            let p = base.add(64 + shift);
            p.sub(8).cast::<usize>().write(shift);
            p
        }
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        if layout.align() > 16 {
            // SAFETY: allocated by `System` with this layout (`alloc` above).
            return unsafe { System.dealloc(p, layout) };
        }
        // SAFETY: `p` came from `alloc` above with this layout, which stored
        // its shift below it and took the block with `outer`'s layout.
        unsafe {
            let shift = p.sub(8).cast::<usize>().read();
            let outer = Layout::from_size_align_unchecked(layout.size() + PAD, 64);
            System.dealloc(p.sub(64 + shift), outer);
        }
    }
}

#[global_allocator]
static ALLOC: Shifted = Shifted;

/// Returns the command and the JSON of `policy` running `workload` with `sets`
/// on 4 CPUs, the strict matrix's first configuration.
fn output(policy: &str, workload: &str, sets: &[&str]) -> (String, String) {
    let s = cells::spec(policy, workload, 4, sets, cells::CONFIGS[0]);
    let text = match run(&s) {
        Ok(o) => serde_json::to_string(&o).expect("a run's output serialises"),
        Err(e) => e.to_string(),
    };
    (s.command(), text)
}

/// Runs every cell (each policy's small workloads) with blocks `shift` bytes
/// past a line, on the host's cores: each cell's command and output, in order.
fn every_cell(shift: usize) -> Vec<(String, String)> {
    SHIFT.store(shift, Ordering::Relaxed);
    let probe = Box::new(0u64);
    assert_eq!(&*probe as *const u64 as usize % 64, shift, "the allocator shifts blocks");
    let cells: Vec<(&str, &str, &[&str])> =
        POLICIES.iter().flat_map(|p| SMALL.iter().map(move |&(w, sets)| (p.name, w, sets))).collect();
    cores::on_host_cores(&cells, |&(policy, workload, sets)| output(policy, workload, sets))
}

#[test]
fn results_do_not_depend_on_where_the_allocator_puts_a_block() {
    // Every cell at one shift at a time (the shift is the process's): the
    // cells of a shift run at once on the host's cores.
    let first = every_cell(0);
    let mut moved = Vec::new();
    for shift in [16, 32, 48] {
        for ((command, a), (_, b)) in first.iter().zip(every_cell(shift)) {
            if *a != b {
                moved.push(format!("{command}   (blocks {shift} bytes past a line)"));
            }
        }
    }
    SHIFT.store(0, Ordering::Relaxed);
    assert!(moved.is_empty(), "results moved with the host's allocator:\n{}", moved.join("\n"));
}
