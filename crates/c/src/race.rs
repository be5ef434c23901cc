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
//! What it does not see: marked accesses are the checker's own business
//! (ordering), and the mm_structs belong to tlbkit's glue, not the file, so
//! plain accesses to their fields are not checked. Accesses while the
//! file's initcalls run (one CPU, before any other starts) are not recorded.
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
}

/// The history of plain accesses: per granule, per CPU, reads and writes.
#[derive(Default)]
pub struct Tracker {
    /// The memory whose plain accesses are checked: `(start, end)`.
    ranges: Vec<(usize, usize)>,
    seen: BTreeMap<usize, Vec<[Option<Seen>; 2]>>,
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
}

impl Tracker {
    /// Adds `[start, end)` to the memory whose plain accesses are checked.
    pub fn track(&mut self, start: usize, end: usize) {
        if start < end {
            self.ranges.push((start, end));
        }
    }

    /// Stops checking `[start, ..)` (a freed block) and forgets its history.
    pub fn untrack(&mut self, start: usize) {
        if let Some(k) = self.ranges.iter().position(|r| r.0 == start) {
            let (s, e) = self.ranges.swap_remove(k);
            let keys: Vec<usize> = self.seen.range(s..e).map(|(k, _)| *k).collect();
            keys.into_iter().for_each(|k| {
                self.seen.remove(&k);
            });
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
        let mut g = addr & !7;
        while g < addr + bytes {
            let per_cpu = self.seen.entry(g).or_default();
            if per_cpu.len() <= cpu {
                per_cpu.resize_with(cpu + 1, || [None, None]);
            }
            for (d, kinds) in per_cpu.iter().enumerate().filter(|(d, _)| *d != cpu) {
                // A write conflicts with the other's reads and writes, a read with its writes.
                for (k, other) in kinds.iter().enumerate().filter(|(k, _)| write || *k == 1) {
                    if let Some(o) = other {
                        if !o.locks.iter().any(|l| held.contains(l)) {
                            return Some(Race {
                                addr: g,
                                first: (d, k == 1, o.pc, o.locks.clone()),
                                second: (cpu, write, pc, held.to_vec()),
                            });
                        }
                    }
                }
            }
            let slot = &mut per_cpu[cpu][usize::from(write)];
            match slot {
                Some(s) => {
                    s.locks.retain(|l| held.contains(l));
                    s.pc = pc;
                }
                None => *slot = Some(Seen { locks: held.to_vec(), pc }),
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
