/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * tlbkit shim of arch/arm64/include/asm/mmu.h: an mm's context as arm64 Linux
 * has it since 5e10f9887ed8 (v5.15), whose ASID(mm) reads context.id with
 * atomic64_read. A developer may give tlbkit the kernel's own mmu.h instead.
 */
#ifndef __ASM_MMU_H
#define __ASM_MMU_H
#include <tlbkit/kernel.h>

#define USER_ASID_BIT 48
#define USER_ASID_FLAG (UL(1) << USER_ASID_BIT)
#define TTBR_ASID_MASK (UL(0xffff) << 48)

typedef struct {
	atomic64_t id;
	refcount_t pinned;
	void *vdso;
	unsigned long flags;
} mm_context_t;

#define ASID(mm) (atomic64_read(&(mm)->context.id) & 0xffff)

static inline bool arm64_kernel_unmapped_at_el0(void)
{
	return alternative_has_cap_unlikely(ARM64_UNMAP_KERNEL_AT_EL0);
}

#endif
