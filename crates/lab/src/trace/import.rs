//! Import: a lackey log and, optionally, a strace log of the same run, merged
//! into a [`Trace`] (what is kept and how, in [the module documentation](super)).

use super::format::{Event, Process, Record, Thread, Trace, PAGE_END};
use super::lackey::{Item, Lackey, Marker};
use super::strace::{self, Call, Entry, Ret, What, CREATE};
use crate::Error;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::io::BufRead;
use std::path::Path;
use tlbkit_sim::program::{Region, DATA_PAGES, DATA_VA, STACK_PAGES, STACK_VA, TEXT_PAGES, TEXT_VA};

mod counted;
mod view;

/// How to import.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Keep instruction fetches as code-page records (the replay touches the
    /// code page whenever it changes); without them only their count is kept.
    pub ifetch: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { ifetch: true }
    }
}

/// The kinds of system call a trace keeps, in the order the summary lists them.
const KINDS: [&str; 7] = ["mmap", "munmap", "mprotect", "madvise", "mremap", "fork", "clone"];

/// What an import read, kept and dropped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Lines of the lackey log.
    pub lackey_lines: usize,
    /// Instruction fetches (`I` lines).
    pub instructions: u64,
    /// Data references (`L`, `S`, `M` lines).
    pub data_refs: u64,
    /// Lines of the strace log (0 without one).
    pub strace_lines: usize,
    /// Processes in the trace.
    pub processes: usize,
    /// Threads in the trace.
    pub threads: usize,
    /// `Data` records (runs of references to one page).
    pub data_runs: u64,
    /// `Code` records (changes of code page).
    pub code_changes: u64,
    /// Regions and pages of the first process's image.
    pub image: (usize, u64),
    /// System calls kept, by kind (`execve` included).
    pub kept: BTreeMap<&'static str, u64>,
    /// Points where a process's threads wait for each other around a call.
    pub barriers: u64,
    /// Calls of the traced process that strace shows and valgrind's log does
    /// not: valgrind's own, when strace ran around valgrind.
    pub dropped_valgrind: u64,
    /// Calls that failed.
    pub dropped_failed: u64,
    /// `madvise` calls with advice other than `MADV_DONTNEED`.
    pub dropped_advice: u64,
    /// References and calls to addresses outside user memory.
    pub dropped_outside: u64,
    /// Processes in the strace log outside the traced one and its descendants.
    pub dropped_processes: u64,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "read:    {} lackey lines ({} instructions, {} data references), {} strace lines",
            self.lackey_lines, self.instructions, self.data_refs, self.strace_lines
        )?;
        writeln!(
            f,
            "trace:   {} process(es), {} thread(s); {} data runs, {} code-page changes; image {} region(s), {} pages",
            self.processes, self.threads, self.data_runs, self.code_changes, self.image.0, self.image.1
        )?;
        let mut kinds: Vec<&str> = KINDS.to_vec();
        kinds.push("execve");
        let kept: Vec<String> = kinds.iter().map(|k| format!("{k} {}", self.kept.get(k).unwrap_or(&0))).collect();
        writeln!(f, "calls:   {}; {} barrier(s) between threads", kept.join(", "), self.barriers)?;
        write!(
            f,
            "dropped: {} call(s) valgrind made for itself, {} failed call(s), {} madvise(s) other than \
             MADV_DONTNEED, {} reference(s) or call(s) outside user memory, {} process(es) outside the traced one",
            self.dropped_valgrind,
            self.dropped_failed,
            self.dropped_advice,
            self.dropped_outside,
            self.dropped_processes
        )
    }
}

/// Imports the lackey log at `lackey` and the strace log at `strace`.
/// `progress` is handed the bytes of the lackey log read so far and its size,
/// about once a mebibyte (the lackey log is nearly all of the work).
pub fn import(
    lackey: &Path,
    strace: Option<&Path>,
    opts: Options,
    progress: impl FnMut(u64, u64),
) -> Result<(Trace, Summary), Error> {
    let open = |p: &Path| {
        std::fs::File::open(p)
            .map(std::io::BufReader::new)
            .map_err(|source| Error::LogIo { name: p.display().to_string(), source })
    };
    let file = open(lackey)?;
    let size = file.get_ref().metadata().map_or(0, |m| m.len());
    let (l, lname) = (Counted { input: file, read: 0, size, progress }, lackey.display().to_string());
    match strace {
        Some(p) => import_from(l, &lname, Some((&mut open(p)?, &p.display().to_string())), opts),
        None => import_from(l, &lname, None, opts),
    }
}

/// A reader that hands the bytes consumed so far, and the input's size, to
/// `progress` each time that count passes a mebibyte boundary.
struct Counted<R, F> {
    input: R,
    read: u64,
    size: u64,
    progress: F,
}

/// Imports the lackey log at `lackey` and the strace log at `strace` into the
/// trace file `out` (`tlbkit trace import`); returns the report to print.
/// `progress` is as [`import`]'s.
pub fn import_file(
    lackey: &Path,
    strace: Option<&Path>,
    out: &Path,
    opts: Options,
    progress: impl FnMut(u64, u64),
) -> Result<String, Error> {
    let (trace, sum) = import(lackey, strace, opts, progress)?;
    let bytes = trace.encode();
    super::format::write_atomically(out, &bytes)?;
    Ok(format!("{sum}\nwrote:   {} ({} bytes)", out.display(), bytes.len()))
}

/// Imports a lackey log (`lname` names it in messages) and, optionally, a
/// strace log with its name.
pub fn import_from(
    lackey: impl BufRead,
    lname: &str,
    strace: Option<(&mut dyn BufRead, &str)>,
    opts: Options,
) -> Result<(Trace, Summary), Error> {
    let mut lk = Lackey::new(lackey, lname);
    let mut im = Importer { opts, ..Importer::default() };
    let entries = match strace {
        Some((r, name)) => {
            let e = strace::parse(r, name)?;
            im.sum.strace_lines = e.iter().map(|e| e.line).max().unwrap_or(0);
            Some((e, name.to_string()))
        }
        None => None,
    };
    // The banner names the process before any trace line.
    let first = lk.next_item()?;
    let pid = lk.pid().unwrap_or(0);
    im.procs.push(Proc { pid, threads: vec![0], ..Proc::default() });
    im.builders.push(Builder { tid: pid, ..Builder::default() });
    if let Some((entries, sname)) = entries {
        im.tree(entries, &sname, pid, lname)?;
    }
    let mut item = first;
    while let Some((line, it)) = item {
        im.item(line as u64, it, lname)?;
        item = lk.next_item()?;
    }
    im.sum.lackey_lines = lk.line();
    if im.strace.is_some() && !im.markers {
        return Err(no_markers(lname));
    }
    im.close_traced(lk.line() as u64 + 1);
    im.descendants();
    im.finish()
}

/// A process's address space as the replay will see it, page by page.
#[derive(Clone, Default)]
struct View {
    /// Mapped ranges: first page to (end page, protection).
    map: BTreeMap<u64, (u64, Prot)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Prot {
    write: bool,
    /// Part of the process's image (mapped before any traced call, not since
    /// changed by one).
    image: bool,
}

/// One process of the trace being built.
#[derive(Default)]
struct Proc {
    pid: u32,
    view: View,
    /// Pages some kept call mapped at some point (a reference outside the view
    /// to such a page is an inconsistency, not an image page).
    ever: View,
    /// Image pages (first process only), with whether the program wrote them.
    image: BTreeMap<u64, bool>,
    /// Its threads (builder indices), the first one first.
    threads: Vec<usize>,
}

/// One thread's stream being built. Each record carries its position in its
/// process's order of events (a lackey line, or a strace line for a process
/// lackey did not trace).
#[derive(Default)]
struct Builder {
    tid: u32,
    process: usize,
    recs: Vec<(u64, Record)>,
    /// Instructions since the last record.
    instrs: u64,
    run: Option<Run>,
    code: Option<u64>,
    /// Where its creator created it (0 for a process's first thread).
    created: u64,
    /// Where it exited.
    exited: Option<u64>,
    /// Whether it synchronises with its process's other threads.
    synced: bool,
}

/// A run of data references to one page, still open.
struct Run {
    at: u64,
    instrs: u64,
    page: u64,
    refs: u64,
    write: bool,
}

/// Where a strace process or thread came from.
#[derive(Clone, Copy)]
struct Born {
    /// The id of the thread that created it.
    parent: u32,
    /// A thread of its creator's process (else a new process).
    thread: bool,
}

/// The key a kept call is matched by between strace and valgrind's log:
/// thread id, kind, and two numbers (pages, or a child's id).
type Key = (u32, u8, u64, u64);

#[derive(Default)]
struct Importer {
    opts: Options,
    sum: Summary,
    procs: Vec<Proc>,
    builders: Vec<Builder>,
    /// The strace log: its entries, name, and who created whom.
    entries: Vec<Entry>,
    strace: Option<String>,
    born: BTreeMap<u32, Born>,
    /// The traced process's kept calls by key: their entries, oldest first.
    index: BTreeMap<Key, VecDeque<usize>>,
    /// Entries already placed.
    used: BTreeSet<usize>,
    /// Valgrind thread numbers of the traced process bound to builders.
    vt: BTreeMap<u32, usize>,
    /// Threads the traced process created that no valgrind thread number names yet.
    unbound: VecDeque<usize>,
    /// The valgrind thread running client code (`--trace-sched=yes`), if known.
    running: Option<u32>,
    /// strace ids registered as threads of the trace: their builders.
    by_tid: BTreeMap<u32, usize>,
    /// Whether the lackey log has valgrind's system-call lines.
    markers: bool,
}

impl Importer {
    /// Learns the process tree from the strace log and indexes the traced
    /// process's calls.
    fn tree(&mut self, entries: Vec<Entry>, sname: &str, pid: u32, lname: &str) -> Result<(), Error> {
        self.strace = Some(sname.to_string());
        let mut entries = entries;
        // One process written to stderr: strace never printed its pid.
        if entries.iter().all(|e| e.pid == 0) {
            entries.iter_mut().for_each(|e| e.pid = pid);
        }
        // A thread id names one thread at a time: a creation that returns an id
        // still running (the caller's own, or one created earlier that has not
        // exited since) is a log no kernel writes, and the import would give two
        // threads one stream.
        // And an id that has exited does nothing more until a creation returns
        // it again: a call or a second exit after its exit is refused too.
        // An id that acts before the creation that returns it is refused as
        // well: with -f, every process but the first is created in the log before
        // it runs (an id the log never creates is a process outside the run).
        let mut live: BTreeMap<u32, usize> = BTreeMap::from([(pid, 0)]);
        let mut gone: BTreeMap<u32, usize> = BTreeMap::new();
        let mut unborn: BTreeMap<u32, usize> = BTreeMap::new();
        for e in &entries {
            if !live.contains_key(&e.pid) && !gone.contains_key(&e.pid) {
                unborn.entry(e.pid).or_insert(e.line);
            }
            if let Some(at) = gone.get(&e.pid) {
                let what = if matches!(e.what, What::Exit) { "exits again" } else { "makes a call" };
                return Err(log_err(
                    sname,
                    e.line,
                    format!(
                        "thread {} {what} after its exit at line {at}: give the log of one run as strace -f wrote it",
                        e.pid
                    ),
                ));
            }
            match &e.what {
                What::Call(c) => {
                    if let (true, Ret::Value(child)) = (CREATE.contains(&c.name.as_str()), c.ret) {
                        let child = u32::try_from(child).unwrap_or(0);
                        // 0 is the child's side of the call, as some logs show it.
                        if child == 0 {
                            continue;
                        }
                        if child == e.pid {
                            return Err(log_err(
                                sname,
                                e.line,
                                format!("{} returns {child}, the caller's own id", c.name),
                            ));
                        }
                        if let Some(at) = live.insert(child, e.line) {
                            let since = if at == 0 { "the traced process".to_string() } else { format!("line {at}") };
                            return Err(log_err(
                                sname,
                                e.line,
                                format!(
                                    "{} returns {child}, an id still running (since {since}): give the log of one \
                                     run as strace -f wrote it",
                                    c.name
                                ),
                            ));
                        }
                        if let Some(at) = unborn.remove(&child) {
                            return Err(log_err(
                                sname,
                                e.line,
                                format!(
                                    "{} returns {child}, an id that acted before, at line {at}: give the log of one \
                                     run as strace -f wrote it",
                                    c.name
                                ),
                            ));
                        }
                        gone.remove(&child);
                        self.born.insert(child, Born { parent: e.pid, thread: is_thread(c) });
                    }
                }
                What::Exit => {
                    live.remove(&e.pid);
                    gone.insert(e.pid, e.line);
                }
            }
        }
        if !entries.iter().any(|e| e.pid == pid) {
            return Err(Error::Log {
                name: sname.to_string(),
                line: None,
                what: format!(
                    "process {pid}, which {lname} traced, is not in this strace log: give logs of one run (strace -f \
                     -o FILE valgrind --tool=lackey ...)"
                ),
            });
        }
        let mut dropped = BTreeSet::new();
        for (i, e) in entries.iter().enumerate() {
            if self.tgid(e.pid) != pid {
                if !self.descends(self.tgid(e.pid), pid) {
                    dropped.insert(self.tgid(e.pid));
                }
                continue;
            }
            if let What::Call(c) = &e.what {
                match key_of_call(e.pid, c) {
                    Some(k) => self.index.entry(k).or_default().push_back(i),
                    None if c.ret == Ret::Error => self.sum.dropped_failed += 1,
                    None => {}
                }
            }
        }
        self.sum.dropped_processes = dropped.len() as u64;
        self.by_tid.insert(pid, 0);
        self.vt.insert(1, 0);
        self.entries = entries;
        Ok(())
    }

    /// Returns the process (its first thread's id) thread `p` belongs to. A
    /// reused id can make the links loop; the walk stops after every link.
    fn tgid(&self, mut p: u32) -> u32 {
        for _ in 0..=self.born.len() {
            match self.born.get(&p).filter(|b| b.thread) {
                Some(b) => p = b.parent,
                None => break,
            }
        }
        p
    }

    /// Returns whether process `p` descends from process `root`.
    fn descends(&self, mut p: u32, root: u32) -> bool {
        for _ in 0..=self.born.len() {
            let Some(b) = self.born.get(&p) else { return false };
            p = self.tgid(b.parent);
            if p == root {
                return true;
            }
        }
        false
    }

    fn lackey_err<T>(&self, lname: &str, line: u64, what: impl fmt::Display) -> Result<T, Error> {
        Err(Error::Log { name: lname.to_string(), line: Some(line), what: what.to_string() })
    }

    /// Returns the builder of valgrind thread `vtid`, binding it to the oldest
    /// thread created and not yet named.
    fn bind(&mut self, vtid: u32, lname: &str, line: u64) -> Result<usize, Error> {
        if let Some(&b) = self.vt.get(&vtid) {
            return Ok(b);
        }
        let Some(b) = self.unbound.pop_front() else {
            if !self.markers {
                return Err(no_markers(lname));
            }
            return self.lackey_err(
                lname,
                line,
                format!("valgrind thread {vtid} runs, but the strace log shows no thread created for it"),
            );
        };
        self.vt.insert(vtid, b);
        Ok(b)
    }

    /// Reads one lackey item of the traced process.
    fn item(&mut self, line: u64, it: Item, lname: &str) -> Result<(), Error> {
        let strace = self.strace.is_some();
        match it {
            Item::Instr { addr, .. } => {
                self.sum.instructions += 1;
                let b = self.current(lname, line)?;
                // The replay touches an instruction's first page, when it changes.
                if self.opts.ifetch && self.builders[b].code != Some(addr >> 12) {
                    if let Some(&p) = self.pages(addr, 1, false, lname, line)?.first() {
                        self.builders[b].code = Some(p);
                        self.builders[b].push(line, Event::Code { page: p });
                    }
                }
                self.builders[b].instrs += 1;
            }
            Item::Data { addr, size, write } => {
                self.sum.data_refs += 1;
                let b = self.current(lname, line)?;
                for p in self.pages(addr, size, write, lname, line)? {
                    self.builders[b].data(line, p, write);
                }
            }
            Item::Running { vtid } if strace => {
                self.bind(vtid, lname, line)?;
                self.running = Some(vtid);
            }
            Item::Syscall(m) if strace => self.marker(line, m, lname)?,
            Item::Running { .. } | Item::Syscall(_) => {}
        }
        Ok(())
    }

    /// Returns the builder the current reference belongs to.
    fn current(&mut self, lname: &str, line: u64) -> Result<usize, Error> {
        match self.running {
            Some(v) => self.bind(v, lname, line),
            None => Ok(0),
        }
    }

    /// Returns the pages a reference of the traced process touches, after
    /// checking them against its address space (module documentation).
    fn pages(&mut self, addr: u64, size: u64, write: bool, lname: &str, line: u64) -> Result<Vec<u64>, Error> {
        let first = addr >> 12;
        let last = (addr.saturating_add(size - 1) >> 12).min(first + 1);
        let mut out = Vec::with_capacity(2);
        for p in first..=last {
            if p >= PAGE_END {
                self.sum.dropped_outside += 1;
                continue;
            }
            let proc = &mut self.procs[0];
            match proc.view.get(p) {
                Some(prot) if write && !prot.write => {
                    if !prot.image {
                        return self.lackey_err(
                            lname,
                            line,
                            format!("writes {addr:#x}, mapped read-only at this point"),
                        );
                    }
                    proc.image.insert(p, true);
                    proc.view.set(p, p + 1, Some(Prot { write: true, image: true }));
                }
                Some(_) => {}
                None if proc.ever.get(p).is_some() || proc.image.contains_key(&p) => {
                    return self.lackey_err(
                        lname,
                        line,
                        format!("references {addr:#x}, which the strace log has unmapped at this point"),
                    );
                }
                None => {
                    proc.image.insert(p, write);
                    proc.view.set(p, p + 1, Some(Prot { write, image: true }));
                }
            }
            out.push(p);
        }
        Ok(out)
    }

    /// Places the strace call a valgrind system-call line stands for.
    fn marker(&mut self, line: u64, m: Marker, lname: &str) -> Result<(), Error> {
        self.markers = true;
        let b = self.bind(m.vtid, lname, line)?;
        if m.name == "exit" {
            self.builders[b].exited = Some(line);
            self.vt.remove(&m.vtid);
            if self.running == Some(m.vtid) {
                self.running = None;
            }
            return Ok(());
        }
        let tid = self.builders[b].tid;
        let Some(k) = key_of_marker(tid, &m) else { return Ok(()) };
        let Some(i) = self.index.get_mut(&k).and_then(|q| q.pop_front()) else { return Ok(()) };
        self.used.insert(i);
        let What::Call(c) = self.entries[i].what.clone() else { unreachable!("only calls are indexed") };
        if let Some(t) = self.apply(b, line, &c).filter(|&t| self.builders[t].process == self.builders[b].process) {
            self.unbound.push_back(t);
        }
        Ok(())
    }

    /// Applies a kept call of builder `b`'s thread at position `at`; returns the
    /// builder of a thread or process it created.
    fn apply(&mut self, b: usize, at: u64, c: &Call) -> Option<usize> {
        let name = c.name.as_str();
        if !["mmap", "munmap", "mprotect", "madvise", "mremap", "execve"].contains(&name) && !CREATE.contains(&name) {
            return None;
        }
        let Ret::Value(ret) = c.ret else {
            self.sum.dropped_failed += 1;
            return None;
        };
        let arg = |i: usize| c.args.get(i).and_then(|a| strace::number(a)).unwrap_or(0);
        let p = self.builders[b].process;
        let write = |i: usize| c.args.get(i).is_some_and(|a| a.contains("PROT_WRITE"));
        let mut events = Vec::new();
        let mut created = None;
        match c.name.as_str() {
            "mmap" => events.push(Event::Mmap { page: ret >> 12, pages: pages(arg(1)), write: write(2) }),
            "munmap" => events.push(Event::Munmap { page: arg(0) >> 12, pages: pages(arg(1)) }),
            "mprotect" => events.push(Event::Mprotect { page: arg(0) >> 12, pages: pages(arg(1)), write: write(2) }),
            "madvise" => {
                if c.args.get(2).map(String::as_str) != Some("MADV_DONTNEED") {
                    self.sum.dropped_advice += 1;
                    return None;
                }
                let (start, n) = (arg(0) >> 12, pages(arg(1)));
                for (s, e) in self.procs[p].view.runs(start, start + n) {
                    events.push(Event::Madvise { page: s, pages: e - s });
                }
            }
            "mremap" => {
                let (old, oldn, newn, new) = (arg(0) >> 12, pages(arg(1)), pages(arg(2)), ret >> 12);
                let w = self.procs[p].view.get(old).is_none_or(|x| x.write);
                if new == old && newn > oldn {
                    events.push(Event::Mmap { page: old + oldn, pages: newn - oldn, write: w });
                } else if new == old && newn < oldn {
                    events.push(Event::Munmap { page: old + newn, pages: oldn - newn });
                } else if new != old {
                    events.push(Event::Munmap { page: old, pages: oldn });
                    events.push(Event::Mmap { page: new, pages: newn, write: w });
                }
            }
            "execve" => events.push(Event::Execve),
            name if CREATE.contains(&name) => {
                let child = u32::try_from(ret).ok()?;
                let thread = is_thread(c);
                let process = if thread {
                    p
                } else {
                    self.procs.push(Proc { pid: child, view: self.procs[p].view.clone(), ..Proc::default() });
                    self.procs.len() - 1
                };
                let nb = self.builders.len();
                self.builders.push(Builder { tid: child, process, created: at, ..Builder::default() });
                self.procs[process].threads.push(nb);
                self.by_tid.insert(child, nb);
                if thread {
                    events.push(Event::Clone { thread: nb as u32 });
                } else {
                    events.push(Event::Fork { thread: nb as u32 });
                }
                created = Some(nb);
            }
            _ => return None,
        }
        for ev in events {
            // A call on no page does nothing (mprotect of length 0 succeeds);
            // one beyond user memory cannot be replayed.
            if let Event::Mmap { page, pages, .. }
            | Event::Munmap { page, pages }
            | Event::Mprotect { page, pages, .. }
            | Event::Madvise { page, pages } = ev
            {
                if pages == 0 {
                    continue;
                }
                if page.saturating_add(pages) > PAGE_END {
                    self.sum.dropped_outside += 1;
                    continue;
                }
            }
            self.count(&ev);
            self.view_change(p, &ev);
            self.builders[b].push(at, ev);
        }
        created
    }

    fn count(&mut self, ev: &Event) {
        let kind = match ev {
            Event::Mmap { .. } => "mmap",
            Event::Munmap { .. } => "munmap",
            Event::Mprotect { .. } => "mprotect",
            Event::Madvise { .. } => "madvise",
            Event::Fork { .. } => "fork",
            Event::Clone { .. } => "clone",
            Event::Execve => "execve",
            _ => return,
        };
        *self.sum.kept.entry(kind).or_default() += 1;
    }

    /// Follows a kept call's effect on process `p`'s address space.
    fn view_change(&mut self, p: usize, ev: &Event) {
        let proc = &mut self.procs[p];
        match *ev {
            Event::Mmap { page, pages, write } => {
                proc.view.set(page, page + pages, Some(Prot { write, image: false }));
                proc.ever.set(page, page + pages, Some(Prot { write, image: false }));
            }
            Event::Munmap { page, pages } => proc.view.set(page, page + pages, None),
            Event::Mprotect { page, pages, write } => proc.view.protect(page, page + pages, write),
            Event::Execve => {
                proc.view = View::exec_image();
                proc.ever = View::default();
            }
            _ => {}
        }
    }

    /// Ends the traced process's threads at the end of the lackey log and
    /// counts the calls valgrind's log did not show.
    fn close_traced(&mut self, end: u64) {
        for b in self.builders.iter_mut().filter(|b| b.process == 0) {
            let at = b.exited.unwrap_or(end);
            b.exited = Some(at);
            b.push(at, Event::Exit);
        }
        self.sum.dropped_valgrind = self.index.values().map(|q| q.len() as u64).sum();
    }

    /// Builds the processes created by kept forks from their strace entries.
    fn descendants(&mut self) {
        let entries = std::mem::take(&mut self.entries);
        for (i, e) in entries.iter().enumerate() {
            let Some(&b) = self.by_tid.get(&e.pid) else { continue };
            if self.builders[b].process == 0 || self.used.contains(&i) {
                continue;
            }
            let at = e.line as u64;
            match &e.what {
                What::Exit => {
                    let bl = &mut self.builders[b];
                    if bl.exited.is_none() {
                        bl.exited = Some(at);
                        bl.push(at, Event::Exit);
                    }
                }
                What::Call(c) => {
                    if self.builders[b].exited.is_none() {
                        self.apply(b, at, c);
                    }
                }
            }
        }
        // A thread whose end the log does not show ends with its process's last event.
        for b in 0..self.builders.len() {
            if self.builders[b].exited.is_none() {
                let at = self.builders[b].recs.last().map_or(0, |r| r.0) + 1;
                self.builders[b].exited = Some(at);
                self.builders[b].push(at, Event::Exit);
            }
        }
        self.entries = entries;
    }

    /// Adds the synchronisation that keeps each multi-threaded process's
    /// address-space changes in their traced order (module documentation).
    fn barriers(&mut self) {
        // Ordering keys: a record at position `at` sorts at 4 * at + 1; what a
        // barrier adds sorts around it.
        let mut adds: Vec<Vec<(u64, Record)>> = (0..self.builders.len()).map(|_| Vec::new()).collect();
        for p in 0..self.procs.len() {
            let threads = self.procs[p].threads.clone();
            if threads.len() < 2 {
                continue;
            }
            for &t in &threads {
                self.builders[t].synced = true;
            }
            let mut points: Vec<(u64, usize, bool)> = Vec::new();
            for &t in &threads {
                let mut last = None;
                for (at, r) in &self.builders[t].recs {
                    // Calls that change the address space, and fork, which copies it.
                    let changes = matches!(
                        r.event,
                        Event::Mmap { .. }
                            | Event::Munmap { .. }
                            | Event::Mprotect { .. }
                            | Event::Madvise { .. }
                            | Event::Fork { .. }
                    );
                    let exec = r.event == Event::Execve;
                    if (changes || exec) && last != Some(*at) {
                        points.push((*at, t, exec));
                        last = Some(*at);
                    }
                }
            }
            points.sort();
            let mut retired: BTreeSet<usize> = BTreeSet::new();
            for (g, leader, exec) in points {
                let mut waiting = Vec::new();
                let mut arrivals = 0;
                for &t in &threads {
                    let bl = &self.builders[t];
                    if t == leader || retired.contains(&t) || bl.created >= g {
                        continue;
                    }
                    let exited = bl.exited.expect("every thread has ended");
                    arrivals += 1;
                    // A thread that exits where the point is has ended by then
                    // (its exit sorts after anything it arrives at there).
                    if exited <= g || exec {
                        // It has ended (or an execve ends it): it arrives as it exits.
                        retired.insert(t);
                        let at = if exec { g.min(exited) } else { exited };
                        adds[t].push((
                            4 * at,
                            Record { instrs: 0, event: Event::Arrive { leader: leader as u32, wait: false } },
                        ));
                        if exec && exited > g {
                            self.builders[t].recs.retain(|(a, r)| *a <= g || r.event == Event::Exit);
                            self.builders[t].exited = Some(g);
                        }
                    } else {
                        waiting.push(t as u32);
                        adds[t].push((
                            4 * g + 3,
                            Record { instrs: 0, event: Event::Arrive { leader: leader as u32, wait: true } },
                        ));
                    }
                }
                if arrivals == 0 {
                    continue;
                }
                self.sum.barriers += 1;
                adds[leader].push((4 * g, Record { instrs: 0, event: Event::Wait { count: arrivals } }));
                if !waiting.is_empty() {
                    adds[leader].push((4 * g + 2, Record { instrs: 0, event: Event::Wake { threads: waiting } }));
                }
            }
        }
        for (b, add) in adds.into_iter().enumerate() {
            if add.is_empty() {
                continue;
            }
            let bl = &mut self.builders[b];
            let mut all: Vec<(u64, Record)> = bl.recs.drain(..).map(|(at, r)| (4 * at + 1, r)).collect();
            // A thread an execve ended exits where it was cut.
            if let Some(e) = all.iter().position(|(_, r)| r.event == Event::Exit) {
                let exit = all.remove(e).1;
                let at = bl.exited.expect("ended");
                all.push((4 * at + 1, exit));
            }
            all.extend(add);
            all.sort_by_key(|(k, _)| *k);
            bl.recs = all.into_iter().map(|(k, r)| (k / 4, r)).collect();
        }
    }

    fn finish(mut self) -> Result<(Trace, Summary), Error> {
        self.barriers();
        let mut image: Vec<Region> = Vec::new();
        for (&page, &written) in &self.procs[0].image {
            match image.last_mut() {
                Some(r) if (r.va >> 12) + r.pages == page => {
                    r.pages += 1;
                    r.write |= written;
                }
                _ => image.push(Region { va: page << 12, pages: 1, write: written }),
            }
        }
        self.sum.image = (image.len(), image.iter().map(|r| r.pages).sum());
        let processes = self
            .procs
            .iter()
            .enumerate()
            .map(|(i, p)| Process { pid: p.pid, image: if i == 0 { image.clone() } else { Vec::new() } })
            .collect();
        let mut threads = Vec::with_capacity(self.builders.len());
        for b in &self.builders {
            let records: Vec<Record> = b.recs.iter().map(|(_, r)| r.clone()).collect();
            for r in &records {
                match r.event {
                    Event::Data { .. } => self.sum.data_runs += 1,
                    Event::Code { .. } => self.sum.code_changes += 1,
                    _ => {}
                }
            }
            threads.push(Thread { tid: b.tid, process: b.process as u32, synced: b.synced, records });
        }
        self.sum.processes = self.procs.len();
        self.sum.threads = threads.len();
        let trace = Trace { ifetch: self.opts.ifetch, processes, threads };
        trace.validate().map_err(|source| Error::ImportBug { source })?;
        Ok((trace, self.sum))
    }
}

/// The error for a lackey log without valgrind's system-call lines.
fn no_markers(lname: &str) -> Error {
    Error::NoSyscallLines { lackey: lname.to_string() }
}

/// The error `what` at line `line` of the strace log `name`.
fn log_err(name: &str, line: usize, what: impl fmt::Display) -> Error {
    Error::Log { name: name.to_string(), line: Some(line as u64), what: what.to_string() }
}

/// Returns the pages `bytes` bytes span.
fn pages(bytes: u64) -> u64 {
    bytes.div_ceil(4096)
}

/// Returns whether a process-creating call made a thread of the caller's process.
fn is_thread(c: &Call) -> bool {
    let flags: &str = c.args.iter().find_map(|a| a.split("flags=").nth(1)).unwrap_or("");
    let has = |f: &str| flags.split(['|', ',', '}']).any(|x| x.trim() == f);
    has("CLONE_THREAD") || (has("CLONE_VM") && !has("CLONE_VFORK"))
}

/// The call kinds keys distinguish.
const K_MMAP: u8 = 0;
const K_MUNMAP: u8 = 1;
const K_MPROTECT: u8 = 2;
const K_MADVISE: u8 = 3;
const K_MREMAP: u8 = 4;
const K_CREATE: u8 = 5;
const K_EXECVE: u8 = 6;

/// Returns the key of a successful strace call of thread `tid`.
fn key_of_call(tid: u32, c: &Call) -> Option<Key> {
    let Ret::Value(ret) = c.ret else { return None };
    let arg = |i: usize| c.args.get(i).and_then(|a| strace::number(a));
    key(tid, &c.name, arg(0), arg(1), Some(ret), None)
}

/// Returns the key of a valgrind system-call line of thread `tid`.
fn key_of_marker(tid: u32, m: &Marker) -> Option<Key> {
    let arg = |i: usize| m.args.get(i).and_then(|a| strace::number(a));
    key(tid, &m.name, arg(0), arg(1), m.result, m.child)
}

fn key(tid: u32, name: &str, a0: Option<u64>, a1: Option<u64>, ret: Option<u64>, child: Option<u32>) -> Option<Key> {
    Some(match name {
        "mmap" => (tid, K_MMAP, ret? >> 12, pages(a1?)),
        "munmap" => (tid, K_MUNMAP, a0? >> 12, pages(a1?)),
        "mprotect" => (tid, K_MPROTECT, a0? >> 12, pages(a1?)),
        "madvise" => (tid, K_MADVISE, a0? >> 12, pages(a1?)),
        "mremap" => (tid, K_MREMAP, a0? >> 12, ret? >> 12),
        "execve" => (tid, K_EXECVE, 0, 0),
        n if CREATE.contains(&n) => (tid, K_CREATE, child.map(u64::from).or(ret)?, 0),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LACKEY: &str = include_str!("../../tests/data/tiny.lackey");
    const STRACE: &str = include_str!("../../tests/data/tiny.strace");

    fn run(lackey: &str, strace: Option<&str>, opts: Options) -> Result<(Trace, Summary), Error> {
        match strace {
            Some(s) => import_from(lackey.as_bytes(), "t.lackey", Some((&mut s.as_bytes(), "t.strace")), opts),
            None => import_from(lackey.as_bytes(), "t.lackey", None, opts),
        }
    }

    fn tiny() -> (Trace, Summary) {
        run(LACKEY, Some(STRACE), Options::default()).unwrap()
    }

    /// Imports the tiny Lackey trace with `strace`, an input the fuzzer found
    /// (crates/lab/tests/data/fuzz/), as `f.strace`.
    fn import_fuzzed(strace: &[u8]) -> Result<(Trace, Summary), Error> {
        import_from(LACKEY.as_bytes(), "t.lackey", Some((&mut &strace[..], "f.strace")), Options::default())
    }

    /// Returns the message of an import that failed, checking that it failed
    /// on the logs ([`Error::Log`]), not on its own trace (a tlbkit bug).
    fn refused(imported: Result<(Trace, Summary), Error>) -> String {
        let e = imported.unwrap_err();
        assert!(matches!(e, Error::Log { .. }), "{e:?}");
        e.to_string()
    }

    /// The input `fuzz/run.sh strace` found (crates/lab/tests/data/fuzz/): a
    /// mangled log in which a clone returns its caller's own id. The import
    /// gave two threads one stream and failed its own validation ("a tlbkit
    /// bug"); it is now refused as a log no kernel writes, with its line.
    #[test]
    fn a_clone_that_returns_an_id_still_running_is_refused() {
        let e = refused(import_fuzzed(include_bytes!("../../tests/data/fuzz/strace-clone-returns-a-live-id.strace")));
        // The check of a thread acting after its exit (below) now stops it first.
        assert!(e.starts_with("f.strace:5: thread 4243 makes a call after its exit at line 4"), "{e}");
        let pid = STRACE.split_whitespace().next().unwrap();
        let (body, last) = STRACE.trim_end().rsplit_once('\n').unwrap();
        let own = format!("{body}\n{pid} 16:46:52.322750 clone(child_stack=NULL, flags=SIGCHLD) = {pid}\n{last}\n");
        let e = refused(run(LACKEY, Some(&own), Options::default()));
        assert!(e.contains(&format!("clone returns {pid}, the caller's own id")), "{e}");
        // An id created twice without an exit in between, in an otherwise valid log.
        let twice = format!(
            "{body}\n{pid} 16:46:52.322710 clone(child_stack=NULL, flags=SIGCHLD) = 7777\n\
             {pid} 16:46:52.322720 clone(child_stack=NULL, flags=SIGCHLD) = 7777\n{last}\n"
        );
        let e = refused(run(LACKEY, Some(&twice), Options::default()));
        assert!(e.contains("clone returns 7777, an id still running (since line"), "{e}");
        // The same id again after its exit is a new process, as on Linux.
        let reused = format!(
            "{body}\n{pid} 16:46:52.322710 clone(child_stack=NULL, flags=SIGCHLD) = 7777\n\
             7777 16:46:52.322715 +++ exited with 0 +++\n\
             {pid} 16:46:52.322720 clone(child_stack=NULL, flags=SIGCHLD) = 7777\n\
             7777 16:46:52.322725 +++ exited with 0 +++\n{last}\n"
        );
        run(LACKEY, Some(&reused), Options::default()).unwrap();
    }

    /// The second input `fuzz/run.sh strace` found: a thread with calls and
    /// further exits after its `+++ exited` line. The import failed its own
    /// validation on it; it is now refused with the line of the first entry
    /// after the exit.
    #[test]
    fn a_thread_that_acts_after_its_exit_is_refused() {
        let e = refused(import_fuzzed(include_bytes!("../../tests/data/fuzz/strace-calls-after-exit.strace")));
        assert!(e.starts_with("f.strace:6: thread 4243 makes a call after its exit at line 5"), "{e}");
        // A second exit, and a call after the traced process's own exit, in an
        // otherwise valid log.
        let pid = STRACE.split_whitespace().next().unwrap();
        let (body, last) = STRACE.trim_end().rsplit_once('\n').unwrap();
        let twice = format!(
            "{body}\n{pid} 16:46:52.322710 clone(child_stack=NULL, flags=SIGCHLD) = 7777\n\
             7777 16:46:52.322715 +++ exited with 0 +++\n\
             7777 16:46:52.322720 +++ exited with 0 +++\n{last}\n"
        );
        let e = refused(run(LACKEY, Some(&twice), Options::default()));
        assert!(e.contains("thread 7777 exits again after its exit at line"), "{e}");
        let after = format!("{STRACE}{pid} 16:46:52.400000 munmap(0x4837000, 8192) = 0\n");
        let e = refused(run(LACKEY, Some(&after), Options::default()));
        assert!(e.contains(&format!("thread {pid} makes a call after its exit at line")), "{e}");
    }

    /// The third input `fuzz/run.sh strace` found: thread 4244 makes a call
    /// (line 6) before the clone that creates it (line 7). It is refused with
    /// both lines.
    #[test]
    fn a_thread_that_acts_before_its_creation_is_refused() {
        let e = refused(import_fuzzed(include_bytes!("../../tests/data/fuzz/strace-acts-before-its-creation.strace")));
        assert!(e.starts_with("f.strace:7: clone returns 4244, an id that acted before, at line 6"), "{e}");
    }

    /// The same input without that line imports, where it failed the import's
    /// own validation: a thread the log shows no exit for (tid 4243 of the
    /// forked process) ended at the same position as its sibling's next
    /// address-space change, and the barrier there made it arrive after its
    /// exit. A thread that exits where a barrier point is now arrives as it
    /// exits.
    #[test]
    fn a_thread_that_ends_where_a_sibling_changes_the_address_space_arrives_as_it_exits() {
        let (trace, sum) =
            import_fuzzed(include_bytes!("../../tests/data/fuzz/strace-ends-where-a-sibling-calls.strace")).unwrap();
        assert_eq!(sum.barriers, 3);
        let t = trace.threads.iter().position(|t| t.tid == 4243 && t.process == 1).expect("the forked 4243");
        let events: Vec<&Event> = trace.threads[t].records.iter().map(|r| &r.event).collect();
        assert_eq!(events.last(), Some(&&Event::Exit), "{events:?}");
        assert!(
            events.iter().rev().nth(1).is_some_and(|e| matches!(e, Event::Arrive { wait: false, .. })),
            "it arrives as it exits: {events:?}"
        );
    }

    /// Returns the events of thread `t` that are neither references nor synchronisation.
    fn calls(trace: &Trace, t: usize) -> Vec<Event> {
        let refs_or_sync = |e: &Event| {
            matches!(
                e,
                Event::Code { .. }
                    | Event::Data { .. }
                    | Event::Wait { .. }
                    | Event::Wake { .. }
                    | Event::Arrive { .. }
            )
        };
        trace.threads[t].records.iter().map(|r| r.event.clone()).filter(|e| !refs_or_sync(e)).collect()
    }

    fn data_pages(trace: &Trace, t: usize) -> Vec<u64> {
        let pages = trace.threads[t].records.iter().filter_map(|r| match r.event {
            Event::Data { page, .. } => Some(page),
            _ => None,
        });
        pages.collect()
    }

    #[test]
    fn calls_are_placed_where_valgrind_saw_them_and_valgrinds_own_are_dropped() {
        let (t, sum) = tiny();
        assert_eq!(
            calls(&t, 0),
            vec![
                Event::Mmap { page: 0x4835, pages: 4, write: true },
                Event::Mmap { page: 0x4a2a, pages: 2049, write: false },
                Event::Mprotect { page: 0x4a2b, pages: 2048, write: true },
                Event::Clone { thread: 1 },
                Event::Mprotect { page: 0x4835, pages: 1, write: false },
                Event::Madvise { page: 0x4837, pages: 2 },
                Event::Fork { thread: 2 },
                Event::Exit,
            ]
        );
        assert_eq!(
            calls(&t, 1),
            vec![
                Event::Mmap { page: 0x4840, pages: 2, write: true },
                Event::Munmap { page: 0x4840, pages: 2 },
                Event::Madvise { page: 0x4a2a, pages: 2043 },
                Event::Exit,
            ]
        );
        // The mmap follows the references before valgrind's line of it, and
        // precedes those after.
        let r = &t.threads[0].records;
        let at = r.iter().position(|r| matches!(r.event, Event::Mmap { page: 0x4835, .. })).unwrap();
        assert_eq!(r[at - 1].event, Event::Data { page: 0x1ffeffe, refs: 1, write: true });
        assert_eq!(r[at + 1].event, Event::Data { page: 0x4835, refs: 2, write: true });
        // valgrind's own: two execs' worth of mmaps, its stack for the thread,
        // the client's loading; and in the forked child, everything it did.
        assert_eq!(sum.dropped_valgrind, 7);
        assert_eq!(
            calls(&t, 2),
            vec![
                Event::Munmap { page: 0x100371e, pages: 256 },
                Event::Mmap { page: 0x100371e, pages: 16, write: true },
                Event::Exit
            ]
        );
        assert_eq!((t.processes[1].pid, t.threads[2].process), (4244, 1));
        let kept: Vec<(&str, u64)> = sum.kept.iter().map(|(k, v)| (*k, *v)).collect();
        assert_eq!(kept, [("clone", 1), ("fork", 1), ("madvise", 2), ("mmap", 4), ("mprotect", 2), ("munmap", 2)]);
    }

    #[test]
    fn trace_sched_gives_each_thread_its_references_and_without_it_the_first_thread_has_them() {
        let (t, _) = tiny();
        assert_eq!(data_pages(&t, 1), vec![0x522a, 0x4840, 0x4841, 0x4835]);
        let unscheduled: String =
            LACKEY.lines().filter(|l| !l.starts_with("--4242--   SCHED")).map(|l| format!("{l}\n")).collect();
        let (u, _) = run(&unscheduled, Some(STRACE), Options::default()).unwrap();
        assert!(data_pages(&u, 1).is_empty());
        assert!(data_pages(&u, 0).contains(&0x4840));
        // The thread still makes its own calls.
        assert_eq!(calls(&u, 1), calls(&t, 1));
    }

    #[test]
    fn references_run_per_page_and_every_instruction_is_counted() {
        let (t, sum) = tiny();
        let instrs: u64 = t.threads.iter().flat_map(|t| &t.records).map(|r| r.instrs).sum();
        assert_eq!((instrs, sum.instructions), (24, 24));
        // " S 04835000,8" and " S 04835008,8" are one run of two; the 16-byte
        // store at 0x4837ff8 touches two pages.
        let r = &t.threads[0].records;
        assert!(r.iter().any(|r| r.event == Event::Data { page: 0x4835, refs: 2, write: true }));
        let straddle = r.iter().position(|r| matches!(r.event, Event::Data { page: 0x4837, .. })).unwrap();
        assert_eq!(r[straddle + 1].event, Event::Data { page: 0x4838, refs: 1, write: true });
        let (plain, psum) = run(LACKEY, Some(STRACE), Options { ifetch: false }).unwrap();
        assert!(!plain.ifetch && psum.code_changes == 0 && sum.code_changes == 3);
        let instrs: u64 = plain.threads.iter().flat_map(|t| &t.records).map(|r| r.instrs).sum();
        assert_eq!(instrs, 24);
    }

    #[test]
    fn the_image_is_what_the_program_touched_that_no_call_mapped() {
        let (t, sum) = tiny();
        let image = |va: u64, pages: u64, write: bool| Region { va, pages, write };
        assert_eq!(
            t.processes[0].image,
            vec![
                image(0x109000, 2, false),
                image(0x4001000, 1, false),
                image(0x4035000, 1, true),
                image(0x1ffeffe000, 1, true)
            ]
        );
        assert_eq!(sum.image, (4, 5));
        // Alone, the lackey log's references are all image, and all one thread's.
        let (alone, sum) = run(LACKEY, None, Options::default()).unwrap();
        assert_eq!((alone.threads.len(), alone.processes.len()), (1, 1));
        assert!(alone.processes[0].image.contains(&image(0x4835000, 4, true)));
        assert_eq!(sum.kept.values().sum::<u64>(), 0);
    }

    #[test]
    fn address_space_changes_wait_for_the_other_threads() {
        let (t, sum) = tiny();
        assert_eq!(sum.barriers, 4);
        assert!(t.threads[0].synced && t.threads[1].synced && !t.threads[2].synced);
        let sync = |k: usize| -> Vec<Event> {
            let s = t.threads[k].records.iter().map(|r| r.event.clone());
            s.filter(|e| matches!(e, Event::Wait { .. } | Event::Wake { .. } | Event::Arrive { .. })).collect()
        };
        let arrive = |leader, wait| Event::Arrive { leader, wait };
        // The main thread waits at each of the thread's three calls, and then
        // collects its exit before its own mprotect.
        assert_eq!(sync(0), vec![arrive(1, true), arrive(1, true), arrive(1, true), Event::Wait { count: 1 }]);
        let wake = Event::Wake { threads: vec![0] };
        let wait = Event::Wait { count: 1 };
        let expect = vec![wait.clone(), wake.clone(), wait.clone(), wake.clone(), wait, wake, arrive(0, false)];
        assert_eq!(sync(1), expect);
    }

    #[test]
    fn logs_that_disagree_are_refused_with_the_line() {
        // A reference to memory the thread has unmapped.
        let late = LACKEY.replace("I  0010a014,2\n", "I  0010a014,2\n L 04840000,8\n");
        let e = refused(run(&late, Some(STRACE), Options::default()));
        assert!(e.starts_with("t.lackey:51: references 0x4840000, which the strace log has unmapped"), "{e}");
        // A write to memory mprotect left read-only.
        let write = LACKEY.replace("I  00109025,2\n L 04835000,8", "I  00109025,2\n S 04835000,8");
        let e = refused(run(&write, Some(STRACE), Options::default()));
        assert!(e.starts_with("t.lackey:63: writes 0x4835000, mapped read-only"), "{e}");
        // A strace log of another run.
        let other = STRACE.replace("4242 ", "5151 ");
        let e = run(LACKEY, Some(&other), Options::default()).unwrap_err();
        assert!(matches!(&e, Error::Log { name, line: None, .. } if name == "t.strace"), "{e:?}");
        assert!(e.to_string().contains("process 4242, which t.lackey traced, is not in this strace log"), "{e}");
        // A lackey log without valgrind's system-call lines to join the calls at.
        let bare: String = LACKEY.lines().filter(|l| !l.starts_with("SYSCALL")).map(|l| format!("{l}\n")).collect();
        let e = run(&bare, Some(STRACE), Options::default()).unwrap_err();
        assert!(matches!(&e, Error::NoSyscallLines { lackey } if lackey == "t.lackey"), "{e:?}");
        assert!(e.to_string().contains("--trace-syscalls=yes"), "{e}");
        // A valgrind thread no clone created.
        let orphan = STRACE.replace(") = 4243\n", ") = -1 EAGAIN (Resource temporarily unavailable)\n");
        let e = refused(run(LACKEY, Some(&orphan), Options::default()));
        assert!(e.starts_with("t.lackey:33: valgrind thread 2 runs, but the strace log shows no thread"), "{e}");
    }

    #[test]
    fn madvise_other_than_dontneed_is_dropped_and_mremap_unmaps_and_maps() {
        let advice =
            STRACE.replace("madvise(0x4837000, 8192, MADV_DONTNEED)", "madvise(0x4837000, 8192, MADV_WILLNEED)");
        let (t, sum) = run(LACKEY, Some(&advice), Options::default()).unwrap();
        assert_eq!(sum.dropped_advice, 1);
        assert!(!calls(&t, 0).contains(&Event::Madvise { page: 0x4837, pages: 2 }));
        let lackey = LACKEY.replace(
            "I  00109022,3\n",
            "I  00109022,3\nSYSCALL[4242,1](25) sys_mremap ( 0x4836000, 12288, 32768, 1, 0x0 ) --> [pre-success] \
             Success(0x5000000) \n",
        );
        let strace = STRACE.replace(
            "4242 16:46:52.321700 madvise",
            "4242 16:46:52.321650 mremap(0x4836000, 12288, 32768, MREMAP_MAYMOVE) = 0x5000000\n\
             4242 16:46:52.321700 madvise",
        );
        let (t, _) = run(&lackey, Some(&strace), Options::default()).unwrap();
        let c = calls(&t, 0);
        let at = c.iter().position(|e| *e == Event::Munmap { page: 0x4836, pages: 3 }).unwrap();
        assert_eq!(c[at + 1], Event::Mmap { page: 0x5000, pages: 8, write: true });
        // What moved is no longer mapped at the old address: the madvise after it
        // is cut to nothing.
        assert_eq!(c[at + 2], Event::Fork { thread: 2 });
    }

    #[test]
    fn the_fixture_imports_to_the_committed_trace_byte_for_byte() {
        // crates/sim/tests/data/tiny.trace is what the simulator's tests replay. After a
        // deliberate change to the import or the format, make it again with
        // `tlbkit trace import --lackey crates/lab/tests/data/tiny.lackey
        // --strace crates/lab/tests/data/tiny.strace -o crates/sim/tests/data/tiny.trace`.
        let committed: &[u8] = include_bytes!("../../../sim/tests/data/tiny.trace");
        assert!(tiny().0.encode() == committed, "tiny.trace is stale: make it again (see the comment)");
    }

    #[test]
    fn a_call_on_no_page_is_skipped() {
        // Linux's mprotect of length 0 succeeds and does nothing.
        let lackey = LACKEY.replace(
            "I  00109022,3\n",
            "I  00109022,3\nSYSCALL[4242,1](10) sys_mprotect ( 0x4835000, 0, 1 )[sync] --> Success(0x0) \n",
        );
        let strace = STRACE.replace(
            "4242 16:46:52.321700 madvise",
            "4242 16:46:52.321650 mprotect(0x4835000, 0, PROT_READ) = 0\n4242 16:46:52.321700 madvise",
        );
        let (t, sum) = run(&lackey, Some(&strace), Options::default()).unwrap();
        assert_eq!(calls(&t, 0), calls(&tiny().0, 0));
        assert_eq!(sum.kept["mprotect"], 2);
    }

    #[test]
    fn view_runs_join_pieces_and_skip_holes() {
        let mut v = View::default();
        let rw = Some(Prot { write: true, image: false });
        v.set(10, 20, rw);
        v.set(20, 25, Some(Prot { write: false, image: true }));
        v.set(30, 40, rw);
        v.set(12, 14, None);
        assert_eq!(v.runs(0, 100), vec![(10, 12), (14, 25), (30, 40)]);
        assert_eq!(v.runs(11, 35), vec![(11, 12), (14, 25), (30, 35)]);
        v.protect(0, 100, false);
        assert_eq!(v.get(15), Some(Prot { write: false, image: false }));
        assert_eq!(v.get(12), None);
    }
}
