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

#define __TLBI_VADDR(addr, asid)					\
	({								\
		unsigned long __ta = (addr) >> 12;			\
		__ta &= GENMASK_ULL(43, 0);				\
		__ta |= (unsigned long)(asid) << 48;			\
		__ta;							\
	})

#define MAX_DVM_OPS PTRS_PER_PTE
#define MAX_TLBI_OPS MAX_DVM_OPS
/* TLBI RVA*: NUM in [0, 31], SCALE in [0, 3]: (NUM + 1) << (5 * SCALE + 1) pages. */
#define MAX_TLBI_RANGE_PAGES (32UL << (5 * 3 + 1))

static inline void local_flush_tlb_all(void)
{
	dsb(nshst);
	__tlbi(vmalle1);
	dsb(nsh);
	isb();
}

static inline void flush_tlb_all(void)
{
	dsb(ishst);
	__tlbi(vmalle1is);
	dsb(ish);
	isb();
}

static inline void flush_tlb_mm(struct mm_struct *mm)
{
	unsigned long asid;

	dsb(ishst);
	asid = __TLBI_VADDR(0, ASID(mm));
	__tlbi(aside1is, asid);
	__tlbi_user(aside1is, asid);
	dsb(ish);
}

static inline void __flush_tlb_page_nosync(struct mm_struct *mm, unsigned long uaddr)
{
	unsigned long addr;

	dsb(ishst);
	addr = __TLBI_VADDR(uaddr, ASID(mm));
	__tlbi(vale1is, addr);
	__tlbi_user(vale1is, addr);
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

static inline bool __flush_tlb_range_limit_excess(unsigned long start, unsigned long end, unsigned long pages, unsigned long stride)
{
	if (!system_supports_tlb_range() && (end - start) >= (MAX_DVM_OPS * stride))
		return true;
	if (pages > MAX_TLBI_RANGE_PAGES)
		return true;
	return false;
}

static inline void __flush_tlb_range_nosync(struct mm_struct *mm, unsigned long start, unsigned long end,
					    unsigned long stride, bool last_level)
{
	unsigned long asid, pages;

	start = round_down(start, stride);
	end = round_up(end, stride);
	pages = (end - start) >> PAGE_SHIFT;
	if (__flush_tlb_range_limit_excess(start, end, pages, stride)) {
		flush_tlb_mm(mm);
		return;
	}
	dsb(ishst);
	asid = ASID(mm);
	while (pages > 0) {
		if (!system_supports_tlb_range() || pages == 1) {
			unsigned long addr = __TLBI_VADDR(start, asid);

			if (last_level) {
				__tlbi(vale1is, addr);
				__tlbi_user(vale1is, addr);
			} else {
				__tlbi(vae1is, addr);
				__tlbi_user(vae1is, addr);
			}
			start += stride;
			pages -= stride >> PAGE_SHIFT;
			continue;
		}
		for (int scale = 3; scale >= 0; scale--) {
			int num = __TLBI_RANGE_NUM(pages, scale);

			if (num >= 0) {
				unsigned long addr = __TLBI_VADDR_RANGE(start, asid, scale, num);

				if (last_level) {
					__tlbi(rvale1is, addr);
					__tlbi_user(rvale1is, addr);
				} else {
					__tlbi(rvae1is, addr);
					__tlbi_user(rvae1is, addr);
				}
				start += (unsigned long)(num + 1) << (5 * scale + 1) << PAGE_SHIFT;
				pages -= (unsigned long)(num + 1) << (5 * scale + 1);
				break;
			}
		}
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

static inline void flush_tlb_kernel_range(unsigned long start, unsigned long end)
{
	unsigned long addr;

	if ((end - start) > (MAX_DVM_OPS * PAGE_SIZE)) {
		flush_tlb_all();
		return;
	}
	start = __TLBI_VADDR(start, 0);
	end = __TLBI_VADDR(end, 0);
	dsb(ishst);
	for (addr = start; addr < end; addr += 1 << (PAGE_SHIFT - 12))
		__tlbi(vaale1is, addr);
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
