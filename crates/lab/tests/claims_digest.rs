//! The results of every `tlbkit reproduce` claim, frozen: each run a claim makes
//! (its baseline and each variant, seed 1, as [`tlbkit_lab::claims::check`] runs
//! them) is serialised as `tlbkit run --format json` prints it and hashed
//! (FNV-1a, 64 bits), one line per run, and compared with a checked-in file. A
//! change to the simulator that moves any result, a TLB hit count or an LRU
//! victim included, fails here.
//!
//! Two tests, one file each under `tests/data/`:
//!
//! - [`claims_at_reduced_parameters_match_their_digests`] (the default suite):
//!   every claim's runs, on the claim's machine, CPUs, policies and settings, with
//!   the workload's amount of work cut by [`REDUCED`] so that the test profile
//!   runs them all in a minute or two;
//! - [`claims_at_full_parameters_match_their_digests`] (`#[ignore]`d: minutes in
//!   release): the claims exactly as `tlbkit reproduce` runs them. Run it with
//!   `cargo test --release -p tlbkit-lab --test claims_digest -- --ignored`.
//!
//! `TLBKIT_BLESS=1` rewrites the files from the runs (a change meant to move
//! results shows the new digests in its diff).

use tlbkit_lab::claims::{Claim, CLAIMS};
use tlbkit_sim::run::{run, RunSpec};

/// Settings appended to a claim's runs in the default suite, by workload: the
/// same code paths with less work (later settings win).
const REDUCED: &[(&str, &[&str])] = &[
    ("lat_ctx", &["rounds=5"]),
    ("buildkernel", &["units=2", "compute_ms=1"]),
    ("mprotect_threaded", &["iters=50"]),
    ("tcmalloc_frag", &["allocs=100"]),
    ("sort_compute", &["runs=4", "compute_us=5"]),
    ("pingpong", &["rounds=100"]),
    ("fileserver", &["ops=50"]),
    ("exit_teardown", &["heap_pages=64", "file_pages=32", "dirty_pages=16", "compute_us=20"]),
];

/// FNV-1a, 64 bits.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Returns the runs `claims::check` makes for `c` (seed 1, as `tlbkit
/// reproduce`), each with `extra` appended to its settings.
fn runs_of(c: &Claim, extra: &[&str]) -> Vec<RunSpec> {
    let spec = |policy: &str, own: &[&str]| RunSpec {
        machine: c.machine.into(),
        cpus: c.cpus,
        policy: policy.into(),
        workload: c.workload.into(),
        sets: c.sets.iter().chain(own).chain(extra).map(|s| s.to_string()).collect(),
        seed: 1,
        strict: false,
    };
    if c.variants.is_empty() {
        vec![spec(c.baseline, &[]), spec(c.variant, &[])]
    } else {
        let mut v = vec![spec(c.baseline, c.baseline_sets)];
        v.extend(c.variants.iter().map(|x| spec(c.variant, x.sets)));
        v
    }
}

/// Runs every claim's runs (with `reduced`'s settings added where given) on the
/// host's cores; returns one `claim run# digest` line per run, in claim order.
fn digest_lines(reduced: bool) -> Vec<String> {
    let mut jobs = Vec::new();
    for c in CLAIMS {
        let extra: &[&str] =
            if reduced { REDUCED.iter().find(|(w, _)| *w == c.workload).map_or(&[], |(_, s)| s) } else { &[] };
        for (i, s) in runs_of(c, extra).into_iter().enumerate() {
            jobs.push((format!("{} {i}", c.id), s));
        }
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let lines = std::sync::Mutex::new(vec![String::new(); jobs.len()]);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|sc| {
        for _ in 0..threads {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((name, s)) = jobs.get(i) else { break };
                let out = run(s).unwrap_or_else(|e| panic!("{name}: `{}` failed: {e}", s.command()));
                let json = serde_json::to_string_pretty(&out).expect("a run's output serialises");
                lines.lock().unwrap()[i] = format!("{name} {:016x}", fnv1a(json.as_bytes()));
            });
        }
    });
    lines.into_inner().unwrap()
}

/// Compares the runs' digests with `file` under `tests/data/` (or rewrites it
/// under `TLBKIT_BLESS=1`) and panics with every line that differs.
fn check(file: &str, reduced: bool) {
    let path = format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
    let got = digest_lines(reduced);
    let text: String = got.iter().map(|l| format!("{l}\n")).collect();
    if std::env::var_os("TLBKIT_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, text).expect("write the claims' digests");
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    let differ: Vec<String> = got
        .iter()
        .zip(want.lines().chain(std::iter::repeat("(none)")))
        .filter(|(g, w)| g != w)
        .map(|(g, w)| format!("  now {g}, checked in {w}"))
        .collect();
    assert!(
        differ.is_empty() && want.lines().count() == got.len(),
        "claim results changed ({file}):\n{}\nif that is meant, rerun with TLBKIT_BLESS=1 and explain it in the commit",
        differ.join("\n")
    );
}

#[test]
fn claims_at_reduced_parameters_match_their_digests() {
    check("claims_reduced.digest", true);
}

#[test]
#[ignore = "minutes in release: cargo test --release -p tlbkit-lab --test claims_digest -- --ignored"]
fn claims_at_full_parameters_match_their_digests() {
    check("claims_full.digest", false);
}
