//! The tlbkit machine simulator: CPUs with ASID-tagged TLBs, page tables, an
//! interconnect for broadcast invalidations, a small kernel, workloads, and the
//! oracle that judges every translation.
//!
//! Layout (one concept per file):
//! - [`preset`]: machines and their documented costs.
//! - [`tlb`], [`pagetable`], [`frames`]: the memory-management hardware and memory.
//! - [`machine`]: per-CPU hardware state, the interconnect, and the [`tlbkit_policy::Hw`] implementation;
//!   [`holders`]: which TLBs a broadcast invalidation must visit; [`stalls`]: the time running CPUs lose to
//!   incoming DVM messages, charged lazily.
//! - [`oracle`]: obligations and violations.
//! - [`program`]: what simulated threads run.
//! - [`sim`]: the kernel and the discrete-event engine (`step`/`run`).
//! - [`workload`]: the seeds' benchmarks as programs.
//! - [`registry`], [`run`]: names, `--set` parameters, and one run end to end; [`metrics`]: what each reported
//!   figure means, and its unit.
//! - [`claims`]: the seed claims `tlbkit reproduce` checks.
//! - [`stats`]: ministat's summary figures and Student's t test; [`compare`]: policies against the first over
//!   many seeds (`tlbkit compare`); [`batch`]: many runs on the host's cores.
//! - [`sweep`]: a grid of runs from a TOML file, recorded line by line and resumed (`tlbkit sweep`).
//! - [`plot`]: charts as SVG, and HTML pages of charts and ministat tables (`tlbkit plot`, `tlbkit report`).

pub mod batch;
pub mod claims;
pub mod compare;
pub mod frames;
pub mod holders;
pub mod machine;
pub mod metrics;
pub mod oracle;
pub mod pagetable;
pub mod plot;
pub mod preset;
pub mod program;
pub mod registry;
pub mod run;
pub mod sim;
pub mod stalls;
pub mod stats;
pub mod sweep;
pub mod tlb;
pub mod trace;
pub mod workload;
