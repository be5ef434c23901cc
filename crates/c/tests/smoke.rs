use tlbkit_c::{CPolicy, Lib, Options, Sources};
use tlbkit_policy::testhw::Rec;
use tlbkit_policy::{MmId, Policy};

#[test]
fn v612_boots_and_switches() {
    let src = Sources::parse(concat!("c:", env!("CARGO_MANIFEST_DIR"), "/tests/linux/v6.12/arch/arm64/mm/context.c"))
        .unwrap();
    let opts =
        Options { cpus: 2, mm_slots: 4, asid_bits: 2, kpti: false, tlbi_range: false, cnp: false, checker: false };
    let lib = Lib::build(&src, &opts).unwrap_or_else(|e| panic!("{e}"));
    let p = CPolicy::new(&lib, &opts).unwrap_or_else(|e| panic!("{e}"));
    for m in 1..4 {
        p.mm_init(MmId(m));
    }
    let hw = Rec::new(0, 2);
    p.switch_mm(&hw, MmId(1));
    p.switch_mm(&hw, MmId(2));
    p.switch_mm(&hw, MmId(3));
    p.switch_mm(&hw, MmId(1));
    println!("{:#?}", hw.take());
    println!("{:x} {:x} {:x}", p.context_id(MmId(1)), p.context_id(MmId(2)), p.context_id(MmId(3)));
}
