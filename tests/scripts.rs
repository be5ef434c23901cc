//! `scripts/test`, the README's test command, as a user without the right
//! Python meets it: it fails in seconds, before the cargo phase, with one line
//! saying what to install; and on a system Python marked externally managed
//! (PEP 668, Debian's and Ubuntu's), it installs into its own environment
//! under `target/` and never into the interpreter.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn script(python: &str, env_dir: Option<&Path>, args: &[&str]) -> std::process::Output {
    let mut c = Command::new("bash");
    c.arg(root().join("scripts/test")).args(args).env("PYTHON", python).current_dir(root());
    if let Some(d) = env_dir {
        c.env("TLBKIT_PYENV", d);
    }
    c.output().expect("bash runs")
}

#[test]
fn without_python_it_fails_before_the_cargo_phase_saying_what_to_install() {
    let started = std::time::Instant::now();
    let out = script("/nonexistent/python3", None, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("scripts/test: no /nonexistent/python3: install Python 3.9"), "{err}");
    assert!(err.contains("python3-venv") && err.contains("PYTHON="), "{err}");
    // Nothing of cargo's ran: it would have printed to stdout or taken minutes.
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(started.elapsed().as_secs() < 30);
}

/// Returns a system interpreter marked externally managed, if this machine has
/// one (`/usr/bin/python3` on Debian and Ubuntu).
fn externally_managed_python() -> Option<PathBuf> {
    let py = PathBuf::from("/usr/bin/python3");
    let out = Command::new(&py)
        .args([
            "-c",
            "import os, sysconfig; print(os.path.exists(os.path.join(sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED')))",
        ])
        .output()
        .ok()?;
    (String::from_utf8_lossy(&out.stdout).trim() == "True").then_some(py)
}

/// Whether a `uv` on `PATH` runs (`scripts/test` uses it when it does).
fn uv_on_path() -> bool {
    Command::new("uv").arg("--version").output().is_ok_and(|o| o.status.success())
}

#[test]
fn on_an_externally_managed_python_it_installs_into_its_own_environment() {
    let Some(py) = externally_managed_python() else {
        eprintln!("no system Python marked externally managed here: nothing to show");
        return;
    };
    let python = py.to_str().expect("a UTF-8 path");
    // The interpreter itself refuses pip installs: the situation of the test.
    let refused = Command::new(&py)
        .args(["-m", "pip", "install", "--dry-run", "--no-index", "pytest"])
        .output()
        .expect("the interpreter runs");
    let said = String::from_utf8_lossy(&refused.stderr);
    if !said.contains("externally-managed-environment") {
        // No pip in the system interpreter at all (`python3-pip` not installed):
        // it cannot install into itself either way; the set-up below still runs.
        assert!(!refused.status.success(), "{said}");
    }
    let env_dir = root().join("target/pyenv-externally-managed");
    let out = script(python, Some(&env_dir), &["--python-env"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "scripts/test --python-env with {python} failed:\n{err}");
    // Its environment has the test runner; the interpreter's site-packages
    // are where they were (pip would have refused to change them anyway).
    let venv_py = env_dir.join("bin/python");
    let ok = Command::new(&venv_py).args(["-c", "import pytest, pandas, maturin"]).status().expect("venv python");
    assert!(ok.success(), "the environment lacks the test dependencies");
    let prefix = Command::new(&venv_py).args(["-c", "import sys; print(sys.prefix)"]).output().expect("venv python");
    assert_eq!(String::from_utf8_lossy(&prefix.stdout).trim(), env_dir.to_str().unwrap());
    // Without uv on PATH, pip put uv into the environment and uv installed
    // the rest (its message names the failure otherwise).
    if !uv_on_path() && std::env::var_os("TLBKIT_NO_UV").is_none() {
        assert!(env_dir.join("bin/uv").exists(), "no uv in the environment:\n{err}");
    }
}

#[test]
fn where_uv_is_installed_it_makes_the_environment_with_pip_in_it() {
    if !uv_on_path() {
        eprintln!("no uv on PATH: scripts/test uses venv and pip, which the test above covers");
        return;
    }
    let env_dir = root().join("target/pyenv-uv");
    let _ = std::fs::remove_dir_all(&env_dir);
    let out = script("python3", Some(&env_dir), &["--python-env"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let venv_py = env_dir.join("bin/python");
    // `--seed`: pip is there for a later run on a machine without uv.
    let ok = Command::new(&venv_py).args(["-c", "import pytest, pandas, maturin, pip"]).status().expect("venv python");
    assert!(ok.success(), "the environment uv made lacks the test dependencies or pip");
    let cfg = std::fs::read_to_string(env_dir.join("pyvenv.cfg")).expect("a pyvenv.cfg");
    assert!(cfg.contains("uv ="), "not made by uv:\n{cfg}");
}

/// Each package of a `cargo tree` listing with the features it is built with.
fn features(args: &[&str]) -> std::collections::BTreeMap<String, String> {
    let out = Command::new(env!("CARGO"))
        .args(["tree", "--offline", "--prefix", "none", "--format", "{p}|{f}"])
        .args(args)
        .current_dir(root())
        .output()
        .expect("cargo runs");
    assert!(out.status.success(), "cargo tree {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('|'))
        .map(|(p, f)| (p.split(" (").next().unwrap_or(p).to_string(), f.trim_end_matches(" (*)").to_string()))
        .collect()
}

/// Each package of `wheel` that `build` has too, with other features: a line
/// saying so, `build` named `name`.
fn differing(
    build: &std::collections::BTreeMap<String, String>,
    wheel: &std::collections::BTreeMap<String, String>,
    name: &str,
) -> Vec<String> {
    wheel
        .iter()
        .filter_map(|(p, f)| {
            let b = build.get(p)?;
            (b != f).then(|| format!("{p}: {name} build has [{b}], the wheel's [{f}]"))
        })
        .collect()
}

#[test]
fn the_python_tests_wheel_is_built_with_the_features_of_the_rust_tests_build() {
    // `scripts/test` builds the wheel with `--profile dev --features
    // test-build` so that cargo reuses every crate `cargo test --workspace`
    // built: a crate both builds use, built with other features, would be
    // compiled again, with everything above it (minutes).
    // Features are resolved over the whole workspace (the binding's own
    // requests included), but the tests' build compiles only what the other
    // members need: pyo3 and the binding are the wheel's alone.
    let tests = features(&["--workspace", "--edges", "normal,build,dev"]);
    let built = features(&["--workspace", "--exclude", "tlbkit-python", "--edges", "normal,build,dev"]);
    let wheel =
        features(&["-p", "tlbkit-python", "--features", "test-build,extension-module", "--edges", "normal,build"]);
    let wheel = wheel.into_iter().filter(|(p, _)| built.contains_key(p)).collect();
    let differ = differing(&tests, &wheel, "the tests'");
    assert!(
        differ.is_empty(),
        "add what the tests' build turns on to python/Cargo.toml's `test-build` feature:\n{}",
        differ.join("\n")
    );
    // The list is not vacuous: the crates the wheel binds are in both.
    assert!(
        wheel.keys().any(|p| p.starts_with("tlbkit-check ")) && tests.keys().any(|p| p.starts_with("tlbkit-check "))
    );
}

#[test]
fn the_wheel_reuses_the_command_lines_release_build() {
    // `pip install ./python` after `cargo build --release` (the README's
    // order) compiles pyo3 and the binding only when every crate both use
    // has the same features in both: a crate built with other features is
    // compiled again, with everything above it. pyo3's macros turn on
    // `syn` features the command line's derives do not; the root package's
    // build dependency on `syn` turns them on there too.
    let bin = features(&["-p", "tlbkit", "--edges", "normal,build"]);
    let wheel = features(&["-p", "tlbkit-python", "--features", "extension-module", "--edges", "normal,build"]);
    let differ = differing(&bin, &wheel, "the command line's");
    assert!(
        differ.is_empty(),
        "turn on what the wheel's build does in the root Cargo.toml's [build-dependencies] (or its dependencies):\n{}",
        differ.join("\n")
    );
    assert!(wheel.keys().any(|p| p.starts_with("tlbkit-sim ")) && bin.keys().any(|p| p.starts_with("tlbkit-sim ")));
}
