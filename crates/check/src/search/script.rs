//! A script of kernel operations in words (`tlbkit check --script FILE`), run
//! one after another to write the schedule a search starts after
//! ([`super::Prefixed`]).
//!
//! One operation per line, `cpuN OPERATION`, in the order they run:
//!
//! ```text
//! # mm1 runs on both CPUs, then cpu0 unmaps its first page
//! cpu1 switch mm1
//! cpu0 switch mm1
//! cpu0 munmap 0
//! ```
//!
//! The operations are the menu's: `switch mmS`, `idle`, `munmap P`, `fault P`,
//! `madvise P`, `reclaim mmS P`, `reclaim2 mmS P mmT Q`, `unmap-table`, `exit`,
//! `fork mmS`, `tick`, `cow P`, `migrate mmS P`
//! (P a page number from 0, or its address, `0x400000`). `#` starts a
//! comment.
//!
//! An operation runs to its end before the next one starts, unless it waits
//! for another CPU (an IPI's answer, a lock): then the CPUs it waits for step
//! too. A CPU that was between operations when an interrupt came runs its
//! handler and then, as the kernel does, chooses its next operation at once:
//! it takes its next line then, and holds it until the lines before it have
//! run. So the schedule is the script's order except where an interrupt
//! decides it, and the token it gives is the truth of what ran. The script
//! ends when its last line is over, or when every line has started and a CPU
//! with no line left must choose (the search then makes that choice).

use super::{ChoiceKind, Chooser, Pick};
use crate::kernel::{va_of, MAX_PAGES};
use crate::ops::Op;

/// One line of a script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptItem {
    /// Its line in the script, from 1.
    pub line: usize,
    /// The CPU that runs it.
    pub cpu: usize,
    /// The operation.
    pub op: Op,
}

/// Parses a script for a machine of `cpus` CPUs, `mms` address spaces and
/// `pages` pages each; the error names the line and what is wrong with it.
pub fn parse_script(text: &str, cpus: usize, mms: usize, pages: usize) -> Result<Vec<ScriptItem>, String> {
    let mut items = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let words: Vec<&str> = raw.split('#').next().unwrap_or("").split_whitespace().collect();
        if words.is_empty() {
            continue;
        }
        let at = |why: String| format!("line {line} ('{}'): {why}", raw.trim());
        let cpu = words[0]
            .strip_prefix("cpu")
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|&c| c < cpus)
            .ok_or_else(|| at(format!("a line starts with the CPU that runs it, cpu0 to cpu{}", cpus - 1)))?;
        let op = parse_op(&words[1..], mms, pages).map_err(at)?;
        items.push(ScriptItem { line, cpu, op });
    }
    if items.is_empty() {
        return Err("the script has no operation: give one per line, e.g. `cpu0 switch mm1`".into());
    }
    Ok(items)
}

/// The operations a script can name, as its error lists them.
const OPERATIONS: &str = "switch mmS, idle, munmap P, fault P, madvise P, reclaim mmS P, reclaim2 mmS P mmT Q, \
                          unmap-table, exit, fork mmS, tick, cow P, migrate mmS P";

fn parse_op(words: &[&str], mms: usize, pages: usize) -> Result<Op, String> {
    let slot = |w: Option<&&str>| -> Result<u32, String> {
        let w = w.ok_or("name the address space, mm1 to mmN")?;
        w.strip_prefix("mm")
            .unwrap_or(w)
            .parse::<u32>()
            .ok()
            .filter(|&s| s >= 1 && s as usize <= mms)
            .ok_or_else(|| format!("'{w}' is not an address space: give mm1 to mm{mms}"))
    };
    let page = |w: Option<&&str>| -> Result<usize, String> {
        let w = w.ok_or("name the page, 0 to the pages less one, or its address")?;
        let p = match w.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok().and_then(|va| (0..MAX_PAGES).find(|&p| va_of(p) == va)),
            None => w.parse::<usize>().ok(),
        };
        p.filter(|&p| p < pages)
            .ok_or_else(|| format!("'{w}' is not a page: give 0 to {} or its address ({:#x} on)", pages - 1, va_of(0)))
    };
    let (name, args) = words.split_first().ok_or_else(|| format!("name the operation: {OPERATIONS}"))?;
    let op = match *name {
        "switch" => Op::Switch(slot(args.first())?),
        "idle" => Op::Idle,
        "munmap" => Op::Unmap(page(args.first())?),
        "fault" => Op::Map(page(args.first())?),
        "madvise" => Op::Madvise(page(args.first())?),
        "reclaim" => Op::Reclaim(slot(args.first())?, page(args.get(1))?),
        "reclaim2" => Op::Reclaim2(slot(args.first())?, page(args.get(1))?, slot(args.get(2))?, page(args.get(3))?),
        "unmap-table" => Op::UnmapTable,
        "exit" => Op::Exit,
        "fork" => Op::Fork(slot(args.first())?),
        "tick" => Op::Tick,
        "cow" => Op::Cow(page(args.first())?),
        "migrate" => Op::Migrate(slot(args.first())?, page(args.get(1))?),
        other => return Err(format!("unknown operation '{other}': the operations are {OPERATIONS}")),
    };
    let wanted = match op {
        Op::Switch(_) | Op::Unmap(_) | Op::Map(_) | Op::Madvise(_) | Op::Fork(_) | Op::Cow(_) => 2,
        Op::Reclaim(..) | Op::Migrate(..) => 3,
        Op::Reclaim2(..) => 5,
        _ => 1,
    };
    if words.len() != wanted {
        return Err(format!("'{name}' takes {} word(s) after it", wanted - 1));
    }
    Ok(op)
}

/// The chooser that runs a script, line by line.
pub struct Script<'a> {
    items: &'a [ScriptItem],
    /// Whether each line's operation has been chosen.
    chosen: Vec<bool>,
    /// The line each CPU is running (chosen, not over).
    running: Vec<Option<usize>>,
    /// The first line not chosen.
    next: usize,
    /// Whether the script ended at a CPU's choice of an operation after its
    /// last line (every line chosen, some still running).
    cut: bool,
    /// Why the script cannot go on, if it cannot.
    pub error: Option<String>,
}

impl<'a> Script<'a> {
    /// Returns a chooser for `items` on a machine of `cpus` CPUs.
    pub fn new(items: &'a [ScriptItem], cpus: usize) -> Self {
        Script { items, chosen: vec![false; items.len()], running: vec![None; cpus], next: 0, cut: false, error: None }
    }

    /// Returns whether the script is over: every line ran to its end, or
    /// every line started and a CPU with none left must choose its next
    /// operation (an interrupt woke it while another CPU ran the last lines;
    /// the search after the script makes that choice, and finishes those lines).
    pub fn finished(&self) -> bool {
        self.next == self.items.len() && (self.cut || self.running.iter().all(Option::is_none))
    }

    fn fail(&mut self, why: String) -> Pick {
        self.error.get_or_insert(why);
        Pick::Prune
    }

    /// The CPU to step: the one running the earliest line, if no line before it
    /// is still to start; else the one whose line is next.
    fn preferred(&self) -> Option<usize> {
        let first_running = (0..self.running.len()).filter_map(|c| self.running[c].map(|k| (k, c))).min();
        match first_running {
            Some((k, c)) if k < self.next => Some(c),
            _ => self.items.get(self.next).map(|i| i.cpu),
        }
    }
}

impl Chooser for Script<'_> {
    fn choose(&mut self, point: ChoiceKind, labels: &[u32], _state: u128) -> Pick {
        if self.error.is_some() || self.finished() {
            return Pick::Prune;
        }
        if point != ChoiceKind::Sched {
            return self.fail("the script reached a choice it cannot make (where a block write lands)".into());
        }
        let step = |c: usize| labels.iter().position(|&l| l == 2 * c as u32);
        if let Some(i) = self.preferred().and_then(step) {
            return Pick::Take(i);
        }
        // Waiting: step a CPU that runs no line (an interrupt's handler, the
        // IPI the waiting line may wait for), lowest first; else a CPU
        // running a line, earliest first. A CPU that chose its next line at
        // the end of a handler holds it while another CPU still handles
        // the same IPI: stepping it first would run a later line before the
        // waiting one is over.
        if let Some(i) = (0..self.running.len()).filter(|&c| self.running[c].is_none()).find_map(step) {
            return Pick::Take(i);
        }
        let mut by_line: Vec<(usize, usize)> =
            (0..self.running.len()).filter_map(|c| self.running[c].map(|k| (k, c))).collect();
        by_line.sort_unstable();
        if let Some(i) = by_line.iter().find_map(|&(_, c)| step(c)) {
            return Pick::Take(i);
        }
        // Any CPU's step (labels below `2 * cpus` are steps and drains; the
        // arm mode's second drains and early completions come after), else
        // the first option.
        let n = self.running.len() as u32;
        Pick::Take(labels.iter().position(|&l| l % 2 == 0 && l < 2 * n).unwrap_or(0))
    }

    fn scripted(&self) -> bool {
        true
    }

    /// A line names its operation as [`Op::script_words`] does (a reclaim line
    /// names FreeBSD's page-out too).
    fn script_op(&mut self, cpu: usize, offered: &[String]) -> Pick {
        if self.error.is_some() {
            return Pick::Prune;
        }
        let Some(k) = (self.next..self.items.len()).find(|&k| !self.chosen[k] && self.items[k].cpu == cpu) else {
            if self.next == self.items.len() {
                self.cut = true;
                return Pick::Prune;
            }
            let waiting = &self.items[self.next];
            return self.fail(format!(
                "cpu{cpu} must choose an operation (an interrupt woke it) before line {} starts, but the script \
                 has no more lines for it; add one (e.g. `cpu{cpu} idle`) after line {}",
                waiting.line,
                self.items.iter().filter(|i| i.cpu == cpu).map(|i| i.line).max().unwrap_or(0)
            ));
        };
        let item = &self.items[k];
        let words = item.op.script_words();
        let Some(i) = offered.iter().position(|o| *o == words) else {
            return self.fail(format!(
                "line {}: cpu{cpu} cannot start '{words}' there; it may start: {}",
                item.line,
                if offered.is_empty() { "nothing".to_string() } else { offered.join(", ") }
            ));
        };
        self.chosen[k] = true;
        self.running[cpu] = Some(k);
        while self.next < self.items.len() && self.chosen[self.next] {
            self.next += 1;
        }
        Pick::Take(i)
    }

    fn op_boundary(&mut self, cpu: usize) {
        self.running[cpu] = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_reads_one_operation_a_line_and_names_the_line_it_cannot_read() {
        let items =
            parse_script("# two CPUs\ncpu1 switch mm2\n\ncpu0 munmap 0x401000 # page 1\ncpu0 exit\n", 2, 3, 2).unwrap();
        let ops: Vec<(usize, usize, Op)> = items.iter().map(|i| (i.line, i.cpu, i.op)).collect();
        assert_eq!(ops, [(2, 1, Op::Switch(2)), (4, 0, Op::Unmap(1)), (5, 0, Op::Exit)]);
        for (text, why) in [
            ("cpu2 idle", "line 1 ('cpu2 idle'): a line starts with the CPU that runs it, cpu0 to cpu1"),
            ("cpu0 switch mm4", "line 1 ('cpu0 switch mm4'): 'mm4' is not an address space: give mm1 to mm3"),
            ("cpu0 munmap 2", "line 1 ('cpu0 munmap 2'): '2' is not a page: give 0 to 1 or its address (0x400000 on)"),
            ("cpu0 idle now", "line 1 ('cpu0 idle now'): 'idle' takes 0 word(s) after it"),
            ("cpu0 mprotect 0", "line 1 ('cpu0 mprotect 0'): unknown operation 'mprotect': the operations are"),
            ("# nothing", "the script has no operation"),
        ] {
            let e = parse_script(text, 2, 3, 2).unwrap_err();
            assert!(e.starts_with(why), "{text}: {e}");
        }
    }
}
