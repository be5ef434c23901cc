//! The trace file: tlbkit's compact, versioned encoding of a [`Trace`].
//!
//! # Layout (version 1)
//!
//! All integers marked `v` are unsigned LEB128 varints (7 bits a byte, low
//! bits first, at most 10 bytes); fixed-width integers are little-endian.
//!
//! ```text
//! file    = header body
//! header  = magic "tlbtrace" (8 bytes) | version u32 (1) | flags u32
//!         | body_len u64 (bytes of body) | checksum u64 (FNV-1a 64 of body)
//! body    = nprocs:v process{nprocs} nthreads:v thread{nthreads} stream{nthreads}
//! process = pid:v nregions:v region{nregions}
//! region  = page:v pages:v write:u8            (the process's image, ascending)
//! thread  = tid:v process:v synced:u8 nrecords:v nbytes:v
//! stream  = record{nrecords}, exactly nbytes bytes, one per thread in order
//! record  = tag:u8 [instrs:v if tag & 0x20] payload
//! ```
//!
//! `flags` bit 0 says instruction fetches were kept (`Code` records). A tag's
//! low four bits are the record's kind, bit 4 (`0x10`) its flag (a write for
//! `Data`, `Mmap` and `Mprotect`; waiting for `Arrive`), bit 5 (`0x20`) that an
//! instruction count follows (absent means 0):
//!
//! | kind | record | payload |
//! |---|---|---|
//! | 0 | `Code` | pageref |
//! | 1 | `Data` | pageref, refs - 1:v |
//! | 2 | `Mmap` | page:v, pages:v |
//! | 3 | `Munmap` | page:v, pages:v |
//! | 4 | `Mprotect` | page:v, pages:v |
//! | 5 | `Madvise` | page:v, pages:v |
//! | 6 | `Fork` | thread:v (the child process's first thread) |
//! | 7 | `Clone` | thread:v |
//! | 8 | `Execve` | |
//! | 9 | `Wait` | count:v |
//! | 10 | `Wake` | n:v, thread:v{n} |
//! | 11 | `Arrive` | leader:v |
//! | 12 | `Exit` | |
//!
//! A `pageref` names a page through the stream's dictionary of the pages it
//! has named so far: an index below the dictionary's length is that entry; an
//! index equal to it is followed by a new page, zigzag-encoded as the
//! difference from the previous new page (0 before the first), and appended.
//! A program's references cycle through a few hundred pages, so a reference run
//! usually costs three or four bytes.
//!
//! # What reading checks
//!
//! A file shorter than its header says is truncated, one longer has trailing
//! bytes, and a checksum that does not match means a corrupt body: all errors,
//! never a shorter trace. The body must then decode exactly: counts and lengths
//! agree, every stream ends with its one `Exit`, every thread other than the
//! first is created by exactly one `Fork` (as the first thread of a later
//! process) or `Clone` (within its process), and synchronisation names only
//! synchronised threads of the same process. A trace that reads is safe to
//! replay. Writing goes to a temporary file in the same directory, renamed over
//! the target only once complete, so a failed write leaves no half-written trace.

use crate::error::{Error, TraceProblem};
use crate::program::Region;
use std::path::Path;

/// The magic bytes a trace file starts with.
pub const MAGIC: &[u8; 8] = b"tlbtrace";
/// The format version this tlbkit writes and reads.
pub const VERSION: u32 = 1;
/// `flags` bit: instruction fetches were kept.
pub const FLAG_IFETCH: u32 = 1;
/// Bytes of the header.
pub(crate) const HEADER: usize = 32;
/// The user addresses a trace may name end here (see [`crate::program::USER_VA_END`]).
pub const PAGE_END: u64 = crate::program::USER_VA_END >> 12;

/// A traced program, ready to replay: its processes and their threads' streams.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    /// Whether instruction fetches were kept ([`Event::Code`] records).
    pub ifetch: bool,
    /// The processes; the first is the one the replay starts.
    pub processes: Vec<Process>,
    /// Every thread of every process; the first is the first process's first.
    pub threads: Vec<Thread>,
}

/// One traced process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Process {
    /// Its pid in the traced run (for messages).
    pub pid: u32,
    /// What its address space maps before its first recorded event, ascending
    /// and disjoint (used for the first process; a forked one inherits).
    pub image: Vec<Region>,
}

/// One traced thread and what it did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Thread {
    /// Its thread id in the traced run (for messages).
    pub tid: u32,
    /// The index of its process.
    pub process: u32,
    /// Whether it synchronises with its process's other threads (it has a
    /// semaphore the replay creates for it).
    pub synced: bool,
    /// What it did, in order; the last is [`Event::Exit`].
    pub records: Vec<Record>,
}

/// One step of a thread: some instructions, then an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Guest instructions the thread executed since its previous record.
    pub instrs: u64,
    /// What it did then.
    pub event: Event,
}

/// What a thread did. Pages are the traced program's virtual page numbers
/// (address / 4096).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Fetched instructions from a new code page.
    Code {
        /// The page.
        page: u64,
    },
    /// Made `refs` consecutive data references to one page.
    Data {
        /// The page.
        page: u64,
        /// References (at least 1).
        refs: u64,
        /// Whether any of them wrote.
        write: bool,
    },
    /// `mmap`: mapped `pages` pages at `page` (replacing what was there).
    Mmap {
        /// First page.
        page: u64,
        /// Pages.
        pages: u64,
        /// Whether the mapping is writable.
        write: bool,
    },
    /// `munmap` of `pages` pages at `page`.
    Munmap {
        /// First page.
        page: u64,
        /// Pages.
        pages: u64,
    },
    /// `mprotect` of `pages` pages at `page`.
    Mprotect {
        /// First page.
        page: u64,
        /// Pages.
        pages: u64,
        /// Whether writes are allowed afterwards.
        write: bool,
    },
    /// `madvise(MADV_DONTNEED)` of `pages` pages at `page`, all mapped.
    Madvise {
        /// First page.
        page: u64,
        /// Pages.
        pages: u64,
    },
    /// `fork`: a new process, whose first thread is `thread`, copies this one.
    Fork {
        /// The child's first thread.
        thread: u32,
    },
    /// `clone` of a thread into this process.
    Clone {
        /// The new thread.
        thread: u32,
    },
    /// `execve`: a fresh address space replaces this process's.
    Execve,
    /// Waits for `count` other threads to arrive (see [`Event::Arrive`]).
    Wait {
        /// Arrivals to wait for.
        count: u32,
    },
    /// Lets the waiting threads go on.
    Wake {
        /// The threads that arrived and wait.
        threads: Vec<u32>,
    },
    /// Arrives at `leader`'s next synchronisation point and, if `wait`, waits
    /// for its [`Event::Wake`].
    Arrive {
        /// The thread whose system call the others wait around.
        leader: u32,
        /// Whether this thread waits (it has not exited).
        wait: bool,
    },
    /// The thread exits (its process with its last thread).
    Exit,
}

impl Event {
    fn kind(&self) -> u8 {
        match self {
            Event::Code { .. } => 0,
            Event::Data { .. } => 1,
            Event::Mmap { .. } => 2,
            Event::Munmap { .. } => 3,
            Event::Mprotect { .. } => 4,
            Event::Madvise { .. } => 5,
            Event::Fork { .. } => 6,
            Event::Clone { .. } => 7,
            Event::Execve => 8,
            Event::Wait { .. } => 9,
            Event::Wake { .. } => 10,
            Event::Arrive { .. } => 11,
            Event::Exit => 12,
        }
    }

    fn flag(&self) -> bool {
        match self {
            Event::Data { write, .. } | Event::Mmap { write, .. } | Event::Mprotect { write, .. } => *write,
            Event::Arrive { wait, .. } => *wait,
            _ => false,
        }
    }
}

const TAG_FLAG: u8 = 0x10;
const TAG_INSTRS: u8 = 0x20;

fn put_v(out: &mut Vec<u8>, mut x: u64) {
    while x >= 0x80 {
        out.push(x as u8 | 0x80);
        x >>= 7;
    }
    out.push(x as u8);
}

fn zigzag(x: i64) -> u64 {
    ((x << 1) ^ (x >> 63)) as u64
}

fn unzigzag(x: u64) -> i64 {
    (x >> 1) as i64 ^ -((x & 1) as i64)
}

/// Returns the FNV-1a 64-bit hash of `bytes`.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

/// A stream's page dictionary, on the writing side.
#[derive(Default)]
struct PageDict {
    index: std::collections::BTreeMap<u64, u64>,
    last_new: u64,
}

impl PageDict {
    fn put(&mut self, out: &mut Vec<u8>, page: u64) {
        if let Some(&i) = self.index.get(&page) {
            put_v(out, i);
            return;
        }
        put_v(out, self.index.len() as u64);
        put_v(out, zigzag(page.wrapping_sub(self.last_new) as i64));
        self.last_new = page;
        self.index.insert(page, self.index.len() as u64);
    }
}

fn encode_stream(records: &[Record]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut dict = PageDict::default();
    for r in records {
        let mut tag = r.event.kind();
        if r.event.flag() {
            tag |= TAG_FLAG;
        }
        if r.instrs > 0 {
            tag |= TAG_INSTRS;
        }
        out.push(tag);
        if r.instrs > 0 {
            put_v(&mut out, r.instrs);
        }
        match &r.event {
            Event::Code { page } => dict.put(&mut out, *page),
            Event::Data { page, refs, .. } => {
                dict.put(&mut out, *page);
                put_v(&mut out, refs - 1);
            }
            Event::Mmap { page, pages, .. }
            | Event::Munmap { page, pages }
            | Event::Mprotect { page, pages, .. }
            | Event::Madvise { page, pages } => {
                put_v(&mut out, *page);
                put_v(&mut out, *pages);
            }
            Event::Fork { thread } | Event::Clone { thread } => put_v(&mut out, *thread as u64),
            Event::Wait { count } => put_v(&mut out, *count as u64),
            Event::Wake { threads } => {
                put_v(&mut out, threads.len() as u64);
                for t in threads {
                    put_v(&mut out, *t as u64);
                }
            }
            Event::Arrive { leader, .. } => put_v(&mut out, *leader as u64),
            Event::Execve | Event::Exit => {}
        }
    }
    out
}

impl Trace {
    /// Returns the trace encoded as a file's bytes.
    ///
    /// # Panics
    ///
    /// If a `Data` record has no reference (`refs == 0`): the importer never
    /// makes one.
    pub fn encode(&self) -> Vec<u8> {
        let mut body = Vec::new();
        put_v(&mut body, self.processes.len() as u64);
        for p in &self.processes {
            put_v(&mut body, p.pid as u64);
            put_v(&mut body, p.image.len() as u64);
            for r in &p.image {
                put_v(&mut body, r.va >> 12);
                put_v(&mut body, r.pages);
                body.push(r.write as u8);
            }
        }
        assert!(
            self.threads.iter().flat_map(|t| &t.records).all(|r| !matches!(r.event, Event::Data { refs: 0, .. })),
            "a Data record without references"
        );
        let streams: Vec<Vec<u8>> = self.threads.iter().map(|t| encode_stream(&t.records)).collect();
        put_v(&mut body, self.threads.len() as u64);
        for (t, s) in self.threads.iter().zip(&streams) {
            put_v(&mut body, t.tid as u64);
            put_v(&mut body, t.process as u64);
            body.push(t.synced as u8);
            put_v(&mut body, t.records.len() as u64);
            put_v(&mut body, s.len() as u64);
        }
        for s in &streams {
            body.extend_from_slice(s);
        }
        let mut out = Vec::with_capacity(HEADER + body.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&(if self.ifetch { FLAG_IFETCH } else { 0 }).to_le_bytes());
        out.extend_from_slice(&(body.len() as u64).to_le_bytes());
        out.extend_from_slice(&fnv1a(&body).to_le_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Decodes a trace file's bytes, checking everything [the module
    /// documentation](self) lists; the error ([`Error::BadTrace`]) says what
    /// is wrong.
    pub fn decode(bytes: &[u8]) -> Result<Trace, Error> {
        Trace::decode_body(bytes).map_err(|problem| Error::BadTrace { path: None, problem })
    }

    /// [`Trace::decode`], its error the problem alone.
    fn decode_body(bytes: &[u8]) -> Result<Trace, TraceProblem> {
        if bytes.len() < HEADER {
            if !MAGIC.starts_with(&bytes[..bytes.len().min(8)]) {
                return Err(TraceProblem::NotATrace);
            }
            return Err(TraceProblem::ShortHeader { len: bytes.len(), header: HEADER });
        }
        if &bytes[..8] != MAGIC {
            return Err(TraceProblem::NotATrace);
        }
        let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let dword = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let (version, flags, len, sum) = (word(8), word(12), dword(16), dword(24));
        if version != VERSION {
            return Err(TraceProblem::Version { version, reads: VERSION });
        }
        if flags & !FLAG_IFETCH != 0 {
            return Err(TraceProblem::UnknownFlags { flags });
        }
        let body = &bytes[HEADER..];
        if (body.len() as u64) < len {
            return Err(TraceProblem::ShortBody { announced: len, len: body.len() as u64 });
        }
        if body.len() as u64 > len {
            return Err(TraceProblem::Trailing { extra: body.len() as u64 - len, announced: len });
        }
        if fnv1a(body) != sum {
            return Err(TraceProblem::Checksum);
        }
        let trace = Reader { bytes: body, at: 0 }.body(flags & FLAG_IFETCH != 0)?;
        trace.check()?;
        Ok(trace)
    }

    /// Reads and decodes the trace file at `path`; the error names the file.
    pub fn read_file(path: &Path) -> Result<Trace, Error> {
        let bytes = std::fs::read(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
        Trace::decode_body(&bytes).map_err(|problem| Error::BadTrace { path: Some(path.to_path_buf()), problem })
    }

    /// Writes the trace to `path` through a temporary file in the same
    /// directory and a rename, so that `path` is never left half-written.
    pub fn write_file(&self, path: &Path) -> Result<(), Error> {
        write_atomically(path, &self.encode())
    }

    /// Checks what a replay relies on beyond the encoding (module
    /// documentation); the error is [`Error::BadTrace`].
    pub fn validate(&self) -> Result<(), Error> {
        self.check().map_err(|problem| Error::BadTrace { path: None, problem })
    }

    /// [`Trace::validate`], its error the problem alone.
    fn check(&self) -> Result<(), TraceProblem> {
        let n = self.threads.len();
        if self.processes.is_empty() || n == 0 || self.threads[0].process != 0 {
            return Err(TraceProblem::FirstThread);
        }
        // Every thread's process first: a fork names a later thread, whose
        // process the loop below has not looked at yet.
        if let Some((i, t)) = self.threads.iter().enumerate().find(|(_, t)| t.process as usize >= self.processes.len())
        {
            let what = format!("process {} does not exist", t.process);
            return Err(TraceProblem::Thread { index: i, tid: t.tid, what });
        }
        let first: Vec<Option<usize>> =
            (0..self.processes.len()).map(|p| self.threads.iter().position(|t| t.process as usize == p)).collect();
        let mut created = vec![false; n];
        created[0] = true;
        for (i, t) in self.threads.iter().enumerate() {
            let bad = |what: String| Err(TraceProblem::Thread { index: i, tid: t.tid, what });
            match t.records.iter().position(|r| r.event == Event::Exit) {
                Some(e) if e + 1 == t.records.len() => {}
                _ => return bad("its stream does not end with its one exit".into()),
            }
            for r in &t.records {
                let target =
                    |c: u32| self.threads.get(c as usize).ok_or(format!("names thread {c}, which does not exist"));
                let same = |c: u32| -> Result<&Thread, String> {
                    let o = target(c)?;
                    if o.process != t.process {
                        return Err(format!("names thread {c} of another process"));
                    }
                    Ok(o)
                };
                let check = match &r.event {
                    Event::Fork { thread } => target(*thread).and_then(|c| {
                        let p = c.process as usize;
                        if first[p] != Some(*thread as usize) || c.process <= t.process {
                            return Err(format!("forks thread {thread}, not the first of a later process"));
                        }
                        if std::mem::replace(&mut created[*thread as usize], true) {
                            return Err(format!("creates thread {thread} a second time"));
                        }
                        Ok(())
                    }),
                    Event::Clone { thread } => same(*thread).and_then(|_| {
                        if std::mem::replace(&mut created[*thread as usize], true) {
                            return Err(format!("creates thread {thread} a second time"));
                        }
                        Ok(())
                    }),
                    Event::Wake { threads } => {
                        threads.iter().try_for_each(|&c| same(c).and_then(|o| synced(o, c)).map(|_| ()))
                    }
                    Event::Arrive { leader, .. } => same(*leader).and_then(|o| synced(o, *leader)).map(|_| ()),
                    Event::Wait { .. } if !t.synced => Err("waits without being synchronised".into()),
                    Event::Code { page } | Event::Data { page, .. } if *page >= PAGE_END => {
                        Err(format!("page {page:#x} lies beyond user memory"))
                    }
                    Event::Mmap { page, pages, .. }
                    | Event::Munmap { page, pages }
                    | Event::Mprotect { page, pages, .. }
                    | Event::Madvise { page, pages }
                        if *pages == 0 || page.saturating_add(*pages) > PAGE_END =>
                    {
                        Err(format!("{pages} page(s) at page {page:#x} are not user memory"))
                    }
                    _ => Ok(()),
                };
                if let Err(e) = check {
                    return bad(e);
                }
            }
        }
        if let Some(i) = created.iter().position(|c| !c) {
            return Err(TraceProblem::NeverCreated { index: i });
        }
        for (i, p) in self.processes.iter().enumerate() {
            for (k, r) in p.image.iter().enumerate() {
                let end = (r.va >> 12).saturating_add(r.pages);
                let next = p.image.get(k + 1).map_or(PAGE_END, |n| n.va >> 12);
                if r.pages == 0 || end > next {
                    return Err(TraceProblem::Image { process: i });
                }
            }
        }
        Ok(())
    }
}

impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rw = |w: bool| if w { "rw" } else { "r" };
        match self {
            Event::Code { page } => write!(f, "code {:#x}", page << 12),
            Event::Data { page, refs, write } => write!(f, "data {:#x} x{refs} {}", page << 12, rw(*write)),
            Event::Mmap { page, pages, write } => write!(f, "mmap {:#x} {pages}p {}", page << 12, rw(*write)),
            Event::Munmap { page, pages } => write!(f, "munmap {:#x} {pages}p", page << 12),
            Event::Mprotect { page, pages, write } => write!(f, "mprotect {:#x} {pages}p {}", page << 12, rw(*write)),
            Event::Madvise { page, pages } => write!(f, "madvise {:#x} {pages}p dontneed", page << 12),
            Event::Fork { thread } => write!(f, "fork thread {thread}"),
            Event::Clone { thread } => write!(f, "clone thread {thread}"),
            Event::Execve => write!(f, "execve"),
            Event::Wait { count } => write!(f, "wait for {count}"),
            Event::Wake { threads } => write!(f, "wake {threads:?}"),
            Event::Arrive { leader, wait } => write!(f, "arrive at {leader}{}", if *wait { " and wait" } else { "" }),
            Event::Exit => write!(f, "exit"),
        }
    }
}

impl Trace {
    /// Writes the trace as text, one record a line (`tlbkit trace dump`): the
    /// instructions since the thread's previous record, right-aligned in a column
    /// as wide as the trace's largest count, then the event.
    pub fn dump(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        let digits = |n: u64| n.checked_ilog10().map_or(1, |l| l as usize + 1);
        let width = self.threads.iter().flat_map(|t| &t.records).map(|r| digits(r.instrs)).max().unwrap_or(1);
        let fetches = if self.ifetch { "instruction fetches kept" } else { "instruction fetches counted only" };
        writeln!(out, "tlbkit trace version {VERSION}, {fetches}")?;
        for (i, p) in self.processes.iter().enumerate() {
            let image: Vec<String> = p
                .image
                .iter()
                .map(|r| format!("{:#x} {}p {}", r.va, r.pages, if r.write { "rw" } else { "r" }))
                .collect();
            writeln!(out, "process {i} (pid {}): image [{}]", p.pid, image.join(", "))?;
        }
        for (i, t) in self.threads.iter().enumerate() {
            let synced = if t.synced { ", synchronised" } else { "" };
            writeln!(out, "thread {i} (tid {}, process {}{synced}): {} records", t.tid, t.process, t.records.len())?;
            for r in &t.records {
                writeln!(out, "  {:pad$}+{}  {}", "", r.instrs, r.event, pad = width - digits(r.instrs))?;
            }
        }
        Ok(())
    }
}

fn synced(t: &Thread, i: u32) -> Result<&Thread, String> {
    if t.synced {
        Ok(t)
    } else {
        Err(format!("synchronises with thread {i}, which has no semaphore"))
    }
}

/// Decodes a body.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn corrupt<T>(&self, what: &str) -> Result<T, TraceProblem> {
        Err(TraceProblem::Corrupt { what: what.to_string(), at: self.at })
    }

    fn byte(&mut self) -> Result<u8, TraceProblem> {
        match self.bytes.get(self.at) {
            Some(&b) => {
                self.at += 1;
                Ok(b)
            }
            None => self.corrupt("the records end inside a field"),
        }
    }

    fn v(&mut self) -> Result<u64, TraceProblem> {
        let mut x = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            if shift == 63 && b > 1 {
                return self.corrupt("a varint overflows 64 bits");
            }
            x |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(x);
            }
        }
        self.corrupt("a varint longer than 10 bytes")
    }

    fn v32(&mut self, what: &str) -> Result<u32, TraceProblem> {
        let x = self.v()?;
        u32::try_from(x).or_else(|_| self.corrupt(&format!("{what} {x} out of range")))
    }

    fn flag(&mut self) -> Result<bool, TraceProblem> {
        match self.byte()? {
            0 => Ok(false),
            1 => Ok(true),
            b => self.corrupt(&format!("flag byte {b}")),
        }
    }

    /// Reads a count of items at least `min_bytes` each, refusing counts the
    /// remaining bytes cannot hold (so a corrupt count allocates nothing).
    fn count(&mut self, min_bytes: usize) -> Result<usize, TraceProblem> {
        let n = self.v()?;
        if n > ((self.bytes.len() - self.at) / min_bytes) as u64 {
            return self.corrupt(&format!("a count of {n} the remaining bytes cannot hold"));
        }
        Ok(n as usize)
    }

    fn body(mut self, ifetch: bool) -> Result<Trace, TraceProblem> {
        let nprocs = self.count(2)?;
        let mut processes = Vec::with_capacity(nprocs);
        for _ in 0..nprocs {
            let pid = self.v32("pid")?;
            let nregions = self.count(3)?;
            let mut image = Vec::with_capacity(nregions);
            for _ in 0..nregions {
                let page = self.v()?;
                let pages = self.v()?;
                if page >= PAGE_END {
                    return self.corrupt("an image region beyond user memory");
                }
                image.push(Region { va: page << 12, pages, write: self.flag()? });
            }
            processes.push(Process { pid, image });
        }
        let nthreads = self.count(5)?;
        let mut heads = Vec::with_capacity(nthreads);
        for _ in 0..nthreads {
            let tid = self.v32("tid")?;
            let process = self.v32("process")?;
            let synced = self.flag()?;
            let nrecords = self.count(1)?;
            let nbytes = self.count(1)?;
            heads.push((tid, process, synced, nrecords, nbytes));
        }
        let mut threads = Vec::with_capacity(nthreads);
        for (tid, process, synced, nrecords, nbytes) in heads {
            let end = self.at + nbytes;
            if end > self.bytes.len() {
                return self.corrupt("a stream longer than the records");
            }
            let mut records = Vec::with_capacity(nrecords);
            let (mut dict, mut last_new) = (Vec::new(), 0u64);
            for _ in 0..nrecords {
                records.push(self.record(&mut dict, &mut last_new)?);
                if self.at > end {
                    return self.corrupt("a stream runs past its length");
                }
            }
            if self.at != end {
                return self.corrupt("a stream's records end before its length");
            }
            threads.push(Thread { tid, process, synced, records });
        }
        if self.at != self.bytes.len() {
            return self.corrupt("bytes after the last stream");
        }
        Ok(Trace { ifetch, processes, threads })
    }

    fn page(&mut self, dict: &mut Vec<u64>, last_new: &mut u64) -> Result<u64, TraceProblem> {
        let i = self.v()?;
        if let Some(&p) = dict.get(i as usize) {
            return Ok(p);
        }
        if i != dict.len() as u64 {
            return self.corrupt(&format!("page index {i} past the dictionary's {}", dict.len()));
        }
        let page = last_new.wrapping_add(unzigzag(self.v()?) as u64);
        dict.push(page);
        *last_new = page;
        Ok(page)
    }

    fn record(&mut self, dict: &mut Vec<u64>, last_new: &mut u64) -> Result<Record, TraceProblem> {
        let tag = self.byte()?;
        if tag & 0xc0 != 0 {
            return self.corrupt(&format!("tag {tag:#x}"));
        }
        let flag = tag & TAG_FLAG != 0;
        let instrs = if tag & TAG_INSTRS != 0 { self.v()? } else { 0 };
        let kind = tag & 0x0f;
        if flag && ![1, 2, 4, 11].contains(&kind) {
            return self.corrupt(&format!("tag {tag:#x}: a flag on a record that has none"));
        }
        let event = match kind {
            0 => Event::Code { page: self.page(dict, last_new)? },
            1 => {
                let page = self.page(dict, last_new)?;
                let refs = self.v()?.checked_add(1).map_or_else(|| self.corrupt("a reference count"), Ok)?;
                Event::Data { page, refs, write: flag }
            }
            2..=5 => {
                let (page, pages) = (self.v()?, self.v()?);
                match kind {
                    2 => Event::Mmap { page, pages, write: flag },
                    3 => Event::Munmap { page, pages },
                    4 => Event::Mprotect { page, pages, write: flag },
                    _ => Event::Madvise { page, pages },
                }
            }
            6 => Event::Fork { thread: self.v32("thread")? },
            7 => Event::Clone { thread: self.v32("thread")? },
            8 => Event::Execve,
            9 => Event::Wait { count: self.v32("count")? },
            10 => {
                let n = self.count(1)?;
                let threads = (0..n).map(|_| self.v32("thread")).collect::<Result<_, _>>()?;
                Event::Wake { threads }
            }
            11 => Event::Arrive { leader: self.v32("thread")?, wait: flag },
            12 => Event::Exit,
            _ => return self.corrupt(&format!("record kind {kind}")),
        };
        Ok(Record { instrs, event })
    }
}

/// Writes `bytes` to `path` through a temporary file beside it and a rename;
/// on failure the temporary file is removed and `path` is left as it was.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    use std::io::Write;
    let name = path.file_name().ok_or_else(|| Error::NotAFile { path: path.to_path_buf() })?;
    let tmp = path.with_file_name(format!(".{}.tmp{}", name.to_string_lossy(), std::process::id()));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    written.map_err(|source| {
        let _ = std::fs::remove_file(&tmp);
        Error::Io { path: path.to_path_buf(), source }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(instrs: u64, event: Event) -> Record {
        Record { instrs, event }
    }

    /// A trace with every kind of record: two processes, the first with two
    /// synchronised threads.
    pub(crate) fn sample() -> Trace {
        let main = vec![
            rec(3, Event::Code { page: 0x108 }),
            rec(0, Event::Data { page: 0x1ffeffe, refs: 5, write: true }),
            rec(2, Event::Data { page: 0x4035, refs: 1, write: false }),
            rec(0, Event::Mmap { page: 0x4a2a, pages: 2049, write: false }),
            rec(0, Event::Mprotect { page: 0x4a2b, pages: 2048, write: true }),
            rec(7, Event::Clone { thread: 1 }),
            rec(0, Event::Data { page: 0x1ffeffe, refs: 300, write: false }),
            rec(0, Event::Wait { count: 1 }),
            rec(0, Event::Munmap { page: 0x4840, pages: 2 }),
            rec(0, Event::Wake { threads: vec![1] }),
            rec(1, Event::Madvise { page: 0x4a2b, pages: 16 }),
            rec(0, Event::Fork { thread: 2 }),
            rec(u64::MAX, Event::Exit),
        ];
        let worker = vec![
            rec(0, Event::Data { page: 0x4a2b, refs: 1, write: true }),
            rec(0, Event::Arrive { leader: 0, wait: true }),
            rec(0, Event::Arrive { leader: 0, wait: false }),
            rec(0, Event::Exit),
        ];
        let child = vec![rec(0, Event::Execve), rec(0, Event::Exit)];
        Trace {
            ifetch: true,
            processes: vec![
                Process {
                    pid: 25563,
                    image: vec![
                        Region { va: 0x108000, pages: 3, write: false },
                        Region { va: 0x1ffeffe000, pages: 2, write: true },
                    ],
                },
                Process { pid: 25860, image: vec![] },
            ],
            threads: vec![
                Thread { tid: 25563, process: 0, synced: true, records: main },
                Thread { tid: 25858, process: 0, synced: true, records: worker },
                Thread { tid: 25860, process: 1, synced: false, records: child },
            ],
        }
    }

    #[test]
    fn write_then_read_gives_the_same_records() {
        let t = sample();
        let bytes = t.encode();
        assert_eq!(Trace::decode(&bytes).unwrap(), t);
        let mut plain = t.clone();
        plain.ifetch = false;
        assert_eq!(Trace::decode(&plain.encode()).unwrap(), plain);
    }

    #[test]
    fn a_run_of_references_costs_a_few_bytes() {
        let bytes = sample().encode();
        let one = Trace::decode(&bytes).unwrap();
        let mut longer = one.clone();
        let extra = rec(4, Event::Data { page: 0x4035, refs: 9, write: true });
        longer.threads[0].records.insert(3, extra);
        assert!(longer.encode().len() - bytes.len() <= 4);
    }

    /// Returns the problem decoding `bytes` finds.
    fn problem(bytes: &[u8]) -> TraceProblem {
        match Trace::decode(bytes) {
            Err(Error::BadTrace { path: None, problem }) => problem,
            other => panic!("not a trace's problem: {other:?}"),
        }
    }

    #[test]
    fn a_file_shorter_than_its_header_says_is_truncated() {
        let bytes = sample().encode();
        let body = (bytes.len() - HEADER) as u64;
        for cut in [bytes.len() - 1, bytes.len() - 20, HEADER] {
            let p = problem(&bytes[..cut]);
            assert_eq!(p, TraceProblem::ShortBody { announced: body, len: (cut - HEADER) as u64 }, "cut at {cut}");
            assert!(p.to_string().starts_with("truncated: the header says"), "{p}");
        }
        for cut in [20, 0] {
            let p = problem(&bytes[..cut]);
            assert_eq!(p, TraceProblem::ShortHeader { len: cut, header: HEADER });
            assert!(p.to_string().starts_with("truncated"), "{p}");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(problem(&long), TraceProblem::Trailing { extra: 1, announced: body });
        assert!(problem(&long).to_string().contains("1 bytes after the"));
    }

    #[test]
    fn damage_is_reported_not_read() {
        let bytes = sample().encode();
        let mut flipped = bytes.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert_eq!(problem(&flipped), TraceProblem::Checksum);
        assert!(problem(&flipped).to_string().contains("checksum"));
        let mut magic = bytes.clone();
        magic[0] = b'T';
        assert_eq!(problem(&magic), TraceProblem::NotATrace);
        assert!(problem(&magic).to_string().starts_with("not a tlbkit trace"));
        let mut version = bytes.clone();
        version[8] = 2;
        assert_eq!(problem(&version), TraceProblem::Version { version: 2, reads: VERSION });
        assert!(problem(&version).to_string().contains("version 2"));
    }

    /// Re-encodes `t` with a valid checksum and returns the decoding problem.
    fn invalid(t: &Trace) -> TraceProblem {
        let p = problem(&t.encode());
        // Validation finds the same without the encoding.
        assert!(matches!(t.validate(), Err(Error::BadTrace { path: None, problem }) if problem == p));
        p
    }

    /// Returns what is wrong with thread `index` of `t`.
    fn thread_problem(t: &Trace, index: usize) -> String {
        match invalid(t) {
            TraceProblem::Thread { index: i, what, .. } if i == index => what,
            other => panic!("not thread {index}'s problem: {other:?}"),
        }
    }

    #[test]
    fn streams_a_replay_could_not_follow_are_refused() {
        let mut t = sample();
        t.threads[1].records.pop();
        assert_eq!(thread_problem(&t, 1), "its stream does not end with its one exit");
        let mut t = sample();
        t.threads[0].records.retain(|r| !matches!(r.event, Event::Clone { .. }));
        assert_eq!(invalid(&t), TraceProblem::NeverCreated { index: 1 });
        assert_eq!(invalid(&t).to_string(), "corrupt: thread 1 is never created");
        let mut t = sample();
        t.threads[0].records.insert(0, rec(0, Event::Clone { thread: 2 }));
        assert!(thread_problem(&t, 0).contains("another process"));
        let mut t = sample();
        t.threads[1].synced = false;
        assert!(thread_problem(&t, 0).contains("no semaphore"));
        let mut t = sample();
        t.threads[0].records[1] = rec(0, Event::Data { page: PAGE_END, refs: 1, write: false });
        assert!(thread_problem(&t, 0).contains("beyond user memory"));
    }

    #[test]
    fn a_fork_of_a_thread_whose_process_does_not_exist_is_corrupt() {
        // Found by `fuzz/run.sh trace_file`: validation indexed the forked
        // thread's process before it had checked that the process exists.
        let file = include_bytes!("../../tests/data/fuzz/trace-fork-names-a-missing-process.trace");
        let e = problem(file);
        assert!(matches!(&e, TraceProblem::Thread { what, .. } if what.ends_with(" does not exist")), "{e}");
        let mut t = sample();
        t.threads[2].process = 7;
        let p = invalid(&t);
        assert_eq!(p, TraceProblem::Thread { index: 2, tid: 25860, what: "process 7 does not exist".into() });
        assert_eq!(p.to_string(), "corrupt: thread 2 (tid 25860): process 7 does not exist");
    }

    #[test]
    fn writing_replaces_the_file_whole_and_a_failed_write_leaves_nothing() {
        let dir = std::env::temp_dir().join(format!("tlbkit-format-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.trace");
        std::fs::write(&path, b"old").unwrap();
        sample().write_file(&path).unwrap();
        assert_eq!(Trace::read_file(&path).unwrap(), sample());
        let missing = dir.join("no-such-dir").join("t.trace");
        assert!(matches!(sample().write_file(&missing), Err(Error::Io { path, .. }) if path == missing));
        // Reading names the file, whether it is missing or no trace.
        let e = Trace::read_file(&missing).unwrap_err();
        assert!(matches!(&e, Error::Io { path, .. } if *path == missing), "{e:?}");
        assert!(e.to_string().starts_with(&format!("{}: ", missing.display())), "{e}");
        std::fs::write(dir.join("x.trace"), b"tlbtrace").unwrap();
        let e = Trace::read_file(&dir.join("x.trace")).unwrap_err();
        assert!(matches!(&e, Error::BadTrace { path: Some(_), problem: TraceProblem::ShortHeader { len: 8, .. } }));
        assert!(e.to_string().ends_with("x.trace: truncated: 8 bytes, shorter than the 32-byte header"), "{e}");
        std::fs::remove_file(dir.join("x.trace")).unwrap();
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from("t.trace")]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
