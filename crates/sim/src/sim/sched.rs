//! The scheduler: per-CPU run queues ordered by the class's key
//! ([`crate::sched`]: FIFO, CFS or EEVDF), wake-ups and where they place the
//! woken thread, wake-up and tick preemption, and the context switch: the
//! address-space switch the policy makes, or lazy mode. Balancing between
//! CPUs is `sim/balance.rs`. The run queues, their load figures and the
//! class's rules that read nothing else (queueing and picking, placement,
//! `select_task_rq_fair`, the preemption decisions) are the scheduler part's
//! (`sim/scheduler.rs`); this file's paths add what drives the machine: the
//! reschedule IPIs, the wake-up costs, the tick's timing and the switch.
//!
//! FIFO (the FreeBSD presets) is what the simulator always had: a wake-up
//! queues the thread last on its CPU (on the least-loaded CPU with
//! `migration=on`), it runs until it blocks, yields, exits or has used its
//! `slice_us`, and an idle CPU steals with `migration=on`.
//!
//! CFS and EEVDF (Linux, `kernel/sched/fair.c`):
//! - Fork placement (`select_task_rq_fair` with `WF_FORK`): a new process or
//!   thread that is not bound starts where `find_idlest_cpu` walking down the
//!   parent's CPU's domains puts it, NUMA nodes included (`crate::sched::fork`);
//!   a process a workload starts is forked by a launcher on CPU 0.
//! - Wake-up placement (`select_task_rq_fair`, with `migration` on): unless
//!   the waker and wakee switch partners too often (`wake_wide`), the waker's
//!   CPU or the wakee's previous one by `wake_affine` (WA_IDLE: an idle waker
//!   CPU sharing cache with the previous one, a sync wake-up onto a waker
//!   running alone (from v6.15 its delayed tasks not counted:
//!   `sim/scheduler/delayed.rs`), an idle previous CPU (v4.16 on); then WA_WEIGHT, PELT's loads compared
//!   with half the lowest common domain's `imbalance_pct` as bias: `sim/scheduler/pelt.rs`), then
//!   `select_idle_sibling`: the target if idle, the previous CPU if idle and
//!   sharing cache, the wakee's recently used CPU if idle and sharing the
//!   target's cache (`recent_used_cpu`, v4.17 on: [`crate::sched::RecentUsed`]
//!   says how the record moves), else, scanning the target's cache domain
//!   from the CPU after it, the first CPU of a wholly idle core where a
//!   core's threads share it (`select_idle_core`); with none, from v5.13 an
//!   idle thread of the previous CPU's core (`select_idle_smt`); else the
//!   first idle CPU; from v6.0 the scan looks at no more CPUs than SIS_UTIL's
//!   count, which each periodic balance of the cache domain sets from the
//!   domain's PELT utilisation (none from 85% busy: `sim/scheduler/pelt.rs`);
//!   before, the waking CPU's `avg_idle` against its scans' average cost
//!   limits it ([`crate::sched::ScanLimit`]: SIS_PROP from v4.13, none or
//!   all from v4.9). The waker pays a line transfer for each busy CPU the
//!   scans look at (its run-queue line; an idle CPU's is taken as cached),
//!   a floor as the newly idle balance's scan is; the scan's loop's cost is
//!   the sample of its average.
//!   A thread bound to a CPU (`CloneOn`) stays there; with `migration=off`
//!   every thread wakes on its previous CPU. Pipe wake-ups are sync, as
//!   `pipe_write`'s and `pipe_read`'s `wake_up_interruptible_sync_poll`.
//! - EEVDF's delayed dequeue (v6.12, `--set delay_dequeue`,
//!   `sim/scheduler/delayed.rs`): a thread that went to sleep while not
//!   eligible may still be queued when it is woken (`ttwu_runnable`); it
//!   then runs where it is queued, with no choice of CPU and no wake list,
//!   the waker paying the queue's lock line and the preemption check.
//! - The woken thread is placed in the queue by the class's rule and may
//!   preempt the running thread (`check_preempt_wakeup`): a reschedule, taken
//!   at the target CPU's next event (an operation is atomic), signalled by a
//!   reschedule IPI when the target is another CPU.
//! - A thread woken onto another CPU's queue costs the waker that queue's lock
//!   line (one cache-line transfer between the two CPUs); the IPI's handler
//!   (exception entry and return) is taken from the target's operation.
//! - `TTWU_QUEUE` (`ttwu_queue_wakelist`, `kernel/sched/core.c`): a wake-up
//!   onto a CPU that does not share the waker's cache domain
//!   (`ttwu_queue_cond`'s `!cpus_share_cache`, every kernel from v3.0) goes
//!   on the target's wake list, whose line is then the one the waker pays
//!   for, not the remote queue's lock; the target queues the thread itself.
//!   A busy target is sent an IPI for it (the reschedule vector before v5.8,
//!   the call-function-single one after: `send_call_function_single_ipi`),
//!   always, whether or not the thread preempts, and the preemption check
//!   runs in that IPI's handler, with no second IPI. An idle target is woken
//!   as any idle CPU is (`sim/idle.rs`: the polling store or the IPI). The
//!   wake list of an idle CPU sharing the cache (v6.0's `!nr_running` rule,
//!   f3dd3f674555) and of a wakee still descheduling (v5.8's `WF_ON_CPU`)
//!   changes nothing the model charges: the idle CPU's wake-up is the same,
//!   and a wakee here is always off its CPU. A busy target's handler
//!   (`sched_ttwu_pending`) runs where the engine runs every IPI handler
//!   that reaches a busy CPU, at the start of its next event: until then
//!   the wakee is on the list and on no run queue (no balance can pull it),
//!   and its placement, the queue's clock and the preemption check are the
//!   handler's, at that time (`ttwu_do_activate`). `--set ttwu_queue=off`
//!   queues every wake-up under the remote lock, as before.
//! - An idle CPU woken by another (`sim/idle.rs`) starts after its idle
//!   state's exit latency: a polling one (x86's POLL and `MWAIT` states) is
//!   woken by the store to its thread flags with no IPI, any other after a
//!   reschedule IPI's delivery, drawn from the seed around its mean
//!   ([`crate::noise`]).
//! - At the 1 ms tick of a busy CPU (on the run's tick grid, its phase drawn
//!   from the seed): the running thread's runtime is charged,
//!   the class's tick preemption is checked, and balancing runs when due.
//! - Load: wake-affine placement reads PELT's load averages
//!   (`sim/scheduler/pelt.rs`), fork placement and load balancing its loads,
//!   utilisations and runnable averages (`crate::sched::group`,
//!   `crate::sched::busiest`).

use super::syscall::mmap_lock_mode;
use super::*;
use crate::toggle::TTWU_QUEUE;
use tlbkit_policy::Tick;

impl Sim {
    /// Queues `tid`, runnable, on `cpu` at `now` (`from`: the CPU that made it
    /// runnable): wakes `cpu` if it is idle, or, for the fair classes, checks
    /// whether it preempts the thread running there.
    pub(super) fn enqueue(&mut self, tid: usize, cpu: usize, now: u64, from: usize) {
        self.scheduler.queue_runnable(cpu, tid, now);
        self.queued(tid, cpu, now, from);
    }

    /// After `tid` became runnable on `cpu`'s queue at `now`, made so from
    /// `from`: wakes `cpu` if it is idle, or checks whether `tid` preempts the
    /// thread running there.
    fn queued(&mut self, tid: usize, cpu: usize, now: u64, from: usize) {
        if self.scheduler.cpu(cpu).cur().is_none() && !self.scheduler.cpu(cpu).armed() {
            let mut t = now.max(self.scheduler.cpu(cpu).clock());
            if cpu != from {
                t = self.wake_idle(cpu, from, t);
            }
            self.arm(cpu, t);
        } else if self.scheduler.tun().kind.is_fair() {
            self.check_preempt(cpu, tid, now, from);
        }
    }

    /// `check_preempt_wakeup`: whether `tid`, just queued on `cpu`, preempts the
    /// thread running there; if so, a reschedule is owed (an IPI from `from` if
    /// that is another CPU).
    fn check_preempt(&mut self, cpu: usize, tid: usize, now: u64, from: usize) {
        if self.scheduler.wakeup_preempts(cpu, tid, now) {
            self.resched(cpu, from);
        }
    }

    /// Owes `cpu` a reschedule, sending it a reschedule IPI from `from` if that
    /// is another CPU: its handler's entry and return are taken from the
    /// operation the target runs.
    pub(super) fn resched(&mut self, cpu: usize, from: usize) {
        self.scheduler.cpu_mut(cpu).owe_resched();
        if cpu != from {
            let c = self.m.costs;
            self.m.counters.ipis_sent += 1;
            self.m.cpus[cpu].stolen += c.exception_entry + c.exception_exit;
            self.m.cpus[cpu].irq_stolen += c.exception_entry + c.exception_exit;
        }
    }

    /// Wakes `tid` from `from` at `now`, synchronously when the waker is about to
    /// sleep (`sync`, as pipe wake-ups are); returns the waker's time after it.
    pub(super) fn wake(&mut self, tid: usize, from: usize, now: u64, sync: bool) -> u64 {
        if !self.scheduler.tun().kind.is_fair() {
            let t = self.scheduler.thread(tid);
            let cpu = if self.cfg.migration && !t.pinned() { self.scheduler.least_loaded() } else { t.cpu() };
            self.enqueue(tid, cpu, now, from);
            return now;
        }
        if self.scheduler.is_delayed(tid) {
            return self.wake_delayed(tid, from, now);
        }
        let prev = self.scheduler.thread(tid).cpu();
        if let Some(w) = self.scheduler.cpu(from).cur() {
            let hz = self.scheduler.tun().ms * 1000;
            self.scheduler.thread_mut(w).record_wakee(tid, now, hz);
        }
        let (cpu, now) = if self.cfg.migration && !self.scheduler.thread(tid).pinned() {
            let placed = self.scheduler.select_task_rq(tid, prev, from, sync);
            // The scans' reads of busy CPUs' run-queue lines, charged to the
            // waker as a walk (the next CPU's address is the scan's counter,
            // not a value read); `select_idle_cpu`'s own, the sample of its
            // average cost.
            let line = self.m.transfer_cost(from, placed.cpu);
            if let Some(busy) = placed.idle_scan {
                let took = self.m.walk_time([(u64::from(busy), line)]);
                self.scheduler.scan_took(from, took);
            }
            (placed.cpu, now + self.m.walk_time([(u64::from(placed.busy_read), line)]))
        } else {
            (prev, now)
        };
        if self.queues_on_wakelist(cpu, from) {
            self.enqueue_wakelist(tid, cpu, now, from);
        } else {
            self.activate(tid, prev, cpu, now);
            self.enqueue(tid, cpu, now, from);
        }
        self.after_queue_lock(from, cpu, now)
    }

    /// Puts `tid`, running on `cpu`, to sleep at `now` in the wait queue of
    /// `mm`'s `mmap_lock` until the writer holding it releases it: a timed
    /// wake-up at that release, by that writer's CPU ([`Sim::timed_wake`]);
    /// behind a writer asleep in the queue, at that writer's release
    /// (`sim/mmap_writer.rs`).
    pub(super) fn sleep_on_mmap_lock(&mut self, cpu: usize, tid: usize, mm: MmId, now: u64) {
        self.stats.mmap_lock_sleeps += 1;
        self.scheduler.sleep(cpu, tid, now);
        if self.writer_queued(mm, now) {
            // Behind a writer asleep in the queue, whose release is not
            // known yet: it wakes this reader when it releases.
            self.kw.queue_reader(mm, tid);
            return;
        }
        let (until, waker) = self.kw.mmap_lock(mm).writer_release();
        self.arm_wake(until.max(now), tid, waker);
    }

    /// Arms a timed wake-up of `tid`, asleep in a `mmap_lock` wait queue, by
    /// `waker`'s CPU at `t` ([`Sim::timed_wake`]).
    pub(super) fn arm_wake(&mut self, t: u64, tid: usize, waker: usize) {
        self.ev_seq += 1;
        self.events.push_wake(t, self.ev_seq, tid, waker);
    }

    /// The writer's release on `waker` wakes `tid`, a reader asleep in its
    /// address space's `mmap_lock` wait queue, at `t` (`rwsem_wake`:
    /// `rwsem_mark_wake` grants the read lock to the readers it wakes, and
    /// `wake_up_q` wakes them one after another); a writer asleep there is
    /// woken by its last reader instead. The waker wakes the reader after
    /// its wake-up of the reader before ([`Sim::wake_from_queue`]). A writer
    /// asking meanwhile waits at least until the wake-up's end (the reader's
    /// own hold is placed when it runs, in the simulator's order).
    pub(super) fn timed_wake(&mut self, t: u64, tid: usize, waker: usize) {
        self.m.set_floor(t);
        if self.scheduler.thread(tid).locked_sys().and_then(mmap_lock_mode) == Some(true) {
            self.wake_from_queue(tid, waker, t);
            return;
        }
        let mm = self.scheduler.thread(tid).mm();
        let start = self.kw.mmap_lock(mm).next_wake(t);
        let end = self.wake_from_queue(tid, waker, start);
        let sem = self.kw.mmap_lock(mm);
        sem.woke_until(end);
        sem.read_held_until(end);
    }

    /// `waker`'s CPU wakes `tid` from a `mmap_lock` wait queue from `start`:
    /// it reads the wakee's task and wakes it as any waker does
    /// ([`Sim::wake`]); what that costs it is taken from its next
    /// operation, as an interrupt's handler is. Returns when it ends.
    fn wake_from_queue(&mut self, tid: usize, waker: usize, start: u64) -> u64 {
        let read = self.kaccess(waker, self.scheduler.thread(tid).tstruct(), start);
        let end = self.wake(tid, waker, read, false);
        self.m.cpus[waker].stolen += end - start;
        self.m.cpus[waker].irq_stolen += end - start;
        end
    }

    /// `ttwu_do_activate`'s accounting for `tid`, last on `prev`, woken onto
    /// `cpu` at `now`: the queue's clock brought up to date, the thread
    /// placed in it, and the CPU's idle time since it last went idle
    /// recorded (`rq->avg_idle`). The queueing is the caller's.
    fn activate(&mut self, tid: usize, prev: usize, cpu: usize, now: u64) {
        self.scheduler.update_curr(cpu, now);
        self.scheduler.place(tid, prev, cpu, false);
        self.scheduler.cpu_mut(cpu).newidle_mut().woken(now);
    }

    /// `ttwu_runnable`: wakes `tid`, asleep but still queued (its dequeue
    /// delayed, `sim/scheduler/delayed.rs`), from `from` at `now` where it is
    /// queued: no choice of CPU and no wake list, the queue's lock taken
    /// from `from` (a line transfer from another CPU) and the preemption
    /// check made. Returns the waker's time after it.
    fn wake_delayed(&mut self, tid: usize, from: usize, now: u64) -> u64 {
        let cpu = self.scheduler.thread(tid).cpu();
        self.scheduler.update_curr(cpu, now);
        self.scheduler.requeue_delayed(tid, now);
        self.queued(tid, cpu, now, from);
        self.after_queue_lock(from, cpu, now)
    }

    /// When the waker on `from`, having queued a thread on `cpu`'s run queue
    /// at `now`, goes on: after that queue's lock line (or its wake list's)
    /// came from `cpu`, if it is another CPU's.
    fn after_queue_lock(&self, from: usize, cpu: usize, now: u64) -> u64 {
        if cpu != from {
            now + self.m.transfer_cost(from, cpu)
        } else {
            now
        }
    }

    /// `ttwu_queue_cond` as the model keeps it: whether a wake-up from `from`
    /// onto `cpu` goes on `cpu`'s wake list (another cache domain's CPU,
    /// unless `--set ttwu_queue=off`).
    pub(super) fn queues_on_wakelist(&self, cpu: usize, from: usize) -> bool {
        cpu != from && self.features().on(TTWU_QUEUE) && !self.scheduler.share_cache(from, cpu)
    }

    /// `__ttwu_queue_wakelist`: puts `tid` on `cpu`'s wake list from `from`,
    /// another CPU in another cache domain, at `now` (module docs). An idle
    /// target is woken as by [`Sim::enqueue`] and queues the thread at once;
    /// a busy one takes an IPI, whose handler ([`Sim::flush_wakes`], at the
    /// target's next event, where the engine runs every handler that reached
    /// a busy CPU) queues the thread and checks preemption there. Until then
    /// the thread is on no run queue.
    pub(super) fn enqueue_wakelist(&mut self, tid: usize, cpu: usize, now: u64, from: usize) {
        let s = self.scheduler.cpu(cpu);
        if s.cur().is_none() && !s.armed() {
            let prev = self.scheduler.thread(tid).cpu();
            self.activate(tid, prev, cpu, now);
            return self.enqueue(tid, cpu, now, from);
        }
        let c = self.m.costs;
        self.m.counters.ipis_sent += 1;
        self.m.cpus[cpu].stolen += c.exception_entry + c.exception_exit;
        self.m.cpus[cpu].irq_stolen += c.exception_entry + c.exception_exit;
        self.scheduler.cpu_mut(cpu).push_wake(tid);
    }

    /// The handler of `cpu`'s wake-list IPIs at `now` (`sched_ttwu_pending`):
    /// each thread on its wake list, oldest first, placed and queued on its
    /// run queue, and the preemption check made for it (a reschedule owed
    /// here, with no IPI).
    pub(super) fn flush_wakes(&mut self, cpu: usize, now: u64) {
        let list = self.scheduler.cpu_mut(cpu).take_wakes();
        for &tid in &list {
            let tid = tid as usize;
            let prev = self.scheduler.thread(tid).cpu();
            self.activate(tid, prev, cpu, now);
            self.scheduler.queue_runnable(cpu, tid, now);
            if self.scheduler.tun().kind.is_fair() && self.scheduler.wakeup_preempts(cpu, tid, now) {
                self.scheduler.cpu_mut(cpu).owe_resched();
            }
        }
        self.scheduler.cpu_mut(cpu).give_back_wakes(list);
    }

    /// Places the new thread `tid` on `cpu` (from `from`) and queues it there
    /// (`wake_up_new_task`).
    pub(super) fn enqueue_new(&mut self, tid: usize, cpu: usize, now: u64, from: usize) {
        // `wake_up_new_task`: the parent's CPU, before fork balancing chose.
        self.scheduler.thread_mut(tid).recent_used_cpu = from;
        if self.scheduler.tun().kind.is_fair() {
            self.scheduler.update_curr(cpu, now);
            self.scheduler.place(tid, cpu, cpu, true);
        }
        self.enqueue(tid, cpu, now, from);
    }

    /// The fair classes' tick on busy `cpu` running `tid` at `now`: charges its
    /// runtime, checks tick preemption, and balances when due.
    pub(super) fn sched_tick(&mut self, cpu: usize, tid: usize, now: u64) {
        let next = self.tick_after(now, self.scheduler.tun().tick);
        self.scheduler.cpu_mut(cpu).sched_tick_next_at(next);
        // `entity_tick`: the running task's and the queue's load tracking.
        self.scheduler.pelt_rq(cpu, now);
        self.scheduler.pelt_task(tid, now);
        if self.scheduler.tick_preempts(cpu, tid, now) {
            self.scheduler.cpu_mut(cpu).owe_resched();
        }
        if self.cfg.migration {
            self.tick_balance(cpu, now);
        }
    }

    /// Switches `cpu` (whose previous thread was `prev`) to its next runnable
    /// thread, or to idle.
    pub(super) fn schedule(&mut self, cpu: usize, prev: Option<usize>, mut now: u64) -> u64 {
        let fair = self.scheduler.tun().kind.is_fair();
        if let (true, Some(p)) = (fair, prev) {
            self.scheduler.put_prev(cpu, p, now);
        }
        // An active balance's stopper runs first (`sim/balance.rs`).
        if let Some(dst) = self.scheduler.cpu_mut(cpu).balancing_mut().take_push() {
            now = self.active_push(cpu, dst, now);
        }
        let mut next = self.scheduler.pick_next(cpu, now);
        if next.is_none() && self.cfg.migration {
            next = if fair {
                let (pulled, t) = self.newidle_balance(cpu, now);
                now = t;
                pulled
            } else {
                self.scheduler.steal(cpu, now)
            };
        }
        let c = self.m.costs;
        now += c.kernel.switch_path;
        self.stats.context_switches += 1;
        // The scheduler's code and the low-level switch code sit in their own
        // 2 MB blocks of kernel text.
        now = self.kaccess(cpu, self.kern.ktext() + KTEXT_SCHED, now);
        now = self.kaccess(cpu, self.kern.ktext() + KTEXT_SWITCH, now);
        let rq = self.scheduler.cpu(cpu).runq_page();
        now = self.kaccess(cpu, rq, now);
        if let Some(p) = prev {
            now = self.kaccess(cpu, self.scheduler.thread(p).tstruct(), now);
        }
        // After `pick_next_task`, before the switch (LATR's sweep).
        now = self.tick(cpu, Tick::Schedule, now);
        self.scheduler.cpu_mut(cpu).clear_resched();
        let prev_mm = self.scheduler.cpu(cpu).loaded();
        let Some(next) = next else {
            // Idle: the idle thread runs on the kernel's address space.
            self.scheduler.set_cur(cpu, None, now);
            let now = self.enter_lazy(cpu, Lazy::Idle, now);
            return self.lazy_grab(cpu, prev_mm, prev.is_some(), now);
        };
        now = self.kaccess(cpu, self.scheduler.thread(next).tstruct(), now);
        now = self.kaccess(cpu, self.scheduler.thread(next).kstack(), now);
        let mm = self.scheduler.thread(next).mm();
        now = if mm.is_kernel() {
            let now = self.enter_lazy(cpu, Lazy::KernelThread, now);
            self.lazy_grab(cpu, prev_mm, true, now)
        } else {
            let now = self.switch_mm(cpu, mm, now);
            self.lazy_drop(cpu, now)
        };
        self.scheduler.run(cpu, next, now);
        if fair && self.scheduler.cpu(cpu).sched_tick() <= now {
            let tick = self.tick_after(now, self.scheduler.tun().tick);
            self.scheduler.cpu_mut(cpu).sched_tick_next_at(tick);
        }
        self.arm(cpu, now);
        now
    }

    pub(super) fn switch_mm(&mut self, cpu: usize, mm: MmId, now: u64) -> u64 {
        let hw = CpuHw::new(&mut self.m, cpu, now);
        self.policy.switch_mm(&hw, mm);
        let now = hw.now();
        self.switched(cpu, mm, now)
    }

    /// Takes `cpu`'s lazy reference to `prev`, the user address space it ran
    /// until now, at `now` (Linux only): `context_switch` to the idle task or
    /// a kernel thread from a user task calls `mmgrab_lazy_tlb(prev->active_mm)`,
    /// and `exit_mm` does for the exiting task, an `atomic_inc` of
    /// `mm->mm_count` on the line the release puts it on (`crate::mm_layout`).
    /// A CPU that holds one already passes it on (a kernel thread after the
    /// idle task, the idle task after an exiting task); before v5.4 a
    /// `switch` between two tasks without an mm took a reference on the lent
    /// one and dropped the previous task's, two atomics on its `mm_count`
    /// ([`Kernel::hands_lazy_mm_on`]). Returns when `cpu` goes on.
    pub(super) fn lazy_grab(&mut self, cpu: usize, prev: MmId, switch: bool, now: u64) -> u64 {
        match self.scheduler.cpu(cpu).lazy_ref() {
            Some(lent) if switch && !self.kw.hands_lazy_mm_on() => match self.kw.mm_count_word(lent) {
                Some(word) => {
                    let t = self.m.katomic(cpu, now, word);
                    self.m.katomic(cpu, t, word)
                }
                None => now,
            },
            Some(_) => now,
            None if prev.is_kernel() => now,
            None => match self.kw.mm_count_word(prev) {
                Some(word) => {
                    self.scheduler.cpu_mut(cpu).set_lazy_ref(Some(prev));
                    self.m.katomic(cpu, now, word)
                }
                None => now,
            },
        }
    }

    /// Drops `cpu`'s lazy reference, if it holds one, at `now`, after its
    /// switch to a user task (`finish_task_switch`'s `mmdrop_lazy_tlb`, an
    /// `atomic_dec_and_test` of `mm_count`). Returns when `cpu` goes on.
    fn lazy_drop(&mut self, cpu: usize, now: u64) -> u64 {
        match self.scheduler.cpu_mut(cpu).set_lazy_ref(None).and_then(|mm| self.kw.mm_count_word(mm)) {
            Some(word) => self.m.katomic(cpu, now, word),
            None => now,
        }
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
        self.scheduler.cpu_mut(cpu).switched_to(mm);
        self.complete_lazy(now);
        if self.oracle.strict {
            self.strict_scan(cpu, now);
        }
        self.reap(cpu, now)
    }
}
