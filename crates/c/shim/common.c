// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * What both architectures' glue shares: the ops table and the options of
 * tlbkit/ops.h, what a C library the file is linked without would give
 * (memset, memcpy), and the initcalls run in their order at boot.
 * Compiled with the glue, without the sanitizer's instrumentation.
 */
#include <stddef.h>
#include <tlbkit/ops.h>

/* Filled in by tlbkit before anything runs: the ops table and the options ops.h declares. */
struct tlbkit_ops tlbkit_ops;
unsigned int tlbkit_asid_bits_option;
int tlbkit_kpti, tlbkit_tlbi_range, tlbkit_cnp, tlbkit_early_bitops;

void *memset(void *s, int c, size_t n)
{
	unsigned char *p = s;

	while (n--)
		*p++ = (unsigned char)c;
	return s;
}

void *memcpy(void *d, const void *s, size_t n)
{
	unsigned char *p = d;
	const unsigned char *q = s;

	while (n--)
		*p++ = *q++;
	return d;
}

/* The file's initcalls (tlbkit's early_initcall() and its kin define them); each optional. */
__attribute__((weak)) int __tlbkit_early_initcall(void);
__attribute__((weak)) int __tlbkit_core_initcall(void);
__attribute__((weak)) int __tlbkit_arch_initcall(void);
__attribute__((weak)) int __tlbkit_subsys_initcall(void);
__attribute__((weak)) int __tlbkit_late_initcall(void);

/* Runs the file's initcalls in the kernel's order; nonzero if one failed. */
int tlbkit_initcalls(void)
{
	int r = 0;

	if (__tlbkit_early_initcall)
		r |= __tlbkit_early_initcall();
	if (__tlbkit_core_initcall)
		r |= __tlbkit_core_initcall();
	if (__tlbkit_arch_initcall)
		r |= __tlbkit_arch_initcall();
	if (__tlbkit_subsys_initcall)
		r |= __tlbkit_subsys_initcall();
	if (__tlbkit_late_initcall)
		r |= __tlbkit_late_initcall();
	return r;
}
