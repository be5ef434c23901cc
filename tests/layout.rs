//! The test binaries' layout: the packages whose integration tests are one
//! binary (`autotests = false`, a `tests/main.rs` naming each file as a
//! module) build only the files they name, so a new test file left out
//! would never be built or run. Every `tests/*.rs` of such a package is a
//! module of its `main.rs` or a test target of its own in its
//! `Cargo.toml`, and every file of a folder that is a test target's (its
//! `main.rs`) a module of that `main.rs`.

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
            if path.join("main.rs").exists() {
                // A binary of its own in a folder: a test target, naming its files.
                let target = manifest.contains(&format!("path = \"tests/{stem}/main.rs\""));
                assert!(target, "{package}/tests/{stem}/main.rs is not a test target");
                modules_named(&path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") || stem == "main" {
                continue;
            }
            let module = names_module(&main, stem);
            let target = manifest.contains(&format!("path = \"tests/{stem}.rs\""));
            assert!(
                module || target,
                "{package}/tests/{stem}.rs is neither a module of tests/main.rs nor a test target"
            );
        }
    }
}

/// Whether the `main.rs` text `main` declares the module `stem`.
fn names_module(main: &str, stem: &str) -> bool {
    main.contains(&format!("\nmod {stem};\n"))
}

/// Asserts that every `.rs` file of `dir` but its `main.rs` is a module of it.
fn modules_named(dir: &Path) {
    let main = std::fs::read_to_string(dir.join("main.rs")).expect("its main.rs");
    for entry in std::fs::read_dir(dir).expect("the folder") {
        let path = entry.expect("an entry").path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else { continue };
        if path.extension().is_some_and(|e| e == "rs") && stem != "main" {
            assert!(names_module(&main, stem), "{} is not a module of its main.rs", path.display());
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

/// `CHANGELOG.md` is in released sections with one line per change: after
/// its header, `## [Unreleased]` then `## YYYY-MM-DD` sections, newest
/// first; within a section each `### ` kind at most once; and every other
/// line blank or a bullet on one line (no wrapped continuation lines).
#[test]
fn the_changelog_is_dated_sections_of_one_line_changes() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("CHANGELOG.md");
    let text = std::fs::read_to_string(&path).expect("CHANGELOG.md");
    let is_date = |s: &str| {
        let b = s.as_bytes();
        b.len() == 10
            && b.iter().enumerate().all(|(i, c)| if i == 4 || i == 7 { *c == b'-' } else { c.is_ascii_digit() })
    };
    let mut wrong: Vec<String> = Vec::new();
    let mut sections = 0;
    let mut last_date: Option<&str> = None;
    let mut kinds: Vec<&str> = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        if let Some(title) = line.strip_prefix("## ") {
            if sections == 0 {
                if title != "[Unreleased]" {
                    wrong.push(format!("line {number}: the first section is not `## [Unreleased]`: {line}"));
                }
            } else if !is_date(title) {
                wrong.push(format!("line {number}: a section that is not `## YYYY-MM-DD`: {line}"));
            } else {
                if last_date.is_some_and(|last| title >= last) {
                    wrong.push(format!(
                        "line {number}: {line} is not older than the section before it ({})",
                        last_date.unwrap_or_default()
                    ));
                }
                last_date = Some(title);
            }
            sections += 1;
            kinds.clear();
        } else if sections == 0 {
            // The header: title and introductory lines.
        } else if let Some(kind) = line.strip_prefix("### ") {
            if kinds.contains(&kind) {
                wrong.push(format!("line {number}: a second `### {kind}` in its section: {line}"));
            }
            kinds.push(kind);
        } else if !line.trim().is_empty() && !line.starts_with("- ") {
            wrong.push(format!("line {number}: neither blank, a heading nor a one-line `- ` change: {line}"));
        }
    }
    assert!(sections >= 2, "CHANGELOG.md has {sections} `## ` sections");
    assert!(wrong.is_empty(), "CHANGELOG.md is not dated sections of one-line changes:\n  {}", wrong.join("\n  "));
}
