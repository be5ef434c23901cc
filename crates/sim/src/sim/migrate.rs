//! `migrate_pages(2)` (the `migratepages PID FROM TO` command): moves every
//! page of a process on one NUMA node to another, with or without Linux v6.3's
//! batched TLB flush.
//!
//! # What the simulated kernel does
//! `kernel_migrate_pages` → `do_migrate_pages` takes the target's `mmap_lock`
//! for reading and walks its VMAs (`queue_pages_range`: one PTE read per page
//! here) for the pages on the source node; each one found is isolated and
//! moved to a new page on the target node by `migrate_pages` (mm/migrate.c):
//! - **One folio at a time** (Linux before v6.3, and [`crate::toggle::MIGRATE_BATCH`]
//!   off): `unmap_and_move` → `__unmap_and_move`: `try_to_migrate(folio, 0)`
//!   (`try_to_migrate_one`: `ptep_clear_flush`, so the unmap's TLB flush is
//!   sent and waited for at once, [`KernelPtes::flush_now`]; then the migration
//!   entry is written), `move_to_new_folio` (the copy), `remove_migration_ptes`
//!   (the PTE maps the new page).
//! - **Batched** (v6.3, Huang Ying's "migrate_pages: batch TLB flushing" series,
//!   and [`crate::toggle::MIGRATE_BATCH`] on): `migrate_pages` cuts the list into
//!   batches of `NR_MAX_BATCHED_MIGRATION` (512) pages; `migrate_pages_batch`
//!   first unmaps every folio of the batch (`migrate_folio_unmap` →
//!   `try_to_migrate(src, TTU_BATCH_FLUSH)`: the flush deferred,
//!   `set_tlb_ubc_flush_pending`, [`KernelPtes::defer_flush`]), then flushes
//!   once (`try_to_unmap_flush`, [`KernelPtes::sync_deferred`]), then moves each
//!   (`migrate_folio_move`: the copy, `remove_migration_ptes`).
//!   `migrate_pages(2)` asks for `MIGRATE_SYNC`, which `migrate_pages_sync`
//!   first tries as a `MIGRATE_ASYNC` batch (read at a later mm/migrate.c than
//!   v6.3; no folio fails here, so the one-by-one retry never runs).
//!   The deferral needs the architecture's batch and its consent
//!   (`should_defer_flush`, [`Policy::tlbbatch_should_defer`]: on x86 only
//!   when another CPU is in `mm_cpumask`): otherwise, and with `--set
//!   tlbbatch=off`, every unmap is flushed at once in both modes.
//! - **A CPU touching a page under migration** finds the migration entry and
//!   waits in `migration_entry_wait` until the page is mapped again. A system
//!   call runs whole at one event here, so the PTEs change at once; the model
//!   records when each page is unmapped and when it is mapped again (its copy
//!   done) and makes an access that misses the TLB on it between the two fault
//!   and wait until the second
//!   ([`Sim::migration_entry_wait`]). A TLB entry that survives until the
//!   unmap's flush reaches its CPU is used meanwhile, as in Linux (the oracle
//!   allows it until the flush completes).
//!
//! # Costs
//! The walk's PTE reads and the unmap's and remap's PTE writes as
//! [`KernelPtes`] charges them; the flushes as the policy issues them; per page
//! the copy (`page_copy`, through the memory-bandwidth model of
//! [`Sim::write_pages`], two lines of traffic per line copied; a copy from the
//! other node's memory than the migrating CPU's also waits for each line's
//! trip there, `mem_remote_extra` each, `mlp` at a time), the new page's
//! allocation (`kalloc_work`) and the old one's freeing (`kfree_work`), and
//! `zap_page` for the rmap and LRU work of isolating and putting back a page.
//! The system call's entry and VMA lookup cost `fault_path`.
//!
//! # Nodes
//! A node is a socket of the model (`--set numa=2` splits each socket in two;
//! a preset's second socket is its second node, whether or not `--cpus`
//! reaches it): CPU `c` is on node `c / cores_per_socket`. A workload may add
//! a node with memory and no CPUs ([`Sim::add_cpuless_node`]). A frame is
//! placed on the node of the CPU that allocates it (first touch, Linux's
//! default policy; [`Sim::alloc_frame`]) and a migration's new frame on the
//! target node. A memory-only node's lines cost what another socket's do.
//!
//! # Not modelled
//! - A user access to a page on another node costs what a local one does:
//!   the model has no data caches, an access costs an L1 hit wherever its
//!   page lies (only a page copy reads memory, above). A copy's writes to the
//!   other node are charged as local ([`Sim::write_pages`]), and the
//!   interconnect's own bandwidth does not bound the copies (one migrating
//!   CPU is far from it).
//! - Large folios (`contpte`), pages shared with another process (Linux moves
//!   them only with `MPOL_MF_MOVE_ALL`), file pages and 2 MB mappings are left
//!   where they are.
//! - LRU isolation, folio locks, the anon_vma and the rmap walk beyond
//!   `zap_page`; `lru_add_drain_all` and the per-CPU page lists of the
//!   target node.
//! - A waiter sleeps in Linux; here its CPU waits, busy, until the page is back.

use super::kwork::NewFrame;
use super::ptemem::KernelPtes;
use super::*;
use crate::toggle::{MIGRATE_BATCH, TLBBATCH};
use tlbkit_policy::contpte::{self as arch, PteMem, PteVal};

/// Pages `migrate_pages` batches at most (`NR_MAX_BATCHED_MIGRATION`, 512
/// without THP and `HPAGE_PMD_NR`, also 512 with 4 KB pages, with it).
pub const NR_MAX_BATCHED_MIGRATION: usize = 512;

impl Sim {
    /// Returns the machine's NUMA nodes (module documentation): its sockets
    /// times `--set numa`, or the nodes its CPUs span if more (`--set
    /// sockets`), plus a memory-only node if one was added
    /// ([`Sim::add_cpuless_node`]).
    pub fn nodes(&self) -> usize {
        let n = self.node_cpus();
        let sockets = self.cfg.preset.real_cores.div_ceil(n).max(self.m.cpus.len().div_ceil(n)).max(1);
        sockets + self.mem.cpuless_nodes()
    }

    /// Adds a NUMA node with memory and no CPUs (a CXL memory expander, or a
    /// socket whose CPUs are offline) as the last node: a migration's target
    /// on a machine of one node.
    pub fn add_cpuless_node(&mut self) {
        self.mem.add_cpuless_node();
    }

    /// Returns the CPUs of one NUMA node: CPU `c` is on node `c / node_cpus()`.
    pub fn node_cpus(&self) -> usize {
        self.m.cores_per_socket.max(1)
    }

    /// Returns the NUMA node CPU `cpu` is on.
    pub fn cpu_node(&self, cpu: usize) -> u8 {
        u8::try_from(cpu / self.node_cpus()).unwrap_or(u8::MAX)
    }

    /// Returns whether `migrate_pages` batches its unmaps' flushes: the
    /// kernel's own choice (the `migrate_batch` toggle, v6.3 and later) and
    /// the architecture's batch (`tlbbatch`).
    fn migrate_batches(&self) -> bool {
        self.features().on(MIGRATE_BATCH) && self.features().on(TLBBATCH)
    }

    /// `migrate_pages(2)` by `cpu` at `now` of every page of `target`'s process
    /// on node `from` to node `to` (module documentation); returns the time
    /// after it and the pages moved.
    pub(super) fn migrate_pages(&mut self, cpu: usize, target: usize, from: u8, to: u8, now: u64) -> (u64, u64) {
        let nodes = self.nodes();
        if from as usize >= nodes || to as usize >= nodes {
            self.error.get_or_insert(format!(
                "migrate_pages: nodes {from} and {to} do not both exist: the machine has {nodes} node(s) \
                 (--set numa=2, or CPUs on a second socket)"
            ));
            return (now, 0);
        }
        let Some(mm) = self.scheduler.get_thread(target).map(|t| t.mm()).filter(|mm| !mm.is_kernel()) else {
            return (now, 0);
        };
        if from == to || !self.kern.mm(mm).alive() {
            return (now, 0);
        }
        let now = self.mmap_lock(cpu, mm, false, now);
        self.mem.forget_migrated(now);
        let batch = if self.migrate_batches() { NR_MAX_BATCHED_MIGRATION } else { 1 };
        let root = self.kern.mm(mm).root();
        let mut vmas: Vec<Vma> = self.kern.mm(mm).vmas().iter().copied().filter(|v| v.file.is_none()).collect();
        vmas.sort_by_key(|v| v.start);
        let mut pending = reclaim::Held::default();
        let mut moved = 0;
        let mut mem = KernelPtes::new(self, cpu, now + self.m.costs.kernel.fault_path, "migrate");
        for v in vmas {
            let mut tables = Vec::new();
            mem.sim.pt.for_each_leaf_table(root, v.start, v.pages, |a, n| tables.push((a, n)));
            // queue_pages_range: the pages of the source node, in address order.
            let mut queued = Vec::new();
            for (a, n) in tables {
                for i in 0..n {
                    let va = VirtAddr(a).add_pages(i);
                    let pte = arch::ptep_get(&mut mem, mm, va);
                    let f = &mem.sim.frames;
                    if pte.valid()
                        && f.kind(pte.pfn) == FrameKind::Single
                        && f.refs(pte.pfn) == 1
                        && f.node(pte.pfn) == from
                    {
                        queued.push((va, pte));
                    }
                }
            }
            for chunk in queued.chunks(batch) {
                pending.merge(Self::migrate_batch(&mut mem, mm, chunk, to, batch > 1));
                moved += chunk.len() as u64;
            }
        }
        let (t, owed) = mem.finish();
        debug_assert!(owed.is_empty(), "a migration's unmap was never flushed");
        self.kern.mm_mut(mm).defer_batched(pending);
        self.stats.pageout.migrated_pages += moved;
        let t = self.flush_unflushed(cpu, mm, "migrate", owed, t);
        (self.mmap_unlock(cpu, mm, false, t), moved)
    }

    /// Moves the pages of `chunk` (address and PTE of each) to new frames on
    /// node `to`: unmaps each, deferring its flush when `deferred` (one flush
    /// of the whole chunk, then every copy) or flushing it at once (a chunk of
    /// one). Returns what the batch flush leaves for the mm's next
    /// `flush_tlb_batched_pending`.
    fn migrate_batch(
        mem: &mut KernelPtes<'_>,
        mm: MmId,
        chunk: &[(VirtAddr, PteVal)],
        to: u8,
        deferred: bool,
    ) -> reclaim::Held {
        let mut unmapped = Vec::with_capacity(chunk.len());
        for &(va, _) in chunk {
            // try_to_migrate_one: page_vma_mapped_walk's read, the clear, the
            // flush, the migration entry (a none PTE here).
            arch::ptep_get(mem, mm, va);
            arch::get_and_clear_full_ptes(mem, mm, va, 1);
            unmapped.push(mem.now);
            if deferred {
                mem.defer_flush(mm, va, 1);
            } else {
                mem.flush_now(mm, va, 1);
            }
            arch::set_ptes(mem, mm, va, PteVal::NONE, 1, None);
        }
        // try_to_unmap_flush (nothing deferred: nothing to do).
        let held = mem.sync_deferred();
        let c = mem.sim.m.costs;
        for (&(va, old), &at) in chunk.iter().zip(&unmapped) {
            // migrate_folio_move: the new page, the copy, remove_migration_ptes.
            let cpu = mem.cpu;
            let new = mem.sim.alloc_frame(cpu, mem.now);
            mem.sim.frames.set_node(new, to);
            mem.now = mem.sim.kalloc_work(cpu, NewFrame::Page(new), mem.now);
            mem.now = mem.sim.write_pages(cpu, 1, Some(mem.sim.frames.node(old.pfn)), mem.now);
            mem.set(mm, va, PteVal::new(new, old.flags));
            mem.now += c.kernel.zap_page;
            let uid = mem.sim.kern.mm(mm).uid();
            mem.sim.mem.mark_migrating(uid, va.0, at, mem.now);
            mem.sim.memcg_moved(mm, va.0, new);
            let freed = mem.sim.put_frames([old.pfn]);
            mem.now = mem.sim.kfree_work(cpu, freed, mem.now);
        }
        held
    }

    /// An access by `cpu` at `now` to `va` that missed the TLB: if the page is
    /// under migration then, unmapped and not yet mapped again (its PTE a
    /// migration entry in Linux), the
    /// access faults and waits in `migration_entry_wait` until the page is
    /// mapped again. Returns the time it goes on.
    pub(super) fn migration_entry_wait(&mut self, cpu: usize, va: u64, now: u64) -> u64 {
        let Some((_, uid, _)) = self.user_root(cpu) else { return now };
        match self.mem.migration_of(uid, va & !4095) {
            Some((at, until)) if at <= now && now < until => {
                let c = self.m.costs;
                self.stats.pageout.migration_waits += 1;
                self.stats.mmu.page_faults += 1;
                (now + c.exception_entry + c.kernel.fault_path).max(until) + c.exception_exit
            }
            _ => now,
        }
    }
}
