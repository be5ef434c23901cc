//! Cache-line coherence: the lines of the policies' shared variables and the
//! kernel's own contended structures, each with its recent history in simulated
//! time.
//!
//! # The model
//! A variable lives in a 64-byte line. A write or atomic by a CPU that does not
//! hold the line alone, or a read by a CPU without a copy, moves the line; a move
//! costs what the preset says for the distance between the line's owner and the
//! requester (`cacheline_transfer` inside an L3 domain, `cacheline_cross_ccx`
//! more between the domains of a socket, `cacheline_cross_socket` more across
//! sockets: `crate::machine`'s `transfer_cost`), the atomic included (the
//! presets' figures are core-to-core timings of a line passed by atomics,
//! most of them compare-and-exchange round trips). An
//! access to a line the CPU holds is a hit: `mem_access` for a load or a
//! store, the preset's `atomic_hit` for an atomic (x86's locked
//! instructions drain the store buffer: [`Hits`]). Every request for a line passes
//! its point of serialization (the home agent or directory slice its address
//! maps to), which orders it with the line's other requests. The first read of
//! a version another CPU wrote is an intervention from that CPU's cache (a
//! "modified intervention"), ordered there like a write: it takes the line's
//! turn, and a write asked for meanwhile waits for it. After it the line is
//! shared, and the later reads of that version overlap, each paying its own
//! transfer (the directory or snoop filter serves them in parallel). Writes
//! invalidate: a write or atomic waits for the first gap in which the line is not
//! moving, so concurrent writers queue one move at a time, each served from the
//! previous writer. A plain store waits in the store buffer, not in the CPU, and
//! later stores by the same CPU ride on the same move.
//!
//! Accesses reach the machine in the order the simulator runs code, which is not
//! the order of simulated time: the handlers of one IPI run one after another,
//! each to its end, although they run at the same time on their CPUs. So each
//! line keeps its history in simulated time: who owned it from when, which
//! CPUs read each version, and the intervals in which it was moving
//! (`timeline.rs`). An access is placed at its own time in that history:
//! - a read costs a transfer from the owner of the version it finds (nothing if
//!   the CPU already holds that version); the first read of a version another
//!   CPU wrote waits, as a write does, for the first gap in which the line is
//!   not moving and takes the line for its transfer; the later reads of that
//!   version do not wait for one another, only for a move in progress;
//! - a read of a variable whose latest write is the reading CPU's own plain
//!   store, not yet visible, is served from its store buffer (store-to-load
//!   forwarding): a hit, no move;
//! - a write or atomic waits for the first gap in which the line is not moving
//!   that is long enough for its move (from whoever owns the line then), one
//!   move at a time per line, however many CPUs are queued;
//! - an access never completes before the latest write to the *same variable*
//!   that ran before it in simulator order is visible (but for the writer's
//!   own forwarded read above): what it reads or overwrites is that write's
//!   value. (A spin lock's acquisition therefore
//!   waits for the previous holder's release: [`crate::locks`].) An atomic
//!   whose order among its peers is the hardware's and decides nothing its CPU
//!   does next (`Access::RmwAnyOrder`: `llist_add`'s push and the owner's
//!   `llist_del_all`; `Machine::katomic`: a counter's add) is the exception:
//!   it is placed at its own time, and leaves nothing for a later access to
//!   follow (the read of the head that begins each push included). Ordered
//!   after a write the simulator happened to run first, an `llist_add` on a
//!   CPU's `call_single_queue` would wait for the handler of an IPI that the
//!   simulator sent earlier but that takes the queue later in time, and every
//!   initiator's request would queue behind every other's handler: a convoy
//!   the hardware does not have.
//!
//! So a counter every IPI handler increments is a queue of moves while the
//! handlers' reads of the request beside it overlap, and per-CPU flags are not a
//! queue at all. A CPU that announced it spins on a line while its IPIs are
//! handled (`Hw::spin_on`) asks for the line again as soon as a write takes it
//! away, and has it back before the next writer: every other CPU's write to that
//! line costs one more move. (This is the most the spinner can cost the writers:
//! with arbitration that serves requests strictly in the order they are made, a
//! writer already waiting would go first. The origin 003 notes in
//! `docs/costs/westmere.md` give both.)
//!
//! # What a line keeps
//! No access of any CPU comes before the start of the event the engine runs
//! (`Machine::set_floor`), so a line forgets the moves that ended by then and
//! the versions before the one current then, and keeps everything later: its
//! history is bounded by the accesses still ahead of that time (4,096 CPUs
//! queued on one counter are 4,096 moves, served one after another), never by
//! a constant, and no queue is ever cut short.
//!
//! # Whose lines
//! A policy's shared variables are named by their address in the host's memory
//! (`Hw::shared`): `mm_cpumask`, `tlb_gen`, `is_lazy`, `loaded_mm`, FreeBSD's
//! shootdown words and every other variable a policy accounts. The kernel's own
//! contended structures, which the simulator's kernel paths touch, are named by
//! [`KLine`]: an address space's `mmap_lock`, a VMA's lock, a memory cgroup's
//! page counter. Both live in one `Lines` store (the kernel's spinlocks and
//! mutexes, whose words only their holders touch, keep their line's history in
//! their own timeline of holds: [`crate::locks`]); a [`KLine`]'s address lies above every user-space
//! address a host gives out, so the two never share a line.

use crate::timeline::Timeline;
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasherDefault;
use tlbkit_policy::Access;

/// One version of a cache line: written by one CPU, read by others until the next
/// write.
#[derive(Clone, Debug)]
struct Version {
    /// When the write that made it completed (0 for the line's first version).
    at: u64,
    /// The CPU that wrote it; `None` for the line's first version (from memory).
    writer: Option<u32>,
    /// CPUs that read it, each with when its copy arrived.
    readers: Vec<(u32, u64)>,
}

/// One cache line of policy state: its history in simulated time, back to the
/// floor (the module docs, "What a line keeps").
///
/// A line quiet at the floor (one version, no move in progress, one variable
/// written: an address space's `mmap_lock` taken by the one CPU that runs
/// it) keeps all it has inline, so that an access reads nothing but the
/// line's own entry in the store; the simulator's time at thousands of CPUs
/// is mostly that of cold reads of the host's memory.
#[derive(Clone, Debug)]
pub(crate) struct Line {
    /// Versions, oldest first, by `at`; the first is the one current at the floor.
    versions: Versions,
    /// The intervals in which the line moves, to a new owner or back to a CPU
    /// spinning on it: one at a time.
    moves: Timeline<()>,
    /// Per variable on the line (by address): when its latest write, in the order
    /// the simulator ran them, was visible.
    vars: Vars,
    /// The CPU spinning on the line and since when, while its handlers run.
    spinner: Option<(u32, u64)>,
}

impl Default for Line {
    fn default() -> Self {
        Line {
            versions: Versions { first: Version { at: 0, writer: None, readers: Vec::new() }, rest: VecDeque::new() },
            moves: Timeline::default(),
            vars: Vars { first: None, rest: Vec::new() },
            spinner: None,
        }
    }
}

/// A line's versions, oldest first and never none: the first inline, the
/// later ones (while a move or a write ahead of the floor is kept) queued.
#[derive(Clone, Debug)]
struct Versions {
    first: Version,
    rest: VecDeque<Version>,
}

impl Versions {
    #[cfg(test)]
    fn len(&self) -> usize {
        1 + self.rest.len()
    }

    fn get(&self, i: usize) -> Option<&Version> {
        match i {
            0 => Some(&self.first),
            _ => self.rest.get(i - 1),
        }
    }

    #[cfg(test)]
    fn last(&self) -> &Version {
        self.rest.back().unwrap_or(&self.first)
    }

    /// Drops the first version; the second takes its place (there must be one).
    fn pop_front(&mut self) {
        if let Some(v) = self.rest.pop_front() {
            self.first = v;
        }
    }

    /// The number of versions, from the first, for which `pred` holds (it must
    /// hold for a prefix).
    fn partition_point(&self, pred: impl Fn(&Version) -> bool) -> usize {
        match pred(&self.first) {
            false => 0,
            true => 1 + self.rest.partition_point(pred),
        }
    }

    /// Puts `v` at index `i`, after the versions before it.
    fn insert(&mut self, i: usize, v: Version) {
        match i {
            0 => {
                let old = std::mem::replace(&mut self.first, v);
                self.rest.push_front(old);
            }
            _ => self.rest.insert(i - 1, v),
        }
    }
}

impl std::ops::Index<usize> for Versions {
    type Output = Version;

    fn index(&self, i: usize) -> &Version {
        self.get(i).expect("a line's version by index")
    }
}

impl std::ops::IndexMut<usize> for Versions {
    fn index_mut(&mut self, i: usize) -> &mut Version {
        match i {
            0 => &mut self.first,
            _ => &mut self.rest[i - 1],
        }
    }
}

/// A variable of a line: when its latest write, in the order the simulator
/// ran them, was visible, and the CPU whose plain store that write was
/// ([`NO_STORE`] for a read-modify-write), which reads it from its store
/// buffer until then.
#[derive(Clone, Copy, Debug)]
struct Var {
    addr: usize,
    visible: u64,
    store_by: u32,
}

/// [`Var::store_by`] of a variable whose latest write was not a plain store.
const NO_STORE: u32 = u32::MAX;

/// A line's variables ([`Var`]): the first inline, others (a line several
/// variables share) after it.
#[derive(Clone, Debug)]
struct Vars {
    first: Option<Var>,
    rest: Vec<Var>,
}

impl Vars {
    fn iter(&self) -> impl Iterator<Item = &Var> {
        self.first.iter().chain(self.rest.iter())
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = &mut Var> {
        self.first.iter_mut().chain(self.rest.iter_mut())
    }

    fn push(&mut self, var: Var) {
        match self.first {
            None => self.first = Some(var),
            Some(_) => self.rest.push(var),
        }
    }
}

impl Line {
    /// Forgets what no access from `floor` on can meet: the moves that ended by
    /// then, and the versions before the one current then.
    fn forget(&mut self, floor: u64) {
        self.moves.forget(floor);
        while self.versions.get(1).is_some_and(|v| v.at <= floor) {
            self.versions.pop_front();
        }
    }

    /// Returns the index of the version current at `t`.
    fn version_at(&self, t: u64) -> usize {
        self.versions.partition_point(|v| v.at <= t).saturating_sub(1)
    }

    /// Returns the end of the move in progress at `t`, if any.
    fn moving_at(&self, t: u64) -> Option<u64> {
        self.moves.at(t).map(|m| m.1)
    }

    /// Returns the end of a move to `cpu` in progress at `t`, if any: its stores
    /// wait for that one in the store buffer and need no move of their own.
    fn moving_to(&self, cpu: u32, t: u64) -> Option<u64> {
        let end = self.moving_at(t)?;
        let v = &self.versions[self.version_at(end)];
        (v.at == end && v.writer == Some(cpu)).then_some(end)
    }

    /// Returns when the latest write to variable `addr` was visible (0 if
    /// none) and the CPU whose plain store it was ([`NO_STORE`] if none).
    fn visible(&self, addr: usize) -> (u64, u32) {
        self.vars.iter().find(|v| v.addr == addr).map_or((0, NO_STORE), |v| (v.visible, v.store_by))
    }

    /// Records that a write to `addr` is visible at `t`, a plain store by
    /// `store_by` or ([`NO_STORE`]) a read-modify-write.
    fn set_visible(&mut self, var: Option<usize>, t: u64, store_by: u32) {
        let Some(addr) = var else { return };
        if let Some(v) = self.vars.iter_mut().find(|v| v.addr == addr) {
            v.visible = v.visible.max(t);
            v.store_by = store_by;
            return;
        }
        self.vars.push(Var { addr, visible: t, store_by });
    }

    /// Inserts a version written by `writer` and complete at `at`; returns its index.
    fn insert_version(&mut self, at: u64, writer: u32) -> usize {
        let i = self.versions.partition_point(|v| v.at <= at);
        self.versions.insert(i, Version { at, writer: Some(writer), readers: Vec::new() });
        i
    }

    /// Returns the start and end of the first move of the line to `me` that
    /// fits from `t`, not yet placed: it comes from whoever owns the line when
    /// it starts, and must fit before the next move from there.
    fn next_move(&self, t: u64, me: u32, cost: &impl Fn(Option<u32>, u32) -> u64) -> (u64, u64) {
        let from = |s: u64| self.versions[self.version_at(s)].writer;
        let (start, _) = self.moves.fit(t, |s, _| cost(from(s), me));
        (start, start + cost(from(start), me))
    }

    /// Performs `req` on a variable of this line, a line move from CPU `a` to
    /// CPU `b` costing `cost(a, b)` (`a` is `None` for memory) and a hit what
    /// `hit` says for the access's kind, no access coming before `floor` from
    /// now on. Returns when the access is done and how many moves it caused.
    fn access(&mut self, req: LineAccess, floor: u64, hit: Hits, cost: impl Fn(Option<u32>, u32) -> u64) -> (u64, u64) {
        let LineAccess { cpu: me, t: t_in, addr, kind: access } = req;
        // What this access costs where the line is this CPU's.
        let hit = hit.of(access);
        self.forget(floor);
        // What this access reads or overwrites is the latest write to the
        // variable; an atomic in any order is placed at its own time and
        // leaves no write for later accesses to follow.
        let var = (access != Access::RmwAnyOrder).then_some(addr);
        let (visible, store_by) = var.map_or((0, NO_STORE), |a| self.visible(a));
        let t = t_in.max(visible);
        // A line in motion is nobody's to use until it arrives.
        let moving = self.moving_at(t);
        match access {
            // A load of a variable whose latest write is this CPU's own store,
            // still in its store buffer, reads it from there: store-to-load
            // forwarding (Intel SDM vol. 3A, "Intra-Processor Forwarding Is
            // Allowed"; the Arm ARM's same-observer reads), no move.
            Access::Read | Access::ReadAhead | Access::ReadAheadIndex if store_by == me && t_in < visible => {
                (t_in + hit, 0)
            }
            // A walk's overlap is the CPU's ([`crate::machine`]); on the line
            // it is a load.
            Access::Read | Access::ReadAhead | Access::ReadAheadIndex => {
                let t = moving.unwrap_or(t);
                let v = self.version_at(t);
                let version = &self.versions[v];
                if version.writer == Some(me) || version.readers.iter().any(|&(r, at)| r == me && at <= t) {
                    return (t + hit, 0);
                }
                if version.writer.is_some() && version.readers.is_empty() {
                    // An intervention from the writer's cache: the line's turn.
                    let (start, end) = self.next_move(t, me, &cost);
                    let v = self.version_at(start);
                    if self.versions[v].writer == Some(me) {
                        return (start + hit, 0);
                    }
                    self.moves.insert(start, end, ());
                    self.versions[v].readers.push((me, end));
                    return (end, 1);
                }
                let end = t + cost(version.writer, me);
                self.versions[v].readers.push((me, end));
                (end, 1)
            }
            Access::Write | Access::Rmw | Access::RmwAnyOrder => {
                let store = access == Access::Write;
                // Behind a move to this CPU already under way, the access rides on it.
                let by = if store { me } else { NO_STORE };
                if let Some(end) = self.moving_to(me, t) {
                    self.set_visible(var, end + hit, by);
                    return (if store { t_in } else { end } + hit, 0);
                }
                let version = &self.versions[self.version_at(t)];
                if moving.is_none()
                    && version.writer == Some(me)
                    && version.readers.iter().all(|&(r, at)| r == me || at > t)
                {
                    self.set_visible(var, t + hit, by);
                    // A plain store retires into the store buffer without waiting.
                    return (if store { t_in } else { t } + hit, 0);
                }
                let (start, end) = self.next_move(t, me, &cost);
                self.moves.insert(start, end, ());
                let nv = self.insert_version(end, me);
                self.set_visible(var, end, by);
                let mut moves = 1;
                // A CPU spinning on the line asks for it back as soon as it loses it,
                // and has it back before the next writer.
                if let Some((spinner, _)) = self.spinner.filter(|&(sp, since)| sp != me && since <= start) {
                    let back = cost(Some(me), spinner);
                    let (s, _) = self.moves.fit(end, |_, _| back);
                    self.moves.insert(s, s + back, ());
                    self.versions[nv].readers.push((spinner, s + back));
                    moves += 1;
                }
                // A plain store retires into the store buffer: the writer goes on
                // while the line moves, and readers of the variable wait for it.
                (if store { t_in + hit } else { end }, moves)
            }
        }
    }
}

/// What an access to a line this CPU already holds costs: a load or a plain
/// store `mem` (an L1 hit; a store retires into the store buffer), an atomic
/// read-modify-write `atomic` (x86's `LOCK`ed instructions, which drain the
/// store buffer, take several times a load: the presets' `atomic_hit`). An
/// access that moves the line costs the move alone: the presets' transfer
/// figures are core-to-core timings of a line passed by atomics (most of
/// them compare-and-exchange round trips), the atomic included.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Hits {
    pub(crate) mem: u64,
    pub(crate) atomic: u64,
}

impl Hits {
    /// Returns what a hit of `access` costs.
    fn of(self, access: Access) -> u64 {
        match access {
            Access::Rmw | Access::RmwAnyOrder => self.atomic,
            _ => self.mem,
        }
    }
}

/// Every line touched so far, by address / 64 (looked up, never iterated).
#[derive(Default)]
pub(crate) struct Lines {
    map: HashMap<usize, Line, BuildHasherDefault<LineHasher>>,
}

/// Hashes a line's number with one multiplication (Fibonacci hashing), where
/// the standard library's SipHash, made to resist chosen keys, took a run's
/// time on every access: the keys are addresses the simulator chose, and the
/// map is never iterated, so the hash decides no result.
#[derive(Default)]
pub(crate) struct LineHasher(u64);

impl std::hash::Hasher for LineHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        // The product's well-mixed upper half becomes the low bits the table
        // indexes by; its middle bits the top ones it tags entries with.
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(26);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// One access to a shared variable: by CPU `cpu` at time `t`, to the
/// variable at `addr`, of kind `kind`. [`Lines::access`] takes it to the
/// variable's line.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LineAccess {
    pub(crate) cpu: u32,
    pub(crate) t: u64,
    pub(crate) addr: usize,
    pub(crate) kind: Access,
}

impl Lines {
    /// Performs `req` on the line of its variable, a move from CPU `a` to CPU
    /// `b` costing `cost(a, b)` (`a` is `None` for memory) and a hit what
    /// `hit` says; no access of any CPU comes before `floor` from now on.
    /// Returns when the access is done and how many moves it caused.
    pub(crate) fn access(
        &mut self,
        req: LineAccess,
        floor: u64,
        hit: Hits,
        cost: impl Fn(Option<u32>, u32) -> u64,
    ) -> (u64, u64) {
        self.map.entry(req.addr / 64).or_default().access(req, floor, hit, cost)
    }

    /// Makes `cpu` spin on the line holding `addr` from `since` (`None`: stop).
    pub(crate) fn set_spinner(&mut self, addr: usize, spinner: Option<(u32, u64)>) {
        self.map.entry(addr / 64).or_default().spinner = spinner;
    }
}

/// The first address of the kernel's named lines: above any address a 64-bit
/// host gives a user-space process (x86-64 and arm64 user addresses stay below
/// 2^56), so no policy variable shares a line with them.
const KLINE_BASE: usize = 1 << 60;

/// A contended kernel structure the simulator's kernel paths touch: one cache
/// line each (the lock word or counter and what shares its line).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KLine {
    /// A word of an address space's `struct mm_struct`, by slot and byte
    /// offset: `mmap_lock`'s count and owner words, `pgd`, `mm_lock_seq`,
    /// where the kernel's release puts them ([`crate::mm_layout`]), so that
    /// the words one line holds share its moves.
    Mm(u32, u16),
    /// A VMA's lock (`vma->vm_lock`, Linux v6.4 and later), by address-space
    /// slot and the VMA's first page. It is allocated apart from the VMA
    /// (`struct vma_lock`, c7f8f31c00d1), so its count and owner words share
    /// no line with the fields a fault reads (`vm_flags`, `vm_page_prot`).
    /// The series' postings did the same: their last patch ("mm: separate
    /// vma->lock from vm_area_struct", v1's 40/41, v2's 33/33, v4's 33/33)
    /// moves the lock out of `vm_area_struct`, where an earlier patch of
    /// each posting had put it beside those fields; the series as tested
    /// (H23 runs its v2) never faulted with the lock inside.
    VmaLock(u32, u64),
    /// A memory cgroup's page counter (`memcg->memory.usage`, charged in
    /// per-CPU batches), by level: 0 the tasks' own cgroup, then each
    /// ancestor's, the root's last.
    MemcgCounter(u8),
    /// A CPU's `call_single_queue` head (kernel/smp.c), by CPU: every
    /// initiator's `llist_add` of a call-function request and the CPU's own
    /// `llist_del_all` in its handler.
    CallQueue(u32),
}

impl KLine {
    /// Returns the line's address: kind, then index, each line 64 bytes apart.
    pub fn addr(self) -> usize {
        let (kind, index): (usize, u64) = match self {
            // An mm_struct's words lie within its first 4 KB (64 lines).
            KLine::Mm(mm, offset) => return KLINE_BASE + ((mm as usize & ((1 << 40) - 1)) << 12) + offset as usize,
            KLine::VmaLock(mm, page) => (1, (u64::from(mm) << 36) | (page & ((1 << 36) - 1))),
            KLine::MemcgCounter(level) => (2, level.into()),
            KLine::CallQueue(cpu) => (3, cpu.into()),
        };
        KLINE_BASE + (kind << 52) + (index as usize & ((1 << 46) - 1)) * 64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hit costs 4 cycles, an atomic's too.
    const HIT: Hits = Hits { mem: 4, atomic: 4 };

    /// One move of a line costs 100 cycles, a hit [`HIT`]; the floor stays at 0.
    fn access(line: &mut Line, cpu: u32, t: u64, var: usize, a: Access) -> u64 {
        line.access(LineAccess { cpu, t, addr: var, kind: a }, 0, HIT, |_, _| 100).0
    }

    /// Returns a line whose variables 0 and 8 CPU 0 wrote at time 0 (visible at 100).
    fn written_by_cpu0() -> Line {
        let mut line = Line::default();
        access(&mut line, 0, 0, 0, Access::Write);
        access(&mut line, 0, 0, 8, Access::Write);
        line
    }

    #[test]
    fn reads_of_a_shared_version_overlap() {
        let mut line = written_by_cpu0();
        assert_eq!(access(&mut line, 1, 1000, 0, Access::Read), 1100, "the first: CPU 0's intervention");
        assert_eq!(access(&mut line, 2, 1200, 0, Access::Read), 1300);
        assert_eq!(access(&mut line, 3, 1200, 0, Access::Read), 1300, "not behind cpu2's read");
        assert_eq!(access(&mut line, 1, 1100, 8, Access::Read), 1104, "cpu1 holds this version");
    }

    #[test]
    fn the_first_read_of_a_version_takes_the_lines_turn_and_the_later_ones_share_it() {
        // CPU 0's version: CPU 1's read fetches it from CPU 0's cache (1000 to
        // 1100). CPU 3's read asked at 1050 waits for that turn and then
        // shares the version, taking no turn of its own, so CPU 2's atomic
        // asked at 1050 is next after CPU 1's.
        let mut line = written_by_cpu0();
        assert_eq!(access(&mut line, 1, 1000, 0, Access::Read), 1100);
        assert_eq!(access(&mut line, 3, 1050, 0, Access::Read), 1200, "after CPU 1's intervention");
        assert_eq!(access(&mut line, 2, 1050, 8, Access::Rmw), 1200, "behind CPU 1's intervention only");
        // CPU 2's version: the first read of it is a turn again, after CPU 2's move.
        assert_eq!(access(&mut line, 1, 1150, 8, Access::Read), 1300);
        // A line nobody wrote comes from memory: reads of it take no turn.
        let mut fresh = Line::default();
        assert_eq!(access(&mut fresh, 1, 0, 0, Access::Read), 100);
        assert_eq!(access(&mut fresh, 2, 10, 0, Access::Rmw), 110, "not behind the read from memory");
    }

    #[test]
    fn atomics_on_one_line_queue_one_move_at_a_time() {
        let mut line = written_by_cpu0();
        let done: Vec<u64> = (1..=3).map(|cpu| access(&mut line, cpu, 1000, 8, Access::Rmw)).collect();
        assert_eq!(done, vec![1100, 1200, 1300]);
    }

    #[test]
    fn an_earlier_read_is_not_put_behind_a_later_write_the_simulator_ran_first() {
        // IPI handlers run one after another: cpu1's increment at 2000 is known
        // before cpu2's read of the other variable at 1000.
        let mut line = written_by_cpu0();
        assert_eq!(access(&mut line, 1, 2000, 8, Access::Rmw), 2100);
        assert_eq!(access(&mut line, 2, 1000, 0, Access::Read), 1100);
        // ... and cpu2's own increment afterwards follows cpu1's.
        assert_eq!(access(&mut line, 2, 1500, 8, Access::Rmw), 2200);
    }

    #[test]
    fn an_access_follows_the_latest_write_to_its_variable() {
        // A spin lock: cpu1 takes it at 0 and releases it at 5000 (a store to its
        // own line); cpu2's acquisition at 1000, run afterwards, must see the release.
        let mut line = Line::default();
        assert_eq!(access(&mut line, 1, 0, 0, Access::Rmw), 100);
        assert_eq!(access(&mut line, 1, 5000, 0, Access::Write), 5004);
        assert_eq!(access(&mut line, 2, 1000, 0, Access::Rmw), 5104);
    }

    #[test]
    fn a_spinner_takes_the_line_back_after_each_write_before_the_next_writer() {
        let mut line = written_by_cpu0();
        line.spinner = Some((0, 0));
        // cpu1 at 1000: moves 1000..1100, then back to cpu0 1100..1200.
        assert_eq!(access(&mut line, 1, 1000, 8, Access::Rmw), 1100);
        // cpu2, ready at 1000 too, gets it after cpu0: 1200..1300, cpu0 1300..1400.
        assert_eq!(access(&mut line, 2, 1000, 8, Access::Rmw), 1300);
        // The spinner sees the last value when the line is back.
        assert_eq!(access(&mut line, 0, 0, 8, Access::Read), 1404);
        // Without a spinner the two increments are back to back.
        let mut line = written_by_cpu0();
        access(&mut line, 1, 1000, 8, Access::Rmw);
        assert_eq!(access(&mut line, 2, 1000, 8, Access::Rmw), 1200);
        assert_eq!(access(&mut line, 0, 0, 8, Access::Read), 1300);
    }

    #[test]
    fn a_line_forgets_only_what_ended_before_the_floor() {
        // One increment per event, events 1000 cycles apart: the floor follows
        // them, and the line keeps the version current at the floor and what
        // came after, however long the run.
        let mut line = Line::default();
        for i in 0..200u64 {
            let req = LineAccess { cpu: (i % 2) as u32, t: i * 1000, addr: 0, kind: Access::Rmw };
            line.access(req, i * 1000, HIT, |_, _| 100);
            assert!(line.versions.len() <= 2 && line.moves.len() <= 1, "{i}: {line:?}");
        }
        assert_eq!(line.versions.last().at, 199_100);
    }

    /// Returns the moves of `line`, checking that no two overlap.
    fn serial_moves(line: &Line) -> Vec<(u64, u64)> {
        let moves: Vec<(u64, u64)> = line.moves.intervals().map(|(a, b, ())| (a, b)).collect();
        for w in moves.windows(2) {
            assert!(w[0].1 <= w[1].0, "moves {:?} and {:?} overlap", w[0], w[1]);
        }
        moves
    }

    #[test]
    fn atomics_of_any_number_of_cpus_at_once_queue_one_move_each() {
        // 64, 65, 200 and 4,096 CPUs increment one counter at the same time, in
        // one event (the floor does not move): each waits for every earlier
        // one, and the last is done one move per CPU after they asked.
        for n in [64u32, 65, 200, 4096] {
            let mut line = written_by_cpu0();
            let done: Vec<u64> = (1..=n).map(|cpu| access(&mut line, cpu, 1000, 8, Access::Rmw)).collect();
            let want: Vec<u64> = (1..=u64::from(n)).map(|k| 1000 + 100 * k).collect();
            assert_eq!(done, want, "{n} CPUs");
            assert_eq!(serial_moves(&line).len(), n as usize + 1, "{n} CPUs: cpu0's write and one move each");
            // The first increment, placed last in the simulator's order, still
            // sees every earlier one done: the value is the n-th writer's.
            assert_eq!(access(&mut line, 0, 0, 8, Access::Read), 1000 + 100 * u64::from(n) + 100);
        }
    }

    #[test]
    fn an_any_order_atomic_is_placed_at_its_own_time_not_after_a_later_write_run_first() {
        // cpu1's take of a queue at 10,000 (an IPI handler the simulator ran
        // first) is a write of the queue's head; cpu2 pushes onto the same head
        // at 1000. As an ordered atomic the push would read the take's value
        // and wait for it; pushed in any order it is done one move after 1000.
        let at = |lines: &mut Lines, cpu: u32, t: u64, kind: Access| {
            lines.access(LineAccess { cpu, t, addr: 8, kind }, 0, HIT, |_, _| 100)
        };
        let mut lines = Lines::default();
        at(&mut lines, 1, 10_000, Access::Rmw);
        assert_eq!(at(&mut lines, 2, 1000, Access::Rmw).0, 10_200);
        let mut lines = Lines::default();
        at(&mut lines, 1, 10_000, Access::Rmw);
        assert_eq!(at(&mut lines, 2, 1000, Access::RmwAnyOrder), (1100, 1));
        // It still takes the line one move at a time: a second push at 1000
        // queues behind the first.
        assert_eq!(at(&mut lines, 3, 1000, Access::RmwAnyOrder), (1200, 1));
    }

    #[test]
    fn a_write_placed_in_a_gap_never_overlaps_the_move_after_it() {
        // cpu1's increment at 10,000 is run first; cpu2's of another variable at
        // 1000 goes in the gap before it, and cpu3's of a third at 9950, where
        // only half a move fits before cpu1's, goes after it.
        let mut line = written_by_cpu0();
        assert_eq!(access(&mut line, 1, 10_000, 8, Access::Rmw), 10_100);
        assert_eq!(access(&mut line, 2, 1000, 16, Access::Rmw), 1100);
        assert_eq!(access(&mut line, 3, 9950, 24, Access::Rmw), 10_200);
        serial_moves(&line);
    }

    #[test]
    fn stores_behind_a_move_to_the_same_cpu_share_it() {
        // cpu1 writes three variables of a line cpu0 owns: one move, not three.
        let mut line = written_by_cpu0();
        let write = |line: &mut Line, addr| {
            line.access(LineAccess { cpu: 1, t: 1000, addr, kind: Access::Write }, 0, HIT, |_, _| 100)
        };
        let moves: u64 = [0, 8, 16].iter().map(|&v| write(&mut line, v).1).sum();
        assert_eq!(moves, 1);
        assert_eq!(access(&mut line, 2, 1000, 16, Access::Read), 1204, "visible once the line has arrived");
    }

    #[test]
    fn a_cpu_reads_its_own_buffered_store_at_once_and_another_cpu_waits_for_it() {
        // cpu1 stores to variable 8 of a line cpu0 owns: the store retires at
        // 1004 and is visible once the line has arrived, at 1100.
        let mut line = written_by_cpu0();
        assert_eq!(access(&mut line, 1, 1000, 8, Access::Write), 1004);
        // cpu1's load of it at 1010 reads its store buffer: an L1 hit, no move.
        let (done, moves) =
            line.access(LineAccess { cpu: 1, t: 1010, addr: 8, kind: Access::Read }, 0, HIT, |_, _| 100);
        assert_eq!((done, moves), (1014, 0));
        // Another variable of the line is not in the store buffer: the load
        // waits for the line.
        assert_eq!(access(&mut line, 1, 1010, 0, Access::Read), 1104);
        // cpu2 reads the stored value only once it is visible.
        assert_eq!(access(&mut line, 2, 1010, 8, Access::Read), 1200);
        // After a read-modify-write the CPU has waited for the line anyway.
        let mut line = written_by_cpu0();
        assert_eq!(access(&mut line, 1, 1000, 8, Access::Rmw), 1100);
        assert_eq!(access(&mut line, 1, 1100, 8, Access::Read), 1104);
    }

    #[test]
    fn an_atomic_on_a_held_line_costs_the_atomics_hit_and_one_that_moves_it_the_move_alone() {
        let hit = Hits { mem: 4, atomic: 20 };
        let at = |line: &mut Line, cpu: u32, t: u64, kind: Access| {
            line.access(LineAccess { cpu, t, addr: 8, kind }, 0, hit, |_, _| 100).0
        };
        let mut line = written_by_cpu0();
        assert_eq!(at(&mut line, 0, 1000, Access::Rmw), 1020, "CPU 0 holds the line: the atomic's latency");
        assert_eq!(at(&mut line, 0, 2000, Access::RmwAnyOrder), 2020);
        assert_eq!(at(&mut line, 0, 3000, Access::Read), 3004, "a load is an L1 hit");
        assert_eq!(at(&mut line, 0, 4000, Access::Write), 4004, "a store retires into the store buffer");
        assert_eq!(at(&mut line, 1, 5000, Access::Rmw), 5100, "a move: its figure holds the atomic");
        // A store that moves the line retires at once; an atomic behind it
        // rides on the move and runs once the line has arrived.
        assert_eq!(at(&mut line, 0, 6000, Access::Write), 6004);
        assert_eq!(at(&mut line, 0, 6010, Access::Rmw), 6120);
    }

    #[test]
    fn kernel_lines_are_distinct_and_above_user_addresses() {
        let lines = [
            KLine::Mm(0, 0),
            KLine::Mm(1, 0),
            KLine::Mm(0, 64),
            KLine::VmaLock(0, 0),
            KLine::VmaLock(1, 0),
            KLine::VmaLock(0, 1),
            KLine::MemcgCounter(0),
            KLine::MemcgCounter(1),
            KLine::CallQueue(0),
            KLine::CallQueue(1),
        ];
        for (i, a) in lines.iter().enumerate() {
            assert!(a.addr() >= KLINE_BASE && a.addr() % 64 == 0, "{a:?}");
            for b in &lines[i + 1..] {
                assert_ne!(a.addr() / 64, b.addr() / 64, "{a:?} and {b:?} share a line");
            }
        }
        // Two words of one mm_struct line share it.
        assert_eq!(KLine::Mm(1, 112).addr() / 64, KLine::Mm(1, 72).addr() / 64);
    }
}
