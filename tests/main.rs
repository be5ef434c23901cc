//! The command line's integration tests, one binary (one link) for all: each
//! file here is a module of it, named as the file (`cargo test --test
//! commands guide::` runs `guide.rs`'s tests). `registry.rs` runs policies in
//! this process, so the binary installs the checker's allocator
//! ([`tlbkit_check::arena::CheckAlloc`]); the others start `tlbkit`.
//! Cargo builds only the files this one names (`autotests = false`):
//! [`every_test_file_is_a_module`] fails when a file is left out.

#[global_allocator]
static ALLOC: tlbkit_check::arena::CheckAlloc = tlbkit_check::arena::CheckAlloc;

mod common;

mod browser;
mod c_policies;
mod calibrate;
mod check;
mod cli;
mod compare;
mod guide;
mod plot;
mod registry;
mod saved;
mod scripts;
mod sweep;
mod tables;
mod trace;
mod validate;

/// A test file this binary does not name would never be built or run.
#[test]
fn every_test_file_is_a_module() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let main = std::fs::read_to_string(dir.join("main.rs")).expect("this file");
    for entry in std::fs::read_dir(&dir).expect("the tests folder") {
        let path = entry.expect("an entry").path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else { continue };
        if path.extension().is_some_and(|e| e == "rs") && stem != "main" {
            assert!(main.contains(&format!("\nmod {stem};\n")), "tests/{stem}.rs is no module of tests/main.rs");
        }
    }
}
