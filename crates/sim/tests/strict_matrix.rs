//! The acceptance matrix: every registered policy runs every registered
//! workload at 2, 4 and 32 CPUs with migration on and no violation under
//! `--strict`.
//!
//! Each workload runs with parameters small enough for the test profile but large
//! enough to reach what it is there for (see [`SMALL`]); the arm64 machine runs
//! with 8-bit ASIDs so that the ASID allocators roll over, and every run raises
//! speculative fills to one operation in five. Cells run through
//! [`tlbkit_sim::run::run`], as `tlbkit run` does, and a failing cell names the
//! `tlbkit run` command that replays it. One test per policy, so the harness runs
//! them in parallel and a failure says which policy broke.
//!
//! This is random exploration of a few schedules per cell (one seed, a fixed
//! interleaving of atomic policy calls), not a proof: the checker explores
//! interleavings inside policy code.
//!
//! Every cell's result is also frozen: the JSON `tlbkit run --format json` prints
//! for it (with this crate's directory, which a trace cell's path names, written
//! as `$CRATE`) is hashed (FNV-1a, 64 bits) into one digest per policy, compared
//! with `tests/data/strict_matrix.digest`. A change to the simulator that moves
//! any cell's result, a TLB hit or an LRU victim included, fails here; a change
//! meant to move them regenerates the file with
//! `TLBKIT_BLESS=1 cargo test -p tlbkit-sim --test sim strict_matrix` and shows it in
//! the diff. To see *what* moved, run the test before and after the change with
//! `TLBKIT_MATRIX_DUMP=DIR`, which also writes every cell's JSON to
//! `DIR/POLICY/NN-WORKLOAD-CPUS.json`, and compare the two directories
//! (`diff -r`).
//!
//! One workload flushes a range of an mm that an idle CPU still has loaded (the
//! `trace` workload's threads wait, idle, while another thread of their process
//! unmaps). Linux x86 skips such lazy CPUs on purpose, and the oracle does not
//! judge a lazy CPU's leaf entries
//! ([`a_lazy_x86_linux_cpu_holding_what_a_skipped_flush_removed_is_no_violation`]),
//! so those cells are clean too.

use tlbkit_policy::asid::{FreebsdX86, LinuxArm64, LinuxX86};
use tlbkit_policy::shootdown::Completion;
use tlbkit_policy::Policy;
use tlbkit_registry::{self as registry, Os, POLICIES};
use tlbkit_sim::oracle::Violation;
use tlbkit_sim::preset::{self, Arch, Preset};
use tlbkit_sim::program::{Op, Program, Sys};
use tlbkit_sim::run::{run, RunOutput, RunSpec};
use tlbkit_sim::sim::SimConfig;
use tlbkit_sim::workload::WORKLOADS;

use crate::common::cells::{spec, CONFIGS};
use crate::common::cores::on_host_cores;
use crate::common::{run_alone, small};
use small::SMALL;

/// The CPU counts the issue names.
const CPUS: [usize; 3] = [2, 4, 32];

/// A third configuration for the policies that take `kpti` (the arm64 Linux
/// ones): half the ASIDs, each mm using a pair.
const KPTI: (u64, &[&str]) = (13, &["kpti=on"]);

/// A fourth for the same policies: range invalidation (`FEAT_TLBIRANGE`), so
/// that every user and kernel range goes through range operations.
const TLBI_RANGE: (u64, &[&str]) = (14, &["tlbi_range=on"]);

/// Returns what a cell failed to reach that its parameters are chosen for: a
/// rollover of every arm64 ASID allocator with 300 live processes, of Linux's
/// never-freed ASIDs with 320 short-lived sorts, and remote invalidations of
/// the kernel map.
fn unreached(s: &RunSpec, out: &RunOutput) -> Option<String> {
    let m = &out.metrics;
    let asids = [
        "arm64-freebsd-asid",
        "arm64-linux",
        "arm64-linux-skipbcast",
        "arm64-linux-activecpu",
        "arm64-linux-tlbmode",
        "arm64-linux-tlbmode-fix-wmb",
    ]
    .contains(&s.policy.as_str());
    let linux_asids = registry::policy(&s.policy).is_some_and(|p| p.arch == Arch::Arm64 && p.os == Os::Linux);
    let missing = match s.workload.as_str() {
        "lat_ctx" if asids && m.asid_rollovers == 0 => "an ASID rollover",
        "sort_compute" if linux_asids && m.asid_rollovers == 0 => "an ASID rollover",
        "fileserver" | "stress" if m.ipi.ipis_sent + m.broadcast_invalidations == 0 => "a remote invalidation",
        _ => return None,
    };
    Some(format!("{}\n    reached no {missing}: {m:?}", s.command()))
}

/// Returns what is wrong with one cell's run, if anything.
fn judge(s: &RunSpec, out: Result<RunOutput, tlbkit_sim::Error>) -> Option<String> {
    let out = match out {
        Ok(o) => o,
        Err(e) => return Some(format!("{}\n    failed: {e}", s.command())),
    };
    if out.violations_total > 0 {
        let first: Vec<String> = out.violations.iter().take(3).map(|v| format!("    {v:?}")).collect();
        return Some(format!("{}\n    {} violation(s):\n{}", s.command(), out.violations_total, first.join("\n")));
    }
    let headline = WORKLOADS.iter().find(|w| w.name == s.workload).map(|w| w.results[0])?;
    match out.result.get(headline) {
        Some(v) if v.is_finite() && *v > 0.0 => unreached(s, &out),
        v => Some(format!("{}\n    {headline} = {v:?}", s.command())),
    }
}

/// The checked-in digests of every policy's cells (see the module's comment).
const DIGESTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/strict_matrix.digest");

/// FNV-1a, 64 bits: the digest of a run's JSON, folded over a policy's cells.
fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// FNV-1a's offset basis.
const FNV_BASIS: u64 = 0xcbf2_9ce4_8422_2325;

/// Returns the JSON `tlbkit run --format json` prints for `out`, with this
/// crate's directory written as `$CRATE` so that every checkout hashes alike.
fn frozen_json(out: &RunOutput) -> String {
    let json = serde_json::to_string_pretty(out).expect("a run's output serialises");
    json.replace(env!("CARGO_MANIFEST_DIR"), "$CRATE")
}

/// Runs every cell of `policy`'s matrix; returns the failures, the cell count
/// and the digest of every cell's result (see the module's comment).
fn check_policy(policy: &str) -> (Vec<String>, usize, u64) {
    let mut configs = CONFIGS.to_vec();
    let switches = registry::policy(policy).expect("a registered policy").switches;
    if switches.kpti {
        configs.push(KPTI);
    }
    if switches.tlbi_range {
        configs.push(TLBI_RANGE);
    }
    let mut failures = Vec::new();
    let mut cells = 0;
    let mut digest = FNV_BASIS;
    let dump = std::env::var_os("TLBKIT_MATRIX_DUMP").map(|d| std::path::PathBuf::from(d).join(policy));
    if let Some(d) = &dump {
        std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("TLBKIT_MATRIX_DUMP: cannot create {}: {e}", d.display()));
    }
    for &config in &configs {
        for &(workload, sets) in SMALL {
            for cpus in CPUS {
                let s = spec(policy, workload, cpus, sets, config);
                let out = run(&s);
                let text = match &out {
                    Ok(o) => frozen_json(o),
                    Err(e) => e.to_string(),
                };
                digest = fnv1a(digest, text.as_bytes());
                if let Some(d) = &dump {
                    let file = d.join(format!("{cells:02}-{workload}-{cpus}.json"));
                    std::fs::write(&file, &text).unwrap_or_else(|e| panic!("cannot write {}: {e}", file.display()));
                }
                failures.extend(judge(&s, out));
                cells += 1;
            }
        }
    }
    (failures, cells, digest)
}

/// Compares `policy digest` lines with [`DIGESTS`], or rewrites it under
/// `TLBKIT_BLESS=1`; returns what differs.
fn compare_digests(got: &[(&str, u64)]) -> String {
    let text: String = got.iter().map(|(p, d)| format!("{p} {d:016x}\n")).collect();
    if std::env::var_os("TLBKIT_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(DIGESTS, &text).expect("write the strict matrix's digests");
        return String::new();
    }
    let want = std::fs::read_to_string(DIGESTS).unwrap_or_default();
    let want: Vec<&str> = want.lines().collect();
    let mut report = String::new();
    for line in text.lines() {
        if !want.contains(&line) {
            let p = line.split(' ').next().unwrap_or(line);
            let was = want.iter().find(|w| w.split(' ').next() == Some(p)).copied().unwrap_or("(none)");
            report.push_str(&format!("{p}: results changed: digest now {line}, checked in {was}\n"));
        }
    }
    if want.len() != got.len() {
        report.push_str(&format!("{} digests checked in, {} policies run\n", want.len(), got.len()));
    }
    report
}

#[test]
fn matrix_covers_every_registered_workload() {
    let tested: Vec<&str> = SMALL.iter().map(|w| w.0).collect();
    let registered: Vec<&str> = WORKLOADS.iter().map(|w| w.name).collect();
    assert_eq!(tested, registered, "give every registered workload small parameters in SMALL, in registry order");
}

/// Every registered policy, a policy of one's own included, with no list to keep:
/// the policies run on the host's cores, one thread each at a time.
#[test]
fn every_registered_policy_is_clean_under_strict_everywhere() {
    let results = on_host_cores(POLICIES, |p| (p.name, check_policy(p.name)));
    let mut report = String::new();
    for (name, (failures, cells, _)) in &results {
        if !failures.is_empty() {
            report.push_str(&format!("{name}: {} of {cells} runs failed:\n{}\n", failures.len(), failures.join("\n")));
        }
    }
    assert_eq!(results.len(), POLICIES.len());
    assert!(report.is_empty(), "{report}");
    let digests: Vec<(&str, u64)> = results.iter().map(|(name, (_, _, d))| (*name, *d)).collect();
    let changed = compare_digests(&digests);
    assert!(
        changed.is_empty(),
        "{changed}a change to the simulator moved these results; if that is meant, rerun with TLBKIT_BLESS=1 \
         and explain the new digests in the commit"
    );
}

/// FreeBSD x86 hands out 4095 PCIDs per CPU per generation, so the matrix's
/// cells never start a new one; 4096 sorts (fork and exec each) on 2 CPUs do.
#[test]
fn x86_freebsd_pcid_generations_roll_over_cleanly_under_strict() {
    let sets = ["loops=64", "runs=64", "heap_pages=4", "compute_us=5"];
    let mut failures = Vec::new();
    for policy in ["x86-freebsd-counter", "x86-freebsd-gen", "x86-freebsd-scoreboard"] {
        let s = spec(policy, "sort_compute", 2, &sets, CONFIGS[0]);
        let out = run(&s);
        if let Ok(o) = &out {
            if o.metrics.asid_rollovers == 0 {
                failures.push(format!("{}\n    no PCID generation rolled over", s.command()));
            }
        }
        failures.extend(judge(&s, out));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A process's first thread: writes a page of a fresh mapping, starts a second
/// thread (which lands on the idle CPU), sleeps on a pipe until that thread has
/// made the page read-only, then reads the page.
struct Sleeper {
    step: u32,
    buf: u64,
    pipe: u32,
}

impl Program for Sleeper {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        match self.step {
            1 => Op::Sys(Sys::Mmap { pages: 1, write: true }),
            2 => {
                self.buf = ret;
                Op::Touch { va: self.buf, pages: 1, write: true }
            }
            3 => Op::Sys(Sys::Pipe),
            4 => {
                self.pipe = ret as u32;
                Op::Sys(Sys::Clone(Box::new(Protector { step: 0, buf: self.buf, pipe: self.pipe })))
            }
            5 => Op::Sys(Sys::PipeRead(self.pipe)),
            6 => Op::Touch { va: self.buf, pages: 1, write: false },
            _ => Op::Exit,
        }
    }
}

/// The second thread: once the first sleeps, write-protects the page and wakes it.
struct Protector {
    step: u32,
    buf: u64,
    pipe: u32,
}

impl Program for Protector {
    fn next(&mut self, _ret: u64) -> Op {
        self.step += 1;
        match self.step {
            1 => Op::Compute(100_000),
            2 => Op::Sys(Sys::Mprotect { va: self.buf, pages: 1, write: false }),
            3 => Op::Sys(Sys::PipeWrite(self.pipe)),
            _ => Op::Exit,
        }
    }
}

/// Runs [`Sleeper`] on 2 CPUs of `preset` without speculation or migration, under
/// `--strict`, and returns the violations and how many stale or foreign leaf
/// entries lazy CPUs held unjudged.
fn leave_cpu_idle_on_flushed_mm<P: Policy + 'static>(preset: Preset, policy: P) -> (Vec<Violation>, u64) {
    let cfg = SimConfig { strict: true, max_mms: 4, max_events: 10_000, ..SimConfig::quiet(preset, 2, 1) };
    let sim = run_alone(cfg, policy, Box::new(Sleeper { step: 0, buf: 0, pipe: 0 }));
    assert!(sim.error.is_none(), "{:?}", sim.error);
    assert_eq!(sim.live_threads(), 0);
    (sim.oracle.violations.clone(), sim.oracle.lazy_exempt)
}

/// Linux x86 sends a flush without freed page tables only to the CPUs of
/// `mm_cpumask` that are not lazy (`native_flush_tlb_multi`: "they will flush the
/// CPU themselves at the next context switch"). A CPU that went idle from the mm
/// keeps its CR3 and PCID, so after an `mprotect` on another CPU it holds the old
/// writable entry under the tag it runs with until it switches back, when the
/// `tlb_gen` check flushes it. The oracle does not judge a lazy CPU's leaf
/// entries: no violation, but the held entries are counted, and the
/// scan after the switch back finds nothing because the catch-up flush removed
/// them. FreeBSD x86 has no lazy mode (idle switches to `vmspace0`'s pmap) and
/// origin 001 installs the reserved TTBR0 when it goes lazy, so neither holds
/// anything to exempt. The other side of the rule, a lazy CPU's walk through a
/// freed page-table page, is pinned in `crates/sim/src/sim/tests.rs`.
#[test]
fn a_lazy_x86_linux_cpu_holding_what_a_skipped_flush_removed_is_no_violation() {
    for pcid in [true, false] {
        let (v, exempt) = leave_cpu_idle_on_flushed_mm(preset::named("westmere"), LinuxX86::new(2, 4, pcid));
        assert!(v.is_empty(), "pcid {pcid}: {v:#?}");
        assert!(exempt > 0, "pcid {pcid}: the lazy CPU held nothing stale");
    }
    let (v, exempt) =
        leave_cpu_idle_on_flushed_mm(preset::named("westmere"), FreebsdX86::new(2, 4, Completion::Generation));
    assert!(v.is_empty() && exempt == 0, "{exempt} {v:#?}");
    let (v, exempt) =
        leave_cpu_idle_on_flushed_mm(preset::named("emag"), LinuxArm64::with_skip_broadcast(2, 4, 16, false).unwrap());
    assert!(v.is_empty() && exempt == 0, "{exempt} {v:#?}");
}
