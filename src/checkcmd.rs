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
    #[arg(long, default_value_t = 2)]
    cpus: usize,
    /// Address spaces (processes) at the start.
    #[arg(long, default_value_t = 3)]
    mms: usize,
    /// The ASID space (arm64: a power of two); for PCID policies, the number of
    /// dynamic slots (x86 Linux: 6). Default: 4 on arm64, 6 on x86.
    #[arg(long)]
    asids: Option<u32>,
    /// Kernel operations in all, over all CPUs.
    #[arg(long, default_value_t = 6)]
    ops: usize,
    #[arg(long, value_enum, default_value = "exhaustive")]
    mode: ModeArg,
    /// Schedules for random and pct modes; a cap on executions for exhaustive mode.
    #[arg(long)]
    iterations: Option<u64>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The memory model: tso (store buffers, the default) or sc.
    #[arg(long, value_enum, default_value = "tso")]
    memory: MemoryArg,
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
    let mode = match a.mode {
        ModeArg::Exhaustive => Mode::Exhaustive,
        ModeArg::Random => Mode::Random,
        ModeArg::Pct => Mode::Pct,
    };
    let x86 = a.policy.starts_with("x86") || a.policy.starts_with("zoo/linux-x86") || a.policy.contains("freebsd-x86");
    let spec = CheckSpec {
        asids: a.asids.unwrap_or(if x86 { 6 } else { 4 }),
        policy: a.policy,
        cpus: a.cpus,
        mms: a.mms,
        ops: a.ops,
        mode,
        iterations: a.iterations.unwrap_or(if mode == Mode::Exhaustive { u64::MAX } else { 10_000 }),
        seed: a.seed,
        memory: match a.memory {
            MemoryArg::Tso => Memory::Tso,
            MemoryArg::Sc => Memory::Sc,
        },
    };
    let t = Instant::now();
    let r = tlbkit_check::check(&spec)?;
    emit(&r, a.format == super::Format::Json)?;
    eprintln!("tlbkit: checked in {:.2} s", t.elapsed().as_secs_f64());
    Ok(if r.counterexample.is_some() { 3 } else { 0 })
}

/// Runs `tlbkit replay`; returns the exit code (3 when the violation recurs).
pub fn replay(token: &str, json: bool) -> Result<u8, String> {
    let r = tlbkit_check::replay(token)?;
    emit(&r, json)?;
    Ok(if r.counterexample.is_some() { 3 } else { 0 })
}

fn emit(r: &CheckReport, json: bool) -> Result<(), String> {
    if json {
        println!("{}", serde_json::to_string_pretty(r).map_err(|e| e.to_string())?);
    } else {
        print!("{}", r.to_text());
    }
    Ok(())
}
