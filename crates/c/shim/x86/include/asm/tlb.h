/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * tlbkit's INVLPGB and TLBSYNC helpers (asm/tlb.h of v6.15 on): each
 * broadcast one call of tlbkit_ops.x86_tlbi. Linux never sets FINAL_ONLY,
 * so every form drops the page-walk caches of what it names too.
 */
#ifndef _ASM_X86_TLB_H
#define _ASM_X86_TLB_H

#include <asm/invpcid.h>

static inline void __tlbsync(void)
{
	tlbkit_ops.x86_tlbi(TLBKIT_TLBSYNC, 0, 0, 0);
}
static inline void invlpgb_flush_user_nr_nosync(unsigned long pcid, unsigned long addr, u16 nr, bool pmd_stride)
{
	(void)pmd_stride;
	tlbkit_ops.x86_tlbi(TLBKIT_INVLPGB_PCID_VA, addr, (unsigned int)pcid, nr);
}
static inline void invlpgb_flush_single_pcid_nosync(unsigned long pcid)
{
	tlbkit_ops.x86_tlbi(TLBKIT_INVLPGB_PCID, 0, (unsigned int)pcid, 0);
}
static inline void invlpgb_flush_all(void)
{
	tlbkit_ops.x86_tlbi(TLBKIT_INVLPGB_ALL, 0, 0, 0);
	__tlbsync();
}
static inline void invlpgb_flush_addr_nosync(unsigned long addr, u16 nr)
{
	tlbkit_ops.x86_tlbi(TLBKIT_INVLPGB_VA_GLOBAL, addr, 0, nr);
}
static inline void invlpgb_flush_all_nonglobals(void)
{
	tlbkit_ops.x86_tlbi(TLBKIT_INVLPGB_ALL_NONGLOBAL, 0, 0, 0);
	__tlbsync();
}

#endif
