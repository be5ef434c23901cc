//! What the kernel operations and the executor read of the machine: shared
//! references and copies of its state, which only `kernel/` changes.

use super::*;

impl Machine {
    /// Returns every address-space slot, slot 0 (the kernel's) included.
    #[inline]
    pub fn spaces(&self) -> &[Space] {
        &self.spaces
    }

    /// Returns address-space slot `slot`.
    #[inline]
    pub fn space(&self, slot: u32) -> &Space {
        &self.spaces[slot as usize]
    }

    /// Returns every obligation, by id.
    #[inline]
    pub fn obligations(&self) -> &[Obligation] {
        &self.obligations
    }

    /// Returns CPU `cpu`'s TLB.
    #[inline]
    pub fn tlb(&self, cpu: usize) -> &SortedSet<Entry> {
        &self.tlbs[cpu]
    }

    /// Returns CPU `cpu`'s translation root and the tag it runs with.
    #[inline]
    pub fn root(&self, cpu: usize) -> (Root, u16) {
        self.roots[cpu]
    }

    /// Returns whether any CPU ever switched to slot `slot` or it was forked.
    #[inline]
    pub fn touched(&self, slot: u32) -> bool {
        self.touched[slot as usize]
    }

    /// Returns the invalidations CPU `cpu` issued that are not complete yet,
    /// ordered by [`Pending::key`].
    #[inline]
    pub fn pending(&self, cpu: usize) -> &[Pending] {
        &self.pending[cpu]
    }

    /// Returns what each CPU runs and where it stands (changed only through
    /// [`Machine::set_task`]).
    #[inline]
    pub fn sched(&self) -> &CpuTasks {
        &self.sched
    }

    /// Returns the run's constants.
    #[inline]
    pub fn consts(&self) -> &RunConstants {
        &self.consts
    }
}
