//! Kernel time ([`Stats::kernel_cycles`], `sim/event.rs`): what counts as
//! time in the kernel and what does not.

use super::*;
use crate::preset;
use tlbkit_policy::asid::LinuxX86;

/// Runs `ops` (a closure of the step number and the last return value) as one
/// process on a quiet 2-CPU Westmere under x86 Linux (PCID) to its end.
fn run_one(ops: impl FnMut(u32, u64) -> Op + 'static) -> Sim {
    struct Script<F>(u32, F);
    impl<F: FnMut(u32, u64) -> Op> Program for Script<F> {
        fn next(&mut self, ret: u64) -> Op {
            self.0 += 1;
            (self.1)(self.0, ret)
        }
    }
    let cfg = SimConfig { max_mms: 4, max_events: 10_000, ..SimConfig::quiet(preset::named("westmere"), 2, 1) };
    let mut sim = Sim::new(cfg, LinuxX86::new(2, 4, true));
    sim.spawn(Box::new(Script(0, ops))).unwrap();
    sim.run();
    assert!(sim.error.is_none(), "{:?}", sim.error);
    sim
}

#[test]
fn a_lone_thread_without_memory_accesses_spends_all_but_its_computation_in_the_kernel() {
    // Switched in, two computations around two system calls, exit, switched
    // out: every cycle of the only busy CPU that is not computation is kernel.
    let sim = run_one(|step, _| match step {
        1 => Op::Compute(1000),
        2 => Op::Sys(Sys::Mmap { pages: 4, write: true }),
        3 => Op::Sys(Sys::Pipe),
        4 => Op::Compute(500),
        _ => Op::Exit,
    });
    assert!(sim.stats.kernel_cycles > 0);
    assert_eq!(sim.end, 1500 + sim.stats.kernel_cycles);
}

#[test]
fn a_touch_counts_its_page_faults_as_kernel_time_and_its_accesses_as_user_time() {
    let sim = run_one(|step, _| match step {
        1 => Op::Sys(Sys::Mmap { pages: 4, write: true }),
        2 => Op::Mark("a"),
        // Four faults (the first touch) ...
        3 => Op::Touch { va: MMAP_BASE, pages: 4, write: true },
        4 => Op::Mark("b"),
        // ... then four hits.
        5 => Op::Touch { va: MMAP_BASE, pages: 4, write: true },
        6 => Op::Mark("c"),
        _ => Op::Exit,
    });
    let at = |m: &str| (sim.mark(m).unwrap(), sim.mark_stats(m).unwrap());
    let ((ta, sa), (tb, sb), (tc, sc)) = (at("a"), at("b"), at("c"));
    assert_eq!(sb.mmu.page_faults - sa.mmu.page_faults, 4);
    let faults = sb.kernel_cycles - sa.kernel_cycles;
    assert!(faults > 0 && faults < tb - ta, "the faults' {faults} cycles of the touch's {}", tb - ta);
    assert_eq!(sc.mmu.page_faults, sb.mmu.page_faults);
    assert!(tc > tb);
    assert_eq!(sc.kernel_cycles, sb.kernel_cycles, "a touch that hits stays in user mode");
}

#[test]
fn an_ipi_handler_that_lands_in_a_computation_is_kernel_time() {
    // cpu0 computes; an IPI handler of 700 cycles lands in its computation.
    let cfg = SimConfig { max_mms: 4, max_events: 10_000, ..SimConfig::quiet(preset::named("westmere"), 2, 1) };
    let mut sim = Sim::new(cfg, LinuxX86::new(2, 4, true));
    struct Work(u32);
    impl Program for Work {
        fn next(&mut self, _: u64) -> Op {
            self.0 += 1;
            if self.0 <= 3 {
                Op::Compute(10_000)
            } else {
                Op::Exit
            }
        }
    }
    sim.spawn(Box::new(Work(0))).unwrap();
    // The switch in and the first computation.
    assert!(sim.step() && sim.step());
    let (k0, t0) = (sim.stats.kernel_cycles, sim.scheduler.cpu(0).clock());
    assert!(k0 > 0, "the switch to the new thread is kernel time");
    sim.m.cpus[0].stolen += 700;
    sim.m.cpus[0].irq_stolen += 700;
    assert!(sim.step());
    assert_eq!(sim.scheduler.cpu(0).clock(), t0 + 700 + 10_000, "the handler delays the computation");
    assert_eq!(sim.stats.kernel_cycles, k0 + 700, "the handler is kernel time; the computation is not");
    sim.run();
    // The handler's cycles are in both.
    assert_eq!(sim.end, 30_000 + sim.stats.kernel_cycles);
}
