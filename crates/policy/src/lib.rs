//! TLB-management policies, written the way a kernel's arch layer writes them.
//!
//! Every policy here is a faithful re-implementation of a mechanism from a real
//! kernel (each module's docs cite the kernel source, commit or review it follows). Policies talk to the
//! machine only through the [`Hw`] trait (what an arch layer can do: write the
//! translation root, invalidate TLBs locally or by broadcast, send IPIs, issue
//! barriers) and keep their shared state in the atomics facade [`sync`], so the
//! simulator and the checker run the very same code.
//!
//! The crate is `no_std` (it uses `alloc` for per-CPU and per-address-space
//! arrays sized once at construction); `std` is linked only for unit tests.
//!
//! Layout:
//! - [`types`]: hardware facts as validated newtypes (`Asid`, `CpuId`, `MmId`, `VirtAddr`).
//! - [`hw`]: the hardware interface policies are written against.
//! - [`sync`]: the atomics facade and the spin lock.
//! - [`cpumask`]: an atomic CPU set.
//! - [`fields`]: names of a policy's shared fields, for the checker's traces.
//! - [`policy`]: the [`Policy`] trait the kernel calls into.
//! - [`asid`]: address-space identifier allocators (`noasid`, `freebsd_epoch`,
//!   `linux_arm64`, `linux_arm64_skipbcast`, `linux_pcid`, `freebsd_pcid`).
//! - [`shootdown`]: IPI shootdown completion protocols (FreeBSD x86 `counter`,
//!   `generation`, `scoreboard`), each in issue / dispatch / sync phases.
//! - [`contpte`]: arm64 contiguous PTEs and the four exit-teardown strategies of origin 004.
//! - [`zoo`]: real bugs of these mechanisms, each re-introduced by one switch in the
//!   policy code (`with_bug`), and their registry [`zoo::ZOO`] for the checker.
//! - [`findings`]: hazards the checker finds in code still upstream, each window with
//!   the command that finds it and its replay token ([`findings::FINDINGS`]).
#![cfg_attr(not(any(test, feature = "testhw")), no_std)]
#![deny(missing_docs, unsafe_op_in_unsafe_fn)]

extern crate alloc;

pub mod asid;
pub mod contpte;
pub mod cpumask;
pub mod fields;
pub mod findings;
pub mod hw;
pub mod policy;
pub mod shootdown;
pub mod sync;
#[cfg(any(test, feature = "testhw"))]
pub mod testhw;
pub mod types;
pub mod wrap;
pub mod zoo;

pub use cpumask::CpuMask;
pub use fields::{Fields, Named, Owner, Value};
pub use hw::{Access, Barrier, Defer, Domain, FlushTicket, Hw, Note, Phase, Root, Scope, Tlbi};
pub use policy::{Lazy, Policy, Tick};
pub use types::{Asid, AsidTooBig, CpuId, MmId, Pcid, PcidTooBig, VirtAddr};
pub use zoo::Bug;
