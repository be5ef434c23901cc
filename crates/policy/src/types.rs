//! Hardware facts as types: each constructor checks the hardware limit.

use core::fmt;

/// An address-space identifier as the TLB tags entries with it (arm64 ASID,
/// x86 PCID). The width is a property of the machine, so [`Asid::new`] takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Asid(u16);

/// The error for an ASID value that does not fit the machine's ASID width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AsidTooBig {
    /// The value that was asked for.
    pub value: u32,
    /// The machine's ASID width in bits.
    pub bits: u8,
}

impl fmt::Display for AsidTooBig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ASID {} does not fit in {} bits (largest is {})", self.value, self.bits, (1u32 << self.bits) - 1)
    }
}

impl Asid {
    /// Returns the ASID `value` if it fits in `bits` bits.
    pub fn new(value: u32, bits: u8) -> Result<Asid, AsidTooBig> {
        if bits <= 16 && value < (1u32 << bits) {
            Ok(Asid(value as u16))
        } else {
            Err(AsidTooBig { value, bits })
        }
    }

    /// Returns ASID 0, which every width has (the kernel's reserved ASID on arm64).
    pub const ZERO: Asid = Asid(0);

    /// Returns the raw tag value.
    pub const fn get(self) -> u16 {
        self.0
    }
}

impl fmt::Display for Asid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// An x86 process-context identifier: the 12-bit tag in CR3 bits 11:0 (Intel SDM
/// vol. 3A, 4.10.1). Linux and FreeBSD use it as the [`Asid`] of the TLB.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Pcid(u16);

/// The error for a PCID value that does not fit in 12 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PcidTooBig(pub u16);

impl fmt::Display for PcidTooBig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PCID {} does not fit in 12 bits (largest is 4095)", self.0)
    }
}

impl Pcid {
    /// Returns the PCID `value` if it fits in 12 bits.
    pub const fn new(value: u16) -> Result<Pcid, PcidTooBig> {
        if value < 4096 {
            Ok(Pcid(value))
        } else {
            Err(PcidTooBig(value))
        }
    }

    /// Returns the raw value.
    pub const fn get(self) -> u16 {
        self.0
    }

    /// Returns the PCID as the tag the TLB uses.
    pub const fn asid(self) -> Asid {
        Asid(self.0)
    }
}

/// A CPU number, `0..ncpus`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CpuId(pub u32);

impl CpuId {
    /// Returns the CPU number as an index.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for CpuId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cpu{}", self.0)
    }
}

/// An address space (a FreeBSD pmap, a Linux `mm_struct`), by slot.
///
/// Slots are reused after an address space is destroyed, exactly as a kernel
/// reuses the memory of a freed `mm_struct`; [`MmId::KERNEL`] is the kernel's own
/// address space (FreeBSD's `pmap0`, Linux's `init_mm`), never allocated or freed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MmId(pub u32);

impl MmId {
    /// The kernel's address space: kernel threads and idle run on it.
    pub const KERNEL: MmId = MmId(0);

    /// Returns the slot as an index.
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// Returns whether this is the kernel's address space.
    pub const fn is_kernel(self) -> bool {
        self.0 == 0
    }
}

impl fmt::Display for MmId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_kernel() {
            write!(f, "mm:kernel")
        } else {
            write!(f, "mm{}", self.0)
        }
    }
}

/// A virtual address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct VirtAddr(pub u64);

impl VirtAddr {
    /// The size of a base page.
    pub const PAGE_SIZE: u64 = 4096;

    /// Returns the address of the `n`th base page after this one.
    pub const fn add_pages(self, n: u64) -> VirtAddr {
        VirtAddr(self.0 + n * Self::PAGE_SIZE)
    }

    /// Returns the address rounded down to its base page.
    pub const fn page_base(self) -> VirtAddr {
        VirtAddr(self.0 & !(Self::PAGE_SIZE - 1))
    }
}

impl fmt::Display for VirtAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asid_width_is_checked() {
        assert!(Asid::new(255, 8).is_ok());
        let err = Asid::new(256, 8).unwrap_err();
        assert_eq!(err.to_string(), "ASID 256 does not fit in 8 bits (largest is 255)");
        assert!(Asid::new(65535, 16).is_ok());
    }

    #[test]
    fn pcid_is_twelve_bits() {
        assert_eq!(Pcid::new(4095).unwrap().asid().get(), 4095);
        assert_eq!(Pcid::new(4096).unwrap_err().to_string(), "PCID 4096 does not fit in 12 bits (largest is 4095)");
    }
}
