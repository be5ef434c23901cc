/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * tlbkit's x86 mm_context_t: the fields arch/x86/mm/tlb.c of v6.15 on reads
 * (the ID of the mm, its flush generation, the trim deadline of its
 * mm_cpumask, and its global ASID with the transition to it).
 */
#ifndef _ASM_X86_MMU_H
#define _ASM_X86_MMU_H

typedef struct {
	u64 ctx_id;
	atomic64_t tlb_gen;
	unsigned long next_trim_cpumask;
	unsigned long flags;
	atomic_t perf_rdpmc_allowed;
	u16 global_asid;
	bool asid_transition;
} mm_context_t;

/* leave_mm is the file's: (void) from v5.17, (int cpu) before. */

#endif
