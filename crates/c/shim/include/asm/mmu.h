/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * tlbkit's arm64 asm/mmu.h: what an mm keeps in mm->context, and ASID(mm),
 * as arm64 Linux has them since 5e10f9887ed8 (v5.15), where the ASID is read
 * with atomic64_read. A developer may give tlbkit the kernel's own mmu.h
 * instead, so the names, types and order of the fields are the kernel's (the
 * glue finds context.id and context.pinned by offsetof); the rest is ours.
 */
#ifndef __ASM_MMU_H
#define __ASM_MMU_H
#include <tlbkit/kernel.h>

/* Bit 48 of an ASID word marks the user half of a KPTI pair. */
#define USER_ASID_BIT 48
#define USER_ASID_FLAG (UL(1) << USER_ASID_BIT)
/* TTBRn_EL1 carries the ASID in its top 16 bits. */
#define TTBR_ASID_MASK (UL(0xffff) << 48)

/*
 * The context, without the CONFIG_COMPAT sigpage: nothing tlbkit builds is
 * a 32-bit task.
 */
struct tlbkit_arm64_mm_context {
	/* The allocator's generation above the ASID's 16 bits; ASID(mm) below. */
	atomic64_t id;
	/* Pins taken by arm64_mm_context_get: a pinned ASID survives rollovers. */
	refcount_t pinned;
	/* Read by none of the files tlbkit compiles; there for the layout. */
	void *vdso;
	unsigned long flags;
};
typedef struct tlbkit_arm64_mm_context mm_context_t;

/* The ASID bits of context.id. */
#define TLBKIT_ASID_MASK 0xffff

/*
 * The ASID mm runs under. One single-copy-atomic read of the whole word, as
 * the allocator may hand mm a new ASID on another CPU while this one flushes
 * with the old (the commit's race; the generation bits are masked off here).
 */
#define ASID(mm) (atomic64_read(&(mm)->context.id) & TLBKIT_ASID_MASK)

static inline bool arm64_kernel_unmapped_at_el0(void)
{
	return alternative_has_cap_unlikely(ARM64_UNMAP_KERNEL_AT_EL0);
}

#endif
