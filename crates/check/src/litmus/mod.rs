//! System litmus tests of the Arm VMSA: the published tests of Simner et al.,
//! "Relaxed virtual memory in Armv8-A" (ESOP 2022), run under tlbkit's
//! model of translation and compared with the published verdicts.
//!
//! # Design
//!
//! [`parse()`] reads an isla `.litmus.toml` test into a [`Test`]; [`engine`]
//! enumerates every final state the test can reach; [`run`] says whether the
//! test's final assertion holds in any of them (the outcome is *allowed*) or
//! in none (*forbidden*); [`compare`] sets that against the published verdict
//! (the "Strong" column of isla's `esop_test_results.csv`, the
//! `aarch64_mmu_strong_ETS.cat` model) and the lists of known differences,
//! [`KNOWN_STRENGTHENINGS`] and [`KNOWN_WEAKENINGS`]. The shipped subset is in
//! `crates/check/litmus/vmsa/` with its licence and `SOURCE.md`.
//!
//! # The subset
//!
//! Tests whose instructions tlbkit models: `LDR`/`STR` through a virtual
//! address (translated) or through a page-table entry's address (a
//! page-table store or load, not translated: the tests map their page
//! tables once and never change that mapping), `MOV`, `EOR` (for address
//! dependencies), `ADD`, `SUB` and `LSR` of an immediate, `CBZ`/`CBNZ`
//! (forward, to a label or a local label `1f`), `DMB` and `DSB`
//! (`SY`, `LD`, `ST` and their shareability forms), `ISB`, `TLBI VAE1`,
//! `VALE1`, `VMALLE1` and their `IS` forms, and exceptions: `SVC`, `ERET`,
//! `MRS`/`MSR` of `ELR_EL1` and `SPSR_EL1`, `MRS` of `ESR_EL1`, and handlers at
//! `VBAR_EL1` + 0x000 (EL1 on `SP_EL0`), 0x200 (EL1 on `SP_EL1`) or 0x400
//! (from EL0), for translation and permission faults and `SVC`; a thread's ASID (its
//! `TTBR0_EL1` reset, `ttbr(asid=n, base=page_table_base)`) tags its TLB
//! entries, and `TLBI ASIDE1` (and `IS`) invalidates one ASID's (`VAE1`'s
//! operand `page(x)` names ASID 0). Two levels of page table: one level-2
//! descriptor every virtual address of the test is walked through (isla
//! places them in one 2 MiB region), valid (a table) or made invalid by the
//! test's code (`pte2(x, page_table_base)`: every walk below it faults at
//! level 2; cached entries stay until invalidated), and a level-3 descriptor
//! per virtual address, valid (a physical address,
//! with its access permissions, `with [AP = 0bNN]`, read-write at both
//! exception levels without),
//! invalid, or a raw invalid value a test's code writes (`x ?-> raw(2)`).
//! Not in the subset: EL2 and stage 2, `TTBR` writes, global entries, PAN,
//! the access flag, block entries and other levels, page tables
//! laid out by hand, backward branches.
//!
//! # The model
//!
//! Operational, in the style of Flat (Pulte et al., "Simplifying ARM
//! concurrency", POPL 2018), with translation. One memory for every thread
//! (Armv8 is other-multi-copy-atomic: a store propagates to all threads at
//! once); each thread runs its instructions out of order, each step waiting
//! only for what Arm's ordered-before relation puts before it
//! ([`engine`]'s `waits` states each rule):
//! - **Ordinary accesses.** A load is satisfied from memory, or forwarded
//!   from the thread's latest earlier store to its location while that store
//!   has not propagated; a store propagates once it is no longer
//!   speculative (earlier branches resolved, earlier accesses translated
//!   without a fault) and after the earlier accesses to its location.
//!   Dependencies order through registers; `DMB SY`/`LD`/`ST`, `DSB` and
//!   `ISB` order as Arm's `bob` and `ctxob` say. Two loads of one location
//!   read in coherence order unless the later one read the same write
//!   first (Flat's restart, as a constraint). Branches are guessed when the
//!   search starts, so loads run ahead of a branch; stores do not.
//! - **TLBs.** Each thread has a TLB. At any moment a walk may fill it with
//!   the translation the page table holds at that moment; an access's
//!   translation uses a cached entry for its address (any one, even stale)
//!   or walks memory (a valid descriptor fills the TLB; an invalid one is a
//!   translation fault, never cached; so is any walk while the level-2
//!   descriptor is invalid, whatever the level-3 one holds). A translation
//!   keeps its descriptor's permissions: an access they deny at the
//!   thread's exception level, from the TLB or a walk, is a permission
//!   fault (the entry stays cached, and so does the fault until an
//!   invalidation removes it). A walk may also read the thread's
//!   own latest earlier store to the descriptor before other threads see it,
//!   once no branch or fault before that store can undo it (Arm's model
//!   forwards to walks, but not from a speculative store).
//! - **Translation ahead of the access until `ISB`.** An access may be
//!   translated as soon as its address registers are known and every
//!   earlier `ISB` (or taken fault) has run, before the access itself and
//!   across `DMB` and `DSB`; the access uses that translation when it runs.
//! - **Invalidation completes at the issuer's `DSB`.** A `TLBI` is issued
//!   once nothing before it can be undone and the `DSB`s and context
//!   synchronisations before it have run (not after earlier loads and
//!   stores: without a `DSB` it may pass a page-table store, and a walk
//!   then refills the old entry), and completes at any moment before,
//!   and at the latest at, the issuing thread's next `DSB`: it removes the
//!   matching entries from the issuer's TLB, or from every thread's (`IS`
//!   forms). A broadcast completion waits for another thread's access in
//!   flight whose translation of a covered page the page table no longer
//!   holds (Arm orders that access before the `TLBI`). The issuer's own
//!   accesses after its `DSB` that were translated early through a
//!   descriptor another thread has since overwritten are translated again
//!   (Arm orders that translation before the other thread's store, the store
//!   before the `TLBI`); one its own store overwrote survives until an
//!   `ISB` (internal edges are not in ordered-before).
//! - **Exceptions.** A translation or permission fault or `SVC` is taken once the
//!   branches, translations, barriers and context synchronisations before
//!   it have run (not the earlier loads and stores: Arm orders a fault
//!   after those only through a barrier): it records its return address
//!   (`ELR_EL1`), mode (`SPSR_EL1`) and syndrome (`ESR_EL1`: the class of
//!   an `SVC` or of a data abort from EL0 or EL1, `IL`, and for an abort
//!   `WnR` and the fault status, a translation fault at its level or a
//!   permission fault), enters EL1, and the handler at the
//!   vector of the mode it came from runs next, its branches guessed as the
//!   thread's are; everything after it runs
//!   again. `ERET` returns to the mode `SPSR_EL1` holds, at the instruction
//!   after the exception (the only return tlbkit follows). Both synchronise
//!   context, as `ISB` does, and neither makes a store visible. A thread
//!   without a handler at that vector ends there, reaching no final state.
//!
//! These are the rules of the Arm Architecture Reference Manual (DDI 0487),
//! "The AArch64 Virtual Memory System Architecture" and "The AArch64
//! Application Level Memory Model", which the paper above and Arm's
//! axiomatic models (`aarch64_mmu_strong_ETS.cat`) state axiomatically.
//!
//! What it lacks: acquire/release and exclusives (not in the subset);
//! `TLBI` by VA invalidates exactly its page; no break-before-make
//! conflicts or intermediate walk caches; no TTBR writes in the shipped
//! tests (none is in the subset); a store waits for its thread's pending
//! `TLBI`s (no shipped test separates this from Arm's weaker order); a load is satisfied only
//! once every earlier store's location is known (Flat would speculate and
//! restart). Where the model makes a published *allowed* outcome
//! unreachable, the test is a [`KNOWN_STRENGTHENINGS`] entry with the
//! reason; where it allows a published *forbidden* one, a
//! [`KNOWN_WEAKENINGS`] entry.

pub mod engine;
pub mod parse;

pub use parse::{parse, LitmusError};
use std::collections::BTreeMap;

/// A register: `X0`-`X30`, then the system state an exception reads and
/// writes ([`ELR`], [`SPSR`], [`MODE`]).
pub type Reg = u8;

/// `ELR_EL1`: where an exception returns to.
pub const ELR: Reg = 31;
/// `SPSR_EL1`: the mode an exception was taken from (`PSTATE.M`).
pub const SPSR: Reg = 32;
/// `PSTATE.M`: 0 for EL0, 4 for EL1 on `SP_EL0`, 5 for EL1 on `SP_EL1`.
pub const MODE: Reg = 33;
/// `ESR_EL1`: the syndrome of the last exception taken (its class in bits
/// 31:26, as the Arm ARM's `ESR_ELx` gives it).
pub const ESR: Reg = 34;
/// How many registers a thread has.
pub const REGS: usize = 35;

/// A value in a register or at a memory location.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Val {
    /// A number (`0` is also the invalid descriptor).
    Int(u64),
    /// A virtual address of the test, by index into [`Test::vas`].
    Va(usize),
    /// The address of a virtual address's level-3 descriptor (`pte3(x, ...)`).
    PteAddr(usize),
    /// The address of the level-2 descriptor every virtual address of the
    /// test is walked through (`pte2(x, ...)`: the test's addresses lie in
    /// one 2 MiB region, as isla allocates them, so they share it).
    Level2Addr,
    /// The valid level-2 descriptor pointing to the test's level-3 table
    /// (its initial value; `0` makes every walk of the region fault at
    /// level 2).
    Table,
    /// A valid level-3 descriptor (`desc3`, `mkdesc3`).
    Desc(Desc),
    /// The page number of a virtual address, a `TLBI` operand (`page(x)`).
    Page(usize),
    /// The address of an instruction: its code (0 the thread's, `k` its
    /// `k`-th handler) and index (a label, `ELR_EL1`; `ADD #4` is the next).
    Code(usize, usize),
}

impl Val {
    /// Returns the descriptor of a mapping: valid, or invalid (0).
    pub fn descriptor(d: Option<Desc>) -> Val {
        d.map_or(Val::Int(0), Val::Desc)
    }
}

/// A valid level-3 descriptor: the physical address it maps, and its
/// stage 1 data access permissions, `AP[2:1]` (Arm ARM, "Data access
/// permissions for stage 1 translations"): `0b00` read-write at EL1, no
/// access at EL0; `0b01` read-write at both (isla's `default`, and every
/// mapping without attributes); `0b10` read-only at EL1, no access at EL0;
/// `0b11` read-only at both. An access its permissions deny is a
/// permission fault. (PAN is off: EL1 reaches pages EL0 may access.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Desc {
    /// The physical address, by index into [`Test::pas`].
    pub pa: usize,
    /// `AP[2:1]`.
    pub ap: u8,
}

impl Desc {
    /// A read-write descriptor of `pa` (`mkdesc3(oa=pa)`, a mapping without attributes).
    pub fn read_write(pa: usize) -> Desc {
        Desc { pa, ap: 0b01 }
    }

    /// Whether its permissions allow a load, or a store if `store`, at EL0
    /// (`el0`) or EL1.
    pub fn permits(self, store: bool, el0: bool) -> bool {
        let el0_access = self.ap & 0b01 != 0;
        let read_only = self.ap & 0b10 != 0;
        (el0_access || !el0) && !(read_only && store)
    }
}

/// Where an access goes: a base register, and an offset register (which
/// carries an address dependency, always zero here).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Addr {
    /// The base register.
    pub base: Reg,
    /// The offset register, if any.
    pub offset: Option<Reg>,
}

/// Which accesses a `DMB` or `DSB` orders (its shareability domain is not
/// modelled: `ISH`, `OSH` and `NSH` forms act as the full-system ones, as
/// Arm's axiomatic models take them, whose verdicts these tests carry; no
/// shipped test has an `NSH` barrier). The checker's own engine is weaker
/// there, as the Arm ARM's rules are: its `DSB NSH` completes a broadcast
/// `TLBI` on the issuer's TLB only (`kernel::Pending`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Barrier {
    /// `SY` (and `ISH`, `OSH`, `NSH`): every access before it with every access after it.
    Full,
    /// `LD` forms: loads before it with every access after it.
    Ld,
    /// `ST` forms: stores before it with stores after it.
    St,
}

impl Barrier {
    /// Reads a barrier's operand (`SY`, `ISHST`, ...); `None` for another.
    pub fn of(operand: &str) -> Option<Barrier> {
        match operand.trim().to_ascii_uppercase().as_str() {
            "SY" | "ISH" | "OSH" | "NSH" => Some(Barrier::Full),
            "LD" | "ISHLD" | "OSHLD" | "NSHLD" => Some(Barrier::Ld),
            "ST" | "ISHST" | "OSHST" | "NSHST" => Some(Barrier::St),
            _ => None,
        }
    }
}

/// What a `TLBI` invalidates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlbiScope {
    /// One page of one ASID, the register holding `page(x)` (ASID 0) (`VAE1`, `VALE1`).
    Va(Reg),
    /// Every entry of one ASID, the register holding `asid(n)` (`ASIDE1`).
    Asid(Reg),
    /// Every entry (`VMALLE1`).
    All,
}

/// A TLB invalidation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tlbi {
    /// What it invalidates.
    pub scope: TlbiScope,
    /// Whether every thread's TLB (`IS`) or the issuer's only.
    pub broadcast: bool,
}

/// An instruction of the subset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Instr {
    /// `LDR Xt,[Xn{,Xm}]`.
    Ldr {
        /// Destination.
        rt: Reg,
        /// Address.
        addr: Addr,
    },
    /// `STR Xt,[Xn{,Xm}]`.
    Str {
        /// Source.
        rt: Reg,
        /// Address.
        addr: Addr,
    },
    /// `MOV Xd,#imm`.
    MovImm {
        /// Destination.
        rd: Reg,
        /// The value.
        imm: u64,
    },
    /// `MOV Xd,Xs`.
    MovReg {
        /// Destination.
        rd: Reg,
        /// Source.
        rs: Reg,
    },
    /// `EOR Xd,Xn,Xm`.
    Eor {
        /// Destination.
        rd: Reg,
        /// First operand.
        rn: Reg,
        /// Second operand.
        rm: Reg,
    },
    /// `CBZ`/`CBNZ Xt,label`.
    Cbz {
        /// The register tested.
        rt: Reg,
        /// The label branched to.
        target: String,
        /// `CBNZ` (branch when not zero).
        nonzero: bool,
    },
    /// `DMB` of a kind.
    Dmb(Barrier),
    /// `DSB` of a kind.
    Dsb(Barrier),
    /// `ISB`.
    Isb,
    /// `TLBI`.
    Tlbi(Tlbi),
    /// `ADD Xd,Xn,#imm`.
    AddImm {
        /// Destination.
        rd: Reg,
        /// Operand.
        rn: Reg,
        /// The immediate.
        imm: u64,
    },
    /// `LSR Xd,Xn,#imm`.
    LsrImm {
        /// Destination.
        rd: Reg,
        /// Operand.
        rn: Reg,
        /// The shift.
        imm: u64,
    },
    /// `SUB Xd,Xn,#imm`.
    SubImm {
        /// Destination.
        rd: Reg,
        /// Operand.
        rn: Reg,
        /// The immediate.
        imm: u64,
    },
    /// `MRS Xt,ELR_EL1`, `MRS Xt,SPSR_EL1` or `MRS Xt,ESR_EL1`.
    Mrs {
        /// Destination.
        rt: Reg,
        /// [`ELR`], [`SPSR`] or [`ESR`].
        sys: Reg,
    },
    /// `MSR ELR_EL1,Xt` or `MSR SPSR_EL1,Xt`.
    Msr {
        /// [`ELR`] or [`SPSR`].
        sys: Reg,
        /// Source.
        rt: Reg,
    },
    /// `SVC #imm`: a synchronous exception to EL1, `imm` its syndrome's.
    Svc(u16),
    /// `ERET`: return from an exception.
    Eret,
}

/// An exception handler: the code at one of the thread's exception vectors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Handler {
    /// Its vector: the offset from `VBAR_EL1` (0x000 for EL1 on `SP_EL0`,
    /// 0x200 for EL1 on `SP_EL1`, 0x400 for EL0).
    pub offset: u64,
    /// Its instructions (forward branches only).
    pub code: Vec<Instr>,
    /// Each label's instruction index.
    pub labels: BTreeMap<String, usize>,
}

/// One thread of a test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Thread {
    /// Its instructions.
    pub code: Vec<Instr>,
    /// Each label's instruction index.
    pub labels: BTreeMap<String, usize>,
    /// Initial register values (the others are 0).
    pub regs: BTreeMap<Reg, Val>,
    /// Its exception handlers (a fault or `SVC` with no handler at its
    /// vector ends that execution).
    pub handlers: Vec<Handler>,
    /// The ASID its `TTBR0_EL1` holds (0 unless the test sets it): its TLB
    /// entries are tagged with it.
    pub asid: u16,
}

/// A final assertion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cond {
    /// Always.
    True,
    /// Not.
    Not(Box<Cond>),
    /// Both.
    And(Box<Cond>, Box<Cond>),
    /// Either.
    Or(Box<Cond>, Box<Cond>),
    /// `T:Xn = v`.
    Reg(usize, Reg, Val),
    /// `*x = v` or `*pa = v`: the last write to a physical address (by index
    /// into [`Test::pas`]; a virtual address names the physical address its
    /// initial mapping gives, as isla reads it).
    Mem(usize, Val),
}

/// A litmus test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Test {
    /// Its name.
    pub name: String,
    /// Its virtual addresses (`symbolic`).
    pub vas: Vec<String>,
    /// Its physical addresses (`physical`).
    pub pas: Vec<String>,
    /// Each virtual address's initial mapping (`None`: invalid).
    pub mapping: Vec<Option<Desc>>,
    /// Each physical address's initial value.
    pub memory: Vec<u64>,
    /// Its threads.
    pub threads: Vec<Thread>,
    /// The outcome asked about.
    pub assertion: Cond,
}

impl Test {
    /// Returns the index of virtual address `name`.
    pub fn va(&self, name: &str) -> Option<usize> {
        self.vas.iter().position(|v| v == name.trim())
    }
    /// Returns the index of physical address `name`.
    pub fn pa(&self, name: &str) -> Option<usize> {
        self.pas.iter().position(|v| v == name.trim())
    }
}

/// Whether an outcome can happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Some execution ends in it.
    Allowed,
    /// No execution ends in it.
    Forbidden,
}

impl Verdict {
    /// Returns the word: `allowed` or `forbidden`.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Allowed => "allowed",
            Verdict::Forbidden => "forbidden",
        }
    }
}

/// Returns the test in the file at `path`.
pub fn load(path: &std::path::Path) -> Result<Test, crate::Error> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| crate::Error::LitmusRead { file: file.clone(), why: e.to_string() })?;
    Ok(parse(&file, &text)?)
}

/// Returns the litmus files at `path`: the file itself, or a folder's
/// `*.litmus.toml` files in name order.
pub fn files(path: &std::path::Path) -> Result<Vec<std::path::PathBuf>, crate::Error> {
    let read = |e: std::io::Error| crate::Error::LitmusRead { file: path.display().to_string(), why: e.to_string() };
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut out = Vec::new();
    for entry in std::fs::read_dir(path).map_err(read)? {
        let p = entry.map_err(read)?.path();
        if p.to_string_lossy().ends_with(".litmus.toml") {
            out.push(p);
        }
    }
    if out.is_empty() {
        return Err(crate::Error::LitmusRead {
            file: path.display().to_string(),
            why: "the folder has no *.litmus.toml file".into(),
        });
    }
    out.sort();
    Ok(out)
}

/// tlbkit's verdict on a test's outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// The test's name.
    pub name: String,
    /// Whether the outcome is reachable.
    pub verdict: Verdict,
    /// How many states the search visited.
    pub states: usize,
    /// How many distinct final states it reached.
    pub finals: usize,
}

/// Returns tlbkit's verdict on `test`'s final assertion.
///
/// The error is a test the parser accepted that the engine cannot run (an
/// access through a number, an `ERET` elsewhere than after its exception).
pub fn run(test: &Test) -> Result<Run, crate::Error> {
    let (finals, states) =
        engine::explore(test).map_err(|e| crate::Error::LitmusRun { why: format!("{}: {}", test.name, e.0) })?;
    let reachable = finals.iter().any(|f| engine::holds(f, &test.assertion));
    let verdict = if reachable { Verdict::Allowed } else { Verdict::Forbidden };
    Ok(Run { name: test.name.clone(), verdict, states, finals: finals.len() })
}

/// The shipped tests' published verdicts, as shipped (`expected.csv`).
pub const EXPECTED_CSV: &str = include_str!("../../litmus/vmsa/expected.csv");

/// Returns the published verdicts of `csv` (isla's `esop_test_results.csv`
/// layout: the test's name and the strong model's verdict in the first two
/// columns), by test name.
pub fn published(csv: &str) -> BTreeMap<String, Verdict> {
    let mut out = BTreeMap::new();
    for line in csv.lines().skip(1) {
        let mut cols = line.split(',');
        let (Some(name), Some(v)) = (cols.next(), cols.next()) else { continue };
        let v = match v.trim() {
            "allowed" => Verdict::Allowed,
            "forbidden" => Verdict::Forbidden,
            _ => continue,
        };
        // Two rows name their test with its file's `.toml` suffix.
        out.insert(name.trim().trim_end_matches(".toml").to_string(), v);
    }
    out
}

/// Published-allowed outcomes tlbkit's model cannot reach, each with why.
pub const KNOWN_STRENGTHENINGS: &[(&str, &str)] = &[
    ("MP.RT.EL1+dsb-tlbiis-dsb+dmb", "a broadcast TLBI completes only after another thread's access in flight through the entry it removes is performed (Arm's model orders the access before the TLBI), so the load of x after the DMB cannot use its translation from before the TLBI; Arm's models differ on this test: the run of aarch64_mmu_strong_ETS of 2022-09-14 (isla_machinery/regressions) forbids it, the published one and that of 2022-12-21 allow it"),
    ("MP.RT.inv+dmb+ctrl-trfi", "a store after a control dependency is not visible to the thread's walks before the branch resolves (a walk reads its own thread's store early only once no branch before the store can undo it; Arm's model: speculative ; trfi is in translation-ordered-before, \"no forwarding from speculative writes\"); the run of aarch64_mmu_strong_ETS of 2022-09-14 (isla_machinery/regressions) forbids it too"),
    ("RDW.alias", "the outcome is a cycle of Arm's ordered-before (DMB, rfe, addr, fr, rfe, addr, fr, where the load of w reads from before the store to x through the physical address they share), which no other-multi-copy-atomic memory can show; the run of aarch64_mmu_strong_ETS of 2022-09-14 (isla_machinery/regressions) forbids it too"),
];

/// Published-forbidden outcomes tlbkit's model reaches, each with why.
pub const KNOWN_WEAKENINGS: &[(&str, &str)] = &[];

/// How tlbkit's verdict stands against the published one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Agreement {
    /// The same verdict.
    Agree,
    /// Published allowed, tlbkit forbids, and the reason is known.
    KnownStrengthening(&'static str),
    /// Published forbidden, tlbkit allows, and the reason is known.
    KnownWeakening(&'static str),
    /// A difference no list explains.
    Disagree,
    /// No published verdict for the test.
    Unpublished,
}

impl Agreement {
    /// Returns the word the CLI prints.
    pub fn word(&self) -> &'static str {
        match self {
            Agreement::Agree => "agree",
            Agreement::KnownStrengthening(_) => "known strengthening",
            Agreement::KnownWeakening(_) => "known weakening",
            Agreement::Disagree => "DISAGREE",
            Agreement::Unpublished => "unpublished",
        }
    }
}

/// Returns how tlbkit's verdict on `name` stands against `published`.
pub fn compare(name: &str, tlbkit: Verdict, published: Option<Verdict>) -> Agreement {
    let listed = |list: &[(&str, &'static str)]| list.iter().find(|(n, _)| *n == name).map(|(_, r)| *r);
    match (tlbkit, published) {
        (_, None) => Agreement::Unpublished,
        (a, Some(b)) if a == b => Agreement::Agree,
        (Verdict::Forbidden, Some(Verdict::Allowed)) => {
            listed(KNOWN_STRENGTHENINGS).map_or(Agreement::Disagree, Agreement::KnownStrengthening)
        }
        _ => listed(KNOWN_WEAKENINGS).map_or(Agreement::Disagree, Agreement::KnownWeakening),
    }
}
