// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * A constructed ASID allocator for tlbkit's tests (not kernel code): every
 * mm gets the next ASID on its first switch, under a lock, and there is no
 * rollover. It counts context switches in a plain global that every CPU
 * increments without the lock: a data race on a plain access, which the
 * checker must report with both sites (locked.c is the same file with the
 * count kept under the lock, where nothing races).
 */
#include <linux/mm.h>
#include <linux/spinlock.h>
#include <asm/mmu_context.h>
#include <asm/tlbflush.h>

static DEFINE_RAW_SPINLOCK(asid_lock);
static unsigned long next_asid = 1;
static unsigned long switches;

void check_and_switch_context(struct mm_struct *mm)
{
	unsigned long flags;
	u64 asid = atomic64_read(&mm->context.id);

	switches++;
	raw_spin_lock_irqsave(&asid_lock, flags);
	asid = atomic64_read(&mm->context.id);
	if (!asid) {
		asid = next_asid++;
		atomic64_set(&mm->context.id, asid);
	}
	raw_spin_unlock_irqrestore(&asid_lock, flags);
	cpu_switch_mm(mm->pgd, mm);
}

static int asids_init(void)
{
	return 0;
}
early_initcall(asids_init);
