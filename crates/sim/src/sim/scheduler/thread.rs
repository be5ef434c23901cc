//! A thread ([`Thread`]): the scheduler's record of one task.
//!
//! It owns what the kernel keeps per task: its address space, its state and
//! CPU, its program and the value the last system call returns to it, the
//! work an event left it to finish (the rest of a touch, a pipe operation to
//! retry, a fault's end), its kernel stack and thread structure, whether it is
//! bound to its CPU, and its scheduling entity. Its state and CPU change with
//! the run queues, so only the scheduler sets them ([`Scheduler`]'s
//! `queue_runnable`, `run`, `block` and `exit`, which keep "a thread runs
//! where it is some CPU's running thread" true); the kernel's paths reach the
//! rest through the methods here, named for what the kernel does.
//!
//! [`Scheduler`]: super::Scheduler

use crate::program::{Op, Program, Sys};
use crate::sched::Entity;
use crate::sim::kwork::FaultLock;
use tlbkit_policy::MmId;

/// A thread's scheduling state.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(in crate::sim) enum State {
    Runnable,
    Running,
    Blocked,
    Dead,
}

/// A pipe operation a blocked thread retries after its wake-up.
#[derive(Clone, Copy, Debug)]
pub(in crate::sim) enum Retry {
    /// A read of the pipe.
    Read(u32),
    /// A write to the pipe.
    Write(u32),
}

/// One thread.
pub(in crate::sim) struct Thread {
    pub(super) mm: MmId,
    pub(super) state: State,
    pub(super) cpu: usize,
    prog: Box<dyn Program>,
    ret: u64,
    /// The rest of a touch that did not fit in one event.
    pending: Option<(u64, u64, bool)>,
    /// A pipe read to retry after a wake-up.
    pub(super) retry_read: Option<u32>,
    /// A pipe write to retry after a wake-up.
    pub(super) retry_write: Option<u32>,
    /// A system call that slept in `mmap_lock`'s wait queue: after the
    /// wake-up it runs on, holding the read lock its waker granted.
    locked_sys: Option<Sys>,
    /// Its next fault goes on holding `mmap_lock` for reading, granted by
    /// the waker of its sleep ([`FaultOwed::Asleep`]).
    granted: bool,
    /// What a fault it took from user code still owes its next events,
    /// before anything else (`Sim::fault`); its `pending` touch then
    /// restarts the access that faulted.
    fault_owed: Option<FaultOwed>,
    /// Its `pending` touch begins with the access a fault interrupted: the
    /// instruction is restarted, not counted again.
    restart: bool,
    kstack: u64,
    tstruct: u64,
    /// Bound to its CPU (`CloneOn`): wake-ups and idle CPUs leave it there.
    pub(super) pinned: bool,
    /// Its scheduling entity (the fair classes).
    pub(super) se: Entity,
    /// `p->recent_used_cpu`: a CPU it ran on lately, which a wake-up takes
    /// when it is idle (`sched::RecentUsed`); its parent's CPU when new.
    pub(in crate::sim) recent_used_cpu: usize,
}

/// What a fault a thread took from user code owes its next events (`Sim::fault`).
#[derive(Clone, Copy, Debug)]
pub(in crate::sim) enum FaultOwed {
    /// Its read of `mm->pgd`, which may find the line another CPU's: the
    /// rest of the fault ran and takes `rest` cycles after a hit (its times
    /// are the thread's: a touch's loads before the fault overlap, and the
    /// read comes that much earlier than the rest's accesses).
    Pgd { mm: MmId, held: FaultLock, rest: u64 },
    /// Its release of `held` and its return to user code.
    Exit { mm: MmId, held: FaultLock },
    /// It slept in `mmap_lock`'s wait queue: after the wake-up the access
    /// that faulted restarts, and its fault goes on holding the read lock
    /// its waker granted (`rwsem_mark_wake`), with nothing charged again.
    Asleep,
}

impl Thread {
    /// Returns a new, runnable thread of `mm` running `prog`, last on `cpu`
    /// (bound to it if `pinned`), with kernel stack `kstack` and thread
    /// structure `tstruct`.
    pub(in crate::sim) fn new(
        mm: MmId,
        prog: Box<dyn Program>,
        cpu: usize,
        pinned: bool,
        kstack: u64,
        tstruct: u64,
    ) -> Self {
        Thread {
            mm,
            state: State::Runnable,
            cpu,
            prog,
            ret: 0,
            pending: None,
            retry_read: None,
            retry_write: None,
            locked_sys: None,
            granted: false,
            fault_owed: None,
            restart: false,
            kstack,
            tstruct,
            pinned,
            se: Entity::default(),
            recent_used_cpu: cpu,
        }
    }

    /// Returns the address space it runs in.
    #[inline]
    pub(in crate::sim) fn mm(&self) -> MmId {
        self.mm
    }

    /// Returns its scheduling state (for tests).
    #[cfg(test)]
    pub(in crate::sim) fn state(&self) -> State {
        self.state
    }

    /// Returns the CPU it runs, is queued or last ran on.
    #[inline]
    pub(in crate::sim) fn cpu(&self) -> usize {
        self.cpu
    }

    /// Returns whether it is bound to its CPU.
    #[inline]
    pub(in crate::sim) fn pinned(&self) -> bool {
        self.pinned
    }

    /// Returns its kernel stack's address.
    #[inline]
    pub(in crate::sim) fn kstack(&self) -> u64 {
        self.kstack
    }

    /// Returns its thread structure's address.
    #[inline]
    pub(in crate::sim) fn tstruct(&self) -> u64 {
        self.tstruct
    }

    /// Returns its scheduling entity (for tests).
    #[cfg(test)]
    pub(in crate::sim) fn se(&self) -> &Entity {
        &self.se
    }

    /// Returns its program (for the host's prefetch).
    #[inline]
    pub(in crate::sim) fn program(&self) -> &dyn Program {
        &*self.prog
    }

    /// Returns whether a fault it took still has its end to run.
    #[inline]
    pub(in crate::sim) fn in_fault(&self) -> bool {
        self.fault_owed.is_some()
    }

    /// Sets what its system call returns to it.
    #[inline]
    pub(in crate::sim) fn set_return(&mut self, v: u64) {
        self.ret = v;
    }

    /// Returns its program's next operation, handing it what the last system
    /// call returned (which is then spent).
    #[inline]
    pub(in crate::sim) fn next_op(&mut self) -> Op {
        let ret = std::mem::take(&mut self.ret);
        self.prog.next(ret)
    }

    /// Leaves the rest of a touch, `pages` pages from `va`, to its next event.
    #[inline]
    pub(in crate::sim) fn resume_later(&mut self, va: u64, pages: u64, write: bool) {
        self.pending = Some((va, pages, write));
    }

    /// Takes the rest of a touch left to this event, if any.
    #[inline]
    pub(in crate::sim) fn take_pending(&mut self) -> Option<(u64, u64, bool)> {
        self.pending.take()
    }

    /// Takes the pipe read to retry after its wake-up, if any.
    #[inline]
    pub(in crate::sim) fn take_retry_read(&mut self) -> Option<u32> {
        self.retry_read.take()
    }

    /// Takes the pipe write to retry after its wake-up, if any.
    #[inline]
    pub(in crate::sim) fn take_retry_write(&mut self) -> Option<u32> {
        self.retry_write.take()
    }

    /// A fault from its user code in `mm` stopped at its unlock of `held`:
    /// the end runs at its next event, before anything else.
    #[inline]
    pub(in crate::sim) fn end_fault_later(&mut self, mm: MmId, held: FaultLock) {
        debug_assert!(self.fault_owed.is_none(), "a fault's end is already owed");
        self.fault_owed = Some(FaultOwed::Exit { mm, held });
    }

    /// A fault from its user code in `mm`, holding `held`, stopped at its
    /// read of `pgd`: the read runs at its next event, and the rest of the
    /// fault, run already, takes `rest` cycles after it if it hits.
    #[inline]
    pub(in crate::sim) fn read_pgd_later(&mut self, mm: MmId, held: FaultLock, rest: u64) {
        debug_assert!(self.fault_owed.is_none(), "a fault's end is already owed");
        self.fault_owed = Some(FaultOwed::Pgd { mm, held, rest });
    }

    /// A fault from its user code slept in `mmap_lock`'s wait queue: the
    /// access restarts after the wake-up ([`FaultOwed::Asleep`]).
    #[inline]
    pub(in crate::sim) fn fault_asleep(&mut self) {
        debug_assert!(self.fault_owed.is_none(), "a fault's end is already owed");
        self.fault_owed = Some(FaultOwed::Asleep);
    }

    /// Its system call `s` slept in `mmap_lock`'s wait queue: it runs on after
    /// the wake-up, holding the read lock (a writer: taking the lock).
    #[inline]
    pub(in crate::sim) fn sys_asleep(&mut self, s: Sys) {
        self.locked_sys = Some(s);
    }

    /// Its next fault holds `mmap_lock` for reading already.
    #[inline]
    pub(in crate::sim) fn grant_read(&mut self) {
        self.granted = true;
    }

    /// Takes whether its fault holds `mmap_lock` for reading already.
    #[inline]
    pub(in crate::sim) fn take_granted(&mut self) -> bool {
        std::mem::take(&mut self.granted)
    }

    /// Returns the system call asleep in `mmap_lock`'s wait queue, if any.
    #[inline]
    pub(in crate::sim) fn locked_sys(&self) -> Option<&Sys> {
        self.locked_sys.as_ref()
    }

    /// Takes the system call to run on after its sleep in `mmap_lock`'s
    /// wait queue, if any.
    #[inline]
    pub(in crate::sim) fn take_locked_sys(&mut self) -> Option<Sys> {
        self.locked_sys.take()
    }

    /// Takes what a fault owes this event, if anything.
    #[inline]
    pub(in crate::sim) fn take_fault_owed(&mut self) -> Option<FaultOwed> {
        self.fault_owed.take()
    }

    /// Its left touch restarts the access a fault interrupted.
    #[inline]
    pub(in crate::sim) fn restart_access(&mut self) {
        self.restart = true;
    }

    /// Takes whether its touch restarts an interrupted access.
    #[inline]
    pub(in crate::sim) fn take_restart(&mut self) -> bool {
        std::mem::take(&mut self.restart)
    }

    /// It woke `wakee` at `now` (`record_wakee`, `hz` cycles a second).
    #[inline]
    pub(in crate::sim) fn record_wakee(&mut self, wakee: usize, now: u64, hz: u64) {
        self.se.record_wakee(wakee, now, hz);
    }

    /// `execve`: it runs in the new address space `mm` from now on.
    pub(in crate::sim) fn exec_into(&mut self, mm: MmId) {
        self.mm = mm;
    }

    /// Returns its scheduling entity, to change (for tests).
    #[cfg(test)]
    pub(in crate::sim) fn se_mut(&mut self) -> &mut Entity {
        &mut self.se
    }

    /// Binds it to its CPU (for tests).
    #[cfg(test)]
    pub(in crate::sim) fn pin(&mut self) {
        self.pinned = true;
    }
}
