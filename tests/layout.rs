//! The test binaries' layout: the packages whose integration tests are one
//! binary (`autotests = false`, a `tests/main.rs` naming each file as a
//! module) build only the files they name, so a new test file left out
//! would never be built or run. Every `tests/*.rs` of such a package is a
//! module of its `main.rs` or a test target of its own in its
//! `Cargo.toml`.

use std::path::Path;

#[test]
fn every_test_file_is_built() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for package in [".", "crates/check", "crates/sim"] {
        let dir = root.join(package);
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("a manifest");
        assert!(manifest.contains("autotests = false"), "{package}: its tests are no longer one binary");
        let main = std::fs::read_to_string(dir.join("tests/main.rs")).expect("tests/main.rs");
        for entry in std::fs::read_dir(dir.join("tests")).expect("the tests folder") {
            let path = entry.expect("an entry").path();
            let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else { continue };
            if path.extension().is_none_or(|e| e != "rs") || stem == "main" {
                continue;
            }
            let module = main.contains(&format!("\nmod {stem};\n"));
            let target = manifest.contains(&format!("path = \"tests/{stem}.rs\""));
            assert!(
                module || target,
                "{package}/tests/{stem}.rs is neither a module of tests/main.rs nor a test target"
            );
        }
    }
}

/// `bench/README.md` is the index of the measurement records: every record
/// in `bench/` has its row there, and every file it links exists.
#[test]
fn the_bench_index_links_every_record() {
    let bench = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench");
    let index = std::fs::read_to_string(bench.join("README.md")).expect("bench/README.md");
    // The files the index links, without anchors; no web addresses.
    let links: Vec<&str> = index
        .split("](")
        .skip(1)
        .filter_map(|s| s.split(')').next())
        .map(|s| s.split('#').next().unwrap_or_default())
        .filter(|s| !s.is_empty() && !s.contains("://"))
        .collect();
    let mut wrong: Vec<String> = links
        .iter()
        .filter(|link| !bench.join(link).is_file())
        .map(|link| format!("bench/README.md links {link}, which does not exist"))
        .collect();
    let mut records = 0;
    for entry in std::fs::read_dir(&bench).expect("the bench folder") {
        let path = entry.expect("an entry").path();
        let Some(name) = path.file_name().and_then(|s| s.to_str()) else { continue };
        if !name.ends_with(".md") || name == "README.md" {
            continue;
        }
        records += 1;
        if !links.contains(&name) {
            wrong.push(format!("bench/{name} is not linked from bench/README.md"));
        }
    }
    assert!(records >= 10, "found only {records} records in bench/");
    wrong.sort();
    assert!(wrong.is_empty(), "bench/README.md does not index bench/:\n  {}", wrong.join("\n  "));
}
