/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * tlbkit's x86 asm/tlbflush.h: the per-CPU TLB state, the flush request and
 * the inline flush entry points arch/x86/mm/tlb.c of v6.15 on is written
 * against, reimplemented after the kernel's interface:
 * - struct tlb_state (cpu_tlbstate: the loaded mm and its ASID, the six
 *   {ctx_id, tlb_gen} slots, PTI's user-PCID flush mask, the CR4 shadow)
 *   and struct tlb_state_shared (is_lazy, which other CPUs read);
 * - struct flush_tlb_info, TLB_FLUSH_ALL, TLB_GENERATION_INVALID;
 * - the global ASID accessors (an acquire load of context.global_asid, a
 *   release store after asid_transition is set);
 * - flush_tlb_page, flush_tlb_mm and flush_tlb_range as calls of
 *   flush_tlb_mm_range; inc_mm_tlb_gen (a fully ordered increment);
 *   arch_tlbbatch_add_pending (bump the generation, add the mm's CPUs to the
 *   batch) and arch_tlbbatch_should_defer (another CPU in mm_cpumask).
 */
#ifndef _ASM_X86_TLBFLUSH_H
#define _ASM_X86_TLBFLUSH_H

#include <tlbkit/x86.h>
#include <asm/invpcid.h>

#if !TLBKIT_X86_V414
void __flush_tlb_all(void);
#endif

#define TLB_FLUSH_ALL -1UL
#define TLB_GENERATION_INVALID 0

static inline void cr4_set_bits_irqsoff(unsigned long mask) { cr4_update_irqsoff(mask, 0); }
static inline void cr4_clear_bits_irqsoff(unsigned long mask) { cr4_update_irqsoff(0, mask); }

#define TLB_NR_DYN_ASIDS 6

struct tlb_context {
	u64 ctx_id;
	u64 tlb_gen;
};

/*
 * Every field a file of v5.10 on reads: is_lazy is here until v5.13 moved it
 * to tlb_state_shared (both are, each file uses its own), last_user_mm_ibpb
 * until v5.16 named it last_user_mm_spec (one word, both names).
 */
struct tlb_state {
	struct mm_struct *loaded_mm;
#define LOADED_MM_SWITCHING ((struct mm_struct *)1UL)
	union {
		struct mm_struct *last_user_mm;
		unsigned long last_user_mm_spec;
		unsigned long last_user_mm_ibpb;
	};
	u16 loaded_mm_asid;
	u16 next_asid;
	bool is_lazy;
	bool invalidate_other;
	unsigned short user_pcid_flush_mask;
	unsigned long cr4;
	struct tlb_context ctxs[TLB_NR_DYN_ASIDS];
};
DECLARE_PER_CPU_ALIGNED(struct tlb_state, cpu_tlbstate);

struct tlb_state_shared {
	bool is_lazy;
};
DECLARE_PER_CPU_SHARED_ALIGNED(struct tlb_state_shared, cpu_tlbstate_shared);

bool nmi_uaccess_okay(void);
extern void initialize_tlbstate_and_flush(void);

struct flush_tlb_info {
	struct mm_struct *mm;
	unsigned long start;
	unsigned long end;
	u64 new_tlb_gen;
	unsigned int initiating_cpu;
	u8 stride_shift;
	u8 freed_tables;
	u8 trim_cpumask;
};

void flush_tlb_local(void);
void flush_tlb_one_user(unsigned long addr);
void flush_tlb_one_kernel(unsigned long addr);
void flush_tlb_multi(const struct cpumask *cpumask, const struct flush_tlb_info *info);

static inline bool is_dyn_asid(u16 asid) { return asid < TLB_NR_DYN_ASIDS; }
static inline bool is_global_asid(u16 asid) { return !is_dyn_asid(asid); }

static inline u16 mm_global_asid(struct mm_struct *mm)
{
	if (!cpu_feature_enabled(X86_FEATURE_INVLPGB))
		return 0;
	return smp_load_acquire(&mm->context.global_asid);
}

static inline void mm_init_global_asid(struct mm_struct *mm)
{
	if (cpu_feature_enabled(X86_FEATURE_INVLPGB)) {
		mm->context.global_asid = 0;
		mm->context.asid_transition = false;
	}
}

static inline void mm_assign_global_asid(struct mm_struct *mm, u16 asid)
{
	/* A plain store of the flag, then the release that publishes the ASID. */
	mm->context.asid_transition = true;
	smp_store_release(&mm->context.global_asid, asid);
}

static inline void mm_clear_asid_transition(struct mm_struct *mm)
{
	WRITE_ONCE(mm->context.asid_transition, false);
}

static inline bool mm_in_asid_transition(struct mm_struct *mm)
{
	if (!cpu_feature_enabled(X86_FEATURE_INVLPGB))
		return false;
	return mm && READ_ONCE(mm->context.asid_transition);
}

extern void flush_tlb_all(void);
extern void flush_tlb_kernel_range(unsigned long start, unsigned long end);

#if TLBKIT_X86_V414
/*
 * Before v4.15 the header had what later files define themselves: the
 * flush primitives of a kernel without paravirt (a CR3 reload, INVLPG, a
 * global flush by INVPCID or by toggling CR4.PGE), flush_tlb_mm_range with
 * the VMA's flags, flush_tlb_others as native_flush_tlb_others, and
 * tlb_defer_switch_to_init_mm: a lazy CPU stays on the old mm only without
 * PCIDs.
 */
static inline void __native_flush_tlb(void) { native_write_cr3(__native_read_cr3()); }
static inline void __native_flush_tlb_global_irq_disabled(void)
{
	unsigned long cr4 = this_cpu_read(cpu_tlbstate.cr4);

	native_write_cr4(cr4 & ~X86_CR4_PGE);
	native_write_cr4(cr4);
}
static inline void __native_flush_tlb_global(void)
{
	unsigned long flags;

	if (static_cpu_has(X86_FEATURE_INVPCID)) {
		invpcid_flush_all();
		return;
	}
	raw_local_irq_save(flags);
	__native_flush_tlb_global_irq_disabled();
	raw_local_irq_restore(flags);
}
#define __flush_tlb() __native_flush_tlb()
#define __flush_tlb_global() __native_flush_tlb_global()
#define __flush_tlb_single(addr) invlpg(addr)
#define local_flush_tlb() __flush_tlb()
static inline void __flush_tlb_all(void)
{
	if (boot_cpu_has(X86_FEATURE_PGE))
		__flush_tlb_global();
	else
		__flush_tlb();
}
static inline void __flush_tlb_one(unsigned long addr) { __flush_tlb_single(addr); }
static inline bool tlb_defer_switch_to_init_mm(void) { return !static_cpu_has(X86_FEATURE_PCID); }

extern void flush_tlb_mm_range(struct mm_struct *mm, unsigned long start, unsigned long end, unsigned long vmflag);
#define flush_tlb_mm(mm) flush_tlb_mm_range(mm, 0UL, TLB_FLUSH_ALL, 0UL)
#define flush_tlb_range(vma, start, end) flush_tlb_mm_range((vma)->vm_mm, start, end, (vma)->vm_flags)
static inline void flush_tlb_page(struct vm_area_struct *vma, unsigned long a)
{
	flush_tlb_mm_range(vma->vm_mm, a, a + PAGE_SIZE, VM_NONE);
}
void native_flush_tlb_others(const struct cpumask *cpumask, const struct flush_tlb_info *info);
#define flush_tlb_others(mask, info) native_flush_tlb_others(mask, info)
#else
extern void flush_tlb_mm_range(struct mm_struct *mm, unsigned long start, unsigned long end,
			       unsigned int stride_shift, bool freed_tables);

#define flush_tlb_mm(mm) flush_tlb_mm_range(mm, 0UL, TLB_FLUSH_ALL, 0UL, true)
#define flush_tlb_range(vma, start, end) flush_tlb_mm_range((vma)->vm_mm, start, end, PAGE_SHIFT, true)

static inline void flush_tlb_page(struct vm_area_struct *vma, unsigned long a)
{
	flush_tlb_mm_range(vma->vm_mm, a, a + PAGE_SIZE, PAGE_SHIFT, false);
}
#endif

static inline bool arch_tlbbatch_should_defer(struct mm_struct *mm)
{
	bool should_defer = cpumask_any_but(mm_cpumask(mm), (unsigned int)get_cpu()) < nr_cpu_ids;

	put_cpu();
	return should_defer;
}

static inline u64 inc_mm_tlb_gen(struct mm_struct *mm)
{
	return (u64)atomic64_inc_return(&mm->context.tlb_gen);
}

struct arch_tlbflush_unmap_batch {
	struct cpumask cpumask;
	bool unmapped_pages;
};

static inline void arch_tlbbatch_add_pending(struct arch_tlbflush_unmap_batch *batch, struct mm_struct *mm,
					     unsigned long start, unsigned long end)
{
	(void)start, (void)end;
	inc_mm_tlb_gen(mm);
	cpumask_or(&batch->cpumask, &batch->cpumask, mm_cpumask(mm));
	batch->unmapped_pages = true;
}

extern void arch_tlbbatch_flush(struct arch_tlbflush_unmap_batch *batch);

static inline u64 tlbstate_lam_cr3_mask(void) { return 0; }
static inline void cpu_tlbstate_update_lam(unsigned long lam, u64 untag_mask) { (void)lam, (void)untag_mask; }

/* Toggling CR4.PGE drops every entry, global ones too. */
static inline void __native_tlb_flush_global(unsigned long cr4)
{
	native_write_cr4(cr4 ^ X86_CR4_PGE);
	native_write_cr4(cr4);
}

#endif
