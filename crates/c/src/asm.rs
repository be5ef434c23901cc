//! The kernel's asm statements, as tlbkit runs them: translated into calls
//! before compiling, interpreted when they run.
//!
//! A kernel header issues its TLB maintenance and barriers as inline
//! assembly (`asm("tlbi " #op ", %0" : : "r" (arg))`), which the host
//! cannot run. [`rewrite`] replaces every asm statement of a user's file with
//! a call of `tlbkit_asm(TEMPLATE, NAMES, OPERANDS)`, keeping the template's
//! tokens as they are (macro arguments, `#op`, `ALTERNATIVE(...)`, which the
//! shims define as their first instruction sequence), so that the
//! preprocessor builds the same template string the assembler would see.
//! `run` executes that string: `tlbi`, `dsb`, `dmb`, `isb`, `msr` and
//! `mrs` of the registers the shims model, `nop`s and assembler directives;
//! anything else stops the run with the instruction's name.

/// Returns `text` with every asm statement replaced by a call; line breaks
/// are kept (as line continuations inside a macro), so that line numbers of
/// the file stay its own.
pub fn rewrite(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut copied = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => i = skip_line_comment(b, i),
            b'/' if b.get(i + 1) == Some(&b'*') => i = skip_block_comment(b, i),
            b'"' | b'\'' => i = skip_literal(b, i),
            c if is_ident_start(c) => {
                let end = ident_end(b, i);
                let word = &text[i..end];
                let boundary = i == 0 || !is_ident(b[i - 1]);
                if boundary && matches!(word, "asm" | "__asm__" | "__asm") {
                    if let Some((stmt_end, call)) = statement(text, end) {
                        out.push_str(&text[copied..i]);
                        out.push_str(&call);
                        for (k, _) in text[i..stmt_end].match_indices('\n') {
                            let continued = k > 0 && text.as_bytes()[i + k - 1] == b'\\';
                            out.push_str(if continued { " \\\n" } else { "\n" });
                        }
                        copied = stmt_end;
                        i = stmt_end;
                        continue;
                    }
                }
                i = end;
            }
            _ => i += 1,
        }
    }
    out.push_str(&text[copied..]);
    out
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn ident_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && is_ident(b[i]) {
        i += 1;
    }
    i
}

fn skip_line_comment(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i] != b'\n' {
        i += 1;
    }
    i
}

fn skip_block_comment(b: &[u8], i: usize) -> usize {
    let rest = &b[i + 2..];
    rest.windows(2).position(|w| w == b"*/").map_or(b.len(), |p| i + 2 + p + 2)
}

fn skip_literal(b: &[u8], i: usize) -> usize {
    let q = b[i];
    let mut k = i + 1;
    while k < b.len() && b[k] != q {
        if b[k] == b'\\' {
            k += 1;
        }
        k += 1;
    }
    (k + 1).min(b.len())
}

/// Skips blanks, line continuations and comments from `i`.
fn skip_space(b: &[u8], mut i: usize) -> usize {
    loop {
        if i < b.len() && (b[i].is_ascii_whitespace() || (b[i] == b'\\' && b.get(i + 1) == Some(&b'\n'))) {
            i += 1;
        } else if b.get(i) == Some(&b'/') && b.get(i + 1) == Some(&b'*') {
            i = skip_block_comment(b, i);
        } else {
            return i;
        }
    }
}

/// Returns the end of the balanced group that opens at `b[i]` (one past its close).
fn group_end(b: &[u8], i: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut k = i;
    while k < b.len() {
        match b[k] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(k + 1);
                }
            }
            b'"' | b'\'' => {
                k = skip_literal(b, k);
                continue;
            }
            b'/' if b.get(k + 1) == Some(&b'*') => {
                k = skip_block_comment(b, k);
                continue;
            }
            _ => {}
        }
        k += 1;
    }
    None
}

/// Splits `s` at top-level occurrences of `sep`.
fn split_top(s: &str, sep: u8) -> Vec<&str> {
    let b = s.as_bytes();
    let mut parts = Vec::new();
    let (mut depth, mut start, mut k) = (0i32, 0, 0);
    while k < b.len() {
        match b[k] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            b'"' | b'\'' => {
                k = skip_literal(b, k);
                continue;
            }
            c if c == sep && depth == 0 => {
                parts.push(&s[start..k]);
                start = k + 1;
            }
            _ => {}
        }
        k += 1;
    }
    parts.push(&s[start..]);
    parts
}

/// One operand: its name, whether its old value is read (`+`) and its expression.
struct Operand {
    name: String,
    read: bool,
    expr: String,
}

fn operands(part: &str) -> Option<Vec<Operand>> {
    let part = part.replace("\\\n", " ");
    if part.trim().is_empty() {
        return Some(Vec::new());
    }
    split_top(&part, b',')
        .into_iter()
        .map(|op| {
            let op = op.trim();
            let (name, rest) = match op.strip_prefix('[') {
                Some(r) => {
                    let (n, r) = r.split_once(']')?;
                    (n.trim().to_string(), r.trim())
                }
                None => (String::new(), op),
            };
            let open = rest.find('(')?;
            let constraint = &rest[..open];
            let expr = rest[open..].trim();
            Some(Operand { name, read: constraint.contains('+'), expr: expr.to_string() })
        })
        .collect()
}

/// Parses the statement whose qualifiers and parenthesis start at `i` (just
/// past the `asm` keyword); returns its end and the call that replaces it.
fn statement(text: &str, i: usize) -> Option<(usize, String)> {
    let b = text.as_bytes();
    let mut k = skip_space(b, i);
    loop {
        let end = ident_end(b, k);
        match &text[k..end] {
            "volatile" | "__volatile__" | "__volatile" | "inline" | "__inline__" => k = skip_space(b, end),
            "goto" => return None,
            _ => break,
        }
    }
    if b.get(k) != Some(&b'(') {
        return None;
    }
    let end = group_end(b, k)?;
    let inner = &text[k + 1..end - 1];
    let parts = split_top(inner, b':');
    let template = parts[0].replace("\\\n", " ");
    let template = template.trim();
    let outputs = operands(parts.get(1).copied().unwrap_or(""))?;
    let inputs = operands(parts.get(2).copied().unwrap_or(""))?;
    let names: Vec<&str> = outputs.iter().chain(&inputs).map(|o| o.name.as_str()).collect();
    let mut values: Vec<String> =
        outputs.iter().map(|o| if o.read { format!("(tlbkit_u64)({})", o.expr) } else { "0".to_string() }).collect();
    values.extend(inputs.iter().map(|o| format!("(tlbkit_u64)({})", o.expr)));
    values.push("0".into());
    let template = if template.is_empty() { "\"\"" } else { template };
    let mut call = format!(
        "({{ tlbkit_u64 __tlbkit_op[] = {{ {} }}; tlbkit_asm({template}, \"{}\", __tlbkit_op);",
        values.join(", "),
        names.join(",")
    );
    for (n, o) in outputs.iter().enumerate() {
        call.push_str(&format!(" {} = (__typeof__({})) __tlbkit_op[{n}];", o.expr, o.expr));
    }
    call.push_str(" })");
    Some((end, call))
}

/// One instruction of a template the shims can run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Insn {
    /// `tlbi OP[, Xn]`: the operation's name and the operand index.
    Tlbi(String, Option<usize>),
    /// `dsb OPT`.
    Dsb(String),
    /// `dmb OPT`.
    Dmb(String),
    /// `isb`.
    Isb,
    /// `msr REG, Xn`.
    Msr(String, usize),
    /// `mrs Xn, REG`.
    Mrs(usize, String),
}

/// Parses a template string into its instructions; the error names the
/// first one the shims cannot run.
pub fn parse(template: &str, names: &str) -> Result<Vec<Insn>, String> {
    let names: Vec<&str> = names.split(',').collect();
    let operand = |s: &str| -> Result<usize, String> {
        let s = s.trim().trim_start_matches('%');
        let s =
            s.strip_prefix(['x', 'w']).filter(|r| r.starts_with(|c: char| c.is_ascii_digit() || c == '[')).unwrap_or(s);
        if let Some(n) = s.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            return names.iter().position(|x| *x == n).ok_or_else(|| format!("no operand named {n}"));
        }
        let n = s.parse::<usize>().map_err(|_| format!("an operand tlbkit cannot read: {s}"))?;
        // The runtime reads and writes operand `n` in the statement's array,
        // which holds a value per name and a trailing 0: past the names may
        // be past the array (gcc rejects such a statement too).
        if n >= names.len() {
            return Err(format!("operand %{n}, past the statement's operands"));
        }
        Ok(n)
    };
    let mut out = Vec::new();
    for insn in template.split(['\n', ';']) {
        let insn = insn.trim();
        if insn.is_empty() || insn == "nop" || insn.starts_with('.') || insn.ends_with(':') {
            continue;
        }
        let (op, args) = insn.split_once(char::is_whitespace).unwrap_or((insn, ""));
        let args: Vec<&str> = args.split(',').map(str::trim).filter(|a| !a.is_empty()).collect();
        let parsed = match (op, args.as_slice()) {
            ("tlbi", [what]) => Insn::Tlbi(what.to_string(), None),
            ("tlbi", [what, reg]) => Insn::Tlbi(what.to_string(), Some(operand(reg)?)),
            ("dsb", [opt]) => Insn::Dsb(opt.to_string()),
            ("dmb", [opt]) => Insn::Dmb(opt.to_string()),
            ("isb", []) => Insn::Isb,
            ("msr", [reg, val]) => Insn::Msr(reg.to_string(), operand(val)?),
            ("mrs", [val, reg]) => Insn::Mrs(operand(val)?, reg.to_string()),
            _ => return Err(format!("the instruction `{insn}`")),
        };
        out.push(parsed);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_a_tlbi_macro_keeping_its_lines() {
        let text = "#define __TLBI_1(op, arg) asm (ARM64_ASM_PREAMBLE \\\n \"tlbi \" #op \", %0\\n\" \\\n : : \"r\" (arg))\nint x;\n";
        let out = rewrite(text);
        assert!(out.contains("\"tlbi \" #op \", %0\\n\", \"\", __tlbkit_op)"), "{out}");
        assert!(out.contains("(tlbkit_u64)((arg))"), "{out}");
        assert_eq!(out.lines().count(), text.lines().count(), "{out}");
    }

    #[test]
    fn rewrites_outputs_into_assignments() {
        let out = rewrite("asm volatile(\"mrs %0, ttbr1_el1\" : \"=r\" (v));");
        assert!(out.contains("(v) = (__typeof__((v))) __tlbkit_op[0];"), "{out}");
    }

    #[test]
    fn leaves_identifiers_that_only_contain_asm() {
        assert_eq!(rewrite("int asmx; /* asm ( */ char *s = \"asm(\";"), "int asmx; /* asm ( */ char *s = \"asm(\";");
    }

    #[test]
    fn parses_what_the_shims_run_and_names_what_they_cannot() {
        assert_eq!(parse("tlbi vale1is, %0\nnop\n nop", "").unwrap(), vec![Insn::Tlbi("vale1is".into(), Some(0))]);
        assert_eq!(parse("msr ttbr0_el1, %x[v]; isb", "v").unwrap(), vec![Insn::Msr("ttbr0_el1".into(), 0), Insn::Isb]);
        assert_eq!(parse("ic iallu", "").unwrap_err(), "the instruction `ic iallu`");
    }

    #[test]
    fn rejects_an_operand_number_past_the_operands_as_out_of_the_array() {
        assert_eq!(parse("msr ttbr0_el1, %1", "a,b").unwrap(), vec![Insn::Msr("ttbr0_el1".into(), 1)]);
        assert_eq!(parse("mrs %2, ttbr0_el1", "a,b").unwrap_err(), "operand %2, past the statement's operands");
        assert_eq!(parse("tlbi vae1is, %1", "").unwrap_err(), "operand %1, past the statement's operands");
    }
}
