//! Broadcast invalidations on their way: what each TLB has still to remove,
//! and when ([`Pending`]).
//!
//! # What the architecture says
//! An arm64 `TLBI ...IS` is guaranteed complete on the other CPUs only once the
//! issuing CPU's `DSB ISH` has completed (Arm ARM, "Ordering and completion of
//! TLB maintenance instructions"); until then a CPU it has not yet reached may
//! still hold the entries it names, translate through them, and have a walk
//! refill them. AMD's `INVLPGB` is complete only once the issuer's `TLBSYNC`
//! has completed (AMD64 APM vol. 3, `INVLPGB`, `TLBSYNC`). x86 `INVLPG`,
//! `INVPCID` and a CR3 write are synchronous.
//!
//! # What is modelled
//! A broadcast invalidation reaches a CPU when the CPU's socket has processed
//! its DVM message: the end of that socket's processing in
//! [`crate::stalls`] (arrival, then the queue, then `dvm_process`). Until then
//! the CPU's TLB keeps what the invalidation removes: a lookup that hits such
//! an entry is an ordinary hit, and a walk may refill from the page table as
//! it is then (a PTE still valid refills, a cleared one does not). When the
//! invalidation reaches the CPU it removes what it names from the TLB as the
//! TLB is then, so an entry refilled in the window goes too: it was filled
//! before the invalidation was processed there, as on hardware, where the
//! receiver removes what it holds when it processes the message. An entry
//! filled after that stays. A window refill is taken from the page table as it
//! is at the refill, so it is never stale; removing it only costs a later miss.
//!
//! The issuer's completing barrier (`DSB ISH` for a `TLBI ...IS`, `TLBSYNC` for
//! `INVLPGB`; the machine treats either as completing both) completes every
//! invalidation the CPU issued: each target still owing one removes it then, in
//! the order of events, whatever the target's own clock says. That is what
//! keeps the oracle quiet for a correct policy: the kernel frees a frame only
//! after the flush's barrier, so every use in the window comes, in the order
//! of events, before the free. The barrier's wait is the machine's:
//! [`crate::machine`]'s `DSB ISH` waits until the issuer's `sync_until`, the
//! completion [`crate::interconnect`] returns, which is at or after every
//! receiver's processing plus the hop back. (A `DSB NSH` completes no
//! broadcast.)
//!
//! A local `TLBI` (arm64 without `IS`, completed by `DSB NSH`) and every x86
//! invalidation but `INVLPGB` are applied when issued: the issuing CPU
//! translates nothing between the instruction and its barrier (a policy call
//! runs whole), so a window would hold no access.
//!
//! # Events and time
//! The engine runs one operation of a CPU per event, in order of start time,
//! each operation whole (`crate::sim`). An invalidation is therefore applied on
//! a CPU at the first of: a TLB operation of that CPU (lookup, sweep, walk,
//! fill) at a time at or after the invalidation reaches it
//! ([`Pending::due`], one comparison with the CPU's earliest, on the
//! lookup's path), or the issuer's completing barrier ([`Pending::complete`]).
//! Each CPU's invalidations reach it in the order they were sent (its socket
//! processes them one at a time), so each CPU's list is sorted by time.
//!
//! # Which CPUs
//! The interconnect visits only the CPUs that may hold what an invalidation
//! removes ([`crate::holders`]): those get it in their lists. A CPU that held
//! nothing of it when it was sent but fills its TLB in the window must still
//! remove that fill when the invalidation reaches it: so every invalidation
//! not yet completed is also kept in a list of its own ([`InFlight`]), and a
//! fill while that list is not empty adds to the filling CPU's list each one
//! that has not reached it yet. Adding an invalidation to a CPU that holds
//! nothing of it changes nothing, so which CPUs the sets name changes no
//! result, as before.
//!
//! # Host cost
//! A lookup or sweep pays one comparison; a fill one more (whether anything is
//! in flight). A broadcast pays a list entry per CPU it visits and one of its
//! own, the barrier a pass over the CPUs it visited.

use crate::tlb::Inval;

/// One invalidation a CPU has still to apply.
#[derive(Clone, Copy, Debug)]
struct Queued {
    /// When it reaches the CPU.
    at: u64,
    /// The invalidation's number ([`InFlight::id`]).
    id: u64,
    /// The CPU that issued it.
    issuer: u32,
    op: Inval,
}

/// One broadcast invalidation sent and not yet completed by its issuer's
/// barrier: when it reaches each socket.
#[derive(Clone, Debug)]
pub struct InFlight {
    /// Its number, in the order invalidations were sent.
    id: u64,
    issuer: u32,
    op: Inval,
    /// When it reaches a socket in step with the others.
    common: u64,
    /// The sockets that process it at another time, and when.
    deviations: Box<[(u32, u64)]>,
}

impl InFlight {
    /// Returns when it reaches `socket`.
    fn at(&self, socket: usize) -> u64 {
        self.deviations.iter().find(|&&(s, _)| s as usize == socket).map_or(self.common, |&(_, t)| t)
    }
}

/// The broadcast invalidations each CPU has still to apply, and those each
/// CPU issued and has not completed (module documentation).
pub struct Pending {
    cores_per_socket: usize,
    /// Per CPU: what it has still to apply, by time (then by number).
    queues: Vec<Vec<Queued>>,
    /// Per CPU: the CPUs it sent invalidations to that its barrier has not
    /// completed (repeats allowed).
    targets: Vec<Vec<u32>>,
    /// Invalidations sent and not completed, in the order sent.
    in_flight: Vec<InFlight>,
    /// The next invalidation's number.
    next_id: u64,
}

/// What [`Pending::complete`] asks of a CPU.
#[derive(Clone, Copy, Debug)]
pub enum Visit {
    /// Apply this invalidation now.
    Apply(Inval),
    /// The CPU's earliest time is now this (`u64::MAX`: nothing pending).
    Earliest(u64),
}

/// Invalidations in flight beyond which [`Pending::send`] forgets those that
/// reach every socket by the floor, and compacts the issuers' lists.
const TRIM_AT: usize = 1024;

impl Pending {
    /// Returns nothing pending for `ncpus` CPUs, `cores_per_socket` to a socket.
    pub fn new(ncpus: usize, cores_per_socket: usize) -> Self {
        Pending {
            cores_per_socket: cores_per_socket.max(1),
            queues: vec![Vec::new(); ncpus],
            targets: vec![Vec::new(); ncpus],
            in_flight: Vec::new(),
            next_id: 0,
        }
    }

    /// Starts an invalidation `op` from `issuer` that reaches a socket at
    /// `common`, or at the time `deviations` gives for it; returns its number.
    /// `floor`: a time no later operation of any CPU comes before.
    pub fn send(&mut self, issuer: usize, op: Inval, common: u64, deviations: &[(u32, u64)], floor: u64) -> u64 {
        if self.in_flight.len() >= TRIM_AT {
            self.trim(floor);
        }
        let id = self.next_id;
        self.next_id += 1;
        self.in_flight.push(InFlight { id, issuer: issuer as u32, op, common, deviations: deviations.into() });
        id
    }

    /// Returns when the invalidation `id` (the last one sent) reaches `cpu`.
    pub fn reaches(&self, cpu: usize) -> u64 {
        let last = self.in_flight.last().expect("an invalidation was sent");
        last.at(cpu / self.cores_per_socket)
    }

    /// Adds the last invalidation sent to `cpu`'s list, to be applied at `at`;
    /// returns the CPU's earliest time now and the list's length.
    pub fn queue_last(&mut self, cpu: usize, at: u64) -> (u64, usize) {
        let last = self.in_flight.last().expect("an invalidation was sent");
        let q = Queued { at, id: last.id, issuer: last.issuer, op: last.op };
        (self.insert(cpu, q), self.queues[cpu].len())
    }

    /// Inserts `q` into `cpu`'s list, after every entry not later; returns the
    /// list's earliest time.
    fn insert(&mut self, cpu: usize, q: Queued) -> u64 {
        let list = &mut self.queues[cpu];
        // Usually the last: a socket's messages are processed in order.
        let i = list.iter().rposition(|e| e.at <= q.at).map_or(0, |i| i + 1);
        list.insert(i, q);
        let t = &mut self.targets[q.issuer as usize];
        if t.last() != Some(&(cpu as u32)) {
            t.push(cpu as u32);
        }
        list[0].at
    }

    /// Returns whether any invalidation is in flight (a fill must then call
    /// [`Pending::filling`]).
    #[inline(always)]
    pub fn any_in_flight(&self) -> bool {
        !self.in_flight.is_empty()
    }

    /// Adds to `cpu`'s list, for a fill at `now`, every invalidation in flight
    /// that reaches it later and is not in its list; returns the list's
    /// earliest time (`u64::MAX` if empty).
    #[inline(never)]
    pub fn filling(&mut self, cpu: usize, now: u64) -> u64 {
        let socket = cpu / self.cores_per_socket;
        for k in 0..self.in_flight.len() {
            let f = &self.in_flight[k];
            let at = f.at(socket);
            if at <= now || self.queues[cpu].iter().any(|q| q.id == f.id) {
                continue;
            }
            let q = Queued { at, id: f.id, issuer: f.issuer, op: f.op };
            self.insert(cpu, q);
        }
        self.earliest(cpu)
    }

    /// Returns `cpu`'s earliest time (`u64::MAX` if nothing is pending).
    #[inline]
    fn earliest(&self, cpu: usize) -> u64 {
        self.queues[cpu].first().map_or(u64::MAX, |q| q.at)
    }

    /// Calls `apply` with each invalidation that has reached `cpu` by `now`, in
    /// order, and removes them; returns the CPU's earliest time after.
    pub fn due(&mut self, cpu: usize, now: u64, mut apply: impl FnMut(Inval)) -> u64 {
        let list = &mut self.queues[cpu];
        let n = list.iter().take_while(|q| q.at <= now).count();
        for q in list.drain(..n) {
            apply(q.op);
        }
        self.earliest(cpu)
    }

    /// Completes every invalidation `issuer` sent: calls `visit` for each CPU
    /// that has one still to apply with each such invalidation, in order
    /// ([`Visit::Apply`]), then with the CPU's earliest time after
    /// ([`Visit::Earliest`]); forgets them.
    pub fn complete(&mut self, issuer: usize, mut visit: impl FnMut(usize, Visit)) {
        let me = issuer as u32;
        // Those that reached no CPU's list are in flight all the same.
        if !self.in_flight.is_empty() {
            self.in_flight.retain(|f| f.issuer != me);
        }
        if self.targets[issuer].is_empty() {
            return;
        }
        let mut targets = std::mem::take(&mut self.targets[issuer]);
        targets.sort_unstable();
        targets.dedup();
        for &cpu in &targets {
            let cpu = cpu as usize;
            let list = &mut self.queues[cpu];
            if !list.iter().any(|q| q.issuer == me) {
                continue;
            }
            list.retain(|q| {
                if q.issuer == me {
                    visit(cpu, Visit::Apply(q.op));
                }
                q.issuer != me
            });
            visit(cpu, Visit::Earliest(self.earliest(cpu)));
        }
        targets.clear();
        self.targets[issuer] = targets;
    }

    /// Forgets the invalidations in flight that reach every socket by `floor`,
    /// a time no later operation of any CPU comes before, and compacts the
    /// issuers' lists of targets: the state a policy that never completes its
    /// invalidations leaves stays bounded. Changes no result: an invalidation
    /// forgotten here could be added to no later fill's list.
    fn trim(&mut self, floor: u64) {
        self.in_flight.retain(|f| f.common > floor || f.deviations.iter().any(|&(_, t)| t > floor));
        for i in 0..self.targets.len() {
            if self.targets[i].len() > TRIM_AT {
                let mut t = std::mem::take(&mut self.targets[i]);
                t.sort_unstable();
                t.dedup();
                t.retain(|&c| self.queues[c as usize].iter().any(|q| q.issuer == i as u32));
                self.targets[i] = t;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::machine::{CpuHw, CpuState, Machine};
    use crate::preset::{self, Preset};
    use crate::tlb::{Tlb, TlbEntry};
    use tlbkit_policy::{Asid, Barrier, Domain, Hw, Scope, Tlbi, VirtAddr};

    const VA: u64 = 0x4000_1000;
    const ASID: u16 = 1;

    /// `n` idle CPUs of `p`, each of CPUs `1..n` holding the entry of `VA`
    /// under `ASID`, filled at time 0.
    fn machine(p: Preset, n: usize) -> Machine {
        let g = p.tlb;
        let cpus = (0..n).map(|_| CpuState::new(Tlb::new(g.l1d_entries, g.l2_entries, g.l2_ways, g.pwc_entries)));
        let mut m = Machine::new(p.costs, cpus.collect(), p.cores_per_socket);
        for cpu in 1..n {
            m.fill(cpu, entry(), false, 0);
        }
        m
    }

    fn entry() -> TlbEntry {
        TlbEntry { tag: VA >> 12, pfn: 7, asid: ASID, valid: true, mm_uid: 1, ..Default::default() }
    }

    /// Returns whether `cpu`, translating at `t`, hits on `VA`.
    fn hits(m: &mut Machine, cpu: usize, t: u64) -> bool {
        m.catch_up(cpu, t);
        m.cpus[cpu].tlb.lookup_entry(VA, ASID).is_some()
    }

    /// CPU 0 issues `TLBI VAE1IS` (or `INVLPGB`) of `VA` at 0; returns its
    /// clock after.
    fn broadcast(m: &mut Machine) -> u64 {
        let hw = CpuHw::new(m, 0, 0);
        hw.tlbi(Tlbi::Va { asid: Asid::new(ASID.into(), 16).unwrap(), va: VirtAddr(VA) }, Scope::Broadcast);
        hw.now()
    }

    /// CPU 0 issues `barrier` at `t`.
    fn barrier(m: &mut Machine, t: u64, barrier: Barrier) {
        CpuHw::new(m, 0, t).barrier(barrier);
    }

    #[test]
    fn a_target_hits_until_a_broadcast_tlbi_reaches_it_and_misses_after_the_issuers_dsb() {
        let mut m = machine(preset::altra(), 3);
        let issued = broadcast(&mut m);
        let reach = m.cpus[1].pending_at;
        assert!(reach > issued, "the message reaches CPU 1 after it is issued ({reach} <= {issued})");
        assert!(
            hits(&mut m, 1, issued),
            "before the invalidation reaches it, CPU 1 still translates through its entry"
        );
        assert!(hits(&mut m, 1, reach - 1));
        // CPU 2 is not helped by CPU 1's hit: it misses once the message has reached it.
        assert!(!hits(&mut m, 2, reach), "at the time the message reaches it, CPU 2 has removed the entry");
        // The DSB completes it on CPU 1 too, whatever CPU 1's clock says.
        barrier(&mut m, issued, Barrier::Dsb(Domain::InnerShareable));
        assert!(!hits(&mut m, 1, issued), "after the issuer's DSB ISH no target holds the entry");
        assert_eq!(m.cpus[1].pending_at, u64::MAX);
    }

    #[test]
    fn a_dsb_nsh_does_not_complete_a_broadcast() {
        let mut m = machine(preset::altra(), 2);
        let issued = broadcast(&mut m);
        barrier(&mut m, issued, Barrier::Dsb(Domain::NonShareable));
        assert!(hits(&mut m, 1, issued), "DSB NSH waits for no other CPU");
    }

    #[test]
    fn an_invlpgb_is_complete_only_at_the_issuers_tlbsync() {
        let p = preset::milan();
        assert!(p.has_broadcast_tlbi(), "milan has INVLPGB");
        let mut m = machine(p, 2);
        let issued = broadcast(&mut m);
        assert!(hits(&mut m, 1, issued), "INVLPGB has not reached CPU 1 yet");
        barrier(&mut m, issued, Barrier::TlbSync);
        assert!(!hits(&mut m, 1, issued), "after TLBSYNC the entry is gone");
    }

    #[test]
    fn a_walk_in_the_window_refills_and_loses_the_refill_when_the_invalidation_arrives() {
        // CPU 2 holds nothing when the TLBI is sent (the interconnect does not
        // visit it), then refills in the window; CPU 1 refills after the
        // invalidation reached it, which keeps that entry.
        let mut m = machine(preset::altra(), 3);
        m.cpus[2].tlb.invalidate(crate::tlb::Inval::All);
        let issued = broadcast(&mut m);
        let reach = m.cpus[1].pending_at;
        m.fill(2, entry(), false, issued);
        assert!(hits(&mut m, 2, reach - 1), "the window's refill is used");
        assert!(!hits(&mut m, 2, reach), "the invalidation removes what was filled before it arrived");
        assert!(!hits(&mut m, 1, reach));
        m.fill(1, entry(), false, reach);
        assert!(hits(&mut m, 1, reach + 1), "a fill after the invalidation arrived stays");
        barrier(&mut m, issued, Barrier::Dsb(Domain::InnerShareable));
        assert!(hits(&mut m, 1, reach + 1), "the DSB removes nothing that arrived-then-filled");
    }

    #[test]
    fn an_invalidation_that_reached_no_list_is_forgotten_at_its_issuers_barrier() {
        // Regression: the barrier of an issuer whose invalidation no CPU's
        // list held (no TLB held the page) left it in flight, so a later fill
        // anywhere took it into its list and lost the fresh entry.
        let mut m = machine(preset::altra(), 2);
        m.cpus[1].tlb.invalidate(crate::tlb::Inval::All);
        let issued = broadcast(&mut m);
        barrier(&mut m, issued, Barrier::Dsb(Domain::InnerShareable));
        m.fill(1, entry(), false, issued);
        assert!(hits(&mut m, 1, u64::MAX - 1), "a fill after the barrier stays");
    }

    #[test]
    fn an_x86_invlpg_is_synchronous() {
        // A CPU's own INVLPG (a local invalidation) removes the entry at once.
        let mut m = machine(preset::skylake(), 2);
        let hw = CpuHw::new(&mut m, 1, 0);
        hw.tlbi(Tlbi::Va { asid: Asid::new(ASID.into(), 12).unwrap(), va: VirtAddr(VA) }, Scope::Local);
        let t = hw.now();
        assert!(!hits(&mut m, 1, 0), "no barrier is needed: the entry is gone when the INVLPG is issued");
        assert!(!hits(&mut m, 1, t));
        assert_eq!(m.cpus[1].pending_at, u64::MAX, "nothing is pending");
    }
}
