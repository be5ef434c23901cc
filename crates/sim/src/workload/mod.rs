//! The origins' benchmarks, written as programs for the simulated kernel.
//!
//! A workload is one entry, its module's [`WorkloadDef`] listed in
//! [`WORKLOADS`]: its parameters (with defaults and limits, so `--set` can
//! check them), whose benchmark it is, how it builds its processes in a booted
//! [`Sim`], how it turns what the run recorded into its result, and how many
//! address spaces it needs. Nothing else dispatches on its name. Some, like
//! lmbench's `lat_ctx`, measure a second *overhead* phase that is subtracted,
//! as the original benchmark does.
//!
//! A workload declares each parameter once, with `params!` (`param.rs`): a `const`
//! handle of its kind ([`Count`], [`Real`] or [`Flag`]) wrapping its
//! [`ParamDef`], and the list of them its entry gives (`PARAMS`); it reads a
//! value through the handle (`ITERS.of(p)`), never by its key. Its entry is
//! [`WorkloadDef::new`] (name, description, parameters, results, `setup`,
//! `result`, `max_mms`), with [`WorkloadDef::origin`],
//! [`WorkloadDef::with_overhead`] or [`WorkloadDef::with_texts`] where it has
//! those.
//!
//! Contents: [`lat_ctx`] and [`buildkernel`] (origin 000), [`mprotect_threaded`],
//! [`tcmalloc_frag`] and [`sort_compute`] (origin 001), [`pingpong`] (origin 002),
//! [`fileserver`] (origin 003), [`exit_teardown`] (origin 004); [`trace`] replays
//! a real program's trace; [`stress`] races flushes of one address space
//! across CPUs for the `--strict` oracle. After the origins:
//! [`will_it_scale_tlb_flush2`] (the lazy `mm_cpumask` and INVLPGB series) and
//! [`hackbench`] (pipes between processes: switches between address spaces);
//! [`munmap_latency`] (LATR's microbenchmark) and [`apache_like`] (its
//! macrobenchmark); [`lat_mmap`] (lmbench's map, touch and unmap of a shared
//! file) and [`stress_ng_tlb_shootdown`] (stress-ng's `--tlb-shootdown`);
//! [`madvise_bench`] (one `madvise(MADV_PAGEOUT)` of 64 KB folios, Dev Jain's
//! benchmark); [`redis_like`] (a single-threaded store that forks to save and
//! reuses freed memory: the arm64 `active_cpu` thread's workload);
//! [`lat_proc`] (lmbench's fork, exit and wait) and [`flush_range`] (the cost of
//! an `mprotect`'s range flush by its page count, in a process live on every
//! CPU); [`swap_w_seq_mt`] (vm-scalability's threads writing past a memory
//! limit: direct reclaim to swap, reclaim's batched flush);
//! [`will_it_scale_tlb_flush1`], [`will_it_scale_tlb_flush3`] (private and
//! shared file mappings advised page by page) and
//! [`will_it_scale_context_switch1`] (pipe round trips between two tasks on one
//! CPU), which share will-it-scale's harness, [`will_it_scale`], with
//! `tlb_flush2`, in threads or process mode; [`pmbench_migrate`]
//! (pmbench's random accesses while `migratepages` moves its pages between
//! nodes: migration's batched flush) and [`swap_pageout`] (`MADV_PAGEOUT` of
//! memory several CPUs map: reclaim's batched flush). [`microbench`] is
//! `tlbkit calibrate`'s host microbenchmarks, run in the model. For the
//! history before the origins, besides will-it-scale: [`pft`] (mmtests' page
//! fault test: faults of many threads on one VMA, or of many processes),
//! [`madvise_dontneed_loop`] (threads each zapping and refaulting one page: a
//! one-page flush of every CPU running the mm per iteration) and
//! [`lru_file_mmap_read`] (vm-scalability's processes reading files larger
//! than memory: reclaim of mapped page cache, its batched flush).

pub mod apache_like;
pub mod buildkernel;
pub mod exit_teardown;
pub mod fileserver;
pub mod flush_call;
pub mod flush_range;
pub mod hackbench;
pub mod lat_ctx;
pub mod lat_mmap;
pub mod lat_proc;
pub mod lru_file_mmap_read;
pub mod madvise_bench;
pub mod madvise_dontneed_loop;
pub mod microbench;
pub mod mprotect_threaded;
pub mod munmap_latency;
pub mod pft;
pub mod pingpong;
pub mod pmbench_migrate;
pub mod redis_like;
pub mod sort_compute;
pub mod stress;
pub mod stress_ng_tlb_shootdown;
pub mod swap_pageout;
pub mod swap_w_seq_mt;
pub mod tcmalloc_frag;
pub mod trace;
pub mod will_it_scale;
pub mod will_it_scale_context_switch1;
pub mod will_it_scale_tlb_flush1;
pub mod will_it_scale_tlb_flush2;
pub mod will_it_scale_tlb_flush3;

mod param;
mod queue;
mod usemem;
pub(crate) use param::params;
pub use param::{Count, Flag, Real};
pub(crate) use queue::OpQueue;

use crate::error::Error;
use crate::program::{Op, Program, Sys};
use crate::sim::Sim;
use std::collections::BTreeMap;

/// A parent process that forks `children` (each made by `child` from the pipe it
/// writes when it finishes), waits for all of them, marks `"end"` and exits: the
/// `make -jN` of `buildkernel` and the script of `sort_compute`.
pub(crate) struct ForkAll<F: FnMut(u32) -> Box<dyn Program>> {
    children: u64,
    child: F,
    done: u32,
    step: u64,
}

impl<F: FnMut(u32) -> Box<dyn Program>> ForkAll<F> {
    /// Returns the parent of `children` processes made by `child`.
    pub(crate) fn new(children: u64, child: F) -> Self {
        ForkAll { children, child, done: 0, step: 0 }
    }
}

impl<F: FnMut(u32) -> Box<dyn Program>> Program for ForkAll<F> {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        let (s, n) = (self.step, self.children);
        if s == 1 {
            return Op::Sys(Sys::Pipe);
        }
        if s == 2 {
            self.done = ret as u32;
        }
        if s <= n + 1 {
            return Op::Sys(Sys::Fork((self.child)(self.done)));
        }
        if s <= 2 * n + 1 {
            return Op::Sys(Sys::PipeRead(self.done));
        }
        if s == 2 * n + 2 {
            return Op::Mark("end");
        }
        Op::Exit
    }
}

/// A workload parameter: its name, default, inclusive limits and meaning.
#[derive(Clone, Copy, Debug)]
pub struct ParamDef {
    /// The `--set` key.
    pub key: &'static str,
    /// Default value.
    pub default: f64,
    /// Smallest allowed value.
    pub min: f64,
    /// Largest allowed value.
    pub max: f64,
    /// What it means.
    pub doc: &'static str,
}

/// A workload parameter whose value is text (a file's path), not a number.
#[derive(Clone, Copy, Debug)]
pub struct TextParamDef {
    /// The `--set` key; the workload needs it given.
    pub key: &'static str,
    /// What it means.
    pub doc: &'static str,
}

/// Text parameter values by key.
pub type Texts = BTreeMap<String, String>;

/// A workload's result figures by key.
pub type Figures = BTreeMap<String, f64>;

/// Returns the text parameters of workload `name` (most have none).
pub fn text_params(name: &str) -> &'static [TextParamDef] {
    by_name(name).map_or(&[], |w| w.text_params)
}

/// Returns the error of a workload no entry is called `name`.
pub fn unknown(name: &str) -> Error {
    Error::UnknownWorkload { name: name.to_string(), valid: WORKLOADS.iter().map(|w| w.name).collect() }
}

/// Which part of a workload's measurement a simulation runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// The measurement itself.
    Main,
    /// The benchmark's own overhead, subtracted from the main phase.
    Overhead,
}

impl Phase {
    /// Returns the phase's name in messages: `Main`, `Overhead`.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Main => "Main",
            Phase::Overhead => "Overhead",
        }
    }
}

/// A registered workload.
#[derive(Clone, Copy, Debug)]
pub struct WorkloadDef {
    /// The name used on the command line.
    pub name: &'static str,
    /// One line for `tlbkit list`.
    pub description: &'static str,
    /// The origin whose benchmark it is (`"000"` to `"004"`, the documents
    /// tlbkit comes from), or `None`: a benchmark of a mechanism after the
    /// origins or of the history before them, or one of tlbkit's own tools
    /// (`trace`, `stress`, `microbench`). Tests that speak of the origins'
    /// workloads read this, never a list of names.
    pub origin: Option<&'static str>,
    /// Its parameters.
    pub params: &'static [ParamDef],
    /// Whether it has an overhead phase.
    pub has_overhead: bool,
    /// The result keys it reports, the first one being its headline.
    pub results: &'static [&'static str],
    /// Its text parameters (most have none).
    pub text_params: &'static [TextParamDef],
    /// Starts its processes in a booted simulator for a phase, from its
    /// parameters and text parameters.
    pub setup: Setup,
    /// Its result, from its finished main phase and, where it has one, its
    /// overhead phase.
    pub result: Reckon,
    /// The address spaces it needs at most at once on a number of CPUs
    /// (exited ones a lazy CPU still holds are the caller's to add).
    pub max_mms: MaxMms,
}

/// What a workload's `setup` is: it starts its processes in a booted
/// simulator for a phase, from its parameters and text parameters.
pub type Setup = fn(&Params, &Texts, &mut Sim, Phase) -> Result<(), Error>;
/// What a workload's `result` is: its figures from its finished main phase
/// and, where it has one, its overhead phase.
pub type Reckon = fn(&Params, &Sim, Option<&Sim>) -> Result<Figures, Error>;
/// What a workload's `max_mms` is: the address spaces it needs at most at
/// once on a number of CPUs.
pub type MaxMms = fn(&Params, &Texts, usize) -> usize;

impl WorkloadDef {
    /// An entry as most workloads have it: after the origins (or one of
    /// tlbkit's own tools), no overhead phase, no text parameters. The
    /// arguments are the fields of the same names, in their order;
    /// [`origin`](Self::origin), [`with_overhead`](Self::with_overhead) and
    /// [`with_texts`](Self::with_texts) change the rest.
    pub const fn new(
        name: &'static str,
        description: &'static str,
        params: &'static [ParamDef],
        results: &'static [&'static str],
        setup: Setup,
        result: Reckon,
        max_mms: MaxMms,
    ) -> Self {
        WorkloadDef {
            name,
            description,
            origin: None,
            params,
            has_overhead: false,
            results,
            text_params: &[],
            setup,
            result,
            max_mms,
        }
    }

    /// The entry of origin `origin`'s benchmark (`"000"` to `"004"`).
    pub const fn origin(self, origin: &'static str) -> Self {
        WorkloadDef { origin: Some(origin), ..self }
    }

    /// The entry with an overhead phase.
    pub const fn with_overhead(self) -> Self {
        WorkloadDef { has_overhead: true, ..self }
    }

    /// The entry with text parameters.
    pub const fn with_texts(self, text_params: &'static [TextParamDef]) -> Self {
        WorkloadDef { text_params, ..self }
    }
}

/// Every workload.
pub const WORKLOADS: &[WorkloadDef] = &[
    lat_ctx::DEF,
    pingpong::DEF,
    mprotect_threaded::DEF,
    tcmalloc_frag::DEF,
    sort_compute::DEF,
    fileserver::DEF,
    buildkernel::DEF,
    exit_teardown::DEF,
    trace::DEF,
    stress::DEF,
    will_it_scale_tlb_flush2::DEF,
    hackbench::DEF,
    munmap_latency::DEF,
    apache_like::DEF,
    lat_mmap::DEF,
    stress_ng_tlb_shootdown::DEF,
    madvise_bench::DEF,
    redis_like::DEF,
    lat_proc::DEF,
    flush_range::DEF,
    flush_call::DEF,
    microbench::DEF,
    swap_w_seq_mt::DEF,
    will_it_scale_tlb_flush1::DEF,
    will_it_scale_tlb_flush3::DEF,
    will_it_scale_context_switch1::DEF,
    pmbench_migrate::DEF,
    swap_pageout::DEF,
    pft::DEF,
    madvise_dontneed_loop::DEF,
    lru_file_mmap_read::DEF,
];

/// Returns the workload called `name`.
pub fn by_name(name: &str) -> Option<&'static WorkloadDef> {
    WORKLOADS.iter().find(|w| w.name == name)
}

/// Parameter values by key.
pub type Params = BTreeMap<String, f64>;

/// Starts the processes of workload `name` for `phase` (a workload with text
/// parameters needs [`setup_with`]).
pub fn setup(name: &str, p: &Params, sim: &mut Sim, phase: Phase) -> Result<(), Error> {
    setup_with(name, p, &Texts::new(), sim, phase)
}

/// Starts the processes of workload `name` for `phase`, with its text parameters.
pub fn setup_with(name: &str, p: &Params, texts: &Texts, sim: &mut Sim, phase: Phase) -> Result<(), Error> {
    let w = by_name(name).ok_or_else(|| unknown(name))?;
    (w.setup)(p, texts, sim, phase)
}

/// Computes the result of workload `name` from its finished phases.
pub fn result(name: &str, p: &Params, main: &Sim, overhead: Option<&Sim>) -> Result<BTreeMap<String, f64>, Error> {
    let w = by_name(name).ok_or_else(|| unknown(name))?;
    (w.result)(p, main, overhead)
}

/// Returns the number of address spaces a workload needs at most at once on
/// `cpus` CPUs (exited ones a lazy CPU still holds are the caller's to add; a
/// workload with text parameters needs [`max_mms_with`]).
pub fn max_mms(name: &str, p: &Params, cpus: usize) -> usize {
    max_mms_with(name, p, &Texts::new(), cpus)
}

/// [`max_mms`] with the workload's text parameters.
pub fn max_mms_with(name: &str, p: &Params, texts: &Texts, cpus: usize) -> usize {
    by_name(name).map_or(64, |w| (w.max_mms)(p, texts, cpus))
}

/// Returns the times, in cycles, of every mark called `name`, in the order recorded.
pub(crate) fn mark_times(sim: &Sim, name: &str) -> Vec<u64> {
    sim.marks.iter().filter(|(n, ..)| *n == name).map(|(_, t, ..)| *t).collect()
}

/// Returns the latest time, in cycles, at which any thread recorded mark `name`.
pub(crate) fn mark_max(sim: &Sim, name: &str) -> Option<u64> {
    sim.marks.iter().filter(|(n, ..)| *n == name).map(|(_, t, ..)| *t).max()
}

/// Returns how many marks called `name` were recorded, and their times' sum in cycles.
pub(crate) fn mark_sum(sim: &Sim, name: &str) -> (u64, u64) {
    sim.marks.iter().filter(|(n, ..)| *n == name).fold((0, 0), |(k, s), (_, t, ..)| (k + 1, s + t))
}

/// Returns `elapsed_s`: the time from the start of the run until the last
/// `"end"` mark (the last copy or the script finishing), as `perf stat`'s
/// "seconds time elapsed" measures a script that starts every copy and waits.
fn elapsed(workload: &'static str, sim: &Sim) -> Result<BTreeMap<String, f64>, Error> {
    let end = mark_max(sim, "end").ok_or_else(|| unmeasured(workload, "no copy finished; no timing was recorded"))?;
    let mut r = BTreeMap::new();
    r.insert("elapsed_s".to_string(), end as f64 / sim.ghz() / 1e9);
    Ok(r)
}

/// Returns the error of a run of `workload` that ended without its
/// measurement: `why`.
pub(crate) fn unmeasured(workload: &'static str, why: impl Into<String>) -> Error {
    Error::Unmeasured { workload, why: why.into() }
}
