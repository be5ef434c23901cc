//! An initiator that stops waiting too early: the checker
//! lets a sender of asynchronous IPIs return when its protocol stops waiting, not
//! when every handler has returned, and judges `no_stale_held`, frame reuse and
//! page-table-page reuse at that moment. So a completion protocol whose wait ends
//! one target short is found, with the checker's default shape, while FreeBSD's
//! three protocols (the scoreboard acknowledges before it invalidates, on purpose)
//! still pass.

use tlbkit_check::spec::{default_spec, CheckSpec};
use tlbkit_check::{check_policy, Mode};
use tlbkit_policy::asid::FreebsdX86;
use tlbkit_policy::fields::{Fields, Value};
use tlbkit_policy::shootdown::{CompletionProtocol, InvlOp, Pmap, Request};
use tlbkit_policy::sync::{AtomicU32, AtomicU64, Ordering, SpinLock};
use tlbkit_policy::{CpuMask, Hw, Phase, VirtAddr};

/// Builds FreeBSD's x86 pmap over [`ShortWait`] for the machine `spec` asks for.
fn short_wait(spec: &CheckSpec) -> impl Fn() -> FreebsdX86<ShortWait> {
    let (cpus, slots) = (spec.cpus, spec.mms + 1);
    move || FreebsdX86::with_protocol(cpus, slots, ShortWait::new(cpus))
}

/// FreeBSD 11.1's generation protocol (review D8041, `smp_targeted_tlb_shootdown`
/// in `sys/x86/x86/mp_x86.c`): under `smp_ipi_mtx` the initiator publishes the
/// request in the `smp_tlb_*` globals, bumps `smp_tlb_generation`, sends the IPIs;
/// each handler reads the globals, invalidates and stores the generation into its
/// own `pc_smp_tlb_done`; the initiator spins on each target's flag in turn.
///
/// Broken on purpose, in one place: the wait walks the targets but stops one
/// short (an off-by-one in the loop bound), so the initiator returns before the
/// last target has invalidated, and with two CPUs waits for none. Everything
/// else is the real protocol's order and memory orderings.
struct ShortWait {
    smp_ipi_mtx: SpinLock<()>,
    addr1: AtomicU64,
    addr2: AtomicU64,
    pmap: AtomicU32,
    op: AtomicU32,
    generation: AtomicU32,
    done: Vec<AtomicU32>,
}

impl ShortWait {
    fn new(ncpus: usize) -> Self {
        ShortWait {
            smp_ipi_mtx: SpinLock::new(()),
            addr1: AtomicU64::new(0),
            addr2: AtomicU64::new(0),
            pmap: AtomicU32::new(0),
            op: AtomicU32::new(0),
            generation: AtomicU32::new(0),
            done: (0..ncpus).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    /// The IPI handler: the generation, the request from the globals, the
    /// invalidation, then this CPU's flag.
    fn handler<H: Hw, I: Fn(&H, &Request)>(&self, hw: &H, invalidate: &I) {
        // Relaxed (all five loads): published by the IPI, stable under the
        // initiator's lock.
        let generation = self.generation.load(Ordering::Relaxed);
        let addr1 = VirtAddr(self.addr1.load(Ordering::Relaxed));
        let addr2 = VirtAddr(self.addr2.load(Ordering::Relaxed));
        let pmap = Pmap::from_word(self.pmap.load(Ordering::Relaxed));
        let op = InvlOp::from_word(self.op.load(Ordering::Relaxed));
        invalidate(hw, &Request { op, pmap, addr1, addr2 });
        // Release: the initiator's Acquire poll sees the invalidation done.
        self.done[hw.cpu().index()].store(generation, Ordering::Release);
    }
}

impl CompletionProtocol for ShortWait {
    fn shootdown<H, L, I>(&self, hw: &H, targets: &CpuMask, req: &Request, local: L, invalidate: I)
    where
        H: Hw,
        L: Fn(&H),
        I: Fn(&H, &Request),
    {
        local(hw);
        let me = hw.cpu();
        let others = CpuMask::new(targets.capacity());
        let mut list = Vec::new();
        targets.for_each(|c| {
            if c != me {
                others.set(c);
                list.push(c);
            }
        });
        if list.is_empty() {
            return;
        }
        hw.phase(Phase::Issue);
        let guard = self.smp_ipi_mtx.lock();
        // Relaxed (the request and the generation): published by the IPI.
        self.addr1.store(req.addr1.0, Ordering::Relaxed);
        self.addr2.store(req.addr2.0, Ordering::Relaxed);
        self.pmap.store(req.pmap.word(), Ordering::Relaxed);
        self.op.store(req.op.word(), Ordering::Relaxed);
        let generation = self.generation.load(Ordering::Relaxed).wrapping_add(1);
        self.generation.store(generation, Ordering::Relaxed);
        hw.phase(Phase::Dispatch);
        // The handler owns what it captures (`Hw::send_ipi_async`'s contract).
        hw.send_ipi_async(&others, move |h| self.handler(h, &invalidate));
        hw.phase(Phase::Sync);
        // The bug: `list.len() - 1` where every target must be waited for.
        for &c in &list[..list.len() - 1] {
            // Acquire: pairs with the handler's Release store.
            while self.done[c.index()].load(Ordering::Acquire) != generation {
                tlbkit_policy::sync::spin_loop();
            }
        }
        drop(guard);
        hw.phase(Phase::Done);
    }

    fn name_fields(&self, f: &mut dyn Fields) {
        f.add(&self.smp_ipi_mtx, format_args!("smp_ipi_mtx"), Value::Lock);
        f.add(&self.addr1, format_args!("smp_tlb_addr1"), Value::Addr);
        f.add(&self.addr2, format_args!("smp_tlb_addr2"), Value::Addr);
        f.add(&self.pmap, format_args!("smp_tlb_pmap"), Value::Number);
        f.add(&self.op, format_args!("smp_tlb_op"), Value::Number);
        f.add(&self.generation, format_args!("smp_tlb_generation"), Value::Number);
        for (i, d) in self.done.iter().enumerate() {
            f.add(d, format_args!("pcpu[cpu{i}].pc_smp_tlb_done"), Value::Number);
        }
    }
}

#[test]
fn an_initiator_that_stops_waiting_one_target_short_is_caught_when_it_returns() {
    // The default run of the real protocol the broken one comes from (3 CPUs:
    // the short wait waits for one target of two), and the same on 2 CPUs (with
    // one target, the short wait waits for none). Checked as the FreeBSD x86
    // kernel it is written like (`check_policy`).
    let base = default_spec("x86-freebsd-gen");
    for spec in [base.clone(), CheckSpec { cpus: 2, ..base }] {
        let r = check_policy(&spec, &short_wait(&spec)).expect("the spec is valid");
        let cpus = spec.cpus;
        let cx = r
            .counterexample
            .unwrap_or_else(|| panic!("{cpus} CPUs: not found in {} executions", r.explored.executions));
        // Either a target still holds the page when the initiator's flush
        // returns (judged at that moment), or the initiator, gone early, lets the
        // next request overwrite the one a late target has not read yet, which
        // then invalidates the wrong page and keeps a translation whose removal
        // was flushed. Both need the initiator to return before its target has
        // even taken the IPI, which the old checker made the initiator wait for.
        match cx.property {
            "no_stale_held" => assert!(cx.detail.starts_with("after flush_"), "{cpus} CPUs: {}", cx.detail),
            "no_stale_use" => assert!(cx.detail.ends_with("whose removal was flushed"), "{cpus} CPUs: {}", cx.detail),
            other => panic!("{cpus} CPUs: {other}: {}\n{}", cx.detail, cx.trace()),
        }
        // The stale target had not taken its IPI when the flush returned.
        let returned = cx.steps.iter().position(|st| st.events.iter().any(|e| e.contains(" returned: ")));
        let returned = returned.unwrap_or_else(|| panic!("{cpus} CPUs: no flush returned:\n{}", cx.trace()));
        let target = format!("cpu{}", cx.cpu);
        let took = cx.steps[..returned]
            .iter()
            .any(|st| st.who == target && st.events.iter().any(|e| e.starts_with("interrupt: IPI from")));
        assert!(!took, "{cpus} CPUs: {target} took its IPI before the flush returned:\n{}", cx.trace());
    }
}

#[test]
fn the_broken_protocol_fails_where_the_real_ones_pass() {
    // crates/check/tests/exhaustive.rs proves FreeBSD's three protocols (the
    // scoreboard acknowledging before it invalidates, its targets judged when
    // their handler returns) safe at 2 CPUs, 3 address spaces, 3 operations of
    // every kind; the broken one fails there.
    let spec = CheckSpec {
        cpus: 2,
        mms: 3,
        ops: 3,
        mode: Mode::Exhaustive,
        iterations: u64::MAX,
        ..default_spec("x86-freebsd-gen")
    };
    let r = check_policy(&spec, &short_wait(&spec)).unwrap();
    assert_eq!(r.counterexample.map(|c| c.property), Some("no_stale_held"));
}

#[test]
fn check_policy_refuses_a_bad_shape_with_a_message() {
    let spec = CheckSpec { cpus: 9, ..default_spec("x86-freebsd-gen") };
    let e = check_policy(&spec, &short_wait(&spec)).unwrap_err();
    assert_eq!(e.param(), Some(tlbkit_check::error::Param::Cpus));
    assert!(e.to_string().starts_with("cpus 9: "), "{e}");
    let spec =
        CheckSpec { teardown: Some(tlbkit_policy::contpte::Teardown::ALL[0]), ..default_spec("x86-freebsd-gen") };
    let e = check_policy(&spec, &short_wait(&spec)).unwrap_err();
    assert!(e.to_string().contains("arm64"), "{e}");
}

/// The scoreboard's target acknowledges before it invalidates, so a flush that
/// freed a page-table page returns while the target is still in its handler and
/// is judged for it when the handler returns. Meanwhile the process may fault a
/// new page-table page in at the same frame and unmap it again: a walk through
/// the frame then leads into the process's current table and the new unhook's
/// own flush judges it. The late judgement once took that walk for the freed
/// table's (this schedule, found by the default portfolio's second shape).
#[test]
fn a_late_judgement_ignores_a_table_hooked_again_at_the_same_frame() {
    let token = "t5~x86-freebsd-scoreboard~2~3~1~4~10~sc~bd~-~z16.1z9.1z14.2z30.1z11.1z11.1z9.1z3.1~c8dc3fed";
    let r = tlbkit_check::replay(token).expect("the token decodes");
    assert!(r.counterexample.is_none(), "{:?}", r.counterexample.map(|c| c.trace()));
}
