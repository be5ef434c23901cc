//! An atomic set of CPUs (a kernel `cpumask_t`), sized once for the machine.

use crate::sync::{AtomicU64, Ordering};
use crate::types::CpuId;
use alloc::vec::Vec;

/// A fixed-size set of CPUs whose bits are set and cleared atomically.
pub struct CpuMask {
    words: Vec<AtomicU64>,
    ncpus: usize,
}

impl CpuMask {
    /// Returns an empty mask for `ncpus` CPUs.
    pub fn new(ncpus: usize) -> Self {
        let words = (0..ncpus.div_ceil(64)).map(|_| AtomicU64::new(0)).collect();
        CpuMask { words, ncpus }
    }

    /// Returns how many CPUs the mask can hold.
    pub fn capacity(&self) -> usize {
        self.ncpus
    }

    /// Sets `cpu`'s bit.
    pub fn set(&self, cpu: CpuId) {
        // SeqCst: callers use the mask as a flag another CPU reads after its own
        // SeqCst operations (e.g. mm_cpumask set before tlb_gen is read).
        self.words[cpu.index() / 64].fetch_or(1 << (cpu.index() % 64), Ordering::SeqCst);
    }

    /// Clears `cpu`'s bit.
    pub fn clear(&self, cpu: CpuId) {
        // SeqCst: as in `set`.
        self.words[cpu.index() / 64].fetch_and(!(1 << (cpu.index() % 64)), Ordering::SeqCst);
    }

    /// Returns whether `cpu`'s bit is set, unseen by a checker (for assertions:
    /// see [`crate::sync::AtomicU64::peek`]).
    pub fn peek_test(&self, cpu: CpuId) -> bool {
        self.words[cpu.index() / 64].peek() & (1 << (cpu.index() % 64)) != 0
    }

    /// Returns whether `cpu`'s bit is set.
    pub fn test(&self, cpu: CpuId) -> bool {
        // SeqCst: pairs with the SeqCst updates above.
        self.words[cpu.index() / 64].load(Ordering::SeqCst) & (1 << (cpu.index() % 64)) != 0
    }

    /// Sets every CPU's bit with plain stores of whole words, as the kernel's
    /// `cpumask_setall` (`bitmap_fill`) does: a concurrent [`CpuMask::clear`] of a
    /// bit is either before the store (and undone) or after it, as with an atomic OR.
    ///
    /// The stores are not ordered before the caller's later loads: a caller that
    /// needs that (origin 001's `tlb_flush_check`) issues a full barrier, as the kernel
    /// does. Every other caller sets a mask before sharing it or under a lock.
    pub fn set_all(&self) {
        for (i, w) in self.words.iter().enumerate() {
            let bits = (self.ncpus - i * 64).min(64);
            let m = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
            // Relaxed: `bitmap_fill` is plain stores; callers order them with their own barrier or lock.
            w.store(m, Ordering::Relaxed);
        }
    }

    /// Clears every CPU's bit.
    pub fn clear_all(&self) {
        for w in &self.words {
            // SeqCst: as in `set`.
            w.store(0, Ordering::SeqCst);
        }
    }

    /// Returns whether some CPU other than `except` has its bit clear: the kernel's
    /// `cpumask_next_zero` search, a word at a time.
    pub fn any_clear_except(&self, except: Option<CpuId>) -> bool {
        self.words.iter().enumerate().any(|(i, w)| {
            let bits = (self.ncpus - i * 64).min(64);
            let mut want = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
            if let Some(c) = except.filter(|c| c.index() / 64 == i) {
                want &= !(1 << (c.index() % 64));
            }
            // SeqCst: as in `test`.
            !w.load(Ordering::SeqCst) & want != 0
        })
    }

    /// Makes this mask a copy of `from` with plain stores of whole words, as the
    /// kernel's `cpumask_copy` does (`from` read a word at a time).
    pub fn copy_from(&self, from: &CpuMask) {
        for (w, f) in self.words.iter().zip(&from.words) {
            // SeqCst load: as in `test`. Relaxed store: `cpumask_copy` is plain
            // stores; the caller publishes the copy with its own barrier.
            w.store(f.load(Ordering::SeqCst), Ordering::Relaxed);
        }
    }

    /// Returns how many CPUs have their bit set (`cpumask_weight`).
    pub fn weight(&self) -> usize {
        // SeqCst: as in `test`.
        self.words.iter().map(|w| w.load(Ordering::SeqCst).count_ones() as usize).sum()
    }

    /// Calls `f` for each CPU whose bit is set, in increasing order.
    pub fn for_each(&self, mut f: impl FnMut(CpuId)) {
        for (i, w) in self.words.iter().enumerate() {
            // SeqCst: as in `set`.
            let mut bits = w.load(Ordering::SeqCst);
            while bits != 0 {
                let b = bits.trailing_zeros() as usize;
                f(CpuId((i * 64 + b) as u32));
                bits &= bits - 1;
            }
        }
    }
}

impl crate::fields::Named for CpuMask {
    /// Names the mask `name` (word `i` of a mask of more than 64 CPUs
    /// `name.bits[i]`), read as a CPU list whatever `value` says.
    fn name_to(&self, f: &mut dyn crate::fields::Fields, name: core::fmt::Arguments<'_>, _value: crate::fields::Value) {
        for (i, w) in self.words.iter().enumerate() {
            let value = crate::fields::Value::Cpus { first: 64 * i as u32 };
            if self.words.len() == 1 {
                f.add(w, name, value);
            } else {
                f.add(w, format_args!("{name}.bits[{i}]"), value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_all_covers_exactly_ncpus() {
        let m = CpuMask::new(70);
        m.set_all();
        let mut n = 0;
        m.for_each(|_| n += 1);
        assert_eq!(n, 70);
        m.clear(CpuId(69));
        assert!(!m.test(CpuId(69)));
        assert!(m.test(CpuId(68)));
    }

    #[test]
    fn any_clear_except_looks_at_every_cpu_but_the_excepted_one() {
        let m = CpuMask::new(130);
        assert!(m.any_clear_except(None));
        m.set_all();
        assert!(!m.any_clear_except(None));
        for c in [0, 63, 64, 129] {
            m.clear(CpuId(c));
            assert!(m.any_clear_except(None));
            assert!(!m.any_clear_except(Some(CpuId(c))), "cpu{c} is excepted");
            assert!(m.any_clear_except(Some(CpuId((c + 1) % 130))));
            m.set(CpuId(c));
        }
    }
}
