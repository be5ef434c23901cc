//! Names: which policies exist and what they are for (machines are in `preset`,
//! workloads in `workload`; `run` builds the policy a name stands for).

use crate::preset::Arch;

/// A registered policy.
#[derive(Clone, Copy, Debug)]
pub struct PolicyDef {
    /// The name used on the command line.
    pub name: &'static str,
    /// One line for `tlbkit list`.
    pub description: &'static str,
    /// The architecture it is written for.
    pub arch: Arch,
}

/// Every policy.
pub const POLICIES: &[PolicyDef] = &[
    PolicyDef {
        name: "arm64-noasid",
        description:
            "FreeBSD arm64 before seed 000: global user mappings, broadcast TLBI VMALLE1IS on every pmap switch",
        arch: Arch::Arm64,
    },
    PolicyDef {
        name: "arm64-freebsd-asid",
        description: "FreeBSD arm64 after seed 000: nG user mappings, epoch ASID allocator, broadcast per-page TLBI \
                      (has finding freebsd-arm64-asid-reset-*)",
        arch: Arch::Arm64,
    },
    PolicyDef {
        name: "arm64-freebsd-asid-fix-reserved-ttbr0",
        description: "arm64-freebsd-asid with a fix candidate: the reserved empty table in TTBR0 before the curpmap \
                      store, so no walk uses an unreserved ASID during a reset",
        arch: Arch::Arm64,
    },
    PolicyDef {
        name: "arm64-freebsd-asid-fix-self",
        description: "arm64-freebsd-asid with a partial fix: the reset also reserves the resetting CPU's own TTBR0 \
                      ASID (closes only window 1 of the reset finding)",
        arch: Arch::Arm64,
    },
    PolicyDef {
        name: "arm64-linux",
        description: "Linux arm64: generation rollover allocator, lock-free fast path, pinned ASIDs, optional KPTI, \
                      broadcast TLBI by ASID",
        arch: Arch::Arm64,
    },
    PolicyDef {
        name: "arm64-linux-skipbcast",
        description: "Linux arm64 + seed 001: skip the TLBI broadcast when the mm is active only here or nowhere \
                      (nr_active_mm, stale mask, reserved TTBR0 when lazy)",
        arch: Arch::Arm64,
    },
    PolicyDef {
        name: "x86-linux-nopcid",
        description: "Linux x86 tlb_gen with PCID off (seed 002 before): every CR3 write to another mm flushes",
        arch: Arch::X86_64,
    },
    PolicyDef {
        name: "x86-linux-pcid",
        description: "Linux x86 PCID (seed 002 after): 6 per-CPU {ctx_id, tlb_gen} slots, CR3 NOFLUSH, lazy TLB, \
                      IPI flushes",
        arch: Arch::X86_64,
    },
    PolicyDef {
        name: "x86-freebsd-counter",
        description: "FreeBSD x86 before seed 003: per-CPU PCIDs, one IPI lock, handlers increment one shared counter",
        arch: Arch::X86_64,
    },
    PolicyDef {
        name: "x86-freebsd-gen",
        description: "FreeBSD x86 after seed 003: handlers store the generation in their own per-CPU done flag",
        arch: Arch::X86_64,
    },
    PolicyDef {
        name: "x86-freebsd-scoreboard",
        description: "FreeBSD x86 (2020 rework): lock-free per-initiator requests, target x initiator scoreboard, \
                      ack before invalidate",
        arch: Arch::X86_64,
    },
];

/// Returns the policy called `name`.
pub fn policy(name: &str) -> Option<&'static PolicyDef> {
    POLICIES.iter().find(|p| p.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tlbkit_policy::zoo::ZOO;

    #[test]
    fn every_zoo_entry_names_a_registered_base_policy() {
        for e in ZOO {
            assert!(policy(e.base).is_some(), "zoo/{}: base {:?} is not a registered policy", e.id, e.base);
        }
    }
}
