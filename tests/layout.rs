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
