/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * tlbkit's shim of the Linux kernel, for compiling an arm64 memory-management
 * file (arch/arm64/mm/context.c and the headers it uses) into a policy that
 * tlbkit's checker and simulator run.
 *
 * Every header of <linux/...> and <asm/...> that such a file includes comes
 * here, except asm/mmu_context.h and the two a developer may give tlbkit in
 * place of ours (asm/mmu.h, asm/tlbflush.h). What this file declares is
 * the kernel's interface, reimplemented: each marked access (READ_ONCE,
 * WRITE_ONCE, atomic64_*, refcount_*, test_and_*_bit) is a call into
 * tlbkit_ops, so that the checker sees and schedules it as it does a Rust
 * policy's atomics; locks, barriers, TLB maintenance and system-register
 * writes go to the same machine a Rust policy's Hw calls reach. Plain
 * accesses stay plain C: the compiler's thread-sanitizer instrumentation
 * reports each one (as KCSAN's does), and tlbkit checks that a plain access
 * to shared memory is made under a lock or by the only CPU that touches it.
 *
 * Per-CPU variables are arrays of NR_CPUS (the machine's CPU count, given at
 * compile time); the CPU is tlbkit_ops.cpu(). Configuration the kernel reads
 * from Kconfig or CPU features is an option tlbkit sets: KPTI
 * (arm64_kernel_unmapped_at_el0), FEAT_TLBIRANGE (system_supports_tlb_range),
 * CNP (off unless asked), and the ASID width of ID_AA64MMFR0_EL1.
 */
#ifndef TLBKIT_KERNEL_H
#define TLBKIT_KERNEL_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <tlbkit/ops.h>

#ifndef NR_CPUS
#error "tlbkit compiles with -DNR_CPUS=<the machine's CPUs>"
#endif
#define CONFIG_NR_CPUS NR_CPUS
#define CONFIG_ARM64 1
#define CONFIG_ARM64_4K_PAGES 1
#define CONFIG_SMP 1
#define CONFIG_ARM64_PAN 1

/* asm statements of a kernel file, translated by tlbkit into calls of this. */
#define tlbkit_asm(tmpl, names, ops) tlbkit_ops.run_asm(tmpl, names, ops)
#define ARM64_ASM_PREAMBLE ""
#define ALTERNATIVE(oldinstr, newinstr, ...) oldinstr
#define SZ_4K 0x1000
#define SZ_16K 0x4000
#define __iomem
typedef struct { unsigned long long pgprot; } pgprot_t;

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
#define dsb(opt) tlbkit_ops.fence(TLBKIT_DSB_##opt)
#define TLBKIT_DSB_nsh TLBKIT_DSB_NSH
#define TLBKIT_DSB_ish TLBKIT_DSB_ISH
#define TLBKIT_DSB_nshst TLBKIT_DSB_NSHST
#define TLBKIT_DSB_ishst TLBKIT_DSB_ISHST
#define isb() tlbkit_ops.fence(TLBKIT_ISB)
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
#define DEFINE_PER_CPU(type, name) __typeof__(type) name[NR_CPUS]
#define DECLARE_PER_CPU(type, name) extern __typeof__(type) name[NR_CPUS]
#define per_cpu(var, cpu) ((var)[(cpu)])
#define per_cpu_ptr(ptr, cpu) (&(*(ptr))[(cpu)])
#define this_cpu_ptr(ptr) per_cpu_ptr(ptr, smp_processor_id())
#define raw_cpu_ptr(ptr) this_cpu_ptr(ptr)
#define __this_cpu_read(var) ((var)[smp_processor_id()])
#define this_cpu_read(var) READ_ONCE((var)[smp_processor_id()])
#define this_cpu_write(var, v) WRITE_ONCE((var)[smp_processor_id()], v)

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

/* ---- CPU identification and features (options of the machine) ---- */
#define ID_AA64MMFR0_EL1 TLBKIT_ID_AA64MMFR0_EL1
#define ID_AA64MMFR0_ASID_SHIFT 4
#define ID_AA64MMFR0_EL1_ASIDBITS_SHIFT 4
#define ID_AA64MMFR0_EL1_ASIDBITS_8 0
#define ID_AA64MMFR0_EL1_ASIDBITS_16 2
#define read_cpuid(reg) tlbkit_read_sysreg(reg)
static inline unsigned int cpuid_feature_extract_unsigned_field(u64 features, int field) { return (features >> field) & 0xf; }
static inline bool system_supports_cnp(void) { return tlbkit_cnp; }
static inline bool system_supports_tlb_range(void) { return tlbkit_tlbi_range; }
static inline bool system_uses_ttbr0_pan(void) { return false; }
static inline bool system_supports_lpa2(void) { return false; }
static inline bool lpa2_is_enabled(void) { return false; }
static inline void arm64_apply_bp_hardening(void) { }
/* CPU capabilities by name: the three tlbkit models are options, every other one is absent. */
static inline bool tlbkit_streq(const char *a, const char *b)
{
	while (*a && *a == *b)
		a++, b++;
	return *a == *b;
}
static inline bool tlbkit_cap(const char *cap)
{
	if (tlbkit_streq(cap, "ARM64_UNMAP_KERNEL_AT_EL0"))
		return tlbkit_kpti;
	if (tlbkit_streq(cap, "ARM64_HAS_CNP"))
		return tlbkit_cnp;
	if (tlbkit_streq(cap, "ARM64_HAS_TLB_RANGE"))
		return tlbkit_tlbi_range;
	return false;
}
#define cpus_have_const_cap(cap) tlbkit_cap(#cap)
#define cpus_have_cap(cap) tlbkit_cap(#cap)
#define cpus_have_final_cap(cap) tlbkit_cap(#cap)
#define alternative_has_cap_unlikely(cap) tlbkit_cap(#cap)
#define alternative_has_cap_likely(cap) tlbkit_cap(#cap)
#define FALKOR_RESERVED_ASID 1
#define cpu_panic_kernel() tlbkit_ops.bug("cpu_panic_kernel", __FILE__, __LINE__)

/*
 * The ASID width: the checker explores ASID spaces far smaller than the 8 or
 * 16 bits of ID_AA64MMFR0_EL1.ASIDBits, which the kernel's switch in
 * get_cpu_asid_bits() cannot express. When tlbkit is asked for another
 * width, the function's result is replaced by it: the file's own definition
 * is renamed by the macro below (its definition `get_cpu_asid_bits(void)`
 * becomes `__tlbkit_get_cpu_asid_bits_void(void)`) and every call
 * `get_cpu_asid_bits()` goes through tlbkit_asid_bits().
 */
#define get_cpu_asid_bits(x) __tlbkit_get_cpu_asid_bits_##x(x)
#define __tlbkit_get_cpu_asid_bits_() tlbkit_asid_bits(__tlbkit_get_cpu_asid_bits_void())
static inline u32 tlbkit_asid_bits(u32 from_file) { return tlbkit_asid_bits_option ? tlbkit_asid_bits_option : from_file; }

/* ---- system registers ---- */
#define TLBKIT_SYSREG_ttbr0_el1 TLBKIT_TTBR0_EL1
#define TLBKIT_SYSREG_ttbr1_el1 TLBKIT_TTBR1_EL1
#define TLBKIT_SYSREG_tcr_el1 TLBKIT_TCR_EL1
#define read_sysreg(r) tlbkit_read_sysreg(TLBKIT_SYSREG_##r)
#define write_sysreg(v, r) tlbkit_write_sysreg(TLBKIT_SYSREG_##r, (tlbkit_u64)(v))
#define TTBR_CNP_BIT (1UL << 0)
#define TCR_A1 (1UL << 22)
#define TCR_TG1_SHIFT 30
#define TCR_TG1_MASK (3UL << TCR_TG1_SHIFT)

/* ---- pages and address spaces ---- */
typedef struct { u64 pgd; } pgd_t;
typedef struct { u64 pte; } pte_t;
struct page;
struct task_struct;
/* The kernel's address space; tlbkit's page tables are its own, so pgd only names the mm. */
#include <asm/mmu.h>
struct mm_struct {
	pgd_t *pgd;
	mm_context_t context;
	atomic_t mm_users;
	atomic_t mm_count;
	struct cpumask cpu_bitmap;
};
struct vm_area_struct {
	struct mm_struct *vm_mm;
	unsigned long vm_start, vm_end, vm_flags;
};
extern struct mm_struct init_mm;
/* Tables are tlbkit's own: these addresses only name them (nothing dereferences a pgd). */
#define TLBKIT_PGD_BASE 0x40000000UL
#define swapper_pg_dir ((pgd_t *)0x10000000UL)
#define reserved_pg_dir ((pgd_t *)0x20000000UL)
#define empty_zero_page ((void *)0x20000000UL)
#define idmap_pg_dir ((pgd_t *)0x30000000UL)
#define mm_cpumask(mm) (&(mm)->cpu_bitmap)
#define __pa_symbol(x) ((phys_addr_t)(unsigned long)(x))
#define virt_to_phys(x) ((phys_addr_t)(unsigned long)(x))
#define __pa(x) virt_to_phys(x)
#define phys_to_ttbr(addr) ((u64)(addr))
#define pgd_val(x) ((x).pgd)

#endif
