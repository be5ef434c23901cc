//! The HTML pages of `tlbkit reproduce --html` and `tlbkit report`, opened in a
//! real headless Chromium: each page renders (a screenshot of the window's size
//! whose pixels include the charts' marker colours, so the inline SVG was drawn)
//! and the browser logs no console error.
//!
//! Skipped, with a line saying so, where no Chromium is installed (set
//! `TLBKIT_CHROMIUM` to a browser binary to use one outside `PATH`). Debian:
//! `apt-get install chromium`.

use crate::common::tlbkit;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Returns the Chromium binary: `TLBKIT_CHROMIUM`, else the first of the usual
/// names on `PATH`.
fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TLBKIT_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome-headless-shell"]
        .iter()
        .flat_map(|n| std::env::split_paths(&path).map(move |d| d.join(n)))
        .find(|p| p.is_file())
}

/// Opens `page` in headless `browser` at `width`×`height`, writes a screenshot
/// to `png`, and returns the browser's log (stderr).
fn screenshot(browser: &Path, page: &Path, png: &Path, width: u32, height: u32, profile: &Path) -> String {
    let mut child = Command::new(browser)
        .args([
            "--headless",
            // Root (as in containers) needs it; a local file needs no sandbox.
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chromium");
    let start = Instant::now();
    while child.try_wait().expect("wait for chromium").is_none() {
        if start.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            panic!("chromium took over 90 s on {}", page.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("chromium's log");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Returns how many pixels of `pixmap` have colour `rgb` exactly.
fn pixels_of(pixmap: &resvg::tiny_skia::Pixmap, rgb: u32) -> usize {
    let [r, g, b] = [(rgb >> 16) as u8, (rgb >> 8) as u8, rgb as u8];
    pixmap.pixels().iter().filter(|p| p.red() == r && p.green() == g && p.blue() == b && p.alpha() == 255).count()
}

/// Checks the screenshot of `page` and the browser's log; returns the image.
fn check_page(browser: &Path, dir: &Path, page: &Path, name: &str) -> resvg::tiny_skia::Pixmap {
    let png = dir.join(format!("{name}.png"));
    let log = screenshot(browser, page, &png, 1280, 1600, &dir.join(format!("profile-{name}")));
    let bytes = std::fs::read(&png).unwrap_or_else(|e| panic!("{name}: no screenshot ({e}); chromium said:\n{log}"));
    assert!(bytes.len() > 20_000, "{name}: a {}-byte screenshot is too small to show the page", bytes.len());
    // Console messages are logged as `CONSOLE(...)` lines; a page without
    // scripts should give none, and no error of any kind.
    let console: Vec<&str> =
        log.lines().filter(|l| l.contains("CONSOLE") || l.contains("Uncaught") || l.contains("SyntaxError")).collect();
    assert!(console.is_empty(), "{name}: console messages:\n{}", console.join("\n"));
    let img = resvg::tiny_skia::Pixmap::decode_png(&bytes).expect("the screenshot is a PNG");
    assert_eq!((img.width(), img.height()), (1280, 1600), "{name}: screenshot at the window's size");
    img
}

#[test]
fn pages_render_in_headless_chromium_without_console_errors() {
    let Some(browser) = chromium() else {
        eprintln!("skipped: no chromium binary on PATH (install chromium, or set TLBKIT_CHROMIUM)");
        return;
    };
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tlbkit-browser-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();

    // reproduce --html: one quick claim is enough to draw the forest plot.
    let repro = dir.join("reproduce.html");
    let o = tlbkit(&["reproduce", "--only", "origin002-pingpong", "--html", repro.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let img = check_page(&browser, &dir, &repro, "reproduce");
    // The forest's simulated ratio (blue disc) and the origin's (vermillion diamond).
    assert!(pixels_of(&img, 0x0072B2) > 20, "the simulated ratio's mark is drawn");
    assert!(pixels_of(&img, 0xD55E00) > 10, "the origin ratio's mark is drawn");

    // report of a small sweep: two policies, two process counts, two seeds.
    let results = crate::common::lat_ctx_sweep(&dir, "s", 2, 50);
    let report = dir.join("report.html");
    let o =
        tlbkit(&["report", results.to_str().unwrap(), "--baseline", "arm64-noasid", "-o", report.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let img = check_page(&browser, &dir, &report, "report");
    // Both series' markers: the palette's first two colours.
    assert!(pixels_of(&img, 0x0072B2) > 20 && pixels_of(&img, 0xE69F00) > 20, "both policies' marks are drawn");
    if std::env::var_os("TLBKIT_KEEP_SCREENSHOTS").is_some() {
        eprintln!("screenshots kept in {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
}
