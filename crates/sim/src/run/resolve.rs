//! The request checked and resolved: the machine's and kernel's `--set`
//! switches (`run/switches.rs`) against the preset and the policy's registry
//! entry, the workload's parameters against its entry, and the sockets a CPU
//! count spans. Every error says what was wrong and what would be accepted.

use super::switches::{self, sockets, Context, Setting, Values};
use super::*;
use crate::toggle::{Toggles, VMA_LOCKS, VMA_LOCKS_V2};

/// Parses the value `v` of the on|off setting `k`.
pub(super) fn on_off(k: &str, v: &str) -> Result<bool, Error> {
    match v {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(bad_setting(k, v, "give on or off")),
    }
}

/// Returns the error of the setting `k=v`, whose value must be as `want` says.
pub(super) fn bad_setting(k: &str, v: &str, want: impl Into<String>) -> Error {
    Error::BadSetting { key: k.to_string(), value: v.to_string(), want: want.into() }
}

/// Refuses the setting `k=v` of a Linux mechanism on a machine that runs
/// FreeBSD, which lacks it (`why`: "which has no ...").
pub(super) fn linux_only(preset: &Preset, k: &str, v: &str, why: &str) -> Result<(), Error> {
    match preset.kernel {
        preset::Kernel::Linux(..) => Ok(()),
        preset::Kernel::FreeBsd(_) => {
            Err(bad_setting(k, v, format!("{} runs FreeBSD, {why}: give it on a Linux machine", preset.name)))
        }
    }
}

/// Returns the error of the setting `k=v`, out of `range`.
pub(super) fn out_of_range(k: &str, v: &str, range: impl Into<String>) -> Error {
    Error::SettingRange { key: k.to_string(), value: v.to_string(), range: range.into() }
}

/// The machine and kernel settings after `--set`.
pub(super) struct MachineParams {
    /// The policy's entry, which says the switches it takes.
    pub(super) pol: &'static PolicyDef,
    /// The machine's `INVPCID`.
    pub(super) invpcid: bool,
    /// The machine's and the run's switches (`run/switches.rs`).
    pub(super) values: Values,
    /// The kernel's on|off behaviours given (`crate::toggle`).
    pub(super) toggles: Toggles,
}

pub(super) fn valid_keys(wl: &workload::WorkloadDef) -> Vec<&'static str> {
    let mut keys: Vec<&str> = switches::all().map(|s| s.key).collect();
    keys.extend(wl.params.iter().map(|p| p.key));
    keys.extend(wl.text_params.iter().map(|p| p.key));
    keys
}

/// A run request, checked.
pub(super) struct Resolved {
    /// The machine, with the policy's kernel.
    pub(super) preset: Preset,
    /// The workload's entry.
    pub(super) wl: &'static workload::WorkloadDef,
    /// The machine and kernel settings after `--set`.
    pub(super) mp: MachineParams,
    /// The workload's numeric parameters.
    pub(super) params: Params,
    /// The workload's text parameters.
    pub(super) texts: Texts,
}

/// Checks a run request and returns the resolved preset, machine parameters and
/// workload parameters.
pub(super) fn resolve(spec: &RunSpec) -> Result<Resolved, Error> {
    resolve_on(spec, preset::resolve(&spec.machine)?)
}

/// [`resolve`] on the machine `preset`, whatever `spec.machine` names.
pub(super) fn resolve_on(spec: &RunSpec, mut preset: Preset) -> Result<Resolved, Error> {
    let pol =
        registry::policy(&spec.policy).ok_or_else(|| registry::Error::UnknownPolicy { name: spec.policy.clone() })?;
    // A policy that is one Linux release's code runs under that release's
    // settings (batches, scheduler, PTI), whatever kernel the machine's
    // measurements were taken on; the run's `kernel` says which.
    if let Some((major, minor)) = pol.version {
        preset.kernel = preset::Kernel::Linux(major, minor);
    }
    let wl = workload::by_name(&spec.workload).ok_or_else(|| workload::unknown(&spec.workload))?;
    if pol.arch != preset.arch {
        let fits: Vec<&str> = POLICIES.iter().filter(|p| p.arch == preset.arch).map(|p| p.name).collect();
        return Err(Error::WrongArch {
            policy: pol.name,
            policy_arch: pol.arch,
            machine: preset.name.clone(),
            machine_arch: preset.arch,
            fits,
        });
    }
    if pol.needs_broadcast_tlbi && !preset.has_broadcast_tlbi() {
        let fits: Vec<String> = preset::all()
            .into_iter()
            .filter(|p| p.arch == pol.arch && p.has_broadcast_tlbi())
            .map(|p| p.name)
            .collect();
        return Err(Error::NeedsInvlpgb { policy: pol.name, machine: preset.name.clone(), fits });
    }
    if spec.cpus == 0 || spec.cpus > MAX_CPUS {
        return Err(Error::CpusRange { cpus: spec.cpus as i64, max: MAX_CPUS });
    }
    let sockets = sockets(&preset, spec)?;
    if spec.cpus > sockets * preset.cores_per_socket {
        return Err(Error::TooFewCores {
            cpus: spec.cpus,
            machine: preset.name.clone(),
            max: sockets * preset.cores_per_socket,
            sockets,
            per_socket: preset.cores_per_socket,
            need: spec.cpus.div_ceil(preset.cores_per_socket),
        });
    }
    let cx = Context { preset: &preset, pol, cpus: spec.cpus, sockets };
    let values = Values::defaults(&cx);
    let mut mp = MachineParams { pol, invpcid: preset.invpcid, values, toggles: Toggles::default() };
    let mut params: Params = wl.params.iter().map(|p| (p.key.to_string(), p.default)).collect();
    let mut texts = Texts::new();
    for s in &spec.sets {
        let (k, v) = s
            .split_once('=')
            .filter(|(k, v)| !k.is_empty() && !v.is_empty())
            .ok_or_else(|| Error::MalformedSet { text: s.clone() })?;
        if let Some(sw) = switches::switch(k) {
            let mut setting = Setting { key: k, value: v, preset: &preset, pol, mp: &mut mp, params: &mut params };
            (sw.set)(&mut setting)?;
            continue;
        }
        if wl.text_params.iter().any(|p| p.key == k) {
            texts.insert(k.to_string(), v.to_string());
            continue;
        }
        let Some(def) = wl.params.iter().find(|p| p.key == k) else {
            return Err(Error::UnknownSetting { key: k.to_string(), valid: valid_keys(wl) });
        };
        let x = v
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite())
            .ok_or_else(|| bad_setting(k, v, format!("{k} must be a number")))?;
        if x < def.min || x > def.max || x.fract() != 0.0 {
            return Err(out_of_range(k, v, format!("a whole number from {} to {} ({})", def.min, def.max, def.doc)));
        }
        params.insert(k.to_string(), x);
    }
    // x86 Linux maps large anonymous folios (mTHP, v6.8) without a contiguous
    // bit: `contpte=folios` alone runs there.
    let v = &mp.values;
    let x86_folios = v.contpte == Some(ContMode::Folios)
        && v.teardown.is_none()
        && pol.arch == registry::Arch::X86_64
        && pol.os != registry::Os::Freebsd;
    let mode = v.contpte();
    if (mode.mode != ContMode::Off || v.teardown.is_some()) && !pol.switches.contpte && !x86_folios {
        let linux: Vec<&str> = POLICIES.iter().filter(|p| p.switches.contpte).map(|p| p.name).collect();
        return Err(Error::ContpteNotTaken { mode: mode.mode.name(), takes: linux, policy: pol.name });
    }
    // The series' v2 is per-VMA locks, on any kernel.
    if mp.toggles.given(VMA_LOCKS_V2) == Some(true) {
        if mp.toggles.given(VMA_LOCKS) == Some(false) {
            return Err(bad_setting(
                "vma_locks_v2",
                "on",
                "per-VMA locks as their v2 posted them cannot run with vma_locks=off: drop one of the two",
            ));
        }
        mp.toggles.set(VMA_LOCKS, true);
    }
    if let Some(missing) = wl.text_params.iter().find(|p| !texts.contains_key(p.key)) {
        return Err(Error::NeedsText { workload: wl.name, key: missing.key, doc: missing.doc });
    }
    Ok(Resolved { preset, wl, mp, params, texts })
}

/// Returns the machine and kernel parameter keys with their meaning.
pub fn machine_keys() -> impl Iterator<Item = (&'static str, &'static str)> {
    switches::all().map(|s| (s.key, s.doc))
}
