//! Naming what a data race touched and where, in the kernel's terms: the
//! code by function, offset and line, the memory by the file's objects
//! (per-CPU elements, an mm's fields, the blocks it allocated), for
//! [`race::Race`] reports.

use super::State;
use crate::race;
use std::ffi::CStr;

/// Says where a plain access was made: the function and, where the system's
/// `addr2line` can tell, the file and line.
fn site(lib: &crate::Lib, load_base: usize, pc: usize) -> String {
    let off = pc.wrapping_sub(load_base) as u64;
    let func = lib
        .symbols
        .iter()
        .filter(|s| !s.object && s.value <= off && off < s.value + s.size.max(1))
        .map(|s| format!("{}+{:#x}", s.name, off - s.value))
        .next()
        .unwrap_or_else(|| format!("{off:#x}"));
    let line = std::process::Command::new("addr2line")
        .arg("-e")
        .arg(&lib.path)
        .arg(format!("{:#x}", off.saturating_sub(1)))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|l| !l.starts_with("??"))
        .map(|l| l.rsplit('/').next().unwrap_or(&l).to_string());
    match line {
        Some(l) => format!("{func}, {l}"),
        None => func,
    }
}

/// One entry of the x86 glue's `tlbkit_fields` (`struct tlbkit_field`).
#[repr(C)]
pub(crate) struct GlueField {
    pub(crate) name: *const std::ffi::c_char,
    pub(crate) object: *const std::ffi::c_char,
    pub(crate) offset: usize,
    pub(crate) bytes: usize,
    pub(crate) kind: i32,
}

/// Names an address in one of the glue's `struct mm_struct`s by the
/// kernel's names: `init_mm.pgd`, `mm[1].context.ctx_id` (the fields the x86
/// glue's `tlbkit_fields` names; arm64's `context.id` and `context.pinned`
/// from `tlbkit_layout`), or `mm[1]+0x40` for another.
fn mm_place(lib: &crate::Lib, load_base: usize, addr: usize) -> Option<String> {
    let sym = |n: &str| lib.symbol(n).map(|s| (load_base + s.value as usize, s.size as usize));
    let inside = |(a, n): (usize, usize)| addr >= a && addr < a + n;
    let layout = sym("tlbkit_layout")?.0 as *const usize;
    // SAFETY: the glue's `const unsigned long tlbkit_layout[4]`.
    let (size, first, second) = unsafe { (*layout, *layout.add(1), *layout.add(2)) };
    let (who, off) = match (sym("init_mm").filter(|&r| inside(r)), sym("tlbkit_mm").filter(|&r| inside(r))) {
        (Some((a, _)), _) => ("init_mm".to_string(), addr - a),
        (None, Some((a, _))) if size > 0 => (format!("mm[{}]", (addr - a) / size), (addr - a) % size),
        _ => return None,
    };
    let mut fields: Vec<(String, usize, usize)> = vec![("pgd".into(), 0, 8)];
    match sym("tlbkit_fields") {
        Some((table, _)) => {
            let mut p = table as *const GlueField;
            loop {
                // SAFETY: the glue's array, ended by an entry with no name.
                let e = unsafe { &*p };
                if e.name.is_null() {
                    break;
                }
                if e.object.is_null() {
                    // SAFETY: the glue's string literals.
                    let name = unsafe { CStr::from_ptr(e.name) }.to_string_lossy().into_owned();
                    fields.push((name, e.offset, e.bytes));
                }
                // SAFETY: within the array, before its end marker.
                p = unsafe { p.add(1) };
            }
        }
        None => fields.extend([("context.id".to_string(), first, 8), ("context.pinned".to_string(), second, 4)]),
    }
    Some(match fields.iter().find(|(_, o, b)| off >= *o && off < o + b) {
        Some((n, o, _)) if off == *o => format!("{who}.{n}"),
        Some((n, o, _)) => format!("{who}.{n}+{:#x}", off - o),
        None => format!("{who}+{off:#x}"),
    })
}

/// Returns the element size of an object of `size` bytes that is a per-CPU
/// variable (`DEFINE_PER_CPU` of a 32- or 64-bit type: an array of one
/// element per CPU), or `None` for any other object.
pub(crate) fn per_cpu_stride(size: usize, ncpus: usize) -> Option<usize> {
    (ncpus > 1 && size > 8 && size.is_multiple_of(ncpus) && matches!(size / ncpus, 4 | 8)).then(|| size / ncpus)
}

/// Names the memory at `addr`: the file's object (a per-CPU element, or at
/// an offset), or the block one of its pointers holds.
fn place(state: &State, copy_syms: &crate::Lib, load_base: usize, ncpus: usize, addr: usize) -> String {
    if let Some(name) = mm_place(copy_syms, load_base, addr) {
        return name;
    }
    for s in copy_syms.symbols.iter().filter(|s| s.object) {
        let a = load_base + s.value as usize;
        if addr >= a && addr < a + s.size as usize {
            if let Some(stride) = per_cpu_stride(s.size as usize, ncpus) {
                return format!("{}[cpu{}]", s.name, (addr - a) / stride);
            }
            return if addr == a { s.name.clone() } else { format!("{}+{:#x}", s.name, addr - a) };
        }
    }
    for &(b, n) in state.heap.borrow().iter() {
        if addr >= b && addr < b + n {
            let owner = copy_syms.symbols.iter().filter(|s| s.object && s.size == 8).find(|s| {
                // SAFETY: a pointer-sized object of the copy.
                unsafe { *((load_base + s.value as usize) as *const usize) == b }
            });
            return match owner {
                Some(s) => format!("word {} of *{}", (addr - b) / 8, s.name),
                None => format!("a block the file allocated, +{:#x}", addr - b),
            };
        }
    }
    format!("{addr:#x}")
}

/// Describes a data race in the kernel's terms.
pub(crate) fn describe(state: &State, race: &race::Race) -> String {
    let lib = &state.lib;
    let ncpus = state.held.borrow().len();
    let kind = |w: bool| if w { "write" } else { "read" };
    let locks = |l: &[usize]| {
        if l.is_empty() {
            "no lock".to_string()
        } else {
            l.iter().map(|&w| place(state, lib, state.load_base, ncpus, w)).collect::<Vec<_>>().join(", ")
        }
    };
    let (c1, w1, pc1, l1) = &race.first;
    let (c2, w2, pc2, l2) = &race.second;
    // A marked write's code address is not kept: it is named as what it is.
    let access = |marked: bool, w: bool, pc: usize| {
        if marked {
            ("marked write".to_string(), "an atomic or WRITE_ONCE".to_string())
        } else {
            (format!("plain {}", kind(w)), site(lib, state.load_base, pc))
        }
    };
    let (a1, s1) = access(race.marked == Some(true), *w1, *pc1);
    let (a2, s2) = access(race.marked == Some(false), *w2, *pc2);
    format!(
        "{a2} of {} by cpu{c2} ({s2}, holding {}) races with cpu{c1}'s {a1} of it ({s1}, holding {}): \
         no lock in common, and at least one writes",
        place(state, lib, state.load_base, ncpus, race.addr),
        locks(l2),
        locks(l1),
    )
}
