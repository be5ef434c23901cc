//! The memory layout of a compiled C policy under the checker, at its edges
//! (`tlbkit_c::load`'s module documentation argues it): a file whose
//! globals take megabytes, a file that allocates in its operations, and one
//! file checked by many threads at once. Each search is complete and its
//! state count is compared with the same search elsewhere, so a copy whose
//! memory was shared, overwritten or misplaced would show as a different
//! count, a false violation or a crash.
//!
//! The files are `constructed/locked.c` (a lock-protected ASID allocator
//! with no rollover) with a line added; they need a C compiler (without one
//! the tests say so and check nothing).

use tlbkit_check::run::check;
use tlbkit_check::spec::{default_spec, Mode};
use tlbkit_check::{CheckReport, CheckSpec};

use crate::common::have_cc;

/// Writes `locked.c` with `global` added after its globals and `on_switch`
/// at the start of `check_and_switch_context`, as `NAME.c`; returns the path.
fn variant(name: &str, global: &str, on_switch: &str) -> String {
    let src = format!("{}/../c/tests/constructed/locked.c", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(src).unwrap();
    let text =
        text.replacen("static unsigned long switches;\n", &format!("static unsigned long switches;\n{global}\n"), 1);
    let at = text.find("\tu64 asid = atomic64_read(&mm->context.id);\n").expect("the switch's first line");
    let text = format!("{}{on_switch}\n{}", &text[..at], &text[at..]);
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tlbkit-c-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.c"));
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// A complete exhaustive search of 2 CPUs, 2 address spaces, 3 operations.
fn small(policy: &str) -> CheckSpec {
    let d = default_spec(policy);
    CheckSpec { cpus: 2, mms: 2, asids: 16, ops: 3, pages: 1, mode: Mode::Exhaustive, iterations: u64::MAX, ..d }
}

fn clean(r: &CheckReport, what: &str) -> u64 {
    assert!(r.counterexample.is_none(), "{what}: {}", r.to_text());
    assert!(r.explored.complete, "{what}: the search completed");
    r.explored.states
}

#[test]
fn a_file_with_large_globals_is_checked_as_one_without() {
    if !have_cc() {
        return;
    }
    let plain = clean(&check(&small(&format!("c:{}", variant("plain", "", "")))).unwrap(), "plain");
    // 256 KiB of globals (external, so the compiler keeps them), read at
    // every switch: state hashed, saved and restored at every step (which
    // is why a test of megabytes would take minutes), reaching the same
    // states as without.
    let big = variant("big", "unsigned long table[1 << 15];", "\tif (table[(1 << 15) - 1]) return;");
    let states = clean(&check(&small(&format!("c:{big}"))).unwrap(), "big");
    assert_eq!(states, plain, "globals that never change change no state");
}

#[test]
fn a_file_that_allocates_in_its_operations_is_checked_as_one_that_does_not() {
    if !have_cc() {
        return;
    }
    let plain = clean(&check(&small(&format!("c:{}", variant("plain2", "", "")))).unwrap(), "plain");
    // A block per switch, written and freed at once: the heap is the
    // execution's arena, reused from one execution to the next.
    let allocating =
        variant("allocating", "", "\t{ unsigned long *b = kmalloc(64, GFP_ATOMIC); if (b) { b[7] = 1; kfree(b); } }");
    let states = clean(&check(&small(&format!("c:{allocating}"))).unwrap(), "allocating");
    assert_eq!(states, plain, "a block freed at once leaves no state behind");
}

#[test]
fn many_threads_checking_one_file_at_once_reach_the_same_states() {
    if !have_cc() {
        return;
    }
    let policy = format!("c:{}", variant("shared", "", ""));
    let alone = clean(&check(&small(&policy)).unwrap(), "alone");
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let p = policy.clone();
            std::thread::spawn(move || clean(&check(&small(&p)).unwrap(), "a thread"))
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().expect("a thread's check"), alone);
    }
    // And again, on threads that take the copies (and the regions) the
    // first ones gave back.
    let again: Vec<_> = (0..8)
        .map(|_| {
            let p = policy.clone();
            std::thread::spawn(move || clean(&check(&small(&p)).unwrap(), "a later thread"))
        })
        .collect();
    for t in again {
        assert_eq!(t.join().expect("a later thread's check"), alone);
    }
}

#[test]
fn an_adopted_region_with_a_prefix_near_the_arena_size_still_serves_the_whole_arena_past_it() {
    use tlbkit_check::arena::{self, ARENA_BYTES};
    // A compiled file whose globals take 63 MiB: its region is those and a
    // heap of at least ARENA_BYTES after them. Executions must get the heap
    // whole (an arena as long as ARENA_BYTES from the region's start would
    // leave them 1 MiB), and a block freed later on any thread must be
    // known as the arena's (not handed to the system allocator).
    let prefix = 63 << 20;
    let len = prefix + ARENA_BYTES + (1 << 20);
    let region = arena::outside(|| vec![0u8; len].leak().as_mut_ptr() as usize);
    let block = std::thread::spawn(move || {
        arena::adopt(region, len, prefix);
        arena::reset();
        let v: Vec<u8> = arena::inside(|| Vec::with_capacity(16 << 20));
        let at = v.as_ptr() as usize;
        assert!(at >= region + prefix && at + (16 << 20) <= region + len, "the block lies in the heap past the prefix");
        // The thread ends with the block alive: dropped elsewhere, it must
        // be recognised as the arena's.
        v
    })
    .join()
    .expect("the adopting thread");
    drop(block);
}
