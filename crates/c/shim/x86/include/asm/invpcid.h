/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* tlbkit's INVPCID: each type one call of tlbkit_ops.x86_tlbi. */
#ifndef _ASM_X86_INVPCID
#define _ASM_X86_INVPCID

static inline void invpcid_flush_one(unsigned long pcid, unsigned long addr)
{
	tlbkit_ops.x86_tlbi(TLBKIT_INVPCID_ADDR, addr, (unsigned int)pcid, 1);
}
static inline void invpcid_flush_single_context(unsigned long pcid)
{
	tlbkit_ops.x86_tlbi(TLBKIT_INVPCID_SINGLE, 0, (unsigned int)pcid, 0);
}
static inline void invpcid_flush_all(void)
{
	tlbkit_ops.x86_tlbi(TLBKIT_INVPCID_ALL_GLOBAL, 0, 0, 0);
}
static inline void invpcid_flush_all_nonglobals(void)
{
	tlbkit_ops.x86_tlbi(TLBKIT_INVPCID_ALL_NONGLOBAL, 0, 0, 0);
}

#endif
