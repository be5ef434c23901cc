//! The bug zoo: real bugs these mechanisms have had, each re-introduced by one
//! switch in the real policy code, so that the checker can find them in the very
//! code it otherwise proves correct.
//!
//! A policy is built fixed (its `new`, bit for bit the code the simulator runs)
//! and turned into a zoo variant with its `with_bug` builder
//! ([`crate::asid::LinuxArm64::with_bug`], [`crate::asid::LinuxX86::with_bug`],
//! [`crate::asid::FreebsdEpoch::with_bug`], [`crate::asid::FreebsdX86::with_bug`]).
//! Each switch is one `if` at the line where the kernel had the bug, never a second
//! copy of an algorithm; its comment there names the [`Bug`].
//!
//! [`ZOO`] is the registry the checker and `tlbkit list` read: one [`ZooEntry`] per
//! bug, named `zoo/<id>` on the command line, with the registry name of the policy
//! it modifies. [`Bug::in_policy`] says which bugs have no switch in this crate
//! (the kernel around the policy applies them).
//!
//! What the zoo does not claim: a variant reproduces the kernel's code path of the
//! time only where the module docs of its policy say so. Each [`Bug`] says what
//! was modelled and how its policy's code of today differs from the buggy kernel.

/// A real bug these mechanisms have had, re-introduced by a switch in the real code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Bug {
    /// Linux commit a8ffaaa060b8, "arm64: asid: Do not replace active_asids if
    /// already 0" (Catalin Marinas, 2017-12-27; found by the TLA+ model of the ASID
    /// allocator, `kernel-tla.git` `asidalloc.tla`, as he wrote on 2019-06-24).
    ///
    /// The bug: the lock-free fast path of `check_and_switch_context` replaced this
    /// CPU's `active_asids` entry with an unconditional relaxed `xchg` and fell back
    /// to the slow path only when the old value was 0. A 0 is what a concurrent
    /// rollover's `flush_context` writes; the `xchg` had already overwritten it with
    /// the mm's id of the *old* generation. If a second rollover runs before this
    /// CPU gets `cpu_asid_lock`, it reserves that stale id for this CPU instead of
    /// what the CPU still has in TTBR0, and two mms can end up with one ASID number
    /// in the same generation.
    ///
    /// The fix: read `active_asids` first, refuse the fast path if it is 0, and
    /// replace it with a `cmpxchg` that fails if a rollover zeroed it meanwhile.
    /// Switch: the fast path of `LinuxArm64::check_and_switch_context`.
    LinuxArm64A8ffaaa060b8,
    /// Linux commit 5e10f9887ed8, "arm64: mm: Fix TLBI vs ASID rollover" (Will
    /// Deacon, 2021-08-06, merged for v5.15, Cc stable).
    ///
    /// The bug: `flush_tlb_mm`, `__flush_tlb_range` and `flush_tlb_page_nosync`
    /// computed the TLBI operand from `ASID(mm)` *before* their `DSB ISHST`. A
    /// rollover can give the mm a new ASID after that read, and a CPU that switches
    /// to the mm with it may walk the page tables before the page-table store that
    /// the flush is for is visible, caching the old translation under the new ASID;
    /// the TLBI of the old ASID never removes it.
    ///
    /// The fix: issue `DSB ISHST` first and read `context.id` (with `atomic64_read`)
    /// after it: the barrier on the flushing CPU and the dependency on the switching
    /// CPU make the new-ASID walk see the cleared entry.
    /// Switch: `LinuxArm64::begin_user_flush`.
    LinuxArm645e10f9887ed8,
    /// Linux commit 8f1d56f64f8d, "x86/mm/tlb: Ignore f->new_tlb_gen when zero"
    /// (Nadav Amit, 2022-07-10, committed to tip x86/mm by Dave Hansen 2022-07-19;
    /// reported and tested by Hugh Dickins). It fixes aa44284960d5 ("x86/mm/tlb:
    /// Avoid reading mm_tlb_gen when possible"); both went into tip x86/mm for
    /// v6.0, so no release carried the bug.
    ///
    /// The bug: aa44284960d5 made `flush_tlb_func` return early when
    /// `f->new_tlb_gen <= local_tlb_gen`. `arch_tlbbatch_flush` (reclaim's deferred
    /// flush, `try_to_unmap_flush`) passes no generation, i.e. 0, which that test
    /// reads as an old flush already done: reclaim's batched flushes did nothing on
    /// any CPU.
    ///
    /// The fix: `TLB_GENERATION_INVALID` (0) is never compared, so the handler goes
    /// on to compare the CPU's generation with the mm's and flushes the whole PCID.
    /// Switch: `LinuxX86::flush_tlb_func`; reached through
    /// [`crate::Policy::flush_batch`].
    LinuxX868f1d56f64f8d,
    /// v1 of origin 001: "[PATCH 2/2] arm64: tlb: skip tlbi broadcast for single
    /// threaded TLB flushes" (Andrea Arcangeli, 2020-02-03), reviewed by Catalin
    /// Marinas (2020-02-10, 2020-02-11).
    ///
    /// The bug: v1 went local when `current->mm == mm && mm_users <= 1`. A kernel
    /// thread on another CPU that ran after the mm's thread keeps the user page
    /// tables and ASID in TTBR0 (arm64's `enter_lazy_tlb` does nothing) but holds
    /// only `mm_count`, so it is not in `mm_users`: the local TLBI misses that CPU,
    /// which can still walk the tables speculatively and keeps its entries. (Andrea's
    /// first answer, also requiring `mm_count == 1`, was shown racy against
    /// `try_to_unmap` the next day.)
    ///
    /// The fix, v2 (2020-02-23, origin 001): count CPUs in `nr_active_mm` instead of
    /// threads, and have lazy entry (idle) install the reserved TTBR0 *before* it
    /// drops the count, so that an uncounted CPU can no longer walk the mm.
    ///
    /// What is modelled: the v2 code of [`crate::asid::linux_arm64_skipbcast`] with
    /// v1's lazy entry, which drops this CPU from the count the decision uses but
    /// leaves TTBR0 on the mm, as stock arm64 and v1 do. v1's decision differed in
    /// ways the bug does not depend on (it had no "no flush" answer and read
    /// `mm_users`, not a per-CPU count). Switch: `LinuxArm64::enter_lazy_tlb`.
    SkipbcastV1,
    /// Origin 001 (v2 of "arm64: tlb: skip tlbi broadcast", Andrea Arcangeli,
    /// 2020-02-23) without the `smp_mb()` in `tlb_flush_check` between marking the
    /// other CPUs stale (`cpumask_setall`, plain stores) and reading `nr_active_mm`
    /// again. No posted version lacked it; the patch's own comment there says what
    /// it orders.
    ///
    /// The bug: the barrier is the flusher's half of a store-buffering pair with
    /// the switch path (count increment, `smp_mb()`, stale-bit test). Without it
    /// the stale-mask stores can still sit in the flusher's store buffer when it
    /// reads the count: the flusher reads the count from before another CPU
    /// switched in (and answers "local"), while that CPU reads its stale bit from
    /// before the flusher set it (and does not flush). That CPU then runs the mm
    /// with the translations the flush removed only here. Only a memory model with
    /// store buffers shows it: with every access sequentially consistent one of the
    /// two always sees the other. Switch: `LinuxArm64::tlb_flush_check`.
    SkipbcastNoBarrier,
    /// FreeBSD arm64's epoch allocator (origin 000, r354286, Alan Cox, review D21922,
    /// 2019) with a 1-bit epoch counter instead of its 31 bits.
    ///
    /// FreeBSD keeps `asid_epoch` in `[0, INT_MAX)` and `pmap_reset_asid_set` wraps
    /// it to 0 at `INT_MAX`; a pmap's cookie (`COOKIE_FROM(asid, epoch)`) is
    /// trusted whenever its epoch equals the current one. Nothing else guards the
    /// wrap: Alan Cox named the hazard in the review (2019-10-24) — a pmap idle from
    /// epoch G until the counter comes back to G finds its stale cookie current and
    /// runs with an ASID number that another pmap may hold — and judged it out of
    /// reach with 31 bits of epoch and 16-bit ASIDs.
    ///
    /// What is modelled: the epoch wraps at 2. One bit is the narrowest counter that
    /// still tells consecutive epochs apart, so a pmap idle across one reset
    /// reallocates exactly as FreeBSD's does, while the ABA needs only two resets,
    /// the shortest counterexample (two bits would need four).
    /// Switch: the wrap in `FreebsdEpoch::reset`.
    FreebsdArm64EpochWrap,
    /// FreeBSD r355427, "On a context switch, handle the possibility that the
    /// old thread was preempted after an "ic" or "tlbi" instruction but before
    /// it performed a "dsb" instruction" (review D22622; merged with r355145).
    ///
    /// The bug: a thread preempted between its `TLBI ..IS` and its `DSB ISH`
    /// may finish on another CPU, whose `DSB` completes only that
    /// CPU's invalidations. The one issued on the first CPU is complete only
    /// when that CPU executes a `DSB` of its own. A switch to a thread of a
    /// different pmap has one (`pmap_activate_int`'s `dsb(ish)` after the
    /// `curpmap` store); a switch to another thread of the *same* pmap returned
    /// at once, so the thread could go on to free the page while another CPU
    /// still held its translation.
    ///
    /// The fix: `pmap_activate_int` issues `dsb(ish)` when the pmap is already
    /// `curpmap`. The checker offers the preemption at a flush's `DSB ISH`
    /// (the thread moves, the first CPU switches to another thread of the same
    /// process); only this variant leaves the invalidation pending. Its base is
    /// the allocator with the fix candidate for its reset finding
    /// (`arm64-freebsd-asid-fix-reserved-ttbr0`), which passes every search:
    /// on the faithful allocator the reset window (`no_asid_alias`) shows
    /// first. Switch: the early return of `FreebsdEpoch::switch_mm`.
    FreebsdArm64R355427,
    /// FreeBSD x86's shared-counter shootdown (`smp_targeted_tlb_shootdown` and the
    /// `inv*_handler`s of `sys/x86/x86/mp_x86.c`, FreeBSD 11.0, before origin 003)
    /// with each handler's two statements swapped: `atomic_add_int(&smp_tlb_wait,
    /// 1)` before the invalidation that reads `smp_tlb_addr1`/`smp_tlb_pmap`.
    ///
    /// The bug class: acknowledging before the work is done. Once the counter
    /// reaches the number of targets the initiator's sync ends, its caller may free
    /// the page, and it drops `smp_ipi_mtx`, so the next initiator may overwrite the
    /// request globals; a late target then invalidates the new request instead of
    /// the one it acknowledged and returns to user mode with the old translation.
    /// This is a constructed variant of a real class, not a FreeBSD commit.
    ///
    /// The contrast: FreeBSD 13's lock-free protocol
    /// ([`crate::shootdown::scoreboard`]) acknowledges before invalidating on purpose
    /// and is correct because of its order: the target reads the request (per
    /// initiator, not reused until that initiator's next shootdown) *before* the
    /// acknowledgement, with an acquire fence between them, and it cannot return to
    /// user mode, where the stale entry could be used, until the invalidation has
    /// run. Switch: `Counter::handler`.
    FreebsdX86CounterEarlyAck,
    /// Linux's `mmu_gather` frees page-table pages only after the TLB flush that
    /// covers them (`tlb_remove_table`, `tlb_finish_mmu`); a table freed and reused
    /// before that flush completes can still be walked through a CPU's paging-
    /// structure caches (or a lazy CPU's CR3) and its new contents used as
    /// translations.
    ///
    /// The fix cited: d86564a2f085, "mm/tlb, x86/mm: Support invalidating TLB caches
    /// for RCU_TABLE_FREE" (Peter Zijlstra, 2018-08-22, merged for v4.19, reported by
    /// Jann Horn): when `tlb_remove_table` could not allocate a batch, x86 freed the
    /// table right after the IPI that waits out lockless walkers, before any TLB
    /// invalidation; the fix flushes first (`tlb_table_invalidate`). Its series also
    /// has a6f572084fbe ("mm/tlb: Remove tlb_remove_table() non-concurrent
    /// condition"): the `mm_users < 2` shortcut freed tables at once, missing CPUs
    /// that hold the mm lazily.
    ///
    /// This is an ordering of the kernel around the policy: no policy has a switch
    /// for it ([`Bug::in_policy`] is false), and its entry's base only names the
    /// policy the checker's kernel runs with while it frees the table before
    /// calling the flush.
    LinuxTableFreeBeforeFlush,
    /// Linux commit fea4e317f9e7, "x86/mm: Eliminate window where TLB flushes may
    /// be inadvertently skipped" (Dave Hansen, 2025-05-08, v6.15-rc6, CVE-2025-37964;
    /// fixes 6db2526c1d69 of v6.14), with be88a1dd6112.
    ///
    /// The bug: with the lazy `mm_cpumask` of v6.14, a flush sends no IPI to a CPU
    /// whose `loaded_mm` is another mm (unless the mask is being trimmed). v6.14.0's
    /// `switch_mm_irqs_off` read `tlb_gen` and chose a PCID first and stored
    /// `LOADED_MM_SWITCHING` only after, and `should_flush_tlb` did not look for it.
    /// A CPU switching to an mm whose PCID slot still holds it could read the
    /// generation from before a flush, keep its PCID's old entries (`NOFLUSH`), and
    /// be skipped by that flush, which still saw the previous mm loaded there.
    ///
    /// The fix came in two commits. fea4e317f9e7 made `should_flush_tlb` send the
    /// flush to a CPU that shows `LOADED_MM_SWITCHING` (after an `smp_rmb()`); it
    /// moved no store. The store moved before the mask and generation work in
    /// be88a1dd6112, "x86/mm: Handle global ASID context switch and TLB flush"
    /// (Rik van Riel, the v6.15 INVLPGB series, for `finish_asid_transition`, on
    /// every x86 machine). Upstream the two met in v6.15-rc6. This entry is
    /// v6.14.0 to v6.14.6: neither half. Switch: `LinuxX86v615::switch_mm_irqs_off`
    /// and `should_flush_tlb`.
    LinuxX86Fea4e317f9e7,
    /// Linux commit 83b0177a6c48, "x86/mm: Fix SMP ordering in switch_mm_irqs_off()"
    /// (Peter Zijlstra and Ingo Molnar, 2025-10-13, v6.18-rc; reported by Stephen
    /// Dolan; fixes 209954cbc7d0 of v6.14).
    ///
    /// CVE-2025-40174 (affected v6.14 to v6.17.4; stable fix 0fe5e3f5fb75 in 6.17.5).
    ///
    /// The bug: since be88a1dd6112 (v6.15) the switch stores `LOADED_MM_SWITCHING`
    /// before it reads `tlb_gen`, but when the CPU's bit in the mask was already set (it ran
    /// the mm before) no locked operation followed the store: on x86 it can wait in
    /// the store buffer while the `tlb_gen` load completes. A flusher incrementing
    /// `tlb_gen` and then reading `loaded_mm` sees the previous mm, sends no IPI, and
    /// the switching CPU keeps its stale entries. Only a memory model with store
    /// buffers shows it.
    ///
    /// The fix: `smp_mb()` when the bit was already set. Switch:
    /// `LinuxX86v615::switch_mm_irqs_off`.
    LinuxX8683b0177a6c48,
    /// The stable backports of fea4e317f9e7 (v6.14.7 and later 6.14.y; 5.15.183,
    /// 6.1.139, 6.6.91, 6.12.29): `should_flush_tlb` sends the flush to a CPU that
    /// shows `LOADED_MM_SWITCHING`, but those trees never had be88a1dd6112, so the
    /// switch still stores it only after it has read `tlb_gen` and chosen a PCID.
    ///
    /// The bug: the half-fixed window is the PCID choice. A CPU switching to an mm
    /// its PCID slot still holds reads the generation from before a flush; the
    /// flusher bumps `tlb_gen` and reads that CPU's `loaded_mm`, which is still the
    /// previous mm (not yet `SWITCHING`), and sends no IPI; the CPU then writes CR3
    /// with `NOFLUSH` and keeps the old entries. Unlike 83b0177a6c48 this needs no
    /// store buffer: it happens under sequential consistency.
    ///
    /// The fix: Stephen Dolan, "x86/mm: Fix check/use ordering in
    /// switch_mm_irqs_off()" (stable-only, for 6.1.y, 6.6.y and 6.12.y, posted
    /// 2025-10-09 and 2025-10-29, acked by Dave Hansen): the store and its
    /// `barrier()` moved back above the mask and generation work, "the relevant
    /// code blocks are in the wrong order due to a bad rebase"; his reproducer
    /// (a copy-on-write write racing a reader thread that keeps switching away
    /// and back) failed on 6.1, 6.6 and 6.12 until then. No such fix for 6.14.y,
    /// whose lazy mask this policy models, is known. Switch:
    /// `LinuxX86v615::switch_mm_irqs_off`.
    LinuxX86StableCheckUseOrder,
    /// Ryan Roberts' `active_cpu` (RFC v1, "arm64: tlbflush: Don't broadcast if mm
    /// was only active on local cpu", 2025-08-29) deciding on the load of
    /// `mm->context.active_cpu` it makes *before* any barrier.
    ///
    /// The patch's comment names the hazard and the review (Catalin Marinas,
    /// 2025-09-02, with James Morse's litmus test) settled the barrier: the load
    /// that decides a local flush must not be reordered before the page-table store
    /// that made the flush necessary, so when the first, speculative load says
    /// "this CPU", `flush_tlb_user_pre` upgrades the stock `DSB ISHST` (which orders
    /// only stores) to `DSB ISH` and loads the word again. This variant keeps the
    /// stock `DSB ISHST` and decides on the first load: a CPU that switched to the
    /// mm meanwhile has stored its id (or `MULTIPLE`) and walks the tables after its
    /// own `DSB ISHST`, while the flusher's PTE store is still in its store buffer,
    /// so it caches the old translation and the flush stays local. A constructed
    /// variant of the store-buffering class the thread discusses, not a posted
    /// version; only a memory model with store buffers shows it.
    /// Switch: `ActiveCpu::flush_pre`.
    ActiveCpuEarlyRead,
    /// The same patch with the switching CPU's `DSB ISHST` left out: the store
    /// that records this CPU in `mm->context.active_cpu` (the patch is "careful
    /// to ensure that it gets updated *before* installing the mm's pgtables", v1
    /// commit message, 2025-08-29) is followed at once by the `TTBR0_EL1` write. That
    /// write is no barrier on arm64: the record may still sit in the store buffer
    /// while the walker fills this CPU's TLB from the new tables, and a
    /// flusher that has just cleared a PTE and completed it (`DSB ISH`) reads the
    /// old `active_cpu` ("only me") and flushes locally. The stale entry stays on
    /// the switching CPU. Only the arm memory mode shows it: under TSO the root
    /// write drains the buffer. A constructed variant, not a posted version.
    /// Switch: `ActiveCpu::on_switch_in`.
    ActiveCpuNoSwitchDsb,
    /// The `active_cpu` patch with the rollover reset of its v2 ("Reset
    /// active_cpu on ASID rollover", Linu Cherian, 2026-05) placed at the top of
    /// `new_context`, so that it also runs for an mm that keeps its number
    /// because a CPU was still running it at the rollover
    /// (`check_update_reserved_asid`). Catalin Marinas suggested the reset
    /// (2025-09-18: "we can reset active_cpu on the slow path if we got a new
    /// ASID. I think it's best to do it in new_context()"). Resetting for a
    /// fresh or reused number is sound: every CPU flushes locally before it
    /// runs the new generation. On the reserved path it is not: the CPU still
    /// running the mm keeps its entries under the same number, the next CPU to
    /// switch in records itself as the only one, and its flush stays local.
    /// v2's text was not available; this is a constructed variant of the
    /// placement the review implies, not a posted version. v1 (the base
    /// policy), whose word never goes back, is only slower for lacking the
    /// reset. Switch: `LinuxArm64::new_context`.
    ActiveCpuResetReserved,
    /// Linux commit 4b634918384c, "arm64/mm: Close theoretical race where stale
    /// TLB entry remains valid" (Ryan Roberts, posted 2025-05-30 as
    /// <20250530152445.2430295-1-ryan.roberts@arm.com>, taken by Will Deacon as a
    /// fix for v6.16). It fixes 43b3dfdd0455 ("arm64: support batched/deferred tlb
    /// shootdown during page reclamation/migration", v6.5).
    ///
    /// The bug: since v6.5 reclaim's `arch_tlbbatch_add_pending` issues `DSB
    /// ISHST; TLBI VALE1IS` with no `DSB ISH`, leaving the completion to
    /// `arch_tlbbatch_flush` on the same task. Another CPU that `munmap`s,
    /// `madvise`s or `mprotect`s the mm meanwhile calls `flush_tlb_batched_pending`,
    /// whose arm64 part was a lone `dsb(ish)`: a TLBI is complete only at a `DSB`
    /// of the CPU that issued it, so that barrier completes nothing of the
    /// reclaiming CPU's. A CPU that cached the page before the reclaim keeps using
    /// it after the `munmap` returns. Nadav Amit's reclaim-versus-mprotect race
    /// (3ea277194daa), back on arm64.
    ///
    /// The fix: `arch_flush_tlb_batched_pending` is `flush_tlb_mm(mm)`, a
    /// broadcast invalidation this CPU completes itself (as x86's has been since
    /// v4.13). Switch: `LinuxArm64::flush_batched_pending`.
    LinuxArm644b634918384c,
    /// Linux commit 3ea277194daa, "mm, mprotect: flush TLB if potentially racing
    /// with a parallel reclaim leaving stale TLB entries" (Mel Gorman, 2017, v4.13;
    /// race found by Nadav Amit).
    ///
    /// The bug: reclaim (`try_to_unmap_one` with `TTU_BATCH_FLUSH`) clears a PTE
    /// under the PTE lock, queues the flush and drops the lock, flushing only at
    /// `try_to_unmap_flush`. Before the fix, `munmap`, `madvise(MADV_DONTNEED)` and
    /// `mprotect` of the same mm meanwhile found the PTE gone, had nothing to flush,
    /// and returned while another CPU could still use the page through its TLB.
    ///
    /// The fix: reclaim marks the mm (`mm->tlb_flush_batched`) and those paths call
    /// `flush_tlb_batched_pending(mm)` under the PTE lock before they change a PTE,
    /// flushing the whole mm (x86's `flush_tlb_mm`) when it is marked.
    ///
    /// This is the core kernel's code, around the policy: no policy has a switch
    /// for it ([`Bug::in_policy`] is false); the checker's kernel then never calls
    /// [`crate::Policy::flush_batched_pending`]. Its base, `x86-linux-410`, is the
    /// last kernel the checker models before v4.13 (x86 was then the only
    /// architecture that batched reclaim's flushes).
    LinuxX863ea277194daa,
    /// Linux commit 3ef938c35035, "x86/mm: Fix flush_tlb_range() when used for
    /// zapping normal PMDs" (Jann Horn, January 2025, Cc stable, CVE-2025-22045;
    /// fixes 016c4d92cd16 of v4.20).
    ///
    /// The bug: khugepaged's `collapse_pte_mapped_thp` clears a PMD that points
    /// to a page table (`pmdp_collapse_flush`), flushes the range with
    /// `flush_tlb_range`, and frees the table. x86's `flush_tlb_range` passed
    /// `freed_tables = false` to `flush_tlb_mm_range`, so the flush skipped the
    /// CPUs that hold the mm lazily (`tlb_is_not_lazy`): such a CPU's CR3 still
    /// points at the mm, and its paging-structure caches can keep walking
    /// through the freed table after it has been reused.
    ///
    /// The fix: x86's `flush_tlb_range` passes `true`, as arm64's always
    /// behaved. This is the kernel's code around the policy: no policy has a
    /// switch for it ([`Bug::in_policy`] is false). The checker's whole-range
    /// unmap then stands for the collapse: the table unhooked, a flush of its
    /// range with `Policy::flush_range` (no tables freed) instead of
    /// `Policy::flush_mm`, the table freed.
    LinuxX863ef938c35035,
    /// Linux commit 5108c67c376b, "arm64: Execute DSB during thread switching
    /// for TLB/cache maintenance" (Catalin Marinas, 2013-04-24, v3.10).
    ///
    /// The bug: a `DSB` completes only the maintenance its own CPU issued, and
    /// with kernel preemption a thread can be preempted between a `TLBI ..IS`
    /// and the `DSB ISH` after it and resumed on another CPU. Its `DSB` there
    /// completes none of the `TLBI`s it issued before, and it goes on to free
    /// the page; the CPU it left completes them at its next barrier, if the
    /// switch to its next thread issues none.
    ///
    /// The fix: `__switch_to` issues a `DSB` (`dsb(ish)` since ee9e101c1147),
    /// so a CPU's pending TLB and cache maintenance completes before its
    /// thread can run anywhere else.
    /// Switch: kernel-side, the checker's `__switch_to`; no policy code.
    LinuxArm645108c67c376b,
    /// v4 of Rik van Riel's "AMD broadcast TLB invalidation" (2025-01-12),
    /// "x86/mm: do targeted broadcast flushing from tlbbatch code", before the
    /// v5 fix (2025-01-15: "fix a race between reclaim and ASID transition
    /// (Jann)"). The patch was never merged: Dave Hansen deferred it at v15
    /// (2025-03-04), and v6.15's reclaim flushes every non-global entry.
    ///
    /// The bug: `arch_tlbbatch_add_pending` of an mm with a global ASID issued
    /// only the `INVLPGB` of that ASID's PCID, neither bumping `tlb_gen` nor
    /// adding `mm_cpumask` to the batch. While the mm is in transition
    /// (`asid_transition`), a CPU may still run it on its old dynamic PCID,
    /// which the `INVLPGB` does not match; no IPI reaches it, and it keeps
    /// using the reclaimed page after `TLBSYNC`.
    ///
    /// The fix (v5; v11 to v15 as `if (mm_in_asid_transition(mm)) asid = 0;`):
    /// while the mm is in transition, also the generation bump and the mask, so
    /// that the IPI moves each straggler to the global ASID. Jann Horn's report
    /// was not found; the interleaving is read from the v4 and v5 code (CachyOS
    /// snapshots 12e516a3 and 0e7abfd9). Switch:
    /// `LinuxX86v615::targeted_add_pending`, on
    /// `LinuxX86v615::with_targeted_tlbbatch`.
    InvlpgbTlbbatchNoTransition,
    /// v1 of the same series ("[RFC PATCH 00/10]", December 2024): v2's change
    /// log (2024-12-22) reads "Fix bug in arch_tlbbatch_flush, where we need to
    /// do both the TLBSYNC, and flush the CPUs that are in the cpumask". v1's
    /// code was not found: its `arch_tlbbatch_flush` is read from that sentence
    /// as `TLBSYNC` when the batch used `INVLPGB`, else the IPI flush of
    /// `batch->cpumask`.
    ///
    /// The bug: a batch that both issued `INVLPGB`s and holds CPUs to
    /// interrupt runs only `TLBSYNC`: those CPUs get no IPI and keep the
    /// reclaimed page. In v1 such a batch needed two mms, one with a global
    /// ASID (its page invalidated by `INVLPGB`) and one without (its mask in
    /// the batch): v1's add-pending was v4's, with no transition check.
    ///
    /// What is modelled, a constructed combination: v1's flush on the v5
    /// add-pending, where one mm in its ASID transition makes a batch both.
    /// v1's add-pending is left out because it also has v4's race
    /// ([`Bug::InvlpgbTlbbatchNoTransition`]), which a check of the faithful
    /// v1 finds first, even with batches of two mms (`--menu reclaim2`).
    /// Switch: `LinuxX86v615::targeted_tlbbatch_flush`, on
    /// `LinuxX86v615::with_targeted_tlbbatch`.
    InvlpgbTlbbatchSyncOrIpi,
}

impl Bug {
    /// Every bug, in the order of [`ZOO`].
    pub const ALL: [Bug; 21] = [
        Bug::LinuxArm64A8ffaaa060b8,
        Bug::LinuxArm645e10f9887ed8,
        Bug::LinuxX868f1d56f64f8d,
        Bug::SkipbcastV1,
        Bug::SkipbcastNoBarrier,
        Bug::FreebsdArm64EpochWrap,
        Bug::FreebsdArm64R355427,
        Bug::FreebsdX86CounterEarlyAck,
        Bug::LinuxTableFreeBeforeFlush,
        Bug::LinuxX86Fea4e317f9e7,
        Bug::LinuxX8683b0177a6c48,
        Bug::LinuxX86StableCheckUseOrder,
        Bug::ActiveCpuEarlyRead,
        Bug::ActiveCpuNoSwitchDsb,
        Bug::ActiveCpuResetReserved,
        Bug::LinuxArm644b634918384c,
        Bug::LinuxX863ea277194daa,
        Bug::LinuxX863ef938c35035,
        Bug::LinuxArm645108c67c376b,
        Bug::InvlpgbTlbbatchNoTransition,
        Bug::InvlpgbTlbbatchSyncOrIpi,
    ];

    /// Returns the bug's registry entry.
    pub fn entry(self) -> &'static ZooEntry {
        match ZOO.iter().find(|e| e.bug == self) {
            Some(e) => e,
            None => unreachable!("every Bug has a ZOO entry (tested)"),
        }
    }

    /// Returns the bug's id, without the `zoo/` prefix.
    pub fn id(self) -> &'static str {
        self.entry().id
    }

    /// Returns whether the policy code has a switch for this bug. False only for
    /// the kernel-side bugs ([`Bug::LinuxTableFreeBeforeFlush`],
    /// [`Bug::LinuxX863ea277194daa`], [`Bug::LinuxX863ef938c35035`],
    /// [`Bug::LinuxArm645108c67c376b`]), which the kernel around the policy
    /// applies; no `with_bug` accepts them.
    pub const fn in_policy(self) -> bool {
        !matches!(
            self,
            Bug::LinuxTableFreeBeforeFlush
                | Bug::LinuxX863ea277194daa
                | Bug::LinuxX863ef938c35035
                | Bug::LinuxArm645108c67c376b
        )
    }
}

impl core::fmt::Display for Bug {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.id())
    }
}

/// One bug of the zoo, as `tlbkit list` and the checker see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZooEntry {
    /// The name after `zoo/`, e.g. `linux-arm64-a8ffaaa060b8`.
    pub id: &'static str,
    /// The switch.
    pub bug: Bug,
    /// The registry name of the policy the bug modifies (or, for a kernel-side
    /// bug, runs with), e.g. `arm64-linux`.
    pub base: &'static str,
    /// One line for `tlbkit list`.
    pub summary: &'static str,
    /// The commit or thread it comes from.
    pub source: &'static str,
}

/// Every bug of the zoo.
pub const ZOO: &[ZooEntry] = &[
    ZooEntry {
        id: "linux-arm64-a8ffaaa060b8",
        bug: Bug::LinuxArm64A8ffaaa060b8,
        base: "arm64-linux",
        summary: "ASID fast path replaces active_asids with an unconditional xchg, overwriting a rollover's 0: \
                  two mms share an ASID",
        source: "Linux a8ffaaa060b8 \"arm64: asid: Do not replace active_asids if already 0\" (Catalin Marinas, \
                 2017-12-27; found with TLA+)",
    },
    ZooEntry {
        id: "linux-arm64-5e10f9887ed8",
        bug: Bug::LinuxArm645e10f9887ed8,
        base: "arm64-linux",
        summary: "user TLBI reads the mm's ASID before DSB ISHST: a rollover's new ASID can cache the old PTE",
        source: "Linux 5e10f9887ed8 \"arm64: mm: Fix TLBI vs ASID rollover\" (Will Deacon, 2021-08-06)",
    },
    ZooEntry {
        id: "linux-x86-8f1d56f64f8d",
        bug: Bug::LinuxX868f1d56f64f8d,
        base: "x86-linux-pcid",
        summary: "flush_tlb_func takes a batched flush's tlb_gen of 0 for an old flush: reclaim's batch flushes \
                  nothing",
        source: "Linux 8f1d56f64f8d \"x86/mm/tlb: Ignore f->new_tlb_gen when zero\" (Nadav Amit, 2022-07-10; \
                 fixes aa44284960d5)",
    },
    ZooEntry {
        id: "arm64-skipbcast-v1",
        bug: Bug::SkipbcastV1,
        base: "arm64-linux-skipbcast",
        summary: "origin 001 as v1: a lazy CPU leaves the count but keeps the mm in TTBR0, so a local flush misses \
                  its speculative walks",
        source: "\"arm64: tlb: skip tlbi broadcast for single threaded TLB flushes\" v1 (Andrea Arcangeli, \
                 2020-02-03); Catalin Marinas's review, 2020-02-10",
    },
    ZooEntry {
        id: "arm64-skipbcast-no-barrier",
        bug: Bug::SkipbcastNoBarrier,
        base: "arm64-linux-skipbcast",
        summary: "origin 001 without smp_mb() between marking CPUs stale and re-reading nr_active_mm (store \
                  buffering)",
        source: "origin 001: \"arm64: tlb: skip tlbi broadcast\" v2 patch 3/3 (Andrea Arcangeli, 2020-02-23), \
                 tlb_flush_check",
    },
    ZooEntry {
        id: "freebsd-arm64-epoch-wrap",
        bug: Bug::FreebsdArm64EpochWrap,
        base: "arm64-freebsd-asid",
        summary: "epoch allocator with a 1-bit epoch: a pmap idle for two resets finds its stale cookie current \
                  (ASID ABA)",
        source: "FreeBSD r354286 / D21922 (Alan Cox, 2019): the wrap hazard named in review; pmap_reset_asid_set \
                 wraps at INT_MAX",
    },
    ZooEntry {
        id: "freebsd-arm64-r355427",
        bug: Bug::FreebsdArm64R355427,
        base: "arm64-freebsd-asid-fix-reserved-ttbr0",
        summary: "no DSB ISH when switching to the same pmap: a thread preempted between TLBI and DSB leaves its \
                  TLBI pending",
        source: "FreeBSD r355427 \"On a context switch, handle the possibility that the old thread was preempted \
                 after an ic or tlbi instruction\" (D22622), pmap_activate_int",
    },
    ZooEntry {
        id: "freebsd-x86-counter-early-ack",
        bug: Bug::FreebsdX86CounterEarlyAck,
        base: "x86-freebsd-counter",
        summary: "shared-counter shootdown whose handler increments smp_tlb_wait before it reads the request and \
                  invalidates",
        source: "FreeBSD 11.0 sys/x86/x86/mp_x86.c handlers, statements swapped (a constructed bug of a real \
                 class; contrast FreeBSD 13's invlop_handler)",
    },
    ZooEntry {
        id: "linux-table-free-before-flush",
        bug: Bug::LinuxTableFreeBeforeFlush,
        base: "x86-linux-pcid",
        summary: "kernel-side: a page-table page freed and reused before the flush that covers it (no policy \
                  switch)",
        source: "Linux d86564a2f085 \"mm/tlb, x86/mm: Support invalidating TLB caches for RCU_TABLE_FREE\" \
                 (Peter Zijlstra, 2018-08-22; reported by Jann Horn)",
    },
    ZooEntry {
        id: "linux-x86-fea4e317f9e7",
        bug: Bug::LinuxX86Fea4e317f9e7,
        base: "x86-linux-lazytrim",
        summary: "v6.14.0's lazy mm_cpumask: SWITCHING stored only after reading tlb_gen, and no flush looks \
                  for it",
        source: "Linux fea4e317f9e7 \"x86/mm: Eliminate window where TLB flushes may be inadvertently skipped\" \
                 (Dave Hansen, 2025-05-08; CVE-2025-37964) with be88a1dd6112 \"x86/mm: Handle global ASID context \
                 switch and TLB flush\" (Rik van Riel, v6.15), which moved the store",
    },
    ZooEntry {
        id: "linux-x86-83b0177a6c48",
        bug: Bug::LinuxX8683b0177a6c48,
        base: "x86-linux-lazytrim",
        summary: "lazy mm_cpumask without smp_mb() when the bit is set: SWITCHING sits in the store buffer",
        source: "Linux 83b0177a6c48 \"x86/mm: Fix SMP ordering in switch_mm_irqs_off()\" (Peter Zijlstra, Ingo \
                 Molnar, 2025-10-13; reported by Stephen Dolan; CVE-2025-40174)",
    },
    ZooEntry {
        id: "linux-x86-stable-check-use-order",
        bug: Bug::LinuxX86StableCheckUseOrder,
        base: "x86-linux-lazytrim",
        summary: "fea4e317f9e7 as stable took it (6.14.7+): flushes look for SWITCHING, stored after reading \
                  tlb_gen",
        source: "Stephen Dolan, \"x86/mm: Fix check/use ordering in switch_mm_irqs_off()\" (stable-only patch \
                 for 6.1.y/6.6.y/6.12.y, 2025-10-29, acked by Dave Hansen); none known for 6.14.y",
    },
    ZooEntry {
        id: "arm64-activecpu-early-read",
        bug: Bug::ActiveCpuEarlyRead,
        base: "arm64-linux-activecpu",
        summary: "active_cpu read before the PTE store completes (no DSB ISH, no re-load): a local flush misses \
                  a CPU switching in",
        source: "\"arm64: tlbflush: Don't broadcast if mm was only active on local cpu\" RFC v1 (Ryan Roberts, \
                 2025-08-29), flush_tlb_user_pre; Catalin Marinas's review, 2025-09-02 (a constructed variant)",
    },
    ZooEntry {
        id: "arm64-activecpu-no-switch-dsb",
        bug: Bug::ActiveCpuNoSwitchDsb,
        base: "arm64-linux-activecpu",
        summary: "no DSB ISHST between recording active_cpu and the TTBR0 write: the walk runs before the record \
                  is visible",
        source: "\"arm64: tlbflush: Don't broadcast if mm was only active on local cpu\" (Ryan Roberts; v2 by Linu \
                 Cherian, 2026-05-23), the switch side (a constructed variant)",
    },
    ZooEntry {
        id: "arm64-activecpu-reset-reserved",
        bug: Bug::ActiveCpuResetReserved,
        base: "arm64-linux-activecpu",
        summary: "active_cpu reset at every rollover allocation, reserved ASIDs too: a CPU still running the mm \
                  is forgotten",
        source: "\"arm64: tlbflush: Don't broadcast if mm was only active on local cpu\" v2 (Linu Cherian, \
                 2026-05-23) with \"Reset active_cpu on ASID rollover\"; Catalin Marinas's review, 2025-09-18 (a \
                 constructed placement)",
    },
    ZooEntry {
        id: "linux-arm64-4b634918384c",
        bug: Bug::LinuxArm644b634918384c,
        base: "arm64-linux",
        summary: "flush_tlb_batched_pending's lone dsb(ish) does not complete reclaim's TLBIs on another CPU: \
                  stale after munmap",
        source: "Linux 4b634918384c \"arm64/mm: Close theoretical race where stale TLB entry remains valid\" (Ryan \
                 Roberts, 2025-05-30, v6.16; fixes 43b3dfdd0455 of v6.5)",
    },
    ZooEntry {
        id: "linux-x86-3ea277194daa",
        bug: Bug::LinuxX863ea277194daa,
        base: "x86-linux-410",
        summary: "kernel-side: munmap of a page reclaim cleared finds nothing to flush and returns before reclaim's \
                  batched flush",
        source: "Linux 3ea277194daa \"mm, mprotect: flush TLB if potentially racing with a parallel reclaim leaving \
                 stale TLB entries\" (Mel Gorman, 2017, v4.13; race found by Nadav Amit)",
    },
    ZooEntry {
        id: "linux-x86-3ef938c35035",
        bug: Bug::LinuxX863ef938c35035,
        base: "x86-linux-pcid",
        summary: "kernel-side: khugepaged's collapse frees a page table after a flush_tlb_range that skips lazy CPUs",
        source: "Linux 3ef938c35035 \"x86/mm: Fix flush_tlb_range() when used for zapping normal PMDs\" (Jann Horn, \
                 2025-01-03; CVE-2025-22045; fixes 016c4d92cd16)",
    },
    ZooEntry {
        id: "linux-arm64-5108c67c376b",
        bug: Bug::LinuxArm645108c67c376b,
        base: "arm64-linux",
        summary: "kernel-side: __switch_to has no DSB: a flush preempted before its DSB ISH leaves its TLBI incomplete",
        source: "Linux 5108c67c376b \"arm64: Execute DSB during thread switching for TLB/cache maintenance\" \
                 (Catalin Marinas, 2013-04-24, v3.10)",
    },
    ZooEntry {
        id: "linux-x86-invlpgb-tlbbatch-v4",
        bug: Bug::InvlpgbTlbbatchNoTransition,
        base: "x86-linux-invlpgb-tlbbatch",
        summary: "reclaim's INVLPGB of a global-ASID mm in transition, no IPI: a CPU still on its dynamic PCID \
                  keeps the page",
        source: "\"x86/mm: do targeted broadcast flushing from tlbbatch code\" v4 (Rik van Riel, 2025-01-12; never \
                 merged), fixed in v5 (2025-01-15): \"fix a race between reclaim and ASID transition (Jann)\"",
    },
    ZooEntry {
        id: "linux-x86-invlpgb-tlbbatch-v1",
        bug: Bug::InvlpgbTlbbatchSyncOrIpi,
        base: "x86-linux-invlpgb-tlbbatch",
        summary: "arch_tlbbatch_flush runs TLBSYNC or the IPIs, not both: a batch that needs both leaves its CPUs \
                  uninterrupted",
        source: "AMD broadcast TLB invalidation RFC v1 (Rik van Riel, December 2024; never merged), fixed in v2 \
                 (2024-12-22) per its change log; v1's code not found: its flush read from that log, put on v5's \
                 add-pending (a constructed combination)",
    },
];

/// Returns the zoo entry called `id` (without the `zoo/` prefix).
pub fn entry(id: &str) -> Option<&'static ZooEntry> {
    ZOO.iter().find(|e| e.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bug_has_exactly_one_entry_in_order() {
        let bugs: std::vec::Vec<Bug> = ZOO.iter().map(|e| e.bug).collect();
        assert_eq!(bugs, Bug::ALL);
    }

    #[test]
    fn ids_are_unique_and_found_without_the_zoo_prefix() {
        for (i, e) in ZOO.iter().enumerate() {
            assert!(!e.id.starts_with("zoo/"), "{}", e.id);
            assert!(ZOO[..i].iter().all(|o| o.id != e.id), "duplicate id {}", e.id);
            assert_eq!(entry(e.id), Some(e));
            assert_eq!(e.bug.id(), e.id);
            assert_eq!(std::format!("{}", e.bug), e.id);
        }
        assert_eq!(entry("zoo/linux-arm64-a8ffaaa060b8"), None);
        assert_eq!(entry("linux-arm64-a8ffaaa060b8").map(|e| e.base), Some("arm64-linux"));
    }

    #[test]
    fn only_the_kernel_side_bugs_live_outside_the_policies() {
        let outside: std::vec::Vec<Bug> = Bug::ALL.into_iter().filter(|b| !b.in_policy()).collect();
        assert_eq!(
            outside,
            [
                Bug::LinuxTableFreeBeforeFlush,
                Bug::LinuxX863ea277194daa,
                Bug::LinuxX863ef938c35035,
                Bug::LinuxArm645108c67c376b
            ]
        );
    }

    #[test]
    fn summaries_fit_one_line() {
        for e in ZOO {
            assert!(!e.summary.contains('\n') && !e.source.contains('\n'), "{}", e.id);
            assert!(e.summary.len() <= 120, "{}: {} characters", e.id, e.summary.len());
        }
    }
}
