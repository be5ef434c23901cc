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
//! filled after that stays. (Arrival and processing are one instant here: the
//! end of the socket's `dvm_process`.) Why this rule: it is what a receiver
//! does, and it needs no fill times, since every TLB operation of a CPU
//! applies first what has reached it by then. A window refill is taken from
//! the page table as it is at the refill, so it is never stale; removing it
//! only costs a later miss.
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
//! fill) at a time at or after the invalidation reaches it ([`Pending::due`]),
//! or the issuer's completing barrier ([`Pending::complete`]). Each CPU's
//! invalidations reach it in the order they were sent (its socket processes
//! them one at a time), and are applied in that order.
//!
//! Every real policy issues its completing barrier in the same policy call as
//! its TLBIs, and nothing else runs inside a policy call, so for them the
//! window is seen only where the simulator lets the hardware act inside a
//! kernel operation: between two page-table accesses of the arm64 contpte
//! code (`sim/ptemem.rs`), which reclaim's deferred flushes leave open until
//! their held `DSB ISH` (`sim/reclaim.rs`), while another CPU runs the
//! address space. Their results are otherwise what applying every broadcast
//! at once gave (no digest of the strict matrix or of the claims moved with
//! this model). A policy that leaves its barrier for a later call opens the
//! window to every other CPU's operations.
//!
//! # Which CPUs
//! The invalidations in flight are one list for the machine, each with the
//! times it reaches each socket and the CPUs that applied it when it reached
//! them. The issuer's barrier visits the CPUs that may hold what each removes
//! ([`crate::holders`]), as the interconnect did when invalidations were
//! applied at once, and each that has not applied it applies it. A CPU that
//! held nothing of it when it was sent but refilled in the window is among
//! them, since a fill puts a CPU in the sets; a CPU that refilled after the
//! invalidation reached it had applied it first (every fill comes after
//! [`Pending::due`]), and is passed over. So which CPUs the sets name
//! changes no result, as before.
//!
//! # Host cost
//! Nothing is in flight between two policy calls of the real policies, so a
//! lookup, a sweep or a fill pays one comparison with a time of the machine
//! (`u64::MAX` then), and a broadcast one list entry and, at the barrier, the
//! visit of the TLBs that may hold what it removes, which is what applying it
//! at once cost. A CPU translating while something is in flight scans the
//! list. A policy that never completes its invalidations leaves them in
//! flight: once `TRIM_AT` are, a broadcast completes those that reached
//! every socket by the start of the event running (every CPU would apply them
//! at its next operation anyway). The next trim waits until twice as many as
//! remained are in flight, so a burst of invalidations none of which has
//! reached its sockets yet (a range of 1,024 pages sent as one message per
//! page) costs each send a constant, not a scan of the burst.

use crate::tlb::Inval;

/// One broadcast invalidation sent and not yet completed by its issuer's
/// barrier: when it reaches each socket, and the CPUs that applied it already.
#[derive(Clone, Debug)]
struct InFlight {
    issuer: u32,
    op: Inval,
    /// When it reaches a socket in step with the others.
    common: u64,
    /// The sockets that process it at another time, and when.
    deviations: Box<[(u32, u64)]>,
    /// The CPUs that applied it when it reached them.
    applied: Vec<u32>,
}

impl InFlight {
    /// Returns when it reaches `socket`.
    #[inline]
    fn at(&self, socket: usize) -> u64 {
        self.deviations.iter().find(|&&(s, _)| s as usize == socket).map_or(self.common, |&(_, t)| t)
    }

    /// Returns when it reaches its last socket.
    fn last(&self) -> u64 {
        self.deviations.iter().fold(self.common, |t, &(_, d)| t.max(d))
    }

    /// Returns when it reaches its first socket.
    fn first(&self) -> u64 {
        self.deviations.iter().fold(self.common, |t, &(_, d)| t.min(d))
    }
}

/// The broadcast invalidations sent and not yet completed (module
/// documentation).
pub struct Pending {
    cores_per_socket: usize,
    /// In the order sent.
    in_flight: Vec<InFlight>,
    /// When the first of them reaches its first socket (`u64::MAX`: none).
    earliest: u64,
    /// How many in flight make [`Pending::send`] ask for a trim: `TRIM_AT`, or
    /// twice what the last trim left.
    trim_at: usize,
}

/// Invalidations in flight beyond which [`Pending::send`] asks for the
/// completion of those that reached every socket by the floor.
const TRIM_AT: usize = 64;

impl Pending {
    /// Returns nothing in flight, for CPUs `cores_per_socket` to a socket.
    pub fn new(cores_per_socket: usize) -> Self {
        Pending {
            cores_per_socket: cores_per_socket.max(1),
            in_flight: Vec::new(),
            earliest: u64::MAX,
            trim_at: TRIM_AT,
        }
    }

    /// Sends an invalidation `op` from `issuer` that reaches a socket at
    /// `common`, or at the time `deviations` gives for it. Returns whether so
    /// many are in flight that those reaching every socket by the floor
    /// should be completed ([`Pending::complete_reached`]).
    pub fn send(&mut self, issuer: usize, op: Inval, common: u64, deviations: &[(u32, u64)]) -> bool {
        let f = InFlight { issuer: issuer as u32, op, common, deviations: deviations.into(), applied: Vec::new() };
        self.earliest = self.earliest.min(f.first());
        self.in_flight.push(f);
        self.in_flight.len() >= self.trim_at
    }

    /// Returns a time before which nothing in flight reaches any CPU
    /// (`u64::MAX`: nothing is in flight): a CPU translating earlier has
    /// nothing to apply.
    #[inline(always)]
    pub fn earliest(&self) -> u64 {
        self.earliest
    }

    /// Calls `apply` with each invalidation that has reached `cpu` by `now`
    /// and that it has not applied, in the order they reach it, and notes
    /// that it applied them.
    pub fn due(&mut self, cpu: usize, now: u64, mut apply: impl FnMut(Inval)) {
        let socket = cpu / self.cores_per_socket;
        for f in &mut self.in_flight {
            if f.at(socket) <= now && !f.applied.contains(&(cpu as u32)) {
                apply(f.op);
                f.applied.push(cpu as u32);
            }
        }
    }

    /// Completes every invalidation `issuer` sent: calls `complete` with each,
    /// in the order sent, and the CPUs that applied it already (each other
    /// CPU that may hold what it removes must apply it now); forgets them.
    pub fn complete(&mut self, issuer: usize, complete: impl FnMut(Inval, &[u32])) {
        let me = issuer as u32;
        self.complete_where(|f| f.issuer == me, complete);
    }

    /// Completes, as [`Pending::complete`] does, every invalidation that
    /// reached every socket by `floor`, a time no later operation of any CPU
    /// comes before (each CPU would apply it at its next operation anyway):
    /// what a policy that never completes its invalidations leaves in flight
    /// stays bounded.
    pub fn complete_reached(&mut self, floor: u64, complete: impl FnMut(Inval, &[u32])) {
        self.complete_where(|f| f.last() <= floor, complete);
    }

    fn complete_where(&mut self, done: impl Fn(&InFlight) -> bool, mut complete: impl FnMut(Inval, &[u32])) {
        if self.in_flight.is_empty() {
            return;
        }
        self.in_flight.retain(|f| {
            let d = done(f);
            if d {
                complete(f.op, &f.applied);
            }
            !d
        });
        self.earliest = self.in_flight.iter().map(InFlight::first).min().unwrap_or(u64::MAX);
        self.trim_at = (2 * self.in_flight.len()).max(TRIM_AT);
    }

    /// Returns when the first invalidation `cpu` has not applied reaches it
    /// (`u64::MAX`: none).
    #[cfg(test)]
    pub fn next_for(&self, cpu: usize) -> u64 {
        let socket = cpu / self.cores_per_socket;
        self.in_flight
            .iter()
            .filter(|f| !f.applied.contains(&(cpu as u32)))
            .map(|f| f.at(socket))
            .min()
            .unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use crate::machine::{CpuHw, Machine};
    use crate::preset::{self, Preset};
    use crate::tlb::{Tlb, TlbEntry};
    use tlbkit_policy::{Asid, Barrier, Domain, Hw, Scope, Tlbi, VirtAddr};

    const VA: u64 = 0x4000_1000;
    const ASID: u16 = 1;

    /// `n` idle CPUs of `p`, each of CPUs `1..n` holding the entry of `VA`
    /// under `ASID`, filled at time 0.
    fn machine(p: Preset, n: usize) -> Machine {
        let g = p.tlb;
        let cpus = (0..n).map(|_| Tlb::new(g.l1d_entries, g.l2_entries, g.l2_ways, g.pwc_entries));
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
        m.tlb(cpu).lookup_entry(VA, ASID).is_some()
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
        let mut m = machine(preset::named("altra"), 3);
        let issued = broadcast(&mut m);
        let reach = m.pending_for(1);
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
        assert_eq!(m.pending_for(1), u64::MAX);
    }

    #[test]
    fn a_dsb_nsh_does_not_complete_a_broadcast() {
        let mut m = machine(preset::named("altra"), 2);
        let issued = broadcast(&mut m);
        barrier(&mut m, issued, Barrier::Dsb(Domain::NonShareable));
        assert!(hits(&mut m, 1, issued), "DSB NSH waits for no other CPU");
    }

    #[test]
    fn an_invlpgb_is_complete_only_at_the_issuers_tlbsync() {
        let p = preset::named("milan");
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
        let mut m = machine(preset::named("altra"), 3);
        m.tlb(2).invalidate(crate::tlb::Inval::All);
        let issued = broadcast(&mut m);
        let reach = m.pending_for(1);
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
    fn a_barrier_forgets_what_no_tlb_held_and_a_later_fill_stays() {
        // Regression: a barrier that completed only what some TLB held left
        // an invalidation no TLB held in flight, so a later fill lost its
        // fresh entry when the invalidation came due.
        let mut m = machine(preset::named("altra"), 2);
        m.tlb(1).invalidate(crate::tlb::Inval::All);
        let issued = broadcast(&mut m);
        barrier(&mut m, issued, Barrier::Dsb(Domain::InnerShareable));
        m.fill(1, entry(), false, issued);
        assert!(hits(&mut m, 1, u64::MAX - 1), "a fill after the barrier stays");
    }

    #[test]
    fn an_x86_invlpg_is_synchronous() {
        // A CPU's own INVLPG (a local invalidation) removes the entry at once.
        let mut m = machine(preset::named("skylake"), 2);
        let hw = CpuHw::new(&mut m, 1, 0);
        hw.tlbi(Tlbi::Va { asid: Asid::new(ASID.into(), 12).unwrap(), va: VirtAddr(VA) }, Scope::Local);
        let t = hw.now();
        assert!(!hits(&mut m, 1, 0), "no barrier is needed: the entry is gone when the INVLPG is issued");
        assert!(!hits(&mut m, 1, t));
        assert_eq!(m.pending_for(1), u64::MAX, "nothing is pending");
    }
}
