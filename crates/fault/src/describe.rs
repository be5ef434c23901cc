//! Naming the code at an address: the function and, from the object's
//! debug information, the file and line.
//!
//! The object is found with the loader's `dladdr`, or, for objects whose
//! file was removed after loading (the checker's per-thread copies of a
//! compiled C policy), in the ranges their loader named ([`name_code`]).
//! `addr2line` (binutils) reads the object's DWARF; without it the answer
//! is the object and offset.

use std::path::PathBuf;
use std::sync::Mutex;

/// Code ranges named by their loader: `[start, end)`, where the object's
/// address 0 is, and the file whose debug information describes it.
static NAMED: Mutex<Vec<(usize, usize, usize, PathBuf)>> = Mutex::new(Vec::new());

/// Says that the code in `[start, end)`, of an object loaded at `base`, is
/// described by `file` (a copy of `file` loaded from a file since removed).
pub fn name_code(start: usize, end: usize, base: usize, file: PathBuf) {
    NAMED.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((start, end, base, file));
}

/// Returns `pc`'s object file and its offset in it.
fn object(pc: usize) -> Option<(PathBuf, usize)> {
    let named = NAMED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, _, base, file)) = named.iter().find(|(s, e, _, _)| pc >= *s && pc < *e) {
        return Some((file.clone(), pc - base));
    }
    drop(named);
    // SAFETY: a zeroed Dl_info for dladdr to fill.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: any address may be asked about; `info` is valid.
    if unsafe { libc::dladdr(pc as *const libc::c_void, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr's file name is a NUL-terminated string of the loader's.
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) }.to_string_lossy().into_owned();
    let file = if name.is_empty() { std::env::current_exe().ok()? } else { PathBuf::from(name) };
    Some((file, pc - info.dli_fbase as usize))
}

/// Returns `function, file:line` for `pc` (an instruction's address when
/// `exact`, a return address otherwise), as far as can be told. Where the
/// compiler inlined the code, the innermost function comes first and the
/// function it was inlined in follows (`atomic64_add_return_relaxed,
/// kernel.h:184, inlined in new_context, context.c:203`): an optimised
/// object's line table may give a loop the line of the code beside it.
///
/// Answers are kept per object and offset: a search that goes on past its
/// violations meets the same fault at every execution that reaches it, and
/// `addr2line` is a process each time.
pub(crate) fn site(pc: usize, exact: bool) -> String {
    let Some((file, off)) = object(pc) else { return format!("{pc:#x}") };
    let off = if exact { off } else { off.saturating_sub(1) };
    let key = (file, off);
    let known = SITES.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&key).cloned();
    if let Some(s) = known {
        return s;
    }
    let s = ask_addr2line(&key.0, off);
    SITES.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(key, s.clone());
    s
}

/// What [`site`] has answered, by object file and offset.
static SITES: Mutex<std::collections::BTreeMap<(PathBuf, usize), String>> =
    Mutex::new(std::collections::BTreeMap::new());

/// Runs `addr2line` for the code at `off` in `file`, as [`site`] describes.
fn ask_addr2line(file: &std::path::Path, off: usize) -> String {
    let short = |p: &str| p.rsplit('/').next().unwrap_or(p).to_string();
    let out = std::process::Command::new("addr2line")
        .args(["-f", "-i", "-C", "-e"])
        .arg(file)
        .arg(format!("{off:#x}"))
        .output()
        .ok()
        .filter(|o| o.status.success());
    let text = out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let frames: Vec<(String, Option<String>)> = lines
        .chunks(2)
        .filter(|c| c.len() == 2 && !c[0].starts_with("??"))
        .map(|c| {
            let line = Some(c[1]).filter(|l| !l.starts_with("??")).map(|l| short(l.split(" (").next().unwrap_or(l)));
            (c[0].to_string(), line)
        })
        .collect();
    let show = |(f, l): &(String, Option<String>)| match l {
        Some(l) => format!("{f}, {l}"),
        None => f.clone(),
    };
    match frames.as_slice() {
        [] => format!("{}+{off:#x}", short(&file.to_string_lossy())),
        [only] if only.1.is_none() => format!("{} ({}+{off:#x})", only.0, short(&file.to_string_lossy())),
        [only] => show(only),
        [inner, .., outer] => format!("{}, inlined in {}", show(inner), show(outer)),
    }
}
