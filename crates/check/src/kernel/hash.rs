//! The machine's state hash: every field that decides what can happen next,
//! with the address spaces' and frames' numbers renamed to a canonical order
//! (`--symmetry`), so that executions that differ only in names meet.

use super::*;

impl Machine {
    /// Hashes the machine as its [`Hash`] does, or with every frame and uid as
    /// it is when `rename` is false (what the soundness tests compare with).
    pub(crate) fn hash_as<H: std::hash::Hasher>(&self, h: &mut H, rename: bool) {
        // The scratch vectors outlive the execution: never in its arena.
        crate::arena::outside(|| SCRATCH.with(|s| self.hash_renamed(h, &mut s.borrow_mut(), rename)));
    }

    /// [`Hash`] for [`Machine`] (no renaming unless `rename`), with `s`'s vectors.
    pub(super) fn hash_renamed<H: std::hash::Hasher>(&self, h: &mut H, s: &mut Scratch, rename: bool) {
        use std::hash::Hash;
        // Names are given by first appearance in this order: the slots in order
        // (each process's uid, its table and pages), the free list in its order,
        // then everything else.
        let (mut f, mut u) = (Renaming::new(rename), Renaming::new(rename));
        for sp in &self.spaces {
            (u.name(sp.uid), sp.life, sp.table.map(|t| f.name(t)), sp.vers, sp.detached, &sp.block, sp.written).hash(h);
            // Hashed only when set, so that a machine no reclaim marked hashes as
            // it did before the count was kept.
            if sp.batched != 0 {
                (0xba7c_u16, sp.batched).hash(h);
            }
            if sp.watching != 0 {
                (0xba7d_u16, sp.watching).hash(h);
            }
            // The same for LATR's flag, kept only for a policy that reads it.
            if sp.munmap_inprogress {
                0xf1a9_u16.hash(h);
            }
            for p in &sp.ptes {
                p.map(|p| (f.name(p.frame), p.ver)).hash(h);
            }
        }
        self.free.len().hash(h);
        self.free.iter().for_each(|&fr| f.name(fr).hash(h));
        // Open obligations, ordered by what is not renamed first.
        s.open.clear();
        s.open.extend(
            self.obligations
                .iter()
                .filter(|o| !o.discharged)
                .map(|o| (o.stale.slot, o.stale.ver, o.stale.page, o.cpu, o.stale.change, o.stale.uid, o.stale.frame)),
        );
        s.open.sort_unstable();
        for o in &mut s.open {
            (o.5, o.6) = (u.name(o.5), f.name(o.6));
        }
        s.open.sort_unstable();
        s.open.hash(h);
        // Lazy flushes by what they hold (their obligations are hashed above),
        // the offers per CPU.
        let mut hash_lazy = |l: &LazyFlush, h: &mut H| {
            (l.ticket, l.flush, l.slot, u.name(l.uid), l.detached).hash(h);
            l.frames.iter().for_each(|&fr| f.name(fr).hash(h));
        };
        for o in &self.lazy_offer {
            o.is_some().hash(h);
            if let Some(l) = o {
                hash_lazy(l, h);
            }
        }
        for l in &self.lazy {
            hash_lazy(l, h);
        }
        if self.in_batch_flush.iter().any(|&b| b) {
            self.in_batch_flush.hash(h);
        }
        for d in &self.deferred {
            s.deferred.clear();
            s.deferred.extend(d.iter().map(|d| {
                let stale = Stale { uid: u.name(d.stale.uid), frame: f.name(d.stale.frame), ..d.stale.clone() };
                Deferred { stale, ..d.clone() }
            }));
            s.deferred.sort_unstable();
            s.deferred.hash(h);
        }
        for t in &self.tlbs {
            s.entries.clear();
            s.entries.extend(t.iter().map(|e| Entry { uid: u.name(e.uid), frame: f.name(e.frame), ..*e }));
            s.entries.sort_unstable();
            s.entries.hash(h);
        }
        for w in &self.walks {
            s.walks.clear();
            s.walks.extend(w.iter().map(|&(a, fr, id)| (a, f.name(fr), u.name(id))));
            s.walks.sort_unstable();
            s.walks.hash(h);
        }
        s.dead.clear();
        s.dead.extend(self.dead.iter().map(|&(id, p, v)| (u.name(id), p, v)));
        s.dead.sort_unstable();
        s.dead.hash(h);
        for p in &self.pending {
            p.len().hash(h);
            p.iter().for_each(|p| p.key().hash(h));
        }
        self.roots.now.hash(h);
        // Roots not yet synchronised: hashed only where there are some, so
        // the states of a policy that synchronises at once are unchanged.
        for (c, u) in self.roots.unsynced.iter().enumerate().filter(|(_, u)| !u.is_empty()) {
            (c, u).hash(h);
        }
        self.sched.tasks.hash(h);
        self.sched.active.hash(h);
        self.sched.user_mode.hash(h);
        self.sched.switching.hash(h);
        self.sched.leaving.hash(h);
        self.touched.hash(h);
        self.mm_lock.hash(h);
        self.ptl_held.hash(h);
        // The next uid only matters while the initial processes are being
        // started (`fork` tells them by it); after that it is just fresh.
        if rename {
            self.next_uid.min(self.spaces.len() as u32).hash(h);
        } else {
            self.next_uid.hash(h);
        }
    }
}
