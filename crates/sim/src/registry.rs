//! The policy registry: which policies exist, what they are for, and how each is
//! built. It is the one place a policy is added (machines are in `preset`,
//! workloads in `workload`): one `register!` entry gives the policy its name in
//! `list`, `run`, `compare`, `sweep` and `check`, and its builder in the
//! simulator and the checker alike ([`with_policy`]).
//!
//! Adding a policy: write its file (a type implementing [`tlbkit_policy::Policy`]),
//! then add an entry below with its name, a one-line description, its
//! architecture, and `build: |b| ...` returning `Result<YourPolicy, String>` from a
//! [`Build`]. The tests in this file run every entry in the simulator, and the
//! checker's tests check every entry, so an entry that cannot be built fails there.

use crate::preset::Arch;
use tlbkit_policy::asid::freebsd_epoch::Variant;
use tlbkit_policy::asid::linux_x86_615::Kernel;
use tlbkit_policy::asid::{FreebsdEpoch, FreebsdX86, Latr, LinuxArm64, LinuxX86, LinuxX86v410, LinuxX86v615, NoAsid};
use tlbkit_policy::shootdown::Completion;
use tlbkit_policy::zoo::Bug;
use tlbkit_policy::Policy;

/// A registered policy.
#[derive(Clone, Copy, Debug)]
pub struct PolicyDef {
    /// The name used on the command line.
    pub name: &'static str,
    /// One line for `tlbkit list`.
    pub description: &'static str,
    /// The architecture it is written for.
    pub arch: Arch,
    /// Whether the policy has switches for bug-zoo bugs (`with_bug`).
    pub zoo: bool,
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
    /// `--set kpti=on` (arm64 Linux).
    pub kpti: bool,
    /// `--set tlbi_range=on`, or the machine's `FEAT_TLBIRANGE` (arm64 Linux).
    pub tlbi_range: bool,
    /// `--set tlb_mode=WORD` (`arm64-linux-tlbmode`), if given; otherwise the
    /// policy's default for the CPU count.
    pub tlb_mode: Option<u32>,
    /// The bug-zoo bug to re-introduce (the checker's `zoo/<id>`), if any.
    pub bug: Option<Bug>,
    /// Built for the checker's small shapes (2 to 4 CPUs, a handful of address
    /// spaces): a policy may lower what only its heuristics use (how many CPUs an
    /// mm must run on before it changes mode, how often it samples) so that every
    /// path is reachable there, and says so in its description.
    pub checker: bool,
}

/// Code that runs with a policy of whatever type a name stands for: the
/// simulator's run, the checker's search. [`with_policy`] calls [`WithPolicy::with`]
/// with a builder of fresh policies (the checker builds one per execution), so
/// that the code is monomorphised for each registered policy.
pub trait WithPolicy {
    /// What the code returns.
    type Out;
    /// Runs the code with `build`, which returns a fresh policy each call.
    fn with<P: Policy>(self, build: &dyn Fn() -> P) -> Self::Out;
}

/// Registers policies: for each, its name, description, architecture, how it is
/// built from a [`Build`], and (optionally) how a zoo bug is switched on. From
/// this one table come [`POLICIES`] (names for `list`, `compare`, `sweep`, the
/// checker's names) and [`with_policy`] (the builder the simulator and the
/// checker both use), so a registered policy can always be run and checked, and
/// no policy can be half-registered.
macro_rules! register {
    ($( $name:literal {
        description: $desc:expr,
        arch: $arch:ident,
        build: |$b:ident| $build:expr
        $(, bug: |$p:ident, $bv:ident| $apply:expr)? $(,)?
    } )*) => {
        /// Every policy.
        pub const POLICIES: &[PolicyDef] = &[
            $( PolicyDef { name: $name, description: $desc, arch: Arch::$arch, zoo: register!(@has $($p)?) } ),*
        ];

        /// Builds the policy called `name` from `b` and runs `code` with it.
        /// Returns an error for an unknown name, a shape the policy refuses, or a
        /// bug it has no switch for.
        pub fn with_policy<W: WithPolicy>(name: &str, b: &Build, code: W) -> Result<W::Out, String> {
            match name {
                $( $name => {
                    let make = |$b: &Build| -> Result<_, String> {
                        #[allow(unused_mut)]
                        let mut p = $build?;
                        if let Some(bug) = $b.bug {
                            register!(@bug name, p, bug $(, |$p, $bv| $apply)?);
                        }
                        Ok(p)
                    };
                    // Refuse a bad shape here, so that the builder below cannot fail.
                    make(b)?;
                    Ok(code.with(&|| make(b).expect("the same configuration was accepted")))
                } )*
                other => Err(format!(
                    "unknown policy '{other}'; valid policies: {}",
                    POLICIES.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
                )),
            }
        }
    };
    (@has) => { false };
    (@has $p:ident) => { true };
    (@bug $name:ident, $pol:ident, $bug:ident) => {
        return Err(format!("{} has no switch for the bug-zoo bug {}", $name, $bug))
    };
    (@bug $name:ident, $pol:ident, $bug:ident, |$p:ident, $bv:ident| $apply:expr) => {
        $pol = {
            let ($p, $bv) = ($pol, $bug);
            $apply
        }
    };
}

register! {
    "arm64-noasid" {
        description:
            "FreeBSD arm64 before seed 000: global user mappings, broadcast TLBI VMALLE1IS on every pmap switch",
        arch: Arm64,
        build: |b| Ok::<_, String>(NoAsid::new(b.cpus)),
    }
    "arm64-freebsd-asid" {
        description: "FreeBSD arm64 after seed 000: nG user mappings, epoch ASID allocator, broadcast per-page TLBI \
                      (has findings freebsd-arm64-asid-reset-*, see tlbkit list)",
        arch: Arm64,
        build: |b| Ok::<_, String>(FreebsdEpoch::new(b.cpus, b.mm_slots, b.asid_bits)),
        bug: |p, bug| p.with_bug(bug),
    }
    "arm64-freebsd-asid-fix-reserved-ttbr0" {
        description: "arm64-freebsd-asid with a fix candidate for its reset finding: reserved TTBR0 before the curpmap \
                      store, the reset's flush after its loop, stale cookies not restamped",
        arch: Arm64,
        build: |b| Ok::<_, String>(
            FreebsdEpoch::new(b.cpus, b.mm_slots, b.asid_bits).with_variant(Variant::ReservedTtbr0)
        ),
    }
    "arm64-freebsd-asid-fix-self" {
        description: "arm64-freebsd-asid with a partial fix: the resetting CPU parks its own TTBR0 on the reserved \
                      table before the flush (closes window 1 of the reset finding only)",
        arch: Arm64,
        build: |b| Ok::<_, String>(
            FreebsdEpoch::new(b.cpus, b.mm_slots, b.asid_bits).with_variant(Variant::ParkSelf)
        ),
    }
    // ANCHOR: example
    "arm64-freebsd-asid-cutoff" {
        description: "worked example (examples/my-policy): arm64-freebsd-asid with ranges over 64 pages flushed by \
                      one TLBI ASIDE1IS",
        arch: Arm64,
        build: |b| Ok::<_, String>(my_policy::RangeCutoff::new(
            FreebsdEpoch::new(b.cpus, b.mm_slots, b.asid_bits),
            my_policy::RangeCutoff::DEFAULT_CUTOFF,
        )),
    }
    // ANCHOR_END: example
    "arm64-linux" {
        description: "Linux arm64: generation rollover allocator, lock-free fast path, pinned ASIDs, optional KPTI, \
                      broadcast TLBI by ASID",
        arch: Arm64,
        build: |b| linux_arm64(b, LinuxArm64::new),
        bug: |p, bug| p.with_bug(bug),
    }
    "arm64-linux-skipbcast" {
        description: "Linux arm64 + seed 001: skip the TLBI broadcast when the mm is active only here or nowhere \
                      (nr_active_mm, stale mask, reserved TTBR0 when lazy)",
        arch: Arm64,
        build: |b| linux_arm64(b, LinuxArm64::with_skip_broadcast),
        bug: |p, bug| p.with_bug(bug),
    }
    "arm64-linux-activecpu" {
        description: "Linux arm64 + active_cpu (Ryan Roberts, 2025): a user flush of an mm that only ever ran on \
                      this CPU stays local (one word per mm: none, one CPU, many)",
        arch: Arm64,
        build: |b| linux_arm64(b, LinuxArm64::with_active_cpu),
        bug: |p, bug| p.with_bug(bug),
    }
    "arm64-linux-tlbmode" {
        description: "Linux arm64 + Christoph Lameter's TLB modes (Ampere, 2023): by the weight of mm_cpumask, no \
                      flush, a local one, IPIs to a few CPUs that flush locally, or broadcast (--set tlb_mode=WORD)",
        arch: Arm64,
        build: |b| {
            let word = b.tlb_mode.unwrap_or_else(|| tlbkit_policy::asid::linux_arm64_tlbmode::default_mode(b.cpus));
            linux_arm64(b, |cpus, mms, bits, kpti| LinuxArm64::with_tlb_mode(cpus, mms, bits, kpti, word))
        },
        bug: |p, bug| p.with_bug(bug),
    }
    "x86-linux-nopcid" {
        description: "Linux x86 tlb_gen with PCID off (seed 002 before): every CR3 write to another mm flushes",
        arch: X86_64,
        build: |b| Ok::<_, String>(LinuxX86::new(b.cpus, b.mm_slots, false)),
        bug: |p, bug| p.with_bug(bug),
    }
    "x86-linux-pcid" {
        description: "Linux x86 PCID (seed 002 after): 6 per-CPU {ctx_id, tlb_gen} slots, CR3 NOFLUSH, lazy TLB, \
                      IPI flushes",
        arch: X86_64,
        build: |b| Ok::<_, String>(LinuxX86::new(b.cpus, b.mm_slots, true)),
        bug: |p, bug| p.with_bug(bug),
    }
    "x86-linux-410" {
        description: "Linux x86 v4.10 tlb.c (LATR's base): no PCID, flush IPIs to every CPU of mm_cpumask, lazy \
                      CPUs answering with leave_mm",
        arch: X86_64,
        build: |b| Ok::<_, String>(LinuxX86v410::new(b.cpus, b.mm_slots)),
    }
    "x86-latr" {
        description: "LATR (ASPLOS 2018) on Linux x86 v4.10: munmap and madvise(DONTNEED) save their shootdown in \
                      per-CPU states instead of sending IPIs; each CPU applies them at its next tick or context \
                      switch, and the freed memory is reclaimed once every CPU has (checker: 2 states per CPU)",
        arch: X86_64,
        build: |b| {
            let p = Latr::new(b.cpus, b.mm_slots);
            Ok::<_, String>(if b.checker { p.with_small_shapes() } else { p })
        },
    }
    "x86-linux-613" {
        description: "Linux x86 v6.13 tlb.c: PCID slots and tlb_gen, mm_cpumask left and joined at every switch, \
                      IPIs to CPUs not lazy (the baseline of x86-linux-lazytrim)",
        arch: X86_64,
        build: |b| Ok::<_, String>(LinuxX86v615::new(b.cpus, b.mm_slots, Kernel::V613)),
    }
    "x86-linux-lazytrim" {
        description: "Linux x86 v6.14+: mm_cpumask updated lazily, stale CPUs trimmed by a flush once a second, \
                      should_flush_tlb with LOADED_MM_SWITCHING (the baseline of x86-linux-invlpgb)",
        arch: X86_64,
        build: |b| Ok::<_, String>(LinuxX86v615::new(b.cpus, b.mm_slots, Kernel::LazyTrim)),
        bug: |p, bug| p.with_bug(bug),
    }
    "x86-linux-invlpgb" {
        description: "Linux x86 v6.15+ on AMD: global ASIDs for mms on more than 3 CPUs, INVLPGB/TLBSYNC instead \
                      of IPIs, broadcast kernel and reclaim flushes (checker: --asids global ASIDs, threshold 0)",
        arch: X86_64,
        build: |b| invlpgb(b),
        bug: |p, bug| p.with_bug(bug),
    }
    "x86-freebsd-counter" {
        description: "FreeBSD x86 before seed 003: per-CPU PCIDs, one IPI lock, handlers increment one shared counter",
        arch: X86_64,
        build: |b| Ok::<_, String>(FreebsdX86::new(b.cpus, b.mm_slots, Completion::Counter).with_pcid_overmax(pcids(b)?)),
        bug: |p, bug| p.with_bug(bug),
    }
    "x86-freebsd-gen" {
        description: "FreeBSD x86 after seed 003: handlers store the generation in their own per-CPU done flag",
        arch: X86_64,
        build: |b| Ok::<_, String>(FreebsdX86::new(b.cpus, b.mm_slots, Completion::Generation).with_pcid_overmax(pcids(b)?)),
        bug: |p, bug| p.with_bug(bug),
    }
    "x86-freebsd-scoreboard" {
        description: "FreeBSD x86 (2020 rework): lock-free per-initiator requests, target x initiator scoreboard, \
                      ack before invalidate",
        arch: X86_64,
        build: |b| Ok::<_, String>(FreebsdX86::new(b.cpus, b.mm_slots, Completion::Scoreboard).with_pcid_overmax(pcids(b)?)),
        bug: |p, bug| p.with_bug(bug),
    }
}

/// Builds an arm64 Linux policy with `ctor` (one of [`LinuxArm64`]'s
/// constructors) from `b`'s shape, with range invalidation as `b` says.
fn linux_arm64(
    b: &Build,
    ctor: impl FnOnce(usize, usize, u8, bool) -> Result<LinuxArm64, tlbkit_policy::asid::linux_arm64::ConfigError>,
) -> Result<LinuxArm64, String> {
    ctor(b.cpus, b.mm_slots, b.asid_bits, b.kpti).map(|p| p.with_tlbi_range(b.tlbi_range)).map_err(|e| e.to_string())
}

/// Returns FreeBSD x86's PCIDs per CPU for `b`: `1 << asid_bits` (the x86
/// machines' 12 bits give the hardware's 4096; the checker's `--asids` fewer).
fn pcids(b: &Build) -> Result<u32, String> {
    match b.asid_bits {
        2..=12 => Ok(1 << b.asid_bits),
        bits => Err(format!("FreeBSD x86 has 4 to 4096 PCIDs per CPU (2 to 12 bits), not {bits} bits")),
    }
}

/// Returns Linux x86 with INVLPGB for `b`: the kernel's space of global ASIDs on
/// a machine's 12-bit PCIDs; in the checker `1 << asid_bits` of them (its
/// `--asids`), any other CPU running the mm enough to qualify, every flush sampled.
fn invlpgb(b: &Build) -> Result<LinuxX86v615, String> {
    let p = LinuxX86v615::new(b.cpus, b.mm_slots, Kernel::Invlpgb);
    if !b.checker {
        return Ok(p);
    }
    match b.asid_bits {
        1..=11 => Ok(p.with_small_shapes(1 << b.asid_bits)),
        bits => Err(format!("x86-linux-invlpgb checks 2 to 2048 global ASIDs (1 to 11 bits), not {bits} bits")),
    }
}

/// The policies that need broadcast TLB invalidation on x86 (`INVLPGB`): they
/// run only on machines that have it ([`crate::preset::Preset::has_broadcast_tlbi`]).
pub const NEEDS_INVLPGB: &[&str] = &["x86-linux-invlpgb"];

/// Returns the policy called `name`.
pub fn policy(name: &str) -> Option<&'static PolicyDef> {
    POLICIES.iter().find(|p| p.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tlbkit_policy::zoo::ZOO;

    #[test]
    fn every_registered_policy_runs_in_the_simulator() {
        for p in POLICIES {
            let machine = match p.arch {
                Arch::Arm64 => "cortex-a72",
                Arch::X86_64 if NEEDS_INVLPGB.contains(&p.name) => "milan",
                Arch::X86_64 => "skylake",
            };
            let spec = crate::run::RunSpec {
                machine: machine.into(),
                cpus: 2,
                policy: p.name.into(),
                workload: "lat_ctx".into(),
                sets: vec!["procs=4".into(), "rounds=3".into()],
                seed: 1,
                strict: true,
            };
            let out = crate::run::run(&spec).unwrap_or_else(|e| panic!("{}: {e}", p.name));
            assert_eq!(out.violations_total, 0, "{}", p.name);
            assert!(out.metrics.context_switches > 0, "{}", p.name);
        }
    }

    #[test]
    fn a_bug_without_a_switch_is_refused_and_an_unknown_name_lists_the_policies() {
        struct Nothing;
        impl WithPolicy for Nothing {
            type Out = ();
            fn with<P: Policy>(self, _build: &dyn Fn() -> P) {}
        }
        let b = Build {
            cpus: 2,
            mm_slots: 4,
            asid_bits: 8,
            kpti: false,
            tlbi_range: false,
            tlb_mode: None,
            bug: Some(Bug::FreebsdArm64EpochWrap),
            checker: false,
        };
        let e = with_policy("arm64-noasid", &b, Nothing).unwrap_err();
        assert!(e.contains("arm64-noasid has no switch for the bug-zoo bug freebsd-arm64-epoch-wrap"), "{e}");
        assert!(with_policy("arm64-freebsd-asid", &b, Nothing).is_ok());
        let e = with_policy("arm64-nope", &Build { bug: None, ..b }, Nothing).unwrap_err();
        assert!(e.contains("valid policies: arm64-noasid, arm64-freebsd-asid"), "{e}");
        // Only the policies the zoo has no bug in go without a switch.
        let without: Vec<&str> = POLICIES.iter().filter(|p| !p.zoo).map(|p| p.name).collect();
        assert_eq!(
            without,
            [
                "arm64-noasid",
                "arm64-freebsd-asid-fix-reserved-ttbr0",
                "arm64-freebsd-asid-fix-self",
                "arm64-freebsd-asid-cutoff",
                "x86-linux-410",
                "x86-latr",
                "x86-linux-613"
            ]
        );
    }

    #[test]
    fn every_zoo_entry_names_a_registered_base_policy() {
        for e in ZOO {
            let p = policy(e.base);
            assert!(p.is_some(), "zoo/{}: base {:?} is not a registered policy", e.id, e.base);
            assert!(!e.bug.in_policy() || p.is_some_and(|p| p.zoo), "zoo/{}: {} has no bug switch", e.id, e.base);
        }
    }
}
