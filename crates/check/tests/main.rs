//! The checker's integration tests, one binary (one link) for all: each
//! file here is a module of it, named as the file (`cargo test -p
//! tlbkit-check --test check parallel::` runs `parallel.rs`'s tests). Every
//! module checks policies, so the binary installs the checker's allocator
//! once, for all of them ([`tlbkit_check::arena::CheckAlloc`]). `modules.rs`
//! is a binary of its own: it tests a program without that allocator.
//! Cargo builds only the files this one names (`autotests = false`):
//! [`every_test_file_is_a_module`] fails when a file is left out.

#[global_allocator]
static ALLOC: tlbkit_check::arena::CheckAlloc = tlbkit_check::arena::CheckAlloc;

mod common;

mod after;
mod c_layout;
mod c_policy;
mod checkpoints;
mod completion;
mod contpte;
mod corrupt_saves;
mod early_return;
mod example;
mod exhaustive;
mod faults;
mod findings;
mod full;
mod latr;
mod litmus;
mod local;
mod locked;
mod names;
mod overlap;
mod parallel;
mod portfolio;
mod reclaim;
mod reduction;
mod renaming;
mod rounds;
mod shapes;
mod zoo;

/// A test file this binary does not name would never be built or run.
#[test]
fn every_test_file_is_a_module() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let main = std::fs::read_to_string(dir.join("main.rs")).expect("this file");
    for entry in std::fs::read_dir(&dir).expect("the tests folder") {
        let path = entry.expect("an entry").path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else { continue };
        if path.extension().is_some_and(|e| e == "rs") && !["main", "modules"].contains(&stem) {
            assert!(main.contains(&format!("\nmod {stem};\n")), "tests/{stem}.rs is no module of tests/main.rs");
        }
    }
}
