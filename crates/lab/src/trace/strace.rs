//! A reader of `strace -f` output (`-tt` timestamps or none), written to a file
//! with `-o` (each line starts with its pid) or to stderr (other processes'
//! lines start with `[pid N]`).
//!
//! It keeps the calls tlbkit replays or needs to follow processes and threads
//! (`mmap`, `munmap`, `mprotect`, `madvise`, `mremap`, `clone`, `clone3`, `fork`,
//! `vfork`, `execve`, `exit`, `exit_group`) and every process's end
//! (`+++ exited with N +++`, `+++ killed by SIG +++`); other calls are checked
//! for form and skipped, signals (`--- SIG... ---`) and strace's own messages
//! skipped. A call strace splits because another process ran in between
//! (`mmap(NULL, 8192, ... <unfinished ...>`, later `<... mmap resumed>) = 0x7f..`)
//! is joined into one, dated at its first line; one whose process ended before
//! it returned is dropped. strace's `strace: Process N attached`, which it may
//! print in the middle of another line, is taken out and the line joined again.
//!
//! Which process an unprefixed line belongs to: with `-o` every line has its
//! pid; on stderr, strace leaves the prefix out while it traces one process, so
//! such a line is that process's (the first process's until a line names it).
//!
//! Errors name the file and line: a line that is none of the above, a resumed
//! call nothing began, a file whose last line has no newline, and a log that
//! ends before a process it shows has ended (the run or the file was cut).

use super::clip;
use crate::Error;
use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;

/// What a call returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ret {
    /// A value (an address, a count, a child's id).
    Value(u64),
    /// An error (`-1 ENOMEM (...)`).
    Error,
    /// Nothing (`?`: the call did not return, as `exit` does not).
    Unknown,
}

/// A system call as strace printed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// Its name.
    pub name: String,
    /// Its arguments as printed, split at top-level commas.
    pub args: Vec<String>,
    /// What it returned.
    pub ret: Ret,
}

/// What a line (or a joined pair of lines) of the log says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum What {
    /// A kept system call.
    Call(Call),
    /// The process or thread ended.
    Exit,
}

/// One event of a process or thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The line it starts on (1-based).
    pub line: usize,
    /// The process or thread id; 0 when the log never names it (one process on stderr).
    pub pid: u32,
    /// What happened.
    pub what: What,
}

/// The calls kept (module documentation).
const KEPT: &[&str] = &[
    "mmap",
    "munmap",
    "mprotect",
    "madvise",
    "mremap",
    "clone",
    "clone3",
    "fork",
    "vfork",
    "execve",
    "exit",
    "exit_group",
];

/// The calls that create a process or thread; they return its id.
pub const CREATE: &[&str] = &["clone", "clone3", "fork", "vfork"];

/// Reads a whole strace log; returns its entries in the order of their lines.
pub fn parse(mut input: impl BufRead, name: &str) -> Result<Vec<Entry>, Error> {
    let mut p = Parser { name: name.to_string(), ..Parser::default() };
    let mut buf = String::new();
    // A line strace cut with its "attached" message, waiting for its rest: its
    // first line, its text so far and the process attached (noted once the line
    // is read, since the line began while that process was not yet traced).
    let mut carry: Option<(usize, String, u32)> = None;
    loop {
        buf.clear();
        let n = input.read_line(&mut buf).map_err(|source| Error::LogIo { name: name.to_string(), source })?;
        if n == 0 {
            break;
        }
        p.line += 1;
        if !buf.ends_with('\n') {
            return p.err("the file ends in the middle of a line (truncated?)");
        }
        let mut text = buf.trim_end_matches(['\n', '\r']).to_string();
        let (mut first, mut attached) = (p.line, None);
        if let Some((l, head, pid)) = carry.take() {
            text = head + &text;
            (first, attached) = (l, Some(pid));
        }
        if let Some((head, pid)) = split_attached(&text) {
            if let Some(earlier) = attached {
                p.attached(earlier);
            }
            if head.trim().is_empty() {
                p.attached(pid);
            } else {
                carry = Some((first, head.to_string(), pid));
            }
            continue;
        }
        let at = std::mem::replace(&mut p.line, first);
        p.logical(&text)?;
        p.line = at;
        if let Some(pid) = attached {
            p.attached(pid);
        }
    }
    if let Some((l, _, _)) = carry {
        p.line = l;
        return p.err("the file ends in the middle of a call (truncated?)");
    }
    p.finish()
}

/// If `text` ends with strace's `strace: Process N attached`, returns what
/// precedes it and N.
fn split_attached(text: &str) -> Option<(&str, u32)> {
    let at = text.rfind("strace: Process ")?;
    let tail = text[at + 16..].strip_suffix(" attached")?;
    Some((&text[..at], tail.parse().ok()?))
}

#[derive(Default)]
struct Parser {
    name: String,
    line: usize,
    entries: Vec<Entry>,
    /// The first process, once a line names it.
    root: Option<u32>,
    /// Ids that some call returned as a child's, or that strace attached.
    children: BTreeSet<u32>,
    /// Every id seen, the unnamed first process as 0.
    known: BTreeSet<u32>,
    /// Ids that have not ended.
    live: BTreeSet<u32>,
    /// Ids that ended.
    ended: BTreeSet<u32>,
    /// Per id, a call that began and has not resumed: its line, name and text.
    pending: BTreeMap<u32, (usize, String, String)>,
}

impl Parser {
    fn err<T>(&self, what: impl std::fmt::Display) -> Result<T, Error> {
        Err(Error::Log { name: self.name.clone(), line: Some(self.line as u64), what: what.to_string() })
    }

    /// Notes strace's "Process N attached".
    fn attached(&mut self, pid: u32) {
        if self.known.is_empty() && self.root.is_none() {
            // strace -p: the first process attached is the first process.
            self.root = Some(pid);
        } else {
            self.children.insert(pid);
        }
        self.known.insert(pid);
        self.live.insert(pid);
    }

    /// Returns the id a line belongs to, given its prefix's.
    fn owner(&mut self, prefix: Option<u32>) -> Result<u32, Error> {
        let Some(pid) = prefix else {
            if self.live.len() == 1 {
                return Ok(*self.live.first().expect("one"));
            }
            if self.known.is_empty() {
                self.known.insert(0);
                self.live.insert(0);
                return Ok(0);
            }
            return self.err("a line without a pid while several processes run (give strace -o FILE)");
        };
        if self.known.insert(pid) {
            self.live.insert(pid);
            if self.root.is_none() && !self.children.contains(&pid) {
                self.root = Some(pid);
                if self.known.remove(&0) {
                    self.rename(pid);
                }
            }
        }
        Ok(pid)
    }

    /// Gives the unnamed first process's lines (pid 0) to `pid`.
    fn rename(&mut self, pid: u32) {
        for e in self.entries.iter_mut().filter(|e| e.pid == 0) {
            e.pid = pid;
        }
        if let Some(c) = self.pending.remove(&0) {
            self.pending.insert(pid, c);
        }
        if self.live.remove(&0) {
            self.live.insert(pid);
        }
        if self.ended.remove(&0) {
            self.ended.insert(pid);
        }
    }

    /// Reads one logical line.
    fn logical(&mut self, text: &str) -> Result<(), Error> {
        if text.trim().is_empty() || text.starts_with("strace: ") || text.starts_with("[ Process ") {
            return Ok(());
        }
        let (prefix, rest) = match text.strip_prefix("[pid") {
            Some(r) => {
                let Some((n, rest)) = r.split_once(']') else {
                    return self.err(format!("malformed pid prefix: {}", clip(text)));
                };
                let Ok(n) = n.trim().parse::<u32>() else {
                    return self.err(format!("malformed pid prefix: {}", clip(text)));
                };
                (Some(n), rest.trim_start())
            }
            None => match text.split_once(' ') {
                Some((n, rest)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => (
                    match n.parse::<u32>() {
                        Ok(pid) => Some(pid),
                        Err(_) => return self.err(format!("pid {n} too large")),
                    },
                    rest.trim_start(),
                ),
                _ => (None, text),
            },
        };
        let rest = strip_time(rest);
        let pid = self.owner(prefix)?;
        if rest.starts_with("+++ exited with ") || rest.starts_with("+++ killed by ") {
            self.pending.remove(&pid);
            self.live.remove(&pid);
            self.ended.insert(pid);
            self.entries.push(Entry { line: self.line, pid, what: What::Exit });
            return Ok(());
        }
        if rest.starts_with("--- ") || rest.starts_with("+++ ") {
            return Ok(());
        }
        if let Some(r) = rest.strip_prefix("<... ") {
            let Some((name, after)) = r.split_once(" resumed>") else {
                return self.err(format!("malformed resumed call: {}", clip(rest)));
            };
            let Some((line, began, head)) = self.pending.remove(&pid) else {
                return self.err(format!("'{name}' resumed, but process {pid} began no call"));
            };
            if began != name {
                return self.err(format!("'{name}' resumed, but process {pid} began '{began}'"));
            }
            let full = head + after;
            let at = std::mem::replace(&mut self.line, line);
            let r = self.call(pid, &full);
            self.line = at;
            return r;
        }
        let name_end = rest.find('(').unwrap_or(0);
        let name = &rest[..name_end];
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'?') {
            return self.err(format!("not a strace line: {}", clip(text)));
        }
        if let Some(head) = rest.strip_suffix("<unfinished ...>") {
            if self.pending.contains_key(&pid) {
                return self.err(format!("process {pid} begins '{name}' before its previous call resumed"));
            }
            self.pending.insert(pid, (self.line, name.to_string(), head.to_string()));
            return Ok(());
        }
        self.call(pid, rest)
    }

    /// Reads a whole call, `NAME(ARGS) = RET ...`.
    fn call(&mut self, pid: u32, text: &str) -> Result<(), Error> {
        let open = text.find('(').unwrap_or(0);
        let name = &text[..open];
        let Some(close) = closing(text, open) else {
            return self.err(format!("unbalanced call: {}", clip(text)));
        };
        let Some(ret) = text[close + 1..].trim_start().strip_prefix('=') else {
            return self.err(format!("a call without its result: {}", clip(text)));
        };
        let ret = match ret.split_whitespace().next() {
            Some("?") => Ret::Unknown,
            Some(r) if r.starts_with('-') => Ret::Error,
            Some(r) => match number(r) {
                Some(v) => Ret::Value(v),
                None => return self.err(format!("unreadable result '{r}'")),
            },
            None => return self.err(format!("a call without its result: {}", clip(text))),
        };
        if !KEPT.contains(&name) {
            return Ok(());
        }
        if let (true, Ret::Value(child)) = (CREATE.contains(&name), ret) {
            if let Ok(child) = u32::try_from(child) {
                self.children.insert(child);
                if !self.known.contains(&child) {
                    self.live.insert(child);
                }
            }
        }
        let args = split_args(&text[open + 1..close]);
        self.entries.push(Entry { line: self.line, pid, what: What::Call(Call { name: name.to_string(), args, ret }) });
        Ok(())
    }

    fn finish(mut self) -> Result<Vec<Entry>, Error> {
        if let Some(pid) = self.known.iter().find(|p| !self.ended.contains(p)) {
            let who = if *pid == 0 { "the first process".to_string() } else { format!("process {pid}") };
            return self.err(format!("the log ends before {who} ended (the run or the file was cut)"));
        }
        if self.entries.is_empty() {
            return self.err("no system calls");
        }
        self.entries.sort_by_key(|e| e.line);
        Ok(self.entries)
    }
}

/// Skips a `-t`, `-tt` or `-ttt` timestamp.
fn strip_time(s: &str) -> &str {
    match s.split_once(' ') {
        Some((t, rest))
            if t.starts_with(|c: char| c.is_ascii_digit())
                && t.bytes().all(|b| b.is_ascii_digit() || b == b':' || b == b'.') =>
        {
            rest.trim_start()
        }
        _ => s,
    }
}

/// Returns the index of the parenthesis that closes the one at `open`, skipping
/// quoted strings and nested brackets.
fn closing(text: &str, open: usize) -> Option<usize> {
    let b = text.as_bytes();
    let (mut depth, mut i, mut quoted) = (0i32, open, false);
    while i < b.len() {
        match b[i] {
            b'\\' if quoted => i += 1,
            b'"' => quoted = !quoted,
            b'(' | b'[' | b'{' if !quoted => depth += 1,
            b')' | b']' | b'}' if !quoted => {
                depth -= 1;
                if depth == 0 {
                    return (b[i] == b')').then_some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Splits arguments at top-level commas.
fn split_args(s: &str) -> Vec<String> {
    let (mut out, mut cur, mut depth, mut quoted, mut escaped) = (Vec::new(), String::new(), 0, false, false);
    for c in s.chars() {
        if escaped {
            escaped = false;
        } else if quoted {
            escaped = c == '\\';
            quoted = c != '"';
        } else {
            match c {
                '"' => quoted = true,
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' => depth -= 1,
                ',' if depth == 0 => {
                    out.push(cur.trim().to_string());
                    cur.clear();
                    continue;
                }
                _ => {}
            }
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// Parses a number as strace prints it: `0x` hexadecimal, decimal, `NULL` as 0,
/// with any decoration after the digits (`3</dev/null>`).
pub fn number(s: &str) -> Option<u64> {
    if s == "NULL" {
        return Some(0);
    }
    if let Some(h) = s.strip_prefix("0x") {
        let digits: String = h.chars().take_while(|c| c.is_ascii_hexdigit()).collect();
        return u64::from_str_radix(&digits, 16).ok();
    }
    let digits: String = s.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(log: &str) -> Result<Vec<Entry>, Error> {
        parse(log.as_bytes(), "t.strace")
    }

    /// Reads `log`, which fails; returns the message, checking that the error
    /// is about a line of the log.
    fn err(log: &str) -> String {
        let e = read(log).unwrap_err();
        assert!(matches!(&e, Error::Log { name, line: Some(_), .. } if name == "t.strace"), "{e:?}");
        e.to_string()
    }

    fn call(name: &str, args: &[&str], ret: Ret) -> What {
        What::Call(Call { name: name.into(), args: args.iter().map(|s| s.to_string()).collect(), ret })
    }

    /// `strace -f -tt -o FILE` output of a process that starts a thread.
    const FILE: &str = "\
25563 16:46:57.141947 mprotect(0x4a2b000, 8388608, PROT_READ|PROT_WRITE) = 0
25563 16:46:57.208230 openat(AT_FDCWD, \"/etc/a, b (c)\", O_RDONLY) = 3
25563 16:46:57.245534 clone(child_stack=0x1003b1ffd0, flags=CLONE_VM|CLONE_THREAD, parent_tid=[25858]) = 25858
25858 16:46:57.253440 mmap(NULL, 8192, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0 <unfinished ...>
25563 16:46:57.294478 mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = -1 ENOMEM (Cannot allocate memory)
25858 16:46:57.294500 <... mmap resumed>) = 0x4840000
25858 16:46:57.320021 exit(0)           = ?
25858 16:46:57.320086 +++ exited with 0 +++
25563 16:46:57.327805 --- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED} ---
25563 16:46:57.574620 exit_group(0)     = ?
25563 16:46:57.579432 +++ exited with 0 +++
";

    #[test]
    fn reads_pid_tagged_calls_and_joins_unfinished_with_resumed() {
        let e = read(FILE).unwrap();
        let got: Vec<(usize, u32, What)> = e.into_iter().map(|e| (e.line, e.pid, e.what)).collect();
        assert_eq!(
            got,
            vec![
                (1, 25563, call("mprotect", &["0x4a2b000", "8388608", "PROT_READ|PROT_WRITE"], Ret::Value(0))),
                (
                    3,
                    25563,
                    call(
                        "clone",
                        &["child_stack=0x1003b1ffd0", "flags=CLONE_VM|CLONE_THREAD", "parent_tid=[25858]"],
                        Ret::Value(25858)
                    )
                ),
                // Joined, and dated at the line it began on.
                (
                    4,
                    25858,
                    call(
                        "mmap",
                        &["NULL", "8192", "PROT_READ|PROT_WRITE", "MAP_PRIVATE|MAP_ANONYMOUS", "-1", "0"],
                        Ret::Value(0x4840000)
                    )
                ),
                (
                    5,
                    25563,
                    call("mmap", &["NULL", "4096", "PROT_NONE", "MAP_PRIVATE|MAP_ANONYMOUS", "-1", "0"], Ret::Error)
                ),
                (7, 25858, call("exit", &["0"], Ret::Unknown)),
                (8, 25858, What::Exit),
                (10, 25563, call("exit_group", &["0"], Ret::Unknown)),
                (11, 25563, What::Exit),
            ]
        );
    }

    #[test]
    fn stderr_output_gives_unprefixed_lines_to_the_one_process_traced() {
        // strace -f -tt to stderr: the first process is unprefixed until a second
        // runs; strace cuts a line with its "attached" message.
        let log = "\
16:47:09.117205 mprotect(0x7fea7bdab000, 4096, PROT_READ) = 0
16:47:09.126715 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|SIGCHLDstrace: Process 26590 attached
, child_tidptr=0x7fea7bbc1a10) = 26590
[pid 26586] 16:47:09.126988 wait4(26590,  <unfinished ...>
[pid 26590] 16:47:09.127071 munmap(0x7fea7bdad000, 8192) = 0
[pid 26590] 16:47:09.127071 exit_group(0) = ?
[pid 26590] 16:47:09.127198 +++ exited with 0 +++
16:47:09.127203 <... wait4 resumed>NULL, 0, NULL) = 26590
16:47:09.127251 exit_group(0)           = ?
16:47:09.127364 +++ exited with 0 +++
";
        let e = read(log).unwrap();
        let pids: Vec<(usize, u32)> = e.iter().map(|e| (e.line, e.pid)).collect();
        assert_eq!(pids, vec![(1, 26586), (2, 26586), (5, 26590), (6, 26590), (7, 26590), (9, 26586), (10, 26586)]);
        assert_eq!(
            e[1].what,
            call(
                "clone",
                &["child_stack=NULL", "flags=CLONE_CHILD_CLEARTID|SIGCHLD", "child_tidptr=0x7fea7bbc1a10"],
                Ret::Value(26590)
            )
        );
    }

    #[test]
    fn malformed_lines_are_reported_with_their_numbers() {
        let bad = FILE.replace("25563 16:46:57.294478 mmap(NULL, 4096", "25563 16:46:57.294478 mmap NULL, 4096");
        assert!(err(&bad).starts_with("t.strace:5: not a strace line"), "{:?}", err(&bad));
        let bad = FILE.replace(") = 0x4840000", ")");
        assert!(err(&bad).starts_with("t.strace:4: a call without its result"), "{:?}", err(&bad));
        let bad =
            FILE.replace("25858 16:46:57.294500 <... mmap resumed>", "25858 16:46:57.294500 <... munmap resumed>");
        assert!(err(&bad).starts_with("t.strace:6: 'munmap' resumed, but process 25858 began 'mmap'"));
        let bad = FILE.replace("25563 16:46:57.294478 mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = -1 ENOMEM (Cannot allocate memory)", "25563 16:46:57.294478 <... mmap resumed>) = 0");
        assert!(err(&bad).starts_with("t.strace:5: 'mmap' resumed, but process 25563 began no call"));
    }

    #[test]
    fn a_truncated_log_is_an_error() {
        let at = FILE.find("25858 16:46:57.320021").unwrap();
        let e = err(&FILE[..at]);
        assert!(e.contains("ends before process 25563 ended"), "{e}");
        let e = err(&FILE[..FILE.len() - 5]);
        assert!(e.starts_with("t.strace:11: the file ends in the middle of a line"), "{e}");
        // A call still unfinished when the log stops.
        let at = FILE.find("25563 16:46:57.294478").unwrap();
        let e = err(&FILE[..at]);
        assert!(e.contains("ends before process 25563 ended"), "{e}");
    }
}
