//! `tlbkit check` and `tlbkit replay`: the command-line side of `tlbkit-check`.

use crate::error::CliError;
use clap::{Args, ValueEnum};
use std::time::Instant;
use tlbkit_check::options::{Options, Plan};
use tlbkit_check::CheckReport;

/// `tlbkit check`'s flags.
#[derive(Args)]
pub struct CheckArgs {
    /// A policy from `tlbkit list`, a bug-zoo variant `zoo/<id>`, or a C
    /// policy `c:FILE[+FILE...]` (see --c).
    #[arg(long, required_unless_present_any = ["c", "resume"], conflicts_with = "c")]
    policy: Option<String>,
    /// A kernel C file to check as written: arch/arm64/mm/context.c, compiled
    /// with the system's C compiler (`cc`, or $TLBKIT_CC) against tlbkit's
    /// shims. Give it again for a header that replaces the shims' own
    /// (asm/tlbflush.h, asm/mmu.h). FILE@REV reads the file at a git revision
    /// of its tree. The same as --policy c:FILE[+FILE...].
    #[arg(long, value_name = "FILE")]
    c: Vec<String>,
    /// With --c: the machine has FEAT_TTCnP (every ARMv8.2 CPU), so the
    /// file's system_supports_cnp() is true.
    #[arg(long, requires = "c")]
    cnp: bool,
    /// With --c: the atomic bitops of the file's kernel. v6.0 (the default, as
    /// from v6.0 and in arm64's own bitops before v4.19): test_and_set_bit and
    /// test_and_clear_bit are fully ordered atomics whatever they find. v4.19
    /// (the kernels from v4.19 to v5.19): one that finds nothing to change
    /// returns after a plain read, unordered.
    #[arg(long, requires = "c", value_name = "KERNEL", value_parser = ["v4.19", "v6.0"])]
    bitops: Option<String>,
    /// The small shape (2 CPUs, 3 address spaces, 6 operations) with 10,000 pct
    /// schedules: seconds, for a first look. Flags given beside it win.
    #[arg(long, conflicts_with = "deep")]
    quick: bool,
    /// The family shape (the --cpus, --mms and --ops defaults) searched
    /// exhaustively, with no cap: the proof for that shape, far longer than the
    /// default run. Flags given beside it win.
    #[arg(long)]
    deep: bool,
    #[command(flatten)]
    shape: ShapeArgs,
    #[command(flatten)]
    search: SearchArgs,
    /// The memory model (one shape): sc (the default; tso for the zoo entries
    /// whose bug is a store passing a load), tso (per-CPU store buffers) or arm
    /// (arm64 policies, at most 5 CPUs: store buffers whose stores leave out of
    /// order as Armv8's may, root writes drain nothing, and a DSB may complete
    /// invalidations before the stores it drains are visible). The portfolio's
    /// shapes run under the architecture's (tso, and arm on arm64). With +any
    /// (as tso+any) a pending invalidation may also complete at any point
    /// before its barrier, as a step of its own: a check, at small bounds (at
    /// most 5 CPUs, 4 with arm+any), that completing at the barrier, the
    /// latest point, hides nothing.
    #[arg(long, value_enum)]
    memory: Option<MemoryArg>,
    /// The kinds of kernel operation CPUs may start, comma-separated (switch, idle,
    /// munmap, fault, reclaim, unmap-table, exit, fork, write, madvise, tick, cow,
    /// migrate, reclaim2; default all but cow, migrate and reclaim2). reclaim is
    /// kswapd's batched flush on Linux policies, the page daemon's per-page
    /// invalidation of a pmap (loaded anywhere or nowhere) on FreeBSD ones;
    /// reclaim2 is kswapd's batch of a page of each of two processes (Linux);
    /// madvise (MADV_DONTNEED) is offered on Linux policies; tick (a scheduler
    /// tick) on policies that work at ticks (x86-latr); cow (a copy-on-write
    /// fault, mmap_lock read side) and migrate (kcompactd moving a page, no
    /// mmap_lock; an idle CPU) on Linux policies only: each replaces a page's
    /// frame with ptep_clear_flush and frees the old frame at once.
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
    /// Exhaustive mode: worker threads sharing one visited set, 1 to 512
    /// (default: one per core). The verdict and any counterexample are the
    /// same for every count; with more than one worker the states counted
    /// (local steps leave out states the order decides), the executions, the
    /// longest execution and what one execution reached may differ from run
    /// to run: --jobs 1 fixes them.
    #[arg(long)]
    jobs: Option<usize>,
    /// Start every execution with the schedule of this replay token (a
    /// counterexample's, or the `after:` line of a check with --script) and
    /// search what can follow it: one shape, the token's (flags given beside it
    /// must agree), exhaustive unless --mode says, on one thread. Give --ops:
    /// the operations in all, the schedule's included.
    #[arg(long, value_name = "TOKEN", conflicts_with = "script")]
    from: Option<String>,
    /// Start every execution with a script of operations, one a line in the
    /// order they run (`cpu1 switch mm1`, `cpu0 munmap 0`, `cpu0 exit`; the
    /// guide's chapter on checking lists them), and search what can follow it:
    /// a history too long for any search to reach in every order, then every
    /// order of the last few operations. Exhaustive unless --mode says; --ops
    /// counts the script's operations too.
    #[arg(long, value_name = "FILE")]
    script: Option<std::path::PathBuf>,
    #[command(flatten)]
    save: SaveArgs,
    #[command(flatten)]
    ray: RayArgs,
    /// Go on past every violation instead of stopping at the first, and list
    /// each class of them (the property, and what was wrong with its numbers
    /// left out: one class for the same hazard at any address, ASID or CPU;
    /// a C file's fault, loop or race by its line), with how many executions
    /// reached it and its first, shrunk, with a replay token. On one thread; a
    /// default run searches every shape of its portfolio. A policy that loops
    /// costs its step budget (2 s of CPU) at every execution that reaches the
    /// loop.
    #[arg(long, conflicts_with_all = ["jobs", "checkpoint", "resume", "max_memory", "ray"])]
    all_violations: bool,
    /// What the policy's change is, for the report's coverage: `@REV` (the
    /// same files at that git revision of their tree) or, for a C policy,
    /// other files (`c:FILE[@REV]...`, paired by file name). The report says
    /// how many of the changed lines with code any execution reached, and
    /// its result says so when none was: the verdict then says nothing of
    /// the change. A Rust policy's lines are measured by a binary built with
    /// `cargo build --profile coverage` (`target/coverage/tlbkit`).
    #[arg(long, value_name = "BASE", conflicts_with_all = ["resume", "ray"])]
    base: Option<String>,
    #[arg(long, value_enum, default_value = "table")]
    format: super::Format,
}

/// `tlbkit check`'s shape: the machine and the work the search explores.
#[derive(Args)]
struct ShapeArgs {
    /// CPUs (one shape). Default: 2 for ASID allocators (the arm64 policies with
    /// ASIDs), 3 for shootdown protocols (x86, arm64-noasid), so that the shape
    /// reaches two ASID rollovers or three CPUs flushing (the report's `reached:`
    /// line); a bug-zoo entry has its own smallest shape.
    #[arg(long, allow_negative_numbers = true)]
    cpus: Option<i64>,
    /// Address spaces (processes) at the start. Default: 5 for ASID allocators, 3
    /// for shootdown protocols (1 with --teardown).
    #[arg(long)]
    mms: Option<usize>,
    /// Pages each address space maps, 1 to 4 (default 2, so that two flushes of
    /// one address space can cover different pages at once; 1 with --teardown,
    /// and 1 for the shape of tokens before t4).
    #[arg(long)]
    pages: Option<usize>,
    /// The ASID space (arm64: a power of two); FreeBSD x86: the PCIDs per CPU (a
    /// power of two, 0 and 1 being the kernel's); Linux x86: fixed at its 6 dynamic
    /// PCID slots. Default: on arm64 the smallest power of two of at least CPUs +
    /// 2 (4 for 2 CPUs), for FreeBSD x86 4 (its generations roll over), for Linux x86 6.
    #[arg(long)]
    asids: Option<u32>,
    /// Kernel operations in all, shared out over the CPUs. Default: 12 for ASID
    /// allocators, 9 for shootdown protocols (6 with --quick or --teardown).
    #[arg(long)]
    ops: Option<usize>,
}

/// `tlbkit check`'s search: its mode, how long, and its seed.
#[derive(Args)]
struct SearchArgs {
    /// exhaustive (the default with --deep), random or pct (the default
    /// otherwise: exhaustive search at the default shapes takes far longer than a
    /// minute).
    #[arg(long, value_enum)]
    mode: Option<ModeArg>,
    /// Schedules for random and pct modes (one shape: default 300,000; 10,000 with
    /// --quick; 100,000 for bug-zoo entries and --teardown); a cap on executions
    /// for exhaustive mode (default none). Without a shape flag: the portfolio's
    /// schedules in all, shared out in its proportions.
    #[arg(long)]
    iterations: Option<u64>,
    /// Seed of the pct and random schedules, and of the portfolio's menus.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// `tlbkit check`'s saves of an exhaustive search, and its memory cap.
#[derive(Args)]
struct SaveArgs {
    /// Exhaustive mode: save the search in this directory as it runs (every
    /// --checkpoint-every seconds, on SIGINT or SIGTERM, and at the memory
    /// cap), so that `--resume DIR` goes on from where it got to. The first
    /// save is the whole search, written to a temporary file and renamed;
    /// later ones append only what changed since; a kill leaves the last
    /// complete one.
    #[arg(long, value_name = "DIR")]
    checkpoint: Option<std::path::PathBuf>,
    /// Seconds between saves with --checkpoint (default 60).
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    checkpoint_every: f64,
    /// Go on with the search saved in this directory (by --checkpoint): the
    /// same verdict and, once complete, the same states as a search never
    /// stopped. The check is the save's; give no policy or shape. Saves go on
    /// into the same directory. A save of another build of tlbkit is refused.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["policy", "c", "checkpoint", "quick", "deep", "cpus", "mms", "pages", "asids", "ops", "mode", "memory", "menu", "teardown", "from", "script"])]
    resume: Option<std::path::PathBuf>,
    /// Exhaustive mode: the most memory the visited states may take (e.g.
    /// 8G, 512M). A search about to pass it saves itself (in --checkpoint's
    /// directory, or ./tlbkit-checkpoint) and stops with exit 2, saying how
    /// to go on with more.
    #[arg(long, value_name = "SIZE")]
    max_memory: Option<String>,
}

/// `tlbkit replay`'s flags.
#[derive(Args)]
pub struct ReplayArgs {
    token: String,
    /// Show every event of every step of the counterexample, not only the ones
    /// that matter (root writes, invalidations, PTE changes, the policy's decisions).
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
    Arm,
    #[value(name = "tso+any")]
    TsoAny,
    #[value(name = "sc+any")]
    ScAny,
    #[value(name = "arm+any")]
    ArmAny,
}

/// Runs `tlbkit check`; returns the exit code (3 on a violation). The
/// checker's library decides what runs ([`Options::plan`]) and runs it
/// ([`Options::run_plan`]); this shows its progress and words its ending.
pub fn check(a: CheckArgs) -> Result<u8, CliError> {
    if a.ray.ray.is_some() {
        return check_on_ray(a);
    }
    let (format, verbose) = (a.format, a.verbose);
    let opts = options(a)?;
    let plan = opts.plan()?;
    let t = Instant::now();
    let shapes = plan.specs().into_iter().map(shape_line).collect();
    let saving = match &plan {
        Plan::Saving(_, _, persist) => Some(persist.dir.clone()),
        _ => None,
    };
    // A saving search saves itself on SIGINT and SIGTERM and stops with
    // `Error::Stopped`; any other is interrupted here.
    let live = Live::start_with(shapes, saving.is_none());
    let r = live.finish(opts.run_plan(&plan, &mut |_| {}))?;
    emit(&r, format == super::Format::Json, verbose)?;
    let took = t.elapsed().as_secs_f64();
    let found = r.counterexample.is_some();
    match saving {
        None => eprintln!("tlbkit: checked in {took:.2} s"),
        Some(dir) => {
            // A search that stops at a violation is not saved at its end (it
            // needs no resume): say what the directory holds.
            let shown = dir.display();
            match (found, dir.join(tlbkit_check::search::saved::FILE).exists()) {
                (false, _) => eprintln!("tlbkit: checked in {took:.2} s; the search is saved in {shown}"),
                (true, true) => eprintln!(
                    "tlbkit: checked in {took:.2} s; stopped at the violation: {shown} holds the last save before it"
                ),
                (true, false) => {
                    eprintln!("tlbkit: checked in {took:.2} s; stopped at the violation before its first save")
                }
            }
        }
    }
    Ok(if found { 3 } else { 0 })
}

/// Returns a shape as the progress line names it.
fn shape_line(s: &tlbkit_check::CheckSpec) -> String {
    format!(
        "{} CPUs, {} mms, {} ASIDs, {} ops, {}, {}",
        s.cpus,
        s.mms,
        s.asids,
        s.ops,
        tlbkit_check::shape::memory_text(s.memory, s.completion),
        s.mode.name()
    )
}

/// Says what an interrupted check explored, and how to keep the next one,
/// in one line; ends the process (exit 130, a shell's code for SIGINT).
fn interrupted(p: &tlbkit_check::progress::Snapshot, shapes: &[String], seconds: f64) -> ! {
    let states = if p.states > 0 { format!(", {} states", p.states) } else { String::new() };
    let longest = if p.longest > 0 { format!(", the longest execution {} steps", p.longest) } else { String::new() };
    let shape = match (shapes.len(), p.shape) {
        (1, _) => format!("of {}", shapes[0]),
        (n, k) if k > 0 => {
            format!("through shape {k} of a portfolio of {n} (shape {k}, {}, unfinished)", shapes[k - 1])
        }
        (n, _) => format!("of a portfolio of {n} shapes"),
    };
    eprintln!(
        "tlbkit: interrupted after {seconds:.1} s: {} executions{states}{longest} {shape}, no violation so far; \
         nothing of the search is kept (an exhaustive check of one shape keeps it with --checkpoint DIR, and \
         --resume DIR goes on from there)",
        p.executions
    );
    std::process::exit(130);
}

/// Returns `bytes` in MiB, or GiB from 10 GiB, with one decimal.
fn mib(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 10.0 * f64::from(1 << 30) {
        format!("{:.1} GiB", b / f64::from(1 << 30))
    } else {
        format!("{:.1} MiB", b / f64::from(1 << 20))
    }
}

/// Progress of a running check on a terminal (nothing when stderr is not
/// one): executions, states, the rate, the memory the process holds, the
/// shape and the time so far,
/// redrawn five times a second from what the search publishes
/// (`tlbkit_check::progress`).
struct Live {
    bar: indicatif::ProgressBar,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ticker: Option<std::thread::JoinHandle<()>>,
}

impl Live {
    /// `interrupt`: SIGINT and SIGTERM end the check with what it explored
    /// and how to keep the next one (the saving search handles them itself).
    fn start_with(shapes: Vec<String>, interrupt: bool) -> Live {
        tlbkit_check::progress::reset();
        if interrupt {
            tlbkit_check::search::saved::catch_signals();
        }
        let bar = crate::progress::spinner();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let ticker = (interrupt || !bar.is_hidden()).then(|| {
            let (bar, stop) = (bar.clone(), stop.clone());
            std::thread::spawn(move || {
                let t = Instant::now();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let p = tlbkit_check::progress::snapshot();
                    if interrupt && tlbkit_check::search::saved::signalled() {
                        bar.finish_and_clear();
                        interrupted(&p, &shapes, t.elapsed().as_secs_f64());
                    }
                    let rate = p.executions as f64 / t.elapsed().as_secs_f64().max(1e-3);
                    let states = if p.states > 0 { format!(", {} states", p.states) } else { String::new() };
                    let shape = match (shapes.len(), p.shape) {
                        (1, _) => shapes[0].clone(),
                        (n, k) if k > 0 => format!("shape {k}/{n}: {}", shapes[k - 1]),
                        (n, _) => format!("a portfolio of {n} shapes"),
                    };
                    let memory = tlbkit_host::memory::resident_bytes()
                        .map(|b| format!(", {} resident", mib(b)))
                        .unwrap_or_default();
                    bar.set_message(format!("{} executions{states}, {rate:.0}/s{memory}; {shape}", p.executions));
                    std::thread::sleep(std::time::Duration::from_millis(200));
                }
            })
        });
        Live { bar, stop, ticker }
    }

    /// Stops drawing and clears the line; passes the check's result on.
    /// (`Live::start_with(.., false)` for the saving search.)
    fn finish<T>(mut self, r: T) -> T {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
        self.bar.finish_and_clear();
        r
    }
}

/// Where and how `--ray` runs the search.
#[derive(clap::Args)]
struct RayArgs {
    /// Exhaustive mode: run the search among Ray actors on the cluster at
    /// ADDRESS (empty: RAY_ADDRESS, else a new local cluster), one per node
    /// with a worker per CPU, through tlbkit's Python package (`pip install
    /// './python[ray]'`; $TLBKIT_PYTHON names the interpreter, default
    /// python3): each state is held by the one node that owns it, and the
    /// nodes send each other their claims and answers. The verdict and the
    /// states are those of the search on one machine. --checkpoint DIR
    /// takes snapshots of the whole search (DIR on the driver's machine),
    /// --max-memory caps each node's part of the visited set, and --resume
    /// DIR goes on from the last snapshot on any number of nodes.
    #[arg(long, value_name = "ADDRESS", num_args = 0..=1, default_missing_value = "")]
    ray: Option<String>,
    /// With --ray: how the nodes share the visited set; `sharded` (each
    /// state owned by one node) is the only way now, kept as a flag so that
    /// commands that name it still run.
    #[arg(long, value_enum, default_value_t = RaySearch::Sharded, requires = "ray")]
    ray_search: RaySearch,
}

/// How `--ray` shares the visited set among the nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum RaySearch {
    /// Each state owned by one node (`tlbkit_check::run::shards`).
    Sharded,
    /// The search in rounds, which is gone: refused with a line that says so.
    #[value(hide = true)]
    Rounds,
}

/// `tlbkit check --ray ADDRESS`: an exhaustive search of one shape among Ray
/// actors, its visited set sharded among them (`tlbkit_check::run::shards`),
/// driven by the Python package's `python -m tlbkit check-ray`; the report
/// is made here from the nodes' totals the driver wrote.
fn check_on_ray(a: CheckArgs) -> Result<u8, CliError> {
    use tlbkit_check::run::shards;
    if a.ray.ray_search == RaySearch::Rounds {
        return Err("--ray-search rounds: the search in rounds is gone (each node kept a whole copy of the visited \
                    set); --ray runs the sharded search: leave --ray-search out"
            .into());
    }
    let (format, verbose, address) = (a.format, a.verbose, a.ray.ray.clone().unwrap_or_default());
    let persist = save(&a.save)?;
    let token = match persist.as_ref().filter(|p| p.resume) {
        Some(p) => shards::read_snapshot(&p.dir)?.token,
        None => shards::spec_token(&options(a)?.exhaustive_shape(tlbkit_registry::param::Param::Ray)?.0),
    };
    let spec = shards::spec_of(&token)?;
    shards::validate(&spec)?;
    let state = std::env::temp_dir().join(format!("tlbkit-ray-{}.state", std::process::id()));
    let python = std::env::var("TLBKIT_PYTHON").unwrap_or_else(|_| "python3".into());
    let mut cmd = std::process::Command::new(&python);
    cmd.args(["-m", "tlbkit", "check-ray", &token, "--state-out"]).arg(&state);
    if !address.is_empty() {
        cmd.args(["--ray", &address]);
    }
    if let Some(p) = &persist {
        cmd.arg("--checkpoint").arg(&p.dir).args(["--checkpoint-every", &p.every.as_secs_f64().to_string()]);
        if let Some(m) = p.max_memory {
            cmd.args(["--max-memory", &m.to_string()]);
        }
        if p.resume {
            cmd.arg("--resume");
        }
    }
    // What the driver and Ray print goes to stderr: stdout is the report's.
    if let Ok(err) = std::os::fd::AsFd::as_fd(&std::io::stderr()).try_clone_to_owned() {
        cmd.stdout(std::process::Stdio::from(err));
    }
    let t = Instant::now();
    let status =
        run_driver(cmd, persist.is_some()).map_err(|e| CliError::from(format!("--ray: cannot run {python}: {e}")))?;
    let read = |p: &std::path::Path| std::fs::read(p).map_err(|e| CliError::from(format!("--ray: {e}")));
    let r = match status.code() {
        // The nodes' totals (a violation's token among them: shrunk here,
        // never searched for again).
        Some(0 | 3) => {
            let body = read(&state);
            let _ = std::fs::remove_file(&state);
            shards::report_from_save(&spec, &body?)?
        }
        Some(1) => {
            return Err(format!(
                "--ray needs tlbkit's Python package with Ray: pip install './python[ray]' (the interpreter is \
                 {python}; set TLBKIT_PYTHON to another)"
            )
            .into())
        }
        // The driver said why: a node lost, a snapshot at the memory cap,
        // bad input.
        Some(2) => return Ok(2),
        code => return Err(format!("--ray: the Ray driver ({python} -m tlbkit check-ray) failed ({code:?})").into()),
    };
    emit(&r, format == super::Format::Json, verbose)?;
    let took = t.elapsed().as_secs_f64();
    // A sharded search's snapshots are taken while it runs, none at its end:
    // say what the directory holds.
    match persist.map(|p| (shards::read_snapshot(&p.dir).ok(), p.dir)) {
        Some((Some(snap), dir)) => eprintln!(
            "tlbkit: checked in {took:.2} s on Ray; {} holds its last snapshot before the end (generation {}, {} \
             nodes)",
            dir.display(),
            snap.generation,
            snap.parts
        ),
        Some((None, _)) => eprintln!("tlbkit: checked in {took:.2} s on Ray, before its first snapshot"),
        None => eprintln!("tlbkit: checked in {took:.2} s on Ray"),
    }
    Ok(if r.counterexample.is_some() { 3 } else { 0 })
}

/// Runs the Ray driver `cmd` to its end. A driver that takes snapshots
/// (`snapshots`) takes one and stops on SIGINT or SIGTERM: then this process
/// outlives those signals (a terminal's Ctrl-C reaches the driver too, in
/// the same process group) and passes a SIGTERM sent to it alone on.
fn run_driver(mut cmd: std::process::Command, snapshots: bool) -> std::io::Result<std::process::ExitStatus> {
    if !snapshots {
        return cmd.status();
    }
    use tlbkit_check::search::saved;
    saved::catch_signals();
    let mut child = cmd.spawn()?;
    let mut passed = false;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if saved::signalled() && !passed {
            // SAFETY: `kill` with a live child's pid and a valid signal.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            passed = true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The library's options for the flags `a` gives.
fn options(a: CheckArgs) -> Result<Options, CliError> {
    let save = save(&a.save)?;
    Ok(Options {
        policy: match a.policy {
            Some(p) => p,
            None => {
                let cnp = a.cnp.then(|| "cnp=on".to_string());
                let bitops = a.bitops.map(|b| format!("bitops={b}"));
                format!("c:{}", a.c.into_iter().chain(cnp).chain(bitops).collect::<Vec<_>>().join("+"))
            }
        },
        quick: a.quick,
        deep: a.deep,
        cpus: a
            .shape
            .cpus
            .map(|c| usize::try_from(c).map_err(|_| CliError::from(tlbkit_check::spec::cpus_out_of_range(c))))
            .transpose()?,
        mms: a.shape.mms,
        pages: a.shape.pages,
        asids: a.shape.asids,
        ops: a.shape.ops,
        mode: a.search.mode.map(|m| m.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_default()),
        iterations: a.search.iterations,
        seed: a.search.seed,
        memory: a.memory.map(|m| m.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_default()),
        menu: a.menu,
        teardown: a.teardown,
        jobs: a.jobs,
        from: a.from,
        script: a
            .script
            .map(|f| {
                std::fs::read_to_string(&f)
                    .map_err(|e| CliError::from(format!("--script {}: cannot read the script: {e}", f.display())))
            })
            .transpose()?,
        all_violations: a.all_violations,
        save,
        base: a.base,
    })
}

/// Where a check saves itself, from `--checkpoint`, `--resume`,
/// `--max-memory` and `--checkpoint-every`; `None` when none of the first
/// three is given (a check that does not save).
fn save(a: &SaveArgs) -> Result<Option<tlbkit_check::run::Persist>, CliError> {
    // A save at least once a year: past that (and past what a Duration
    // holds), the search never saves before its end anyway.
    const YEAR_S: f64 = 365.0 * 24.0 * 3600.0;
    if !(a.checkpoint_every.is_finite() && a.checkpoint_every > 0.0 && a.checkpoint_every <= YEAR_S) {
        let e = a.checkpoint_every;
        return Err(format!("--checkpoint-every {e:?}: give seconds above 0, at most {YEAR_S} (a year)").into());
    }
    if a.resume.is_none() && a.checkpoint.is_none() && a.max_memory.is_none() {
        return Ok(None);
    }
    let max_memory = a
        .max_memory
        .as_deref()
        .map(|m| tlbkit_check::search::saved::parse_size(m).map_err(|e| CliError::from(format!("--max-memory: {e}"))))
        .transpose()?;
    let dir = match (&a.resume, &a.checkpoint) {
        (Some(dir), _) | (None, Some(dir)) => dir.clone(),
        (None, None) => std::path::PathBuf::from("tlbkit-checkpoint"),
    };
    Ok(Some(tlbkit_check::run::Persist {
        dir,
        every: std::time::Duration::from_secs_f64(a.checkpoint_every),
        max_memory,
        resume: a.resume.is_some(),
    }))
}

/// Runs `tlbkit replay`; returns the exit code (3 when the violation recurs).
pub fn replay(a: ReplayArgs) -> Result<u8, CliError> {
    let r = tlbkit_check::replay(&a.token)?;
    emit(&r, a.format == super::Format::Json, a.verbose)?;
    Ok(if r.counterexample.is_some() { 3 } else { 0 })
}

fn emit(r: &CheckReport, json: bool, verbose: bool) -> Result<(), CliError> {
    if json {
        println!("{}", serde_json::to_string_pretty(r).map_err(|e| e.to_string())?);
    } else if verbose {
        print!("{}", r.to_text_verbose());
    } else {
        print!("{}", r.to_text());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::mib;

    #[test]
    fn memory_reads_in_mib_then_gib() {
        assert_eq!(mib(3 << 20), "3.0 MiB");
        assert_eq!(mib(9 << 30), "9216.0 MiB");
        assert_eq!(mib(12 << 30), "12.0 GiB");
    }
}
