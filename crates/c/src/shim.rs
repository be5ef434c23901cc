//! The shim trees tlbkit compiles a kernel file against, embedded in the
//! binary and written out next to each build: one per architecture, with
//! what both share (`tlbkit/ops.h`, `tlbkit/common.h`, the sanitizer's
//! runtime).
//!
//! arm64's: `asm/mmu.h` and `asm/tlbflush.h`, which a developer may replace
//! with the kernel's own, and `asm/mmu_context.h`; every other `<linux/...>`
//! and `<asm/...>` header a file may include is one line that includes
//! `tlbkit/kernel.h`, which holds the whole interface. x86's: the headers of
//! the x86 tree that `arch/x86/mm/tlb.c` reads types and inline functions
//! from (`asm/tlbflush.h`, `asm/mmu.h`, `asm/mmu_context.h`, `asm/tlb.h`,
//! `asm/invpcid.h`, `mm_internal.h`), each a file of its own, the rest one
//! line that includes `tlbkit/x86.h`.

/// The files both trees have: `(path under the tree, text)`.
const COMMON: &[(&str, &str)] = &[
    ("include/tlbkit/ops.h", include_str!("../shim/include/tlbkit/ops.h")),
    ("include/tlbkit/common.h", include_str!("../shim/include/tlbkit/common.h")),
    ("tsan.c", include_str!("../shim/tsan.c")),
    ("common.c", include_str!("../shim/common.c")),
];

/// arm64's files with content of their own.
const ARM64: &[(&str, &str)] = &[
    ("include/tlbkit/kernel.h", include_str!("../shim/include/tlbkit/kernel.h")),
    ("include/asm/mmu.h", include_str!("../shim/include/asm/mmu.h")),
    ("include/asm/mmu_context.h", include_str!("../shim/include/asm/mmu_context.h")),
    ("include/asm/tlbflush.h", include_str!("../shim/include/asm/tlbflush.h")),
    ("glue.c", include_str!("../shim/glue.c")),
];

/// x86's files with content of their own.
const X86: &[(&str, &str)] = &[
    ("include/tlbkit/x86.h", include_str!("../shim/x86/include/tlbkit/x86.h")),
    ("include/asm/mmu.h", include_str!("../shim/x86/include/asm/mmu.h")),
    ("include/asm/mmu_context.h", include_str!("../shim/x86/include/asm/mmu_context.h")),
    ("include/asm/tlbflush.h", include_str!("../shim/x86/include/asm/tlbflush.h")),
    ("include/asm/tlb.h", include_str!("../shim/x86/include/asm/tlb.h")),
    ("include/asm/invpcid.h", include_str!("../shim/x86/include/asm/invpcid.h")),
    ("include/mm_internal.h", include_str!("../shim/x86/include/mm_internal.h")),
    ("glue.c", include_str!("../shim/x86/glue.c")),
];

/// Returns the files of the tree for x86 (`x86`) or arm64.
pub fn files(x86: bool) -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    COMMON.iter().chain(if x86 { X86 } else { ARM64 })
}

/// Returns the headers of the tree for x86 (`x86`) or arm64 that are its
/// main header under another name, and that header.
pub fn aliases(x86: bool) -> (&'static [&'static str], &'static str) {
    if x86 {
        (X86_ALIASES, "tlbkit/x86.h")
    } else {
        (ALIASES, "tlbkit/kernel.h")
    }
}

/// The headers that are `tlbkit/x86.h` under another name: every one
/// `arch/x86/mm/tlb.c` of v4.14 on includes that the tree has no file for.
const X86_ALIASES: &[&str] = &[
    "linux/cpu.h",
    "linux/debugfs.h",
    "linux/export.h",
    "linux/init.h",
    "linux/interrupt.h",
    "linux/kvm_types.h",
    "linux/mm.h",
    "linux/mmu_context.h",
    "linux/mmu_notifier.h",
    "linux/sched/smt.h",
    "linux/smp.h",
    "linux/spinlock.h",
    "linux/task_work.h",
    "asm/apic.h",
    "asm/cache.h",
    "asm/cacheflush.h",
    "asm/msr.h",
    "asm/nospec-branch.h",
    "asm/perf_event.h",
    "asm/uv/uv.h",
];

/// The headers that are `tlbkit/kernel.h` under another name: every one an
/// arm64 memory-management file of Linux v4.15 to v6.16 includes, directly or
/// through the headers it includes.
const ALIASES: &[&str] = &[
    "linux/atomic.h",
    "linux/bitfield.h",
    "linux/bitmap.h",
    "linux/bitops.h",
    "linux/bits.h",
    "linux/bug.h",
    "linux/build_bug.h",
    "linux/cache.h",
    "linux/compiler.h",
    "linux/const.h",
    "linux/cpumask.h",
    "linux/errno.h",
    "linux/export.h",
    "linux/init.h",
    "linux/irqflags.h",
    "linux/kconfig.h",
    "linux/kernel.h",
    "linux/mm.h",
    "linux/mm_types.h",
    "linux/mmu_context.h",
    "linux/mmu_notifier.h",
    "linux/module.h",
    "linux/percpu.h",
    "linux/pgtable.h",
    "linux/preempt.h",
    "linux/printk.h",
    "linux/refcount.h",
    "linux/sched.h",
    "linux/sched/mm.h",
    "linux/slab.h",
    "linux/smp.h",
    "linux/spinlock.h",
    "linux/stringify.h",
    "linux/types.h",
    "asm/alternative.h",
    "asm/alternative-macros.h",
    "asm/atomic.h",
    "asm/barrier.h",
    "asm/cacheflush.h",
    "asm/cmpxchg.h",
    "asm/cpucaps.h",
    "asm/cpufeature.h",
    "asm/cputype.h",
    "asm/daifflags.h",
    "asm/fixmap.h",
    "asm/gpr-num.h",
    "asm/kernel-pgtable.h",
    "asm/kvm_asm.h",
    "asm/lse.h",
    "asm/memory.h",
    "asm/mte.h",
    "asm/page.h",
    "asm/percpu.h",
    "asm/pgtable-hwdef.h",
    "asm/pgtable.h",
    "asm/proc-fns.h",
    "asm/processor.h",
    "asm/ptrace.h",
    "asm/sections.h",
    "asm/smp.h",
    "asm/spectre.h",
    "asm/sysreg.h",
    "asm/thread_info.h",
    "asm/tlb.h",
];

/// The headers a developer may give in place of tlbkit's (by file name).
/// `asm/mmu_context.h` stays tlbkit's: the glue is written against it.
pub const REPLACEABLE: &[&str] = &["mmu.h", "tlbflush.h"];

/// Returns a hash of every shim file, which keys the build cache.
pub fn version() -> u64 {
    let mut h = crate::Fnv::new();
    for (path, text) in COMMON.iter().chain(ARM64).chain(X86) {
        h.write(path.as_bytes());
        h.write(text.as_bytes());
    }
    for a in ALIASES.iter().chain(X86_ALIASES) {
        h.write(a.as_bytes());
    }
    h.finish()
}
