//! Saved searches: an exhaustive search written to a directory as it runs
//! (`tlbkit check --checkpoint DIR`) and continued from there
//! (`--resume DIR`), as TLC's `-recover` does.
//!
//! # What is saved, and when
//! The parallel search ([`super::exhaustive_parallel`]) is paused at
//! execution boundaries: every worker puts the subtree it is exploring back
//! into the work queue, positioned at the execution it would run next, and
//! waits. With every worker waiting, the queue *is* the frontier: the
//! subtrees not yet explored (each its choices, the options of each choice
//! still to run, and the sleep sets and footprints partial-order reduction
//! keeps per choice), and the visited set holds every state reached. Those,
//! the counters, the caller's own counters (what one execution reached) and
//! the check's identity are written to `DIR/search.ckpt` through a temporary
//! file and a rename, so a kill at any moment leaves the last whole save. A
//! resumed search starts from that queue and that set; it runs what the
//! saved one would have run after the save, so it ends with the same verdict
//! and, the search being complete, the same states.
//!
//! Saves happen every `--checkpoint-every` seconds, when SIGINT or SIGTERM
//! arrives (then the check stops, exit 2, and says how to resume), and when
//! the visited set is about to pass `--max-memory` (then too).
//!
//! # What a save is bound to
//! The check's identity: the binary (a hash of its executable file) and the
//! spec (its replay token's header: policy, shape, memory model, menu). A
//! save made by another build or for another check is refused in one line.
//! The number of workers is free: `--jobs` may differ on resume.
//!
//! # The file
//! A 36-byte header: the magic `TLBKITSV`, the format's version (3), the
//! length of the rest, the rest's xxh3-64 checksum and the checksum of the
//! header's bytes before it; then the identity and the body. Each problem a
//! file can have is refused in one line that says which ([`SaveProblem`]):
//! no file; not a save (other first bytes); another format version (an older
//! tlbkit's); cut short (fewer bytes than the header says: a copy cut off, or
//! a file written only in part); corrupted (a checksum does not match: a byte
//! changed); another build; another check. A checksum catches bytes changed
//! by accident (a disk, a copy), not a file made to look like a save; the
//! reader reads such a body too without panicking, and every count in it is
//! bounded by the bytes left, so it allocates no more than the file holds.
//! A save whose write fails (a full disk) removes its temporary file and
//! leaves the save before it as it was.
//! A save is written into its file as it is made, and read back from the
//! file a piece at a time, its visited states left there until the table
//! takes them in (`saved/stream.rs`): neither holds a copy of the save in memory.
//!
//! # Saves after the first
//! A search's first save writes the whole visited set; each later one
//! appends to `DIR/search.deltas` only the states added or narrowed since
//! the save before (the table marks them: `Table::record_changes`), with the
//! whole frontier and counters, so a save costs what the search did since,
//! not its size. A delta is its magic `TLBKITDL`, the checksum of the whole
//! save's body it follows, its length and its checksum, then a body as the
//! whole save's, whose visited states are the changed ones. A resume reads
//! the whole save, then each delta that follows it in order (its states
//! admitted: masks only narrow, so the last one a state has is its mask
//! then), and takes the frontier of the last: the search as it was at that
//! save. A delta cut short (a kill while it was written) or corrupted ends
//! the list there: the saves before it stand. A whole save is written again
//! (and the deltas removed) once the deltas would outgrow it, and at a
//! resumed search's first save. Deltas of another whole save (left by a
//! kill between a whole save's rename and their removal) are ignored.

mod stream;

pub use stream::{BodyRead, FileReader, Out, Sink, Span};

use crate::error::{Error, SaveProblem};
use std::cell::Cell;
use std::io::Write as _;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use xxhash_rust::xxh3::xxh3_64;

/// The file a saved search lives in, under its directory.
pub const FILE: &str = "search.ckpt";
/// The saves after it, each only what changed (see "Saves after the first").
pub const DELTAS: &str = "search.deltas";
/// A delta's first bytes.
const DELTA_MAGIC: &[u8; 8] = b"TLBKITDL";

/// The format's first bytes and version.
const MAGIC: &[u8; 8] = b"TLBKITSV";
const VERSION: u32 = 4;

/// The header's bytes: the magic, the version, the length of the rest, its
/// checksum and the checksum of the header's bytes before this one.
const HEAD: usize = 8 + 4 + 8 + 8 + 8;

/// How a search saves itself.
#[derive(Clone, Debug)]
pub struct Saving {
    /// The directory.
    pub dir: PathBuf,
    /// Seconds between saves.
    pub every: Duration,
    /// The most bytes the visited set may take; past it the search saves and stops.
    pub max_memory: Option<u64>,
    /// The check's identity, written into the save and compared on resume.
    pub identity: String,
}

/// Why a saving search ended before its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// SIGINT or SIGTERM.
    Signal,
    /// The visited set would have passed the cap: it needed this many bytes.
    Memory(u64),
}

/// Set by the signal handler; read by the saving search.
static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALLED.store(true, Ordering::SeqCst);
}

/// Makes SIGINT and SIGTERM ask a saving search to save and stop (instead
/// of ending the process at once).
pub fn catch_signals() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
}

/// Returns whether SIGINT or SIGTERM arrived since [`catch_signals`].
pub fn signalled() -> bool {
    SIGNALLED.load(Ordering::SeqCst)
}

/// Returns the identity of this binary: a hash of its executable file.
pub fn binary_id() -> String {
    let hash = std::env::current_exe().and_then(|p| file_hash(&p)).unwrap_or_else(|_| xxh3_64(&[]));
    format!("{hash:016x}")
}

/// The XXH3 hash of the file at `path`, read a piece at a time (an
/// executable may be tens of megabytes: read whole, it would set the
/// process's peak memory).
fn file_hash(path: &std::path::Path) -> std::io::Result<u64> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match file.read(&mut buf) {
            Ok(0) => return Ok(hasher.digest()),
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Returns the identity of the code running this function: a hash of the
/// file it was loaded from, the executable or a shared library (the Python
/// package's extension module, whose process's executable is Python's).
/// Hashed once a process.
pub fn module_id() -> String {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        // SAFETY: `dladdr` reads the loader's tables for an address in this
        // module and fills `info`, whose name, when set, is a C string the
        // loader keeps while the module is loaded (as this one is).
        let path = unsafe {
            let mut info: libc::Dl_info = std::mem::zeroed();
            let found = libc::dladdr(module_id as *const libc::c_void, &mut info) != 0 && !info.dli_fname.is_null();
            found.then(|| std::ffi::CStr::from_ptr(info.dli_fname).to_string_lossy().into_owned())
        };
        match path.and_then(|p| file_hash(p.as_ref()).ok()) {
            Some(hash) => format!("{hash:016x}"),
            None => binary_id(),
        }
    })
    .clone()
}

/// Little-endian bytes of a save.
#[derive(Default)]
pub struct Writer(pub Vec<u8>);

impl Writer {
    pub fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    pub fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
    }
}

/// Reads what a [`Writer`] wrote; every read says when the bytes run out.
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, at: 0 }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or("its contents end early")?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }
    pub fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    pub fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }
    pub fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }
    /// A count of items of at least `min_bytes` each: at most what is left.
    pub fn len(&mut self, min_bytes: usize) -> Result<usize, String> {
        let n = self.u64()? as usize;
        if n.saturating_mul(min_bytes.max(1)) > self.bytes.len() - self.at {
            return Err("a count larger than the bytes left".into());
        }
        Ok(n)
    }
    pub fn str(&mut self) -> Result<String, String> {
        let n = self.len(1)?;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| "text that is not UTF-8".to_string())
    }
    pub fn done(&self) -> bool {
        self.at == self.bytes.len()
    }
}

/// Returns the header and the identity: the bytes of a save before `body`.
fn head(identity: &str, body: &[u8]) -> Vec<u8> {
    let id = identity_bytes(identity);
    let mut sum = xxhash_rust::xxh3::Xxh3Default::new();
    sum.update(&id);
    sum.update(body);
    let mut w = header((id.len() + body.len()) as u64, sum.digest());
    w.extend_from_slice(&id);
    w
}

/// The identity as a save holds it.
fn identity_bytes(identity: &str) -> Vec<u8> {
    let mut id = Writer::default();
    id.str(identity);
    id.0
}

/// The header of a save whose identity and body take `len` bytes, with
/// `sum` their checksum.
fn header(len: u64, sum: u64) -> Vec<u8> {
    let mut w = Writer::default();
    w.0.extend_from_slice(MAGIC);
    w.u32(VERSION);
    w.u64(len);
    w.u64(sum);
    w.u64(xxh3_64(&w.0));
    w.0
}

/// Checks the header `head` (the first [`HEAD`] bytes of a save of `total`
/// bytes, fewer if it has fewer) and returns the length and checksum it
/// gives the rest (which has at least that length).
fn check_head(head: &[u8], total: u64) -> Result<(u64, u64), SaveProblem> {
    let cut = SaveProblem::CutShort { have: total, need: None };
    let Some(magic) = head.get(..MAGIC.len()) else {
        return Err(if MAGIC.starts_with(head) { cut } else { SaveProblem::NotASave });
    };
    if magic != MAGIC {
        return Err(SaveProblem::NotASave);
    }
    let version = head.get(8..12).ok_or(cut.clone())?;
    let found = u32::from_le_bytes(version.try_into().expect("4 bytes"));
    if found != VERSION {
        return Err(SaveProblem::Format { found, reads: VERSION });
    }
    let word = |at: usize| head.get(at..at + 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
    let (Some(len), Some(sum), Some(head_sum)) = (word(12), word(20), word(28)) else { return Err(cut) };
    if xxh3_64(&head[..HEAD - 8]) != head_sum {
        return Err(SaveProblem::Corrupted);
    }
    if total - (HEAD as u64) < len {
        return Err(SaveProblem::CutShort { have: total, need: Some(len.saturating_add(HEAD as u64)) });
    }
    if total - HEAD as u64 != len {
        return Err(SaveProblem::Corrupted);
    }
    Ok((len, sum))
}

/// Returns the bytes of the save of `identity` whose body is `body`: what
/// [`write()`] puts in the file and [`decode`] reads.
pub fn encode(identity: &str, body: &[u8]) -> Vec<u8> {
    let mut bytes = head(identity, body);
    bytes.extend_from_slice(body);
    bytes
}

/// The bytes of the save of `identity` whose body takes `body` bytes.
pub fn encoded_len(identity: &str, body: u64) -> u64 {
    (HEAD + 8 + identity.len()) as u64 + body
}

/// Writes into `buf` the save of `identity` whose body `body` writes, as
/// [`encode`] makes it but in place (no copy of the body): `buf` must be
/// [`encoded_len`]'s bytes, and the body exactly as long as counted then,
/// or it is an error.
pub fn encode_into(
    identity: &str,
    buf: &mut [u8],
    body: &mut dyn FnMut(&mut dyn Out) -> Result<(), String>,
) -> Result<(), String> {
    let Some(rest) = buf.get_mut(HEAD..) else { return Err("no room for a save's header".into()) };
    let mut fill = stream::Fill { buf: rest, at: 0, over: false };
    fill.bytes(&identity_bytes(identity));
    body(&mut fill)?;
    if fill.over || fill.at != fill.buf.len() {
        return Err(format!("a save of {} bytes where {} were counted", fill.at, fill.buf.len()));
    }
    let sum = xxh3_64(&buf[HEAD..]);
    let head = header((buf.len() - HEAD) as u64, sum);
    buf[..HEAD].copy_from_slice(&head);
    Ok(())
}

/// Returns the identity a save's bytes were made with and its body, or what
/// is wrong with them (see the module's "The file"). Reads nothing beyond
/// `bytes` and allocates no more than they hold, whatever they say.
pub fn decode(bytes: &[u8]) -> Result<(String, &[u8]), SaveProblem> {
    let (_, sum) = check_head(&bytes[..bytes.len().min(HEAD)], bytes.len() as u64)?;
    let rest = &bytes[HEAD..];
    if xxh3_64(rest) != sum {
        return Err(SaveProblem::Corrupted);
    }
    let mut r = Reader::new(rest);
    let identity = r.str().map_err(|why| SaveProblem::Unreadable { why })?;
    Ok((identity, &rest[r.at..]))
}

thread_local! {
    /// The bytes saves written on this thread may still take before the disk
    /// is full, if [`with_room`] says so.
    static ROOM: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Runs `f` as if the disk had room for only `bytes` more bytes of saves
/// written on this thread (a saving search writes on the thread that runs
/// it): a write past them fails as a full disk's does (`ENOSPC`). For tests
/// of what a failed save leaves behind.
pub fn with_room<R>(bytes: u64, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<u64>);
    impl Drop for Restore {
        fn drop(&mut self) {
            ROOM.set(self.0);
        }
    }
    let _restore = Restore(ROOM.replace(Some(bytes)));
    f()
}

/// A save's file, which takes bytes while [`ROOM`] lasts.
struct SaveFile(std::fs::File);

impl std::io::Write for SaveFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let Some(room) = ROOM.get() else { return self.0.write(buf) };
        if room == 0 && !buf.is_empty() {
            return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
        }
        let n = self.0.write(&buf[..buf.len().min(usize::try_from(room).unwrap_or(usize::MAX))])?;
        ROOM.set(Some(room - n as u64));
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// Writes `body` as the save of `identity` in `dir`: into a temporary file,
/// synced, renamed over `DIR/search.ckpt`, then the directory synced (so that
/// the rename survives a power cut). A kill at any moment leaves the last
/// whole save; a failure before the rename (a full disk) removes the
/// temporary file and leaves the save there before as it was.
///
/// Returns the body's checksum, which the deltas that follow it name.
pub fn write(dir: &Path, identity: &str, body: &[u8]) -> Result<u64, Error> {
    write_with(dir, identity, &mut |out: &mut Sink| out.bytes(body)).map(|(sum, _)| sum)
}

/// [`write()`] of the body that `body` writes into the file as it goes
/// (see `saved/stream.rs`); returns the body's checksum and length.
pub fn write_with(dir: &Path, identity: &str, body: &mut dyn FnMut(&mut Sink)) -> Result<(u64, u64), Error> {
    let id = identity_bytes(identity);
    let mut made = (0, 0);
    replace(dir, FILE, &mut |f| {
        let mut sink = Sink::start(f, HEAD, &id)?;
        body(&mut sink);
        let done = sink.finish()?;
        done.file.write_all_at(&header(id.len() as u64 + done.len, done.sum), 0)?;
        made = (done.body_sum, done.len);
        Ok(done.file)
    })?;
    // The deltas of the save before name its body: none follows this one.
    match std::fs::remove_file(dir.join(DELTAS)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::Save {
            file: dir.join(FILE).display().to_string(),
            problem: SaveProblem::WriteFailed { why: format!("{DELTAS}: {e}") },
        }),
        _ => Ok(made),
    }
}

/// Writes the bytes `chunks` (a save, as [`encode`] makes it) into
/// `dir/name` as [`write()`] does: a temporary file, synced, renamed, the
/// directory synced.
pub fn write_named(dir: &Path, name: &str, chunks: &[&[u8]]) -> Result<(), Error> {
    replace(dir, name, &mut |mut f| {
        chunks.iter().try_for_each(|c| f.write_all(c))?;
        Ok(f.0)
    })
}

/// Makes `dir/name` the file `fill` writes into a temporary one (and
/// returns): synced, renamed, the directory synced; a failure removes the
/// temporary file and leaves the file before as it was.
fn replace(
    dir: &Path,
    name: &str,
    fill: &mut dyn FnMut(SaveFile) -> std::io::Result<std::fs::File>,
) -> Result<(), Error> {
    let path = dir.join(name);
    let fail = |problem| Error::Save { file: path.display().to_string(), problem };
    remove_stale_temporaries(dir);
    let tmp = dir.join(format!("{name}.tmp{}", std::process::id()));
    let written = std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::File::create(&tmp))
        .and_then(|f| fill(SaveFile(f)))
        .and_then(|f| f.sync_all())
        .and_then(|()| std::fs::rename(&tmp, &path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(SaveProblem::WriteFailed { why: e.to_string() }));
    }
    std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| fail(SaveProblem::NotSynced { why: e.to_string() }))
}

/// A delta's header: its magic, the checksum of the whole save it follows,
/// its body's length and its body's checksum.
const DELTA_HEAD: usize = 8 + 8 + 8 + 8;

/// Appends `body` to the deltas in `dir` as the save that follows the whole
/// save whose body's checksum is `base` (and the deltas before it), synced;
/// returns how many bytes the deltas take now. A write that fails (a full
/// disk) cuts the file back to what it held, so the saves before stand.
pub fn append(dir: &Path, base: u64, body: &[u8]) -> Result<u64, Error> {
    append_with(dir, DELTAS, base, &mut |out: &mut Sink| out.bytes(body))
}

/// [`append`] to the file `dir/name` (a saving search's deltas, or a
/// sharded search's node's, which follow its whole part of generation
/// `base`) of the body that `body` writes into the file as it goes.
pub fn append_with(dir: &Path, name: &str, base: u64, body: &mut dyn FnMut(&mut Sink)) -> Result<u64, Error> {
    use std::io::Seek as _;
    let path = dir.join(name);
    let fail =
        |why: String| Error::Save { file: path.display().to_string(), problem: SaveProblem::WriteFailed { why } };
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| fail(e.to_string()))?;
    let had = f.seek(std::io::SeekFrom::End(0)).map_err(|e| fail(e.to_string()))?;
    let keep = f.try_clone().map_err(|e| fail(e.to_string()))?;
    let written = Sink::start(SaveFile(f), DELTA_HEAD, &[]).and_then(|mut sink| {
        body(&mut sink);
        let done = sink.finish()?;
        let mut head = Writer::default();
        head.0.extend_from_slice(DELTA_MAGIC);
        head.u64(base);
        head.u64(done.len);
        head.u64(done.body_sum);
        done.file.write_all_at(&head.0, had)?;
        done.file.sync_data()?;
        Ok(done.len)
    });
    match written {
        Ok(len) => Ok(had + DELTA_HEAD as u64 + len),
        Err(e) => {
            let _ = keep.set_len(had);
            Err(fail(e.to_string()))
        }
    }
}

/// The bodies of the deltas in `dir` that follow the whole save whose
/// body's checksum is `base`, in order, up to the first one cut short,
/// corrupted or of another whole save (see "Saves after the first").
pub fn deltas(dir: &Path, base: u64) -> Vec<Vec<u8>> {
    deltas_named(dir, DELTAS, base)
}

/// [`deltas`] of the file `dir/name` ([`append_with`]'s).
pub fn deltas_named(dir: &Path, name: &str, base: u64) -> Vec<Vec<u8>> {
    delta_readers(dir, name, base).into_iter().map_while(|mut r| r.rest().ok().map(|b| b.into_owned())).collect()
}

/// [`deltas_named`], each body left in the file to be read from there.
pub fn delta_readers(dir: &Path, name: &str, base: u64) -> Vec<FileReader> {
    let Ok(file) = std::fs::File::open(dir.join(name)) else { return Vec::new() };
    let Ok(end) = file.metadata().map(|m| m.len()) else { return Vec::new() };
    let file = std::sync::Arc::new(file);
    let mut out = Vec::new();
    let mut at = 0u64;
    while end - at >= DELTA_HEAD as u64 {
        let mut head = [0u8; DELTA_HEAD];
        if file.read_exact_at(&mut head, at).is_err() {
            break;
        }
        let word = |i: usize| u64::from_le_bytes(head[i..i + 8].try_into().expect("8 bytes"));
        let (of, len, sum) = (word(8), word(16), word(24));
        let from = at + DELTA_HEAD as u64;
        if &head[..8] != DELTA_MAGIC || of != base || len > end - from {
            break;
        }
        let mut body = xxhash_rust::xxh3::Xxh3Default::new();
        if stream::hash_range(&file, from, from + len, &mut [(from, &mut body)]).is_err() || body.digest() != sum {
            break;
        }
        out.push(FileReader::new(std::sync::Arc::clone(&file), from, len));
        at = from + len;
    }
    out
}

/// Removes the temporary files of saves in `dir` that a killed check left
/// (`NAME.tmpPID`, written before its rename): those whose process is
/// no longer running, as `/proc/PID` says. Where there is no `/proc` (not
/// Linux) nothing is removed, since a running check's file cannot be told
/// from a dead one's. Errors are ignored: a file left is only disk.
fn remove_stale_temporaries(dir: &Path) {
    let proc = Path::new("/proc/self");
    if !proc.exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.rsplit_once(".tmp")).map(|(_, pid)| pid) else { continue };
        let alive = pid.parse::<u32>().map(|p| Path::new("/proc").join(p.to_string()).exists());
        if alive == Ok(false) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// A save in its file, checked ([`open`]): the identity it was made with,
/// and its body, left in the file ([`Opened::reader`]).
pub struct Opened {
    pub identity: String,
    file: std::sync::Arc<std::fs::File>,
    at: u64,
    len: u64,
    /// The body's checksum, which the deltas that follow it name.
    pub sum: u64,
}

impl Opened {
    /// A reader of the body, from the file.
    pub fn reader(&self) -> FileReader {
        FileReader::new(std::sync::Arc::clone(&self.file), self.at, self.len)
    }

    /// The body, read into memory.
    pub fn bytes(&self) -> Result<Vec<u8>, String> {
        self.reader().rest().map(|b| b.into_owned())
    }
}

/// Checks the save in `dir`, a piece at a time (its checksums, as
/// [`decode`] does), and returns it, or why the file is no save this build
/// can read.
pub fn open(dir: &Path) -> Result<Opened, Error> {
    let path = dir.join(FILE);
    let refuse = |problem| Error::Save { file: path.display().to_string(), problem };
    let missing = |e: std::io::Error| refuse(SaveProblem::Missing { why: e.to_string() });
    let file = std::fs::File::open(&path).map_err(missing)?;
    let total = file.metadata().map_err(missing)?.len();
    let unreadable = |e: std::io::Error| refuse(SaveProblem::Unreadable { why: format!("reading it: {e}") });
    let mut head = vec![0; (HEAD as u64).min(total) as usize];
    file.read_exact_at(&mut head, 0).map_err(unreadable)?;
    let (_, sum) = check_head(&head, total).map_err(refuse)?;
    // The identity's length, read before the checksum is checked: a wrong
    // one is said only if the checksum matches.
    let mut word = [0; 8];
    let id_len = file.read_exact_at(&mut word, HEAD as u64).ok().map(|()| u64::from_le_bytes(word));
    let room = (total - HEAD as u64).saturating_sub(8);
    let body_at = id_len.filter(|&n| n <= room).map_or(total, |n| HEAD as u64 + 8 + n);
    let (mut whole, mut body) = (xxhash_rust::xxh3::Xxh3Default::new(), xxhash_rust::xxh3::Xxh3Default::new());
    let sums = &mut [(HEAD as u64, &mut whole), (body_at, &mut body)];
    stream::hash_range(&file, HEAD as u64, total, sums).map_err(|why| refuse(SaveProblem::Unreadable { why }))?;
    if whole.digest() != sum {
        return Err(refuse(SaveProblem::Corrupted));
    }
    let mut id = vec![0; (body_at - HEAD as u64) as usize];
    file.read_exact_at(&mut id, HEAD as u64).map_err(unreadable)?;
    let identity = Reader::new(&id).str().map_err(|why| refuse(SaveProblem::Unreadable { why }))?;
    let file = std::sync::Arc::new(file);
    Ok(Opened { identity, file, at: body_at, len: total - body_at, sum: body.digest() })
}

/// Reads the save in `dir` made by the check `identity`; returns its body,
/// or why it cannot be resumed here.
pub fn read(dir: &Path, identity: &str) -> Result<Vec<u8>, Error> {
    let opened = resume(dir, identity)?;
    opened.bytes().map_err(|why| Error::Save {
        file: dir.join(FILE).display().to_string(),
        problem: SaveProblem::Unreadable { why },
    })
}

/// [`open`] of the save in `dir` made by the check `identity`, or why it
/// cannot be resumed here.
pub fn resume(dir: &Path, identity: &str) -> Result<Opened, Error> {
    let opened = open(dir)?;
    same_check(&dir.join(FILE), &opened.identity, identity)?;
    Ok(opened)
}

/// Refuses the save in `dir`, made with the identity `theirs`, unless this
/// build made it ([`binary_id`]): before its check is even decoded, which
/// another build may name in words this one does not read.
pub fn same_build(dir: &Path, theirs: &str) -> Result<(), Error> {
    let check = theirs.split_once(' ').map_or("", |(_, c)| c);
    same_check(&dir.join(FILE), theirs, &format!("{} {check}", binary_id()))
}

/// Refuses the save `file`, made with the identity `theirs`, for the check
/// `ours` if another build made it or it saves another check.
pub fn same_check(file: &Path, theirs: &str, ours: &str) -> Result<(), Error> {
    let (their_bin, their_check) = theirs.split_once(' ').unwrap_or((theirs, ""));
    let (our_bin, our_check) = ours.split_once(' ').unwrap_or((ours, ""));
    let problem = if their_bin != our_bin {
        SaveProblem::OtherBuild { theirs: their_bin.into(), ours: our_bin.into() }
    } else if let Some(policy) = edited_policy(their_check, our_check) {
        SaveProblem::OtherContent { policy: policy.into() }
    } else if their_check != our_check {
        SaveProblem::OtherCheck { theirs: their_check.into(), ours: our_check.into() }
    } else {
        return Ok(());
    };
    Err(Error::Save { file: file.display().to_string(), problem })
}

/// Returns the C policy whose content alone tells the checks `theirs` and
/// `ours` apart (token headers, `t5~POLICY~...`): the same files, named the
/// same, edited since the save.
fn edited_policy<'a>(theirs: &'a str, ours: &str) -> Option<&'a str> {
    let (a, b): (Vec<&str>, Vec<&str>) = (theirs.split('~').collect(), ours.split('~').collect());
    if a.len() != b.len() || a.len() < 2 || a[0] != b[0] || a[1] == b[1] || a[2..] != b[2..] {
        return None;
    }
    let policy = tlbkit_c::front::unpinned(a[1]);
    (policy == tlbkit_c::front::unpinned(b[1])).then_some(policy)
}

/// Returns the size `text` gives (`512M`, `4G`, `1.5G`, `100000` bytes).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (num, mult) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 1u64 << 10),
        Some('M') => (&t[..t.len() - 1], 1 << 20),
        Some('G') => (&t[..t.len() - 1], 1 << 30),
        Some('T') => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    let v: f64 = num.parse().map_err(|_| format!("'{text}' is not a size: give bytes or K, M, G, T (e.g. 8G)"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("'{text}' is not a size above 0"));
    }
    Ok((v * mult as f64) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(parse_size("512M").unwrap(), 512 << 20);
        assert_eq!(parse_size("1.5g").unwrap(), 3 << 29);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert!(parse_size("lots").is_err() && parse_size("0").is_err() && parse_size("-1G").is_err());
    }

    #[test]
    fn a_file_hashed_a_piece_at_a_time_hashes_as_read_whole() {
        // Longer than a piece, and not a multiple of one: a save's identity
        // of the code that made it must not change with how it is read.
        let bytes: Vec<u8> = (0..200_003u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let path = std::env::temp_dir().join(format!("tlbkit-file-hash-{}", std::process::id()));
        std::fs::write(&path, &bytes).unwrap();
        let hashed = file_hash(&path);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(hashed.unwrap(), xxh3_64(&bytes));
        assert!(file_hash(std::path::Path::new("/nonexistent/tlbkit")).is_err());
    }

    /// Returns what `read` refused the save for.
    fn refused(r: Result<Vec<u8>, Error>) -> SaveProblem {
        match r {
            Err(Error::Save { problem, .. }) => problem,
            other => panic!("not a refused save: {other:?}"),
        }
    }

    #[test]
    fn a_save_of_another_check_build_or_format_is_refused() {
        let dir = std::env::temp_dir().join(format!("tlbkit-saved-{}", std::process::id()));
        write(&dir, "b1 t5~p~2", b"body").unwrap();
        assert_eq!(read(&dir, "b1 t5~p~2").unwrap(), b"body");
        assert!(matches!(refused(read(&dir, "b1 t5~q~2")), SaveProblem::OtherCheck { .. }));
        assert!(matches!(refused(read(&dir, "b2 t5~p~2")), SaveProblem::OtherBuild { .. }));
        // The same check of a C file whose content changed, and of another file.
        write(&dir, "b1 t5~c:a.c#0000000000000001~2", b"body").unwrap();
        assert_eq!(
            refused(read(&dir, "b1 t5~c:a.c#0000000000000002~2")),
            SaveProblem::OtherContent { policy: "c:a.c".into() }
        );
        assert!(matches!(refused(read(&dir, "b1 t5~c:b.c#0000000000000002~2")), SaveProblem::OtherCheck { .. }));
        assert!(matches!(refused(read(&dir, "b1 t5~c:a.c#0000000000000002~3")), SaveProblem::OtherCheck { .. }));
        std::fs::write(dir.join(FILE), b"TLBKITSV\x01\x00\x00\x00\x05").unwrap();
        assert_eq!(refused(read(&dir, "b1 t5~p~2")), SaveProblem::Format { found: 1, reads: VERSION });
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_killed_checks_temporary_save_is_removed_and_a_running_ones_kept() {
        let dir = std::env::temp_dir().join(format!("tlbkit-saved-stale-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Above any pid_max (2^22): no such process. Process 1 always runs.
        let dead = dir.join(format!("{FILE}.tmp4294967295"));
        let running = dir.join(format!("{FILE}.tmp1"));
        let other = dir.join(format!("{FILE}.tmpnotapid"));
        for f in [&dead, &running, &other] {
            std::fs::write(f, b"half a save").unwrap();
        }
        write(&dir, "b1 t5~p~2", b"body").unwrap();
        assert!(!dead.exists(), "a dead process's temporary save is removed");
        assert!(running.exists() && other.exists(), "a running process's, and a file not named by a pid, stay");
        assert_eq!(read(&dir, "b1 t5~p~2").unwrap(), b"body");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_save_encodes_to_what_it_decodes_from() {
        let bytes = encode("b1 t5~p~2", b"body");
        assert_eq!(bytes.len(), HEAD + 8 + 9 + 4);
        assert_eq!(decode(&bytes), Ok(("b1 t5~p~2".to_string(), &b"body"[..])));
    }

    /// A delta whose write fails leaves the deltas as they were; deltas of
    /// another whole save are not read.
    #[test]
    fn a_delta_that_fails_to_write_leaves_the_deltas_before_it() {
        let dir = std::env::temp_dir().join(format!("tlbkit-saved-deltas-{}", std::process::id()));
        let base = write(&dir, "b1 t5~p~2", b"whole").unwrap();
        let n = append(&dir, base, b"one").unwrap();
        assert!(with_room(10, || append(&dir, base, b"two")).is_err());
        assert_eq!(std::fs::metadata(dir.join(DELTAS)).unwrap().len(), n);
        assert_eq!(append(&dir, base, b"three").unwrap(), 2 * n + 2);
        assert_eq!(deltas(&dir, base), vec![b"one".to_vec(), b"three".to_vec()]);
        assert!(deltas(&dir, base ^ 1).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
