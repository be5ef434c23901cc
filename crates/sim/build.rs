//! Compiles the machine files in (`machines/*.toml`, `machines/base/*.toml`,
//! `machines/estimates.toml`): writes `machines.rs` into `OUT_DIR` with each
//! file's stem and text, in name order, so that adding a machine is adding
//! its file.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    // Read when cargo runs the script, not when it compiles it: a target
    // directory two checkouts share reuses the compiled script, whose
    // compile-time path would name the other checkout's files.
    let root = std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let dir = Path::new(&root).join("machines");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut out = String::new();
    for (konst, sub, doc) in [
        ("PRESETS", "", "Every preset: `(name, text)` of `machines/NAME.toml`."),
        ("BASES", "base", "Every architecture base: `(name, text)` of `machines/base/NAME.toml`."),
    ] {
        let mut files: Vec<(String, String)> = std::fs::read_dir(dir.join(sub))
            .unwrap_or_else(|e| panic!("{}: {e}", dir.join(sub).display()))
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .filter_map(|p| {
                let stem = p.file_stem()?.to_str()?.to_string();
                (stem != "estimates").then(|| (stem, p.display().to_string()))
            })
            .collect();
        files.sort();
        let _ = writeln!(out, "/// {doc}\npub(super) const {konst}: &[(&str, &str)] = &[");
        for (stem, path) in files {
            println!("cargo:rerun-if-changed={path}");
            let _ = writeln!(out, "    ({stem:?}, include_str!({path:?})),");
        }
        let _ = writeln!(out, "];");
    }
    let est = dir.join("estimates.toml");
    println!("cargo:rerun-if-changed={}", est.display());
    let _ = writeln!(
        out,
        "/// The estimates several presets share, by name.\npub(super) const ESTIMATES: &str = include_str!({:?});",
        est.display().to_string()
    );
    let path = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("machines.rs");
    std::fs::write(&path, out).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}
