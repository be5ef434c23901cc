//! The request checked and resolved: the machine's and kernel's `--set`
//! switches (`MACHINE_KEYS`) against the preset and the policy's registry
//! entry, the workload's parameters against its entry, and the sockets a CPU
//! count spans. Every error says what was wrong and what would be accepted.

use super::*;

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
    pub(super) asid_bits: u8,
    pub(super) numa: usize,
    pub(super) kpti: bool,
    pub(super) tlbi_range: bool,
    pub(super) tlb_mode: Option<u32>,
    /// `--set flush_ceiling`, if given.
    pub(super) flush_ceiling: Option<u64>,
    pub(super) pti: bool,
    /// The machine's `INVPCID`.
    pub(super) invpcid: bool,
    pub(super) spec_rate: f64,
    /// `None`: the class's default.
    pub(super) migration: Option<bool>,
    pub(super) sched: SchedKind,
    pub(super) swap: SwapKind,
    pub(super) slice_us: f64,
    /// Whether `slice_us` was given (it then sets the fair classes' base slice).
    pub(super) slice_set: bool,
    pub(super) contpte: ContpteConfig,
    pub(super) tlbbatch: bool,
    /// `None`: the preset kernel's.
    pub(super) migrate_batch: Option<bool>,
    /// `--set vma_locks`, if given.
    pub(super) vma_locks: Option<bool>,
    /// `--set lru_drain`, if given.
    pub(super) lru_drain: Option<bool>,
    /// `--set noise` (on unless given off).
    pub(super) noise: bool,
}

impl MachineParams {
    /// Whether threads may move between CPUs: as given, else on for the fair
    /// classes (Linux balances by default), off for FIFO.
    pub(super) fn migration(&self) -> bool {
        self.migration.unwrap_or(self.sched.is_fair())
    }
}

pub(super) fn valid_keys(wl: &workload::WorkloadDef) -> Vec<&'static str> {
    let mut keys: Vec<&str> = MACHINE_KEYS.iter().map(|(k, _)| *k).collect();
    keys.extend(wl.params.iter().map(|p| p.key));
    keys.extend(workload::text_params(wl.name).iter().map(|p| p.key));
    keys
}

/// A run request, checked: the preset, the workload, the machine parameters and
/// the workload's numeric and text parameters.
pub(super) type Resolved = (Preset, &'static workload::WorkloadDef, MachineParams, Params, Texts);

/// Checks a run request and returns the resolved preset, machine parameters and
/// workload parameters.
pub(super) fn resolve(spec: &RunSpec) -> Result<Resolved, Error> {
    resolve_on(spec, preset::resolve(&spec.machine)?)
}

/// [`resolve`] on the machine `preset`, whatever `spec.machine` names.
pub(super) fn resolve_on(spec: &RunSpec, mut preset: Preset) -> Result<Resolved, Error> {
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
            machine: preset.name.clone(),
            machine_arch: preset.arch,
            fits,
        });
    }
    if pol.needs_broadcast_tlbi && !preset.has_broadcast_tlbi() {
        let fits: Vec<String> =
            presets.iter().filter(|p| p.arch == pol.arch && p.has_broadcast_tlbi()).map(|p| p.name.clone()).collect();
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
                        machine: preset.name.clone(),
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
                        machine: preset.name.clone(),
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
pub(super) fn sockets(preset: &Preset, spec: &RunSpec) -> Result<usize, Error> {
    let real = preset.real_cores.div_ceil(preset.cores_per_socket);
    let Some(v) = spec.sets.iter().rev().find_map(|s| s.strip_prefix("sockets=")) else { return Ok(real) };
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
    (cpus > preset.real_cores).then(|| format!("sockets={}", cpus.div_ceil(preset.cores_per_socket)))
}

/// Returns the machine and kernel parameter keys with their meaning.
pub fn machine_keys() -> &'static [(&'static str, &'static str)] {
    MACHINE_KEYS
}
