// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * tlbkit's glue: the entry points tlbkit calls in a compiled kernel file, and
 * what the kernel around that file would provide (the mm_structs, switch_mm,
 * the TTBRs, memset). Compiled with the file, into the same shared object,
 * but without the thread-sanitizer instrumentation: its accesses are the
 * kernel's bookkeeping around the file, not the file's.
 *
 * Everything here that changes while CPUs run is an object of this file:
 * the shared object's writable data is the policy's state, saved and
 * restored by the checker with the rest.
 */
#include <tlbkit/kernel.h>
#include <asm/mmu_context.h>
#include <asm/tlbflush.h>

#ifndef TLBKIT_MMS
#error "tlbkit compiles with -DTLBKIT_MMS=<address-space slots>"
#endif

/* Filled in by tlbkit before anything runs (with common.c's options). ID_AA64MMFR0_EL1.ASIDBits as the machine reports it (0: 8 bits, 2: 16). */
unsigned int tlbkit_mmfr0_asidbits;

struct mm_struct init_mm;
/* Slot 0 is the kernel's (init_mm); slots 1.. are user address spaces. */
struct mm_struct tlbkit_mm[TLBKIT_MMS];
/* The mm each CPU last switched to (the scheduler's prev), or TLBKIT_NO_MM. */
tlbkit_u64 tlbkit_active_mm[NR_CPUS];
#define TLBKIT_NO_MM 0xffffffffULL
/* Each CPU's TTBR0 and TTBR1 as the file last wrote them. */
tlbkit_u64 tlbkit_ttbr0[NR_CPUS], tlbkit_ttbr1[NR_CPUS];
/* Whether the ASID is TTBR0's (TCR.A1 clear, before KPTI) rather than TTBR1's. */
int tlbkit_asid_in_ttbr0;

tlbkit_u64 tlbkit_read_sysreg(int reg)
{
	unsigned int cpu = tlbkit_ops.cpu();

	switch (reg) {
	case TLBKIT_TTBR0_EL1:
		return tlbkit_ttbr0[cpu];
	case TLBKIT_TTBR1_EL1:
		return tlbkit_ttbr1[cpu];
	case TLBKIT_TCR_EL1:
		/* TG1 = 4 KiB (0b10), A1 = 1: the ASID is TTBR1's. */
		return (2UL << TCR_TG1_SHIFT) | (tlbkit_asid_in_ttbr0 ? 0 : TCR_A1);
	case TLBKIT_ID_AA64MMFR0_EL1:
		return (tlbkit_u64)tlbkit_mmfr0_asidbits << ID_AA64MMFR0_EL1_ASIDBITS_SHIFT;
	}
	tlbkit_ops.bug("read of a system register tlbkit does not model", __FILE__, __LINE__);
	return 0;
}

/* Tells the machine what TTBR0's table and TTBR1's ASID now make the root. */
static void tlbkit_root(unsigned int cpu)
{
	tlbkit_u64 table = tlbkit_ttbr0[cpu] & ~(TTBR_ASID_MASK | TTBR_CNP_BIT);
	tlbkit_u64 asid_reg = tlbkit_asid_in_ttbr0 ? tlbkit_ttbr0[cpu] : tlbkit_ttbr1[cpu];
	unsigned int asid = (unsigned int)((asid_reg & TTBR_ASID_MASK) >> 48);

	if (table >= TLBKIT_PGD_BASE && table < TLBKIT_PGD_BASE + TLBKIT_MMS * PAGE_SIZE)
		tlbkit_ops.write_root(0, (unsigned int)((table - TLBKIT_PGD_BASE) / PAGE_SIZE), asid);
	else
		tlbkit_ops.write_root(1, 0, asid);
}

void tlbkit_write_sysreg(int reg, tlbkit_u64 v)
{
	unsigned int cpu = tlbkit_ops.cpu();

	switch (reg) {
	case TLBKIT_TTBR0_EL1:
		tlbkit_ttbr0[cpu] = v;
		tlbkit_root(cpu);
		return;
	case TLBKIT_TTBR1_EL1:
		tlbkit_ttbr1[cpu] = v;
		tlbkit_root(cpu);
		return;
	}
	tlbkit_ops.bug("write of a system register tlbkit does not model", __FILE__, __LINE__);
}

/*
 * cpu_do_switch_mm for a file that does not define it (before v5.8 it was
 * assembly, arch/arm64/mm/proc.S; this is v4.15's, before KPTI): `mmid`
 * loads context.id with one single-copy-atomic load, the ASID goes into
 * TTBR0 with the table (TCR.A1 clear) in one write, then ISB.
 */
__attribute__((weak)) void cpu_do_switch_mm(phys_addr_t pgd_phys, struct mm_struct *mm)
{
	unsigned long asid = (unsigned long)atomic64_read(&mm->context.id) & 0xffff;

	tlbkit_asid_in_ttbr0 = 1;
	write_sysreg(phys_to_ttbr(pgd_phys) | (asid << 48), ttbr0_el1);
	isb();
}

/* The file's function this glue calls at every switch (common.c runs its initcalls). */
#if TLBKIT_SWITCH_TAKES_CPU
void check_and_switch_context(struct mm_struct *mm, unsigned int cpu);
#define TLBKIT_CHECK_AND_SWITCH(mm) check_and_switch_context(mm, (unsigned int)smp_processor_id())
#else
void check_and_switch_context(struct mm_struct *mm);
#define TLBKIT_CHECK_AND_SWITCH(mm) check_and_switch_context(mm)
#endif

/* Boot: every CPU on the reserved table with ASID 0, then the initcalls in their order. */
int tlbkit_boot(void)
{
	for (int c = 0; c < NR_CPUS; c++) {
		tlbkit_ttbr0[c] = phys_to_ttbr(__pa_symbol(reserved_pg_dir));
		tlbkit_ttbr1[c] = 0;
		tlbkit_active_mm[c] = TLBKIT_NO_MM;
	}
	init_mm.pgd = swapper_pg_dir;
	for (int s = 0; s < TLBKIT_MMS; s++)
		tlbkit_mm[s].pgd = (pgd_t *)(TLBKIT_PGD_BASE + s * PAGE_SIZE);
	return tlbkit_initcalls();
}

/* init_new_context (arm64's, asm/mmu_context.h); the slot's old mm is gone from every CPU's prev. */
void tlbkit_mm_init(unsigned int slot)
{
	struct mm_struct *mm = &tlbkit_mm[slot];

	atomic64_set(&mm->context.id, 0);
	refcount_set(&mm->context.pinned, 0);
	for (int c = 0; c < NR_CPUS; c++)
		tlbkit_ops.rmw(&tlbkit_active_mm[c], 8, TLBKIT_CMPXCHG, TLBKIT_RELAXED, slot, TLBKIT_NO_MM);
}

/*
 * switch_mm(prev, next) from the scheduler: nothing for a kernel thread or
 * idle (arm64's enter_lazy_tlb does nothing, TTBR0 keeps prev) or when next
 * is prev; otherwise __switch_mm, which calls the file's
 * check_and_switch_context.
 */
void tlbkit_switch_mm(unsigned int slot)
{
	tlbkit_u64 *prev = &tlbkit_active_mm[smp_processor_id()];

	if (slot == 0)
		return;
	if (tlbkit_ops.load(prev, 8) == slot)
		return;
	TLBKIT_CHECK_AND_SWITCH(&tlbkit_mm[slot]);
	tlbkit_ops.store(prev, 8, slot);
}

static struct vm_area_struct tlbkit_vma(unsigned int slot)
{
	struct vm_area_struct vma = { .vm_mm = &tlbkit_mm[slot] };

	return vma;
}

void tlbkit_flush_page(unsigned int slot, unsigned long va)
{
	struct vm_area_struct vma = tlbkit_vma(slot);

	flush_tlb_page(&vma, va);
}

void tlbkit_flush_range(unsigned int slot, unsigned long start, unsigned long pages)
{
	struct vm_area_struct vma = tlbkit_vma(slot);

	flush_tlb_range(&vma, start, start + pages * PAGE_SIZE);
}

void tlbkit_flush_mm(unsigned int slot)
{
	flush_tlb_mm(&tlbkit_mm[slot]);
}

void tlbkit_flush_kernel_range(unsigned long start, unsigned long pages)
{
	flush_tlb_kernel_range(start, start + pages * PAGE_SIZE);
}

#ifdef TLBKIT_HAS_TLBBATCH
int tlbkit_has_tlbbatch = 1;

void tlbkit_tlbbatch_add_pending(unsigned int slot, unsigned long va)
{
	struct arch_tlbflush_unmap_batch batch;

	arch_tlbbatch_add_pending(&batch, &tlbkit_mm[slot], va, va + PAGE_SIZE);
}

void tlbkit_tlbbatch_flush(void)
{
	struct arch_tlbflush_unmap_batch batch;

	arch_tlbbatch_flush(&batch);
}

void tlbkit_flush_batched_pending(unsigned int slot)
{
	arch_flush_tlb_batched_pending(&tlbkit_mm[slot]);
}
#else
int tlbkit_has_tlbbatch = 0;
void tlbkit_tlbbatch_add_pending(unsigned int slot, unsigned long va) { (void)slot; (void)va; }
void tlbkit_tlbbatch_flush(void) { }
void tlbkit_flush_batched_pending(unsigned int slot) { flush_tlb_mm(&tlbkit_mm[slot]); }
#endif

/* Where tlbkit finds an mm's fields, and the CPU count the object was built for. */
const unsigned long tlbkit_layout[4] = {
	sizeof(struct mm_struct), offsetof(struct mm_struct, context.id), offsetof(struct mm_struct, context.pinned), NR_CPUS
};

/* Returns the mm's context.id as memory holds it (for traces and tests, never the algorithm). */
tlbkit_u64 tlbkit_context_id(unsigned int slot)
{
	return (tlbkit_u64)tlbkit_mm[slot].context.id.counter;
}
