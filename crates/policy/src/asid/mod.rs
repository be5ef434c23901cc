//! Address-space identifier management: who gets which ASID, and what a context
//! switch must invalidate.
//!
//! - [`noasid`]: FreeBSD arm64 before origin 000 — one ASID, global user mappings,
//!   a broadcast invalidation of everything on every address-space switch.
//! - [`freebsd_epoch`]: FreeBSD arm64 after origin 000 — the epoch allocator.
//! - [`linux_arm64`]: Linux arm64 (`arch/arm64/mm/context.c`) — the rollover
//!   allocator: generations, per-CPU reserved ASIDs, a deferred local flush instead
//!   of a broadcast on rollover, pinned ASIDs and KPTI pairs.
//! - [`linux_arm64_skipbcast`]: origin 001 on top of it — `nr_active_mm` and a per-mm
//!   stale mask let a user flush stay local (or vanish) when no other CPU runs the
//!   mm; a stale CPU flushes the ASID locally at its next switch to it.
//! - [`linux_arm64_activecpu`]: Ryan Roberts' `active_cpu` (2025) on top of it —
//!   one word per mm (never run, one CPU, many) lets a user flush stay local when
//!   the mm only ever ran on the flushing CPU.
//! - [`linux_arm64_tlbmode`]: Christoph Lameter's TLB modes for Ampere (2023) on
//!   top of it — each user flush is skipped, local, sent by IPI to the CPUs of
//!   the mm's `mm_cpumask`, or broadcast, by the weight of that mask.
//! - [`linux_pcid`]: Linux x86 (origin 002) — a per-CPU cache of the 6 most recently
//!   used mms in PCID slots, lazy TLB mode and `tlb_gen` shootdowns; with PCIDs off,
//!   every change of mm flushes.
//! - [`linux_x86_410`]: Linux x86 v4.10, LATR's base: no PCID, flush IPIs to
//!   every CPU of the mask, lazy ones leaving the mm (`leave_mm`).
//! - [`linux_x86_513`]: Linux x86 v5.12 and v5.13, before and after Nadav Amit's
//!   concurrent TLB flush series: the local flush before the IPIs or between the
//!   IPIs and the wait, `is_lazy` on the line of `loaded_mm` or on its own, the
//!   `smp_call_function` csds written out line by line.
//! - [`linux_x86_615`]: Linux x86 after the origins — v6.13's `tlb.c`, the lazily
//!   trimmed `mm_cpumask` of v6.14, and v6.15's AMD broadcast invalidation with
//!   global ASIDs (`INVLPGB`/`TLBSYNC`).
//! - [`freebsd_pcid`]: FreeBSD amd64 — per-pmap, per-CPU PCIDs with a per-CPU
//!   generation, `pm_active` IPI shootdowns through a [`crate::shootdown`]
//!   completion protocol (origin 003), `pm_gen` zeroing for inactive CPUs.
//!
//! The Linux x86 models share, in a private `linux_x86_common`, the pieces of
//! `tlb.c` that read the same in every release they model (`choose_new_asid`,
//! `inc_mm_tlb_gen`, the flush `flush_tlb_func` ends with, ...).

pub mod freebsd_epoch;
pub mod freebsd_pcid;
pub mod latr;
pub mod linux_arm64;
pub mod linux_arm64_activecpu;
pub mod linux_arm64_skipbcast;
pub mod linux_arm64_tlbmode;
pub mod linux_pcid;
pub mod linux_x86_410;
pub mod linux_x86_513;
pub mod linux_x86_615;
mod linux_x86_common;
pub mod noasid;

pub use freebsd_epoch::FreebsdEpoch;
pub use freebsd_pcid::FreebsdX86;
pub use latr::Latr;
pub use linux_arm64::LinuxArm64;
pub use linux_arm64_skipbcast::TlbFlushKind;
pub use linux_pcid::LinuxX86;
pub use linux_x86_410::LinuxX86v410;
pub use linux_x86_513::LinuxX86v513;
pub use linux_x86_615::LinuxX86v615;
pub use noasid::NoAsid;
