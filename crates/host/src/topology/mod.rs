//! The host's shape as Linux describes it under `/sys` and in `/proc/cpuinfo`:
//! which CPUs are online, how they group into packages, last-level caches,
//! cores and NUMA nodes, and what the processor is.
//!
//! [`read`] is pure: it takes the root of a `/sys`-like tree, the text of a
//! `/proc/cpuinfo` and a [`Uname`], so the tests give it fixture trees of
//! machines other than the one they run on. [`read_host`] gives it the real
//! ones. The files read (Documentation/ABI/stable/sysfs-devices-system-cpu,
//! Documentation/ABI/testing/sysfs-devices-system-cpu):
//! - `devices/system/cpu/online`: the online CPUs (required);
//! - `cpuN/topology/physical_package_id`: the package (socket) of each
//!   online CPU; missing, or -1 (arm64 without firmware tables), is one
//!   package;
//! - `cpuN/topology/core_cpus_list` (since Linux 5.7), else the older
//!   `thread_siblings_list`: the hardware threads of a core;
//! - `cpuN/cache/indexM/{level,type,shared_cpu_list}`: the caches;
//! - `cpuN/cpufreq/cpuinfo_max_freq`: the highest clock, in kHz;
//! - `devices/system/node/nodeK`: the NUMA nodes.
//!
//! Per-CPU facts are read from the first online CPU (CPU 0 on nearly every
//! machine; arm64 can take CPU 0 offline): on a hybrid part whose cores
//! differ, they are that CPU's.

mod cpu_list;
mod cpuinfo;
mod uname;

pub use cpu_list::{format_cpu_list, parse_cpu_list, CpuListError, MAX_CPU};
pub use uname::Uname;

use crate::Error;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The host's topology and identity.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Topology {
    /// The online CPUs, ascending.
    pub online: Vec<usize>,
    /// Packages (sockets) with an online CPU.
    pub packages: usize,
    /// Online CPUs of the package that has the most.
    pub cpus_per_package: usize,
    /// CPUs sharing the first online CPU's last-level cache (the highest
    /// `level` among its Unified and Data caches); `cpus_per_package` when
    /// `/sys` lists no caches (many VMs).
    pub cpus_per_l3: usize,
    /// Hardware threads of the first online CPU's core (1 without SMT or
    /// when `/sys` does not say).
    pub threads_per_core: usize,
    /// NUMA nodes (1 when `/sys` lists none: a kernel without NUMA).
    pub numa_nodes: usize,
    /// `/proc/cpuinfo`'s `model name`; on arm64 `implementer 0x41 part
    /// 0xd0c` from its MIDR fields; else `unknown`.
    pub model: String,
    /// The highest clock in MHz: cpufreq's `cpuinfo_max_freq`, else the first
    /// CPU's `cpu MHz` in `/proc/cpuinfo` (the current clock, on x86); `None`
    /// when neither says (arm64 VMs).
    pub max_mhz: Option<f64>,
    /// `uname -m`: `x86_64`, `aarch64`.
    pub arch: String,
    /// Whether the CPUs broadcast TLB invalidations: every arm64 CPU
    /// (`TLBI ...IS`), and an x86 CPU whose `/proc/cpuinfo` flags name
    /// `invlpgb`; no other.
    pub broadcast_tlbi: bool,
    /// `uname -r`.
    pub kernel: String,
    /// `uname -n`.
    pub hostname: String,
}

/// Reads the topology from the `/sys`-like tree at `sys`, the text of a
/// `/proc/cpuinfo`, and `uname`.
///
/// # Errors
/// [`Error::Io`] if `devices/system/cpu/online` or another file that is
/// there cannot be read; [`Error::Parse`] if a file read does not parse.
pub fn read(sys: &Path, cpuinfo: &str, uname: Uname) -> Result<Topology, Error> {
    let cpu_dir = sys.join("devices/system/cpu");
    let online_path = cpu_dir.join("online");
    let online_text = read_text(&online_path)?.ok_or_else(|| Error::Io {
        what: format!("reading {}", online_path.display()),
        source: std::io::ErrorKind::NotFound.into(),
    })?;
    let mut online = cpu_list(&online_path, &online_text)?;
    online.sort_unstable();
    let first = cpu_dir.join(format!("cpu{}", online[0]));

    let mut per_package: BTreeMap<i64, usize> = BTreeMap::new();
    for cpu in &online {
        let path = cpu_dir.join(format!("cpu{cpu}/topology/physical_package_id"));
        let id = match read_text(&path)? {
            Some(text) => parse::<i64>(&path, &text)?,
            None => -1,
        };
        *per_package.entry(id).or_default() += 1;
    }
    let cpus_per_package = per_package.values().copied().max().unwrap_or(1);

    let mut threads_per_core = 1;
    for name in ["core_cpus_list", "thread_siblings_list"] {
        let path = first.join("topology").join(name);
        if let Some(text) = read_text(&path)? {
            threads_per_core = cpu_list(&path, &text)?.len();
            break;
        }
    }

    let max_khz_path = first.join("cpufreq/cpuinfo_max_freq");
    let max_mhz = match read_text(&max_khz_path)? {
        Some(text) => Some(parse::<u64>(&max_khz_path, &text)? as f64 / 1000.0),
        None => cpuinfo::mhz(cpuinfo),
    };

    Ok(Topology {
        packages: per_package.len(),
        cpus_per_package,
        cpus_per_l3: last_level_sharing(&first)?.unwrap_or(cpus_per_package),
        threads_per_core,
        numa_nodes: numa_nodes(&sys.join("devices/system/node"))?,
        model: cpuinfo::model(cpuinfo),
        max_mhz,
        broadcast_tlbi: match uname.machine.as_str() {
            "aarch64" | "arm64" => true,
            "x86_64" => cpuinfo::has_flag(cpuinfo, "invlpgb"),
            _ => false,
        },
        arch: uname.machine,
        kernel: uname.release,
        hostname: uname.nodename,
        online,
    })
}

/// Reads this host's topology from `/sys`, `/proc/cpuinfo` and `uname(2)`.
///
/// # Errors
/// As [`read`]; [`Error::Io`] if `/proc/cpuinfo` or `uname` fails;
/// [`Error::NotLinux`] on other systems.
pub fn read_host() -> Result<Topology, Error> {
    if !cfg!(target_os = "linux") {
        return Err(Error::NotLinux { os: std::env::consts::OS });
    }
    let uname = Uname::host()?;
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo")
        .map_err(|source| Error::Io { what: "reading /proc/cpuinfo".into(), source })?;
    read(Path::new("/sys"), &cpuinfo, uname)
}

/// Returns how many CPUs share the last-level cache under `cpu/cache`, or
/// `None` if it lists no Unified or Data cache.
fn last_level_sharing(cpu: &Path) -> Result<Option<usize>, Error> {
    let Ok(entries) = std::fs::read_dir(cpu.join("cache")) else {
        return Ok(None);
    };
    let mut last: Option<(u32, usize)> = None;
    for entry in entries.flatten() {
        let dir = entry.path();
        if !entry.file_name().to_str().is_some_and(|n| n.starts_with("index")) {
            continue;
        }
        let (Some(kind), Some(level)) = (read_text(&dir.join("type"))?, read_text(&dir.join("level"))?) else {
            continue;
        };
        if !matches!(kind.trim(), "Unified" | "Data") {
            continue;
        }
        let level = parse::<u32>(&dir.join("level"), &level)?;
        if last.is_some_and(|(highest, _)| highest >= level) {
            continue;
        }
        let shared_path = dir.join("shared_cpu_list");
        let Some(shared) = read_text(&shared_path)? else {
            continue;
        };
        last = Some((level, cpu_list(&shared_path, &shared)?.len()));
    }
    Ok(last.map(|(_, cpus)| cpus))
}

/// Returns the number of `nodeK` directories in `node`, or 1 if none.
fn numa_nodes(node: &Path) -> Result<usize, Error> {
    let Ok(entries) = std::fs::read_dir(node) else {
        return Ok(1);
    };
    let nodes = entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_prefix("node"))
                .is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
        })
        .count();
    Ok(nodes.max(1))
}

/// Returns the text of `path`, or `None` if it does not exist.
fn read_text(path: &Path) -> Result<Option<String>, Error> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(Error::Io { what: format!("reading {}", path.display()), source }),
    }
}

/// Parses the CPU list in the file `path`.
fn cpu_list(path: &Path, text: &str) -> Result<Vec<usize>, Error> {
    parse_cpu_list(text).map_err(|e| Error::Parse { path: path.display().to_string(), what: e.to_string() })
}

/// Parses the one number in the file `path`.
fn parse<T: std::str::FromStr>(path: &Path, text: &str) -> Result<T, Error> {
    text.trim().parse().map_err(|_| Error::Parse {
        path: path.display().to_string(),
        what: format!("'{}' is not a number", text.trim()),
    })
}
