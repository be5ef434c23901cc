//! The command line's integration tests, one binary (one link) for all: each
//! file here is a module of it, named as the file (`cargo test --test
//! commands guide::` runs `guide.rs`'s tests). `registry.rs` runs policies in
//! this process, so the binary installs the checker's allocator
//! ([`tlbkit_check::arena::CheckAlloc`]); the others start `tlbkit`.
//! Cargo builds only the files this one names (`autotests = false`):
//! `tests/layout.rs` (the command line's) fails when a file is left out.

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
mod layers;
mod layout;
mod nodes;
mod plot;
mod registry;
mod saved;
mod scripts;
mod sizes;
mod sweep;
mod tables;
mod trace;
mod validate;
