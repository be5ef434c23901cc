//! The checker's state of one execution besides the machine: each CPU's
//! registers of the search (`Cpu`), the shared memory's cells and their hash
//! (`State`), and the tables that name and own the policy's words.

use super::*;

impl Cpu {
    /// Hashes the CPU's state with every policy address it holds keyed by
    /// `key` (its offset in the arena, see [`Core::addr_key`]): the same state
    /// hashes the same on every thread, whose arenas lie at different addresses.
    ///
    /// Of the stores made since a read, what decides the future is whether
    /// there was one (a spin wakes or not), not how many: `any_since` says
    /// whether a store after store number `w` became visible.
    pub(super) fn hash_keyed<H: Hasher>(&self, h: &mut H, key: impl Fn(usize) -> u64, any_since: impl Fn(u64) -> bool) {
        hash_block(&self.block, h, &key, &any_since);
        // In a handler: what the interrupted code waits for after it.
        if let Some((b, next)) = &self.interrupted {
            2u8.hash(h);
            hash_block(b, h, &key, &any_since);
            next.map(|(a, w)| (key(a), w)).hash(h);
        }
        self.irq_off.hash(h);
        self.in_handler.hash(h);
        for i in &self.pending {
            (i.from, i.sync, i.key).hash(h);
        }
        // A store-release adds to the hash only when present (only `--memory
        // arm` buffers one), so a TSO state's hash has no release bytes.
        self.buffer.iter().for_each(|s| {
            (key(s.addr), s.w, crate::arena::position_free(s.v)).hash(h);
            if s.release {
                true.hash(h);
            }
        });
        // What it has left to do: two CPUs that swapped their operations can
        // reach the same machine with different budgets, and different futures.
        (self.sync_out, self.history, self.ops_done, self.held).hash(h);
        self.reads.iter().for_each(|&(a, written)| (key(a), written).hash(h));
        self.trail.1.hash(h);
        self.next.map(|(a, w)| (key(a), w)).hash(h);
        // The spin-loop anchor decides the history after the loop's next wait:
        // leaving it out would let the order of the search decide which
        // histories (and so which states) it meets.
        if let Some((hist, trail)) = &self.anchor {
            (hist, trail.1).hash(h);
        }
    }

    /// Forgets the reads since the last spin (a spin, or an operation's end).
    pub(super) fn forget_reads(&mut self) {
        self.reads.clear();
        self.trail = (0, 0);
    }
}

/// Hashes why a CPU is not runnable, keyed as [`Cpu::hash_keyed`] keys.
fn hash_block<H: Hasher>(b: &Block, h: &mut H, key: &impl Fn(usize) -> u64, any_since: &impl Fn(u64) -> bool) {
    match b {
        Block::Spin(reads, w) => {
            1u8.hash(h);
            reads.iter().for_each(|&(a, written)| (key(a), written).hash(h));
            if reads.is_empty() {
                any_since(*w).hash(h);
            }
        }
        other => {
            std::mem::discriminant(other).hash(h);
            match other {
                Block::MmLock(slot, side) => (slot, side).hash(h),
                Block::Ptl(slot) => slot.hash(h),
                _ => {}
            }
        }
    }
}

impl std::ops::Deref for Tracked {
    type Target = Machine;
    fn deref(&self) -> &Machine {
        &self.m
    }
}

impl std::ops::DerefMut for Tracked {
    fn deref_mut(&mut self) -> &mut Machine {
        self.changed = true;
        &mut self.m
    }
}

#[cfg(debug_assertions)]
impl<K, V> Default for SortedMap<K, V> {
    fn default() -> Self {
        SortedMap(Vec::new())
    }
}

#[cfg(debug_assertions)]
impl<K: Ord + Copy, V> SortedMap<K, V> {
    /// Returns the value of `k`, inserting `v` first if it has none.
    pub(super) fn or_insert(&mut self, k: K, v: V) -> &mut V {
        let i = match self.0.binary_search_by(|(q, _)| q.cmp(&k)) {
            Ok(i) => i,
            Err(i) => {
                self.0.insert(i, (k, v));
                i
            }
        };
        &mut self.0[i].1
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

/// A facade atomic's part of [`State::mem`]: its offset `k` in the arena with
/// its value `v`, mixed into 128 bits, each half two rounds of MurmurHash3's
/// 64-bit finaliser (each a bijection, so that distinct pairs give unrelated
/// words) from the offset salted differently. Two halves, because the state
/// hash is only as wide as its narrowest part that takes as many values as
/// the states do (the crate documentation, "How exhaustive mode finishes").
pub(super) fn cell_hash(k: u64, v: u64) -> u128 {
    fn fmix(mut x: u64) -> u64 {
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        x ^ (x >> 33)
    }
    let half = |salt: u64| u128::from(fmix(fmix(k ^ salt) ^ v));
    half(0x6a09_e667_f3bc_c908) | half(0xbb67_ae85_84ca_a73b) << 64
}

impl State {
    /// Notes that a store to `addr` became visible, from `old` to `new` (of
    /// the field at offset `k`): every CPU that read it since its last spin,
    /// or spins on it, has it written since.
    pub(super) fn wrote(&mut self, addr: usize, k: u64, old: u64, new: u64) {
        let at = crate::arena::position_free;
        self.mem ^= cell_hash(k, at(old)) ^ cell_hash(k, at(new));
        self.writes += 1;
        for c in &mut self.cpus {
            let spin = match &mut c.block {
                Block::Spin(reads, _) => &mut reads[..],
                _ => &mut [],
            };
            for r in c.reads.iter_mut().chain(spin).filter(|r| r.0 == addr) {
                r.1 = true;
            }
        }
    }

    /// Notes that CPU `cpu` read `addr`, whose key is `key` (for its next spin).
    pub(super) fn read(&mut self, cpu: usize, addr: usize, key: u64) {
        let c = &mut self.cpus[cpu];
        c.trail = (mix(c.trail.0, addr as u64), mix(c.trail.1, key));
        if !c.reads.iter().any(|r| r.0 == addr) {
            c.reads.push((addr, false));
        }
    }
}

impl Fields for OwnerTable<'_> {
    fn field(&mut self, _addr: usize, _name: std::fmt::Arguments<'_>, _value: Value) {}

    fn owner(&mut self, addr: usize, owner: Owner) {
        // Only the policy's memory: a field or lock anywhere else is not
        // shared (`Core::shared_addr`), and its declaration says nothing.
        let offset = |a: usize| a.checked_sub(self.base).filter(|&k| k < self.mark);
        let Some(k) = offset(addr) else { return };
        let own = match owner {
            Owner::Cpu { cpu, others_read } => Own::Cpu { cpu: cpu as usize, others_read },
            Owner::Lock { lock } => match offset(lock) {
                Some(l) => Own::Lock { lock: l as u32 },
                None => return,
            },
            Owner::Reader { cpu } => Own::Reader { cpu: cpu as usize },
        };
        self.declared.push((k, own));
    }
}

/// The owner table this thread built last, and what it was built from: the
/// policy's base, its mark and its declarations in the order made.
type OwnersBuilt = (usize, usize, Vec<(usize, Own)>, Rc<[Option<Own>]>);

thread_local! {
    /// [`owners`]' last table. An execution without checkpoints builds its
    /// policy and asks for the table afresh, and a table is as long as the
    /// policy's memory (one entry a byte): filling it took 6% of a default
    /// run's time on v6.18.2's `tlb.c`
    /// (`bench/2026-12-01-check-owner-table-reused.md`).
    static OWNERS: RefCell<Option<OwnersBuilt>> = const { RefCell::new(None) };
}

/// Returns the policy's declarations of who may access its fields
/// ([`Fields::owner`]), by offset from `base` up to `mark` (the policy's
/// memory in the arena), or an empty table if it declares none. The same
/// declarations at the same base and mark as this thread's last call give
/// that call's table back.
pub(super) fn owners<P: Policy>(policy: &P, base: usize, mark: usize) -> Rc<[Option<Own>]> {
    // The tables live outside the arena, which the next execution reuses.
    arena::outside(|| {
        let mut declared = Vec::new();
        policy.name_fields(&mut OwnerTable { base, mark, declared: &mut declared });
        OWNERS.with(|last| {
            let mut last = last.borrow_mut();
            if let Some((b, m, d, table)) = &*last {
                if (*b, *m) == (base, mark) && *d == declared {
                    return Rc::clone(table);
                }
            }
            let table: Rc<[Option<Own>]> = if declared.is_empty() {
                Rc::from(Vec::new())
            } else {
                let mut t = vec![None; mark];
                // A later declaration of the same byte overrides an earlier one.
                declared.iter().for_each(|&(k, own)| t[k] = Some(own));
                Rc::from(t)
            };
            *last = Some((base, mark, declared, Rc::clone(&table)));
            table
        })
    })
}

impl Hasher for StateBytes<'_> {
    fn write(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }
    fn write_u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn write_u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn write_u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn write_u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    fn finish(&self) -> u64 {
        xxhash_rust::xxh3::xxh3_64(self.0)
    }
}

impl StateBytes<'_> {
    /// The 128-bit XXH3 hash of what was written.
    pub(super) fn wide(&self) -> u128 {
        xxhash_rust::xxh3::xxh3_128(self.0)
    }
}

impl Fields for NameTable<'_> {
    fn field(&mut self, addr: usize, name: std::fmt::Arguments<'_>, value: Value) {
        self.0.insert(addr, (name.to_string(), value));
    }
}
