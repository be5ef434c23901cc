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


#include <tlbkit/common.h>

#define CONFIG_ARM64 1
#define CONFIG_ARM64_4K_PAGES 1
#define CONFIG_ARM64_PAN 1

/* asm statements of a kernel file, translated by tlbkit into calls of this. */
#define tlbkit_asm(tmpl, names, ops) tlbkit_ops.run_asm(tmpl, names, ops)
#define ARM64_ASM_PREAMBLE ""
#define ALTERNATIVE(oldinstr, newinstr, ...) oldinstr
#define SZ_4K 0x1000
#define SZ_16K 0x4000
#define __iomem
typedef struct { unsigned long long pgprot; } pgprot_t;

/* ---- barriers ---- */
#define dsb(opt) tlbkit_ops.fence(TLBKIT_DSB_##opt)
#define TLBKIT_DSB_nsh TLBKIT_DSB_NSH
#define TLBKIT_DSB_ish TLBKIT_DSB_ISH
#define TLBKIT_DSB_nshst TLBKIT_DSB_NSHST
#define TLBKIT_DSB_ishst TLBKIT_DSB_ISHST
#define isb() tlbkit_ops.fence(TLBKIT_ISB)

/* ---- per-CPU variables: an array of one element per CPU ---- */
#define DEFINE_PER_CPU(type, name) __typeof__(type) name[NR_CPUS]
#define DECLARE_PER_CPU(type, name) extern __typeof__(type) name[NR_CPUS]
#define per_cpu(var, cpu) ((var)[(cpu)])
#define per_cpu_ptr(ptr, cpu) (&(*(ptr))[(cpu)])
#define this_cpu_ptr(ptr) per_cpu_ptr(ptr, smp_processor_id())
#define raw_cpu_ptr(ptr) this_cpu_ptr(ptr)
#define __this_cpu_read(var) ((var)[smp_processor_id()])
#define this_cpu_read(var) READ_ONCE((var)[smp_processor_id()])
#define this_cpu_write(var, v) WRITE_ONCE((var)[smp_processor_id()], v)
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
