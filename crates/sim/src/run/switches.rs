//! The machine and kernel switches a run takes (`--set KEY=VALUE` besides the
//! workload's own parameters), one entry each: its key, what it means and its
//! default (the words `tlbkit list machines`, the JSON catalogue, the sweep
//! schema and the error for an unknown key all read), and how its value is
//! checked and applied to the run's [`MachineParams`]. The kernel's on|off
//! behaviours are declared in `crate::toggle` and join these as switches
//! ([`all`]). Adding a switch is an entry here (or a toggle there) and its
//! use where the machine or kernel reads it; nothing else tests its name.

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

/// The machine's and the run's switches, in the order `tlbkit list machines`
/// gives them, before the kernel's toggles ([`all`]).
static SWITCHES: &[Switch] = &[
    Switch {
        key: "asid_bits",
        doc: "ASID width in bits (the preset's supported widths)",
        applies_to: String::new,
        set: |s| {
            let b = s.num()?;
            if b.fract() != 0.0 || b > 16.0 || !s.preset.asid_bits.contains(&(b as u8)) {
                let choices = s.preset.asid_bits.iter().map(|b| b.to_string()).collect();
                return Err(s.unsupported("asid_bits", choices));
            }
            s.mp.asid_bits = b as u8;
            Ok(())
        },
    },
    Switch {
        key: "spec_rate",
        doc: "probability of a speculative TLB fill per user operation, 0..1 (default 0.02)",
        applies_to: String::new,
        set: |s| {
            s.mp.spec_rate = s.num_in(0.0..=1.0, "0 to 1")?;
            Ok(())
        },
    },
    Switch {
        key: "migration",
        doc: "on|off: let the scheduler move threads between CPUs: wake-affine placement and load balancing for cfs and \
         eevdf, balanced wake-ups and idle stealing for fifo (default: on for cfs and eevdf, as Linux balances, off \
         for fifo)",
        applies_to: String::new,
        set: |s| {
            s.mp.migration = Some(s.on_off()?);
            Ok(())
        },
    },
    Switch {
        key: "swap",
        doc: "zram|nvme: the device MADV_PAGEOUT writes to and a swap-in fault reads from (default zram: lzo-rle, \
         compressed on the CPU)",
        applies_to: String::new,
        set: |s| {
            s.mp.mm.swap = s.choice(&SwapKind::ALL, SwapKind::name)?;
            Ok(())
        },
    },
    Switch {
        key: "sched",
        doc: "fifo|cfs|eevdf: the scheduler (default: the preset's kernel's: eevdf for Linux v6.6 and later, cfs for \
         earlier Linux, fifo for the FreeBSD presets)",
        applies_to: String::new,
        set: |s| {
            s.mp.sched = s.choice(&SchedKind::ALL, SchedKind::name)?;
            Ok(())
        },
    },
    Switch {
        key: "slice_us",
        doc: "time slice in microseconds: fifo's slice (default 4000); for cfs and eevdf, when given, the base slice \
         (eevdf) or minimum granularity (cfs, latency 8 times it) instead of the kernel's scaled default",
        applies_to: String::new,
        set: |s| {
            s.mp.slice_us = s.num_in(1.0..=1e6, "1 to 1000000")?;
            s.mp.slice_set = true;
            Ok(())
        },
    },
    Switch {
        key: "jitter",
        doc: "0..0.5: spread every compute time and system-call path by a random factor in [1-jitter, 1+jitter] drawn \
         from the seed, so that seeds differ as runs of a real machine do (default 0: none, nothing drawn)",
        applies_to: String::new,
        set: |s| {
            // Kept with the workload's parameters, which the run's phases are set
            // up from, and printed with them only when given.
            let j = s.num_in(0.0..=0.5, "0 to 0.5")?;
            s.params.insert(JITTER.to_string(), j);
            Ok(())
        },
    },
    Switch {
        key: "noise",
        doc: "on|off: the seed draws what varies between runs of a real machine: the tick's phase, each IPI's delivery \
         latency and each wake-up's, around their means (default on; off: every seed the same timing, as before \
         this setting existed)",
        applies_to: String::new,
        set: |s| {
            s.mp.noise = s.on_off()?;
            Ok(())
        },
    },
    Switch {
        key: "smt",
        doc: "on|off, or the threads per core: on a machine whose cores run two threads, whether a core's threads \
         share its speed while both run (on, the default: each runs its software at the machine's smt_share of the \
         core) or every CPU is a core of its own (off, or 1); 2 is on for a machine of two threads per core",
        applies_to: String::new,
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
            s.mp.smt = Some(on);
            Ok(())
        },
    },
    Switch {
        key: "numa",
        doc: "NUMA nodes the machine is booted with (the preset's choices, e.g. altra: 1 or 2)",
        applies_to: String::new,
        set: |s| {
            let n = s.num()?;
            if n.fract() != 0.0 || !s.preset.numa.contains(&(n as usize)) {
                let choices = s.preset.numa.iter().map(|n| n.to_string()).collect();
                return Err(s.unsupported("numa", choices));
            }
            s.mp.numa = n as usize;
            Ok(())
        },
    },
    Switch {
        key: SOCKETS,
        doc: "sockets of the preset's kind (default: the real machine's); more model a larger machine, so that --cpus \
         may exceed the preset's cores (up to 4096 CPUs)",
        // Read before the others, since the CPU count depends on it (`resolve::sockets`).
        applies_to: String::new,
        set: |_| Ok(()),
    },
    Switch {
        key: "kpti",
        doc: "on|off: arm64-linux with kernel page-table isolation, halving the usable ASIDs (default off)",
        applies_to: || "the arm64-linux policies".into(),
        set: |s| {
            s.mp.kpti = s.switch_on(s.pol.switches.kpti)?;
            Ok(())
        },
    },
    Switch {
        key: "flush_ceiling",
        doc: "0..4096: x86 Linux kernels only; tlb_single_page_flush_ceiling, the pages above which a range flush becomes \
         a full flush (default 33, the kernel's; 0: every range a full flush)",
        applies_to: || "the x86 Linux policies".into(),
        set: |s| {
            if !s.pol.switches.flush_ceiling {
                return Err(s.not_taken());
            }
            let n = s.num()?;
            if !(0.0..=4096.0).contains(&n) || n.fract() != 0.0 {
                return Err(out_of_range(s.key, s.value, "a whole number of pages from 0 to 4096"));
            }
            s.mp.flush_ceiling = Some(n as u64);
            Ok(())
        },
    },
    Switch {
        key: "pti",
        doc: "on|off: x86 Linux with PCIDs only (x86-linux-pcid, -512, -513, -613, -lazytrim); page-table isolation \
         (v4.15+): a CR3 write at every kernel entry and exit, and a user PCID flushed per page by INVPCID, or \
         whole at the next return to user on machines without INVPCID (default: on where the kernel turns it on, \
         a Meltdown-affected CPU under Linux v4.15 or later; the run's kernel and pti say which)",
        applies_to: || format!("{} (x86 Linux with PCIDs, without INVLPGB)", takers(|s| s.pti).join(", ")),
        set: |s| {
            s.mp.pti = s.switch_on(s.pol.switches.pti)?;
            Ok(())
        },
    },
    Switch {
        key: "tlbi_range",
        doc: "on|off: arm64-linux kernels only; flush ranges with FEAT_TLBIRANGE range operations (TLBI RVAE1IS), the \
         whole-ASID fallback only past 2^21 pages (default: the machine's, on for graviton4)",
        applies_to: || "the arm64-linux policies".into(),
        set: |s| {
            s.mp.tlbi_range = s.switch_on(s.pol.switches.tlbi_range)?;
            Ok(())
        },
    },
    Switch {
        key: "tlb_mode",
        doc: "arm64-linux-tlbmode and its fix only: the tlb_mode= word, decimal or 0x hex: bits 0-9 the most CPUs in mm_cpumask \
         flushed by IPIs (above: broadcast; 0: always broadcast), bit 10 (0x400) local flushes of an mm only this \
         CPU ran, bit 12 (0x1000) no flush of an mm no CPU ran (default: log2(cpus) | 0x1400)",
        applies_to: String::new,
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
            s.mp.tlb_mode = Some(word.map_err(|_| bad_setting(s.key, s.value, want))?);
            Ok(())
        },
    },
    Switch {
        key: "contpte",
        doc: "off|folios|on: arm64-linux kernels only (folios: x86-64 Linux kernels too, which have large folios but \
         no contiguous bit); 64 KB folios for anonymous memory and files, mapped with the contiguous bit (on) or \
         without (folios, origin 004's baseline) (default off)",
        applies_to: String::new,
        set: |s| {
            s.mp.contpte.mode = s.choice(&ContMode::ALL, ContMode::name)?;
            s.mp.contpte.report = true;
            Ok(())
        },
    },
    Switch {
        key: "teardown",
        doc: "noopt|simple|robust|clear_ptes: how exit tears contiguous blocks down with contpte=on (default clear_ptes)",
        applies_to: String::new,
        set: |s| {
            s.mp.contpte.teardown =
                Teardown::from_name(s.value).map_err(|e| bad_setting(s.key, s.value, e.to_string()))?;
            s.mp.contpte.report = true;
            s.mp.teardown_set = true;
            Ok(())
        },
    },
    Switch {
        key: "memcg_depth",
        doc: "0..16: Linux machines only; the memory cgroup the tasks run in, as levels below the root: 0, the root \
         cgroup, is never charged; at depth d each charge of a CPU's stock and each uncharge updates d + 1 page \
         counters, the cgroup's, its ancestors' and the root's (default: 2, a systemd service's \
         /system.slice/NAME.service, for kernels from v4.16, when systemd v238 turned memory accounting on; 0 before)",
        applies_to: String::new,
        set: |s| {
            linux_only(s.preset, s.key, s.value, "which has no memory cgroups")?;
            let n = s.num()?;
            if !(0.0..=f64::from(crate::sim::MEMCG_DEPTH_MAX)).contains(&n) || n.fract() != 0.0 {
                return Err(out_of_range(s.key, s.value, "a whole number of levels from 0 to 16"));
            }
            s.mp.mm.memcg_depth = Some(n as u32);
            Ok(())
        },
    },
];
