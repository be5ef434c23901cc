// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * tlbkit's x86 glue: the entry points tlbkit calls in a compiled
 * arch/x86/mm/tlb.c, and what the kernel around that file provides (the
 * mm_structs, cpu_tlbstate as arch/x86/mm/init.c defines it, the per-CPU
 * areas, CR3 and CR4, each CPU's current task, kernel/smp.c's IPIs, the
 * reclaim batch). Compiled with the file, into the same shared object,
 * without the thread-sanitizer instrumentation: its accesses are the
 * kernel's bookkeeping around the file, not the file's.
 */
#include <tlbkit/x86.h>
#include <asm/tlbflush.h>
#include <asm/mmu_context.h>

#ifndef TLBKIT_MMS
#error "tlbkit compiles with -DTLBKIT_MMS=<address-space slots>"
#endif

/* The machine's CPU features, filled in by tlbkit before anything runs (with common.c's options). */
unsigned int tlbkit_x86_features;
/* AMD's INVLPGB covers at most this many pages a call (CPUID 0x80000008 EDX, Zen 3). */
u16 invlpgb_count_max = 8;
struct dentry *arch_debugfs_dir;

/* init_mm is MmId::KERNEL (slot 0); slots 1.. are user address spaces (slot 0 unused). */
struct mm_struct init_mm;
struct mm_struct tlbkit_mm[TLBKIT_MMS];
#define TLBKIT_INIT_PGD 0x10000000UL

/* arch/x86/mm/init.c's: each CPU starts on init_mm, ASID slot 0 holding it. */
DEFINE_PER_CPU_ALIGNED(struct tlb_state, cpu_tlbstate) = {
	.loaded_mm = &init_mm,
	.next_asid = 1,
	.ctxs = { [0] = { .ctx_id = 1 } },
};
DEFINE_PER_CPU(struct cpuinfo_x86, cpu_info);

/* Each CPU's copy of the per-CPU section but CPU 0's, and where each copy is. */
#define TLBKIT_PERCPU_BYTES 1024
extern char __start_tlbkit_percpu[], __stop_tlbkit_percpu[];
__attribute__((aligned(64))) char tlbkit_percpu_copies[NR_CPUS > 1 ? NR_CPUS - 1 : 1][TLBKIT_PERCPU_BYTES];
unsigned long tlbkit_percpu_offset[NR_CPUS];
/* CPU 0's copy, as tlbkit reads it: its address and its bytes (set at boot). */
unsigned long tlbkit_percpu_span[2];

/* Each CPU's CR3 and CR4 as last written, its task, and the scheduler's mm (slot) on it. */
unsigned long tlbkit_cr3[NR_CPUS], tlbkit_cr4[NR_CPUS];
struct task_struct tlbkit_task[NR_CPUS];
/* Each CPU's reclaim batch (the task's tlb_ubc.arch; one reclaiming task a CPU). */
struct arch_tlbflush_unmap_batch tlbkit_batch[NR_CPUS];

int sprintf(char *buf, const char *fmt, ...)
{
	(void)fmt;
	buf[0] = 0;
	return 0;
}

/* sample=every: the running task's pid falls in this jiffy's sample (set at load). */
unsigned int tlbkit_sample_every;

struct task_struct *tlbkit_current(void)
{
	struct task_struct *t = &tlbkit_task[tlbkit_ops.cpu()];

	if (tlbkit_sample_every)
		t->pid = (int)(jiffies & 0x1f);
	return t;
}

static struct mm_struct *tlbkit_slot_mm(unsigned int slot)
{
	return slot == 0 ? &init_mm : &tlbkit_mm[slot];
}

unsigned long tlbkit_read_cr3(void)
{
	return tlbkit_cr3[tlbkit_ops.cpu()];
}

/*
 * A CR3 write: the table names an mm (init_mm's has no user mapping: the
 * reserved root), the low 12 bits are the PCID when CR4.PCIDE is set, and
 * bit 63 (NOFLUSH) keeps the PCID's entries; a read never returns bit 63.
 */
void tlbkit_write_cr3(unsigned long cr3)
{
	unsigned int cpu = tlbkit_ops.cpu();
	unsigned long table = cr3 & CR3_ADDR_MASK;
	int pcide = (tlbkit_cr4[cpu] & X86_CR4_PCIDE) != 0;
	unsigned int pcid = pcide ? (unsigned int)(cr3 & TLBKIT_CR3_PCID_HW_MASK) : 0;
	int noflush = pcide && (cr3 & CR3_NOFLUSH);

	if (!pcide && (cr3 & TLBKIT_CR3_PCID_HW_MASK))
		tlbkit_ops.bug("a CR3 write with PCID bits while CR4.PCIDE is clear (#GP)", __FILE__, __LINE__);
	tlbkit_cr3[cpu] = cr3 & ~CR3_NOFLUSH;
	if (table >= TLBKIT_PGD_BASE && table < TLBKIT_PGD_BASE + TLBKIT_MMS * PAGE_SIZE)
		tlbkit_ops.cr3(0, (unsigned int)((table - TLBKIT_PGD_BASE) / PAGE_SIZE), pcid, noflush);
	else
		tlbkit_ops.cr3(1, 0, pcid, noflush);
}

void tlbkit_invlpg(unsigned long addr)
{
	unsigned int cpu = tlbkit_ops.cpu();
	unsigned int pcid = (tlbkit_cr4[cpu] & X86_CR4_PCIDE) ? (unsigned int)(tlbkit_cr3[cpu] & TLBKIT_CR3_PCID_HW_MASK) : 0;

	tlbkit_ops.x86_tlbi(TLBKIT_INVLPG, addr, pcid, 1);
}

unsigned long tlbkit_read_cr4(void)
{
	return tlbkit_cr4[tlbkit_ops.cpu()];
}

/* A write that changes CR4.PGE drops every entry, global ones too. */
void tlbkit_write_cr4(unsigned long cr4)
{
	unsigned int cpu = tlbkit_ops.cpu();
	unsigned long old = tlbkit_cr4[cpu];

	tlbkit_cr4[cpu] = cr4;
	if ((old ^ cr4) & X86_CR4_PGE)
		tlbkit_ops.x86_tlbi(TLBKIT_INVPCID_ALL_GLOBAL, 0, 0, 0);
}

unsigned long cr4_read_shadow(void)
{
	return this_cpu_read(cpu_tlbstate.cr4);
}

void cr4_update_irqsoff(unsigned long set, unsigned long clear)
{
	unsigned long cr4 = this_cpu_read(cpu_tlbstate.cr4);
	unsigned long next = (cr4 & ~clear) | set;

	if (next != cr4) {
		this_cpu_write(cpu_tlbstate.cr4, next);
		tlbkit_write_cr4(next);
	}
}

/*
 * Marks in `targets` every CPU of `mask` but this one that `cond` (if any)
 * agrees to, asked on the sender as kernel/smp.c asks it; returns whether
 * there is one.
 */
static int tlbkit_targets(const struct cpumask *mask, smp_cond_func_t cond, void *info, unsigned long *targets)
{
	unsigned int me = tlbkit_ops.cpu();
	int any = 0;
	unsigned int cpu;

	for_each_cpu(cpu, mask) {
		if (cpu == me || (cond && !cond((int)cpu, info)))
			continue;
		targets[cpu / BITS_PER_LONG] |= 1UL << (cpu % BITS_PER_LONG);
		any = 1;
	}
	return any;
}

#ifdef TLBKIT_SIMULATOR
/*
 * kernel/smp.c's call-function data (v4.x to today), in the simulator's
 * build, which charges the cache lines they move: per initiator a csd for
 * each target (cfd_data), each on a line of its own, and each CPU's
 * call_single_queue. The initiator locks each target's csd (csd_lock: waits
 * until it is free, then sets its flag), fills it, adds it to the target's
 * queue (llist_add: a read of the head, then an exchange) and sends the
 * IPIs without waiting; each target takes its queue (llist_del_all), reads
 * the csd, runs the function and releases the csd (smp_store_release); the
 * initiator waits on each csd it queued (csd_lock_wait), polling it. The IPI
 * carries only the initiator's number.
 *
 * The checker's build has none of it: there the machine's IPI runs each
 * handler and returns when all have (one call, tlbkit_ops.ipi). Its csds,
 * memory no bug of the file's can depend on, made the standard bounds five
 * times as many states.
 */
struct tlbkit_csd {
	unsigned long flags;
	unsigned long func;
	unsigned long info;
} __attribute__((aligned(64)));
static struct tlbkit_csd tlbkit_cfd[NR_CPUS][NR_CPUS];
static struct {
	unsigned long first;
} __attribute__((aligned(64))) tlbkit_call_single_queue[NR_CPUS];

static int tlbkit_targets_has(const unsigned long *targets, unsigned int cpu)
{
	return targets[cpu / BITS_PER_LONG] >> (cpu % BITS_PER_LONG) & 1;
}

/* csd_lock_wait: until the target released the csd (smp_cond_load_acquire). */
static void tlbkit_csd_lock_wait(struct tlbkit_csd *csd)
{
	while (smp_load_acquire(&csd->flags))
		cpu_relax();
}

/* flush_smp_call_function_queue, on the target: the initiator's request. */
static void tlbkit_call_function(void *initiator)
{
	unsigned int me = tlbkit_ops.cpu();
	struct tlbkit_csd *csd = &tlbkit_cfd[(unsigned long)initiator][me];
	smp_call_func_t func;
	void *info;

	(void)tlbkit_ops.rmw(&tlbkit_call_single_queue[me].first, 8, TLBKIT_XCHG, TLBKIT_FULL, 0, 0);
	func = (smp_call_func_t)(unsigned long)tlbkit_ops.load(&csd->func, 8);
	info = (void *)(unsigned long)tlbkit_ops.load(&csd->info, 8);
	func(info);
	smp_store_release(&csd->flags, 0UL);
}

/* Queues a csd on each of `targets` and sends the IPIs; returns without waiting. */
static void tlbkit_call_send(const unsigned long *targets, smp_call_func_t func, void *info)
{
	unsigned long me = tlbkit_ops.cpu();
	int first = -1;

	for (unsigned int cpu = 0; cpu < NR_CPUS; cpu++) {
		struct tlbkit_csd *csd = &tlbkit_cfd[me][cpu];

		if (!tlbkit_targets_has(targets, cpu))
			continue;
		tlbkit_csd_lock_wait(csd);
		tlbkit_ops.store(&csd->flags, 8, 1);
		tlbkit_ops.store(&csd->func, 8, (unsigned long)func);
		tlbkit_ops.store(&csd->info, 8, (unsigned long)info);
		/* llist_add: READ_ONCE of the head, then the exchange that links the csd in. */
		(void)tlbkit_ops.load(&tlbkit_call_single_queue[cpu].first, 8);
		(void)tlbkit_ops.rmw(&tlbkit_call_single_queue[cpu].first, 8, TLBKIT_XCHG, TLBKIT_FULL,
				     (unsigned long)csd, 0);
		if (first < 0)
			first = (int)cpu;
	}
	tlbkit_ops.spin_on(&tlbkit_cfd[me][first].flags);
	tlbkit_ops.ipi_async(targets, tlbkit_call_function, (void *)me);
}

/* Waits on the csd of each of `targets`. */
static void tlbkit_call_wait(const unsigned long *targets)
{
	unsigned int me = tlbkit_ops.cpu();

	for (unsigned int cpu = 0; cpu < NR_CPUS; cpu++)
		if (tlbkit_targets_has(targets, cpu))
			tlbkit_csd_lock_wait(&tlbkit_cfd[me][cpu]);
}
#define TLBKIT_CALL_WAITS_APART 1
#else
/* The checker's: the machine's IPI, which returns when every handler has. */
static void tlbkit_call_send(const unsigned long *targets, smp_call_func_t func, void *info)
{
	tlbkit_ops.ipi(targets, func, info);
}
static void tlbkit_call_wait(const unsigned long *targets)
{
	(void)targets;
}
#define TLBKIT_CALL_WAITS_APART 0
#endif

/* Runs func here with interrupts off if this CPU is in `mask` and `cond` (if any) agrees. */
static void tlbkit_call_local(smp_cond_func_t cond, smp_call_func_t func, void *info, const struct cpumask *mask)
{
	unsigned int me = tlbkit_ops.cpu();

	if (cpumask_test_cpu((int)me, mask) && (!cond || cond((int)me, info))) {
		tlbkit_ops.irq(1);
		func(info);
		tlbkit_ops.irq(0);
	}
}

/*
 * on_each_cpu_cond_mask: the sender picks the targets (cond_func asked on
 * the sender). From v5.13 (a32a4d8a815c, "smp: Run functions concurrently
 * in smp_call_function_many_cond()", SCF_RUN_LOCAL) it queues and sends,
 * runs func itself with interrupts off if it is in the mask and cond_func
 * agrees, then waits: so the simulator's build; the checker's, whose IPI
 * waits as it sends, runs the local call first. Before v5.13 it sent and
 * waited, then ran func here (TLBKIT_X86_SMP_V512, for the files of that
 * time: they define native_flush_tlb_others), in both builds.
 */
void on_each_cpu_cond_mask(smp_cond_func_t cond, smp_call_func_t func, void *info, bool wait, const struct cpumask *mask)
{
	unsigned long targets[BITS_TO_LONGS(NR_CPUS)] = { 0 };
	int any = tlbkit_targets(mask, cond, info, targets);

	(void)wait;
	if (TLBKIT_X86_SMP_V512) {
		if (any) {
			tlbkit_call_send(targets, func, info);
			tlbkit_call_wait(targets);
		}
		tlbkit_call_local(cond, func, info, mask);
	} else if (TLBKIT_CALL_WAITS_APART) {
		if (any)
			tlbkit_call_send(targets, func, info);
		tlbkit_call_local(cond, func, info, mask);
		if (any)
			tlbkit_call_wait(targets);
	} else {
		tlbkit_call_local(cond, func, info, mask);
		if (any)
			tlbkit_call_send(targets, func, info);
	}
}

void smp_call_function_many(const struct cpumask *mask, smp_call_func_t func, void *info, bool wait)
{
	unsigned long targets[BITS_TO_LONGS(NR_CPUS)] = { 0 };

	(void)wait;
	if (tlbkit_targets(mask, NULL, info, targets)) {
		tlbkit_call_send(targets, func, info);
		tlbkit_call_wait(targets);
	}
}

/* Runs the file's asm statement `tmpl`: `invlpg (%0)` of its operand, nothing else. */
void tlbkit_x86_asm(const char *tmpl, tlbkit_u64 *operands)
{
	const char *invlpg = "invlpg";
	const char *t = tmpl;

	while (*invlpg && *t == *invlpg)
		t++, invlpg++;
	if (*invlpg)
		tlbkit_ops.bug("an asm statement tlbkit cannot run (x86: only invlpg)", __FILE__, __LINE__);
	tlbkit_invlpg((unsigned long)operands[0]);
}

void on_each_cpu(smp_call_func_t func, void *info, int wait)
{
	struct cpumask all;

	for (unsigned int i = 0; i < BITS_TO_LONGS(NR_CPUS); i++)
		all.bits[i] = 0;
	for (unsigned int c = 0; c < NR_CPUS; c++)
		all.bits[c / BITS_PER_LONG] |= 1UL << (c % BITS_PER_LONG);
	on_each_cpu_cond_mask(NULL, func, info, wait, &all);
}

/*
 * Boot: the per-CPU areas (each a copy of CPU 0's section, as
 * setup_per_cpu_areas makes them), every CPU on init_mm with ASID 0 as
 * initialize_tlbstate_and_flush leaves it (CR3 with PCID 1 when the machine
 * has PCIDs, CR4.PCIDE and PGE set), then the initcalls in their order.
 * Returns -1 when the file's per-CPU variables do not fit a copy.
 */
int tlbkit_boot(void)
{
	unsigned long bytes = (unsigned long)(__stop_tlbkit_percpu - __start_tlbkit_percpu);
	int pcid = static_cpu_has(X86_FEATURE_PCID);

	if (bytes > TLBKIT_PERCPU_BYTES)
		return -1;
	tlbkit_percpu_span[0] = (unsigned long)__start_tlbkit_percpu;
	tlbkit_percpu_span[1] = bytes;
	init_mm.pgd = (pgd_t *)TLBKIT_INIT_PGD;
	init_mm.context.ctx_id = 1;
	for (int s = 1; s < TLBKIT_MMS; s++)
		tlbkit_mm[s].pgd = (pgd_t *)(TLBKIT_PGD_BASE + s * PAGE_SIZE);
	cpu_tlbstate.cr4 = X86_CR4_PGE | (pcid ? X86_CR4_PCIDE : 0);
	for (int c = 0; c < NR_CPUS; c++) {
		if (c > 0) {
			tlbkit_percpu_offset[c] = (unsigned long)tlbkit_percpu_copies[c - 1] - (unsigned long)__start_tlbkit_percpu;
			memcpy(tlbkit_percpu_copies[c - 1], __start_tlbkit_percpu, bytes);
		}
		tlbkit_cr4[c] = cpu_tlbstate.cr4;
		tlbkit_cr3[c] = TLBKIT_INIT_PGD | (pcid ? 1 : 0);
		tlbkit_task[c].pid = c;
	}
	return tlbkit_initcalls();
}

/* init_new_context (v6.15's asm/mmu_context.h): a new ctx_id, generation 0, a trim deadline a second away. */
void tlbkit_mm_init(unsigned int slot)
{
	struct mm_struct *mm = &tlbkit_mm[slot];

	mm->context.ctx_id = (u64)atomic64_inc_return(&last_mm_ctx_id);
	atomic64_set(&mm->context.tlb_gen, 0);
	/* Marked, as the file's READ_ONCE and WRITE_ONCE of it are. */
	WRITE_ONCE(mm->context.next_trim_cpumask, jiffies + HZ);
	mm->context.global_asid = 0;
	mm->context.asid_transition = false;
	for (unsigned int i = 0; i < BITS_TO_LONGS(NR_CPUS); i++)
		tlbkit_ops.store(&mm->cpu_bitmap.bits[i], 8, 0);
	/*
	 * Published before any other CPU can run the mm: fork makes the new
	 * task runnable under the runqueue lock (wake_up_new_task), a locked
	 * read-modify-write that drains this CPU's store buffer.
	 */
	smp_mb();
}

/* destroy_context: the mm's global ASID goes back (v6.15 on; before, the file has no such function). */
#pragma weak mm_free_global_asid
void tlbkit_mm_release(unsigned int slot)
{
	if (mm_free_global_asid)
		mm_free_global_asid(&tlbkit_mm[slot]);
}

/*
 * The context switch (kernel/sched/core.c's context_switch, interrupts
 * off): to a user mm, switch_mm_irqs_off(prev, next, next task); to a kernel
 * thread or idle, enter_lazy_tlb (CR3 keeps the user mm).
 */
void tlbkit_switch_mm(unsigned int slot)
{
	struct task_struct *t = tlbkit_current();

	if (slot == 0) {
		t->mm = NULL;
		enter_lazy_tlb(this_cpu_read(cpu_tlbstate.loaded_mm), t);
		return;
	}
	t->mm = &tlbkit_mm[slot];
	switch_mm_irqs_off(NULL, &tlbkit_mm[slot], t);
}

/* A user flush, as asm/tlb.h's tlb_flush() issues it for an mmu_gather that freed no page table. */
void tlbkit_flush_page(unsigned int slot, unsigned long va)
{
	struct vm_area_struct vma = { .vm_mm = tlbkit_slot_mm(slot) };

	flush_tlb_page(&vma, va);
}

void tlbkit_flush_range(unsigned int slot, unsigned long start, unsigned long pages)
{
#if TLBKIT_X86_V414
	flush_tlb_mm_range(tlbkit_slot_mm(slot), start, start + pages * PAGE_SIZE, VM_NONE);
#else
	flush_tlb_mm_range(tlbkit_slot_mm(slot), start, start + pages * PAGE_SIZE, PAGE_SHIFT, false);
#endif
}

void tlbkit_flush_mm(unsigned int slot)
{
	flush_tlb_mm(tlbkit_slot_mm(slot));
}

void tlbkit_flush_kernel_range(unsigned long start, unsigned long pages)
{
	flush_tlb_kernel_range(start, start + pages * PAGE_SIZE);
}

int tlbkit_has_tlbbatch = 1;

int tlbkit_tlbbatch_should_defer(unsigned int slot)
{
	return arch_tlbbatch_should_defer(tlbkit_slot_mm(slot));
}

void tlbkit_tlbbatch_add_pending(unsigned int slot, unsigned long va)
{
	arch_tlbbatch_add_pending(&tlbkit_batch[tlbkit_ops.cpu()], tlbkit_slot_mm(slot), va, va + PAGE_SIZE);
}

void tlbkit_tlbbatch_flush(void)
{
	arch_tlbbatch_flush(&tlbkit_batch[tlbkit_ops.cpu()]);
}

/* arch_flush_tlb_batched_pending: x86's flushes the whole mm. */
void tlbkit_flush_batched_pending(unsigned int slot)
{
	flush_tlb_mm(tlbkit_slot_mm(slot));
}

/*
 * Where tlbkit finds an mm's fields (its size, context.ctx_id,
 * context.tlb_gen), and the CPU count the object was built for.
 */
const unsigned long tlbkit_layout[4] = {
	sizeof(struct mm_struct), offsetof(struct mm_struct, context.ctx_id), offsetof(struct mm_struct, context.tlb_gen), NR_CPUS
};

/*
 * The fields tlbkit names in traces and declares owners of, by the kernel's
 * names: each per-CPU one (its offset in CPU 0's copy of `object`, for every
 * CPU's copy) and each of an mm's (in each slot). `kind` is how its value
 * reads: 0 a number, 1 a flag, 2 an mm pointer, 3 a set of CPUs.
 */
struct tlbkit_field {
	const char *name;
	const char *object;
	unsigned long offset, bytes;
	int kind;
};
#define TLBKIT_PCPU(obj, type, f, k) { #obj "." #f, #obj, offsetof(type, f), sizeof(((type *)0)->f), k }
/* The i-th of the ASID slots the CPU keeps (`TLB_NR_DYN_ASIDS`, 6): its mm and generation. */
#define TLBKIT_CTX(i) \
	TLBKIT_PCPU(cpu_tlbstate, struct tlb_state, ctxs[i].ctx_id, 0), TLBKIT_PCPU(cpu_tlbstate, struct tlb_state, ctxs[i].tlb_gen, 0)
#define TLBKIT_MM(f, k) { "context." #f, 0, offsetof(struct mm_struct, context.f), sizeof(((struct mm_struct *)0)->context.f), k }
const struct tlbkit_field tlbkit_fields[] = {
	TLBKIT_PCPU(cpu_tlbstate, struct tlb_state, loaded_mm, 2),
	TLBKIT_PCPU(cpu_tlbstate, struct tlb_state, last_user_mm_spec, 2),
	TLBKIT_PCPU(cpu_tlbstate, struct tlb_state, loaded_mm_asid, 0),
	TLBKIT_PCPU(cpu_tlbstate, struct tlb_state, next_asid, 0),
	TLBKIT_PCPU(cpu_tlbstate, struct tlb_state, invalidate_other, 1),
	TLBKIT_PCPU(cpu_tlbstate, struct tlb_state, user_pcid_flush_mask, 0),
	TLBKIT_PCPU(cpu_tlbstate, struct tlb_state, cr4, 0),
	TLBKIT_CTX(0), TLBKIT_CTX(1), TLBKIT_CTX(2), TLBKIT_CTX(3), TLBKIT_CTX(4), TLBKIT_CTX(5),
	TLBKIT_PCPU(cpu_tlbstate_shared, struct tlb_state_shared, is_lazy, 1),
	TLBKIT_MM(ctx_id, 0),
	TLBKIT_MM(tlb_gen, 0),
	TLBKIT_MM(next_trim_cpumask, 0),
	TLBKIT_MM(global_asid, 0),
	TLBKIT_MM(asid_transition, 1),
	{ "cpu_bitmap", 0, offsetof(struct mm_struct, cpu_bitmap), sizeof(struct cpumask), 3 },
	{ 0, 0, 0, 0, 0 }
};
