//! The shelf: checkpoints of the paths a worker left, found again by the
//! path of the execution that comes back to them.
//!
//! A worker of the sharded search leaves its path each time it takes up a
//! parked execution, and comes back to it only after that execution's
//! subtree, which may have taken up others. Each left path's checkpoints
//! deeper than the prefix it shares with the next path wait here. An
//! execution forced through `forced` asks for the deepest of them on its
//! way ([`Shelf::deepest`]): one whose choices before it are `forced`'s
//! first choices, and which leaves `forced`'s last choice to be made.
//!
//! Comparing `forced` with every shelved path cost the worker more than the
//! replay it saved once the shelf held a few dozen paths. So each shelved
//! checkpoint is indexed by a hash of the choices before it, and a lookup
//! hashes `forced`'s prefixes once and tries them from the deepest down,
//! to the depth the live path's own checkpoint already reaches: its cost
//! follows the path's length, not the shelf's size. A hash that matches is
//! confirmed against the path itself.
//!
//! The shelf holds up to [`SHELF_SNAPS`] checkpoints, giving the oldest
//! path's back first (each checkpoint is the arena's bytes in use and the
//! CPUs' stacks: kilobytes).

use crate::search::Choice;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

/// The most checkpoints the shelf keeps.
pub(super) const SHELF_SNAPS: usize = 512;

/// What the shelf needs of a checkpoint: the choices made before it.
pub(super) trait Depth {
    fn depth(&self) -> usize;
}

/// A path and its checkpoints off the live one, by increasing depth.
pub(super) struct Shelved<S> {
    pub path: Vec<Choice>,
    pub snaps: Vec<S>,
}

/// A shelved path, with the hash each of its checkpoints is indexed by.
struct Kept<S> {
    shelved: Shelved<S>,
    keys: Vec<u64>,
}

/// See the module documentation.
pub(super) struct Shelf<S> {
    /// The shelved paths by age, the oldest first.
    paths: BTreeMap<u64, Kept<S>>,
    /// Each shelved checkpoint by the hash of the choices before it: its
    /// path's key and depth.
    index: HashMap<u64, Vec<(u64, usize)>, BuildHasherDefault<Keyed>>,
    /// Checkpoints on the shelf.
    snaps: usize,
    /// The next path's key.
    next: u64,
    /// [`Shelf::deepest`]'s prefix hashes, kept from one lookup to the next.
    hashes: Vec<u64>,
}

impl<S> Default for Shelf<S> {
    fn default() -> Self {
        Shelf { paths: BTreeMap::new(), index: HashMap::default(), snaps: 0, next: 0, hashes: Vec::new() }
    }
}

/// The hash of a path's first `d + 1` choices from that of its first `d`.
fn extend(h: u64, c: &Choice) -> u64 {
    let x = (c.point as u64) << 56 ^ u64::from(c.n) << 28 ^ u64::from(c.taken);
    (h ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(31)
}

/// Hashes of `path`'s prefixes: `out[d]` of its first `d` choices, for `d`
/// up to `len`.
fn prefixes(path: &[Choice], len: usize, out: &mut Vec<u64>) {
    out.clear();
    out.push(0);
    for c in &path[..len] {
        let h = extend(*out.last().expect("the empty prefix"), c);
        out.push(h);
    }
}

impl<S: Depth> Shelf<S> {
    /// Shelves `path`'s checkpoints `snaps` (each on it, by increasing
    /// depth, none at depth 0); the oldest paths past [`SHELF_SNAPS`]
    /// checkpoints in all give theirs to `spare`.
    pub fn put(&mut self, path: Vec<Choice>, snaps: Vec<S>, spare: &mut Vec<S>) {
        debug_assert!(snaps.iter().all(|s| s.depth() >= 1 && s.depth() <= path.len()));
        let key = self.next;
        self.next += 1;
        let mut hashes = std::mem::take(&mut self.hashes);
        prefixes(&path, snaps.last().map_or(0, |s| s.depth()), &mut hashes);
        let keys: Vec<u64> = snaps.iter().map(|s| hashes[s.depth()]).collect();
        self.hashes = hashes;
        for (s, &h) in snaps.iter().zip(&keys) {
            self.index.entry(h).or_default().push((key, s.depth()));
        }
        self.snaps += snaps.len();
        self.paths.insert(key, Kept { shelved: Shelved { path, snaps }, keys });
        while self.snaps > SHELF_SNAPS {
            let (&oldest, _) = self.paths.first_key_value().expect("a shelf past its size holds a path");
            spare.extend(self.take(oldest).snaps);
        }
    }

    /// The deepest shelved checkpoint an execution forced through `forced`
    /// can start from, if one lies deeper than `above` choices: its path's
    /// key and its depth.
    pub fn deepest(&mut self, forced: &[Choice], above: usize) -> Option<(u64, usize)> {
        // The last forced choice is made by the execution, never restored.
        let top = forced.len().checked_sub(1).filter(|&t| t > above)?;
        if self.paths.is_empty() {
            return None;
        }
        let mut hashes = std::mem::take(&mut self.hashes);
        prefixes(forced, top, &mut hashes);
        let found = (above + 1..=top).rev().find_map(|d| {
            let at = self.index.get(&hashes[d])?;
            at.iter().rev().find(|&&(key, depth)| depth == d && self.paths[&key].shelved.path[..d] == forced[..d])
        });
        self.hashes = hashes;
        found.copied()
    }

    /// Takes the path `key` off the shelf.
    pub fn take(&mut self, key: u64) -> Shelved<S> {
        let Kept { shelved, keys } = self.paths.remove(&key).expect("a shelved path's key");
        for h in keys {
            let at = self.index.get_mut(&h).expect("a shelved checkpoint is indexed");
            at.retain(|&(k, _)| k != key);
            if at.is_empty() {
                self.index.remove(&h);
            }
        }
        self.snaps -= shelved.snaps.len();
        shelved
    }
}

/// The index's hasher: its keys are hashes already.
#[derive(Default)]
pub(super) struct Keyed(u64);

impl Hasher for Keyed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = x;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::ChoiceKind;

    impl Depth for usize {
        fn depth(&self) -> usize {
            *self
        }
    }

    fn path(taken: &[u32]) -> Vec<Choice> {
        taken.iter().map(|&t| Choice { point: ChoiceKind::Sched, n: 4, taken: t }).collect()
    }

    /// The same answers as comparing `forced` with every shelved path.
    fn by_scan(shelf: &Shelf<usize>, forced: &[Choice], above: usize) -> Option<usize> {
        let mut best = None;
        for p in shelf.paths.values().map(|k| &k.shelved) {
            let common = p.path.iter().zip(forced).take_while(|(a, b)| a == b).count();
            for &d in &p.snaps {
                if d <= common && d < forced.len() && d > above && best < Some(d) {
                    best = Some(d);
                }
            }
        }
        best
    }

    #[test]
    fn the_deepest_shelved_checkpoint_on_the_way_is_found_as_a_scan_finds_it() {
        let mut shelf = Shelf::<usize>::default();
        let mut spare = Vec::new();
        shelf.put(path(&[0, 1, 2, 3, 0]), vec![2, 3, 4], &mut spare);
        shelf.put(path(&[0, 1, 3, 3]), vec![3], &mut spare);
        shelf.put(path(&[1, 1, 2]), vec![1, 2], &mut spare);
        for (forced, above) in [
            (path(&[0, 1, 2, 3, 1]), 0),
            (path(&[0, 1, 2, 3, 1]), 4),
            (path(&[0, 1, 2, 3]), 0),
            (path(&[0, 1, 3, 3, 2, 2]), 1),
            (path(&[0, 2]), 0),
            (path(&[1, 1, 2, 0]), 0),
            (path(&[1, 1, 2, 0]), 2),
            (path(&[]), 0),
        ] {
            let found = shelf.deepest(&forced, above).map(|(_, d)| d);
            assert_eq!(found, by_scan(&shelf, &forced, above), "forced {forced:?} above {above}");
        }
        let (key, d) = shelf.deepest(&path(&[0, 1, 2, 3, 1]), 0).expect("a checkpoint at depth 4");
        assert_eq!(d, 4);
        assert_eq!(shelf.take(key).snaps, vec![2, 3, 4]);
        assert_eq!(shelf.deepest(&path(&[0, 1, 2, 3, 1]), 0), None, "a path taken is no longer found");
        assert_eq!(shelf.snaps, 3);
    }

    #[test]
    fn the_oldest_paths_give_their_checkpoints_back_past_the_limit() {
        let mut shelf = Shelf::<usize>::default();
        let mut spare = Vec::new();
        let each: Vec<usize> = (1..=16).collect();
        for i in 0..=(SHELF_SNAPS / each.len()) as u32 {
            let mut p = path(&[i]);
            p.extend(path(&[0; 16]));
            shelf.put(p, each.clone(), &mut spare);
        }
        assert_eq!(spare.len(), each.len(), "the oldest path's checkpoints given back");
        assert_eq!(shelf.snaps, SHELF_SNAPS);
        let mut oldest = path(&[0]);
        oldest.extend(path(&[0; 17]));
        assert_eq!(shelf.deepest(&oldest, 0), None);
        let mut newest = path(&[(SHELF_SNAPS / each.len()) as u32]);
        newest.extend(path(&[0; 17]));
        assert_eq!(shelf.deepest(&newest, 0).map(|(_, d)| d), Some(16));
    }
}
