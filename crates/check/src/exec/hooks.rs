//! The hooks the policy's atomics and locks call (`tlbkit_policy::sync::check`):
//! each load, store, read-modify-write, fence, spin and lock of policy code
//! becomes a preemption point of the running CPU.

use super::*;

/// Reads the facade atomic of width `w` at `addr`.
///
/// # Safety
/// `addr` must be a live facade atomic of that width.
pub(super) unsafe fn read_raw(addr: usize, w: Width) -> u64 {
    use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering as O};
    // SAFETY: per the contract; facade atomics are repr(transparent) over core's.
    unsafe {
        match w {
            Width::W8 => (*(addr as *const AtomicU8)).load(O::SeqCst) as u64,
            Width::W16 => (*(addr as *const AtomicU16)).load(O::SeqCst) as u64,
            Width::W32 => (*(addr as *const AtomicU32)).load(O::SeqCst) as u64,
            Width::W64 => (*(addr as *const AtomicU64)).load(O::SeqCst),
        }
    }
}

/// Returns whether `ord` makes a load (or the read of a read-modify-write) a
/// load-acquire: Rust's `Acquire`, `AcqRel` and `SeqCst`, arm64's `LDAR`.
fn acquires(ord: Ordering) -> bool {
    matches!(ord, Ordering::Acquire | Ordering::AcqRel | Ordering::SeqCst)
}

/// Returns whether `ord` makes a store (or the write of a read-modify-write) a
/// store-release: Rust's `Release`, `AcqRel` and `SeqCst`, arm64's `STLR`.
fn releases(ord: Ordering) -> bool {
    matches!(ord, Ordering::Release | Ordering::AcqRel | Ordering::SeqCst)
}

/// Before an access that orders the loads after it (`ord` acquires): its
/// CPU loads nothing until the access, an ordering point, so it rests
/// (`stale`) while it waits for its turn.
fn rest_before(core: &Core, ord: Ordering) {
    if acquires(ord) {
        core.rest(core.cpu());
    }
}

pub(super) fn h_load(addr: usize, w: Width, ord: Ordering, read: &dyn Fn() -> u64) -> u64 {
    let Some(core) = current().filter(|c| c.shared_addr(addr)) else { return read() };
    rest_before(core, ord);
    core.pause_for(addr, false);
    let cpu = core.cpu();
    if core.shape.memory == Memory::Arm && acquires(ord) {
        // A load-acquire is ordered after every earlier store-release.
        let waits = core.st.borrow().cpus[cpu].buffer.before_acquire();
        core.drain_within(cpu, waits);
    }
    core.check_owner(cpu, addr, if acquires(ord) { Touch::Load } else { Touch::PlainLoad });
    core.note_shared(addr, w);
    core.touch(addr, false);
    let k = core.addr_key(addr);
    core.st.borrow_mut().read(cpu, addr, k);
    let fwd = core.st.borrow().cpus[cpu].buffer.forward(addr);
    let older = match fwd {
        Some(_) => None,
        None => older_or_latest(core, cpu, addr, ord),
    };
    let back = older.map_or(0, |(back, _)| back);
    let v = match (fwd, older) {
        (Some(v), _) => v,
        (None, Some((_, v))) => v,
        (None, None) => read(),
    };
    if back > 0 {
        // A newer value is visible already: a spin on this read does not wait.
        let mut st = core.st.borrow_mut();
        if let Some(r) = st.cpus[cpu].reads.iter_mut().find(|r| r.0 == addr) {
            r.1 = true;
        }
    }
    let key = mix(0x4_0000 ^ k, arena::position_free(v));
    // An older value read is another history than the latest of the same value.
    let key = if back == 0 { key } else { mix(key, back as u64) };
    core.event_in(cpu, key, true, || {
        let from = match (fwd, back) {
            (Some(_), _) => " (from its store buffer)",
            (None, 0) => "",
            (None, _) => " (a value already overwritten: loads out of order)",
        };
        (core.access_kind(addr, Rw::Read), format!("load {} -> {}{from}", core.addr_name(addr), core.show(addr, v)))
    });
    if acquires(ord) {
        // Later loads are ordered after a load-acquire.
        core.catch_up(cpu);
    }
    v
}

/// Under `--memory arm`, for a plain load of `addr` by CPU `cpu` that its
/// store buffer does not answer: lets the search choose which value it reads
/// (`stale`), and returns `(k, value)` for the `k`-th newest overwritten value
/// still readable to it, `None` for the latest. Elsewhere, and under a
/// script, `None`.
fn older_or_latest(core: &Core, cpu: usize, addr: usize, ord: Ordering) -> Option<(usize, u64)> {
    if core.shape.memory != Memory::Arm || acquires(ord) {
        return None;
    }
    let olds = core.st.borrow().stale.readable(cpu, addr);
    // A script names no such choice: its loads read the latest values.
    let back = if olds.is_empty() || core.with_chooser(|c| c.scripted()) {
        0
    } else {
        let labels: Vec<u32> = (0..=olds.len() as u32).collect();
        match core.choose(ChoiceKind::Read, &labels, 0) {
            Some(i) => i,
            // Pruned: stop here (the scheduler ends the execution).
            None => core.idle(),
        }
    };
    core.st.borrow_mut().stale.read(cpu, addr, back);
    (back > 0).then(|| (back, olds[back - 1]))
}

pub(super) fn h_store(addr: usize, w: Width, ord: Ordering, v: u64, write: &dyn Fn(u64)) {
    let Some(core) = current().filter(|c| c.shared_addr(addr)) else { return write(v) };
    core.pause_for(addr, true);
    let cpu = core.cpu();
    core.check_owner(cpu, addr, Touch::Write);
    core.note_shared(addr, w);
    let k = core.addr_key(addr);
    let text = |tail: &str| {
        (core.access_kind(addr, Rw::Write), format!("store {} = {}{tail}", core.addr_name(addr), core.show(addr, v)))
    };
    // Under TSO a `SeqCst` store is a locked one (x86's `XCHG`), visible at
    // once; under arm it is a store-release, buffered like any store (a later
    // plain load may pass it, a load-acquire may not: `h_load`).
    let arm = core.shape.memory == Memory::Arm;
    if arm || core.shape.memory.buffered() && ord != Ordering::SeqCst {
        let release = arm && releases(ord);
        core.st.borrow_mut().cpus[cpu].buffer.push(Stored { addr, w, v, release });
        core.event_in(cpu, mix(0x5_0000 ^ k, arena::position_free(v)), false, || text(&format!(" ({INTO_BUFFER})")));
    } else {
        core.drain_own(cpu);
        core.store(cpu, addr, w, || write(v));
        core.touch(addr, true);
        core.event_in(cpu, mix(0x6_0000 ^ k, arena::position_free(v)), false, || text(""));
    }
}

pub(super) fn h_rmw(addr: usize, w: Width, ord: Ordering, op: check::RmwOp<'_>) -> u64 {
    let Some(core) = current().filter(|c| c.shared_addr(addr)) else { return op().0 };
    rest_before(core, ord);
    core.pause_for(addr, true);
    let cpu = core.cpu();
    core.check_owner(cpu, addr, Touch::Write);
    core.note_shared(addr, w);
    if core.shape.memory == Memory::Arm && !releases(ord) {
        // An arm64 read-modify-write without release semantics (`LDXR`/`STXR`,
        // `LDADD`, or their acquire forms) orders nothing but its own location
        // (and, acquiring, what a load-acquire waits for).
        let waits = {
            let buf = &core.st.borrow().cpus[cpu].buffer;
            buf.before_rmw(addr, w) | if acquires(ord) { buf.before_acquire() } else { 0 }
        };
        core.drain_within(cpu, waits);
    } else {
        core.drain_own(cpu);
    }
    core.touch(addr, false);
    core.touch(addr, true);
    let k = core.addr_key(addr);
    core.st.borrow_mut().read(cpu, addr, k);
    let (old, new) = op();
    // A failed compare-exchange stores nothing.
    if old != new {
        core.wrote(cpu, addr, old, new);
    }
    // It read the latest value; acquiring, it orders every later load.
    core.st.borrow_mut().stale.read(cpu, addr, 0);
    if acquires(ord) {
        core.catch_up(cpu);
    }
    core.event_in(
        cpu,
        mix(mix(0x7_0000 ^ k, arena::position_free(old)), arena::position_free(new)),
        old == new,
        || {
            let kind = core.access_kind(addr, if old == new { Rw::Read } else { Rw::ReadWrite });
            (kind, format!("rmw {}: {} -> {}", core.addr_name(addr), core.show(addr, old), core.show(addr, new)))
        },
    );
    old
}

pub(super) fn h_fence(ord: Ordering) {
    let Some(core) = current() else {
        return std::sync::atomic::fence(ord);
    };
    let cpu = core.cpu();
    // Under arm a `Release` or `AcqRel` fence is a `DMB ISH` too; an `Acquire`
    // one (`DMB ISHLD`) orders loads only. Every one orders later loads.
    let drains = ord == Ordering::SeqCst || core.shape.memory == Memory::Arm && releases(ord);
    if drains && !core.st.borrow().cpus[cpu].buffer.is_empty() {
        // Only a fence with stores to drain does anything another CPU can see.
        core.pause();
        core.drain_own(cpu);
    }
    core.catch_up(cpu);
    core.event_in(cpu, 0x8_0000, true, || (Kind::Other, format!("fence({ord:?})")));
}

pub(super) fn h_spin() {
    let Some(core) = current() else {
        return std::hint::spin_loop();
    };
    let cpu = core.cpu();
    let why = {
        let mut st = core.st.borrow_mut();
        let reads = std::mem::take(&mut st.cpus[cpu].reads);
        if reads.is_empty() {
            // It waits for any store after this one: which stores come before
            // it is not a matter of fields.
            core.touch_global();
        }
        let c = &mut st.cpus[cpu];
        let trail = std::mem::take(&mut c.trail);
        match &c.anchor {
            Some((h, a)) if a.0 == trail.0 => c.history = *h,
            _ => c.anchor = Some((c.history, trail)),
        }
        Block::Spin(reads, st.writes)
    };
    // It loads nothing until the next pass, after the wait.
    core.rest(cpu);
    core.block(why);
    // The next pass of the loop reads afresh: it waited for a store it sees.
    core.catch_up(cpu);
}

pub(super) fn h_lock(word: usize, taken: bool) {
    let Some(core) = current() else { return };
    let cpu = core.cpu();
    let shared = core.shared_addr(word);
    if taken && shared {
        core.lock_word(word);
    }
    let mut st = core.st.borrow_mut();
    let c = &mut st.cpus[cpu];
    if shared {
        let k = (word - core.base) as u32;
        let (from, to) = if taken { (NO_LOCK, k) } else { (k, NO_LOCK) };
        let Some(slot) = c.held.iter_mut().find(|l| **l == from) else {
            drop(st);
            panic!("cpu{cpu} holds more than {MAX_HELD} spin locks at once");
        };
        *slot = to;
    }
    if taken {
        c.irq_off += 1;
    } else {
        c.irq_off -= 1;
    }
}

pub(super) static HOOKS: Hooks = Hooks {
    load: h_load,
    store: h_store,
    rmw: h_rmw,
    fence: h_fence,
    spin: h_spin,
    lock: h_lock,
    region: h_region,
    outside: h_outside,
};

/// Runs `f` with this thread's arena off (what it allocates outlives the execution).
pub(super) fn h_outside(f: &mut dyn FnMut()) {
    arena::outside(f);
}

/// A policy's state outside the allocator asks to start this thread's arena
/// ([`arena::adopt`]): only while a policy is built for an execution, when
/// the arena is active and empty.
pub(super) fn h_region(base: usize, len: usize, prefix: usize) -> bool {
    if !arena::is_active() {
        return false;
    }
    arena::adopt(base, len, prefix);
    true
}
