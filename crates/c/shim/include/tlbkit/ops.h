/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The calls a compiled kernel file makes into tlbkit: every marked access,
 * lock, barrier and TLB operation of the shims ends here. tlbkit fills the
 * table in after it loads the file; the same table serves the checker (where
 * each call may be a scheduling point) and the simulator (where it costs
 * simulated time).
 */
#ifndef TLBKIT_OPS_H
#define TLBKIT_OPS_H

typedef unsigned long long tlbkit_u64;

/* Read-modify-write kinds for tlbkit_ops.rmw. */
enum tlbkit_rmw { TLBKIT_XCHG, TLBKIT_CMPXCHG, TLBKIT_ADD, TLBKIT_OR, TLBKIT_ANDNOT };
/* Orderings: what the kernel's name for the operation promises. */
enum tlbkit_order { TLBKIT_RELAXED, TLBKIT_ACQUIRE, TLBKIT_RELEASE, TLBKIT_FULL };
/* Barriers. */
enum tlbkit_barrier {
	TLBKIT_DSB_NSH, TLBKIT_DSB_ISH, TLBKIT_DSB_NSHST, TLBKIT_DSB_ISHST, TLBKIT_ISB,
	TLBKIT_SMP_MB, TLBKIT_SMP_RMB, TLBKIT_SMP_WMB
};
/* TLBI operations (arm64's names); the operand is the instruction's register. */
enum tlbkit_tlbi {
	TLBKIT_VMALLE1, TLBKIT_VMALLE1IS, TLBKIT_VAE1, TLBKIT_VAE1IS, TLBKIT_VALE1, TLBKIT_VALE1IS,
	TLBKIT_ASIDE1, TLBKIT_ASIDE1IS, TLBKIT_VAAE1IS, TLBKIT_VAALE1IS, TLBKIT_RVAE1IS, TLBKIT_RVALE1IS,
	TLBKIT_RVAAE1IS, TLBKIT_RVAALE1IS
};
/* x86's TLB operations (tlbkit_ops.x86_tlbi): the instruction and its operands. */
enum tlbkit_x86_tlbi {
	/* INVLPG va: the page in the current PCID (a kernel page: every PCID's, as it is global). */
	TLBKIT_INVLPG,
	/* INVPCID type 0 (pcid, va), 1 (pcid), 2 (everything, global too), 3 (every non-global). */
	TLBKIT_INVPCID_ADDR, TLBKIT_INVPCID_SINGLE, TLBKIT_INVPCID_ALL_GLOBAL, TLBKIT_INVPCID_ALL_NONGLOBAL,
	/* INVLPGB: nr pages of pcid from va; pcid's every entry; nr pages of every PCID, global too; */
	TLBKIT_INVLPGB_PCID_VA, TLBKIT_INVLPGB_PCID, TLBKIT_INVLPGB_VA_GLOBAL,
	/* every entry, global too; every non-global entry. */
	TLBKIT_INVLPGB_ALL, TLBKIT_INVLPGB_ALL_NONGLOBAL,
	/* TLBSYNC: this CPU's INVLPGBs are complete everywhere. */
	TLBKIT_TLBSYNC
};
/* System registers the shims let a file read and write. */
enum tlbkit_sysreg { TLBKIT_TTBR0_EL1, TLBKIT_TTBR1_EL1, TLBKIT_TCR_EL1, TLBKIT_ID_AA64MMFR0_EL1 };
/* Shootdown phases (tlbkit's Phase). */
enum tlbkit_phase { TLBKIT_ISSUE, TLBKIT_DISPATCH, TLBKIT_SYNC, TLBKIT_DONE };

struct tlbkit_ops {
	tlbkit_u64 (*load)(const volatile void *p, int bytes);
	void (*store)(volatile void *p, int bytes, tlbkit_u64 v);
	/* Returns the old value; for a compare-and-exchange `a` is the expected value, `b` the new. */
	tlbkit_u64 (*rmw)(volatile void *p, int bytes, int kind, int order, tlbkit_u64 a, tlbkit_u64 b);
	void (*lock)(volatile void *word);
	void (*unlock)(volatile void *word);
	void (*relax)(void);
	unsigned int (*cpu)(void);
	void (*fence)(int kind);
	void (*tlbi)(int op, tlbkit_u64 arg);
	/* The translation root: TTBR0's table (`slot` an mm, or `reserved`) with TTBR1's ASID. */
	void (*write_root)(int reserved, unsigned int slot, unsigned int asid);
	void (*phase)(int phase);
	void (*rollover)(void);
	void *(*alloc)(unsigned long bytes);
	void (*free)(void *p);
	/* A plain (unmarked) access of `bytes` at `p` from the code at `pc`. */
	void (*plain)(const volatile void *p, int bytes, int write, const void *pc);
	/* BUG_ON, WARN_ON, panic: `what` says which, `file` and `line` where. */
	void (*bug)(const char *what, const char *file, int line);
	/*
	 * An asm statement of the file, translated by tlbkit: its template, its
	 * operands' names (comma-separated, empty for unnamed) and values
	 * (outputs first, as the template numbers them; outputs are written back).
	 */
	void (*run_asm)(const char *tmpl, const char *names, tlbkit_u64 *operands);
	/* The checker's build: the code at `pc` (a basic block of the file) ran. */
	void (*reached)(const void *pc);
	/*
	 * x86: an IPI to every CPU of the NR_CPUS-bit mask `targets` but this
	 * one, running func(info) there; returns when every handler has.
	 */
	void (*ipi)(const unsigned long *targets, void (*func)(void *), void *info);
	/* jiffies at HZ = 1000, as this CPU reads it. */
	tlbkit_u64 (*now_jiffies)(void);
	/* local_irq_disable (1) and local_irq_enable (0): no IPI handler runs here between. */
	void (*irq)(int off);
	/* x86: a CR3 write: the table (`slot` an mm, or `reserved`), the PCID, and whether NOFLUSH. */
	void (*cr3)(int reserved, unsigned int slot, unsigned int pcid, int noflush);
	/* x86: a TLB operation (enum tlbkit_x86_tlbi) with its address, PCID and page count. */
	void (*x86_tlbi)(int op, tlbkit_u64 va, unsigned int pcid, unsigned int nr);
	/*
	 * x86: kernel/smp.c's call-function IPI to every CPU of `targets` but
	 * this one, the csds already queued: returns once sent; the handlers
	 * run func(info) there, maybe after the caller goes on (it waits on
	 * its csds itself), so info must not point into the caller's stack.
	 */
	void (*ipi_async)(const unsigned long *targets, void (*func)(void *), void *info);
	/* x86: after its next IPI this CPU spins reading the shared variable at p until its targets answer. */
	void (*spin_on)(const volatile void *p);
};

extern struct tlbkit_ops tlbkit_ops;
/* Options tlbkit sets before the file's initcalls run (see kernel.h). */
extern unsigned int tlbkit_asid_bits_option;
tlbkit_u64 tlbkit_read_sysreg(int reg);
void tlbkit_write_sysreg(int reg, tlbkit_u64 v);
extern int tlbkit_kpti, tlbkit_tlbi_range, tlbkit_cnp, tlbkit_early_bitops;

#endif
