//! What to check: the policy by name (a registered policy or a `zoo/`
//! variant), the machine's shape and its bounds, the search mode, and the one
//! shape `tlbkit check` runs when a flag chooses the shape (the policy's
//! defaults and presets; with no such flag it runs [`crate::portfolio`]). Running the check is [`crate::run`]'s, its report
//! [`crate::report`]'s, and its replay token [`crate::token`]'s.

use crate::error::{Error, Param};
use crate::shape::{Completion, KernelBug, Memory, Shape};
use tlbkit_policy::contpte::Teardown;
use tlbkit_policy::zoo::{self, Bug};
use tlbkit_policy::Policy;
use tlbkit_registry::{self as registry, Arch, AsidSpace, Build, Os, PolicyDef, WithPolicy};

/// How to search.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every execution, depth first, pruning states seen before.
    Exhaustive,
    /// Uniformly random schedules.
    Random,
    /// PCT schedules (bug depth 3).
    Pct,
}

impl Mode {
    /// Returns the mode's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Exhaustive => "exhaustive",
            Mode::Random => "random",
            Mode::Pct => "pct",
        }
    }
}

/// A check request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckSpec {
    /// A policy name from `tlbkit list`, or `zoo/<id>`.
    pub policy: String,
    /// CPUs.
    pub cpus: usize,
    /// Address spaces.
    pub mms: usize,
    /// Pages each address space maps (1 to [`crate::kernel::MAX_PAGES`]): with
    /// two or more, flushes of one address space can overlap on different pages.
    pub pages: usize,
    /// ASIDs (arm64: the ASID space, a power of two; x86 Linux PCID: the dynamic
    /// slots per CPU, which the kernel fixes at 6; FreeBSD x86: PCIDs per CPU).
    pub asids: u32,
    /// Kernel operations in all.
    pub ops: usize,
    /// Search mode.
    pub mode: Mode,
    /// Executions for random and PCT modes; a cap for exhaustive mode.
    pub iterations: u64,
    /// Seed of random and PCT modes.
    pub seed: u64,
    /// Memory model.
    pub memory: Memory,
    /// The kinds of kernel operation CPUs may start (a mask of
    /// [`crate::ops::OpKind`] bits).
    pub menu: u32,
    /// With contiguous PTEs (arm64 Linux policies): the exit teardown strategy of
    /// every address space's 64 KB block (see the `block` module).
    pub teardown: Option<Teardown>,
    /// When pending invalidations complete (`--memory NAME+any`: at any step).
    pub completion: Completion,
}

/// The properties a check with a contiguous block judges besides [`PROPERTIES`].
pub const CONTPTE_PROPERTIES: [&str; 3] = ["no_lost_dirty", "no_ungathered_dirty", "no_tlb_conflict"];

/// The properties a check of a C policy (`c:FILE`) judges besides
/// [`PROPERTIES`]: the kernel file's own `BUG_ON`/`WARN_ON`/`panic` never
/// fire, and no two plain accesses race (see `tlbkit_c::race`).
pub const C_PROPERTIES: [&str; 2] = ["no_kernel_bug", "no_data_race"];

/// The properties every check judges, by name.
pub const PROPERTIES: [&str; 7] = [
    "no_stale_use",
    "no_asid_alias",
    "no_stale_held",
    "no_reuse_while_mapped",
    "no_deadlock",
    "no_livelock",
    "no_policy_panic",
];

/// The most kernel operations a check runs: enough for a scripted history
/// (`--script`) before a short search; an exhaustive search of every order
/// ends in reasonable time only with a dozen or so.
pub const MAX_OPS: usize = 256;

impl CheckSpec {
    /// How its exhaustive search keeps states: every table of it alike, its
    /// workers', nodes' and saves' (a fingerprint of 72 bits at two CPUs;
    /// under `sc`, which has no store buffers, the slots keep no bits for
    /// drains and the fingerprint is wider from three CPUs on).
    pub fn fingerprints(&self) -> crate::search::Fingerprints {
        use crate::search::Fingerprints;
        if self.memory.buffered() {
            Fingerprints::for_cpus(self.cpus)
        } else {
            Fingerprints::for_steps(self.cpus)
        }
    }
}

/// Returns the `log2` of `asids` if it is a power of two from `min` to
/// `max`; else the error that names the space (`"an arm64 ASID space is"`).
fn log2_between(asids: u32, min: u32, max: u32, space: String) -> Result<u8, Error> {
    if asids < min || !asids.is_power_of_two() || asids > max {
        return Err(Error::Asids { asids, space, min, max });
    }
    Ok(asids.trailing_zeros() as u8)
}

/// Returns the `log2` of `asids` if it is a power of two of at least 4 (and at
/// most 65536 on arm64, 4096 for FreeBSD x86's PCIDs).
fn asid_bits(asids: u32, x86: bool) -> Result<u8, Error> {
    let (max, what) =
        if x86 { (1 << 12, "FreeBSD x86's PCIDs per CPU are") } else { (1 << 16, "an arm64 ASID space is") };
    log2_between(asids, 4, max, what.into())
}

/// Returns the `log2` of `asids` global ASIDs for `policy` (one whose `--asids`
/// is its [`AsidSpace::GlobalAsids`]): a power of two from 2 to 2048 (the kernel
/// has 2039 on a 12-bit PCID machine).
fn global_asid_bits(asids: u32, policy: &str) -> Result<u8, Error> {
    log2_between(asids, 2, 2048, format!("{policy}'s global ASIDs are"))
}

/// Returns `X86_CR3_PCID_BITS` for a kernel's own x86 `tlb.c` checked with
/// `--asids PCIDS`: a power of two from 32 (5 bits: `MAX_ASID_AVAILABLE` 14,
/// the fewest that leave global ASIDs beside the 6 slots with PTI compiled
/// in) to 4096 (the hardware's 12).
fn x86_pcid_bits(pcids: u32) -> Result<u8, Error> {
    log2_between(pcids, 32, 4096, "an x86 tlb.c's PCIDs (X86_CR3_PCID_BITS) are".into())
}

/// Returns the registry's builder input for `spec`: its CPUs, address-space
/// slots (one more, for the kernel's), the ASID width its `--asids` asks for (on
/// arm64 the ASID space, for FreeBSD x86 the PCIDs per CPU; Linux x86 keeps its
/// 6 slots); the zoo bug with a switch in the policy code (the kernel-side one is
/// the shape's).
fn build(spec: &CheckSpec, r: &Resolved) -> Result<Build, Error> {
    let asid_bits = match r.base.asids {
        AsidSpace::GlobalAsids => global_asid_bits(spec.asids, r.base.name)?,
        AsidSpace::Arm64Asids => asid_bits(spec.asids, false)?,
        AsidSpace::PcidsPerCpu => asid_bits(spec.asids, true)?,
        // Linux x86 keeps its own PCID slots; the width is not theirs to use.
        AsidSpace::LinuxPcidSlots => 12,
        AsidSpace::X86Pcids => x86_pcid_bits(spec.asids)?,
    };
    Ok(Build { bug: r.bug.filter(|b| b.in_policy()), checker: true, ..Build::new(spec.cpus, spec.mms + 1, asid_bits) })
}

/// Returns the ASID space `tlbkit check --policy POLICY --cpus CPUS` uses unless
/// `--asids` says otherwise, by the [`AsidSpace`] the policy's registry entry
/// gives: on arm64 the smallest power of two of at least CPUs + 2 (one ASID per
/// CPU's reservation, the reserved 0, and one to hand out); for FreeBSD x86 4
/// PCIDs per CPU (`kernel_pmap`'s, `vmspace0`'s and two for user pmaps, so that
/// switches between three processes roll over); for Linux x86 its 6 dynamic
/// PCID slots (fixed: `--asids` does not change them), except with `INVLPGB`
/// (`x86-linux-invlpgb`), whose `--asids` is its global ASIDs: 2 by default, so
/// that three address spaces exhaust and reset the space. An unknown name gets
/// arm64's.
pub fn default_asids(policy: &str, cpus: usize) -> u32 {
    let space = resolve(policy).map_or(AsidSpace::Arm64Asids, |r| r.base.asids);
    space.default_count(cpus)
}

/// Builds the policy `spec` names and runs `code` with it.
fn with_policy<W: WithPolicy>(spec: &CheckSpec, code: W) -> Result<W::Out, Error> {
    let r = resolve(&spec.policy)?;
    // A C policy is its files, which only its full name says.
    let name = if spec.policy.starts_with(registry::C_PREFIX) { spec.policy.as_str() } else { r.base.name };
    tlbkit_c::front::with_policy(name, &build(spec, &r)?, code).map_err(|e| Error::building(&spec.policy, e))
}

/// A policy name resolved: the registered policy and the zoo bug it carries.
struct Resolved {
    base: &'static PolicyDef,
    bug: Option<Bug>,
}

/// Returns what a policy name stands for, or a message listing what exists.
fn resolve(name: &str) -> Result<Resolved, Error> {
    if let Some(p) = registry::policy(name) {
        return Ok(Resolved { base: p, bug: None });
    }
    if let Some(id) = name.strip_prefix("zoo/") {
        if let Some(e) = zoo::entry(id) {
            let base =
                registry::policy(e.base).ok_or_else(|| Error::ZooBase { name: name.to_string(), base: e.base })?;
            return Ok(Resolved { base, bug: Some(e.bug) });
        }
        return Err(Error::UnknownZooEntry { name: name.to_string() });
    }
    Err(Error::UnknownPolicy { name: name.to_string() })
}

/// Returns the memory model of a one-shape check of a policy unless `--memory`
/// says: x86-TSO for the zoo entries whose bug is a store passing a load, the
/// arm mode for the one whose store passes a root write, sequential
/// consistency otherwise. (The default run's shapes use
/// [`crate::portfolio::arch_memory`].)
pub fn default_memory(policy: &str) -> Memory {
    match resolve(policy) {
        Ok(Resolved { bug: Some(Bug::ActiveCpuNoSwitchDsb), .. }) => Memory::Arm,
        Ok(Resolved {
            bug:
                Some(
                    Bug::SkipbcastNoBarrier
                    | Bug::LinuxArm645e10f9887ed8
                    | Bug::LinuxX8683b0177a6c48
                    | Bug::ActiveCpuEarlyRead,
                ),
            ..
        }) => Memory::Tso,
        _ => Memory::Sc,
    }
}

/// The error for a CPU count outside the checker's 1 to 8 (a front end that
/// takes signed numbers reports a negative one with it too).
pub fn cpus_out_of_range(cpus: impl std::fmt::Display) -> Error {
    Error::invalid(Param::Cpus, cpus, "the checker runs 1 to 8 CPUs")
}

/// Validates `spec` and returns the machine shape it asks for (its kernel's
/// page-out path included).
pub fn shape(spec: &CheckSpec) -> Result<Shape, Error> {
    if !crate::arena::installed() {
        return Err(Error::NoCheckAlloc);
    }
    let r = resolve(&spec.policy)?;
    let linux_only = crate::ops::OpKind::Cow.bit() | crate::ops::OpKind::Migrate.bit();
    if spec.menu & linux_only != 0 && !r.base.os.is_linux() {
        return Err(Error::invalid(
            Param::Menu,
            crate::ops::OpKind::names(spec.menu & linux_only),
            format!(
                "cow (wp_page_copy) and migrate (try_to_unmap_one for migration) are Linux's paths; {} runs under \
                 FreeBSD: leave them out",
                spec.policy
            ),
        ));
    }
    if let Some(t) = spec.teardown {
        if !r.base.switches.contpte {
            return Err(Error::invalid(
                Param::Teardown,
                t,
                format!(
                    "contiguous PTEs are arm64 Linux's; check them with arm64-linux or arm64-linux-skipbcast, not {}",
                    spec.policy
                ),
            ));
        }
    }
    let shape = shape_of(
        spec,
        reclaim_of(r.base),
        r.base.arch == Arch::Arm64,
        match r.bug {
            Some(Bug::LinuxTableFreeBeforeFlush) => Some(KernelBug::TableFreeBeforeFlush),
            Some(Bug::LinuxX863ea277194daa) => Some(KernelBug::NoBatchedPending),
            Some(Bug::LinuxX863ef938c35035) => Some(KernelBug::CollapseRangeFlush),
            Some(Bug::LinuxArm645108c67c376b) => Some(KernelBug::NoSwitchToDsb),
            _ => None,
        },
    )?;
    Ok(Shape { munmap_downgrades: r.base.os == Os::Linux, ..shape })
}

/// Validates the bounds of `spec` and returns its shape with the kernel's
/// `reclaim`, architecture and bug.
fn shape_of(
    spec: &CheckSpec,
    reclaim: crate::ops::Reclaim,
    arm64: bool,
    bug: Option<KernelBug>,
) -> Result<Shape, Error> {
    if !(1..=8).contains(&spec.cpus) {
        return Err(cpus_out_of_range(spec.cpus));
    }
    if !(1..=8).contains(&spec.mms) {
        return Err(Error::invalid(Param::Mms, spec.mms, "the checker runs 1 to 8 address spaces"));
    }
    if !(1..=crate::kernel::MAX_PAGES).contains(&spec.pages) {
        return Err(Error::invalid(
            Param::Pages,
            spec.pages,
            format!(
                "an address space maps 1 to {} pages (2 lets flushes of one address space overlap)",
                crate::kernel::MAX_PAGES
            ),
        ));
    }
    if spec.ops == 0 || spec.ops > MAX_OPS {
        return Err(Error::invalid(
            Param::Ops,
            spec.ops,
            format!("give 1 to {MAX_OPS} kernel operations (a history longer than a search reaches goes in a script)"),
        ));
    }
    if spec.memory == Memory::Arm && !arm64 {
        return Err(Error::invalid(
            Param::Memory,
            "arm",
            format!("the arm mode is arm64's; {} is an x86 policy: give tso (or sc)", spec.policy),
        ));
    }
    let most = crate::shape::max_cpus(spec.memory, spec.completion);
    if spec.cpus > most {
        let why = match spec.completion {
            Completion::Any => "+any is for small bounds",
            Completion::Latest => "the arm mode offers a second store-buffer drain per CPU",
        };
        return Err(Error::invalid(
            Param::Memory,
            crate::shape::memory_text(spec.memory, spec.completion),
            format!("{why}: give at most {most} CPUs (each CPU's options must fit the search's 16 labels)"),
        ));
    }
    // Linux's locking (the `mmap_lock` and the PTE lock) goes with its reclaim.
    let linux = reclaim == crate::ops::Reclaim::LinuxBatched;
    Ok(Shape {
        cpus: spec.cpus,
        mms: spec.mms,
        ops: spec.ops,
        pages: spec.pages,
        linux,
        munmap_downgrades: linux,
        memory: spec.memory,
        reclaim,
        arm64,
        bug,
        menu: spec.menu,
        teardown: spec.teardown,
        completion: spec.completion,
    })
}

/// Returns how the kernel of `base` (a registered policy) pages out, as its
/// entry's [`Os`] says: Linux (LATR's too) with reclaim's batched flush, FreeBSD
/// (`arm64-noasid` too, FreeBSD arm64 before ASIDs) with the page daemon's
/// per-page invalidation of the pmap.
fn reclaim_of(base: &PolicyDef) -> crate::ops::Reclaim {
    match base.os {
        Os::Linux | Os::LinuxV410 => crate::ops::Reclaim::LinuxBatched,
        Os::Freebsd => crate::ops::Reclaim::FreebsdPageDaemon,
    }
}

/// Returns the kinds of `spec.menu` its policy can be offered: without
/// [`tlbkit_policy::Policy::ticks`] no tick is, so a report does not name it.
pub(crate) fn menu_offered(spec: &CheckSpec) -> u32 {
    struct Ticks;
    impl WithPolicy for Ticks {
        type Out = bool;
        fn with<P: Policy>(self, build: &dyn Fn() -> P) -> bool {
            build().ticks()
        }
    }
    let ticks = with_policy(spec, Ticks).unwrap_or(true);
    if ticks {
        spec.menu
    } else {
        spec.menu & !crate::ops::OpKind::Tick.bit()
    }
}

/// A kind of operation a check's `--menu` names that the policy's kernel, or
/// the shape, never offers ([`not_offered`]).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct NotOffered {
    /// The kind, as `--menu` names it.
    pub kind: &'static str,
    /// Why it is never offered.
    pub why: &'static str,
}

/// Returns the kinds a `--menu` of `spec` names that are never offered to its
/// policy, each with why. Only a menu given explicitly is looked at (one that
/// differs from [`crate::ops::OpKind::all`]): the default names every kind
/// and offers each where the kernel has it.
pub fn not_offered(spec: &CheckSpec) -> Vec<NotOffered> {
    use crate::ops::OpKind;
    use crate::shape::Reclaim;
    if spec.menu == OpKind::all() {
        return Vec::new();
    }
    let Ok(sh) = shape(spec) else { return Vec::new() };
    let offered = menu_offered(spec);
    let why = |k: OpKind| -> Option<&'static str> {
        match k {
            OpKind::Madvise if !sh.linux => Some(
                "FreeBSD's MADV_DONTNEED keeps the mapping: pmap_advise clears only the referenced and modified \
                 bits, so it removes no translation",
            ),
            OpKind::Cow | OpKind::Migrate if !sh.linux => Some("modelled for Linux's kernel only"),
            OpKind::Reclaim2 if sh.reclaim != Reclaim::LinuxBatched => {
                Some("only Linux batches reclaim's flushes; FreeBSD's page daemon invalidates page by page")
            }
            OpKind::Write if sh.teardown.is_none() => {
                Some("a user write goes to the contiguous block, which only a check with --teardown maps")
            }
            OpKind::Tick if offered & k.bit() == 0 => Some("the policy does not work at ticks"),
            _ => None,
        }
    };
    OpKind::ALL
        .into_iter()
        .filter(|k| spec.menu & k.bit() != 0)
        .filter_map(|k| why(k).map(|why| NotOffered { kind: k.name(), why }))
        .collect()
}

/// Whether a check of `policy` must reach an ASID rollover to have checked
/// what the policy is for: an ASID allocator's (Linux's generations,
/// FreeBSD's epochs), a zoo entry on one included.
pub(crate) fn needs_rollover(policy: &str) -> bool {
    resolve(policy).is_ok_and(|r| r.base.family == registry::Family::AsidAllocator)
}

/// Returns the bug-zoo bug `policy` names (`None` for a registered policy), or
/// the message [`resolve`] gives for an unknown name.
pub(crate) fn zoo_bug(policy: &str) -> Result<Option<Bug>, Error> {
    resolve(policy).map(|r| r.bug)
}

/// Resolves `spec.policy` and builds its registry configuration without
/// building the policy: a bad name or size fails here, with its own message.
pub(crate) fn validate_build(spec: &CheckSpec) -> Result<(), Error> {
    build(spec, &resolve(&spec.policy)?).map(drop)
}

/// Builds the policy `spec` names and runs `code` with it ([`with_policy`],
/// for the modules that run checks).
pub(crate) fn with_spec_policy<W: WithPolicy>(spec: &CheckSpec, code: W) -> Result<W::Out, Error> {
    with_policy(spec, code)
}

/// Returns whether `policy` (a registered name or `zoo/<id>`) is an x86 policy
/// (its ASID space is PCID slots), `false` when the name is unknown.
pub fn is_x86(policy: &str) -> bool {
    resolve(policy).is_ok_and(|r| r.base.arch == Arch::X86_64)
}

/// Returns whether `policy` (a registered name or `zoo/<id>`) runs under a
/// Linux kernel (its registry entry's [`Os`]), `false` when the name is unknown.
pub(crate) fn is_linux(policy: &str) -> bool {
    resolve(policy).is_ok_and(|r| r.base.os.is_linux())
}

/// Returns the architecture of `policy` (a registered name or `zoo/<id>`),
/// `None` when the name is unknown.
pub(crate) fn arch(policy: &str) -> Option<Arch> {
    resolve(policy).ok().map(|r| r.base.arch)
}

/// Returns the registered policy `policy` names: itself, or a bug-zoo entry's
/// base; `None` for an unknown name.
pub(crate) fn base_name(policy: &str) -> Option<&'static str> {
    resolve(policy).ok().map(|r| r.base.name)
}

/// How deep `tlbkit check` looks: its shape and search for `--quick`, none,
/// or `--deep`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Depth {
    /// `--quick`: the small shape (2 CPUs, 3 address spaces, 6 operations),
    /// 10,000 PCT schedules: seconds, for a first look while editing.
    Quick,
    /// No preset: the policy's one-shape defaults (see [`preset`]), sampled with
    /// PCT within a schedule budget that keeps a release build near a minute.
    Default,
    /// `--deep`: the default shape, searched exhaustively with no cap: the proof
    /// for that shape, which takes far longer than the default run.
    Deep,
}

/// What a registered policy is, for its default shape (its registry entry says).
pub use tlbkit_registry::Family;

/// Returns the family of the registered policy `base` (a bug-zoo entry's base
/// included), as its registry entry says; [`Family::Shootdown`] for an unknown
/// name.
pub fn family(base: &str) -> Family {
    registry::policy(base).map_or(Family::Shootdown, |p| p.family)
}

/// The schedules a one-shape run of a registered policy samples unless told.
/// Measured on the 2-core development machine with a release build: each
/// real policy's family shape takes about a minute or less. (The default run,
/// a portfolio, has its own budget: [`crate::portfolio::PORTFOLIO_BUDGET`].)
pub const DEFAULT_SCHEDULES: u64 = 300_000;

/// The schedules a `--quick` run samples.
pub const QUICK_SCHEDULES: u64 = 10_000;

/// Returns the one shape `tlbkit check --policy POLICY` starts from when a flag
/// chooses the shape (`--cpus` and the like; with no such flag it runs the
/// [`crate::portfolio`]): its [`preset`] with none given.
pub fn default_spec(policy: &str) -> CheckSpec {
    preset(policy, Depth::Default)
}

/// Returns the one shape `tlbkit check --policy POLICY` runs under preset `p`
/// (no preset: the shape a shape flag starts from; with no flag at all the
/// default run is the [`crate::portfolio`], whose family shape this is): a
/// whole [`CheckSpec`], with seed 1, the policy's [`default_memory`] and no
/// contiguous block, so that the flags given replace its fields.
///
/// Every registered policy's address spaces map 2 pages, the fewest that let
/// two flushes of one address space cover different pages at once; a bug-zoo
/// entry's map one.
///
/// A registered policy's one-shape default (its *family shape*) is chosen so that one run reaches what
/// its bugs need, and the report shows it did (`reached:`): an ASID allocator
/// (arm64 with ASIDs) gets 2 CPUs, 5 address spaces, 4 ASIDs and 12 operations
/// of every kind, which take it through at least two rollovers (three
/// generations; a rollover needs one more live address space than the three
/// ASIDs a generation hands out beside the reserved zero, and a second one
/// needs an address space the first did not reserve); a shootdown protocol (x86,
/// `arm64-noasid`) gets 3 CPUs, 3 address spaces and 9 operations, so that two
/// CPUs can be targets of a third's shootdown and two initiators' requests can
/// meet; FreeBSD x86 also gets 4 PCIDs per CPU ([`default_asids`]), so that its
/// per-CPU PCID generations roll over too. Exhaustive search at these shapes takes far longer than a minute, so
/// the default samples [`DEFAULT_SCHEDULES`] PCT schedules (bug depth 3) with
/// the seed given (default 1); `--deep` is the exhaustive proof at the same
/// shape, `--quick` the old small shape.
///
/// A bug-zoo entry instead gets the smallest shape its bug needs (its
/// *tailored shape*; its default run is its base policy's portfolio), searched with
/// PCT, which reaches such shallow-preemption bugs fastest: the counter's early
/// acknowledgement needs a third CPU, a second initiator overwriting the
/// request; a8ffaaa060b8 needs two rollovers while one CPU sits between its
/// fast-path check and its exchange, so five address spaces and context
/// switches only; 5e10f9887ed8 needs a fourth address space for the ASID that
/// `kswapd`'s flush reads too early to be handed out again; 83b0177a6c48 and the
/// stable trees' late `LOADED_MM_SWITCHING` store need one CPU to switch back to
/// an address space it ran before (its mask bit and PCID slot still set) while
/// the other unmaps there, seven switches and unmaps in all; the
/// `active_cpu` switch without its `DSB ISHST` needs a CPU's switch into an
/// address space the other runs to stop between its root write and the end of
/// the switch while the other unmaps, which PCT's few priority changes seldom
/// give and a search of every schedule of four switches and unmaps finds at
/// once; the misplaced `active_cpu` reset needs a fourth address space for a
/// rollover while the other CPU still runs the one it reserves, six switches
/// and unmaps; the two reclaim races (4b634918384c, 3ea277194daa) need one address
/// space and three operations: a CPU switches to it, the other (idle, so `kswapd`)
/// reclaims its page, and the first unmaps the page while the reclaim's flush is
/// deferred. PCT needs thousands of schedules for that window on arm64 (the
/// `munmap` takes more steps than the reclaim has between its clear and its
/// `DSB`), so these two are searched exhaustively: a few hundred states. The
/// targeted tlbbatch's two (v4's add-pending, v1's flush) need one address
/// space and six operations: both CPUs run it, one unmaps its page (the flush's
/// IPI makes it a global ASID while both still run it on dynamic PCIDs) and
/// faults it back in, the other goes idle and `kswapd` reclaims the page;
/// searched exhaustively, a few thousand states.
pub fn preset(policy: &str, p: Depth) -> CheckSpec {
    let all = crate::ops::OpKind::all();
    let r = resolve(policy).ok();
    let asids = |cpus: usize| default_asids(policy, cpus);
    let memory = default_memory(policy);
    // Two pages let two flushes of one address space cover different pages at
    // once; each bug-zoo entry's bug needs one.
    let pages = if r.as_ref().is_some_and(|r| r.bug.is_some()) { 1 } else { 2 };
    let with = |cpus: usize, mms: usize, ops: usize, mode: Mode, menu: u32| CheckSpec {
        policy: policy.to_string(),
        cpus,
        mms,
        pages,
        asids: asids(cpus),
        ops,
        mode,
        iterations: match (p, mode) {
            (_, Mode::Exhaustive) => u64::MAX,
            (Depth::Quick, _) => QUICK_SCHEDULES,
            _ => 100_000,
        },
        seed: 1,
        memory,
        menu,
        teardown: None,
        completion: Completion::Latest,
    };
    let shape = match r.as_ref().and_then(|r| r.bug) {
        Some(bug) => match bug {
            Bug::LinuxArm64A8ffaaa060b8 => with(2, 5, 12, Mode::Pct, crate::ops::OpKind::Switch.bit()),
            Bug::LinuxArm645e10f9887ed8 => with(2, 4, 10, Mode::Pct, all),
            Bug::FreebsdX86CounterEarlyAck => with(3, 3, 6, Mode::Pct, all),
            Bug::LinuxX8683b0177a6c48 | Bug::LinuxX86StableCheckUseOrder => {
                with(2, 2, 7, Mode::Pct, crate::ops::OpKind::Switch.bit() | crate::ops::OpKind::Munmap.bit())
            }
            Bug::ActiveCpuNoSwitchDsb => {
                with(2, 2, 4, Mode::Exhaustive, crate::ops::OpKind::Switch.bit() | crate::ops::OpKind::Munmap.bit())
            }
            Bug::ActiveCpuResetReserved => {
                with(2, 4, 6, Mode::Pct, crate::ops::OpKind::Switch.bit() | crate::ops::OpKind::Munmap.bit())
            }
            Bug::LinuxArm644b634918384c | Bug::LinuxX863ea277194daa => {
                use crate::ops::OpKind::{Munmap, Reclaim, Switch};
                with(2, 1, 3, Mode::Exhaustive, Switch.bit() | Munmap.bit() | Reclaim.bit())
            }
            Bug::InvlpgbTlbbatchNoTransition | Bug::InvlpgbTlbbatchSyncOrIpi => {
                use crate::ops::OpKind::{Fault, Idle, Munmap, Reclaim, Switch};
                let menu = Switch.bit() | Idle.bit() | Munmap.bit() | Fault.bit() | Reclaim.bit();
                with(2, 1, 6, Mode::Exhaustive, menu)
            }
            _ => with(2, 3, 6, Mode::Pct, all),
        },
        None => {
            let fam = r.as_ref().map_or(Family::AsidAllocator, |r| r.base.family);
            let d = match fam {
                Family::AsidAllocator => with(2, 5, 12, Mode::Pct, all),
                Family::Shootdown => with(3, 3, 9, Mode::Pct, all),
            };
            CheckSpec { iterations: DEFAULT_SCHEDULES, ..d }
        }
    };
    match p {
        Depth::Default => shape,
        Depth::Quick if r.as_ref().is_some_and(|r| r.bug.is_some()) => {
            CheckSpec { iterations: QUICK_SCHEDULES, ..shape }
        }
        Depth::Quick => with(2, 3, 6, Mode::Pct, all),
        Depth::Deep => CheckSpec { mode: Mode::Exhaustive, iterations: u64::MAX, ..shape },
    }
}

/// Returns the defaults with a contiguous block (`--teardown`) under preset `p`:
/// the small shape (2 CPUs, 6 operations; a bug-zoo entry's own) with one
/// address space of one ordinary page beside its block, whose threads the CPUs run, searched with 100,000 PCT
/// schedules (`--quick`: 10,000; `--deep`: exhaustively). Every PTE access of an
/// unfold is a step and a write may land in any of 16 PTEs, so exhaustive runs
/// need fewer operations (`--mode exhaustive --ops 4` on 2 CPUs: millions of
/// states).
pub fn contpte_defaults(policy: &str, p: Depth) -> CheckSpec {
    let zoo = resolve(policy).ok().is_some_and(|r| r.bug.is_some());
    let d = if zoo { default_spec(policy) } else { preset(policy, Depth::Quick) };
    let d = CheckSpec { mms: 1, pages: 1, mode: Mode::Pct, iterations: 100_000, ..d };
    match p {
        Depth::Default => d,
        Depth::Quick => CheckSpec { iterations: QUICK_SCHEDULES, ..d },
        Depth::Deep => CheckSpec { mode: Mode::Exhaustive, iterations: u64::MAX, ..d },
    }
}

/// The machine and search a bug-zoo entry is checked with unless told otherwise:
/// `(cpus, mms, ops, mode)` of its [`default_spec`].
pub fn zoo_defaults(policy: &str) -> Option<(usize, usize, usize, Mode)> {
    resolve(policy).ok()?.bug?;
    let d = default_spec(policy);
    Some((d.cpus, d.mms, d.ops, d.mode))
}
