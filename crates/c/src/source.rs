//! The files a C policy is made of, named as `c:PATH[@REV][+PATH[@REV]...]`.
//!
//! A `.c` file is compiled; a header named like one of the shims' replaceable
//! ones (`mmu.h`, `tlbflush.h`) is used in their place, as `<asm/NAME>`. `PATH@REV` reads the file as it is at the git revision `REV`
//! of the tree it lies in (`git show REV:PATH`), so that a kernel developer
//! can compare the file before and after a patch without checking either out:
//! `c:arch/arm64/mm/context.c@v6.12`. A part `cnp=on` is no file: it gives the
//! machine FEAT_TTCnP (`system_supports_cnp()`); nor is `bitops=v4.19`, the
//! atomic bitops of the kernels from v4.19 to v5.19 ([`Sources::early_bitops`]).
//!
//! # Identity by content
//! A check's replay tokens and saves name the policy as the user did, with the
//! digest of what the files held when it ran: `c:context.c#0123456789abcdef`
//! ([`pin`]). Reading a pinned name reads the files again and refuses them in
//! one line when their content differs ([`Error::Changed`]), so a schedule or
//! a saved search of one program is never replayed or resumed over another
//! (an edited file, a moved revision). The digest covers each file's name,
//! its role and its bytes, and the options the name sets.

use crate::error::Error;
use crate::shim::REPLACEABLE;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What one file is to the build.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// A C file to compile.
    Code,
    /// A header used as `<asm/NAME>` in place of the shims' own.
    Header(String),
}

/// One file, read.
#[derive(Clone, Debug)]
pub struct Source {
    /// As the user named it (`context.c@v6.12`).
    pub name: String,
    /// Its file name (`context.c`).
    pub file_name: String,
    /// What it is to the build.
    pub role: Role,
    /// Its bytes.
    pub text: Vec<u8>,
}

/// Every file of one C policy, and the machine options its name sets.
#[derive(Clone, Debug)]
pub struct Sources {
    /// The files, in the order given.
    pub files: Vec<Source>,
    /// `cnp=on`: the CPUs have FEAT_TTCnP (every ARMv8.2 CPU does), so
    /// `system_supports_cnp()` is true. Off by default (an ARMv8.0 machine).
    pub cnp: bool,
    /// `bitops=v4.19`: `test_and_set_bit` and `test_and_clear_bit` as
    /// `include/asm-generic/bitops/atomic.h` had them from v4.19 (when arm64
    /// took the generic ones) to v5.19: one that finds the bit already as it
    /// would leave it returns after a plain `READ_ONCE`, no atomic and no
    /// ordering. From v6.0 (415d83249709, "locking/atomic: Make
    /// test_and_*_bit() ordered on failure") each is a fully ordered atomic
    /// whatever it finds, as arm64's own assembly ones were before v4.19: the
    /// default, `bitops=v6.0`.
    pub early_bitops: bool,
    /// The file is x86's `arch/x86/mm/tlb.c` (built against the x86 shims):
    /// `arch=x86`, or a `.c` file named `tlb.c` or under `x86/`
    /// ([`tlbkit_registry::c_is_x86`]); otherwise arm64's `context.c`.
    pub x86: bool,
    /// `invlpgb=on` (x86): the CPUs have AMD's `INVLPGB` and `TLBSYNC`
    /// (`X86_FEATURE_INVLPGB`), so v6.15's global ASIDs and broadcast
    /// flushes run. Off by default (an Intel machine).
    pub invlpgb: bool,
    /// `sample=every` (x86): every flush is one that v6.15's
    /// `consider_global_asid` samples. The file looks at an mm one jiffy in
    /// 32 per task (`current->pid & 0x1f` against `jiffies`); pids are the
    /// environment's, so the task that flushes is taken to be one whose pid
    /// falls in this jiffy. Off by default: each CPU's task has the CPU's
    /// number as its pid.
    pub sample_every: bool,
}

impl Sources {
    /// Reads the files a policy name names (`c:` and what follows, or only
    /// what follows).
    pub fn parse(name: &str) -> Result<Sources, Error> {
        let list = name.strip_prefix("c:").unwrap_or(name);
        let (list, pinned) = split_digest(list);
        if list.is_empty() {
            return Err(Error::Spec(
                "a C policy names its files: c:PATH[@REV][+PATH...], for example c:arch/arm64/mm/context.c".into(),
            ));
        }
        let mut cnp = false;
        let mut early_bitops = false;
        let mut invlpgb = false;
        let mut sample_every = false;
        let mut files = Vec::new();
        for part in list.split('+') {
            match part.split_once('=') {
                Some(("cnp", v)) => {
                    cnp = match v {
                        "on" => true,
                        "off" => false,
                        _ => return Err(Error::Spec(format!("{part}: cnp is on or off"))),
                    }
                }
                Some(("bitops", v)) => {
                    early_bitops = match v {
                        "v4.19" => true,
                        "v6.0" => false,
                        _ => {
                            return Err(Error::Spec(format!(
                                "{part}: bitops is v4.19 (the kernels from v4.19 to v5.19) or v6.0 (v6.0 on)"
                            )))
                        }
                    }
                }
                Some(("invlpgb", v)) => {
                    invlpgb = match v {
                        "on" => true,
                        "off" => false,
                        _ => return Err(Error::Spec(format!("{part}: invlpgb is on or off"))),
                    }
                }
                Some(("sample", v)) => {
                    sample_every = match v {
                        "every" => true,
                        "pid" => false,
                        _ => {
                            return Err(Error::Spec(format!(
                                "{part}: sample is every (each flush is sampled) or pid (the file's pid & 0x1f test \
                                 against jiffies, with each CPU's task's pid its number)"
                            )))
                        }
                    }
                }
                Some(("arch", v)) => {
                    if v != "x86" && v != "arm64" {
                        return Err(Error::Spec(format!("{part}: arch is x86 or arm64")));
                    }
                }
                Some((k, _)) if !k.contains('/') && !k.contains('.') => {
                    return Err(Error::Spec(format!(
                        "{part}: a C policy's options are cnp=on|off and bitops=v4.19|v6.0 (arm64), invlpgb=on|off \
                         and sample=every|pid (x86), and arch=x86|arm64"
                    )));
                }
                _ => files.push(read(part)?),
            }
        }
        if !files.iter().any(|f| f.role == Role::Code) {
            return Err(Error::Spec(format!("{name} names no .c file: a C policy compiles at least one")));
        }
        let x86 = tlbkit_registry::c_is_x86(name);
        if x86 && (cnp || early_bitops) {
            return Err(Error::Spec(format!("{name}: cnp= and bitops= are arm64's options, and this is an x86 file")));
        }
        if !x86 && (invlpgb || sample_every) {
            return Err(Error::Spec(format!(
                "{name}: invlpgb= and sample= are x86's options, and this is an arm64 file (add +arch=x86 for an \
                 x86 tlb.c)"
            )));
        }
        let sources = Sources { files, cnp, early_bitops, x86, invlpgb, sample_every };
        if let Some(then) = pinned {
            let now = sources.digest();
            if now != then {
                return Err(Error::Changed { name: format!("c:{list}"), then, now });
            }
        }
        Ok(sources)
    }

    /// Returns the digest of the files' content and the options the name
    /// sets: what a pinned name ([`pin`]) carries.
    pub fn digest(&self) -> u64 {
        let mut h = crate::Fnv::new();
        for f in &self.files {
            h.write(f.file_name.as_bytes());
            h.write(match &f.role {
                Role::Code => b"c",
                Role::Header(_) => b"h",
            });
            h.write(&f.text);
        }
        h.write(&[u8::from(self.cnp)]);
        // Only when set, so that every other name's digest is as it was.
        if self.early_bitops {
            h.write(b"bitops=v4.19");
        }
        if self.x86 {
            h.write(b"arch=x86");
        }
        if self.invlpgb {
            h.write(b"invlpgb=on");
        }
        if self.sample_every {
            h.write(b"sample=every");
        }
        h.finish()
    }

    /// Returns the name of the first C file (what messages call the policy).
    pub fn main_name(&self) -> &str {
        self.files.iter().find(|f| f.role == Role::Code).map_or("", |f| f.name.as_str())
    }
}

/// The mark between a C policy's files and the digest of their content.
pub const DIGEST_MARK: char = '#';

/// Returns `name` (`c:FILES...`, pinned or not) pinned to the content its
/// files hold now: `c:FILES#DIGEST`, the [`Sources::digest`] as 16 hex
/// digits. A name pinned already is read (and refused if its files changed)
/// and returned as it was.
pub fn pin(name: &str) -> Result<String, Error> {
    let sources = Sources::parse(name)?;
    let bare = split_digest(name).0;
    Ok(format!("{bare}{DIGEST_MARK}{:016x}", sources.digest()))
}

/// Returns `name` without its digest (`c:context.c#0123456789abcdef` →
/// `c:context.c`): what it names, as the user wrote it.
pub fn unpinned(name: &str) -> &str {
    split_digest(name).0
}

/// Splits a trailing `#DIGEST` (16 hex digits) off `list`; anything else
/// after a `#` is part of a path.
fn split_digest(list: &str) -> (&str, Option<u64>) {
    match list.rsplit_once(DIGEST_MARK) {
        Some((files, hex)) if hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
            (files, u64::from_str_radix(hex, 16).ok())
        }
        _ => (list, None),
    }
}

/// Reads one `PATH[@REV]`.
fn read(part: &str) -> Result<Source, Error> {
    // `PATH@REV`: the path names a .c or .h file, the revision is anything
    // `git show` takes (`origin/master` included).
    let (path, rev) = match part.rsplit_once('@') {
        Some((p, r)) if !r.is_empty() && (p.ends_with(".c") || p.ends_with(".h")) => (p, Some(r)),
        _ => (part, None),
    };
    let file_name = Path::new(path).file_name().and_then(|f| f.to_str()).unwrap_or(path).to_string();
    let role = if file_name.ends_with(".c") {
        Role::Code
    } else if file_name.ends_with(".h") {
        if !REPLACEABLE.contains(&file_name.as_str()) {
            return Err(Error::Spec(format!(
                "{part}: tlbkit's shims have no <asm/{file_name}> to replace; a header may stand for {}",
                REPLACEABLE.join(", ")
            )));
        }
        Role::Header(file_name.clone())
    } else {
        return Err(Error::Spec(format!("{part}: a C policy is made of .c files and the headers that replace shims")));
    };
    let text = match rev {
        None => std::fs::read(path).map_err(|e| Error::Read { path: path.to_string(), why: e.to_string() })?,
        Some(rev) => git_show(path, rev)?,
    };
    Ok(Source { name: part.to_string(), file_name, role, text })
}

/// Returns `path` as it is at revision `rev` of the git tree it lies in.
fn git_show(path: &str, rev: &str) -> Result<Vec<u8>, Error> {
    let fail = |why: String| Error::Read { path: format!("{path}@{rev}"), why };
    let p = PathBuf::from(path);
    let dir = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let dir = dir.canonicalize().map_err(|e| fail(format!("its directory: {e}")))?;
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(&dir)
            .args(args)
            .output()
            .map_err(|e| fail(format!("running git: {e} (reading a file at a revision needs git)")))
    };
    let top = git(&["rev-parse", "--show-toplevel"])?;
    if !top.status.success() {
        return Err(fail(format!("{} is not in a git tree, so it has no revisions", dir.display())));
    }
    let top = PathBuf::from(String::from_utf8_lossy(&top.stdout).trim());
    let file = dir.join(p.file_name().unwrap_or_default());
    let rel = file.strip_prefix(&top).map_err(|_| fail("it is outside its git tree".into()))?;
    let spec = format!("{rev}:{}", rel.display());
    let out = git(&["show", &spec])?;
    if !out.status.success() {
        return Err(fail(format!("git show {spec}: {}", String::from_utf8_lossy(&out.stderr).trim())));
    }
    Ok(out.stdout)
}
