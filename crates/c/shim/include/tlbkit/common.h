/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * tlbkit's shim of the Linux kernel: what every architecture's shims share
 * (tlbkit/kernel.h for arm64, tlbkit/x86.h for x86). Types and macros, the
 * diagnostics (each a tlbkit_ops.bug), the marked accesses (READ_ONCE,
 * WRITE_ONCE, atomics, refcounts, atomic bitops: each a call into tlbkit_ops,
 * so that the checker sees and schedules it), spin locks, CPUs, bitmaps,
 * cpumasks, allocation and initcalls. Plain accesses stay plain C. What
 * differs between the architectures (per-CPU variables, barriers, TLB
 * maintenance, the page-table roots, CPU features) is each one's own.
 */
#ifndef TLBKIT_COMMON_H
#define TLBKIT_COMMON_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <tlbkit/ops.h>

#ifndef NR_CPUS
#error "tlbkit compiles with -DNR_CPUS=<the machine's CPUs>"
#endif
#define CONFIG_NR_CPUS NR_CPUS
#define CONFIG_SMP 1

/* ---- types ---- */
typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int8_t s8;
typedef int16_t s16;
typedef int32_t s32;
typedef int64_t s64;
typedef u64 phys_addr_t;
typedef unsigned int gfp_t;
#define GFP_KERNEL 0u
#define GFP_ATOMIC 0u
#define __init
#define __initdata
#define __ro_after_init
#define __read_mostly
#define __always_inline inline __attribute__((always_inline))
#define noinline __attribute__((noinline))
#define __maybe_unused __attribute__((unused))
#define __must_check
#define notrace
#define asmlinkage
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define fallthrough __attribute__((__fallthrough__))
#define __stringify_1(x...) #x
#define __stringify(x...) __stringify_1(x)
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define EXPORT_SYMBOL(s)
#define EXPORT_SYMBOL_GPL(s)
/* IS_ENABLED(CONFIG_X): 1 when CONFIG_X is defined to 1 (the kernel's trick: kconfig.h). */
#define __TLBKIT_PLACEHOLDER_1 0,
#define __tlbkit_second(ignored, val, ...) val
#define __tlbkit_is_defined(x) ___tlbkit_is_defined(x)
#define ___tlbkit_is_defined(val) ____tlbkit_is_defined(__TLBKIT_PLACEHOLDER_##val)
#define ____tlbkit_is_defined(arg1_or_junk) __tlbkit_second(arg1_or_junk 1, 0)
#define IS_ENABLED(option) __tlbkit_is_defined(option)
#define IS_BUILTIN(option) __tlbkit_is_defined(option)
#define min(a, b) ((a) < (b) ? (a) : (b))
#define max(a, b) ((a) > (b) ? (a) : (b))
#define min_t(t, a, b) ((t)(a) < (t)(b) ? (t)(a) : (t)(b))
#define max_t(t, a, b) ((t)(a) > (t)(b) ? (t)(a) : (t)(b))
#define DIV_ROUND_UP(n, d) (((n) + (d) - 1) / (d))
#define _AC(x, y) (x##y)
#define _UL(x) (_AC(x, UL))
#define _ULL(x) (_AC(x, ULL))
#define UL(x) (_UL(x))
#define ULL(x) (_ULL(x))
#define BIT(n) (1UL << (n))
#define BIT_ULL(n) (1ULL << (n))
#define BITS_PER_LONG 64
#define BITS_PER_LONG_LONG 64
#define BITS_TO_LONGS(n) DIV_ROUND_UP(n, BITS_PER_LONG)
#define GENMASK(h, l) (((~0UL) - (1UL << (l)) + 1) & (~0UL >> (BITS_PER_LONG - 1 - (h))))
#define GENMASK_ULL(h, l) (((~0ULL) - (1ULL << (l)) + 1) & (~0ULL >> (63 - (h))))
#define __bf_shf(x) (__builtin_ffsll(x) - 1)
#define FIELD_PREP(mask, val) (((typeof(mask))(val) << __bf_shf(mask)) & (mask))
#define FIELD_GET(mask, reg) ((typeof(mask))(((reg) & (mask)) >> __bf_shf(mask)))
#define PAGE_SHIFT 12
#define PAGE_SIZE (1UL << PAGE_SHIFT)
#define PAGE_MASK (~(PAGE_SIZE - 1))
#define PTRS_PER_PTE 512
#define PMD_SIZE (1UL << 21)
#define PUD_SIZE (1UL << 30)
#define CONT_PTE_SHIFT 16
#define round_down(x, y) ((x) & ~((__typeof__(x))((y) - 1)))
#define round_up(x, y) ((((x) - 1) | ((__typeof__(x))((y) - 1))) + 1)
#define ALIGN(x, a) round_up(x, a)
#define IS_ALIGNED(x, a) (((x) & ((__typeof__(x))(a) - 1)) == 0)
#define SZ_64K 0x10000

/* ---- diagnostics ---- */
#define BUG() tlbkit_ops.bug("BUG", __FILE__, __LINE__)
#define BUG_ON(c) do { if (unlikely(c)) tlbkit_ops.bug("BUG_ON(" #c ")", __FILE__, __LINE__); } while (0)
#define WARN_ON(c) ({ int __w = !!(c); if (unlikely(__w)) tlbkit_ops.bug("WARN_ON(" #c ")", __FILE__, __LINE__); unlikely(__w); })
#define WARN_ON_ONCE(c) WARN_ON(c)
#define WARN(c, fmt...) WARN_ON(c)
#define VM_BUG_ON(c) BUG_ON(c)
#define VM_WARN_ON(c) ((void)WARN_ON(c))
#define BUILD_BUG_ON(c) _Static_assert(!(c), #c)
#define panic(fmt...) tlbkit_ops.bug("panic", __FILE__, __LINE__)
#define pr_fmt(fmt) fmt
#define printk(fmt...) do { } while (0)
#define pr_info(fmt...) do { } while (0)
#define pr_warn(fmt...) do { } while (0)
#define pr_err(fmt...) do { } while (0)
#define pr_crit(fmt...) do { } while (0)
#define pr_debug(fmt...) do { } while (0)
#define lockdep_assert_held(l) do { } while (0)
#define lockdep_assert_irqs_disabled() do { } while (0)
#define might_sleep() do { } while (0)

/* ---- compiler and marked accesses ---- */
#define barrier() __asm__ __volatile__("" ::: "memory")
#define READ_ONCE(x) ((__typeof__(x))tlbkit_ops.load(&(x), sizeof(x)))
#define WRITE_ONCE(x, v) tlbkit_ops.store(&(x), sizeof(x), (tlbkit_u64)(v))
#define smp_mb() tlbkit_ops.fence(TLBKIT_SMP_MB)
#define smp_rmb() tlbkit_ops.fence(TLBKIT_SMP_RMB)
#define smp_wmb() tlbkit_ops.fence(TLBKIT_SMP_WMB)
#define smp_mb__before_atomic() smp_mb()
#define smp_mb__after_atomic() smp_mb()
#define mb() smp_mb()
#define rmb() smp_rmb()
#define wmb() smp_wmb()
#define cpu_relax() tlbkit_ops.relax()

/* ---- atomics (arch_atomic64_* of arm64 are LSE or LL/SC: one RMW each) ---- */
typedef struct { int counter; } atomic_t;
typedef struct { s64 counter; } atomic64_t;
typedef atomic64_t atomic_long_t;
#define ATOMIC_INIT(i) { (i) }
#define ATOMIC64_INIT(i) { (i) }
#define __tlbkit_rmw(v, kind, order, a, b) tlbkit_ops.rmw(&(v)->counter, sizeof((v)->counter), kind, order, (tlbkit_u64)(a), (tlbkit_u64)(b))
static inline s64 atomic64_read(const atomic64_t *v) { return (s64)tlbkit_ops.load(&v->counter, 8); }
static inline void atomic64_set(atomic64_t *v, s64 i) { tlbkit_ops.store(&v->counter, 8, (tlbkit_u64)i); }
#define __TLBKIT_A64(name, kind, order) \
	static inline s64 name(atomic64_t *v, s64 n) { return (s64)__tlbkit_rmw(v, kind, order, n, 0); }
__TLBKIT_A64(atomic64_xchg, TLBKIT_XCHG, TLBKIT_FULL)
__TLBKIT_A64(atomic64_xchg_relaxed, TLBKIT_XCHG, TLBKIT_RELAXED)
__TLBKIT_A64(atomic64_xchg_acquire, TLBKIT_XCHG, TLBKIT_ACQUIRE)
__TLBKIT_A64(atomic64_xchg_release, TLBKIT_XCHG, TLBKIT_RELEASE)
__TLBKIT_A64(atomic64_fetch_add, TLBKIT_ADD, TLBKIT_FULL)
__TLBKIT_A64(atomic64_fetch_add_relaxed, TLBKIT_ADD, TLBKIT_RELAXED)
__TLBKIT_A64(atomic64_fetch_or, TLBKIT_OR, TLBKIT_FULL)
__TLBKIT_A64(atomic64_fetch_andnot, TLBKIT_ANDNOT, TLBKIT_FULL)
static inline s64 atomic64_add_return(s64 n, atomic64_t *v) { return (s64)__tlbkit_rmw(v, TLBKIT_ADD, TLBKIT_FULL, n, 0) + n; }
static inline s64 atomic64_add_return_relaxed(s64 n, atomic64_t *v) { return (s64)__tlbkit_rmw(v, TLBKIT_ADD, TLBKIT_RELAXED, n, 0) + n; }
static inline void atomic64_add(s64 n, atomic64_t *v) { __tlbkit_rmw(v, TLBKIT_ADD, TLBKIT_RELAXED, n, 0); }
static inline void atomic64_inc(atomic64_t *v) { atomic64_add(1, v); }
static inline void atomic64_dec(atomic64_t *v) { atomic64_add(-1, v); }
static inline s64 atomic64_cmpxchg(atomic64_t *v, s64 o, s64 n) { return (s64)__tlbkit_rmw(v, TLBKIT_CMPXCHG, TLBKIT_FULL, o, n); }
static inline s64 atomic64_cmpxchg_relaxed(atomic64_t *v, s64 o, s64 n) { return (s64)__tlbkit_rmw(v, TLBKIT_CMPXCHG, TLBKIT_RELAXED, o, n); }
static inline s64 atomic64_cmpxchg_acquire(atomic64_t *v, s64 o, s64 n) { return (s64)__tlbkit_rmw(v, TLBKIT_CMPXCHG, TLBKIT_ACQUIRE, o, n); }
static inline s64 atomic64_cmpxchg_release(atomic64_t *v, s64 o, s64 n) { return (s64)__tlbkit_rmw(v, TLBKIT_CMPXCHG, TLBKIT_RELEASE, o, n); }
static inline bool atomic64_try_cmpxchg_relaxed(atomic64_t *v, s64 *o, s64 n) {
	s64 r = atomic64_cmpxchg_relaxed(v, *o, n);
	bool ok = r == *o;
	*o = r;
	return ok;
}
static inline int atomic_read(const atomic_t *v) { return (int)tlbkit_ops.load(&v->counter, 4); }
static inline void atomic_set(atomic_t *v, int i) { tlbkit_ops.store(&v->counter, 4, (tlbkit_u64)(u32)i); }
static inline int atomic_add_return(int n, atomic_t *v) { return (int)__tlbkit_rmw(v, TLBKIT_ADD, TLBKIT_FULL, (u32)n, 0) + n; }
static inline void atomic_inc(atomic_t *v) { __tlbkit_rmw(v, TLBKIT_ADD, TLBKIT_RELAXED, 1, 0); }
static inline void atomic_dec(atomic_t *v) { __tlbkit_rmw(v, TLBKIT_ADD, TLBKIT_RELAXED, (u32)-1, 0); }
static inline int atomic_inc_return(atomic_t *v) { return atomic_add_return(1, v); }
static inline int atomic_dec_return(atomic_t *v) { return atomic_add_return(-1, v); }
static inline bool atomic_dec_and_test(atomic_t *v) { return atomic_dec_return(v) == 0; }

/* refcount_t: an atomic_t (saturation checks are not modelled). */
typedef struct { atomic_t refs; } refcount_t;
#define REFCOUNT_INIT(n) { .refs = ATOMIC_INIT(n) }
static inline unsigned int refcount_read(const refcount_t *r) { return (unsigned int)atomic_read(&r->refs); }
static inline void refcount_set(refcount_t *r, int n) { atomic_set(&r->refs, n); }
static inline void refcount_inc(refcount_t *r) { atomic_inc(&r->refs); }
static inline bool refcount_dec_and_test(refcount_t *r) { return atomic_dec_and_test(&r->refs); }
static inline bool refcount_inc_not_zero(refcount_t *r)
{
	int old = atomic_read(&r->refs);

	for (;;) {
		int seen;

		if (!old)
			return false;
		seen = (int)__tlbkit_rmw(&r->refs, TLBKIT_CMPXCHG, TLBKIT_RELAXED, (u32)old, (u32)(old + 1));
		if (seen == old)
			return true;
		old = seen;
	}
}

/* ---- locks: raw spin locks with interrupts off (the flags are unused) ---- */
typedef struct { tlbkit_u64 word; } raw_spinlock_t;
typedef raw_spinlock_t spinlock_t;
#define __RAW_SPIN_LOCK_UNLOCKED(name) { 0 }
#define DEFINE_RAW_SPINLOCK(name) raw_spinlock_t name = __RAW_SPIN_LOCK_UNLOCKED(name)
#define DEFINE_SPINLOCK(name) spinlock_t name = __RAW_SPIN_LOCK_UNLOCKED(name)
#define raw_spin_lock_init(l) ((l)->word = 0)
#define raw_spin_lock(l) tlbkit_ops.lock(&(l)->word)
#define raw_spin_unlock(l) tlbkit_ops.unlock(&(l)->word)
#define raw_spin_lock_irqsave(l, flags) do { (flags) = 0; raw_spin_lock(l); } while (0)
#define raw_spin_unlock_irqrestore(l, flags) do { (void)(flags); raw_spin_unlock(l); } while (0)
#define spin_lock(l) raw_spin_lock(l)
#define spin_unlock(l) raw_spin_unlock(l)
#define spin_lock_irqsave(l, f) raw_spin_lock_irqsave(l, f)
#define spin_unlock_irqrestore(l, f) raw_spin_unlock_irqrestore(l, f)
#define local_irq_save(flags) ((flags) = 0)
#define local_irq_restore(flags) ((void)(flags))
#define preempt_disable() do { } while (0)
#define preempt_enable() do { } while (0)

/* ---- CPUs and per-CPU variables ---- */
#define smp_processor_id() ((int)tlbkit_ops.cpu())
#define raw_smp_processor_id() smp_processor_id()
#define nr_cpu_ids ((unsigned int)NR_CPUS)
#define num_possible_cpus() ((unsigned int)NR_CPUS)
#define num_online_cpus() ((unsigned int)NR_CPUS)
#define for_each_possible_cpu(cpu) for ((cpu) = 0; (cpu) < NR_CPUS; (cpu)++)
#define for_each_online_cpu(cpu) for_each_possible_cpu(cpu)

/* ---- bit operations: the __ forms are plain, the others atomic ---- */
#define BIT_WORD(nr) ((nr) / BITS_PER_LONG)
#define BIT_MASK(nr) (1UL << ((nr) % BITS_PER_LONG))
static inline void __set_bit(unsigned long nr, volatile unsigned long *addr) { ((unsigned long *)addr)[BIT_WORD(nr)] |= BIT_MASK(nr); }
static inline void __clear_bit(unsigned long nr, volatile unsigned long *addr) { ((unsigned long *)addr)[BIT_WORD(nr)] &= ~BIT_MASK(nr); }
static inline bool test_bit(unsigned long nr, const volatile unsigned long *addr) { return 1UL & (((const unsigned long *)addr)[BIT_WORD(nr)] >> (nr % BITS_PER_LONG)); }
static inline bool __test_and_set_bit(unsigned long nr, volatile unsigned long *addr) {
	bool old = test_bit(nr, addr);
	__set_bit(nr, addr);
	return old;
}
static inline bool __test_and_clear_bit(unsigned long nr, volatile unsigned long *addr) {
	bool old = test_bit(nr, addr);
	__clear_bit(nr, addr);
	return old;
}
static inline void set_bit(unsigned long nr, volatile unsigned long *addr) {
	tlbkit_ops.rmw(&addr[BIT_WORD(nr)], 8, TLBKIT_OR, TLBKIT_RELAXED, BIT_MASK(nr), 0);
}
static inline void clear_bit(unsigned long nr, volatile unsigned long *addr) {
	tlbkit_ops.rmw(&addr[BIT_WORD(nr)], 8, TLBKIT_ANDNOT, TLBKIT_RELAXED, BIT_MASK(nr), 0);
}
/*
 * Fully ordered atomics whatever they find, as from v6.0 (415d83249709) and
 * in arm64's own bitops before v4.19; with bitops=v4.19 (tlbkit_early_bitops)
 * as the generic ones of v4.19 to v5.19, which return after a plain read when
 * the bit is already as they would leave it.
 */
static inline bool test_and_set_bit(unsigned long nr, volatile unsigned long *addr) {
	if (tlbkit_early_bitops && (tlbkit_ops.load(&addr[BIT_WORD(nr)], 8) & BIT_MASK(nr)))
		return 1;
	return tlbkit_ops.rmw(&addr[BIT_WORD(nr)], 8, TLBKIT_OR, TLBKIT_FULL, BIT_MASK(nr), 0) & BIT_MASK(nr);
}
static inline bool test_and_clear_bit(unsigned long nr, volatile unsigned long *addr) {
	if (tlbkit_early_bitops && !(tlbkit_ops.load(&addr[BIT_WORD(nr)], 8) & BIT_MASK(nr)))
		return 0;
	return tlbkit_ops.rmw(&addr[BIT_WORD(nr)], 8, TLBKIT_ANDNOT, TLBKIT_FULL, BIT_MASK(nr), 0) & BIT_MASK(nr);
}
static inline unsigned long find_next_bit_(const unsigned long *addr, unsigned long size, unsigned long offset, unsigned long invert) {
	for (unsigned long i = offset; i < size; i++)
		if (((addr[BIT_WORD(i)] ^ invert) >> (i % BITS_PER_LONG)) & 1)
			return i;
	return size;
}
static inline unsigned long find_next_zero_bit(const unsigned long *addr, unsigned long size, unsigned long offset) { return find_next_bit_(addr, size, offset, ~0UL); }
static inline unsigned long find_next_bit(const unsigned long *addr, unsigned long size, unsigned long offset) { return find_next_bit_(addr, size, offset, 0); }
static inline unsigned long find_first_zero_bit(const unsigned long *addr, unsigned long size) { return find_next_zero_bit(addr, size, 0); }
static inline unsigned long find_first_bit(const unsigned long *addr, unsigned long size) { return find_next_bit(addr, size, 0); }
#define for_each_set_bit(bit, addr, size) \
	for ((bit) = find_first_bit((addr), (size)); (bit) < (size); (bit) = find_next_bit((addr), (size), (bit) + 1))

/* ---- memory ---- */
void *memset(void *s, int c, size_t n);
void *memcpy(void *d, const void *s, size_t n);
/* The file's initcalls in the kernel's order (common.c); nonzero if one failed. */
int tlbkit_initcalls(void);
static inline void *kzalloc(size_t n, gfp_t f) { (void)f; return memset(tlbkit_ops.alloc(n), 0, n); }
static inline void *kmalloc(size_t n, gfp_t f) { (void)f; return tlbkit_ops.alloc(n); }
static inline void *kcalloc(size_t k, size_t n, gfp_t f) { return kzalloc(k * n, f); }
static inline void kfree(const void *p) { tlbkit_ops.free((void *)p); }
static inline unsigned long *bitmap_zalloc(unsigned int bits, gfp_t f) { return kzalloc(BITS_TO_LONGS(bits) * sizeof(unsigned long), f); }
static inline unsigned long *bitmap_alloc(unsigned int bits, gfp_t f) { return kmalloc(BITS_TO_LONGS(bits) * sizeof(unsigned long), f); }
static inline void bitmap_free(const unsigned long *b) { kfree(b); }
static inline void bitmap_zero(unsigned long *dst, unsigned int nbits) { memset(dst, 0, BITS_TO_LONGS(nbits) * sizeof(unsigned long)); }
static inline void bitmap_fill(unsigned long *dst, unsigned int nbits) {
	unsigned int n = BITS_TO_LONGS(nbits);
	for (unsigned int i = 0; i < n; i++)
		dst[i] = ~0UL;
	if (nbits % BITS_PER_LONG)
		dst[n - 1] &= ~0UL >> (BITS_PER_LONG - nbits % BITS_PER_LONG);
}
static inline void bitmap_copy(unsigned long *dst, const unsigned long *src, unsigned int nbits) {
	for (unsigned int i = 0; i < BITS_TO_LONGS(nbits); i++)
		dst[i] = src[i];
}
#define DECLARE_BITMAP(name, bits) unsigned long name[BITS_TO_LONGS(bits)]
/* dst = a & ~b, every word (the padding past nbits too, as the kernel's does). */
static inline void bitmap_andnot(unsigned long *dst, const unsigned long *a, const unsigned long *b, unsigned int nbits) {
	for (unsigned int i = 0; i < BITS_TO_LONGS(nbits); i++)
		dst[i] = a[i] & ~b[i];
}
static inline void bitmap_set(unsigned long *map, unsigned int start, unsigned int n) {
	for (unsigned int i = start; i < start + n; i++)
		__set_bit(i, map);
}
static inline void bitmap_clear(unsigned long *map, unsigned int start, unsigned int n) {
	for (unsigned int i = start; i < start + n; i++)
		__clear_bit(i, map);
}
static inline unsigned int bitmap_weight(const unsigned long *src, unsigned int nbits) {
	unsigned int w = 0;
	for (unsigned int i = 0; i < nbits; i++)
		w += test_bit(i, src);
	return w;
}

/* ---- cpumask ---- */
typedef struct cpumask { unsigned long bits[BITS_TO_LONGS(NR_CPUS)]; } cpumask_t;
typedef struct cpumask cpumask_var_t[1];
#define cpumask_bits(m) ((m)->bits)
#define nr_cpumask_bits ((unsigned int)NR_CPUS)
/*
 * A cpumask's words are written with marked stores even where the kernel's
 * bitmap_fill is plain: its bits are also tested and cleared atomically, and
 * the checker sees every store to a word it sees atomics on.
 */
static inline void cpumask_setall(struct cpumask *m)
{
	for (unsigned int i = 0; i < BITS_TO_LONGS(NR_CPUS); i++) {
		unsigned long w = ~0UL;

		if (i == BITS_TO_LONGS(NR_CPUS) - 1 && NR_CPUS % BITS_PER_LONG)
			w >>= BITS_PER_LONG - NR_CPUS % BITS_PER_LONG;
		tlbkit_ops.store(&m->bits[i], 8, w);
	}
}
static inline void cpumask_clear(struct cpumask *m)
{
	for (unsigned int i = 0; i < BITS_TO_LONGS(NR_CPUS); i++)
		tlbkit_ops.store(&m->bits[i], 8, 0);
}
static inline void cpumask_set_cpu(unsigned int cpu, struct cpumask *m) { set_bit(cpu, m->bits); }
static inline void cpumask_clear_cpu(unsigned int cpu, struct cpumask *m) { clear_bit(cpu, m->bits); }
static inline bool cpumask_test_cpu(int cpu, const struct cpumask *m) { return test_bit(cpu, m->bits); }
static inline bool cpumask_test_and_clear_cpu(int cpu, struct cpumask *m) { return test_and_clear_bit(cpu, m->bits); }
static inline bool cpumask_test_and_set_cpu(int cpu, struct cpumask *m) { return test_and_set_bit(cpu, m->bits); }

/* ---- initcalls: tlbkit calls them, in this order, when it builds the policy ---- */
#define early_initcall(fn) int __tlbkit_early_initcall(void) { return fn(); }
#define arch_initcall(fn) int __tlbkit_arch_initcall(void) { return fn(); }
#define core_initcall(fn) int __tlbkit_core_initcall(void) { return fn(); }
#define subsys_initcall(fn) int __tlbkit_subsys_initcall(void) { return fn(); }
#define late_initcall(fn) int __tlbkit_late_initcall(void) { return fn(); }

#endif
