//! A reader of the log valgrind's lackey writes with `--trace-mem=yes`.
//!
//! Lackey prints one line per guest instruction (`I  04020b1d,6`) and per data
//! reference (` L addr,size` for a load, ` S` a store, ` M` a modify: a load and
//! a store), in execution order, with hexadecimal addresses. Valgrind's own
//! messages start with `==PID==` (the banner, lackey's closing counts), `--PID--`
//! (debug output) or `**PID**`. Two valgrind options add lines the reader uses:
//!
//! - `--trace-syscalls=yes`: `SYSCALL[PID,TID](NR) sys_NAME ( ARGS ) --> ...`
//!   where the client made a system call, `TID` being valgrind's number for the
//!   thread (1 for the first); `... [async] --> ...` lines complete a blocking
//!   call and are skipped. Valgrind does not always end such a line before its
//!   next message (`... Success(0x6502) --25563--   SCHED[1]: ...`): the
//!   message is read as a line of its own.
//! - `--trace-sched=yes`: `--PID--   SCHED[TID]:  acquired lock (...)` where
//!   thread `TID` starts running client code. Valgrind runs one thread at a
//!   time, under a lock, so every reference up to the next acquisition is that
//!   thread's.
//!
//! Blank lines are skipped. Anything else is malformed, as is a line cut short,
//! a file whose last line has no newline, a log of more than one process (a
//! forked child logs into the same file unless `--log-file` has `%p`), and a log
//! that ends before valgrind's closing lines (the run or the file was cut). When
//! lackey's closing counts are there, the number of `I` lines must equal its
//! `guest instrs` (so the log of a forked child, whose counts include its
//! parent's, is refused: one log, one process). Every error names the file and
//! line.

use super::clip;
use crate::Error;
use std::io::BufRead;

/// What one line of a lackey log says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// An instruction fetch.
    Instr {
        /// Address.
        addr: u64,
        /// Bytes.
        size: u64,
    },
    /// A data reference.
    Data {
        /// Address.
        addr: u64,
        /// Bytes.
        size: u64,
        /// Whether it writes (`S` or `M`).
        write: bool,
    },
    /// A system call the client made (`--trace-syscalls=yes`).
    Syscall(Marker),
    /// Valgrind thread `vtid` starts running client code (`--trace-sched=yes`).
    Running {
        /// Valgrind's number for the thread.
        vtid: u32,
    },
}

/// Valgrind's record of a client system call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Marker {
    /// Valgrind's number for the calling thread.
    pub vtid: u32,
    /// The call's name, without valgrind's `sys_` prefix.
    pub name: String,
    /// The arguments as valgrind prints them.
    pub args: Vec<String>,
    /// The value of `Success(...)`, when the line shows one.
    pub result: Option<u64>,
    /// The child a fork made (`created child N`), when the line shows one.
    pub child: Option<u32>,
}

/// Reads a lackey log one item at a time.
pub struct Lackey<R> {
    input: R,
    /// The file's name, for messages.
    name: String,
    line: usize,
    buf: String,
    /// What the previous physical line left to read as a line of its own.
    rest: Option<String>,
    pid: Option<u32>,
    instrs: u64,
    /// Whether the last line read was a valgrind message after a trace line.
    closed: bool,
    traced: bool,
    summary: bool,
    exit_code: bool,
    guest_instrs: Option<u64>,
}

impl<R: BufRead> Lackey<R> {
    /// Returns a reader of `input`, whose errors name the file `name`.
    pub fn new(input: R, name: &str) -> Self {
        Lackey {
            input,
            name: name.to_string(),
            line: 0,
            buf: String::new(),
            rest: None,
            pid: None,
            instrs: 0,
            closed: false,
            traced: false,
            summary: false,
            exit_code: false,
            guest_instrs: None,
        }
    }

    /// Returns the traced process's pid, once a valgrind message has named it.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Returns the number of the line last read (1-based).
    pub fn line(&self) -> usize {
        self.line
    }

    /// Returns an error about the current line.
    fn err<T>(&self, what: impl std::fmt::Display) -> Result<T, Error> {
        Err(Error::Log { name: self.name.clone(), line: Some(self.line as u64), what: what.to_string() })
    }

    /// Returns the next item with its line number, `None` at a complete end.
    pub fn next_item(&mut self) -> Result<Option<(usize, Item)>, Error> {
        loop {
            let text = match self.rest.take() {
                Some(t) => t,
                None => {
                    self.buf.clear();
                    let n = self
                        .input
                        .read_line(&mut self.buf)
                        .map_err(|source| Error::LogIo { name: self.name.clone(), source })?;
                    if n == 0 {
                        return self.finish().map(|_| None);
                    }
                    self.line += 1;
                    if !self.buf.ends_with('\n') {
                        return self.err("the file ends in the middle of a line (truncated?)");
                    }
                    self.buf.trim_end_matches(['\n', '\r']).to_string()
                }
            };
            if let Some(item) = self.parse(&text)? {
                return Ok(Some((self.line, item)));
            }
        }
    }

    fn finish(&self) -> Result<(), Error> {
        let end = |what: &str| self.err(what);
        if !self.traced {
            return end("no lackey trace lines (run valgrind --tool=lackey --trace-mem=yes)");
        }
        if !self.closed || (self.summary && !self.exit_code) {
            return end("the log ends before valgrind's closing lines (the run or the file was cut)");
        }
        if let Some(n) = self.guest_instrs.filter(|&n| n != self.instrs) {
            return end(&format!(
                "lackey counted {n} guest instructions but the log has {} I lines: lines were lost, or this is \
                 the log of a forked child, whose counts include its parent's (import the parent's log)",
                self.instrs
            ));
        }
        Ok(())
    }

    /// Checks that a valgrind message's pid is the log's.
    fn same_pid(&mut self, pid: u32) -> Result<(), Error> {
        match self.pid {
            None => {
                self.pid = Some(pid);
                Ok(())
            }
            Some(p) if p == pid => Ok(()),
            Some(p) => self.err(format!(
                "output of process {pid} in the log of process {p}: a forked child logged into the same file \
                 (give valgrind --log-file=NAME.%p)"
            )),
        }
    }

    fn parse(&mut self, text: &str) -> Result<Option<Item>, Error> {
        // Blank lines, and the result valgrind prints on a line of its own after
        // a call it does not know ("unimplemented ... syscall").
        if text.trim().is_empty() || text.starts_with(" --> ") {
            return Ok(None);
        }
        if let Some(rest) = text.strip_prefix("I  ") {
            let (addr, size) = self.reference(rest)?;
            self.instrs += 1;
            self.traced = true;
            self.closed = false;
            return Ok(Some(Item::Instr { addr, size }));
        }
        if let Some(kind) = text.strip_prefix(' ').and_then(|t| t.chars().next()) {
            let write = match kind {
                'L' => false,
                'S' | 'M' => true,
                _ => return self.err(format!("not a lackey line: {}", clip(text))),
            };
            let Some(rest) = text.get(2..).and_then(|t| t.strip_prefix(' ')) else {
                return self.err(format!("not a lackey line: {}", clip(text)));
            };
            let (addr, size) = self.reference(rest)?;
            self.traced = true;
            self.closed = false;
            return Ok(Some(Item::Data { addr, size, write }));
        }
        if let Some(rest) = text.strip_prefix("SYSCALL[") {
            return self.syscall(text, rest);
        }
        for (open, close) in [("==", "=="), ("--", "--"), ("**", "**")] {
            if let Some(rest) = text.strip_prefix(open) {
                let Some((pid, msg)) = rest.split_once(close) else { break };
                let Ok(pid) = pid.parse::<u32>() else { break };
                self.same_pid(pid)?;
                return Ok(self.message(open, msg));
            }
        }
        self.err(format!("not a lackey line: {}", clip(text)))
    }

    /// Parses `ADDR,SIZE` of a trace line.
    fn reference(&self, s: &str) -> Result<(u64, u64), Error> {
        let parsed = s.split_once(',').and_then(|(a, n)| {
            let addr = u64::from_str_radix(a, 16).ok().filter(|_| !a.is_empty() && !a.starts_with('+'))?;
            let size = n.parse::<u64>().ok().filter(|_| !n.starts_with('+'))?;
            Some((addr, size))
        });
        match parsed {
            Some((addr, size)) if size > 0 => Ok((addr, size)),
            _ => self.err(format!("malformed reference '{s}': expected HEXADDR,SIZE (a line cut short?)")),
        }
    }

    /// Reads a valgrind message; returns a scheduler item it carries.
    fn message(&mut self, open: &str, msg: &str) -> Option<Item> {
        if self.traced && open == "==" {
            self.closed = true;
            self.summary |= ["Counted ", "Jccs:", "Executed:"].iter().any(|w| msg.contains(w));
            self.exit_code |= msg.trim_start().starts_with("Exit code:");
            if let Some(n) = msg.trim_start().strip_prefix("guest instrs:") {
                self.guest_instrs = n.trim().replace(',', "").parse().ok();
            }
        }
        let sched = msg.trim_start().strip_prefix("SCHED[")?;
        let (vtid, what) = sched.split_once("]:")?;
        let vtid = vtid.parse().ok()?;
        what.trim_start().starts_with("acquired lock").then_some(Item::Running { vtid })
    }

    /// Parses a `SYSCALL[PID,TID](NR) ...` line (`rest` follows `SYSCALL[`).
    fn syscall(&mut self, text: &str, rest: &str) -> Result<Option<Item>, Error> {
        let head = rest.split_once("](").and_then(|(ids, r)| {
            let (pid, vtid) = ids.split_once(',')?;
            let (_nr, body) = r.split_once(") ")?;
            Some((pid.parse::<u32>().ok()?, vtid.parse::<u32>().ok()?, body))
        });
        let Some((pid, vtid, body)) = head else {
            return self.err(format!("malformed valgrind system-call line: {}", clip(text)));
        };
        self.same_pid(pid)?;
        // A valgrind message that follows on the same line is a line of its own.
        let mut body = body;
        for tag in [format!("--{pid}--"), format!("=={pid}==")] {
            if let Some(at) = body.find(&tag) {
                self.rest = Some(body[at..].to_string());
                body = &body[..at];
            }
        }
        if body.starts_with("...") || body.starts_with("unimplemented") {
            return Ok(None);
        }
        let name_end = body.find([' ', '(']).unwrap_or(body.len());
        let name = body[..name_end].trim_start_matches("sys_").to_string();
        let args = body[name_end..]
            .trim_start()
            .strip_prefix('(')
            .and_then(|a| a.split_once(')'))
            .map(|(a, _)| a.split(',').map(|x| x.trim().to_string()).filter(|x| !x.is_empty()).collect())
            .unwrap_or_default();
        let hex = |after: &str| {
            let at = body.find(after)? + after.len();
            let digits: String = body[at..].chars().take_while(|c| c.is_ascii_hexdigit()).collect();
            u64::from_str_radix(&digits, 16).ok()
        };
        let result = hex("Success(0x");
        let child = body
            .find("created child ")
            .and_then(|at| body[at + 14..].chars().take_while(|c| c.is_ascii_digit()).collect::<String>().parse().ok());
        Ok(Some(Item::Syscall(Marker { vtid, name, args, result, child })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLOSING: &str =
        "==7== \n==7== Counted 1 call to main()\n==7==   guest instrs:  3\n==7== Exit code:       0\n";

    /// Reads `log` whole; returns its items or the first error.
    fn read(log: &str) -> Result<Vec<(usize, Item)>, Error> {
        let mut r = Lackey::new(log.as_bytes(), "t.lackey");
        let mut items = Vec::new();
        while let Some(i) = r.next_item()? {
            items.push(i);
        }
        Ok(items)
    }

    /// Reads `log`, which fails; returns the message, checking that the error
    /// is about a line of the log.
    fn err(log: &str) -> String {
        let e = read(log).unwrap_err();
        assert!(matches!(&e, Error::Log { name, line: Some(_), .. } if name == "t.lackey"), "{e:?}");
        e.to_string()
    }

    fn log(body: &str) -> String {
        format!("==7== Lackey, an example Valgrind tool\n==7== Command: ./t\n{body}{CLOSING}")
    }

    #[test]
    fn reads_instructions_and_references_with_their_lines() {
        let items =
            read(&log("I  0401ab70,3\n S 1fff000688,8\nI  0401ab73,5\n L 04035000,4\n M 04035008,8\nI  0401ab78,2\n"))
                .unwrap();
        assert_eq!(items[0], (3, Item::Instr { addr: 0x401ab70, size: 3 }));
        assert_eq!(items[1], (4, Item::Data { addr: 0x1fff000688, size: 8, write: true }));
        assert_eq!(items[3], (6, Item::Data { addr: 0x4035000, size: 4, write: false }));
        assert_eq!(items[4], (7, Item::Data { addr: 0x4035008, size: 8, write: true }));
        assert_eq!(items.len(), 6);
    }

    #[test]
    fn a_malformed_line_is_reported_with_its_number() {
        let e = err(&log("I  0401ab70,3\nI  0401ab73,5\n Q 1234,8\nI  0401ab78,2\n"));
        assert!(e.starts_with("t.lackey:5: not a lackey line: ' Q 1234,8'"), "{e}");
        let e = read(&log("I  0401ab70,3\nI  0401ab73,5\n Q 1234,8\nI  0401ab78,2\n")).unwrap_err();
        assert!(matches!(&e, Error::Log { line: Some(5), what, .. } if what == "not a lackey line: ' Q 1234,8'"));
        let e = err(&log("I  0401ab70,3\n S 1fff0006\nI  0401ab73,5\nI  0401ab78,2\n"));
        assert!(e.starts_with("t.lackey:4: malformed reference '1fff0006'"), "{e}");
        let e = err(&log("I  0401ab70,3\nhello from the program\n"));
        assert!(e.starts_with("t.lackey:4: not a lackey line"), "{e}");
    }

    #[test]
    fn a_truncated_log_is_an_error() {
        let full = log("I  0401ab70,3\n S 1fff000688,8\nI  0401ab73,5\nI  0401ab78,2\n");
        // Cut in the middle of a line.
        let at = full.find(" S 1fff").unwrap() + 6;
        assert!(err(&full[..at]).contains("ends in the middle of a line"));
        // Cut at the end of a line, before valgrind's closing lines.
        let at = full.find("I  0401ab73").unwrap();
        assert!(err(&full[..at]).contains("ends before valgrind's closing lines"));
        // Cut inside the closing counts.
        let at = full.find("==7== Exit code").unwrap();
        assert!(err(&full[..at]).contains("ends before valgrind's closing lines"));
        // Lines lost: the count of instructions disagrees.
        let lost = full.replace("I  0401ab73,5\n", "");
        assert!(err(&lost).contains("lackey counted 3 guest instructions but the log has 2"));
        assert_eq!(read(&full).unwrap().len(), 4);
    }

    #[test]
    fn system_calls_and_scheduling_are_read_and_a_message_on_the_same_line_split_off() {
        let body = "--7--   SCHED[1]:  acquired lock (thread_wrapper(starting new thread))\n\
            I  0401ab70,3\n\
            SYSCALL[7,1](9) sys_mmap ( 0x0, 8192, 3, 34, 4294967295, 0 ) --> [pre-success] Success(0x4835000) \n\
            SYSCALL[7,1](257) ... [async] --> Success(0x4) \n\
            SYSCALL[7,1](56) sys_clone ( 3d0f00, 0x5229f70 ) --> [pre-success] Success(0x6502) --7--   SCHED[1]: releasing lock (VG_(vg_yield)) -> VgTs_Yielding\n\
            --7--   SCHED[2]:  acquired lock (VG_(vg_yield))\n\
            I  0401ab73,5\n\
            SYSCALL[7,2](60) exit( 0 ) --> [pre-success] Success(0x0) \n\
            \n\
            SYSCALL[7,1](56) sys_clone ( 1200011, 0x0, 0x0, 0x4a27a10, 0x0 )   clone(fork): process 7 created child 9\n\
            SYSCALL[7,1](334) unimplemented (by the kernel) syscall: 334! (ni_syscall)\n\
            \x20--> [pre-fail] Failure(0x26) \n\
            I  0401ab78,2\n";
        let items: Vec<Item> = read(&log(body)).unwrap().into_iter().map(|(_, i)| i).collect();
        let marker = |vtid, name: &str, args: &[&str], result, child| {
            let args = args.iter().map(|s| s.to_string()).collect();
            Item::Syscall(Marker { vtid, name: name.into(), args, result, child })
        };
        assert_eq!(
            items,
            vec![
                Item::Running { vtid: 1 },
                Item::Instr { addr: 0x401ab70, size: 3 },
                marker(1, "mmap", &["0x0", "8192", "3", "34", "4294967295", "0"], Some(0x4835000), None),
                marker(1, "clone", &["3d0f00", "0x5229f70"], Some(0x6502), None),
                Item::Running { vtid: 2 },
                Item::Instr { addr: 0x401ab73, size: 5 },
                marker(2, "exit", &["0"], Some(0), None),
                marker(1, "clone", &["1200011", "0x0", "0x0", "0x4a27a10", "0x0"], None, Some(9)),
                Item::Instr { addr: 0x401ab78, size: 2 },
            ]
        );
    }

    #[test]
    fn a_second_process_in_the_log_is_an_error() {
        let e = err(&log("I  0401ab70,3\nSYSCALL[9,1](273) I  048ca84c,3\n"));
        assert!(e.starts_with("t.lackey:4: output of process 9 in the log of process 7"), "{e}");
    }
}
