//! A preset with its estimated costs of one kind multiplied by a factor:
//! `tlbkit validate --vary KIND=FACTOR`, to see which of the validation
//! corpus's verdicts turn on what was estimated rather than measured.
//!
//! Every field of a machine file has a source or `estimate: why`
//! ([`Preset::sources`]). A kind ([`COST_KINDS`]) names a group of cost
//! fields that price one part of the machine (its IPIs, its kernel software
//! paths, its TLB maintenance, its broadcast invalidation, its exception
//! entry, its memory and coherence); [`varied`] writes a partial machine file
//! on the preset that multiplies the fields of that kind whose source is an
//! estimate, and leaves every sourced field as it is. A field that is not a
//! count of cycles (`walkers`, `mlp`, `ipi_cluster`, the DVM limits, the idle
//! states' thresholds) is in no kind. The kernel's own estimated software
//! costs (`docs/costs/kernel.md`: the zone and LRU locks' holds, a further
//! walk of the VMA tree) are constants of the simulator, not machine fields,
//! and are not varied.

use super::Preset;
use std::fmt::Write as _;

/// A group of cost fields that price one part of a machine.
#[derive(Clone, Copy, Debug)]
pub struct CostKind {
    /// Its name, as `--vary` takes it.
    pub name: &'static str,
    /// The cost fields, as a machine file names them (`[costs_cycles]`).
    pub fields: &'static [&'static str],
}

/// Every kind `--vary` takes.
pub const COST_KINDS: &[CostKind] = &[
    // Inter-processor interrupts: send, delivery, the handler's dispatch, a socket's crossing.
    CostKind { name: "ipi", fields: &["ipi_send", "ipi_deliver", "ipi_handle", "ipi_cross_socket"] },
    // The kernel's software paths: a system call, a fault, a pipe operation, a switch, a page's zeroing, a teardown.
    CostKind {
        name: "software",
        fields: &["syscall_body", "fault_path", "pipe_op", "switch_path", "page_copy", "zap_page", "zap_folio"],
    },
    // Local TLB maintenance, address-space roots and barriers.
    CostKind {
        name: "tlb",
        fields: &[
            "tlbi_local_va",
            "tlbi_local_asid",
            "tlbi_local_all",
            "invpcid_va",
            "root_write",
            "root_write_flush",
            "full_barrier",
            "dsb",
            "isb",
        ],
    },
    // Broadcast invalidation (arm64 DVM, x86 INVLPGB): issue, hops, each receiver's processing.
    CostKind {
        name: "broadcast",
        fields: &[
            "tlbi_bcast_issue",
            "dvm_hop",
            "dvm_process",
            "dvm_process_asid",
            "dvm_cross_socket",
            "dvm_node_process",
        ],
    },
    // Exception and system-call entry and return.
    CostKind { name: "entry", fields: &["exception_entry", "exception_exit"] },
    // Memory and coherence: L1 and L2 TLB hits, the walk's loads, line transfers, a remote node's latency.
    CostKind {
        name: "memory",
        fields: &[
            "mem_access",
            "tlb_l2_hit",
            "walk_level",
            "walk_start",
            "cacheline_transfer",
            "cacheline_cross_ccx",
            "cacheline_cross_socket",
            "mem_remote_extra",
            "atomic_hit",
        ],
    },
];

/// Returns the kind called `name`.
pub fn kind(name: &str) -> Option<&'static CostKind> {
    COST_KINDS.iter().find(|k| k.name == name)
}

/// Returns the fields of `kind` that `preset` gives an estimate for, each
/// with its value in cycles, in the kind's order.
pub fn estimated(preset: &Preset, kind: &CostKind) -> Vec<(&'static str, u64)> {
    let Ok(serde_json::Value::Object(costs)) = serde_json::to_value(preset.costs) else {
        return Vec::new();
    };
    kind.fields
        .iter()
        .filter(|f| preset.sources.get(&format!("costs_cycles.{f}")).is_some_and(|s| s.starts_with("estimate: ")))
        .filter_map(|f| costs.get(*f).and_then(serde_json::Value::as_u64).map(|v| (*f, v)))
        .collect()
}

/// A preset with some of its estimates varied: the machine file that
/// describes it and what it changed.
#[derive(Clone, Debug, PartialEq)]
pub struct Varied {
    /// The machine's name (`hsw48-ipi-x2`).
    pub name: String,
    /// The partial machine file, on the preset.
    pub file: String,
    /// Each field varied, its value before and after.
    pub changes: Vec<(&'static str, u64, u64)>,
}

/// Returns the machine `preset` with each of its estimated costs of every
/// kind in `vary` multiplied by its factor (rounded to whole cycles), or
/// `None` when the preset estimates none of them.
pub fn varied(preset: &Preset, vary: &[(&CostKind, f64)]) -> Option<Varied> {
    let mut changes = Vec::new();
    let mut tag = String::new();
    for (kind, factor) in vary {
        let fields = estimated(preset, kind);
        if fields.is_empty() {
            continue;
        }
        let _ = write!(tag, "-{}-x{}", kind.name, factor_tag(*factor));
        changes.extend(fields.into_iter().map(|(f, v)| (f, v, (v as f64 * factor).round() as u64)));
    }
    if changes.is_empty() {
        return None;
    }
    let name = format!("{}{tag}", preset.name);
    let mut file = format!(
        "# {name}: {} with estimated costs varied (tlbkit validate --vary)\nbase = \"{}\"\nname = \"{name}\"\n\n[costs_cycles]\n",
        preset.name, preset.name
    );
    for (f, _, after) in &changes {
        let _ = writeln!(file, "{f} = {after}");
    }
    Some(Varied { name, file, changes })
}

/// A factor as a machine's name may hold it: `2`, `0_5`.
fn factor_tag(f: f64) -> String {
    format!("{f}").replace('.', "_")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preset::{file, named};

    #[test]
    fn only_the_estimated_fields_of_a_kind_are_varied_and_the_file_loads() {
        let p = named("hsw48");
        let ipi = kind("ipi").unwrap();
        // hsw48's IPI costs are estimates; its socket crossing is sourced.
        let fields: Vec<_> = estimated(&p, ipi).into_iter().map(|(f, _)| f).collect();
        assert_eq!(fields, ["ipi_send", "ipi_deliver", "ipi_handle"]);
        let v = varied(&p, &[(ipi, 2.0)]).unwrap();
        assert_eq!(v.name, "hsw48-ipi-x2");
        assert_eq!(v.changes, [("ipi_send", 150, 300), ("ipi_deliver", 1000, 2000), ("ipi_handle", 300, 600)]);
        let loaded = file::load_text(&v.file, "varied.toml").unwrap();
        assert_eq!(loaded.name, "hsw48-ipi-x2");
        assert_eq!(loaded.costs.ipi.ipi_deliver, 2000);
        assert_eq!(loaded.costs.ipi.ipi_cross_socket, p.costs.ipi.ipi_cross_socket);
        assert_eq!(loaded.costs.kernel, p.costs.kernel);
        let half = varied(&p, &[(kind("software").unwrap(), 0.5)]).unwrap();
        assert_eq!(half.name, "hsw48-software-x0_5");
        assert!(half.changes.contains(&("fault_path", 1500, 750)), "{:?}", half.changes);
    }

    #[test]
    fn a_preset_with_no_estimate_of_a_kind_is_not_varied() {
        // Some preset sources every field of some kind (its cache-line
        // transfers measured, say): that kind leaves it as it is.
        let none = crate::preset::all()
            .into_iter()
            .find_map(|p| COST_KINDS.iter().find(|k| estimated(&p, k).is_empty()).map(|k| (p, *k)));
        let (p, k) = none.expect("some preset sources every field of some kind");
        assert_eq!(varied(&p, &[(&k, 2.0)]), None);
    }

    #[test]
    fn every_field_of_every_kind_is_a_cost() {
        let costs = serde_json::to_value(named("milan").costs).unwrap();
        for k in COST_KINDS {
            for f in k.fields {
                assert!(costs.get(*f).and_then(serde_json::Value::as_u64).is_some(), "{}: {f}", k.name);
            }
        }
    }
}
