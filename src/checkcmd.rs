//! `tlbkit check` and `tlbkit replay`: the command-line side of `tlbkit-check`.

use clap::{Args, ValueEnum};
use std::time::Instant;
use tlbkit_check::exec::Memory;
use tlbkit_check::{CheckReport, CheckSpec, Mode};

/// `tlbkit check`'s flags.
#[derive(Args)]
pub struct CheckArgs {
    /// A policy from `tlbkit list`, or a bug-zoo variant `zoo/<id>`.
    #[arg(long)]
    policy: String,
    /// CPUs (default 2; a bug-zoo entry has its own defaults, see `tlbkit list`).
    #[arg(long)]
    cpus: Option<usize>,
    /// Address spaces (processes) at the start (default 3; 1 with --teardown).
    #[arg(long)]
    mms: Option<usize>,
    /// Pages each address space maps, 1 to 4 (default 2, so that two flushes of
    /// one address space can cover different pages at once; 1 with --teardown,
    /// and 1 for the shape of tokens before t4).
    #[arg(long)]
    pages: Option<usize>,
    /// The ASID space (arm64: a power of two); for PCID policies, the number of
    /// dynamic slots (x86 Linux: 6). Default: on arm64 the smallest power of two
    /// of at least CPUs + 2 (4 for 2 CPUs), on x86 6.
    #[arg(long)]
    asids: Option<u32>,
    /// Kernel operations in all, shared out over the CPUs (default 6).
    #[arg(long)]
    ops: Option<usize>,
    /// exhaustive (the default), random or pct (the default for bug-zoo entries).
    #[arg(long, value_enum)]
    mode: Option<ModeArg>,
    /// Schedules for random and pct modes; a cap on executions for exhaustive mode.
    #[arg(long)]
    iterations: Option<u64>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The memory model: sc (the default; tso for the zoo entries whose bug is a
    /// store passing a load) or tso (per-CPU store buffers).
    #[arg(long, value_enum)]
    memory: Option<MemoryArg>,
    /// The kinds of kernel operation CPUs may start, comma-separated (switch, idle,
    /// munmap, fault, reclaim, unmap-table, exit, fork, write, madvise; default all).
    #[arg(long)]
    menu: Option<String>,
    /// Give every address space a 64 KB block of contiguous PTEs (arm64 Linux
    /// policies) and tear it down at exit with this strategy: noopt, simple,
    /// robust or clear_ptes. Adds the `write` operation, checks no_lost_dirty,
    /// no_ungathered_dirty and no_tlb_conflict, and makes the defaults 1 address
    /// space and pct mode.
    #[arg(long)]
    teardown: Option<String>,
    /// Show every event of every step of a counterexample, not only the ones that
    /// matter (root writes, invalidations, PTE changes, the policy's decisions).
    #[arg(long)]
    verbose: bool,
    #[arg(long, value_enum, default_value = "table")]
    format: super::Format,
}

#[derive(Clone, Copy, ValueEnum)]
enum ModeArg {
    Exhaustive,
    Random,
    Pct,
}

#[derive(Clone, Copy, ValueEnum)]
enum MemoryArg {
    Tso,
    Sc,
}

/// Runs `tlbkit check`; returns the exit code (3 on a violation).
pub fn check(a: CheckArgs) -> Result<u8, String> {
    let mut d = tlbkit_check::spec::defaults(&a.policy);
    if a.teardown.is_some() {
        d = tlbkit_check::spec::contpte_defaults(d);
    }
    let (cpus, mms, ops, zmode) = (d.cpus, d.mms, d.ops, d.mode);
    let menu = match &a.menu {
        Some(list) => tlbkit_check::ops::OpKind::parse(list)?,
        None => d.menu,
    };
    let mode = match a.mode {
        Some(ModeArg::Exhaustive) => Mode::Exhaustive,
        Some(ModeArg::Random) => Mode::Random,
        Some(ModeArg::Pct) => Mode::Pct,
        None => zmode,
    };
    let teardown = match &a.teardown {
        Some(t) => Some(tlbkit_policy::contpte::Teardown::from_name(t).map_err(|e| format!("--teardown: {e}"))?),
        None => None,
    };
    let x86 = tlbkit_check::spec::is_x86(&a.policy);
    let spec_policy = a.policy.clone();
    let spec = CheckSpec {
        // x86 Linux has 6 PCID slots; an arm64 space needs one ASID per CPU plus two.
        asids: a.asids.unwrap_or(if x86 { 6 } else { (a.cpus.unwrap_or(cpus) as u32 + 2).next_power_of_two() }),
        policy: a.policy,
        cpus: a.cpus.unwrap_or(cpus),
        mms: a.mms.unwrap_or(mms),
        pages: a.pages.unwrap_or(d.pages),
        ops: a.ops.unwrap_or(ops),
        mode,
        iterations: a.iterations.unwrap_or(if mode == Mode::Exhaustive { u64::MAX } else { 100_000 }),
        seed: a.seed,
        menu,
        memory: match a.memory {
            Some(MemoryArg::Tso) => Memory::Tso,
            Some(MemoryArg::Sc) => Memory::Sc,
            None => tlbkit_check::spec::default_memory(&spec_policy),
        },
        teardown,
    };
    let t = Instant::now();
    // A spinner on a terminal (executions so far); nothing when stderr is not one.
    let bar = crate::progress::spinner();
    let r = tlbkit_check::check_with_progress(&spec, &mut |n| {
        bar.set_message(format!("{n} executions, {}", spec.mode.name()));
    });
    bar.finish_and_clear();
    let r = r?;
    emit(&r, a.format == super::Format::Json, a.verbose)?;
    eprintln!("tlbkit: checked in {:.2} s", t.elapsed().as_secs_f64());
    Ok(if r.counterexample.is_some() { 3 } else { 0 })
}

/// Runs `tlbkit replay`; returns the exit code (3 when the violation recurs).
pub fn replay(token: &str, json: bool, verbose: bool) -> Result<u8, String> {
    let r = tlbkit_check::replay(token)?;
    emit(&r, json, verbose)?;
    Ok(if r.counterexample.is_some() { 3 } else { 0 })
}

fn emit(r: &CheckReport, json: bool, verbose: bool) -> Result<(), String> {
    if json {
        println!("{}", serde_json::to_string_pretty(r).map_err(|e| e.to_string())?);
    } else if verbose {
        print!("{}", r.to_text_verbose());
    } else {
        print!("{}", r.to_text());
    }
    Ok(())
}
