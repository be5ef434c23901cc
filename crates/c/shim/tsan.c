// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The sanitizer runtime the compiler's instrumentation of a kernel file calls
 * in the checker's build (as KCSAN and KCOV provide their own in the kernel):
 * every plain load and store of the file goes to tlbkit_ops.plain with its
 * address, size and the code address that made it, and every basic block
 * the file runs to tlbkit_ops.reached (-fsanitize-coverage=trace-pc), which
 * a check's report reads as the lines it reached. Built without
 * instrumentation.
 */
#include <tlbkit/ops.h>

#define TLBKIT_RET __builtin_return_address(0)
#define TLBKIT_TSAN(n)								\
	void __tsan_read##n(void *p) { tlbkit_ops.plain(p, n, 0, TLBKIT_RET); }		\
	void __tsan_write##n(void *p) { tlbkit_ops.plain(p, n, 1, TLBKIT_RET); }		\
	void __tsan_unaligned_read##n(void *p) { tlbkit_ops.plain(p, n, 0, TLBKIT_RET); }	\
	void __tsan_unaligned_write##n(void *p) { tlbkit_ops.plain(p, n, 1, TLBKIT_RET); }	\
	void __tsan_volatile_read##n(void *p) { tlbkit_ops.plain(p, n, 0, TLBKIT_RET); }	\
	void __tsan_volatile_write##n(void *p) { tlbkit_ops.plain(p, n, 1, TLBKIT_RET); }
TLBKIT_TSAN(1)
TLBKIT_TSAN(2)
TLBKIT_TSAN(4)
TLBKIT_TSAN(8)
TLBKIT_TSAN(16)
void __tsan_read_range(void *p, unsigned long n) { tlbkit_ops.plain(p, (int)n, 0, TLBKIT_RET); }
void __tsan_write_range(void *p, unsigned long n) { tlbkit_ops.plain(p, (int)n, 1, TLBKIT_RET); }
void __tsan_func_entry(void *pc) { (void)pc; }
void __tsan_func_exit(void) { }
void __tsan_init(void) { }
void __tsan_vptr_update(void **p, void *v) { (void)p; (void)v; }
void __tsan_vptr_read(void **p) { (void)p; }
/* Also called by the object's constructors, before tlbkit fills the table. */
void __sanitizer_cov_trace_pc(void)
{
	if (tlbkit_ops.reached)
		tlbkit_ops.reached(TLBKIT_RET);
}
