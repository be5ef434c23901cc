//! The simulator's integration tests, one binary (one link) for all: each
//! file here is a module of it, named as the file (`cargo test -p
//! tlbkit-sim --test sim strict_matrix::` runs `strict_matrix.rs`'s tests).
//! `host_machine.rs` is a binary of its own: it sets an environment
//! variable, which no other test's thread may read meanwhile.
//! Cargo builds only the files this one names (`autotests = false`):
//! `tests/layout.rs` (the command line's) fails when a file is left out.

mod common;

mod batched_unmap_flush;
mod contpte;
mod flush_call;
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
