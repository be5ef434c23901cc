//! The tlbkit machine simulator, the machine a policy runs on: CPUs with
//! ASID-tagged TLBs, page tables, an interconnect for broadcast invalidations, a
//! small kernel, workloads, and the oracle that judges every translation. What a
//! researcher does with runs (origin claims, comparisons, sweeps, charts, trace
//! import) is the `tlbkit-lab` crate, built on this one.
//!
//! Layout (one concept per file):
//! - [`preset`]: machines and their documented costs; `preset::host`, the machine `tlbkit calibrate` measured.
//! - [`tlb`], `pagetable`, `frames`: the memory-management hardware and memory.
//! - `machine`: per-CPU hardware state, the interconnect, and the [`tlbkit_policy::Hw`] implementation;
//!   `holders`: which TLBs a broadcast invalidation must visit; `pending`: broadcast invalidations on their
//!   way, which a TLB applies when they reach it or at the issuer's completing barrier; `stalls`: the time running CPUs lose to
//!   incoming DVM messages, charged lazily; [`interconnect`]: the limits on broadcasts in flight (per
//!   requester, and the DVM nodes' queue and tracker).
//! - [`coherence`]: cache lines of policy state and of the kernel's named structures; [`locks`]: the kernel's
//!   spinlock, rwsem and mutex on them;
//!   `timeline`: a resource used one interval at a time (a line's moves, a lock's holds).
//! - [`swapdev`]: the swap device page-out writes to and swap-ins read from.
//! - [`oracle`]: obligations and violations.
//! - [`program`]: what simulated threads run.
//! - [`sim`]: the kernel and the discrete-event engine (`step`/`run`); [`sched`]: the scheduling classes
//!   (FIFO, CFS, EEVDF) its scheduler runs.
//! - [`workload`]: the origins' benchmarks as programs.
//! - [`machine_bench`]: `tlbkit calibrate`'s microbenchmarks that need no kernel, on the machine model (the others
//!   are the `microbench` workload).
//! - `host`: what the simulator asks of the host's operating system (2 MB pages for a large machine's TLBs).
//! - [`run`]: a run's parameters (`key=value` settings among them), and one run end to end (the policies and what each is are the
//!   `tlbkit-registry` crate's); [`metrics`]: what each reported figure means, and its unit.
//! - [`trace`]: the file of a real program's trace that the `trace` workload replays.
//! - [`toggle`]: the kernel's on|off behaviours a run may turn the other way (`--set KEY=on|off`), one entry each.
//! - [`error`]: what went wrong, as data ([`Error`]), for each front end to word in its own terms.

pub mod cancel;
pub mod catalog;
pub mod coherence;
pub(crate) mod cpu;
pub mod error;
#[cfg(all(debug_assertions, target_os = "linux"))]
pub(crate) mod event_frame;
pub(crate) mod frames;
pub(crate) mod holders;
pub(crate) mod host;
pub mod interconnect;
pub mod kernel;
pub mod locks;
pub(crate) mod machine;
pub mod machine_bench;
pub mod metrics;
pub mod mm_layout;
pub mod noise;
pub mod oracle;
pub(crate) mod pagetable;
pub(crate) mod pending;
pub mod preset;
pub mod program;
pub mod run;
pub mod sched;
pub mod sim;
pub(crate) mod stalls;
pub mod swapdev;
pub(crate) mod timeline;
pub mod tlb;
pub mod toggle;
pub mod trace;
pub mod workload;

pub use error::Error;
