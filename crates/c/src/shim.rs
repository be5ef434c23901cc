//! The shim tree tlbkit compiles a kernel file against, embedded in the
//! binary and written out next to each build.
//!
//! Three headers are files of their own: `asm/mmu.h` and `asm/tlbflush.h`,
//! which a developer may replace with the kernel's own, and
//! `asm/mmu_context.h`; every other `<linux/...>` and `<asm/...>` header a file may include is
//! one line that includes `tlbkit/kernel.h`, which holds the whole interface.

/// The shim files with content of their own: `(path under the tree, text)`.
pub const FILES: &[(&str, &str)] = &[
    ("include/tlbkit/ops.h", include_str!("../shim/include/tlbkit/ops.h")),
    ("include/tlbkit/kernel.h", include_str!("../shim/include/tlbkit/kernel.h")),
    ("include/asm/mmu.h", include_str!("../shim/include/asm/mmu.h")),
    ("include/asm/mmu_context.h", include_str!("../shim/include/asm/mmu_context.h")),
    ("include/asm/tlbflush.h", include_str!("../shim/include/asm/tlbflush.h")),
    ("glue.c", include_str!("../shim/glue.c")),
    ("tsan.c", include_str!("../shim/tsan.c")),
];

/// The headers that are `tlbkit/kernel.h` under another name: every one an
/// arm64 memory-management file of Linux v4.15 to v6.16 includes, directly or
/// through the headers it includes.
pub const ALIASES: &[&str] = &[
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
    for (path, text) in FILES {
        h.write(path.as_bytes());
        h.write(text.as_bytes());
    }
    for a in ALIASES {
        h.write(a.as_bytes());
    }
    h.finish()
}
