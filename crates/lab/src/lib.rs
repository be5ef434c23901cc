//! The tlbkit lab: what a researcher does with runs of the simulator
//! ([`tlbkit_sim`], the machine a policy runs on). Nothing here changes what a
//! run does; it chooses runs, runs many of them, and summarises, judges and
//! draws what they gave.
//!
//! Layout (one concept per file):
//! - [`claims`]: the origin claims `tlbkit reproduce` checks; [`calibrate`]: the model against the host it runs on
//!   (`tlbkit calibrate`).
//! - [`stats`]: ministat's summary figures and Student's t test; [`compare`]: policies against the first over
//!   many seeds (`tlbkit compare`); [`batch`]: many runs on the host's cores.
//! - [`sweep`]: a grid of runs from a TOML file, recorded line by line and resumed (`tlbkit sweep`).
//! - [`plot`]: charts as SVG, and HTML pages of charts and ministat tables (`tlbkit plot`, `tlbkit report`).
//! - [`trace`]: traces of real programs imported from valgrind lackey and strace logs (`tlbkit trace import`),
//!   for the simulator's `trace` workload to replay.
//! - [`validate`]: the simulator against published measurements, a corpus of TOML files (`tlbkit validate`).
//! - [`error`]: what goes wrong, as typed errors each front end words for its users.

pub mod batch;
pub mod calibrate;
pub mod claims;
pub mod compare;
pub mod error;
pub mod plot;
pub mod stats;
pub mod sweep;
pub mod trace;
pub mod validate;

pub use error::Error;
