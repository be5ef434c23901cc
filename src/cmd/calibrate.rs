//! `tlbkit calibrate`: microbenchmarks on this host, the same in the model of
//! it, side by side (`tlbkit_lab::calibrate`); saves the host's profile,
//! which `--machine host` then simulates.
//!
//! The host's side is the `tlbkit-host` crate (Linux only: elsewhere the
//! command says so and exits 2). The profile is written whole to a temporary
//! file and renamed, so an interrupted run leaves the last one intact.

use super::Format;
use crate::error::CliError;
use crate::files::write_atomically;
use crate::progress::{self, Unit};
use crate::table::{Align, Table};
use clap::Args;
use std::path::PathBuf;
use tlbkit_host::{topology, Bench, Cpus, Effort};
use tlbkit_lab::calibrate::{self, Figures};
use tlbkit_sim::preset::host::{self as hostp, HostCosts, HostProfile};

/// `tlbkit calibrate`'s flags.
#[derive(Args)]
pub struct CalibrateArgs {
    /// Only these microbenchmarks (comma-separated; the ones the fitted costs
    /// come from always run, and the profile is saved only after a full run).
    #[arg(long, value_name = "NAMES")]
    only: Option<String>,
    /// The two CPUs the two-CPU microbenchmarks use, `A,B` (default: the
    /// first two online CPUs); pick two that share a last-level cache.
    #[arg(long, value_name = "A,B")]
    cpus: Option<String>,
    /// Short trials (about 1 ms each, 3 of them): a quick look, noisier.
    #[arg(long)]
    quick: bool,
    /// Where to save the profile (default: $TLBKIT_HOST_PROFILE, else
    /// ~/.cache/tlbkit/host.json).
    #[arg(long, value_name = "FILE")]
    profile: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
}

/// Returns the microbenchmarks to run: `only`'s, and those the fits need.
fn selection(only: Option<&str>) -> Result<(Vec<Bench>, bool), CliError> {
    let Some(list) = only else {
        return Ok((Bench::ALL.to_vec(), true));
    };
    let mut want = Vec::new();
    for name in list.split(',').map(str::trim) {
        let b =
            Bench::from_name(name).ok_or_else(|| tlbkit_lab::Error::UnknownMicrobench { name: name.to_string() })?;
        want.push(b);
    }
    // With the fitted costs' microbenchmarks, and the base each chosen one is judged against.
    let bases = want.iter().filter_map(|b| calibrate::base_of(b.name())).map(|(base, _)| base);
    let fitted = calibrate::FITTED.iter().map(|f| f.bench);
    want.extend(bases.chain(fitted).filter_map(Bench::from_name).collect::<Vec<_>>());
    let chosen: Vec<Bench> = Bench::ALL.iter().copied().filter(|b| want.contains(b)).collect();
    let full = chosen.len() == Bench::ALL.len();
    Ok((chosen, full))
}

/// Returns the CPUs of `--cpus A,B`, or the first two online ones.
fn cpus(flag: Option<&str>, online: &[usize]) -> Result<Cpus, CliError> {
    let Some(text) = flag else {
        if online.len() < 2 {
            return Err("calibrate needs two online CPUs for its two-CPU microbenchmarks; this host has one".into());
        }
        return Ok(Cpus { a: online[0], b: online[1] });
    };
    let list = topology::parse_cpu_list(text).map_err(|e| format!("--cpus {text}: {e}"))?;
    let [a, b] = list[..] else {
        return Err(format!("--cpus {text}: give exactly two CPUs, e.g. --cpus 0,1").into());
    };
    let cpus = Cpus { a, b };
    tlbkit_host::check_cpus(cpus).map_err(|e| format!("--cpus {text}: {e}"))?;
    Ok(cpus)
}

/// Runs `tlbkit calibrate`; returns the exit code.
pub fn calibrate(a: CalibrateArgs) -> Result<u8, CliError> {
    let topo = topology::read_host().map_err(|e| e.to_string())?;
    let (benches, full) = selection(a.only.as_deref())?;
    let cpus = cpus(a.cpus.as_deref(), &topo.online)?;
    let effort = if a.quick { Effort::Quick } else { Effort::Full };
    let Some(mhz) = topo.max_mhz else {
        return Err("this host does not say its clock (no cpufreq, no 'cpu MHz' in /proc/cpuinfo); tlbkit \
                    calibrate needs it to turn measured times into cycles"
            .into());
    };
    let profile = HostProfile {
        hostname: topo.hostname.clone(),
        model: topo.model.clone(),
        arch: topo.arch.clone(),
        kernel_release: topo.kernel.clone(),
        cpus: topo.online.len(),
        cpus_per_package: topo.cpus_per_package,
        cpus_per_l3: topo.cpus_per_l3,
        threads_per_core: topo.threads_per_core,
        numa_nodes: topo.numa_nodes,
        freq_ghz: mhz / 1000.0,
        broadcast_tlbi: topo.broadcast_tlbi,
        costs: HostCosts {
            syscall_body: 0,
            page_copy: 1,
            mem_bw_gbs: 1.0,
            fault_path: 0,
            pipe_op: 0,
            switch_path: 0,
            cacheline_transfer: 1,
            // Measured by `atomic_hit`; until then the base preset's.
            atomic_hit: None,
        },
    };
    profile.validate().map_err(|why| format!("this host cannot be simulated: {why}"))?;
    // The minute before is other work's: calibrate's own threads come after.
    let load_before = load_average();
    let bar = progress::bar(benches.len() as u64, Unit::Runs);
    let mut host = Figures::new();
    let mut widest: Option<(f64, &'static str)> = None;
    for b in &benches {
        bar.set_message(b.name());
        let m = tlbkit_host::measure(*b, cpus, effort).map_err(|e| format!("{}: {e}", b.name()))?;
        host.insert(b.name().to_string(), m.median);
        let spread = m.max / m.min;
        if spread.is_finite() && widest.is_none_or(|(w, _)| spread > w) {
            widest = Some((spread, b.name()));
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let warning = load_warning(load_before, widest);
    if let Some(w) = &warning {
        eprintln!("{w}");
    }
    let all_cpus = topo.online.len();
    let profile = calibrate::fit(profile, &host, all_cpus)?;
    let rows = calibrate::compare(&profile, &host, all_cpus)?;
    let path = a.profile.unwrap_or_else(hostp::profile_path);
    let saved = if full {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let text = serde_json::to_string_pretty(&profile).map_err(|e| e.to_string())?;
        write_atomically(&path, format!("{text}\n").as_bytes())?;
        Some(path)
    } else {
        None
    };
    let policy = calibrate::policy_for(&profile);
    let base = profile.base_name();
    if a.format == Format::Json {
        let doc = serde_json::json!({
            "host": profile,
            "cpus": [cpus.a, cpus.b],
            "base": base,
            "policy": policy,
            "effort": if a.quick { "quick" } else { "full" },
            "rows": rows,
            "profile": saved.as_ref().map(|p| p.display().to_string()),
            "summary": calibrate::summary(&rows),
            "warning": warning,
        });
        println!("{}", serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?);
        return Ok(0);
    }
    println!(
        "host: {} ({}), {} CPUs: {} package(s) of {}, {} per last-level cache, {} thread(s) per core; {:.2} GHz; \
         Linux {}",
        profile.hostname,
        profile.model,
        profile.cpus,
        topo.packages,
        profile.cpus_per_package,
        profile.cpus_per_l3,
        profile.threads_per_core,
        profile.freq_ghz,
        profile.kernel_release
    );
    println!(
        "model: `--machine host` = {base}'s figures, this host's topology, clock and fitted costs; policy {policy}; \
         two-CPU microbenchmarks on CPUs {} and {}",
        cpus.a, cpus.b
    );
    use Align::{Left, Right};
    let mut t = Table::new(&[Left, Left, Right, Right, Right, Left, Left]);
    t.row(["microbenchmark", "unit", "host", "model", "model/host", "verdict", "fitted"]);
    for r in &rows {
        let fitted = r.fitted.clone().unwrap_or_else(|| "-".into());
        let [h, m] = [r.host, r.model].map(|x| if x >= 100.0 { format!("{x:.0}") } else { format!("{x:.2}") });
        t.row([&r.bench, &r.unit, &h, &m, &format!("{:.2}", r.ratio), &r.verdict, &fitted]);
        if let Some(n) = &r.note {
            t.note(format!("{}: {} ({n})", r.bench, r.verdict));
        }
    }
    print!("{}", t.render());
    println!("{}", calibrate::summary(&rows));
    // Not measured this time (`--only` left it out): the base preset's.
    let atomic = profile.costs.atomic_hit.map_or_else(|| "the base's".into(), |c| c.to_string());
    println!(
        "fitted costs (cycles at {:.2} GHz): syscall_body {}, page_copy {}, fault_path {}, pipe_op {}, switch_path \
         {}, cacheline_transfer {}, atomic_hit {atomic}; mem_bw_gbs {:.1}",
        profile.freq_ghz,
        profile.costs.syscall_body,
        profile.costs.page_copy,
        profile.costs.fault_path,
        profile.costs.pipe_op,
        profile.costs.switch_path,
        profile.costs.cacheline_transfer,
        profile.costs.mem_bw_gbs
    );
    match saved {
        Some(p) => println!("saved: {} (`--machine host` simulates it)", p.display()),
        None => println!("not saved: --only ran part of the microbenchmarks"),
    }
    Ok(0)
}

/// The one-minute load average above which other work is taken to share the
/// host (a quiet host reads well under it).
const LOADED: f64 = 0.5;

/// A microbenchmark's slowest trial over its fastest above which its trials
/// are taken to have been disturbed.
const SPREAD: f64 = 1.5;

/// Returns the host's one-minute load average (`/proc/loadavg`), where it
/// has one.
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

/// Returns the warning to print when the host looked loaded: a load average
/// of `LOADED` or more in the minute before calibrating, or a
/// microbenchmark's trials spread by more than `SPREAD` (`widest`: the
/// widest spread and its microbenchmark).
fn load_warning(load: Option<f64>, widest: Option<(f64, &str)>) -> Option<String> {
    let mut why = Vec::new();
    if let Some(l) = load.filter(|&l| l >= LOADED) {
        why.push(format!("a load average of {l:.2} over the minute before calibrating"));
    }
    if let Some((w, name)) = widest.filter(|&(w, _)| w > SPREAD) {
        why.push(format!("{name}'s slowest trial took {w:.2} times its fastest"));
    }
    (!why.is_empty()).then(|| {
        format!(
            "Warning: the host looks loaded ({}): other work shares its CPUs and caches, so the figures and the \
             costs fitted to them are upper bounds; calibrate on a quiet host",
            why.join("; ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::load_warning;

    #[test]
    fn a_loaded_host_is_named_with_what_showed_it() {
        assert_eq!(load_warning(Some(0.1), Some((1.1, "mmap"))), None);
        assert_eq!(load_warning(None, None), None);
        let w = load_warning(Some(3.5), Some((2.0, "munmap"))).unwrap();
        assert!(w.contains("load average of 3.50") && w.contains("munmap's slowest trial took 2.00 times"), "{w}");
        let w = load_warning(Some(0.2), Some((1.8, "shootdown"))).unwrap();
        assert!(!w.contains("load average") && w.contains("shootdown"), "{w}");
    }
}
