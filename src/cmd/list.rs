//! `tlbkit list [WHAT]`: the overview of every name, or one kind in detail: each
//! workload's parameters (default, range, meaning), each machine's cores and
//! costs, each metric's meaning and unit.

use super::Format;
use crate::error::CliError;
use crate::table::{Align, Table};
use clap::{Args, ValueEnum};
use serde_json::{json, Value};
use tlbkit_registry::POLICIES;
use tlbkit_sim::catalog;
use tlbkit_sim::metrics::METRICS;
use tlbkit_sim::oracle::Property;
use tlbkit_sim::preset;
use tlbkit_sim::run::all_switches;
use tlbkit_sim::workload::WORKLOADS;

/// `tlbkit list`'s flags.
#[derive(Args)]
pub struct ListArgs {
    /// Describe one kind in detail.
    #[arg(value_enum)]
    what: Option<What>,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
}

/// What `tlbkit list` describes in detail.
#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum What {
    /// Machine presets: cores, ASID widths, NUMA, TLBs, costs in cycles, and the
    /// machine and kernel parameters every run accepts.
    Machines,
    /// Policies and the architecture each runs on.
    Policies,
    /// Workloads: their results and every parameter with default, range and meaning.
    Workloads,
    /// Every figure a run reports: results and metrics, with meaning and unit.
    Metrics,
    /// The properties the oracle and the checker judge.
    Properties,
    /// The bug zoo: real bugs re-introduced, for `tlbkit check --policy zoo/<id>`.
    Zoo,
}

/// Runs `tlbkit list`; returns the exit code.
pub fn list(a: ListArgs) -> Result<u8, CliError> {
    let ListArgs { what, format } = a;
    let Some(what) = what else { return overview(format) };
    let (doc, text) = match what {
        What::Machines => machines(),
        What::Policies => policies(),
        What::Workloads => workloads(),
        What::Metrics => metrics(),
        What::Properties => named(properties()),
        What::Zoo => named(zoo()),
    };
    if format == Format::Json {
        println!("{}", serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?);
    } else {
        print!("{text}");
    }
    Ok(0)
}

/// How `tlbkit list` names the C policies: any kernel file, named by its path.
const C_POLICY_NAME: &str = "c:FILE[+FILE...]";
/// How `tlbkit list` names an x86 C policy (its file `tlb.c`, or `+arch=x86`).
const C_X86_POLICY_NAME: &str = "c:tlb.c[+invlpgb=on]";

fn properties() -> Vec<(String, String)> {
    Property::ALL.iter().map(|p| (p.name().to_string(), p.description().to_string())).collect()
}

fn zoo() -> Vec<(String, String)> {
    tlbkit_policy::zoo::ZOO
        .iter()
        .map(|e| (format!("zoo/{}", e.id), format!("{} (on {}; {})", e.summary, e.base, e.source)))
        .collect()
}

/// The findings catalogue: hazards the checker finds in code still upstream.
fn findings() -> Vec<(String, String)> {
    tlbkit_policy::findings::FINDINGS
        .iter()
        .map(|f| (f.id.to_string(), format!("{} (in {}; found by `{}`)", f.summary, f.policy, f.command())))
        .collect()
}

/// Returns a list of names and descriptions as JSON and as a table.
fn named(rows: Vec<(String, String)>) -> (Value, String) {
    let doc = rows.iter().map(|(n, d)| json!({"name": n, "description": d})).collect();
    let mut t = Table::new(&[Align::Left, Align::Left]);
    for (n, d) in &rows {
        t.row([n, d]);
    }
    (doc, t.render())
}

/// The overview every `tlbkit list` without a kind prints (and its JSON).
fn overview(format: Format) -> Result<u8, CliError> {
    let mut machines: Vec<(String, String)> =
        preset::all().into_iter().map(|p| (p.name.to_string(), p.description.to_string())).collect();
    machines.push((preset::HOST.into(), HOST.into()));
    let policies: Vec<(String, String)> =
        POLICIES.iter().map(|p| (p.name.to_string(), p.description.to_string())).collect();
    let mut policy_rows = policies.clone();
    policy_rows.push((C_POLICY_NAME.into(), tlbkit_registry::C_POLICY.description.into()));
    policy_rows.push((C_X86_POLICY_NAME.into(), tlbkit_registry::C_POLICY_X86.description.into()));
    let workloads: Vec<(String, String)> =
        WORKLOADS.iter().map(|w| (w.name.to_string(), w.description.to_string())).collect();
    let (properties, zoo, findings) = (properties(), zoo(), findings());
    if format == Format::Json {
        let j =
            |v: &[(String, String)]| -> Value { v.iter().map(|(n, d)| json!({"name": n, "description": d})).collect() };
        let doc = json!({
            "machines": j(&machines),
            "policies": j(&policies),
            "workloads": j(&workloads),
            "properties": j(&properties),
            "zoo": j(&zoo),
            "findings": j(&findings),
        });
        println!("{}", serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?);
        return Ok(0);
    }
    let all = [
        ("machines", &machines),
        ("policies", &policy_rows),
        ("bug zoo (tlbkit check --policy zoo/<id>)", &zoo),
        ("findings (hazards in code still upstream; report and tokens in docs/findings)", &findings),
        ("workloads", &workloads),
        ("properties", &properties),
    ];
    // One table, so that every section's descriptions start in the same column.
    let mut t = Table::new(&[Align::Left, Align::Left]).indented("  ");
    for (title, rows) in all {
        t.text(format!("{title}:"));
        for (n, d) in rows {
            t.row([n, d]);
        }
    }
    print!("{}", t.render());
    println!("details: tlbkit list machines|policies|workloads|metrics|properties|zoo [--format json]");
    Ok(0)
}

/// How `tlbkit list` describes `--machine host`.
const HOST: &str = "this machine, as `tlbkit calibrate` measured it (run that first)";

fn machines() -> (Value, String) {
    let presets = preset::all();
    let mut text = String::new();
    for p in &presets {
        let sockets = p.real_cores.div_ceil(p.cores_per_socket);
        let costs = serde_json::to_value(p.costs).unwrap_or_default();
        let tlb = serde_json::to_value(p.tlb).unwrap_or_default();
        text.push_str(&format!("{}: {}\n", p.name, p.description));
        let widths: Vec<String> = p.asid_bits.iter().map(|b| b.to_string()).collect();
        let numa: Vec<String> = p.numa.iter().map(|n| n.to_string()).collect();
        text.push_str(&format!(
            "  {} at {} GHz; {} CPUs ({} socket{} of {}; --cpus 1 to {}, more with --set sockets=N){}; asid_bits {}; \
             numa {}; kernel {}{}\n",
            catalog::arch_name(p.arch),
            p.freq_ghz,
            p.real_cores,
            sockets,
            if sockets == 1 { "" } else { "s" },
            p.cores_per_socket,
            p.real_cores,
            if p.threads.per_core > 1 {
                format!(
                    ", {} threads per core sharing it at {} each (--set smt=off: a core each)",
                    p.threads.per_core, p.threads.share
                )
            } else {
                String::new()
            },
            widths.join(" or "),
            numa.join(" or "),
            p.kernel.name(),
            if p.meltdown { "; Meltdown-affected (PTI on under Linux v4.15+)" } else { "" }
        ));
        text.push_str(&format!("  TLB: {}\n", flat(&tlb)));
        text.push_str(&format!("  costs in cycles (sources: {}): {}\n", p.cost_sources, flat(&costs)));
    }
    text.push_str(&format!(
        "{}: {HOST}\n  the nearest preset's figures (milan for AMD x86, skylake for other x86, graviton4 for arm64) \
         with this host's topology, clock, kernel and fitted costs, from the profile tlbkit calibrate saves \
         ($TLBKIT_HOST_PROFILE, else ~/.cache/tlbkit/host.json)\n",
        preset::HOST
    ));
    text.push_str(
        "your own machine: --machine PATH.toml, a file of these fields by the names --format json gives them \
         (base = \"milan\" starts from a preset and sets only what differs; every field's source: --format json)\n",
    );
    text.push_str("machine and kernel parameters (--set KEY=VALUE, with every workload):\n");
    let mut t = Table::new(&[Align::Left, Align::Left]).indented("  ");
    for s in all_switches() {
        t.row([s.key, s.doc]);
    }
    text.push_str(&t.render());
    (catalog::machines(), text)
}

/// Returns `key=value key=value ...` for a JSON object of numbers.
fn flat(v: &Value) -> String {
    v.as_object().map(|o| o.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")).unwrap_or_default()
}

fn policies() -> (Value, String) {
    let doc = catalog::policies();
    let mut t = Table::new(&[Align::Left, Align::Left, Align::Left, Align::Left, Align::Left]);
    t.row(["policy", "arch", "kernel", "era", "description"]);
    for p in POLICIES {
        let kernel = p.version.map(catalog::release_name).unwrap_or_else(|| "machine's".into());
        t.row([p.name, catalog::arch_name(p.arch), kernel.as_str(), p.era.name().as_str(), p.description]);
    }
    for (name, c) in [(C_POLICY_NAME, &tlbkit_registry::C_POLICY), (C_X86_POLICY_NAME, &tlbkit_registry::C_POLICY_X86)]
    {
        t.row([name, catalog::arch_name(c.arch), "machine's", c.era.name().as_str(), c.description]);
    }
    (doc, t.render())
}

fn workloads() -> (Value, String) {
    let mut text = String::new();
    for w in WORKLOADS {
        let texts = w.text_params;
        text.push_str(&format!("{}: {}\n", w.name, w.description));
        text.push_str(&format!("  results: {} (the first is the headline)\n", w.results.join(", ")));
        let mut t = Table::new(&[Align::Left, Align::Right, Align::Left, Align::Left]).indented("  ");
        t.row(["parameter", "default", "range", "meaning"]);
        for p in w.params {
            t.row([p.key.to_string(), num(p.default), format!("{} to {}", num(p.min), num(p.max)), p.doc.to_string()]);
        }
        for p in texts {
            t.row([p.key, "required", "a path", p.doc]);
        }
        text.push_str(&t.render());
    }
    text.push_str("every workload also takes the machine and kernel parameters: tlbkit list machines\n");
    (catalog::workloads(), text)
}

/// Returns a parameter value as it is typed: whole numbers without a point.
fn num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

fn metrics() -> (Value, String) {
    let doc = catalog::metrics();
    let mut t = Table::new(&[Align::Left, Align::Left, Align::Left, Align::Left]);
    t.row(["name", "kind", "unit", "meaning"]);
    for m in METRICS {
        t.row([m.name, if m.result { "result" } else { "metric" }, m.unit, m.meaning]);
    }
    (doc, t.render())
}
