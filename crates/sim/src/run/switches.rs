//! The machine and kernel switches a run takes (`--set KEY=VALUE` besides the
//! workload's own parameters), one entry each in the `valued!` list below:
//! its key, type, words and default, how its value is checked, and what the
//! run's printed settings say of it. From the list come the field of
//! [`Values`] that holds it, and the words `tlbkit list machines`, the JSON
//! catalogue, the sweep schema, the Python keywords and the error for an
//! unknown key all read. The kernel's on|off behaviours are declared in
//! `crate::toggle` and join these as switches ([`all`]). Adding a switch is
//! an entry here (or a toggle there) and its use where the machine or kernel
//! reads it (for a value the simulator or the policy's builder takes, the
//! line of `run.rs` that hands it over); nothing else tests its name.

use super::resolve::{bad_setting, linux_only, on_off, out_of_range, MachineParams};
use super::*;
use crate::toggle::{Toggle, TOGGLES};

/// One `--set` switch.
#[derive(Clone, Copy)]
pub struct Switch {
    /// The key (`--set KEY=...`).
    pub key: &'static str,
    /// What it does, the values it takes and its default.
    pub doc: &'static str,
    /// The policies that take it, in words, where not every policy does
    /// (empty: every one): the error of a policy that does not says so.
    pub applies_to: fn() -> String,
    /// Checks the value and sets it on the run.
    pub(super) set: fn(&mut Setting<'_>) -> Result<(), Error>,
}

impl Switch {
    /// Returns whether its values are on and off.
    pub fn is_on_off(&self) -> bool {
        self.doc.starts_with("on|off")
    }
}

/// The policies whose entry's switches satisfy `takes`, by name.
fn takers(takes: fn(&tlbkit_registry::Switches) -> bool) -> Vec<&'static str> {
    POLICIES.iter().filter(|p| takes(&p.switches)).map(|p| p.name).collect()
}

/// One `--set KEY=VALUE` being applied: the value, the run it applies to, and
/// what it sets.
pub(super) struct Setting<'a> {
    pub(super) key: &'a str,
    pub(super) value: &'a str,
    pub(super) preset: &'a Preset,
    pub(super) pol: &'static PolicyDef,
    pub(super) mp: &'a mut MachineParams,
    pub(super) params: &'a mut Params,
}

impl Setting<'_> {
    /// The value as a finite number.
    fn num(&self) -> Result<f64, Error> {
        self.value
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite())
            .ok_or_else(|| bad_setting(self.key, self.value, format!("{} must be a number", self.key)))
    }

    /// The value as a number in `range` (`words` says the range).
    fn num_in(&self, range: std::ops::RangeInclusive<f64>, words: &str) -> Result<f64, Error> {
        let x = self.num()?;
        if range.contains(&x) {
            Ok(x)
        } else {
            Err(out_of_range(self.key, self.value, words))
        }
    }

    /// The value as on or off.
    fn on_off(&self) -> Result<bool, Error> {
        on_off(self.key, self.value)
    }

    /// The value as on or off, refused on for a policy that does not `take` it.
    fn switch_on(&self, takes: bool) -> Result<bool, Error> {
        let on = self.on_off()?;
        if on && !takes {
            return Err(self.not_taken());
        }
        Ok(on)
    }

    /// The value as one of `all`, by `name`.
    fn choice<T: Copy>(&self, all: &[T], name: fn(T) -> &'static str) -> Result<T, Error> {
        all.iter().copied().find(|t| name(*t) == self.value).ok_or_else(|| {
            let names: Vec<&str> = all.iter().map(|t| name(*t)).collect();
            bad_setting(self.key, self.value, format!("give one of {}", names.join(", ")))
        })
    }

    /// The error of a switch the run's policy does not take.
    fn not_taken(&self) -> Error {
        let sw = switch(self.key);
        Error::SwitchNotTaken {
            key: self.key.to_string(),
            policy: self.pol.name,
            takers: sw.map(|s| (s.applies_to)()).unwrap_or_default(),
            on_off: sw.is_some_and(Switch::is_on_off),
        }
    }

    /// The error of a value the machine does not offer (`choices`).
    fn unsupported(&self, key: &'static str, choices: Vec<String>) -> Error {
        Error::Unsupported { key, value: self.value.to_string(), machine: self.preset.name.clone(), choices }
    }
}

/// The key of the switch that sizes the machine (`--set sockets=N`), read
/// before the others since the CPU count depends on it (`sockets`).
pub const SOCKETS: &str = "sockets";

/// Returns the sockets the machine has: the real machine's unless `--set
/// sockets=N` asks for a larger (hypothetical) machine of the same sockets, up to
/// [`MAX_CPUS`] CPUs. CPUs fill the sockets in order, so sockets past the last
/// CPU are empty and change nothing.
pub(super) fn sockets(preset: &Preset, spec: &RunSpec) -> Result<usize, Error> {
    let real = preset.real_cores.div_ceil(preset.cores_per_socket);
    let Some(v) = spec.sets.iter().rev().find_map(|s| s.strip_prefix(SOCKETS).and_then(|r| r.strip_prefix('='))) else {
        return Ok(real);
    };
    let most = MAX_CPUS.div_ceil(preset.cores_per_socket);
    match v.parse::<usize>() {
        Ok(n) if (1..=most).contains(&n) => Ok(n),
        _ => Err(Error::SocketsRange {
            value: v.to_string(),
            machine: preset.name.clone(),
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
    (cpus > preset.real_cores).then(|| format!("{SOCKETS}={}", cpus.div_ceil(preset.cores_per_socket)))
}

/// Returns the switch called `key`.
pub fn switch(key: &str) -> Option<&'static Switch> {
    all().find(|s| s.key == key)
}

/// Returns every switch, in the order `tlbkit list machines` gives them: the
/// machine's and the run's, then the kernel's toggles.
pub fn all() -> impl Iterator<Item = &'static Switch> {
    SWITCHES.iter().chain(TOGGLE_SWITCHES.iter())
}

/// The kernel's toggles as switches: their keys and words, each set by
/// [`set_toggle`].
static TOGGLE_SWITCHES: [Switch; TOGGLES.len()] = {
    let blank = Switch { key: "", doc: "", applies_to: String::new, set: set_toggle };
    let mut out = [blank; TOGGLES.len()];
    let mut i = 0;
    while i < TOGGLES.len() {
        out[i].key = TOGGLES[i].key;
        out[i].doc = TOGGLES[i].doc;
        i += 1;
    }
    out
};

/// Sets the toggle whose key the setting gives, refusing a Linux behaviour
/// on a FreeBSD machine.
fn set_toggle(s: &mut Setting<'_>) -> Result<(), Error> {
    let Some(t) = Toggle::by_key(s.key) else {
        return Err(Error::UnknownSetting { key: s.key.to_string(), valid: all().map(|s| s.key).collect() });
    };
    if let Some(why) = t.def().linux_only {
        linux_only(s.preset, s.key, s.value, why)?;
    }
    s.mp.toggles.set(t, s.on_off()?);
    Ok(())
}

/// What a switch's default and its printed value may depend on: the run's
/// machine (its `kernel` the run's), policy and size.
pub(super) struct Context<'a> {
    pub(super) preset: &'a Preset,
    pub(super) pol: &'static PolicyDef,
    pub(super) cpus: usize,
    /// The sockets the machine has (`--set sockets`, read before the rest).
    pub(super) sockets: usize,
}

/// What the run's printed settings say of its switches: the machine's and
/// the run's as their entries say, then the kernel's toggles the run gave
/// (only those, so that runs without them read as before).
pub(super) fn shown(mp: &MachineParams, cx: &Context<'_>) -> Vec<(&'static str, serde_json::Value)> {
    let mut out = mp.values.shown(cx);
    out.extend(Toggle::all().filter_map(|t| mp.toggles.given(t).map(|on| (t.def().key, word(on)))));
    out
}

/// The words of an on|off value in the run's printed settings.
fn word(on: bool) -> serde_json::Value {
    json!(if on { "on" } else { "off" })
}

/// Declares the machine's and the run's switches, once each: the field of
/// [`Values`] that holds it (named as its key, of its type) and its entry in
/// [`SWITCHES`], in the order `tlbkit list machines` gives them, before the
/// kernel's toggles ([`all`]). Each entry says:
/// - `doc`: its words, the values it takes and its default;
/// - `applies_to` (optional): the policies that take it, in words;
/// - `default`: its value where `--set` does not give it;
/// - `set`: the value checked (and anything else it sets on the run);
/// - `show`: what the run's printed settings say of it, if anything.
///
/// Its use is where the machine or kernel reads `Values`' field.
macro_rules! valued {
    (@applies) => { String::new };
    (@applies $applies:expr) => { $applies };
    ($($key:ident: $ty:ty {
        doc: $doc:expr,
        $(applies_to: $applies:expr,)?
        default: $default:expr,
        set: $set:expr,
        show: $show:expr $(,)?
    })*) => {
        /// The value of each of the machine's and the run's switches
        /// ([`SWITCHES`]), as given or by default.
        pub(super) struct Values {
            $(pub(super) $key: $ty,)*
        }

        impl Values {
            /// Every switch at its default on `cx`.
            pub(super) fn defaults(cx: &Context<'_>) -> Values {
                Values {
                    $($key: {
                        let default: fn(&Context<'_>) -> $ty = $default;
                        default(cx)
                    },)*
                }
            }

            /// What the run's printed settings say of these values.
            pub(super) fn shown(&self, cx: &Context<'_>) -> Vec<(&'static str, serde_json::Value)> {
                let mut out = Vec::new();
                $({
                    let show: fn(&Values, &Context<'_>) -> Option<serde_json::Value> = $show;
                    out.extend(show(self, cx).map(|v| (stringify!($key), v)));
                })*
                out
            }
        }

        static SWITCHES: &[Switch] = &[$(Switch {
            key: stringify!($key),
            doc: $doc,
            applies_to: valued!(@applies $($applies)?),
            set: |s| {
                let set: fn(&mut Setting<'_>) -> Result<$ty, Error> = $set;
                s.mp.values.$key = set(s)?;
                Ok(())
            },
        }),*];
    };
}

valued! {
    asid_bits: u8 {
        doc: "ASID width in bits (the preset's supported widths)",
        default: |cx| cx.preset.asid_bits[0],
        set: |s| {
            let b = s.num()?;
            if b.fract() != 0.0 || b > 16.0 || !s.preset.asid_bits.contains(&(b as u8)) {
                let choices = s.preset.asid_bits.iter().map(|b| b.to_string()).collect();
                return Err(s.unsupported("asid_bits", choices));
            }
            Ok(b as u8)
        },
        show: |v, _| Some(json!(v.asid_bits)),
    }
    spec_rate: f64 {
        doc: "probability of a speculative TLB fill per user operation, 0..1 (default 0.02)",
        default: |_| 0.02,
        set: |s| s.num_in(0.0..=1.0, "0 to 1"),
        show: |v, _| Some(json!(v.spec_rate)),
    }
    migration: Option<bool> {
        doc: "on|off: let the scheduler move threads between CPUs: wake-affine placement and load balancing for cfs and \
         eevdf, balanced wake-ups and idle stealing for fifo (default: on for cfs and eevdf, as Linux balances, off \
         for fifo)",
        default: |_| None,
        set: |s| s.on_off().map(Some),
        show: |v, _| Some(word(v.migration())),
    }
    swap: SwapKind {
        doc: "zram|nvme: the device MADV_PAGEOUT writes to and a swap-in fault reads from (default zram: lzo-rle, \
         compressed on the CPU)",
        default: |_| SwapKind::default(),
        set: |s| s.choice(&SwapKind::ALL, SwapKind::name),
        show: |v, _| Some(json!(v.swap.name())),
    }
    sched: SchedKind {
        doc: "fifo|cfs|eevdf: the scheduler (default: the preset's kernel's: eevdf for Linux v6.6 and later, cfs for \
         earlier Linux, fifo for the FreeBSD presets)",
        default: |cx| cx.preset.kernel.sched(),
        set: |s| s.choice(&SchedKind::ALL, SchedKind::name),
        show: |v, _| Some(json!(v.sched.name())),
    }
    slice_us: Option<f64> {
        doc: "time slice in microseconds: fifo's slice (default 4000); for cfs and eevdf, when given, the base slice \
         (eevdf) or minimum granularity (cfs, latency 8 times it) instead of the kernel's scaled default",
        default: |_| None,
        set: |s| s.num_in(1.0..=1e6, "1 to 1000000").map(Some),
        show: |v, _| Some(json!(v.fifo_slice_us())),
    }
    jitter: Option<f64> {
        doc: "0..0.5: spread every compute time and system-call path by a random factor in [1-jitter, 1+jitter] drawn \
         from the seed, so that seeds differ as runs of a real machine do (default 0: none, nothing drawn)",
        default: |_| None,
        set: |s| {
            // Kept with the workload's parameters, which the run's phases are
            // set up from, and printed with them only when given.
            let j = s.num_in(0.0..=0.5, "0 to 0.5")?;
            s.params.insert(JITTER.to_string(), j);
            Ok(Some(j))
        },
        show: |_, _| None,
    }
    noise: bool {
        doc: "on|off: the seed draws what varies between runs of a real machine: the tick's phase, each IPI's delivery \
         latency and each wake-up's, around their means (default on; off: every seed the same timing, as before \
         this setting existed)",
        default: |_| true,
        set: |s| s.on_off(),
        show: |_, _| None,
    }
    smt: Option<bool> {
        doc: "on|off, or the threads per core: on a machine whose cores run two threads, whether a core's threads \
         share its speed while both run (on, the default: each runs its software at the machine's smt_share of the \
         core) or every CPU is a core of its own (off, or 1); 2 is on for a machine of two threads per core",
        default: |_| None,
        set: |s| {
            let threads = s.preset.threads.per_core;
            let on = match s.value {
                "1" => false,
                v if v.parse::<usize>().is_ok_and(|n| n > 1 && n == threads) => true,
                v if v.parse::<usize>().is_ok() => {
                    return Err(out_of_range(
                        s.key,
                        s.value,
                        format!("on, off, 1, or {threads}: {} has {threads} threads per core", s.preset.name),
                    ))
                }
                _ => s.on_off()?,
            };
            if on && threads < 2 {
                return Err(bad_setting(
                    s.key,
                    s.value,
                    format!("{} has one thread per core: nothing to share (smt=off is what it runs)", s.preset.name),
                ));
            }
            Ok(Some(on))
        },
        show: |v, _| v.smt.map(word),
    }
    numa: usize {
        doc: "NUMA nodes the machine is booted with (the preset's choices, e.g. altra: 1 or 2)",
        default: |cx| cx.preset.numa[0],
        set: |s| {
            let n = s.num()?;
            if n.fract() != 0.0 || !s.preset.numa.contains(&(n as usize)) {
                let choices = s.preset.numa.iter().map(|n| n.to_string()).collect();
                return Err(s.unsupported("numa", choices));
            }
            Ok(n as usize)
        },
        show: |v, _| Some(json!(v.numa)),
    }
    sockets: usize {
        doc: "sockets of the preset's kind (default: the real machine's); more model a larger machine, so that --cpus \
         may exceed the preset's cores (up to 4096 CPUs)",
        // Read and checked before the others, since the CPU count depends on
        // it ([`sockets`]): its default is what that read.
        default: |cx| cx.sockets,
        set: |s| Ok(s.mp.values.sockets),
        show: |_, _| None,
    }
    kpti: bool {
        doc: "on|off: arm64-linux with kernel page-table isolation, halving the usable ASIDs (default off)",
        applies_to: || "the arm64-linux policies".into(),
        default: |_| false,
        set: |s| s.switch_on(s.pol.switches.kpti),
        show: |v, cx| cx.pol.switches.kpti.then(|| word(v.kpti)),
    }
    flush_ceiling: Option<u64> {
        doc: "0..4096: x86 Linux kernels only; tlb_single_page_flush_ceiling, the pages above which a range flush becomes \
         a full flush (default 33, the kernel's; 0: every range a full flush)",
        applies_to: || "the x86 Linux policies".into(),
        default: |_| None,
        set: |s| {
            if !s.pol.switches.flush_ceiling {
                return Err(s.not_taken());
            }
            let n = s.num()?;
            if !(0.0..=4096.0).contains(&n) || n.fract() != 0.0 {
                return Err(out_of_range(s.key, s.value, "a whole number of pages from 0 to 4096"));
            }
            Ok(Some(n as u64))
        },
        // Shown when given only, so that runs at the kernel's default read as
        // before it existed.
        show: |v, _| v.flush_ceiling.map(|n| json!(n)),
    }
    pti: bool {
        doc: "on|off: x86 Linux with PCIDs only (x86-linux-pcid, -512, -513, -613, -lazytrim); page-table isolation \
         (v4.15+): a CR3 write at every kernel entry and exit, and a user PCID flushed per page by INVPCID, or \
         whole at the next return to user on machines without INVPCID (default: on where the kernel turns it on, \
         a Meltdown-affected CPU under Linux v4.15 or later; the run's kernel and pti say which)",
        applies_to: || format!("{} (x86 Linux with PCIDs, without INVLPGB)", takers(|s| s.pti).join(", ")),
        // On where the kernel turns it on (a Meltdown-affected CPU, Linux
        // v4.15 on) and the policy models it.
        default: |cx| cx.pol.switches.pti && cx.preset.meltdown && cx.preset.kernel.pti_on_meltdown(),
        set: |s| s.switch_on(s.pol.switches.pti),
        show: |v, cx| cx.pol.switches.pti.then(|| word(v.pti)),
    }
    tlbi_range: bool {
        doc: "on|off: arm64-linux kernels only; flush ranges with FEAT_TLBIRANGE range operations (TLBI RVAE1IS), the \
         whole-ASID fallback only past 2^21 pages (default: the machine's, on for graviton4)",
        applies_to: || "the arm64-linux policies".into(),
        // A machine's own FEAT_TLBIRANGE reaches only the policies that use it.
        default: |cx| cx.preset.tlbi_range && cx.pol.switches.tlbi_range,
        set: |s| s.switch_on(s.pol.switches.tlbi_range),
        // Shown when on only, so that runs without range operations read as
        // before it existed.
        show: |v, _| v.tlbi_range.then(|| json!("on")),
    }
    tlb_mode: Option<u32> {
        doc: "arm64-linux-tlbmode and its fix only: the tlb_mode= word, decimal or 0x hex: bits 0-9 the most CPUs in mm_cpumask \
         flushed by IPIs (above: broadcast; 0: always broadcast), bit 10 (0x400) local flushes of an mm only this \
         CPU ran, bit 12 (0x1000) no flush of an mm no CPU ran (default: log2(cpus) | 0x1400)",
        default: |_| None,
        set: |s| {
            if s.pol.switches.tlb_mode.is_none() {
                let takes = POLICIES.iter().filter(|p| p.switches.tlb_mode.is_some()).map(|p| p.name).collect();
                return Err(Error::TlbModeNotTaken { takes, policy: s.pol.name });
            }
            let word = match s.value.strip_prefix("0x") {
                Some(hex) => u32::from_str_radix(hex, 16),
                None => s.value.parse(),
            };
            let want = "give the mode word as a number, decimal or 0x hex (e.g. 0x1404)";
            Ok(Some(word.map_err(|_| bad_setting(s.key, s.value, want))?))
        },
        show: |v, cx| cx.pol.switches.tlb_mode.map(|default| {
            json!(format!("{:#x}", v.tlb_mode.unwrap_or_else(|| default(cx.cpus))))
        }),
    }
    contpte: Option<ContMode> {
        doc: "off|folios|on: arm64-linux kernels only (folios: x86-64 Linux kernels too, which have large folios but \
         no contiguous bit); 64 KB folios for anonymous memory and files, mapped with the contiguous bit (on) or \
         without (folios, origin 004's baseline) (default off)",
        default: |_| None,
        set: |s| s.choice(&ContMode::ALL, ContMode::name).map(Some),
        show: |v, _| v.contpte_reported().then(|| json!(v.contpte().mode.name())),
    }
    teardown: Option<Teardown> {
        doc: "noopt|simple|robust|clear_ptes: how exit tears contiguous blocks down with contpte=on (default clear_ptes)",
        default: |_| None,
        set: |s| Teardown::from_name(s.value).map(Some).map_err(|e| bad_setting(s.key, s.value, e.to_string())),
        show: |v, _| v.contpte_reported().then(|| json!(v.contpte().teardown.name())),
    }
    memcg_depth: Option<u32> {
        doc: "0..16: Linux machines only; the memory cgroup the tasks run in, as levels below the root: 0, the root \
         cgroup, is never charged; at depth d each charge of a CPU's stock and each uncharge updates d + 1 page \
         counters, the cgroup's, its ancestors' and the root's (default: 2, a systemd service's \
         /system.slice/NAME.service, for kernels from v4.16, when systemd v238 turned memory accounting on; 0 before)",
        default: |_| None,
        set: |s| {
            linux_only(s.preset, s.key, s.value, "which has no memory cgroups")?;
            let n = s.num()?;
            if !(0.0..=f64::from(crate::sim::MEMCG_DEPTH_MAX)).contains(&n) || n.fract() != 0.0 {
                return Err(out_of_range(s.key, s.value, "a whole number of levels from 0 to 16"));
            }
            Ok(Some(n as u32))
        },
        show: |v, _| v.memcg_depth.map(|d| json!(d)),
    }
}

/// The FIFO class's time slice where `--set slice_us` does not give one, in
/// microseconds.
const FIFO_SLICE_US: f64 = 4000.0;

impl Values {
    /// Whether threads may move between CPUs: as given, else on for the fair
    /// classes (Linux balances by default), off for FIFO.
    pub(super) fn migration(&self) -> bool {
        self.migration.unwrap_or(self.sched.is_fair())
    }

    /// The FIFO class's time slice: as given, else [`FIFO_SLICE_US`].
    pub(super) fn fifo_slice_us(&self) -> f64 {
        self.slice_us.unwrap_or(FIFO_SLICE_US)
    }

    /// Whether the run reports the contpte metrics and settings: when
    /// `contpte` or `teardown` was given, so that other runs print what they
    /// always did.
    pub(super) fn contpte_reported(&self) -> bool {
        self.contpte.is_some() || self.teardown.is_some()
    }

    /// Large folios and contiguous PTEs as given (off by default).
    pub(super) fn contpte(&self) -> ContpteConfig {
        let off = ContpteConfig::default();
        ContpteConfig {
            mode: self.contpte.unwrap_or(off.mode),
            teardown: self.teardown.unwrap_or(off.teardown),
            report: self.contpte_reported(),
            ..off
        }
    }
}
