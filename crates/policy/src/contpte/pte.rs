//! A page-table entry as the arm64 contpte code sees it: a frame number and flags.

use core::fmt::{self, Write};

/// A last-level PTE: frame number and flag bits.
///
/// The flag values equal the simulator's (`crates/sim/src/pagetable.rs`: `P_VALID`,
/// `P_WRITE`, `P_ACCESS`, `P_DIRTY`), so converting is a field copy; bits this type
/// does not name (the simulator's `P_USER`, `P_GLOBAL`, `P_HUGE`) are carried
/// unchanged and count as permissions: two PTEs with different such bits never fold
/// together. [`PteVal::CONT`] is the simulator's `P_CONT`.
///
/// The dirty state is the single bit [`PteVal::DIRTY`]; see the module
/// documentation for how arm64's software/hardware dirty encoding maps onto it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PteVal {
    /// The frame number the PTE maps.
    pub pfn: u64,
    /// The flag bits.
    pub flags: u16,
}

impl PteVal {
    /// The PTE maps something (`PTE_VALID`).
    pub const VALID: u16 = 1;
    /// Writes are permitted (`PTE_WRITE`, which is `PTE_DBM`).
    pub const WRITE: u16 = 2;
    /// The access flag (`PTE_AF`): set by hardware on the first access.
    pub const YOUNG: u16 = 16;
    /// The dirty state (`PTE_DIRTY`, or hardware-dirty): set by hardware on a write.
    pub const DIRTY: u16 = 32;
    /// The contiguous bit (`PTE_CONT`): one of a block of 16 that the TLB may cache
    /// as one 64 KB entry.
    pub const CONT: u16 = 128;
    /// The bits hardware may set behind software's back.
    pub const ACCESS_DIRTY: u16 = Self::YOUNG | Self::DIRTY;

    /// The cleared PTE (`__pte(0)`).
    pub const NONE: PteVal = PteVal { pfn: 0, flags: 0 };

    /// Returns the PTE mapping frame `pfn` with `flags`.
    pub const fn new(pfn: u64, flags: u16) -> PteVal {
        PteVal { pfn, flags }
    }

    /// Returns whether every bit of `bits` is set.
    const fn has(self, bits: u16) -> bool {
        self.flags & bits == bits
    }

    /// Returns whether the PTE is all zero (`pte_none`).
    pub const fn none(self) -> bool {
        self.pfn == 0 && self.flags == 0
    }

    /// Returns whether the PTE is valid (`pte_valid`; also `pte_present` here).
    pub const fn valid(self) -> bool {
        self.has(Self::VALID)
    }

    /// Returns whether writes are permitted (`pte_write`).
    pub const fn write(self) -> bool {
        self.has(Self::WRITE)
    }

    /// Returns whether the access flag is set (`pte_young`).
    pub const fn young(self) -> bool {
        self.has(Self::YOUNG)
    }

    /// Returns whether the page is dirty (`pte_dirty`).
    pub const fn dirty(self) -> bool {
        self.has(Self::DIRTY)
    }

    /// Returns whether the contiguous bit is set (`pte_cont`).
    pub const fn cont(self) -> bool {
        self.has(Self::CONT)
    }

    /// Returns whether the PTE is valid and contiguous (`pte_valid_cont`).
    pub const fn valid_cont(self) -> bool {
        self.has(Self::VALID | Self::CONT)
    }

    /// Returns the PTE with `bits` set.
    const fn with(self, bits: u16) -> PteVal {
        PteVal { pfn: self.pfn, flags: self.flags | bits }
    }

    /// Returns the PTE with `bits` clear.
    const fn without(self, bits: u16) -> PteVal {
        PteVal { pfn: self.pfn, flags: self.flags & !bits }
    }

    /// Returns the PTE marked dirty (`pte_mkdirty`).
    pub const fn mkdirty(self) -> PteVal {
        self.with(Self::DIRTY)
    }

    /// Returns the PTE marked clean (`pte_mkclean`).
    pub const fn mkclean(self) -> PteVal {
        self.without(Self::DIRTY)
    }

    /// Returns the PTE with the access flag set (`pte_mkyoung`).
    pub const fn mkyoung(self) -> PteVal {
        self.with(Self::YOUNG)
    }

    /// Returns the PTE with the access flag clear (`pte_mkold`).
    pub const fn mkold(self) -> PteVal {
        self.without(Self::YOUNG)
    }

    /// Returns the PTE with the contiguous bit set (`pte_mkcont`).
    pub const fn mkcont(self) -> PteVal {
        self.with(Self::CONT)
    }

    /// Returns the PTE with the contiguous bit clear (`pte_mknoncont`).
    pub const fn mknoncont(self) -> PteVal {
        self.without(Self::CONT)
    }

    /// Returns the PTE without write permission, its dirty state kept
    /// (`pte_wrprotect`, which moves hardware-dirty into `PTE_DIRTY`).
    pub const fn wrprotect(self) -> PteVal {
        self.without(Self::WRITE)
    }

    /// Returns the PTE mapping the frame `n` after this one (`pte_advance_pfn`).
    pub const fn advance_pfn(self, n: u64) -> PteVal {
        PteVal { pfn: self.pfn + n, flags: self.flags }
    }

    /// Returns the flags without the access flag and dirty state: what must match
    /// across a contiguous block (`pte_pgprot(pte_mkold(pte_mkclean(pte)))`).
    pub const fn prot(self) -> u16 {
        self.flags & !Self::ACCESS_DIRTY
    }

    /// Returns the PTE with the access and dirty bits of `other` added: what
    /// gathering one PTE of a block into another does.
    pub const fn gather(self, other: PteVal) -> PteVal {
        self.with(other.flags & Self::ACCESS_DIRTY)
    }
}

impl fmt::Debug for PteVal {
    /// Writes `pfn 0x100 VWYDC`, one letter per set flag (`-` when clear), and any
    /// other bits in hex.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pfn {:#x} ", self.pfn)?;
        for (bit, c) in
            [(Self::VALID, 'V'), (Self::WRITE, 'W'), (Self::YOUNG, 'Y'), (Self::DIRTY, 'D'), (Self::CONT, 'C')]
        {
            f.write_char(if self.flags & bit != 0 { c } else { '-' })?;
        }
        let known = Self::VALID | Self::WRITE | Self::ACCESS_DIRTY | Self::CONT;
        if self.flags & !known != 0 {
            write!(f, " +{:#x}", self.flags & !known)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::format;

    #[test]
    fn flags_match_the_simulator() {
        // crates/sim/src/pagetable.rs: P_VALID=1, P_WRITE=2, P_ACCESS=16, P_DIRTY=32, P_HUGE=64, P_CONT=128.
        assert_eq!((PteVal::VALID, PteVal::WRITE, PteVal::YOUNG, PteVal::DIRTY, PteVal::CONT), (1, 2, 16, 32, 128));
    }

    #[test]
    fn prot_ignores_access_and_dirty_only() {
        let p = PteVal::new(7, PteVal::VALID | PteVal::WRITE | PteVal::CONT | 4);
        assert_eq!(p.mkyoung().mkdirty().prot(), p.prot());
        assert_ne!(p.wrprotect().prot(), p.prot());
        assert_ne!(p.mknoncont().prot(), p.prot());
        assert_eq!(p.mkdirty().wrprotect(), PteVal::new(7, PteVal::VALID | PteVal::DIRTY | PteVal::CONT | 4));
    }

    #[test]
    fn debug_names_the_flags() {
        let p = PteVal::new(0x100, PteVal::VALID | PteVal::YOUNG | PteVal::CONT | 4);
        assert_eq!(format!("{p:?}"), "pfn 0x100 V-Y-C +0x4");
    }
}
