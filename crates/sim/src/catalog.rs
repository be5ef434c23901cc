//! The catalogue of names a run takes, as JSON: machines (with their costs and
//! the machine and kernel parameters), policies, workloads (every parameter with
//! its default, range and meaning) and metrics. `tlbkit list KIND --format json`
//! prints these documents and the Python binding's `list_*` functions return
//! them, so both describe the simulator with one piece of code.

use crate::metrics::METRICS;
use crate::preset;
use crate::run::all_switches;
use crate::workload::WORKLOADS;
use serde_json::{json, Value};
use tlbkit_registry::POLICIES;

/// Returns an architecture's name as `tlbkit list` shows it.
pub use crate::preset::arch_name;

/// `{"machines": [...], "parameters": [...]}`: every preset's cores, TLBs and
/// costs with each field's source (`sources`, by the field's name here), and
/// the machine and kernel parameters every run accepts. The names are those a
/// machine file sets (`--machine PATH.toml`, `preset/file.rs`).
pub fn machines() -> Value {
    let docs: Vec<Value> = preset::all()
        .iter()
        .map(|p| {
            json!({
                "name": p.name,
                "description": p.description,
                "arch": arch_name(p.arch),
                "freq_ghz": p.freq_ghz,
                "cores": p.real_cores,
                "cores_per_socket": p.cores_per_socket,
                "cores_per_ccx": p.cores_per_ccx,
                "sockets": p.real_cores.div_ceil(p.cores_per_socket),
                "asid_bits": p.asid_bits,
                "numa": p.numa,
                "tlb": serde_json::to_value(p.tlb).unwrap_or_default(),
                "tlbi_range": p.tlbi_range,
                "invpcid": p.invpcid,
                "meltdown": p.meltdown,
                "threads_per_core": p.threads.per_core,
                "smt_share": p.threads.share,
                "smt_tlbs": p.threads.tlbs,
                "kernel": p.kernel.name(),
                "mem_bw_gbs": p.mem_bw_gbs,
                "costs_cycles": serde_json::to_value(p.costs).unwrap_or_default(),
                "cost_sources": p.cost_sources,
                "estimates": serde_json::to_value(&p.estimates).unwrap_or_default(),
                "sources": p.sources,
            })
        })
        .collect();
    let keys: Vec<Value> = all_switches().map(|s| json!({"key": s.key, "meaning": s.doc})).collect();
    json!({"machines": docs, "parameters": keys})
}

/// `[{"name", "arch", "kernel", "era", "untimed", "description"}, ...]`:
/// every registered policy; `kernel` is the Linux release its code is
/// ([`release_name`]), or null where a run takes the machine's; `era` where
/// its mechanism stands against the origins (`origin 002`, `history`,
/// `later`); `untimed` why `tlbkit bench check --policy all` leaves it out.
pub fn policies() -> Value {
    POLICIES
        .iter()
        .map(|p| {
            json!({
                "name": p.name,
                "arch": arch_name(p.arch),
                "kernel": p.version.map(release_name),
                "era": p.era.name(),
                "untimed": p.untimed,
                "description": p.description,
            })
        })
        .collect()
}

/// Returns a policy's release as a run's `kernel` parameter names it.
pub fn release_name((major, minor): (u8, u8)) -> String {
    preset::Kernel::Linux(major, minor).name()
}

/// `{"workloads": [...]}`: every workload with its results (the headline
/// first) and every parameter with its default, range and meaning.
pub fn workloads() -> Value {
    let docs: Vec<Value> = WORKLOADS
        .iter()
        .map(|w| {
            let params: Vec<Value> = w
                .params
                .iter()
                .map(|p| json!({"key": p.key, "default": p.default, "min": p.min, "max": p.max, "meaning": p.doc}))
                .chain(
                    w.text_params
                        .iter()
                        .map(|p| json!({"key": p.key, "default": null, "required": true, "meaning": p.doc})),
                )
                .collect();
            json!({
                "name": w.name,
                "description": w.description,
                "results": w.results,
                "headline": w.results.first(),
                "parameters": params,
            })
        })
        .collect();
    json!({"workloads": docs})
}

/// `[{"name", "unit", "kind", "meaning"}, ...]`: every figure a run reports.
pub fn metrics() -> Value {
    METRICS
        .iter()
        .map(|m| {
            json!({"name": m.name, "unit": m.unit, "kind": if m.result { "result" } else { "metric" }, "meaning": m.meaning})
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_a_machine_lists_is_a_field_a_file_sets() {
        let p = crate::preset::named("altra");
        let json = machines();
        let listed = json["machines"].as_array().unwrap().iter().find(|m| m["name"] == "altra").unwrap().clone();
        for path in crate::preset::file::all_paths() {
            let v = match path.split_once('.') {
                Some((t, k)) => &listed[t][k],
                None => &listed[path.as_str()],
            };
            assert!(!v.is_null(), "{path} is settable but `list machines --format json` does not give it");
            assert!(p.sources.contains_key(&path), "{path} has no source");
        }
    }
}
