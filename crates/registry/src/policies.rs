//! The `register!` table: one entry per policy, with everything the tools need
//! to know about it ([`PolicyDef`]) and how it is built from a [`Build`].
//!
//! Adding a policy: write its file (a type implementing [`tlbkit_policy::Policy`]),
//! then add an entry below with its name, a one-line description, its
//! platform (architecture, kernel, whether it needs broadcast TLB invalidation
//! and the checker's ASID space: one of the `Platform`s below), its era (with
//! `version: (major, minor)` where the code is one Linux release's, whose
//! settings a run then uses), the `--set` switches it takes, the checker's
//! family, and `build: |b| ...` returning `Result<YourPolicy, Error>` from a
//! [`Build`] (a shape it refuses is [`Error::Refused`], in its own words). The
//! simulator's tests run every entry, and the checker's tests check every
//! entry, so an entry that cannot be built fails there.

use crate::{Arch, AsidSpace, Build, Era, Error, Family, Os, PolicyDef, Switches, WithPolicy};
use tlbkit_policy::asid::freebsd_epoch::Variant;
use tlbkit_policy::asid::linux_arm64_tlbmode;
use tlbkit_policy::asid::linux_pcid::Pti;
use tlbkit_policy::asid::linux_x86_513::Version;
use tlbkit_policy::asid::linux_x86_615::Kernel;
use tlbkit_policy::asid::{
    FreebsdEpoch, FreebsdX86, Latr, LinuxArm64, LinuxX86, LinuxX86v410, LinuxX86v513, LinuxX86v615, NoAsid,
};
use tlbkit_policy::shootdown::Completion;
use tlbkit_policy::Defer;

/// Registers policies: for each, its name, description, what it is (the fields
/// of [`PolicyDef`]), how it is built from a [`Build`], and (optionally) how a
/// zoo bug is switched on. From
/// this one table come [`POLICIES`] (names for `list`, `compare`, `sweep`, the
/// checker's names) and [`with_policy`] (the builder the simulator and the
/// checker both use), so a registered policy can always be run and checked, and
/// no policy can be half-registered.
macro_rules! register {
    ($( $name:literal {
        description: $desc:expr,
        platform: $platform:ident,
        era: $era:expr,
        $(version: ($major:literal, $minor:literal),)?
        switches: $switches:expr,
        family: $family:ident,
        $(untimed: $untimed:literal,)?
        build: |$b:ident| $build:expr
        $(, bug: |$p:ident, $bv:ident| $apply:expr)? $(,)?
    } )*) => {
        /// Every policy.
        pub const POLICIES: &[PolicyDef] = &[
            $( PolicyDef {
                name: $name,
                description: $desc,
                arch: $platform.arch,
                os: $platform.os,
                version: register!(@version $(($major, $minor))?),
                needs_broadcast_tlbi: $platform.needs_broadcast_tlbi,
                switches: $switches,
                asids: $platform.asids,
                family: Family::$family,
                zoo: register!(@has $($p)?),
                era: $era,
                untimed: register!(@untimed $($untimed)?),
            } ),*
        ];

        /// Builds the policy called `name` from `b` and runs `code` with it.
        /// Returns an error for an unknown name, a shape the policy refuses, or a
        /// bug it has no switch for. A C policy (`c:FILE...`) is not built here
        /// but by the C front end (`tlbkit_c::front::with_policy`, the door for
        /// every name): given one, this returns [`Error::CPolicy`].
        pub fn with_policy<W: WithPolicy>(name: &str, b: &Build, code: W) -> Result<W::Out, Error> {
            match name {
                $( $name => {
                    let make = |$b: &Build| -> Result<_, Error> {
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
                // A C policy is built by the C front end, above the registry
                // (`tlbkit_c::front::with_policy`), which sends every other name here.
                other if other.starts_with(crate::C_PREFIX) => Err(Error::CPolicy { name: other.to_string() }),
                other => match crate::alias::builds_as(other) {
                    Some(like) => with_policy(like, b, code),
                    None => Err(Error::UnknownPolicy { name: other.to_string() }),
                },
            }
        }
    };
    (@version) => { None };
    (@version ($major:literal, $minor:literal)) => { Some(($major, $minor)) };
    (@untimed) => { None };
    (@untimed $why:literal) => { Some($why) };
    (@has) => { false };
    (@has $p:ident) => { true };
    (@bug $name:ident, $pol:ident, $bug:ident) => {
        return Err(Error::NoBugSwitch { policy: $name.to_string(), bug: $bug })
    };
    (@bug $name:ident, $pol:ident, $bug:ident, |$p:ident, $bv:ident| $apply:expr) => {
        $pol = {
            let ($p, $bv) = ($pol, $bug);
            $apply
        }
    };
}

/// What a policy runs on, as its entry's `platform` names it: the
/// [`PolicyDef`] fields `arch`, `os`, `needs_broadcast_tlbi` and `asids`.
struct Platform {
    arch: Arch,
    os: Os,
    needs_broadcast_tlbi: bool,
    asids: AsidSpace,
}

/// FreeBSD on arm64: ASIDs of the architecture's space.
const FREEBSD_ARM64: Platform =
    Platform { arch: Arch::Arm64, os: Os::Freebsd, needs_broadcast_tlbi: false, asids: AsidSpace::Arm64Asids };
/// Linux on arm64: ASIDs of the architecture's space.
const LINUX_ARM64: Platform =
    Platform { arch: Arch::Arm64, os: Os::Linux, needs_broadcast_tlbi: false, asids: AsidSpace::Arm64Asids };
/// Linux on x86: its fixed PCID slots per CPU.
const LINUX_X86: Platform =
    Platform { arch: Arch::X86_64, os: Os::Linux, needs_broadcast_tlbi: false, asids: AsidSpace::LinuxPcidSlots };
/// Linux v4.10 on x86 (`x86-linux-410` and LATR, built on it; [`Os::LinuxV410`]):
/// its PCID slots.
const LINUX_X86_V410: Platform =
    Platform { arch: Arch::X86_64, os: Os::LinuxV410, needs_broadcast_tlbi: false, asids: AsidSpace::LinuxPcidSlots };
/// Linux on x86 with `INVLPGB`: broadcast invalidation, global ASIDs.
const LINUX_X86_INVLPGB: Platform =
    Platform { arch: Arch::X86_64, os: Os::Linux, needs_broadcast_tlbi: true, asids: AsidSpace::GlobalAsids };
/// FreeBSD on x86: PCIDs per CPU.
const FREEBSD_X86: Platform =
    Platform { arch: Arch::X86_64, os: Os::Freebsd, needs_broadcast_tlbi: false, asids: AsidSpace::PcidsPerCpu };

register! {
    "arm64-noasid" {
        description:
            "FreeBSD arm64 before origin 000: global user mappings, broadcast TLBI VMALLE1IS on every pmap switch",
        platform: FREEBSD_ARM64,
        era: Era::Origin(0),
        switches: Switches::NONE,
        family: Shootdown,
        build: |b| Ok::<_, Error>(NoAsid::new(b.cpus)),
    }
    "arm64-freebsd-asid" {
        description: "FreeBSD arm64 after origin 000: nG user mappings, epoch ASID allocator, broadcast per-page TLBI \
                      (has findings freebsd-arm64-asid-reset-*, see tlbkit list)",
        platform: FREEBSD_ARM64,
        era: Era::Origin(0),
        switches: Switches::NONE,
        family: AsidAllocator,
        untimed: "stops at its finding; its fix candidate is timed",
        build: |b| Ok::<_, Error>(FreebsdEpoch::new(b.cpus, b.mm_slots, b.asid_bits)),
        bug: |p, bug| p.with_bug(bug),
    }
    "arm64-freebsd-asid-fix-reserved-ttbr0" {
        description: "arm64-freebsd-asid with a fix candidate for its reset finding: reserved TTBR0 before the curpmap \
                      store, the reset's flush after its loop, stale cookies not restamped",
        platform: FREEBSD_ARM64,
        era: Era::Origin(0),
        switches: Switches::NONE,
        family: AsidAllocator,
        build: |b| Ok::<_, Error>(
            FreebsdEpoch::new(b.cpus, b.mm_slots, b.asid_bits).with_variant(Variant::ReservedTtbr0)
        ),
        bug: |p, bug| p.with_bug(bug),
    }
    "arm64-freebsd-asid-fix-self" {
        description: "arm64-freebsd-asid with a partial fix: the resetting CPU parks its own TTBR0 on the reserved \
                      table before the flush (closes window 1 of the reset finding only)",
        platform: FREEBSD_ARM64,
        era: Era::Origin(0),
        switches: Switches::NONE,
        family: AsidAllocator,
        untimed: "a partial fix: stops at the finding's second window",
        build: |b| Ok::<_, Error>(
            FreebsdEpoch::new(b.cpus, b.mm_slots, b.asid_bits).with_variant(Variant::ParkSelf)
        ),
    }
    // ANCHOR: example
    "arm64-freebsd-asid-activecpu" {
        description: "worked example (examples/my-policy): Linux's active_cpu on arm64-freebsd-asid-fix-reserved-ttbr0, \
                      user flushes of a pmap that only ever ran here stay local",
        platform: FREEBSD_ARM64,
        era: Era::Origin(0),
        switches: Switches::NONE,
        family: AsidAllocator,
        untimed: "the guide's worked example: its fix candidate's check, with a word per pmap; its own test \
                  checks it",
        build: |b| Ok::<_, Error>(my_policy::ActiveCpu::new(
            FreebsdEpoch::new(b.cpus, b.mm_slots, b.asid_bits).with_variant(Variant::ReservedTtbr0),
            b.mm_slots,
        )),
    }
    // ANCHOR_END: example
    "arm64-linux" {
        description: "Linux arm64: generation rollover allocator, lock-free fast path, pinned ASIDs, optional KPTI, \
                      broadcast TLBI by ASID",
        platform: LINUX_ARM64,
        era: Era::Origin(1),
        switches: Switches::ARM64_LINUX,
        family: AsidAllocator,
        build: |b| linux_arm64(b, LinuxArm64::new),
        bug: |p, bug| p.with_bug(bug),
    }
    "arm64-linux-skipbcast" {
        description: "Linux arm64 + origin 001: skip the TLBI broadcast when the mm is active only here or nowhere \
                      (nr_active_mm, stale mask, reserved TTBR0 when lazy)",
        platform: LINUX_ARM64,
        era: Era::Origin(1),
        switches: Switches::ARM64_LINUX,
        family: AsidAllocator,
        build: |b| linux_arm64(b, LinuxArm64::with_skip_broadcast),
        bug: |p, bug| p.with_bug(bug),
    }
    "arm64-linux-activecpu" {
        description: "Linux arm64 + active_cpu (Ryan Roberts, 2025): a user flush of an mm that only ever ran on \
                      this CPU stays local (one word per mm: none, one CPU, many)",
        platform: LINUX_ARM64,
        era: Era::Later,
        switches: Switches::ARM64_LINUX,
        family: AsidAllocator,
        build: |b| linux_arm64(b, LinuxArm64::with_active_cpu),
        bug: |p, bug| p.with_bug(bug),
    }
    "arm64-linux-tlbmode" {
        description: "Linux arm64 + Christoph Lameter's TLB modes (Ampere, 2023): by the weight of mm_cpumask, no \
                      flush, a local one, IPIs to a few CPUs that flush locally, or broadcast (--set tlb_mode=WORD)",
        platform: LINUX_ARM64,
        era: Era::Later,
        switches: Switches { tlb_mode: Some(linux_arm64_tlbmode::default_mode), ..Switches::ARM64_LINUX },
        family: AsidAllocator,
        build: |b| {
            let word = b.tlb_mode.unwrap_or_else(|| linux_arm64_tlbmode::default_mode(b.cpus));
            linux_arm64(b, |cpus, mms, bits, kpti| LinuxArm64::with_tlb_mode(cpus, mms, bits, kpti, word))
        },
        bug: |p, bug| p.with_bug(bug),
    }
    "arm64-linux-tlbmode-fix-wmb" {
        description: "arm64-linux-tlbmode with a barrier (smp_wmb) between new_context's clear of mm_cpumask and \
                      the new context.id (this project's fix candidate for the arm64-tlbmode-mask-clear-reorder \
                      finding)",
        platform: LINUX_ARM64,
        era: Era::Later,
        switches: Switches { tlb_mode: Some(linux_arm64_tlbmode::default_mode), ..Switches::ARM64_LINUX },
        family: AsidAllocator,
        untimed: "arm64-linux-tlbmode with one barrier more, which only --memory arm tells apart: the finding's \
                  own search checks it (crates/check/tests/findings.rs)",
        build: |b| {
            let word = b.tlb_mode.unwrap_or_else(|| linux_arm64_tlbmode::default_mode(b.cpus));
            linux_arm64(b, |cpus, mms, bits, kpti| {
                LinuxArm64::with_tlb_mode(cpus, mms, bits, kpti, word).map(LinuxArm64::with_mask_clear_ordered)
            })
        },
    }
    "x86-linux-nopcid" {
        description: "Linux x86 tlb_gen with PCID off (origin 002 before): every CR3 write to another mm flushes",
        platform: LINUX_X86,
        era: Era::Origin(2),
        switches: Switches::X86_LINUX_CEILING,
        family: Shootdown,
        build: |b| Ok::<_, Error>(LinuxX86::new(b.cpus, b.mm_slots, false).with_flush_ceiling(ceiling(b))),
        bug: |p, bug| p.with_bug(bug),
    }
    "x86-linux-pcid" {
        description: "Linux x86 PCID (origin 002 after): 6 per-CPU {ctx_id, tlb_gen} slots, CR3 NOFLUSH, lazy TLB, \
                      IPI flushes",
        platform: LINUX_X86,
        era: Era::Origin(2),
        switches: Switches::X86_LINUX_PCID,
        family: Shootdown,
        build: |b| {
            let p = LinuxX86::new(b.cpus, b.mm_slots, true).with_flush_ceiling(ceiling(b));
            Ok::<_, Error>(if b.pti { p.with_pti(pti(b)) } else { p })
        },
        bug: |p, bug| p.with_bug(bug),
    }
    "x86-linux-410" {
        description: "Linux x86 v4.10 tlb.c (LATR's base): no PCID, flush IPIs to every CPU of mm_cpumask, lazy \
                      CPUs answering with leave_mm",
        platform: LINUX_X86_V410,
        era: Era::History,
        version: (4, 10),
        switches: Switches::X86_LINUX_CEILING,
        family: Shootdown,
        build: |b| Ok::<_, Error>(LinuxX86v410::new(b.cpus, b.mm_slots).with_flush_ceiling(ceiling(b))),
    }
    "x86-latr" {
        description: "LATR (ASPLOS 2018) on Linux x86 v4.10, as its artifact has it: every flush of an mm while its \
                      munmap or madvise(DONTNEED) runs is saved in per-CPU states instead of sending IPIs; each CPU \
                      applies them at its next tick or context switch, and the munmap's memory is reclaimed once \
                      every CPU has (checker: 2 states per CPU; has findings latr-artifact-*, see tlbkit list)",
        platform: LINUX_X86_V410,
        era: Era::Later,
        version: (4, 10),
        switches: Switches::NONE,
        family: Shootdown,
        build: |b| Ok::<_, Error>(latr(b, Defer::WhileMmFlagged)),
    }
    "x86-latr-syscall-only" {
        description: "x86-latr, safer by design: only the munmap or madvise(DONTNEED) that set the mm's \
                      munmap_inprogress defers its own flushes; a COW fault's or a migration's flush meanwhile \
                      sends IPIs (the fix candidate for the latr-artifact findings)",
        platform: LINUX_X86_V410,
        era: Era::Later,
        version: (4, 10),
        switches: Switches::NONE,
        family: Shootdown,
        build: |b| Ok::<_, Error>(latr(b, Defer::OwnUnmap)),
    }
    "x86-linux-512" {
        description: "Linux x86 v5.12 tlb.c and smp.c, before Nadav Amit's concurrent flush series (before \
                      4ce94eabac16): local flush, then IPIs and the wait on each csd; is_lazy read on the line of \
                      cpu_tlbstate.loaded_mm",
        platform: LINUX_X86,
        era: Era::History,
        version: (5, 12),
        switches: Switches::X86_LINUX_PCID,
        family: Shootdown,
        build: |b| Ok::<_, Error>(x86_513(b, Version::V512)),
    }
    "x86-linux-513" {
        description: "Linux x86 v5.13, after Nadav Amit's concurrent flush series (4ce94eabac16, a32a4d8a815c, \
                      2f4305b19fe6, 09c5272e4861): IPIs sent, local flush, then the wait; is_lazy alone in \
                      cpu_tlbstate_shared, stored only when it changes",
        platform: LINUX_X86,
        era: Era::History,
        version: (5, 13),
        switches: Switches::X86_LINUX_PCID,
        family: Shootdown,
        build: |b| Ok::<_, Error>(x86_513(b, Version::V513)),
    }
    "x86-linux-613" {
        description: "Linux x86 v6.13 tlb.c: PCID slots and tlb_gen, mm_cpumask left and joined at every switch, \
                      IPIs to CPUs not lazy (the baseline of x86-linux-lazytrim)",
        platform: LINUX_X86,
        era: Era::Later,
        version: (6, 13),
        switches: Switches::X86_LINUX_PCID,
        family: Shootdown,
        build: |b| Ok::<_, Error>(x86_615(b, Kernel::V613)),
    }
    "x86-linux-lazytrim" {
        description: "Linux x86 v6.14's lazy mm_cpumask as v6.18 has it: stale CPUs trimmed by a flush once a \
                      second, should_flush_tlb with LOADED_MM_SWITCHING (the baseline of x86-linux-invlpgb)",
        platform: LINUX_X86,
        era: Era::Later,
        version: (6, 18),
        switches: Switches::X86_LINUX_PCID,
        family: Shootdown,
        build: |b| Ok::<_, Error>(x86_615(b, Kernel::LazyTrim)),
        bug: |p, bug| p.with_bug(bug),
    }
    "x86-linux-invlpgb" {
        description: "Linux x86 v6.15+ on AMD: global ASIDs for mms on more than 3 CPUs, INVLPGB/TLBSYNC instead \
                      of IPIs, broadcast kernel and reclaim flushes (checker: --asids global ASIDs, threshold 0)",
        platform: LINUX_X86_INVLPGB,
        era: Era::Later,
        version: (6, 15),
        switches: Switches::X86_LINUX_CEILING,
        family: Shootdown,
        build: |b| invlpgb(b),
        bug: |p, bug| p.with_bug(bug),
    }
    "x86-linux-invlpgb-fix-max" {
        description: "x86-linux-invlpgb with Hou Wenlong's posted fix (2025-03-29, not merged): a global ASID search \
                      that finds nothing fails instead of handing out MAX_ASID_AVAILABLE (closes the \
                      x86-global-asid-max finding)",
        platform: LINUX_X86_INVLPGB,
        era: Era::Later,
        version: (6, 15),
        switches: Switches::X86_LINUX_CEILING,
        family: Shootdown,
        untimed: "x86-linux-invlpgb up to its third reset, past the standard bounds: its search after the \
                  finding's script is full.rs's",
        build: |b| invlpgb(b).map(LinuxX86v615::with_max_refused),
    }
    "x86-linux-invlpgb-tlbbatch" {
        description: "x86-linux-invlpgb with reclaim's targeted batch as posted, not merged (v5-v15 of the series): \
                      INVLPGB per page of a global-ASID mm, IPIs for the others and during the ASID transition, \
                      then TLBSYNC",
        platform: LINUX_X86_INVLPGB,
        era: Era::Later,
        version: (6, 15),
        switches: Switches::X86_LINUX_CEILING,
        family: Shootdown,
        build: |b| invlpgb(b).map(LinuxX86v615::with_targeted_tlbbatch),
        bug: |p, bug| p.with_bug(bug),
    }
    "x86-freebsd-counter" {
        description: "FreeBSD x86 before origin 003: per-CPU PCIDs, one IPI lock, handlers increment one shared counter",
        platform: FREEBSD_X86,
        era: Era::Origin(3),
        switches: Switches::NONE,
        family: Shootdown,
        build: |b| Ok::<_, Error>(FreebsdX86::new(b.cpus, b.mm_slots, Completion::Counter).with_pcid_overmax(pcids(b)?)),
        bug: |p, bug| p.with_bug(bug),
    }
    "x86-freebsd-gen" {
        description: "FreeBSD x86 after origin 003: handlers store the generation in their own per-CPU done flag",
        platform: FREEBSD_X86,
        era: Era::Origin(3),
        switches: Switches::NONE,
        family: Shootdown,
        build: |b| Ok::<_, Error>(FreebsdX86::new(b.cpus, b.mm_slots, Completion::Generation).with_pcid_overmax(pcids(b)?)),
        bug: |p, bug| p.with_bug(bug),
    }
    "x86-freebsd-scoreboard" {
        description: "FreeBSD x86 (2020 rework): lock-free per-initiator requests, target x initiator scoreboard, \
                      ack before invalidate",
        platform: FREEBSD_X86,
        era: Era::Origin(3),
        switches: Switches::NONE,
        family: Shootdown,
        build: |b| Ok::<_, Error>(FreebsdX86::new(b.cpus, b.mm_slots, Completion::Scoreboard).with_pcid_overmax(pcids(b)?)),
        bug: |p, bug| p.with_bug(bug),
    }
}

/// Builds an arm64 Linux policy with `ctor` (one of [`LinuxArm64`]'s
/// constructors) from `b`'s shape, with range invalidation as `b` says.
fn linux_arm64(
    b: &Build,
    ctor: impl FnOnce(usize, usize, u8, bool) -> Result<LinuxArm64, tlbkit_policy::asid::linux_arm64::ConfigError>,
) -> Result<LinuxArm64, Error> {
    ctor(b.cpus, b.mm_slots, b.asid_bits, b.kpti)
        .map(|p| p.with_tlbi_range(b.tlbi_range))
        .map_err(|e| Error::refused(e.to_string()))
}

/// Returns FreeBSD x86's PCIDs per CPU for `b`: `1 << asid_bits` (the x86
/// machines' 12 bits give the hardware's 4096; the checker's `--asids` fewer).
fn pcids(b: &Build) -> Result<u32, Error> {
    match b.asid_bits {
        2..=12 => Ok(1 << b.asid_bits),
        bits => Err(Error::refused(format!("FreeBSD x86 has 4 to 4096 PCIDs per CPU (2 to 12 bits), not {bits} bits"))),
    }
}

/// Returns x86 Linux's `tlb_single_page_flush_ceiling` for `b`: its
/// `--set flush_ceiling`, or the kernel's 33.
fn ceiling(b: &Build) -> u64 {
    b.flush_ceiling.unwrap_or(tlbkit_policy::asid::linux_pcid::TLB_SINGLE_PAGE_FLUSH_CEILING)
}

/// Returns how PTI flushes a user PCID's page on `b`'s machine: by `INVPCID`
/// where it has it, otherwise at the next return to user.
fn pti(b: &Build) -> Pti {
    if b.invpcid {
        Pti::Invpcid
    } else {
        Pti::Deferred
    }
}

/// Returns LATR for `b`, asking for lazy flushes under `defer`; for the
/// checker with its small shapes (two states per CPU).
fn latr(b: &Build, defer: Defer) -> Latr {
    let p = Latr::new(b.cpus, b.mm_slots).with_defer(defer);
    if b.checker {
        p.with_small_shapes()
    } else {
        p
    }
}

/// Returns Linux x86 v5.12 or v5.13 (`version`) for `b`, with its ceiling and PTI.
fn x86_513(b: &Build, version: Version) -> LinuxX86v513 {
    let p = LinuxX86v513::new(b.cpus, b.mm_slots, version).with_flush_ceiling(ceiling(b));
    if b.pti {
        p.with_pti(pti(b))
    } else {
        p
    }
}

/// Returns Linux x86 v6.13 or v6.14+ (`kernel`) for `b`, with its ceiling and PTI.
fn x86_615(b: &Build, kernel: Kernel) -> LinuxX86v615 {
    let p = LinuxX86v615::new(b.cpus, b.mm_slots, kernel).with_flush_ceiling(ceiling(b));
    if b.pti {
        p.with_pti(pti(b))
    } else {
        p
    }
}

/// Returns Linux x86 with INVLPGB for `b`: the kernel's space of global ASIDs on
/// a machine's 12-bit PCIDs; in the checker `1 << asid_bits` of them (its
/// `--asids`), any other CPU running the mm enough to qualify, every flush sampled.
fn invlpgb(b: &Build) -> Result<LinuxX86v615, Error> {
    let p = LinuxX86v615::new(b.cpus, b.mm_slots, Kernel::Invlpgb).with_flush_ceiling(ceiling(b));
    if !b.checker {
        return Ok(p);
    }
    match b.asid_bits {
        1..=11 => Ok(p.with_small_shapes(1 << b.asid_bits)),
        bits => Err(Error::refused(format!(
            "x86-linux-invlpgb checks 2 to 2048 global ASIDs (1 to 11 bits), not {bits} bits"
        ))),
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_c_policy_is_x86_by_its_file_or_its_arch_part() {
        for (name, x86) in [
            ("c:arch/x86/mm/tlb.c", true),
            ("c:tlb.c@v6.15", true),
            ("c:/src/linux/arch/x86/mm/tlb.c+invlpgb=on#0123456789abcdef", true),
            ("c:mytlb.c+arch=x86", true),
            ("c:arch/arm64/mm/context.c", false),
            ("c:tlb.c+arch=arm64", false),
            ("c:context.c+arch/x86/include/asm/tlbflush.h", false),
        ] {
            assert_eq!(crate::c_is_x86(name), x86, "{name}");
            let def = crate::policy(name).expect("a C policy");
            assert_eq!(def.arch == crate::Arch::X86_64, x86, "{name}");
        }
    }
    use super::*;
    use tlbkit_policy::zoo::{Bug, ZOO};
    use tlbkit_policy::Policy;

    #[test]
    fn a_bug_without_a_switch_is_refused_and_an_unknown_name_lists_the_policies() {
        struct Nothing;
        impl WithPolicy for Nothing {
            type Out = ();
            fn with<P: Policy>(self, _build: &dyn Fn() -> P) {}
        }
        let b = Build { bug: Some(Bug::FreebsdArm64EpochWrap), ..Build::new(2, 4, 8) };
        let e = with_policy("arm64-noasid", &b, Nothing).unwrap_err();
        assert_eq!(e, Error::NoBugSwitch { policy: "arm64-noasid".into(), bug: Bug::FreebsdArm64EpochWrap });
        assert_eq!(e.to_string(), "arm64-noasid has no switch for the bug-zoo bug freebsd-arm64-epoch-wrap");
        assert!(with_policy("arm64-freebsd-asid", &b, Nothing).is_ok());
        let e = with_policy("arm64-nope", &Build { bug: None, ..b }, Nothing).unwrap_err();
        assert_eq!(e, Error::UnknownPolicy { name: "arm64-nope".into() });
        let e = e.to_string();
        assert!(e.starts_with("unknown policy 'arm64-nope'; valid policies: arm64-noasid, arm64-freebsd-asid"), "{e}");
        // Only the policies the zoo has no bug in go without a switch.
        let without: Vec<&str> = POLICIES.iter().filter(|p| !p.zoo).map(|p| p.name).collect();
        assert_eq!(
            without,
            [
                "arm64-noasid",
                "arm64-freebsd-asid-fix-self",
                "arm64-freebsd-asid-activecpu",
                "arm64-linux-tlbmode-fix-wmb",
                "x86-linux-410",
                "x86-latr",
                "x86-latr-syscall-only",
                "x86-linux-512",
                "x86-linux-513",
                "x86-linux-613",
                "x86-linux-invlpgb-fix-max"
            ]
        );
    }

    #[test]
    fn a_c_policy_is_described_here_and_built_by_the_c_front_end() {
        struct Nothing;
        impl WithPolicy for Nothing {
            type Out = ();
            fn with<P: Policy>(self, _build: &dyn Fn() -> P) {}
        }
        let name = "c:arch/arm64/mm/context.c";
        assert_eq!(crate::policy(name).map(|p| p.name), Some(crate::C_PREFIX));
        let e = with_policy(name, &Build::new(2, 4, 8), Nothing).unwrap_err();
        assert_eq!(e, Error::CPolicy { name: name.into() });
        assert_eq!(
            e.to_string(),
            "c:arch/arm64/mm/context.c is a C policy, which the C front end builds \
             (tlbkit_c::front::with_policy), not the registry"
        );
    }

    #[test]
    fn every_zoo_entry_names_a_registered_base_policy() {
        for e in ZOO {
            let p = crate::policy(e.base);
            assert!(p.is_some(), "zoo/{}: base {:?} is not a registered policy", e.id, e.base);
            assert!(!e.bug.in_policy() || p.is_some_and(|p| p.zoo), "zoo/{}: {} has no bug switch", e.id, e.base);
        }
    }

    #[test]
    fn every_entry_says_what_its_kernel_and_architecture_allow() {
        for p in POLICIES {
            let s = p.switches;
            // Contiguous PTEs, KPTI's ASID pairs, range TLBIs and the TLB modes are arm64 Linux's.
            if s.kpti || s.tlbi_range || s.contpte || s.tlb_mode.is_some() {
                assert_eq!((p.arch, p.os.is_linux()), (Arch::Arm64, true), "{}", p.name);
            }
            // The full-flush ceiling and PTI are x86 Linux's; PTI only where PCIDs are used
            // and no INVLPGB (AMD's) is.
            if s.flush_ceiling || s.pti {
                assert_eq!((p.arch, p.os.is_linux()), (Arch::X86_64, true), "{}", p.name);
            }
            assert!(!s.pti || (s.flush_ceiling && !p.needs_broadcast_tlbi), "{}", p.name);
            // Every arm64 machine broadcasts; on x86 only INVLPGB does.
            assert!(!p.needs_broadcast_tlbi || p.arch == Arch::X86_64, "{}", p.name);
            let space = match (p.arch, p.os) {
                (Arch::Arm64, _) => &[AsidSpace::Arm64Asids][..],
                (Arch::X86_64, Os::Freebsd) => &[AsidSpace::PcidsPerCpu],
                (Arch::X86_64, Os::Linux | Os::LinuxV410) => &[AsidSpace::LinuxPcidSlots, AsidSpace::GlobalAsids],
            };
            assert!(space.contains(&p.asids), "{}: {:?}", p.name, p.asids);
            // Global ASIDs are flushed by INVLPGB.
            assert_eq!(p.asids == AsidSpace::GlobalAsids, p.needs_broadcast_tlbi, "{}", p.name);
            // x86 policies are shootdown protocols; their PCIDs are not what their bugs need.
            assert!(p.family == Family::Shootdown || p.arch == Arch::Arm64, "{}", p.name);
        }
        let tlb_mode: Vec<&str> = POLICIES.iter().filter(|p| p.switches.tlb_mode.is_some()).map(|p| p.name).collect();
        assert_eq!(tlb_mode, ["arm64-linux-tlbmode", "arm64-linux-tlbmode-fix-wmb"]);
        let pti: Vec<&str> = POLICIES.iter().filter(|p| p.switches.pti).map(|p| p.name).collect();
        assert_eq!(pti, ["x86-linux-pcid", "x86-linux-512", "x86-linux-513", "x86-linux-613", "x86-linux-lazytrim"]);
        // A policy's release is a Linux one, and only Linux policies have one.
        for p in POLICIES {
            assert!(p.version.is_none() || p.os.is_linux(), "{}", p.name);
        }
        assert_eq!(crate::policy("x86-linux-513").map(|p| p.version), Some(Some((5, 13))));
    }

    #[test]
    fn default_asid_spaces_are_sized_as_each_kernel_sizes_them() {
        let at = |space: AsidSpace| [1, 2, 3, 6, 8].map(|cpus| space.default_count(cpus));
        assert_eq!(at(AsidSpace::Arm64Asids), [4, 4, 8, 8, 16]);
        assert_eq!(at(AsidSpace::PcidsPerCpu), [4; 5]);
        assert_eq!(at(AsidSpace::LinuxPcidSlots), [6; 5]);
        assert_eq!(at(AsidSpace::GlobalAsids), [2; 5]);
    }
}
