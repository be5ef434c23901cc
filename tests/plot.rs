//! `tlbkit plot` and `tlbkit report` on the results of a small sweep: the SVG
//! has its axes, ticks, legend and error bars; the report is one page that
//! loads nothing; bad names and bad lines are refused with exit 2.

use crate::common::{stderr, tlbkit};
use std::path::{Path, PathBuf};
use std::process::Output;

/// Runs `tlbkit plot RESULTS --x X --y Y MORE -o OUT`.
fn plot(results: &str, x: &str, y: &str, more: &[&str], out: &Path) -> Output {
    tlbkit(&[&["plot", results, "--x", x, "--y", y], more, &["-o", out.to_str().unwrap()]].concat())
}

fn scratch(test: &str) -> PathBuf {
    let dir =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tlbkit-plot-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs a 12-run sweep (2 policies × 2 process counts × 3 seeds) in `dir` and
/// returns its results file.
fn small_sweep(dir: &Path) -> PathBuf {
    crate::common::lat_ctx_sweep(dir, "small", 3, 200)
}

#[test]
fn plot_and_report_of_a_small_sweep() {
    let dir = scratch("small");
    let results = small_sweep(&dir);
    let r = results.to_str().unwrap();

    let svg = dir.join("switch.svg");
    let o = plot(r, "procs", "us_per_switch", &["--group", "policy"], &svg);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<?xml") && text.trim_end().ends_with("</svg>"));
    // Axis labels in words, from the workload's parameters and the metrics catalogue.
    assert!(text.contains(">processes in the ring (procs)</tspan>"), "{text}");
    assert!(text.contains(">time per context switch (µs) — mean of 3 runs</tspan>"), "{text}");
    assert!(text.contains(">arm64-noasid</tspan>") && text.contains(">arm64-freebsd-asid</tspan>"));
    assert_eq!(text.matches("class=\"line\"").count(), 0, "two points a policy: markers, no lines");
    assert!(text.contains("Spread over seeds is synthetic"), "jitter named under the chart");
    assert_eq!(text.matches("class=\"mark\"").count(), 4, "2 policies × 2 process counts");
    assert!(text.contains("class=\"errorbar\""), "seeds differ (jitter), so points have min–max bars");
    // Balanced tags: every opened group is closed (a cheap well-formedness check).
    assert_eq!(text.matches("<g ").count(), text.matches("</g>").count());
    // The temporary file is gone after the rename.
    let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(!names.iter().any(|n| n.to_string_lossy().contains(".tmp")), "{names:?}");

    // A categorical x gives a bar chart; the same input gives the same bytes.
    let bars = dir.join("bars.svg");
    for _ in 0..2 {
        let o = plot(r, "policy", "overhead_us", &["--where", "procs=4"], &bars);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let b = std::fs::read_to_string(&bars).unwrap();
    assert_eq!(b.matches("class=\"bar\"").count(), 2);

    // Size, font and logarithmic axes: a font half as large again is the
    // chart laid out on a canvas two thirds the size, drawn at the size asked.
    let styled = dir.join("styled.svg");
    let o = plot(
        r,
        "procs",
        "us_per_switch",
        &[
            "--group",
            "policy",
            "--width",
            "1200",
            "--height",
            "600",
            "--font-size",
            "18",
            "--font",
            "Helvetica, sans-serif",
            "--log-x",
            "--log-y",
        ],
        &styled,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let t = std::fs::read_to_string(&styled).unwrap();
    assert!(t.contains("width=\"1200\"") && t.contains("viewBox=\"0 0 800 "), "{t}");
    assert!(t.contains("font-family=\"Helvetica, sans-serif\""), "{t}");
    // procs 2 and 4 on a logarithmic x: the ticks of 1, 2 and 5 around them.
    assert!(t.contains("\">2</text>") && t.contains("\">5</text>") && !t.contains("\">1</text>"), "{t}");
    assert_eq!(t.matches("class=\"mark\"").count(), 4);
    let o = plot(r, "policy", "us_per_switch", &["--log-x"], &styled);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--log-x: the x axis holds categories"), "{}", stderr(&o));
    let o = plot(r, "procs", "us_per_switch", &["--font-size", "40"], &styled);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("leaves too little room"), "{}", stderr(&o));

    // Runs of two CPU counts pooled into one point: refused, with the way out.
    let two = dir.join("two-cpus.jsonl");
    let lines = std::fs::read_to_string(&results).unwrap();
    let more = lines.replace("\"cpus\":1,", "\"cpus\":2,");
    assert_ne!(more, lines, "the results name their CPUs");
    std::fs::write(&two, format!("{lines}{more}")).unwrap();
    let t2 = two.to_str().unwrap();
    let o = plot(t2, "procs", "us_per_switch", &["--group", "policy"], &styled);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("each point would pool runs of different cpus values (1, 2)")
            && stderr(&o).contains("--where cpus=VALUE"),
        "{}",
        stderr(&o)
    );
    let o = plot(t2, "procs", "us_per_switch", &["--group", "policy", "--where", "cpus=2"], &styled);
    assert!(o.status.success(), "{}", stderr(&o));

    let html = dir.join("report.html");
    let o = tlbkit(&["report", r, "-o", html.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>") && page.trim_end().ends_with("</html>"));
    // One chart per result of lat_ctx (3), each against procs, one line per policy.
    assert_eq!(page.matches("<svg ").count(), 3);
    assert!(page.contains(">lat_ctx: time per context switch</tspan>"));
    // ministat tables at each grid point (procs=2, procs=4), policies against the first.
    assert_eq!(page.matches("<pre class=\"ministat\">").count(), 2);
    // The baseline is the sweep file's first policy, named at the top.
    assert!(page.contains("x arm64-noasid") && page.contains("+ arm64-freebsd-asid"));
    assert!(page.contains("Baseline: <strong>arm64-noasid</strong>: at each grid point"));
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(said.starts_with("tlbkit report: wrote ") && said.contains("(12 runs of "), "{said}");
    assert!(page.contains("    N           Min           Max        Median           Avg        Stddev"));
    assert!(page.contains("confidence"));
    // Self-contained: nothing loaded, no scripts.
    assert!(!page.contains("<script") && !page.contains("src=") && !page.contains("href="));

    // --baseline puts the policy asked for first, in the summary and in ministat.
    let o = tlbkit(&["report", r, "--baseline", "arm64-noasid", "-o", html.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("x arm64-noasid") && page.contains("+ arm64-freebsd-asid"));
    assert!(page.contains("<td>arm64-freebsd-asid</td><td>arm64-noasid</td><td class=\"num\">2</td>"), "{page}");
    assert!(page.contains("(lower)</td><td>lower at 2</td>"), "{page}");
    let o = tlbkit(&["report", r, "--baseline", "arm64-linux", "-o", html.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--baseline arm64-linux: no run of that policy in")
            && stderr(&o).contains("the results have: arm64-freebsd-asid, arm64-noasid"),
        "{}",
        stderr(&o)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unknown_names_and_bad_lines_exit_2() {
    let dir = scratch("bad");
    let results = dir.join("r.jsonl");
    let line =
        r#"{"machine":"m","cpus":1,"policy":"p","workload":"w","seed":1,"command":"c","violations":0,"lat_us":1.5}"#;
    std::fs::write(&results, format!("{line}\n{line}\nnot json\n")).unwrap();
    let r = results.to_str().unwrap();
    let out = dir.join("o.svg");
    let o = plot(r, "cpus", "lat_us", &[], &out);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("r.jsonl:3: not a results line"), "{}", stderr(&o));

    std::fs::write(&results, format!("{line}\n")).unwrap();
    let o = plot(r, "procs", "lat_us", &[], &out);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("unknown field 'procs' for --x; the results have: machine, cpus, policy, workload, seed")
    );
    let o = plot(r, "cpus", "misses", &[], &out);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown metric 'misses' for --y; the results have: violations, lat_us"));
    assert!(!out.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn png_is_a_png_when_the_system_has_fonts() {
    let dir = scratch("png");
    let results = dir.join("r.jsonl");
    let line = |p: &str, v: f64| {
        format!(
            r#"{{"machine":"m","cpus":1,"policy":"{p}","workload":"w","seed":1,"command":"c","violations":0,"lat_us":{v}}}"#
        )
    };
    std::fs::write(&results, format!("{}\n{}\n", line("a", 1.5), line("b", 2.5))).unwrap();
    let png = dir.join("o.png");
    let o = plot(results.to_str().unwrap(), "policy", "lat_us", &[], &png);
    if stderr(&o).contains("no fonts found") {
        eprintln!("skipped: no system fonts for the PNG's text");
        return;
    }
    assert!(o.status.success(), "{}", stderr(&o));
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    let _ = std::fs::remove_dir_all(&dir);
}
