//! Line coverage of Rust code, read from this process's own LLVM
//! source-based coverage: what a check reached of a Rust policy.
//!
//! A binary built with `-C instrument-coverage` carries, per instrumented
//! function, a record of its source regions and of the counters (or sums and
//! differences of counters) that count each region's executions; the
//! counters themselves live in the running process. LLVM's own tools read
//! them from a file the process writes at exit; tlbkit reads them in place,
//! so a check can say, when it ends, which lines of the policy it ran. The
//! `coverage` profile builds that binary (`scripts/rustc-coverage`
//! instruments the policy crates only: the checker's own code stays
//! uninstrumented and near `policy`'s speed).
//!
//! The format read (LLVM's coverage mapping version 7, raw profile data
//! layout version 10; those of the Rust toolchains this project builds with,
//! checked by [`read`] from the section sizes and versions):
//! - `__llvm_covmap`, one header per compilation unit: four `u32` (records,
//!   filenames' size, coverage size, version), then the unit's file names
//!   (LEB128 count, uncompressed and compressed lengths; each name LEB128
//!   length and bytes; the first is the compilation directory), padded to 8
//!   bytes. LLVM compresses the names with zlib unless told not to:
//!   `scripts/rustc-coverage` tells it (`-enable-name-compression=false`),
//!   and a compressed map is refused, saying so;
//! - `__llvm_covfun`, one record per function: the MD5 of its name, the
//!   length of its mapping, its structural hash and the MD5 of its unit's
//!   file names (packed, 28 bytes), then the mapping: its files, the
//!   expressions, and per file the regions (counter, line delta, columns,
//!   line count), padded to 8 bytes;
//! - `__llvm_prf_data`, loaded: per function 64 bytes, name MD5, hash, the
//!   offset of its counters from the record itself, and their number;
//! - `__llvm_prf_cnts`, loaded: the `u64` counters.
//!
//! A line's count is the greatest of the regions that start on it and of
//! the innermost region around its start (the rule `llvm-cov` uses); a line
//! no code region touches is not code. Gap and skipped regions are left out.

use std::collections::BTreeMap;

/// What a binary's coverage could not be read for.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    /// The bytes are not what the format says at this place.
    #[error("{0}")]
    Format(String),
    /// The binary's coverage layout is not one this build reads.
    #[error(
        "coverage mapping version {found} (tlbkit reads version 7, raw profile layout 10): built with a \
             toolchain whose LLVM tlbkit does not know; build with the project's pinned toolchain"
    )]
    Version {
        /// The version field as stored (zero-based: 6 is version 7).
        found: u32,
    },
    /// The executable could not be read.
    #[error("{0}")]
    Io(String),
}

fn bad(what: impl Into<String>) -> Error {
    Error::Format(what.into())
}

/// The coverage sections of one binary: the mapping (from its file) and
/// the profile data and counters (as they are in memory, with the addresses
/// they are at there, since a record points at its counters relatively).
pub struct Image<'a> {
    /// `__llvm_covmap`.
    pub covmap: &'a [u8],
    /// `__llvm_covfun`.
    pub covfun: &'a [u8],
    /// `__llvm_prf_data`.
    pub data: &'a [u8],
    /// The address `data` starts at in the process.
    pub data_addr: u64,
    /// `__llvm_prf_cnts`.
    pub counters: &'a [u8],
    /// The address `counters` starts at in the process.
    pub counters_addr: u64,
}

/// What one source file's instrumented code counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileCounts {
    /// Each line with code, and how often it ran.
    pub lines: BTreeMap<u32, u64>,
    /// Each function (by the line its code starts on), and how often it was
    /// entered; generic instances and unused functions are merged by place.
    pub functions: BTreeMap<u32, u64>,
}

/// The mapping version this reader knows (stored zero-based).
const COVMAP_VERSION: u32 = 6;
/// A raw profile data record's size in layout version 10.
const DATA_RECORD: usize = 64;
/// The most lines a source file may have, and one region span (a region
/// past either is read as a corrupt map, not counted line by line).
const MAX_LINES: u32 = 1 << 20;

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], Error> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or_else(|| bad("a record runs past its section"))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32, Error> {
        Ok(u32::from_le_bytes(self.bytes(4)?.try_into().expect("four bytes")))
    }
    fn u64(&mut self) -> Result<u64, Error> {
        Ok(u64::from_le_bytes(self.bytes(8)?.try_into().expect("eight bytes")))
    }
    fn leb(&mut self) -> Result<u64, Error> {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let b = *self.b.get(self.at).ok_or_else(|| bad("a number runs past its record"))?;
            self.at += 1;
            if shift >= 64 {
                return Err(bad("a number longer than 64 bits"));
            }
            v |= u64::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
    }
    fn small(&mut self) -> Result<usize, Error> {
        let v = self.leb()?;
        usize::try_from(v)
            .ok()
            .filter(|&n| n <= self.b.len())
            .ok_or_else(|| bad(format!("a count of {v} in a record of {} bytes", self.b.len())))
    }
    fn align8(&mut self) {
        self.at = self.at.next_multiple_of(8);
    }
    fn done(&self) -> bool {
        self.at >= self.b.len()
    }
}

/// An encoded counter: zero, a counter or an expression (a sum or a
/// difference of two encoded counters).
#[derive(Clone, Copy)]
enum Term {
    Zero,
    Counter(usize),
    Sub(usize),
    Add(usize),
}

fn term(v: u64) -> Term {
    let i = (v >> 2) as usize;
    match v & 3 {
        0 => Term::Zero,
        1 => Term::Counter(i),
        2 => Term::Sub(i),
        _ => Term::Add(i),
    }
}

/// One function's counters and expressions, to evaluate its regions by.
/// An expression is evaluated once (by an explicit stack, so that a long or
/// corrupt chain costs time in its length, never the thread's stack), and a
/// cycle, which no compiler writes, counts 0.
struct Eval<'a> {
    counters: &'a [u64],
    exprs: &'a [(Term, Term)],
    /// Per expression and kind (`2 * index + add`): its value once known.
    memo: Vec<Option<u64>>,
    /// Per expression and kind: on the stack now.
    busy: Vec<bool>,
}

impl<'a> Eval<'a> {
    fn new(counters: &'a [u64], exprs: &'a [(Term, Term)]) -> Self {
        Eval { counters, exprs, memo: vec![None; 2 * exprs.len()], busy: vec![false; 2 * exprs.len()] }
    }

    /// The node of an expression term (`None` for zero, a counter, or an
    /// index past the expressions).
    fn node(&self, t: Term) -> Option<usize> {
        match t {
            Term::Sub(i) if i < self.exprs.len() => Some(2 * i),
            Term::Add(i) if i < self.exprs.len() => Some(2 * i + 1),
            _ => None,
        }
    }

    /// The value of `t` where its expressions are known.
    fn known(&self, t: Term) -> u64 {
        match t {
            Term::Counter(i) => self.counters.get(i).copied().unwrap_or(0),
            _ => self.node(t).and_then(|n| self.memo[n]).unwrap_or(0),
        }
    }

    fn value(&mut self, t: Term) -> u64 {
        let Some(root) = self.node(t) else { return self.known(t) };
        let mut stack = vec![root];
        self.busy[root] = true;
        while let Some(&n) = stack.last() {
            if self.memo[n].is_some() {
                self.busy[n] = false;
                stack.pop();
                continue;
            }
            let (l, r) = self.exprs[n / 2];
            let mut waiting = false;
            // One unknown child at a time, so that the stack is a chain of
            // ancestors and a busy child is a cycle.
            for child in [self.node(l), self.node(r)].into_iter().flatten() {
                if self.memo[child].is_some() {
                    continue;
                }
                if self.busy[child] {
                    self.memo[child] = Some(0); // a cycle
                    continue;
                }
                self.busy[child] = true;
                stack.push(child);
                waiting = true;
                break;
            }
            if waiting {
                continue;
            }
            if self.memo[n].is_none() {
                let (l, r) = (self.known(l), self.known(r));
                self.memo[n] = Some(if n % 2 == 1 { l.saturating_add(r) } else { l.saturating_sub(r) });
            }
        }
        self.known(t)
    }
}

/// A code region of one file: where it starts and ends, and its count.
struct Region {
    start: (u32, u32),
    end: (u32, u32),
    count: u64,
}

/// Returns the file names of each compilation unit, keyed by the MD5 of
/// their encoded bytes (as the function records name them).
fn units(covmap: &[u8]) -> Result<BTreeMap<u64, Vec<String>>, Error> {
    let mut r = Reader { b: covmap, at: 0 };
    let mut out = BTreeMap::new();
    while !r.done() {
        let _records = r.u32()?;
        let size = r.u32()? as usize;
        let _coverage = r.u32()?;
        let version = r.u32()?;
        if version != COVMAP_VERSION {
            return Err(Error::Version { found: version });
        }
        let blob = r.bytes(size)?;
        r.align8();
        let hash = md5_low64(blob);
        out.insert(hash, filenames(blob)?);
    }
    Ok(out)
}

/// Decodes a unit's file names, joining each relative one to the first
/// (the compilation directory).
fn filenames(blob: &[u8]) -> Result<Vec<String>, Error> {
    let mut r = Reader { b: blob, at: 0 };
    let n = r.small()?;
    let plain_len = r.small()?;
    if r.leb()? != 0 {
        return Err(bad("the file names are compressed: build with scripts/rustc-coverage (the `coverage` profile), \
                        which asks LLVM not to (-enable-name-compression=false)"));
    }
    let names = r.bytes(plain_len)?;
    let mut r = Reader { b: names, at: 0 };
    let mut out = Vec::with_capacity(n.min(1 << 16));
    for _ in 0..n {
        let len = r.small()?;
        out.push(String::from_utf8_lossy(r.bytes(len)?).into_owned());
    }
    if let Some((dir, rest)) = out.split_first_mut() {
        for f in rest {
            if !f.starts_with('/') && !dir.is_empty() {
                *f = format!("{}/{f}", dir.trim_end_matches('/'));
            }
        }
    }
    Ok(out)
}

/// Returns each function's counters by (name MD5, structural hash).
fn counters_by_function<'a>(image: &Image<'a>) -> Result<BTreeMap<(u64, u64), &'a [u8]>, Error> {
    if !image.data.len().is_multiple_of(DATA_RECORD) || !image.counters.len().is_multiple_of(8) {
        return Err(bad("profile data is not in the layout tlbkit reads (version 10: 64-byte records)"));
    }
    let mut out = BTreeMap::new();
    let mut total = 0usize;
    for (k, rec) in image.data.chunks_exact(DATA_RECORD).enumerate() {
        let mut r = Reader { b: rec, at: 0 };
        let name = r.u64()?;
        let hash = r.u64()?;
        let rel = r.u64()? as i64;
        r.bytes(24)?; // the bitmap's offset, the function's address, its value profile
        let n = r.u32()? as usize;
        total += n;
        let at = (image.data_addr + (k * DATA_RECORD) as u64).wrapping_add(rel as u64);
        let from = at.checked_sub(image.counters_addr).map(|o| o as usize);
        let cs = from
            .and_then(|o| image.counters.get(o..o.checked_add(n * 8)?))
            .ok_or_else(|| bad("a function's counters lie outside the counters' section"))?;
        out.insert((name, hash), cs);
    }
    if total * 8 != image.counters.len() {
        return Err(bad("profile data is not in the layout tlbkit reads: its counters do not add up to their section"));
    }
    Ok(out)
}

/// Reads what every instrumented function of `image` counted, by source
/// file (as the compiler named it, made absolute with its unit's directory).
pub fn read(image: &Image) -> Result<BTreeMap<String, FileCounts>, Error> {
    let units = units(image.covmap)?;
    let counters = counters_by_function(image)?;
    let mut regions: BTreeMap<String, Vec<Region>> = BTreeMap::new();
    let mut files: BTreeMap<String, FileCounts> = BTreeMap::new();
    let mut r = Reader { b: image.covfun, at: 0 };
    let mut values = Vec::new();
    let mut exprs = Vec::new();
    while !r.done() {
        let name = r.u64()?;
        let len = r.u32()? as usize;
        let hash = r.u64()?;
        let unit = r.u64()?;
        let mapping = r.bytes(len)?;
        r.align8();
        let names = units.get(&unit).ok_or_else(|| bad("a function names file names no unit has"))?;
        values.clear();
        if let Some(cs) = counters.get(&(name, hash)) {
            values.extend(cs.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("eight bytes"))));
        } // else an unused function: every counter zero
        function(mapping, names, &values, &mut exprs, &mut regions, &mut files)?;
    }
    for (file, mut rs) in regions {
        let counts = files.entry(file).or_default();
        lines_of(&mut rs, &mut counts.lines);
    }
    Ok(files)
}

/// Reads one function's mapping, adding its regions to `regions` and its
/// entry count to `files`.
fn function(
    mapping: &[u8],
    names: &[String],
    counters: &[u64],
    exprs: &mut Vec<(Term, Term)>,
    regions: &mut BTreeMap<String, Vec<Region>>,
    files: &mut BTreeMap<String, FileCounts>,
) -> Result<(), Error> {
    let mut m = Reader { b: mapping, at: 0 };
    let nfiles = m.small()?;
    let mut ids = Vec::with_capacity(nfiles);
    for _ in 0..nfiles {
        let i = m.leb()?;
        ids.push(names.get(i as usize).ok_or_else(|| bad("a function names a file its unit lacks"))?);
    }
    let nexprs = m.small()?;
    exprs.clear();
    for _ in 0..nexprs {
        let (l, r) = (term(m.leb()?), term(m.leb()?));
        exprs.push((l, r));
    }
    let mut eval = Eval::new(counters, exprs);
    for (fid, file) in ids.iter().enumerate() {
        let n = m.small()?;
        let mut line = 0u32;
        for k in 0..n {
            let enc = m.leb()?;
            let mut code = true;
            let mut count = 0;
            if enc & 3 != 0 {
                count = eval.value(term(enc));
            } else if enc & 4 != 0 {
                code = false; // an expansion: its code is in the file it expands
            } else {
                match enc >> 3 {
                    0 => {}            // code never counted
                    2 => code = false, // skipped
                    4 => {
                        // a branch: two counters, not a region of code
                        m.leb()?;
                        m.leb()?;
                        code = false;
                    }
                    5 => {
                        m.leb()?;
                        m.leb()?;
                        code = false;
                    }
                    6 => {
                        for _ in 0..5 {
                            m.leb()?;
                        }
                        code = false;
                    }
                    k => return Err(bad(format!("a region of unknown kind {k}"))),
                }
            }
            let delta = u32::try_from(m.leb()?).map_err(|_| bad("a line number past 32 bits"))?;
            let col = m.leb()? as u32;
            let nlines = u32::try_from(m.leb()?).map_err(|_| bad("a line count past 32 bits"))?;
            let end_col = m.leb()?;
            let gap = end_col & (1 << 31) != 0;
            line = line.checked_add(delta).ok_or_else(|| bad("a line number past 32 bits"))?;
            if fid == 0 && k == 0 {
                let f = files.entry((*file).clone()).or_default();
                *f.functions.entry(line).or_default() += count;
            }
            if line > MAX_LINES || nlines > MAX_LINES {
                return Err(bad(format!("a region at line {line} of {nlines} lines: not a source file's")));
            }
            if code && !gap && line > 0 {
                let end_col = if col == 0 && end_col == 0 { u32::MAX } else { (end_col & 0x7fff_ffff) as u32 };
                regions.entry((*file).clone()).or_default().push(Region {
                    start: (line, col.max(1)),
                    end: (line.saturating_add(nlines), end_col),
                    count,
                });
            }
        }
    }
    Ok(())
}

/// Adds each line's count from `rs`: the greatest of the regions starting on
/// it and of the innermost region around its first column. Regions of the
/// same place (instances of one generic function) add up first.
fn lines_of(rs: &mut [Region], lines: &mut BTreeMap<u32, u64>) {
    rs.sort_by_key(|r| (r.start, std::cmp::Reverse(r.end)));
    // Merge identical places.
    let mut merged: Vec<Region> = Vec::with_capacity(rs.len());
    for r in rs.iter() {
        match merged.last_mut() {
            Some(m) if m.start == r.start && m.end == r.end => m.count = m.count.saturating_add(r.count),
            _ => merged.push(Region { start: r.start, end: r.end, count: r.count }),
        }
    }
    let Some(last) = merged.iter().map(|r| r.end.0).max() else { return };
    let first = merged[0].start.0;
    // Walk the lines with a stack of the regions open at each line's start.
    let mut open: Vec<usize> = Vec::new();
    let mut next = 0;
    for line in first..=last {
        open.retain(|&i| merged[i].end.0 > line || (merged[i].end.0 == line && merged[i].end.1 > 1));
        let inner = open.last().map(|&i| merged[i].count);
        let mut best = inner;
        while next < merged.len() && merged[next].start.0 == line {
            best = Some(best.map_or(merged[next].count, |b| b.max(merged[next].count)));
            // Keep the stack innermost-last: drop what this one does not nest in.
            while let Some(&top) = open.last() {
                if merged[top].end >= merged[next].end {
                    break;
                }
                open.pop();
            }
            open.push(next);
            next += 1;
        }
        if let Some(c) = best {
            let e = lines.entry(line).or_default();
            *e = (*e).max(c);
        }
    }
}

/// Returns the low 64 bits (little-endian) of the MD5 of `data`, the hash
/// LLVM names a unit's file names and a function's name by.
pub fn md5_low64(data: &[u8]) -> u64 {
    let d = md5(data);
    u64::from_le_bytes(d[..8].try_into().expect("eight bytes"))
}

/// MD5 (RFC 1321).
fn md5(data: &[u8]) -> [u8; 16] {
    const S: [u32; 64] = [
        7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14,
        20, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6,
        10, 15, 21,
    ];
    let k: [u32; 64] = std::array::from_fn(|i| ((i as f64 + 1.0).sin().abs() * 4_294_967_296.0) as u32);
    let mut h: [u32; 4] = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64).wrapping_mul(8)).to_le_bytes());
    for block in msg.chunks_exact(64) {
        let w: [u32; 16] =
            std::array::from_fn(|i| u32::from_le_bytes(block[4 * i..4 * i + 4].try_into().expect("four")));
        let [mut a, mut b, mut c, mut d] = h;
        for i in 0..64 {
            let (f, g) = match i / 16 {
                0 => ((b & c) | (!b & d), i),
                1 => ((d & b) | (!d & c), (5 * i + 1) % 16),
                2 => (b ^ c ^ d, (3 * i + 5) % 16),
                _ => (c ^ (b | !d), (7 * i) % 16),
            };
            let t = d;
            d = c;
            c = b;
            b = b.wrapping_add(a.wrapping_add(f).wrapping_add(k[i]).wrapping_add(w[g]).rotate_left(S[i]));
            a = t;
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 16];
    for (i, x) in h.iter().enumerate() {
        out[4 * i..4 * i + 4].copy_from_slice(&x.to_le_bytes());
    }
    out
}

/// This process's coverage: the executable's mapping sections and a copy
/// of its data and counters as they are now. `None` when the binary was
/// built without `-C instrument-coverage` (no `__llvm_covfun` section).
pub struct Process {
    elf: Mapped,
    covmap: (usize, usize),
    covfun: (usize, usize),
    data: Vec<u8>,
    data_addr: u64,
    counters_addr: u64,
    counters_len: usize,
}

/// This executable's file, mapped read-only (its coverage map is not loaded
/// with the program, and a `release` binary is tens of megabytes of which a
/// check without coverage reads only the section headers).
struct Mapped {
    at: *const u8,
    len: usize,
}

// SAFETY: a private read-only mapping, never written, unmapped only on drop.
unsafe impl Send for Mapped {}
// SAFETY: as above: shared reads of immutable bytes.
unsafe impl Sync for Mapped {}

impl Mapped {
    fn exe() -> Result<Mapped, Error> {
        let io = |e: std::io::Error| Error::Io(format!("/proc/self/exe: {e}"));
        let f = std::fs::File::open("/proc/self/exe").map_err(io)?;
        let len = f.metadata().map_err(io)?.len() as usize;
        if len == 0 {
            return Err(bad("/proc/self/exe is empty"));
        }
        use std::os::fd::AsRawFd;
        // SAFETY: a new private read-only mapping of the whole file, which
        // nothing else aliases; the file stays mapped after `f` closes.
        let at = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE, f.as_raw_fd(), 0) };
        if at == libc::MAP_FAILED {
            return Err(io(std::io::Error::last_os_error()));
        }
        Ok(Mapped { at: at.cast(), len })
    }
}

impl std::ops::Deref for Mapped {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `len` readable bytes at `at` while the mapping lives.
        unsafe { std::slice::from_raw_parts(self.at, self.len) }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: the mapping `exe` made; no slice of it outlives `self`.
        unsafe { libc::munmap(self.at as *mut libc::c_void, self.len) };
    }
}

/// A copy of the counters at one moment ([`Process::now`]).
pub struct Counters(Vec<u8>);

impl Process {
    /// Reads this executable's coverage sections; `Ok(None)` when it has none.
    pub fn open() -> Result<Option<Process>, Error> {
        let elf = Mapped::exe()?;
        let sections = sections(&elf)?;
        let find = |n: &str| sections.iter().find(|s| s.name == n);
        let (Some(map), Some(fun), Some(data), Some(cnts)) =
            (find("__llvm_covmap"), find("__llvm_covfun"), find("__llvm_prf_data"), find("__llvm_prf_cnts"))
        else {
            return Ok(None);
        };
        let bias = load_bias(&elf)?;
        let data_addr = data.addr.wrapping_add(bias);
        let counters_addr = cnts.addr.wrapping_add(bias);
        // SAFETY: the loader mapped `__llvm_prf_data` at its address plus
        // the load bias, readable for the process's life; its records are
        // written only by the (absent) value profiler.
        let data_bytes = unsafe { std::slice::from_raw_parts(data_addr as *const u8, data.size as usize) }.to_vec();
        Ok(Some(Process {
            covmap: (map.offset, map.size as usize),
            covfun: (fun.offset, fun.size as usize),
            elf,
            data: data_bytes,
            data_addr,
            counters_addr,
            counters_len: cnts.size as usize,
        }))
    }

    /// A copy of the counters now.
    pub fn now(&self) -> Counters {
        if !self.counters_addr.is_multiple_of(8) {
            return Counters(vec![0; self.counters_len]);
        }
        // SAFETY: `__llvm_prf_cnts` is mapped at this address for the
        // process's life and aligned to 8 (checked); its `u64` counters are
        // updated only by atomic increments (`scripts/rustc-coverage` asks
        // LLVM for them), so reading them as atomics races with nothing.
        let live = unsafe {
            std::slice::from_raw_parts(self.counters_addr as *const std::sync::atomic::AtomicU64, self.counters_len / 8)
        };
        // Relaxed: a count a moment old is as good as any.
        Counters(live.iter().flat_map(|c| c.load(std::sync::atomic::Ordering::Relaxed).to_le_bytes()).collect())
    }

    /// What the counters `c` say, by file.
    pub fn read(&self, c: &Counters) -> Result<BTreeMap<String, FileCounts>, Error> {
        let slice = |(o, n): (usize, usize)| self.elf.get(o..o + n).ok_or_else(|| bad("a section runs past the file"));
        read(&Image {
            covmap: slice(self.covmap)?,
            covfun: slice(self.covfun)?,
            data: &self.data,
            data_addr: self.data_addr,
            counters: &c.0,
            counters_addr: self.counters_addr,
        })
    }
}

/// An ELF section: its name, its address when loaded, its place in the file.
pub struct Section {
    /// The section's name.
    pub name: String,
    /// Its address in the image (before the load bias).
    pub addr: u64,
    /// Its offset in the file.
    pub offset: usize,
    /// Its size.
    pub size: u64,
}

/// The sections of a 64-bit little-endian ELF file.
pub fn sections(elf: &[u8]) -> Result<Vec<Section>, Error> {
    if elf.get(..6) != Some(b"\x7fELF\x02\x01") {
        return Err(bad("not a 64-bit little-endian ELF file"));
    }
    let mut r = Reader { b: elf, at: 0x28 };
    let shoff = r.u64()? as usize;
    r.at = 0x3a;
    let ent = u16::from_le_bytes(r.bytes(2)?.try_into().expect("two")) as usize;
    let num = u16::from_le_bytes(r.bytes(2)?.try_into().expect("two")) as usize;
    let strndx = u16::from_le_bytes(r.bytes(2)?.try_into().expect("two")) as usize;
    let header = |i: usize| -> Result<(u32, u64, usize, u64), Error> {
        let mut r = Reader { b: elf, at: shoff + i * ent };
        let name = r.u32()?;
        r.bytes(12)?; // type, flags
        let addr = r.u64()?;
        let off = r.u64()? as usize;
        let size = r.u64()?;
        Ok((name, addr, off, size))
    };
    let (_, _, stroff, strsize) = header(strndx)?;
    let strtab = elf.get(stroff..stroff + strsize as usize).ok_or_else(|| bad("section names past the file"))?;
    (0..num)
        .map(|i| {
            let (n, addr, offset, size) = header(i)?;
            let name = strtab.get(n as usize..).unwrap_or_default();
            let name =
                String::from_utf8_lossy(&name[..name.iter().position(|&c| c == 0).unwrap_or(name.len())]).into_owned();
            Ok(Section { name, addr, offset, size })
        })
        .collect()
}

/// Where the executable was loaded relative to its link-time addresses:
/// the program headers' address in memory (the auxiliary vector's
/// `AT_PHDR`) less their address in the image.
fn load_bias(elf: &[u8]) -> Result<u64, Error> {
    let mut r = Reader { b: elf, at: 0x20 };
    let phoff = r.u64()?;
    r.at = 0x36;
    let ent = u16::from_le_bytes(r.bytes(2)?.try_into().expect("two")) as usize;
    let num = u16::from_le_bytes(r.bytes(2)?.try_into().expect("two")) as usize;
    // SAFETY: getauxval reads the process's auxiliary vector.
    let at_phdr = unsafe { libc::getauxval(libc::AT_PHDR) };
    for i in 0..num {
        let mut r = Reader { b: elf, at: phoff as usize + i * ent };
        let kind = r.u32()?;
        r.u32()?;
        let off = r.u64()?;
        let vaddr = r.u64()?;
        // PT_PHDR, or the load segment holding the headers.
        if kind == 6 || (kind == 1 && off <= phoff && phoff < off + 0x1000) {
            let image_phdr = if kind == 6 { vaddr } else { vaddr + (phoff - off) };
            return Ok(at_phdr.wrapping_sub(image_phdr));
        }
    }
    Err(bad("the executable has no program header table to place it by"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn md5_of_the_rfc_vectors() {
        let hex = |d: [u8; 16]| d.iter().map(|b| format!("{b:02x}")).collect::<String>();
        assert_eq!(hex(md5(b"")), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(hex(md5(b"abc")), "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(
            hex(md5(b"12345678901234567890123456789012345678901234567890123456789012345678901234567890")),
            "57edf4a22be3c955ac49da2e2107b67a"
        );
    }

    /// A program built for coverage, which prints its own profile data and
    /// counters (as hex, with their addresses) after it ran `pick(21..)`.
    const PROGRAM: &str = r#"
#[unsafe(no_mangle)]
pub static __llvm_profile_runtime: i32 = 0;
unsafe extern "C" {
    static __start___llvm_prf_data: u8;
    static __stop___llvm_prf_data: u8;
    static __start___llvm_prf_cnts: u8;
    static __stop___llvm_prf_cnts: u8;
}
fn pick(x: u32) -> u32 {
    if x > 10 {
        x * 2 // taken
    } else {
        x + 1 // not taken
    }
}
fn never() -> u32 {
    std::hint::black_box(7) // never
}
fn dump(what: &str, a: *const u8, b: *const u8) {
    let n = unsafe { b.offset_from(a) } as usize;
    let s = unsafe { std::slice::from_raw_parts(a, n) };
    let hex: String = s.iter().map(|b| format!("{b:02x}")).collect();
    println!("{what} {} {hex}", a as usize);
}
fn main() {
    let n = std::env::args().count() as u32 + 20;
    if n == 0 {
        println!("{}", never());
    }
    println!("{}", std::hint::black_box(pick(n)));
    unsafe {
        dump("data", &raw const __start___llvm_prf_data, &raw const __stop___llvm_prf_data);
        dump("cnts", &raw const __start___llvm_prf_cnts, &raw const __stop___llvm_prf_cnts);
    }
}
"#;

    #[test]
    fn a_program_built_for_coverage_reads_back_the_lines_it_ran() {
        let dir = std::env::temp_dir().join(format!("tlbkit-llvmcov-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("prog.rs");
        std::fs::write(&src, PROGRAM).unwrap();
        let exe = dir.join("prog");
        let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
        let built = std::process::Command::new(&rustc)
            .args(["--edition", "2024", "-C", "instrument-coverage", "-C", "opt-level=1"])
            .args(["-C", "llvm-args=-enable-name-compression=false", "-o"])
            .arg(&exe)
            .arg(&src)
            .output()
            .expect("rustc runs");
        assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
        let ran = std::process::Command::new(&exe).env("LLVM_PROFILE_FILE", dir.join("x.profraw")).output().unwrap();
        assert!(ran.status.success());
        let out = String::from_utf8(ran.stdout).unwrap();
        let dumped = |what: &str| -> (u64, Vec<u8>) {
            let l = out.lines().find(|l| l.starts_with(what)).unwrap();
            let mut w = l.split(' ').skip(1);
            let addr = w.next().unwrap().parse().unwrap();
            let hex = w.next().unwrap_or("");
            (addr, (0..hex.len() / 2).map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap()).collect())
        };
        let ((data_addr, data), (counters_addr, counters)) = (dumped("data "), dumped("cnts "));
        let elf = std::fs::read(&exe).unwrap();
        let secs = sections(&elf).unwrap();
        let sec = |n: &str| {
            let s = secs.iter().find(|s| s.name == n).unwrap();
            &elf[s.offset..s.offset + s.size as usize]
        };
        let files = read(&Image {
            covmap: sec("__llvm_covmap"),
            covfun: sec("__llvm_covfun"),
            data: &data,
            data_addr,
            counters: &counters,
            counters_addr,
        })
        .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        // A map cut short or with a byte changed anywhere is an error or a
        // reading, never a panic or a hang.
        let (covmap, covfun) = (sec("__llvm_covmap"), sec("__llvm_covfun"));
        for at in 0..covfun.len() + covmap.len() {
            let (mut map, mut fun) = (covmap.to_vec(), covfun.to_vec());
            if at < fun.len() {
                fun[at] ^= 0xff;
            } else {
                map[at - fun.len()] ^= 0xff;
            }
            let image =
                Image { covmap: &map, covfun: &fun, data: &data, data_addr, counters: &counters, counters_addr };
            let _ = read(&image);
            let cut = Image { covfun: &covfun[..at.min(covfun.len())], ..image };
            let _ = read(&cut);
        }
        let (name, f) = files.iter().find(|(n, _)| n.ends_with("prog.rs")).expect("the program's file");
        assert!(name.starts_with('/'), "{name}: joined to its directory");
        let line = |mark: &str| PROGRAM.lines().position(|l| l.ends_with(mark)).unwrap() as u32 + 1;
        assert!(f.lines[&line("// taken")] >= 1, "{f:?}");
        assert_eq!(f.lines[&line("// not taken")], 0, "{f:?}");
        assert_eq!(f.lines[&line("// never")], 0, "{f:?}");
        let fn_line = |name: &str| PROGRAM.lines().position(|l| l.starts_with(name)).unwrap() as u32 + 1;
        assert_eq!(f.functions[&fn_line("fn pick")], 1);
        assert_eq!(f.functions[&fn_line("fn never")], 0);
        assert_eq!(f.functions[&fn_line("fn main")], 1);
    }

    #[test]
    fn expressions_are_evaluated_by_their_kind_and_a_cycle_counts_zero() {
        // e0 = c0 - c1, e1 = e0 + c2, e2 = e2 + c0 (a cycle).
        let counters = [10, 3, 5];
        let exprs =
            [(Term::Counter(0), Term::Counter(1)), (Term::Sub(0), Term::Counter(2)), (Term::Add(2), Term::Counter(0))];
        let mut e = Eval::new(&counters, &exprs);
        assert_eq!(e.value(Term::Sub(0)), 7);
        assert_eq!(e.value(Term::Add(1)), 12);
        assert_eq!(e.value(Term::Add(2)), 0);
        assert_eq!(e.value(Term::Sub(7)), 0, "past the expressions");
        // A chain far deeper than a thread's stack would take by recursion.
        let chain: Vec<(Term, Term)> = (0..200_000)
            .map(|i| (if i == 0 { Term::Counter(0) } else { Term::Add(i - 1) }, Term::Counter(1)))
            .collect();
        assert_eq!(Eval::new(&[1, 1], &chain).value(Term::Add(199_999)), 200_001);
    }

    #[test]
    fn a_binary_built_without_coverage_has_none() {
        // This test binary is not instrumented: no map, no error.
        assert!(Process::open().unwrap().is_none());
    }

    #[test]
    fn the_load_bias_places_this_binary_s_code() {
        let elf = std::fs::read("/proc/self/exe").unwrap();
        let text = sections(&elf).unwrap().into_iter().find(|s| s.name == ".text").unwrap();
        let bias = load_bias(&elf).unwrap();
        let f = md5 as fn(&[u8]) -> [u8; 16] as usize as u64;
        let start = text.addr.wrapping_add(bias);
        assert!(start <= f && f < start + text.size, "{f:#x} outside .text at {start:#x}");
    }

    #[test]
    fn a_line_counts_its_innermost_region_and_those_starting_on_it() {
        // fn f() {            line 1, whole body: 5
        //     if c {          line 2
        //         a();        line 3, the branch: 0
        //     }               line 4
        //     b();            line 5, after: 5
        // }                   line 6
        let mut rs = vec![
            Region { start: (1, 1), end: (6, 2), count: 5 },
            Region { start: (2, 10), end: (4, 6), count: 0 },
            Region { start: (5, 5), end: (5, 9), count: 5 },
        ];
        let mut lines = BTreeMap::new();
        lines_of(&mut rs, &mut lines);
        assert_eq!(lines.get(&1), Some(&5));
        assert_eq!(lines.get(&2), Some(&5), "the condition runs with the function");
        assert_eq!(lines.get(&3), Some(&0), "inside the branch: its count");
        assert_eq!(lines.get(&4), Some(&0));
        assert_eq!(lines.get(&5), Some(&5));
        assert_eq!(lines.get(&6), Some(&5));
        assert_eq!(lines.get(&7), None);
    }
}
