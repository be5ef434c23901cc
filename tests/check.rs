//! `tlbkit check` and `tlbkit replay` on the command line: verdicts and exit
//! codes, counterexamples and their tokens, every violation, bad input in
//! one line, an interrupted check.

use crate::common::{assert_bad_input, stderr, tlbkit, tlbkit_json};
use std::process::Command;

#[test]
fn check_finds_a_zoo_bug_exits_3_and_replay_prints_the_same_trace() {
    let o = tlbkit(&["check", "--policy", "zoo/linux-x86-8f1d56f64f8d"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    for needle in ["properties: no_stale_use, no_asid_alias, no_stale_held, no_reuse_while_mapped", "VIOLATION"] {
        assert!(out.contains(needle), "{needle}: {out}");
    }
    let token = out.lines().find_map(|l| l.strip_prefix("replay: tlbkit replay ")).expect("a replay line");
    let trace = |s: &str| -> String {
        let from = s.find("counterexample (").expect("a counterexample");
        s[from..].to_string()
    };
    let r = tlbkit(&["replay", token]);
    assert_eq!(r.status.code(), Some(3), "{}", stderr(&r));
    assert_eq!(trace(&String::from_utf8_lossy(&r.stdout)), trace(&out));
    // The same check twice prints the same report, byte for byte.
    let again = tlbkit(&["check", "--policy", "zoo/linux-x86-8f1d56f64f8d"]);
    assert_eq!(again.stdout, o.stdout);
}

#[test]
fn all_violations_lists_each_class_with_a_token_and_refuses_jobs() {
    let args = ["check", "--policy", "arm64-freebsd-asid", "--cpus", "2", "--ops", "3", "--pages", "1"];
    let o = tlbkit(&[&args[..], &["--mode", "exhaustive", "--all-violations", "--format", "json"]].concat());
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let found = v["violations"].as_array().expect("a violations list");
    assert!(!found.is_empty() && v["complete"] == true, "{v}");
    for f in found {
        assert!(f["class"].as_str().is_some_and(|c| c.contains(": ")), "{f}");
        assert!(f["executions"].as_u64().is_some_and(|n| n >= 1), "{f}");
        let token = f["counterexample"]["token"].as_str().expect("a token");
        assert_eq!(tlbkit(&["replay", token]).status.code(), Some(3), "{token} replays its violation");
    }
    assert_eq!(v["counterexample"], found[0]["counterexample"]);
    // A parallel search stops at its first violation: refused, with why.
    let o = tlbkit(&[&args[..], &["--all-violations", "--jobs", "2"]].concat());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--jobs"), "{}", stderr(&o));
    // Without it, the report has no such list.
    let o = tlbkit(&[&args[..], &["--mode", "exhaustive", "--format", "json"]].concat());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert!(v.get("violations").is_none(), "{v}");
}

#[test]
fn a_counterexample_reads_in_kernel_terms_in_under_40_lines() {
    // One shape (`--cpus 2`: the entry's own smallest shape), so that the
    // report is the counterexample alone, not the portfolio's list of shapes.
    let o = tlbkit(&["check", "--policy", "zoo/linux-arm64-a8ffaaa060b8", "--cpus", "2"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    // The line naming the zoo entry it re-introduces (`known:`) is not the
    // counterexample's own.
    assert!(out.contains("\n  known: zoo/linux-arm64-a8ffaaa060b8, "), "{out}");
    let total = out.lines().filter(|l| !l.starts_with("  known: ")).count() + stderr(&o).lines().count();
    assert!(total < 40, "{total} lines:\n{out}");
    assert!(!out.contains("policy+0x"), "{out}");
    // The summary opens the result: what was used, by which CPU, why it was stale.
    let lines: Vec<&str> = out.lines().collect();
    let at = lines.iter().position(|l| l.starts_with("result: VIOLATION no_asid_alias on cpu0")).expect("the result");
    assert!(lines[at + 1].starts_with("  used:  the entry for 0x400000 (asid 3"), "{out}");
    assert!(lines[at + 2].starts_with("  by:    cpu0, running mm1, asid 3"), "{out}");
    assert!(
        lines[at + 3].starts_with("  why:   asid 3 was handed to mm1") && lines[at + 3].contains("ASID rollovers"),
        "{out}"
    );
    // The story: the fast path's exchange of a rollover's 0 and the second rollover.
    for needle in [
        "rmw active_asids[cpu0]: gen 1, asid 3 -> 0",
        "rmw active_asids[cpu0]: 0 -> gen 1, asid 2",
        "rmw asid_generation: gen 2 -> gen 3",
        "ASID rollover: a new generation begins",
        "write root: mm1, asid 3",
    ] {
        assert!(out.contains(needle), "{needle}:\n{out}");
    }
    assert!(!out.contains("load "), "loads are for --verbose:\n{out}");
    // --verbose shows every event, named; replay takes it too and prints the same.
    let v = tlbkit(&["check", "--policy", "zoo/linux-arm64-a8ffaaa060b8", "--cpus", "2", "--verbose"]);
    let verbose = String::from_utf8_lossy(&v.stdout).into_owned();
    assert!(verbose.lines().count() > 100 && verbose.contains("load asid_generation -> gen 1"), "{verbose}");
    assert!(!verbose.contains("policy+0x"), "{verbose}");
    let token = out.lines().find_map(|l| l.strip_prefix("replay: tlbkit replay ")).expect("a replay line");
    let r = tlbkit(&["replay", token, "--verbose"]);
    let tail = |s: &str| s[s.find("result:").expect("a result")..].to_string();
    assert_eq!(tail(&String::from_utf8_lossy(&r.stdout)), tail(&verbose));
    // JSON keeps its keys and adds the names, the summary and the view.
    let j = tlbkit(&["check", "--policy", "zoo/linux-arm64-a8ffaaa060b8", "--cpus", "2", "--format", "json"]);
    let j: serde_json::Value = serde_json::from_slice(&j.stdout).unwrap();
    let cx = &j["counterexample"];
    for k in ["property", "cpu", "detail", "steps", "token", "summary", "view"] {
        assert!(cx.get(k).is_some(), "missing {k}: {cx}");
    }
    assert_eq!(cx["summary"].as_array().map(Vec::len), Some(3));
    assert!(cx["steps"].to_string().contains("active_asids[cpu0]") && !cx.to_string().contains("policy+0x"));
}

#[test]
fn check_passes_a_small_exhaustive_run_and_reports_json() {
    let j = tlbkit_json(&[
        "check",
        "--policy",
        "x86-freebsd-gen",
        "--quick",
        "--mode",
        "exhaustive",
        "--ops",
        "3",
        "--format",
        "json",
    ]);
    assert_eq!(j["mode"], "exhaustive");
    assert_eq!((j["cpus"].as_u64(), j["mms"].as_u64(), j["asids"].as_u64()), (Some(2), Some(3), Some(4)));
    assert!(j["rollovers"].is_u64() && j["initiators"].is_u64(), "{j}");
    assert_eq!(j["complete"], true);
    assert!(j["states"].as_u64().unwrap() > 100);
    // Two CPUs' four labels leave the slot room for 72 bits of the hash.
    assert_eq!(j["fingerprint_bits"].as_u64(), Some(72), "{j}");
    assert!(j["collisions_expected"].as_f64().is_some_and(|c| c > 0.0 && c < 1e-6), "{j}");
    // A search this small leaves the table at its first size, 256 parts of
    // 512 to 639 buckets of 64 bytes.
    assert_eq!(j["visited_bytes"].as_u64(), Some(9_428_992), "{j}");
    assert!(j["counterexample"].is_null());
    assert!(j["properties"].as_array().unwrap().iter().any(|p| p == "no_stale_held"));
}

/// The fingerprint a check reports follows its CPUs and memory model: a
/// slot keeps a mask bit for each label a state can have asleep, two a CPU
/// with store buffers and one without (`sc`), the rest of it fingerprint.
#[test]
fn a_checks_fingerprint_width_follows_its_cpus_and_memory_model() {
    for (memory, bits) in [("sc", 70), ("tso", 64)] {
        let args = ["--mode", "exhaustive", "--cpus", "6", "--mms", "1", "--ops", "1", "--memory", memory];
        let j = tlbkit_json(&[&["check", "--policy", "arm64-noasid"][..], &args, &["--format", "json"]].concat());
        assert_eq!(j["fingerprint_bits"].as_u64(), Some(bits), "{memory}: {j}");
    }
}

#[test]
fn check_bad_input_is_exit_2() {
    assert_bad_input(&["check", "--policy", "zoo/nope"], "unknown bug-zoo entry");
    assert_bad_input(&["check", "--policy", "arm64-linux", "--asids", "5"], "power of two");
    // The policy refuses the shape as it is built: the exhaustive search's
    // workers pass that on, as random and PCT runs do.
    for mode in ["exhaustive", "pct"] {
        assert_bad_input(
            &["check", "--policy", "arm64-linux", "--cpus", "3", "--asids", "4", "--mode", mode],
            "3 CPUs need at least 5 usable ASIDs",
        );
    }
    assert_bad_input(&["check", "--policy", "arm64-linux", "--menu", "fly"], "unknown operation 'fly'");
    assert_bad_input(
        &["check", "--policy", "x86-freebsd-gen", "--menu", "switch,cow"],
        "--menu cow: cow (wp_page_copy) and migrate (try_to_unmap_one for migration) are Linux's paths",
    );
    assert_bad_input(&["replay", "garbage"], "not a tlbkit replay token");
    assert_bad_input(
        &["check", "--policy", "arm64-linux", "--teardown", "fast"],
        "--teardown: unknown teardown 'fast'; valid teardowns: noopt, simple, robust, clear_ptes",
    );
    assert_bad_input(
        &["check", "--policy", "x86-linux-pcid", "--teardown", "simple"],
        "contiguous PTEs are arm64 Linux's",
    );
}

#[test]
fn check_with_a_contiguous_block_finds_simples_ungathered_dirty_value_and_replays_it() {
    let o = tlbkit(&["check", "--policy", "arm64-linux", "--teardown", "simple"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    for needle in [
        "contpte: a 64 KB contiguous block per address space, torn down at exit by simple",
        "no_lost_dirty, no_ungathered_dirty, no_tlb_conflict",
        "VIOLATION no_ungathered_dirty",
        "pct mode",
        "1 address spaces of 1 page",
    ] {
        assert!(out.contains(needle), "{needle}: {out}");
    }
    let token = out.lines().find_map(|l| l.strip_prefix("replay: tlbkit replay ")).expect("a replay line");
    assert!(token.starts_with("t5~arm64-linux~2~1~1~4~6~sc~3ff~simple~"), "{token}");
    let r = tlbkit(&["replay", token]);
    assert_eq!(r.status.code(), Some(3), "{}", stderr(&r));
    let from = |s: &str| s[s.find("counterexample (").expect("a counterexample")..].to_string();
    assert_eq!(from(&String::from_utf8_lossy(&r.stdout)), from(&out));
    let j = tlbkit(&[
        "check",
        "--policy",
        "arm64-linux",
        "--teardown",
        "clear_ptes",
        "--iterations",
        "2000",
        "--format",
        "json",
    ]);
    assert_eq!(j.status.code(), Some(0), "{}", stderr(&j));
    let j: serde_json::Value = serde_json::from_slice(&j.stdout).unwrap();
    assert_eq!(
        (j["teardown"].as_str(), j["mode"].as_str(), j["executions"].as_u64()),
        (Some("clear_ptes"), Some("pct"), Some(2000))
    );
}

/// A check whose policy panics (FreeBSD's allocator with more CPUs than ASIDs
/// can hold after a reset: its own `expect`). Context switches only: with page
/// operations the search meets the reset-window finding first.
const PANICKING_CHECK: &[&str] = &[
    "check",
    "--policy",
    "arm64-freebsd-asid",
    "--cpus",
    "3",
    "--asids",
    "4",
    "--mms",
    "4",
    "--ops",
    "6",
    "--mode",
    "pct",
    "--menu",
    "switch,idle",
];

#[test]
fn a_policy_panic_is_the_no_policy_panic_violation_whatever_rust_backtrace_says() {
    let mut outputs = Vec::new();
    for bt in [None, Some("0"), Some("1"), Some("full")] {
        let mut c = Command::new(env!("CARGO_BIN_EXE_tlbkit"));
        c.args(PANICKING_CHECK);
        match bt {
            None => c.env_remove("RUST_BACKTRACE"),
            Some(v) => c.env("RUST_BACKTRACE", v),
        };
        let o = c.output().expect("run tlbkit");
        let (out, err) = (String::from_utf8_lossy(&o.stdout).into_owned(), stderr(&o));
        assert_eq!(o.status.code(), Some(3), "RUST_BACKTRACE={bt:?}: {err}");
        assert!(out.contains("result: VIOLATION no_policy_panic"), "{out}");
        assert!(out.contains("the policy code panicked: ASID set full right after a reset"), "{out}");
        assert!(out.contains("replay: tlbkit replay t5~"), "{out}");
        // Only the timing line: no panic message, no backtrace.
        assert_eq!(err.lines().count(), 1, "RUST_BACKTRACE={bt:?}: {err}");
        assert!(err.starts_with("tlbkit: checked in"), "{err}");
        outputs.push(out);
    }
    assert!(outputs.windows(2).all(|w| w[0] == w[1]), "the same report whatever RUST_BACKTRACE says");
    // The token replays the panic, again quietly.
    let token = outputs[0].lines().find_map(|l| l.strip_prefix("replay: tlbkit replay ")).unwrap().to_string();
    let r = Command::new(env!("CARGO_BIN_EXE_tlbkit")).args(["replay", &token]).env("RUST_BACKTRACE", "1").output();
    let r = r.expect("run tlbkit");
    assert_eq!(r.status.code(), Some(3), "{}", stderr(&r));
    assert!(String::from_utf8_lossy(&r.stdout).contains("no_policy_panic"));
    assert_eq!(stderr(&r), "");
}

#[test]
fn a_mistyped_or_empty_token_is_refused_in_one_line() {
    let o = tlbkit(&["check", "--policy", "zoo/linux-x86-8f1d56f64f8d"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let token = out.lines().find_map(|l| l.strip_prefix("replay: tlbkit replay ")).expect("a token").to_string();
    assert_eq!(tlbkit(&["replay", &token]).status.code(), Some(3));
    // Change one choice digit: the checksum no longer matches.
    let at = token.rfind('~').unwrap() - 1;
    let mut typo = token.clone().into_bytes();
    typo[at] = if typo[at] == b'1' { b'2' } else { b'1' };
    assert_bad_input(&["replay", std::str::from_utf8(&typo).unwrap()], "checksum does not match");
    assert_bad_input(&["replay", "t1~arm64-linux~2~3~4~6~sc~1ff~1"], "older tlbkit");
    // A t3 token, whole and with its checksum, was recorded before pages and Linux's locking.
    assert_bad_input(&["replay", "t3~arm64-freebsd-asid~2~3~4~6~sc~1ff~-~z60.1~211c2047"], "add --pages 1");
    // A t4 token was recorded when taking a spin lock was two steps.
    let t4 = "t4~arm64-freebsd-asid~2~5~2~4~12~sc~3ff~-~08z5.6z5.7z5.4z28.1z15.4~bf7f1dfe";
    assert_bad_input(&["replay", t4], "for a t5 token");
    assert_bad_input(&["check", "--policy", "arm64-linux", "--pages", "5"], "--pages 5: an address space maps 1 to 4");
    assert_bad_input(&["replay", ""], "not a tlbkit replay token");
}

#[test]
fn a_check_that_explores_nothing_says_so_and_exits_2() {
    assert_bad_input(
        &["check", "--policy", "arm64-linux", "--mode", "random", "--iterations", "0"],
        "nothing was checked: no execution ran",
    );
    assert_bad_input(
        &["check", "--policy", "arm64-freebsd-asid", "--menu", "munmap"],
        "nothing was checked: no CPU could start an operation",
    );
}

#[test]
fn presets_set_the_shape_and_search_and_exclude_each_other() {
    let o = tlbkit(&["check", "--policy", "arm64-linux", "--quick", "--deep"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("'--quick' cannot be used with '--deep'"), "{}", stderr(&o));
    let j = tlbkit_json(&["check", "--policy", "arm64-linux", "--quick", "--iterations", "50", "--format", "json"]);
    assert_eq!(
        (j["cpus"].as_u64(), j["mms"].as_u64(), j["pages"].as_u64(), j["ops"].as_u64()),
        (Some(2), Some(3), Some(2), Some(6))
    );
    assert_eq!((j["mode"].as_str(), j["executions"].as_u64()), (Some("pct"), Some(50)));
    // No shape flag: the portfolio, whose family shape is the one shape's default.
    let o = tlbkit(&["check", "--policy", "x86-linux-pcid", "--iterations", "50"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.starts_with("check x86-linux-pcid: a portfolio of 9 shapes, tso memory, pct mode\n"), "{out}");
    assert!(out.contains(". 3 CPUs, 3 mms of 2 pages, 6 ASIDs, 9 ops (switch,idle,munmap,fault,reclaim,"), "{out}");
    assert!(out.contains("reached: 0 ASID rollover(s), "), "{out}");
    let o = tlbkit(&["check", "--policy", "x86-linux-pcid", "--cpus", "3", "--iterations", "50"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("check x86-linux-pcid: 3 CPUs, 3 address spaces of 2 pages, 6 ASIDs, 9 operations"), "{out}");
    assert!(out.contains("sc memory, pct mode") && !out.contains("portfolio"), "{out}");
    let j = tlbkit_json(&["check", "--policy", "arm64-linux", "--deep", "--ops", "2", "--format", "json"]);
    assert_eq!(
        (j["mms"].as_u64(), j["mode"].as_str(), j["complete"].as_bool()),
        (Some(5), Some("exhaustive"), Some(true))
    );
}

#[test]
fn an_interrupted_check_says_what_it_explored_and_how_to_keep_it() {
    let child = Command::new(env!("CARGO_BIN_EXE_tlbkit"))
        .args(["check", "--policy", "arm64-linux", "--mode", "exhaustive", "--ops", "8"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Long enough that the search has published its counts (every 4,096 executions).
    std::thread::sleep(std::time::Duration::from_secs(3));
    // SAFETY: a signal to our own child, still running (it cannot finish this shape in seconds).
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(130), "{e}");
    assert_eq!(e.trim_end().lines().count(), 1, "one line: {e}");
    assert!(e.contains("interrupted after") && e.contains("executions") && e.contains("--checkpoint DIR"), "{e}");
    assert!(o.stdout.is_empty(), "no report of an unfinished check");
}

/// Returns a commit (on no branch) of this checkout's `HEAD` in which the
/// line of `file` holding `line` reads otherwise, so that the working tree's
/// file differs from it in that line alone.
fn base_with_line_changed(file: &str, line: &str) -> String {
    let root = env!("CARGO_MANIFEST_DIR");
    let git = |args: &[&str], env: &[(&str, &str)], input: Option<&[u8]>| -> String {
        let mut c = Command::new("git");
        c.current_dir(root).args(args).envs(env.iter().copied());
        c.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped());
        let mut child = c.spawn().expect("git runs");
        if let Some(i) = input {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(i).unwrap();
        }
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "git {args:?}");
        String::from_utf8(o.stdout).unwrap().trim().to_string()
    };
    let text = std::fs::read_to_string(format!("{root}/{file}")).unwrap();
    assert_eq!(text.matches(line).count(), 1, "{line} once in {file}");
    let other = text.replace(line, &format!("{line} // otherwise"));
    let blob = git(&["hash-object", "-w", "--stdin"], &[], Some(other.as_bytes()));
    let index = std::env::temp_dir().join(format!("tlbkit-base-index-{}-{}", std::process::id(), line.len()));
    let index = index.to_str().unwrap();
    let env = [("GIT_INDEX_FILE", index)];
    git(&["read-tree", "HEAD"], &env, None);
    git(&["update-index", "--cacheinfo", &format!("100644,{blob},{file}")], &env, None);
    let tree = git(&["write-tree"], &env, None);
    let _ = std::fs::remove_file(index);
    let who = [
        ("GIT_AUTHOR_NAME", "t"),
        ("GIT_AUTHOR_EMAIL", "t@t"),
        ("GIT_COMMITTER_NAME", "t"),
        ("GIT_COMMITTER_EMAIL", "t@t"),
    ];
    git(&["commit-tree", &tree, "-p", "HEAD", "-m", "base"], &who, None)
}

/// A `coverage` build reports the lines of a Rust policy a check ran, and
/// with `--base @REV` whether it ran the lines changed since: the worked
/// example's `flush_range` (which the checker's FreeBSD kernel never calls)
/// is said to be unreached, in the result line too; its `switch_mm`,
/// reached.
#[test]
#[ignore = "builds the `coverage` profile (about two minutes on two cores): \
            cargo test --test commands a_coverage_build -- --ignored"]
fn a_coverage_build_says_which_changed_rust_lines_a_check_ran() {
    let root = env!("CARGO_MANIFEST_DIR");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let built =
        Command::new(cargo).current_dir(root).args(["build", "-q", "--profile", "coverage", "-p", "tlbkit"]).status();
    assert!(built.unwrap().success());
    let file = "examples/my-policy/src/lib.rs";
    let check = |base: &str| {
        let o = Command::new(format!("{root}/target/coverage/tlbkit"))
            .current_dir(root)
            .args(["check", "--policy", "arm64-freebsd-asid-activecpu", "--base", &format!("@{base}")])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        String::from_utf8(o.stdout).unwrap()
    };
    let unreached = base_with_line_changed(file, "self.inner.flush_range(&Local::of(hw), mm, start, pages)");
    let out = check(&unreached);
    let about =
        out.lines().skip_while(|l| !l.starts_with(&format!("code reached: {file} "))).take(2).collect::<Vec<_>>();
    assert!(about[0].contains("functions never entered: ") && about[0].contains("flush_range"), "{out}");
    assert!(about[1].starts_with(&format!("changed since {file}@{unreached}: 1 line with code (")), "{out}");
    assert!(about[1].ends_with("), none reached"), "{out}");
    assert!(out.contains("result: no violation, but no execution reached the lines of"), "{out}");
    let reached = base_with_line_changed(file, "if !next.is_kernel() {");
    let out = check(&reached);
    assert!(out.contains(&format!("changed since {file}@{reached}: 1 line with code (")), "{out}");
    assert!(out.contains("), every one reached\n") && out.contains("result: no violation\n"), "{out}");
}
