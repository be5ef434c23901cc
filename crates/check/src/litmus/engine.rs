//! Enumerates every final state a litmus test can reach under tlbkit's model
//! (the parent module's documentation states the model).
//!
//! # Design
//!
//! A depth-first search over whole-machine states, each seen once (a
//! `BTreeSet` of visited states). A thread is its instructions along one path
//! through its code: each branch's direction is guessed when the search
//! starts, and a branch that resolves against its guess ends that state, so
//! later instructions may run before the branch does without a move for
//! speculation and its undoing. Each instruction instance records how far it
//! has gone: a memory access is *translated* (its location known, or a
//! translation fault), then *done* (a load satisfied, a store propagated, a
//! fault taken); every other instruction is done or not. Memory is one, for
//! every thread (Armv8 is other-multi-copy-atomic): data at physical
//! addresses, one level-3 descriptor per virtual address and the level-2
//! one they share, and the write each location holds. A thread also has its
//! TLB and its invalidations not yet complete. What a translation gives and
//! what an invalidation removes is `engine/tlb.rs`'s; taking an exception,
//! `engine/exception.rs`'s.
//!
//! The moves from a state are, for each instance not done, its next step once
//! what it must wait for has happened (`Search::waits` says what that is,
//! rule by rule), and for each thread the completion of its oldest pending
//! invalidation. A step that reads and writes only its own thread (register
//! moves, a branch, `DMB`, `ISB`, a `TLBI`'s issue, a `DSB` with nothing to
//! complete, a descriptor access's address) runs alone, before anything else:
//! it commutes with every other move and no move disables it. The tests have
//! 1 to 4 threads of a handful of instructions, so the search is exhaustive in
//! milliseconds.

use super::{Addr, Barrier, Cond, Desc, Instr, Reg, Test, TlbiScope, Val, ELR, ESR, MODE, REGS, SPSR};
use std::collections::BTreeSet;

mod exception;
mod tlb;

use exception::{data_abort, EC_SVC, IL};
use tlb::Translation;

/// A write to memory: the thread and instance that made it (`None`: the
/// location's initial value).
type WriteId = Option<(usize, usize)>;

/// One instruction instance on a thread's path.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Inst {
    /// Its code: 0 the thread's, `k` its `k`-th exception handler's.
    block: usize,
    /// Its index in that code.
    at: usize,
    /// A branch's guessed direction (`None`: both go on at the same place).
    taken: Option<bool>,
    /// A memory access's translation: the virtual address walked (`None` for
    /// an access through a descriptor's address, which is not translated) and
    /// what the walk or TLB gave.
    tr: Option<(Option<usize>, Translation)>,
    /// A load's source: the write it read.
    read: Option<WriteId>,
    /// Executed: a load satisfied, a store propagated, a fault taken.
    done: bool,
    /// The registers it wrote and their values.
    out: Vec<(Reg, Val)>,
}

impl Inst {
    /// Instance `at` of code `block`, not yet run (`taken`: a branch's guess).
    fn fresh(block: usize, at: usize, taken: Option<bool>) -> Inst {
        Inst { block, at, taken, tr: None, read: None, done: false, out: Vec::new() }
    }
}

/// An invalidation issued and not yet complete.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Pending {
    /// The page (`None`: all).
    va: Option<usize>,
    /// The ASID (`None`: all).
    asid: Option<u16>,
    /// An `IS` form (every thread's TLB).
    broadcast: bool,
    /// The issuing instance.
    at: usize,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct ThreadState {
    insts: Vec<Inst>,
    /// The translations the TLB may hold, (virtual address, descriptor): every valid descriptor a virtual address has had since the
    /// thread's TLB last completed an invalidation of it. A walk may fill the
    /// TLB at any moment and an entry may be evicted at any moment, so this set
    /// stands for every TLB the fills could have built, without a move per fill.
    tlb: BTreeSet<(usize, Desc)>,
    /// Invalidations issued and not yet complete, oldest first.
    pending: Vec<Pending>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct State {
    threads: Vec<ThreadState>,
    /// Data at each physical address, then each virtual address's descriptor.
    mem: Vec<Val>,
    /// The write each location of `mem` holds.
    writers: Vec<WriteId>,
}

/// One final state: every thread's registers and memory.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Final {
    regs: Vec<[Val; 31]>,
    mem: Vec<Val>,
}

/// Why the search stopped before the end (a test outside the subset that the
/// parser could not tell apart: an access through a value that is not an
/// address, a branch backwards).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stuck(pub String);

/// The most states one test's search visits before it stops with an error:
/// the published tests take at most about ten thousand; a file many times
/// larger is not what this engine is for, and must not run without end.
pub const MAX_STATES: usize = 200_000;

/// Returns every final state `test` can reach, and how many states the search
/// visited (at most [`MAX_STATES`]).
pub fn explore(test: &Test) -> Result<(BTreeSet<Final>, usize), Stuck> {
    explore_within(test, MAX_STATES)
}

/// [`explore`], stopping with an error past `max_states` states.
pub fn explore_within(test: &Test, max_states: usize) -> Result<(BTreeSet<Final>, usize), Stuck> {
    let search = Search { test, npas: test.pas.len() };
    let mut mem: Vec<Val> = test.memory.iter().map(|&n| Val::Int(n)).collect();
    mem.extend(test.mapping.iter().map(|&m| Val::descriptor(m)));
    // The level-2 descriptor the test's addresses share, valid at first.
    mem.push(Val::Table);
    let writers = vec![None; mem.len()];
    // Every translation the page table holds may be cached already.
    let tlb: BTreeSet<(usize, Desc)> =
        test.mapping.iter().enumerate().filter_map(|(va, d)| d.map(|d| (va, d))).collect();
    let mut starts = vec![Vec::new()];
    for t in 0..test.threads.len() {
        let paths = search.paths(t)?;
        starts = starts
            .iter()
            .flat_map(|threads: &Vec<ThreadState>| {
                paths.iter().map(|insts| {
                    let mut threads = threads.clone();
                    threads.push(ThreadState { insts: insts.clone(), tlb: tlb.clone(), pending: Vec::new() });
                    threads
                })
            })
            .collect();
    }
    let mut stack: Vec<State> =
        starts.into_iter().map(|threads| State { threads, mem: mem.clone(), writers: writers.clone() }).collect();
    let mut seen = BTreeSet::new();
    let mut finals = BTreeSet::new();
    while let Some(s) = stack.pop() {
        if !seen.insert(s.clone()) {
            continue;
        }
        if seen.len() > max_states {
            return Err(Stuck(format!(
                "the search passed {max_states} states without ending: tlbkit's litmus engine explores tests of a \
                 few threads and instructions"
            )));
        }
        if s.threads.iter().all(|t| t.insts.iter().all(|i| i.done)) {
            let regs = (0..s.threads.len())
                .map(|t| {
                    let all = search.regs(&s.threads[t], t, s.threads[t].insts.len());
                    std::array::from_fn(|r| all[r])
                })
                .collect();
            finals.insert(Final { regs, mem: s.mem.clone() });
            continue;
        }
        stack.extend(search.moves(&s)?);
    }
    Ok((finals, seen.len()))
}

/// Returns whether `f` satisfies `cond`.
pub fn holds(f: &Final, cond: &Cond) -> bool {
    match cond {
        Cond::True => true,
        Cond::Not(c) => !holds(f, c),
        Cond::And(a, b) => holds(f, a) && holds(f, b),
        Cond::Or(a, b) => holds(f, a) || holds(f, b),
        Cond::Reg(t, r, v) => f.regs[*t][*r as usize] == *v,
        Cond::Mem(pa, v) => f.mem[*pa] == *v,
    }
}

struct Search<'a> {
    test: &'a Test,
    npas: usize,
}

/// What an instance's step does, once [`Search::waits`] says it may run.
enum Step {
    /// Only its own thread changes (runs alone).
    Local,
    /// Reads or writes what other threads see.
    Global,
}

impl<'a> Search<'a> {
    /// Every path through thread `t`'s code, each branch guessed both ways.
    fn paths(&self, t: usize) -> Result<Vec<Vec<Inst>>, Stuck> {
        let thread = &self.test.threads[t];
        self.paths_of(t, 0, &thread.code, &thread.labels)
    }

    /// The paths through `code` (thread `t`'s block `block`, with its
    /// `labels`), as [`Search::paths`]; a handler's path ends after its
    /// first `ERET`.
    fn paths_of(
        &self,
        t: usize,
        block: usize,
        code: &[Instr],
        labels: &std::collections::BTreeMap<String, usize>,
    ) -> Result<Vec<Vec<Inst>>, Stuck> {
        let inst = |at, taken| Inst::fresh(block, at, taken);
        let mut done = Vec::new();
        let mut open = vec![(0, Vec::new())];
        while let Some((pc, mut path)) = open.pop() {
            let Some(instr) = code.get(pc) else {
                done.push(path);
                continue;
            };
            if block > 0 && matches!(instr, Instr::Eret) {
                path.push(inst(pc, None));
                done.push(path);
                continue;
            }
            let Instr::Cbz { target, .. } = instr else {
                path.push(inst(pc, None));
                open.push((pc + 1, path));
                continue;
            };
            let to = *labels.get(target).ok_or_else(|| Stuck(format!("thread {t} has no label {target}")))?;
            if to <= pc {
                return Err(Stuck(format!("thread {t} branches back to {target}: tlbkit runs straight-line code")));
            }
            if to == pc + 1 {
                path.push(inst(pc, None));
                open.push((pc + 1, path));
            } else {
                let mut other = path.clone();
                other.push(inst(pc, Some(true)));
                open.push((to, other));
                path.push(inst(pc, Some(false)));
                open.push((pc + 1, path));
            }
        }
        Ok(done)
    }

    /// Returns every state one move from `s`.
    fn moves(&self, s: &State) -> Result<Vec<State>, Stuck> {
        let mut ready = Vec::new();
        for (t, th) in s.threads.iter().enumerate() {
            for i in (0..th.insts.len()).filter(|&i| !th.insts[i].done) {
                match self.waits(s, t, i) {
                    Some(Step::Local) => {
                        let mut out = Vec::new();
                        self.step(s, t, i, &mut out)?;
                        return Ok(out);
                    }
                    Some(Step::Global) => ready.push((t, i)),
                    None => {}
                }
            }
        }
        let mut out = Vec::new();
        for (t, i) in ready {
            self.step(s, t, i, &mut out)?;
        }
        for (t, th) in s.threads.iter().enumerate() {
            if th.pending.first().is_some_and(|inv| !self.blocked(s, t, inv)) {
                let mut n = s.clone();
                let inv = n.threads[t].pending.remove(0);
                self.complete(&mut n, t, &inv);
                out.push(n);
            }
        }
        Ok(out)
    }

    /// Returns whether instance `i` of thread `t` may take its next step now
    /// (`None`: it must wait), and what kind of step it is. These are the
    /// orders of Arm's model, each at the step that needs it:
    /// - registers: an instruction waits for the instructions that write the
    ///   registers it reads (address and data dependencies);
    /// - `DMB` waits for the accesses before it that it orders (loads for
    ///   `LD`, stores for `ST`, both for `SY`), and the accesses after it
    ///   that it orders wait for it (every access after `SY` or `LD`, stores
    ///   after `ST`); `DSB` waits for everything before it (stores, for
    ///   `ST`), and everything after it, translations apart, waits for it;
    /// - `ISB` waits for the branches before it and for the translations
    ///   of the accesses before it, and every later step, translations
    ///   included, waits for it; a fault, `SVC` or `ERET` likewise
    ///   ([`Search::synchronises`]); a `TLBI` is issued once nothing before it
    ///   can be undone and the `DSB`s and context synchronisations before it
    ///   have run;
    /// - a load is satisfied once the stores before it know their locations
    ///   (to forward from the latest one to its own location);
    /// - a store propagates only once it is no longer speculative: the
    ///   branches before it resolved, the accesses before it translated
    ///   without a fault, the accesses before it to its location done, and
    ///   no invalidation of its thread pending.
    fn waits(&self, s: &State, t: usize, i: usize) -> Option<Step> {
        let th = &s.threads[t];
        let before = &th.insts[..i];
        let instr = |x: &Inst| self.instr(t, x);
        let all = |f: &dyn Fn(&Inst, &Instr) -> bool| before.iter().all(|x| f(x, instr(x)));
        // The barriers before an access that must have run first: every
        // `DMB SY` (all accesses before it with all after), every `DMB LD`
        // (the loads before it with every later access), a `DMB ST` (stores
        // with stores) only before a store, and every `DSB` and context
        // synchronisation.
        let barriers_done = |store: bool| {
            all(&|x, ins| {
                x.done
                    || match ins {
                        Instr::Dmb(b) => !(matches!(b, Barrier::Full | Barrier::Ld) || (store && *b == Barrier::St)),
                        Instr::Dsb(_) | Instr::Isb | Instr::Svc(_) | Instr::Eret => false,
                        _ => true,
                    }
            })
        };
        let me = &th.insts[i];
        match instr(me) {
            Instr::MovImm { .. } => Some(Step::Local),
            Instr::MovReg { rs, .. } => self.reg(th, t, i, *rs).map(|_| Step::Local),
            Instr::Eor { rn, rm, .. } => {
                let (a, b) = (self.reg(th, t, i, *rn)?, self.reg(th, t, i, *rm)?);
                // A value that is not a number waits while a branch or fault
                // before it may yet undo it; otherwise the step says why it is stuck.
                let number = a == b || matches!((a, b), (Val::Int(_), Val::Int(_)));
                (number || !self.speculative(th, t, i)).then_some(Step::Local)
            }
            Instr::Cbz { rt, .. } => self.reg(th, t, i, *rt).map(|_| Step::Local),
            Instr::AddImm { rn, .. } | Instr::LsrImm { rn, .. } | Instr::SubImm { rn, .. } => {
                self.reg(th, t, i, *rn).map(|_| Step::Local)
            }
            Instr::Mrs { sys, .. } => self.reg(th, t, i, *sys).map(|_| Step::Local),
            Instr::Msr { rt, .. } => self.reg(th, t, i, *rt).map(|_| Step::Local),
            // Exception entry and return synchronise context: like a fault's.
            Instr::Svc(_) => self.synchronises(th, t, i, &[MODE]).then_some(Step::Local),
            Instr::Eret => self.synchronises(th, t, i, &[ELR, SPSR]).then_some(Step::Local),
            Instr::Dmb(b) => {
                let (ld, st) = (*b != Barrier::St, *b != Barrier::Ld);
                let ok = all(&|x, ins| {
                    x.done || !((ld && matches!(ins, Instr::Ldr { .. })) || (st && matches!(ins, Instr::Str { .. })))
                });
                ok.then_some(Step::Local)
            }
            Instr::Dsb(b) => {
                let ok = all(&|x, ins| x.done || (*b == Barrier::St && !matches!(ins, Instr::Str { .. })));
                let completes = *b != Barrier::St && !th.pending.is_empty();
                let free = !completes || th.pending.iter().all(|inv| !self.blocked(s, t, inv));
                (ok && free).then_some(if completes { Step::Global } else { Step::Local })
            }
            Instr::Isb => all(&|x, ins| match ins {
                Instr::Cbz { .. } | Instr::Dsb(_) | Instr::Isb | Instr::Svc(_) | Instr::Eret => x.done,
                Instr::Ldr { .. } | Instr::Str { .. } => x.tr.is_some(),
                _ => true,
            })
            .then_some(Step::Local),
            // A TLBI is issued once nothing before it can be undone and the
            // barriers and context synchronisations before it have run, not
            // after earlier loads and stores: without a `DSB` between them,
            // it may pass a page-table store (Arm orders only `[dsb]; po`).
            Instr::Tlbi(tlbi) => {
                let operand = match tlbi.scope {
                    TlbiScope::Va(r) | TlbiScope::Asid(r) => self.reg(th, t, i, r).is_some(),
                    TlbiScope::All => true,
                };
                let ok = operand
                    && self.settled(th, t, i)
                    && all(&|x, ins| {
                        x.done || !matches!(ins, Instr::Dsb(_) | Instr::Isb | Instr::Svc(_) | Instr::Eret)
                    });
                ok.then_some(Step::Local)
            }
            Instr::Ldr { addr, .. } | Instr::Str { addr, .. } => {
                let store = matches!(instr(me), Instr::Str { .. });
                match me.tr {
                    None => {
                        let cse = all(&|x, ins| x.done || !matches!(ins, Instr::Isb | Instr::Svc(_) | Instr::Eret));
                        match self.address(th, t, i, addr) {
                            Ok(None) => None,
                            Ok(Some(Target::Pte(_) | Target::Level2)) => Some(Step::Local),
                            Ok(Some(Target::Va(_))) => cse.then_some(Step::Global),
                            // Stuck, unless a branch or fault before it may yet undo it.
                            Err(_) => (!self.speculative(th, t, i)).then_some(Step::Local),
                        }
                    }
                    Some((_, Translation::Fault(_) | Translation::Denied(..))) => {
                        self.synchronises(th, t, i, &[MODE]).then_some(Step::Global)
                    }
                    Some((_, Translation::Pa(loc, _))) => {
                        let at_loc = |x: &Inst| matches!(x.tr, Some((_, Translation::Pa(l, _))) if l == loc);
                        let ok = if store {
                            let Instr::Str { rt, .. } = instr(me) else { unreachable!() };
                            self.reg(th, t, i, *rt).is_some()
                                && barriers_done(store)
                                && th.pending.iter().all(|p| p.at > i)
                                && self.settled(th, t, i)
                                && all(&|x, ins| {
                                    x.done || !matches!(ins, Instr::Ldr { .. } | Instr::Str { .. }) || !at_loc(x)
                                })
                        } else {
                            barriers_done(store)
                                && all(&|x, ins| !matches!(ins, Instr::Str { .. }) || x.tr.is_some())
                                && self.forward(th, t, i, loc).is_some()
                        };
                        ok.then_some(Step::Global)
                    }
                }
            }
        }
    }

    /// The instruction instance `x` of thread `t` runs.
    fn instr(&self, t: usize, x: &Inst) -> &'a Instr {
        &self.code(t, x.block).expect("an instance's code exists")[x.at]
    }

    /// Thread `t`'s code `block` (0 its own, `k` its `k`-th handler's).
    fn code(&self, t: usize, block: usize) -> Option<&'a [Instr]> {
        let thread = &self.test.threads[t];
        match block {
            0 => Some(&thread.code),
            k => thread.handlers.get(k - 1).map(|h| &h.code[..]),
        }
    }

    /// Whether instance `i`, an exception's entry or return, may run: a
    /// context synchronisation waits for the branches and translations
    /// before it (none may still fault) and for the barriers and context
    /// synchronisations before it, not for earlier loads and stores to be
    /// performed (Arm orders an exception after them only through a
    /// barrier); and for the registers in `reads`.
    fn synchronises(&self, th: &ThreadState, t: usize, i: usize, reads: &[Reg]) -> bool {
        reads.iter().all(|&r| self.reg(th, t, i, r).is_some())
            && self.settled(th, t, i)
            && th.insts[..i].iter().all(|x| {
                x.done
                    || !matches!(
                        self.instr(t, x),
                        Instr::Dmb(_) | Instr::Dsb(_) | Instr::Isb | Instr::Svc(_) | Instr::Eret
                    )
            })
    }

    /// A load's source at `loc`, if it can be known now: the latest store
    /// before it to `loc`, while that store has not propagated (its value, if
    /// its data register is ready), or memory (`Some(None)`).
    fn forward(&self, th: &ThreadState, t: usize, i: usize, loc: usize) -> Option<Option<(usize, Val)>> {
        match self.latest_store(th, t, i, loc) {
            Some(j) if !th.insts[j].done => {
                let Instr::Str { rt, .. } = self.instr(t, &th.insts[j]) else { unreachable!() };
                self.reg(th, t, j, *rt).map(|v| Some((j, v)))
            }
            _ => Some(None),
        }
    }

    /// The latest store before instance `i` of thread `t` known to go to `loc`.
    fn latest_store(&self, th: &ThreadState, t: usize, i: usize, loc: usize) -> Option<usize> {
        (0..i).rev().find(|&j| {
            matches!(self.instr(t, &th.insts[j]), Instr::Str { .. })
                && matches!(th.insts[j].tr, Some((_, Translation::Pa(l, _))) if l == loc)
        })
    }

    /// Runs instance `i` of thread `t`'s next step (which [`Search::waits`]
    /// allows), pushing each possible result.
    fn step(&self, s: &State, t: usize, i: usize, out: &mut Vec<State>) -> Result<(), Stuck> {
        let th = &s.threads[t];
        let instr = self.instr(t, &th.insts[i]);
        let mut n = s.clone();
        let reg = |r: Reg| self.reg(th, t, i, r).expect("waits() saw the register ready");
        let me = &mut n.threads[t].insts[i];
        match instr {
            Instr::MovImm { rd, imm } => me.out = vec![(*rd, Val::Int(*imm))],
            Instr::MovReg { rd, rs } => me.out = vec![(*rd, reg(*rs))],
            Instr::Eor { rd, rn, rm } => {
                let v = match (reg(*rn), reg(*rm)) {
                    (a, b) if a == b => Val::Int(0),
                    (Val::Int(a), Val::Int(b)) => Val::Int(a ^ b),
                    (a, b) => return Err(Stuck(format!("EOR of {a:?} and {b:?}: tlbkit computes only with numbers"))),
                };
                me.out = vec![(*rd, v)];
            }
            Instr::Cbz { rt, nonzero, .. } => {
                let taken = (reg(*rt) == Val::Int(0)) != *nonzero;
                if me.taken.is_some_and(|g| g != taken) {
                    // The path guessed is not the one the branch takes.
                    return Ok(());
                }
            }
            Instr::Dmb(_) | Instr::Isb => {}
            Instr::AddImm { rd, rn, imm } => {
                let v = match reg(*rn) {
                    Val::Int(a) => Val::Int(a.wrapping_add(*imm)),
                    Val::Code(b, at) if imm % 4 == 0 => Val::Code(b, at + (*imm / 4) as usize),
                    v => {
                        return Err(Stuck(format!(
                            "ADD of {v:?} and #{imm}: tlbkit adds to numbers and code addresses"
                        )))
                    }
                };
                me.out = vec![(*rd, v)];
            }
            Instr::LsrImm { rd, rn, imm } | Instr::SubImm { rd, rn, imm } => {
                let Val::Int(a) = reg(*rn) else {
                    return Err(Stuck(format!("{instr:?} of {:?}: tlbkit computes only with numbers", reg(*rn))));
                };
                let v = if matches!(instr, Instr::LsrImm { .. }) {
                    a.checked_shr(*imm as u32).unwrap_or(0)
                } else {
                    a.wrapping_sub(*imm)
                };
                me.out = vec![(*rd, Val::Int(v))];
            }
            Instr::Mrs { rt, sys } => me.out = vec![(*rt, reg(*sys))],
            Instr::Msr { sys, rt } => me.out = vec![(*sys, reg(*rt))],
            Instr::Svc(imm) => {
                let ret = Val::Code(me.block, me.at + 1);
                return self.take_exception(n, t, i, ret, EC_SVC << 26 | IL | u64::from(*imm), out);
            }
            Instr::Eret => {
                let (elr, spsr) = (reg(ELR), reg(SPSR));
                let next = th.insts.get(i + 1).map(|x| Val::Code(x.block, x.at));
                let ends = |b: usize, at: usize| self.code(t, b).is_some_and(|c| c.len() == at);
                let follows = match (elr, next) {
                    (e, Some(n)) => e == n,
                    (Val::Code(b, at), None) => ends(b, at),
                    _ => false,
                };
                if !follows {
                    return Err(Stuck(format!(
                        "ERET to {elr:?}: tlbkit follows a return to the instruction after the exception only"
                    )));
                }
                match spsr {
                    Val::Int(m @ (0 | 4 | 5)) => me.out = vec![(MODE, Val::Int(m))],
                    v => return Err(Stuck(format!("ERET with SPSR_EL1 {v:?}: tlbkit returns to EL0 or EL1 only"))),
                }
            }
            Instr::Dsb(b) => {
                if *b != Barrier::St {
                    for inv in std::mem::take(&mut n.threads[t].pending) {
                        self.complete(&mut n, t, &inv);
                    }
                }
            }
            Instr::Tlbi(tlbi) => {
                // `page(x)` carries ASID 0 in its top bits.
                let (va, asid) = match tlbi.scope {
                    TlbiScope::All => (None, None),
                    TlbiScope::Va(r) => match reg(r) {
                        Val::Page(va) => (Some(va), Some(0)),
                        v => return Err(Stuck(format!("TLBI of {v:?}: give extz(page(x), 64)"))),
                    },
                    TlbiScope::Asid(r) => match reg(r) {
                        Val::Int(a) if a & 0xffff_ffff_ffff == 0 => (None, Some((a >> 48) as u16)),
                        v => return Err(Stuck(format!("TLBI ASIDE1 of {v:?}: give asid(n)"))),
                    },
                };
                n.threads[t].pending.push(Pending { va, asid, broadcast: tlbi.broadcast, at: i });
            }
            Instr::Ldr { rt, addr } | Instr::Str { rt, addr } => return self.access(n, t, i, *rt, addr, out),
        }
        n.threads[t].insts[i].done = true;
        out.push(n);
        Ok(())
    }

    /// An access's next step: its translation, its fault, or its load or store.
    fn access(
        &self,
        mut n: State,
        t: usize,
        i: usize,
        rt: Reg,
        addr: &Addr,
        out: &mut Vec<State>,
    ) -> Result<(), Stuck> {
        let store = matches!(self.instr(t, &n.threads[t].insts[i]), Instr::Str { .. });
        match n.threads[t].insts[i].tr {
            None => match self.address(&n.threads[t], t, i, addr)?.expect("waits() saw the address ready") {
                Target::Pte(va) => {
                    n.threads[t].insts[i].tr = Some((None, Translation::Pa(self.npas + va, 0b01)));
                    out.push(n);
                }
                Target::Level2 => {
                    n.threads[t].insts[i].tr = Some((None, Translation::Pa(self.level2(), 0b01)));
                    out.push(n);
                }
                Target::Va(va) => {
                    for (tr, fill) in self.translations(&n, t, i, va, store) {
                        let mut m = n.clone();
                        m.threads[t].insts[i].tr = Some((Some(va), tr));
                        if let Some(d) = fill {
                            // The walk fills the thread's TLB with what it read.
                            m.threads[t].tlb.insert((va, d));
                        }
                        out.push(m);
                    }
                }
            },
            Some((_, tr @ (Translation::Fault(_) | Translation::Denied(..)))) => {
                let x = &n.threads[t].insts[i];
                // The faulting instruction's address: the handler returns past it.
                let ret = Val::Code(x.block, x.at);
                let from_el0 = self.reg(&n.threads[t], t, i, MODE) == Some(Val::Int(0));
                return self.take_exception(n, t, i, ret, data_abort(tr, store, from_el0), out);
            }
            Some((_, Translation::Pa(loc, _))) if store => {
                let v = self.reg(&n.threads[t], t, i, rt).expect("waits() saw the data ready");
                n.mem[loc] = v;
                n.writers[loc] = Some((t, i));
                // A walk may fill every TLB at once from the table as it is now.
                let l3 = loc.checked_sub(self.npas).filter(|&va| va < self.test.vas.len());
                let fills: Vec<(usize, Desc)> = match (l3, v) {
                    (Some(va), Val::Desc(d)) if self.level2_valid(&n) => vec![(va, d)],
                    (None, Val::Table) if loc == self.level2() => self.walkable(&n),
                    _ => Vec::new(),
                };
                for u in &mut n.threads {
                    u.tlb.extend(fills.iter().copied());
                }
                n.threads[t].insts[i].done = true;
                out.push(n);
            }
            Some((_, Translation::Pa(loc, _))) => {
                let (read, v) = match self.forward(&n.threads[t], t, i, loc).expect("waits() saw the source known") {
                    Some((j, v)) => (Some((t, j)), v),
                    None => (n.writers[loc], n.mem[loc]),
                };
                // Two loads of one location read in program order, but for a
                // later one that read the same write first (no restart needed).
                for later in &n.threads[t].insts[i + 1..] {
                    let same = matches!(later.tr, Some((_, Translation::Pa(l, _))) if l == loc);
                    match self.instr(t, later) {
                        Instr::Str { .. } if same => break,
                        Instr::Ldr { .. } if same && later.done && later.read != Some(read) => return Ok(()),
                        _ => {}
                    }
                }
                let me = &mut n.threads[t].insts[i];
                me.read = Some(read);
                me.out = vec![(rt, v)];
                me.done = true;
                out.push(n);
            }
        }
        Ok(())
    }

    /// Whether instance `j` can no longer be undone: the branches before it
    /// resolved and the accesses before it translated without a fault (or
    /// their faults taken).
    fn settled(&self, th: &ThreadState, t: usize, j: usize) -> bool {
        th.insts[..j].iter().all(|x| match self.instr(t, x) {
            Instr::Cbz { .. } => x.done,
            Instr::Ldr { .. } | Instr::Str { .. } => x.done || matches!(x.tr, Some((_, Translation::Pa(..)))),
            _ => true,
        })
    }

    /// The value of register `r` for instance `i` of thread `t`: written by
    /// the latest instance before it that writes it (`None` while that one
    /// has not run), or its initial value.
    fn reg(&self, th: &ThreadState, t: usize, i: usize, r: Reg) -> Option<Val> {
        let thread = &self.test.threads[t];
        for x in th.insts[..i].iter().rev() {
            if x.done {
                if let Some(&(_, v)) = x.out.iter().find(|o| o.0 == r) {
                    return Some(v);
                }
                continue;
            }
            let instr = self.instr(t, x);
            // An exception writes the system state: an SVC, or an access
            // that may yet fault.
            let may_fault = matches!(instr, Instr::Ldr { .. } | Instr::Str { .. })
                && !matches!(x.tr, Some((_, Translation::Pa(..))));
            let excepts = matches!(instr, Instr::Svc(_)) || may_fault;
            if writes(instr) == Some(r) || (excepts && [ELR, SPSR, MODE, ESR].contains(&r)) {
                return None;
            }
        }
        Some(thread.regs.get(&r).copied().unwrap_or(Val::Int(0)))
    }

    /// Every register's value for instance `i` (all before it done).
    fn regs(&self, th: &ThreadState, t: usize, i: usize) -> [Val; REGS] {
        let mut regs = [Val::Int(0); REGS];
        for (&r, &v) in &self.test.threads[t].regs {
            regs[r as usize] = v;
        }
        for x in &th.insts[..i] {
            for &(r, v) in &x.out {
                regs[r as usize] = v;
            }
        }
        regs
    }

    /// Whether instance `i` runs ahead of something that may yet undo it: a
    /// branch not resolved or a fault not taken before it.
    fn speculative(&self, th: &ThreadState, t: usize, i: usize) -> bool {
        th.insts[..i].iter().any(|x| {
            !x.done && (matches!(self.instr(t, x), Instr::Cbz { .. }) || x.tr.is_some_and(|(_, tr)| tr.faults()))
        })
    }

    /// Where an access's address register points, once it is known
    /// (`Ok(None)` while a register it needs is not written yet).
    fn address(&self, th: &ThreadState, t: usize, i: usize, addr: &Addr) -> Result<Option<Target>, Stuck> {
        let Some(base) = self.reg(th, t, i, addr.base) else { return Ok(None) };
        if let Some(o) = addr.offset {
            // An offset register carries an address dependency; tlbkit adds only zero.
            match self.reg(th, t, i, o) {
                None => return Ok(None),
                Some(Val::Int(0)) => {}
                Some(v) => return Err(Stuck(format!("an offset of {v:?}: tlbkit adds only a zero offset"))),
            }
        }
        match base {
            Val::Va(va) => Ok(Some(Target::Va(va))),
            Val::PteAddr(va) => Ok(Some(Target::Pte(va))),
            Val::Level2Addr => Ok(Some(Target::Level2)),
            v => Err(Stuck(format!("an access through {v:?}, which is not an address"))),
        }
    }
}

enum Target {
    Va(usize),
    Pte(usize),
    Level2,
}

/// Returns the register `instr` writes.
fn writes(instr: &Instr) -> Option<Reg> {
    match instr {
        Instr::Ldr { rt, .. } => Some(*rt),
        Instr::MovImm { rd, .. }
        | Instr::MovReg { rd, .. }
        | Instr::Eor { rd, .. }
        | Instr::AddImm { rd, .. }
        | Instr::LsrImm { rd, .. }
        | Instr::SubImm { rd, .. } => Some(*rd),
        Instr::Mrs { rt, .. } => Some(*rt),
        Instr::Msr { sys, .. } => Some(*sys),
        Instr::Eret => Some(MODE),
        _ => None,
    }
}
