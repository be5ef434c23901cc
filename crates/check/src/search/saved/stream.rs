//! Saves written and read a piece at a time.
//!
//! A whole save holds every visited state, 16 bytes each, against the
//! table's ten or so: made in memory before it was written, or read whole
//! to be resumed and listed before the table took any of it, a save held
//! several times the visited set's bytes at once, and set the process's
//! peak (a search capped at 32 MiB peaked at 155 MB as it saved; its resume
//! at 253 MB). Here a save goes through a [`Sink`] straight into its file,
//! its header (which holds the length and checksum of what follows) written
//! last, over room left for it; a save to resume is checked a piece at a
//! time ([`open`](super::open)) and its body read by a [`FileReader`], which
//! leaves the visited states where they lie in the file ([`Span`]) for the
//! table to take in a piece at a time. The bytes on disk are the same as a
//! save made in memory: [`Reader`] reads either, through [`BodyRead`].

use super::{Reader, SaveFile, Writer};
use std::borrow::Cow;
use std::fs::File;
use std::io::Write as _;
use std::os::unix::fs::FileExt as _;
use std::sync::Arc;
use xxhash_rust::xxh3::Xxh3Default;

/// The bytes read or written at a time.
const PIECE: usize = 1 << 20;

/// Where a body's bytes go: memory ([`Writer`]) or a save's file ([`Sink`]).
pub trait Out {
    fn bytes(&mut self, b: &[u8]);
    fn u8(&mut self, v: u8) {
        self.bytes(&[v]);
    }
    fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }
}

impl Out for Writer {
    fn bytes(&mut self, b: &[u8]) {
        self.0.extend_from_slice(b);
    }
}

/// A buffer of a size counted before (a save made in place: see
/// [`encode_into`](super::encode_into)); what passes its end is not
/// written, and said.
pub(super) struct Fill<'a> {
    pub buf: &'a mut [u8],
    pub at: usize,
    pub over: bool,
}

impl Out for Fill<'_> {
    fn bytes(&mut self, b: &[u8]) {
        match self.buf.get_mut(self.at..self.at + b.len()) {
            Some(room) => room.copy_from_slice(b),
            None => self.over = true,
        }
        self.at += b.len();
    }
}

/// A save's file being written: what it is given goes to the file a piece
/// at a time, hashed on the way; the first write that fails is kept and
/// the rest are dropped (which finishing returns).
pub struct Sink {
    file: SaveFile,
    piece: Vec<u8>,
    /// The checksum of the identity and the body (the whole save's header's).
    sum: Xxh3Default,
    /// The checksum of the body alone (the one its deltas name).
    body: Xxh3Default,
    len: u64,
    failed: Option<std::io::Error>,
}

/// What a [`Sink`] wrote: the file, both checksums and the body's length.
pub(super) struct Sunk {
    pub file: File,
    pub sum: u64,
    pub body_sum: u64,
    pub len: u64,
}

impl Sink {
    /// A sink into `file` that leaves `room` bytes for a header written
    /// last, then writes `identity` (hashed into the save's checksum, not
    /// the body's).
    pub(super) fn start(mut file: SaveFile, room: usize, identity: &[u8]) -> std::io::Result<Sink> {
        file.write_all(&vec![0; room])?;
        file.write_all(identity)?;
        let mut sum = Xxh3Default::new();
        sum.update(identity);
        Ok(Sink { file, piece: Vec::with_capacity(PIECE), sum, body: Xxh3Default::new(), len: 0, failed: None })
    }

    fn flush(&mut self) {
        let piece = std::mem::take(&mut self.piece);
        self.emit(&piece);
        self.piece = piece;
        self.piece.clear();
    }

    /// Hashes `b` and writes it to the file (unless a write failed before).
    fn emit(&mut self, b: &[u8]) {
        self.sum.update(b);
        self.body.update(b);
        if self.failed.is_none() {
            self.failed = self.file.write_all(b).err();
        }
    }

    /// Writes what is left; returns what was written, or the first failure.
    pub(super) fn finish(mut self) -> std::io::Result<Sunk> {
        self.flush();
        match self.failed {
            Some(e) => Err(e),
            None => Ok(Sunk { file: self.file.0, sum: self.sum.digest(), body_sum: self.body.digest(), len: self.len }),
        }
    }
}

impl Out for Sink {
    fn bytes(&mut self, b: &[u8]) {
        self.len += b.len() as u64;
        if self.piece.len() + b.len() > PIECE {
            self.flush();
        }
        if b.len() > PIECE {
            // Larger than a piece: hashed and written as it is.
            self.emit(b);
        } else {
            self.piece.extend_from_slice(b);
        }
    }
}

/// Reads a save's body, from memory ([`Reader`]) or from its file
/// ([`FileReader`]); every read says when the bytes run out.
pub trait BodyRead<'a> {
    fn u8(&mut self) -> Result<u8, String>;
    fn u64(&mut self) -> Result<u64, String>;
    /// A count of items of at least `min_bytes` each: at most what is left.
    fn len(&mut self, min_bytes: usize) -> Result<usize, String>;
    /// The next `n` bytes, left where they lie to be read later.
    fn span(&mut self, n: u64) -> Result<Span<'a>, String>;
    /// Everything left, in memory.
    fn rest(&mut self) -> Result<Cow<'a, [u8]>, String>;
}

impl<'a> BodyRead<'a> for Reader<'a> {
    fn u8(&mut self) -> Result<u8, String> {
        Reader::u8(self)
    }
    fn u64(&mut self) -> Result<u64, String> {
        Reader::u64(self)
    }
    fn len(&mut self, min_bytes: usize) -> Result<usize, String> {
        Reader::len(self, min_bytes)
    }
    fn span(&mut self, n: u64) -> Result<Span<'a>, String> {
        Ok(Span::Memory(self.take(usize::try_from(n).map_err(|_| "a count larger than the bytes left")?)?))
    }
    fn rest(&mut self) -> Result<Cow<'a, [u8]>, String> {
        Ok(Cow::Borrowed(self.take(self.bytes.len() - self.at)?))
    }
}

/// Bytes of a body, in memory or in a save's file.
pub enum Span<'a> {
    Memory(&'a [u8]),
    File { file: Arc<File>, at: u64, len: u64 },
}

impl Span<'_> {
    /// Its length in bytes.
    pub fn len(&self) -> u64 {
        match self {
            Span::Memory(bytes) => bytes.len() as u64,
            Span::File { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Calls `f` with each pair of little-endian words it holds, in order
    /// (its length a multiple of 16), until `f` fails.
    pub fn pairs(&self, f: &mut dyn FnMut(u64, u64) -> Result<(), String>) -> Result<(), String> {
        let mut each = |bytes: &[u8]| {
            bytes.chunks_exact(16).try_for_each(|p| {
                let word = |i: usize| u64::from_le_bytes(p[i..i + 8].try_into().expect("8 bytes"));
                f(word(0), word(8))
            })
        };
        match self {
            Span::Memory(bytes) => each(bytes),
            Span::File { file, at, len } => read_pieces(file, *at, at + len, &mut |_, piece| each(piece)),
        }
    }
}

/// A body read from its file a piece at a time (see [`Span`]).
pub struct FileReader {
    file: Arc<File>,
    at: u64,
    end: u64,
}

impl FileReader {
    pub(super) fn new(file: Arc<File>, at: u64, len: u64) -> FileReader {
        FileReader { file, at, end: at + len }
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut out = [0; N];
        if self.end - self.at < N as u64 {
            return Err("its contents end early".into());
        }
        self.file.read_exact_at(&mut out, self.at).map_err(|e| format!("reading it: {e}"))?;
        self.at += N as u64;
        Ok(out)
    }
}

impl BodyRead<'static> for FileReader {
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take::<1>()?[0])
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take::<8>()?))
    }
    fn len(&mut self, min_bytes: usize) -> Result<usize, String> {
        let n = self.u64()?;
        if n.saturating_mul(min_bytes.max(1) as u64) > self.end - self.at {
            return Err("a count larger than the bytes left".into());
        }
        Ok(n as usize)
    }
    fn span(&mut self, n: u64) -> Result<Span<'static>, String> {
        if n > self.end - self.at {
            return Err("its contents end early".into());
        }
        let span = Span::File { file: Arc::clone(&self.file), at: self.at, len: n };
        self.at += n;
        Ok(span)
    }
    fn rest(&mut self) -> Result<Cow<'static, [u8]>, String> {
        let mut out = vec![0; (self.end - self.at) as usize];
        self.file.read_exact_at(&mut out, self.at).map_err(|e| format!("reading it: {e}"))?;
        self.at = self.end;
        Ok(Cow::Owned(out))
    }
}

/// What takes each piece [`read_pieces`] reads, with its offset.
type EachPiece<'f> = dyn FnMut(u64, &[u8]) -> Result<(), String> + 'f;

/// Calls `f` with the bytes of `file` from `at` to `end`, a piece at a
/// time (each with its offset), until it fails or a read does.
fn read_pieces(file: &File, at: u64, end: u64, f: &mut EachPiece<'_>) -> Result<(), String> {
    let mut piece = vec![0; PIECE.min(end.saturating_sub(at) as usize)];
    let mut pos = at;
    while pos < end {
        let n = (end - pos).min(PIECE as u64) as usize;
        file.read_exact_at(&mut piece[..n], pos).map_err(|e| format!("reading it: {e}"))?;
        f(pos, &piece[..n])?;
        pos += n as u64;
    }
    Ok(())
}

/// Hashes the bytes of `file` from `at` to `end` a piece at a time, into
/// each hasher of `sums` from its own offset on.
pub(super) fn hash_range(file: &File, at: u64, end: u64, sums: &mut [(u64, &mut Xxh3Default)]) -> Result<(), String> {
    read_pieces(file, at, end, &mut |pos, piece| {
        for (from, sum) in sums.iter_mut() {
            let skip = from.saturating_sub(pos).min(piece.len() as u64) as usize;
            sum.update(&piece[skip..]);
        }
        Ok(())
    })
}
