//! The tests of policy code that runs natively and may fault or corrupt
//! memory: faults and livelocks caught at their line (`faults.rs`), the
//! memory layout of a compiled C policy (`c_layout.rs`) and the kernel's own
//! C checked as written (`c_policy.rs`). A binary of their own so that
//! `scripts/test` builds only them under AddressSanitizer (the rest of the
//! checker's tests are `tests/main.rs`'s binary, `--test check`).

#[global_allocator]
static ALLOC: tlbkit_check::arena::CheckAlloc = tlbkit_check::arena::CheckAlloc;

// The helpers of `tests/main.rs`'s binary, shared.
#[path = "../common/mod.rs"]
mod common;

mod c_layout;
mod c_policy;
mod faults;
