//! What the checker's test files share.

use tlbkit_check::exec::Memory;
use tlbkit_check::ops::OpKind;
use tlbkit_check::{CheckSpec, Mode};
use tlbkit_policy::contpte::Teardown;

/// A check of `arm64-linux` with one address space whose contiguous block exits
/// by `teardown`, on `cpus` CPUs with `ops` operations of the kinds in `menu`.
pub fn contpte_spec(teardown: Teardown, cpus: usize, ops: usize, menu: &str, mode: Mode, iterations: u64) -> CheckSpec {
    CheckSpec {
        policy: "arm64-linux".to_string(),
        cpus,
        mms: 1,
        pages: 1,
        asids: 4,
        ops,
        mode,
        iterations,
        seed: 1,
        memory: Memory::Sc,
        menu: OpKind::parse(menu).expect("a valid menu"),
        teardown: Some(teardown),
    }
}
