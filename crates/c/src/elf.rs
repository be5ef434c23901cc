//! The symbol table of a compiled policy (64-bit little-endian ELF): where
//! each global and static of the file lies, and which function holds a code
//! address, for traces and data-race reports in the kernel's terms.

/// A symbol: its name (a function's static has its compiler suffix `.N`
/// removed), offset from the object's load address, size, whether it is
/// data (else code), and whether its section is writable (a `const`
/// object's is not).
#[derive(Clone, Debug)]
pub struct Symbol {
    pub name: String,
    pub value: u64,
    pub size: u64,
    pub object: bool,
    pub writable: bool,
}

/// Little-endian reads of a 64-bit ELF object's bytes (`None` past its end).
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    /// Checks that `bytes` are a 64-bit little-endian ELF object.
    fn of(bytes: &'a [u8]) -> Result<Reader<'a>, String> {
        if bytes.get(0..4) != Some(b"\x7fELF") || bytes.get(4) != Some(&2) || bytes.get(5) != Some(&1) {
            return Err("not a 64-bit little-endian ELF object".into());
        }
        Ok(Reader(bytes))
    }

    fn u16(&self, o: usize) -> Option<u16> {
        self.0.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&self, o: usize) -> Option<u32> {
        self.0.get(o..o + 4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
    }

    fn u64(&self, o: usize) -> Option<u64> {
        self.0.get(o..o + 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }
}

/// Reads the symbol table of the ELF object `bytes`.
pub fn symbols(bytes: &[u8]) -> Result<Vec<Symbol>, String> {
    let r = Reader::of(bytes)?;
    let (u16_at, u32_at, u64_at) = (|o| r.u16(o), |o| r.u32(o), |o| r.u64(o));
    let bad = || "a truncated ELF object".to_string();
    let shoff = u64_at(0x28).ok_or_else(bad)? as usize;
    let shentsize = u16_at(0x3a).ok_or_else(bad)? as usize;
    let shnum = u16_at(0x3c).ok_or_else(bad)? as usize;
    let section = |i: usize| {
        let o = shoff + i * shentsize;
        Some((u32_at(o + 4)?, u64_at(o + 0x18)? as usize, u64_at(o + 0x20)? as usize, u32_at(o + 0x28)? as usize))
    };
    // SHF_WRITE of section `i`'s flags.
    let writable = |i: usize| u64_at(shoff + i * shentsize + 8).is_some_and(|f| f & 1 != 0);
    const SHT_SYMTAB: u32 = 2;
    let (symoff, symsize, link) = (0..shnum)
        .filter_map(section)
        .find(|s| s.0 == SHT_SYMTAB)
        .map(|s| (s.1, s.2, s.3))
        .ok_or("the object has no symbol table (was it stripped?)")?;
    let (_, stroff, strsize, _) = section(link).ok_or_else(bad)?;
    let strtab = bytes.get(stroff..stroff + strsize).ok_or_else(bad)?;
    let mut out = Vec::new();
    for k in 0..symsize / 24 {
        let o = symoff + k * 24;
        let name_off = u32_at(o).ok_or_else(bad)? as usize;
        let info = *bytes.get(o + 4).ok_or_else(bad)?;
        let shndx = u16_at(o + 6).ok_or_else(bad)?;
        let value = u64_at(o + 8).ok_or_else(bad)?;
        let size = u64_at(o + 16).ok_or_else(bad)?;
        let kind = info & 0xf;
        // STT_OBJECT or STT_FUNC, defined in a section.
        if !(kind == 1 || kind == 2) || shndx == 0 {
            continue;
        }
        let raw = strtab.get(name_off..).unwrap_or_default();
        let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
        let name = String::from_utf8_lossy(&raw[..end]).to_string();
        let name = match name.split_once('.') {
            Some((base, suffix)) if suffix.chars().all(|c| c.is_ascii_digit()) => base.to_string(),
            _ => name,
        };
        out.push(Symbol { name, value, size, object: kind == 1, writable: writable(shndx as usize) });
    }
    out.sort_by_key(|s| s.value);
    Ok(out)
}

/// An executable segment of an ELF object: its load offset and bytes.
pub struct Code<'a> {
    pub vaddr: u64,
    pub bytes: &'a [u8],
}

/// Returns the executable loadable segments of the ELF object `bytes`.
pub fn code(bytes: &[u8]) -> Result<Vec<Code<'_>>, String> {
    let r = Reader::of(bytes)?;
    let (u16_at, u32_at, u64_at) = (|o| r.u16(o), |o| r.u32(o), |o| r.u64(o));
    let bad = || "a truncated ELF object".to_string();
    let phoff = u64_at(0x20).ok_or_else(bad)? as usize;
    let phentsize = u16_at(0x36).ok_or_else(bad)? as usize;
    let phnum = u16_at(0x38).ok_or_else(bad)? as usize;
    const PT_LOAD: u32 = 1;
    const PF_X: u32 = 1;
    let mut out = Vec::new();
    for i in 0..phnum {
        let o = phoff + i * phentsize;
        let (kind, flags) = (u32_at(o).ok_or_else(bad)?, u32_at(o + 4).ok_or_else(bad)?);
        if kind != PT_LOAD || flags & PF_X == 0 {
            continue;
        }
        let offset = u64_at(o + 8).ok_or_else(bad)? as usize;
        let vaddr = u64_at(o + 0x10).ok_or_else(bad)?;
        let filesz = u64_at(o + 0x20).ok_or_else(bad)? as usize;
        out.push(Code { vaddr, bytes: bytes.get(offset..offset + filesz).ok_or_else(bad)? });
    }
    Ok(out)
}
