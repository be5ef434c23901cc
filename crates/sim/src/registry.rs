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
        description: "FreeBSD arm64 after seed 000: nG user mappings, epoch ASID allocator, broadcast per-page TLBI",
        arch: Arch::Arm64,
    },
];

/// Returns the policy called `name`.
pub fn policy(name: &str) -> Option<&'static PolicyDef> {
    POLICIES.iter().find(|p| p.name == name)
}
