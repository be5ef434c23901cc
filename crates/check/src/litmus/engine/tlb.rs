//! The TLB and the walks: what a translation gives, each translation an
//! access may use (the TLB's entries, a walk of memory, a walk that reads
//! the thread's own store early), and what an invalidation waits for and
//! removes. The rules are the parent module's documentation's.

use super::{Inst, Pending, Search, State, ThreadState};
use crate::litmus::{Barrier, Desc, Instr, Val, MODE};

/// What a translation gives: a location in memory, or a fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Translation {
    /// A location: a physical address through a descriptor with these
    /// permissions (`AP[2:1]`), or a descriptor's own address (not
    /// translated: `0b01`).
    Pa(usize, u8),
    /// An access a descriptor of this physical address and these
    /// permissions denies: a permission fault.
    Denied(usize, u8),
    /// An invalid descriptor: a translation fault, at its level (2 or 3).
    Fault(u8),
}

impl Translation {
    /// What descriptor `d` gives a load, or a store if `store`, at EL0
    /// (`el0`) or EL1.
    pub(super) fn of(d: Val, store: bool, el0: bool) -> Translation {
        match d {
            Val::Desc(d) if !d.permits(store, el0) => Translation::Denied(d.pa, d.ap),
            Val::Desc(d) => Translation::Pa(d.pa, d.ap),
            _ => Translation::Fault(3),
        }
    }

    /// The descriptor a translation of a virtual address read (`None`: an invalid one).
    pub(super) fn read(self) -> Option<Desc> {
        match self {
            Translation::Pa(pa, ap) | Translation::Denied(pa, ap) => Some(Desc { pa, ap }),
            Translation::Fault(_) => None,
        }
    }

    /// Whether the access faults: it takes an exception, not the access.
    pub(super) fn faults(self) -> bool {
        !matches!(self, Translation::Pa(..))
    }
}

impl Search<'_> {
    /// The location of the level-2 descriptor, after every level-3 one.
    pub(super) fn level2(&self) -> usize {
        self.npas + self.test.vas.len()
    }

    /// Whether a walk through memory as `s` holds it passes level 2.
    pub(super) fn level2_valid(&self, s: &State) -> bool {
        s.mem[self.level2()] == Val::Table
    }

    /// Returns each translation of `va` instance `i` of thread `t` may use in
    /// state `s`: a TLB entry, a walk of the page table as memory holds it
    /// now, or a walk that reads the thread's own latest earlier store to the
    /// descriptor before other threads see it, once that store can no longer
    /// be undone (Arm's model forwards a store to a later walk of its thread,
    /// but not a speculative one: `speculative ; trfi` is ordered). Each
    /// with the descriptor the walk fills the TLB with (`None`: from the TLB,
    /// or invalid); for a store if `store` (a read-only one is denied).
    pub(super) fn translations(
        &self,
        s: &State,
        t: usize,
        i: usize,
        va: usize,
        store: bool,
    ) -> Vec<(Translation, Option<Desc>)> {
        let th = &s.threads[t];
        let el0 = self.mode_before(th, t, i) == Val::Int(0);
        let mut out: Vec<(Translation, Option<Desc>)> =
            th.tlb.iter().filter(|e| e.0 == va).map(|e| (Translation::of(Val::Desc(e.1), store, el0), None)).collect();
        let level2 = self.level2_valid(s);
        if !level2 {
            out.push((Translation::Fault(2), None));
        } else if !matches!(s.mem[self.npas + va], Val::Desc(_)) {
            out.push((Translation::Fault(3), None));
        }
        let mut add = |tr: Translation, fill: Option<Desc>| {
            if !out.iter().any(|o| o.0 == tr) {
                out.push((tr, fill));
            }
        };
        // A walk through the thread's own latest store to the level-2
        // descriptor (as to a level-3 one, below): invalid, it faults; valid,
        // it reads the level-3 descriptor in memory.
        match (self.own_store(th, t, i, self.level2()), s.mem[self.npas + va]) {
            (Some(Val::Table), Val::Desc(d)) => add(Translation::of(Val::Desc(d), store, el0), Some(d)),
            (Some(Val::Table), _) => add(Translation::Fault(3), None),
            (Some(_), _) => add(Translation::Fault(2), None),
            (None, _) => {}
        }
        if let Some(d) = self.own_store(th, t, i, self.npas + va).filter(|_| level2) {
            add(Translation::of(d, store, el0), if let Val::Desc(d) = d { Some(d) } else { None });
        }
        out
    }

    /// The value of thread `t`'s latest store before instance `i` to
    /// location `loc` while other threads do not see it yet and it can no
    /// longer be undone, once its value is known: what a walk of `i` may read
    /// early.
    pub(super) fn own_store(&self, th: &ThreadState, t: usize, i: usize, loc: usize) -> Option<Val> {
        let j = self.latest_store(th, t, i, loc).filter(|&j| !th.insts[j].done && self.settled(th, t, j))?;
        let Instr::Str { rt, .. } = self.instr(t, &th.insts[j]) else { unreachable!() };
        self.reg(th, t, j, *rt)
    }

    /// The mode (`PSTATE.M`) instance `i` of thread `t` runs in, should
    /// nothing before it take an exception (if something does, `i` runs
    /// again after): the latest done instance's that set it, or the
    /// thread's first. An access is translated for that exception level.
    pub(super) fn mode_before(&self, th: &ThreadState, t: usize, i: usize) -> Val {
        let set = th.insts[..i].iter().rev().filter(|x| x.done).find_map(|x| x.out.iter().find(|o| o.0 == MODE));
        set.map_or_else(|| self.test.threads[t].regs.get(&MODE).copied().unwrap_or(Val::Int(0)), |o| o.1)
    }

    /// Whether thread `t`'s broadcast invalidation `inv` must wait for another
    /// thread's access in flight: one translated, not yet performed (or its
    /// fault not yet taken), by a walk or TLB entry of a page `inv` covers that
    /// the page table no longer holds (its descriptor overwritten since). Arm's
    /// model orders such an access, or fault, before the `TLBI` (it reads a
    /// descriptor from before a write the `TLBI` follows), so it is performed
    /// first.
    pub(super) fn blocked(&self, s: &State, t: usize, inv: &Pending) -> bool {
        if !inv.broadcast {
            return false;
        }
        let stale = |u: usize, x: &Inst| match x.tr {
            Some((Some(v), tr)) if !x.done && self.covers(inv, u, v) => {
                let now = s.mem[self.npas + v];
                match tr.read() {
                    Some(read) => now != Val::Desc(read),
                    None => matches!(now, Val::Desc(_)) && self.level2_valid(s),
                }
            }
            _ => false,
        };
        s.threads.iter().enumerate().any(|(u, th)| u != t && th.insts.iter().any(|x| stale(u, x)))
    }

    /// Every translation a walk of memory as `s` holds it gives: each
    /// virtual address's valid level-3 descriptor, while level 2 is valid.
    pub(super) fn walkable(&self, s: &State) -> Vec<(usize, Desc)> {
        if !self.level2_valid(s) {
            return Vec::new();
        }
        let l3 = &s.mem[self.npas..self.level2()];
        l3.iter().enumerate().filter_map(|(va, d)| if let Val::Desc(d) = d { Some((va, *d)) } else { None }).collect()
    }

    /// Whether invalidation `inv` covers thread `u`'s entries for `va`: its
    /// page, and its ASID (thread `u`'s entries are tagged with its
    /// `TTBR0_EL1`'s ASID; no entry is global here).
    pub(super) fn covers(&self, inv: &Pending, u: usize, va: usize) -> bool {
        inv.va.is_none_or(|x| x == va) && inv.asid.is_none_or(|a| a == self.test.threads[u].asid)
    }

    /// Completes thread `t`'s invalidation `inv`, in its own TLB or,
    /// broadcast, in every thread's.
    pub(super) fn complete(&self, s: &mut State, t: usize, inv: &Pending) {
        let npas = self.npas;
        let walkable = self.walkable(s);
        let covered = |v: usize| self.covers(inv, t, v);
        // The accesses after the issuer's next DSB wait for this completion:
        // a translation of theirs made earlier that read a descriptor another
        // thread has since overwritten is dropped with the entries (the
        // overwrite is ordered before the TLBI, the translation before the
        // overwrite). One its own store overwrote survives: a thread's walks
        // need not see its own page-table stores before a context
        // synchronisation.
        let th = &s.threads[t];
        let dsb = (inv.at + 1..th.insts.len())
            .find(|&k| matches!(self.instr(t, &th.insts[k]), Instr::Dsb(b) if *b != Barrier::St));
        if let Some(d) = dsb {
            let stale = |x: &Inst| match x.tr {
                Some((Some(v), tr @ (Translation::Pa(..) | Translation::Denied(..)))) => {
                    !x.done
                        && covered(v)
                        && tr.read().is_some_and(|read| s.mem[npas + v] != Val::Desc(read))
                        && s.writers[npas + v].is_some_and(|(w, _)| w != t)
                }
                _ => false,
            };
            let drop: Vec<usize> = (d + 1..th.insts.len()).filter(|&k| stale(&th.insts[k])).collect();
            for k in drop {
                s.threads[t].insts[k].tr = None;
            }
        }
        for (u, th) in s.threads.iter_mut().enumerate() {
            if inv.broadcast || u == t {
                let covered = |v: usize| self.covers(inv, u, v);
                th.tlb.retain(|e| !covered(e.0));
                // A walk may refill the entry at once from the page table as it is.
                th.tlb.extend(walkable.iter().filter(|e| covered(e.0)).copied());
            }
        }
    }
}
