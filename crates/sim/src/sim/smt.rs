//! Simultaneous multithreading: the hardware threads of one core share its
//! issue resources.
//!
//! A preset with more than one thread per core ([`Preset::threads`]) numbers a socket's CPUs
//! as Linux does on such parts: the cores' first threads, then their second
//! ones, so CPU `l` of a socket of `n` and CPU `l + n / 2` are the two threads
//! of one core. While a CPU's event runs and another thread of its core is
//! running a task (not idle: an idle thread's `mwait` or `hlt` gives the core
//! back), the software that event runs, the kernel's paths (the exception
//! entry and exit, the system-call, fault, switch, pipe, zap and IPI-handler
//! paths, zeroing and copying pages) and the program's own computing, takes
//! `1 / smt_share` as long ([`crate::preset::CoreThreads::share`]): each of the two threads
//! gets that share of the core's one-thread speed. What a thread waits for
//! outside its core (cache lines from other cores, memory, IPI delivery, TLB
//! walks' loads, the TLB instructions) costs what it costs alone.
//!
//! Where the machine's file says so (`smt_tlbs`, every x86 preset: the TLB
//! sharing masks CPUID gives Intel's parts, one core's two threads), a core's threads also share
//! its TLBs and walk cache, competitively: each entry is the filling
//! thread's alone, and both threads' entries compete for the same slots
//! ([`crate::tlb::ThreadTlb`], [`crate::machine::Machine::share_tlbs`]); and
//! its page walkers, of which each thread has half while both run (the
//! overlap of a multi-page touch's walks, `walkers`; an even split of a
//! competitive share, an estimate). The L1D's fill buffers (`mlp`) and the
//! caches stay each CPU's own. The scheduler knows the cores: fork
//! balancing and a wake-up's `select_idle_sibling` take a wholly idle core before an idle
//! thread of a busy one (`crate::sched::fork`, `sim/scheduler.rs`). The
//! costs are chosen once per event, by the CPU the event is
//! on, except an interrupt's entry, dispatch and exit, which follow the
//! core of the CPU it lands on (`Machine::set_smt_irq`); the work inside an
//! IPI handler a sender's event runs takes the sender's, and a long
//! computation keeps the speed it started at when the sibling stops or
//! starts. `--set smt=off` runs every CPU as a core of its own, as the
//! model did before siblings shared anything.

use crate::machine::IrqCosts;
use crate::preset::{CoreThreads, Costs, Preset};

/// The sharing of a machine whose cores run more than one thread.
#[derive(Clone, Debug)]
pub(super) struct Smt {
    /// The threads of a core (which CPUs they are: [`CoreThreads::siblings`],
    /// through [`crate::machine::Machine::core_shared`]).
    threads: CoreThreads,
    /// The preset's costs, and those of a CPU whose core another thread is
    /// using (the software paths stretched by `1 / share`).
    alone: Costs,
    shared: Costs,
    /// Each thread's share of the core, in 1/1024ths.
    share_1024: u64,
    /// Whether the event running now is on a CPU whose core is shared.
    now_shared: bool,
}

impl Smt {
    /// Returns the sharing of `preset`'s cores, `None` where each CPU is a
    /// core of its own (one thread per core, or `smt` `Some(false)`).
    pub(super) fn of(preset: &Preset, smt: Option<bool>) -> Option<Smt> {
        if !preset.threads.shared(smt) {
            return None;
        }
        let share_1024 = ((preset.threads.share * 1024.0).round() as u64).clamp(1, 1024);
        let stretch = |c: u64| (c * 1024).div_ceil(share_1024);
        let alone = preset.machine_costs();
        let mut shared = alone;
        shared.exception_entry = stretch(alone.exception_entry);
        shared.exception_exit = stretch(alone.exception_exit);
        shared.ipi.ipi_handle = stretch(alone.ipi.ipi_handle);
        let k = &mut shared.kernel;
        for c in [
            &mut k.syscall_body,
            &mut k.pipe_op,
            &mut k.switch_path,
            &mut k.fault_path,
            &mut k.page_copy,
            &mut k.zap_page,
            &mut k.zap_folio,
        ] {
            *c = stretch(*c);
        }
        // The core's page walkers, where its threads share them with its
        // TLBs: half each while both run (a competitive share, split evenly).
        if preset.threads.tlbs {
            shared.walkers = (alone.walkers / preset.threads.per_core as u64).max(1);
        }
        Some(Smt { threads: preset.threads, alone, shared, share_1024, now_shared: false })
    }

    /// Returns what an interrupt costs a CPU of a core used by it alone and by
    /// two threads ([`crate::machine::SmtIrq`]).
    pub(super) fn irq(&self) -> crate::machine::SmtIrq {
        crate::machine::SmtIrq {
            threads: self.threads,
            alone: IrqCosts::of(&self.alone),
            shared: IrqCosts::of(&self.shared),
        }
    }

    /// Returns the threads per core in effect.
    pub(super) fn threads(&self) -> usize {
        self.threads.per_core
    }

    /// Begins an event on a CPU whose core another thread is (`shared`) or
    /// is not using; returns the costs it runs at.
    pub(super) fn begin(&mut self, shared: bool) -> Costs {
        self.now_shared = shared;
        if shared {
            self.shared
        } else {
            self.alone
        }
    }

    /// Returns what `cycles` of a program's computing take in the event
    /// running now.
    pub(super) fn compute(&self, cycles: u64) -> u64 {
        if self.now_shared {
            (cycles * 1024).div_ceil(self.share_1024)
        } else {
            cycles
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preset;
    use crate::program::{Op, Program, Sys};
    use crate::sim::{Sim, SimConfig};
    use tlbkit_policy::asid::LinuxX86;

    /// A program that computes for `cycles`, after starting a copy of itself
    /// on `other` if it is the first.
    struct Busy {
        other: Option<usize>,
        cycles: u64,
        done: bool,
    }

    impl Program for Busy {
        fn next(&mut self, _: u64) -> Op {
            if let Some(cpu) = self.other.take() {
                return Op::Sys(Sys::CloneOn(cpu, Box::new(Busy { other: None, cycles: self.cycles, done: false })));
            }
            if std::mem::replace(&mut self.done, true) {
                return Op::Exit;
            }
            Op::Compute(self.cycles)
        }
    }

    /// Runs two threads computing 3 million cycles each, on CPU 0 and `other`
    /// of one skx8170 socket; returns the cycles until both are done.
    fn pair(other: usize, smt: Option<bool>) -> u64 {
        let cfg = SimConfig { max_mms: 4, smt, ..SimConfig::quiet(preset::named("skx8170"), 52, 1) };
        let mut sim = Sim::new(cfg, LinuxX86::new(52, 4, true));
        sim.spawn(Box::new(Busy { other: Some(other), cycles: 3_000_000, done: false })).unwrap();
        sim.run();
        assert!(sim.error.is_none(), "{:?}", sim.error);
        sim.end
    }

    #[test]
    fn two_threads_of_one_core_each_run_at_its_share_and_two_cores_at_full_speed() {
        // CPU 26 is CPU 0's sibling on skx8170; CPU 1 is another core.
        let (apart, together, off) = (pair(1, None), pair(26, None), pair(26, Some(false)));
        assert!(apart < 3_200_000, "two cores: {apart} cycles");
        assert_eq!(off, apart, "smt=off runs each CPU as a core");
        // At 0.6 of the core each, 3 million cycles take 5 million.
        assert!(together > 4_900_000 && together < 5_300_000, "one core's two threads: {together} cycles");
    }

    /// A thread that maps `pages` pages, writes each, then reads them all
    /// `laps` times over.
    #[derive(Clone)]
    struct Reader {
        pages: u64,
        laps: u64,
        va: u64,
        step: u64,
    }

    impl Program for Reader {
        fn next(&mut self, ret: u64) -> Op {
            self.step += 1;
            match self.step {
                1 => Op::Sys(Sys::Mmap { pages: self.pages, write: true }),
                2 => {
                    self.va = ret;
                    Op::Touch { va: self.va, pages: self.pages, write: true }
                }
                s if s <= 2 + self.laps => Op::Touch { va: self.va, pages: self.pages, write: false },
                _ => Op::Exit,
            }
        }
    }

    /// A process's first thread, which starts a [`Reader`] bound to each of
    /// `cpus` and exits.
    struct Launch {
        cpus: Vec<usize>,
        reader: Reader,
    }

    impl Program for Launch {
        fn next(&mut self, _: u64) -> Op {
            match self.cpus.pop() {
                Some(cpu) => Op::Sys(Sys::CloneOn(cpu, Box::new(self.reader.clone()))),
                None => Op::Exit,
            }
        }
    }

    /// The page walks of two [`Reader`]s of `pages` pages read `laps` times,
    /// on skx8170's CPUs 0 and `other`.
    fn walks(other: usize, smt: Option<bool>, pages: u64, laps: u64) -> u64 {
        let cfg = SimConfig { max_mms: 4, smt, ..SimConfig::quiet(preset::named("skx8170"), 52, 1) };
        let mut sim = Sim::new(cfg, LinuxX86::new(52, 4, true));
        let reader = Reader { pages, laps, va: 0, step: 0 };
        sim.spawn(Box::new(Launch { cpus: vec![0, other], reader })).unwrap();
        sim.run();
        assert!(sim.error.is_none(), "{:?}", sim.error);
        sim.stats.mmu.page_walks
    }

    #[test]
    fn a_cores_threads_compete_for_its_tlbs() {
        // skx8170's STLB holds 1,536 entries: one thread's 1,000 pages fit,
        // two threads' 2,000 do not. On two cores (or with smt=off) each
        // thread walks each page twice, when it faults it in (the walk that
        // finds no PTE, and the one after the fault); on one core's two
        // threads, whose entries share the slots, they go on walking at
        // every lap.
        let (pages, laps) = (1000, 8);
        let apart = walks(1, None, pages, laps);
        let off = walks(26, Some(false), pages, laps);
        let together = walks(26, None, pages, laps);
        assert!(apart < 4 * pages + pages / 10, "two cores: {apart} walks");
        assert_eq!(off, apart, "smt=off: a TLB each");
        assert!(together > apart + laps * pages, "one core's two threads: {together} walks against {apart}");
    }

    #[test]
    fn a_cores_threads_are_a_socket_apart_by_half_its_cpus() {
        // skx8170: 52 CPUs a socket, 26 cores of 2 threads.
        let p = preset::named("skx8170");
        let sib = |c: usize| p.threads.siblings(p.cores_per_socket, c, 104).collect::<Vec<_>>();
        assert_eq!((sib(0), sib(26), sib(25), sib(51)), (vec![26], vec![0], vec![51], vec![25]));
        assert_eq!((sib(52), sib(78), sib(103)), (vec![78], vec![52], vec![77]));
        // A run of fewer CPUs has no sibling past its last.
        assert!(p.threads.siblings(p.cores_per_socket, 0, 20).next().is_none());
        assert!(Smt::of(&p, None).is_some());
        assert!(Smt::of(&p, Some(false)).is_none());
        assert!(Smt::of(&preset::named("milan"), None).is_none());
    }

    #[test]
    fn a_shared_core_stretches_the_software_and_nothing_outside_the_core() {
        let p = preset::named("skx8170");
        let mut smt = Smt::of(&p, None).unwrap();
        let (alone, shared) = (smt.begin(false), smt.begin(true));
        assert_eq!(alone.kernel.fault_path, p.costs.kernel.fault_path);
        // 1500 cycles at 0.6 of the core: 2500.
        assert_eq!(shared.kernel.fault_path, (1500 * 1024u64).div_ceil(614));
        assert!(shared.kernel.syscall_body > alone.kernel.syscall_body);
        assert!(shared.ipi.ipi_handle > alone.ipi.ipi_handle);
        assert_eq!(shared.lines.cacheline_transfer, alone.lines.cacheline_transfer);
        assert_eq!(shared.local.tlbi_local_va, alone.local.tlbi_local_va);
        assert_eq!(shared.ipi.ipi_deliver, alone.ipi.ipi_deliver);
        // The core's two page walkers: one each while both threads run.
        assert_eq!((alone.walkers, shared.walkers), (2, 1));
        assert_eq!(shared.mlp, alone.mlp, "the fill buffers are not shared in the model");
        assert_eq!(smt.compute(614), 1024);
        smt.begin(false);
        assert_eq!(smt.compute(614), 614);
    }
}
