//! The scheduler's state ([`Scheduler`]): every thread, each CPU's run queue
//! and scheduler state, the load figures placement and balancing read, and
//! the scheduling class's rules that need nothing but them: queueing and
//! picking, placement in virtual time, wake-up placement
//! (`select_task_rq_fair`), wake-up and tick preemption, and the choices of
//! load balancing. The paths that also drive the machine (the context
//! switch, wake-ups' IPIs, the balancing moves' costs) are `sim/sched.rs`
//! and `sim/balance.rs`, which reach the scheduler through the methods here.
//!
//! What the methods keep true:
//! - `loads[cpu]` is `cpu`'s queued threads plus one if one runs there, and
//!   the per-domain counts of idle CPUs (`idle_llc`) and of CPUs with a queued
//!   task balancing may move (`ovl_total`) agree with them: a run
//!   queue and a CPU's running thread change only through
//!   [`Scheduler::queue`], [`Scheduler::unqueue`] and [`Scheduler::set_cur`],
//!   which update them (`track`), so that placing a thread scans 4 bytes a CPU
//!   and balancing reads a count rather than every CPU;
//! - a CPU's cache domain (`llc`) is fixed when the CPU is added.
//!
//! - a thread's state and CPU change with the queues: it is `Running` on the
//!   CPU whose running thread it is ([`Scheduler::run`]), `Runnable` where it
//!   is queued ([`Scheduler::queue_runnable`]), and leaves its CPU `Blocked`
//!   or `Dead` ([`Scheduler::block`], [`Scheduler::exit`]); a `Blocked`
//!   thread whose dequeue EEVDF delays stays queued, asleep
//!   (`sim/scheduler/delayed.rs`).
//!
//! Records: a thread ([`Thread`], `sim/scheduler/thread.rs`) and a CPU's
//! scheduler state ([`CpuSched`]) own their fields. The paths reach one by id
//! ([`Scheduler::thread`], [`Scheduler::cpu`] to read; [`Scheduler::thread_mut`],
//! [`Scheduler::cpu_mut`] for its narrow methods, named for what the kernel
//! does: a thread's return value and left work, a CPU's event, clock, ticks,
//! owed reschedule and balancing deadlines), never to write a field.

mod delayed;
mod pelt;
mod thread;
use super::balance::{Balancing, NewIdle};
use crate::sched::domain::Domains;
use crate::sched::fork::{ForkDomains, NumaFork};
use crate::sched::{cfs, eevdf, wake_wide, Queued, RecentUsed, RunQueue, ScanLimit, SchedKind, Tunables, NR_MIGRATE};
use crate::toggle::{Features, LAST_BUDDY, SYNC_SKIP_DELAYED};
use std::cmp::Reverse;
pub(super) use thread::{FaultOwed, Retry, State, Thread};
use tlbkit_policy::MmId;

/// The scheduler's state: every thread, each CPU's queue and the load
/// figures placement and balancing read.
pub(super) struct Scheduler {
    /// Every thread, by id.
    threads: Vec<Thread>,
    /// Each CPU's scheduler state.
    sched: Vec<CpuSched>,
    /// Per CPU, the threads queued on or running on it (`runq.len()` plus one
    /// for `cur`), kept in step by [`Scheduler::queue`],
    /// [`Scheduler::unqueue`] and [`Scheduler::set_cur`]: a dense copy, so
    /// that placing a new thread scans 4 bytes a CPU rather than each CPU's
    /// scheduler state.
    loads: Vec<u32>,
    /// The scheduling class's tunables, in cycles.
    tun: Tunables,
    /// The FIFO class's arrival counter (its queue key).
    fifo_seq: u64,
    /// The cache (LLC) domains: per domain its first CPU and one past its last.
    llcs: Vec<(u32, u32)>,
    /// Per cache domain, the CPUs with nothing running or queued.
    idle_llc: Vec<u32>,
    /// Per cache domain, how many CPUs a wake-up's idle scan may look at
    /// (SIS_UTIL's `nr_idle_scan`, `scheduler/pelt.rs`); the whole domain
    /// until its first periodic balance, as on a machine idle before the run.
    nr_idle_scan: Vec<u32>,
    /// CPUs with a queued task balancing may move, all told.
    ovl_total: u32,
    /// When the idle CPUs' next periodic balance is due
    /// (`nohz.next_balance`, `sim/balance.rs`).
    nohz_next: u64,
    /// Whether the policy works at scheduler ticks ([`Policy::ticks`]).
    ///
    /// [`Policy::ticks`]: tlbkit_policy::Policy::ticks
    ticks: bool,
    /// The machine's scheduling domains (`crate::sched::domain`).
    domains: Domains,
    /// Linux's fork balancing (`crate::sched::fork`) over those domains;
    /// `None` on FreeBSD, whose new tasks take the least loaded CPU.
    fork: Option<ForkDomains>,
    /// The run's kernel toggles: the scheduler reads `last_buddy` (CFS's
    /// LAST_BUDDY, `sched/cfs.rs`), `delay_dequeue` (EEVDF's DELAY_DEQUEUE,
    /// `scheduler/delayed.rs`) and `sync_skip_delayed` (`wake_affine`).
    features: Features,
}

/// One CPU's scheduler state.
pub(super) struct CpuSched {
    /// The thread running here, if any (set by [`Scheduler::set_cur`]).
    cur: Option<usize>,
    /// The threads queued here (changed by [`Scheduler::queue`] and
    /// [`Scheduler::unqueue`]).
    runq: RunQueue,
    /// The address space this CPU last switched to.
    loaded: MmId,
    /// The user address space whose `mm_count` this CPU's lazy `active_mm`
    /// holds a reference to (`mmgrab_lazy_tlb`), while the idle task, a
    /// kernel thread or an exiting task runs on it.
    lazy_ref: Option<MmId>,
    /// When the running thread's slice started, in cycles.
    slice_start: u64,
    /// The CPU's time after its last event, in cycles.
    clock: u64,
    /// Whether an event of this CPU is queued.
    armed: bool,
    /// The kernel page holding this CPU's run queue.
    runq_page: u64,
    /// When this CPU's next scheduler tick is due, in cycles (policies that
    /// tick only).
    next_tick: u64,
    /// When the fair classes' next tick is due (preemption and balancing).
    sched_tick: u64,
    /// A reschedule is owed: the running task is switched out at its next event.
    need_resched: bool,
    /// CFS's buddies on this CPU's queue: the tasks its pick prefers or
    /// passes over ([`cfs::Buddies`]).
    buddies: cfs::Buddies,
    /// The cache (LLC) domain this CPU is in ([`Scheduler`] `llcs`).
    llc: u32,
    /// Its record for periodic balancing (`sim/balance.rs`).
    balancing: Balancing,
    /// Its record for newly idle balancing (`sim/balance.rs`).
    newidle: NewIdle,
    /// The average cost of its wake-ups' scans for an idle CPU, in cycles
    /// (`avg_scan_cost` of its cache domain, before SIS_UTIL).
    avg_scan_cost: u64,
    /// Its fair queue's load tracking (`scheduler/pelt.rs`).
    pelt: crate::sched::pelt::RqAvg,
    /// Its wake list (`TTWU_QUEUE`): threads other cache domains' CPUs woke
    /// onto it while it was busy, queued by its IPI handler at its next event
    /// (`sim/sched.rs`).
    wake_list: Vec<u32>,
}

impl CpuSched {
    /// Returns the address space this CPU last switched to.
    #[inline]
    pub(super) fn loaded(&self) -> MmId {
        self.loaded
    }

    /// The CPU switched to `mm`.
    #[inline]
    pub(super) fn switched_to(&mut self, mm: MmId) {
        self.loaded = mm;
    }

    /// Returns the address space this CPU holds a lazy reference to, if any.
    #[inline]
    pub(super) fn lazy_ref(&self) -> Option<MmId> {
        self.lazy_ref
    }

    /// Sets (`Some`) or drops (`None`) this CPU's lazy reference; returns the
    /// one it held.
    #[inline]
    pub(super) fn set_lazy_ref(&mut self, mm: Option<MmId>) -> Option<MmId> {
        std::mem::replace(&mut self.lazy_ref, mm)
    }

    /// Returns when the running thread's slice started, in cycles.
    #[inline]
    pub(super) fn slice_start(&self) -> u64 {
        self.slice_start
    }

    /// Returns the CPU's time after its last event, in cycles.
    #[inline]
    pub(super) fn clock(&self) -> u64 {
        self.clock
    }

    /// Its event ran until `now`: its clock moves on to there.
    #[inline]
    pub(super) fn ran_until(&mut self, now: u64) {
        debug_assert!(now >= self.clock, "a CPU's clock went back");
        self.clock = now;
    }

    /// Returns whether an event of this CPU is queued.
    #[inline]
    pub(super) fn armed(&self) -> bool {
        self.armed
    }

    /// Marks an event of this CPU queued; returns false if one already was
    /// (then none is to be queued).
    #[inline]
    pub(super) fn arm(&mut self) -> bool {
        !std::mem::replace(&mut self.armed, true)
    }

    /// Its queued event was taken off the queue.
    #[inline]
    pub(super) fn disarm(&mut self) {
        self.armed = false;
    }

    /// Returns the kernel page holding this CPU's run queue.
    #[inline]
    pub(super) fn runq_page(&self) -> u64 {
        self.runq_page
    }

    /// Returns when this CPU's next policy tick is due, in cycles.
    #[inline]
    pub(super) fn next_tick(&self) -> u64 {
        self.next_tick
    }

    /// Its policy tick was taken: the next is due at `at`.
    #[inline]
    pub(super) fn tick_next_at(&mut self, at: u64) {
        self.next_tick = at;
    }

    /// Returns when the fair classes' next tick is due.
    #[inline]
    pub(super) fn sched_tick(&self) -> u64 {
        self.sched_tick
    }

    /// The fair classes' tick was taken: the next is due at `at`.
    #[inline]
    pub(super) fn sched_tick_next_at(&mut self, at: u64) {
        self.sched_tick = at;
    }

    /// Owes the running task a reschedule at its next event.
    #[inline]
    pub(super) fn owe_resched(&mut self) {
        self.need_resched = true;
    }

    /// The CPU schedules: the reschedule owed, if any, is paid.
    #[inline]
    pub(super) fn clear_resched(&mut self) {
        self.need_resched = false;
    }

    /// Returns whether a reschedule is owed, forgetting one that nothing
    /// queued here could take.
    #[inline]
    pub(super) fn resched_owed(&mut self) -> bool {
        if self.need_resched && self.runq.is_empty() && !self.balancing.pushing() {
            self.need_resched = false;
        }
        self.need_resched
    }

    /// Returns whether a reschedule is owed (for tests).
    #[cfg(test)]
    pub(super) fn need_resched(&self) -> bool {
        self.need_resched
    }

    /// Puts `tid` on its wake list.
    #[inline]
    pub(super) fn push_wake(&mut self, tid: usize) {
        self.wake_list.push(tid as u32);
    }

    /// Takes its wake list, oldest first (`llist_reverse_order` in
    /// `__flush_smp_call_function_queue`); give the emptied list back with
    /// [`CpuSched::give_back_wakes`] to keep its room.
    #[inline]
    pub(super) fn take_wakes(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.wake_list)
    }

    /// Gives back the list [`CpuSched::take_wakes`] took, emptied.
    #[inline]
    pub(super) fn give_back_wakes(&mut self, mut list: Vec<u32>) {
        debug_assert!(self.wake_list.is_empty(), "a CPU's handler queued a wake-up onto its own wake list");
        list.clear();
        self.wake_list = list;
    }

    /// Returns whether its wake list holds a thread.
    #[inline]
    pub(super) fn wakes_pending(&self) -> bool {
        !self.wake_list.is_empty()
    }

    /// Returns its record for periodic balancing.
    #[inline]
    pub(super) fn balancing(&self) -> &Balancing {
        &self.balancing
    }

    /// Returns its record for periodic balancing, to change.
    #[inline]
    pub(super) fn balancing_mut(&mut self) -> &mut Balancing {
        &mut self.balancing
    }

    /// Returns its record for newly idle balancing, to change.
    #[inline]
    pub(super) fn newidle_mut(&mut self) -> &mut NewIdle {
        &mut self.newidle
    }

    /// Returns the thread running here, if any.
    #[inline]
    pub(super) fn cur(&self) -> Option<usize> {
        self.cur
    }

    /// Returns the threads queued here.
    #[inline]
    pub(super) fn runq(&self) -> &RunQueue {
        &self.runq
    }

    /// Returns CFS's buddies on this CPU's queue.
    #[cfg(test)]
    pub(super) fn buddies(&self) -> crate::sched::cfs::Buddies {
        self.buddies
    }

    /// Returns the cache (LLC) domain this CPU is in.
    #[inline]
    pub(super) fn llc(&self) -> u32 {
        self.llc
    }
}

/// Which queued tasks a balance may move besides the rest
/// ([`Scheduler::can_migrate`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct MayMove {
    /// Cache-hot ones (`task_hot`): the balance failed more often than the
    /// domain's `cache_nice_tries`, or the stopper pushes.
    pub cache_hot: bool,
    /// Ones asleep with their dequeue delayed: only a balance that moves load
    /// (`migrate_load`).
    pub delayed: bool,
}

impl Scheduler {
    /// Returns a scheduler with no threads and no CPUs yet
    /// ([`Scheduler::add_cpu`]): the class's tunables `tun`, the cache
    /// domains `llcs` (every CPU of each idle), whether the policy ticks, the
    /// machine's `domains`, and fork balancing's NUMA rule (`None`: no fork
    /// balancing, FreeBSD).
    pub(super) fn new(
        tun: Tunables,
        features: Features,
        (llcs, domains): (Vec<(u32, u32)>, Domains),
        ticks: bool,
        numa: Option<NumaFork>,
    ) -> Self {
        let fork = numa.map(|numa| ForkDomains::on(domains, numa, tun.kernel));
        let idle_llc: Vec<u32> = llcs.iter().map(|&(a, b)| b - a).collect();
        let nr_idle_scan = idle_llc.clone();
        Scheduler {
            threads: Vec::new(),
            sched: Vec::new(),
            loads: Vec::new(),
            tun,
            features,
            fifo_seq: 0,
            llcs,
            idle_llc,
            nr_idle_scan,
            ovl_total: 0,
            nohz_next: 0,
            ticks,
            domains,
            fork,
        }
    }

    /// Adds the next CPU, idle, in the next cache domain once the current one
    /// is full: its run queue's kernel page `runq_page`, its first policy tick
    /// `next_tick` and fair-class tick `sched_tick`.
    pub(super) fn add_cpu(&mut self, runq_page: u64, next_tick: u64, sched_tick: u64) {
        let cpu = self.sched.len();
        let mut llc = self.sched.last().map_or(0, |s| s.llc as usize);
        if cpu as u32 >= self.llcs[llc].1 {
            llc += 1;
        }
        self.sched.push(CpuSched {
            cur: None,
            runq: RunQueue::default(),
            loaded: MmId::KERNEL,
            lazy_ref: None,
            slice_start: 0,
            clock: 0,
            armed: false,
            runq_page,
            next_tick,
            sched_tick,
            need_resched: false,
            buddies: cfs::Buddies::default(),
            llc: llc as u32,
            balancing: Balancing::default(),
            newidle: NewIdle::new(self.tun.migration_cost),
            avg_scan_cost: 0,
            pelt: Default::default(),
            wake_list: Vec::new(),
        });
        self.loads.push(0);
    }

    /// Returns thread `tid`, which must exist.
    #[inline]
    pub(super) fn thread(&self, tid: usize) -> &Thread {
        &self.threads[tid]
    }

    /// Returns thread `tid`, which must exist, to change.
    #[inline]
    pub(super) fn thread_mut(&mut self, tid: usize) -> &mut Thread {
        &mut self.threads[tid]
    }

    /// Returns thread `tid`, if it exists.
    pub(super) fn get_thread(&self, tid: usize) -> Option<&Thread> {
        self.threads.get(tid)
    }

    /// Returns the threads created so far (exited ones included).
    pub(super) fn nthreads(&self) -> usize {
        self.threads.len()
    }

    /// Adds thread `t` (not queued anywhere); returns its id.
    pub(super) fn add_thread(&mut self, t: Thread) -> usize {
        self.threads.push(t);
        self.threads.len() - 1
    }

    /// Makes `tid` runnable on `cpu` and queues it there.
    #[inline]
    pub(super) fn queue_runnable(&mut self, cpu: usize, tid: usize, now: u64) {
        let t = &mut self.threads[tid];
        debug_assert!(matches!(t.state, State::Runnable | State::Blocked), "{tid} queued while {:?}", t.state);
        t.state = State::Runnable;
        t.cpu = cpu;
        self.queue(cpu, tid, now);
    }

    /// Runs `tid`, taken off a queue, on `cpu` from `now`: its slice and
    /// (`set_next_entity`) its runtime count from here, RUN_TO_PARITY's mark set.
    #[inline]
    pub(super) fn run(&mut self, cpu: usize, tid: usize, now: u64) {
        self.set_cur(cpu, Some(tid), now);
        self.sched[cpu].slice_start = now;
        let t = &mut self.threads[tid];
        debug_assert_eq!(t.state, State::Runnable, "{tid} runs but was not runnable");
        t.state = State::Running;
        t.cpu = cpu;
        t.se.exec_start = now;
        t.se.protect = true;
    }

    /// `tid`, running on `cpu`, sleeps until a wake-up, then retries `retry`:
    /// the CPU runs nothing until it schedules.
    #[inline]
    pub(super) fn block(&mut self, cpu: usize, tid: usize, retry: Retry, now: u64) {
        let t = &mut self.threads[tid];
        match retry {
            Retry::Read(p) => t.retry_read = Some(p),
            Retry::Write(p) => t.retry_write = Some(p),
        }
        self.sleep(cpu, tid, now);
    }

    /// `tid`, running on `cpu`, sleeps until a wake-up, with nothing to
    /// retry (a kernel thread's wait: `kswapd`'s).
    #[inline]
    pub(super) fn sleep(&mut self, cpu: usize, tid: usize, now: u64) {
        let t = &mut self.threads[tid];
        debug_assert_eq!(t.state, State::Running, "{tid} sleeps but was not running");
        t.state = State::Blocked;
        // `dequeue_entity`'s `clear_buddies`.
        self.sched[cpu].buddies.clear(tid as u32);
        self.set_cur(cpu, None, now);
    }

    /// The new thread `tid`, never queued, starts asleep: a wake-up is the
    /// first to queue it.
    pub(super) fn park_new(&mut self, tid: usize) {
        let t = &mut self.threads[tid];
        debug_assert_eq!(t.state, State::Runnable, "{tid} is parked but is not new");
        t.state = State::Blocked;
    }

    /// `tid`, running on `cpu`, exits: the CPU runs nothing until it schedules.
    pub(super) fn exit(&mut self, cpu: usize, tid: usize, now: u64) {
        debug_assert_eq!(self.sched[cpu].cur, Some(tid), "{tid} exits but does not run on CPU {cpu}");
        self.threads[tid].state = State::Dead;
        self.sched[cpu].buddies.clear(tid as u32);
        self.set_cur(cpu, None, now);
    }

    /// Returns `cpu`'s scheduler state.
    #[inline]
    pub(super) fn cpu(&self, cpu: usize) -> &CpuSched {
        &self.sched[cpu]
    }

    /// Returns `cpu`'s scheduler state, to change (its queue and running
    /// thread stay the setters').
    #[inline]
    pub(super) fn cpu_mut(&mut self, cpu: usize) -> &mut CpuSched {
        &mut self.sched[cpu]
    }

    /// Returns the CPUs.
    pub(super) fn ncpus(&self) -> usize {
        self.sched.len()
    }

    /// Returns every CPU's scheduler state (for the host's huge pages).
    pub(super) fn cpu_states(&self) -> &[CpuSched] {
        &self.sched
    }

    /// Returns the scheduling class's tunables.
    #[inline]
    pub(super) fn tun(&self) -> &Tunables {
        &self.tun
    }

    /// Returns whether the policy works at scheduler ticks.
    #[inline]
    pub(super) fn ticks(&self) -> bool {
        self.ticks
    }

    /// Returns `cpu`'s threads queued or running, from the dense `loads`.
    #[inline]
    pub(super) fn load_of(&self, cpu: usize) -> u32 {
        self.loads[cpu]
    }

    /// Returns the cache domains.
    pub(super) fn nllcs(&self) -> usize {
        self.llcs.len()
    }

    /// Returns cache domain `llc`'s first CPU and one past its last.
    pub(super) fn llc_range(&self, llc: usize) -> (u32, u32) {
        self.llcs[llc]
    }

    /// Returns, per cache domain, its CPUs with nothing running or queued.
    pub(super) fn idle_llcs(&self) -> &[u32] {
        &self.idle_llc
    }

    /// Returns the CPUs with a queued task balancing may move, all told.
    pub(super) fn overloaded(&self) -> u32 {
        self.ovl_total
    }

    /// Sets `loads` as the CPUs' runnable counts that the placement rules read
    /// (and the idle counts of one cache domain beside them), without threads
    /// behind them (for tests).
    #[cfg(test)]
    pub(super) fn fake_loads(&mut self, loads: &[u32]) {
        self.loads.copy_from_slice(loads);
        self.idle_llc = vec![loads.iter().filter(|&&l| l == 0).count() as u32];
    }

    /// `check_preempt_wakeup`'s decision: whether `tid`, just queued on `cpu`,
    /// preempts the thread running there at `now` (none does while a
    /// reschedule is already owed). Charges the running thread's runtime.
    pub(super) fn wakeup_preempts(&mut self, cpu: usize, tid: usize, now: u64) -> bool {
        let Some(cur) = self.sched[cpu].cur else { return false };
        if self.sched[cpu].need_resched {
            return false;
        }
        let expired = self.update_curr(cpu, now);
        let curr = &self.threads[cur].se;
        match self.tun.kind {
            SchedKind::Fifo => false,
            SchedKind::Cfs => {
                let preempts = cfs::wakeup_preempts(curr.vruntime, &self.threads[tid].se, &self.tun);
                if preempts {
                    let nr = self.sched[cpu].runq.len() as u64 + 1;
                    self.sched[cpu].buddies.preempted(tid as u32, cur as u32, nr, self.features.on(LAST_BUDDY));
                }
                preempts
            }
            SchedKind::Eevdf => expired || eevdf::wakeup_preempts(&self.sched[cpu].runq, curr, tid),
        }
    }

    /// The fair classes' tick preemption on busy `cpu` running `tid` at
    /// `now`: charges its runtime, then returns whether a queued thread
    /// preempts it (CFS's `check_preempt_tick`, EEVDF's deadline).
    pub(super) fn tick_preempts(&mut self, cpu: usize, tid: usize, now: u64) -> bool {
        let expired = self.update_curr(cpu, now);
        let rq = &self.sched[cpu].runq;
        if rq.is_empty() {
            return false;
        }
        match self.tun.kind {
            SchedKind::Cfs => {
                let (preempts, ran_slice) =
                    cfs::tick_preempts(rq, &self.threads[tid].se, now - self.sched[cpu].slice_start, &self.tun);
                if ran_slice {
                    // It ran long enough: no buddy favour brings it back.
                    self.sched[cpu].buddies.clear(tid as u32);
                }
                preempts
            }
            _ => expired,
        }
    }

    /// Returns the least load of any CPU and the lowest CPU with it (`None`
    /// without CPUs), from the dense `loads`.
    fn least_load(&self) -> Option<(u32, usize)> {
        self.loads.iter().enumerate().min_by_key(|&(c, &l)| (l, c)).map(|(c, &l)| (l, c))
    }

    /// Returns the CPU with the fewest threads queued or running (lowest id on ties).
    pub(super) fn least_loaded(&self) -> usize {
        let cpu = self.least_load().map_or(0, |(_, c)| c);
        debug_assert_eq!(cpu, (0..self.sched.len()).min_by_key(|&c| (self.load(c), c)).unwrap_or(0));
        cpu
    }

    /// Returns the CPU a task forked on `parent` at `now` starts on by
    /// Linux's fork balancing (`crate::sched::fork`), `None` where the kernel
    /// has none modelled (FreeBSD).
    pub(super) fn fork_cpu(&self, parent: usize, now: u64) -> Option<usize> {
        let d = self.fork.as_ref()?;
        Some(d.find_idlest_cpu(&self.llcs, &self.cpu_loads(now), parent))
    }

    /// Returns where `n` threads a launcher on `parent` creates in turn start
    /// when each runs from its start (`crate::sched::fork::fork_order`), the
    /// first the launcher itself; `None` where no fork balancing is modelled.
    pub(super) fn fork_order(&self, n: usize, parent: usize) -> Option<Vec<usize>> {
        self.fork.as_ref().map(|d| crate::sched::fork::fork_order(d, &self.llcs, n, parent))
    }

    /// Returns the CPU with the fewest threads queued or running, `near` itself on
    /// ties, then the lowest id: where a thread created on `near` starts on a
    /// kernel without modelled fork balancing (FreeBSD; Linux's is
    /// [`Scheduler::fork_cpu`]).
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

    /// Returns whether `cpu` has nothing running or queued (`available_idle_cpu`).
    #[inline]
    pub(super) fn idle(&self, cpu: usize) -> bool {
        self.loads[cpu] == 0
    }

    /// Keeps the per-domain idle and movable counts in step after `cpu`'s load
    /// was `load` and its movable queued threads `movable`.
    #[inline]
    fn track(&mut self, cpu: usize, load: u32, movable: u32) {
        let llc = self.sched[cpu].llc as usize;
        let (l1, m1) = (self.loads[cpu], self.sched[cpu].runq.movable());
        if (load == 0) != (l1 == 0) {
            if l1 == 0 {
                self.idle_llc[llc] += 1;
            } else {
                self.idle_llc[llc] -= 1;
            }
        }
        if (movable > 0) != (m1 > 0) {
            if m1 > 0 {
                self.ovl_total += 1;
            } else {
                self.ovl_total -= 1;
            }
        }
    }

    /// Queues `tid` on `cpu`'s run queue at `now`: last (FIFO), or by its
    /// virtual runtime.
    pub(super) fn queue(&mut self, cpu: usize, tid: usize, now: u64) {
        let (load, movable) = (self.loads[cpu], self.sched[cpu].runq.movable());
        let t = &self.threads[tid];
        let e = if self.tun.kind.is_fair() {
            t.se.queued(tid, t.pinned)
        } else {
            self.fifo_seq += 1;
            Queued {
                key: self.fifo_seq,
                deadline: 0,
                tid: tid as u32,
                weight: t.se.weight,
                pinned: t.pinned,
                delayed: false,
            }
        };
        self.sched[cpu].runq.insert(e);
        self.loads[cpu] += 1;
        self.track(cpu, load, movable);
        self.pelt_rq(cpu, now);
        self.pelt_task(tid, now);
    }

    /// Takes the thread queued at `at` on `cpu`'s run queue (0: the first) at `now`.
    pub(super) fn unqueue(&mut self, cpu: usize, at: usize, now: u64) -> Option<usize> {
        let (load, movable) = (self.loads[cpu], self.sched[cpu].runq.movable());
        let tid = self.sched[cpu].runq.remove(at).map(|e| e.tid as usize);
        self.loads[cpu] -= tid.is_some() as u32;
        if let Some(tid) = tid {
            // Picked (`set_next_entity`) or dequeued: `clear_buddies`.
            self.sched[cpu].buddies.clear(tid as u32);
        }
        self.track(cpu, load, movable);
        self.pelt_rq(cpu, now);
        if let Some(tid) = tid {
            self.pelt_task(tid, now);
        }
        tid
    }

    /// Sets the thread running on `cpu` (`None`: none) at `now`.
    pub(super) fn set_cur(&mut self, cpu: usize, tid: Option<usize>, now: u64) {
        let (load, movable) = (self.loads[cpu], self.sched[cpu].runq.movable());
        let s = &mut self.sched[cpu];
        self.loads[cpu] = self.loads[cpu] + tid.is_some() as u32 - s.cur.is_some() as u32;
        let was = std::mem::replace(&mut s.cur, tid);
        self.track(cpu, load, movable);
        self.pelt_rq(cpu, now);
        for t in [was, tid].into_iter().flatten() {
            self.pelt_task(t, now);
        }
    }

    /// Charges the thread running on `cpu` its runtime up to `now`
    /// (`update_curr`) and raises the queue's `min_vruntime`; returns whether an
    /// EEVDF thread reached its deadline (and got a new one).
    pub(super) fn update_curr(&mut self, cpu: usize, now: u64) -> bool {
        let Some(c) = self.sched[cpu].cur else { return false };
        let se = &mut self.threads[c].se;
        se.account(now);
        let expired = self.tun.kind == SchedKind::Eevdf && eevdf::update_deadline(se, &self.tun);
        let v = se.vruntime;
        self.sched[cpu].runq.update_min(Some(v));
        expired
    }

    /// Places `tid` (last on `prev`'s queue, or new with `new`) in `cpu`'s
    /// queue by the class's rule, before it is queued there.
    pub(super) fn place(&mut self, tid: usize, prev: usize, cpu: usize, new: bool) {
        let curr = self.sched[cpu].cur.map(|c| (self.threads[c].se.vruntime, self.threads[c].se.weight));
        let rq = &self.sched[cpu].runq;
        let se = &mut self.threads[tid].se;
        match self.tun.kind {
            SchedKind::Fifo => {}
            SchedKind::Cfs if new => {
                se.vruntime = 0;
                cfs::place_new(rq, se, &self.tun, curr.map_or(0, |(_, w)| w));
            }
            SchedKind::Cfs => {
                if prev != cpu {
                    // Relative to the old queue's floor, then to the new one's.
                    let from_min = self.sched[prev].runq.min_vruntime;
                    se.vruntime = se.vruntime.wrapping_sub(from_min).wrapping_add(rq.min_vruntime);
                }
                cfs::place_wakeup(rq, se, &self.tun);
            }
            SchedKind::Eevdf => {
                if new {
                    se.vlag = 0;
                }
                eevdf::place(rq, curr, se, &self.tun, new);
            }
        }
    }

    /// `select_task_rq_fair` for a wake-up of `tid`, last on `prev`, by the
    /// thread running on `this`.
    pub(super) fn select_task_rq(&mut self, tid: usize, prev: usize, this: usize, sync: bool) -> Placement {
        let llc = &self.llcs[self.sched[this].llc as usize];
        let llc_size = (llc.1 - llc.0) as usize;
        let wide = self.sched[this]
            .cur
            .is_some_and(|w| wake_wide(self.threads[w].se.wakee_flips, self.threads[tid].se.wakee_flips, llc_size));
        let target = if !wide && this != prev { self.wake_affine(this, prev, tid, sync) } else { prev };
        let placed = self.select_idle_sibling(tid, prev, target, this);
        if self.tun.kernel.recent_used() == RecentUsed::Waker && !wide && !self.threads[tid].pinned {
            // v4.17 to v5.14: `current->recent_used_cpu = cpu` (want_affine:
            // not a wide wake-up, and the wakee allowed on the waker's CPU).
            if let Some(w) = self.sched[this].cur {
                self.threads[w].recent_used_cpu = this;
            }
        }
        placed
    }

    /// Returns whether CPUs `a` and `b` share a cache (LLC) domain.
    #[inline]
    pub(super) fn share_cache(&self, a: usize, b: usize) -> bool {
        self.sched[a].llc == self.sched[b].llc
    }

    /// Returns `imbalance_pct` of the lowest domain of `a` that holds `b`:
    /// their core's (threads of one core), their cache domain's, or the
    /// levels' above.
    pub(super) fn imbalance_pct(&self, a: usize, b: usize) -> u64 {
        self.tun.kernel.imbalance_pct(self.domains.lowest_common(a, b, &self.llcs))
    }

    /// `wake_affine`: the waker's CPU `this` or the previous one of `tid`,
    /// the wakee.
    pub(super) fn wake_affine(&self, this: usize, prev: usize, tid: usize, sync: bool) -> usize {
        // WA_IDLE (`wake_affine_idle`).
        if self.idle(this) && self.share_cache(this, prev) {
            return if self.idle(prev) { prev } else { this };
        }
        // The waker runs alone: from v6.15 the tasks asleep in the queue,
        // their dequeue delayed, are not counted (`cfs_h_nr_delayed`).
        if sync {
            let asleep = if self.features.on(SYNC_SKIP_DELAYED) { self.sched[this].runq.delayed() } else { 0 };
            if self.loads[this] - asleep == 1 {
                return this;
            }
        }
        if self.tun.kernel.affine_prev_idle() && self.idle(prev) {
            return prev;
        }
        self.wake_affine_weight(this, prev, tid, sync)
    }

    /// `select_idle_sibling`: an idle CPU sharing cache with `target`, or
    /// `target`. Where a core's threads share it, a CPU of a wholly idle core
    /// comes first (`select_idle_core`, while the cache domain has one:
    /// `test_idle_cores`, here exact where the kernel keeps a hint that a
    /// failed scan clears).
    fn select_idle_sibling(&mut self, tid: usize, prev: usize, target: usize, this: usize) -> Placement {
        if self.idle(target) {
            return Placement::at(target);
        }
        if prev != target && self.share_cache(prev, target) && self.idle(prev) {
            return Placement::at(prev);
        }
        // A recently used CPU, idle and sharing the target's cache (v4.17 on).
        if self.tun.kernel.recent_used() != RecentUsed::Never {
            let t = &mut self.threads[tid];
            let recent = t.recent_used_cpu;
            if self.tun.kernel.recent_used() == RecentUsed::Prev {
                t.recent_used_cpu = prev;
            }
            let allowed = !t.pinned;
            if recent != prev && recent != target && self.share_cache(recent, target) && self.idle(recent) && allowed {
                self.threads[tid].recent_used_cpu = prev;
                return Placement::at(recent);
            }
        }
        let llc = self.sched[target].llc as usize;
        if self.idle_llc[llc] == 0 {
            return Placement::at(target);
        }
        let (lo, hi) = (self.llcs[llc].0 as usize, self.llcs[llc].1 as usize);
        // The CPU after the target round to it.
        let scan = (target + 1..hi).chain(lo..target);
        let mut placed = Placement::at(target);
        let limit = match self.tun.kernel.scan_limit() {
            ScanLimit::Util => self.nr_idle_scan(llc) as usize,
            ScanLimit::None => hi - lo,
            limit => self.scan_prop(this, hi - lo, limit == ScanLimit::Prop),
        };
        if self.tun.kernel.sis_util() && limit == 0 {
            return placed;
        }
        if self.domains.smt() {
            // `select_idle_core`, not limited: each core once, reached at its
            // first thread in the scan's order, its threads read (each busy
            // one a line) until one is busy.
            let d = &self.domains;
            let pos = |c: usize| if c > target { c - target } else { c + (hi - lo) - target };
            for c in scan.clone() {
                let mut threads = d.core(c).filter(|&x| (lo..hi).contains(&x));
                if threads.clone().any(|x| x != c && pos(x) < pos(c)) {
                    continue;
                }
                match threads.find(|&x| !self.idle(x)) {
                    Some(_) => placed.busy_read += 1,
                    None => return Placement { cpu: c, ..placed },
                }
            }
            // No core wholly idle: from v5.13 an idle thread of the previous
            // CPU's core, where it shares the target's cache (`select_idle_smt`).
            if self.tun.kernel.idle_smt_prev() && self.share_cache(prev, target) {
                let in_llc = |c: usize| (lo..hi).contains(&c);
                if let Some(c) = d.core(prev).find(|&c| c != prev && in_llc(c) && self.idle(c)) {
                    return Placement { cpu: c, ..placed };
                }
            }
        }
        // `select_idle_cpu`'s loop: each busy CPU it passes a line read.
        let mut busy = 0;
        let found = scan.take(limit).find(|&c| {
            let idle = self.idle(c);
            busy += u32::from(!idle);
            idle
        });
        placed.busy_read += busy;
        placed.idle_scan = (limit > 0).then_some(busy);
        Placement { cpu: found.unwrap_or(target), ..placed }
    }

    /// `select_idle_cpu`'s limit before SIS_UTIL, for a wake-up from `this`
    /// of a domain of `span` CPUs: SIS_PROP's (`prop`), else none or all by
    /// `avg_idle / 512` against the average scan cost (v4.9 to v4.12).
    fn scan_prop(&self, this: usize, span: usize, prop: bool) -> usize {
        let avg_idle = self.sched[this].newidle.avg_idle() / 512;
        let avg_cost = self.sched[this].avg_scan_cost + 1;
        if !prop {
            return if avg_idle < avg_cost { 0 } else { span };
        }
        let span_avg = span as u64 * avg_idle;
        let nr = if span_avg > 4 * avg_cost { span_avg / avg_cost } else { 4 };
        // `if (!--nr) return -1` before each CPU: at most `nr - 1` looked at.
        (nr.saturating_sub(1)).min(span as u64) as usize
    }

    /// A wake-up from `this` scanned for an idle CPU in `cycles`
    /// (`update_avg(&this_sd->avg_scan_cost, time)`).
    pub(super) fn scan_took(&mut self, this: usize, cycles: u64) {
        let avg = &mut self.sched[this].avg_scan_cost;
        *avg = (*avg as i64 + (cycles as i64 - *avg as i64) / 8).max(0) as u64;
    }

    /// Puts the running thread `tid` of `cpu` back on its queue at `now`,
    /// runnable: preempted, its slice used, or yielding (`yielded`).
    pub(super) fn requeue(&mut self, cpu: usize, tid: usize, now: u64, yielded: bool) {
        self.threads[tid].state = State::Runnable;
        if self.tun.kind.is_fair() {
            let t = self.tun;
            let se = &mut self.threads[tid].se;
            se.account(now);
            if t.kind == SchedKind::Eevdf {
                eevdf::update_deadline(se, &t);
                if yielded {
                    // `yield_task_fair`: the deadline moves a slice on.
                    se.deadline += crate::sched::calc_delta_fair(t.base_slice, se.weight);
                    se.protect = false;
                }
            } else if yielded {
                // `yield_task_fair`: `clear_buddies`, then the skip buddy.
                let b = &mut self.sched[cpu].buddies;
                b.clear(tid as u32);
                b.skip = Some(tid as u32);
            }
        }
        self.queue(cpu, tid, now);
    }

    /// The thread the fair class picks to run next on `cpu`, taken off the queue.
    pub(super) fn pick_next(&mut self, cpu: usize, now: u64) -> Option<usize> {
        let rq = &self.sched[cpu].runq;
        let at = match self.tun.kind {
            SchedKind::Fifo => 0,
            SchedKind::Cfs => cfs::pick(rq, &self.sched[cpu].buddies, &self.tun),
            SchedKind::Eevdf => self.pick_eevdf(cpu, now)?,
        };
        self.unqueue(cpu, at, now)
    }

    /// The fair classes' `put_prev_task` for `prev`, which left `cpu` blocked
    /// or dead (a runnable one was queued again by [`Scheduler::requeue`]): its
    /// runtime up to `now`, EEVDF's lag, the queue's floor.
    pub(super) fn put_prev(&mut self, cpu: usize, prev: usize, now: u64) {
        let t = self.tun;
        if self.threads[prev].state == State::Runnable {
            return;
        }
        self.threads[prev].se.account(now);
        let blocked = self.threads[prev].state == State::Blocked;
        if t.kind == SchedKind::Eevdf && blocked && !self.delay_dequeue(cpu, prev, now) {
            eevdf::save_lag(&self.sched[cpu].runq, &mut self.threads[prev].se, &t);
        }
        self.sched[cpu].runq.update_min(None);
    }

    /// Takes the last queued thread that is not pinned from the busiest other CPU.
    pub(super) fn steal(&mut self, cpu: usize, now: u64) -> Option<usize> {
        let movable = |c: usize| self.sched[c].runq.iter().rposition(|e| !e.pinned);
        let victim = (0..self.sched.len())
            .filter(|&c| c != cpu && movable(c).is_some())
            .max_by_key(|&c| (self.sched[c].runq.len(), Reverse(c)))?;
        let at = movable(victim)?;
        self.unqueue(victim, at, now)
    }

    /// Returns whether thread `tid`, queued on `src`, is cache-hot at `now`
    /// for a move to `dst` (`task_hot`): a CFS buddy of `src`'s when `dst`
    /// runs something (CACHE_HOT_BUDDY), or it ran within the migration cost.
    fn hot(&self, tid: usize, src: usize, dst: usize, now: u64) -> bool {
        if self.tun.kind == SchedKind::Cfs && self.loads[dst] > 0 && self.sched[src].buddies.favours(tid as u32) {
            return true;
        }
        let s = self.threads[tid].se.exec_start;
        s != 0 && now.saturating_sub(s) < self.tun.migration_cost
    }

    /// Returns the tasks queued on `src` in the order `detach_tasks` looks at
    /// them, the one that ran least recently first (from the tail of
    /// `rq->cfs_tasks`), at most `NR_MIGRATE` and no more than `src` runs.
    pub(super) fn balance_candidates(&self, src: usize) -> Vec<usize> {
        let mut v: Vec<(u64, usize, usize)> = self.sched[src]
            .runq
            .iter()
            .enumerate()
            .map(|(i, e)| (self.threads[e.tid as usize].se.exec_start, i, e.tid as usize))
            .collect();
        v.sort_unstable();
        v.truncate(NR_MIGRATE.min(self.loads[src] as usize));
        v.into_iter().map(|(_, _, tid)| tid).collect()
    }

    /// Returns whether a balance may move queued task `tid` from `src` to
    /// `dst` at `now` (`can_migrate_task`): not bound to its CPU, and
    /// neither delayed nor cache-hot unless `may` allows it.
    pub(super) fn can_migrate(&self, tid: usize, src: usize, dst: usize, now: u64, may: MayMove) -> bool {
        let t = &self.threads[tid];
        !t.pinned && (may.delayed || !t.se.delayed) && (may.cache_hot || !self.hot(tid, src, dst, now))
    }

    /// Takes queued task `tid` off `src`'s queue for `dst` ([`Scheduler::detach`]).
    pub(super) fn detach_task(&mut self, src: usize, tid: usize, dst: usize, now: u64) -> Option<usize> {
        let at = self.sched[src].runq.iter().position(|e| e.tid as usize == tid)?;
        self.detach(src, at, dst, now)
    }

    /// Returns the machine's scheduling domains.
    pub(super) fn domains(&self) -> &Domains {
        &self.domains
    }

    /// Returns the cache domains: per domain its first CPU and one past its
    /// last.
    pub(super) fn llcs(&self) -> &[(u32, u32)] {
        &self.llcs
    }

    /// Returns when the idle CPUs' next periodic balance is due.
    pub(super) fn nohz_next(&self) -> u64 {
        self.nohz_next
    }

    /// The idle CPUs' next periodic balance is due at `at`.
    pub(super) fn nohz_next_at(&mut self, at: u64) {
        self.nohz_next = at;
    }

    /// Takes the task at `at` off `src`'s queue for `dst`, moving its place in
    /// virtual time; returns it, not yet queued anywhere.
    pub(super) fn detach(&mut self, src: usize, at: usize, dst: usize, now: u64) -> Option<usize> {
        let tid = self.unqueue(src, at, now)?;
        self.pelt_detach(tid, src);
        let t = self.tun;
        match t.kind {
            SchedKind::Fifo => {}
            SchedKind::Cfs => {
                let (from, to) = (self.sched[src].runq.min_vruntime, self.sched[dst].runq.min_vruntime);
                let se = &mut self.threads[tid].se;
                se.vruntime = se.vruntime.wrapping_sub(from).wrapping_add(to);
            }
            SchedKind::Eevdf => {
                let curr = self.sched[src].cur.map(|c| (self.threads[c].se.vruntime, self.threads[c].se.weight));
                eevdf::save_lag_queued(&self.sched[src].runq, curr, &mut self.threads[tid].se, &t);
                self.place(tid, src, dst, false);
            }
        }
        self.threads[tid].cpu = dst;
        Some(tid)
    }
}

/// Where a wake-up's `select_idle_sibling` put the task, and what its scans
/// for an idle CPU read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Placement {
    /// The CPU.
    pub(super) cpu: usize,
    /// The busy CPUs whose run-queue lines the scans read.
    pub(super) busy_read: u32,
    /// Of those, `select_idle_cpu`'s loop's, when it ran (its cost is the
    /// sample of `avg_scan_cost`).
    pub(super) idle_scan: Option<u32>,
}

impl Placement {
    /// The task goes to `cpu`, no scan made.
    fn at(cpu: usize) -> Self {
        Placement { cpu, busy_read: 0, idle_scan: None }
    }
}
