//! The shipped Arm VMSA litmus tests against their published verdicts: every
//! difference is a listed strengthening or weakening, with its reason, and
//! every listed one is still a difference.

use std::path::PathBuf;
use tlbkit_check::litmus::{self, Agreement, Verdict, KNOWN_STRENGTHENINGS, KNOWN_WEAKENINGS};
use Verdict::{Allowed, Forbidden};

fn shipped() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("litmus/vmsa");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the shipped litmus folder")
        .map(|e| e.expect("a folder entry").path())
        .filter(|p| p.to_string_lossy().ends_with(".litmus.toml"))
        .collect();
    files.sort();
    files
}

/// Returns (name, tlbkit's verdict, published verdict) for every shipped test.
fn verdicts() -> Vec<(String, Verdict, Option<Verdict>)> {
    let published = litmus::published(litmus::EXPECTED_CSV);
    shipped()
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).expect("read a shipped test");
            let test = litmus::parse(&p.display().to_string(), &text).expect("a shipped test parses");
            let run = litmus::run(&test).expect("a shipped test runs");
            (test.name.clone(), run.verdict, published.get(&test.name).copied())
        })
        .collect()
}

#[test]
fn every_shipped_test_has_a_published_verdict() {
    let published = litmus::published(litmus::EXPECTED_CSV);
    let files = shipped();
    assert_eq!(files.len(), published.len(), "one expected.csv row per shipped test");
    for (name, _, p) in verdicts() {
        assert!(p.is_some(), "{name}: no row in expected.csv");
    }
}

#[test]
fn every_verdict_agrees_or_is_a_listed_difference() {
    let mut wrong = Vec::new();
    for (name, ours, theirs) in verdicts() {
        if litmus::compare(&name, ours, theirs) == Agreement::Disagree {
            wrong.push(format!("{name}: tlbkit {}, published {}", ours.word(), theirs.unwrap().word()));
        }
    }
    assert!(wrong.is_empty(), "unlisted disagreements:\n  {}", wrong.join("\n  "));
}

#[test]
fn every_listed_difference_is_still_a_difference() {
    let all = verdicts();
    for (list, ours, theirs) in [
        (KNOWN_STRENGTHENINGS, Verdict::Forbidden, Verdict::Allowed),
        (KNOWN_WEAKENINGS, Verdict::Allowed, Verdict::Forbidden),
    ] {
        for (name, reason) in list {
            assert!(!reason.is_empty(), "{name}: a listed difference says why");
            let found = all.iter().find(|(n, _, _)| n == name);
            assert_eq!(
                found.map(|f| (f.1, f.2)),
                Some((ours, Some(theirs))),
                "{name} is listed but not that difference"
            );
        }
    }
}

/// Asserts tlbkit's verdict on each named shipped test (pinned verdicts of
/// the rules the model is built on; the guide quotes them).
fn assert_verdicts(pins: &[(&str, Verdict)]) {
    let v: std::collections::BTreeMap<String, Verdict> = verdicts().into_iter().map(|(n, v, _)| (n, v)).collect();
    for &(name, want) in pins {
        assert_eq!(v[name], want, "{name}");
    }
}

#[test]
fn the_model_has_stale_tlb_entries_until_dsb_and_isb() {
    assert_verdicts(&[
        // No invalidation: a cached entry survives the PTE's clear.
        ("CoWinvT+dsb-isb", Allowed),
        // TLBI; DSB without ISB: a translation done before the DSB is used ...
        ("CoWinvT.EL1+dsb-tlbi-dsb", Allowed),
        ("CoWinvT.EL1+dsb-tlbi-dsb-isb", Forbidden),
        // ... unless another thread's store overwrote the descriptor the early
        // translation read, and the thread's own TLBI completed before the access.
        ("CoRpteT.EL1+dsb-tlbi-dsb", Forbidden),
        // Another thread's walk sees the PTE only through ISB on its side.
        ("MP.TTf.inv+dsb+po", Allowed),
        ("MP.TTf.inv+dsb+dsb-isb", Forbidden),
        // A broadcast TLBI's completion waits for another thread's access in
        // flight through the entry it removes: that access cannot read a store
        // made after the TLBI.
        ("RBS+dsb-tlbiis-dsb", Forbidden),
        // A TLBI by ASID removes the entries of that ASID only.
        ("CoWinvTa1.1+dsb-tlbiasidis-dsb-eret", Forbidden),
        ("CoWinvTa2.1+dsb-tlbiasidis-dsb-eret", Allowed),
    ]);
}

#[test]
fn ordinary_accesses_are_as_weak_as_armv8s() {
    assert_verdicts(&[
        // Two loads (or two stores) without a barrier or dependency reorder.
        ("MP+pos", Allowed),
        // A load reads its own thread's store before other threads see it ...
        ("MP.alias3+rfi-data+dmb", Allowed),
        // ... and before the thread's own walks see it.
        ("CoWTf.inv+poloc-ctrl-isb", Allowed),
        // Loads run ahead of a branch and are forwarded a store after it.
        ("PPOCA.alias", Allowed),
        // Two loads of one location through aliases reading the same write reorder.
        ("RSW.alias", Allowed),
        // A later load of a descriptor may read an older value than an earlier
        // access's walk.
        ("CoTRpte.inv+po", Allowed),
        // Coherence holds through aliases, and an address dependency orders.
        ("CoRR2.alias+po", Forbidden),
        ("PPOAA.alias", Forbidden),
        ("WRC.RRTf.inv+addrs", Forbidden),
    ]);
}

#[test]
fn exceptions_synchronise_context_and_make_no_store_visible() {
    assert_verdicts(&[
        // An SVC's handler, or the code after an ERET, walks without seeing the
        // thread's own page-table store ...
        ("CoWTf.inv+svc", Allowed),
        ("CoWTf.inv.EL1+eret", Allowed),
        // ... unless a DSB before the exception made it visible.
        ("CoWTf.inv.EL1+dsb-svc", Forbidden),
        ("CoWTf.inv.EL1+dsb-eret", Forbidden),
        // A handler that loads: the store after the fault is never made.
        ("ETS", Allowed),
    ]);
}

/// A test of tlbkit's own in the format: thread 0 maps `w`, reads through it
/// and then writes `y`; thread 1 reads `y`, then `w` through an address
/// dependency. Thread 0's walk may read its own store before thread 1 sees
/// it, so thread 1 may still fault after reading `y = 1`.
const OWN_STORE_WALKED_EARLY: &str = r#"
name = "own-store-walked-early"
symbolic = ["w", "x", "y"]
page_table_setup = """
    physical pa1 pa2;
    w |-> invalid;
    x |-> pa1;
    *pa1 = 1;
    y |-> pa2;
"""
[thread.0]
code = """
    STR X0,[X1]
    LDR X2,[X3]
    STR X4,[X5]
"""
[thread.0.reset]
R0 = "desc3(x, page_table_base)"
R1 = "pte3(w, page_table_base)"
R3 = "w"
R4 = "extz(0b1, 64)"
R5 = "y"
[thread.1]
code = """
    LDR X0,[X1]
    EOR X2,X0,X0
    LDR X3,[X4,X2]
"""
[thread.1.reset]
R1 = "y"
R3 = "extz(0b111, 64)"
R4 = "w"
VBAR_EL1 = "extz(0x1000, 64)"
[section.thread1_el1_handler]
address = "0x1400"
code = """
    MOV X3,#0
    MRS X13,ELR_EL1
    ADD X13,X13,#4
    MSR ELR_EL1,X13
    ERET
"""
[final]
assertion = "0:X2=1 & 1:X0=1 & 1:X3=0"
"#;

#[test]
fn a_walk_reads_its_own_threads_store_before_other_threads_see_it() {
    // Without the early read, thread 0's store to y waits for its walk of w,
    // which waits for the descriptor's store to reach memory, and thread 1
    // cannot fault after reading y = 1. (From a speculative store the early
    // read is not made: `MP.RT.inv+dmb+ctrl-trfi`, above.)
    let test = litmus::parse("own.litmus.toml", OWN_STORE_WALKED_EARLY).unwrap();
    assert_eq!(litmus::run(&test).unwrap().verdict, Allowed);
}

#[test]
fn a_tlbi_without_a_dsb_before_it_may_pass_the_page_table_store() {
    // The shipped test with its first DSB taken out: the TLBI may complete
    // before the PTE's clear reaches memory, a walk refills the old entry,
    // and the load after DSB; ISB uses it (Arm orders a TLBI after earlier
    // stores only through a DSB).
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("litmus/vmsa");
    let text = std::fs::read_to_string(dir.join("CoWinvT.EL1+dsb-tlbi-dsb-isb.litmus.toml")).unwrap();
    let without = text.replacen("    STR X0,[X1]\n    DSB SY\n", "    STR X0,[X1]\n", 1);
    assert_ne!(without, text);
    let test = litmus::parse("no-first-dsb.litmus.toml", &without).unwrap();
    assert_eq!(litmus::run(&test).unwrap().verdict, Allowed);
}

#[test]
fn a_store_passes_an_earlier_load_unless_a_barrier_that_orders_them_is_between() {
    // Armv8: LB allowed; a DMB SY or DMB LD orders the load before the store,
    // a DMB ST (stores with stores) does not.
    for (barrier, want) in [("ISB", Allowed), ("DMB SY", Forbidden), ("DMB LD", Forbidden), ("DMB ST", Allowed)] {
        let threads =
            [format!("LDR X0,[X10]; {barrier}; STR X5,[X11]"), format!("LDR X0,[X11]; {barrier}; STR X5,[X10]")];
        let test = plain("LB", &[&threads[0], &threads[1]], "0:X0=1 & 1:X0=1");
        assert_eq!(litmus::run(&test).unwrap().verdict, want, "LB with {barrier}");
    }
}

/// A handler's code (a table entry of the test format) that sets `X2` to 0
/// and returns past the instruction that took the exception.
macro_rules! skip_handler {
    () => {
        r#"code = """
    MOV X2,#0
    MRS X13,ELR_EL1
    ADD X13,X13,#4
    MSR ELR_EL1,X13
    ERET
"""
"#
    };
}

/// A test of tlbkit's own in the message-passing shape around a page-table
/// change, its page table `SETUP` (after `physical pa1 pa2;`): thread 0 at
/// EL1 runs `WRITER` (`X0` = `R0_X`, `X1` = `R1_X`, `X4` x's page), then
/// stores 1 to `y`; thread 1 at EL0 reads `y`, then runs `ACCESS` to `x`
/// (`X2` = 1 at first) after `DSB SY; ISB`; its handler for a fault from
/// EL0 sets `X2` to 0 and returns past the access.
const PAGE_TABLE_MP: &str = concat!(
    r#"name = "MP"
symbolic = ["x", "y", "z"]
page_table_setup = """
    physical pa1 pa2;
SETUP
"""
[thread.0]
code = """
WRITER
    STR X2,[X3]
"""
[thread.0.reset]
R0 = "R0_X"
R1 = "R1_X"
R2 = "extz(0b1, 64)"
R3 = "y"
R4 = "extz(page(x), 64)"
"PSTATE.EL" = "0b01"
[thread.1]
code = """
    LDR X0,[X1]
    DSB SY
    ISB
    ACCESS
"""
[thread.1.reset]
R1 = "y"
R2 = "extz(0b1, 64)"
R3 = "x"
VBAR_EL1 = "extz(0x1000, 64)"
[section.thread1_el1_handler]
address = "0x1400"
"#,
    skip_handler!(),
    r#"[final]
assertion = "ASSERTION"
"#
);

/// [`PAGE_TABLE_MP`] with its holes filled: each of `setup` and `writer` a
/// line per item.
fn page_table_mp(setup: &[&str], (r0, r1): (&str, &str), writer: &[&str], access: &str, assertion: &str) -> String {
    let lines = |l: &[&str]| l.iter().map(|l| format!("    {l}\n")).collect::<String>();
    PAGE_TABLE_MP
        .replace("SETUP\n", &lines(setup))
        .replace("R0_X", r0)
        .replace("R1_X", r1)
        .replace("WRITER\n", &lines(writer))
        .replace("ACCESS", access)
        .replace("ASSERTION", assertion)
}

fn verdict(text: &str) -> Verdict {
    litmus::run(&litmus::parse("mp.litmus.toml", text).unwrap_or_else(|e| panic!("{e}"))).unwrap().verdict
}

/// `x` mapped with attributes `ap`, thread 0 swapping in `z`'s read-write
/// descriptor of the same page with `writer`, thread 1 storing to `x`.
fn permission(ap: &str, writer: &[&str], assertion: &str) -> Verdict {
    let setup = [&format!("x |-> pa1 {ap};"), "x ?-> pa1;", "z |-> pa1;", "y |-> pa2;"];
    let regs = ("desc3(z, page_table_base)", "pte3(x, page_table_base)");
    verdict(&page_table_mp(&setup, regs, writer, "STR X2,[X3]", assertion))
}

#[test]
fn a_store_through_a_read_only_entry_is_a_permission_fault_until_an_invalidation_removes_it() {
    let ro = "with [AP = 0b11] and default";
    let swap = ["STR X0,[X1]", "DSB SY", "TLBI VAE1IS,X4", "DSB SY"];
    // The store can fault: the entry is read-only until the swap's TLBI.
    assert_eq!(permission(ro, &swap, "1:X2=0"), Allowed);
    // Not once thread 1 saw y = 1: the broadcast TLBI completed before it,
    // and thread 1's DSB; ISB put its store after that.
    assert_eq!(permission(ro, &swap, "1:X0=1 & 1:X2=0"), Forbidden);
    // Without the TLBI the read-only entry may stay in thread 1's TLB (a
    // permission is cached with the translation).
    assert_eq!(permission(ro, &["STR X0,[X1]", "DSB SY"], "1:X0=1 & 1:X2=0"), Allowed);
    // A read-write mapping never faults; `AP = 0b01` is the default.
    assert_eq!(permission("with [AP = 0b01] and default", &swap, "1:X2=0"), Forbidden);
    assert_eq!(permission("", &swap, "1:X2=0"), Forbidden);
    // A load through a read-only entry reads (x holding 5 at first), and never faults.
    let load = |assertion| {
        let setup = ["x |-> pa1 with [AP = 0b11];", "*pa1 = 5;", "y |-> pa2;"];
        verdict(&page_table_mp(&setup, ("extz(0b0, 64)", "y"), &[], "LDR X2,[X3]", assertion))
    };
    assert_eq!(load("1:X2=5"), Allowed);
    assert_eq!(load("1:X2=0"), Forbidden);
    // The other permissions deny EL0 any access: its store faults alike.
    for ap in ["with [AP = 0b00]", "with [AP = 0b10] and default"] {
        assert_eq!(permission(ap, &swap, "1:X2=0"), Allowed, "{ap}");
        assert_eq!(permission(ap, &swap, "1:X0=1 & 1:X2=0"), Forbidden, "{ap}");
    }
    // A permission that is not two bits is refused, naming the line.
    let text = page_table_mp(&["x |-> pa1 with [AP = 0b100];"], ("0", "y"), &[], "STR X2,[X3]", "true");
    let e = litmus::parse("ap.litmus.toml", &text).unwrap_err();
    assert!(e.problem.contains("AP = 0bNN") && e.line == 5, "{e}");
}

/// One thread at exception level `EL` loads `x` (7 at first) into `X0`,
/// then stores 1 to it, with `x` mapped with permissions `AP`; its handler
/// (for a fault at EL1 or from EL0) sets `X2` (1 at first) to 0 and returns
/// past the access (a load that faulted leaves `X0` 0).
const ONE_THREAD: &str = concat!(
    r#"name = "AP"
symbolic = ["x"]
page_table_setup = """
    physical pa1;
    x |-> pa1 with [AP = AP_X];
    *pa1 = 7;
"""
[thread.0]
code = """
    LDR X0,[X1]
    STR X5,[X1]
"""
[thread.0.reset]
R1 = "x"
R2 = "extz(0b1, 64)"
R5 = "extz(0b1, 64)"
"PSTATE.EL" = "EL_X"
VBAR_EL1 = "extz(0x1000, 64)"
[section.thread0_el1_handler]
address = "0x1000"
"#,
    skip_handler!(),
    r#"[section.thread0_el1_handler_el0]
address = "0x1400"
"#,
    skip_handler!(),
    r#"[final]
assertion = "ASSERTION"
"#
);

#[test]
fn each_access_permission_allows_what_the_arm_arm_says_at_el0_and_el1() {
    let run = |ap: &str, el: &str, assertion: &str| {
        let text = ONE_THREAD.replace("AP_X", ap).replace("EL_X", el).replace("ASSERTION", assertion);
        litmus::run(&litmus::parse("ap.litmus.toml", &text).unwrap_or_else(|e| panic!("{e}"))).unwrap().verdict
    };
    // (AP, load at EL1, store at EL1, load at EL0, store at EL0): what each permits.
    for (ap, rows) in [
        ("0b00", [true, true, false, false]),
        ("0b01", [true, true, true, true]),
        ("0b10", [true, false, false, false]),
        ("0b11", [true, false, true, false]),
    ] {
        for (k, (el, load)) in [("0b01", true), ("0b01", false), ("0b00", true), ("0b00", false)].iter().enumerate() {
            // The access's outcome alone: a load's value (7, or 0 when it faulted);
            // a store's X2 (1, or 0 from the handler), whatever the load did.
            let (done, faulted) = if *load { ("0:X0=7", "0:X0=0") } else { ("0:X2=1", "0:X2=0") };
            let (happens, never) = if rows[k] { (done, faulted) } else { (faulted, done) };
            let what = format!("AP {ap} at EL {el}, {}", if *load { "load" } else { "store" });
            assert_eq!(run(ap, el, happens), Allowed, "{what}");
            assert_eq!(run(ap, el, never), Forbidden, "{what}");
        }
    }
}

#[test]
fn a_handler_branches_on_the_exceptions_syndrome() {
    // The shipped shootdown test: thread 1's handler reads ESR_EL1 and runs
    // a local TLBI for its SVC, and the fault path for a data abort.
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("litmus/vmsa");
    let text = std::fs::read_to_string(dir.join("MP.RT.EL1+dsb-shootdown-dsb+dsb-isb.litmus.toml")).unwrap();
    let asked = "assertion = \"1:X4 = 1 & 0:X6 = 2 & 1:X0 = 1 & 1:X2=0\"";
    assert!(text.contains(asked));
    let run = |text: &str| litmus::run(&litmus::parse("shootdown.litmus.toml", text).unwrap()).unwrap().verdict;
    assert_eq!(run(&text), Forbidden);
    // The load of x after the shootdown faults, and the handler's other
    // path (the data abort's class is not the SVC's) sets X2 to 1.
    assert_eq!(run(&text.replace(asked, "assertion = \"1:X4 = 1 & 0:X6 = 2 & 1:X0 = 1 & 1:X2=1\"")), Allowed);
    // Without the handler's TLBI the entry survives the shootdown.
    assert_eq!(run(&text.replacen("    TLBI VAE1,X6\n", "", 1)), Allowed);
    // The classes the handler computed: a data abort from EL0 (0x24) less
    // an SVC's (0x15) on the fault path, 0 after the SVC alone.
    assert_eq!(run(&text.replace(asked, "assertion = \"1:X2=1 & 1:X9=15\"")), Allowed);
    assert_eq!(run(&text.replace(asked, "assertion = \"1:X2=1 & ~(1:X9=15)\"")), Forbidden);
    assert_eq!(run(&text.replace(asked, "assertion = \"1:X2=0 & 1:X9=0\"")), Allowed);
}

#[test]
fn an_invalid_level_2_entry_faults_every_walk_below_it_and_leaves_cached_entries_until_a_tlbi() {
    // Thread 0 makes the level-2 descriptor invalid, runs `after`, then
    // sets y; thread 1 loads x (5 at first) after seeing y.
    let run = |after: &[&str], assertion: &str| {
        let setup = ["x |-> pa1;", "x ?-> invalid at level 2;", "y |-> pa2;", "*pa1 = 5;"];
        let writer = [&["STR X0,[X1]", "DSB SY"], after].concat();
        let regs = ("extz(0b0, 64)", "pte2(x, page_table_base)");
        verdict(&page_table_mp(&setup, regs, &writer, "LDR X2,[X3]", assertion))
    };
    let tlbi: &[&str] = &["TLBI VMALLE1IS", "DSB SY"];
    // Once thread 0's TLBI completed, thread 1's load of x walks, and faults at level 2.
    assert_eq!(run(tlbi, "1:X0=1 & 1:X2=5"), Forbidden);
    assert_eq!(run(tlbi, "1:X0=1 & 1:X2=0"), Allowed);
    // Without it the leaf entry cached before may still translate x.
    assert_eq!(run(&[], "1:X0=1 & 1:X2=5"), Allowed);
    // Before thread 0's store the walk passes level 2.
    assert_eq!(run(tlbi, "1:X0=0 & 1:X2=5"), Allowed);
}

/// Builds a test of tlbkit's own in the format over `x`, `y` and `z`
/// (physical addresses 1 to 3, all 0 at first): each thread's code, every
/// thread starting with `X10` = x, `X11` = y, `X12` = z, `X5` = 1, `X6` = 2.
fn plain(name: &str, threads: &[&str], assertion: &str) -> litmus::Test {
    let mut text = format!(
        "name = \"{name}\"\nsymbolic = [\"x\", \"y\", \"z\"]\npage_table_setup = \"\"\"\n    \
         physical pa1 pa2 pa3;\n    x |-> pa1;\n    y |-> pa2;\n    z |-> pa3;\n\"\"\"\n"
    );
    for (t, code) in threads.iter().enumerate() {
        let code = code.split(';').map(|l| format!("    {}\n", l.trim())).collect::<String>();
        text += &format!(
            "[thread.{t}]\ncode = \"\"\"\n{code}\"\"\"\n[thread.{t}.reset]\nR10 = \"x\"\nR11 = \"y\"\nR12 = \"z\"\n\
             R5 = \"extz(0b1, 64)\"\nR6 = \"extz(0b10, 64)\"\n"
        );
    }
    text += &format!("[final]\nassertion = \"{assertion}\"\n");
    litmus::parse(name, &text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn the_classic_armv8_shapes_get_armv8s_verdicts() {
    // The architecture's well-known verdicts for its ordinary accesses: the
    // shapes of the Armv8 litmus literature, written here with the
    // instructions tlbkit models.
    const MP: &str = "1:X0=1 & 1:X2=0";
    const ADDR: &str = "LDR X0,[X11]; EOR X7,X0,X0; LDR X2,[X10,X7]";
    let cases: &[(&str, &[&str], &str, Verdict)] = &[
        ("SB", &["STR X5,[X10]; LDR X0,[X11]", "STR X5,[X11]; LDR X0,[X10]"], "0:X0=0 & 1:X0=0", Allowed),
        (
            "SB+dmbs",
            &["STR X5,[X10]; DMB SY; LDR X0,[X11]", "STR X5,[X11]; DMB SY; LDR X0,[X10]"],
            "0:X0=0 & 1:X0=0",
            Forbidden,
        ),
        ("MP", &["STR X5,[X10]; STR X5,[X11]", "LDR X0,[X11]; LDR X2,[X10]"], MP, Allowed),
        ("MP+dmb+addr", &["STR X5,[X10]; DMB SY; STR X5,[X11]", ADDR], MP, Forbidden),
        (
            "MP+dmb+ctrl",
            &["STR X5,[X10]; DMB SY; STR X5,[X11]", "LDR X0,[X11]; CBZ X0,L0; L0:; LDR X2,[X10]"],
            MP,
            Allowed,
        ),
        (
            "MP+dmb+ctrl-isb",
            &["STR X5,[X10]; DMB SY; STR X5,[X11]", "LDR X0,[X11]; CBZ X0,L0; L0:; ISB; LDR X2,[X10]"],
            MP,
            Forbidden,
        ),
        (
            "MP+dmb.st+dmb.ld",
            &["STR X5,[X10]; DMB ST; STR X5,[X11]", "LDR X0,[X11]; DMB LD; LDR X2,[X10]"],
            MP,
            Forbidden,
        ),
        ("MP+dmb.st+po", &["STR X5,[X10]; DMB ST; STR X5,[X11]", "LDR X0,[X11]; LDR X2,[X10]"], MP, Allowed),
        (
            "IRIW+addrs",
            &["STR X5,[X10]", "STR X5,[X11]", ADDR, "LDR X0,[X10]; EOR X7,X0,X0; LDR X2,[X11,X7]"],
            "2:X0=1 & 2:X2=0 & 3:X0=1 & 3:X2=0",
            Forbidden,
        ),
        (
            "IRIW",
            &["STR X5,[X10]", "STR X5,[X11]", "LDR X0,[X11]; LDR X2,[X10]", "LDR X0,[X10]; LDR X2,[X11]"],
            "2:X0=1 & 2:X2=0 & 3:X0=1 & 3:X2=0",
            Allowed,
        ),
        ("2+2W", &["STR X5,[X10]; STR X6,[X11]", "STR X5,[X11]; STR X6,[X10]"], "*x=1 & *y=1", Allowed),
        (
            "2+2W+dmbs",
            &["STR X5,[X10]; DMB SY; STR X6,[X11]", "STR X5,[X11]; DMB SY; STR X6,[X10]"],
            "*x=1 & *y=1",
            Forbidden,
        ),
        ("CoRR", &["STR X5,[X10]", "LDR X0,[X10]; LDR X2,[X10]"], "1:X0=1 & 1:X2=0", Forbidden),
        (
            "S+dmb+data",
            &["STR X6,[X10]; DMB SY; STR X5,[X11]", "LDR X0,[X11]; EOR X7,X0,X0; ADD X7,X7,#1; STR X7,[X10]"],
            "1:X0=1 & *x=2",
            Forbidden,
        ),
        ("S+dmb+po", &["STR X6,[X10]; DMB SY; STR X5,[X11]", "LDR X0,[X11]; STR X5,[X10]"], "1:X0=1 & *x=2", Allowed),
        (
            "LB+datas",
            &[
                "LDR X0,[X10]; EOR X7,X0,X0; ADD X7,X7,#1; STR X7,[X11]",
                "LDR X0,[X11]; EOR X7,X0,X0; ADD X7,X7,#1; STR X7,[X10]",
            ],
            "0:X0=1 & 1:X0=1",
            Forbidden,
        ),
    ];
    for &(name, threads, assertion, want) in cases {
        let got = litmus::run(&plain(name, threads, assertion)).unwrap().verdict;
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn a_search_past_its_bound_stops_with_an_error() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("litmus/vmsa");
    let test = litmus::load(&dir.join("MP.RT.EL1+dsb+dsb-tlbi-dsb+dsb+dsb-isb.litmus.toml")).unwrap();
    let e = litmus::engine::explore_within(&test, 1_000).unwrap_err();
    assert!(e.0.contains("passed 1000 states"), "{}", e.0);
    assert!(litmus::engine::explore(&test).unwrap().1 <= litmus::engine::MAX_STATES);
}

#[test]
fn a_bad_file_is_named_with_its_line() {
    let text =
        "arch = \"AArch64\"\nname = \"t\"\nsymbolic = [\"x\"]\npage_table_setup = \"\"\"\n    x |-> pa1;\n\"\"\"\n";
    let e = litmus::parse("t.toml", text).unwrap_err();
    assert_eq!(e.line, 5, "{e}");
    assert!(e.to_string().starts_with("t.toml:5: 'pa1'"), "{e}");
    let text = "name = \"t\"\nsymbolic = [\"x\"]\npage_table_setup = \"\"\"\n  physical pa1;\n  x |-> pa1;\n\"\"\"\n\
                [thread.0]\ncode = \"\"\"\n    HVC #0\n\"\"\"\n[final]\nassertion = \"true\"\n";
    let e = litmus::parse("t.toml", text).unwrap_err();
    assert_eq!(e.line, 9, "{e}");
    assert!(e.problem.contains("outside the subset"), "{e}");
}
