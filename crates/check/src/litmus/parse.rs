//! Reads an isla `.litmus.toml` system litmus test into a [`Test`].
//!
//! # Design
//!
//! The format is TOML (isla's `isla-litmus` reads it), but the tests use a
//! small part of it: `key = "string"`, `key = """multi-line string"""`,
//! `key = ["a", "b"]`, `key = {}` and `[table.headers]`. This module reads
//! that part itself, line by line, so that every error names the line of the
//! file it is about. Inside the strings are three small languages, each read
//! here too: the page-table setup (`x |-> pa1; *pa1 = 1;`), the assembly of
//! each thread and fault handler, and the final assertion
//! (`1:X0 = 1 & 1:X2 = 0`).
//!
//! What is refused, with a [`LitmusError`] that says so: any instruction,
//! register value or setup statement outside the subset tlbkit models (the
//! module documentation of [`crate::litmus`] lists it). An exception
//! handler (`[section.threadN_el1_handler...]`, at `VBAR_EL1` + 0x000, 0x200
//! or 0x400) is straight-line code of the same instructions.

use super::{Addr, Barrier, Cond, Desc, Handler, Instr, Reg, Test, Thread, Tlbi, TlbiScope, Val, ELR, ESR, MODE, SPSR};
use std::collections::BTreeMap;
use std::fmt;

/// What is wrong with a litmus file, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct LitmusError {
    /// The file, as given.
    pub file: String,
    /// The line (1-based), or 0 where the problem is the file as a whole.
    pub line: usize,
    /// What is wrong, and what tlbkit accepts instead.
    pub problem: String,
}

impl fmt::Display for LitmusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.problem)
        } else {
            write!(f, "{}:{}: {}", self.file, self.line, self.problem)
        }
    }
}

/// One TOML value with the line it starts on.
#[derive(Debug, Clone)]
struct Item {
    line: usize,
    value: TomlVal,
}

#[derive(Debug, Clone)]
enum TomlVal {
    Str(String),
    List(Vec<String>),
    EmptyTable,
}

/// Returns the test in `text`, read from `file` (named in errors).
pub fn parse(file: &str, text: &str) -> Result<Test, LitmusError> {
    let err = |line: usize, problem: String| LitmusError { file: file.to_string(), line, problem };
    let tables = read_toml(text).map_err(|(l, p)| err(l, p))?;
    let top = tables.get("").cloned().unwrap_or_default();
    let (_, name) = get_str(&top, "name").ok_or_else(|| err(0, "no `name = \"...\"` at the top".into()))?;
    if let Some((line, arch)) = get_str(&top, "arch") {
        if arch != "AArch64" {
            return Err(err(line, format!("arch '{arch}': tlbkit reads AArch64 tests only")));
        }
    }
    let symbolic: Vec<String> = match top.get("symbolic") {
        Some(Item { value: TomlVal::List(l), .. }) => l.clone(),
        _ => return Err(err(0, "no `symbolic = [\"x\", ...]` list of virtual addresses".into())),
    };
    let (setup_line, setup) =
        get_str(&top, "page_table_setup").ok_or_else(|| err(0, "no `page_table_setup = \"\"\"...\"\"\"`".into()))?;
    let mut test = Test {
        name,
        vas: symbolic,
        pas: Vec::new(),
        mapping: Vec::new(),
        memory: Vec::new(),
        threads: Vec::new(),
        assertion: Cond::True,
    };
    read_setup(&mut test, setup_line, &setup).map_err(|(l, p)| err(l, p))?;

    let mut n = 0;
    while let Some(table) = tables.get(&format!("thread.{n}")) {
        let thread = read_thread(&test, &tables, table, n).map_err(|(l, p)| err(l, p))?;
        test.threads.push(thread);
        n += 1;
    }
    if test.threads.is_empty() {
        return Err(err(0, "no [thread.0]: a test has at least one thread".into()));
    }
    for key in tables.keys() {
        let known = key.is_empty()
            || key == "final"
            || key == "types"
            || key.starts_with("meta")
            || key.strip_prefix("thread.").is_some_and(|k| {
                let k = k.strip_suffix(".reset").unwrap_or(k);
                k.parse::<usize>().is_ok_and(|i| i < n)
            })
            || handler_of(key).is_some_and(|i| i < n);
        if !known {
            let line = tables[key].values().map(|i| i.line).min().unwrap_or(0);
            return Err(err(
                line.saturating_sub(1),
                format!(
                    "[{key}]: tlbkit reads [thread.N], [thread.N.reset], [section.threadN_el1_handler...] and [final]"
                ),
            ));
        }
    }
    let fin = tables.get("final").ok_or_else(|| err(0, "no [final] table with an `assertion`".into()))?;
    let (line, assertion) =
        get_str(fin, "assertion").ok_or_else(|| err(0, "[final] has no `assertion = \"...\"`".into()))?;
    test.assertion = read_cond(&test, &assertion).map_err(|p| err(line, p))?;
    Ok(test)
}

/// Reads thread `n` of `test` from its tables: its code, its reset
/// registers (and `VBAR_EL1`, `PSTATE.EL`, `ELR_EL1`, `SPSR_EL1`,
/// `TTBR0_EL1`), and its exception handlers; an error is (line, problem).
fn read_thread(
    test: &Test,
    tables: &Tables,
    table: &BTreeMap<String, Item>,
    n: usize,
) -> Result<Thread, (usize, String)> {
    let (code_line, code) =
        get_str(table, "code").ok_or_else(|| (0, format!("[thread.{n}] has no `code = \"\"\"...\"\"\"`")))?;
    let (instrs, labels) = read_code(code_line, &code)?;
    let mut regs = BTreeMap::new();
    let mut vbar = None;
    let mut asid = 0;
    if let Some(reset) = tables.get(&format!("thread.{n}.reset")) {
        for (key, item) in reset {
            let TomlVal::Str(s) = &item.value else {
                return Err((item.line, format!("{key}: a register's value is a string")));
            };
            let (reg, v) = match key.as_str() {
                // `__isla_*`: hints to isla.
                k if k.starts_with("__isla_") => continue,
                "VBAR_EL1" => {
                    vbar = Some(read_val(test, s).map_err(|p| (item.line, p))?);
                    continue;
                }
                "PSTATE.EL" => match read_int(s) {
                    Some(0) => (MODE, Val::Int(0)),
                    Some(1) => (MODE, Val::Int(4)),
                    _ => return Err((item.line, format!("PSTATE.EL '{s}': tlbkit runs threads at EL0 or EL1"))),
                },
                "ELR_EL1" => {
                    let label = s.trim().trim_end_matches(':');
                    let at = labels
                        .get(label)
                        .ok_or_else(|| (item.line, format!("ELR_EL1 '{s}': a label of the thread's code")))?;
                    (ELR, Val::Code(0, *at))
                }
                "SPSR_EL1" => (SPSR, read_val(test, s).map_err(|p| (item.line, p))?),
                "TTBR0_EL1" => {
                    asid = read_ttbr(s).ok_or_else(|| {
                        (item.line, format!("TTBR0_EL1 '{s}': tlbkit reads ttbr(asid=n, base=page_table_base)"))
                    })?;
                    continue;
                }
                _ => {
                    let reg = read_reg(key).ok_or_else(|| {
                        (
                            item.line,
                            format!(
                                "'{key}': tlbkit sets general registers X0-X30 (or R0-R30), VBAR_EL1, \
                                 PSTATE.EL, ELR_EL1, SPSR_EL1 and TTBR0_EL1 only"
                            ),
                        )
                    })?;
                    (reg, read_val(test, s).map_err(|p| (item.line, p))?)
                }
            };
            regs.insert(reg, v);
        }
    }
    let mut handlers = Vec::new();
    for (key, section) in tables.range(format!("section.thread{n}_el1_handler")..) {
        if handler_of(key).is_none_or(|k| k != n) {
            continue;
        }
        let line = section.values().map(|i| i.line).min().unwrap_or(1).saturating_sub(1);
        let (code_line, code) = get_str(section, "code").ok_or_else(|| (line, format!("[{key}] has no code")))?;
        let (at_line, at) = get_str(section, "address").ok_or_else(|| (line, format!("[{key}] has no `address`")))?;
        let at = read_int(&at).ok_or_else(|| (at_line, format!("[{key}]: address '{at}' is not a number")))?;
        // A handler at none of the thread's synchronous exception vectors
        // never runs (a test may give one to a thread that sets no
        // VBAR_EL1).
        let vector = match vbar {
            Some(Val::Int(base)) => at.checked_sub(base).filter(|o| [0, 0x200, 0x400].contains(o)),
            _ => None,
        };
        let Some(offset) = vector else { continue };
        let (code, labels) = read_code(code_line, &code)?;
        handlers.push(Handler { offset, code, labels });
    }
    Ok(Thread { code: instrs, labels, regs, handlers, asid })
}

/// A string's line and value, if `table` has it under `key`.
fn get_str(table: &BTreeMap<String, Item>, key: &str) -> Option<(usize, String)> {
    match table.get(key) {
        Some(Item { line, value: TomlVal::Str(s) }) => Some((*line, s.clone())),
        _ => None,
    }
}

type Labels = BTreeMap<String, usize>;

type Tables = BTreeMap<String, BTreeMap<String, Item>>;

/// Reads the TOML the tests use into tables of keys; an error is (line, problem).
fn read_toml(text: &str) -> Result<Tables, (usize, String)> {
    let mut tables: Tables = BTreeMap::new();
    tables.insert(String::new(), BTreeMap::new());
    let mut current = String::new();
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    while let Some((ln, raw)) = lines.next() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(h) = line.strip_prefix('[') {
            let h = h.strip_suffix(']').ok_or((ln, format!("'{line}': a table header ends with ']'")))?;
            current = h.trim().to_string();
            tables.entry(current.clone()).or_default();
            continue;
        }
        let (key, rest) = line.split_once('=').ok_or((ln, format!("'{line}': expected `key = value`")))?;
        let key = key.trim().trim_matches('"').to_string();
        let rest = rest.trim();
        let value = if let Some(body) = rest.strip_prefix("\"\"\"") {
            if let Some(one) = body.strip_suffix("\"\"\"") {
                TomlVal::Str(one.to_string())
            } else {
                let mut s = String::from(body);
                loop {
                    let (_, more) =
                        lines.next().ok_or((ln, format!("{key}: the string opened here is not closed with \"\"\"")))?;
                    if let Some(end) = more.trim_end().strip_suffix("\"\"\"") {
                        s.push('\n');
                        s.push_str(end);
                        break;
                    }
                    s.push('\n');
                    s.push_str(more);
                }
                TomlVal::Str(s)
            }
        } else if let Some(body) = rest.strip_prefix('"') {
            let end = body.find('"').ok_or((ln, format!("{key}: the string is not closed with '\"'")))?;
            let after = body[end + 1..].trim();
            if !after.is_empty() && !after.starts_with('#') {
                return Err((ln, format!("{key}: '{after}' after the string")));
            }
            TomlVal::Str(body[..end].to_string())
        } else if let Some(body) = rest.strip_prefix('[') {
            let mut body = body.to_string();
            while !body.trim_end().ends_with(']') {
                let (_, more) =
                    lines.next().ok_or((ln, format!("{key}: the list opened here is not closed with ']'")))?;
                body.push_str(more.split('#').next().unwrap_or(""));
            }
            let body = body.trim_end().strip_suffix(']').unwrap_or_default();
            let items = body
                .split(',')
                .map(|s| s.trim())
                .filter(|s| !s.is_empty())
                .map(|s| {
                    s.strip_prefix('"')
                        .and_then(|s| s.strip_suffix('"'))
                        .map(str::to_string)
                        .ok_or((ln, format!("{key}: each item of the list is a quoted string")))
                })
                .collect::<Result<_, _>>()?;
            TomlVal::List(items)
        } else if rest.replace(' ', "") == "{}" {
            TomlVal::EmptyTable
        } else {
            return Err((ln, format!("{key}: '{rest}' is not a string, a list of strings or {{}}")));
        };
        let table = tables.entry(current.clone()).or_default();
        if table.insert(key.clone(), Item { line: ln, value }).is_some() {
            return Err((ln, format!("{key} is given twice in [{current}]")));
        }
    }
    Ok(tables)
}

/// Reads the page-table setup: `physical`, `x |-> pa`, `x ?-> ...`, `*pa = n`.
fn read_setup(test: &mut Test, first: usize, text: &str) -> Result<(), (usize, String)> {
    let mut initial: BTreeMap<usize, Option<Desc>> = BTreeMap::new();
    let mut memory: BTreeMap<usize, u64> = BTreeMap::new();
    for (i, raw) in text.lines().enumerate() {
        let ln = first + i;
        for stmt in raw.split(';') {
            let s = stmt.trim();
            if s.is_empty() || s.starts_with("//") {
                continue;
            }
            let words: Vec<&str> = s.split_whitespace().collect();
            match words.as_slice() {
                ["physical", names @ ..] => {
                    for n in names {
                        test.pas.push(n.to_string());
                    }
                }
                ["option", "default_tables", "=", "true"] | ["identity", _, "with", "code"] => {}
                ["intermediate", ..] => {}
                [va, "?->", "invalid", "at", "level", "2"] => {
                    // A possible value of the level-2 descriptor, which the
                    // test's own code writes (`pte2(x, page_table_base)`).
                    test.va(va).ok_or((ln, format!("'{va}' is not in the test's `symbolic` list")))?;
                }
                [va, "?->", target] if target.starts_with("raw(") && target.ends_with(')') => {
                    // A possible raw value of the descriptor, written by the
                    // test's own code: an invalid descriptor (an even number)
                    // is a number in memory like any other.
                    test.va(va).ok_or((ln, format!("'{va}' is not in the test's `symbolic` list")))?;
                    read_int(&target[4..target.len() - 1]).filter(|n| n % 2 == 0).ok_or((
                        ln,
                        format!("'{target}': tlbkit reads a raw descriptor only as an invalid one, raw(even number)"),
                    ))?;
                }
                [va, arrow @ ("|->" | "?->"), target, attrs @ ..] => {
                    let v = test.va(va).ok_or((ln, format!("'{va}' is not in the test's `symbolic` list")))?;
                    let desc = if *target == "invalid" {
                        if !attrs.is_empty() {
                            return Err((
                                ln,
                                format!("'{s}': tlbkit maps `invalid` at level 3 only, with no attributes"),
                            ));
                        }
                        None
                    } else {
                        let pa = test.pa(target).ok_or((
                            ln,
                            format!("'{target}': a mapping's target is a `physical` address or `invalid`"),
                        ))?;
                        Some(Desc { pa, ap: read_ap(attrs).map_err(|e| (ln, e))? })
                    };
                    if *arrow == "|->" && initial.insert(v, desc).is_some() {
                        return Err((ln, format!("'{va}' is mapped twice initially")));
                    }
                }
                [loc, "=", value] if loc.starts_with('*') => {
                    let name = &loc[1..];
                    // `*x` is memory at virtual address x, through its initial mapping.
                    let pa = test
                        .pa(name)
                        .or_else(|| test.va(name).and_then(|v| initial.get(&v).copied().flatten().map(|d| d.pa)));
                    let pa = pa.ok_or((
                        ln,
                        format!("'{loc}': initial memory is set by `*pa = n` or `*x = n` (x mapped above)"),
                    ))?;
                    let n = read_int(value).ok_or((ln, format!("'{value}': initial memory holds a number")))?;
                    memory.insert(pa, n);
                }
                _ => {
                    return Err((
                        ln,
                        format!(
                            "'{s}': tlbkit reads `physical`, `x |-> pa`, `x |-> invalid`, `x ?-> ...`, `*pa = n`, \
                             `identity ... with code`, `with [AP = ...]` (no other attributes, levels or stage 2)"
                        ),
                    ))
                }
            }
        }
    }
    test.mapping = (0..test.vas.len()).map(|v| initial.get(&v).copied().flatten()).collect();
    test.memory = (0..test.pas.len()).map(|p| memory.get(&p).copied().unwrap_or(0)).collect();
    Ok(())
}

/// Reads a mapping's attributes, the words after its target: none (`AP =
/// 0b01`, read-write at EL0 and EL1, isla's default), or `with [AP = 0bNN]
/// and default` (or without `and default`); returns `AP[2:1]`.
fn read_ap(attrs: &[&str]) -> Result<u8, String> {
    if attrs.is_empty() {
        return Ok(0b01);
    }
    let text = attrs.join(" ");
    let ap = text
        .strip_prefix("with [")
        .and_then(|r| r.strip_suffix("] and default").or_else(|| r.strip_suffix(']')))
        .and_then(|r| r.split_once('='))
        .filter(|(k, _)| k.trim() == "AP")
        .and_then(|(_, v)| read_int(v))
        .filter(|ap| *ap <= 0b11);
    ap.map(|ap| ap as u8).ok_or(format!(
        "'{text}': tlbkit reads a mapping's attributes as `with [AP = 0bNN]` (its stage 1 access permissions, \
         0b00 to 0b11), optionally `and default`"
    ))
}

/// Reads `X5` or `R5` (or `W5`, a 32-bit view of the same register).
fn read_reg(s: &str) -> Option<Reg> {
    let s = s.trim();
    let n = s.strip_prefix('X').or_else(|| s.strip_prefix('R')).or_else(|| s.strip_prefix('W'))?;
    n.parse::<u8>().ok().filter(|n| *n <= 30)
}

/// Reads `ttbr(asid=n, base=page_table_base)` (the test's one page table):
/// the ASID.
fn read_ttbr(s: &str) -> Option<u16> {
    let args = s.trim().strip_prefix("ttbr(")?.strip_suffix(')')?;
    let mut asid = None;
    for arg in args.split(',') {
        match arg.split_once('=').map(|(k, v)| (k.trim(), v.trim()))? {
            ("asid", v) => asid = Some(u16::try_from(read_int(v)?).ok()?),
            ("base", "page_table_base") => {}
            _ => return None,
        }
    }
    asid
}

/// Reads `ELR_EL1` or `SPSR_EL1`.
fn read_sys(s: &str) -> Option<Reg> {
    match s.trim().to_ascii_uppercase().as_str() {
        "ELR_EL1" => Some(ELR),
        "SPSR_EL1" => Some(SPSR),
        "ESR_EL1" => Some(ESR),
        _ => None,
    }
}

fn read_int(s: &str) -> Option<u64> {
    let s = s.trim().trim_start_matches('#');
    if let Some(b) = s.strip_prefix("0b") {
        u64::from_str_radix(b, 2).ok()
    } else if let Some(h) = s.strip_prefix("0x") {
        u64::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

/// Reads a register's initial value or an assertion's operand.
fn read_val(test: &Test, s: &str) -> Result<Val, String> {
    let s = s.trim();
    fn inner<'s>(s: &'s str, f: &str) -> Option<&'s str> {
        s.strip_prefix(f).and_then(|r| r.strip_prefix('(')).and_then(|r| r.strip_suffix(')'))
    }
    if let Some(args) = inner(s, "extz") {
        let (v, width) = args.rsplit_once(',').ok_or(format!("'{s}': extz takes a value and a width"))?;
        if width.trim() != "64" {
            return Err(format!("'{s}': tlbkit reads 64-bit values only"));
        }
        if let Some(va) = inner(v.trim(), "page") {
            return test.va(va).map(Val::Page).ok_or(format!("'{va}' is not in the test's `symbolic` list"));
        }
        return read_int(v).map(Val::Int).ok_or(format!("'{v}': not a number"));
    }
    for f in ["pte2", "pte3", "desc3"] {
        if let Some(args) = inner(s, f) {
            let (va, base) = args.split_once(',').ok_or(format!("'{s}': {f} takes a virtual address and a base"))?;
            if base.trim() != "page_table_base" {
                return Err(format!("'{s}': tlbkit has one page table, page_table_base"));
            }
            let v = test.va(va.trim()).ok_or(format!("'{va}' is not in the test's `symbolic` list"))?;
            return Ok(match f {
                // Every address of the test is walked through the one level-2 descriptor.
                "pte2" => Val::Level2Addr,
                "pte3" => Val::PteAddr(v),
                _ => Val::descriptor(test.mapping[v]),
            });
        }
    }
    if let Some(n) = inner(s, "asid") {
        // A TLBI operand: the ASID in bits 63..48.
        let n = read_int(n).filter(|n| *n <= 0xffff).ok_or(format!("'{s}': asid takes a 16-bit number"))?;
        return Ok(Val::Int(n << 48));
    }
    if let Some(args) = inner(s, "mkdesc3") {
        let pa = args.trim().strip_prefix("oa=").ok_or(format!("'{s}': mkdesc3 takes oa=<physical address>"))?;
        return test
            .pa(pa.trim())
            .map(|pa| Val::Desc(Desc::read_write(pa)))
            .ok_or(format!("'{pa}' is not a `physical` address"));
    }
    if let Some(v) = test.va(s) {
        return Ok(Val::Va(v));
    }
    read_int(s).map(Val::Int).ok_or(format!(
        "'{s}': tlbkit reads numbers, extz(n, 64), extz(page(x), 64), virtual addresses, pte2(x, page_table_base), \
         pte3(x, page_table_base), \
         desc3(x, page_table_base) and mkdesc3(oa=pa)"
    ))
}

/// Reads `[Xn]` or `[Xn,Xm]`.
fn read_addr(s: &str) -> Option<Addr> {
    let inner = s.trim().strip_prefix('[')?.strip_suffix(']')?;
    let mut parts = inner.split(',');
    let base = read_reg(parts.next()?)?;
    let offset = match parts.next() {
        Some(o) => Some(read_reg(o)?),
        None => None,
    };
    parts.next().is_none().then_some(Addr { base, offset })
}

/// Reads a thread's or a handler's code: instructions and the labels'
/// positions. A numeric label may be defined again (the assembler's local
/// labels); a branch to `Nf` goes to the next `N:` after it, and is kept
/// under the name `Nf@index` of that position.
fn read_code(first: usize, text: &str) -> Result<(Vec<Instr>, Labels), (usize, String)> {
    let mut code = Vec::new();
    let mut labels = BTreeMap::new();
    let mut local: Vec<(String, usize)> = Vec::new();
    let mut targets = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let ln = first + i;
        let line = raw.split("//").next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        if let Some(label) = line.strip_suffix(':') {
            let label = label.trim();
            if label.chars().all(|c| c.is_ascii_digit()) {
                local.push((label.to_string(), code.len()));
            } else {
                labels.insert(label.to_string(), code.len());
            }
            continue;
        }
        let instr = read_instr(line).ok_or((ln, unsupported(line)))?;
        if let Instr::Cbz { target, .. } = &instr {
            targets.push((ln, code.len(), target.clone()));
        }
        code.push(instr);
    }
    for (ln, at, t) in targets {
        let forward = t.strip_suffix('f').filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        let to = match forward {
            Some(n) => local.iter().find(|(m, p)| m == n && *p > at).map(|&(_, p)| (format!("{t}@{p}"), p)),
            None => labels.get(&t).map(|&p| (t.clone(), p)),
        };
        let Some((name, p)) = to else {
            return Err((
                ln,
                format!("branch to '{t}', a label the code does not have (local labels: forward only, `1f`)"),
            ));
        };
        labels.insert(name.clone(), p);
        if let Some(Instr::Cbz { target, .. }) = code.get_mut(at) {
            *target = name;
        }
    }
    Ok((code, labels))
}

fn unsupported(line: &str) -> String {
    format!(
        "'{line}': tlbkit models LDR, STR, MOV, EOR, ADD, SUB and LSR of an immediate, CBZ, CBNZ, DMB, DSB, ISB, \
         SVC, ERET, MRS of ELR_EL1, SPSR_EL1 and ESR_EL1, MSR of ELR_EL1 and SPSR_EL1, and TLBI VAE1, VALE1, VMALLE1 (and their IS forms); this test is outside the subset"
    )
}

/// Reads one instruction, or `None` where it is outside the subset.
fn read_instr(line: &str) -> Option<Instr> {
    let (op, args) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let args = args.trim();
    let op = op.to_ascii_uppercase();
    let regs = |n: usize| -> Option<Vec<Reg>> {
        let r: Option<Vec<Reg>> = args.split(',').map(read_reg).collect();
        r.filter(|r| r.len() == n)
    };
    match op.as_str() {
        "LDR" | "STR" => {
            let (rt, addr) = args.split_once(',')?;
            let (rt, addr) = (read_reg(rt)?, read_addr(addr)?);
            Some(if op == "LDR" { Instr::Ldr { rt, addr } } else { Instr::Str { rt, addr } })
        }
        "MOV" => {
            let (rd, src) = args.split_once(',')?;
            let rd = read_reg(rd)?;
            let src = src.trim();
            if src.starts_with('#') {
                Some(Instr::MovImm { rd, imm: read_int(src)? })
            } else {
                Some(Instr::MovReg { rd, rs: read_reg(src)? })
            }
        }
        "EOR" => {
            let r = regs(3)?;
            Some(Instr::Eor { rd: r[0], rn: r[1], rm: r[2] })
        }
        "CBZ" | "CBNZ" => {
            let (rt, target) = args.split_once(',')?;
            Some(Instr::Cbz { rt: read_reg(rt)?, target: target.trim().to_string(), nonzero: op == "CBNZ" })
        }
        "ADD" => {
            let (rd, rest) = args.split_once(',')?;
            let (rn, imm) = rest.split_once(',')?;
            Some(Instr::AddImm {
                rd: read_reg(rd)?,
                rn: read_reg(rn)?,
                imm: imm.trim().strip_prefix('#').and_then(read_int)?,
            })
        }
        "LSR" | "SUB" => {
            let (rd, rest) = args.split_once(',')?;
            let (rn, imm) = rest.split_once(',')?;
            let (rd, rn, imm) = (read_reg(rd)?, read_reg(rn)?, imm.trim().strip_prefix('#').and_then(read_int)?);
            Some(if op == "LSR" { Instr::LsrImm { rd, rn, imm: imm.min(64) } } else { Instr::SubImm { rd, rn, imm } })
        }
        "MRS" => {
            let (rt, sys) = args.split_once(',')?;
            Some(Instr::Mrs { rt: read_reg(rt)?, sys: read_sys(sys)? })
        }
        "MSR" => {
            let (sys, rt) = args.split_once(',')?;
            Some(Instr::Msr { sys: read_sys(sys)?, rt: read_reg(rt)? })
        }
        "SVC" => Some(Instr::Svc(u16::try_from(read_int(args)?).ok()?)),
        "ERET" if args.is_empty() => Some(Instr::Eret),
        "DMB" => Some(Instr::Dmb(Barrier::of(args)?)),
        "DSB" => Some(Instr::Dsb(Barrier::of(args)?)),
        "ISB" if args.is_empty() => Some(Instr::Isb),
        "TLBI" => {
            let (kind, reg) = match args.split_once(',') {
                Some((k, r)) => (k.trim().to_ascii_uppercase(), Some(read_reg(r)?)),
                None => (args.to_ascii_uppercase(), None),
            };
            let (kind, broadcast) = match kind.strip_suffix("IS") {
                Some(k) => (k.to_string(), true),
                None => (kind, false),
            };
            let scope = match (kind.as_str(), reg) {
                ("VAE1" | "VALE1", Some(r)) => TlbiScope::Va(r),
                ("ASIDE1", Some(r)) => TlbiScope::Asid(r),
                ("VMALLE1", None) => TlbiScope::All,
                _ => return None,
            };
            Some(Instr::Tlbi(Tlbi { scope, broadcast }))
        }
        _ => None,
    }
}

/// The thread a `[section.threadN_el1_handler...]` table belongs to.
fn handler_of(key: &str) -> Option<usize> {
    let rest = key.strip_prefix("section.thread")?;
    let (n, tail) = rest.split_once("_el1_handler")?;
    (tail.is_empty() || tail.starts_with('_')).then_some(())?;
    n.parse().ok()
}

/// Reads the final assertion: `T:Xn = v`, `*x = n`, `true`, `&`, `|`, `~`, parentheses.
fn read_cond(test: &Test, s: &str) -> Result<Cond, String> {
    let tokens = tokenize(s)?;
    let mut p = CondParser { test, tokens, pos: 0 };
    let c = p.or()?;
    if p.pos != p.tokens.len() {
        return Err(format!("'{}' after the end of the assertion", p.tokens[p.pos..].join(" ")));
    }
    Ok(c)
}

fn tokenize(s: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if "&|~()=".contains(c) {
            out.push(c.to_string());
            chars.next();
        } else {
            // An operand: up to the next operator at depth 0 (so `desc3(x, b)` is one).
            let mut t = String::new();
            let mut depth = 0;
            while let Some(&c) = chars.peek() {
                if depth == 0 && ("&|~=".contains(c) || c == ')' || (c == '(' && t.is_empty())) {
                    break;
                }
                if c == '(' {
                    depth += 1;
                } else if c == ')' {
                    depth -= 1;
                }
                t.push(c);
                chars.next();
            }
            if t.trim().is_empty() {
                return Err(format!("'{s}': an empty operand"));
            }
            out.push(t.trim().to_string());
        }
    }
    Ok(out)
}

struct CondParser<'a> {
    test: &'a Test,
    tokens: Vec<String>,
    pos: usize,
}

impl CondParser<'_> {
    fn peek(&self) -> Option<&str> {
        self.tokens.get(self.pos).map(String::as_str)
    }
    fn next(&mut self) -> Result<String, String> {
        let t = self.tokens.get(self.pos).cloned().ok_or("the assertion ends too early")?;
        self.pos += 1;
        Ok(t)
    }
    fn or(&mut self) -> Result<Cond, String> {
        let mut c = self.and()?;
        while self.peek() == Some("|") {
            self.pos += 1;
            c = Cond::Or(Box::new(c), Box::new(self.and()?));
        }
        Ok(c)
    }
    fn and(&mut self) -> Result<Cond, String> {
        let mut c = self.atom()?;
        while self.peek() == Some("&") {
            self.pos += 1;
            c = Cond::And(Box::new(c), Box::new(self.atom()?));
        }
        Ok(c)
    }
    fn atom(&mut self) -> Result<Cond, String> {
        let t = self.next()?;
        match t.as_str() {
            "~" => Ok(Cond::Not(Box::new(self.atom()?))),
            "(" => {
                let c = self.or()?;
                (self.next()? == ")").then_some(c).ok_or("a '(' is not closed".into())
            }
            "true" => Ok(Cond::True),
            "false" => Ok(Cond::Not(Box::new(Cond::True))),
            lhs => {
                if self.next()? != "=" {
                    return Err(format!("'{lhs}' is not followed by '='"));
                }
                let rhs = read_val(self.test, &self.next()?)?;
                if let Some(loc) = lhs.strip_prefix('*') {
                    let pa = match (self.test.pa(loc.trim()), self.test.va(loc.trim())) {
                        (Some(pa), _) => pa,
                        (None, Some(v)) => self.test.mapping[v]
                            .map(|d| d.pa)
                            .ok_or(format!("'{lhs}': {loc} has no initial physical address to read"))?,
                        (None, None) => return Err(format!("'{lhs}': `*x` names a virtual or physical address")),
                    };
                    return Ok(Cond::Mem(pa, rhs));
                }
                let (t, r) = lhs.split_once(':').ok_or(format!("'{lhs}': a register is written T:Xn"))?;
                let t: usize = t.trim().parse().map_err(|_| format!("'{lhs}': '{t}' is not a thread number"))?;
                if t >= self.test.threads.len() {
                    return Err(format!("'{lhs}': the test has {} threads", self.test.threads.len()));
                }
                let r = read_reg(r).ok_or(format!("'{lhs}': '{r}' is not a register X0-X30"))?;
                Ok(Cond::Reg(t, r, rhs))
            }
        }
    }
}
