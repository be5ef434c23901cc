// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * race.c with its count of context switches kept under the lock: the same
 * plain accesses, each with the lock held, so nothing races.
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

	raw_spin_lock_irqsave(&asid_lock, flags);
	switches++;
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
