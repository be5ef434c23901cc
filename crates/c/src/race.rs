//! The plain-access discipline: KCSAN's question, asked of every execution.
//!
//! The kernel marks the accesses it lets race (`READ_ONCE`, `WRITE_ONCE`,
//! atomics); a plain access to shared memory must be made under a lock that
//! every conflicting access also holds, or by the only CPU that touches the
//! location. The compiled file reports each of its plain accesses (the
//! compiler's thread-sanitizer instrumentation, [`crate::runtime`]); this
//! tracker keeps, for each 8-byte granule of the file's memory (its globals
//! and statics and the blocks it allocated) and each CPU, the locks held at
//! *every* plain read and at every plain write so far (their intersection,
//! Eraser's lockset) and where the last one was made. An access conflicts
//! with another CPU's when one of them writes; two conflicting accesses with
//! no lock in common are a data race, reported with both sites.
//!
//! The mm_structs are the glue's (`init_mm`, `tlbkit_mm`), and checked as
//! the file's memory: a plain read of `next->context.ctx_id` or `mm->pgd`
//! races with a plain write another CPU makes without a common lock. An mm's
//! history is forgotten when its slot is forked into (`init_new_context`
//! writes a new mm no other CPU sees yet).
//!
//! What it does not see: marked accesses are the checker's own business
//! (ordering). Accesses while the file's initcalls run (one CPU, before any
//! other starts) and the glue's `init_new_context` are not recorded.
//! A race found in one execution is found whatever the search prunes, since
//! pruning compares states, not histories; a race that needs a history the
//! search never keeps can be missed.

use std::collections::BTreeMap;

/// A CPU's plain accesses of one kind to one granule: the locks held at
/// every one of them, and the code address of the last.
#[derive(Clone, Debug)]
struct Seen {
    locks: Vec<usize>,
    pc: usize,
    /// The granule's bytes these accesses touched (bit `k`: byte `k`): a
    /// `u16` field and a `bool` beside it in one granule do not conflict.
    bytes: u8,
}

/// The history of plain accesses: per granule, per CPU, reads and writes.
#[derive(Default)]
pub struct Tracker {
    /// The memory whose plain accesses are checked: `(start, end)`.
    ranges: Vec<(usize, usize)>,
    /// Of it, the memory whose marked writes count too (the mms): a plain
    /// read of `mm->context.id` races with an `atomic64_set` of it.
    marked: Vec<(usize, usize)>,
    seen: BTreeMap<usize, Vec<[Option<Seen>; KINDS]>>,
}

/// A data race: the granule and the two accesses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Race {
    /// The granule's address.
    pub addr: usize,
    /// The earlier access: CPU, whether it wrote, code address, locks held.
    pub first: (usize, bool, usize, Vec<usize>),
    /// The access that raced with it.
    pub second: (usize, bool, usize, Vec<usize>),
    /// Which of the two was a marked write (an atomic or `WRITE_ONCE` to an
    /// mm's field, whose code address is not kept): `Some(true)` the first.
    pub marked: Option<bool>,
}

/// The kinds of access kept per granule and CPU, by their index: plain
/// reads, plain writes, marked writes (mm fields only).
const READ: usize = 0;
const WRITE: usize = 1;
const MARKED: usize = 2;
const KINDS: usize = 3;

impl Tracker {
    /// Adds `[start, end)` to the memory whose plain accesses are checked.
    pub fn track(&mut self, start: usize, end: usize) {
        if start < end {
            self.ranges.push((start, end));
        }
    }

    /// Adds `[start, end)` to the memory whose plain accesses are checked,
    /// and whose marked writes race with plain reads.
    pub fn track_marked_writes(&mut self, start: usize, end: usize) {
        if start < end {
            self.ranges.push((start, end));
            self.marked.push((start, end));
        }
    }

    /// Records a marked write by `cpu` holding `held` (a no-op outside the
    /// memory of [`Tracker::track_marked_writes`]); returns the race it
    /// makes with another CPU's plain read, if any.
    pub fn marked_write(&mut self, cpu: usize, addr: usize, bytes: usize, held: &[usize]) -> Option<Race> {
        if !self.marked.iter().any(|&(s, e)| addr < e && addr + bytes > s) {
            return None;
        }
        self.record(cpu, addr, bytes, MARKED, 0, held)
    }

    /// Forgets the history of `[start, end)`, still checked: a new object in
    /// old memory (an mm_struct of a slot forked into again), whose
    /// initialisation before it is published races with nothing.
    pub fn forget(&mut self, start: usize, end: usize) {
        let keys: Vec<usize> = self.seen.range(start..end).map(|(k, _)| *k).collect();
        for k in keys {
            self.seen.remove(&k);
        }
    }

    /// Stops checking `[start, ..)` (a freed block) and forgets its history.
    pub fn untrack(&mut self, start: usize) {
        if let Some(k) = self.ranges.iter().position(|r| r.0 == start) {
            let (s, e) = self.ranges.swap_remove(k);
            self.forget(s, e);
        }
    }

    /// Records a plain access by `cpu` holding the locks `held`; returns the
    /// race it makes, if any.
    pub fn access(
        &mut self,
        cpu: usize,
        addr: usize,
        bytes: usize,
        write: bool,
        pc: usize,
        held: &[usize],
    ) -> Option<Race> {
        if !self.ranges.iter().any(|&(s, e)| addr < e && addr + bytes > s) {
            return None;
        }
        self.record(cpu, addr, bytes, if write { WRITE } else { READ }, pc, held)
    }

    /// Records an access of kind `kind` (plain read, plain write, marked
    /// write); returns the first race it makes. A plain write conflicts with
    /// the other CPUs' plain reads and writes, a plain read with their plain
    /// and marked writes, a marked write with their plain reads (KCSAN's
    /// defaults: a plain aligned write is taken as atomic against marked
    /// accesses).
    fn record(
        &mut self,
        cpu: usize,
        addr: usize,
        bytes: usize,
        kind: usize,
        pc: usize,
        held: &[usize],
    ) -> Option<Race> {
        let conflicts = |mine: usize, theirs: usize| match mine {
            READ => theirs != READ,
            WRITE => theirs != MARKED,
            _ => theirs == READ,
        };
        let mut g = addr & !7;
        while g < addr + bytes {
            // The bytes of this granule the access touches.
            let (lo, hi) = (addr.max(g) - g, (addr + bytes).min(g + 8) - g);
            let mine = ((0xffu16 << lo) & (0xffu16 >> (8 - hi))) as u8;
            let per_cpu = self.seen.entry(g).or_default();
            if per_cpu.len() <= cpu {
                per_cpu.resize_with(cpu + 1, || [None, None, None]);
            }
            for (d, kinds) in per_cpu.iter().enumerate().filter(|(d, _)| *d != cpu) {
                for (k, other) in kinds.iter().enumerate().filter(|(k, _)| conflicts(kind, *k)) {
                    if let Some(o) = other.as_ref().filter(|o| o.bytes & mine != 0) {
                        if !o.locks.iter().any(|l| held.contains(l)) {
                            let marked = (k == MARKED || kind == MARKED).then_some(k == MARKED);
                            return Some(Race {
                                addr: g + (o.bytes & mine).trailing_zeros() as usize,
                                first: (d, k != READ, o.pc, o.locks.clone()),
                                second: (cpu, kind != READ, pc, held.to_vec()),
                                marked,
                            });
                        }
                    }
                }
            }
            let slot = &mut per_cpu[cpu][kind];
            match slot {
                Some(s) => {
                    s.locks.retain(|l| held.contains(l));
                    s.pc = pc;
                    s.bytes |= mine;
                }
                None => *slot = Some(Seen { locks: held.to_vec(), pc, bytes: mine }),
            }
            g += 8;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_and_a_read_under_one_lock_do_not_race() {
        let mut t = Tracker::default();
        t.track(0x1000, 0x1010);
        assert_eq!(t.access(0, 0x1000, 8, true, 1, &[0x50]), None);
        assert_eq!(t.access(1, 0x1000, 8, false, 2, &[0x50]), None);
    }

    #[test]
    fn a_write_without_the_lock_races_with_a_read_under_it() {
        let mut t = Tracker::default();
        t.track(0x1000, 0x1010);
        assert_eq!(t.access(1, 0x1008, 8, false, 2, &[0x50]), None);
        let race = t.access(0, 0x1008, 8, true, 1, &[]).expect("a race");
        assert_eq!(race.first, (1, false, 2, vec![0x50]));
        assert_eq!(race.second, (0, true, 1, vec![]));
        assert_eq!(race.marked, None);
    }

    #[test]
    fn a_plain_read_races_with_a_marked_write_only_where_marked_writes_count() {
        let mut t = Tracker::default();
        t.track(0x1000, 0x1010);
        t.track_marked_writes(0x2000, 0x2010);
        // A file's global: its marked writes are the checker's business.
        assert_eq!(t.marked_write(0, 0x1000, 8, &[]), None);
        assert_eq!(t.access(1, 0x1000, 8, false, 2, &[]), None);
        // An mm's field: a plain read after another CPU's atomic write races...
        assert_eq!(t.marked_write(0, 0x2000, 8, &[]), None);
        let race = t.access(1, 0x2000, 8, false, 2, &[]).expect("a race");
        assert_eq!((race.first.0, race.second.0, race.marked), (0, 1, Some(true)));
        // ...and a marked write after another CPU's plain read, unless a lock is common.
        assert_eq!(t.access(0, 0x2008, 8, false, 3, &[0x50]), None);
        assert_eq!(t.marked_write(1, 0x2008, 8, &[0x50]), None);
        assert_eq!(t.marked_write(1, 0x2008, 8, &[]).map(|r| r.marked), Some(Some(false)));
        // Two marked writes, or a plain write and a marked one, are not a race.
        assert_eq!(t.marked_write(0, 0x2000, 8, &[]), None);
        assert_eq!(t.access(0, 0x200c, 4, true, 4, &[]), None);
    }

    #[test]
    fn accesses_to_different_bytes_of_one_granule_do_not_race() {
        let mut t = Tracker::default();
        t.track_marked_writes(0x2000, 0x2010);
        // A u16 read plain under a lock, and the bool beside it written marked without.
        assert_eq!(t.access(0, 0x2000, 2, false, 1, &[0x50]), None);
        assert_eq!(t.marked_write(1, 0x2002, 1, &[]), None);
        // The race is named by the byte both touch.
        let race = t.marked_write(1, 0x2001, 1, &[]).expect("a race");
        assert_eq!(race.addr, 0x2001);
    }

    #[test]
    fn reads_do_not_race_and_untracked_memory_is_not_checked() {
        let mut t = Tracker::default();
        t.track(0x1000, 0x1010);
        assert_eq!(t.access(0, 0x1000, 8, false, 1, &[]), None);
        assert_eq!(t.access(1, 0x1000, 8, false, 2, &[]), None);
        assert_eq!(t.access(0, 0x2000, 8, true, 1, &[]), None);
        assert_eq!(t.access(1, 0x2000, 8, true, 2, &[]), None);
    }

    #[test]
    fn one_unlocked_access_leaves_the_granule_unprotected() {
        let mut t = Tracker::default();
        t.track(0x1000, 0x1010);
        assert_eq!(t.access(0, 0x1000, 8, true, 1, &[0x50]), None);
        assert_eq!(t.access(0, 0x1000, 8, true, 3, &[]), None);
        assert!(t.access(1, 0x1000, 8, true, 2, &[0x50]).is_some());
    }
}
