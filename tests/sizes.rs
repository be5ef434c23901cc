//! Rooms with walls, measured: no source file of any crate holds more than
//! 1,000 lines of non-test code, no function is longer than 150 lines and no
//! `struct` has more than 20 fields. A struct that would need more is
//! several things sharing one name: give each part its own type, which owns
//! its fields and is reached through its methods.
//!
//! The sources are read as `layers.rs` reads them (comments and literals left
//! out, line numbers kept); test code (an item under `#[cfg(test)]`,
//! `tests.rs` and `*_tests.rs` files) is not counted.

use crate::layers::{code_only, crate_sources, rust_files};
use std::path::Path;

const MAX_FILE_LINES: usize = 1000;
const MAX_FN_LINES: usize = 150;
const MAX_FIELDS: usize = 20;

/// `code` (from [`code_only`]) with every item under `#[cfg(test)]` blanked,
/// newlines kept.
fn without_tests(code: &str) -> String {
    let mut out: Vec<char> = code.chars().collect();
    let mut from = 0;
    while let Some(k) = code[from..].find("#[cfg(test)]") {
        let at = from + k;
        // Char and byte indices agree: the code is ASCII outside literals,
        // and literals are blanked. Items end at their block or at `;`.
        let rest = &code[at..];
        let end = match (rest.find('{'), rest.find(';')) {
            (Some(b), semi) if semi.is_none_or(|s| b < s) => at + b + matching(&rest[b..]),
            (_, Some(s)) => at + s + 1,
            _ => code.len(),
        };
        for c in &mut out[at..end.min(code.len())] {
            if *c != '\n' {
                *c = ' ';
            }
        }
        from = end.min(code.len());
    }
    out.into_iter().collect()
}

/// The length, in bytes, of the block that `s` opens with its first `{`,
/// the closing brace included (all of `s` if it never closes).
fn matching(s: &str) -> usize {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
    }
    s.len()
}

fn line_of(code: &str, at: usize) -> usize {
    code[..at].matches('\n').count() + 1
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Each occurrence of the keyword `kw` followed by a name: (byte offset,
/// name).
fn items<'a>(code: &'a str, kw: &str) -> Vec<(usize, &'a str)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(k) = code[from..].find(kw) {
        let at = from + k;
        from = at + kw.len();
        if code[..at].chars().next_back().is_some_and(is_ident) {
            continue;
        }
        let rest = &code[from..];
        if !rest.starts_with(char::is_whitespace) {
            continue;
        }
        let rest = rest.trim_start();
        let end = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
        if end > 0 {
            out.push((at, &rest[..end]));
        }
    }
    out
}

/// Every function with a body in `code`: (name, first line, lines).
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let mut out = Vec::new();
    for (at, name) in items(code, "fn") {
        let rest = &code[at..];
        let Some(open) = rest.find('{') else { continue };
        if rest.find(';').is_some_and(|s| s < open) {
            continue; // A declaration without a body.
        }
        let close = at + open + matching(&rest[open..]);
        let (first, last) = (line_of(code, at), line_of(code, close.saturating_sub(1)));
        out.push((name.to_string(), first, last - first + 1));
    }
    out
}

/// Every struct with named fields in `code`: (name, line, fields).
fn structs(code: &str) -> Vec<(String, usize, usize)> {
    let mut out = Vec::new();
    for (at, name) in items(code, "struct") {
        let rest = &code[at..];
        let Some(open) = rest.find('{') else { continue };
        if rest[..open].contains([';', '(']) {
            continue; // A unit or tuple struct.
        }
        let body = &rest[open + 1..open + matching(&rest[open..]) - 1];
        out.push((name.to_string(), line_of(code, at), fields(body)));
    }
    out
}

/// The number of fields in a struct's body: the parts between commas at its
/// own level that hold more than attributes.
fn fields(body: &str) -> usize {
    let mut depth = 0i32;
    let mut parts = vec![String::new()];
    let chars: Vec<char> = body.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        match c {
            '(' | '[' | '{' | '<' => depth += 1,
            '>' if i > 0 && chars[i - 1] == '-' => {}
            ')' | ']' | '}' | '>' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(String::new());
                continue;
            }
            _ => {}
        }
        parts.last_mut().expect("a part").push(c);
    }
    parts
        .iter()
        .filter(|p| {
            // Leave out the attributes (`#[...]`), then see what is left.
            let mut rest = p.trim();
            while let Some(attr) = rest.strip_prefix("#[") {
                let mut depth = 1;
                let end = attr
                    .char_indices()
                    .find(|&(_, c)| {
                        depth += match c {
                            '[' => 1,
                            ']' => -1,
                            _ => 0,
                        };
                        depth == 0
                    })
                    .map_or(attr.len(), |(i, _)| i + 1);
                rest = attr[end..].trim_start();
            }
            !rest.is_empty()
        })
        .count()
}

struct Source {
    path: String,
    code: String,
}

fn sources() -> Vec<Source> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in crate_sources() {
        rust_files(&dir, &mut files);
    }
    files.sort();
    files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("cannot read {}: {e}", f.display()));
            let path = f.strip_prefix(root).unwrap_or(f).display().to_string();
            Source { path, code: without_tests(&code_only(&text)) }
        })
        .collect()
}

#[test]
fn no_file_holds_more_than_a_thousand_lines_of_code() {
    let sources = sources();
    assert!(sources.len() > 100, "the sources were not found: {}", sources.len());
    let long: Vec<String> = sources
        .iter()
        .map(|s| (s, s.code.lines().filter(|l| !l.trim().is_empty()).count()))
        .filter(|(_, n)| *n > MAX_FILE_LINES)
        .map(|(s, n)| format!("  {}: {n} lines of code", s.path))
        .collect();
    assert!(
        long.is_empty(),
        "files over {MAX_FILE_LINES} lines of non-test code (split each by job into a module of files):\n{}",
        long.join("\n")
    );
}

/// Measures every item `items` finds in every source: how many there are,
/// and one line for each whose size passes `limit`.
fn over(items: fn(&str) -> Vec<(String, usize, usize)>, kind: &str, unit: &str, limit: usize) -> (usize, Vec<String>) {
    let (mut seen, mut over) = (0, Vec::new());
    for s in sources() {
        for (name, line, n) in items(&s.code) {
            seen += 1;
            if n > limit {
                over.push(format!("  {}:{line}: {kind} {name}, {n} {unit}", s.path));
            }
        }
    }
    (seen, over)
}

#[test]
fn no_function_is_longer_than_150_lines() {
    let (seen, long) = over(functions, "fn", "lines", MAX_FN_LINES);
    assert!(seen > 1000, "the functions were not found: {seen}");
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines (give each step its own function, named for what it does):\n{}",
        long.join("\n")
    );
}

#[test]
fn no_struct_has_more_than_20_fields() {
    let (seen, wide) = over(structs, "struct", "fields", MAX_FIELDS);
    assert!(seen > 100, "the structs were not found: {seen}");
    assert!(
        wide.is_empty(),
        "structs over {MAX_FIELDS} fields (split each into parts that own their fields, as the simulator's \
         `Sim` holds its scheduler, kernel and memory state):\n{}",
        wide.join("\n")
    );
}

#[test]
fn functions_structs_and_test_code_are_measured() {
    let src = "pub struct S {\n    #[serde(default)]\n    a: u32,\n    b: Vec<(u8, u8)>,\n    c: fn(u8) -> u8,\n}\n\
               struct T(u8);\n\
               fn f() {\n    let s = S { a: 1 };\n    if true {\n    }\n}\n\
               trait X {\n    fn g(&self);\n}\n\
               #[cfg(test)]\nmod tests {\n    fn h() {}\n}\n";
    let code = without_tests(&code_only(src));
    assert_eq!(structs(&code), vec![("S".to_string(), 1, 3)]);
    assert_eq!(functions(&code), vec![("f".to_string(), 8, 5)]);
    assert!(!code.contains("fn h"));
    assert_eq!(code.lines().count(), src.lines().count());
}
