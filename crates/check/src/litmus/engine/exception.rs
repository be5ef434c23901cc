//! Exceptions: taking one (its syndrome, the handler's paths) at a fault
//! or an `SVC`. The rules are the parent module's documentation's.

use super::{Inst, Search, State, Stuck, Translation};
use crate::litmus::{Instr, Val, ELR, ESR, MODE, SPSR};

impl Search<'_> {
    /// Takes an exception at instance `i` of thread `t` (a fault, or an
    /// `SVC`) with syndrome `esr`, returning to `ret`: records the mode it
    /// came from, its return address and syndrome, runs again whatever ran
    /// ahead of it, and runs the handler at its vector next, each path
    /// through it (its branches guessed, as the thread's are) to its first
    /// `ERET`, or to its end, where the thread ends. Pushes nothing where
    /// the thread has no handler there: that execution reaches no final
    /// state the test asks about.
    pub(super) fn take_exception(
        &self,
        mut n: State,
        t: usize,
        i: usize,
        ret: Val,
        esr: u64,
        out: &mut Vec<State>,
    ) -> Result<(), Stuck> {
        let mode = self.reg(&n.threads[t], t, i, MODE).expect("synchronises() saw the mode known");
        let offset = match mode {
            Val::Int(0) => 0x400,
            Val::Int(4) => 0,
            Val::Int(5) => 0x200,
            v => return Err(Stuck(format!("an exception taken in mode {v:?}"))),
        };
        let handlers = &self.test.threads[t].handlers;
        let Some(k) = handlers.iter().position(|h| h.offset == offset) else { return Ok(()) };
        let th = &mut n.threads[t];
        th.insts[i].out = vec![(ELR, ret), (SPSR, mode), (MODE, Val::Int(5)), (ESR, Val::Int(esr))];
        th.insts[i].done = true;
        for later in &mut th.insts[i + 1..] {
            *later = Inst::fresh(later.block, later.at, later.taken);
        }
        let h = &handlers[k];
        for body in self.paths_of(t, k + 1, &h.code, &h.labels)? {
            let mut m = n.clone();
            let th = &mut m.threads[t];
            if !body.last().is_some_and(|x| matches!(h.code[x.at], Instr::Eret)) {
                th.insts.truncate(i + 1);
            }
            th.insts.splice(i + 1..i + 1, body);
            out.push(m);
        }
        Ok(())
    }
}

/// `ESR_ELx.EC` of an `SVC` from AArch64 (Arm ARM, `ESR_EL1`).
pub(super) const EC_SVC: u64 = 0x15;
/// `ESR_ELx.EC` of a data abort from a lower exception level, and from the same one.
const EC_DABT_LOWER: u64 = 0x24;
const EC_DABT_SAME: u64 = 0x25;
/// `ESR_ELx.IL`: a 32-bit instruction.
pub(super) const IL: u64 = 1 << 25;

/// The syndrome of the data abort translation `tr` gives a load or a store
/// (`store`) from EL0 or EL1: its class, `IL`, `WnR` (bit 6) for a store, and
/// the fault status code (`DFSC`): a translation fault at its level
/// (`0b0001LL`), or a permission fault at level 3 (`0b001111`).
pub(super) fn data_abort(tr: Translation, store: bool, from_el0: bool) -> u64 {
    let ec = if from_el0 { EC_DABT_LOWER } else { EC_DABT_SAME };
    let dfsc = match tr {
        Translation::Fault(level) => 0b00_0100 | u64::from(level),
        _ => 0b00_1111,
    };
    ec << 26 | IL | u64::from(store) << 6 | dfsc
}
