//! Every tool reads what a policy is from its registry entry, never from its
//! name. Each registered policy is given another name (`zz-test-policy-N`,
//! which no prefix or equality test on names recognises) by
//! `tlbkit_registry::alias`, a copy of its entry; then the checker's defaults,
//! shapes and runs, and the simulator's switches and runs, must be exactly the
//! registered policy's, with only the name changed. A tool that decided
//! anything from `starts_with("arm64-linux")`, `== "x86-linux-invlpgb"` and the
//! like would give the alias another answer. (`tlbkit bench check`'s
//! standard bounds are held to the same in its own unit tests.)

use tlbkit_check::options::Options;
use tlbkit_check::shape::Shape;
use tlbkit_check::spec::{self, Depth};
use tlbkit_check::{check, CheckSpec, Mode};
use tlbkit_registry::{PolicyDef, POLICIES};
use tlbkit_sim::run::{self, RunSpec};

/// Returns every registered policy with its alias.
fn aliases() -> Vec<(&'static PolicyDef, &'static str)> {
    POLICIES
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let alias = tlbkit_registry::alias(&format!("zz-test-policy-{i}"), p.name).unwrap();
            (p, alias.name)
        })
        .collect()
}

/// Returns `r` with the alias's name written as the policy's (error messages
/// and reports name the policy they were given).
fn named<T: std::fmt::Debug>(r: &T, alias: &str, policy: &str) -> String {
    format!("{r:?}").replace(alias, policy)
}

#[test]
fn the_checker_gives_a_policy_under_any_name_its_entrys_defaults() {
    for (p, alias) in aliases() {
        let name = p.name;
        for cpus in 1..=8 {
            assert_eq!(spec::default_asids(alias, cpus), spec::default_asids(name, cpus), "{name}, {cpus} CPUs");
        }
        assert_eq!(spec::family(alias), spec::family(name), "{name}");
        assert_eq!(spec::default_memory(alias), spec::default_memory(name), "{name}");
        for preset in [Depth::Quick, Depth::Default, Depth::Deep] {
            let as_name = |s: CheckSpec| CheckSpec { policy: name.to_string(), ..s };
            assert_eq!(as_name(spec::preset(alias, preset)), spec::preset(name, preset), "{name}, {preset:?}");
            assert_eq!(as_name(spec::contpte_defaults(alias, preset)), spec::contpte_defaults(name, preset), "{name}");
        }
        assert_eq!(spec::is_x86(alias), spec::is_x86(name), "{name}");
        let theirs = spec::default_spec(name);
        assert_eq!(spec::default_spec(alias), CheckSpec { policy: alias.to_string(), ..theirs.clone() }, "{name}");

        // The shape: its kernel's page-out path and locking, its architecture, and
        // whether it takes a contiguous block (`--teardown`).
        let shape = |policy: &str, teardown: Option<&str>| -> Result<Shape, tlbkit_check::Error> {
            let options =
                Options { policy: policy.to_string(), teardown: teardown.map(str::to_string), ..Options::default() };
            spec::shape(&options.resolve()?.0)
        };
        for teardown in [None, Some("clear_ptes")] {
            assert_eq!(
                named(&shape(alias, teardown), alias, name),
                named(&shape(name, teardown), name, name),
                "{name}"
            );
        }
        // The ASID space `--asids` sizes: arm64's ASIDs, FreeBSD x86's PCIDs, Linux
        // x86's fixed slots, the global ASIDs of INVLPGB.
        for asids in [1, 2, 3, 4, 6, 4096, 1 << 16] {
            let spec = |policy: &str| CheckSpec { policy: policy.to_string(), asids, iterations: 1, ..theirs.clone() };
            let (mine, theirs) = (check(&spec(alias)), check(&spec(name)));
            assert_eq!(mine.is_ok(), theirs.is_ok(), "{name}, --asids {asids}: {mine:?} / {theirs:?}");
            if let (Err(mine), Err(theirs)) = (mine, theirs) {
                assert_eq!(mine.to_string().replace(alias, name), theirs.to_string(), "{name}, --asids {asids}");
            }
        }
    }
}

#[test]
fn the_checker_runs_a_policy_under_any_name_as_it_runs_the_policy() {
    for (p, alias) in aliases() {
        let spec = |policy: &str| CheckSpec { mode: Mode::Pct, iterations: 40, ..spec::default_spec(policy) };
        let (mine, theirs) = (check(&spec(alias)).unwrap(), check(&spec(p.name)).unwrap());
        let found = |r: &tlbkit_check::CheckReport| {
            (
                r.explored.executions,
                r.explored.max_steps,
                r.explored.rollovers,
                r.explored.initiators,
                r.counterexample.as_ref().map(|c| c.property),
            )
        };
        assert_eq!(found(&mine), found(&theirs), "{}", p.name);
        assert_eq!(mine.to_text().replace(alias, p.name).lines().next(), theirs.to_text().lines().next(), "{}", p.name);
    }
}

/// The simulator's settings each policy is tried with: on and off for every
/// switch, and none.
const SETS: &[&[&str]] = &[
    &[],
    &["kpti=on"],
    &["kpti=off"],
    &["tlbi_range=on"],
    &["tlbi_range=off"],
    &["tlb_mode=0x1404"],
    &["contpte=on"],
    &["contpte=off"],
    &["teardown=simple"],
];

/// A run of `policy` on `machine` with `sets`, of a short `pingpong`.
fn run_spec(machine: &str, policy: &str, sets: &[&str]) -> RunSpec {
    RunSpec {
        machine: machine.into(),
        cpus: 2,
        policy: policy.into(),
        workload: "pingpong".into(),
        sets: sets.iter().map(|s| s.to_string()).chain(["rounds=10".to_string()]).collect(),
        seed: 1,
        strict: true,
    }
}

#[test]
fn the_simulator_takes_the_same_switches_and_machines_under_any_name() {
    // An arm64 machine with FEAT_TLBIRANGE, one without; x86 without INVLPGB and with.
    let machines = ["graviton4", "cortex-a72", "skylake", "milan"];
    for (p, alias) in aliases() {
        let mut ran = 0;
        for machine in machines {
            for sets in SETS {
                let (mine, theirs) =
                    (run::check(&run_spec(machine, alias, sets)), run::check(&run_spec(machine, p.name, sets)));
                assert_eq!(
                    named(&mine, alias, p.name),
                    named(&theirs, p.name, p.name),
                    "{} on {machine}, {sets:?}",
                    p.name
                );
                if theirs.is_err() {
                    continue;
                }
                // What a run reports (the switches it shows among its parameters, the
                // default TLB mode word, whether the machine's range operations reached
                // the policy) is the policy's too.
                let json =
                    |policy: &str| serde_json::to_string(&run::run(&run_spec(machine, policy, sets)).unwrap()).unwrap();
                assert_eq!(json(alias).replace(alias, p.name), json(p.name), "{} on {machine}, {sets:?}", p.name);
                ran += 1;
            }
        }
        assert!(ran > 0, "{} ran nowhere", p.name);
    }
}

/// No tool keeps its own list of policies: which are the origins', the
/// history's or later, and which `tlbkit bench check` leaves out, are each
/// entry's (`era`, `untimed`). A list of two or more registered names, one
/// per line, in a non-test source is such a hand list.
#[test]
fn no_source_lists_policies_by_hand() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dirs = vec![root.join("src"), root.join("python/src"), root.join("crates")];
    let mut files = Vec::new();
    while let Some(d) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries {
            let p = e.expect("a folder entry").path();
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
            if p.is_dir() && !["tests", "benches", "target", "fuzz"].contains(&name.as_str()) {
                dirs.push(p);
            } else if name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs") {
                files.push(p);
            }
        }
    }
    assert!(files.len() > 100, "the workspace's sources were not found from {}", root.display());
    let registry = root.join("crates/registry/src/policies.rs");
    let mut found = Vec::new();
    for f in files.iter().filter(|f| **f != registry) {
        let text = std::fs::read_to_string(f).expect("read a source file");
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        let is_name = |line: &str| POLICIES.iter().any(|p| line.trim() == format!("\"{}\",", p.name));
        let lines: Vec<&str> = code.lines().collect();
        for (n, pair) in lines.windows(2).enumerate() {
            if is_name(pair[0]) && is_name(pair[1]) {
                found.push(format!("{}:{}: {}", f.display(), n + 1, pair[0].trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "a hand list of policies (say it in each policy's registry entry):\n{}",
        found.join("\n")
    );
}

/// Every policy says where it stands against the origins, and the origins'
/// policies are each origin's before and after.
#[test]
fn every_origin_has_policies_and_every_policy_an_era() {
    use tlbkit_registry::Era;
    for n in 0..=3u8 {
        assert!(POLICIES.iter().filter(|p| p.era == Era::Origin(n)).count() >= 2, "origin {n:03}: before and after");
    }
    assert!(POLICIES.iter().any(|p| p.era == Era::History) && POLICIES.iter().any(|p| p.era == Era::Later));
}
