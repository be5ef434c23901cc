//! One `tlbkit run`, end to end: check the request, build the machine and the
//! policy, run the workload's phases, and collect metrics, result and violations.
//!
//! Every error here is the user's to fix (an unknown name, an impossible value),
//! so each message says what was wrong and what would be accepted.

use crate::error::Error;
use crate::oracle::Violation;
use crate::preset::{self, Preset};
use crate::sched::SchedKind;
use crate::sim::{ContMode, ContpteConfig, Sim, SimConfig};
use crate::swapdev::SwapKind;
use crate::workload::{self, Params, Phase, Texts};
use serde::Serialize;
use serde_json::json;
use std::collections::BTreeMap;
use tlbkit_policy::contpte::Teardown;
use tlbkit_policy::Policy;
use tlbkit_registry::{self as registry, Build, PolicyDef, WithPolicy, POLICIES};

/// The most CPUs a machine may have (Linux's `NR_CPUS` default on arm64 and x86).
pub const MAX_CPUS: usize = 4096;

/// What to run.
#[derive(Clone, Debug)]
pub struct RunSpec {
    /// Machine preset name.
    pub machine: String,
    /// CPUs.
    pub cpus: usize,
    /// Policy name.
    pub policy: String,
    /// Workload name.
    pub workload: String,
    /// `--set key=value` pairs, in command-line order.
    pub sets: Vec<String>,
    /// Seed.
    pub seed: u64,
    /// Whether `no_stale_held` is checked.
    pub strict: bool,
}

impl RunSpec {
    /// Returns the command line that repeats this run.
    pub fn command(&self) -> String {
        let mut c = format!(
            "tlbkit run --machine {} --cpus {} --policy {} --workload {}",
            self.machine, self.cpus, self.policy, self.workload
        );
        for s in &self.sets {
            c.push_str(&format!(" --set {s}"));
        }
        c.push_str(&format!(" --seed {}", self.seed));
        if self.strict {
            c.push_str(" --strict");
        }
        c
    }
}

/// The metrics every run reports.
#[derive(Clone, Debug, Serialize)]
pub struct Metrics {
    /// Simulated time until the last CPU stopped, in nanoseconds.
    pub sim_time_ns: f64,
    /// Translations performed (user and kernel).
    pub tlb_accesses: u64,
    /// Translations that missed every TLB level (each needed a walk).
    pub tlb_misses: u64,
    /// Translations that missed the L1 TLB.
    pub l1_tlb_misses: u64,
    /// Page walks, speculative ones included.
    pub page_walks: u64,
    /// Speculative TLB fills.
    pub spec_fills: u64,
    /// Page faults.
    pub page_faults: u64,
    /// Local TLB invalidation operations.
    pub local_invalidations: u64,
    /// Broadcast TLB invalidation operations.
    pub broadcast_invalidations: u64,
    /// IPIs sent.
    pub ipis_sent: u64,
    /// Linux call-function requests run by a handler already on its way to
    /// their CPU, with no IPI of their own.
    pub ipis_coalesced: u64,
    /// Time IPI handlers ran, in nanoseconds, summed over CPUs.
    pub ipi_handler_ns: f64,
    /// Of that, time spent invalidating TLBs.
    pub ipi_invalidating_ns: f64,
    /// Of that, time spent synchronising on shared cache lines.
    pub ipi_sync_ns: f64,
    /// Shootdowns that reported their phases (issue .. done).
    pub shootdowns: u64,
    /// Their total latency from issue to done, in nanoseconds.
    pub shootdown_ns: f64,
    /// Cache-line transfers of policy state.
    pub line_transfers: u64,
    /// Context switches.
    pub context_switches: u64,
    /// ASID rollovers (epoch resets, generation bumps).
    pub asid_rollovers: u64,
    /// Invalidations of a whole ASID or the whole TLB.
    pub full_flushes: u64,
    /// System calls.
    pub syscalls: u64,
    /// Simulator events processed.
    pub events: u64,
    /// The contpte metrics below are reported when `--set contpte` or `--set
    /// teardown` is given (so other runs print what they always printed).
    /// 64 KB TLB fills, speculative ones included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contpte_fills: Option<u64>,
    /// 64 KB folios allocated (anonymous and page cache).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub folios: Option<u64>,
    /// Range flushes the arm64 arch code made through `PteMem` (fold and unfold
    /// break-before-make, access-flag updates, copy-on-write).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pte_range_flushes: Option<u64>,
    /// Of those, the ones made while exiting address spaces were torn down
    /// (`noopt`: one per contiguous block; the other strategies none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_range_flushes: Option<u64>,
    /// Address spaces torn down by `exit` (each process's last thread).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exits: Option<u64>,
    /// Simulated time those teardowns took, in nanoseconds, summed: clearing
    /// every PTE, the flush of the address space, freeing the frames (the
    /// `exit_group` cost origin 004 measures; divide by `exits`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_teardown_ns: Option<f64>,
    /// Hardware actions (another CPU's write or speculative fill) the simulator
    /// placed between two page-table accesses of the arch code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hw_races: Option<u64>,
    /// File pages reported dirty when their PTE was cleared (written back).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_writebacks: Option<u64>,
}

impl Metrics {
    /// Returns metrics of zero, with the contpte ones present when `contpte`
    /// (as a run with `--set contpte` or `--set teardown` reports them).
    pub fn zero(contpte: bool) -> Metrics {
        let report = contpte.then_some(0);
        // A literal of every field, so that a new metric cannot be left out here.
        Metrics {
            sim_time_ns: 0.0,
            tlb_accesses: 0,
            tlb_misses: 0,
            l1_tlb_misses: 0,
            page_walks: 0,
            spec_fills: 0,
            page_faults: 0,
            local_invalidations: 0,
            broadcast_invalidations: 0,
            ipis_sent: 0,
            ipis_coalesced: 0,
            ipi_handler_ns: 0.0,
            ipi_invalidating_ns: 0.0,
            ipi_sync_ns: 0.0,
            shootdowns: 0,
            shootdown_ns: 0.0,
            line_transfers: 0,
            context_switches: 0,
            asid_rollovers: 0,
            full_flushes: 0,
            syscalls: 0,
            events: 0,
            contpte_fills: report,
            folios: report,
            pte_range_flushes: report,
            exit_range_flushes: report,
            exits: report,
            exit_teardown_ns: report.map(|x| x as f64),
            hw_races: report,
            file_writebacks: report,
        }
    }
}

/// What a run produced.
#[derive(Clone, Debug, Serialize)]
pub struct RunOutput {
    /// Machine preset.
    pub machine: String,
    /// CPUs.
    pub cpus: usize,
    /// Policy.
    pub policy: String,
    /// Workload.
    pub workload: String,
    /// Seed.
    pub seed: u64,
    /// Every parameter's effective value.
    pub params: BTreeMap<String, serde_json::Value>,
    /// Metrics of the main phase.
    pub metrics: Metrics,
    /// The workload's result.
    pub result: BTreeMap<String, f64>,
    /// Violations (the first [`crate::oracle::Oracle::KEEP`] of each phase).
    pub violations: Vec<Violation>,
    /// Violations found in all.
    pub violations_total: u64,
    /// Violations found in all, by property (absent when there are none).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub violations_by_property: BTreeMap<String, u64>,
    /// The command that replays this run.
    pub replay: String,
}

impl RunOutput {
    /// Returns every figure of the run by name: the workload's results and the
    /// metrics (the names [`metric_names`] lists).
    pub fn metric_values(&self) -> BTreeMap<String, f64> {
        let mut all = self.result.clone();
        if let serde_json::Value::Object(m) = serde_json::to_value(&self.metrics).unwrap_or_default() {
            all.extend(m.into_iter().filter_map(|(k, v)| v.as_f64().map(|x| (k, x))));
        }
        all
    }
}

/// Machine and kernel parameters, besides the workload's own.
pub const MACHINE_KEYS: &[(&str, &str)] = &[
    ("asid_bits", "ASID width in bits (the preset's supported widths)"),
    ("spec_rate", "probability of a speculative TLB fill per user operation, 0..1 (default 0.02)"),
    (
        "migration",
        "on|off: let the scheduler move threads between CPUs: wake-affine placement and load balancing for cfs and \
         eevdf, balanced wake-ups and idle stealing for fifo (default: on for cfs and eevdf, as Linux balances, off \
         for fifo)",
    ),
    (
        "swap",
        "zram|nvme: the device MADV_PAGEOUT writes to and a swap-in fault reads from (default zram: lzo-rle, \
         compressed on the CPU)",
    ),
    (
        "sched",
        "fifo|cfs|eevdf: the scheduler (default: the preset's kernel's: eevdf for Linux v6.6 and later, cfs for \
         earlier Linux, fifo for the FreeBSD presets)",
    ),
    (
        "slice_us",
        "time slice in microseconds: fifo's slice (default 4000); for cfs and eevdf, when given, the base slice \
         (eevdf) or minimum granularity (cfs, latency 8 times it) instead of the kernel's scaled default",
    ),
    (
        "jitter",
        "0..0.5: spread every compute time and system-call path by a random factor in [1-jitter, 1+jitter] drawn \
         from the seed, so that seeds differ as runs of a real machine do (default 0: none, nothing drawn)",
    ),
    (
        "noise",
        "on|off: the seed draws what varies between runs of a real machine: the tick's phase, each IPI's delivery \
         latency and each wake-up's, around their means (default on; off: every seed the same timing, as before \
         this setting existed)",
    ),
    ("numa", "NUMA nodes the machine is booted with (the preset's choices, e.g. altra: 1 or 2)"),
    (
        "sockets",
        "sockets of the preset's kind (default: the real machine's); more model a larger machine, so that --cpus \
         may exceed the preset's cores (up to 4096 CPUs)",
    ),
    ("kpti", "on|off: arm64-linux with kernel page-table isolation, halving the usable ASIDs (default off)"),
    (
        "flush_ceiling",
        "0..4096: x86 Linux kernels only; tlb_single_page_flush_ceiling, the pages above which a range flush becomes \
         a full flush (default 33, the kernel's; 0: every range a full flush)",
    ),
    (
        "pti",
        "on|off: x86 Linux with PCIDs only (x86-linux-pcid, -512, -513, -613, -lazytrim); page-table isolation \
         (v4.15+): a CR3 write at every kernel entry and exit, and a user PCID flushed per page by INVPCID, or \
         whole at the next return to user on machines without INVPCID (default: on where the kernel turns it on, \
         a Meltdown-affected CPU under Linux v4.15 or later; the run's kernel and pti say which)",
    ),
    (
        "tlbi_range",
        "on|off: arm64-linux kernels only; flush ranges with FEAT_TLBIRANGE range operations (TLBI RVAE1IS), the \
         whole-ASID fallback only past 2^21 pages (default: the machine's, on for graviton4)",
    ),
    (
        "tlb_mode",
        "arm64-linux-tlbmode only: the tlb_mode= word, decimal or 0x hex: bits 0-9 the most CPUs in mm_cpumask \
         flushed by IPIs (above: broadcast; 0: always broadcast), bit 10 (0x400) local flushes of an mm only this \
         CPU ran, bit 12 (0x1000) no flush of an mm no CPU ran (default: log2(cpus) | 0x1400)",
    ),
    (
        "contpte",
        "off|folios|on: arm64-linux kernels only (folios: x86-64 Linux kernels too, which have large folios but \
         no contiguous bit); 64 KB folios for anonymous memory and files, mapped with the contiguous bit (on) or \
         without (folios, origin 004's baseline) (default off)",
    ),
    (
        "teardown",
        "noopt|simple|robust|clear_ptes: how exit tears contiguous blocks down with contpte=on (default clear_ptes)",
    ),
    (
        "tlbbatch",
        "on|off: reclaim and MADV_PAGEOUT defer their unmaps' TLB flushes into one batch flush (on, the default: \
         Linux v4.3's try_to_unmap_flush, 72b252aed506; arm64's since v6.5, 43b3dfdd0455) or flush each page as it is unmapped (off: \
         ptep_clear_flush, before v4.3 and on arm64 before v6.5)",
    ),
    (
        "migrate_batch",
        "on|off: migrate_pages(2) unmaps up to 512 folios with one deferred TLB flush, then copies them (on: \
         Linux v6.3's migrate_pages_batch, 7e12beb8ca2a) or unmaps, flushes and copies one folio at a time (off) (default: on \
         for a preset kernel of v6.3 or later)",
    ),
    (
        "vma_locks",
        "on|off: Linux machines only; a fault takes its VMA's lock (v6.4's per-VMA locks: 0bff0aaea03e on x86, cd7f176aea5f on arm64) or mmap_lock for reading \
         (default: the machine's kernel's, on from v6.4)",
    ),
    (
        "lru_drain",
        "on|off: Linux machines only; madvise(MADV_DONTNEED), munmap and exit first drain the CPU's LRU-add batch \
         onto the LRU under its lock (lru_add_drain(), until v6.14) or leave it to fill (default: the run's kernel's, on \
         until v6.14)",
    ),
];

/// The key under which `--set jitter` is kept in a run's [`Params`].
const JITTER: &str = "jitter";

/// Applies the run's `--set jitter`, if given, to a freshly built simulator.
fn apply_jitter(sim: &mut Sim, params: &Params) {
    if let Some(&j) = params.get(JITTER) {
        sim.set_jitter(j);
    }
}

/// Parses the value `v` of the on|off setting `k`.
fn on_off(k: &str, v: &str) -> Result<bool, Error> {
    match v {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(bad_setting(k, v, "give on or off")),
    }
}

/// Returns the error of the setting `k=v`, whose value must be as `want` says.
fn bad_setting(k: &str, v: &str, want: impl Into<String>) -> Error {
    Error::BadSetting { key: k.to_string(), value: v.to_string(), want: want.into() }
}

/// Refuses the setting `k=v` of a Linux mechanism on a machine that runs
/// FreeBSD, which lacks it (`why`: "which has no ...").
fn linux_only(preset: &Preset, k: &str, v: &str, why: &str) -> Result<(), Error> {
    match preset.kernel {
        preset::Kernel::Linux(..) => Ok(()),
        preset::Kernel::FreeBsd(_) => {
            Err(bad_setting(k, v, format!("{} runs FreeBSD, {why}: give it on a Linux machine", preset.name)))
        }
    }
}

/// Returns the error of the setting `k=v`, out of `range`.
fn out_of_range(k: &str, v: &str, range: impl Into<String>) -> Error {
    Error::SettingRange { key: k.to_string(), value: v.to_string(), range: range.into() }
}

/// The machine and kernel settings after `--set`.
struct MachineParams {
    /// The policy's entry, which says the switches it takes.
    pol: &'static PolicyDef,
    asid_bits: u8,
    numa: usize,
    kpti: bool,
    tlbi_range: bool,
    tlb_mode: Option<u32>,
    /// `--set flush_ceiling`, if given.
    flush_ceiling: Option<u64>,
    pti: bool,
    /// The machine's `INVPCID`.
    invpcid: bool,
    spec_rate: f64,
    /// `None`: the class's default.
    migration: Option<bool>,
    sched: SchedKind,
    swap: SwapKind,
    slice_us: f64,
    /// Whether `slice_us` was given (it then sets the fair classes' base slice).
    slice_set: bool,
    contpte: ContpteConfig,
    tlbbatch: bool,
    /// `None`: the preset kernel's.
    migrate_batch: Option<bool>,
    /// `--set vma_locks`, if given.
    vma_locks: Option<bool>,
    /// `--set lru_drain`, if given.
    lru_drain: Option<bool>,
    /// `--set noise` (on unless given off).
    noise: bool,
}

impl MachineParams {
    /// Whether threads may move between CPUs: as given, else on for the fair
    /// classes (Linux balances by default), off for FIFO.
    fn migration(&self) -> bool {
        self.migration.unwrap_or(self.sched.is_fair())
    }
}

fn valid_keys(wl: &workload::WorkloadDef) -> Vec<&'static str> {
    let mut keys: Vec<&str> = MACHINE_KEYS.iter().map(|(k, _)| *k).collect();
    keys.extend(wl.params.iter().map(|p| p.key));
    keys.extend(workload::text_params(wl.name).iter().map(|p| p.key));
    keys
}

/// A run request, checked: the preset, the workload, the machine parameters and
/// the workload's numeric and text parameters.
type Resolved = (Preset, &'static workload::WorkloadDef, MachineParams, Params, Texts);

/// Checks a run request and returns the resolved preset, machine parameters and
/// workload parameters.
fn resolve(spec: &RunSpec) -> Result<Resolved, Error> {
    resolve_on(spec, preset::resolve(&spec.machine)?)
}

/// [`resolve`] on the machine `preset`, whatever `spec.machine` names.
fn resolve_on(spec: &RunSpec, mut preset: Preset) -> Result<Resolved, Error> {
    let presets = preset::all();
    let pol =
        registry::policy(&spec.policy).ok_or_else(|| registry::Error::UnknownPolicy { name: spec.policy.clone() })?;
    // A policy that is one Linux release's code runs under that release's
    // settings (batches, scheduler, PTI), whatever kernel the machine's
    // measurements were taken on; the run's `kernel` says which.
    if let Some((major, minor)) = pol.version {
        preset.kernel = preset::Kernel::Linux(major, minor);
    }
    let wl = workload::by_name(&spec.workload).ok_or_else(|| Error::UnknownWorkload { name: spec.workload.clone() })?;
    if pol.arch != preset.arch {
        let fits: Vec<&str> = POLICIES.iter().filter(|p| p.arch == preset.arch).map(|p| p.name).collect();
        return Err(Error::WrongArch {
            policy: pol.name,
            policy_arch: pol.arch,
            machine: preset.name,
            machine_arch: preset.arch,
            fits,
        });
    }
    if pol.needs_broadcast_tlbi && !preset.has_broadcast_tlbi() {
        let fits: Vec<&str> =
            presets.iter().filter(|p| p.arch == pol.arch && p.has_broadcast_tlbi()).map(|p| p.name).collect();
        return Err(Error::NeedsInvlpgb { policy: pol.name, machine: preset.name, fits });
    }
    if spec.cpus == 0 || spec.cpus > MAX_CPUS {
        return Err(Error::CpusRange { cpus: spec.cpus as i64, max: MAX_CPUS });
    }
    let sockets = sockets(&preset, spec)?;
    if spec.cpus > sockets * preset.cores_per_socket {
        return Err(Error::TooFewCores {
            cpus: spec.cpus,
            machine: preset.name,
            max: sockets * preset.cores_per_socket,
            sockets,
            per_socket: preset.cores_per_socket,
            need: spec.cpus.div_ceil(preset.cores_per_socket),
        });
    }
    let mut mp = MachineParams {
        pol,
        asid_bits: preset.asid_bits[0],
        numa: preset.numa[0],
        kpti: false,
        tlbi_range: preset.tlbi_range,
        tlb_mode: None,
        flush_ceiling: None,
        // PTI by default where the kernel turns it on (a Meltdown-affected
        // CPU, Linux v4.15 on) and the policy models it.
        pti: pol.switches.pti && preset.meltdown && preset.kernel.pti_on_meltdown(),
        invpcid: preset.invpcid,
        spec_rate: 0.02,
        migration: None,
        sched: preset.kernel.sched(),
        swap: SwapKind::default(),
        slice_us: 4000.0,
        slice_set: false,
        contpte: ContpteConfig::default(),
        tlbbatch: true,
        migrate_batch: None,
        vma_locks: None,
        lru_drain: None,
        noise: true,
    };
    let mut params: Params = wl.params.iter().map(|p| (p.key.to_string(), p.default)).collect();
    let mut texts = Texts::new();
    for s in &spec.sets {
        let (k, v) = s
            .split_once('=')
            .filter(|(k, v)| !k.is_empty() && !v.is_empty())
            .ok_or_else(|| Error::MalformedSet { text: s.clone() })?;
        let num = |what: &str| -> Result<f64, Error> {
            v.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| bad_setting(k, v, format!("{what} must be a number")))
        };
        match k {
            "asid_bits" => {
                let b = num("asid_bits")?;
                let fits: Vec<String> = preset.asid_bits.iter().map(|b| b.to_string()).collect();
                if b.fract() != 0.0 || !preset.asid_bits.contains(&(b as u8)) || b > 16.0 {
                    return Err(Error::Unsupported {
                        key: "asid_bits",
                        value: v.to_string(),
                        machine: preset.name,
                        choices: fits,
                    });
                }
                mp.asid_bits = b as u8;
            }
            "spec_rate" => {
                let r = num("spec_rate")?;
                if !(0.0..=1.0).contains(&r) {
                    return Err(out_of_range(k, v, "0 to 1"));
                }
                mp.spec_rate = r;
            }
            "numa" => {
                let n = num("numa")?;
                if n.fract() != 0.0 || !preset.numa.contains(&(n as usize)) {
                    let fits: Vec<String> = preset.numa.iter().map(|n| n.to_string()).collect();
                    return Err(Error::Unsupported {
                        key: "numa",
                        value: v.to_string(),
                        machine: preset.name,
                        choices: fits,
                    });
                }
                mp.numa = n as usize;
            }
            "kpti" | "tlbi_range" => {
                let on = on_off(k, v)?;
                let takes = if k == "kpti" { pol.switches.kpti } else { pol.switches.tlbi_range };
                if on && !takes {
                    return Err(Error::SwitchNotTaken { key: k.to_string(), policy: pol.name });
                }
                if k == "kpti" {
                    mp.kpti = on;
                } else {
                    mp.tlbi_range = on;
                }
            }
            "tlb_mode" => {
                if pol.switches.tlb_mode.is_none() {
                    let takes: Vec<&str> =
                        POLICIES.iter().filter(|p| p.switches.tlb_mode.is_some()).map(|p| p.name).collect();
                    return Err(Error::TlbModeNotTaken { takes, policy: pol.name });
                }
                let word = match v.strip_prefix("0x") {
                    Some(hex) => u32::from_str_radix(hex, 16),
                    None => v.parse(),
                };
                mp.tlb_mode = Some(word.map_err(|_| {
                    bad_setting(k, v, "give the mode word as a number, decimal or 0x hex (e.g. 0x1404)")
                })?);
            }
            "flush_ceiling" => {
                if !pol.switches.flush_ceiling {
                    return Err(Error::SwitchNotTaken { key: k.to_string(), policy: pol.name });
                }
                let n = num("flush_ceiling")?;
                if !(0.0..=4096.0).contains(&n) || n.fract() != 0.0 {
                    return Err(out_of_range(k, v, "a whole number of pages from 0 to 4096"));
                }
                mp.flush_ceiling = Some(n as u64);
            }
            "pti" => {
                let on = on_off(k, v)?;
                if on && !pol.switches.pti {
                    return Err(Error::SwitchNotTaken { key: k.to_string(), policy: pol.name });
                }
                mp.pti = on;
            }
            "migration" => mp.migration = Some(on_off(k, v)?),
            "tlbbatch" => mp.tlbbatch = on_off(k, v)?,
            "noise" => mp.noise = on_off(k, v)?,
            "migrate_batch" => mp.migrate_batch = Some(on_off(k, v)?),
            "vma_locks" => {
                let why = "whose faults take no VMA lock";
                mp.vma_locks = Some(linux_only(&preset, k, v, why).and_then(|()| on_off(k, v))?);
            }
            "lru_drain" => {
                let why = "which has no LRU-add batches";
                mp.lru_drain = Some(linux_only(&preset, k, v, why).and_then(|()| on_off(k, v))?);
            }
            "swap" => {
                mp.swap = SwapKind::ALL.into_iter().find(|k| k.name() == v).ok_or_else(|| {
                    let names: Vec<&str> = SwapKind::ALL.iter().map(|k| k.name()).collect();
                    bad_setting(k, v, format!("give one of {}", names.join(", ")))
                })?;
            }
            "sched" => {
                mp.sched = SchedKind::ALL.into_iter().find(|m| m.name() == v).ok_or_else(|| {
                    let names: Vec<&str> = SchedKind::ALL.iter().map(|m| m.name()).collect();
                    bad_setting(k, v, format!("give one of {}", names.join(", ")))
                })?;
            }
            "contpte" => {
                mp.contpte.mode = ContMode::ALL.into_iter().find(|m| m.name() == v).ok_or_else(|| {
                    let modes: Vec<&str> = ContMode::ALL.iter().map(|m| m.name()).collect();
                    bad_setting(k, v, format!("give one of {}", modes.join(", ")))
                })?;
                mp.contpte.report = true;
            }
            "teardown" => {
                mp.contpte.teardown = Teardown::from_name(v).map_err(|e| bad_setting(k, v, e.to_string()))?;
                mp.contpte.report = true;
            }
            "jitter" => {
                let j = num("jitter")?;
                if !(0.0..=0.5).contains(&j) {
                    return Err(out_of_range(k, v, "0 to 0.5"));
                }
                // Kept with the workload's parameters, which the run's phases are set up
                // from, and printed with them only when given.
                params.insert(JITTER.to_string(), j);
            }
            // Checked before the loop (the CPU count depends on it).
            "sockets" => {}
            "slice_us" => {
                let t = num("slice_us")?;
                if !(1.0..=1e6).contains(&t) {
                    return Err(out_of_range(k, v, "1 to 1000000"));
                }
                mp.slice_us = t;
                mp.slice_set = true;
            }
            _ if workload::text_params(wl.name).iter().any(|p| p.key == k) => {
                texts.insert(k.to_string(), v.to_string());
            }
            _ => {
                let Some(def) = wl.params.iter().find(|p| p.key == k) else {
                    return Err(Error::UnknownSetting { key: k.to_string(), valid: valid_keys(wl) });
                };
                let x = num(k)?;
                if x < def.min || x > def.max || x.fract() != 0.0 {
                    return Err(out_of_range(
                        k,
                        v,
                        format!("a whole number from {} to {} ({})", def.min, def.max, def.doc),
                    ));
                }
                params.insert(k.to_string(), x);
            }
        }
    }
    let given = |key: &str| spec.sets.iter().any(|s| s.split_once('=').is_some_and(|(k, _)| k == key));
    // x86 Linux maps large anonymous folios (mTHP, v6.8) without a contiguous
    // bit: `contpte=folios` alone runs there.
    let x86_folios = mp.contpte.mode == ContMode::Folios
        && !given("teardown")
        && pol.arch == registry::Arch::X86_64
        && pol.os != registry::Os::Freebsd;
    if (mp.contpte.mode != ContMode::Off || given("teardown")) && !pol.switches.contpte && !x86_folios {
        let linux: Vec<&str> = POLICIES.iter().filter(|p| p.switches.contpte).map(|p| p.name).collect();
        return Err(Error::ContpteNotTaken { mode: mp.contpte.mode.name(), takes: linux, policy: pol.name });
    }
    if let Some(missing) = workload::text_params(wl.name).iter().find(|p| !texts.contains_key(p.key)) {
        return Err(Error::NeedsText { workload: wl.name, key: missing.key, doc: missing.doc });
    }
    Ok((preset, wl, mp, params, texts))
}

/// Returns the sockets the machine has: the real machine's unless `--set
/// sockets=N` asks for a larger (hypothetical) machine of the same sockets, up to
/// [`MAX_CPUS`] CPUs. CPUs fill the sockets in order, so sockets past the last
/// CPU are empty and change nothing.
fn sockets(preset: &Preset, spec: &RunSpec) -> Result<usize, Error> {
    let real = preset.real_cores.div_ceil(preset.cores_per_socket);
    let Some(v) = spec.sets.iter().rev().find_map(|s| s.strip_prefix("sockets=")) else { return Ok(real) };
    let most = MAX_CPUS.div_ceil(preset.cores_per_socket);
    match v.parse::<usize>() {
        Ok(n) if (1..=most).contains(&n) => Ok(n),
        _ => Err(Error::SocketsRange {
            value: v.to_string(),
            machine: preset.name,
            most,
            per_socket: preset.cores_per_socket,
            real,
        }),
    }
}

/// Returns the `--set sockets=N` that a run of `cpus` CPUs on `preset` needs, or
/// `None` when the real machine has that many cores (for scale studies such as
/// `tlbkit bench --cpus`).
pub fn sockets_for(preset: &Preset, cpus: usize) -> Option<String> {
    (cpus > preset.real_cores).then(|| format!("sockets={}", cpus.div_ceil(preset.cores_per_socket)))
}

/// The main phase's simulator state that outlives the run, and the rest.
struct Outcome {
    metrics: Metrics,
    result: BTreeMap<String, f64>,
    violations: Vec<Violation>,
    total: u64,
    by_property: BTreeMap<String, u64>,
}

fn metrics(sim: &Sim) -> Metrics {
    let s = sim.stats;
    let h = sim.counters();
    let cont = |x: u64| sim.cfg.contpte.report.then_some(x);
    Metrics {
        sim_time_ns: sim.end as f64 / sim.ghz(),
        tlb_accesses: s.tlb_accesses,
        tlb_misses: s.tlb_misses,
        l1_tlb_misses: s.l1_tlb_misses,
        page_walks: s.page_walks,
        spec_fills: s.spec_fills,
        page_faults: s.page_faults,
        local_invalidations: h.local_invalidations,
        broadcast_invalidations: h.broadcast_invalidations,
        ipis_sent: h.ipis_sent,
        ipis_coalesced: h.ipis_coalesced,
        ipi_handler_ns: h.ipi_handler_cycles as f64 / sim.ghz(),
        ipi_invalidating_ns: h.ipi_invalidating_cycles as f64 / sim.ghz(),
        ipi_sync_ns: h.ipi_sync_cycles as f64 / sim.ghz(),
        shootdowns: h.shootdowns,
        shootdown_ns: h.shootdown_cycles as f64 / sim.ghz(),
        line_transfers: h.line_transfers,
        context_switches: s.context_switches,
        asid_rollovers: h.asid_rollovers,
        full_flushes: h.full_flushes,
        syscalls: s.syscalls,
        events: s.events,
        contpte_fills: cont(s.contpte_fills),
        folios: cont(s.folios),
        pte_range_flushes: cont(s.pte_range_flushes),
        exit_range_flushes: cont(s.exit_range_flushes),
        exits: cont(s.exits),
        exit_teardown_ns: sim.cfg.contpte.report.then_some(s.exit_teardown_cycles as f64 / sim.ghz()),
        hw_races: cont(s.hw_races),
        file_writebacks: cont(s.file_writebacks),
    }
}

/// Runs a workload's phases under the policy `mk` builds. The simulator holds
/// the policy behind its hooks (`sim/hooks.rs`), so only the policy's own code
/// is compiled per policy type, not the simulator.
pub fn run_phases<P: Policy + 'static>(
    cfg: &SimConfig,
    wl: &workload::WorkloadDef,
    params: &Params,
    mk: &dyn Fn() -> P,
) -> Result<(Sim, Option<Sim>), Error> {
    phases(cfg, wl, params, &Texts::new(), mk)
}

/// [`run_phases`] with the workload's text parameters.
fn phases<P: Policy + 'static>(
    cfg: &SimConfig,
    wl: &workload::WorkloadDef,
    params: &Params,
    texts: &Texts,
    mk: &dyn Fn() -> P,
) -> Result<(Sim, Option<Sim>), Error> {
    let phase = |ph: Phase| -> Result<Sim, Error> {
        let mut sim = Sim::new(cfg.clone(), mk());
        apply_jitter(&mut sim, params);
        workload::setup_with(wl.name, params, texts, &mut sim, ph)?;
        sim.run();
        if let Some(e) = &sim.error {
            return Err(Error::Failed { workload: wl.name, phase: Some(ph), message: e.clone() });
        }
        Ok(sim)
    };
    let main = phase(Phase::Main)?;
    let ovr = if wl.has_overhead { Some(phase(Phase::Overhead)?) } else { None };
    Ok((main, ovr))
}

fn outcome<P: Policy + 'static>(
    cfg: &SimConfig,
    wl: &workload::WorkloadDef,
    params: &Params,
    texts: &Texts,
    mk: &dyn Fn() -> P,
) -> Result<Outcome, Error> {
    let (main, ovr) = phases(cfg, wl, params, texts, mk)?;
    let result = workload::result(wl.name, params, &main, ovr.as_ref())?;
    let mut violations = main.oracle.violations.clone();
    let mut total = main.oracle.count;
    let mut by_property: BTreeMap<String, u64> = BTreeMap::new();
    for (p, n) in main.oracle.by_property.iter().chain(ovr.iter().flat_map(|o| o.oracle.by_property.iter())) {
        *by_property.entry(p.to_string()).or_default() += n;
    }
    if let Some(o) = &ovr {
        violations.extend(o.oracle.violations.iter().cloned());
        total += o.oracle.count;
    }
    Ok(Outcome { metrics: metrics(&main), result, violations, total, by_property })
}

/// Returns the address-space slots a run needs: the workload's, plus one per CPU
/// for exited address spaces a lazy-TLB CPU still has loaded.
fn mm_slots(wl: &workload::WorkloadDef, params: &Params, texts: &Texts, cpus: usize) -> usize {
    workload::max_mms_with(wl.name, params, texts, cpus) + cpus
}

/// Returns the simulator configuration for a resolved request.
fn config(spec: &RunSpec, mut preset: Preset, mp: &MachineParams, max_mms: usize) -> SimConfig {
    // Each NUMA node is a "socket" of the model: crossing it pays the cross-socket costs.
    preset.cores_per_socket = (preset.cores_per_socket / mp.numa).max(1);
    // Each node has its share of the socket's memory channels.
    preset.mem_bw_gbs /= mp.numa as f64;
    // PTI's CR3 writes at every kernel entry (SWITCH_TO_KERNEL_CR3) and return
    // to user (SWITCH_TO_USER_CR3), with PCIDs NOFLUSH: one `root_write` each
    // way. Charged at every exception entry and exit, an interrupt of kernel
    // code (which switches no CR3) included.
    if mp.pti {
        preset.costs.exception_entry += preset.costs.root_write;
        preset.costs.exception_exit += preset.costs.root_write;
    }
    SimConfig {
        preset,
        ncpus: spec.cpus,
        seed: spec.seed,
        strict: spec.strict,
        spec_rate: mp.spec_rate,
        migration: mp.migration(),
        sched: mp.sched,
        swap: mp.swap,
        slice_us: mp.slice_us,
        base_slice_us: mp.slice_set.then_some(mp.slice_us),
        asid_bits: mp.asid_bits,
        max_mms,
        max_events: 200_000_000,
        contpte: mp.contpte,
        tlbbatch: mp.tlbbatch,
        migrate_batch: mp.migrate_batch,
        vma_locks: mp.vma_locks,
        lru_drain: mp.lru_drain,
        noise: mp.noise,
    }
}

/// The registry's builder input for a run: the machine's shape and the
/// switches the policy takes.
fn build(spec: &RunSpec, mp: &MachineParams, max_mms: usize) -> Build {
    Build {
        cpus: spec.cpus,
        mm_slots: max_mms,
        asid_bits: mp.asid_bits,
        kpti: mp.kpti,
        // A machine's own FEAT_TLBIRANGE reaches only the policies that use it.
        tlbi_range: mp.tlbi_range && mp.pol.switches.tlbi_range,
        tlb_mode: mp.tlb_mode,
        flush_ceiling: mp.flush_ceiling,
        pti: mp.pti,
        invpcid: mp.invpcid,
        bug: None,
        checker: false,
    }
}

/// One run of a workload's phases, for [`registry::with_policy`].
struct Runs<'a> {
    cfg: &'a SimConfig,
    wl: &'a workload::WorkloadDef,
    params: &'a Params,
    texts: &'a Texts,
}

impl WithPolicy for Runs<'_> {
    type Out = Result<Outcome, Error>;
    fn with<P: Policy + 'static>(self, mk: &dyn Fn() -> P) -> Self::Out {
        outcome(self.cfg, self.wl, self.params, self.texts, mk)
    }
}

/// One timed main phase, for [`registry::with_policy`].
struct Bench<'a>(Runs<'a>);

impl WithPolicy for Bench<'_> {
    type Out = Result<BenchResult, Error>;
    fn with<P: Policy + 'static>(self, mk: &dyn Fn() -> P) -> Self::Out {
        bench_typed(self.0.cfg, self.0.wl, self.0.params, self.0.texts, mk())
    }
}

/// Checks a request as [`run`] would, without running it.
pub fn check(spec: &RunSpec) -> Result<(), Error> {
    resolve(spec).map(|_| ())
}

/// Returns the names of the figures a run of `spec` reports, after checking
/// `spec`: its workload's results (the headline first), then the metrics.
pub fn metric_names(spec: &RunSpec) -> Result<Vec<String>, Error> {
    let (_, wl, mp, _, _) = resolve(spec)?;
    let mut names: Vec<String> = wl.results.iter().map(|r| r.to_string()).collect();
    let zero = Metrics::zero(mp.contpte.report);
    // A struct of numbers always serialises, to an object.
    if let Ok(serde_json::Value::Object(m)) = serde_json::to_value(&zero) {
        names.extend(m.into_iter().map(|(k, _)| k));
    }
    Ok(names)
}

/// Runs one request; `Err` says what was wrong with it, or why the run failed.
pub fn run(spec: &RunSpec) -> Result<RunOutput, Error> {
    run_on(spec, preset::resolve(&spec.machine)?)
}

/// Runs one request on the machine `preset` (a preset changed by its caller:
/// `tlbkit calibrate` fits a host's costs this way); `spec.machine` only names
/// it in the output.
pub fn run_on(spec: &RunSpec, preset: Preset) -> Result<RunOutput, Error> {
    let (preset, wl, mp, params, texts) = resolve_on(spec, preset)?;
    let max_mms = mm_slots(wl, &params, &texts, spec.cpus);
    let cfg = config(spec, preset, &mp, max_mms);
    let runs = Runs { cfg: &cfg, wl, params: &params, texts: &texts };
    let out = registry::with_policy(&spec.policy, &build(spec, &mp, max_mms), runs)??;
    let mut pv: BTreeMap<String, serde_json::Value> =
        params.iter().map(|(k, v)| (k.clone(), if k == JITTER { json!(*v) } else { json!(*v as i64) })).collect();
    pv.extend(texts.iter().map(|(k, v)| (k.clone(), json!(v))));
    pv.insert("asid_bits".into(), serde_json::json!(mp.asid_bits));
    pv.insert("numa".into(), serde_json::json!(mp.numa));
    let switches = mp.pol.switches;
    if switches.kpti {
        pv.insert("kpti".into(), serde_json::json!(if mp.kpti { "on" } else { "off" }));
    }
    // Shown when on only, so that runs without range operations read as before.
    if switches.tlbi_range && mp.tlbi_range {
        pv.insert("tlbi_range".into(), serde_json::json!("on"));
    }
    // Shown when given or on only, so that runs at the kernel's defaults read as before.
    if let Some(n) = mp.flush_ceiling {
        pv.insert("flush_ceiling".into(), serde_json::json!(n));
    }
    let word = |on: bool| serde_json::json!(if on { "on" } else { "off" });
    if switches.pti {
        pv.insert("pti".into(), word(mp.pti));
    }
    pv.insert("kernel".into(), serde_json::json!(cfg.preset.kernel.name()));
    if let Some(default) = switches.tlb_mode {
        let mode = mp.tlb_mode.unwrap_or_else(|| default(spec.cpus));
        pv.insert("tlb_mode".into(), serde_json::json!(format!("{mode:#x}")));
    }
    pv.insert("spec_rate".into(), serde_json::json!(mp.spec_rate));
    pv.insert("migration".into(), word(mp.migration()));
    pv.insert("sched".into(), serde_json::json!(mp.sched.name()));
    pv.insert("swap".into(), serde_json::json!(mp.swap.name()));
    pv.insert("slice_us".into(), serde_json::json!(mp.slice_us));
    // Shown when given only, so that runs without them read as before.
    let given = |key: &str| spec.sets.iter().any(|s| s.split_once('=').is_some_and(|(k, _)| k == key));
    if given("tlbbatch") {
        pv.insert("tlbbatch".into(), word(mp.tlbbatch));
    }
    for (key, on) in [("migrate_batch", mp.migrate_batch), ("vma_locks", mp.vma_locks), ("lru_drain", mp.lru_drain)] {
        if let Some(on) = on {
            pv.insert(key.into(), word(on));
        }
    }
    if mp.contpte.report {
        pv.insert("contpte".into(), serde_json::json!(mp.contpte.mode.name()));
        pv.insert("teardown".into(), serde_json::json!(mp.contpte.teardown.name()));
    }
    Ok(RunOutput {
        machine: spec.machine.clone(),
        cpus: spec.cpus,
        policy: spec.policy.clone(),
        workload: spec.workload.clone(),
        seed: spec.seed,
        params: pv,
        metrics: out.metrics,
        result: out.result,
        violations: out.violations,
        violations_total: out.total,
        violations_by_property: out.by_property,
        replay: spec.command(),
    })
}

/// Returns the machine and kernel parameter keys with their meaning.
pub fn machine_keys() -> &'static [(&'static str, &'static str)] {
    MACHINE_KEYS
}

/// What `tlbkit bench` measures: one phase of a run, timed around `Sim::run`.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct BenchResult {
    /// Simulated translations per wall-clock second.
    pub translations_per_sec: f64,
    /// Simulator events per wall-clock second.
    pub events_per_sec: f64,
    /// Wall-clock seconds of the timed phase.
    pub wall_s: f64,
    /// Simulator events of the timed phase.
    pub events: u64,
    /// Simulated translations of the timed phase.
    pub translations: u64,
}

fn bench_typed<P: Policy + 'static>(
    cfg: &SimConfig,
    wl: &workload::WorkloadDef,
    params: &Params,
    texts: &Texts,
    p: P,
) -> Result<BenchResult, Error> {
    let mut sim = Sim::new(cfg.clone(), p);
    apply_jitter(&mut sim, params);
    workload::setup_with(wl.name, params, texts, &mut sim, Phase::Main)?;
    let t = std::time::Instant::now();
    sim.run();
    let wall = t.elapsed().as_secs_f64().max(1e-9);
    if let Some(e) = &sim.error {
        return Err(Error::Failed { workload: wl.name, phase: None, message: e.clone() });
    }
    Ok(BenchResult {
        translations_per_sec: sim.stats.tlb_accesses as f64 / wall,
        events_per_sec: sim.stats.events as f64 / wall,
        wall_s: wall,
        events: sim.stats.events,
        translations: sim.stats.tlb_accesses,
    })
}

/// Times the main phase of `spec` (setup excluded) `reps` times and returns the
/// repetition with the median translation rate: the host is shared and noisy.
pub fn bench(spec: &RunSpec, reps: usize) -> Result<BenchResult, Error> {
    let (preset, wl, mp, params, texts) = resolve(spec)?;
    let max_mms = mm_slots(wl, &params, &texts, spec.cpus);
    let cfg = config(spec, preset, &mp, max_mms);
    let mut runs = Vec::with_capacity(reps.max(1));
    for _ in 0..reps.max(1) {
        let one = Bench(Runs { cfg: &cfg, wl, params: &params, texts: &texts });
        runs.push(registry::with_policy(&spec.policy, &build(spec, &mp, max_mms), one)??);
    }
    runs.sort_by(|a, b| a.translations_per_sec.total_cmp(&b.translations_per_sec));
    Ok(runs[runs.len() / 2])
}

/// The machine `tlbkit bench --cpus` runs on: the largest preset, whose kernel
/// default (`NR_CPUS`) is [`MAX_CPUS`].
pub const SCALE_MACHINE: &str = "altra";

/// The policy `tlbkit bench --cpus` runs unless told otherwise: the stock Linux
/// arm64 policy, which broadcasts every user and kernel flush.
pub const SCALE_POLICY: &str = "arm64-linux";

/// The workloads `tlbkit bench --cpus` times, with the parameters it sets: a fixed
/// amount of work per CPU (one copy or thread per CPU), so that an ideal simulator
/// would keep its events per second at every CPU count.
pub const SCALE_WORKLOADS: &[(&str, &[&str])] = &[("mprotect_threaded", &["iters=200"]), ("fileserver", &["ops=500"])];

/// One row of `tlbkit bench --cpus`: one workload at one CPU count.
#[derive(Clone, Debug, Serialize)]
pub struct ScaleRow {
    /// Workload.
    pub workload: String,
    /// CPUs.
    pub cpus: usize,
    /// Simulator events of the timed phase.
    pub events: u64,
    /// Simulated translations of the timed phase.
    pub translations: u64,
    /// Wall-clock seconds of the timed phase (setup excluded).
    pub wall_s: f64,
    /// Events per wall-clock second.
    pub events_per_sec: f64,
    /// Translations per wall-clock second.
    pub translations_per_sec: f64,
    /// `events_per_sec` relative to the first CPU count's, for the same workload.
    pub speed_ratio: f64,
    /// Peak resident memory of the process during the run (setup included), in
    /// MiB, where the host reports it (Linux: `VmHWM`, reset before each run);
    /// `None` elsewhere. It includes what the allocator kept from earlier runs,
    /// so it is exact only when CPU counts are given in increasing order.
    pub peak_rss_mib: Option<f64>,
    /// The command that runs the same simulation.
    pub command: String,
}

/// Resets the process's peak resident set size, returning whether the host
/// allows it (Linux 4.0 and later: `5` to `/proc/self/clear_refs`).
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Returns the process's peak resident set size in KiB (`VmHWM` of
/// `/proc/self/status`), where the host reports it.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Returns the specs `tlbkit bench --cpus` runs, CPU count by CPU count (in the
/// order given) and workload by workload, after checking every one of them (so
/// that bad input fails before anything runs). `workloads` empty means
/// [`SCALE_WORKLOADS`]; `sets` replace a workload's own bench parameters of the
/// same key.
pub fn scale_specs(cpus: &[usize], workloads: &[String], policy: &str, sets: &[String]) -> Result<Vec<RunSpec>, Error> {
    if cpus.is_empty() {
        return Err(Error::NoCpuCounts { max: MAX_CPUS });
    }
    let chosen: Vec<String> = if workloads.is_empty() {
        SCALE_WORKLOADS.iter().map(|(w, _)| w.to_string()).collect()
    } else {
        workloads.to_vec()
    };
    let key = |s: &str| s.split_once('=').map_or(s.to_string(), |(k, _)| k.to_string());
    let mut specs = Vec::new();
    for &n in cpus {
        for w in &chosen {
            let own = SCALE_WORKLOADS.iter().find(|(name, _)| name == w).map_or(&[][..], |(_, s)| *s);
            let own = own.iter().filter(|o| !sets.iter().any(|s| key(s) == key(o))).map(|s| s.to_string());
            // A scale study asks for a larger machine of the preset's sockets.
            let preset = preset::by_name(SCALE_MACHINE).expect("the scale machine is a preset");
            let grow = sockets_for(&preset, n).filter(|_| !sets.iter().any(|s| key(s) == "sockets"));
            let spec = RunSpec {
                machine: SCALE_MACHINE.into(),
                cpus: n,
                policy: policy.into(),
                workload: w.clone(),
                sets: own.chain(grow).chain(sets.iter().cloned()).collect(),
                seed: 1,
                strict: false,
            };
            resolve(&spec)?;
            specs.push(spec);
        }
    }
    Ok(specs)
}

/// The most runs [`bench_scale`] makes of a spec whose run is short.
pub const MAX_SHORT_RUNS: usize = 101;

/// Times the main phase of each spec (see [`scale_specs`]) and returns one row
/// per spec, each with its speed relative to the first spec of its workload. A
/// row is one run when a run takes a second or more; a shorter run is repeated
/// until the runs add up to a second (at least three, at most
/// [`MAX_SHORT_RUNS`]) and the row is the run with the median event rate: a run
/// of a few milliseconds is at the mercy of a shared host's load, and a median
/// of many is not. `progress` is called before each spec.
pub fn bench_scale(specs: &[RunSpec], mut progress: impl FnMut(&RunSpec)) -> Result<Vec<ScaleRow>, Error> {
    let mut rows: Vec<ScaleRow> = Vec::with_capacity(specs.len());
    for spec in specs {
        progress(spec);
        let can_reset = reset_peak_rss();
        let mut runs = vec![bench(spec, 1)?];
        let mut total = runs[0].wall_s;
        while runs[0].wall_s < 1.0 && runs.len() < MAX_SHORT_RUNS && (runs.len() < 3 || total < 1.0) {
            let b = bench(spec, 1)?;
            total += b.wall_s;
            runs.push(b);
        }
        runs.sort_by(|a, b| a.events_per_sec.total_cmp(&b.events_per_sec));
        let b = runs[runs.len() / 2];
        let peak = if can_reset { peak_rss_kib().map(|k| k as f64 / 1024.0) } else { None };
        let first = rows.iter().find(|r| r.workload == spec.workload).map_or(b.events_per_sec, |r| r.events_per_sec);
        rows.push(ScaleRow {
            workload: spec.workload.clone(),
            cpus: spec.cpus,
            events: b.events,
            translations: b.translations,
            wall_s: b.wall_s,
            events_per_sec: b.events_per_sec,
            translations_per_sec: b.translations_per_sec,
            speed_ratio: b.events_per_sec / first,
            peak_rss_mib: peak,
            command: spec.command(),
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preset::Arch;

    #[test]
    fn every_registered_policy_runs_in_the_simulator() {
        for p in POLICIES {
            let machine = match p.arch {
                Arch::Arm64 => "cortex-a72",
                Arch::X86_64 if p.needs_broadcast_tlbi => "milan",
                Arch::X86_64 => "skylake",
            };
            let spec = RunSpec {
                machine: machine.into(),
                cpus: 2,
                policy: p.name.into(),
                workload: "lat_ctx".into(),
                sets: vec!["procs=4".into(), "rounds=3".into()],
                seed: 1,
                strict: true,
            };
            let out = run(&spec).unwrap_or_else(|e| panic!("{}: {e}", p.name));
            assert_eq!(out.violations_total, 0, "{}", p.name);
            assert!(out.metrics.context_switches > 0, "{}", p.name);
        }
    }
}
