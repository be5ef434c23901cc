//! The TLBs of the machine: filled from every reachable PTE after each step,
//! invalidated by local and broadcast TLBIs (pending until completed), and
//! the translation roots the CPUs have written.

use super::*;

/// Which roots a CPU's walks may use after it writes its root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RootWalks {
    /// The new one only: the write serialises (x86's CR3 write).
    NewOnly,
    /// The one written over too, until the CPU's next context
    /// synchronisation ([`Machine::synchronise`]): arm64's `MSR TTBR0_EL1`.
    OldUntilSync,
}

impl Machine {
    /// Fills every CPU's TLB with every translation reachable from its root under
    /// the tag it runs with (the hardware may walk speculatively at any moment;
    /// see the crate docs). Returns the new entries as `(cpu, entry)`.
    pub fn fill_all(&mut self) -> Vec<(usize, Entry)> {
        let mut new = Vec::new();
        self.fill(&mut new);
        new
    }

    /// As [`Machine::fill_all`], putting the new TLB entries into `new`;
    /// returns whether the TLBs or walk caches changed at all.
    pub fn fill(&mut self, new: &mut Vec<(usize, Entry)>) -> bool {
        let mut changed = false;
        for c in 0..self.tlbs.len() {
            changed |= self.fill_from(c, self.roots[c], true, new);
            // Roots written over but not yet synchronised: walks may use them.
            for k in 0..self.roots.unsynced[c].len() {
                changed |= self.fill_from(c, self.roots.unsynced[c][k], false, new);
            }
        }
        changed
    }

    /// Fills CPU `c`'s TLB and walk cache from the root and tag `root`
    /// (`current`: the one it runs with, whose last fill [`Machine::filled`]
    /// remembers so that an unchanged one is skipped).
    fn fill_from(&mut self, c: usize, root: (Root, u16), current: bool, new: &mut Vec<(usize, Entry)>) -> bool {
        let mut changed = false;
        let (Root::Mm(mm), asid) = root else { return false };
        let s = &self.spaces[mm.index()];
        if matches!(s.life, Life::Free | Life::Releasing) {
            return false;
        }
        if current {
            // The contiguous block's entries depend on more: always filled.
            let from =
                s.block.is_empty().then_some(Filled { root, uid: s.uid, life: s.life, table: s.table, ptes: s.ptes });
            if from.is_some() && self.filled[c] == from {
                return false;
            }
            self.filled[c] = from;
        }
        let tag = if self.consts.global_user { 0 } else { asid };
        if let Some(table) = s.table {
            changed |= self.walks[c].insert((tag, table, s.uid));
        }
        for (p, pte) in s.ptes.iter().enumerate() {
            let Some(pte) = pte.filter(|_| s.table.is_some()) else { continue };
            let e = Entry {
                global: self.consts.global_user,
                asid: if self.consts.global_user { 0 } else { asid },
                page: p as u8,
                frame: pte.frame,
                uid: s.uid,
                ver: pte.ver,
                big: false,
            };
            if self.tlbs[c].insert(e) {
                new.push((c, e));
                changed = true;
            }
        }
        // The contiguous block: a walk reaching a valid contiguous PTE of a block
        // whose valid PTEs agree caches one 64 KB entry; a non-contiguous PTE, or
        // a contiguous one of a misprogrammed block (which `check_block` reports),
        // a 4 KB entry.
        let agree = block_agrees(&s.block);
        for (j, pte) in s.block.iter().enumerate() {
            if !pte.valid() {
                continue;
            }
            let big = pte.cont() && agree;
            let e = Entry {
                global: self.consts.global_user,
                asid: tag,
                page: (BLOCK_PAGE + if big { 0 } else { j }) as u8,
                frame: (pte.pfn - if big { j as u64 } else { 0 }) as u32,
                uid: s.uid,
                ver: 0,
                big,
            };
            if self.tlbs[c].insert(e) {
                new.push((c, e));
                changed = true;
            }
        }
        changed
    }

    /// Applies an invalidation on CPU `cpu` (or every CPU for a broadcast) at
    /// once: a synchronous one (x86 `INVLPG`, `INVPCID`). Returns how many
    /// entries went.
    pub fn tlbi(&mut self, cpu: usize, op: Tlbi, scope: Scope) -> usize {
        let range = match scope {
            Scope::Local => cpu..cpu + 1,
            Scope::Broadcast => 0..self.tlbs.len(),
        };
        self.apply(range, op)
    }

    /// Issues an invalidation on CPU `cpu` that completes only at a later
    /// barrier of that CPU ([`Pending`]): nothing goes yet. Returns whether it
    /// was not pending already (an invalidation pending twice completes once).
    pub fn issue(&mut self, cpu: usize, op: Tlbi, scope: Scope) -> bool {
        self.add_pending(cpu, Pending { op, broadcast: scope == Scope::Broadcast, issuer_done: false })
    }

    /// Puts `p` in CPU `cpu`'s pending list at its place; returns whether it
    /// was not there already.
    fn add_pending(&mut self, cpu: usize, p: Pending) -> bool {
        let list = &mut self.pending[cpu];
        match list.binary_search_by_key(&p.key(), Pending::key) {
            Ok(_) => false,
            Err(i) => {
                list.insert(i, p);
                true
            }
        }
    }

    /// Whether CPU `cpu` issued an invalidation that has not completed.
    #[inline]
    pub fn has_pending(&self, cpu: usize) -> bool {
        !self.pending[cpu].is_empty()
    }

    /// Completes as much of each invalidation CPU `cpu` issued as `part`
    /// says, on the TLBs that part covers (their refills since it was issued
    /// included), and tells `each` of each one with how many entries it
    /// removed and what of it is still pending (`None`: nothing).
    pub fn complete(
        &mut self,
        cpu: usize,
        part: impl Fn(&Pending) -> Part,
        mut each: impl FnMut(Pending, usize, Option<Pending>),
    ) {
        let mut i = 0;
        let mut left = Vec::new();
        while i < self.pending[cpu].len() {
            let p = self.pending[cpu][i];
            let part = p.left(part(&p));
            if part == Part::Nothing {
                i += 1;
                continue;
            }
            self.pending[cpu].remove(i);
            let (removed, rest) = match part {
                Part::IssuersTlb => (self.apply(cpu..cpu + 1, p.op), Some(Pending { issuer_done: true, ..p })),
                _ if !p.broadcast => (self.apply(cpu..cpu + 1, p.op), None),
                _ if p.issuer_done => (self.apply(0..cpu, p.op) + self.apply(cpu + 1..self.tlbs.len(), p.op), None),
                _ => (self.apply(0..self.tlbs.len(), p.op), None),
            };
            left.extend(rest);
            each(p, removed, rest);
        }
        // Put back where it sorts (an equal one already there stands for both).
        for p in left {
            self.add_pending(cpu, p);
        }
    }

    /// Removes what `op` removes from the TLBs and walk caches of the CPUs in
    /// `range`; returns how many TLB entries went.
    pub(super) fn apply(&mut self, range: std::ops::Range<usize>, op: Tlbi) -> usize {
        let mut n = 0;
        for c in range {
            self.filled[c] = None;
            let before = self.tlbs[c].len();
            self.tlbs[c].retain(|e| !removes(op, e));
            n += before - self.tlbs[c].len();
            // By ASID or everything: cached walks go too; by VA this models
            // arm64's leaf-only forms (`TLBI VALE1`), which leave them, and x86's
            // `INVLPG`, which drops every cached walk of its PCID.
            // A range drops the walks of its tag (of every tag without one) when it
            // covers a user page: Linux never issues `INVLPGB` with `FINAL_ONLY`.
            let user = |va: tlbkit_policy::VirtAddr, pages: u32| {
                (0..pages.max(1) as u64).any(|i| page_of(va.add_pages(i).0).is_some())
            };
            match op {
                Tlbi::Asid(a) => self.walks[c].retain(|w| w.0 != a.get()),
                Tlbi::Range { asid: Some(a), va, pages } if user(va, pages) => self.walks[c].retain(|w| w.0 != a.get()),
                Tlbi::Range { asid: None, va, pages } if user(va, pages) => self.walks[c].clear(),
                Tlbi::All | Tlbi::AllNonGlobal => self.walks[c].clear(),
                Tlbi::Va { asid, .. } if self.consts.va_drops_walks => self.walks[c].retain(|w| w.0 != asid.get()),
                Tlbi::Va { .. } | Tlbi::VaAllAsids { .. } | Tlbi::Range { .. } => {}
            }
        }
        n
    }

    /// Writes CPU `cpu`'s root; without `noflush`, non-global entries of `asid`
    /// go (the x86 CR3 write). What walks use from here is `walks`'s.
    pub fn write_root(&mut self, cpu: usize, root: Root, asid: u16, noflush: bool, walks: RootWalks) {
        let old = self.roots[cpu];
        if walks == RootWalks::OldUntilSync && old != (root, asid) && !self.roots.unsynced[cpu].contains(&old) {
            self.roots.unsynced[cpu].push(old);
        }
        self.roots.unsynced[cpu].retain(|&r| r != (root, asid));
        self.roots[cpu] = (root, asid);
        if !noflush {
            self.filled[cpu] = None;
            self.tlbs[cpu].retain(|e| e.global || e.asid != asid);
            self.walks[cpu].retain(|w| w.0 != asid);
        }
    }

    /// A context synchronisation event on CPU `cpu` (arm64 `ISB`, an
    /// exception's entry or return): its walks use only the root it runs
    /// with from here on.
    #[inline]
    pub fn synchronise(&mut self, cpu: usize) {
        self.roots.unsynced[cpu].clear();
    }

    /// Whether CPU `cpu` wrote a root it has not synchronised yet.
    #[inline]
    pub fn unsynchronised(&self, cpu: usize) -> bool {
        !self.roots.unsynced[cpu].is_empty()
    }

    /// Returns how many CPUs' roots point at `slot`.
    pub fn roots_on(&self, slot: u32) -> usize {
        self.roots.now.iter().filter(|(r, _)| *r == Root::Mm(tlbkit_policy::MmId(slot))).count()
    }
}
