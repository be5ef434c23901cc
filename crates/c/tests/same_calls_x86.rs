//! The kernel's own x86 `tlb.c` (v6.18.2) and tlbkit's Rust port of it
//! (`x86-linux-lazytrim`, the v6.14+ lazy mask that v6.18 has) asked the
//! same questions make the same calls of the hardware: the same CR3 writes
//! with the same PCIDs and NOFLUSH, the same invalidations, the same IPIs to
//! the same CPUs, on a sequence of switches, lazy switches and flushes from
//! two CPUs.
//!
//! One difference is named and kept: the file's `flush_tlb_local` rewrites
//! CR3 with the PCID it holds (`native_write_cr3(__native_read_cr3())`, a
//! flush of that PCID's non-global entries and its page-walk caches), where
//! the port issues the equivalent `INVPCID` single-context; the comparison
//! reads the one as the other.
//!
//! The file is built as the checker builds it, whose IPI is the machine's
//! (it returns when every handler has, as the port's `send_ipi` does). The
//! simulator's build adds `kernel/smp.c`'s call-function data, which the
//! port does not model: the csds' cache lines, and IPIs sent apart from the
//! wait (`crates/c/shim/x86/glue.c`).
//!
//! Needs a C compiler; without one it says so and checks nothing.

mod common;

use tlbkit_c::{CPolicy, Lib, Options, Sources};
use tlbkit_policy::asid::linux_x86_615::Kernel;
use tlbkit_policy::asid::LinuxX86v615;
use tlbkit_policy::testhw::Rec;
use tlbkit_policy::{MmId, Policy, VirtAddr};

/// Runs the sequence on `p` and returns each CPU's log.
fn run<P: Policy>(p: &P) -> Vec<Vec<String>> {
    for m in 1..=4 {
        p.mm_init(MmId(m));
    }
    let cpus = [Rec::new(0, 2), Rec::new(1, 2)];
    let va = VirtAddr(0x40_0000);
    for (cpu, step) in [(0, 1), (1, 1), (0, 2), (1, 2), (0, 0), (1, 3), (0, 1), (1, 0), (0, 4), (1, 1), (0, 1), (1, 2)]
    {
        let hw = &cpus[cpu];
        p.switch_mm(hw, MmId(step));
        if step == 0 {
            continue;
        }
        p.flush_page(hw, MmId(step), va);
        p.flush_range(hw, MmId(step), va, 3);
        p.flush_range(hw, MmId(step), va, 40);
        p.flush_mm(hw, MmId(1 + step % 4));
    }
    p.flush_kernel_range(&cpus[0], VirtAddr(0xffff_8880_0000_0000), 2);
    cpus.iter().map(|c| c.take()).collect()
}

/// Reads the file's CR3 reload of the PCID it holds (a write of the root a
/// CPU already has, without NOFLUSH; in an IPI handler, which switches to no
/// other mm, any write of an mm's root) as the port's INVPCID single-context
/// of that PCID.
fn as_port(log: Vec<String>) -> Vec<String> {
    let mut current: std::collections::HashMap<String, String> = Default::default();
    log.into_iter()
        .map(|l| {
            let (cpu, what) = l.split_once("root ").map_or(("", ""), |(c, w)| (c, w));
            if what.is_empty() {
                return l;
            }
            let again = current.get(cpu).is_some_and(|w| w.split(" noflush").next() == what.split(" noflush").next());
            current.insert(cpu.to_string(), what.to_string());
            match what.rsplit_once(" asid ") {
                Some((root, rest))
                    if (again || !cpu.is_empty() && root.starts_with("Mm(")) && rest.ends_with(" noflush false") =>
                {
                    format!("{cpu}tlbi Asid(Asid({})) Local", rest.trim_end_matches(" noflush false"))
                }
                _ => l,
            }
        })
        .collect()
}

#[test]
fn the_compiled_x86_file_makes_the_calls_the_rust_port_makes() {
    if !common::have_cc() {
        return;
    }
    let file = concat!("c:", env!("CARGO_MANIFEST_DIR"), "/../../third_party/linux/v6.18.2/arch/x86/mm/tlb.c");
    let sources = Sources::parse(file).unwrap();
    let opts = Options { checker: true, ..Options::machine(2, 5, 12) }.with_sources(&sources);
    let lib = Lib::build(&sources, &opts).unwrap_or_else(|e| panic!("{e}"));
    let c: Vec<Vec<String>> =
        run(&CPolicy::new(&lib, &opts).unwrap_or_else(|e| panic!("{e}"))).into_iter().map(as_port).collect();
    let rust = run(&LinuxX86v615::new(2, 5, Kernel::LazyTrim));
    assert_eq!(c, rust);
}
