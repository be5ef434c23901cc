//! Writing the files commands produce (`-o`, `--html`, `--results`): a check
//! before any work starts that the path can be written, so that a mistyped
//! path fails at once instead of after a long run, and a write through a
//! temporary file and a rename, so that a reader never sees half a file.

use std::path::Path;

/// Returns an error unless a file can be written at `path` by
/// [`write_atomically`] (or, with `append`, appended to): its directory exists and
/// takes a new file, and `path` is not a directory. Commands call it before any
/// work starts, so that a mistyped output path fails at once instead of after a
/// long run. `flag` names the option in the message (`-o`, `--html`).
pub fn check_writable(path: &Path, flag: &str, append: bool) -> Result<(), String> {
    let shown = path.display();
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| format!("{flag} {shown}: not a file name; give a path to a file"))?;
    if path.is_dir() {
        return Err(format!("{flag} {shown}: is a directory; give a file name inside it"));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(format!("{flag} {shown}: the directory {} does not exist; create it first", dir.display()));
    }
    if append && path.exists() {
        return std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map(drop)
            .map_err(|e| format!("{flag} {shown}: cannot append to it: {e}"));
    }
    let probe = dir.join(format!(".{name}.probe{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(|e| format!("{flag} {shown}: cannot write in {}: {e}", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Writes `bytes` to `path` through a temporary file beside it and a rename, so
/// that a reader never sees half a file.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let name =
        path.file_name().and_then(|n| n.to_str()).ok_or_else(|| format!("{}: not a file name", path.display()))?;
    let tmp = path.with_file_name(format!(".{name}.tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot rename {} to {}: {e}", tmp.display(), path.display())
    })
}
