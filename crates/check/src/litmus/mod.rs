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
//! dependencies), `CBZ`/`CBNZ`, `DMB`, `DSB`, `ISB`, and `TLBI VAE1`,
//! `VALE1`, `VMALLE1` and their `IS` forms. One level of page table: a
//! level-3 descriptor per virtual address, valid (a physical address) or
//! not. A fault handler is accepted only in the form the tests use to record
//! a translation fault: it moves constants into registers and returns to the
//! next instruction, or ends the thread. Not in the subset: `SVC`, `ERET` in a thread's code,
//! EL2 and stage 2, access permissions, other levels, raw descriptors.
//!
//! # The model
//!
//! Operational. Each thread runs its instructions in program order against
//! one memory (sequential consistency for every access, page-table ones
//! included), with these translation rules:
//! - **TLBs.** Each thread has a TLB. At any moment a walk may fill it with
//!   the translation the page table holds at that moment; an access uses a
//!   cached entry for its address (any one, even stale) or walks now (a valid
//!   descriptor fills the TLB; an invalid one is a translation fault, never
//!   cached).
//! - **Invalidation completes at the issuer's `DSB`.** A `TLBI` is pending
//!   from its execution; it completes at any moment before, and at the
//!   latest at, the issuing thread's next `DSB`: then it removes the matching
//!   entries from the issuer's TLB, or from every thread's (`IS` forms).
//! - **Translation ahead of execution until `ISB`.** A thread may translate a
//!   later access early, at any moment after the last context-synchronising
//!   event before it (an `ISB`, or a taken fault and its return), within the
//!   straight-line code ahead of it (the model does not speculate past a
//!   branch): it needs only its address registers, so an address dependency
//!   on a load orders the translation after the load, and `DMB` and `DSB`
//!   do not. That translation is used when the access runs, whatever
//!   happens in between, with one exception: the thread's own `TLBI` of the
//!   address, completed before the access (which its `DSB` makes wait),
//!   removes an early translation that read a descriptor another thread has
//!   since overwritten. Arm's model orders that translation before the
//!   other thread's store (a from-read edge to another thread is in its
//!   ordered-before relation), the store before the `TLBI`, and so the
//!   translation among those the `TLBI` invalidates; a descriptor the
//!   thread overwrote itself orders nothing (internal edges are not in
//!   ordered-before), and its early translation survives until an `ISB`.
//!
//! These are the rules of the Arm Architecture Reference Manual (DDI 0487),
//! "The AArch64 Virtual Memory System Architecture": TLB maintenance
//! instructions complete only at a `DSB` by the issuing PE, and only a
//! context synchronization event makes later instructions' translations
//! see the result; the paper above states them axiomatically.
//! - **Faults.** A translation fault runs the thread's handler (its register
//!   moves) and resumes at the next instruction (or ends the thread, for a
//!   handler that does not return).
//!
//! Which architectural relaxations this has: stale TLB entries until a
//! `TLBI` completes; `TLBI` completion deferred to the issuer's `DSB`;
//! translations performed out of order with respect to loads and stores of
//! the same thread unless an `ISB` (or address dependency) orders them,
//! which includes a walk missing the thread's own earlier page-table store.
//!
//! Which it lacks: every ordinary access is sequentially consistent (no
//! load buffering, store buffering, message passing without barriers, or
//! forwarding); page-table walks read coherent memory, so no walk reads a
//! value older than the coherence order allows (so `DSB ISHST` is not needed
//! for another thread's walk to see a store), and two walks of one thread
//! do not read out of order with each other; `TLBI` by VA invalidates
//! exactly its page; no break-before-make conflicts or intermediate walk
//! caches; no TTBR writes in the shipped tests (none is in the subset); no
//! speculation past a branch. Where this makes a published *allowed*
//! outcome unreachable, the test is a [`KNOWN_STRENGTHENINGS`] entry with the
//! reason; where it allows a published *forbidden* one, a
//! [`KNOWN_WEAKENINGS`] entry.

pub mod engine;
pub mod parse;

pub use parse::{parse, LitmusError};
use std::collections::BTreeMap;

/// A general-purpose register, `X0`-`X30`.
pub type Reg = u8;

/// A value in a register or at a memory location.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Val {
    /// A number (`0` is also the invalid descriptor).
    Int(u64),
    /// A virtual address of the test, by index into [`Test::vas`].
    Va(usize),
    /// The address of a virtual address's level-3 descriptor (`pte3(x, ...)`).
    PteAddr(usize),
    /// A valid level-3 descriptor mapping a physical address (`desc3`, `mkdesc3`).
    Desc(usize),
    /// The page number of a virtual address, a `TLBI` operand (`page(x)`).
    Page(usize),
}

impl Val {
    /// Returns the descriptor of a mapping: valid to `pa`, or invalid (0).
    pub fn descriptor(pa: Option<usize>) -> Val {
        pa.map_or(Val::Int(0), Val::Desc)
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

/// What a `TLBI` invalidates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlbiScope {
    /// One page, the register holding `page(x)` (`VAE1`, `VALE1`).
    Va(Reg),
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
    /// `DMB` of any kind.
    Dmb,
    /// `DSB` of any kind.
    Dsb,
    /// `ISB`.
    Isb,
    /// `TLBI`.
    Tlbi(Tlbi),
}

/// A fault handler that records the fault and resumes after the access.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Handler {
    /// Its register moves, in order.
    pub moves: Vec<Instr>,
    /// The register it computes the return address in.
    pub scratch: Option<Reg>,
    /// Whether it returns to the next instruction (or the thread ends).
    pub returns: bool,
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
    /// Its fault handler, if it has one.
    pub handler: Option<Handler>,
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
    /// `*x = v`: memory at virtual address `x` through the final page table.
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
    pub mapping: Vec<Option<usize>>,
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
/// access through a number, a fault with no handler).
pub fn run(test: &Test) -> Result<Run, crate::Error> {
    let (finals, states) =
        engine::explore(test).map_err(|e| crate::Error::LitmusRun { why: format!("{}: {}", test.name, e.0) })?;
    let reachable = finals.iter().any(|f| engine::holds(test, f, &test.assertion));
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
        out.insert(name.trim().to_string(), v);
    }
    out
}

/// Published-allowed outcomes tlbkit's model cannot reach, each with why.
pub const KNOWN_STRENGTHENINGS: &[(&str, &str)] = &[
    ("MP+pos", "ordinary accesses are sequentially consistent: the model lacks reordering of two stores or two loads (message passing without barriers)"),
    ("MP.alias3+rfi-data+dmb", "ordinary accesses are sequentially consistent: the model lacks store forwarding (a load reading its own thread's store before other threads see it)"),
    ("PPOCA.alias", "ordinary accesses are sequentially consistent: the model lacks speculation past a branch and store forwarding"),
    ("RDW.alias", "ordinary accesses are sequentially consistent: the model lacks reordering of loads to different addresses (through aliases)"),
    ("RSW.alias", "ordinary accesses are sequentially consistent: the model lacks reordering of loads to different addresses (through aliases)"),
    ("CoTRpte.inv+po", "ordinary accesses are sequentially consistent and walks read coherent memory: the model lacks a later load of a descriptor reading an older value than an earlier access's walk read"),
    ("CoWTf.inv+poloc-ctrl-isb", "ordinary accesses are sequentially consistent: the model lacks store forwarding (the thread's load reads its own page-table store before the store is visible to its walks)"),
    ("MP.RT.inv+dmb+ctrl-trfi", "ordinary accesses are sequentially consistent and nothing runs past a branch: the model lacks a store after a control dependency becoming visible to a walk before the load it depends on"),
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
