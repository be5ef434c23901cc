//! What policy code that goes wrong stands for: a panic (a failed
//! assertion, a C file's `BUG_ON` or race), a fault or a runaway loop
//! ([`tlbkit_fault`]) on a CPU's coroutine is the violation of the
//! schedule that reached it.

use super::arena;
use crate::kernel::Violation;

/// Returns the violation the panic `payload` of policy code on `cpu` stands for.
pub(super) fn violation(cpu: usize, payload: &(dyn std::any::Any + Send)) -> Violation {
    if let Some(fault) = tlbkit_fault::Fault::of(payload) {
        return fault_violation(cpu, fault);
    }
    let msg = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic".to_string());
    panic_violation(cpu, &msg)
}

/// Returns the violation a panic of policy code on `cpu` stands for: a
/// compiled C policy stops with `no_kernel_bug: ...` (a `BUG_ON`, `WARN_ON`
/// or `panic` of the kernel file) or `no_data_race: ...` (two plain accesses
/// without a common lock); anything else is the policy code's own panic.
fn panic_violation(cpu: usize, msg: &str) -> Violation {
    for property in ["no_kernel_bug", "no_data_race"] {
        if let Some(detail) = msg.strip_prefix(property).and_then(|m| m.strip_prefix(": ")) {
            return Violation { property, cpu, detail: detail.to_string() };
        }
    }
    Violation { property: "no_policy_panic", cpu, detail: format!("the policy code panicked: {msg}") }
}

/// Returns the violation a fault or a runaway loop of policy code on `cpu`
/// stands for ([`tlbkit_fault`]): `no_kernel_bug` for a fault (the kernel
/// would oops), `no_livelock` for a loop that never reaches the machine,
/// with the function and line. The coroutine it happened on has ended: the
/// execution stops there, as at any violation.
fn fault_violation(cpu: usize, fault: tlbkit_fault::Fault) -> Violation {
    // Out of the arena: describing it runs addr2line and keeps a string.
    let was = arena::set_active(false);
    let detail = fault.to_string();
    arena::set_active(was);
    Violation { property: fault.property(), cpu, detail }
}

/// Makes faults and runaway loops of policy code on this thread's
/// coroutines findings instead of the process's death or hang (see
/// [`tlbkit_fault`]). Outside the arena: the first call allocates.
pub(crate) fn guard_policy_code() {
    let was = arena::set_active(false);
    tlbkit_fault::install();
    tlbkit_fault::watch_this_thread();
    arena::set_active(was);
}
