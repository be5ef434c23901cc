//! The C build cache under concurrent builds: one file built at once by
//! several threads of this process and several other processes, from an
//! empty cache, gives every builder a working object, one cache entry, and
//! nothing left behind (no temporary build directory, no loaded copy's file).
//!
//! The other processes are this test binary again, running
//! [`child_builds`] with `TLBKIT_TEST_BUILD_CHILD` set.

mod common;

use std::process::Command;
use std::sync::Arc;
use tlbkit_c::build::{Lib, Options};
use tlbkit_c::{CPolicy, Sources};
use tlbkit_policy::{MmId, Policy};

const FILE: &str = concat!("c:", env!("CARGO_MANIFEST_DIR"), "/../../third_party/linux/v6.12/arch/arm64/mm/context.c");

const OPTIONS: Options = Options::machine(2, 4, 8);

/// Builds the file, loads a copy and runs its code: what every builder does.
fn build_and_use() {
    let lib: Arc<Lib> = Lib::build(&Sources::parse(FILE).unwrap(), &OPTIONS).unwrap_or_else(|e| panic!("{e}"));
    let policy = CPolicy::new(&lib, &OPTIONS).unwrap_or_else(|e| panic!("{e}"));
    policy.mm_init(MmId(1));
    assert_ne!(policy.context_id(MmId(1)), u64::MAX);
}

/// A builder in another process (does nothing in an ordinary test run).
#[test]
fn child_builds() {
    if std::env::var_os("TLBKIT_TEST_BUILD_CHILD").is_some() {
        build_and_use();
    }
}

#[test]
fn one_file_built_by_many_threads_and_processes_at_once_from_an_empty_cache() {
    if !common::have_cc() {
        return;
    }
    let cache =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tlbkit-build-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    std::fs::create_dir_all(&cache).unwrap();
    // This binary's other test reads no variable: setting it here races nothing.
    std::env::set_var("TLBKIT_CACHE_DIR", &cache);
    let children: Vec<_> = (0..3)
        .map(|_| {
            Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "child_builds", "--nocapture", "--test-threads", "1"])
                .env("TLBKIT_CACHE_DIR", &cache)
                .env("TLBKIT_TEST_BUILD_CHILD", "1")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("a child builder")
        })
        .collect();
    let threads: Vec<_> = (0..4).map(|_| std::thread::spawn(build_and_use)).collect();
    for t in threads {
        t.join().expect("a thread's build");
    }
    for c in children {
        let o = c.wait_with_output().unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success(), "a child's build failed:\n{text}");
    }
    let c = cache.join("c");
    let entries: Vec<String> =
        std::fs::read_dir(&c).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(entries.len(), 1, "one cache entry, no temporary build left: {entries:?}");
    let files: Vec<String> = std::fs::read_dir(c.join(&entries[0]))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(files.contains(&"policy.so".to_string()), "{files:?}");
    assert!(!files.iter().any(|f| f.starts_with("copy-")), "no loaded copy's file is left: {files:?}");
    let _ = std::fs::remove_dir_all(&cache);
}
