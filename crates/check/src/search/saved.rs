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

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The file a saved search lives in, under its directory.
pub const FILE: &str = "search.ckpt";

/// The format's first bytes and version.
const MAGIC: &[u8; 8] = b"TLBKITSV";
const VERSION: u32 = 1;

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
    let bytes = std::env::current_exe().and_then(std::fs::read).unwrap_or_default();
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&bytes))
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
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or("the file is cut short")?;
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
            return Err("a count larger than the file".into());
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

/// Writes `body` as the save of `identity` in `dir`, atomically.
pub fn write(dir: &Path, identity: &str, body: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!("{FILE}.tmp{}", std::process::id()));
    {
        let mut f = std::fs::File::create(&tmp)?;
        let mut head = Writer::default();
        head.0.extend_from_slice(MAGIC);
        head.u32(VERSION);
        head.str(identity);
        f.write_all(&head.0)?;
        f.write_all(body)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, dir.join(FILE))
}

/// Returns the identity the save in `dir` was made with, and its body.
pub fn open(dir: &Path) -> Result<(String, Vec<u8>), String> {
    let path = dir.join(FILE);
    let bytes = std::fs::read(&path).map_err(|e| format!("no saved search to resume: {}: {e}", path.display()))?;
    let mut r = Reader::new(&bytes);
    if r.take(8).ok() != Some(&MAGIC[..]) {
        return Err(format!("{} is not a saved tlbkit search", path.display()));
    }
    let version = r.u32()?;
    if version != VERSION {
        return Err(format!("{} is a save of format {version}; this tlbkit reads format {VERSION}", path.display()));
    }
    let identity = r.str().map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((identity, bytes[r.at..].to_vec()))
}

/// Reads the save in `dir` made by the check `identity`; returns its body,
/// or why it cannot be resumed here.
pub fn read(dir: &Path, identity: &str) -> Result<Vec<u8>, String> {
    let path = dir.join(FILE);
    let (theirs, body) = open(dir)?;
    if theirs != identity {
        let (their_bin, their_check) = theirs.split_once(' ').unwrap_or((&theirs, ""));
        let (our_bin, our_check) = identity.split_once(' ').unwrap_or((identity, ""));
        return Err(if their_bin != our_bin {
            format!("{} was saved by another build of tlbkit (binary {their_bin}, this is {our_bin}): resume it with that build", path.display())
        } else {
            format!("{} is a save of another check ({their_check}); this one is {our_check}", path.display())
        });
    }
    Ok(body)
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
    fn a_save_of_another_check_or_build_is_refused() {
        let dir = std::env::temp_dir().join(format!("tlbkit-saved-{}", std::process::id()));
        write(&dir, "b1 t5~p~2", b"body").unwrap();
        assert_eq!(read(&dir, "b1 t5~p~2").unwrap(), b"body");
        assert!(read(&dir, "b1 t5~q~2").unwrap_err().contains("another check"));
        assert!(read(&dir, "b2 t5~p~2").unwrap_err().contains("another build"));
        std::fs::write(dir.join(FILE), b"TLBKITSV\x01\x00\x00\x00\x05").unwrap();
        assert!(read(&dir, "b1 t5~p~2").unwrap_err().contains("cut short"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
