/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * tlbkit shim of arch/arm64/include/asm/tlbflush.h: the user and kernel
 * invalidations as arm64 Linux issues them today (v6.12 to v6.16): the
 * barrier first, then the ASID read (5e10f9887ed8), broadcast TLBIs by VA
 * or ASID (and their user twins under KPTI), a completing DSB ISH; a range
 * of MAX_DVM_OPS pages or more without FEAT_TLBIRANGE becomes a whole-ASID
 * flush; reclaim's batch (43b3dfdd0455) with 4b634918384c's
 * arch_flush_tlb_batched_pending. The TLBI instructions themselves go to
 * tlbkit_ops.tlbi. A developer may give tlbkit the kernel's own tlbflush.h
 * instead, whose asm statements tlbkit then interprets.
 */
#ifndef __ASM_TLBFLUSH_H
#define __ASM_TLBFLUSH_H
#include <tlbkit/kernel.h>

#define TLBKIT_TLBI_vmalle1 TLBKIT_VMALLE1
#define TLBKIT_TLBI_vmalle1is TLBKIT_VMALLE1IS
#define TLBKIT_TLBI_vae1 TLBKIT_VAE1
#define TLBKIT_TLBI_vae1is TLBKIT_VAE1IS
#define TLBKIT_TLBI_vale1 TLBKIT_VALE1
#define TLBKIT_TLBI_vale1is TLBKIT_VALE1IS
#define TLBKIT_TLBI_aside1 TLBKIT_ASIDE1
#define TLBKIT_TLBI_aside1is TLBKIT_ASIDE1IS
#define TLBKIT_TLBI_vaae1is TLBKIT_VAAE1IS
#define TLBKIT_TLBI_vaale1is TLBKIT_VAALE1IS
#define TLBKIT_TLBI_rvae1is TLBKIT_RVAE1IS
#define TLBKIT_TLBI_rvale1is TLBKIT_RVALE1IS
#define TLBKIT_TLBI_rvaae1is TLBKIT_RVAAE1IS
#define TLBKIT_TLBI_rvaale1is TLBKIT_RVAALE1IS
#define __tlbi(op, ...) tlbkit_ops.tlbi(TLBKIT_TLBI_##op, (0, ##__VA_ARGS__))
#define __tlbi_user(op, arg) do {					\
	if (arm64_kernel_unmapped_at_el0())				\
		__tlbi(op, (arg) | USER_ASID_FLAG);			\
} while (0)

/* A TLBI's address operand: the page number in bits 43:0, the ASID in bits 63:48. */
static inline unsigned long tlbkit_tlbi_vaddr(unsigned long addr, unsigned long asid)
{
	return ((addr >> 12) & GENMASK_ULL(43, 0)) | (asid << 48);
}
#define __TLBI_VADDR(addr, asid) tlbkit_tlbi_vaddr((addr), (unsigned long)(asid))

#define MAX_DVM_OPS PTRS_PER_PTE
#define MAX_TLBI_OPS MAX_DVM_OPS
/* TLBI RVA*: NUM in [0, 31], SCALE in [0, 3]: (NUM + 1) << (5 * SCALE + 1) pages. */
#define MAX_TLBI_RANGE_PAGES (32UL << (5 * 3 + 1))

/*
 * The kernel's and, under KPTI, the user ASID's entries for one operand; the
 * operand is evaluated once by the caller (a read of the ASID is an access the
 * checker schedules).
 */
#define tlbkit_tlbi_both(op, arg) do {					\
	__tlbi(op, arg);						\
	__tlbi_user(op, arg);						\
} while (0)

/*
 * Every entry of every ASID: the page-table writes ordered before the TLBI
 * (DSB ST), the TLBI waited for (DSB) and the instruction stream synchronised
 * (ISB), in this CPU's domain (NSH) or the inner-shareable one (IS, ISH).
 */
#define tlbkit_flush_all(op, before, after) do {			\
	dsb(before);							\
	__tlbi(op);							\
	dsb(after);							\
	isb();								\
} while (0)

static inline void local_flush_tlb_all(void) { tlbkit_flush_all(vmalle1, nshst, nsh); }
static inline void flush_tlb_all(void) { tlbkit_flush_all(vmalle1is, ishst, ish); }

/* An ASID's entries: the barrier before the ASID is read (5e10f9887ed8). */
static inline void flush_tlb_mm(struct mm_struct *mm)
{
	dsb(ishst);
	unsigned long operand = __TLBI_VADDR(0, ASID(mm));
	tlbkit_tlbi_both(aside1is, operand);
	dsb(ish);
}

/* One page's last-level entry, not waited for: the caller's DSB completes it. */
static inline void __flush_tlb_page_nosync(struct mm_struct *mm, unsigned long uaddr)
{
	dsb(ishst);
	unsigned long operand = __TLBI_VADDR(uaddr, ASID(mm));
	tlbkit_tlbi_both(vale1is, operand);
}

static inline void flush_tlb_page_nosync(struct vm_area_struct *vma, unsigned long uaddr)
{
	__flush_tlb_page_nosync(vma->vm_mm, uaddr);
}

static inline void flush_tlb_page(struct vm_area_struct *vma, unsigned long uaddr)
{
	flush_tlb_page_nosync(vma, uaddr);
	dsb(ish);
}

/*
 * A range: one TLBI per page, or with FEAT_TLBIRANGE one TLBI RVALE1IS per
 * run of pages that a (NUM, SCALE) pair covers (the range operand carries the
 * ASID, the base page, NUM and SCALE; tlbkit_ops decodes it).
 */
#define __TLBI_RANGE_NUM(pages, scale) ((int)((((pages) >> (5 * (scale) + 1)) & 0x1f)) - 1)
#define __TLBI_VADDR_RANGE(baddr, asid, scale, num) \
	((((unsigned long)(asid)) << 48) | ((unsigned long)(scale) << 44) | ((unsigned long)(num) << 39) | (((baddr) >> 12) & GENMASK_ULL(36, 0)))

/* Whether a range is flushed by ASID instead: too many pages for single TLBIs, or for range ones. */
static inline bool __flush_tlb_range_limit_excess(unsigned long start, unsigned long end, unsigned long pages, unsigned long stride)
{
	bool too_many_single = !system_supports_tlb_range() && (end - start) >= (MAX_DVM_OPS * stride);

	return too_many_single || pages > MAX_TLBI_RANGE_PAGES;
}

/* The largest (NUM, SCALE) run at the front of `pages`, as a range operand; its pages in *covered. */
static inline unsigned long tlbkit_range_operand(unsigned long start, unsigned long asid, unsigned long pages,
						 unsigned long *covered)
{
	for (int scale = 3; scale >= 0; scale--) {
		int num = __TLBI_RANGE_NUM(pages, scale);

		if (num >= 0) {
			*covered = (unsigned long)(num + 1) << (5 * scale + 1);
			return __TLBI_VADDR_RANGE(start, asid, scale, num);
		}
	}
	*covered = 0;
	return 0;
}

static inline void __flush_tlb_range_nosync(struct mm_struct *mm, unsigned long start, unsigned long end,
					    unsigned long stride, bool last_level)
{
	start = round_down(start, stride);
	end = round_up(end, stride);
	unsigned long pages = (end - start) >> PAGE_SHIFT;

	if (__flush_tlb_range_limit_excess(start, end, pages, stride)) {
		flush_tlb_mm(mm);
		return;
	}
	dsb(ishst);
	unsigned long asid = ASID(mm);

	while (pages > 0) {
		unsigned long covered, operand;

		if (!system_supports_tlb_range() || pages == 1) {
			covered = stride >> PAGE_SHIFT;
			operand = __TLBI_VADDR(start, asid);
			if (last_level)
				tlbkit_tlbi_both(vale1is, operand);
			else
				tlbkit_tlbi_both(vae1is, operand);
		} else {
			operand = tlbkit_range_operand(start, asid, pages, &covered);
			if (!covered)
				break;
			if (last_level)
				tlbkit_tlbi_both(rvale1is, operand);
			else
				tlbkit_tlbi_both(rvae1is, operand);
		}
		start += covered << PAGE_SHIFT;
		pages -= covered;
	}
}

static inline void __flush_tlb_range(struct vm_area_struct *vma, unsigned long start, unsigned long end,
				     unsigned long stride, bool last_level, int tlb_level)
{
	(void)tlb_level;
	__flush_tlb_range_nosync(vma->vm_mm, start, end, stride, last_level);
	dsb(ish);
}

static inline void flush_tlb_range(struct vm_area_struct *vma, unsigned long start, unsigned long end)
{
	__flush_tlb_range(vma, start, end, PAGE_SIZE, false, 0);
}

/* Kernel addresses, every ASID's entries page by page, or everything past MAX_DVM_OPS pages. */
static inline void flush_tlb_kernel_range(unsigned long start, unsigned long end)
{
	if ((end - start) > (MAX_DVM_OPS * PAGE_SIZE)) {
		flush_tlb_all();
		return;
	}
	unsigned long last = __TLBI_VADDR(end, 0);

	dsb(ishst);
	for (unsigned long operand = __TLBI_VADDR(start, 0); operand < last; operand += 1 << (PAGE_SHIFT - 12))
		__tlbi(vaale1is, operand);
	dsb(ish);
	isb();
}

/* Reclaim's batched flush (ARCH_WANT_BATCHED_UNMAP_TLB_FLUSH, v6.5). */
struct arch_tlbflush_unmap_batch { int unused; };
#define TLBKIT_HAS_TLBBATCH 1

static inline void arch_tlbbatch_add_pending(struct arch_tlbflush_unmap_batch *batch, struct mm_struct *mm,
					     unsigned long start, unsigned long end)
{
	(void)batch;
	__flush_tlb_range_nosync(mm, start, end, PAGE_SIZE, true);
}

static inline void arch_tlbbatch_flush(struct arch_tlbflush_unmap_batch *batch)
{
	(void)batch;
	dsb(ish);
}

static inline void arch_flush_tlb_batched_pending(struct mm_struct *mm)
{
	flush_tlb_mm(mm);
}

#endif
