//! Enumerates every final state a litmus test can reach under tlbkit's model
//! (the parent module's documentation states the model).
//!
//! # Design
//!
//! A depth-first search over whole-machine states, each seen once (a
//! `BTreeSet` of visited states). A state is every thread's program counter
//! and registers, memory (data at physical addresses and one level-3
//! descriptor per virtual address), every thread's TLB, its invalidations
//! not yet complete, and its translations performed early. The moves from a
//! state are, for each thread: run its next instruction; complete its oldest
//! pending invalidation; or translate one of its later accesses early. A
//! thread whose next instruction touches only its registers runs it alone (it
//! commutes with every other move). The tests have 1 to 4 threads of a handful of
//! instructions, so the search is exhaustive in milliseconds.

use super::{Addr, Cond, Instr, Reg, Test, TlbiScope, Val};
use std::collections::BTreeSet;

/// What a translation gives: a physical address, or a translation fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Translation {
    Pa(usize),
    Fault,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct ThreadState {
    pc: usize,
    regs: [Val; 31],
    /// The translations the TLB may hold, (virtual address, physical
    /// address): every valid descriptor a virtual address has had since the
    /// thread's TLB last completed an invalidation of it. A walk may fill the
    /// TLB at any moment and an entry may be evicted at any moment, so this set
    /// stands for every TLB the fills could have built, without a move per fill.
    tlb: BTreeSet<(usize, usize)>,
    /// Invalidations issued and not yet complete, oldest first.
    pending: Vec<(Option<usize>, bool)>,
    /// Translations of later instructions performed early: (index, result).
    early: Vec<(usize, usize, Translation)>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct State {
    threads: Vec<ThreadState>,
    /// Data at each physical address, then each virtual address's descriptor.
    mem: Vec<Val>,
    /// The thread that last wrote each location of `mem` (`None`: its initial value).
    writers: Vec<Option<usize>>,
}

/// One final state: every thread's registers and memory.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Final {
    regs: Vec<[Val; 31]>,
    mem: Vec<Val>,
}

/// Why the search stopped before the end (a test outside the subset that the
/// parser could not tell apart: an access through a value that is not an
/// address, a fault in a thread with no handler).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stuck(pub String);

/// Returns every final state `test` can reach, and how many states the search visited.
pub fn explore(test: &Test) -> Result<(BTreeSet<Final>, usize), Stuck> {
    let npas = test.pas.len();
    let mut mem: Vec<Val> = test.memory.iter().map(|&n| Val::Int(n)).collect();
    mem.extend(test.mapping.iter().map(|&m| Val::descriptor(m)));
    let threads = test
        .threads
        .iter()
        .map(|t| {
            let mut regs = [Val::Int(0); 31];
            for (&r, &v) in &t.regs {
                regs[r as usize] = v;
            }
            // Every translation the page table holds may be cached already.
            let tlb = test.mapping.iter().enumerate().filter_map(|(va, pa)| pa.map(|pa| (va, pa))).collect();
            ThreadState { pc: 0, regs, tlb, pending: Vec::new(), early: Vec::new() }
        })
        .collect();
    let search = Search { test, npas };
    let mut seen = BTreeSet::new();
    let mut finals = BTreeSet::new();
    let writers = vec![None; mem.len()];
    let mut stack = vec![State { threads, mem, writers }];
    while let Some(s) = stack.pop() {
        if !seen.insert(s.clone()) {
            continue;
        }
        let next = search.moves(&s)?;
        if s.threads.iter().zip(&test.threads).all(|(t, code)| t.pc >= code.code.len()) {
            finals.insert(Final { regs: s.threads.iter().map(|t| t.regs).collect(), mem: s.mem.clone() });
        }
        stack.extend(next);
    }
    Ok((finals, seen.len()))
}

/// Returns whether `f` satisfies `cond`.
pub fn holds(test: &Test, f: &Final, cond: &Cond) -> bool {
    match cond {
        Cond::True => true,
        Cond::Not(c) => !holds(test, f, c),
        Cond::And(a, b) => holds(test, f, a) && holds(test, f, b),
        Cond::Or(a, b) => holds(test, f, a) || holds(test, f, b),
        Cond::Reg(t, r, v) => f.regs[*t][*r as usize] == *v,
        Cond::Mem(va, v) => match f.mem[test.pas.len() + va] {
            Val::Desc(pa) => f.mem[pa] == *v,
            _ => false,
        },
    }
}

struct Search<'a> {
    test: &'a Test,
    npas: usize,
}

impl Search<'_> {
    /// Returns every state one move from `s`.
    fn moves(&self, s: &State) -> Result<Vec<State>, Stuck> {
        let mut out = Vec::new();
        // A thread's next instruction that touches only its registers commutes
        // with every other move: running it alone from here loses no final state.
        for t in 0..s.threads.len() {
            if let Some(i) = self.test.threads[t].code.get(s.threads[t].pc) {
                let quiet = s.threads[t].pending.is_empty() && matches!(i, Instr::Dsb);
                if quiet || matches!(i, Instr::MovImm { .. } | Instr::MovReg { .. } | Instr::Eor { .. } | Instr::Dmb) {
                    self.step(s, t, &mut out)?;
                    return Ok(out);
                }
            }
        }
        for t in 0..s.threads.len() {
            self.step(s, t, &mut out)?;
            // Complete the oldest pending invalidation.
            if !s.threads[t].pending.is_empty() {
                let mut n = s.clone();
                let inv = n.threads[t].pending.remove(0);
                complete(&mut n, self.npas, t, inv);
                out.push(n);
            }
            self.translate_early(s, t, &mut out);
        }
        Ok(out)
    }

    /// Runs thread `t`'s next instruction, pushing each possible result.
    fn step(&self, s: &State, t: usize, out: &mut Vec<State>) -> Result<(), Stuck> {
        let code = &self.test.threads[t].code;
        let th = &s.threads[t];
        let Some(instr) = code.get(th.pc) else { return Ok(()) };
        let mut n = s.clone();
        n.threads[t].pc += 1;
        match instr {
            Instr::MovImm { rd, imm } => n.threads[t].regs[*rd as usize] = Val::Int(*imm),
            Instr::MovReg { rd, rs } => n.threads[t].regs[*rd as usize] = th.regs[*rs as usize],
            Instr::Eor { rd, rn, rm } => {
                let v = match (th.regs[*rn as usize], th.regs[*rm as usize]) {
                    (a, b) if a == b => Val::Int(0),
                    (Val::Int(a), Val::Int(b)) => Val::Int(a ^ b),
                    (a, b) => return Err(Stuck(format!("EOR of {a:?} and {b:?}: tlbkit computes only with numbers"))),
                };
                n.threads[t].regs[*rd as usize] = v;
            }
            Instr::Cbz { rt, target, nonzero } => {
                let zero = th.regs[*rt as usize] == Val::Int(0);
                if zero != *nonzero {
                    n.threads[t].pc = self.test.threads[t].labels[target];
                    // Translations performed early were of the path not taken.
                    n.threads[t].early.clear();
                }
            }
            Instr::Dmb | Instr::Isb => {}
            Instr::Dsb => {
                for inv in std::mem::take(&mut n.threads[t].pending) {
                    complete(&mut n, self.npas, t, inv);
                }
            }
            Instr::Tlbi(tlbi) => {
                let va = match tlbi.scope {
                    TlbiScope::All => None,
                    TlbiScope::Va(r) => match th.regs[r as usize] {
                        Val::Page(va) => Some(va),
                        v => return Err(Stuck(format!("TLBI of {v:?}: give extz(page(x), 64)"))),
                    },
                };
                n.threads[t].pending.push((va, tlbi.broadcast));
            }
            Instr::Ldr { rt, addr } | Instr::Str { rt, addr } => {
                let store = matches!(instr, Instr::Str { .. });
                let pc = th.pc;
                let results: Vec<(State, Translation)> = match self.address(th, addr)? {
                    Target::Pte(va) => vec![(n, Translation::Pa(self.npas + va))],
                    Target::Va(va) => {
                        if let Some(i) = th.early.iter().position(|e| e.0 == pc) {
                            let tr = th.early[i].2;
                            n.threads[t].early.remove(i);
                            vec![(n, tr)]
                        } else {
                            self.translations(&n, t, va)
                        }
                    }
                };
                for (mut n, tr) in results {
                    match tr {
                        Translation::Pa(loc) => {
                            if store {
                                n.mem[loc] = th.regs[*rt as usize];
                                n.writers[loc] = Some(t);
                                if let (Some(va), Val::Desc(pa)) = (loc.checked_sub(self.npas), n.mem[loc]) {
                                    for u in &mut n.threads {
                                        u.tlb.insert((va, pa));
                                    }
                                }
                            } else {
                                n.threads[t].regs[*rt as usize] = n.mem[loc];
                            }
                        }
                        Translation::Fault => {
                            let handler = self.test.threads[t].handler.as_ref().ok_or_else(|| {
                                Stuck(format!("thread {t} faults at instruction {} and has no handler", pc + 1))
                            })?;
                            let regs = &mut n.threads[t].regs;
                            for m in &handler.moves {
                                match m {
                                    Instr::MovImm { rd, imm } => regs[*rd as usize] = Val::Int(*imm),
                                    Instr::MovReg { rd, rs } => regs[*rd as usize] = regs[*rs as usize],
                                    _ => {}
                                }
                            }
                            if let Some(x) = handler.scratch {
                                // ELR_EL1 + 4: the next instruction's address, not modelled.
                                regs[x as usize] = Val::Int(0);
                            }
                            // Taking and returning from an exception synchronise context.
                            n.threads[t].early.clear();
                            if !handler.returns {
                                n.threads[t].pc = self.test.threads[t].code.len();
                            }
                        }
                    }
                    out.push(n);
                }
                return Ok(());
            }
        }
        out.push(n);
        Ok(())
    }

    /// Returns each translation of `va` thread `t` may use in state `s`, with
    /// the state after it: a TLB entry, or a walk of the page table as it is
    /// (which fills the TLB when the descriptor is valid).
    fn translations(&self, s: &State, t: usize, va: usize) -> Vec<(State, Translation)> {
        let mut out: Vec<(State, Translation)> =
            s.threads[t].tlb.iter().filter(|e| e.0 == va).map(|e| (s.clone(), Translation::Pa(e.1))).collect();
        if !matches!(s.mem[self.npas + va], Val::Desc(_)) {
            out.push((s.clone(), Translation::Fault));
        }
        out
    }

    /// Pushes the states where thread `t` has translated one of its later
    /// accesses early: any access before the next `ISB` or branch whose
    /// address registers no instruction in between writes.
    fn translate_early(&self, s: &State, t: usize, out: &mut Vec<State>) {
        let code = &self.test.threads[t].code;
        let th = &s.threads[t];
        let mut written: Vec<Reg> = Vec::new();
        let Some(first) = code.get(th.pc) else { return };
        written.extend(writes(first));
        if matches!(first, Instr::Isb | Instr::Cbz { .. }) {
            return;
        }
        for (j, instr) in code.iter().enumerate().skip(th.pc + 1) {
            if matches!(instr, Instr::Isb | Instr::Cbz { .. }) {
                return;
            }
            if let Instr::Ldr { addr, .. } | Instr::Str { addr, .. } = instr {
                let ready = !written.contains(&addr.base) && addr.offset.is_none_or(|o| !written.contains(&o));
                if ready && !th.early.iter().any(|e| e.0 == j) {
                    if let Ok(Target::Va(va)) = self.address(th, addr) {
                        for (mut n, tr) in self.translations(s, t, va) {
                            n.threads[t].early.push((j, va, tr));
                            n.threads[t].early.sort();
                            out.push(n);
                        }
                    }
                }
            }
            written.extend(writes(instr));
        }
    }

    /// Returns where an access's address register points.
    fn address(&self, th: &ThreadState, addr: &Addr) -> Result<Target, Stuck> {
        if let Some(o) = addr.offset {
            if th.regs[o as usize] != Val::Int(0) {
                return Err(Stuck(format!("an offset of {:?}: tlbkit adds only a zero offset", th.regs[o as usize])));
            }
        }
        match th.regs[addr.base as usize] {
            Val::Va(va) => Ok(Target::Va(va)),
            Val::PteAddr(va) => Ok(Target::Pte(va)),
            v => Err(Stuck(format!("an access through {v:?}, which is not an address"))),
        }
    }
}

enum Target {
    Va(usize),
    Pte(usize),
}

/// Returns the registers `instr` writes.
fn writes(instr: &Instr) -> Option<Reg> {
    match instr {
        Instr::Ldr { rt, .. } => Some(*rt),
        Instr::MovImm { rd, .. } | Instr::MovReg { rd, .. } | Instr::Eor { rd, .. } => Some(*rd),
        _ => None,
    }
}

/// Completes thread `t`'s invalidation of `va` (all when `None`), in its own
/// TLB or, broadcast, in every thread's.
fn complete(s: &mut State, npas: usize, t: usize, (va, broadcast): (Option<usize>, bool)) {
    // The issuer's later accesses wait for its DSB, which waits for this
    // completion: an early translation of theirs that read a descriptor
    // another thread has since overwritten is removed with the entries (the
    // overwrite is ordered before the TLBI, the translation before the
    // overwrite). One its own store overwrote survives: a thread's walks need
    // not see its own page-table stores before a context synchronisation.
    let covered = |v: usize| va.is_none_or(|x| x == v);
    let overwritten =
        |v: usize, pa: usize| s.mem[npas + v] != Val::Desc(pa) && s.writers[npas + v].is_some_and(|w| w != t);
    s.threads[t].early.retain(|&(_, v, tr)| !matches!(tr, Translation::Pa(pa) if covered(v) && overwritten(v, pa)));
    for (u, th) in s.threads.iter_mut().enumerate() {
        if broadcast || u == t {
            th.tlb.retain(|e| !covered(e.0));
            // A walk may refill the entry at once from the page table as it is.
            for (v, d) in s.mem[npas..].iter().enumerate() {
                if let (true, Val::Desc(pa)) = (covered(v), d) {
                    th.tlb.insert((v, *pa));
                }
            }
        }
    }
}
