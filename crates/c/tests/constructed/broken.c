// SPDX-License-Identifier: MIT OR Apache-2.0
/* A file that needs a header tlbkit's shims do not have. */
#include <linux/mm.h>
#include <linux/no_such_header.h>

void check_and_switch_context(struct mm_struct *mm)
{
	(void)mm;
}
