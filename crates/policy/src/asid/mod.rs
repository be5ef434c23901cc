//! Address-space identifier management: who gets which ASID, and what a context
//! switch must invalidate.
//!
//! - [`noasid`]: FreeBSD arm64 before seed 000 — one ASID, global user mappings,
//!   a broadcast invalidation of everything on every address-space switch.
//! - [`freebsd_epoch`]: FreeBSD arm64 after seed 000 — the epoch allocator.

pub mod freebsd_epoch;
pub mod noasid;

pub use freebsd_epoch::FreebsdEpoch;
pub use noasid::NoAsid;
