//! `--machine host`: the machine the simulator runs on, as `tlbkit calibrate`
//! measured it.
//!
//! A [`HostProfile`] is what calibration saves: the host's topology (read from
//! `/sys`), its clock, and the costs fitted to its microbenchmarks. The preset
//! built from it ([`preset`]) starts from the published preset of the nearest
//! kind of core ([`HostProfile::base`]: `milan` for AMD x86, `skylake` for other
//! x86, `graviton4` for arm64), whose every figure keeps its source, and replaces
//! the topology, the clock, the kernel version and the measured costs. Broadcast
//! invalidation stays only where the host has it (x86 `INVLPGB` in
//! `/proc/cpuinfo`'s flags; every arm64 machine).
//!
//! The profile lives in one JSON file ([`profile_path`]): `--machine host` reads
//! it and never measures, so the same profile gives the same results on every
//! run, and a profile copied from another machine simulates that machine.
//!
//! Not from the host: the TLB geometry and every cost the microbenchmarks do
//! not reach (TLB invalidations, IPIs, walks), which keep the base preset's
//! figures; SMT (each logical CPU is a core, as in every preset); NUMA nodes
//! inside a package (a package is one node).

use super::{by_name, file::MachineFileError, Arch, Costs, Kernel, Preset};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The environment variable that names the profile's file, overriding the
/// default place ([`profile_path`]).
pub const PROFILE_ENV: &str = "TLBKIT_HOST_PROFILE";

/// What `tlbkit calibrate` saves of a host: its shape and its measured costs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostProfile {
    /// The host's name (`uname -n`).
    pub hostname: String,
    /// The CPU's model name (`/proc/cpuinfo`).
    pub model: String,
    /// `uname -m`: `x86_64` or `aarch64`.
    pub arch: String,
    /// `uname -r`: the kernel's release.
    pub kernel_release: String,
    /// Online CPUs.
    pub cpus: usize,
    /// CPUs in the largest package.
    pub cpus_per_package: usize,
    /// CPUs sharing the last-level cache.
    pub cpus_per_l3: usize,
    /// Hardware threads per core.
    pub threads_per_core: usize,
    /// NUMA nodes.
    pub numa_nodes: usize,
    /// Clock frequency in GHz (cpufreq's maximum, else `/proc/cpuinfo`'s).
    pub freq_ghz: f64,
    /// Whether the CPUs broadcast TLB invalidations (arm64; x86 with `INVLPGB`).
    pub broadcast_tlbi: bool,
    /// The costs fitted to the host's microbenchmarks.
    pub costs: HostCosts,
}

/// The costs `tlbkit calibrate` fits, in cycles at the profile's clock, and
/// the memory bandwidth it measures. Each comes from one microbenchmark, in the
/// order they are fitted (a later one's fit uses the earlier ones).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostCosts {
    /// `Costs::syscall_body`, from `null_syscall`.
    pub syscall_body: u64,
    /// `Costs::page_copy`, from `zeroing` (one CPU's rate).
    pub page_copy: u64,
    /// `Preset::mem_bw_gbs`, from `zeroing_all` (every CPU zeroing at once).
    pub mem_bw_gbs: f64,
    /// `Costs::fault_path`, from `page_fault`.
    pub fault_path: u64,
    /// `Costs::pipe_op`, from `pipe_rw`.
    pub pipe_op: u64,
    /// `Costs::switch_path`, from `pipe_switch`.
    pub switch_path: u64,
    /// `Costs::cacheline_transfer`, from `line_pingpong`.
    pub cacheline_transfer: u64,
    /// `Costs::atomic_hit`, from `atomic_hit`; `None` in a profile saved
    /// before that microbenchmark existed, whose host keeps its base
    /// preset's figure.
    #[serde(default)]
    pub atomic_hit: Option<u64>,
}

/// Why a host profile could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// There is no profile at the path: the host was never calibrated.
    #[error("no calibration of this host at {path}: run `tlbkit calibrate` first (it saves one there; {PROFILE_ENV} names another file)")]
    Missing {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The preset the host's figures start from could not be read.
    #[error("{0}")]
    Base(#[from] MachineFileError),
    /// The file is not a profile.
    #[error("{path}: not a host profile ({why}); run `tlbkit calibrate` again to rewrite it")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        why: String,
    },
}

impl HostProfile {
    /// Returns the instruction-set family, or `None` for a host the simulator
    /// has no policies for.
    pub fn isa(&self) -> Option<Arch> {
        match self.arch.as_str() {
            "x86_64" => Some(Arch::X86_64),
            "aarch64" | "arm64" => Some(Arch::Arm64),
            _ => None,
        }
    }

    /// Returns the name of the published preset whose unmeasured figures the
    /// host keeps: the nearest kind of core.
    pub fn base_name(&self) -> &'static str {
        match self.isa() {
            Some(Arch::Arm64) => "graviton4",
            _ if self.model.contains("AMD") => "milan",
            _ => "skylake",
        }
    }

    /// Returns the published preset whose unmeasured figures the host keeps
    /// ([`HostProfile::base_name`]).
    pub fn base(&self) -> Result<Preset, ProfileError> {
        let name = self.base_name();
        by_name(name).ok_or_else(|| {
            ProfileError::Base(MachineFileError { file: format!("machines/{name}.toml"), why: "not built in".into() })
        })
    }

    /// Returns the kernel the host runs, from its release (`6.1.0-28-amd64` is
    /// Linux 6.1); the base preset's where the release does not parse.
    pub fn kernel(&self) -> Option<Kernel> {
        let mut parts = self.kernel_release.split(|c: char| !c.is_ascii_digit());
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        Some(Kernel::Linux(major, minor))
    }

    /// Checks that the profile describes a machine the simulator can build;
    /// returns what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.isa().is_none() {
            return Err(format!("architecture '{}' (tlbkit simulates x86_64 and aarch64)", self.arch));
        }
        if self.cpus == 0 || self.cpus_per_package == 0 || self.cpus_per_l3 == 0 {
            return Err("a CPU count of 0".into());
        }
        if !(self.freq_ghz.is_finite() && self.freq_ghz > 0.1 && self.freq_ghz < 20.0) {
            return Err(format!("a clock of {} GHz", self.freq_ghz));
        }
        if !(self.costs.mem_bw_gbs.is_finite() && self.costs.mem_bw_gbs > 0.0) {
            return Err(format!("a memory bandwidth of {} GB/s", self.costs.mem_bw_gbs));
        }
        Ok(())
    }
}

/// Returns the machine a profile describes (see the module documentation).
///
/// Fails only where the base preset's file cannot be read.
pub fn preset(p: &HostProfile) -> Result<Preset, ProfileError> {
    let base = p.base()?;
    let kernel = p.kernel().unwrap_or(base.kernel);
    let per_package = p.cpus_per_package.min(p.cpus).max(1);
    let mut costs = base.costs;
    let h = p.costs;
    costs.kernel.syscall_body = h.syscall_body;
    costs.kernel.page_copy = h.page_copy.max(1);
    costs.kernel.fault_path = h.fault_path;
    costs.kernel.pipe_op = h.pipe_op;
    costs.kernel.switch_path = h.switch_path;
    costs.lines.cacheline_transfer = h.cacheline_transfer.max(1);
    if let Some(atomic) = h.atomic_hit {
        costs.lines.atomic_hit = atomic;
    }
    if base.arch == Arch::X86_64 && !p.broadcast_tlbi {
        // Without INVLPGB remote CPUs are reached by IPI only: the broadcast
        // fields are those of every x86 machine without it.
        let x = super::base_costs(Arch::X86_64)?;
        costs = Costs { dvm: x.dvm, dsb: x.dsb, ..costs };
    }
    let measured = ["syscall_body", "page_copy", "fault_path", "pipe_op", "switch_path", "cacheline_transfer"];
    let atomic = h.atomic_hit.map(|_| "atomic_hit");
    let mut sources = base.sources.clone();
    for k in measured.into_iter().chain(atomic) {
        sources.insert(format!("costs_cycles.{k}"), format!("measured by tlbkit calibrate on {}", p.hostname));
    }
    for k in ["freq_ghz", "cores_per_socket", "cores_per_ccx", "cores", "numa", "kernel", "mem_bw_gbs"] {
        sources.insert(k.to_string(), format!("this host ({}), read or measured by tlbkit calibrate", p.hostname));
    }
    Ok(Preset {
        name: "host".into(),
        description: "this machine: topology from /sys, costs from `tlbkit calibrate`".into(),
        arch: base.arch,
        freq_ghz: p.freq_ghz,
        cores_per_socket: per_package,
        cores_per_ccx: p.cpus_per_l3.clamp(1, per_package),
        real_cores: p.cpus,
        asid_bits: base.asid_bits,
        numa: vec![1],
        tlb: base.tlb,
        kernel,
        mem_bw_gbs: h.mem_bw_gbs,
        tlbi_range: base.tlbi_range && base.arch == Arch::Arm64,
        // The nearest preset's: the host's CPUID is not read for it.
        invpcid: base.invpcid,
        // The nearest preset's: the host's /sys/devices/system/cpu/vulnerabilities
        // are not read for it (`--set pti=` says what a run uses).
        meltdown: base.meltdown,
        // The host's siblings are not modelled: each CPU a core, as `smt=off`.
        threads: super::CoreThreads::ONE,
        costs,
        // The nearest preset's, but for `switch_path`, which calibration measures.
        estimates: if base.estimates.iter().any(|e| e.costs == "switch_path") { Vec::new() } else { base.estimates },
        cost_sources: base.cost_sources,
        sources,
    })
}

/// Returns where the profile is kept: the file [`PROFILE_ENV`] names, else
/// `$XDG_CACHE_HOME/tlbkit/host.json`, else `~/.cache/tlbkit/host.json`, else
/// `tlbkit-host.json` in the working directory.
pub fn profile_path() -> PathBuf {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(p) = var(PROFILE_ENV) {
        return p;
    }
    if let Some(d) = var("XDG_CACHE_HOME") {
        return d.join("tlbkit").join("host.json");
    }
    if let Some(h) = var("HOME") {
        return h.join(".cache").join("tlbkit").join("host.json");
    }
    PathBuf::from("tlbkit-host.json")
}

/// Reads and checks the profile at `path`.
pub fn read(path: &Path) -> Result<HostProfile, ProfileError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ProfileError::Missing { path: path.to_path_buf() })
        }
        Err(source) => return Err(ProfileError::Io { path: path.to_path_buf(), source }),
    };
    let p: HostProfile = serde_json::from_str(&text)
        .map_err(|e| ProfileError::Malformed { path: path.to_path_buf(), why: e.to_string() })?;
    p.validate().map_err(|why| ProfileError::Malformed { path: path.to_path_buf(), why })?;
    Ok(p)
}

/// Reads the profile at [`profile_path`] and returns the machine it describes.
pub fn load() -> Result<Preset, ProfileError> {
    preset(&read(&profile_path())?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::SchedKind;

    /// A two-CPU AMD guest like the one the guide's figures come from.
    fn guest() -> HostProfile {
        HostProfile {
            hostname: "vm".into(),
            model: "AMD EPYC 7B13".into(),
            arch: "x86_64".into(),
            kernel_release: "6.1.0-28-cloud-amd64".into(),
            cpus: 2,
            cpus_per_package: 2,
            cpus_per_l3: 2,
            threads_per_core: 1,
            numa_nodes: 1,
            freq_ghz: 2.45,
            broadcast_tlbi: false,
            costs: HostCosts {
                syscall_body: 111,
                page_copy: 222,
                mem_bw_gbs: 9.5,
                fault_path: 333,
                pipe_op: 444,
                switch_path: 555,
                cacheline_transfer: 66,
                atomic_hit: Some(7),
            },
        }
    }

    #[test]
    fn an_amd_guest_without_invlpgb_is_milan_without_broadcasts() {
        let p = preset(&guest()).unwrap();
        assert_eq!(p.name, "host");
        assert_eq!(p.arch, Arch::X86_64);
        assert_eq!((p.cores_per_socket, p.cores_per_ccx, p.real_cores), (2, 2, 2));
        assert_eq!(p.kernel, Kernel::Linux(6, 1));
        assert_eq!(p.kernel.sched(), SchedKind::Cfs);
        assert!(!p.has_broadcast_tlbi());
        assert_eq!(p.tlb.l2_entries, crate::preset::named("milan").tlb.l2_entries);
        let c = p.costs;
        assert_eq!(
            (
                c.kernel.syscall_body,
                c.kernel.page_copy,
                c.kernel.fault_path,
                c.kernel.pipe_op,
                c.kernel.switch_path,
                c.lines.cacheline_transfer,
                c.lines.atomic_hit
            ),
            (111, 222, 333, 444, 555, 66, 7)
        );
        assert_eq!(c.ipi.ipi_deliver, crate::preset::named("milan").costs.ipi.ipi_deliver);
        assert_eq!(p.mem_bw_gbs, 9.5);
    }

    #[test]
    fn an_amd_host_with_invlpgb_keeps_milans_broadcasts_and_a_new_kernel_gets_eevdf() {
        let mut g = guest();
        g.broadcast_tlbi = true;
        g.kernel_release = "6.15.2".into();
        let p = preset(&g).unwrap();
        assert!(p.has_broadcast_tlbi());
        assert_eq!(p.costs.dvm.dvm_hop, crate::preset::named("milan").costs.dvm.dvm_hop);
        assert_eq!(p.kernel.sched(), SchedKind::Eevdf);
    }

    #[test]
    fn an_arm64_host_starts_from_graviton4_and_an_intel_one_from_skylake() {
        let mut g = guest();
        g.arch = "aarch64".into();
        g.model = "0x41 0xd4f".into();
        assert_eq!(preset(&g).unwrap().tlb.l1d_entries, crate::preset::named("graviton4").tlb.l1d_entries);
        assert_eq!(preset(&g).unwrap().arch, Arch::Arm64);
        g.arch = "x86_64".into();
        g.model = "Intel(R) Xeon(R) Platinum 8375C".into();
        assert_eq!(preset(&g).unwrap().tlb.l2_entries, crate::preset::named("skylake").tlb.l2_entries);
    }

    #[test]
    fn a_profile_round_trips_and_bad_ones_are_refused_with_the_reason() {
        let dir = std::env::temp_dir().join(format!("tlbkit-host-profile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("host.json");
        std::fs::write(&f, serde_json::to_string(&guest()).unwrap()).unwrap();
        assert_eq!(read(&f).unwrap(), guest());
        let mut bad = guest();
        bad.arch = "riscv64".into();
        std::fs::write(&f, serde_json::to_string(&bad).unwrap()).unwrap();
        let e = read(&f).unwrap_err().to_string();
        assert!(e.contains("riscv64") && e.contains("tlbkit calibrate"), "{e}");
        std::fs::write(&f, "{").unwrap();
        assert!(matches!(read(&f), Err(ProfileError::Malformed { .. })));
        let missing = dir.join("none.json");
        let e = read(&missing).unwrap_err().to_string();
        assert!(e.starts_with("no calibration of this host") && e.contains("TLBKIT_HOST_PROFILE"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
