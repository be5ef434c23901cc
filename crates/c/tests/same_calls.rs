//! The kernel's own context.c (v6.12) and tlbkit's Rust port of it
//! (`arm64-linux`) asked the same questions make the same calls of the
//! hardware: the same root writes with the same ASIDs, the same TLB
//! invalidations, the same rollovers, on a sequence of switches and flushes
//! that runs through two rollovers. (The file also writes the reserved
//! TTBR0 before each ASID change, which the port folds into one root write:
//! those writes are left out of the comparison. And the kernel's
//! `flush_tlb_mm` of an mm that never had an ASID issues `TLBI ASIDE1IS` of
//! ASID 0, which the port skips: those are left out too.)
//!
//! Needs a C compiler; without one it says so and checks nothing.

mod common;

use tlbkit_c::{CPolicy, Lib, Options, Sources};
use tlbkit_policy::asid::LinuxArm64;
use tlbkit_policy::testhw::Rec;
use tlbkit_policy::{MmId, Policy, VirtAddr};

/// The flush of an mm with no ASID yet, as the kernel issues it.
const ASID_ZERO: [&str; 1] = ["tlbi Asid(Asid(0)) Broadcast"];

/// Runs the sequence on `p` (the port if `rust`) and returns each CPU's log,
/// root writes of the reserved table left out, and the kernel's flushes of
/// ASID 0 when `p` is the file.
fn run<P: Policy>(p: &P, rust: bool) -> Vec<Vec<String>> {
    for m in 1..=5 {
        p.mm_init(MmId(m));
    }
    let cpus = [Rec::new(0, 2), Rec::new(1, 2)];
    let va = VirtAddr(0x40_0000);
    for (cpu, step) in [(0, 1), (1, 2), (0, 3), (1, 1), (0, 4), (1, 5), (0, 2), (1, 3), (0, 5), (1, 4), (0, 1), (1, 2)]
    {
        let hw = &cpus[cpu];
        p.switch_mm(hw, MmId(step));
        p.flush_page(hw, MmId(step), va);
        p.flush_range(hw, MmId(step), va, 3);
        p.flush_mm(hw, MmId(1 + step % 5));
    }
    p.flush_kernel_range(&cpus[0], VirtAddr(0xffff_0000_0000_0000), 2);
    cpus.iter()
        .map(|c| {
            c.take()
                .into_iter()
                .filter(|l| !l.starts_with("root Reserved") && (rust || !ASID_ZERO.contains(&l.as_str())))
                .collect()
        })
        .collect()
}

#[test]
fn the_compiled_file_makes_the_calls_the_rust_port_makes() {
    if !common::have_cc() {
        return;
    }
    let file = concat!("c:", env!("CARGO_MANIFEST_DIR"), "/../../third_party/linux/v6.12/arch/arm64/mm/context.c");
    let opts = Options::machine(2, 6, 2);
    let lib = Lib::build(&Sources::parse(file).unwrap(), &opts).unwrap_or_else(|e| panic!("{e}"));
    let c = run(&CPolicy::new(&lib, &opts).unwrap_or_else(|e| panic!("{e}")), false);
    let rust = run(&LinuxArm64::new(2, 6, 2, false).unwrap(), true);
    let rollovers = c.iter().flatten().filter(|l| l.starts_with("note AsidRollover")).count();
    assert!(rollovers >= 2, "the sequence should roll the 4 ASIDs over at least twice: {c:#?}");
    assert_eq!(c, rust);
}
