//! C policies under the checker: the kernel's own context.c.

use tlbkit_check::spec::Mode;
use tlbkit_check::CheckSpec;

#[global_allocator]
static ALLOC: tlbkit_check::arena::CheckAlloc = tlbkit_check::arena::CheckAlloc;

fn linux(file: &str) -> String {
    format!("{}/../c/tests/linux/{file}", env!("CARGO_MANIFEST_DIR"))
}

fn standard(policy: &str) -> CheckSpec {
    let d = tlbkit_check::spec::default_spec(policy);
    CheckSpec { cpus: 2, mms: 3, asids: 4, ops: 6, pages: 1, mode: Mode::Exhaustive, iterations: u64::MAX, ..d }
}

#[test]
fn scratch() {
    for policy in [format!("c:{}", linux("v6.12/arch/arm64/mm/context.c")), "arm64-linux".to_string()] {
        let t = std::time::Instant::now();
        let r = tlbkit_check::run::check(&standard(&policy)).unwrap_or_else(|e| panic!("{e}"));
        println!("{}\n{:?}", r.to_text(), t.elapsed());
    }
}

#[test]
fn scratch_parents() {
    for policy in [format!(
        "c:{}+{}+{}",
        linux("5e10f9887ed8-parent/arch/arm64/mm/context.c"),
        linux("5e10f9887ed8-parent/arch/arm64/include/asm/tlbflush.h"),
        linux("5e10f9887ed8-parent/arch/arm64/include/asm/mmu.h")
    ) + "+cnp=on"]
    {
        let t = std::time::Instant::now();
        let o = tlbkit_check::options::Options { policy: policy.clone(), seed: 1, ..Default::default() };
        let r = o.run(&mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
        println!("{}\n{:?}", r.to_text(), t.elapsed());
    }
}
