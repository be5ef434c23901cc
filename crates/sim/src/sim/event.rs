//! The event loop: each event runs one operation of the thread on a CPU (a chunk of
//! accesses, a computation, a system call) or, when it blocks, yields, exits or
//! uses up its slice, the next thread.
//!
//! # Kernel time
//! [`Stats::kernel_cycles`] adds up the cycles each CPU spends in the kernel
//! for a thread, what `time` reports as sys and `getrusage` as `ru_stime`:
//! - a system call from its entry to its return ([`Op::Sys`]), and the rest of
//!   a blocked pipe read or write when the thread runs again;
//! - the page faults of a touch (their serial time; the accesses themselves,
//!   TLB misses and walks included, are user time);
//! - an exit ([`Op::Exit`], [`Op::ExitNotify`]): the teardown of a last user's
//!   address space and the switch away from it;
//! - the scheduler (pick, switch, the policy's address-space switch) whenever a
//!   thread leaves the CPU or one starts on it, but not an idle CPU finding
//!   nothing to run;
//! - the policy's work at a scheduler tick;
//! - IPI handlers that interrupt a CPU while it runs something (Linux without
//!   `CONFIG_IRQ_TIME_ACCOUNTING` charges them to the interrupted task); a
//!   handler on an idle CPU is idle time.
//!
//! Not kernel time: computation ([`Op::Compute`]), the accesses of a touch, and
//! what a CPU loses processing other CPUs' broadcast invalidations (hardware
//! work with no kernel entry). The count only adds what the engine already
//! charged; it changes no time.
//!
//! What differs from Linux: a kernel path that spins for a lock (a pipe's
//! mutex, a writer of `mmap_lock` on a writer, a reader of it on the kernels
//! whose readers spin) keeps its CPU and the wait counts whole, as Linux's
//! optimistic spinning does, but never gives up and sleeps; a reader or a
//! writer that sleeps in `mmap_lock`'s wait queue leaves its CPU and is
//! charged nothing meanwhile (its timed wake-up is an event of its own, in
//! `Events`); and the switch
//! onto a thread of an idle CPU is charged whole, where Linux charges the
//! part before the switch to the idle task.

use super::scheduler::FaultOwed;
use super::*;

/// One event: when it is due (cycles), the order it was armed in (which breaks
/// ties), and the CPU it runs on.
type Event = (u64, u64, u32);

/// The events to come, taken earliest first (by time, then by the order they
/// were armed in: a total order, since that order is unique).
///
/// A binary heap, and beside it the event armed last, held out of the heap
/// until another is armed. Why: the CPU that runs an event usually arms its
/// next one, and that one is usually the earliest (on a machine where one CPU
/// at a time is busy, nearly always), so it is taken again without a push and
/// a pop through the heap. Which events are held where changes nothing taken:
/// [`Events::pop`] returns the least of the held one and the heap's least.
#[derive(Default)]
pub(super) struct Events {
    heap: BinaryHeap<Reverse<Event>>,
    held: Option<Event>,
    /// Timed wake-ups, each the time, the order it was armed in, the thread
    /// and its waker's CPU: a sleeping reader of a semaphore, woken at the
    /// writer's release ([`Sim::timed_wake`]). They share the events' order.
    wakes: BinaryHeap<Reverse<(u64, u64, u32, u32)>>,
}

/// What [`Events::pop_next`] takes: a CPU's event, or a timed wake-up (its
/// time, the thread, the waker's CPU).
enum Next {
    Cpu(Event),
    Wake(u64, usize, usize),
}

impl Events {
    /// Adds `e`; the event held before goes into the heap.
    #[inline]
    fn push(&mut self, e: Event) {
        if let Some(h) = self.held.replace(e) {
            self.heap.push(Reverse(h));
        }
    }

    /// Removes and returns the earliest event.
    #[inline]
    fn pop(&mut self) -> Option<Event> {
        match (self.held, self.heap.peek()) {
            (Some(h), Some(Reverse(top))) if *top < h => self.heap.pop().map(|Reverse(e)| e),
            (Some(h), _) => {
                self.held = None;
                Some(h)
            }
            (None, _) => self.heap.pop().map(|Reverse(e)| e),
        }
    }

    /// Returns the earliest event, without removing it.
    #[inline]
    fn peek(&self) -> Option<Event> {
        match (self.held, self.heap.peek()) {
            (Some(h), Some(Reverse(top))) => Some(h.min(*top)),
            (Some(h), None) => Some(h),
            (None, top) => top.map(|Reverse(e)| *e),
        }
    }

    fn is_empty(&self) -> bool {
        self.held.is_none() && self.heap.is_empty() && self.wakes.is_empty()
    }

    /// Adds a timed wake-up of `tid` by `waker` at `t`, armed `seq`th.
    pub(super) fn push_wake(&mut self, t: u64, seq: u64, tid: usize, waker: usize) {
        self.wakes.push(Reverse((t, seq, tid as u32, waker as u32)));
    }

    /// Removes and returns the earliest event or timed wake-up.
    #[inline]
    fn pop_next(&mut self) -> Option<Next> {
        if let Some(&Reverse((t, seq, tid, waker))) = self.wakes.peek() {
            if self.peek().is_none_or(|(et, eseq, _)| (t, seq) < (et, eseq)) {
                self.wakes.pop();
                return Some(Next::Wake(t, tid as usize, waker as usize));
            }
        }
        self.pop().map(Next::Cpu)
    }

    /// Up to `n` events that come soon: the held one, then the first of the
    /// heap's array (its least and that one's children). What to prefetch for.
    fn soon(&self, n: usize) -> impl Iterator<Item = &Event> {
        let from_heap = n.saturating_sub(usize::from(self.held.is_some()));
        self.held.iter().take(n).chain(self.heap.as_slice().iter().take(from_heap).map(|Reverse(e)| e))
    }
}

/// The machine size from which [`Sim::step`] prefetches for the events to
/// come ([`Sim::prefetch_upcoming`]). On a smaller machine every CPU's state
/// stays in the host's cache between its events, and the hints only take the
/// host's load slots. Measured alternately, two or three invocations a build,
/// hints against none: `tlbkit bench` (4 CPUs) made 5% more translations a
/// second without them, and both scale workloads at 32 CPUs 3% to 6% more
/// events; `fileserver` at 2048 and 4096 CPUs made 13% to 26% more events with
/// them; at 512 and 1024 CPUs the two were within the host's noise.
/// (`mprotect_threaded`, which waits mostly on broadcasts, ran as fast or
/// faster without them at every size.)
const PREFETCH_FROM_CPUS: usize = 1024;

/// How many queued events [`Sim::prefetch_upcoming`] looks ahead to: the held
/// event and the heap's root and children ([`Events::soon`]), among which are
/// the next and, usually, the one after it.
const PREFETCH_EVENTS: usize = 3;

impl Sim {
    pub(super) fn arm(&mut self, cpu: usize, t: u64) {
        if self.scheduler.cpu_mut(cpu).arm() {
            self.ev_seq += 1;
            self.events.push((t, self.ev_seq, cpu as u32));
        }
    }

    /// Returns whether events remain.
    pub fn pending(&self) -> bool {
        !self.events.is_empty()
    }

    /// Advances the simulation by one event; returns false when none is left.
    pub fn step(&mut self) -> bool {
        let Some(next) = self.events.pop_next() else {
            return false;
        };
        self.stats.events += 1;
        let (t, cpu) = match next {
            Next::Wake(t, tid, waker) => {
                self.timed_wake(t, tid, waker);
                return true;
            }
            Next::Cpu((t, _, cpu)) => (t, cpu),
        };
        if self.cfg.ncpus >= PREFETCH_FROM_CPUS {
            self.prefetch_upcoming();
        }
        let cpu = cpu as usize;
        self.scheduler.cpu_mut(cpu).disarm();
        self.m.set_floor(t);
        // IPI handlers that interrupted the CPU's last operation (or, on a CPU
        // running a thread, arrived since) made it longer; an idle CPU starts
        // once the handlers that woke it have returned.
        // Debug builds: no policy call of this event may report a temporary.
        #[cfg(all(debug_assertions, target_os = "linux"))]
        let anchor = 0u8;
        #[cfg(all(debug_assertions, target_os = "linux"))]
        let _frame = crate::event_frame::enter(std::hint::black_box(&anchor));
        let stolen = self.m.take_stolen(cpu);
        self.stats.kernel_cycles += std::mem::take(&mut self.m.cpus[cpu].irq_stolen);
        let base = t.max(self.scheduler.cpu(cpu).clock()) + stolen;
        let now = if self.m.cpus[cpu].running { base } else { base.max(self.m.cpus[cpu].irq_until) };
        // A core another of its threads is using runs this event's software slower.
        let shared = self.m.core_shared(cpu);
        if let Some(smt) = self.timing.smt_mut() {
            self.m.costs = smt.begin(shared);
        }
        let start = now;
        let now = self.run_cpu(cpu, now);
        if shared {
            self.stats.smt_shared_cycles += now - start;
        }
        self.scheduler.cpu_mut(cpu).ran_until(now);
        self.m.set_busy_until(cpu, now);
        self.m.cpus[cpu].running = self.scheduler.cpu(cpu).cur().is_some();
        self.end = self.end.max(now);
        true
    }

    /// Asks the host to bring into its cache what the next events will read
    /// first: for the CPUs of the queue's first [`PREFETCH_EVENTS`] events, their
    /// [`crate::machine::CpuState`], the lines of their TLB a lookup reads first
    /// ([`crate::tlb::Tlb::prefetch`]) and their scheduler state; for the very
    /// next one, the thread it runs and that thread's program. With thousands
    /// of CPUs each event starts on a CPU whose state the host evicted long
    /// ago; fetching it while this event runs hides part of that wait.
    ///
    /// A prefetch is a hint: it reads nothing the simulation sees, so no result
    /// can change (the strict-matrix and claims digests pin that).
    #[inline(never)]
    fn prefetch_upcoming(&self) {
        use crate::tlb::prefetch_bytes;
        for (_, _, cpu) in self.events.soon(PREFETCH_EVENTS) {
            let c = &self.m.cpus[*cpu as usize];
            prefetch_bytes(c, std::mem::size_of::<crate::machine::CpuState>());
            self.m.tlb_whole(*cpu as usize).prefetch();
            prefetch_bytes(self.scheduler.cpu(*cpu as usize), std::mem::size_of::<CpuSched>());
        }
        // The thread needs its CPU's scheduler state, fetched an event ago
        // when that CPU was already among the first few.
        if let Some((_, _, cpu)) = self.events.peek() {
            if let Some(tid) = self.scheduler.cpu(cpu as usize).cur() {
                let t = self.scheduler.thread(tid);
                prefetch_bytes(t, std::mem::size_of::<Thread>());
                prefetch_bytes(t.program(), 128);
            }
        }
    }

    /// Runs until no event is left, the event bound is reached, an error
    /// occurs or the thread's run is cancelled ([`crate::cancel`]).
    pub fn run(&mut self) {
        while self.error.is_none() && self.stats.events < self.cfg.max_events && self.step() {
            if self.stats.events.is_multiple_of(crate::cancel::CHECK_EVERY) && crate::cancel::requested() {
                self.error = Some(crate::cancel::INTERRUPTED.into());
            }
            if self.oracle.wants_collection() {
                self.collect_obligations();
            }
        }
        if self.error.is_none() && self.stats.events >= self.cfg.max_events && self.pending() {
            self.error = Some(format!(
                "the run did not finish within {} events; lower the workload's size",
                self.cfg.max_events
            ));
        }
    }

    /// Frees the obligations nothing refers to any more (see [`crate::oracle::Oracle`],
    /// "Memory"). Between events, nothing but PTE floors and freed frames holds a
    /// discharged obligation, and the frames forget theirs first, so the floors
    /// are all that must be marked (the frames' other obligations are open, kept
    /// anyway).
    pub(super) fn collect_obligations(&mut self) {
        let oracle = &self.oracle;
        self.frames.forget_discharged(|o| oracle.discharged(o));
        self.oracle.collect(self.pt.floor_obligations());
    }

    pub(super) fn run_cpu(&mut self, cpu: usize, now: u64) -> u64 {
        // The wake-list IPIs' handler, which ran in the stolen time above.
        if self.scheduler.cpu(cpu).wakes_pending() {
            self.flush_wakes(cpu, now);
        }
        let Some(tid) = self.scheduler.cpu(cpu).cur() else {
            return self.schedule_counted(cpu, None, now);
        };
        // A fault's end first: the kernel path has not returned to the task
        // (no tick or preemption sees it in between).
        let now = match self.scheduler.thread_mut(tid).take_fault_owed() {
            Some(FaultOwed::Pgd { mm, held, rest }) => {
                // The fault's read of pgd, alone in this event: the fault
                // goes on to its end, where its release is owed.
                let end = self.fault_pgd_read(cpu, tid, mm, held, rest, now);
                self.arm(cpu, end);
                return end;
            }
            Some(FaultOwed::Exit { mm, held }) => self.fault_exit(cpu, mm, held, now),
            Some(FaultOwed::Asleep) => {
                self.scheduler.thread_mut(tid).grant_read();
                now
            }
            None => now,
        };
        let ticked = self.timer_tick(cpu, now);
        self.stats.kernel_cycles += ticked - now;
        let now = ticked;
        let preempt = if self.scheduler.tun().kind.is_fair() {
            // The fair classes: the tick's checks, and a reschedule a wake-up owed.
            if now >= self.scheduler.cpu(cpu).sched_tick() {
                self.sched_tick(cpu, tid, now);
            }
            self.scheduler.cpu_mut(cpu).resched_owed()
        } else {
            !self.scheduler.cpu(cpu).runq().is_empty()
                && now - self.scheduler.cpu(cpu).slice_start() >= self.scheduler.tun().fifo_slice
        };
        if preempt {
            self.scheduler.requeue(cpu, tid, now, false);
            self.scheduler.set_cur(cpu, None, now);
            return self.schedule_counted(cpu, Some(tid), now);
        }
        let now = self.exec(cpu, tid, now);
        if self.scheduler.cpu(cpu).cur() == Some(tid) {
            self.arm(cpu, now);
            now
        } else {
            // The thread blocked, yielded or exited: pick the next one.
            self.schedule_counted(cpu, Some(tid), now)
        }
    }

    /// [`Sim::schedule`], its time counted as kernel time when a thread leaves
    /// `cpu` (`prev`) or starts on it; an idle CPU that finds nothing stays idle.
    fn schedule_counted(&mut self, cpu: usize, prev: Option<usize>, now: u64) -> u64 {
        let end = self.schedule(cpu, prev, now);
        if prev.is_some() || self.scheduler.cpu(cpu).cur().is_some() {
            self.stats.kernel_cycles += end - now;
        }
        end
    }

    /// The scheduler tick of a CPU running a task, for a policy that ticks:
    /// taken at the first event at or after it is due, every millisecond
    /// (`HZ` = 1000; an idle CPU takes none, as under `NO_HZ_IDLE`) on the
    /// run's tick grid, whose phase the seed draws ([`crate::noise`]). Only the
    /// policy's work in it is charged: the tick's own path costs the same
    /// whatever the policy, and policies that do not tick are not charged it.
    fn timer_tick(&mut self, cpu: usize, now: u64) -> u64 {
        if !self.scheduler.ticks() || now < self.scheduler.cpu(cpu).next_tick() {
            return now;
        }
        let ms = self.cycles_per_tick();
        let next = self.tick_after(now, ms);
        self.scheduler.cpu_mut(cpu).tick_next_at(next);
        self.stats.ticks += 1;
        self.tick(cpu, tlbkit_policy::Tick::Timer, now)
    }

    pub(super) fn exec(&mut self, cpu: usize, tid: usize, now: u64) -> u64 {
        if self.cfg.spec_rate > 0.0 && self.unit_random() < self.cfg.spec_rate {
            self.spec_fill(cpu, now);
        }
        if let Some((va, pages, write)) = self.scheduler.thread_mut(tid).take_pending() {
            return self.touch_counted(cpu, tid, va, pages, write, now);
        }
        if let Some(p) = self.scheduler.thread_mut(tid).take_retry_read() {
            return self.in_kernel(now, |s| s.pipe_read(cpu, tid, p, now));
        }
        if let Some(p) = self.scheduler.thread_mut(tid).take_retry_write() {
            return self.in_kernel(now, |s| s.pipe_write(cpu, tid, p, now));
        }
        if let Some(sys) = self.scheduler.thread_mut(tid).take_locked_sys() {
            return self.in_kernel(now, |s| s.syscall_granted(cpu, tid, sys, now));
        }
        if let Some(node) = self.kswapd_of(tid) {
            return self.in_kernel(now, |s| s.kswapd_run(cpu, tid, node, now));
        }
        let op = self.scheduler.thread_mut(tid).next_op();
        match op {
            Op::Touch { va, pages, write } => self.touch_counted(cpu, tid, va, pages, write, now),
            Op::Compute(c) => {
                let c = self.timing.smt().map_or(c, |s| s.compute(c));
                now + self.jittered(c)
            }
            Op::Mark(name) => {
                self.marks.push((name, now, self.stats, self.invalidating_cycles()));
                now
            }
            Op::Exit => self.in_kernel(now, |s| s.exit(cpu, tid, now)),
            Op::ExitNotify(p) => self.in_kernel(now, |s| s.exit_notify(cpu, tid, p, now)),
            Op::Sys(sys) => self.in_kernel(now, |s| {
                let c = s.m.costs;
                s.stats.syscalls += 1;
                let mut now = now + s.jittered(c.exception_entry + c.kernel.syscall_body);
                now = s.kaccess(cpu, s.kern.ktext() + KTEXT_ENTRY, now);
                now = s.kaccess(cpu, s.scheduler.thread(tid).kstack(), now);
                now = s.syscall(cpu, tid, sys, now);
                now + c.exception_exit
            }),
        }
    }

    /// Runs `path`, a kernel path of the thread running here from `now`, and
    /// counts its time as kernel time; returns when it ends.
    #[inline]
    fn in_kernel(&mut self, now: u64, path: impl FnOnce(&mut Self) -> u64) -> u64 {
        let end = path(self);
        self.stats.kernel_cycles += end - now;
        end
    }

    /// [`Sim::touch`], the serial time of its page faults counted as kernel time.
    #[inline]
    fn touch_counted(&mut self, cpu: usize, tid: usize, va: u64, pages: u64, write: bool, now: u64) -> u64 {
        let f0 = self.timing.fault_cycles();
        let end = self.touch(cpu, tid, va, pages, write, now);
        self.stats.kernel_cycles += self.timing.fault_cycles() - f0;
        end
    }
}

#[cfg(test)]
mod events_tests {
    use super::{Event, Events};
    use rand_chacha::ChaCha8Rng;
    use rand_core::{Rng, SeedableRng};
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    /// [`Events`] takes events in the order a plain heap does, whatever the
    /// mix of arming and taking (times often equal, so the arming order
    /// decides), and peeks at the one it takes next.
    #[test]
    fn takes_events_in_the_order_of_a_heap() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let (mut events, mut heap) = (Events::default(), BinaryHeap::new());
        let (mut seq, mut now, mut taken) = (0u64, 0u64, 0);
        for _ in 0..20_000 {
            if rng.next_u64() % 3 != 0 || heap.is_empty() {
                seq += 1;
                let e: Event = (now + rng.next_u64() % 4, seq, (rng.next_u64() % 8) as u32);
                events.push(e);
                heap.push(Reverse(e));
            } else {
                let want = heap.pop().map(|Reverse(e)| e);
                assert_eq!(events.peek(), want);
                assert_eq!(events.pop(), want);
                now = want.map_or(now, |e| e.0);
                taken += 1;
            }
            assert_eq!(events.is_empty(), heap.is_empty());
        }
        assert!(taken > 5_000, "the mix took too few events to test anything");
        while let Some(Reverse(e)) = heap.pop() {
            assert_eq!(events.pop(), Some(e));
        }
        assert_eq!(events.pop(), None);
    }
}
