/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * tlbkit's shim of the Linux kernel for compiling x86's arch/x86/mm/tlb.c
 * into a policy that tlbkit's checker and simulator run. Every <linux/...>
 * and <asm/...> header such a file includes comes here, except the ones of
 * the x86 tree that are files of their own (asm/tlbflush.h, asm/mmu.h,
 * asm/mmu_context.h, asm/tlb.h, asm/invpcid.h, mm_internal.h).
 *
 * What differs from arm64's (tlbkit/kernel.h):
 * - per-CPU variables are the kernel's own design: each DEFINE_PER_CPU is
 *   CPU 0's copy, in the section tlbkit_percpu; the glue gives every other
 *   CPU a copy of the whole section (tlbkit_percpu_copies) and
 *   per_cpu_ptr() adds the CPU's offset, so this_cpu_read(cpu_tlbstate.
 *   loaded_mm) reads a member of a per-CPU struct as the kernel's does;
 *   this_cpu_read/write are marked accesses (one gs-relative instruction),
 *   per_cpu() a plain one;
 * - interrupts: local_irq_save/disable are tlbkit_ops.irq, so that no IPI
 *   handler runs on a CPU in between (the checker's irqs_off);
 * - CPU features are options (tlbkit_x86_features): PCID, INVPCID, PTI,
 *   INVLPGB; Kconfig is a kernel for x86_64 with PTI and broadcast TLB
 *   flushes compiled in, without paravirt, perf events, LAM or DEBUG_VM
 *   (so VM_WARN_ON and VM_BUG_ON evaluate nothing, as in such a kernel);
 * - CR3 writes, INVLPG, INVPCID, INVLPGB and TLBSYNC are calls of the glue,
 *   which keeps each CPU's CR3 and tells the machine its root and PCID;
 * - IPIs (on_each_cpu_cond_mask and its kin) are the glue's, after
 *   kernel/smp.c: the sender picks the targets, runs the function itself
 *   if it is one, then sends and waits.
 */
#ifndef TLBKIT_X86_H
#define TLBKIT_X86_H

#include <tlbkit/common.h>

#define CONFIG_X86 1
#define CONFIG_X86_64 1
#define CONFIG_MITIGATION_PAGE_TABLE_ISOLATION 1
#define CONFIG_PAGE_TABLE_ISOLATION 1
#define CONFIG_BROADCAST_TLB_FLUSH 1
#define CONFIG_CPU_SUP_AMD 1
/*
 * Time. The simulator's jiffies are its clock's milliseconds (HZ = 1000).
 * The checker's clock gives a second per operation a CPU starts, which
 * would make every deadline a second away pass by the next operation (every
 * flush would trim mm_cpumask, and the pid & 0x1f sampling of
 * consider_global_asid would see jiffies step by 1000). In its build a jiffy
 * is an operation started (by any CPU) and a second is eight of them: a
 * deadline set at boot passes only in the longer shapes (9 to 12
 * operations), so a check meets flushes that trim the mask and, more often,
 * as in a running kernel, flushes that do not.
 */
#ifdef TLBKIT_CHECKER
#define HZ 8
#define TLBKIT_MS_PER_JIFFY 1000
#else
#define HZ 1000
#define TLBKIT_MS_PER_JIFFY 1
#endif

/* A kernel without CONFIG_DEBUG_VM: the VM_ checks compile but evaluate nothing. */
#undef VM_BUG_ON
#undef VM_WARN_ON
#define VM_BUG_ON(c) ((void)sizeof(!!(c)))
#define VM_WARN_ON(c) ((void)sizeof(!!(c)))
#define VM_WARN_ON_ONCE(c) ((void)sizeof(!!(c)))
#define VM_WARN_ONCE(c, fmt...) ((void)sizeof(!!(c)))
#define lockdep_assert_irqs_enabled() do { } while (0)
#define lockdep_assert_preemption_disabled() do { } while (0)
#define __visible
#define __user
#define __always_unused __attribute__((unused))
#define clamp_val(v, lo, hi) ((v) < (lo) ? (lo) : (v) > (hi) ? (hi) : (v))
#define PMD_SHIFT 21
#define PUD_SHIFT 30
#define __ASSEMBLY__not

/* ---- interrupts: the checker lets no IPI handler in between ---- */
#undef local_irq_save
#undef local_irq_restore
#undef raw_spin_lock_irqsave
#undef raw_spin_unlock_irqrestore
#define local_irq_disable() tlbkit_ops.irq(1)
#define local_irq_enable() tlbkit_ops.irq(0)
#define local_irq_save(flags) ((flags) = 0, tlbkit_ops.irq(1))
#define local_irq_restore(flags) ((void)(flags), tlbkit_ops.irq(0))
#define raw_local_irq_save(flags) local_irq_save(flags)
#define raw_local_irq_restore(flags) local_irq_restore(flags)
#define irqs_disabled() 1
#define raw_spin_lock_irqsave(l, flags) do { local_irq_save(flags); raw_spin_lock(l); } while (0)
#define raw_spin_unlock_irqrestore(l, flags) do { raw_spin_unlock(l); local_irq_restore(flags); } while (0)
#define in_nmi() 0
#define preemptible() 0
#define get_cpu() smp_processor_id()
#define put_cpu() do { } while (0)

/* ---- scope guards (linux/cleanup.h): guard(name)(args) ---- */
#define __tlbkit_cat2(a, b) a##b
#define __tlbkit_cat(a, b) __tlbkit_cat2(a, b)
#define __tlbkit_uniq(p) __tlbkit_cat(p, __COUNTER__)
#define guard(name) __tlbkit_guard_##name
static inline raw_spinlock_t *__tlbkit_lock_irq(raw_spinlock_t *l) { tlbkit_ops.irq(1); raw_spin_lock(l); return l; }
static inline void __tlbkit_unlock_irq(raw_spinlock_t **l) { raw_spin_unlock(*l); tlbkit_ops.irq(0); }
#define __tlbkit_guard_raw_spinlock_irqsave(l) \
	raw_spinlock_t *__tlbkit_uniq(__guard) __attribute__((cleanup(__tlbkit_unlock_irq))) = __tlbkit_lock_irq(l)
static inline int __tlbkit_irq_on(void) { tlbkit_ops.irq(1); return 0; }
static inline void __tlbkit_irq_off(int *unused) { (void)unused; tlbkit_ops.irq(0); }
#define __tlbkit_guard_irqsave() int __tlbkit_uniq(__guard) __attribute__((cleanup(__tlbkit_irq_off))) = __tlbkit_irq_on()
#define __tlbkit_guard_preempt() do { } while (0)

/* ---- per-CPU variables: CPU 0's copy in a section, the others at an offset ---- */
#define __tlbkit_percpu __attribute__((section("tlbkit_percpu")))
#define DEFINE_PER_CPU(type, name) __tlbkit_percpu __typeof__(type) name
#define DEFINE_PER_CPU_ALIGNED(type, name) __tlbkit_percpu __attribute__((aligned(64))) __typeof__(type) name
#define DEFINE_PER_CPU_SHARED_ALIGNED(type, name) DEFINE_PER_CPU_ALIGNED(type, name)
#define DEFINE_PER_CPU_READ_MOSTLY(type, name) DEFINE_PER_CPU(type, name)
#define DECLARE_PER_CPU(type, name) extern __typeof__(type) name
#define DECLARE_PER_CPU_ALIGNED(type, name) extern __typeof__(type) name
#define DECLARE_PER_CPU_SHARED_ALIGNED(type, name) extern __typeof__(type) name
#define DECLARE_PER_CPU_READ_MOSTLY(type, name) extern __typeof__(type) name
#define EXPORT_PER_CPU_SYMBOL(x)
#define EXPORT_PER_CPU_SYMBOL_GPL(x)
/* Where each CPU's copy of the section is, from CPU 0's (0 for CPU 0); set by the glue at boot. */
extern unsigned long tlbkit_percpu_offset[NR_CPUS];
#define per_cpu_ptr(ptr, cpu) ((__typeof__(ptr))((unsigned long)(ptr) + tlbkit_percpu_offset[(cpu)]))
#define this_cpu_ptr(ptr) per_cpu_ptr(ptr, smp_processor_id())
#define raw_cpu_ptr(ptr) this_cpu_ptr(ptr)
#define per_cpu(var, cpu) (*per_cpu_ptr(&(var), (cpu)))
#define this_cpu_read(pcp) READ_ONCE(*this_cpu_ptr(&(pcp)))
#define __this_cpu_read(pcp) this_cpu_read(pcp)
#define this_cpu_write(pcp, v) WRITE_ONCE(*this_cpu_ptr(&(pcp)), (v))
/* One instruction on this CPU's copy (no LOCK): a load and a store no other CPU makes. */
#define this_cpu_add_return(pcp, n) ({ \
	__typeof__(&(pcp)) __p = this_cpu_ptr(&(pcp)); \
	__typeof__(pcp) __v = (__typeof__(pcp))(READ_ONCE(*__p) + (n)); \
	WRITE_ONCE(*__p, __v); \
	__v; })
#define this_cpu_inc_return(pcp) this_cpu_add_return(pcp, 1)
#define this_cpu_dec(pcp) ((void)this_cpu_add_return(pcp, -1))
#define this_cpu_inc(pcp) ((void)this_cpu_add_return(pcp, 1))

/* ---- acquire and release (x86 is TSO: plain moves; the fences say so to the checker) ---- */
#define smp_load_acquire(p) ({ __typeof__(*(p)) __v = READ_ONCE(*(p)); smp_rmb(); __v; })
#define smp_store_release(p, v) do { smp_wmb(); WRITE_ONCE(*(p), (v)); } while (0)
static inline s64 atomic64_inc_return(atomic64_t *v) { return atomic64_add_return(1, v); }

/* ---- time: jiffies at HZ = 1000, as the machine gives it ---- */
#define jiffies (tlbkit_ops.now_jiffies() / TLBKIT_MS_PER_JIFFY)
#define time_after(a, b) ((long)((b) - (a)) < 0)

/* ---- CPU features: options of the machine (bits of tlbkit_x86_features) ---- */
enum {
	X86_FEATURE_PCID, X86_FEATURE_INVPCID, X86_FEATURE_INVPCID_SINGLE, X86_FEATURE_PTI,
	X86_FEATURE_INVLPGB, X86_FEATURE_PGE, X86_FEATURE_TLBKIT_NONE
};
extern unsigned int tlbkit_x86_features;
#define static_cpu_has(f) (!!(tlbkit_x86_features & (1u << (f))))
#define boot_cpu_has(f) static_cpu_has(f)
#define this_cpu_has(f) static_cpu_has(f)
#define cpu_feature_enabled(f) static_cpu_has(f)
/* Static keys of mitigations and perf: all off (a kernel booted without them). */
#define static_branch_likely(k) 0
#define static_branch_unlikely(k) 0
struct cpuinfo_x86 { int smt_active; };
DECLARE_PER_CPU(struct cpuinfo_x86, cpu_info);
extern u16 invlpgb_count_max;

/* ---- control registers ---- */
/*
 * The PCID space the file sizes its ASIDs from (MAX_ASID_AVAILABLE): the
 * hardware's 12 bits, or fewer when a check asks (--asids), so that a
 * search reaches the end of the global ASIDs. The CR3 the glue decodes
 * keeps the hardware's 12 bits (TLBKIT_CR3_PCID_HW_MASK).
 */
#ifndef TLBKIT_PCID_BITS
#define TLBKIT_PCID_BITS 12
#endif
#define X86_CR3_PCID_BITS TLBKIT_PCID_BITS
#define TLBKIT_CR3_PCID_HW_MASK 0xfffUL
#define X86_CR3_PCID_MASK ((1UL << X86_CR3_PCID_BITS) - 1)
#define X86_CR3_PTI_PCID_USER_BIT 11
#define X86_CR3_LAM_U57_BIT 61
#define X86_CR3_LAM_U48_BIT 62
#define X86_CR3_LAM_U57 (1UL << X86_CR3_LAM_U57_BIT)
#define X86_CR3_LAM_U48 (1UL << X86_CR3_LAM_U48_BIT)
#define CR3_NOFLUSH (1UL << 63)
#define CR3_ADDR_MASK 0x7ffffffffffff000UL
#define X86_CR4_PGE (1UL << 7)
#define X86_CR4_PCE (1UL << 8)
#define X86_CR4_PCIDE (1UL << 17)
unsigned long tlbkit_read_cr3(void);
void tlbkit_write_cr3(unsigned long cr3);
#define __native_read_cr3() tlbkit_read_cr3()
#define __read_cr3() tlbkit_read_cr3()
#define read_cr3_pa() (tlbkit_read_cr3() & CR3_ADDR_MASK)
#define native_write_cr3(v) tlbkit_write_cr3(v)
#define write_cr3(v) tlbkit_write_cr3(v)
unsigned long tlbkit_read_cr4(void);
void tlbkit_write_cr4(unsigned long cr4);
#define __read_cr4() tlbkit_read_cr4()
#define native_write_cr4(v) tlbkit_write_cr4(v)
void cr4_update_irqsoff(unsigned long set, unsigned long clear);
unsigned long cr4_read_shadow(void);
#define indirect_branch_prediction_barrier() do { } while (0)
#define MSR_IA32_FLUSH_CMD 0x10b
#define L1D_FLUSH 1
#define wrmsrq(msr, v) do { (void)(msr); (void)(v); } while (0)
#define wrmsrl(msr, v) wrmsrq(msr, v)

/* ---- TLB instructions (asm/special_insns.h's invlpg; asm/invpcid.h and asm/tlb.h have the rest) ---- */
/* INVLPG acts in the PCID of the CPU's CR3 (the glue's). */
void tlbkit_invlpg(unsigned long addr);
#define invlpg(addr) tlbkit_invlpg(addr)
/*
 * The file's own asm statements, translated by tlbkit into calls of this
 * (before v5.15 native_flush_tlb_one_user wrote `invlpg (%0)` itself): the
 * glue runs `invlpg` and stops at anything else.
 */
void tlbkit_x86_asm(const char *tmpl, tlbkit_u64 *operands);
#define tlbkit_asm(tmpl, names, ops) tlbkit_x86_asm(tmpl, ops)
#define __invlpg(addr) invlpg(addr)

/* ---- tasks: current is each CPU's task, whose pid is the CPU's number ---- */
struct callback_head { void (*func)(struct callback_head *); };
struct thread_info { unsigned long flags; };
struct mm_struct;
struct task_struct {
	int pid;
	struct mm_struct *mm;
	struct thread_info thread_info;
	struct callback_head l1d_flush_kill;
};
struct task_struct *tlbkit_current(void);
#define current (tlbkit_current())
#define TIF_SPEC_IB 9
#define TIF_SPEC_L1D_FLUSH 10
#define read_task_thread_flags(t) ((t)->thread_info.flags)
#define clear_ti_thread_flag(ti, f) ((ti)->flags &= ~(1UL << (f)))
#define TWA_RESUME 1
#define task_work_add(t, w, m) ((void)(t), (void)(w), 0)
#define task_thread_info(t) (&(t)->thread_info)
#define SIGBUS 7
#define force_sig(s) do { } while (0)
#define hw_breakpoint_active() 0
#define hw_breakpoint_disable() do { } while (0)
#define hw_breakpoint_restore() do { } while (0)

/* ---- statistics and tracing: none ---- */
enum tlb_flush_reason {
	TLB_FLUSH_ON_TASK_SWITCH, TLB_REMOTE_SHOOTDOWN, TLB_LOCAL_SHOOTDOWN, TLB_LOCAL_MM_SHOOTDOWN,
	TLB_REMOTE_SEND_IPI, TLB_REMOTE_WRONG_CPU, NR_TLB_FLUSH_REASONS
};
#define trace_tlb_flush(reason, pages) do { (void)(pages); } while (0)
#define count_vm_tlb_event(e) do { } while (0)
#define count_vm_tlb_events(e, n) do { (void)(n); } while (0)
#define inc_irq_stat(x) do { } while (0)

/* ---- debugfs: nothing is created ---- */
typedef long ssize_t;
typedef long long loff_t;
struct file;
struct dentry;
struct file_operations {
	ssize_t (*read)(struct file *, char __user *, size_t, loff_t *);
	ssize_t (*write)(struct file *, const char __user *, size_t, loff_t *);
	loff_t (*llseek)(struct file *, loff_t, int);
};
#define default_llseek 0
#define S_IRUSR 0400
#define S_IWUSR 0200
#define EFAULT 14
#define EINVAL 22
extern struct dentry *arch_debugfs_dir;
static inline struct dentry *debugfs_create_file(const char *n, int mode, struct dentry *d, void *p, const struct file_operations *f)
{
	(void)n, (void)mode, (void)d, (void)p, (void)f;
	return 0;
}
int sprintf(char *buf, const char *fmt, ...);
static inline ssize_t simple_read_from_buffer(void __user *to, size_t count, loff_t *ppos, const void *from, size_t n)
{
	(void)to, (void)count, (void)ppos, (void)from, (void)n;
	return 0;
}
static inline unsigned long copy_from_user(void *to, const void __user *from, unsigned long n)
{
	(void)to, (void)from, (void)n;
	return n;
}
static inline int kstrtoint(const char *s, unsigned int base, int *res)
{
	(void)s, (void)base, (void)res;
	return -EINVAL;
}

/* ---- cpumasks: the sender's reads of a mask are marked, a word at a time ---- */
static inline unsigned long __tlbkit_mask_word(const struct cpumask *m, unsigned int w)
{
	return tlbkit_ops.load(&m->bits[w], 8);
}
static inline unsigned int cpumask_next_but(int n, const struct cpumask *m, unsigned int but)
{
	for (unsigned int c = (unsigned int)(n + 1); c < NR_CPUS; c++)
		if (c != but && (__tlbkit_mask_word(m, c / BITS_PER_LONG) >> (c % BITS_PER_LONG) & 1))
			return c;
	return NR_CPUS;
}
/* __cpumask_set_cpu (v5.13's flush_tlb_mask): the kernel's non-atomic __set_bit, its load and store marked. */
static inline void __cpumask_set_cpu(unsigned int cpu, struct cpumask *m)
{
	unsigned int w = cpu / BITS_PER_LONG;

	tlbkit_ops.store(&m->bits[w], 8, __tlbkit_mask_word(m, w) | 1UL << (cpu % BITS_PER_LONG));
}
/* cpumask_test_cpu is x86's test_bit: a volatile read (`bt`), marked here as the mask's other reads. */
static inline bool __tlbkit_cpumask_test(int cpu, const struct cpumask *m)
{
	return __tlbkit_mask_word(m, (unsigned int)cpu / BITS_PER_LONG) >> ((unsigned int)cpu % BITS_PER_LONG) & 1;
}
#define cpumask_test_cpu(cpu, m) __tlbkit_cpumask_test(cpu, m)
#define cpumask_next(n, m) cpumask_next_but(n, m, NR_CPUS)
#define cpumask_first(m) cpumask_next(-1, m)
static inline unsigned int cpumask_any_but(const struct cpumask *m, unsigned int cpu) { return cpumask_next_but(-1, m, cpu); }
#define for_each_cpu(cpu, m) for ((cpu) = cpumask_first(m); (cpu) < NR_CPUS; (cpu) = cpumask_next((cpu), m))
static inline unsigned int cpumask_weight(const struct cpumask *m)
{
	unsigned int w = 0;

	for (unsigned int i = 0; i < BITS_TO_LONGS(NR_CPUS); i++)
		for (unsigned long x = __tlbkit_mask_word(m, i); x; x &= x - 1)
			w++;
	return w;
}
/*
 * dst = a | b, a word at a time. The kernel's is plain; here every word is
 * a marked access, as every other access to a mask is (the checker sees a
 * word through its hooks or not at all): dst is a reclaiming task's own
 * batch, which no other CPU touches, so nothing is ordered that was not.
 */
static inline void cpumask_or(struct cpumask *dst, const struct cpumask *a, const struct cpumask *b)
{
	for (unsigned int i = 0; i < BITS_TO_LONGS(NR_CPUS); i++)
		tlbkit_ops.store(&dst->bits[i], 8, __tlbkit_mask_word(a, i) | __tlbkit_mask_word(b, i));
}

/* ---- IPIs (kernel/smp.c, v5.x on): the glue's ---- */
typedef void (*smp_call_func_t)(void *info);
typedef bool (*smp_cond_func_t)(int cpu, void *info);
void on_each_cpu_cond_mask(smp_cond_func_t cond, smp_call_func_t func, void *info, bool wait, const struct cpumask *mask);
#define on_each_cpu_mask(mask, func, info, wait) on_each_cpu_cond_mask(NULL, func, info, wait, mask)
void on_each_cpu(smp_call_func_t func, void *info, int wait);
/* The CPUs of the mask but this one (before v5.13 the flush ran its own share apart). */
void smp_call_function_many(const struct cpumask *mask, smp_call_func_t func, void *info, bool wait);

/* ---- pages and address spaces ---- */
typedef struct { u64 pgd; } pgd_t;
typedef struct { u64 pte; } pte_t;
typedef struct { u64 pmd; } pmd_t;
typedef u64 pteval_t;
struct page;
#include <asm/mmu.h>
/*
 * As the kernel lays it out where it matters to a cache: the mask of CPUs
 * (the kernel's cpu_bitmap[], at the end of a large mm_struct) on a line of
 * its own, away from context (whose tlb_gen every flush increments).
 */
struct mm_struct {
	pgd_t *pgd;
	mm_context_t context;
	atomic_t mm_users;
	atomic_t mm_count;
	struct cpumask cpu_bitmap __attribute__((aligned(64)));
};
struct vm_area_struct {
	struct mm_struct *vm_mm;
	unsigned long vm_start, vm_end, vm_flags;
};
extern struct mm_struct init_mm;
/* Tables are tlbkit's own: these addresses only name them. */
#define TLBKIT_PGD_BASE 0x40000000UL
#define mm_cpumask(mm) (&(mm)->cpu_bitmap)
#define __pa(x) ((unsigned long)(x))
#define __va(x) ((void *)(unsigned long)(x))
#define __sme_pa(x) __pa(x)
#define __pa_symbol(x) __pa(x)
#define mmu_notifier_arch_invalidate_secondary_tlbs(mm, s, e) do { } while (0)
#define VM_NONE 0x0UL
#define VM_HUGETLB 0x00400000UL

/*
 * v4.14's switch_mm_irqs_off maps the stack's PGD entry under
 * CONFIG_VMAP_STACK, which this kernel does not have: the code compiles
 * and never runs.
 */
#define pgd_index(a) (((a) >> 39) & 511)
#define current_stack_pointer 0UL
static inline int pgd_none(pgd_t pgd) { return pgd.pgd == 0; }
static inline void set_pgd(pgd_t *p, pgd_t v) { *p = v; }
/* No SGI UV machine (v4.14's native_flush_tlb_others asks). */
#define is_uv_system() 0
#define uv_flush_tlb_others(mask, info) ((void)(info), (mask))
#define trace_tlb_flush_rcuidle(reason, pages) do { (void)(pages); } while (0)

#endif
