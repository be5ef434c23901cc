//! What is already recorded that a violation may be: the bug a `zoo/` policy
//! re-introduces, or a finding of the catalogue
//! ([`tlbkit_policy::findings::FINDINGS`]) that breaks the same property
//! under a memory model the check includes. A counterexample carries it
//! ([`crate::report::Counterexample::known`]) and the report names it on a
//! `known:` line.

use crate::shape::Memory;
use serde::Serialize;

/// A recorded hazard a violation may be ([`crate::report::Counterexample::known`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Known {
    /// `finding` (the catalogue of hazards in upstream code,
    /// [`tlbkit_policy::findings`]) or `zoo` (a historic bug re-introduced).
    pub kind: &'static str,
    /// The finding's id, or the zoo entry's `zoo/<id>` without `zoo/`.
    pub id: &'static str,
    /// Its one line.
    pub summary: &'static str,
}

/// The recorded hazards a violation of `property`, found by a check of the
/// policy and memory model `token` names, may be: for a `zoo/<id>` policy, the
/// bug it re-introduces; otherwise every finding of the policy, or whose
/// command checks it ([`tlbkit_policy::findings::FINDINGS`]), that breaks
/// `property` under a memory model no weaker than the check's (a finding
/// that needs arm64's ordering is not what a check under `tso` found). The property and the
/// model are what is compared, not the window: a new hazard of the same
/// policy and property would be named too, so the output says "may be".
pub fn known(token: &str, property: &str) -> Vec<Known> {
    let Ok((spec, _)) = crate::token::decode(token) else { return Vec::new() };
    if let Some(id) = spec.policy.strip_prefix("zoo/") {
        let entry = tlbkit_policy::zoo::ZOO.iter().find(|e| e.id == id);
        return entry.map(|e| Known { kind: "zoo", id: e.id, summary: e.summary }).into_iter().collect();
    }
    let rank = |m: Memory| Memory::ALL.iter().position(|&n| n == m);
    tlbkit_policy::findings::FINDINGS
        .iter()
        .filter(|f| f.property == property)
        .filter(|f| {
            // The finding's own check may run a partial fix that keeps its window.
            crate::token::decode(f.token).is_ok_and(|(found, _)| {
                (f.policy == spec.policy || found.policy == spec.policy) && rank(found.memory) <= rank(spec.memory)
            })
        })
        .map(|f| Known { kind: "finding", id: f.id, summary: f.summary })
        .collect()
}
