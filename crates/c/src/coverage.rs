//! What a check ran of a C policy: each line of the user's files that holds
//! code, and whether any execution reached it (as TLC's coverage, or the
//! kernel's KCOV, tell what a run exercised).
//!
//! The checker's build compiles the user's files with
//! `-fsanitize-coverage=trace-pc`: the compiler puts a call of
//! `__sanitizer_cov_trace_pc` at the start of every basic block, and the
//! shipped runtime (`tsan.c`) passes its return address to
//! `Lib::mark_reached`, one byte per byte of the object's code, shared by
//! every copy the check's workers load. At the end, [`reached`]:
//! - finds every such call in the object's code (a direct call to the
//!   runtime's function: `call rel32` on x86-64, `bl` on arm64), so that it
//!   knows the blocks never reached as well as those reached, and gives
//!   every byte of a function the block it lies in;
//! - names each byte's file, line and function with the system's
//!   `addr2line` (the object keeps its debug information), as the line of
//!   the user's file it was compiled from (a call of a shim's inline
//!   helper counts as the line that calls it);
//! - merges the objects of every shape of the check (each shape is a build
//!   of its own), line by line.
//!
//! [`changed_lines`] says which lines of a file differ from a base version
//! (the lines of the new file outside a longest common subsequence), so that
//! a check can say whether it reached the change at all.

use crate::build::Lib;
use crate::error::Error;
use crate::source::Sources;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;

/// What a check reached of one of the policy's files.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileCoverage {
    /// The file as named (`context.c`, `context.c@v6.12`).
    pub name: String,
    /// Every line that holds code the compiler kept, and whether it ran.
    pub lines: BTreeMap<u32, bool>,
    /// Every function of the file with code, and whether it ran.
    pub functions: BTreeMap<String, bool>,
}

impl FileCoverage {
    /// Returns the lines with code and those of them reached.
    pub fn counts(&self) -> (usize, usize) {
        (self.lines.len(), self.lines.values().filter(|&&r| r).count())
    }

    /// Returns the lines with code never reached.
    pub fn unreached(&self) -> Vec<u32> {
        self.lines.iter().filter(|(_, &r)| !r).map(|(&l, _)| l).collect()
    }
}

/// Returns what the checks this process ran reached of the files of
/// `sources`, one entry per C file (in the order given), merged over every
/// object built for the checker from them; `None` when no check ran them.
pub fn reached(sources: &Sources) -> Result<Option<Vec<FileCoverage>>, Error> {
    let libs = Lib::checked(sources.digest());
    if libs.is_empty() {
        return Ok(None);
    }
    let mut files: Vec<FileCoverage> = libs[0]
        .code_files
        .iter()
        .map(|(_, name, _)| FileCoverage { name: name.clone(), ..FileCoverage::default() })
        .collect();
    for lib in &libs {
        for (k, (line, function, reached)) in blocks(lib)? {
            let f = &mut files[k];
            *f.lines.entry(line).or_default() |= reached;
            *f.functions.entry(function).or_default() |= reached;
        }
    }
    Ok(Some(files))
}

/// A byte of code: its line, its function, and whether its block ran.
type Block = (u32, String, bool);

/// One frame of an address's chain of inlined calls: function, file, line.
pub(crate) type Frame = (String, String, u32);

/// Returns every byte of code of `lib` that the user's files account for:
/// the file (its place in `lib.code_files`), line, function, and whether
/// the basic block it lies in ran.
///
/// A block starts at its coverage call; a byte belongs to the last call at
/// or before it in its function (the bytes before a function's first call,
/// its prologue, to that call). Each byte is named with `addr2line -i`: of
/// its chain of inlined calls, the innermost in one of the user's files, so
/// that a line that calls an inlined helper of the shims counts as that line.
fn blocks(lib: &Lib) -> Result<Vec<(usize, Block)>, Error> {
    let load = |why: String| Error::Load { path: lib.path.display().to_string(), why };
    let Some(runtime) = lib.symbol("__sanitizer_cov_trace_pc") else {
        return Err(load("the checker's build has no coverage runtime".into()));
    };
    let bytes = std::fs::read(&lib.path).map_err(|e| load(e.to_string()))?;
    let mut calls = Vec::new();
    for seg in crate::elf::code(&bytes).map_err(load)? {
        calls_to(&seg, runtime.value, &mut calls);
    }
    calls.sort_unstable();
    // Every byte of each instrumented function, with the call of its block.
    let mut owned: Vec<(u64, u64)> = Vec::new();
    for f in lib.symbols.iter().filter(|s| !s.object && s.size > 0) {
        let (lo, hi) = (f.value, f.value + f.size);
        let first = calls.partition_point(|&(at, _)| at < lo);
        let last = calls.partition_point(|&(at, _)| at < hi);
        if first == last {
            continue;
        }
        let mut k = first;
        for b in lo..hi {
            while k + 1 < last && calls[k + 1].0 <= b {
                k += 1;
            }
            owned.push((b, calls[k].1));
        }
    }
    let addresses: Vec<u64> = owned.iter().map(|&(b, _)| b).collect();
    let located = addr2line(&lib.path, &addresses)?;
    // Where the build put each of the user's files (`compile`'s tree).
    let places: Vec<String> = lib.code_files.iter().map(|(i, _, name)| format!("user/{i}/{name}")).collect();
    let mut out = Vec::new();
    for (&(_, ret), chain) in owned.iter().zip(located) {
        let user = chain.into_iter().find_map(|(function, file, line)| {
            places.iter().position(|p| file.ends_with(p.as_str())).map(|k| (k, line, function))
        });
        let Some((k, line, function)) = user else { continue };
        // A constructor the compiler made (it runs as the object is loaded).
        if function.starts_with("_sub_I_") || function.starts_with("_GLOBAL__") || line == 0 {
            continue;
        }
        let ran = lib.reached.get(ret as usize).is_some_and(|b| b.load(Ordering::Relaxed) != 0);
        out.push((k, (line, function, ran)));
    }
    Ok(out)
}

/// Appends to `out` every direct call in `seg` to the function at `target`:
/// its address and the address it returns to.
fn calls_to(seg: &crate::elf::Code<'_>, target: u64, out: &mut Vec<(u64, u64)>) {
    let b = seg.bytes;
    if cfg!(target_arch = "aarch64") {
        // BL: 0b100101 then a signed word offset of 26 bits.
        for (k, w) in b.chunks_exact(4).enumerate() {
            let w = u32::from_le_bytes(w.try_into().expect("4 bytes"));
            if w >> 26 == 0b10_0101 {
                let imm = i64::from(((w & 0x03ff_ffff) << 6) as i32 >> 6) * 4;
                let at = seg.vaddr + 4 * k as u64;
                if at.wrapping_add_signed(imm) == target {
                    out.push((at, at + 4));
                }
            }
        }
    } else {
        // CALL rel32: 0xe8 then a signed 32-bit offset from the next instruction.
        for k in 0..b.len().saturating_sub(4) {
            if b[k] == 0xe8 {
                let rel = i32::from_le_bytes(b[k + 1..k + 5].try_into().expect("4 bytes"));
                let at = seg.vaddr + k as u64;
                if (at + 5).wrapping_add_signed(i64::from(rel)) == target {
                    out.push((at, at + 5));
                }
            }
        }
    }
}

/// Names each of `addresses` of the object at `path` with `addr2line`: its
/// chain of inlined calls, innermost first, each as function, file and line.
pub(crate) fn addr2line(path: &std::path::Path, addresses: &[u64]) -> Result<Vec<Vec<Frame>>, Error> {
    let why = |e: String| Error::Load {
        path: path.display().to_string(),
        why: format!("cannot name the lines of the code the check ran with addr2line (binutils): {e}"),
    };
    let mut child = Command::new("addr2line")
        .args(["-a", "-f", "-i", "-e"])
        .arg(path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| why(e.to_string()))?;
    let mut input = String::new();
    for a in addresses {
        input.push_str(&format!("{a:#x}\n"));
    }
    // Written from another thread: addr2line answers as it reads, and a
    // full pipe each way would stop both.
    let mut stdin = child.stdin.take().expect("piped");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().map_err(|e| why(e.to_string()))?;
    let _ = writer.join();
    if !out.status.success() {
        return Err(why(format!("it failed ({})", out.status)));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut located: Vec<Vec<Frame>> = Vec::with_capacity(addresses.len());
    let mut lines = text.lines().peekable();
    while let Some(addr) = lines.next() {
        if !addr.starts_with("0x") {
            continue;
        }
        let mut chain = Vec::new();
        while lines.peek().is_some_and(|l| !l.starts_with("0x")) {
            let function = lines.next().unwrap_or("??").to_string();
            let place = lines.next().unwrap_or("??:0");
            // `FILE:LINE`, maybe followed by ` (discriminator N)`.
            let place = place.split(" (").next().unwrap_or(place);
            let (file, line) = place.rsplit_once(':').unwrap_or((place, "0"));
            chain.push((function, file.to_string(), line.parse().unwrap_or(0)));
        }
        located.push(chain);
    }
    if located.len() != addresses.len() {
        return Err(why(format!("it named {} of {} addresses", located.len(), addresses.len())));
    }
    Ok(located)
}

/// Returns the lines (from 1) of `new` that a line diff against `old` marks
/// as changed or added: those outside a longest common subsequence of the
/// two files' lines.
pub fn changed_lines(old: &[u8], new: &[u8]) -> BTreeSet<u32> {
    let a: Vec<&[u8]> = old.split(|&c| c == b'\n').collect();
    let b: Vec<&[u8]> = new.split(|&c| c == b'\n').collect();
    // The common head and tail first: a patch changes a few lines of a long file.
    let head = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let tail = a[head..].iter().rev().zip(b[head..].iter().rev()).take_while(|(x, y)| x == y).count();
    let (a, b) = (&a[head..a.len() - tail], &b[head..b.len() - tail]);
    // lcs[i][j]: the longest common subsequence of a[i..] and b[j..].
    let w = b.len() + 1;
    let mut lcs = vec![0u32; (a.len() + 1) * w];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i * w + j] =
                if a[i] == b[j] { lcs[(i + 1) * w + j + 1] + 1 } else { lcs[(i + 1) * w + j].max(lcs[i * w + j + 1]) };
        }
    }
    let (mut i, mut j, mut changed) = (0, 0, BTreeSet::new());
    while j < b.len() {
        if i < a.len() && a[i] == b[j] {
            i += 1;
            j += 1;
        } else if i < a.len() && lcs[(i + 1) * w + j] >= lcs[i * w + j + 1] {
            i += 1;
        } else {
            changed.insert((head + j + 1) as u32);
            j += 1;
        }
    }
    changed
}

/// Returns `lines` (ascending) as runs: `112`, `140-143`, `230`.
pub fn runs(lines: &[u32]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut k = 0;
    while k < lines.len() {
        let mut e = k;
        while e + 1 < lines.len() && lines[e + 1] == lines[e] + 1 {
            e += 1;
        }
        out.push(if e == k { lines[k].to_string() } else { format!("{}-{}", lines[k], lines[e]) });
        k = e + 1;
    }
    out
}

/// Returns `lines` (ascending) as ranges: `112, 140-143, 230`.
pub fn ranges(lines: &[u32]) -> String {
    runs(lines).join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_marks_the_lines_changed_and_added_in_the_new_file() {
        let old = b"a\nb\nc\nd\ne\n";
        assert!(changed_lines(old, old).is_empty());
        assert_eq!(changed_lines(old, b"a\nb\nX\nd\ne\n"), BTreeSet::from([3]));
        assert_eq!(changed_lines(old, b"a\nb\nc\nY\nZ\nd\ne\n"), BTreeSet::from([4, 5]));
        // A removed line changes no line of the new file.
        assert!(changed_lines(old, b"a\nb\nd\ne\n").is_empty());
        assert_eq!(changed_lines(b"", b"x\ny"), BTreeSet::from([1, 2]));
    }

    #[test]
    fn lines_read_as_ranges() {
        assert_eq!(ranges(&[112, 140, 141, 142, 143, 230]), "112, 140-143, 230");
        assert_eq!(ranges(&[]), "");
        assert_eq!(ranges(&[7]), "7");
    }
}
