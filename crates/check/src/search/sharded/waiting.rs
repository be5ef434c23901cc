//! A worker's paths while they wait, kept small.
//!
//! A sharded worker holds a parked path for each claim it has sent, the
//! admitted ones until it takes them up, and the subtrees it put back to
//! take those up first (`Local::put_back`): on `arm64-linux`'s standard
//! bounds one worker held some 5,800 subtrees and 1,300 parked paths at
//! once. A subtree keeps a node of some 150 bytes for each choice of its
//! path, and above its root a replay reads only the last scheduling
//! choice's (its choices there are forced, and nothing above the root is
//! explored again; a parked path's root is the whole path). So a waiting
//! path keeps its choices, that node and the nodes below its root, and gets
//! the others back, empty, when a worker takes it up: a parked path's
//! nodes are made then, not when it is parked (most claims are admitted;
//! those answered "seen" never make them), and a subtree put back is kept
//! small once newer ones have been put back above it.

use crate::search::dfs::Node;
use crate::search::parallel::Subtree;
use crate::search::{Choice, ChoiceKind};

/// The choices a subtree's vectors have room for past its own when it is
/// taken up, so that exploring it moves none of them.
const ROOM: usize = 32;

/// A subtree as it waits ([`Waiting::resume`] gives it back).
pub(super) struct Waiting {
    stack: Vec<Choice>,
    frozen: usize,
    ends: Vec<u32>,
    /// How many nodes the subtree had.
    nodes: usize,
    /// The last scheduling choice above the root, and its node.
    above: Option<(usize, Node)>,
    /// The nodes from the root down.
    below: Vec<Node>,
}

impl Waiting {
    /// The parked path that made `choices` with `nodes`: a subtree whose
    /// root is the whole path.
    pub(super) fn parked(choices: &[Choice], nodes: &[Node]) -> Waiting {
        debug_assert_eq!(nodes.len(), choices.len(), "a parked path's choices and nodes disagree");
        // The choices with room to grow (most parked paths are taken up).
        let mut stack = Vec::with_capacity(choices.len() + ROOM);
        stack.extend_from_slice(choices);
        let mut ends = Vec::with_capacity(choices.len() + ROOM);
        ends.extend(choices.iter().map(|c| c.taken + 1));
        Waiting {
            stack,
            frozen: choices.len(),
            ends,
            nodes: nodes.len(),
            above: last_sched(choices).and_then(|i| nodes.get(i).map(|n| (i, n.clone()))),
            below: Vec::new(),
        }
    }

    /// `t`, put down to wait: its choices and ends without the room a live
    /// path's buffers have (a run's choices come in a buffer of room for
    /// hundreds, a few kilobytes that a worker's thousands of waiting
    /// subtrees would otherwise hold; [`Waiting::resume`] gives room back).
    pub(super) fn of(t: Subtree) -> Waiting {
        let Subtree { mut stack, frozen, mut ends, mut nodes } = t;
        stack.shrink_to_fit();
        ends.shrink_to_fit();
        let root = frozen.min(nodes.len());
        let below = nodes.split_off(root);
        let above = last_sched(&stack[..root]).map(|i| (i, std::mem::take(&mut nodes[i])));
        Waiting { stack, frozen, ends, nodes: root + below.len(), above, below }
    }

    /// The subtree it was, its vectors with room to grow.
    pub(super) fn resume(self) -> Subtree {
        let Waiting { mut stack, frozen, mut ends, nodes: len, above, below } = self;
        stack.reserve_exact(ROOM);
        ends.reserve_exact(ROOM);
        let mut nodes = Vec::with_capacity(stack.capacity().max(len));
        nodes.resize_with(len - below.len(), Node::default);
        if let Some((i, node)) = above {
            nodes[i] = node;
        }
        nodes.extend(below);
        Subtree { stack, frozen, ends, nodes }
    }
}

/// Where the last scheduling choice of `choices` is: the one node above a
/// subtree's root that a replay reads.
fn last_sched(choices: &[Choice]) -> Option<usize> {
    choices.iter().rposition(|c| c.point == ChoiceKind::Sched)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::search::Foot;

    /// A subtree of `len` choices whose first `frozen` are its root: the
    /// choices differ with `i`; above the root only the last scheduling
    /// choice's node holds something (as on a parked path), below it every
    /// node does.
    pub(in crate::search::sharded) fn subtree(i: u32, len: usize, frozen: usize) -> Subtree {
        let stack: Vec<Choice> = (0..len as u32)
            .map(|d| Choice {
                point: if d % 3 == 0 { ChoiceKind::Sched } else { ChoiceKind::Op },
                n: 4,
                taken: (i + d) % 4,
            })
            .collect();
        let last_sched = (0..frozen).rev().find(|d| d % 3 == 0);
        let nodes = (0..len)
            .map(|d| {
                let mut n = Node::default();
                if d >= frozen || Some(d) == last_sched {
                    n.foot = Some(Foot { global: d % 2 == 0, ..Foot::default() });
                }
                n
            })
            .collect();
        let ends = stack.iter().map(|c| c.n).collect();
        Subtree { stack, frozen, ends, nodes }
    }

    pub(in crate::search::sharded) fn same(a: &Subtree, b: &Subtree) -> bool {
        a.stack == b.stack && a.frozen == b.frozen && a.ends == b.ends && a.nodes == b.nodes
    }

    #[test]
    fn a_subtree_kept_small_comes_back_as_it_was() {
        for (len, frozen) in [(12, 8), (8, 8), (9, 1), (5, 0)] {
            let t = subtree(3, len, frozen);
            let back = Waiting::of(t.clone()).resume();
            assert!(same(&back, &t), "{len} choices, root {frozen}");
            assert!(back.nodes.capacity() >= len + ROOM, "room to grow");
        }
    }

    #[test]
    fn a_subtree_waits_without_its_buffers_room() {
        let mut t = subtree(1, 12, 8);
        t.stack.reserve_exact(256);
        t.ends.reserve_exact(256);
        let w = Waiting::of(t.clone());
        assert!(w.stack.capacity() < 256 && w.ends.capacity() < 256, "{} {}", w.stack.capacity(), w.ends.capacity());
        assert!(same(&w.resume(), &t));
    }

    #[test]
    fn a_parked_path_kept_small_is_a_subtree_rooted_at_its_end() {
        let t = subtree(1, 10, 10);
        let back = Waiting::parked(&t.stack, &t.nodes).resume();
        assert!(same(&back, &Subtree::below(t.stack.clone(), t.nodes.clone())));
    }
}
