//! FreeBSD arm64 before ASIDs (the "before" of origin 000, FreeBSD r354285's parent).
//!
//! User page-table entries carry no nG bit, so every entry is global and visible
//! whatever ASID is in TTBR0. Switching to a different pmap therefore has to
//! drop every cached translation on every CPU: `pmap_switch` wrote TTBR0 and then
//! issued `DSB ISHST; TLBI VMALLE1IS; DSB ISH; ISB` — a broadcast that also
//! drops the kernel's own global entries. Invalidations of user pages use
//! `TLBI VAAE1IS` (all ASIDs), the whole address space `TLBI VMALLE1IS`.

use crate::fields::{Fields, Owner, Value};
use crate::hw::{Barrier, Domain, Hw, Root, Scope, Tlbi};
use crate::policy::Policy;
use crate::sync::{AtomicU32, Ordering};
use crate::types::{Asid, MmId, VirtAddr};
use alloc::vec::Vec;

/// The pre-ASID FreeBSD arm64 pmap: flush everything on every pmap switch.
pub struct NoAsid {
    /// Per CPU: the pmap whose table is in TTBR0 (`pc_curpmap`).
    curpmap: Vec<AtomicU32>,
}

impl NoAsid {
    /// Returns the policy for a machine of `ncpus` CPUs, each starting on the kernel pmap.
    pub fn new(ncpus: usize) -> Self {
        NoAsid { curpmap: (0..ncpus).map(|_| AtomicU32::new(MmId::KERNEL.0)).collect() }
    }

    fn invalidate<H: Hw>(hw: &H, op: Tlbi) {
        hw.barrier(Barrier::DsbSt(Domain::InnerShareable));
        hw.tlbi(op, Scope::Broadcast);
        hw.barrier(Barrier::Dsb(Domain::InnerShareable));
        hw.barrier(Barrier::Isb);
    }
}

impl Policy for NoAsid {
    fn user_ptes_global(&self) -> bool {
        true
    }

    fn flushes_pinned(&self) -> bool {
        // This pmap's `pmap_invalidate_page`, `_range` and `_all` run their
        // TLBIs and DSB between `sched_pin()` and `sched_unpin()`.
        true
    }

    fn mm_init(&self, _mm: MmId) {}

    fn mm_release<H: Hw>(&self, _hw: &H, _mm: MmId) {}

    fn switch_mm<H: Hw>(&self, hw: &H, next: MmId) {
        let cur = &self.curpmap[hw.cpu().index()];
        // Relaxed: only this CPU reads or writes its own curpmap here.
        if cur.load(Ordering::Relaxed) == next.0 {
            return;
        }
        cur.store(next.0, Ordering::Relaxed);
        let root = Root::Mm(next);
        hw.write_root(root, Asid::ZERO, true);
        hw.barrier(Barrier::Isb);
        Self::invalidate(hw, Tlbi::All);
    }

    fn flush_page<H: Hw>(&self, hw: &H, _mm: MmId, va: VirtAddr) {
        Self::invalidate(hw, Tlbi::VaAllAsids { va });
    }

    fn flush_range<H: Hw>(&self, hw: &H, _mm: MmId, start: VirtAddr, pages: u64) {
        hw.barrier(Barrier::DsbSt(Domain::InnerShareable));
        for i in 0..pages {
            hw.tlbi(Tlbi::VaAllAsids { va: start.add_pages(i) }, Scope::Broadcast);
        }
        hw.barrier(Barrier::Dsb(Domain::InnerShareable));
        hw.barrier(Barrier::Isb);
    }

    fn flush_mm<H: Hw>(&self, hw: &H, _mm: MmId) {
        Self::invalidate(hw, Tlbi::All);
    }

    fn flush_kernel_range<H: Hw>(&self, hw: &H, start: VirtAddr, pages: u64) {
        self.flush_range(hw, MmId::KERNEL, start, pages);
    }

    fn name_fields(&self, f: &mut dyn Fields) {
        for (c, p) in self.curpmap.iter().enumerate() {
            f.add(p, format_args!("pc_curpmap[cpu{c}]"), Value::Mm);
            // Only the CPU itself switches its pmap.
            f.own(p, Owner::Cpu { cpu: c as u32, others_read: true });
        }
    }
}
