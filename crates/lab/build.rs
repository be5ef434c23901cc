//! Lists the validation corpus (`corpus/*.toml`) for `validate::SHIPPED`, so
//! that a figure added to the corpus is one new file and nothing else.

use std::fmt::Write;
use std::path::Path;

fn main() {
    // Read when cargo runs the script, not when it compiles it: a target
    // directory two checkouts share reuses the compiled script, whose
    // compile-time path would name the other checkout's files.
    let root = std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let dir = Path::new(&root).join("corpus");
    println!("cargo::rerun-if-changed={}", dir.display());
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("crates/lab/corpus exists")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".toml"))
        .collect();
    names.sort();
    let mut out = String::from("&[\n");
    for n in &names {
        println!("cargo::rerun-if-changed={}", dir.join(n).display());
        let _ = writeln!(out, "    ({n:?}, include_str!({:?})),", dir.join(n).display().to_string());
    }
    out.push(']');
    let dest = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("corpus_files.rs");
    std::fs::write(dest, out).expect("OUT_DIR is writable");
}
