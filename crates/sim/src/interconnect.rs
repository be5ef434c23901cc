//! The limits on broadcast invalidations in flight: how many a requester may
//! have outstanding, how many the DVM nodes hold at once, the nodes' own time
//! per message, and the nodes' collection of one another's completions.
//!
//! # What is modelled
//! A broadcast TLBI (arm64 `TLBI ...IS`, AMD `INVLPGB`) is a transaction of its
//! requester (a core, or a cluster whose cores share one port to the
//! interconnect: `dvm_issuer_cores` of them). It holds one of the requester's
//! `dvm_issuer_outstanding` slots from the moment it is issued until its
//! completion comes back, so a CPU whose requester has them all in use waits,
//! in the `TLBI` itself, for the earliest to come back. (Arm's CCN-502 TRM: "An
//! RN-F can issue only one outstanding DVMOp(Sync)", and the interconnect sends
//! at most four outstanding DVM transactions to an RN-F.)
//!
//! The requester sends it to a DVM node (Arm CMN's DN, CCN's MN; on AMD the
//! data fabric), which forwards it as snoops to every receiver and collects
//! their responses into one completion for the requester (CCN-502 TRM, "DVM
//! messages"). A node sends one message at a time, each for `dvm_node_process`
//! cycles, and tracks at most `dvm_node_outstanding` messages from dispatch to
//! completion (CMN-600's DN counts "request tracker full" and "retried"
//! requests among its PMU events), so a message waits at the node while the
//! node is busy or its tracker is full. Every message reaches every node,
//! since every CPU must see it, so the nodes see one stream of messages; the
//! model keeps one queue and one tracker that stand for all of them, as
//! `crate::stalls` keeps one queue for the sockets in step.
//!
//! The way on from the node to the receivers and back is `crate::stalls`'s:
//! one queue per socket, `dvm_hop` each way, `dvm_cross_socket` more across
//! sockets. With more than one socket (one node each), the issuer's node then
//! takes in the completion of every other node, one at a time, each for
//! `dvm_node_process`: the issuer's `DSB ISH` or `TLBSYNC` completes that much
//! later on a larger machine.
//!
//! # What it costs uncontended
//! Nothing more on one socket: a broadcast that finds a free slot of its
//! requester, an idle node and a free tracker entry is dispatched when it is
//! issued, as before this model. The node's latency is part of the `dvm_hop`
//! figures, which were derived from whole TLBI + DSB round trips (the node
//! time is an occupancy, not an extra latency). On `s` sockets a broadcast
//! completes `(s - 1) * dvm_node_process` later than before.
//!
//! # What is not modelled, and why
//! - A node sends one snoop per receiver (two flits each in CHI); the model
//!   takes the whole fan-out as the node's one `dvm_node_process`, since no
//!   public figure separates a node's per-target time from its per-message time.
//! - The nodes of a multi-socket machine are taken to be in step: one queue
//!   and one tracker stand for all, although a node gets its own socket's
//!   messages sooner (by `dvm_cross_socket`) than the others'. Keeping one per
//!   node would cost the host a pass over the nodes per message.
//! - A `DVMOp(Sync)` (the `DSB ISH` itself) takes no slot or tracker entry of
//!   its own: the issuing CPU waits in it anyway, and the model charges its
//!   cost as `dsb`.
//! - Messages are placed in the queues in the order the simulator runs the
//!   policy calls that send them, as in `crate::stalls`.
//!
//! # Host cost
//! A message costs a scan of its requester's slots and of the tracker (a few
//! entries each), and no pass over the CPUs or the sockets; the state is one
//! small array per requester.

use crate::preset::Costs;

/// What the interconnect's limits do to one broadcast.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Admitted {
    /// When the issuing CPU could put it into the interconnect: when one of its
    /// requester's slots was free (the CPU waits in its `TLBI` until then).
    pub issued: u64,
    /// When the DVM nodes sent it on to the receivers.
    pub dispatched: u64,
}

/// The requesters' slots and the DVM nodes' queue and tracker.
pub struct Interconnect {
    /// Cores to a requester (at least 1).
    issuer_cores: usize,
    /// Slots a requester has (0: no limit).
    per_issuer: usize,
    /// Per requester, `per_issuer` entries: when each slot is next free.
    slots: Vec<u64>,
    /// The nodes' tracker: when each entry is next free (empty: no limit).
    tracker: Vec<u64>,
    /// When the nodes are free to send the next message.
    node_free: u64,
    /// Cycles a node spends on one message, or on one other node's completion.
    node_process: u64,
    /// DVM nodes: one per socket with CPUs.
    nodes: usize,
}

impl Interconnect {
    /// Returns idle requesters and nodes for `ncpus` CPUs, `cores_per_socket`
    /// to a socket (and a node), with the limits of `c`.
    pub fn new(c: &Costs, ncpus: usize, cores_per_socket: usize) -> Self {
        let issuer_cores = (c.dvm.dvm_issuer_cores as usize).max(1);
        let per_issuer = c.dvm.dvm_issuer_outstanding as usize;
        let requesters = ncpus.div_ceil(issuer_cores).max(1);
        Interconnect {
            issuer_cores,
            per_issuer,
            slots: vec![0; requesters * per_issuer],
            tracker: vec![0; c.dvm.dvm_node_outstanding as usize],
            node_free: 0,
            node_process: c.dvm.dvm_node_process,
            nodes: ncpus.div_ceil(cores_per_socket.max(1)).max(1),
        }
    }

    /// Returns the index of the earliest free of `entries` (none if empty).
    #[inline]
    fn earliest(entries: &[u64]) -> Option<usize> {
        (0..entries.len()).min_by_key(|&i| entries[i])
    }

    /// Returns the slots of `cpu`'s requester.
    #[inline]
    fn slots_of(&mut self, cpu: usize) -> &mut [u64] {
        let r = cpu / self.issuer_cores;
        &mut self.slots[r * self.per_issuer..(r + 1) * self.per_issuer]
    }

    /// Sends one broadcast from `cpu`, which reaches its `TLBI` at `t` and
    /// takes `issue` cycles to put it into the interconnect; `deliver` carries
    /// it from the nodes to the receivers, given when the nodes dispatch it, and
    /// returns when the last receiver's acknowledgement is back
    /// (`crate::stalls::Stalls::broadcast`). Returns what the limits did and
    /// when the broadcast completes for its issuer: every node's completion
    /// collected.
    pub fn broadcast(&mut self, cpu: usize, t: u64, issue: u64, deliver: impl FnOnce(u64) -> u64) -> (Admitted, u64) {
        // Wait for a slot of the requester.
        let slot = Self::earliest(self.slots_of(cpu));
        let issued = slot.map_or(t, |i| t.max(self.slots_of(cpu)[i]));
        // Then for the nodes: idle, and an entry of the tracker free.
        let entry = Self::earliest(&self.tracker);
        let mut dispatched = (issued + issue).max(self.node_free);
        if let Some(e) = entry {
            dispatched = dispatched.max(self.tracker[e]);
        }
        self.node_free = dispatched + self.node_process;
        let acked = deliver(dispatched);
        // The issuer's node takes in the other nodes' completions one at a time.
        let done = acked + (self.nodes as u64 - 1) * self.node_process;
        if let Some(i) = slot {
            self.slots_of(cpu)[i] = done;
        }
        if let Some(e) = entry {
            self.tracker[e] = done;
        }
        (Admitted { issued, dispatched }, done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preset;

    /// Costs with the given limits; every message takes 1000 cycles to be
    /// acknowledged once dispatched.
    fn costs(issuer_cores: u64, per_issuer: u64, tracker: u64, node_process: u64) -> Costs {
        let mut c = preset::named("altra").costs;
        c.dvm.dvm_issuer_cores = issuer_cores;
        c.dvm.dvm_issuer_outstanding = per_issuer;
        c.dvm.dvm_node_outstanding = tracker;
        c.dvm.dvm_node_process = node_process;
        c
    }

    fn send(ic: &mut Interconnect, cpu: usize, t: u64) -> (Admitted, u64) {
        ic.broadcast(cpu, t, 10, |d| d + 1000)
    }

    #[test]
    fn an_idle_interconnect_dispatches_a_broadcast_when_it_is_issued() {
        let mut ic = Interconnect::new(&costs(1, 4, 4, 20), 8, 8);
        assert_eq!(send(&mut ic, 3, 500), (Admitted { issued: 500, dispatched: 510 }, 1510));
    }

    #[test]
    fn a_requester_with_every_slot_in_use_waits_for_the_earliest() {
        let mut ic = Interconnect::new(&costs(1, 2, 0, 0), 4, 4);
        assert_eq!(send(&mut ic, 0, 0).1, 1010);
        assert_eq!(send(&mut ic, 0, 100).1, 1110);
        let (third, _) = send(&mut ic, 0, 200);
        assert_eq!(third.issued, 1010, "the third waits for the first to complete");
        // Another core's requester is not held up.
        assert_eq!(send(&mut ic, 1, 200).0.issued, 200);
    }

    #[test]
    fn the_cores_of_a_cluster_share_their_requesters_slots() {
        let mut ic = Interconnect::new(&costs(2, 1, 0, 0), 4, 4);
        send(&mut ic, 0, 0);
        assert_eq!(send(&mut ic, 1, 0).0.issued, 1010, "cpu1 shares cpu0's requester");
        assert_eq!(send(&mut ic, 2, 0).0.issued, 0, "cpu2 has one of its own");
    }

    #[test]
    fn the_nodes_send_one_message_at_a_time_and_track_a_few() {
        let mut ic = Interconnect::new(&costs(1, 0, 2, 50), 8, 8);
        let d: Vec<u64> = (0..4).map(|cpu| send(&mut ic, cpu, 0).0.dispatched).collect();
        // 10 and 60 (one after the other), then the tracker is full until 1010.
        assert_eq!(d, vec![10, 60, 1010, 1060]);
    }

    #[test]
    fn each_other_node_adds_its_completion_at_the_issuers_node() {
        let one = send(&mut Interconnect::new(&costs(1, 4, 4, 20), 8, 8), 0, 0).1;
        let four = send(&mut Interconnect::new(&costs(1, 4, 4, 20), 32, 8), 0, 0).1;
        assert_eq!(four - one, 3 * 20);
    }

    #[test]
    fn no_limits_change_nothing() {
        let mut ic = Interconnect::new(&costs(1, 0, 0, 0), 64, 8);
        for cpu in 0..64 {
            assert_eq!(send(&mut ic, cpu, 7), (Admitted { issued: 7, dispatched: 17 }, 1017));
        }
    }
}
