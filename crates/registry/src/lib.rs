//! The policy registry: which policies exist, what each one is, and how each is
//! built. It is the one place a policy is added (machines are in the
//! simulator's `preset`, workloads in its `workload`): one `register!` entry
//! gives the policy its name in `list`, `run`, `compare`, `sweep` and `check`,
//! its builder in the simulator and the checker alike ([`with_policy`]), and
//! everything the tools need to know about it ([`PolicyDef`]): its
//! architecture, its kernel, the `--set` switches it takes, the checker's ASID
//! space and default shape.
//!
//! C policies (`c:FILE...`, a kernel's own arch file compiled at run time) are
//! described here and built elsewhere. The registry knows what every C policy
//! is to the tools ([`C_POLICY`], found by its prefix [`C_PREFIX`]), so that
//! `list`, the catalogues and the checker's defaults read it as any entry;
//! but it compiles nothing and does not depend on the C front end
//! (`tlbkit-c`). The front end depends on the registry instead and adds its
//! one entry on top: `tlbkit_c::front::with_policy` builds a `c:` name
//! itself and hands every other name to [`with_policy`], so the simulator
//! and the checker go through that door; the registry's own [`with_policy`],
//! given a `c:` name, says so ([`Error::CPolicy`]). A policy cannot be handed
//! to the registry at run time instead, as an object or a function pointer:
//! [`WithPolicy::with`] is generic over the policy's type, and so are the
//! policy's methods over the hardware.
//!
//! No tool looks at a policy's name to decide what the policy is: a policy of
//! your own gets the defaults of the family its entry says it belongs to,
//! whatever it is called. The test `tests/registry.rs` of the workspace holds
//! every tool to that, under a name no prefix test would recognise (`alias`,
//! feature `test-alias`).
//!
//! Layout:
//! - this file: what an entry says ([`PolicyDef`] and its enums), what a
//!   policy is built from ([`Build`]), and the lookup by name ([`policy`]);
//! - `policies.rs`: the `register!` table, one entry per policy ([`POLICIES`],
//!   [`with_policy`]);
//! - `alias.rs`: another name for a registered policy, for tests;
//! - `error.rs`: the registry's errors ([`Error`]);
//! - `param.rs`: the parameters a user gives tlbkit, as the simulator's and
//!   the checker's errors name them, and how a front end names them
//!   ([`Param`], [`Names`]).

mod alias;
pub mod error;
pub mod param;
mod policies;
pub mod suggest;

#[cfg(any(test, feature = "test-alias"))]
pub use alias::alias;
pub use error::Error;
pub use param::{Library, Names, Param};
pub use policies::{with_policy, POLICIES};
use tlbkit_policy::zoo::Bug;
use tlbkit_policy::Policy;

/// The instruction-set family, which decides the policies that can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// 64-bit Arm: TTBR0 with an ASID, `TLBI` with inner-shareable broadcast.
    Arm64,
    /// x86-64: CR3 with a PCID, `INVLPG`/`INVPCID`, IPIs for remote invalidation.
    X86_64,
}

/// The kernel a policy's code comes from, which decides the kernel the checker
/// runs it under: how that kernel takes pages away while reclaiming memory,
/// and the locking that goes with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Os {
    /// Linux: `kswapd` clears PTEs and flushes the batch once
    /// (`try_to_unmap_flush`, mm/rmap.c); `munmap` detaches the VMAs under the
    /// write side of the `mmap_lock` and zaps and flushes under the read side
    /// (`mmap_write_downgrade`, since v4.20's dd2283f2605e).
    Linux,
    /// Linux v4.10 (`x86-linux-410`, and LATR, which is built on it): reclaim
    /// as [`Os::Linux`], but `munmap` holds the write side of `mmap_sem` until it
    /// returns (no downgrade before v4.20), so no fault or `madvise` of the mm
    /// runs beside it.
    LinuxV410,
    /// FreeBSD (`arm64-noasid` too, FreeBSD arm64 before ASIDs): the page daemon
    /// invalidates each page in its pmap (`pmap_remove_all` ->
    /// `pmap_invalidate_page`, sys/*/pmap.c).
    Freebsd,
}

/// Where a policy's mechanism stands against the origins, the five documents
/// the project's mechanisms come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Era {
    /// One of an origin's policies (its number, 0 to 4): the kernel before or
    /// after the origin's change, or a fix of what the checker found in it.
    Origin(u8),
    /// A mechanism of the kernels before the origins (the history: Linux x86
    /// v4.10 to v5.13's shootdowns).
    History,
    /// A mechanism that came after the origins (Linux's INVLPGB, lazy
    /// `mm_cpumask` trimming, arm64's per-mm TLB modes; LATR).
    Later,
}

impl Era {
    /// Returns the era as `tlbkit list policies` gives it: `origin 002`,
    /// `history`, `later`.
    pub fn name(self) -> String {
        match self {
            Era::Origin(n) => format!("origin {n:03}"),
            Era::History => "history".into(),
            Era::Later => "later".into(),
        }
    }
}

impl Os {
    /// Returns whether the kernel is a Linux ([`Os::Linux`], [`Os::LinuxV410`]).
    pub fn is_linux(self) -> bool {
        matches!(self, Os::Linux | Os::LinuxV410)
    }
}

/// What the checker's `--asids` counts for a policy, and how many it gives
/// unless told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsidSpace {
    /// arm64's ASID space, a power of two from 4 to 65536 (a policy without
    /// ASIDs accepts and ignores it). By default the smallest power of two of
    /// at least CPUs + 2: one ASID per CPU's reservation, the reserved 0, and
    /// one to hand out.
    Arm64Asids,
    /// FreeBSD x86's PCIDs per CPU, a power of two from 4 to 4096. By default 4
    /// (`kernel_pmap`'s, `vmspace0`'s and two for user pmaps), so that switches
    /// between three processes roll the per-CPU generation over.
    PcidsPerCpu,
    /// Linux x86's 6 dynamic PCID slots per CPU (`TLB_NR_DYN_ASIDS`,
    /// arch/x86/include/asm/tlbflush.h): fixed by the kernel, so `--asids` does
    /// not change them (a kernel without PCIDs has none to size either).
    LinuxPcidSlots,
    /// Linux x86's global ASIDs (v6.15+ with `INVLPGB`), a power of two from 2
    /// to 2048 (the kernel has 2039 on a 12-bit PCID machine); the PCID slots
    /// stay 6. By default 2, so that three address spaces exhaust and reset
    /// the space.
    GlobalAsids,
    /// A kernel's own x86 `tlb.c`: the PCID space the file sizes its ASIDs
    /// from (`X86_CR3_PCID_BITS`, as a count of PCIDs), a power of two from
    /// 32 to 4096. By default 4096, the hardware's 12 bits; a smaller space
    /// shrinks `MAX_ASID_AVAILABLE` and with it the global ASIDs (32 PCIDs
    /// leave 8, IDs 6 to 13, with PTI compiled in), the 6 slots staying.
    X86Pcids,
}

impl AsidSpace {
    /// Returns the count `tlbkit check --cpus CPUS` gives `--asids` unless told
    /// otherwise (see each variant).
    pub fn default_count(self, cpus: usize) -> u32 {
        match self {
            AsidSpace::Arm64Asids => (cpus as u32 + 2).next_power_of_two(),
            AsidSpace::PcidsPerCpu => 4,
            AsidSpace::LinuxPcidSlots => 6,
            AsidSpace::GlobalAsids => 2,
            AsidSpace::X86Pcids => 4096,
        }
    }
}

/// What a policy is, for the checker's default shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// An ASID allocator whose rollovers a check must reach: the arm64 policies
    /// with ASIDs (Linux's generations, FreeBSD's epochs).
    AsidAllocator,
    /// A shootdown protocol: IPIs (x86) or broadcast invalidation without ASIDs
    /// (`arm64-noasid`), whose bugs need several initiators and targets.
    Shootdown,
}

/// The kernel switches a policy takes: `tlbkit run --set` and the checker's
/// `--teardown`. A switch a policy does not take is refused, not ignored.
#[derive(Clone, Copy, Debug)]
pub struct Switches {
    /// `--set kpti=on`: kernel page-table isolation, an ASID pair per mm.
    pub kpti: bool,
    /// `--set tlbi_range=on`, and the machine's own `FEAT_TLBIRANGE`: ranges
    /// flushed with range operations (`TLBI RVAE1IS`).
    pub tlbi_range: bool,
    /// `--set contpte` and `--set teardown` (the checker's `--teardown`): 64 KB
    /// folios and contiguous PTEs (arm64's `contpte.c`).
    pub contpte: bool,
    /// `--set tlb_mode=WORD`, with the word used when none is given, for the
    /// CPU count: `None` for a policy without it.
    pub tlb_mode: Option<fn(usize) -> u32>,
    /// `--set flush_ceiling=N`: x86 Linux's `tlb_single_page_flush_ceiling`,
    /// the pages above which a range flush becomes a full flush.
    pub flush_ceiling: bool,
    /// `--set pti=on`: x86 Linux's page-table isolation (v4.15 on), a user
    /// PCID beside each kernel PCID and CR3 writes at kernel entry and exit.
    pub pti: bool,
}

impl Switches {
    /// No switch.
    pub const NONE: Switches =
        Switches { kpti: false, tlbi_range: false, contpte: false, tlb_mode: None, flush_ceiling: false, pti: false };

    /// arm64 Linux's: KPTI, range invalidation and contiguous PTEs.
    pub const ARM64_LINUX: Switches = Switches { kpti: true, tlbi_range: true, contpte: true, ..Switches::NONE };

    /// x86 Linux's with PCIDs on Intel: the full-flush ceiling and PTI.
    pub const X86_LINUX_PCID: Switches = Switches { flush_ceiling: true, pti: true, ..Switches::NONE };

    /// x86 Linux's without PTI (a kernel without PCIDs, where PTI's every CR3
    /// write would flush, or AMD's, which needs none): the full-flush ceiling.
    pub const X86_LINUX_CEILING: Switches = Switches { flush_ceiling: true, ..Switches::NONE };
}

/// A registered policy: everything the tools know about it. Each field is set
/// in the policy's `register!` entry; no tool derives any of it from the name.
#[derive(Clone, Copy, Debug)]
pub struct PolicyDef {
    /// The name used on the command line.
    pub name: &'static str,
    /// One line for `tlbkit list`.
    pub description: &'static str,
    /// The architecture it is written for: it runs on that architecture's
    /// machines only.
    pub arch: Arch,
    /// The kernel it comes from.
    pub os: Os,
    /// The Linux release whose code it is, where it is one release's (its
    /// `register!` entry's `version`): a simulated run then uses that
    /// kernel's settings (batches, scheduler, PTI) whatever the machine's
    /// measurements were taken on. `None`: the code is no one release's, and
    /// a run uses the machine's kernel.
    pub version: Option<(u8, u8)>,
    /// Whether it runs only on machines with broadcast TLB invalidation, which
    /// on x86 is `INVLPGB` (every arm64 machine has `TLBI ...IS`).
    pub needs_broadcast_tlbi: bool,
    /// The kernel switches it takes.
    pub switches: Switches,
    /// What the checker's `--asids` counts for it, and its default.
    pub asids: AsidSpace,
    /// What it is, for the checker's default shape.
    pub family: Family,
    /// Whether the policy has switches for bug-zoo bugs (`with_bug`).
    pub zoo: bool,
    /// Where its mechanism stands against the origins.
    pub era: Era,
    /// Why `tlbkit bench check --policy all` leaves it out, where it does (a
    /// policy that stops at its finding times nothing); `None`: timed.
    pub untimed: Option<&'static str>,
}

impl PolicyDef {
    /// Returns the count `tlbkit check --policy NAME --cpus CPUS` gives `--asids`
    /// unless told otherwise ([`AsidSpace::default_count`]).
    pub fn default_asids(&self, cpus: usize) -> u32 {
        self.asids.default_count(cpus)
    }
}

/// What a policy is built from: the machine's shape and the `--set` options.
/// The simulator and the checker fill it in; a policy takes what it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Build {
    /// CPUs.
    pub cpus: usize,
    /// Address-space slots (slot 0 is the kernel's).
    pub mm_slots: usize,
    /// The ASID width (arm64), from `--set asid_bits` or the checker's `--asids`.
    pub asid_bits: u8,
    /// `--set kpti=on` ([`Switches::kpti`]).
    pub kpti: bool,
    /// `--set tlbi_range=on`, or the machine's `FEAT_TLBIRANGE`
    /// ([`Switches::tlbi_range`]).
    pub tlbi_range: bool,
    /// `--set tlb_mode=WORD`, if given; otherwise the policy's default for the
    /// CPU count ([`Switches::tlb_mode`]).
    pub tlb_mode: Option<u32>,
    /// `--set flush_ceiling=N`, if given; otherwise the kernel's default of 33
    /// ([`Switches::flush_ceiling`]).
    pub flush_ceiling: Option<u64>,
    /// `--set pti=on` ([`Switches::pti`]).
    pub pti: bool,
    /// Whether the machine has `INVPCID` (Intel from Haswell, AMD from Zen 2):
    /// PTI flushes a user PCID's page with it, and without it defers the
    /// flush to the next return to user mode.
    pub invpcid: bool,
    /// The bug-zoo bug to re-introduce (the checker's `zoo/<id>`), if any.
    pub bug: Option<Bug>,
    /// Built for the checker's small shapes (2 to 4 CPUs, a handful of address
    /// spaces): a policy may lower what only its heuristics use (how many CPUs an
    /// mm must run on before it changes mode, how often it samples) so that every
    /// path is reachable there, and says so in its description.
    pub checker: bool,
}

impl Build {
    /// Returns the build of `cpus` CPUs, `mm_slots` address-space slots and
    /// `asid_bits`-bit ASIDs with every switch off, no bug and not for the
    /// checker: set what differs with `Build { ..., ..Build::new(...) }`.
    pub fn new(cpus: usize, mm_slots: usize, asid_bits: u8) -> Build {
        Build {
            cpus,
            mm_slots,
            asid_bits,
            kpti: false,
            tlbi_range: false,
            tlb_mode: None,
            flush_ceiling: None,
            pti: false,
            invpcid: false,
            bug: None,
            checker: false,
        }
    }
}

/// Code that runs with a policy of whatever type a name stands for: the
/// simulator's run, the checker's search. [`with_policy`] calls [`WithPolicy::with`]
/// with a builder of fresh policies (the checker builds one per execution), so
/// that the policy's hooks are direct calls on its own type: the checker's
/// search is compiled for each registered policy; the simulator keeps only a
/// thin adapter per policy (its `sim/hooks.rs`).
pub trait WithPolicy {
    /// What the code returns.
    type Out;
    /// Runs the code with `build`, which returns a fresh policy each call.
    fn with<P: Policy + 'static>(self, build: &dyn Fn() -> P) -> Self::Out;
}

/// Returns the policy called `name`. Every `c:FILE[+FILE...]` is the one
/// C policy entry ([`C_POLICY`]): what it is comes from the files, which the
/// C front end builds when a tool runs it (`tlbkit_c::front::with_policy`).
pub fn policy(name: &str) -> Option<&'static PolicyDef> {
    if name.starts_with(C_PREFIX) {
        return Some(if c_is_x86(name) { &C_POLICY_X86 } else { &C_POLICY });
    }
    POLICIES.iter().find(|p| p.name == name).or_else(|| alias::find(name))
}

/// Where this crate's sources were when it was built: a `coverage` build
/// instruments the registry (it instantiates each policy's generic hooks),
/// and a check's report of a Rust policy's lines leaves these files out.
pub const SOURCE_DIR: &str = env!("CARGO_MANIFEST_DIR");

/// How a C policy's name starts: `c:arch/arm64/mm/context.c`.
pub const C_PREFIX: &str = "c:";

/// Returns whether the C policy `name` (`c:FILE[+FILE...]`) is x86's: a
/// part `arch=x86`, or, without an `arch=` part, a `.c` file named `tlb.c` or
/// under an `x86/` directory (`arch/x86/mm/tlb.c`). Every other C policy is
/// arm64's (`context.c`). The front end then refuses a file whose code is the
/// other architecture's, in one line.
pub fn c_is_x86(name: &str) -> bool {
    let parts = name.strip_prefix(C_PREFIX).unwrap_or(name);
    let parts = parts.split_once('#').map_or(parts, |(p, _)| p);
    let mut any_x86_file = false;
    for part in parts.split('+') {
        match part.strip_prefix("arch=") {
            Some(arch) => return arch == "x86",
            None => {
                let path = part.split_once('@').map_or(part, |(p, _)| p);
                let file = path.rsplit('/').next().unwrap_or(path);
                any_x86_file |= file == "tlb.c" || path.contains("x86/") && file.ends_with(".c");
            }
        }
    }
    any_x86_file
}

/// What an arm64 C policy is to the tools: a Linux arm64 ASID allocator, as
/// `arch/arm64/mm/context.c` is, with the kernel's switches for KPTI and
/// range invalidation.
pub static C_POLICY: PolicyDef = PolicyDef {
    name: C_PREFIX,
    description: "a kernel's arch/arm64/mm/context.c (and, if given, its asm/tlbflush.h or asm/mmu.h), compiled \
                  with the system's C compiler against tlbkit's shims: c:PATH[@REV][+PATH...][+cnp=on]",
    arch: Arch::Arm64,
    os: Os::Linux,
    version: None,
    needs_broadcast_tlbi: false,
    switches: Switches { kpti: true, tlbi_range: true, ..Switches::NONE },
    asids: AsidSpace::Arm64Asids,
    family: Family::AsidAllocator,
    zoo: false,
    era: Era::Later,
    untimed: Some("a kernel's own C: checked one file at a time with --policy c:PATH"),
};

/// What an x86 C policy is to the tools ([`c_is_x86`]): Linux x86's
/// `arch/x86/mm/tlb.c`, PCID slots per CPU, IPI shootdowns (and, with
/// `invlpgb=on` in its name, global ASIDs and broadcast `INVLPGB`), with the
/// kernel's switches for PTI and the full-flush ceiling.
pub static C_POLICY_X86: PolicyDef = PolicyDef {
    name: C_PREFIX,
    description: "a kernel's arch/x86/mm/tlb.c, compiled with the system's C compiler against tlbkit's x86 \
                  shims: c:PATH[@REV][+invlpgb=on][+sample=every][+arch=x86]",
    arch: Arch::X86_64,
    os: Os::Linux,
    version: None,
    needs_broadcast_tlbi: false,
    switches: Switches::X86_LINUX_PCID,
    asids: AsidSpace::X86Pcids,
    family: Family::Shootdown,
    zoo: false,
    era: Era::Later,
    untimed: Some("a kernel's own C: checked one file at a time with --policy c:PATH"),
};
