/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * tlbkit shim of arch/arm64/include/asm/mmu_context.h: the TTBR0 helpers
 * context.c calls. switch_mm and __switch_mm, which call the file's
 * check_and_switch_context, are tlbkit's glue (their signature changed with
 * the kernel's), and arm64's init_new_context is there too.
 */
#ifndef __ASM_MMU_CONTEXT_H
#define __ASM_MMU_CONTEXT_H
#include <tlbkit/kernel.h>

static inline void cpu_set_reserved_ttbr0_nosync(void)
{
	unsigned long ttbr = phys_to_ttbr(__pa_symbol(reserved_pg_dir));

	write_sysreg(ttbr, ttbr0_el1);
}

static inline void cpu_set_reserved_ttbr0(void)
{
	cpu_set_reserved_ttbr0_nosync();
	isb();
}

void cpu_do_switch_mm(phys_addr_t pgd_phys, struct mm_struct *mm);

/*
 * Until cpu_do_switch_mm wrote the reserved TTBR0 itself
 * (cpu_set_reserved_ttbr0_nosync, by v6.6), cpu_switch_mm did, with an ISB,
 * before calling it: from KPTI (v4.16), which moved the ASID into TTBR1, on.
 * tlbkit builds the form of the file's own era: TLBKIT_SWITCH_MM_RESERVES is
 * 1 when the file defines cpu_do_switch_mm without that write. A file with
 * no cpu_do_switch_mm of its own (before v5.8) gets the glue's, v4.15's single
 * TTBR0 write of table and ASID.
 */
static inline void cpu_switch_mm(pgd_t *pgd, struct mm_struct *mm)
{
	BUG_ON(pgd == swapper_pg_dir);
#if TLBKIT_SWITCH_MM_RESERVES
	cpu_set_reserved_ttbr0();
#endif
	cpu_do_switch_mm(virt_to_phys(pgd), mm);
}

static inline void enter_lazy_tlb(struct mm_struct *mm, struct task_struct *tsk) { (void)mm; (void)tsk; }
static inline void update_saved_ttbr0(struct task_struct *tsk, struct mm_struct *mm) { (void)tsk; (void)mm; }

void verify_cpu_asid_bits(void);
void post_ttbr_update_workaround(void);
unsigned long arm64_mm_context_get(struct mm_struct *mm);
void arm64_mm_context_put(struct mm_struct *mm);

#endif
