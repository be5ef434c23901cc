/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * tlbkit's x86 asm/mmu_context.h: what tlb.c calls of it. The LDT and LAM
 * are not modelled (no mm has either). init_new_context and destroy_context
 * are the glue's (tlbkit_mm_init, tlbkit_mm_release), as v6.15's are.
 */
#ifndef _ASM_X86_MMU_CONTEXT_H
#define _ASM_X86_MMU_CONTEXT_H

#include <asm/tlbflush.h>

extern atomic64_t last_mm_ctx_id;
static inline void switch_ldt(struct mm_struct *prev, struct mm_struct *next) { (void)prev, (void)next; }
static inline unsigned long mm_lam_cr3_mask(struct mm_struct *mm) { (void)mm; return 0; }
static inline u64 mm_untag_mask(struct mm_struct *mm) { (void)mm; return -1UL; }
static inline bool is_notrack_mm(struct mm_struct *mm) { (void)mm; return false; }
void mm_free_global_asid(struct mm_struct *mm);
void switch_mm_irqs_off(struct mm_struct *prev, struct mm_struct *next, struct task_struct *tsk);
void switch_mm(struct mm_struct *prev, struct mm_struct *next, struct task_struct *tsk);
void enter_lazy_tlb(struct mm_struct *mm, struct task_struct *tsk);

#if TLBKIT_X86_V414
/* v4.14: CR3 values built here (PCID = ASID + 1), and CR4.PCE per mm (no perf events: nothing). */
static inline unsigned long build_cr3(struct mm_struct *mm, u16 asid)
{
	if (static_cpu_has(X86_FEATURE_PCID))
		return __sme_pa(mm->pgd) | (asid + 1);
	return __sme_pa(mm->pgd);
}
static inline unsigned long build_cr3_noflush(struct mm_struct *mm, u16 asid)
{
	return __sme_pa(mm->pgd) | (asid + 1) | CR3_NOFLUSH;
}
static inline void load_mm_cr4(struct mm_struct *mm) { (void)mm; }
#endif

#endif
