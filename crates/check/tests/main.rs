//! The checker's integration tests, one binary (one link) for all: each
//! file here is a module of it, named as the file (`cargo test -p
//! tlbkit-check --test check parallel::` runs `parallel.rs`'s tests). Every
//! module checks policies, so the binary installs the checker's allocator
//! once, for all of them ([`tlbkit_check::arena::CheckAlloc`]).
//! `no_allocator.rs` is a binary of its own: it tests a program without that
//! allocator. So is `native/` (`--test native`): the tests of policy code
//! that runs natively and can fault (faults, C policies and their memory
//! layout), which `scripts/test` also runs under AddressSanitizer, building
//! only them.
//! Cargo builds only the files this one names (`autotests = false`):
//! `tests/layout.rs` (the command line's) fails when a file is left out.

#[global_allocator]
static ALLOC: tlbkit_check::arena::CheckAlloc = tlbkit_check::arena::CheckAlloc;

mod common;

mod after;
mod c_x86;
mod checkpoints;
mod classic;
mod completion;
mod contpte;
mod corrupt_saves;
mod courier;
mod early_return;
mod example;
mod exhaustive;
mod findings;
mod full;
mod isb;
mod latr;
mod litmus;
mod local;
mod locked;
mod names;
mod ordering;
mod overlap;
mod parallel;
mod portfolio;
mod reclaim;
mod reduction;
mod renaming;
mod shapes;
mod sharded;
mod zoo;
