//! What `tlbkit check --policy P` runs with no shape flag: a *portfolio* of
//! shapes, each sampled with PCT, one after another, stopping at the first
//! violation.
//!
//! One shape cannot serve every bug. Splitting the operations evenly over
//! many CPUs leaves each too few for a bug that needs four or five operations
//! on one CPU (switch, go idle, reclaim, switch back), and a menu of every kind
//! makes any particular sequence of them rare; a bug that needs a third CPU
//! cannot show up on two. So the default run spreads its schedules over a few
//! shapes, from one or two CPUs with many operations each to three CPUs with
//! fewer, and gives each shape a menu drawn as swarm testing draws its
//! configurations (Groce, Zhang, Eide, Chen and Regehr, "Swarm testing",
//! ISSTA 2012): every kind of operation the policy implements is in or out at
//! the toss of a coin seeded by the run's seed, so each shape leaves some
//! kinds out and the sequences of the rest become likely. One shape, the
//! policy's family shape ([`crate::spec::default_spec`]), keeps every kind.
//!
//! Every shape runs under its architecture's memory model ([`arch_memory`]),
//! with store buffers: sequential consistency would hide every bug where a
//! store waits in a store buffer while a later load passes it. On arm64 the
//! shapes run twice, each time with half its share: first under TSO, then
//! under the arm mode, so that a bug TSO already shows is reported with that
//! simpler explanation before the arm mode's own windows (a finding of the
//! base policy's, `linux-arm64-asid-publish`, would otherwise hide the bug
//! of a zoo entry built on it).
//!
//! A shape is an ordinary one-shape check ([`CheckSpec`]): its line in the
//! report, given as flags, runs it alone, and a counterexample's replay token
//! is that shape's. The schedules are shared out so that each shape takes a
//! comparable share of the time (the cost model of `cost`). What a portfolio does not
//! promise: a shape's menu is random, so a bug that needs one particular
//! combination of kinds is found only if some shape's menu holds it (the
//! family shape's always does) — like any sampling, no proof.

use crate::ops::OpKind;
use crate::shape::{Completion, Memory};
use crate::spec::{self, CheckSpec, Family};
use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};
use tlbkit_policy::zoo::Bug;
use tlbkit_registry::Arch;

/// A default run's budget, as schedules of its family shape
/// ([`crate::spec::default_spec`]) under sequential consistency: each of its
/// shapes gets an equal share of the time these take (by the cost model of
/// `cost`). Fewer than the 300,000 a one-shape run of the family shape
/// samples ([`crate::spec::DEFAULT_SCHEDULES`]), because store buffers add
/// steps (their drains) and a menu of fewer kinds can cost more per
/// operation: measured so that a default run takes no longer than that one
/// shape (`bench/2026-11-25-portfolio.md`).
pub const PORTFOLIO_BUDGET: u64 = 200_000;

/// The shapes of a default run, in the order they run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Portfolio {
    /// One check per shape, each with its share of the schedules.
    pub members: Vec<CheckSpec>,
}

/// One shape of a portfolio before its menu and schedules: CPUs, address
/// spaces, pages of each, operations, and whether it keeps every kind.
#[derive(Clone, Copy, Debug)]
struct Outline {
    cpus: usize,
    mms: usize,
    pages: usize,
    ops: usize,
    every_kind: bool,
}

const fn outline(cpus: usize, mms: usize, pages: usize, ops: usize, every_kind: bool) -> Outline {
    Outline { cpus, mms, pages, ops, every_kind }
}

/// The shapes of an ASID allocator's portfolio. Five address spaces against
/// the four ASIDs of one or two CPUs (three allocatable beside the reserved
/// zero) make every shape on one or two CPUs roll over; three CPUs get eight
/// ASIDs, so their shapes are for the cross-CPU side (broadcast invalidation,
/// the masks that decide a local flush) with three address spaces. Small
/// shapes map one page (cheaper, and what most bugs need), larger ones two,
/// so that flushes of one address space can cover different pages.
const ASID_ALLOCATOR: [Outline; 9] = [
    outline(1, 5, 1, 8, false),
    outline(1, 5, 1, 8, false),
    outline(2, 5, 1, 10, false),
    outline(2, 5, 1, 10, false),
    outline(2, 5, 2, 12, false),
    outline(2, 5, 2, 12, true),
    outline(3, 3, 1, 6, false),
    outline(3, 3, 1, 9, false),
    outline(3, 3, 2, 9, false),
];

/// The shapes of a shootdown protocol's portfolio: three address spaces, from
/// one CPU (a CPU's own sequences: lazy switches, reclaim by a kernel thread
/// while the CPU is idle) and two CPUs with many operations each to three
/// CPUs, where two initiators' requests can meet a third CPU.
const SHOOTDOWN: [Outline; 9] = [
    outline(1, 3, 1, 8, false),
    outline(2, 3, 1, 10, false),
    outline(2, 3, 1, 10, false),
    outline(2, 3, 2, 12, false),
    outline(3, 3, 1, 6, false),
    outline(3, 3, 1, 6, false),
    outline(3, 3, 1, 9, false),
    outline(3, 3, 2, 9, false),
    outline(3, 3, 2, 9, true),
];

/// Returns the memory models of `policy`'s architecture as the default run
/// uses them, in the order its shapes run under them: x86-TSO on x86; on
/// arm64 TSO (with arm64's PTE clear a buffered store), then the arm mode
/// ([`Memory::Arm`]: root writes order nothing, a `DSB` may complete
/// invalidations before its stores drain). TSO comes first because the arm
/// mode shows `arm64-linux`'s finding `linux-arm64-asid-publish`
/// (`tlbkit_policy::findings`), which would otherwise be what the default run
/// of a bug-zoo entry built on it reports (`zoo/linux-arm64-a8ffaaa060b8` did,
/// in its third shape) instead of its own bug.
pub fn arch_memory(policy: &str) -> &'static [Memory] {
    match spec::arch(policy) {
        Some(Arch::X86_64) => &[Memory::Tso],
        Some(Arch::Arm64) | None => &[Memory::Tso, Memory::Arm],
    }
}

/// The bug-zoo entries whose portfolio ends with their own tailored shape
/// ([`spec::default_spec`]), because no shape of their base policy's portfolio
/// finds them: the `active_cpu` switch without its `DSB ISHST` shows only in
/// the arm mode and needs a preemption between a root write and the end of
/// its switch that PCT's few priority changes seldom give; an exhaustive
/// search of four switches and unmaps finds it at once.
const TAILORED: [Bug; 1] = [Bug::ActiveCpuNoSwitchDsb];

/// Returns the kinds of operation `policy`'s machine implements without a
/// contiguous block that the portfolio offers: every kind of the default menu
/// but `write` (a write needs the block; `cow` and `migrate` are offered only
/// where a menu names them), with `madvise` only on Linux and `tick` only for
/// a policy that works at ticks.
pub fn kinds_implemented(policy: &str) -> u32 {
    let mut kinds = OpKind::all() & !OpKind::Write.bit();
    if !spec::is_linux(policy) {
        kinds &= !OpKind::Madvise.bit();
    }
    let probe = CheckSpec { menu: kinds, ..spec::default_spec(policy) };
    spec::menu_offered(&probe)
}

/// Returns a swarm menu: `switch` (without which no CPU runs a process) and
/// each other kind of `kinds` at the toss of a fair coin.
fn swarm_menu(kinds: u32, rng: &mut ChaCha8Rng) -> u32 {
    let mut menu = OpKind::Switch.bit();
    for k in OpKind::ALL {
        if k != OpKind::Switch && kinds & k.bit() != 0 && rng.next_u64() & 1 == 1 {
            menu |= k.bit();
        }
    }
    menu
}

/// Returns the relative time a schedule of shape `o` takes: its operations
/// plus six, times its CPUs plus two. A schedule's time grows with its steps:
/// a fixed part (setting the machine up, every CPU's first steps) worth about
/// six operations, and its operations, whose steps grow with the CPUs they
/// may have to reach (IPIs, broadcasts, waiting for acknowledgements). Fitted
/// to the shapes' times on the development machine; a shape's menu moves its
/// time by a third either way (forks and exits cost more than faults), so the
/// shares are comparable, not equal.
fn cost(o: &Outline) -> f64 {
    ((o.ops + 6) * (o.cpus + 2)) as f64
}

/// Returns the portfolio `tlbkit check --policy POLICY` runs with `seed`:
/// its family's shapes, each with its menu (drawn with `seed`), the
/// architecture's memory model and `seed` for its PCT, and its share of the
/// schedules: by default an equal share of [`PORTFOLIO_BUDGET`]'s time; with
/// `schedules`, that many in all, split in the same proportions (at least one
/// each, unless `schedules` is 0). A bug-zoo entry gets its base policy's
/// portfolio, and one that only its own tailored shape finds (`TAILORED`)
/// that shape after it.
pub fn portfolio(policy: &str, schedules: Option<u64>, seed: u64) -> Portfolio {
    // A bug-zoo entry's base policy's: its own defaults are its tailored
    // shape. A C policy's is itself (its files say its architecture).
    let base =
        if policy.starts_with(tlbkit_registry::C_PREFIX) { policy } else { spec::base_name(policy).unwrap_or(policy) };
    let outlines: &[Outline] = match spec::family(base) {
        Family::AsidAllocator => &ASID_ALLOCATOR,
        Family::Shootdown => &SHOOTDOWN,
    };
    let d = spec::default_spec(base);
    let family_cost = cost(&outline(d.cpus, d.mms, d.pages, d.ops, true));
    // Each shape's share of the default budget: its equal share of the time.
    let shares: Vec<f64> =
        outlines.iter().map(|o| PORTFOLIO_BUDGET as f64 * family_cost / (outlines.len() as f64 * cost(o))).collect();
    let scale = match schedules {
        Some(n) => n as f64 / shares.iter().sum::<f64>(),
        None => 1.0,
    };
    let kinds = kinds_implemented(policy);
    let memories = arch_memory(policy);
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5357_4152_4d00_0000);
    // The menus are drawn once: the same shape under each model.
    let menus: Vec<u32> = outlines
        .iter()
        .map(|o| {
            let menu = swarm_menu(kinds, &mut rng);
            if o.every_kind {
                kinds
            } else {
                menu
            }
        })
        .collect();
    let split = memories.len() as f64;
    let mut members: Vec<CheckSpec> = memories
        .iter()
        .flat_map(|&memory| {
            outlines.iter().zip(&shares).zip(&menus).map(move |((o, share), &menu)| (memory, o, share, menu))
        })
        .map(|(memory, o, share, menu)| {
            let n = (share * scale / split).round() as u64;
            CheckSpec {
                policy: policy.to_string(),
                cpus: o.cpus,
                mms: o.mms,
                pages: o.pages,
                asids: spec::default_asids(policy, o.cpus),
                ops: o.ops,
                mode: spec::Mode::Pct,
                // At least one schedule each, unless none was asked for (then
                // the check says nothing was checked).
                iterations: n.max(schedules.unwrap_or(1).min(1)),
                seed,
                memory,
                menu,
                teardown: None,
                completion: Completion::Latest,
            }
        })
        .collect();
    if spec::zoo_bug(policy).ok().flatten().is_some_and(|b| TAILORED.contains(&b)) {
        members.push(spec::default_spec(policy));
    }
    Portfolio { members }
}
