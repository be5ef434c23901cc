//! The command line's contract: names, exit codes, JSON fields, determinism.

use crate::common::{assert_bad_input, stderr, tlbkit, tlbkit_json, LAT_CTX_RUN};
use std::process::Command;
use std::sync::LazyLock;

/// [`LAT_CTX_RUN`] with seed 42, as JSON.
static RUN: LazyLock<Vec<&str>> =
    LazyLock::new(|| LAT_CTX_RUN.iter().copied().chain(["--seed", "42", "--format", "json"]).collect());

#[test]
fn same_seed_gives_byte_identical_json() {
    let a = tlbkit(&RUN);
    let b = tlbkit(&RUN);
    assert_eq!(a.status.code(), Some(0), "{}", stderr(&a));
    assert_eq!(a.stdout, b.stdout);
    let j: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
    for k in ["machine", "cpus", "policy", "workload", "seed", "params", "metrics", "result", "violations"] {
        assert!(j.get(k).is_some(), "missing {k}");
    }
    for k in [
        "sim_time_ns",
        "tlb_accesses",
        "tlb_misses",
        "page_walks",
        "local_invalidations",
        "broadcast_invalidations",
        "ipis_sent",
        "context_switches",
        "asid_rollovers",
        "full_flushes",
    ] {
        assert!(j["metrics"].get(k).is_some(), "missing metric {k}");
    }
    assert!(j["result"]["us_per_switch"].as_f64().unwrap() > 0.0);
}

#[test]
fn a_different_seed_changes_the_run() {
    let mut other: Vec<&str> = RUN.to_vec();
    let i = other.iter().position(|a| *a == "42").unwrap();
    other[i] = "43";
    let mut spec: Vec<&str> = other.clone();
    spec.extend(["--set", "spec_rate=0.5"]);
    let mut base: Vec<&str> = RUN.to_vec();
    base.extend(["--set", "spec_rate=0.5"]);
    assert_ne!(tlbkit(&base).stdout, tlbkit(&spec).stdout);
}

fn with(replace: &str, by: &str) -> Vec<String> {
    let mut v: Vec<String> = RUN.iter().map(|s| s.to_string()).collect();
    let i = v.iter().position(|a| a == replace).unwrap();
    v[i] = by.to_string();
    v
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(|s| s.as_str()).collect()
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    assert_bad_input(&refs(&with("cortex-a72", "vax")), "valid machines: altra, ampereone, cortex-a72");
    assert_bad_input(&refs(&with("arm64-freebsd-asid", "magic")), "valid policies: arm64-noasid, arm64-freebsd-asid");
    assert_bad_input(&refs(&with("lat_ctx", "nope")), "valid workloads: lat_ctx");
    assert_bad_input(&refs(&with("2", "0")), "--cpus 0 is out of range");
    assert_bad_input(&refs(&with("2", "-1")), "--cpus -1 is out of range: give 1 to 4096");
    assert_bad_input(&["check", "--policy", "arm64-linux", "--cpus", "-1"], "--cpus -1: the checker runs 1 to 8 CPUs");
    assert_bad_input(
        &["check", "--policy", "arm64-linux", "--memory", "arm", "--cpus", "6"],
        "--memory arm: the arm mode offers a second store-buffer drain per CPU: give at most 5 CPUs",
    );
    assert_bad_input(&refs(&with("procs=6", "asid_bits=7")), "choose one of 16, 8");
    assert_bad_input(&refs(&with("procs=6", "procs")), "malformed --set 'procs'");
    assert_bad_input(&refs(&with("procs=6", "colour=blue")), "valid keys: asid_bits");
    assert_bad_input(&refs(&with("procs=6", "procs=1")), "out of range");
}

#[test]
fn a_misspelt_name_gets_the_nearest_valid_one() {
    assert_bad_input(
        &refs(&with("cortex-a72", "cortex-a7")),
        "unknown machine 'cortex-a7' (did you mean 'cortex-a72'?)",
    );
    assert_bad_input(
        &refs(&with("arm64-freebsd-asid", "arm64-freebsd-asdi")),
        "unknown policy 'arm64-freebsd-asdi' (did you mean 'arm64-freebsd-asid'?); valid policies",
    );
    assert_bad_input(&refs(&with("lat_ctx", "lat_ct")), "unknown workload 'lat_ct' (did you mean 'lat_ctx'?)");
    assert_bad_input(&refs(&with("procs=6", "procz=6")), "unknown parameter 'procz' (did you mean 'procs'?)");
    assert_bad_input(
        &["check", "--policy", "zoo/linux-arm64-a8ffaaa060b9"],
        "(did you mean 'zoo/linux-arm64-a8ffaaa060b8'?)",
    );
    // Nothing near: no guess.
    assert_bad_input(&refs(&with("cortex-a72", "vax")), "unknown machine 'vax'; valid machines");
}

#[test]
fn asid_width_and_architecture_mismatches_name_what_fits() {
    let mut a = with("procs=6", "asid_bits=12");
    let i = a.iter().position(|x| x == "arm64-freebsd-asid").unwrap();
    a[i] = "arm64-linux".into();
    assert_bad_input(&refs(&a), "choose one of 16, 8");
    assert_bad_input(
        &refs(&with("arm64-freebsd-asid", "x86-linux-pcid")),
        "policy 'x86-linux-pcid' is for x86-64 machines but 'cortex-a72' is arm64; policies that fit: arm64-",
    );
    assert_bad_input(&refs(&with("procs=6", "kpti=maybe")), "kpti=maybe: give on or off");
    assert_bad_input(
        &refs(&with("procs=6", "teardown=fast")),
        "--set teardown=fast: unknown teardown 'fast'; valid teardowns: noopt, simple, robust, clear_ptes",
    );
    assert_bad_input(
        &refs(&with("procs=6", "contpte=on")),
        "--set contpte=on and --set teardown model arm64 Linux's contiguous PTEs (contpte.c) and apply only to the \
         arm64 Linux policies (arm64-linux, arm64-linux-skipbcast, arm64-linux-activecpu, arm64-linux-tlbmode, \
         arm64-linux-tlbmode-fix-wmb), not arm64-freebsd-asid",
    );
}

#[test]
fn list_json_has_the_contract_shape() {
    let o = tlbkit(&["list", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let names = |k: &str| -> Vec<String> {
        j[k].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap().to_string()).collect()
    };
    assert!(names("machines").contains(&"skylake".to_string()));
    assert!(names("workloads").contains(&"pingpong".to_string()));
    for p in ["arm64-linux", "x86-linux-nopcid", "x86-linux-pcid"] {
        assert!(names("policies").contains(&p.to_string()), "{p}");
    }
    for p in ["no_stale_use", "no_lost_dirty", "no_ungathered_dirty", "no_tlb_conflict"] {
        assert!(names("properties").contains(&p.to_string()), "{p}");
    }
    for k in ["machines", "policies", "workloads", "properties"] {
        let arr = j[k].as_array().unwrap();
        assert!(!arr.is_empty());
        assert!(arr.iter().all(|e| e["name"].is_string() && e["description"].is_string()));
    }
}

#[test]
fn list_names_each_policys_release_and_each_machines_kernel_and_meltdown() {
    let json = |kind: &str| -> serde_json::Value {
        serde_json::from_slice(&tlbkit(&["list", kind, "--format", "json"]).stdout).unwrap()
    };
    let policies = json("policies");
    let of = |name: &str| policies.as_array().unwrap().iter().find(|p| p["name"] == name).unwrap()["kernel"].clone();
    assert_eq!(of("x86-linux-513"), "linux-5.13");
    assert!(of("arm64-linux").is_null(), "a policy of no one release runs under the machine's kernel");
    let machines = json("machines");
    let m = |name: &str| machines["machines"].as_array().unwrap().iter().find(|m| m["name"] == name).unwrap().clone();
    assert_eq!((m("hsw48")["kernel"].clone(), m("hsw48")["meltdown"].clone()), ("linux-4.9".into(), true.into()));
    assert_eq!(m("icx8358")["meltdown"], false);
}

#[test]
fn list_shows_every_finding_in_its_own_section_with_its_command() {
    let o = tlbkit(&["list"]);
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8(o.stdout).unwrap();
    let at = text.find("findings (").expect("a findings section");
    let zoo = text.find("bug zoo").expect("the zoo section");
    assert!(zoo < at, "findings come after the zoo");
    for f in tlbkit_policy::findings::FINDINGS {
        let line = text[at..].lines().find(|l| l.trim_start().starts_with(f.id)).unwrap_or_else(|| panic!("{}", f.id));
        assert!(line.contains(&f.command()), "{line}");
    }
    let j: serde_json::Value = serde_json::from_slice(&tlbkit(&["list", "--format", "json"]).stdout).unwrap();
    let ids: Vec<&str> = j["findings"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "freebsd-arm64-asid-reset-self",
            "freebsd-arm64-asid-reset-curpmap",
            "linux-arm64-asid-publish",
            "arm64-skipbcast-early-mask-read",
            "arm64-tlbmode-mask-clear-reorder",
            "x86-global-asid-max",
            "latr-artifact-cow",
            "latr-artifact-migrate"
        ]
    );
}

/// Runs `tlbkit reproduce --only id` and returns the claim's JSON.
fn claim(id: &str) -> serde_json::Value {
    tlbkit_json(&["reproduce", "--only", id, "--format", "json"])["claims"][0].take()
}

/// Asserts that claim `c` is reproduced in direction only, with a note that
/// says why (naming `why`).
fn assert_direction_only_because(c: &serde_json::Value, why: &str) {
    assert_eq!(c["verdict"], "direction-only", "{c}");
    let notes = c["notes"].as_array().expect("the claim's notes");
    assert!(notes.iter().any(|n| n.as_str().is_some_and(|n| n.contains(why))), "{c}");
}

#[test]
fn origin002_claims_are_reproduced() {
    for id in ["origin002-pingpong", "origin002-pingpong-512"] {
        let c = &claim(id);
        assert_eq!(c["baseline"], "x86-linux-nopcid");
        assert_eq!(c["variant"], "x86-linux-pcid");
        assert_eq!(c["verdict"], "reproduced", "{c}");
        assert!(c["checks"].as_array().unwrap().iter().all(|k| k["passed"] == true), "{c}");
    }
}

#[test]
fn origin001_mprotect_is_reproduced() {
    let c = &claim("origin001-mprotect");
    assert_eq!(c["variant"], "arm64-linux-skipbcast");
    assert_eq!(c["verdict"], "reproduced", "{c}");
}

#[test]
fn origin001_tcmalloc_is_reproduced() {
    // Inside its band again, near its edge (0.8695), since memcg charges walk every page counter.
    let c = &claim("origin001-tcmalloc");
    assert_eq!(c["variant"], "arm64-linux-skipbcast");
    assert_eq!(c["verdict"], "reproduced", "{c}");
}

#[test]
fn origin001_sort_is_direction_only_and_its_note_says_why() {
    // The kernel's other work moved it just past the band's edge (its note).
    let c = &claim("origin001-sort");
    assert_direction_only_because(c, "kernel's other work");
}

#[test]
fn origin003_shootdown_is_direction_only_on_the_origins_eight_cpus_and_its_note_says_why() {
    let c = &claim("origin003-shootdown");
    assert_eq!(c["baseline"], "x86-freebsd-counter");
    assert_eq!(c["variant"], "x86-freebsd-gen");
    // The seed's IPI delivery latencies moved it just past the band's edge (its note).
    assert_direction_only_because(c, "delivery latency");
    let share = &c["checks"][0];
    assert_eq!(share["passed"], true, "{c}");
    // Handlers spend a larger part of their time invalidating with per-CPU flags.
    assert!(share["sim_variant"].as_f64().unwrap() > 1.5 * share["sim_baseline"].as_f64().unwrap(), "{c}");
}

#[test]
fn origin000_latctx_is_reproduced() {
    let c = &claim("origin000-latctx");
    assert_eq!(c["id"], "origin000-latctx");
    assert_eq!(c["baseline"], "arm64-noasid");
    assert_eq!(c["variant"], "arm64-freebsd-asid");
    assert_eq!((c["metric"].as_str(), c["unit"].as_str()), (Some("us_per_switch"), Some("µs")), "{c}");
    assert!((c["origin_ratio"].as_f64().unwrap() - 2.908 / 3.584).abs() < 1e-9);
    assert_eq!(c["verdict"], "reproduced", "{c}");
    // The names from before origins were called so still work: the claim's id
    // and the JSON keys.
    let old = &claim("seed000-latctx");
    assert_eq!(old["id"], "origin000-latctx");
    assert_eq!((&old["seed"], &old["seed_ratio"]), (&c["origin"], &c["origin_ratio"]), "{old}");
}

#[test]
fn unknown_claim_lists_the_valid_ones() {
    assert_bad_input(&["reproduce", "--only", "seed999"], "valid claims: origin000-latctx");
    assert_bad_input(&["reproduce", "--only", "origin000-latcx"], "(did you mean 'origin000-latctx'?)");
}

fn bench_json(args: &[&str]) -> serde_json::Value {
    let o = tlbkit(args);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn bench_scale_times_each_count_and_compares_it_with_the_first() {
    let j = bench_json(&[
        "bench",
        "scale",
        "--cpus",
        "2,4",
        "--workload",
        "mprotect_threaded",
        "--set",
        "iters=2",
        "--set",
        "sched=fifo",
        "--format",
        "json",
    ]);
    assert_eq!(j["machine"], "altra");
    assert_eq!(j["policy"], "arm64-linux");
    let runs = j["runs"].as_array().unwrap();
    assert_eq!(runs.iter().map(|r| r["cpus"].as_u64().unwrap()).collect::<Vec<_>>(), [2, 4]);
    for r in runs {
        assert_eq!(r["workload"], "mprotect_threaded");
        for k in ["events", "translations", "wall_s", "events_per_sec", "translations_per_sec", "speed_ratio"] {
            assert!(r[k].as_f64().unwrap() > 0.0, "{k}: {r}");
        }
        assert!(r.get("peak_rss_mib").is_some(), "{r}");
        let cmd = r["command"].as_str().unwrap();
        assert!(cmd.contains("--machine altra") && cmd.ends_with("--set iters=2 --set sched=fifo --seed 1"), "{cmd}");
    }
    assert_eq!(runs[0]["speed_ratio"], 1.0);
    // One copy per CPU: twice the CPUs, twice the events (with FIFO scheduling,
    // which adds no balancing or preemption of its own).
    assert_eq!(runs[1]["events"].as_u64().unwrap(), 2 * runs[0]["events"].as_u64().unwrap());

    let j = bench_json(&[
        "bench",
        "scale",
        "--cpus",
        "3",
        "--cpus",
        "2",
        "--workload",
        "fileserver",
        "--policy",
        "arm64-linux-skipbcast",
        "--set",
        "ops=2",
        "--format",
        "json",
    ]);
    assert_eq!(j["policy"], "arm64-linux-skipbcast");
    let runs = j["runs"].as_array().unwrap();
    assert_eq!(runs.iter().map(|r| r["cpus"].as_u64().unwrap()).collect::<Vec<_>>(), [3, 2]);
    assert!(runs.iter().all(|r| r["workload"] == "fileserver"));
}

#[test]
fn bench_scale_bad_values_are_one_line_and_exit_2() {
    let scale = |rest: &[&'static str]| [&["bench", "scale"][..], rest].concat();
    assert_bad_input(&scale(&["--cpus", "0"]), "--cpus 0 is out of range: give CPU counts from 1 to 4096");
    assert_bad_input(&scale(&["--cpus", "32,4097"]), "--cpus 4097 is out of range");
    assert_bad_input(&scale(&["--cpus", "-3"]), "--cpus '-3' is not a CPU count");
    assert_bad_input(&scale(&["--cpus", "2,lots"]), "--cpus 'lots' is not a CPU count");
    assert_bad_input(&scale(&["--cpus", "2", "--policy", "x86-linux-pcid"]), "policies that fit: arm64-");
    assert_bad_input(&scale(&["--cpus", "2", "--workload", "nope"]), "valid workloads: lat_ctx");
    assert_bad_input(&scale(&["--cpus", "2", "--set", "ops=2"]), "unknown parameter 'ops'");
}

#[test]
fn bench_check_checks_each_policy_in_a_child_and_reports_what_it_found() {
    let j = bench_json(&["bench", "check", "--policy", "arm64-freebsd-asid", "--format", "json"]);
    assert_eq!(j["bounds"]["cpus"], 2);
    assert_eq!(j["bounds"]["ops"], 6);
    assert_eq!(j["bounds"]["pages"], 1);
    let checks = j["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 1);
    let c = &checks[0];
    // The catalogued finding (window 1) is the check's result, not an error.
    assert_eq!(c["violation"], "no_asid_alias", "{c}");
    assert!(c["states"].as_u64().unwrap() > 0 && c["executions"].as_u64().unwrap() > 0, "{c}");
    assert_eq!(c["timed_out"], false);
    assert!(c["peak_rss_mib"].as_f64().unwrap() > 0.0, "{c}");
    assert_eq!(
        c["command"],
        "tlbkit check --policy arm64-freebsd-asid --mode exhaustive --cpus 2 --mms 3 --asids 4 --ops 6 --pages 1"
    );
}

#[test]
fn bench_check_reports_a_failed_check_as_its_row_and_exits_1() {
    // A check that cannot read its file: a row saying why (the others of a
    // longer run would still run), then exit code 1.
    let o = tlbkit(&["bench", "check", "--policy", "c:/no/such/context.c", "--format", "json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let c = &j["checks"][0];
    assert!(c["error"].as_str().unwrap().contains("cannot read /no/such/context.c"), "{c}");
    // The arm64 mode leaves the x86 policies out, and refuses one named.
    let o = tlbkit(&["bench", "check", "--memory", "arm", "--policy", "x86-linux-pcid"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--memory arm is arm64's mode: x86-linux-pcid is an x86 policy"), "{}", stderr(&o));
}

#[test]
fn check_jobs_reaches_the_states_one_thread_reaches() {
    let args =
        ["check", "--policy", "arm64-noasid", "--quick", "--mode", "exhaustive", "--ops", "3", "--format", "json"];
    let one = bench_json(&args);
    let mut two_args = args.to_vec();
    two_args.extend(["--jobs", "2"]);
    let two = bench_json(&two_args);
    assert_eq!(one["complete"], true);
    assert_eq!(two["complete"], true);
    assert_eq!(one["states"], two["states"]);
    assert_bad_input(
        &["check", "--policy", "arm64-noasid", "--jobs", "2"],
        "--jobs applies to exhaustive mode, not pct",
    );
    assert_bad_input(
        &["check", "--policy", "arm64-noasid", "--mode", "exhaustive", "--jobs", "0"],
        "--jobs 0 runs nothing",
    );
    // More workers than a process has arenas for: refused before any
    // starts, not a panic in the allocator when the arenas run out.
    assert_bad_input(
        &["check", "--policy", "arm64-noasid", "--mode", "exhaustive", "--jobs", "100000"],
        "--jobs 100000: a search runs at most 512 worker threads",
    );
    assert_bad_input(
        &["check", "--policy", "arm64-noasid", "--mode", "exhaustive", "--ops", "2", "--checkpoint-every", "1e300"],
        "--checkpoint-every 1e300: give seconds above 0, at most 31536000 (a year)",
    );
}

#[test]
fn bench_sharded_reaches_the_states_of_jobs_among_nodes() {
    // In-process mailboxes, then each node a process of its own over loopback TCP.
    for processes in [false, true] {
        let mut args = vec!["bench", "sharded", "--policy", "arm64-noasid", "--nodes", "2", "--jobs", "2"];
        args.extend(["--format", "json"].iter().chain(processes.then_some(&"--processes")));
        let j = bench_json(&args);
        let r = &j.as_array().unwrap()[0];
        assert_eq!((r["nodes"].as_u64(), r["states"].as_u64()), (Some(2), Some(235_782)), "{r}");
        assert_eq!((r["processes"].as_bool(), r["tcp"].as_bool()), (Some(processes), Some(processes)), "{r}");
        assert!(r["bytes"].as_u64().unwrap() > 0 && r["sharded_steps"].as_u64().unwrap() > 0, "{r}");
        if !processes {
            assert!(r["claims"].as_u64().unwrap() > 0 && r["admitted"].as_u64().unwrap() > 0, "{r}");
            assert!(r["known"].as_u64().is_some_and(|k| k > 0), "visits pruned by what owners said: {r}");
        }
    }
    assert_bad_input(&["bench", "sharded", "--nodes", "0"], "--nodes: give node counts from 1 to 256");
    assert_bad_input(&["bench", "sharded", "--nodes", "300"], "--nodes: give node counts from 1 to 256");
    assert_bad_input(&["bench", "sharded", "--batch", "0"], "--batch 0: give the claims a batch holds");
    assert_bad_input(&["bench", "sharded", "--jobs", "0"], "--jobs 0: give the workers in all");
    assert_bad_input(&["bench", "sharded", "--latency-us", "99999999999"], "--latency-us 99999999999: at most 1000000");
    assert_bad_input(&["bench", "sharded", "--policy", "nope"], "nope");
}

#[test]
fn bench_check_bad_values_are_one_line_and_exit_2() {
    assert_bad_input(&["bench", "check", "--policy", "nope"], "--policy nope: no such policy; the policies are");
    assert_bad_input(&["bench", "check", "--limit-s", "0"], "--limit-s 0 leaves no time");
    assert_bad_input(&["bench", "check", "--pages", "5"], "--pages 5: an address space maps 1 to 4 pages");
    assert_bad_input(&["bench", "check", "--jobs", "0"], "--jobs 0 runs nothing");
}

/// Asserts that clap refuses `args` before anything runs: exit 2, and stderr
/// names what was wrong (`needle`).
fn assert_refused(args: &[&str], needle: &str) {
    let o = tlbkit(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
    assert!(o.stdout.is_empty(), "{args:?} printed something");
}

#[test]
fn each_bench_subcommand_takes_only_its_own_flags() {
    // bench scale takes --runs only with --compare-with (invocations of each build).
    assert_refused(&["bench", "scale", "--cpus", "2", "--runs", "3"], "required arguments were not provided");
    assert_refused(&["bench", "scale", "--cpus", "2", "--pages", "2"], "unexpected argument '--pages'");
    assert_refused(&["bench", "scale", "--workload", "fileserver"], "--cpus <CPUS>");
    assert_refused(&["bench", "check", "--cpus", "2"], "unexpected argument '--cpus'");
    assert_refused(&["bench", "check", "--compare-with", "/bin/true"], "unexpected argument '--compare-with'");
    assert_refused(&["bench", "sim", "--policy", "arm64-linux"], "unexpected argument '--policy'");
    assert_refused(&["bench", "sim", "--limit-s", "5"], "unexpected argument '--limit-s'");
    // bench's own flags are bench sim's, and go with no subcommand.
    assert_refused(&["bench", "--runs", "3", "scale", "--cpus", "2"], "cannot be used with '--runs <RUNS>'");
}

#[test]
fn bench_alone_is_bench_sim() {
    for args in
        [&["bench", "--runs", "1", "--format", "json"][..], &["bench", "sim", "--runs", "1", "--format", "json"]]
    {
        let j = bench_json(args);
        assert_eq!(j["runs"], 1, "{args:?}: {j}");
        for k in ["translations_per_sec", "events_per_sec", "wall_s"] {
            assert!(j[k].as_f64().unwrap() > 0.0, "{args:?}: {k}: {j}");
        }
    }
}

/// `bench --cpus ...` and `bench --check ...`, the spellings from before the
/// subcommands, still run them, and refuse what the subcommands refuse.
#[test]
fn bench_old_spellings_run_the_subcommands() {
    let scale = ["--cpus", "2", "--workload", "mprotect_threaded", "--set", "iters=2", "--format", "json"];
    let old = bench_json(&[&["bench"][..], &scale].concat());
    let new = bench_json(&[&["bench", "scale"][..], &scale].concat());
    for k in ["machine", "policy"] {
        assert_eq!(old[k], new[k], "{k}");
    }
    for k in ["workload", "cpus", "events", "translations", "command"] {
        assert_eq!(old["runs"][0][k], new["runs"][0][k], "{k}");
    }
    // The flags in another order, as bench took them.
    let shuffled = bench_json(&[
        "bench",
        "--format",
        "json",
        "--set",
        "iters=2",
        "--cpus",
        "2",
        "--workload",
        "mprotect_threaded",
    ]);
    assert_eq!(shuffled["runs"][0]["command"], new["runs"][0]["command"]);

    let check = ["--policy", "arm64-freebsd-asid", "--jobs", "1", "--format", "json"];
    let old = bench_json(&[&["bench", "--check"][..], &check].concat());
    let new = bench_json(&[&["bench", "check"][..], &check].concat());
    assert_eq!(old["bounds"], new["bounds"]);
    for k in ["policy", "states", "executions", "complete", "violation", "command"] {
        assert_eq!(old["checks"][0][k], new["checks"][0][k], "{k}");
    }
    assert_eq!(new["checks"][0]["violation"], "no_asid_alias");

    // What the old spellings ran, they check as before, in one line.
    assert_bad_input(&["bench", "--cpus", "0"], "--cpus 0 is out of range");
    assert_bad_input(&["bench", "--check", "--pages", "5"], "--pages 5: an address space maps 1 to 4 pages");
    // And what mixes two timings, clap refuses.
    assert_refused(&["bench", "--cpus", "2", "--runs", "3"], "'--cpus <CPUS>' cannot be used with '--runs <RUNS>'");
    assert_refused(&["bench", "--check", "--compare-with", "/bin/true"], "'--check' cannot be used with");
    assert_refused(&["bench", "--check", "--cpus", "2"], "'--check' cannot be used with '--cpus <CPUS>'");
    assert_refused(&["bench", "--workload", "fileserver"], "--cpus <CPUS>");
    assert_refused(&["bench", "--pages", "2"], "--check");
    assert_refused(&["bench", "--policy", "arm64-linux"], "<--cpus <CPUS>|--check>");
}

/// `bench sim --compare-with OTHER` invokes OTHER as `OTHER bench --format
/// json`, which builds from before the subcommands understand too.
#[test]
fn bench_compare_with_invokes_the_other_build_as_bench_format_json() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("tlbkit-cli-compare-with-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("args.log");
    let other = dir.join("tlbkit-other");
    let script =
        format!("#!/bin/sh\necho \"$@\" >> '{}'\necho '{{\"translations_per_sec\": 1000.0}}'\n", log.display());
    std::fs::write(&other, script).unwrap();
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o755)).unwrap();
    let j = bench_json(&["bench", "sim", "--compare-with", other.to_str().unwrap(), "--runs", "2", "--format", "json"]);
    assert_eq!(j["other"]["translations_per_sec_runs"], serde_json::json!([1000.0, 1000.0]), "{j}");
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "bench --format json\nbench --format json\n");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `bench scale --compare-with OTHER` times the same runs with OTHER's `bench
/// scale` (the same arguments, JSON) and gives each run's wall time against
/// it; a build that timed other runs is refused.
#[test]
fn bench_scale_compare_with_times_the_same_runs_with_the_other_build() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("tlbkit-cli-scale-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("args.log");
    let fake = |name: &str, workload: &str| {
        let other = dir.join(name);
        let run = format!("{{\"workload\": \"{workload}\", \"cpus\": 2, \"wall_s\": 1000.0}}");
        let script = format!("#!/bin/sh\necho \"$@\" >> '{}'\necho '{{\"runs\": [{run}]}}'\n", log.display());
        std::fs::write(&other, script).unwrap();
        std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o755)).unwrap();
        other
    };
    let other = fake("tlbkit-other", "mprotect_threaded");
    let args = ["bench", "scale", "--cpus", "2", "--workload", "mprotect_threaded", "--set", "iters=5"];
    let mut with = args.to_vec();
    with.extend(["--compare-with", other.to_str().unwrap(), "--runs", "2", "--format", "json"]);
    let j = bench_json(&with);
    let run = &j["runs"][0];
    assert_eq!(
        (&run["workload"], &run["cpus"]),
        (&serde_json::json!("mprotect_threaded"), &serde_json::json!(2)),
        "{j}"
    );
    assert_eq!(run["other_wall_s"], serde_json::json!([1000.0, 1000.0]), "{j}");
    assert!(run["ratio"].as_f64().unwrap() < 0.01 && run["proven"] == true, "{j}");
    let called = "bench scale --format json --cpus 2 --workload mprotect_threaded --policy arm64-linux --set iters=5\n";
    assert_eq!(std::fs::read_to_string(&log).unwrap(), called.repeat(2));
    let stranger = fake("tlbkit-stranger", "fileserver");
    let n = with.len();
    with[n - 5] = stranger.to_str().unwrap();
    assert_refused(&with, "its runs are not this build's (fileserver at 2 CPUs)");
    with[n - 3] = "1";
    assert_refused(&with, "--runs 2 or more");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn origin004_claims_print_four_strategies_each_with_a_verdict() {
    for (id, origin_ratios) in
        [("origin004-exit-numa1", [2.90, 1.08, 1.21, 1.13]), ("origin004-exit-numa2", [8.68, 1.29, 1.19, 1.09])]
    {
        let html = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("tlbkit-cli-{id}-{}.html", std::process::id()));
        let o = tlbkit(&["reproduce", "--only", id, "--html", html.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let text = String::from_utf8(o.stdout).unwrap();
        let rows: Vec<&str> = text.lines().filter(|l| l.starts_with(id)).collect();
        assert_eq!(rows.len(), 4, "{text}");
        // The HTML page carries every note the table prints: the ones beside a
        // verdict and the lines under the claim's rows.
        let page = std::fs::read_to_string(&html).unwrap();
        std::fs::remove_file(&html).unwrap();
        let escape = |s: &str| s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
        let beside = rows.iter().filter_map(|r| r.split_once(" (").map(|(_, n)| n.trim_end_matches(')')));
        let under = text.lines().filter(|l| l.starts_with(' ')).map(str::trim);
        let notes: Vec<&str> = beside.chain(under).collect();
        assert!(notes.iter().any(|n| n.contains("expected violations of no_ungathered_dirty")), "{text}");
        assert!(notes.iter().any(|n| n.starts_with("ranking accepted as modelled")), "{text}");
        for n in notes {
            assert!(page.contains(&escape(n)), "{n} is not in the HTML page");
        }
        for (row, name) in rows.iter().zip(["noopt", "simple", "robust", "clear_ptes"]) {
            assert!(row.contains(&format!("contpte=on teardown={name} ")), "{row}");
            assert!(["reproduced", "direction-only", "not-reproduced"].iter().any(|v| row.contains(v)), "{row}");
        }
        let c = &claim(id);
        assert_eq!(c["baseline"], "arm64-linux contpte=folios");
        let vs = c["variants"].as_array().unwrap();
        assert_eq!(vs.len(), 4, "{c}");
        let ratio = |i: usize| vs[i]["sim_ratio"].as_f64().unwrap();
        for (v, seed) in vs.iter().zip(origin_ratios) {
            assert!((v["origin_ratio"].as_f64().unwrap() - seed).abs() < 1e-9, "{v}");
        }
        // No-opt's unfold TLBIs make it far the dearest; robust is reproduced on both.
        assert!((1..4).all(|i| ratio(0) > 2.0 * ratio(i)), "{c}");
        assert_eq!(vs[0]["verdict"], "reproduced", "{c}");
        assert_eq!(vs[2]["verdict"], "reproduced", "{c}");
        // Only simple returns values without the block's dirty state, and the
        // claim counts them.
        assert!(vs[1]["expected_violations"].as_u64().unwrap() > 0, "{c}");
        assert!([0, 2, 3].iter().all(|&i| vs[i]["expected_violations"] == 0), "{c}");
    }
    // Claims of one variant keep their JSON: no `variants` key.
    assert!(claim("origin000-latctx").get("variants").is_none());
}

#[test]
fn output_paths_are_checked_before_any_work() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tlbkit-cli-out-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("no/such/dir/out.html");
    let missing = missing.to_str().unwrap();
    let t = std::time::Instant::now();
    assert_bad_input(&["reproduce", "--html", missing], "does not exist");
    // Refused before the claims ran (they take seconds).
    assert!(t.elapsed().as_secs_f64() < 2.0, "took {:?}", t.elapsed());
    assert_bad_input(&["reproduce", "--html", dir.to_str().unwrap()], "is a directory");
    let results = dir.join("r.jsonl");
    std::fs::write(&results, "").unwrap();
    assert_bad_input(&["report", results.to_str().unwrap(), "-o", missing], "does not exist");
    let png = dir.join("no/x.png");
    assert_bad_input(
        &["plot", results.to_str().unwrap(), "--x", "cpus", "--y", "us", "-o", png.to_str().unwrap()],
        "does not exist",
    );
    let sweep = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sweep-asid.toml");
    assert_bad_input(&["sweep", sweep, "--results", missing], "does not exist");
    let lackey = dir.join("lackey.log");
    std::fs::write(&lackey, "").unwrap();
    assert_bad_input(&["trace", "import", "--lackey", lackey.to_str().unwrap(), "-o", missing], "does not exist");
    // Nothing was left behind: no probe files, no partial outputs.
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), 2, "{left:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn cpus_beyond_a_presets_cores_are_refused_with_its_maximum() {
    assert_bad_input(&refs(&with("2", "17")), "--cpus 17: cortex-a72 has 16 cores (1 socket of 16)");
    assert_bad_input(&refs(&with("2", "17")), "--set sockets=2");
    // A larger machine of the same sockets is there when asked for.
    let mut v = with("2", "17");
    v.extend(["--set".to_string(), "sockets=2".to_string(), "--set".to_string(), "rounds=3".to_string()]);
    let o = tlbkit(&refs(&v));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_bad_input(&refs(&with("procs=6", "sockets=0")), "--set sockets=0 is out of range for cortex-a72");
}

fn list_json(what: &str) -> serde_json::Value {
    let o = tlbkit(&["list", what, "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn list_metrics_describes_every_figure_a_run_reports() {
    let m = list_json("metrics");
    let described: Vec<&str> = m.as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    for e in m.as_array().unwrap() {
        assert!(!e["unit"].as_str().unwrap().is_empty() && e["meaning"].as_str().unwrap().len() > 10, "{e}");
    }
    // Every result and metric of a real run, contpte metrics included.
    let mut run: Vec<&str> = RUN.to_vec();
    run.extend(["--set", "jitter=0"]);
    for args in [
        run,
        vec![
            "run",
            "--machine",
            "altra",
            "--cpus",
            "2",
            "--policy",
            "arm64-linux",
            "--workload",
            "exit_teardown",
            "--set",
            "contpte=on",
            "--set",
            "jobs=1",
            "--format",
            "json",
        ],
    ] {
        let o = tlbkit(&args);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        for part in ["result", "metrics"] {
            for k in j[part].as_object().unwrap().keys() {
                assert!(described.contains(&k.as_str()), "{part} {k} is not described by `tlbkit list metrics`");
            }
        }
    }
}

#[test]
fn list_workloads_gives_every_parameter_with_default_range_and_meaning() {
    let w = list_json("workloads");
    let all = w["workloads"].as_array().unwrap();
    assert_eq!(all.len(), tlbkit_sim::workload::WORKLOADS.len());
    for (def, j) in tlbkit_sim::workload::WORKLOADS.iter().zip(all) {
        assert_eq!(j["name"], def.name);
        assert_eq!(j["headline"], def.results[0]);
        let params = j["parameters"].as_array().unwrap();
        for p in def.params {
            let e = params.iter().find(|e| e["key"] == p.key).unwrap_or_else(|| panic!("{}: {}", def.name, p.key));
            assert_eq!(
                (e["default"].as_f64(), e["min"].as_f64(), e["max"].as_f64()),
                (Some(p.default), Some(p.min), Some(p.max))
            );
            assert_eq!(e["meaning"], p.doc);
        }
    }
    let trace = all.iter().find(|w| w["name"] == "trace").unwrap();
    assert!(trace["parameters"].as_array().unwrap().iter().any(|p| p["key"] == "file" && p["required"] == true));
    // Machines: cores, costs and where the costs come from; the machine parameters.
    let m = list_json("machines");
    let a72 = m["machines"].as_array().unwrap().iter().find(|p| p["name"] == "cortex-a72").unwrap();
    assert_eq!((a72["cores"].as_u64(), a72["cost_sources"].as_str()), (Some(16), Some("docs/costs/cortex-a72.md")));
    assert!(a72["costs_cycles"]["switch_path"].as_u64().is_some());
    // The costs that rest on one weak source, with the metric of the
    // operations that pay them: every estimate names real costs (or, as
    // `smt_share`, a field of the machine) and a metric.
    let est = &a72["estimates"][0];
    assert_eq!(est["used_when"], "broadcast_invalidations", "{a72}");
    assert!(est["why"].as_str().unwrap().contains("unnamed Arm server"), "{a72}");
    for p in m["machines"].as_array().unwrap() {
        for e in p["estimates"].as_array().unwrap() {
            assert!(tlbkit_sim::metrics::by_name(e["used_when"].as_str().unwrap()).is_some(), "{e}");
            for c in e["costs"].as_str().unwrap().split(", ") {
                assert!(p["costs_cycles"].get(c).or(p.get(c)).is_some(), "{}: no cost {c}", p["name"]);
            }
        }
    }
    for p in m["machines"].as_array().unwrap() {
        let doc = format!("{}/{}", env!("CARGO_MANIFEST_DIR"), p["cost_sources"].as_str().unwrap());
        assert!(std::path::Path::new(&doc).exists(), "{doc}");
    }
    assert!(m["parameters"].as_array().unwrap().iter().any(|p| p["key"] == "sockets"));
    let text = String::from_utf8_lossy(&tlbkit(&["list", "workloads"]).stdout).into_owned();
    assert!(text.contains("  procs           20  2 to 4096    processes in the ring"), "{text}");
}

#[test]
fn completions_and_the_man_page_come_from_the_cli_definition() {
    for shell in ["bash", "zsh", "fish"] {
        let o = tlbkit(&["completions", shell]);
        assert_eq!(o.status.code(), Some(0), "{shell}: {}", stderr(&o));
        let s = String::from_utf8_lossy(&o.stdout).into_owned();
        for sub in ["reproduce", "check", "replay", "sweep"] {
            assert!(s.contains(sub), "{shell} completion lacks {sub}");
        }
    }
    let o = tlbkit(&["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("invalid value 'tcsh'"), "{}", stderr(&o));
    let man = String::from_utf8_lossy(&tlbkit(&["man"]).stdout).into_owned();
    assert!(man.contains(".TH tlbkit 1"), "{man}");
    assert!(man.contains("tlbkit\\-check"), "{man}");
    let help = String::from_utf8_lossy(&tlbkit(&["run", "--help"]).stdout).into_owned();
    assert!(help.contains("tlbkit list workloads") && help.contains("tlbkit list metrics"), "{help}");
}

#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    use std::process::Stdio;
    let mut c = Command::new(env!("CARGO_BIN_EXE_tlbkit"))
        .args(["list", "machines"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tlbkit");
    // Close the reading end before tlbkit writes, as a pager that quits does.
    drop(c.stdout.take());
    let o = c.wait_with_output().unwrap();
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    assert_ne!(o.status.code(), Some(101));
}

/// The worked example of a policy of one's own (examples/my-policy), registered
/// by one entry: it runs, compares and is checked like any other policy.
#[test]
fn the_worked_example_policy_runs_compares_and_is_checked() {
    let run = |policy: &str| -> serde_json::Value {
        let o = tlbkit(&[
            "run",
            "--machine",
            "emag",
            "--cpus",
            "2",
            "--policy",
            policy,
            "--workload",
            "mprotect_threaded",
            "--set",
            "iters=5",
            "--strict",
            "--format",
            "json",
        ]);
        assert_eq!(o.status.code(), Some(0), "{policy}: {}", stderr(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let (base, mine) = (run("arm64-freebsd-asid-fix-reserved-ttbr0"), run("arm64-freebsd-asid-activecpu"));
    assert_eq!(mine["violations"].as_array().map(Vec::len), Some(0), "{mine}");
    // Each copy's process runs on one CPU (a migration aside): its flushes stay there.
    let count = |j: &serde_json::Value, k: &str| j["metrics"][k].as_u64().unwrap();
    let (local, bcast) = (count(&mine, "local_invalidations"), count(&mine, "broadcast_invalidations"));
    assert!(count(&base, "broadcast_invalidations") > 0 && count(&base, "local_invalidations") == 0, "{base}");
    assert_eq!(local + bcast, count(&base, "broadcast_invalidations"), "{mine}");
    assert!(local > 100 * bcast, "{mine}");
    let o = tlbkit(&[
        "compare",
        "--machine",
        "emag",
        "--cpus",
        "2",
        "--workload",
        "mprotect_threaded",
        "--set",
        "iters=5",
        "--policy",
        "arm64-freebsd-asid-fix-reserved-ttbr0",
        "--policy",
        "arm64-freebsd-asid-activecpu",
        "--runs",
        "3",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("+ arm64-freebsd-asid-activecpu"));
    // Checked as any policy is (the default portfolio, with each of the
    // example's mistakes too: crates/check/tests/example.rs).
    let o = tlbkit(&["check", "--policy", "arm64-freebsd-asid-activecpu", "--quick"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("result: no violation"));
}

#[test]
fn a_bad_tlb_mode_word_says_what_the_bits_are() {
    let run = |policy: &str, word: &str| {
        let set = format!("tlb_mode={word}");
        let args = ["run", "--machine", "ampereone", "--cpus", "4", "--policy", policy, "--workload", "lat_mmap"];
        let mut v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        v.extend(["--set".to_string(), set, "--set".to_string(), "iters=2".to_string()]);
        v
    };
    let bad = |policy: &str, word: &str, needle: &str| {
        let v = run(policy, word);
        assert_bad_input(&v.iter().map(String::as_str).collect::<Vec<_>>(), needle);
    };
    bad("arm64-linux-tlbmode", "0x800", "give range TLBIs (bit 11) as tlbi_range=on");
    bad("arm64-linux-tlbmode", "abc", "give the mode word as a number, decimal or 0x hex");
    bad("arm64-linux", "3", "--set tlb_mode applies to arm64-linux-tlbmode, arm64-linux-tlbmode-fix-wmb only");
    let v = run("arm64-linux-tlbmode", "0x1403");
    let o = tlbkit(&v.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("tlb_mode=0x1403"));
}

#[test]
fn bench_sim_runs_and_compare_with_bad_values_are_one_line_and_exit_2() {
    assert_bad_input(&["bench", "sim", "--runs", "0"], "--runs 0 times nothing");
    assert_bad_input(&["bench", "sim", "--compare-with", "/bin/true", "--runs", "1"], "needs --runs 2 or more");
    assert_bad_input(&["bench", "sim", "--runs", "1000000000"], "--runs 1000000000: give at most 1000");
    assert_bad_input(
        &["bench", "scale", "--cpus", "4", "--compare-with", "/bin/true", "--runs", "1000000000"],
        "--runs 1000000000: give at most 1000",
    );
    assert_bad_input(&["bench", "--runs", "1000000000"], "--runs 1000000000: give at most 1000");
    assert_bad_input(&["bench", "sim", "--compare-with", "/nonexistent/tlbkit"], "no such file");
    // bench alone is bench sim, and checks the same.
    assert_bad_input(&["bench", "--runs", "0"], "--runs 0 times nothing");
}

const LITMUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/crates/check/litmus/vmsa");

#[test]
fn litmus_agrees_with_every_published_verdict_or_names_the_difference() {
    let out = tlbkit(&["litmus", "--format", "json", LITMUS]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["disagreements"], 0);
    let tests = j["tests"].as_array().unwrap();
    assert!(tests.len() >= 60, "{} tests", tests.len());
    for t in tests {
        for k in ["test", "file", "tlbkit", "published", "comparison", "reason", "states"] {
            assert!(t.get(k).is_some(), "missing {k} in {t}");
        }
        let known = t["comparison"].as_str().unwrap().starts_with("known");
        assert_eq!(known, t["reason"].is_string(), "{t}");
    }
}

#[test]
fn litmus_exits_3_on_a_verdict_the_published_results_contradict() {
    // The published test forbids a stale read after TLBI; DSB; ISB. Without the
    // ISB tlbkit allows it, under the same name: an unlisted disagreement.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tlbkit-litmus-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = std::fs::read_to_string(format!("{LITMUS}/CoWinvT.EL1+dsb-tlbi-dsb-isb.litmus.toml")).unwrap();
    let path = dir.join("no-isb.litmus.toml");
    std::fs::write(&path, text.replacen("    ISB\n", "", 1)).unwrap();
    let out = tlbkit(&["litmus", path.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(3), "{stdout}{}", stderr(&out));
    assert!(stdout.contains("DISAGREE"), "{stdout}");
    // A line tlbkit cannot read: exit 2, the file and line named.
    let bad = dir.join("bad.litmus.toml");
    std::fs::write(&bad, text.replacen("    ISB\n", "    HVC #0\n", 1)).unwrap();
    let out = tlbkit(&["litmus", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("bad.litmus.toml:") && err.contains("'HVC #0'") && err.contains("outside the subset"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// `--machine PATH.toml`: a partial machine file runs as its base with the
/// fields it sets, and a bad one is refused with what to change.
#[test]
fn a_machine_file_runs_as_its_base_with_the_fields_it_changes() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("tlbkit-cli-machine-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("a72-slow-switch.toml");
    std::fs::write(
        &file,
        "name = \"a72-slow-switch\"\nbase = \"cortex-a72\"\n[costs_cycles]\n\
         switch_path = { value = 56000, estimate = \"ten times the preset's, to see what it moves\" }\n",
    )
    .unwrap();
    let run = |machine: &str| {
        let args: Vec<&str> = RUN.iter().map(|a| if *a == "cortex-a72" { machine } else { a }).collect();
        let o = tlbkit(&args);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        String::from_utf8(o.stdout).unwrap()
    };
    let (preset, own) = (run("cortex-a72"), run(file.to_str().unwrap()));
    let json = |s: &str| serde_json::from_str::<serde_json::Value>(s).unwrap();
    let (preset, own_doc) = (json(&preset), json(&own));
    // The run names the file, so that its replay command reads the same machine.
    assert_eq!(own_doc["machine"].as_str(), file.to_str(), "{own}");
    let switch = |d: &serde_json::Value| d["result"]["us_per_switch"].as_f64().unwrap();
    assert!(switch(&own_doc) > 5.0 * switch(&preset), "a slower switch path shows in the times: {own}");
    // The same file gives the same output twice.
    assert_eq!(own, run(file.to_str().unwrap()));
    std::fs::write(&file, "name = \"x\"\nbase = \"cortex-a72\"\n[costs_cycles]\ndvm_hopp = 3\n").unwrap();
    let args: Vec<&str> = RUN.iter().map(|a| if *a == "cortex-a72" { file.to_str().unwrap() } else { a }).collect();
    let o = tlbkit(&args);
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("unknown field 'costs_cycles.dvm_hopp' (did you mean 'dvm_hop'?)"), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&dir);
}
