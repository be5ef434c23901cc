//! The checker: runs the *same* policy code the simulator runs on a small
//! machine, under every interleaving (exhaustive mode) or under many random ones
//! (random and PCT modes), and judges every state with the oracle.
//!
//! # Ground rules: what the model is
//! - **Who runs.** Each CPU is a coroutine that runs kernel operations, each
//!   calling the policy as a kernel does, until its share of `--ops` is spent:
//!   a context switch to a thread of a process or to the idle thread (a kernel
//!   thread, which keeps the last address space lazily); `munmap` of a page;
//!   `madvise(MADV_DONTNEED)` of a page (Linux policies); a fault mapping it
//!   back; `munmap` of the whole range, freeing its page-table page; the exit
//!   of a process's last thread (teardown and `flush_mm`, then a switch to
//!   idle; offered only while no other CPU runs a thread of the process or is
//!   still switching one out, whose thread is alive until its switch is done;
//!   the address space is released when no CPU's root points at it and no CPU
//!   holds it as its lazy `active_mm`); a fork into a free slot;
//!   and reclaim of a page of any process (running elsewhere or nowhere) by a
//!   kernel thread, offered to idle CPUs: on Linux policies `kswapd` with
//!   reclaim's deferred flush (`Policy::tlbbatch_add_pending` with the clear,
//!   `Policy::flush_batch` later), on FreeBSD ones the page
//!   daemon's `pmap_remove_all`, that pmap's per-page invalidation
//!   (`Policy::flush_page`) under its lock ([`shape::Reclaim`]). While a Linux
//!   reclaim's flush of an address space is deferred, a CPU running it is
//!   offered only a `munmap` of each of its pages (one whose PTE is already
//!   gone clears nothing, but returns relying on the kernel having completed
//!   the reclaim's flush first; see below), a switch or going idle.
//!   Two more kinds, offered on Linux policies only where `--menu` names
//!   them: `cow`, a copy-on-write fault on a mapped page of the running
//!   process (`mmap_lock` read side), and `migrate`, `kcompactd` on an idle
//!   CPU moving a mapped page of any process (no `mmap_lock`); each allocates
//!   a frame, clears the PTE under the PTE lock (held until the new PTE is
//!   set), calls `Policy::flush_page`, takes the flush as done when it
//!   returns (LATR's lazy tickets included, see `ops::replace_page`), points
//!   the PTE at the new frame and frees the old one at once.
//!   Which operation a CPU starts next is a choice the search explores like any
//!   other (`--menu` restricts the kinds). Each address space maps `--pages`
//!   pages (default 2) through one page-table page.
//! - **Locking, per kernel.** Each address space has a sleeping lock. On Linux
//!   policies it is the `mmap_lock`, a reader-writer semaphore, taken as Linux
//!   takes it: a fault and `madvise(MADV_DONTNEED)` take the read side;
//!   `munmap` takes the write side to remove the VMA, then downgrades to the
//!   read side for the zap, the page-table free and the flush (since v4.20,
//!   dd2283f2605e; v4.10's, for `x86-linux-410` and LATR, keeps the write side
//!   throughout: `shape::Shape::munmap_downgrades`), and no fault maps a page
//!   whose VMA it removed until it is done; exit takes the write side. The PTE lock is held only for the step
//!   that changes the PTE (reclaim's aside, below; the flush of a zap runs after `pte_unmap_unlock`, in
//!   `tlb_finish_mmu`), and under TSO another CPU takes it only once the PTE
//!   clear buffered before its release is visible. So two flushes of one
//!   address space run at once, for different pages, which is what x86's
//!   `tlb_gen` handles. Reclaim takes no `mmap_lock` (`try_to_unmap_one` with
//!   `TTU_BATCH_FLUSH`): under the PTE lock, held across these steps
//!   (`kernel::Machine::hold_ptl`; every other holder takes it for one step),
//!   it clears the PTE, calls `Policy::tlbbatch_add_pending` and marks the mm (`mm->tlb_flush_batched`;
//!   the mark is set in the clear's step, which no other holder of the PTE lock
//!   can tell from the kernel's order), and calls `Policy::flush_batch`
//!   (`try_to_unmap_flush`) only after dropping it, so other operations of the
//!   address space may run in between (here only the `munmap`s above start
//!   there; an operation already running goes on). A `munmap`, `madvise` or whole-range
//!   `munmap` that takes the PTE lock of a marked mm first calls
//!   `Policy::flush_batched_pending` (`flush_tlb_batched_pending`, since v4.13,
//!   3ea277194daa), and clears the mark unless a reclaim set it again
//!   meanwhile (the checker also clears it when the last reclaim of the mm
//!   returns from its flush, where Linux leaves the next `munmap` a redundant
//!   whole-mm flush); when it returns, the reclaim obligations of its pages that were
//!   open when it took the lock are judged as a flush's (`no_stale_held`, and
//!   `no_stale_use` from then on), though they stay open until the reclaim's own
//!   flush returns and frees the frame. An exit's zap, a fault and the
//!   contiguous block's operations do not call it (nothing runs an exiting
//!   process; a fault changes no valid PTE). The slot of an exited process is
//!   released only after a reclaim's flush of it returns (the policy's
//!   `flush_batch` is handed the mm, where the kernel's batch names none).
//!   On FreeBSD policies it is the pmap's `PMAP_LOCK`, a mutex: every
//!   page-table change (`pmap_remove`, `pmap_enter`, the page daemon's
//!   `pmap_remove_all`) and its shootdown happen before `PMAP_UNLOCK`, so
//!   flushes of one pmap never overlap; FreeBSD's `MADV_DONTNEED` removes no
//!   mapping (`pmap_advise` clears the accessed and modified bits), so it is
//!   not offered there. The contiguous block's operations
//!   (`--teardown`) take the write side across their change and flush.
//! - **Contiguous PTEs** (`--teardown`, arm64 Linux policies): every address
//!   space also maps a 64 KB file folio through one block of 16 contiguous PTEs,
//!   changed only by the policy crate's contpte code (the simulator's): user
//!   writes recorded by the hardware in any one valid PTE of the block, `munmap`
//!   and faults of single pages (unfold and refold, a preemption point at every
//!   PTE access), `kswapd`'s aging of the block, and the exit teardown with the
//!   chosen strategy. The `block` module gives the details.
//! - **What is atomic.** One *step* of a CPU runs from one preemption point to
//!   the next, so everything between two points is atomic. The points are:
//!   every operation on a facade atomic (`tlbkit_policy::sync`: load, store,
//!   read-modify-write, fence), every [`tlbkit_policy::Hw`] call that acts on the
//!   machine (root writes, TLB invalidations, barriers, IPIs), and the start of
//!   every kernel operation. A page-table change by the kernel is one step with
//!   the operation's start. [`tlbkit_policy::Hw::shared`] and `spin_on` only
//!   account costs and are not points. A spin loop (`sync::spin_loop`) blocks its
//!   CPU until some store becomes visible, so waiting is not explored as
//!   endless polling.
//! - **A thread that moves.** A kernel operation runs on the CPU that chose
//!   it, with two exceptions, each a choice of the search
//!   ([`search::ChoiceKind::Move`]). In a flush the kernel runs unpinned
//!   (FreeBSD arm64's `pmap_invalidate_*`, [`tlbkit_policy::Policy::flushes_pinned`]
//!   says where not; Linux arm64 only without `__switch_to`'s `DSB`, a zoo
//!   entry), the thread may be preempted just before a `DSB ISH` that would
//!   complete invalidations and run it on another CPU: that barrier completes
//!   none of its CPU's invalidations, and after the flush the CPU switches to
//!   another thread of the process it runs through the policy's switch (`ops`,
//!   `flush_preemptibly`). And a reclaiming thread whose CPU holds `INVLPGB`s
//!   it has not waited for (x86's posted targeted batch) may be preempted
//!   before `arch_tlbbatch_flush` pins it: the CPU switches first, then the
//!   flush runs for the other CPU, its `TLBSYNC` completing none of them
//!   (`ops`, `flush_batch_preemptibly`).
//! - **Memory.** Sequentially consistent, except that under `--memory tso` (the
//!   default) each CPU's plain stores (`store` with any ordering but `SeqCst`)
//!   wait in a FIFO store buffer, visible to that CPU's own loads at once and to
//!   the others only when drained: draining one store is a step of its own, at
//!   any moment, and a CPU drains its buffer itself at any read-modify-write, any
//!   `SeqCst` store or fence, any barrier but `ISB`, any IPI it sends (the APIC
//!   write serialises) and any root write (x86's CR3 write serialises; arm64's
//!   context switch issues `DSB ISH` in `__switch_to`, taken to come with it). On
//!   arm64 the kernel's PTE clear (a relaxed exchange) is a buffered store too, and
//!   page-table walks read memory, not the buffer. That is x86-TSO; it lets a store
//!   pass a later load, which is what store-buffering bugs (a missing `smp_mb()`,
//!   a TLBI operand read before the `DSB` that publishes the PTE) need.
//!   `--memory sc` turns buffers off; it is the default, as the oracle's model
//!   (the guide, "The oracle's properties") is sequentially consistent, but for the zoo entries whose bugs need TSO.
//!   `--memory arm` (arm64 policies) makes the buffers as weak as Armv8 lets
//!   one CPU's stores be (`exec::buffer`): a store may leave before older ones
//!   but for an older store to its location and, for a store-release (`Release`
//!   or `SeqCst`: `STLR`, buffered too), every older store; a load-acquire
//!   (`LDAR`) waits for the store-releases before it; a read-modify-write
//!   without release semantics waits only for stores to its own location; a
//!   `Release` fence is a `DMB ISH`. It adds arm64's rules around TLB
//!   maintenance ([`shape::Memory::Arm`]): a root write drains nothing (the
//!   `DSB ISH` at the end of a Linux switch does, `ops::switch_to`), and a `DSB`
//!   that completes invalidations may do so before its stores drain, so a `TLBI`
//!   without `DSB ISHST` after its PTE store lets a walk refill. And its plain
//!   loads may be satisfied out of order (`exec::stale`): a load may read a
//!   value another CPU's store has overwritten since the CPU's last ordering
//!   point (a barrier that orders loads, a load-acquire, an acquiring
//!   read-modify-write, a spin's wait, an interrupt, the start of its
//!   operation), no older than what it read of that location before, and
//!   the search chooses which ([`search::ChoiceKind::Read`]). It is still
//!   stronger than arm64 in that an ordering point binds the CPU to the
//!   latest values (not only to what its earlier loads read), no store passes
//!   an earlier load, at most two overwritten values of a location stay
//!   readable, and a barrier drains the whole buffer where it stands; the
//!   litmus chapter of the guide lists what that hides.
//! - **TLB fills and invalidations are their own events.** After every step the
//!   hardware fills every CPU's TLB with every translation reachable from its
//!   root under the tag it runs with, and its walk cache with a pointer to the
//!   page-table page. Filling everything at every moment covers every
//!   speculative fill a real CPU could make: TLBs here are unbounded (no
//!   eviction), policies cannot observe them, and an entry only ever does harm by
//!   being present, so any execution with fewer fills holds a subset of these
//!   entries at every step. An invalidation takes effect when it *completes*,
//!   on the issuing CPU or (broadcast) on every CPU: x86's `INVLPG`, `INVPCID`
//!   and CR3 write when issued; arm64's `TLBI` (local or broadcast) at the
//!   issuing CPU's next `DSB` (`DSB ISH` for a broadcast; not `DSB ISHST`,
//!   `ISB` or `DMB`), or the end of a Linux context switch (`__switch_to`'s
//!   `dsb(ish)`); x86's `INVLPGB` at the issuing CPU's next `TLBSYNC`. Until
//!   then it is pending on that CPU ([`kernel::Pending`], part of the state),
//!   and every TLB it covers may still use and refill what it removes; so an
//!   entry refilled from a PTE that is still valid when the invalidation
//!   completes survives it. A root write takes effect for the writer's fills
//!   at once on x86 (a CR3 write serialises). On arm64 the CPU's walks may go
//!   on using the root and ASID it wrote over until its next context
//!   synchronisation (`ISB`, taking an interrupt, the exception return to
//!   user space; `kernel::Machine::synchronise`): until then the fills come
//!   from the old roots as well as the new one, and a walk cached under an
//!   old tag still counts against a freed page-table page (`no_stale_held`).
//!   Several writes in one window (v5.8+'s `cpu_do_switch_mm`: the reserved
//!   `TTBR0`, `TTBR1` with the ASID, then `TTBR0`) take effect in program
//!   order, each pair of root and tag usable until the `ISB`. A policy that
//!   writes and synchronises in one step (every Rust policy here) has states
//!   as before; one that leaves the `ISB` out is found (`tests/isb.rs`).
//!   Invalidation by ASID or
//!   of everything, and a root write without no-flush, drop walk-cache entries
//!   too; invalidation by address drops those of its ASID on x86 (`INVLPG` and
//!   `INVPCID` by address invalidate every paging-structure-cache entry of the
//!   PCID, Intel SDM vol. 3A, 4.10.4.1) and is taken to be the leaf-only form
//!   on arm64 (`TLBI VALE1`).
//! - **Interrupts.** An IPI is taken at the target's next step while its
//!   interrupts are on: not inside a context switch, not while it holds a
//!   [`tlbkit_policy::sync::SpinLock`] (both kernels' spin locks disable
//!   interrupts), not inside another handler. A CPU waiting for its synchronous
//!   IPI, idle, or spinning with interrupts on takes interrupts meanwhile.
//!   A sender of asynchronous IPIs does not wait for its handlers: it returns
//!   when its protocol stops waiting, as the kernel's initiator does, and its
//!   caller goes on at once (the oracle's judgement, freeing frames and
//!   page-table pages, the next request, which may overwrite one a late target
//!   has not read yet). Its handlers, pending or running, read the request where
//!   the kernel keeps it (FreeBSD's `smp_tlb_*` globals under `smp_ipi_mtx`, or
//!   the initiator's per-CPU `pc_smp_tlb_*`), never a copy on the initiator's
//!   stack: each handler is moved into the execution's arena and borrows only the
//!   policy's shared state (the contract of
//!   [`tlbkit_policy::Hw::send_ipi_async`]). A synchronous sender (Linux's
//!   `smp_call_function_many_cond` with `wait`) waits for every handler, as the
//!   kernel does, so its handlers may borrow its frames.
//!
//! # The properties
//! The simulator's oracle (`tlbkit_sim::oracle`), on this machine: `no_stale_use` and `no_asid_alias`
//! for every CPU in user mode after every step (anything it holds under the tag
//! it runs with, it may use); `no_stale_held` when a flush returns (the
//! initiator's protocol stopped waiting), for every CPU that runs that process (not lazily, not mid-switch), and, when the flush
//! was for a freed page-table page, for every CPU (lazy ones included) that
//! still caches a walk through it under the tag it runs with, unless it is in
//! the middle of a context switch with interrupts off (Linux frees page-table
//! pages only after every CPU has had interrupts on again,
//! `MMU_GATHER_RCU_TABLE_FREE`); a CPU inside an interrupt handler at that
//! moment is judged for that flush when its handler returns instead (it cannot
//! use a user translation before: what lets FreeBSD's `invlop_handler`
//! acknowledge before it invalidates), while a target whose IPI is still pending
//! is judged at once; `no_reuse_while_mapped` whenever a frame is handed out
//! (frames and page-table pages are freed as soon as the flush that covers them
//! returns). `no_stale_use` does not look at a CPU inside an interrupt handler
//! (it runs the kernel). With a contiguous block, `no_lost_dirty` (judged on the folio)
//! and `no_ungathered_dirty` (the per-PTE contract) for the PTE values the arch
//! code returns from each operation's clears, `no_lost_dirty` after every
//! operation too, and `no_tlb_conflict` after every step and every PTE access
//! (the `block` module). Plus
//! `no_deadlock` (no CPU can step but one waits), `no_livelock` (an execution
//! longer than [`exec::MAX_STEPS`] steps) and
//! `no_policy_panic` (a policy assertion failed).
//!
//! # How exhaustive mode finishes
//! Depth-first search over every choice, pruning at any state seen before
//! (a 128-bit XXH3 hash of the state's bytes, taken only past the prefix an
//! execution replays; the machine's part by its own 128-bit XXH3 hash, the
//! policy's memory by a 128-bit sum kept at each store). The visited set
//! keeps 60 to 72 bits of it by the check's CPUs (`search/table.rs`), and a
//! collision there could hide a state, with odds of about n²/2^(b+1) for n
//! states of b bits, which the report prints. Each CPU's history (the
//! events of its operation so far, standing for where its code is) stays a
//! 64-bit mix: every event's mix is a bijection of the history and of the
//! event, so two histories of one CPU that differ in one event, at the
//! same place, never agree (any other two with odds of about 2⁻⁶⁴), and
//! they are compared only between states alike in everything else. A
//! replayed step is not judged again: the execution that first took it
//! judged the same state after it.
//!
//! **Checkpoints** ([`exec::Checkpoints`]; [`search::with_checkpoints`]
//! turns them off). An execution does not replay its prefix from the start:
//! a worker keeps its last execution alive (the CPUs' coroutines on stacks it
//! owns, the policy in its arena) and saves, at each scheduling point where
//! the search may come back, the arena's bytes, each CPU's stack from the
//! stack pointer it is suspended at, the coroutine handles and the state's own bytes
//! (everything the state owns lies in the arena, which recycles freed
//! blocks once the policy is built, so the arena stays a few kilobytes).
//! The next execution restores the deepest checkpoint on the path it shares
//! with the last one and goes on from there, replaying about one step instead
//! of forty. A checkpoint stands for every execution that made its choices
//! (an execution is a function of its choices, which replaying assumed
//! already), so restoring one is the same as replaying them: the search runs
//! the same executions and reaches the same states (the tests compare the two
//! for every policy). What else it assumes, and why it holds, is in
//! [`exec::checkpoint`].
//!
//! By default one worker
//! thread per core searches, sharing the visited set
//! ([`search::exhaustive_parallel`]); the verdict and any counterexample do
//! not depend on the number of workers (nor do the states, without local
//! steps; see below).
//!
//! **Partial-order reduction** (sleep sets with state caching, Godefroid 1996;
//! [`search::with_reduction`] turns it off). Each new step reports its
//! footprint ([`search::Foot`]): the policy fields it read and wrote, and whether
//! it was *global*: it drained a store buffer, chose an operation, waited on
//! no field, or changed the machine or another CPU's execution state, which the
//! engine checks by hashing all of those before and after the step. Two steps
//! of different CPUs that are not global and touch no field one of them writes
//! are independent: they commute (the state after both is the same in either
//! order, since everything else a step changes is its own CPU's locals) and
//! neither enables or disables the other. Under `--memory arm` an ordering
//! point reads every field (which overwritten values its CPU may still read
//! depends on every other CPU's stores, and on nothing else), and a load's
//! choice of value makes its step one transition per option: the step runs
//! once per option (the later ones as replays, which report their
//! footprints too) and its footprint is all of theirs together, kept by the
//! worker that made the choice (a parallel search never gives a load's
//! options away). A step explored from a state, or
//! asleep there, stays asleep after an independent step and is not explored
//! again from there; the visited set keeps, per state, the intersection of the
//! sleep sets it was reached with, and a state reached again with a transition
//! awake that every earlier visit left asleep is explored again for it. Sleep
//! sets alone skip transitions, not states: the search reaches exactly the
//! states it reaches without them, which the tests check
//! (`crates/check/tests/reduction.rs`). With more than one worker the
//! executions then depend on the workers' order (without the reduction they do
//! not: every state is expanded once, by the worker that visits it first).
//!
//! **Local steps explored alone** (persistent sets of one step, Godefroid
//! 1996, ch. 4; [`search::with_local_steps`] turns them off). A policy may
//! declare who touches a field ([`tlbkit_policy::Owner`], in
//! [`tlbkit_policy::Policy::name_fields`]): a per-CPU variable only its CPU
//! writes (others may read it, or not), or data only the holder of a spin lock
//! touches (every field named inside [`tlbkit_policy::sync::SpinLock::name_inner`]).
//! A CPU's next step is *local* when it is paused before an access no other
//! CPU can race with (its own field, only read if others read it; data under
//! a lock it holds), with interrupts off (so no handler can run first on it)
//! and its store buffer empty. Such a step commutes with every step any other
//! CPU can take from then on and enables or disables none: the others never
//! write what it reads nor touch what it writes, and it changes nothing else
//! they see. So from a state where some CPU's next step is local, the search
//! explores that step alone (the lowest such CPU's), and does not look the
//! state up or count it: every execution of the full search is equivalent to
//! one that takes each local step as soon as it is enabled, reaching the
//! same machine at every step the oracle judges (a local step changes only
//! its CPU's locals and the fields it owns, which no property reads).
//! Cycles of local steps cannot hide the others (the ignoring problem): a
//! local step extends its CPU's history, and a spin wait, the only step that
//! folds a history back, is never local. What is assumed is checked:
//! - every access of every execution checks the declarations
//!   ([`exec`]: an access against them is a `no_policy_panic` violation with
//!   the field's name and what was declared), so a wrong declaration is
//!   reported, never trusted; the first access that breaks one is reached by
//!   the reduced search, since every step before it respects them;
//! - a step found local before it ran is checked after it ran: if its
//!   footprint was global or touched another field (the code between the
//!   access and the next pause did more), every option of that state is
//!   explored after all.
//!
//! With sleep sets on as well, which states are left out depends on the
//! order of the search, so with more than one worker the states counted may
//! differ from run to run (one worker fixes them); the verdict does not. The
//! tests compare verdicts with the two on and off for every policy, zoo
//! entries, two pages under TSO and several workers
//! (`crates/check/tests/local.rs`). At the standard bounds `x86-linux-invlpgb`
//! counted 46,254,911 states instead of 180,575,872 when they came in
//! (34,270,109 with them later, after other changes).
//!
//! A state is the machine's ground truth (page tables, TLBs,
//! walk caches, open obligations as a set, discharged translations), every
//! policy atomic's value (the arena puts the policy at the same address in every
//! execution; the hash takes them as an XOR, kept at every store, of a mix of
//! each field's offset with its value before and after, which telescopes to a
//! function of the values alone, whichever fields were touched and in whatever
//! order; builds with debug assertions check it against the fields at every
//! hash), the plain data the policy's spin locks protect
//! ([`tlbkit_policy::Policy::hash_locked`]: critical sections that ran in
//! either order can leave every atomic alike and that data different), the
//! store buffers, and each CPU's *history*: every value it
//! read, every operation it chose and every event it caused since the start of
//! its current kernel operation, with what a spin loop it enters next waits
//! for: the fields it read since its last spin, each once, and whether a
//! store to each became visible since (a spin wakes on any; how many, or
//! which later read saw which, decides nothing). A CPU's locals are a
//! function of its history, so two executions with equal states have equal
//! futures. Histories restart at
//! each operation (a CPU has no locals between operations), return to their
//! value before an interrupt when the handler returns, and a spin loop's
//! iterations that end in a wait fold into one. Processes that no CPU has
//! run yet are alike, so a switch is offered to only the lowest of them.
//!
//! Frames and process uids are hashed up to a renaming (data symmetry): each
//! is named by where it first appears (the slots' tables and pages in slot
//! order, then the free list in its order, then the rest), so two machines that
//! differ only in which frame number or uid each use got are one state. That is
//! sound because both are labels nothing that runs can tell apart: the kernel
//! and the oracle compare them only for equality, a new uid is always a fresh
//! one, the free list's order (which decides the next frame handed out) is
//! kept, no policy sees either (the contiguous block's page-cache frames, which
//! a policy's PTE values name, are never renamed), and no history, store
//! buffer or pending interrupt holds one. PTE versions are not renamed: a
//! store buffer holds the version its clear removes. Renaming merges states,
//! never splits one, so the search reaches no more states than without it and
//! the same verdicts, which `crates/check/tests/renaming.rs` checks for every
//! policy, zoo entries, two pages under TSO and several workers (at the
//! standard bounds `arm64-linux` reaches 11,064,778 states instead of
//! 14,066,768).
//! Address spaces and CPUs are not permuted (symmetry reduction proper).
//! Renumbering address-space slots was built and measured (branch
//! `attempt/slot-symmetry`): it merged 0.25% of `arm64-linux`'s states at five
//! operations, because this kernel numbers slots canonically already (a
//! switch goes only to the lowest slot no CPU has run, and ASIDs are handed
//! out in order of first use), so it is not in the checker. What is left of
//! the symmetry needs CPUs permuted too, and that needs every per-CPU datum
//! in the state as a relabelling can reach it: a CPU's history is a running
//! hash, which a permutation cannot relabel, and the data under a policy's
//! spin lock (Linux arm64's `reserved_asids` per CPU) is fed to the hash by
//! the policy, in its own order.
//!
//! # What this does not cover
//! - Weak memory beyond `--memory arm`: arm64 may also let a store pass an
//!   earlier load (load buffering; the policies' stores after a load are
//!   control-dependent on it, which forbids it), and lets a load after an
//!   ordering point read values overwritten after the CPU's earlier reads but
//!   before the barrier (here it reads nothing overwritten before the
//!   barrier); loads are taken to carry no address dependency on each other
//!   (a policy orders a load whose address comes from another with an
//!   acquire). Of three or more buffered stores of one CPU that other CPUs
//!   are about to read, only the oldest and the newest are offered to leave
//!   first; of three or more overwritten values of a location, the two
//!   newest stay readable.
//! - The swap cache: a fault after a reclaim maps a fresh frame, where Linux may
//!   map the reclaimed folio again, and a stale entry of a clean page that a CPU
//!   keeps until the reclaim's flush is not judged meanwhile (Linux relies on
//!   it being clean: a write through it must walk the page tables to set the
//!   dirty bit and faults). Only a `munmap` or `madvise` judges it early.
//! - A reclaim's deferred flush overlapping a fault, `madvise`, fork, exit or
//!   whole-range `munmap` that starts after its clear, and the whole-mm flush a
//!   `munmap` makes when the `tlb_flush_batched` mark outlives every reclaim's
//!   flush: bounds that keep the standard bounds' cost (up to 7.3 times the
//!   states with both; both were searched at the standard bounds for every
//!   Linux policy, complete with no violation,
//!   `bench/2026-11-25-check-reclaim-unlocked.md`).
//! - The interrupts a kernel disables around a flush's local part (x86
//!   `flush_tlb_mm_range` runs its own `flush_tlb_func` with interrupts off): here
//!   another CPU's flush IPI may be taken in the middle of it, which can only
//!   lower the generation it records (an extra flush later, never a missed one).
//! - The contiguous block's operations under Linux's real locking: they hold the
//!   write side throughout (stronger than the kernel: aging runs under no
//!   `mmap_lock` there, and a `munmap` downgrades).
//! - Walk caches, TLB capacity and eviction, and in-flight walks after a root
//!   write. (An invalidation that completes on some CPUs before others needs
//!   nothing more: each TLB then holds a subset of what it holds when the
//!   invalidation completes everywhere at its barrier, as it does here.)
//! - Speculative walks through a stale walk-cache entry into a page-table page
//!   freed and reused while a target is still inside its handler (the handler
//!   exemption above judges the walk only when the handler returns): fills here
//!   come from live page tables only.
//! - For the contiguous block: `no_stale_use`, `no_stale_held` and
//!   `no_reuse_while_mapped` (its frames are page-cache frames that are never
//!   freed; the ordinary page carries those properties), its PTE accesses under
//!   TSO (they are sequentially consistent), and writes that real hardware
//!   completes through an already-dirty entry without touching a PTE.
//! - Random and PCT modes sample schedules; only an exhaustive run that reports
//!   `complete` is a proof, and only for the machine, operations and bounds given.
//!
//! # Layout
//! The modules form layers, each naming only modules below it
//! (the workspace's `tests/layers.rs` fails on a circle), from the bottom:
//! - [`arena`]: the per-execution allocator that keeps addresses stable;
//!   [`error`]: what went wrong, as data ([`Error`]), for each front end to word.
//! - [`kernel`]: the machine's ground truth and the oracle.
//! - [`shape`]: the shape of the machine and of the exploration; `trace`: the
//!   events an execution records.
//! - [`search`]: the strategies, a file each behind the one [`search::Chooser`]
//!   trait: exhaustive DFS with state hashing (one worker or several), random,
//!   PCT, replay, shrinking.
//! - `engine`: the trait the kernel operations call the execution through.
//! - `block`: the contiguous block's kernel side (`--teardown`); [`ops`]: the
//!   kernel operations.
//! - [`exec`]: one execution (coroutines, hooks, the checked
//!   [`tlbkit_policy::Hw`]), which implements `engine`'s trait and runs every
//!   CPU's kernel operations.
//! - [`spec`]: what to check (policy, machine shape) and the policies' defaults.
//! - [`portfolio`]: the default run's shapes (swarm testing) and their
//!   architecture's memory model.
//! - [`token`]: the replay token's codec; [`report`]: what a check found, as
//!   text or JSON, with its counterexample; [`hooks`] and [`code`]: what it
//!   ran of the policy (its methods; a C policy's lines, and a change's; a
//!   Rust policy's lines in a `coverage` build, read by [`llvmcov`]).
//! - [`run`]: running a check: the search, shrinking, replay.
//! - [`options`]: a request as a person gives it, resolved against the defaults.
//! - [`litmus`]: the published Arm VMSA litmus tests (a shipped subset), run
//!   under a small model of translation of its own and compared with the
//!   published verdicts.

pub mod arena;
pub(crate) mod block;
pub mod code;
pub(crate) mod engine;
pub mod error;
pub mod exec;
pub mod hooks;
pub mod kernel;
pub mod known;
pub mod litmus;
pub mod llvmcov;
pub mod ops;
pub mod options;
pub mod portfolio;
pub mod progress;
pub mod report;
pub mod run;
pub mod search;
pub mod shape;
pub mod spec;
pub mod token;
pub(crate) mod trace;

pub use error::Error;
pub use report::{CheckReport, Explored};
pub use run::{check, check_policy, check_with_progress, replay};
pub use spec::{CheckSpec, Mode};

#[cfg(test)]
#[global_allocator]
static ALLOC: arena::CheckAlloc = arena::CheckAlloc;
