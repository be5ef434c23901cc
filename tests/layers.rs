//! Every crate's modules form layers: no top-level module of a crate's
//! `src/` reaches, through the `crate::` paths in its code, a module that
//! reaches it back. In the checker, the kernel operations (`ops`, `block`)
//! call the engine through the `Engine` trait and the search strategies know
//! only their `Chooser` interface, so that `exec` can call the operations and
//! use the strategies' types without a circle; in the simulator, a CPU's
//! state (`cpu`) sits below the machine and the DVM queues that charge it,
//! and errors (`error`) below everything that returns them. This test reads
//! the sources, builds each crate's graph of top-level modules and names any
//! circle that comes back.
//!
//! The crates are in layers too. Cargo refuses a circle of them, but not a
//! dependency that turns two layers over: a test here keeps the registry
//! below the C front end, which builds C policies on top of it.
//!
//! Paths in comments and string literals are not references and are left
//! out; so are `super::` paths, which stay inside one top-level module, and
//! tests (a file's code from its `#[cfg(test)]` on, `tests.rs` and
//! `*_tests.rs` files), which may reach across the layers they test.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Puts every `.rs` file under `dir` into `out`.
pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if name != "tests.rs" && !name.ends_with("_tests.rs") {
                out.push(path);
            }
        }
    }
}

/// Returns `src` with its comments and its string and character literals
/// replaced by spaces, so that only code is left to search; the newlines
/// inside them are kept, so that the code keeps its line numbers.
pub(crate) fn code_only(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && next == Some('*') {
            // Block comments nest.
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    keep_newline(&mut out, c[i]);
                    i += 1;
                }
            }
            out.push(' ');
        } else if c[i] == 'r' && (next == Some('"') || next == Some('#')) && !ident_char(c.get(i.wrapping_sub(1))) {
            // A raw string: r"...", r#"..."#, and so on.
            let mut j = i + 1;
            let mut hashes = 0;
            while c.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            j += 1;
            while j < c.len() && !(c[j] == '"' && (1..=hashes).all(|k| c.get(j + k) == Some(&'#'))) {
                keep_newline(&mut out, c[j]);
                j += 1;
            }
            i = j + 1 + hashes;
            out.push(' ');
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                let step = if c[i] == '\\' { 2 } else { 1 };
                c[i..(i + step).min(c.len())].iter().for_each(|&x| keep_newline(&mut out, x));
                i += step;
            }
            i += 1;
            out.push(' ');
        } else if c[i] == '\'' && (next == Some('\\') || c.get(i + 2) == Some(&'\'')) {
            // A character literal (not a lifetime).
            i += 1;
            while i < c.len() && c[i] != '\'' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push(' ');
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// Keeps a newline met inside a comment or a literal left out of the code.
fn keep_newline(out: &mut String, c: char) {
    if c == '\n' {
        out.push('\n');
    }
}

fn ident_char(c: Option<&char>) -> bool {
    c.is_some_and(|c| c.is_alphanumeric() || *c == '_')
}

/// Returns the identifier at the start of `s` (after blanks), if any.
fn first_ident(s: &str) -> Option<&str> {
    let s = s.trim_start();
    let end = s.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(s.len());
    (end > 0).then(|| &s[..end])
}

/// Returns the top-level modules that `code` (comments and literals already
/// left out) names through `crate::` paths, grouped imports
/// (`crate::{a, b::c}`) included.
fn crate_refs(code: &str) -> BTreeSet<String> {
    let mut refs = BTreeSet::new();
    let mut from = 0;
    while let Some(k) = code[from..].find("crate") {
        let at = from + k;
        from = at + "crate".len();
        let before = code[..at].chars().next_back();
        if ident_char(before.as_ref()) || before == Some('$') {
            continue;
        }
        let rest = code[from..].trim_start();
        let Some(rest) = rest.strip_prefix("::") else { continue };
        let rest = rest.trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            // The group's items at depth one, each up to its first `::`.
            let mut depth = 1;
            let mut item_start = 0;
            for (i, ch) in group.char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' | ',' if depth == 1 => {
                        refs.extend(first_ident(&group[item_start..i]).map(str::to_string));
                        item_start = i + 1;
                        if ch == '}' {
                            break;
                        }
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
        } else if let Some(m) = first_ident(rest) {
            refs.insert(m.to_string());
        }
    }
    refs.remove("self");
    refs
}

/// Returns the graph of top-level modules of the crate whose sources lie in
/// `src`: each module with the others its files name.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(src).expect("under src");
        let top = rel.components().next().expect("a file").as_os_str().to_string_lossy();
        let module = top.trim_end_matches(".rs").to_string();
        if module == "lib" || module == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("cannot read {}: {e}", f.display()));
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        let refs = crate_refs(&code_only(code));
        graph.entry(module.clone()).or_default().extend(refs.into_iter().filter(|r| *r != module));
    }
    graph
}

/// Returns a circle of `graph` if there is one: the modules along it, the
/// first again at the end.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    // Depth-first search, `path` the modules being visited (grey), `done` the
    // ones finished (black).
    fn visit<'a>(
        m: &'a str,
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| *p == m) {
            let mut cycle: Vec<String> = path[i..].iter().map(|s| s.to_string()).collect();
            cycle.push(m.to_string());
            return Some(cycle);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m);
        for next in graph.get(m).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m);
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|m| visit(m, graph, &mut Vec::new(), &mut done))
}

/// Every crate's sources: the tool's, each library's, the Python binding's
/// and the example policy's.
pub(crate) fn crate_sources() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dirs = vec![root.join("src"), root.join("python/src"), root.join("examples/my-policy/src")];
    let crates = std::fs::read_dir(root.join("crates")).expect("crates/");
    dirs.extend(crates.map(|e| e.expect("a crate").path().join("src")).filter(|p| p.is_dir()));
    dirs.sort();
    dirs
}

#[test]
fn no_crates_modules_name_each_other_in_a_circle() {
    let dirs = crate_sources();
    assert!(dirs.len() >= 10, "the crates were not found: {dirs:?}");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let graph_of = |krate: &str| module_graph(&root.join(krate).join("src"));
    // The graphs are read from the real sources: the layers they must show.
    let check = graph_of("crates/check");
    for (m, uses) in [("exec", "ops"), ("ops", "block"), ("ops", "engine"), ("exec", "search"), ("run", "exec")] {
        assert!(check[m].contains(uses), "{m} no longer names {uses}: is the parser still reading the sources?");
    }
    let sim = graph_of("crates/sim");
    for (m, uses) in [("machine", "cpu"), ("stalls", "cpu"), ("workload", "error"), ("run", "sim")] {
        assert!(sim[m].contains(uses), "{m} no longer names {uses}: is the parser still reading the sources?");
    }
    let mut circles = Vec::new();
    for src in &dirs {
        let graph = module_graph(src);
        if let Some(cycle) = find_cycle(&graph) {
            let edges: Vec<String> = graph.iter().map(|(m, u)| format!("    {m} -> {u:?}")).collect();
            circles.push(format!("{}: {}\n  the graph:\n{}", src.display(), cycle.join(" -> "), edges.join("\n")));
        }
    }
    assert!(
        circles.is_empty(),
        "modules name each other in a circle (a lower module must not name a higher one: move what both need \
         below them, or call up through a trait defined below, as the checker's ops call exec through \
         engine::Engine):\n{}",
        circles.join("\n")
    );
}

/// Returns the workspace's crates `manifest` (a `Cargo.toml`) depends on:
/// each dependency given by `path`, in any dependencies section (normal,
/// `dev-`, `build-`, per target), by the name it is given there.
fn path_dependencies(manifest: &str) -> BTreeSet<String> {
    let mut deps = BTreeSet::new();
    // The section's header, and whether it lists dependencies.
    let mut section = String::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.trim_matches(|c| c == '[' || c == ']').to_string();
            continue;
        }
        let Some((key, value)) = line.split_once('=') else { continue };
        let (key, value) = (key.trim(), value.trim());
        if section.ends_with("dependencies") && value.starts_with('{') && value.contains("path") {
            deps.insert(key.to_string());
        }
        // `[dependencies.NAME]`, then `path = "..."`.
        if let Some((head, name)) = section.rsplit_once('.') {
            if head.ends_with("dependencies") && key == "path" {
                deps.insert(name.to_string());
            }
        }
    }
    deps
}

/// The crates' own layers: the registry describes every policy, C ones
/// included, but builds no C policy and does not depend on the C front end
/// (`tlbkit-c`), which depends on it and adds its one entry on top
/// (`tlbkit_c::front::with_policy`); the simulator and the checker build
/// their policies through that door.
#[test]
fn the_registry_does_not_depend_on_the_c_front_end() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let deps = |krate: &str| {
        let path = root.join(krate).join("Cargo.toml");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        path_dependencies(&text)
    };
    let registry = deps("crates/registry");
    assert!(registry.contains("tlbkit-policy"), "the registry's manifest was not read: {registry:?}");
    let beyond: Vec<&String> =
        registry.iter().filter(|d| !["tlbkit-policy", "my-policy"].contains(&d.as_str())).collect();
    assert!(
        beyond.is_empty(),
        "tlbkit-registry depends on {beyond:?}: it depends on the policies only (a C policy is built by the C front \
         end, which depends on the registry: tlbkit_c::front)"
    );
    let c = deps("crates/c");
    assert!(c.contains("tlbkit-registry"), "tlbkit-c no longer builds C policies on top of the registry: {c:?}");
    for above in ["tlbkit-sim", "tlbkit-check", "tlbkit-lab", "tlbkit"] {
        assert!(!c.contains(above), "tlbkit-c depends on {above}, which is above it");
    }
    for front in ["crates/sim", "crates/check"] {
        assert!(deps(front).contains("tlbkit-c"), "{front} no longer builds its policies through tlbkit_c::front");
    }
}

#[test]
fn a_manifests_path_dependencies_are_read_from_every_section() {
    let manifest =
        "[package]\nname = \"x\"\npath = \"no\"\n\n[dependencies]\ntlbkit-policy = { path = \"../policy\" }\n\
                    thiserror = \"2\"\n[dev-dependencies]\ntlbkit-c = { path = \"../c\", features = [] }\n\
                    [target.'cfg(unix)'.dependencies]\nlibc = { version = \"0.2\" }\n\
                    [build-dependencies.tlbkit-sim]\npath = \"../sim\"\n";
    let deps: Vec<String> = path_dependencies(manifest).into_iter().collect();
    assert_eq!(deps, ["tlbkit-c", "tlbkit-policy", "tlbkit-sim"]);
}

#[test]
fn a_circle_of_crate_paths_is_found_and_named() {
    let files = [
        ("a", "use crate::{b::Thing, shape};\n// crate::c in a comment is no reference\nfn f() {}"),
        ("b", "fn g() { let s = \"crate::a\"; crate::c::h(s) }"),
        ("c", "pub(crate) fn h(_: &str) { let _ = crate :: a :: X; }"),
        ("shape", "use super::b;"),
    ];
    let graph: BTreeMap<String, BTreeSet<String>> =
        files.iter().map(|(m, text)| (m.to_string(), crate_refs(&code_only(text)))).collect();
    assert_eq!(graph["a"], ["b", "shape"].into_iter().map(String::from).collect());
    assert_eq!(graph["b"], ["c"].into_iter().map(String::from).collect());
    assert!(graph["shape"].is_empty());
    assert_eq!(find_cycle(&graph), Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]));
    // Without c's path back to a, the layers hold.
    let mut layered = graph.clone();
    layered.get_mut("c").expect("c").clear();
    assert_eq!(find_cycle(&layered), None);
}

#[test]
fn lifetimes_chars_and_raw_strings_do_not_hide_code() {
    let code = code_only("fn f<'a>(x: &'a str) -> char { let _ = r#\"crate::x\"#; let _ = '\\''; crate::y::z(); 'q' }");
    assert_eq!(crate_refs(&code), ["y"].into_iter().map(String::from).collect());
}
