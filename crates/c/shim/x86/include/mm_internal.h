/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* tlbkit's arch/x86/mm/mm_internal.h: nothing tlb.c needs from it. */
#ifndef __X86_MM_INTERNAL_H
#define __X86_MM_INTERNAL_H
#endif
