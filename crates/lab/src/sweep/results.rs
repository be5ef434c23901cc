//! The results file of `tlbkit sweep`: one JSON object per line, one line per
//! finished run, each naming the command that repeats its run (`"command"`),
//! which is also how a later sweep knows the run is done.
//!
//! What is guaranteed: a line is appended with one write of the whole line and
//! its newline, as soon as its run finishes, so a killed sweep loses at most
//! the runs in progress. A last line without its newline is a write the kill
//! cut short: opening the file drops it (the run is made again), so no run is
//! ever recorded twice by `tlbkit sweep`. Two sweeps cannot append to one file
//! at once: the file is locked while open. What is not: that lines reach the
//! disk before a power failure (nothing is `fsync`ed); a kill of the process
//! loses nothing the kernel has been handed.

use crate::error::{Error, ResultsStep};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// An open results file.
#[derive(Debug)]
pub struct ResultsFile {
    file: File,
    path: PathBuf,
    /// The command of every run recorded, with the violations it found.
    pub recorded: BTreeMap<String, u64>,
    /// Lines recording a run already recorded above them (written by hand or by
    /// another tool: `tlbkit sweep` never writes one).
    pub duplicates: usize,
    /// Bytes of a torn last line dropped when the file was opened (0: none).
    pub torn_bytes: usize,
}

impl ResultsFile {
    /// Opens (or creates) the results file at `path`, locks it, drops a torn
    /// last line, and reads which runs it records.
    pub fn open(path: &Path) -> Result<ResultsFile, Error> {
        let failed = |step| move |source| Error::ResultsFile { path: path.to_path_buf(), step, source };
        let mut file =
            OpenOptions::new().read(true).append(true).create(true).open(path).map_err(failed(ResultsStep::Open))?;
        file.try_lock().map_err(|e| match e {
            TryLockError::WouldBlock => Error::ResultsInUse { path: path.to_path_buf() },
            TryLockError::Error(e) => failed(ResultsStep::Lock)(e),
        })?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(failed(ResultsStep::Read))?;
        let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let torn_bytes = bytes.len() - whole;
        if torn_bytes > 0 {
            file.set_len(whole as u64).map_err(failed(ResultsStep::DropTorn))?;
        }
        let mut recorded = BTreeMap::new();
        let mut duplicates = 0;
        for (i, line) in bytes[..whole].split(|&b| b == b'\n').enumerate() {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let (command, violations) =
                parse_line(line).ok_or_else(|| Error::ForeignLine { path: path.to_path_buf(), line: i + 1 })?;
            if recorded.insert(command, violations).is_some() {
                duplicates += 1;
            }
        }
        Ok(ResultsFile { file, path: path.to_path_buf(), recorded, duplicates, torn_bytes })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Rewrites the file with the lines recording `order`'s commands first, in
    /// that order (each command's first line), then every other line as it was.
    /// The new text goes to a temporary file beside this one, which is flushed
    /// to disk and renamed over it: a kill at any moment leaves either the old
    /// file or the new one, never a part of either. Nothing is written when the
    /// file is already in that order.
    pub fn put_in_order(self, order: &[String]) -> Result<(), Error> {
        let path = &self.path;
        let failed = |step| move |source| Error::ResultsFile { path: path.clone(), step, source };
        let text = std::fs::read(&self.path).map_err(failed(ResultsStep::Read))?;
        let lines: Vec<&[u8]> = text.split_inclusive(|&b| b == b'\n').collect();
        let mut first: BTreeMap<String, usize> = BTreeMap::new();
        for (i, l) in lines.iter().enumerate() {
            if let Some((command, _)) = parse_line(l) {
                first.entry(command).or_insert(i);
            }
        }
        let mut taken = vec![false; lines.len()];
        let mut out = Vec::with_capacity(text.len());
        for c in order {
            if let Some(&i) = first.get(c) {
                if !taken[i] {
                    taken[i] = true;
                    out.extend_from_slice(lines[i]);
                }
            }
        }
        for (i, l) in lines.iter().enumerate() {
            if !taken[i] {
                out.extend_from_slice(l);
            }
        }
        if out == text {
            return Ok(());
        }
        let name = self.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let tmp = self.path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
        let written = File::create(&tmp)
            .and_then(|mut f| f.write_all(&out).and_then(|()| f.sync_all()))
            .and_then(|()| std::fs::rename(&tmp, &self.path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(failed(ResultsStep::Reorder)(e));
        }
        Ok(())
    }

    /// Appends one line (given without its newline) in one write.
    pub fn append(&mut self, line: &str) -> Result<(), Error> {
        let mut buf = String::with_capacity(line.len() + 1);
        buf.push_str(line);
        buf.push('\n');
        self.file.write_all(buf.as_bytes()).and_then(|()| self.file.flush()).map_err(|source| Error::ResultsFile {
            path: self.path.clone(),
            step: ResultsStep::Append,
            source,
        })
    }
}

/// Returns the command and violations a results line records.
pub(crate) fn parse_line(line: &[u8]) -> Option<(String, u64)> {
    let v: serde_json::Value = serde_json::from_slice(line).ok()?;
    Some((v.get("command")?.as_str()?.to_string(), v.get("violations")?.as_u64()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A results file of a test's own, its folder removed when the test ends.
    struct Temp(PathBuf);

    impl std::ops::Deref for Temp {
        type Target = Path;
        fn deref(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Temp {
        fn drop(&mut self) {
            if let Some(dir) = self.0.parent() {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }

    fn temp(name: &str, content: &str) -> Temp {
        let dir = std::env::temp_dir().join(format!("tlbkit-results-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("r.jsonl");
        std::fs::write(&p, content).unwrap();
        Temp(p)
    }

    #[test]
    fn a_torn_last_line_is_dropped_and_the_file_cut_before_it() {
        let p = temp("torn", "{\"command\":\"a\",\"violations\":0}\n{\"command\":\"b\",\"viol");
        let mut f = ResultsFile::open(&p).unwrap();
        assert_eq!(f.recorded.keys().collect::<Vec<_>>(), ["a"]);
        assert_eq!(f.torn_bytes, "{\"command\":\"b\",\"viol".len());
        f.append("{\"command\":\"b\",\"violations\":2}").unwrap();
        drop(f);
        let text = std::fs::read_to_string(&*p).unwrap();
        assert_eq!(text, "{\"command\":\"a\",\"violations\":0}\n{\"command\":\"b\",\"violations\":2}\n");
        let f = ResultsFile::open(&p).unwrap();
        assert_eq!((f.recorded["b"], f.torn_bytes, f.duplicates), (2, 0, 0));
    }

    #[test]
    fn a_complete_line_without_its_newline_is_torn_too() {
        // The write was cut just before the newline: the run is made again.
        let p = temp("nonl", "{\"command\":\"a\",\"violations\":0}");
        let f = ResultsFile::open(&p).unwrap();
        assert!(f.recorded.is_empty());
        assert_eq!(std::fs::read(&*p).unwrap(), b"");
    }

    #[test]
    fn a_foreign_line_is_refused_with_its_number() {
        let p = temp("foreign", "{\"command\":\"a\",\"violations\":0}\nhello\n");
        let e = ResultsFile::open(&p).unwrap_err();
        assert!(matches!(&e, Error::ForeignLine { path, line: 2 } if *path == *p), "{e:?}");
        assert!(e.to_string().contains("line 2 is not a result of tlbkit sweep"), "{e}");
        // The library names its argument.
        assert!(e.to_string().ends_with("give another file with results"), "{e}");
        assert_eq!(e.param(), Some(crate::error::Param::Results));
    }

    #[test]
    fn a_second_opener_is_refused_while_the_first_holds_the_file() {
        let p = temp("lock", "");
        let first = ResultsFile::open(&p).unwrap();
        let e = ResultsFile::open(&p).unwrap_err();
        assert!(matches!(&e, Error::ResultsInUse { path } if *path == *p), "{e:?}");
        assert!(e.to_string().ends_with("is in use by another tlbkit sweep"), "{e}");
        drop(first);
        ResultsFile::open(&p).unwrap();
    }
}
