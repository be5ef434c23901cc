//! Saved searches (`tlbkit check --checkpoint DIR`, `--resume DIR`,
//! `--max-memory SIZE`): a search killed at any moment and resumed ends as
//! one never stopped; a search over its memory cap saves itself and stops
//! with exit 2; a save of another build, or one cut short or corrupted, is
//! refused in one line that says which; so is a save or a token of a C file
//! edited since.

use crate::common::{assert_bad_input, have_cc, tlbkit};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A small exhaustive shape: seconds in a debug build.
const SHAPE: &[&str] = &[
    "check",
    "--policy",
    "arm64-linux",
    "--mode",
    "exhaustive",
    "--cpus",
    "2",
    "--mms",
    "3",
    "--asids",
    "4",
    "--ops",
    "4",
    "--pages",
    "1",
    "--jobs",
    "1",
    "--format",
    "json",
];

/// Checks [`SHAPE`] with two operations, saving the search in `dir`.
fn save_two_ops(dir: &str) {
    let mut args = SHAPE.to_vec();
    let ops = args.iter().position(|a| *a == "--ops").unwrap() + 1;
    args[ops] = "2";
    args.extend(["--checkpoint", dir]);
    assert_eq!(tlbkit(&args).status.code(), Some(0));
}

/// The verdict and state count of a report.
fn verdict(o: &Output) -> (Option<String>, u64, bool) {
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
    });
    (j["counterexample"]["property"].as_str().map(String::from), j["states"].as_u64().unwrap(), j["complete"] == true)
}

fn scratch(name: &str) -> std::path::PathBuf {
    let d =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tlbkit-saved-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn a_search_killed_at_a_random_point_and_resumed_ends_as_one_never_stopped() {
    let t = Instant::now();
    let whole = tlbkit(SHAPE);
    let took = t.elapsed();
    let expect = verdict(&whole);
    assert!(expect.2 && expect.1 > 10_000, "{expect:?}");
    // A point after the first save within the first half of the
    // uninterrupted run's time, from the clock (TLBKIT_TEST_KILL_MS fixes it
    // to reproduce a failure).
    let ms = std::env::var("TLBKIT_TEST_KILL_MS").ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        u64::from(nanos) % (took.as_millis() as u64 / 2).max(1)
    });
    eprintln!("killing after {ms} ms (TLBKIT_TEST_KILL_MS={ms} repeats it)");
    let dir = scratch("kill");
    let d = dir.display().to_string();
    let mut args = SHAPE.to_vec();
    args.extend(["--checkpoint", &d, "--checkpoint-every", "0.05"]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_tlbkit"))
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The random point is counted from the first save (before it there is
    // nothing to resume: the check's start-up, which hashes the binary).
    let first = Instant::now();
    while !dir.join("search.ckpt").exists() {
        assert!(first.elapsed() < Duration::from_secs(120), "no save within two minutes");
        assert!(child.try_wait().unwrap().is_none(), "the check ended before its first save");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(ms));
    assert!(child.try_wait().unwrap().is_none(), "the check ended before the kill (TLBKIT_TEST_KILL_MS={ms})");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let resumed = tlbkit(&["check", "--resume", &d, "--jobs", "1", "--format", "json"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", String::from_utf8_lossy(&resumed.stderr));
    assert_eq!(verdict(&resumed), expect, "killed after {ms} ms (TLBKIT_TEST_KILL_MS={ms})");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_search_over_its_memory_cap_saves_itself_and_stops_with_exit_2() {
    let dir = scratch("cap");
    let d = dir.display().to_string();
    let mut args = SHAPE.to_vec();
    args.extend(["--checkpoint", &d, "--max-memory", "1M"]);
    let o = tlbkit(&args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains("over the cap of 1.0 MiB") && err.contains(&format!("--resume {d} --max-memory")), "{err}");
    let more = tlbkit(&["check", "--resume", &d, "--max-memory", "64M", "--jobs", "1", "--format", "json"]);
    assert_eq!(more.status.code(), Some(0), "{}", String::from_utf8_lossy(&more.stderr));
    assert_eq!(verdict(&more), verdict(&tlbkit(SHAPE)));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_save_of_another_build_or_no_save_is_refused_in_one_line() {
    let dir = scratch("other");
    let d = dir.display().to_string();
    save_two_ops(&d);
    // The save's identity starts with the binary's hash: save it again as
    // another build's (with checksums that match, so that it is not taken
    // for a corrupted file).
    use tlbkit_check::search::saved;
    let opened = saved::open(&dir).unwrap();
    let (identity, body) = (opened.identity.clone(), opened.bytes().unwrap());
    let (_, check) = identity.split_once(' ').unwrap();
    saved::write(&dir, &format!("0123456789abcdef {check}"), &body).unwrap();
    for (args, says) in [
        (vec!["check", "--resume", d.as_str()], "another build of tlbkit"),
        (vec!["check", "--resume", "/no/such/dir"], "no saved search to resume"),
    ] {
        assert_bad_input(&args, says);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_distributed_search_resumes_only_a_snapshot_of_one() {
    // Refused before any Python or Ray starts.
    let dir = scratch("ray");
    let d = dir.display().to_string();
    save_two_ops(&d);
    // A save of one machine's search is no snapshot of a sharded one.
    let resume = ["check", "--resume", d.as_str(), "--ray", "127.0.0.1:1"];
    assert_bad_input(&resume, "shards.ckpt");
    // The rounds are gone: `--ray-search` takes `sharded` alone.
    let rounds = ["check", "--resume", d.as_str(), "--ray", "127.0.0.1:1", "--ray-search", "rounds"];
    assert_bad_input(&rounds, "the search in rounds is gone");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_save_cut_short_corrupted_or_no_save_at_all_is_refused_in_one_line_that_says_which() {
    let dir = scratch("damaged");
    let d = dir.display().to_string();
    save_two_ops(&d);
    let path = dir.join("search.ckpt");
    let good = std::fs::read(&path).unwrap();
    let mut flipped = good.clone();
    flipped[good.len() / 2] ^= 1;
    for (bytes, says) in [
        (good[..good.len() / 2].to_vec(), "is cut short"),
        (flipped, "is corrupted: its checksum does not match (a byte of it changed"),
        (b"not a save".to_vec(), "is not a saved tlbkit search"),
    ] {
        std::fs::write(&path, bytes).unwrap();
        assert_bad_input(&["check", "--resume", &d], &format!("{} {says}", path.display()));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_saving_search_finds_the_counterexample_a_plain_one_finds() {
    let dir = scratch("found");
    let d = dir.display().to_string();
    let base = ["check", "--policy", "zoo/linux-arm64-a8ffaaa060b8", "--mode", "exhaustive", "--format", "json"];
    let plain = tlbkit(&base);
    let mut args = base.to_vec();
    args.extend(["--checkpoint", &d]);
    let saving = tlbkit(&args);
    assert_eq!(saving.status.code(), Some(3), "{}", String::from_utf8_lossy(&saving.stderr));
    let token = |o: &Output| {
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        j["counterexample"]["token"].as_str().map(String::from)
    };
    assert!(token(&plain).is_some());
    assert_eq!(token(&saving), token(&plain));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_c_file_edited_after_its_check_is_refused_on_resume_and_replay_in_one_line() {
    if !have_cc() {
        return;
    }
    let dir = scratch("edited");
    std::fs::create_dir_all(&dir).unwrap();
    let (clean, racy, save) = (dir.join("context.c"), dir.join("race.c"), dir.join("save"));
    std::fs::copy("third_party/linux/v6.12/arch/arm64/mm/context.c", &clean).unwrap();
    std::fs::copy("crates/c/tests/constructed/race.c", &racy).unwrap();
    let (clean, racy, save) = (clean.display().to_string(), racy.display().to_string(), save.display().to_string());
    let shape = ["--mode", "exhaustive", "--cpus", "2", "--mms", "2", "--ops", "2", "--pages", "1", "--jobs", "1"];
    let saving = tlbkit(&[&["check", "--c", &clean][..], &shape, &["--checkpoint", &save]].concat());
    assert_eq!(saving.status.code(), Some(0), "{}", String::from_utf8_lossy(&saving.stderr));
    let racing = tlbkit(&["check", "--c", &racy, "--mode", "exhaustive", "--ops", "3", "--asids", "16"]);
    assert_eq!(racing.status.code(), Some(3), "{}", String::from_utf8_lossy(&racing.stderr));
    let out = String::from_utf8_lossy(&racing.stdout).into_owned();
    let token = out.lines().find_map(|l| l.strip_prefix("replay: tlbkit replay ")).expect("a replay line").to_string();
    let resume = ["check", "--resume", save.as_str(), "--jobs", "1"];
    let replay = ["replay", token.as_str()];
    // As they were: both run.
    assert_eq!(tlbkit(&resume).status.code(), Some(0));
    assert!(String::from_utf8_lossy(&tlbkit(&replay).stdout).contains("no_data_race"));
    // One comment more in each file: refused, in one line that says why.
    let originals = [std::fs::read(&clean).unwrap(), std::fs::read(&racy).unwrap()];
    for file in [&clean, &racy] {
        let mut text = std::fs::read(file).unwrap();
        text.extend_from_slice(b"/* edited */\n");
        std::fs::write(file, text).unwrap();
    }
    for (args, file) in [(&resume[..], &clean), (&replay[..], &racy)] {
        assert_bad_input(args, &format!("c:{file} has changed since this was recorded"));
    }
    // Restored, they run again.
    std::fs::write(&clean, &originals[0]).unwrap();
    std::fs::write(&racy, &originals[1]).unwrap();
    assert_eq!(tlbkit(&resume).status.code(), Some(0));
    assert!(String::from_utf8_lossy(&tlbkit(&replay).stdout).contains("no_data_race"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs tlbkit with `args` to its end; returns its exit code and its peak
/// resident set in KiB (`wait4`'s), which is at least this process's own
/// peak when it started the child (an `exec` keeps the high-water mark of
/// the memory it replaces): the caller compares with that.
fn peak_kib(args: &[&str]) -> (Option<i32>, i64) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tlbkit"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("tlbkit starts");
    let mut status = 0;
    // SAFETY: `rusage` is a C struct for which all-zero is valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `child` is this process's own child, not yet waited for; both
    // pointers are valid for the call to fill.
    let r = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    assert_eq!(r, child.id() as libc::pid_t, "waited for tlbkit");
    // Reaped above: `wait` has nothing left to wait for.
    let _ = child.wait();
    (libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)), usage.ru_maxrss)
}

/// This process's own peak resident set, in KiB.
fn own_peak_kib() -> i64 {
    tlbkit_host::memory::peak_bytes().map_or(0, |b| (b >> 10) as i64)
}

/// A save is written into its file as it is made, and read back from
/// there: a search that saves, and one resumed, hold about what a search
/// that does neither holds, not the save's bytes beside their visited set
/// (about a million states here: saves of 17 MB or more beside a table of
/// 9 MiB, which a save made in memory held two or three times over).
#[test]
fn a_search_that_saves_or_resumes_holds_no_copy_of_its_save() {
    let dir = scratch("peak");
    let d = dir.display().to_string();
    let shape = ["check", "--policy", "x86-linux-410", "--mode", "exhaustive", "--cpus", "2", "--mms", "3"];
    let shape = [&shape[..], &["--ops", "6", "--pages", "1", "--jobs", "2"]].concat();
    let (code, plain) = peak_kib(&shape);
    assert_eq!(code, Some(0));
    let saving = [&shape[..], &["--checkpoint", &d, "--checkpoint-every", "1"]].concat();
    let before_saving = own_peak_kib();
    let (code, saved) = peak_kib(&saving);
    assert_eq!(code, Some(0));
    let size = |f: &str| std::fs::metadata(dir.join(f)).map_or(0, |m| m.len() as i64);
    let bytes = size("search.ckpt") + size("search.deltas");
    assert!(bytes > 12 << 20, "saves of {bytes} bytes: too small to show their copies");
    // A search stopped at its cap as its table first grows, then resumed.
    let _ = std::fs::remove_dir_all(&dir);
    let (code, _) = peak_kib(&[&saving[..], &["--max-memory", "9500K"]].concat());
    assert_eq!(code, Some(2), "stopped at the cap");
    let before_resume = own_peak_kib();
    let (code, resumed) = peak_kib(&["check", "--resume", &d, "--jobs", "2"]);
    assert_eq!(code, Some(0));
    // A quarter of the saves' bytes: a copy of them would pass it.
    let room = bytes / 1024 / 4;
    for (what, kib, floor) in [("saving", saved, before_saving), ("resumed", resumed, before_resume)] {
        let most = plain.max(floor) + room;
        assert!(kib <= most, "{what}: peak {kib} KiB against {plain} KiB for a search that does not save");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
