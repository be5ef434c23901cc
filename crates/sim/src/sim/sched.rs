//! The scheduler: per-CPU run queues, wake-ups, migration (balanced wake-ups and
//! idle CPUs pulling work), and the context switch: the address-space switch the
//! policy makes, or lazy mode.

use super::*;
use tlbkit_policy::Tick;

impl<P: Policy> Sim<P> {
    /// Returns the least load of any CPU and the lowest CPU with it (`None`
    /// without CPUs), from the dense [`Sim`] `loads`.
    fn least_load(&self) -> Option<(u32, usize)> {
        self.loads.iter().enumerate().min_by_key(|&(c, &l)| (l, c)).map(|(c, &l)| (l, c))
    }

    /// Returns the CPU with the fewest threads queued or running (lowest id on ties).
    pub(super) fn least_loaded(&self) -> usize {
        let cpu = self.least_load().map_or(0, |(_, c)| c);
        debug_assert_eq!(cpu, (0..self.sched.len()).min_by_key(|&c| (self.load(c), c)).unwrap_or(0));
        cpu
    }

    /// Returns the CPU with the fewest threads queued or running, `near` itself on
    /// ties, then the lowest id: Linux's `find_idlest_cpu` keeps a new task on the
    /// local group unless another group is idler.
    pub(super) fn least_loaded_near(&self, near: usize) -> usize {
        let cpu = match self.least_load() {
            Some((min, c)) if self.loads.get(near) != Some(&min) => c,
            _ => near,
        };
        debug_assert_eq!(cpu, (0..self.sched.len()).min_by_key(|&c| (self.load(c), c != near, c)).unwrap_or(near));
        cpu
    }

    /// Returns the threads queued on or running on `cpu`, from its scheduler
    /// state: what the debug checks of `loads` compare it with.
    pub(super) fn load(&self, cpu: usize) -> usize {
        let load = self.sched[cpu].runq.len() + self.sched[cpu].cur.is_some() as usize;
        debug_assert_eq!(load, self.loads[cpu] as usize, "CPU {cpu}'s load changed without its setter");
        load
    }

    /// Queues `tid` last on `cpu`'s run queue.
    pub(super) fn queue(&mut self, cpu: usize, tid: usize) {
        self.sched[cpu].runq.push_back(tid);
        self.loads[cpu] += 1;
    }

    /// Takes the thread queued at `at` on `cpu`'s run queue (0: the first).
    fn unqueue(&mut self, cpu: usize, at: usize) -> Option<usize> {
        let q = &mut self.sched[cpu].runq;
        let tid = if at == 0 { q.pop_front() } else { q.remove(at) };
        self.loads[cpu] -= tid.is_some() as u32;
        tid
    }

    /// Sets the thread running on `cpu` (`None`: none).
    pub(super) fn set_cur(&mut self, cpu: usize, tid: Option<usize>) {
        let s = &mut self.sched[cpu];
        self.loads[cpu] = self.loads[cpu] + tid.is_some() as u32 - s.cur.is_some() as u32;
        s.cur = tid;
    }

    pub(super) fn enqueue(&mut self, tid: usize, cpu: usize, now: u64, from: usize) {
        self.threads[tid].state = State::Runnable;
        self.threads[tid].cpu = cpu;
        self.queue(cpu, tid);
        if self.sched[cpu].cur.is_none() && !self.sched[cpu].armed {
            let c = self.m.costs;
            let mut t = now.max(self.sched[cpu].clock);
            if cpu != from {
                // Wake an idle CPU with a reschedule IPI.
                self.m.counters.ipis_sent += 1;
                t += c.ipi_send + c.ipi_deliver + if self.m.cross_socket(from, cpu) { c.ipi_cross_socket } else { 0 };
            }
            self.arm(cpu, t);
        }
    }

    pub(super) fn wake(&mut self, tid: usize, from: usize, now: u64) {
        let t = &self.threads[tid];
        let cpu = if self.cfg.migration && !t.pinned { self.least_loaded() } else { t.cpu };
        self.enqueue(tid, cpu, now, from);
    }

    /// Switches `cpu` (whose previous thread was `prev`) to its next runnable
    /// thread, or to idle.
    pub(super) fn schedule(&mut self, cpu: usize, prev: Option<usize>, mut now: u64) -> u64 {
        let mut next = self.unqueue(cpu, 0);
        if next.is_none() && self.cfg.migration {
            next = self.steal(cpu);
        }
        let c = self.m.costs;
        now += c.switch_path;
        self.stats.context_switches += 1;
        // The scheduler's code and the low-level switch code sit in their own
        // 2 MB blocks of kernel text.
        now = self.kaccess(cpu, self.ktext + KTEXT_SCHED, now);
        now = self.kaccess(cpu, self.ktext + KTEXT_SWITCH, now);
        let rq = self.sched[cpu].runq_page;
        now = self.kaccess(cpu, rq, now);
        if let Some(p) = prev {
            now = self.kaccess(cpu, self.threads[p].tstruct, now);
        }
        // After `pick_next_task`, before the switch (LATR's sweep).
        now = self.tick(cpu, Tick::Schedule, now);
        let Some(next) = next else {
            // Idle: the idle thread runs on the kernel's address space.
            self.set_cur(cpu, None);
            return self.enter_lazy(cpu, Lazy::Idle, now);
        };
        now = self.kaccess(cpu, self.threads[next].tstruct, now);
        now = self.kaccess(cpu, self.threads[next].kstack, now);
        let mm = self.threads[next].mm;
        now = if mm.is_kernel() { self.enter_lazy(cpu, Lazy::KernelThread, now) } else { self.switch_mm(cpu, mm, now) };
        self.set_cur(cpu, Some(next));
        self.sched[cpu].slice_start = now;
        self.threads[next].state = State::Running;
        self.threads[next].cpu = cpu;
        self.arm(cpu, now);
        now
    }

    /// Takes the last queued thread that is not pinned from the busiest other CPU.
    pub(super) fn steal(&mut self, cpu: usize) -> Option<usize> {
        let threads = &self.threads;
        let movable = |c: usize| self.sched[c].runq.iter().rposition(|&t| !threads[t].pinned);
        let victim = (0..self.sched.len())
            .filter(|&c| c != cpu && movable(c).is_some())
            .max_by_key(|&c| (self.sched[c].runq.len(), Reverse(c)))?;
        let at = movable(victim)?;
        self.unqueue(victim, at)
    }

    pub(super) fn switch_mm(&mut self, cpu: usize, mm: MmId, now: u64) -> u64 {
        let hw = CpuHw::new(&mut self.m, cpu, now);
        self.policy.switch_mm(&hw, mm);
        let now = hw.now();
        self.switched(cpu, mm, now)
    }

    /// Leaves `cpu` running the kernel with no address space of its own, `who`
    /// being the idle task or a kernel thread (`enter_lazy_tlb`).
    pub(super) fn enter_lazy(&mut self, cpu: usize, who: Lazy, now: u64) -> u64 {
        let hw = CpuHw::new(&mut self.m, cpu, now);
        self.policy.enter_lazy(&hw, who);
        let now = hw.now();
        self.switched(cpu, MmId::KERNEL, now)
    }

    /// After the policy switched `cpu` to `mm`: the oracle's scan and the release
    /// of address spaces no root points at any more.
    pub(super) fn switched(&mut self, cpu: usize, mm: MmId, now: u64) -> u64 {
        self.sched[cpu].loaded = mm;
        self.complete_lazy(now);
        if self.oracle.strict {
            self.strict_scan(cpu, now);
        }
        self.reap(cpu, now)
    }
}
