//! The simulator's integration tests, one binary (one link) for all: each
//! file here is a module of it, named as the file (`cargo test -p
//! tlbkit-sim --test sim strict_matrix::` runs `strict_matrix.rs`'s tests).
//! `host_machine.rs` is a binary of its own: it sets an environment
//! variable, which no other test's thread may read meanwhile.
//! Cargo builds only the files this one names (`autotests = false`):
//! [`every_test_file_is_a_module`] fails when a file is left out.

mod common;

mod batched_unmap_flush;
mod contpte;
mod flush_ceiling;
mod history_workloads;
mod jitter;
mod kernel;
mod madvise_pageout;
mod map_workloads;
mod oracle;
mod prediction_workloads;
mod redis_like;
mod seeds;
mod stress;
mod strict_matrix;
mod swap_w_seq_mt;
mod tlb_reference;
mod trace;
mod will_it_scale;
mod workloads;
mod x86_reclaim_batch;

/// A test file this binary does not name would never be built or run.
#[test]
fn every_test_file_is_a_module() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let main = std::fs::read_to_string(dir.join("main.rs")).expect("this file");
    for entry in std::fs::read_dir(&dir).expect("the tests folder") {
        let path = entry.expect("an entry").path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else { continue };
        if path.extension().is_some_and(|e| e == "rs") && !["main", "host_machine"].contains(&stem) {
            assert!(main.contains(&format!("\nmod {stem};\n")), "tests/{stem}.rs is no module of tests/main.rs");
        }
    }
}
