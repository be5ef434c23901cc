//! The kernel's on|off behaviours a run may turn the other way (`--set
//! KEY=on|off`), each declared once: its key, its words for `tlbkit list
//! machines`, its default on the run's machine and kernel, and the kernels
//! it applies to. The simulator reads a toggle's value where it models the
//! behaviour (`sim.features().on(SYNC_SKIP_DELAYED)`); `--set`, the run's
//! printed settings, the JSON catalogue, the sweep schema and the Python
//! keywords all read the table. Adding a toggle is an entry in
//! the `toggles!` list below and its use; nothing else names it.
//!
//! Two values: [`Toggles`] holds what a run gave (`--set` or a test's
//! choice), [`Features`] every toggle's value once the preset's defaults
//! fill what was not given.

use crate::preset::Preset;

/// One toggle's declaration.
#[derive(Clone, Copy)]
pub struct ToggleDef {
    /// The key (`--set KEY=on|off`).
    pub key: &'static str,
    /// What it does and its default, beginning "on|off:".
    pub doc: &'static str,
    /// Its value on `preset` (whose `kernel` is the run's) when not given.
    pub default: fn(&Preset) -> bool,
    /// For a Linux behaviour, why a FreeBSD machine refuses it ("whose
    /// scheduler has no wake lists"); `None`: every machine takes it.
    pub linux_only: Option<&'static str>,
}

/// A toggle, by its place in [`TOGGLES`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Toggle(u8);

impl Toggle {
    /// Returns its declaration.
    pub fn def(self) -> &'static ToggleDef {
        &TOGGLES[usize::from(self.0)]
    }

    /// Returns the toggle called `key`.
    pub fn by_key(key: &str) -> Option<Toggle> {
        TOGGLES.iter().position(|t| t.key == key).map(|i| Toggle(i as u8))
    }

    /// Returns every toggle, in declaration order.
    pub fn all() -> impl Iterator<Item = Toggle> {
        (0..TOGGLES.len()).map(|i| Toggle(i as u8))
    }

    fn bit(self) -> u32 {
        1 << self.0
    }
}

impl std::fmt::Debug for ToggleDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.key)
    }
}

/// The toggles a run gave, each on or off; the others take their default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Toggles {
    given: u32,
    on: u32,
}

impl Toggles {
    /// Returns these with `t` given as `on` (`None`: not given).
    #[must_use]
    pub fn with(mut self, t: Toggle, on: impl Into<Option<bool>>) -> Self {
        match on.into() {
            Some(on) => self.set(t, on),
            None => {
                self.given &= !t.bit();
                self.on &= !t.bit();
            }
        }
        self
    }

    /// Gives `t` as `on`.
    pub fn set(&mut self, t: Toggle, on: bool) {
        self.given |= t.bit();
        if on {
            self.on |= t.bit();
        } else {
            self.on &= !t.bit();
        }
    }

    /// Returns `t`'s value if the run gave it.
    pub fn given(self, t: Toggle) -> Option<bool> {
        (self.given & t.bit() != 0).then_some(self.on & t.bit() != 0)
    }

    /// Returns every toggle's value on `preset`: the given ones as given,
    /// the others their default.
    pub fn resolve(self, preset: &Preset) -> Features {
        let mut on = 0;
        for t in Toggle::all() {
            if self.given(t).unwrap_or_else(|| (t.def().default)(preset)) {
                on |= t.bit();
            }
        }
        Features(on)
    }
}

/// Every toggle's value on one run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Features(u32);

impl Features {
    /// Returns whether `t` is on.
    #[inline]
    pub fn on(self, t: Toggle) -> bool {
        self.0 & t.bit() != 0
    }

    /// Returns these with `t` set to `on`.
    #[must_use]
    pub fn with(self, t: Toggle, on: bool) -> Self {
        Features(if on { self.0 | t.bit() } else { self.0 & !t.bit() })
    }
}

/// Declares the toggles: a constant of each (its documentation, then `NAME
/// { the ToggleDef's fields }`) and the table [`TOGGLES`] in the same order.
macro_rules! toggles {
    ($($(#[doc = $d:literal])* $name:ident { $($field:ident: $value:expr),* $(,)? })*) => {
        /// The toggles' places in [`TOGGLES`].
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        enum Place { $($name,)* }
        $($(#[doc = $d])* pub const $name: Toggle = Toggle(Place::$name as u8);)*
        /// Every toggle, in the order `tlbkit list machines` gives them.
        pub const TOGGLES: &[ToggleDef] = &[$(ToggleDef { $($field: $value),* }),*];
    };
}

toggles! {
    /// An idle CPU waits in the machine's idle states (`sim/idle.rs`: a
    /// polling state is woken with no IPI, and each pays its exit latency);
    /// off wakes every idle CPU with a reschedule IPI.
    CPUIDLE {
        key: "cpuidle",
        doc: "on|off: an idle CPU waits in the machine's idle states: one that polls its thread flags (x86's POLL and \
         MWAIT states) is woken by the waker's store with no IPI, any other (HLT, arm64's WFI) by a reschedule IPI, \
         and each starts after its state's exit latency, the state the deepest whose target residency its idle time \
         covers (default on; off: every idle CPU woken by an IPI and started at its delivery, as before this setting \
         existed)",
        default: |_| true,
        linux_only: None,
    }
    /// A wake-up onto a CPU of another cache domain goes on its wake list
    /// (`TTWU_QUEUE`, `sim/sched.rs`).
    TTWU_QUEUE {
        key: "ttwu_queue",
        doc: "on|off: Linux machines only; a wake-up onto a CPU of another cache domain goes on that CPU's wake list \
         (TTWU_QUEUE: the waker pays the list's line, not the remote run queue's lock, and a busy target takes an \
         IPI whose handler queues the thread) or is queued under the remote lock (default on, as every Linux kernel)",
        default: |_| true,
        linux_only: Some("whose scheduler has no wake lists"),
    }
    /// CFS makes the task a wake-up preempted its queue's last buddy
    /// (`LAST_BUDDY`, `sched/cfs.rs`).
    LAST_BUDDY {
        key: "last_buddy",
        doc: "on|off: Linux machines only, under CFS (kernels before v6.6, or sched=cfs); the task a wake-up \
         preempted, on a queue of 8 or more, is the queue's last buddy, which the next pick prefers to the \
         leftmost task while it leads it by at most the wake-up granularity (default on: LAST_BUDDY, as v4.10 \
         to v6.5 ship it; off: NO_LAST_BUDDY in sched_features; the next buddy, the woken task, stays)",
        default: |_| true,
        linux_only: Some("whose scheduler has no buddies"),
    }
    /// EEVDF leaves a task that sleeps while not eligible queued until a pick
    /// or its wake-up (`DELAY_DEQUEUE`, `sim/scheduler/delayed.rs`).
    DELAY_DEQUEUE {
        key: "delay_dequeue",
        doc: "on|off: Linux machines only, under EEVDF (kernels from v6.6, or sched=eevdf); a task that goes to \
         sleep while not eligible stays queued, asleep, until a pick completes its dequeue or its wake-up finds it \
         there and runs it in place, with no choice of CPU (default: the kernel's, on from v6.12: DELAY_DEQUEUE; \
         off: NO_DELAY_DEQUEUE in sched_features, every sleeping task dequeued at once)",
        default: |p| p.kernel.delay_dequeue(),
        linux_only: Some("whose scheduler has no delayed dequeue"),
    }
    /// A sync wake-up's "the waker runs alone" test leaves the waker's CPU's
    /// delayed tasks out of its count (`wake_affine_idle`, v6.15).
    SYNC_SKIP_DELAYED {
        key: "sync_skip_delayed",
        doc: "on|off: Linux machines only, under EEVDF with delay_dequeue; a sync wake-up (a pipe's) goes to the \
         waker's CPU when the waker runs alone there, counting the CPU's tasks without those asleep in its queue, \
         their dequeue delayed (default: the kernel's, on from v6.15: aa3ee4f0b754 \"sched/fair: Fixup \
         wake_up_sync() vs DELAYED_DEQUEUE\"; off: the delayed tasks counted, as v6.12 to v6.14 count them)",
        default: |p| p.kernel.sync_skip_delayed(),
        linux_only: Some("whose scheduler has no delayed dequeue"),
    }
    /// The machine's memory pressure runs as NUMA nodes' memory with their
    /// watermarks and a `kswapd` each (`sim/kswapd.rs`).
    KSWAPD {
        key: "kswapd",
        doc: "on|off: Linux machines only; a workload whose memory pressure is the machine's (vm-scalability's \
         lru-file-mmap-read and swap cases) runs it as each NUMA node's memory with its min, low and high \
         watermarks and a kswapd thread per node, woken below low and reclaiming to high, the faulting thread \
         reclaiming itself only below min (default on); off: a memory cgroup limit that only the faulting thread \
         reclaims at, as before this setting existed",
        default: |_| true,
        linux_only: Some("whose page daemon is not modelled"),
    }
    /// Reclaim and `MADV_PAGEOUT` defer their unmaps' flushes into one batch
    /// flush (`sim/file_reclaim.rs`, `sim/ptemem.rs`, `sim/migrate.rs`).
    TLBBATCH {
        key: "tlbbatch",
        doc: "on|off: reclaim and MADV_PAGEOUT defer their unmaps' TLB flushes into one batch flush (on, the default: \
         Linux v4.3's try_to_unmap_flush, 72b252aed506; arm64's since v6.5, 43b3dfdd0455) or flush each page as it is unmapped (off: \
         ptep_clear_flush, before v4.3 and on arm64 before v6.5)",
        default: |_| true,
        linux_only: None,
    }
    /// `migrate_pages` unmaps a batch of folios before one flush
    /// (`sim/migrate.rs`).
    MIGRATE_BATCH {
        key: "migrate_batch",
        doc: "on|off: migrate_pages(2) unmaps up to 512 folios with one deferred TLB flush, then copies them (on: \
         Linux v6.3's migrate_pages_batch, 7e12beb8ca2a) or unmaps, flushes and copies one folio at a time (off) (default: on \
         for a preset kernel of v6.3 or later)",
        default: |p| p.kernel.batches_migration(),
        linux_only: None,
    }
    /// A fault takes only its VMA's lock (v6.4's per-VMA locks,
    /// `sim/kwork.rs`).
    VMA_LOCKS {
        key: "vma_locks",
        doc: "on|off: Linux machines only; a fault takes its VMA's lock (v6.4's per-VMA locks: 0bff0aaea03e on x86, cd7f176aea5f on arm64) or mmap_lock for reading \
         (default: the machine's kernel's, on from v6.4)",
        default: |p| p.kernel.per_vma_locks(),
        linux_only: Some("whose faults take no VMA lock"),
    }
    /// Per-VMA locks as the series' v2 posted them (`sim/kwork.rs`); on
    /// turns [`VMA_LOCKS`] on (`run/resolve.rs`).
    VMA_LOCKS_V2 {
        key: "vma_locks_v2",
        doc: "on|off: Linux machines only; per-VMA locks as the series' v2 posted them (on: January 2023; a \
         single-threaded process's faults take mmap_lock, and a fault that took its VMA's lock walks the VMA tree \
         again to check the VMA is still in it; on turns per-VMA locks on, and refuses vma_locks=off) or as merged \
         in v6.4 (off: neither; the VMA's detached flag) (default: off)",
        default: |_| false,
        linux_only: Some("whose faults take no VMA lock"),
    }
    /// A reader of `mmap_lock` behind a writer sleeps in its wait queue
    /// (`crate::locks`, `sim/kwork.rs`).
    RWSEM_READER_SLEEP {
        key: "rwsem_reader_sleep",
        doc: "on|off: Linux machines only; a fault or madvise that finds mmap_lock held for writing sleeps in its wait \
         queue until the writer's release wakes it (on: before v5.3 and from v5.11, 617f3ef95177 \"locking/rwsem: \
         Remove reader optimistic spinning\") or spins on the writer, keeping its CPU (off: v5.3 to v5.10's reader \
         optimistic spinning) (default: the run's kernel's)",
        default: |p| p.kernel.rwsem_readers_sleep(),
        linux_only: Some("whose sx readers spin on a running owner"),
    }
    /// A writer of `mmap_lock` behind readers sleeps in its wait queue
    /// (`crate::locks`, `sim/mmap_writer.rs`).
    RWSEM_WRITER_SLEEP {
        key: "rwsem_writer_sleep",
        doc: "on|off: Linux machines only; an mmap, munmap, mprotect or fork that finds mmap_lock held by readers \
         sleeps in its wait queue until the last reader's release wakes it, at once (v4.8 to v5.2: \
         rwsem_can_spin_on_owner refuses a reader-owned lock) or after spinning (10 + readers/2) us (from v5.3, \
         rwsem_rspin_threshold), or spins until they leave (off: before v4.8, whose owner word names no reader) \
         (default: the run's kernel's, on from v4.8)",
        default: |p| p.kernel.rwsem_writer_spin() != crate::preset::WriterSpin::Unbounded,
        linux_only: Some("whose sx exclusive waiters spin on the sharers"),
    }
    /// A zap first drains the CPU's LRU-add batch (`lru_add_drain()`,
    /// `sim/kwork.rs`).
    LRU_DRAIN {
        key: "lru_drain",
        doc: "on|off: Linux machines only; madvise(MADV_DONTNEED), munmap and exit first drain the CPU's LRU-add batch \
         onto the LRU under its lock (lru_add_drain(), until v6.14) or leave it to fill (default: the run's kernel's, on \
         until v6.14)",
        default: |p| p.kernel.drains_lru_at_zap(),
        linux_only: Some("which has no LRU-add batches"),
    }
    /// `mprotect` flushes only the PTEs whose change the architecture must
    /// see (`pte_needs_flush`, `sim/mmap.rs`).
    PTE_NEEDS_FLUSH {
        key: "pte_needs_flush",
        doc: "on|off: Linux machines only; mprotect flushes only the PTEs whose change the architecture must see \
         (pte_needs_flush: x86's from v5.19, arm64's from v6.19) or every present PTE it rewrote (the generic one) \
         (default: the run's kernel's)",
        default: |p| p.kernel.pte_needs_flush(p.arch),
        linux_only: Some("whose pmap_protect has no such choice"),
    }
}

const _: () = assert!(TOGGLES.len() <= 32, "Toggles keeps a bit per toggle in a u32");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preset::Kernel;

    #[test]
    fn a_given_toggle_overrides_the_kernels_default_and_only_it() {
        let mut p = crate::preset::by_name("milan").unwrap();
        p.kernel = Kernel::Linux(6, 14);
        let none = Toggles::default().resolve(&p);
        assert!(!none.on(SYNC_SKIP_DELAYED) && none.on(DELAY_DEQUEUE) && none.on(TTWU_QUEUE));
        let given = Toggles::default().with(SYNC_SKIP_DELAYED, true).with(TTWU_QUEUE, false);
        assert_eq!((given.given(SYNC_SKIP_DELAYED), given.given(TTWU_QUEUE)), (Some(true), Some(false)));
        assert_eq!(given.given(DELAY_DEQUEUE), None);
        let f = given.resolve(&p);
        assert!(f.on(SYNC_SKIP_DELAYED) && !f.on(TTWU_QUEUE) && f.on(DELAY_DEQUEUE));
        p.kernel = Kernel::Linux(6, 15);
        assert!(Toggles::default().resolve(&p).on(SYNC_SKIP_DELAYED));
        assert_eq!(given.with(SYNC_SKIP_DELAYED, None).given(SYNC_SKIP_DELAYED), None);
    }

    #[test]
    fn every_toggle_is_found_by_its_key_and_says_on_or_off() {
        for t in Toggle::all() {
            assert_eq!(Toggle::by_key(t.def().key), Some(t));
            assert!(t.def().doc.starts_with("on|off: "), "{}", t.def().key);
        }
        assert_eq!(Toggle::by_key("no_such_toggle"), None);
    }
}
