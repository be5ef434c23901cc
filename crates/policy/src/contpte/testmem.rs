//! An in-memory page table for the contpte unit tests: it logs every call the arch
//! layer makes, in order, and plays the hardware (or another CPU) at chosen points
//! between two calls.

use super::{PteMem, PteVal, CONT_PTES};
use crate::types::{MmId, VirtAddr};
use std::collections::BTreeMap;
use std::vec::Vec;

/// The address space the tests use.
pub const MM: MmId = MmId(1);

/// The first page of the first block the tests map (VA 0x400000).
pub const B: u64 = 0x400;
/// The first frame of that block's folio.
pub const PFN: u64 = 0x100;
/// Flag shorthands for the tests' PTEs.
pub const V: u16 = PteVal::VALID;
/// Valid and writable.
pub const VW: u16 = PteVal::VALID | PteVal::WRITE;
/// Young (access flag).
pub const Y: u16 = PteVal::YOUNG;
/// Dirty.
pub const D: u16 = PteVal::DIRTY;
/// Contiguous.
pub const C: u16 = PteVal::CONT;

/// Returns the address of page number `page`.
pub fn va(page: u64) -> VirtAddr {
    VirtAddr(page * VirtAddr::PAGE_SIZE)
}

/// One call the arch layer made, with addresses as page numbers (`va / 4096`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// `get(page)`.
    Get(u64),
    /// `set(page, pte)`.
    Set(u64, PteVal),
    /// `get_and_clear(page)`.
    Clear(u64),
    /// `cmpxchg(page, ..)` and whether it succeeded.
    Cmpxchg(u64, bool),
    /// `flush_tlb_range(page, pages)`.
    Flush(u64, u64),
}

/// The kind of a [`Call`], to count them and to trigger on them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// [`Call::Get`].
    Get,
    /// [`Call::Set`].
    Set,
    /// [`Call::Clear`].
    Clear,
    /// [`Call::Cmpxchg`].
    Cmpxchg,
    /// [`Call::Flush`].
    Flush,
}

impl Call {
    /// Returns the call's kind.
    pub fn kind(self) -> Kind {
        match self {
            Call::Get(_) => Kind::Get,
            Call::Set(..) => Kind::Set,
            Call::Clear(_) => Kind::Clear,
            Call::Cmpxchg(..) => Kind::Cmpxchg,
            Call::Flush(..) => Kind::Flush,
        }
    }
}

/// Something that happens between two calls.
#[derive(Clone, Copy, Debug)]
pub enum Act {
    /// Hardware sets `bits` (access flag, dirty) in the PTE of `page` if it is valid.
    Hw {
        /// The page whose PTE hardware updates.
        page: u64,
        /// The bits it sets.
        bits: u16,
    },
    /// Another CPU stores `pte` into the PTE of `page`.
    Store {
        /// The page.
        page: u64,
        /// The new value.
        pte: PteVal,
    },
}

/// The page tables of [`MM`] (and any other mm), a call log and a plan of acts.
#[derive(Default)]
pub struct TestMem {
    ptes: BTreeMap<(u32, u64), PteVal>,
    /// Every call, in order.
    pub log: Vec<Call>,
    plan: Vec<(Kind, usize, Act)>,
    /// Hardware updates that found their PTE invalid (hardware cannot set bits
    /// there; a real CPU would fault instead).
    pub hw_dropped: usize,
}

impl TestMem {
    /// Returns empty page tables.
    pub fn new() -> TestMem {
        TestMem::default()
    }

    /// Writes the PTE of `page` in `mm` directly (no log).
    pub fn put(&mut self, mm: MmId, page: u64, pte: PteVal) {
        self.ptes.insert((mm.0, page), pte);
    }

    /// Writes a folded block in [`MM`] from `page` (block-aligned) mapping frames
    /// from `pfn` with `flags` and the contiguous bit.
    pub fn put_block(&mut self, page: u64, pfn: u64, flags: u16) {
        assert_eq!(page % CONT_PTES, 0, "put_block: page {page} is not block-aligned");
        for i in 0..CONT_PTES {
            self.put(MM, page + i, PteVal::new(pfn + i, flags | PteVal::CONT));
        }
    }

    /// Reads the PTE of `page` in `mm` directly (no log).
    pub fn pte(&self, mm: MmId, page: u64) -> PteVal {
        self.ptes.get(&(mm.0, page)).copied().unwrap_or(PteVal::NONE)
    }

    /// Returns the PTEs of [`MM`]'s pages `pages`.
    pub fn ptes(&self, pages: core::ops::Range<u64>) -> Vec<PteVal> {
        pages.map(|p| self.pte(MM, p)).collect()
    }

    /// Makes `act` happen right after the `nth` (from 1) call of `kind` returns.
    pub fn after(&mut self, kind: Kind, nth: usize, act: Act) {
        self.plan.push((kind, nth, act));
    }

    /// Returns how many calls of `kind` the log holds.
    pub fn count(&self, kind: Kind) -> usize {
        self.log.iter().filter(|c| c.kind() == kind).count()
    }

    /// Returns the log without the reads.
    pub fn writes(&self) -> Vec<Call> {
        self.log.iter().copied().filter(|c| c.kind() != Kind::Get).collect()
    }

    /// Clears the log (not the plan).
    pub fn clear_log(&mut self) {
        self.log.clear();
    }

    /// Logs `call` and runs the acts planned for right after it.
    fn record(&mut self, call: Call) {
        self.log.push(call);
        let kind = call.kind();
        let n = self.count(kind);
        let due: Vec<Act> = self.plan.iter().filter(|(k, nth, _)| *k == kind && *nth == n).map(|p| p.2).collect();
        for act in due {
            match act {
                Act::Hw { page, bits } => {
                    let pte = self.pte(MM, page);
                    if pte.valid() {
                        self.put(MM, page, PteVal::new(pte.pfn, pte.flags | bits));
                    } else {
                        self.hw_dropped += 1;
                    }
                }
                Act::Store { page, pte } => self.put(MM, page, pte),
            }
        }
    }
}

/// Returns the page number of `va`.
fn page(va: VirtAddr) -> u64 {
    assert_eq!(va.0 % VirtAddr::PAGE_SIZE, 0, "{va} is not page-aligned");
    va.0 / VirtAddr::PAGE_SIZE
}

impl PteMem for TestMem {
    fn get(&mut self, mm: MmId, va: VirtAddr) -> PteVal {
        let pte = self.pte(mm, page(va));
        self.record(Call::Get(page(va)));
        pte
    }

    fn set(&mut self, mm: MmId, va: VirtAddr, pte: PteVal) {
        self.put(mm, page(va), pte);
        self.record(Call::Set(page(va), pte));
    }

    fn get_and_clear(&mut self, mm: MmId, va: VirtAddr) -> PteVal {
        let pte = self.pte(mm, page(va));
        self.put(mm, page(va), PteVal::NONE);
        self.record(Call::Clear(page(va)));
        pte
    }

    fn cmpxchg(&mut self, mm: MmId, va: VirtAddr, old: PteVal, new: PteVal) -> Result<(), PteVal> {
        let now = self.pte(mm, page(va));
        let ok = now == old;
        if ok {
            self.put(mm, page(va), new);
        }
        self.record(Call::Cmpxchg(page(va), ok));
        if ok {
            Ok(())
        } else {
            Err(now)
        }
    }

    fn flush_tlb_range(&mut self, _mm: MmId, va: VirtAddr, pages: u64) {
        self.record(Call::Flush(page(va), pages));
    }
}
